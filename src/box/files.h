/* A box's files: the public operations (include/husk/files.h) and the
 * fd-level helpers that the tar streams (tar.c), the tree copy (copy.c)
 * and the box <-> store transfers share with them.  How a box path is
 * resolved without ever following a symlink to the host is explained at
 * the top of resolve.c. */
#ifndef HUSK_BOX_FILES_H
#define HUSK_BOX_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "husk/files.h"
#include "util/error.h"

/* ---- fd-level helpers, not for fronts ----------------------------------- */

/* Open directory `path` of the box (O_RDONLY|O_DIRECTORY), creating it and
 * its parents when `create`. */
int box_open_dir(const struct husk_fs *b, const char *path, bool create, int *fd_out,
                 struct husk_err *err);

/* Give `fd` (just created by the daemon) to the box's user, with permission
 * bits `mode` (setuid/setgid are always dropped).  Only an inode the daemon
 * itself owns is changed: if box code swapped something else in, it keeps
 * its owner. */
int box_own_fd(const struct husk_fs *b, int fd, mode_t mode, const char *what, struct husk_err *err);

/* mkdirat + box_own_fd; EEXIST is not an error (what is there is left as
 * it is). */
int box_make_dir(const struct husk_fs *b, int dirfd, const char *name, mode_t mode,
                 const char *what, struct husk_err *err);

/* mkdirat + open (O_NOFOLLOW) + box_own_fd; EEXIST is not an error.
 * Returns an O_RDONLY|O_DIRECTORY fd of what is at `name` afterwards. */
int box_mkdir_at(const struct husk_fs *b, int dirfd, const char *name, mode_t mode, const char *what,
                 struct husk_err *err);

/* A new unnamed file in dirfd (O_TMPFILE, O_RDWR), owned by the box's user. */
int box_tmpfile_at(const struct husk_fs *b, int dirfd, mode_t mode, const char *what,
                   struct husk_err *err);

/* Give the unnamed file `fd` (or, with srcdir/srcname, the existing entry
 * there: a hardlink) the name `name` in dirfd, atomically replacing a file or
 * symlink there; a directory there is EISDIR. */
int box_publish_at(int dirfd, const char *name, int fd, int srcdir, const char *srcname,
                   const char *what, struct husk_err *err);

/* Create symlink `name` -> `target` in dirfd, owned by the box's user,
 * atomically replacing a file or symlink there. */
int box_symlink_at(const struct husk_fs *b, int dirfd, const char *name, const char *target,
                   const struct timespec *mtime, const char *what, struct husk_err *err);

/* Pre-order walk of the tree under dirfd, no symlink ever followed, names
 * sorted, at most max_depth levels (entries at max_depth are reported, their
 * contents not).  cb returns 0 (descend into a directory), 1 (do not
 * descend), BOX_WALK_STOP, or -1 (err filled by cb). */
#define BOX_WALK_STOP 2
struct box_walk_entry {
  int dirfd;             /* directory holding the entry */
  const char *name;      /* its name there */
  const char *rel;       /* path relative to the walk's root: "a/b/c" */
  const struct stat *st; /* lstat of the entry */
  int depth;             /* 1 = child of the root */
};
int box_tree_walk(int dirfd, int max_depth, int (*cb)(void *ctx, const struct box_walk_entry *e),
                  void *ctx, struct husk_err *err);

#endif
