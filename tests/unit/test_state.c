/* The state plane: schema and migrations, tenants, keys, boxes, processes,
 * audit; tenant isolation; hostile input; 8 threads at once; and crashes
 * (SIGKILL at chosen points inside transactions, and at random moments). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "state/db.h"
#include "state/egress_state.h"
#include "state/preview_state.h"
#include "state/snapshot_state.h"
#include "state/state.h"
#include "state/store_state.h"
#include "state/upload_link_state.h"
#include "state/volume_state.h"
#include "unit.h"

/* Run `expr`, expect -1 with err.code == `code`. */
#define CHECK_ERR(expr, want)                                                                     \
  do {                                                                                            \
    husk_err_clear(&err);                                                                         \
    int r_ = (expr);                                                                              \
    if (r_ != -1 || err.code != (want)) {                                                         \
      printf("#   %s:%d: %s: got %d, code %d (%s), want code %d\n", __FILE__, __LINE__, #expr,   \
             r_, err.code, err.msg, (want));                                                      \
      unit_cur_failed = 1;                                                                        \
    }                                                                                             \
  } while (0)
/* Run `expr`, expect 0. */
#define CHECK_OK(expr)                                                                            \
  do {                                                                                            \
    husk_err_clear(&err);                                                                         \
    int r_ = (expr);                                                                              \
    if (r_ != 0) {                                                                                \
      printf("#   %s:%d: %s: got %d: %s\n", __FILE__, __LINE__, #expr, r_, err.msg);             \
      unit_cur_failed = 1;                                                                        \
    }                                                                                             \
  } while (0)

/* ---- fixtures ---- */

static char dir[64];
static char dbpath[128];

static void fresh_dir(void) {
  snprintf(dir, sizeof dir, "/tmp/husk-state-XXXXXX");
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    exit(2);
  }
  snprintf(dbpath, sizeof dbpath, "%s/husk.db", dir);
}

static void remove_dir(void) {
  DIR *d = opendir(dir);
  if (!d)
    return;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
      unlinkat(dirfd(d), e->d_name, 0);
  closedir(d);
  rmdir(dir);
}

static struct state *open_fresh(void) {
  fresh_dir();
  struct state *st = NULL;
  struct husk_err err = {0};
  if (state_open(&st, dbpath, &err) < 0) {
    printf("# state_open: %s\n", err.msg);
    exit(2);
  }
  return st;
}

static void close_and_remove(struct state *st) {
  state_close(st);
  remove_dir();
}

static struct state_tenant mk_tenant(struct state *st, const char *name, int64_t max_boxes,
                                     int64_t max_memory) {
  struct state_tenant t = {0};
  struct husk_err err = {0};
  if (state_tenant_create(st, name, max_boxes, max_memory, &t, &err) < 0) {
    printf("# tenant_create: %s\n", err.msg);
    unit_cur_failed = 1;
  }
  return t;
}

static struct state_box box_template(const char *tenant_id, const char *id) {
  struct state_box b = {.memory = 100, .pids = 64, .cpu_milli = 1000, .disk = 1 << 20,
                        .timeout_ms = 60000, .uid_base = -1, .slot = -1};
  snprintf(b.id, sizeof b.id, "%s", id);
  snprintf(b.tenant_id, sizeof b.tenant_id, "%s", tenant_id);
  snprintf(b.state, sizeof b.state, "%s", STATE_BOX_CREATING);
  return b;
}

static int mk_box(struct state *st, const char *tenant_id, const char *id, int64_t created_ms,
                  const char *meta, struct husk_err *err) {
  struct state_box b = box_template(tenant_id, id);
  b.created_ms = created_ms;
  b.metadata_json = (char *)meta;
  return state_box_insert(st, &b, err);
}

/* A second, raw connection to look at the file behind the API's back. */
static sqlite3 *raw_open(const char *path) {
  sqlite3 *db = NULL;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
    printf("# raw open: %s\n", db ? sqlite3_errmsg(db) : "?");
    exit(2);
  }
  sqlite3_busy_timeout(db, 5000);
  return db;
}

static int64_t raw_int(sqlite3 *db, const char *sql) {
  sqlite3_stmt *s = NULL;
  int64_t v = INT64_MIN;
  if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
    v = sqlite3_column_int64(s, 0);
  else
    printf("# raw `%s`: %s\n", sql, sqlite3_errmsg(db));
  sqlite3_finalize(s);
  return v;
}

static int64_t raw_rows(sqlite3 *db, const char *sql) {
  sqlite3_stmt *s = NULL;
  int64_t n = 0;
  if (sqlite3_prepare_v2(db, sql, -1, &s, NULL) != SQLITE_OK)
    return -1;
  while (sqlite3_step(s) == SQLITE_ROW)
    n++;
  sqlite3_finalize(s);
  return n;
}

static int raw_exec(sqlite3 *db, const char *sql) {
  return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

/* ---- collectors for listings ---- */

struct ids {
  char v[256][STATE_BOX_ID_SIZE];
  int64_t created[256];
  int n;
};

static int collect_box(void *ctx, const struct state_box *b) {
  struct ids *ids = ctx;
  if (ids->n < 256) {
    snprintf(ids->v[ids->n], sizeof ids->v[0], "%s", b->id);
    ids->created[ids->n] = b->created_ms;
    ids->n++;
  }
  return 0;
}

static bool ids_has(const struct ids *ids, const char *id) {
  for (int i = 0; i < ids->n; i++)
    if (!strcmp(ids->v[i], id))
      return true;
  return false;
}

static int list_boxes(struct state *st, const struct state_box_filter *f, struct ids *out,
                      char *next, struct husk_err *err) {
  memset(out, 0, sizeof *out);
  return state_box_list(st, f, collect_box, out, next, STATE_CURSOR_SIZE, err);
}

/* ---- schema, open, files ---- */

TEST(fresh_file_is_migrated) {
  struct husk_err err = {0};
  struct state *st = open_fresh();
  int v = -1;
  CHECK_OK(state_schema_version(st, &v, &err));
  CHECK(v == state_schema_latest());
  struct stat sb;
  CHECK(stat(dbpath, &sb) == 0 && (sb.st_mode & 0777) == 0600);
  sqlite3 *db = raw_open(dbpath);
  CHECK(raw_int(db, "PRAGMA application_id") == 0x6875736b);
  CHECK(raw_int(db, "PRAGMA user_version") == state_schema_latest());
  CHECK(raw_int(db, "SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name IN "
                    "('tenants','api_keys','boxes','processes','audit')") == 5);
  sqlite3_stmt *s = NULL;
  sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, NULL);
  CHECK(sqlite3_step(s) == SQLITE_ROW && !strcmp((const char *)sqlite3_column_text(s, 0), "wal"));
  sqlite3_finalize(s);
  sqlite3_close(db);
  /* The WAL file inherits the database's mode. */
  char wal[160];
  snprintf(wal, sizeof wal, "%s-wal", dbpath);
  CHECK(stat(wal, &sb) == 0 && (sb.st_mode & 0777) == 0600);
  close_and_remove(st);
}

/* One SELECT through db_prepare, as the state files do; its first column. */
static int64_t cached_select(struct state *st, const char *sql) {
  struct husk_err err;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s, sql, &err) < 0 || db_step_row(st, s, "select", &err) != 1)
    return -1;
  return sqlite3_column_int64(s, 0);
}

TEST(prepared_statements_are_reused_never_mixed_up) {
  struct husk_err err = {0};
  struct state *st = open_fresh();
  struct state_tenant t;
  CHECK_OK(state_tenant_create(st, "cache-a", -1, -1, &t, &err));
  unsigned after_one = st->ncache;
  CHECK(after_one > 0);
  CHECK_OK(state_tenant_create(st, "cache-b", -1, -1, &t, &err));
  CHECK(st->ncache == after_one); /* the same statements, not new ones */
  for (unsigned i = 0; i < st->ncache; i++)
    CHECK(!st->cache[i].busy); /* all handed back */
  /* The key is the text, not where it lives: one buffer, two queries. */
  char sql[64];
  snprintf(sql, sizeof sql, "SELECT 41");
  CHECK(cached_select(st, sql) == 41);
  snprintf(sql, sizeof sql, "SELECT 42");
  CHECK(cached_select(st, sql) == 42);
  snprintf(sql, sizeof sql, "SELECT 41");
  CHECK(cached_select(st, sql) == 41);
  /* Two uses of one text at once get two statements. */
  {
    cleanup_unlock struct state *locked = db_lock(st);
    cleanup_stmt sqlite3_stmt *a = NULL;
    cleanup_stmt sqlite3_stmt *b = NULL;
    CHECK_OK(db_prepare(st, &a, "SELECT ?1", &err));
    CHECK_OK(db_prepare(st, &b, "SELECT ?1", &err));
    CHECK(a && b && a != b);
    CHECK(db_int(a, 1, 7) == SQLITE_OK && db_int(b, 1, 8) == SQLITE_OK);
    CHECK(db_step_row(st, a, "a", &err) == 1 && sqlite3_column_int(a, 0) == 7);
    CHECK(db_step_row(st, b, "b", &err) == 1 && sqlite3_column_int(b, 0) == 8);
  }
  /* A released statement comes back reset, its bindings cleared. */
  {
    cleanup_unlock struct state *locked = db_lock(st);
    cleanup_stmt sqlite3_stmt *a = NULL;
    CHECK_OK(db_prepare(st, &a, "SELECT ?1", &err));
    CHECK(db_step_row(st, a, "a", &err) == 1 && sqlite3_column_type(a, 0) == SQLITE_NULL);
  }
  /* Released after its lock (not how the state files do it): it still
   * goes back to its cache rather than being freed under it. */
  unsigned n = st->ncache;
  {
    sqlite3_stmt *late = NULL;
    struct state *locked = db_lock(st);
    CHECK_OK(db_prepare(st, &late, "SELECT 43", &err));
    db_unlockp(&locked);
    db_releasep(&late);
    CHECK(late == NULL);
  }
  CHECK(st->ncache == n + 1);
  CHECK(cached_select(st, "SELECT 43") == 43);
  CHECK(st->ncache == n + 1);
  /* Two states locked at once, released out of order: no deadlock, and
   * each statement goes back to its own cache. */
  {
    char path2[160]; /* in the fixture's directory: close_and_remove takes it */
    snprintf(path2, sizeof path2, "%s/second.db", dir);
    struct state *st2 = NULL;
    CHECK_OK(state_open(&st2, path2, &err));
    struct state *la = db_lock(st), *lb = db_lock(st2);
    sqlite3_stmt *sa = NULL, *sb = NULL;
    CHECK_OK(db_prepare(st, &sa, "SELECT 46", &err));
    CHECK_OK(db_prepare(st2, &sb, "SELECT 47", &err));
    db_releasep(&sa); /* st's, while st2 is the innermost lock */
    db_unlockp(&lb);
    db_releasep(&sb); /* st2's, after its lock */
    db_unlockp(&la);
    CHECK(sa == NULL && sb == NULL);
    CHECK(cached_select(st, "SELECT 46") == 46 && cached_select(st2, "SELECT 47") == 47);
    for (unsigned i = 0; i < st2->ncache; i++)
      CHECK(!st2->cache[i].busy);
    state_close(st2);
  }
  n = st->ncache;
  /* Without the lock nothing is cached (and nothing breaks). */
  {
    cleanup_stmt sqlite3_stmt *u = NULL;
    CHECK_OK(db_prepare(st, &u, "SELECT 44", &err));
    CHECK(db_step_row(st, u, "u", &err) == 1 && sqlite3_column_int(u, 0) == 44);
  }
  CHECK(st->ncache == n);
  /* More texts than the cache holds: the least recently used make room,
   * and a statement in use is never the one evicted. */
  {
    cleanup_unlock struct state *locked = db_lock(st);
    cleanup_stmt sqlite3_stmt *held_long = NULL;
    CHECK_OK(db_prepare(st, &held_long, "SELECT 45", &err));
    for (int i = 0; i < DB_STMT_CACHE + 10; i++) {
      snprintf(sql, sizeof sql, "SELECT %d", 1000 + i);
      cleanup_stmt sqlite3_stmt *s = NULL;
      CHECK_OK(db_prepare(st, &s, sql, &err));
      CHECK(db_step_row(st, s, "s", &err) == 1 && sqlite3_column_int(s, 0) == 1000 + i);
    }
    CHECK(st->ncache == DB_STMT_CACHE);
    CHECK(db_step_row(st, held_long, "held", &err) == 1 && sqlite3_column_int(held_long, 0) == 45);
    bool last_kept = false, first_gone = true;
    for (unsigned i = 0; i < st->ncache; i++) {
      if (!strcmp(sqlite3_sql(st->cache[i].s), "SELECT 1073"))
        last_kept = true;
      if (!strcmp(sqlite3_sql(st->cache[i].s), "SELECT 1000"))
        first_gone = false;
    }
    CHECK(last_kept && first_gone);
  }
  close_and_remove(st); /* finalizes the cache (ASan: no leak) */
}

TEST(existing_file_keeps_data_and_version) {
  struct husk_err err = {0};
  struct state *st = open_fresh();
  struct state_tenant t = mk_tenant(st, "acme", 5, 1 << 30);
  char key[STATE_KEY_SIZE];
  struct state_key k;
  CHECK_OK(state_key_create(st, t.id, key, sizeof key, &k, &err));
  CHECK_OK(mk_box(st, t.id, "b_keep", 0, "{\"owner\":\"me\"}", &err));
  state_close(st);

  for (int round = 0; round < 2; round++) { /* reopening twice migrates nothing */
    CHECK_OK(state_open(&st, dbpath, &err));
    int v = -1;
    CHECK_OK(state_schema_version(st, &v, &err));
    CHECK(v == state_schema_latest());
    struct state_tenant t2;
    CHECK_OK(state_tenant_get(st, t.id, &t2, &err));
    CHECK_STR(t2.name, "acme");
    CHECK(t2.max_boxes == 5 && t2.max_memory == 1 << 30 && t2.created_ms == t.created_ms);
    struct state_key k2;
    CHECK_OK(state_key_authenticate(st, key, &k2, &err));
    CHECK_STR(k2.id, k.id);
    struct state_box b;
    CHECK_OK(state_box_get(st, t.id, "b_keep", &b, &err));
    CHECK_STR(b.metadata_json, "{\"owner\":\"me\"}");
    state_box_free(&b);
    state_close(st);
  }
  remove_dir();
}

TEST(refuses_files_that_are_not_husk_databases) {
  struct husk_err err = {0};
  struct state *st = NULL;
  fresh_dir();

  /* Another application's SQLite database. */
  sqlite3 *db = NULL;
  sqlite3_open(dbpath, &db);
  CHECK(raw_exec(db, "CREATE TABLE notes (x TEXT)") == SQLITE_OK);
  sqlite3_close(db);
  CHECK_ERR(state_open(&st, dbpath, &err), EINVAL);
  CHECK(st == NULL);
  db = raw_open(dbpath);
  CHECK(raw_int(db, "SELECT count(*) FROM sqlite_schema") == 1); /* untouched */
  sqlite3_close(db);
  unlink(dbpath);

  /* Not SQLite at all. */
  FILE *f = fopen(dbpath, "w");
  for (int i = 0; i < 200; i++)
    fputs("this is not a database, just text. ", f);
  fclose(f);
  CHECK_ERR(state_open(&st, dbpath, &err), EINVAL);
  unlink(dbpath);

  /* A husk database from the future. */
  CHECK_OK(state_open(&st, dbpath, &err));
  state_close(st);
  db = raw_open(dbpath);
  CHECK(raw_exec(db, "PRAGMA user_version = 99") == SQLITE_OK);
  sqlite3_close(db);
  CHECK_ERR(state_open(&st, dbpath, &err), ENOTSUP);
  CHECK(strstr(err.msg, "newer") != NULL);
  remove_dir();

  /* A symlink planted where the database should be. */
  fresh_dir();
  char target[160];
  snprintf(target, sizeof target, "%s/elsewhere", dir);
  CHECK(symlink(target, dbpath) == 0);
  CHECK_ERR(state_open(&st, dbpath, &err), ELOOP);
  CHECK(access(target, F_OK) != 0); /* nothing created through it */
  remove_dir();

  CHECK_ERR(state_open(&st, "", &err), EINVAL);
  CHECK_ERR(state_open(&st, "/nonexistent-dir/husk.db", &err), ENOENT);
}

/* Boxes are forked from the daemon: no database descriptor may leak into
 * them through exec. */
TEST(database_fds_are_close_on_exec) {
  struct husk_err err = {0};
  struct state *st = open_fresh();
  struct state_tenant t = mk_tenant(st, "fds", -1, -1);
  CHECK_OK(mk_box(st, t.id, "b_fd", 0, NULL, &err)); /* WAL and shm now open */
  DIR *d = opendir("/proc/self/fd");
  struct dirent *e;
  int seen = 0;
  while ((e = readdir(d))) {
    int fd = atoi(e->d_name);
    char link[300], target[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%s", e->d_name);
    ssize_t n = readlink(link, target, sizeof target - 1);
    if (n <= 0)
      continue;
    target[n] = '\0';
    if (strncmp(target, dir, strlen(dir)) != 0)
      continue;
    seen++;
    int flags = fcntl(fd, F_GETFD);
    if (!(flags & FD_CLOEXEC)) {
      printf("#   fd %d -> %s is not close-on-exec\n", fd, target);
      unit_cur_failed = 1;
    }
  }
  closedir(d);
  CHECK(seen >= 2); /* the database and its WAL at least */
  close_and_remove(st);
}

/* ---- ids and input checks ---- */

TEST(new_ids_are_random_and_well_formed) {
  struct husk_err err = {0};
  char a[40], b[40];
  CHECK_OK(state_new_id("b_", a, sizeof a, &err));
  CHECK_OK(state_new_id("b_", b, sizeof b, &err));
  CHECK(strlen(a) == 26 && !strncmp(a, "b_", 2) && strcmp(a, b) != 0);
  CHECK(strspn(a + 2, "0123456789abcdef") == 24);
  char small[26];
  CHECK_ERR(state_new_id("b_", small, sizeof small, &err), EINVAL);
  CHECK_ERR(state_new_id("b/", a, sizeof a, &err), EINVAL);
}

TEST(utf8_validation) {
  CHECK(utf8_valid("plain", 5));
  CHECK(utf8_valid("\xe2\x82\xac", 3));          /* euro sign */
  CHECK(utf8_valid("\xf0\x9f\x98\x80", 4));      /* emoji */
  CHECK(!utf8_valid("\xc0\xaf", 2));             /* overlong '/' */
  CHECK(!utf8_valid("\xe0\x80\xaf", 3));         /* overlong */
  CHECK(!utf8_valid("\xed\xa0\x80", 3));         /* surrogate */
  CHECK(!utf8_valid("\xf4\x90\x80\x80", 4));     /* above U+10FFFF */
  CHECK(!utf8_valid("\xe2\x82", 2));             /* truncated */
  CHECK(!utf8_valid("\xff", 1));
  char s[] = "a\nb\x1b[31m\xff\xe2\x82\xac";
  sanitize_text(s);
  CHECK_STR(s, "a?b?[31m?\xe2\x82\xac");
}

/* ---- tenants ---- */

static int collect_tenant_names(void *ctx, const struct state_tenant *t) {
  char *out = ctx;
  strcat(out, t->name);
  strcat(out, ",");
  return 0;
}

TEST(tenant_lifecycle) {
  struct husk_err err = {0};
  struct state *st = open_fresh();
  struct state_tenant a, b, got;
  CHECK_OK(state_tenant_create(st, "alpha", 3, 1000, &a, &err));
  CHECK(!strncmp(a.id, "t_", 2) && strlen(a.id) == 26);
  CHECK(a.created_ms > 0);
  struct timespec ms2 = {0, 2000000}; /* listing is oldest first: make "oldest" certain */
  nanosleep(&ms2, NULL);
  CHECK_OK(state_tenant_create(st, "beta", STATE_UNLIMITED, STATE_UNLIMITED, &b, &err));
  CHECK_ERR(state_tenant_create(st, "alpha", 1, 1, NULL, &err), EEXIST);

  CHECK_OK(state_tenant_get(st, a.id, &got, &err));
  CHECK_STR(got.name, "alpha");
  CHECK(got.max_boxes == 3 && got.max_memory == 1000);
  CHECK_OK(state_tenant_set_quota(st, a.id, 7, STATE_UNLIMITED, &err));
  CHECK_OK(state_tenant_get(st, a.id, &got, &err));
  CHECK(got.max_boxes == 7 && got.max_memory == STATE_UNLIMITED);

  CHECK_ERR(state_tenant_get(st, "t_000000000000000000000000", &got, &err), ENOENT);
  CHECK_ERR(state_tenant_set_quota(st, "t_nope", 1, 1, &err), ENOENT);
  CHECK_ERR(state_tenant_set_quota(st, a.id, -2, 1, &err), EINVAL);
  CHECK_ERR(state_tenant_create(st, "neg", 1, -5, NULL, &err), EINVAL);

  char names[256] = "";
  CHECK_OK(state_tenant_list(st, collect_tenant_names, names, &err));
  CHECK_STR(names, "alpha,beta,");
  close_and_remove(st);
}

TEST(tenant_input_is_checked_not_cut) {
  struct husk_err err = {0};
  struct state *st = open_fresh();
  struct state_tenant t, got;
  char name[200];
  memset(name, 'n', sizeof name);
  name[127] = '\0';
  CHECK_OK(state_tenant_create(st, name, 1, 1, &t, &err)); /* 127 bytes: fits */
  name[127] = 'n';
  name[128] = '\0';
  CHECK_ERR(state_tenant_create(st, name, 1, 1, NULL, &err), EINVAL); /* 128: refused */
  CHECK_ERR(state_tenant_create(st, "", 1, 1, NULL, &err), EINVAL);
  CHECK_ERR(state_tenant_create(st, NULL, 1, 1, NULL, &err), EINVAL);
  CHECK_ERR(state_tenant_create(st, "two\nlines", 1, 1, NULL, &err), EINVAL);
  CHECK_ERR(state_tenant_create(st, "bad\xc0\xafutf8", 1, 1, NULL, &err), EINVAL);
  CHECK(strstr(err.msg, "\xc0") == NULL); /* never echoed */
  CHECK_OK(state_tenant_create(st, "caf\xc3\xa9 \xf0\x9f\x98\x80", 1, 1, NULL, &err));

  /* SQL in a value is just text. */
  const char *evil = "x'); DROP TABLE tenants; --";
  CHECK_OK(state_tenant_create(st, evil, 1, 1, &t, &err));
  CHECK_OK(state_tenant_get(st, t.id, &got, &err));
  CHECK_STR(got.name, evil);

  /* An id one byte too long is refused, not cut to a different id. */
  char long_id[64];
  snprintf(long_id, sizeof long_id, "%sX", t.id); /* 27 bytes: fits 32 */
  CHECK_ERR(state_tenant_get(st, long_id, &got, &err), ENOENT);
  memset(long_id, 'a', 32);
  long_id[32] = '\0';
  CHECK_ERR(state_tenant_get(st, long_id, &got, &err), EINVAL);
  CHECK_ERR(state_tenant_get(st, "t_1 OR 1=1", &got, &err), EINVAL);
  CHECK_ERR(state_tenant_get(st, "", &got, &err), EINVAL);
  CHECK_ERR(state_tenant_get(st, NULL, &got, &err), EINVAL);
  close_and_remove(st);
}

/* ---- keys ---- */

static bool file_contains(const char *path, const void *needle, size_t n) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return false;
  static char buf[1 << 22];
  size_t len = fread(buf, 1, sizeof buf, f);
  fclose(f);
  return memmem(buf, len, needle, n) != NULL;
}

static int count_keys(void *ctx, const struct state_key *k) {
  (*(int *)ctx)++;
  return 0;
}

TEST(key_lifecycle_and_authentication) {
  struct husk_err err = {0};
  struct state *st = open_fresh();
  struct state_tenant a = mk_tenant(st, "a", -1, -1), b = mk_tenant(st, "b", -1, -1);
  char ka[STATE_KEY_SIZE], ka2[STATE_KEY_SIZE], kb[STATE_KEY_SIZE];
  struct state_key ra, ra2, rb, got;
  CHECK_OK(state_key_create(st, a.id, ka, sizeof ka, &ra, &err));
  CHECK_OK(state_key_create(st, a.id, ka2, sizeof ka2, &ra2, &err));
  CHECK_OK(state_key_create(st, b.id, kb, sizeof kb, &rb, &err));
  CHECK(strlen(ka) == STATE_KEY_LEN && !strncmp(ka, "hk_", 3));
  CHECK(strspn(ka + 3, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_") == 43);
  CHECK(strcmp(ka, ka2) != 0 && strcmp(ra.id, ra2.id) != 0);
  CHECK(!strncmp(ra.id, "k_", 2) && ra.revoked_ms == 0);
  CHECK_STR(ra.tenant_id, a.id);

  /* The right key names its tenant; another tenant's key names that one. */
  CHECK_OK(state_key_authenticate(st, ka, &got, &err));
  CHECK_STR(got.id, ra.id);
  CHECK_STR(got.tenant_id, a.id);
  CHECK_OK(state_key_authenticate(st, kb, &got, &err));
  CHECK_STR(got.tenant_id, b.id);

  /* Wrong, malformed, empty, huge. */
  char wrong[STATE_KEY_SIZE];
  memcpy(wrong, ka, sizeof wrong);
  wrong[10] = wrong[10] == 'A' ? 'B' : 'A';
  CHECK_ERR(state_key_authenticate(st, wrong, &got, &err), EACCES);
  char msg_wrong[HUSK_ERR_MSG_MAX];
  snprintf(msg_wrong, sizeof msg_wrong, "%s", err.msg);
  CHECK(strstr(err.msg, wrong) == NULL);
  CHECK_ERR(state_key_authenticate(st, "", &got, &err), EACCES);
  CHECK_ERR(state_key_authenticate(st, NULL, &got, &err), EACCES);
  CHECK_ERR(state_key_authenticate(st, "hk_", &got, &err), EACCES);
  char trunc[STATE_KEY_SIZE];
  memcpy(trunc, ka, sizeof trunc);
  trunc[STATE_KEY_LEN - 1] = '\0';
  CHECK_ERR(state_key_authenticate(st, trunc, &got, &err), EACCES);
  char longer[STATE_KEY_SIZE + 1];
  snprintf(longer, sizeof longer, "%sA", ka);
  CHECK_ERR(state_key_authenticate(st, longer, &got, &err), EACCES);
  size_t big = 1 << 20;
  char *huge = malloc(big + 1);
  memcpy(huge, ka, STATE_KEY_LEN);
  memset(huge + STATE_KEY_LEN, 'A', big - STATE_KEY_LEN);
  huge[big] = '\0';
  CHECK_ERR(state_key_authenticate(st, huge, &got, &err), EACCES);
  free(huge);
  char badchars[STATE_KEY_SIZE];
  memcpy(badchars, ka, sizeof badchars);
  badchars[20] = '+'; /* standard base64, not base64url */
  CHECK_ERR(state_key_authenticate(st, badchars, &got, &err), EACCES);
  char nul_inside[STATE_KEY_SIZE + 8];
  memcpy(nul_inside, ka, STATE_KEY_SIZE);
  nul_inside[5] = '\0';
  CHECK_ERR(state_key_authenticate(st, nul_inside, &got, &err), EACCES);

  /* Revocation: per tenant; idempotent; the key stops working, others don't. */
  CHECK_ERR(state_key_revoke(st, b.id, ra.id, &err), ENOENT); /* not b's key */
  CHECK_OK(state_key_authenticate(st, ka, &got, &err));
  CHECK_OK(state_key_revoke(st, a.id, ra.id, &err));
  CHECK_ERR(state_key_authenticate(st, ka, &got, &err), EACCES);
  CHECK_STR(err.msg, msg_wrong); /* revoked and unknown look alike */
  CHECK_OK(state_key_authenticate(st, ka2, &got, &err));
  CHECK_OK(state_key_revoke(st, NULL, rb.id, &err)); /* admin: any tenant */
  CHECK_ERR(state_key_authenticate(st, kb, &got, &err), EACCES);
  sqlite3 *db = raw_open(dbpath);
  int64_t first = raw_int(db, "SELECT revoked_ms FROM api_keys WHERE revoked_ms > 0 LIMIT 1");
  struct timespec ms = {0, 2000000};
  nanosleep(&ms, NULL);
  CHECK_OK(state_key_revoke(st, a.id, ra.id, &err)); /* again: fine, time kept */
  CHECK(raw_int(db, "SELECT min(revoked_ms) FROM api_keys WHERE revoked_ms > 0") == first);
  CHECK_ERR(state_key_revoke(st, a.id, "k_unknown", &err), ENOENT);
  CHECK_ERR(state_key_revoke(st, a.id, "k_bad id", &err), EINVAL);

  int n = 0;
  CHECK_OK(state_key_list(st, a.id, count_keys, &n, &err));
  CHECK(n == 2);
  n = 0;
  CHECK_OK(state_key_list(st, NULL, count_keys, &n, &err));
  CHECK(n == 3);

  CHECK_ERR(state_key_create(st, "t_000000000000000000000000", ka, sizeof ka, NULL, &err), ENOENT);
  CHECK_ERR(state_key_create(st, a.id, ka, STATE_KEY_LEN, NULL, &err), EINVAL);

  /* Only hashes are stored: no plaintext anywhere in the files. */
  CHECK(raw_int(db, "SELECT count(*) FROM api_keys WHERE length(hash) = 32") == 3);
  sqlite3_close(db);
  char wal[160];
  snprintf(wal, sizeof wal, "%s-wal", dbpath);
  CHECK(!file_contains(dbpath, ka2, STATE_KEY_LEN) && !file_contains(wal, ka2, STATE_KEY_LEN));
  CHECK(!file_contains(dbpath, ka2 + 3, 43) && !file_contains(wal, ka2 + 3, 43));
  close_and_remove(st);
}

/* ---- boxes ---- */

TEST(box_insert_checks_its_input) {
  struct husk_err err = {0};
  struct state *st = open_fresh();
  struct state_tenant t = mk_tenant(st, "t", -1, -1);
  struct state_box b = box_template(t.id, "b_1");
  CHECK_OK(state_box_insert(st, &b, &err));
  CHECK_ERR(state_box_insert(st, &b, &err), EEXIST);

  b = box_template("t_000000000000000000000000", "b_2");
  CHECK_ERR(state_box_insert(st, &b, &err), ENOENT);

  b = box_template(t.id, "b_2");
  b.id[0] = '/';
  CHECK_ERR(state_box_insert(st, &b, &err), EINVAL);
  b = box_template(t.id, "b_2");
  memset(b.id, 'x', sizeof b.id); /* not terminated */
  CHECK_ERR(state_box_insert(st, &b, &err), EINVAL);
  memset(b.id, 'x', sizeof b.id - 1);
  b.id[sizeof b.id - 1] = '\0'; /* 39 bytes: fits */
  CHECK_OK(state_box_insert(st, &b, &err));

  const char *bad_json[] = {"", "nope", "[1,2]", "\"str\"", "{\"a\":1}", "{\"a\":{\"b\":\"c\"}}",
                            "{\"a\":\"x\"", "{\"a\":\"\xff\"}"};
  for (size_t i = 0; i < sizeof bad_json / sizeof bad_json[0]; i++) {
    b = box_template(t.id, "b_json");
    b.metadata_json = (char *)bad_json[i];
    CHECK_ERR(state_box_insert(st, &b, &err), EINVAL);
    b.metadata_json = NULL;
    b.env_json = (char *)bad_json[i];
    CHECK_ERR(state_box_insert(st, &b, &err), EINVAL);
  }
  char *big = malloc(STATE_JSON_MAX + 64);
  snprintf(big, STATE_JSON_MAX + 64, "{\"k\":\"%0*d\"}", STATE_JSON_MAX, 0);
  b = box_template(t.id, "b_json");
  b.env_json = big;
  CHECK_ERR(state_box_insert(st, &b, &err), EINVAL);
  free(big);

  b = box_template(t.id, "b_3");
  b.memory = -1;
  CHECK_ERR(state_box_insert(st, &b, &err), EINVAL);
  b = box_template(t.id, "b_3");
  snprintf(b.state, sizeof b.state, "%s", STATE_BOX_STOPPED);
  CHECK_ERR(state_box_insert(st, &b, &err), EINVAL); /* new boxes are live */
  snprintf(b.state, sizeof b.state, "runing");
  CHECK_ERR(state_box_insert(st, &b, &err), EINVAL);
  b = box_template(t.id, "b_3");
  b.init_start_time = (uint64_t)INT64_MAX + 1;
  CHECK_ERR(state_box_insert(st, &b, &err), EINVAL);
  b = box_template(t.id, "b_3");
  memset(b.reason, 'r', sizeof b.reason); /* overflowed by the caller */
  CHECK_ERR(state_box_insert(st, &b, &err), EINVAL);
  b = box_template(t.id, "b_bell");
  snprintf(b.reason, sizeof b.reason, "bell\a");
  CHECK_OK(state_box_insert(st, &b, &err)); /* a reason is sanitized, not refused */
  struct state_box g;
  CHECK_OK(state_box_get(st, t.id, "b_bell", &g, &err));
  CHECK_STR(g.reason, "bell?");
  state_box_free(&g);

  /* Everything round-trips. */
  b = box_template(t.id, "b_full");
  b.env_json = "{\"LANG\":\"C.UTF-8\",\"X\":\"a\\\"b\"}";
  b.metadata_json = "{\"user\":\"\xc3\xa9l\xc3\xa8ve\"}";
  snprintf(b.template_name, sizeof b.template_name, "python");
  b.expires_ms = 123456;
  b.init_pid = 4242;
  b.init_start_time = (uint64_t)INT64_MAX;
  b.uid_base = 0x40000000;
  b.slot = 3;
  snprintf(b.cgroup, sizeof b.cgroup, "husk/box-b_full");
  CHECK_OK(state_box_insert(st, &b, &err));
  CHECK_OK(state_box_get(st, t.id, "b_full", &g, &err));
  CHECK_STR(g.env_json, b.env_json);
  CHECK_STR(g.metadata_json, b.metadata_json);
  CHECK_STR(g.template_name, "python");
  CHECK_STR(g.state, STATE_BOX_CREATING);
  CHECK_STR(g.cgroup, b.cgroup);
  CHECK(g.memory == 100 && g.pids == 64 && g.cpu_milli == 1000 && g.disk == 1 << 20 &&
        g.timeout_ms == 60000);
  CHECK(g.expires_ms == 123456 && g.init_pid == 4242 && g.init_start_time == (uint64_t)INT64_MAX &&
        g.uid_base == 0x40000000 && g.slot == 3 && g.created_ms > 0 && g.ended_ms == 0);
  state_box_free(&g);
  state_box_free(&g); /* idempotent */
  close_and_remove(st);
}

TEST(tenant_isolation) {
  struct husk_err err = {0};
  struct state *st = open_fresh();
  struct state_tenant a = mk_tenant(st, "a", -1, -1), b = mk_tenant(st, "b", -1, -1);
  CHECK_OK(mk_box(st, a.id, "b_of_a", 0, NULL, &err));
  CHECK_OK(mk_box(st, b.id, "b_of_b", 0, NULL, &err));
  struct state_proc p = {.pid = 7, .cmd_json = "[\"sleep\",\"9\"]"};
  snprintf(p.box_id, sizeof p.box_id, "b_of_b");
  CHECK_OK(state_proc_insert(st, &p, &err));

  struct state_box g;
  CHECK_ERR(state_box_get(st, a.id, "b_of_b", &g, &err), ENOENT);
  char msg_other[HUSK_ERR_MSG_MAX], msg_none[HUSK_ERR_MSG_MAX];
  snprintf(msg_other, sizeof msg_other, "%s", err.msg);
  CHECK_ERR(state_box_get(st, a.id, "b_of_x", &g, &err), ENOENT);
  snprintf(msg_none, sizeof msg_none, "%s", err.msg);
  /* Same answer shape for "someone else's" and "nobody's". */
  CHECK(strstr(msg_other, "not found") && strstr(msg_none, "not found"));
  CHECK_OK(state_box_get(st, b.id, "b_of_b", &g, &err));
  state_box_free(&g);
  CHECK_OK(state_box_get(st, NULL, "b_of_b", &g, &err)); /* admin */
  state_box_free(&g);

  struct ids ids;
  struct state_box_filter f = {.tenant_id = a.id};
  CHECK_OK(list_boxes(st, &f, &ids, NULL, &err));
  CHECK(ids.n == 1 && ids_has(&ids, "b_of_a"));
  f.tenant_id = NULL;
  CHECK_OK(list_boxes(st, &f, &ids, NULL, &err));
  CHECK(ids.n == 2);

  struct state_proc gp;
  CHECK_ERR(state_proc_get(st, a.id, "b_of_b", 7, &gp, &err), ENOENT);
  CHECK_ERR(state_proc_list(st, a.id, "b_of_b", 0, 0, NULL, NULL, &err), ENOENT);
  CHECK_OK(state_proc_get(st, b.id, "b_of_b", 7, &gp, &err));
  state_proc_free(&gp);

  CHECK_OK(state_box_set_state(st, "b_of_b", NULL, STATE_BOX_STOPPED, "deleted", 0, &err));
  CHECK_ERR(state_box_delete(st, a.id, "b_of_b", &err), ENOENT);
  CHECK_OK(state_box_get(st, b.id, "b_of_b", &g, &err)); /* still there */
  state_box_free(&g);
  CHECK_OK(state_box_delete(st, b.id, "b_of_b", &err));
  close_and_remove(st);
}

TEST(box_state_changes) {
  struct husk_err err = {0};
  struct state *st = open_fresh();
  struct state_tenant t = mk_tenant(st, "t", -1, -1);
  CHECK_OK(mk_box(st, t.id, "b_s", 0, NULL, &err));
  struct state_box g;

  CHECK_ERR(state_box_set_state(st, "b_s", STATE_BOX_RUNNING, STATE_BOX_STOPPING, NULL, 0, &err),
            ESTALE); /* it is creating, not running */
  CHECK_OK(state_box_set_state(st, "b_s", STATE_BOX_CREATING, STATE_BOX_RUNNING, "", 0, &err));
  CHECK_OK(state_box_set_runtime(st, "b_s", 99, 12345, 0x40010000, 1, "husk/b_s", &err));
  CHECK_OK(state_box_set_runtime(st, "b_s", 100, 12346, 0x40010000, 1, NULL, &err));
  CHECK_OK(state_box_set_expiry(st, "b_s", 5000, &err));
  CHECK_OK(state_box_get(st, NULL, "b_s", &g, &err));
  CHECK_STR(g.state, STATE_BOX_RUNNING);
  CHECK(g.init_pid == 100 && g.init_start_time == 12346 && g.slot == 1 && g.expires_ms == 5000);
  CHECK_STR(g.cgroup, "husk/b_s"); /* NULL kept it */
  CHECK(g.ended_ms == 0);
  state_box_free(&g);

  CHECK_OK(state_box_set_state(st, "b_s", NULL, STATE_BOX_FAILED, "memory", 777, &err));
  CHECK_OK(state_box_get(st, NULL, "b_s", &g, &err));
  CHECK_STR(g.state, STATE_BOX_FAILED);
  CHECK_STR(g.reason, "memory");
  CHECK(g.ended_ms == 777);
  state_box_free(&g);
  /* Terminal is final. */
  CHECK_ERR(state_box_set_state(st, "b_s", NULL, STATE_BOX_RUNNING, NULL, 0, &err), ESTALE);
  CHECK_ERR(state_box_set_state(st, "b_s", NULL, STATE_BOX_STOPPED, NULL, 0, &err), ESTALE);
  CHECK_ERR(state_box_set_expiry(st, "b_s", 9000, &err), ESTALE);
  CHECK_OK(state_box_get(st, NULL, "b_s", &g, &err));
  CHECK_STR(g.reason, "memory");
  state_box_free(&g);

  /* A reason built from an error message: too long, a newline, a stray
   * byte.  The state change happens; the reason is cut and cleaned. */
  CHECK_OK(mk_box(st, t.id, "b_r", 0, NULL, &err));
  char why[1200];
  memset(why, 'w', sizeof why);
  memcpy(why, "lost: `/x\n\xff`", 12);
  why[sizeof why - 1] = '\0';
  CHECK_OK(state_box_set_state(st, "b_r", NULL, STATE_BOX_FAILED, why, 0, &err));
  CHECK_OK(state_box_get(st, NULL, "b_r", &g, &err));
  CHECK_STR(g.state, STATE_BOX_FAILED);
  CHECK(strlen(g.reason) == sizeof g.reason - 1);
  CHECK(!strncmp(g.reason, "lost: `/x??`www", 15));
  CHECK(!strcmp(g.reason + sizeof g.reason - 4, "..."));
  state_box_free(&g);

  CHECK_ERR(state_box_set_state(st, "b_none", NULL, STATE_BOX_RUNNING, NULL, 0, &err), ENOENT);
  CHECK_ERR(state_box_set_state(st, "b_s", NULL, "paused?", NULL, 0, &err), EINVAL);
  CHECK_ERR(state_box_set_runtime(st, "b_none", 1, 1, -1, -1, NULL, &err), ENOENT);
  CHECK_ERR(state_box_set_runtime(st, "b_s", -1, 1, -1, -1, NULL, &err), EINVAL);
  CHECK_ERR(state_box_set_expiry(st, "b_none", 1, &err), ENOENT);

  /* ended_ms 0 on a terminal move means now. */
  CHECK_OK(mk_box(st, t.id, "b_t", 0, NULL, &err));
  int64_t before = state_now_ms();
  CHECK_OK(state_box_set_state(st, "b_t", NULL, STATE_BOX_STOPPED, NULL, 0, &err));
  CHECK_OK(state_box_get(st, NULL, "b_t", &g, &err));
  CHECK(g.ended_ms >= before && g.ended_ms <= state_now_ms());
  state_box_free(&g);

  /* Live rows are how a restart finds resources: not deletable. */
  CHECK_OK(mk_box(st, t.id, "b_live", 0, NULL, &err));
  CHECK_ERR(state_box_delete(st, t.id, "b_live", &err), EBUSY);
  CHECK_OK(state_box_delete(st, t.id, "b_t", &err));
  CHECK_ERR(state_box_get(st, NULL, "b_t", &g, &err), ENOENT);
  CHECK_ERR(state_box_delete(st, t.id, "b_t", &err), ENOENT);
  close_and_remove(st);
}


static int count_vol(void *ctx, const struct state_volume *v) {
  (void)v;
  (*(int *)ctx)++;
  return 0;
}

TEST(volume_rows) {
  struct husk_err err = {0};
  struct state *st = open_fresh();
  struct state_tenant t = mk_tenant(st, "t", -1, -1), u = mk_tenant(st, "u", -1, -1);
  /* Creating, then ready; only then listed or mountable, by its tenant. */
  struct state_volume v = {.size = 1 << 24};
  snprintf(v.id, sizeof v.id, "v_1");
  snprintf(v.tenant_id, sizeof v.tenant_id, "%s", t.id);
  snprintf(v.name, sizeof v.name, "data");
  CHECK_OK(state_volume_insert(st, &v, 2, &err));
  snprintf(v.id, sizeof v.id, "v_2");
  CHECK_ERR(state_volume_insert(st, &v, 2, &err), EEXIST); /* same name */
  snprintf(v.name, sizeof v.name, "other");
  CHECK_OK(state_volume_insert(st, &v, 2, &err));
  snprintf(v.id, sizeof v.id, "v_3");
  snprintf(v.name, sizeof v.name, "third");
  CHECK_ERR(state_volume_insert(st, &v, 2, &err), EDQUOT);
  snprintf(v.tenant_id, sizeof v.tenant_id, "t_nope");
  CHECK_ERR(state_volume_insert(st, &v, 2, &err), ENOENT);
  struct state_volume g;
  CHECK_ERR(state_volume_get(st, t.id, "data", &g, &err), ENOENT); /* creating */
  int n = 0;
  CHECK_OK(state_volume_list_creating(st, 100, count_vol, &n, &err));
  CHECK(n == 2);
  CHECK_OK(state_volume_ready(st, "v_1", &err));
  CHECK_ERR(state_volume_ready(st, "v_1", &err), ESTALE);
  CHECK_OK(state_volume_get(st, t.id, "data", &g, &err));
  CHECK(!strcmp(g.id, "v_1") && g.size == 1 << 24 && g.box_id[0] == '\0');
  CHECK_ERR(state_volume_get(st, u.id, "data", &g, &err), ENOENT);
  n = 0;
  CHECK_OK(state_volume_list(st, t.id, count_vol, &n, &err));
  CHECK(n == 1);

  /* One live box at a time mounts it; its end frees it, nothing to release. */
  CHECK_OK(mk_box(st, t.id, "b_a", 0, NULL, &err));
  CHECK_OK(mk_box(st, t.id, "b_b", 0, NULL, &err));
  CHECK_OK(mk_box(st, u.id, "b_u", 0, NULL, &err));
  struct state_volume_mount m = {.read_only = true};
  snprintf(m.name, sizeof m.name, "data");
  snprintf(m.path, sizeof m.path, "a/b");
  CHECK_ERR(state_volume_attach(st, u.id, "b_u", &m, 1, &err), ENOENT); /* another tenant's */
  CHECK_OK(state_volume_attach(st, t.id, "b_a", &m, 1, &err));
  CHECK_STR(m.volume_id, "v_1");
  CHECK_ERR(state_volume_attach(st, t.id, "b_b", &m, 1, &err), EBUSY);
  CHECK_OK(state_volume_get(st, t.id, "data", &g, &err));
  CHECK_STR(g.box_id, "b_a");
  CHECK_ERR(state_volume_delete(st, t.id, "data", g.id, &err), EBUSY);
  struct state_volume_mount got[8];
  size_t k = 0;
  CHECK_OK(state_volume_mounts(st, "b_a", got, 8, &k, &err));
  CHECK(k == 1 && !strcmp(got[0].path, "a/b") && got[0].read_only && !strcmp(got[0].name, "data"));
  CHECK_OK(state_box_set_state(st, "b_a", NULL, STATE_BOX_FAILED, "setup_error", 0, &err));
  CHECK_OK(state_volume_get(st, t.id, "data", &g, &err));
  CHECK(g.box_id[0] == '\0');
  CHECK_OK(state_volume_attach(st, t.id, "b_b", &m, 1, &err));
  CHECK_OK(state_box_set_state(st, "b_b", NULL, STATE_BOX_STOPPED, "deleted", 0, &err));
  /* Forgetting an ended box forgets its mounts. */
  CHECK_OK(state_box_delete(st, t.id, "b_b", &err));
  CHECK_OK(state_volume_mounts(st, "b_b", got, 8, &k, &err));
  CHECK(k == 0);

  /* Delete: the id back for the image, the rows gone. */
  char id[STATE_VOLUME_ID_SIZE];
  CHECK_ERR(state_volume_delete(st, u.id, "data", id, &err), ENOENT);
  CHECK_OK(state_volume_delete(st, t.id, "data", id, &err));
  CHECK_STR(id, "v_1");
  bool exists = true;
  CHECK_OK(state_volume_exists(st, "v_1", &exists, &err));
  CHECK(!exists);
  CHECK_OK(state_volume_exists(st, "v_2", &exists, &err));
  CHECK(exists);
  CHECK_OK(state_volume_remove(st, "v_2", &err));
  n = 0;
  CHECK_OK(state_volume_list_creating(st, 100, count_vol, &n, &err));
  CHECK(n == 0);

  /* A tenant's purge takes its volumes and their mounts. */
  snprintf(v.id, sizeof v.id, "v_4");
  snprintf(v.tenant_id, sizeof v.tenant_id, "%s", u.id);
  snprintf(v.name, sizeof v.name, "data");
  CHECK_OK(state_volume_insert(st, &v, 0, &err));
  CHECK_OK(state_volume_ready(st, "v_4", &err));
  CHECK_OK(state_volume_attach(st, u.id, "b_u", &m, 1, &err));
  CHECK_OK(state_box_set_state(st, "b_u", NULL, STATE_BOX_STOPPED, "deleted", 0, &err));
  CHECK_OK(state_tenant_mark_deleted(st, u.id, &err));
  CHECK_OK(state_tenant_purge(st, u.id, &err));
  CHECK_OK(state_volume_exists(st, "v_4", &exists, &err));
  CHECK(!exists);
  close_and_remove(st);
}

static int count_preview(void *ctx, const struct state_preview *p) {
  (void)p;
  (*(int *)ctx)++;
  return 0;
}

static int count_access(void *ctx, const struct state_preview_access *a) {
  (void)a;
  (*(int *)ctx)++;
  return 0;
}

static struct state_preview mk_preview(const char *id, const char *tenant, const char *box,
                                       unsigned char tag, int64_t expires_ms) {
  struct state_preview p = {.port = 8000, .max_body = 1, .max_header = 1, .max_conns = 1,
                            .idle_ms = 1, .duration_ms = 1, .expires_ms = expires_ms};
  snprintf(p.id, sizeof p.id, "%s", id);
  snprintf(p.tenant_id, sizeof p.tenant_id, "%s", tenant);
  snprintf(p.box_id, sizeof p.box_id, "%s", box);
  snprintf(p.access, sizeof p.access, "public");
  memset(p.token_hash, tag, sizeof p.token_hash);
  return p;
}

TEST(preview_rows) {
  struct husk_err err = {0};
  struct state *st = open_fresh();
  struct state_tenant t = mk_tenant(st, "t", -1, -1), u = mk_tenant(st, "u", -1, -1);
  CHECK_OK(mk_box(st, t.id, "b_a", 0, NULL, &err));
  CHECK_OK(mk_box(st, u.id, "b_u", 0, NULL, &err));
  int64_t later = state_now_ms() + 3600000;
  /* Only for a live box of the tenant's; the token hash is unique. */
  struct state_preview p = mk_preview("pv_1", t.id, "b_a", 1, later);
  CHECK_OK(state_preview_insert(st, &p, 2, &err));
  struct state_preview q = mk_preview("pv_2", u.id, "b_a", 2, later);
  CHECK_ERR(state_preview_insert(st, &q, 2, &err), ENOENT); /* another tenant's box */
  q = mk_preview("pv_2", t.id, "b_a", 1, later);
  CHECK(state_preview_insert(st, &q, 2, &err) < 0); /* the same token */
  q = mk_preview("pv_2", t.id, "b_a", 2, later);
  q.port = 0;
  CHECK_ERR(state_preview_insert(st, &q, 2, &err), EINVAL);
  q.port = 9000;
  q.has_password = true;
  memset(q.password_hash, 7, sizeof q.password_hash);
  CHECK_OK(state_preview_insert(st, &q, 2, &err));
  /* In force: at most max_live per box. */
  struct state_preview r = mk_preview("pv_3", t.id, "b_a", 3, later);
  CHECK_ERR(state_preview_insert(st, &r, 2, &err), EDQUOT);

  /* By token, by id (the tenant's and box's only). */
  unsigned char h[STATE_PREVIEW_HASH_SIZE];
  memset(h, 2, sizeof h);
  struct state_preview g;
  CHECK_OK(state_preview_by_token(st, h, &g, &err));
  CHECK(!strcmp(g.id, "pv_2") && g.port == 9000 && g.has_password && g.password_hash[0] == 7);
  memset(h, 9, sizeof h);
  CHECK_ERR(state_preview_by_token(st, h, &g, &err), ENOENT);
  CHECK_OK(state_preview_get(st, t.id, "b_a", "pv_1", &g, &err));
  CHECK(!g.has_password && g.revoked_ms == 0);
  CHECK_ERR(state_preview_get(st, u.id, "b_a", "pv_1", &g, &err), ENOENT);
  CHECK_ERR(state_preview_get(st, t.id, "b_u", "pv_1", &g, &err), ENOENT);
  CHECK_ERR(state_preview_get(st, t.id, "b_a", "pv_1'--", &g, &err), ENOENT);
  int n = 0;
  CHECK_OK(state_preview_list(st, t.id, "b_a", count_preview, &n, &err));
  CHECK(n == 2);
  CHECK_ERR(state_preview_list(st, u.id, "b_a", count_preview, &n, &err), ENOENT);

  /* Revoked: keeps its first time, frees a place in force. */
  CHECK_ERR(state_preview_revoke(st, u.id, "b_a", "pv_1", &err), ENOENT);
  CHECK_OK(state_preview_revoke(st, t.id, "b_a", "pv_1", &err));
  CHECK_OK(state_preview_get(st, t.id, "b_a", "pv_1", &g, &err));
  int64_t first = g.revoked_ms;
  CHECK(first > 0);
  CHECK_OK(state_preview_revoke(st, t.id, "b_a", "pv_1", &err));
  CHECK_OK(state_preview_get(st, t.id, "b_a", "pv_1", &g, &err));
  CHECK(g.revoked_ms == first);
  CHECK_OK(state_preview_insert(st, &r, 2, &err));

  /* The access log: bounded per preview, sanitized, its counts set later. */
  struct state_preview_access a = {.status = 200};
  snprintf(a.remote, sizeof a.remote, "127.0.0.1");
  snprintf(a.method, sizeof a.method, "GET");
  snprintf(a.path, sizeof a.path, "/x\x01\xff");
  int64_t seq = 0;
  for (int i = 0; i < 200; i++)
    CHECK_OK(state_preview_access_add(st, "pv_2", &a, 100, &seq, &err));
  CHECK_OK(state_preview_access_end(st, seq, 5, 7, 3, &err));
  n = 0;
  CHECK_OK(state_preview_access_list(st, t.id, "b_a", "pv_2", 0, 1000, count_access, &n, &err));
  CHECK(n >= 100 && n < 200);
  CHECK_ERR(state_preview_access_list(st, u.id, "b_a", "pv_2", 0, 1000, count_access, &n, &err),
            ENOENT);

  /* Rows go with their box's record and their tenant. */
  CHECK_OK(state_box_set_state(st, "b_a", NULL, STATE_BOX_STOPPED, "deleted", 0, &err));
  CHECK_ERR(state_preview_insert(st, &(struct state_preview){0}, 2, &err), EINVAL);
  struct state_preview s2 = mk_preview("pv_4", t.id, "b_a", 4, later);
  CHECK_ERR(state_preview_insert(st, &s2, 2, &err), EBUSY); /* ended */
  CHECK_OK(state_box_delete(st, t.id, "b_a", &err));
  memset(h, 2, sizeof h);
  CHECK_ERR(state_preview_by_token(st, h, &g, &err), ENOENT);
  s2 = mk_preview("pv_5", u.id, "b_u", 5, later);
  CHECK_OK(state_preview_insert(st, &s2, 2, &err));
  CHECK_OK(state_box_set_state(st, "b_u", NULL, STATE_BOX_STOPPED, "deleted", 0, &err));
  CHECK_OK(state_tenant_mark_deleted(st, u.id, &err));
  CHECK_OK(state_tenant_purge(st, u.id, &err));
  memset(h, 5, sizeof h);
  CHECK_ERR(state_preview_by_token(st, h, &g, &err), ENOENT);
  close_and_remove(st);
}

static int collect_snap(void *ctx, const struct state_snapshot *p) {
  struct ids *out = ctx;
  if ((size_t)out->n < sizeof out->v / sizeof out->v[0])
    snprintf(out->v[out->n++], sizeof out->v[0], "%s", p->id);
  return 0;
}

static int count_snap(void *ctx, const struct state_snapshot *p) {
  (void)p;
  (*(int *)ctx)++;
  return 0;
}

TEST(pause_and_snapshot_rows) {
  struct husk_err err = {0};
  struct state *st = open_fresh();
  struct state_tenant t = mk_tenant(st, "t", -1, -1), u = mk_tenant(st, "u", -1, -1);
  struct state_box g;
  CHECK_OK(mk_box(st, t.id, "b_p", 0, NULL, &err));
  /* Only a running box pauses; only a paused one resumes. */
  CHECK_ERR(state_box_set_paused(st, "b_p", true, 1000, 0, &err), ESTALE);
  CHECK_OK(state_box_set_state(st, "b_p", STATE_BOX_CREATING, STATE_BOX_RUNNING, "", 0, &err));
  CHECK_ERR(state_box_set_paused(st, "b_p", false, 1000, 0, &err), ESTALE);
  CHECK_OK(state_box_set_paused(st, "b_p", true, 1000, 5000, &err));
  CHECK_ERR(state_box_set_paused(st, "b_p", true, 1000, 5000, &err), ESTALE);
  CHECK_OK(state_box_get(st, NULL, "b_p", &g, &err));
  CHECK(!strcmp(g.state, STATE_BOX_PAUSED) && g.paused_ms == 1000 && g.expires_ms == 5000);
  state_box_free(&g);
  /* Paused is live: it counts in the quota, and is not deletable. */
  int64_t boxes = 0, mem = 0;
  CHECK_OK(state_box_count_live(st, t.id, &boxes, &mem, &err));
  CHECK(boxes == 1 && mem == 100);
  CHECK_ERR(state_box_delete(st, t.id, "b_p", &err), EBUSY);
  CHECK_OK(state_box_set_paused(st, "b_p", false, 3000, 7000, &err));
  CHECK_OK(state_box_get(st, NULL, "b_p", &g, &err));
  CHECK(!strcmp(g.state, STATE_BOX_RUNNING) && g.paused_ms == 0 && g.expires_ms == 7000);
  state_box_free(&g);

  /* A snapshot: creating, then ready; only then listed and gettable by
   * its tenant alone. */
  struct state_snapshot p = {.memory = 1, .pids = 2, .cpu_milli = 3, .disk = 4, .timeout_ms = 5};
  snprintf(p.id, sizeof p.id, "s_1");
  snprintf(p.tenant_id, sizeof p.tenant_id, "%s", t.id);
  snprintf(p.box_id, sizeof p.box_id, "b_p");
  CHECK_OK(state_snapshot_insert(st, &p, 0, &err));
  CHECK_ERR(state_snapshot_insert(st, &p, 0, &err), EEXIST);
  struct ids got = {0};
  char next[STATE_CURSOR_SIZE];
  CHECK_OK(state_snapshot_list(st, t.id, NULL, NULL, 0, collect_snap, &got, next, sizeof next, &err));
  CHECK(got.n == 0);
  int creating = 0;
  CHECK_OK(state_snapshot_list_creating(st, 100, count_snap, &creating, &err));
  CHECK(creating == 1);
  CHECK_ERR(state_snapshot_delete(st, t.id, "s_1", &err), ENOENT); /* not ready */
  CHECK_ERR(state_snapshot_ready(st, "s_1", 10, 20, 3, "bad", &err), EINVAL);
  char sha[65];
  memset(sha, 'a', 64);
  sha[64] = '\0';
  CHECK_OK(state_snapshot_ready(st, "s_1", 10, 20, 3, sha, &err));
  CHECK_ERR(state_snapshot_ready(st, "s_1", 10, 20, 3, sha, &err), ESTALE);
  struct state_snapshot q;
  CHECK_OK(state_snapshot_get(st, t.id, "s_1", &q, &err));
  CHECK(q.size == 10 && q.data_bytes == 20 && q.entries == 3 && q.refs == 0 && !q.for_pause);
  CHECK_STR(q.state, STATE_SNAPSHOT_READY);
  CHECK_STR(q.sha256, sha);
  state_snapshot_free(&q);
  CHECK_ERR(state_snapshot_get(st, u.id, "s_1", &q, &err), ENOENT);
  CHECK_ERR(state_snapshot_delete(st, u.id, "s_1", &err), ENOENT);
  creating = 0;
  CHECK_OK(state_snapshot_list_creating(st, 100, count_snap, &creating, &err));
  CHECK(creating == 0);

  /* A live box made from it holds it. */
  struct state_box b = box_template(t.id, "b_from");
  snprintf(b.snapshot_id, sizeof b.snapshot_id, "s_1");
  CHECK_OK(state_box_insert(st, &b, &err));
  CHECK_OK(state_snapshot_get(st, t.id, "s_1", &q, &err));
  CHECK(q.refs == 1);
  state_snapshot_free(&q);
  CHECK_ERR(state_snapshot_delete(st, t.id, "s_1", &err), EBUSY);
  CHECK_OK(state_box_set_state(st, "b_from", NULL, STATE_BOX_STOPPED, NULL, 0, &err));

  /* The tenant's bound on rows. */
  struct state_snapshot over = p;
  snprintf(over.id, sizeof over.id, "s_over");
  CHECK_ERR(state_snapshot_insert(st, &over, 1, &err), EDQUOT);
  CHECK_OK(state_snapshot_insert(st, &over, 2, &err));
  CHECK_OK(state_snapshot_remove(st, "s_over", &err));

  /* Pages of one, in order. */
  snprintf(p.id, sizeof p.id, "s_2");
  p.created_ms = state_now_ms() + 10;
  CHECK_OK(state_snapshot_insert(st, &p, 0, &err));
  CHECK_OK(state_snapshot_ready(st, "s_2", 1, 1, 1, sha, &err));
  got = (struct ids){0};
  CHECK_OK(state_snapshot_list(st, t.id, NULL, NULL, 1, collect_snap, &got, next, sizeof next, &err));
  CHECK(got.n == 1 && !strcmp(got.v[0], "s_1") && next[0]);
  char cur[STATE_CURSOR_SIZE];
  snprintf(cur, sizeof cur, "%s", next);
  CHECK_OK(state_snapshot_list(st, t.id, NULL, cur, 1, collect_snap, &got, next, sizeof next, &err));
  CHECK(got.n == 2 && !strcmp(got.v[1], "s_2") && !next[0]);
  CHECK_ERR(state_snapshot_list(st, t.id, NULL, "garbage", 1, collect_snap, &got, next, sizeof next, &err),
            EINVAL);
  /* One box's only, paged the same way; an id of no box has none. */
  struct state_snapshot o = p;
  snprintf(o.id, sizeof o.id, "s_o");
  snprintf(o.box_id, sizeof o.box_id, "b_other");
  o.created_ms = p.created_ms - 5;
  CHECK_OK(state_snapshot_insert(st, &o, 0, &err));
  CHECK_OK(state_snapshot_ready(st, "s_o", 1, 1, 1, sha, &err));
  got = (struct ids){0};
  CHECK_OK(state_snapshot_list(st, t.id, "b_other", NULL, 0, collect_snap, &got, next, sizeof next, &err));
  CHECK(got.n == 1 && !strcmp(got.v[0], "s_o") && !next[0]);
  got = (struct ids){0};
  CHECK_OK(state_snapshot_list(st, t.id, "b_p", NULL, 1, collect_snap, &got, next, sizeof next, &err));
  CHECK(got.n == 1 && !strcmp(got.v[0], "s_1") && next[0]);
  snprintf(cur, sizeof cur, "%s", next);
  CHECK_OK(state_snapshot_list(st, t.id, "b_p", cur, 1, collect_snap, &got, next, sizeof next, &err));
  CHECK(got.n == 2 && !strcmp(got.v[1], "s_2") && !next[0]);
  got = (struct ids){0};
  CHECK_OK(state_snapshot_list(st, t.id, "b_none", NULL, 0, collect_snap, &got, next, sizeof next, &err));
  CHECK(got.n == 0 && !next[0]);
  CHECK_OK(state_snapshot_list(st, t.id, "no/such box", NULL, 0, collect_snap, &got, next, sizeof next, &err));
  CHECK(got.n == 0 && !next[0]);
  got = (struct ids){0};
  CHECK_OK(state_snapshot_list(st, t.id, "", NULL, 0, collect_snap, &got, next, sizeof next, &err));
  CHECK(got.n == 3);
  CHECK_OK(state_snapshot_delete(st, t.id, "s_o", &err));
  CHECK_OK(state_snapshot_delete(st, t.id, "s_1", &err));
  CHECK_ERR(state_snapshot_get(st, t.id, "s_1", &q, &err), ENOENT);

  /* Paused to disk: a pause snapshot, never listed, held by its box; one
   * no live box resumes from is for the sweep. */
  struct state_snapshot ps = p;
  snprintf(ps.id, sizeof ps.id, "s_p");
  ps.for_pause = true;
  CHECK_OK(state_snapshot_insert(st, &ps, 0, &err));
  CHECK_OK(state_snapshot_ready(st, "s_p", 1, 1, 1, sha, &err));
  CHECK_OK(state_box_pause_to_disk(st, "b_p", 4000, "s_p", &err));
  CHECK_ERR(state_box_pause_to_disk(st, "b_p", 4000, "s_p", &err), ESTALE);
  CHECK_OK(state_box_get(st, NULL, "b_p", &g, &err));
  CHECK(!strcmp(g.state, STATE_BOX_PAUSED) && g.paused_ms == 4000 && g.init_pid == 0 &&
        g.uid_base == -1 && !strcmp(g.paused_snapshot, "s_p"));
  state_box_free(&g);
  got = (struct ids){0};
  CHECK_OK(state_snapshot_list(st, t.id, NULL, NULL, 0, collect_snap, &got, next, sizeof next, &err));
  CHECK(got.n == 1 && !strcmp(got.v[0], "s_2"));
  CHECK_ERR(state_snapshot_delete(st, t.id, "s_p", &err), ENOENT);
  creating = 0;
  CHECK_OK(state_snapshot_list_creating(st, 100, count_snap, &creating, &err));
  CHECK(creating == 0);
  CHECK_ERR(state_box_resume_from_disk(st, "b_p", "s_other", 0, 10, 1, 0, 0, &err), ESTALE);
  CHECK_OK(state_box_resume_from_disk(st, "b_p", "s_p", 9000, 10, 1, 65536, 1, &err));
  CHECK_OK(state_box_get(st, NULL, "b_p", &g, &err));
  CHECK(!strcmp(g.state, STATE_BOX_RUNNING) && !g.paused_snapshot[0] && g.init_pid == 10 &&
        g.expires_ms == 9000 && g.paused_ms == 0);
  state_box_free(&g);
  creating = 0;
  CHECK_OK(state_snapshot_list_creating(st, 100, count_snap, &creating, &err));
  CHECK(creating == 1); /* s_p: nobody resumes from it now */
  CHECK_OK(state_snapshot_remove(st, "s_p", &err));

  /* A tenant's deletion takes its snapshots too. */
  CHECK_OK(state_box_set_state(st, "b_p", NULL, STATE_BOX_STOPPED, NULL, 0, &err));
  close_and_remove(st);
}

TEST(box_vocabulary_matches_sql) {
  /* DB_LIVE_STATES (SQL) and box_state_live (C) must agree. */
  CHECK(box_state_live(STATE_BOX_CREATING) && strstr(DB_LIVE_STATES, "'creating'"));
  CHECK(box_state_live(STATE_BOX_RUNNING) && strstr(DB_LIVE_STATES, "'running'"));
  CHECK(box_state_live(STATE_BOX_STOPPING) && strstr(DB_LIVE_STATES, "'stopping'"));
  CHECK(box_state_live(STATE_BOX_PAUSED) && strstr(DB_LIVE_STATES, "'paused'"));
  CHECK(box_state_terminal(STATE_BOX_STOPPED) && strstr(DB_TERMINAL_STATES, "'stopped'"));
  CHECK(box_state_terminal(STATE_BOX_FAILED) && strstr(DB_TERMINAL_STATES, "'failed'"));
  CHECK(!strstr(DB_LIVE_STATES, "stopped") && !strstr(DB_LIVE_STATES, "failed"));
  CHECK(!box_state_known("live") && !box_state_known("") && !box_state_known(NULL));
}

static int stop_after_one(void *ctx, const struct state_box *b) {
  (*(int *)ctx)++;
  return 1;
}

static int fail_with_minus_five(void *ctx, const struct state_box *b) {
  (*(int *)ctx)++;
  return -5;
}

/* created_by: the daemon's choice, so anything but a user id or key:
 * and a key id is refused, on every table that records it, and the box
 * listing filters on it. */
static int collect_proc_creator(void *ctx, const struct state_proc *p) {
  snprintf(ctx, STATE_CREATED_BY_SIZE, "%s", p->created_by);
  return 0;
}

static int collect_link_creator(void *ctx, const struct state_upload_link *l) {
  snprintf(ctx, STATE_CREATED_BY_SIZE, "%s", l->created_by);
  return 0;
}

TEST(created_by_is_checked_and_filtered) {
  struct husk_err err = {0};
  const char *user = "u_0123456789abcdef01234567", *user2 = "u_fedcba9876543210fedcba98";
  const char *key = "key:k_0123456789abcdef01234567";
  CHECK_OK(state_check_created_by(user, false, &err));
  CHECK_OK(state_check_created_by(key, false, &err));
  CHECK_OK(state_check_created_by("key:k-1_x", false, &err));
  CHECK_OK(state_check_created_by("", true, &err));
  CHECK_ERR(state_check_created_by("", false, &err), EINVAL);
  CHECK_ERR(state_check_created_by(NULL, true, &err), EINVAL);
  const char *bad[] = {"u_0123456789abcdef0123456",   /* 23 digits */
                       "u_0123456789abcdef012345678", /* 25 */
                       "u_0123456789ABCDEF01234567",  /* upper case */
                       "u_0123456789abcdef0123456g",  "U_0123456789abcdef01234567",
                       "user", "key:", "key:k 1", "key:k_1\n", "key:k_1'--", "Key:k_1",
                       "key:k_0123456789abcdef0123456789abcdef", /* a key id past its size */
                       "k_0123456789abcdef01234567", " u_0123456789abcdef01234567"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CHECK_ERR(state_check_created_by(bad[i], true, &err), EINVAL);
    CHECK(strlen(bad[i]) < 8 || !strstr(err.msg, bad[i])); /* the message does not repeat it */
  }

  struct state *st = open_fresh();
  struct state_tenant t = mk_tenant(st, "cb", -1, -1), o = mk_tenant(st, "cb2", -1, -1);
  /* Boxes: stored as given, read back, refused when malformed. */
  struct state_box b = box_template(t.id, "b_cb1");
  snprintf(b.created_by, sizeof b.created_by, "%s", user);
  CHECK_OK(state_box_insert(st, &b, &err));
  b = box_template(t.id, "b_cb2");
  snprintf(b.created_by, sizeof b.created_by, "%s", key);
  CHECK_OK(state_box_insert(st, &b, &err));
  b = box_template(t.id, "b_cb3");
  snprintf(b.created_by, sizeof b.created_by, "%s", user2);
  CHECK_OK(state_box_insert(st, &b, &err));
  CHECK_OK(mk_box(st, t.id, "b_cb4", 0, NULL, &err)); /* nobody's */
  b = box_template(o.id, "b_cb5");                    /* the same user id, another tenant */
  snprintf(b.created_by, sizeof b.created_by, "%s", user);
  CHECK_OK(state_box_insert(st, &b, &err));
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    b = box_template(t.id, "b_cbbad");
    snprintf(b.created_by, sizeof b.created_by, "%s", bad[i]);
    if (strlen(bad[i]) < sizeof b.created_by)
      CHECK_ERR(state_box_insert(st, &b, &err), EINVAL);
  }
  b = box_template(t.id, "b_cbbad");
  memset(b.created_by, 'a', sizeof b.created_by); /* not terminated */
  CHECK_ERR(state_box_insert(st, &b, &err), EINVAL);
  struct state_box g;
  CHECK_OK(state_box_get(st, t.id, "b_cb1", &g, &err));
  CHECK_STR(g.created_by, user);
  state_box_free(&g);
  CHECK_OK(state_box_get(st, t.id, "b_cb4", &g, &err));
  CHECK_STR(g.created_by, "");
  state_box_free(&g);
  CHECK_ERR(state_box_get(st, NULL, "b_cbbad", &g, &err), ENOENT);

  struct state_box_filter f = {.tenant_id = t.id, .created_by = user};
  struct ids page;
  char next[STATE_CURSOR_SIZE];
  CHECK_OK(list_boxes(st, &f, &page, next, &err));
  CHECK(page.n == 1 && ids_has(&page, "b_cb1"));
  f.created_by = key;
  CHECK_OK(list_boxes(st, &f, &page, next, &err));
  CHECK(page.n == 1 && ids_has(&page, "b_cb2"));
  f.created_by = "u_000000000000000000000000";
  CHECK_OK(list_boxes(st, &f, &page, next, &err));
  CHECK(page.n == 0);
  f = (struct state_box_filter){.created_by = user}; /* every tenant's */
  CHECK_OK(list_boxes(st, &f, &page, next, &err));
  CHECK(page.n == 2 && ids_has(&page, "b_cb5"));
  f = (struct state_box_filter){.tenant_id = t.id, .created_by = ""};
  CHECK_ERR(list_boxes(st, &f, &page, next, &err), EINVAL);
  f.created_by = "u_x' OR '1'='1";
  CHECK_ERR(list_boxes(st, &f, &page, next, &err), EINVAL);

  /* Jobs. */
  struct state_job j = {.pid = 7, .ephemeral = 0};
  snprintf(j.id, sizeof j.id, "j_cb1");
  snprintf(j.tenant_id, sizeof j.tenant_id, "%s", t.id);
  snprintf(j.box_id, sizeof j.box_id, "b_cb1");
  snprintf(j.kind, sizeof j.kind, "exec");
  snprintf(j.created_by, sizeof j.created_by, "%s", "key:k_1'--");
  CHECK_ERR(state_job_insert(st, &j, &err), EINVAL);
  memset(j.created_by, 'a', sizeof j.created_by);
  CHECK_ERR(state_job_insert(st, &j, &err), EINVAL);
  snprintf(j.created_by, sizeof j.created_by, "%s", user);
  CHECK_OK(state_job_insert(st, &j, &err));
  struct state_job jg;
  CHECK_OK(state_job_get(st, t.id, "j_cb1", &jg, &err));
  CHECK_STR(jg.created_by, user);
  state_job_free(&jg);

  /* Background processes: get and page read it back. */
  struct state_proc p = {.pid = 5, .cmd_json = "[\"sleep\",\"9\"]"};
  snprintf(p.box_id, sizeof p.box_id, "b_cb1");
  snprintf(p.created_by, sizeof p.created_by, "%s", "user");
  CHECK_ERR(state_proc_insert(st, &p, &err), EINVAL);
  snprintf(p.created_by, sizeof p.created_by, "%s", key);
  CHECK_OK(state_proc_insert(st, &p, &err));
  struct state_proc pg;
  CHECK_OK(state_proc_get(st, t.id, "b_cb1", 5, &pg, &err));
  CHECK_STR(pg.created_by, key);
  state_proc_free(&pg);
  char seen[STATE_CREATED_BY_SIZE] = "";
  CHECK_OK(state_proc_page(st, t.id, "b_cb1", 0, 10, 4096, collect_proc_creator, seen, &err));
  CHECK_STR(seen, key);
  seen[0] = '\0';
  CHECK_OK(state_proc_list(st, t.id, "b_cb1", 0, 10, collect_proc_creator, seen, &err));
  CHECK_STR(seen, key);

  /* Upload links. */
  struct state_upload_link l;
  memset(&l, 0, sizeof l);
  snprintf(l.id, sizeof l.id, "ul_cb1");
  snprintf(l.tenant_id, sizeof l.tenant_id, "%s", t.id);
  memset(l.token_hash, 7, sizeof l.token_hash);
  snprintf(l.bucket, sizeof l.bucket, "uploads");
  snprintf(l.prefix, sizeof l.prefix, "in/");
  l.max_files = 1;
  l.max_file_bytes = 10;
  l.expires_ms = state_now_ms() + 60000;
  snprintf(l.created_by, sizeof l.created_by, "%s", "u_0123456789abcdef0123456");
  CHECK_ERR(state_upload_link_insert(st, &l, 10, &err), EINVAL);
  snprintf(l.created_by, sizeof l.created_by, "%s", user2);
  CHECK_OK(state_upload_link_insert(st, &l, 10, &err));
  seen[0] = '\0';
  CHECK_OK(state_upload_link_list(st, t.id, collect_link_creator, seen, &err));
  CHECK_STR(seen, user2);
  close_and_remove(st);
}

/* Objects, links and previews record their creator as boxes do; an S3
 * key's writes are "s3key:" and its access key id.  What is malformed is
 * refused before anything is written, a row holding one is refused when
 * read, the object listing filters on it, and rows from before the column
 * read as nobody's. */
struct obj_seen {
  char keys[512];
  char creators[512];
};

static int collect_link(void *ctx, const struct store_link *l) {
  snprintf(ctx, STATE_CREATED_BY_SIZE, "%s", l->created_by);
  return 0;
}

static int collect_preview_creator(void *ctx, const struct state_preview *p) {
  snprintf(ctx, STATE_CREATED_BY_SIZE, "%s", p->created_by);
  return 0;
}

static int object_page_of(struct state *st, const char *tenant, const char *creator,
                          struct obj_seen *out, struct husk_err *err) {
  memset(out, 0, sizeof *out);
  struct state_object_page pg = {0};
  if (state_object_page(st, tenant, "bkt", "", 0, "", creator, &pg, err) < 0)
    return -1;
  for (size_t i = 0; i < pg.n; i++) {
    size_t n = strlen(out->keys), m = strlen(out->creators);
    snprintf(out->keys + n, sizeof out->keys - n, "%s%s", n ? " " : "", pg.entries[i].key);
    snprintf(out->creators + m, sizeof out->creators - m, "%s%s", m ? " " : "",
             pg.entries[i].created_by[0] ? pg.entries[i].created_by : "-");
  }
  state_object_page_free(&pg);
  return 0;
}

static int put_object(struct state *st, const char *tenant, const char *key, const char *file,
                      const char *creator, struct husk_err *err) {
  struct state_object_new o = {.key = key,
                               .file = file,
                               .size = 1,
                               .etag = "0cc175b9c0f1b6a831c399e269772661",
                               .mtime_ms = state_now_ms(),
                               .created_by = creator};
  char old[STORE_ID_SIZE];
  return state_object_put(st, tenant, "bkt", &o, 0, old, err);
}

TEST(objects_links_previews_record_their_creator) {
  struct husk_err err = {0};
  const char *user = "u_0123456789abcdef01234567", *key = "key:k_0123456789abcdef01234567";
  const char *s3 = "s3key:HKABCDEFGHIJKLMNOPQR";
  CHECK_OK(state_check_created_by(s3, false, &err));
  CHECK_OK(state_check_created_by("s3key:HK2", false, &err));
  const char *bad[] = {"s3key:",
                       "s3key:HK 1",
                       "s3key:HK\n",
                       "S3key:HKABC",
                       "s3key:HK'--",
                       "s3:HKABCDEFGHIJKLMNOPQR",
                       "s3key:HKABCDEFGHIJKLMNOPQRSTUVW" /* 24 */};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    CHECK_ERR(state_check_created_by(bad[i], true, &err), EINVAL);
    CHECK(strlen(bad[i]) < 8 || !strstr(err.msg, bad[i])); /* the message does not repeat it */
  }

  struct state *st = open_fresh();
  struct state_tenant t = mk_tenant(st, "ob", -1, -1), o = mk_tenant(st, "ob2", -1, -1);
  CHECK_OK(state_bucket_create(st, t.id, "bkt", &err));
  CHECK_OK(state_bucket_create(st, o.id, "bkt", &err));

  /* Objects: each writer as given, nobody for NULL and "". */
  CHECK_OK(put_object(st, t.id, "a", "o_a", user, &err));
  CHECK_OK(put_object(st, t.id, "b", "o_b", key, &err));
  CHECK_OK(put_object(st, t.id, "c", "o_c", s3, &err));
  CHECK_OK(put_object(st, t.id, "d", "o_d", NULL, &err));
  CHECK_OK(put_object(st, t.id, "e", "o_e", "", &err));
  CHECK_OK(put_object(st, o.id, "a", "o_oa", user, &err)); /* the same user, another tenant */
  struct store_object so;
  CHECK_OK(state_object_get(st, t.id, "bkt", "a", &so, &err));
  CHECK_STR(so.created_by, user);
  store_object_free(&so);
  CHECK_OK(state_object_get(st, t.id, "bkt", "d", &so, &err));
  CHECK_STR(so.created_by, "");
  store_object_free(&so);
  /* A malformed writer: refused, the object as it was. */
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
    CHECK_ERR(put_object(st, t.id, "a", "o_bad", bad[i], &err), EINVAL);
  CHECK_ERR(put_object(st, t.id, "a", "o_bad", "user", &err), EINVAL);
  CHECK_OK(state_object_get(st, t.id, "bkt", "a", &so, &err));
  CHECK_STR(so.created_by, user);
  CHECK_STR(so.file, "o_a");
  store_object_free(&so);
  /* A new version takes its writer. */
  CHECK_OK(put_object(st, t.id, "b", "o_b2", user, &err));
  CHECK_OK(state_object_get(st, t.id, "bkt", "b", &so, &err));
  CHECK_STR(so.created_by, user);
  store_object_free(&so);

  /* The listing: every writer's, or one's (of this tenant only). */
  struct obj_seen seen;
  CHECK_OK(object_page_of(st, t.id, NULL, &seen, &err));
  CHECK_STR(seen.keys, "a b c d e");
  char want[256];
  snprintf(want, sizeof want, "%s %s %s - -", user, user, s3);
  CHECK_STR(seen.creators, want);
  CHECK_OK(object_page_of(st, t.id, user, &seen, &err));
  CHECK_STR(seen.keys, "a b");
  CHECK_OK(object_page_of(st, t.id, s3, &seen, &err));
  CHECK_STR(seen.keys, "c");
  CHECK_OK(object_page_of(st, t.id, key, &seen, &err));
  CHECK_STR(seen.keys, "");
  CHECK_OK(object_page_of(st, o.id, user, &seen, &err));
  CHECK_STR(seen.keys, "a");
  CHECK_ERR(object_page_of(st, t.id, "", &seen, &err), EINVAL);
  CHECK_ERR(object_page_of(st, t.id, "u_x' OR '1'='1", &seen, &err), EINVAL);

  /* Links. */
  struct store_link l = {.created_ms = state_now_ms(), .expires_ms = state_now_ms() + 60000};
  snprintf(l.id, sizeof l.id, "l_cb1");
  snprintf(l.bucket, sizeof l.bucket, "bkt");
  l.key = "a";
  l.url = "http://127.0.0.1:1/bkt/a?X-Amz-Signature=0";
  snprintf(l.created_by, sizeof l.created_by, "%s", "key:");
  CHECK_ERR(state_link_insert(st, t.id, &l, &err), EINVAL);
  memset(l.created_by, 'a', sizeof l.created_by); /* not terminated */
  CHECK_ERR(state_link_insert(st, t.id, &l, &err), EINVAL);
  snprintf(l.created_by, sizeof l.created_by, "%s", key);
  CHECK_OK(state_link_insert(st, t.id, &l, &err));
  struct store_link lg;
  CHECK_OK(state_link_get(st, t.id, "l_cb1", &lg, &err));
  CHECK_STR(lg.created_by, key);
  store_link_free(&lg);
  char got[STATE_CREATED_BY_SIZE] = "";
  CHECK_OK(state_link_list(st, t.id, collect_link, got, &err));
  CHECK_STR(got, key);

  /* Previews. */
  CHECK_OK(mk_box(st, t.id, "b_pv", 0, NULL, &err));
  struct state_preview p = mk_preview("pv_cb1", t.id, "b_pv", 9, state_now_ms() + 60000);
  snprintf(p.created_by, sizeof p.created_by, "%s", "u_0123");
  CHECK_ERR(state_preview_insert(st, &p, 4, &err), EINVAL);
  memset(p.created_by, 'u', sizeof p.created_by);
  CHECK_ERR(state_preview_insert(st, &p, 4, &err), EINVAL);
  snprintf(p.created_by, sizeof p.created_by, "%s", user);
  CHECK_OK(state_preview_insert(st, &p, 4, &err));
  struct state_preview pg;
  CHECK_OK(state_preview_get(st, t.id, "b_pv", "pv_cb1", &pg, &err));
  CHECK_STR(pg.created_by, user);
  got[0] = '\0';
  CHECK_OK(state_preview_list(st, t.id, "b_pv", collect_preview_creator, got, &err));
  CHECK_STR(got, user);

  /* A row whose creator is not one of the daemon's is not believed. */
  sqlite3 *db = raw_open(dbpath);
  CHECK(raw_exec(db, "UPDATE objects SET created_by = 'x' WHERE key = 'e'") == SQLITE_OK);
  CHECK(raw_exec(db, "UPDATE links SET created_by = 'key:a b'") == SQLITE_OK);
  CHECK(raw_exec(db, "UPDATE previews SET created_by = 'u_'") == SQLITE_OK);
  sqlite3_close(db);
  CHECK_ERR(state_object_get(st, t.id, "bkt", "e", &so, &err), EUCLEAN);
  CHECK_ERR(object_page_of(st, t.id, NULL, &seen, &err), EUCLEAN);
  CHECK_ERR(state_link_get(st, t.id, "l_cb1", &lg, &err), EUCLEAN);
  CHECK_ERR(state_preview_get(st, t.id, "b_pv", "pv_cb1", &pg, &err), EUCLEAN);
  close_and_remove(st);
}

/* A database from before the column: the migration adds it, the rows
 * that were there are nobody's, and what is written now records its
 * writer. */
TEST(creators_of_rows_from_before_are_null) {
  struct husk_err err = {0};
  struct state *st = open_fresh();
  struct state_tenant t = mk_tenant(st, "old", -1, -1);
  CHECK_OK(state_bucket_create(st, t.id, "bkt", &err));
  CHECK_OK(put_object(st, t.id, "old", "o_old", NULL, &err));
  state_close(st);
  /* Back to the schema before objects_creator: the column and its
   * index gone, the version one lower. */
  sqlite3 *db = raw_open(dbpath);
  CHECK(raw_exec(db, "DROP INDEX objects_creator; ALTER TABLE objects DROP COLUMN created_by;"
                     "ALTER TABLE links DROP COLUMN created_by;"
                     "ALTER TABLE previews DROP COLUMN created_by;") == SQLITE_OK);
  char sql[64];
  snprintf(sql, sizeof sql, "PRAGMA user_version = %d", state_schema_latest() - 1);
  CHECK(raw_exec(db, sql) == SQLITE_OK);
  CHECK(raw_exec(db, "INSERT INTO objects (tenant_id, bucket, key, file, size, etag, mtime_ms) "
                     "SELECT tenant_id, bucket, 'older', 'o_older', 1, 'e', 1 FROM objects") ==
        SQLITE_OK);
  sqlite3_close(db);
  CHECK_OK(state_open(&st, dbpath, &err));
  int v = -1;
  CHECK_OK(state_schema_version(st, &v, &err));
  CHECK(v == state_schema_latest());
  struct store_object so;
  CHECK_OK(state_object_get(st, t.id, "bkt", "older", &so, &err));
  CHECK_STR(so.created_by, "");
  store_object_free(&so);
  CHECK_OK(put_object(st, t.id, "new", "o_new", "key:k_1", &err));
  struct obj_seen seen;
  CHECK_OK(object_page_of(st, t.id, NULL, &seen, &err));
  CHECK_STR(seen.keys, "new old older");
  CHECK_STR(seen.creators, "key:k_1 - -");
  close_and_remove(st);
}

TEST(box_list_filters_and_pages) {
  struct husk_err err = {0};
  struct state *st = open_fresh();
  struct state_tenant t = mk_tenant(st, "t", -1, -1), o = mk_tenant(st, "o", -1, -1);
  /* 30 boxes; created_ms repeats (ties broken by id), inserted out of order. */
  char id[32];
  for (int i = 29; i >= 0; i--) {
    snprintf(id, sizeof id, "b_%02d", i);
    const char *meta = i % 3 == 0   ? "{\"team\":\"red\",\"env\":\"prod\"}"
                       : i % 3 == 1 ? "{\"team\":\"blue\",\"env\":\"prod\"}"
                                    : "{\"team\":\"red\"}";
    CHECK_OK(mk_box(st, t.id, id, 1000 + i / 4, meta, &err));
    if (i % 5 == 0)
      CHECK_OK(state_box_set_state(st, id, NULL, STATE_BOX_STOPPED, NULL, 0, &err));
    else if (i % 5 == 1)
      CHECK_OK(state_box_set_state(st, id, NULL, STATE_BOX_RUNNING, NULL, 0, &err));
  }
  CHECK_OK(mk_box(st, o.id, "b_other", 1001, "{\"team\":\"red\"}", &err));

  /* Paging with limit 7: every box exactly once, in (created_ms, id) order. */
  struct state_box_filter f = {.tenant_id = t.id, .limit = 7};
  char cursor[STATE_CURSOR_SIZE] = "", next[STATE_CURSOR_SIZE];
  struct ids all = {0}, page;
  int pages = 0;
  do {
    f.cursor = cursor;
    CHECK_OK(list_boxes(st, &f, &page, next, &err));
    CHECK(page.n <= 7);
    for (int i = 0; i < page.n; i++) {
      CHECK(!ids_has(&all, page.v[i]));
      snprintf(all.v[all.n], sizeof all.v[0], "%s", page.v[i]);
      all.created[all.n++] = page.created[i];
    }
    snprintf(cursor, sizeof cursor, "%s", next);
    pages++;
  } while (cursor[0] && pages < 20);
  CHECK(all.n == 30 && pages == 5);
  for (int i = 1; i < all.n; i++)
    CHECK(all.created[i - 1] < all.created[i] ||
          (all.created[i - 1] == all.created[i] && strcmp(all.v[i - 1], all.v[i]) < 0));
  CHECK(!ids_has(&all, "b_other"));

  /* Exactly one full page: no next cursor. */
  f = (struct state_box_filter){.tenant_id = o.id, .limit = 1};
  CHECK_OK(list_boxes(st, &f, &page, next, &err));
  CHECK(page.n == 1 && next[0] == '\0');

  /* State filters. */
  f = (struct state_box_filter){.tenant_id = t.id, .state = STATE_BOX_STOPPED};
  CHECK_OK(list_boxes(st, &f, &page, next, &err));
  CHECK(page.n == 6 && ids_has(&page, "b_00") && ids_has(&page, "b_25"));
  f.state = STATE_BOX_RUNNING;
  CHECK_OK(list_boxes(st, &f, &page, next, &err));
  CHECK(page.n == 6 && ids_has(&page, "b_01"));
  f.state = STATE_BOX_LIVE;
  CHECK_OK(list_boxes(st, &f, &page, next, &err));
  CHECK(page.n == 24 && !ids_has(&page, "b_00"));
  f.state = "bogus";
  CHECK_ERR(list_boxes(st, &f, &page, next, &err), EINVAL);

  /* Metadata filters: all pairs must match. */
  const char *k1[] = {"team"}, *v1[] = {"red"};
  f = (struct state_box_filter){.tenant_id = t.id, .meta_keys = k1, .meta_values = v1, .nmeta = 1};
  CHECK_OK(list_boxes(st, &f, &page, next, &err));
  CHECK(page.n == 20);
  const char *k2[] = {"team", "env"}, *v2[] = {"red", "prod"};
  f.meta_keys = k2, f.meta_values = v2, f.nmeta = 2;
  CHECK_OK(list_boxes(st, &f, &page, next, &err));
  CHECK(page.n == 10 && ids_has(&page, "b_03") && !ids_has(&page, "b_02"));
  f.state = STATE_BOX_STOPPED; /* red+prod+stopped: i%3==0 && i%5==0 */
  CHECK_OK(list_boxes(st, &f, &page, next, &err));
  CHECK(page.n == 2 && ids_has(&page, "b_00") && ids_has(&page, "b_15"));
  /* Injection attempts are values, and match nothing. */
  const char *k3[] = {"team"}, *v3[] = {"red' OR '1'='1"};
  f = (struct state_box_filter){.tenant_id = t.id, .meta_keys = k3, .meta_values = v3, .nmeta = 1};
  CHECK_OK(list_boxes(st, &f, &page, next, &err));
  CHECK(page.n == 0);
  const char *k4[] = {"$.team"}, *v4[] = {"red"};
  f.meta_keys = k4, f.meta_values = v4;
  CHECK_OK(list_boxes(st, &f, &page, next, &err));
  CHECK(page.n == 0);
  const char *k5[] = {""}, *v5[] = {"red"};
  f.meta_keys = k5, f.meta_values = v5;
  CHECK_ERR(list_boxes(st, &f, &page, next, &err), EINVAL);
  f.nmeta = STATE_META_FILTERS_MAX + 1;
  CHECK_ERR(list_boxes(st, &f, &page, next, &err), EINVAL);

  /* Limits: 0 is the default, out of range is refused. */
  f = (struct state_box_filter){.tenant_id = t.id, .limit = 0};
  CHECK_OK(list_boxes(st, &f, &page, next, &err));
  CHECK(page.n == 30 && next[0] == '\0');
  f.limit = -1;
  CHECK_ERR(list_boxes(st, &f, &page, next, &err), EINVAL);
  f.limit = STATE_LIST_MAX + 1;
  CHECK_ERR(list_boxes(st, &f, &page, next, &err), EINVAL);
  f.limit = STATE_LIST_MAX;
  CHECK_OK(list_boxes(st, &f, &page, next, &err));
  char small[8];
  f.limit = 1;
  CHECK_ERR(state_box_list(st, &f, collect_box, &page, small, sizeof small, &err), EINVAL);

  /* Cursors from the network are parsed strictly. */
  const char *bad[] = {"abc", "12", ".b_01", "1000.", "99999999999999999999.b_01", "-1.b_01",
                       "1000.b 01", "1000.b_01;", "+1000.b_01"};
  f = (struct state_box_filter){.tenant_id = t.id};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    f.cursor = bad[i];
    CHECK_ERR(list_boxes(st, &f, &page, next, &err), EINVAL);
  }
  /* A forged cursor still only shows the caller's boxes. */
  f = (struct state_box_filter){.tenant_id = o.id, .cursor = "0.a"};
  CHECK_OK(list_boxes(st, &f, &page, next, &err));
  CHECK(page.n == 1 && ids_has(&page, "b_other"));

  /* Callbacks: positive stops quietly, negative is returned. */
  int calls = 0;
  f = (struct state_box_filter){.tenant_id = t.id};
  CHECK(state_box_list(st, &f, stop_after_one, &calls, NULL, 0, &err) == 0 && calls == 1);
  calls = 0;
  CHECK(state_box_list(st, &f, fail_with_minus_five, &calls, NULL, 0, &err) == -5 && calls == 1);
  close_and_remove(st);
}

/* A callback may call back into the state plane: the lock is not held. */
struct reenter {
  struct state *st;
  int gets;
};
static int reenter_cb(void *ctx, const struct state_box *b) {
  struct reenter *r = ctx;
  struct state_box g;
  struct husk_err err;
  if (state_box_get(r->st, b->tenant_id, b->id, &g, &err) == 0) {
    r->gets++;
    state_box_free(&g);
  }
  return 0;
}

TEST(list_callbacks_may_reenter) {
  struct husk_err err = {0};
  struct state *st = open_fresh();
  struct state_tenant t = mk_tenant(st, "t", -1, -1);
  CHECK_OK(mk_box(st, t.id, "b_1", 0, NULL, &err));
  CHECK_OK(mk_box(st, t.id, "b_2", 0, NULL, &err));
  struct reenter r = {st, 0};
  struct state_box_filter f = {.tenant_id = t.id};
  CHECK_OK(state_box_list(st, &f, reenter_cb, &r, NULL, 0, &err));
  CHECK(r.gets == 2);
  close_and_remove(st);
}

/* A listing's verdicts: a positive one stops it with 0, a negative one
 * stops it and is returned. */
struct verdicts {
  int calls, verdict;
};
static int verdict_key_cb(void *ctx, const struct state_key *k) {
  (void)k;
  struct verdicts *v = ctx;
  v->calls++;
  return v->verdict;
}
struct secret_reenter {
  struct state *st;
  int calls, keys;
};
static int count_one_key(void *ctx, const struct state_key *k) {
  (void)k;
  ++*(int *)ctx;
  return 0;
}
/* Reads the state from inside the callback: the state lock must not be
 * held while a listing's callback runs. */
static int secret_reenter_cb(void *ctx, const char *name, int64_t created, int64_t updated) {
  (void)name, (void)created, (void)updated;
  struct secret_reenter *r = ctx;
  struct husk_err err;
  r->calls++;
  if (state_key_list(r->st, NULL, count_one_key, &r->keys, &err) < 0)
    return -1;
  return 0;
}

TEST(list_verdicts_and_callbacks_without_the_lock) {
  struct husk_err err = {0};
  struct state *st = open_fresh();
  struct state_tenant t = mk_tenant(st, "v", -1, -1);
  char key[STATE_KEY_SIZE];
  for (int i = 0; i < 3; i++)
    CHECK_OK(state_key_create(st, t.id, key, sizeof key, NULL, &err));
  struct verdicts v = {0, 0};
  CHECK_OK(state_key_list(st, t.id, verdict_key_cb, &v, &err));
  CHECK(v.calls == 3);
  v = (struct verdicts){0, 1};
  CHECK(state_key_list(st, t.id, verdict_key_cb, &v, &err) == 0 && v.calls == 1);
  v = (struct verdicts){0, -7};
  CHECK(state_key_list(st, NULL, verdict_key_cb, &v, &err) == -7 && v.calls == 1);

  CHECK_OK(state_secret_put(st, t.id, "A", "x", 1, &err));
  CHECK_OK(state_secret_put(st, t.id, "B", "y", 1, &err));
  struct secret_reenter r = {st, 0, 0};
  alarm(30); /* a listing that kept the lock would deadlock here */
  CHECK_OK(state_secret_list(st, t.id, secret_reenter_cb, &r, &err));
  alarm(0);
  CHECK(r.calls == 2 && r.keys == 6);
  close_and_remove(st);
}

TEST(quotas) {
  struct husk_err err = {0};
  struct state *st = open_fresh();
  struct state_tenant t = mk_tenant(st, "q", 2, 1000);
  struct state_box b = box_template(t.id, "b_1");
  b.memory = 400;
  CHECK_OK(state_box_insert(st, &b, &err));
  snprintf(b.id, sizeof b.id, "b_2");
  CHECK_OK(state_box_insert(st, &b, &err));
  snprintf(b.id, sizeof b.id, "b_3");
  b.memory = 1;
  CHECK_ERR(state_box_insert(st, &b, &err), EDQUOT); /* 3 boxes > 2 */
  int64_t n = -1, mem = -1;
  CHECK_OK(state_box_count_live(st, t.id, &n, &mem, &err));
  CHECK(n == 2 && mem == 800);

  CHECK_OK(state_box_set_state(st, "b_1", NULL, STATE_BOX_STOPPING, NULL, 0, &err));
  CHECK_OK(state_box_count_live(st, t.id, &n, &mem, &err));
  CHECK(n == 2 && mem == 800); /* stopping still holds its resources */
  CHECK_OK(state_box_set_state(st, "b_1", NULL, STATE_BOX_STOPPED, NULL, 0, &err));
  CHECK_OK(state_box_count_live(st, t.id, &n, &mem, &err));
  CHECK(n == 1 && mem == 400);

  b.memory = 601;
  CHECK_ERR(state_box_insert(st, &b, &err), EDQUOT); /* 400 + 601 > 1000 */
  b.memory = 600;
  CHECK_OK(state_box_insert(st, &b, &err)); /* exactly at the bound */

  /* Overflowing sums are refused, not wrapped. */
  CHECK_OK(state_tenant_set_quota(st, t.id, 10, INT64_MAX, &err));
  snprintf(b.id, sizeof b.id, "b_4");
  b.memory = INT64_MAX;
  CHECK_ERR(state_box_insert(st, &b, &err), EDQUOT);

  CHECK_OK(state_tenant_set_quota(st, t.id, STATE_UNLIMITED, STATE_UNLIMITED, &err));
  CHECK_OK(state_box_insert(st, &b, &err));
  CHECK_OK(state_tenant_set_quota(st, t.id, 0, STATE_UNLIMITED, &err)); /* suspended */
  snprintf(b.id, sizeof b.id, "b_5");
  b.memory = 0;
  CHECK_ERR(state_box_insert(st, &b, &err), EDQUOT);
  CHECK_ERR(state_box_count_live(st, "t_x y", &n, &mem, &err), EINVAL);
  CHECK_OK(state_box_count_live(st, "t_unknown", &n, &mem, &err));
  CHECK(n == 0 && mem == 0);
  close_and_remove(st);
}

TEST(quota_defaults_apply_to_unset_quotas) {
  struct husk_err err = {0};
  struct state *st = open_fresh();
  struct state_tenant t = mk_tenant(st, "unset", STATE_UNLIMITED, STATE_UNLIMITED);
  struct state_tenant own = mk_tenant(st, "own", 3, 10000);
  state_set_tenant_defaults(st, 2, 1000);
  struct state_box b = box_template(t.id, "b_d1");
  b.memory = 400;
  CHECK_OK(state_box_insert(st, &b, &err));
  snprintf(b.id, sizeof b.id, "b_d2");
  CHECK_OK(state_box_insert(st, &b, &err));
  snprintf(b.id, sizeof b.id, "b_d3");
  b.memory = 1;
  CHECK_ERR(state_box_insert(st, &b, &err), EDQUOT); /* the default: 2 boxes */
  CHECK(strstr(err.msg, "daemon's default") != NULL);
  /* A tenant's own quotas win over the defaults. */
  struct state_box o = box_template(own.id, "b_o1");
  o.memory = 3000;
  CHECK_OK(state_box_insert(st, &o, &err));
  snprintf(o.id, sizeof o.id, "b_o2");
  CHECK_OK(state_box_insert(st, &o, &err));
  snprintf(o.id, sizeof o.id, "b_o3");
  CHECK_OK(state_box_insert(st, &o, &err));
  snprintf(o.id, sizeof o.id, "b_o4");
  CHECK_ERR(state_box_insert(st, &o, &err), EDQUOT);
  CHECK(strstr(err.msg, "daemon's default") == NULL);
  /* The memory default. */
  state_set_tenant_defaults(st, 10, 1000);
  b.memory = 201;
  CHECK_ERR(state_box_insert(st, &b, &err), EDQUOT); /* 800 + 201 > 1000 */
  b.memory = 200;
  CHECK_OK(state_box_insert(st, &b, &err));
  /* Unlimited defaults: as before. */
  state_set_tenant_defaults(st, STATE_UNLIMITED, STATE_UNLIMITED);
  snprintf(b.id, sizeof b.id, "b_d4");
  b.memory = 1 << 30;
  CHECK_OK(state_box_insert(st, &b, &err));
  close_and_remove(st);
}

/* ---- processes ---- */

static int collect_pids(void *ctx, const struct state_proc *p) {
  char *out = ctx;
  char buf[32];
  snprintf(buf, sizeof buf, "%lld:%s,", (long long)p->pid, p->state);
  strcat(out, buf);
  return 0;
}

TEST(processes) {
  struct husk_err err = {0};
  struct state *st = open_fresh();
  struct state_tenant t = mk_tenant(st, "p", -1, -1);
  CHECK_OK(mk_box(st, t.id, "b_p", 0, NULL, &err));
  struct state_proc p = {.pid = 10, .cmd_json = "[\"python3\",\"-c\",\"1\"]"};
  snprintf(p.box_id, sizeof p.box_id, "b_p");
  snprintf(p.tag, sizeof p.tag, "server");
  CHECK_OK(state_proc_insert(st, &p, &err));
  CHECK_ERR(state_proc_insert(st, &p, &err), EEXIST); /* pid 10 is running */
  p.pid = 11;
  CHECK_OK(state_proc_insert(st, &p, &err));
  p.pid = 12;
  CHECK_OK(state_proc_insert(st, &p, &err));

  CHECK_OK(state_proc_set_exit(st, "b_p", 10, 3, 0, 0, &err));
  CHECK_ERR(state_proc_set_exit(st, "b_p", 10, 3, 0, 0, &err), ENOENT); /* not running now */
  CHECK_OK(state_proc_set_exit(st, "b_p", 11, 99, 9, 0, &err));
  CHECK_ERR(state_proc_set_exit(st, "b_p", 12, 256, 0, 0, &err), EINVAL);
  CHECK_ERR(state_proc_set_exit(st, "b_p", 12, 0, 500, 0, &err), EINVAL);

  struct state_proc g;
  CHECK_OK(state_proc_get(st, t.id, "b_p", 10, &g, &err));
  CHECK_STR(g.state, STATE_PROC_EXITED);
  CHECK(g.exit_code == 3 && g.signal == 0 && g.ended_ms > 0);
  CHECK_STR(g.cmd_json, "[\"python3\",\"-c\",\"1\"]");
  CHECK_STR(g.tag, "server");
  state_proc_free(&g);
  CHECK_OK(state_proc_get(st, t.id, "b_p", 11, &g, &err));
  CHECK(g.exit_code == -1 && g.signal == 9);
  state_proc_free(&g);

  /* pid reuse: a new row; "process 10" is the newest one. */
  p.pid = 10;
  snprintf(p.tag, sizeof p.tag, "second");
  CHECK_OK(state_proc_insert(st, &p, &err));
  CHECK_OK(state_proc_get(st, NULL, "b_p", 10, &g, &err));
  CHECK_STR(g.state, STATE_PROC_RUNNING);
  CHECK_STR(g.tag, "second");
  state_proc_free(&g);

  char out[256] = "";
  CHECK_OK(state_proc_list(st, t.id, "b_p", 0, 0, collect_pids, out, &err));
  CHECK_STR(out, "10:running,12:running,11:exited,10:exited,");
  out[0] = '\0';
  CHECK_OK(state_proc_list(st, t.id, "b_p", 1, 0, collect_pids, out, &err));
  CHECK_STR(out, "10:running,12:running,");
  out[0] = '\0';
  CHECK_OK(state_proc_list(st, t.id, "b_p", 0, 1, collect_pids, out, &err));
  CHECK_STR(out, "10:running,");

  /* An exit init re-sends after a daemon crash names the exec that started
   * the process: it does not end a newer process with the same pid. */
  p.pid = 14;
  p.exec_id = 501;
  CHECK_OK(state_proc_insert(st, &p, &err));
  CHECK_ERR(state_proc_set_exit_of(st, "b_p", 14, 500, 1, 0, 0, &err), ENOENT);
  CHECK_OK(state_proc_get(st, NULL, "b_p", 14, &g, &err));
  CHECK_STR(g.state, STATE_PROC_RUNNING);
  state_proc_free(&g);
  CHECK_OK(state_proc_set_exit_of(st, "b_p", 14, 501, 4, 0, 0, &err));
  CHECK_ERR(state_proc_set_exit_of(st, "b_p", 14, 501, 4, 0, 0, &err),
            ENOENT); /* again */
  CHECK_OK(state_proc_get(st, NULL, "b_p", 14, &g, &err));
  CHECK(!strcmp(g.state, STATE_PROC_EXITED) && g.exit_code == 4);
  state_proc_free(&g);
  CHECK_ERR(state_proc_set_exit_of(st, "b_p", 12, -1, 4, 0, 0, &err), EINVAL);
  p.exec_id = 0;

  CHECK_OK(state_proc_set_lost(st, "b_p", 12, 0, &err));
  /* Ending the box ends what still runs in it, in the same transaction. */
  CHECK_OK(state_box_set_state(st, "b_p", NULL, STATE_BOX_STOPPED, NULL, 0, &err));
  out[0] = '\0';
  CHECK_OK(state_proc_list(st, t.id, "b_p", 0, 0, collect_pids, out, &err));
  CHECK_STR(out, "14:exited,10:lost,12:lost,11:exited,10:exited,");
  p.pid = 13;
  CHECK_ERR(state_proc_insert(st, &p, &err), ESTALE);

  /* Input. */
  CHECK_OK(mk_box(st, t.id, "b_q", 0, NULL, &err));
  snprintf(p.box_id, sizeof p.box_id, "b_q");
  p.cmd_json = "{\"argv\":1}";
  CHECK_ERR(state_proc_insert(st, &p, &err), EINVAL);
  p.cmd_json = "not json";
  CHECK_ERR(state_proc_insert(st, &p, &err), EINVAL);
  p.cmd_json = NULL;
  CHECK_ERR(state_proc_insert(st, &p, &err), EINVAL);
  p.cmd_json = "[]";
  p.pid = 0;
  CHECK_ERR(state_proc_insert(st, &p, &err), EINVAL);
  p.pid = 5;
  snprintf(p.box_id, sizeof p.box_id, "b_none");
  CHECK_ERR(state_proc_insert(st, &p, &err), ENOENT);
  CHECK_ERR(state_proc_get(st, NULL, "b_q", 5, &g, &err), ENOENT);
  CHECK_ERR(state_proc_list(st, NULL, "b_q", 0, 5000, collect_pids, out, &err), EINVAL);

  /* Deleting an ended box deletes its processes. */
  CHECK_OK(state_box_delete(st, NULL, "b_p", &err));
  sqlite3 *db = raw_open(dbpath);
  CHECK(raw_int(db, "SELECT count(*) FROM processes WHERE box_id = 'b_p'") == 0);
  sqlite3_close(db);
  close_and_remove(st);
}

/* The limits of a process are kept with it, and the one that ended it is
 * recorded once, while it runs. */
TEST(process_limits) {
  struct husk_err err = {0};
  struct state *st = open_fresh();
  struct state_tenant t = mk_tenant(st, "pl", -1, -1);
  CHECK_OK(mk_box(st, t.id, "b_l", 0, NULL, &err));
  struct state_proc p = {.pid = 20,
                         .cmd_json = "[\"sleep\",\"9\"]",
                         .exec_id = 7,
                         .timeout_ms = 1500,
                         .output_limit = 4096};
  snprintf(p.box_id, sizeof p.box_id, "b_l");
  CHECK_OK(state_proc_insert(st, &p, &err));
  struct state_proc g;
  CHECK_OK(state_proc_get(st, t.id, "b_l", 20, &g, &err));
  CHECK(g.timeout_ms == 1500 && g.output_limit == 4096 && g.exec_id == 7);
  CHECK_STR(g.limit_hit, "");
  state_proc_free(&g);

  /* Another exec's process with that pid is not this one. */
  CHECK_ERR(state_proc_set_limit_hit(st, "b_l", 20, 8, STATE_PROC_LIMIT_TIMEOUT, &err), ENOENT);
  CHECK_ERR(state_proc_set_limit_hit(st, "b_l", 20, 7, "memory", &err), EINVAL);
  CHECK_ERR(state_proc_set_limit_hit(st, "b_l", 20, -1, STATE_PROC_LIMIT_TIMEOUT, &err), EINVAL);
  CHECK_OK(state_proc_set_limit_hit(st, "b_l", 20, 7, STATE_PROC_LIMIT_OUTPUT, &err));
  /* The first limit is kept. */
  CHECK_OK(state_proc_set_limit_hit(st, "b_l", 20, 7, STATE_PROC_LIMIT_TIMEOUT, &err));
  CHECK_OK(state_proc_get(st, NULL, "b_l", 20, &g, &err));
  CHECK_STR(g.limit_hit, STATE_PROC_LIMIT_OUTPUT);
  state_proc_free(&g);
  /* It stays after the exit; an ended process gets none. */
  CHECK_OK(state_proc_set_exit_of(st, "b_l", 20, 7, 0, 9, 0, &err));
  CHECK_ERR(state_proc_set_limit_hit(st, "b_l", 20, 7, STATE_PROC_LIMIT_TIMEOUT, &err), ENOENT);
  CHECK_OK(state_proc_get(st, NULL, "b_l", 20, &g, &err));
  CHECK(!strcmp(g.state, STATE_PROC_EXITED) && g.signal == 9);
  CHECK_STR(g.limit_hit, STATE_PROC_LIMIT_OUTPUT);
  state_proc_free(&g);

  /* Without limits (and limits that cannot be). */
  p.pid = 21;
  p.timeout_ms = p.output_limit = 0;
  CHECK_OK(state_proc_insert(st, &p, &err));
  CHECK_OK(state_proc_get(st, NULL, "b_l", 21, &g, &err));
  CHECK(g.timeout_ms == 0 && g.output_limit == 0);
  state_proc_free(&g);
  p.pid = 22;
  p.timeout_ms = -1;
  CHECK_ERR(state_proc_insert(st, &p, &err), EINVAL);
  close_and_remove(st);
}

/* ---- audit ---- */

static struct state_audit audit_rec(const char *tenant, const char *key, const char *action,
                                    const char *box, const char *outcome, int status) {
  struct state_audit a = {.status = status};
  snprintf(a.tenant_id, sizeof a.tenant_id, "%s", tenant);
  snprintf(a.key_id, sizeof a.key_id, "%s", key);
  snprintf(a.action, sizeof a.action, "%s", action);
  snprintf(a.box_id, sizeof a.box_id, "%s", box);
  snprintf(a.outcome, sizeof a.outcome, "%s", outcome);
  return a;
}

struct audits {
  struct state_audit v[64];
  int n;
};
static int collect_audit(void *ctx, const struct state_audit *a) {
  struct audits *out = ctx;
  if (out->n < 64)
    out->v[out->n++] = *a;
  return 0;
}
static int list_audit(struct state *st, const struct state_audit_filter *f, struct audits *out,
                      struct husk_err *err) {
  out->n = 0;
  return state_audit_list(st, f, collect_audit, out, err);
}

TEST(audit_log) {
  struct husk_err err = {0};
  struct state *st = open_fresh();
  int64_t ids[10];
  for (int i = 0; i < 10; i++) {
    struct state_audit a = audit_rec(i % 2 ? "t_a" : "t_b", "k_1",
                                     i % 3 ? "box.exec" : "box.create",
                                     i < 5 ? "b_1" : "b_2", i == 9 ? "denied" : "ok",
                                     i == 9 ? 403 : 200);
    a.ts_ms = 1000 + i * 10;
    CHECK_OK(state_audit_add(st, &a, &ids[i], &err));
    if (i > 0)
      CHECK(ids[i] > ids[i - 1]);
  }
  struct audits out;
  struct state_audit_filter f = {0};
  CHECK_OK(list_audit(st, &f, &out, &err));
  CHECK(out.n == 10 && out.v[0].id == ids[0] && out.v[9].id == ids[9]);
  CHECK_STR(out.v[9].outcome, "denied");
  CHECK(out.v[9].status == 403 && out.v[9].ts_ms == 1090);
  CHECK_STR(out.v[9].key_id, "k_1");

  f = (struct state_audit_filter){.tenant_id = "t_a"};
  CHECK_OK(list_audit(st, &f, &out, &err));
  CHECK(out.n == 5);
  for (int i = 0; i < out.n; i++)
    CHECK_STR(out.v[i].tenant_id, "t_a");
  f = (struct state_audit_filter){.tenant_id = "t_a", .box_id = "b_2", .action = "box.exec"};
  CHECK_OK(list_audit(st, &f, &out, &err)); /* i in {5,7}: odd, >=5, i%3 != 0 */
  CHECK(out.n == 2 && out.v[0].id == ids[5] && out.v[1].id == ids[7]);
  f = (struct state_audit_filter){.since_ms = 1020, .until_ms = 1050};
  CHECK_OK(list_audit(st, &f, &out, &err));
  CHECK(out.n == 3 && out.v[0].ts_ms == 1020 && out.v[2].ts_ms == 1040);
  f = (struct state_audit_filter){.after_id = ids[6], .limit = 2};
  CHECK_OK(list_audit(st, &f, &out, &err));
  CHECK(out.n == 2 && out.v[0].id == ids[7] && out.v[1].id == ids[8]);
  f = (struct state_audit_filter){.newest_first = 1, .limit = 3};
  CHECK_OK(list_audit(st, &f, &out, &err));
  CHECK(out.n == 3 && out.v[0].id == ids[9] && out.v[2].id == ids[7]);
  f.before_id = out.v[2].id; /* next page, newest first */
  CHECK_OK(list_audit(st, &f, &out, &err));
  CHECK(out.n == 3 && out.v[0].id == ids[6] && out.v[2].id == ids[4]);
  f = (struct state_audit_filter){.action = "box.delete"};
  CHECK_OK(list_audit(st, &f, &out, &err));
  CHECK(out.n == 0);
  f = (struct state_audit_filter){.limit = STATE_LIST_MAX + 1};
  CHECK_ERR(list_audit(st, &f, &out, &err), EINVAL);
  f = (struct state_audit_filter){.since_ms = -1};
  CHECK_ERR(list_audit(st, &f, &out, &err), EINVAL);
  f = (struct state_audit_filter){.tenant_id = "t_a' OR '1'='1"};
  CHECK_ERR(list_audit(st, &f, &out, &err), EINVAL);

  /* ts 0 is now; hostile echoes are kept, sanitized; daemon fields strict. */
  struct state_audit a = audit_rec("", "", "box.get", "b_\n\x1b[2J", "denied", 404);
  snprintf(a.detail, sizeof a.detail, "path=/x\ny \xff");
  int64_t before = state_now_ms(), id;
  CHECK_OK(state_audit_add(st, &a, &id, &err));
  f = (struct state_audit_filter){.after_id = ids[9]};
  CHECK_OK(list_audit(st, &f, &out, &err));
  CHECK(out.n == 1 && out.v[0].ts_ms >= before);
  CHECK_STR(out.v[0].box_id, "b_??[2J");
  CHECK_STR(out.v[0].detail, "path=/x?y ?");
  CHECK_STR(out.v[0].tenant_id, "");
  a = audit_rec("t_a", "k_1", "", "", "ok", 200);
  CHECK_ERR(state_audit_add(st, &a, NULL, &err), EINVAL);
  a = audit_rec("t a", "k_1", "box.get", "", "ok", 200);
  CHECK_ERR(state_audit_add(st, &a, NULL, &err), EINVAL);
  a = audit_rec("t_a", "k_1", "box.get", "", "", 200);
  CHECK_ERR(state_audit_add(st, &a, NULL, &err), EINVAL);
  a = audit_rec("t_a", "k_1", "box.get", "", "ok", 200);
  memset(a.detail, 'x', sizeof a.detail); /* overflowed by the caller */
  CHECK_ERR(state_audit_add(st, &a, NULL, &err), EINVAL);

  /* The database itself refuses to rewrite history. */
  sqlite3 *db = raw_open(dbpath);
  CHECK(raw_exec(db, "UPDATE audit SET outcome = 'ok' WHERE outcome = 'denied'") ==
        SQLITE_CONSTRAINT);
  CHECK(raw_exec(db, "DELETE FROM audit") == SQLITE_CONSTRAINT);
  CHECK(raw_int(db, "SELECT count(*) FROM audit") == 11);
  sqlite3_close(db);
  close_and_remove(st);
}

/* ---- threads ---- */

#define THREADS 8
#define ITERS 60

struct worker {
  struct state *st;
  const char *tenant[2];
  const char *key;
  int n;
  int errors;
  char first_error[HUSK_ERR_MSG_MAX + 64];
};

static void worker_error(struct worker *w, const struct husk_err *err, const char *what) {
  if (w->errors++ == 0)
    snprintf(w->first_error, sizeof w->first_error, "%s: %s", what, err->msg);
}

static int count_cb(void *ctx, const struct state_box *b) {
  (*(int *)ctx)++;
  return 0;
}

static void *worker_main(void *arg) {
  struct worker *w = arg;
  struct husk_err err;
  for (int i = 0; i < ITERS; i++) {
    const char *tenant = w->tenant[i % 2];
    char id[STATE_BOX_ID_SIZE];
    snprintf(id, sizeof id, "b_w%d_%d", w->n, i);
    struct state_box b = box_template(tenant, id);
    b.metadata_json = "{\"worker\":\"yes\"}";
    if (state_box_insert(w->st, &b, &err) < 0)
      worker_error(w, &err, "insert");
    struct state_box g;
    if (state_box_get(w->st, tenant, id, &g, &err) < 0)
      worker_error(w, &err, "get");
    else
      state_box_free(&g);
    if (state_box_set_state(w->st, id, STATE_BOX_CREATING, STATE_BOX_RUNNING, NULL, 0, &err) < 0)
      worker_error(w, &err, "set_state");
    struct state_proc p = {.pid = 1 + i, .cmd_json = "[\"true\"]"};
    snprintf(p.box_id, sizeof p.box_id, "%s", id);
    if (state_proc_insert(w->st, &p, &err) < 0)
      worker_error(w, &err, "proc_insert");
    struct state_audit a = audit_rec("t_x", "k_x", "box.create", id, "ok", 201);
    if (state_audit_add(w->st, &a, NULL, &err) < 0)
      worker_error(w, &err, "audit");
    struct state_key k;
    if (state_key_authenticate(w->st, w->key, &k, &err) < 0)
      worker_error(w, &err, "auth");
    int n = 0;
    struct state_box_filter f = {.tenant_id = tenant, .limit = 10, .state = STATE_BOX_LIVE};
    if (state_box_list(w->st, &f, count_cb, &n, NULL, 0, &err) < 0)
      worker_error(w, &err, "list");
    int64_t live, mem;
    if (state_box_count_live(w->st, tenant, &live, &mem, &err) < 0)
      worker_error(w, &err, "count");
    if (i % 3 == 0 &&
        state_box_set_state(w->st, id, NULL, STATE_BOX_STOPPED, "done", 0, &err) < 0)
      worker_error(w, &err, "stop");
  }
  return NULL;
}

TEST(eight_threads_at_once) {
  struct husk_err err = {0};
  struct state *st = open_fresh();
  struct state_tenant a = mk_tenant(st, "a", -1, -1), b = mk_tenant(st, "b", -1, -1);
  char key[STATE_KEY_SIZE];
  CHECK_OK(state_key_create(st, a.id, key, sizeof key, NULL, &err));
  pthread_t th[THREADS];
  struct worker w[THREADS];
  for (int i = 0; i < THREADS; i++) {
    w[i] = (struct worker){.st = st, .tenant = {a.id, b.id}, .key = key, .n = i};
    CHECK(pthread_create(&th[i], NULL, worker_main, &w[i]) == 0);
  }
  for (int i = 0; i < THREADS; i++) {
    pthread_join(th[i], NULL);
    if (w[i].errors) {
      printf("#   thread %d: %d errors, first: %s\n", i, w[i].errors, w[i].first_error);
      unit_cur_failed = 1;
    }
  }
  int64_t live_a, live_b, mem;
  CHECK_OK(state_box_count_live(st, a.id, &live_a, &mem, &err));
  CHECK_OK(state_box_count_live(st, b.id, &live_b, &mem, &err));
  CHECK(live_a + live_b == THREADS * (ITERS - ITERS / 3));
  int total = 0;
  struct state_box_filter f = {.limit = STATE_LIST_MAX};
  CHECK_OK(state_box_list(st, &f, count_cb, &total, NULL, 0, &err));
  CHECK(total == THREADS * ITERS);
  sqlite3 *db = raw_open(dbpath);
  CHECK(raw_int(db, "SELECT count(*) FROM audit") == THREADS * ITERS);
  CHECK(raw_int(db, "SELECT count(*) FROM processes WHERE state = 'lost'") ==
        THREADS * (ITERS / 3));
  sqlite3_close(db);
  close_and_remove(st);
}

/* Concurrent creates cannot overshoot a quota together. */
struct racer {
  struct state *st;
  const char *tenant;
  int n, ok, quota, other;
};
static void *racer_main(void *arg) {
  struct racer *r = arg;
  struct husk_err err;
  for (int i = 0; i < 5; i++) {
    char id[STATE_BOX_ID_SIZE];
    snprintf(id, sizeof id, "b_r%d_%d", r->n, i);
    struct state_box b = box_template(r->tenant, id);
    if (state_box_insert(r->st, &b, &err) == 0)
      r->ok++;
    else if (err.code == EDQUOT)
      r->quota++;
    else
      r->other++;
  }
  return NULL;
}

TEST(quota_holds_under_concurrency) {
  struct state *st = open_fresh();
  struct state_tenant t = mk_tenant(st, "race", 10, STATE_UNLIMITED);
  pthread_t th[THREADS];
  struct racer r[THREADS];
  for (int i = 0; i < THREADS; i++) {
    r[i] = (struct racer){.st = st, .tenant = t.id, .n = i};
    pthread_create(&th[i], NULL, racer_main, &r[i]);
  }
  int ok = 0, quota = 0, other = 0;
  for (int i = 0; i < THREADS; i++) {
    pthread_join(th[i], NULL);
    ok += r[i].ok, quota += r[i].quota, other += r[i].other;
  }
  CHECK(ok == 10 && quota == THREADS * 5 - 10 && other == 0);
  close_and_remove(st);
}

/* ---- crashes ---- */

static const char *kill_at;
static void kill_hook(const char *point) {
  if (kill_at && !strcmp(point, kill_at))
    raise(SIGKILL);
}

/* Fork a child that opens the database, arms the hook at `point`, runs
 * `fn` and would exit 0; returns true if the child died of SIGKILL. */
static bool child_killed_at(const char *point, void (*fn)(struct state *)) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    struct state *st = NULL;
    struct husk_err err;
    kill_at = point;
    state_fault_hook = kill_hook;
    if (state_open(&st, dbpath, &err) < 0)
      _exit(3);
    fn(st);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

static void do_nothing(struct state *st) { (void)st; }
static void do_stop_box(struct state *st) {
  struct husk_err err;
  if (state_box_set_state(st, "b_crash", NULL, STATE_BOX_STOPPED, "crash", 0, &err) < 0)
    _exit(4);
}
static void do_insert_box(struct state *st) {
  struct husk_err err;
  struct state_tenant t;
  if (state_tenant_get(st, getenv("HUSK_TEST_TENANT"), &t, &err) < 0 ||
      mk_box(st, t.id, "b_new", 0, NULL, &err) < 0)
    _exit(4);
}

/* ---- durability: every commit synced, or deferred to one sync ---- */

static uint64_t seq_of(struct state *st, uint64_t *field) {
  (void)st;
  return __atomic_load_n(field, __ATOMIC_ACQUIRE);
}

TEST(commits_reach_the_disk_before_the_call_returns) {
  struct husk_err err = {0};
  struct state *st = open_fresh();
  mk_tenant(st, "d1", -1, -1);
  uint64_t c0 = seq_of(st, &st->commit_seq), s0 = st->syncs;
  CHECK(c0 > 0);
  CHECK(st->synced_seq == c0);
  /* Two changes outside a deferral: two syncs, each before its return. */
  struct state_tenant t = mk_tenant(st, "d2", -1, -1);
  CHECK(st->synced_seq == seq_of(st, &st->commit_seq));
  CHECK_OK(mk_box(st, t.id, "b_d1", 0, NULL, &err));
  CHECK(st->synced_seq == seq_of(st, &st->commit_seq));
  CHECK(st->syncs >= s0 + 2);
  /* Deferred: nothing synced until the end, then one sync for all. */
  state_defer_begin(st);
  uint64_t before = st->syncs, synced = st->synced_seq;
  CHECK_OK(mk_box(st, t.id, "b_d2", 0, NULL, &err));
  struct state_audit rec = {.action = "box.create", .outcome = "ok", .status = 201};
  snprintf(rec.tenant_id, sizeof rec.tenant_id, "%s", t.id);
  CHECK_OK(state_audit_add(st, &rec, NULL, &err));
  CHECK(seq_of(st, &st->commit_seq) >= synced + 2);
  CHECK(st->synced_seq == synced);
  CHECK(st->syncs == before);
  CHECK_OK(state_defer_end(st, &err));
  CHECK(st->synced_seq == seq_of(st, &st->commit_seq));
  CHECK(st->syncs == before + 1);
  /* A deferral that committed nothing costs nothing; a second end is a
   * no-op. */
  state_defer_begin(st);
  CHECK_OK(state_defer_end(st, &err));
  CHECK_OK(state_defer_end(st, &err));
  CHECK(st->syncs == before + 1);
  close_and_remove(st);
}

/* A request that only reads must not reply with what another request
 * committed but has not synced yet: its end syncs that too. */
struct reader_arg {
  struct state *st;
  const char *tenant;
  int rc;
  uint64_t commit_seen, synced_after;
};
static void *reader_main(void *arg) {
  struct reader_arg *a = arg;
  struct husk_err err;
  state_defer_begin(a->st);
  struct state_box b;
  a->rc = state_box_get(a->st, a->tenant, "b_seen", &b, &err); /* sees the other's box */
  if (a->rc == 0)
    state_box_free(&b);
  a->commit_seen = __atomic_load_n(&a->st->commit_seq, __ATOMIC_ACQUIRE);
  if (state_defer_end(a->st, &err) < 0)
    a->rc = -1;
  pthread_mutex_lock(&a->st->sync_lock);
  a->synced_after = a->st->synced_seq;
  pthread_mutex_unlock(&a->st->sync_lock);
  return NULL;
}

TEST(a_reply_never_shows_what_is_not_yet_durable) {
  struct husk_err err = {0};
  struct state *st = open_fresh();
  struct state_tenant t = mk_tenant(st, "seen", -1, -1);
  /* This thread commits a box and has not ended its deferral yet. */
  state_defer_begin(st);
  CHECK_OK(mk_box(st, t.id, "b_seen", 0, NULL, &err));
  CHECK(st->synced_seq < seq_of(st, &st->commit_seq));
  /* Another request reads it and replies: by then it is durable. */
  struct reader_arg a = {.st = st, .tenant = t.id};
  pthread_t th;
  CHECK(pthread_create(&th, NULL, reader_main, &a) == 0);
  pthread_join(th, NULL);
  CHECK(a.rc == 0);
  CHECK(a.synced_after >= a.commit_seen);
  CHECK_OK(state_defer_end(st, &err));
  close_and_remove(st);
}

struct deferrer {
  struct state *st;
  const char *tenant;
  int n, errors;
};
static void *deferrer_main(void *arg) {
  struct deferrer *d = arg;
  struct husk_err err;
  for (int i = 0; i < 20; i++) {
    state_defer_begin(d->st);
    char id[STATE_BOX_ID_SIZE];
    snprintf(id, sizeof id, "b_g%d_%d", d->n, i);
    struct state_box b = box_template(d->tenant, id);
    struct state_audit rec = {.action = "box.create", .outcome = "ok", .status = 201};
    snprintf(rec.box_id, sizeof rec.box_id, "%s", id);
    if (state_box_insert(d->st, &b, &err) < 0 || state_audit_add(d->st, &rec, NULL, &err) < 0)
      d->errors++;
    uint64_t mine = __atomic_load_n(&d->st->commit_seq, __ATOMIC_ACQUIRE);
    if (state_defer_end(d->st, &err) < 0)
      d->errors++;
    /* Everything up to (at least) this thread's own commits is on disk. */
    pthread_mutex_lock(&d->st->sync_lock);
    if (d->st->synced_seq < mine && d->st->synced_seq < mine - THREADS * 2)
      d->errors++;
    pthread_mutex_unlock(&d->st->sync_lock);
  }
  return NULL;
}

TEST(deferred_commits_of_many_threads_share_syncs) {
  struct state *st = open_fresh();
  struct state_tenant t = mk_tenant(st, "group", -1, -1);
  pthread_t th[THREADS];
  struct deferrer d[THREADS];
  uint64_t c0 = seq_of(st, &st->commit_seq), s0 = st->syncs;
  for (int i = 0; i < THREADS; i++) {
    d[i] = (struct deferrer){.st = st, .tenant = t.id, .n = i};
    CHECK(pthread_create(&th[i], NULL, deferrer_main, &d[i]) == 0);
  }
  for (int i = 0; i < THREADS; i++) {
    pthread_join(th[i], NULL);
    CHECK(d[i].errors == 0);
  }
  uint64_t commits = seq_of(st, &st->commit_seq) - c0, syncs = st->syncs - s0;
  printf("# %llu commits, %llu syncs\n", (unsigned long long)commits, (unsigned long long)syncs);
  CHECK(commits == THREADS * 20 * 2);
  CHECK(syncs <= THREADS * 20); /* at most one per deferral, never one per commit */
  CHECK(st->synced_seq == seq_of(st, &st->commit_seq));
  sqlite3 *db = raw_open(dbpath);
  CHECK(raw_int(db, "SELECT count(*) FROM audit") == THREADS * 20);
  sqlite3_close(db);
  close_and_remove(st);
}

static int failing_fdatasync(int fd) {
  (void)fd;
  errno = EIO;
  return -1;
}

TEST(a_failed_sync_is_reported_and_never_forgotten) {
  struct husk_err err = {0};
  struct state *st = open_fresh();
  struct state_tenant t = mk_tenant(st, "disk", -1, -1);
  /* Deferred: the end reports it. */
  db_fdatasync = failing_fdatasync;
  state_defer_begin(st);
  CHECK_OK(mk_box(st, t.id, "b_io1", 0, NULL, &err));
  CHECK_ERR(state_defer_end(st, &err), EIO);
  CHECK(strstr(err.msg, "could not be written to disk") != NULL);
  /* The disk "recovers": what failed to reach it may be lost, so every
   * later change fails too instead of claiming durability. */
  db_fdatasync = fdatasync;
  husk_err_clear(&err);
  CHECK(mk_box(st, t.id, "b_io2", 0, NULL, &err) < 0);
  CHECK(err.code != 0);
  state_defer_begin(st);
  CHECK(mk_box(st, t.id, "b_io3", 0, NULL, &err) == 0);
  CHECK_ERR(state_defer_end(st, &err), EIO);
  close_and_remove(st);
}

TEST(crash_inside_transactions_is_all_or_nothing) {
  struct husk_err err = {0};
  fresh_dir();

  /* Killed during the first migration: the next open migrates cleanly. */
  CHECK(child_killed_at("migrate", do_nothing));
  sqlite3 *db = raw_open(dbpath);
  CHECK(raw_int(db, "PRAGMA user_version") == 0);
  CHECK(raw_int(db, "SELECT count(*) FROM sqlite_schema") == 0);
  sqlite3_close(db);
  struct state *st = NULL;
  CHECK_OK(state_open(&st, dbpath, &err));
  int v = 0;
  CHECK_OK(state_schema_version(st, &v, &err));
  CHECK(v == state_schema_latest());

  /* A box with two running processes; the child is killed between the
   * box's update and its processes' update: neither may show. */
  struct state_tenant t = mk_tenant(st, "crash", -1, -1);
  CHECK_OK(mk_box(st, t.id, "b_crash", 0, NULL, &err));
  CHECK_OK(state_box_set_state(st, "b_crash", NULL, STATE_BOX_RUNNING, NULL, 0, &err));
  struct state_proc p = {.pid = 5, .cmd_json = "[\"sleep\"]"};
  snprintf(p.box_id, sizeof p.box_id, "b_crash");
  CHECK_OK(state_proc_insert(st, &p, &err));
  p.pid = 6;
  CHECK_OK(state_proc_insert(st, &p, &err));
  state_close(st);

  CHECK(child_killed_at("box_end", do_stop_box));
  CHECK_OK(state_open(&st, dbpath, &err));
  struct state_box g;
  CHECK_OK(state_box_get(st, NULL, "b_crash", &g, &err));
  CHECK_STR(g.state, STATE_BOX_RUNNING);
  CHECK(g.ended_ms == 0);
  state_box_free(&g);
  char out[128] = "";
  CHECK_OK(state_proc_list(st, NULL, "b_crash", 0, 0, collect_pids, out, &err));
  CHECK_STR(out, "6:running,5:running,");
  state_close(st);

  /* Killed right before COMMIT of a box insert: no box. */
  setenv("HUSK_TEST_TENANT", t.id, 1);
  CHECK(child_killed_at("box_insert", do_insert_box));
  CHECK(child_killed_at("commit", do_insert_box));
  CHECK_OK(state_open(&st, dbpath, &err));
  CHECK_ERR(state_box_get(st, NULL, "b_new", &g, &err), ENOENT);
  state_close(st);

  /* The same calls without the kill: all of it. */
  CHECK(!child_killed_at("none", do_stop_box));
  CHECK(!child_killed_at("none", do_insert_box));
  CHECK_OK(state_open(&st, dbpath, &err));
  CHECK_OK(state_box_get(st, NULL, "b_crash", &g, &err));
  CHECK_STR(g.state, STATE_BOX_STOPPED);
  CHECK(g.ended_ms > 0);
  state_box_free(&g);
  out[0] = '\0';
  CHECK_OK(state_proc_list(st, NULL, "b_crash", 0, 0, collect_pids, out, &err));
  CHECK_STR(out, "6:lost,5:lost,");
  CHECK_OK(state_box_get(st, NULL, "b_new", &g, &err));
  state_box_free(&g);
  close_and_remove(st);
}

/* A writer SIGKILLed at random moments, many times: the file always opens,
 * passes integrity_check, and never shows half of a change. */
static void churn(struct state *st) {
  struct husk_err err;
  struct state_tenant t;
  if (state_tenant_get(st, getenv("HUSK_TEST_TENANT"), &t, &err) < 0)
    _exit(4);
  for (unsigned i = 0;; i++) {
    char id[STATE_BOX_ID_SIZE];
    if (state_new_id("b_", id, sizeof id, &err) < 0 || mk_box(st, t.id, id, 0, NULL, &err) < 0)
      _exit(5);
    for (int pid = 1; pid <= 3; pid++) {
      struct state_proc p = {.pid = pid, .cmd_json = "[\"x\"]"};
      snprintf(p.box_id, sizeof p.box_id, "%s", id);
      if (state_proc_insert(st, &p, &err) < 0)
        _exit(6);
    }
    if (state_box_set_state(st, id, NULL, STATE_BOX_STOPPED, "churn", 0, &err) < 0)
      _exit(7);
    struct state_audit a = audit_rec(t.id, "", "box.delete", id, "ok", 200);
    if (state_audit_add(st, &a, NULL, &err) < 0)
      _exit(8);
  }
}

TEST(random_sigkill_leaves_a_consistent_database) {
  struct husk_err err = {0};
  struct state *st = open_fresh();
  struct state_tenant t = mk_tenant(st, "churn", -1, -1);
  state_close(st);
  setenv("HUSK_TEST_TENANT", t.id, 1);
  srand((unsigned)getpid());
  int64_t last_boxes = 0;
  for (int round = 0; round < 6; round++) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      if (state_open(&st, dbpath, &err) < 0)
        _exit(3);
      churn(st);
      _exit(0);
    }
    struct timespec d = {0, (20 + rand() % 80) * 1000000L};
    nanosleep(&d, NULL);
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL); /* not an early _exit */

    CHECK_OK(state_open(&st, dbpath, &err));
    sqlite3 *db = raw_open(dbpath);
    sqlite3_stmt *s = NULL;
    sqlite3_prepare_v2(db, "PRAGMA integrity_check", -1, &s, NULL);
    CHECK(sqlite3_step(s) == SQLITE_ROW && !strcmp((const char *)sqlite3_column_text(s, 0), "ok"));
    sqlite3_finalize(s);
    CHECK(raw_rows(db, "PRAGMA foreign_key_check") == 0);
    /* A stopped box never has running processes. */
    CHECK(raw_int(db, "SELECT count(*) FROM processes p JOIN boxes b ON b.id = p.box_id "
                      "WHERE b.state = 'stopped' AND p.state = 'running'") == 0);
    /* Each stopped box has exactly its 3 processes, all lost. */
    CHECK(raw_int(db, "SELECT count(*) FROM boxes b WHERE b.state = 'stopped' AND "
                      "(SELECT count(*) FROM processes p WHERE p.box_id = b.id AND "
                      "p.state = 'lost') <> 3") == 0);
    int64_t boxes = raw_int(db, "SELECT count(*) FROM boxes");
    CHECK(boxes >= last_boxes); /* nothing committed was lost */
    last_boxes = boxes;
    sqlite3_close(db);
    state_close(st);
  }
  CHECK(last_boxes > 0);
  printf("# %lld boxes written across 6 kills\n", (long long)last_boxes);
  remove_dir();
}

int main(void) {
  RUN(fresh_file_is_migrated);
  RUN(commits_reach_the_disk_before_the_call_returns);
  RUN(deferred_commits_of_many_threads_share_syncs);
  RUN(a_reply_never_shows_what_is_not_yet_durable);
  RUN(a_failed_sync_is_reported_and_never_forgotten);
  RUN(prepared_statements_are_reused_never_mixed_up);
  RUN(existing_file_keeps_data_and_version);
  RUN(refuses_files_that_are_not_husk_databases);
  RUN(database_fds_are_close_on_exec);
  RUN(new_ids_are_random_and_well_formed);
  RUN(utf8_validation);
  RUN(tenant_lifecycle);
  RUN(tenant_input_is_checked_not_cut);
  RUN(key_lifecycle_and_authentication);
  RUN(box_insert_checks_its_input);
  RUN(tenant_isolation);
  RUN(box_state_changes);
  RUN(box_vocabulary_matches_sql);
  RUN(preview_rows);
  RUN(box_list_filters_and_pages);
  RUN(created_by_is_checked_and_filtered);
  RUN(objects_links_previews_record_their_creator);
  RUN(creators_of_rows_from_before_are_null);
  RUN(list_callbacks_may_reenter);
  RUN(list_verdicts_and_callbacks_without_the_lock);
  RUN(quotas);
  RUN(quota_defaults_apply_to_unset_quotas);
  RUN(processes);
  RUN(process_limits);
  RUN(pause_and_snapshot_rows);
  RUN(volume_rows);
  RUN(audit_log);
  RUN(eight_threads_at_once);
  RUN(quota_holds_under_concurrency);
  RUN(crash_inside_transactions_is_all_or_nothing);
  RUN(random_sigkill_leaves_a_consistent_database);
  return unit_done();
}
