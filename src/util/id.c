#define _GNU_SOURCE
#include "util/id.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

/* Bytes of randomness one id can take (an id's buffer is small). */
#define ID_BYTES_MAX 64

int id_random_bytes(void *buf, size_t n, struct husk_err *err) {
  unsigned char *p = buf;
  while (n > 0) {
    ssize_t r = getrandom(p, n, 0);
    if (r < 0) {
      if (errno == EINTR)
        continue;
      return husk_error(err, errno, "getrandom");
    }
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

int id_new(const char *prefix, size_t bytes, char *out, size_t size, struct husk_err *err) {
  static const char hex[] = "0123456789abcdef";
  unsigned char raw[ID_BYTES_MAX];
  size_t plen = prefix ? strlen(prefix) : 0;
  if (bytes > sizeof raw)
    return husk_fail(err, EINVAL, "an id takes at most %d random bytes", ID_BYTES_MAX);
  if (!out || size < plen + 2 * bytes + 1)
    return husk_fail(err, EINVAL, "id buffer too small");
  if (id_random_bytes(raw, bytes, err) < 0)
    return -1;
  if (plen)
    memcpy(out, prefix, plen);
  for (size_t i = 0; i < bytes; i++) {
    out[plen + 2 * i] = hex[raw[i] >> 4];
    out[plen + 2 * i + 1] = hex[raw[i] & 15];
  }
  out[plen + 2 * bytes] = '\0';
  return 0;
}
