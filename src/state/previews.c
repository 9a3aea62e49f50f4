/* Preview rows and their access log (see preview_state.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/db.h"
#include "state/preview_state.h"
#include "util/cleanup.h"

#define PV_COLUMNS                                                                                 \
  "id, tenant_id, box_id, port, access, token_hash, password_hash, max_body, max_header, "         \
  "max_conns, idle_ms, duration_ms, created_ms, expires_ms, revoked_ms, created_by"

static int read_preview(sqlite3_stmt *s, void *row, struct husk_err *err) {
  struct state_preview *p = row;
  memset(p, 0, sizeof *p);
  bool ok = db_col_text(s, 0, p->id, sizeof p->id);
  ok &= db_col_text(s, 1, p->tenant_id, sizeof p->tenant_id);
  ok &= db_col_text(s, 2, p->box_id, sizeof p->box_id);
  p->port = sqlite3_column_int(s, 3);
  ok &= db_col_text(s, 4, p->access, sizeof p->access);
  if (sqlite3_column_bytes(s, 5) == STATE_PREVIEW_HASH_SIZE)
    memcpy(p->token_hash, sqlite3_column_blob(s, 5), STATE_PREVIEW_HASH_SIZE);
  else
    ok = false;
  if (sqlite3_column_type(s, 6) == SQLITE_BLOB &&
      sqlite3_column_bytes(s, 6) == STATE_PREVIEW_HASH_SIZE) {
    memcpy(p->password_hash, sqlite3_column_blob(s, 6), STATE_PREVIEW_HASH_SIZE);
    p->has_password = true;
  }
  p->max_body = sqlite3_column_int64(s, 7);
  p->max_header = sqlite3_column_int64(s, 8);
  p->max_conns = sqlite3_column_int64(s, 9);
  p->idle_ms = sqlite3_column_int64(s, 10);
  p->duration_ms = sqlite3_column_int64(s, 11);
  p->created_ms = sqlite3_column_int64(s, 12);
  p->expires_ms = sqlite3_column_int64(s, 13);
  p->revoked_ms = sqlite3_column_int64(s, 14);
  ok &= db_col_text(s, 15, p->created_by, sizeof p->created_by);
  if (!ok)
    return husk_fail(err, EUCLEAN, "preview row has an oversized value");
  /* Only the daemon writes it (checked then): anything else was not. */
  if (state_check_created_by(p->created_by, true, err) < 0)
    return husk_fail(err, EUCLEAN, "preview row has a malformed creator");
  return 0;
}

/* Under the lock: one integer from a query with text binds a (and b). */
static int count_locked(struct state *st, const char *sql, const char *a, const char *b,
                        int64_t now, int64_t *out, struct husk_err *err) {
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q, sql, err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(q, 1, a)) || (b && (rc = db_text(q, 2, b))) ||
      (now && (rc = db_int(q, 3, now))))
    return db_fail(st, err, rc, "cannot bind preview");
  int r = db_step_row(st, q, "cannot read previews", err);
  if (r < 0)
    return -1;
  *out = r ? sqlite3_column_int64(q, 0) : 0;
  return 0;
}

/* Under the lock: ENOENT unless box `box_id` is the tenant's. */
static int box_of_tenant_locked(struct state *st, const char *tenant_id, const char *box_id,
                                struct husk_err *err) {
  int64_t n = 0;
  if (count_locked(st, "SELECT count(*) FROM boxes WHERE tenant_id = ?1 AND id = ?2", tenant_id,
                   box_id, 0, &n, err) < 0)
    return -1;
  return n ? 0 : husk_fail(err, ENOENT, "no such sandbox");
}

int state_preview_insert(struct state *st, const struct state_preview *p, int max_live,
                         struct husk_err *err) {
  if (check_id("preview id", p->id, sizeof p->id, err) < 0 ||
      check_id("tenant id", p->tenant_id, sizeof p->tenant_id, err) < 0 ||
      check_id("box id", p->box_id, sizeof p->box_id, err) < 0)
    return -1;
  if (!memchr(p->created_by, '\0', sizeof p->created_by))
    return husk_fail(err, EINVAL, "creator is not terminated");
  if (state_check_created_by(p->created_by, true, err) < 0)
    return -1;
  if (p->port < 1 || p->port > 65535)
    return husk_fail(err, EINVAL, "port %d is not 1..65535", p->port);
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  char cur[16];
  if (box_current_state(st, p->tenant_id, p->box_id, cur, sizeof cur, err) < 0)
    return -1;
  if (!box_state_live(cur))
    return husk_fail(err, EBUSY, "sandbox %s is %s", p->box_id, cur);
  int64_t now = p->created_ms ? p->created_ms : state_now_ms(), live = 0;
  if (count_locked(st,
                   "SELECT count(*) FROM previews WHERE box_id = ?1 AND tenant_id = ?2 AND "
                   "revoked_ms = 0 AND expires_ms > ?3",
                   p->box_id, p->tenant_id, now, &live, err) < 0)
    return -1;
  if (max_live > 0 && live >= max_live)
    return husk_fail(err, EDQUOT,
                     "sandbox %s has %" PRId64 " previews in force, the most it may have: revoke "
                     "one first",
                     p->box_id, live);
  /* The box's dead previews beyond the newest max_live go, with their
   * logs: a box's rows stay bounded however often it makes previews. */
  cleanup_stmt sqlite3_stmt *d = NULL;
  if (db_prepare(
          st, &d,
          "DELETE FROM previews WHERE id IN (SELECT id FROM previews WHERE box_id = ?1 AND "
          "(revoked_ms != 0 OR expires_ms <= ?2) ORDER BY created_ms DESC LIMIT -1 OFFSET ?3)",
          err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(d, 1, p->box_id)) || (rc = db_int(d, 2, now)) ||
      (rc = db_int(d, 3, max_live > 0 ? max_live : 64)))
    return db_fail(st, err, rc, "cannot bind preview");
  if (db_step_done(st, d, "cannot remove old previews", err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "INSERT INTO previews (" PV_COLUMNS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
                 "?9, ?10, ?11, ?12, ?13, ?14, 0, ?15)",
                 err) < 0)
    return -1;
  if ((rc = db_text(s, 1, p->id)) || (rc = db_text(s, 2, p->tenant_id)) ||
      (rc = db_text(s, 3, p->box_id)) || (rc = db_int(s, 4, p->port)) ||
      (rc = db_text(s, 5, p->access)) ||
      (rc = db_blob(s, 6, p->token_hash, STATE_PREVIEW_HASH_SIZE)) ||
      (rc = p->has_password ? db_blob(s, 7, p->password_hash, STATE_PREVIEW_HASH_SIZE)
                            : sqlite3_bind_null(s, 7)) ||
      (rc = db_int(s, 8, p->max_body)) || (rc = db_int(s, 9, p->max_header)) ||
      (rc = db_int(s, 10, p->max_conns)) || (rc = db_int(s, 11, p->idle_ms)) ||
      (rc = db_int(s, 12, p->duration_ms)) || (rc = db_int(s, 13, now)) ||
      (rc = db_int(s, 14, p->expires_ms)) || (rc = db_text(s, 15, p->created_by)))
    return db_fail(st, err, rc, "cannot bind preview");
  if (db_step_done(st, s, "cannot insert preview", err) < 0)
    return -1;
  db_fault_point("preview_insert");
  return db_commit(&txn, err);
}

int state_preview_get(struct state *st, const char *tenant_id, const char *box_id, const char *id,
                      struct state_preview *out, struct husk_err *err) {
  if (check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0)
    return -1;
  if (check_id("box id", box_id, STATE_BOX_ID_SIZE, err) < 0 ||
      check_id("preview id", id, STATE_PREVIEW_ID_SIZE, err) < 0)
    return husk_fail(err, ENOENT, "no such preview");
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct state_preview)};
  if (db_rows_select(st, &rows,
                     "SELECT " PV_COLUMNS " FROM previews WHERE tenant_id = ?1 AND box_id = ?2 "
                     "AND id = ?3",
                     DB_ARGS(DB_TEXT(tenant_id), DB_TEXT(box_id), DB_TEXT(id)), read_preview,
                     "cannot read preview", err) < 0)
    return -1;
  if (rows.n == 0)
    return husk_fail(err, ENOENT, "no such preview");
  *out = *(struct state_preview *)db_rows_at(&rows, 0);
  return 0;
}

int state_preview_by_token(struct state *st, const unsigned char hash[STATE_PREVIEW_HASH_SIZE],
                           struct state_preview *out, struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q, "SELECT " PV_COLUMNS " FROM previews WHERE token_hash = ?1", err) < 0)
    return -1;
  int rc = db_blob(q, 1, hash, STATE_PREVIEW_HASH_SIZE);
  if (rc)
    return db_fail(st, err, rc, "cannot bind preview");
  int r = db_step_row(st, q, "cannot read preview", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, ENOENT, "no such preview");
  return read_preview(q, out, err);
}

int state_preview_list(struct state *st, const char *tenant_id, const char *box_id,
                       int (*cb)(void *ctx, const struct state_preview *p), void *ctx,
                       struct husk_err *err) {
  if (check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0)
    return -1;
  if (check_id("box id", box_id, STATE_BOX_ID_SIZE, err) < 0)
    return husk_fail(err, ENOENT, "no such sandbox");
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct state_preview)};
  {
    cleanup_unlock struct state *locked = db_lock(st);
    if (box_of_tenant_locked(st, tenant_id, box_id, err) < 0)
      return -1;
    if (db_rows_select_locked(st, &rows,
                              "SELECT " PV_COLUMNS " FROM previews WHERE tenant_id = ?1 AND "
                              "box_id = ?2 ORDER BY created_ms DESC, id",
                              DB_ARGS(DB_TEXT(tenant_id), DB_TEXT(box_id)), read_preview,
                              "cannot list previews", err) < 0)
      return -1;
  }
  return db_rows_each(&rows, rows.n, cb, ctx);
}

int state_preview_revoke(struct state *st, const char *tenant_id, const char *box_id,
                         const char *id, struct husk_err *err) {
  if (check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0)
    return -1;
  if (check_id("box id", box_id, STATE_BOX_ID_SIZE, err) < 0 ||
      check_id("preview id", id, STATE_PREVIEW_ID_SIZE, err) < 0)
    return husk_fail(err, ENOENT, "no such preview");
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "UPDATE previews SET revoked_ms = CASE WHEN revoked_ms = 0 THEN ?4 ELSE "
                 "revoked_ms END WHERE tenant_id = ?1 AND box_id = ?2 AND id = ?3",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, tenant_id)) || (rc = db_text(s, 2, box_id)) || (rc = db_text(s, 3, id)) ||
      (rc = db_int(s, 4, state_now_ms())))
    return db_fail(st, err, rc, "cannot bind preview");
  if (db_step_done(st, s, "cannot revoke preview", err) < 0)
    return -1;
  if (sqlite3_changes(st->db) != 1)
    return husk_fail(err, ENOENT, "no such preview");
  return 0;
}

int state_preview_access_add(struct state *st, const char *id, const struct state_preview_access *a,
                             int keep, int64_t *seq_out, struct husk_err *err) {
  if (check_id("preview id", id, STATE_PREVIEW_ID_SIZE, err) < 0)
    return -1;
  /* What the client sent (the path above all) is stored readable: control
   * characters and invalid UTF-8 become '?'. */
  struct state_preview_access c = *a;
  c.remote[sizeof c.remote - 1] = c.method[sizeof c.method - 1] = c.path[sizeof c.path - 1] = '\0';
  sanitize_text(c.remote);
  sanitize_text(c.method);
  sanitize_text(c.path);
  a = &c;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_begin(st, &txn, err) < 0 ||
      db_prepare(st, &q,
                 "INSERT INTO preview_access (preview_id, ts_ms, remote, method, path, status, "
                 "bytes_in, bytes_out, duration_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(q, 1, id)) || (rc = db_int(q, 2, a->ts_ms ? a->ts_ms : state_now_ms())) ||
      (rc = db_text(q, 3, a->remote)) || (rc = db_text(q, 4, a->method)) ||
      (rc = db_text(q, 5, a->path)) || (rc = db_int(q, 6, a->status)) ||
      (rc = db_int(q, 7, a->bytes_in)) || (rc = db_int(q, 8, a->bytes_out)) ||
      (rc = db_int(q, 9, a->duration_ms)))
    return db_fail(st, err, rc, "preview access");
  if (db_step_done(st, q, "cannot record the preview access", err) < 0)
    return -1;
  int64_t seq = sqlite3_last_insert_rowid(st->db);
  /* The newest `keep` accesses of a preview are kept, pruned at every
   * 64th record of the preview: whoever holds the URL decides how often
   * it is used, not how big the database grows. */
  cleanup_stmt sqlite3_stmt *n = NULL;
  if (db_prepare(st, &n,
                 "UPDATE previews SET log_count = log_count + 1 WHERE id = ?1 "
                 "RETURNING log_count",
                 err) < 0)
    return -1;
  if ((rc = db_text(n, 1, id)))
    return db_fail(st, err, rc, "preview access");
  int r = db_step_row(st, n, "cannot count the preview access", err);
  if (r < 0)
    return -1;
  int64_t count = r ? sqlite3_column_int64(n, 0) : 0;
  sqlite3_reset(n);
  if (keep > 0 && count > keep && count % 64 == 0) {
    cleanup_stmt sqlite3_stmt *d = NULL;
    if (db_prepare(st, &d,
                   "DELETE FROM preview_access WHERE preview_id = ?1 AND seq <= (SELECT seq FROM "
                   "preview_access WHERE preview_id = ?1 ORDER BY seq DESC LIMIT 1 OFFSET ?2)",
                   err) < 0)
      return -1;
    if ((rc = db_text(d, 1, id)) || (rc = db_int(d, 2, keep)))
      return db_fail(st, err, rc, "preview access");
    if (db_step_done(st, d, "cannot prune the preview access log", err) < 0)
      return -1;
  }
  if (db_commit(&txn, err) < 0)
    return -1;
  if (seq_out)
    *seq_out = seq;
  return 0;
}

int state_preview_access_end(struct state *st, int64_t seq, int64_t bytes_in, int64_t bytes_out,
                             int64_t duration_ms, struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "UPDATE preview_access SET bytes_in = ?2, bytes_out = ?3, duration_ms = ?4 "
                 "WHERE seq = ?1",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_int(s, 1, seq)) || (rc = db_int(s, 2, bytes_in)) || (rc = db_int(s, 3, bytes_out)) ||
      (rc = db_int(s, 4, duration_ms)))
    return db_fail(st, err, rc, "preview access");
  return db_step_done(st, s, "cannot finish the preview access", err) < 0 ? -1 : 0;
}

static int read_access(sqlite3_stmt *s, void *row, struct husk_err *err) {
  struct state_preview_access *a = row;
  memset(a, 0, sizeof *a);
  a->seq = sqlite3_column_int64(s, 0);
  a->ts_ms = sqlite3_column_int64(s, 1);
  /* Stored cut to these sizes, so nothing can be oversized; text_fit
   * keeps a row readable even so. */
  text_fit(a->remote, sizeof a->remote, (const char *)sqlite3_column_text(s, 2));
  text_fit(a->method, sizeof a->method, (const char *)sqlite3_column_text(s, 3));
  text_fit(a->path, sizeof a->path, (const char *)sqlite3_column_text(s, 4));
  a->status = sqlite3_column_int(s, 5);
  a->bytes_in = sqlite3_column_int64(s, 6);
  a->bytes_out = sqlite3_column_int64(s, 7);
  a->duration_ms = sqlite3_column_int64(s, 8);
  (void)err;
  return 0;
}

int state_preview_access_list(struct state *st, const char *tenant_id, const char *box_id,
                              const char *id, int64_t after_seq, int limit,
                              int (*cb)(void *ctx, const struct state_preview_access *a), void *ctx,
                              struct husk_err *err) {
  if (check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0)
    return -1;
  if (check_id("box id", box_id, STATE_BOX_ID_SIZE, err) < 0 ||
      check_id("preview id", id, STATE_PREVIEW_ID_SIZE, err) < 0)
    return husk_fail(err, ENOENT, "no such preview");
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct state_preview_access)};
  {
    cleanup_unlock struct state *locked = db_lock(st);
    cleanup_stmt sqlite3_stmt *q = NULL;
    if (db_prepare(st, &q,
                   "SELECT count(*) FROM previews WHERE tenant_id = ?1 AND box_id = ?2 AND id = ?3",
                   err) < 0)
      return -1;
    int rc;
    if ((rc = db_text(q, 1, tenant_id)) || (rc = db_text(q, 2, box_id)) || (rc = db_text(q, 3, id)))
      return db_fail(st, err, rc, "cannot bind preview");
    int r = db_step_row(st, q, "cannot read previews", err);
    if (r < 0)
      return -1;
    if (r == 0 || sqlite3_column_int64(q, 0) == 0)
      return husk_fail(err, ENOENT, "no such preview");
    if (db_rows_select_locked(st, &rows,
                              "SELECT seq, ts_ms, remote, method, path, status, bytes_in, "
                              "bytes_out, duration_ms FROM preview_access WHERE preview_id = ?1 "
                              "AND seq > ?2 ORDER BY seq LIMIT ?3",
                              DB_ARGS(DB_TEXT(id), DB_INT(after_seq), DB_INT(limit)), read_access,
                              "cannot list preview accesses", err) < 0)
      return -1;
  }
  return db_rows_each(&rows, rows.n, cb, ctx);
}
