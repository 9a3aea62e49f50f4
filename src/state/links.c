/* Links of the object store (presigned GET URLs, storage/links.c signs
 * them), the log of their fetches (the newest STORE_LINK_LOG_MAX per
 * link) and the counters of refused fetches. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "state/db.h"
#include "state/store_state.h"
#include "util/cleanup.h"

#define LINK_COLS                                                                                  \
  "id, bucket, key, url, filename, created_ms, expires_ms, revoked_ms, denied, denied_last_ms, "   \
  "created_by"

static void link_free(void *row) {
  struct store_link *l = row;
  free(l->key);
  free(l->url);
  l->key = l->url = NULL;
}

/* A row of LINK_COLS into a zeroed struct store_link. */
static int read_link(sqlite3_stmt *q, void *row, struct husk_err *err) {
  struct store_link *l = row;
  db_col_text(q, 0, l->id, sizeof l->id);
  db_col_text(q, 1, l->bucket, sizeof l->bucket);
  l->key = db_col_strdup(q, 2);
  l->url = db_col_strdup(q, 3);
  db_col_text(q, 4, l->filename, sizeof l->filename);
  l->created_ms = sqlite3_column_int64(q, 5);
  l->expires_ms = sqlite3_column_int64(q, 6);
  l->revoked_ms = sqlite3_column_int64(q, 7);
  l->denied = sqlite3_column_int64(q, 8);
  l->denied_last_ms = sqlite3_column_int64(q, 9);
  bool ok = db_col_text(q, 10, l->created_by, sizeof l->created_by);
  if (!l->key || !l->url)
    return husk_error(err, ENOMEM, "links");
  /* Only the daemon writes it (checked then): anything else was not. */
  if (!ok || state_check_created_by(l->created_by, true, err) < 0)
    return husk_fail(err, EUCLEAN, "link row has a malformed creator");
  return 0;
}

/* Under the lock: STORE_ENOLINK unless the tenant has link `id`. */
static int link_check_locked(struct state *st, const char *tenant_id, const char *id,
                             struct husk_err *err) {
  cleanup_stmt sqlite3_stmt *c = NULL;
  if (db_prepare(st, &c, "SELECT 1 FROM links WHERE id = ? AND tenant_id = ?", err) < 0)
    return -1;
  int rc = db_text(c, 1, id) || db_text(c, 2, tenant_id);
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "link");
  int r = db_step_row(st, c, "link", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, STORE_ENOLINK, "no such link");
  return 0;
}

int state_link_insert(struct state *st, const char *tenant_id, const struct store_link *l,
                      struct husk_err *err) {
  if (!memchr(l->created_by, '\0', sizeof l->created_by))
    return husk_fail(err, EINVAL, "creator is not terminated");
  if (state_check_created_by(l->created_by, true, err) < 0)
    return -1;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  cleanup_stmt sqlite3_stmt *ins = NULL;
  if (db_begin(st, &txn, err) < 0 ||
      db_prepare(st, &ins,
                 "INSERT INTO links (id, tenant_id, bucket, key, filename, url, created_ms, "
                 "expires_ms, created_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                 err) < 0)
    return -1;
  int rc = db_text(ins, 1, l->id) || db_text(ins, 2, tenant_id) || db_text(ins, 3, l->bucket) ||
           db_text(ins, 4, l->key) || db_text(ins, 5, l->filename) || db_text(ins, 6, l->url) ||
           db_int(ins, 7, l->created_ms) || db_int(ins, 8, l->expires_ms) ||
           db_text(ins, 9, l->created_by);
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "link");
  if (db_step_done(st, ins, "cannot store the link", err) < 0)
    return -1;
  return db_commit(&txn, err);
}

int state_link_get(struct state *st, const char *tenant_id, const char *id, struct store_link *out,
                   struct husk_err *err) {
  memset(out, 0, sizeof *out);
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q, "SELECT " LINK_COLS " FROM links WHERE id = ? AND tenant_id = ?", err) < 0)
    return -1;
  int rc = db_text(q, 1, id) || db_text(q, 2, tenant_id);
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "link");
  int r = db_step_row(st, q, "link", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, STORE_ENOLINK, "no such link");
  if (read_link(q, out, err) < 0) {
    link_free(out);
    return -1;
  }
  return 0;
}

int state_link_revoke(struct state *st, const char *tenant_id, const char *id,
                      struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_begin(st, &txn, err) < 0 ||
      db_prepare(
          st, &q,
          "UPDATE links SET revoked_ms = ? WHERE id = ? AND tenant_id = ? AND revoked_ms = 0",
          err) < 0)
    return -1;
  int rc = db_int(q, 1, state_now_ms()) || db_text(q, 2, id) || db_text(q, 3, tenant_id);
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "link");
  int n = db_step_done(st, q, "cannot revoke the link", err);
  if (n < 0)
    return -1;
  /* Nothing changed: unknown, another tenant's, or revoked already (then:
   * fine). */
  if (n == 0 && link_check_locked(st, tenant_id, id, err) < 0)
    return -1;
  return db_commit(&txn, err);
}

int state_link_list(struct state *st, const char *tenant_id,
                    int (*cb)(void *ctx, const struct store_link *l), void *ctx,
                    struct husk_err *err) {
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct store_link),
                                      .free_item = link_free};
  if (db_rows_select(st, &rows,
                     "SELECT " LINK_COLS " FROM links WHERE tenant_id = ? "
                     "ORDER BY created_ms DESC, id LIMIT 1000",
                     DB_ARGS(DB_TEXT(tenant_id)), read_link, "links", err) < 0)
    return -1;
  return db_rows_each(&rows, rows.n, cb, ctx);
}

int state_link_record(struct state *st, const char *id, const char *remote, const char *user_agent,
                      int status, struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_begin(st, &txn, err) < 0 ||
      db_prepare(st, &q,
                 "INSERT INTO link_access (link_id, ts_ms, remote, user_agent, status) "
                 "SELECT id, ?, ?, ?, ? FROM links WHERE id = ?",
                 err) < 0)
    return -1;
  int rc = db_int(q, 1, state_now_ms()) || db_text(q, 2, remote) || db_text(q, 3, user_agent) ||
           db_int(q, 4, status) || db_text(q, 5, id);
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "link access");
  if (db_step_done(st, q, "cannot record the link access", err) < 0)
    return -1;
  /* Only the newest STORE_LINK_LOG_MAX fetches of a link are kept: a
   * link's holder decides how often it is fetched, not how big the
   * database grows. */
  cleanup_stmt sqlite3_stmt *d = NULL;
  if (db_prepare(st, &d,
                 "DELETE FROM link_access WHERE link_id = ?1 AND seq <= (SELECT seq FROM "
                 "link_access WHERE link_id = ?1 ORDER BY seq DESC LIMIT 1 OFFSET ?2)",
                 err) < 0)
    return -1;
  rc = db_text(d, 1, id) || db_int(d, 2, STORE_LINK_LOG_MAX);
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "link access");
  if (db_step_done(st, d, "cannot prune the link access log", err) < 0)
    return -1;
  return db_commit(&txn, err);
}

int state_link_denied(struct state *st, const char *id, struct husk_err *err) {
  int64_t now = state_now_ms();
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  int n = 0;
  if (id) {
    cleanup_stmt sqlite3_stmt *q = NULL;
    if (db_prepare(st, &q, "UPDATE links SET denied = denied + 1, denied_last_ms = ? WHERE id = ?",
                   err) < 0)
      return -1;
    int rc = db_int(q, 1, now) || db_text(q, 2, id);
    if (rc != SQLITE_OK)
      return db_fail(st, err, rc, "link");
    n = db_step_done(st, q, "cannot count the refused fetch", err);
    if (n < 0)
      return -1;
  }
  if (n == 0) {
    cleanup_stmt sqlite3_stmt *g = NULL;
    if (db_prepare(st, &g,
                   "INSERT INTO link_denied (id, count, last_ms) VALUES (1, 1, ?1) "
                   "ON CONFLICT (id) DO UPDATE SET count = count + 1, last_ms = ?1",
                   err) < 0)
      return -1;
    int rc = db_int(g, 1, now);
    if (rc != SQLITE_OK)
      return db_fail(st, err, rc, "link");
    if (db_step_done(st, g, "cannot count the refused fetch", err) < 0)
      return -1;
  }
  return db_commit(&txn, err);
}

int state_link_denied_total(struct state *st, int64_t *count, struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q, "SELECT count FROM link_denied WHERE id = 1", err) < 0)
    return -1;
  int r = db_step_row(st, q, "link", err);
  if (r < 0)
    return -1;
  *count = r ? sqlite3_column_int64(q, 0) : 0;
  return 0;
}

static int read_access(sqlite3_stmt *q, void *row, struct husk_err *err) {
  struct store_link_access *a = row;
  a->seq = sqlite3_column_int64(q, 0);
  a->ts_ms = sqlite3_column_int64(q, 1);
  db_col_text(q, 2, a->remote, sizeof a->remote);
  db_col_text(q, 3, a->user_agent, sizeof a->user_agent);
  a->status = sqlite3_column_int(q, 4);
  return 0;
}

int state_link_log(struct state *st, const char *tenant_id, const char *id, int64_t after_seq,
                   int limit, int (*cb)(void *ctx, const struct store_link_access *a), void *ctx,
                   struct husk_err *err) {
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct store_link_access)};
  {
    cleanup_unlock struct state *locked = db_lock(st);
    if (link_check_locked(st, tenant_id, id, err) < 0 ||
        db_rows_select_locked(st, &rows,
                              "SELECT seq, ts_ms, remote, user_agent, status FROM link_access "
                              "WHERE link_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                              DB_ARGS(DB_TEXT(id), DB_INT(after_seq), DB_INT(limit)), read_access,
                              "link", err) < 0)
      return -1;
  }
  return db_rows_each(&rows, rows.n, cb, ctx);
}
