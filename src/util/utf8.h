/* UTF-8 as RFC 3629 defines it: what the core lets into its database,
 * its object keys and its log lines, and what the fronts send as text. */
#ifndef HUSK_UTIL_UTF8_H
#define HUSK_UTIL_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* Length of the well-formed UTF-8 sequence at s (n > 0 bytes available),
 * 0 if there is none: no overlong forms, no UTF-16 surrogates, nothing
 * above U+10FFFF. */
size_t utf8_seq_len(const unsigned char *s, size_t n);
/* Whether the n bytes at s are well-formed UTF-8 (NUL included). */
bool utf8_valid(const char *s, size_t n);

/* Length of the longest prefix of the n bytes at s that does not end
 * inside a multi-byte sequence that is well-formed so far: what can be
 * sent now of output whose next bytes may complete the character. */
size_t utf8_complete_prefix(const char *s, size_t n);

/* A copy of the n bytes at s (malloc'd, NUL-terminated, its length in
 * *out_len) in which each byte that does not start a well-formed sequence
 * -- and each NUL, unless `keep_nul` -- is replaced by U+FFFD (3 bytes).
 * NULL when out of memory. */
char *utf8_lossy(const char *s, size_t n, bool keep_nul, size_t *out_len);

#endif
