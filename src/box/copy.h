/* Copying directory trees between the host and a box, through file
 * descriptors only.  Nothing is ever looked up by a path that crosses a
 * symlink: the walk opens each entry relative to its parent with O_NOFOLLOW,
 * symlinks are recreated as symlinks (never followed), special files are
 * skipped, hardlinks stay hardlinks (so a hardlink farm cannot multiply
 * its size), sparse files stay sparse, and each new entry is created with
 * O_EXCL in a directory we opened ourselves, so nothing lands outside the
 * destination. */
#ifndef HUSK_BOX_COPY_H
#define HUSK_BOX_COPY_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/error.h"

struct copy_opts {
  uid_t uid;         /* owner for created entries, (uid_t)-1 to leave as is */
  gid_t gid;
  bool keep_owner;   /* with uid (uid_t)-1: each entry gets its source's owner */
  unsigned max_depth;
  /* Called for each entry that is skipped (special file, too deep, cannot
   * be replaced); `why` is a short reason.  May be NULL. */
  void (*skipped)(void *ctx, const char *relpath, const char *why);
  void *ctx;
};

struct copy_stats {
  uint64_t files, dirs, symlinks, hardlinks, skipped, bytes;
};

/* Copy the contents of directory src_dir into directory dst_dir (both fds).
 * Existing entries in dst are replaced (directories are merged). */
int copy_tree(int src_dir, int dst_dir, const struct copy_opts *opts, struct copy_stats *st,
              struct husk_err *err);

#endif
