/* The object store core (src/storage): buckets, objects, listing
 * semantics (prefix, delimiter, markers inside a common prefix), multipart
 * ETags and checks, copy, links, sealed secrets, tenant isolation, and a
 * SIGKILL between publishing a file and committing its row. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "state/db.h"
#include "state/state.h"
#include "storage/store.h"
#include "unit.h"

#define CHECK_OK(expr)                                                                            \
  do {                                                                                            \
    husk_err_clear(&err);                                                                         \
    if ((expr) != 0) {                                                                            \
      printf("#   %s:%d: %s: %s\n", __FILE__, __LINE__, #expr, err.msg);                          \
      unit_cur_failed = 1;                                                                        \
    }                                                                                             \
  } while (0)
#define CHECK_ERR(expr, want)                                                                     \
  do {                                                                                            \
    husk_err_clear(&err);                                                                         \
    int r_ = (expr);                                                                              \
    if (r_ != -1 || err.code != (want)) {                                                         \
      printf("#   %s:%d: %s: got %d code %d (%s), want %d\n", __FILE__, __LINE__, #expr, r_,     \
             err.code, err.msg, (want));                                                          \
      unit_cur_failed = 1;                                                                        \
    }                                                                                             \
  } while (0)

static char dir[64];
static struct state *st;
static struct store *s;
static char t1[STATE_TENANT_ID_SIZE], t2[STATE_TENANT_ID_SIZE];

static uint64_t quota;

static void open_all(void) {
  struct husk_err err;
  char db[128];
  snprintf(db, sizeof db, "%s/husk.db", dir);
  if (state_open(&st, db, &err) < 0) {
    printf("# state_open: %s\n", err.msg);
    exit(2);
  }
  struct store_config c = {.data_dir = dir, .state = st, .public_url = "http://127.0.0.1:9",
                           .quota_bytes = quota};
  if (store_open(&s, &c, &err) < 0) {
    printf("# store_open: %s\n", err.msg);
    exit(2);
  }
}

static void close_all(void) {
  store_close(s);
  state_close(st);
  s = NULL;
  st = NULL;
}

static int count_files(const char *sub) {
  char p[160];
  snprintf(p, sizeof p, "%s/storage/%s", dir, sub);
  DIR *d = opendir(p);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)))
    n += e->d_name[0] != '.';
  if (d)
    closedir(d);
  return n;
}

static int put(const char *tenant, const char *bucket, const char *key, const char *data) {
  struct husk_err err;
  struct store_object o;
  int r =
      store_put_buffer(s, tenant, bucket, key, data, strlen(data), "text/plain", NULL, &o, &err);
  if (r == 0)
    store_object_free(&o);
  return r;
}

/* Listing as one string: "k1 k2 P:prefix/ ... [T:next]". */
struct acc {
  char buf[4096];
};
static int acc_cb(void *ctx, const struct store_entry *e) {
  struct acc *a = ctx;
  size_t n = strlen(a->buf);
  snprintf(a->buf + n, sizeof a->buf - n, "%s%s%s", n ? " " : "", e->is_prefix ? "P:" : "", e->key);
  return 0;
}
static void list(const char *prefix, const char *delim, const char *after, unsigned max, char *out,
                 size_t size) {
  struct acc a = {""};
  struct husk_err err;
  bool trunc = false;
  char *next = NULL;
  struct store_list_req rq = {
      .prefix = prefix, .delimiter = delim, .after = after, .max_keys = max};
  if (store_list(s, t1, "bkt", &rq, acc_cb, &a, &trunc, &next, &err) < 0) {
    snprintf(out, size, "ERR %s", err.msg);
    return;
  }
  if (trunc)
    snprintf(a.buf + strlen(a.buf), sizeof a.buf - strlen(a.buf), " T:%s", next ? next : "?");
  free(next);
  snprintf(out, size, "%s", a.buf);
}

/* CRC-64/NVME's published check value (the CRC catalogue: "123456789"),
 * the empty string, and a length that is not a multiple of 8. */
TEST(crc64nvme) {
  CHECK(store_crc64nvme("123456789", 9) == 0xAE8B14860A799888ull);
  CHECK(store_crc64nvme("", 0) == 0);
  CHECK(store_checksum_parse("CRC64NVME") == CK_CRC64NVME);
  CHECK(!strcmp(store_checksum_name(CK_CRC64NVME), "crc64nvme"));
}

TEST(buckets) {
  struct husk_err err;
  CHECK_OK(store_bucket_create(s, t1, "bkt", &err));
  CHECK_ERR(store_bucket_create(s, t1, "bkt", &err), STORE_EOWNED);
  CHECK_OK(store_bucket_create(s, t2, "bkt", &err)); /* per-tenant names */
  CHECK_ERR(store_bucket_create(s, t1, "Bad_Name", &err), STORE_EBADNAME);
  CHECK_ERR(store_bucket_create(s, t1, "ab", &err), STORE_EBADNAME);
  CHECK_ERR(store_bucket_create(s, t1, "192.168.1.1", &err), STORE_EBADNAME);
  CHECK_ERR(store_bucket_create(s, t1, "a..b", &err), STORE_EBADNAME);
  CHECK_ERR(store_bucket_exists(s, t1, "nope", &err), STORE_ENOBUCKET);
  CHECK_OK(store_bucket_create(s, t1, "gone", &err));
  CHECK(put(t1, "gone", "x", "1") == 0);
  CHECK_ERR(store_bucket_delete(s, t1, "gone", &err), STORE_ENOTEMPTY);
  CHECK_OK(store_object_delete(s, t1, "gone", "x", &err));
  CHECK_OK(store_bucket_delete(s, t1, "gone", &err));
  CHECK_ERR(store_bucket_exists(s, t1, "gone", &err), STORE_ENOBUCKET);
}

TEST(objects_and_isolation) {
  struct husk_err err;
  CHECK(put(t1, "bkt", "a/b c+%/ü//x", "hello") == 0);
  struct store_object o;
  int fd = -1;
  CHECK_OK(store_object_get(s, t1, "bkt", "a/b c+%/ü//x", &o, &fd, &err));
  char buf[16] = "";
  CHECK(read(fd, buf, sizeof buf) == 5 && !memcmp(buf, "hello", 5));
  CHECK_STR(o.etag, "5d41402abc4b2a76b9719d911017c592"); /* md5("hello") */
  CHECK_STR(o.content_type, "text/plain");
  close(fd);
  store_object_free(&o);
  /* Tenant two's bucket of the same name is another bucket. */
  CHECK_ERR(store_object_get(s, t2, "bkt", "a/b c+%/ü//x", &o, NULL, &err), STORE_ENOKEY);
  CHECK_ERR(store_object_get(s, t2, "nope", "k", &o, NULL, &err), STORE_ENOBUCKET);
  /* Overwrite: the new version, the old file gone. */
  int before = count_files("objects");
  CHECK(put(t1, "bkt", "a/b c+%/ü//x", "world") == 0);
  CHECK(count_files("objects") == before);
  CHECK_OK(store_object_get(s, t1, "bkt", "a/b c+%/ü//x", &o, NULL, &err));
  CHECK(o.size == 5);
  store_object_free(&o);
  /* Bad keys. */
  CHECK_ERR(store_put_buffer(s, t1, "bkt", "", "x", 1, NULL, NULL, &o, &err), STORE_EBADKEY);
  CHECK_ERR(store_put_buffer(s, t1, "bkt", "\xff\xfe", "x", 1, NULL, NULL, &o, &err),
            STORE_EBADKEY);
  char longkey[1100];
  memset(longkey, 'k', sizeof longkey - 1);
  longkey[sizeof longkey - 1] = 0;
  CHECK_ERR(store_put_buffer(s, t1, "bkt", longkey, "x", 1, NULL, NULL, &o, &err), STORE_EBADKEY);
  /* Copy keeps the ETag. */
  CHECK_OK(
      store_object_copy(s, t1, "bkt", "a/b c+%/ü//x", "bkt", "copy", NULL, NULL, NULL, &o, &err));
  CHECK_STR(o.etag, "7d793037a0760186574b0282f2f435e7"); /* md5("world") */
  store_object_free(&o);
  CHECK_OK(store_object_delete(s, t1, "bkt", "copy", &err));
  CHECK_OK(store_object_delete(s, t1, "bkt", "copy", &err)); /* missing: fine */
  CHECK_OK(store_object_delete(s, t1, "bkt", "a/b c+%/ü//x", &err));
  CHECK(count_files("tmp") == 0);
}

TEST(listing) {
  const char *keys[] = {"a/1", "a/2", "a/sub/3", "b/1", "c", "d/x/y", "e"};
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
    CHECK(put(t1, "bkt", keys[i], "v") == 0);
  char out[4096];
  list("", NULL, NULL, 1000, out, sizeof out);
  CHECK_STR(out, "a/1 a/2 a/sub/3 b/1 c d/x/y e");
  list("", "/", NULL, 1000, out, sizeof out);
  CHECK_STR(out, "P:a/ P:b/ c P:d/ e");
  list("a/", "/", NULL, 1000, out, sizeof out);
  CHECK_STR(out, "a/1 a/2 P:a/sub/");
  list("", "/", NULL, 2, out, sizeof out);
  CHECK_STR(out, "P:a/ P:b/ T:b/");
  /* Continuing after a common prefix skips its whole group. */
  list("", "/", "b/", 2, out, sizeof out);
  CHECK_STR(out, "c P:d/ T:d/");
  list("", "/", "a/2", 1000, out, sizeof out);
  CHECK_STR(out, "P:b/ c P:d/ e");
  list("", NULL, "c", 1000, out, sizeof out);
  CHECK_STR(out, "d/x/y e");
  list("zzz", NULL, NULL, 1000, out, sizeof out);
  CHECK_STR(out, "");
  list("", NULL, NULL, 0, out, sizeof out);
  CHECK_STR(out, "");
  list("", "x/", NULL, 1000, out, sizeof out);
  CHECK_STR(out, "a/1 a/2 a/sub/3 b/1 c P:d/x/ e");
  struct husk_err err;
  for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
    CHECK_OK(store_object_delete(s, t1, "bkt", keys[i], &err));
}

static struct store_writer *part_writer(const char *data, size_t n) {
  struct store_writer *w = NULL;
  struct husk_err err;
  char etag[STORE_ETAG_SIZE];
  if (store_writer_open(s, CK_NONE, false, 0, &w, &err) < 0 ||
      store_writer_write(w, data, n, &err) < 0 || store_writer_finish(w, NULL, etag, NULL, &err) < 0)
    return NULL;
  return w;
}

static void md5hex(const void *d, size_t n, char out[33]) {
  unsigned char md[16];
  unsigned int l;
  EVP_Digest(d, n, md, &l, EVP_md5(), NULL);
  for (int i = 0; i < 16; i++)
    sprintf(out + 2 * i, "%02x", md[i]);
}

TEST(multipart) {
  struct husk_err err;
  char up[STORE_ID_SIZE];
  CHECK_OK(store_upload_create(s, t1, "bkt", "mp", "application/x-y", "{\"a\":\"b\"}", up, &err));
  size_t big = STORE_PART_MIN;
  char *p1 = malloc(big);
  memset(p1, 'x', big);
  /* Parts out of order; part 2 replaced. */
  CHECK_OK(store_part_commit(part_writer("tail", 4), t1, "bkt", "mp", up, 2, &err));
  CHECK_OK(store_part_commit(part_writer("TAIL", 4), t1, "bkt", "mp", up, 2, &err));
  CHECK_OK(store_part_commit(part_writer(p1, big), t1, "bkt", "mp", up, 1, &err));
  CHECK(count_files("parts") == 2);
  CHECK_ERR(store_part_commit(part_writer("x", 1), t1, "bkt", "mp", up, 0, &err), EINVAL);
  CHECK_ERR(store_part_commit(part_writer("x", 1), t1, "bkt", "mp", up, 10001, &err), EINVAL);
  CHECK_ERR(store_part_commit(part_writer("x", 1), t1, "bkt", "other", up, 3, &err), STORE_ENOUPLOAD);
  CHECK_ERR(store_part_commit(part_writer("x", 1), t2, "bkt", "mp", up, 3, &err), STORE_ENOUPLOAD);
  CHECK(count_files("parts") == 2 && count_files("tmp") == 0);
  char m1[33], m2[33];
  md5hex(p1, big, m1);
  md5hex("TAIL", 4, m2);
  struct store_part ok[2] = {{.num = 1}, {.num = 2}};
  snprintf(ok[0].etag, sizeof ok[0].etag, "\"%s\"", m1);
  snprintf(ok[1].etag, sizeof ok[1].etag, "%s", m2);
  struct store_part rev[2] = {ok[1], ok[0]};
  struct store_object o;
  CHECK_ERR(store_upload_complete(s, t1, "bkt", "mp", up, rev, 2, NULL, &o, &err),
            STORE_EPARTORDER);
  struct store_part wrong[2] = {ok[0], ok[1]};
  wrong[1].etag[0] = wrong[1].etag[0] == '0' ? '1' : '0';
  CHECK_ERR(store_upload_complete(s, t1, "bkt", "mp", up, wrong, 2, NULL, &o, &err),
            STORE_EBADPART);
  struct store_part missing[1] = {ok[1]};
  missing[0].num = 3; /* never uploaded */
  CHECK_ERR(store_upload_complete(s, t1, "bkt", "mp", up, missing, 1, NULL, &o, &err),
            STORE_EBADPART);
  CHECK_OK(store_upload_complete(s, t1, "bkt", "mp", up, ok, 2, NULL, &o, &err));
  /* md5(md5(p1) || md5("TAIL"))-2 */
  unsigned char cat[32];
  for (int i = 0; i < 16; i++) {
    unsigned v;
    sscanf(m1 + 2 * i, "%2x", &v);
    cat[i] = (unsigned char)v;
    sscanf(m2 + 2 * i, "%2x", &v);
    cat[16 + i] = (unsigned char)v;
  }
  char want[40];
  md5hex(cat, 32, want);
  strcat(want, "-2");
  CHECK_STR(o.etag, want);
  CHECK(o.size == big + 4);
  CHECK_STR(o.content_type, "application/x-y");
  store_object_free(&o);
  CHECK(count_files("parts") == 0);
  CHECK_ERR(store_upload_complete(s, t1, "bkt", "mp", up, ok, 2, NULL, &o, &err), STORE_ENOUPLOAD);
  /* A small part that is not the last. */
  CHECK_OK(store_upload_create(s, t1, "bkt", "mp2", NULL, NULL, up, &err));
  CHECK_OK(store_part_commit(part_writer("a", 1), t1, "bkt", "mp2", up, 1, &err));
  CHECK_OK(store_part_commit(part_writer("b", 1), t1, "bkt", "mp2", up, 2, &err));
  struct store_part two[2] = {{.num = 1}, {.num = 2}};
  md5hex("a", 1, two[0].etag);
  md5hex("b", 1, two[1].etag);
  CHECK_ERR(store_upload_complete(s, t1, "bkt", "mp2", up, two, 2, NULL, &o, &err),
            STORE_ETOOSMALL);
  CHECK_OK(store_upload_abort(s, t1, "bkt", "mp2", up, &err));
  CHECK(count_files("parts") == 0);
  CHECK_ERR(store_upload_abort(s, t1, "bkt", "mp2", up, &err), STORE_ENOUPLOAD);
  CHECK_OK(store_object_delete(s, t1, "bkt", "mp", &err));
  free(p1);
}

TEST(keys_are_sealed) {
  struct husk_err err;
  char id[STORE_ACCESS_KEY_SIZE], secret[STORE_SECRET_SIZE], got[STORE_SECRET_SIZE], tn[32];
  CHECK_OK(store_key_create(s, t1, false, id, secret, &err));
  CHECK(strlen(id) == 20 && strlen(secret) == 40);
  bool internal = true;
  CHECK_OK(store_key_lookup(s, id, tn, got, &internal, &err));
  CHECK_STR(got, secret);
  CHECK_STR(tn, t1);
  CHECK(!internal);
  /* The database file does not hold the secret in the clear. */
  char cmd[256];
  snprintf(cmd, sizeof cmd, "grep -qaF '%s' %s/husk.db %s/husk.db-wal", secret, dir, dir);
  CHECK(system(cmd) != 0);
  CHECK_ERR(store_key_lookup(s, "HKNOPE", tn, got, NULL, &err), STORE_ENOACCESSKEY);
  CHECK_ERR(store_key_revoke(s, t2, id, &err), STORE_ENOACCESSKEY);
  CHECK_OK(store_key_revoke(s, t1, id, &err));
  CHECK_ERR(store_key_lookup(s, id, tn, got, NULL, &err), STORE_ENOACCESSKEY);
}

TEST(links) {
  struct husk_err err;
  CHECK(put(t1, "bkt", "l/doc.txt", "doc") == 0);
  struct store_link l;
  CHECK_OK(store_link_create(s, t1, "bkt", "l/doc.txt", 0, "Doc \"1\".txt", false, NULL, &l, &err));
  CHECK(l.expires_ms - l.created_ms == 3600 * 1000);
  CHECK(strstr(l.url, "http://127.0.0.1:9/bkt/l/doc.txt?") == l.url);
  CHECK(strstr(l.url, "x-husk-link=") && strstr(l.url, "filename%2A%3DUTF-8"));
  bool live = false;
  CHECK(store_link_owned(s, l.id, t1, &live) && live);
  CHECK(!store_link_owned(s, l.id, t2, &live));
  CHECK_OK(store_link_record(s, l.id, "10.0.0.1", "agent\x01\n", 200, &err));
  CHECK_OK(store_link_revoke(s, t1, l.id, &err));
  CHECK(store_link_owned(s, l.id, t1, &live) && !live);
  CHECK_ERR(store_link_revoke(s, t2, l.id, &err), STORE_ENOLINK);
  store_link_free(&l);
  CHECK_ERR(store_link_create(s, t1, "bkt", "l/none", 60, NULL, false, NULL, &l, &err),
            STORE_ENOKEY);
  CHECK_ERR(store_link_create(s, t1, "bkt", "l/doc.txt", 604801, NULL, false, NULL, &l, &err),
            EINVAL);
  CHECK_ERR(store_link_create(s, t1, "bkt", "l/doc.txt", 60, "a/b", false, NULL, &l, &err), EINVAL);
  /* Without an S3 listener (no public URL) and no external store: none. */
  CHECK_OK(store_set_public_url(s, ""));
  CHECK_ERR(store_link_create(s, t1, "bkt", "l/doc.txt", 60, NULL, false, NULL, &l, &err),
            EOPNOTSUPP);
  CHECK_OK(store_set_public_url(s, "http://127.0.0.1:9"));
  CHECK_OK(store_object_delete(s, t1, "bkt", "l/doc.txt", &err));
}

/* Refused fetches are counted (the link's, else the global counter) and
 * the access log keeps only the newest STORE_LINK_LOG_MAX per link. */
static int no_sync(int fd) {
  (void)fd;
  return 0;
}
static int count_cb(void *ctx, const struct store_link_access *a) {
  (void)a;
  (*(int *)ctx)++;
  return 0;
}
TEST(link_counts_and_log_cap) {
  struct husk_err err;
  CHECK(put(t1, "bkt", "cap.txt", "cap") == 0);
  struct store_link l, g;
  CHECK_OK(store_link_create(s, t1, "bkt", "cap.txt", 0, NULL, false, NULL, &l, &err));
  int64_t total0 = -1, total1 = -1;
  CHECK_OK(store_link_denied_total(s, &total0, &err));
  CHECK_OK(store_link_denied(s, l.id, &err));
  CHECK_OK(store_link_denied(s, l.id, &err));
  CHECK_OK(store_link_denied(s, "lnosuch", &err));
  CHECK_OK(store_link_denied(s, NULL, &err));
  CHECK_OK(store_link_get(s, t1, l.id, &g, &err));
  CHECK(g.denied == 2 && g.denied_last_ms > 0);
  store_link_free(&g);
  CHECK_OK(store_link_denied_total(s, &total1, &err));
  CHECK(total1 == total0 + 2);
  /* The cap, without waiting for the disk 10000 times. */
  int (*saved)(int) = db_fdatasync;
  db_fdatasync = no_sync;
  for (int i = 0; i < STORE_LINK_LOG_MAX + 5; i++)
    if (store_link_record(s, l.id, "10.0.0.2", "ua", 200, &err) < 0)
      break;
  db_fdatasync = saved;
  int n = 0;
  CHECK_OK(store_link_log(s, t1, l.id, 0, 1000, count_cb, &n, &err));
  CHECK(n == 1000);
  /* Count all rows directly: at most the cap. */
  sqlite3 *db = NULL;
  char path[128];
  snprintf(path, sizeof path, "%s/husk.db", dir);
  CHECK(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
  sqlite3_stmt *q = NULL;
  CHECK(sqlite3_prepare_v2(db, "SELECT count(*) FROM link_access WHERE link_id = ?", -1, &q,
                           NULL) == SQLITE_OK);
  sqlite3_bind_text(q, 1, l.id, -1, SQLITE_STATIC);
  CHECK(sqlite3_step(q) == SQLITE_ROW);
  CHECK(sqlite3_column_int64(q, 0) == STORE_LINK_LOG_MAX);
  sqlite3_finalize(q);
  sqlite3_close(db);
  store_link_free(&l);
  CHECK_OK(store_object_delete(s, t1, "bkt", "cap.txt", &err));
}

/* A sparse file is refused before it is read; a dense one bounded. */
TEST(sparse_files) {
  struct husk_err err;
  char p[160];
  snprintf(p, sizeof p, "%s/sparse", dir);
  int fd = open(p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  CHECK(fd >= 0);
  CHECK(ftruncate(fd, (off_t)5 << 30) == 0);
  uint64_t size = 0, bound = 0;
  CHECK_ERR(store_fd_bound(fd, &size, &bound, &err), STORE_ESPARSE);
  struct store_object o;
  CHECK_ERR(store_put_fd(s, t1, "bkt", "sparse", fd, NULL, NULL, &o, &err), STORE_ESPARSE);
  CHECK(count_files("tmp") == 0);
  CHECK(ftruncate(fd, 0) == 0 && write(fd, "dense", 5) == 5 && lseek(fd, 0, SEEK_SET) == 0);
  CHECK_OK(store_fd_bound(fd, &size, &bound, &err));
  CHECK(size == 5 && bound >= 5);
  CHECK_OK(store_put_fd(s, t1, "bkt", "dense", fd, NULL, NULL, &o, &err));
  CHECK(o.size == 5);
  store_object_free(&o);
  close(fd);
  unlink(p);
  CHECK_OK(store_object_delete(s, t1, "bkt", "dense", &err));
}

/* Under a deferred sync (an API request), the file a commit replaced is
 * removed only once that commit is on disk. */
static int syncs;
static int counting_sync(int fd) {
  syncs++;
  return fdatasync(fd);
}
TEST(unlink_after_durable_commit) {
  struct husk_err err;
  int (*saved)(int) = db_fdatasync;
  db_fdatasync = counting_sync;
  state_defer_begin(st);
  CHECK(put(t1, "bkt", "twice", "one") == 0);
  syncs = 0;
  CHECK(put(t1, "bkt", "twice", "two") == 0); /* replaces (and unlinks) the first file */
  CHECK(syncs >= 1);
  CHECK_OK(state_defer_end(st, &err));
  db_fdatasync = saved;
  CHECK_OK(store_object_delete(s, t1, "bkt", "twice", &err));
}

/* A child publishes an object file and is killed before the commit: the
 * object is absent, and the next open removes the orphaned file. */
static void kill_hook(const char *point) {
  if (!strcmp(point, "object_upsert"))
    kill(getpid(), SIGKILL);
}

TEST(sigkill_between_file_and_row) {
  struct husk_err err;
  CHECK(put(t1, "bkt", "crash", "old") == 0);
  int files = count_files("objects");
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    state_fault_hook = kill_hook;
    put(t1, "bkt", "crash", "new version");
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  CHECK(count_files("objects") == files + 1); /* the orphan */
  close_all();
  open_all();
  CHECK(count_files("objects") == files);
  struct store_object o;
  int fd = -1;
  CHECK_OK(store_object_get(s, t1, "bkt", "crash", &o, &fd, &err));
  char buf[16] = "";
  CHECK(read(fd, buf, sizeof buf) == 3 && !memcmp(buf, "old", 3));
  CHECK_STR(o.etag, "149603e6c03516362a8da23f624db945"); /* md5("old") */
  close(fd);
  store_object_free(&o);
}

TEST(quota) {
  struct husk_err err;
  close_all();
  quota = 100;
  open_all();
  char q60[61], q80[81];
  memset(q60, 'q', 60);
  q60[60] = 0;
  memset(q80, 'q', 80);
  q80[80] = 0;
  CHECK_OK(store_bucket_create(s, t2, "quota", &err));
  CHECK(put(t2, "quota", "a", q60) == 0);
  CHECK(put(t2, "quota", "b", q60) == -1);
  struct store_object o;
  CHECK_ERR(store_put_buffer(s, t2, "quota", "b", q60, 60, NULL, NULL, &o, &err), STORE_EQUOTA);
  CHECK(count_files("tmp") == 0);
  CHECK(put(t2, "quota", "a", q80) == 0); /* the old version is freed */
  CHECK_ERR(store_quota_check(s, t2, NULL, NULL, 21, &err), STORE_EQUOTA);
  CHECK_OK(store_quota_check(s, t2, NULL, NULL, 20, &err));
  CHECK_OK(store_quota_check(s, t2, "quota", "a", 100, &err)); /* replacing "a" */
  uint64_t used = 0;
  CHECK_OK(store_usage(s, t2, &used, &err));
  CHECK(used == 80);
  /* Parts count too. */
  char up[STORE_ID_SIZE];
  CHECK_OK(store_upload_create(s, t2, "quota", "mp", NULL, NULL, up, &err));
  CHECK_ERR(store_part_commit(part_writer(q60, 60), t2, "quota", "mp", up, 1, &err), STORE_EQUOTA);
  CHECK_OK(store_part_commit(part_writer(q60, 20), t2, "quota", "mp", up, 1, &err));
  CHECK_OK(store_usage(s, t2, &used, &err));
  CHECK(used == 100);
  /* Completing turns the parts into the object: no double count. */
  struct store_part p = {.num = 1};
  char m[33];
  md5hex(q60, 20, m);
  snprintf(p.etag, sizeof p.etag, "%s", m);
  CHECK_OK(store_upload_complete(s, t2, "quota", "mp", up, &p, 1, NULL, &o, &err));
  store_object_free(&o);
  CHECK_OK(store_usage(s, t2, &used, &err));
  CHECK(used == 100);
  /* Another tenant is not affected. */
  CHECK(put(t1, "bkt", "big-for-t1", q80) == 0);
  CHECK_OK(store_object_delete(s, t1, "bkt", "big-for-t1", &err));
  close_all();
  quota = 0;
  open_all();
}

/* Who wrote an object and made a link: each write records its own writer
 * (a copy its copier, a multipart object who completed it, a new version
 * its new writer); a malformed one stores nothing; the listing filters on
 * it. */
static int creators_cb(void *ctx, const struct store_entry *e) {
  struct acc *a = ctx;
  size_t n = strlen(a->buf);
  snprintf(a->buf + n, sizeof a->buf - n, "%s%s=%s", n ? " " : "", e->key,
           e->created_by[0] ? e->created_by : "-");
  return 0;
}

TEST(writers) {
  struct husk_err err;
  const char *alice = "u_0123456789abcdef01234567", *key = "key:k_1", *s3 = "s3key:HKABC";
  CHECK_OK(store_bucket_create(s, t1, "who", &err));
  struct store_object o;
  CHECK_OK(store_put_buffer(s, t1, "who", "a", "1", 1, NULL, alice, &o, &err));
  CHECK_STR(o.created_by, alice);
  store_object_free(&o);
  CHECK_OK(store_put_buffer(s, t1, "who", "b", "2", 1, NULL, NULL, &o, &err));
  CHECK_STR(o.created_by, "");
  store_object_free(&o);
  CHECK_OK(store_object_copy(s, t1, "who", "a", "who", "c", NULL, NULL, s3, &o, &err));
  CHECK_STR(o.created_by, s3);
  store_object_free(&o);
  char up[STORE_ID_SIZE], m[33];
  CHECK_OK(store_upload_create(s, t1, "who", "d", NULL, NULL, up, &err));
  CHECK_OK(store_part_commit(part_writer("x", 1), t1, "who", "d", up, 1, &err));
  md5hex("x", 1, m);
  struct store_part p = {.num = 1};
  snprintf(p.etag, sizeof p.etag, "%s", m);
  CHECK_OK(store_upload_complete(s, t1, "who", "d", up, &p, 1, key, &o, &err));
  CHECK_STR(o.created_by, key);
  store_object_free(&o);
  /* A new version of b: its writer now. */
  CHECK_OK(store_put_buffer(s, t1, "who", "b", "3", 1, NULL, key, &o, &err));
  store_object_free(&o);
  CHECK_OK(store_object_get(s, t1, "who", "b", &o, NULL, &err));
  CHECK_STR(o.created_by, key);
  store_object_free(&o);
  /* Malformed: nothing stored, no file left. */
  int before = count_files("objects");
  CHECK_ERR(store_put_buffer(s, t1, "who", "e", "4", 1, NULL, "key:a b", &o, &err), EINVAL);
  CHECK_ERR(store_put_buffer(s, t1, "who", "b", "4", 1, NULL, "nobody", &o, &err), EINVAL);
  CHECK(count_files("objects") == before && count_files("tmp") == 0);
  CHECK_ERR(store_object_get(s, t1, "who", "e", &o, NULL, &err), STORE_ENOKEY);
  CHECK_OK(store_object_get(s, t1, "who", "b", &o, NULL, &err));
  CHECK_STR(o.created_by, key);
  store_object_free(&o);

  struct acc a = {""};
  bool trunc = false;
  char *next = NULL;
  struct store_list_req rq = {.prefix = "", .max_keys = 100};
  CHECK_OK(store_list(s, t1, "who", &rq, creators_cb, &a, &trunc, &next, &err));
  char want[256];
  snprintf(want, sizeof want, "a=%s b=%s c=%s d=%s", alice, key, s3, key);
  CHECK_STR(a.buf, want);
  a.buf[0] = '\0';
  rq.created_by = key;
  rq.max_keys = 1; /* pages of one: the filter holds across them */
  CHECK_OK(store_list(s, t1, "who", &rq, creators_cb, &a, &trunc, &next, &err));
  CHECK(trunc && next && !strcmp(next, "b"));
  rq.after = next;
  CHECK_OK(store_list(s, t1, "who", &rq, creators_cb, &a, &trunc, &next, &err));
  free((char *)rq.after);
  snprintf(want, sizeof want, "b=%s d=%s", key, key);
  CHECK_STR(a.buf, want);
  free(next);
  next = NULL;
  rq = (struct store_list_req){.prefix = "", .max_keys = 10, .created_by = ""};
  CHECK_ERR(store_list(s, t1, "who", &rq, creators_cb, &a, &trunc, &next, &err), EINVAL);

  /* Links. */
  struct store_link l;
  CHECK_OK(store_link_create(s, t1, "who", "a", 60, NULL, false, alice, &l, &err));
  CHECK_STR(l.created_by, alice);
  char id[STORE_ID_SIZE];
  snprintf(id, sizeof id, "%s", l.id);
  store_link_free(&l);
  CHECK_OK(store_link_get(s, t1, id, &l, &err));
  CHECK_STR(l.created_by, alice);
  store_link_free(&l);
  CHECK_ERR(store_link_create(s, t1, "who", "a", 60, NULL, false, "u_1", &l, &err), EINVAL);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/husk-store-XXXXXX");
  if (!mkdtemp(dir))
    return 2;
  chmod(dir, 0700);
  open_all();
  struct husk_err err;
  struct state_tenant a, b;
  if (state_tenant_create(st, "one", -1, -1, &a, &err) < 0 ||
      state_tenant_create(st, "two", -1, -1, &b, &err) < 0) {
    printf("# %s\n", err.msg);
    return 2;
  }
  snprintf(t1, sizeof t1, "%s", a.id);
  snprintf(t2, sizeof t2, "%s", b.id);
  RUN(crc64nvme);
  RUN(buckets);
  RUN(objects_and_isolation);
  RUN(listing);
  RUN(multipart);
  RUN(keys_are_sealed);
  RUN(links);
  RUN(link_counts_and_log_cap);
  RUN(sparse_files);
  RUN(unlink_after_durable_commit);
  RUN(sigkill_between_file_and_row);
  RUN(quota);
  RUN(writers);
  close_all();
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0)
    printf("# could not remove %s\n", dir);
  return unit_done();
}
