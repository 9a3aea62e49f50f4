/* Internals shared by the files of the state plane; not part of its API.
 *
 * Every public function follows one shape:
 *
 *   cleanup_unlock struct state *locked = db_lock(st);   serialise on the connection
 *   cleanup_txn struct db_txn txn = {0};                 rolled back unless committed
 *   if (db_begin(st, &txn, err) < 0) return -1;
 *   cleanup_stmt sqlite3_stmt *s = NULL;                 finalized at scope exit
 *   ... db_prepare, db_text/db_int binds, db_step_done ...
 *   return db_commit(&txn, err);
 *
 * Declaration order matters: cleanups run in reverse, so the transaction is
 * rolled back before the lock is released. */
#ifndef HUSK_STATE_DB_H
#define HUSK_STATE_DB_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "state/state.h"
#include "util/error.h"
#include "util/utf8.h" /* utf8_valid, used with the input checks below */

/* Prepared statements kept for reuse (db_prepare), keyed by their SQL
 * text: compiling SQL is a large part of SQLite's time per request. */
#define DB_STMT_CACHE 64
struct db_cached_stmt {
  sqlite3_stmt *s;
  uint64_t hash; /* of the SQL text */
  bool busy;     /* handed out, not yet released */
  uint64_t used; /* when last handed out (state.cache_tick): LRU eviction */
};

struct state {
  pthread_mutex_t lock;
  sqlite3 *db;
  struct db_cached_stmt cache[DB_STMT_CACHE];
  unsigned ncache;
  uint64_t cache_tick;
  /* Compiled when the database is opened: undoing a failed transaction
   * must not need memory (compiling it then could fail for the very lack
   * of memory that failed the transaction, and leave it open). */
  sqlite3_stmt *rollback;
  struct state *next_open;   /* the list of open states (db.c) */
  struct state *held_before; /* the state this thread held when it locked this one */
  /* durable.c: commits are numbered; synced_seq is the last one known to
   * be on disk. */
  uint64_t commit_seq; /* atomic */
  pthread_mutex_t sync_lock;
  pthread_cond_t sync_cond;
  uint64_t synced_seq;
  bool syncing;
  int sync_failed; /* an errno once a sync failed: from then on, never durable */
  uint64_t syncs;  /* fdatasync calls made (tests: group commit) */
  int wal_fd;
  char *wal_path, *wal_dir;
  /* What a tenant's unset (STATE_UNLIMITED) max_boxes / max_memory mean
   * (state_set_tenant_defaults); STATE_UNLIMITED unless the daemon says. */
  _Atomic int64_t default_max_boxes, default_max_memory;
};

/* ---- durability (durable.c) ---- */
/* Install the WAL hook that syncs commits; after configure(). */
int db_durable_init(struct state *st, struct husk_err *err);
void db_durable_close(struct state *st);
/* Called as the state lock is released: everything committed so far may
 * have been read by this thread, so its deferral must cover it. */
void db_durable_seen(struct state *st);
/* fdatasync of the WAL and fsync of its directory, replaceable by tests to
 * simulate a failing disk (tests/unit/test_faults.c). */
extern int (*db_fdatasync)(int fd);
extern int (*db_fsync)(int fd);

/* ---- locking ---- */
struct state *db_lock(struct state *st);
void db_unlockp(struct state **locked);
/* `unused`: the guard is only ever read by its cleanup, which clang does
 * not count as a use. */
#define cleanup_unlock __attribute__((cleanup(db_unlockp), unused))
/* Release early (before running listing callbacks). */
static inline void db_unlock_now(struct state **locked) { db_unlockp(locked); }

/* ---- statements ----
 * db_prepare hands out a cached statement when the calling thread holds
 * the state lock (db_lock) and the same SQL was prepared before and is not
 * in use; releasing it (cleanup_stmt, before the lock: declared after it)
 * resets it and clears its bindings for the next caller.  A statement
 * that is not kept is finalized on release. */
void db_releasep(sqlite3_stmt **s);
#define cleanup_stmt __attribute__((cleanup(db_releasep)))

int db_prepare(struct state *st, sqlite3_stmt **out, const char *sql, struct husk_err *err);
/* Binds return an SQLite result code; chain them with || and report with
 * db_fail.  Text is bound SQLITE_STATIC: it must outlive the statement's
 * steps, which every caller's locals do.  NULL text binds SQL NULL. */
int db_text(sqlite3_stmt *s, int i, const char *v);
int db_int(sqlite3_stmt *s, int i, int64_t v);
int db_blob(sqlite3_stmt *s, int i, const void *v, size_t n);
int db_text_named(sqlite3_stmt *s, const char *name, const char *v);
int db_int_named(sqlite3_stmt *s, const char *name, int64_t v);
/* Step a statement that returns no rows.  Returns the number of changed rows. */
int db_step_done(struct state *st, sqlite3_stmt *s, const char *what, struct husk_err *err);
/* Step once: 1 for a row, 0 at the end, -1 on error. */
int db_step_row(struct state *st, sqlite3_stmt *s, const char *what, struct husk_err *err);
/* Copy a text column into a fixed buffer; false if it does not fit (the
 * database was edited behind our back: writes are length-checked). */
bool db_col_text(sqlite3_stmt *s, int i, char *dst, size_t size);
/* A text column as a heap string; NULL only when out of memory. */
char *db_col_strdup(sqlite3_stmt *s, int i);

/* Fill err from an SQLite result code and the connection's message:
 * "<what>: <sqlite message>", errno mapped from the code (constraint
 * violations become EEXIST/ENOENT/EINVAL, SQLITE_BUSY EBUSY ...). */
int db_fail(struct state *st, struct husk_err *err, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int db_errno(int rc);

/* ---- transactions ---- */
struct db_txn {
  struct state *st;
  bool open;
};
/* BEGIN IMMEDIATE: takes the write lock up front, so a read-then-write
 * transaction cannot fail half-way with SQLITE_BUSY. */
int db_begin(struct state *st, struct db_txn *t, struct husk_err *err);
int db_commit(struct db_txn *t, struct husk_err *err);
void db_txn_cleanup(struct db_txn *t);
#define cleanup_txn __attribute__((cleanup(db_txn_cleanup)))

/* ---- fault injection (tests only) ----
 * When set, called at named points inside transactions, after some writes
 * and before the commit, so a test can kill the process there and check
 * that the database comes back with all of the change or none of it. */
extern void (*state_fault_hook)(const char *point);
static inline void db_fault_point(const char *point) {
  if (state_fault_hook)
    state_fault_hook(point);
}

/* ---- input checks (check.c) ----
 * `size` is the size of the buffer the value is stored in, NUL included;
 * `what` names the value in the error message (which never echoes it). */
/* 1..size-1 bytes of [A-Za-z0-9_-]. */
int check_id(const char *what, const char *s, size_t size, struct husk_err *err);
/* Like check_id but "" is allowed (optional id fields). */
int check_id_or_empty(const char *what, const char *s, size_t size, struct husk_err *err);
/* < size bytes of valid UTF-8 without control characters; "" unless !empty_ok. */
int check_text(const char *what, const char *s, size_t size, bool empty_ok, struct husk_err *err);
/* A JSON text of at most STATE_JSON_MAX bytes (its shape is checked by the
 * schema's CHECK constraints). */
int check_json(const char *what, const char *s, struct husk_err *err);
/* In place: every control character and every byte that is not part of
 * well-formed UTF-8 becomes '?'.  For text that must be stored whatever it
 * holds (the audit log's detail). */
void sanitize_text(char *s);
/* Copy `src` into dst[size] for a human-readable field that must be stored
 * whatever it holds (a box's reason): sanitized, and if too long cut to fit
 * with "..." at the end.  `size` >= 4. */
void text_fit(char *dst, size_t size, const char *src);

/* ---- box states (boxes.c) ---- */
bool box_state_known(const char *s);
bool box_state_terminal(const char *s);
bool box_state_live(const char *s);
/* Under the lock: the current state of box `id`, if it belongs to
 * `tenant_id` (NULL: anyone); ENOENT otherwise. */
int box_current_state(struct state *st, const char *tenant_id, const char *id, char *state,
                      size_t size, struct husk_err *err);
/* The SQL list of live states, for IN (...) clauses. */
#define DB_LIVE_STATES "('creating','running','stopping','paused')"
#define DB_TERMINAL_STATES "('stopped','failed')"

/* ---- the object store's rows (store_state.h) ----
 * Shared by buckets.c, objects.c and uploads.c; under the lock, and a
 * transaction for the writes. */
struct state_object_new;
/* STORE_ENOBUCKET unless the tenant has the bucket (buckets.c). */
int bucket_check_locked(struct state *st, const char *tenant_id, const char *bucket,
                        struct husk_err *err);
/* STORE_EQUOTA if the tenant's usage, less `freed`, plus `add` passes
 * `quota` (0: no quota) (objects.c). */
int usage_quota_locked(struct state *st, const char *tenant_id, uint64_t quota, uint64_t add,
                       uint64_t freed, struct husk_err *err);
/* state_object_put's work, with `freed` more bytes counted as freed
 * (objects.c). */
int object_put_locked(struct state *st, const char *tenant_id, const char *bucket,
                      const struct state_object_new *o, uint64_t quota, uint64_t freed, char *old,
                      struct husk_err *err);

/* ---- schema (schema.c) ---- */
int schema_migrate(struct state *st, struct husk_err *err);

/* ---- listings ----
 * Rows are copied out under the lock into a growable buffer, then handed
 * to the callback without it.  Every listing has this shape:
 *
 *   cleanup_rows struct db_rows rows = {.item_size = sizeof(struct row)};
 *   if (db_rows_select(st, &rows, "SELECT ... WHERE tenant_id = ?1 LIMIT ?2",
 *                      DB_ARGS(DB_TEXT(tenant_id), DB_INT(limit)), read_row,
 *                      "cannot list rows", err) < 0)
 *     return -1;
 *   return db_rows_each(&rows, rows.n, cb, ctx);   the callback, without the lock
 *
 * A listing that checks something under the same lock first takes it
 * itself and calls db_rows_select_locked; one whose binds depend on its
 * filter prepares and binds itself and calls db_rows_fill.
 * `free_item` (may be NULL) releases what a row owns (its JSON strings). */
struct db_rows {
  void *items;
  size_t n, cap, item_size;
  void (*free_item)(void *item);
};
/* A zeroed slot at the end, or NULL when out of memory. */
void *db_rows_push(struct db_rows *r);
static inline void *db_rows_at(const struct db_rows *r, size_t i) {
  return (char *)r->items + i * r->item_size;
}
void db_rows_free(struct db_rows *r);
#define cleanup_rows __attribute__((cleanup(db_rows_free)))
/* Under the lock: step `s` (prepared and bound) to its end, each row read
 * by `read` into a new zeroed slot of `rows`.  `what` names the listing in
 * errors ("cannot list keys").  0, or -1 with err filled (by `read` too:
 * what it left in its slot is released with the rest). */
int db_rows_fill(struct state *st, sqlite3_stmt *s, struct db_rows *rows,
                 int (*read)(sqlite3_stmt *s, void *row, struct husk_err *err), const char *what,
                 struct husk_err *err);
/* What a listing returns for a callback's verdict: 0 to go on (and 0 at
 * the end), a negative verdict as is, a positive one as 0. */
static inline int db_cb_verdict(int r) { return r < 0 ? r : 0; }

/* One parameter of a listing's query, bound to ?1, ?2, ... in order. */
struct db_arg {
  enum { DB_ARG_TEXT, DB_ARG_TEXT_N, DB_ARG_INT } kind;
  const char *text; /* DB_ARG_TEXT (NULL binds NULL), DB_ARG_TEXT_N */
  size_t len;       /* DB_ARG_TEXT_N: the text's length (it may hold NULs) */
  int64_t i;        /* DB_ARG_INT */
};
#define DB_TEXT(s) ((struct db_arg){.kind = DB_ARG_TEXT, .text = (s)})
#define DB_TEXT_N(s, n) ((struct db_arg){.kind = DB_ARG_TEXT_N, .text = (s), .len = (n)})
#define DB_INT(v) ((struct db_arg){.kind = DB_ARG_INT, .i = (v)})
/* The array and count db_rows_select takes. */
#define DB_ARGS(...)                                                                              \
  (const struct db_arg[]){__VA_ARGS__},                                                            \
      sizeof((const struct db_arg[]){__VA_ARGS__}) / sizeof(struct db_arg)
#define DB_NO_ARGS NULL, 0

/* Under the lock (the caller's): prepare `sql`, bind `args`, and fill
 * `rows` from it as db_rows_fill does.  `what` names the listing in
 * errors.  0, or -1 with err filled. */
int db_rows_select_locked(struct state *st, struct db_rows *rows, const char *sql,
                          const struct db_arg *args, size_t nargs,
                          int (*read)(sqlite3_stmt *s, void *row, struct husk_err *err),
                          const char *what, struct husk_err *err);
/* db_rows_select_locked under a lock of its own, released on return. */
int db_rows_select(struct state *st, struct db_rows *rows, const char *sql,
                   const struct db_arg *args, size_t nargs,
                   int (*read)(sqlite3_stmt *s, void *row, struct husk_err *err), const char *what,
                   struct husk_err *err);

/* Hand the first `max` rows (at most rows->n) to `cb(ctx, row)`, each row
 * a pointer to its slot (converted to the callback's row type), stopping
 * at the first nonzero verdict; evaluates to that verdict as
 * db_cb_verdict gives it.  Call it without the lock. */
#define db_rows_each(rows, max, cb, ctx)                                                          \
  __extension__({                                                                                  \
    const struct db_rows *each_rows_ = (rows);                                                     \
    size_t each_max_ = (max), each_i_ = 0;                                                         \
    int each_v_ = 0;                                                                               \
    for (; !each_v_ && each_i_ < each_rows_->n && each_i_ < each_max_; each_i_++)                  \
      each_v_ = (cb)((ctx), db_rows_at(each_rows_, each_i_));                                      \
    db_cb_verdict(each_v_);                                                                        \
  })

/* A listing's page size: 0 means STATE_LIST_DEFAULT, 1..STATE_LIST_MAX
 * as is, anything else EINVAL. */
int db_check_limit(int limit, int *out, struct husk_err *err);

#endif
