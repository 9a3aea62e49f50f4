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

#include "state/store_state.h"
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

/* Remove every file of `dirfd` that no row names (`check` false: every
 * file; else those no row of `kind` names). */
static int sweep(struct store *s, int dirfd, bool check, enum state_store_files kind,
                 unsigned *removed, struct husk_err *err) {
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
    if (check && state_store_file_used(s->st, kind, de->d_name, &used, err) < 0)
      return -1;
    if (!used) {
      store_unlink(s, dirfd, de->d_name);
      (*removed)++;
    }
  }
  return 0;
}

/* Uploads abandoned for longer than STORE_UPLOAD_TTL_MS, aborted in
 * batches of STALE_BATCH. */
#define STALE_BATCH 64
struct stale {
  struct store *s;
  int n;
  bool failed;
};

static int abort_stale(void *ctx, const struct state_stale_upload *u) {
  struct stale *b = ctx;
  struct husk_err e2;
  b->n++;
  if (store_upload_abort(b->s, u->tenant_id, u->bucket, u->key, u->id, &e2) < 0) {
    store_log(b->s, "cannot abort abandoned upload %s: %s", u->id, e2.msg);
    b->failed = true;
  }
  return 0;
}

static int abort_stale_uploads(struct store *s, struct husk_err *err) {
  for (;;) {
    struct stale b = {.s = s};
    if (state_upload_stale(s->st, state_now_ms() - STORE_UPLOAD_TTL_MS, STALE_BATCH, abort_stale,
                           &b, err) < 0)
      return -1;
    /* A batch that could not be aborted would come back forever: stop. */
    if (b.n < STALE_BATCH || b.failed)
      return 0;
  }
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
  if (sweep(s, s->tmpfd, false, STATE_OBJECT_FILES, &removed, err) < 0 ||
      abort_stale_uploads(s, err) < 0 ||
      sweep(s, s->partfd, true, STATE_PART_FILES, &removed, err) < 0 ||
      sweep(s, s->objfd, true, STATE_OBJECT_FILES, &removed, err) < 0)
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

int store_bucket_create(struct store *s, const char *tenant_id, const char *name,
                        struct husk_err *err) {
  if (!store_bucket_name_ok(name))
    return husk_fail(err, STORE_EBADNAME, "The specified bucket is not valid");
  return state_bucket_create(s->st, tenant_id, name, err);
}

int store_bucket_exists(struct store *s, const char *tenant_id, const char *name,
                        struct husk_err *err) {
  return state_bucket_check(s->st, tenant_id, name, err);
}

int store_bucket_delete(struct store *s, const char *tenant_id, const char *name,
                        struct husk_err *err) {
  return state_bucket_delete(s->st, tenant_id, name, err);
}

int store_bucket_list(struct store *s, const char *tenant_id,
                      int (*cb)(void *ctx, const char *name, int64_t created_ms), void *ctx,
                      struct husk_err *err) {
  return state_bucket_list(s->st, tenant_id, cb, ctx, err);
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

/* ---- usage and quota ---- */

int store_usage(struct store *s, const char *tenant_id, uint64_t *bytes, struct husk_err *err) {
  return state_store_usage(s->st, tenant_id, bytes, err);
}

int store_quota_room(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                     uint64_t *room, struct husk_err *err) {
  return state_store_quota_room(s->st, tenant_id, bucket, key, s->quota, room, err);
}

int store_quota_check(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                      uint64_t add, struct husk_err *err) {
  return state_store_quota_check(s->st, tenant_id, bucket, key, s->quota, add, err);
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
  struct state_object_new o = {.key = key,
                               .file = file,
                               .size = size,
                               .etag = etag,
                               .content_type = ctype,
                               .meta_json = meta,
                               .mtime_ms = now};
  if (state_object_put(s->st, tenant_id, bucket, &o, s->quota, old, err) < 0) {
    /* A failed sync fails the call with the row committed (state.h):
     * then the file is the object's, and must stay. */
    if (!state_object_names_file(s->st, tenant_id, bucket, key, file))
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
