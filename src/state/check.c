/* What untrusted strings may look like before they are stored.
 *
 * Everything here is checked before SQL sees it, for two reasons: a value
 * longer than the field it is read back into would come back cut, that is,
 * as a different value (an id that names another box); and what is stored
 * is later printed into JSON replies and log lines, where invalid UTF-8
 * breaks the encoder and control characters forge lines.  Messages name the
 * field, never repeat its content. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "state/db.h"

static bool id_char(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-';
}

static int check_id_impl(const char *what, const char *s, size_t size, bool empty_ok,
                         struct husk_err *err) {
  if (!s)
    return husk_fail(err, EINVAL, "%s is missing", what);
  size_t n = strnlen(s, size);
  if (n == size)
    return husk_fail(err, EINVAL, "%s is too long (at most %zu bytes)", what, size - 1);
  if (n == 0 && !empty_ok)
    return husk_fail(err, EINVAL, "%s is empty", what);
  for (size_t i = 0; i < n; i++)
    if (!id_char((unsigned char)s[i]))
      return husk_fail(err, EINVAL, "%s may only contain letters, digits, `_` and `-`", what);
  return 0;
}

int check_id(const char *what, const char *s, size_t size, struct husk_err *err) {
  return check_id_impl(what, s, size, false, err);
}

int check_id_or_empty(const char *what, const char *s, size_t size, struct husk_err *err) {
  return check_id_impl(what, s, size, true, err);
}

/* Length of the well-formed UTF-8 sequence at s (n bytes available), 0 if
 * there is none: RFC 3629, so no overlong forms, no UTF-16 surrogates,
 * nothing above U+10FFFF. */
static size_t utf8_seq(const unsigned char *s, size_t n) {
  unsigned char c = s[0];
  size_t len;
  unsigned lo = 0x80, hi = 0xbf; /* allowed range of the second byte */
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
  if (n < len || s[1] < lo || s[1] > hi)
    return 0;
  for (size_t k = 2; k < len; k++)
    if (s[k] < 0x80 || s[k] > 0xbf)
      return 0;
  return len;
}

bool utf8_valid(const char *str, size_t n) {
  const unsigned char *s = (const unsigned char *)str;
  for (size_t i = 0, len; i < n; i += len)
    if ((len = utf8_seq(s + i, n - i)) == 0)
      return false;
  return true;
}

void sanitize_text(char *str) {
  unsigned char *s = (unsigned char *)str;
  size_t n = strlen(str);
  for (size_t i = 0, len; i < n; i += len) {
    len = utf8_seq(s + i, n - i);
    if (len == 0) {
      s[i] = '?';
      len = 1;
    } else if (len == 1 && (s[i] < 0x20 || s[i] == 0x7f)) {
      s[i] = '?';
    }
  }
}

void text_fit(char *dst, size_t size, const char *src) {
  size_t n = strnlen(src, size);
  if (n < size) {
    memcpy(dst, src, n + 1);
  } else {
    /* Marked the way util/error.c marks cut messages.  A multibyte
     * character split by the cut becomes '?' below. */
    memcpy(dst, src, size - 4);
    memcpy(dst + size - 4, "...", 4);
  }
  sanitize_text(dst);
}

int check_text(const char *what, const char *s, size_t size, bool empty_ok, struct husk_err *err) {
  if (!s)
    return husk_fail(err, EINVAL, "%s is missing", what);
  size_t n = strnlen(s, size);
  if (n == size)
    return husk_fail(err, EINVAL, "%s is too long (at most %zu bytes)", what, size - 1);
  if (n == 0 && !empty_ok)
    return husk_fail(err, EINVAL, "%s is empty", what);
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
      return husk_fail(err, EINVAL, "%s contains a control character", what);
  if (!utf8_valid(s, n))
    return husk_fail(err, EINVAL, "%s is not valid UTF-8", what);
  return 0;
}

int check_json(const char *what, const char *s, struct husk_err *err) {
  if (!s)
    return husk_fail(err, EINVAL, "%s is missing", what);
  size_t n = strnlen(s, (size_t)STATE_JSON_MAX + 1);
  if (n > STATE_JSON_MAX)
    return husk_fail(err, EINVAL, "%s is too long (at most %d bytes)", what, STATE_JSON_MAX);
  /* Strings inside JSON may carry any character escaped, but raw bytes
   * must be UTF-8 for every JSON reader downstream. */
  if (!utf8_valid(s, n))
    return husk_fail(err, EINVAL, "%s is not valid UTF-8", what);
  return 0;
}
