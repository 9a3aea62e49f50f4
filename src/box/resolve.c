/* Resolving a box path to an fd on the box's filesystem (see resolve.h).
 *
 * How a box path is resolved, and why it cannot reach the host:
 *
 *   The walk keeps one current node: the box's "/" or "/dev" (virtual: they
 *   live in the box's read-only root, which is not exposed, so only the
 *   names of the areas exist there), or a directory fd on the box tmpfs.
 *   Each component is opened relative to the current directory fd with
 *   openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV) and
 *   O_NOFOLLOW: a single name, so the kernel never follows anything.  A
 *   symlink is read (readlinkat on an O_PATH fd of that very link) and its
 *   text spliced in front of the rest of the path, as the kernel would do in
 *   the box: an absolute target restarts at the box's "/".  ".." opens the
 *   parent of the current directory fd; if that parent is the tmpfs root,
 *   the current directory was an area root and the walk continues at the
 *   box's "/" (or "/dev" from /dev/shm) instead.
 *
 *   Invariant: every fd the walk holds is an area root or was reached from
 *   one by these steps, so it is inside an area.  The tmpfs root itself is
 *   never held, never listed and never the parent of anything created,
 *   moved or removed; the area roots cannot be moved or removed (by us:
 *   EBUSY; by the box: they are its mount points).  So a racing box can
 *   steer a walk only to somewhere else inside its own areas.
 *
 * The last component of a path that is created, replaced, moved or removed
 * is never followed: those operate with *at() calls on (parent fd, name). */
#define _GNU_SOURCE
#include "box/resolve.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "box/files.h"
#include "jail/syscalls.h"
#include "util/cleanup.h"

static const char *const box_area_dir[] = {"workspace", "tmp", "shm"};  /* in the box tmpfs */
const char *const box_area_path[] = {"/workspace", "/tmp", "/dev/shm"}; /* in the box */

#define MAX_SYMLINKS 40            /* the kernel's MAXSYMLINKS */
#define PENDING_MAX (4 * PATH_MAX) /* path text left to walk, after symlink splicing */

static const char only_areas[] =
    "only /workspace, /tmp and /dev/shm are reachable through the files API";

/* One name, relative to a directory we hold; nothing is ever followed. */
int resolve_child(int dirfd, const char *name, int flags) {
  return sys_openat2(dirfd, name, (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC), 0,
                     RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
                         RESOLVE_NO_XDEV);
}

bool resolve_same_inode(const struct stat *a, const struct stat *b) {
  return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

int resolve_area(const struct husk_fs *b, int area, struct husk_err *err) {
  int fd = resolve_child(b->fs, box_area_dir[area], O_PATH | O_DIRECTORY);
  if (fd < 0)
    return husk_error(err, errno, "cannot open the box's `%s`", box_area_path[area]);
  return fd;
}

int husk_path_check(const char *path, size_t len, struct husk_err *err) {
  if (!path || len == 0)
    return husk_fail(err, EINVAL, "empty path");
  if (memchr(path, '\0', len))
    return husk_fail(err, EINVAL, "path contains a NUL byte");
  if (len >= PATH_MAX)
    return husk_fail(err, ENAMETOOLONG, "path longer than %d bytes", PATH_MAX - 1);
  return 0;
}

static int check_cpath(const char *path, struct husk_err *err) {
  if (!path || !*path)
    return husk_fail(err, EINVAL, "empty path");
  if (strnlen(path, PATH_MAX) >= PATH_MAX)
    return husk_fail(err, ENAMETOOLONG, "path longer than %d bytes", PATH_MAX - 1);
  return 0;
}
/* ---- the walk ------------------------------------------------------------ */

enum node_kind { NODE_ROOT, NODE_DEV, NODE_DIR };

struct walk {
  const struct husk_fs *b;
  const char *orig; /* the caller's path, for messages */
  struct husk_err *err;
  struct stat root; /* identity of the tmpfs root */
  enum node_kind kind;
  int fd;        /* the current directory when kind == NODE_DIR */
  bool mkdir;    /* create missing directories the caller's path names */
  unsigned hops; /* symlinks followed */
  char *buf;     /* path text still to walk */
  size_t len, pos;
  size_t link_end; /* buf[0, link_end) came from symlink targets */
};

static void walk_done(struct walk *w) {
  free(w->buf);
  w->buf = NULL;
  close_quiet(w->fd);
  w->fd = -1;
}
#define cleanup_walk __attribute__((cleanup(walk_done)))

static void set_node(struct walk *w, enum node_kind kind, int fd) {
  close_quiet(w->fd);
  w->kind = kind;
  w->fd = fd;
}

/* Start a walk of `text` (a whole path or a prefix of one): absolute paths
 * start at the box's "/", relative ones at /workspace. */
static int walk_init(struct walk *w, const struct husk_fs *b, const char *orig, const char *text,
                     struct husk_err *err) {
  *w = (struct walk){.b = b, .orig = orig, .err = err, .kind = NODE_ROOT, .fd = -1};
  if (fstat(b->fs, &w->root) < 0)
    return husk_error(err, errno, "cannot inspect the box filesystem");
  size_t n = strlen(text);
  if (n >= PATH_MAX)
    return husk_fail(err, ENAMETOOLONG, "path longer than %d bytes", PATH_MAX - 1);
  if (!(w->buf = malloc(PENDING_MAX + 1)))
    return husk_error(err, ENOMEM, "path buffer");
  memcpy(w->buf, text, n + 1);
  w->len = n;
  if (text[0] != '/') {
    int fd = resolve_area(b, BOX_AREA_WORKSPACE, err);
    if (fd < 0)
      return -1;
    set_node(w, NODE_DIR, fd);
  }
  return 0;
}

/* Next component into comp; 0 at the end of the text, -1 on error. */
static int next_comp(struct walk *w, char comp[NAME_MAX + 1], bool *last, bool *from_link) {
  while (w->pos < w->len && w->buf[w->pos] == '/')
    w->pos++;
  if (w->pos >= w->len)
    return 0;
  size_t start = w->pos;
  while (w->pos < w->len && w->buf[w->pos] != '/')
    w->pos++;
  size_t n = w->pos - start;
  if (n > NAME_MAX)
    return husk_fail(w->err, ENAMETOOLONG, "`%s`: a path component is longer than %d bytes",
                     w->orig, NAME_MAX);
  memcpy(comp, w->buf + start, n);
  comp[n] = '\0';
  *from_link = start < w->link_end;
  size_t q = w->pos;
  while (q < w->len && w->buf[q] == '/')
    q++;
  *last = q >= w->len;
  return 1;
}

/* Splice the target of the symlink `lfd` in front of what is left. */
static int follow_link(struct walk *w, int lfd) {
  if (++w->hops > MAX_SYMLINKS)
    return husk_fail(w->err, ELOOP, "`%s`: too many levels of symbolic links", w->orig);
  char target[PATH_MAX];
  ssize_t n = readlinkat(lfd, "", target, sizeof target);
  if (n < 0)
    return husk_error(w->err, errno, "cannot read a symlink in `%s`", w->orig);
  if (n == 0)
    return husk_fail(w->err, ENOENT, "`%s`: a symlink on the way is empty", w->orig);
  if ((size_t)n >= sizeof target)
    return husk_fail(w->err, ENAMETOOLONG, "`%s`: a symlink on the way is too long", w->orig);
  size_t rest = w->len - w->pos;
  size_t link_rest = w->link_end > w->pos ? w->link_end - w->pos : 0;
  if ((size_t)n + 1 + rest > PENDING_MAX)
    return husk_fail(w->err, ENAMETOOLONG, "`%s`: path too long after following symlinks", w->orig);
  memmove(w->buf + n + 1, w->buf + w->pos, rest);
  memcpy(w->buf, target, (size_t)n);
  w->buf[n] = '/';
  w->len = (size_t)n + 1 + rest;
  w->buf[w->len] = '\0';
  w->pos = 0;
  w->link_end = (size_t)n + 1 + link_rest;
  if (target[0] == '/')
    set_node(w, NODE_ROOT, -1);
  return 0;
}

static int step_dotdot(struct walk *w) {
  if (w->kind != NODE_DIR) {
    set_node(w, NODE_ROOT, -1); /* "/.." is "/", "/dev/.." is "/" */
    return 0;
  }
  int up = sys_openat2(w->fd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC, 0,
                       RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV);
  if (up < 0)
    return husk_error(w->err, errno, "cannot resolve `..` in `%s`", w->orig);
  struct stat st;
  if (fstat(up, &st) < 0) {
    close_quiet(up);
    return husk_error(w->err, errno, "cannot resolve `..` in `%s`", w->orig);
  }
  if (!resolve_same_inode(&st, &w->root)) {
    set_node(w, NODE_DIR, up);
    return 0;
  }
  /* We were at an area root: in the box its parent is "/" (or /dev). */
  close_quiet(up);
  struct stat cur, shm;
  bool is_shm = fstat(w->fd, &cur) == 0 &&
                fstatat(w->b->fs, "shm", &shm, AT_SYMLINK_NOFOLLOW) == 0 &&
                resolve_same_inode(&cur, &shm);
  set_node(w, is_shm ? NODE_DEV : NODE_ROOT, -1);
  return 0;
}

/* A name at the box's "/" or "/dev": only the areas exist there. */
static int step_virtual(struct walk *w, const char *comp) {
  int area = -1;
  if (w->kind == NODE_ROOT) {
    if (!strcmp(comp, "workspace"))
      area = BOX_AREA_WORKSPACE;
    else if (!strcmp(comp, "tmp"))
      area = BOX_AREA_TMP;
    else if (!strcmp(comp, "dev")) {
      set_node(w, NODE_DEV, -1);
      return 0;
    }
  } else if (!strcmp(comp, "shm")) {
    area = BOX_AREA_SHM;
  }
  if (area < 0)
    return husk_fail(w->err, EACCES, "`%s`: %s", w->orig, only_areas);
  int fd = resolve_area(w->b, area, w->err);
  if (fd < 0)
    return -1;
  set_node(w, NODE_DIR, fd);
  return 0;
}

/* Walk what is left of the text.  The last component is opened with
 * `oflags` (O_PATH alone for a mere handle) and returned in *out; if the
 * text ends on the current node instead (".", "..", an area name, or
 * nothing at all), *out is -1 and the node is in w.  Symlinks are followed
 * everywhere; directories on the way must be directories. */
static int walk_rest(struct walk *w, int oflags, int *out) {
  *out = -1;
  char comp[NAME_MAX + 1];
  bool last = false, from_link = false;
  int r;
  while ((r = next_comp(w, comp, &last, &from_link)) > 0) {
    if (!strcmp(comp, "."))
      continue;
    if (!strcmp(comp, "..")) {
      if (step_dotdot(w) < 0)
        return -1;
      continue;
    }
    if (w->kind != NODE_DIR) {
      if (step_virtual(w, comp) < 0)
        return -1;
      continue;
    }
    int want = last ? oflags : O_PATH;
    bool followed = false;
    for (unsigned tries = 0; !followed; tries++) {
      if (tries > RESOLVE_MAX_RETRIES)
        return husk_fail(w->err, EAGAIN, "`%s` keeps changing; try again", w->orig);
      int fd = resolve_child(w->fd, comp, want);
      if (fd >= 0) {
        struct stat st = {0};
        if ((want & O_PATH) && fstat(fd, &st) < 0) {
          close_quiet(fd);
          return husk_error(w->err, errno, "cannot inspect `%s`", w->orig);
        }
        if ((want & O_PATH) && S_ISLNK(st.st_mode)) {
          int rc = follow_link(w, fd);
          close_quiet(fd);
          if (rc < 0)
            return -1;
          followed = true;
          continue;
        }
        if (last) {
          *out = fd; /* the object itself: a directory, file, FIFO... the caller checks */
          return 0;
        }
        if (!S_ISDIR(st.st_mode)) {
          close_quiet(fd);
          return husk_fail(w->err, ENOTDIR, "cannot resolve `%s`: `%s` is not a directory", w->orig,
                           comp);
        }
        set_node(w, NODE_DIR, fd);
        break;
      }
      int e = errno;
      if (e == EAGAIN || e == EINTR)
        continue;
      if (e == ENOENT && w->mkdir && !from_link) {
        if (box_make_dir(w->b, w->fd, comp, 0755, w->orig, w->err) < 0)
          return -1;
        continue;
      }
      if (e == ELOOP || e == ENOTDIR || (e == ENXIO && !(want & O_PATH))) {
        /* Perhaps a symlink (O_NOFOLLOW refused it): look at the entry itself. */
        int lfd = resolve_child(w->fd, comp, O_PATH);
        struct stat st;
        if (lfd < 0 || fstat(lfd, &st) < 0) {
          close_quiet(lfd);
          if (errno == ENOENT)
            continue; /* vanished: try again */
          return husk_error(w->err, errno, "cannot resolve `%s`", w->orig);
        }
        if (S_ISLNK(st.st_mode)) {
          int rc = follow_link(w, lfd);
          close_quiet(lfd);
          if (rc < 0)
            return -1;
          followed = true;
          continue;
        }
        close_quiet(lfd);
        if (e == ELOOP)
          continue; /* it was a symlink a moment ago */
      }
      return husk_error(w->err, e, "cannot resolve `%s`", w->orig);
    }
  }
  return r < 0 ? -1 : 0;
}

/* Open what `path` names, following symlinks in the box, with `oflags`. */
int resolve_open(const struct husk_fs *b, const char *path, int oflags, bool mkdir, int *fd_out,
                 struct husk_err *err) {
  if (check_cpath(path, err) < 0)
    return -1;
  cleanup_walk struct walk w = {.fd = -1};
  if (walk_init(&w, b, path, path, err) < 0)
    return -1;
  w.mkdir = mkdir;
  int fd;
  if (walk_rest(&w, oflags, &fd) < 0)
    return -1;
  if (fd < 0) {
    if (w.kind != NODE_DIR)
      return husk_fail(err, EACCES, "`%s`: %s", path, only_areas);
    /* Re-open the directory we are on: "." of an fd is that very inode. */
    fd = openat(w.fd, ".", oflags | O_CLOEXEC);
    if (fd < 0)
      return husk_error(err, errno, "cannot open `%s`", path);
  }
  *fd_out = fd;
  return 0;
}

void resolve_target_done(struct resolve_target *t) {
  close_quiet(t->dir);
  t->dir = -1;
}

int resolve_parent(const struct husk_fs *b, const char *path, bool mkparents,
                   struct resolve_target *t, struct husk_err *err) {
  *t = (struct resolve_target){.dir = -1, .area = -1};
  if (check_cpath(path, err) < 0)
    return -1;
  char text[PATH_MAX];
  size_t n = strlen(path);
  memcpy(text, path, n + 1);
  while (n > 1 && text[n - 1] == '/') {
    text[--n] = '\0';
    t->slash = true;
  }
  char *slash = strrchr(text, '/');
  const char *name = slash ? slash + 1 : text;
  if (!*name)
    return husk_fail(err, EACCES, "`%s`: %s", path, only_areas); /* "/" */
  size_t nl = strlen(name);
  if (nl > NAME_MAX)
    return husk_fail(err, ENAMETOOLONG, "`%s`: a path component is longer than %d bytes", path,
                     NAME_MAX);
  memcpy(t->name, name, nl + 1);
  if (!strcmp(t->name, ".") || !strcmp(t->name, "..")) {
    t->dots = true;
    return 0;
  }
  /* The prefix keeps its slash, so "/x" walks "/" and "x" walks "" (this
   * cuts `name`: t->name is the copy). */
  if (slash)
    slash[1] = '\0';
  else
    text[0] = '\0';
  cleanup_walk struct walk w = {.fd = -1};
  if (walk_init(&w, b, path, text, err) < 0)
    return -1;
  w.mkdir = mkparents;
  int fd;
  if (walk_rest(&w, O_PATH, &fd) < 0)
    return -1;
  if (fd >= 0) {
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode)) {
      close_quiet(fd);
      return husk_fail(err, ENOTDIR, "cannot resolve `%s`: a parent is not a directory", path);
    }
    t->dir = fd;
    return 0;
  }
  if (w.kind == NODE_DIR) {
    t->dir = take_fd(&w.fd);
    return 0;
  }
  /* The parent is the box's "/" or "/dev": the name must be an area. */
  if (w.kind == NODE_ROOT && !strcmp(t->name, "workspace"))
    t->area = BOX_AREA_WORKSPACE;
  else if (w.kind == NODE_ROOT && !strcmp(t->name, "tmp"))
    t->area = BOX_AREA_TMP;
  else if (w.kind == NODE_DEV && !strcmp(t->name, "shm"))
    t->area = BOX_AREA_SHM;
  else
    return husk_fail(err, EACCES, "`%s`: %s", path, only_areas);
  return 0;
}

/* For operations that act on an entry: no area root, no "." or "..". */
int resolve_need_entry(const struct resolve_target *t, const char *path, const char *op,
                       struct husk_err *err) {
  if (t->area >= 0)
    return husk_fail(err, EBUSY, "cannot %s `%s`: it is the root of the box's %s", op, path,
                     box_area_path[t->area]);
  if (t->dots)
    return husk_fail(err, EINVAL, "cannot %s `%s`: the path must name an entry, not end in . or ..",
                     op, path);
  return 0;
}

/* The caller's path as an absolute box path, for entries' `path`:
 * "a//b/./c/" -> "/workspace/a/b/c" (".." is kept: it is resolved with the
 * same rules when the path is used again). */
char *resolve_display_path(const char *path) {
  size_t n = strlen(path);
  char *out = malloc(n + sizeof "/workspace/" + 1);
  if (!out)
    return NULL;
  size_t o = 0;
  if (path[0] != '/') {
    memcpy(out, "/workspace", 10);
    o = 10;
  }
  for (const char *p = path; *p;) {
    while (*p == '/')
      p++;
    const char *s = p;
    while (*p && *p != '/')
      p++;
    size_t len = (size_t)(p - s);
    if (len == 0 || (len == 1 && s[0] == '.'))
      continue;
    out[o++] = '/';
    memcpy(out + o, s, len);
    o += len;
  }
  if (o == 0)
    out[o++] = '/';
  out[o] = '\0';
  return out;
}
