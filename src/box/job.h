/* Jobs: commands started by a front (the MCP server) that may outlive the
 * call that started them.  A job is a background process of a box
 * (husk_box_exec_background: output in files, exit collected by the monitor,
 * both kept across daemon restarts) plus a row in the state plane that
 * names its owner, its box and whether that box is disposable (run_code's
 * fresh box, destroyed once the result is collected).  A later call finds
 * the job by id, waits for it, reads its output, and ends it.
 *
 * Every call takes the tenant: another tenant's job is ENOENT, exactly as
 * an unknown id. */
#ifndef HUSK_BOX_JOB_H
#define HUSK_BOX_JOB_H

#include <stdbool.h>
#include <stdint.h>

#include "box/box.h"
#include "state/state.h"
#include "util/error.h"

/* Start `req` (argv, env, cwd) in the background in box `box_id` and record
 * it as job of `kind`.  `ephemeral`: the box is destroyed when the job
 * ends (job_end / job_cancel).  req->created_by is the job's creator as
 * well as its process's.  *out is the new job (free with
 * state_job_free). */
int job_start(struct husk_mgr *m, const char *tenant, const char *box_id, const char *kind,
              bool ephemeral, const struct husk_exec_req *req, struct state_job *out,
              struct husk_err *err);

int job_get(struct husk_mgr *m, const char *tenant, const char *id, struct state_job *out,
            struct husk_err *err);

/* The job's process: running, exited (exit code / signal) or lost (its box
 * ended before the exit was seen). */
int job_proc(struct husk_mgr *m, const struct state_job *job, struct husk_proc *out,
             struct husk_err *err);

/* Wait at most `timeout_ms` for the job's process to end.  Returns 1 when
 * it ended, 0 when it still runs, -1 on error: ECANCELED when `cancel_fd`
 * (-1: none) became readable.  `tick` (may be NULL) is called about every
 * second with the time waited so far (progress reports). */
int job_wait(struct husk_mgr *m, const struct state_job *job, uint64_t timeout_ms, int cancel_fd,
             void (*tick)(void *ctx, uint64_t waited_ms), void *tick_ctx, struct husk_err *err);

/* An fd of the job's output (stream 1 stdout, 2 stderr) to pread; the
 * caller closes it.  EBUSY/ENOENT once the box is gone. */
int job_output(struct husk_mgr *m, const struct state_job *job, int stream, int *fd,
               struct husk_err *err);

/* Record the end of a job whose process ended, with the front's result
 * (opaque JSON, may be NULL), then destroy its box if it is ephemeral.
 * ESTALE when another caller ended it first. */
int job_end(struct husk_mgr *m, const struct state_job *job, const char *result_json,
            struct husk_err *err);

/* Kill a running job (SIGKILL to its process group), record it cancelled,
 * and destroy its box if ephemeral.  A job that already ended is EBUSY. */
int job_cancel(struct husk_mgr *m, const char *tenant, const char *id, struct husk_err *err);

#endif
