/* Snapshot rows (see snapshot_state.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/db.h"
#include "state/snapshot_state.h"
#include "util/cleanup.h"

#define SNAP_COLUMNS                                                                               \
  "s.id, s.tenant_id, s.box_id, s.state, s.template, s.template_id, s.workdir, s.memory, s.pids, " \
  "s.cpu_milli, s.disk, s.timeout_ms, s.env_json, s.metadata_json, s.size, s.data_bytes, "         \
  "s.entries, s.sha256, s.created_ms, s.kind = 'pause', "                                         \
  "(SELECT count(*) FROM boxes b WHERE b.snapshot_id = s.id AND b.state IN " DB_LIVE_STATES ")"

void state_snapshot_free(struct state_snapshot *s) {
  if (!s)
    return;
  free(s->env_json);
  free(s->metadata_json);
  s->env_json = s->metadata_json = NULL;
}

static void snap_free_item(void *item) { state_snapshot_free(item); }

static int read_snap(sqlite3_stmt *s, void *row, struct husk_err *err) {
  struct state_snapshot *p = row;
  memset(p, 0, sizeof *p);
  bool ok = db_col_text(s, 0, p->id, sizeof p->id);
  ok &= db_col_text(s, 1, p->tenant_id, sizeof p->tenant_id);
  ok &= db_col_text(s, 2, p->box_id, sizeof p->box_id);
  ok &= db_col_text(s, 3, p->state, sizeof p->state);
  ok &= db_col_text(s, 4, p->template_name, sizeof p->template_name);
  ok &= db_col_text(s, 5, p->template_id, sizeof p->template_id);
  ok &= db_col_text(s, 6, p->workdir, sizeof p->workdir);
  p->memory = sqlite3_column_int64(s, 7);
  p->pids = sqlite3_column_int64(s, 8);
  p->cpu_milli = sqlite3_column_int64(s, 9);
  p->disk = sqlite3_column_int64(s, 10);
  p->timeout_ms = sqlite3_column_int64(s, 11);
  p->env_json = db_col_strdup(s, 12);
  p->metadata_json = db_col_strdup(s, 13);
  p->size = sqlite3_column_int64(s, 14);
  p->data_bytes = sqlite3_column_int64(s, 15);
  p->entries = sqlite3_column_int64(s, 16);
  ok &= db_col_text(s, 17, p->sha256, sizeof p->sha256);
  p->created_ms = sqlite3_column_int64(s, 18);
  p->for_pause = sqlite3_column_int64(s, 19) != 0;
  p->refs = sqlite3_column_int64(s, 20);
  if (!p->env_json || !p->metadata_json) {
    state_snapshot_free(p);
    return husk_error(err, ENOMEM, "cannot read snapshot");
  }
  if (!ok) {
    state_snapshot_free(p);
    return husk_fail(err, EUCLEAN, "snapshot row has an oversized value");
  }
  return 0;
}

int state_snapshot_insert(struct state *st, const struct state_snapshot *p, int64_t max,
                          struct husk_err *err) {
  if (check_id("snapshot id", p->id, sizeof p->id, err) < 0 ||
      check_id("tenant id", p->tenant_id, sizeof p->tenant_id, err) < 0 ||
      check_id("box id", p->box_id, sizeof p->box_id, err) < 0 ||
      check_text("template name", p->template_name, sizeof p->template_name, true, err) < 0 ||
      check_id_or_empty("template id", p->template_id, sizeof p->template_id, err) < 0 ||
      check_text("working directory", p->workdir, sizeof p->workdir, true, err) < 0)
    return -1;
  if (p->memory < 0 || p->pids < 0 || p->cpu_milli < 0 || p->disk < 0 || p->timeout_ms < 0)
    return husk_fail(err, EINVAL, "snapshot limits must be >= 0");
  const char *env = p->env_json ? p->env_json : "{}";
  const char *meta = p->metadata_json ? p->metadata_json : "{}";
  if (check_json("env", env, err) < 0 || check_json("metadata", meta, err) < 0)
    return -1;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  {
    cleanup_stmt sqlite3_stmt *q = NULL;
    if (db_prepare(st, &q, "SELECT 1 FROM tenants WHERE id = ?1 AND deleted_ms = 0", err) < 0)
      return -1;
    int rc = db_text(q, 1, p->tenant_id);
    if (rc)
      return db_fail(st, err, rc, "cannot bind tenant id");
    int r = db_step_row(st, q, "cannot read tenant", err);
    if (r < 0)
      return -1;
    if (r == 0)
      return husk_fail(err, ENOENT, "no such tenant");
  }
  if (max > 0) {
    cleanup_stmt sqlite3_stmt *q = NULL;
    if (db_prepare(st, &q, "SELECT count(*) FROM snapshots WHERE tenant_id = ?1", err) < 0)
      return -1;
    int rc = db_text(q, 1, p->tenant_id);
    if (rc)
      return db_fail(st, err, rc, "cannot bind tenant id");
    if (db_step_row(st, q, "cannot count snapshots", err) < 0)
      return -1;
    if (sqlite3_column_int64(q, 0) >= max)
      return husk_fail(err, EDQUOT,
                       "the tenant keeps %lld snapshots, as many as it may: delete some first",
                       (long long)max);
  }
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "INSERT INTO snapshots (id, tenant_id, box_id, state, template, template_id, "
                 "workdir, memory, pids, cpu_milli, disk, timeout_ms, env_json, metadata_json, "
                 "created_ms, kind) VALUES (?1, ?2, ?3, 'creating', ?4, ?5, ?6, ?7, ?8, ?9, ?10, "
                 "?11, ?12, ?13, ?14, ?15)",
                 err) < 0)
    return -1;
  int64_t created = p->created_ms ? p->created_ms : state_now_ms();
  int rc;
  if ((rc = db_text(s, 1, p->id)) || (rc = db_text(s, 2, p->tenant_id)) ||
      (rc = db_text(s, 3, p->box_id)) || (rc = db_text(s, 4, p->template_name)) ||
      (rc = db_text(s, 5, p->template_id)) || (rc = db_text(s, 6, p->workdir)) ||
      (rc = db_int(s, 7, p->memory)) || (rc = db_int(s, 8, p->pids)) ||
      (rc = db_int(s, 9, p->cpu_milli)) || (rc = db_int(s, 10, p->disk)) ||
      (rc = db_int(s, 11, p->timeout_ms)) || (rc = db_text(s, 12, env)) ||
      (rc = db_text(s, 13, meta)) || (rc = db_int(s, 14, created)) ||
      (rc = db_text(s, 15, p->for_pause ? "pause" : "snapshot")))
    return db_fail(st, err, rc, "cannot bind snapshot");
  if (db_step_done(st, s, "cannot insert snapshot", err) < 0)
    return -1;
  db_fault_point("snapshot_insert");
  return db_commit(&txn, err);
}

int state_snapshot_ready(struct state *st, const char *id, int64_t size, int64_t data_bytes,
                         int64_t entries, const char *sha256, struct husk_err *err) {
  if (check_id("snapshot id", id, STATE_SNAPSHOT_ID_SIZE, err) < 0)
    return -1;
  if (!sha256 || strlen(sha256) != 64 || strspn(sha256, "0123456789abcdef") != 64)
    return husk_fail(err, EINVAL, "a snapshot digest is 64 lower-case hex digits");
  if (size < 0 || data_bytes < 0 || entries < 0)
    return husk_fail(err, EINVAL, "snapshot sizes must be >= 0");
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "UPDATE snapshots SET state = 'ready', size = ?2, data_bytes = ?3, entries = ?4, "
                 "sha256 = ?5 WHERE id = ?1 AND state = 'creating'",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, id)) || (rc = db_int(s, 2, size)) || (rc = db_int(s, 3, data_bytes)) ||
      (rc = db_int(s, 4, entries)) || (rc = db_text(s, 5, sha256)))
    return db_fail(st, err, rc, "cannot bind snapshot");
  if (db_step_done(st, s, "cannot finish snapshot", err) < 0)
    return -1;
  if (sqlite3_changes(st->db) != 1)
    return husk_fail(err, ESTALE, "snapshot `%s` is no longer being created", id);
  db_fault_point("snapshot_ready");
  return db_commit(&txn, err);
}

int state_snapshot_get(struct state *st, const char *tenant_id, const char *id,
                       struct state_snapshot *out, struct husk_err *err) {
  memset(out, 0, sizeof *out);
  if ((tenant_id && check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0) ||
      check_id("snapshot id", id, STATE_SNAPSHOT_ID_SIZE, err) < 0)
    return husk_fail(err, ENOENT, "no such snapshot");
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct state_snapshot),
                                      .free_item = snap_free_item};
  if (db_rows_select(st, &rows,
                     "SELECT " SNAP_COLUMNS " FROM snapshots s WHERE s.id = ?1 AND "
                     "(?2 IS NULL OR s.tenant_id = ?2)",
                     DB_ARGS(DB_TEXT(id), DB_TEXT(tenant_id)), read_snap, "cannot read snapshot",
                     err) < 0)
    return -1;
  if (rows.n == 0)
    return husk_fail(err, ENOENT, "no such snapshot");
  *out = *(struct state_snapshot *)db_rows_at(&rows, 0);
  rows.n = 0; /* *out owns its strings now */
  return 0;
}

/* "<created_ms>.<id>" */
static int parse_cursor(const char *c, int64_t *ms, char *id, size_t idsz, struct husk_err *err) {
  char *end;
  errno = 0;
  long long v = strtoll(c, &end, 10);
  if (errno || end == c || *end != '.' || v < 0 || strlen(end + 1) >= idsz ||
      check_id("cursor", end + 1, idsz, NULL) < 0)
    return husk_fail(err, EINVAL, "bad cursor");
  *ms = v;
  snprintf(id, idsz, "%s", end + 1);
  return 0;
}

int state_snapshot_list(struct state *st, const char *tenant_id, const char *box_id,
                        const char *cursor, int limit,
                        int (*cb)(void *ctx, const struct state_snapshot *s), void *ctx,
                        char *next_cursor, size_t next_size, struct husk_err *err) {
  if (next_cursor && next_size)
    next_cursor[0] = '\0';
  if (check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0)
    return -1;
  int lim;
  if (db_check_limit(limit, &lim, err) < 0)
    return -1;
  int64_t cms = -1;
  char cid[STATE_SNAPSHOT_ID_SIZE] = "";
  if (cursor && cursor[0] && parse_cursor(cursor, &cms, cid, sizeof cid, err) < 0)
    return -1;
  bool one_box = box_id && box_id[0];
  /* An id no box can have matches nothing: an empty page, not an error. */
  if (one_box && check_id("box id", box_id, STATE_BOX_ID_SIZE, NULL) < 0)
    return 0;
  /* Two queries, not one with "?5 = '' OR": each has its own index. */
#define SNAP_LIST(box_clause)                                                                      \
  "SELECT " SNAP_COLUMNS " FROM snapshots s WHERE s.tenant_id = ?1 " box_clause                    \
  "AND s.state = 'ready' AND s.kind = 'snapshot' AND (s.created_ms, s.id) > (?2, ?3) "             \
  "ORDER BY s.created_ms, s.id LIMIT ?4"
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct state_snapshot),
                                      .free_item = snap_free_item};
  if (db_rows_select(st, &rows, one_box ? SNAP_LIST("AND s.box_id = ?5 ") : SNAP_LIST("AND ?5 = '' "),
                     DB_ARGS(DB_TEXT(tenant_id), DB_INT(cms), DB_TEXT(cid), DB_INT(lim + 1),
                             DB_TEXT(one_box ? box_id : "")),
                     read_snap, "cannot list snapshots", err) < 0)
    return -1;
  if (rows.n > (size_t)lim && next_cursor) {
    const struct state_snapshot *last = db_rows_at(&rows, (size_t)lim - 1);
    snprintf(next_cursor, next_size, "%" PRId64 ".%s", last->created_ms, last->id);
  }
  return db_rows_each(&rows, (size_t)lim, cb, ctx);
#undef SNAP_LIST
}

int state_snapshot_delete(struct state *st, const char *tenant_id, const char *id,
                          struct husk_err *err) {
  if (check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0 ||
      check_id("snapshot id", id, STATE_SNAPSHOT_ID_SIZE, NULL) < 0)
    return husk_fail(err, ENOENT, "no such snapshot");
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  {
    cleanup_stmt sqlite3_stmt *q = NULL;
    if (db_prepare(st, &q,
                   "SELECT state, (SELECT count(*) FROM boxes b WHERE b.snapshot_id = ?1 AND "
                   "b.state IN " DB_LIVE_STATES ") FROM snapshots WHERE id = ?1 AND tenant_id = ?2 "
                   "AND kind = 'snapshot'",
                   err) < 0)
      return -1;
    int rc;
    if ((rc = db_text(q, 1, id)) || (rc = db_text(q, 2, tenant_id)))
      return db_fail(st, err, rc, "cannot bind snapshot");
    int r = db_step_row(st, q, "cannot read snapshot", err);
    if (r < 0)
      return -1;
    char state[16] = "";
    if (r == 0 || !db_col_text(q, 0, state, sizeof state) || strcmp(state, "ready") != 0)
      return husk_fail(err, ENOENT, "no such snapshot");
    int64_t refs = sqlite3_column_int64(q, 1);
    if (refs > 0)
      return husk_fail(err, EBUSY, "snapshot %s is in use by %" PRId64 " live sandbox%s", id,
                       refs, refs == 1 ? "" : "es");
  }
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s, "DELETE FROM snapshots WHERE id = ?1", err) < 0)
    return -1;
  int rc = db_text(s, 1, id);
  if (rc)
    return db_fail(st, err, rc, "cannot bind snapshot");
  if (db_step_done(st, s, "cannot delete snapshot", err) < 0)
    return -1;
  return db_commit(&txn, err);
}

int state_snapshot_list_creating(struct state *st, int max,
                                 int (*cb)(void *ctx, const struct state_snapshot *s), void *ctx,
                                 struct husk_err *err) {
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct state_snapshot),
                                      .free_item = snap_free_item};
  if (db_rows_select(st, &rows,
                     "SELECT " SNAP_COLUMNS " FROM snapshots s WHERE s.state = 'creating' OR "
                     "(s.kind = 'pause' AND NOT EXISTS (SELECT 1 FROM boxes b WHERE "
                     "b.paused_snapshot = s.id AND b.state IN " DB_LIVE_STATES ")) "
                     "ORDER BY s.created_ms LIMIT ?1",
                     DB_ARGS(DB_INT(max)), read_snap, "cannot list snapshots", err) < 0)
    return -1;
  return db_rows_each(&rows, rows.n, cb, ctx);
}

int state_snapshot_remove(struct state *st, const char *id, struct husk_err *err) {
  if (check_id("snapshot id", id, STATE_SNAPSHOT_ID_SIZE, err) < 0)
    return -1;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s, "DELETE FROM snapshots WHERE id = ?1", err) < 0)
    return -1;
  int rc = db_text(s, 1, id);
  if (rc)
    return db_fail(st, err, rc, "cannot bind snapshot");
  return db_step_done(st, s, "cannot remove snapshot", err) < 0 ? -1 : 0;
}
