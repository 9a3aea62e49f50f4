#define _GNU_SOURCE
#include "box/exec.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/clock.h"

#define RELAY_CHUNK (64 * 1024)
#define TRIP_POLL_MS 20
#define LINGER_MS 50 /* process mode: how long to wait for output after exit */

char **exec_build_env(char *const *box_env, char *const *extra) {
  static const char *const base[] = {
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/workspace",
      "LANG=C.UTF-8", "TERM=xterm"};
  size_t nb = sizeof base / sizeof base[0], n1 = 0, n2 = 0;
  while (box_env && box_env[n1])
    n1++;
  while (extra && extra[n2])
    n2++;
  char **env = calloc(nb + n1 + n2 + 1, sizeof *env);
  if (!env)
    return NULL;
  size_t n = 0;
  for (size_t i = 0; i < nb + n1 + n2; i++) {
    const char *e = i < nb ? base[i] : i < nb + n1 ? box_env[i - nb] : extra[i - nb - n1];
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

__attribute__((format(printf, 2, 3))) static void msg(struct husk_exec_result *o, const char *fmt,
                                                         ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(o->message, sizeof o->message, fmt, ap);
  va_end(ap);
  husk_sanitize_line(o->message);
}

static void failed(struct husk_exec_result *o, const struct husk_err *err) {
  o->exit_code = 125;
  o->reason = HUSK_REASON_SETUP_ERROR;
  msg(o, "%s", err->msg);
}

static void forced(struct husk_exec_result *o, enum husk_reason why) {
  o->reason = why;
  o->signal = SIGKILL;
  o->exit_code = why == HUSK_REASON_TIMEOUT ? 124 : 128 + SIGKILL;
}

static void finish_status(struct husk_exec_result *o, int status) {
  if (WIFEXITED(status)) {
    o->exit_code = WEXITSTATUS(status);
    o->reason = HUSK_REASON_EXITED;
    o->signal = 0;
  } else if (WIFSIGNALED(status)) {
    o->signal = WTERMSIG(status);
    o->exit_code = 128 + o->signal;
    o->reason = HUSK_REASON_SIGNALED;
  }
}

static int arm(int tfd, uint64_t first_ms, uint64_t interval_ms) {
  struct itimerspec its = {
      .it_value = {.tv_sec = (time_t)(first_ms / 1000), .tv_nsec = (long)(first_ms % 1000) * 1000000L},
      .it_interval = {.tv_sec = (time_t)(interval_ms / 1000),
                      .tv_nsec = (long)(interval_ms % 1000) * 1000000L}};
  return timerfd_settime(tfd, 0, &its, NULL);
}

struct relay {
  const struct exec_spec *spec;
  int out_r, err_r, in_w;
  int host_in;
  const char *inbuf;
  size_t in_len;
  char buf[RELAY_CHUNK];
  uint64_t output;
  bool truncated, sink_gone;
};

/* Read what is available on one output pipe.  Returns false at EOF. */
static bool pump_output(struct relay *rl, int stream, bool *over) {
  int fd = stream == 1 ? rl->out_r : rl->err_r;
  char buf[RELAY_CHUNK];
  ssize_t n = read(fd, buf, sizeof buf);
  if (n < 0)
    return errno == EAGAIN || errno == EINTR;
  if (n == 0)
    return false;
  uint64_t limit = rl->spec->output_limit;
  uint64_t allowed = rl->output < limit ? limit - rl->output : 0;
  size_t take = (uint64_t)n < allowed ? (size_t)n : (size_t)allowed;
  if (take && !rl->sink_gone && rl->spec->sink &&
      rl->spec->sink(rl->spec->sink_ctx, stream, buf, take) < 0)
    rl->sink_gone = true;
  rl->output += take;
  if ((size_t)n > take) {
    rl->truncated = true;
    *over = true;
  }
  return true;
}

static void close_stdin(struct relay *rl) {
  close_quiet(rl->in_w);
  rl->in_w = -1;
  rl->host_in = -1;
  rl->in_len = 0;
}

static void pump_stdin(struct relay *rl, bool readable, bool writable) {
  if (readable && rl->in_len == 0 && rl->host_in >= 0) {
    ssize_t n = read(rl->host_in, rl->buf, sizeof rl->buf);
    if (n > 0) {
      rl->inbuf = rl->buf;
      rl->in_len = (size_t)n;
    } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
      close_stdin(rl); /* EOF: pass it on */
    }
  }
  if (writable && rl->in_len > 0 && rl->in_w >= 0) {
    ssize_t n = write(rl->in_w, rl->inbuf, rl->in_len);
    if (n > 0) {
      rl->inbuf += n;
      rl->in_len -= (size_t)n;
      if (rl->in_len == 0 && rl->host_in < 0)
        close_stdin(rl); /* buffer fully delivered: EOF */
    } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
      close_stdin(rl); /* the program closed its stdin */
    }
  }
}

int exec_relay(struct jail *j, int conn, bool whole_box, const struct exec_spec *spec,
               struct husk_exec_result *o) {
  struct husk_err err;
  memset(o, 0, sizeof *o);
  int out[2] = {-1, -1}, errp[2] = {-1, -1}, in[2] = {-1, -1};
  int deadline = -1, tick = -1;
  struct relay rl = {.spec = spec, .out_r = -1, .err_r = -1, .in_w = -1, .host_in = -1};
  /* stdin is always a pipe (an fd cannot be sent "absent"); without input
   * its write end is closed at once, so the program reads EOF. */
  bool want_stdin = spec->stdin_fd >= 0 || spec->stdin_len > 0;
  if (pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 || pipe2(in, O_CLOEXEC) < 0) {
    husk_error(&err, errno, "pipe");
    failed(o, &err);
    goto out;
  }
  deadline = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  tick = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  if (deadline < 0 || tick < 0) {
    husk_error(&err, errno, "timerfd");
    failed(o, &err);
    goto out;
  }
  int fds[3] = {in[0], out[1], errp[1]};
  uint64_t t0 = (uint64_t)mono_ms();
  if (jail_exec_fd(conn, 1, spec->argv, spec->env, spec->cwd, fds, CTL_EXEC_KILL_ON_HANGUP, &err) < 0) {
    failed(o, &err);
    goto out;
  }
  close_quiet(in[0]);
  close_quiet(out[1]);
  close_quiet(errp[1]);
  in[0] = out[1] = errp[1] = -1;
  rl.out_r = out[0];
  rl.err_r = errp[0];
  rl.in_w = want_stdin ? in[1] : -1;
  if (!want_stdin)
    close_quiet(in[1]);
  in[1] = -1;
  rl.host_in = spec->stdin_fd;
  if (spec->stdin_fd < 0) {
    rl.inbuf = spec->stdin_buf;
    rl.in_len = spec->stdin_len;
  }
  if (fcntl(rl.out_r, F_SETFL, O_NONBLOCK) < 0 || fcntl(rl.err_r, F_SETFL, O_NONBLOCK) < 0 ||
      (rl.in_w >= 0 && fcntl(rl.in_w, F_SETFL, O_NONBLOCK) < 0) ||
      arm(deadline, spec->timeout_ms, 0) < 0 || arm(tick, TRIP_POLL_MS, TRIP_POLL_MS) < 0) {
    husk_error(&err, errno, "relay setup");
    failed(o, &err);
    goto out;
  }

  bool done = false;     /* outcome decided; the program (or box) is being killed */
  bool exited = false;   /* init reported the end */
  bool ctl_open = true;
  bool out_open = true, err_open = true;
  uint64_t linger_until = 0;
  while (out_open || err_open || (ctl_open && !exited)) {
    if (done && exited && !whole_box) {
      /* Process mode: leftovers may hold the pipes; don't wait for them. */
      if (!linger_until)
        linger_until = (uint64_t)mono_ms() + LINGER_MS;
      else if ((uint64_t)mono_ms() >= linger_until)
        break;
    }
    struct pollfd p[10];
    int np = 0, ictl = -1, iout = -1, ierr = -1, iin = -1, iinw = -1, isig = -1, idl = -1,
        itk = -1, icancel = -1;
    if (ctl_open && !exited) { ictl = np; p[np++] = (struct pollfd){.fd = conn, .events = POLLIN}; }
    if (out_open) { iout = np; p[np++] = (struct pollfd){.fd = rl.out_r, .events = POLLIN}; }
    if (err_open) { ierr = np; p[np++] = (struct pollfd){.fd = rl.err_r, .events = POLLIN}; }
    if (!done && rl.host_in >= 0 && rl.in_len == 0 && rl.in_w >= 0) { iin = np; p[np++] = (struct pollfd){.fd = rl.host_in, .events = POLLIN}; }
    if (!done && rl.in_len > 0 && rl.in_w >= 0) { iinw = np; p[np++] = (struct pollfd){.fd = rl.in_w, .events = POLLOUT}; }
    if (!done) {
      if (spec->signal_fd >= 0) { isig = np; p[np++] = (struct pollfd){.fd = spec->signal_fd, .events = POLLIN}; }
      if (spec->cancel_fd >= 0) { icancel = np; p[np++] = (struct pollfd){.fd = spec->cancel_fd, .events = POLLIN}; }
      idl = np; p[np++] = (struct pollfd){.fd = deadline, .events = POLLIN};
      itk = np; p[np++] = (struct pollfd){.fd = tick, .events = POLLIN};
    }
    int timeout = linger_until ? (int)(linger_until > (uint64_t)mono_ms() ? linger_until - (uint64_t)mono_ms() : 0) : -1;
    if (poll(p, (nfds_t)np, timeout) < 0) {
      if (errno == EINTR)
        continue;
      husk_error(&err, errno, "poll");
      failed(o, &err);
      break;
    }
    bool over = false;
    if (iout >= 0 && p[iout].revents)
      out_open = pump_output(&rl, 1, &over);
    if (ierr >= 0 && p[ierr].revents)
      err_open = pump_output(&rl, 2, &over);
    enum husk_reason stop = HUSK_REASON_EXITED;
    bool stop_now = false;
    if (!done && over) {
      stop = HUSK_REASON_OUTPUT;
      stop_now = true;
    }
    if (!done && !stop_now && rl.sink_gone) {
      husk_fail(&err, ECANCELED, "the client went away");
      failed(o, &err);
      stop_now = true;
      stop = HUSK_REASON_SETUP_ERROR;
    }
    if (!done && !stop_now) {
      if ((iin >= 0 && p[iin].revents) || (iinw >= 0 && p[iinw].revents))
        pump_stdin(&rl, iin >= 0 && p[iin].revents, iinw >= 0 && p[iinw].revents);
      if (isig >= 0 && p[isig].revents & POLLIN) {
        struct signalfd_siginfo si;
        while (read(spec->signal_fd, &si, sizeof si) == (ssize_t)sizeof si)
          if (o->pid > 0)
            jail_signal_fd(conn, o->pid, (int)si.ssi_signo, true, &err);
      }
      if (icancel >= 0 && p[icancel].revents) {
        husk_fail(&err, ECANCELED, "cancelled");
        failed(o, &err);
        stop_now = true;
        stop = HUSK_REASON_SETUP_ERROR;
      } else if (idl >= 0 && p[idl].revents & POLLIN) {
        stop = HUSK_REASON_TIMEOUT;
        stop_now = true;
      } else if (itk >= 0 && p[itk].revents & POLLIN) {
        uint64_t ticks;
        if (read(tick, &ticks, sizeof ticks) < 0) {
          /* level-triggered through poll: nothing lost */
        }
        enum cgroup_trip t = cgroup_tripped(&j->cg);
        if (whole_box && t != CGROUP_TRIP_NONE) {
          stop = t == CGROUP_TRIP_MEMORY ? HUSK_REASON_MEMORY : HUSK_REASON_PIDS;
          stop_now = true;
        }
      }
    }
    if (stop_now) {
      if (stop != HUSK_REASON_SETUP_ERROR)
        forced(o, stop);
      o->wall_ms = (uint64_t)mono_ms() - t0;
      done = true;
      if (whole_box)
        jail_kill(j);
      else if (o->pid > 0)
        jail_signal_fd(conn, o->pid, SIGKILL, true, &err);
      else
        exited = true; /* not started yet: nothing to wait for */
      continue;
    }
    if (ictl >= 0 && p[ictl].revents) {
      union jail_event ev;
      int rc = jail_recv_fd(conn, &ev, &err);
      if (rc <= 0) {
        /* init is gone without reporting the end: a limit took the whole
         * box (v2 memory.oom.group), the box was killed, or it broke. */
        ctl_open = false;
        exited = true;
        if (!done) {
          enum cgroup_trip t = cgroup_tripped(&j->cg);
          if (t == CGROUP_TRIP_MEMORY)
            forced(o, HUSK_REASON_MEMORY);
          else if (t == CGROUP_TRIP_PIDS)
            forced(o, HUSK_REASON_PIDS);
          else {
            if (rc == 0)
              husk_fail(&err, EIO, "the box ended while the program was running");
            failed(o, &err);
          }
          o->wall_ms = (uint64_t)mono_ms() - t0;
          done = true;
        }
        if (whole_box)
          jail_kill(j);
      } else if (ev.h.type == CTL_STARTED) {
        if (ev.started.error) {
          int e = ev.started.error;
          if (ev.started.stage == CTL_STAGE_EXEC) {
            o->exit_code = (e == ENOENT || e == ENOTDIR || e == ENAMETOOLONG) ? 127 : 126;
            o->reason = HUSK_REASON_EXITED;
            msg(o, "%s: %s", spec->argv[0], o->exit_code == 127 ? "command not found" : strerror(e));
          } else {
            husk_error(&err, e, "cannot start `%s` (%s in `%s`)", spec->argv[0],
                       ctl_stage_name(ev.started.stage), spec->cwd);
            failed(o, &err);
          }
          o->wall_ms = (uint64_t)mono_ms() - t0;
          done = exited = true;
          if (whole_box)
            jail_kill(j);
        } else {
          o->pid = ev.started.pid;
          if (spec->started)
            spec->started(spec->sink_ctx, o->pid);
        }
      } else if (ev.h.type == CTL_EXITED && ev.exited.id == 1) {
        exited = true;
        if (!done) {
          o->wall_ms = (uint64_t)mono_ms() - t0;
          finish_status(o, ev.exited.status);
          enum cgroup_trip t = cgroup_tripped(&j->cg);
          if (whole_box && t == CGROUP_TRIP_MEMORY)
            forced(o, HUSK_REASON_MEMORY);
          else if (whole_box && t == CGROUP_TRIP_PIDS)
            forced(o, HUSK_REASON_PIDS);
          else if (!whole_box && o->signal == SIGKILL && t == CGROUP_TRIP_MEMORY)
            o->reason = HUSK_REASON_MEMORY;
          done = true;
        }
        if (whole_box)
          jail_kill(j);
      }
    }
  }
  o->output_bytes = rl.output;
  o->truncated = rl.truncated;
out:
  close_quiet(out[0]);
  close_quiet(out[1]);
  close_quiet(errp[0]);
  close_quiet(errp[1]);
  close_quiet(in[0]);
  close_quiet(in[1]);
  close_quiet(rl.in_w);
  close_quiet(deadline);
  close_quiet(tick);
  return o->reason == HUSK_REASON_SETUP_ERROR ? -1 : 0;
}
