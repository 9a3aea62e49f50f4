/* Links: presigned, expiring GET URLs of objects, and who fetched them.
 *
 * A link is a SigV4 presigned URL on the daemon's public address, signed
 * with the tenant's internal link key (never shown to anyone), carrying
 * its id as a signed query parameter (x-husk-link).  The S3 front checks
 * it as any presigned request -- a changed path, method, expiry, host or
 * id breaks the signature -- and records each valid fetch (the newest
 * STORE_LINK_LOG_MAX per link).  A refused one (forged, expired, revoked)
 * only increments a counter: the link's when its id names a link of the
 * tenant whose key it claims, a global one otherwise.
 * The link row also lets an owner list links and read their access log. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>

#include "state/store_state.h"
#include "storage/remote.h"
#include "storage/sigv4.h"
#include "storage/store_internal.h"
#include "util/cleanup.h"
#include "util/id.h"
#include "util/utf8.h"

void store_link_free(struct store_link *l) {
  if (!l)
    return;
  free(l->key);
  free(l->url);
  l->key = l->url = NULL;
}

/* "http://host:port" -> host:port (the Host header a fetcher sends). */
static int url_authority(const char *url, char *host, size_t size, struct husk_err *err) {
  const char *p = strstr(url, "://");
  if (!p || (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)))
    return husk_fail(err, EINVAL, "the public URL must start with http:// or https://");
  p += 3;
  size_t n = strcspn(p, "/?#");
  if (n == 0 || n >= size || (p[n] && strcmp(p + n, "/")))
    return husk_fail(err, EINVAL, "the public URL must be scheme://host[:port] without a path");
  memcpy(host, p, n);
  host[n] = 0;
  return 0;
}

/* Content-Disposition for a download name: plain when it is simple ASCII,
 * RFC 6266 filename* otherwise.  The name must be one path component of
 * printable UTF-8. */
static char *disposition(const char *name, bool inline_disp, struct husk_err *err) {
  size_t n = strlen(name);
  if (n == 0 || n > 255 || !utf8_valid(name, n) || strchr(name, '/'))
    return husk_fail(err, EINVAL,
                     "the download filename must be 1..255 bytes of UTF-8 without `/`"),
           NULL;
  bool simple = true;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)name[i];
    if (c < 0x20 || c == 0x7f)
      return husk_fail(err, EINVAL, "the download filename has control characters"), NULL;
    if (c >= 0x80 || c == '"' || c == '\\' || c == ';' || c == '%')
      simple = false;
  }
  char *d = NULL;
  if (simple) {
    if (asprintf(&d, "%s; filename=\"%s\"", inline_disp ? "inline" : "attachment", name) < 0)
      d = NULL;
  } else {
    cleanup_free char *e = sigv4_uri_encode(name, n, false);
    if (e && asprintf(&d, "%s; filename*=UTF-8''%s", inline_disp ? "inline" : "attachment", e) < 0)
      d = NULL;
  }
  if (!d)
    husk_error(err, ENOMEM, "link");
  return d;
}

/* A link on the external store: presigned with its credentials, so its
 * fetches are not seen (nor logged) by husk. */
static int remote_link(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                       int64_t expires_s, const char *filename, bool inline_disp,
                       struct store_link *out, struct husk_err *err) {
  if (store_key_check(key, err) < 0)
    return -1;
  if (!store_bucket_name_ok(bucket))
    return husk_fail(err, STORE_EBADNAME, "The specified bucket is not valid");
  cleanup_free char *rk = remote_key(tenant_id, bucket, key);
  if (!rk)
    return husk_error(err, ENOMEM, "link");
  uint64_t size;
  if (remote_head(s->remote, rk, &size, err) < 0) {
    if (err->code == ENOENT)
      return husk_fail(err, STORE_ENOKEY, "The specified key does not exist.");
    return -1;
  }
  cleanup_free char *disp = NULL;
  if (filename && *filename && !(disp = disposition(filename, inline_disp, err)))
    return -1;
  if (id_new("l", STORE_ID_BYTES, out->id, STORE_ID_SIZE, err) < 0 ||
      remote_presign(s->remote, rk, expires_s, disp, &out->url, err) < 0)
    return -1;
  out->key = strdup(key);
  if (!out->key) {
    store_link_free(out);
    return husk_error(err, ENOMEM, "link");
  }
  snprintf(out->bucket, sizeof out->bucket, "%s", bucket);
  snprintf(out->filename, sizeof out->filename, "%s", filename ? filename : "");
  time_t now = time(NULL);
  out->created_ms = (int64_t)now * 1000;
  out->expires_ms = ((int64_t)now + expires_s) * 1000;
  if (state_link_insert(s->st, tenant_id, out, err) < 0) {
    store_link_free(out);
    return -1;
  }
  return 0;
}

int store_link_create(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                      int64_t expires_s, const char *filename, bool inline_disp,
                      const char *created_by, struct store_link *out, struct husk_err *err) {
  memset(out, 0, sizeof *out);
  /* Recorded with the row (state_link_insert); refused before anything
   * is signed. */
  if (store_creator_copy(out->created_by, created_by, err) < 0)
    return -1;
  if (expires_s == 0)
    expires_s = STORE_LINK_DEFAULT_S;
  if (expires_s < 1 || expires_s > STORE_LINK_MAX_S)
    return husk_fail(err, EINVAL, "the expiry must be 1..%d seconds (7 days)", STORE_LINK_MAX_S);
  if (store_space_check(s, 0, err) < 0)
    return -1;
  if (s->remote)
    return remote_link(s, tenant_id, bucket, key, expires_s, filename, inline_disp, out, err);
  struct store_object o;
  if (store_object_get(s, tenant_id, bucket, key, &o, NULL, err) < 0)
    return -1;
  store_object_free(&o);
  char host[256];
  if (!s->public_url[0])
    return husk_fail(
        err, EOPNOTSUPP,
        "links need the S3 listener (--s3-listen), a --public-url or an external store");
  if (url_authority(s->public_url, host, sizeof host, err) < 0)
    return -1;
  char id[STORE_ID_SIZE];
  if (id_new("l", STORE_ID_BYTES, id, STORE_ID_SIZE, err) < 0)
    return -1;
  cleanup_free char *extra = NULL;
  if (filename && *filename) {
    cleanup_free char *d = disposition(filename, inline_disp, err);
    if (!d)
      return -1;
    cleanup_free char *ed = sigv4_uri_encode(d, strlen(d), false);
    if (!ed || asprintf(&extra, "response-content-disposition=%s&x-husk-link=%s", ed, id) < 0)
      return husk_error(err, ENOMEM, "link");
  } else if (asprintf(&extra, "x-husk-link=%s", id) < 0) {
    return husk_error(err, ENOMEM, "link");
  }
  cleanup_free char *ekey = sigv4_uri_encode(key, strlen(key), true);
  cleanup_free char *path = NULL;
  if (!ekey || asprintf(&path, "/%s/%s", bucket, ekey) < 0)
    return husk_error(err, ENOMEM, "link");
  char kid[STORE_ACCESS_KEY_SIZE], secret[STORE_SECRET_SIZE];
  if (store_internal_key(s, tenant_id, kid, secret, err) < 0)
    return -1;
  struct sigv4_creds c = {kid, secret, s->region, "s3"};
  time_t now = time(NULL);
  cleanup_free char *q = NULL;
  int rc = sigv4_presign(&c, "GET", path, host, extra, now, expires_s, &q, err);
  OPENSSL_cleanse(secret, sizeof secret);
  if (rc < 0)
    return -1;
  const char *base = s->public_url;
  size_t bl = strlen(base);
  if (bl && base[bl - 1] == '/')
    bl--;
  if (asprintf(&out->url, "%.*s%s?%s", (int)bl, base, path, q) < 0) {
    out->url = NULL;
    return husk_error(err, ENOMEM, "link");
  }
  out->key = strdup(key);
  if (!out->key) {
    store_link_free(out);
    return husk_error(err, ENOMEM, "link");
  }
  snprintf(out->id, sizeof out->id, "%s", id);
  snprintf(out->bucket, sizeof out->bucket, "%s", bucket);
  snprintf(out->filename, sizeof out->filename, "%s", filename ? filename : "");
  out->created_ms = (int64_t)now * 1000;
  out->expires_ms = ((int64_t)now + expires_s) * 1000;

  if (state_link_insert(s->st, tenant_id, out, err) < 0) {
    store_link_free(out);
    return -1;
  }
  return 0;
}

int store_link_get(struct store *s, const char *tenant_id, const char *id, struct store_link *out,
                   struct husk_err *err) {
  return state_link_get(s->st, tenant_id, id, out, err);
}

bool store_link_owned(struct store *s, const char *id, const char *tenant_id, bool *live) {
  struct store_link l;
  struct husk_err err;
  *live = false;
  if (store_link_get(s, tenant_id, id, &l, &err) < 0)
    return false;
  *live = l.revoked_ms == 0;
  store_link_free(&l);
  return true;
}

int store_link_revoke(struct store *s, const char *tenant_id, const char *id,
                      struct husk_err *err) {
  return state_link_revoke(s->st, tenant_id, id, err);
}

int store_link_list(struct store *s, const char *tenant_id,
                    int (*cb)(void *ctx, const struct store_link *l), void *ctx,
                    struct husk_err *err) {
  return state_link_list(s->st, tenant_id, cb, ctx, err);
}

/* Printable ASCII only, cut to size: these come from anyone on the net. */
static void clean_copy(char *dst, size_t size, const char *src) {
  size_t o = 0;
  for (; src && *src && o + 1 < size; src++)
    dst[o++] = (*src >= 0x20 && *src < 0x7f) ? *src : '?';
  dst[o] = 0;
}

int store_link_record(struct store *s, const char *id, const char *remote, const char *user_agent,
                      int status, struct husk_err *err) {
  char ra[64], ua[256];
  clean_copy(ra, sizeof ra, remote);
  clean_copy(ua, sizeof ua, user_agent);
  return state_link_record(s->st, id, ra, ua, status, err);
}

int store_link_denied(struct store *s, const char *id, struct husk_err *err) {
  return state_link_denied(s->st, id, err);
}

int store_link_denied_total(struct store *s, int64_t *count, struct husk_err *err) {
  return state_link_denied_total(s->st, count, err);
}

int store_link_log(struct store *s, const char *tenant_id, const char *id, int64_t after_seq,
                   int limit, int (*cb)(void *ctx, const struct store_link_access *a), void *ctx,
                   struct husk_err *err) {
  if (limit == 0)
    limit = 100;
  if (limit < 1 || limit > 1000)
    return husk_fail(err, EINVAL, "limit must be 1..1000");
  return state_link_log(s->st, tenant_id, id, after_seq, limit, cb, ctx, err);
}
