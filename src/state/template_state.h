/* The templates' rows (src/template owns their layers on disk).
 *
 * A template belongs to a tenant, or (tenant_id "") is shared by the
 * operator with every tenant; names are unique per owner, and a tenant's
 * lookup finds its own template before a shared one of the same name. */
#ifndef HUSK_STATE_TEMPLATE_STATE_H
#define HUSK_STATE_TEMPLATE_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "state/state.h"

#define STATE_TEMPLATE_ID_SIZE 32   /* "tpl_" + 24 hex */
#define STATE_TEMPLATE_NAME_SIZE 64 /* the name, NUL included */
#define STATE_DIGEST_SIZE 72        /* "sha256:" + 64 hex, NUL included */

struct state_template {
  char id[STATE_TEMPLATE_ID_SIZE];
  char tenant_id[STATE_TENANT_ID_SIZE]; /* "": shared */
  char name[STATE_TEMPLATE_NAME_SIZE];
  char source[16]; /* "oci", "docker", "build", "debian" */
  char config_digest[STATE_DIGEST_SIZE];
  char *config_json; /* the image config (malloc'd) */
  char *layers_json; /* [{"digest","diff_id","size"}...], base first (malloc'd) */
  int64_t size;      /* bytes of the unpacked layers */
  int64_t created_ms;
};
void state_template_free(struct state_template *t);

/* Insert t (its id chosen by the caller); EEXIST when the owner has a
 * template of that name; EDQUOT when the owner's template storage
 * (state_template_usage) would pass `quota` bytes (0: none); ENOENT when
 * the owner is not a tenant, or one being deleted (checked in the
 * insert's transaction: a template recorded after its tenant's purge
 * would outlive it). */
int state_template_insert(struct state *st, const struct state_template *t, uint64_t quota,
                          struct husk_err *err);
/* By name or id, as `tenant` sees it: its own, else (shared_too) a shared
 * one.  ENOENT otherwise. */
/* The owner's template storage, in bytes of unpacked layers: each of its
 * templates' size, plus each distinct layer its build cache holds that
 * none of its templates has. */
int state_template_usage(struct state *st, const char *tenant, uint64_t *used,
                         struct husk_err *err);
int state_template_get(struct state *st, const char *tenant, const char *name_or_id,
                       bool shared_too, struct state_template *out, struct husk_err *err);
/* The templates `tenant` sees (its own, then shared), by name; tenant NULL:
 * every template. */
int state_template_list(struct state *st, const char *tenant,
                        int (*cb)(void *ctx, const struct state_template *t), void *ctx,
                        struct husk_err *err);
/* Delete the owner's template `id`; EBUSY while a live box uses it. */
int state_template_delete(struct state *st, const char *tenant, const char *id,
                          struct husk_err *err);

/* The build cache (a step's key -> the layer it made).  get: ENOENT on a
 * miss (a hit marks the entry used).  put: `size` is the layer's unpacked
 * bytes, counted in the owner's template storage; EDQUOT past `quota`
 * (0: none), ENOENT as state_template_insert.  prune: entries unused since
 * `before_ms` go.  layers: every diff_id the cache names. */
int state_build_cache_get(struct state *st, const char *tenant, const char *key,
                          char diff_id[STATE_DIGEST_SIZE], struct husk_err *err);
int state_build_cache_put(struct state *st, const char *tenant, const char *key,
                          const char *diff_id, int64_t size, uint64_t quota,
                          struct husk_err *err);
int state_build_cache_prune(struct state *st, int64_t before_ms, struct husk_err *err);
int state_build_cache_layers(struct state *st, int (*cb)(void *ctx, const char *diff_id),
                             void *ctx, struct husk_err *err);

#endif
