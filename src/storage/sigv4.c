/* AWS Signature Version 4 (see sigv4.h for the rules followed). */
#define _GNU_SOURCE
#include "storage/sigv4.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "util/cleanup.h"
#include "util/strbuf.h"

static void why_set(char *why, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void why_set(char *why, size_t size, const char *fmt, ...) {
  if (!why || !size)
    return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, size, fmt, ap);
  va_end(ap);
}

/* ---- hashing ---- */

void sigv4_hex(const unsigned char *in, size_t n, char *out) {
  static const char h[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = h[in[i] >> 4];
    out[2 * i + 1] = h[in[i] & 15];
  }
  out[2 * n] = '\0';
}

void sigv4_sha256_hex(const void *data, size_t len, char out[65]) {
  unsigned char md[32];
  unsigned int l = 0;
  if (EVP_Digest(data, len, md, &l, EVP_sha256(), NULL) != 1)
    memset(md, 0, sizeof md); /* cannot happen; a zero hash matches nothing */
  sigv4_hex(md, 32, out);
}

static void hmac(const void *key, size_t klen, const void *msg, size_t mlen, unsigned char out[32]) {
  unsigned int l = 32;
  if (!HMAC(EVP_sha256(), key, (int)klen, msg, mlen, out, &l))
    memset(out, 0, 32);
}

void sigv4_hmac_hex(const unsigned char key[32], const char *msg, size_t len, char out[65]) {
  unsigned char md[32];
  hmac(key, 32, msg, len, md);
  sigv4_hex(md, 32, out);
}

int sigv4_signing_key(const char *secret, const char *date, const char *region,
                      const char *service, unsigned char out[32]) {
  size_t sl = strlen(secret);
  char *k = malloc(sl + 5);
  if (!k)
    return -1;
  memcpy(k, "AWS4", 4);
  memcpy(k + 4, secret, sl + 1);
  unsigned char a[32], b[32];
  hmac(k, sl + 4, date, strlen(date), a);
  OPENSSL_cleanse(k, sl + 4);
  free(k);
  hmac(a, 32, region, strlen(region), b);
  hmac(b, 32, service, strlen(service), a);
  hmac(a, 32, "aws4_request", 12, out);
  OPENSSL_cleanse(a, sizeof a);
  OPENSSL_cleanse(b, sizeof b);
  return 0;
}

/* ---- encoding ---- */

static bool unreserved(unsigned char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '.' || c == '_' || c == '~';
}

char *sigv4_uri_encode(const char *in, size_t n, bool keep_slash) {
  static const char h[] = "0123456789ABCDEF";
  if (n > (SIZE_MAX - 1) / 3)
    return NULL;
  char *out = malloc(3 * n + 1), *o = out;
  if (!out)
    return NULL;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)in[i];
    if (unreserved(c) || (keep_slash && c == '/')) {
      *o++ = (char)c;
    } else {
      *o++ = '%';
      *o++ = h[c >> 4];
      *o++ = h[c & 15];
    }
  }
  *o = '\0';
  return out;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

char *sigv4_uri_decode(const char *in, size_t n, size_t *outlen) {
  char *out = malloc(n + 1), *o = out;
  if (!out)
    return NULL;
  for (size_t i = 0; i < n; i++) {
    if (in[i] == '%') {
      if (i + 2 >= n)
        goto bad;
      int hi = hexval(in[i + 1]), lo = hexval(in[i + 2]);
      if (hi < 0 || lo < 0)
        goto bad;
      char c = (char)(hi * 16 + lo);
      if (c == '\0')
        goto bad;
      *o++ = c;
      i += 2;
    } else {
      *o++ = in[i];
    }
  }
  *o = '\0';
  if (outlen)
    *outlen = (size_t)(o - out);
  return out;
bad:
  free(out);
  return NULL;
}

/* ---- canonical request ---- */

struct qpair {
  char *name, *value; /* encoded */
};

static int qpair_cmp(const void *a, const void *b) {
  const struct qpair *x = a, *y = b;
  int c = strcmp(x->name, y->name);
  return c ? c : strcmp(x->value, y->value);
}

/* Decode-then-encode one query component. */
static char *requery(const char *s, size_t n) {
  size_t dl;
  cleanup_free char *d = sigv4_uri_decode(s, n, &dl);
  if (!d)
    return NULL;
  return sigv4_uri_encode(d, dl, false);
}

static char *canonical_query(const char *q, bool presigned, struct husk_err *err) {
  if (!q || !*q)
    return strdup("");
  size_t cap = 1;
  for (const char *p = q; *p; p++)
    cap += *p == '&';
  struct qpair *v = calloc(cap, sizeof *v);
  if (!v) {
    husk_error(err, ENOMEM, "query");
    return NULL;
  }
  size_t n = 0;
  char *res = NULL;
  const char *p = q;
  while (*p) {
    const char *e = strchrnul(p, '&');
    if (e > p) {
      const char *eq = memchr(p, '=', (size_t)(e - p));
      const char *ne = eq ? eq : e;
      char *name = requery(p, (size_t)(ne - p));
      char *val = eq ? requery(eq + 1, (size_t)(e - eq - 1)) : strdup("");
      if (!name || !val) {
        free(name);
        free(val);
        husk_fail(err, EINVAL, "the query string is not valid percent-encoding");
        goto out;
      }
      if (presigned && !strcmp(name, "X-Amz-Signature")) {
        free(name);
        free(val);
      } else {
        v[n].name = name;
        v[n].value = val;
        n++;
      }
    }
    p = *e ? e + 1 : e;
  }
  qsort(v, n, sizeof *v, qpair_cmp);
  struct strbuf b = {0};
  for (size_t i = 0; i < n; i++) {
    if (i)
      strbuf_chr(&b, '&');
    strbuf_str(&b, v[i].name);
    strbuf_chr(&b, '=');
    strbuf_str(&b, v[i].value);
  }
  res = strbuf_take(&b);
  if (!res)
    husk_error(err, ENOMEM, "query");
out:
  for (size_t i = 0; i < n; i++) {
    free(v[i].name);
    free(v[i].value);
  }
  free(v);
  return res;
}

/* Value trimmed, inner blank runs collapsed. */
static void add_trimmed(struct strbuf *b, const char *v) {
  while (*v == ' ' || *v == '\t')
    v++;
  bool space = false;
  for (; *v; v++) {
    if (*v == ' ' || *v == '\t') {
      space = true;
      continue;
    }
    if (space)
      strbuf_chr(b, ' ');
    space = false;
    strbuf_chr(b, *v);
  }
}

char *sigv4_canonical_request(const struct sigv4_request *rq, const char *signed_headers,
                              const char *payload_hash, bool presigned, struct husk_err *err) {
  struct strbuf b = {0};
  strbuf_str(&b, rq->method);
  strbuf_chr(&b, '\n');
  size_t dl;
  cleanup_free char *dpath = sigv4_uri_decode(rq->path, strlen(rq->path), &dl);
  if (!dpath) {
    free(b.p);
    husk_fail(err, EINVAL, "the path is not valid percent-encoding");
    return NULL;
  }
  cleanup_free char *epath = sigv4_uri_encode(dpath, dl, true);
  cleanup_free char *cq = canonical_query(rq->query, presigned, err);
  if (!epath || !cq) {
    free(b.p);
    if (!cq)
      return NULL;
    husk_error(err, ENOMEM, "canonical request");
    return NULL;
  }
  strbuf_str(&b, *epath ? epath : "/");
  strbuf_chr(&b, '\n');
  strbuf_str(&b, cq);
  strbuf_chr(&b, '\n');
  /* The signed headers, in the order the list gives (which must be sorted:
   * the verifier checks that). */
  const char *p = signed_headers;
  while (*p) {
    const char *e = strchrnul(p, ';');
    size_t nl = (size_t)(e - p);
    bool found = false;
    strbuf_add(&b, p, nl);
    strbuf_chr(&b, ':');
    for (size_t i = 0; i < rq->nheaders; i++) {
      if (strlen(rq->headers[i].name) != nl || strncasecmp(rq->headers[i].name, p, nl) != 0)
        continue;
      if (found)
        strbuf_chr(&b, ',');
      add_trimmed(&b, rq->headers[i].value ? rq->headers[i].value : "");
      found = true;
    }
    if (!found) {
      free(b.p);
      husk_fail(err, ENOENT, "a signed header is missing from the request: %.*s",
                (int)(nl > 64 ? 64 : nl), p);
      return NULL;
    }
    strbuf_chr(&b, '\n');
    p = *e ? e + 1 : e;
  }
  strbuf_chr(&b, '\n');
  strbuf_str(&b, signed_headers);
  strbuf_chr(&b, '\n');
  strbuf_str(&b, payload_hash);
  char *r = strbuf_take(&b);
  if (!r)
    husk_error(err, ENOMEM, "canonical request");
  return r;
}

char *sigv4_string_to_sign(const char *amz_date, const char *scope, const char *canonical) {
  char h[65];
  sigv4_sha256_hex(canonical, strlen(canonical), h);
  char *s = NULL;
  if (asprintf(&s, SIGV4_ALGO "\n%s\n%s\n%s", amz_date, scope, h) < 0)
    return NULL;
  return s;
}

void sigv4_chunk_signature(const unsigned char key[32], const char *amz_date, const char *scope,
                           const char *prev_sig, const char *chunk_sha_hex, char out[65]) {
  char msg[512];
  int n = snprintf(msg, sizeof msg,
                   "AWS4-HMAC-SHA256-PAYLOAD\n%s\n%s\n%s\n"
                   "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855\n%s",
                   amz_date, scope, prev_sig, chunk_sha_hex);
  if (n < 0 || (size_t)n >= sizeof msg)
    n = 0;
  sigv4_hmac_hex(key, msg, (size_t)n, out);
}

void sigv4_trailer_signature(const unsigned char key[32], const char *amz_date, const char *scope,
                             const char *prev_sig, const char *trailer_lines, char out[65]) {
  char th[65];
  sigv4_sha256_hex(trailer_lines, strlen(trailer_lines), th);
  char msg[512];
  int n = snprintf(msg, sizeof msg, "AWS4-HMAC-SHA256-TRAILER\n%s\n%s\n%s\n%s", amz_date, scope,
                   prev_sig, th);
  if (n < 0 || (size_t)n >= sizeof msg)
    n = 0;
  sigv4_hmac_hex(key, msg, (size_t)n, out);
}

/* ---- parsing what the request claims ---- */

static const char *header(const struct sigv4_request *rq, const char *name) {
  for (size_t i = 0; i < rq->nheaders; i++)
    if (!strcasecmp(rq->headers[i].name, name))
      return rq->headers[i].value;
  return NULL;
}

/* A decoded query parameter (exact name); malloc'd or NULL. */
static char *query_param(const char *q, const char *name, bool *bad) {
  if (!q)
    return NULL;
  size_t nl = strlen(name);
  const char *p = q;
  while (*p) {
    const char *e = strchrnul(p, '&');
    const char *eq = memchr(p, '=', (size_t)(e - p));
    const char *ne = eq ? eq : e;
    size_t dl;
    char *dn = sigv4_uri_decode(p, (size_t)(ne - p), &dl);
    if (!dn) {
      *bad = true;
      return NULL;
    }
    bool match = dl == nl && !memcmp(dn, name, nl);
    free(dn);
    if (match) {
      char *v = eq ? sigv4_uri_decode(eq + 1, (size_t)(e - eq - 1), NULL) : strdup("");
      if (!v)
        *bad = true;
      return v;
    }
    p = *e ? e + 1 : e;
  }
  return NULL;
}

static bool amz_date_ok(const char *s) {
  if (strlen(s) != 16 || s[8] != 'T' || s[15] != 'Z')
    return false;
  for (int i = 0; i < 15; i++)
    if (i != 8 && (s[i] < '0' || s[i] > '9'))
      return false;
  return true;
}

static time_t amz_date_time(const char *s) {
  struct tm tm = {0};
  char b[5];
  memcpy(b, s, 4);
  b[4] = 0;
  tm.tm_year = atoi(b) - 1900;
  memcpy(b, s + 4, 2);
  b[2] = 0;
  tm.tm_mon = atoi(b) - 1;
  memcpy(b, s + 6, 2);
  tm.tm_mday = atoi(b);
  memcpy(b, s + 9, 2);
  tm.tm_hour = atoi(b);
  memcpy(b, s + 11, 2);
  tm.tm_min = atoi(b);
  memcpy(b, s + 13, 2);
  tm.tm_sec = atoi(b);
  return timegm(&tm);
}

void sigv4_amz_date(time_t t, char out[17]) {
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

/* "AKID/20130524/us-east-1/s3/aws4_request" */
static bool parse_credential(const char *c, size_t n, struct sigv4_auth *a) {
  const char *parts[5];
  size_t lens[5];
  int k = 0;
  const char *p = c, *end = c + n;
  while (k < 5) {
    const char *s = memchr(p, '/', (size_t)(end - p));
    const char *e = s ? s : end;
    parts[k] = p;
    lens[k] = (size_t)(e - p);
    k++;
    if (!s)
      break;
    p = s + 1;
  }
  if (k != 5 || memchr(p, '/', (size_t)(end - p)))
    return false;
  if (lens[0] == 0 || lens[0] >= sizeof a->key_id || lens[1] != 8 || lens[2] == 0 ||
      lens[2] >= sizeof a->region || lens[3] == 0 || lens[3] >= sizeof a->service ||
      lens[4] != 12 || memcmp(parts[4], "aws4_request", 12))
    return false;
  memcpy(a->key_id, parts[0], lens[0]);
  a->key_id[lens[0]] = 0;
  memcpy(a->date, parts[1], 8);
  a->date[8] = 0;
  memcpy(a->region, parts[2], lens[2]);
  a->region[lens[2]] = 0;
  memcpy(a->service, parts[3], lens[3]);
  a->service[lens[3]] = 0;
  for (int i = 0; i < 8; i++)
    if (a->date[i] < '0' || a->date[i] > '9')
      return false;
  return true;
}

/* Lower-case names of [a-z0-9-], sorted, unique, host among them. */
static bool signed_headers_ok(const char *s) {
  if (!*s || strlen(s) >= sizeof ((struct sigv4_auth *)0)->signed_headers)
    return false;
  const char *prev = NULL;
  size_t prevl = 0;
  bool host = false;
  int count = 0;
  const char *p = s;
  while (1) {
    const char *e = strchrnul(p, ';');
    size_t l = (size_t)(e - p);
    if (l == 0 || ++count > SIGV4_MAX_SIGNED)
      return false;
    for (size_t i = 0; i < l; i++) {
      char c = p[i];
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
        return false;
    }
    if (prev) {
      size_t m = prevl < l ? prevl : l;
      int c = memcmp(prev, p, m);
      if (c > 0 || (c == 0 && prevl >= l))
        return false;
    }
    if (l == 4 && !memcmp(p, "host", 4))
      host = true;
    prev = p;
    prevl = l;
    if (!*e)
      break;
    p = e + 1;
  }
  return host;
}

static bool hex64(const char *s) {
  if (strlen(s) != 64)
    return false;
  for (int i = 0; i < 64; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return false;
  return true;
}

static enum sigv4_result parse_header_auth(const struct sigv4_request *rq, const char *h,
                                           struct sigv4_auth *a, char *why, size_t ws) {
  if (strncmp(h, SIGV4_ALGO " ", sizeof SIGV4_ALGO)) {
    why_set(why, ws, "only AWS4-HMAC-SHA256 signatures are supported");
    return SIGV4_UNSUPPORTED;
  }
  const char *p = h + sizeof SIGV4_ALGO;
  bool have_c = false, have_h = false, have_s = false;
  while (*p) {
    while (*p == ' ' || *p == ',')
      p++;
    if (!*p)
      break;
    const char *e = strchrnul(p, ',');
    size_t l = (size_t)(e - p);
    while (l > 0 && p[l - 1] == ' ')
      l--;
    if (l > 11 && !strncmp(p, "Credential=", 11)) {
      if (!parse_credential(p + 11, l - 11, a)) {
        why_set(why, ws, "the Credential is not AKID/date/region/service/aws4_request");
        return SIGV4_MALFORMED;
      }
      have_c = true;
    } else if (l > 14 && !strncmp(p, "SignedHeaders=", 14)) {
      if (l - 14 >= sizeof a->signed_headers) {
        why_set(why, ws, "SignedHeaders is too long");
        return SIGV4_MALFORMED;
      }
      memcpy(a->signed_headers, p + 14, l - 14);
      a->signed_headers[l - 14] = 0;
      have_h = true;
    } else if (l > 10 && !strncmp(p, "Signature=", 10)) {
      if (l - 10 != 64) {
        why_set(why, ws, "the Signature must be 64 hex digits");
        return SIGV4_MALFORMED;
      }
      memcpy(a->signature, p + 10, 64);
      a->signature[64] = 0;
      have_s = true;
    } else {
      why_set(why, ws, "unexpected part in the Authorization header");
      return SIGV4_MALFORMED;
    }
    p = e;
  }
  if (!have_c || !have_h || !have_s) {
    why_set(why, ws, "the Authorization header needs Credential, SignedHeaders and Signature");
    return SIGV4_MALFORMED;
  }
  const char *d = header(rq, "x-amz-date");
  if (!d || !amz_date_ok(d)) {
    why_set(why, ws, "AWS authentication requires a valid x-amz-date header (YYYYMMDDTHHMMSSZ)");
    return SIGV4_MALFORMED;
  }
  memcpy(a->amz_date, d, 17);
  const char *ph = header(rq, "x-amz-content-sha256");
  if (!ph) {
    why_set(why, ws, "missing required header for this request: x-amz-content-sha256");
    return SIGV4_MALFORMED;
  }
  if (strlen(ph) >= sizeof a->payload_hash) {
    why_set(why, ws, "bad x-amz-content-sha256 header");
    return SIGV4_MALFORMED;
  }
  snprintf(a->payload_hash, sizeof a->payload_hash, "%s", ph);
  return SIGV4_OK;
}

static enum sigv4_result parse_query_auth(const struct sigv4_request *rq, struct sigv4_auth *a,
                                          char *why, size_t ws) {
  bool bad = false;
  cleanup_free char *alg = query_param(rq->query, "X-Amz-Algorithm", &bad);
  cleanup_free char *cred = query_param(rq->query, "X-Amz-Credential", &bad);
  cleanup_free char *date = query_param(rq->query, "X-Amz-Date", &bad);
  cleanup_free char *exp = query_param(rq->query, "X-Amz-Expires", &bad);
  cleanup_free char *sh = query_param(rq->query, "X-Amz-SignedHeaders", &bad);
  cleanup_free char *sig = query_param(rq->query, "X-Amz-Signature", &bad);
  if (bad || !alg || !cred || !date || !exp || !sh || !sig) {
    why_set(why, ws,
            "a presigned URL needs X-Amz-Algorithm, X-Amz-Credential, X-Amz-Date, "
            "X-Amz-Expires, X-Amz-SignedHeaders and X-Amz-Signature");
    return SIGV4_MALFORMED;
  }
  if (strcmp(alg, SIGV4_ALGO)) {
    why_set(why, ws, "only AWS4-HMAC-SHA256 signatures are supported");
    return SIGV4_UNSUPPORTED;
  }
  if (!parse_credential(cred, strlen(cred), a)) {
    why_set(why, ws, "X-Amz-Credential is not AKID/date/region/service/aws4_request");
    return SIGV4_MALFORMED;
  }
  if (!amz_date_ok(date)) {
    why_set(why, ws, "X-Amz-Date must be YYYYMMDDTHHMMSSZ");
    return SIGV4_MALFORMED;
  }
  memcpy(a->amz_date, date, 17);
  if (!*exp || strspn(exp, "0123456789") != strlen(exp) || strlen(exp) > 7 || atoll(exp) < 1 ||
      atoll(exp) > SIGV4_MAX_EXPIRES_S) {
    why_set(why, ws, "X-Amz-Expires must be 1..604800 seconds");
    return SIGV4_MALFORMED;
  }
  a->expires_s = atoll(exp);
  if (strlen(sh) >= sizeof a->signed_headers || strlen(sig) != 64) {
    why_set(why, ws, "bad X-Amz-SignedHeaders or X-Amz-Signature");
    return SIGV4_MALFORMED;
  }
  snprintf(a->signed_headers, sizeof a->signed_headers, "%s", sh);
  memcpy(a->signature, sig, 65);
  a->presigned = true;
  snprintf(a->payload_hash, sizeof a->payload_hash, SIGV4_UNSIGNED);
  return SIGV4_OK;
}

enum sigv4_result sigv4_parse(const struct sigv4_request *rq, struct sigv4_auth *a, char *why,
                              size_t ws) {
  memset(a, 0, sizeof *a);
  const char *h = header(rq, "authorization");
  bool bad = false;
  cleanup_free char *qalg = query_param(rq->query, "X-Amz-Algorithm", &bad);
  cleanup_free char *v2 = query_param(rq->query, "AWSAccessKeyId", &bad);
  enum sigv4_result r;
  if (h && qalg) {
    why_set(why, ws, "only one auth mechanism allowed: the header or the query, not both");
    return SIGV4_MALFORMED;
  }
  if (h)
    r = parse_header_auth(rq, h, a, why, ws);
  else if (qalg)
    r = parse_query_auth(rq, a, why, ws);
  else if (v2) {
    why_set(why, ws, "Signature Version 2 is not supported: use Signature Version 4");
    return SIGV4_UNSUPPORTED;
  } else {
    why_set(why, ws, "no credentials: sign the request with AWS Signature Version 4");
    return SIGV4_MISSING;
  }
  if (r != SIGV4_OK)
    return r;
  if (!signed_headers_ok(a->signed_headers)) {
    why_set(why, ws, "SignedHeaders must be sorted lower-case names and include host");
    return SIGV4_MALFORMED;
  }
  for (char *s = a->signature; *s; s++)
    if (*s >= 'A' && *s <= 'F')
      *s = (char)(*s - 'A' + 'a');
  if (!hex64(a->signature)) {
    why_set(why, ws, "the signature must be 64 hex digits");
    return SIGV4_MALFORMED;
  }
  if (memcmp(a->date, a->amz_date, 8)) {
    why_set(why, ws, "the credential's date does not match the request's date");
    return SIGV4_MALFORMED;
  }
  return SIGV4_OK;
}

enum sigv4_result sigv4_verify(const struct sigv4_request *rq, const struct sigv4_auth *a,
                               const char *secret, time_t now, unsigned char signing_key[32],
                               char *why, size_t ws) {
  if (now) {
    time_t t = amz_date_time(a->amz_date);
    if (a->presigned) {
      if (t > now + SIGV4_MAX_SKEW_S) {
        why_set(why, ws, "Request is not valid yet");
        return SIGV4_NOT_YET;
      }
      if (now > t + a->expires_s) {
        why_set(why, ws, "Request has expired");
        return SIGV4_EXPIRED;
      }
    } else if (t > now + SIGV4_MAX_SKEW_S || t < now - SIGV4_MAX_SKEW_S) {
      why_set(why, ws, "The difference between the request time and the current time is too large");
      return SIGV4_SKEWED;
    }
  }
  struct husk_err err;
  cleanup_free char *canon =
      sigv4_canonical_request(rq, a->signed_headers, a->payload_hash, a->presigned, &err);
  if (!canon) {
    why_set(why, ws, "%s", err.msg);
    return err.code == ENOMEM ? SIGV4_MISMATCH : SIGV4_MALFORMED;
  }
  char scope[256];
  snprintf(scope, sizeof scope, "%s/%s/%s/aws4_request", a->date, a->region, a->service);
  cleanup_free char *sts = sigv4_string_to_sign(a->amz_date, scope, canon);
  unsigned char key[32];
  if (!sts || sigv4_signing_key(secret, a->date, a->region, a->service, key) < 0) {
    why_set(why, ws, "out of memory");
    return SIGV4_MISMATCH;
  }
  char sig[65];
  sigv4_hmac_hex(key, sts, strlen(sts), sig);
  bool ok = CRYPTO_memcmp(sig, a->signature, 64) == 0;
  if (ok && signing_key)
    memcpy(signing_key, key, 32);
  OPENSSL_cleanse(key, sizeof key);
  if (!ok) {
    why_set(why, ws,
            "The request signature we calculated does not match the signature you provided. "
            "Check your key and signing method.");
    return SIGV4_MISMATCH;
  }
  return SIGV4_OK;
}

/* ---- the client side ---- */

static int name_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int sigv4_sign_headers(const struct sigv4_request *rq, const struct sigv4_creds *c,
                       const char *amz_date, const char *payload_hash, char **authz,
                       struct husk_err *err) {
  if (rq->nheaders == 0 || rq->nheaders > SIGV4_MAX_SIGNED)
    return husk_fail(err, EINVAL, "bad number of headers to sign");
  char *names[SIGV4_MAX_SIGNED];
  size_t n = 0;
  for (size_t i = 0; i < rq->nheaders; i++) {
    char *l = strdup(rq->headers[i].name);
    if (!l) {
      for (size_t k = 0; k < n; k++)
        free(names[k]);
      return husk_error(err, ENOMEM, "sign");
    }
    for (char *s = l; *s; s++)
      if (*s >= 'A' && *s <= 'Z')
        *s = (char)(*s - 'A' + 'a');
    bool dup = false;
    for (size_t k = 0; k < n; k++)
      dup |= !strcmp(names[k], l);
    if (dup)
      free(l);
    else
      names[n++] = l;
  }
  qsort(names, n, sizeof *names, name_cmp);
  struct strbuf sh = {0};
  for (size_t i = 0; i < n; i++) {
    if (i)
      strbuf_chr(&sh, ';');
    strbuf_str(&sh, names[i]);
    free(names[i]);
  }
  cleanup_free char *signed_headers = strbuf_take(&sh);
  if (!signed_headers)
    return husk_error(err, ENOMEM, "sign");
  cleanup_free char *canon = sigv4_canonical_request(rq, signed_headers, payload_hash, false, err);
  if (!canon)
    return -1;
  char date[9];
  memcpy(date, amz_date, 8);
  date[8] = 0;
  char scope[256];
  snprintf(scope, sizeof scope, "%s/%s/%s/aws4_request", date, c->region, c->service);
  cleanup_free char *sts = sigv4_string_to_sign(amz_date, scope, canon);
  unsigned char key[32];
  if (!sts || sigv4_signing_key(c->secret, date, c->region, c->service, key) < 0)
    return husk_error(err, ENOMEM, "sign");
  char sig[65];
  sigv4_hmac_hex(key, sts, strlen(sts), sig);
  OPENSSL_cleanse(key, sizeof key);
  if (asprintf(authz, SIGV4_ALGO " Credential=%s/%s, SignedHeaders=%s, Signature=%s", c->key_id,
               scope, signed_headers, sig) < 0)
    return husk_error(err, ENOMEM, "sign");
  return 0;
}

int sigv4_presign(const struct sigv4_creds *c, const char *method, const char *path,
                  const char *host, const char *extra_query, time_t now, int64_t expires_s,
                  char **query_out, struct husk_err *err) {
  if (expires_s < 1 || expires_s > SIGV4_MAX_EXPIRES_S)
    return husk_fail(err, EINVAL, "expiry must be 1..%d seconds", SIGV4_MAX_EXPIRES_S);
  char amz_date[17];
  sigv4_amz_date(now, amz_date);
  char date[9];
  memcpy(date, amz_date, 8);
  date[8] = 0;
  char cred[512];
  if (snprintf(cred, sizeof cred, "%s/%s/%s/%s/aws4_request", c->key_id, date, c->region,
               c->service) >= (int)sizeof cred)
    return husk_fail(err, EINVAL, "credential too long");
  cleanup_free char *ecred = sigv4_uri_encode(cred, strlen(cred), false);
  if (!ecred)
    return husk_error(err, ENOMEM, "presign");
  cleanup_free char *q = NULL;
  if (asprintf(&q,
               "X-Amz-Algorithm=" SIGV4_ALGO "&X-Amz-Credential=%s&X-Amz-Date=%s"
               "&X-Amz-Expires=%lld&X-Amz-SignedHeaders=host%s%s",
               ecred, amz_date, (long long)expires_s, extra_query && *extra_query ? "&" : "",
               extra_query ? extra_query : "") < 0)
    return husk_error(err, ENOMEM, "presign");
  struct sigv4_header h = {"host", host};
  struct sigv4_request rq = {method, path, q, &h, 1};
  cleanup_free char *canon = sigv4_canonical_request(&rq, "host", SIGV4_UNSIGNED, true, err);
  if (!canon)
    return -1;
  char scope[256];
  snprintf(scope, sizeof scope, "%s/%s/%s/aws4_request", date, c->region, c->service);
  cleanup_free char *sts = sigv4_string_to_sign(amz_date, scope, canon);
  unsigned char key[32];
  if (!sts || sigv4_signing_key(c->secret, date, c->region, c->service, key) < 0)
    return husk_error(err, ENOMEM, "presign");
  char sig[65];
  sigv4_hmac_hex(key, sts, strlen(sts), sig);
  OPENSSL_cleanse(key, sizeof key);
  if (asprintf(query_out, "%s&X-Amz-Signature=%s", q, sig) < 0)
    return husk_error(err, ENOMEM, "presign");
  return 0;
}
