#define _GNU_SOURCE
#include "box/copy.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jail/syscalls.h"
#include "util/cleanup.h"

struct link_entry {
  dev_t dev;
  ino_t ino;
  char *relpath; /* of the first copy, relative to the destination root */
};

struct walk {
  const struct copy_opts *o;
  struct copy_stats *st;
  struct husk_err *err;
  int dst_root;
  struct link_entry *links;
  size_t nlinks, caplinks;
  char path[PATH_MAX]; /* current relative path, for messages and links */
};

static void skip(struct walk *w, const char *why) {
  w->st->skipped++;
  if (w->o->skipped)
    w->o->skipped(w->o->ctx, w->path, why);
}

/* Append "/name" to w->path; returns the previous length, or -1 if too long. */
static int path_push(struct walk *w, const char *name) {
  size_t len = strlen(w->path);
  int n = snprintf(w->path + len, sizeof w->path - len, "%s%s", len ? "/" : "", name);
  if (n < 0 || (size_t)n >= sizeof w->path - len) {
    w->path[len] = '\0';
    return -1;
  }
  return (int)len;
}

static int set_meta(struct walk *w, int dirfd, const char *name, int fd, const struct stat *s) {
  bool own = w->o->uid != (uid_t)-1;
  if (own || w->o->keep_owner) {
    uid_t u = own ? w->o->uid : s->st_uid;
    gid_t g = own ? w->o->gid : s->st_gid;
    int rc = fd >= 0 ? fchown(fd, u, g) : fchownat(dirfd, name, u, g, AT_SYMLINK_NOFOLLOW);
    if (rc < 0)
      return husk_error(w->err, errno, "cannot set owner of `%s`", w->path);
  }
  struct timespec ts[2] = {s->st_atim, s->st_mtim};
  if (fd >= 0) {
    /* Permission bits only: never setuid/setgid on a copied file. */
    mode_t mode = s->st_mode & (S_ISDIR(s->st_mode) ? 01777 : 0777);
    if (fchmod(fd, mode) < 0)
      return husk_error(w->err, errno, "cannot set mode of `%s`", w->path);
    if (futimens(fd, ts) < 0)
      return husk_error(w->err, errno, "cannot set times of `%s`", w->path);
  } else if (utimensat(dirfd, name, ts, AT_SYMLINK_NOFOLLOW) < 0) {
    return husk_error(w->err, errno, "cannot set times of `%s`", w->path);
  }
  return 0;
}

/* Make room for a new entry `name` in dst: returns 1 if a directory is
 * already there (to merge into), 0 if the name is free, -1 on error. */
static int clear_dst(struct walk *w, int dst, const char *name, bool want_dir) {
  struct stat d;
  if (fstatat(dst, name, &d, AT_SYMLINK_NOFOLLOW) < 0) {
    if (errno == ENOENT)
      return 0;
    return husk_error(w->err, errno, "cannot inspect destination `%s`", w->path);
  }
  if (S_ISDIR(d.st_mode)) {
    if (want_dir)
      return 1;
    skip(w, "a directory of that name exists in the destination");
    return 2;
  }
  /* A file or a symlink: removing it never touches what a link points to. */
  if (unlinkat(dst, name, 0) < 0)
    return husk_error(w->err, errno, "cannot replace `%s`", w->path);
  return 0;
}

static int copy_data(struct walk *w, int in, int out, off_t size) {
  off_t pos = 0;
  cleanup_free char *buf = NULL;
  while (pos < size) {
    off_t data = lseek(in, pos, SEEK_DATA);
    if (data < 0) {
      if (errno == ENXIO)
        break; /* only a hole left */
      data = pos; /* SEEK_DATA unsupported: copy densely */
    }
    off_t hole = lseek(in, data, SEEK_HOLE);
    if (hole < 0)
      hole = size;
    if (lseek(in, data, SEEK_SET) < 0 || lseek(out, data, SEEK_SET) < 0)
      return husk_error(w->err, errno, "seek in `%s`", w->path);
    off_t left = hole - data;
    while (left > 0) {
      ssize_t n = copy_file_range(in, NULL, out, NULL, (size_t)(left > (1 << 30) ? (1 << 30) : left), 0);
      if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == EOPNOTSUPP || errno == ENOSYS)) {
        if (!buf && !(buf = malloc(1 << 17)))
          return husk_error(w->err, ENOMEM, "copy buffer");
        ssize_t r = read(in, buf, (size_t)(left > (1 << 17) ? (1 << 17) : left));
        if (r < 0 && errno == EINTR)
          continue;
        if (r < 0)
          return husk_error(w->err, errno, "read `%s`", w->path);
        if (r == 0)
          break;
        for (ssize_t off = 0; off < r;) {
          ssize_t m = write(out, buf + off, (size_t)(r - off));
          if (m < 0 && errno == EINTR)
            continue;
          if (m < 0)
            return husk_error(w->err, errno, "write `%s`", w->path);
          off += m;
        }
        n = r;
      } else if (n < 0) {
        if (errno == EINTR)
          continue;
        return husk_error(w->err, errno, "copy `%s`", w->path);
      } else if (n == 0) {
        break; /* file shrank under us */
      }
      left -= n;
      w->st->bytes += (uint64_t)n;
    }
    pos = hole;
  }
  if (ftruncate(out, size) < 0)
    return husk_error(w->err, errno, "set size of `%s`", w->path);
  return 0;
}

static int remember_link(struct walk *w, const struct stat *s) {
  if (w->nlinks == w->caplinks) {
    size_t cap = w->caplinks ? w->caplinks * 2 : 64;
    struct link_entry *n = realloc(w->links, cap * sizeof *n);
    if (!n)
      return husk_error(w->err, ENOMEM, "hardlink table");
    w->links = n;
    w->caplinks = cap;
  }
  char *p = strdup(w->path);
  if (!p)
    return husk_error(w->err, ENOMEM, "hardlink table");
  w->links[w->nlinks++] = (struct link_entry){.dev = s->st_dev, .ino = s->st_ino, .relpath = p};
  return 0;
}

/* If this inode was copied before, link to that copy.  1 = linked. */
static int try_link(struct walk *w, int dst, const char *name, const struct stat *s) {
  for (size_t i = 0; i < w->nlinks; i++) {
    if (w->links[i].dev != s->st_dev || w->links[i].ino != s->st_ino)
      continue;
    const char *rel = w->links[i].relpath;
    const char *slash = strrchr(rel, '/');
    cleanup_close int parent = -1;
    if (slash) {
      char dir[PATH_MAX];
      snprintf(dir, sizeof dir, "%.*s", (int)(slash - rel), rel);
      parent = sys_openat2(w->dst_root, dir, O_PATH | O_DIRECTORY | O_CLOEXEC, 0,
                           RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS);
      if (parent < 0)
        return 0; /* fall back to a plain copy */
    }
    if (linkat(slash ? parent : w->dst_root, slash ? slash + 1 : rel, dst, name, 0) < 0)
      return 0;
    w->st->hardlinks++;
    return 1;
  }
  return 0;
}

static int copy_dir(struct walk *w, int src, int dst, unsigned depth);

static int copy_entry(struct walk *w, int src, int dst, const char *name, unsigned depth) {
  struct stat s;
  if (fstatat(src, name, &s, AT_SYMLINK_NOFOLLOW) < 0) {
    if (errno == ENOENT)
      return 0; /* vanished */
    return husk_error(w->err, errno, "cannot inspect `%s`", w->path);
  }
  int c;
  if (S_ISDIR(s.st_mode)) {
    if (depth >= w->o->max_depth) {
      skip(w, "directory nesting too deep");
      return 0;
    }
    if ((c = clear_dst(w, dst, name, true)) < 0)
      return -1;
    if (c == 2)
      return 0;
    if (c == 0 && mkdirat(dst, name, 0700) < 0)
      return husk_error(w->err, errno, "cannot create directory `%s`", w->path);
    cleanup_close int sfd = openat(src, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sfd < 0)
      return husk_error(w->err, errno, "cannot open directory `%s`", w->path);
    cleanup_close int dfd = openat(dst, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
      return husk_error(w->err, errno, "cannot open destination directory `%s`", w->path);
    w->st->dirs++;
    if (copy_dir(w, sfd, dfd, depth + 1) < 0)
      return -1;
    return set_meta(w, dst, name, dfd, &s);
  }
  if (S_ISLNK(s.st_mode)) {
    if (s.st_size <= 0 || s.st_size >= PATH_MAX) {
      skip(w, "symlink target too long");
      return 0;
    }
    char target[PATH_MAX];
    ssize_t n = readlinkat(src, name, target, sizeof target - 1);
    if (n < 0)
      return husk_error(w->err, errno, "cannot read symlink `%s`", w->path);
    target[n] = '\0';
    if ((c = clear_dst(w, dst, name, false)) < 0)
      return -1;
    if (c == 2)
      return 0;
    if (symlinkat(target, dst, name) < 0)
      return husk_error(w->err, errno, "cannot create symlink `%s`", w->path);
    w->st->symlinks++;
    return set_meta(w, dst, name, -1, &s);
  }
  if (!S_ISREG(s.st_mode)) {
    skip(w, "not a regular file, directory or symlink");
    return 0;
  }
  if ((c = clear_dst(w, dst, name, false)) < 0)
    return -1;
  if (c == 2)
    return 0;
  if (s.st_nlink > 1) {
    int l = try_link(w, dst, name, &s);
    if (l > 0)
      return 0;
  }
  /* O_NONBLOCK: if the entry was swapped for a FIFO, opening cannot hang. */
  cleanup_close int in = openat(src, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (in < 0)
    return husk_error(w->err, errno, "cannot open `%s`", w->path);
  struct stat fs;
  if (fstat(in, &fs) < 0)
    return husk_error(w->err, errno, "cannot inspect `%s`", w->path);
  if (!S_ISREG(fs.st_mode) || fs.st_ino != s.st_ino || fs.st_dev != s.st_dev) {
    skip(w, "changed while being copied");
    return 0;
  }
  cleanup_close int out = openat(dst, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (out < 0)
    return husk_error(w->err, errno, "cannot create `%s`", w->path);
  if (copy_data(w, in, out, fs.st_size) < 0)
    return -1;
  w->st->files++;
  if (fs.st_nlink > 1 && remember_link(w, &fs) < 0)
    return -1;
  return set_meta(w, dst, name, out, &fs);
}

static int copy_dir(struct walk *w, int src, int dst, unsigned depth) {
  /* A new open file description, not a dup: a dup would share (and move)
   * the caller's directory position, and a second copy from the same fd
   * would then see no entries at all. */
  int dup = openat(src, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dup < 0)
    return husk_error(w->err, errno, "cannot open `%s`", w->path[0] ? w->path : ".");
  cleanup_closedir DIR *d = fdopendir(dup);
  if (!d) {
    close(dup);
    return husk_error(w->err, errno, "cannot list `%s`", w->path[0] ? w->path : ".");
  }
  for (;;) {
    errno = 0;
    struct dirent *e = readdir(d);
    if (!e) {
      if (errno)
        return husk_error(w->err, errno, "cannot list `%s`", w->path[0] ? w->path : ".");
      break;
    }
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
      continue;
    int saved = path_push(w, e->d_name);
    if (saved < 0) {
      skip(w, "path too long");
      continue;
    }
    int rc = copy_entry(w, src, dst, e->d_name, depth);
    w->path[saved] = '\0';
    if (rc < 0)
      return -1;
  }
  return 0;
}

int copy_tree(int src_dir, int dst_dir, const struct copy_opts *opts, struct copy_stats *st,
              struct husk_err *err) {
  struct copy_stats local = {0};
  struct walk w = {.o = opts, .st = st ? st : &local, .err = err, .dst_root = dst_dir};
  w.path[0] = '\0';
  int rc = copy_dir(&w, src_dir, dst_dir, 0);
  for (size_t i = 0; i < w.nlinks; i++)
    free(w.links[i].relpath);
  free(w.links);
  return rc;
}
