/* husk_box_fetch (husk/fetch.h): a URL into a box's file, made the way the
 * box's own programs make requests.
 *
 * libcurl is told to use the box's explicit egress proxy, and every socket
 * it opens is made inside the box's network namespace (the opensocket
 * callback) and may only go to that proxy's address.  So the request
 * leaves from the box's address on the box's link, and the proxy applies
 * the box's policy to it, each redirect hop included: what the box may not
 * reach, the fetch cannot reach either, and the daemon's own network is
 * never used.  TLS through inject rules is terminated by the proxy with
 * the box's CA, which the fetch trusts as the box does. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "box/box_internal.h"
#include "egress/egress.h"
#include "husk/fetch.h"
#include "husk/files.h"
#include "util/cleanup.h"

#define FETCH_CONNECT_MS 10000
#define FETCH_HEADER_VALUE_MAX 4096
#define FETCH_STATUS_LINE_MAX 160

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc = CURLE_FAILED_INIT;
static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

struct fetch {
  struct husk_mgr *m;
  int pidfd;                /* the box's init: its network namespace */
  struct sockaddr_in proxy; /* the only address a socket may connect to */
  const char *ca_pem;       /* the box's CA (inject rules), or NULL */
  int fd;                   /* the new file */
  uint64_t max_bytes, size;
  EVP_MD_CTX *sha;
  int cancel_fd;
  bool too_big, cancelled, bad_socket;
  bool box_ended; /* the box's init exited: the box was deleted or ended */
  int write_errno;
  char status_line[FETCH_STATUS_LINE_MAX]; /* of the last response (proxy's too) */
};

static curl_socket_t open_socket(void *ctx, curlsocktype purpose, struct curl_sockaddr *a) {
  struct fetch *f = ctx;
  /* Only the box's proxy: a connection anywhere else (a direct one) is
   * never made, even though it too would start in the box's network. */
  const struct sockaddr_in *sin = (const struct sockaddr_in *)&a->addr;
  if (purpose != CURLSOCKTYPE_IPCXN || a->family != AF_INET || a->socktype != SOCK_STREAM ||
      a->addrlen < sizeof *sin || sin->sin_addr.s_addr != f->proxy.sin_addr.s_addr ||
      sin->sin_port != f->proxy.sin_port) {
    f->bad_socket = true;
    return CURL_SOCKET_BAD;
  }
  int fd;
  struct husk_err err;
  if (box_netns_sockets(f->m, f->pidfd, SOCK_STREAM, AF_INET, &fd, 0, NULL, &err) < 0) {
    box_log(f->m, "fetch: %s", err.msg);
    return CURL_SOCKET_BAD;
  }
  return fd;
}

static size_t on_body(char *p, size_t sz, size_t n, void *ctx) {
  struct fetch *f = ctx;
  size_t len = sz * n;
  if (len > f->max_bytes - f->size) {
    f->too_big = true;
    return 0;
  }
  if (EVP_DigestUpdate(f->sha, p, len) != 1) {
    f->write_errno = ENOMEM;
    return 0;
  }
  for (size_t off = 0; off < len;) {
    ssize_t w = write(f->fd, p + off, len - off);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      f->write_errno = w < 0 ? errno : EIO;
      return 0;
    }
    off += (size_t)w;
  }
  f->size += len;
  return len;
}

static size_t on_header(char *p, size_t sz, size_t n, void *ctx) {
  struct fetch *f = ctx;
  size_t len = sz * n;
  if (len >= 5 && !memcmp(p, "HTTP/", 5)) {
    /* Kept for messages: printable ASCII up to the line's end, cut. */
    size_t k = 0;
    while (k < len && k < sizeof f->status_line - 1 && p[k] != '\r' && p[k] != '\n') {
      unsigned char ch = (unsigned char)p[k];
      f->status_line[k] = ch >= 0x20 && ch <= 0x7e ? (char)ch : '?';
      k++;
    }
    f->status_line[k] = 0;
  }
  return len;
}

static int on_progress(void *ctx, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un) {
  (void)dt, (void)dn, (void)ut, (void)un;
  struct fetch *f = ctx;
  /* The box's end stops the fetch too: the reference the fetch holds
   * would otherwise keep a deleted box's link, cgroup and files alive
   * while the body streams in. */
  struct pollfd p[2] = {{.fd = f->pidfd, .events = POLLIN}, {.fd = f->cancel_fd, .events = POLLIN}};
  if (poll(p, f->cancel_fd >= 0 ? 2 : 1, 0) > 0) {
    if (p[0].revents)
      f->box_ended = true;
    else
      f->cancelled = true;
    return 1;
  }
  return 0;
}

/* Trust what the box trusts: the system roots (curl's default), the box's
 * CA for inject rules, and the operator's extra roots for upstreams. */
static CURLcode on_ssl_ctx(CURL *c, void *ssl_ctx, void *ctx) {
  (void)c;
  struct fetch *f = ctx;
  X509_STORE *store = SSL_CTX_get_cert_store(ssl_ctx);
  if (!store)
    return CURLE_SSL_CERTPROBLEM;
  if (f->ca_pem) {
    BIO *b = BIO_new_mem_buf(f->ca_pem, -1);
    X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
    int ok = x && X509_STORE_add_cert(store, x) == 1;
    X509_free(x);
    BIO_free(b);
    if (!ok)
      return CURLE_SSL_CERTPROBLEM;
  }
  if (f->m->cfg.egress_ca_file && X509_STORE_load_locations(store, f->m->cfg.egress_ca_file, NULL) != 1)
    return CURLE_SSL_CERTPROBLEM;
  return CURLE_OK;
}

/* An http(s) URL with a host and no credentials; *out: its canonical form. */
static int check_url(const char *url, char **out, struct husk_err *err) {
  *out = NULL;
  size_t n = strnlen(url, HUSK_FETCH_URL_MAX + 1);
  if (n == 0 || n > HUSK_FETCH_URL_MAX)
    return husk_fail(err, EINVAL, "the URL must be 1 to %d bytes", HUSK_FETCH_URL_MAX);
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)url[i] <= 0x20 || (unsigned char)url[i] >= 0x7f)
      return husk_fail(err, EINVAL, "the URL holds a space, a control byte or a non-ASCII byte "
                                    "(percent-encode it)");
  CURLU *u = curl_url();
  if (!u)
    return husk_fail(err, ENOMEM, "out of memory");
  int rc = -1;
  char *scheme = NULL, *host = NULL, *user = NULL, *pass = NULL;
  if (curl_url_set(u, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK) {
    husk_fail(err, EINVAL, "not a URL (want http://host/... or https://host/...)");
    goto out;
  }
  if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
      (strcasecmp(scheme, "http") && strcasecmp(scheme, "https"))) {
    husk_fail(err, EINVAL, "only http:// and https:// URLs can be fetched");
    goto out;
  }
  if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !host[0]) {
    husk_fail(err, EINVAL, "the URL names no host");
    goto out;
  }
  if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK ||
      curl_url_get(u, CURLUPART_PASSWORD, &pass, 0) == CURLUE_OK) {
    husk_fail(err, EINVAL, "a URL with user:password@ is refused: credentials go through the "
                           "box's secret bindings (a header with ${NAME})");
    goto out;
  }
  if (curl_url_get(u, CURLUPART_URL, out, 0) != CURLUE_OK) {
    husk_fail(err, EINVAL, "not a URL");
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

/* The URL without user:password (NULL if it does not parse). */
static char *url_public(const char *url) {
  CURLU *u = curl_url();
  char *s = NULL, *out = NULL;
  if (u && curl_url_set(u, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME) == CURLUE_OK &&
      curl_url_set(u, CURLUPART_USER, NULL, 0) == CURLUE_OK &&
      curl_url_set(u, CURLUPART_PASSWORD, NULL, 0) == CURLUE_OK &&
      curl_url_get(u, CURLUPART_URL, &s, 0) == CURLUE_OK)
    out = strdup(s);
  curl_free(s);
  curl_url_cleanup(u);
  return out;
}

static bool token_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         (c && strchr("!#$%&'*+.^_`|~-", c));
}

/* Headers the caller may not set: curl and the proxy own them. */
static bool header_reserved(const char *name, size_t n) {
  static const char *const r[] = {"host", "content-length", "transfer-encoding", "connection",
                                  "keep-alive", "te", "upgrade", "expect", "trailer"};
  for (size_t i = 0; i < sizeof r / sizeof r[0]; i++)
    if (strlen(r[i]) == n && !strncasecmp(name, r[i], n))
      return true;
  return n >= 6 && !strncasecmp(name, "proxy-", 6);
}

/* The placeholder of the box's binding whose env name is name[0..n), or
 * NULL.  Looked up in the box's env (placeholders only, never a secret). */
static const char *placeholder_of(char *const *env, const char *name, size_t n) {
  for (size_t i = 0; env && env[i]; i++)
    if (!strncmp(env[i], name, n) && env[i][n] == '=' && !strncmp(env[i] + n + 1, "husk_ph_", 8))
      return env[i] + n + 1;
  return NULL;
}

/* One "Name: value" checked, with ${NAME} replaced by the box's
 * placeholder, appended to *list. */
static int header_add(struct live_box *b, const char *h, struct curl_slist **list,
                      struct husk_err *err) {
  const char *colon = strchr(h, ':');
  size_t nl = colon ? (size_t)(colon - h) : 0;
  if (!colon || nl == 0 || nl > 64)
    return husk_fail(err, EINVAL, "a header must be \"Name: value\" with a name of 1 to 64 bytes");
  for (size_t i = 0; i < nl; i++)
    if (!token_char(h[i]))
      return husk_fail(err, EINVAL, "header name `%.*s` holds a character names cannot hold",
                       (int)nl, h);
  if (header_reserved(h, nl))
    return husk_fail(err, EINVAL, "header `%.*s` cannot be set (the fetch and the proxy set it)",
                     (int)nl, h);
  const char *v = colon + 1;
  while (*v == ' ' || *v == '\t')
    v++;
  size_t vl = strnlen(v, FETCH_HEADER_VALUE_MAX + 1);
  if (vl > FETCH_HEADER_VALUE_MAX)
    return husk_fail(err, EINVAL, "header `%.*s`: its value is longer than %d bytes", (int)nl, h,
                     FETCH_HEADER_VALUE_MAX);
  cleanup_free char *line = NULL;
  size_t cap = 0;
  FILE *o = open_memstream(&line, &cap);
  if (!o)
    return husk_fail(err, ENOMEM, "out of memory");
  fprintf(o, "%.*s: ", (int)nl, h);
  int rc = 0;
  pthread_mutex_lock(&b->lock);
  for (size_t i = 0; i < vl && rc == 0; i++) {
    unsigned char c = (unsigned char)v[i];
    if ((c < 0x20 && c != '\t') || c == 0x7f) {
      rc = husk_fail(err, EINVAL, "header `%.*s`: its value holds a control character", (int)nl, h);
    } else if (c == '$' && i + 1 < vl && v[i + 1] == '{') {
      const char *name = v + i + 2, *end = memchr(name, '}', vl - i - 2);
      size_t k = end ? (size_t)(end - name) : 0;
      bool ok = k > 0 && k <= 64;
      for (size_t j = 0; ok && j < k; j++)
        ok = name[j] == '_' || (name[j] >= 'A' && name[j] <= 'Z') ||
             (name[j] >= 'a' && name[j] <= 'z') || (j > 0 && name[j] >= '0' && name[j] <= '9');
      const char *ph = ok ? placeholder_of(b->env, name, k) : NULL;
      if (!ok)
        rc = husk_fail(err, EINVAL, "header `%.*s`: ${ must be followed by a name and }", (int)nl, h);
      else if (!ph)
        rc = husk_fail(err, EINVAL,
                       "header `%.*s`: the box has no secret binding with env name %.*s (see its "
                       "egress policy's secrets)",
                       (int)nl, h, (int)k, name);
      else {
        fputs(ph, o);
        i += k + 2;
      }
    } else {
      fputc(c, o);
    }
  }
  pthread_mutex_unlock(&b->lock);
  if (fclose(o) != 0 && rc == 0)
    rc = husk_fail(err, ENOMEM, "out of memory");
  if (rc < 0)
    return -1;
  struct curl_slist *nl2 = curl_slist_append(*list, line);
  if (!nl2)
    return husk_fail(err, ENOMEM, "out of memory");
  *list = nl2;
  return 0;
}

/* Why curl stopped, as the caller's error. */
static int fail_of(struct fetch *f, CURL *c, CURLcode cc, const char *errbuf, uint64_t timeout_ms,
                   struct husk_err *err) {
  long connect_code = 0;
  curl_easy_getinfo(c, CURLINFO_HTTP_CONNECTCODE, &connect_code);
  if (f->box_ended)
    return husk_fail(err, ESTALE, "the sandbox ended during the fetch: nothing was kept");
  if (f->cancelled)
    return husk_fail(err, ECANCELED, "the fetch was cancelled");
  if (f->too_big || cc == CURLE_FILESIZE_EXCEEDED)
    return husk_fail(err, EFBIG, "the body is larger than max_bytes (%llu bytes): nothing was kept",
                     (unsigned long long)f->max_bytes);
  if (f->write_errno)
    return husk_error(err, f->write_errno, "cannot write the file in the box");
  if (cc == CURLE_OPERATION_TIMEDOUT)
    return husk_fail(err, ETIMEDOUT, "the fetch did not finish within %llu s: nothing was kept",
                     (unsigned long long)(timeout_ms / 1000));
  if (connect_code == 403 || strstr(f->status_line, "egress policy"))
    return husk_fail(err, EACCES, "refused by the box's egress policy (%s): allow the host in the "
                                  "box's egress rules (PUT /v1/sandboxes/{id}/network)",
                     f->status_line[0] ? f->status_line : "403");
  if (connect_code == 429)
    return husk_fail(err, EAGAIN, "the box has too many connections through its proxy: try again");
  if (cc == CURLE_TOO_MANY_REDIRECTS)
    return husk_fail(err, EPROTO, "more than %d redirects", HUSK_FETCH_MAX_REDIRECTS);
  if (cc == CURLE_UNSUPPORTED_PROTOCOL)
    return husk_fail(err, EINVAL, "redirected to a URL that is not http:// or https://");
  if (f->bad_socket)
    return husk_fail(err, EACCES, "the fetch tried to connect other than through the box's proxy");
  if (connect_code >= 400)
    return husk_fail(err, EPROTO, "the box's egress proxy could not reach the destination (%s)",
                     f->status_line[0] ? f->status_line : "no status");
  return husk_fail(err, EPROTO, "the fetch failed: %s", errbuf[0] ? errbuf : curl_easy_strerror(cc));
}

int husk_box_fetch(struct husk_mgr *m, const char *tenant, const char *box_id,
                   const struct husk_fetch_spec *spec, struct husk_fetch_result *out,
                   struct husk_err *err) {
  memset(out, 0, sizeof *out);
  if (!spec->url || !spec->path)
    return husk_fail(err, EINVAL, "a fetch needs a URL and a path");
  if (husk_path_check(spec->path, strlen(spec->path), err) < 0)
    return -1;
  pthread_once(&curl_once, curl_init);
  if (curl_init_rc != CURLE_OK)
    return husk_fail(err, EIO, "libcurl did not start");
  cleanup_free char *url = NULL;
  if (check_url(spec->url, &url, err) < 0)
    return -1;
  uint64_t max_bytes = spec->max_bytes ? spec->max_bytes : HUSK_FETCH_MAX_BYTES_DEFAULT;
  if (max_bytes > HUSK_FETCH_MAX_BYTES_MAX)
    max_bytes = HUSK_FETCH_MAX_BYTES_MAX;
  uint64_t timeout_ms = spec->timeout_ms ? spec->timeout_ms : HUSK_FETCH_TIMEOUT_MS_DEFAULT;
  if (timeout_ms > HUSK_FETCH_TIMEOUT_MS_MAX)
    timeout_ms = HUSK_FETCH_TIMEOUT_MS_MAX;

  struct live_box *b = box_running(m, tenant, box_id, err);
  if (!b)
    return -1;
  int rc = -1;
  struct curl_slist *hdrs = NULL;
  CURL *c = NULL;
  cleanup_free char *ca_pem = NULL;
  struct husk_fs fs = {.fs = -1};
  int fd = -1;
  char tmpname[HUSK_TMPNAME_MAX] = "";
  struct fetch f = {.m = m, .pidfd = b->j.pidfd, .fd = -1, .max_bytes = max_bytes,
                    .cancel_fd = spec->cancel_fd};

  pthread_mutex_lock(&b->lock);
  bool egress = b->egress;
  pthread_mutex_unlock(&b->lock);
  int got = egress && m->egress ? egress_box_proxy(m->egress, b->id, &f.proxy, &ca_pem, err) : -1;
  if (got < 0 && egress && m->egress && err->code == ENOMEM)
    goto out;
  if (got < 0 && !m->egress) {
    husk_fail(err, ENETUNREACH,
              "sandbox %s has no network: this server has no egress proxy (boxes get network "
              "only from husk serve, with network \"egress\" and a policy)",
              box_id);
    goto out;
  }
  if (got < 0) {
    husk_fail(err, ENETUNREACH,
              "sandbox %s has no network (network mode none): create it with network \"egress\" "
              "and an egress policy allowing the host, or give it one with PUT "
              "/v1/sandboxes/{id}/network",
              box_id);
    goto out;
  }
  f.ca_pem = ca_pem;
  for (size_t i = 0; spec->headers && spec->headers[i]; i++) {
    if (i >= HUSK_FETCH_MAX_HEADERS) {
      husk_fail(err, EINVAL, "at most %d headers", HUSK_FETCH_MAX_HEADERS);
      goto out;
    }
    if (header_add(b, spec->headers[i], &hdrs, err) < 0)
      goto out;
  }
  if (husk_box_open_fs(m, tenant, box_id, &fs, err) < 0)
    goto out;
  if (husk_file_create(&fs, spec->path, true, 0644, &fd, tmpname, sizeof tmpname, err) < 0)
    goto out;
  f.fd = fd;
  if (!(f.sha = EVP_MD_CTX_new()) || EVP_DigestInit_ex(f.sha, EVP_sha256(), NULL) != 1) {
    husk_fail(err, ENOMEM, "out of memory");
    goto abort;
  }
  if (!(c = curl_easy_init())) {
    husk_fail(err, ENOMEM, "out of memory");
    goto abort;
  }
  char proxy[64], ip[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &f.proxy.sin_addr, ip, sizeof ip);
  snprintf(proxy, sizeof proxy, "http://%s:%u", ip, (unsigned)ntohs(f.proxy.sin_port));
  char errbuf[CURL_ERROR_SIZE] = "";
  CURLcode cc = CURLE_OK;
#define SET(opt, val)                                                                              \
  if (cc == CURLE_OK)                                                                              \
  cc = curl_easy_setopt(c, opt, val)
  SET(CURLOPT_URL, url);
  SET(CURLOPT_PROTOCOLS_STR, "http,https");
  SET(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
  SET(CURLOPT_FOLLOWLOCATION, 1L);
  SET(CURLOPT_MAXREDIRS, (long)HUSK_FETCH_MAX_REDIRECTS);
  SET(CURLOPT_PROXY, proxy);
  SET(CURLOPT_PROXYTYPE, (long)CURLPROXY_HTTP);
  SET(CURLOPT_NOPROXY, ""); /* no host bypasses it, whatever the environment says */
  SET(CURLOPT_OPENSOCKETFUNCTION, open_socket);
  SET(CURLOPT_OPENSOCKETDATA, &f);
  SET(CURLOPT_WRITEFUNCTION, on_body);
  SET(CURLOPT_WRITEDATA, &f);
  SET(CURLOPT_HEADERFUNCTION, on_header);
  SET(CURLOPT_HEADERDATA, &f);
  SET(CURLOPT_NOPROGRESS, 0L);
  SET(CURLOPT_XFERINFOFUNCTION, on_progress);
  SET(CURLOPT_XFERINFODATA, &f);
  SET(CURLOPT_SSL_CTX_FUNCTION, on_ssl_ctx);
  SET(CURLOPT_SSL_CTX_DATA, &f);
  SET(CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)max_bytes);
  SET(CURLOPT_TIMEOUT_MS, (long)timeout_ms);
  SET(CURLOPT_CONNECTTIMEOUT_MS, (long)(timeout_ms < FETCH_CONNECT_MS ? timeout_ms : FETCH_CONNECT_MS));
  SET(CURLOPT_NOSIGNAL, 1L);
  SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
  SET(CURLOPT_USERAGENT, "husk-fetch");
  SET(CURLOPT_ERRORBUFFER, errbuf);
  if (hdrs)
    SET(CURLOPT_HTTPHEADER, hdrs);
#undef SET
  if (cc != CURLE_OK) {
    husk_fail(err, EIO, "libcurl refused an option: %s", curl_easy_strerror(cc));
    goto abort;
  }
  cc = curl_easy_perform(c);
  if (cc != CURLE_OK) {
    fail_of(&f, c, cc, errbuf, timeout_ms, err);
    goto abort;
  }
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  if (status >= 400) {
    if (status == 403 && strstr(f.status_line, "egress policy"))
      husk_fail(err, EACCES, "refused by the box's egress policy (%s): allow the host in the "
                             "box's egress rules (PUT /v1/sandboxes/{id}/network)",
                f.status_line);
    else
      husk_fail(err, EPROTO, "the server answered %s: nothing was kept",
                f.status_line[0] ? f.status_line : "an error");
    goto abort;
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned mdlen = 0;
  if (EVP_DigestFinal_ex(f.sha, md, &mdlen) != 1 || mdlen != 32) {
    husk_fail(err, EIO, "cannot compute the body's sha256");
    goto abort;
  }
  struct pollfd ended = {.fd = f.pidfd, .events = POLLIN};
  if (poll(&ended, 1, 0) > 0) {
    husk_fail(err, ESTALE, "the sandbox ended during the fetch: nothing was kept");
    goto abort;
  }
  if (husk_file_commit(&fs, spec->path, fd, tmpname, err) < 0)
    goto abort;
  out->size = f.size;
  out->status = status;
  long redirects = 0;
  curl_easy_getinfo(c, CURLINFO_REDIRECT_COUNT, &redirects);
  out->redirects = redirects > 0 ? (unsigned)redirects : 0;
  char *ct = NULL, *eff = NULL;
  if (curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct) == CURLE_OK && ct) {
    /* The upstream's bytes, for the model to read: printable ASCII only. */
    size_t k = 0;
    for (; ct[k] && k < sizeof out->content_type - 1; k++)
      out->content_type[k] = ct[k] >= 0x20 && ct[k] <= 0x7e ? ct[k] : '?';
    out->content_type[k] = '\0';
  }
  for (unsigned i = 0; i < 32; i++)
    snprintf(out->sha256 + 2 * i, 3, "%02x", md[i]);
  if (curl_easy_getinfo(c, CURLINFO_EFFECTIVE_URL, &eff) == CURLE_OK && eff)
    out->final_url = url_public(eff);
  if (!out->final_url)
    out->final_url = strdup(url);
  rc = 0;
  goto out;
abort:
  husk_file_abort(&fs, spec->path, fd, tmpname);
out:
  if (c)
    curl_easy_cleanup(c);
  curl_slist_free_all(hdrs);
  EVP_MD_CTX_free(f.sha);
  if (fd >= 0)
    close(fd);
  husk_fs_close(&fs);
  lb_unref(m, b);
  return rc;
}

void husk_fetch_result_free(struct husk_fetch_result *r) {
  if (!r)
    return;
  free(r->final_url);
  r->final_url = NULL;
}
