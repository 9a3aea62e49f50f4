/* Volume rows (see volume_state.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/db.h"
#include "state/volume_state.h"
#include "util/cleanup.h"

/* The live box that mounts volume v, or "". */
#define VOL_MOUNTED_BY                                                                             \
  "coalesce((SELECT bv.box_id FROM box_volumes bv JOIN boxes b ON b.id = bv.box_id WHERE "         \
  "bv.volume_id = v.id AND b.state IN " DB_LIVE_STATES " LIMIT 1), '')"
#define VOL_COLUMNS "v.id, v.tenant_id, v.name, v.size, v.state, v.created_ms, " VOL_MOUNTED_BY

static int read_vol(sqlite3_stmt *s, void *row, struct husk_err *err) {
  struct state_volume *v = row;
  memset(v, 0, sizeof *v);
  bool ok = db_col_text(s, 0, v->id, sizeof v->id);
  ok &= db_col_text(s, 1, v->tenant_id, sizeof v->tenant_id);
  ok &= db_col_text(s, 2, v->name, sizeof v->name);
  v->size = sqlite3_column_int64(s, 3);
  ok &= db_col_text(s, 4, v->state, sizeof v->state);
  v->created_ms = sqlite3_column_int64(s, 5);
  ok &= db_col_text(s, 6, v->box_id, sizeof v->box_id);
  if (!ok)
    return husk_fail(err, EUCLEAN, "volume row has an oversized value");
  return 0;
}

/* Names are checked by the core (box/volume.c); here only that they are
 * storable text. */
static int check_name(const char *name, struct husk_err *err) {
  return check_text("volume name", name, STATE_VOLUME_NAME_SIZE, false, err);
}

/* Under the lock: one integer from a query with up to two text binds. */
static int count_locked(struct state *st, const char *sql, const char *a, const char *b,
                        int64_t *out, struct husk_err *err) {
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q, sql, err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(q, 1, a)) || (b && (rc = db_text(q, 2, b))))
    return db_fail(st, err, rc, "cannot bind volume");
  int r = db_step_row(st, q, "cannot read volumes", err);
  if (r < 0)
    return -1;
  *out = r ? sqlite3_column_int64(q, 0) : 0;
  return 0;
}

int state_volume_insert(struct state *st, const struct state_volume *v, int max,
                        struct husk_err *err) {
  if (check_id("volume id", v->id, sizeof v->id, err) < 0 ||
      check_id("tenant id", v->tenant_id, sizeof v->tenant_id, err) < 0 ||
      check_name(v->name, err) < 0)
    return -1;
  if (v->size <= 0)
    return husk_fail(err, EINVAL, "a volume's size must be > 0");
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  int64_t n = 0;
  if (count_locked(st, "SELECT count(*) FROM tenants WHERE id = ?1 AND deleted_ms = 0",
                   v->tenant_id, NULL, &n, err) < 0)
    return -1;
  if (n == 0)
    return husk_fail(err, ENOENT, "no such tenant");
  if (count_locked(st, "SELECT count(*) FROM volumes WHERE tenant_id = ?1 AND name = ?2",
                   v->tenant_id, v->name, &n, err) < 0)
    return -1;
  if (n > 0)
    return husk_fail(err, EEXIST, "a volume named `%s` exists already", v->name);
  if (count_locked(st, "SELECT count(*) FROM volumes WHERE tenant_id = ?1", v->tenant_id, NULL, &n,
                   err) < 0)
    return -1;
  if (max > 0 && n >= max)
    return husk_fail(err, EDQUOT, "the tenant has %" PRId64 " volumes, the most it may have", n);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "INSERT INTO volumes (id, tenant_id, name, size, state, created_ms) "
                 "VALUES (?1, ?2, ?3, ?4, 'creating', ?5)",
                 err) < 0)
    return -1;
  int64_t created = v->created_ms ? v->created_ms : state_now_ms();
  int rc;
  if ((rc = db_text(s, 1, v->id)) || (rc = db_text(s, 2, v->tenant_id)) ||
      (rc = db_text(s, 3, v->name)) || (rc = db_int(s, 4, v->size)) || (rc = db_int(s, 5, created)))
    return db_fail(st, err, rc, "cannot bind volume");
  if (db_step_done(st, s, "cannot insert volume", err) < 0)
    return -1;
  db_fault_point("volume_insert");
  return db_commit(&txn, err);
}

int state_volume_ready(struct state *st, const char *id, struct husk_err *err) {
  if (check_id("volume id", id, STATE_VOLUME_ID_SIZE, err) < 0)
    return -1;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s, "UPDATE volumes SET state = 'ready' WHERE id = ?1 AND state = 'creating'",
                 err) < 0)
    return -1;
  int rc = db_text(s, 1, id);
  if (rc)
    return db_fail(st, err, rc, "cannot bind volume");
  if (db_step_done(st, s, "cannot finish volume", err) < 0)
    return -1;
  if (sqlite3_changes(st->db) != 1)
    return husk_fail(err, ESTALE, "volume `%s` is no longer being created", id);
  return 0;
}

int state_volume_get(struct state *st, const char *tenant_id, const char *name,
                     struct state_volume *out, struct husk_err *err) {
  memset(out, 0, sizeof *out);
  if (check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0 || check_name(name, NULL) < 0)
    return husk_fail(err, ENOENT, "no such volume");
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct state_volume)};
  if (db_rows_select(st, &rows,
                     "SELECT " VOL_COLUMNS " FROM volumes v WHERE v.tenant_id = ?1 AND "
                     "v.name = ?2 AND v.state = 'ready'",
                     DB_ARGS(DB_TEXT(tenant_id), DB_TEXT(name)), read_vol, "cannot read volume",
                     err) < 0)
    return -1;
  if (rows.n == 0)
    return husk_fail(err, ENOENT, "no such volume `%s`", name);
  *out = *(struct state_volume *)db_rows_at(&rows, 0);
  return 0;
}

int state_volume_list(struct state *st, const char *tenant_id,
                      int (*cb)(void *ctx, const struct state_volume *v), void *ctx,
                      struct husk_err *err) {
  if (check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0)
    return -1;
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct state_volume)};
  if (db_rows_select(st, &rows,
                     "SELECT " VOL_COLUMNS " FROM volumes v WHERE v.tenant_id = ?1 AND "
                     "v.state = 'ready' ORDER BY v.name",
                     DB_ARGS(DB_TEXT(tenant_id)), read_vol, "cannot list volumes", err) < 0)
    return -1;
  return db_rows_each(&rows, rows.n, cb, ctx);
}

/* Under the lock and a transaction: the id of the tenant's ready volume
 * `name` and the live box mounting it ("" if none). */
static int find_locked(struct state *st, const char *tenant_id, const char *name, char *id,
                       char *box_id, struct husk_err *err) {
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q,
                 "SELECT v.id, " VOL_MOUNTED_BY " FROM volumes v WHERE v.tenant_id = ?1 AND "
                 "v.name = ?2 AND v.state = 'ready'",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(q, 1, tenant_id)) || (rc = db_text(q, 2, name)))
    return db_fail(st, err, rc, "cannot bind volume");
  int r = db_step_row(st, q, "cannot read volume", err);
  if (r < 0)
    return -1;
  if (r == 0 || !db_col_text(q, 0, id, STATE_VOLUME_ID_SIZE) ||
      !db_col_text(q, 1, box_id, STATE_BOX_ID_SIZE))
    return husk_fail(err, ENOENT, "no such volume `%s`", name);
  return 0;
}

static int exec_id_locked(struct state *st, const char *sql, const char *id, struct husk_err *err) {
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s, sql, err) < 0)
    return -1;
  int rc = db_text(s, 1, id);
  if (rc)
    return db_fail(st, err, rc, "cannot bind volume");
  return db_step_done(st, s, "cannot remove volume", err) < 0 ? -1 : 0;
}

int state_volume_delete(struct state *st, const char *tenant_id, const char *name, char *id_out,
                        struct husk_err *err) {
  if (check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0 || check_name(name, NULL) < 0)
    return husk_fail(err, ENOENT, "no such volume");
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  char box[STATE_BOX_ID_SIZE];
  if (find_locked(st, tenant_id, name, id_out, box, err) < 0)
    return -1;
  if (box[0])
    return husk_fail(err, EBUSY, "volume `%s` is mounted by sandbox %s: delete that first", name,
                     box);
  if (exec_id_locked(st, "DELETE FROM box_volumes WHERE volume_id = ?1", id_out, err) < 0 ||
      exec_id_locked(st, "DELETE FROM volumes WHERE id = ?1", id_out, err) < 0)
    return -1;
  return db_commit(&txn, err);
}

int state_volume_attach(struct state *st, const char *tenant_id, const char *box_id,
                        struct state_volume_mount *m, size_t n, struct husk_err *err) {
  if (check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0 ||
      check_id("box id", box_id, STATE_BOX_ID_SIZE, err) < 0)
    return -1;
  for (size_t i = 0; i < n; i++)
    if (check_name(m[i].name, err) < 0 ||
        check_text("volume path", m[i].path, sizeof m[i].path, false, err) < 0)
      return -1;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  for (size_t i = 0; i < n; i++) {
    char box[STATE_BOX_ID_SIZE];
    if (find_locked(st, tenant_id, m[i].name, m[i].volume_id, box, err) < 0)
      return -1;
    if (box[0] && strcmp(box, box_id) != 0)
      return husk_fail(err, EBUSY, "volume `%s` is mounted by sandbox %s already", m[i].name, box);
    cleanup_stmt sqlite3_stmt *s = NULL;
    if (db_prepare(st, &s,
                   "INSERT INTO box_volumes (box_id, volume_id, path, read_only) "
                   "VALUES (?1, ?2, ?3, ?4)",
                   err) < 0)
      return -1;
    int rc;
    if ((rc = db_text(s, 1, box_id)) || (rc = db_text(s, 2, m[i].volume_id)) ||
        (rc = db_text(s, 3, m[i].path)) || (rc = db_int(s, 4, m[i].read_only ? 1 : 0)))
      return db_fail(st, err, rc, "cannot bind volume mount");
    if (db_step_done(st, s, "cannot record the volume mount", err) < 0)
      return err->code == EEXIST ? husk_fail(err, EINVAL, "volume `%s` is mounted twice", m[i].name)
                                 : -1;
  }
  db_fault_point("volume_attach");
  return db_commit(&txn, err);
}

static int read_mount(sqlite3_stmt *s, void *row, struct husk_err *err) {
  struct state_volume_mount *m = row;
  memset(m, 0, sizeof *m);
  bool ok = db_col_text(s, 0, m->volume_id, sizeof m->volume_id);
  ok &= db_col_text(s, 1, m->name, sizeof m->name);
  ok &= db_col_text(s, 2, m->path, sizeof m->path);
  m->read_only = sqlite3_column_int64(s, 3) != 0;
  if (!ok)
    return husk_fail(err, EUCLEAN, "volume mount row has an oversized value");
  return 0;
}

int state_volume_mounts(struct state *st, const char *box_id, struct state_volume_mount *m,
                        size_t max, size_t *n, struct husk_err *err) {
  *n = 0;
  if (check_id("box id", box_id, STATE_BOX_ID_SIZE, err) < 0)
    return -1;
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct state_volume_mount)};
  if (db_rows_select(st, &rows,
                     "SELECT bv.volume_id, v.name, bv.path, bv.read_only FROM box_volumes bv "
                     "JOIN volumes v ON v.id = bv.volume_id WHERE bv.box_id = ?1 ORDER BY "
                     "bv.rowid",
                     DB_ARGS(DB_TEXT(box_id)), read_mount, "cannot list volume mounts", err) < 0)
    return -1;
  if (rows.n > max)
    return husk_fail(err, E2BIG, "sandbox %s has %zu volume mounts, more than %zu", box_id, rows.n,
                     max);
  for (size_t i = 0; i < rows.n; i++)
    m[i] = *(struct state_volume_mount *)db_rows_at(&rows, i);
  *n = rows.n;
  return 0;
}

int state_volume_list_creating(struct state *st, int max,
                               int (*cb)(void *ctx, const struct state_volume *v), void *ctx,
                               struct husk_err *err) {
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct state_volume)};
  if (db_rows_select(st, &rows,
                     "SELECT " VOL_COLUMNS " FROM volumes v WHERE v.state = 'creating' "
                     "ORDER BY v.created_ms LIMIT ?1",
                     DB_ARGS(DB_INT(max)), read_vol, "cannot list volumes", err) < 0)
    return -1;
  return db_rows_each(&rows, rows.n, cb, ctx);
}

int state_volume_remove(struct state *st, const char *id, struct husk_err *err) {
  if (check_id("volume id", id, STATE_VOLUME_ID_SIZE, err) < 0)
    return -1;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  if (exec_id_locked(st, "DELETE FROM box_volumes WHERE volume_id = ?1", id, err) < 0 ||
      exec_id_locked(st, "DELETE FROM volumes WHERE id = ?1", id, err) < 0)
    return -1;
  return db_commit(&txn, err);
}

int state_volume_exists(struct state *st, const char *id, bool *out, struct husk_err *err) {
  *out = false;
  if (check_id("volume id", id, STATE_VOLUME_ID_SIZE, NULL) < 0)
    return 0;
  cleanup_unlock struct state *locked = db_lock(st);
  int64_t n = 0;
  if (count_locked(st, "SELECT count(*) FROM volumes WHERE id = ?1", id, NULL, &n, err) < 0)
    return -1;
  *out = n > 0;
  return 0;
}
