/* Jobs (see job.h): a thin layer over background processes and the jobs
 * table.  Waiting polls the state plane: the monitor thread records the
 * exit there, so a wait works the same for a job started by this daemon
 * or by one before a restart. */
#define _GNU_SOURCE
#include "box/job.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "box/box_internal.h"
#include "util/clock.h"

/* How often a wait looks at the process's state. */
#define JOB_POLL_MS 100
/* How often a wait reports progress. */
#define JOB_TICK_MS 1000

int job_start(struct husk_mgr *m, const char *tenant, const char *box_id, const char *kind,
              bool ephemeral, const struct husk_exec_req *req, struct state_job *out,
              struct husk_err *err) {
  struct state_job j;
  memset(&j, 0, sizeof j);
  if (state_new_id("j_", j.id, sizeof j.id, err) < 0)
    return -1;
  snprintf(j.tenant_id, sizeof j.tenant_id, "%s", tenant);
  snprintf(j.box_id, sizeof j.box_id, "%s", box_id);
  snprintf(j.kind, sizeof j.kind, "%s", kind);
  j.ephemeral = ephemeral;
  /* Its creator is its process's (req->created_by). */
  if (box_created_by(j.created_by, sizeof j.created_by, req->created_by, err) < 0)
    return -1;
  struct husk_proc bp = {0};
  if (husk_box_exec_background(m, tenant, box_id, req, &bp, err) < 0)
    return -1;
  j.pid = bp.pid;
  husk_proc_free(&bp);
  j.created_ms = state_now_ms();
  snprintf(j.state, sizeof j.state, "%s", STATE_JOB_RUNNING);
  if (state_job_insert(m->cfg.state, &j, err) < 0) {
    /* Nobody could ever find it: do not leave it running. */
    struct husk_err e2;
    husk_proc_signal(m, tenant, box_id, j.pid, SIGKILL, true, &e2);
    return -1;
  }
  *out = j;
  return 0;
}

int job_get(struct husk_mgr *m, const char *tenant, const char *id, struct state_job *out,
            struct husk_err *err) {
  return state_job_get(m->cfg.state, tenant, id, out, err);
}

int job_proc(struct husk_mgr *m, const struct state_job *job, struct husk_proc *out,
             struct husk_err *err) {
  return husk_proc_get(m, job->tenant_id, job->box_id, job->pid, out, err);
}

int job_wait(struct husk_mgr *m, const struct state_job *job, uint64_t timeout_ms, int cancel_fd,
             void (*tick)(void *ctx, uint64_t waited_ms), void *tick_ctx, struct husk_err *err) {
  int64_t t0 = mono_ms(), next_tick = t0 + JOB_TICK_MS;
  for (;;) {
    struct husk_proc bp;
    if (job_proc(m, job, &bp, err) < 0)
      return -1;
    bool running = !strcmp(bp.state, STATE_PROC_RUNNING);
    husk_proc_free(&bp);
    if (!running)
      return 1;
    int64_t now = mono_ms();
    if ((uint64_t)(now - t0) >= timeout_ms)
      return 0;
    if (tick && now >= next_tick) {
      tick(tick_ctx, (uint64_t)(now - t0));
      next_tick = now + JOB_TICK_MS;
    }
    int64_t left = (int64_t)timeout_ms - (now - t0);
    int step = left < JOB_POLL_MS ? (int)left : JOB_POLL_MS;
    struct pollfd p = {.fd = cancel_fd, .events = POLLIN};
    int r = poll(&p, cancel_fd >= 0 ? 1 : 0, step);
    if (r < 0 && errno != EINTR)
      return husk_error(err, errno, "poll");
    if (r > 0)
      return husk_fail(err, ECANCELED, "cancelled");
  }
}

int job_output(struct husk_mgr *m, const struct state_job *job, int stream, int *fd,
               struct husk_err *err) {
  bool running;
  return husk_proc_output(m, job->tenant_id, job->box_id, job->pid, stream, fd, &running, err);
}

static void destroy_box(struct husk_mgr *m, const struct state_job *job, const char *how) {
  struct husk_err e;
  if (husk_box_destroy(m, job->tenant_id, job->box_id, how, &e) < 0 && e.code != ENOENT &&
      e.code != EBUSY)
    box_log(m, "job %s: cannot destroy box %s: %s", job->id, job->box_id, e.msg);
}

int job_end(struct husk_mgr *m, const struct state_job *job, const char *result_json,
            struct husk_err *err) {
  if (state_job_end(m->cfg.state, job->tenant_id, job->id, STATE_JOB_DONE, result_json, err) < 0)
    return -1;
  if (job->ephemeral)
    destroy_box(m, job, "stopped");
  return 0;
}

int job_cancel(struct husk_mgr *m, const char *tenant, const char *id, struct husk_err *err) {
  struct state_job j;
  if (state_job_get(m->cfg.state, tenant, id, &j, err) < 0)
    return -1;
  state_job_free(&j);
  if (strcmp(j.state, STATE_JOB_RUNNING) != 0)
    return husk_fail(err, EBUSY, "job %s has already ended (%s)", id, j.state);
  struct husk_err e;
  /* An ended process or a gone box is fine: the job is over either way. */
  if (husk_proc_signal(m, tenant, j.box_id, j.pid, SIGKILL, true, &e) < 0 && e.code != EBUSY &&
      e.code != ENOENT)
    box_log(m, "job %s: cannot kill pid %lld: %s", id, (long long)j.pid, e.msg);
  if (state_job_end(m->cfg.state, tenant, id, STATE_JOB_CANCELLED, NULL, err) < 0)
    return err->code == ESTALE ? husk_fail(err, EBUSY, "job %s has already ended", id) : -1;
  if (j.ephemeral)
    destroy_box(m, &j, "killed");
  return 0;
}
