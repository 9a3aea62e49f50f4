#define _GNU_SOURCE
#include "util/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void strbuf_add(struct strbuf *b, const char *s, size_t n) {
  if (b->oom)
    return;
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + n + 1)
      cap *= 2;
    char *q = realloc(b->p, cap);
    if (!q) {
      b->oom = true;
      return;
    }
    b->p = q;
    b->cap = cap;
  }
  memcpy(b->p + b->n, s, n);
  b->n += n;
  b->p[b->n] = '\0';
}

void strbuf_str(struct strbuf *b, const char *s) { strbuf_add(b, s, strlen(s)); }

void strbuf_chr(struct strbuf *b, char c) { strbuf_add(b, &c, 1); }

char *strbuf_take(struct strbuf *b) {
  char *p = b->p;
  bool oom = b->oom;
  *b = (struct strbuf){0};
  if (oom) {
    free(p);
    return NULL;
  }
  return p ? p : strdup("");
}

void strbuf_printf(struct strbuf *b, const char *fmt, ...) {
  if (b->oom)
    return;
  char *t = NULL;
  va_list ap;
  va_start(ap, fmt);
  int n = vasprintf(&t, fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->oom = true;
    return;
  }
  strbuf_add(b, t, (size_t)n);
  free(t);
}

void strbuf_html(struct strbuf *b, const char *s) {
  for (; *s; s++) {
    switch (*s) {
    case '&': strbuf_str(b, "&amp;"); break;
    case '<': strbuf_str(b, "&lt;"); break;
    case '>': strbuf_str(b, "&gt;"); break;
    case '"': strbuf_str(b, "&quot;"); break;
    case '\'': strbuf_str(b, "&#39;"); break;
    default: strbuf_chr(b, *s);
    }
  }
}
