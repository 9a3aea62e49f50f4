/* A volume's image attached to a box: its ext4 filesystem on a loop
 * device of its own, mounted detached (nosuid, nodev), idmapped onto the
 * box's uid range, as a mount fd the box's init moves onto its place
 * under /workspace (spawn.c).
 *
 * The loop device is set up with LO_FLAGS_AUTOCLEAR: it is released when
 * the filesystem is unmounted, which happens when the box's mount
 * namespace goes (the box's end, or its pause to disk).  Nothing of it is
 * left to clean up after a crash of the daemon: the box keeps its mount,
 * and its end frees it.
 *
 * Runs in a creator that is root in the initial user namespace (the
 * daemon's spawner). */
#ifndef HUSK_JAIL_VOLUME_MOUNT_H
#define HUSK_JAIL_VOLUME_MOUNT_H

#include <stdbool.h>
#include <stdint.h>

#include "util/error.h"

/* Mount the ext4 image behind `image` (a regular file opened O_RDWR, or
 * O_RDONLY for `read_only`), idmapped with user namespace `userns`
 * (rootfs_image_userns of the box's base).  Returns the detached mount's
 * fd.  EBUSY: a loop device still holds the image (a box that had it is
 * still going away). */
int volume_mount_make(int image, bool read_only, int userns, struct husk_err *err);

/* In the box's workspace directory `ws` (a directory fd on its tmpfs),
 * make the directories of `path` (relative, normalized, no "..") that are
 * missing, owned by host uid/gid `owner`, refusing anything that is not a
 * directory (a symlink a restored snapshot left there).  Returns 0. */
int volume_mount_point(int ws, const char *path, uint32_t owner, struct husk_err *err);

#endif
