/* Strict parsers for user-supplied numbers: sizes ("256M"), counts, CPU
 * fractions and durations.  They reject empty strings, signs, trailing junk,
 * overflow and values outside the caller's range; nothing is silently
 * clamped. */
#ifndef HUSK_UTIL_PARSE_H
#define HUSK_UTIL_PARSE_H

#include <stdbool.h>
#include <stdint.h>

#include "util/error.h"

/* "1024", "512k", "256M", "1G", "2T", with optional "i"/"B" suffix
 * ("256MiB", "256MB" mean the same: binary units).  Result in bytes. */
int parse_size(const char *s, uint64_t *out, struct husk_err *err);

/* Decimal unsigned integer in [min, max]. */
int parse_u64_range(const char *s, uint64_t min, uint64_t max, uint64_t *out, struct husk_err *err);

/* Non-negative decimal with an optional fraction ("1", "0.5", "2.25"), as
 * thousandths, in [min_milli, max_milli].  Used for --cpus and --timeout. */
int parse_milli(const char *s, uint64_t min_milli, uint64_t max_milli, uint64_t *out_milli,
                struct husk_err *err);

/* NAME=VALUE where NAME is a portable environment variable name
 * ([A-Za-z_][A-Za-z0-9_]*).  Returns the length of NAME. */
int parse_env_assignment(const char *s, struct husk_err *err);

#endif
