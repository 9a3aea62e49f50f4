/* The preview proxy: requests for a preview URL, passed to the box's port.
 *
 * A request is a preview's when its path is /p/<token>/... (the path
 * form) or its Host is <port>-<box>-<token>.<preview domain> (the host
 * form, for apps that must live at /).  Its life:
 *
 *   1. The head is in: the token resolved (core), the preview's access
 *      checked (its tenant's key, its password, or nothing), the head's
 *      size and the announced body checked against the preview's limits,
 *      the box's port connected (core: a socket made in the box's network
 *      namespace), and the head sent on: hop-by-hop headers, husk's own
 *      credentials and X-Husk-* dropped, X-Forwarded-* set by us.
 *   2. The body, piece by piece as libmicrohttpd gives it, sent on (a
 *      chunked body re-framed as chunked); past max_body: 413.
 *   3. The whole request is in: the box's reply head read (strict parser,
 *      egress/http.h: anything two parsers could read differently is a
 *      502), its access recorded (before the reply leaves, synced with
 *      it), and the reply queued.  Its body is read as libmicrohttpd asks
 *      for it -- exactly Content-Length bytes, or de-chunked and framed
 *      again by libmicrohttpd, or up to the end of the stream -- and not
 *      one byte more: the box's socket is used for one exchange and
 *      closed, so bytes after the end of its reply reach no one (no
 *      response smuggling to the next request of a keep-alive client).
 *   4. A 101 to a WebSocket upgrade: the connection's thread relays both
 *      ways until either side closes, a limit ends it, the preview is
 *      revoked or the server stops.
 *
 * The body is the box's, untouched; of the reply's headers, hop-by-hop
 * ones are dropped, Set-Cookie loses its Domain (and, in the path form,
 * gets the preview's path), and a Location on this host is put under the
 * preview's path. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "api/internal.h"
#include "egress/http.h"
#include "husk/preview.h"
#include "util/clock.h"
#include "util/strbuf.h"

#define PV_PREFIX "/p/"
#define PV_BUF 16384
/* The reply body's blocks: what libmicrohttpd takes from the connection's
 * memory (FRONT_CONN_MEMORY) for one send. */
#define PV_BLOCK (128 * 1024)
/* The longest chunk-size line of a chunked reply from a box. */
#define PV_CHUNK_LINE_MAX 1024
/* A trailer section of a chunked reply (read and dropped). */
#define PV_TRAILER_MAX 16384

enum pv_framing { FR_NONE, FR_LENGTH, FR_CHUNKED, FR_CLOSE };
enum pv_chunk { CK_SIZE, CK_DATA, CK_DATA_END, CK_TRAILER, CK_DONE };

struct preview_req {
  struct husk_preview_info p;
  char token[HUSK_PREVIEW_SECRET_MAX];
  bool host_form;
  int up; /* the box's socket, -1 when none */
  int64_t t0_ms, deadline_ms;
  char remote[64];
  char target[1024];     /* what the box is asked for, path and query */
  bool upgrade;          /* a WebSocket upgrade was asked */
  bool reused;           /* up is a connection kept from the client's previous request */
  bool reusable;         /* a request that may use, and keep, such a connection */
  bool up_failed;        /* the box stopped taking the body (its reply may say why) */
  uint64_t recorded_out; /* the body bytes its access record says */
  bool clean;            /* the box's reply was read to its end as its framing says */
  bool no_keep;          /* the box said Connection: close (or the reply cannot be reused) */
  char *head;            /* the request head as sent to the box (resent once on a stale reuse) */
  bool chunked_up;       /* the body goes to the box chunked */
  uint64_t body_in, body_out;
  int64_t seq; /* its access record */
  /* Bytes read from the box and not yet used. */
  char *buf;
  size_t off, len;
  enum pv_framing framing;
  uint64_t left; /* FR_LENGTH: bytes to go; FR_CHUNKED: of the chunk */
  enum pv_chunk ck;
  size_t trailer_bytes;
};

/* ---- configuration ------------------------------------------------------- */

int api_preview_config_check(const char *preview_url, const char *preview_domain,
                             struct husk_err *err) {
  if (preview_url && *preview_url &&
      ((strncmp(preview_url, "http://", 7) && strncmp(preview_url, "https://", 8)) ||
       strlen(preview_url) > 512 || strpbrk(preview_url, "?# \t\r\n")))
    return husk_fail(err, EINVAL, "--preview-url must be http(s)://host[:port][/path]");
  struct husk_preview_domain d;
  return husk_preview_domain_parse(preview_domain, &d, err);
}

int api_preview_setup(struct api_server *s, struct husk_err *err) {
  if (api_preview_config_check(s->cfg.preview_url, s->cfg.preview_domain, err) < 0 ||
      husk_preview_domain_parse(s->cfg.preview_domain, &s->preview_domain, err) < 0)
    return -1;
  snprintf(s->preview_scheme, sizeof s->preview_scheme, "%s",
           s->cfg.preview_url && !strncmp(s->cfg.preview_url, "https://", 8) ? "https" : "http");
  return 0;
}

/* ---- which requests ------------------------------------------------------ */

/* The Host header's name (no port), lower case, into out; false if none. */
static bool host_name(struct MHD_Connection *conn, char *out, size_t size) {
  const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST);
  if (!h)
    return false;
  size_t n = strcspn(h, ":");
  if (n == 0 || n >= size)
    return false;
  for (size_t i = 0; i < n; i++)
    out[i] = (h[i] >= 'A' && h[i] <= 'Z') ? (char)(h[i] - 'A' + 'a') : h[i];
  out[n] = '\0';
  if (n > 0 && out[n - 1] == '.')
    out[n - 1] = '\0'; /* the absolute form of the same name */
  return true;
}

/* The label under the preview domain, or NULL. */
static const char *preview_label(struct api_server *s, const char *host) {
  const char *dom = s->preview_domain.name;
  size_t hl = strlen(host), dl = strlen(dom);
  if (!dl || hl <= dl + 1 || host[hl - dl - 1] != '.' || strcmp(host + hl - dl, dom) != 0)
    return NULL;
  return host;
}

bool api_preview_wanted(struct api_server *s, struct MHD_Connection *conn, const char *raw_uri) {
  char host[300];
  if (s->preview_domain.name[0] && host_name(conn, host, sizeof host) && preview_label(s, host))
    return true;
  return raw_uri && (!strncmp(raw_uri, PV_PREFIX, 3) || !strcmp(raw_uri, "/p"));
}

/* ---- small I/O helpers --------------------------------------------------- */

static int64_t left_ms(const struct preview_req *pv, uint32_t idle_ms) {
  int64_t left = pv->deadline_ms - mono_ms();
  if (left <= 0)
    return 0;
  return left < idle_ms ? left : idle_ms;
}

/* Write all of buf to the box, within the preview's idle and total
 * limits, giving up when the client hangs up or the server stops.  0, or
 * -1 with errno (ETIMEDOUT for a limit). */
static int up_write(struct req *r, const void *buf, size_t n) {
  struct preview_req *pv = r->pv;
  const char *p = buf;
  while (n > 0) {
    ssize_t w = send(pv->up, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      p += w;
      n -= (size_t)w;
      continue;
    }
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0 && errno != EAGAIN)
      return -1;
    int64_t t = left_ms(pv, pv->p.limits.idle_ms);
    if (t <= 0) {
      errno = ETIMEDOUT;
      return -1;
    }
    struct pollfd pf[2] = {{.fd = pv->up, .events = POLLOUT},
                           {.fd = r->srv->stop_fd, .events = POLLIN}};
    int rc = poll(pf, 2, (int)t);
    if (rc < 0 && errno != EINTR)
      return -1;
    if (rc == 0) {
      errno = ETIMEDOUT;
      return -1;
    }
    if (rc > 0 && pf[1].revents) {
      errno = ECANCELED;
      return -1;
    }
  }
  return 0;
}

/* Wait until the box's socket has something to read, within the
 * preview's idle and total limits: 0, or -1 with errno ETIMEDOUT (a
 * limit), ECONNABORTED (the client went away) or ECANCELED (the server
 * stops). */
static int up_wait(struct req *r) {
  struct preview_req *pv = r->pv;
  int64_t t = left_ms(pv, pv->p.limits.idle_ms);
  if (t <= 0) {
    errno = ETIMEDOUT;
    return -1;
  }
  switch (api_wait_srv(r->srv, api_conn_fd(r), pv->up, (int)t, true)) {
  case API_WAIT_READY: return 0;
  case API_WAIT_TIMEOUT: errno = ETIMEDOUT; return -1;
  case API_WAIT_GONE: errno = ECONNABORTED; return -1;
  case API_WAIT_STOPPING: errno = ECANCELED; return -1;
  }
  return -1;
}

/* Read more from the box into pv->buf (compacting it first).  >0 bytes,
 * 0 at the end of its stream, -1 with errno (ETIMEDOUT: a limit;
 * ECONNABORTED: the client went away; ECANCELED: the server stops). */
static ssize_t up_fill(struct req *r) {
  struct preview_req *pv = r->pv;
  if (pv->off > 0) {
    memmove(pv->buf, pv->buf + pv->off, pv->len - pv->off);
    pv->len -= pv->off;
    pv->off = 0;
  }
  if (pv->len == PV_BUF) {
    errno = ENOBUFS;
    return -1;
  }
  for (;;) {
    ssize_t n = recv(pv->up, pv->buf + pv->len, PV_BUF - pv->len, MSG_DONTWAIT);
    if (n >= 0) {
      pv->len += (size_t)n;
      return n;
    }
    if (errno == EINTR)
      continue;
    if (errno != EAGAIN || up_wait(r) < 0)
      return -1;
  }
}

/* Up to max bytes of the box's stream into out: what is buffered first,
 * else read straight into out (a large body is not copied twice).  >0
 * bytes, 0 at the end of the stream, -1 (errno as up_fill's). */
static ssize_t up_take(struct req *r, char *out, size_t max) {
  struct preview_req *pv = r->pv;
  if (pv->off < pv->len) {
    size_t n = pv->len - pv->off;
    if (n > max)
      n = max;
    memcpy(out, pv->buf + pv->off, n);
    pv->off += n;
    return (ssize_t)n;
  }
  for (;;) {
    ssize_t n = recv(pv->up, out, max, MSG_DONTWAIT);
    if (n > 0) {
      /* And what else is there already, without waiting: fewer, fuller
       * sends to the client. */
      size_t got = (size_t)n;
      while (got < max) {
        ssize_t more = recv(pv->up, out + got, max - got, MSG_DONTWAIT);
        if (more <= 0)
          break; /* nothing more now (or the end: the next call sees it) */
        got += (size_t)more;
      }
      return (ssize_t)got;
    }
    if (n == 0)
      return 0;
    if (errno == EINTR)
      continue;
    if (errno != EAGAIN || up_wait(r) < 0)
      return -1;
  }
}

/* ---- errors -------------------------------------------------------------- */

static void record(struct req *r, int status);

/* The proxy's own reply; a refusal of a preview that exists is recorded
 * in its access log (a wrong password is as much its history as a page
 * served). */
static enum MHD_Result pv_error(struct req *r, unsigned status, const char *code, const char *msg) {
  if (r->pv && r->pv->p.id[0] && r->pv->seq == 0 && !r->responded)
    record(r, (int)status);
  /* Decided: the tenant's share is free again, also while a refused
   * body still drains. */
  api_release(r);
  return api_reply_error(r, status, code, "%s", msg);
}

/* pv_error with a message of a format. */
static enum MHD_Result pv_errorf(struct req *r, unsigned status, const char *code, const char *fmt,
                                 ...) __attribute__((format(printf, 4, 5)));
static enum MHD_Result pv_errorf(struct req *r, unsigned status, const char *code, const char *fmt,
                                 ...) {
  char msg[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return pv_error(r, status, code, msg);
}

/* A core error of resolve or open, as the client sees it. */
static enum MHD_Result pv_core_error(struct req *r, const struct husk_err *err) {
  switch (err->code) {
  case ENOENT: return pv_error(r, 404, "not_found", err->msg[0] ? err->msg : "no such preview");
  case EKEYEXPIRED: return pv_error(r, 403, "preview_expired", "this preview has expired");
  case EKEYREVOKED: return pv_error(r, 403, "preview_revoked", "this preview was revoked");
  case EAGAIN:
    snprintf(r->xhdr_name, sizeof r->xhdr_name, "Retry-After");
    snprintf(r->xhdr_value, sizeof r->xhdr_value, "1");
    return pv_error(r, 503, "unavailable", err->msg);
  case EBUSY: return pv_error(r, 409, "conflict", err->msg);
  case ESRCH: return pv_error(r, 410, "gone", "the sandbox of this preview has ended");
  case ECONNREFUSED: return pv_error(r, 502, "bad_gateway", err->msg);
  case ETIMEDOUT:
    return pv_error(r, 504, "gateway_timeout", "the sandbox's port did not answer in time");
  default:
    api_log(r->srv, "preview %s: %s", r->pv ? r->pv->p.id : "-", err->msg);
    return pv_error(r, 502, "bad_gateway", "the sandbox's port cannot be reached");
  }
}

/* ---- the connection to the box ------------------------------------------ */

static bool in_connection(const char *conn_hdr, const char *name);

static void close_upstream(void *ctx, int fd) { husk_preview_close(ctx, fd); }

static int open_upstream(struct req *r, struct husk_err *err) {
  struct preview_req *pv = r->pv;
  pv->up = husk_preview_open(r->srv->cfg.mgr, &pv->p, err);
  pv->reused = false;
  return pv->up < 0 ? -1 : 0;
}

/* Whether nothing is waiting to be read on fd and it is not closed: a
 * kept connection with bytes on it (a box sending past its reply) or
 * closed by the box is not used again. */
static bool upstream_quiet(int fd) {
  char c;
  ssize_t n = recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* The connection kept with this client's connection for this preview, if
 * it is still good; else -1. */
static int take_upstream(struct req *r) {
  struct preview_req *pv = r->pv;
  int fd = conn_watch_take(&r->srv->front.watch, r->conn, pv->p.id);
  if (fd >= 0 && !upstream_quiet(fd)) {
    husk_preview_close(r->srv->cfg.mgr, fd);
    fd = -1;
  }
  return fd;
}

/* After the exchange: keep the connection to the box with the client's
 * connection for its next request through this preview -- only after a
 * reply read exactly to its end, with nothing after it, the request
 * completed, and neither side asking to close.  The connection is never
 * shared with another client or preview, so whatever a box sends on it
 * can only answer this client's requests to this box. */
static void keep_upstream(struct req *r, enum MHD_RequestTerminationCode toe) {
  struct preview_req *pv = r->pv;
  if (pv->up < 0 || !pv->reusable || !pv->clean || pv->no_keep || pv->off != pv->len ||
      toe != MHD_REQUEST_TERMINATED_COMPLETED_OK || !upstream_quiet(pv->up))
    return;
  const char *c = api_header(r, "Connection");
  if (c && in_connection(c, "close"))
    return; /* the client's connection ends: nothing to keep it for */
  conn_watch_keep(&r->srv->front.watch, r->conn, pv->up, pv->p.id, close_upstream, r->srv->cfg.mgr);
  pv->up = -1;
}

/* ---- 1. the head --------------------------------------------------------- */

/* Whether header `name` is hop-by-hop, or one the proxy sets itself. */
static bool hop_header(const char *name) {
  static const char *const drop[] = {
      "Connection",
      "Keep-Alive",
      "Proxy-Connection",
      "TE",
      "Trailer",
      "Transfer-Encoding",
      "Upgrade",
      "Proxy-Authorization",
      "Content-Length",
      "Expect",
      "Forwarded",
      "X-Forwarded-For",
      "X-Forwarded-Proto",
      "X-Forwarded-Host",
      "X-Forwarded-Prefix",
      "X-Forwarded-Port",
      "X-Real-IP",
  };
  for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++)
    if (!strcasecmp(name, drop[i]))
      return true;
  return !strncasecmp(name, "X-Husk-", 7);
}

/* Whether `token` is listed in the request's Connection header (those
 * headers are hop-by-hop too). */
static bool in_connection(const char *conn_hdr, const char *name) {
  if (!conn_hdr)
    return false;
  size_t nl = strlen(name);
  for (const char *p = conn_hdr; *p;) {
    p += strspn(p, " \t,");
    size_t l = strcspn(p, " \t,");
    if (l == nl && !strncasecmp(p, name, l))
      return true;
    p += l;
  }
  return false;
}

struct head_ctx {
  struct req *r;
  struct strbuf *b;
  size_t bytes; /* the client's header lines, as sent */
  bool drop_auth;
  bool drop_basic; /* a public path-form preview: HTTP Basic credentials are another's */
  const char *conn_hdr;
  unsigned content_lengths;
  bool bad; /* a name or value that cannot be passed on as it is */
};

/* A token character of RFC 9110 (header names, methods). */
static bool tchar(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool token_ok(const char *t) {
  if (!*t)
    return false;
  for (; *t; t++)
    if (!tchar((unsigned char)*t))
      return false;
  return true;
}

/* A header value as the box will read it: visible characters, spaces and
 * tabs only.  libmicrohttpd passes a bare CR in a value, which a server
 * in the box may take for the end of a line (a header of the client's
 * choosing ahead of the proxy's own). */
static bool value_ok(const char *v) {
  for (; *v; v++) {
    unsigned char c = (unsigned char)*v;
    if ((c < 0x20 && c != '\t') || c == 0x7f)
      return false;
  }
  return true;
}

/* The request target as passed on: no control character, space or DEL
 * (libmicrohttpd's parse lets some through). */
static bool target_ok(const char *t) {
  for (; *t; t++) {
    unsigned char c = (unsigned char)*t;
    if (c <= 0x20 || c == 0x7f)
      return false;
  }
  return true;
}

static bool is_husk_key(struct api_server *s, const char *auth) {
  if (strncasecmp(auth, "Bearer ", 7) != 0)
    return false;
  const char *k = auth + 7;
  k += strspn(k, " ");
  size_t kl = strcspn(k, " ");
  return !strncmp(k, STATE_KEY_PREFIX, strlen(STATE_KEY_PREFIX)) ||
         api_key_equal(k, kl, s->admin_key, s->admin_key_len);
}

static enum MHD_Result add_header(void *cls, enum MHD_ValueKind kind, const char *name,
                                  const char *value) {
  struct head_ctx *h = cls;
  (void)kind;
  if (!name)
    return MHD_YES;
  if (!value)
    value = "";
  h->bytes += strlen(name) + strlen(value) + 4;
  if (!token_ok(name) || !value_ok(value)) {
    h->bad = true;
    return MHD_NO;
  }
  if (!strcasecmp(name, MHD_HTTP_HEADER_CONTENT_LENGTH))
    h->content_lengths++;
  if (hop_header(name) || (strcasecmp(name, "Host") && in_connection(h->conn_hdr, name)))
    return MHD_YES;
  if (!strcasecmp(name, "Authorization") && (h->drop_auth || is_husk_key(h->r->srv, value) ||
                                             (h->drop_basic && !strncasecmp(value, "Basic", 5))))
    return MHD_YES;
  if (!strcasecmp(name, "Sec-WebSocket-Key") || !strcasecmp(name, "Sec-WebSocket-Version") ||
      !strcasecmp(name, "Sec-WebSocket-Protocol") ||
      !strcasecmp(name, "Sec-WebSocket-Extensions")) {
    if (!h->r->pv->upgrade)
      return MHD_YES;
  }
  strbuf_str(h->b, name);
  strbuf_add(h->b, ": ", 2);
  strbuf_str(h->b, value);
  strbuf_add(h->b, "\r\n", 2);
  return MHD_YES;
}

/* The presented token and where the box's path starts: the path form's
 * "/p/<token>/rest", or the host form's label "<port>-<box>-<token>". */
static enum MHD_Result locate(struct req *r, const char **rest) {
  struct preview_req *pv = r->pv;
  struct api_server *s = r->srv;
  const char *uri = r->raw_uri ? r->raw_uri : "/";
  char host[300];
  const char *label = NULL;
  if (s->preview_domain.name[0] && host_name(r->conn, host, sizeof host))
    label = preview_label(s, host);
  if (label) {
    pv->host_form = true;
    size_t ll = strlen(label) - strlen(s->preview_domain.name) - 1;
    const char *last = NULL;
    for (size_t i = 0; i < ll; i++)
      if (label[i] == '-')
        last = label + i;
    if (!last || (size_t)(label + ll - last - 1) != HUSK_PREVIEW_TOKEN_LEN)
      return pv_error(r, 404, "not_found", "no such preview");
    memcpy(pv->token, last + 1, HUSK_PREVIEW_TOKEN_LEN);
    pv->token[HUSK_PREVIEW_TOKEN_LEN] = '\0';
    *rest = uri;
    return MHD_YES;
  }
  if (strncmp(uri, PV_PREFIX, 3) != 0)
    return pv_error(r, 404, "not_found", "no such preview");
  const char *t = uri + 3;
  size_t tl = strcspn(t, "/?");
  if (tl != HUSK_PREVIEW_TOKEN_LEN)
    return pv_error(r, 404, "not_found", "no such preview");
  memcpy(pv->token, t, tl);
  pv->token[tl] = '\0';
  *rest = t + tl;
  return MHD_YES;
}

/* The host form's name must say the preview's port and box. */
static bool host_matches(struct req *r) {
  struct preview_req *pv = r->pv;
  char host[300], want[400], label[HUSK_BOX_ID_MAX];
  if (!host_name(r->conn, host, sizeof host))
    return false;
  husk_preview_box_label(pv->p.box_id, label, sizeof label);
  for (char *c = label; *c; c++)
    if (*c >= 'A' && *c <= 'Z')
      *c = (char)(*c - 'A' + 'a');
  snprintf(want, sizeof want, "%u-%s-%s.%s", pv->p.port, label, pv->token,
           r->srv->preview_domain.name);
  for (char *c = want; *c; c++)
    if (*c >= 'A' && *c <= 'Z')
      *c = (char)(*c - 'A' + 'a');
  return strcmp(host, want) == 0;
}

static enum MHD_Result authorize(struct req *r) {
  struct preview_req *pv = r->pv;
  struct husk_mgr *m = r->srv->cfg.mgr;
  if (pv->p.access == HUSK_PREVIEW_PUBLIC)
    return MHD_YES;
  const char *h = api_header(r, MHD_HTTP_HEADER_AUTHORIZATION);
  if (pv->p.access == HUSK_PREVIEW_KEY) {
    char key[STATE_KEY_SIZE + 1];
    const char *k = h && !strncasecmp(h, "Bearer ", 7) ? h + 7 + strspn(h + 7, " ") : NULL;
    size_t kl = k ? strcspn(k, " ") : 0;
    bool ok = false;
    if (k && kl > 0 && kl < sizeof key) {
      memcpy(key, k, kl);
      key[kl] = '\0';
      ok = husk_preview_key_ok(m, &pv->p, key);
      memset(key, 0, sizeof key);
    }
    if (ok)
      return MHD_YES;
    return pv_error(r, 401, "unauthorized",
                    "this preview needs `Authorization: Bearer <key>` with a key of its tenant");
  }
  /* HTTP Basic, any user name. */
  if (h && !strncasecmp(h, "Basic ", 6)) {
    const char *b = h + 6 + strspn(h + 6, " ");
    size_t bl = strcspn(b, " ");
    unsigned char *dec = NULL;
    size_t dl = 0;
    if (bl < 1024 && b64_decode(b, bl, &dec, &dl) == 0) {
      const unsigned char *colon = memchr(dec, ':', dl);
      bool ok = colon && husk_preview_password_ok(m, &pv->p, (const char *)colon + 1,
                                                  dl - (size_t)(colon + 1 - dec));
      OPENSSL_cleanse(dec, dl);
      free(dec);
      if (ok)
        return MHD_YES;
    }
  }
  snprintf(r->xhdr_name, sizeof r->xhdr_name, "WWW-Authenticate");
  /* A realm of its own: a browser answers a challenge with the
   * credentials it holds for that realm, and no other preview's page can
   * send one (box challenges are dropped in the path form). */
  snprintf(r->xhdr_value, sizeof r->xhdr_value,
           "Basic realm=\"husk preview %s\", charset=\"UTF-8\"", pv->p.id);
  return pv_error(r, 401, "unauthorized", "this preview needs its password (HTTP Basic)");
}

static void client_address(struct req *r, char *out, size_t size) {
  snprintf(out, size, "-");
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (!ci || !ci->client_addr)
    return;
  const struct sockaddr *sa = ci->client_addr;
  if (sa->sa_family == AF_INET)
    inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, out,
              (socklen_t)size);
  else if (sa->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, out,
              (socklen_t)size);
}

static bool wants_websocket(struct req *r) {
  const char *up = api_header(r, "Upgrade");
  const char *co = api_header(r, "Connection");
  return up && co && !strcasecmp(up, "websocket") && in_connection(co, "upgrade") &&
         !strcmp(r->method, "GET");
}

/* A preview's request acknowledges nothing of husk's state: it opts out
 * of the sync a reply waits for (on_request's deferral, which would sync
 * every commit another thread made before this one read the preview's
 * row); its access record is synced in a batch (husk_preview_record). */
static void no_reply_sync(struct req *r) { state_defer_forget(r->srv->cfg.state); }

enum MHD_Result api_preview_begin(struct req *r) {
  struct api_server *s = r->srv;
  no_reply_sync(r);
  struct preview_req *pv = calloc(1, sizeof *pv);
  if (!pv)
    return MHD_NO;
  pv->up = -1;
  r->pv = pv;
  pv->t0_ms = mono_ms();
  client_address(r, pv->remote, sizeof pv->remote);
  /* The daemon's log names the preview, never its token (the URL is the
   * capability): whatever follows /p/ is hidden from the first refusal
   * on, until the token resolves. */
  if (!strncmp(r->path, PV_PREFIX, 3)) {
    const char *after = r->path + 3 + strcspn(r->path + 3, "/");
    memmove(r->path + 4, after, strlen(after) + 1);
    r->path[3] = '*';
  }
  if (front_has_nul(r->conn))
    return pv_error(r, 400, "bad_request", "NUL bytes are not allowed in the query or headers");
  const char *rest = NULL;
  enum MHD_Result ret = locate(r, &rest);
  if (r->responded || ret != MHD_YES)
    return ret;
  int rl = (int)strcspn(rest, "?");
  struct husk_err err;
  if (husk_preview_resolve(s->cfg.mgr, pv->token, &pv->p, &err) < 0)
    return pv_core_error(r, &err);
  if (!pv->host_form)
    snprintf(r->path, sizeof r->path, "/p/%s%.*s", pv->p.id, rl, rest);
  if (pv->host_form && !host_matches(r))
    return pv_error(r, 404, "not_found", "no such preview");
  snprintf(r->audit_box, sizeof r->audit_box, "%s", pv->p.box_id);
  ret = authorize(r);
  if (r->responded || ret != MHD_YES)
    return ret;
  /* Counted in the tenant's share of the connection threads for preview
   * traffic, apart from its API requests': whoever holds a preview URL
   * can slow that tenant's previews, never another tenant, nor the
   * tenant's own calls (to revoke the preview, say). */
  snprintf(r->tenant, sizeof r->tenant, "%s", pv->p.tenant_id);
  ret = api_admit_preview(r);
  if (r->responded || ret != MHD_YES)
    return ret;
  /* The path form without its slash: the app's relative URLs need it. */
  if (!pv->host_form && (rest[0] == '\0' || rest[0] == '?')) {
    snprintf(r->xhdr_name, sizeof r->xhdr_name, "Location");
    size_t restlen = strlen(rest);
    if (restlen + HUSK_PREVIEW_TOKEN_LEN + 5 < sizeof r->xhdr_value)
      snprintf(r->xhdr_value, sizeof r->xhdr_value, "/p/%s/%.*s", pv->token, (int)restlen, rest);
    else
      snprintf(r->xhdr_value, sizeof r->xhdr_value, "/p/%s/", pv->token);
    return pv_error(r, 308, "moved", "the preview lives under its path with a final slash");
  }
  if (strlen(rest) >= sizeof pv->target)
    return pv_error(r, 414, "uri_too_long", "the request target is too long");
  snprintf(pv->target, sizeof pv->target, "%s", rest);
  if (!token_ok(r->method) || !target_ok(pv->target) || pv->target[0] != '/')
    return pv_error(r, 400, "bad_request",
                    "the method or the path holds a character that cannot be passed on");
  /* Nothing through a preview outlasts it (its expiry is wall time). */
  pv->deadline_ms = pv->t0_ms + pv->p.limits.max_duration_ms;
  int64_t to_expiry = pv->p.expires_ms - state_now_ms();
  if (pv->t0_ms + to_expiry < pv->deadline_ms)
    pv->deadline_ms = pv->t0_ms + to_expiry;
  pv->upgrade = wants_websocket(r);

  /* The announced body. */
  const char *cl = api_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
  const char *te = api_header(r, MHD_HTTP_HEADER_TRANSFER_ENCODING);
  uint64_t body_len = 0;
  if (cl) {
    if (!*cl || strspn(cl, "0123456789") != strlen(cl) || strlen(cl) > 19)
      return pv_error(r, 400, "bad_request", "bad Content-Length");
    body_len = strtoull(cl, NULL, 10);
    if (body_len > pv->p.limits.max_body)
      return pv_errorf(r, 413, "payload_too_large",
                       "this preview takes request bodies of at most %llu bytes",
                       (unsigned long long)pv->p.limits.max_body);
  }
  pv->chunked_up = te != NULL; /* libmicrohttpd accepts only "chunked" */
  /* Only a GET, HEAD or OPTIONS without a body goes on a kept connection
   * or keeps one: one that failed on a kept connection may be sent again
   * (RFC 9110: idempotent), and no body the box may have left unread can
   * run into the next request -- which, behind a proxy that shares its
   * connections, may be another person's. */
  pv->reusable =
      !cl && !te && !pv->upgrade &&
      (!strcmp(r->method, "GET") || !strcmp(r->method, "HEAD") || !strcmp(r->method, "OPTIONS"));

  /* The head for the box. */
  struct strbuf b = {0};
  const char *conn_hdr = api_header(r, "Connection");
  struct head_ctx hc = {.r = r,
                        .b = &b,
                        .conn_hdr = conn_hdr,
                        .drop_auth = pv->p.access != HUSK_PREVIEW_PUBLIC,
                        .drop_basic = !pv->host_form};
  strbuf_str(&b, r->method);
  strbuf_chr(&b, ' ');
  strbuf_str(&b, pv->target);
  strbuf_str(&b, " HTTP/1.1\r\n");
  MHD_get_connection_values(r->conn, MHD_HEADER_KIND, add_header, &hc);
  if (hc.bad || hc.content_lengths > 1 || (hc.content_lengths && te)) {
    free(strbuf_take(&b));
    return pv_error(r, 400, "bad_request",
                    "a header name or value holds a character that cannot be passed on, or the "
                    "body's length is given twice");
  }
  if (hc.bytes > pv->p.limits.max_header) {
    free(strbuf_take(&b));
    return pv_errorf(r, 431, "header_too_large",
                     "this preview takes header lines of at most %u bytes",
                     pv->p.limits.max_header);
  }
  const char *host = api_header(r, MHD_HTTP_HEADER_HOST);
  if (!api_header(r, MHD_HTTP_HEADER_HOST))
    strbuf_str(&b, "Host: localhost\r\n");
  strbuf_str(&b, "X-Forwarded-For: ");
  strbuf_str(&b, pv->remote);
  strbuf_str(&b, "\r\nX-Forwarded-Proto: ");
  strbuf_str(&b, pv->host_form ? s->preview_domain.scheme : s->preview_scheme);
  if (host) {
    strbuf_str(&b, "\r\nX-Forwarded-Host: ");
    strbuf_str(&b, host);
  }
  if (!pv->host_form) {
    strbuf_str(&b, "\r\nX-Forwarded-Prefix: /p/");
    strbuf_str(&b, pv->token);
  }
  strbuf_str(&b, "\r\n");
  /* Otherwise keep-alive (HTTP/1.1's default): the connection may serve
   * this client's next request through this preview (keep_upstream). */
  if (pv->upgrade)
    strbuf_str(&b, "Connection: Upgrade\r\nUpgrade: websocket\r\n");
  if (pv->chunked_up) {
    strbuf_str(&b, "Transfer-Encoding: chunked\r\n");
  } else if (cl) {
    char clh[48];
    snprintf(clh, sizeof clh, "Content-Length: %llu\r\n", (unsigned long long)body_len);
    strbuf_str(&b, clh);
  }
  strbuf_str(&b, "\r\n");
  char *head = strbuf_take(&b);
  if (!head)
    return api_reply_error(r, 500, "internal_error", "out of memory");

  pv->head = head;
  pv->buf = malloc(PV_BUF);
  if (!pv->buf)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  /* A request without a body may go on the connection this client's
   * previous request through this preview left open: if the box closed
   * it meanwhile, the head is sent again on a new one (api_preview_end),
   * which a body already sent would not allow. */
  if (pv->reusable)
    pv->up = take_upstream(r);
  pv->reused = pv->up >= 0;
  if (!pv->reused && open_upstream(r, &err) < 0)
    return pv_core_error(r, &err);
  if (up_write(r, head, strlen(head)) < 0 && !pv->reused)
    return pv_error(r, errno == ETIMEDOUT ? 504 : 502,
                    errno == ETIMEDOUT ? "gateway_timeout" : "bad_gateway",
                    "the sandbox's port closed the connection");
  return MHD_YES;
}

/* ---- 2. the body --------------------------------------------------------- */

enum MHD_Result api_preview_body(struct req *r, const char *data, size_t n) {
  struct preview_req *pv = r->pv;
  no_reply_sync(r);
  if (pv->body_in + n > pv->p.limits.max_body)
    return pv_errorf(r, 413, "payload_too_large",
                     "this preview takes request bodies of at most %llu bytes",
                     (unsigned long long)pv->p.limits.max_body);
  pv->body_in += n;
  if (pv->up_failed)
    return MHD_YES;
  int rc = 0;
  if (pv->chunked_up) {
    char sz[24];
    int l = snprintf(sz, sizeof sz, "%zx\r\n", n);
    rc = up_write(r, sz, (size_t)l);
    if (rc == 0)
      rc = up_write(r, data, n);
    if (rc == 0)
      rc = up_write(r, "\r\n", 2);
  } else {
    rc = up_write(r, data, n);
  }
  if (rc < 0 && errno == ETIMEDOUT)
    return pv_error(r, 504, "gateway_timeout",
                    "the sandbox's port stopped taking the request body");
  if (rc < 0) {
    /* The box closed its side: it may have answered already (a refusal
     * of an upload): the rest of the body is dropped, and its reply read
     * at the end. */
    pv->up_failed = true;
    shutdown(pv->up, SHUT_WR);
  }
  return MHD_YES;
}

/* ---- 3. the reply -------------------------------------------------------- */

/* De-chunk the box's reply into buf[0..max): bytes, 0 at its end, -1 on
 * a framing error or a failed read. */
static ssize_t dechunk(struct req *r, char *out, size_t max) {
  struct preview_req *pv = r->pv;
  for (;;) {
    if (pv->ck == CK_DONE)
      return 0;
    if (pv->ck == CK_DATA) {
      if (pv->off == pv->len && up_fill(r) <= 0)
        return -1;
      size_t n = pv->len - pv->off;
      if (n > pv->left)
        n = (size_t)pv->left;
      if (n > max)
        n = max;
      memcpy(out, pv->buf + pv->off, n);
      pv->off += n;
      pv->left -= n;
      if (pv->left == 0)
        pv->ck = CK_DATA_END;
      return (ssize_t)n;
    }
    /* A line: the chunk's size, the CRLF after its data, or a trailer. */
    char *line = pv->buf + pv->off;
    char *nl = memchr(line, '\n', pv->len - pv->off);
    if (!nl) {
      if (pv->len - pv->off >= PV_CHUNK_LINE_MAX || up_fill(r) <= 0)
        return -1;
      continue;
    }
    size_t ll = (size_t)(nl - line) + 1;
    if (ll < 2 || line[ll - 2] != '\r')
      return -1; /* bare LF */
    pv->off += ll;
    ll -= 2;
    if (pv->ck == CK_DATA_END) {
      if (ll != 0)
        return -1;
      pv->ck = CK_SIZE;
    } else if (pv->ck == CK_SIZE) {
      uint64_t v = 0;
      size_t i = 0;
      for (; i < ll; i++) {
        char c = line[i];
        int d = (c >= '0' && c <= '9')   ? c - '0'
                : (c >= 'a' && c <= 'f') ? c - 'a' + 10
                : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                         : -1;
        if (d < 0)
          break;
        if (i >= 15)
          return -1;
        v = v * 16 + (uint64_t)d;
      }
      if (i == 0 || (i < ll && line[i] != ';' && line[i] != ' ' && line[i] != '\t'))
        return -1;
      pv->left = v;
      pv->ck = v ? CK_DATA : CK_TRAILER;
    } else { /* CK_TRAILER: dropped, up to the blank line */
      pv->trailer_bytes += ll + 2;
      if (pv->trailer_bytes > PV_TRAILER_MAX)
        return -1;
      if (ll == 0)
        pv->ck = CK_DONE;
    }
  }
}

static ssize_t body_reader(void *cls, uint64_t pos, char *out, size_t max) {
  struct req *r = cls;
  struct preview_req *pv = r->pv;
  (void)pos;
  ssize_t n = 0;
  switch (pv->framing) {
  case FR_NONE: return MHD_CONTENT_READER_END_OF_STREAM;
  case FR_LENGTH:
    if (pv->left == 0)
      return MHD_CONTENT_READER_END_OF_STREAM;
    if ((uint64_t)max > pv->left)
      max = (size_t)pv->left; /* never a byte past the reply's end */
    n = up_take(r, out, max);
    if (n <= 0)
      return MHD_CONTENT_READER_END_WITH_ERROR;
    pv->left -= (uint64_t)n;
    pv->clean = pv->left == 0;
    break;
  case FR_CHUNKED:
    n = dechunk(r, out, max);
    if (n == 0) {
      pv->clean = true;
      return MHD_CONTENT_READER_END_OF_STREAM;
    }
    if (n < 0)
      return MHD_CONTENT_READER_END_WITH_ERROR;
    break;
  case FR_CLOSE:
    n = up_take(r, out, max);
    if (n == 0)
      return MHD_CONTENT_READER_END_OF_STREAM;
    if (n < 0)
      return MHD_CONTENT_READER_END_WITH_ERROR;
    break;
  }
  pv->body_out += (uint64_t)n;
  return n;
}

/* Set-Cookie without Domain (the box may not set cookies for any other
 * name), and in the path form with the preview's path. */
static bool wsp(char c) { return c == ' ' || c == '\t'; }

/* Set-Cookie rebuilt from its parts as a browser parses them (RFC 6265
 * 5.2: attributes split at ';', names and values trimmed of spaces and
 * tabs, names case-insensitive): without Domain, so that the box cannot
 * set a cookie for any other name than the one it is reached by; in the
 * path form with Path under the preview's prefix. */
static char *cookie_fix(struct preview_req *pv, const char *v) {
  struct strbuf b = {0};
  const char *semi = strchr(v, ';');
  strbuf_add(&b, v, semi ? (size_t)(semi - v) : strlen(v));
  bool had_path = false;
  for (const char *a = semi; a && *a;) {
    a++;
    const char *next = strchr(a, ';');
    const char *end = next ? next : a + strlen(a);
    while (a < end && wsp(*a))
      a++;
    while (end > a && wsp(end[-1]))
      end--;
    const char *eq = memchr(a, '=', (size_t)(end - a));
    const char *ne = eq ? eq : end; /* the name's end */
    while (ne > a && wsp(ne[-1]))
      ne--;
    const char *val = eq ? eq + 1 : end;
    while (val < end && wsp(*val))
      val++;
    size_t nl = (size_t)(ne - a), vl = (size_t)(end - val);
    if (nl == 6 && !strncasecmp(a, "domain", 6)) {
      /* dropped */
    } else if (!pv->host_form && nl == 4 && !strncasecmp(a, "path", 4)) {
      strbuf_str(&b, "; Path=/p/");
      strbuf_str(&b, pv->token);
      if (vl > 0 && val[0] == '/')
        strbuf_add(&b, val, vl);
      else
        strbuf_chr(&b, '/');
      had_path = true;
    } else if (nl > 0) {
      strbuf_str(&b, "; ");
      strbuf_add(&b, a, nl);
      if (eq) {
        strbuf_chr(&b, '=');
        strbuf_add(&b, val, vl);
      }
    }
    a = next;
  }
  if (!pv->host_form && !had_path) {
    strbuf_str(&b, "; Path=/p/");
    strbuf_str(&b, pv->token);
    strbuf_chr(&b, '/');
  }
  return strbuf_take(&b);
}

/* Copy the box's reply headers into resp, less hop-by-hop ones. */
static void copy_headers(struct req *r, struct MHD_Response *resp, const struct http_head *h,
                         bool upgrade) {
  struct preview_req *pv = r->pv;
  const char *conn_hdr = egress_http_get(h, "Connection");
  for (size_t i = 0; i < h->nh; i++) {
    const char *n = h->h[i].name, *v = h->h[i].value;
    if (upgrade && !strcasecmp(n, "Upgrade")) {
      MHD_add_response_header(resp, n, v);
      continue;
    }
    if (hop_header(n) || in_connection(conn_hdr, n) || !strcasecmp(n, "Date"))
      continue;
    /* The path form shares the API's origin: nothing of a box's may act
     * on the origin beyond its own path -- no service worker scope above
     * its prefix, no clearing the origin's data, no HSTS for its name,
     * and no HTTP authentication challenge (a browser would answer it
     * with credentials cached for another preview's, or the API's,
     * realm). */
    if (!pv->host_form &&
        (!strcasecmp(n, "Service-Worker-Allowed") || !strcasecmp(n, "Clear-Site-Data") ||
         !strcasecmp(n, "Strict-Transport-Security") || !strcasecmp(n, "WWW-Authenticate") ||
         !strcasecmp(n, "Proxy-Authenticate")))
      continue;
    if (!strcasecmp(n, "Set-Cookie")) {
      char *c = cookie_fix(pv, v);
      if (c)
        MHD_add_response_header(resp, n, c);
      free(c);
      continue;
    }
    if (!pv->host_form && !strcasecmp(n, "Location") && v[0] == '/' && v[1] != '/') {
      char *loc = NULL;
      if (asprintf(&loc, "/p/%s%s", pv->token, v) >= 0) {
        MHD_add_response_header(resp, n, loc);
        free(loc);
      }
      continue;
    }
    /* A value libmicrohttpd refuses is dropped, not the reply. */
    MHD_add_response_header(resp, n, v);
  }
}

/* One direction of a WebSocket relay: bytes read and not yet written. */
struct relay_dir {
  char buf[PV_BUF];
  size_t off, len;
  bool eof, shut;
};

static int relay_write(int fd, struct relay_dir *d, uint64_t *count) {
  while (d->off < d->len) {
    ssize_t w = send(fd, d->buf + d->off, d->len - d->off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0 && errno == EAGAIN)
      return 0;
    if (w <= 0)
      return -1;
    d->off += (size_t)w;
    *count += (uint64_t)w;
  }
  d->off = d->len = 0;
  return 0;
}

static int relay_read(int fd, struct relay_dir *d) {
  ssize_t n;
  do
    n = recv(fd, d->buf, sizeof d->buf, MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    return errno == EAGAIN ? 0 : -1;
  if (n == 0)
    d->eof = true;
  d->off = 0;
  d->len = (size_t)n;
  return 0;
}

/* Relay between the client and the box until both have closed their
 * side, either fails, the preview's idle or total limit passes, it is
 * revoked (its socket shut down) or the server stops. */
static void relay(struct req *r, int cl, const char *extra, size_t nextra) {
  struct preview_req *pv = r->pv;
  struct relay_dir *c2u = calloc(1, sizeof *c2u), *u2c = calloc(1, sizeof *u2c);
  int up = pv->up;
  bool failed = !c2u || !u2c;
  /* What each side sent before the relay began: the client's after its
   * request head, the box's after its 101 head (both fit: each was read
   * into a buffer of this size). */
  if (!failed && nextra) {
    failed = nextra > sizeof c2u->buf;
    if (!failed) {
      memcpy(c2u->buf, extra, nextra);
      c2u->len = nextra;
    }
  }
  if (!failed && pv->len > pv->off) {
    memcpy(u2c->buf, pv->buf + pv->off, pv->len - pv->off);
    u2c->len = pv->len - pv->off;
    pv->off = pv->len;
  }
  while (!failed) {
    if (c2u->len == 0 && c2u->eof && !c2u->shut) {
      shutdown(up, SHUT_WR);
      c2u->shut = true;
    }
    if (u2c->len == 0 && u2c->eof && !u2c->shut) {
      shutdown(cl, SHUT_WR);
      u2c->shut = true;
    }
    if (c2u->shut && u2c->shut)
      break;
    int64_t t = left_ms(pv, pv->p.limits.idle_ms);
    if (t <= 0)
      break;
    struct pollfd pf[3] = {
        {.fd = cl,
         .events = (short)((c2u->len == 0 && !c2u->eof ? POLLIN : 0) | (u2c->len ? POLLOUT : 0))},
        {.fd = up,
         .events = (short)((u2c->len == 0 && !u2c->eof ? POLLIN : 0) | (c2u->len ? POLLOUT : 0))},
        {.fd = r->srv->stop_fd, .events = POLLIN},
    };
    int rc = poll(pf, 3, (int)t);
    if (rc < 0 && errno == EINTR)
      continue;
    if (rc <= 0 || pf[2].revents)
      break; /* idle, or the server stops */
    if ((pf[0].revents | pf[1].revents) & (POLLERR | POLLNVAL))
      break;
    /* A hang-up with nothing left to read (a side closed both ways, or
     * shut down by a revocation): poll would report it again at once,
     * forever. */
    if (((pf[0].revents & POLLHUP) && !(pf[0].revents & POLLIN)) ||
        ((pf[1].revents & POLLHUP) && !(pf[1].revents & POLLIN)))
      break;
    if ((pf[0].revents & (POLLIN | POLLHUP)) && c2u->len == 0 && !c2u->eof &&
        relay_read(cl, c2u) < 0)
      break;
    if ((pf[1].revents & (POLLIN | POLLHUP)) && u2c->len == 0 && !u2c->eof &&
        relay_read(up, u2c) < 0)
      break;
    if (c2u->len && relay_write(up, c2u, &pv->body_in) < 0)
      break;
    if (u2c->len && relay_write(cl, u2c, &pv->body_out) < 0)
      break;
  }
  free(c2u);
  free(u2c);
}

/* In thread-per-connection mode the upgrade handler runs in the
 * connection's thread and may block: the relay runs here, while the
 * request (con_cls) lives. */
static void ws_upgraded(void *cls, struct MHD_Connection *conn, void *req_cls, const char *extra_in,
                        size_t extra_in_size, MHD_socket sock,
                        struct MHD_UpgradeResponseHandle *urh) {
  struct req *r = req_cls;
  (void)cls;
  (void)conn;
  if (r && r->pv && r->pv->up >= 0)
    relay(r, sock, extra_in, extra_in_size);
  MHD_upgrade_action(urh, MHD_UPGRADE_ACTION_CLOSE);
}

static enum MHD_Result queue_upgrade(struct req *r, const struct http_head *h) {
  struct MHD_Response *resp = MHD_create_response_for_upgrade(ws_upgraded, NULL);
  if (!resp)
    return api_reply_error(r, 500, "internal_error", "cannot upgrade");
  copy_headers(r, resp, h, true);
  r->responded = true;
  r->status = 101;
  enum MHD_Result ret = MHD_queue_response(r->conn, MHD_HTTP_SWITCHING_PROTOCOLS, resp);
  MHD_destroy_response(resp);
  return ret;
}

/* The request in the preview's access log, before the reply leaves;
 * pv->seq is -1 if it could not be written (logged). */
static void record(struct req *r, int status) {
  struct preview_req *pv = r->pv;
  struct husk_preview_access_rec rec = {0};
  snprintf(rec.remote, sizeof rec.remote, "%s", pv->remote);
  snprintf(rec.method, sizeof rec.method, "%s", r->method);
  if (pv->target[0])
    snprintf(rec.path, sizeof rec.path, "%.*s", (int)strcspn(pv->target, "?"), pv->target);
  else
    snprintf(rec.path, sizeof rec.path, "%s", r->path);
  rec.status = status;
  rec.bytes_in = pv->body_in;
  /* What the reply will bring, where its head says, and the time to its
   * head: a reply that ends as announced needs no second write. */
  rec.bytes_out = pv->framing == FR_LENGTH ? pv->left : 0;
  rec.duration_ms = mono_ms() - pv->t0_ms;
  pv->recorded_out = rec.bytes_out;
  struct husk_err err;
  pv->seq = 0;
  if (husk_preview_record(r->srv->cfg.mgr, &pv->p, &rec, &pv->seq, &err) < 0) {
    pv->seq = -1; /* tried: not again for this request */
    api_log(r->srv, "preview %s: cannot record the access: %s", pv->p.id, err.msg);
  }
}

/* Read the box's reply head (1xx other than 101 skipped).  0 with *h
 * parsed and pv->off after it, or -1 after queuing the error reply. */
static int read_head(struct req *r, struct http_head *h, enum MHD_Result *ret) {
  struct preview_req *pv = r->pv;
  for (;;) {
    size_t end = egress_http_head_end(pv->buf + pv->off, pv->len - pv->off);
    if (!end) {
      if (pv->len - pv->off >= EGRESS_HTTP_HEAD_MAX) {
        *ret = pv_error(r, 502, "bad_gateway", "the sandbox's reply head is too large");
        return -1;
      }
      ssize_t n = up_fill(r);
      if (n <= 0) {
        bool timeout = n < 0 && errno == ETIMEDOUT;
        *ret = pv_error(r, timeout ? 504 : 502, timeout ? "gateway_timeout" : "bad_gateway",
                        timeout ? "the sandbox's port did not answer in time"
                                : "the sandbox's port closed the connection without a reply");
        return -1;
      }
      continue;
    }
    struct husk_err err;
    if (egress_http_parse(pv->buf + pv->off, end, false, h, &err) != 0) {
      *ret = pv_error(r, 502, "bad_gateway", "the sandbox's reply is not valid HTTP/1.1");
      return -1;
    }
    pv->off += end;
    const char *st = h->start[1];
    if (strlen(st) == 3 && st[0] == '1' && strcmp(st, "101") != 0) {
      egress_http_free(h);
      continue;
    }
    return 0;
  }
}

enum MHD_Result api_preview_end(struct req *r) {
  struct api_server *s = r->srv;
  struct preview_req *pv = r->pv;
  no_reply_sync(r);
  if (pv->chunked_up && !pv->up_failed && up_write(r, "0\r\n\r\n", 5) < 0)
    pv->up_failed = true;
  if (pv->up_failed)
    pv->no_keep = true;
  struct http_head h = {0};
  enum MHD_Result ret = MHD_NO;
  if (pv->reused) {
    /* A kept connection the box closed meanwhile (its own idle timeout)
     * answers nothing: the request, which has no body, goes again on a
     * new one. */
    ssize_t got = pv->len > pv->off ? 1 : up_fill(r);
    if (got <= 0 && (got == 0 || errno == ECONNRESET || errno == EPIPE)) {
      struct husk_err err;
      husk_preview_close(s->cfg.mgr, pv->up);
      pv->up = -1;
      pv->off = pv->len = 0;
      if (open_upstream(r, &err) < 0)
        return pv_core_error(r, &err);
      if (up_write(r, pv->head, strlen(pv->head)) < 0)
        return pv_error(r, errno == ETIMEDOUT ? 504 : 502,
                        errno == ETIMEDOUT ? "gateway_timeout" : "bad_gateway",
                        "the sandbox's port closed the connection");
    }
  }
  if (read_head(r, &h, &ret) < 0)
    return ret;
  int status = atoi(h.start[1]);
  if (status < 100 || status > 999) {
    egress_http_free(&h);
    return pv_error(r, 502, "bad_gateway", "the sandbox's reply has a bad status");
  }
  bool upgrade = status == 101;
  if (upgrade && !pv->upgrade) {
    egress_http_free(&h);
    return pv_error(r, 502, "bad_gateway", "the sandbox switched protocols unasked");
  }
  bool head = !strcmp(r->method, "HEAD");
  uint64_t size = MHD_SIZE_UNKNOWN;
  const char *up_conn = egress_http_get(&h, "Connection");
  pv->no_keep = upgrade || (up_conn && in_connection(up_conn, "close")) ||
                strcmp(h.start[0], "HTTP/1.1") != 0;
  if (upgrade || head || status == 204 || status == 304) {
    pv->framing = FR_NONE;
    pv->clean = !upgrade;
    if (head && h.has_length)
      size = h.length;
  } else if (h.chunked) {
    pv->framing = FR_CHUNKED;
  } else if (h.has_length) {
    pv->framing = FR_LENGTH;
    pv->left = size = h.length;
    pv->clean = size == 0;
  } else {
    pv->framing = FR_CLOSE;
  }
  /* The access, recorded before the reply leaves. */
  record(r, status);
  if (pv->seq <= 0) {
    egress_http_free(&h);
    return pv_error(r, 500, "internal_error", "the access could not be recorded");
  }
  if (upgrade) {
    ret = queue_upgrade(r, &h);
    egress_http_free(&h);
    return ret;
  }
  struct MHD_Response *resp;
  /* A HEAD says what a GET would: its length if the box gave one, else
   * none (libmicrohttpd then frames it as chunked). */
  if (pv->framing == FR_NONE && !head)
    resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
  else
    resp = MHD_create_response_from_callback(size, PV_BLOCK, body_reader, r, NULL);
  if (!resp) {
    egress_http_free(&h);
    return pv_error(r, 500, "internal_error", "out of memory");
  }
  copy_headers(r, resp, &h, false);
  egress_http_free(&h);
  r->responded = true;
  r->status = status;
  ret = MHD_queue_response(r->conn, (unsigned)status, resp);
  MHD_destroy_response(resp);
  return ret;
}

void api_preview_cleanup(struct req *r, enum MHD_RequestTerminationCode toe) {
  struct preview_req *pv = r->pv;
  if (!pv)
    return;
  struct husk_mgr *m = r->srv->cfg.mgr;
  keep_upstream(r, toe);
  if (pv->up >= 0)
    husk_preview_close(m, pv->up);
  /* It reached the box: its counts, unless the reply ended exactly as
   * its head announced (as recorded). */
  bool as_recorded = pv->clean && !pv->upgrade &&
                     (pv->framing == FR_LENGTH || pv->framing == FR_NONE) &&
                     pv->body_out == pv->recorded_out;
  if (pv->seq > 0 && pv->buf && !as_recorded)
    husk_preview_record_end(m, pv->seq, pv->body_in, pv->body_out, mono_ms() - pv->t0_ms);
  memset(pv->token, 0, sizeof pv->token);
  free(pv->head);
  free(pv->buf);
  free(pv);
  r->pv = NULL;
}
