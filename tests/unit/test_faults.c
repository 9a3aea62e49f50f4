/* Fault simulation of the state plane, after SQLite's own malloc and I/O
 * error tests: every state change a request makes is run again and again,
 * the Nth allocation of SQLite (or the Nth write, or the Nth sync) failing
 * in run N, until a run meets no fault.  Each failing run must return -1
 * with an error (no crash; no leak, under ASan), leave the connection
 * usable (no transaction left open), and leave the database as it was
 * before the call: integrity_check passes and every table holds exactly
 * the rows it held (a fingerprint of all rows is compared), checked on the
 * same connection (after the next call, which must roll back what a
 * failed rollback left) and again after reopening the database.  A run that
 * succeeds must have applied all of the change (a per-operation check).
 *
 * The one exception is a failed sync: the commit is then in the file but
 * not known to be durable (state.h), so the change may be there -- but
 * then all of it.
 *
 * Faults:
 *   malloc      the Nth allocation of SQLite fails, the later ones succeed
 *   malloc+     the Nth and every later allocation fails (SQLite's
 *               "persistent" faults: the error paths must not need memory)
 *   write       the Nth pwrite/write/ftruncate of SQLite fails with EIO
 *   sync        the Nth fdatasync of the WAL or fsync of its directory
 *               fails with EIO (durable.c's hooks)
 *   store-sync  the Nth fsync of an object's or a part's data or of its
 *               directory fails with EIO (writer.c's hook): the call
 *               fails, and no row and no published file is left
 * and each in two settings: "cold" (a database just opened: statements
 * are compiled) and "warm" (the same call made once before: statements
 * come from the cache), the latter also with the commit's sync deferred
 * to state_defer_end() as a request does. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "state/db.h"
#include "state/egress_state.h"
#include "state/state.h"
#include "state/store_state.h"
#include "state/template_state.h"
#include "storage/store.h"
#include "storage/store_internal.h"
#include "unit.h"

/* ---- the fault injector ---- */

enum fault { F_NONE, F_MALLOC, F_MALLOC_PERSIST, F_WRITE, F_SYNC, F_STORE_SYNC };
static const char *const fault_names[] = {"none", "malloc", "malloc+", "write", "sync",
                                          "store-sync"};

static enum fault armed;
static long fault_at, fault_calls;
static bool fault_fired;

/* Whether this call of kind `k` fails. */
static bool fault_now(enum fault k) {
  bool persist = armed == F_MALLOC_PERSIST;
  enum fault a = persist ? F_MALLOC : armed;
  if (a != k)
    return false;
  fault_calls++;
  if (fault_calls == fault_at || (persist && fault_calls > fault_at)) {
    fault_fired = true;
    return true;
  }
  return false;
}

static void arm(enum fault k, long n) {
  fault_calls = 0;
  fault_at = n;
  fault_fired = false;
  armed = k;
}
static void disarm(void) { armed = F_NONE; }

/* SQLite's allocator, wrapped (installed before sqlite3_initialize). */
static sqlite3_mem_methods real_mem;
static void *fm_malloc(int n) { return fault_now(F_MALLOC) ? NULL : real_mem.xMalloc(n); }
static void fm_free(void *p) { real_mem.xFree(p); }
static void *fm_realloc(void *p, int n) {
  return fault_now(F_MALLOC) ? NULL : real_mem.xRealloc(p, n);
}
static int fm_size(void *p) { return real_mem.xSize(p); }
static int fm_roundup(int n) { return real_mem.xRoundup(n); }
static int fm_init(void *a) { return real_mem.xInit(a); }
static void fm_shutdown(void *a) { real_mem.xShutdown(a); }

/* SQLite's writes, through the unix VFS's replaceable system calls. */
typedef ssize_t (*pwrite_fn)(int, const void *, size_t, off_t);
typedef ssize_t (*write_fn)(int, const void *, size_t);
typedef int (*truncate_fn)(int, off_t);
static pwrite_fn real_pwrite;
static write_fn real_write;
static truncate_fn real_ftruncate;
static ssize_t fv_pwrite(int fd, const void *b, size_t n, off_t off) {
  if (fault_now(F_WRITE)) {
    errno = EIO;
    return -1;
  }
  return real_pwrite(fd, b, n, off);
}
static ssize_t fv_write(int fd, const void *b, size_t n) {
  if (fault_now(F_WRITE)) {
    errno = EIO;
    return -1;
  }
  return real_write(fd, b, n);
}
static int fv_ftruncate(int fd, off_t len) {
  if (fault_now(F_WRITE)) {
    errno = EIO;
    return -1;
  }
  return real_ftruncate(fd, len);
}

/* durable.c's syncs. */
static int fs_fdatasync(int fd) {
  if (fault_now(F_SYNC)) {
    errno = EIO;
    return -1;
  }
  return fdatasync(fd);
}
static int fs_fsync(int fd) {
  if (fault_now(F_SYNC)) {
    errno = EIO;
    return -1;
  }
  return fsync(fd);
}

/* writer.c's fsyncs. */
static int fo_fsync(int fd) {
  if (fault_now(F_STORE_SYNC)) {
    errno = EIO;
    return -1;
  }
  return fsync(fd);
}

static void install_faults(void) {
  if (sqlite3_config(SQLITE_CONFIG_GETMALLOC, &real_mem) != SQLITE_OK) {
    printf("Bail out! SQLITE_CONFIG_GETMALLOC\n");
    exit(2);
  }
  sqlite3_mem_methods m = {fm_malloc,  fm_free, fm_realloc,  fm_size,
                           fm_roundup, fm_init, fm_shutdown, NULL};
  /* Lookaside memory would serve small allocations without the allocator:
   * off, so that every allocation is a fault point. */
  if (sqlite3_config(SQLITE_CONFIG_MALLOC, &m) != SQLITE_OK ||
      sqlite3_config(SQLITE_CONFIG_LOOKASIDE, 0, 0) != SQLITE_OK ||
      sqlite3_initialize() != SQLITE_OK) {
    printf("Bail out! cannot install the allocator\n");
    exit(2);
  }
  sqlite3_vfs *vfs = sqlite3_vfs_find(NULL);
  real_pwrite = (pwrite_fn)vfs->xGetSystemCall(vfs, "pwrite64");
  real_write = (write_fn)vfs->xGetSystemCall(vfs, "write");
  real_ftruncate = (truncate_fn)vfs->xGetSystemCall(vfs, "ftruncate");
  if (!real_pwrite || !real_write || !real_ftruncate ||
      vfs->xSetSystemCall(vfs, "pwrite64", (sqlite3_syscall_ptr)fv_pwrite) != SQLITE_OK ||
      vfs->xSetSystemCall(vfs, "write", (sqlite3_syscall_ptr)fv_write) != SQLITE_OK ||
      vfs->xSetSystemCall(vfs, "ftruncate", (sqlite3_syscall_ptr)fv_ftruncate) != SQLITE_OK) {
    printf("Bail out! cannot replace the VFS's system calls\n");
    exit(2);
  }
  db_fdatasync = fs_fdatasync;
  db_fsync = fs_fsync;
  store_fsync = fo_fsync;
}

/* ---- fixture: a data directory with the state and the store ---- */

static char dir[96];
static struct state *st;
static struct store *so;
static bool with_store; /* the operation under test uses the object store */
static char tenant[STATE_TENANT_ID_SIZE];

static void die(const char *what, const struct husk_err *err) {
  printf("Bail out! %s: %s\n", what, err ? err->msg : strerror(errno));
  exit(2);
}

static void open_all(void) {
  struct husk_err err;
  char db[160];
  snprintf(db, sizeof db, "%s/husk.db", dir);
  if (state_open(&st, db, &err) < 0)
    die("state_open", &err);
  if (!with_store)
    return;
  struct store_config c = {.data_dir = dir, .state = st, .public_url = "http://127.0.0.1:9"};
  if (store_open(&so, &c, &err) < 0)
    die("store_open", &err);
}

static void close_all(void) {
  store_close(so);
  state_close(st);
  so = NULL;
  st = NULL;
}

static void rm_tree(int parent, const char *name) {
  int fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) {
    DIR *d = fdopendir(fd);
    struct dirent *e;
    while (d && (e = readdir(d)))
      if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
        rm_tree(dirfd(d), e->d_name);
    if (d)
      closedir(d);
    else
      close(fd);
    unlinkat(parent, name, AT_REMOVEDIR);
  } else {
    unlinkat(parent, name, 0);
  }
}

static void fresh_dir(void) {
  /* tmpfs when there is one: thousands of runs, each opening the database. */
  const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  snprintf(dir, sizeof dir, "%s/husk-faults-XXXXXX", base);
  if (!mkdtemp(dir))
    die("mkdtemp", NULL);
}

/* ---- looking at the database (never with a fault armed) ---- */

/* One integer from `sql` (a count), -1 on error. */
static int64_t q(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int64_t q(const char *fmt, ...) {
  char sql[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(sql, sizeof sql, fmt, ap);
  va_end(ap);
  sqlite3_stmt *s = NULL;
  int64_t v = -1;
  if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) == SQLITE_OK && sqlite3_step(s) == SQLITE_ROW)
    v = sqlite3_column_int64(s, 0);
  else
    printf("#   query `%s`: %s\n", sql, sqlite3_errmsg(st->db));
  sqlite3_finalize(s);
  return v;
}

static bool integrity_ok(void) {
  sqlite3_stmt *s = NULL;
  bool ok = sqlite3_prepare_v2(st->db, "PRAGMA integrity_check", -1, &s, NULL) == SQLITE_OK &&
            sqlite3_step(s) == SQLITE_ROW && !strcmp((const char *)sqlite3_column_text(s, 0), "ok");
  sqlite3_finalize(s);
  if (!ok)
    printf("#   integrity_check failed\n");
  return ok && q("SELECT count(*) FROM pragma_foreign_key_check") == 0;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    h = (h ^ b[i]) * 1099511628211ULL;
  return h;
}

/* Every row of every table: a sum of row hashes (the order rows come in
 * does not matter) and the row count mixed in. */
static uint64_t fingerprint(void) {
  sqlite3_stmt *t = NULL;
  uint64_t sum = 0, rows = 0;
  if (sqlite3_prepare_v2(st->db, "SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY 1",
                         -1, &t, NULL) != SQLITE_OK)
    return 0;
  while (sqlite3_step(t) == SQLITE_ROW) {
    const char *name = (const char *)sqlite3_column_text(t, 0);
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT * FROM \"%s\"", name);
    sqlite3_stmt *s = NULL;
    if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) {
      printf("#   fingerprint %s: %s\n", name, sqlite3_errmsg(st->db));
      continue;
    }
    while (sqlite3_step(s) == SQLITE_ROW) {
      uint64_t h = fnv(14695981039346656037ULL, name, strlen(name));
      for (int c = 0; c < sqlite3_column_count(s); c++) {
        int type = sqlite3_column_type(s, c);
        const void *v = sqlite3_column_blob(s, c);
        int n = sqlite3_column_bytes(s, c);
        h = fnv(h, &type, sizeof type);
        if (v && n > 0)
          h = fnv(h, v, (size_t)n);
        h = fnv(h, "|", 1);
      }
      sum += h;
      rows++;
    }
    sqlite3_finalize(s);
  }
  sqlite3_finalize(t);
  return fnv(sum, &rows, sizeof rows);
}

/* Object and part files on disk.  After store_open has swept what a
 * failure left, there is exactly one per row. */
static int64_t stored_files(void) {
  int64_t n = 0;
  const char *subs[] = {"objects", "parts"};
  for (size_t i = 0; i < 2; i++) {
    char p[192];
    snprintf(p, sizeof p, "%s/storage/%s", dir, subs[i]);
    DIR *d = opendir(p);
    struct dirent *e;
    while (d && (e = readdir(d)))
      n += e->d_name[0] != '.';
    if (d)
      closedir(d);
  }
  return n;
}

static bool files_match_rows(void) {
  if (!with_store)
    return true;
  int64_t rows = q("SELECT (SELECT count(*) FROM objects) + (SELECT count(*) FROM parts)");
  int64_t files = stored_files();
  if (rows != files)
    printf("#   %lld rows name files, %lld files\n", (long long)rows, (long long)files);
  return rows == files;
}

/* ---- the operations of request paths ----
 * prep(v): what variant v needs, done without faults.  run(v): the call
 * under test.  applied(v): whether all of run(v)'s change is there.
 * Variants give every successful run new names; a failed run leaves
 * nothing, so its variant is tried again. */

struct op {
  const char *name;
  bool store;
  int (*prep)(int v, struct husk_err *err);
  int (*run)(int v, struct husk_err *err);
  bool (*applied)(int v);
  /* Instead of applied(): a count the call adds one to (rows with ids
   * the call chooses itself). */
  int64_t (*count)(void);
};

/* Warm-up calls use variants from here on, apart from the ones tested. */
#define WARM_BASE 100000

static int ins_box(const char *id, const char *state, struct husk_err *err) {
  struct state_box b = {.memory = 1 << 20, .pids = 16, .uid_base = -1, .slot = -1};
  snprintf(b.id, sizeof b.id, "%s", id);
  snprintf(b.tenant_id, sizeof b.tenant_id, "%s", tenant);
  snprintf(b.state, sizeof b.state, "%s", state);
  return state_box_insert(st, &b, err);
}

static int ins_proc(const char *box, int64_t pid, struct husk_err *err) {
  struct state_proc p = {.pid = pid, .cmd_json = "[\"sleep\",\"1\"]", .tag = "t"};
  snprintf(p.box_id, sizeof p.box_id, "%s", box);
  return state_proc_insert(st, &p, err);
}

static char bid[64];
static const char *box_id(int v) {
  snprintf(bid, sizeof bid, "b_v%d", v);
  return bid;
}

/* Tenants and keys. */
static int tenant_create_run(int v, struct husk_err *err) {
  char name[32];
  snprintf(name, sizeof name, "tn%d", v);
  struct state_tenant t;
  return state_tenant_create(st, name, 4, STATE_UNLIMITED, &t, err);
}
static bool tenant_create_applied(int v) {
  return q("SELECT count(*) FROM tenants WHERE name = 'tn%d' AND max_boxes = 4", v) == 1;
}

static int quota_run(int v, struct husk_err *err) {
  return state_tenant_set_quota(st, tenant, 100 + v, 1000 + v, err);
}
static bool quota_applied(int v) {
  return q("SELECT count(*) FROM tenants WHERE id = '%s' AND max_boxes = %d "
           "AND max_memory = %d",
           tenant, 100 + v, 1000 + v) == 1;
}

static int key_create_run(int v, struct husk_err *err) {
  char key[STATE_KEY_SIZE];
  struct state_key k;
  return state_key_create(st, tenant, key, sizeof key, &k, err);
}
static int64_t key_count(void) {
  return q("SELECT count(*) FROM api_keys WHERE tenant_id = '%s'", tenant);
}

static char key_ids[2][STATE_KEY_ID_SIZE]; /* [1]: the warm-up's */
static int key_revoke_prep(int v, struct husk_err *err) {
  char key[STATE_KEY_SIZE];
  struct state_key k;
  if (state_key_create(st, tenant, key, sizeof key, &k, err) < 0)
    return -1;
  snprintf(key_ids[v >= WARM_BASE], sizeof key_ids[0], "%s", k.id);
  return 0;
}
static int key_revoke_run(int v, struct husk_err *err) {
  return state_key_revoke(st, tenant, key_ids[v >= WARM_BASE], err);
}
static bool key_revoke_applied(int v) {
  return q("SELECT count(*) FROM api_keys WHERE id = '%s' AND revoked_ms > 0",
           key_ids[v >= WARM_BASE]) == 1;
}

/* Boxes. */
static int box_insert_run(int v, struct husk_err *err) {
  return ins_box(box_id(v), STATE_BOX_CREATING, err);
}
static bool box_insert_applied(int v) {
  return q("SELECT count(*) FROM boxes WHERE id = 'b_v%d' AND state = "
           "'creating'",
           v) == 1;
}

static int box_creating_prep(int v, struct husk_err *err) {
  return ins_box(box_id(v), STATE_BOX_CREATING, err);
}
static int box_running_run(int v, struct husk_err *err) {
  return state_box_set_state(st, box_id(v), STATE_BOX_CREATING, STATE_BOX_RUNNING, "", 0, err);
}
static bool box_running_applied(int v) {
  return q("SELECT count(*) FROM boxes WHERE id = 'b_v%d' AND state = "
           "'running'",
           v) == 1;
}

static int box_runtime_run(int v, struct husk_err *err) {
  return state_box_set_runtime(st, box_id(v), 1000 + v, 77, 100000, v, "box-x-1", err);
}
static bool box_runtime_applied(int v) {
  return q("SELECT count(*) FROM boxes WHERE id = 'b_v%d' AND init_pid = %d "
           "AND slot = %d AND "
           "cgroup = 'box-x-1'",
           v, 1000 + v, v) == 1;
}

/* A box with two background processes running: stopping it ends them. */
static int box_with_procs_prep(int v, struct husk_err *err) {
  return ins_box(box_id(v), STATE_BOX_RUNNING, err) || ins_proc(box_id(v), 10, err) ||
                 ins_proc(box_id(v), 11, err)
             ? -1
             : 0;
}
static int box_stop_run(int v, struct husk_err *err) {
  return state_box_set_state(st, box_id(v), NULL, STATE_BOX_STOPPED, "stopped", 0, err);
}
static bool box_stop_applied(int v) {
  return q("SELECT count(*) FROM boxes WHERE id = 'b_v%d' AND state = "
           "'stopped' AND ended_ms > 0",
           v) == 1 &&
         q("SELECT count(*) FROM processes WHERE box_id = 'b_v%d' AND state = "
           "'lost'",
           v) == 2;
}

static int box_stopped_prep(int v, struct husk_err *err) {
  return box_with_procs_prep(v, err) || box_stop_run(v, err) ? -1 : 0;
}
static int box_delete_run(int v, struct husk_err *err) {
  return state_box_delete(st, tenant, box_id(v), err);
}
static bool box_delete_applied(int v) {
  return q("SELECT count(*) FROM boxes WHERE id = 'b_v%d'", v) == 0 &&
         q("SELECT count(*) FROM processes WHERE box_id = 'b_v%d'", v) == 0;
}

static int egress_run(int v, struct husk_err *err) {
  char policy[64];
  snprintf(policy, sizeof policy, "{\"allow\":[\"h%d.example\"]}", v);
  return state_box_egress_set(st, "b_base", "egress", policy, err);
}
static bool egress_applied(int v) {
  return q("SELECT count(*) FROM box_egress WHERE box_id = 'b_base' AND "
           "network = 'egress' AND "
           "policy_json LIKE '%%\"h%d.example\"%%'",
           v) == 1;
}

/* Background processes and jobs. */
static int proc_insert_run(int v, struct husk_err *err) {
  return ins_proc("b_base", 1000 + v, err);
}
static bool proc_insert_applied(int v) {
  return q("SELECT count(*) FROM processes WHERE box_id = 'b_base' AND pid = "
           "%d AND state = "
           "'running'",
           1000 + v) == 1;
}

static int proc_exit_prep(int v, struct husk_err *err) { return ins_proc("b_base", 5000 + v, err); }
static int proc_exit_run(int v, struct husk_err *err) {
  return state_proc_set_exit(st, "b_base", 5000 + v, 3, 0, 0, err);
}
static bool proc_exit_applied(int v) {
  return q("SELECT count(*) FROM processes WHERE pid = %d AND state = 'exited' "
           "AND exit_code = 3",
           5000 + v) == 1;
}

static void job_fill(struct state_job *j, int v) {
  memset(j, 0, sizeof *j);
  snprintf(j->id, sizeof j->id, "j_v%d", v);
  snprintf(j->tenant_id, sizeof j->tenant_id, "%s", tenant);
  snprintf(j->box_id, sizeof j->box_id, "b_base");
  j->pid = 7;
  snprintf(j->kind, sizeof j->kind, "exec");
  snprintf(j->state, sizeof j->state, STATE_JOB_RUNNING);
}
static int job_insert_run(int v, struct husk_err *err) {
  struct state_job j;
  job_fill(&j, v);
  return state_job_insert(st, &j, err);
}
static bool job_insert_applied(int v) {
  return q("SELECT count(*) FROM jobs WHERE id = 'j_v%d' AND state = 'running'", v) == 1;
}
static int job_end_run(int v, struct husk_err *err) {
  char id[32];
  snprintf(id, sizeof id, "j_v%d", v);
  return state_job_end(st, tenant, id, STATE_JOB_DONE, "{\"exit_code\":0}", err);
}
static bool job_end_applied(int v) {
  return q("SELECT count(*) FROM jobs WHERE id = 'j_v%d' AND state = 'done' "
           "AND result_json IS "
           "NOT NULL",
           v) == 1;
}

/* The audit log and the vault. */
static int audit_run(int v, struct husk_err *err) {
  struct state_audit a = {.status = 200};
  snprintf(a.tenant_id, sizeof a.tenant_id, "%s", tenant);
  snprintf(a.action, sizeof a.action, "box.exec");
  snprintf(a.box_id, sizeof a.box_id, "b_base");
  snprintf(a.detail, sizeof a.detail, "v%d", v);
  snprintf(a.outcome, sizeof a.outcome, "ok");
  int64_t id;
  return state_audit_add(st, &a, &id, err);
}
static bool audit_applied(int v) {
  return q("SELECT count(*) FROM audit WHERE detail = 'v%d'", v) == 1;
}

static int secret_run(int v, struct husk_err *err) {
  char name[32];
  snprintf(name, sizeof name, "S%d", v);
  static const unsigned char sealed[40] = {1, 2, 3};
  return state_secret_put(st, tenant, name, sealed, sizeof sealed, err);
}
static bool secret_applied(int v) {
  return q("SELECT count(*) FROM secrets WHERE name = 'S%d' AND length(sealed) "
           "= 40",
           v) == 1;
}

/* The object store's records. */
static int bucket_run(int v, struct husk_err *err) {
  char name[32];
  snprintf(name, sizeof name, "bk%d", v);
  return store_bucket_create(so, tenant, name, err);
}
static bool bucket_applied(int v) {
  return q("SELECT count(*) FROM buckets WHERE name = 'bk%d'", v) == 1;
}

static int put(const char *key, const char *data, struct husk_err *err) {
  struct store_object o;
  int r = store_put_buffer(so, tenant, "bkt", key, data, strlen(data), "text/plain", NULL, &o, err);
  if (r == 0)
    store_object_free(&o);
  return r;
}
static int put_new_run(int v, struct husk_err *err) {
  char key[32];
  snprintf(key, sizeof key, "k%d", v);
  return put(key, "fresh bytes", err);
}
static bool put_new_applied(int v) {
  return q("SELECT count(*) FROM objects WHERE key = 'k%d' AND size = 11", v) == 1;
}

static int put_old_prep(int v, struct husk_err *err) {
  char key[32];
  snprintf(key, sizeof key, "o%d", v);
  return put(key, "old", err);
}
static int put_over_run(int v, struct husk_err *err) {
  char key[32];
  snprintf(key, sizeof key, "o%d", v);
  return put(key, "the new version", err);
}
static bool put_over_applied(int v) {
  return q("SELECT count(*) FROM objects WHERE key = 'o%d' AND size = 15", v) == 1;
}
static int obj_delete_run(int v, struct husk_err *err) {
  char key[32];
  snprintf(key, sizeof key, "o%d", v);
  return store_object_delete(so, tenant, "bkt", key, err);
}
static bool obj_delete_applied(int v) {
  return q("SELECT count(*) FROM objects WHERE key = 'o%d'", v) == 0;
}

static int copy_run(int v, struct husk_err *err) {
  char key[32];
  snprintf(key, sizeof key, "c%d", v);
  struct store_object o;
  int r = store_object_copy(so, tenant, "bkt", "src", "bkt", key, NULL, NULL, NULL, &o, err);
  if (r == 0)
    store_object_free(&o);
  return r;
}
static bool copy_applied(int v) {
  return q("SELECT count(*) FROM objects WHERE key = 'c%d' AND size = 6", v) == 1;
}

static int link_run(int v, struct husk_err *err) {
  struct store_link l;
  int r = store_link_create(so, tenant, "bkt", "src", 60, "f.txt", false, NULL, &l, err);
  if (r == 0)
    store_link_free(&l);
  return r;
}
static int64_t link_count(void) {
  return q("SELECT count(*) FROM links WHERE tenant_id = '%s'", tenant);
}

static char link_id[STORE_ID_SIZE];
static int link_record_run(int v, struct husk_err *err) {
  return store_link_record(so, link_id, "127.0.0.1", "curl", 200, err);
}
static int64_t link_record_count(void) {
  return q("SELECT count(*) FROM link_access WHERE link_id = '%s'", link_id);
}

static int s3key_run(int v, struct husk_err *err) {
  char id[STORE_ACCESS_KEY_SIZE], secret[STORE_SECRET_SIZE];
  return store_key_create(so, tenant, false, id, secret, err);
}
static int64_t s3key_count(void) {
  return q("SELECT count(*) FROM s3_keys WHERE tenant_id = '%s' AND internal = 0", tenant);
}

static int upload_run(int v, struct husk_err *err) {
  char key[32], id[STORE_ID_SIZE];
  snprintf(key, sizeof key, "u%d", v);
  return store_upload_create(so, tenant, "bkt", key, "text/plain", NULL, id, err);
}
static bool upload_applied(int v) {
  return q("SELECT count(*) FROM uploads WHERE key = 'u%d'", v) == 1;
}

/* Tenant deletion: marking (every API and S3 key revoked with it), then
 * the purge of what is left once its storage is gone.  [1]: the
 * warm-up's tenant. */
static char tn_ids[2][STATE_TENANT_ID_SIZE];
static int tenant_doomed_prep(int v, struct husk_err *err) {
  char name[32], key[STATE_KEY_SIZE];
  snprintf(name, sizeof name, "td%d", v);
  struct state_tenant t;
  struct state_key k;
  static const unsigned char sealed[40] = {4, 5, 6};
  char s3id[STORE_ACCESS_KEY_SIZE];
  snprintf(s3id, sizeof s3id, "AKTD%d", v);
  if (state_tenant_create(st, name, 4, STATE_UNLIMITED, &t, err) < 0 ||
      state_key_create(st, t.id, key, sizeof key, &k, err) < 0 ||
      state_s3_key_insert(st, s3id, t.id, sealed, sizeof sealed, false, k.id, err) < 0 ||
      state_secret_put(st, t.id, "S", sealed, sizeof sealed, err) < 0)
    return -1;
  struct state_box b = {.memory = 1 << 20, .pids = 16, .uid_base = -1, .slot = -1};
  snprintf(b.id, sizeof b.id, "b_td%d", v);
  snprintf(b.tenant_id, sizeof b.tenant_id, "%s", t.id);
  snprintf(b.state, sizeof b.state, "%s", STATE_BOX_RUNNING);
  if (state_box_insert(st, &b, err) < 0 ||
      state_box_set_state(st, b.id, NULL, STATE_BOX_STOPPED, "stopped", 0, err) < 0)
    return -1;
  snprintf(tn_ids[v >= WARM_BASE], sizeof tn_ids[0], "%s", t.id);
  return 0;
}
static int tenant_mark_run(int v, struct husk_err *err) {
  return state_tenant_mark_deleted(st, tn_ids[v >= WARM_BASE], err);
}
static bool tenant_mark_applied(int v) {
  const char *t = tn_ids[v >= WARM_BASE];
  return q("SELECT count(*) FROM tenants WHERE id = '%s' AND deleted_ms > 0", t) == 1 &&
         q("SELECT count(*) FROM api_keys WHERE tenant_id = '%s' AND revoked_ms = 0", t) == 0 &&
         q("SELECT count(*) FROM s3_keys WHERE tenant_id = '%s' AND revoked_ms = 0", t) == 0;
}
static int tenant_marked_prep(int v, struct husk_err *err) {
  return tenant_doomed_prep(v, err) || tenant_mark_run(v, err) ? -1 : 0;
}
static int tenant_purge_run(int v, struct husk_err *err) {
  return state_tenant_purge(st, tn_ids[v >= WARM_BASE], err);
}
static bool tenant_purge_applied(int v) {
  const char *t = tn_ids[v >= WARM_BASE];
  return q("SELECT (SELECT count(*) FROM tenants WHERE id = '%s') + "
           "(SELECT count(*) FROM api_keys WHERE tenant_id = '%s') + "
           "(SELECT count(*) FROM s3_keys WHERE tenant_id = '%s') + "
           "(SELECT count(*) FROM secrets WHERE tenant_id = '%s') + "
           "(SELECT count(*) FROM boxes WHERE tenant_id = '%s')",
           t, t, t, t, t) == 0;
}

/* S3 keys: revoked one by one, and with the API key that minted them. */
static char s3_ids[2][STORE_ACCESS_KEY_SIZE];
static int s3key_prep(int v, struct husk_err *err) {
  char secret[STORE_SECRET_SIZE];
  return store_key_create(so, tenant, false, s3_ids[v >= WARM_BASE], secret, err);
}
static int s3key_revoke_run(int v, struct husk_err *err) {
  return store_key_revoke(so, tenant, s3_ids[v >= WARM_BASE], err);
}
static bool s3key_revoke_applied(int v) {
  return q("SELECT count(*) FROM s3_keys WHERE id = '%s' AND revoked_ms > 0",
           s3_ids[v >= WARM_BASE]) == 1;
}

static int minting_key_prep(int v, struct husk_err *err) {
  char id[STORE_ACCESS_KEY_SIZE], secret[STORE_SECRET_SIZE];
  if (key_revoke_prep(v, err) < 0)
    return -1;
  for (int i = 0; i < 2; i++)
    if (store_key_mint(so, tenant, key_ids[v >= WARM_BASE], id, secret, err) < 0)
      return -1;
  return 0;
}
static bool key_revoke_cascade_applied(int v) {
  const char *k = key_ids[v >= WARM_BASE];
  return key_revoke_applied(v) &&
         q("SELECT count(*) FROM s3_keys WHERE api_key_id = '%s' AND revoked_ms > 0", k) == 2;
}

/* Buckets and objects. */
static int bucket_delete_run(int v, struct husk_err *err) {
  char name[32];
  snprintf(name, sizeof name, "bk%d", v);
  return store_bucket_delete(so, tenant, name, err);
}
static bool bucket_delete_applied(int v) {
  return q("SELECT count(*) FROM buckets WHERE name = 'bk%d'", v) == 0;
}

/* Multipart uploads: a part committed, and an upload completed.  [1]:
 * the warm-up's upload. */
static char up_ids[2][STORE_ID_SIZE];
static char up_etag[2][STORE_ETAG_SIZE];
static int upload_prep(int v, struct husk_err *err) {
  char key[32];
  snprintf(key, sizeof key, "m%d", v);
  return store_upload_create(so, tenant, "bkt", key, "text/plain", NULL, up_ids[v >= WARM_BASE],
                             err);
}
static int part_commit_run(int v, struct husk_err *err) {
  char key[32];
  snprintf(key, sizeof key, "m%d", v);
  struct store_writer *w = NULL;
  static const char data[] = "part bytes";
  if (store_writer_open(so, CK_NONE, false, 0, &w, err) < 0)
    return -1;
  if (store_writer_write(w, data, sizeof data - 1, err) < 0 ||
      store_writer_finish(w, NULL, up_etag[v >= WARM_BASE], NULL, err) < 0) {
    store_writer_abort(w);
    return -1;
  }
  return store_part_commit(w, tenant, "bkt", key, up_ids[v >= WARM_BASE], 1, err);
}
static bool part_commit_applied(int v) {
  return q("SELECT count(*) FROM parts WHERE upload_id = '%s' AND num = 1 AND size = 10",
           up_ids[v >= WARM_BASE]) == 1;
}
static int upload_with_part_prep(int v, struct husk_err *err) {
  return upload_prep(v, err) || part_commit_run(v, err) ? -1 : 0;
}
static int complete_run(int v, struct husk_err *err) {
  char key[32];
  snprintf(key, sizeof key, "m%d", v);
  struct store_part p = {.num = 1};
  snprintf(p.etag, sizeof p.etag, "%s", up_etag[v >= WARM_BASE]);
  struct store_object o;
  int r =
      store_upload_complete(so, tenant, "bkt", key, up_ids[v >= WARM_BASE], &p, 1, NULL, &o, err);
  if (r == 0)
    store_object_free(&o);
  return r;
}
static bool complete_applied(int v) {
  return q("SELECT count(*) FROM objects WHERE key = 'm%d' AND size = 10 AND etag LIKE '%%-1'",
           v) == 1 &&
         q("SELECT count(*) FROM uploads WHERE id = '%s'", up_ids[v >= WARM_BASE]) == 0 &&
         q("SELECT count(*) FROM parts WHERE upload_id = '%s'", up_ids[v >= WARM_BASE]) == 0;
}

/* Links: revoked, and a refused fetch counted (on its link, or on the
 * global counter when it names none). */
static char ln_ids[2][STORE_ID_SIZE];
static int link_prep(int v, struct husk_err *err) {
  struct store_link l;
  if (store_link_create(so, tenant, "bkt", "src", 60, NULL, false, NULL, &l, err) < 0)
    return -1;
  snprintf(ln_ids[v >= WARM_BASE], sizeof ln_ids[0], "%s", l.id);
  store_link_free(&l);
  return 0;
}
static int link_revoke_run(int v, struct husk_err *err) {
  return store_link_revoke(so, tenant, ln_ids[v >= WARM_BASE], err);
}
static bool link_revoke_applied(int v) {
  return q("SELECT count(*) FROM links WHERE id = '%s' AND revoked_ms > 0",
           ln_ids[v >= WARM_BASE]) == 1;
}
static int link_denied_run(int v, struct husk_err *err) {
  return state_link_denied(st, link_id, err);
}
static int64_t link_denied_count(void) {
  return q("SELECT denied FROM links WHERE id = '%s'", link_id);
}
static int denied_global_run(int v, struct husk_err *err) {
  return state_link_denied(st, NULL, err);
}
static int64_t denied_global_count(void) {
  return q("SELECT coalesce((SELECT count FROM link_denied), 0)");
}

/* Secrets. */
static int secret_delete_run(int v, struct husk_err *err) {
  char name[32];
  snprintf(name, sizeof name, "S%d", v);
  return state_secret_delete(st, tenant, name, err);
}
static bool secret_delete_applied(int v) {
  return q("SELECT count(*) FROM secrets WHERE name = 'S%d'", v) == 0;
}

/* Templates and the build cache. */
static int template_insert_run(int v, struct husk_err *err) {
  struct state_template t = {.config_json = "{\"Env\":[]}", .layers_json = "[]", .size = 1000};
  snprintf(t.id, sizeof t.id, "tpl_%024d", v);
  snprintf(t.tenant_id, sizeof t.tenant_id, "%s", tenant);
  snprintf(t.name, sizeof t.name, "t%d", v);
  snprintf(t.source, sizeof t.source, "oci");
  snprintf(t.config_digest, sizeof t.config_digest, "sha256:%064d", v);
  return state_template_insert(st, &t, 1 << 30, err);
}
static bool template_insert_applied(int v) {
  return q("SELECT count(*) FROM templates WHERE id = 'tpl_%024d' AND name = 't%d'", v, v) == 1;
}
static int template_delete_run(int v, struct husk_err *err) {
  char id[STATE_TEMPLATE_ID_SIZE];
  snprintf(id, sizeof id, "tpl_%024d", v);
  return state_template_delete(st, tenant, id, err);
}
static bool template_delete_applied(int v) {
  return q("SELECT count(*) FROM templates WHERE id = 'tpl_%024d'", v) == 0;
}
static int cache_put_run(int v, struct husk_err *err) {
  char key[80], diff[STATE_DIGEST_SIZE];
  snprintf(key, sizeof key, "sha256:%064d", v);
  snprintf(diff, sizeof diff, "sha256:%064d", v + 1);
  return state_build_cache_put(st, tenant, key, diff, 4096, 0, err);
}
static bool cache_put_applied(int v) {
  return q("SELECT count(*) FROM build_cache WHERE key = 'sha256:%064d'", v) == 1;
}

/* Audit retention: three records older than the minimum age go in one
 * call.  The warm-up's records are the oldest, so that its own call
 * takes them and leaves the ones under test. */
static int audit_old_prep(int v, struct husk_err *err) {
  for (int i = 0; i < 3; i++) {
    struct state_audit a = {.status = 200, .ts_ms = v >= WARM_BASE ? 1 : 1000 + v};
    snprintf(a.tenant_id, sizeof a.tenant_id, "%s", tenant);
    snprintf(a.action, sizeof a.action, "box.exec");
    snprintf(a.detail, sizeof a.detail, "old%d", v);
    snprintf(a.outcome, sizeof a.outcome, "ok");
    int64_t id;
    if (state_audit_add(st, &a, &id, err) < 0)
      return -1;
  }
  return 0;
}
static int audit_prune_run(int v, struct husk_err *err) {
  size_t n = 0;
  if (state_audit_prune(st, state_now_ms(), 3, &n, err) < 0)
    return -1;
  return n == 3 ? 0 : husk_fail(err, EPROTO, "pruned %zu records, not 3", n);
}
static bool audit_prune_applied(int v) {
  return q("SELECT count(*) FROM audit WHERE detail = 'old%d'", v) == 0;
}

static const struct op ops[] = {
    {"tenant_create", false, NULL, tenant_create_run, tenant_create_applied, NULL},
    {"tenant_set_quota", false, NULL, quota_run, quota_applied, NULL},
    {"key_create", false, NULL, key_create_run, NULL, key_count},
    {"key_revoke", false, key_revoke_prep, key_revoke_run, key_revoke_applied, NULL},
    {"box_insert", false, NULL, box_insert_run, box_insert_applied, NULL},
    {"box_set_state", false, box_creating_prep, box_running_run, box_running_applied, NULL},
    {"box_set_runtime", false, box_creating_prep, box_runtime_run, box_runtime_applied, NULL},
    {"box_stop_ends_procs", false, box_with_procs_prep, box_stop_run, box_stop_applied, NULL},
    {"box_delete", false, box_stopped_prep, box_delete_run, box_delete_applied, NULL},
    {"box_egress_set", false, NULL, egress_run, egress_applied, NULL},
    {"proc_insert", false, NULL, proc_insert_run, proc_insert_applied, NULL},
    {"proc_set_exit", false, proc_exit_prep, proc_exit_run, proc_exit_applied, NULL},
    {"job_insert", false, NULL, job_insert_run, job_insert_applied, NULL},
    {"job_end", false, job_insert_run, job_end_run, job_end_applied, NULL},
    {"audit_add", false, NULL, audit_run, audit_applied, NULL},
    {"secret_put", false, NULL, secret_run, secret_applied, NULL},
    {"bucket_create", true, NULL, bucket_run, bucket_applied, NULL},
    {"object_put_new", true, NULL, put_new_run, put_new_applied, NULL},
    {"object_put_replace", true, put_old_prep, put_over_run, put_over_applied, NULL},
    {"object_delete", true, put_old_prep, obj_delete_run, obj_delete_applied, NULL},
    {"object_copy", true, NULL, copy_run, copy_applied, NULL},
    {"link_create", true, NULL, link_run, NULL, link_count},
    {"link_record", true, NULL, link_record_run, NULL, link_record_count},
    {"s3_key_create", true, NULL, s3key_run, NULL, s3key_count},
    {"upload_create", true, NULL, upload_run, upload_applied, NULL},
    {"tenant_mark_deleted", false, tenant_doomed_prep, tenant_mark_run, tenant_mark_applied, NULL},
    {"tenant_purge", false, tenant_marked_prep, tenant_purge_run, tenant_purge_applied, NULL},
    {"s3_key_revoke", true, s3key_prep, s3key_revoke_run, s3key_revoke_applied, NULL},
    {"key_revoke_cascade", true, minting_key_prep, key_revoke_run, key_revoke_cascade_applied,
     NULL},
    {"bucket_delete", true, bucket_run, bucket_delete_run, bucket_delete_applied, NULL},
    {"part_commit", true, upload_prep, part_commit_run, part_commit_applied, NULL},
    {"upload_complete", true, upload_with_part_prep, complete_run, complete_applied, NULL},
    {"link_revoke", true, link_prep, link_revoke_run, link_revoke_applied, NULL},
    {"link_denied", false, NULL, link_denied_run, NULL, link_denied_count},
    {"link_denied_global", false, NULL, denied_global_run, NULL, denied_global_count},
    {"secret_delete", false, secret_run, secret_delete_run, secret_delete_applied, NULL},
    {"template_insert", false, NULL, template_insert_run, template_insert_applied, NULL},
    {"template_delete", false, template_insert_run, template_delete_run, template_delete_applied,
     NULL},
    {"build_cache_put", false, NULL, cache_put_run, cache_put_applied, NULL},
    {"audit_prune", false, audit_old_prep, audit_prune_run, audit_prune_applied, NULL},
};

/* The rows every operation starts from. */
static void setup(void) {
  struct husk_err err;
  struct state_tenant t;
  if (state_tenant_create(st, "base", STATE_UNLIMITED, STATE_UNLIMITED, &t, &err) < 0)
    die("tenant", &err);
  snprintf(tenant, sizeof tenant, "%s", t.id);
  if (ins_box("b_base", STATE_BOX_RUNNING, &err) < 0 ||
      store_bucket_create(so, tenant, "bkt", &err) < 0 || put("src", "source", &err) < 0)
    die("setup", &err);
  struct store_link l;
  if (store_link_create(so, tenant, "bkt", "src", 60, NULL, false, NULL, &l, &err) < 0)
    die("link", &err);
  snprintf(link_id, sizeof link_id, "%s", l.id);
  store_link_free(&l);
}

/* ---- the loop ---- */

enum setting { COLD, WARM, DEFERRED };
static const char *const setting_names[] = {"cold", "warm", "deferred"};

struct tally {
  long runs, faults;
  int problems;
};

/* Whether op's change for variant v is all there; `base` is its count
 * before the call. */
static bool is_applied(const struct op *op, int v, int64_t base) {
  return op->count ? op->count() == base + 1 : op->applied(v);
}

/* The loop's variants: the one under test (prepared once, retried until
 * its change is applied) and the warm-ups'. */
struct variants {
  int v, prepped, warm;
};

/* One call of op under fault k at n.  Returns true when the call met no
 * fault (the loop is done). */
static bool one_run(const struct op *op, struct variants *vs, enum setting set, enum fault k,
                    long n, struct tally *tl) {
  struct husk_err err = {0};
  /* Warm runs go on on the connection a failed allocation left. */
  bool fresh = !st;
  if (fresh)
    open_all();
  if (set != COLD && fresh) {
    /* The same call once before, so that its statements are cached. */
    int w = WARM_BASE + vs->warm++;
    if ((op->prep && op->prep(w, &err) < 0) || op->run(w, &err) < 0)
      die("warm-up", &err);
  }
  if (op->prep && vs->prepped != vs->v) {
    if (op->prep(vs->v, &err) < 0)
      die("prep", &err);
    vs->prepped = vs->v;
  }
  int v = vs->v;
  int64_t base = op->count ? op->count() : 0;
  uint64_t before = fingerprint();
  if (set == DEFERRED)
    state_defer_begin(st);
  arm(k, n);
  husk_err_clear(&err);
  int r = op->run(v, &err);
  if (set == DEFERRED) {
    struct husk_err e2 = {0};
    if (state_defer_end(st, &e2) < 0 && r == 0) {
      r = -1;
      err = e2;
    }
  }
  bool fired = fault_fired;
  disarm();
  tl->runs++;
  tl->faults += fired;
  bool done = false;
  bool bad = false;
  bool applied = false;
  if (r == 0) {
    applied = is_applied(op, v, base);
    if (!applied) {
      printf("#   %s %s %s@%ld: succeeded but not applied\n", op->name, setting_names[set],
             fault_names[k], n);
      bad = true;
    }
    done = !fired;
  } else {
    if (r != -1 || err.code == 0 || !err.msg[0]) {
      printf("#   %s %s %s@%ld: returned %d, code %d\n", op->name, setting_names[set],
             fault_names[k], n, r, err.code);
      bad = true;
    }
    if (!fired) {
      printf("#   %s %s %s@%ld: failed without a fault: %s\n", op->name, setting_names[set],
             fault_names[k], n, err.msg);
      bad = true;
      done = true;
    }
    /* The next call on the connection (any call: here the cheapest) must
     * find no transaction open, and no trace of this one's changes. */
    int version = 0;
    struct husk_err e3;
    if (state_schema_version(st, &version, &e3) < 0)
      printf("#   state_schema_version: %s\n", e3.msg);
    applied = is_applied(op, v, base);
    if (!sqlite3_get_autocommit(st->db)) {
      printf("#   %s %s %s@%ld: a transaction was left open\n", op->name, setting_names[set],
             fault_names[k], n);
      bad = true;
    }
    if (k != F_SYNC && (applied || fingerprint() != before)) {
      printf("#   %s %s %s@%ld: failed (%s) but %s\n", op->name, setting_names[set], fault_names[k],
             n, err.msg, applied ? "applied" : "changed rows");
      bad = true;
    }
    /* Before any sweep: a file whose fsync failed is not left published. */
    if (k == F_STORE_SYNC && !files_match_rows()) {
      printf("#   %s %s %s@%ld: a file is left without its row\n", op->name, setting_names[set],
             fault_names[k], n);
      bad = true;
    }
  }
  if (!integrity_ok()) {
    printf("#   %s %s %s@%ld: integrity\n", op->name, setting_names[set], fault_names[k], n);
    bad = true;
  }
  /* Reopened: what a restart would find.  A failed allocation cannot make
   * the file differ from what the connection showed, so only acknowledged
   * changes and I/O faults are looked at again. */
  if (r == -1 && k != F_WRITE && k != F_SYNC && k != F_STORE_SYNC) {
    if (set == COLD)
      close_all();
    tl->problems += bad;
    return done;
  }
  close_all();
  open_all();
  bool applied_now = is_applied(op, v, base);
  if (r == -1 && !applied_now && fingerprint() != before) {
    printf("#   %s %s %s@%ld: after reopening, rows changed but the change is "
           "not all there\n",
           op->name, setting_names[set], fault_names[k], n);
    bad = true;
  }
  if (r == 0 && !applied_now) {
    printf("#   %s %s %s@%ld: acknowledged, gone after reopening\n", op->name, setting_names[set],
           fault_names[k], n);
    bad = true;
  }
  if (!integrity_ok() || !files_match_rows()) {
    printf("#   %s %s %s@%ld: after reopening: integrity or files\n", op->name, setting_names[set],
           fault_names[k], n);
    bad = true;
  }
  if (applied_now)
    vs->v++;
  close_all();
  tl->problems += bad;
  return done;
}

/* Runs N = 1, 2, ... for one operation, fault kind and setting. */
/* Every fault point is tried with HUSK_FAULTS_FULL=1; by default, on a
 * freshly opened database (where compiling statements makes the calls
 * allocate many times more), every STRIDE'th allocation, from a different
 * start for each operation. */
#define STRIDE 10
static bool full;

static void loop(const struct op *op, struct variants *vs, enum setting set, enum fault k,
                 struct tally *tl) {
  long step = !full && set == COLD && (k == F_MALLOC || k == F_MALLOC_PERSIST) ? STRIDE : 1;
  long first = step > 1 ? 1 + (long)(strlen(op->name) % STRIDE) : 1;
  for (long n = first;; n += step) {
    if (one_run(op, vs, set, k, n, tl))
      break;
    if (tl->problems > 20 || n > 100000) {
      printf("#   %s: giving up\n", op->name);
      tl->problems++;
      break;
    }
  }
  if (st)
    close_all();
}

static void check_op(const struct op *op) {
  with_store = true; /* setup() makes the store's rows too */
  fresh_dir();
  open_all();
  setup();
  close_all();
  with_store = op->store;
  struct variants vs = {.prepped = -1};
  struct tally tl = {0};
  for (enum fault k = F_MALLOC; k <= F_STORE_SYNC; k++) {
    for (enum setting set = COLD; set <= DEFERRED; set++) {
      if (set == DEFERRED && k != F_SYNC && k != F_WRITE)
        continue; /* deferral moves only the sync */
      struct tally one = {0};
      loop(op, &vs, set, k, &one);
      tl.runs += one.runs;
      tl.faults += one.faults;
      tl.problems += one.problems;
      if (one.problems)
        printf("#   %s: %d problems under %s faults (%s)\n", op->name, one.problems, fault_names[k],
               setting_names[set]);
    }
  }
  printf("# %s: %ld runs, %ld with a fault\n", op->name, tl.runs, tl.faults);
  if (tl.problems)
    unit_cur_failed = 1;
  rm_tree(AT_FDCWD, dir);
}

/* The injector itself: a fault must reach the caller as an error. */
TEST(injector_reaches_callers) {
  with_store = true;
  fresh_dir();
  open_all();
  setup();
  struct husk_err err;
  arm(F_MALLOC_PERSIST, 1);
  CHECK(tenant_create_run(0, &err) == -1);
  CHECK(fault_fired);
  disarm();
  arm(F_SYNC, 1);
  CHECK(audit_run(0, &err) == -1);
  CHECK(fault_fired);
  disarm();
  close_all();
  open_all();
  arm(F_WRITE, 1);
  CHECK(audit_run(1, &err) == -1);
  CHECK(fault_fired);
  disarm();
  close_all();
  rm_tree(AT_FDCWD, dir);
}

/* A failed fsync of an object's data, or of its directory after the
 * rename, fails the PUT: no row, no object to read, no file published. */
TEST(object_fsync_failure_fails_put) {
  with_store = true;
  fresh_dir();
  open_all();
  setup();
  for (long n = 1; n <= 2; n++) {
    struct husk_err err = {0};
    char key[32];
    snprintf(key, sizeof key, "fs%ld", n);
    arm(F_STORE_SYNC, n);
    CHECK(put(key, "must not stay", &err) == -1);
    CHECK(fault_fired);
    disarm();
    CHECK(err.code == EIO);
    CHECK(q("SELECT count(*) FROM objects WHERE key = '%s'", key) == 0);
    struct store_object o;
    CHECK(store_object_get(so, tenant, "bkt", key, &o, NULL, &err) == -1);
    CHECK(files_match_rows());
  }
  close_all();
  rm_tree(AT_FDCWD, dir);
}

static void run_ops(void) {
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
    unit_cur_failed = 0;
    check_op(&ops[i]);
    unit_n++;
    if (unit_cur_failed)
      unit_failed++;
    printf("%s %d - %s under every fault\n", unit_cur_failed ? "not ok" : "ok", unit_n,
           ops[i].name);
  }
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *f = getenv("HUSK_FAULTS_FULL");
  full = f && *f && strcmp(f, "0");
  install_faults();
  RUN(injector_reaches_callers);
  RUN(object_fsync_failure_fails_put);
  run_ops();
  return unit_done();
}
