/* The object store: opening, crash cleanup, buckets, the write path and
 * reads (see store.h for the write discipline). */
#define _GNU_SOURCE
#include "storage/store.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <zlib.h>

#include "storage/remote.h"
#include "storage/store_internal.h"
#include "util/cleanup.h"
#include "util/fileio.h"
#include "util/id.h"
#include "util/parse.h"
#include "util/utf8.h"

/* ---- small helpers ---- */

/* Without a configured log, lines go to stderr. */
static void log_stderr(void *ctx, const char *line) {
  (void)ctx;
  fprintf(stderr, "husk: storage: %s\n", line);
}

void store_log(struct store *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  husk_vlog(s->log ? s->log : log_stderr, s->log_ctx, fmt, ap);
  va_end(ap);
}

void store_b64(const unsigned char *in, size_t n, char *out) {
  EVP_EncodeBlock((unsigned char *)out, in, (int)n);
}

int store_key_check(const char *key, struct husk_err *err) {
  size_t n = strlen(key);
  if (n == 0)
    return husk_fail(err, STORE_EBADKEY, "the object key is empty");
  if (n > STORE_KEY_MAX)
    return husk_fail(err, STORE_EBADKEY, "the object key is longer than %d bytes", STORE_KEY_MAX);
  if (!utf8_valid(key, n))
    return husk_fail(err, STORE_EBADKEY, "the object key is not valid UTF-8");
  return 0;
}

bool store_bucket_name_ok(const char *n) {
  size_t l = strlen(n);
  if (l < STORE_BUCKET_MIN || l > STORE_BUCKET_MAX)
    return false;
  bool digits_dots = true;
  for (size_t i = 0; i < l; i++) {
    char c = n[i];
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-'))
      return false;
    if (c != '.' && !(c >= '0' && c <= '9'))
      digits_dots = false;
  }
  char f = n[0], e = n[l - 1];
  if (!((f >= 'a' && f <= 'z') || (f >= '0' && f <= '9')) ||
      !((e >= 'a' && e <= 'z') || (e >= '0' && e <= '9')))
    return false;
  if (strstr(n, "..") || strstr(n, ".-") || strstr(n, "-."))
    return false;
  return !digits_dots; /* "192.168.5.4" is not a bucket name */
}

void store_unlink(struct store *s, int dirfd, const char *name) {
  /* The commit that stopped naming the file must be on disk first (an
   * API request defers its syncs): a power loss could bring the row back
   * without its file.  If it cannot be, the file stays, for the next
   * start's sweep. */
  struct husk_err err;
  if (state_durable_now(s->st, &err) < 0) {
    store_log(s, "kept `%s`: %s", name, err.msg);
    return;
  }
  if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
    store_log(s, "cannot remove unused file `%s`: %s", name, strerror(errno));
}

void store_object_free(struct store_object *o) {
  if (!o)
    return;
  free(o->key);
  free(o->meta_json);
  o->key = o->meta_json = NULL;
}

int store_object_from_row(sqlite3_stmt *q, struct store_object *o, struct husk_err *err) {
  memset(o, 0, sizeof *o);
  o->key = db_col_strdup(q, 0);
  bool ok = db_col_text(q, 1, o->file, sizeof o->file);
  o->size = (uint64_t)sqlite3_column_int64(q, 2);
  ok &= db_col_text(q, 3, o->etag, sizeof o->etag);
  ok &= db_col_text(q, 4, o->content_type, sizeof o->content_type);
  o->meta_json = db_col_strdup(q, 5);
  o->mtime_ms = sqlite3_column_int64(q, 6);
  if (!o->key || !o->meta_json) {
    store_object_free(o);
    return husk_error(err, ENOMEM, "object row");
  }
  if (!ok) {
    store_object_free(o);
    return husk_fail(err, EUCLEAN, "object row has an oversized value");
  }
  return 0;
}

/* ---- the master key ---- */

/* DATA/storage/master.key: 32 random bytes, 0600, created once (link()
 * publishes it whole, as the admin key). */
static int master_key(struct store *s, struct husk_err *err) {
  for (int attempt = 0; attempt < 2; attempt++) {
    cleanup_close int fd = openat(s->dirfd, "master.key", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0) {
      struct stat st;
      if (fstat(fd, &st) < 0)
        return husk_error(err, errno, "storage master key");
      if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077))
        return husk_fail(err, EPERM,
                         "`%s/master.key` must be a regular file of ours with mode 0600", s->dir);
      ssize_t n = read(fd, s->master, sizeof s->master);
      if (n != (ssize_t)sizeof s->master)
        return husk_fail(err, EUCLEAN, "`%s/master.key` is not 32 bytes", s->dir);
      return 0;
    }
    if (errno != ENOENT)
      return husk_error(err, errno, "cannot open `%s/master.key`", s->dir);
    unsigned char k[32];
    if (id_random_bytes(k, sizeof k, err) < 0)
      return -1;
    char tmp[64];
    snprintf(tmp, sizeof tmp, ".master.key.%d", (int)getpid());
    unlinkat(s->dirfd, tmp, 0);
    cleanup_close int w =
        openat(s->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (w < 0)
      return husk_error(err, errno, "cannot create the storage master key");
    if (write_all(w, k, sizeof k) < 0 || fsync(w) < 0) {
      int e = errno;
      unlinkat(s->dirfd, tmp, 0);
      return husk_error(err, e, "cannot write the storage master key");
    }
    OPENSSL_cleanse(k, sizeof k);
    int rc = linkat(s->dirfd, tmp, s->dirfd, "master.key", 0);
    int e = errno;
    unlinkat(s->dirfd, tmp, 0);
    if (rc < 0 && e != EEXIST)
      return husk_error(err, e, "cannot create the storage master key");
    fsync(s->dirfd);
  }
  return husk_fail(err, EIO, "cannot read the storage master key");
}

/* ---- open and crash cleanup ---- */

static int open_subdir(struct store *s, const char *name, int *fd, struct husk_err *err) {
  if (mkdirat(s->dirfd, name, 0700) < 0 && errno != EEXIST)
    return husk_error(err, errno, "cannot create `%s/%s`", s->dir, name);
  *fd = openat(s->dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (*fd < 0)
    return husk_error(err, errno, "cannot open `%s/%s`", s->dir, name);
  return 0;
}

/* Is `name` the file of some row of `table`? */
static int file_referenced(struct store *s, const char *table, const char *name, bool *yes,
                           struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(s->st);
  cleanup_stmt sqlite3_stmt *q = NULL;
  char sql[96];
  snprintf(sql, sizeof sql, "SELECT 1 FROM %s WHERE file = ?", table);
  if (db_prepare(s->st, &q, sql, err) < 0)
    return -1;
  int rc = db_text(q, 1, name);
  if (rc != SQLITE_OK)
    return db_fail(s->st, err, rc, "cleanup");
  int r = db_step_row(s->st, q, "cleanup", err);
  if (r < 0)
    return -1;
  *yes = r == 1;
  return 0;
}

/* Remove every file of `dirfd` that no row of `table` names (table NULL:
 * every file). */
static int sweep(struct store *s, int dirfd, const char *table, unsigned *removed,
                 struct husk_err *err) {
  int dfd = dup(dirfd);
  if (dfd < 0)
    return husk_error(err, errno, "cleanup");
  cleanup_closedir DIR *d = fdopendir(dfd);
  if (!d) {
    close(dfd);
    return husk_error(err, errno, "cleanup");
  }
  rewinddir(d);
  struct dirent *de;
  while ((de = readdir(d))) {
    if (de->d_name[0] == '.' && (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2])))
      continue;
    bool used = false;
    if (table && file_referenced(s, table, de->d_name, &used, err) < 0)
      return -1;
    if (!used) {
      store_unlink(s, dirfd, de->d_name);
      (*removed)++;
    }
  }
  return 0;
}

/* One batch of at most 64; *more when the batch was full. */
static int abort_stale_batch(struct store *s, bool *more, struct husk_err *err) {
  char ids[64][STORE_ID_SIZE];
  struct {
    char tenant[32], bucket[STORE_BUCKET_MAX + 1];
    char *key;
  } info[64];
  int n = 0;
  {
    cleanup_unlock struct state *locked = db_lock(s->st);
    cleanup_stmt sqlite3_stmt *q = NULL;
    if (db_prepare(s->st, &q,
                   "SELECT id, tenant_id, bucket, key FROM uploads WHERE created_ms < ? LIMIT 64",
                   err) < 0)
      return -1;
    int rc = db_int(q, 1, state_now_ms() - STORE_UPLOAD_TTL_MS);
    if (rc != SQLITE_OK)
      return db_fail(s->st, err, rc, "stale uploads");
    int r;
    while (n < 64 && (r = db_step_row(s->st, q, "stale uploads", err)) == 1) {
      db_col_text(q, 0, ids[n], sizeof ids[n]);
      db_col_text(q, 1, info[n].tenant, sizeof info[n].tenant);
      db_col_text(q, 2, info[n].bucket, sizeof info[n].bucket);
      info[n].key = db_col_strdup(q, 3);
      n++;
    }
  }
  bool failed = false;
  for (int i = 0; i < n; i++) {
    struct husk_err e2;
    if (info[i].key &&
        store_upload_abort(s, info[i].tenant, info[i].bucket, info[i].key, ids[i], &e2) < 0) {
      store_log(s, "cannot abort abandoned upload %s: %s", ids[i], e2.msg);
      failed = true;
    }
    free(info[i].key);
  }
  /* A batch that could not be aborted would come back forever: stop. */
  *more = n == 64 && !failed;
  return 0;
}

static int abort_stale_uploads(struct store *s, struct husk_err *err) {
  for (bool more = true; more;)
    if (abort_stale_batch(s, &more, err) < 0)
      return -1;
  return 0;
}

int store_open(struct store **out, const struct store_config *cfg, struct husk_err *err) {
  struct store *s = calloc(1, sizeof *s);
  if (!s)
    return husk_error(err, ENOMEM, "store");
  s->dirfd = s->objfd = s->tmpfd = s->partfd = -1;
  s->st = cfg->state;
  s->log = cfg->log;
  s->log_ctx = cfg->log_ctx;
  snprintf(s->region, sizeof s->region, "%s", cfg->region ? cfg->region : "us-east-1");
  s->quota = cfg->quota_bytes;
  if (!cfg->data_reserve) {
    s->reserve_default = true;
  } else {
    size_t rl = strlen(cfg->data_reserve);
    if (rl > 1 && cfg->data_reserve[rl - 1] == '%') {
      char pct[8] = "";
      uint64_t v = 0;
      struct husk_err pe;
      if (rl - 1 < sizeof pct)
        memcpy(pct, cfg->data_reserve, rl - 1);
      if (!pct[0] || parse_u64_range(pct, 0, 90, &v, &pe) < 0) {
        husk_fail(err, EINVAL, "the data reserve must be SIZE or N%% with N 0..90");
        goto fail;
      }
      s->reserve_pct = (unsigned)v;
    } else if (parse_size(cfg->data_reserve, &s->reserve, err) < 0) {
      goto fail;
    }
  }
  /* No public URL: no links on the embedded store (until one is set,
   * e.g. once the S3 listener has its port). */
  s->public_url = strdup(cfg->public_url ? cfg->public_url : "");
  if (asprintf(&s->dir, "%s/storage", cfg->data_dir) < 0) {
    s->dir = NULL;
    husk_error(err, ENOMEM, "store");
    goto fail;
  }
  if (!s->public_url) {
    husk_error(err, ENOMEM, "store");
    goto fail;
  }
  if (mkdir(s->dir, 0700) < 0 && errno != EEXIST) {
    husk_error(err, errno, "cannot create `%s`", s->dir);
    goto fail;
  }
  s->dirfd = open(s->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (s->dirfd < 0) {
    husk_error(err, errno, "cannot open `%s`", s->dir);
    goto fail;
  }
  struct stat st;
  if (fstat(s->dirfd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 077)) {
    husk_fail(err, EPERM, "`%s` must be a directory of ours with mode 0700", s->dir);
    goto fail;
  }
  if (open_subdir(s, "objects", &s->objfd, err) < 0 || open_subdir(s, "tmp", &s->tmpfd, err) < 0 ||
      open_subdir(s, "parts", &s->partfd, err) < 0 || master_key(s, err) < 0)
    goto fail;
  /* What a crash may have left. */
  unsigned removed = 0;
  if (sweep(s, s->tmpfd, NULL, &removed, err) < 0 || abort_stale_uploads(s, err) < 0 ||
      sweep(s, s->partfd, "parts", &removed, err) < 0 ||
      sweep(s, s->objfd, "objects", &removed, err) < 0)
    goto fail;
  if (removed)
    store_log(s, "removed %u unused file(s) left by an interrupted write", removed);
  *out = s;
  return 0;
fail:
  store_close(s);
  return -1;
}

void store_close(struct store *s) {
  if (!s)
    return;
  close_quiet(s->dirfd);
  close_quiet(s->objfd);
  close_quiet(s->tmpfd);
  close_quiet(s->partfd);
  OPENSSL_cleanse(s->master, sizeof s->master);
  remote_close(s->remote);
  free(s->dir);
  free(s->public_url);
  free(s);
}

const char *store_region(const struct store *s) { return s->region; }
const char *store_public_url(const struct store *s) { return s->public_url; }

void store_set_remote(struct store *s, struct remote *r) {
  remote_close(s->remote);
  s->remote = r;
}

struct remote *store_remote(const struct store *s) {
  return s->remote;
}

/* ---- the data disk's reserve ---- */

int store_space_check(struct store *s, uint64_t add, struct husk_err *err) {
  struct statvfs sv;
  if (fstatvfs(s->dirfd, &sv) < 0)
    return husk_error(err, errno, "cannot read the free space of `%s`", s->dir);
  uint64_t total = (uint64_t)sv.f_blocks * sv.f_frsize;
  uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize;
  uint64_t reserve = s->reserve;
  if (s->reserve_pct)
    reserve = total / 100 * s->reserve_pct;
  else if (s->reserve_default)
    reserve = total / 100 * STORE_RESERVE_DEFAULT_PCT < STORE_RESERVE_DEFAULT
                  ? total / 100 * STORE_RESERVE_DEFAULT_PCT
                  : STORE_RESERVE_DEFAULT;
  if (avail < reserve || avail - reserve < add)
    return husk_fail(err, ENOSPC,
                     "the server's data disk is full: %llu bytes free, %llu of them kept in "
                     "reserve (--data-reserve), %llu asked for",
                     (unsigned long long)avail, (unsigned long long)reserve,
                     (unsigned long long)add);
  return 0;
}

int store_fd_bound(int fd, uint64_t *size, uint64_t *bound, struct husk_err *err) {
  struct stat sb;
  if (fstat(fd, &sb) < 0)
    return husk_error(err, errno, "cannot stat the file");
  if (!S_ISREG(sb.st_mode))
    return husk_fail(err, EINVAL, "not a regular file");
  uint64_t alloc = (uint64_t)sb.st_blocks * 512;
  uint64_t sz = sb.st_size > 0 ? (uint64_t)sb.st_size : 0;
  if (sz > alloc + STORE_SPARSE_SLACK)
    return husk_fail(err, STORE_ESPARSE,
                     "the file is sparse (%llu bytes long, %llu bytes on disk): its holes are not "
                     "stored; write it out in full or archive it first",
                     (unsigned long long)sz, (unsigned long long)alloc);
  *size = sz;
  *bound = alloc + STORE_SPARSE_SLACK;
  return 0;
}

int store_tmpfile(struct store *s, struct husk_err *err) {
  int fd = openat(s->tmpfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0)
    return husk_error(err, errno, "cannot create a temporary file in `%s/tmp`", s->dir);
  return fd;
}

int store_set_public_url(struct store *s, const char *url) {
  char *u = strdup(url);
  if (!u)
    return -1;
  free(s->public_url);
  s->public_url = u;
  return 0;
}

/* ---- buckets ---- */

int store_bucket_check_locked(struct store *s, const char *tenant_id, const char *bucket,
                              struct husk_err *err) {
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(s->st, &q, "SELECT 1 FROM buckets WHERE tenant_id = ? AND name = ?", err) < 0)
    return -1;
  int rc = db_text(q, 1, tenant_id) || db_text(q, 2, bucket);
  if (rc != SQLITE_OK)
    return db_fail(s->st, err, rc, "bucket");
  int r = db_step_row(s->st, q, "bucket", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, STORE_ENOBUCKET, "The specified bucket does not exist");
  return 0;
}

int store_bucket_create(struct store *s, const char *tenant_id, const char *name,
                        struct husk_err *err) {
  if (!store_bucket_name_ok(name))
    return husk_fail(err, STORE_EBADNAME, "The specified bucket is not valid");
  cleanup_unlock struct state *locked = db_lock(s->st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(s->st, &txn, err) < 0)
    return -1;
  if (store_bucket_check_locked(s, tenant_id, name, err) == 0)
    return husk_fail(
        err, STORE_EOWNED,
        "Your previous request to create the named bucket succeeded and you already own it");
  if (err->code != STORE_ENOBUCKET)
    return -1;
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(s->st, &q, "INSERT INTO buckets (tenant_id, name, created_ms) VALUES (?, ?, ?)",
                 err) < 0)
    return -1;
  int rc = db_text(q, 1, tenant_id) || db_text(q, 2, name) || db_int(q, 3, state_now_ms());
  if (rc != SQLITE_OK)
    return db_fail(s->st, err, rc, "bucket");
  if (db_step_done(s->st, q, "cannot create the bucket", err) < 0)
    return -1;
  return db_commit(&txn, err);
}

int store_bucket_exists(struct store *s, const char *tenant_id, const char *name,
                        struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(s->st);
  return store_bucket_check_locked(s, tenant_id, name, err);
}

int store_bucket_delete(struct store *s, const char *tenant_id, const char *name,
                        struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(s->st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(s->st, &txn, err) < 0)
    return -1;
  if (store_bucket_check_locked(s, tenant_id, name, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(s->st, &q,
                 "SELECT (SELECT count(*) FROM (SELECT 1 FROM objects WHERE tenant_id = ?1 AND "
                 "bucket = ?2 LIMIT 1)) + (SELECT count(*) FROM (SELECT 1 FROM uploads WHERE "
                 "tenant_id = ?1 AND bucket = ?2 LIMIT 1))",
                 err) < 0)
    return -1;
  int rc = db_text(q, 1, tenant_id) || db_text(q, 2, name);
  if (rc != SQLITE_OK || db_step_row(s->st, q, "bucket", err) != 1)
    return rc != SQLITE_OK ? db_fail(s->st, err, rc, "bucket") : -1;
  if (sqlite3_column_int64(q, 0) > 0)
    return husk_fail(err, STORE_ENOTEMPTY, "The bucket you tried to delete is not empty");
  cleanup_stmt sqlite3_stmt *d = NULL;
  if (db_prepare(s->st, &d, "DELETE FROM buckets WHERE tenant_id = ? AND name = ?", err) < 0)
    return -1;
  rc = db_text(d, 1, tenant_id) || db_text(d, 2, name);
  if (rc != SQLITE_OK)
    return db_fail(s->st, err, rc, "bucket");
  if (db_step_done(s->st, d, "cannot delete the bucket", err) < 0)
    return -1;
  return db_commit(&txn, err);
}

struct bucket_row {
  char name[STORE_BUCKET_MAX + 1];
  int64_t created_ms;
};

int store_bucket_list(struct store *s, const char *tenant_id,
                      int (*cb)(void *ctx, const char *name, int64_t created_ms), void *ctx,
                      struct husk_err *err) {
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct bucket_row)};
  {
    cleanup_unlock struct state *locked = db_lock(s->st);
    cleanup_stmt sqlite3_stmt *q = NULL;
    if (db_prepare(s->st, &q,
                   "SELECT name, created_ms FROM buckets WHERE tenant_id = ? ORDER BY name",
                   err) < 0)
      return -1;
    int rc = db_text(q, 1, tenant_id);
    if (rc != SQLITE_OK)
      return db_fail(s->st, err, rc, "buckets");
    int r;
    while ((r = db_step_row(s->st, q, "buckets", err)) == 1) {
      struct bucket_row *b = db_rows_push(&rows);
      if (!b)
        return husk_error(err, ENOMEM, "buckets");
      db_col_text(q, 0, b->name, sizeof b->name);
      b->created_ms = sqlite3_column_int64(q, 1);
    }
    if (r < 0)
      return -1;
  }
  for (size_t i = 0; i < rows.n; i++) {
    struct bucket_row *b = db_rows_at(&rows, i);
    int v = cb(ctx, b->name, b->created_ms);
    if (v)
      return db_cb_verdict(v);
  }
  return 0;
}

/* ---- checksums ---- */

/* CRC-32C (Castagnoli), table-driven.  Neither libcrypto nor zlib has it,
 * and the x-amz-checksum-crc32c header is only worth a 256-entry table. */
static uint32_t crc32c_table[256];
static void crc32c_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++)
      c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    crc32c_table[i] = c;
  }
}
static uint32_t crc32c_update(uint32_t crc, const unsigned char *p, size_t n) {
  crc = ~crc;
  while (n--)
    crc = crc32c_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return ~crc;
}

/* CRC-64/NVME (poly 0xAD93D23594C93659, reflected, init and xorout all
 * ones): the default checksum of newer AWS SDKs.  No Debian 12 library
 * has it (ISA-L 2.30 lacks crc64_rocksoft), so a table, like CRC-32C's. */
static uint64_t crc64nvme_table[256];
static void crc64nvme_init(void) {
  for (uint64_t i = 0; i < 256; i++) {
    uint64_t c = i;
    for (int k = 0; k < 8; k++)
      c = c & 1 ? (c >> 1) ^ 0x9A6C9329AC4BC9B5ull : c >> 1;
    crc64nvme_table[i] = c;
  }
}
static uint64_t crc64nvme_update(uint64_t crc, const unsigned char *p, size_t n) {
  crc = ~crc;
  while (n--)
    crc = crc64nvme_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
  return ~crc;
}
static pthread_once_t crc_tables_once = PTHREAD_ONCE_INIT;
static void crc_tables_init(void) {
  crc32c_init();
  crc64nvme_init();
}

/* For tests and callers that check a whole buffer. */
uint64_t store_crc64nvme(const void *buf, size_t n) {
  pthread_once(&crc_tables_once, crc_tables_init);
  return crc64nvme_update(0, buf, n);
}

enum store_checksum store_checksum_parse(const char *n) {
  if (!n)
    return CK_NONE;
  if (!strcasecmp(n, "crc32"))
    return CK_CRC32;
  if (!strcasecmp(n, "crc32c"))
    return CK_CRC32C;
  if (!strcasecmp(n, "sha1"))
    return CK_SHA1;
  if (!strcasecmp(n, "sha256"))
    return CK_SHA256;
  if (!strcasecmp(n, "crc64nvme"))
    return CK_CRC64NVME;
  return CK_NONE;
}

const char *store_checksum_name(enum store_checksum ck) {
  switch (ck) {
  case CK_CRC32: return "crc32";
  case CK_CRC32C: return "crc32c";
  case CK_SHA1: return "sha1";
  case CK_SHA256: return "sha256";
  case CK_CRC64NVME: return "crc64nvme";
  case CK_NONE: break;
  }
  return "";
}

/* ---- the write path ---- */

struct store_writer {
  struct store *s;
  int fd;
  char tmp[STORE_ID_SIZE];
  bool published; /* the temporary name is gone (renamed) */
  EVP_MD_CTX *md5, *sha256, *ck_md;
  enum store_checksum ck;
  uint32_t crc;
  uint64_t crc64;
  uint64_t size, limit;
  bool finished;
  char etag[STORE_ETAG_SIZE];
};

int store_writer_open(struct store *s, enum store_checksum ck, bool sha256, uint64_t limit,
                      struct store_writer **out, struct husk_err *err) {
  struct store_writer *w = calloc(1, sizeof *w);
  if (!w)
    return husk_error(err, ENOMEM, "writer");
  w->s = s;
  w->fd = -1;
  w->ck = ck;
  w->limit = limit ? limit : STORE_PUT_MAX;
  if (id_new("t", STORE_ID_BYTES, w->tmp, STORE_ID_SIZE, err) < 0)
    goto fail;
  w->md5 = EVP_MD_CTX_new();
  if (!w->md5 || EVP_DigestInit_ex(w->md5, EVP_md5(), NULL) != 1) {
    husk_fail(err, ENOMEM, "MD5");
    goto fail;
  }
  if (sha256 &&
      (!(w->sha256 = EVP_MD_CTX_new()) || EVP_DigestInit_ex(w->sha256, EVP_sha256(), NULL) != 1)) {
    husk_fail(err, ENOMEM, "SHA-256");
    goto fail;
  }
  if (ck == CK_SHA1 || ck == CK_SHA256) {
    if (!(w->ck_md = EVP_MD_CTX_new()) ||
        EVP_DigestInit_ex(w->ck_md, ck == CK_SHA1 ? EVP_sha1() : EVP_sha256(), NULL) != 1) {
      husk_fail(err, ENOMEM, "checksum");
      goto fail;
    }
  }
  pthread_once(&crc_tables_once, crc_tables_init);
  if (store_space_check(s, 0, err) < 0)
    goto fail;
  w->fd = openat(s->tmpfd, w->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (w->fd < 0) {
    husk_error(err, errno, "cannot create a temporary file in `%s/tmp`", s->dir);
    goto fail;
  }
  *out = w;
  return 0;
fail:
  store_writer_abort(w);
  return -1;
}

int store_writer_write(struct store_writer *w, const void *buf, size_t n, struct husk_err *err) {
  if (n == 0)
    return 0;
  if (w->size + n > w->limit)
    return husk_fail(err, STORE_ETOOLARGE,
                     "Your proposed upload exceeds the maximum allowed size (%llu bytes)",
                     (unsigned long long)w->limit);
  if (EVP_DigestUpdate(w->md5, buf, n) != 1 ||
      (w->sha256 && EVP_DigestUpdate(w->sha256, buf, n) != 1) ||
      (w->ck_md && EVP_DigestUpdate(w->ck_md, buf, n) != 1))
    return husk_fail(err, ENOMEM, "digest");
  /* The reserve is looked at again every MiB: a body of unknown length
   * stops at most that far past it. */
  if ((w->size + n) >> 20 != w->size >> 20 && store_space_check(w->s, n, err) < 0)
    return -1;
  if (w->ck == CK_CRC32)
    w->crc = (uint32_t)crc32_z(w->crc, buf, n);
  else if (w->ck == CK_CRC32C)
    w->crc = crc32c_update(w->crc, buf, n);
  else if (w->ck == CK_CRC64NVME)
    w->crc64 = crc64nvme_update(w->crc64, buf, n);
  if (write_all(w->fd, buf, n) < 0)
    return husk_error(err, errno, "cannot write the object");
  w->size += n;
  return 0;
}

uint64_t store_writer_size(const struct store_writer *w) { return w->size; }
const char *store_writer_etag(const struct store_writer *w) { return w->etag; }
struct store *store_writer_store(const struct store_writer *w) {
  return w->s;
}

int store_writer_finish(struct store_writer *w, const struct store_expect *e,
                        char etag[STORE_ETAG_SIZE], char *ck_b64, struct husk_err *err) {
  unsigned char md[64];
  unsigned int l = 0;
  if (e && e->length >= 0 && (uint64_t)e->length != w->size)
    return husk_fail(err, STORE_EINCOMPLETE,
                     "The request body is %llu bytes, not the %lld announced",
                     (unsigned long long)w->size, (long long)e->length);
  if (EVP_DigestFinal_ex(w->md5, md, &l) != 1)
    return husk_fail(err, ENOMEM, "MD5");
  if (e && e->has_md5 && CRYPTO_memcmp(md, e->md5, 16) != 0)
    return husk_fail(err, STORE_EBADDIGEST,
                     "The Content-MD5 you specified did not match what we received");
  static const char hx[] = "0123456789abcdef";
  for (int i = 0; i < 16; i++) {
    etag[2 * i] = hx[md[i] >> 4];
    etag[2 * i + 1] = hx[md[i] & 15];
  }
  etag[32] = 0;
  if (w->sha256) {
    if (EVP_DigestFinal_ex(w->sha256, md, &l) != 1)
      return husk_fail(err, ENOMEM, "SHA-256");
    char hex[65];
    for (int i = 0; i < 32; i++) {
      hex[2 * i] = hx[md[i] >> 4];
      hex[2 * i + 1] = hx[md[i] & 15];
    }
    hex[64] = 0;
    if (e && e->sha256_hex && strcasecmp(hex, e->sha256_hex) != 0)
      return husk_fail(
          err, STORE_ESHA256,
          "The provided 'x-amz-content-sha256' header does not match what was computed");
  }
  char b64[96] = "";
  if (w->ck == CK_CRC32 || w->ck == CK_CRC32C) {
    unsigned char be[4] = {(unsigned char)(w->crc >> 24), (unsigned char)(w->crc >> 16),
                           (unsigned char)(w->crc >> 8), (unsigned char)w->crc};
    store_b64(be, 4, b64);
  } else if (w->ck == CK_CRC64NVME) {
    unsigned char be[8];
    for (int i = 0; i < 8; i++)
      be[i] = (unsigned char)(w->crc64 >> (56 - 8 * i));
    store_b64(be, 8, b64);
  } else if (w->ck_md) {
    if (EVP_DigestFinal_ex(w->ck_md, md, &l) != 1)
      return husk_fail(err, ENOMEM, "checksum");
    store_b64(md, l, b64);
  }
  if (e && e->ck != CK_NONE && e->ck_b64 && strcmp(b64, e->ck_b64) != 0)
    return husk_fail(err, STORE_EBADDIGEST,
                     "The %s you specified did not match the calculated checksum",
                     store_checksum_name(e->ck));
  if (ck_b64)
    snprintf(ck_b64, 64, "%.63s", b64);
  if (fsync(w->fd) < 0)
    return husk_error(err, errno, "cannot fsync the object");
  memcpy(w->etag, etag, STORE_ETAG_SIZE);
  w->finished = true;
  return 0;
}

int store_writer_publish(struct store_writer *w, int dirfd, const char *name,
                         struct husk_err *err) {
  if (renameat(w->s->tmpfd, w->tmp, dirfd, name) < 0)
    return husk_error(err, errno, "cannot publish the object");
  w->published = true;
  if (fsync(dirfd) < 0) {
    int e = errno;
    unlinkat(dirfd, name, 0);
    return husk_error(err, e, "cannot fsync the object directory");
  }
  return 0;
}

void store_writer_abort(struct store_writer *w) {
  if (!w)
    return;
  close_quiet(w->fd);
  if (!w->published && w->tmp[0])
    unlinkat(w->s->tmpfd, w->tmp, 0);
  EVP_MD_CTX_free(w->md5);
  EVP_MD_CTX_free(w->sha256);
  EVP_MD_CTX_free(w->ck_md);
  free(w);
}

/* Point (tenant, bucket, key) at `file`; *old receives the file it
 * replaced ("" if none).  The caller holds the lock and a transaction. */
static int usage_locked(struct store *s, const char *tenant_id, uint64_t *bytes,
                        struct husk_err *err) {
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(s->st, &q,
                 "SELECT (SELECT coalesce(sum(size), 0) FROM objects WHERE tenant_id = ?1) + "
                 "(SELECT coalesce(sum(p.size), 0) FROM parts p JOIN uploads u ON p.upload_id = "
                 "u.id WHERE u.tenant_id = ?1)",
                 err) < 0)
    return -1;
  int rc = db_text(q, 1, tenant_id);
  if (rc != SQLITE_OK)
    return db_fail(s->st, err, rc, "usage");
  if (db_step_row(s->st, q, "usage", err) != 1)
    return -1;
  int64_t v = sqlite3_column_int64(q, 0);
  *bytes = v > 0 ? (uint64_t)v : 0;
  return 0;
}

int store_usage(struct store *s, const char *tenant_id, uint64_t *bytes, struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(s->st);
  return usage_locked(s, tenant_id, bytes, err);
}

int store_quota_locked(struct store *s, const char *tenant_id, uint64_t add, uint64_t freed,
                       struct husk_err *err) {
  if (!s->quota)
    return 0;
  uint64_t used = 0;
  if (usage_locked(s, tenant_id, &used, err) < 0)
    return -1;
  used = used > freed ? used - freed : 0;
  if (add > s->quota || used > s->quota - add)
    return husk_fail(err, STORE_EQUOTA,
                     "The tenant's storage quota (%llu bytes) would be exceeded: %llu in use",
                     (unsigned long long)s->quota, (unsigned long long)used);
  return 0;
}

/* Under the lock: the size of the object at bucket/key (0 if none). */
static int freed_locked(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                        uint64_t *freed, struct husk_err *err) {
  *freed = 0;
  if (!bucket || !key)
    return 0;
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(s->st, &q,
                 "SELECT size FROM objects WHERE tenant_id = ? AND bucket = ? AND key = ?",
                 err) < 0)
    return -1;
  int rc = db_text(q, 1, tenant_id) || db_text(q, 2, bucket) || db_text(q, 3, key);
  if (rc != SQLITE_OK)
    return db_fail(s->st, err, rc, "quota");
  int r = db_step_row(s->st, q, "quota", err);
  if (r < 0)
    return -1;
  if (r == 1)
    *freed = (uint64_t)sqlite3_column_int64(q, 0);
  return 0;
}

int store_quota_room(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                     uint64_t *room, struct husk_err *err) {
  *room = UINT64_MAX;
  if (!s->quota)
    return 0;
  cleanup_unlock struct state *locked = db_lock(s->st);
  uint64_t freed = 0, used = 0;
  if (freed_locked(s, tenant_id, bucket, key, &freed, err) < 0 ||
      usage_locked(s, tenant_id, &used, err) < 0)
    return -1;
  used = used > freed ? used - freed : 0;
  *room = used < s->quota ? s->quota - used : 0;
  return 0;
}

int store_quota_check(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                      uint64_t add, struct husk_err *err) {
  if (!s->quota)
    return 0;
  cleanup_unlock struct state *locked = db_lock(s->st);
  uint64_t freed = 0;
  if (freed_locked(s, tenant_id, bucket, key, &freed, err) < 0)
    return -1;
  return store_quota_locked(s, tenant_id, add, freed, err);
}

int store_object_upsert_locked(struct store *s, const char *tenant_id, const char *bucket,
                               const char *key, const char *file, uint64_t size, const char *etag,
                               const char *ctype, const char *meta, int64_t mtime, uint64_t freed,
                               char old[STORE_ID_SIZE], struct husk_err *err) {
  if (store_bucket_check_locked(s, tenant_id, bucket, err) < 0)
    return -1;
  old[0] = 0;
  uint64_t old_size = 0;
  {
    cleanup_stmt sqlite3_stmt *q = NULL;
    if (db_prepare(s->st, &q,
                   "SELECT file, size FROM objects WHERE tenant_id = ? AND bucket = ? AND key = ?",
                   err) < 0)
      return -1;
    int rc = db_text(q, 1, tenant_id) || db_text(q, 2, bucket) || db_text(q, 3, key);
    if (rc != SQLITE_OK)
      return db_fail(s->st, err, rc, "object");
    int r = db_step_row(s->st, q, "object", err);
    if (r < 0)
      return -1;
    if (r == 1) {
      db_col_text(q, 0, old, STORE_ID_SIZE);
      old_size = (uint64_t)sqlite3_column_int64(q, 1);
    }
  }
  /* The version replaced (and parts assembled into this one) free space. */
  if (store_quota_locked(s, tenant_id, size, old_size + freed, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *u = NULL;
  if (db_prepare(
          s->st, &u,
          "INSERT INTO objects (tenant_id, bucket, key, file, size, etag, content_type, "
          "meta_json, mtime_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
          "ON CONFLICT (tenant_id, bucket, key) DO UPDATE SET file = excluded.file, "
          "size = excluded.size, etag = excluded.etag, content_type = excluded.content_type, "
          "meta_json = excluded.meta_json, mtime_ms = excluded.mtime_ms",
          err) < 0)
    return -1;
  int rc = db_text(u, 1, tenant_id) || db_text(u, 2, bucket) || db_text(u, 3, key) ||
           db_text(u, 4, file) || db_int(u, 5, (int64_t)size) || db_text(u, 6, etag) ||
           db_text(u, 7, ctype ? ctype : "") || db_text(u, 8, meta ? meta : "{}") ||
           db_int(u, 9, mtime);
  if (rc != SQLITE_OK)
    return db_fail(s->st, err, rc, "object");
  if (db_step_done(s->st, u, "cannot store the object", err) < 0)
    return -1;
  db_fault_point("object_upsert");
  return 0;
}

static int object_upsert(struct store *s, const char *tenant_id, const char *bucket,
                         const char *key, const char *file, uint64_t size, const char *etag,
                         const char *ctype, const char *meta, int64_t mtime,
                         char old[STORE_ID_SIZE], struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(s->st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(s->st, &txn, err) < 0 ||
      store_object_upsert_locked(s, tenant_id, bucket, key, file, size, etag, ctype, meta, mtime, 0,
                                 old, err) < 0)
    return -1;
  return db_commit(&txn, err);
}

int store_fill_object(struct store_object *out, const char *key, const char *file, uint64_t size,
                      const char *etag, const char *ctype, const char *meta, int64_t mtime,
                      struct husk_err *err) {
  if (!out)
    return 0;
  memset(out, 0, sizeof *out);
  out->key = strdup(key);
  out->meta_json = strdup(meta ? meta : "{}");
  if (!out->key || !out->meta_json) {
    store_object_free(out);
    return husk_error(err, ENOMEM, "object");
  }
  snprintf(out->file, sizeof out->file, "%s", file);
  out->size = size;
  snprintf(out->etag, sizeof out->etag, "%s", etag);
  snprintf(out->content_type, sizeof out->content_type, "%s", ctype ? ctype : "");
  out->mtime_ms = mtime;
  return 0;
}

/* Whether the object's row names `file` (false when unsure). */
static bool row_names_file(struct store *s, const char *tenant_id, const char *bucket,
                           const char *key, const char *file) {
  cleanup_unlock struct state *locked = db_lock(s->st);
  cleanup_stmt sqlite3_stmt *q = NULL;
  struct husk_err ignored;
  if (db_prepare(
          s->st, &q,
          "SELECT 1 FROM objects WHERE tenant_id = ? AND bucket = ? AND key = ? AND file = ?",
          &ignored) < 0)
    return false;
  if (db_text(q, 1, tenant_id) || db_text(q, 2, bucket) || db_text(q, 3, key) ||
      db_text(q, 4, file))
    return false;
  return db_step_row(s->st, q, "object", &ignored) == 1;
}

/* Steps 3-5 for a finished file already named `etag`. */
static int commit_object(struct store_writer *w, const char *tenant_id, const char *bucket,
                         const char *key, const char *etag, const char *ctype, const char *meta,
                         struct store_object *out, struct husk_err *err) {
  struct store *s = w->s;
  char file[STORE_ID_SIZE];
  if (store_key_check(key, err) < 0 || id_new("o", STORE_ID_BYTES, file, STORE_ID_SIZE, err) < 0)
    return -1;
  if (ctype && strlen(ctype) >= STORE_CTYPE_MAX)
    return husk_fail(err, EINVAL, "the content type is too long");
  if (store_writer_publish(w, s->objfd, file, err) < 0)
    return -1;
  int64_t now = state_now_ms();
  char old[STORE_ID_SIZE];
  uint64_t size = w->size;
  if (object_upsert(s, tenant_id, bucket, key, file, size, etag, ctype, meta, now, old, err) < 0) {
    /* A failed sync fails the call with the row committed (state.h):
     * then the file is the object's, and must stay. */
    if (!row_names_file(s, tenant_id, bucket, key, file))
      store_unlink(s, s->objfd, file);
    return -1;
  }
  if (old[0])
    store_unlink(s, s->objfd, old);
  return store_fill_object(out, key, file, size, etag, ctype, meta, now, err);
}

int store_commit_with_etag(struct store_writer *w, const char *tenant_id, const char *bucket,
                           const char *key, const char *etag, const char *content_type,
                           const char *meta_json, struct store_object *out, struct husk_err *err) {
  int r = commit_object(w, tenant_id, bucket, key, etag, content_type, meta_json, out, err);
  store_writer_abort(w);
  return r;
}

int store_put_commit(struct store_writer *w, const char *tenant_id, const char *bucket,
                     const char *key, const char *content_type, const char *meta_json,
                     struct store_object *out, struct husk_err *err) {
  int r = w->finished
              ? commit_object(w, tenant_id, bucket, key, w->etag, content_type, meta_json, out, err)
              : husk_fail(err, EINVAL, "internal: the body was not finished");
  store_writer_abort(w);
  return r;
}
