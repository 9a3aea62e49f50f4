/* Volume rows: a tenant's named volumes (ext4 images under
 * DATA/volumes/<id>.img) and which box mounts which where.  A row is
 * 'creating' while its image is made and 'ready' once the image is whole;
 * a start removes 'creating' rows (state_volume_list_creating,
 * state_volume_remove) and image files no row names.
 *
 * A volume is mounted by at most one live box: state_volume_attach records
 * the box's mounts in one transaction, refusing a volume a live box holds
 * (EBUSY).  "Mounted" is computed from the box's state, never stored, so a
 * box that ended (or a crash) leaves nothing to release. */
#ifndef HUSK_STATE_VOLUME_STATE_H
#define HUSK_STATE_VOLUME_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "state/state.h"
#include "util/error.h"

#define STATE_VOLUME_ID_SIZE 32
#define STATE_VOLUME_NAME_SIZE 64
#define STATE_VOLUME_PATH_SIZE 256
#define STATE_VOLUME_CREATING "creating"
#define STATE_VOLUME_READY "ready"

struct state_volume {
  char id[STATE_VOLUME_ID_SIZE]; /* "v_" + hex (state_new_id) */
  char tenant_id[STATE_TENANT_ID_SIZE];
  char name[STATE_VOLUME_NAME_SIZE];
  int64_t size; /* bytes */
  char state[16];
  int64_t created_ms;
  char box_id[STATE_BOX_ID_SIZE]; /* on reads: the live box mounting it, or "" */
};

/* One mount of a box: which volume, where (relative to /workspace), how. */
struct state_volume_mount {
  char volume_id[STATE_VOLUME_ID_SIZE];
  char name[STATE_VOLUME_NAME_SIZE];
  char path[STATE_VOLUME_PATH_SIZE];
  bool read_only;
};

/* A new row in state 'creating' (ENOENT: no such tenant; EEXIST: the
 * tenant has a volume of that name; EDQUOT: it has `max` volumes). */
int state_volume_insert(struct state *st, const struct state_volume *v, int max,
                        struct husk_err *err);
/* creating -> ready (ESTALE if the row is gone or not creating). */
int state_volume_ready(struct state *st, const char *id, struct husk_err *err);
/* The tenant's ready volume by name (ENOENT). */
int state_volume_get(struct state *st, const char *tenant_id, const char *name,
                     struct state_volume *out, struct husk_err *err);
/* The tenant's ready volumes, by name. */
int state_volume_list(struct state *st, const char *tenant_id,
                      int (*cb)(void *ctx, const struct state_volume *v), void *ctx,
                      struct husk_err *err);
/* Remove the tenant's volume (ENOENT; EBUSY while a live box mounts it),
 * its id to `id_out` (STATE_VOLUME_ID_SIZE): the caller removes the image
 * after this commits. */
int state_volume_delete(struct state *st, const char *tenant_id, const char *name, char *id_out,
                        struct husk_err *err);
/* Record that live box `box_id` (of `tenant_id`) mounts m[0..n-1] (their
 * `name`, `path`, `read_only` set; `volume_id` filled here), all or none:
 * ENOENT for a volume the tenant does not have, EBUSY for one another live
 * box mounts. */
int state_volume_attach(struct state *st, const char *tenant_id, const char *box_id,
                        struct state_volume_mount *m, size_t n, struct husk_err *err);
/* The mounts of box `box_id` (at most `max`), in the order attached; the
 * count to *n. */
int state_volume_mounts(struct state *st, const char *box_id, struct state_volume_mount *m,
                        size_t max, size_t *n, struct husk_err *err);
/* Rows left 'creating' (by a crash), at most `max`, and a row's removal
 * (with its box_volumes rows). */
int state_volume_list_creating(struct state *st, int max,
                               int (*cb)(void *ctx, const struct state_volume *v), void *ctx,
                               struct husk_err *err);
int state_volume_remove(struct state *st, const char *id, struct husk_err *err);
/* Whether a row of any state has id `id` (the sweep of image files). */
int state_volume_exists(struct state *st, const char *id, bool *out, struct husk_err *err);
#endif
