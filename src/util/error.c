#include "util/error.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static void mark_truncated(char *buf, size_t size, int n) {
  if (n >= 0 && (size_t)n >= size && size > 4)
    memcpy(buf + size - 4, "...", 4);
}

__attribute__((format(printf, 4, 0))) static int error_v(struct husk_err *err, int errnum,
                                                    bool with_text, const char *fmt, va_list ap) {
  if (!err)
    return -1;
  int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  if (n < 0) {
    err->msg[0] = '\0';
    n = 0;
  }
  if ((size_t)n < sizeof err->msg && errnum != 0 && with_text) {
    int m = snprintf(err->msg + n, sizeof err->msg - (size_t)n, ": %s", strerror(errnum));
    n = m < 0 ? n : n + m;
  }
  mark_truncated(err->msg, sizeof err->msg, n);
  husk_sanitize_line(err->msg);
  err->code = errnum;
  return -1;
}

int husk_error(struct husk_err *err, int errnum, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  error_v(err, errnum, true, fmt, ap);
  va_end(ap);
  return -1;
}

int husk_fail(struct husk_err *err, int errnum, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  error_v(err, errnum, false, fmt, ap);
  va_end(ap);
  return -1;
}

int husk_error_wrap(struct husk_err *err, const char *fmt, ...) {
  if (!err)
    return -1;
  char old[HUSK_ERR_MSG_MAX];
  memcpy(old, err->msg, sizeof old);
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  va_end(ap);
  if (n < 0)
    n = 0;
  if ((size_t)n < sizeof err->msg) {
    int m = snprintf(err->msg + n, sizeof err->msg - (size_t)n, ": %s", old);
    n = m < 0 ? n : n + m;
  }
  mark_truncated(err->msg, sizeof err->msg, n);
  husk_sanitize_line(err->msg);
  return -1;
}

void husk_err_clear(struct husk_err *err) {
  if (err) {
    err->code = 0;
    err->msg[0] = '\0';
  }
}

void husk_sanitize_line(char *s) {
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c < 0x20 || c == 0x7f) {
      *s = '?';
    } else if (c == 0xc2 && (unsigned char)s[1] >= 0x80 && (unsigned char)s[1] <= 0x9f) {
      /* C1 controls in UTF-8 (CSI, OSC, NEL...): terminals act on them too. */
      s[0] = '?';
      s[1] = '?';
      s++;
    }
  }
}

void husk_vlog(husk_log_fn log, void *ctx, const char *fmt, va_list ap) {
  if (!log)
    return;
  char line[1024];
  vsnprintf(line, sizeof line, fmt, ap);
  husk_sanitize_line(line);
  log(ctx, line);
}
