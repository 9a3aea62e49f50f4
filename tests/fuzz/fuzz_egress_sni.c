/* The TLS ClientHello reader (src/egress/sni.c): the first bytes of a
 * box's TLS connection, before any TLS is terminated. */
#include "egress/sni.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct fz f = {data, size};
  size_t n;
  uint8_t *buf = fz_rest(&f, &n);
  char sni[256];
  memset(sni, 'x', sizeof sni);
  int r = egress_sni_peek(buf, n, sni, sizeof sni);
  if (r == 1 && !memchr(sni, '\0', sizeof sni))
    abort();
  /* One byte less must need more bytes, be refused, or name the same
   * server: a complete hello is not judged from a shorter prefix. */
  if (r == 1 && n > 0) {
    char again[256];
    int r2 = egress_sni_peek(buf, n - 1, again, sizeof again);
    if (r2 == 1 && strcmp(again, sni) != 0)
      abort();
  }
  free(buf);
  return 0;
}
