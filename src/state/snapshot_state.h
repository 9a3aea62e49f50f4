/* Snapshot rows: what a filesystem snapshot of a box recorded (the box's
 * template, limits, env, metadata) and where its archive is (the store,
 * under the snapshot's id).  A row is 'creating' while its archive is
 * being written and 'ready' once the archive is whole; a start removes
 * 'creating' rows (state_snapshot_list_creating, state_snapshot_remove). */
#ifndef HUSK_STATE_SNAPSHOT_STATE_H
#define HUSK_STATE_SNAPSHOT_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "state/state.h"
#include "util/error.h"

#define STATE_SNAPSHOT_ID_SIZE 32
/* The tenant's bucket of snapshot archives, one object per snapshot named
 * by its id: husk's own (store_bucket_internal), counted in its storage. */
#define STATE_SNAPSHOT_BUCKET "_snapshots"
#define STATE_SNAPSHOT_CREATING "creating"
#define STATE_SNAPSHOT_READY "ready"

struct state_snapshot {
  char id[STATE_SNAPSHOT_ID_SIZE]; /* "s_" + hex (state_new_id) */
  char tenant_id[STATE_TENANT_ID_SIZE];
  char box_id[STATE_BOX_ID_SIZE]; /* the box it was taken of */
  char state[16];
  char template_name[64];
  char template_id[32];
  char workdir[256];
  int64_t memory, pids, cpu_milli, disk, timeout_ms;
  char *env_json;      /* JSON object (heap) */
  char *metadata_json; /* JSON object (heap) */
  int64_t size;        /* bytes of the compressed archive */
  int64_t data_bytes;  /* bytes of file data in it */
  int64_t entries;
  char sha256[65];     /* of the archive, hex */
  int64_t created_ms;
  bool for_pause;      /* a box's own, paused to disk (never listed or deleted by a tenant) */
  int64_t refs;        /* on reads: live boxes made from it */
};
void state_snapshot_free(struct state_snapshot *s);

/* A new row in state 'creating' (the tenant must exist: ENOENT), unless
 * the tenant has `max` (> 0) rows already, of any kind (EDQUOT). */
int state_snapshot_insert(struct state *st, const struct state_snapshot *s, int64_t max,
                          struct husk_err *err);
/* creating -> ready with the archive's size, contents and digest
 * (ESTALE if the row is gone or not creating). */
int state_snapshot_ready(struct state *st, const char *id, int64_t size, int64_t data_bytes,
                         int64_t entries, const char *sha256, struct husk_err *err);
/* A snapshot of `tenant_id` (NULL: any), with refs; ENOENT. */
int state_snapshot_get(struct state *st, const char *tenant_id, const char *id,
                       struct state_snapshot *out, struct husk_err *err);
/* The tenant's ready snapshots oldest first -- only those taken of box
 * `box_id` unless it is NULL or "" -- one page (limit as state_box_list),
 * from `cursor` ("" or NULL: the start); next_cursor (STATE_CURSOR_SIZE)
 * gets the next page's, "" at the end. */
int state_snapshot_list(struct state *st, const char *tenant_id, const char *box_id,
                        const char *cursor, int limit,
                        int (*cb)(void *ctx, const struct state_snapshot *s), void *ctx,
                        char *next_cursor, size_t next_size, struct husk_err *err);
/* Remove the tenant's row, unless a live box was made from it (EBUSY,
 * saying how many): the caller removes the archive after this commits. */
int state_snapshot_delete(struct state *st, const char *tenant_id, const char *id,
                          struct husk_err *err);
/* Rows left 'creating' (by a crash) and pause snapshots no live box
 * resumes from (a crash between them and the box's record, or its end),
 * at most `max`; and their removal. */
int state_snapshot_list_creating(struct state *st, int max,
                                 int (*cb)(void *ctx, const struct state_snapshot *s), void *ctx,
                                 struct husk_err *err);
int state_snapshot_remove(struct state *st, const char *id, struct husk_err *err);
#endif
