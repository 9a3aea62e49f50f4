/* aws-chunked decoding (see chunked.h). */
#define _GNU_SOURCE
#include "storage/chunked.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "storage/sigv4.h"

int chunked_init(struct chunked *c, bool signed_chunks, bool trailer, const unsigned char key[32],
                 const char *amz_date, const char *scope, const char *seed, struct husk_err *err) {
  memset(c, 0, sizeof *c);
  c->signed_chunks = signed_chunks;
  c->trailer = trailer;
  if (key)
    memcpy(c->key, key, 32);
  snprintf(c->amz_date, sizeof c->amz_date, "%s", amz_date ? amz_date : "");
  snprintf(c->scope, sizeof c->scope, "%s", scope ? scope : "");
  snprintf(c->prev_sig, sizeof c->prev_sig, "%s", seed ? seed : "");
  c->md = EVP_MD_CTX_new();
  if (!c->md || EVP_DigestInit_ex(c->md, EVP_sha256(), NULL) != 1)
    return husk_fail(err, ENOMEM, "cannot start SHA-256");
  c->st = CH_SIZE;
  return 0;
}

void chunked_free(struct chunked *c) {
  EVP_MD_CTX_free(c->md);
  c->md = NULL;
  OPENSSL_cleanse(c->key, sizeof c->key);
}

static int bad(struct husk_err *err, const char *what) {
  return husk_fail(err, EBADMSG, "malformed aws-chunked body: %s", what);
}

/* "hex;chunk-signature=sig" or "hex" */
static int parse_size_line(struct chunked *c, struct husk_err *err) {
  char *l = c->line;
  char *semi = strchr(l, ';');
  if (semi)
    *semi = 0;
  size_t hl = strlen(l);
  if (hl == 0 || hl > 15 || strspn(l, "0123456789abcdefABCDEF") != hl)
    return bad(err, "bad chunk size");
  c->left = strtoull(l, NULL, 16);
  c->chunk_sig[0] = 0;
  if (c->signed_chunks) {
    if (!semi || strncmp(semi + 1, "chunk-signature=", 16) || strlen(semi + 17) != 64)
      return bad(err, "missing chunk-signature");
    memcpy(c->chunk_sig, semi + 17, 65);
  } else if (semi) {
    return bad(err, "unexpected chunk extension");
  }
  if (EVP_DigestInit_ex(c->md, EVP_sha256(), NULL) != 1)
    return husk_fail(err, ENOMEM, "SHA-256");
  return 0;
}

static int check_chunk_sig(struct chunked *c, struct husk_err *err) {
  if (!c->signed_chunks)
    return 0;
  unsigned char md[32];
  unsigned int l = 0;
  if (EVP_DigestFinal_ex(c->md, md, &l) != 1)
    return husk_fail(err, ENOMEM, "SHA-256");
  char hex[65], sig[65];
  sigv4_hex(md, 32, hex);
  sigv4_chunk_signature(c->key, c->amz_date, c->scope, c->prev_sig, hex, sig);
  if (CRYPTO_memcmp(sig, c->chunk_sig, 64) != 0)
    return husk_fail(err, EACCES, "a chunk signature does not match");
  memcpy(c->prev_sig, sig, 65);
  return 0;
}

static int end_trailers(struct chunked *c, struct husk_err *err) {
  if (c->signed_chunks && c->trailer) {
    if (!c->trailer_sig[0])
      return husk_fail(err, EACCES, "the trailer signature is missing");
    char lines[CHUNKED_TRAILERS_MAX * 258 + 1] = "";
    size_t o = 0;
    for (int i = 0; i < c->ntrailers; i++)
      o += (size_t)snprintf(lines + o, sizeof lines - o, "%s\n", c->trailers[i]);
    char sig[65];
    sigv4_trailer_signature(c->key, c->amz_date, c->scope, c->prev_sig, lines, sig);
    if (CRYPTO_memcmp(sig, c->trailer_sig, 64) != 0)
      return husk_fail(err, EACCES, "the trailer signature does not match");
  }
  c->st = CH_DONE;
  return 0;
}

static int trailer_line(struct chunked *c, struct husk_err *err) {
  char *l = c->line;
  if (!*l)
    return end_trailers(c, err);
  if (!c->trailer)
    return bad(err, "trailer without x-amz-trailer");
  char *colon = strchr(l, ':');
  if (!colon || colon == l)
    return bad(err, "bad trailer line");
  for (char *s = l; s < colon; s++)
    if (*s >= 'A' && *s <= 'Z')
      *s = (char)(*s - 'A' + 'a');
  if (!strncmp(l, "x-amz-trailer-signature:", 24)) {
    if (strlen(l + 24) != 64)
      return bad(err, "bad trailer signature");
    memcpy(c->trailer_sig, l + 24, 65);
    return 0;
  }
  if (c->ntrailers >= CHUNKED_TRAILERS_MAX || strlen(l) >= sizeof c->trailers[0])
    return bad(err, "too many or too long trailers");
  /* Canonical form: no blanks around the value. */
  char *v = colon + 1;
  while (*v == ' ')
    v++;
  size_t vl = strlen(v);
  while (vl && v[vl - 1] == ' ')
    v[--vl] = 0;
  snprintf(c->trailers[c->ntrailers++], sizeof c->trailers[0], "%.*s:%s", (int)(colon - l), l, v);
  return 0;
}

int chunked_feed(struct chunked *c, const char *buf, size_t n,
                 int (*emit)(void *ctx, const char *buf, size_t n, struct husk_err *err), void *ctx,
                 struct husk_err *err) {
  size_t i = 0;
  while (i < n) {
    switch (c->st) {
    case CH_SIZE:
    case CH_TRAILER: {
      char ch = buf[i++];
      if (ch == '\n') {
        if (c->line_len == 0 || c->line[c->line_len - 1] != '\r') {
          /* Tolerate bare LF only as no tolerance: the format is CRLF. */
          return bad(err, "lines must end with CRLF");
        }
        c->line[--c->line_len] = 0;
        c->line_len = 0;
        if (c->st == CH_TRAILER) {
          if (trailer_line(c, err) < 0)
            return -1;
          break;
        }
        if (parse_size_line(c, err) < 0)
          return -1;
        if (c->left == 0) {
          if (check_chunk_sig(c, err) < 0)
            return -1;
          c->st = CH_TRAILER; /* the final CRLF or the trailers */
        } else {
          c->st = CH_DATA;
        }
        break;
      }
      if (c->line_len + 1 >= sizeof c->line)
        return bad(err, "line too long");
      if (ch == '\0')
        return bad(err, "NUL in a chunk header");
      c->line[c->line_len++] = ch;
      c->line[c->line_len] = 0;
      break;
    }
    case CH_DATA: {
      size_t take = n - i;
      if (take > c->left)
        take = (size_t)c->left;
      if (c->signed_chunks && EVP_DigestUpdate(c->md, buf + i, take) != 1)
        return husk_fail(err, ENOMEM, "SHA-256");
      if (emit(ctx, buf + i, take, err) < 0)
        return -1;
      c->decoded += take;
      c->left -= take;
      i += take;
      if (c->left == 0)
        c->st = CH_DATA_CR;
      break;
    }
    case CH_DATA_CR:
      if (buf[i++] != '\r')
        return bad(err, "chunk data longer than its size");
      c->st = CH_DATA_LF;
      break;
    case CH_DATA_LF:
      if (buf[i++] != '\n')
        return bad(err, "chunk data longer than its size");
      if (check_chunk_sig(c, err) < 0)
        return -1;
      c->st = CH_SIZE;
      break;
    case CH_DONE:
      return bad(err, "bytes after the end of the body");
    }
  }
  return 0;
}

int chunked_finish(struct chunked *c, struct husk_err *err) {
  if (c->st != CH_DONE)
    return husk_fail(err, EBADMSG, "the aws-chunked body ended early");
  return 0;
}

const char *chunked_trailer(const struct chunked *c, const char *name) {
  size_t nl = strlen(name);
  for (int i = 0; i < c->ntrailers; i++)
    if (!strncasecmp(c->trailers[i], name, nl) && c->trailers[i][nl] == ':')
      return c->trailers[i] + nl + 1;
  return NULL;
}
