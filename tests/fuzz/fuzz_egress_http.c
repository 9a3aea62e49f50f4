/* The egress proxy's HTTP/1.1 message-head parser (src/egress/http.c):
 * requests and CONNECTs from a box, responses from the outside world.
 * Input: one selector byte (bit 0: parse as a response), then the head. */
#include <stdbool.h>

#include "egress/http.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct fz f = {data, size};
  bool response = fz_byte(&f) & 1;
  size_t n;
  uint8_t *buf = fz_rest(&f, &n);
  size_t end = egress_http_head_end((const char *)buf, n);
  if (end > n)
    abort();
  /* The proxy parses exactly the bytes up to the blank line, or refuses a
   * head that is too long before it ends; parse both ways. */
  struct http_head h = {0};
  struct husk_err err;
  size_t len = end ? end : n;
  if (egress_http_parse((const char *)buf, len, !response, &h, &err) == 0) {
    egress_http_get(&h, "host");
    egress_http_get(&h, "Content-Length");
    egress_http_remove(&h, "proxy-authorization");
    egress_http_remove(&h, "connection");
    if (egress_http_get(&h, "connection"))
      abort();
  }
  egress_http_free(&h);
  free(buf);
  return 0;
}
