/* Boxes: one row per long-lived box, from "creating" until its row is
 * deleted.  The row is how a restarted daemon finds the box's resources
 * (init pid and start time, uid slot, cgroup), so a live box's row is never
 * deleted and a terminal state is never left.
 *
 * Tenant isolation lives in the queries: every read a tenant can trigger
 * carries `tenant_id = ?` in its WHERE clause, so another tenant's box is
 * indistinguishable from a missing one (ENOENT), not "forbidden". */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/db.h"
#include "util/cleanup.h"

#define BOX_COLUMNS                                                                                \
  "id, tenant_id, state, reason, template, memory, pids, cpu_milli, disk, timeout_ms, env_json, "  \
  "metadata_json, created_ms, expires_ms, ended_ms, init_pid, init_start_time, uid_base, slot, "   \
  "cgroup, template_id, workdir, paused_ms, snapshot_id, paused_snapshot, created_by"

static const char *const live_states[] = {STATE_BOX_CREATING, STATE_BOX_RUNNING,
                                          STATE_BOX_STOPPING, STATE_BOX_PAUSED};
static const char *const terminal_states[] = {STATE_BOX_STOPPED, STATE_BOX_FAILED};

static bool in_list(const char *s, const char *const *list, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(s, list[i]))
      return true;
  return false;
}

bool box_state_live(const char *s) { return s && in_list(s, live_states, 4); }
bool box_state_terminal(const char *s) { return s && in_list(s, terminal_states, 2); }
bool box_state_known(const char *s) { return box_state_live(s) || box_state_terminal(s); }

static int check_state(const char *what, const char *s, struct husk_err *err) {
  if (!box_state_known(s))
    return husk_fail(err, EINVAL, "%s is not a box state", what);
  return 0;
}

void state_box_free(struct state_box *box) {
  if (!box)
    return;
  free(box->env_json);
  free(box->metadata_json);
  box->env_json = box->metadata_json = NULL;
}

static void box_free_item(void *item) { state_box_free(item); }

static int read_box(sqlite3_stmt *s, void *row, struct husk_err *err) {
  struct state_box *b = row;
  memset(b, 0, sizeof *b);
  bool ok = db_col_text(s, 0, b->id, sizeof b->id);
  ok &= db_col_text(s, 1, b->tenant_id, sizeof b->tenant_id);
  ok &= db_col_text(s, 2, b->state, sizeof b->state);
  ok &= db_col_text(s, 3, b->reason, sizeof b->reason);
  ok &= db_col_text(s, 4, b->template_name, sizeof b->template_name);
  ok &= db_col_text(s, 20, b->template_id, sizeof b->template_id);
  ok &= db_col_text(s, 21, b->workdir, sizeof b->workdir);
  b->paused_ms = sqlite3_column_int64(s, 22);
  ok &= db_col_text(s, 23, b->snapshot_id, sizeof b->snapshot_id);
  ok &= db_col_text(s, 24, b->paused_snapshot, sizeof b->paused_snapshot);
  ok &= db_col_text(s, 25, b->created_by, sizeof b->created_by);
  b->memory = sqlite3_column_int64(s, 5);
  b->pids = sqlite3_column_int64(s, 6);
  b->cpu_milli = sqlite3_column_int64(s, 7);
  b->disk = sqlite3_column_int64(s, 8);
  b->timeout_ms = sqlite3_column_int64(s, 9);
  b->env_json = db_col_strdup(s, 10);
  b->metadata_json = db_col_strdup(s, 11);
  b->created_ms = sqlite3_column_int64(s, 12);
  b->expires_ms = sqlite3_column_int64(s, 13);
  b->ended_ms = sqlite3_column_int64(s, 14);
  b->init_pid = sqlite3_column_int64(s, 15);
  b->init_start_time = (uint64_t)sqlite3_column_int64(s, 16);
  b->uid_base = sqlite3_column_int64(s, 17);
  b->slot = sqlite3_column_int64(s, 18);
  ok &= db_col_text(s, 19, b->cgroup, sizeof b->cgroup);
  if (!b->env_json || !b->metadata_json) {
    state_box_free(b);
    return husk_error(err, ENOMEM, "cannot read box");
  }
  if (!ok) {
    state_box_free(b);
    return husk_fail(err, EUCLEAN, "box row has an oversized value");
  }
  return 0;
}

/* A JSON object whose values are all strings (env, metadata): checked
 * here, in SQL, so the rule has one definition and the message can say
 * which column is wrong. */
static int check_string_object(struct state *st, const char *what, const char *json,
                               struct husk_err *err) {
  if (check_json(what, json, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "SELECT CASE WHEN json_valid(?1) AND json_type(?1) = 'object' THEN "
                 "(SELECT count(*) FROM json_each(?1) WHERE type <> 'text') ELSE -1 END",
                 err) < 0)
    return -1;
  int rc = db_text(s, 1, json);
  if (rc)
    return db_fail(st, err, rc, "cannot bind %s", what);
  if (db_step_row(st, s, "cannot check JSON", err) < 0)
    return -1;
  if (sqlite3_column_int64(s, 0) != 0)
    return husk_fail(err, EINVAL, "%s must be a JSON object of strings", what);
  return 0;
}

static int check_box(const struct state_box *b, struct husk_err *err) {
  if (check_id("box id", b->id, sizeof b->id, err) < 0 ||
      check_id("tenant id", b->tenant_id, sizeof b->tenant_id, err) < 0 ||
      check_state("box state", b->state, err) < 0 ||
      check_text("template name", b->template_name, sizeof b->template_name, true, err) < 0 ||
      check_id_or_empty("template id", b->template_id, sizeof b->template_id, err) < 0 ||
      check_text("working directory", b->workdir, sizeof b->workdir, true, err) < 0 ||
      check_text("cgroup", b->cgroup, sizeof b->cgroup, true, err) < 0 ||
      check_id_or_empty("snapshot id", b->snapshot_id, sizeof b->snapshot_id, err) < 0 ||
      (memchr(b->created_by, '\0', sizeof b->created_by) ? state_check_created_by(b->created_by, true, err)
                                                         : husk_fail(err, EINVAL, "creator is not terminated")) < 0)
    return -1;
  if (!memchr(b->reason, '\0', sizeof b->reason))
    return husk_fail(err, EINVAL, "reason is not terminated");
  if (!box_state_live(b->state))
    return husk_fail(err, EINVAL, "a new box must be in a live state");
  if (b->memory < 0 || b->pids < 0 || b->cpu_milli < 0 || b->disk < 0 || b->timeout_ms < 0)
    return husk_fail(err, EINVAL, "box limits must be >= 0");
  if (b->created_ms < 0 || b->expires_ms < 0 || b->ended_ms < 0)
    return husk_fail(err, EINVAL, "box times must be >= 0");
  if (b->init_pid < 0 || b->init_start_time > INT64_MAX || b->uid_base < -1 || b->slot < -1)
    return husk_fail(err, EINVAL, "box runtime fields are out of range");
  return 0;
}

/* Under the lock: a tenant's live boxes and their memory limits summed.
 * Summed here rather than with SQL sum(), which fails on int64 overflow:
 * the total saturates at INT64_MAX instead. */
static int live_usage(struct state *st, const char *tenant_id, int64_t *boxes, int64_t *memory,
                      struct husk_err *err) {
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "SELECT memory FROM boxes WHERE tenant_id = ?1 AND state IN " DB_LIVE_STATES,
                 err) < 0)
    return -1;
  int rc = db_text(s, 1, tenant_id);
  if (rc)
    return db_fail(st, err, rc, "cannot bind tenant id");
  int64_t n = 0, sum = 0;
  int r;
  while ((r = db_step_row(st, s, "cannot count boxes", err)) == 1) {
    n++;
    if (__builtin_add_overflow(sum, sqlite3_column_int64(s, 0), &sum))
      sum = INT64_MAX;
  }
  if (r < 0)
    return -1;
  *boxes = n;
  *memory = sum;
  return 0;
}

void state_set_tenant_defaults(struct state *st, int64_t max_boxes, int64_t max_memory) {
  st->default_max_boxes = max_boxes < 0 ? STATE_UNLIMITED : max_boxes;
  st->default_max_memory = max_memory < 0 ? STATE_UNLIMITED : max_memory;
}

/* Under the write lock: refuse a box the tenant's quotas cannot take (an
 * unset quota is the daemon's default). */
static int check_quota(struct state *st, const struct state_box *b, struct husk_err *err) {
  cleanup_stmt sqlite3_stmt *s = NULL;
  /* A tenant being deleted is gone for new boxes. */
  if (db_prepare(st, &s,
                 "SELECT max_boxes, max_memory FROM tenants WHERE id = ?1 AND deleted_ms = 0",
                 err) < 0)
    return -1;
  int rc = db_text(s, 1, b->tenant_id);
  if (rc)
    return db_fail(st, err, rc, "cannot bind tenant id");
  int r = db_step_row(st, s, "cannot read quota", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, ENOENT, "tenant `%s` not found", b->tenant_id);
  int64_t max_boxes = sqlite3_column_int64(s, 0), max_memory = sqlite3_column_int64(s, 1);
  bool dflt_boxes = max_boxes == STATE_UNLIMITED, dflt_memory = max_memory == STATE_UNLIMITED;
  if (dflt_boxes)
    max_boxes = st->default_max_boxes;
  if (dflt_memory)
    max_memory = st->default_max_memory;
  int64_t boxes, memory, want;
  if (live_usage(st, b->tenant_id, &boxes, &memory, err) < 0)
    return -1;
  if (max_boxes != STATE_UNLIMITED && boxes + 1 > max_boxes)
    return husk_fail(err, EDQUOT, "tenant `%s` has %lld of %lld boxes%s", b->tenant_id,
                     (long long)boxes, (long long)max_boxes,
                     dflt_boxes ? " (the daemon's default per tenant)" : "");
  if (max_memory != STATE_UNLIMITED &&
      (__builtin_add_overflow(memory, b->memory, &want) || want > max_memory))
    return husk_fail(err, EDQUOT,
                     "tenant `%s` uses %lld of %lld bytes of memory%s; this box needs %lld more",
                     b->tenant_id, (long long)memory, (long long)max_memory,
                     dflt_memory ? " (the daemon's default per tenant)" : "", (long long)b->memory);
  return 0;
}

int state_box_insert(struct state *st, const struct state_box *box, struct husk_err *err) {
  if (!box)
    return husk_fail(err, EINVAL, "box is missing");
  if (check_box(box, err) < 0)
    return -1;
  char reason[sizeof box->reason];
  text_fit(reason, sizeof reason, box->reason);
  const char *env = box->env_json ? box->env_json : "{}";
  const char *meta = box->metadata_json ? box->metadata_json : "{}";
  int64_t created = box->created_ms ? box->created_ms : state_now_ms();

  cleanup_unlock struct state *locked = db_lock(st);
  if (check_string_object(st, "box environment", env, err) < 0 ||
      check_string_object(st, "box metadata", meta, err) < 0)
    return -1;
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0 || check_quota(st, box, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "INSERT INTO boxes (" BOX_COLUMNS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, "
                 "?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, 0, ?23, '', ?24)",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, box->id)) || (rc = db_text(s, 2, box->tenant_id)) ||
      (rc = db_text(s, 3, box->state)) || (rc = db_text(s, 4, reason)) ||
      (rc = db_text(s, 5, box->template_name)) || (rc = db_int(s, 6, box->memory)) ||
      (rc = db_int(s, 7, box->pids)) || (rc = db_int(s, 8, box->cpu_milli)) ||
      (rc = db_int(s, 9, box->disk)) || (rc = db_int(s, 10, box->timeout_ms)) ||
      (rc = db_text(s, 11, env)) || (rc = db_text(s, 12, meta)) || (rc = db_int(s, 13, created)) ||
      (rc = db_int(s, 14, box->expires_ms)) || (rc = db_int(s, 15, box->ended_ms)) ||
      (rc = db_int(s, 16, box->init_pid)) || (rc = db_int(s, 17, (int64_t)box->init_start_time)) ||
      (rc = db_int(s, 18, box->uid_base)) || (rc = db_int(s, 19, box->slot)) ||
      (rc = db_text(s, 20, box->cgroup)) || (rc = db_text(s, 21, box->template_id)) ||
      (rc = db_text(s, 22, box->workdir)) || (rc = db_text(s, 23, box->snapshot_id)) ||
      (rc = db_text(s, 24, box->created_by)))
    return db_fail(st, err, rc, "cannot bind box");
  if (db_step_done(st, s, "cannot insert box", err) < 0) {
    if (err && err->code == EEXIST)
      husk_fail(err, EEXIST, "box `%s` exists", box->id);
    return -1;
  }
  db_fault_point("box_insert");
  return db_commit(&txn, err);
}

int state_box_get(struct state *st, const char *tenant_id, const char *id, struct state_box *out,
                  struct husk_err *err) {
  if ((tenant_id && check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0) ||
      check_id("box id", id, STATE_BOX_ID_SIZE, err) < 0)
    return -1;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "SELECT " BOX_COLUMNS " FROM boxes"
                 " WHERE id = ?1 AND (?2 IS NULL OR tenant_id = ?2)",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, id)) || (rc = db_text(s, 2, tenant_id)))
    return db_fail(st, err, rc, "cannot bind box id");
  int r = db_step_row(st, s, "cannot read box", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, ENOENT, "box `%s` not found", id);
  return read_box(s, out, err);
}

int box_current_state(struct state *st, const char *tenant_id, const char *id, char *state,
                      size_t size, struct husk_err *err) {
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s, "SELECT state FROM boxes WHERE id = ?1 AND (?2 IS NULL OR tenant_id = ?2)",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, id)) || (rc = db_text(s, 2, tenant_id)))
    return db_fail(st, err, rc, "cannot bind box id");
  int r = db_step_row(st, s, "cannot read box", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, ENOENT, "box `%s` not found", id);
  if (!db_col_text(s, 0, state, size))
    return husk_fail(err, EUCLEAN, "box `%s` has an oversized state", id);
  return 0;
}

/* Under the lock, in a transaction: the box's running processes are
 * "lost" (ended at `ended`, their exit statuses never to be collected). */
static int procs_lost_locked(struct state *st, const char *id, int64_t ended,
                             struct husk_err *err) {
  cleanup_stmt sqlite3_stmt *p = NULL;
  if (db_prepare(st, &p,
                 "UPDATE processes SET state = '" STATE_PROC_LOST "', ended_ms = ?2"
                 " WHERE box_id = ?1 AND state = '" STATE_PROC_RUNNING "'",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(p, 1, id)) || (rc = db_int(p, 2, ended)))
    return db_fail(st, err, rc, "cannot bind box id");
  return db_step_done(st, p, "cannot end the box's processes", err) < 0 ? -1 : 0;
}

int state_box_set_state(struct state *st, const char *id, const char *expect, const char *state,
                        const char *reason, int64_t ended_ms, struct husk_err *err) {
  if (check_id("box id", id, STATE_BOX_ID_SIZE, err) < 0 ||
      (expect && check_state("expected box state", expect, err) < 0) ||
      check_state("box state", state, err) < 0)
    return -1;
  char fitted[sizeof((struct state_box *)0)->reason];
  if (reason)
    text_fit(fitted, sizeof fitted, reason);
  if (ended_ms < 0)
    return husk_fail(err, EINVAL, "ended_ms must be >= 0");
  bool ending = box_state_terminal(state);
  int64_t ended = ending ? (ended_ms ? ended_ms : state_now_ms()) : 0;

  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  char cur[16];
  if (box_current_state(st, NULL, id, cur, sizeof cur, err) < 0)
    return -1;
  if (box_state_terminal(cur))
    return husk_fail(err, ESTALE, "box `%s` is %s and cannot become %s", id, cur, state);
  if (expect && strcmp(cur, expect) != 0)
    return husk_fail(err, ESTALE, "box `%s` is %s, not %s", id, cur, expect);

  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "UPDATE boxes SET state = ?2, reason = coalesce(?3, reason),"
                 " ended_ms = CASE WHEN ?4 > 0 THEN ?4 ELSE ended_ms END WHERE id = ?1",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, id)) || (rc = db_text(s, 2, state)) ||
      (rc = db_text(s, 3, reason ? fitted : NULL)) || (rc = db_int(s, 4, ended)))
    return db_fail(st, err, rc, "cannot bind box state");
  if (db_step_done(st, s, "cannot set box state", err) < 0)
    return -1;
  if (ending) {
    /* The box's pid namespace is gone with it, and so are its processes;
     * their exit statuses were not collected, so they are "lost". */
    db_fault_point("box_end");
    if (procs_lost_locked(st, id, ended, err) < 0)
      return -1;
  }
  return db_commit(&txn, err);
}

int state_box_set_runtime(struct state *st, const char *id, int64_t init_pid,
                          uint64_t init_start_time, int64_t uid_base, int64_t slot,
                          const char *cgroup, struct husk_err *err) {
  if (check_id("box id", id, STATE_BOX_ID_SIZE, err) < 0 ||
      (cgroup &&
       check_text("cgroup", cgroup, sizeof((struct state_box *)0)->cgroup, true, err) < 0))
    return -1;
  if (init_pid < 0 || init_start_time > INT64_MAX || uid_base < -1 || slot < -1)
    return husk_fail(err, EINVAL, "box runtime fields are out of range");
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "UPDATE boxes SET init_pid = ?2, init_start_time = ?3, uid_base = ?4, slot = ?5,"
                 " cgroup = coalesce(?6, cgroup) WHERE id = ?1",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, id)) || (rc = db_int(s, 2, init_pid)) ||
      (rc = db_int(s, 3, (int64_t)init_start_time)) || (rc = db_int(s, 4, uid_base)) ||
      (rc = db_int(s, 5, slot)) || (rc = db_text(s, 6, cgroup)))
    return db_fail(st, err, rc, "cannot bind box runtime");
  int n = db_step_done(st, s, "cannot set box runtime", err);
  if (n < 0)
    return -1;
  if (n == 0)
    return husk_fail(err, ENOENT, "box `%s` not found", id);
  return 0;
}

int state_box_set_expiry(struct state *st, const char *id, int64_t expires_ms,
                         struct husk_err *err) {
  if (check_id("box id", id, STATE_BOX_ID_SIZE, err) < 0)
    return -1;
  if (expires_ms < 0)
    return husk_fail(err, EINVAL, "expires_ms must be >= 0");
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  char cur[16];
  if (box_current_state(st, NULL, id, cur, sizeof cur, err) < 0)
    return -1;
  if (!box_state_live(cur))
    return husk_fail(err, ESTALE, "box `%s` is %s", id, cur);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s, "UPDATE boxes SET expires_ms = ?2 WHERE id = ?1", err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, id)) || (rc = db_int(s, 2, expires_ms)))
    return db_fail(st, err, rc, "cannot bind box expiry");
  if (db_step_done(st, s, "cannot set box expiry", err) < 0)
    return -1;
  return db_commit(&txn, err);
}

int state_box_set_paused(struct state *st, const char *id, bool paused, int64_t now_ms,
                         int64_t expires_ms, struct husk_err *err) {
  if (check_id("box id", id, STATE_BOX_ID_SIZE, err) < 0)
    return -1;
  if (now_ms <= 0 || expires_ms < 0)
    return husk_fail(err, EINVAL, "pause times must be > 0");
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  char cur[16];
  if (box_current_state(st, NULL, id, cur, sizeof cur, err) < 0)
    return -1;
  const char *from = paused ? STATE_BOX_RUNNING : STATE_BOX_PAUSED;
  if (strcmp(cur, from) != 0)
    return husk_fail(err, ESTALE, "box `%s` is %s", id, cur);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s, "UPDATE boxes SET state = ?2, paused_ms = ?3, expires_ms = ?4 WHERE id = ?1",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, id)) ||
      (rc = db_text(s, 2, paused ? STATE_BOX_PAUSED : STATE_BOX_RUNNING)) ||
      (rc = db_int(s, 3, paused ? now_ms : 0)) || (rc = db_int(s, 4, expires_ms)))
    return db_fail(st, err, rc, "cannot bind box pause");
  if (db_step_done(st, s, "cannot record the box's pause", err) < 0)
    return -1;
  db_fault_point("box_pause");
  return db_commit(&txn, err);
}

int state_box_pause_to_disk(struct state *st, const char *id, int64_t now_ms,
                            const char *snapshot_id, struct husk_err *err) {
  if (check_id("box id", id, STATE_BOX_ID_SIZE, err) < 0 ||
      check_id("snapshot id", snapshot_id, sizeof((struct state_box *)0)->paused_snapshot, err) < 0)
    return -1;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  char cur[16];
  if (box_current_state(st, NULL, id, cur, sizeof cur, err) < 0)
    return -1;
  if (strcmp(cur, STATE_BOX_RUNNING) != 0 && strcmp(cur, STATE_BOX_PAUSED) != 0)
    return husk_fail(err, ESTALE, "box `%s` is %s", id, cur);
  cleanup_stmt sqlite3_stmt *s = NULL;
  /* Paused in memory before: it has been paused since then. */
  if (db_prepare(st, &s,
                 "UPDATE boxes SET state = 'paused', paused_snapshot = ?2,"
                 " paused_ms = CASE WHEN paused_ms > 0 THEN paused_ms ELSE ?3 END,"
                 " init_pid = 0, init_start_time = 0, uid_base = -1, slot = -1"
                 " WHERE id = ?1 AND paused_snapshot = ''",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, id)) || (rc = db_text(s, 2, snapshot_id)) || (rc = db_int(s, 3, now_ms)))
    return db_fail(st, err, rc, "cannot bind box pause");
  if (db_step_done(st, s, "cannot record the box's pause", err) < 0)
    return -1;
  if (sqlite3_changes(st->db) != 1)
    return husk_fail(err, ESTALE, "box `%s` is paused to disk already", id);
  /* Its processes go with its memory. */
  if (procs_lost_locked(st, id, now_ms, err) < 0)
    return -1;
  db_fault_point("box_pause_disk");
  return db_commit(&txn, err);
}

int state_box_resume_from_disk(struct state *st, const char *id, const char *snapshot_id,
                               int64_t expires_ms, int64_t init_pid, uint64_t init_start_time,
                               int64_t uid_base, int64_t slot, struct husk_err *err) {
  if (check_id("box id", id, STATE_BOX_ID_SIZE, err) < 0)
    return -1;
  if (expires_ms < 0 || init_pid <= 0 || init_start_time > INT64_MAX || uid_base < 0 || slot < 0)
    return husk_fail(err, EINVAL, "box runtime fields are out of range");
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "UPDATE boxes SET state = 'running', paused_snapshot = '', paused_ms = 0,"
                 " expires_ms = ?3, init_pid = ?4, init_start_time = ?5, uid_base = ?6, slot = ?7"
                 " WHERE id = ?1 AND state = 'paused' AND paused_snapshot = ?2",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, id)) || (rc = db_text(s, 2, snapshot_id)) ||
      (rc = db_int(s, 3, expires_ms)) || (rc = db_int(s, 4, init_pid)) ||
      (rc = db_int(s, 5, (int64_t)init_start_time)) || (rc = db_int(s, 6, uid_base)) ||
      (rc = db_int(s, 7, slot)))
    return db_fail(st, err, rc, "cannot bind box resume");
  if (db_step_done(st, s, "cannot record the box's resume", err) < 0)
    return -1;
  if (sqlite3_changes(st->db) != 1)
    return husk_fail(err, ESTALE, "box `%s` is no longer paused to disk", id);
  db_fault_point("box_resume_disk");
  return db_commit(&txn, err);
}

int state_box_delete(struct state *st, const char *tenant_id, const char *id,
                     struct husk_err *err) {
  if ((tenant_id && check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0) ||
      check_id("box id", id, STATE_BOX_ID_SIZE, err) < 0)
    return -1;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  char cur[16];
  if (box_current_state(st, tenant_id, id, cur, sizeof cur, err) < 0)
    return -1;
  if (!box_state_terminal(cur))
    return husk_fail(err, EBUSY, "box `%s` is %s: stop it before deleting its record", id, cur);
  cleanup_stmt sqlite3_stmt *s = NULL;
  /* ON DELETE CASCADE removes its processes in the same statement. */
  if (db_prepare(st, &s, "DELETE FROM boxes WHERE id = ?1", err) < 0)
    return -1;
  int rc = db_text(s, 1, id);
  if (rc)
    return db_fail(st, err, rc, "cannot bind box id");
  if (db_step_done(st, s, "cannot delete box", err) < 0)
    return -1;
  /* Its volume mounts (no foreign key: a mount row is written while the
   * box is being created, and only read joined with its box). */
  cleanup_stmt sqlite3_stmt *v = NULL;
  if (db_prepare(st, &v, "DELETE FROM box_volumes WHERE box_id = ?1", err) < 0)
    return -1;
  if ((rc = db_text(v, 1, id)))
    return db_fail(st, err, rc, "cannot bind box id");
  if (db_step_done(st, v, "cannot delete the box's volume mounts", err) < 0)
    return -1;
  /* Its previews (their access log: ON DELETE CASCADE). */
  cleanup_stmt sqlite3_stmt *pv = NULL;
  if (db_prepare(st, &pv, "DELETE FROM previews WHERE box_id = ?1", err) < 0)
    return -1;
  if ((rc = db_text(pv, 1, id)))
    return db_fail(st, err, rc, "cannot bind box id");
  if (db_step_done(st, pv, "cannot delete the box's previews", err) < 0)
    return -1;
  return db_commit(&txn, err);
}

/* ---- listing ---- */

/* "<created_ms>.<id>": the sort key of the last row of a page.  Opaque to
 * callers, but parsed strictly: it comes back from the network. */
static int parse_cursor(const char *c, int64_t *created, char *id, size_t size,
                        struct husk_err *err) {
  size_t n = strnlen(c, STATE_CURSOR_SIZE);
  const char *dot = memchr(c, '.', n);
  if (n == STATE_CURSOR_SIZE || !dot || dot == c || dot - c > 19)
    return husk_fail(err, EINVAL, "invalid cursor");
  int64_t v = 0;
  for (const char *p = c; p < dot; p++) {
    if (*p < '0' || *p > '9' || __builtin_mul_overflow(v, 10, &v) ||
        __builtin_add_overflow(v, *p - '0', &v))
      return husk_fail(err, EINVAL, "invalid cursor");
  }
  if (check_id("cursor", dot + 1, size, err) < 0)
    return husk_fail(err, EINVAL, "invalid cursor");
  *created = v;
  snprintf(id, size, "%s", dot + 1);
  return 0;
}

static int check_filter(const struct state_box_filter *f, struct husk_err *err) {
  if (!f)
    return husk_fail(err, EINVAL, "box filter is missing");
  if (f->tenant_id && check_id("tenant id", f->tenant_id, STATE_TENANT_ID_SIZE, err) < 0)
    return -1;
  if (f->state && strcmp(f->state, STATE_BOX_LIVE) != 0 &&
      check_state("state filter", f->state, err) < 0)
    return -1;
  if (f->created_by && state_check_created_by(f->created_by, false, err) < 0)
    return -1;
  if (f->nmeta > STATE_META_FILTERS_MAX)
    return husk_fail(err, EINVAL, "at most %d metadata filters", STATE_META_FILTERS_MAX);
  if (f->nmeta > 0 && (!f->meta_keys || !f->meta_values))
    return husk_fail(err, EINVAL, "metadata filter is missing");
  for (size_t i = 0; i < f->nmeta; i++)
    if (check_text("metadata filter key", f->meta_keys[i], STATE_META_TEXT_MAX + 1, false, err) <
            0 ||
        check_text("metadata filter value", f->meta_values[i], STATE_META_TEXT_MAX + 1, true, err) <
            0)
      return -1;
  return 0;
}

/* The SQL text is assembled from constant fragments only, chosen by which
 * filters are set (so each query can use its index); every value is bound. */
static int build_list_sql(const struct state_box_filter *f, bool has_cursor, char *sql, size_t size,
                          struct husk_err *err) {
  size_t n = 0;
#define ADD(...)                                                                                   \
  do {                                                                                             \
    int w_ = snprintf(sql + n, size - n, __VA_ARGS__);                                             \
    if (w_ < 0 || (size_t)w_ >= size - n)                                                          \
      return husk_fail(err, E2BIG, "box listing query too long");                                  \
    n += (size_t)w_;                                                                               \
  } while (0)
  ADD("SELECT " BOX_COLUMNS " FROM boxes WHERE 1");
  if (f->tenant_id)
    ADD(" AND tenant_id = :tenant");
  if (f->state && !strcmp(f->state, STATE_BOX_LIVE))
    ADD(" AND state IN " DB_LIVE_STATES);
  else if (f->state)
    ADD(" AND state = :state");
  if (f->created_by)
    ADD(" AND created_by = :creator");
  for (size_t i = 0; i < f->nmeta; i++)
    ADD(" AND EXISTS (SELECT 1 FROM json_each(boxes.metadata_json) AS m"
        " WHERE m.key = :mk%zu AND m.type = 'text' AND m.value = :mv%zu)",
        i, i);
  if (has_cursor)
    ADD(" AND (created_ms, id) > (:cms, :cid)");
  ADD(" ORDER BY created_ms, id LIMIT :limit");
#undef ADD
  return 0;
}

int state_box_list(struct state *st, const struct state_box_filter *filter,
                   int (*cb)(void *ctx, const struct state_box *b), void *ctx, char *next_cursor,
                   size_t next_size, struct husk_err *err) {
  int limit;
  if (check_filter(filter, err) < 0 || db_check_limit(filter->limit, &limit, err) < 0)
    return -1;
  if (next_cursor && next_size < STATE_CURSOR_SIZE)
    return husk_fail(err, EINVAL, "cursor buffer too small");
  if (next_cursor)
    next_cursor[0] = '\0';
  bool has_cursor = filter->cursor && filter->cursor[0];
  int64_t cur_created = 0;
  char cur_id[STATE_BOX_ID_SIZE] = "";
  if (has_cursor && parse_cursor(filter->cursor, &cur_created, cur_id, sizeof cur_id, err) < 0)
    return -1;
  char sql[4096];
  if (build_list_sql(filter, has_cursor, sql, sizeof sql, err) < 0)
    return -1;

  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct state_box),
                                      .free_item = box_free_item};
  {
    cleanup_unlock struct state *locked = db_lock(st);
    cleanup_stmt sqlite3_stmt *s = NULL;
    if (db_prepare(st, &s, sql, err) < 0)
      return -1;
    int rc = SQLITE_OK;
    if (filter->tenant_id)
      rc = db_text_named(s, ":tenant", filter->tenant_id);
    if (!rc && filter->state && strcmp(filter->state, STATE_BOX_LIVE) != 0)
      rc = db_text_named(s, ":state", filter->state);
    if (!rc && filter->created_by)
      rc = db_text_named(s, ":creator", filter->created_by);
    for (size_t i = 0; !rc && i < filter->nmeta; i++) {
      char k[24], v[24];
      snprintf(k, sizeof k, ":mk%zu", i);
      snprintf(v, sizeof v, ":mv%zu", i);
      if (!(rc = db_text_named(s, k, filter->meta_keys[i])))
        rc = db_text_named(s, v, filter->meta_values[i]);
    }
    if (!rc && has_cursor && !(rc = db_int_named(s, ":cms", cur_created)))
      rc = db_text_named(s, ":cid", cur_id);
    if (!rc) /* one more than asked: whether a next page exists */
      rc = db_int_named(s, ":limit", (int64_t)limit + 1);
    if (rc)
      return db_fail(st, err, rc, "cannot bind box filter");
    if (db_rows_fill(st, s, &rows, read_box, "cannot list boxes", err) < 0)
      return -1;
  }
  size_t shown = rows.n;
  if (rows.n > (size_t)limit) {
    shown = (size_t)limit;
    const struct state_box *last = db_rows_at(&rows, shown - 1);
    if (next_cursor)
      snprintf(next_cursor, next_size, "%lld.%s", (long long)last->created_ms, last->id);
  }
  return db_rows_each(&rows, shown, cb, ctx);
}

int state_box_count_live(struct state *st, const char *tenant_id, int64_t *boxes, int64_t *memory,
                         struct husk_err *err) {
  if (check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0)
    return -1;
  int64_t n, m;
  cleanup_unlock struct state *locked = db_lock(st);
  if (live_usage(st, tenant_id, &n, &m, err) < 0)
    return -1;
  if (boxes)
    *boxes = n;
  if (memory)
    *memory = m;
  return 0;
}
