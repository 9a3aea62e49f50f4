/* The files API of a box: read, write, list, stat, mkdir, move, remove,
 * for `husk serve` (the HTTP front calls these; nothing here knows HTTP).
 *
 * The daemon runs as root and the box's code may be racing it (swapping
 * files for symlinks, RENAME_EXCHANGE loops), so no host path is ever looked
 * up: every operation starts from a directory fd on the box's tmpfs and
 * resolves the box path one component at a time, relative to directories it
 * opened itself, never letting the kernel follow a symlink (O_NOFOLLOW,
 * RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH | RESOLVE_NO_XDEV).
 *
 * Paths mean what they mean inside the box:
 *   "/workspace/a", "/tmp/a", "/dev/shm/a"   the box's writable areas
 *   "a/b.txt"                                 relative to /workspace
 *   anything else ("/etc", "/proc", "/usr")   EACCES: the read-only root is
 *                                             not exposed (its /proc could leak)
 * Symlinks inside the box are followed (for reads, for directories on the way
 * to an entry) the way the box would follow them: an absolute target starts
 * again at the box's "/", so "/workspace/l -> /tmp/x" reaches the box's /tmp
 * and "l -> /etc/passwd" is EACCES; ".." above an area root goes to the box's
 * "/", where only the three areas exist.  So a planted link can never name a
 * host path, and never the box's read-only root either.  The last component
 * of a path that is created, replaced, moved or removed is never followed:
 * writing onto a symlink replaces the symlink.
 *
 * Errors: -1 and `err` filled; err->code is the errno a front maps to a
 * status (ENOENT, EACCES, EEXIST, EISDIR, ENOTDIR, ENOTEMPTY, EINVAL,
 * ENAMETOOLONG, ELOOP, EBUSY for an area root or a tree moved while being
 * removed, EAGAIN for a path the box keeps changing, ECANCELED when a
 * listing's consumer stopped it, ENOSPC when the box is full).
 *
 * Thread-safe: no global state; each call holds its own fds and buffers. */
#ifndef HUSK_BOX_FILES_H
#define HUSK_BOX_FILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "util/error.h"

#define BOX_LIST_MAX_DEPTH 32            /* deepest box_file_list() walk */
#define BOX_LIST_MAX_DEFAULT 100000U     /* entries one listing reports when list_max is 0 */
#define BOX_TMPNAME_MAX 40               /* size for box_file_create()'s tmpname buffer */

struct box_fs {
  int fs;            /* dirfd of the box tmpfs root (holds workspace/, tmp/, shm/) */
  uid_t uid;         /* host ids that everything created through the API belongs to */
  gid_t gid;
  unsigned list_max; /* most entries one box_file_list() reports; 0 = BOX_LIST_MAX_DEFAULT */
};

/* Check a path taken from a request before it becomes a C string: no NUL
 * byte (EINVAL), not empty, shorter than PATH_MAX (ENAMETOOLONG). */
int box_path_check(const char *path, size_t len, struct husk_err *err);

/* Open a regular file for reading; symlinks on the way are followed inside
 * the box.  Directories are EISDIR, FIFOs/sockets/devices EINVAL; the open
 * is non-blocking, so a FIFO (or a lease held by the box) cannot hang the
 * daemon.  *fd_out is a plain blocking O_RDONLY fd, *st_out its fstat. */
int box_file_open_read(const struct box_fs *b, const char *path, int *fd_out, struct stat *st_out,
                       struct husk_err *err);

/* Start writing `path`: returns in *fd_out a new, empty, unnamed file
 * (O_TMPFILE) in the directory that will hold `path`, owned by b->uid/gid,
 * mode `mode & 0777` (never setuid/setgid).  The caller writes the body,
 * then box_file_commit() puts it in place atomically, or box_file_abort()
 * drops it.  The caller owns *fd_out and closes it after commit/abort.
 * `mkparents` creates missing directories (owned by the box's user).
 * `tmpname` (at least BOX_TMPNAME_MAX bytes) receives "" for an O_TMPFILE,
 * or the random name of a visible temp file where O_TMPFILE is unsupported. */
int box_file_create(const struct box_fs *b, const char *path, bool mkparents, mode_t mode,
                    int *fd_out, char *tmpname, size_t tmplen, struct husk_err *err);

/* Put the file written through `fd` at `path`, replacing a file or a symlink
 * there (never writing through it); a directory there is EISDIR.  `path` is
 * resolved again, so the file lands where `path` names now. */
int box_file_commit(const struct box_fs *b, const char *path, int fd, const char *tmpname,
                    struct husk_err *err);

/* Drop an uncommitted file (removes the visible temp file, if any). */
void box_file_abort(const struct box_fs *b, const char *path, int fd, const char *tmpname);

struct box_dirent {
  char *name;        /* last component */
  char *path;        /* box path usable in further calls ("/workspace/a/b") */
  char type;         /* 'f' file, 'd' directory, 'l' symlink, 'o' other */
  uint64_t size;
  mode_t mode;       /* permission bits (07777) */
  int64_t mtime_ms;
  char *link_target; /* symlinks only, else NULL; raw text from the box */
  int depth;         /* 1 = direct child of the listed directory; 0 for stat */
};

/* Walk directory `path` (symlinks are reported, never descended), calling
 * cb for each entry in pre-order, names sorted.  depth 1 = direct children,
 * at most BOX_LIST_MAX_DEPTH.  The strings in the entry live until cb
 * returns.  cb returns 0 to go on, >0 to stop (the listing returns 0), <0 to
 * fail (ECANCELED).  Returns 0, 1 when cut at b->list_max entries, or -1. */
int box_file_list(const struct box_fs *b, const char *path, int depth,
                  int (*cb)(void *ctx, const struct box_dirent *e), void *ctx, struct husk_err *err);

/* lstat semantics: a symlink is reported as a symlink.  *out's strings are
 * allocated; release them with box_dirent_free(). */
int box_file_stat(const struct box_fs *b, const char *path, struct box_dirent *out,
                  struct husk_err *err);
void box_dirent_free(struct box_dirent *e);

/* Create directory `path` (mode 0755, owned by the box's user).  Without
 * `parents` it must not exist (EEXIST); with it, missing parents are made
 * and an existing directory is fine. */
int box_file_mkdir(const struct box_fs *b, const char *path, bool parents, struct husk_err *err);

/* Rename within the box (renameat2 on the last components, both parents
 * resolved in the box); RENAME_NOREPLACE unless `overwrite`.  A symlink is
 * moved (or replaced) as itself. */
int box_file_move(const struct box_fs *b, const char *from, const char *to, bool overwrite,
                  struct husk_err *err);

/* Remove a file, symlink or empty directory; `recursive` removes a whole
 * tree, walking it with fds (unlinkat relative to opened directories,
 * O_NOFOLLOW), never following a symlink, any depth with a constant number
 * of fds.  The area roots themselves cannot be removed (EBUSY). */
int box_file_remove(const struct box_fs *b, const char *path, bool recursive, struct husk_err *err);

/* ---- shared with src/box/tar.c, not for fronts --------------------------- */

/* Open directory `path` of the box (O_RDONLY|O_DIRECTORY), creating it and
 * its parents when `create`. */
int box_open_dir(const struct box_fs *b, const char *path, bool create, int *fd_out,
                 struct husk_err *err);

/* Give `fd` (just created by the daemon) to the box's user, with permission
 * bits `mode` (setuid/setgid are always dropped).  Only an inode the daemon
 * itself owns is changed: if box code swapped something else in, it keeps
 * its owner. */
int box_own_fd(const struct box_fs *b, int fd, mode_t mode, const char *what, struct husk_err *err);

/* mkdirat + open (O_NOFOLLOW) + box_own_fd; EEXIST is not an error.
 * Returns an O_RDONLY|O_DIRECTORY fd of what is at `name` afterwards. */
int box_mkdir_at(const struct box_fs *b, int dirfd, const char *name, mode_t mode, const char *what,
                 struct husk_err *err);

/* A new unnamed file in dirfd (O_TMPFILE, O_RDWR), owned by the box's user. */
int box_tmpfile_at(const struct box_fs *b, int dirfd, mode_t mode, const char *what,
                   struct husk_err *err);

/* Give the unnamed file `fd` (or, with srcdir/srcname, the existing entry
 * there: a hardlink) the name `name` in dirfd, atomically replacing a file or
 * symlink there; a directory there is EISDIR. */
int box_publish_at(int dirfd, const char *name, int fd, int srcdir, const char *srcname,
                   const char *what, struct husk_err *err);

/* Create symlink `name` -> `target` in dirfd, owned by the box's user,
 * atomically replacing a file or symlink there. */
int box_symlink_at(const struct box_fs *b, int dirfd, const char *name, const char *target,
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
