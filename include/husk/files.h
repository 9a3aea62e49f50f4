/* husk: files of a running box: read, write, list, stat, mkdir, move,
 * remove, and whole trees as tar streams.
 *
 * The box's programs may be racing these calls (swapping files for
 * symlinks, renaming directories in loops), so no host path is ever looked
 * up: every operation starts from a directory fd on the box's filesystem
 * and resolves the box path one component at a time, never letting the
 * kernel follow a symlink.
 *
 * Paths mean what they mean inside the box:
 *   "/workspace/a", "/tmp/a", "/dev/shm/a"   the box's writable areas
 *   "a/b.txt"                                 relative to /workspace
 *   anything else ("/etc", "/proc", "/usr")   EACCES: the read-only root is
 *                                             not exposed
 * Symlinks inside the box are followed (for reads, for directories on the
 * way to an entry) the way the box would follow them: an absolute target
 * starts again at the box's "/", so a planted link can never name a host
 * path, nor the box's read-only root.  The last component of a path that
 * is created, replaced, moved or removed is never followed: writing onto a
 * symlink replaces the symlink.
 *
 * Errors: -1 and err filled; err->code is ENOENT, EACCES, EEXIST, EISDIR,
 * ENOTDIR, ENOTEMPTY, EINVAL, ENAMETOOLONG, ELOOP, EBUSY (an area root, or
 * a tree moved while it was removed), EAGAIN (a path the box keeps
 * changing), ENOSPC (the box's disk is full), ECANCELED (a callback
 * stopped the call).  Every call that takes a path fails as its resolution
 * does -- EINVAL (empty, or a NUL byte), ENAMETOOLONG, EACCES (outside the
 * writable areas), ENOENT (a missing directory on the way), ENOTDIR (a
 * file on the way), ELOOP (too many symlinks), EAGAIN -- and each
 * function's Errors line adds its own; any other code is the errno of the
 * system call that failed.
 *
 * Thread-safe: no global state; each call holds its own fds and buffers. */
#ifndef HUSK_FILES_H
#define HUSK_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "husk/base.h"
#include "husk/manager.h"

#define HUSK_LIST_MAX_DEPTH 32        /* deepest husk_file_list() walk */
#define HUSK_LIST_MAX_DEFAULT 100000U /* entries one listing reports when list_max is 0 */
#define HUSK_TMPNAME_MAX 40           /* size of husk_file_create()'s tmpname buffer */
#define HUSK_TAR_MAX_DEPTH 256        /* directory levels a tar stream holds */

/* A box's filesystem, borrowed: the fields are the caller's to read; close
 * it with husk_fs_close. */
struct husk_fs {
  int fs;            /* directory fd of the box's writable filesystem */
  uid_t uid;         /* host ids that everything created through these calls belongs to */
  gid_t gid;
  unsigned list_max; /* most entries one husk_file_list() reports; 0: HUSK_LIST_MAX_DEFAULT */
};

/* Borrow a running box's filesystem (it stays usable after the box ends,
 * until closed).  Errors: ENOENT, EBUSY (not running). */
HUSK_PUBLIC int husk_box_open_fs(struct husk_mgr *m, const char *tenant, const char *id,
                                 struct husk_fs *out, struct husk_err *err);

/* Close what husk_box_open_fs opened; a zeroed struct with fs -1 is fine. */
HUSK_PUBLIC void husk_fs_close(struct husk_fs *b);

/* Check a path taken from outside before it becomes a C string of len
 * bytes: no NUL byte (EINVAL), not empty, shorter than PATH_MAX
 * (ENAMETOOLONG). */
HUSK_PUBLIC int husk_path_check(const char *path, size_t len, struct husk_err *err);

/* Open a regular file for reading (symlinks on the way followed in the
 * box).  A directory is EISDIR, FIFOs, sockets and devices EINVAL; the
 * open cannot hang on a FIFO.  *fd_out is a blocking O_RDONLY fd the caller
 * closes, *st_out its fstat.  The box may change the file while it is
 * read: a reader must not trust st_out->st_size to stay true. */
HUSK_PUBLIC int husk_file_open_read(const struct husk_fs *b, const char *path, int *fd_out,
                                    struct stat *st_out, struct husk_err *err);

/* Open an existing regular file for writing in place (symlinks on the way
 * followed in the box), at its end with `append`; the caller writes with
 * pwrite (or write, appending) and closes *fd_out.  The file keeps its
 * owner and mode; the box may read or change it meanwhile.  Errors as
 * husk_file_open_read's (ENOENT: no such file). */
HUSK_PUBLIC int husk_file_open_write(const struct husk_fs *b, const char *path, bool append,
                                     int *fd_out, struct stat *st_out, struct husk_err *err);

/* Start writing `path`: *fd_out is a new, empty, unnamed file in the
 * directory that will hold `path`, owned by the box's user, mode
 * `mode & 0777`.  Write the body to it, then husk_file_commit() puts it in
 * place atomically or husk_file_abort() drops it; the caller closes *fd_out
 * afterwards.  `mkparents` creates missing directories.  `tmpname`
 * (HUSK_TMPNAME_MAX bytes) receives what commit and abort need.
 * Errors: EISDIR (`path` is an area root, ends in "/", or is a directory),
 * EINVAL (it ends in "." or "..", or the filesystem has no O_TMPFILE and
 * `tmplen` is below HUSK_TMPNAME_MAX), ENOTDIR (with `mkparents`: a parent
 * exists and is not a directory), ENOSPC. */
HUSK_PUBLIC int husk_file_create(const struct husk_fs *b, const char *path, bool mkparents,
                                 mode_t mode, int *fd_out, char *tmpname, size_t tmplen,
                                 struct husk_err *err);

/* Put the file written through `fd` at `path` (resolved again), replacing
 * a file or symlink there, never writing through it.
 * Errors: EISDIR (a directory is there, or `path` names one as create
 * refuses it), EINVAL (it ends in "." or ".."), ENOENT (its directory was
 * removed since create), ENOSPC.  The file is not in place after a
 * failure; husk_file_abort drops it. */
HUSK_PUBLIC int husk_file_commit(const struct husk_fs *b, const char *path, int fd,
                                 const char *tmpname, struct husk_err *err);

/* Drop a file that husk_file_create started and was not committed. */
HUSK_PUBLIC void husk_file_abort(const struct husk_fs *b, const char *path, int fd,
                                 const char *tmpname);

/* One entry of a listing, or a stat. */
struct husk_dirent {
  char *name;        /* last component */
  char *path;        /* box path usable in further calls ("/workspace/a/b") */
  char type;         /* 'f' file, 'd' directory, 'l' symlink, 'o' other */
  uint64_t size;
  mode_t mode;       /* permission bits (07777) */
  int64_t mtime_ms;
  char *link_target; /* symlinks only, else NULL: raw bytes from the box */
  int depth;         /* 1 = direct child of the listed directory; 0 for a stat */
};

/* Walk directory `path` in pre-order, names sorted, symlinks reported and
 * never descended, `depth` levels (1: direct children; at most
 * HUSK_LIST_MAX_DEPTH), calling cb for each entry (its strings live until
 * cb returns).  cb returns 0 to go on, > 0 to stop (the listing returns 0),
 * < 0 to fail (ECANCELED).  Returns 0, 1 when cut at b->list_max entries,
 * or -1. */
HUSK_PUBLIC int husk_file_list(const struct husk_fs *b, const char *path, int depth,
                               int (*cb)(void *ctx, const struct husk_dirent *e), void *ctx,
                               struct husk_err *err);

/* lstat semantics: a symlink is reported as one.  Release *out's strings
 * with husk_dirent_free (*out is zeroed on failure).
 * Errors: ENOENT (nothing at `path`), ENOMEM. */
HUSK_PUBLIC int husk_file_stat(const struct husk_fs *b, const char *path, struct husk_dirent *out,
                               struct husk_err *err);
HUSK_PUBLIC void husk_dirent_free(struct husk_dirent *e);

/* Create directory `path` (mode 0755, the box user's).  Without `parents`
 * it must not exist; with it, missing parents are made and an existing
 * directory is fine.
 * Errors: EEXIST (without `parents`: something is at `path`, an area root
 * included), ENOENT (without `parents`: its parent is missing), ENOTDIR
 * (with `parents`: it or a parent exists and is not a directory), EINVAL
 * (without `parents`: it ends in "." or ".."), ENOSPC. */
HUSK_PUBLIC int husk_file_mkdir(const struct husk_fs *b, const char *path, bool parents,
                                struct husk_err *err);

/* Rename within the box; an existing `to` is refused unless `overwrite`.
 * A symlink is moved (or replaced) as itself.
 * Errors: ENOENT (no `from`), EEXIST (`to` exists and not `overwrite`),
 * ENOTEMPTY (`to` is a directory that is not empty), EBUSY (either is an
 * area root), EINVAL (either ends in "." or "..", or `to` is inside
 * `from`), EISDIR / ENOTDIR (a file onto a directory, or the reverse). */
HUSK_PUBLIC int husk_file_move(const struct husk_fs *b, const char *from, const char *to,
                               bool overwrite, struct husk_err *err);

/* Remove a file, symlink or empty directory; `recursive` removes a whole
 * tree (any depth, a constant number of fds, never following a symlink).
 * Errors: ENOENT (nothing at `path`), ENOTEMPTY (a directory that is not
 * empty, without `recursive`), EBUSY (an area root; with `recursive`, a
 * tree the box moved or kept changing while it was removed: part of it
 * may be gone), ELOOP (deeper than the removal follows), EINVAL (it ends
 * in "." or ".."). */
HUSK_PUBLIC int husk_file_remove(const struct husk_fs *b, const char *path, bool recursive,
                                 struct husk_err *err);

/* Write directory `path` of the box as a tar stream (pax; plain ustar
 * headers when they suffice) through out(ctx, buf, len), which returns 0,
 * or -1 with errno to abort.  Names are relative to `path`; symlinks,
 * hardlinks and sparse files are kept as such; owners are written as 0/0
 * and setuid/setgid bits dropped.  FIFOs, sockets, devices, files that
 * change type while read or exceed 16 TiB, and what lies deeper than
 * HUSK_TAR_MAX_DEPTH are skipped.  A failed stream has no end-of-archive
 * marker, so it cannot pass for a whole one.
 * Returns the number of entries skipped, or -1. */
HUSK_PUBLIC int husk_tar_write(const struct husk_fs *b, const char *path,
                               int (*out)(void *ctx, const void *buf, size_t len), void *ctx,
                               struct husk_err *err);

/* Extract a tar stream (optionally gzip-compressed), read through
 * in(ctx, buf, cap) (bytes read, 0 at the end, -1 with errno), into
 * directory `path` of the box, created if missing.  Hostile archives are
 * expected: names are taken relative to `path` ("/" stripped, entries with
 * ".." skipped), no symlink is ever traversed, hardlinks must point inside
 * `path`, files replace what had their name without writing through it,
 * everything belongs to the box's user, and setuid/setgid bits and device,
 * FIFO and socket entries never reach the disk.  ENOSPC stops it.
 * Returns the number of entries skipped, or -1. */
HUSK_PUBLIC int husk_tar_read(const struct husk_fs *b, const char *path,
                              ssize_t (*in)(void *ctx, void *buf, size_t cap), void *ctx,
                              struct husk_err *err);

#endif
