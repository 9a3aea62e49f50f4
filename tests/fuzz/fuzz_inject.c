/* Inject mode's reading of the upstream's response (src/egress/inject.c,
 * through egress_scrubbed_relay, which plain HTTP uses and inject mode
 * runs after its TLS set-up): the response head (interim 1xx heads, our
 * own head rebuilt for the box), the chunked decoder, Content-Length and
 * close-delimited bodies, and the secret scrubber, whose held-back tail
 * carries a value split across reads or chunks.
 *
 * The upstream is one end of a SOCK_SEQPACKET pair, so every piece the
 * input chooses arrives as one read; the box is a stream pair drained by
 * a helper thread.  The secrets are real vault entries (a scratch state
 * on /dev/shm, removed at exit).
 *
 * Input: flags (bit 0: the request was a HEAD; bits 1-4: which of the
 * four secrets are bound to the box), a piece size (0: the whole response
 * in one read), then the upstream's bytes.
 *
 * Property: no bound secret reaches the box raw or in an encoding the
 * scrubber claims (JSON-escaped both ways, percent-encoded in both cases,
 * the base64 and base64url characters that depend on the value alone, at
 * each alignment), at least SCRUB_VARIANT_MIN long.  The oracle computes
 * those encodings itself, and looks for them between the placeholders the
 * scrubber wrote (a placeholder next to other bytes is not a leak).
 *
 * And with no secret bound (nothing to scrub), a chunked response read in
 * one piece must reach the box de-chunked exactly as a strict decoder of
 * the harness's own reads it, up to where that decoder stops: a chunk size
 * is 1 to 16 hex digits, then the end of the line or an extension (`;`,
 * or blanks before it); a line is at most 1023 bytes with its CRLF; chunk
 * data is followed by CRLF alone. */
#define _GNU_SOURCE
#include <errno.h>
#include <ftw.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "egress/http.h"
#include "egress/proxy_internal.h"
#include "egress/vault.h"
#include "fuzz.h"
#include "state/state.h"
#include "util/clock.h"

#define NSECRETS 4
#define VARIANT_MIN 8 /* inject.c's SCRUB_VARIANT_MIN */
#define INPUT_MAX (64 * 1024)

/* Printable ASCII, each tempting a different encoding; the last is a
 * prefix of the first (the longer must still be found whole). */
static const char *const secret_val[NSECRETS] = {
    "ghp_Z9yX8wV7uT6sR5qP4oN3",
    "s3cr3t/+=\"\\ &?%:x",
    "Tk9pQr8Z",
    "ghp_Z9yX8wV7",
};

static char dir[] = "/dev/shm/husk-fuzz-inject.XXXXXX";
static struct state *st;
static struct egress_vault *vault;
static struct egress e;
static struct ebox box;

/* What may not appear in the output. */
static char *pat[NSECRETS][16];
static size_t patlen[NSECRETS][16];
static size_t npat[NSECRETS];

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
  remove(p);
  return 0;
}

static void cleanup(void) {
  egress_vault_close(vault);
  state_close(st);
  nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void pat_add(int k, char *p, size_t n) {
  if (n < VARIANT_MIN && n != strlen(secret_val[k])) {
    free(p);
    return;
  }
  pat[k][npat[k]] = p;
  patlen[k][npat[k]++] = n;
}

static void add_json(int k, bool slash) {
  const char *v = secret_val[k];
  char *r = malloc(6 * strlen(v) + 1), *w = r;
  if (!r)
    abort();
  for (; *v; v++) {
    if (*v == '"' || *v == '\\' || (slash && *v == '/'))
      *w++ = '\\';
    *w++ = *v; /* printable: nothing else is escaped */
  }
  pat_add(k, r, (size_t)(w - r));
}

static void add_pct(int k, bool lower) {
  const char *v = secret_val[k];
  const char *hx = lower ? "0123456789abcdef" : "0123456789ABCDEF";
  char *r = malloc(3 * strlen(v) + 1), *w = r;
  if (!r)
    abort();
  for (; *v; v++) {
    unsigned char c = (unsigned char)*v;
    if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
        c == '-' || c == '.' || c == '_' || c == '~') {
      *w++ = (char)c;
    } else {
      *w++ = '%';
      *w++ = hx[c >> 4];
      *w++ = hx[c & 15];
    }
  }
  pat_add(k, r, (size_t)(w - r));
}

/* The base64 characters wholly inside the value's bits when it starts
 * `align` bytes into a 3-byte group: character j covers bits 6j..6j+5. */
static void add_b64(int k, unsigned align, bool url) {
  const char *v = secret_val[k];
  size_t n = strlen(v), bits = 8 * (align + n);
  const char *al = url ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
                       : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  char *r = malloc(bits / 6 + 1), *w = r;
  if (!r)
    abort();
  for (size_t j = 0; 6 * j + 6 <= bits; j++) {
    if (6 * j < 8 * align)
      continue;
    unsigned x = 0;
    for (size_t b = 6 * j; b < 6 * j + 6; b++) {
      size_t byte = b / 8;
      unsigned c = byte < align ? 0 : (unsigned char)v[byte - align];
      x = x << 1 | ((c >> (7 - b % 8)) & 1);
    }
    *w++ = al[x];
  }
  pat_add(k, r, (size_t)(w - r));
}

static void setup(void) {
  struct husk_err err;
  char db[80];
  if (!mkdtemp(dir))
    abort();
  snprintf(db, sizeof db, "%s/husk.db", dir);
  struct state_tenant t;
  if (state_open(&st, db, &err) < 0 ||
      state_tenant_create(st, "fuzz", STATE_UNLIMITED, STATE_UNLIMITED, &t, &err) < 0 ||
      egress_vault_open(&vault, st, dir, &err) < 0)
    abort();
  atexit(cleanup);
  snprintf(box.tenant, sizeof box.tenant, "%s", t.id);
  e.cfg.vault = vault;
  e.cfg.idle_ms = 5000;
  for (int k = 0; k < NSECRETS; k++) {
    struct egress_binding *b = &box.pol.bindings[k];
    snprintf(b->name, sizeof b->name, "SECRET_%d", k);
    snprintf(b->placeholder, sizeof b->placeholder, "husk_ph_%032x", 0x5eed0 + k);
    if (egress_vault_put(vault, t.id, b->name, secret_val[k], strlen(secret_val[k]), &err) < 0)
      abort();
    char *raw = strdup(secret_val[k]);
    if (!raw)
      abort();
    pat_add(k, raw, strlen(raw));
    add_json(k, false);
    add_json(k, true);
    add_pct(k, false);
    add_pct(k, true);
    for (unsigned a = 0; a < 3; a++) {
      add_b64(k, a, false);
      add_b64(k, a, true);
    }
  }
}

/* The helper: sends the pieces upstream (then the end of the stream) and
 * collects what reaches the box until the relay closes it. */
struct peer {
  int up, box;
  const uint8_t *p;
  size_t n, piece;
  char *out;
  size_t olen, ocap;
};

static void *peer_run(void *arg) {
  struct peer *pr = arg;
  bool sending = true;
  if (!pr->n) {
    shutdown(pr->up, SHUT_WR);
    sending = false;
  }
  for (;;) {
    struct pollfd p[2] = {{.fd = pr->box, .events = POLLIN},
                          {.fd = sending ? pr->up : -1, .events = POLLOUT}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      abort();
    }
    if (p[1].revents) {
      size_t k = pr->n < pr->piece ? pr->n : pr->piece;
      ssize_t w = send(pr->up, pr->p, k, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w == (ssize_t)k) {
        pr->p += k;
        pr->n -= k;
      } else if (w >= 0 || (errno != EAGAIN && errno != EINTR)) {
        pr->n = 0; /* the relay stopped reading */
      }
      if (!pr->n) {
        shutdown(pr->up, SHUT_WR);
        sending = false;
      }
    }
    if (p[0].revents) {
      if (pr->olen == pr->ocap) {
        pr->ocap = pr->ocap ? 2 * pr->ocap : 65536;
        pr->out = realloc(pr->out, pr->ocap);
        if (!pr->out)
          abort();
      }
      ssize_t r = recv(pr->box, pr->out + pr->olen, pr->ocap - pr->olen, MSG_DONTWAIT);
      if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
        break;
      if (r > 0)
        pr->olen += (size_t)r;
    }
  }
  return NULL;
}

/* Is `at` the start of one of the box's placeholders? */
static bool placeholder_at(const char *at, size_t left) {
  if (left < EGRESS_PLACEHOLDER_LEN - 1)
    return false;
  for (int k = 0; k < NSECRETS; k++)
    if (!memcmp(at, box.pol.bindings[k].placeholder, EGRESS_PLACEHOLDER_LEN - 1))
      return true;
  return false;
}

static void check_no_secret(const char *out, size_t n, unsigned bound) {
  if (!out)
    return;
  size_t seg = 0;
  for (size_t i = 0; i <= n; i++) {
    bool ph = i < n && placeholder_at(out + i, n - i);
    if (!ph && i < n)
      continue;
    for (int k = 0; k < NSECRETS; k++) {
      if (!(bound & 1u << k))
        continue;
      for (size_t j = 0; j < npat[k]; j++)
        if (memmem(out + seg, i - seg, pat[k][j], patlen[k][j])) {
          fprintf(stderr, "secret %d reached the box in form %zu: %.*s\n", k, j,
                  (int)patlen[k][j], pat[k][j]);
          abort();
        }
    }
    if (ph)
      i += EGRESS_PLACEHOLDER_LEN - 2;
    seg = i + 1;
  }
}

/* The line starting at p[*i]: its length without the CRLF, the CRLF
 * consumed; -1 if it does not end within the line limit. */
static ssize_t ref_line(const uint8_t *p, size_t n, size_t *i) {
  for (size_t k = *i; k + 1 < n && k + 2 - *i <= 1023; k++)
    if (p[k] == '\r' && p[k + 1] == '\n') {
      ssize_t len = (ssize_t)(k - *i);
      *i = k + 2;
      return len;
    }
  return -1;
}

/* De-chunk p[0..n) into out (room for n), up to the end or the first
 * framing error; returns the bytes decoded. */
static size_t ref_dechunk(const uint8_t *p, size_t n, uint8_t *out) {
  size_t i = 0, o = 0;
  for (;;) {
    size_t at = i;
    ssize_t l = ref_line(p, n, &i);
    if (l < 0)
      return o;
    size_t d = 0;
    uint64_t v = 0;
    while (d < (size_t)l && strchr("0123456789abcdefABCDEF", p[at + d]) && p[at + d]) {
      unsigned c = p[at + d];
      v = v << 4 | (c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
      d++;
    }
    if (!d || d > 16 || (d < (size_t)l && p[at + d] != ';' && p[at + d] != ' ' && p[at + d] != '\t'))
      return o;
    if (v == 0)
      return o; /* the trailer section adds nothing */
    size_t take = n - i < v ? n - i : (size_t)v;
    memcpy(out + o, p + i, take);
    o += take;
    i += take;
    if (take < v)
      return o;
    at = i;
    if (ref_line(p, n, &i) != 0)
      return o;
  }
}

/* With nothing bound, what the box got after our head must be the
 * reference decoding of the chunked body (see the top). */
static void check_dechunked(const uint8_t *in, size_t n, bool head_request, const char *out,
                            size_t olen) {
  size_t end = egress_http_head_end((const char *)in, n);
  if (!end)
    return;
  char *h = malloc(end);
  if (!h)
    abort();
  memcpy(h, in, end);
  struct http_head rh;
  struct husk_err err;
  int rc = egress_http_parse(h, end, false, &rh, &err);
  free(h);
  if (rc != 0)
    return;
  int status = atoi(rh.start[1]);
  bool chunked = rh.chunked;
  egress_http_free(&rh);
  if (!chunked || status < 200 || status == 204 || status == 304 || head_request)
    return;
  const char *ob = out ? memmem(out, olen, "\r\n\r\n", 4) : NULL;
  if (!ob)
    abort(); /* the head was good: the box must have ours */
  ob += 4;
  size_t blen = olen - (size_t)(ob - out);
  uint8_t *want = malloc(n - end + 1);
  if (!want)
    abort();
  size_t wlen = ref_dechunk(in + end, n - end, want);
  if (wlen != blen || memcmp(want, ob, blen)) {
    fprintf(stderr, "de-chunked body: %zu bytes, the reference decodes %zu\n", blen, wlen);
    abort();
  }
  free(want);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!st)
    setup();
  if (size > INPUT_MAX)
    return 0;
  struct fz f = {data, size};
  uint8_t flags = fz_byte(&f);
  size_t piece = fz_byte(&f);
  unsigned bound = (flags >> 1) & 15;
  /* Bound bindings first, in order: the box's binding table. */
  struct egress_binding all[NSECRETS];
  memcpy(all, box.pol.bindings, sizeof all);
  size_t nb = 0;
  for (int k = 0; k < NSECRETS; k++)
    if (bound & 1u << k)
      box.pol.bindings[nb++] = all[k];
  box.pol.nbindings = nb;

  int up[2], bx[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, up) < 0 ||
      socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, bx) < 0)
    abort();
  struct peer pr = {.up = up[1], .box = bx[1], .p = f.p, .n = f.n,
                    .piece = piece ? piece : (f.n ? f.n : 1)};
  pthread_t th;
  if (pthread_create(&th, NULL, peer_run, &pr))
    abort();
  struct conn c = {.e = &e, .b = &box, .box = {.fd = bx[0]}, .up = {.fd = up[0]},
                   .deadline = mono_ms() + 60000};
  const char *why = NULL;
  if (egress_scrubbed_relay(&c, flags & 1, &why) != 0)
    abort(); /* every secret is in the vault */
  close(bx[0]);
  close(up[0]);
  pthread_join(th, NULL);
  close(bx[1]);
  close(up[1]);
  memcpy(box.pol.bindings, all, sizeof all);
  check_no_secret(pr.out, pr.olen, bound);
  if (!bound && !piece && f.n <= EGRESS_HTTP_HEAD_MAX)
    check_dechunked(f.p, f.n, flags & 1, pr.out, pr.olen);
  free(pr.out);
  return 0;
}
