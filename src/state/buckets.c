/* Buckets of the object store: per tenant, names unique within it (S3's
 * name rules are the storage plane's, store_bucket_name_ok). */
#define _GNU_SOURCE
#include <errno.h>

#include "state/db.h"
#include "state/store_state.h"
#include "util/cleanup.h"

int bucket_check_locked(struct state *st, const char *tenant_id, const char *bucket,
                        struct husk_err *err) {
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q, "SELECT 1 FROM buckets WHERE tenant_id = ? AND name = ?", err) < 0)
    return -1;
  int rc = db_text(q, 1, tenant_id) || db_text(q, 2, bucket);
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "bucket");
  int r = db_step_row(st, q, "bucket", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, STORE_ENOBUCKET, "The specified bucket does not exist");
  return 0;
}

int state_bucket_check(struct state *st, const char *tenant_id, const char *name,
                       struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(st);
  return bucket_check_locked(st, tenant_id, name, err);
}

int state_bucket_create(struct state *st, const char *tenant_id, const char *name,
                        struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  if (bucket_check_locked(st, tenant_id, name, err) == 0)
    return husk_fail(
        err, STORE_EOWNED,
        "Your previous request to create the named bucket succeeded and you already own it");
  if (err->code != STORE_ENOBUCKET)
    return -1;
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q, "INSERT INTO buckets (tenant_id, name, created_ms) VALUES (?, ?, ?)",
                 err) < 0)
    return -1;
  int rc = db_text(q, 1, tenant_id) || db_text(q, 2, name) || db_int(q, 3, state_now_ms());
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "bucket");
  if (db_step_done(st, q, "cannot create the bucket", err) < 0)
    return -1;
  return db_commit(&txn, err);
}

int state_bucket_delete(struct state *st, const char *tenant_id, const char *name,
                        struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  if (bucket_check_locked(st, tenant_id, name, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q,
                 "SELECT (SELECT count(*) FROM (SELECT 1 FROM objects WHERE tenant_id = ?1 AND "
                 "bucket = ?2 LIMIT 1)) + (SELECT count(*) FROM (SELECT 1 FROM uploads WHERE "
                 "tenant_id = ?1 AND bucket = ?2 LIMIT 1))",
                 err) < 0)
    return -1;
  int rc = db_text(q, 1, tenant_id) || db_text(q, 2, name);
  if (rc != SQLITE_OK || db_step_row(st, q, "bucket", err) != 1)
    return rc != SQLITE_OK ? db_fail(st, err, rc, "bucket") : -1;
  if (sqlite3_column_int64(q, 0) > 0)
    return husk_fail(err, STORE_ENOTEMPTY, "The bucket you tried to delete is not empty");
  cleanup_stmt sqlite3_stmt *d = NULL;
  if (db_prepare(st, &d, "DELETE FROM buckets WHERE tenant_id = ? AND name = ?", err) < 0)
    return -1;
  rc = db_text(d, 1, tenant_id) || db_text(d, 2, name);
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "bucket");
  if (db_step_done(st, d, "cannot delete the bucket", err) < 0)
    return -1;
  return db_commit(&txn, err);
}

struct bucket_row {
  char name[STORE_BUCKET_MAX + 1];
  int64_t created_ms;
};

static int read_bucket(sqlite3_stmt *q, void *row, struct husk_err *err) {
  struct bucket_row *b = row;
  db_col_text(q, 0, b->name, sizeof b->name);
  b->created_ms = sqlite3_column_int64(q, 1);
  return 0;
}

int state_bucket_list(struct state *st, const char *tenant_id,
                      int (*cb)(void *ctx, const char *name, int64_t created_ms), void *ctx,
                      struct husk_err *err) {
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct bucket_row)};
  if (db_rows_select(st, &rows,
                     "SELECT name, created_ms FROM buckets WHERE tenant_id = ? AND substr(name, 1, 1) != '_' "
                     "ORDER BY name",
                     DB_ARGS(DB_TEXT(tenant_id)), read_bucket, "buckets", err) < 0)
    return -1;
  for (size_t i = 0; i < rows.n; i++) {
    struct bucket_row *b = db_rows_at(&rows, i);
    int v = cb(ctx, b->name, b->created_ms);
    if (v)
      return db_cb_verdict(v);
  }
  return 0;
}
