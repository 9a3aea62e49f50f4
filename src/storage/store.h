/* The storage plane: husk's embedded object store.
 *
 * Buckets belong to a tenant (names are unique per tenant, not globally);
 * objects are immutable files under DATA/storage/objects, named by a random
 * id, with their metadata in the state database (SQLite, WAL, each commit
 * synced before it is acknowledged: state/durable.c).  The write discipline that makes a SIGKILL at any
 * moment harmless:
 *
 *   1. the body streams into DATA/storage/tmp/<random> while MD5 (the ETag)
 *      and whatever digests the client asked to be checked are computed;
 *   2. digests are compared, the file is fsynced;
 *   3. it is renamed to objects/<new id> and the directory fsynced;
 *   4. one transaction points (tenant, bucket, key) at the new file;
 *   5. only after the commit is the file it replaced unlinked.
 *
 * A crash before 4 leaves an unreferenced file (tmp/ or objects/) that the
 * next start removes; after 4 the object is complete.  So an object is
 * either fully there with its right ETag or absent, and a reply that says
 * "stored" is sent only after 4.  Multipart parts follow the same steps
 * into parts/, and Complete assembles them into a new object the same way.
 *
 * Nothing here formats HTTP or XML: the S3 front (src/s3), the API
 * (src/api/routes_storage.c) and the MCP tools call these functions.
 *
 * Errors: -1 with err filled; err->code is an errno (ENOMEM, EIO, ENOSPC,
 * EINVAL for bad arguments ...) or one of the STORE_E* codes below, each of
 * which is one S3 error. */
#ifndef HUSK_STORAGE_STORE_H
#define HUSK_STORAGE_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/error.h"

struct state;
struct store;

enum {
  STORE_ENOBUCKET = 4096, /* NoSuchBucket */
  STORE_ENOKEY,           /* NoSuchKey */
  STORE_ENOUPLOAD,        /* NoSuchUpload */
  STORE_EOWNED,           /* BucketAlreadyOwnedByYou */
  STORE_ENOTEMPTY,        /* BucketNotEmpty */
  STORE_EBADNAME,         /* InvalidBucketName */
  STORE_EBADKEY,          /* KeyTooLongError / InvalidArgument */
  STORE_EBADDIGEST,       /* BadDigest: Content-MD5 or x-amz-checksum-* mismatch */
  STORE_ESHA256,          /* XAmzContentSHA256Mismatch */
  STORE_EINCOMPLETE,      /* IncompleteBody: fewer bytes than announced */
  STORE_ETOOLARGE,        /* EntityTooLarge */
  STORE_ETOOSMALL,        /* EntityTooSmall (a multipart part under 5 MiB) */
  STORE_EBADPART,         /* InvalidPart */
  STORE_EPARTORDER,       /* InvalidPartOrder */
  STORE_ENOLINK,          /* no such link */
  STORE_ENOACCESSKEY,     /* InvalidAccessKeyId */
  STORE_EBADCHECKSUM,     /* InvalidRequest: unsupported checksum algorithm */
  STORE_EQUOTA,           /* QuotaExceeded (403): the tenant's storage quota */
  STORE_ESPARSE,          /* a box file (or tree) larger than the box's disk holds */
};

/* Limits (S3's, so real clients fit). */
#define STORE_BUCKET_MIN 3
#define STORE_BUCKET_MAX 63
#define STORE_KEY_MAX 1024                               /* bytes of UTF-8 */
#define STORE_PUT_MAX (5ULL << 30)                       /* one PUT or one part */
#define STORE_PART_MIN (5ULL << 20)                      /* every part but the last */
#define STORE_PARTS_MAX 10000
#define STORE_META_MAX 2048                              /* user metadata, bytes */
#define STORE_UPLOAD_TTL_MS (7LL * 24 * 3600 * 1000)     /* abandoned uploads */
#define STORE_ETAG_SIZE 48                               /* "md5hex-10000" + NUL */
#define STORE_CTYPE_MAX 256
#define STORE_ID_SIZE 40
#define STORE_ACCESS_KEY_SIZE 24
#define STORE_SECRET_SIZE 48
#define STORE_LINK_DEFAULT_S 3600
#define STORE_LINK_MAX_S 604800
#define STORE_LINK_LOG_MAX 10000 /* access records kept per link (the newest) */
/* Who wrote an object or made a link (state.h's STATE_CREATED_BY_SIZE):
 * "u_" + 24 hex (a user's access token), "key:" + an API key id,
 * "s3key:" + an S3 access key id (a request signed with that S3 key), or
 * "" (nobody recorded).  Functions that take one refuse anything else
 * (EINVAL); NULL is "". */
#define STORE_CREATED_BY_SIZE 36

struct store_config {
  const char *data_dir;   /* DATA: files go to DATA/storage */
  struct state *state;
  const char *region;     /* "us-east-1" if NULL */
  uint64_t quota_bytes;   /* per tenant: objects + uploaded parts; 0: no limit */
  const char *public_url; /* base of links, e.g. "http://127.0.0.1:7071"; NULL: none yet
                           * (links on the embedded store are refused, EOPNOTSUPP) */
  /* Free space kept on DATA's filesystem, which no object write may use
   * (the database lives there too): "SIZE" (bytes, k/M/G suffixes) or
   * "N%" of the filesystem; NULL: the default (util/disk_reserve.h).
   * Template imports keep the same reserve. */
  const char *data_reserve;
  void (*log)(void *ctx, const char *line);
  void *log_ctx;
};

/* A box file may have this much more apparent size than allocated bytes
 * (the filesystem's rounding) before it counts as sparse and is refused:
 * its holes would be written out in full. */
#define STORE_SPARSE_SLACK (64ULL * 1024)

/* Open (creating DATA/storage and its master key if missing) and clean up
 * what a crash left: temporary files, files no row names, and uploads
 * abandoned for longer than STORE_UPLOAD_TTL_MS. */
int store_open(struct store **out, const struct store_config *cfg, struct husk_err *err);
void store_close(struct store *s);
const char *store_region(const struct store *s);
const char *store_public_url(const struct store *s);
/* Set once at start, before any link is made (the S3 port is known only
 * after binding). */
int store_set_public_url(struct store *s, const char *url);

/* Bytes the tenant stores (objects and parts of uploads in progress). */
int store_usage(struct store *s, const char *tenant_id, uint64_t *bytes, struct husk_err *err);
/* STORE_EQUOTA if `add` more bytes would pass the tenant's quota: an early
 * refusal for a body whose length is announced (the commit checks again).
 * The object now at bucket/key (if both given) counts as freed. */
int store_quota_check(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                      uint64_t add, struct husk_err *err);
/* The bytes the tenant may still store (UINT64_MAX without a quota),
 * counting the object now at bucket/key (if both given) as freed. */
int store_quota_room(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                     uint64_t *room, struct husk_err *err);
/* ENOSPC (a clear message) if writing `add` more bytes would eat into the
 * data disk's reserve.  Every object write checks it before it starts and
 * as it goes (store_writer_*), as do links. */
int store_space_check(struct store *s, uint64_t add, struct husk_err *err);
/* For a box file about to be copied into the store: STORE_ESPARSE if its
 * apparent size passes its allocated blocks (plus STORE_SPARSE_SLACK);
 * else *bound is what the copy may read (allocated + slack), so a file
 * the box extends meanwhile cannot push more. */
int store_fd_bound(int fd, uint64_t *size, uint64_t *bound, struct husk_err *err);

/* ---- the external store ---- */

struct remote;
/* From now on links and box <-> store transfers use the external store
 * `r` (storage/remote.h; the store takes ownership).  The embedded S3
 * listener keeps serving the embedded store. */
void store_set_remote(struct store *s, struct remote *r);
struct remote *store_remote(const struct store *s);
/* An unnamed temporary file under DATA/storage/tmp (O_TMPFILE), for
 * staging uploads to the external store. */
int store_tmpfile(struct store *s, struct husk_err *err);

/* ---- S3 access keys ---- */

/* A new key pair for `tenant_id`; the secret is returned once (and kept
 * sealed).  `internal` keys sign links and are never shown. */
int store_key_create(struct store *s, const char *tenant_id, bool internal,
                     char key_id[STORE_ACCESS_KEY_SIZE], char secret[STORE_SECRET_SIZE],
                     struct husk_err *err);
/* The same, recording the API key (`api_key_id`, an id; "" if none) that
 * made it: revoking that API key revokes this key too (state_key_revoke).
 * `api_key_id` NULL makes an internal key. */
int store_key_mint(struct store *s, const char *tenant_id, const char *api_key_id,
                   char key_id[STORE_ACCESS_KEY_SIZE], char secret[STORE_SECRET_SIZE],
                   struct husk_err *err);
struct store_key_info {
  char id[STORE_ACCESS_KEY_SIZE];
  int64_t created_ms, revoked_ms;
  char api_key_id[32]; /* the API key that minted it, "" if unknown */
};
/* The tenant's own (not internal) S3 keys, oldest first. */
int store_key_list(struct store *s, const char *tenant_id,
                   int (*cb)(void *ctx, const struct store_key_info *k), void *ctx,
                   struct husk_err *err);
/* Revoke one of the tenant's keys (STORE_ENOACCESSKEY if not its own). */
int store_key_revoke(struct store *s, const char *tenant_id, const char *key_id,
                     struct husk_err *err);
/* The tenant and the secret of a live key (STORE_ENOACCESSKEY otherwise).
 * Wipe `secret` after use. */
int store_key_lookup(struct store *s, const char *key_id, char tenant_id[32],
                     char secret[STORE_SECRET_SIZE], bool *internal, struct husk_err *err);

/* Remove everything the storage plane holds for a tenant being deleted
 * (state_tenant_mark_deleted): objects and their files, uploads and their
 * parts, buckets, links and their access log, S3 keys.  In batches, each
 * one transaction whose files are unlinked after its commit (a crash
 * leaves unreferenced files, which store_open removes), so it can be run
 * again after a crash and finishes where the last run stopped. */
int store_tenant_purge(struct store *s, const char *tenant_id, struct husk_err *err);

/* Object keys: 1..STORE_KEY_MAX bytes of valid UTF-8 (STORE_EBADKEY). */
int store_key_check(const char *key, struct husk_err *err);

/* ---- buckets ---- */

/* S3's rules: 3..63 of [a-z0-9.-], starting and ending alphanumeric, not
 * an IP address, no "..". */
bool store_bucket_name_ok(const char *name);
/* STORE_EOWNED if the tenant has it already. */
int store_bucket_create(struct store *s, const char *tenant_id, const char *name,
                        struct husk_err *err);
int store_bucket_exists(struct store *s, const char *tenant_id, const char *name,
                        struct husk_err *err);
/* A name of husk's own buckets: no request of a tenant may name one. */
static inline bool store_bucket_reserved(const char *name) { return name && name[0] == '_'; }
/* One of husk's own buckets of the tenant (`name` starts with "_", which
 * no S3 bucket name may: no S3 request reaches it, no listing shows it),
 * created if missing.  Its objects count in the tenant's usage and go
 * with the tenant (store_tenant_purge). */
int store_bucket_internal(struct store *s, const char *tenant_id, const char *name,
                          struct husk_err *err);
/* STORE_ENOTEMPTY while it holds objects or uploads. */
int store_bucket_delete(struct store *s, const char *tenant_id, const char *name,
                        struct husk_err *err);
int store_bucket_list(struct store *s, const char *tenant_id,
                      int (*cb)(void *ctx, const char *name, int64_t created_ms), void *ctx,
                      struct husk_err *err);

/* ---- objects ---- */

struct store_object {
  char *key;          /* heap */
  uint64_t size;
  char etag[STORE_ETAG_SIZE]; /* without quotes */
  char content_type[STORE_CTYPE_MAX];
  char *meta_json;    /* heap: {"name":"value"} of x-amz-meta-* (lower-case names) */
  int64_t mtime_ms;
  char file[STORE_ID_SIZE];
  char created_by[STORE_CREATED_BY_SIZE]; /* who wrote this version, may be "" */
};
void store_object_free(struct store_object *o);

/* Digests a writer checks at the end (each optional). */
enum store_checksum { CK_NONE, CK_CRC32, CK_CRC32C, CK_SHA1, CK_SHA256, CK_CRC64NVME };
struct store_expect {
  bool has_md5;
  unsigned char md5[16];      /* Content-MD5, decoded */
  const char *sha256_hex;     /* x-amz-content-sha256 when it is a hash */
  enum store_checksum ck;     /* x-amz-checksum-<ck> */
  const char *ck_b64;         /* its value; NULL: only compute it (trailer to come) */
  int64_t length;             /* exact size, -1: any */
};
/* Parse "crc32" / "CRC32C" ... (x-amz-checksum-algorithm); CK_NONE on no match. */
enum store_checksum store_checksum_parse(const char *name);
const char *store_checksum_name(enum store_checksum ck); /* "crc32" ... */
/* CRC-64/NVME of a buffer (x-amz-checksum-crc64nvme is its 8 bytes, big
 * endian, in base64). */
uint64_t store_crc64nvme(const void *buf, size_t n);

/* A body being received: a temporary file and running digests. */
struct store_writer;
/* `ck` is computed along (for a checksum header or trailer); `sha256`
 * when the client's payload hash must be checked. */
int store_writer_open(struct store *s, enum store_checksum ck, bool sha256, uint64_t limit,
                      struct store_writer **out, struct husk_err *err);
int store_writer_write(struct store_writer *w, const void *buf, size_t n, struct husk_err *err);
/* Check the digests (a trailing checksum may be set in `e` now), fsync.
 * `etag` receives the MD5 hex; `ck_b64` (may be NULL, 64 bytes) the
 * computed checksum. */
int store_writer_finish(struct store_writer *w, const struct store_expect *e,
                        char etag[STORE_ETAG_SIZE], char *ck_b64, struct husk_err *err);
uint64_t store_writer_size(const struct store_writer *w);
/* Publish a finished writer as an object (steps 3-5 above) and free it.
 * On failure nothing is stored and the writer is freed too.  `created_by`
 * (STORE_CREATED_BY_SIZE's forms; NULL: "") is recorded as its writer, in
 * the same transaction as the row; a version it replaces takes it too. */
int store_put_commit(struct store_writer *w, const char *tenant_id, const char *bucket,
                     const char *key, const char *content_type, const char *meta_json,
                     const char *created_by, struct store_object *out, struct husk_err *err);
/* Free an unpublished writer, removing its temporary file. */
void store_writer_abort(struct store_writer *w);

/* Store a buffer in one call (for the MCP tools and tests); `created_by`
 * as for store_put_commit. */
int store_put_buffer(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                     const void *buf, size_t n, const char *content_type, const char *created_by,
                     struct store_object *out, struct husk_err *err);
/* Store everything readable from `fd` (a box file opened by the caller):
 * refused if sparse (store_fd_bound), and checked against the quota and
 * the data disk's reserve before a byte is written. */
int store_put_fd(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                 int fd, const char *content_type, const char *created_by, struct store_object *out,
                 struct husk_err *err);

/* Metadata, and (if fd != NULL) an open read-only fd of the data: the
 * file stays readable even if the object is replaced meanwhile. */
int store_object_get(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                     struct store_object *out, int *fd, struct husk_err *err);
/* Deleting a missing key succeeds (S3 semantics); a missing bucket does
 * not. */
int store_object_delete(struct store *s, const char *tenant_id, const char *bucket,
                        const char *key, struct husk_err *err);
/* Copy within the tenant.  meta_json/content_type NULL: keep the source's.
 * The copy's writer is `created_by` (the one who copied), not the
 * source's. */
int store_object_copy(struct store *s, const char *tenant_id, const char *src_bucket,
                      const char *src_key, const char *dst_bucket, const char *dst_key,
                      const char *content_type, const char *meta_json, const char *created_by,
                      struct store_object *out, struct husk_err *err);

/* Listing in key order (UTF-8 bytes), S3 style. */
struct store_list_req {
  const char *prefix;    /* "" for all */
  const char *delimiter; /* NULL or "" for none */
  const char *after;     /* start strictly after this key (marker / start-after / token) */
  unsigned max_keys;     /* 0..1000 */
  const char *created_by; /* NULL: any writer; else only objects it wrote (never "") */
};
struct store_entry {
  const char *key;       /* the key, or a common prefix */
  bool is_prefix;
  uint64_t size;
  const char *etag;
  int64_t mtime_ms;
  const char *created_by; /* who wrote it, "" if unknown (a prefix: "") */
};
/* `next` (malloc'd, may be NULL on return) is where the next page starts:
 * set when *truncated. */
int store_list(struct store *s, const char *tenant_id, const char *bucket,
               const struct store_list_req *rq, int (*cb)(void *ctx, const struct store_entry *e),
               void *ctx, bool *truncated, char **next, struct husk_err *err);

/* ---- multipart uploads ---- */

struct store_upload {
  const char *key;
  const char *id;
  int64_t created_ms;
};
/* The bucket's uploads in progress, by key then id, those after
 * (key_marker, id_marker); at most max (1..1000). */
int store_upload_list(struct store *s, const char *tenant_id, const char *bucket,
                      const char *prefix, const char *key_marker, const char *id_marker, int max,
                      int (*cb)(void *ctx, const struct store_upload *u), void *ctx,
                      bool *truncated, struct husk_err *err);

int store_upload_create(struct store *s, const char *tenant_id, const char *bucket,
                        const char *key, const char *content_type, const char *meta_json,
                        char upload_id[STORE_ID_SIZE], struct husk_err *err);
/* Whether the upload exists and is the tenant's, for bucket/key. */
int store_upload_check(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                       const char *upload_id, struct husk_err *err);
/* Publish a finished writer as part `num` (1..10000) of the upload, which
 * must be the tenant's and for bucket/key.  Replaces an earlier part with
 * that number.  Frees the writer. */
int store_part_commit(struct store_writer *w, const char *tenant_id, const char *bucket,
                      const char *key, const char *upload_id, int num, struct husk_err *err);
struct store_part {
  int num;
  char etag[STORE_ETAG_SIZE]; /* md5 hex */
  uint64_t size;
  int64_t mtime_ms;
};
/* Parts in number order, those > after (max 1000 per call). */
int store_upload_parts(struct store *s, const char *tenant_id, const char *bucket,
                       const char *key, const char *upload_id, int after, int max,
                       int (*cb)(void *ctx, const struct store_part *p), void *ctx,
                       bool *truncated, struct husk_err *err);
/* Assemble: `parts` as the client lists them (number + etag, quotes
 * allowed).  Checks order (STORE_EPARTORDER), existence and ETag
 * (STORE_EBADPART), sizes (STORE_ETOOSMALL).  The ETag is
 * md5(concat(binary part md5s))-N.  The object's writer is `created_by`:
 * the one who completes it (who began the upload is not recorded). */
int store_upload_complete(struct store *s, const char *tenant_id, const char *bucket,
                          const char *key, const char *upload_id, const struct store_part *parts,
                          size_t nparts, const char *created_by, struct store_object *out,
                          struct husk_err *err);
int store_upload_abort(struct store *s, const char *tenant_id, const char *bucket,
                       const char *key, const char *upload_id, struct husk_err *err);

/* ---- links: presigned GET URLs with an access log ---- */

struct store_link {
  char id[STORE_ID_SIZE];
  char bucket[STORE_BUCKET_MAX + 1];
  char *key;      /* heap */
  char *url;      /* heap */
  char filename[256];
  int64_t created_ms, expires_ms;
  int64_t revoked_ms; /* 0: live */
  int64_t denied;     /* fetches refused (bad signature, expired, revoked) */
  int64_t denied_last_ms;
  char created_by[STORE_CREATED_BY_SIZE]; /* who made it, may be "" */
};
void store_link_free(struct store_link *l);

/* A presigned GET for an existing object on the configured public URL
 * (or on the external store when one is configured), valid `expires_s`
 * (0: STORE_LINK_DEFAULT_S; at most STORE_LINK_MAX_S).  `filename` (may
 * be NULL) names it for browsers: saved under that name, or with
 * `inline_disp` shown in the browser, the name kept for a save.
 * `created_by` (NULL: "") is recorded as who made it. */
int store_link_create(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                      int64_t expires_s, const char *filename, bool inline_disp,
                      const char *created_by, struct store_link *out, struct husk_err *err);
int store_link_get(struct store *s, const char *tenant_id, const char *id, struct store_link *out,
                   struct husk_err *err);
/* The tenant's links, newest first (at most 1000). */
int store_link_list(struct store *s, const char *tenant_id,
                     int (*cb)(void *ctx, const struct store_link *l), void *ctx,
                     struct husk_err *err);
/* Revoke a link now: its URL is refused from then on (embedded store). */
int store_link_revoke(struct store *s, const char *tenant_id, const char *id, struct husk_err *err);
/* Whether `id` names a link of the tenant (only then is a fetch recorded),
 * and whether it is still usable (not revoked). */
bool store_link_owned(struct store *s, const char *id, const char *tenant_id, bool *live);
/* Record one valid fetch of a link: time now, remote address, user agent
 * (both sanitised and cut), the reply's status.  Only the newest
 * STORE_LINK_LOG_MAX records of a link are kept. */
int store_link_record(struct store *s, const char *id, const char *remote, const char *user_agent,
                      int status, struct husk_err *err);
/* Count one refused fetch: on link `id` if it names a link, else (or id
 * NULL) on the global counter.  Nothing about the request is stored. */
int store_link_denied(struct store *s, const char *id, struct husk_err *err);
/* The global counter of refused fetches no link could be named for. */
int store_link_denied_total(struct store *s, int64_t *count, struct husk_err *err);
struct store_link_access {
  int64_t seq, ts_ms;
  char remote[64];
  char user_agent[256];
  int status;
};
/* Fetches of the link, oldest first, those with seq > after_seq, at most
 * `limit` (1..1000; 0: 100). */
int store_link_log(struct store *s, const char *tenant_id, const char *id, int64_t after_seq,
                   int limit, int (*cb)(void *ctx, const struct store_link_access *a), void *ctx,
                   struct husk_err *err);

#endif
