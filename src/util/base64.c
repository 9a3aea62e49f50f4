#include "util/base64.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const char alphabet[2][65] = {
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
};

size_t b64_encoded_len(size_t n, enum b64_alphabet a) {
  return a == B64_STD ? (n + 2) / 3 * 4 : n / 3 * 4 + (n % 3 ? n % 3 + 1 : 0);
}

size_t b64_encode_to(char *out, const void *in, size_t n, enum b64_alphabet a) {
  const char *tbl = alphabet[a == B64_URL];
  const unsigned char *s = in;
  size_t o = 0;
  for (size_t i = 0; i < n; i += 3) {
    size_t left = n - i;
    unsigned v =
        (unsigned)s[i] << 16 | (left > 1 ? (unsigned)s[i + 1] << 8 : 0) | (left > 2 ? s[i + 2] : 0);
    out[o++] = tbl[v >> 18];
    out[o++] = tbl[(v >> 12) & 63];
    if (left > 1)
      out[o++] = tbl[(v >> 6) & 63];
    else if (a == B64_STD)
      out[o++] = '=';
    if (left > 2)
      out[o++] = tbl[v & 63];
    else if (a == B64_STD)
      out[o++] = '=';
  }
  out[o] = '\0';
  return o;
}

char *b64_encode(const void *in, size_t n, size_t *out_len) {
  if (n > (SIZE_MAX - 4) / 4 * 3)
    return NULL;
  char *out = malloc(b64_encoded_len(n, B64_STD) + 1);
  if (!out)
    return NULL;
  size_t o = b64_encode_to(out, in, n, B64_STD);
  if (out_len)
    *out_len = o;
  return out;
}

bool b64_char_ok(char c, enum b64_alphabet a) {
  return c != '\0' && memchr(alphabet[a == B64_URL], c, 64) != NULL;
}

/* The value of a character of the standard alphabet, -1 for any other. */
static int value(char c) {
  if (c >= 'A' && c <= 'Z')
    return c - 'A';
  if (c >= 'a' && c <= 'z')
    return c - 'a' + 26;
  if (c >= '0' && c <= '9')
    return c - '0' + 52;
  return c == '+' ? 62 : c == '/' ? 63 : -1;
}

int b64_decode(const char *s, size_t len, unsigned char **out, size_t *out_len) {
  for (int pad = 0; pad < 2 && len > 0 && s[len - 1] == '='; pad++)
    len--;
  /* One character left over holds 6 bits: less than a byte. */
  if (len % 4 == 1)
    return -1;
  unsigned char *bin = malloc(len / 4 * 3 + 3);
  if (!bin)
    return -1;
  size_t o = 0;
  unsigned acc = 0;
  int bits = 0;
  for (size_t i = 0; i < len; i++) {
    int v = value(s[i]);
    if (v < 0) {
      free(bin);
      return -1;
    }
    acc = (acc << 6 | (unsigned)v) & 0xffffff;
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      bin[o++] = (unsigned char)(acc >> bits);
    }
  }
  bin[o] = '\0';
  *out = bin;
  *out_len = o;
  return 0;
}
