/* Helpers shared by the libFuzzer harnesses (tests/fuzz/fuzz_*.c).
 *
 * Every harness copies what it hands to the code under test into a buffer
 * of exactly that size (ASan then reports a read one byte past the input),
 * NUL-terminated only where the code under test takes a C string. */
#ifndef HUSK_FUZZ_H
#define HUSK_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The input, consumed front to back. */
struct fz {
  const uint8_t *p;
  size_t n;
};

/* One byte (0 once the input is used up). */
static inline uint8_t fz_byte(struct fz *f) {
  if (!f->n)
    return 0;
  f->n--;
  return *f->p++;
}

/* A copy of the bytes up to the next `sep` (or the end), NUL-terminated,
 * its length in *len; the separator is consumed. */
static inline char *fz_field(struct fz *f, uint8_t sep, size_t *len) {
  const uint8_t *e = f->n ? memchr(f->p, sep, f->n) : NULL;
  size_t k = e ? (size_t)(e - f->p) : f->n;
  char *s = malloc(k + 1);
  if (!s)
    abort();
  if (k)
    memcpy(s, f->p, k);
  s[k] = '\0';
  f->p += k;
  f->n -= k;
  if (e) {
    f->p++;
    f->n--;
  }
  if (len)
    *len = k;
  return s;
}

/* An exact-size copy of the rest (not NUL-terminated; NULL when empty). */
static inline uint8_t *fz_rest(struct fz *f, size_t *len) {
  *len = f->n;
  if (!f->n)
    return NULL;
  uint8_t *s = malloc(f->n);
  if (!s)
    abort();
  memcpy(s, f->p, f->n);
  f->p += f->n;
  f->n = 0;
  return s;
}

#endif
