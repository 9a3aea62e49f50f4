/* A box's writable state as one archive: what a filesystem snapshot keeps.
 *
 * A box's writable tmpfs (struct jail's `fs`) holds workspace/, tmp/ and
 * shm/ (its /workspace, /tmp and /dev/shm) and, for a box of an image
 * template, rootfs/upper/: the writable layer of its overlay, with the
 * overlay's own marks (whiteouts: character devices 0:0; opaque
 * directories: the xattr trusted.overlay.opaque).  The archive is a pax
 * tar of those four trees, named "workspace/...", "tmp/...", "shm/..." and
 * "upper/...", compressed with zstd, keeping what a restored box must see
 * again: contents, modes (setuid/setgid dropped), owners relative to the
 * box's uid range (0..65535: the owner inside the box), mtimes, symlinks
 * as symlinks, hardlinks as hardlinks, sparse files with their holes,
 * FIFOs, whiteouts and opaque marks, user.* xattrs.  Sockets, other
 * devices and other xattrs are not kept (counted as skipped).
 *
 * Reading is restoring into a fresh box filesystem, before anything of
 * the box runs and before its overlay is mounted.  The archive is treated
 * as hostile whatever its origin: no entry lands outside the four trees
 * (no "..", no absolute names, no symlink traversed: every parent is
 * opened beneath the box filesystem with symlinks refused), hardlinks name
 * only entries restored before them, devices other than whiteouts (0:0,
 * only under upper/) never reach the disk, owners outside 0..65535 are
 * refused, and what it writes is bounded (bytes of data, entries, name
 * length, depth). */
#ifndef HUSK_BOX_SNAPSHOT_ARCHIVE_H
#define HUSK_BOX_SNAPSHOT_ARCHIVE_H

#include <stdint.h>
#include <sys/types.h>

#include "util/error.h"

/* Deepest directory nesting kept (below a tree's root); deeper entries are
 * skipped when writing and refused when reading. */
#define SNAP_MAX_DEPTH 256

struct snap_stats {
  uint64_t entries; /* written or restored */
  uint64_t bytes;   /* file data (holes not counted) */
  uint64_t skipped; /* left out (writing) or refused (reading): not fatal */
};

/* Write the trees of box filesystem `fs` (a directory fd on its root,
 * owners on the host being uid_base + the owner inside the box) as a
 * zstd-compressed (level `zstd_level`, 1..19) pax tar, through
 * out(ctx, buf, len), which returns 0, or -1 with errno set to abort.
 * A missing rootfs/upper is no error (a box of the default template).
 * A failed stream has no end-of-archive marker.  The caller keeps the box
 * frozen while this runs, so the archive is one point in time.  `st` may
 * be NULL.  Returns 0, or -1 with err filled (EINVAL: a level outside
 * 1..19; the consumer's errno when out() failed). */
int snap_archive_write(int fs, uint32_t uid_base, int zstd_level,
                       int (*out)(void *ctx, const void *buf, size_t len), void *ctx,
                       struct snap_stats *st, struct husk_err *err);

/* Restore an archive read through in(ctx, buf, cap) (bytes read, 0 at the
 * end, -1 with errno) into the fresh box filesystem `fs` (made by the
 * spawner: workspace/, tmp/ and shm/ exist and are empty; rootfs/ does not
 * exist yet and is made, owned by host root, mode 0700, when the archive
 * has upper/ entries; upper/ itself gets the archive's owner and mode).
 * Owners become uid_base + the archived owner.  At most max_bytes of file
 * data and max_entries entries (the box's disk and inode limits; 0: no
 * bound beyond the filesystem's).  Any refused entry fails the whole
 * restore (EINVAL, naming it) except the kinds writing skips too; a
 * truncated or corrupt stream fails it (EIO / EINVAL); ENOSPC stops it.
 * More data or entries than the bounds allow is EFBIG.  A stream without
 * its end-of-archive marker is EIO (a writer that failed leaves none).  A
 * directory named twice keeps the first entry's mode and mtime.  `st` may
 * be NULL.  Returns 0, or -1 with err filled; the caller discards the box
 * filesystem after a failure (what was restored before it stays). */
int snap_archive_read(int fs, uint32_t uid_base, ssize_t (*in)(void *ctx, void *buf, size_t cap),
                      void *ctx, uint64_t max_bytes, uint64_t max_entries, struct snap_stats *st,
                      struct husk_err *err);

/* Restore the archive in file `fd` (read from its start to its end) into
 * `fs` as snap_archive_read does, checking that the file's SHA-256 is
 * `sha256` (hex): a changed, cut or extended archive fails (EBADMSG), and
 * with it the create whose box it was filling. */
int snap_restore_fd(int fs, uint32_t uid_base, int fd, const char *sha256, uint64_t max_bytes,
                    uint64_t max_entries, struct husk_err *err);

#endif
