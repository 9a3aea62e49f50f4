/* A directory tree written as a layer (layer.h: layer_write_tree).
 *
 * The walk is fd-relative and never follows a symlink (the tree may have
 * been written by a box: a Dockerfile step's changes); names are sorted,
 * so the same tree gives the same bytes, and with them the same diff_id.
 * Overlay's whiteouts (character device 0/0) and opaque directories
 * (trusted.overlay.opaque=y) become OCI's ".wh." entries; other devices,
 * FIFOs and sockets are left out. */
#define _GNU_SOURCE
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "template/layer.h"
#include "util/cleanup.h"
#include "util/fileio.h"

#define CHUNK ((size_t)256 * 1024)
#define MAX_DEPTH 256
#define NOBODY 65534
#define RANGE 65536

struct link {
  dev_t dev;
  ino_t ino;
  char *path;
};

struct lw {
  struct archive *a;
  EVP_MD_CTX *md;
  int out;
  uint32_t base;
  const char *const *exclude;
  struct layer_written *res;
  struct husk_err *err;
  bool write_failed;
  int write_errno;
  struct link *links;
  size_t nlinks, caplinks;
  char *buf;
};

static la_ssize_t lw_write(struct archive *a, void *cd, const void *buf, size_t len) {
  struct lw *w = cd;
  if (EVP_DigestUpdate(w->md, buf, len) != 1 || write_all(w->out, buf, len) < 0) {
    w->write_failed = true;
    w->write_errno = errno ? errno : EIO;
    archive_set_error(a, w->write_errno, "cannot write the layer");
    return -1;
  }
  w->res->size += len;
  return (la_ssize_t)len;
}

static int lw_fail(struct lw *w, const char *rel) {
  if (w->write_failed)
    return husk_error(w->err, w->write_errno, "cannot write the layer (at `%s`)", rel);
  const char *m = archive_error_string(w->a);
  return husk_fail(w->err, EIO, "cannot write the layer (at `%s`): %s", rel, m ? m : "?");
}

/* A host id of the tree, as the box (and the image) see it. */
static la_int64_t box_id(uint32_t host, uint32_t base) {
  return host >= base && host - base < RANGE ? (la_int64_t)(host - base) : NOBODY;
}

static int header(struct lw *w, struct archive_entry *e, const char *rel) {
  if (archive_write_header(w->a, e) < ARCHIVE_WARN)
    return lw_fail(w, rel);
  w->res->entries++;
  return 0;
}

/* An empty regular file entry `rel` (a whiteout). */
static int marker(struct lw *w, const char *rel, const struct stat *st) {
  struct archive_entry *e = archive_entry_new();
  if (!e)
    return husk_error(w->err, ENOMEM, "layer entry");
  archive_entry_set_pathname(e, rel);
  archive_entry_set_filetype(e, AE_IFREG);
  archive_entry_set_perm(e, 0644);
  archive_entry_set_size(e, 0);
  archive_entry_set_mtime(e, st->st_mtim.tv_sec, st->st_mtim.tv_nsec);
  int rc = header(w, e, rel);
  archive_entry_free(e);
  return rc;
}

static const char *first_link(struct lw *w, const struct stat *st, const char *rel, int *err) {
  for (size_t i = 0; i < w->nlinks; i++)
    if (w->links[i].dev == st->st_dev && w->links[i].ino == st->st_ino)
      return w->links[i].path;
  if (w->nlinks == w->caplinks) {
    size_t nc = w->caplinks ? w->caplinks * 2 : 64;
    struct link *l = realloc(w->links, nc * sizeof *l);
    if (!l) {
      *err = ENOMEM;
      return NULL;
    }
    w->links = l;
    w->caplinks = nc;
  }
  if (!(w->links[w->nlinks].path = strdup(rel))) {
    *err = ENOMEM;
    return NULL;
  }
  w->links[w->nlinks].dev = st->st_dev;
  w->links[w->nlinks].ino = st->st_ino;
  w->nlinks++;
  return NULL;
}

static int walk(struct lw *w, int dirfd, const char *prefix, int depth);

static int entry(struct lw *w, int dirfd, const char *name, const char *prefix, int depth) {
  char rel[PATH_MAX];
  if (snprintf(rel, sizeof rel, "%s%s", prefix, name) >= (int)sizeof rel)
    return husk_fail(w->err, ENAMETOOLONG, "a name in the tree is too long: `%.100s...`", prefix);
  for (size_t i = 0; w->exclude && w->exclude[i]; i++)
    if (!strcmp(rel, w->exclude[i]))
      return 0;
  struct stat st;
  if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
    return husk_error(w->err, errno, "cannot read `%s`", rel);
  if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0)) {
    char wh[PATH_MAX];
    snprintf(wh, sizeof wh, "%s.wh.%s", prefix, name);
    return marker(w, wh, &st);
  }
  if (!S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode)) {
    w->res->skipped++;
    return 0;
  }
  struct archive_entry *e = archive_entry_new();
  if (!e)
    return husk_error(w->err, ENOMEM, "layer entry");
  archive_entry_set_uid(e, box_id(st.st_uid, w->base));
  archive_entry_set_gid(e, box_id(st.st_gid, w->base));
  archive_entry_set_mtime(e, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
  archive_entry_set_perm(e, st.st_mode & 07777);
  int rc = 0;
  if (S_ISDIR(st.st_mode)) {
    char drel[PATH_MAX + 1];
    snprintf(drel, sizeof drel, "%s/", rel);
    archive_entry_set_pathname(e, drel);
    archive_entry_set_filetype(e, AE_IFDIR);
    rc = header(w, e, rel);
    archive_entry_free(e);
    if (rc < 0)
      return -1;
    cleanup_close int sub = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0)
      return husk_error(w->err, errno, "cannot open `%s`", rel);
    char v[4];
    ssize_t n = fgetxattr(sub, "trusted.overlay.opaque", v, sizeof v);
    if (n == 1 && v[0] == 'y') {
      char wh[PATH_MAX + 16];
      snprintf(wh, sizeof wh, "%s/.wh..wh..opq", rel);
      if (marker(w, wh, &st) < 0)
        return -1;
    }
    if (depth >= MAX_DEPTH)
      return husk_fail(w->err, ELOOP, "the tree is deeper than %d levels at `%s`", MAX_DEPTH, rel);
    return walk(w, sub, drel, depth + 1);
  }
  archive_entry_set_pathname(e, rel);
  if (S_ISLNK(st.st_mode)) {
    char target[PATH_MAX];
    ssize_t n = readlinkat(dirfd, name, target, sizeof target - 1);
    if (n < 0) {
      archive_entry_free(e);
      return husk_error(w->err, errno, "cannot read the link `%s`", rel);
    }
    target[n] = '\0';
    archive_entry_set_filetype(e, AE_IFLNK);
    archive_entry_set_symlink(e, target);
    rc = header(w, e, rel);
    archive_entry_free(e);
    return rc;
  }
  archive_entry_set_filetype(e, AE_IFREG);
  int lerr = 0;
  const char *first = st.st_nlink > 1 ? first_link(w, &st, rel, &lerr) : NULL;
  if (lerr) {
    archive_entry_free(e);
    return husk_error(w->err, lerr, "layer links");
  }
  if (first) {
    archive_entry_set_hardlink(e, first);
    archive_entry_set_size(e, 0);
    rc = header(w, e, rel);
    archive_entry_free(e);
    return rc;
  }
  cleanup_close int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  struct stat now;
  if (fd < 0 || fstat(fd, &now) < 0 || now.st_ino != st.st_ino || !S_ISREG(now.st_mode)) {
    archive_entry_free(e);
    return husk_error(w->err, fd < 0 ? errno : ESTALE, "cannot read `%s`", rel);
  }
  archive_entry_set_size(e, now.st_size);
  rc = header(w, e, rel);
  archive_entry_free(e);
  if (rc < 0)
    return -1;
  off_t left = now.st_size;
  while (left > 0) {
    ssize_t n = read(fd, w->buf, left < (off_t)CHUNK ? (size_t)left : CHUNK);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) /* shrank while read: the header promised more, so fail */
      return husk_error(w->err, n < 0 ? errno : ESTALE, "`%s` changed while it was read", rel);
    if (archive_write_data(w->a, w->buf, (size_t)n) < 0)
      return lw_fail(w, rel);
    left -= n;
  }
  return 0;
}

static int cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

static int walk(struct lw *w, int dirfd, const char *prefix, int depth) {
  int fd = fcntl(dirfd, F_DUPFD_CLOEXEC, 3);
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d) {
    close_quiet(fd);
    return husk_error(w->err, errno, "cannot list `%s`", *prefix ? prefix : ".");
  }
  rewinddir(d); /* the duplicate shares the offset of the caller's fd */
  char **names = NULL;
  size_t n = 0, cap = 0;
  int rc = 0;
  struct dirent *de;
  errno = 0;
  while ((de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
      continue;
    if (n == cap) {
      size_t nc = cap ? cap * 2 : 32;
      char **v = realloc(names, nc * sizeof *v);
      if (!v) {
        rc = husk_error(w->err, ENOMEM, "listing `%s`", prefix);
        break;
      }
      names = v;
      cap = nc;
    }
    if (!(names[n] = strdup(de->d_name))) {
      rc = husk_error(w->err, ENOMEM, "listing `%s`", prefix);
      break;
    }
    n++;
  }
  closedir(d);
  if (rc == 0 && names)
    qsort(names, n, sizeof *names, cmp);
  for (size_t i = 0; i < n && rc == 0; i++)
    rc = entry(w, dirfd, names[i], prefix, depth);
  for (size_t i = 0; i < n; i++)
    free(names[i]);
  free(names);
  return rc;
}

int layer_write_tree(int dirfd, uint32_t id_base, const char *const *exclude, int out_fd,
                     struct layer_written *res, struct husk_err *err) {
  memset(res, 0, sizeof *res);
  struct lw w = {.out = out_fd, .base = id_base, .exclude = exclude, .res = res, .err = err};
  int rc = -1;
  if (!(w.buf = malloc(CHUNK)) || !(w.md = EVP_MD_CTX_new()) ||
      EVP_DigestInit_ex(w.md, EVP_sha256(), NULL) != 1 || !(w.a = archive_write_new())) {
    husk_error(err, ENOMEM, "layer writer");
    goto out;
  }
  archive_write_set_format_pax_restricted(w.a);
  archive_write_set_bytes_in_last_block(w.a, 1);
  if (archive_write_open(w.a, &w, NULL, lw_write, NULL) != ARCHIVE_OK) {
    lw_fail(&w, "start");
    goto out;
  }
  if (walk(&w, dirfd, "", 0) < 0)
    goto out;
  if (archive_write_close(w.a) != ARCHIVE_OK) {
    lw_fail(&w, "end");
    goto out;
  }
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned l = 0;
  if (EVP_DigestFinal_ex(w.md, md, &l) != 1) {
    husk_error(err, EIO, "cannot hash the layer");
    goto out;
  }
  char *p = res->diff_id + snprintf(res->diff_id, sizeof res->diff_id, "sha256:");
  for (unsigned i = 0; i < l; i++)
    p += snprintf(p, 3, "%02x", md[i]);
  rc = 0;
out:
  if (w.a)
    archive_write_free(w.a);
  EVP_MD_CTX_free(w.md);
  for (size_t i = 0; i < w.nlinks; i++)
    free(w.links[i].path);
  free(w.links);
  free(w.buf);
  return rc;
}
