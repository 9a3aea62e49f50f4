/* The box's filesystem, built inside its new mount namespace and entered
 * with pivot_root.  Runs in the jail's child before any box code exists:
 * nothing here allocates (errors are formatted into `err` as privs.h
 * says).  Every function returns 0 (or an fd), or -1 with `err` saying
 * what failed on which path, and why. */
#ifndef HUSK_JAIL_ROOTFS_H
#define HUSK_JAIL_ROOTFS_H

#include <stdbool.h>
#include <stddef.h>

#include "util/error.h"

/* Detached mounts prepared by the host side (all from one size-limited
 * tmpfs) that become /workspace, /tmp and /dev/shm. */
struct rootfs_mounts {
  int workspace;
  int tmp;
  int shm;
  int dev; /* the box's /dev (rootfs_dev_make), or -1; unused with a prepared root */
  bool root_writable; /* an image box's root (its own layer): not made read-only */
};

/* A box's own /dev as a detached mount: a tiny read-only tmpfs with the
 * six devices (null, zero, full, random, urandom, tty) made for it, the
 * mount points of devpts and /dev/shm, the usual links.  Returns its fd,
 * or -1 (err->code EPERM where device nodes cannot be made: not root in the
 * initial user namespace). */
int rootfs_dev_make(struct husk_err *err);

/* Build the part of the root every box shares (the skeleton, the
 * generated /etc, copies of the host's /etc files) once, on a tmpfs
 * mounted at `dir`, and make it read-only.  For a process that creates
 * many boxes, in a mount namespace of its own (the mount stays there).
 * On failure nothing stays mounted. */
int rootfs_prepare(const char *dir, struct husk_err *err);

/* One box's view of the root prepared at `dir`, mounted at `at` (a path
 * under `dir`, written there, for rootfs_enter()): a read-only overlay of
 * the prepared tree, with overlays of /usr and the host's /etc
 * directories and a /dev of its own (rootfs_dev_make), so that the box sees the shared
 * files through inodes of its own (inotify watches on them see only what
 * the box itself does).  The box's mount namespace, cloned while it is
 * there, keeps it (locked, as the copy of a more privileged namespace's
 * mounts); rootfs_instance_drop(at) then takes it off again.  On failure
 * nothing stays mounted. */
int rootfs_instance(const char *dir, char *at, size_t at_len, struct husk_err *err);
int rootfs_instance_drop(const char *at, struct husk_err *err);

/* Whether the host entries the last rootfs_prepare() mirrored (/etc files,
 * /bin links...) are still the same files, and the files it copied still
 * the same size and modification time.  When not, the creator prepares
 * again, so that a new box never gets the old content of a file the host
 * replaced or edited (a package update). */
bool rootfs_prepared_current(void);

/* Build the root, pivot into it, and leave the root read-only: from
 * `prepared` (a rootfs_prepare() directory visible in this mount
 * namespace) or, when it is NULL, from scratch under a staging tmpfs. */
int rootfs_enter(const struct rootfs_mounts *m, const char *prepared, struct husk_err *err);

#endif
