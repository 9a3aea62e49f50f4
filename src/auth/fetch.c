/* The daemon's sign-in fetcher (fetch.h): libcurl, from the daemon's own
 * network, with every connection's address checked in the socket callback
 * (so DNS cannot change the answer between a check and the connect), no
 * redirects, no proxy, a bounded body and time, and a bounded number of
 * fetches at once. */
#define _GNU_SOURCE
#include "auth/fetch.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "egress/host.h"
#include "util/cleanup.h"

#define FETCH_CONNECT_MS 5000
#define FETCH_URL_MAX 2048

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_FAILED_INIT;
static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

struct auth_fetcher {
  char *ca_file;
  struct egress_cidr ranges[AUTH_FETCH_RANGES_MAX];
  size_t n_ranges;
  unsigned concurrency;
  pthread_mutex_t lock;
  unsigned in_use;
};

/* One transfer's state, seen by the callbacks. */
struct xfer {
  const struct auth_fetcher *f;
  bool loopback_ok;
  char *buf;
  size_t len, cap, max;
  bool too_big, oom;
  bool denied;
  char denied_addr[INET6_ADDRSTRLEN];
  const char *denied_why;
  int64_t max_age_s;
};

int auth_fetcher_open(struct auth_fetcher **out, const struct auth_fetch_config *cfg,
                      struct husk_err *err) {
  *out = NULL;
  if (cfg->n_allow_ranges > AUTH_FETCH_RANGES_MAX)
    return husk_fail(err, EINVAL, "at most %d allowed ranges", AUTH_FETCH_RANGES_MAX);
  pthread_once(&curl_once, curl_init);
  if (curl_init_rc != CURLE_OK)
    return husk_fail(err, EIO, "libcurl did not start");
  struct auth_fetcher *f = calloc(1, sizeof *f);
  if (!f)
    return husk_error(err, ENOMEM, "fetcher");
  for (size_t i = 0; i < cfg->n_allow_ranges; i++) {
    if (egress_cidr_parse(cfg->allow_ranges[i], &f->ranges[i], err) < 0) {
      free(f);
      return husk_error_wrap(err, "allowed range");
    }
  }
  f->n_ranges = cfg->n_allow_ranges;
  if (cfg->ca_file) {
    /* Read now, so that a typo stops the daemon at its start rather than
     * every sign-in later. */
    cleanup_close int fd = open(cfg->ca_file, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      husk_error(err, errno, "cannot read the CA file `%s`", cfg->ca_file);
      free(f);
      err->code = EINVAL;
      return -1;
    }
    X509_STORE *st = X509_STORE_new();
    int ok = st && X509_STORE_load_locations(st, cfg->ca_file, NULL) == 1;
    X509_STORE_free(st);
    if (!ok || !(f->ca_file = strdup(cfg->ca_file))) {
      free(f);
      return husk_fail(err, EINVAL, "the CA file `%s` holds no PEM certificate", cfg->ca_file);
    }
  }
  f->concurrency = cfg->concurrency ? cfg->concurrency : AUTH_FETCH_CONCURRENCY;
  if (pthread_mutex_init(&f->lock, NULL) != 0) {
    free(f->ca_file);
    free(f);
    return husk_error(err, ENOMEM, "fetcher lock");
  }
  *out = f;
  return 0;
}

void auth_fetcher_close(struct auth_fetcher *f) {
  if (!f)
    return;
  pthread_mutex_destroy(&f->lock);
  free(f->ca_file);
  free(f);
}

static bool addr_is_loopback(const struct sockaddr *sa) {
  if (sa->sa_family == AF_INET)
    return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
  if (sa->sa_family == AF_INET6)
    return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)sa)->sin6_addr);
  return false;
}

static curl_socket_t open_socket(void *ctx, curlsocktype purpose, struct curl_sockaddr *a) {
  struct xfer *x = ctx;
  const struct sockaddr *sa = &a->addr;
  if (purpose != CURLSOCKTYPE_IPCXN || (a->family != AF_INET && a->family != AF_INET6) ||
      a->socktype != SOCK_STREAM ||
      a->addrlen <
          (a->family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6))) {
    x->denied = true;
    x->denied_why = "not a TCP/IP connection";
    return CURL_SOCKET_BAD;
  }
  const char *why = egress_addr_denied(sa);
  if (why && x->loopback_ok && addr_is_loopback(sa))
    why = NULL;
  for (size_t i = 0; why && i < x->f->n_ranges; i++)
    if (egress_cidr_contains(&x->f->ranges[i], sa))
      why = NULL;
  if (why) {
    x->denied = true;
    x->denied_why = why;
    egress_addr_str(sa, x->denied_addr, sizeof x->denied_addr);
    return CURL_SOCKET_BAD;
  }
  int fd = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
  return fd < 0 ? CURL_SOCKET_BAD : fd;
}

static size_t on_body(char *p, size_t sz, size_t n, void *ctx) {
  struct xfer *x = ctx;
  size_t len = sz * n;
  if (len > x->max - x->len) {
    x->too_big = true;
    return 0;
  }
  if (x->len + len + 1 > x->cap) {
    size_t cap = x->cap ? x->cap : 4096;
    while (cap < x->len + len + 1)
      cap *= 2;
    char *b = realloc(x->buf, cap);
    if (!b) {
      x->oom = true;
      return 0;
    }
    x->buf = b;
    x->cap = cap;
  }
  memcpy(x->buf + x->len, p, len);
  x->len += len;
  x->buf[x->len] = '\0';
  return len;
}

/* Cache-Control of the reply: max-age=N, or 0 for no-store/no-cache. */
static void cache_control(struct xfer *x, const char *v, size_t n) {
  size_t i = 0;
  while (i < n) {
    while (i < n && (v[i] == ' ' || v[i] == '\t' || v[i] == ','))
      i++;
    size_t s = i;
    while (i < n && v[i] != ',')
      i++;
    size_t e = i;
    while (e > s && (v[e - 1] == ' ' || v[e - 1] == '\t' || v[e - 1] == '\r' || v[e - 1] == '\n'))
      e--;
    size_t l = e - s;
    if ((l == 8 && !strncasecmp(v + s, "no-store", 8)) ||
        (l == 8 && !strncasecmp(v + s, "no-cache", 8))) {
      x->max_age_s = 0;
      return;
    }
    if (l > 8 && !strncasecmp(v + s, "max-age=", 8)) {
      int64_t age = 0;
      size_t k = s + 8;
      if (k < e && v[k] == '"')
        k++;
      bool digits = false;
      for (; k < e && isdigit((unsigned char)v[k]); k++) {
        digits = true;
        if (age < INT64_MAX / 10 - 10)
          age = age * 10 + (v[k] - '0');
      }
      if (digits && (x->max_age_s < 0 || age < x->max_age_s))
        x->max_age_s = age;
    }
  }
}

static size_t on_header(char *p, size_t sz, size_t n, void *ctx) {
  struct xfer *x = ctx;
  size_t len = sz * n;
  if (len >= 5 && !memcmp(p, "HTTP/", 5))
    x->max_age_s = -1; /* a new response (after a 1xx): its own headers */
  else if (len > 14 && !strncasecmp(p, "cache-control:", 14) && x->max_age_s != 0)
    cache_control(x, p + 14, len - 14);
  return len;
}

static CURLcode on_ssl_ctx(CURL *c, void *ssl_ctx, void *ctx) {
  (void)c;
  const struct auth_fetcher *f = ctx;
  X509_STORE *store = SSL_CTX_get_cert_store(ssl_ctx);
  if (!store)
    return CURLE_SSL_CERTPROBLEM;
  /* Added to the system's roots, not instead of them. */
  if (f->ca_file && X509_STORE_load_locations(store, f->ca_file, NULL) != 1)
    return CURLE_SSL_CERTPROBLEM;
  return CURLE_OK;
}

/* http(s), a host, no credentials in the URL; http only with loopback_ok. */
static int check_url(const char *url, bool loopback_ok, struct husk_err *err) {
  if (!url || strnlen(url, FETCH_URL_MAX + 1) > FETCH_URL_MAX)
    return husk_fail(err, EINVAL, "the URL is missing or longer than %d bytes", FETCH_URL_MAX);
  CURLU *u = curl_url();
  if (!u)
    return husk_error(err, ENOMEM, "URL");
  char *scheme = NULL, *host = NULL, *user = NULL, *pass = NULL;
  int rc = -1;
  if (curl_url_set(u, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK) {
    husk_fail(err, EINVAL, "not a URL");
    goto out;
  }
  if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
      (strcmp(scheme, "https") && strcmp(scheme, "http"))) {
    husk_fail(err, EINVAL, "not an http(s) URL");
    goto out;
  }
  if (!strcmp(scheme, "http") && !loopback_ok) {
    husk_fail(err, EINVAL, "http is allowed only to a loopback host: use https");
    goto out;
  }
  if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !host[0]) {
    husk_fail(err, EINVAL, "the URL has no host");
    goto out;
  }
  if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK ||
      curl_url_get(u, CURLUPART_PASSWORD, &pass, 0) == CURLUE_OK) {
    husk_fail(err, EINVAL, "the URL holds credentials");
    goto out;
  }
  rc = 0;
out:
  curl_free(scheme);
  curl_free(host);
  curl_free(user);
  curl_free(pass);
  curl_url_cleanup(u);
  return rc;
}

static bool slot_take(struct auth_fetcher *f) {
  pthread_mutex_lock(&f->lock);
  bool ok = f->in_use < f->concurrency;
  if (ok)
    f->in_use++;
  pthread_mutex_unlock(&f->lock);
  return ok;
}

static void slot_give(struct auth_fetcher *f) {
  pthread_mutex_lock(&f->lock);
  f->in_use--;
  pthread_mutex_unlock(&f->lock);
}

static int fail_of(const struct xfer *x, CURLcode cc, int timeout_ms, struct husk_err *err) {
  if (x->denied && x->denied_addr[0])
    return husk_fail(err, EACCES, "the address %s is not allowed (%s)", x->denied_addr,
                     x->denied_why);
  if (x->denied)
    return husk_fail(err, EACCES, "the connection is not allowed (%s)", x->denied_why);
  if (x->too_big || cc == CURLE_FILESIZE_EXCEEDED)
    return husk_fail(err, EFBIG, "the reply is larger than %zu bytes", x->max);
  if (x->oom)
    return husk_error(err, ENOMEM, "the reply");
  if (cc == CURLE_OPERATION_TIMEDOUT)
    return husk_fail(err, ETIMEDOUT, "no complete reply within %d ms", timeout_ms);
  if (cc == CURLE_COULDNT_CONNECT)
    return husk_fail(err, EPROTO, "cannot connect");
  if (cc == CURLE_COULDNT_RESOLVE_HOST)
    return husk_fail(err, EPROTO, "the host's name does not resolve");
  /* curl_easy_strerror, not the error buffer: the buffer can quote
   * what the server sent. */
  return husk_fail(err, EPROTO, "the transfer failed: %s", curl_easy_strerror(cc));
}

int auth_fetch(struct auth_fetcher *f, const struct auth_fetch_request *rq,
               struct auth_fetch_reply *out, struct husk_err *err) {
  memset(out, 0, sizeof *out);
  out->max_age_s = -1;
  if (check_url(rq->url, rq->loopback_ok, err) < 0)
    return -1;
  if (!slot_take(f))
    return husk_fail(err, EBUSY, "too many sign-in fetches at once: try again");
  struct xfer x = {.f = f,
                   .loopback_ok = rq->loopback_ok,
                   .max = rq->max_bytes ? rq->max_bytes : AUTH_FETCH_MAX_BYTES,
                   .max_age_s = -1};
  int timeout_ms = rq->timeout_ms > 0 ? rq->timeout_ms : AUTH_FETCH_TIMEOUT_MS;
  int rc = -1;
  struct curl_slist *hdrs = NULL, *h2;
  CURL *c = curl_easy_init();
  if (!c) {
    husk_error(err, ENOMEM, "fetch");
    goto out;
  }
  if (!(h2 = curl_slist_append(hdrs, "Accept: application/json"))) {
    husk_error(err, ENOMEM, "fetch");
    goto out;
  }
  hdrs = h2;
  if (rq->form_body) {
    if (!(h2 = curl_slist_append(hdrs, "Content-Type: application/x-www-form-urlencoded"))) {
      husk_error(err, ENOMEM, "fetch");
      goto out;
    }
    hdrs = h2;
  }
  CURLcode cc = CURLE_OK;
#define SET(opt, val)                                                                              \
  if (cc == CURLE_OK)                                                                              \
  cc = curl_easy_setopt(c, opt, val)
  SET(CURLOPT_URL, rq->url);
  SET(CURLOPT_PROTOCOLS_STR, rq->loopback_ok ? "http,https" : "https");
  SET(CURLOPT_FOLLOWLOCATION, 0L);
  SET(CURLOPT_PROXY, ""); /* never a proxy: the address checked is the destination's */
  SET(CURLOPT_OPENSOCKETFUNCTION, open_socket);
  SET(CURLOPT_OPENSOCKETDATA, &x);
  SET(CURLOPT_WRITEFUNCTION, on_body);
  SET(CURLOPT_WRITEDATA, &x);
  SET(CURLOPT_HEADERFUNCTION, on_header);
  SET(CURLOPT_HEADERDATA, &x);
  SET(CURLOPT_SSL_CTX_FUNCTION, on_ssl_ctx);
  SET(CURLOPT_SSL_CTX_DATA, f);
  SET(CURLOPT_SSL_VERIFYPEER, 1L);
  SET(CURLOPT_SSL_VERIFYHOST, 2L);
  SET(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)x.max);
  SET(CURLOPT_TIMEOUT_MS, (long)timeout_ms);
  SET(CURLOPT_CONNECTTIMEOUT_MS,
      (long)(timeout_ms < FETCH_CONNECT_MS ? timeout_ms : FETCH_CONNECT_MS));
  SET(CURLOPT_NOSIGNAL, 1L);
  SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
  SET(CURLOPT_USERAGENT, "husk-sign-in");
  SET(CURLOPT_HTTPHEADER, hdrs);
  SET(CURLOPT_ACCEPT_ENCODING, NULL); /* no decompression: the bound is on what arrives */
  if (rq->form_body) {
    SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(rq->form_body));
    SET(CURLOPT_POSTFIELDS, rq->form_body);
  }
  if (rq->basic_user) {
    SET(CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
    SET(CURLOPT_USERNAME, rq->basic_user);
    SET(CURLOPT_PASSWORD, rq->basic_pass ? rq->basic_pass : "");
  }
#undef SET
  if (cc != CURLE_OK) {
    husk_fail(err, EIO, "libcurl refused an option: %s", curl_easy_strerror(cc));
    goto out;
  }
  cc = curl_easy_perform(c);
  if (cc != CURLE_OK) {
    fail_of(&x, cc, timeout_ms, err);
    goto out;
  }
  long status = 0;
  if (curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status) != CURLE_OK || status < 100) {
    husk_fail(err, EPROTO, "no HTTP status");
    goto out;
  }
  out->status = status;
  if (status >= 300 && status < 400) {
    x.len = 0; /* a redirect is not followed and its body is not kept */
    x.max_age_s = -1;
  }
  if (!x.buf || x.len == 0) {
    free(x.buf);
    if (!(x.buf = calloc(1, 1))) {
      x.buf = NULL;
      husk_error(err, ENOMEM, "fetch");
      goto out;
    }
    x.len = 0;
  }
  x.buf[x.len] = '\0';
  out->body = x.buf;
  out->len = x.len;
  out->max_age_s = x.max_age_s;
  x.buf = NULL;
  rc = 0;
out:
  if (c)
    curl_easy_cleanup(c);
  curl_slist_free_all(hdrs);
  free(x.buf);
  slot_give(f);
  return rc;
}

void auth_fetch_reply_free(struct auth_fetch_reply *r) {
  if (!r)
    return;
  free(r->body);
  r->body = NULL;
  r->len = 0;
}
