/* Background processes of long-lived boxes: started with their output in
 * files at the root of the box filesystem (outside what the box sees,
 * counted against its disk), recorded in the state plane, their exits
 * collected and their limits enforced by the monitor (box_monitor.c,
 * proc_limits.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "box/box_internal.h"
#include "jail/limits.h"
#include "jail/syscalls.h"
#include "util/cleanup.h"
#include "util/fileio.h"

/* ---- background processes --------------------------------------------------------- */

void husk_proc_free(struct husk_proc *p) {
  if (p) {
    free(p->cmd_json);
    p->cmd_json = NULL;
  }
}

static void proc_from_state(struct husk_proc *bp, const struct state_proc *sp) {
  memset(bp, 0, sizeof *bp);
  bp->pid = sp->pid;
  snprintf(bp->state, sizeof bp->state, "%s", sp->state);
  bp->signal = (int)sp->signal;
  bp->exit_code = sp->signal ? 128 + (int)sp->signal : (int)sp->exit_code;
  bp->reason = sp->signal ? HUSK_REASON_SIGNALED : HUSK_REASON_EXITED;
  /* Ended by a limit: reported as a sync exec reports it, whatever the
   * kill left in its status (it may have ended by itself just then). */
  if (!strcmp(sp->limit_hit, STATE_PROC_LIMIT_TIMEOUT)) {
    bp->reason = HUSK_REASON_TIMEOUT;
    bp->signal = SIGKILL;
    bp->exit_code = 124;
  } else if (!strcmp(sp->limit_hit, STATE_PROC_LIMIT_OUTPUT)) {
    bp->reason = HUSK_REASON_OUTPUT;
    bp->signal = SIGKILL;
    bp->exit_code = 128 + SIGKILL;
    bp->truncated = true;
  }
  bp->started_ms = sp->started_ms;
  bp->ended_ms = sp->ended_ms;
  bp->timeout_ms = (uint64_t)sp->timeout_ms;
  bp->output_limit = (uint64_t)sp->output_limit;
  bp->cmd_json = strdup(sp->cmd_json ? sp->cmd_json : "[]");
  snprintf(bp->created_by, sizeof bp->created_by, "%s", sp->created_by);
}

/* Output files live at the root of the box filesystem, beside workspace/,
 * tmp/ and shm/: outside everything the box can see, counted against its
 * disk, gone with it. */
static int open_output_file(struct live_box *b, int64_t pid, int stream, int flags) {
  char name[64];
  snprintf(name, sizeof name, "procs/%lld.%s", (long long)pid, stream == 1 ? "out" : "err");
  return openat(b->j.fs, name, flags | O_CLOEXEC | O_NOFOLLOW, 0600);
}

static char *argv_to_json(char *const *argv) {
  json_t *a = json_array();
  for (size_t i = 0; a && argv[i]; i++)
    json_array_append_new(a, json_string(argv[i]));
  char *s = a ? json_dumps(a, JSON_COMPACT) : NULL;
  json_decref(a);
  return s;
}

/* Counted and checked under the manager's lock, so that requests at once
 * cannot together pass the bound. */
int box_procs_reserve(struct husk_mgr *m, struct live_box *b, struct husk_err *err) {
  unsigned max = m->cfg.tenant_max_procs ? m->cfg.tenant_max_procs : BOX_TENANT_PROCS_DEFAULT;
  unsigned n = 0;
  pthread_mutex_lock(&m->lock);
  for (struct live_box *o = m->boxes; o; o = o->next)
    if (!strcmp(o->tenant, b->tenant))
      n += atomic_load(&o->nprocs);
  bool ok = n < max;
  if (ok)
    atomic_fetch_add(&b->nprocs, 1);
  pthread_mutex_unlock(&m->lock);
  if (!ok)
    return husk_fail(err, EUSERS,
                     "the tenant has %u background processes and code contexts running (at "
                     "most %u); wait for one to end",
                     n, max);
  return 0;
}

int husk_box_exec_background(struct husk_mgr *m, const char *tenant, const char *id,
                        const struct husk_exec_req *req, struct husk_proc *out, struct husk_err *err) {
  char creator[STATE_CREATED_BY_SIZE];
  if (box_check_exec(req, err) < 0 ||
      box_created_by(creator, sizeof creator, req->created_by, err) < 0)
    return -1;
  /* A limit past what a row holds is no limit (the box's disk comes first). */
  uint64_t output_limit = req->output_limit <= INT64_MAX ? req->output_limit : 0;
  struct live_box *b = box_running(m, tenant, id, err);
  if (!b)
    return -1;
  int rc = -1;
  int conn = -1, in[2] = {-1, -1}, outf = -1, errf = -1;
  char tmp_out[64], tmp_err[64];
  tmp_out[0] = tmp_err[0] = '\0';
  bool reserved = false;
  cleanup_free char **env = box_exec_env(b, req->env);
  cleanup_free char *cmd_json = argv_to_json(req->argv);
  if (!env || !cmd_json) {
    husk_fail(err, ENOMEM, "out of memory");
    goto out;
  }
  if (box_procs_reserve(m, b, err) < 0)
    goto out;
  reserved = true;
  if (mkdirat(b->j.fs, "procs", 0700) < 0 && errno != EEXIST) {
    husk_error(err, errno, "cannot prepare process output");
    goto out;
  }
  /* Output goes to files named after the exec until the pid is known. */
  pthread_mutex_lock(&b->lock);
  uint64_t eid = b->next_exec_id++;
  pthread_mutex_unlock(&b->lock);
  snprintf(tmp_out, sizeof tmp_out, "procs/.x%llu.out", (unsigned long long)eid);
  snprintf(tmp_err, sizeof tmp_err, "procs/.x%llu.err", (unsigned long long)eid);
  outf = openat(b->j.fs, tmp_out, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  errf = openat(b->j.fs, tmp_err, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (outf < 0 || errf < 0 || pipe2(in, O_CLOEXEC) < 0) {
    husk_error(err, errno, "cannot prepare process I/O");
    goto out;
  }
  if ((conn = jail_connect(b->ctl_path, err)) < 0)
    goto out;
  int fds[3] = {in[0], outf, errf};
  /* Its exit is acknowledged once recorded (box_monitor.c): init keeps it
   * until then, through daemon crashes. */
  uint32_t flags = b->init_acks ? CTL_EXEC_ACK_EXIT : 0;
  if (jail_exec_fd(conn, eid, req->argv, env,
                   box_cwd(b, req->cwd), fds, flags, err) < 0)
    goto out;
  close_quiet(in[0]);
  in[0] = -1;
  union jail_event ev;
  int r = jail_recv_fd(conn, &ev, err);
  if (r <= 0 || ev.h.type != CTL_STARTED) {
    if (r == 0)
      husk_fail(err, EIO, "the sandbox ended");
    else if (r > 0)
      husk_fail(err, EPROTO, "unexpected reply from the sandbox");
    goto out;
  }
  if (ev.started.error) {
    if (ev.started.stage == CTL_STAGE_EXEC)
      husk_fail(err, ev.started.error == ENOENT ? ENOENT : EACCES, "%s: %s", req->argv[0],
                ev.started.error == ENOENT ? "command not found" : strerror(ev.started.error));
    else
      husk_error(err, ev.started.error, "cannot start `%s` (%s)", req->argv[0],
                 ctl_stage_name(ev.started.stage));
    if (err->code == ENOENT)
      err->code = EINVAL; /* not "no such sandbox" */
    goto out;
  }
  int64_t pid = ev.started.pid;
  char final_out[64], final_err[64];
  snprintf(final_out, sizeof final_out, "procs/%lld.out", (long long)pid);
  snprintf(final_err, sizeof final_err, "procs/%lld.err", (long long)pid);
  if (renameat(b->j.fs, tmp_out, b->j.fs, final_out) < 0 ||
      renameat(b->j.fs, tmp_err, b->j.fs, final_err) < 0)
    box_log(m, "box %s: cannot name output of pid %lld: %s", b->id, (long long)pid, strerror(errno));
  struct state_proc sp = {.pid = pid,
                          .cmd_json = cmd_json,
                          .exit_code = -1,
                          .exec_id = (int64_t)eid,
                          .timeout_ms = (int64_t)req->timeout_ms,
                          .output_limit = (int64_t)output_limit};
  snprintf(sp.box_id, sizeof sp.box_id, "%s", b->id);
  snprintf(sp.state, sizeof sp.state, "%s", STATE_PROC_RUNNING);
  snprintf(sp.created_by, sizeof sp.created_by, "%s", creator);
  sp.started_ms = state_now_ms();
  if (state_proc_insert(m->cfg.state, &sp, err) < 0) {
    jail_signal_fd(conn, (pid_t)pid, SIGKILL, true, err);
    goto out;
  }
  struct bgproc *bp = calloc(1, sizeof *bp);
  if (!bp) {
    husk_fail(err, ENOMEM, "out of memory");
    goto out;
  }
  bp->pid = pid;
  bp->exec_id = eid;
  bp->conn = conn;
  bp->stdin_w = in[1];
  bp->deadline_ms = req->timeout_ms ? sp.started_ms + (int64_t)req->timeout_ms : 0;
  bp->output_limit = output_limit; /* the monitor measures it at once (due_ms 0) */
  conn = in[1] = -1;
  pthread_mutex_lock(&b->lock);
  bp->counted = true; /* the reservation is the process's now */
  reserved = false;
  bp->next = b->procs;
  b->procs = bp;
  pthread_mutex_unlock(&b->lock);
  box_wake_monitor(m); /* it watches the new connection for the exit */
  if (out) {
    memset(out, 0, sizeof *out);
    out->pid = pid;
    snprintf(out->state, sizeof out->state, "%s", STATE_PROC_RUNNING);
    out->started_ms = sp.started_ms;
    out->timeout_ms = req->timeout_ms;
    out->output_limit = output_limit;
    out->cmd_json = strdup(cmd_json);
    snprintf(out->created_by, sizeof out->created_by, "%s", creator);
  }
  rc = 0;
out:
  close_quiet(conn);
  close_quiet(in[0]);
  close_quiet(in[1]);
  close_quiet(outf);
  close_quiet(errf);
  if (rc < 0 && b->j.fs >= 0 && tmp_out[0]) {
    unlinkat(b->j.fs, tmp_out, 0);
    unlinkat(b->j.fs, tmp_err, 0);
  }
  if (reserved)
    atomic_fetch_sub(&b->nprocs, 1);
  lb_unref(m, b);
  return rc;
}

struct proc_list_ctx {
  int (*cb)(void *, const struct husk_proc *);
  void *ctx;
};

static int proc_list_cb(void *ctx, const struct state_proc *sp) {
  struct proc_list_ctx *pc = ctx;
  struct husk_proc bp;
  proc_from_state(&bp, sp);
  int rc = pc->cb(pc->ctx, &bp);
  husk_proc_free(&bp);
  return rc;
}

int husk_proc_list(struct husk_mgr *m, const char *tenant, const char *id,
                  int (*cb)(void *ctx, const struct husk_proc *p), void *ctx, struct husk_err *err) {
  if (!box_valid_id(id))
    return husk_fail(err, ENOENT, "no such sandbox");
  struct state_box sb;
  if (state_box_get(m->cfg.state, tenant, id, &sb, err) < 0)
    return -1;
  state_box_free(&sb);
  struct proc_list_ctx pc = {.cb = cb, .ctx = ctx};
  return state_proc_list(m->cfg.state, tenant, id, 0, STATE_LIST_MAX, proc_list_cb, &pc, err);
}

struct proc_page_ctx {
  int (*cb)(void *, const struct husk_proc *, uint64_t, bool);
  void *ctx;
};

static int proc_page_cb(void *ctx, const struct state_proc *sp) {
  struct proc_page_ctx *pc = ctx;
  struct husk_proc bp;
  proc_from_state(&bp, sp);
  int rc = pc->cb(pc->ctx, &bp, (uint64_t)sp->seq, sp->cmd_cut);
  husk_proc_free(&bp);
  return rc;
}

int husk_proc_list_page(struct husk_mgr *m, const char *tenant, const char *id, uint64_t before,
                        unsigned limit, size_t cmd_max,
                        int (*cb)(void *ctx, const struct husk_proc *p, uint64_t cursor,
                                  bool cmd_cut),
                        void *ctx, struct husk_err *err) {
  if (!box_valid_id(id))
    return husk_fail(err, ENOENT, "no such sandbox");
  if (before > INT64_MAX || limit < 1 || limit > STATE_LIST_MAX)
    return husk_fail(err, EINVAL, "limit must be 1 to %d", STATE_LIST_MAX);
  struct proc_page_ctx pc = {.cb = cb, .ctx = ctx};
  return state_proc_page(m->cfg.state, tenant, id, (int64_t)before, (int)limit, cmd_max,
                         proc_page_cb, &pc, err);
}

int husk_proc_get(struct husk_mgr *m, const char *tenant, const char *id, int64_t pid,
                 struct husk_proc *out, struct husk_err *err) {
  if (!box_valid_id(id))
    return husk_fail(err, ENOENT, "no such sandbox");
  struct state_proc sp;
  if (state_proc_get(m->cfg.state, tenant, id, pid, &sp, err) < 0)
    return -1;
  proc_from_state(out, &sp);
  state_proc_free(&sp);
  return 0;
}

/* The running process `pid` of a running box, checked against the state. */
static struct live_box *running_proc(struct husk_mgr *m, const char *tenant, const char *id,
                                     int64_t pid, struct husk_err *err) {
  struct live_box *b = box_running(m, tenant, id, err);
  if (!b)
    return NULL;
  struct state_proc sp;
  if (state_proc_get(m->cfg.state, tenant, id, pid, &sp, err) < 0) {
    lb_unref(m, b);
    return NULL;
  }
  bool running = !strcmp(sp.state, STATE_PROC_RUNNING);
  state_proc_free(&sp);
  if (!running) {
    husk_fail(err, EBUSY, "process %lld has ended", (long long)pid);
    lb_unref(m, b);
    return NULL;
  }
  return b;
}

int husk_proc_signal(struct husk_mgr *m, const char *tenant, const char *id, int64_t pid, int sig,
                    bool group, struct husk_err *err) {
  if (sig <= 0 || sig >= NSIG)
    return husk_fail(err, EINVAL, "invalid signal %d", sig);
  struct live_box *b = running_proc(m, tenant, id, pid, err);
  if (!b)
    return -1;
  int rc = -1;
  int conn = jail_connect(b->ctl_path, err);
  if (conn >= 0) {
    rc = jail_signal_fd(conn, (pid_t)pid, sig, group, err);
    close(conn);
  }
  lb_unref(m, b);
  return rc;
}

#define STDIN_WRITE_TIMEOUT_MS 10000

/* 1 if the process has ended, 0 if it runs, -1 on error. */
static int proc_has_ended(struct husk_mgr *m, const char *tenant, const char *id, int64_t pid,
                          struct husk_err *err) {
  struct husk_proc p = {0};
  if (husk_proc_get(m, tenant, id, pid, &p, err) < 0)
    return -1;
  bool ended = strcmp(p.state, STATE_PROC_RUNNING) != 0;
  husk_proc_free(&p);
  return ended;
}

int husk_proc_stdin(struct husk_mgr *m, const char *tenant, const char *id, int64_t pid,
                   const void *buf, size_t len, bool eof, struct husk_err *err) {
  /* Closing the stdin of a process that has ended is already done.  A
   * request that sends a line and then EOF races the program's own exit
   * (`read l; ...` ends once it has its line), so this must not fail --
   * also when it ends between this look and running_proc's. */
  bool close_only = eof && len == 0;
  int ended = close_only ? proc_has_ended(m, tenant, id, pid, err) : 0;
  if (ended != 0)
    return ended < 0 ? -1 : 0;
  struct live_box *b = running_proc(m, tenant, id, pid, err);
  if (!b) {
    struct husk_err e2;
    if (close_only && err->code == EBUSY && proc_has_ended(m, tenant, id, pid, &e2) == 1) {
      husk_err_clear(err);
      return 0;
    }
    return -1;
  }
  int rc = 0;
  /* Write through our own dup, without the box lock: a program that does
   * not read its stdin must not stall other requests on the box. */
  pthread_mutex_lock(&b->lock);
  struct bgproc *p = b->procs;
  while (p && p->pid != pid)
    p = p->next;
  int fd = p && p->stdin_w >= 0 ? fcntl(p->stdin_w, F_DUPFD_CLOEXEC, 3) : -1;
  pthread_mutex_unlock(&b->lock);
  if (fd < 0) {
    rc = husk_fail(err, EBUSY, "stdin of process %lld is closed", (long long)pid);
  } else {
    fcntl(fd, F_SETFL, O_NONBLOCK);
    const char *q = buf;
    size_t left = len;
    while (left > 0 && rc == 0) {
      ssize_t n = write(fd, q, left);
      if (n > 0) {
        q += n;
        left -= (size_t)n;
      } else if (n < 0 && errno == EAGAIN) {
        struct pollfd pf = {.fd = fd, .events = POLLOUT};
        int r = poll(&pf, 1, STDIN_WRITE_TIMEOUT_MS);
        if (r == 0)
          rc = husk_fail(err, EAGAIN, "process %lld does not read its stdin (%zu of %zu bytes written)",
                         (long long)pid, len - left, len);
      } else if (n < 0 && errno != EINTR) {
        rc = husk_error(err, errno, "cannot write to stdin of process %lld", (long long)pid);
      }
    }
    close(fd);
    if (eof || (rc < 0 && err->code != EAGAIN)) {
      pthread_mutex_lock(&b->lock);
      if (p->stdin_w >= 0) {
        close(p->stdin_w);
        p->stdin_w = -1;
      }
      pthread_mutex_unlock(&b->lock);
    }
  }
  lb_unref(m, b);
  return rc;
}

int husk_proc_output(struct husk_mgr *m, const char *tenant, const char *id, int64_t pid, int stream,
                    int *fd_out, bool *running, struct husk_err *err) {
  if (stream != 1 && stream != 2)
    return husk_fail(err, EINVAL, "no output stream %d (HUSK_STDOUT or HUSK_STDERR)", stream);
  struct husk_proc bp;
  if (husk_proc_get(m, tenant, id, pid, &bp, err) < 0)
    return -1;
  *running = !strcmp(bp.state, STATE_PROC_RUNNING);
  husk_proc_free(&bp);
  struct live_box *b = box_live(m, tenant, id, err);
  if (!b)
    return -1;
  int fd = open_output_file(b, pid, stream, O_RDONLY);
  lb_unref(m, b);
  if (fd < 0)
    return husk_error(err, errno == ENOENT ? EBUSY : errno, "output of process %lld is not available",
                      (long long)pid);
  *fd_out = fd;
  return 0;
}

