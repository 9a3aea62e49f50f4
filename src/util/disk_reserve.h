/* The free space kept on the data directory's filesystem, which neither
 * stored objects nor template layers may use (the database lives there
 * too): a byte count, a percentage of the filesystem, or the default (the
 * smaller of 1 GiB and 5%). */
#ifndef HUSK_UTIL_DISK_RESERVE_H
#define HUSK_UTIL_DISK_RESERVE_H

#include <stdbool.h>
#include <stdint.h>

#include "util/error.h"

#define DISK_RESERVE_DEFAULT (1ULL << 30)
#define DISK_RESERVE_DEFAULT_PCT 5

struct disk_reserve {
  uint64_t bytes; /* kept free ... */
  unsigned pct;   /* ... or this percent of the filesystem (0: `bytes`) */
  bool dflt;      /* the default */
};

/* "SIZE" (k/M/G suffixes), "N%" (0..90), or NULL: the default. */
int disk_reserve_parse(const char *text, struct disk_reserve *out, struct husk_err *err);

/* ENOSPC unless `add` more bytes fit on dirfd's filesystem above the
 * reserve; the message names the option that sets it. */
int disk_reserve_check(int dirfd, const struct disk_reserve *r, uint64_t add,
                       struct husk_err *err);

#endif
