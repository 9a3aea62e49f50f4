/* A strict HTTP/1.1 message-head parser for the egress proxy.
 *
 * The proxy sits between a hostile client and servers that may parse
 * differently, so anything two parsers could disagree on is refused
 * instead of interpreted: obs-fold (continuation lines), bare LF or CR,
 * NUL and other control bytes, whitespace before a colon, invalid header
 * names, duplicate Host, duplicate or non-numeric Content-Length,
 * Content-Length together with Transfer-Encoding, and any
 * Transfer-Encoding other than a lone "chunked".  Heads are capped at
 * EGRESS_HTTP_HEAD_MAX bytes and EGRESS_HTTP_MAX_HEADERS lines. */
#ifndef HUSK_EGRESS_HTTP_H
#define HUSK_EGRESS_HTTP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

#define EGRESS_HTTP_HEAD_MAX 16384
#define EGRESS_HTTP_MAX_HEADERS 100

struct http_header {
  char *name;  /* as sent */
  char *value; /* OWS trimmed */
};

struct http_head {
  char *buf;  /* owned copy of the head, split in place */
  /* Requests: method, target, version.  Responses: version, status, reason. */
  char *start[3];
  struct http_header h[EGRESS_HTTP_MAX_HEADERS];
  size_t nh;
  bool chunked;
  bool has_length;
  uint64_t length;
};

/* Where a head ends in buf[0..len): the offset after "\r\n\r\n", 0 if not
 * yet complete. */
size_t egress_http_head_end(const char *buf, size_t len);

/* Parse a complete head (len includes the blank line).  `request` selects
 * the start-line grammar.  Returns an HTTP status to refuse with (400,
 * 431, 501, 505) and a reason in err, or 0. */
int egress_http_parse(const char *buf, size_t len, bool request, struct http_head *out,
                      struct husk_err *err);
void egress_http_free(struct http_head *h);

/* The value of the first header `name` (case-insensitive), or NULL. */
const char *egress_http_get(const struct http_head *h, const char *name);
/* Remove every header `name`. */
void egress_http_remove(struct http_head *h, const char *name);

#endif
