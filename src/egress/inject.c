/* Inject mode: the proxy terminates the box's TLS with a leaf from the
 * box's own CA, checks the request, puts bound secrets in place of their
 * placeholders in allowed headers, and re-originates TLS to the real
 * server with full verification.
 *
 * The rules, in the order they are checked:
 *  1. the Host header must name the destination the box connected to
 *     (CONNECT host = SNI = Host, else 421 and no upstream connection);
 *  2. every placeholder-shaped token in any header must be one of this
 *     box's placeholders, in a header its binding allows, headed to a host
 *     its binding allows -- otherwise 403, audited, nothing sent upstream
 *     (so another box's placeholder, or ours to an unbound host, never
 *     leaves);
 *  3. the request target and body are never rewritten;
 *  4. one request per connection (Connection: close both ways), no
 *     upgrades, no 100-continue; the proxy never follows a redirect: the
 *     box sees the 3xx, and any next hop is a new, re-checked connection;
 *  5. best effort: the value of every secret bound to the box -- not only
 *     the ones this request used: an upstream may store a header and hand
 *     it back to a later request that carries no placeholder -- is
 *     replaced by its placeholder in the response head and body, raw and
 *     in its common encodings (Accept-Encoding is forced to identity so
 *     the body is scannable, and a response with a body in any other
 *     Content-Encoding is refused with 502; chunked bodies are de-chunked,
 *     so a value split across chunks is still found, and the response is
 *     delimited by the connection close).
 * Secret values live in this connection's memory only while it runs and
 * are wiped at its end. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/x509v3.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "egress/http.h"
#include "egress/proxy_internal.h"
#include "egress/vault.h"
#include "util/cleanup.h"

#define PH_PREFIX "husk_ph_"
#define PH_LEN (EGRESS_PLACEHOLDER_LEN - 1)

/* Encoded forms of a value the response scrub also replaces: JSON-escaped
 * (two ways), percent-encoded (two cases), base64 and base64url at each of
 * the three byte alignments.  Best effort: an upstream that reflects a
 * header back encoded (an echo, an error page quoting it) must not hand
 * the value to the box in that form either. */
#define SCRUB_VARIANTS 10
#define SCRUB_VARIANT_MIN 8 /* shorter encoded cores would match by chance */

struct secrets {
  size_t n;
  char *val[EGRESS_MAX_BINDINGS];
  size_t len[EGRESS_MAX_BINDINGS];
  const char *ph[EGRESS_MAX_BINDINGS];
  size_t maxlen;
  /* What the scrub looks for: the values above and their variants. */
  size_t nvar;
  char *var[EGRESS_MAX_BINDINGS * SCRUB_VARIANTS];
  size_t varlen[EGRESS_MAX_BINDINGS * SCRUB_VARIANTS];
  const char *varph[EGRESS_MAX_BINDINGS * SCRUB_VARIANTS];
  /* The patterns above (values first, then variants) by first byte, so the
   * scan tries at each position only those that can match there: with
   * every binding of a box scrubbed, trying all of them everywhere would
   * cost a hundred comparisons per byte.  Rebuilt when a pattern is added. */
  bool indexed;
  uint16_t order[EGRESS_MAX_BINDINGS * (SCRUB_VARIANTS + 1)];
  uint16_t first[257]; /* order[first[b] .. first[b + 1]) start with byte b */
};

static void secrets_wipe(struct secrets *s) {
  for (size_t i = 0; i < s->n; i++)
    egress_vault_wipe(s->val[i], s->len[i]);
  s->n = 0;
  for (size_t i = 0; i < s->nvar; i++) {
    explicit_bzero(s->var[i], s->varlen[i]);
    free(s->var[i]);
  }
  s->nvar = 0;
}

static void variant_add(struct secrets *s, char *v, size_t len, const char *ph, const char *raw,
                        size_t rawlen) {
  bool keep = v && len >= SCRUB_VARIANT_MIN && s->nvar < sizeof s->var / sizeof s->var[0] &&
              !(len == rawlen && !memcmp(v, raw, len));
  for (size_t i = 0; keep && i < s->nvar; i++)
    keep = !(s->varlen[i] == len && !memcmp(s->var[i], v, len));
  if (!keep) {
    if (v) {
      explicit_bzero(v, len);
      free(v);
    }
    return;
  }
  s->var[s->nvar] = v;
  s->varlen[s->nvar] = len;
  s->varph[s->nvar++] = ph;
  s->indexed = false;
  if (len > s->maxlen)
    s->maxlen = len;
}

static char *json_escaped(const char *v, size_t n, bool slash, size_t *out) {
  char *r = malloc(6 * n + 1), *w = r;
  if (!r)
    return NULL;
  static const char hx[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)v[i];
    if (ch == '"' || ch == '\\' || (slash && ch == '/')) {
      *w++ = '\\';
      *w++ = (char)ch;
    } else if (ch < 0x20) {
      const char *e = ch == '\n' ? "\\n" : ch == '\r' ? "\\r" : ch == '\t' ? "\\t" : NULL;
      if (e) {
        memcpy(w, e, 2);
        w += 2;
      } else {
        memcpy(w, "\\u00", 4);
        w[4] = hx[ch >> 4];
        w[5] = hx[ch & 15];
        w += 6;
      }
    } else {
      *w++ = (char)ch;
    }
  }
  *out = (size_t)(w - r);
  return r;
}

static char *pct_encoded(const char *v, size_t n, bool lower, size_t *out) {
  char *r = malloc(3 * n + 1), *w = r;
  if (!r)
    return NULL;
  const char *hx = lower ? "0123456789abcdef" : "0123456789ABCDEF";
  for (size_t i = 0; i < n; i++) {
    unsigned char ch = (unsigned char)v[i];
    if (isalnum(ch) || ch == '-' || ch == '.' || ch == '_' || ch == '~') {
      *w++ = (char)ch;
    } else {
      *w++ = '%';
      *w++ = hx[ch >> 4];
      *w++ = hx[ch & 15];
    }
  }
  *out = (size_t)(w - r);
  return r;
}

/* The base64 characters that depend on the value's bytes alone when it
 * starts `align` bytes into a 3-byte group of a longer encoded stream. */
static char *b64_core(const char *v, size_t n, unsigned align, bool url, size_t *out) {
  size_t in = align + n;
  unsigned char *buf = calloc(in, 1);
  char *enc = malloc(4 * (in / 3 + 1) + 1);
  char *r = NULL;
  if (buf && enc) {
    memcpy(buf + align, v, n);
    int el = EVP_EncodeBlock((unsigned char *)enc, buf, (int)in);
    static const size_t first[3] = {0, 2, 3};
    size_t start = first[align], end = in * 8 / 6;
    if (el >= 0 && end > start && (r = malloc(end - start))) {
      memcpy(r, enc + start, end - start);
      if (url)
        for (size_t i = 0; i < end - start; i++)
          r[i] = r[i] == '+' ? '-' : r[i] == '/' ? '_' : r[i];
      *out = end - start;
    }
  }
  if (buf) {
    explicit_bzero(buf, in);
    free(buf);
  }
  if (enc) {
    explicit_bzero(enc, 4 * (in / 3 + 1) + 1);
    free(enc);
  }
  return r;
}

static void secrets_add_variants(struct secrets *s, const char *v, size_t n, const char *ph) {
  for (int k = 0; k < SCRUB_VARIANTS; k++) {
    size_t l = 0;
    char *x = k < 2   ? json_escaped(v, n, k == 1, &l)
              : k < 4 ? pct_encoded(v, n, k == 3, &l)
                      : b64_core(v, n, (unsigned)(k - 4) / 2, (k - 4) % 2 == 1, &l);
    variant_add(s, x, x ? l : 0, ph, v, n);
  }
}

/* ---- response scrubbing ---------------------------------------------------- */

/* Pattern k: a value (k < n) or a variant. */
static const char *pat(const struct secrets *s, size_t k, size_t *len, const char **ph) {
  if (k < s->n) {
    *len = s->len[k];
    *ph = s->ph[k];
    return s->val[k];
  }
  *len = s->varlen[k - s->n];
  *ph = s->varph[k - s->n];
  return s->var[k - s->n];
}

/* Counting sort by first byte, stable: values still win over variants. */
static void secrets_index(struct secrets *s) {
  size_t total = s->n + s->nvar, count[256] = {0};
  for (size_t k = 0; k < total; k++) {
    size_t l;
    const char *ph, *p = pat(s, k, &l, &ph);
    if (l)
      count[(unsigned char)p[0]]++;
  }
  size_t at = 0;
  for (int b = 0; b < 256; b++) {
    s->first[b] = (uint16_t)at;
    at += count[b];
  }
  s->first[256] = (uint16_t)at;
  size_t fill[256];
  for (int b = 0; b < 256; b++)
    fill[b] = s->first[b];
  for (size_t k = 0; k < total; k++) {
    size_t l;
    const char *ph, *p = pat(s, k, &l, &ph);
    if (l)
      s->order[fill[(unsigned char)p[0]]++] = (uint16_t)k;
  }
  s->indexed = true;
}

struct scrub {
  struct secrets *s;
  char *tail;
  size_t tlen;
};

/* Write data to the box with every secret value replaced by its
 * placeholder; up to maxlen-1 bytes are held back between calls in case a
 * value straddles two reads. */
static int scrub_feed(struct conn *c, struct scrub *sc, const char *data, size_t len, bool final) {
  if (sc->s->n == 0 && sc->s->nvar == 0)
    return len ? egress_io_write_all(c, &c->box, data, len) : 0;
  size_t total = sc->tlen + len;
  char *buf = malloc(total ? total : 1);
  if (!buf)
    return -1;
  if (sc->tlen)
    memcpy(buf, sc->tail, sc->tlen);
  if (len)
    memcpy(buf + sc->tlen, data, len);
  size_t hold = final ? 0 : sc->s->maxlen - 1;
  size_t limit = total > hold ? total - hold : 0;
  size_t i = 0, emitted = 0;
  int rc = 0;
  if (!sc->s->indexed)
    secrets_index(sc->s);
  while (i < limit && rc == 0) {
    const char *ph = NULL;
    size_t mlen = 0;
    unsigned char b0 = (unsigned char)buf[i];
    for (size_t j = sc->s->first[b0]; j < sc->s->first[b0 + 1] && !ph; j++) {
      size_t l;
      const char *p_ph, *p = pat(sc->s, sc->s->order[j], &l, &p_ph);
      if (i + l <= total && !memcmp(buf + i, p, l))
        ph = p_ph, mlen = l;
    }
    if (!ph) {
      i++;
      continue;
    }
    if (i > emitted)
      rc = egress_io_write_all(c, &c->box, buf + emitted, i - emitted);
    if (rc == 0)
      rc = egress_io_write_all(c, &c->box, ph, PH_LEN);
    i += mlen;
    emitted = i;
  }
  if (rc == 0 && limit > emitted)
    rc = egress_io_write_all(c, &c->box, buf + emitted, limit - emitted), emitted = limit;
  size_t keep = total - (emitted > limit ? emitted : limit);
  size_t from = total - keep;
  if (sc->tail)
    explicit_bzero(sc->tail, sc->tlen);
  free(sc->tail);
  sc->tail = NULL;
  sc->tlen = 0;
  if (keep && rc == 0) {
    sc->tail = malloc(keep);
    if (!sc->tail)
      rc = -1;
    else {
      memcpy(sc->tail, buf + from, keep);
      sc->tlen = keep;
    }
  }
  explicit_bzero(buf, total);
  free(buf);
  return rc;
}

/* ---- de-chunking ---------------------------------------------------------------- */

enum ck_state { CK_SIZE, CK_DATA, CK_DATA_CRLF, CK_TRAILER, CK_DONE };

struct chunker {
  enum ck_state st;
  uint64_t rem;
  char line[1024];
  size_t ll;
};

/* Feed bytes; body data goes to the scrubber.  -1 on malformed framing. */
static int chunk_feed(struct conn *c, struct chunker *k, struct scrub *sc, const char *p, size_t n) {
  size_t i = 0;
  while (i < n && k->st != CK_DONE) {
    if (k->st == CK_DATA) {
      size_t take = n - i < k->rem ? n - i : (size_t)k->rem;
      if (scrub_feed(c, sc, p + i, take, false) < 0)
        return -1;
      i += take;
      k->rem -= take;
      if (!k->rem)
        k->st = CK_DATA_CRLF, k->ll = 0;
      continue;
    }
    char ch = p[i++];
    if (k->ll >= sizeof k->line - 1)
      return -1;
    k->line[k->ll++] = ch;
    if (!(k->ll >= 2 && k->line[k->ll - 2] == '\r' && ch == '\n'))
      continue;
    k->line[k->ll - 2] = '\0';
    size_t linelen = k->ll - 2;
    k->ll = 0;
    if (k->st == CK_DATA_CRLF) {
      if (linelen)
        return -1;
      k->st = CK_SIZE;
    } else if (k->st == CK_SIZE) {
      /* Hex digits only: strtoull alone would take a sign, a 0x prefix
       * and leading blanks, which no chunk size has.  The digits end
       * the line only at its real end: a NUL byte in it does not. */
      size_t digits = strspn(k->line, "0123456789abcdefABCDEF");
      char *end = k->line + digits;
      if (!digits || digits > 16 ||
          (digits < linelen && *end != ';' && *end != ' ' && *end != '\t'))
        return -1;
      unsigned long long v = strtoull(k->line, NULL, 16);
      if (v == 0)
        k->st = CK_TRAILER;
      else
        k->st = CK_DATA, k->rem = v;
    } else if (k->st == CK_TRAILER) {
      if (!linelen)
        k->st = CK_DONE;
    }
  }
  return 0;
}

/* ---- the exchange ---------------------------------------------------------------- */

static const struct egress_binding *find_binding(const struct ebox *b, const char *tok) {
  for (size_t i = 0; i < b->pol.nbindings; i++)
    if (!memcmp(b->pol.bindings[i].placeholder, tok, PH_LEN))
      return &b->pol.bindings[i];
  return NULL;
}

static bool binding_allows(const struct egress_binding *bd, const char *header, const char *host) {
  bool hdr = false, dst = false;
  for (size_t i = 0; i < bd->nheaders; i++)
    hdr |= !strcasecmp(bd->headers[i], header);
  for (size_t i = 0; i < bd->nhosts; i++)
    dst |= egress_pattern_match(&bd->hosts[i], host);
  return hdr && dst;
}

static int use_secret(struct conn *c, struct secrets *s, const struct egress_binding *bd,
                      size_t *idx, const char **why) {
  for (size_t i = 0; i < s->n; i++)
    if (s->ph[i] == bd->placeholder) {
      *idx = i;
      return 0;
    }
  struct husk_err err;
  if (!c->e->cfg.vault) {
    *why = "no-vault";
    return 502;
  }
  char *v;
  size_t l;
  if (egress_vault_get(c->e->cfg.vault, c->b->tenant, bd->name, &v, &l, &err) < 0) {
    *why = err.code == ENOENT ? "secret-not-in-vault" : "vault-error";
    return err.code == ENOENT ? 403 : 502;
  }
  s->val[s->n] = v;
  s->len[s->n] = l;
  s->ph[s->n] = bd->placeholder;
  s->indexed = false;
  if (l > s->maxlen)
    s->maxlen = l;
  secrets_add_variants(s, v, l, bd->placeholder);
  *idx = s->n++;
  return 0;
}

/* Every secret bound to the box, for the response scrub.  A secret no
 * longer in the vault cannot be looked for (its value is gone); any other
 * vault failure refuses the exchange rather than relay an unscrubbed
 * response.  0, or a status with *why. */
static int use_all_secrets(struct conn *c, struct secrets *s, const char **why) {
  for (size_t i = 0; i < c->b->pol.nbindings; i++) {
    size_t k;
    const char *w = NULL;
    int st = use_secret(c, s, &c->b->pol.bindings[i], &k, &w);
    if (st && strcmp(w, "secret-not-in-vault")) {
      *why = w;
      return st;
    }
  }
  return 0;
}

/* A growable buffer that wipes what it leaves behind: the upstream head
 * holds secret values, and a realloc would free a copy unwiped. */
struct sbuf {
  char *p;
  size_t len, cap;
  bool failed;
};

static void sbuf_add(struct sbuf *b, const char *s, size_t n) {
  if (b->failed)
    return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + n + 1)
      cap *= 2;
    char *p = malloc(cap);
    if (!p) {
      b->failed = true;
      return;
    }
    if (b->p) {
      memcpy(p, b->p, b->len);
      explicit_bzero(b->p, b->cap);
      free(b->p);
    }
    b->p = p;
    b->cap = cap;
  }
  memcpy(b->p + b->len, s, n);
  b->len += n;
  b->p[b->len] = '\0';
}

static void sbuf_str(struct sbuf *b, const char *s) { sbuf_add(b, s, strlen(s)); }

static void sbuf_wipe(struct sbuf *b) {
  if (b->p) {
    explicit_bzero(b->p, b->cap);
    free(b->p);
  }
  memset(b, 0, sizeof *b);
}

/* Build the upstream head.  Returns 0, or a status with *why. */
static int build_request(struct conn *c, struct http_head *hd, const char *host, struct secrets *s,
                         char **out, size_t *out_len, const char **why) {
  static const char *const drop[] = {"connection", "proxy-connection", "keep-alive", "proxy-authorization",
                                     "te", "upgrade", "expect", "accept-encoding"};
  for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++)
    egress_http_remove(hd, drop[i]);
  struct sbuf f = {0};
  int st = 0;
  sbuf_str(&f, hd->start[0]);
  sbuf_str(&f, " ");
  sbuf_str(&f, hd->start[1]);
  sbuf_str(&f, " ");
  sbuf_str(&f, hd->start[2]);
  sbuf_str(&f, "\r\n");
  for (size_t i = 0; i < hd->nh && !st; i++) {
    const char *v = hd->h[i].value;
    sbuf_str(&f, hd->h[i].name);
    sbuf_str(&f, ": ");
    for (const char *p = v; *p;) {
      const char *t = strstr(p, PH_PREFIX);
      if (!t) {
        sbuf_str(&f, p);
        break;
      }
      sbuf_add(&f, p, (size_t)(t - p));
      const struct egress_binding *bd = strlen(t) >= PH_LEN ? find_binding(c->b, t) : NULL;
      if (!bd) {
        st = 403;
        *why = "unknown-placeholder";
        break;
      }
      if (!binding_allows(bd, hd->h[i].name, host)) {
        st = 403;
        *why = "placeholder-not-bound-to-destination";
        break;
      }
      size_t k;
      if ((st = use_secret(c, s, bd, &k, why)))
        break;
      sbuf_add(&f, s->val[k], s->len[k]);
      p = t + PH_LEN;
    }
    sbuf_str(&f, "\r\n");
  }
  sbuf_str(&f, "Accept-Encoding: identity\r\nConnection: close\r\n\r\n");
  if (f.failed && !st) {
    st = 503;
    *why = "out-of-memory";
  }
  if (st) {
    sbuf_wipe(&f);
    return st;
  }
  *out = f.p;
  *out_len = f.len;
  return 0;
}

static int tls_upstream(struct conn *c, const struct egress_host *h, const char **why) {
  SSL *ssl = SSL_new(c->e->client_ctx);
  if (!ssl) {
    *why = "tls-setup";
    return 502;
  }
  c->up.ssl = ssl;
  struct timeval tv = {.tv_sec = c->e->cfg.idle_ms / 1000, .tv_usec = (c->e->cfg.idle_ms % 1000) * 1000};
  setsockopt(c->up.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(c->up.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  /* Blocking from here on (the timeouts above bound each call). */
  int fl = fcntl(c->up.fd, F_GETFL);
  if (fl >= 0)
    fcntl(c->up.fd, F_SETFL, fl & ~O_NONBLOCK);
  SSL_set_fd(ssl, c->up.fd);
  if (h->kind == EGRESS_HOST_NAME) {
    SSL_set_tlsext_host_name(ssl, h->name);
    SSL_set1_host(ssl, h->name);
  } else {
    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), h->name);
  }
  if (SSL_connect(ssl) != 1 || SSL_get_verify_result(ssl) != X509_V_OK) {
    ERR_clear_error();
    *why = "upstream-certificate-not-trusted";
    return 502;
  }
  return 0;
}

/* Whether a response's body is in a content coding other than identity
 * (gzip, br, deflate, zstd, or anything unknown): the scrubber reads the
 * bytes as they are and would miss a secret inside one, so such a
 * response is refused.  Upstreams are asked for identity; this is for
 * those that send a coding anyway. */
static bool coded_body(const struct http_head *rh) {
  for (size_t i = 0; i < rh->nh; i++) {
    if (strcasecmp(rh->h[i].name, "content-encoding"))
      continue;
    for (const char *p = rh->h[i].value; *p;) {
      p += strspn(p, " \t,");
      size_t n = strcspn(p, " \t,");
      if (n && !(n == 8 && !strncasecmp(p, "identity", 8)))
        return true;
      p += n;
    }
  }
  return false;
}

/* Relay the request body (raw) and process the response.  0, or a status
 * with *why when the response was refused (the box has had the proxy's
 * own reply instead, nothing of the upstream's). */
static int exchange(struct conn *c, struct secrets *s, bool head_request, const char *extra,
                    size_t extra_len, const char **why) {
  int refused = 0;
  struct scrub sc = {.s = s};
  if (extra_len) {
    if (egress_io_write_all(c, &c->up, extra, extra_len) < 0)
      return 0;
    c->bytes_up += extra_len;
  }
  size_t cap = EGRESS_HTTP_HEAD_MAX + 1, got = 0;
  cleanup_free char *hbuf = malloc(cap);
  if (!hbuf)
    return 0;
  bool in_head = true, box_open = true;
  struct chunker ck = {0};
  bool chunked = false, sized = false, done = false;
  uint64_t left = 0;
  char buf[65536];
  while (!done) {
    int ra, rb;
    if (!egress_io_wait(c, &c->box, &c->up, &ra, &rb))
      break;
    if (ra && box_open) {
      ssize_t r = egress_io_read(c, &c->box, buf, sizeof buf);
      if (r <= 0)
        box_open = false;
      else if (egress_io_write_all(c, &c->up, buf, (size_t)r) < 0)
        break;
      else
        c->bytes_up += (uint64_t)r;
    } else if (ra && !box_open && !rb) {
      /* Box side closed: only the upstream matters now. */
      struct pollfd p = {.fd = c->up.fd, .events = POLLIN};
      int t = c->e->cfg.idle_ms;
      if (!(c->up.ssl && SSL_pending(c->up.ssl)) && poll(&p, 1, t) <= 0)
        break;
      rb = 1;
    }
    if (!rb)
      continue;
    ssize_t r = egress_io_read(c, &c->up, in_head ? hbuf + got : buf, in_head ? cap - got : sizeof buf);
    if (r <= 0) {
      if (!in_head && !chunked && !sized)
        done = true; /* close-delimited body: complete */
      break;
    }
    c->bytes_down += (uint64_t)r;
    const char *body = buf;
    size_t blen = (size_t)r;
    if (in_head) {
      got += (size_t)r;
    next_head:;
      size_t end = egress_http_head_end(hbuf, got);
      if (!end) {
        if (got == cap)
          break;
        continue;
      }
      struct http_head rh;
      struct husk_err err;
      if (egress_http_parse(hbuf, end, false, &rh, &err) != 0)
        break;
      int status = atoi(rh.start[1]);
      if (status == 101) {
        egress_http_free(&rh);
        break;
      }
      /* A body the scrubber cannot read is not relayed (a head-only
       * response carries no body, whatever it says it is coded in). */
      if (status >= 200 && !head_request && status != 204 && status != 304 && coded_body(&rh)) {
        egress_http_free(&rh);
        egress_reply(c, 502, "the upstream response is compressed: it cannot be scrubbed");
        *why = "upstream-content-encoding";
        refused = 502;
        break;
      }
      /* Our own head for the box: framing replaced by the close. */
      char *oh = NULL;
      size_t ol = 0;
      FILE *f = open_memstream(&oh, &ol);
      if (!f) {
        egress_http_free(&rh);
        break;
      }
      fprintf(f, "HTTP/1.1 %s %s\r\n", rh.start[1], rh.start[2]);
      for (size_t i = 0; i < rh.nh; i++) {
        const char *n = rh.h[i].name;
        if (!strcasecmp(n, "content-length") || !strcasecmp(n, "transfer-encoding") ||
            !strcasecmp(n, "connection") || !strcasecmp(n, "keep-alive"))
          continue;
        fprintf(f, "%s: %s\r\n", n, rh.h[i].value);
      }
      fputs(status < 200 ? "\r\n" : "Connection: close\r\n\r\n", f);
      bool ok = fclose(f) == 0;
      struct scrub hs = {.s = s};
      ok = ok && scrub_feed(c, &hs, oh, ol, true) == 0;
      free(oh);
      chunked = rh.chunked;
      sized = rh.has_length;
      left = rh.length;
      egress_http_free(&rh);
      if (!ok)
        break;
      size_t rest = got - end;
      if (status < 200) {
        /* Interim response: the real head follows (maybe already here). */
        memmove(hbuf, hbuf + end, rest);
        got = rest;
        goto next_head;
      }
      in_head = false;
      if (head_request || status == 204 || status == 304) {
        done = true;
        break;
      }
      memcpy(buf, hbuf + end, rest);
      body = buf;
      blen = rest;
    }
    if (chunked) {
      if (chunk_feed(c, &ck, &sc, body, blen) < 0)
        break;
      done = ck.st == CK_DONE;
    } else if (sized) {
      size_t take = blen < left ? blen : (size_t)left;
      if (scrub_feed(c, &sc, body, take, false) < 0)
        break;
      left -= take;
      done = left == 0;
    } else if (scrub_feed(c, &sc, body, blen, false) < 0) {
      break;
    }
  }
  if (done)
    scrub_feed(c, &sc, NULL, 0, true);
  if (sc.tail)
    explicit_bzero(sc.tail, sc.tlen);
  free(sc.tail);
  return refused;
}

void egress_inject(struct conn *c, const struct egress_host *h) {
  struct husk_err err;
  const char *why = NULL;
  if (!c->b->has_ca) {
    egress_audit(c, "egress.inject", "error", 502, "no-ca");
    return;
  }
  SSL_CTX *sctx = egress_tls_server_ctx(&c->b->ca, h->name, h->kind != EGRESS_HOST_NAME, &err);
  if (!sctx) {
    egress_audit(c, "egress.inject", "error", 502, "leaf-certificate");
    return;
  }
  c->box.ssl = SSL_new(sctx);
  SSL_CTX_free(sctx); /* the SSL keeps its reference */
  if (!c->box.ssl || !SSL_set_fd(c->box.ssl, c->box.fd) || SSL_accept(c->box.ssl) != 1) {
    ERR_clear_error();
    egress_audit(c, "egress.inject", "denied", 400, "box-tls-handshake-failed");
    return;
  }
  size_t cap = EGRESS_HTTP_HEAD_MAX + 1, got = 0, end = 0;
  cleanup_free char *buf = malloc(cap);
  if (!buf)
    return;
  while (!(end = egress_http_head_end(buf, got))) {
    if (got == cap) {
      egress_reply(c, 431, "request head too large");
      egress_audit(c, "egress.inject", "denied", 431, "head-too-large");
      return;
    }
    ssize_t r = egress_io_read(c, &c->box, buf + got, cap - got);
    if (r <= 0) {
      if (got)
        egress_audit(c, "egress.inject", "denied", 400, "incomplete-head");
      return;
    }
    got += (size_t)r;
  }
  struct http_head hd;
  int st = egress_http_parse(buf, end, true, &hd, &err);
  if (st) {
    egress_reply(c, st, err.msg);
    egress_audit(c, "egress.inject", "denied", st, err.msg);
    return;
  }
  const char *host_hdr = egress_http_get(&hd, "host");
  struct egress_host hh;
  unsigned hp;
  if (!host_hdr || egress_authority_parse(host_hdr, strlen(host_hdr), 443, &hh, &hp, &err) < 0 ||
      strcmp(hh.name, h->name) || hp != c->port) {
    egress_reply(c, 421, "the Host header must name the host this connection was opened to");
    egress_audit(c, "egress.inject", "denied", 421, "host-sni-mismatch");
    egress_http_free(&hd);
    return;
  }
  if (hd.start[1][0] != '/') {
    egress_reply(c, 400, "origin-form request target required");
    egress_audit(c, "egress.inject", "denied", 400, "bad-target");
    egress_http_free(&hd);
    return;
  }
  bool head_request = !strcmp(hd.start[0], "HEAD");
  struct secrets s = {0};
  char *req = NULL;
  size_t req_len = 0;
  st = build_request(c, &hd, h->name, &s, &req, &req_len, &why);
  egress_http_free(&hd);
  size_t used_n = s.n;
  if (!st)
    st = use_all_secrets(c, &s, &why);
  if (!st)
    st = egress_dial(c, h, &why);
  if (!st)
    st = tls_upstream(c, h, &why);
  if (st) {
    egress_reply(c, st, st == 403 ? "request refused by the box's egress policy"
                                  : "cannot reach the destination safely");
    egress_audit(c, "egress.inject", st == 403 ? "denied" : "error", st, why);
  } else if (egress_io_write_all(c, &c->up, req, req_len) == 0) {
    c->bytes_up += req_len;
    char used[64];
    snprintf(used, sizeof used, "secrets=%zu", used_n);
    int rst = exchange(c, &s, head_request, buf + end, got - end, &why);
    if (rst)
      egress_audit(c, "egress.inject", "error", rst, why);
    else
      egress_audit(c, "egress.inject", "ok", 200, used);
  } else {
    egress_audit(c, "egress.inject", "error", 502, "upstream-write");
  }
  if (req) {
    explicit_bzero(req, req_len);
    free(req);
  }
  secrets_wipe(&s);
  if (c->box.ssl)
    SSL_shutdown(c->box.ssl);
}

int egress_scrubbed_relay(struct conn *c, bool head_request, const char **why) {
  struct secrets s = {0};
  int st = use_all_secrets(c, &s, why);
  if (!st)
    st = exchange(c, &s, head_request, NULL, 0, why);
  secrets_wipe(&s);
  return st;
}
