/* husk: what every part of the public interface shares.
 *
 * The error object, the log callback, the export marker and the version.
 * Every fallible function of libhusk returns a negative value (-1) and
 * fills a `struct husk_err`; on success it returns 0 (or a count, where the
 * function says so) and leaves the error untouched. */
#ifndef HUSK_BASE_H
#define HUSK_BASE_H

#define HUSK_VERSION_MAJOR 0
#define HUSK_VERSION_MINOR 2
#define HUSK_VERSION_PATCH 0
#define HUSK_VERSION "0.2.0"

/* Marks the functions libhusk exports; everything else in the library is
 * hidden (built with -fvisibility=hidden). */
#if defined(__GNUC__) || defined(__clang__)
#define HUSK_PUBLIC __attribute__((visibility("default")))
#else
#define HUSK_PUBLIC
#endif

#define HUSK_ERR_MSG_MAX 1024

/* An error: an errno value saying what kind of failure it is, and one line
 * for a person saying what failed, on what, and why ("cannot mount proc on
 * `/proc`: Operation not permitted").  Messages never hold a secret.
 *
 * The codes a caller can act on are listed with each function; the common
 * ones: ENOENT (no such box, file or tenant; a box of another tenant is
 * reported this way too), EINVAL (bad argument), EBUSY (wrong state: the
 * box is not running), EDQUOT (a tenant quota), ENOSPC (the box's disk is
 * full), EAGAIN (a limit on concurrent work; retry later).  Any other code
 * is an internal failure (I/O, memory, the kernel refusing something). */
struct husk_err {
  int code;                   /* errno value, 0 if none applies */
  char msg[HUSK_ERR_MSG_MAX]; /* one line, NUL-terminated */
};

/* A log sink: called with one sanitised line (no control characters, at
 * most 1 KiB), from any of the library's threads.  NULL: no logging. */
typedef void (*husk_log_fn)(void *ctx, const char *line);

/* The library's version ("0.2.0"), which may differ from the HUSK_VERSION
 * a program was compiled with. */
HUSK_PUBLIC const char *husk_version(void);

#endif
