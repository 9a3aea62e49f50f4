/* husk as an OAuth 2.1 authorization server, the HTTP side (docs/oauth.md):
 * the metadata documents (RFC 8414, RFC 9728), client registration
 * (RFC 7591), the sign-in and consent page, the token endpoint (RFC 6749,
 * RFC 8707) and revocation (RFC 7009).  The rules -- users, passwords,
 * codes, tokens -- are the core's (src/auth); this file parses, checks
 * the form, renders the page and formats the replies.
 *
 * The page's form is bound to the browser that asked for it: the GET sets
 * a random cookie, and the form carries an HMAC (per-process key) of that
 * cookie and of every parameter of the request, so a POST forged by
 * another site (no cookie, SameSite=Strict) or with changed parameters is
 * refused.  Nothing secret -- a password, a code, a token, a client
 * secret -- reaches a log line or an audit record. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/internal.h"
#include "s3/s3_internal.h"
#include "util/cleanup.h"
#include "util/cleanup_json.h"
#include "util/clock.h"
#include "util/id.h"
#include "util/strbuf.h"

/* Failed sign-ins from one address: 20 in 15 minutes; registrations: 20
 * an hour from one address (an IPv6 /48), 600 an hour from all together
 * (docs/oauth.md).  Buckets refill at the average rate. */
#define SIGNIN_BURST 20.0
#define SIGNIN_PER_S (20.0 / 900.0)
#define REGISTER_BURST 20.0
#define REGISTER_PER_S (20.0 / 3600.0)
#define REGISTER_V6_BITS 48
#define REGISTER_ALL_BURST 600.0
#define REGISTER_ALL_PER_S (600.0 / 3600.0)
/* Sign-ins of one address being checked at once (each holds a password
 * hash slot for its while): one address cannot hold every slot. */
#define SIGNIN_INFLIGHT_MAX 2
/* Addresses with a sign-in in flight that are tracked; past them, 503. */
#define SIGNIN_INFLIGHT_SLOTS 256
/* Audit records of events nobody authenticated (a forged form, a bad
 * code): 30 a minute from one address, 600 a minute from all; past that
 * they are counted, and the next record says how many were left out. */
#define ANON_AUDIT_BURST 30.0
#define ANON_AUDIT_PER_S 0.5
#define ANON_AUDIT_ALL_BURST 600.0
#define ANON_AUDIT_ALL_PER_S 10.0
/* How long a sign-in form may be posted after the page was served. */
#define CSRF_TTL_S 3600
/* Parameters of one form (a sign-in form has 12). */
#define FORM_PARAMS_MAX 32
/* The cookie's value: 32 random bytes as hex. */
#define CSRF_COOKIE_LEN 64
/* The form's token: when it was made (12 hex digits of seconds of the
 * monotonic clock) and an HMAC (64 hex digits). */
#define CSRF_TIME_LEN 12
#define CSRF_TOKEN_LEN (CSRF_TIME_LEN + 64)

struct inflight {
  char key[S3_RATE_KEY_MAX];
  unsigned n; /* 0: free */
};

struct api_oauth {
  unsigned char csrf_key[32];
  struct s3_rate *signin_fail; /* failed sign-ins per source address */
  struct s3_rate *register_rl; /* registrations per /48, and of all */
  struct s3_rate *anon_audit;  /* unauthenticated audit records per source */
  struct s3_rate *sso_start;   /* single sign-ons started per source */
  atomic_ulong anon_dropped;   /* ... left out since the last one written */
  pthread_mutex_t inflight_lock;
  struct inflight inflight[SIGNIN_INFLIGHT_SLOTS]; /* sign-ins being checked */
};

int api_oauth_init(struct api_server *s, struct husk_err *err) {
  struct api_oauth *o = calloc(1, sizeof *o);
  if (!o)
    return husk_error(err, ENOMEM, "oauth");
  s->oauth = o;
  /* The shared budgets are not the point here: large. */
  struct s3_rate_limits sl = {.burst = SIGNIN_BURST, .per_s = SIGNIN_PER_S,
                              .shared_burst = 1e9, .shared_per_s = 1e6};
  struct s3_rate_limits rl = {.burst = REGISTER_BURST, .per_s = REGISTER_PER_S,
                              .shared_burst = REGISTER_ALL_BURST,
                              .shared_per_s = REGISTER_ALL_PER_S};
  struct s3_rate_limits al = {.burst = ANON_AUDIT_BURST, .per_s = ANON_AUDIT_PER_S,
                              .shared_burst = ANON_AUDIT_ALL_BURST,
                              .shared_per_s = ANON_AUDIT_ALL_PER_S};
  /* Single sign-ons started: 20 per address in 15 minutes. */
  struct s3_rate_limits ssl = {.burst = SIGNIN_BURST, .per_s = SIGNIN_PER_S,
                               .shared_burst = 1e9, .shared_per_s = 1e6};
  atomic_init(&o->anon_dropped, 0);
  if (pthread_mutex_init(&o->inflight_lock, NULL) != 0) {
    free(o);
    s->oauth = NULL;
    return husk_error(err, ENOMEM, "oauth");
  }
  if (id_random_bytes(o->csrf_key, sizeof o->csrf_key, err) < 0)
    return -1;
  if (s3_rate_init(&o->signin_fail, &sl) < 0 || s3_rate_init(&o->register_rl, &rl) < 0 ||
      s3_rate_init(&o->anon_audit, &al) < 0 || s3_rate_init(&o->sso_start, &ssl) < 0)
    return husk_error(err, ENOMEM, "oauth");
  return 0;
}

void api_oauth_free(struct api_server *s) {
  struct api_oauth *o = s->oauth;
  if (!o)
    return;
  s3_rate_free(o->signin_fail);
  s3_rate_free(o->register_rl);
  s3_rate_free(o->anon_audit);
  s3_rate_free(o->sso_start);
  pthread_mutex_destroy(&o->inflight_lock);
  OPENSSL_cleanse(o->csrf_key, sizeof o->csrf_key);
  free(o);
  s->oauth = NULL;
}

bool api_ip_parse(const char *s, size_t n, struct in6_addr *out) {
  char buf[INET6_ADDRSTRLEN + 1];
  if (n == 0 || n >= sizeof buf)
    return false;
  memcpy(buf, s, n);
  buf[n] = '\0';
  struct in_addr v4;
  if (inet_pton(AF_INET, buf, &v4) == 1) {
    memset(out, 0, sizeof *out);
    out->s6_addr[10] = out->s6_addr[11] = 0xff;
    memcpy(&out->s6_addr[12], &v4, 4);
    return true;
  }
  return inet_pton(AF_INET6, buf, out) == 1;
}

static bool ip_of(const struct sockaddr *sa, struct in6_addr *out) {
  if (sa && sa->sa_family == AF_INET) {
    memset(out, 0, sizeof *out);
    out->s6_addr[10] = out->s6_addr[11] = 0xff;
    memcpy(&out->s6_addr[12], &((const struct sockaddr_in *)sa)->sin_addr, 4);
    return true;
  }
  if (sa && sa->sa_family == AF_INET6) {
    *out = ((const struct sockaddr_in6 *)sa)->sin6_addr;
    return true;
  }
  return false;
}

static bool trusted(const struct api_server *s, const struct in6_addr *a) {
  for (size_t i = 0; i < s->cfg.n_trusted_proxies; i++)
    if (!memcmp(&s->cfg.trusted_proxies[i], a, sizeof *a))
      return true;
  return false;
}

/* The client's address as the limiters name it (IPv6 by its first
 * v6_bits bits).  From a trusted proxy, the address X-Forwarded-For names:
 * its last entry that is not a trusted proxy itself (the one the nearest
 * proxy saw; what comes before it, the client may have written).  A
 * header that names none, or not an address, leaves the proxy's own. */
static void source_bits(struct req *r, unsigned v6_bits, char *out, size_t size) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  const struct sockaddr *peer = ci ? ci->client_addr : NULL;
  struct in6_addr a;
  const char *xff = api_header(r, "X-Forwarded-For");
  if (xff && ip_of(peer, &a) && trusted(r->srv, &a)) {
    size_t end = strlen(xff);
    while (end > 0) {
      size_t start = end;
      while (start > 0 && xff[start - 1] != ',')
        start--;
      size_t b = start, e = end;
      while (b < e && (xff[b] == ' ' || xff[b] == '\t'))
        b++;
      while (e > b && (xff[e - 1] == ' ' || xff[e - 1] == '\t'))
        e--;
      struct in6_addr c;
      if (!api_ip_parse(xff + b, e - b, &c))
        break; /* not an address: the proxy's own */
      if (!trusted(r->srv, &c)) {
        struct sockaddr_in6 sa6 = {.sin6_family = AF_INET6, .sin6_addr = c};
        struct sockaddr_in sa4 = {.sin_family = AF_INET};
        const struct sockaddr *sa = (const struct sockaddr *)&sa6;
        if (IN6_IS_ADDR_V4MAPPED(&c)) {
          memcpy(&sa4.sin_addr, &c.s6_addr[12], 4);
          sa = (const struct sockaddr *)&sa4;
        }
        s3_rate_source_prefix(sa, v6_bits, out, size);
        return;
      }
      end = start > 0 ? start - 1 : 0;
    }
  }
  s3_rate_source_prefix(peer, v6_bits, out, size);
}

static void source_of(struct req *r, char *out, size_t size) { source_bits(r, 64, out, size); }

/* A sign-in of `src` begins its check: false when that source has
 * SIGNIN_INFLIGHT_MAX already (*full: the table has no room). */
static bool inflight_enter(struct api_oauth *o, const char *src, bool *full) {
  *full = false;
  pthread_mutex_lock(&o->inflight_lock);
  struct inflight *mine = NULL, *free_slot = NULL;
  for (size_t i = 0; i < SIGNIN_INFLIGHT_SLOTS && !mine; i++) {
    struct inflight *e = &o->inflight[i];
    if (e->n && !strcmp(e->key, src))
      mine = e;
    else if (!e->n && !free_slot)
      free_slot = e;
  }
  bool ok = false;
  if (mine) {
    ok = mine->n < SIGNIN_INFLIGHT_MAX;
    if (ok)
      mine->n++;
  } else if (free_slot) {
    snprintf(free_slot->key, sizeof free_slot->key, "%s", src);
    free_slot->n = 1;
    ok = true;
  } else {
    *full = true;
  }
  pthread_mutex_unlock(&o->inflight_lock);
  return ok;
}

struct inflight_hold {
  struct api_oauth *o;
  const char *src;
};

static void inflight_leave(struct api_oauth *o, const char *src);
static void inflight_leavep(struct inflight_hold *h) { inflight_leave(h->o, h->src); }

static void inflight_leave(struct api_oauth *o, const char *src) {
  pthread_mutex_lock(&o->inflight_lock);
  for (size_t i = 0; i < SIGNIN_INFLIGHT_SLOTS; i++) {
    struct inflight *e = &o->inflight[i];
    if (e->n && !strcmp(e->key, src)) {
      e->n--;
      break;
    }
  }
  pthread_mutex_unlock(&o->inflight_lock);
}

/* The audit record of an event no one authenticated (a forged form, a
 * guessed code, a refused sign-in): anyone can cause these, so each
 * address gets ANON_AUDIT_BURST a minute; past that an event is only
 * counted, and the next record written says how many were left out (the
 * log says when they start being left out). */
static void audit_anon(struct req *r, const char *tenant, const char *action, const char *outcome,
                       unsigned status, const char *client_id, const char *client_name,
                       const char *detail) {
  struct api_oauth *o = r->srv->oauth;
  char src[S3_RATE_KEY_MAX];
  source_of(r, src, sizeof src);
  if (!s3_rate_take(o->anon_audit, src, mono_ms())) {
    if (atomic_fetch_add(&o->anon_dropped, 1) == 0)
      api_log(r->srv, "too many unauthenticated OAuth events (%s from %s): they are counted, "
                      "not each audited",
              action, src);
    return;
  }
  unsigned long dropped = atomic_exchange(&o->anon_dropped, 0);
  char d[400];
  if (dropped)
    snprintf(d, sizeof d, "%s%s(and %lu more unauthenticated OAuth events before this one, not "
                          "audited: rate limit)",
             detail ? detail : "", detail && *detail ? " " : "", dropped);
  else
    snprintf(d, sizeof d, "%s", detail ? detail : "");
  api_audit_event(r, tenant, action, outcome, status, NULL, client_id, client_name, d);
}

/* A client_id sent by anyone, for the audit: the client's own id and name
 * when it is registered; else "" and a hint in `hint` (at most 32
 * characters of [A-Za-z0-9_-], others as `?`). */
static bool audit_client(struct req *r, const char *raw, struct auth_client *c, char *hint,
                         size_t size) {
  struct husk_err err;
  memset(c, 0, sizeof *c);
  if (raw && auth_client_get(r->srv->cfg.auth, raw, c, &err) == 0) {
    hint[0] = '\0';
    return true;
  }
  memset(c, 0, sizeof *c);
  size_t i = 0;
  for (; raw && raw[i] && i < 32 && i + 1 < size; i++) {
    char ch = raw[i];
    hint[i] = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                      ch == '_' || ch == '-'
                  ? ch
                  : '?';
  }
  hint[i] = '\0';
  return false;
}

/* ---- issuer and WWW-Authenticate --------------------------------------------------- */

/* A Host header we may echo: a name or address and a port, nothing else. */
static bool host_ok(const char *h) {
  size_t n = strlen(h);
  return n > 0 && n <= 255 &&
         strspn(h, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]") == n;
}

int api_issuer(struct req *r, char *out, size_t size) {
  const char *base = r->srv->cfg.api_url;
  if (base) {
    size_t n = strlen(base);
    while (n > 0 && base[n - 1] == '/')
      n--;
    if (n + 1 > size)
      return -1;
    memcpy(out, base, n);
    out[n] = '\0';
    return 0;
  }
  const char *h = api_header(r, "Host");
  if (!h || !host_ok(h))
    return -1;
  int n = snprintf(out, size, "http://%s", h);
  return n < 0 || (size_t)n >= size ? -1 : 0;
}

static bool is_mcp(const struct req *r) {
  return r->route && !strcmp(r->route->pattern, "/mcp");
}

void api_www_auth(struct req *r, const char *error, unsigned scope) {
  char iss[600], names[256];
  if (!scope)
    scope = AUTH_SCOPE_DEFAULT; /* what a sign-in asks for by default */
  auth_scopes_format(scope, names, sizeof names);
  if (api_issuer(r, iss, sizeof iss) < 0) {
    snprintf(r->www_auth, sizeof r->www_auth, "Bearer realm=\"husk\"%s%s%s",
             error ? ", error=\"" : "", error ? error : "", error ? "\"" : "");
    return;
  }
  const char *res = is_mcp(r) ? "mcp" : "v1";
  if (error)
    snprintf(r->www_auth, sizeof r->www_auth,
             "Bearer error=\"%s\", scope=\"%s\", "
             "resource_metadata=\"%s/.well-known/oauth-protected-resource/%s\"",
             error, names, iss, res);
  else
    snprintf(r->www_auth, sizeof r->www_auth,
             "Bearer resource_metadata=\"%s/.well-known/oauth-protected-resource/%s\", "
             "scope=\"%s\"",
             iss, res, names);
}

/* ---- form bodies -------------------------------------------------------------------- */

static int hexval(char c) {
  if (c >= '0' && c <= '9')
    return c - '0';
  if (c >= 'a' && c <= 'f')
    return c - 'a' + 10;
  if (c >= 'A' && c <= 'F')
    return c - 'A' + 10;
  return -1;
}

/* Decode s[0..n) (percent-encoding, '+' as space) into out; returns the
 * length, or -1 for a bad escape or a NUL. */
static ssize_t form_decode(const char *s, size_t n, char *out) {
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c == '+') {
      c = ' ';
    } else if (c == '%') {
      if (i + 2 >= n)
        return -1;
      int hi = hexval(s[i + 1]), lo = hexval(s[i + 2]);
      if (hi < 0 || lo < 0)
        return -1;
      c = (char)(hi * 16 + lo);
      i += 2;
    }
    if (c == '\0')
      return -1;
    out[o++] = c;
  }
  out[o] = '\0';
  return (ssize_t)o;
}

/* A parameter's name as an error may show it: at most size-1 bytes,
 * anything but printable ASCII as `?`. */
static void form_name_copy(const char *name, char *out, size_t size) {
  size_t i = 0;
  for (; name[i] && i + 1 < size; i++)
    out[i] = name[i] > 0x20 && name[i] < 0x7f && name[i] != '`' ? name[i] : '?';
  out[i] = '\0';
}

int api_form_parse(const char *body, size_t len, struct api_form *f, struct husk_err *err) {
  memset(f, 0, sizeof *f);
  /* Decoded text is never longer than encoded: one block holds it all,
   * each name and value NUL-terminated. */
  f->mem_size = 2 * len + 2;
  f->mem = malloc(f->mem_size);
  f->names = calloc(FORM_PARAMS_MAX + 1, sizeof *f->names);
  f->values = calloc(FORM_PARAMS_MAX + 1, sizeof *f->values);
  if (!f->mem || !f->names || !f->values) {
    api_form_free(f);
    return husk_error(err, ENOMEM, "form");
  }
  char *m = f->mem;
  size_t i = 0;
  while (i < len) {
    size_t e = i;
    while (e < len && body[e] != '&')
      e++;
    if (e > i) {
      const char *eq = memchr(body + i, '=', e - i);
      size_t nl = eq ? (size_t)(eq - (body + i)) : e - i;
      if (f->n >= FORM_PARAMS_MAX) {
        api_form_free(f);
        return husk_fail(err, EINVAL, "too many form parameters");
      }
      char *name = m;
      ssize_t k = form_decode(body + i, nl, name);
      if (k <= 0) {
        api_form_free(f);
        return husk_fail(err, EINVAL, "a malformed form parameter name");
      }
      m += k + 1;
      char *value = m;
      ssize_t v = eq ? form_decode(eq + 1, (size_t)(body + e - (eq + 1)), value) : 0;
      if (!eq)
        value[0] = '\0';
      /* The name is in f->mem, which api_form_free wipes and frees: an
       * error names a copy (printable ASCII only: it is echoed). */
      if (v < 0) {
        char shown[41];
        form_name_copy(name, shown, sizeof shown);
        api_form_free(f);
        return husk_fail(err, EINVAL, "a malformed value of form parameter `%s`", shown);
      }
      m += v + 1;
      /* RFC 6749 3.1, 3.2: a parameter sent twice is an invalid request. */
      for (size_t j = 0; j < f->n; j++)
        if (!strcmp(f->names[j], name)) {
          char shown[41];
          form_name_copy(name, shown, sizeof shown);
          api_form_free(f);
          return husk_fail(err, EINVAL, "form parameter `%s` is repeated", shown);
        }
      f->names[f->n] = name;
      f->values[f->n] = value;
      f->n++;
    }
    i = e + 1;
  }
  return 0;
}

const char *api_form_get(const struct api_form *f, const char *name) {
  for (size_t i = 0; i < f->n; i++)
    if (!strcmp(f->names[i], name))
      return f->values[i];
  return NULL;
}

void api_form_free(struct api_form *f) {
  if (f->mem)
    OPENSSL_cleanse(f->mem, f->mem_size); /* it may hold a password or a secret */
  free(f->mem);
  free(f->names);
  free(f->values);
  memset(f, 0, sizeof *f);
}

static void form_freep(struct api_form *f) { api_form_free(f); }

/* The form body of a BODY_FORM route: 0, or -1 with r->err. */
static int read_form(struct req *r, struct api_form *f) {
  const char *ct = api_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
  if (!ct || strncasecmp(ct, "application/x-www-form-urlencoded", 33) != 0 ||
      (ct[33] && ct[33] != ';' && ct[33] != ' ')) {
    memset(f, 0, sizeof *f);
    return husk_fail(&r->err, EINVAL, "the body must be application/x-www-form-urlencoded");
  }
  return api_form_parse(r->body ? r->body : "", r->body_len, f, &r->err);
}

/* ---- small text helpers ---------------------------------------------------------------- */


/* A URL query component: unreserved characters as they are, the rest %XX. */
static void url_enc(struct strbuf *b, const char *s) {
  static const char hex[] = "0123456789ABCDEF";
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      strbuf_chr(b, (char)c);
    } else {
      strbuf_chr(b, '%');
      strbuf_chr(b, hex[c >> 4]);
      strbuf_chr(b, hex[c & 15]);
    }
  }
}

/* The origin (scheme://authority) of an absolute http(s) URI into out, or
 * -1 when it has none we can put in a CSP (or it is too long). */
static int uri_origin(const char *uri, char *out, size_t size, const char **host, size_t *hostlen) {
  const char *p = strstr(uri, "://");
  if (!p || (strncmp(uri, "https://", 8) && strncmp(uri, "http://", 7)))
    return -1;
  const char *a = p + 3;
  size_t n = strcspn(a, "/?#");
  if (n == 0 ||
      strspn(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]") < n)
    return -1; /* userinfo ('@'), or characters a header cannot carry */
  size_t total = (size_t)(a - uri) + n;
  if (total + 1 > size)
    return -1;
  memcpy(out, uri, total);
  out[total] = '\0';
  *host = a;
  *hostlen = n;
  return 0;
}

/* ---- OAuth JSON replies ------------------------------------------------------------------- */

/* RFC 6749 5.2: {"error","error_description"}.  basic: the client tried
 * HTTP Basic authentication (a 401 then names the scheme). */
static enum MHD_Result oauth_error(struct req *r, unsigned status, const char *code, bool basic,
                                   const char *desc) {
  cleanup_json json_t *o = json_pack("{s:s, s:s}", "error", code, "error_description", desc);
  if (status == 401) {
    snprintf(r->www_auth, sizeof r->www_auth, "%s", basic ? "Basic realm=\"husk\"" : "Bearer realm=\"husk\"");
  }
  struct MHD_Response *resp = api_json_response(o);
  if (!resp)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  MHD_add_response_header(resp, "Pragma", "no-cache");
  if (status == 401)
    MHD_add_response_header(resp, "WWW-Authenticate", r->www_auth);
  return api_queue(r, status, resp);
}

/* A public document: JSON anyone may read, from any origin. */
static enum MHD_Result reply_public_json(struct req *r, json_t *o) {
  cleanup_json json_t *body = o;
  struct MHD_Response *resp = api_json_response(body);
  if (!resp)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  MHD_add_response_header(resp, "Access-Control-Allow-Origin", "*");
  /* Not cached (api_queue: no-store); and when the issuer is taken from
   * the Host header, the document is that Host's. */
  if (!r->srv->cfg.api_url)
    MHD_add_response_header(resp, "Vary", "Host");
  return api_queue(r, 200, resp);
}

static enum MHD_Result no_oauth(struct req *r) {
  return api_reply_error(r, 404, "not_found", "users and OAuth are not enabled on this server");
}

static enum MHD_Result bad_host(struct req *r) {
  return api_reply_error(r, 400, "bad_request",
                         "the Host header is not a host name (or start the server with --api-url)");
}

static json_t *scope_names_json(unsigned scopes) {
  json_t *a = json_array();
  for (unsigned i = 0; i < AUTH_SCOPE_COUNT; i++)
    if (scopes & (1u << i))
      json_array_append_new(a, json_string(auth_scope_names[i]));
  return a;
}

/* ---- metadata ------------------------------------------------------------------------------ */

enum MHD_Result h_oauth_as_meta(struct req *r) {
  if (!r->srv->cfg.auth)
    return no_oauth(r);
  char iss[600], u[4][700];
  if (api_issuer(r, iss, sizeof iss) < 0)
    return bad_host(r);
  snprintf(u[0], sizeof u[0], "%s/oauth/authorize", iss);
  snprintf(u[1], sizeof u[1], "%s/oauth/token", iss);
  snprintf(u[2], sizeof u[2], "%s/oauth/register", iss);
  snprintf(u[3], sizeof u[3], "%s/oauth/revoke", iss);
  return reply_public_json(
      r, json_pack("{s:s, s:s, s:s, s:s, s:s, s:[s], s:[s,s], s:[s], s:[s,s,s], s:[s,s,s], s:o, "
                   "s:b, s:[s]}",
                   "issuer", iss, "authorization_endpoint", u[0], "token_endpoint", u[1],
                   "registration_endpoint", u[2], "revocation_endpoint", u[3],
                   "response_types_supported", "code", "grant_types_supported",
                   "authorization_code", "refresh_token", "code_challenge_methods_supported", "S256",
                   "token_endpoint_auth_methods_supported", "none", "client_secret_post",
                   "client_secret_basic", "revocation_endpoint_auth_methods_supported", "none",
                   "client_secret_post", "client_secret_basic", "scopes_supported",
                   scope_names_json(AUTH_SCOPE_ALL), "authorization_response_iss_parameter_supported",
                   1, "response_modes_supported", "query"));
}

static enum MHD_Result pr_meta(struct req *r, const char *res) {
  if (!r->srv->cfg.auth)
    return no_oauth(r);
  char iss[600], resource[700];
  if (api_issuer(r, iss, sizeof iss) < 0)
    return bad_host(r);
  snprintf(resource, sizeof resource, "%s/%s", iss, res);
  return reply_public_json(
      r, json_pack("{s:s, s:[s], s:o, s:[s], s:s}", "resource", resource, "authorization_servers",
                   iss, "scopes_supported", scope_names_json(AUTH_SCOPE_ALL),
                   "bearer_methods_supported", "header", "resource_name", "husk"));
}

enum MHD_Result h_oauth_pr_meta_mcp(struct req *r) { return pr_meta(r, "mcp"); }
enum MHD_Result h_oauth_pr_meta_v1(struct req *r) { return pr_meta(r, "v1"); }

/* ---- registration (RFC 7591) ----------------------------------------------------------------- */

static enum MHD_Result reg_error(struct req *r, unsigned status, const char *code, const char *desc) {
  return oauth_error(r, status, code, false, desc);
}

enum MHD_Result h_oauth_register(struct req *r) {
  if (!r->srv->cfg.auth)
    return no_oauth(r);
  char src[S3_RATE_KEY_MAX];
  source_bits(r, REGISTER_V6_BITS, src, sizeof src);
  if (!s3_rate_take(r->srv->oauth->register_rl, src, mono_ms()))
    return reg_error(r, 429, "too_many_requests",
                     "too many registrations from this address, or from all: try again later");
  json_error_t je;
  cleanup_json json_t *o = json_loadb(r->body ? r->body : "", r->body_len, JSON_REJECT_DUPLICATES, &je);
  if (!json_is_object(o))
    return reg_error(r, 400, "invalid_client_metadata", "the body must be a JSON object");
  json_t *ru = json_object_get(o, "redirect_uris");
  if (!json_is_array(ru) || json_array_size(ru) == 0 || json_array_size(ru) > AUTH_REDIRECTS_MAX)
    return reg_error(r, 400, "invalid_redirect_uri", "redirect_uris must be an array of 1 to 8 URIs");
  const char *uris[AUTH_REDIRECTS_MAX];
  size_t n = json_array_size(ru);
  for (size_t i = 0; i < n; i++) {
    json_t *v = json_array_get(ru, i);
    if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
      return reg_error(r, 400, "invalid_redirect_uri", "each redirect URI must be a string");
    uris[i] = json_string_value(v);
  }
  json_t *jn = json_object_get(o, "client_name"), *jm = json_object_get(o, "token_endpoint_auth_method");
  if ((jn && !json_is_null(jn) && !json_is_string(jn)) || (jm && !json_is_null(jm) && !json_is_string(jm)))
    return reg_error(r, 400, "invalid_client_metadata",
                     "client_name and token_endpoint_auth_method must be strings");
  const char *name = json_is_string(jn) ? json_string_value(jn) : "";
  const char *method = json_is_string(jm) ? json_string_value(jm) : "none";
  if (json_is_string(jn) && strlen(name) != json_string_length(jn))
    return reg_error(r, 400, "invalid_client_metadata", "client_name has a NUL");
  /* What this server can do: a client asking for other grants or response
   * types would not work. */
  json_t *gt = json_object_get(o, "grant_types"), *rt = json_object_get(o, "response_types");
  size_t i;
  json_t *v;
  if (gt && !json_is_array(gt))
    return reg_error(r, 400, "invalid_client_metadata", "grant_types must be an array");
  json_array_foreach(gt, i, v) {
    if (!json_is_string(v) || (strcmp(json_string_value(v), "authorization_code") &&
                               strcmp(json_string_value(v), "refresh_token")))
      return reg_error(r, 400, "invalid_client_metadata",
                       "grant_types: only authorization_code and refresh_token are supported");
  }
  if (rt && !json_is_array(rt))
    return reg_error(r, 400, "invalid_client_metadata", "response_types must be an array");
  json_array_foreach(rt, i, v) {
    if (!json_is_string(v) || strcmp(json_string_value(v), "code"))
      return reg_error(r, 400, "invalid_client_metadata", "response_types: only code is supported");
  }
  struct auth_client c;
  char secret[AUTH_TOKEN_SIZE] = "";
  struct husk_err err;
  if (auth_client_register(r->srv->cfg.auth, name, uris, n, method, &c, secret, &err) < 0) {
    if (err.code == EDQUOT)
      return reg_error(r, 429, "too_many_requests", "too many registered clients: try again later");
    if (err.code != EINVAL)
      return api_reply_err(r, &err);
    husk_sanitize_line(err.msg);
    bool uri = strcasestr(err.msg, "redirect") || strcasestr(err.msg, "uri");
    return reg_error(r, 400, uri ? "invalid_redirect_uri" : "invalid_client_metadata", err.msg);
  }
  json_t *out = json_pack("{s:s, s:I, s:s, s:[], s:s, s:[s,s], s:[s]}", "client_id", c.id,
                          "client_id_issued_at", (json_int_t)(c.created_ms / 1000), "client_name",
                          c.name, "redirect_uris", "token_endpoint_auth_method", c.auth_method,
                          "grant_types", "authorization_code", "refresh_token", "response_types",
                          "code");
  for (size_t k = 0; out && k < c.n_redirects; k++)
    json_array_append_new(json_object_get(out, "redirect_uris"), json_string(c.redirect_uris[k]));
  if (out && c.confidential) {
    json_object_set_new(out, "client_secret", json_string(secret));
    json_object_set_new(out, "client_secret_expires_at", json_integer(0));
  }
  OPENSSL_cleanse(secret, sizeof secret);
  char detail[200];
  snprintf(detail, sizeof detail, "auth_method=%s", c.auth_method);
  api_audit_event(r, "", "oauth.register", "ok", 201, NULL, c.id, c.name, detail);
  return api_reply_json(r, 201, out);
}

/* ---- the authorization request ------------------------------------------------------------------ */

/* The parameters of an authorization request, in the order the CSRF
 * HMAC covers them (struct api_az: internal.h). */
const char *const api_az_names[AZ_N] = {"response_type", "client_id", "redirect_uri",
                                        "code_challenge", "code_challenge_method", "state",
                                        "scope", "resource"};
#define az_names api_az_names

/* What is wrong with a request: shown on an error page, never sent to the
 * redirect URI.  Anyone can register a client and its redirect URI, so
 * redirecting a request nobody has looked at yet would make this server
 * an open redirector (RFC 9700 4.11.2): only what the person did -- Deny,
 * a sign-in -- is sent back to the client. */
struct az_fail {
  const char *error; /* NULL: fine; the OAuth error code otherwise */
  const char *desc;  /* for the page */
};

/* Check an authorization request (GET's query or POST's form). */
static struct az_fail az_check(struct req *r, struct api_az *a) {
  struct husk_err err;
  if (api_issuer(r, a->iss, sizeof a->iss) < 0)
    return (struct az_fail){"invalid_request", "The Host header is not a host name."};
  if (!a->v[AZ_CLIENT] || auth_client_get(r->srv->cfg.auth, a->v[AZ_CLIENT], &a->client, &err) < 0)
    return (struct az_fail){"invalid_client",
                            "This application is not registered here (unknown client_id)."};
  const char *ru = a->v[AZ_REDIRECT];
  if (!ru || !auth_client_redirect_ok(&a->client, ru))
    return (struct az_fail){"invalid_request",
                            "The address to send you back to (redirect_uri) is not one this "
                            "application registered."};
  const char *h;
  size_t hl;
  /* auth_client_redirect_ok allows only what registration allowed
   * (clients.c's one rule: nothing that needs escaping in a page, a
   * header or a CSP); the origin must still be one a CSP can name. */
  if (uri_origin(ru, a->origin, sizeof a->origin, &h, &hl) < 0 || hl >= sizeof a->host)
    return (struct az_fail){"invalid_request", "The redirect_uri cannot be used."};
  memcpy(a->host, h, hl);
  a->host[hl] = '\0';
  /* The client is known and so is where it wants the person sent: the
   * rest is the client's mistake, shown here all the same (see az_fail). */
  if (!a->v[0] || strcmp(a->v[0], "code"))
    return (struct az_fail){"unsupported_response_type",
                            "The application asked for something other than a code "
                            "(response_type must be code)."};
  const char *cc = a->v[3], *cm = a->v[4];
  if (!cc || strlen(cc) != 43 || strspn(cc, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") != 43)
    return (struct az_fail){"invalid_request",
                            "The application did not send a PKCE code_challenge (S256)."};
  if (!cm || strcmp(cm, "S256"))
    return (struct az_fail){"invalid_request",
                            "The application's code_challenge_method is not S256."};
  if (a->v[AZ_STATE] && strlen(a->v[AZ_STATE]) > 2048)
    return (struct az_fail){"invalid_request", "The application's state is too long."};
  a->scopes = AUTH_SCOPE_DEFAULT;
  if (a->v[AZ_SCOPE] && a->v[AZ_SCOPE][0] &&
      auth_scopes_parse(a->v[AZ_SCOPE], &a->scopes, &err) < 0)
    return (struct az_fail){"invalid_scope", "The application asked for an unknown scope."};
  if (!a->scopes)
    a->scopes = AUTH_SCOPE_DEFAULT;
  char mcp[700], v1[700];
  snprintf(mcp, sizeof mcp, "%s/mcp", a->iss);
  snprintf(v1, sizeof v1, "%s/v1", a->iss);
  const char *res = a->v[AZ_RESOURCE];
  if (res && strcmp(res, mcp) && strcmp(res, v1))
    return (struct az_fail){"invalid_target", "The application asked for a resource that is not "
                                              "this server's /mcp or /v1."};
  snprintf(a->resource, sizeof a->resource, "%s", res ? res : mcp);
  return (struct az_fail){NULL, NULL};
}

/* The redirect back to the client: ?code or ?error, then state and iss. */
static enum MHD_Result az_redirect(struct req *r, const struct api_az *a, const char *k1,
                                   const char *v1, const char *k2, const char *v2) {
  struct strbuf b = {0};
  const char *ru = a->v[AZ_REDIRECT];
  strbuf_str(&b, ru);
  size_t n = strlen(ru);
  char last = n ? ru[n - 1] : '\0';
  if (!strchr(ru, '?'))
    strbuf_chr(&b, '?');
  else if (last != '?' && last != '&')
    strbuf_chr(&b, '&');
  strbuf_str(&b, k1);
  strbuf_chr(&b, '=');
  url_enc(&b, v1);
  if (k2) {
    strbuf_chr(&b, '&');
    strbuf_str(&b, k2);
    strbuf_chr(&b, '=');
    url_enc(&b, v2);
  }
  if (a->v[AZ_STATE]) {
    strbuf_str(&b, "&state=");
    url_enc(&b, a->v[AZ_STATE]);
  }
  strbuf_str(&b, "&iss=");
  url_enc(&b, a->iss);
  char *loc = strbuf_take(&b);
  if (!loc)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
  if (!resp) {
    OPENSSL_cleanse(loc, strlen(loc));
    free(loc);
    return MHD_NO;
  }
  MHD_add_response_header(resp, "Location", loc);
  MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
  OPENSSL_cleanse(loc, strlen(loc)); /* it may hold a code */
  free(loc);
  return api_queue(r, 302, resp);
}

/* ---- the page ----------------------------------------------------------------------------------- */

static const char style_css[] =
    "body{font:16px/1.5 system-ui,sans-serif;max-width:32em;margin:3em auto;padding:0 1em;"
    "color:#222;background:#fafafa}h1{font-size:1.4em}main{background:#fff;border:1px solid #ddd;"
    "border-radius:8px;padding:1.5em}label{display:block;margin:.8em 0}input{display:block;"
    "width:100%;box-sizing:border-box;padding:.5em;font:inherit;border:1px solid #aaa;"
    "border-radius:4px}ul{padding-left:1.2em}.error{color:#a00;font-weight:bold}"
    ".buttons{display:flex;gap:1em;margin-top:1.2em}button{font:inherit;padding:.5em 1.5em;"
    "border-radius:4px;border:1px solid #888;background:#eee;cursor:pointer}"
    "button.allow{background:#1a5fb4;color:#fff;border-color:#1a5fb4}.note{color:#555;"
    "font-size:.9em}\n";

enum MHD_Result h_oauth_style(struct req *r) {
  struct MHD_Response *resp = MHD_create_response_from_buffer(sizeof style_css - 1, (void *)style_css,
                                                              MHD_RESPMEM_PERSISTENT);
  if (!resp)
    return MHD_NO;
  MHD_add_response_header(resp, "Content-Type", "text/css; charset=utf-8");
  return api_queue(r, 200, resp);
}

static const char *scope_text(unsigned bit) {
  switch (bit) {
  case AUTH_SCOPE_SANDBOX: return "create sandboxes, run code and commands in them, change and delete them";
  case AUTH_SCOPE_SANDBOX_READ: return "list your sandboxes and read their files and jobs";
  case AUTH_SCOPE_STORAGE_READ: return "list and read your stored files, and make links to them";
  case AUTH_SCOPE_STORAGE_WRITE: return "store files and make upload links";
  case AUTH_SCOPE_RUNS: return "agent runs (reserved: nothing uses it yet)";
  case AUTH_SCOPE_USERS: return "manage the users of your organization";
  default: return "";
  }
}

/* Queue a page with the headers of every sign-in page: no script, the
 * stylesheet from here, the form may post here and (its redirect) to the
 * client's origin; no framing, no referrer, no caching (api_queue). */
static enum MHD_Result reply_page(struct req *r, unsigned status, struct strbuf *b,
                                  const char *form_origin, const char *cookie) {
  char *text = strbuf_take(b);
  if (!text)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  struct MHD_Response *resp = MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
  if (!resp) {
    free(text);
    return MHD_NO;
  }
  char csp[800];
  snprintf(csp, sizeof csp,
           "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'%s%s; "
           "frame-ancestors 'none'; base-uri 'none'",
           form_origin ? " " : "", form_origin ? form_origin : "");
  MHD_add_response_header(resp, "Content-Type", "text/html; charset=utf-8");
  MHD_add_response_header(resp, "Content-Security-Policy", csp);
  MHD_add_response_header(resp, "X-Frame-Options", "DENY");
  MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
  MHD_add_response_header(resp, "Cross-Origin-Opener-Policy", "same-origin");
  if (cookie)
    MHD_add_response_header(resp, "Set-Cookie", cookie);
  return api_queue(r, status, resp);
}

static void page_head(struct strbuf *b, const char *title) {
  strbuf_printf(b,
            "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta "
            "name=\"viewport\" content=\"width=device-width,initial-scale=1\"><meta "
            "name=\"robots\" content=\"noindex\"><title>%s</title>"
            "<link rel=\"stylesheet\" href=\"/oauth/style.css\"></head><body><main><h1>%s</h1>",
            title, title);
}

/* An error page: no redirect (the client or its redirect URI is not
 * known to be right, or the form was forged). */
static enum MHD_Result error_page(struct req *r, unsigned status, const char *msg) {
  struct strbuf b = {0};
  page_head(&b, "Signing in is not possible");
  strbuf_str(&b, "<p class=\"error\">");
  strbuf_html(&b, msg);
  strbuf_str(&b, "</p><p class=\"note\">Go back to the application and start again.</p>"
                 "</main></body></html>");
  return reply_page(r, status, &b, NULL, NULL);
}

/* The cookie's name: __Host- needs Secure, so over https only. */
static const char *cookie_name(const struct api_az *a) {
  return strncmp(a->iss, "https://", 8) ? "husk_oauth" : "__Host-husk_oauth";
}

/* The form's token: the time it was made (`made_s`, seconds of the
 * monotonic clock, as 12 hex digits), then the HMAC of that time, the
 * cookie and every request parameter (absent and empty told apart), as
 * hex. */
static int csrf_token(struct req *r, int64_t made_s, const char *cookie, const struct api_az *a,
                      char out[CSRF_TOKEN_LEN + 1]) {
  struct strbuf b = {0};
  char stamp[CSRF_TIME_LEN + 1];
  snprintf(stamp, sizeof stamp, "%012" PRIx64, (uint64_t)made_s & UINT64_C(0xffffffffffff));
  strbuf_str(&b, stamp);
  strbuf_chr(&b, '\n');
  strbuf_str(&b, cookie);
  strbuf_chr(&b, '\n');
  for (size_t i = 0; i < AZ_N; i++) {
    strbuf_printf(&b, "%s%c", az_names[i], a->v[i] ? '=' : '!');
    if (a->v[i])
      strbuf_printf(&b, "%zu:%s", strlen(a->v[i]), a->v[i]);
    strbuf_chr(&b, '\n');
  }
  char *text = strbuf_take(&b);
  if (!text)
    return -1;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int ml = 0;
  unsigned char *ok = HMAC(EVP_sha256(), r->srv->oauth->csrf_key, sizeof r->srv->oauth->csrf_key,
                           (const unsigned char *)text, strlen(text), mac, &ml);
  free(text);
  if (!ok || ml != 32)
    return -1;
  static const char hex[] = "0123456789abcdef";
  memcpy(out, stamp, CSRF_TIME_LEN);
  for (unsigned i = 0; i < 32; i++) {
    out[CSRF_TIME_LEN + 2 * i] = hex[mac[i] >> 4];
    out[CSRF_TIME_LEN + 2 * i + 1] = hex[mac[i] & 15];
  }
  out[CSRF_TOKEN_LEN] = '\0';
  return 0;
}

/* Whether `token` is the form token of this cookie and these parameters,
 * made less than CSRF_TTL_S ago: NULL if so, else why not (for the
 * audit). */
static const char *csrf_check(struct req *r, const char *cookie, const struct api_az *a,
                              const char *token) {
  if (!token || strlen(token) != CSRF_TOKEN_LEN ||
      strspn(token, "0123456789abcdef") != CSRF_TOKEN_LEN)
    return "no well-formed form token";
  char stamp[CSRF_TIME_LEN + 1];
  memcpy(stamp, token, CSRF_TIME_LEN);
  stamp[CSRF_TIME_LEN] = '\0';
  int64_t made = (int64_t)strtoull(stamp, NULL, 16), now = mono_ms() / 1000;
  char want[CSRF_TOKEN_LEN + 1];
  if (csrf_token(r, made, cookie, a, want) < 0 || CRYPTO_memcmp(want, token, CSRF_TOKEN_LEN) != 0)
    return "form token does not match";
  if (made > now || now - made > CSRF_TTL_S)
    return "form token expired";
  return NULL;
}

/* The sign-in form; msg: the one failure message (NULL: none). */
static enum MHD_Result sign_in_page(struct req *r, const struct api_az *a, const char *cookie_value,
                                    bool set_cookie, const char *org, const char *user,
                                    const char *msg, unsigned status) {
  char csrf[CSRF_TOKEN_LEN + 1];
  if (csrf_token(r, mono_ms() / 1000, cookie_value, a, csrf) < 0)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  struct strbuf b = {0};
  page_head(&b, "Sign in to husk");
  strbuf_str(&b, "<p><strong>");
  strbuf_html(&b, a->client.name[0] ? a->client.name : "An unnamed application");
  strbuf_str(&b, "</strong> asks to use husk as you. If you allow it, you are sent back to <strong>");
  strbuf_html(&b, a->host);
  strbuf_str(&b, "</strong>.</p><p>It may then:</p><ul>");
  for (unsigned i = 0; i < AUTH_SCOPE_COUNT; i++)
    if (a->scopes & (1u << i)) {
      strbuf_str(&b, "<li>");
      strbuf_html(&b, scope_text(1u << i));
      strbuf_str(&b, " <span class=\"note\">(");
      strbuf_html(&b, auth_scope_names[i]);
      strbuf_str(&b, ")</span></li>");
    }
  strbuf_str(&b, "</ul><p class=\"note\">Only what your role allows is granted.</p>");
  if (msg) {
    strbuf_str(&b, "<p class=\"error\" role=\"alert\">");
    strbuf_html(&b, msg);
    strbuf_str(&b, "</p>");
  }
  strbuf_str(&b, "<form method=\"post\" action=\"/oauth/authorize\">"
                 "<label>Organization<input name=\"organization\" autocomplete=\"organization\" "
                 "required value=\"");
  strbuf_html(&b, org ? org : "");
  strbuf_str(&b, "\"></label><label>User name<input name=\"username\" autocomplete=\"username\" "
                 "autocapitalize=\"none\" required value=\"");
  strbuf_html(&b, user ? user : "");
  strbuf_str(&b, "\"></label><label>Password<input type=\"password\" name=\"password\" "
                 "autocomplete=\"current-password\" required></label>");
  for (size_t i = 0; i < AZ_N; i++) {
    if (!a->v[i])
      continue;
    strbuf_printf(&b, "<input type=\"hidden\" name=\"%s\" value=\"", az_names[i]);
    strbuf_html(&b, a->v[i]);
    strbuf_str(&b, "\">");
  }
  strbuf_printf(&b, "<input type=\"hidden\" name=\"csrf\" value=\"%s\">", csrf);
  strbuf_str(&b, "<div class=\"buttons\"><button class=\"allow\" type=\"submit\" name=\"action\" "
                 "value=\"allow\">Allow</button><button type=\"submit\" name=\"action\" "
                 "value=\"deny\" formnovalidate>Deny</button></div>"
                 "<div class=\"buttons\"><button type=\"submit\" name=\"action\" value=\"sso\" "
                 "formnovalidate>Sign in with your organization's provider</button></div>"
                 "</form></main></body></html>");
  char cookie[200];
  if (set_cookie)
    snprintf(cookie, sizeof cookie, "%s=%s; Path=/; HttpOnly; SameSite=Strict%s", cookie_name(a),
             cookie_value, strncmp(a->iss, "https://", 8) ? "" : "; Secure");
  return reply_page(r, status, &b, a->origin, set_cookie ? cookie : NULL);
}

/* The browser's cookie of this flow, if it has a well-formed one. */
static const char *cookie_of(struct req *r, const struct api_az *a) {
  const char *c = MHD_lookup_connection_value(r->conn, MHD_COOKIE_KIND, cookie_name(a));
  if (!c || strlen(c) != CSRF_COOKIE_LEN || strspn(c, "0123456789abcdef") != CSRF_COOKIE_LEN)
    return NULL;
  return c;
}

/* Whether any query parameter is repeated (RFC 6749 3.1). */
static enum MHD_Result count_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *value) {
  (void)kind;
  (void)value;
  size_t *counts = cls;
  for (size_t i = 0; i < AZ_N; i++)
    if (key && !strcmp(key, az_names[i]))
      counts[i]++;
  return MHD_YES;
}

enum MHD_Result h_oauth_authorize_get(struct req *r) {
  if (!r->srv->cfg.auth)
    return no_oauth(r);
  size_t counts[AZ_N] = {0};
  MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, count_arg, counts);
  for (size_t i = 0; i < AZ_N; i++)
    if (counts[i] > 1)
      return error_page(r, 400, "The request repeats a parameter.");
  struct api_az a;
  memset(&a, 0, sizeof a);
  for (size_t i = 0; i < AZ_N; i++)
    a.v[i] = api_query(r, az_names[i]);
  struct az_fail f = az_check(r, &a);
  if (f.error)
    return error_page(r, 400, f.desc);
  const char *have = cookie_of(r, &a);
  char fresh[CSRF_COOKIE_LEN + 1];
  if (!have) {
    struct husk_err err;
    if (id_new(NULL, 32, fresh, sizeof fresh, &err) < 0)
      return api_reply_err(r, &err);
  }
  return sign_in_page(r, &a, have ? have : fresh, !have, NULL, NULL, NULL, 200);
}

enum MHD_Result h_oauth_authorize_post(struct req *r) {
  if (!r->srv->cfg.auth)
    return no_oauth(r);
  __attribute__((cleanup(form_freep))) struct api_form form;
  if (read_form(r, &form) < 0)
    return error_page(r, 400, "The form could not be read.");
  struct api_az a;
  memset(&a, 0, sizeof a);
  for (size_t i = 0; i < AZ_N; i++)
    a.v[i] = api_form_get(&form, az_names[i]);
  if (api_issuer(r, a.iss, sizeof a.iss) < 0)
    return error_page(r, 400, "The Host header is not a host name.");
  /* The form must be the one this server gave this browser. */
  const char *cookie = cookie_of(r, &a), *csrf = api_form_get(&form, "csrf");
  const char *why = !cookie ? "no cookie" : csrf_check(r, cookie, &a, csrf);
  if (why) {
    /* Anyone can post this: the record names a client only when it is a
     * registered one (never text the sender chose), and is rate-limited. */
    struct auth_client known;
    char hint[40], detail[120];
    bool found = audit_client(r, a.v[AZ_CLIENT], &known, hint, sizeof hint);
    snprintf(detail, sizeof detail, "%s%s%s", why,
             found || !a.v[AZ_CLIENT] ? "" : "; unregistered client_id ", found ? "" : hint);
    audit_anon(r, "", "oauth.csrf", "denied", 403, known.id, known.name, detail);
    return error_page(r, 403, "This form has expired or was not sent from this page.");
  }
  /* Everything again: the client or its redirect URIs may have changed. */
  struct az_fail f = az_check(r, &a);
  if (f.error)
    return error_page(r, 400, f.desc);
  const char *action = api_form_get(&form, "action");
  if (action && !strcmp(action, "sso")) {
    /* Single sign-on (routes_oidc.c): only the organization is read. */
    const char *org = api_form_get(&form, "organization");
    enum MHD_Result ret = MHD_NO;
    const char *msg = NULL;
    unsigned status = 200;
    if (api_sso_start(r, &a, org, &ret, &msg, &status))
      return ret;
    return sign_in_page(r, &a, cookie, false, org, NULL, msg, status);
  }
  if (!action || strcmp(action, "allow")) {
    /* Nobody signed in: the operator's record, naming the client. */
    audit_anon(r, "", "oauth.consent", "denied", 302, a.client.id, a.client.name,
               "the person chose Deny");
    return az_redirect(r, &a, "error", "access_denied", "error_description",
                       "the user denied the request");
  }
  const char *org = api_form_get(&form, "organization"), *user = api_form_get(&form, "username"),
             *pw = api_form_get(&form, "password");
  static const char failed[] = "Signing in failed: check the organization, the user name and the "
                               "password.";
  struct api_oauth *o = r->srv->oauth;
  char src[S3_RATE_KEY_MAX];
  source_of(r, src, sizeof src);
  /* At most SIGNIN_INFLIGHT_MAX of one address are checked at once; and
   * each spends one of the address's failures before its check, given
   * back if it succeeds -- so that concurrent guesses cannot all pass a
   * check of the budget before any of them is counted. */
  bool full = false;
  if (!inflight_enter(o, src, &full)) {
    struct strbuf b = {0};
    page_head(&b, full ? "Busy" : "Too many attempts");
    strbuf_str(&b, full ? "<p class=\"error\">The server is busy. Try again in a moment.</p>"
                          "</main></body></html>"
                        : "<p class=\"error\">Too many sign-ins at once from your address. "
                          "Wait a moment and try again.</p></main></body></html>");
    return reply_page(r, full ? 503 : 429, &b, NULL, NULL);
  }
  /* unused: only its cleanup reads it (clang would warn). */
  __attribute__((cleanup(inflight_leavep), unused)) struct inflight_hold hold = {o, src};
  if (!s3_rate_take(o->signin_fail, src, mono_ms())) {
    audit_anon(r, "", "oauth.sign_in", "denied", 429, a.client.id, a.client.name,
               "too many failed sign-ins from this address");
    struct strbuf b = {0};
    page_head(&b, "Too many attempts");
    strbuf_str(&b, "<p class=\"error\">Too many failed sign-ins from your address. Wait a few "
                   "minutes and try again.</p></main></body></html>");
    return reply_page(r, 429, &b, NULL, NULL);
  }
  if (!org || !user || !pw || !*org || !*user || !*pw || strlen(org) > 256 || strlen(user) > 256 ||
      strlen(pw) > AUTH_PASSWORD_MAX)
    return sign_in_page(r, &a, cookie, false, org, user, failed, 200); /* a failure: spent */
  struct auth_user u;
  char tid[STATE_TENANT_ID_SIZE] = "";
  struct husk_err err;
  memset(&u, 0, sizeof u);
  if (auth_sign_in(r->srv->cfg.auth, org, user, pw, src, &u, tid, &err) < 0) {
    if (err.code == EBUSY) {
      s3_rate_give(o->signin_fail, src, mono_ms()); /* not a failure of the person's */
      struct strbuf b = {0};
      page_head(&b, "Busy");
      strbuf_str(&b, "<p class=\"error\">The server is busy. Try again in a moment.</p>"
                     "</main></body></html>");
      return reply_page(r, 503, &b, NULL, NULL);
    }
    if (err.code != EACCES && err.code != EAGAIN) {
      s3_rate_give(o->signin_fail, src, mono_ms());
      return api_reply_err(r, &err);
    }
    /* The audit names the user only when the core knows it. */
    api_audit_event(r, tid, "oauth.sign_in", err.code == EAGAIN ? "locked" : "denied", 401,
                    u.id[0] ? &u : NULL, a.client.id, a.client.name, NULL);
    return sign_in_page(r, &a, cookie, false, org, user, failed, 200);
  }
  s3_rate_give(o->signin_fail, src, mono_ms()); /* the password was right */
  unsigned granted = a.scopes & auth_role_scopes(u.role);
  if (!granted) {
    api_audit_event(r, u.tenant_id, "oauth.sign_in", "denied", 302, &u, a.client.id, a.client.name,
                    "no scope asked is allowed to the role");
    return az_redirect(r, &a, "error", "invalid_scope", "error_description",
                       "none of the scopes asked is allowed to this user");
  }
  char code[AUTH_TOKEN_SIZE];
  struct auth_code_request cr = {.client_id = a.client.id, .redirect_uri = a.v[AZ_REDIRECT],
                                 .code_challenge = a.v[3], .resource = a.resource,
                                 .scopes = granted, .user = &u};
  if (auth_code_issue(r->srv->cfg.auth, &cr, code, &err) < 0)
    return api_reply_err(r, &err);
  char names[256], detail[640];
  auth_scopes_format(granted, names, sizeof names);
  snprintf(detail, sizeof detail, "scope=%s resource=%.300s", names, a.resource);
  api_audit_event(r, u.tenant_id, "oauth.sign_in", "ok", 302, &u, a.client.id, a.client.name,
                  detail);
  enum MHD_Result ret = az_redirect(r, &a, "code", code, NULL, NULL);
  OPENSSL_cleanse(code, sizeof code);
  return ret;
}

/* ---- the token endpoint ------------------------------------------------------------------------- */

/* Client authentication (RFC 6749 2.3): HTTP Basic, or client_id (and
 * client_secret) in the form.  0 with *c filled; else a reply was queued
 * and *ret says what it returned. */
static int client_auth(struct req *r, const struct api_form *f, struct auth_client *c,
                       enum MHD_Result *ret) {
  const char *h = api_header(r, MHD_HTTP_HEADER_AUTHORIZATION);
  const char *fid = api_form_get(f, "client_id"), *fsecret = api_form_get(f, "client_secret");
  struct husk_err err;
  if (h && !strncasecmp(h, "Basic ", 6)) {
    const char *p = h + 6;
    while (*p == ' ')
      p++;
    unsigned char *dec = NULL;
    size_t dl = 0;
    if (fsecret || strlen(p) > 1024 || b64_decode(p, strlen(p), &dec, &dl) < 0) {
      *ret = oauth_error(r, 401, "invalid_client", true, "client authentication failed");
      return -1;
    }
    char *colon = memchr(dec, ':', dl);
    if (!colon || memchr(dec, '\0', dl)) {
      OPENSSL_cleanse(dec, dl);
      free(dec);
      *ret = oauth_error(r, 401, "invalid_client", true, "client authentication failed");
      return -1;
    }
    *colon = '\0';
    /* The id and secret are form-encoded inside (2.3.1). */
    char id[AUTH_CLIENT_ID_SIZE + 8], secret[AUTH_TOKEN_SIZE + 8];
    size_t il = strlen((char *)dec), sl = strlen(colon + 1);
    bool ok = il < sizeof id && sl < sizeof secret &&
              form_decode((char *)dec, il, id) >= 0 && form_decode(colon + 1, sl, secret) >= 0 &&
              (!fid || !strcmp(fid, id)) && auth_client_get(r->srv->cfg.auth, id, c, &err) == 0 &&
              auth_client_check_secret(r->srv->cfg.auth, c, secret, &err) == 0;
    OPENSSL_cleanse(secret, sizeof secret);
    OPENSSL_cleanse(dec, dl);
    free(dec);
    if (!ok) {
      *ret = oauth_error(r, 401, "invalid_client", true, "client authentication failed");
      return -1;
    }
    return 0;
  }
  if (!fid || auth_client_get(r->srv->cfg.auth, fid, c, &err) < 0) {
    *ret = oauth_error(r, 401, "invalid_client", false,
                       fid ? "unknown client" : "client_id (or client authentication) is required");
    return -1;
  }
  if (c->confidential || fsecret) {
    if (!fsecret || auth_client_check_secret(r->srv->cfg.auth, c, fsecret, &err) < 0) {
      *ret = oauth_error(r, 401, "invalid_client", false, "client authentication failed");
      return -1;
    }
  }
  return 0;
}

static enum MHD_Result token_reply(struct req *r, struct auth_tokens *t, const char *grant,
                                   const struct auth_client *c) {
  char names[256];
  auth_scopes_format(t->scopes, names, sizeof names);
  json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:s}", "access_token", t->access, "token_type",
                        "Bearer", "expires_in", (json_int_t)t->expires_in_s, "refresh_token",
                        t->refresh, "scope", names);
  OPENSSL_cleanse(t->access, sizeof t->access);
  OPENSSL_cleanse(t->refresh, sizeof t->refresh);
  /* The audit names the person (its name as it is now). */
  struct auth_user u;
  struct husk_err err;
  memset(&u, 0, sizeof u);
  if (auth_user_get(r->srv->cfg.auth, t->tenant_id, t->user_id, &u, &err) < 0)
    snprintf(u.id, sizeof u.id, "%s", t->user_id);
  char detail[300];
  snprintf(detail, sizeof detail, "grant=%s scope=%s", grant, names);
  api_audit_event(r, t->tenant_id, "oauth.token", "ok", 200, &u, c->id, c->name, detail);
  struct MHD_Response *resp = api_json_response(o);
  json_decref(o); /* jansson keeps no copy after this */
  if (!resp)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  MHD_add_response_header(resp, "Pragma", "no-cache");
  return api_queue(r, 200, resp);
}

enum MHD_Result h_oauth_token(struct req *r) {
  if (!r->srv->cfg.auth)
    return no_oauth(r);
  __attribute__((cleanup(form_freep))) struct api_form f;
  if (read_form(r, &f) < 0)
    return oauth_error(r, 400, "invalid_request", false, r->err.msg);
  const char *grant = api_form_get(&f, "grant_type");
  if (!grant)
    return oauth_error(r, 400, "invalid_request", false, "grant_type is required");
  bool code_grant = !strcmp(grant, "authorization_code"), refresh_grant = !strcmp(grant, "refresh_token");
  if (!code_grant && !refresh_grant)
    return oauth_error(r, 400, "unsupported_grant_type",
                       false, "grant_type must be authorization_code or refresh_token");
  struct auth_client c;
  enum MHD_Result ret;
  if (client_auth(r, &f, &c, &ret) < 0)
    return ret;
  const char *resource = api_form_get(&f, "resource");
  struct auth_tokens t;
  struct husk_err err;
  if (code_grant) {
    const char *code = api_form_get(&f, "code"), *ru = api_form_get(&f, "redirect_uri"),
               *ver = api_form_get(&f, "code_verifier");
    if (!code || !ru || !ver)
      return oauth_error(r, 400, "invalid_request", false,
                         "code, redirect_uri and code_verifier are required");
    if (auth_code_exchange(r->srv->cfg.auth, code, c.id, ru, ver, resource, &t, &err) < 0) {
      if (err.code == EACCES || err.code == EINVAL || err.code == ENOENT) {
        audit_anon(r, "", "oauth.token", "denied", 400, c.id, c.name,
                   "grant=authorization_code invalid_grant");
        return oauth_error(r, 400, "invalid_grant",
                           false, "the code is invalid, expired, used, or does not match");
      }
      if (err.code == ENOTSUP)
        return oauth_error(r, 400, "invalid_target", false, "resource does not match the code's");
      return api_reply_err(r, &err);
    }
    return token_reply(r, &t, "authorization_code", &c);
  }
  const char *rt = api_form_get(&f, "refresh_token"), *scope = api_form_get(&f, "scope");
  if (!rt)
    return oauth_error(r, 400, "invalid_request", false, "refresh_token is required");
  unsigned scopes = 0;
  if (scope && auth_scopes_parse(scope, &scopes, &err) < 0)
    return oauth_error(r, 400, "invalid_scope", false, "unknown scope");
  if (auth_refresh(r->srv->cfg.auth, rt, c.id, scopes, resource, &t, &err) < 0) {
    switch (err.code) {
    case EINVAL:
      return oauth_error(r, 400, "invalid_scope", false, "more scope than the grant has");
    case ENOTSUP:
      return oauth_error(r, 400, "invalid_target", false, "resource does not match the grant's");
    case EKEYREVOKED:
      api_audit_event(r, "", "oauth.reuse", "denied", 400, NULL, c.id, c.name,
                      "a rotated refresh token was presented again: its sign-in was revoked");
      return oauth_error(r, 400, "invalid_grant", false, "the refresh token is no longer valid");
    case EACCES: case ENOENT: case EKEYEXPIRED:
      return oauth_error(r, 400, "invalid_grant", false, "the refresh token is no longer valid");
    default:
      return api_reply_err(r, &err);
    }
  }
  return token_reply(r, &t, "refresh_token", &c);
}

enum MHD_Result h_oauth_revoke(struct req *r) {
  if (!r->srv->cfg.auth)
    return no_oauth(r);
  __attribute__((cleanup(form_freep))) struct api_form f;
  if (read_form(r, &f) < 0)
    return oauth_error(r, 400, "invalid_request", false, r->err.msg);
  const char *tok = api_form_get(&f, "token");
  if (!tok)
    return oauth_error(r, 400, "invalid_request", false, "token is required");
  struct auth_client c;
  enum MHD_Result ret;
  if (client_auth(r, &f, &c, &ret) < 0)
    return ret;
  struct husk_err err;
  if (auth_revoke(r->srv->cfg.auth, tok, c.id, &err) < 0)
    return api_reply_err(r, &err);
  api_audit_event(r, "", "oauth.revoke", "ok", 200, NULL, c.id, c.name, NULL);
  return api_reply_empty(r, 200);
}

/* ---- shared with routes_oidc.c (internal.h) ---- */

const char *api_az_check(struct req *r, struct api_az *a) {
  struct az_fail f = az_check(r, a);
  return f.error ? f.desc : NULL;
}

enum MHD_Result api_az_redirect(struct req *r, const struct api_az *a, const char *k1,
                                const char *v1, const char *k2, const char *v2) {
  return az_redirect(r, a, k1, v1, k2, v2);
}

void api_page_head(struct strbuf *b, const char *title) { page_head(b, title); }

enum MHD_Result api_reply_page(struct req *r, unsigned status, struct strbuf *b,
                               const char *form_origin, const char *cookie) {
  return reply_page(r, status, b, form_origin, cookie);
}

enum MHD_Result api_error_page(struct req *r, unsigned status, const char *msg) {
  return error_page(r, status, msg);
}

const char *api_scope_text(unsigned bit) { return scope_text(bit); }

void api_oauth_source(struct req *r, char *out, size_t size) { source_of(r, out, size); }

void api_audit_anon(struct req *r, const char *tenant, const char *action, const char *outcome,
                    unsigned status, const char *client_id, const char *client_name,
                    const char *detail) {
  audit_anon(r, tenant, action, outcome, status, client_id, client_name, detail);
}

int api_oauth_hmac(struct req *r, const char *text, char out[65]) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int ml = 0;
  if (!HMAC(EVP_sha256(), r->srv->oauth->csrf_key, sizeof r->srv->oauth->csrf_key,
            (const unsigned char *)text, strlen(text), mac, &ml) ||
      ml != 32)
    return -1;
  static const char hex[] = "0123456789abcdef";
  for (unsigned i = 0; i < 32; i++) {
    out[2 * i] = hex[mac[i] >> 4];
    out[2 * i + 1] = hex[mac[i] & 15];
  }
  out[64] = '\0';
  return 0;
}

bool api_sso_rate_take(struct req *r, const char *src) {
  return s3_rate_take(r->srv->oauth->sso_start, src, mono_ms());
}
