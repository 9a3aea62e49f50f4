/* What a box of an image template is created with (box_internal.h:
 * box_image_resolve): the template as the tenant sees it (its own, else a
 * shared one), its layers top first, the user its programs run as, its
 * image's env under the request's, and its working directory. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "box/box_internal.h"
#include "husk/template.h"
#include "template/template.h"
#include "util/cleanup.h"

void box_image_free(struct box_image *bi) {
  state_template_free(&bi->t);
  template_profile_free(&bi->p);
  free(bi->env);
  memset(bi, 0, sizeof *bi);
}

/* The image's env, each entry the request's env names replaced by it. */
static char **merge_env(char *const *image, char *const *req) {
  size_t ni = 0, nr = 0;
  while (image && image[ni])
    ni++;
  while (req && req[nr])
    nr++;
  char **env = calloc(ni + nr + 1, sizeof *env);
  if (!env)
    return NULL;
  size_t n = 0;
  for (size_t i = 0; i < ni + nr; i++) {
    char *e = i < ni ? image[i] : req[i - ni];
    size_t klen = strcspn(e, "=");
    size_t k = 0;
    while (k < n && !(strncmp(env[k], e, klen) == 0 && env[k][klen] == '='))
      k++;
    env[k] = e;
    if (k == n)
      n++;
  }
  return env;
}

/* ---- the profile cache ---- */

struct profile_entry {
  char id[STATE_TEMPLATE_ID_SIZE]; /* "": free */
  struct template_profile p;
  uint64_t used;
};

/* The cached profile of template `id` copied into *out: 1, or 0 if none. */
static int profile_cached(struct husk_mgr *m, const char *id, struct template_profile *out) {
  int found = 0;
  pthread_mutex_lock(&m->profile_lock);
  for (size_t i = 0; m->profiles && i < PROFILE_CACHE_MAX; i++) {
    struct profile_entry *e = &m->profiles[i];
    if (e->id[0] && !strcmp(e->id, id)) {
      e->used = ++m->profile_tick;
      found = template_profile_copy(out, &e->p) == 0;
      break;
    }
  }
  pthread_mutex_unlock(&m->profile_lock);
  return found;
}

static void profile_keep(struct husk_mgr *m, const char *id, const struct template_profile *p) {
  pthread_mutex_lock(&m->profile_lock);
  if (!m->profiles)
    m->profiles = calloc(PROFILE_CACHE_MAX, sizeof *m->profiles);
  struct profile_entry *slot = NULL;
  for (size_t i = 0; m->profiles && i < PROFILE_CACHE_MAX; i++) {
    struct profile_entry *e = &m->profiles[i];
    if (e->id[0] && !strcmp(e->id, id)) {
      slot = NULL; /* another create kept it meanwhile */
      break;
    }
    if (!slot || !e->id[0] || (slot->id[0] && e->used < slot->used))
      slot = e;
  }
  if (slot) {
    template_profile_free(&slot->p);
    slot->id[0] = '\0';
    if (template_profile_copy(&slot->p, p) == 0) {
      snprintf(slot->id, sizeof slot->id, "%s", id);
      slot->used = ++m->profile_tick;
    }
  }
  pthread_mutex_unlock(&m->profile_lock);
}

void box_profiles_free(struct husk_mgr *m) {
  for (size_t i = 0; m->profiles && i < PROFILE_CACHE_MAX; i++)
    template_profile_free(&m->profiles[i].p);
  free(m->profiles);
  m->profiles = NULL;
}

int box_image_resolve(struct husk_mgr *m, const char *tenant, const char *name,
                      char *const *req_env, struct box_image *out, struct husk_err *err) {
  memset(out, 0, sizeof *out);
  if (!m->cfg.templates)
    return husk_fail(err, EINVAL, "this server keeps no templates: only `default`");
  struct state_template t;
  if (state_template_get(m->cfg.state, tenant, name, true, &t, err) < 0) {
    if (err->code == ENOENT)
      husk_fail(err, ENOENT, "no template `%s` (husk template list, GET /v1/templates)", name);
    return -1;
  }
  return box_image_of(m, &t, req_env, out, err);
}

int box_image_of(struct husk_mgr *m, struct state_template *t, char *const *req_env,
                 struct box_image *out, struct husk_err *err) {
  memset(out, 0, sizeof *out);
  out->t = *t;
  memset(t, 0, sizeof *t);
  json_t *layers = json_loads(out->t.layers_json, 0, NULL);
  size_t n = json_array_size(layers);
  if (!json_is_array(layers) || n == 0 || n > IMAGE_MAX_LAYERS) {
    json_decref(layers);
    husk_fail(err, EUCLEAN, "template %s: its layer list is damaged", out->t.id);
    goto fail;
  }
  for (size_t i = 0; i < n; i++) {
    const char *d =
        json_string_value(json_object_get(json_array_get(layers, n - 1 - i), "diff_id"));
    if (!d || strlen(d) != 71) {
      json_decref(layers);
      husk_fail(err, EUCLEAN, "template %s: its layer list is damaged", out->t.id);
      goto fail;
    }
    memcpy(out->ids[i], d + 7, 64);
    out->ids[i][64] = '\0';
    out->idv[i] = out->ids[i];
  }
  json_decref(layers);
  out->n = n;
  /* The profile reads the image's /etc/passwd through its layers: once
   * per recorded template (a build's image so far has no digest yet, and
   * changes from step to step: never cached). */
  bool cacheable = out->t.config_digest[0] != '\0';
  if (!cacheable || !profile_cached(m, out->t.id, &out->p)) {
    struct template_layers tl;
    if (template_layers_open(m->cfg.templates, &out->t, &tl, err) < 0)
      goto fail;
    int rc = template_profile(&out->t, &tl, &out->p, err);
    template_layers_release(&tl);
    if (rc < 0)
      goto fail;
    if (cacheable)
      profile_keep(m, out->t.id, &out->p);
  }
  if (!(out->env = merge_env(out->p.env, req_env))) {
    husk_error(err, ENOMEM, "template env");
    goto fail;
  }
  return 0;
fail:
  box_image_free(out);
  return -1;
}

struct template_store *box_mgr_templates(struct husk_mgr *m) { return m->cfg.templates; }

int box_template_list(struct husk_mgr *m, const char *tenant,
                      int (*cb)(void *ctx, const struct state_template *t), void *ctx,
                      struct husk_err *err) {
  return state_template_list(m->cfg.state, tenant, cb, ctx, err);
}

/* ---- the public API (husk/template.h) ---- */

static void template_info(const struct state_template *t, struct husk_template_info *out) {
  if (!out)
    return;
  memset(out, 0, sizeof *out);
  snprintf(out->id, sizeof out->id, "%s", t->id);
  snprintf(out->name, sizeof out->name, "%s", t->name);
  snprintf(out->tenant_id, sizeof out->tenant_id, "%s", t->tenant_id);
  snprintf(out->source, sizeof out->source, "%s", t->source);
  snprintf(out->digest, sizeof out->digest, "%s", t->config_digest);
  out->size = t->size > 0 ? (uint64_t)t->size : 0;
  out->created_ms = t->created_ms;
}

static struct template_store *store_or_fail(struct husk_mgr *m, struct husk_err *err) {
  if (!m->cfg.templates)
    husk_fail(err, EINVAL, "this manager keeps no templates: only `default`");
  return m->cfg.templates;
}

int husk_template_import(struct husk_mgr *m, const char *tenant, const char *name,
                         ssize_t (*in)(void *ctx, void *buf, size_t cap), void *ctx,
                         struct husk_template_info *out, struct husk_err *err) {
  struct template_store *ts = store_or_fail(m, err);
  struct state_template t;
  if (!ts || template_import_archive(ts, tenant, name, in, ctx, &t, err) < 0)
    return -1;
  template_info(&t, out);
  state_template_free(&t);
  return 0;
}

int husk_template_import_dir(struct husk_mgr *m, const char *tenant, const char *name,
                             const char *dir, struct husk_template_info *out,
                             struct husk_err *err) {
  struct template_store *ts = store_or_fail(m, err);
  struct state_template t;
  if (!ts || template_import_layout(ts, tenant, name, dir, &t, err) < 0)
    return -1;
  template_info(&t, out);
  state_template_free(&t);
  return 0;
}

int husk_template_get(struct husk_mgr *m, const char *tenant, const char *name_or_id,
                      struct husk_template_info *out, struct husk_err *err) {
  struct state_template t;
  if (state_template_get(m->cfg.state, tenant, name_or_id, true, &t, err) < 0)
    return -1;
  template_info(&t, out);
  state_template_free(&t);
  return 0;
}

struct public_list {
  int (*cb)(void *ctx, const struct husk_template_info *t);
  void *ctx;
};

static int public_list_cb(void *ctx, const struct state_template *t) {
  struct public_list *pl = ctx;
  struct husk_template_info info;
  template_info(t, &info);
  return pl->cb(pl->ctx, &info);
}

int husk_template_list(struct husk_mgr *m, const char *tenant,
                       int (*cb)(void *ctx, const struct husk_template_info *t), void *ctx,
                       struct husk_err *err) {
  struct public_list pl = {.cb = cb, .ctx = ctx};
  return state_template_list(m->cfg.state, tenant, public_list_cb, &pl, err);
}

int husk_template_delete(struct husk_mgr *m, const char *tenant, const char *name_or_id,
                         struct husk_err *err) {
  return box_template_delete(m, tenant, name_or_id, err);
}

int husk_template_export(struct husk_mgr *m, const char *tenant, const char *name_or_id,
                         int (*out)(void *ctx, const void *buf, size_t len), void *ctx,
                         struct husk_err *err) {
  struct template_store *ts = store_or_fail(m, err);
  return ts ? template_export(ts, tenant, name_or_id, out, ctx, err) : -1;
}

int husk_template_build(struct husk_mgr *m, const char *tenant, const char *name,
                        const struct husk_build_req *req, struct husk_template_info *out,
                        struct husk_err *err) {
  if (!tenant || !name || !req)
    return husk_fail(err, EINVAL, "a build needs a tenant, a name and a request");
  if (!store_or_fail(m, err))
    return -1;
  cleanup_close int ctx = -1;
  if (req->context_dir && (ctx = open(req->context_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
    return husk_error(err, errno, "the build context `%.200s`", req->context_dir);
  size_t nhosts = 0;
  while (req->egress_hosts && req->egress_hosts[nhosts])
    nhosts++;
  cleanup_free char *policy = NULL;
  if (nhosts && !(policy = box_build_egress_policy(req->egress_hosts, nhosts)))
    return husk_error(err, ENOMEM, "the build's egress policy");
  /* A shared template's steps run as the builds' own tenant, as the
   * command line's and the admin's builds do. */
  char steps[HUSK_TENANT_ID_MAX];
  if (!tenant[0]) {
    if (box_build_tenant(m, steps, err) < 0)
      return -1;
  } else {
    snprintf(steps, sizeof steps, "%s", tenant);
  }
  struct box_build_req rq = {.tenant = steps,
                             .owner = tenant,
                             .name = name,
                             .dockerfile = req->dockerfile,
                             .dockerfile_len = req->dockerfile_len,
                             .dockerfile_path = req->dockerfile_path,
                             .build_args = req->build_args,
                             .context = ctx,
                             .context_tar = -1,
                             .egress_json = policy,
                             .limits = req->limits,
                             .no_cache = req->no_cache,
                             .log = req->log,
                             .log_ctx = req->log_ctx,
                             .cancel_fd = req->cancel_fd};
  struct state_template t;
  if (box_build(m, &rq, &t, err) < 0)
    return -1;
  template_info(&t, out);
  state_template_free(&t);
  return 0;
}
