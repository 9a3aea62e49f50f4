/* The box manager: opening it (lock the data directory, start the spawners,
 * the egress plane, reconcile the database with the kernel, start the
 * monitor, the reaper and the pools) and closing it (box_mgr_open and
 * box_mgr_close, for `husk serve`, which opens the state itself); the
 * library's own manager, which opens (and owns) the state database of its
 * data directory, for programs that use libhusk without the rest of `husk
 * serve` (husk_mgr_open in include/husk/manager.h); and the tenants such a
 * program needs. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "box/box.h"
#include "box/box_internal.h"
#include "box/spawner.h"
#include "jail/limits.h"
#include "state/state.h"
#include "util/cleanup.h"
#include "util/fileio.h"

#ifndef HUSK_LIBEXECDIR
#define HUSK_LIBEXECDIR "/usr/lib/husk"
#endif

#define LIB_DEFAULT_TTL_MS (300ULL * 1000)
#define LIB_MAX_TTL_MS (7ULL * 24 * 3600 * 1000)

int box_mgr_open(struct husk_mgr **out, const struct box_mgr_config *cfg, struct husk_err *err) {
  struct husk_mgr *m = calloc(1, sizeof *m);
  if (!m)
    return husk_fail(err, ENOMEM, "out of memory");
  m->cfg = *cfg;
  if (!m->cfg.default_ttl_ms)
    m->cfg.default_ttl_ms = HUSK_DEFAULT_TIMEOUT_MS;
  if (!m->cfg.max_ttl_ms)
    m->cfg.max_ttl_ms = HUSK_MAX_TIMEOUT_MS;
  if (!m->cfg.max_paused_ms)
    m->cfg.max_paused_ms = BOX_MAX_PAUSED_DEFAULT_MS;
  if (!m->cfg.tenant_max_snapshots)
    m->cfg.tenant_max_snapshots = BOX_TENANT_SNAPSHOTS_DEFAULT;
  if (disk_reserve_parse(cfg->data_reserve, &m->data_reserve, err) < 0) {
    free(m);
    return -1;
  }
  m->wake[0] = m->wake[1] = -1;
  m->dir_lock = -1;
  pthread_mutex_init(&m->lock, NULL);
  pthread_mutex_init(&m->pool_lock, NULL);
  pthread_mutex_init(&m->profile_lock, NULL);
  pthread_mutex_init(&m->reap_lock, NULL);
  pthread_mutex_init(&m->disk_resume_lock, NULL);
  pthread_mutex_init(&m->preview_lock, NULL);
  m->host_netns = -1;
  pthread_cond_init(&m->reap_cond, NULL);
  /* Monotonic: the pool's back-off must not stretch when the wall clock
   * is set back. */
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&m->pool_cond, &ca);
  pthread_condattr_destroy(&ca);
  if (box_pool_init(m, err) < 0)
    goto fail;
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
  {
    uint32_t h = 2166136261u; /* FNV-1a of the data directory's real path */
    for (const char *p = m->data_dir; *p; p++)
      h = (h ^ (unsigned char)*p) * 16777619u;
    snprintf(m->cg_prefix, sizeof m->cg_prefix, "box-%08x-", h);
  }
  /* Two daemons on one directory would each re-adopt, and kill, the
   * other's boxes. */
  snprintf(dir, sizeof dir, "%s/husk.lock", m->data_dir);
  m->dir_lock = open(dir, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (m->dir_lock < 0) {
    husk_error(err, errno, "cannot open `%s`", dir);
    goto fail;
  }
  if (flock(m->dir_lock, LOCK_EX | LOCK_NB) < 0) {
    husk_error(err, errno == EWOULDBLOCK ? EBUSY : errno,
               "another husk serve is already using `%s`", m->data_dir);
    goto fail;
  }
  if (pipe2(m->wake, O_CLOEXEC | O_NONBLOCK) < 0) {
    husk_error(err, errno, "pipe");
    goto fail;
  }
  enum cgroup_layout layout;
  if (cgroup_layout(&layout, err) < 0)
    goto fail;
  /* Before any thread of ours exists. */
  /* The spawners prepare the root boxes share on this empty directory,
   * each in a mount namespace of its own, so daemons share it and the host
   * never sees what is mounted there.  Not under the data directory: the
   * box's own root must be able to reach it by path, and the data
   * directory is closed to everyone but the host's root. */
  if (mkdir_p(BOX_PREPARED_ROOT, 0755) < 0) {
    husk_error(err, errno, "cannot create `%s`", BOX_PREPARED_ROOT);
    goto fail;
  }
  int rootdir = open(BOX_PREPARED_ROOT, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (rootdir < 0) {
    husk_error(err, errno, "`%s` is not a directory", BOX_PREPARED_ROOT);
    goto fail;
  }
  close(rootdir);
  if (spawner_start(&m->spawner, 0, BOX_PREPARED_ROOT, m->cfg.spawner_path, err) < 0)
    goto fail;
  /* The pool refills in the background: its builds must not take the
   * CPU from the requests it exists to speed up (measured: a pooled
   * lifecycle's exec 2.07 -> 1.80 ms, its p50 4.18 -> 3.91 ms). */
  if (m->cfg.npools > 0 && spawner_start(&m->pool_spawner, BOX_POOL_NICE, BOX_PREPARED_ROOT,
                                         m->cfg.spawner_path, err) < 0)
    goto fail;
  /* The egress proxy (a thread) after the spawner, before re-adoption. */
  if (box_egress_open(m, err) < 0)
    goto fail;
  box_reconcile(m);
  box_volume_sweep(m, true);
  if ((errno = pthread_create(&m->monitor, NULL, box_monitor_main, m)) != 0) {
    husk_error(err, errno, "cannot start the box monitor");
    goto fail;
  }
  m->monitor_running = true;
  if (box_reaper_start(m, err) < 0 || box_pool_start(m, err) < 0)
    goto fail;
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
  box_ctx_free_all(b);
  box_env_retire_all(b);
  box_env_free(b->env);
  pthread_mutex_destroy(&b->lock);
  pthread_mutex_destroy(&b->pause_lock);
  free(b);
}

void box_mgr_close(struct husk_mgr *m, bool destroy_boxes) {
  if (!m)
    return;
  if (m->monitor_running) {
    m->stop = true;
    box_wake_monitor(m);
    pthread_join(m->monitor, NULL);
  }
  /* The pool's boxes are nobody's: destroyed.  The reaper finishes what
   * is queued. */
  box_pool_stop(m);
  box_reaper_stop(m);
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
      box_end(m, b, STATE_BOX_STOPPED, "daemon_shutdown", &err);
      lb_unref(m, b);
    } else {
      pthread_mutex_lock(&m->lock);
      m->boxes = b->next;
      pthread_mutex_unlock(&m->lock);
      lb_detach(b);
    }
  }
  box_egress_close(m); /* links stay with boxes that keep running */
  spawner_stop(m->spawner);
  spawner_stop(m->pool_spawner);
  close_quiet(m->dir_lock);
  close_quiet(m->wake[0]);
  close_quiet(m->wake[1]);
  pthread_cond_destroy(&m->pool_cond);
  pthread_mutex_destroy(&m->pool_lock);
  pthread_cond_destroy(&m->reap_cond);
  pthread_mutex_destroy(&m->reap_lock);
  pthread_mutex_destroy(&m->disk_resume_lock);
  pthread_mutex_destroy(&m->lock);
  box_profiles_free(m);
  pthread_mutex_destroy(&m->profile_lock);
  box_previews_free(m);
  pthread_mutex_destroy(&m->preview_lock);
  free(m->pools);
  free(m);
}

/* ---- the library's manager ---------------------------------------------------------- */

const char *husk_version(void) { return HUSK_VERSION; }

int husk_mgr_open(struct husk_mgr **out, const struct husk_mgr_config *cfg, struct husk_err *err) {
  return husk_mgr_open_egress(out, cfg, NULL, err);
}

int husk_mgr_open_egress(struct husk_mgr **out, const struct husk_mgr_config *cfg,
                         const struct box_egress_settings *eg, struct husk_err *err) {
  *out = NULL;
  if (!cfg || !cfg->data_dir || !cfg->data_dir[0])
    return husk_fail(err, EINVAL, "the manager needs a data directory");
  if (mkdir_private(cfg->data_dir, err) < 0)
    return -1;
  char dbpath[PATH_MAX];
  if (snprintf(dbpath, sizeof dbpath, "%s/husk.db", cfg->data_dir) >= (int)sizeof dbpath)
    return husk_fail(err, ENAMETOOLONG, "data directory `%s` is too long", cfg->data_dir);
  struct state *st = NULL;
  if (state_open(&st, dbpath, err) < 0)
    return -1;
  struct template_store *ts = NULL;
  struct template_store_config tc = {.data_dir = cfg->data_dir, .state = st, .log = cfg->log,
                                     .log_ctx = cfg->log_ctx};
  if (template_store_open(&ts, &tc, err) < 0) {
    state_close(st);
    return -1;
  }
  struct box_pool_spec pool = {.size = cfg->pool_size};
  struct box_mgr_config mc = {.data_dir = cfg->data_dir, .state = st,
                              .default_ttl_ms = cfg->default_ttl_ms ? cfg->default_ttl_ms
                                                                    : LIB_DEFAULT_TTL_MS,
                              .max_ttl_ms = cfg->max_ttl_ms ? cfg->max_ttl_ms : LIB_MAX_TTL_MS,
                              .pools = cfg->pool_size ? &pool : NULL,
                              .npools = cfg->pool_size ? 1 : 0,
                              .spawner_path = cfg->husk_binary ? cfg->husk_binary
                                                               : HUSK_LIBEXECDIR "/husk",
                              .templates = ts,
                              .log = cfg->log,
                              .log_ctx = cfg->log_ctx};
  if (eg) {
    mc.egress_resolver = eg->resolver;
    mc.egress_allow = eg->allow;
    mc.egress_nallow = eg->nallow;
    mc.egress_ca_file = eg->ca_file;
  }
  struct husk_mgr *m = NULL;
  if (mc.default_ttl_ms > mc.max_ttl_ms)
    husk_fail(err, EINVAL, "the default lifetime is above the maximum");
  else if (box_mgr_open(&m, &mc, err) == 0)
    m->own_state = st, m->own_templates = ts;
  if (!m) {
    template_store_close(ts);
    state_close(st);
    return -1;
  }
  /* A deletion a crash interrupted is finished now, as husk serve does. */
  box_tenant_resume(m, NULL);
  *out = m;
  return 0;
}

void husk_mgr_close(struct husk_mgr *m, bool destroy_boxes) {
  if (!m)
    return;
  struct state *st = m->own_state;
  struct template_store *ts = m->own_templates;
  box_mgr_close(m, destroy_boxes);
  template_store_close(ts);
  state_close(st);
}

int husk_tenant_create(struct husk_mgr *m, const char *name, char id_out[HUSK_TENANT_ID_MAX],
                       struct husk_err *err) {
  struct state_tenant t;
  if (state_tenant_create(m->cfg.state, name, STATE_UNLIMITED, STATE_UNLIMITED, &t, err) < 0)
    return -1;
  snprintf(id_out, HUSK_TENANT_ID_MAX, "%s", t.id);
  return 0;
}

struct find_ctx {
  const char *name;
  char *id;
  bool found;
};

static int find_cb(void *ctx, const struct state_tenant *t) {
  struct find_ctx *f = ctx;
  if (t->deleted_ms || strcmp(t->name, f->name) != 0)
    return 0;
  snprintf(f->id, HUSK_TENANT_ID_MAX, "%s", t->id);
  f->found = true;
  return 1;
}

int husk_tenant_find(struct husk_mgr *m, const char *name, char id_out[HUSK_TENANT_ID_MAX],
                     struct husk_err *err) {
  struct find_ctx f = {.name = name, .id = id_out};
  if (state_tenant_list(m->cfg.state, find_cb, &f, err) < 0)
    return -1;
  if (!f.found)
    return husk_fail(err, ENOENT, "no tenant named `%s`", name);
  return 0;
}

int husk_tenant_delete(struct husk_mgr *m, const char *tenant, struct husk_err *err) {
  return box_tenant_delete(m, tenant, NULL, err);
}
