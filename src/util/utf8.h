/* UTF-8 as RFC 3629 defines it: what the core lets into its database,
 * its object keys and its log lines. */
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

#endif
