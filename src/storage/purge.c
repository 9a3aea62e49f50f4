/* Removing a deleted tenant's storage (store_tenant_purge).
 *
 * Files follow the store's write discipline in reverse: rows go first, in
 * one transaction per batch, and only after its commit are the files those
 * rows named unlinked.  A crash between the two leaves files no row names;
 * store_open's sweep removes them.  Batches keep the memory a purge needs
 * bounded by PURGE_BATCH, not by how much the tenant stored. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>

#include "storage/store_internal.h"
#include "util/cleanup.h"

#define PURGE_BATCH 256

/* One batch: delete up to PURGE_BATCH rows with `sql` (?1 the tenant, a
 * RETURNING file), then unlink their files in `dirfd`.  *n: rows deleted. */
static int purge_batch(struct store *s, const char *sql, const char *tenant_id, int dirfd,
                       size_t *n, struct husk_err *err) {
  char(*files)[STORE_ID_SIZE] = calloc(PURGE_BATCH, sizeof *files);
  if (!files)
    return husk_error(err, ENOMEM, "tenant storage");
  *n = 0;
  int ret = -1;
  {
    cleanup_unlock struct state *locked = db_lock(s->st);
    cleanup_txn struct db_txn txn = {0};
    cleanup_stmt sqlite3_stmt *q = NULL;
    if (db_begin(s->st, &txn, err) < 0 || db_prepare(s->st, &q, sql, err) < 0)
      goto out;
    int rc = db_text(q, 1, tenant_id);
    if (rc != SQLITE_OK) {
      db_fail(s->st, err, rc, "tenant storage");
      goto out;
    }
    int r;
    while ((r = db_step_row(s->st, q, "cannot remove the tenant's storage", err)) == 1) {
      /* The LIMIT in the SQL bounds the rows; a longer name is no file of ours.
       */
      if (*n < PURGE_BATCH && db_col_text(q, 0, files[*n], STORE_ID_SIZE))
        (*n)++;
    }
    if (r < 0)
      goto out;
    sqlite3_reset(q);
    db_fault_point("store_tenant_purge");
    if (db_commit(&txn, err) < 0)
      goto out;
    ret = 0;
  }
  /* Committed, files not yet unlinked: what store_open's sweep is for. */
  db_fault_point("store_tenant_purge_committed");
  for (size_t i = 0; i < *n; i++)
    store_unlink(s, dirfd, files[i]);
out:
  free(files);
  return ret;
}

#define BATCH_STR_(x) #x
#define BATCH_STR(x) BATCH_STR_(x)

int store_tenant_purge(struct store *s, const char *tenant_id, struct husk_err *err) {
  if (check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0)
    return -1;
  static const char objects[] =
      "DELETE FROM objects WHERE rowid IN (SELECT rowid FROM objects WHERE "
      "tenant_id = ?1 "
      "LIMIT " BATCH_STR(PURGE_BATCH) ") RETURNING file";
  static const char parts[] =
      "DELETE FROM parts WHERE rowid IN (SELECT p.rowid FROM parts p JOIN "
      "uploads u ON "
      "p.upload_id = u.id WHERE u.tenant_id = ?1 LIMIT " BATCH_STR(PURGE_BATCH) ") RETURNING file";
  size_t n;
  do
    if (purge_batch(s, objects, tenant_id, s->objfd, &n, err) < 0)
      return -1;
  while (n > 0);
  do
    if (purge_batch(s, parts, tenant_id, s->partfd, &n, err) < 0)
      return -1;
  while (n > 0);

  /* No files left: the rest is rows, children before parents. */
  static const char *const rest[] = {
      "DELETE FROM uploads WHERE tenant_id = ?1",
      "DELETE FROM links WHERE tenant_id = ?1", /* link_access: ON DELETE
                                                   CASCADE */
      "DELETE FROM buckets WHERE tenant_id = ?1",
      "DELETE FROM s3_keys WHERE tenant_id = ?1",
  };
  cleanup_unlock struct state *locked = db_lock(s->st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(s->st, &txn, err) < 0)
    return -1;
  for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) {
    cleanup_stmt sqlite3_stmt *q = NULL;
    if (db_prepare(s->st, &q, rest[i], err) < 0)
      return -1;
    int rc = db_text(q, 1, tenant_id);
    if (rc != SQLITE_OK)
      return db_fail(s->st, err, rc, "tenant storage");
    if (db_step_done(s->st, q, "cannot remove the tenant's storage", err) < 0)
      return -1;
  }
  return db_commit(&txn, err);
}
