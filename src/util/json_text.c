#define _GNU_SOURCE
#include "util/json_text.h"

#include <string.h>

#include "util/cleanup.h"
#include "util/timefmt.h"
#include "util/utf8.h"

json_t *json_time(int64_t ms) {
  char buf[TIME_RFC3339_SIZE];
  if (ms <= 0 || !time_rfc3339(ms, buf))
    return json_null();
  return json_string(buf);
}

json_t *json_text(const char *buf, size_t len, bool keep_nul, bool *lossy) {
  if (lossy)
    *lossy = false;
  if (utf8_valid(buf, len) && (keep_nul || len == 0 || !memchr(buf, 0, len)))
    return json_stringn(buf, len);
  if (lossy)
    *lossy = true;
  size_t n;
  cleanup_free char *text = utf8_lossy(buf, len, keep_nul, &n);
  return text ? json_stringn(text, n) : NULL;
}
