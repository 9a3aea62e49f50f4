/* husk: named volumes, a tenant's filesystems that outlive boxes.
 *
 * A volume is an ext4 filesystem of a fixed size in an image file of the
 * daemon's data directory (DATA/volumes/<id>.img, sparse: it takes the
 * space its files do).  A box mounts it at a path under /workspace
 * (husk_box_spec.volumes), read-write or read-only; what a box writes
 * there stays when the box ends, and the next box that mounts the volume
 * sees it.  Files in it belong to the ids the box sees (its root
 * directory to the box user, uid 1000), whichever box mounts it.
 *
 * A volume is mounted by at most one live box at a time (a running or
 * paused one); a box that ends releases it, also when the daemon died.
 * Snapshots of a box do not include its volumes (the mount point is
 * archived as an empty directory).  A full volume fails writes with
 * ENOSPC inside the box; nothing else of the box or the host fills. */
#ifndef HUSK_VOLUME_H
#define HUSK_VOLUME_H

#include <stddef.h>
#include <stdint.h>

#include "husk/base.h"
#include "husk/box.h"

#define HUSK_VOLUME_ID_MAX 32   /* size of a volume id buffer, NUL included */
#define HUSK_VOLUME_NAME_MAX 64 /* size of a volume name buffer, NUL included */
/* A volume's size: bytes, these bounds included; 0 asks for the default. */
#define HUSK_VOLUME_MIN_SIZE (UINT64_C(16) << 20)
#define HUSK_VOLUME_MAX_SIZE (UINT64_C(64) << 30)
#define HUSK_VOLUME_DEFAULT_SIZE (UINT64_C(1) << 30)
/* Volumes a tenant may have. */
#define HUSK_VOLUMES_PER_TENANT_MAX 64

struct husk_volume_info {
  char id[HUSK_VOLUME_ID_MAX];     /* "v_" + 24 hex digits */
  char name[HUSK_VOLUME_NAME_MAX]; /* 1..63 of [a-z0-9-], unique in the tenant */
  uint64_t size;                   /* bytes */
  int64_t created_ms;
  char box_id[HUSK_BOX_ID_MAX]; /* the live box mounting it, or "" */
};

/* Make a volume: an empty ext4 filesystem of `size` bytes (0: the
 * default), its root directory the box user's.  *out may be NULL.
 * Errors: EINVAL (bad name or size), EEXIST (the tenant has a volume of
 * that name), EDQUOT (the tenant has HUSK_VOLUMES_PER_TENANT_MAX), ENOSPC
 * (the data disk), ENOTSUP (mkfs.ext4 is not installed), others (the
 * image could not be made: nothing is left of it). */
HUSK_PUBLIC int husk_volume_create(struct husk_mgr *m, const char *tenant, const char *name,
                                   uint64_t size, struct husk_volume_info *out,
                                   struct husk_err *err);

/* Errors: ENOENT (no such volume, or another tenant's). */
HUSK_PUBLIC int husk_volume_get(struct husk_mgr *m, const char *tenant, const char *name,
                                struct husk_volume_info *out, struct husk_err *err);

/* Call cb for each of the tenant's volumes, by name.  cb returns 0 to go
 * on, > 0 to stop, < 0 to fail (returned as is). */
HUSK_PUBLIC int husk_volume_list(struct husk_mgr *m, const char *tenant,
                                 int (*cb)(void *ctx, const struct husk_volume_info *vi), void *ctx,
                                 struct husk_err *err);

/* Delete a volume and its files.  Errors: ENOENT, EBUSY (a live box
 * mounts it). */
HUSK_PUBLIC int husk_volume_delete(struct husk_mgr *m, const char *tenant, const char *name,
                                   struct husk_err *err);

#endif
