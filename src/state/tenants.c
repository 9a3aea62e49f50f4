/* Tenants: who owns boxes and keys, the quotas that bound their boxes, the
 * concurrency bounds the API applies to them, and their deletion.  Quotas
 * are enforced where boxes are inserted (boxes.c), in the same transaction
 * as the insert. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>

#include "state/db.h"
#include "util/cleanup.h"

#define TENANT_COLUMNS                                                                             \
  "id, name, max_boxes, max_memory, created_ms, max_requests, max_execs, deleted_ms"

static int check_quota(int64_t max_boxes, int64_t max_memory, struct husk_err *err) {
  if (max_boxes < STATE_UNLIMITED || max_memory < STATE_UNLIMITED)
    return husk_fail(err, EINVAL, "a quota must be >= 0, or %d for no limit", STATE_UNLIMITED);
  return 0;
}

/* 0 would refuse every request, including the ones that could raise it. */
static int check_concurrency(int64_t max_requests, int64_t max_execs, struct husk_err *err) {
  if ((max_requests != STATE_DEFAULT && max_requests < 1) ||
      (max_execs != STATE_DEFAULT && max_execs < 1))
    return husk_fail(err, EINVAL, "a concurrency bound must be >= 1, or %d for the default",
                     STATE_DEFAULT);
  return 0;
}

static int read_tenant(sqlite3_stmt *s, void *row, struct husk_err *err) {
  struct state_tenant *t = row;
  bool ok = db_col_text(s, 0, t->id, sizeof t->id);
  ok &= db_col_text(s, 1, t->name, sizeof t->name);
  t->max_boxes = sqlite3_column_int64(s, 2);
  t->max_memory = sqlite3_column_int64(s, 3);
  t->created_ms = sqlite3_column_int64(s, 4);
  t->max_requests = sqlite3_column_int64(s, 5);
  t->max_execs = sqlite3_column_int64(s, 6);
  t->deleted_ms = sqlite3_column_int64(s, 7);
  if (!ok)
    return husk_fail(err, EUCLEAN, "tenant row has an oversized value");
  return 0;
}

int state_tenant_create(struct state *st, const char *name, int64_t max_boxes, int64_t max_memory,
                        struct state_tenant *out, struct husk_err *err) {
  struct state_tenant in = {.max_boxes = max_boxes,
                            .max_memory = max_memory,
                            .max_requests = STATE_DEFAULT,
                            .max_execs = STATE_DEFAULT};
  if (check_text("tenant name", name, sizeof in.name, false, err) < 0)
    return -1;
  snprintf(in.name, sizeof in.name, "%s", name); /* fits: checked above */
  return state_tenant_create_with(st, &in, out, err);
}

int state_tenant_create_with(struct state *st, const struct state_tenant *in,
                             struct state_tenant *out, struct husk_err *err) {
  struct state_tenant t = {.max_boxes = in->max_boxes,
                           .max_memory = in->max_memory,
                           .max_requests = in->max_requests,
                           .max_execs = in->max_execs};
  if (check_text("tenant name", in->name, sizeof t.name, false, err) < 0 ||
      check_quota(t.max_boxes, t.max_memory, err) < 0 ||
      check_concurrency(t.max_requests, t.max_execs, err) < 0)
    return -1;
  if (state_new_id("t_", t.id, sizeof t.id, err) < 0)
    return -1;
  snprintf(t.name, sizeof t.name, "%s", in->name); /* fits: checked above */
  t.created_ms = state_now_ms();

  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "INSERT INTO tenants (" TENANT_COLUMNS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 0)",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, t.id)) || (rc = db_text(s, 2, t.name)) ||
      (rc = db_int(s, 3, t.max_boxes)) || (rc = db_int(s, 4, t.max_memory)) ||
      (rc = db_int(s, 5, t.created_ms)) || (rc = db_int(s, 6, t.max_requests)) ||
      (rc = db_int(s, 7, t.max_execs)))
    return db_fail(st, err, rc, "cannot bind tenant");
  if (db_step_done(st, s, "cannot create tenant", err) < 0) {
    if (err && err->code == EEXIST)
      husk_fail(err, EEXIST, "a tenant with this name exists");
    return -1;
  }
  if (out)
    *out = t;
  return 0;
}

int state_tenant_get(struct state *st, const char *id, struct state_tenant *out,
                     struct husk_err *err) {
  if (check_id("tenant id", id, STATE_TENANT_ID_SIZE, err) < 0)
    return -1;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s, "SELECT " TENANT_COLUMNS " FROM tenants WHERE id = ?1", err) < 0)
    return -1;
  int rc = db_text(s, 1, id);
  if (rc)
    return db_fail(st, err, rc, "cannot bind tenant id");
  int r = db_step_row(st, s, "cannot read tenant", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, ENOENT, "tenant `%s` not found", id);
  return read_tenant(s, out, err);
}

int state_tenant_list(struct state *st, int (*cb)(void *ctx, const struct state_tenant *t),
                      void *ctx, struct husk_err *err) {
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct state_tenant)};
  {
    cleanup_unlock struct state *locked = db_lock(st);
    cleanup_stmt sqlite3_stmt *s = NULL;
    if (db_prepare(st, &s, "SELECT " TENANT_COLUMNS " FROM tenants ORDER BY created_ms, id", err) <
        0)
      return -1;
    if (db_rows_fill(st, s, &rows, read_tenant, "cannot list tenants", err) < 0)
      return -1;
  }
  for (size_t i = 0; i < rows.n; i++) {
    int r = cb(ctx, db_rows_at(&rows, i));
    if (r != 0)
      return db_cb_verdict(r);
  }
  return 0;
}

int state_tenant_set_quota(struct state *st, const char *id, int64_t max_boxes, int64_t max_memory,
                           struct husk_err *err) {
  if (check_id("tenant id", id, STATE_TENANT_ID_SIZE, err) < 0 ||
      check_quota(max_boxes, max_memory, err) < 0)
    return -1;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s, "UPDATE tenants SET max_boxes = ?2, max_memory = ?3 WHERE id = ?1", err) <
      0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, id)) || (rc = db_int(s, 2, max_boxes)) || (rc = db_int(s, 3, max_memory)))
    return db_fail(st, err, rc, "cannot bind quota");
  int n = db_step_done(st, s, "cannot set quota", err);
  if (n < 0)
    return -1;
  if (n == 0)
    return husk_fail(err, ENOENT, "tenant `%s` not found", id);
  return 0;
}

int state_tenant_set_bounds(struct state *st, const struct state_tenant *t, struct husk_err *err) {
  if (check_id("tenant id", t->id, STATE_TENANT_ID_SIZE, err) < 0 ||
      check_quota(t->max_boxes, t->max_memory, err) < 0 ||
      check_concurrency(t->max_requests, t->max_execs, err) < 0)
    return -1;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "UPDATE tenants SET max_boxes = ?2, max_memory = ?3, max_requests = ?4, "
                 "max_execs = ?5 WHERE id = ?1",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, t->id)) || (rc = db_int(s, 2, t->max_boxes)) ||
      (rc = db_int(s, 3, t->max_memory)) || (rc = db_int(s, 4, t->max_requests)) ||
      (rc = db_int(s, 5, t->max_execs)))
    return db_fail(st, err, rc, "cannot bind bounds");
  int n = db_step_done(st, s, "cannot set bounds", err);
  if (n < 0)
    return -1;
  if (n == 0)
    return husk_fail(err, ENOENT, "tenant `%s` not found", t->id);
  return 0;
}

/* Run one statement with the tenant id as ?1 and, when the SQL has a
 * second parameter, `ms` as ?2.  Returns the rows changed or -1. */
static int tenant_exec(struct state *st, const char *sql, const char *id, int64_t ms,
                       struct husk_err *err) {
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s, sql, err) < 0)
    return -1;
  int rc = db_text(s, 1, id);
  if (!rc && sqlite3_bind_parameter_count(s) >= 2)
    rc = db_int(s, 2, ms);
  if (rc)
    return db_fail(st, err, rc, "cannot bind tenant id");
  return db_step_done(st, s, "cannot delete the tenant's rows", err);
}

int state_tenant_mark_deleted(struct state *st, const char *id, struct husk_err *err) {
  if (check_id("tenant id", id, STATE_TENANT_ID_SIZE, err) < 0)
    return -1;
  int64_t now = state_now_ms();
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  int n = tenant_exec(st,
                      "UPDATE tenants SET deleted_ms = CASE WHEN deleted_ms = 0 THEN ?2 "
                      "ELSE deleted_ms END WHERE id = ?1",
                      id, now, err);
  if (n < 0)
    return -1;
  if (n == 0)
    return husk_fail(err, ENOENT, "tenant `%s` not found", id);
  if (tenant_exec(st, "UPDATE api_keys SET revoked_ms = ?2 WHERE tenant_id = ?1 AND revoked_ms = 0",
                  id, now, err) < 0 ||
      tenant_exec(st, "UPDATE s3_keys SET revoked_ms = ?2 WHERE tenant_id = ?1 AND revoked_ms = 0",
                  id, now, err) < 0 ||
      /* Its people's sign-ins end too: their tokens die, their codes go. */
      tenant_exec(st,
                  "UPDATE oauth_tokens SET revoked_ms = ?2 WHERE user_id IN (SELECT id FROM "
                  "users WHERE tenant_id = ?1) AND revoked_ms = 0",
                  id, now, err) < 0 ||
      tenant_exec(st,
                  "DELETE FROM oauth_codes WHERE user_id IN (SELECT id FROM users WHERE "
                  "tenant_id = ?1)",
                  id, 0, err) < 0)
    return -1;
  db_fault_point("tenant_mark_deleted");
  return db_commit(&txn, err);
}

int state_tenant_purge(struct state *st, const char *id, struct husk_err *err) {
  if (check_id("tenant id", id, STATE_TENANT_ID_SIZE, err) < 0)
    return -1;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  {
    cleanup_stmt sqlite3_stmt *s = NULL;
    if (db_prepare(st, &s,
                   "SELECT deleted_ms, (SELECT count(*) FROM boxes WHERE tenant_id = ?1 AND state "
                   "IN " DB_LIVE_STATES "), (SELECT count(*) FROM buckets WHERE tenant_id = ?1) FROM tenants "
                   "WHERE id = ?1",
                   err) < 0)
      return -1;
    int rc = db_text(s, 1, id);
    if (rc)
      return db_fail(st, err, rc, "cannot bind tenant id");
    int r = db_step_row(st, s, "cannot read tenant", err);
    if (r < 0)
      return -1;
    if (r == 0)
      return husk_fail(err, ENOENT, "tenant `%s` not found", id);
    if (sqlite3_column_int64(s, 0) == 0)
      return husk_fail(err, ESTALE, "tenant `%s` is not being deleted", id);
    if (sqlite3_column_int64(s, 1) > 0)
      return husk_fail(err, EBUSY, "tenant `%s` still has %lld live box(es)", id,
                       (long long)sqlite3_column_int64(s, 1));
    if (sqlite3_column_int64(s, 2) > 0)
      return husk_fail(err, EBUSY, "tenant `%s` still has %lld bucket(s)", id,
                       (long long)sqlite3_column_int64(s, 2));
  }
  /* Children before parents: processes and egress settings go with their
   * box (ON DELETE CASCADE), link accesses with their link. */
  static const char *const purge[] = {
      "DELETE FROM jobs WHERE tenant_id = ?1",
      "DELETE FROM previews WHERE tenant_id = ?1", /* preview_access: ON DELETE CASCADE */
      "DELETE FROM boxes WHERE tenant_id = ?1",
      "DELETE FROM snapshots WHERE tenant_id = ?1", /* their archives went with the store's purge */
      "DELETE FROM box_volumes WHERE volume_id IN (SELECT id FROM volumes WHERE tenant_id = ?1)",
      "DELETE FROM volumes WHERE tenant_id = ?1", /* their images: box_volume_sweep */
      "DELETE FROM secrets WHERE tenant_id = ?1",
      "DELETE FROM links WHERE tenant_id = ?1",
      "DELETE FROM upload_links WHERE tenant_id = ?1",
      "DELETE FROM s3_keys WHERE tenant_id = ?1",
      "DELETE FROM templates WHERE tenant_id = ?1", /* their layers: template_collect, after */
      "DELETE FROM build_cache WHERE tenant_id = ?1",
      "DELETE FROM api_keys WHERE tenant_id = ?1",
      /* Tokens and codes name their user (a foreign key), users the tenant. */
      "DELETE FROM oidc_configs WHERE tenant_id = ?1",
      "DELETE FROM sso_pending WHERE tenant_id = ?1",
      "DELETE FROM oauth_tokens WHERE user_id IN (SELECT id FROM users WHERE tenant_id = ?1)",
      "DELETE FROM oauth_codes WHERE user_id IN (SELECT id FROM users WHERE tenant_id = ?1)",
      "DELETE FROM users WHERE tenant_id = ?1",
      "DELETE FROM tenants WHERE id = ?1 AND deleted_ms != 0",
  };
  for (size_t i = 0; i < sizeof purge / sizeof purge[0]; i++)
    if (tenant_exec(st, purge[i], id, 0, err) < 0)
      return -1;
  db_fault_point("tenant_purge");
  if (db_commit(&txn, err) < 0)
    return -1;
  /* Committed, the template layers not yet collected: the template
   * store's collection at open is for that. */
  db_fault_point("tenant_purge_committed");
  return 0;
}
