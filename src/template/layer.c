/* Unpacking one image layer (see layer.h for what is kept, dropped and
 * refused).
 *
 * Two libarchive readers in a chain: the first only decompresses the blob
 * (format "raw", gzip or zstd filter), the second parses tar from what the
 * first hands it.  The bytes between them are hashed on the way, so one
 * pass yields the tree and the layer's diff_id (the sha256 of the
 * uncompressed tar), which the caller checks against the image config. */
#define _GNU_SOURCE
#include "template/layer.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "jail/syscalls.h"
#include "util/cleanup.h"
#include "util/fileio.h"

#define CHUNK ((size_t)256 * 1024)
#define MAX_ID 65535    /* the highest id a box's map covers */
#define NOBODY_ID 65534 /* what ids beyond it become */
#define WH_PREFIX ".wh."
#define WH_META ".wh..wh."
#define WH_OPAQUE ".wh..wh..opq"

struct lx {
  struct archive *raw; /* decompresses the blob */
  struct archive *tar; /* parses what raw hands it */
  EVP_MD_CTX *md;
  const struct layer_limits *lim;
  struct layer_result *out;
  struct husk_err *err;
  int dest;
  char *buf;
  bool raw_eof;
  bool over_limit;
  bool raw_failed;
  bool hashed; /* false: the stream is the verified blob itself */
};

static int open_beneath(int dirfd, const char *path, int flags) {
  return sys_openat2(dirfd, path, (uint64_t)(flags | O_NOFOLLOW | O_CLOEXEC), 0,
                     RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
                         RESOLVE_NO_XDEV);
}

/* The tar parser's input: decompressed bytes, hashed and counted. */
static la_ssize_t lx_read(struct archive *a, void *cd, const void **buf) {
  struct lx *x = cd;
  if (x->raw_eof)
    return 0;
  la_ssize_t n = archive_read_data(x->raw, x->buf, CHUNK);
  if (n < 0) {
    x->raw_failed = true;
    archive_set_error(a, EINVAL, "cannot decompress the layer");
    return -1;
  }
  if (n == 0) {
    x->raw_eof = true;
    return 0;
  }
  x->out->tar_bytes += (uint64_t)n;
  if (x->out->tar_bytes > x->lim->max_bytes) {
    x->over_limit = true;
    archive_set_error(a, EFBIG, "the layer is too large");
    return -1;
  }
  if (x->hashed && EVP_DigestUpdate(x->md, x->buf, (size_t)n) != 1) {
    archive_set_error(a, ENOMEM, "cannot hash the layer");
    return -1;
  }
  *buf = x->buf;
  return n;
}

static int lx_archive_fail(struct lx *x, const char *what) {
  if (x->over_limit)
    return husk_fail(x->err, EFBIG, "the layer is larger than %llu bytes uncompressed",
                     (unsigned long long)x->lim->max_bytes);
  const char *m = archive_error_string(x->raw_failed ? x->raw : x->tar);
  return husk_fail(x->err, EINVAL, "damaged layer (%s): %s", what, m ? m : "unknown error");
}

int layer_clean_name(const char *raw, char *out, size_t cap) {
  if (raw[0] == '/')
    return -1;
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
      return -1;
    if (o + (o ? 1 : 0) + n + 1 > cap)
      return -1;
    if (o)
      out[o++] = '/';
    memcpy(out + o, s, n);
    o += n;
  }
  out[o] = '\0';
  return 0;
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

static uid_t box_id(la_int64_t id) { return id < 0 || id > MAX_ID ? NOBODY_ID : (uid_t)id; }

/* Directory `rel` of the layer (created, with its missing parents, when
 * absent), never through a symlink.  -1 with err filled. */
static int lx_dir(struct lx *x, const char *rel, const char *entry) {
  if (!*rel)
    return fcntl(x->dest, F_DUPFD_CLOEXEC, 3);
  int fd = open_beneath(x->dest, rel, O_RDONLY | O_DIRECTORY);
  if (fd >= 0)
    return fd;
  if (errno == ELOOP || errno == ENOTDIR || errno == EXDEV)
    return husk_fail(x->err, EINVAL,
                     "layer entry `%s`: a parent of it is not a directory "
                     "(a symlink, or a file): refused",
                     entry);
  if (errno != ENOENT)
    return husk_error(x->err, errno, "layer entry `%s`", entry);
  cleanup_close int cur = fcntl(x->dest, F_DUPFD_CLOEXEC, 3);
  if (cur < 0)
    return husk_error(x->err, errno, "layer entry `%s`", entry);
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
    int c = open_beneath(cur, comp, O_RDONLY | O_DIRECTORY);
    if (c < 0 && errno == ENOENT) {
      if (mkdirat(cur, comp, 0755) < 0 && errno != EEXIST)
        return husk_error(x->err, errno, "layer entry `%s`: cannot create its parent", entry);
      c = open_beneath(cur, comp, O_RDONLY | O_DIRECTORY);
    }
    if (c < 0) {
      if (errno == ELOOP || errno == ENOTDIR || errno == EXDEV)
        return husk_fail(x->err, EINVAL,
                         "layer entry `%s`: a parent of it is not a directory "
                         "(a symlink, or a file): refused",
                         entry);
      return husk_error(x->err, errno, "layer entry `%s`", entry);
    }
    close_quiet(cur);
    cur = c;
  }
  return take_fd(&cur);
}

/* Make room for a new entry `name` in pfd: a non-directory there goes; a
 * directory stays when the new entry is one too (its attributes are
 * updated), else the entry is refused.  1: a directory is there. */
static int lx_clear(struct lx *x, int pfd, const char *name, bool new_is_dir, const char *entry) {
  struct stat st;
  if (fstatat(pfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
    if (errno == ENOENT)
      return 0;
    return husk_error(x->err, errno, "layer entry `%s`", entry);
  }
  if (S_ISDIR(st.st_mode)) {
    if (new_is_dir)
      return 1;
    return husk_fail(x->err, EINVAL,
                     "layer entry `%s` replaces a directory of the same layer: "
                     "refused",
                     entry);
  }
  if (unlinkat(pfd, name, 0) < 0)
    return husk_error(x->err, errno, "layer entry `%s`", entry);
  return 0;
}


static void set_mtime_at(int pfd, const char *name, struct archive_entry *e) {
  if (!archive_entry_mtime_is_set(e))
    return;
  struct timespec ts[2] = {{archive_entry_mtime(e), archive_entry_mtime_nsec(e)}};
  ts[1] = ts[0];
  utimensat(pfd, name, ts, AT_SYMLINK_NOFOLLOW); /* best effort: times are not checked */
}

static int lx_file(struct lx *x, struct archive_entry *e, int pfd, const char *name,
                   const char *entry) {
  if (lx_clear(x, pfd, name, false, entry) < 0)
    return -1;
  cleanup_close int fd =
      openat(pfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return husk_error(x->err, errno, "layer entry `%s`", entry);
  for (;;) {
    const void *buf;
    size_t size;
    la_int64_t off;
    int r = archive_read_data_block(x->tar, &buf, &size, &off);
    if (r == ARCHIVE_EOF)
      break;
    if (r < ARCHIVE_WARN)
      return lx_archive_fail(x, entry);
    if (off < 0)
      return husk_fail(x->err, EINVAL, "damaged layer: entry `%s` has a negative offset", entry);
    if (write_block_sparse(fd, buf, size, off) < 0)
      return husk_error(x->err, errno, "cannot write layer entry `%s`", entry);
  }
  la_int64_t size = archive_entry_size_is_set(e) ? archive_entry_size(e) : -1;
  if (size >= 0) {
    if (ftruncate(fd, (off_t)size) < 0)
      return husk_error(x->err, errno, "cannot write layer entry `%s`", entry);
    x->out->file_bytes += (uint64_t)size;
  }
  if (fchown(fd, box_id(archive_entry_uid(e)), box_id(archive_entry_gid(e))) < 0 ||
      fchmod(fd, archive_entry_perm(e) & 0777) < 0)
    return husk_error(x->err, errno, "cannot set the owner and mode of layer entry `%s`", entry);
  if (archive_entry_mtime_is_set(e)) {
    struct timespec ts[2] = {{archive_entry_mtime(e), archive_entry_mtime_nsec(e)}};
    ts[1] = ts[0];
    futimens(fd, ts); /* best effort */
  }
  return 0;
}

static int lx_directory(struct lx *x, struct archive_entry *e, int pfd, const char *name,
                        const char *entry) {
  int there = lx_clear(x, pfd, name, true, entry);
  if (there < 0)
    return -1;
  if (!there && mkdirat(pfd, name, 0700) < 0)
    return husk_error(x->err, errno, "layer entry `%s`", entry);
  cleanup_close int fd = open_beneath(pfd, name, O_RDONLY | O_DIRECTORY);
  if (fd < 0)
    return husk_error(x->err, errno, "layer entry `%s`", entry);
  if (fchown(fd, box_id(archive_entry_uid(e)), box_id(archive_entry_gid(e))) < 0 ||
      fchmod(fd, archive_entry_perm(e) & 01777) < 0)
    return husk_error(x->err, errno, "cannot set the owner and mode of layer entry `%s`", entry);
  return 0;
}

static int lx_symlink(struct lx *x, struct archive_entry *e, int pfd, const char *name,
                      const char *entry) {
  const char *target = archive_entry_symlink(e);
  if (!target || !*target || strlen(target) >= PATH_MAX)
    return husk_fail(x->err, EINVAL, "damaged layer: symlink `%s` has no usable target", entry);
  if (lx_clear(x, pfd, name, false, entry) < 0)
    return -1;
  /* The target is the box's business: it is never followed here. */
  if (symlinkat(target, pfd, name) < 0 ||
      fchownat(pfd, name, box_id(archive_entry_uid(e)), box_id(archive_entry_gid(e)),
               AT_SYMLINK_NOFOLLOW) < 0)
    return husk_error(x->err, errno, "layer entry `%s`", entry);
  set_mtime_at(pfd, name, e);
  return 0;
}

static int lx_hardlink(struct lx *x, const char *raw_target, int pfd, const char *name,
                       const char *entry) {
  char target[PATH_MAX];
  if (layer_clean_name(raw_target, target, sizeof target) < 0 || !*target)
    return husk_fail(x->err, EINVAL, "layer entry `%s`: a hardlink to `%.200s` is refused", entry,
                     raw_target);
  char *tparent, *tname;
  split(target, &tparent, &tname);
  cleanup_close int tdir = open_beneath(x->dest, *tparent ? tparent : ".", O_RDONLY | O_DIRECTORY);
  struct stat st;
  if (tdir < 0 || fstatat(tdir, tname, &st, AT_SYMLINK_NOFOLLOW) < 0 || S_ISDIR(st.st_mode))
    return husk_fail(x->err, EINVAL,
                     "layer entry `%s`: a hardlink to `%.200s`, which this layer does not hold "
                     "as a file, is refused",
                     entry, raw_target);
  if (lx_clear(x, pfd, name, false, entry) < 0)
    return -1;
  if (linkat(tdir, tname, pfd, name, 0) < 0)
    return husk_error(x->err, errno, "layer entry `%s`", entry);
  return 0;
}

/* ".wh.NAME": NAME of the layers below is gone in this one. */
static int lx_whiteout(struct lx *x, int pfd, const char *name, const char *entry) {
  if (!*name || !strcmp(name, ".") || !strcmp(name, ".."))
    return husk_fail(x->err, EINVAL, "layer entry `%s`: a whiteout of nothing", entry);
  if (lx_clear(x, pfd, name, false, entry) < 0)
    return -1;
  if (mknodat(pfd, name, S_IFCHR | 0000, makedev(0, 0)) < 0)
    return husk_error(x->err, errno, "layer entry `%s`: cannot make the whiteout", entry);
  return 0;
}

static int lx_entry(struct lx *x, struct archive_entry *e) {
  const char *raw = archive_entry_pathname(e);
  if (++x->out->entries > x->lim->max_entries)
    return husk_fail(x->err, EFBIG, "the layer has more than %llu entries",
                     (unsigned long long)x->lim->max_entries);
  char rel[PATH_MAX];
  if (!raw)
    return husk_fail(x->err, EINVAL, "damaged layer: an entry without a name");
  if (layer_clean_name(raw, rel, sizeof rel) < 0)
    return husk_fail(x->err, EINVAL,
                     "layer entry `%.300s`: an absolute name, a `..` component or a name too "
                     "long is refused",
                     raw);
  if (!*rel)
    return 0; /* the layer's root itself */
  char entry[PATH_MAX];
  memcpy(entry, rel, strlen(rel) + 1);
  char *parent, *name;
  split(rel, &parent, &name);
  const char *hardlink = archive_entry_hardlink(e);
  mode_t type = archive_entry_filetype(e);
  bool whiteout = !strncmp(name, WH_PREFIX, strlen(WH_PREFIX));
  if (whiteout && strcmp(name, WH_OPAQUE) && !strncmp(name, WH_META, strlen(WH_META))) {
    x->out->dropped++; /* aufs bookkeeping (.wh..wh.plnk, .wh..wh.aufs) */
    return 0;
  }
  if (!whiteout && !hardlink && type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK) {
    x->out->dropped++; /* devices, FIFOs, sockets never reach the disk */
    return 0;
  }
  cleanup_close int pfd = lx_dir(x, parent, entry);
  if (pfd < 0)
    return -1;
  if (!strcmp(name, WH_OPAQUE)) {
    /* The directory's contents in the layers below are hidden. */
    if (fsetxattr(pfd, "trusted.overlay.opaque", "y", 1, 0) < 0)
      return husk_error(x->err, errno, "layer entry `%s`: cannot mark its directory opaque", entry);
    return 0;
  }
  if (whiteout)
    return lx_whiteout(x, pfd, name + strlen(WH_PREFIX), entry);
  if (hardlink)
    return lx_hardlink(x, hardlink, pfd, name, entry);
  if (type == AE_IFDIR)
    return lx_directory(x, e, pfd, name, entry);
  if (type == AE_IFLNK)
    return lx_symlink(x, e, pfd, name, entry);
  return lx_file(x, e, pfd, name, entry);
}

/* bzip2 and xz/lzma, only when built into libarchive (else it would run
 * an external program). */
static void more_filters(struct archive *a) {
  if (archive_bzlib_version())
    archive_read_support_filter_bzip2(a);
  if (archive_liblzma_version()) {
    archive_read_support_filter_xz(a);
    archive_read_support_filter_lzma(a);
  }
}

int layer_is_archive(int fd, bool *out, struct husk_err *err) {
  *out = false;
  struct archive *a = archive_read_new();
  if (!a)
    return husk_error(err, ENOMEM, "archive reader");
  archive_read_support_format_tar(a);
  if (archive_zlib_version())
    archive_read_support_filter_gzip(a);
  if (archive_libzstd_version())
    archive_read_support_filter_zstd(a);
  more_filters(a);
  struct archive_entry *e;
  if (lseek(fd, 0, SEEK_SET) == 0 && archive_read_open_fd(a, fd, CHUNK) == ARCHIVE_OK)
  {
    int r = archive_read_next_header(a, &e);
    *out = r == ARCHIVE_OK || r == ARCHIVE_WARN; /* an empty file is no archive */
  }
  archive_read_free(a);
  if (lseek(fd, 0, SEEK_SET) < 0)
    return husk_error(err, errno, "cannot read the file again");
  return 0;
}

int layer_codec_check(int blob_fd, bool have_zstd, struct husk_err *err) {
  static const unsigned char zstd_magic[4] = {0x28, 0xb5, 0x2f, 0xfd};
  unsigned char m[4];
  ssize_t n;
  do
    n = pread(blob_fd, m, sizeof m, 0);
  while (n < 0 && errno == EINTR);
  if (n < 0 && errno != ESPIPE)
    return husk_error(err, errno, "cannot read the layer");
  if (!have_zstd && n == (ssize_t)sizeof m && !memcmp(m, zstd_magic, sizeof m))
    return husk_fail(err, ENOTSUP,
                     "it is zstd-compressed, and the libarchive husk runs on was built "
                     "without zstd (recompress the image with gzip, or install a libarchive "
                     "with libzstd)");
  return 0;
}

/* The chain: raw (decompression only) over the blob fd, tar over raw. */
static int lx_open(struct lx *x, int blob_fd) {
  if (layer_codec_check(blob_fd, archive_libzstd_version() != NULL, x->err) < 0)
    return -1;
  if (!(x->raw = archive_read_new()) || !(x->tar = archive_read_new()))
    return husk_error(x->err, ENOMEM, "archive reader");
  archive_read_support_format_raw(x->raw);
  /* Only the decompressors built into libarchive: it would otherwise run
   * an external program for a format it lacks. */
  if (archive_zlib_version())
    archive_read_support_filter_gzip(x->raw);
  if (archive_libzstd_version())
    archive_read_support_filter_zstd(x->raw);
  if (x->lim->more_filters)
    more_filters(x->raw);
  if (archive_read_open_fd(x->raw, blob_fd, CHUNK) != ARCHIVE_OK) {
    x->raw_failed = true;
    return lx_archive_fail(x, "start");
  }
  struct archive_entry *re;
  int r = archive_read_next_header(x->raw, &re);
  if (r == ARCHIVE_EOF)
    return husk_fail(x->err, EINVAL, "damaged layer: it is empty");
  if (r < ARCHIVE_WARN) {
    x->raw_failed = true;
    return lx_archive_fail(x, "start");
  }
  /* No decompression (only the "none" filter): the stream is the blob,
   * whose verified digest is then its diff_id. */
  x->hashed = !(x->lim->blob_digest && archive_filter_count(x->raw) == 1 &&
                archive_filter_code(x->raw, 0) == ARCHIVE_FILTER_NONE);
  archive_read_support_format_tar(x->tar);
  if (archive_read_open(x->tar, x, NULL, lx_read, NULL) != ARCHIVE_OK)
    return lx_archive_fail(x, "start");
  return 0;
}

int layer_extract(int blob_fd, int dest_fd, const struct layer_limits *lim,
                  struct layer_result *out, struct husk_err *err) {
  memset(out, 0, sizeof *out);
  struct lx x = {.lim = lim, .out = out, .err = err, .dest = dest_fd};
  int rc = -1;
  if (!(x.buf = malloc(CHUNK)) || !(x.md = EVP_MD_CTX_new()) ||
      EVP_DigestInit_ex(x.md, EVP_sha256(), NULL) != 1) {
    husk_error(err, ENOMEM, "layer reader");
    goto out;
  }
  if (lx_open(&x, blob_fd) < 0)
    goto out;
  for (;;) {
    struct archive_entry *e;
    int r = archive_read_next_header(x.tar, &e);
    if (r == ARCHIVE_EOF)
      break;
    if (r < ARCHIVE_WARN) {
      lx_archive_fail(&x, "header");
      goto out;
    }
    if (lx_entry(&x, e) < 0)
      goto out;
  }
  /* The tar parser stops at the end-of-archive marker: what follows is
   * still part of the stream the diff_id covers. */
  const void *ignored;
  while (lx_read(x.tar, &x, &ignored) > 0)
    ;
  if (x.raw_failed || x.over_limit) {
    lx_archive_fail(&x, "end");
    goto out;
  }
  if (!x.hashed) {
    snprintf(out->diff_id, sizeof out->diff_id, "%s", lim->blob_digest);
    rc = 0;
    goto out;
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned mdlen = 0;
  if (EVP_DigestFinal_ex(x.md, md, &mdlen) != 1 || mdlen != 32) {
    husk_error(err, EIO, "cannot hash the layer");
    goto out;
  }
  char *p = out->diff_id + snprintf(out->diff_id, sizeof out->diff_id, "sha256:");
  for (unsigned i = 0; i < mdlen; i++)
    p += snprintf(p, 3, "%02x", md[i]);
  rc = 0;
out:
  if (x.tar)
    archive_read_free(x.tar);
  if (x.raw)
    archive_read_free(x.raw);
  EVP_MD_CTX_free(x.md);
  free(x.buf);
  return rc;
}
