/* Tar streams of box directories (see tar.h for the contract).
 *
 * Writing walks the tree with box_tree_walk() (fd-relative, O_NOFOLLOW,
 * names sorted) and hands libarchive headers and bytes.  Reading takes
 * headers and data blocks from libarchive and creates every entry itself,
 * relative to the destination directory fd, resolving parents with
 * RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS. */
#define _GNU_SOURCE
#include "box/tar.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "box/tar_source.h"
#include "jail/syscalls.h"
#include "util/cleanup.h"
#include "util/fileio.h"

#define TAR_MAX_FILE_SIZE (1ULL << 44) /* 16 TiB logical: holes cost a call per ZERO_SPAN */
#define TAR_MAX_REGIONS (1U << 20)     /* data extents of one sparse file */
#define ZERO_SPAN ((size_t)1 << 30)    /* read-only zero pages fed for holes */
#define IO_CHUNK ((size_t)256 * 1024)

static int open_beneath(int dirfd, const char *path, int flags) {
  return sys_openat2(dirfd, path, (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC), 0,
                     RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV);
}

static bool out_of_space(int e) {
  return e == ENOSPC || e == EDQUOT;
}

/* ======================================================================
 * Writing
 * ====================================================================== */

struct tw {
  const struct husk_fs *b;
  struct archive *a;
  int (*out)(void *, const void *, size_t);
  void *ctx;
  struct husk_err *err;
  const char *path;
  bool out_failed; /* the consumer refused bytes */
  bool abandon;    /* a failure: write nothing more, not even the trailer */
  int out_errno;
  int skipped;
  struct tar_links links;
  void *zeros;      /* ZERO_SPAN of PROT_READ zero pages, mapped on first need */
  char *buf;
  struct tar_regions regions;
};

static la_ssize_t tw_write(struct archive *a, void *cd, const void *buf, size_t len) {
  struct tw *t = cd;
  if (t->abandon || t->out_failed) {
    archive_set_error(a, ECANCELED, "archive abandoned");
    return -1;
  }
  errno = 0;
  if (t->out(t->ctx, buf, len) < 0) {
    t->out_failed = true;
    t->out_errno = errno ? errno : EPIPE;
    archive_set_error(a, t->out_errno, "the consumer stopped reading");
    return -1;
  }
  return (la_ssize_t)len;
}

static int tw_fail(struct tw *t, const char *rel) {
  t->abandon = true;
  if (t->out_failed)
    return husk_error(t->err, t->out_errno, "cannot send the archive of `%s`", t->path);
  int e = archive_errno(t->a);
  return husk_fail(t->err, e > 0 ? e : EIO, "cannot archive `%s` of `%s`: %s", rel, t->path,
                   archive_error_string(t->a) ? archive_error_string(t->a) : "libarchive error");
}

/* Give libarchive exactly n bytes from p (it takes at most INT_MAX a call). */
static int tw_feed(struct tw *t, const void *p, size_t n, const char *rel) {
  const char *c = p;
  while (n > 0) {
    la_ssize_t w = archive_write_data(t->a, c, n);
    if (w <= 0)
      return tw_fail(t, rel);
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

static int tw_zeros(struct tw *t, uint64_t n, const char *rel) {
  if (n && !t->zeros) {
    void *z = mmap(NULL, ZERO_SPAN, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (z == MAP_FAILED)
      return husk_error(t->err, errno, "zero pages");
    t->zeros = z;
  }
  while (n > 0) {
    size_t c = n > ZERO_SPAN ? ZERO_SPAN : (size_t)n;
    if (tw_feed(t, t->zeros, c, rel) < 0)
      return -1;
    n -= c;
  }
  return 0;
}

/* Bytes [off, off+len) of fd; zeros past its end if it shrank meanwhile
 * (the header already promised `len` bytes). */
static int tw_data(struct tw *t, int fd, int64_t off, int64_t len, const char *rel) {
  while (len > 0) {
    size_t want = len > (int64_t)IO_CHUNK ? IO_CHUNK : (size_t)len;
    ssize_t r = pread(fd, t->buf, want, off);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      t->abandon = true;
      return husk_error(t->err, errno, "cannot read `%s` of `%s`", rel, t->path);
    }
    if (r == 0)
      return tw_zeros(t, (uint64_t)len, rel);
    if (tw_feed(t, t->buf, (size_t)r, rel) < 0)
      return -1;
    off += r;
    len -= r;
  }
  return 0;
}

static int tw_header(struct tw *t, struct archive_entry *e, const char *rel) {
  int r = archive_write_header(t->a, e);
  if (r == ARCHIVE_OK || r == ARCHIVE_WARN)
    return 0;
  if (r == ARCHIVE_FAILED && !t->out_failed) {
    t->skipped++; /* this entry only */
    return 1;
  }
  return tw_fail(t, rel);
}

static int tw_file(struct tw *t, const struct box_walk_entry *we, struct archive_entry *e) {
  /* O_NONBLOCK: swapped for a FIFO, or leased by the box, it cannot hang us. */
  cleanup_close int fd = open_beneath(we->dirfd, we->name, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    if (errno == EMFILE || errno == ENFILE || errno == ENOMEM) {
      t->abandon = true;
      return husk_error(t->err, errno, "cannot open `%s`", we->rel);
    }
    t->skipped++; /* gone, swapped for a symlink or a socket, leased */
    return 0;
  }
  struct stat st;
  if (fstat(fd, &st) < 0) {
    t->abandon = true;
    return husk_error(t->err, errno, "cannot inspect `%s`", we->rel);
  }
  if (!S_ISREG(st.st_mode) || st.st_ino != we->st->st_ino || st.st_dev != we->st->st_dev) {
    t->skipped++; /* changed under us */
    return 0;
  }
  archive_entry_set_filetype(e, AE_IFREG);
  archive_entry_set_perm(e, st.st_mode & 0777);
  archive_entry_set_mtime(e, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
  if (st.st_nlink > 1) {
    const char *first = tar_links_find(&t->links, &st);
    if (!first && tar_links_add(&t->links, &st, we->rel) < 0) {
      t->abandon = true;
      return husk_error(t->err, ENOMEM, "hardlink table");
    }
    if (first) {
      archive_entry_set_hardlink(e, first);
      archive_entry_set_size(e, 0);
      return tw_header(t, e, we->rel) < 0 ? -1 : 0;
    }
  }
  if ((uint64_t)st.st_size > TAR_MAX_FILE_SIZE) {
    t->skipped++;
    return 0;
  }
  int rr = tar_regions_of(&t->regions, fd, &st, TAR_MAX_REGIONS);
  if (rr < 0) {
    t->abandon = true;
    return husk_error(t->err, ENOMEM, "sparse map");
  }
  size_t n = t->regions.n;
  const struct tar_region *reg = t->regions.r;
  if (rr > 0) {
    t->skipped++; /* too fragmented to describe */
    return 0;
  }
  archive_entry_set_size(e, st.st_size);
  for (size_t i = 0; i < n; i++)
    archive_entry_sparse_add_entry(e, reg[i].off, reg[i].len);
  if (n == 0 && st.st_size > 0)
    archive_entry_sparse_add_entry(e, st.st_size, 0); /* all hole */
  int h = tw_header(t, e, we->rel);
  if (h != 0)
    return h < 0 ? -1 : 0;
  /* The pax writer wants the whole logical stream and drops hole bytes. */
  int64_t pos = 0;
  for (size_t i = 0; i < n; i++) {
    if (tw_zeros(t, (uint64_t)(reg[i].off - pos), we->rel) < 0 ||
        tw_data(t, fd, reg[i].off, reg[i].len, we->rel) < 0)
      return -1;
    pos = reg[i].off + reg[i].len;
  }
  return tw_zeros(t, (uint64_t)(st.st_size - pos), we->rel);
}

static int tw_entry(void *ctx, const struct box_walk_entry *we) {
  struct tw *t = ctx;
  const struct stat *st = we->st;
  if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode) && !S_ISLNK(st->st_mode)) {
    t->skipped++; /* FIFO, socket, device */
    return 1;
  }
  struct archive_entry *e = archive_entry_new();
  if (!e) {
    t->abandon = true;
    return husk_error(t->err, ENOMEM, "archive entry");
  }
  archive_entry_set_pathname(e, we->rel);
  archive_entry_set_uid(e, 0);
  archive_entry_set_gid(e, 0);
  archive_entry_set_mtime(e, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
  int rc = 0;
  if (S_ISDIR(st->st_mode)) {
    archive_entry_set_filetype(e, AE_IFDIR);
    archive_entry_set_perm(e, st->st_mode & 01777);
    rc = tw_header(t, e, we->rel);
    if (rc == 0 && we->depth >= HUSK_TAR_MAX_DEPTH)
      t->skipped++; /* archived, but not what is inside: too deep */
  } else if (S_ISLNK(st->st_mode)) {
    char target[PATH_MAX];
    ssize_t n = readlinkat(we->dirfd, we->name, target, sizeof target);
    if (n <= 0 || (size_t)n >= sizeof target) {
      t->skipped++; /* swapped, or unreadable */
    } else {
      target[n] = '\0';
      archive_entry_set_filetype(e, AE_IFLNK);
      archive_entry_set_perm(e, 0777);
      archive_entry_set_symlink(e, target);
      rc = tw_header(t, e, we->rel);
    }
  } else {
    rc = tw_file(t, we, e);
  }
  archive_entry_free(e);
  if (rc < 0)
    return -1;
  return rc > 0 ? 1 : 0;
}

int husk_tar_write(const struct husk_fs *b, const char *path,
                  int (*out)(void *ctx, const void *buf, size_t len), void *ctx, struct husk_err *err) {
  cleanup_close int dir = -1;
  if (box_open_dir(b, path, false, &dir, err) < 0)
    return -1;
  struct tw t = {.b = b, .out = out, .ctx = ctx, .err = err, .path = path};
  if (!(t.buf = malloc(IO_CHUNK)) || !(t.a = archive_write_new())) {
    free(t.buf);
    return husk_error(err, ENOMEM, "archive writer");
  }
  int rc = -1;
  if (archive_write_set_format_pax_restricted(t.a) != ARCHIVE_OK ||
      archive_write_open2(t.a, &t, NULL, tw_write, NULL, NULL) != ARCHIVE_OK) {
    tw_fail(&t, ".");
    goto out;
  }
  if (box_tree_walk(dir, HUSK_TAR_MAX_DEPTH, tw_entry, &t, err) < 0) {
    t.abandon = true;
    goto out;
  }
  if (archive_write_close(t.a) != ARCHIVE_OK) {
    tw_fail(&t, ".");
    goto out;
  }
  rc = t.skipped;
out:
  t.abandon = t.abandon || rc < 0;
  archive_write_free(t.a);
  tar_links_free(&t.links);
  tar_regions_free(&t.regions);
  free(t.buf);
  if (t.zeros)
    munmap(t.zeros, ZERO_SPAN);
  return rc;
}

/* ======================================================================
 * Reading
 * ====================================================================== */

#define IN_CHUNK ((size_t)64 * 1024)

struct tr {
  const struct husk_fs *b;
  struct archive *a;
  ssize_t (*in)(void *, void *, size_t);
  void *ctx;
  struct husk_err *err;
  const char *path;
  bool in_failed;
  int in_errno;
  int dest;
  int skipped;
  char *buf;
};

static la_ssize_t tr_read(struct archive *a, void *cd, const void **buf) {
  struct tr *t = cd;
  for (;;) {
    errno = 0;
    ssize_t n = t->in(t->ctx, t->buf, IN_CHUNK);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 || (size_t)n > IN_CHUNK) {
      t->in_failed = true;
      t->in_errno = errno ? errno : EIO;
      archive_set_error(a, t->in_errno, "reading the upload failed");
      return -1;
    }
    *buf = t->buf;
    return n;
  }
}

static int tr_archive_fail(struct tr *t, const char *what) {
  if (t->in_failed)
    return husk_error(t->err, t->in_errno, "cannot read the archive for `%s`", t->path);
  const char *m = archive_error_string(t->a);
  return husk_fail(t->err, EINVAL, "damaged archive (%s): %s", what, m ? m : "unknown error");
}

/* A fatal filesystem error (out of space, fds, memory) ends the extraction;
 * anything else about one entry (a name in the way, a symlink where a
 * directory should be, a hardlink to nowhere) only skips it. */
static int tr_fs_error(struct tr *t, int e, const char *rel) {
  if (out_of_space(e))
    return husk_fail(t->err, ENOSPC, "the box is out of space (extracting `%s` into `%s`)", rel, t->path);
  if (e == ENOMEM || e == EMFILE || e == ENFILE || e == EIO || e == EROFS || e == EBADF)
    return husk_error(t->err, e, "cannot extract `%s` into `%s`", rel, t->path);
  t->skipped++;
  return 0;
}

/* Archive name -> safe relative path: leading "/" and "." components
 * dropped; 0 (skip) for ".." anywhere, a component longer than NAME_MAX or
 * a path too long. */
static int clean_name(const char *raw, char *out, size_t cap) {
  size_t o = 0;
  for (const char *p = raw; *p;) {
    while (*p == '/')
      p++;
    const char *s = p;
    while (*p && *p != '/')
      p++;
    size_t n = (size_t)(p - s);
    if (n == 0 || (n == 1 && s[0] == '.'))
      continue;
    if ((n == 2 && s[0] == '.' && s[1] == '.') || n > NAME_MAX)
      return 0;
    if (o + (o ? 1 : 0) + n + 1 > cap)
      return 0;
    if (o)
      out[o++] = '/';
    memcpy(out + o, s, n);
    o += n;
  }
  out[o] = '\0';
  return 1;
}

/* Directory `rel` under the destination, never through a symlink; missing
 * directories are created when `create`.  -1 with errno. */
static int tr_dir_fd(struct tr *t, const char *rel, bool create) {
  if (!*rel)
    return fcntl(t->dest, F_DUPFD_CLOEXEC, 3);
  int fd = open_beneath(t->dest, rel, O_PATH | O_DIRECTORY);
  if (fd >= 0 || errno != ENOENT || !create)
    return fd;
  /* Slow path: one component at a time, creating what is missing. */
  cleanup_close int cur = fcntl(t->dest, F_DUPFD_CLOEXEC, 3);
  if (cur < 0)
    return -1;
  char comp[NAME_MAX + 1];
  for (const char *p = rel; *p;) {
    const char *s = p;
    while (*p && *p != '/')
      p++;
    size_t n = (size_t)(p - s);
    memcpy(comp, s, n);
    comp[n] = '\0';
    if (*p == '/')
      p++;
    int c = open_beneath(cur, comp, O_PATH | O_DIRECTORY);
    if (c < 0 && errno == ENOENT) {
      struct husk_err e2;
      c = box_mkdir_at(t->b, cur, comp, 0755, comp, &e2);
      if (c < 0) {
        errno = e2.code ? e2.code : EIO;
        return -1;
      }
    }
    if (c < 0)
      return -1;
    close_quiet(cur);
    cur = c;
  }
  return take_fd(&cur);
}

static void split(char *rel, char **parent, char **name) {
  char *slash = strrchr(rel, '/');
  if (slash) {
    *slash = '\0';
    *parent = rel;
    *name = slash + 1;
  } else {
    *parent = rel + strlen(rel); /* "" */
    *name = rel;
  }
}


static int tr_file(struct tr *t, struct archive_entry *e, int pfd, const char *name, const char *rel) {
  struct husk_err e2;
  cleanup_close int fd = box_tmpfile_at(t->b, pfd, archive_entry_perm(e) & 0777, rel, &e2);
  if (fd < 0)
    return tr_fs_error(t, e2.code, rel) < 0 ? -1 : 0;
  for (;;) {
    const void *buf;
    size_t size;
    la_int64_t off;
    int r = archive_read_data_block(t->a, &buf, &size, &off);
    if (r == ARCHIVE_EOF)
      break;
    if (r < ARCHIVE_WARN)
      return tr_archive_fail(t, rel);
    if (off < 0)
      return husk_fail(t->err, EINVAL, "damaged archive (%s): negative offset", rel);
    int w = write_block_sparse(fd, buf, size, off);
    if (w < 0) {
      if (out_of_space(errno) || errno == EFBIG || errno == EINVAL)
        return tr_fs_error(t, out_of_space(errno) ? ENOSPC : errno, rel) < 0 ? -1 : 0;
      return husk_error(t->err, errno, "cannot write `%s`", rel);
    }
  }
  if (archive_entry_size_is_set(e) && archive_entry_size(e) >= 0 &&
      ftruncate(fd, (off_t)archive_entry_size(e)) < 0)
    return tr_fs_error(t, errno, rel) < 0 ? -1 : 0;
  if (archive_entry_mtime_is_set(e)) {
    struct timespec ts[2] = {{archive_entry_mtime(e), archive_entry_mtime_nsec(e)}};
    ts[1] = ts[0];
    futimens(fd, ts);
  }
  if (box_publish_at(pfd, name, fd, -1, NULL, rel, &e2) < 0)
    return tr_fs_error(t, e2.code, rel) < 0 ? -1 : 0;
  return 0;
}

static int tr_dir(struct tr *t, struct archive_entry *e, int pfd, const char *name, const char *rel) {
  struct husk_err e2;
  cleanup_close int fd = open_beneath(pfd, name, O_PATH | O_DIRECTORY);
  if (fd >= 0)
    return 0; /* exists: merge into it, keep its mode */
  if (errno == ENOTDIR || errno == ELOOP) {
    /* A file or symlink has the name: replace it (unlink never follows). */
    if (unlinkat(pfd, name, 0) < 0 && errno != ENOENT)
      return tr_fs_error(t, errno, rel) < 0 ? -1 : 0;
  } else if (errno != ENOENT) {
    return tr_fs_error(t, errno, rel) < 0 ? -1 : 0;
  }
  fd = box_mkdir_at(t->b, pfd, name, archive_entry_perm(e) & 01777, rel, &e2);
  if (fd < 0)
    return tr_fs_error(t, e2.code, rel) < 0 ? -1 : 0;
  return 0;
}

static int tr_hardlink(struct tr *t, const char *raw_target, int pfd, const char *name, const char *rel) {
  char target[PATH_MAX];
  if (!clean_name(raw_target, target, sizeof target) || !*target) {
    t->skipped++;
    return 0;
  }
  char *tparent, *tname;
  split(target, &tparent, &tname);
  cleanup_close int tdir = tr_dir_fd(t, tparent, false);
  if (tdir < 0)
    return tr_fs_error(t, errno, rel) < 0 ? -1 : 0;
  struct stat st;
  /* Only files and symlinks: linkat() refuses directories anyway. */
  if (fstatat(tdir, tname, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(st.st_mode)) {
    t->skipped++;
    return 0;
  }
  struct husk_err e2;
  if (box_publish_at(pfd, name, -1, tdir, tname, rel, &e2) < 0)
    return tr_fs_error(t, e2.code, rel) < 0 ? -1 : 0;
  return 0;
}

static int tr_entry(struct tr *t, struct archive_entry *e) {
  const char *raw = archive_entry_pathname(e);
  char rel[PATH_MAX];
  if (!raw || !clean_name(raw, rel, sizeof rel)) {
    t->skipped++;
    return 0;
  }
  if (!*rel)
    return 0; /* "./" or "/": the destination itself */
  char what[PATH_MAX];
  memcpy(what, rel, strlen(rel) + 1);
  char *parent, *name;
  split(rel, &parent, &name);
  const char *hardlink = archive_entry_hardlink(e);
  mode_t type = archive_entry_filetype(e);
  if (!hardlink && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK) {
    t->skipped++; /* devices, FIFOs, sockets never reach the disk */
    return 0;
  }
  cleanup_close int pfd = tr_dir_fd(t, parent, true);
  if (pfd < 0)
    return tr_fs_error(t, errno, what) < 0 ? -1 : 0;
  if (hardlink)
    return tr_hardlink(t, hardlink, pfd, name, what);
  if (type == AE_IFDIR)
    return tr_dir(t, e, pfd, name, what);
  if (type == AE_IFLNK) {
    const char *target = archive_entry_symlink(e);
    if (!target || !*target || strlen(target) >= PATH_MAX) {
      t->skipped++;
      return 0;
    }
    struct timespec mt = {archive_entry_mtime(e), archive_entry_mtime_nsec(e)};
    struct husk_err e2;
    if (box_symlink_at(t->b, pfd, name, target, archive_entry_mtime_is_set(e) ? &mt : NULL, what, &e2) < 0)
      return tr_fs_error(t, e2.code, what) < 0 ? -1 : 0;
    return 0;
  }
  return tr_file(t, e, pfd, name, what);
}

int husk_tar_read(const struct husk_fs *b, const char *path,
                 ssize_t (*in)(void *ctx, void *buf, size_t cap), void *ctx, struct husk_err *err) {
  cleanup_close int dest = -1;
  if (box_open_dir(b, path, true, &dest, err) < 0)
    return -1;
  struct tr t = {.b = b, .in = in, .ctx = ctx, .err = err, .path = path, .dest = dest};
  if (!(t.buf = malloc(IN_CHUNK)) || !(t.a = archive_read_new())) {
    free(t.buf);
    return husk_error(err, ENOMEM, "archive reader");
  }
  int rc = -1;
  archive_read_support_format_tar(t.a);
  archive_read_support_format_empty(t.a);
  /* gzip only when built in: libarchive would otherwise run an external gzip. */
  if (archive_zlib_version())
    archive_read_support_filter_gzip(t.a);
  if (archive_read_open(t.a, &t, NULL, tr_read, NULL) != ARCHIVE_OK) {
    tr_archive_fail(&t, "start");
    goto out;
  }
  for (;;) {
    struct archive_entry *e;
    int r = archive_read_next_header(t.a, &e);
    if (r == ARCHIVE_EOF)
      break;
    if (r < ARCHIVE_WARN) {
      tr_archive_fail(&t, "header");
      goto out;
    }
    if (tr_entry(&t, e) < 0)
      goto out;
  }
  rc = t.skipped;
out:
  archive_read_free(t.a);
  free(t.buf);
  return rc;
}
