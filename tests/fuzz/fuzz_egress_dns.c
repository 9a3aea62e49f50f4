/* DNS packets (src/egress/dns.c): the stub's reading of a box's query and
 * the answer it builds from it, and the resolver's reading of an upstream
 * answer.  Input: a selector byte (bit 0: an upstream answer to a query
 * for "example.com"), then the packet. */
#include <stdbool.h>

#include "egress/dns.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct fz f = {data, size};
  uint8_t sel = fz_byte(&f);
  size_t n;
  uint8_t *pkt = fz_rest(&f, &n);
  if (sel & 1) {
    uint8_t q[512];
    size_t ql = egress_dns_build_query(q, sizeof q, 0x1234, "example.com", (sel & 2) ? 28 : 1);
    if (!ql)
      abort();
    struct sockaddr_storage out[EGRESS_DNS_MAX_ADDRS];
    size_t got = 0;
    egress_dns_parse_answer(pkt, n, 0x1234, q, ql, (sel & 2) ? 28 : 1, out, EGRESS_DNS_MAX_ADDRS,
                            &got);
    if (got > EGRESS_DNS_MAX_ADDRS)
      abort();
  } else {
    char name[256];
    uint16_t qtype = 0;
    int r = egress_dns_question(pkt, n, name, sizeof name, &qtype);
    if (r == 0 && !memchr(name, '\0', sizeof name))
      abort();
    uint8_t out[512];
    static const int rcodes[] = {0, 1, 3, 5};
    size_t al = egress_dns_answer(pkt, n, rcodes[(sel >> 1) & 3], (sel & 8) ? 0x0100000a : 0, out,
                                  sizeof out);
    if (al > sizeof out)
      abort();
  }
  free(pkt);
  return 0;
}
