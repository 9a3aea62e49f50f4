/* Response bodies read from a file the box controls.
 *
 * The box can truncate or extend such a file while it is sent (a download
 * of one of its files, a process's output, which the process holds open
 * for writing).  libmicrohttpd's own fd responses send with sendfile() for
 * the length given at the start, and a file that shrank under them makes
 * sendfile() return 0 for ever: the connection's thread spins.  This body
 * reads with pread() instead, at most the announced length (what the file
 * gained meanwhile is not sent), and a read that finds the file shorter
 * than announced ends the response with an error: libmicrohttpd closes
 * the connection, so the client sees a short body, never a complete-looking
 * one. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#include "api/internal.h"
#include "util/cleanup.h"

#define FILE_BODY_BLOCK (64 * 1024)

struct file_body {
  int fd;
  uint64_t off, len;
};

static ssize_t file_body_read(void *cls, uint64_t pos, char *buf, size_t max) {
  struct file_body *b = cls;
  if (pos >= b->len)
    return MHD_CONTENT_READER_END_OF_STREAM;
  if ((uint64_t)max > b->len - pos)
    max = (size_t)(b->len - pos);
  for (;;) {
    ssize_t n = pread(b->fd, buf, max, (off_t)(b->off + pos));
    if (n > 0)
      return n;
    if (n < 0 && errno == EINTR)
      continue;
    /* 0: the file shrank below what was announced; or a read error. */
    return MHD_CONTENT_READER_END_WITH_ERROR;
  }
}

static void file_body_free(void *cls) {
  struct file_body *b = cls;
  close_quiet(b->fd);
  free(b);
}

struct MHD_Response *api_file_response(int fd, uint64_t off, uint64_t len) {
  struct file_body *b = malloc(sizeof *b);
  if (!b) {
    close_quiet(fd);
    return NULL;
  }
  b->fd = fd;
  b->off = off;
  b->len = len;
  struct MHD_Response *resp =
      MHD_create_response_from_callback(len, FILE_BODY_BLOCK, file_body_read, b, file_body_free);
  if (!resp)
    file_body_free(b);
  return resp;
}
