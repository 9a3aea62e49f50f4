#define _GNU_SOURCE
#include "jail/init.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jail/ctl.h"
#include "jail/landlock.h"
#include "jail/limits.h"
#include "jail/privs.h"
#include "jail/syscalls.h"
#include "util/fileio.h"

/* Static storage only: init may be cloned from a multi-threaded daemon,
 * where malloc's locks could be held by a thread that does not exist here. */
#define MAX_ARGS 8192
#define MAX_TRACKED HUSK_INIT_TRACKED

static char msgbuf[HUSK_CTL_MSG_MAX];
static const char *argv_buf[MAX_ARGS];
static const char *env_buf[MAX_ARGS];

#define MAX_CONNS 64

/* Connections from the host.  A slot's generation changes when it is
 * reused, so an exit is never reported to a stranger that took the slot. */
static struct conn {
  int fd;
  unsigned gen;
} conns[MAX_CONNS];
static int watch = -1; /* slot of the CTL_WATCH connection */

/* Started processes, and the exits not yet delivered or, for
 * CTL_EXEC_ACK_EXIT, not yet acknowledged.  A slot is free when pid is 0.
 * An exited slot keeps its pid for CTL_EXIT_ACK to name it, but is never
 * matched by the reaper: the kernel may give that pid to a new process. */
static struct tracked {
  pid_t pid;
  uint64_t id;
  int conn;
  unsigned gen;
  uint32_t flags; /* CTL_EXEC_* */
  bool exited;
  bool sent; /* delivered since the last CTL_WATCH (exited only) */
  int status;
  uint32_t nheld; /* CTL_HOLD fds, kept while it runs */
  int held[CTL_HOLD_MAX_FDS];
} tracked[MAX_TRACKED];

static void drop_held(struct tracked *t) {
  for (uint32_t i = 0; i < t->nheld; i++)
    close(t->held[i]);
  t->nheld = 0;
}

static void tracked_clear(struct tracked *t) {
  drop_held(t);
  *t = (struct tracked){0};
}

/* The watch connection has exits it could not take yet (its socket was
 * full): poll it for POLLOUT and go on then. */
static bool watch_backlog;

static const struct init_config *config;
static int cur = -1; /* slot of the connection being served */

struct exec_failure {
  int32_t stage;
  int32_t error;
};

static const char *env_get(const char *const *env, const char *name) {
  size_t n = strlen(name);
  for (; *env; env++)
    if (!strncmp(*env, name, n) && (*env)[n] == '=')
      return *env + n + 1;
  return NULL;
}

/* execvp with the PATH of the program's own environment, and execvp's
 * error precedence (EACCES from any candidate wins over ENOENT).  Returns
 * only on failure. */
static int exec_search(const char *file, char *const argv[], char *const env[],
                       struct husk_err *err) {
  if (strchr(file, '/')) {
    execve(file, argv, env);
    return husk_error(err, errno, "cannot execute `%s`", file);
  }
  const char *path = env_get((const char *const *)env, "PATH");
  if (!path)
    path = "/usr/local/bin:/usr/bin:/bin";
  int e = ENOENT;
  size_t flen = strlen(file);
  for (const char *p = path;; p++) {
    const char *colon = strchrnul(p, ':');
    size_t dlen = (size_t)(colon - p);
    char full[PATH_MAX];
    if (dlen + 1 + flen + 1 <= sizeof full) {
      if (dlen == 0) {
        memcpy(full, file, flen + 1);
      } else {
        memcpy(full, p, dlen);
        full[dlen] = '/';
        memcpy(full + dlen + 1, file, flen + 1);
      }
      execve(full, argv, env);
      if (errno == EACCES)
        e = EACCES;
      else if (errno != ENOENT && errno != ENOTDIR && e != EACCES)
        e = errno;
    }
    if (!*colon)
      break;
    p = colon;
  }
  return husk_error(err, e, "cannot execute `%s` from the PATH", file);
}

/* How a program's start failed, written by the child into memory it
 * shares with init (CLONE_VM, below) before it exits. */
static volatile struct exec_failure spawn_failure;

static _Noreturn void exec_fail(int stage, int error) {
  spawn_failure.stage = stage;
  spawn_failure.error = error;
  _exit(127);
}

/* The child's stack.  It runs on init's memory (CLONE_VM) while init
 * waits (CLONE_VFORK), so one stack serves every start.  Mapped once, with
 * a guard page below it: an overflow faults instead of writing over
 * init's data. */
#define SPAWN_STACK_SIZE (128 * 1024)
static char *spawn_stack; /* the usable part, above the guard page */

/* Landlock for programs, built once (landlock_box_ruleset); -1: build it per
 * program instead (the first build failed; the failure is then reported by
 * every start rather than silently skipped). */
static int program_ruleset = -1;

struct spawn_args {
  const int *fds;
  size_t nfds;
  const char *cwd;
  char *const *argv;
  char *const *env;
};

/* In the child, on spawn_stack: become the requested program.  It shares
 * init's memory until execve, so it writes nothing of init's but
 * spawn_failure, calls nothing that allocates, and ends in execve or
 * _exit. */
static int exec_child(void *arg) {
  const struct spawn_args *a = arg;
  /* Dispositions were reset once in init_main; the mask (do_exec blocks
   * everything around the clone) is cleared here. */
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL);
  /* Its own session and process group: the host can signal the group, and
   * the program has no controlling terminal to inject input into. */
  if (setsid() < 0)
    exec_fail(CTL_STAGE_SETUP, errno);
  int nprog = a->nfds > 3 ? (int)a->nfds : 3;
  int stdio[CTL_EXEC_MAX_FDS];
  for (int i = 0; i < nprog; i++) {
    int src = (size_t)i < a->nfds ? a->fds[i] : -1;
    if (src < 0)
      src = open("/dev/null", i == 0 ? O_RDONLY : O_WRONLY);
    if (src < 0)
      exec_fail(CTL_STAGE_SETUP, errno);
    /* out of the range the program gets before dup2 */
    stdio[i] = fcntl(src, F_DUPFD, 10 + CTL_EXEC_MAX_FDS);
    if (stdio[i] < 0)
      exec_fail(CTL_STAGE_SETUP, errno);
  }
  for (int i = 0; i < nprog; i++)
    if (dup2(stdio[i], i) < 0)
      exec_fail(CTL_STAGE_SETUP, errno);
  /* init is uid 0 of the box with just enough to do this; the program
   * gets the box user and no capability at all. */
  struct husk_err err;
  if (privs_drop_for_program(config->uid, config->gid, &err) < 0)
    exec_fail(CTL_STAGE_SETUP, err.code);
  /* Everything else closes at exec. */
  if (sys_close_range((unsigned)nprog, ~0U, CLOSE_RANGE_CLOEXEC) < 0)
    exec_fail(CTL_STAGE_SETUP, errno);
  umask(022);
  if (chdir(a->cwd) < 0) {
    int e = errno;
    if (e != ENOENT || mkdir_p(a->cwd, 0755) < 0 || chdir(a->cwd) < 0)
      exec_fail(CTL_STAGE_CWD, e);
  }
  /* A nested Landlock domain per program: on ABI 6+ it cannot signal or
   * connect to init, which lives in the outer domain. */
  int rc = program_ruleset >= 0 ? landlock_restrict(program_ruleset, &err)
                                : landlock_apply_box(config->landlock_abi,
                                                     config->writable_root, &err);
  if (rc < 0)
    exec_fail(CTL_STAGE_SETUP, err.code);
  exec_search(a->argv[0], a->argv, a->env, &err);
  exec_fail(CTL_STAGE_EXEC, err.code);
}

static bool conn_send(int slot, const void *m, size_t len, const int *fds, size_t nfds) {
  return slot >= 0 && conns[slot].fd >= 0 && ctl_send(conns[slot].fd, m, len, fds, nfds, NULL) == 0;
}

/* Non-blocking: init must never wait for the host to read. */
static int conn_try_send(int slot, const void *m, size_t len, struct husk_err *err) {
  if (slot < 0 || conns[slot].fd < 0)
    return husk_fail(err, ENOTCONN, "no connection to send on");
  ssize_t n;
  do
    n = send(conns[slot].fd, m, len, MSG_DONTWAIT | MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    return husk_error(err, errno, "cannot send an exit to the host");
  if ((size_t)n != len)
    return husk_error(err, EIO, "cannot send an exit to the host (%zd of %zu bytes sent)", n, len);
  return 0;
}

/* Delivered: an exit nobody acknowledges is done with, the others wait for
 * CTL_EXIT_ACK. */
static void exit_sent(struct tracked *t) {
  if (t->flags & CTL_EXEC_ACK_EXIT)
    t->sent = true;
  else
    tracked_clear(t);
}

static void exit_msg(const struct tracked *t, struct ctl_exited *m) {
  *m = (struct ctl_exited){.h = {.type = CTL_EXITED, .len = sizeof *m},
                           .id = t->id,
                           .pid = t->pid,
                           .status = t->status};
}

/* Send the watch connection every exit it has not had yet, until its
 * socket is full. */
static void flush_watch(void) {
  watch_backlog = false;
  if (watch < 0)
    return;
  for (size_t i = 0; i < MAX_TRACKED; i++) {
    struct tracked *t = &tracked[i];
    if (t->pid <= 0 || !t->exited || t->sent)
      continue;
    struct ctl_exited m;
    exit_msg(t, &m);
    struct husk_err err;
    if (conn_try_send(watch, &m, sizeof m, &err) < 0) {
      if (err.code == EAGAIN || err.code == ENOBUFS)
        watch_backlog = true;
      return; /* else the connection is broken: its hangup closes it */
    }
    exit_sent(t);
  }
}

/* To the connection that started it if that is still there (its reader
 * waits for it), else to the watch connection, else kept for the next. */
static void deliver_exit(struct tracked *t) {
  struct ctl_exited m;
  exit_msg(t, &m);
  if (t->conn >= 0 && conns[t->conn].gen == t->gen &&
      conn_send(t->conn, &m, sizeof m, NULL, 0)) {
    exit_sent(t);
    return;
  }
  if (!watch_backlog)
    flush_watch();
}

static void reap(void) {
  for (;;) {
    int status;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid <= 0)
      return;
    for (size_t i = 0; i < MAX_TRACKED; i++) {
      if (tracked[i].pid == pid && !tracked[i].exited) {
        tracked[i].exited = true;
        tracked[i].sent = false;
        tracked[i].status = status;
        drop_held(&tracked[i]); /* nothing to take up any more */
        deliver_exit(&tracked[i]);
        break;
      }
    }
  }
}

static void reply_started(uint64_t id, pid_t pid, int stage, int error) {
  struct ctl_started m = {.h = {.type = CTL_STARTED, .len = sizeof m},
                          .id = id, .pid = pid, .stage = stage, .error = error};
  conn_send(cur, &m, sizeof m, NULL, 0);
}

static void do_exec(size_t len, int *fds, size_t nfds) {
  const struct ctl_exec *m = (const void *)msgbuf;
  const char *cwd;
  if (ctl_unpack_exec(msgbuf, len, &cwd, argv_buf, MAX_ARGS, env_buf, MAX_ARGS, NULL) < 0 ||
      m->nfds != nfds || (nfds != 0 && nfds < 3) || cwd[0] != '/') {
    reply_started(len >= sizeof *m ? m->id : 0, 0, CTL_STAGE_SETUP, EPROTO);
    return;
  }
  size_t slot = MAX_TRACKED;
  for (size_t i = 0; i < MAX_TRACKED; i++)
    if (tracked[i].pid == 0) {
      slot = i;
      break;
    }
  if (slot == MAX_TRACKED) {
    reply_started(m->id, 0, CTL_STAGE_FORK, EAGAIN);
    return;
  }
  /* posix_spawn's way: the child shares init's memory and init waits
   * until it has called execve (or failed), so the start copies no page
   * tables and needs no pipe to report a failure.  All signals are blocked
   * meanwhile so that nothing runs a handler on the shared memory. */
  struct spawn_args a = {.fds = fds, .nfds = nfds, .cwd = cwd, .argv = (char *const *)argv_buf,
                         .env = (char *const *)env_buf};
  spawn_failure.stage = 0;
  spawn_failure.error = 0;
  sigset_t all, old;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, &old);
  pid_t pid = clone(exec_child, spawn_stack + SPAWN_STACK_SIZE, CLONE_VM | CLONE_VFORK | SIGCHLD, &a);
  int e = errno;
  sigprocmask(SIG_SETMASK, &old, NULL);
  if (pid < 0) {
    reply_started(m->id, 0, CTL_STAGE_FORK, e);
    return;
  }
  if (spawn_failure.error != 0) {
    int status;
    waitpid(pid, &status, 0);
    reply_started(m->id, 0, spawn_failure.stage, spawn_failure.error);
    return;
  }
  tracked[slot] = (struct tracked){
      .pid = pid,
      .id = m->id,
      .conn = cur,
      .gen = conns[cur].gen,
      .flags = m->flags & (CTL_EXEC_KILL_ON_HANGUP | CTL_EXEC_ACK_EXIT)};
  reply_started(m->id, pid, CTL_STAGE_NONE, 0);
}

/* The host's pipe ends of a process it started, kept open for the next
 * daemon.  The fds are taken out of `fds` (set to -1) when kept. */
static void do_hold(size_t len, int *fds, size_t nfds) {
  const struct ctl_hold *h = (const void *)msgbuf;
  if (len != sizeof *h || h->pid <= 0 || h->nfds != nfds || nfds == 0 ||
      nfds > CTL_HOLD_MAX_FDS)
    return;
  for (size_t i = 0; i < MAX_TRACKED; i++) {
    struct tracked *t = &tracked[i];
    if (t->pid == h->pid && t->id == h->id && !t->exited) {
      drop_held(t);
      for (size_t k = 0; k < nfds; k++) {
        t->held[k] = fds[k];
        fds[k] = -1;
      }
      t->nheld = (uint32_t)nfds;
      return;
    }
  }
}

static void do_get_held(size_t len) {
  const struct ctl_hold *h = (const void *)msgbuf;
  if (len != sizeof *h)
    return;
  struct ctl_hold r = {.h = {.type = CTL_HELD, .len = sizeof r}, .id = h->id, .pid = h->pid};
  for (size_t i = 0; i < MAX_TRACKED; i++) {
    struct tracked *t = &tracked[i];
    if (h->pid > 0 && t->pid == h->pid && t->id == h->id && !t->exited && t->nheld) {
      /* Its exit is this connection's to report from now on. */
      t->conn = cur;
      t->gen = conns[cur].gen;
      r.nfds = t->nheld;
      conn_send(cur, &r, sizeof r, t->held, t->nheld);
      return;
    }
  }
  conn_send(cur, &r, sizeof r, NULL, 0);
}

static void do_signal(size_t len) {
  const struct ctl_signal *s = (const void *)msgbuf;
  if (len != sizeof *s || s->pid <= 1 || s->sig < 0 || s->sig >= NSIG)
    return;
  kill(s->group ? -s->pid : s->pid, s->sig);
}

/* A new watch connection gets every exit still held: those never
 * delivered and those delivered but not acknowledged (the host that got
 * them may have died before recording them). */
static void do_watch(void) {
  watch = cur;
  for (size_t i = 0; i < MAX_TRACKED; i++)
    if (tracked[i].pid > 0 && tracked[i].exited)
      tracked[i].sent = false;
  flush_watch();
}

static void do_exit_ack(size_t len) {
  const struct ctl_exit_ack *a = (const void *)msgbuf;
  if (len != sizeof *a || a->pid <= 0)
    return;
  for (size_t i = 0; i < MAX_TRACKED; i++) {
    struct tracked *t = &tracked[i];
    if (t->pid == a->pid && t->id == a->id && t->exited &&
        (t->flags & CTL_EXEC_ACK_EXIT)) {
      tracked_clear(t);
      return;
    }
  }
}

static void do_hello(void) {
  struct ctl_hello m = {.h = {.type = CTL_HELLO, .len = sizeof m},
                        .version = CTL_VERSION};
  conn_send(cur, &m, sizeof m, NULL, 0);
}

static void do_get_fs(void) {
  struct ctl_hdr m = {.type = CTL_FS, .len = sizeof m};
  if (config->fs >= 0)
    conn_send(cur, &m, sizeof m, &config->fs, 1);
  else
    conn_send(cur, &m, sizeof m, NULL, 0);
}

static int conn_add(int fd) {
  for (int i = 0; i < MAX_CONNS; i++)
    if (conns[i].fd < 0) {
      conns[i].fd = fd;
      conns[i].gen++;
      return i;
    }
  return -1;
}

static void conn_close(int i) {
  /* Programs that belong to this connection end with it. */
  for (size_t k = 0; k < MAX_TRACKED; k++)
    if (tracked[k].pid > 0 && !tracked[k].exited && tracked[k].conn == i &&
        tracked[k].gen == conns[i].gen &&
        (tracked[k].flags & CTL_EXEC_KILL_ON_HANGUP))
      kill(-tracked[k].pid, SIGKILL);
  close(conns[i].fd);
  conns[i].fd = -1;
  conns[i].gen++;
  if (watch == i) {
    watch = -1;
    watch_backlog = false;
  }
}

/* One message from connection i. */
static void serve(int i) {
  int fds[CTL_EXEC_MAX_FDS];
  size_t nfds = CTL_EXEC_MAX_FDS;
  struct husk_err err;
  ssize_t n = ctl_recv(conns[i].fd, msgbuf, sizeof msgbuf, fds, &nfds, &err);
  if (n == 0 || (n < 0 && err.code != EMSGSIZE && err.code != EPROTO && err.code != EAGAIN)) {
    conn_close(i);
    if (i == 0 && config->exit_on_hangup)
      _exit(0); /* the pid namespace, and everything in it, ends with us */
    return;
  }
  cur = i;
  if (n > 0) {
    const struct ctl_hdr *h = (const void *)msgbuf;
    switch (h->type) {
    case CTL_EXEC: do_exec((size_t)n, fds, nfds); break;
    case CTL_SIGNAL: do_signal((size_t)n); break;
    case CTL_WATCH: if ((size_t)n == sizeof *h) do_watch(); break;
    case CTL_GET_FS: if ((size_t)n == sizeof *h) do_get_fs(); break;
    case CTL_EXIT_ACK:
      do_exit_ack((size_t)n);
      break;
    case CTL_HELLO:
      if ((size_t)n == sizeof *h)
        do_hello();
      break;
    case CTL_HOLD: do_hold((size_t)n, fds, nfds); break;
    case CTL_GET_HELD: do_get_held((size_t)n); break;
    default: break; /* unknown requests are ignored */
    }
  }
  cur = -1;
  for (size_t k = 0; k < nfds; k++)
    if (fds[k] >= 0)
      close(fds[k]);
}

/* What init needs before it can serve: default signal dispositions, SIGCHLD
 * on a signalfd (returned), the stack programs start on, the programs'
 * Landlock ruleset. */
static int init_setup(const struct init_config *cfg, struct husk_err *err) {
  /* Whatever husk ignored (SIGPIPE during a run, SIGHUP under nohup...)
   * would be inherited by every program: start them from defaults. */
  for (int sig = 1; sig < NSIG; sig++)
    signal(sig, SIG_DFL);
  for (int i = 0; i < MAX_CONNS; i++)
    conns[i].fd = -1;
  conn_add(cfg->ctl); /* slot 0: the connection we were started with */
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGCHLD);
  sigprocmask(SIG_BLOCK, &mask, NULL);
  int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sfd < 0)
    return husk_error(err, errno, "cannot create init's signalfd");
  long page = sysconf(_SC_PAGESIZE);
  if (page <= 0)
    page = 4096;
  char *stack = mmap(NULL, SPAWN_STACK_SIZE + (size_t)page, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED || mprotect(stack, (size_t)page, PROT_NONE) < 0)
    return husk_error(err, errno, "cannot map the stack init starts programs on");
  spawn_stack = stack + page;
  if (cfg->landlock_abi > 0) {
    /* Failed: each start tries again, and fails with its own error. */
    program_ruleset = landlock_box_ruleset(cfg->landlock_abi, cfg->writable_root, NULL);
  }
  return sfd;
}

_Noreturn void init_main(const struct init_config *cfg) {
  config = cfg;
  struct husk_err err;
  int sfd = init_setup(cfg, &err);
  if (sfd < 0)
    ctl_setup_error_exit(cfg->ctl, &err);
  struct ctl_hdr ready = {.type = CTL_READY, .len = sizeof ready};
  if (!conn_send(0, &ready, sizeof ready, NULL, 0))
    _exit(125);
  for (;;) {
    struct pollfd p[MAX_CONNS + 2];
    int slot_of[MAX_CONNS + 2];
    nfds_t np = 0;
    p[np++] = (struct pollfd){.fd = sfd, .events = POLLIN};
    int ilisten = -1;
    if (cfg->listen >= 0) {
      ilisten = (int)np;
      p[np++] = (struct pollfd){.fd = cfg->listen, .events = POLLIN};
    }
    for (int i = 0; i < MAX_CONNS; i++)
      if (conns[i].fd >= 0) {
        slot_of[np] = i;
        short ev = POLLIN | (i == watch && watch_backlog ? POLLOUT : 0);
        p[np++] = (struct pollfd){.fd = conns[i].fd, .events = ev};
      }
    if (poll(p, np, -1) < 0) {
      if (errno == EINTR)
        continue;
      _exit(125);
    }
    if (p[0].revents & POLLIN) {
      struct signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) > 0)
        ;
      reap();
    }
    if (ilisten >= 0 && p[ilisten].revents & POLLIN) {
      int c = accept4(cfg->listen, NULL, NULL, SOCK_CLOEXEC);
      if (c >= 0 && conn_add(c) < 0)
        close(c); /* too many connections: refuse this one */
    }
    for (nfds_t k = (nfds_t)(ilisten >= 0 ? 2 : 1); k < np; k++) {
      if (p[k].revents & (POLLIN | POLLHUP | POLLERR))
        serve(slot_of[k]);
      if ((p[k].revents & POLLOUT) && slot_of[k] == watch &&
          conns[watch].fd == p[k].fd)
        flush_watch();
    }
  }
}
