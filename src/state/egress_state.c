/* Sealed secrets and box egress settings (see egress_state.h). */
#define _GNU_SOURCE
#include "state/egress_state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "state/db.h"
#include "util/cleanup.h"

int state_secret_put(struct state *st, const char *tenant, const char *name, const void *sealed,
                     size_t len, struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "INSERT INTO secrets (tenant_id, name, sealed, created_ms, updated_ms)"
                 " VALUES (?1, ?2, ?3, ?4, ?4) ON CONFLICT (tenant_id, name)"
                 " DO UPDATE SET sealed = excluded.sealed, updated_ms = excluded.updated_ms",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, tenant)) || (rc = db_text(s, 2, name)) || (rc = db_blob(s, 3, sealed, len)) ||
      (rc = db_int(s, 4, state_now_ms())))
    return db_fail(st, err, rc, "cannot bind secret");
  if (db_step_done(st, s, "cannot store secret", err) < 0) {
    if (err->code == ENOENT || err->code == EINVAL)
      return husk_fail(err, ENOENT, "no such tenant");
    return -1;
  }
  return 0;
}

int state_secret_get(struct state *st, const char *tenant, const char *name, uint8_t **sealed,
                     size_t *len, struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s, "SELECT sealed FROM secrets WHERE tenant_id = ?1 AND name = ?2", err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, tenant)) || (rc = db_text(s, 2, name)))
    return db_fail(st, err, rc, "cannot bind secret");
  int r = db_step_row(st, s, "cannot read secret", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, ENOENT, "no secret `%s`", name);
  const void *b = sqlite3_column_blob(s, 0);
  int n = sqlite3_column_bytes(s, 0);
  if (!b || n <= 0)
    return husk_fail(err, EUCLEAN, "secret `%s` is empty", name);
  if (!(*sealed = malloc((size_t)n)))
    return husk_fail(err, ENOMEM, "out of memory");
  memcpy(*sealed, b, (size_t)n);
  *len = (size_t)n;
  return 0;
}

int state_secret_delete(struct state *st, const char *tenant, const char *name, struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s, "DELETE FROM secrets WHERE tenant_id = ?1 AND name = ?2", err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, tenant)) || (rc = db_text(s, 2, name)))
    return db_fail(st, err, rc, "cannot bind secret");
  int n = db_step_done(st, s, "cannot delete secret", err);
  if (n < 0)
    return -1;
  if (n == 0)
    return husk_fail(err, ENOENT, "no secret `%s`", name);
  return 0;
}

struct secret_row {
  char name[128];
  int64_t created_ms, updated_ms;
  bool oversized; /* a name longer than any the API stores: not listed */
};

static int read_secret(sqlite3_stmt *s, void *row, struct husk_err *err) {
  struct secret_row *r = row;
  r->oversized = !db_col_text(s, 0, r->name, sizeof r->name);
  r->created_ms = sqlite3_column_int64(s, 1);
  r->updated_ms = sqlite3_column_int64(s, 2);
  return 0;
}

int state_secret_list(struct state *st, const char *tenant,
                      int (*cb)(void *ctx, const char *name, int64_t created_ms, int64_t updated_ms),
                      void *ctx, struct husk_err *err) {
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct secret_row)};
  if (db_rows_select(st, &rows,
                     "SELECT name, created_ms, updated_ms FROM secrets WHERE tenant_id = ?1 "
                     "ORDER BY name",
                     DB_ARGS(DB_TEXT(tenant)), read_secret, "cannot list secrets", err) < 0)
    return -1;
  for (size_t i = 0; i < rows.n; i++) {
    const struct secret_row *r = db_rows_at(&rows, i);
    if (!r->oversized && cb(ctx, r->name, r->created_ms, r->updated_ms) != 0)
      return 0;
  }
  return 0;
}

int state_box_egress_set(struct state *st, const char *box_id, const char *network,
                         const char *policy_json, struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "INSERT INTO box_egress (box_id, network, policy_json) VALUES (?1, ?2, ?3)"
                 " ON CONFLICT (box_id) DO UPDATE SET network = excluded.network,"
                 " policy_json = excluded.policy_json",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, box_id)) || (rc = db_text(s, 2, network)) || (rc = db_text(s, 3, policy_json)))
    return db_fail(st, err, rc, "cannot bind box egress");
  return db_step_done(st, s, "cannot store the box's egress settings", err) < 0 ? -1 : 0;
}

int state_box_egress_get(struct state *st, const char *box_id, char *network, size_t network_len,
                         char **policy_json, struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s, "SELECT network, policy_json FROM box_egress WHERE box_id = ?1", err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, box_id)))
    return db_fail(st, err, rc, "cannot bind box id");
  int r = db_step_row(st, s, "cannot read the box's egress settings", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, ENOENT, "box has no egress settings");
  if (!db_col_text(s, 0, network, network_len))
    return husk_fail(err, EUCLEAN, "bad network mode in the database");
  if (policy_json && !(*policy_json = db_col_strdup(s, 1)))
    return husk_fail(err, ENOMEM, "out of memory");
  return 0;
}
