/* Box file I/O for the MCP tools, on top of src/box/files.h (every path is
 * resolved inside the box, never on the host). */
#define _GNU_SOURCE
#include "mcp/boxio.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/fileio.h"

int mcp_box_fs(struct husk_mgr *m, const char *tenant, const char *id, struct husk_fs *b,
               struct husk_err *err) {
  return husk_box_open_fs(m, tenant, id, b, err);
}

static int commit_or_abort(const struct husk_fs *b, const char *path, int fd, const char *tmp,
                           int rc, struct husk_err *err) {
  if (rc == 0 && husk_file_commit(b, path, fd, tmp, err) == 0)
    return 0;
  husk_file_abort(b, path, fd, tmp);
  return -1;
}

int mcp_box_write(const struct husk_fs *b, const char *path, const void *data, size_t len,
                  struct husk_err *err) {
  if (husk_path_check(path, strlen(path), err) < 0)
    return -1;
  cleanup_close int fd = -1;
  char tmp[HUSK_TMPNAME_MAX];
  if (husk_file_create(b, path, true, 0644, &fd, tmp, sizeof tmp, err) < 0)
    return -1;
  int rc = 0;
  if (write_all(fd, data, len) < 0)
    rc = husk_error(err, errno, "cannot write `%s`", path);
  return commit_or_abort(b, path, fd, tmp, rc, err);
}

int mcp_box_write_at(const struct husk_fs *b, const char *path, const void *data, size_t len,
                     int64_t offset, uint64_t *size, struct husk_err *err) {
  if (husk_path_check(path, strlen(path), err) < 0)
    return -1;
  cleanup_close int fd = -1;
  struct stat st;
  if (husk_file_open_write(b, path, offset < 0, &fd, &st, err) < 0) {
    if (err->code != ENOENT || offset > 0)
      return -1;
    /* The first piece of a new file. */
    if (mcp_box_write(b, path, data, len, err) < 0)
      return -1;
    *size = len;
    return 0;
  }
  const char *p = data;
  size_t left = len;
  off_t at = offset < 0 ? 0 : (off_t)offset;
  while (left > 0) {
    ssize_t w = offset < 0 ? write(fd, p, left) : pwrite(fd, p, left, at);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return husk_error(err, w < 0 ? errno : EIO, "cannot write `%s`", path);
    p += w;
    left -= (size_t)w;
    at += w;
  }
  if (fstat(fd, &st) < 0)
    return husk_error(err, errno, "cannot inspect `%s`", path);
  *size = (uint64_t)st.st_size;
  return 0;
}

int mcp_box_copy_in(const struct husk_fs *b, const char *path, int src, uint64_t len,
                    struct husk_err *err) {
  cleanup_close int fd = -1;
  char tmp[HUSK_TMPNAME_MAX];
  if (husk_file_create(b, path, true, 0644, &fd, tmp, sizeof tmp, err) < 0)
    return -1;
  int rc = 0;
  char buf[65536];
  for (uint64_t off = 0; off < len;) {
    size_t want = len - off < sizeof buf ? (size_t)(len - off) : sizeof buf;
    ssize_t n = pread(src, buf, want, (off_t)off);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      rc = husk_error(err, errno, "cannot read output");
      break;
    }
    if (n == 0)
      break;
    if (write_all(fd, buf, (size_t)n) < 0) {
      rc = husk_error(err, errno, "cannot write `%s`", path);
      break;
    }
    off += (uint64_t)n;
  }
  return commit_or_abort(b, path, fd, tmp, rc, err);
}

int mcp_pread_max(int fd, uint64_t off, size_t max, char **out, size_t *len, struct husk_err *err) {
  char *buf = malloc(max ? max : 1);
  if (!buf)
    return husk_fail(err, ENOMEM, "out of memory");
  size_t got = 0;
  while (got < max) {
    ssize_t n = pread(fd, buf + got, max - got, (off_t)(off + got));
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      free(buf);
      return husk_error(err, errno, "read");
    }
    if (n == 0)
      break;
    got += (size_t)n;
  }
  *out = buf;
  *len = got;
  return 0;
}
