/* The box's filesystem, built inside its new mount namespace and entered
 * with pivot_root.  Runs in the jail's child before any box code exists. */
#ifndef HUSK_JAIL_ROOTFS_H
#define HUSK_JAIL_ROOTFS_H

#include <stddef.h>

/* Detached mounts prepared by the host side (all from one size-limited
 * tmpfs) that become /workspace, /tmp and /dev/shm. */
struct rootfs_mounts {
  int workspace;
  int tmp;
  int shm;
};

/* Build the root under a staging tmpfs, pivot into it, and leave the root
 * read-only.  On failure returns -errno and writes what failed to `what`. */
int rootfs_enter(const struct rootfs_mounts *m, char *what, size_t what_len);

#endif
