/* The aws-chunked body decoder (src/storage/chunked.c), fed the body in
 * pieces of a size the input chooses, as the network would deliver it.
 * Input: flags (bit 0 signed chunks, bit 1 trailer), a piece size, then
 * the body.  The signing key is fixed, the seed signature all zeros. */
#include <stdbool.h>

#include "fuzz.h"
#include "storage/chunked.h"

static int emit(void *ctx, const char *buf, size_t n, struct husk_err *err) {
  uint64_t *total = ctx;
  /* Read every byte handed out (ASan checks the range). */
  volatile char sink = 0;
  for (size_t i = 0; i < n; i++)
    sink ^= buf[i];
  (void)sink;
  *total += n;
  return 0;
}

static struct chunked c;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct fz f = {data, size};
  uint8_t flags = fz_byte(&f);
  size_t piece = (size_t)fz_byte(&f) + 1;
  size_t n;
  char *body = (char *)fz_rest(&f, &n);
  static const unsigned char key[32] = {1, 2, 3};
  struct husk_err err;
  if (chunked_init(&c, flags & 1, flags & 2, key, "20130524T000000Z",
                   "20130524/us-east-1/s3/aws4_request",
                   "0000000000000000000000000000000000000000000000000000000000000000", &err) < 0)
    abort();
  uint64_t total = 0;
  int rc = 0;
  for (size_t off = 0; off < n && rc == 0; off += piece)
    rc = chunked_feed(&c, body + off, n - off < piece ? n - off : piece, emit, &total, &err);
  if (rc == 0 && chunked_finish(&c, &err) == 0) {
    if (total != c.decoded || total > n)
      abort();
    chunked_trailer(&c, "x-amz-checksum-crc32");
  }
  chunked_free(&c);
  free(body);
  return 0;
}
