/* The files API of a box (see files.h for the contract).
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
#include "box/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "jail/syscalls.h"
#include "util/cleanup.h"

enum { AREA_WORKSPACE, AREA_TMP, AREA_SHM };
static const char *const area_dir[] = {"workspace", "tmp", "shm"};      /* in the box tmpfs */
static const char *const area_path[] = {"/workspace", "/tmp", "/dev/shm"}; /* in the box */

#define MAX_SYMLINKS 40           /* the kernel's MAXSYMLINKS */
#define PENDING_MAX (4 * PATH_MAX) /* path text left to walk, after symlink splicing */
#define MAX_RETRIES 16            /* a name that keeps changing type under us */
#define REMOVE_MAX_DEPTH 65536    /* levels of a recursive removal (heap, not fds) */
#define REMOVE_MAX_PASSES (1U << 22) /* directory scans of one removal, against endless races */

static const char only_areas[] = "only /workspace, /tmp and /dev/shm are reachable through the files API";

/* One name, relative to a directory we hold; nothing is ever followed. */
static int open_child(int dirfd, const char *name, int flags) {
  return sys_openat2(dirfd, name, (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC), 0,
                     RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV);
}

static bool same_inode(const struct stat *a, const struct stat *b) {
  return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

static int open_area(const struct husk_fs *b, int area, struct husk_err *err) {
  int fd = open_child(b->fs, area_dir[area], O_PATH | O_DIRECTORY);
  if (fd < 0)
    return husk_error(err, errno, "cannot open the box's `%s`", area_path[area]);
  return fd;
}

static void random_name(char *buf, size_t size) {
  uint64_t r = 0;
  if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    r ^= (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ULL ^ (uint64_t)getpid() << 32;
  }
  snprintf(buf, size, ".husk-%016llx.tmp", (unsigned long long)r);
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
  const char *orig;  /* the caller's path, for messages */
  struct husk_err *err;
  struct stat root;  /* identity of the tmpfs root */
  enum node_kind kind;
  int fd;            /* the current directory when kind == NODE_DIR */
  bool mkdir;        /* create missing directories the caller's path names */
  unsigned hops;     /* symlinks followed */
  char *buf;         /* path text still to walk */
  size_t len, pos;
  size_t link_end;   /* buf[0, link_end) came from symlink targets */
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
    int fd = open_area(b, AREA_WORKSPACE, err);
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
    return husk_fail(w->err, ENAMETOOLONG, "`%s`: a path component is longer than %d bytes", w->orig,
                     NAME_MAX);
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
  if (!same_inode(&st, &w->root)) {
    set_node(w, NODE_DIR, up);
    return 0;
  }
  /* We were at an area root: in the box its parent is "/" (or /dev). */
  close_quiet(up);
  struct stat cur, shm;
  bool is_shm = fstat(w->fd, &cur) == 0 && fstatat(w->b->fs, "shm", &shm, AT_SYMLINK_NOFOLLOW) == 0 &&
                same_inode(&cur, &shm);
  set_node(w, is_shm ? NODE_DEV : NODE_ROOT, -1);
  return 0;
}

/* A name at the box's "/" or "/dev": only the areas exist there. */
static int step_virtual(struct walk *w, const char *comp) {
  int area = -1;
  if (w->kind == NODE_ROOT) {
    if (!strcmp(comp, "workspace"))
      area = AREA_WORKSPACE;
    else if (!strcmp(comp, "tmp"))
      area = AREA_TMP;
    else if (!strcmp(comp, "dev")) {
      set_node(w, NODE_DEV, -1);
      return 0;
    }
  } else if (!strcmp(comp, "shm")) {
    area = AREA_SHM;
  }
  if (area < 0)
    return husk_fail(w->err, EACCES, "`%s`: %s", w->orig, only_areas);
  int fd = open_area(w->b, area, w->err);
  if (fd < 0)
    return -1;
  set_node(w, NODE_DIR, fd);
  return 0;
}

static int make_dir(const struct husk_fs *b, int dirfd, const char *name, mode_t mode, const char *what,
                    struct husk_err *err);

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
      if (tries > MAX_RETRIES)
        return husk_fail(w->err, EAGAIN, "`%s` keeps changing; try again", w->orig);
      int fd = open_child(w->fd, comp, want);
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
          return husk_fail(w->err, ENOTDIR, "cannot resolve `%s`: `%s` is not a directory", w->orig, comp);
        }
        set_node(w, NODE_DIR, fd);
        break;
      }
      int e = errno;
      if (e == EAGAIN || e == EINTR)
        continue;
      if (e == ENOENT && w->mkdir && !from_link) {
        if (make_dir(w->b, w->fd, comp, 0755, w->orig, w->err) < 0)
          return -1;
        continue;
      }
      if (e == ELOOP || e == ENOTDIR || (e == ENXIO && !(want & O_PATH))) {
        /* Perhaps a symlink (O_NOFOLLOW refused it): look at the entry itself. */
        int lfd = open_child(w->fd, comp, O_PATH);
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
static int resolve_open(const struct husk_fs *b, const char *path, int oflags, bool mkdir, int *fd_out,
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

/* A path split into the directory holding its last component and that
 * component, for operations that must not follow the last component. */
struct target {
  int dir;                 /* O_PATH fd of the parent directory, -1 if none */
  int area;                /* >= 0: the path names this area's root itself */
  bool dots;               /* the last component is "." or ".." */
  bool slash;              /* the path ended in '/' */
  char name[NAME_MAX + 1];
};

static void target_done(struct target *t) {
  close_quiet(t->dir);
  t->dir = -1;
}
#define cleanup_target __attribute__((cleanup(target_done)))

static int resolve_parent(const struct husk_fs *b, const char *path, bool mkparents, struct target *t,
                          struct husk_err *err) {
  *t = (struct target){.dir = -1, .area = -1};
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
    return husk_fail(err, ENAMETOOLONG, "`%s`: a path component is longer than %d bytes", path, NAME_MAX);
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
    t->area = AREA_WORKSPACE;
  else if (w.kind == NODE_ROOT && !strcmp(t->name, "tmp"))
    t->area = AREA_TMP;
  else if (w.kind == NODE_DEV && !strcmp(t->name, "shm"))
    t->area = AREA_SHM;
  else
    return husk_fail(err, EACCES, "`%s`: %s", path, only_areas);
  return 0;
}

/* For operations that act on an entry: no area root, no "." or "..". */
static int need_entry(const struct target *t, const char *path, const char *op, struct husk_err *err) {
  if (t->area >= 0)
    return husk_fail(err, EBUSY, "cannot %s `%s`: it is the root of the box's %s", op, path,
                     area_path[t->area]);
  if (t->dots)
    return husk_fail(err, EINVAL, "cannot %s `%s`: the path must name an entry, not end in . or ..", op,
                     path);
  return 0;
}

/* The caller's path as an absolute box path, for entries' `path`:
 * "a//b/./c/" -> "/workspace/a/b/c" (".." is kept: it is resolved with the
 * same rules when the path is used again). */
static char *display_path(const char *path) {
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

/* ---- creating things that belong to the box ------------------------------- */

int box_own_fd(const struct husk_fs *b, int fd, mode_t mode, const char *what, struct husk_err *err) {
  struct stat st;
  if (fstat(fd, &st) < 0)
    return husk_error(err, errno, "cannot inspect `%s`", what);
  /* Only what the daemon itself created (box code cannot create an inode
   * owned by our uid) is handed over: a swapped-in entry keeps its owner. */
  if (st.st_uid != geteuid())
    return 0;
  if (fchownat(fd, "", b->uid, b->gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
    return husk_error(err, errno, "cannot set the owner of `%s`", what);
  if (S_ISLNK(st.st_mode))
    return 0;
  /* After the chown (which clears setuid bits): permission bits only. */
  if (fchmod(fd, mode & (S_ISDIR(st.st_mode) ? 01777 : 0777)) < 0)
    return husk_error(err, errno, "cannot set the mode of `%s`", what);
  return 0;
}

/* mkdirat; created 0700 and root-owned until handed over, so box code cannot
 * put anything in it before it is complete.  EEXIST is fine. */
static int make_dir(const struct husk_fs *b, int dirfd, const char *name, mode_t mode, const char *what,
                    struct husk_err *err) {
  if (mkdirat(dirfd, name, 0700) < 0) {
    if (errno == EEXIST)
      return 0;
    return husk_error(err, errno, "cannot create a directory for `%s`", what);
  }
  cleanup_close int fd = open_child(dirfd, name, O_RDONLY | O_DIRECTORY);
  if (fd < 0)
    return 0; /* replaced already: whatever is there now is not ours */
  return box_own_fd(b, fd, mode, what, err);
}

int box_mkdir_at(const struct husk_fs *b, int dirfd, const char *name, mode_t mode, const char *what,
                 struct husk_err *err) {
  if (make_dir(b, dirfd, name, mode, what, err) < 0)
    return -1;
  int fd = open_child(dirfd, name, O_RDONLY | O_DIRECTORY);
  if (fd < 0)
    return husk_error(err, errno == ELOOP ? ENOTDIR : errno, "cannot open directory `%s`", what);
  return fd;
}

int box_tmpfile_at(const struct husk_fs *b, int dirfd, mode_t mode, const char *what,
                   struct husk_err *err) {
  cleanup_close int fd = openat(dirfd, ".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd < 0) {
    int e = (errno == EISDIR || errno == EOPNOTSUPP) ? EOPNOTSUPP : errno;
    return husk_error(err, e, "cannot create a file for `%s`", what);
  }
  if (box_own_fd(b, fd, mode, what, err) < 0)
    return -1;
  return take_fd(&fd);
}

/* rename tmp over name; a directory there is EISDIR.  Removes tmp on failure. */
static int rename_into_place(int dirfd, const char *tmp, const char *name, const char *what,
                             struct husk_err *err) {
  if (renameat(dirfd, tmp, dirfd, name) == 0)
    return 0;
  int e = errno;
  unlinkat(dirfd, tmp, 0);
  if (e == EISDIR || e == ENOTEMPTY || e == EEXIST)
    return husk_fail(err, EISDIR, "cannot replace `%s`: it is a directory", what);
  return husk_error(err, e, "cannot create `%s`", what);
}

int box_publish_at(int dirfd, const char *name, int fd, int srcdir, const char *srcname,
                   const char *what, struct husk_err *err) {
  char tmp[HUSK_TMPNAME_MAX];
  for (int tries = 0;; tries++) {
    random_name(tmp, sizeof tmp);
    int rc;
    if (fd >= 0) {
      rc = linkat(fd, "", dirfd, tmp, AT_EMPTY_PATH);
      if (rc < 0 && errno == ENOENT) {
        /* AT_EMPTY_PATH wants CAP_DAC_READ_SEARCH; our own fd's magic link does not. */
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
        rc = linkat(AT_FDCWD, proc, dirfd, tmp, AT_SYMLINK_FOLLOW);
      }
    } else {
      rc = linkat(srcdir, srcname, dirfd, tmp, 0); /* 0: a symlink is linked as itself */
    }
    if (rc == 0)
      break;
    if (errno == EEXIST && tries < 8)
      continue;
    return husk_error(err, errno, "cannot create `%s`", what);
  }
  return rename_into_place(dirfd, tmp, name, what, err);
}

int box_symlink_at(const struct husk_fs *b, int dirfd, const char *name, const char *target,
                   const struct timespec *mtime, const char *what, struct husk_err *err) {
  char tmp[HUSK_TMPNAME_MAX];
  for (int tries = 0;; tries++) {
    random_name(tmp, sizeof tmp);
    if (symlinkat(target, dirfd, tmp) == 0)
      break;
    if (errno == EEXIST && tries < 8)
      continue;
    return husk_error(err, errno, "cannot create symlink `%s`", what);
  }
  cleanup_close int lfd = open_child(dirfd, tmp, O_PATH);
  if (lfd >= 0 && box_own_fd(b, lfd, 0, what, err) < 0) {
    unlinkat(dirfd, tmp, 0);
    return -1;
  }
  if (mtime) {
    struct timespec ts[2] = {*mtime, *mtime};
    utimensat(dirfd, tmp, ts, AT_SYMLINK_NOFOLLOW); /* cosmetic: no error */
  }
  return rename_into_place(dirfd, tmp, name, what, err);
}

/* ---- the API --------------------------------------------------------------- */

int box_open_dir(const struct husk_fs *b, const char *path, bool create, int *fd_out,
                 struct husk_err *err) {
  return resolve_open(b, path, O_RDONLY | O_DIRECTORY, create, fd_out, err);
}

int husk_file_open_read(const struct husk_fs *b, const char *path, int *fd_out, struct stat *st_out,
                       struct husk_err *err) {
  cleanup_close int fd = -1;
  /* O_NONBLOCK: opening a FIFO (or a file under a lease) cannot block. */
  if (resolve_open(b, path, O_RDONLY | O_NONBLOCK | O_NOCTTY, false, &fd, err) < 0) {
    if (err && err->code == ENXIO)
      return husk_fail(err, EINVAL, "`%s` is not a regular file", path);
    if (err && err->code == EWOULDBLOCK)
      return husk_fail(err, EAGAIN, "`%s` is busy (leased by the box); try again", path);
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) < 0)
    return husk_error(err, errno, "cannot inspect `%s`", path);
  if (S_ISDIR(st.st_mode))
    return husk_fail(err, EISDIR, "`%s` is a directory", path);
  if (!S_ISREG(st.st_mode))
    return husk_fail(err, EINVAL, "`%s` is not a regular file", path);
  int fl = fcntl(fd, F_GETFL);
  if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0)
    return husk_error(err, errno, "cannot set up `%s` for reading", path);
  if (st_out)
    *st_out = st;
  *fd_out = take_fd(&fd);
  return 0;
}

int husk_file_create(const struct husk_fs *b, const char *path, bool mkparents, mode_t mode,
                    int *fd_out, char *tmpname, size_t tmplen, struct husk_err *err) {
  if (tmpname && tmplen)
    tmpname[0] = '\0';
  cleanup_target struct target t = {.dir = -1};
  if (resolve_parent(b, path, mkparents, &t, err) < 0)
    return -1;
  if (t.area >= 0 || t.slash)
    return husk_fail(err, EISDIR, "cannot write `%s`: it names a directory", path);
  if (need_entry(&t, path, "write", err) < 0)
    return -1;
  struct stat st;
  /* Advisory only (commit decides): fail before the body is sent. */
  if (fstatat(t.dir, t.name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
    return husk_fail(err, EISDIR, "cannot write `%s`: it is a directory", path);
  int fd = box_tmpfile_at(b, t.dir, mode, path, err);
  if (fd >= 0) {
    *fd_out = fd;
    return 0;
  }
  if (!err || err->code != EOPNOTSUPP)
    return -1;
  /* No O_TMPFILE: a visible temp file with a random name, renamed on commit. */
  if (!tmpname || tmplen < HUSK_TMPNAME_MAX)
    return husk_fail(err, EINVAL, "no room for a temp file name");
  for (int tries = 0;; tries++) {
    random_name(tmpname, tmplen);
    fd = sys_openat2(t.dir, tmpname, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600,
                     RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_XDEV);
    if (fd >= 0)
      break;
    if (errno == EEXIST && tries < 8)
      continue;
    tmpname[0] = '\0';
    return husk_error(err, errno, "cannot create a file for `%s`", path);
  }
  if (box_own_fd(b, fd, mode, path, err) < 0) {
    unlinkat(t.dir, tmpname, 0);
    tmpname[0] = '\0';
    close_quiet(fd);
    return -1;
  }
  *fd_out = fd;
  return 0;
}

int husk_file_commit(const struct husk_fs *b, const char *path, int fd, const char *tmpname,
                    struct husk_err *err) {
  cleanup_target struct target t = {.dir = -1};
  if (resolve_parent(b, path, false, &t, err) < 0)
    return -1;
  if (t.area >= 0 || t.slash)
    return husk_fail(err, EISDIR, "cannot write `%s`: it names a directory", path);
  if (need_entry(&t, path, "write", err) < 0)
    return -1;
  if (tmpname && *tmpname)
    return rename_into_place(t.dir, tmpname, t.name, path, err);
  return box_publish_at(t.dir, t.name, fd, -1, NULL, path, err);
}

void husk_file_abort(const struct husk_fs *b, const char *path, int fd, const char *tmpname) {
  if (!tmpname || !*tmpname)
    return; /* an O_TMPFILE vanishes with its last fd */
  struct husk_err ignored;
  cleanup_target struct target t = {.dir = -1};
  if (resolve_parent(b, path, false, &t, &ignored) < 0 || t.dir < 0)
    return;
  struct stat mine, there;
  /* Remove the temp name only if it still is our file. */
  if (fstat(fd, &mine) == 0 && fstatat(t.dir, tmpname, &there, AT_SYMLINK_NOFOLLOW) == 0 &&
      same_inode(&mine, &there))
    unlinkat(t.dir, tmpname, 0);
}

/* ---- list and stat ------------------------------------------------------------ */

static char type_char(mode_t m) {
  return S_ISREG(m) ? 'f' : S_ISDIR(m) ? 'd' : S_ISLNK(m) ? 'l' : 'o';
}

static void fill_dirent(struct husk_dirent *d, const struct stat *st) {
  d->type = type_char(st->st_mode);
  d->size = st->st_size > 0 ? (uint64_t)st->st_size : 0;
  d->mode = st->st_mode & 07777;
  d->mtime_ms = (int64_t)st->st_mtim.tv_sec * 1000 + st->st_mtim.tv_nsec / 1000000;
}

/* Target of symlink dirfd/name (name "" with AT_EMPTY_PATH semantics for an
 * O_PATH fd), or NULL. */
static char *read_link(int dirfd, const char *name) {
  char buf[PATH_MAX];
  ssize_t n = readlinkat(dirfd, name, buf, sizeof buf);
  if (n < 0 || (size_t)n >= sizeof buf)
    return NULL;
  buf[n] = '\0';
  return strdup(buf);
}

struct list_ctx {
  const char *base; /* display path of the listed directory */
  size_t base_len;
  char *path;       /* buffer for entries' paths */
  size_t path_cap;
  unsigned max, count;
  bool truncated;
  int (*cb)(void *, const struct husk_dirent *);
  void *ctx;
  struct husk_err *err;
};

static int list_entry(void *vctx, const struct box_walk_entry *e) {
  struct list_ctx *lc = vctx;
  if (lc->count >= lc->max) {
    lc->truncated = true;
    return BOX_WALK_STOP;
  }
  size_t rl = strlen(e->rel);
  if (lc->base_len + 1 + rl + 1 > lc->path_cap)
    return husk_fail(lc->err, ENAMETOOLONG, "listing: path too long");
  memcpy(lc->path, lc->base, lc->base_len);
  lc->path[lc->base_len] = '/';
  memcpy(lc->path + lc->base_len + 1, e->rel, rl + 1);
  cleanup_free char *target = S_ISLNK(e->st->st_mode) ? read_link(e->dirfd, e->name) : NULL;
  struct husk_dirent d = {.name = (char *)e->name, .path = lc->path, .link_target = target, .depth = e->depth};
  fill_dirent(&d, e->st);
  lc->count++;
  int r = lc->cb(lc->ctx, &d);
  if (r < 0)
    return husk_fail(lc->err, ECANCELED, "listing stopped by its consumer");
  return r > 0 ? BOX_WALK_STOP : 0;
}

int husk_file_list(const struct husk_fs *b, const char *path, int depth,
                  int (*cb)(void *ctx, const struct husk_dirent *e), void *ctx, struct husk_err *err) {
  if (depth < 1 || depth > HUSK_LIST_MAX_DEPTH)
    return husk_fail(err, EINVAL, "listing depth must be 1 to %d", HUSK_LIST_MAX_DEPTH);
  cleanup_close int fd = -1;
  if (resolve_open(b, path, O_RDONLY | O_DIRECTORY, false, &fd, err) < 0)
    return -1;
  cleanup_free char *base = display_path(path);
  size_t cap = PATH_MAX + (size_t)HUSK_LIST_MAX_DEPTH * (NAME_MAX + 1) + 2;
  cleanup_free char *buf = malloc(cap);
  if (!base || !buf)
    return husk_error(err, ENOMEM, "listing `%s`", path);
  size_t bl = strlen(base);
  if (bl == 1)
    bl = 0; /* "/" (cannot happen: the root is not listable) */
  struct list_ctx lc = {.base = base, .base_len = bl, .path = buf, .path_cap = cap,
                        .max = b->list_max ? b->list_max : HUSK_LIST_MAX_DEFAULT, .cb = cb,
                        .ctx = ctx, .err = err};
  if (box_tree_walk(fd, depth, list_entry, &lc, err) < 0)
    return husk_error_wrap(err, "cannot list `%s`", path);
  return lc.truncated ? 1 : 0;
}

void husk_dirent_free(struct husk_dirent *e) {
  if (!e)
    return;
  free(e->name);
  free(e->path);
  free(e->link_target);
  e->name = e->path = e->link_target = NULL;
}

int husk_file_stat(const struct husk_fs *b, const char *path, struct husk_dirent *out,
                  struct husk_err *err) {
  *out = (struct husk_dirent){0};
  cleanup_target struct target t = {.dir = -1};
  if (resolve_parent(b, path, false, &t, err) < 0)
    return -1;
  struct stat st;
  cleanup_free char *target = NULL;
  const char *name = t.name;
  if (t.dir >= 0) {
    if (fstatat(t.dir, t.name, &st, AT_SYMLINK_NOFOLLOW) < 0)
      return husk_error(err, errno, "cannot stat `%s`", path);
    if (S_ISLNK(st.st_mode))
      target = read_link(t.dir, t.name);
  } else {
    /* An area root, or a path ending in "." / "..": a directory. */
    cleanup_close int fd = -1;
    if (t.area >= 0)
      fd = open_area(b, t.area, err);
    else if (resolve_open(b, path, O_PATH, false, &fd, err) < 0)
      return -1;
    if (fd < 0)
      return -1;
    if (fstat(fd, &st) < 0)
      return husk_error(err, errno, "cannot stat `%s`", path);
    if (t.area >= 0)
      name = area_path[t.area] + (t.area == AREA_SHM ? 5 : 1);
  }
  out->name = strdup(name);
  out->path = display_path(path);
  out->link_target = take_ptr(&target);
  if (!out->name || !out->path) {
    husk_dirent_free(out);
    return husk_error(err, ENOMEM, "stat `%s`", path);
  }
  fill_dirent(out, &st);
  return 0;
}

/* ---- mkdir, move ------------------------------------------------------------ */

int husk_file_mkdir(const struct husk_fs *b, const char *path, bool parents, struct husk_err *err) {
  if (parents) {
    cleanup_close int fd = -1;
    if (resolve_open(b, path, O_PATH | O_DIRECTORY, true, &fd, err) < 0) {
      if (err && err->code == ENOTDIR)
        return husk_fail(err, ENOTDIR, "cannot create `%s`: it or a parent exists and is not a directory",
                         path);
      return -1;
    }
    return 0;
  }
  cleanup_target struct target t = {.dir = -1};
  if (resolve_parent(b, path, false, &t, err) < 0)
    return -1;
  if (t.area >= 0)
    return husk_fail(err, EEXIST, "`%s` exists", path);
  if (need_entry(&t, path, "create", err) < 0)
    return -1;
  if (mkdirat(t.dir, t.name, 0700) < 0) {
    if (errno == EEXIST)
      return husk_fail(err, EEXIST, "`%s` exists", path);
    return husk_error(err, errno, "cannot create directory `%s`", path);
  }
  cleanup_close int fd = open_child(t.dir, t.name, O_RDONLY | O_DIRECTORY);
  if (fd < 0)
    return 0; /* swapped by the box already: nothing of ours to hand over */
  return box_own_fd(b, fd, 0755, path, err);
}

int husk_file_move(const struct husk_fs *b, const char *from, const char *to, bool overwrite,
                  struct husk_err *err) {
  cleanup_target struct target f = {.dir = -1};
  cleanup_target struct target t = {.dir = -1};
  if (resolve_parent(b, from, false, &f, err) < 0 || need_entry(&f, from, "move", err) < 0)
    return -1;
  if (resolve_parent(b, to, false, &t, err) < 0 || need_entry(&t, to, "replace", err) < 0)
    return -1;
  if (renameat2(f.dir, f.name, t.dir, t.name, overwrite ? 0 : RENAME_NOREPLACE) < 0) {
    if (errno == EEXIST || errno == ENOTEMPTY)
      return husk_fail(err, errno, "cannot move `%s` to `%s`: the destination exists%s", from, to,
                       errno == ENOTEMPTY ? " and is a directory that is not empty" : "");
    return husk_error(err, errno, "cannot move `%s` to `%s`", from, to);
  }
  return 0;
}

/* ---- remove ------------------------------------------------------------------ */

struct level {
  dev_t dev;
  ino_t ino;
  char name[NAME_MAX + 1]; /* the name this level was entered by */
};

/* Empty the directory `top`, depth first, holding two fds whatever the
 * depth: we go down by name (O_NOFOLLOW) and back up by "..", checking that
 * ".." is the very directory we came from (box code may move things while
 * we work; then we stop rather than delete elsewhere). */
static int empty_tree(const struct husk_fs *b, int top, const char *what, struct husk_err *err) {
  struct stat root, st;
  if (fstat(b->fs, &root) < 0 || fstat(top, &st) < 0)
    return husk_error(err, errno, "cannot inspect `%s`", what);
  size_t cap = 64, depth = 0;
  cleanup_free struct level *lv = malloc(cap * sizeof *lv);
  if (!lv)
    return husk_error(err, ENOMEM, "removal stack");
  lv[0] = (struct level){.dev = st.st_dev, .ino = st.st_ino};
  cleanup_close int cur = fcntl(top, F_DUPFD_CLOEXEC, 3);
  if (cur < 0)
    return husk_error(err, errno, "dup");
  for (unsigned passes = 0;; passes++) {
    if (passes > REMOVE_MAX_PASSES)
      return husk_fail(err, EBUSY, "`%s` keeps changing; removal gave up", what);
    int dfd = fcntl(cur, F_DUPFD_CLOEXEC, 3);
    if (dfd < 0)
      return husk_error(err, errno, "dup");
    cleanup_closedir DIR *d = fdopendir(dfd);
    if (!d) {
      close_quiet(dfd);
      return husk_error(err, errno, "cannot read a directory in `%s`", what);
    }
    bool descended = false;
    for (;;) {
      errno = 0;
      struct dirent *e = readdir(d);
      if (!e) {
        if (errno)
          return husk_error(err, errno, "cannot read a directory in `%s`", what);
        break;
      }
      const char *n = e->d_name;
      if (!strcmp(n, ".") || !strcmp(n, ".."))
        continue;
      /* unlink never follows a symlink: it removes the link. */
      if (unlinkat(cur, n, 0) == 0 || errno == ENOENT)
        continue;
      if (errno != EISDIR)
        return husk_error(err, errno, "cannot remove an entry of `%s`", what);
      if (unlinkat(cur, n, AT_REMOVEDIR) == 0 || errno == ENOENT || errno == ENOTDIR)
        continue; /* ENOTDIR: swapped for a file; the next pass unlinks it */
      if (errno != ENOTEMPTY && errno != EEXIST)
        return husk_error(err, errno, "cannot remove a directory in `%s`", what);
      int child = open_child(cur, n, O_RDONLY | O_DIRECTORY);
      if (child < 0) {
        if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP)
          continue;
        return husk_error(err, errno, "cannot open a directory in `%s`", what);
      }
      if (fstat(child, &st) < 0) {
        close_quiet(child);
        return husk_error(err, errno, "cannot inspect a directory in `%s`", what);
      }
      if (depth + 1 >= REMOVE_MAX_DEPTH) {
        close_quiet(child);
        return husk_fail(err, ELOOP, "`%s` is nested more than %d levels deep", what, REMOVE_MAX_DEPTH);
      }
      if (depth + 1 == cap) {
        struct level *nl = realloc(lv, 2 * cap * sizeof *nl);
        if (!nl) {
          close_quiet(child);
          return husk_error(err, ENOMEM, "removal stack");
        }
        lv = nl;
        cap *= 2;
      }
      depth++;
      lv[depth] = (struct level){.dev = st.st_dev, .ino = st.st_ino};
      memcpy(lv[depth].name, n, strnlen(n, NAME_MAX) + 1); /* d_name: at most NAME_MAX */
      lv[depth].name[NAME_MAX] = '\0';
      close_quiet(cur);
      cur = child;
      descended = true;
      break;
    }
    if (descended)
      continue;
    if (depth == 0)
      return 0; /* top is empty */
    /* Back up one level; it must be the directory we came down from. */
    int up = sys_openat2(cur, "..", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0,
                         RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV);
    if (up < 0)
      return husk_error(err, errno, "cannot go back up in `%s`", what);
    if (fstat(up, &st) < 0 || st.st_dev != lv[depth - 1].dev || st.st_ino != lv[depth - 1].ino ||
        same_inode(&st, &root)) {
      close_quiet(up);
      return husk_fail(err, EBUSY, "`%s` was moved while being removed; stopped", what);
    }
    if (unlinkat(up, lv[depth].name, AT_REMOVEDIR) < 0 && errno != ENOENT && errno != ENOTEMPTY &&
        errno != EEXIST && errno != ENOTDIR) {
      int e = errno;
      close_quiet(up);
      return husk_error(err, e, "cannot remove a directory in `%s`", what);
    }
    /* Not empty after all (the box added something): the next scan of
     * `up` finds it again and goes back down. */
    close_quiet(cur);
    cur = up;
    depth--;
  }
}

static int remove_tree(const struct husk_fs *b, int parent, const char *name, const char *what,
                       struct husk_err *err) {
  for (int tries = 0; tries < MAX_RETRIES; tries++) {
    if (unlinkat(parent, name, 0) == 0)
      return 0;
    if (errno != EISDIR)
      return husk_error(err, errno, "cannot remove `%s`", what);
    if (unlinkat(parent, name, AT_REMOVEDIR) == 0)
      return 0;
    if (errno == ENOTDIR)
      continue;
    if (errno != ENOTEMPTY && errno != EEXIST)
      return husk_error(err, errno, "cannot remove `%s`", what);
    cleanup_close int dir = open_child(parent, name, O_RDONLY | O_DIRECTORY);
    if (dir < 0) {
      if (errno == ENOTDIR || errno == ELOOP || errno == ENOENT)
        continue;
      return husk_error(err, errno, "cannot open `%s`", what);
    }
    if (empty_tree(b, dir, what, err) < 0)
      return -1;
  }
  return husk_fail(err, EBUSY, "`%s` keeps changing; removal gave up", what);
}

int husk_file_remove(const struct husk_fs *b, const char *path, bool recursive, struct husk_err *err) {
  cleanup_target struct target t = {.dir = -1};
  if (resolve_parent(b, path, false, &t, err) < 0 || need_entry(&t, path, "remove", err) < 0)
    return -1;
  if (recursive)
    return remove_tree(b, t.dir, t.name, path, err);
  if (unlinkat(t.dir, t.name, 0) == 0)
    return 0;
  if (errno != EISDIR)
    return husk_error(err, errno, "cannot remove `%s`", path);
  if (unlinkat(t.dir, t.name, AT_REMOVEDIR) == 0)
    return 0;
  if (errno == ENOTEMPTY || errno == EEXIST)
    return husk_fail(err, ENOTEMPTY, "cannot remove `%s`: the directory is not empty", path);
  return husk_error(err, errno, "cannot remove `%s`", path);
}

/* ---- tree walk (list, tar) ------------------------------------------------------ */

struct frame {
  int fd;
  char **names;
  size_t n, i;
  size_t rel_len; /* length of this directory's path in the rel buffer */
};

static void frame_free(struct frame *f) {
  for (size_t i = 0; i < f->n; i++)
    free(f->names[i]);
  free(f->names);
  close_quiet(f->fd);
  *f = (struct frame){.fd = -1};
}

static int cmp_names(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Read all names of directory fd, sorted (a stable order for listings and
 * archives; the box cannot make it run away: it is bounded by its inodes). */
static int read_names(int fd, struct frame *f, struct husk_err *err) {
  int dfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (dfd < 0)
    return husk_error(err, errno, "dup");
  cleanup_closedir DIR *d = fdopendir(dfd);
  if (!d) {
    close_quiet(dfd);
    return husk_error(err, errno, "cannot read directory");
  }
  size_t cap = 0;
  for (;;) {
    errno = 0;
    struct dirent *e = readdir(d);
    if (!e) {
      if (errno)
        return husk_error(err, errno, "cannot read directory");
      break;
    }
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    if (f->n == cap) {
      size_t nc = cap ? cap * 2 : 32;
      char **nn = realloc(f->names, nc * sizeof *nn);
      if (!nn)
        return husk_error(err, ENOMEM, "directory listing");
      f->names = nn;
      cap = nc;
    }
    if (!(f->names[f->n] = strdup(e->d_name)))
      return husk_error(err, ENOMEM, "directory listing");
    f->n++;
  }
  if (f->n > 1)
    qsort(f->names, f->n, sizeof *f->names, cmp_names);
  return 0;
}

int box_tree_walk(int dirfd, int max_depth, int (*cb)(void *ctx, const struct box_walk_entry *e),
                  void *ctx, struct husk_err *err) {
  if (max_depth < 1)
    return husk_fail(err, EINVAL, "walk depth must be at least 1");
  cleanup_free struct frame *fr = calloc((size_t)max_depth, sizeof *fr);
  cleanup_free char *rel = malloc((size_t)max_depth * (NAME_MAX + 1) + 1);
  if (!fr || !rel)
    return husk_error(err, ENOMEM, "tree walk");
  int top = 0, rc = 0;
  fr[0] = (struct frame){.fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3)};
  if (fr[0].fd < 0)
    return husk_error(err, errno, "dup");
  if (read_names(fr[0].fd, &fr[0], err) < 0) {
    frame_free(&fr[0]);
    return -1;
  }
  while (top >= 0) {
    struct frame *f = &fr[top];
    if (f->i == f->n) {
      frame_free(f);
      top--;
      continue;
    }
    const char *name = f->names[f->i++];
    size_t nl = strlen(name), at = f->rel_len ? f->rel_len + 1 : 0;
    if (f->rel_len)
      rel[f->rel_len] = '/';
    memcpy(rel + at, name, nl + 1);
    struct stat st;
    if (fstatat(f->fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
      if (errno == ENOENT)
        continue; /* removed while we walk */
      rc = husk_error(err, errno, "cannot inspect `%s`", rel);
      break;
    }
    struct box_walk_entry e = {.dirfd = f->fd, .name = name, .rel = rel, .st = &st, .depth = top + 1};
    int r = cb(ctx, &e);
    if (r < 0) {
      rc = -1;
      break;
    }
    if (r == BOX_WALK_STOP)
      break;
    if (r != 0 || !S_ISDIR(st.st_mode) || top + 1 >= max_depth)
      continue;
    int c = open_child(f->fd, name, O_RDONLY | O_DIRECTORY);
    if (c < 0) {
      if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP)
        continue; /* swapped for something else since the fstatat */
      rc = husk_error(err, errno, "cannot open `%s`", rel);
      break;
    }
    struct stat cs;
    if (fstat(c, &cs) < 0 || !same_inode(&cs, &st)) {
      close_quiet(c);
      continue; /* not the directory we reported */
    }
    fr[++top] = (struct frame){.fd = c, .rel_len = at + nl};
    if (read_names(c, &fr[top], err) < 0) {
      rc = -1;
      break;
    }
  }
  for (; top >= 0; top--)
    frame_free(&fr[top]);
  return rc;
}
