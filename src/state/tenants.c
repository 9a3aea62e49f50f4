/* Tenants: who owns boxes and keys, and the quotas that bound their boxes.
 * Quotas are enforced where boxes are inserted (boxes.c), in the same
 * transaction as the insert. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>

#include "state/db.h"
#include "util/cleanup.h"

#define TENANT_COLUMNS "id, name, max_boxes, max_memory, created_ms"

static int check_quota(int64_t max_boxes, int64_t max_memory, struct husk_err *err) {
  if (max_boxes < STATE_UNLIMITED || max_memory < STATE_UNLIMITED)
    return husk_fail(err, EINVAL, "a quota must be >= 0, or %d for no limit", STATE_UNLIMITED);
  return 0;
}

static int read_tenant(sqlite3_stmt *s, struct state_tenant *t, struct husk_err *err) {
  bool ok = db_col_text(s, 0, t->id, sizeof t->id);
  ok &= db_col_text(s, 1, t->name, sizeof t->name);
  t->max_boxes = sqlite3_column_int64(s, 2);
  t->max_memory = sqlite3_column_int64(s, 3);
  t->created_ms = sqlite3_column_int64(s, 4);
  if (!ok)
    return husk_fail(err, EUCLEAN, "tenant row has an oversized value");
  return 0;
}

int state_tenant_create(struct state *st, const char *name, int64_t max_boxes, int64_t max_memory,
                        struct state_tenant *out, struct husk_err *err) {
  struct state_tenant t = {.max_boxes = max_boxes, .max_memory = max_memory};
  if (check_text("tenant name", name, sizeof t.name, false, err) < 0 ||
      check_quota(max_boxes, max_memory, err) < 0)
    return -1;
  if (state_new_id("t_", t.id, sizeof t.id, err) < 0)
    return -1;
  snprintf(t.name, sizeof t.name, "%s", name); /* fits: checked above */
  t.created_ms = state_now_ms();

  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s, "INSERT INTO tenants (" TENANT_COLUMNS ") VALUES (?1, ?2, ?3, ?4, ?5)",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, t.id)) || (rc = db_text(s, 2, t.name)) ||
      (rc = db_int(s, 3, t.max_boxes)) || (rc = db_int(s, 4, t.max_memory)) ||
      (rc = db_int(s, 5, t.created_ms)))
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
    if (db_prepare(st, &s, "SELECT " TENANT_COLUMNS " FROM tenants ORDER BY created_ms, id",
                   err) < 0)
      return -1;
    int r;
    while ((r = db_step_row(st, s, "cannot list tenants", err)) == 1) {
      struct state_tenant *t = db_rows_push(&rows);
      if (!t)
        return husk_error(err, ENOMEM, "cannot list tenants");
      if (read_tenant(s, t, err) < 0)
        return -1;
    }
    if (r < 0)
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
  if (db_prepare(st, &s, "UPDATE tenants SET max_boxes = ?2, max_memory = ?3 WHERE id = ?1",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, id)) || (rc = db_int(s, 2, max_boxes)) ||
      (rc = db_int(s, 3, max_memory)))
    return db_fail(st, err, rc, "cannot bind quota");
  int n = db_step_done(st, s, "cannot set quota", err);
  if (n < 0)
    return -1;
  if (n == 0)
    return husk_fail(err, ENOENT, "tenant `%s` not found", id);
  return 0;
}
