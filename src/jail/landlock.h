/* Landlock for the box: a second, kernel-enforced fence inside the mount
 * namespace.  The root is read+execute only (writable, but for devices,
 * in a box of an image template, whose root is its own layer); /workspace,
 * /tmp and /dev/shm are writable; devices get read/write/ioctl.  On ABI 6+ the box is also
 * scoped: it cannot signal or reach abstract unix sockets of processes
 * outside its domain (its own init included).  Applied best effort by ABI
 * ("where the kernel has it"); on kernels without Landlock it is skipped and
 * reported by landlock_abi() == 0. */
#ifndef HUSK_JAIL_LANDLOCK_H
#define HUSK_JAIL_LANDLOCK_H

#include <stdbool.h>

#include "util/error.h"

/* Landlock ABI version of the running kernel, 0 if unavailable. */
int landlock_abi(void);

/* Restrict the calling thread (no_new_privs must be set).  Call inside the
 * box after pivot_root.  Usable in a freshly cloned child: nothing here
 * allocates (errors are formatted into `err` as privs.h says).  Returns 0
 * (also when Landlock is unavailable) or -1. */
int landlock_apply_box(int abi, bool writable_root, struct husk_err *err);

/* The same in two steps, for a process that restricts many children: build
 * the box's ruleset once (a close-on-exec fd, or -1: with code ENOSYS
 * without Landlock), then restrict each child with it. */
int landlock_box_ruleset(int abi, bool writable_root, struct husk_err *err);
int landlock_restrict(int ruleset, struct husk_err *err);

#endif
