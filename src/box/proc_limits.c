/* The limits of background processes: a wall-time deadline and a cap on
 * the stdout + stderr bytes kept, as a sync exec has.
 *
 * A background process writes its output straight into files on the box's
 * filesystem (box_proc.c) and may outlive the daemon, so nothing relays its
 * output and no timer of a request runs for it.  The monitor thread keeps
 * the rules instead: each pass it kills the process group of every process
 * past its deadline, and measures the output files of every process that
 * has an output limit (every BOX_OUTPUT_CHECK_MS; between two looks a
 * process can write past the limit, which its box's disk bounds).  Once a
 * process's exit arrives its files are cut to the limit: each stream keeps
 * at least its fair half, a short stream all of it, so that what is kept is
 * exactly `output_limit` bytes.
 *
 * Restarts: the limits are columns of the process's row; the limit that
 * ends a process is recorded in the row before its group is killed, so its
 * exit is reported as that limit's even when it reaches a later daemon.  A
 * re-adopted box's processes get their limits back from the rows, and the
 * one whose deadline passed while no daemon ran is killed then -- once its
 * init has re-sent the exits it held (BOX_ADOPT_LIMITS_GRACE_MS), so that
 * no kill is sent to a pid that has ended, and perhaps been reused, while
 * its exit was still on its way. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "box/box_internal.h"
#include "util/cleanup.h"

/* The sizes of a process's two output files (a missing one is empty). */
static void output_sizes(const struct live_box *b, int64_t pid, uint64_t size[2]) {
  for (int i = 0; i < 2; i++) {
    char name[64];
    snprintf(name, sizeof name, "procs/%lld.%s", (long long)pid, i == 0 ? "out" : "err");
    struct stat st;
    size[i] = fstatat(b->j.fs, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_size > 0
                  ? (uint64_t)st.st_size
                  : 0;
  }
}

/* Cut the output files of `pid` so that together they hold `limit` bytes:
 * a stream shorter than half keeps all of it, the other one the rest. */
static void cut_output(struct husk_mgr *m, const struct live_box *b, int64_t pid, uint64_t limit) {
  uint64_t size[2];
  output_sizes(b, pid, size);
  if (size[0] + size[1] <= limit)
    return;
  uint64_t half = limit / 2, keep[2];
  if (size[0] <= half) {
    keep[0] = size[0];
    keep[1] = limit - size[0];
  } else if (size[1] <= limit - half) {
    keep[1] = size[1];
    keep[0] = limit - size[1];
  } else {
    keep[0] = half;
    keep[1] = limit - half;
  }
  for (int i = 0; i < 2; i++) {
    if (size[i] <= keep[i])
      continue;
    char name[64];
    snprintf(name, sizeof name, "procs/%lld.%s", (long long)pid, i == 0 ? "out" : "err");
    cleanup_close int fd = openat(b->j.fs, name, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0 || ftruncate(fd, (off_t)keep[i]) < 0)
      box_log(m, "box %s: cannot cut the output of pid %lld to its limit: %s", b->id,
              (long long)pid, strerror(errno));
  }
}

static const char *limit_name(enum husk_reason r) {
  return r == HUSK_REASON_TIMEOUT ? STATE_PROC_LIMIT_TIMEOUT : STATE_PROC_LIMIT_OUTPUT;
}

static bool has_limits(const struct bgproc *p) {
  return p->deadline_ms || p->output_limit || p->limit != HUSK_REASON_EXITED;
}

/* Record `why` as what ends `p` (a limit recorded first is kept), then kill
 * its process group.  Returns false when that failed (tried again later);
 * not recorded (the database refused) means not killed either. */
static bool kill_for(struct husk_mgr *m, struct live_box *b, struct bgproc *p,
                     enum husk_reason why) {
  struct husk_err err;
  if (p->limit == HUSK_REASON_EXITED) {
    if (state_proc_set_limit_hit(m->cfg.state, b->id, p->pid, (int64_t)p->exec_id, limit_name(why),
                                 &err) < 0) {
      if (err.code == ENOENT) {
        p->ended = true; /* no longer running: its exit is on its way */
        return true;
      }
      box_log(m, "box %s: cannot record the %s limit of pid %lld: %s", b->id, limit_name(why),
              (long long)p->pid, err.msg);
      return false;
    }
    p->limit = why;
  }
  /* Over the watch connection, which only this thread writes. */
  if (jail_signal_fd(b->j.ctl, (pid_t)p->pid, SIGKILL, true, &err) < 0) {
    box_log(m, "box %s: cannot kill pid %lld at its %s limit: %s", b->id, (long long)p->pid,
            limit_name(p->limit), err.msg);
    return false;
  }
  p->killed = true;
  return true;
}

/* The list's head: nodes are only ever added in front, never freed while
 * the box is referenced, and their links never change. */
static struct bgproc *procs_head(struct live_box *b) {
  pthread_mutex_lock(&b->lock);
  struct bgproc *p = b->procs;
  pthread_mutex_unlock(&b->lock);
  return p;
}

int64_t proc_limits_next(const struct live_box *b, int64_t now) {
  int64_t next = INT64_MAX;
  for (const struct bgproc *p = b->procs; p; p = p->next)
    if (!p->ended && !p->killed && has_limits(p) && p->due_ms < next)
      next = p->due_ms;
  if (next != INT64_MAX && next < b->limits_from_ms)
    next = b->limits_from_ms;
  return next < now ? now : next;
}

void proc_limits_shift(struct live_box *b, int64_t ms) {
  for (struct bgproc *p = procs_head(b); p; p = p->next)
    if (!p->ended && p->deadline_ms) {
      p->deadline_ms += ms;
      if (p->due_ms != INT64_MAX)
        p->due_ms += ms;
    }
}

void proc_limits_check(struct husk_mgr *m, struct live_box *b, int64_t now) {
  if (b->ending || now < b->limits_from_ms)
    return;
  for (struct bgproc *p = procs_head(b); p; p = p->next) {
    if (p->ended || p->killed || !has_limits(p) || now < p->due_ms)
      continue;
    /* The output limit first, as a sync exec's relay sees output before
     * its timer. */
    enum husk_reason why = p->limit;
    if (why == HUSK_REASON_EXITED && p->output_limit) {
      uint64_t size[2];
      output_sizes(b, p->pid, size);
      if (size[0] + size[1] > p->output_limit)
        why = HUSK_REASON_OUTPUT;
    }
    if (why == HUSK_REASON_EXITED && p->deadline_ms && now >= p->deadline_ms)
      why = HUSK_REASON_TIMEOUT;
    if (why != HUSK_REASON_EXITED && !kill_for(m, b, p, why)) {
      p->due_ms = now + BOX_OUTPUT_CHECK_MS; /* try again */
      continue;
    }
    p->due_ms = p->output_limit ? now + BOX_OUTPUT_CHECK_MS : INT64_MAX;
    if (p->deadline_ms && p->deadline_ms < p->due_ms)
      p->due_ms = p->deadline_ms;
  }
}

void proc_limits_exit(struct husk_mgr *m, struct live_box *b, int64_t pid, uint64_t exec_id) {
  struct bgproc *p = procs_head(b);
  while (p && !(p->pid == pid && p->exec_id == exec_id))
    p = p->next;
  if (!p || p->ended)
    return;
  if (p->output_limit) {
    /* What it wrote since the last look may pass the limit too. */
    uint64_t size[2];
    output_sizes(b, pid, size);
    if (p->limit == HUSK_REASON_EXITED && size[0] + size[1] > p->output_limit) {
      struct husk_err err;
      if (state_proc_set_limit_hit(m->cfg.state, b->id, pid, (int64_t)exec_id,
                                   STATE_PROC_LIMIT_OUTPUT, &err) == 0)
        p->limit = HUSK_REASON_OUTPUT;
      else if (err.code != ENOENT)
        box_log(m, "box %s: cannot record the output limit of pid %lld: %s", b->id, (long long)pid,
                err.msg);
    }
    /* Cut before the exit is recorded: a crash in between finds the row
     * still running and cuts again. */
    cut_output(m, b, pid, p->output_limit);
  }
  p->ended = true;
}

struct adopt_ctx {
  struct live_box *b;
  struct husk_err *err;
};

static int adopt_proc(void *ctx, const struct state_proc *sp) {
  struct adopt_ctx *a = ctx;
  if (!sp->timeout_ms && !sp->output_limit && !sp->limit_hit[0])
    return 0; /* nothing to enforce */
  struct bgproc *p = calloc(1, sizeof *p);
  if (!p)
    return husk_fail(a->err, ENOMEM, "out of memory");
  p->pid = sp->pid;
  p->exec_id = (uint64_t)sp->exec_id;
  p->conn = p->stdin_w = -1; /* its exit comes over the watch connection */
  p->deadline_ms = sp->timeout_ms ? sp->started_ms + sp->timeout_ms : 0;
  p->output_limit = (uint64_t)sp->output_limit;
  p->limit = !strcmp(sp->limit_hit, STATE_PROC_LIMIT_TIMEOUT)  ? HUSK_REASON_TIMEOUT
             : !strcmp(sp->limit_hit, STATE_PROC_LIMIT_OUTPUT) ? HUSK_REASON_OUTPUT
                                                               : HUSK_REASON_EXITED;
  p->next = a->b->procs;
  a->b->procs = p;
  return 0;
}

int proc_limits_adopt(struct husk_mgr *m, struct live_box *b, struct husk_err *err) {
  /* Not before the monitor has asked its init for the exits it holds. */
  b->limits_from_ms = INT64_MAX;
  struct adopt_ctx a = {.b = b, .err = err};
  /* At most STATE_LIST_MAX, newest first: more than the pids limit lets
   * a box run unless an operator raised it that far. */
  if (state_proc_list(m->cfg.state, NULL, b->id, 1, STATE_LIST_MAX, adopt_proc, &a, err) < 0)
    return -1;
  return 0;
}
