#include "util/utf8.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The sequence at s (n > 0 bytes available): its length if it is
 * well-formed, else 0, with *cut set when the n bytes are a well-formed
 * beginning of a longer sequence. */
static size_t seq(const unsigned char *s, size_t n, bool *cut) {
  unsigned char c = s[0];
  size_t len;
  unsigned lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
  *cut = false;
  if (c < 0x80)
    return 1;
  if (c >= 0xc2 && c <= 0xdf) {
    len = 2;
  } else if (c >= 0xe0 && c <= 0xef) {
    len = 3;
    if (c == 0xe0)
      lo = 0xa0; /* overlong */
    else if (c == 0xed)
      hi = 0x9f; /* surrogates */
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4;
    if (c == 0xf0)
      lo = 0x90; /* overlong */
    else if (c == 0xf4)
      hi = 0x8f; /* above U+10FFFF */
  } else {
    return 0;
  }
  for (size_t k = 1; k < len; k++) {
    if (k == n) {
      *cut = true;
      return 0;
    }
    unsigned min = k == 1 ? lo : 0x80, max = k == 1 ? hi : 0xbf;
    if (s[k] < min || s[k] > max)
      return 0;
  }
  return len;
}

size_t utf8_seq_len(const unsigned char *s, size_t n) {
  bool cut;
  return seq(s, n, &cut);
}

bool utf8_valid(const char *str, size_t n) {
  const unsigned char *s = (const unsigned char *)str;
  for (size_t i = 0, len; i < n; i += len)
    if ((len = utf8_seq_len(s + i, n - i)) == 0)
      return false;
  return true;
}

size_t utf8_complete_prefix(const char *str, size_t n) {
  const unsigned char *s = (const unsigned char *)str;
  /* The last sequence starts at most 3 bytes before the end. */
  size_t start = n > 3 ? n - 3 : 0;
  for (size_t i = n; i > start;) {
    i--;
    if ((s[i] & 0xc0) != 0x80) {
      bool cut;
      if (seq(s + i, n - i, &cut) == 0 && cut)
        return i;
      return n;
    }
  }
  return n;
}

char *utf8_lossy(const char *str, size_t n, bool keep_nul, size_t *out_len) {
  if (n > (SIZE_MAX - 1) / 3)
    return NULL;
  char *out = malloc(n * 3 + 1);
  if (!out)
    return NULL;
  const unsigned char *s = (const unsigned char *)str;
  size_t o = 0;
  for (size_t i = 0; i < n;) {
    size_t len = s[i] || keep_nul ? utf8_seq_len(s + i, n - i) : 0;
    if (len) {
      memcpy(out + o, s + i, len);
      o += len;
      i += len;
    } else {
      memcpy(out + o, "\xef\xbf\xbd", 3);
      o += 3;
      i++;
    }
  }
  out[o] = '\0';
  *out_len = o;
  return out;
}
