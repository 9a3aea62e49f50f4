#define _GNU_SOURCE
#include "util/strbuf.h"

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
