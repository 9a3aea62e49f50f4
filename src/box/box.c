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
#include "box/spawner.h"
#include "egress/egress.h"
#include "state/egress_state.h"
#include "jail/limits.h"
#include "jail/syscalls.h"
#include "util/cleanup.h"
#include "util/fileio.h"
#include "util/id.h"

void box_log(struct husk_mgr *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void box_log(struct husk_mgr *m, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  husk_vlog(m->cfg.log, m->cfg.log_ctx, fmt, ap);
  va_end(ap);
}

void box_wake_monitor(struct husk_mgr *m) {
  if (m->wake[1] >= 0 && write(m->wake[1], "x", 1) < 0) {
    /* pipe full: the monitor is already due to wake up */
  }
}

void box_cgroup_name(const struct husk_mgr *m, const char *id, char *out, size_t len) {
  snprintf(out, len, "%s%s", m->cg_prefix, id);
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

void box_env_free(char **env) {
  for (size_t i = 0; env && env[i]; i++)
    free(env[i]);
  free(env);
}

char **box_env_from_json(const char *s) {
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

struct live_box *lb_new(void) {
  struct live_box *b = calloc(1, sizeof *b);
  if (!b)
    return NULL;
  pthread_mutex_init(&b->lock, NULL);
  pthread_mutex_init(&b->pause_lock, NULL);
  b->j = (struct jail)JAIL_INIT;
  b->refs = 1;
  /* Exec ids name a background process in its row and in the exit init
   * reports (again, after a daemon crash): a daemon restarted on the same
   * box must not hand out an id an earlier one used. */
  uint64_t r = 0;
  struct husk_err err;
  if (id_random_bytes(&r, sizeof r, &err) < 0)
    r = (uint64_t)state_now_ms() << 20;
  /* Fits an SQLite INTEGER, never 0. */
  b->next_exec_id = (r & ((UINT64_C(1) << 62) - 1)) | 1;
  return b;
}

void bgproc_free_all(struct live_box *b) {
  for (struct bgproc *p = b->procs, *n; p; p = n) {
    n = p->next;
    close_quiet(p->conn);
    close_quiet(p->stdin_w);
    free(p);
  }
  b->procs = NULL;
  atomic_store(&b->nprocs, 0);
}

/* Release host resources and memory.  The box must be dead already or
 * about to be killed here. */
void lb_free(struct husk_mgr *m, struct live_box *b) {
  struct husk_err err;
  if (jail_destroy(&b->j, true, NULL, &err) < 0)
    box_log(m, "box %s: teardown: %s", b->id, err.msg);
  if (b->egress)
    box_egress_detach(m, b);
  if (b->ctl_path[0])
    unlink(b->ctl_path);
  bgproc_free_all(b);
  box_ctx_free_all(b);
  box_env_retire_all(b);
  box_env_free(b->env);
  pthread_mutex_destroy(&b->lock);
  pthread_mutex_destroy(&b->pause_lock);
  free(b);
}

void lb_unref(struct husk_mgr *m, struct live_box *b) {
  pthread_mutex_lock(&m->lock);
  bool last = --b->refs == 0;
  pthread_mutex_unlock(&m->lock);
  if (last)
    box_reap_later(m, b); /* teardown off the caller's path */
}

/* Find a live box of `tenant` (NULL = any) and take a reference. */
struct live_box *lb_get(struct husk_mgr *m, const char *tenant, const char *id) {
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

void lb_list_add(struct husk_mgr *m, struct live_box *b) {
  pthread_mutex_lock(&m->lock);
  b->next = m->boxes;
  m->boxes = b;
  b->listed = true;
  b->refs++;
  pthread_mutex_unlock(&m->lock);
  box_wake_monitor(m);
}

/* Remove from the list; returns true if this call removed it. */
static bool lb_list_remove(struct husk_mgr *m, struct live_box *b) {
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
    box_wake_monitor(m);
    lb_unref(m, b); /* the list's reference */
  }
  return removed;
}

/* An id that reaches a path or the database must look like one of ours. */
bool box_valid_id(const char *id) {
  size_t n = id ? strlen(id) : 0;
  if (n == 0 || n >= STATE_BOX_ID_SIZE)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!((id[i] >= 'a' && id[i] <= 'z') || (id[i] >= 'A' && id[i] <= 'Z') ||
          (id[i] >= '0' && id[i] <= '9') || id[i] == '_' || id[i] == '-'))
      return false;
  return true;
}

bool box_init_alive(pid_t pid, uint64_t start_time) {
  if (pid <= 0 || !start_time || box_proc_start_time(pid) != start_time)
    return false;
  /* A zombie (its parent, the spawner of an earlier daemon, did not reap
   * it yet) keeps its start time but serves nothing any more. */
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return false;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0)
    return false;
  buf[n] = '\0';
  const char *p = strrchr(buf, ')'); /* the command name ends at the last ')' */
  if (!p || p[1] != ' ')
    return false;
  return p[2] != 'Z' && p[2] != 'X' && p[2] != 'x' && p[2] != '\0';
}

uint64_t box_proc_start_time(pid_t pid) {
  unsigned long long v[23];
  if (pid <= 0 || proc_stat_fields(pid, v, 23) < 0)
    return 0;
  return v[22]; /* starttime */
}

/* ---- info ------------------------------------------------------------------ */

void husk_box_info_free(struct husk_box_info *bi) {
  if (!bi)
    return;
  free(bi->metadata_json);
  free(bi->env_json);
  free(bi->egress_json);
  free(bi->volumes_json);
  bi->metadata_json = bi->env_json = bi->egress_json = bi->volumes_json = NULL;
}

/* Network mode and policy: a row in box_egress, or "none". */
static void fill_network(struct husk_mgr *m, struct husk_box_info *bi) {
  char net[16];
  struct husk_err ignored;
  char *pol = NULL;
  if (state_box_egress_get(m->cfg.state, bi->id, net, sizeof net, &pol, &ignored) == 0 &&
      !strcmp(net, "egress")) {
    snprintf(bi->network, sizeof bi->network, "egress");
    bi->egress_json = pol;
  } else {
    free(pol);
  }
}

/* Its volume mounts (box_volumes rows), as a JSON array; none: NULL. */
static void fill_volumes(struct husk_mgr *m, struct husk_box_info *bi) {
  struct state_volume_mount mounts[HUSK_VOLUME_MOUNTS_MAX];
  size_t n = 0;
  struct husk_err ignored;
  if (state_volume_mounts(m->cfg.state, bi->id, mounts, HUSK_VOLUME_MOUNTS_MAX, &n, &ignored) < 0 ||
      n == 0)
    return;
  json_t *a = json_array();
  for (size_t i = 0; a && i < n; i++) {
    char path[STATE_VOLUME_PATH_SIZE + 16];
    snprintf(path, sizeof path, "/workspace/%s", mounts[i].path);
    json_array_append_new(a, json_pack("{s:s, s:s, s:b}", "name", mounts[i].name, "path", path,
                                       "read_only", mounts[i].read_only));
  }
  bi->volumes_json = a ? json_dumps(a, JSON_COMPACT) : NULL;
  json_decref(a);
}

/* The API's state: the database's, with "stopped" refined by its reason. */
static void fill_info(struct husk_box_info *bi, const struct state_box *sb, uint64_t max_paused_ms) {
  memset(bi, 0, sizeof *bi);
  snprintf(bi->id, sizeof bi->id, "%s", sb->id);
  snprintf(bi->tenant_id, sizeof bi->tenant_id, "%s", sb->tenant_id);
  const char *st = sb->state;
  if (!strcmp(st, STATE_BOX_STOPPED) && (!strcmp(sb->reason, "expired") || !strcmp(sb->reason, "killed")))
    st = sb->reason;
  else if (!strcmp(st, STATE_BOX_STOPPED) && !strcmp(sb->reason, "paused_too_long"))
    st = "expired";
  snprintf(bi->state, sizeof bi->state, "%.15s", st);
  snprintf(bi->reason, sizeof bi->reason, "%s", sb->reason);
  snprintf(bi->template_name, sizeof bi->template_name, "%s", sb->template_name[0] ? sb->template_name : "default");
  snprintf(bi->workdir, sizeof bi->workdir, "%s", sb->workdir[0] ? sb->workdir : "/workspace");
  snprintf(bi->network, sizeof bi->network, "none");
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
  snprintf(bi->snapshot_id, sizeof bi->snapshot_id, "%s", sb->snapshot_id);
  snprintf(bi->created_by, sizeof bi->created_by, "%s", sb->created_by);
  if (!strcmp(sb->state, STATE_BOX_PAUSED)) {
    bi->paused_to_disk = sb->paused_snapshot[0] != '\0';
    bi->paused_ms = sb->paused_ms;
    bi->paused_until_ms = sb->paused_ms + (int64_t)max_paused_ms;
    bi->remaining_ms = sb->expires_ms > sb->paused_ms ? (uint64_t)(sb->expires_ms - sb->paused_ms) : 0;
    bi->expires_ms = 0;
  }
}

int husk_box_get(struct husk_mgr *m, const char *tenant, const char *id, struct husk_box_info *out,
            struct husk_err *err) {
  if (!box_valid_id(id))
    return husk_fail(err, ENOENT, "no such sandbox");
  struct state_box sb;
  if (state_box_get(m->cfg.state, tenant, id, &sb, err) < 0)
    return -1;
  fill_info(out, &sb, m->cfg.max_paused_ms);
  state_box_free(&sb);
  fill_network(m, out);
  fill_volumes(m, out);
  return 0;
}

struct list_ctx {
  struct husk_mgr *m;
  int (*cb)(void *, const struct husk_box_info *);
  void *ctx;
  const char *reason; /* only boxes with this reason, or NULL */
};

static int list_cb(void *ctx, const struct state_box *sb) {
  struct list_ctx *lc = ctx;
  if (lc->reason && strcmp(sb->reason, lc->reason))
    return 0;
  struct husk_box_info bi;
  fill_info(&bi, sb, lc->m->cfg.max_paused_ms);
  fill_network(lc->m, &bi);
  int rc = lc->cb(lc->ctx, &bi);
  husk_box_info_free(&bi);
  return rc;
}

int husk_box_list(struct husk_mgr *m, const char *tenant, const struct husk_box_filter *req,
             int (*cb)(void *ctx, const struct husk_box_info *bi), void *ctx, char *next_cursor,
             size_t next_len, struct husk_err *err) {
  struct list_ctx lc = {.m = m, .cb = cb, .ctx = ctx};
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
                               .created_by = req->created_by, .cursor = req->cursor,
                               .limit = req->limit};
  return state_box_list(m->cfg.state, &f, list_cb, &lc, next_cursor, next_len, err);
}

/* ---- create ------------------------------------------------------------------ */

int box_ctl_path(struct husk_mgr *m, const char *id, char *out, size_t len,
                        struct husk_err *err) {
  int n = snprintf(out, len, "%s/boxes/%s.sock", m->data_dir, id);
  if (n < 0 || (size_t)n >= len || (size_t)n >= 108 /* sun_path */)
    return husk_fail(err, ENAMETOOLONG,
                     "data directory `%s` is too long for a unix socket path (use a shorter --data)",
                     m->data_dir);
  return 0;
}

int box_make_jail(struct husk_mgr *m, struct live_box *b, const struct husk_limits *lim,
                  bool for_pool, const struct box_image *img, const struct spawn_restore *restore,
                  struct husk_err *err) {
  char cg[96];
  box_cgroup_name(m, b->id, cg, sizeof cg);
  if (box_ctl_path(m, b->id, b->ctl_path, sizeof b->ctl_path, err) < 0) {
    b->ctl_path[0] = '\0';
    return -1;
  }
  struct jail_config jc = {
      .limits = {.memory_bytes = lim->memory_bytes, .pids = lim->pids, .cpu_milli = lim->cpu_milli},
      .disk_bytes = lim->disk_bytes,
      .name = cg,
      .die_with_parent = false,
      .ctl_path = b->ctl_path};
  struct spawner *sp = for_pool && m->pool_spawner ? m->pool_spawner : m->spawner;
  char layers_dir[PATH_MAX];
  struct spawn_image si = {0};
  if (img) {
    if (snprintf(layers_dir, sizeof layers_dir, "%s/templates/layers", m->data_dir) >=
        (int)sizeof layers_dir)
      return husk_fail(err, ENAMETOOLONG, "the data directory's path is too long");
    si = (struct spawn_image){.layers_dir = layers_dir, .ids = img->idv, .n = img->n,
                              .user_set = img->p.user_set, .uid = img->p.uid, .gid = img->p.gid};
  }
  /* Its volumes, as its rows say (a box resumed from disk gets them
   * again); a pool's box has none. */
  struct jail_volume vols[JAIL_MAX_VOLUMES];
  char vol_paths[JAIL_MAX_VOLUMES][STATE_VOLUME_PATH_SIZE];
  size_t nvols = 0;
  if (!for_pool && box_volumes_open(m, b->id, vols, vol_paths, &nvols, err) < 0)
    return -1;
  jc.volumes = vols;
  jc.nvolumes = nvols;
  int rc = spawner_create(sp, &jc, img ? &si : NULL, restore, &b->j, err);
  box_volumes_close(vols, nvols);
  if (rc < 0)
    return -1;
  b->init_acks = true; /* its init is this build's (the spawner checks) */
  b->init_version = CTL_VERSION;
  /* The connection it was created with becomes the watch connection: it
   * receives exits nobody else is listening for. */
  return jail_watch(b->j.ctl, err);
}

static void box_image_freep(struct box_image **bi) {
  if (*bi) {
    box_image_free(*bi);
    free(*bi);
  }
}
#define cleanup_box_image __attribute__((cleanup(box_image_freep)))

/* Metadata keys beginning with `husk.` are husk's own (a build's step
 * boxes carry husk.build, which a restart ends): a caller cannot set them. */
static int metadata_keys_ok(const char *metadata_json, struct husk_err *err) {
  if (!metadata_json || !strstr(metadata_json, "husk."))
    return 0;
  json_t *o = json_loads(metadata_json, 0, NULL);
  const char *k;
  json_t *v;
  int rc = 0;
  json_object_foreach(o, k, v) {
    if (!strncmp(k, "husk.", 5)) {
      rc = husk_fail(err, EINVAL, "metadata keys beginning with `husk.` are husk's own");
      break;
    }
  }
  json_decref(o);
  return rc;
}

int husk_box_create(struct husk_mgr *m, const char *tenant, const struct husk_box_spec *req,
                    struct husk_box_info *out, struct husk_err *err) {
  char creator[STATE_CREATED_BY_SIZE];
  if (metadata_keys_ok(req->metadata_json, err) < 0 ||
      box_created_by(creator, sizeof creator, req->created_by, err) < 0)
    return -1;
  /* An image template: its layers, user, env and working directory. */
  cleanup_box_image struct box_image *img = NULL;
  if (req->template_name && req->template_name[0] && strcmp(req->template_name, "default")) {
    if (!(img = calloc(1, sizeof *img)))
      return husk_fail(err, ENOMEM, "out of memory");
    if (box_image_resolve(m, tenant, req->template_name, req->env, img, err) < 0) {
      free(img);
      img = NULL;
      return -1;
    }
  }
  if (req->snapshot)
    return box_create_from_snapshot(m, tenant, req, out, err);
  return box_create(m, tenant, req, img, NULL, out, err);
}

int box_create(struct husk_mgr *m, const char *tenant, const struct husk_box_spec *req,
               struct box_image *img, const struct box_restore *from, struct husk_box_info *out,
               struct husk_err *err) {
  struct state_box sb = {0};
  if (box_created_by(sb.created_by, sizeof sb.created_by, req->created_by, err) < 0)
    return -1;
  /* Mode `none` costs nothing here: no policy, no link, no proxy state. */
  cleanup_free char *policy = NULL;
  if ((req->network && strcmp(req->network, "none")) || req->egress_json) {
    if (box_egress_prepare(m, tenant, req->network, req->egress_json, &policy, err) < 0)
      return -1;
  }
  struct state_volume_mount vols[HUSK_VOLUME_MOUNTS_MAX];
  if (box_volumes_check(req, vols, err) < 0 ||
      box_volumes_precheck(m, tenant, vols, req->nvolumes, err) < 0)
    return -1;
  struct husk_limits lim = req->limits;
  uint64_t ttl = lim.timeout_ms ? lim.timeout_ms : m->cfg.default_ttl_ms;
  if (ttl > m->cfg.max_ttl_ms)
    return husk_fail(err, EINVAL, "a box lifetime of %llu s is above the maximum of %llu s",
                     (unsigned long long)(ttl / 1000),
                     (unsigned long long)(m->cfg.max_ttl_ms / 1000));
  lim.timeout_ms = ttl;
  if (husk_limits_resolve(&lim, err) < 0)
    return -1;

  cleanup_free char *env_json = env_to_json(img ? img->env : req->env, err);
  if (!env_json)
    return -1;
  char **env = box_env_from_json(env_json);
  if (!env)
    return husk_fail(err, ENOMEM, "out of memory");

  /* A ready box of the same shape and template from a pool, if there is
   * one. */
  struct live_box *b = from || req->nvolumes ? NULL : box_pool_claim(m, &lim, img ? img->t.id : "");
  bool pooled = b != NULL;
  if (!b && !(b = lb_new())) {
    box_env_free(env);
    return husk_fail(err, ENOMEM, "out of memory");
  }
  if (!pooled && state_new_id("b_", b->id, sizeof b->id, err) < 0) {
    box_env_free(env);
    lb_free(m, b);
    return -1;
  }
  snprintf(sb.id, sizeof sb.id, "%s", b->id);
  snprintf(sb.tenant_id, sizeof sb.tenant_id, "%s", tenant);
  snprintf(sb.template_name, sizeof sb.template_name, "%s", img ? img->t.name : "default");
  if (img) {
    snprintf(sb.template_id, sizeof sb.template_id, "%s", img->t.id);
    snprintf(sb.workdir, sizeof sb.workdir, "%s", img->p.workdir);
    snprintf(b->workdir, sizeof b->workdir, "%s", img->p.workdir);
  }
  sb.memory = (int64_t)lim.memory_bytes;
  sb.pids = (int64_t)lim.pids;
  sb.cpu_milli = (int64_t)lim.cpu_milli;
  sb.disk = (int64_t)lim.disk_bytes;
  sb.timeout_ms = (int64_t)ttl;
  sb.created_ms = state_now_ms(); /* a pooled box's TTL counts from its claim */
  sb.expires_ms = sb.created_ms + (int64_t)ttl;
  box_cgroup_name(m, sb.id, sb.cgroup, sizeof sb.cgroup);
  sb.env_json = env_json;
  sb.metadata_json = (char *)(req->metadata_json ? req->metadata_json : "{}");
  if (from)
    snprintf(sb.snapshot_id, sizeof sb.snapshot_id, "%s", from->snapshot_id);
  snprintf(b->tenant, sizeof b->tenant, "%s", tenant);
  b->limits = lim;
  b->expires_ms = sb.expires_ms;
  box_env_free(b->env);
  b->env = env;

  struct husk_err ignored;
  if (pooled) {
    /* Already running: one commit makes it the tenant's (quota checked in
     * the same transaction). */
    snprintf(sb.state, sizeof sb.state, "%s", STATE_BOX_RUNNING);
    sb.init_pid = b->j.pid;
    sb.init_start_time = box_proc_start_time(b->j.pid);
    sb.uid_base = b->j.uid_base;
    sb.slot = b->j.slot;
    if (state_box_insert(m->cfg.state, &sb, err) < 0) {
      /* unused: nobody's again, with nothing of this request kept */
      b->tenant[0] = '\0';
      box_env_free(b->env);
      b->env = NULL;
      box_pool_return(m, b);
      return -1;
    }
    if (policy && (state_box_egress_set(m->cfg.state, sb.id, "egress", policy, err) < 0 ||
                   box_egress_attach(m, b, policy, true, err) < 0)) {
      husk_error_wrap(err, "cannot set up the sandbox's network");
      state_box_set_state(m->cfg.state, sb.id, NULL, STATE_BOX_FAILED, "setup_error", 0, &ignored);
      jail_kill(&b->j);
      lb_free(m, b);
      return -1;
    }
  } else {
    /* The row first: a crash from here on leaves a "creating" box that the
     * next start cleans up, never an untracked cgroup or process. */
    snprintf(sb.state, sizeof sb.state, "%s", STATE_BOX_CREATING);
    sb.uid_base = -1;
    sb.slot = -1;
    if (state_box_insert(m->cfg.state, &sb, err) < 0) {
      lb_free(m, b);
      return -1;
    }
    if ((policy && state_box_egress_set(m->cfg.state, sb.id, "egress", policy, err) < 0) ||
        (req->nvolumes &&
         state_volume_attach(m->cfg.state, tenant, sb.id, vols, req->nvolumes, err) < 0) ||
        box_make_jail(m, b, &lim, false, img, from ? &from->restore : NULL, err) < 0 ||
        (policy && box_egress_attach(m, b, policy, true, err) < 0) ||
        state_box_set_runtime(m->cfg.state, sb.id, b->j.pid, box_proc_start_time(b->j.pid),
                              b->j.uid_base, b->j.slot, NULL, err) < 0 ||
        state_box_set_state(m->cfg.state, sb.id, STATE_BOX_CREATING, STATE_BOX_RUNNING, "", 0, err) < 0) {
      husk_error_wrap(err, "cannot create the sandbox");
      state_box_set_state(m->cfg.state, sb.id, NULL, STATE_BOX_FAILED, "setup_error", 0, &ignored);
      lb_free(m, b);
      return -1;
    }
  }
  lb_list_add(m, b);
  lb_unref(m, b); /* the list holds it now */
  box_log(m, "box %s created for tenant %s%s", sb.id, tenant, pooled ? " (from the pool)" : "");
  return out ? husk_box_get(m, tenant, sb.id, out, err) : 0;
}

/* ---- destroy ------------------------------------------------------------------ */

/* End a listed box: record it, make it unreachable, kill it.  The jail is
 * torn down when the last reference goes (at once unless an exec is still
 * returning). */
int box_end(struct husk_mgr *m, struct live_box *b, const char *state, const char *reason,
                   struct husk_err *err) {
  pthread_mutex_lock(&b->lock);
  if (b->ending) {
    pthread_mutex_unlock(&b->lock);
    return husk_fail(err, ENOENT, "no such sandbox");
  }
  b->ending = true;
  pthread_mutex_unlock(&b->lock);
  /* One commit: the end is recorded first, then the box is killed.  A
   * crash in between leaves a terminal row and a live box that no row
   * accounts for, which the next start's sweep kills like any stray box
   * cgroup (and its socket and link), so nothing leaks; and an answer to
   * the caller is only ever sent after the commit. */
  int rc = state_box_set_state(m->cfg.state, b->id, NULL, state, reason, 0, err);
  jail_kill(&b->j);
  lb_list_remove(m, b);
  /* The box's egress records are written before the end is acknowledged;
   * the rest of the teardown (waitpid, cgroup, link) happens in lb_free. */
  if (b->egress && m->egress)
    egress_box_flush(m->egress, b->id);
  if (rc < 0)
    return -1;
  box_log(m, "box %s ended: %s (%s)", b->id, state, reason);
  return 0;
}

void box_retire(struct husk_mgr *m, struct live_box *b) {
  pthread_mutex_lock(&b->lock);
  bool was = b->ending;
  b->ending = true;
  pthread_mutex_unlock(&b->lock);
  if (was)
    return;
  jail_kill(&b->j);
  lb_list_remove(m, b);
  if (b->egress && m->egress)
    egress_box_flush(m->egress, b->id);
}

int husk_box_destroy(struct husk_mgr *m, const char *tenant, const char *id, const char *final_state,
                struct husk_err *err) {
  if (!box_valid_id(id))
    return husk_fail(err, ENOENT, "no such sandbox");
  const char *reason = final_state && !strcmp(final_state, "killed") ? "killed" : "deleted";
  struct live_box *b = lb_get(m, tenant, id);
  if (!b) {
    /* Known but not live (already ended) -> conflict; unknown -> not found. */
    struct state_box sb;
    if (state_box_get(m->cfg.state, tenant, id, &sb, err) < 0)
      return -1;
    if (sb.paused_snapshot[0]) {
      /* Paused to disk: nothing runs; its row ends, then its snapshot goes. */
      char snap[sizeof sb.paused_snapshot];
      snprintf(snap, sizeof snap, "%s", sb.paused_snapshot);
      state_box_free(&sb);
      if (state_box_set_state(m->cfg.state, id, STATE_BOX_PAUSED, STATE_BOX_STOPPED, reason, 0,
                              err) < 0)
        return err->code == ESTALE ? husk_fail(err, EBUSY, "sandbox %s is not running", id) : -1;
      box_snapshot_drop(m, tenant, snap);
      box_paused_on_disk(m, -1);
      box_log(m, "box %s ended: %s (%s)", id, STATE_BOX_STOPPED, reason);
      return 0;
    }
    state_box_free(&sb);
    return husk_fail(err, EBUSY, "sandbox %s is not running", id);
  }
  int rc = box_end(m, b, STATE_BOX_STOPPED, reason, err);
  lb_unref(m, b);
  return rc;
}

int husk_box_set_timeout(struct husk_mgr *m, const char *tenant, const char *id, uint64_t ttl_ms,
                    struct husk_box_info *out, struct husk_err *err) {
  if (!box_valid_id(id))
    return husk_fail(err, ENOENT, "no such sandbox");
  if (ttl_ms == 0 || ttl_ms > m->cfg.max_ttl_ms)
    return husk_fail(err, EINVAL, "a box lifetime is 1 ms to %llu s",
                     (unsigned long long)(m->cfg.max_ttl_ms / 1000));
  struct live_box *b = lb_get(m, tenant, id);
  if (!b) {
    struct state_box sb;
    if (state_box_get(m->cfg.state, tenant, id, &sb, err) < 0)
      return -1;
    bool on_disk = sb.paused_snapshot[0] != '\0';
    int64_t since = sb.paused_ms;
    state_box_free(&sb);
    if (!on_disk)
      return husk_fail(err, EBUSY, "sandbox %s is not running", id);
    if (state_box_set_expiry(m->cfg.state, id, since + (int64_t)ttl_ms, err) < 0)
      return -1;
    return out ? husk_box_get(m, tenant, id, out, err) : 0;
  }
  /* A paused box's lifetime counts from its resume: what is left then is
   * expires_ms - paused_ms. */
  pthread_mutex_lock(&m->lock);
  int64_t from = b->paused ? b->paused_ms : state_now_ms();
  pthread_mutex_unlock(&m->lock);
  int64_t exp = from + (int64_t)ttl_ms;
  int rc = state_box_set_expiry(m->cfg.state, id, exp, err);
  if (rc == 0) {
    pthread_mutex_lock(&m->lock);
    b->expires_ms = exp;
    pthread_mutex_unlock(&m->lock);
    box_wake_monitor(m);
  }
  lb_unref(m, b);
  if (rc < 0)
    return -1;
  return out ? husk_box_get(m, tenant, id, out, err) : 0;
}

/* ---- exec ---------------------------------------------------------------------- */

/* A running box of `tenant`, with a reference, or an error that tells an
 * unknown id (ENOENT) from an ended box (EBUSY). */
struct live_box *box_running(struct husk_mgr *m, const char *tenant, const char *id,
                                    struct husk_err *err) {
  if (!box_valid_id(id)) {
    husk_fail(err, ENOENT, "no such sandbox");
    return NULL;
  }
  struct live_box *b = lb_get(m, tenant, id);
  if (b && !b->ending) {
    pthread_mutex_lock(&m->lock);
    bool paused = b->paused;
    pthread_mutex_unlock(&m->lock);
    if (!paused)
      return b;
  }
  if (b)
    lb_unref(m, b);
  struct state_box sb;
  if (state_box_get(m->cfg.state, tenant, id, &sb, err) < 0)
    return NULL;
  if (!strcmp(sb.state, STATE_BOX_PAUSED))
    husk_fail(err, EBUSY, "sandbox %s is paused: resume it first", id);
  else
    husk_fail(err, EBUSY, "sandbox %s is %s", id, sb.state);
  state_box_free(&sb);
  return NULL;
}

struct live_box *box_live(struct husk_mgr *m, const char *tenant, const char *id,
                          struct husk_err *err) {
  if (!box_valid_id(id)) {
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

_Static_assert(HUSK_CREATED_BY_MAX == STATE_CREATED_BY_SIZE, "creator buffers differ");

int box_created_by(char *dst, size_t size, const char *src, struct husk_err *err) {
  dst[0] = '\0';
  if (!src || !src[0])
    return 0;
  if (strnlen(src, size) == size || state_check_created_by(src, true, err) < 0)
    return husk_fail(err, EINVAL,
                     "the creator must be u_ and 24 hex digits, key: and an API key id, or "
                     "s3key: and an S3 access key id");
  memcpy(dst, src, strlen(src) + 1);
  return 0;
}

int box_check_exec(const struct husk_exec_req *req, struct husk_err *err) {
  if (!req->argv || !req->argv[0] || !req->argv[0][0])
    return husk_fail(err, EINVAL, "the command is empty (no program to run)");
  if (req->cwd && req->cwd[0] != '/')
    return husk_fail(err, EINVAL, "the working directory `%.200s` is not an absolute path",
                     req->cwd);
  if (req->timeout_ms > HUSK_MAX_TIMEOUT_MS)
    return husk_fail(
        err, EINVAL, "a command's time limit of %llu ms is above the maximum of %llu s",
        (unsigned long long)req->timeout_ms, (unsigned long long)(HUSK_MAX_TIMEOUT_MS / 1000));
  for (size_t i = 0; req->env && req->env[i]; i++)
    if (!strchr(req->env[i], '=') || req->env[i][0] == '=')
      return husk_fail(err, EINVAL, "environment entry %zu is not NAME=VALUE", i);
  return 0;
}

int husk_box_exec(struct husk_mgr *m, const char *tenant, const char *id, const struct husk_exec_req *req,
             struct husk_exec_result *out, struct husk_err *err) {
  if (box_check_exec(req, err) < 0)
    return -1;
  struct live_box *b = box_running(m, tenant, id, err);
  if (!b)
    return -1;
  int rc = -1;
  cleanup_free char **env = box_exec_env(b, req->env);
  cleanup_close int conn = jail_connect(b->ctl_path, err);
  if (!env)
    husk_fail(err, ENOMEM, "out of memory");
  if (env && conn >= 0) {
    struct exec_spec es = {.argv = req->argv, .env = env, .cwd = box_cwd(b, req->cwd),
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

/* ---- metrics and files ------------------------------------------------------------ */

int husk_box_metrics(struct husk_mgr *m, const char *tenant, const char *id, struct husk_box_metrics *out,
                struct husk_err *err) {
  struct live_box *b = box_live(m, tenant, id, err);
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

int husk_box_open_fs(struct husk_mgr *m, const char *tenant, const char *id, struct husk_fs *out,
                     struct husk_err *err) {
  memset(out, 0, sizeof *out);
  out->fs = -1;
  struct live_box *b = box_running(m, tenant, id, err);
  if (!b)
    return -1;
  int fd = fcntl(b->j.fs, F_DUPFD_CLOEXEC, 3);
  int e = errno;
  out->uid = jail_host_id(&b->j, HUSK_BOX_UID);
  out->gid = jail_host_id(&b->j, HUSK_BOX_GID);
  lb_unref(m, b);
  if (fd < 0)
    return husk_error(err, e, "cannot open the sandbox filesystem");
  out->fs = fd;
  return 0;
}

void husk_fs_close(struct husk_fs *b) {
  if (b && b->fs >= 0) {
    close_quiet(b->fs);
    b->fs = -1;
  }
}

