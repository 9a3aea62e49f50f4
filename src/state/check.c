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
#include "util/utf8.h"

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

int state_check_client_id(const char *s, bool empty_ok, struct husk_err *err) {
  if (!s || strncmp(s, "https://", 8) != 0)
    return check_id_impl("client id", s, STATE_CLIENT_ID_SIZE, empty_ok, err);
  size_t n = strnlen(s, STATE_CLIENT_ID_SIZE);
  if (n == STATE_CLIENT_ID_SIZE)
    return husk_fail(err, EINVAL, "client id is too long (at most %d bytes)",
                     STATE_CLIENT_ID_SIZE - 1);
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
      return husk_fail(err, EINVAL, "a client id URL is printable ASCII without spaces");
  return 0;
}

/* A creator (see state.h): "u_" + 24 lowercase hex digits (what
 * state_new_id makes, and users have), "key:" + an API key id, or
 * "s3key:" + an S3 access key id; "" only where empty_ok. */
int state_check_created_by(const char *s, bool empty_ok, struct husk_err *err) {
  if (!s)
    return husk_fail(err, EINVAL, "creator is missing");
  if (!s[0])
    return empty_ok ? 0 : husk_fail(err, EINVAL, "creator is empty");
  if (!strncmp(s, "u_", 2)) {
    size_t n = strnlen(s + 2, 25);
    if (n != 24 || strspn(s + 2, "0123456789abcdef") != 24)
      return husk_fail(err, EINVAL, "creator is not a user id (u_ and 24 hex digits)");
    return 0;
  }
  if (!strncmp(s, "key:", 4)) {
    if (check_id("creator's key id", s + 4, STATE_KEY_ID_SIZE, err) < 0)
      return husk_fail(err, EINVAL, "creator is not key: and an API key id");
    return 0;
  }
  if (!strncmp(s, "s3key:", 6)) {
    if (check_id("creator's S3 key id", s + 6, STATE_S3_KEY_ID_SIZE, err) < 0)
      return husk_fail(err, EINVAL, "creator is not s3key: and an S3 access key id");
    return 0;
  }
  return husk_fail(err, EINVAL,
                   "creator must be a user id (u_...), key: and an API key id, or s3key: and an "
                   "S3 access key id");
}

void sanitize_text(char *str) {
  unsigned char *s = (unsigned char *)str;
  size_t n = strlen(str);
  for (size_t i = 0, len; i < n; i += len) {
    len = utf8_seq_len(s + i, n - i);
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
