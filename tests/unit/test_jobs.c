/* The jobs table of the state plane (MCP jobs): owner scoping, the
 * running -> done/cancelled compare-and-set, bounded results, and a job
 * that outlives a reopen of the database. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "state/state.h"
#include "unit.h"

static char dir[64], path[128];

static struct state *open_db(void) {
  struct state *st = NULL;
  struct husk_err err;
  if (state_open(&st, path, &err) < 0) {
    printf("# state_open: %s\n", err.msg);
    exit(2);
  }
  return st;
}

static struct state_job job_of(const char *tenant, const char *id) {
  struct state_job j;
  memset(&j, 0, sizeof j);
  snprintf(j.id, sizeof j.id, "%s", id);
  snprintf(j.tenant_id, sizeof j.tenant_id, "%s", tenant);
  snprintf(j.box_id, sizeof j.box_id, "b_000000000000000000000001");
  snprintf(j.kind, sizeof j.kind, "exec");
  j.pid = 42;
  return j;
}

TEST(jobs_are_scoped_and_end_once) {
  struct husk_err err;
  struct state *st = open_db();
  struct state_tenant a, b;
  CHECK(state_tenant_create(st, "a", -1, -1, &a, &err) == 0);
  CHECK(state_tenant_create(st, "b", -1, -1, &b, &err) == 0);
  struct state_job j = job_of(a.id, "j_000000000000000000000001");
  CHECK(state_job_insert(st, &j, &err) == 0);
  CHECK(state_job_insert(st, &j, &err) < 0 && err.code == EEXIST);
  struct state_job bad = job_of("t_nobody", "j_000000000000000000000002");
  CHECK(state_job_insert(st, &bad, &err) < 0);
  bad = job_of(a.id, "j_bad id");
  CHECK(state_job_insert(st, &bad, &err) < 0 && err.code == EINVAL);
  bad = job_of(a.id, "j_000000000000000000000003");
  bad.ephemeral = 2;
  CHECK(state_job_insert(st, &bad, &err) < 0 && err.code == EINVAL);

  struct state_job got;
  CHECK(state_job_get(st, a.id, j.id, &got, &err) == 0);
  CHECK_STR(got.state, STATE_JOB_RUNNING);
  CHECK(got.pid == 42 && got.result_json == NULL && got.created_ms > 0);
  state_job_free(&got);
  /* Another tenant's job does not exist for it. */
  CHECK(state_job_get(st, b.id, j.id, &got, &err) < 0 && err.code == ENOENT);
  CHECK(state_job_end(st, b.id, j.id, STATE_JOB_DONE, "{}", &err) < 0 && err.code == ESTALE);
  CHECK(state_job_end(st, a.id, j.id, STATE_JOB_RUNNING, NULL, &err) < 0 && err.code == EINVAL);
  CHECK(state_job_end(st, a.id, j.id, STATE_JOB_DONE, "not json", &err) < 0);
  char *big = malloc(STATE_JOB_RESULT_MAX + 16);
  memset(big, ' ', STATE_JOB_RESULT_MAX + 8);
  memcpy(big, "{}", 2);
  big[STATE_JOB_RESULT_MAX + 8] = '\0';
  CHECK(state_job_end(st, a.id, j.id, STATE_JOB_DONE, big, &err) < 0 && err.code == EINVAL);
  free(big);
  CHECK(state_job_end(st, a.id, j.id, STATE_JOB_DONE, "{\"exit_code\":0}", &err) == 0);
  /* Ends once: a second collector learns it was first. */
  CHECK(state_job_end(st, a.id, j.id, STATE_JOB_CANCELLED, NULL, &err) < 0 && err.code == ESTALE);
  state_close(st);

  /* The result is there after a reopen (a daemon restart). */
  st = open_db();
  CHECK(state_job_get(st, a.id, j.id, &got, &err) == 0);
  CHECK_STR(got.state, STATE_JOB_DONE);
  CHECK_STR(got.result_json, "{\"exit_code\":0}");
  CHECK(got.ended_ms >= got.created_ms);
  state_job_free(&got);
  state_close(st);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/husk-test-jobs.XXXXXX");
  if (!mkdtemp(dir))
    return 2;
  snprintf(path, sizeof path, "%s/husk.db", dir);
  RUN(jobs_are_scoped_and_end_once);
  char cmd[160];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) {
  }
  return unit_done();
}
