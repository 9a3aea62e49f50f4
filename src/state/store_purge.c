/* The rows of a deleted tenant's storage (store_tenant_purge, in
 * storage/purge.c, removes their files): objects and parts in batches,
 * each one transaction that hands back the files it stopped naming, then
 * the rows that name no file in one. */
#define _GNU_SOURCE
#include <errno.h>

#include "state/db.h"
#include "state/store_state.h"
#include "util/cleanup.h"

#define BATCH_STR_(x) #x
#define BATCH_STR(x) BATCH_STR_(x)

int state_store_purge_files(struct state *st, const char *tenant_id, enum state_store_files kind,
                            char (*files)[STORE_ID_SIZE], size_t *n, struct husk_err *err) {
  static const char objects[] =
      "DELETE FROM objects WHERE rowid IN (SELECT rowid FROM objects WHERE tenant_id = ?1 "
      "LIMIT " BATCH_STR(STATE_STORE_PURGE_BATCH) ") RETURNING file";
  static const char parts[] =
      "DELETE FROM parts WHERE rowid IN (SELECT p.rowid FROM parts p JOIN uploads u ON "
      "p.upload_id = u.id WHERE u.tenant_id = ?1 LIMIT " BATCH_STR(
          STATE_STORE_PURGE_BATCH) ") RETURNING file";
  *n = 0;
  if (check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0)
    return -1;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_begin(st, &txn, err) < 0 ||
      db_prepare(st, &q, kind == STATE_PART_FILES ? parts : objects, err) < 0)
    return -1;
  int rc = db_text(q, 1, tenant_id);
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "tenant storage");
  int r;
  while ((r = db_step_row(st, q, "cannot remove the tenant's storage", err)) == 1) {
    /* The LIMIT in the SQL bounds the rows; a longer name is no file of ours. */
    if (*n < STATE_STORE_PURGE_BATCH && db_col_text(q, 0, files[*n], STORE_ID_SIZE))
      (*n)++;
  }
  if (r < 0)
    return -1;
  sqlite3_reset(q);
  db_fault_point("store_tenant_purge");
  if (db_commit(&txn, err) < 0)
    return -1;
  /* Committed, files not yet unlinked: what store_open's sweep is for. */
  db_fault_point("store_tenant_purge_committed");
  return 0;
}

int state_store_purge_rows(struct state *st, const char *tenant_id, struct husk_err *err) {
  if (check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0)
    return -1;
  /* No files left: the rest is rows, children before parents. */
  static const char *const rest[] = {
      "DELETE FROM uploads WHERE tenant_id = ?1",
      "DELETE FROM links WHERE tenant_id = ?1", /* link_access: ON DELETE CASCADE */
      "DELETE FROM buckets WHERE tenant_id = ?1",
      "DELETE FROM s3_keys WHERE tenant_id = ?1",
  };
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) {
    cleanup_stmt sqlite3_stmt *q = NULL;
    if (db_prepare(st, &q, rest[i], err) < 0)
      return -1;
    int rc = db_text(q, 1, tenant_id);
    if (rc != SQLITE_OK)
      return db_fail(st, err, rc, "tenant storage");
    if (db_step_done(st, q, "cannot remove the tenant's storage", err) < 0)
      return -1;
  }
  return db_commit(&txn, err);
}
