/* Objects of the object store: the row that points (tenant, bucket, key)
 * at a file, what a tenant stores against its quota, and which files rows
 * name. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "state/db.h"
#include "state/store_state.h"
#include "util/cleanup.h"

#define OBJ_COLS "key, file, size, etag, content_type, meta_json, mtime_ms, created_by"

static void object_free(struct store_object *o) {
  free(o->key);
  free(o->meta_json);
  o->key = o->meta_json = NULL;
}

/* A row of OBJ_COLS into a struct store_object. */
static int read_object(sqlite3_stmt *q, struct store_object *o, struct husk_err *err) {
  memset(o, 0, sizeof *o);
  o->key = db_col_strdup(q, 0);
  bool ok = db_col_text(q, 1, o->file, sizeof o->file);
  o->size = (uint64_t)sqlite3_column_int64(q, 2);
  ok &= db_col_text(q, 3, o->etag, sizeof o->etag);
  ok &= db_col_text(q, 4, o->content_type, sizeof o->content_type);
  o->meta_json = db_col_strdup(q, 5);
  o->mtime_ms = sqlite3_column_int64(q, 6);
  ok &= db_col_text(q, 7, o->created_by, sizeof o->created_by);
  if (!o->key || !o->meta_json) {
    object_free(o);
    return husk_error(err, ENOMEM, "object row");
  }
  if (!ok) {
    object_free(o);
    return husk_fail(err, EUCLEAN, "object row has an oversized value");
  }
  /* Only the daemon writes it (checked then): anything else was not. */
  if (state_check_created_by(o->created_by, true, err) < 0) {
    object_free(o);
    return husk_fail(err, EUCLEAN, "object row has a malformed creator");
  }
  return 0;
}

int state_object_get(struct state *st, const char *tenant_id, const char *bucket, const char *key,
                     struct store_object *out, struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(st);
  if (bucket_check_locked(st, tenant_id, bucket, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q,
                 "SELECT " OBJ_COLS " FROM objects WHERE tenant_id = ? AND bucket = ? AND key = ?",
                 err) < 0)
    return -1;
  int rc = db_text(q, 1, tenant_id) || db_text(q, 2, bucket) || db_text(q, 3, key);
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "object");
  int r = db_step_row(st, q, "object", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, STORE_ENOKEY, "The specified key does not exist.");
  return read_object(q, out, err);
}

/* ---- usage and quota ---- */

static int usage_locked(struct state *st, const char *tenant_id, uint64_t *bytes,
                        struct husk_err *err) {
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q,
                 "SELECT (SELECT coalesce(sum(size), 0) FROM objects WHERE tenant_id = ?1) + "
                 "(SELECT coalesce(sum(p.size), 0) FROM parts p JOIN uploads u ON p.upload_id = "
                 "u.id WHERE u.tenant_id = ?1)",
                 err) < 0)
    return -1;
  int rc = db_text(q, 1, tenant_id);
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "usage");
  if (db_step_row(st, q, "usage", err) != 1)
    return -1;
  int64_t v = sqlite3_column_int64(q, 0);
  *bytes = v > 0 ? (uint64_t)v : 0;
  return 0;
}

int state_store_usage(struct state *st, const char *tenant_id, uint64_t *bytes,
                      struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(st);
  return usage_locked(st, tenant_id, bytes, err);
}

int usage_quota_locked(struct state *st, const char *tenant_id, uint64_t quota, uint64_t add,
                       uint64_t freed, struct husk_err *err) {
  if (!quota)
    return 0;
  uint64_t used = 0;
  if (usage_locked(st, tenant_id, &used, err) < 0)
    return -1;
  used = used > freed ? used - freed : 0;
  if (add > quota || used > quota - add)
    return husk_fail(err, STORE_EQUOTA,
                     "The tenant's storage quota (%llu bytes) would be exceeded: %llu in use",
                     (unsigned long long)quota, (unsigned long long)used);
  return 0;
}

/* The size of the object at bucket/key (0 if none, or either is NULL). */
static int freed_locked(struct state *st, const char *tenant_id, const char *bucket,
                        const char *key, uint64_t *freed, struct husk_err *err) {
  *freed = 0;
  if (!bucket || !key)
    return 0;
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q, "SELECT size FROM objects WHERE tenant_id = ? AND bucket = ? AND key = ?",
                 err) < 0)
    return -1;
  int rc = db_text(q, 1, tenant_id) || db_text(q, 2, bucket) || db_text(q, 3, key);
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "quota");
  int r = db_step_row(st, q, "quota", err);
  if (r < 0)
    return -1;
  if (r == 1)
    *freed = (uint64_t)sqlite3_column_int64(q, 0);
  return 0;
}

int state_store_quota_room(struct state *st, const char *tenant_id, const char *bucket,
                           const char *key, uint64_t quota, uint64_t *room, struct husk_err *err) {
  *room = UINT64_MAX;
  if (!quota)
    return 0;
  cleanup_unlock struct state *locked = db_lock(st);
  uint64_t freed = 0, used = 0;
  if (freed_locked(st, tenant_id, bucket, key, &freed, err) < 0 ||
      usage_locked(st, tenant_id, &used, err) < 0)
    return -1;
  used = used > freed ? used - freed : 0;
  *room = used < quota ? quota - used : 0;
  return 0;
}

int state_store_quota_check(struct state *st, const char *tenant_id, const char *bucket,
                            const char *key, uint64_t quota, uint64_t add, struct husk_err *err) {
  if (!quota)
    return 0;
  cleanup_unlock struct state *locked = db_lock(st);
  uint64_t freed = 0;
  if (freed_locked(st, tenant_id, bucket, key, &freed, err) < 0)
    return -1;
  return usage_quota_locked(st, tenant_id, quota, add, freed, err);
}

/* ---- writing ---- */

int object_put_locked(struct state *st, const char *tenant_id, const char *bucket,
                      const struct state_object_new *o, uint64_t quota, uint64_t freed, char *old,
                      struct husk_err *err) {
  old[0] = 0;
  const char *creator = o->created_by ? o->created_by : "";
  if (state_check_created_by(creator, true, err) < 0)
    return -1;
  if (bucket_check_locked(st, tenant_id, bucket, err) < 0)
    return -1;
  uint64_t old_size = 0;
  {
    cleanup_stmt sqlite3_stmt *q = NULL;
    if (db_prepare(st, &q,
                   "SELECT file, size FROM objects WHERE tenant_id = ? AND bucket = ? AND key = ?",
                   err) < 0)
      return -1;
    int rc = db_text(q, 1, tenant_id) || db_text(q, 2, bucket) || db_text(q, 3, o->key);
    if (rc != SQLITE_OK)
      return db_fail(st, err, rc, "object");
    int r = db_step_row(st, q, "object", err);
    if (r < 0)
      return -1;
    if (r == 1) {
      db_col_text(q, 0, old, STORE_ID_SIZE);
      old_size = (uint64_t)sqlite3_column_int64(q, 1);
    }
  }
  /* The version replaced (and parts assembled into this one) free space. */
  if (usage_quota_locked(st, tenant_id, quota, o->size, old_size + freed, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *u = NULL;
  if (db_prepare(
          st, &u,
          "INSERT INTO objects (tenant_id, bucket, key, file, size, etag, content_type, "
          "meta_json, mtime_ms, created_by) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
          "ON CONFLICT (tenant_id, bucket, key) DO UPDATE SET file = excluded.file, "
          "size = excluded.size, etag = excluded.etag, content_type = excluded.content_type, "
          "meta_json = excluded.meta_json, mtime_ms = excluded.mtime_ms, "
          "created_by = excluded.created_by",
          err) < 0)
    return -1;
  int rc = db_text(u, 1, tenant_id) || db_text(u, 2, bucket) || db_text(u, 3, o->key) ||
           db_text(u, 4, o->file) || db_int(u, 5, (int64_t)o->size) || db_text(u, 6, o->etag) ||
           db_text(u, 7, o->content_type ? o->content_type : "") ||
           db_text(u, 8, o->meta_json ? o->meta_json : "{}") || db_int(u, 9, o->mtime_ms) ||
           db_text(u, 10, creator);
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "object");
  if (db_step_done(st, u, "cannot store the object", err) < 0)
    return -1;
  db_fault_point("object_upsert");
  return 0;
}

int state_object_put(struct state *st, const char *tenant_id, const char *bucket,
                     const struct state_object_new *o, uint64_t quota, char *old,
                     struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0 ||
      object_put_locked(st, tenant_id, bucket, o, quota, 0, old, err) < 0)
    return -1;
  return db_commit(&txn, err);
}

int state_object_delete(struct state *st, const char *tenant_id, const char *bucket,
                        const char *key, char *file, struct husk_err *err) {
  file[0] = 0;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  if (bucket_check_locked(st, tenant_id, bucket, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(
          st, &q,
          "DELETE FROM objects WHERE tenant_id = ? AND bucket = ? AND key = ? RETURNING file",
          err) < 0)
    return -1;
  int rc = db_text(q, 1, tenant_id) || db_text(q, 2, bucket) || db_text(q, 3, key);
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "object");
  int r = db_step_row(st, q, "cannot delete the object", err);
  if (r < 0)
    return -1;
  if (r == 1) {
    db_col_text(q, 0, file, STORE_ID_SIZE);
    if (db_step_row(st, q, "cannot delete the object", err) < 0)
      return -1;
  }
  sqlite3_reset(q);
  return db_commit(&txn, err);
}

bool state_object_names_file(struct state *st, const char *tenant_id, const char *bucket,
                             const char *key, const char *file) {
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *q = NULL;
  struct husk_err ignored;
  if (db_prepare(
          st, &q,
          "SELECT 1 FROM objects WHERE tenant_id = ? AND bucket = ? AND key = ? AND file = ?",
          &ignored) < 0)
    return false;
  if (db_text(q, 1, tenant_id) || db_text(q, 2, bucket) || db_text(q, 3, key) ||
      db_text(q, 4, file))
    return false;
  return db_step_row(st, q, "object", &ignored) == 1;
}

/* ---- listing ---- */

static void entry_free(void *row) { free(((struct state_object_entry *)row)->key); }

static int read_entry(sqlite3_stmt *q, void *row, struct husk_err *err) {
  struct state_object_entry *e = row;
  e->key = db_col_strdup(q, 0);
  e->size = (uint64_t)sqlite3_column_int64(q, 1);
  db_col_text(q, 2, e->etag, sizeof e->etag);
  e->mtime_ms = sqlite3_column_int64(q, 3);
  bool ok = db_col_text(q, 4, e->created_by, sizeof e->created_by);
  if (!e->key)
    return husk_error(err, ENOMEM, "list");
  if (!ok || state_check_created_by(e->created_by, true, err) < 0)
    return husk_fail(err, EUCLEAN, "object row has a malformed creator");
  return 0;
}

#define PAGE_STR_(x) #x
#define PAGE_STR(x) PAGE_STR_(x)

int state_object_page(struct state *st, const char *tenant_id, const char *bucket,
                      const char *after, size_t after_len, const char *prefix,
                      const char *created_by, struct state_object_page *out, struct husk_err *err) {
  *out = (struct state_object_page){0};
  if (created_by && state_check_created_by(created_by, false, err) < 0)
    return -1;
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct state_object_entry),
                                      .free_item = entry_free};
  /* Two statements, not "?5 IS NULL OR ...": the filtered one walks the
   * index objects_creator in key order instead of the whole bucket. */
#define PAGE_SQL(filter)                                                                           \
  "SELECT key, size, etag, mtime_ms, created_by FROM objects WHERE tenant_id = ?1 AND "            \
  "bucket = ?2 AND key > ?3 AND key >= ?4" filter                                                  \
  " ORDER BY key LIMIT " PAGE_STR(STATE_OBJECT_PAGE)
  int rc =
      created_by
          ? db_rows_select(st, &rows, PAGE_SQL(" AND created_by = ?5"),
                           DB_ARGS(DB_TEXT(tenant_id), DB_TEXT(bucket), DB_TEXT_N(after, after_len),
                                   DB_TEXT(prefix), DB_TEXT(created_by)),
                           read_entry, "list", err)
          : db_rows_select(st, &rows, PAGE_SQL(""),
                           DB_ARGS(DB_TEXT(tenant_id), DB_TEXT(bucket), DB_TEXT_N(after, after_len),
                                   DB_TEXT(prefix)),
                           read_entry, "list", err);
#undef PAGE_SQL
  if (rc < 0)
    return -1;
  out->entries = take_ptr(&rows.items);
  out->n = rows.n;
  rows.n = rows.cap = 0;
  return 0;
}

void state_object_page_free(struct state_object_page *p) {
  for (size_t i = 0; i < p->n; i++)
    entry_free(&p->entries[i]);
  free(p->entries);
  *p = (struct state_object_page){0};
}

/* ---- files ---- */

int state_store_file_used(struct state *st, enum state_store_files kind, const char *file,
                          bool *used, struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q,
                 kind == STATE_PART_FILES ? "SELECT 1 FROM parts WHERE file = ?"
                                          : "SELECT 1 FROM objects WHERE file = ?",
                 err) < 0)
    return -1;
  int rc = db_text(q, 1, file);
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "cleanup");
  int r = db_step_row(st, q, "cleanup", err);
  if (r < 0)
    return -1;
  *used = r == 1;
  return 0;
}
