/* A growable, NUL-terminated byte buffer for building text (S3 XML
 * replies, SigV4 canonical requests).  An allocation failure is sticky:
 * later appends do nothing and `oom` stays set, so a builder checks once
 * at the end instead of after every append. */
#ifndef HUSK_UTIL_STRBUF_H
#define HUSK_UTIL_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

struct strbuf {
  char *p; /* NUL-terminated once anything was added; NULL before */
  size_t n, cap;
  bool oom;
};

void strbuf_add(struct strbuf *b, const char *s, size_t n);
void strbuf_str(struct strbuf *b, const char *s);
void strbuf_chr(struct strbuf *b, char c);
/* Formatted text appended. */
void strbuf_printf(struct strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* `s` as HTML text: & < > " ' escaped (safe in an element or a quoted
 * attribute). */
void strbuf_html(struct strbuf *b, const char *s);
/* The text (malloc'd, "" when empty; the caller frees it), or NULL after
 * an allocation failure.  The buffer is consumed either way. */
char *strbuf_take(struct strbuf *b);

#endif
