/* S3 access keys: the id a client sends in the clear, its tenant, and its
 * secret sealed by the storage plane (storage/access_keys.c: the secret
 * itself never reaches the database).  Revoking the API key that minted a
 * key revokes it too (state_key_revoke, keys.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "state/db.h"
#include "state/store_state.h"
#include "util/cleanup.h"

int state_s3_key_insert(struct state *st, const char *key_id, const char *tenant_id,
                        const void *sealed, size_t sealed_len, bool internal,
                        const char *api_key_id, struct husk_err *err) {
  if (api_key_id[0] && check_id("API key id", api_key_id, STATE_KEY_ID_SIZE, err) < 0)
    return -1;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q,
                 "INSERT INTO s3_keys (id, tenant_id, sealed, internal, created_ms, api_key_id) "
                 "VALUES (?, ?, ?, ?, ?, ?)",
                 err) < 0)
    return -1;
  int rc = db_text(q, 1, key_id) || db_text(q, 2, tenant_id) || db_blob(q, 3, sealed, sealed_len) ||
           db_int(q, 4, internal) || db_int(q, 5, state_now_ms()) || db_text(q, 6, api_key_id);
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "S3 key");
  if (db_step_done(st, q, "cannot store the S3 key", err) < 0)
    return -1;
  return db_commit(&txn, err);
}

int state_s3_key_get(struct state *st, const char *key_id, char *tenant_id, unsigned char *sealed,
                     size_t *sealed_len, bool *internal, struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q,
                 "SELECT tenant_id, sealed, internal FROM s3_keys WHERE id = ? AND revoked_ms = 0",
                 err) < 0)
    return -1;
  int rc = db_text(q, 1, key_id);
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "S3 key");
  int r = db_step_row(st, q, "S3 key", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, STORE_ENOACCESSKEY,
                     "The AWS Access Key Id you provided does not exist in our records.");
  if (!db_col_text(q, 0, tenant_id, STATE_TENANT_ID_SIZE))
    return husk_fail(err, EUCLEAN, "S3 key row has an oversized value");
  if (internal)
    *internal = sqlite3_column_int(q, 2) != 0;
  const void *blob = sqlite3_column_blob(q, 1);
  int n = sqlite3_column_bytes(q, 1);
  if (n < 0 || (size_t)n > STATE_S3_SEALED_MAX)
    return husk_fail(err, EUCLEAN, "a sealed S3 secret has a bad size");
  if (n > 0)
    memcpy(sealed, blob, (size_t)n);
  *sealed_len = (size_t)n;
  return 0;
}

int state_s3_key_internal(struct state *st, const char *tenant_id, char *key_id,
                          struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q,
                 "SELECT id FROM s3_keys WHERE tenant_id = ? AND internal = 1 AND revoked_ms = 0 "
                 "ORDER BY created_ms LIMIT 1",
                 err) < 0)
    return -1;
  int rc = db_text(q, 1, tenant_id);
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "S3 key");
  int r = db_step_row(st, q, "S3 key", err);
  if (r < 0)
    return -1;
  if (r == 1)
    db_col_text(q, 0, key_id, STORE_ACCESS_KEY_SIZE);
  else
    key_id[0] = 0;
  return 0;
}

static int read_key_info(sqlite3_stmt *q, void *row, struct husk_err *err) {
  struct store_key_info *k = row;
  db_col_text(q, 0, k->id, sizeof k->id);
  k->created_ms = sqlite3_column_int64(q, 1);
  k->revoked_ms = sqlite3_column_int64(q, 2);
  db_col_text(q, 3, k->api_key_id, sizeof k->api_key_id);
  return 0;
}

int state_s3_key_list(struct state *st, const char *tenant_id,
                      int (*cb)(void *ctx, const struct store_key_info *k), void *ctx,
                      struct husk_err *err) {
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct store_key_info)};
  if (db_rows_select(st, &rows,
                     "SELECT id, created_ms, revoked_ms, api_key_id FROM s3_keys WHERE "
                     "tenant_id = ? AND internal = 0 ORDER BY created_ms, id LIMIT 1000",
                     DB_ARGS(DB_TEXT(tenant_id)), read_key_info, "S3 keys", err) < 0)
    return -1;
  return db_rows_each(&rows, rows.n, cb, ctx);
}

int state_s3_key_revoke(struct state *st, const char *tenant_id, const char *key_id,
                        struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_begin(st, &txn, err) < 0 ||
      db_prepare(st, &q,
                 "UPDATE s3_keys SET revoked_ms = CASE revoked_ms WHEN 0 THEN ? ELSE revoked_ms "
                 "END WHERE id = ? AND tenant_id = ? AND internal = 0",
                 err) < 0)
    return -1;
  int rc = db_int(q, 1, state_now_ms()) || db_text(q, 2, key_id) || db_text(q, 3, tenant_id);
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "S3 key");
  int n = db_step_done(st, q, "cannot revoke the S3 key", err);
  if (n < 0)
    return -1;
  if (n == 0)
    return husk_fail(err, STORE_ENOACCESSKEY, "no such S3 key");
  return db_commit(&txn, err);
}
