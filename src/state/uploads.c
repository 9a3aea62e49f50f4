/* Multipart uploads of the object store and their parts: an upload names
 * the object it will become (tenant, bucket, key, content type,
 * metadata); each part names its file under parts/.  Completing an upload
 * writes its object and drops it in one transaction. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "state/db.h"
#include "state/store_state.h"
#include "util/cleanup.h"

/* Under the lock: the upload exists, is the tenant's and for bucket/key.
 * Its content type and metadata go to `u` (may be NULL). */
static int upload_check_locked(struct state *st, const char *tenant_id, const char *bucket,
                               const char *key, const char *upload_id, struct state_upload *u,
                               struct husk_err *err) {
  if (bucket_check_locked(st, tenant_id, bucket, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q,
                 "SELECT content_type, meta_json FROM uploads WHERE id = ? AND tenant_id = ? AND "
                 "bucket = ? AND key = ?",
                 err) < 0)
    return -1;
  int rc = db_text(q, 1, upload_id) || db_text(q, 2, tenant_id) || db_text(q, 3, bucket) ||
           db_text(q, 4, key);
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "upload");
  int r = db_step_row(st, q, "upload", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, STORE_ENOUPLOAD,
                     "The specified upload does not exist. The upload ID may be invalid, or the "
                     "upload may have been aborted or completed.");
  if (u) {
    db_col_text(q, 0, u->content_type, sizeof u->content_type);
    if (!(u->meta_json = db_col_strdup(q, 1)))
      return husk_error(err, ENOMEM, "upload");
  }
  return 0;
}

/* Under the lock and a transaction: drop the upload (its parts' rows go
 * with it: ON DELETE CASCADE). */
static int upload_drop_locked(struct state *st, const char *upload_id, struct husk_err *err) {
  cleanup_stmt sqlite3_stmt *d = NULL;
  if (db_prepare(st, &d, "DELETE FROM uploads WHERE id = ?", err) < 0)
    return -1;
  int rc = db_text(d, 1, upload_id);
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "upload");
  return db_step_done(st, d, "cannot drop the upload", err) < 0 ? -1 : 0;
}

int state_upload_check(struct state *st, const char *tenant_id, const char *bucket, const char *key,
                       const char *upload_id, struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(st);
  return upload_check_locked(st, tenant_id, bucket, key, upload_id, NULL, err);
}

int state_upload_create(struct state *st, const char *tenant_id, const char *bucket,
                        const char *key, const char *upload_id, const char *content_type,
                        const char *meta_json, struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  if (bucket_check_locked(st, tenant_id, bucket, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q,
                 "INSERT INTO uploads (id, tenant_id, bucket, key, content_type, meta_json, "
                 "created_ms) VALUES (?, ?, ?, ?, ?, ?, ?)",
                 err) < 0)
    return -1;
  int rc = db_text(q, 1, upload_id) || db_text(q, 2, tenant_id) || db_text(q, 3, bucket) ||
           db_text(q, 4, key) || db_text(q, 5, content_type ? content_type : "") ||
           db_text(q, 6, meta_json ? meta_json : "{}") || db_int(q, 7, state_now_ms());
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "upload");
  if (db_step_done(st, q, "cannot create the upload", err) < 0)
    return -1;
  return db_commit(&txn, err);
}

int state_part_put(struct state *st, const char *tenant_id, const char *bucket, const char *key,
                   const char *upload_id, const struct state_part *p, uint64_t quota, char *old,
                   struct husk_err *err) {
  old[0] = 0;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0 ||
      upload_check_locked(st, tenant_id, bucket, key, upload_id, NULL, err) < 0)
    return -1;
  uint64_t old_size = 0;
  {
    cleanup_stmt sqlite3_stmt *q = NULL;
    if (db_prepare(st, &q, "SELECT file, size FROM parts WHERE upload_id = ? AND num = ?", err) < 0)
      return -1;
    int r = db_text(q, 1, upload_id) || db_int(q, 2, p->num);
    if (r != SQLITE_OK)
      return db_fail(st, err, r, "part");
    r = db_step_row(st, q, "part", err);
    if (r < 0)
      return -1;
    if (r == 1) {
      db_col_text(q, 0, old, STORE_ID_SIZE);
      old_size = (uint64_t)sqlite3_column_int64(q, 1);
    }
  }
  if (usage_quota_locked(st, tenant_id, quota, p->size, old_size, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *u = NULL;
  if (db_prepare(st, &u,
                 "INSERT INTO parts (upload_id, num, file, size, md5, mtime_ms) VALUES "
                 "(?, ?, ?, ?, ?, ?) ON CONFLICT (upload_id, num) DO UPDATE SET "
                 "file = excluded.file, size = excluded.size, md5 = excluded.md5, "
                 "mtime_ms = excluded.mtime_ms",
                 err) < 0)
    return -1;
  int r = db_text(u, 1, upload_id) || db_int(u, 2, p->num) || db_text(u, 3, p->file) ||
          db_int(u, 4, (int64_t)p->size) || db_text(u, 5, p->md5) || db_int(u, 6, state_now_ms());
  if (r != SQLITE_OK)
    return db_fail(st, err, r, "part");
  if (db_step_done(st, u, "cannot store the part", err) < 0)
    return -1;
  return db_commit(&txn, err);
}

bool state_part_names_file(struct state *st, const char *upload_id, const char *file) {
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *q = NULL;
  struct husk_err ignored;
  if (db_prepare(st, &q, "SELECT 1 FROM parts WHERE upload_id = ? AND file = ?", &ignored) < 0)
    return false;
  if (db_text(q, 1, upload_id) || db_text(q, 2, file))
    return false;
  return db_step_row(st, q, "part", &ignored) == 1;
}

static int read_part(sqlite3_stmt *q, void *row, struct husk_err *err) {
  struct state_part *p = row;
  p->num = sqlite3_column_int(q, 0);
  db_col_text(q, 1, p->file, sizeof p->file);
  db_col_text(q, 2, p->md5, sizeof p->md5);
  p->size = (uint64_t)sqlite3_column_int64(q, 3);
  p->mtime_ms = sqlite3_column_int64(q, 4);
  return 0;
}

static int upload_get(struct state *st, const char *tenant_id, const char *bucket, const char *key,
                      const char *upload_id, int after, int max, struct state_upload *out,
                      struct husk_err *err) {
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct state_part)};
  {
    cleanup_unlock struct state *locked = db_lock(st);
    if (upload_check_locked(st, tenant_id, bucket, key, upload_id, out, err) < 0 ||
        db_rows_select_locked(st, &rows,
                              "SELECT num, file, md5, size, mtime_ms FROM parts WHERE "
                              "upload_id = ? AND num > ? ORDER BY num LIMIT ?",
                              DB_ARGS(DB_TEXT(upload_id), DB_INT(after), DB_INT(max)), read_part,
                              "parts", err) < 0)
      return -1;
  }
  out->parts = take_ptr(&rows.items);
  out->nparts = rows.n;
  return 0;
}

int state_upload_get(struct state *st, const char *tenant_id, const char *bucket, const char *key,
                     const char *upload_id, int after, int max, struct state_upload *out,
                     struct husk_err *err) {
  memset(out, 0, sizeof *out);
  if (upload_get(st, tenant_id, bucket, key, upload_id, after, max, out, err) < 0) {
    state_upload_free(out);
    return -1;
  }
  return 0;
}

void state_upload_free(struct state_upload *u) {
  free(u->meta_json);
  free(u->parts);
  u->meta_json = NULL;
  u->parts = NULL;
  u->nparts = 0;
}

int state_upload_complete(struct state *st, const char *tenant_id, const char *bucket,
                          const char *upload_id, const struct state_object_new *o, uint64_t quota,
                          uint64_t freed, char *old, struct husk_err *err) {
  old[0] = 0;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0 ||
      upload_check_locked(st, tenant_id, bucket, o->key, upload_id, NULL, err) < 0 ||
      object_put_locked(st, tenant_id, bucket, o, quota, freed, old, err) < 0 ||
      upload_drop_locked(st, upload_id, err) < 0)
    return -1;
  return db_commit(&txn, err);
}

int state_upload_abort(struct state *st, const char *tenant_id, const char *bucket, const char *key,
                       const char *upload_id, struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0 ||
      upload_check_locked(st, tenant_id, bucket, key, upload_id, NULL, err) < 0 ||
      upload_drop_locked(st, upload_id, err) < 0)
    return -1;
  return db_commit(&txn, err);
}

/* ---- listings ---- */

struct upload_row {
  char *key;
  char id[STORE_ID_SIZE];
  int64_t created_ms;
};
static void upload_row_free(void *p) { free(((struct upload_row *)p)->key); }

static int read_upload(sqlite3_stmt *q, void *row, struct husk_err *err) {
  struct upload_row *u = row;
  u->key = db_col_strdup(q, 0);
  db_col_text(q, 1, u->id, sizeof u->id);
  u->created_ms = sqlite3_column_int64(q, 2);
  if (!u->key)
    return husk_error(err, ENOMEM, "uploads");
  return 0;
}

int state_upload_list(struct state *st, const char *tenant_id, const char *bucket,
                      const char *prefix, const char *key_marker, const char *id_marker, int max,
                      int (*cb)(void *ctx, const struct store_upload *u), void *ctx,
                      bool *truncated, struct husk_err *err) {
  *truncated = false;
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct upload_row),
                                      .free_item = upload_row_free};
  {
    cleanup_unlock struct state *locked = db_lock(st);
    if (bucket_check_locked(st, tenant_id, bucket, err) < 0 ||
        db_rows_select_locked(
            st, &rows,
            "SELECT key, id, created_ms FROM uploads WHERE tenant_id = ?1 AND bucket = ?2 "
            "AND substr(key, 1, length(?3)) = ?3 AND (key > ?4 OR (key = ?4 AND id > ?5)) "
            "ORDER BY key, id LIMIT ?6",
            DB_ARGS(DB_TEXT(tenant_id), DB_TEXT(bucket), DB_TEXT(prefix ? prefix : ""),
                    DB_TEXT(key_marker ? key_marker : ""), DB_TEXT(id_marker ? id_marker : ""),
                    DB_INT((int64_t)max + 1)),
            read_upload, "uploads", err) < 0)
      return -1;
  }
  *truncated = rows.n > (size_t)max;
  for (size_t i = 0; i < rows.n && i < (size_t)max; i++) {
    struct upload_row *u = db_rows_at(&rows, i);
    struct store_upload su = {u->key, u->id, u->created_ms};
    int v = cb(ctx, &su);
    if (v)
      return db_cb_verdict(v);
  }
  return 0;
}

static void stale_free(void *p) { free(((struct state_stale_upload *)p)->key); }

static int read_stale(sqlite3_stmt *q, void *row, struct husk_err *err) {
  struct state_stale_upload *u = row;
  db_col_text(q, 0, u->id, sizeof u->id);
  db_col_text(q, 1, u->tenant_id, sizeof u->tenant_id);
  db_col_text(q, 2, u->bucket, sizeof u->bucket);
  if (!(u->key = db_col_strdup(q, 3)))
    return husk_error(err, ENOMEM, "stale uploads");
  return 0;
}

int state_upload_stale(struct state *st, int64_t before_ms, int max,
                       int (*cb)(void *ctx, const struct state_stale_upload *u), void *ctx,
                       struct husk_err *err) {
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct state_stale_upload),
                                      .free_item = stale_free};
  if (db_rows_select(st, &rows,
                     "SELECT id, tenant_id, bucket, key FROM uploads WHERE created_ms < ? LIMIT ?",
                     DB_ARGS(DB_INT(before_ms), DB_INT(max)), read_stale, "stale uploads",
                     err) < 0)
    return -1;
  return db_rows_each(&rows, rows.n, cb, ctx);
}
