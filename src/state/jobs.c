/* MCP jobs (see state.h): long tool calls picked up by later calls. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "state/db.h"
#include "util/cleanup.h"

#define JOB_COLUMNS                                                                               \
  "id, tenant_id, box_id, pid, kind, ephemeral, state, result_json, created_ms, ended_ms, "    \
  "created_by"

void state_job_free(struct state_job *job) {
  if (!job)
    return;
  free(job->result_json);
  job->result_json = NULL;
}

static bool job_state_known(const char *s) {
  return !strcmp(s, STATE_JOB_RUNNING) || !strcmp(s, STATE_JOB_DONE) ||
         !strcmp(s, STATE_JOB_CANCELLED);
}

int state_job_insert(struct state *st, const struct state_job *j, struct husk_err *err) {
  if (!j)
    return husk_fail(err, EINVAL, "job is missing");
  if (check_id("job id", j->id, sizeof j->id, err) < 0 ||
      check_id("tenant id", j->tenant_id, sizeof j->tenant_id, err) < 0 ||
      check_id("box id", j->box_id, sizeof j->box_id, err) < 0 ||
      check_id("job kind", j->kind, sizeof j->kind, err) < 0)
    return -1;
  if (!memchr(j->created_by, '\0', sizeof j->created_by))
    return husk_fail(err, EINVAL, "creator is not terminated");
  if (state_check_created_by(j->created_by, true, err) < 0)
    return -1;
  if (j->pid <= 0 || (j->ephemeral != 0 && j->ephemeral != 1))
    return husk_fail(err, EINVAL, "job pid must be > 0 and ephemeral 0 or 1");
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "INSERT INTO jobs (id, tenant_id, box_id, pid, kind, ephemeral, state, created_ms,"
                 " created_by) VALUES (?1, ?2, ?3, ?4, ?5, ?6, '" STATE_JOB_RUNNING "', ?7, ?8)",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, j->id)) || (rc = db_text(s, 2, j->tenant_id)) ||
      (rc = db_text(s, 3, j->box_id)) || (rc = db_int(s, 4, j->pid)) ||
      (rc = db_text(s, 5, j->kind)) || (rc = db_int(s, 6, j->ephemeral)) ||
      (rc = db_int(s, 7, j->created_ms ? j->created_ms : state_now_ms())) ||
      (rc = db_text(s, 8, j->created_by)))
    return db_fail(st, err, rc, "cannot bind job");
  if (db_step_done(st, s, "cannot insert job", err) < 0)
    return -1;
  return 0;
}

int state_job_get(struct state *st, const char *tenant_id, const char *id, struct state_job *out,
                  struct husk_err *err) {
  if (!tenant_id || check_id("job id", id, STATE_JOB_ID_SIZE, err) < 0)
    return husk_fail(err, ENOENT, "no such job");
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s, "SELECT " JOB_COLUMNS " FROM jobs WHERE id = ?1 AND tenant_id = ?2",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, id)) || (rc = db_text(s, 2, tenant_id)))
    return db_fail(st, err, rc, "cannot bind job id");
  int r = db_step_row(st, s, "cannot read job", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, ENOENT, "no such job");
  memset(out, 0, sizeof *out);
  bool ok = db_col_text(s, 0, out->id, sizeof out->id) &&
            db_col_text(s, 1, out->tenant_id, sizeof out->tenant_id) &&
            db_col_text(s, 2, out->box_id, sizeof out->box_id) &&
            db_col_text(s, 4, out->kind, sizeof out->kind) &&
            db_col_text(s, 6, out->state, sizeof out->state) &&
            db_col_text(s, 10, out->created_by, sizeof out->created_by);
  out->pid = sqlite3_column_int64(s, 3);
  out->ephemeral = (int)sqlite3_column_int64(s, 5);
  if (sqlite3_column_type(s, 7) != SQLITE_NULL && !(out->result_json = db_col_strdup(s, 7)))
    return husk_error(err, ENOMEM, "cannot read job");
  out->created_ms = sqlite3_column_int64(s, 8);
  out->ended_ms = sqlite3_column_int64(s, 9);
  if (!ok || !job_state_known(out->state)) {
    state_job_free(out);
    return husk_fail(err, EUCLEAN, "job row has an invalid value");
  }
  return 0;
}

int state_job_end(struct state *st, const char *tenant_id, const char *id, const char *state,
                  const char *result_json, struct husk_err *err) {
  if (!tenant_id || check_id("job id", id, STATE_JOB_ID_SIZE, err) < 0)
    return husk_fail(err, ENOENT, "no such job");
  if (!state || !job_state_known(state) || !strcmp(state, STATE_JOB_RUNNING))
    return husk_fail(err, EINVAL, "a job ends done or cancelled");
  if (result_json && strlen(result_json) > STATE_JOB_RESULT_MAX)
    return husk_fail(err, EINVAL, "job result is too large");
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "UPDATE jobs SET state = ?3, result_json = ?4, ended_ms = ?5"
                 " WHERE id = ?1 AND tenant_id = ?2 AND state = '" STATE_JOB_RUNNING "'",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, id)) || (rc = db_text(s, 2, tenant_id)) || (rc = db_text(s, 3, state)) ||
      (rc = db_text(s, 4, result_json)) || (rc = db_int(s, 5, state_now_ms())))
    return db_fail(st, err, rc, "cannot bind job");
  int n = db_step_done(st, s, "cannot end job", err);
  if (n < 0)
    return -1;
  if (n == 0)
    return husk_fail(err, ESTALE, "job `%s` has already ended", id);
  return 0;
}
