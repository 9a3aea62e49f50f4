/* The database connection: opening it safely, the settings that make
 * acknowledged writes durable, and the small helpers every table file uses
 * (locking, statements, transactions, error mapping).
 *
 * One connection, one mutex.  SQLite allows one writer at a time anyway, and
 * each call here is a handful of indexed statements, so a pool of reader
 * connections would buy little and cost the question of which connection a
 * transaction is on.  The connection is also opened FULLMUTEX, so even a
 * call that forgot the lock could not corrupt SQLite's own structures. */
#define _GNU_SOURCE
#include "state/db.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/id.h"

/* How long a statement waits for a lock held by another process (a second
 * husk reading the database, a backup) before failing with EBUSY. */
#define DB_BUSY_TIMEOUT_MS 5000

/* Random bytes of a state id (state_new_id): 96 bits, 24 hex digits. */
#define STATE_ID_BYTES 12

void (*state_fault_hook)(const char *point);

int64_t state_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The prefix is checked here, the rest is util/id.c's: state ids are
 * [A-Za-z0-9_-] (check_id), so a prefix must be too. */
int state_new_id(const char *prefix, char *out, size_t size, struct husk_err *err) {
  size_t plen = prefix ? strlen(prefix) : 0;
  if (plen > 0 && check_id("id prefix", prefix, plen + 1, err) < 0)
    return -1;
  return id_new(prefix, STATE_ID_BYTES, out, size, err);
}

/* ---- locking ---- */

/* The state whose lock this thread took last (the others it holds follow
 * through held_before), so that a statement's release, which only sees
 * the statement, can find the cache it belongs to. */
static _Thread_local struct state *held;

/* Whether this thread holds st's lock (its locks nest through held_before). */
static bool holds(const struct state *st) {
  for (const struct state *p = held; p; p = p->held_before)
    if (p == st)
      return true;
  return false;
}

/* Roll back a transaction that a failed call could not: no transaction
 * outlives the call that began it, so one open here is such a leftover.
 * Undoing it can itself need memory (SQLite's rollback does, when every
 * allocation fails): then it stays open until a later call succeeds in
 * rolling it back, and no call sees its changes or commits them.  The
 * statement is the one compiled at open (struct state). */
static void rollback_leftover(struct state *st) {
  if (st->db && st->rollback && !sqlite3_get_autocommit(st->db)) {
    sqlite3_step(st->rollback);
    sqlite3_reset(st->rollback);
  }
}

struct state *db_lock(struct state *st) {
  pthread_mutex_lock(&st->lock);
  st->held_before = held; /* locks nest: unlocking gives the outer one back */
  held = st;
  rollback_leftover(st);
  return st;
}

void db_unlockp(struct state **locked) {
  if (*locked) {
    db_durable_seen(*locked);
    held = (*locked)->held_before;
    pthread_mutex_unlock(&(*locked)->lock);
    *locked = NULL;
  }
}

/* ---- errors ---- */

int db_errno(int rc) {
  switch (rc) {
  case SQLITE_CONSTRAINT_PRIMARYKEY:
  case SQLITE_CONSTRAINT_UNIQUE: return EEXIST;
  case SQLITE_CONSTRAINT_FOREIGNKEY: return ENOENT;
  case SQLITE_CONSTRAINT_TRIGGER: return EPERM; /* the audit log's append-only guard */
  default: break;
  }
  switch (rc & 0xff) {
  case SQLITE_CONSTRAINT:
  case SQLITE_MISMATCH:
  case SQLITE_TOOBIG:
  case SQLITE_RANGE:
  case SQLITE_NOTADB: return EINVAL;
  case SQLITE_BUSY:
  case SQLITE_LOCKED: return EBUSY;
  case SQLITE_NOMEM: return ENOMEM;
  case SQLITE_READONLY: return EROFS;
  case SQLITE_FULL: return ENOSPC;
  case SQLITE_CORRUPT: return EUCLEAN;
  case SQLITE_PERM:
  case SQLITE_AUTH: return EACCES;
  default: return EIO;
  }
}

int db_fail(struct state *st, struct husk_err *err, int rc, const char *fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  const char *msg = st && st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc);
  int sys = st && st->db ? sqlite3_system_errno(st->db) : 0;
  int code = db_errno(rc);
  /* For I/O errors the OS's reason ("No space left on device") is what
   * a person can act on; SQLite keeps it apart from its own message. */
  if (sys != 0 && (code == EIO || (rc & 0xff) == SQLITE_CANTOPEN)) {
    husk_fail(err, sys, "%s: %s: %s", what, msg, strerror(sys));
    return -1;
  }
  return husk_fail(err, code, "%s: %s", what, msg);
}

/* ---- statements ---- */

static uint64_t sql_hash(const char *sql) {
  uint64_t h = 14695981039346656037ULL; /* FNV-1a */
  for (const unsigned char *p = (const unsigned char *)sql; *p; p++)
    h = (h ^ *p) * 1099511628211ULL;
  return h;
}

int db_prepare(struct state *st, sqlite3_stmt **out, const char *sql, struct husk_err *err) {
  bool cacheable = holds(st);
  uint64_t h = cacheable ? sql_hash(sql) : 0;
  if (cacheable) {
    for (unsigned i = 0; i < st->ncache; i++) {
      struct db_cached_stmt *c = &st->cache[i];
      if (!c->busy && c->hash == h && !strcmp(sqlite3_sql(c->s), sql)) {
        c->busy = true;
        c->used = ++st->cache_tick;
        *out = c->s;
        return 0;
      }
    }
  }
  /* PERSISTENT: a hint that the statement lives long (SQLite then keeps
   * it out of its short-lived lookaside memory). */
  int rc =
      sqlite3_prepare_v3(st->db, sql, -1, cacheable ? SQLITE_PREPARE_PERSISTENT : 0, out, NULL);
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "cannot prepare a statement");
  if (!cacheable || !*out)
    return 0;
  struct db_cached_stmt *slot = NULL;
  if (st->ncache < DB_STMT_CACHE) {
    slot = &st->cache[st->ncache++];
  } else {
    /* Full (lists build their SQL from the filters given, so texts can
     * outnumber the slots): the least recently used one not in use goes. */
    for (unsigned i = 0; i < st->ncache; i++)
      if (!st->cache[i].busy && (!slot || st->cache[i].used < slot->used))
        slot = &st->cache[i];
    if (!slot)
      return 0; /* all in use: this one is finalized on release */
    sqlite3_finalize(slot->s);
  }
  *slot = (struct db_cached_stmt){.s = *out, .hash = h, .busy = true, .used = ++st->cache_tick};
  return 0;
}

/* Open states, so that a statement released by a thread that does not
 * (or no longer) hold its state's lock still finds its cache: finalizing
 * a cached statement would leave the cache pointing at freed memory. */
static pthread_mutex_t open_lock = PTHREAD_MUTEX_INITIALIZER;
static struct state *open_states;

static void open_add(struct state *st) {
  pthread_mutex_lock(&open_lock);
  st->next_open = open_states;
  open_states = st;
  pthread_mutex_unlock(&open_lock);
}

static void open_remove(struct state *st) {
  pthread_mutex_lock(&open_lock);
  for (struct state **p = &open_states; *p; p = &(*p)->next_open)
    if (*p == st) {
      *p = st->next_open;
      break;
    }
  pthread_mutex_unlock(&open_lock);
}

static struct state *owner_of(sqlite3_stmt *s) {
  sqlite3 *db = sqlite3_db_handle(s);
  if (held && held->db == db)
    return held;
  pthread_mutex_lock(&open_lock);
  struct state *st = open_states;
  while (st && st->db != db)
    st = st->next_open;
  pthread_mutex_unlock(&open_lock);
  return st;
}

void db_releasep(sqlite3_stmt **s) {
  if (!*s)
    return;
  struct state *st = owner_of(*s);
  /* Released without its lock (no state file does that): take it, so the
   * cache is never read while another thread changes it. */
  bool lock = st && !holds(st);
  if (lock)
    pthread_mutex_lock(&st->lock);
  bool cached = false;
  for (unsigned i = 0; st && i < st->ncache && !cached; i++) {
    struct db_cached_stmt *c = &st->cache[i];
    if (c->s == *s) {
      /* reset's result repeats the last step's error, already reported */
      sqlite3_reset(*s);
      sqlite3_clear_bindings(*s);
      c->busy = false;
      cached = true;
    }
  }
  if (!cached)
    sqlite3_finalize(*s);
  if (lock)
    pthread_mutex_unlock(&st->lock);
  *s = NULL;
}

/* The cache goes before sqlite3_close, which refuses while statements
 * exist. */
static void close_db(struct state *st) {
  open_remove(st);
  for (unsigned i = 0; i < st->ncache; i++)
    sqlite3_finalize(st->cache[i].s);
  st->ncache = 0;
  sqlite3_finalize(st->rollback);
  st->rollback = NULL;
  sqlite3_close(st->db);
}

int db_text(sqlite3_stmt *s, int i, const char *v) {
  return v ? sqlite3_bind_text(s, i, v, -1, SQLITE_STATIC) : sqlite3_bind_null(s, i);
}

int db_int(sqlite3_stmt *s, int i, int64_t v) { return sqlite3_bind_int64(s, i, v); }

int db_blob(sqlite3_stmt *s, int i, const void *v, size_t n) {
  return sqlite3_bind_blob64(s, i, v, n, SQLITE_STATIC);
}

int db_text_named(sqlite3_stmt *s, const char *name, const char *v) {
  int i = sqlite3_bind_parameter_index(s, name);
  return i > 0 ? db_text(s, i, v) : SQLITE_RANGE;
}

int db_int_named(sqlite3_stmt *s, const char *name, int64_t v) {
  int i = sqlite3_bind_parameter_index(s, name);
  return i > 0 ? db_int(s, i, v) : SQLITE_RANGE;
}

int db_step_done(struct state *st, sqlite3_stmt *s, const char *what, struct husk_err *err) {
  int rc = sqlite3_step(s);
  if (rc == SQLITE_ROW) /* a pragma answering; nothing here expects rows */
    rc = SQLITE_DONE;
  if (rc != SQLITE_DONE)
    return db_fail(st, err, rc, "%s", what);
  return sqlite3_changes(st->db);
}

int db_step_row(struct state *st, sqlite3_stmt *s, const char *what, struct husk_err *err) {
  int rc = sqlite3_step(s);
  if (rc == SQLITE_ROW)
    return 1;
  if (rc == SQLITE_DONE)
    return 0;
  return db_fail(st, err, rc, "%s", what);
}

bool db_col_text(sqlite3_stmt *s, int i, char *dst, size_t size) {
  const unsigned char *v = sqlite3_column_text(s, i);
  int n = sqlite3_column_bytes(s, i);
  if (!v) {
    dst[0] = '\0';
    return true;
  }
  if (n < 0 || (size_t)n >= size) {
    dst[0] = '\0';
    return false;
  }
  memcpy(dst, v, (size_t)n);
  dst[n] = '\0';
  return true;
}

char *db_col_strdup(sqlite3_stmt *s, int i) {
  const unsigned char *v = sqlite3_column_text(s, i);
  return strdup(v ? (const char *)v : "");
}

/* ---- transactions ---- */

/* A statement without rows or bindings, through the cache (every request
 * begins and commits at least once).  Returns an SQLite result code. */
static int exec_cached(struct state *st, const char *sql) {
  cleanup_stmt sqlite3_stmt *s = NULL;
  struct husk_err ignored;
  if (db_prepare(st, &s, sql, &ignored) < 0) {
    int rc = sqlite3_extended_errcode(st->db);
    return rc != SQLITE_OK ? rc : SQLITE_ERROR;
  }
  int rc = sqlite3_step(s);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

int db_begin(struct state *st, struct db_txn *t, struct husk_err *err) {
  rollback_leftover(st);
  if (!sqlite3_get_autocommit(st->db))
    return husk_fail(err, ENOMEM, "an earlier failed transaction could not be rolled back");
  int rc = exec_cached(st, "BEGIN IMMEDIATE");
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "cannot begin a transaction");
  t->st = st;
  t->open = true;
  return 0;
}

int db_commit(struct db_txn *t, struct husk_err *err) {
  db_fault_point("commit");
  int rc = exec_cached(t->st, "COMMIT");
  if (rc != SQLITE_OK)
    return db_fail(t->st, err, rc, "cannot commit"); /* cleanup rolls back */
  t->open = false;
  return 0;
}

void db_txn_cleanup(struct db_txn *t) {
  /* A failed COMMIT (SQLITE_BUSY, I/O error) may leave the transaction
   * open; ROLLBACK is then what makes "-1 left nothing behind" true. */
  if (t->open)
    rollback_leftover(t->st);
  t->open = false;
}

/* ---- row buffers ---- */

void *db_rows_push(struct db_rows *r) {
  if (r->n == r->cap) {
    size_t cap = r->cap ? r->cap * 2 : 16;
    void *p = reallocarray(r->items, cap, r->item_size);
    if (!p)
      return NULL;
    r->items = p;
    r->cap = cap;
  }
  void *slot = db_rows_at(r, r->n++);
  memset(slot, 0, r->item_size);
  return slot;
}

int db_rows_fill(struct state *st, sqlite3_stmt *s, struct db_rows *rows,
                 int (*read)(sqlite3_stmt *s, void *row, struct husk_err *err), const char *what,
                 struct husk_err *err) {
  int r;
  while ((r = db_step_row(st, s, what, err)) == 1) {
    void *row = db_rows_push(rows);
    if (!row)
      return husk_error(err, ENOMEM, "%s", what);
    if (read(s, row, err) < 0)
      return -1;
  }
  return r < 0 ? -1 : 0;
}

int db_rows_select_locked(struct state *st, struct db_rows *rows, const char *sql,
                          const struct db_arg *args, size_t nargs,
                          int (*read)(sqlite3_stmt *s, void *row, struct husk_err *err),
                          const char *what, struct husk_err *err) {
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s, sql, err) < 0)
    return -1;
  for (size_t i = 0; i < nargs; i++) {
    int at = (int)i + 1, rc = SQLITE_MISUSE;
    switch (args[i].kind) {
    case DB_ARG_TEXT: rc = db_text(s, at, args[i].text); break;
    case DB_ARG_TEXT_N:
      rc = args[i].len > INT_MAX
               ? SQLITE_TOOBIG
               : sqlite3_bind_text(s, at, args[i].text, (int)args[i].len, SQLITE_STATIC);
      break;
    case DB_ARG_INT: rc = db_int(s, at, args[i].i); break;
    }
    if (rc != SQLITE_OK)
      return db_fail(st, err, rc, "%s", what);
  }
  return db_rows_fill(st, s, rows, read, what, err);
}

int db_rows_select(struct state *st, struct db_rows *rows, const char *sql,
                   const struct db_arg *args, size_t nargs,
                   int (*read)(sqlite3_stmt *s, void *row, struct husk_err *err), const char *what,
                   struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(st);
  return db_rows_select_locked(st, rows, sql, args, nargs, read, what, err);
}

void db_rows_free(struct db_rows *r) {
  if (r->free_item)
    for (size_t i = 0; i < r->n; i++)
      r->free_item(db_rows_at(r, i));
  free(r->items);
  r->items = NULL;
  r->n = r->cap = 0;
}

int db_check_limit(int limit, int *out, struct husk_err *err) {
  if (limit == 0)
    limit = STATE_LIST_DEFAULT;
  if (limit < 1 || limit > STATE_LIST_MAX)
    return husk_fail(err, EINVAL, "limit must be between 1 and %d", STATE_LIST_MAX);
  *out = limit;
  return 0;
}

/* ---- open / close ---- */

/* SQLite creates a missing database with mode 0644 (less the umask), and its
 * -wal and -shm files copy the database's mode.  The database holds key
 * hashes and box environments, so create it ourselves as 0600 first; an
 * existing file keeps the mode its owner gave it.  O_NOFOLLOW: a symlink
 * planted at the path must not redirect the daemon's writes. */
static int precreate(const char *path, struct husk_err *err) {
  cleanup_close int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY, 0600);
  if (fd < 0)
    return husk_error(err, errno, "cannot open database `%s`", path);
  struct stat sb;
  if (fstat(fd, &sb) < 0)
    return husk_error(err, errno, "cannot stat database `%s`", path);
  if (!S_ISREG(sb.st_mode))
    return husk_fail(err, EINVAL, "database `%s` is not a regular file", path);
  return 0;
}

static int exec_pragma(struct state *st, const char *sql, const char *expect,
                       struct husk_err *err) {
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s, sql, err) < 0)
    return -1;
  int rc = sqlite3_step(s);
  if (rc != SQLITE_ROW && rc != SQLITE_DONE)
    return db_fail(st, err, rc, "`%s` failed", sql);
  if (expect) {
    const char *got = rc == SQLITE_ROW ? (const char *)sqlite3_column_text(s, 0) : NULL;
    if (!got || strcasecmp(got, expect) != 0)
      return husk_fail(err, ENOTSUP, "`%s` answered `%s`, not `%s`", sql, got ? got : "nothing",
                       expect);
  }
  return 0;
}

static int configure(struct state *st, struct husk_err *err) {
  /* DEFENSIVE: no writable_schema or other ways to corrupt the file through
   * SQL.  The schema stays trusted (SQLite's default): its CHECKs call
   * json_valid(), which SQLite 3.40 does not mark innocuous, and the file
   * is ours (mode 0600) -- whoever can rewrite its schema can rewrite its
   * rows too. */
  int on = 1, off = 0;
  sqlite3_db_config(st->db, SQLITE_DBCONFIG_DEFENSIVE, on, NULL);
  sqlite3_db_config(st->db, SQLITE_DBCONFIG_ENABLE_LOAD_EXTENSION, off, NULL);
  sqlite3_busy_timeout(st->db, DB_BUSY_TIMEOUT_MS);
  /* WAL: readers never block the writer, and a commit is one append plus
   * one fsync.  synchronous=NORMAL leaves that fsync to durable.c, which
   * does it after every commit (FULL's guarantee: a committed change
   * survives power loss) unless a request defers it to one sync before its
   * reply.  foreign_keys: SQLite leaves them off unless asked, per
   * connection. */
  if (exec_pragma(st, "PRAGMA journal_mode=WAL", "wal", err) < 0 ||
      exec_pragma(st, "PRAGMA synchronous=NORMAL", NULL, err) < 0 ||
      exec_pragma(st, "PRAGMA foreign_keys=ON", NULL, err) < 0 ||
      /* After a checkpoint the WAL is cut back to 64 MiB, so a burst of
       * writes does not leave a large file behind for good. */
      exec_pragma(st, "PRAGMA journal_size_limit=67108864", NULL, err) < 0)
    return -1;
  return 0;
}

int state_open(struct state **out, const char *path, struct husk_err *err) {
  *out = NULL;
  if (!path || !*path)
    return husk_fail(err, EINVAL, "database path is empty");
  if (sqlite3_threadsafe() == 0)
    return husk_fail(err, ENOTSUP, "this SQLite library was built without thread support");
  if (precreate(path, err) < 0)
    return -1;

  cleanup_free struct state *st = calloc(1, sizeof *st);
  if (!st)
    return husk_error(err, ENOMEM, "cannot allocate the state handle");
  st->default_max_boxes = STATE_UNLIMITED;
  st->default_max_memory = STATE_UNLIMITED;
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX |
              SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_EXRESCODE;
  int rc = sqlite3_open_v2(path, &st->db, flags, NULL);
  if (rc != SQLITE_OK) {
    db_fail(st, err, rc, "cannot open database `%s`", path);
    sqlite3_close(st->db);
    return -1;
  }
  pthread_mutex_init(&st->lock, NULL);
  open_add(st);
  rc = sqlite3_prepare_v3(st->db, "ROLLBACK", -1, SQLITE_PREPARE_PERSISTENT, &st->rollback, NULL);
  if (rc != SQLITE_OK) {
    db_fail(st, err, rc, "cannot prepare a statement");
    husk_error_wrap(err, "database `%s`", path);
    close_db(st);
    pthread_mutex_destroy(&st->lock);
    return -1;
  }
  if (configure(st, err) < 0 || db_durable_init(st, err) < 0) {
    husk_error_wrap(err, "database `%s`", path);
    close_db(st);
    pthread_mutex_destroy(&st->lock);
    return -1;
  }
  if (schema_migrate(st, err) < 0) {
    husk_error_wrap(err, "database `%s`", path);
    close_db(st);
    db_durable_close(st);
    pthread_mutex_destroy(&st->lock);
    return -1;
  }
  *out = take_ptr(&st);
  return 0;
}

void state_close(struct state *st) {
  if (!st)
    return;
  /* Every other statement is finalized by the call that prepared it, so
   * plain close succeeds; as the last connection it also checkpoints the
   * WAL into the main file. */
  close_db(st);
  db_durable_close(st);
  pthread_mutex_destroy(&st->lock);
  free(st);
}

int state_schema_version(struct state *st, int *version, struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s, "PRAGMA user_version", err) < 0)
    return -1;
  int r = db_step_row(st, s, "cannot read the schema version", err);
  if (r < 0)
    return -1;
  *version = r ? sqlite3_column_int(s, 0) : 0;
  return 0;
}
