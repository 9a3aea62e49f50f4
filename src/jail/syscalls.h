/* Thin wrappers for the kernel interfaces glibc 2.36 does not wrap, and the
 * constants its headers predate.  Nothing here decides anything. */
#ifndef HUSK_JAIL_SYSCALLS_H
#define HUSK_JAIL_SYSCALLS_H

#include <linux/landlock.h>
#include <linux/openat2.h>
#include <linux/sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

static inline long sys_clone3(struct clone_args *args) {
  return syscall(SYS_clone3, args, sizeof *args);
}

static inline int sys_openat2(int dirfd, const char *path, uint64_t flags, uint64_t mode,
                              uint64_t resolve) {
  struct open_how how = {.flags = flags, .mode = mode, .resolve = resolve};
  return (int)syscall(SYS_openat2, dirfd, path, &how, sizeof how);
}

static inline int sys_pidfd_send_signal(int pidfd, int sig) {
  return (int)syscall(SYS_pidfd_send_signal, pidfd, sig, NULL, 0);
}

static inline int sys_pivot_root(const char *new_root, const char *put_old) {
  return (int)syscall(SYS_pivot_root, new_root, put_old);
}

#ifndef CLOSE_RANGE_CLOEXEC
#define CLOSE_RANGE_CLOEXEC (1U << 2)
#endif
static inline int sys_close_range(unsigned first, unsigned last, unsigned flags) {
  return (int)syscall(SYS_close_range, first, last, flags);
}

/* Landlock (ABI numbers in src/jail/landlock.c). */
#ifndef LANDLOCK_ACCESS_FS_REFER
#define LANDLOCK_ACCESS_FS_REFER (1ULL << 13)
#endif
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif
#ifndef LANDLOCK_CREATE_RULESET_VERSION
#define LANDLOCK_CREATE_RULESET_VERSION (1U << 0)
#endif
#define HUSK_LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1ULL << 0)
#define HUSK_LANDLOCK_SCOPE_SIGNAL (1ULL << 1)

/* The ABI-6 ruleset attribute layout (handled_access_net and scoped were
 * appended to the v1 struct; the kernel takes the size we pass). */
struct husk_landlock_ruleset_attr {
  uint64_t handled_access_fs;
  uint64_t handled_access_net;
  uint64_t scoped;
};

static inline int sys_landlock_create_ruleset(const void *attr, size_t size, uint32_t flags) {
  return (int)syscall(SYS_landlock_create_ruleset, attr, size, flags);
}
static inline int sys_landlock_add_rule(int fd, int type, const void *attr, uint32_t flags) {
  return (int)syscall(SYS_landlock_add_rule, fd, type, attr, flags);
}
static inline int sys_landlock_restrict_self(int fd, uint32_t flags) {
  return (int)syscall(SYS_landlock_restrict_self, fd, flags);
}

#endif
