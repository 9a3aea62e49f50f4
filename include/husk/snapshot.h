/* husk: filesystem snapshots of boxes, and boxes made from them.
 *
 * A snapshot is what a box wrote, at one point in time: its /workspace,
 * /tmp, /dev/shm and, for a box of an image template, the writable layer
 * over the template (files it changed or deleted anywhere in its root),
 * as one compressed, checksummed archive in the tenant's object store
 * (counted in its storage quota), with what the box was made of: its
 * template (by id), limits, env, working directory and metadata.
 * Processes and memory are not part of it.
 *
 * husk_box_create with `snapshot` (struct husk_box_spec) makes a new box
 * of the same template holding that state: its own uid range, network and
 * files (nothing is shared between boxes made from one snapshot, so a
 * fork is as many creates).  A snapshot is whole or absent: one whose
 * archive was being written when the daemon died is removed at the next
 * start.
 *
 * These calls need a manager opened with an object store (husk serve's):
 * ENOTSUP otherwise. */
#ifndef HUSK_SNAPSHOT_H
#define HUSK_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "husk/base.h"
#include "husk/box.h"

struct husk_snapshot_info {
  char id[HUSK_SNAPSHOT_ID_MAX]; /* "s_" + 24 hex digits */
  char tenant_id[HUSK_TENANT_ID_MAX];
  char box_id[HUSK_BOX_ID_MAX]; /* the box it was taken of */
  char template_name[64];       /* "default", or the template's name when taken */
  char template_id[32];         /* an image template's id, else "" */
  char workdir[256];
  struct husk_limits limits;    /* the box's; timeout_ms its lifetime */
  char *env_json;               /* JSON object of the box's env (heap) */
  char *metadata_json;          /* the snapshot's metadata (heap), "{}" at least */
  uint64_t size;                /* bytes of the archive (what the quota counts) */
  uint64_t data_bytes;          /* bytes of file data in it */
  uint64_t entries;             /* files, directories, links in it */
  char sha256[65];              /* of the archive, hex */
  int64_t created_ms;
  uint64_t boxes;               /* live boxes made from it */
};
/* Free the strings of *si (not si itself); a zeroed struct is fine. */
HUSK_PUBLIC void husk_snapshot_info_free(struct husk_snapshot_info *si);

/* Snapshot a running or paused box.  A running box is frozen while its
 * files are archived (so the archive is one point in time) and thawed
 * after; a paused box stays paused.  The archive streams into the store:
 * it is never held in memory.  `metadata_json`: a JSON object of strings,
 * or NULL.  *out (may be NULL) receives the snapshot.
 * Errors: ENOENT (no such box), EBUSY (the box is not running or paused),
 * EINVAL (bad metadata), EDQUOT (the tenant's storage quota), ENOSPC (the
 * data disk's reserve), ENOTSUP (no store), others (the archive could not
 * be made: nothing is left of it). */
HUSK_PUBLIC int husk_snapshot_create(struct husk_mgr *m, const char *tenant, const char *box_id,
                                     const char *metadata_json, struct husk_snapshot_info *out,
                                     struct husk_err *err);

/* Errors: ENOENT (no such snapshot, or another tenant's). */
HUSK_PUBLIC int husk_snapshot_get(struct husk_mgr *m, const char *tenant, const char *id,
                                  struct husk_snapshot_info *out, struct husk_err *err);

/* Call cb for each of the tenant's snapshots, oldest first -- only those
 * taken of box `box_id` unless it is NULL or "" (a box that is gone still
 * has its snapshots; an id of no box has none) -- one page of `limit`
 * (1..1000; 0: 100) from `cursor` (NULL or "": the start); next_cursor
 * (next_len >= 64) gets the next page's, "" at the end.  cb returns 0 to
 * go on, > 0 to stop, < 0 to fail (returned as is).
 * Errors: EINVAL (bad cursor or limit). */
HUSK_PUBLIC int husk_snapshot_list(struct husk_mgr *m, const char *tenant, const char *box_id,
                                   const char *cursor, int limit,
                                   int (*cb)(void *ctx, const struct husk_snapshot_info *si),
                                   void *ctx, char *next_cursor, size_t next_len,
                                   struct husk_err *err);

/* Delete a snapshot and its archive.  Errors: ENOENT, EBUSY (a live box
 * was made from it, or is paused into it). */
HUSK_PUBLIC int husk_snapshot_delete(struct husk_mgr *m, const char *tenant, const char *id,
                                     struct husk_err *err);

#endif
