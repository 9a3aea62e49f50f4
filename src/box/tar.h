/* Directory trees of a box as tar streams (upload and download for
 * `husk serve`).
 *
 * libarchive is used only for the format: headers and data blocks to and
 * from a stream through callbacks.  Every filesystem access is ours, through
 * fds (src/box/files.c), never archive_write_disk: an archive is data from
 * the outside world and the tree is data from the box, and neither gets to
 * choose a path on the host. */
#ifndef HUSK_BOX_TAR_H
#define HUSK_BOX_TAR_H

#include <stddef.h>
#include <sys/types.h>

#include "box/files.h"
#include "util/error.h"

#define BOX_TAR_MAX_DEPTH 256 /* directory levels archived (one fd each while walking) */

/* Write directory `path` of the box as a tar stream (pax; plain ustar
 * headers when they suffice), calling out(ctx, buf, len) for each chunk;
 * out returns 0, or -1 (with errno) to abort.  Entry names are relative to
 * `path` ("a/b.txt", "dir/").  Symlinks are archived as symlinks, hardlinks
 * as hardlinks, sparse files as sparse files; owners are written as 0/0 and
 * setuid/setgid bits dropped (what comes out of a box must not carry
 * privileges).  Skipped (and counted): FIFOs, sockets and devices, files
 * that change type under us or are larger than 16 TiB, and the contents of
 * each directory at depth BOX_TAR_MAX_DEPTH (the directory itself is
 * archived and counted once).  On failure no end-of-archive marker is written, so a
 * consumer cannot mistake a truncated stream for a complete one.
 * Returns the number of entries skipped, or -1. */
int box_tar_write(const struct box_fs *b, const char *path,
                  int (*out)(void *ctx, const void *buf, size_t len), void *ctx, struct husk_err *err);

/* Extract a tar stream (optionally gzip-compressed) into directory `path`
 * of the box, created if missing.  Input comes from in(ctx, buf, cap): bytes
 * read, 0 at end, -1 (with errno) on error.
 *
 * Hostile archives are expected.  Names are taken relative to `path`:
 * leading "/" is stripped, entries with a ".." component are skipped.  Each
 * entry's parent is resolved beneath `path` with RESOLVE_NO_SYMLINKS, so a
 * symlink (the archive's own, or one the box planted) is never traversed:
 * "link -> /etc" then "link/passwd" skips the second entry.  Hardlinks must
 * point at an entry already under `path` (resolved the same way).  Files
 * are written to an unnamed temp file and then renamed over whatever file
 * or symlink had the name (never written through it); an existing directory
 * is kept (merged into).  Everything belongs to b->uid/gid; setuid, setgid
 * and device/FIFO/socket entries never reach the disk.  ENOSPC (space or
 * inodes) stops the extraction with err->code ENOSPC.
 * Returns the number of entries skipped, or -1. */
int box_tar_read(const struct box_fs *b, const char *path,
                 ssize_t (*in)(void *ctx, void *buf, size_t cap), void *ctx, struct husk_err *err);

#endif
