/* The files API of a box (see files.h for the contract): reading,
 * writing, listing, moving and removing entries of the box's writable
 * areas, and the fd-level helpers tar.c and copy.c share.  Every path is
 * resolved by resolve.c, which explains why none can reach the host.
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
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "box/resolve.h"
#include "jail/syscalls.h"
#include "util/cleanup.h"
#include "util/id.h"

#define REMOVE_MAX_DEPTH 65536       /* levels of a recursive removal (heap, not fds) */
#define REMOVE_MAX_PASSES (1U << 22) /* directory scans of one removal, against endless races */

/* A temporary name, ".husk-<16 hex>.tmp".  Every user creates it
 * exclusively and tries another on EEXIST, so the clock-derived name used
 * when the kernel gives no random bytes only costs retries. */
static void random_name(char *buf, size_t size) {
  struct husk_err err;
  char hex[17];
  if (id_new(NULL, 8, hex, sizeof hex, &err) < 0) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t r = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ULL ^ (uint64_t)getpid() << 32;
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)r);
  }
  snprintf(buf, size, ".husk-%s.tmp", hex);
}

/* ---- creating things that belong to the box ------------------------------- */

int box_own_fd(const struct husk_fs *b, int fd, mode_t mode, const char *what,
               struct husk_err *err) {
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

/* Created 0700 and root-owned until handed over, so box code cannot put
 * anything in it before it is complete. */
int box_make_dir(const struct husk_fs *b, int dirfd, const char *name, mode_t mode,
                 const char *what, struct husk_err *err) {
  if (mkdirat(dirfd, name, 0700) < 0) {
    if (errno == EEXIST)
      return 0;
    return husk_error(err, errno, "cannot create a directory for `%s`", what);
  }
  cleanup_close int fd = resolve_child(dirfd, name, O_RDONLY | O_DIRECTORY);
  if (fd < 0)
    return 0; /* replaced already: whatever is there now is not ours */
  return box_own_fd(b, fd, mode, what, err);
}

int box_mkdir_at(const struct husk_fs *b, int dirfd, const char *name, mode_t mode,
                 const char *what, struct husk_err *err) {
  if (box_make_dir(b, dirfd, name, mode, what, err) < 0)
    return -1;
  int fd = resolve_child(dirfd, name, O_RDONLY | O_DIRECTORY);
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
  cleanup_close int lfd = resolve_child(dirfd, tmp, O_PATH);
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

/* Open a regular file with `flags` (O_NONBLOCK added: a FIFO cannot
 * hang the open, and is refused below as any non-regular file is), for
 * `what` ("reading", "writing"); the fd blocking again. */
static int open_regular(const struct husk_fs *b, const char *path, int flags, const char *what,
                        int *fd_out, struct stat *st_out, struct husk_err *err) {
  cleanup_close int fd = -1;
  if (resolve_open(b, path, flags | O_NONBLOCK | O_NOCTTY, false, &fd, err) < 0) {
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
    return husk_error(err, errno, "cannot set up `%s` for %s", path, what);
  if (st_out)
    *st_out = st;
  *fd_out = take_fd(&fd);
  return 0;
}

int husk_file_open_read(const struct husk_fs *b, const char *path, int *fd_out, struct stat *st_out,
                        struct husk_err *err) {
  return open_regular(b, path, O_RDONLY, "reading", fd_out, st_out, err);
}

int husk_file_open_write(const struct husk_fs *b, const char *path, bool append, int *fd_out,
                         struct stat *st_out, struct husk_err *err) {
  return open_regular(b, path, O_WRONLY | (append ? O_APPEND : 0), "writing", fd_out, st_out, err);
}

int husk_file_create(const struct husk_fs *b, const char *path, bool mkparents, mode_t mode,
                     int *fd_out, char *tmpname, size_t tmplen, struct husk_err *err) {
  if (tmpname && tmplen)
    tmpname[0] = '\0';
  cleanup_target struct resolve_target t = {.dir = -1};
  if (resolve_parent(b, path, mkparents, &t, err) < 0)
    return -1;
  if (t.area >= 0 || t.slash)
    return husk_fail(err, EISDIR, "cannot write `%s`: it names a directory", path);
  if (resolve_need_entry(&t, path, "write", err) < 0)
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
  cleanup_target struct resolve_target t = {.dir = -1};
  if (resolve_parent(b, path, false, &t, err) < 0)
    return -1;
  if (t.area >= 0 || t.slash)
    return husk_fail(err, EISDIR, "cannot write `%s`: it names a directory", path);
  if (resolve_need_entry(&t, path, "write", err) < 0)
    return -1;
  if (tmpname && *tmpname)
    return rename_into_place(t.dir, tmpname, t.name, path, err);
  return box_publish_at(t.dir, t.name, fd, -1, NULL, path, err);
}

void husk_file_abort(const struct husk_fs *b, const char *path, int fd, const char *tmpname) {
  if (!tmpname || !*tmpname)
    return; /* an O_TMPFILE vanishes with its last fd */
  struct husk_err ignored;
  cleanup_target struct resolve_target t = {.dir = -1};
  if (resolve_parent(b, path, false, &t, &ignored) < 0 || t.dir < 0)
    return;
  struct stat mine, there;
  /* Remove the temp name only if it still is our file. */
  if (fstat(fd, &mine) == 0 && fstatat(t.dir, tmpname, &there, AT_SYMLINK_NOFOLLOW) == 0 &&
      resolve_same_inode(&mine, &there))
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
  char *path; /* buffer for entries' paths */
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
  struct husk_dirent d = {
      .name = (char *)e->name, .path = lc->path, .link_target = target, .depth = e->depth};
  fill_dirent(&d, e->st);
  lc->count++;
  int r = lc->cb(lc->ctx, &d);
  if (r < 0)
    return husk_fail(lc->err, ECANCELED, "listing stopped by its consumer");
  return r > 0 ? BOX_WALK_STOP : 0;
}

int husk_file_list(const struct husk_fs *b, const char *path, int depth,
                   int (*cb)(void *ctx, const struct husk_dirent *e), void *ctx,
                   struct husk_err *err) {
  if (depth < 1 || depth > HUSK_LIST_MAX_DEPTH)
    return husk_fail(err, EINVAL, "listing depth must be 1 to %d", HUSK_LIST_MAX_DEPTH);
  cleanup_close int fd = -1;
  if (resolve_open(b, path, O_RDONLY | O_DIRECTORY, false, &fd, err) < 0)
    return -1;
  cleanup_free char *base = resolve_display_path(path);
  size_t cap = PATH_MAX + (size_t)HUSK_LIST_MAX_DEPTH * (NAME_MAX + 1) + 2;
  cleanup_free char *buf = malloc(cap);
  if (!base || !buf)
    return husk_error(err, ENOMEM, "listing `%s`", path);
  size_t bl = strlen(base);
  if (bl == 1)
    bl = 0; /* "/" (cannot happen: the root is not listable) */
  struct list_ctx lc = {.base = base,
                        .base_len = bl,
                        .path = buf,
                        .path_cap = cap,
                        .max = b->list_max ? b->list_max : HUSK_LIST_MAX_DEFAULT,
                        .cb = cb,
                        .ctx = ctx,
                        .err = err};
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
  cleanup_target struct resolve_target t = {.dir = -1};
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
      fd = resolve_area(b, t.area, err);
    else if (resolve_open(b, path, O_PATH, false, &fd, err) < 0)
      return -1;
    if (fd < 0)
      return -1;
    if (fstat(fd, &st) < 0)
      return husk_error(err, errno, "cannot stat `%s`", path);
    if (t.area >= 0)
      name = box_area_path[t.area] + (t.area == BOX_AREA_SHM ? 5 : 1);
  }
  out->name = strdup(name);
  out->path = resolve_display_path(path);
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
        return husk_fail(err, ENOTDIR,
                         "cannot create `%s`: it or a parent exists and is not a directory", path);
      return -1;
    }
    return 0;
  }
  cleanup_target struct resolve_target t = {.dir = -1};
  if (resolve_parent(b, path, false, &t, err) < 0)
    return -1;
  if (t.area >= 0)
    return husk_fail(err, EEXIST, "`%s` exists", path);
  if (resolve_need_entry(&t, path, "create", err) < 0)
    return -1;
  if (mkdirat(t.dir, t.name, 0700) < 0) {
    if (errno == EEXIST)
      return husk_fail(err, EEXIST, "`%s` exists", path);
    return husk_error(err, errno, "cannot create directory `%s`", path);
  }
  cleanup_close int fd = resolve_child(t.dir, t.name, O_RDONLY | O_DIRECTORY);
  if (fd < 0)
    return 0; /* swapped by the box already: nothing of ours to hand over */
  return box_own_fd(b, fd, 0755, path, err);
}

int husk_file_move(const struct husk_fs *b, const char *from, const char *to, bool overwrite,
                   struct husk_err *err) {
  cleanup_target struct resolve_target f = {.dir = -1};
  cleanup_target struct resolve_target t = {.dir = -1};
  if (resolve_parent(b, from, false, &f, err) < 0 || resolve_need_entry(&f, from, "move", err) < 0)
    return -1;
  if (resolve_parent(b, to, false, &t, err) < 0 || resolve_need_entry(&t, to, "replace", err) < 0)
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
      int child = resolve_child(cur, n, O_RDONLY | O_DIRECTORY);
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
        return husk_fail(err, ELOOP, "`%s` is nested more than %d levels deep", what,
                         REMOVE_MAX_DEPTH);
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
        resolve_same_inode(&st, &root)) {
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
  for (int tries = 0; tries < RESOLVE_MAX_RETRIES; tries++) {
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
    cleanup_close int dir = resolve_child(parent, name, O_RDONLY | O_DIRECTORY);
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

int husk_file_remove(const struct husk_fs *b, const char *path, bool recursive,
                     struct husk_err *err) {
  cleanup_target struct resolve_target t = {.dir = -1};
  if (resolve_parent(b, path, false, &t, err) < 0 ||
      resolve_need_entry(&t, path, "remove", err) < 0)
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
    struct box_walk_entry e = {
        .dirfd = f->fd, .name = name, .rel = rel, .st = &st, .depth = top + 1};
    int r = cb(ctx, &e);
    if (r < 0) {
      rc = -1;
      break;
    }
    if (r == BOX_WALK_STOP)
      break;
    if (r != 0 || !S_ISDIR(st.st_mode) || top + 1 >= max_depth)
      continue;
    int c = resolve_child(f->fd, name, O_RDONLY | O_DIRECTORY);
    if (c < 0) {
      if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP)
        continue; /* swapped for something else since the fstatat */
      rc = husk_error(err, errno, "cannot open `%s`", rel);
      break;
    }
    struct stat cs;
    if (fstat(c, &cs) < 0 || !resolve_same_inode(&cs, &st)) {
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
