/* Base64 (RFC 4648): the standard alphabet with "=" padding (JSON bodies,
 * MCP content, headers, Content-MD5) and the URL-safe alphabet without
 * padding (keys and tokens). */
#ifndef HUSK_UTIL_BASE64_H
#define HUSK_UTIL_BASE64_H

#include <stdbool.h>
#include <stddef.h>

enum b64_alphabet {
  B64_STD, /* A-Z a-z 0-9 + /, padded with = to a multiple of 4 */
  B64_URL, /* A-Z a-z 0-9 - _, not padded */
};

/* Characters the encoding of n bytes takes (without the NUL). */
size_t b64_encoded_len(size_t n, enum b64_alphabet a);

/* Encode n bytes into out, which has room for b64_encoded_len(n) + 1;
 * NUL-terminated.  Returns the length. */
size_t b64_encode_to(char *out, const void *in, size_t n, enum b64_alphabet a);

/* The standard encoding of n bytes, malloc'd (its length in *out_len if
 * not NULL); NULL when out of memory. */
char *b64_encode(const void *in, size_t n, size_t *out_len);

/* Whether c is one of the 64 characters of alphabet a (not "="). */
bool b64_char_ok(char c, enum b64_alphabet a);

/* Decode the standard alphabet: padding optional (at most two "="), no
 * whitespace or other character; bits past the last whole byte are
 * dropped.  *out is malloc'd (NUL-terminated, so text can be used as a
 * string), its length in *out_len.  -1 when s is not base64 or out of
 * memory. */
int b64_decode(const char *s, size_t len, unsigned char **out, size_t *out_len);

#endif
