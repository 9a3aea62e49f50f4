/* The object store's rows: buckets, objects, multipart uploads and their
 * parts, links and their access log, S3 access keys, and the purge of a
 * deleted tenant's storage.
 *
 * The storage plane (src/storage) keeps the files, the digests and the
 * crash-safe write discipline (storage/store.h) and reaches the database
 * only through these calls.  They follow state.h's conventions: each is
 * one read under the state lock or one transaction, committed (and
 * synced, unless deferred) before it returns 0; a listing copies its rows
 * out under the lock and runs the callback without it.  The transactions
 * are the write discipline's step 4: where one call here does several
 * things (check the bucket and the quota, point the key at a new file,
 * drop the upload it was assembled from), they commit together or not at
 * all.
 *
 * The rows are the storage plane's: its types, limits and error codes
 * (storage/store.h).  A refusal found inside a transaction -- no such
 * bucket, the tenant's storage quota -- is an S3 error, so it is reported
 * with its STORE_E* code and S3's wording.  Other failures are the state
 * plane's errno codes (state.h).
 *
 * A row names its file: an id under DATA/storage/objects or parts.  A call
 * that stops naming one hands the name back, for the storage plane to
 * unlink once the commit is durable (store_unlink). */
#ifndef HUSK_STATE_STORE_STATE_H
#define HUSK_STATE_STORE_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "state/state.h"
#include "storage/store.h"
#include "util/error.h"

/* ---- buckets (buckets.c) ---------------------------------------------- */

/* 0 if the tenant has the bucket, else STORE_ENOBUCKET. */
int state_bucket_check(struct state *st, const char *tenant_id, const char *name,
                       struct husk_err *err);
/* STORE_EOWNED if the tenant has it already. */
int state_bucket_create(struct state *st, const char *tenant_id, const char *name,
                        struct husk_err *err);
/* STORE_ENOTEMPTY while it holds objects or uploads. */
int state_bucket_delete(struct state *st, const char *tenant_id, const char *name,
                        struct husk_err *err);
/* The tenant's buckets, by name (not husk's own: names starting "_",
 * which no S3 name can be, store_bucket_internal). */
int state_bucket_list(struct state *st, const char *tenant_id,
                      int (*cb)(void *ctx, const char *name, int64_t created_ms), void *ctx,
                      struct husk_err *err);

/* ---- objects, usage and quota (objects.c) ----------------------------- */

/* A new version of an object: its key is to point at `file`. */
struct state_object_new {
  const char *key;
  const char *file;
  uint64_t size;
  const char *etag;
  const char *content_type; /* NULL: "" */
  const char *meta_json;    /* NULL: {} */
  int64_t mtime_ms;
  const char *created_by; /* its writer (state.h's creators); NULL or "": nobody */
};

_Static_assert(STORE_CREATED_BY_SIZE == STATE_CREATED_BY_SIZE, "one size for a creator");
_Static_assert(STORE_ACCESS_KEY_SIZE == STATE_S3_KEY_ID_SIZE, "one size for an S3 key id");

/* The object at bucket/key (STORE_ENOBUCKET, STORE_ENOKEY).  Free `out`
 * with store_object_free(). */
int state_object_get(struct state *st, const char *tenant_id, const char *bucket, const char *key,
                     struct store_object *out, struct husk_err *err);
/* One transaction: the bucket must exist, the tenant's usage plus `o`'s
 * size less the version replaced must fit `quota` (0: no quota;
 * STORE_EQUOTA), then the key points at o->file, written by o->created_by
 * (a malformed one: EINVAL, nothing written).  `old` (STORE_ID_SIZE)
 * receives the file replaced, "" if none. */
int state_object_put(struct state *st, const char *tenant_id, const char *bucket,
                     const struct state_object_new *o, uint64_t quota, char *old,
                     struct husk_err *err);
/* Delete the object's row; `file` (STORE_ID_SIZE) receives its file, ""
 * if there was no such key (not an error).  STORE_ENOBUCKET. */
int state_object_delete(struct state *st, const char *tenant_id, const char *bucket,
                        const char *key, char *file, struct husk_err *err);
/* Whether the object's row names `file` (false when unsure). */
bool state_object_names_file(struct state *st, const char *tenant_id, const char *bucket,
                             const char *key, const char *file);

/* One page of a bucket's objects for a listing: keys > `after` (`after_len`
 * bytes, which may hold 0xff: past every key with that start) and >=
 * `prefix`, in key order (bytes), at most STATE_OBJECT_PAGE; with
 * `created_by` (not NULL; a creator, else EINVAL) only those it wrote. */
#define STATE_OBJECT_PAGE 256
struct state_object_entry {
  char *key; /* heap */
  uint64_t size;
  char etag[STORE_ETAG_SIZE];
  int64_t mtime_ms;
  char created_by[STATE_CREATED_BY_SIZE];
};
struct state_object_page {
  struct state_object_entry *entries;
  size_t n;
};
int state_object_page(struct state *st, const char *tenant_id, const char *bucket,
                      const char *after, size_t after_len, const char *prefix,
                      const char *created_by, struct state_object_page *out, struct husk_err *err);
void state_object_page_free(struct state_object_page *p);
#define cleanup_object_page __attribute__((cleanup(state_object_page_free)))

/* Bytes the tenant stores: objects and the parts of its uploads. */
int state_store_usage(struct state *st, const char *tenant_id, uint64_t *bytes,
                      struct husk_err *err);
/* STORE_EQUOTA if `add` more bytes would pass `quota` (0: no quota), the
 * object at bucket/key (if both given) counted as freed. */
int state_store_quota_check(struct state *st, const char *tenant_id, const char *bucket,
                            const char *key, uint64_t quota, uint64_t add, struct husk_err *err);
/* The bytes left under `quota` (UINT64_MAX with none), the object at
 * bucket/key (if both given) counted as freed. */
int state_store_quota_room(struct state *st, const char *tenant_id, const char *bucket,
                           const char *key, uint64_t quota, uint64_t *room, struct husk_err *err);

/* Which rows name the files of a directory: objects/ or parts/. */
enum state_store_files { STATE_OBJECT_FILES, STATE_PART_FILES };
/* Whether a row names `file` (the start-up sweep removes the others). */
int state_store_file_used(struct state *st, enum state_store_files kind, const char *file,
                          bool *used, struct husk_err *err);

/* ---- multipart uploads and their parts (uploads.c) -------------------- */

/* STORE_ENOBUCKET, or STORE_ENOUPLOAD unless the upload is the tenant's
 * and for bucket/key. */
int state_upload_check(struct state *st, const char *tenant_id, const char *bucket, const char *key,
                       const char *upload_id, struct husk_err *err);
/* A new upload `upload_id` (the bucket must exist).  content_type NULL:
 * "", meta_json NULL: {}. */
int state_upload_create(struct state *st, const char *tenant_id, const char *bucket,
                        const char *key, const char *upload_id, const char *content_type,
                        const char *meta_json, struct husk_err *err);

/* A part as stored. */
struct state_part {
  int num;
  char file[STORE_ID_SIZE];
  char md5[STORE_ETAG_SIZE]; /* hex: the part's ETag */
  uint64_t size;
  int64_t mtime_ms;
};
/* One transaction: the upload is checked as by state_upload_check, the
 * quota as by state_object_put (the part replaced, if any, is freed), then
 * part p->num (stored with mtime now) names p->file.  `old`
 * (STORE_ID_SIZE) receives the file of the part replaced, "" if none. */
int state_part_put(struct state *st, const char *tenant_id, const char *bucket, const char *key,
                   const char *upload_id, const struct state_part *p, uint64_t quota, char *old,
                   struct husk_err *err);
/* Whether a part row of the upload names `file` (false when unsure). */
bool state_part_names_file(struct state *st, const char *upload_id, const char *file);

/* An upload as stored: what its object will be given, and its parts. */
struct state_upload {
  char content_type[STORE_CTYPE_MAX];
  char *meta_json;          /* heap */
  struct state_part *parts; /* heap, in number order */
  size_t nparts;
};
/* The upload (checked as by state_upload_check) and its parts numbered
 * above `after`, at most `max`.  Free `out` with state_upload_free(). */
int state_upload_get(struct state *st, const char *tenant_id, const char *bucket, const char *key,
                     const char *upload_id, int after, int max, struct state_upload *out,
                     struct husk_err *err);
void state_upload_free(struct state_upload *u);
#define cleanup_upload __attribute__((cleanup(state_upload_free)))

/* Complete an upload: one transaction checks that the upload is still
 * there (not aborted or completed by a racing call), writes the object as
 * state_object_put does -- with `freed` more bytes counted as freed: the
 * parts, which go with the upload -- and drops the upload and its parts'
 * rows. */
int state_upload_complete(struct state *st, const char *tenant_id, const char *bucket,
                          const char *upload_id, const struct state_object_new *o, uint64_t quota,
                          uint64_t freed, char *old, struct husk_err *err);
/* Drop the upload (checked as by state_upload_check) and its parts' rows. */
int state_upload_abort(struct state *st, const char *tenant_id, const char *bucket, const char *key,
                       const char *upload_id, struct husk_err *err);
/* The bucket's uploads whose key starts with `prefix`, by key then id,
 * those after (key_marker, id_marker), at most `max`; *truncated when
 * more follow.  STORE_ENOBUCKET. */
int state_upload_list(struct state *st, const char *tenant_id, const char *bucket,
                      const char *prefix, const char *key_marker, const char *id_marker, int max,
                      int (*cb)(void *ctx, const struct store_upload *u), void *ctx,
                      bool *truncated, struct husk_err *err);

/* An upload begun before a time (abandoned, for the start-up sweep). */
struct state_stale_upload {
  char id[STORE_ID_SIZE];
  char tenant_id[STATE_TENANT_ID_SIZE];
  char bucket[STORE_BUCKET_MAX + 1];
  char *key;
};
/* Uploads created before `before_ms`, at most `max`. */
int state_upload_stale(struct state *st, int64_t before_ms, int max,
                       int (*cb)(void *ctx, const struct state_stale_upload *u), void *ctx,
                       struct husk_err *err);

/* ---- links and their access log (links.c) ----------------------------- */

/* A new link of the tenant (id, bucket, key, filename, url, created_ms,
 * expires_ms, created_by from `l`; a malformed created_by: EINVAL). */
int state_link_insert(struct state *st, const char *tenant_id, const struct store_link *l,
                      struct husk_err *err);
/* The tenant's link `id` (STORE_ENOLINK).  Free `out` with
 * store_link_free(). */
int state_link_get(struct state *st, const char *tenant_id, const char *id, struct store_link *out,
                   struct husk_err *err);
/* Revoke now; revoking a revoked link succeeds.  STORE_ENOLINK. */
int state_link_revoke(struct state *st, const char *tenant_id, const char *id,
                      struct husk_err *err);
/* The tenant's links, newest first, at most 1000. */
int state_link_list(struct state *st, const char *tenant_id,
                    int (*cb)(void *ctx, const struct store_link *l), void *ctx,
                    struct husk_err *err);
/* One fetch of link `id` (nothing if no such link), keeping only the
 * newest STORE_LINK_LOG_MAX of the link.  `remote` and `user_agent` are
 * stored as given. */
int state_link_record(struct state *st, const char *id, const char *remote, const char *user_agent,
                      int status, struct husk_err *err);
/* One refused fetch: counted on link `id`, or (id NULL or no such link)
 * on the global counter. */
int state_link_denied(struct state *st, const char *id, struct husk_err *err);
int state_link_denied_total(struct state *st, int64_t *count, struct husk_err *err);
/* The fetches of the tenant's link `id` (STORE_ENOLINK) with seq >
 * after_seq, oldest first, at most `limit`. */
int state_link_log(struct state *st, const char *tenant_id, const char *id, int64_t after_seq,
                   int limit, int (*cb)(void *ctx, const struct store_link_access *a), void *ctx,
                   struct husk_err *err);

/* ---- S3 access keys (s3_keys.c) --------------------------------------- */

/* Room for a sealed secret as stored (storage/access_keys.c seals). */
#define STATE_S3_SEALED_MAX 128

/* A new key `key_id` of the tenant, its secret sealed by the caller.
 * `api_key_id`: the API key that minted it (an id), or "". */
int state_s3_key_insert(struct state *st, const char *key_id, const char *tenant_id,
                        const void *sealed, size_t sealed_len, bool internal,
                        const char *api_key_id, struct husk_err *err);
/* A live key: its tenant (STATE_TENANT_ID_SIZE), sealed secret (copied to
 * `sealed`, STATE_S3_SEALED_MAX) and whether it is internal (`internal`
 * may be NULL).  STORE_ENOACCESSKEY for an unknown or revoked key. */
int state_s3_key_get(struct state *st, const char *key_id, char *tenant_id, unsigned char *sealed,
                     size_t *sealed_len, bool *internal, struct husk_err *err);
/* The id of the tenant's oldest live internal key (STORE_ACCESS_KEY_SIZE),
 * "" if it has none. */
int state_s3_key_internal(struct state *st, const char *tenant_id, char *key_id,
                          struct husk_err *err);
/* The tenant's keys that are not internal, oldest first, at most 1000. */
int state_s3_key_list(struct state *st, const char *tenant_id,
                      int (*cb)(void *ctx, const struct store_key_info *k), void *ctx,
                      struct husk_err *err);
/* Revoke one of the tenant's keys that are not internal (keeping the
 * first revocation time).  STORE_ENOACCESSKEY if it has no such key. */
int state_s3_key_revoke(struct state *st, const char *tenant_id, const char *key_id,
                        struct husk_err *err);

/* ---- a deleted tenant's storage rows (store_purge.c) ------------------ */

/* Rows deleted per transaction of a purge. */
#define STATE_STORE_PURGE_BATCH 256
/* One transaction deletes up to STATE_STORE_PURGE_BATCH of the tenant's
 * objects (or parts); files[0..*n) receive their files (`files` has room
 * for the batch).  *n == 0: none left. */
int state_store_purge_files(struct state *st, const char *tenant_id, enum state_store_files kind,
                            char (*files)[STORE_ID_SIZE], size_t *n, struct husk_err *err);
/* Once no object or part is left: one transaction deletes the tenant's
 * uploads, links (and their access log), buckets and S3 keys. */
int state_store_purge_rows(struct state *st, const char *tenant_id, struct husk_err *err);

#endif
