/* Random bytes and the random ids built from them: the one generator of
 * the ids of boxes, tenants, keys and jobs (state), and of the store's
 * files, uploads and links (storage). */
#ifndef HUSK_UTIL_ID_H
#define HUSK_UTIL_ID_H

#include <stddef.h>

#include "util/error.h"

/* n bytes from the kernel's CSPRNG (getrandom: no fd, fork-safe). */
int id_random_bytes(void *buf, size_t n, struct husk_err *err);

/* A fresh random id: `prefix` (NULL: none), then `bytes` random bytes as
 * 2 * `bytes` lower-case hex digits, e.g. "b_8f3a09c1d2e4f5a6b7c8d9e0".
 * EINVAL if `size` cannot hold it and its NUL. */
int id_new(const char *prefix, size_t bytes, char *out, size_t size, struct husk_err *err);

#endif
