#define _GNU_SOURCE
#include "util/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/cleanup.h"

int write_all(int fd, const void *buf, size_t len) {
  const char *p = buf;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    p += n;
    len -= (size_t)n;
  }
  return 0;
}

int write_file_at(int dirfd, const char *name, const char *s) {
  cleanup_close int fd = openat(dirfd, name, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return -1;
  size_t len = strlen(s);
  ssize_t n;
  do
    n = write(fd, s, len);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    return -1;
  if ((size_t)n != len) {
    errno = EIO;
    return -1;
  }
  return 0;
}

int mkdir_p(const char *path, mode_t mode) {
  char buf[PATH_MAX];
  size_t len = strlen(path);
  if (len == 0 || len >= sizeof buf) {
    errno = len ? ENAMETOOLONG : ENOENT;
    return -1;
  }
  memcpy(buf, path, len + 1);
  for (char *p = buf + 1; *p; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    if (mkdir(buf, mode) < 0 && errno != EEXIST)
      return -1;
    *p = '/';
  }
  if (mkdir(buf, mode) < 0 && errno != EEXIST)
    return -1;
  return 0;
}

ssize_t read_file_at(int dirfd, const char *name, char *buf, size_t size) {
  if (size == 0) {
    errno = EINVAL;
    return -1;
  }
  cleanup_close int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0)
    return -1;
  size_t off = 0;
  while (off < size - 1) {
    ssize_t n = read(fd, buf + off, size - 1 - off);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return -1;
    }
    if (n == 0)
      break;
    off += (size_t)n;
  }
  buf[off] = '\0';
  return (ssize_t)off;
}

int proc_stat_fields(pid_t pid, unsigned long long *v, int n) {
  char path[64], buf[2048];
  if (pid > 0)
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  else
    snprintf(path, sizeof path, "/proc/self/stat");
  for (int k = 0; k < n; k++)
    v[k] = 0;
  cleanup_close int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  ssize_t len;
  do
    len = read(fd, buf, sizeof buf - 1);
  while (len < 0 && errno == EINTR);
  if (len < 0)
    return -1;
  buf[len] = '\0';
  char *p = strrchr(buf, ')'); /* the command name ends at the last ')' */
  if (!p) {
    errno = EIO;
    return -1;
  }
  int field = 2;
  for (char *t = p + 1; *t && field < n; t++)
    if (*t == ' ' && ++field < n)
      v[field] = strtoull(t + 1, NULL, 10);
  return 0;
}

int mkdir_private(const char *dir, struct husk_err *err) {
  char p[PATH_MAX];
  if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p)
    return husk_fail(err, ENAMETOOLONG, "data directory path too long");
  for (char *s = p + 1; *s; s++) {
    if (*s != '/')
      continue;
    *s = '\0';
    if (mkdir(p, 0700) < 0 && errno != EEXIST)
      return husk_error(err, errno, "cannot create `%s`", p);
    *s = '/';
  }
  if (mkdir(p, 0700) < 0 && errno != EEXIST)
    return husk_error(err, errno, "cannot create `%s`", p);
  struct stat st;
  if (lstat(p, &st) < 0)
    return husk_error(err, errno, "`%s`", p);
  if (!S_ISDIR(st.st_mode))
    return husk_fail(err, ENOTDIR, "`%s` is not a directory", p);
  if (st.st_uid != geteuid())
    return husk_fail(err, EPERM, "`%s` belongs to another user", p);
  if (st.st_mode & 022)
    return husk_fail(err, EPERM, "`%s` is writable by others: use a private directory (0700)", p);
  return 0;
}

static bool all_zero(const char *p, size_t n) {
  return n == 0 || (p[0] == 0 && memcmp(p, p + 1, n - 1) == 0);
}

int write_block_sparse(int fd, const char *buf, size_t size, int64_t off) {
  const size_t page = 4096;
  for (size_t done = 0; done < size;) {
    /* One piece: up to the next page boundary of the file offset. */
    uint64_t at = (uint64_t)off + done;
    size_t n = page - (size_t)(at % page);
    if (n > size - done)
      n = size - done;
    if (all_zero(buf + done, n)) {
      done += n; /* the file is all zeros already: any zero piece is a no-op */
      continue;
    }
    /* Coalesce following non-zero pages into one write. */
    while (done + n < size) {
      size_t m = size - done - n > page ? page : size - done - n;
      if (m == page && all_zero(buf + done + n, m))
        break;
      n += m;
    }
    ssize_t w = pwrite(fd, buf + done, n, (off_t)at);
    if (w < 0 && errno == EINTR)
      continue;
    if (w < 0)
      return -1;
    done += (size_t)w;
  }
  return 0;
}
