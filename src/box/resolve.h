/* Resolving a box path to an fd on the box's filesystem, one component at
 * a time, never letting the kernel follow a symlink: how, and why no path
 * can reach the host, is explained at the top of resolve.c.  Private to
 * src/box/ (files.c builds the files API on it). */
#ifndef HUSK_BOX_RESOLVE_H
#define HUSK_BOX_RESOLVE_H

#include <limits.h>
#include <stdbool.h>
#include <sys/stat.h>

#include "husk/files.h"
#include "util/error.h"

/* Tries on a name that keeps changing type under us (a racing box), then
 * EAGAIN. */
#define RESOLVE_MAX_RETRIES 16

/* The box's writable areas: directories at the root of its tmpfs. */
enum box_area { BOX_AREA_WORKSPACE, BOX_AREA_TMP, BOX_AREA_SHM };
/* Where each area is in the box: "/workspace", "/tmp", "/dev/shm". */
extern const char *const box_area_path[];

/* Open one name relative to a directory fd we hold; nothing is followed
 * (O_NOFOLLOW, and openat2 refuses symlinks and mount crossings). */
int resolve_child(int dirfd, const char *name, int flags);
bool resolve_same_inode(const struct stat *a, const struct stat *b);
/* An O_PATH fd of an area's root. */
int resolve_area(const struct husk_fs *b, int area, struct husk_err *err);

/* Open what `path` names, following symlinks the way the box would, with
 * `oflags`; `mkdir` creates the missing directories the path itself names
 * (not those a symlink names). */
int resolve_open(const struct husk_fs *b, const char *path, int oflags, bool mkdir, int *fd_out,
                 struct husk_err *err);

/* A path split into the directory holding its last component and that
 * component, for operations that must not follow the last component. */
struct resolve_target {
  int dir;    /* O_PATH fd of the parent directory, -1 if none */
  int area;   /* >= 0: the path names this area's root itself */
  bool dots;  /* the last component is "." or ".." */
  bool slash; /* the path ended in '/' */
  char name[NAME_MAX + 1];
};
void resolve_target_done(struct resolve_target *t);
#define cleanup_target __attribute__((cleanup(resolve_target_done)))

/* Resolve everything but the last component of `path` (creating missing
 * parents when `mkparents`). */
int resolve_parent(const struct husk_fs *b, const char *path, bool mkparents,
                   struct resolve_target *t, struct husk_err *err);

/* For operations that act on an entry (`op` names them in the message):
 * no area root (EBUSY), no "." or ".." (EINVAL). */
int resolve_need_entry(const struct resolve_target *t, const char *path, const char *op,
                       struct husk_err *err);

/* The caller's path as an absolute box path, for entries' `path`:
 * "a//b/./c/" -> "/workspace/a/b/c" (".." is kept: it is resolved with the
 * same rules when the path is used again).  malloc'd, NULL without memory. */
char *resolve_display_path(const char *path);

#endif
