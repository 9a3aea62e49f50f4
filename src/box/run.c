/* husk_run(): one program in a fresh box, start to finish.
 *
 *   build the box (jail_create) -> copy the workspace in -> start the
 *   program through init -> relay stdin/stdout/stderr while watching the
 *   wall clock, the output cap and the cgroup's limits -> on the program's
 *   exit (or a tripped limit) kill the whole box -> drain the output ->
 *   reap, read usage, remove the cgroup -> copy the workspace out -> drop
 *   the box's filesystem.
 *
 * The box is killed as a whole: when the program's exit is reported, init
 * is SIGKILLed, which ends its pid namespace, so daemons the program left
 * behind die with it. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "box/copy.h"
#include "husk/husk.h"
#include "jail/jail.h"
#include "jail/limits.h"
#include "util/cleanup.h"
#include "util/fileio.h"

#define RELAY_CHUNK (64 * 1024)
#define TRIP_POLL_MS 20
#define COPY_MAX_DEPTH 256

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void set_message(struct husk_run_result *r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->message, sizeof r->message, fmt, ap);
  va_end(ap);
  husk_sanitize_line(r->message);
}

static void setup_error(struct husk_run_result *r, const struct husk_err *err) {
  r->exit_code = 125;
  r->reason = HUSK_REASON_SETUP_ERROR;
  set_message(r, "%s", err->msg);
}

static bool stale_run_cgroup(const char *name) {
  int pid = 0;
  if (sscanf(name, "run-%d-", &pid) != 1 || pid <= 0)
    return false;
  return kill(pid, 0) < 0 && errno == ESRCH;
}

struct copy_warn {
  const struct husk_run_spec *spec;
  const char *direction;
};

static void copy_skipped(void *ctx, const char *path, const char *why) {
  struct copy_warn *w = ctx;
  if (!w->spec->warn)
    return;
  char line[PATH_MAX + 256];
  snprintf(line, sizeof line, "%s: skipped `%s`: %s", w->direction, path, why);
  husk_sanitize_line(line);
  w->spec->warn(w->spec->warn_ctx, line);
}

/* The program's environment: what husk sets, then the caller's entries
 * (a later NAME= replaces an earlier one). */
static char **build_env(char *const *extra) {
  static const char *const base[] = {
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/workspace",
      "LANG=C.UTF-8", "TERM=xterm"};
  size_t nb = sizeof base / sizeof base[0], ne = 0;
  while (extra && extra[ne])
    ne++;
  char **env = calloc(nb + ne + 1, sizeof *env);
  if (!env)
    return NULL;
  size_t n = 0;
  for (size_t i = 0; i < nb + ne; i++) {
    const char *e = i < nb ? base[i] : extra[i - nb];
    size_t klen = (size_t)(strchrnul(e, '=') - e);
    size_t k;
    for (k = 0; k < n; k++)
      if (!strncmp(env[k], e, klen) && env[k][klen] == '=')
        break;
    env[k] = (char *)e;
    if (k == n)
      n++;
  }
  env[n] = NULL;
  return env;
}

/* Relay state for one run. */
struct relay {
  int out_r, err_r;   /* box stdout/stderr, read ends */
  int in_w;           /* box stdin, write end (-1 when closed) */
  int host_in;        /* host stdin (-1 when done) */
  char inbuf[RELAY_CHUNK];
  size_t in_len, in_off;
  uint64_t output, limit;
  bool truncated;
  bool host_out_broken[2];
};

static void emit(const struct husk_run_spec *spec, struct relay *rl, int which, const char *buf,
                 size_t n) {
  int fd = which == 0 ? spec->stdout_fd : spec->stderr_fd;
  if (fd < 0 || rl->host_out_broken[which])
    return;
  if (write_all(fd, buf, n) < 0)
    rl->host_out_broken[which] = true; /* e.g. the reader went away: keep the box's side going */
}

/* Read what is available on one output pipe.  Returns false at EOF. */
static bool pump_output(const struct husk_run_spec *spec, struct relay *rl, int which,
                        bool *over_limit) {
  int fd = which == 0 ? rl->out_r : rl->err_r;
  char buf[RELAY_CHUNK];
  ssize_t n = read(fd, buf, sizeof buf);
  if (n < 0)
    return errno == EAGAIN || errno == EINTR;
  if (n == 0)
    return false;
  uint64_t allowed = rl->output < rl->limit ? rl->limit - rl->output : 0;
  size_t take = (uint64_t)n < allowed ? (size_t)n : (size_t)allowed;
  if (take)
    emit(spec, rl, which, buf, take);
  rl->output += take;
  if ((size_t)n > take) {
    rl->truncated = true;
    *over_limit = true;
  }
  return true;
}

static void pump_stdin(struct relay *rl, bool readable, bool writable) {
  if (readable && rl->in_len == 0 && rl->host_in >= 0) {
    ssize_t n = read(rl->host_in, rl->inbuf, sizeof rl->inbuf);
    if (n > 0) {
      rl->in_len = (size_t)n;
      rl->in_off = 0;
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      rl->host_in = -1; /* EOF: pass it on */
      close_quiet(rl->in_w);
      rl->in_w = -1;
    }
  }
  if (writable && rl->in_len > 0 && rl->in_w >= 0) {
    ssize_t n = write(rl->in_w, rl->inbuf + rl->in_off, rl->in_len);
    if (n > 0) {
      rl->in_off += (size_t)n;
      rl->in_len -= (size_t)n;
    } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
      /* The program closed its stdin: stop reading ours. */
      close_quiet(rl->in_w);
      rl->in_w = -1;
      rl->host_in = -1;
      rl->in_len = 0;
    }
  }
}

static void finish_exit(struct husk_run_result *res, int status) {
  if (WIFEXITED(status)) {
    res->exit_code = WEXITSTATUS(status);
    res->reason = HUSK_REASON_EXITED;
  } else if (WIFSIGNALED(status)) {
    res->signal = WTERMSIG(status);
    res->exit_code = 128 + res->signal;
    res->reason = HUSK_REASON_SIGNALED;
  }
}

static void forced(struct husk_run_result *res, enum husk_reason why) {
  res->reason = why;
  res->signal = SIGKILL;
  res->exit_code = why == HUSK_REASON_TIMEOUT ? 124 : 128 + SIGKILL;
}

static int arm(int tfd, uint64_t first_ms, uint64_t interval_ms) {
  struct itimerspec its = {
      .it_value = {.tv_sec = (time_t)(first_ms / 1000), .tv_nsec = (long)(first_ms % 1000) * 1000000L},
      .it_interval = {.tv_sec = (time_t)(interval_ms / 1000), .tv_nsec = (long)(interval_ms % 1000) * 1000000L}};
  return timerfd_settime(tfd, 0, &its, NULL);
}

/* Start the program and relay until it and the box are done. */
static void supervise(struct jail *j, const struct husk_run_spec *spec, int sfd,
                      struct husk_run_result *res) {
  struct husk_err err;
  cleanup_free char **env = build_env(spec->env);
  int out[2] = {-1, -1}, errp[2] = {-1, -1}, in[2] = {-1, -1};
  int deadline = -1, tick = -1;
  struct relay rl = {.out_r = -1, .err_r = -1, .in_w = -1, .host_in = -1,
                     .limit = spec->limits.output_bytes};
  if (!env) {
    husk_error(&err, ENOMEM, "environment");
    setup_error(res, &err);
    return;
  }
  if (pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 ||
      (spec->stdin_fd >= 0 && pipe2(in, O_CLOEXEC) < 0)) {
    husk_error(&err, errno, "pipe");
    setup_error(res, &err);
    goto out;
  }
  deadline = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  tick = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  if (deadline < 0 || tick < 0) {
    husk_error(&err, errno, "timerfd");
    setup_error(res, &err);
    goto out;
  }
  int fds[3] = {in[0], out[1], errp[1]};
  const char *cwd = spec->workdir ? spec->workdir : "/workspace";
  uint64_t t0 = now_ms();
  if (jail_exec(j, 1, spec->argv, env, cwd, fds, &err) < 0) {
    setup_error(res, &err);
    goto out;
  }
  close_quiet(in[0]);
  close_quiet(out[1]);
  close_quiet(errp[1]);
  in[0] = out[1] = errp[1] = -1;
  rl.out_r = out[0];
  rl.err_r = errp[0];
  rl.in_w = in[1];
  rl.host_in = spec->stdin_fd;
  fcntl(rl.out_r, F_SETFL, O_NONBLOCK);
  fcntl(rl.err_r, F_SETFL, O_NONBLOCK);
  if (rl.in_w >= 0)
    fcntl(rl.in_w, F_SETFL, O_NONBLOCK);
  if (arm(deadline, spec->limits.timeout_ms, 0) < 0 || arm(tick, TRIP_POLL_MS, TRIP_POLL_MS) < 0) {
    husk_error(&err, errno, "timerfd_settime");
    setup_error(res, &err);
    goto out;
  }

  bool done = false;     /* the run's outcome is decided; the box is being killed */
  bool ctl_open = true;
  pid_t prog = 0;        /* the program's pid inside the box */
  bool out_open = true, err_open = true;
  while (out_open || err_open || (ctl_open && !done)) {
    struct pollfd p[8];
    int np = 0, ictl = -1, iout = -1, ierr = -1, iin = -1, iinw = -1, isig = -1, idl = -1, itk = -1;
    if (ctl_open && !done) { ictl = np; p[np++] = (struct pollfd){.fd = j->ctl, .events = POLLIN}; }
    if (out_open) { iout = np; p[np++] = (struct pollfd){.fd = rl.out_r, .events = POLLIN}; }
    if (err_open) { ierr = np; p[np++] = (struct pollfd){.fd = rl.err_r, .events = POLLIN}; }
    if (!done && rl.host_in >= 0 && rl.in_len == 0 && rl.in_w >= 0) { iin = np; p[np++] = (struct pollfd){.fd = rl.host_in, .events = POLLIN}; }
    if (!done && rl.in_len > 0 && rl.in_w >= 0) { iinw = np; p[np++] = (struct pollfd){.fd = rl.in_w, .events = POLLOUT}; }
    if (!done) {
      isig = np; p[np++] = (struct pollfd){.fd = sfd, .events = POLLIN};
      idl = np; p[np++] = (struct pollfd){.fd = deadline, .events = POLLIN};
      itk = np; p[np++] = (struct pollfd){.fd = tick, .events = POLLIN};
    }
    if (poll(p, (nfds_t)np, -1) < 0) {
      if (errno == EINTR)
        continue;
      husk_error(&err, errno, "poll");
      setup_error(res, &err);
      jail_kill(j);
      break;
    }
    bool over = false;
    if (iout >= 0 && p[iout].revents)
      out_open = pump_output(spec, &rl, 0, &over);
    if (ierr >= 0 && p[ierr].revents)
      err_open = pump_output(spec, &rl, 1, &over);
    if (over && !done) {
      forced(res, HUSK_REASON_OUTPUT);
      res->wall_ms = now_ms() - t0;
      done = true;
      jail_kill(j);
    }
    if (done) {
      if (over || rl.truncated) {
        /* Past the cap: keep draining so the box can die, but emit nothing. */
        rl.limit = rl.output;
      }
      continue;
    }
    if ((iin >= 0 && p[iin].revents) || (iinw >= 0 && p[iinw].revents))
      pump_stdin(&rl, iin >= 0 && p[iin].revents, iinw >= 0 && p[iinw].revents);
    if (isig >= 0 && p[isig].revents & POLLIN) {
      struct signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si)
        if (prog > 0)
          jail_signal(j, prog, (int)si.ssi_signo, true, &err);
    }
    if (idl >= 0 && p[idl].revents & POLLIN) {
      forced(res, HUSK_REASON_TIMEOUT);
      res->wall_ms = now_ms() - t0;
      done = true;
      jail_kill(j);
      continue;
    }
    if (itk >= 0 && p[itk].revents & POLLIN) {
      uint64_t ticks;
      if (read(tick, &ticks, sizeof ticks) < 0) {
        /* nothing to do: the timer is level-triggered through poll */
      }
      enum cgroup_trip t = cgroup_tripped(&j->cg);
      if (t != CGROUP_TRIP_NONE) {
        forced(res, t == CGROUP_TRIP_MEMORY ? HUSK_REASON_MEMORY : HUSK_REASON_PIDS);
        res->wall_ms = now_ms() - t0;
        done = true;
        jail_kill(j);
        continue;
      }
    }
    if (ictl >= 0 && p[ictl].revents) {
      union jail_event ev;
      int rc = jail_recv(j, &ev, &err);
      if (rc <= 0) {
        /* init is gone without reporting the program's end: a limit took
         * the whole box (v2 memory.oom.group), or something broke. */
        ctl_open = false;
        enum cgroup_trip t = cgroup_tripped(&j->cg);
        if (t == CGROUP_TRIP_MEMORY) forced(res, HUSK_REASON_MEMORY);
        else if (t == CGROUP_TRIP_PIDS) forced(res, HUSK_REASON_PIDS);
        else {
          if (rc == 0)
            husk_fail(&err, EIO, "the box ended unexpectedly");
          setup_error(res, &err);
        }
        res->wall_ms = now_ms() - t0;
        done = true;
        jail_kill(j);
      } else if (ev.h.type == CTL_STARTED) {
        if (ev.started.error) {
          int e = ev.started.error;
          if (ev.started.stage == CTL_STAGE_EXEC) {
            res->exit_code = (e == ENOENT || e == ENOTDIR || e == ENAMETOOLONG) ? 127 : 126;
            res->reason = HUSK_REASON_EXITED;
            set_message(res, "%s: %s", spec->argv[0],
                        res->exit_code == 127 ? "command not found" : strerror(e));
          } else {
            husk_error(&err, e, "cannot start `%s` (%s in `%s`)", spec->argv[0],
                       ctl_stage_name(ev.started.stage), cwd);
            setup_error(res, &err);
          }
          res->wall_ms = now_ms() - t0;
          done = true;
          jail_kill(j);
        } else {
          prog = ev.started.pid;
        }
      } else if (ev.h.type == CTL_EXITED) {
        res->wall_ms = now_ms() - t0;
        finish_exit(res, ev.exited.status);
        enum cgroup_trip t = cgroup_tripped(&j->cg);
        if (t == CGROUP_TRIP_MEMORY) forced(res, HUSK_REASON_MEMORY);
        else if (t == CGROUP_TRIP_PIDS) forced(res, HUSK_REASON_PIDS);
        done = true;
        jail_kill(j);
      }
    }
  }
  /* Output that arrived before the cap was reached and the program ended
   * may have been cut by the kill; the cap still governs what was emitted. */
  res->output_bytes = rl.output;
  res->output_truncated = rl.truncated;
out:
  close_quiet(out[0]);
  close_quiet(out[1]);
  close_quiet(errp[0]);
  close_quiet(errp[1]);
  close_quiet(in[0]);
  close_quiet(rl.in_w);
  close_quiet(deadline);
  close_quiet(tick);
}

static int copy_in(struct jail *j, const struct husk_run_spec *spec, struct husk_err *err) {
  cleanup_close int src = open(spec->workspace_in, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (src < 0)
    return husk_error(err, errno, "cannot open workspace directory `%s`", spec->workspace_in);
  cleanup_close int dst = openat(j->fs, "workspace", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dst < 0)
    return husk_error(err, errno, "cannot open the box's workspace");
  struct copy_warn w = {.spec = spec, .direction = "workspace"};
  struct copy_opts o = {.uid = jail_host_id(j, HUSK_BOX_UID), .gid = jail_host_id(j, HUSK_BOX_GID),
                        .max_depth = COPY_MAX_DEPTH, .skipped = copy_skipped, .ctx = &w};
  if (copy_tree(src, dst, &o, NULL, err) < 0) {
    if (err->code == ENOSPC)
      return husk_error_wrap(err, "workspace `%s` does not fit in the box (raise --disk)", spec->workspace_in);
    return husk_error_wrap(err, "cannot copy workspace `%s` into the box", spec->workspace_in);
  }
  return 0;
}

static int mkdir_p_host(const char *path) {
  char buf[PATH_MAX];
  if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) {
    errno = ENAMETOOLONG;
    return -1;
  }
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    if (mkdir(buf, 0755) < 0 && errno != EEXIST)
      return -1;
    *p = '/';
  }
  if (mkdir(buf, 0755) < 0 && errno != EEXIST)
    return -1;
  return 0;
}

static int copy_out(struct jail *j, const struct husk_run_spec *spec, struct husk_err *err) {
  if (mkdir_p_host(spec->export_dir) < 0)
    return husk_error(err, errno, "cannot create export directory `%s`", spec->export_dir);
  cleanup_close int dst = open(spec->export_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dst < 0)
    return husk_error(err, errno, "cannot open export directory `%s`", spec->export_dir);
  cleanup_close int src = openat(j->fs, "workspace", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (src < 0)
    return husk_error(err, errno, "cannot open the box's workspace");
  struct copy_warn w = {.spec = spec, .direction = "export"};
  /* Exported files belong to whoever runs husk, not to the box's uid. */
  struct copy_opts o = {.uid = getuid(), .gid = getgid(), .max_depth = COPY_MAX_DEPTH,
                        .skipped = copy_skipped, .ctx = &w};
  if (copy_tree(src, dst, &o, NULL, err) < 0)
    return husk_error_wrap(err, "cannot export the workspace to `%s`", spec->export_dir);
  return 0;
}

int husk_run(const struct husk_run_spec *spec, struct husk_run_result *res) {
  memset(res, 0, sizeof *res);
  struct husk_err err;
  struct husk_limits lim = spec->limits;
  if (husk_limits_resolve(&lim, res->message, sizeof res->message) < 0) {
    res->exit_code = 125;
    res->reason = HUSK_REASON_SETUP_ERROR;
    return res->exit_code;
  }
  struct husk_run_spec s = *spec;
  s.limits = lim;
  if (!s.argv || !s.argv[0] || !s.argv[0][0]) {
    husk_fail(&err, EINVAL, "no program to run");
    setup_error(res, &err);
    return res->exit_code;
  }
  if (s.workdir && s.workdir[0] != '/') {
    husk_fail(&err, EINVAL, "working directory `%s` must be an absolute path", s.workdir);
    setup_error(res, &err);
    return res->exit_code;
  }

  /* Boxes of husk processes that were SIGKILLed: their processes died with
   * them (PDEATHSIG), but the empty cgroups are ours to remove. */
  cgroup_sweep("run-", stale_run_cgroup);

  /* Signals that should reach the program, not kill husk mid-run. */
  sigset_t mask, old;
  sigemptyset(&mask);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGHUP);
  sigaddset(&mask, SIGQUIT);
  sigprocmask(SIG_BLOCK, &mask, &old);
  struct sigaction ign = {.sa_handler = SIG_IGN}, old_pipe;
  sigaction(SIGPIPE, &ign, &old_pipe);
  int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);

  unsigned rnd = 0;
  if (getentropy(&rnd, sizeof rnd) < 0)
    rnd = (unsigned)now_ms();
  char name[64];
  snprintf(name, sizeof name, "run-%d-%08x", (int)getpid(), rnd);
  struct jail_config cfg = {
      .limits = {.memory_bytes = lim.memory_bytes, .pids = lim.pids, .cpu_milli = lim.cpu_milli},
      .disk_bytes = lim.disk_bytes, .name = name, .die_with_parent = true};
  struct jail j;
  if (sfd < 0) {
    husk_error(&err, errno, "signalfd");
    setup_error(res, &err);
  } else if (jail_create(&j, &cfg, &err) < 0) {
    husk_error_wrap(&err, "cannot create the box");
    setup_error(res, &err);
  } else {
    if (s.workspace_in && copy_in(&j, &s, &err) < 0)
      setup_error(res, &err);
    else
      supervise(&j, &s, sfd, res);
    struct cgroup_stats st;
    struct husk_err derr;
    if (jail_destroy(&j, false, &st, &derr) < 0 && res->reason != HUSK_REASON_SETUP_ERROR) {
      setup_error(res, &derr);
    }
    res->cpu_ms = st.cpu_usec / 1000;
    res->memory_peak_bytes = st.memory_peak;
    if (s.export_dir && copy_out(&j, &s, &err) < 0) {
      res->exit_code = 125;
      res->reason = HUSK_REASON_SETUP_ERROR;
      set_message(res, "%s", err.msg);
    }
    close_quiet(j.fs);
  }
  close_quiet(sfd);
  sigaction(SIGPIPE, &old_pipe, NULL);
  sigprocmask(SIG_SETMASK, &old, NULL);
  return res->exit_code;
}
