/* The external-store client: links and box <-> store transfers against an
 * S3-compatible service instead of the embedded store (Cloudflare R2, AWS
 * S3, MinIO, another husk).
 *
 * husk signs every request itself (storage/sigv4.h) and talks HTTP with
 * libcurl.  The R2 rules are the lowest common denominator it follows
 * everywhere: path-style URLs, a configurable region ("auto" for R2), and
 * multipart parts of one equal size (all but the last).
 *
 * Tenants share the one configured bucket: every key is stored under
 * "<tenant id>/<bucket>/<key>", so no tenant can name another's object. */
#ifndef HUSK_STORAGE_REMOTE_H
#define HUSK_STORAGE_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "util/error.h"

#define REMOTE_PART_MIN (5ULL << 20)
#define REMOTE_PART_DEFAULT (8ULL << 20)

struct remote_config {
  const char *endpoint;   /* "https://<acct>.r2.cloudflarestorage.com", "http://127.0.0.1:7071" */
  const char *region;     /* "auto" for R2; "us-east-1" if NULL */
  const char *bucket;
  const char *access_key;
  const char *secret_key;
  uint64_t part_size;     /* 0: REMOTE_PART_DEFAULT; at least REMOTE_PART_MIN */
};

struct remote;

int remote_open(struct remote **out, const struct remote_config *cfg, struct husk_err *err);
void remote_close(struct remote *r);
const char *remote_endpoint(const struct remote *r);

/* The object name in the external bucket for a tenant's bucket/key
 * (malloc'd). */
char *remote_key(const char *tenant_id, const char *bucket, const char *key);

/* Upload `size` bytes of `fd` (from offset 0) as `key`: one PUT up to the
 * part size, else a multipart upload of equal parts (aborted on failure).
 * `etag` (48 bytes) receives the store's ETag without quotes. */
int remote_put_fd(struct remote *r, const char *key, int fd, uint64_t size,
                  const char *content_type, char etag[48], struct husk_err *err);
/* Stream `key` into sink(ctx, buf, n) (returns 0 or -1).  ENOENT if absent. */
int remote_get(struct remote *r, const char *key,
               int (*sink)(void *ctx, const void *buf, size_t n), void *ctx, uint64_t *size,
               struct husk_err *err);
/* Delete `key` (S3: a missing key is no error). */
int remote_delete(struct remote *r, const char *key, struct husk_err *err);
/* Whether `key` exists (0) or not (ENOENT); its size. */
int remote_head(struct remote *r, const char *key, uint64_t *size, struct husk_err *err);
/* A presigned GET of `key` valid `expires_s`, downloaded as `disposition`
 * (a Content-Disposition value, may be NULL).  malloc'd URL. */
int remote_presign(struct remote *r, const char *key, int64_t expires_s, const char *disposition,
                   char **url, struct husk_err *err);

#endif
