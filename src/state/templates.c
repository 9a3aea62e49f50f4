/* Template rows (template_state.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "state/db.h"
#include "state/template_state.h"
#include "util/cleanup.h"

#define COLS                                                                                       \
  "id, tenant_id, name, source, config_digest, config_json, layers_json, size, created_ms"

void state_template_free(struct state_template *t) {
  if (!t)
    return;
  free(t->config_json);
  free(t->layers_json);
  t->config_json = t->layers_json = NULL;
}

static int read_row(sqlite3_stmt *q, void *row, struct husk_err *err) {
  struct state_template *t = row;
  memset(t, 0, sizeof *t);
  bool fit = db_col_text(q, 0, t->id, sizeof t->id) &&
             db_col_text(q, 1, t->tenant_id, sizeof t->tenant_id) &&
             db_col_text(q, 2, t->name, sizeof t->name) &&
             db_col_text(q, 3, t->source, sizeof t->source) &&
             db_col_text(q, 4, t->config_digest, sizeof t->config_digest);
  if (!fit)
    return husk_fail(err, EUCLEAN, "a template row does not fit its fields");
  t->config_json = db_col_strdup(q, 5);
  t->layers_json = db_col_strdup(q, 6);
  t->size = sqlite3_column_int64(q, 7);
  t->created_ms = sqlite3_column_int64(q, 8);
  if (!t->config_json || !t->layers_json) {
    state_template_free(t);
    return husk_error(err, ENOMEM, "template");
  }
  return 0;
}

static int check_row(const struct state_template *t, struct husk_err *err) {
  if (check_id("template id", t->id, sizeof t->id, err) < 0 ||
      check_id_or_empty("tenant id", t->tenant_id, sizeof t->tenant_id, err) < 0 ||
      check_text("template name", t->name, sizeof t->name, false, err) < 0 ||
      check_id("template source", t->source, sizeof t->source, err) < 0 ||
      check_text("config digest", t->config_digest, sizeof t->config_digest, false, err) < 0 ||
      check_json("template config", t->config_json, err) < 0 ||
      check_json("template layers", t->layers_json, err) < 0)
    return -1;
  if (t->size < 0)
    return husk_fail(err, EINVAL, "a template's size is >= 0");
  return 0;
}

/* The bytes of the owner's template storage (the caller holds the lock):
 * its templates' unpacked layers, and the layers its build cache holds
 * that none of its templates has, each once. */
static int usage_locked(struct state *st, const char *tenant, uint64_t *used,
                        struct husk_err *err) {
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q,
                 "SELECT (SELECT coalesce(sum(size), 0) FROM templates WHERE tenant_id = ?1) + "
                 "(SELECT coalesce(sum(size), 0) FROM (SELECT max(size) AS size FROM build_cache "
                 "WHERE tenant_id = ?1 AND diff_id NOT IN (SELECT json_extract(l.value, "
                 "'$.diff_id') FROM templates t, json_each(t.layers_json) l WHERE t.tenant_id = ?1) "
                 "GROUP BY diff_id))",
                 err) < 0)
    return -1;
  int rc = db_text(q, 1, tenant);
  if (rc != SQLITE_OK || db_step_row(st, q, "templates", err) != 1)
    return rc != SQLITE_OK ? db_fail(st, err, rc, "templates") : -1;
  *used = (uint64_t)sqlite3_column_int64(q, 0);
  return 0;
}

int state_template_usage(struct state *st, const char *tenant, uint64_t *used,
                         struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(st);
  return usage_locked(st, tenant, used, err);
}

/* Templates and cache entries are only made for a tenant that exists and
 * is not being deleted (the caller holds the lock, in the transaction
 * that makes them): one made after the tenant's purge would outlive it. */
static int check_owner_locked(struct state *st, const char *tenant, struct husk_err *err) {
  if (!*tenant)
    return 0; /* the operator's */
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q, "SELECT deleted_ms FROM tenants WHERE id = ?1", err) < 0)
    return -1;
  int rc = db_text(q, 1, tenant);
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "cannot bind tenant id");
  int r = db_step_row(st, q, "cannot read tenant", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, ENOENT, "tenant `%s` not found", tenant);
  if (sqlite3_column_int64(q, 0) != 0)
    return husk_fail(err, ENOENT, "tenant `%s` is being deleted", tenant);
  return 0;
}

/* After the caller's insert, in its transaction: EDQUOT when the owner's
 * storage is now past `quota` (0: none); `adding` (its bytes) and
 * `before` (the usage before it) are for the message. */
static int check_quota_locked(struct state *st, const char *tenant, uint64_t quota,
                              const char *what, int64_t adding, uint64_t before,
                              struct husk_err *err) {
  if (!quota || !*tenant)
    return 0;
  uint64_t after;
  if (usage_locked(st, tenant, &after, err) < 0)
    return -1;
  if (after > quota)
    return husk_fail(err, EDQUOT,
                     "%s needs %lld bytes; %llu of the %llu bytes of template storage are used",
                     what, (long long)adding, (unsigned long long)before,
                     (unsigned long long)quota);
  return 0;
}

int state_template_insert(struct state *st, const struct state_template *t, uint64_t quota,
                          struct husk_err *err) {
  if (check_row(t, err) < 0)
    return -1;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  if (check_owner_locked(st, t->tenant_id, err) < 0)
    return -1;
  uint64_t before = 0;
  if (quota && *t->tenant_id && usage_locked(st, t->tenant_id, &before, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q, "INSERT INTO templates (" COLS ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                 err) < 0)
    return -1;
  int rc = db_text(q, 1, t->id) || db_text(q, 2, t->tenant_id) || db_text(q, 3, t->name) ||
           db_text(q, 4, t->source) || db_text(q, 5, t->config_digest) ||
           db_text(q, 6, t->config_json) || db_text(q, 7, t->layers_json) ||
           db_int(q, 8, t->size) || db_int(q, 9, t->created_ms ? t->created_ms : state_now_ms());
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "template");
  if (db_step_done(st, q, "cannot record the template", err) < 0) {
    if (err->code == EEXIST)
      husk_fail(err, EEXIST, "a template named `%s` exists", t->name);
    return -1;
  }
  /* Counted with the row in: its layers the cache holds count once. */
  if (check_quota_locked(st, t->tenant_id, quota, "the template", t->size, before, err) < 0)
    return -1;
  db_fault_point("template_insert");
  return db_commit(&txn, err);
}

int state_template_get(struct state *st, const char *tenant, const char *name_or_id,
                       bool shared_too, struct state_template *out, struct husk_err *err) {
  memset(out, 0, sizeof *out);
  if (check_id_or_empty("tenant id", tenant, STATE_TENANT_ID_SIZE, err) < 0 ||
      check_text("template", name_or_id, STATE_TEMPLATE_NAME_SIZE, false, err) < 0)
    return -1;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *q = NULL;
  /* Its own first (tenant_id = ?1 sorts before ''), then shared. */
  if (db_prepare(st, &q,
                 "SELECT " COLS " FROM templates WHERE (name = ?2 OR id = ?2) AND "
                 "(tenant_id = ?1 OR (?3 AND tenant_id = '')) ORDER BY tenant_id = '' LIMIT 1",
                 err) < 0)
    return -1;
  int rc = db_text(q, 1, tenant) || db_text(q, 2, name_or_id) || db_int(q, 3, shared_too);
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "template");
  int r = db_step_row(st, q, "template", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, ENOENT, "no template `%s`", name_or_id);
  return read_row(q, out, err);
}

static void free_row(void *row) { state_template_free(row); }

int state_template_list(struct state *st, const char *tenant,
                        int (*cb)(void *ctx, const struct state_template *t), void *ctx,
                        struct husk_err *err) {
  if (tenant && check_id_or_empty("tenant id", tenant, STATE_TENANT_ID_SIZE, err) < 0)
    return -1;
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct state_template),
                                      .free_item = free_row};
  int rc;
  {
    cleanup_unlock struct state *locked = db_lock(st);
    cleanup_stmt sqlite3_stmt *q = NULL;
    if (db_prepare(st, &q,
                   tenant ? "SELECT " COLS " FROM templates WHERE tenant_id IN (?1, '') "
                            "ORDER BY tenant_id = '', name"
                          : "SELECT " COLS " FROM templates ORDER BY tenant_id, name",
                   err) < 0)
      return -1;
    if (tenant && (rc = db_text(q, 1, tenant)) != SQLITE_OK)
      return db_fail(st, err, rc, "templates");
    if (db_rows_fill(st, q, &rows, read_row, "templates", err) < 0)
      return -1;
  }
  for (size_t i = 0; i < rows.n; i++)
    if ((rc = cb(ctx, db_rows_at(&rows, i))) != 0)
      return db_cb_verdict(rc);
  return 0;
}

int state_template_delete(struct state *st, const char *tenant, const char *id,
                          struct husk_err *err) {
  if (check_id_or_empty("tenant id", tenant, STATE_TENANT_ID_SIZE, err) < 0 ||
      check_id("template id", id, STATE_TEMPLATE_ID_SIZE, err) < 0)
    return -1;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q,
                 "SELECT (SELECT count(*) FROM templates WHERE id = ?1 AND tenant_id = ?2), "
                 "(SELECT count(*) FROM boxes WHERE template_id = ?1 AND state IN " DB_LIVE_STATES ")",
                 err) < 0)
    return -1;
  int rc = db_text(q, 1, id) || db_text(q, 2, tenant);
  if (rc != SQLITE_OK || db_step_row(st, q, "template", err) != 1)
    return rc != SQLITE_OK ? db_fail(st, err, rc, "template") : -1;
  if (sqlite3_column_int64(q, 0) == 0)
    return husk_fail(err, ENOENT, "no template `%s`", id);
  if (sqlite3_column_int64(q, 1) > 0)
    return husk_fail(err, EBUSY, "template `%s` is used by %lld live box(es)", id,
                     (long long)sqlite3_column_int64(q, 1));
  cleanup_stmt sqlite3_stmt *d = NULL;
  if (db_prepare(st, &d, "DELETE FROM templates WHERE id = ? AND tenant_id = ?", err) < 0)
    return -1;
  rc = db_text(d, 1, id) || db_text(d, 2, tenant);
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "template");
  if (db_step_done(st, d, "cannot delete the template", err) < 0)
    return -1;
  db_fault_point("template_delete");
  return db_commit(&txn, err);
}

/* ---- the build cache ---- */

int state_build_cache_get(struct state *st, const char *tenant, const char *key,
                          char diff_id[STATE_DIGEST_SIZE], struct husk_err *err) {
  if (check_id_or_empty("tenant id", tenant, STATE_TENANT_ID_SIZE, err) < 0 ||
      check_text("cache key", key, STATE_DIGEST_SIZE, false, err) < 0)
    return -1;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q, "SELECT diff_id FROM build_cache WHERE tenant_id = ? AND key = ?", err) <
      0)
    return -1;
  int rc = db_text(q, 1, tenant) || db_text(q, 2, key);
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "build cache");
  int r = db_step_row(st, q, "build cache", err);
  if (r < 0)
    return -1;
  if (r == 0 || !db_col_text(q, 0, diff_id, STATE_DIGEST_SIZE))
    return husk_fail(err, ENOENT, "not in the build cache");
  cleanup_stmt sqlite3_stmt *u = NULL;
  if (db_prepare(st, &u, "UPDATE build_cache SET used_ms = ? WHERE tenant_id = ? AND key = ?",
                 err) < 0)
    return -1;
  rc = db_int(u, 1, state_now_ms()) || db_text(u, 2, tenant) || db_text(u, 3, key);
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "build cache");
  if (db_step_done(st, u, "build cache", err) < 0)
    return -1;
  return db_commit(&txn, err);
}

int state_build_cache_put(struct state *st, const char *tenant, const char *key,
                          const char *diff_id, int64_t size, uint64_t quota,
                          struct husk_err *err) {
  if (check_id_or_empty("tenant id", tenant, STATE_TENANT_ID_SIZE, err) < 0 ||
      check_text("cache key", key, STATE_DIGEST_SIZE, false, err) < 0 ||
      check_text("layer id", diff_id, STATE_DIGEST_SIZE, false, err) < 0)
    return -1;
  if (size < 0)
    return husk_fail(err, EINVAL, "a layer's size is >= 0");
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  if (check_owner_locked(st, tenant, err) < 0)
    return -1;
  uint64_t before = 0;
  if (quota && *tenant && usage_locked(st, tenant, &before, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q,
                 "INSERT OR REPLACE INTO build_cache (tenant_id, key, diff_id, used_ms, size) "
                 "VALUES (?, ?, ?, ?, ?)",
                 err) < 0)
    return -1;
  int rc = db_text(q, 1, tenant) || db_text(q, 2, key) || db_text(q, 3, diff_id) ||
           db_int(q, 4, state_now_ms()) || db_int(q, 5, size);
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "build cache");
  if (db_step_done(st, q, "cannot record the build step", err) < 0)
    return -1;
  if (check_quota_locked(st, tenant, quota, "the step's layer", size, before, err) < 0)
    return -1;
  db_fault_point("build_cache_put");
  return db_commit(&txn, err);
}

int state_build_cache_prune(struct state *st, int64_t before_ms, struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q, "DELETE FROM build_cache WHERE used_ms < ?", err) < 0)
    return -1;
  int rc = db_int(q, 1, before_ms);
  if (rc != SQLITE_OK)
    return db_fail(st, err, rc, "build cache");
  if (db_step_done(st, q, "build cache", err) < 0)
    return -1;
  return db_commit(&txn, err);
}

struct id_row {
  char diff_id[STATE_DIGEST_SIZE];
};

static int read_id(sqlite3_stmt *q, void *row, struct husk_err *err) {
  struct id_row *r = row;
  if (!db_col_text(q, 0, r->diff_id, sizeof r->diff_id))
    return husk_fail(err, EUCLEAN, "a build cache row does not fit its fields");
  return 0;
}

int state_build_cache_layers(struct state *st, int (*cb)(void *ctx, const char *diff_id),
                             void *ctx, struct husk_err *err) {
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct id_row)};
  {
    cleanup_unlock struct state *locked = db_lock(st);
    cleanup_stmt sqlite3_stmt *q = NULL;
    if (db_prepare(st, &q, "SELECT DISTINCT diff_id FROM build_cache", err) < 0 ||
        db_rows_fill(st, q, &rows, read_id, "build cache", err) < 0)
      return -1;
  }
  for (size_t i = 0; i < rows.n; i++) {
    int r = cb(ctx, ((struct id_row *)db_rows_at(&rows, i))->diff_id);
    if (r)
      return db_cb_verdict(r);
  }
  return 0;
}
