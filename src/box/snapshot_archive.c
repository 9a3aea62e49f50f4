/* A box's writable state as one archive (see snapshot_archive.h).
 *
 * Writing walks each of the four trees with box_tree_walk() (one fd per
 * depth level, no symlink followed, names sorted) and hands libarchive
 * headers and bytes; libarchive only formats (pax) and compresses (zstd).
 *
 * Reading takes headers and data blocks from libarchive and creates every
 * entry itself.  Each name is cleaned strictly and mapped onto one of the
 * four trees; its parent is opened beneath the box filesystem with
 * symlinks, magic links and mount crossings refused, so that nothing an
 * earlier entry planted (a symlink to /etc, say) can be traversed.  New
 * entries are made with O_CREAT|O_EXCL / mkdirat / symlinkat / mknodat
 * after whatever non-directory held the name was unlinked, so nothing is
 * ever written through.  Directories get their mode and mtime at the end,
 * deepest first: a read-only directory does not stop its own restore and
 * its children do not touch its mtime afterwards. */
#define _GNU_SOURCE
#include "box/snapshot_archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "box/files.h"
#include "box/tar_source.h"
#include "jail/syscalls.h"
#include "util/cleanup.h"
#include "util/fileio.h"

#define SNAP_UID_RANGE 65536U           /* owners inside a box: 0..65535 */
#define SNAP_NOBODY 65534U              /* the owner kept for a host id outside the range */
#define SNAP_XATTR_VALUE_MAX 65536U     /* one user.* value */
#define SNAP_XATTR_TOTAL_MAX (1U << 20) /* all user.* values of one entry */
#define SNAP_XATTR_COUNT_MAX 256U       /* xattrs of one entry */
#define SNAP_MAX_FILE_SIZE (1ULL << 44) /* 16 TiB logical: holes cost a call per ZERO_SPAN */
#define SNAP_MAX_REGIONS (1U << 20)     /* data extents of one sparse file */
#define ZERO_SPAN ((size_t)1 << 30)     /* read-only zero pages fed for holes */
#define IO_CHUNK ((size_t)256 * 1024)
#define IN_CHUNK ((size_t)64 * 1024)
#define OPAQUE_XATTR "trusted.overlay.opaque"

#define RESOLVE_SAFE                                                                               \
  (RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV)

/* The four trees: archive root name, path in the box filesystem. */
static const struct {
  const char *name;
  const char *path;
} roots[] = {{"workspace", "workspace"}, {"tmp", "tmp"}, {"shm", "shm"}, {"upper", "rootfs/upper"}};
#define NROOTS 4
#define ROOT_UPPER 3

static int open_beneath(int dirfd, const char *path, int flags) {
  return sys_openat2(dirfd, path, (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC), 0, RESOLVE_SAFE);
}

static bool out_of_space(int e) { return e == ENOSPC || e == EDQUOT; }

/* ======================================================================
 * Writing
 * ====================================================================== */

struct sw {
  struct archive *a;
  int (*out)(void *, const void *, size_t);
  void *ctx;
  struct husk_err *err;
  struct snap_stats *st;
  uint32_t uid_base;
  int root; /* index in roots[] of the tree being walked */
  bool out_failed, abandon;
  int out_errno;
  struct tar_links links;
  void *zeros;
  char *buf;   /* IO_CHUNK */
  char *xlist; /* XATTR_LIST_MAX */
  char *xval;  /* SNAP_XATTR_VALUE_MAX */
  struct tar_regions regions;
  char name[PATH_MAX]; /* archive name of the current entry */
};

static la_ssize_t sw_write(struct archive *a, void *cd, const void *buf, size_t len) {
  struct sw *t = cd;
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

static int sw_fail(struct sw *t) {
  t->abandon = true;
  if (t->out_failed)
    return husk_error(t->err, t->out_errno, "cannot send the snapshot archive");
  int e = archive_errno(t->a);
  const char *m = archive_error_string(t->a);
  return husk_fail(t->err, e > 0 ? e : EIO, "cannot archive `%s`: %s", t->name,
                   m ? m : "libarchive error");
}

/* The errno of a failure that ends the walk (as opposed to one entry that
 * vanished or changed, which is skipped). */
static bool fatal_errno(int e) { return e == EMFILE || e == ENFILE || e == ENOMEM || e == EIO; }

static uint32_t box_id(uint32_t host, uint32_t base) {
  return host >= base && host - base < SNAP_UID_RANGE ? host - base : SNAP_NOBODY;
}

/* Give libarchive exactly n bytes from p. */
static int sw_feed(struct sw *t, const void *p, size_t n) {
  const char *c = p;
  while (n > 0) {
    la_ssize_t w = archive_write_data(t->a, c, n);
    if (w <= 0)
      return sw_fail(t);
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

static int sw_zeros(struct sw *t, uint64_t n) {
  if (n && !t->zeros) {
    void *z = mmap(NULL, ZERO_SPAN, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (z == MAP_FAILED) {
      t->abandon = true;
      return husk_error(t->err, errno, "zero pages");
    }
    t->zeros = z;
  }
  while (n > 0) {
    size_t c = n > ZERO_SPAN ? ZERO_SPAN : (size_t)n;
    if (sw_feed(t, t->zeros, c) < 0)
      return -1;
    n -= c;
  }
  return 0;
}

/* Exactly len bytes [off, off+len) of fd: zeros past its end if it shrank
 * meanwhile, never more than the header promised if it grew. */
static int sw_data(struct sw *t, int fd, int64_t off, int64_t len) {
  while (len > 0) {
    size_t want = len > (int64_t)IO_CHUNK ? IO_CHUNK : (size_t)len;
    ssize_t r = pread(fd, t->buf, want, off);
    if (r < 0 && errno == EINTR)
      continue;
    if (r < 0) {
      t->abandon = true;
      return husk_error(t->err, errno, "cannot read `%s`", t->name);
    }
    if (r == 0)
      return sw_zeros(t, (uint64_t)len);
    if (sw_feed(t, t->buf, (size_t)r) < 0)
      return -1;
    off += r;
    len -= r;
  }
  return 0;
}

/* The xattrs an entry keeps: user.* (bounded) and, on a directory of
 * upper/, the overlay's opaque mark.  Anything else is counted skipped. */
static void sw_xattrs(struct sw *t, int fd, bool dir, struct archive_entry *e) {
  ssize_t n = flistxattr(fd, t->xlist, XATTR_LIST_MAX);
  if (n <= 0)
    return;
  size_t total = 0, kept = 0;
  for (const char *x = t->xlist; x < t->xlist + n; x += strlen(x) + 1) {
    bool user = !strncmp(x, "user.", 5);
    bool opaque = dir && t->root == ROOT_UPPER && !strcmp(x, OPAQUE_XATTR);
    if (!user && !opaque) {
      t->st->skipped++;
      continue;
    }
    ssize_t v = fgetxattr(fd, x, t->xval, SNAP_XATTR_VALUE_MAX);
    if (v < 0 || kept == SNAP_XATTR_COUNT_MAX ||
        (user && total + (size_t)v > SNAP_XATTR_TOTAL_MAX) ||
        (opaque && (v != 1 || (t->xval[0] != 'y' && t->xval[0] != 'x')))) {
      t->st->skipped++; /* too big, gone, or a value a restore would refuse */
      continue;
    }
    if (user)
      total += (size_t)v;
    kept++;
    archive_entry_xattr_add_entry(e, x, t->xval, (size_t)v);
  }
}

/* 0 written, 1 skipped (this entry only), -1 fatal. */
static int sw_header(struct sw *t, struct archive_entry *e) {
  int r = archive_write_header(t->a, e);
  if (r == ARCHIVE_OK || r == ARCHIVE_WARN) {
    t->st->entries++;
    return 0;
  }
  if (r == ARCHIVE_FAILED && !t->out_failed) {
    t->st->skipped++;
    return 1;
  }
  return sw_fail(t);
}

static int sw_file(struct sw *t, const struct box_walk_entry *we, struct archive_entry *e) {
  /* O_NONBLOCK: swapped for a FIFO, or leased, it cannot hang us. */
  cleanup_close int fd = open_beneath(we->dirfd, we->name, O_RDONLY | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    if (fatal_errno(errno)) {
      t->abandon = true;
      return husk_error(t->err, errno, "cannot open `%s`", t->name);
    }
    t->st->skipped++; /* gone or swapped */
    return 0;
  }
  struct stat st;
  if (fstat(fd, &st) < 0) {
    t->abandon = true;
    return husk_error(t->err, errno, "cannot inspect `%s`", t->name);
  }
  if (!S_ISREG(st.st_mode) || st.st_ino != we->st->st_ino || st.st_dev != we->st->st_dev ||
      (uint64_t)st.st_size > SNAP_MAX_FILE_SIZE) {
    t->st->skipped++; /* changed type under us, or too big to describe */
    return 0;
  }
  archive_entry_set_filetype(e, AE_IFREG);
  archive_entry_set_perm(e, st.st_mode & 01777);
  archive_entry_set_uid(e, box_id(st.st_uid, t->uid_base));
  archive_entry_set_gid(e, box_id(st.st_gid, t->uid_base));
  archive_entry_set_mtime(e, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
  const char *first = st.st_nlink > 1 ? tar_links_find(&t->links, &st) : NULL;
  if (first) {
    archive_entry_set_hardlink(e, first);
    archive_entry_set_size(e, 0);
    return sw_header(t, e) < 0 ? -1 : 0;
  }
  sw_xattrs(t, fd, false, e);
  int rr = tar_regions_of(&t->regions, fd, &st, SNAP_MAX_REGIONS);
  if (rr != 0) {
    if (rr > 0)
      t->st->skipped++; /* too fragmented to describe */
    t->abandon = rr < 0;
    return rr < 0 ? husk_error(t->err, ENOMEM, "sparse map") : 0;
  }
  size_t n = t->regions.n;
  const struct tar_region *reg = t->regions.r;
  archive_entry_set_size(e, st.st_size);
  bool sparse = !(n == 1 && reg[0].off == 0 && reg[0].len == st.st_size);
  if (sparse && st.st_size > 0) {
    for (size_t i = 0; i < n; i++)
      archive_entry_sparse_add_entry(e, reg[i].off, reg[i].len);
    if (n == 0)
      archive_entry_sparse_add_entry(e, st.st_size, 0); /* all hole */
  }
  int h = sw_header(t, e);
  if (h != 0)
    return h < 0 ? -1 : 0;
  /* The pax writer takes the whole logical stream and drops hole bytes. */
  int64_t pos = 0;
  for (size_t i = 0; i < n; i++) {
    if (sw_zeros(t, (uint64_t)(reg[i].off - pos)) < 0 || sw_data(t, fd, reg[i].off, reg[i].len) < 0)
      return -1;
    pos = reg[i].off + reg[i].len;
    t->st->bytes += (uint64_t)reg[i].len;
  }
  if (sw_zeros(t, (uint64_t)(st.st_size - pos)) < 0)
    return -1;
  /* Remembered once it is in the archive: a link never names a skipped entry. */
  if (st.st_nlink > 1 && tar_links_add(&t->links, &st, t->name) < 0) {
    t->abandon = true;
    return husk_error(t->err, ENOMEM, "hardlink table");
  }
  return 0;
}

/* A directory's header, with its xattrs read through a fresh fd of it. */
static int sw_dir(struct sw *t, int dirfd, const char *name, const struct stat *ws,
                  struct archive_entry *e) {
  cleanup_close int fd = open_beneath(dirfd, name, O_RDONLY | O_DIRECTORY);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0 || st.st_ino != ws->st_ino || st.st_dev != ws->st_dev) {
    if (fd < 0 && fatal_errno(errno)) {
      t->abandon = true;
      return husk_error(t->err, errno, "cannot open `%s`", t->name);
    }
    t->st->skipped++;
    return 1;
  }
  archive_entry_set_filetype(e, AE_IFDIR);
  archive_entry_set_perm(e, st.st_mode & 01777);
  archive_entry_set_uid(e, box_id(st.st_uid, t->uid_base));
  archive_entry_set_gid(e, box_id(st.st_gid, t->uid_base));
  archive_entry_set_mtime(e, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
  sw_xattrs(t, fd, true, e);
  return sw_header(t, e);
}

static int sw_entry(void *ctx, const struct box_walk_entry *we) {
  struct sw *t = ctx;
  const struct stat *st = we->st;
  int len = snprintf(t->name, sizeof t->name, "%s/%s", roots[t->root].name, we->rel);
  if (len < 0 || (size_t)len >= sizeof t->name) {
    t->st->skipped++; /* a restore would refuse the name */
    return 1;
  }
  mode_t type = st->st_mode & S_IFMT;
  bool whiteout = type == S_IFCHR && st->st_rdev == makedev(0, 0) && t->root == ROOT_UPPER;
  if (type != S_IFREG && type != S_IFDIR && type != S_IFLNK && type != S_IFIFO && !whiteout) {
    t->st->skipped++; /* sockets, devices */
    return 1;
  }
  struct archive_entry *e = archive_entry_new();
  if (!e) {
    t->abandon = true;
    return husk_error(t->err, ENOMEM, "archive entry");
  }
  archive_entry_set_pathname(e, t->name);
  archive_entry_set_uid(e, box_id(st->st_uid, t->uid_base));
  archive_entry_set_gid(e, box_id(st->st_gid, t->uid_base));
  archive_entry_set_mtime(e, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
  int rc = 0;
  if (type == S_IFDIR) {
    rc = sw_dir(t, we->dirfd, we->name, st, e);
    if (rc == 0 && we->depth >= SNAP_MAX_DEPTH)
      t->st->skipped++; /* kept, but not what is inside: too deep */
  } else if (type == S_IFLNK) {
    ssize_t n = readlinkat(we->dirfd, we->name, t->buf, PATH_MAX);
    if (n <= 0 || n >= PATH_MAX) {
      t->st->skipped++; /* swapped, or unreadable */
    } else {
      t->buf[n] = '\0';
      archive_entry_set_filetype(e, AE_IFLNK);
      archive_entry_set_perm(e, 0777);
      archive_entry_set_symlink(e, t->buf);
      rc = sw_header(t, e);
    }
  } else if (type == S_IFREG) {
    rc = sw_file(t, we, e);
  } else {
    /* A FIFO, or a whiteout: a header alone. */
    archive_entry_set_filetype(e, type == S_IFIFO ? AE_IFIFO : AE_IFCHR);
    archive_entry_set_perm(e, st->st_mode & 01777);
    archive_entry_set_rdev(e, 0);
    rc = sw_header(t, e);
  }
  archive_entry_free(e);
  if (rc < 0)
    return -1;
  return rc > 0 ? 1 : 0;
}

/* One tree: its root as "<name>/", then everything below it. */
static int sw_tree(struct sw *t, int fs, int r) {
  t->root = r;
  snprintf(t->name, sizeof t->name, "%s/", roots[r].name);
  cleanup_close int dir = open_beneath(fs, roots[r].path, O_RDONLY | O_DIRECTORY);
  if (dir < 0) {
    if (errno == ENOENT && r == ROOT_UPPER)
      return 0; /* a box of the default template */
    t->abandon = true;
    return husk_error(t->err, errno, "cannot open `%s` of the box filesystem", roots[r].path);
  }
  struct stat st;
  if (fstat(dir, &st) < 0) {
    t->abandon = true;
    return husk_error(t->err, errno, "cannot inspect `%s`", roots[r].path);
  }
  struct archive_entry *e = archive_entry_new();
  if (!e) {
    t->abandon = true;
    return husk_error(t->err, ENOMEM, "archive entry");
  }
  archive_entry_set_pathname(e, t->name);
  int rc = sw_dir(t, dir, ".", &st, e);
  archive_entry_free(e);
  if (rc != 0)
    return rc < 0 ? -1 : husk_fail(t->err, EIO, "cannot archive the root of `%s`", roots[r].path);
  if (box_tree_walk(dir, SNAP_MAX_DEPTH, sw_entry, t, t->err) < 0) {
    t->abandon = true;
    return -1;
  }
  return 0;
}

int snap_archive_write(int fs, uint32_t uid_base, int zstd_level,
                       int (*out)(void *ctx, const void *buf, size_t len), void *ctx,
                       struct snap_stats *st, struct husk_err *err) {
  struct snap_stats dummy;
  if (!st)
    st = &dummy;
  *st = (struct snap_stats){0};
  if (zstd_level < 1 || zstd_level > 19)
    return husk_fail(err, EINVAL, "zstd level %d is not 1..19", zstd_level);
  struct sw t = {.out = out, .ctx = ctx, .err = err, .st = st, .uid_base = uid_base};
  t.buf = malloc(IO_CHUNK);
  t.xlist = malloc(XATTR_LIST_MAX);
  t.xval = malloc(SNAP_XATTR_VALUE_MAX);
  t.a = archive_write_new();
  int rc = -1;
  if (!t.buf || !t.xlist || !t.xval || !t.a) {
    husk_error(err, ENOMEM, "snapshot archive writer");
    goto out;
  }
  char level[8];
  snprintf(level, sizeof level, "%d", zstd_level);
  snprintf(t.name, sizeof t.name, "(start)");
  if (archive_write_set_format_pax(t.a) != ARCHIVE_OK ||
      /* Names and link targets as the bytes they are, whatever the locale. */
      archive_write_set_format_option(t.a, "pax", "hdrcharset", "BINARY") != ARCHIVE_OK ||
      archive_write_set_format_option(t.a, "pax", "xattrheader", "LIBARCHIVE") != ARCHIVE_OK ||
      archive_write_add_filter_zstd(t.a) != ARCHIVE_OK ||
      archive_write_set_filter_option(t.a, "zstd", "compression-level", level) != ARCHIVE_OK ||
      archive_write_set_bytes_in_last_block(t.a, 1) != ARCHIVE_OK ||
      archive_write_open2(t.a, &t, NULL, sw_write, NULL, NULL) != ARCHIVE_OK) {
    sw_fail(&t);
    goto out;
  }
  for (int r = 0; r < NROOTS; r++)
    if (sw_tree(&t, fs, r) < 0)
      goto out;
  snprintf(t.name, sizeof t.name, "(end)");
  if (archive_write_close(t.a) != ARCHIVE_OK) {
    sw_fail(&t);
    goto out;
  }
  rc = 0;
out:
  /* Abandoned: archive_write_free's own close must not add a trailer. */
  t.abandon = t.abandon || rc < 0;
  if (t.a)
    archive_write_free(t.a);
  tar_links_free(&t.links);
  tar_regions_free(&t.regions);
  free(t.buf);
  free(t.xlist);
  free(t.xval);
  if (t.zeros)
    munmap(t.zeros, ZERO_SPAN);
  return rc;
}

/* ======================================================================
 * Reading
 * ====================================================================== */

struct dirfix {
  char *path; /* in the box filesystem */
  mode_t mode;
  struct timespec mtime;
  bool has_mtime;
};

struct sr {
  int fs;
  uint32_t uid_base;
  struct archive *a;
  ssize_t (*in)(void *, void *, size_t);
  void *ctx;
  struct husk_err *err;
  struct snap_stats *st;
  uint64_t max_bytes, max_entries;
  bool in_failed, rootfs_made;
  int in_errno;
  char *buf;
  struct dirfix *fix;
  size_t nfix, capfix;
  char shown[256]; /* the current entry's name, safe to print */
};

static la_ssize_t sr_read(struct archive *a, void *cd, const void **buf) {
  struct sr *t = cd;
  for (;;) {
    errno = 0;
    ssize_t n = t->in(t->ctx, t->buf, IN_CHUNK);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 || (size_t)n > IN_CHUNK) {
      t->in_failed = true;
      t->in_errno = errno ? errno : EIO;
      archive_set_error(a, t->in_errno, "reading the snapshot failed");
      return -1;
    }
    *buf = t->buf;
    return n;
  }
}

static void show_name(struct sr *t, const char *raw) {
  snprintf(t->shown, sizeof t->shown, "%s", raw ? raw : "(no name)");
  husk_sanitize_line(t->shown);
}

static int sr_archive_fail(struct sr *t) {
  if (t->in_failed)
    return husk_error(t->err, t->in_errno, "cannot read the snapshot archive");
  const char *m = archive_error_string(t->a);
  int e = archive_errno(t->a) == EINVAL ? EINVAL : EIO; /* format errors are EINVAL */
  return husk_fail(t->err, e, "damaged snapshot archive (at `%s`): %s", t->shown,
                   m ? m : "unknown error");
}

static int sr_refuse(struct sr *t, const char *why) {
  return husk_fail(t->err, EINVAL, "snapshot entry `%s` refused: %s", t->shown, why);
}

static int sr_fs_fail(struct sr *t, int e, const char *what) {
  if (out_of_space(e))
    return husk_fail(t->err, ENOSPC, "the box filesystem is full (restoring `%s`)", t->shown);
  return husk_error(t->err, e, "cannot %s `%s`", what, t->shown);
}

/* A cleaned entry: the tree it is in and its path in the box filesystem,
 * split into the parent's path and the last name. */
struct sr_name {
  int root;
  int depth;           /* components below the tree's root */
  char path[PATH_MAX]; /* "workspace/a/b" or "rootfs/upper/a/b" */
  char parent[PATH_MAX];
  const char *name; /* last component, inside path */
};

/* Archive name -> box filesystem path, refusing anything not strictly
 * "<root>[/component]*" with an optional trailing "/". */
static int sr_clean(struct sr *t, const char *raw, struct sr_name *n) {
  if (!raw || !*raw)
    return sr_refuse(t, "empty name");
  size_t len = strlen(raw);
  if (len >= PATH_MAX)
    return sr_refuse(t, "name too long");
  if (raw[0] == '/')
    return sr_refuse(t, "absolute name");
  if (len > 1 && raw[len - 1] == '/')
    len--; /* a directory's "workspace/" */
  const char *p = raw, *end = raw + len;
  const char *s = p;
  while (p < end && *p != '/')
    p++;
  n->root = -1;
  for (int r = 0; r < NROOTS; r++)
    if ((size_t)(p - s) == strlen(roots[r].name) && !memcmp(s, roots[r].name, (size_t)(p - s)))
      n->root = r;
  if (n->root < 0)
    return sr_refuse(t, "not under workspace/, tmp/, shm/ or upper/");
  size_t o = (size_t)snprintf(n->path, sizeof n->path, "%s", roots[n->root].path);
  size_t parent_len = 0, last = 0;
  n->depth = 0;
  while (p < end) {
    p++; /* the '/' */
    s = p;
    while (p < end && *p != '/')
      p++;
    size_t c = (size_t)(p - s);
    if (c == 0)
      return sr_refuse(t, "empty path component");
    if ((c == 1 && s[0] == '.') || (c == 2 && s[0] == '.' && s[1] == '.'))
      return sr_refuse(t, "`.` or `..` component");
    if (c > NAME_MAX)
      return sr_refuse(t, "path component too long");
    if (++n->depth > SNAP_MAX_DEPTH)
      return sr_refuse(t, "nested too deep");
    if (o + 1 + c + 1 > sizeof n->path)
      return sr_refuse(t, "name too long");
    parent_len = o;
    n->path[o++] = '/';
    last = o;
    memcpy(n->path + o, s, c);
    o += c;
  }
  n->path[o] = '\0';
  if (n->depth == 0) {
    /* A tree's root: its parent is the filesystem (or rootfs/). */
    const char *slash = strrchr(n->path, '/');
    parent_len = slash ? (size_t)(slash - n->path) : 0;
    last = slash ? parent_len + 1 : 0;
  }
  memcpy(n->parent, n->path, parent_len);
  n->parent[parent_len] = '\0';
  n->name = n->path + last;
  return 0;
}

/* rootfs/: host root's, 0700, made when the first upper/ entry comes. */
static int sr_rootfs(struct sr *t) {
  if (t->rootfs_made)
    return 0;
  if (mkdirat(t->fs, "rootfs", 0700) < 0 && errno != EEXIST)
    return sr_fs_fail(t, errno, "create rootfs/ for");
  cleanup_close int fd = open_beneath(t->fs, "rootfs", O_RDONLY | O_DIRECTORY);
  if (fd < 0 || fchown(fd, 0, 0) < 0 || fchmod(fd, 0700) < 0)
    return sr_fs_fail(t, errno, "prepare rootfs/ for");
  t->rootfs_made = true;
  return 0;
}

/* The parent directory of n, opened beneath the filesystem: it must have
 * been restored before (or be a tree's given root), and be no symlink. */
static int sr_parent(struct sr *t, const struct sr_name *n) {
  int fd = *n->parent ? open_beneath(t->fs, n->parent, O_PATH | O_DIRECTORY)
                      : fcntl(t->fs, F_DUPFD_CLOEXEC, 3);
  if (fd >= 0)
    return fd;
  if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP || errno == EXDEV || errno == EAGAIN)
    return sr_refuse(t, "its parent is not a directory restored before it");
  return sr_fs_fail(t, errno, "open the parent of");
}

/* Make room for a new non-directory (or a directory, when the name holds
 * a non-directory): an earlier entry there is unlinked, never written
 * through.  1: a directory is there. */
static int sr_make_room(struct sr *t, int pfd, const char *name) {
  struct stat st;
  if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return errno == ENOENT ? 0 : sr_fs_fail(t, errno, "inspect");
  if (S_ISDIR(st.st_mode))
    return 1;
  if (unlinkat(pfd, name, 0) < 0)
    return sr_fs_fail(t, errno, "replace");
  return 0;
}

/* The entry's xattrs, checked before anything is made: only user.*
 * (bounded) on files and directories, and the opaque mark on directories
 * of upper/. */
static int sr_check_xattrs(struct sr *t, struct archive_entry *e, const struct sr_name *n,
                           mode_t type) {
  const char *name;
  const void *value;
  size_t size, total = 0, n_names = 0;
  /* libarchive reports an xattr once per pax header that holds it
   * (LIBARCHIVE.xattr and SCHILY.xattr): the bounds count each name once. */
  const char *names[SNAP_XATTR_COUNT_MAX];
  int records = archive_entry_xattr_reset(e);
  if (records < 0 || (unsigned)records > 2 * SNAP_XATTR_COUNT_MAX)
    return sr_refuse(t, "too many xattrs");
  while (archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK) {
    if (!name)
      return sr_refuse(t, "an xattr without a name");
    bool seen = false;
    for (size_t i = 0; i < n_names && !seen; i++)
      seen = !strcmp(names[i], name);
    if (!seen) {
      if (n_names == SNAP_XATTR_COUNT_MAX)
        return sr_refuse(t, "too many xattrs");
      names[n_names++] = name;
    }
    if (!strcmp(name, OPAQUE_XATTR)) {
      if (type != AE_IFDIR || n->root != ROOT_UPPER)
        return sr_refuse(t, "the opaque mark is only for directories of upper/");
      if (size != 1 || (((const char *)value)[0] != 'y' && ((const char *)value)[0] != 'x'))
        return sr_refuse(t, "the opaque mark's value is not `y` or `x`");
      continue;
    }
    if (strncmp(name, "user.", 5) || strlen(name) > XATTR_NAME_MAX)
      return sr_refuse(t, "an xattr other than user.* or trusted.overlay.opaque");
    if (type != AE_IFREG && type != AE_IFDIR)
      return sr_refuse(t, "user.* xattrs are only for files and directories");
    if (size > SNAP_XATTR_VALUE_MAX || (!seen && (total += size) > SNAP_XATTR_TOTAL_MAX))
      return sr_refuse(t, "xattr values too large");
  }
  return 0;
}

static int sr_set_xattrs(struct sr *t, struct archive_entry *e, int fd) {
  const char *name;
  const void *value;
  size_t size;
  archive_entry_xattr_reset(e);
  while (archive_entry_xattr_next(e, &name, &value, &size) == ARCHIVE_OK) {
    if (fsetxattr(fd, name, value, size, 0) == 0)
      continue;
    if (errno == EOPNOTSUPP || errno == EPERM)
      t->st->skipped++; /* the filesystem does not keep it: as writing would skip it */
    else
      return sr_fs_fail(t, errno, "set an xattr of");
  }
  return 0;
}

static void entry_times(struct archive_entry *e, struct timespec ts[2]) {
  if (archive_entry_mtime_is_set(e))
    ts[0] = (struct timespec){archive_entry_mtime(e), archive_entry_mtime_nsec(e)};
  else
    ts[0] = (struct timespec){.tv_nsec = UTIME_OMIT};
  ts[1] = ts[0];
}

static int sr_dir(struct sr *t, struct archive_entry *e, const struct sr_name *n, int pfd,
                  uid_t uid, gid_t gid, mode_t perm) {
  int room = sr_make_room(t, pfd, n->name);
  if (room < 0)
    return -1;
  if (room == 0 && mkdirat(pfd, n->name, 0700) < 0)
    return sr_fs_fail(t, errno, "create");
  cleanup_close int fd = open_beneath(pfd, n->name, O_RDONLY | O_DIRECTORY);
  if (fd < 0)
    return sr_fs_fail(t, errno, "open");
  if (fchown(fd, uid, gid) < 0)
    return sr_fs_fail(t, errno, "set the owner of");
  if (sr_set_xattrs(t, e, fd) < 0)
    return -1;
  /* Mode and mtime at the end, deepest first. */
  if (t->nfix == t->capfix) {
    size_t nc = t->capfix ? t->capfix * 2 : 64;
    struct dirfix *f = realloc(t->fix, nc * sizeof *f);
    if (!f)
      return husk_error(t->err, ENOMEM, "restoring `%s`", t->shown);
    t->fix = f;
    t->capfix = nc;
  }
  struct dirfix *f = &t->fix[t->nfix];
  if (!(f->path = strdup(n->path)))
    return husk_error(t->err, ENOMEM, "restoring `%s`", t->shown);
  struct timespec ts[2];
  entry_times(e, ts);
  f->mode = perm;
  f->mtime = ts[0];
  f->has_mtime = archive_entry_mtime_is_set(e);
  t->nfix++;
  return 0;
}

static int sr_file(struct sr *t, struct archive_entry *e, const struct sr_name *n, int pfd,
                   uid_t uid, gid_t gid, mode_t perm) {
  if (!archive_entry_size_is_set(e) || archive_entry_size(e) < 0 ||
      (uint64_t)archive_entry_size(e) > SNAP_MAX_FILE_SIZE)
    return sr_refuse(t, "no size, or a size too large");
  int64_t size = archive_entry_size(e);
  int room = sr_make_room(t, pfd, n->name);
  if (room != 0)
    return room < 0 ? -1 : sr_refuse(t, "a file would replace a directory");
  cleanup_close int fd = sys_openat2(
      pfd, n->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600, RESOLVE_SAFE);
  if (fd < 0)
    return sr_fs_fail(t, errno, "create");
  if (ftruncate(fd, size) < 0)
    return sr_fs_fail(t, errno, "size");
  for (;;) {
    const void *buf;
    size_t len;
    la_int64_t off;
    int r = archive_read_data_block(t->a, &buf, &len, &off);
    if (r == ARCHIVE_EOF)
      break;
    if (r < ARCHIVE_WARN)
      return sr_archive_fail(t);
    if (off < 0 || (uint64_t)off > (uint64_t)size || len > (uint64_t)(size - off))
      return sr_refuse(t, "data beyond the file's size");
    if (t->max_bytes && (t->st->bytes + len > t->max_bytes))
      return husk_fail(t->err, EFBIG,
                       "the snapshot holds more than %llu bytes of file data, the box's disk "
                       "limit (at `%s`): restore it into a box with a larger disk",
                       (unsigned long long)t->max_bytes, t->shown);
    if (write_block_sparse(fd, buf, len, off) < 0)
      return sr_fs_fail(t, errno, "write");
    t->st->bytes += len;
  }
  if (sr_set_xattrs(t, e, fd) < 0)
    return -1;
  struct timespec ts[2];
  entry_times(e, ts);
  if (fchown(fd, uid, gid) < 0 || fchmod(fd, perm) < 0 || futimens(fd, ts) < 0)
    return sr_fs_fail(t, errno, "set the owner, mode and time of");
  return 0;
}

static int sr_hardlink(struct sr *t, const char *raw_target, const struct sr_name *n, int pfd) {
  char shown[sizeof t->shown];
  memcpy(shown, t->shown, sizeof shown);
  struct sr_name *tn = malloc(sizeof *tn);
  if (!tn)
    return husk_error(t->err, ENOMEM, "restoring `%s`", t->shown);
  show_name(t, raw_target);
  int rc = sr_clean(t, raw_target, tn);
  memcpy(t->shown, shown, sizeof shown);
  if (rc < 0) {
    free(tn);
    return husk_error_wrap(t->err, "hardlink `%s`", t->shown);
  }
  cleanup_close int tdir = tn->depth ? sr_parent(t, tn) : -1;
  struct stat st;
  if (tdir < 0 || fstatat(tdir, tn->name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode)) {
    free(tn);
    husk_err_clear(t->err);
    return sr_refuse(t, "a hardlink to something other than a file restored before it");
  }
  int room = sr_make_room(t, pfd, n->name);
  if (room == 0 && linkat(tdir, tn->name, pfd, n->name, 0) < 0)
    room = sr_fs_fail(t, errno, "link");
  else if (room > 0)
    room = sr_refuse(t, "a hardlink would replace a directory");
  free(tn);
  return room;
}

/* A symlink, FIFO or whiteout: made by name, then given its owner (and,
 * but for a symlink, its mode) without following anything. */
static int sr_node(struct sr *t, struct archive_entry *e, const struct sr_name *n, int pfd,
                   mode_t type, uid_t uid, gid_t gid, mode_t perm) {
  int room = sr_make_room(t, pfd, n->name);
  if (room != 0)
    return room < 0 ? -1 : sr_refuse(t, "it would replace a directory");
  if (type == AE_IFLNK) {
    const char *target = archive_entry_symlink(e);
    if (!target || !*target || strlen(target) >= PATH_MAX)
      return sr_refuse(t, "a symlink without a target");
    if (symlinkat(target, pfd, n->name) < 0)
      return sr_fs_fail(t, errno, "create");
  } else if (mknodat(pfd, n->name, (type == AE_IFIFO ? S_IFIFO : S_IFCHR) | 0600, makedev(0, 0)) <
             0) {
    return sr_fs_fail(t, errno, "create");
  }
  struct timespec ts[2];
  entry_times(e, ts);
  if (fchownat(pfd, n->name, uid, gid, AT_SYMLINK_NOFOLLOW) < 0)
    return sr_fs_fail(t, errno, "set the owner of");
  if (type == AE_IFIFO) {
    cleanup_close int fd = open_beneath(pfd, n->name, O_RDONLY | O_NONBLOCK);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISFIFO(st.st_mode) || fchmod(fd, perm) < 0)
      return sr_fs_fail(t, errno ? errno : EIO, "set the mode of");
  } else if (type == AE_IFCHR) {
    /* A device cannot be opened on this nodev mount: by name, just made. */
    if (fchmodat(pfd, n->name, perm, 0) < 0)
      return sr_fs_fail(t, errno, "set the mode of");
  }
  if (utimensat(pfd, n->name, ts, AT_SYMLINK_NOFOLLOW) < 0)
    return sr_fs_fail(t, errno, "set the time of");
  return 0;
}

static int sr_entry(struct sr *t, struct archive_entry *e) {
  const char *raw = archive_entry_pathname(e);
  show_name(t, raw);
  if (t->max_entries && t->st->entries + t->st->skipped >= t->max_entries)
    return husk_fail(t->err, EFBIG,
                     "the snapshot holds more than %llu entries, the box's inode limit (at `%s`)",
                     (unsigned long long)t->max_entries, t->shown);
  int f = archive_format(t->a);
  if (f != ARCHIVE_FORMAT_TAR_USTAR && f != ARCHIVE_FORMAT_TAR_PAX_INTERCHANGE &&
      f != ARCHIVE_FORMAT_TAR_PAX_RESTRICTED)
    return sr_refuse(t, "not a pax or ustar tar entry");
  for (int i = 0; i < archive_filter_count(t->a); i++) {
    int c = archive_filter_code(t->a, i);
    if (c != ARCHIVE_FILTER_NONE && c != ARCHIVE_FILTER_ZSTD)
      return sr_refuse(t, "compressed with something other than zstd");
  }
  cleanup_free struct sr_name *n = malloc(sizeof *n);
  if (!n)
    return husk_error(t->err, ENOMEM, "restoring `%s`", t->shown);
  if (sr_clean(t, raw, n) < 0)
    return -1;
  const char *hardlink = archive_entry_hardlink(e);
  mode_t type = archive_entry_filetype(e);
  if (type == AE_IFSOCK && !hardlink) {
    t->st->skipped++; /* as writing skips sockets */
    return 0;
  }
  if (n->depth == 0 && (hardlink || type != AE_IFDIR))
    return sr_refuse(t, "a tree's root must be a directory");
  if (!hardlink) {
    if (type == AE_IFCHR || type == AE_IFBLK) {
      if (type != AE_IFCHR || archive_entry_rdevmajor(e) || archive_entry_rdevminor(e) ||
          n->root != ROOT_UPPER)
        return sr_refuse(t, "a device (only whiteouts, 0:0 under upper/, are kept)");
    } else if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK && type != AE_IFIFO) {
      return sr_refuse(t, "an unknown kind of entry");
    }
  }
  la_int64_t uid = archive_entry_uid(e), gid = archive_entry_gid(e);
  if (uid < 0 || uid >= SNAP_UID_RANGE || gid < 0 || gid >= SNAP_UID_RANGE)
    return sr_refuse(t, "an owner outside 0..65535");
  if (sr_check_xattrs(t, e, n, hardlink ? AE_IFREG : type) < 0)
    return -1;
  if (n->root == ROOT_UPPER && sr_rootfs(t) < 0)
    return -1;
  cleanup_close int pfd = sr_parent(t, n);
  if (pfd < 0)
    return -1;
  uid_t hu = t->uid_base + (uid_t)uid;
  gid_t hg = t->uid_base + (gid_t)gid;
  mode_t perm = archive_entry_perm(e) & 01777; /* setuid and setgid dropped */
  int rc;
  if (hardlink)
    rc = sr_hardlink(t, hardlink, n, pfd);
  else if (type == AE_IFDIR)
    rc = sr_dir(t, e, n, pfd, hu, hg, perm);
  else if (type == AE_IFREG)
    rc = sr_file(t, e, n, pfd, hu, hg, perm);
  else
    rc = sr_node(t, e, n, pfd, type, hu, hg, perm);
  if (rc == 0)
    t->st->entries++;
  return rc;
}

/* Directory modes and mtimes, deepest (latest in pre-order) first. */
static int sr_fix_dirs(struct sr *t) {
  for (size_t i = t->nfix; i-- > 0;) {
    struct dirfix *f = &t->fix[i];
    cleanup_close int fd = open_beneath(t->fs, f->path, O_RDONLY | O_DIRECTORY);
    struct timespec ts[2] = {f->mtime, f->mtime};
    if (fd < 0 || fchmod(fd, f->mode) < 0 || (f->has_mtime && futimens(fd, ts) < 0)) {
      show_name(t, f->path);
      return sr_fs_fail(t, errno, "set the mode and time of directory");
    }
  }
  return 0;
}

/* The end-of-archive marker is what tells a finished archive from one cut
 * at an entry's boundary (libarchive takes both as the end). */
static bool sr_saw_trailer(struct sr *t, int64_t before) {
  return archive_filter_bytes(t->a, 0) >= before + 512;
}

int snap_archive_read(int fs, uint32_t uid_base, ssize_t (*in)(void *ctx, void *buf, size_t cap),
                      void *ctx, uint64_t max_bytes, uint64_t max_entries, struct snap_stats *st,
                      struct husk_err *err) {
  struct snap_stats dummy;
  if (!st)
    st = &dummy;
  *st = (struct snap_stats){0};
  if (uid_base > UINT32_MAX - SNAP_UID_RANGE)
    return husk_fail(err, EINVAL, "uid base %u leaves no room for a box's owners", uid_base);
  struct sr t = {.fs = fs,
                 .uid_base = uid_base,
                 .in = in,
                 .ctx = ctx,
                 .err = err,
                 .st = st,
                 .max_bytes = max_bytes,
                 .max_entries = max_entries};
  snprintf(t.shown, sizeof t.shown, "(start)");
  t.buf = malloc(IN_CHUNK);
  t.a = archive_read_new();
  int rc = -1;
  if (!t.buf || !t.a) {
    husk_error(err, ENOMEM, "snapshot archive reader");
    goto out;
  }
  /* zstd only when built in: libarchive would otherwise run an external zstd. */
  if (archive_read_support_filter_zstd(t.a) != ARCHIVE_OK) {
    husk_fail(err, ENOTSUP, "libarchive was built without zstd");
    goto out;
  }
  archive_read_support_format_tar(t.a);
  if (archive_read_open(t.a, &t, NULL, sr_read, NULL) != ARCHIVE_OK) {
    sr_archive_fail(&t);
    goto out;
  }
  for (;;) {
    int64_t before = archive_filter_bytes(t.a, 0);
    struct archive_entry *e;
    int r = archive_read_next_header(t.a, &e);
    if (r == ARCHIVE_EOF) {
      if (!sr_saw_trailer(&t, before)) {
        husk_fail(err, EIO, "the snapshot archive is cut short (no end-of-archive marker)");
        goto out;
      }
      break;
    }
    if (r < ARCHIVE_WARN) {
      sr_archive_fail(&t);
      goto out;
    }
    if (sr_entry(&t, e) < 0)
      goto out;
    if (archive_read_data_skip(t.a) < ARCHIVE_WARN) {
      sr_archive_fail(&t);
      goto out;
    }
  }
  if (sr_fix_dirs(&t) < 0)
    goto out;
  rc = 0;
out:
  if (t.a)
    archive_read_free(t.a);
  for (size_t i = 0; i < t.nfix; i++)
    free(t.fix[i].path);
  free(t.fix);
  free(t.buf);
  return rc;
}
