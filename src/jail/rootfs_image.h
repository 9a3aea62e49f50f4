/* The root of a box of an image template: the image's layers, read-only
 * and shared by every box of the template, under a writable layer of the
 * box's own, as one overlay mount.
 *
 *   layers     each layer's tree (DATA/templates/layers/<id>/root),
 *              cloned and idmapped onto the box's uid range, so that a
 *              file the image gives to root is the box's root's, and one
 *              it gives to uid 1000 is the box's uid 1000's
 *   upper      rootfs/upper and rootfs/work on the box's own tmpfs (the
 *              one behind /workspace and /tmp): what the box writes to
 *              its root counts against its --disk and goes with it
 *
 * husk's parts go on top as for every box: /workspace, /tmp, /proc, a
 * /dev of its own, /dev/shm; and /etc/hosts, /etc/hostname and
 * /etc/resolv.conf are husk's (written into the box's layer: the box may
 * change its copy).  The image's /etc/passwd and /etc/group are the box's.
 *
 * Runs in a creator that is root in the initial user namespace, in a
 * private mount namespace of its own (the daemon's spawner; husk run). */
#ifndef HUSK_JAIL_ROOTFS_IMAGE_H
#define HUSK_JAIL_ROOTFS_IMAGE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/error.h"

struct rootfs_image {
  size_t nlayers;
  const int *layers; /* O_PATH directory fds of the layers' trees, top first */
  int boxfs;         /* the box's tmpfs (its root directory) */
  uint32_t uid_base; /* host uid (and gid) of the box's uid 0 */
  uint32_t owner;    /* box uid that owns /workspace and /tmp when they are made */
};

/* Mount the box's root at `scratch`/root (`scratch`: an empty directory of
 * this mount namespace; a tmpfs is mounted on it for the layers' mount
 * points) and write its path to `at`.  On failure nothing stays mounted. */
int rootfs_image_view(const struct rootfs_image *im, const char *scratch, char *at, size_t at_len,
                      struct husk_err *err);

/* Take the view off `scratch` again (the box's namespace, copied while it
 * was there, keeps its own). */
int rootfs_image_drop(const char *scratch, struct husk_err *err);

/* A user namespace with a box's map (0 -> base, 65536 ids), for
 * MOUNT_ATTR_IDMAP of a mount the box is to see with its own ids (the
 * layers here, volumes in volume_mount.c).  Returns its fd. */
int rootfs_image_userns(uint32_t base, struct husk_err *err);

#endif
