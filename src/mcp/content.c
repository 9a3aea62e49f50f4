/* Content helpers of the MCP front: image types, readiness of an fd. */
#define _GNU_SOURCE
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "mcp/internal.h"

static bool ends_with(const char *s, const char *suf) {
  size_t a = strlen(s), b = strlen(suf);
  return a >= b && !strcasecmp(s + a - b, suf);
}

const char *mcp_image_mime(const char *name, const unsigned char *h, size_t n) {
  if (n >= 8 && !memcmp(h, "\x89PNG\r\n\x1a\n", 8))
    return "image/png";
  if (n >= 3 && h[0] == 0xff && h[1] == 0xd8 && h[2] == 0xff)
    return "image/jpeg";
  if (n >= 6 && (!memcmp(h, "GIF87a", 6) || !memcmp(h, "GIF89a", 6)))
    return "image/gif";
  if (n >= 12 && !memcmp(h, "RIFF", 4) && !memcmp(h + 8, "WEBP", 4))
    return "image/webp";
  if (ends_with(name, ".svg") && n > 0 && memmem(h, n, "<svg", 4))
    return "image/svg+xml";
  return NULL;
}

const char *mcp_mime_by_name(const char *name) {
  static const struct {
    const char *ext, *mime;
  } t[] = {{".png", "image/png"},       {".jpg", "image/jpeg"},     {".jpeg", "image/jpeg"},
           {".gif", "image/gif"},       {".webp", "image/webp"},    {".svg", "image/svg+xml"},
           {".txt", "text/plain"},      {".md", "text/markdown"},   {".csv", "text/csv"},
           {".json", "application/json"}, {".html", "text/html"},   {".pdf", "application/pdf"},
           {".py", "text/x-python"},    {".zip", "application/zip"}};
  for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
    if (ends_with(name, t[i].ext))
      return t[i].mime;
  return "application/octet-stream";
}

bool mcp_fd_readable(int fd) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  return fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR));
}
