/* The external-store client (see remote.h). */
#define _GNU_SOURCE
#include "storage/remote.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "storage/sigv4.h"
#include "util/cleanup.h"

/* Bounds on what we accept from the external store. */
#define REMOTE_XML_MAX (64 * 1024)
#define REMOTE_TIMEOUT_S 600

struct remote {
  char *endpoint; /* without a trailing "/" */
  char *host;     /* Host header: authority of the endpoint */
  char *region, *bucket, *access_key, *secret_key;
  uint64_t part_size;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

int remote_open(struct remote **out, const struct remote_config *cfg, struct husk_err *err) {
  if (!cfg->endpoint || (strncmp(cfg->endpoint, "http://", 7) && strncmp(cfg->endpoint, "https://", 8)))
    return husk_fail(err, EINVAL, "the external store endpoint must be http(s)://host[:port]");
  if (!cfg->bucket || !*cfg->bucket || !cfg->access_key || !*cfg->access_key || !cfg->secret_key ||
      !*cfg->secret_key)
    return husk_fail(err, EINVAL, "the external store needs a bucket, an access key and a secret");
  uint64_t ps = cfg->part_size ? cfg->part_size : REMOTE_PART_DEFAULT;
  if (ps < REMOTE_PART_MIN || ps > (5ULL << 30))
    return husk_fail(err, EINVAL, "the external store's part size must be 5 MiB..5 GiB");
  const char *auth = strstr(cfg->endpoint, "://") + 3;
  size_t al = strcspn(auth, "/?#");
  if (al == 0 || (auth[al] && strcmp(auth + al, "/")))
    return husk_fail(err, EINVAL, "the external store endpoint must not have a path");
  pthread_once(&curl_once, curl_init);
  struct remote *r = calloc(1, sizeof *r);
  if (!r)
    return husk_error(err, ENOMEM, "remote");
  r->endpoint = strndup(cfg->endpoint, (size_t)(auth - cfg->endpoint) + al);
  r->host = strndup(auth, al);
  r->region = strdup(cfg->region ? cfg->region : "us-east-1");
  r->bucket = strdup(cfg->bucket);
  r->access_key = strdup(cfg->access_key);
  r->secret_key = strdup(cfg->secret_key);
  r->part_size = ps;
  if (!r->endpoint || !r->host || !r->region || !r->bucket || !r->access_key || !r->secret_key) {
    remote_close(r);
    return husk_error(err, ENOMEM, "remote");
  }
  *out = r;
  return 0;
}

void remote_close(struct remote *r) {
  if (!r)
    return;
  if (r->secret_key)
    OPENSSL_cleanse(r->secret_key, strlen(r->secret_key));
  free(r->endpoint);
  free(r->host);
  free(r->region);
  free(r->bucket);
  free(r->access_key);
  free(r->secret_key);
  free(r);
}

const char *remote_endpoint(const struct remote *r) { return r->endpoint; }

char *remote_key(const char *tenant_id, const char *bucket, const char *key) {
  char *k = NULL;
  if (asprintf(&k, "%s/%s/%s", tenant_id, bucket, key) < 0)
    return NULL;
  return k;
}

/* "/bucket/encoded-key" */
static char *object_path(struct remote *r, const char *key) {
  cleanup_free char *ek = sigv4_uri_encode(key, strlen(key), true);
  cleanup_free char *eb = sigv4_uri_encode(r->bucket, strlen(r->bucket), false);
  char *p = NULL;
  if (!ek || !eb || asprintf(&p, "/%s/%s", eb, ek) < 0)
    return NULL;
  return p;
}

/* ---- one signed request ---- */

struct call {
  const char *method;
  const char *path;  /* encoded */
  const char *query; /* encoded, may be NULL */
  const char *content_type;
  /* Body: from fd at [off, off+len), or from a buffer. */
  int fd;
  uint64_t off, len, sent;
  const char *buf;
  size_t buf_len;
  /* Response. */
  int (*sink)(void *ctx, const void *buf, size_t n);
  void *sink_ctx;
  char *resp; /* small responses (XML) */
  size_t resp_len;
  bool resp_overflow;
  char etag[64];
  uint64_t content_length;
  long status;
  bool sink_failed;
};

static size_t read_cb(char *out, size_t size, size_t n, void *ud) {
  struct call *c = ud;
  size_t want = size * n;
  if (c->buf) {
    size_t left = c->buf_len - (size_t)c->sent;
    if (want > left)
      want = left;
    memcpy(out, c->buf + c->sent, want);
    c->sent += want;
    return want;
  }
  uint64_t left = c->len - c->sent;
  if (want > left)
    want = (size_t)left;
  if (want == 0)
    return 0;
  ssize_t got = pread(c->fd, out, want, (off_t)(c->off + c->sent));
  if (got <= 0)
    return CURL_READFUNC_ABORT;
  c->sent += (uint64_t)got;
  return (size_t)got;
}

static size_t write_cb(char *data, size_t size, size_t n, void *ud) {
  struct call *c = ud;
  size_t len = size * n;
  if (c->sink && c->status / 100 == 2) {
    if (c->sink(c->sink_ctx, data, len) < 0) {
      c->sink_failed = true;
      return 0;
    }
    return len;
  }
  if (c->resp_len + len > REMOTE_XML_MAX) {
    c->resp_overflow = true;
    return len; /* dropped: only the start of an error matters */
  }
  char *p = realloc(c->resp, c->resp_len + len + 1);
  if (!p)
    return 0;
  c->resp = p;
  memcpy(c->resp + c->resp_len, data, len);
  c->resp_len += len;
  c->resp[c->resp_len] = 0;
  return len;
}

static size_t header_cb(char *data, size_t size, size_t n, void *ud) {
  struct call *c = ud;
  size_t len = size * n;
  if (len > 5 && !strncmp(data, "HTTP/", 5)) {
    /* A new response (after a 100 Continue): its status. */
    const char *sp = memchr(data, ' ', len);
    c->status = sp ? strtol(sp + 1, NULL, 10) : 0;
  } else if (len > 5 && !strncasecmp(data, "ETag:", 5)) {
    const char *v = data + 5;
    size_t vl = len - 5;
    while (vl && (*v == ' ' || *v == '"')) {
      v++;
      vl--;
    }
    while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == '"' || v[vl - 1] == ' '))
      vl--;
    if (vl < sizeof c->etag) {
      memcpy(c->etag, v, vl);
      c->etag[vl] = 0;
    }
  } else if (len > 15 && !strncasecmp(data, "Content-Length:", 15)) {
    c->content_length = strtoull(data + 15, NULL, 10);
  }
  return len;
}

/* The code of an S3 error reply, for the message. */
static void error_code(const struct call *c, char *out, size_t size) {
  out[0] = 0;
  if (!c->resp)
    return;
  const char *a = strstr(c->resp, "<Code>"), *b = a ? strstr(a, "</Code>") : NULL;
  if (a && b && (size_t)(b - a - 6) < size) {
    memcpy(out, a + 6, (size_t)(b - a - 6));
    out[b - a - 6] = 0;
    for (char *p = out; *p; p++)
      if (*p < 0x20 || *p > 0x7e)
        *p = '?';
  }
}

static int perform(struct remote *r, struct call *c, struct husk_err *err) {
  char amz_date[17];
  sigv4_amz_date(time(NULL), amz_date);
  struct sigv4_header hs[4] = {{"host", r->host},
                               {"x-amz-content-sha256", SIGV4_UNSIGNED},
                               {"x-amz-date", amz_date}};
  size_t nh = 3;
  if (c->content_type && *c->content_type)
    hs[nh++] = (struct sigv4_header){"content-type", c->content_type};
  struct sigv4_request rq = {c->method, c->path, c->query, hs, nh};
  struct sigv4_creds cr = {r->access_key, r->secret_key, r->region, "s3"};
  cleanup_free char *authz = NULL;
  if (sigv4_sign_headers(&rq, &cr, amz_date, SIGV4_UNSIGNED, &authz, err) < 0)
    return -1;
  cleanup_free char *url = NULL;
  if (asprintf(&url, "%s%s%s%s", r->endpoint, c->path, c->query && *c->query ? "?" : "",
               c->query ? c->query : "") < 0)
    return husk_error(err, ENOMEM, "remote");
  CURL *h = curl_easy_init();
  if (!h)
    return husk_fail(err, ENOMEM, "cannot start a libcurl handle");
  struct curl_slist *list = NULL;
  char line[2048];
  bool oom = false;
  for (size_t i = 0; i < nh; i++) {
    snprintf(line, sizeof line, "%s: %s", hs[i].name, hs[i].value);
    struct curl_slist *l2 = curl_slist_append(list, line);
    oom |= !l2;
    list = l2 ? l2 : list;
  }
  snprintf(line, sizeof line, "Authorization: %s", authz);
  struct curl_slist *l2 = curl_slist_append(list, line);
  oom |= !l2;
  list = l2 ? l2 : list;
  OPENSSL_cleanse(line, sizeof line);
  if (oom) {
    curl_slist_free_all(list);
    curl_easy_cleanup(h);
    return husk_error(err, ENOMEM, "remote");
  }
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT, (long)REMOTE_TIMEOUT_S);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, write_cb);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, c);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, header_cb);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, c);
  if (!strcmp(c->method, "PUT")) {
    curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, read_cb);
    curl_easy_setopt(h, CURLOPT_READDATA, c);
    curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)(c->buf ? c->buf_len : c->len));
  } else if (!strcmp(c->method, "POST")) {
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, read_cb);
    curl_easy_setopt(h, CURLOPT_READDATA, c);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(c->buf ? c->buf_len : 0));
  } else if (!strcmp(c->method, "HEAD")) {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else if (strcmp(c->method, "GET")) {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, c->method);
  }
  CURLcode cc = curl_easy_perform(h);
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  c->status = status;
  curl_slist_free_all(list);
  curl_easy_cleanup(h);
  if (c->sink_failed)
    return husk_fail(err, EIO, "writing what the external store sent failed");
  if (cc != CURLE_OK)
    return husk_fail(err, EIO, "external store %s: %s", r->host, curl_easy_strerror(cc));
  if (status / 100 != 2) {
    char code[64];
    error_code(c, code, sizeof code);
    return husk_fail(err, status == 404 ? ENOENT : status == 403 ? EACCES : EIO,
                     "external store %s: %s %ld%s%s", r->host, c->method, status, code[0] ? " " : "",
                     code);
  }
  return 0;
}

/* ---- operations ---- */

int remote_head(struct remote *r, const char *key, uint64_t *size, struct husk_err *err) {
  cleanup_free char *path = object_path(r, key);
  if (!path)
    return husk_error(err, ENOMEM, "remote");
  struct call c = {.method = "HEAD", .path = path, .fd = -1};
  int rc = perform(r, &c, err);
  free(c.resp);
  if (rc == 0 && size)
    *size = c.content_length;
  return rc;
}

int remote_get(struct remote *r, const char *key,
               int (*sink)(void *ctx, const void *buf, size_t n), void *ctx, uint64_t *size,
               struct husk_err *err) {
  cleanup_free char *path = object_path(r, key);
  if (!path)
    return husk_error(err, ENOMEM, "remote");
  struct call c = {.method = "GET", .path = path, .fd = -1, .sink = sink, .sink_ctx = ctx};
  int rc = perform(r, &c, err);
  free(c.resp);
  if (rc == 0 && size)
    *size = c.content_length;
  return rc;
}

int remote_delete(struct remote *r, const char *key, struct husk_err *err) {
  cleanup_free char *path = object_path(r, key);
  if (!path)
    return husk_error(err, ENOMEM, "remote");
  struct call c = {.method = "DELETE", .path = path, .fd = -1};
  int rc = perform(r, &c, err);
  free(c.resp);
  return rc;
}

static int put_single(struct remote *r, const char *path, int fd, uint64_t size, const char *ctype,
                      char etag[48], struct husk_err *err) {
  struct call c = {.method = "PUT", .path = path, .fd = fd, .len = size, .content_type = ctype};
  int rc = perform(r, &c, err);
  free(c.resp);
  if (rc == 0)
    snprintf(etag, 48, "%.47s", c.etag);
  return rc;
}

static char *xml_value(const char *xml, const char *tag) {
  char open[64], close[64];
  snprintf(open, sizeof open, "<%s>", tag);
  snprintf(close, sizeof close, "</%s>", tag);
  const char *a = xml ? strstr(xml, open) : NULL;
  const char *b = a ? strstr(a, close) : NULL;
  if (!a || !b)
    return NULL;
  a += strlen(open);
  return strndup(a, (size_t)(b - a));
}

int remote_put_fd(struct remote *r, const char *key, int fd, uint64_t size,
                  const char *content_type, char etag[48], struct husk_err *err) {
  cleanup_free char *path = object_path(r, key);
  if (!path)
    return husk_error(err, ENOMEM, "remote");
  if (size <= r->part_size)
    return put_single(r, path, fd, size, content_type, etag, err);
  /* Multipart, every part the same size but the last (R2's rule). */
  struct call init = {.method = "POST", .path = path, .query = "uploads=", .fd = -1,
                      .content_type = content_type, .buf = "", .buf_len = 0};
  if (perform(r, &init, err) < 0) {
    free(init.resp);
    return -1;
  }
  cleanup_free char *upload = xml_value(init.resp, "UploadId");
  free(init.resp);
  if (!upload || !*upload || strspn(upload, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~") != strlen(upload))
    return husk_fail(err, EIO, "the external store sent no usable UploadId");
  uint64_t nparts = (size + r->part_size - 1) / r->part_size;
  if (nparts > 10000)
    return husk_fail(err, EFBIG, "the object needs more than 10000 parts of the configured size");
  char (*etags)[64] = calloc(nparts, sizeof *etags);
  if (!etags)
    return husk_error(err, ENOMEM, "remote");
  int rc = 0;
  for (uint64_t i = 0; i < nparts && rc == 0; i++) {
    char q[256];
    snprintf(q, sizeof q, "partNumber=%llu&uploadId=%s", (unsigned long long)(i + 1), upload);
    uint64_t off = i * r->part_size;
    uint64_t len = size - off < r->part_size ? size - off : r->part_size;
    struct call c = {.method = "PUT", .path = path, .query = q, .fd = fd, .off = off, .len = len};
    rc = perform(r, &c, err);
    free(c.resp);
    if (rc == 0 && !c.etag[0])
      rc = husk_fail(err, EIO, "the external store sent no ETag for a part");
    if (rc == 0)
      memcpy(etags[i], c.etag, sizeof c.etag);
  }
  char q[256];
  snprintf(q, sizeof q, "uploadId=%s", upload);
  if (rc == 0) {
    size_t cap = 64 + nparts * 128;
    char *xml = malloc(cap);
    if (!xml) {
      rc = husk_error(err, ENOMEM, "remote");
    } else {
      size_t o = (size_t)snprintf(xml, cap, "<CompleteMultipartUpload>");
      for (uint64_t i = 0; i < nparts; i++)
        o += (size_t)snprintf(xml + o, cap - o,
                              "<Part><PartNumber>%llu</PartNumber><ETag>\"%s\"</ETag></Part>",
                              (unsigned long long)(i + 1), etags[i]);
      o += (size_t)snprintf(xml + o, cap - o, "</CompleteMultipartUpload>");
      struct call c = {.method = "POST", .path = path, .query = q, .fd = -1, .buf = xml, .buf_len = o};
      rc = perform(r, &c, err);
      /* A 200 can still carry an error (S3 reports late failures so). */
      if (rc == 0 && c.resp && strstr(c.resp, "<Error>"))
        rc = husk_fail(err, EIO, "the external store failed to complete the upload");
      cleanup_free char *e = rc == 0 ? xml_value(c.resp, "ETag") : NULL;
      if (rc == 0) {
        const char *v = e ? e : "";
        if (!strncmp(v, "&quot;", 6))
          v += 6;
        else if (*v == '"')
          v++;
        snprintf(etag, 48, "%.*s", (int)strcspn(v, "\"&"), v);
      }
      free(c.resp);
      free(xml);
    }
  }
  if (rc < 0) {
    struct husk_err e2;
    struct call c = {.method = "DELETE", .path = path, .query = q, .fd = -1};
    perform(r, &c, &e2);
    free(c.resp);
  }
  free(etags);
  return rc;
}

int remote_presign(struct remote *r, const char *key, int64_t expires_s, const char *disposition,
                   char **url, struct husk_err *err) {
  cleanup_free char *path = object_path(r, key);
  if (!path)
    return husk_error(err, ENOMEM, "remote");
  cleanup_free char *extra = NULL;
  if (disposition) {
    cleanup_free char *ed = sigv4_uri_encode(disposition, strlen(disposition), false);
    if (!ed || asprintf(&extra, "response-content-disposition=%s", ed) < 0)
      return husk_error(err, ENOMEM, "remote");
  }
  struct sigv4_creds cr = {r->access_key, r->secret_key, r->region, "s3"};
  cleanup_free char *q = NULL;
  if (sigv4_presign(&cr, "GET", path, r->host, extra, time(NULL), expires_s, &q, err) < 0)
    return -1;
  if (asprintf(url, "%s%s?%s", r->endpoint, path, q) < 0)
    return husk_error(err, ENOMEM, "remote");
  return 0;
}
