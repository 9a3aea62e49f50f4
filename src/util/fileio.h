/* Small whole-file helpers for kernel interface files (cgroup, /proc). */
#ifndef HUSK_UTIL_FILEIO_H
#define HUSK_UTIL_FILEIO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/error.h"

/* Write `s` to dirfd/name (no O_CREAT).  Returns 0, or -1 with errno. */
int write_file_at(int dirfd, const char *name, const char *s);

/* mkdir -p `path` (absolute or relative to the cwd) with `mode`.  Uses only
 * the stack: safe between fork and exec.  Returns 0, or -1 with errno
 * (ENAMETOOLONG: `path` does not fit PATH_MAX; ENOENT: it is empty). */
int mkdir_p(const char *path, mode_t mode);

/* mkdir -p with mode 0700 for what it creates, for a daemon's data
 * directory (database, keys): it must end up a directory of ours that
 * others cannot write.  -1 with err filled otherwise. */
int mkdir_private(const char *dir, struct husk_err *err);

/* Read up to size-1 bytes of dirfd/name into buf and NUL-terminate.
 * Returns the length, or -1 with errno. */
ssize_t read_file_at(int dirfd, const char *name, char *buf, size_t size);

/* write() all of buf, retrying on EINTR and short writes. */
int write_all(int fd, const void *buf, size_t len);
/* Write a data block at offset `off` of a fresh (all-zero) file: pages of
 * zeros are not written, so gaps between blocks and zeros inside them
 * stay holes (an archive made without --sparse stores holes as zeros).
 * -1 with errno. */
int write_block_sparse(int fd, const char *buf, size_t size, int64_t off);

/* Numeric fields of /proc/PID/stat (pid 0: self), numbered as in proc(5):
 * v[k] is field k for 3 <= k < n (fields after the command name, which
 * may itself hold spaces and parentheses); others are 0.  Stack only.
 * Returns 0, or -1 with errno (EIO: not the shape of a stat file). */
int proc_stat_fields(pid_t pid, unsigned long long *v, int n);

#endif
