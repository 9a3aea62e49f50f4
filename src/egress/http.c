/* Strict HTTP/1.1 head parsing (see http.h). */
#define _GNU_SOURCE
#include "egress/http.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

size_t egress_http_head_end(const char *buf, size_t len) {
  for (size_t i = 3; i < len; i++)
    if (buf[i] == '\n' && buf[i - 1] == '\r' && buf[i - 2] == '\n' && buf[i - 3] == '\r')
      return i + 1;
  return 0;
}

static bool tchar(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         (c && strchr("!#$%&'*+-.^_`|~", c));
}

void egress_http_free(struct http_head *h) {
  free(h->buf);
  memset(h, 0, sizeof *h);
}

static int refuse(struct http_head *h, struct husk_err *err, int status, const char *why) {
  egress_http_free(h);
  husk_fail(err, EINVAL, "%s", why);
  return status;
}

int egress_http_parse(const char *buf, size_t len, bool request, struct http_head *out,
                      struct husk_err *err) {
  memset(out, 0, sizeof *out);
  if (len > EGRESS_HTTP_HEAD_MAX)
    return refuse(out, err, 431, "request head too large");
  if (len < 4 || memcmp(buf + len - 4, "\r\n\r\n", 4))
    return refuse(out, err, 400, "incomplete head");
  if (!(out->buf = malloc(len + 1)))
    return refuse(out, err, 503, "out of memory");
  memcpy(out->buf, buf, len);
  out->buf[len] = '\0';
  /* Every line must end in CRLF; no other CR, LF, NUL or control byte. */
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)out->buf[i];
    if (c == '\r') {
      if (i + 1 >= len || out->buf[i + 1] != '\n')
        return refuse(out, err, 400, "bare CR in the head");
    } else if (c == '\n') {
      if (i == 0 || out->buf[i - 1] != '\r')
        return refuse(out, err, 400, "bare LF in the head");
    } else if ((c < 0x20 && c != '\t') || c == 0x7f) {
      return refuse(out, err, 400, "control character in the head");
    }
  }
  char *line = out->buf;
  char *eol = strstr(line, "\r\n");
  *eol = '\0';
  /* Start line: three fields separated by single spaces. */
  char *sp1 = strchr(line, ' ');
  char *sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
  if (!sp1 || !sp2 || sp1 == line || sp2 == sp1 + 1)
    return refuse(out, err, 400, "malformed start line");
  *sp1 = *sp2 = '\0';
  out->start[0] = line;
  out->start[1] = sp1 + 1;
  out->start[2] = sp2 + 1;
  if (request) {
    for (char *p = out->start[0]; *p; p++)
      if (!tchar((unsigned char)*p))
        return refuse(out, err, 400, "malformed method");
    if (strchr(out->start[2], ' ') || strchr(out->start[1], '\t'))
      return refuse(out, err, 400, "malformed request line");
    if (strcmp(out->start[2], "HTTP/1.1") && strcmp(out->start[2], "HTTP/1.0"))
      return refuse(out, err, 505, "only HTTP/1.0 and HTTP/1.1 are supported");
  } else {
    if (strncmp(out->start[0], "HTTP/1.", 7) || strlen(out->start[1]) != 3)
      return refuse(out, err, 502, "malformed status line");
  }
  line = eol + 2;
  bool seen_host = false, seen_te = false;
  while (*line != '\r') {
    eol = strstr(line, "\r\n");
    *eol = '\0';
    if (*line == ' ' || *line == '\t')
      return refuse(out, err, 400, "obsolete line folding is not accepted");
    char *colon = strchr(line, ':');
    if (!colon || colon == line)
      return refuse(out, err, 400, "malformed header line");
    for (char *p = line; p < colon; p++)
      if (!tchar((unsigned char)*p))
        return refuse(out, err, 400, "malformed header name");
    *colon = '\0';
    char *v = colon + 1;
    while (*v == ' ' || *v == '\t')
      v++;
    char *e = v + strlen(v);
    while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
      *--e = '\0';
    if (out->nh == EGRESS_HTTP_MAX_HEADERS)
      return refuse(out, err, 431, "too many header lines");
    out->h[out->nh].name = line;
    out->h[out->nh].value = v;
    out->nh++;
    if (!strcasecmp(line, "host")) {
      if (seen_host)
        return refuse(out, err, 400, "duplicate Host header");
      seen_host = true;
    } else if (!strcasecmp(line, "content-length")) {
      if (!*v || strspn(v, "0123456789") != strlen(v) || strlen(v) > 18)
        return refuse(out, err, 400, "malformed Content-Length");
      uint64_t n = strtoull(v, NULL, 10);
      if (out->has_length)
        return refuse(out, err, 400, "duplicate Content-Length");
      out->has_length = true;
      out->length = n;
    } else if (!strcasecmp(line, "transfer-encoding")) {
      if (seen_te || strcasecmp(v, "chunked"))
        return refuse(out, err, request ? 501 : 502, "unsupported Transfer-Encoding");
      seen_te = true;
      out->chunked = true;
    }
    line = eol + 2;
  }
  if (out->chunked && out->has_length)
    return refuse(out, err, 400, "both Content-Length and Transfer-Encoding");
  if (request && !strcmp(out->start[2], "HTTP/1.1") && !seen_host)
    return refuse(out, err, 400, "missing Host header");
  return 0;
}

const char *egress_http_get(const struct http_head *h, const char *name) {
  for (size_t i = 0; i < h->nh; i++)
    if (!strcasecmp(h->h[i].name, name))
      return h->h[i].value;
  return NULL;
}

void egress_http_remove(struct http_head *h, const char *name) {
  size_t w = 0;
  for (size_t i = 0; i < h->nh; i++)
    if (strcasecmp(h->h[i].name, name))
      h->h[w++] = h->h[i];
  h->nh = w;
}
