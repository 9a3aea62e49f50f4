/* Code contexts (husk/context.h): long-lived interpreters in a box.
 *
 * A context is husk's runner for its language (src/ctx/, built into the
 * library) started by the box's init like any program, as the box user,
 * in its own process group.  It gets five pipes: requests (and, for bash,
 * the code) from us, events (JSON lines) and its own stdout and stderr to
 * us.  The runner's source comes as fd 5, a sealed memfd the interpreter
 * reads as /proc/self/fd/5: nothing is written into the box.
 *
 * Init keeps copies of our ends of those pipes (CTL_HOLD): a daemon that
 * dies leaves the interpreter running with its state, and the next one
 * takes the pipes up again (CTL_GET_HELD) from what it finds in the box's
 * `contexts/` directory, at the root of the box filesystem beside procs/
 * (outside what the box sees, gone with the box).  An execution the old
 * daemon did not finish runs on; its events are told apart by their id,
 * and a line cut by the old daemon's death does not parse and is dropped.
 *
 * Everything that comes back is the box's: event lines are bounded,
 * parsed, checked for their shape, and passed on as the core's own
 * structures; output past the limit is read and dropped so that the
 * interpreter never blocks on us.
 *
 * Locking: b->lock guards the box's list of contexts and each one's
 * `refs`, `busy` and `removed`; a context's `run` mutex is held by whoever
 * drives its interpreter (an execution, a restart, a delete), so only one
 * does at a time.  Signals go over a connection of their own, never over
 * the one the driver reads. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "box/box_internal.h"
#include "husk/context.h"
#include "jail/ctl.h"
#include "jail/limits.h"
#include "jail/syscalls.h"
#include "util/cleanup.h"
#include "util/cleanup_json.h"
#include "util/fileio.h"
#include "util/id.h"

extern const unsigned char ctx_runner_python[], ctx_runner_javascript[], ctx_runner_bash[];
extern const size_t ctx_runner_python_len, ctx_runner_javascript_len, ctx_runner_bash_len;

/* An event line longer than this is dropped (and the execution marked
 * truncated); the runners leave out a representation past CTX_REPR_MAX,
 * so only a result with many large ones comes near it. */
#define CTX_LINE_MAX (24u * 1024 * 1024)
#define CTX_REPR_MAX (8u * 1024 * 1024)
#define CTX_READY_MS 30000 /* an interpreter that does not say ready by then fails to start */
#define CTX_GRACE_MS 2000  /* after the SIGINT of a timeout, before the restart */
#define CTX_READ_CHUNK 65536

enum { P_REQ, P_CODE, P_EV, P_OUT, P_ERR, P_N }; /* our ends */

struct ctx_lang {
  const char *name;
  const char *program; /* what ENOTSUP names */
  const unsigned char *src;
  const size_t *len;
};

static const struct ctx_lang langs[] = {
    {"python", "python3", ctx_runner_python, &ctx_runner_python_len},
    {"javascript", "node", ctx_runner_javascript, &ctx_runner_javascript_len},
    {"bash", "bash", ctx_runner_bash, &ctx_runner_bash_len},
};

struct box_ctx {
  struct box_ctx *next;
  int refs;     /* under b->lock */
  bool busy;    /* under b->lock: an execution runs */
  bool removed; /* under b->lock: deleted, out of the list */
  pthread_mutex_t run;
  atomic_bool killing; /* a restart or delete killed the interpreter */
  atomic_bool sigint;  /* an interrupt was sent during the execution */
  char id[HUSK_CTX_ID_MAX];
  const struct ctx_lang *lang;
  char *cwd;
  char **env; /* NAME=VALUE, owned */
  int64_t created_ms;
  /* The interpreter: under `run`, but pid and exec_id also read under
   * b->lock (set under both). */
  pid_t pid;
  uint64_t exec_id;
  int conn;
  int fd[P_N];
  bool ended; /* the interpreter exited; the next execution starts it again */
  char version[32];
  int64_t started_ms;
  uint64_t count;
  /* A partial event line. */
  char *line;
  size_t line_len, line_cap;
  bool line_skip; /* dropping an over-long line up to its newline */
};

/* ---- small things ---------------------------------------------------------------- */

static int64_t mono_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t mono_ms(void) { return mono_us() / 1000; }

static const struct ctx_lang *lang_find(const char *name) {
  for (size_t i = 0; i < sizeof langs / sizeof langs[0]; i++)
    if (!strcmp(langs[i].name, name))
      return &langs[i];
  return NULL;
}

static bool ctx_valid_id(const char *id) {
  size_t n = id ? strlen(id) : 0;
  if (n == 0 || n >= HUSK_CTX_ID_MAX)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= '0' && id[i] <= '9') || id[i] == '_' ||
          id[i] == '-'))
      return false;
  return true;
}

static bool is_bash(const struct box_ctx *c) { return !strcmp(c->lang->name, "bash"); }

static void env_free(char **env) {
  for (size_t i = 0; env && env[i]; i++)
    free(env[i]);
  free(env);
}

static char **env_copy(char *const *env, struct husk_err *err) {
  size_t n = 0;
  while (env && env[n])
    n++;
  char **out = calloc(n + 1, sizeof *out);
  if (!out) {
    husk_fail(err, ENOMEM, "out of memory");
    return NULL;
  }
  for (size_t i = 0; i < n; i++) {
    const char *eq = strchr(env[i], '=');
    if (!eq || eq == env[i]) {
      env_free(out);
      husk_fail(err, EINVAL, "environment entry %zu is not NAME=VALUE", i);
      return NULL;
    }
    if (!(out[i] = strdup(env[i]))) {
      env_free(out);
      husk_fail(err, ENOMEM, "out of memory");
      return NULL;
    }
  }
  return out;
}

/* Names the bash runner takes (it reads them as words): [A-Za-z_][A-Za-z0-9_]*. */
static bool shell_name(const char *s, size_t n) {
  if (n == 0 || (s[0] >= '0' && s[0] <= '9'))
    return false;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
          (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
      return false;
  return true;
}

static int check_env(char *const *env, struct husk_err *err) {
  for (size_t i = 0; env && env[i]; i++) {
    const char *eq = strchr(env[i], '=');
    if (!eq || !shell_name(env[i], (size_t)(eq - env[i])))
      return husk_fail(err, EINVAL, "environment entry %zu is not NAME=VALUE with a variable name",
                       i);
  }
  return 0;
}

static void close_fds(struct box_ctx *c) {
  close_quiet(c->conn);
  c->conn = -1;
  for (int i = 0; i < P_N; i++) {
    close_quiet(c->fd[i]);
    c->fd[i] = -1;
  }
  c->line_len = 0;
  c->line_skip = false;
}

static struct box_ctx *ctx_new(void) {
  struct box_ctx *c = calloc(1, sizeof *c);
  if (!c)
    return NULL;
  pthread_mutex_init(&c->run, NULL);
  c->refs = 1;
  c->conn = -1;
  for (int i = 0; i < P_N; i++)
    c->fd[i] = -1;
  return c;
}

static void ctx_free(struct box_ctx *c) {
  if (!c)
    return;
  close_fds(c);
  pthread_mutex_destroy(&c->run);
  free(c->cwd);
  env_free(c->env);
  free(c->line);
  free(c);
}

static void ctx_unref(struct live_box *b, struct box_ctx *c) {
  pthread_mutex_lock(&b->lock);
  bool last = --c->refs == 0;
  pthread_mutex_unlock(&b->lock);
  if (last)
    ctx_free(c);
}

void box_ctx_free_all(struct live_box *b) {
  for (struct box_ctx *c = b->ctxs, *n; c; c = n) {
    n = c->next;
    ctx_free(c);
  }
  b->ctxs = NULL;
}

/* Over a connection of its own: the driver may be reading c->conn. */
static void ctx_signal(struct live_box *b, pid_t pid, int sig) {
  if (pid <= 0)
    return;
  struct husk_err err;
  cleanup_close int conn = jail_connect(b->ctl_path, &err);
  if (conn >= 0)
    jail_signal_fd(conn, pid, sig, true, &err);
}

/* ---- the record in the box filesystem -------------------------------------------- */

static int ctx_persist(struct live_box *b, const struct box_ctx *c, struct husk_err *err) {
  cleanup_json json_t *env = json_array();
  for (size_t i = 0; env && c->env[i]; i++)
    json_array_append_new(env, json_string(c->env[i]));
  cleanup_json json_t *o =
      json_pack("{s:s, s:s, s:s, s:O, s:I, s:I, s:I, s:I}", "id", c->id, "language", c->lang->name,
                "cwd", c->cwd, "env", env, "pid", (json_int_t)c->pid, "exec_id",
                (json_int_t)(c->exec_id & INT64_MAX), "created_ms", (json_int_t)c->created_ms,
                "started_ms", (json_int_t)c->started_ms);
  cleanup_free char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
  if (!text)
    return husk_fail(err, ENOMEM, "out of memory");
  if (mkdirat(b->j.fs, "contexts", 0700) < 0 && errno != EEXIST)
    return husk_error(err, errno, "cannot record the context");
  char tmp[HUSK_CTX_ID_MAX + 32], name[HUSK_CTX_ID_MAX + 16];
  snprintf(tmp, sizeof tmp, "contexts/.%s.tmp", c->id);
  snprintf(name, sizeof name, "contexts/%s", c->id);
  cleanup_close int fd =
      openat(b->j.fs, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0 || write_all(fd, text, strlen(text)) < 0 || fsync(fd) < 0 ||
      renameat(b->j.fs, tmp, b->j.fs, name) < 0) {
    int e = errno;
    unlinkat(b->j.fs, tmp, 0);
    return husk_error(err, e, "cannot record the context");
  }
  return 0;
}

static void ctx_unpersist(struct live_box *b, const struct box_ctx *c) {
  char name[HUSK_CTX_ID_MAX + 16];
  snprintf(name, sizeof name, "contexts/%s", c->id);
  unlinkat(b->j.fs, name, 0);
}

/* ---- the interpreter ------------------------------------------------------------- */

/* The runner's source as an fd the interpreter can read and nobody can
 * change. */
static int runner_fd(const struct ctx_lang *l, struct husk_err *err) {
  cleanup_close int fd = memfd_create("husk_ctx", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0)
    return husk_error(err, errno, "cannot prepare the context's runner");
  if (write_all(fd, l->src, *l->len) < 0 ||
      fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) < 0)
    return husk_error(err, errno, "cannot prepare the context's runner");
  return take_fd(&fd);
}

static void set_nonblock(int fd) {
  int fl = fcntl(fd, F_GETFL);
  if (fl >= 0)
    fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

/* One event line, parsed, if a whole one is there: 1 with *out, 0 when
 * more is needed, -1 at end of file.  Lines that are too long or are not
 * JSON objects are dropped (*dropped set). */
static int read_event(struct box_ctx *c, json_t **out, bool *dropped, bool *eof) {
  for (;;) {
    char *nl = c->line_len ? memchr(c->line, '\n', c->line_len) : NULL;
    if (nl) {
      size_t n = (size_t)(nl - c->line);
      bool skip = c->line_skip;
      c->line_skip = false;
      json_t *o = skip ? NULL : json_loadb(c->line, n, JSON_REJECT_DUPLICATES, NULL);
      memmove(c->line, nl + 1, c->line_len - n - 1);
      c->line_len -= n + 1;
      if (skip)
        *dropped = true;
      if (o && json_is_object(o)) {
        *out = o;
        return 1;
      }
      json_decref(o);
      continue;
    }
    if (c->line_len >= CTX_LINE_MAX) {
      c->line_len = 0; /* the rest of this line is dropped as it comes */
      c->line_skip = true;
      *dropped = true;
    }
    if (*eof)
      return -1;
    if (c->line_cap - c->line_len < CTX_READ_CHUNK) {
      size_t cap = c->line_cap ? c->line_cap * 2 : CTX_READ_CHUNK * 2;
      while (cap - c->line_len < CTX_READ_CHUNK)
        cap *= 2;
      char *nb = realloc(c->line, cap);
      if (!nb)
        return 0; /* try again later; the pipe holds the rest */
      c->line = nb;
      c->line_cap = cap;
    }
    ssize_t r = read(c->fd[P_EV], c->line + c->line_len, CTX_READ_CHUNK);
    if (r > 0) {
      c->line_len += (size_t)r;
      continue;
    }
    if (r == 0) {
      *eof = true;
      continue;
    }
    if (errno == EINTR)
      continue;
    if (errno != EAGAIN)
      *eof = true;
    if (!*eof)
      return 0;
  }
}

/* What is in a stream pipe now, dropped (before ready) but for its last
 * bytes, kept in tail (NUL-terminated) to say why a start failed. */
static void drain_drop(int fd, char *tail, size_t size) {
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) {
    if (!tail)
      continue;
    size_t have = strlen(tail), k = (size_t)n < size - 1 ? (size_t)n : size - 1;
    if (have + k > size - 1) {
      memmove(tail, tail + (have + k - (size - 1)), size - 1 - k);
      have = size - 1 - k;
    }
    memcpy(tail + have, buf + (size_t)n - k, k);
    tail[have + k] = '\0';
  }
}

/* The box's words, fit for a message: printable ASCII, one line. */
static void tidy(char *s) {
  for (; *s; s++)
    if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
      *s = ' ';
}

/* Start the interpreter: c->pid, conn, fd[], version, started_ms.  On
 * failure nothing of it is left. */
static int ctx_spawn(struct live_box *b, struct box_ctx *c, struct husk_err *err) {
  int rc = -1;
  int req[2] = {-1, -1}, code[2] = {-1, -1}, ev[2] = {-1, -1}, out[2] = {-1, -1},
      errp[2] = {-1, -1}, in[2] = {-1, -1};
  int src = -1;
  cleanup_free char **env = NULL;
  char *extra[4 + 1] = {0};
  char repr[64], mark[HUSK_CTX_ID_MAX + 16];
  snprintf(repr, sizeof repr, "HUSK_CTX_REPR_MAX=%u", CTX_REPR_MAX);
  snprintf(mark, sizeof mark, "HUSK_CONTEXT=%s", c->id);
  size_t ne = 0;
  extra[ne++] = repr;
  extra[ne++] = mark;
  if (is_bash(c)) {
    extra[ne++] = (char *)"HUSK_CODE_FD=3";
    extra[ne++] = (char *)"HUSK_EV_FD=4";
  }
  /* The context's env over the box's; the protocol's own last. */
  size_t nuser = 0;
  while (c->env[nuser])
    nuser++;
  cleanup_free char **req_env = calloc(nuser + ne + 1, sizeof *req_env);
  if (!req_env) {
    husk_fail(err, ENOMEM, "out of memory");
    goto out;
  }
  memcpy(req_env, c->env, nuser * sizeof *req_env);
  memcpy(req_env + nuser, extra, ne * sizeof *req_env);
  if (!(env = box_exec_env(b, req_env))) {
    husk_fail(err, ENOMEM, "out of memory");
    goto out;
  }
  /* Requests and code go over sockets: a send to an interpreter that died
   * is EPIPE, not SIGPIPE.  Node reopens its request fd through /proc
   * (to make it close-on-exec), which a socket does not allow: it gets a
   * pipe, written with SIGPIPE blocked (send_nosig). */
  bool js = !strcmp(c->lang->name, "javascript");
  if ((js ? pipe2(req, O_CLOEXEC) : socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, req)) <
          0 ||
      (is_bash(c) && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, code) < 0) ||
      pipe2(ev, O_CLOEXEC) < 0 || pipe2(out, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 ||
      pipe2(in, O_CLOEXEC) < 0) {
    husk_error(err, errno, "cannot prepare the context's pipes");
    goto out;
  }
  if (!js)
    shutdown(req[1], SHUT_RD);
  /* Node reopens them as the box user: a pipe is its creator's, 0600. */
  if (js && (fchmod(req[0], 0666) < 0 || fchmod(ev[1], 0666) < 0)) {
    husk_error(err, errno, "cannot prepare the context's pipes");
    goto out;
  }
  if ((src = runner_fd(c->lang, err)) < 0)
    goto out;
  /* Pipes are an interpreter's stdin (bash: its command lines) or the
   * runner's fds 3 and 4; python and node read requests on 3. */
  close_quiet(in[1]);
  in[1] = -1;
  int fds[6];
  if (is_bash(c)) {
    int f[6] = {req[0], out[1], errp[1], code[0], ev[1], src};
    memcpy(fds, f, sizeof f);
  } else {
    int f[6] = {in[0], out[1], errp[1], req[0], ev[1], src};
    memcpy(fds, f, sizeof f);
  }
  char *const py[] = {"python3", "-u", "/proc/self/fd/5", "3", "4", NULL};
  char *const node[] = {"node", "--preserve-symlinks-main", "/proc/self/fd/5", "3", "4", NULL};
  char *const sh[] = {"bash", "--rcfile", "/proc/self/fd/5", "--noediting", "-i", NULL};
  char *const *argv = !strcmp(c->lang->name, "python") ? py : is_bash(c) ? sh : node;
  if ((c->conn = jail_connect(b->ctl_path, err)) < 0)
    goto out;
  pthread_mutex_lock(&b->lock);
  uint64_t eid = b->next_exec_id++;
  pthread_mutex_unlock(&b->lock);
  if (jail_exec_fds(c->conn, eid, argv, env, c->cwd, fds, 6, 0, err) < 0)
    goto out;
  union jail_event je;
  int r = jail_recv_fd(c->conn, &je, err);
  if (r <= 0 || je.h.type != CTL_STARTED) {
    if (r == 0)
      husk_fail(err, EIO, "the sandbox ended");
    else if (r > 0)
      husk_fail(err, EPROTO, "unexpected reply from the sandbox");
    goto out;
  }
  if (je.started.error) {
    if (je.started.stage == CTL_STAGE_EXEC && je.started.error == ENOENT)
      husk_fail(err, ENOTSUP, "%s contexts need `%s`, which this sandbox does not have",
                c->lang->name, c->lang->program);
    else if (je.started.stage == CTL_STAGE_CWD)
      husk_fail(err, EINVAL, "cannot enter the context's working directory `%.200s`: %s",
                c->cwd, strerror(je.started.error));
    else
      husk_error(err, je.started.error, "cannot start the %s interpreter (%s)", c->lang->name,
                 ctl_stage_name(je.started.stage));
    goto out;
  }
  /* Ours from here on: the box's ends go (init passed them on). */
  int ours[P_N] = {req[1], is_bash(c) ? code[1] : -1, ev[0], out[0], errp[0]};
  for (int i = 0; i < P_N; i++)
    c->fd[i] = ours[i];
  req[1] = code[1] = ev[0] = out[0] = errp[0] = -1;
  pthread_mutex_lock(&b->lock);
  c->pid = je.started.pid;
  c->exec_id = eid;
  pthread_mutex_unlock(&b->lock);
  int held[P_N];
  size_t nheld = 0;
  for (int i = 0; i < P_N; i++)
    if (c->fd[i] >= 0)
      held[nheld++] = c->fd[i];
  if (jail_hold_fds(c->conn, eid, c->pid, held, nheld, err) < 0)
    goto kill;
  for (int i = 0; i < P_N; i++)
    if (c->fd[i] >= 0)
      set_nonblock(c->fd[i]);
  /* The box's ends close in us now, so that its death is end of file. */
  close_quiet(ev[1]);
  ev[1] = -1;
  close_quiet(out[1]);
  out[1] = -1;
  close_quiet(errp[1]);
  errp[1] = -1;
  /* Wait for "ready"; what the streams get before it (bash's words on job
   * control) is not the user's. */
  int64_t deadline = mono_ms() + CTX_READY_MS;
  bool eof = false, dropped = false;
  char tail[200] = "";
  for (;;) {
    json_t *o = NULL;
    int e = read_event(c, &o, &dropped, &eof);
    if (e > 0) {
      const char *type = json_string_value(json_object_get(o, "type"));
      if (type && !strcmp(type, "ready")) {
        const char *v = json_string_value(json_object_get(o, "version"));
        snprintf(c->version, sizeof c->version, "%s", v ? v : "");
        json_decref(o);
        break;
      }
      json_decref(o);
      continue;
    }
    if (e < 0) {
      drain_drop(c->fd[P_ERR], tail, sizeof tail);
      tidy(tail);
      husk_fail(err, EIO, "the %s interpreter ended as it started%s%s", c->lang->name,
                tail[0] ? ": " : "", tail);
      goto kill;
    }
    int64_t left = deadline - mono_ms();
    if (left <= 0) {
      husk_fail(err, ETIMEDOUT, "the %s interpreter did not start within %d s", c->lang->name,
                CTX_READY_MS / 1000);
      goto kill;
    }
    struct pollfd p[3] = {{.fd = c->fd[P_EV], .events = POLLIN},
                          {.fd = c->fd[P_OUT], .events = POLLIN},
                          {.fd = c->fd[P_ERR], .events = POLLIN}};
    if (poll(p, 3, (int)left) < 0 && errno != EINTR) {
      husk_error(err, errno, "poll");
      goto kill;
    }
    drain_drop(c->fd[P_OUT], NULL, 0);
    drain_drop(c->fd[P_ERR], tail, sizeof tail);
  }
  drain_drop(c->fd[P_OUT], NULL, 0);
  drain_drop(c->fd[P_ERR], NULL, 0);
  c->started_ms = state_now_ms();
  c->count = 0;
  c->ended = false;
  rc = 0;
  goto out;
kill:
  jail_signal_fd(c->conn, c->pid, SIGKILL, true, NULL);
  close_fds(c);
  c->pid = 0;
out:
  if (rc < 0 && c->conn >= 0 && c->pid == 0) {
    close_quiet(c->conn);
    c->conn = -1;
  }
  int *all[] = {req, code, ev, out, errp, in};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
    close_quiet(all[i][0]);
    close_quiet(all[i][1]);
  }
  close_quiet(src);
  return rc;
}

/* Does process `pid` (the host's pid) carry `mark` in its environment?
 * Read from /proc as the box left it: bounded, and only compared. */
static bool carries_mark(pid_t pid, const char *mark, size_t mlen) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/environ", (int)pid);
  cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  static const size_t max = 256 * 1024;
  cleanup_free char *buf = malloc(max + 1);
  if (!buf)
    return false;
  size_t n = 0;
  ssize_t r;
  while (n < max && (r = read(fd, buf + n, max - n)) > 0)
    n += (size_t)r;
  for (size_t i = 0; i + mlen <= n;) {
    char *z = memchr(buf + i, '\0', n - i);
    size_t len = z ? (size_t)(z - (buf + i)) : n - i;
    if (len == mlen && !memcmp(buf + i, mark, mlen))
      return true;
    i += len + 1;
  }
  return false;
}

/* Processes the context started that left its process group (a daemon
 * that called setsid) end with it too: they carry its HUSK_CONTEXT
 * variable, and are found in the box's cgroup.  Code that clears its
 * environment escapes this; it stays in the box, and ends with it. */
static void kill_strays(struct live_box *b, const struct box_ctx *c) {
  int dir = b->j.cg.v2 >= 0 ? b->j.cg.v2 : b->j.cg.pids;
  if (dir < 0)
    return;
  int fd = openat(dir, "cgroup.procs", O_RDONLY | O_CLOEXEC);
  FILE *f = fd >= 0 ? fdopen(fd, "r") : NULL;
  if (!f) {
    close_quiet(fd);
    return;
  }
  char mark[HUSK_CTX_ID_MAX + 16];
  int mlen = snprintf(mark, sizeof mark, "HUSK_CONTEXT=%s", c->id);
  long pid;
  while (fscanf(f, "%ld", &pid) == 1) {
    if (pid <= 0 || pid > INT_MAX)
      continue;
    cleanup_close int pfd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
    if (pfd >= 0 && carries_mark((pid_t)pid, mark, (size_t)mlen))
      sys_pidfd_send_signal(pfd, SIGKILL);
  }
  fclose(f);
}

/* Kill the interpreter, its process group and its strays; its pipes go. */
static void ctx_stop(struct live_box *b, struct box_ctx *c) {
  if (c->conn >= 0 && c->pid > 0)
    jail_signal_fd(c->conn, c->pid, SIGKILL, true, NULL);
  else if (c->pid > 0)
    ctx_signal(b, c->pid, SIGKILL);
  if (c->pid > 0)
    kill_strays(b, c);
  close_fds(c);
}

/* ---- the box's list ---------------------------------------------------------------- */

/* Take up the contexts a previous daemon left in the box: once per box. */
static void ctx_load(struct husk_mgr *m, struct live_box *b) {
  if (b->ctx_loaded)
    return;
  b->ctx_loaded = true;
  int dfd = openat(b->j.fs, "contexts", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
  if (dfd < 0)
    return;
  DIR *d = fdopendir(dfd);
  if (!d) {
    close(dfd);
    return;
  }
  struct dirent *de;
  while ((de = readdir(d))) {
    if (de->d_name[0] == '.') {
      if (strstr(de->d_name, ".tmp"))
        unlinkat(dfd, de->d_name, 0);
      continue;
    }
    if (!ctx_valid_id(de->d_name))
      continue;
    char buf[65536];
    cleanup_close int fd = openat(dfd, de->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (n <= 0)
      continue;
    cleanup_json json_t *o = json_loadb(buf, (size_t)n, 0, NULL);
    const char *lang = json_string_value(json_object_get(o, "language"));
    const char *cwd = json_string_value(json_object_get(o, "cwd"));
    json_t *env = json_object_get(o, "env");
    const struct ctx_lang *l = lang ? lang_find(lang) : NULL;
    if (!l || !cwd || !json_is_array(env))
      continue;
    struct box_ctx *c = ctx_new();
    if (!c)
      break;
    snprintf(c->id, sizeof c->id, "%.39s", de->d_name);
    c->lang = l;
    c->cwd = strdup(cwd);
    c->env = calloc(json_array_size(env) + 1, sizeof *c->env);
    c->created_ms = json_integer_value(json_object_get(o, "created_ms"));
    c->started_ms = json_integer_value(json_object_get(o, "started_ms"));
    c->pid = (pid_t)json_integer_value(json_object_get(o, "pid"));
    c->exec_id = (uint64_t)json_integer_value(json_object_get(o, "exec_id"));
    bool ok = c->cwd && c->env;
    for (size_t i = 0; ok && i < json_array_size(env); i++) {
      const char *s = json_string_value(json_array_get(env, i));
      ok = s && (c->env[i] = strdup(s));
    }
    if (!ok) {
      ctx_free(c);
      continue;
    }
    struct husk_err err;
    int held[P_N];
    size_t want = l == &langs[2] ? 5 : 4;
    if ((c->conn = jail_connect(b->ctl_path, &err)) >= 0 &&
        jail_get_held(c->conn, c->exec_id, c->pid, held, want, &err) == 0) {
      size_t k = 0;
      for (int i = 0; i < P_N; i++)
        if (i != P_CODE || want == 5)
          c->fd[i] = held[k++];
      for (int i = 0; i < P_N; i++)
        if (c->fd[i] >= 0)
          set_nonblock(c->fd[i]);
    } else {
      /* Gone while no daemon ran: the next execution starts it again. */
      box_log(m, "box %s: context %s: %s", b->id, c->id, err.msg);
      close_quiet(c->conn);
      c->conn = -1;
      c->ended = true;
    }
    atomic_fetch_add(&b->nprocs, 1);
    struct box_ctx **at = &b->ctxs; /* oldest first */
    while (*at && (*at)->created_ms <= c->created_ms)
      at = &(*at)->next;
    c->next = *at;
    *at = c;
  }
  closedir(d);
}

void box_ctx_adopt(struct husk_mgr *m, struct live_box *b) {
  if (b->init_version < 2)
    return;
  pthread_mutex_lock(&b->lock);
  ctx_load(m, b);
  pthread_mutex_unlock(&b->lock);
}

static struct box_ctx *ctx_find_locked(struct live_box *b, const char *id) {
  for (struct box_ctx *c = b->ctxs; c; c = c->next)
    if (!strcmp(c->id, id))
      return c;
  return NULL;
}

/* The box (running, the tenant's) and, with a reference, its context. */
static struct live_box *ctx_lookup(struct husk_mgr *m, const char *tenant, const char *box,
                                   const char *ctx_id, struct box_ctx **out,
                                   struct husk_err *err) {
  struct live_box *b = box_running(m, tenant, box, err);
  if (!b)
    return NULL;
  if (b->init_version < 2) {
    lb_unref(m, b);
    husk_fail(err, ENOTSUP,
              "sandbox %s was started by an older husk that cannot hold contexts; create a new "
              "one",
              box);
    return NULL;
  }
  *out = NULL;
  pthread_mutex_lock(&b->lock);
  ctx_load(m, b);
  struct box_ctx *c = ctx_id && ctx_valid_id(ctx_id) ? ctx_find_locked(b, ctx_id) : NULL;
  if (c)
    c->refs++;
  pthread_mutex_unlock(&b->lock);
  if (ctx_id && !c) {
    lb_unref(m, b);
    husk_fail(err, ENOENT, "no such context");
    return NULL;
  }
  *out = c;
  return b;
}

static void info_of(const struct box_ctx *c, struct husk_ctx_info *o) {
  memset(o, 0, sizeof *o);
  snprintf(o->id, sizeof o->id, "%s", c->id);
  snprintf(o->language, sizeof o->language, "%s", c->lang->name);
  snprintf(o->state, sizeof o->state, "%s", c->busy ? "busy" : c->ended ? "ended" : "idle");
  snprintf(o->version, sizeof o->version, "%s", c->version);
  snprintf(o->cwd, sizeof o->cwd, "%s", c->cwd);
  o->pid = c->pid;
  o->execution_count = c->count;
  o->created_ms = c->created_ms;
  o->started_ms = c->started_ms;
}

/* info_of, under the box's lock. */
static void info_get(struct live_box *b, const struct box_ctx *c, struct husk_ctx_info *o) {
  pthread_mutex_lock(&b->lock);
  info_of(c, o);
  pthread_mutex_unlock(&b->lock);
}

static int ctx_reserve(struct husk_mgr *m, struct live_box *b, struct husk_err *err) {
  unsigned n = 0;
  pthread_mutex_lock(&b->lock);
  for (struct box_ctx *c = b->ctxs; c; c = c->next)
    n++;
  pthread_mutex_unlock(&b->lock);
  if (n >= HUSK_CTX_MAX)
    return husk_fail(err, EUSERS, "the sandbox has %u contexts (at most %d); delete one", n,
                     HUSK_CTX_MAX);
  /* A context is a process of the tenant's like a background one. */
  return box_procs_reserve(m, b, err);
}

static int ctx_create_in(struct husk_mgr *m, struct live_box *b, const char *id,
                         const struct husk_ctx_req *req, struct box_ctx **out,
                         struct husk_err *err) {
  const struct ctx_lang *l = lang_find(req->language ? req->language : "python");
  if (!l)
    return husk_fail(err, EINVAL, "unknown language `%.40s` (python, javascript or bash)",
                     req->language);
  if (req->cwd && (req->cwd[0] != '/' || strlen(req->cwd) >= PATH_MAX))
    return husk_fail(err, EINVAL, "the working directory is not an absolute path");
  if (check_env(req->env, err) < 0)
    return -1;
  if (ctx_reserve(m, b, err) < 0)
    return -1;
  struct box_ctx *c = ctx_new();
  int rc = -1;
  if (!c) {
    husk_fail(err, ENOMEM, "out of memory");
    goto fail;
  }
  c->lang = l;
  c->created_ms = state_now_ms();
  if (!(c->cwd = strdup(box_cwd(b, req->cwd))) || !(c->env = env_copy(req->env, err))) {
    if (!c->cwd)
      husk_fail(err, ENOMEM, "out of memory");
    goto fail;
  }
  if (id)
    snprintf(c->id, sizeof c->id, "%s", id);
  else if (id_new("ctx_", 12, c->id, sizeof c->id, err) < 0)
    goto fail;
  pthread_mutex_lock(&c->run);
  if (ctx_spawn(b, c, err) < 0 || ctx_persist(b, c, err) < 0) {
    ctx_stop(b, c);
    pthread_mutex_unlock(&c->run);
    goto fail;
  }
  pthread_mutex_unlock(&c->run);
  pthread_mutex_lock(&b->lock);
  if (b->ending || (id && ctx_find_locked(b, id))) {
    /* The box is ending, or another request made this default first. */
    bool dup = !b->ending;
    struct box_ctx *o = dup ? ctx_find_locked(b, id) : NULL;
    if (o)
      o->refs++;
    pthread_mutex_unlock(&b->lock);
    ctx_stop(b, c);
    if (!dup)
      ctx_unpersist(b, c);
    ctx_free(c);
    atomic_fetch_sub(&b->nprocs, 1);
    if (!o)
      return husk_fail(err, EBUSY, "sandbox %s is ending", b->id);
    *out = o;
    return 0;
  }
  c->refs++; /* the caller's */
  struct box_ctx **tail = &b->ctxs;
  while (*tail)
    tail = &(*tail)->next;
  *tail = c;
  pthread_mutex_unlock(&b->lock);
  *out = c;
  return 0;
fail:
  ctx_free(c);
  atomic_fetch_sub(&b->nprocs, 1);
  return rc;
}

/* ---- the public calls ------------------------------------------------------------ */

int husk_ctx_create(struct husk_mgr *m, const char *tenant, const char *box,
                    const struct husk_ctx_req *req, struct husk_ctx_info *out,
                    struct husk_err *err) {
  struct box_ctx *c;
  struct live_box *b = ctx_lookup(m, tenant, box, NULL, &c, err);
  if (!b)
    return -1;
  int rc = ctx_create_in(m, b, NULL, req, &c, err);
  if (rc == 0) {
    if (out)
      info_get(b, c, out);
    ctx_unref(b, c);
  }
  lb_unref(m, b);
  return rc;
}

int husk_ctx_list(struct husk_mgr *m, const char *tenant, const char *box,
                  int (*cb)(void *ctx, const struct husk_ctx_info *c), void *ctx,
                  struct husk_err *err) {
  struct box_ctx *c;
  struct live_box *b = ctx_lookup(m, tenant, box, NULL, &c, err);
  if (!b)
    return -1;
  pthread_mutex_lock(&b->lock);
  size_t n = 0;
  for (struct box_ctx *x = b->ctxs; x; x = x->next)
    n++;
  struct husk_ctx_info *infos = calloc(n ? n : 1, sizeof *infos);
  size_t k = 0;
  for (struct box_ctx *x = b->ctxs; infos && x; x = x->next)
    info_of(x, &infos[k++]);
  pthread_mutex_unlock(&b->lock);
  int rc = 0;
  if (!infos)
    rc = husk_fail(err, ENOMEM, "out of memory");
  for (size_t i = 0; rc == 0 && i < k; i++) {
    int r = cb(ctx, &infos[i]);
    if (r > 0)
      break;
    if (r < 0)
      rc = r;
  }
  free(infos);
  lb_unref(m, b);
  return rc;
}

int husk_ctx_get(struct husk_mgr *m, const char *tenant, const char *box, const char *ctx_id,
                 struct husk_ctx_info *out, struct husk_err *err) {
  struct box_ctx *c;
  struct live_box *b = ctx_lookup(m, tenant, box, ctx_id ? ctx_id : "", &c, err);
  if (!b)
    return -1;
  info_get(b, c, out);
  ctx_unref(b, c);
  lb_unref(m, b);
  return 0;
}

/* Make the driver of c (if any) let go: its interpreter is killed, and it
 * reports "restarted". */
static void ctx_take(struct live_box *b, struct box_ctx *c) {
  if (pthread_mutex_trylock(&c->run) == 0)
    return;
  atomic_store(&c->killing, true);
  pthread_mutex_lock(&b->lock);
  pid_t pid = c->pid;
  pthread_mutex_unlock(&b->lock);
  ctx_signal(b, pid, SIGKILL);
  pthread_mutex_lock(&c->run);
}

int husk_ctx_restart(struct husk_mgr *m, const char *tenant, const char *box, const char *ctx_id,
                     struct husk_ctx_info *out, struct husk_err *err) {
  struct box_ctx *c;
  struct live_box *b = ctx_lookup(m, tenant, box, ctx_id ? ctx_id : "", &c, err);
  if (!b)
    return -1;
  ctx_take(b, c);
  ctx_stop(b, c);
  pthread_mutex_lock(&b->lock);
  c->pid = 0;
  pthread_mutex_unlock(&b->lock);
  int rc = ctx_spawn(b, c, err);
  if (rc == 0)
    rc = ctx_persist(b, c, err);
  if (rc < 0)
    c->ended = true;
  atomic_store(&c->killing, false);
  pthread_mutex_unlock(&c->run);
  if (rc == 0 && out)
    info_get(b, c, out);
  ctx_unref(b, c);
  lb_unref(m, b);
  return rc;
}

int husk_ctx_interrupt(struct husk_mgr *m, const char *tenant, const char *box,
                       const char *ctx_id, struct husk_err *err) {
  struct box_ctx *c;
  struct live_box *b = ctx_lookup(m, tenant, box, ctx_id ? ctx_id : "", &c, err);
  if (!b)
    return -1;
  pthread_mutex_lock(&b->lock);
  bool busy = c->busy;
  pid_t pid = c->pid;
  if (busy)
    atomic_store(&c->sigint, true);
  pthread_mutex_unlock(&b->lock);
  /* Idle, there is nothing to stop (and bash would print a new prompt). */
  if (busy)
    ctx_signal(b, pid, SIGINT);
  ctx_unref(b, c);
  lb_unref(m, b);
  return 0;
}

int husk_ctx_delete(struct husk_mgr *m, const char *tenant, const char *box, const char *ctx_id,
                    struct husk_err *err) {
  struct box_ctx *c;
  struct live_box *b = ctx_lookup(m, tenant, box, ctx_id ? ctx_id : "", &c, err);
  if (!b)
    return -1;
  ctx_take(b, c);
  ctx_stop(b, c);
  ctx_unpersist(b, c);
  pthread_mutex_lock(&b->lock);
  bool was = !c->removed;
  if (was) {
    for (struct box_ctx **p = &b->ctxs; *p; p = &(*p)->next)
      if (*p == c) {
        *p = c->next;
        break;
      }
    c->removed = true;
    c->refs--; /* the list's */
  }
  pthread_mutex_unlock(&b->lock);
  if (was)
    atomic_fetch_sub(&b->nprocs, 1);
  pthread_mutex_unlock(&c->run);
  ctx_unref(b, c);
  lb_unref(m, b);
  if (!was)
    return husk_fail(err, ENOENT, "no such context");
  return 0;
}

const char *husk_ctx_status_name(enum husk_ctx_status s) {
  switch (s) {
  case HUSK_CTX_OK: return "ok";
  case HUSK_CTX_ERROR: return "error";
  case HUSK_CTX_INTERRUPTED: return "interrupted";
  case HUSK_CTX_TIMEOUT: return "timeout";
  case HUSK_CTX_DIED: return "died";
  case HUSK_CTX_RESTARTED: return "restarted";
  }
  return "unknown";
}

/* ---- an execution ---------------------------------------------------------------- */

struct wbuf {
  char *data;
  size_t len, off;
};

struct run {
  struct live_box *b;
  struct box_ctx *c;
  const struct husk_ctx_exec_req *req;
  struct husk_ctx_exec_result *out;
  char id[40];
  uint64_t limit;
  bool stopped; /* the caller's sink said stop: nothing more goes to it */
  bool ended;   /* our end event came */
  bool died;
  int exit_status; /* of the interpreter, when it died (-1: unknown) */
  const char *end_status;
};

static int buf_add(struct wbuf *w, const void *p, size_t n) {
  char *nd = realloc(w->data, w->len + n + 1);
  if (!nd)
    return -1;
  memcpy(nd + w->len, p, n);
  w->data = nd;
  w->len += n;
  return 0;
}

static int buf_dump(const char *p, size_t n, void *w) { return buf_add(w, p, n); }

static int buf_addf(struct wbuf *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int buf_addf(struct wbuf *w, const char *fmt, ...) {
  char tmp[256];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  return n < 0 || (size_t)n >= sizeof tmp ? -1 : buf_add(w, tmp, (size_t)n);
}

/* The request for python and javascript: one JSON line. */
static int json_request(struct run *r, struct wbuf *w, struct husk_err *err) {
  cleanup_json json_t *env = json_object();
  for (size_t i = 0; env && r->req->env && r->req->env[i]; i++) {
    const char *kv = r->req->env[i];
    const char *eq = strchr(kv, '=');
    cleanup_free char *name = eq ? strndup(kv, (size_t)(eq - kv)) : NULL;
    json_t *v = eq ? json_string(eq + 1) : NULL;
    if (!name || !v || json_object_set_new(env, name, v) < 0)
      return husk_fail(err, EINVAL, "environment entry %zu is not NAME=VALUE in UTF-8", i);
  }
  json_t *code = json_stringn(r->req->code ? r->req->code : "", r->req->code_len);
  if (!code)
    return husk_fail(err, EINVAL, "the code is not UTF-8 text");
  cleanup_json json_t *o =
      json_pack("{s:s, s:s, s:o, s:O}", "op", "execute", "id", r->id, "code", code, "env", env);
  if (!o || json_dump_callback(o, buf_dump, w, JSON_COMPACT) < 0 ||
      buf_add(w, "\n", 1) < 0)
    return husk_fail(err, ENOMEM, "out of memory");
  return 0;
}

/* The bash runner's framing: command lines on stdin, bytes on the code fd. */
static int bash_request(struct run *r, struct wbuf *cmd, struct wbuf *code, struct husk_err *err) {
  for (size_t i = 0; r->req->env && r->req->env[i]; i++) {
    const char *kv = r->req->env[i];
    const char *eq = strchr(kv, '=');
    if (buf_addf(cmd, "__husk_env %.*s %zu\n", (int)(eq - kv), kv, strlen(eq + 1)) < 0 ||
        buf_add(code, eq + 1, strlen(eq + 1)) < 0)
      return husk_fail(err, ENOMEM, "out of memory");
  }
  if (buf_addf(cmd, "__husk_read %s %zu\n__husk_eval\n", r->id, r->req->code_len) < 0 ||
      buf_add(code, r->req->code ? r->req->code : "", r->req->code_len) < 0)
    return husk_fail(err, ENOMEM, "out of memory");
  return 0;
}

/* A write that never raises SIGPIPE, on a socket or a pipe: SIGPIPE is
 * blocked in this thread around it, and one it raised is taken back. */
static ssize_t send_nosig(int fd, const void *buf, size_t n) {
  ssize_t w = send(fd, buf, n, MSG_DONTWAIT | MSG_NOSIGNAL);
  if (w >= 0 || errno != ENOTSOCK)
    return w;
  sigset_t pipe_set, old;
  sigemptyset(&pipe_set);
  sigaddset(&pipe_set, SIGPIPE);
  /* Already pending for the thread: not ours to take. */
  sigset_t pending;
  sigpending(&pending);
  bool was_pending = sigismember(&pending, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
  w = write(fd, buf, n);
  int e = errno;
  if (w < 0 && e == EPIPE && !was_pending) {
    struct timespec zero = {0, 0};
    while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
      ;
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  errno = e;
  return w;
}

static void stop_sink(struct run *r) {
  if (!r->stopped) {
    r->stopped = true;
    atomic_store(&r->c->sigint, true);
    jail_signal_fd(r->c->conn, r->c->pid, SIGINT, true, NULL);
  }
}

static void pass_stream(struct run *r, int stream, const char *buf, size_t n) {
  r->out->output_bytes += n;
  uint64_t before = r->out->output_bytes - n;
  if (before >= r->limit) {
    r->out->truncated = true;
    return;
  }
  if (before + n > r->limit) {
    n = (size_t)(r->limit - before);
    r->out->truncated = true;
  }
  if (!r->stopped && r->req->stream && r->req->stream(r->req->sink_ctx, stream, buf, n) < 0)
    stop_sink(r);
}

/* Read what a stream pipe has now: 1 while open, 0 at end of file. */
static int pump_stream(struct run *r, int which) {
  char buf[CTX_READ_CHUNK];
  for (;;) {
    ssize_t n = read(r->c->fd[which], buf, sizeof buf);
    if (n > 0) {
      pass_stream(r, which == P_OUT ? 1 : 2, buf, (size_t)n);
      continue;
    }
    if (n < 0 && errno == EINTR)
      continue;
    return n < 0 && errno == EAGAIN ? 1 : 0;
  }
}

/* A result or error event: checked and passed on. */
static void pass_output(struct run *r, json_t *o, bool is_error) {
  struct husk_ctx_output out = {.is_error = is_error};
  if (is_error) {
    out.name = json_string_value(json_object_get(o, "name"));
    out.value = json_string_value(json_object_get(o, "value"));
    out.traceback = json_string_value(json_object_get(o, "traceback"));
    if (!out.name)
      out.name = "Error";
    if (!out.value)
      out.value = "";
    if (!out.traceback)
      out.traceback = "";
  } else {
    json_t *data = json_object_get(o, "data");
    json_t *trunc = json_object_get(o, "truncated");
    if (!json_is_object(data))
      return;
    out.is_main_result = json_is_true(json_object_get(o, "is_main_result"));
    size_t n = json_object_size(data), nt = json_is_array(trunc) ? json_array_size(trunc) : 0;
    cleanup_free struct husk_ctx_repr *reprs = calloc(n ? n : 1, sizeof *reprs);
    cleanup_free const char **tr = calloc(nt ? nt : 1, sizeof *tr);
    if (!reprs || !tr)
      return;
    const char *k;
    json_t *v;
    json_object_foreach(data, k, v) {
      if (!json_is_string(v) || strlen(k) > 127)
        continue;
      reprs[out.nreprs++] = (struct husk_ctx_repr){
          .mime = k, .data = json_string_value(v), .len = json_string_length(v)};
    }
    for (size_t i = 0; i < nt; i++) {
      const char *s = json_string_value(json_array_get(trunc, i));
      if (s && strlen(s) <= 127)
        tr[out.ntruncated++] = s;
    }
    if (out.ntruncated)
      r->out->truncated = true;
    if (!out.nreprs && !out.ntruncated)
      return;
    out.reprs = reprs;
    out.truncated = tr;
    if (!r->stopped && r->req->output && r->req->output(r->req->sink_ctx, &out) < 0)
      stop_sink(r);
    return;
  }
  if (!r->stopped && r->req->output && r->req->output(r->req->sink_ctx, &out) < 0)
    stop_sink(r);
}

static void take_event(struct run *r, json_t *o) {
  const char *type = json_string_value(json_object_get(o, "type"));
  const char *id = json_string_value(json_object_get(o, "id"));
  if (!type || !id || strcmp(id, r->id))
    return; /* not this execution's (one from before a daemon restart) */
  if (!strcmp(type, "result"))
    pass_output(r, o, false);
  else if (!strcmp(type, "error"))
    pass_output(r, o, true);
  else if (!strcmp(type, "end")) {
    r->ended = true;
    json_t *cnt = json_object_get(o, "execution_count");
    if (json_is_integer(cnt) && json_integer_value(cnt) >= 0)
      r->out->execution_count = (uint64_t)json_integer_value(cnt);
    const char *st = json_string_value(json_object_get(o, "status"));
    r->end_status = !st ? "ok" : !strcmp(st, "error") ? "error"
                               : !strcmp(st, "interrupted") ? "interrupted" : "ok";
  }
}

/* Did the interpreter end?  An exit on its connection says so (waiting
 * up to wait_ms for it). */
static bool took_exit(struct run *r, int wait_ms) {
  union jail_event ev;
  struct husk_err err;
  for (;;) {
    struct pollfd p = {.fd = r->c->conn, .events = POLLIN};
    if (r->c->conn < 0 || poll(&p, 1, wait_ms) <= 0)
      return false;
    int rc = jail_recv_fd(r->c->conn, &ev, &err);
    if (rc <= 0) {
      r->exit_status = -1;
      return true;
    }
    if (ev.h.type == CTL_EXITED && ev.exited.pid == r->c->pid) {
      r->exit_status = ev.exited.status;
      return true;
    }
  }
}

static void describe_death(struct run *r) {
  int st = r->exit_status;
  char how[64];
  if (st >= 0 && WIFEXITED(st))
    snprintf(how, sizeof how, "exited with code %d", WEXITSTATUS(st));
  else if (st >= 0 && WIFSIGNALED(st))
    snprintf(how, sizeof how, "was killed by signal %d (%s)", WTERMSIG(st),
             strsignal(WTERMSIG(st)));
  else
    snprintf(how, sizeof how, "ended");
  snprintf(r->out->message, sizeof r->out->message, "the %s interpreter %s during the execution",
           r->c->lang->name, how);
}

int husk_ctx_execute(struct husk_mgr *m, const char *tenant, const char *box, const char *ctx_id,
                     const struct husk_ctx_exec_req *req, struct husk_ctx_exec_result *out,
                     struct husk_err *err) {
  memset(out, 0, sizeof *out);
  if (!req || (!req->code && req->code_len))
    return husk_fail(err, EINVAL, "no code");
  if (check_env(req->env, err) < 0)
    return -1;
  if (req->timeout_ms > HUSK_MAX_TIMEOUT_MS)
    return husk_fail(err, EINVAL, "the timeout is past the most a box may live");
  if (!ctx_id || !ctx_valid_id(ctx_id))
    return husk_fail(err, ENOENT, "no such context");
  struct box_ctx *c = NULL;
  struct live_box *b = ctx_lookup(m, tenant, box, NULL, &c, err);
  if (!b)
    return -1;
  pthread_mutex_lock(&b->lock);
  c = ctx_find_locked(b, ctx_id);
  if (c)
    c->refs++;
  pthread_mutex_unlock(&b->lock);
  if (!c && !strncmp(ctx_id, "default-", 8)) {
    struct husk_ctx_req cr = {.language = ctx_id + 8};
    if (!lang_find(cr.language)) {
      lb_unref(m, b);
      return husk_fail(err, ENOENT, "no such context");
    }
    if (ctx_create_in(m, b, ctx_id, &cr, &c, err) < 0) {
      lb_unref(m, b);
      return -1;
    }
  }
  if (!c) {
    lb_unref(m, b);
    return husk_fail(err, ENOENT, "no such context");
  }
  if (pthread_mutex_trylock(&c->run) != 0) {
    ctx_unref(b, c);
    lb_unref(m, b);
    return husk_fail(err, EALREADY, "context %s is running another execution", c->id);
  }
  int rc = -1;
  struct run r = {.b = b, .c = c, .req = req, .out = out, .exit_status = -1,
                  .limit = req->output_limit ? req->output_limit : HUSK_DEFAULT_OUTPUT};
  struct wbuf w[2] = {{0}, {0}}; /* requests, code (bash) */
  bool removed;
  pthread_mutex_lock(&b->lock);
  removed = c->removed;
  pthread_mutex_unlock(&b->lock);
  if (removed) {
    husk_fail(err, ENOENT, "no such context");
    goto out;
  }
  /* An interpreter that ended since (or before a daemon restart) starts
   * again, its state gone: the reply says so. */
  {
    struct run probe = {.c = c, .exit_status = -1};
    if (!c->ended && c->conn >= 0 && took_exit(&probe, 0))
      c->ended = true;
    if (c->ended || c->conn < 0) {
      ctx_stop(b, c);
      if (ctx_spawn(b, c, err) < 0 || ctx_persist(b, c, err) < 0) {
        ctx_stop(b, c);
        c->ended = true;
        goto out;
      }
      out->restarted = true;
      snprintf(out->message, sizeof out->message,
               "the %s interpreter had ended: it was started again, without its state",
               c->lang->name);
    }
  }
  if (id_new("x", 8, r.id, sizeof r.id, err) < 0)
    goto out;
  if (is_bash(c) ? bash_request(&r, &w[0], &w[1], err) < 0 : json_request(&r, &w[0], err) < 0)
    goto out;
  pthread_mutex_lock(&b->lock);
  c->busy = true;
  pthread_mutex_unlock(&b->lock);
  atomic_store(&c->sigint, false);
  if (req->started)
    req->started(req->sink_ctx);
  int64_t t0 = mono_ms(), t0_us = mono_us();
  uint64_t timeout = req->timeout_ms ? req->timeout_ms : HUSK_DEFAULT_TIMEOUT_MS;
  int64_t deadline = t0 + (int64_t)(timeout < (uint64_t)INT64_MAX / 2 ? timeout : INT64_MAX / 4);
  int64_t grace = 0; /* after the timeout's SIGINT: restart when passed */
  bool timed_out = false, out_open = true, err_open = true, ev_eof = false, dropped = false;
  bool cancel_seen = false, forced = false;
  while (!r.ended && !r.died) {
    struct pollfd p[7];
    int wi[7];
    nfds_t np = 0;
    for (int k = 0; k < 2; k++)
      if (w[k].off < w[k].len) {
        wi[np] = k;
        p[np++] = (struct pollfd){.fd = c->fd[k == 0 ? P_REQ : P_CODE], .events = POLLOUT};
      }
    wi[np] = P_EV + 10;
    p[np++] = (struct pollfd){.fd = c->fd[P_EV], .events = POLLIN};
    if (out_open) {
      wi[np] = P_OUT + 10;
      p[np++] = (struct pollfd){.fd = c->fd[P_OUT], .events = POLLIN};
    }
    if (err_open) {
      wi[np] = P_ERR + 10;
      p[np++] = (struct pollfd){.fd = c->fd[P_ERR], .events = POLLIN};
    }
    wi[np] = 20;
    p[np++] = (struct pollfd){.fd = c->conn, .events = POLLIN};
    if (req->cancel_fd >= 0 && !cancel_seen) {
      wi[np] = 21;
      p[np++] = (struct pollfd){.fd = req->cancel_fd, .events = POLLIN};
    }
    int64_t now = mono_ms(), until = grace ? grace : deadline;
    int wait = until > now ? (int)(until - now < 1000 ? until - now : 1000) : 0;
    int pr = poll(p, np, wait);
    if (pr < 0 && errno != EINTR) {
      husk_error(err, errno, "poll");
      break;
    }
    for (nfds_t k = 0; pr > 0 && k < np; k++) {
      if (!p[k].revents)
        continue;
      int what = wi[k];
      if (what < 2) {
        struct wbuf *b2 = &w[what];
        ssize_t n = send_nosig(p[k].fd, b2->data + b2->off, b2->len - b2->off);
        if (n > 0)
          b2->off += (size_t)n;
        else if (n < 0 && errno != EAGAIN && errno != EINTR)
          b2->off = b2->len; /* it died: its exit tells */
      } else if (what == P_OUT + 10) {
        out_open = pump_stream(&r, P_OUT);
      } else if (what == P_ERR + 10) {
        err_open = pump_stream(&r, P_ERR);
      } else if (what == P_EV + 10) {
        json_t *o;
        int e;
        while ((e = read_event(c, &o, &dropped, &ev_eof)) > 0) {
          /* What the code printed before the event is in the stream pipes
           * by now: it goes first, so that the order is the code's. */
          if (out_open)
            out_open = pump_stream(&r, P_OUT);
          if (err_open)
            err_open = pump_stream(&r, P_ERR);
          take_event(&r, o);
          json_decref(o);
          if (r.ended)
            break;
        }
        if (e < 0 && !r.ended) {
          took_exit(&r, 1000);
          r.died = true;
        }
      } else if (what == 20) {
        if (took_exit(&r, 0))
          r.died = true;
      } else if (what == 21) {
        cancel_seen = true;
        stop_sink(&r);
      }
    }
    if (r.ended || r.died)
      break;
    now = mono_ms();
    if (r.stopped && !grace)
      grace = now + CTX_GRACE_MS; /* the caller is gone: the same grace */
    if (!timed_out && now >= deadline) {
      timed_out = true;
      grace = now + CTX_GRACE_MS;
      jail_signal_fd(c->conn, c->pid, SIGINT, true, NULL);
    } else if (grace && now >= grace) {
      r.died = forced = true; /* it ignored the interrupt */
      break;
    }
  }
  if (dropped)
    out->truncated = true;
  /* The runner flushed its streams before "end": what they hold now is
   * this execution's. */
  if (r.ended) {
    if (out_open)
      pump_stream(&r, P_OUT);
    if (err_open)
      pump_stream(&r, P_ERR);
  }
  out->duration_ms = (double)(mono_us() - t0_us) / 1000.0;
  bool killed = atomic_load(&c->killing);
  if (r.ended) {
    out->status = timed_out ? HUSK_CTX_TIMEOUT
                  : !strcmp(r.end_status, "interrupted") ||
                          (is_bash(c) && atomic_load(&c->sigint))
                      ? HUSK_CTX_INTERRUPTED
                  : !strcmp(r.end_status, "error") ? HUSK_CTX_ERROR
                                                   : HUSK_CTX_OK;
    c->count = out->execution_count;
  } else if (killed) {
    out->status = HUSK_CTX_RESTARTED;
    snprintf(out->message, sizeof out->message,
             "the context was restarted or deleted during the execution");
  } else if (b->ending) {
    husk_fail(err, EBUSY, "sandbox %s ended during the execution", b->id);
    goto busy_out;
  } else if (r.died || timed_out) {
    /* Drain what it wrote before it ended, then start it again. */
    if (out_open)
      pump_stream(&r, P_OUT);
    if (err_open)
      pump_stream(&r, P_ERR);
    if (timed_out || forced) {
      out->status = timed_out ? HUSK_CTX_TIMEOUT : HUSK_CTX_INTERRUPTED;
      snprintf(out->message, sizeof out->message,
               "the execution ignored the interrupt%s: the context was restarted, without its "
               "state",
               timed_out ? " at its timeout" : "");
    } else {
      out->status = HUSK_CTX_DIED;
      describe_death(&r);
    }
    ctx_stop(b, c);
    pthread_mutex_lock(&b->lock);
    c->pid = 0;
    pthread_mutex_unlock(&b->lock);
    struct husk_err e2;
    if (ctx_spawn(b, c, &e2) < 0 || ctx_persist(b, c, &e2) < 0) {
      ctx_stop(b, c);
      c->ended = true;
      size_t l = strlen(out->message);
      snprintf(out->message + l, sizeof out->message - l, "; it could not be started again: %s",
               e2.msg);
    } else {
      out->restarted = true;
    }
  } else {
    goto busy_out; /* poll failed: err says */
  }
  rc = 0;
busy_out:
  pthread_mutex_lock(&b->lock);
  c->busy = false;
  pthread_mutex_unlock(&b->lock);
out:
  free(w[0].data);
  free(w[1].data);
  pthread_mutex_unlock(&c->run);
  ctx_unref(b, c);
  lb_unref(m, b);
  return rc;
}
