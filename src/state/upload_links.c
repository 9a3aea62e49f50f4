/* Upload-link rows (see upload_link_state.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "state/db.h"
#include "state/upload_link_state.h"
#include "util/cleanup.h"

#define UL_COLUMNS                                                                                 \
  "id, tenant_id, token_hash, bucket, prefix, content_types, max_files, max_file_bytes, "          \
  "files_used, bytes_used, created_ms, expires_ms, revoked_ms, created_by"

static int read_link(sqlite3_stmt *s, void *row, struct husk_err *err) {
  struct state_upload_link *l = row;
  memset(l, 0, sizeof *l);
  bool ok = db_col_text(s, 0, l->id, sizeof l->id);
  ok &= db_col_text(s, 1, l->tenant_id, sizeof l->tenant_id);
  if (sqlite3_column_bytes(s, 2) == STATE_ULINK_HASH_SIZE)
    memcpy(l->token_hash, sqlite3_column_blob(s, 2), STATE_ULINK_HASH_SIZE);
  else
    ok = false;
  ok &= db_col_text(s, 3, l->bucket, sizeof l->bucket);
  ok &= db_col_text(s, 4, l->prefix, sizeof l->prefix);
  ok &= db_col_text(s, 5, l->content_types, sizeof l->content_types);
  l->max_files = sqlite3_column_int64(s, 6);
  l->max_file_bytes = sqlite3_column_int64(s, 7);
  l->files_used = sqlite3_column_int64(s, 8);
  l->bytes_used = sqlite3_column_int64(s, 9);
  l->created_ms = sqlite3_column_int64(s, 10);
  l->expires_ms = sqlite3_column_int64(s, 11);
  l->revoked_ms = sqlite3_column_int64(s, 12);
  ok &= db_col_text(s, 13, l->created_by, sizeof l->created_by);
  if (!ok)
    return husk_fail(err, EUCLEAN, "upload link row has an oversized value");
  return 0;
}

int state_upload_link_insert(struct state *st, const struct state_upload_link *l, int max_live,
                             struct husk_err *err) {
  if (check_id("upload link id", l->id, sizeof l->id, err) < 0 ||
      check_id("tenant id", l->tenant_id, sizeof l->tenant_id, err) < 0)
    return -1;
  if (!memchr(l->created_by, '\0', sizeof l->created_by))
    return husk_fail(err, EINVAL, "creator is not terminated");
  if (state_check_created_by(l->created_by, true, err) < 0)
    return -1;
  if (l->max_files < 1 || l->max_file_bytes < 1)
    return husk_fail(err, EINVAL, "an upload link takes at least one file of at least one byte");
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  int64_t now = l->created_ms ? l->created_ms : state_now_ms();
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q,
                 "SELECT count(*) FROM upload_links WHERE tenant_id = ?1 AND revoked_ms = 0 AND "
                 "expires_ms > ?2 AND files_used < max_files",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(q, 1, l->tenant_id)) || (rc = db_int(q, 2, now)))
    return db_fail(st, err, rc, "cannot bind upload link");
  int r = db_step_row(st, q, "cannot count upload links", err);
  if (r < 0)
    return -1;
  int64_t live = r ? sqlite3_column_int64(q, 0) : 0;
  if (max_live > 0 && live >= max_live)
    return husk_fail(err, EDQUOT,
                     "the tenant has %" PRId64 " upload links in force, the most it may have: "
                     "revoke one first",
                     live);
  /* Dead links beyond the newest max_live go: a tenant's rows stay
   * bounded however many links it makes. */
  cleanup_stmt sqlite3_stmt *d = NULL;
  if (db_prepare(st, &d,
                 "DELETE FROM upload_links WHERE id IN (SELECT id FROM upload_links WHERE "
                 "tenant_id = ?1 AND (revoked_ms != 0 OR expires_ms <= ?2 OR files_used >= "
                 "max_files) ORDER BY created_ms DESC LIMIT -1 OFFSET ?3)",
                 err) < 0)
    return -1;
  if ((rc = db_text(d, 1, l->tenant_id)) || (rc = db_int(d, 2, now)) ||
      (rc = db_int(d, 3, max_live > 0 ? max_live : 100)))
    return db_fail(st, err, rc, "cannot bind upload link");
  if (db_step_done(st, d, "cannot remove old upload links", err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "INSERT INTO upload_links (" UL_COLUMNS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, "
                 "?8, 0, 0, ?9, ?10, 0, ?11)",
                 err) < 0)
    return -1;
  if ((rc = db_text(s, 1, l->id)) || (rc = db_text(s, 2, l->tenant_id)) ||
      (rc = db_blob(s, 3, l->token_hash, STATE_ULINK_HASH_SIZE)) ||
      (rc = db_text(s, 4, l->bucket)) || (rc = db_text(s, 5, l->prefix)) ||
      (rc = db_text(s, 6, l->content_types)) || (rc = db_int(s, 7, l->max_files)) ||
      (rc = db_int(s, 8, l->max_file_bytes)) || (rc = db_int(s, 9, now)) ||
      (rc = db_int(s, 10, l->expires_ms)) || (rc = db_text(s, 11, l->created_by)))
    return db_fail(st, err, rc, "cannot bind upload link");
  if (db_step_done(st, s, "cannot insert upload link", err) < 0)
    return -1;
  return db_commit(&txn, err);
}

int state_upload_link_by_token(struct state *st, const unsigned char hash[STATE_ULINK_HASH_SIZE],
                               struct state_upload_link *out, struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q, "SELECT " UL_COLUMNS " FROM upload_links WHERE token_hash = ?1", err) < 0)
    return -1;
  int rc = db_blob(q, 1, hash, STATE_ULINK_HASH_SIZE);
  if (rc)
    return db_fail(st, err, rc, "cannot bind upload link");
  int r = db_step_row(st, q, "cannot read upload link", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, ENOENT, "no such upload link");
  return read_link(q, out, err);
}

int state_upload_link_list(struct state *st, const char *tenant_id,
                           int (*cb)(void *ctx, const struct state_upload_link *l), void *ctx,
                           struct husk_err *err) {
  if (check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0)
    return -1;
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct state_upload_link)};
  if (db_rows_select(st, &rows,
                     "SELECT " UL_COLUMNS " FROM upload_links WHERE tenant_id = ?1 ORDER BY "
                     "created_ms DESC, id",
                     DB_ARGS(DB_TEXT(tenant_id)), read_link, "cannot list upload links", err) < 0)
    return -1;
  return db_rows_each(&rows, rows.n, cb, ctx);
}

int state_upload_link_revoke(struct state *st, const char *tenant_id, const char *id,
                             struct husk_err *err) {
  if (check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0)
    return -1;
  if (check_id("upload link id", id, STATE_ULINK_ID_SIZE, err) < 0)
    return husk_fail(err, ENOENT, "no such upload link");
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "UPDATE upload_links SET revoked_ms = CASE WHEN revoked_ms = 0 THEN ?3 ELSE "
                 "revoked_ms END WHERE id = ?1 AND tenant_id = ?2",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, id)) || (rc = db_text(s, 2, tenant_id)) ||
      (rc = db_int(s, 3, state_now_ms())))
    return db_fail(st, err, rc, "cannot bind upload link");
  if (db_step_done(st, s, "cannot revoke upload link", err) < 0)
    return -1;
  return sqlite3_changes(st->db) ? 0 : husk_fail(err, ENOENT, "no such upload link");
}

int state_upload_link_claim(struct state *st, const char *id, int64_t now, struct husk_err *err) {
  if (check_id("upload link id", id, STATE_ULINK_ID_SIZE, err) < 0)
    return husk_fail(err, ENOENT, "no such upload link");
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q,
                 "SELECT revoked_ms, expires_ms, files_used, max_files FROM upload_links WHERE "
                 "id = ?1",
                 err) < 0)
    return -1;
  int rc = db_text(q, 1, id);
  if (rc)
    return db_fail(st, err, rc, "cannot bind upload link");
  int r = db_step_row(st, q, "cannot read upload link", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, ENOENT, "no such upload link");
  if (sqlite3_column_int64(q, 0))
    return husk_fail(err, EKEYREVOKED, "this upload link was revoked");
  if (sqlite3_column_int64(q, 1) <= now)
    return husk_fail(err, EKEYEXPIRED, "this upload link has expired");
  if (sqlite3_column_int64(q, 2) >= sqlite3_column_int64(q, 3))
    return husk_fail(err, EMLINK, "this upload link has taken all the files it may");
  cleanup_stmt sqlite3_stmt *u = NULL;
  if (db_prepare(st, &u, "UPDATE upload_links SET files_used = files_used + 1 WHERE id = ?1", err) <
      0)
    return -1;
  if ((rc = db_text(u, 1, id)))
    return db_fail(st, err, rc, "cannot bind upload link");
  if (db_step_done(st, u, "cannot claim an upload slot", err) < 0)
    return -1;
  return db_commit(&txn, err);
}

/* One UPDATE of link `id` (bind 1) with an integer (bind 2). */
static int update_link(struct state *st, const char *sql, const char *id, int64_t n,
                       struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s, sql, err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, id)) || (rc = db_int(s, 2, n)))
    return db_fail(st, err, rc, "cannot bind upload link");
  return db_step_done(st, s, "cannot update upload link", err);
}

int state_upload_link_release(struct state *st, const char *id, struct husk_err *err) {
  return update_link(
      st, "UPDATE upload_links SET files_used = max(files_used - ?2, 0) WHERE id = ?1", id, 1, err);
}

int state_upload_link_stored(struct state *st, const char *id, int64_t bytes,
                             struct husk_err *err) {
  return update_link(st,
                     "UPDATE upload_links SET bytes_used = bytes_used + ?2, files_stored = "
                     "files_stored + 1 WHERE id = ?1",
                     id, bytes, err);
}

int state_upload_links_settle(struct state *st, unsigned *settled, struct husk_err *err) {
  *settled = 0;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "UPDATE upload_links SET files_used = files_stored WHERE files_used > files_stored",
                 err) < 0 ||
      db_step_done(st, s, "cannot give back the upload slots of interrupted uploads", err) < 0)
    return -1;
  *settled = (unsigned)sqlite3_changes(st->db);
  return 0;
}
