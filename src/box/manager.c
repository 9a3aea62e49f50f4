/* The library's own manager: a box manager that opens (and owns) the state
 * database of its data directory, for programs that use libhusk without the
 * rest of `husk serve` (husk_mgr_open in include/husk/manager.h); and the
 * tenants such a program needs. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "box/box.h"
#include "box/box_internal.h"
#include "state/state.h"
#include "util/fileio.h"

#ifndef HUSK_LIBEXECDIR
#define HUSK_LIBEXECDIR "/usr/lib/husk"
#endif

#define LIB_DEFAULT_TTL_MS (300ULL * 1000)
#define LIB_MAX_TTL_MS (7ULL * 24 * 3600 * 1000)

const char *husk_version(void) { return HUSK_VERSION; }

int husk_mgr_open(struct husk_mgr **out, const struct husk_mgr_config *cfg, struct husk_err *err) {
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
  struct box_pool_spec pool = {.size = cfg->pool_size};
  struct box_mgr_config mc = {.data_dir = cfg->data_dir, .state = st,
                              .default_ttl_ms = cfg->default_ttl_ms ? cfg->default_ttl_ms
                                                                    : LIB_DEFAULT_TTL_MS,
                              .max_ttl_ms = cfg->max_ttl_ms ? cfg->max_ttl_ms : LIB_MAX_TTL_MS,
                              .pools = cfg->pool_size ? &pool : NULL,
                              .npools = cfg->pool_size ? 1 : 0,
                              .spawner_path = cfg->husk_binary ? cfg->husk_binary
                                                               : HUSK_LIBEXECDIR "/husk",
                              .log = cfg->log,
                              .log_ctx = cfg->log_ctx};
  if (mc.default_ttl_ms > mc.max_ttl_ms) {
    state_close(st);
    return husk_fail(err, EINVAL, "the default lifetime is above the maximum");
  }
  struct husk_mgr *m = NULL;
  if (box_mgr_open(&m, &mc, err) < 0) {
    state_close(st);
    return -1;
  }
  m->own_state = st;
  /* A deletion a crash interrupted is finished now, as husk serve does. */
  box_tenant_resume(m, NULL);
  *out = m;
  return 0;
}

void husk_mgr_close(struct husk_mgr *m, bool destroy_boxes) {
  if (!m)
    return;
  struct state *st = m->own_state;
  box_mgr_close(m, destroy_boxes);
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
