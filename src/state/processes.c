/* Background processes of long-lived boxes, kept so that a restarted daemon
 * still knows what runs in each box and how finished ones ended.
 *
 * pids are per box and get reused, so rows are ordered by `seq` and only a
 * running row is unique per (box, pid) (a partial UNIQUE index): "process
 * 42 of box b" means the newest row with that pid. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "state/db.h"
#include "util/cleanup.h"

#define PROC_COLUMNS                                                                               \
  "p.box_id, p.pid, p.cmd_json, p.state, p.exit_code, p.signal, p.started_ms, p.ended_ms, p.tag"
/* Read after PROC_COLUMNS: the exec, the limits and the one that ended it,
 * and who started it. */
#define PROC_LIMIT_COLUMNS ", p.exec_id, p.timeout_ms, p.output_limit, p.limit_hit, p.created_by"

/* Highest signal number Linux can deliver (SIGRTMAX is 64; leave room). */
#define PROC_SIGNAL_MAX 127

void state_proc_free(struct state_proc *p) {
  if (!p)
    return;
  free(p->cmd_json);
  p->cmd_json = NULL;
}

static void proc_free_item(void *item) { state_proc_free(item); }

static int read_proc(sqlite3_stmt *s, void *row, struct husk_err *err) {
  struct state_proc *p = row;
  memset(p, 0, sizeof *p);
  bool ok = db_col_text(s, 0, p->box_id, sizeof p->box_id);
  p->pid = sqlite3_column_int64(s, 1);
  p->cmd_json = db_col_strdup(s, 2);
  ok &= db_col_text(s, 3, p->state, sizeof p->state);
  p->exit_code = sqlite3_column_int64(s, 4);
  p->signal = sqlite3_column_int64(s, 5);
  p->started_ms = sqlite3_column_int64(s, 6);
  p->ended_ms = sqlite3_column_int64(s, 7);
  ok &= db_col_text(s, 8, p->tag, sizeof p->tag);
  p->exec_id = sqlite3_column_int64(s, 9);
  p->timeout_ms = sqlite3_column_int64(s, 10);
  p->output_limit = sqlite3_column_int64(s, 11);
  ok &= db_col_text(s, 12, p->limit_hit, sizeof p->limit_hit);
  ok &= db_col_text(s, 13, p->created_by, sizeof p->created_by);
  if (!p->cmd_json)
    return husk_error(err, ENOMEM, "cannot read process");
  if (!ok) {
    state_proc_free(p);
    return husk_fail(err, EUCLEAN, "process row has an oversized value");
  }
  return 0;
}

int state_proc_insert(struct state *st, const struct state_proc *p, struct husk_err *err) {
  if (!p)
    return husk_fail(err, EINVAL, "process is missing");
  if (check_id("box id", p->box_id, sizeof p->box_id, err) < 0 ||
      check_json("process command", p->cmd_json, err) < 0 ||
      check_text("process tag", p->tag, sizeof p->tag, true, err) < 0)
    return -1;
  if (!memchr(p->created_by, '\0', sizeof p->created_by))
    return husk_fail(err, EINVAL, "creator is not terminated");
  if (state_check_created_by(p->created_by, true, err) < 0)
    return -1;
  if (p->pid <= 0 || p->started_ms < 0 || p->exec_id < 0)
    return husk_fail(err, EINVAL, "process pid must be > 0, its start time and exec id >= 0");
  int64_t started = p->started_ms ? p->started_ms : state_now_ms();

  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  char box_state[16];
  if (box_current_state(st, NULL, p->box_id, box_state, sizeof box_state, err) < 0)
    return -1;
  if (!box_state_live(box_state))
    return husk_fail(err, ESTALE, "box `%s` is %s", p->box_id, box_state);
  if (p->timeout_ms < 0 || p->output_limit < 0)
    return husk_fail(err, EINVAL, "process limits must be >= 0");
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "INSERT INTO processes (box_id, pid, cmd_json, state, "
                 "started_ms, tag, exec_id, timeout_ms, output_limit, created_by)"
                 " VALUES (?1, ?2, ?3, '" STATE_PROC_RUNNING "', ?4, ?5, ?6, ?7, ?8, ?9)",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, p->box_id)) || (rc = db_int(s, 2, p->pid)) ||
      (rc = db_text(s, 3, p->cmd_json)) || (rc = db_int(s, 4, started)) ||
      (rc = db_text(s, 5, p->tag)) || (rc = db_int(s, 6, p->exec_id)) ||
      (rc = db_int(s, 7, p->timeout_ms)) || (rc = db_int(s, 8, p->output_limit)) ||
      (rc = db_text(s, 9, p->created_by)))
    return db_fail(st, err, rc, "cannot bind process");
  if (db_step_done(st, s, "cannot insert process", err) < 0) {
    if (err && err->code == EEXIST)
      husk_fail(err, EEXIST, "box `%s` already has a running process %lld", p->box_id,
                (long long)p->pid);
    else if (err && err->code == EINVAL)
      husk_fail(err, EINVAL, "process command must be a JSON array");
    return -1;
  }
  return db_commit(&txn, err);
}

static int proc_finish(struct state *st, const char *box_id, int64_t pid, int64_t exec_id,
                       const char *state, int64_t exit_code, int64_t signal, int64_t ended_ms,
                       struct husk_err *err) {
  if (check_id("box id", box_id, STATE_BOX_ID_SIZE, err) < 0)
    return -1;
  if (pid <= 0 || ended_ms < 0)
    return husk_fail(err, EINVAL, "process pid must be > 0 and its end time >= 0");
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "UPDATE processes SET state = ?3, exit_code = ?4, signal = ?5, "
                 "ended_ms = ?6"
                 " WHERE box_id = ?1 AND pid = ?2 AND state = '" STATE_PROC_RUNNING "'"
                 " AND (?7 = 0 OR exec_id = 0 OR exec_id = ?7)",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, box_id)) || (rc = db_int(s, 2, pid)) || (rc = db_text(s, 3, state)) ||
      (rc = db_int(s, 4, exit_code)) || (rc = db_int(s, 5, signal)) ||
      (rc = db_int(s, 6, ended_ms ? ended_ms : state_now_ms())) || (rc = db_int(s, 7, exec_id)))
    return db_fail(st, err, rc, "cannot bind process");
  int n = db_step_done(st, s, "cannot record process end", err);
  if (n < 0)
    return -1;
  if (n == 0)
    return husk_fail(err, ENOENT, "box `%s` has no running process %lld", box_id, (long long)pid);
  return 0;
}

int state_proc_set_exit(struct state *st, const char *box_id, int64_t pid, int64_t exit_code,
                        int64_t signal, int64_t ended_ms, struct husk_err *err) {
  return state_proc_set_exit_of(st, box_id, pid, 0, exit_code, signal, ended_ms, err);
}

int state_proc_set_exit_of(struct state *st, const char *box_id, int64_t pid, int64_t exec_id,
                           int64_t exit_code, int64_t signal, int64_t ended_ms,
                           struct husk_err *err) {
  if (exec_id < 0)
    return husk_fail(err, EINVAL, "exec id must be >= 0");
  if (signal < 0 || signal > PROC_SIGNAL_MAX)
    return husk_fail(err, EINVAL, "signal must be between 0 and %d", PROC_SIGNAL_MAX);
  if (signal == 0 && (exit_code < 0 || exit_code > 255))
    return husk_fail(err, EINVAL, "exit code must be between 0 and 255");
  return proc_finish(st, box_id, pid, exec_id, STATE_PROC_EXITED, signal ? -1 : exit_code, signal,
                     ended_ms, err);
}

int state_proc_set_lost(struct state *st, const char *box_id, int64_t pid, int64_t ended_ms,
                        struct husk_err *err) {
  return proc_finish(st, box_id, pid, 0, STATE_PROC_LOST, -1, 0, ended_ms, err);
}

int state_proc_get(struct state *st, const char *tenant_id, const char *box_id, int64_t pid,
                   struct state_proc *out, struct husk_err *err) {
  if ((tenant_id && check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0) ||
      check_id("box id", box_id, STATE_BOX_ID_SIZE, err) < 0)
    return -1;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "SELECT " PROC_COLUMNS PROC_LIMIT_COLUMNS
                 " FROM processes p JOIN boxes b ON b.id = p.box_id"
                 " WHERE p.box_id = ?1 AND p.pid = ?2 AND (?3 IS NULL OR b.tenant_id = ?3)"
                 " ORDER BY p.seq DESC LIMIT 1",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, box_id)) || (rc = db_int(s, 2, pid)) || (rc = db_text(s, 3, tenant_id)))
    return db_fail(st, err, rc, "cannot bind process");
  int r = db_step_row(st, s, "cannot read process", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, ENOENT, "box `%s` has no process %lld", box_id, (long long)pid);
  return read_proc(s, out, err);
}

int state_proc_list(struct state *st, const char *tenant_id, const char *box_id, int running_only,
                    int limit, int (*cb)(void *ctx, const struct state_proc *p), void *ctx,
                    struct husk_err *err) {
  if ((tenant_id && check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0) ||
      check_id("box id", box_id, STATE_BOX_ID_SIZE, err) < 0 ||
      db_check_limit(limit, &limit, err) < 0)
    return -1;
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct state_proc),
                                      .free_item = proc_free_item};
  {
    cleanup_unlock struct state *locked = db_lock(st);
    /* Another tenant's box is ENOENT here too, not an empty list. */
    char box_state[16];
    if (box_current_state(st, tenant_id, box_id, box_state, sizeof box_state, err) < 0)
      return -1;
    if (db_rows_select_locked(st, &rows,
                              "SELECT " PROC_COLUMNS PROC_LIMIT_COLUMNS
                              " FROM processes p WHERE p.box_id = ?1"
                              " AND (?2 = 0 OR p.state = '" STATE_PROC_RUNNING "')"
                              " ORDER BY p.seq DESC LIMIT ?3",
                              DB_ARGS(DB_TEXT(box_id), DB_INT(running_only ? 1 : 0), DB_INT(limit)),
                              read_proc, "cannot list processes", err) < 0)
      return -1;
  }
  return db_rows_each(&rows, rows.n, cb, ctx);
}

static int read_proc_paged(sqlite3_stmt *s, void *row, struct husk_err *err) {
  if (read_proc(s, row, err) < 0)
    return -1;
  struct state_proc *p = row;
  p->seq = sqlite3_column_int64(s, 14);
  p->cmd_cut = sqlite3_column_int(s, 15) != 0;
  return 0;
}

int state_proc_page(struct state *st, const char *tenant_id, const char *box_id, int64_t before,
                    int limit, size_t cmd_max, int (*cb)(void *ctx, const struct state_proc *p),
                    void *ctx, struct husk_err *err) {
  if ((tenant_id && check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0) ||
      check_id("box id", box_id, STATE_BOX_ID_SIZE, err) < 0)
    return -1;
  if (limit < 1 || limit > STATE_LIST_MAX || before < 0 || cmd_max > INT32_MAX)
    return husk_fail(err, EINVAL, "limit must be between 1 and %d", STATE_LIST_MAX);
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct state_proc),
                                      .free_item = proc_free_item};
  {
    cleanup_unlock struct state *locked = db_lock(st);
    char box_state[16];
    if (box_current_state(st, tenant_id, box_id, box_state, sizeof box_state, err) < 0)
      return -1;
    cleanup_stmt sqlite3_stmt *s = NULL;
    /* The cut is made by SQLite: a long argv is never copied out whole. */
    if (db_prepare(st, &s,
                   "SELECT p.box_id, p.pid,"
                   " CASE WHEN length(CAST(p.cmd_json AS BLOB)) <= ?4 THEN p.cmd_json"
                   " ELSE json_array(substr(json_extract(p.cmd_json, '$[0]'), 1, ?5)) END,"
                   " p.state, p.exit_code, p.signal, p.started_ms, p.ended_ms, p.tag" PROC_LIMIT_COLUMNS
                   ", p.seq, length(CAST(p.cmd_json AS BLOB)) > ?4"
                   " FROM processes p WHERE p.box_id = ?1 AND (?2 = 0 OR p.seq < ?2)"
                   " ORDER BY p.seq DESC LIMIT ?3",
                   err) < 0)
      return -1;
    int rc;
    if ((rc = db_text(s, 1, box_id)) || (rc = db_int(s, 2, before)) || (rc = db_int(s, 3, limit)) ||
        (rc = db_int(s, 4, (int64_t)cmd_max)) || (rc = db_int(s, 5, STATE_PROC_CMD_CUT)))
      return db_fail(st, err, rc, "cannot bind process filter");
    if (db_rows_fill(st, s, &rows, read_proc_paged, "cannot list processes", err) < 0)
      return -1;
  }
  for (size_t i = 0; i < rows.n; i++) {
    int r = cb(ctx, db_rows_at(&rows, i));
    if (r != 0)
      return db_cb_verdict(r);
  }
  return 0;
}

int state_proc_set_limit_hit(struct state *st, const char *box_id, int64_t pid, int64_t exec_id,
                             const char *limit, struct husk_err *err) {
  if (check_id("box id", box_id, STATE_BOX_ID_SIZE, err) < 0)
    return -1;
  if (pid <= 0 || exec_id < 0)
    return husk_fail(err, EINVAL, "process pid must be > 0 and its exec id >= 0");
  if (!limit || (strcmp(limit, STATE_PROC_LIMIT_TIMEOUT) && strcmp(limit, STATE_PROC_LIMIT_OUTPUT)))
    return husk_fail(err, EINVAL, "unknown process limit `%s`", limit ? limit : "");
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *s = NULL;
  /* Every running row that matches counts as a change, also one whose
   * limit was recorded first and is kept. */
  if (db_prepare(st, &s,
                 "UPDATE processes SET limit_hit = CASE WHEN limit_hit = '' THEN ?4"
                 " ELSE limit_hit END"
                 " WHERE box_id = ?1 AND pid = ?2 AND state = '" STATE_PROC_RUNNING "'"
                 " AND (?3 = 0 OR exec_id = 0 OR exec_id = ?3)",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, box_id)) || (rc = db_int(s, 2, pid)) || (rc = db_int(s, 3, exec_id)) ||
      (rc = db_text(s, 4, limit)))
    return db_fail(st, err, rc, "cannot bind process");
  int n = db_step_done(st, s, "cannot record a process's limit", err);
  if (n < 0)
    return -1;
  if (n == 0)
    return husk_fail(err, ENOENT, "box `%s` has no running process %lld", box_id, (long long)pid);
  return 0;
}
