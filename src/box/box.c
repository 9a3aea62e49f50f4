/* Long-lived boxes (see box.h).
 *
 * In memory, the manager keeps one `struct live_box` per box that holds
 * host resources: its jail (init's pid and pidfd, a control connection,
 * the box filesystem's fd, the cgroup), the env applied to every exec, and
 * the stdin pipes of background processes.  The database is the record:
 * every change a caller is told about is committed there first, and a
 * restarted daemon rebuilds its memory from it (box_mgr_open).
 *
 * One monitor thread watches every box: TTL expiry, init dying on its own
 * (pidfd), and the exits of background processes (each has a control
 * connection of its own; exits of processes whose connection was lost in a
 * daemon restart arrive on the box's watch connection).
 *
 * A live_box is reference-counted: lookups take a reference, and the jail's
 * fds are released only when the last user is done, so a DELETE racing an
 * exec never leaves the exec reading a closed (and maybe reused) fd. */
#define _GNU_SOURCE
#include "box/box.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jail/jail.h"
#include "jail/limits.h"
#include "jail/syscalls.h"
#include "state/state.h"
#include "util/cleanup.h"
#include "util/fileio.h"

#define MONITOR_MAX_MS 1000 /* the monitor looks at expiries at least this often */

struct bgproc {
  struct bgproc *next;
  int64_t pid;
  uint64_t exec_id;
  int conn;    /* the control connection that started it (monitor reads EXITED), -1 after */
  int stdin_w; /* write end of its stdin pipe, -1 once closed */
};

struct live_box {
  struct live_box *next;
  int refs;        /* under mgr->lock */
  bool listed;     /* in mgr->boxes */
  pthread_mutex_t lock; /* serialises lifecycle changes and bgproc list */
  bool ending;     /* destroy started: no new work */
  char id[STATE_BOX_ID_SIZE];
  char tenant[STATE_TENANT_ID_SIZE];
  struct jail j;
  char ctl_path[PATH_MAX];
  char **env;      /* NAME=VALUE, NULL-terminated, owned */
  struct husk_limits limits;
  int64_t expires_ms;
  struct bgproc *procs;
  uint64_t next_exec_id;
};

struct box_mgr {
  struct box_mgr_config cfg;
  char data_dir[PATH_MAX];
  pthread_mutex_t lock;
  struct live_box *boxes;
  pthread_t monitor;
  bool monitor_running;
  bool stop;
  int wake[2]; /* written to when the set of things to watch changes */
};

static void logf_(struct box_mgr *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(struct box_mgr *m, const char *fmt, ...) {
  if (!m->cfg.log)
    return;
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  husk_sanitize_line(line);
  m->cfg.log(m->cfg.log_ctx, line);
}

static void wake_monitor(struct box_mgr *m) {
  if (m->wake[1] >= 0 && write(m->wake[1], "x", 1) < 0) {
    /* pipe full: the monitor is already due to wake up */
  }
}

/* ---- env <-> JSON ------------------------------------------------------ */

static char *env_to_json(char *const *env, struct husk_err *err) {
  json_t *o = json_object();
  for (size_t i = 0; o && env && env[i]; i++) {
    const char *eq = strchr(env[i], '=');
    if (!eq || eq == env[i]) {
      json_decref(o);
      husk_fail(err, EINVAL, "environment entry without a name");
      return NULL;
    }
    char name[256];
    size_t n = (size_t)(eq - env[i]);
    if (n >= sizeof name) {
      json_decref(o);
      husk_fail(err, EINVAL, "environment variable name too long");
      return NULL;
    }
    memcpy(name, env[i], n);
    name[n] = '\0';
    json_object_set_new(o, name, json_string(eq + 1));
  }
  char *s = o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  json_decref(o);
  if (!s)
    husk_fail(err, ENOMEM, "environment");
  return s;
}

static void env_free(char **env) {
  for (size_t i = 0; env && env[i]; i++)
    free(env[i]);
  free(env);
}

static char **env_from_json(const char *s) {
  json_error_t je;
  json_t *o = s ? json_loads(s, 0, &je) : json_object();
  if (!json_is_object(o)) {
    json_decref(o);
    return calloc(1, sizeof(char *));
  }
  char **env = calloc(json_object_size(o) + 1, sizeof *env);
  size_t n = 0;
  const char *k;
  json_t *v;
  json_object_foreach(o, k, v) {
    if (!env || !json_is_string(v))
      continue;
    if (asprintf(&env[n], "%s=%s", k, json_string_value(v)) >= 0)
      n++;
  }
  json_decref(o);
  return env;
}

/* ---- live boxes ---------------------------------------------------------- */

static struct live_box *lb_new(void) {
  struct live_box *b = calloc(1, sizeof *b);
  if (!b)
    return NULL;
  pthread_mutex_init(&b->lock, NULL);
  b->j = (struct jail)JAIL_INIT;
  b->refs = 1;
  b->next_exec_id = 1;
  return b;
}

static void bgproc_free_all(struct live_box *b) {
  for (struct bgproc *p = b->procs, *n; p; p = n) {
    n = p->next;
    close_quiet(p->conn);
    close_quiet(p->stdin_w);
    free(p);
  }
  b->procs = NULL;
}

/* Release host resources and memory.  The box must be dead already or
 * about to be killed here. */
static void lb_free(struct box_mgr *m, struct live_box *b) {
  struct husk_err err;
  if (jail_destroy(&b->j, true, NULL, &err) < 0)
    logf_(m, "box %s: teardown: %s", b->id, err.msg);
  if (b->ctl_path[0])
    unlink(b->ctl_path);
  bgproc_free_all(b);
  env_free(b->env);
  pthread_mutex_destroy(&b->lock);
  free(b);
}

static void lb_unref(struct box_mgr *m, struct live_box *b) {
  pthread_mutex_lock(&m->lock);
  bool last = --b->refs == 0;
  pthread_mutex_unlock(&m->lock);
  if (last)
    lb_free(m, b);
}

/* Find a live box of `tenant` (NULL = any) and take a reference. */
static struct live_box *lb_get(struct box_mgr *m, const char *tenant, const char *id) {
  pthread_mutex_lock(&m->lock);
  struct live_box *b = m->boxes;
  for (; b; b = b->next)
    if (!strcmp(b->id, id) && (!tenant || !strcmp(b->tenant, tenant)))
      break;
  if (b)
    b->refs++;
  pthread_mutex_unlock(&m->lock);
  return b;
}

static void lb_list_add(struct box_mgr *m, struct live_box *b) {
  pthread_mutex_lock(&m->lock);
  b->next = m->boxes;
  m->boxes = b;
  b->listed = true;
  b->refs++;
  pthread_mutex_unlock(&m->lock);
  wake_monitor(m);
}

/* Remove from the list; returns true if this call removed it. */
static bool lb_list_remove(struct box_mgr *m, struct live_box *b) {
  bool removed = false;
  pthread_mutex_lock(&m->lock);
  for (struct live_box **pp = &m->boxes; *pp; pp = &(*pp)->next)
    if (*pp == b) {
      *pp = b->next;
      b->listed = false;
      removed = true;
      break;
    }
  pthread_mutex_unlock(&m->lock);
  if (removed) {
    wake_monitor(m);
    lb_unref(m, b); /* the list's reference */
  }
  return removed;
}

/* An id that reaches a path or the database must look like one of ours. */
static bool valid_id(const char *id) {
  size_t n = id ? strlen(id) : 0;
  if (n == 0 || n >= STATE_BOX_ID_SIZE)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') ||
          (id[i] >= '0' && id[i] <= '9') || id[i] == '_' || id[i] == '-'))
      return false;
  return true;
}

static uint64_t proc_start_time(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  if (n <= 0)
    return 0;
  buf[n] = '\0';
  /* comm may hold spaces and parens: fields resume after the last ')'. */
  char *p = strrchr(buf, ')');
  if (!p)
    return 0;
  unsigned long long v = 0;
  /* after ") ": state(3) ... starttime is field 22 -> 20th after comm */
  int field = 2;
  for (char *t = p + 1; *t; t++) {
    if (*t == ' ') {
      field++;
      if (field == 22) {
        v = strtoull(t + 1, NULL, 10);
        break;
      }
    }
  }
  return v;
}

/* ---- info ------------------------------------------------------------------ */

void box_info_free(struct box_info *bi) {
  if (!bi)
    return;
  free(bi->metadata_json);
  free(bi->env_json);
  bi->metadata_json = bi->env_json = NULL;
}

/* The API's state: the database's, with "stopped" refined by its reason. */
static void fill_info(struct box_info *bi, const struct state_box *sb) {
  memset(bi, 0, sizeof *bi);
  snprintf(bi->id, sizeof bi->id, "%s", sb->id);
  snprintf(bi->tenant_id, sizeof bi->tenant_id, "%s", sb->tenant_id);
  const char *st = sb->state;
  if (!strcmp(st, STATE_BOX_STOPPED) && (!strcmp(sb->reason, "expired") || !strcmp(sb->reason, "killed")))
    st = sb->reason;
  snprintf(bi->state, sizeof bi->state, "%.15s", st);
  snprintf(bi->reason, sizeof bi->reason, "%s", sb->reason);
  snprintf(bi->template_name, sizeof bi->template_name, "%s", sb->template_name[0] ? sb->template_name : "default");
  bi->limits.memory_bytes = (uint64_t)sb->memory;
  bi->limits.pids = (uint64_t)sb->pids;
  bi->limits.cpu_milli = (uint64_t)sb->cpu_milli;
  bi->limits.disk_bytes = (uint64_t)sb->disk;
  bi->limits.timeout_ms = (uint64_t)sb->timeout_ms;
  bi->created_ms = sb->created_ms;
  bi->expires_ms = sb->expires_ms;
  bi->ended_ms = sb->ended_ms;
  bi->metadata_json = strdup(sb->metadata_json ? sb->metadata_json : "{}");
  bi->env_json = strdup(sb->env_json ? sb->env_json : "{}");
}

int box_get(struct box_mgr *m, const char *tenant, const char *id, struct box_info *out,
            struct husk_err *err) {
  if (!valid_id(id))
    return husk_fail(err, ENOENT, "no such sandbox");
  struct state_box sb;
  if (state_box_get(m->cfg.state, tenant, id, &sb, err) < 0)
    return -1;
  fill_info(out, &sb);
  state_box_free(&sb);
  return 0;
}

struct list_ctx {
  int (*cb)(void *, const struct box_info *);
  void *ctx;
  const char *reason; /* only boxes with this reason, or NULL */
};

static int list_cb(void *ctx, const struct state_box *sb) {
  struct list_ctx *lc = ctx;
  if (lc->reason && strcmp(sb->reason, lc->reason))
    return 0;
  struct box_info bi;
  fill_info(&bi, sb);
  int rc = lc->cb(lc->ctx, &bi);
  box_info_free(&bi);
  return rc;
}

int box_list(struct box_mgr *m, const char *tenant, const struct box_list_req *req,
             int (*cb)(void *ctx, const struct box_info *bi), void *ctx, char *next_cursor,
             size_t next_len, struct husk_err *err) {
  struct list_ctx lc = {.cb = cb, .ctx = ctx};
  const char *st = req->state;
  /* "killed" and "expired" are stopped boxes with that reason; filtering
   * the reason here keeps the state layer's vocabulary small (pages may
   * then come back shorter than the limit). */
  if (st && (!strcmp(st, "killed") || !strcmp(st, "expired"))) {
    lc.reason = st;
    st = STATE_BOX_STOPPED;
  }
  struct state_box_filter f = {.tenant_id = tenant, .state = st, .meta_keys = req->meta_keys,
                               .meta_values = req->meta_values, .nmeta = req->nmeta,
                               .cursor = req->cursor, .limit = req->limit};
  return state_box_list(m->cfg.state, &f, list_cb, &lc, next_cursor, next_len, err);
}

/* ---- create ------------------------------------------------------------------ */

static int ctl_path_for(struct box_mgr *m, const char *id, char *out, size_t len,
                        struct husk_err *err) {
  int n = snprintf(out, len, "%s/boxes/%s.sock", m->data_dir, id);
  if (n < 0 || (size_t)n >= len || (size_t)n >= 108 /* sun_path */)
    return husk_fail(err, ENAMETOOLONG,
                     "data directory `%s` is too long for a unix socket path (use a shorter --data)",
                     m->data_dir);
  return 0;
}

int box_create(struct box_mgr *m, const char *tenant, const struct box_create_req *req,
               struct box_info *out, struct husk_err *err) {
  if (req->template_name && req->template_name[0] && strcmp(req->template_name, "default"))
    return husk_fail(err, EINVAL, "unknown template `%s` (available: default)", req->template_name);
  struct husk_limits lim = req->limits;
  uint64_t ttl = lim.timeout_ms ? lim.timeout_ms : m->cfg.default_ttl_ms;
  if (ttl > m->cfg.max_ttl_ms)
    return husk_fail(err, EINVAL, "timeout %llu s is above the maximum of %llu s",
                     (unsigned long long)(ttl / 1000), (unsigned long long)(m->cfg.max_ttl_ms / 1000));
  lim.timeout_ms = ttl;
  char msg[256];
  if (husk_limits_resolve(&lim, msg, sizeof msg) < 0)
    return husk_fail(err, EINVAL, "%s", msg);

  struct state_box sb = {0};
  if (state_new_id("b_", sb.id, sizeof sb.id, err) < 0)
    return -1;
  snprintf(sb.tenant_id, sizeof sb.tenant_id, "%s", tenant);
  snprintf(sb.state, sizeof sb.state, "%s", STATE_BOX_CREATING);
  snprintf(sb.template_name, sizeof sb.template_name, "default");
  sb.memory = (int64_t)lim.memory_bytes;
  sb.pids = (int64_t)lim.pids;
  sb.cpu_milli = (int64_t)lim.cpu_milli;
  sb.disk = (int64_t)lim.disk_bytes;
  sb.timeout_ms = (int64_t)ttl;
  sb.created_ms = state_now_ms();
  sb.expires_ms = sb.created_ms + (int64_t)ttl;
  sb.uid_base = -1;
  sb.slot = -1;
  snprintf(sb.cgroup, sizeof sb.cgroup, "box-%s", sb.id);
  cleanup_free char *env_json = env_to_json(req->env, err);
  if (!env_json)
    return -1;
  sb.env_json = env_json;
  sb.metadata_json = (char *)(req->metadata_json ? req->metadata_json : "{}");

  struct live_box *b = lb_new();
  if (!b)
    return husk_fail(err, ENOMEM, "out of memory");
  snprintf(b->id, sizeof b->id, "%s", sb.id);
  snprintf(b->tenant, sizeof b->tenant, "%s", tenant);
  b->limits = lim;
  b->expires_ms = sb.expires_ms;
  b->env = env_from_json(env_json);
  if (!b->env || ctl_path_for(m, b->id, b->ctl_path, sizeof b->ctl_path, err) < 0) {
    if (!b->env)
      husk_fail(err, ENOMEM, "out of memory");
    b->ctl_path[0] = '\0';
    lb_free(m, b);
    return -1;
  }
  /* The row first: a crash from here on leaves a "creating" box that the
   * next start cleans up, never an untracked cgroup or process. */
  if (state_box_insert(m->cfg.state, &sb, err) < 0) {
    b->ctl_path[0] = '\0';
    lb_free(m, b);
    return -1;
  }
  struct jail_config jc = {
      .limits = {.memory_bytes = lim.memory_bytes, .pids = lim.pids, .cpu_milli = lim.cpu_milli},
      .disk_bytes = lim.disk_bytes, .name = sb.cgroup, .die_with_parent = false,
      .ctl_path = b->ctl_path};
  struct husk_err ignored;
  if (jail_create(&b->j, &jc, err) < 0) {
    husk_error_wrap(err, "cannot create the sandbox");
    state_box_set_state(m->cfg.state, sb.id, NULL, STATE_BOX_FAILED, "setup_error", 0, &ignored);
    lb_free(m, b);
    return -1;
  }
  /* The control connection we created it with becomes the watch
   * connection: it receives exits nobody else is listening for. */
  if (jail_watch(b->j.ctl, err) < 0 ||
      state_box_set_runtime(m->cfg.state, sb.id, b->j.pid, proc_start_time(b->j.pid),
                            b->j.uid_base, b->j.slot, NULL, err) < 0 ||
      state_box_set_state(m->cfg.state, sb.id, STATE_BOX_CREATING, STATE_BOX_RUNNING, "", 0, err) < 0) {
    husk_error_wrap(err, "cannot start the sandbox");
    state_box_set_state(m->cfg.state, sb.id, NULL, STATE_BOX_FAILED, "setup_error", 0, &ignored);
    lb_free(m, b);
    return -1;
  }
  lb_list_add(m, b);
  lb_unref(m, b); /* the list holds it now */
  logf_(m, "box %s created for tenant %s", sb.id, tenant);
  return out ? box_get(m, tenant, sb.id, out, err) : 0;
}

/* ---- destroy ------------------------------------------------------------------ */

/* End a listed box: record it, make it unreachable, kill it.  The jail is
 * torn down when the last reference goes (at once unless an exec is still
 * returning). */
static int end_box(struct box_mgr *m, struct live_box *b, const char *state, const char *reason,
                   struct husk_err *err) {
  pthread_mutex_lock(&b->lock);
  if (b->ending) {
    pthread_mutex_unlock(&b->lock);
    return husk_fail(err, ENOENT, "no such sandbox");
  }
  b->ending = true;
  pthread_mutex_unlock(&b->lock);
  struct husk_err e2;
  if (state_box_set_state(m->cfg.state, b->id, NULL, STATE_BOX_STOPPING, reason, 0, &e2) < 0)
    logf_(m, "box %s: %s", b->id, e2.msg);
  jail_kill(&b->j);
  lb_list_remove(m, b);
  /* Teardown (waitpid, cgroup removal) happens in lb_free; record the end
   * once the box is unreachable. */
  if (state_box_set_state(m->cfg.state, b->id, NULL, state, reason, 0, err) < 0)
    return -1;
  logf_(m, "box %s ended: %s (%s)", b->id, state, reason);
  return 0;
}

int box_destroy(struct box_mgr *m, const char *tenant, const char *id, const char *final_state,
                struct husk_err *err) {
  if (!valid_id(id))
    return husk_fail(err, ENOENT, "no such sandbox");
  struct live_box *b = lb_get(m, tenant, id);
  if (!b) {
    /* Known but not live (already ended) -> conflict; unknown -> not found. */
    struct state_box sb;
    if (state_box_get(m->cfg.state, tenant, id, &sb, err) < 0)
      return -1;
    state_box_free(&sb);
    return husk_fail(err, EBUSY, "sandbox %s is not running", id);
  }
  const char *reason = final_state && !strcmp(final_state, "killed") ? "killed" : "deleted";
  int rc = end_box(m, b, STATE_BOX_STOPPED, reason, err);
  lb_unref(m, b);
  return rc;
}

int box_set_timeout(struct box_mgr *m, const char *tenant, const char *id, uint64_t ttl_ms,
                    struct box_info *out, struct husk_err *err) {
  if (!valid_id(id))
    return husk_fail(err, ENOENT, "no such sandbox");
  if (ttl_ms == 0 || ttl_ms > m->cfg.max_ttl_ms)
    return husk_fail(err, EINVAL, "timeout must be between 1 ms and %llu s",
                     (unsigned long long)(m->cfg.max_ttl_ms / 1000));
  struct live_box *b = lb_get(m, tenant, id);
  if (!b) {
    struct state_box sb;
    if (state_box_get(m->cfg.state, tenant, id, &sb, err) < 0)
      return -1;
    state_box_free(&sb);
    return husk_fail(err, EBUSY, "sandbox %s is not running", id);
  }
  int64_t exp = state_now_ms() + (int64_t)ttl_ms;
  int rc = state_box_set_expiry(m->cfg.state, id, exp, err);
  if (rc == 0) {
    pthread_mutex_lock(&m->lock);
    b->expires_ms = exp;
    pthread_mutex_unlock(&m->lock);
    wake_monitor(m);
  }
  lb_unref(m, b);
  if (rc < 0)
    return -1;
  return out ? box_get(m, tenant, id, out, err) : 0;
}

/* ---- exec ---------------------------------------------------------------------- */

/* A running box of `tenant`, with a reference, or an error that tells an
 * unknown id (ENOENT) from an ended box (EBUSY). */
static struct live_box *running_box(struct box_mgr *m, const char *tenant, const char *id,
                                    struct husk_err *err) {
  if (!valid_id(id)) {
    husk_fail(err, ENOENT, "no such sandbox");
    return NULL;
  }
  struct live_box *b = lb_get(m, tenant, id);
  if (b && !b->ending)
    return b;
  if (b)
    lb_unref(m, b);
  struct state_box sb;
  if (state_box_get(m->cfg.state, tenant, id, &sb, err) < 0)
    return NULL;
  husk_fail(err, EBUSY, "sandbox %s is %s", id, sb.state);
  state_box_free(&sb);
  return NULL;
}

static int check_exec(const struct box_exec_req *req, struct husk_err *err) {
  if (!req->argv || !req->argv[0] || !req->argv[0][0])
    return husk_fail(err, EINVAL, "cmd must be a non-empty array of strings");
  if (req->cwd && req->cwd[0] != '/')
    return husk_fail(err, EINVAL, "cwd must be an absolute path");
  if (req->timeout_ms > HUSK_MAX_TIMEOUT_MS)
    return husk_fail(err, EINVAL, "timeout is too large");
  for (size_t i = 0; req->env && req->env[i]; i++)
    if (!strchr(req->env[i], '=') || req->env[i][0] == '=')
      return husk_fail(err, EINVAL, "env entries must be NAME=VALUE");
  return 0;
}

int box_exec(struct box_mgr *m, const char *tenant, const char *id, const struct box_exec_req *req,
             struct exec_outcome *out, struct husk_err *err) {
  if (check_exec(req, err) < 0)
    return -1;
  struct live_box *b = running_box(m, tenant, id, err);
  if (!b)
    return -1;
  int rc = -1;
  cleanup_free char **env = exec_build_env(b->env, req->env);
  cleanup_close int conn = jail_connect(b->ctl_path, err);
  if (!env)
    husk_fail(err, ENOMEM, "out of memory");
  if (env && conn >= 0) {
    struct exec_spec es = {.argv = req->argv, .env = env, .cwd = req->cwd ? req->cwd : "/workspace",
                           .timeout_ms = req->timeout_ms ? req->timeout_ms : HUSK_DEFAULT_TIMEOUT_MS,
                           .output_limit = req->output_limit ? req->output_limit : HUSK_DEFAULT_OUTPUT,
                           .stdin_fd = -1, .stdin_buf = req->stdin_buf, .stdin_len = req->stdin_len,
                           .sink = req->sink, .sink_ctx = req->sink_ctx, .started = req->started,
                           .signal_fd = -1, .cancel_fd = req->cancel_fd >= 0 ? req->cancel_fd : -1};
    exec_relay(&b->j, conn, false, &es, out);
    if (out->reason == HUSK_REASON_SETUP_ERROR && b->ending)
      husk_fail(err, EBUSY, "sandbox %s ended during the command", id);
    else
      rc = 0;
  }
  lb_unref(m, b);
  return rc;
}

/* ---- background processes --------------------------------------------------------- */

void box_proc_free(struct box_proc *p) {
  if (p) {
    free(p->cmd_json);
    p->cmd_json = NULL;
  }
}

static void proc_from_state(struct box_proc *bp, const struct state_proc *sp) {
  memset(bp, 0, sizeof *bp);
  bp->pid = sp->pid;
  snprintf(bp->state, sizeof bp->state, "%s", sp->state);
  bp->signal = (int)sp->signal;
  bp->exit_code = sp->signal ? 128 + (int)sp->signal : (int)sp->exit_code;
  bp->started_ms = sp->started_ms;
  bp->ended_ms = sp->ended_ms;
  bp->cmd_json = strdup(sp->cmd_json ? sp->cmd_json : "[]");
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

int box_exec_background(struct box_mgr *m, const char *tenant, const char *id,
                        const struct box_exec_req *req, struct box_proc *out, struct husk_err *err) {
  if (check_exec(req, err) < 0)
    return -1;
  struct live_box *b = running_box(m, tenant, id, err);
  if (!b)
    return -1;
  int rc = -1;
  int conn = -1, in[2] = {-1, -1}, outf = -1, errf = -1;
  char tmp_out[64], tmp_err[64];
  cleanup_free char **env = exec_build_env(b->env, req->env);
  cleanup_free char *cmd_json = argv_to_json(req->argv);
  if (!env || !cmd_json) {
    husk_fail(err, ENOMEM, "out of memory");
    goto out;
  }
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
  if (jail_exec_fd(conn, eid, req->argv, env, req->cwd ? req->cwd : "/workspace", fds, err) < 0)
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
    logf_(m, "box %s: cannot name output of pid %lld: %s", b->id, (long long)pid, strerror(errno));
  struct state_proc sp = {.pid = pid, .cmd_json = cmd_json, .exit_code = -1};
  snprintf(sp.box_id, sizeof sp.box_id, "%s", b->id);
  snprintf(sp.state, sizeof sp.state, "%s", STATE_PROC_RUNNING);
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
  conn = in[1] = -1;
  pthread_mutex_lock(&b->lock);
  bp->next = b->procs;
  b->procs = bp;
  pthread_mutex_unlock(&b->lock);
  wake_monitor(m); /* it watches the new connection for the exit */
  if (out) {
    memset(out, 0, sizeof *out);
    out->pid = pid;
    snprintf(out->state, sizeof out->state, "%s", STATE_PROC_RUNNING);
    out->started_ms = sp.started_ms;
    out->cmd_json = strdup(cmd_json);
  }
  rc = 0;
out:
  close_quiet(conn);
  close_quiet(in[0]);
  close_quiet(in[1]);
  close_quiet(outf);
  close_quiet(errf);
  if (rc < 0 && b->j.fs >= 0) {
    unlinkat(b->j.fs, tmp_out, 0);
    unlinkat(b->j.fs, tmp_err, 0);
  }
  lb_unref(m, b);
  return rc;
}

struct proc_list_ctx {
  int (*cb)(void *, const struct box_proc *);
  void *ctx;
};

static int proc_list_cb(void *ctx, const struct state_proc *sp) {
  struct proc_list_ctx *pc = ctx;
  struct box_proc bp;
  proc_from_state(&bp, sp);
  int rc = pc->cb(pc->ctx, &bp);
  box_proc_free(&bp);
  return rc;
}

int box_proc_list(struct box_mgr *m, const char *tenant, const char *id,
                  int (*cb)(void *ctx, const struct box_proc *p), void *ctx, struct husk_err *err) {
  if (!valid_id(id))
    return husk_fail(err, ENOENT, "no such sandbox");
  struct state_box sb;
  if (state_box_get(m->cfg.state, tenant, id, &sb, err) < 0)
    return -1;
  state_box_free(&sb);
  struct proc_list_ctx pc = {.cb = cb, .ctx = ctx};
  return state_proc_list(m->cfg.state, tenant, id, 0, STATE_LIST_MAX, proc_list_cb, &pc, err);
}

int box_proc_get(struct box_mgr *m, const char *tenant, const char *id, int64_t pid,
                 struct box_proc *out, struct husk_err *err) {
  if (!valid_id(id))
    return husk_fail(err, ENOENT, "no such sandbox");
  struct state_proc sp;
  if (state_proc_get(m->cfg.state, tenant, id, pid, &sp, err) < 0)
    return -1;
  proc_from_state(out, &sp);
  state_proc_free(&sp);
  return 0;
}

/* The running process `pid` of a running box, checked against the state. */
static struct live_box *running_proc(struct box_mgr *m, const char *tenant, const char *id,
                                     int64_t pid, struct husk_err *err) {
  struct live_box *b = running_box(m, tenant, id, err);
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

int box_proc_signal(struct box_mgr *m, const char *tenant, const char *id, int64_t pid, int sig,
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

int box_proc_stdin(struct box_mgr *m, const char *tenant, const char *id, int64_t pid,
                   const void *buf, size_t len, bool eof, struct husk_err *err) {
  struct live_box *b = running_proc(m, tenant, id, pid, err);
  if (!b)
    return -1;
  int rc = 0;
  pthread_mutex_lock(&b->lock);
  struct bgproc *p = b->procs;
  while (p && p->pid != pid)
    p = p->next;
  if (!p || p->stdin_w < 0) {
    rc = husk_fail(err, EBUSY, "stdin of process %lld is closed", (long long)pid);
  } else {
    if (len && write_all(p->stdin_w, buf, len) < 0)
      rc = husk_error(err, errno, "cannot write to stdin of process %lld", (long long)pid);
    if (eof || rc < 0) {
      close(p->stdin_w);
      p->stdin_w = -1;
    }
  }
  pthread_mutex_unlock(&b->lock);
  lb_unref(m, b);
  return rc;
}

int box_proc_output(struct box_mgr *m, const char *tenant, const char *id, int64_t pid, int stream,
                    int *fd_out, bool *running, struct husk_err *err) {
  if (stream != 1 && stream != 2)
    return husk_fail(err, EINVAL, "stream must be stdout or stderr");
  struct box_proc bp;
  if (box_proc_get(m, tenant, id, pid, &bp, err) < 0)
    return -1;
  *running = !strcmp(bp.state, STATE_PROC_RUNNING);
  box_proc_free(&bp);
  struct live_box *b = running_box(m, tenant, id, err);
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

/* ---- metrics and files ------------------------------------------------------------ */

int box_metrics(struct box_mgr *m, const char *tenant, const char *id, struct box_metrics *out,
                struct husk_err *err) {
  struct live_box *b = running_box(m, tenant, id, err);
  if (!b)
    return -1;
  struct cgroup_stats st;
  cgroup_stats(&b->j.cg, &st);
  memset(out, 0, sizeof *out);
  out->cpu_usec = st.cpu_usec;
  out->memory_current = st.memory_current;
  out->memory_peak = st.memory_peak;
  out->pids = st.pids_current;
  struct statfs sf;
  if (fstatfs(b->j.fs, &sf) == 0) {
    out->disk_total = (uint64_t)sf.f_blocks * (uint64_t)sf.f_bsize;
    out->disk_used = (uint64_t)(sf.f_blocks - sf.f_bfree) * (uint64_t)sf.f_bsize;
  }
  lb_unref(m, b);
  return 0;
}

int box_open_fs(struct box_mgr *m, const char *tenant, const char *id, int *fs, uid_t *uid,
                gid_t *gid, struct husk_err *err) {
  struct live_box *b = running_box(m, tenant, id, err);
  if (!b)
    return -1;
  int fd = fcntl(b->j.fs, F_DUPFD_CLOEXEC, 3);
  int e = errno;
  *uid = jail_host_id(&b->j, HUSK_BOX_UID);
  *gid = jail_host_id(&b->j, HUSK_BOX_GID);
  lb_unref(m, b);
  if (fd < 0)
    return husk_error(err, e, "cannot open the sandbox filesystem");
  *fs = fd;
  return 0;
}

/* ---- the monitor ------------------------------------------------------------------ */

static void record_exit(struct box_mgr *m, const char *box_id, int64_t pid, int status) {
  struct husk_err err;
  int64_t code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  int64_t sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  if (state_proc_set_exit(m->cfg.state, box_id, pid, code, sig, 0, &err) < 0 && err.code != ENOENT)
    logf_(m, "box %s: cannot record exit of pid %lld: %s", box_id, (long long)pid, err.msg);
}

enum watch_kind { W_WAKE, W_PIDFD, W_WATCH, W_PROC };
struct watch_item {
  enum watch_kind kind;
  struct live_box *b;
  struct bgproc *p;
};

static void *monitor_main(void *arg) {
  struct box_mgr *m = arg;
  struct pollfd *pf = NULL;
  struct watch_item *wi = NULL;
  size_t cap = 0;
  while (!m->stop) {
    /* Snapshot what to watch, holding a reference on every box in it. */
    size_t n = 0;
    int64_t now = state_now_ms(), next = now + MONITOR_MAX_MS;
    pthread_mutex_lock(&m->lock);
    size_t need = 1;
    for (struct live_box *b = m->boxes; b; b = b->next) {
      need += 2;
      for (struct bgproc *p = b->procs; p; p = p->next)
        need++;
    }
    if (need > cap) {
      size_t nc = need * 2;
      struct pollfd *npf = realloc(pf, nc * sizeof *npf);
      if (npf)
        pf = npf;
      struct watch_item *nwi = realloc(wi, nc * sizeof *nwi);
      if (nwi)
        wi = nwi;
      if (npf && nwi)
        cap = nc;
    }
    if (need > cap) {
      pthread_mutex_unlock(&m->lock);
      sleep(1); /* out of memory: try again later */
      continue;
    }
    pf[n] = (struct pollfd){.fd = m->wake[0], .events = POLLIN};
    wi[n++] = (struct watch_item){.kind = W_WAKE};
    for (struct live_box *b = m->boxes; b; b = b->next) {
      b->refs++;
      if (b->expires_ms && b->expires_ms < next)
        next = b->expires_ms;
      pf[n] = (struct pollfd){.fd = b->j.pidfd, .events = POLLIN};
      wi[n++] = (struct watch_item){.kind = W_PIDFD, .b = b};
      pf[n] = (struct pollfd){.fd = b->j.ctl, .events = POLLIN};
      wi[n++] = (struct watch_item){.kind = W_WATCH, .b = b};
      pthread_mutex_lock(&b->lock);
      for (struct bgproc *p = b->procs; p; p = p->next)
        if (p->conn >= 0) {
          pf[n] = (struct pollfd){.fd = p->conn, .events = POLLIN};
          wi[n++] = (struct watch_item){.kind = W_PROC, .b = b, .p = p};
        }
      pthread_mutex_unlock(&b->lock);
    }
    pthread_mutex_unlock(&m->lock);

    int timeout = next > now ? (int)(next - now) : 0;
    int r = poll(pf, n, timeout);
    if (r < 0 && errno != EINTR)
      logf_(m, "monitor: poll: %s", strerror(errno));
    for (size_t i = 0; r > 0 && i < n; i++) {
      if (!pf[i].revents)
        continue;
      struct live_box *b = wi[i].b;
      struct husk_err err;
      switch (wi[i].kind) {
      case W_WAKE: {
        char buf[64];
        while (read(m->wake[0], buf, sizeof buf) > 0)
          ;
        break;
      }
      case W_PIDFD:
        if (!b->ending) {
          enum cgroup_trip t = cgroup_tripped(&b->j.cg);
          end_box(m, b, STATE_BOX_FAILED, t == CGROUP_TRIP_MEMORY ? "memory" : "init_exited", &err);
        }
        break;
      case W_WATCH:
      case W_PROC: {
        int fd = wi[i].kind == W_WATCH ? b->j.ctl : wi[i].p->conn;
        union jail_event ev;
        int rc = jail_recv_fd(fd, &ev, &err);
        if (rc > 0 && ev.h.type == CTL_EXITED) {
          record_exit(m, b->id, ev.exited.pid, ev.exited.status);
        }
        if (wi[i].kind == W_PROC && (rc <= 0 || ev.h.type == CTL_EXITED)) {
          pthread_mutex_lock(&b->lock);
          close_quiet(wi[i].p->conn);
          wi[i].p->conn = -1;
          pthread_mutex_unlock(&b->lock);
        }
        /* The watch connection closing means init is gone: the pidfd says
         * so too, and that path ends the box. */
        break;
      }
      }
    }
    /* Expiries. */
    now = state_now_ms();
    for (size_t i = 0; i < n; i++) {
      struct live_box *b = wi[i].b;
      if (wi[i].kind == W_PIDFD && !b->ending && b->expires_ms && b->expires_ms <= now) {
        struct husk_err err;
        end_box(m, b, STATE_BOX_STOPPED, "expired", &err);
      }
    }
    for (size_t i = 0; i < n; i++)
      if (wi[i].kind == W_PIDFD)
        lb_unref(m, wi[i].b);
  }
  free(pf);
  free(wi);
  return NULL;
}

/* ---- reconciliation ------------------------------------------------------------------ */

struct row_list {
  struct state_box *rows;
  size_t n, cap;
};

static int collect_row(void *ctx, const struct state_box *sb) {
  struct row_list *rl = ctx;
  if (rl->n == rl->cap) {
    size_t nc = rl->cap ? rl->cap * 2 : 64;
    struct state_box *nr = realloc(rl->rows, nc * sizeof *nr);
    if (!nr)
      return -1;
    rl->rows = nr;
    rl->cap = nc;
  }
  struct state_box *c = &rl->rows[rl->n++];
  *c = *sb;
  c->env_json = sb->env_json ? strdup(sb->env_json) : NULL;
  c->metadata_json = sb->metadata_json ? strdup(sb->metadata_json) : NULL;
  return 0;
}

/* Kill and remove whatever a box row points at, if it is still there. */
static void cleanup_row(struct box_mgr *m, const struct state_box *sb) {
  if (sb->init_pid > 0 && sb->init_start_time &&
      proc_start_time((pid_t)sb->init_pid) == sb->init_start_time) {
    int pidfd = (int)syscall(SYS_pidfd_open, (pid_t)sb->init_pid, 0);
    if (pidfd >= 0) {
      sys_pidfd_send_signal(pidfd, SIGKILL);
      struct pollfd p = {.fd = pidfd, .events = POLLIN};
      while (poll(&p, 1, 10000) < 0 && errno == EINTR)
        ;
      close(pidfd);
    }
  }
  if (sb->cgroup[0]) {
    struct cgroup cg;
    struct husk_err err;
    if (cgroup_open(&cg, sb->cgroup, &err) == 0) {
      cgroup_kill(&cg, &err);
      if (cgroup_destroy(&cg, &err) < 0)
        logf_(m, "box %s: %s", sb->id, err.msg);
    }
  }
  char path[PATH_MAX];
  struct husk_err err;
  if (ctl_path_for(m, sb->id, path, sizeof path, &err) == 0)
    unlink(path);
}

static int adopt(struct box_mgr *m, const struct state_box *sb, struct husk_err *err) {
  if (sb->init_pid <= 0 || !sb->init_start_time ||
      proc_start_time((pid_t)sb->init_pid) != sb->init_start_time)
    return husk_fail(err, ESRCH, "its init process is gone");
  struct live_box *b = lb_new();
  if (!b)
    return husk_fail(err, ENOMEM, "out of memory");
  snprintf(b->id, sizeof b->id, "%s", sb->id);
  snprintf(b->tenant, sizeof b->tenant, "%s", sb->tenant_id);
  b->limits = (struct husk_limits){.memory_bytes = (uint64_t)sb->memory, .pids = (uint64_t)sb->pids,
                                   .cpu_milli = (uint64_t)sb->cpu_milli, .disk_bytes = (uint64_t)sb->disk,
                                   .timeout_ms = (uint64_t)sb->timeout_ms};
  b->expires_ms = sb->expires_ms;
  b->env = env_from_json(sb->env_json);
  b->j.pid = (pid_t)sb->init_pid;
  b->j.uid_base = (uint32_t)sb->uid_base;
  b->j.slot = (unsigned)sb->slot;
  int rc = -1;
  if (!b->env) {
    husk_fail(err, ENOMEM, "out of memory");
    goto fail;
  }
  if (ctl_path_for(m, b->id, b->ctl_path, sizeof b->ctl_path, err) < 0)
    goto fail;
  b->j.pidfd = (int)syscall(SYS_pidfd_open, b->j.pid, 0);
  if (b->j.pidfd < 0) {
    husk_error(err, errno, "pidfd_open");
    goto fail;
  }
  if ((b->j.ctl = jail_connect(b->ctl_path, err)) < 0)
    goto fail;
  if ((b->j.fs = jail_get_fs(b->j.ctl, err)) < 0)
    goto fail;
  if (jail_watch(b->j.ctl, err) < 0)
    goto fail;
  if (cgroup_open(&b->j.cg, sb->cgroup, err) < 0)
    goto fail;
  lb_list_add(m, b);
  lb_unref(m, b);
  return 0;
fail:
  b->ctl_path[0] = '\0'; /* cleanup_row removes it */
  b->j.pid = -1;         /* not ours to kill here: cleanup_row checks it first */
  lb_free(m, b);
  return rc;
}

static struct box_mgr *sweeping; /* for the cgroup sweep callback (open is single-threaded) */

static bool stale_box_cgroup(const char *name) {
  const char *id = name + 4; /* "box-" */
  struct live_box *b = lb_get(sweeping, NULL, id);
  if (b) {
    lb_unref(sweeping, b);
    return false;
  }
  struct cgroup cg;
  struct husk_err err;
  if (cgroup_open(&cg, name, &err) == 0) {
    cgroup_kill(&cg, &err);
    for (int i = 0; i < 2000 && cgroup_populated(&cg); i++)
      usleep(1000);
    cgroup_close(&cg);
  }
  return true;
}

static void reconcile(struct box_mgr *m) {
  struct row_list rl = {0};
  char cursor[STATE_CURSOR_SIZE] = "";
  struct husk_err err;
  for (;;) {
    char next[STATE_CURSOR_SIZE] = "";
    struct state_box_filter f = {.state = STATE_BOX_LIVE, .cursor = cursor, .limit = STATE_LIST_MAX};
    if (state_box_list(m->cfg.state, &f, collect_row, &rl, next, sizeof next, &err) < 0) {
      logf_(m, "reconcile: %s", err.msg);
      break;
    }
    if (!next[0])
      break;
    snprintf(cursor, sizeof cursor, "%s", next);
  }
  int64_t now = state_now_ms();
  for (size_t i = 0; i < rl.n; i++) {
    struct state_box *sb = &rl.rows[i];
    const char *state = NULL, *reason = NULL;
    char why[HUSK_ERR_MSG_MAX + 64];
    if (!strcmp(sb->state, STATE_BOX_RUNNING) && (!sb->expires_ms || sb->expires_ms > now)) {
      if (adopt(m, sb, &err) == 0) {
        logf_(m, "box %s re-adopted", sb->id);
        continue;
      }
      snprintf(why, sizeof why, "lost in a daemon restart: %s", err.msg);
      husk_sanitize_line(why);
      state = STATE_BOX_FAILED;
      reason = why;
    } else if (!strcmp(sb->state, STATE_BOX_RUNNING)) {
      state = STATE_BOX_STOPPED;
      reason = "expired";
    } else if (!strcmp(sb->state, STATE_BOX_CREATING)) {
      state = STATE_BOX_FAILED;
      reason = "daemon restarted during creation";
    } else {
      state = STATE_BOX_STOPPED; /* stopping: finish what was started */
      reason = sb->reason[0] ? sb->reason : "deleted";
    }
    cleanup_row(m, sb);
    if (state_box_set_state(m->cfg.state, sb->id, NULL, state, reason, 0, &err) < 0)
      logf_(m, "box %s: %s", sb->id, err.msg);
    else
      logf_(m, "box %s: %s (%s)", sb->id, state, reason);
  }
  for (size_t i = 0; i < rl.n; i++)
    state_box_free(&rl.rows[i]);
  free(rl.rows);

  /* Leftovers no row accounts for: cgroups and sockets of boxes that are
   * not live.  Boxes of `husk run` (run-*) are not ours. */
  sweeping = m;
  cgroup_sweep("box-", stale_box_cgroup);
  sweeping = NULL;
  char dir[PATH_MAX + 16];
  snprintf(dir, sizeof dir, "%s/boxes", m->data_dir);
  DIR *d = opendir(dir);
  if (d) {
    struct dirent *e;
    while ((e = readdir(d))) {
      size_t len = strlen(e->d_name);
      if (len < 6 || strcmp(e->d_name + len - 5, ".sock"))
        continue;
      char id[STATE_BOX_ID_SIZE];
      if (len - 5 >= sizeof id)
        continue;
      memcpy(id, e->d_name, len - 5);
      id[len - 5] = '\0';
      struct live_box *b = lb_get(m, NULL, id);
      if (b)
        lb_unref(m, b);
      else
        unlinkat(dirfd(d), e->d_name, 0);
    }
    closedir(d);
  }
}

/* ---- open / close --------------------------------------------------------------------- */

int box_mgr_open(struct box_mgr **out, const struct box_mgr_config *cfg, struct husk_err *err) {
  struct box_mgr *m = calloc(1, sizeof *m);
  if (!m)
    return husk_fail(err, ENOMEM, "out of memory");
  m->cfg = *cfg;
  if (!m->cfg.default_ttl_ms)
    m->cfg.default_ttl_ms = HUSK_DEFAULT_TIMEOUT_MS;
  if (!m->cfg.max_ttl_ms)
    m->cfg.max_ttl_ms = HUSK_MAX_TIMEOUT_MS;
  m->wake[0] = m->wake[1] = -1;
  pthread_mutex_init(&m->lock, NULL);
  if (!realpath(cfg->data_dir, m->data_dir)) {
    husk_error(err, errno, "data directory `%s`", cfg->data_dir);
    goto fail;
  }
  char dir[PATH_MAX + 16];
  if (snprintf(dir, sizeof dir, "%s/boxes", m->data_dir) >= (int)sizeof dir) {
    husk_fail(err, ENAMETOOLONG, "data directory path too long");
    goto fail;
  }
  if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
    husk_error(err, errno, "cannot create `%s`", dir);
    goto fail;
  }
  if (pipe2(m->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
    husk_error(err, errno, "pipe");
    goto fail;
  }
  enum cgroup_layout layout;
  if (cgroup_layout(&layout, err) < 0)
    goto fail;
  reconcile(m);
  if ((errno = pthread_create(&m->monitor, NULL, monitor_main, m)) != 0) {
    husk_error(err, errno, "cannot start the box monitor");
    goto fail;
  }
  m->monitor_running = true;
  *out = m;
  return 0;
fail:
  box_mgr_close(m, false);
  return -1;
}

/* Let go of a box without ending it: it keeps running for the next daemon. */
static void lb_detach(struct live_box *b) {
  close_quiet(b->j.pidfd);
  close_quiet(b->j.ctl);
  close_quiet(b->j.fs);
  close_quiet(b->j.slot_lock);
  cgroup_close(&b->j.cg);
  bgproc_free_all(b);
  env_free(b->env);
  pthread_mutex_destroy(&b->lock);
  free(b);
}

void box_mgr_close(struct box_mgr *m, bool destroy_boxes) {
  if (!m)
    return;
  if (m->monitor_running) {
    m->stop = true;
    wake_monitor(m);
    pthread_join(m->monitor, NULL);
  }
  for (;;) {
    pthread_mutex_lock(&m->lock);
    struct live_box *b = m->boxes;
    if (b)
      b->refs++;
    pthread_mutex_unlock(&m->lock);
    if (!b)
      break;
    if (destroy_boxes) {
      struct husk_err err;
      end_box(m, b, STATE_BOX_STOPPED, "daemon_shutdown", &err);
      lb_unref(m, b);
    } else {
      pthread_mutex_lock(&m->lock);
      m->boxes = b->next;
      pthread_mutex_unlock(&m->lock);
      lb_detach(b);
    }
  }
  close_quiet(m->wake[0]);
  close_quiet(m->wake[1]);
  pthread_mutex_destroy(&m->lock);
  free(m);
}
