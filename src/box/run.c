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
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "box/box_internal.h"
#include "box/copy.h"
#include "box/exec.h"
#include "box/snapshot_archive.h"
#include "husk/husk.h"
#include "jail/jail.h"
#include "jail/limits.h"
#include "state/snapshot_state.h"
#include "state/state.h"
#include "state/store_state.h"
#include "template/template.h"
#include "util/cleanup.h"
#include "util/clock.h"
#include "util/fileio.h"

/* Where a one-shot box stacks an image's layers: an empty directory that
 * only ever gets mounts in a private mount namespace (this process's, or
 * a daemon spawner's). */
#define IMAGE_SCRATCH "/run/husk/image"

#define COPY_MAX_DEPTH 256

__attribute__((format(printf, 2, 3))) static void set_message(struct husk_run_result *r,
                                                                 const char *fmt, ...) {
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

struct emit_ctx {
  const struct husk_run_spec *spec;
  char last_err; /* last byte written to stderr, 0 if none */
};

static int emit(void *ctx, int stream, const char *buf, size_t len) {
  struct emit_ctx *e = ctx;
  int fd = stream == 1 ? e->spec->stdout_fd : e->spec->stderr_fd;
  if (stream == 2 && len)
    e->last_err = buf[len - 1];
  /* If our reader went away, keep the box's side going (like a full pipe
   * that nobody reads would not be our business either). */
  if (fd >= 0)
    write_all(fd, buf, len);
  return 0;
}

/* A run of a template: its row, its layers held for the run, its profile. */
struct run_template {
  struct state *st;
  struct template_store *ts;
  struct state_template t;
  struct template_layers l;
  struct template_profile p;
  bool on;
};

static void run_template_close(struct run_template *rt) {
  if (rt->on) {
    template_profile_free(&rt->p);
    template_layers_release(&rt->l);
    state_template_free(&rt->t);
  }
  template_store_close(rt->ts);
  state_close(rt->st);
  memset(rt, 0, sizeof *rt);
}

#define cleanup_run_template __attribute__((cleanup(run_template_close)))

/* Open template `name` of data directory `data` (the operator's, or with
 * `tenant` one that tenant sees, which must have id `want_id` if given),
 * and move this process into a mount namespace of its own, where the
 * box's root is stacked (the host never sees those mounts). */
static int run_template_open(const char *data, const char *tenant, const char *name,
                             const char *want_id, struct run_template *rt, struct husk_err *err) {
  memset(rt, 0, sizeof *rt);
  if (!data || !*data)
    return husk_fail(err, EINVAL, "a template needs the data directory it is kept in");
  char db[PATH_MAX];
  if (snprintf(db, sizeof db, "%s/husk.db", data) >= (int)sizeof db)
    return husk_fail(err, ENAMETOOLONG, "data directory `%s` is too long", data);
  if (access(db, F_OK) < 0)
    return husk_error(err, errno, "no templates in `%s` (husk template import)", data);
  /* The namespace first: a layer's mount can only be cloned in the
   * namespace its fd (and the directory fds it was opened from) belongs
   * to. */
  if (mkdir_p(IMAGE_SCRATCH, 0755) < 0)
    return husk_error(err, errno, "cannot create `%s`", IMAGE_SCRATCH);
  if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) < 0)
    return husk_error(err, errno, "cannot make a mount namespace for the box's root");
  struct template_store_config tc = {.data_dir = data};
  if (state_open(&rt->st, db, err) < 0)
    return -1;
  tc.state = rt->st;
  if (template_store_open(&rt->ts, &tc, err) < 0 ||
      state_template_get(rt->st, tenant ? tenant : "", name, true, &rt->t, err) < 0)
    return -1;
  rt->on = true;
  if (want_id && strcmp(rt->t.id, want_id) != 0)
    return husk_fail(err, ESTALE, "template `%s` was replaced since the snapshot was taken", name);
  if (template_layers_open(rt->ts, &rt->t, &rt->l, err) < 0 ||
      template_profile(&rt->t, &rt->l, &rt->p, err) < 0)
    return -1;
  return 0;
}

static void supervise(struct jail *j, const struct husk_run_spec *spec, char *const *image_env,
                      int sfd, struct husk_run_result *res) {
  cleanup_free char **env = exec_build_env(image_env, spec->env);
  if (!env) {
    res->exit_code = 125;
    res->reason = HUSK_REASON_SETUP_ERROR;
    set_message(res, "out of memory");
    return;
  }
  struct emit_ctx ectx = {.spec = spec};
  struct exec_spec es = {.argv = spec->argv, .env = env,
                         .cwd = spec->workdir ? spec->workdir : "/workspace",
                         .timeout_ms = spec->limits.timeout_ms,
                         .output_limit = spec->limits.output_bytes,
                         .stdin_fd = spec->stdin_fd, .sink = emit, .sink_ctx = &ectx,
                         .signal_fd = sfd, .cancel_fd = -1};
  struct husk_exec_result o;
  exec_relay(j, j->ctl, true, &es, &o);
  res->exit_code = o.exit_code;
  res->signal = o.signal;
  res->reason = o.reason;
  res->wall_ms = o.wall_ms;
  res->output_bytes = o.output_bytes;
  res->output_truncated = o.truncated;
  res->stderr_open_line = ectx.last_err && ectx.last_err != '\n';
  if (o.message[0])
    set_message(res, "%s", o.message);
}

static int copy_in(struct jail *j, const struct husk_run_spec *spec, uint32_t uid, uint32_t gid,
                   struct husk_err *err) {
  cleanup_close int src = open(spec->workspace_in, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (src < 0)
    return husk_error(err, errno, "cannot open workspace directory `%s`", spec->workspace_in);
  cleanup_close int dst = openat(j->fs, "workspace", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dst < 0)
    return husk_error(err, errno, "cannot open the box's workspace");
  struct copy_warn w = {.spec = spec, .direction = "workspace"};
  struct copy_opts o = {.uid = jail_host_id(j, uid), .gid = jail_host_id(j, gid),
                        .max_depth = COPY_MAX_DEPTH, .skipped = copy_skipped, .ctx = &w};
  if (copy_tree(src, dst, &o, NULL, err) < 0) {
    if (err->code == ENOSPC)
      return husk_error_wrap(err, "workspace `%s` does not fit in the box (raise --disk)", spec->workspace_in);
    return husk_error_wrap(err, "cannot copy workspace `%s` into the box", spec->workspace_in);
  }
  return 0;
}

static int copy_out(struct jail *j, const struct husk_run_spec *spec, struct husk_err *err) {
  if (mkdir_p(spec->export_dir, 0755) < 0)
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

/* A run from a snapshot: its row, its env, and its archive's file. */
struct run_snapshot {
  struct state *st;
  struct state_snapshot p;
  char **env;
  int fd;
};

static void run_snapshot_close(struct run_snapshot *rs) {
  state_snapshot_free(&rs->p);
  box_env_free(rs->env);
  close_quiet(rs->fd);
  state_close(rs->st);
}
#define cleanup_run_snapshot __attribute__((cleanup(run_snapshot_close)))

static int run_snapshot_open(const char *data, const char *id, struct run_snapshot *rs,
                             struct husk_err *err) {
  if (!data || !*data)
    return husk_fail(err, EINVAL, "a snapshot needs the data directory it is kept in");
  char path[PATH_MAX];
  if (snprintf(path, sizeof path, "%s/husk.db", data) >= (int)sizeof path)
    return husk_fail(err, ENAMETOOLONG, "data directory `%s` is too long", data);
  if (state_open(&rs->st, path, err) < 0 ||
      state_snapshot_get(rs->st, NULL, id, &rs->p, err) < 0)
    return -1;
  if (strcmp(rs->p.state, STATE_SNAPSHOT_READY) != 0 || rs->p.for_pause)
    return husk_fail(err, ENOENT, "no such snapshot");
  if (!(rs->env = box_env_from_json(rs->p.env_json)))
    return husk_fail(err, ENOMEM, "out of memory");
  struct store_object o;
  if (state_object_get(rs->st, rs->p.tenant_id, STATE_SNAPSHOT_BUCKET, rs->p.id, &o, err) < 0)
    return husk_fail(err, ENOENT,
                     "the snapshot's archive is not in this data directory's store (is it in an "
                     "external store? restore it through husk serve)");
  int n = snprintf(path, sizeof path, "%s/storage/objects/%s", data, o.file);
  store_object_free(&o);
  if (n >= (int)sizeof path)
    return husk_fail(err, ENAMETOOLONG, "data directory `%s` is too long", data);
  if ((rs->fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC)) < 0)
    return husk_error(err, errno, "cannot open the snapshot's archive");
  return 0;
}

/* What the restore may write is bounded by the box's disk (ENOSPC). */
static int run_fill(void *ctx, int fs, uint32_t uid_base, struct husk_err *err) {
  const struct run_snapshot *rs = ctx;
  return snap_restore_fd(fs, uid_base, rs->fd, rs->p.sha256, 0, 0, err);
}

int husk_run(const struct husk_run_spec *spec, struct husk_run_result *res) {
  memset(res, 0, sizeof *res);
  struct husk_err err;
  struct husk_limits lim = spec->limits;
  if (husk_limits_resolve(&lim, &err) < 0) {
    snprintf(res->message, sizeof res->message, "%s", err.msg);
    res->exit_code = 125;
    res->reason = HUSK_REASON_SETUP_ERROR;
    return res->exit_code;
  }
  struct husk_run_spec s = *spec;
  s.limits = lim;
  cleanup_run_snapshot struct run_snapshot snap = {.fd = -1};
  const char *tenant = NULL, *want_id = NULL;
  if (s.snapshot) {
    if (run_snapshot_open(s.data_dir, s.snapshot, &snap, &err) < 0) {
      husk_error_wrap(&err, "snapshot `%s`", s.snapshot);
      setup_error(res, &err);
      return res->exit_code;
    }
    const char *tname = snap.p.template_name[0] ? snap.p.template_name : "default";
    if (s.template_name && *s.template_name && strcmp(s.template_name, tname) != 0) {
      husk_fail(&err, EINVAL, "snapshot `%s` is of template `%s`", s.snapshot, tname);
      setup_error(res, &err);
      return res->exit_code;
    }
    s.template_name = tname;
    tenant = snap.p.tenant_id;
    want_id = snap.p.template_id[0] ? snap.p.template_id : NULL;
    if (!s.workdir && snap.p.workdir[0])
      s.workdir = snap.p.workdir;
  }
  cleanup_run_template struct run_template rt = {0};
  bool image = s.template_name && *s.template_name && strcmp(s.template_name, "default");
  if (image && run_template_open(s.data_dir, tenant, s.template_name, want_id, &rt, &err) < 0) {
    husk_error_wrap(&err, "template `%s`", s.template_name);
    setup_error(res, &err);
    return res->exit_code;
  }
  if (image && (!s.argv || !s.argv[0]))
    s.argv = rt.p.argv;
  if (image && !s.workdir && rt.p.workdir[0])
    s.workdir = rt.p.workdir;
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
    rnd = (unsigned)(uint64_t)mono_ms();
  char name[64];
  snprintf(name, sizeof name, "run-%d-%08x", (int)getpid(), rnd);
  struct jail_config cfg = {
      .limits = {.memory_bytes = lim.memory_bytes, .pids = lim.pids, .cpu_milli = lim.cpu_milli},
      .disk_bytes = lim.disk_bytes, .name = name, .die_with_parent = true};
  if (image) {
    cfg.image_layers = rt.l.dirs;
    cfg.image_nlayers = rt.l.n;
    cfg.image_scratch = IMAGE_SCRATCH;
    cfg.user_set = rt.p.user_set;
    cfg.uid = rt.p.uid;
    cfg.gid = rt.p.gid;
  }
  if (s.snapshot) {
    cfg.fill_fs = run_fill;
    cfg.fill_ctx = &snap;
  }
  uint32_t uid = cfg.user_set ? cfg.uid : HUSK_BOX_UID, gid = cfg.user_set ? cfg.gid : HUSK_BOX_GID;
  struct jail j;
  if (sfd < 0) {
    husk_error(&err, errno, "signalfd");
    setup_error(res, &err);
  } else if (jail_create(&j, &cfg, &err) < 0) {
    husk_error_wrap(&err, "cannot create the box");
    setup_error(res, &err);
  } else {
    if (s.workspace_in && copy_in(&j, &s, uid, gid, &err) < 0)
      setup_error(res, &err);
    else
      supervise(&j, &s, s.snapshot ? snap.env : image ? rt.p.env : NULL, sfd, res);
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
