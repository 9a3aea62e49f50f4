/* One error type for the whole core library.
 *
 * Every fallible core function returns a negative value and fills a
 * `struct husk_err` (errno + a message with context, paths in backticks), in
 * the style of crun's libcrun_error_t.  Messages are bounded: a message that
 * would not fit is cut and marked with "...", never overflowed. */
#ifndef HUSK_UTIL_ERROR_H
#define HUSK_UTIL_ERROR_H

#include <stdarg.h>
#include <stddef.h>

#include "husk/base.h" /* struct husk_err, husk_log_fn */

/* Fill `err` with `errnum` and a formatted message; if errnum != 0 the
 * strerror text is appended as ": <text>".  Always returns -1. */
int husk_error(struct husk_err *err, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Like husk_error() but without the strerror suffix: for errors about user
 * input, where "Invalid argument" adds nothing.  `errnum` is still stored. */
int husk_fail(struct husk_err *err, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefix an existing error with more context: "<context>: <old message>". */
int husk_error_wrap(struct husk_err *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

void husk_err_clear(struct husk_err *err);

/* Replace control characters (newlines, ANSI escapes, and the C1 controls
 * U+0080..U+009F in UTF-8) so text taken from a box can be printed on one
 * host log line safely. */
void husk_sanitize_line(char *s);

/* Format one log line (cut at 1 KiB), sanitise it, hand it to `log`. */
void husk_vlog(husk_log_fn log, void *ctx, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

#endif
