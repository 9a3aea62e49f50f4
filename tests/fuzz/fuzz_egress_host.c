/* Host normalisation (src/egress/host.c): names and literals from a
 * CONNECT authority, a Host header, SNI or a DNS question, and the
 * operator's CIDRs and DNS server addresses.  Input: a selector byte,
 * then the text. */
#include <stdbool.h>

#include "egress/dns.h"
#include "egress/host.h"
#include "fuzz.h"

/* A canonical name parses again to itself: no two spellings differ. */
static void idempotent(const struct egress_host *h) {
  struct egress_host again;
  struct husk_err err;
  if (h->kind == EGRESS_HOST_IPV6)
    return;
  if (egress_host_parse(h->name, strlen(h->name), false, &again, &err) < 0 ||
      again.kind != h->kind || strcmp(again.name, h->name) != 0)
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct fz f = {data, size};
  uint8_t sel = fz_byte(&f);
  size_t n;
  char *s = fz_field(&f, '\0', &n);
  struct egress_host h;
  struct husk_err err;
  unsigned port = 0;
  switch (sel % 5) {
  case 0:
    if (egress_host_parse(s, n, sel & 8, &h, &err) == 0)
      idempotent(&h);
    break;
  case 1:
    if (egress_authority_parse(s, n, (sel & 8) ? 80 : 0, &h, &port, &err) == 0) {
      if (port == 0 || port > 65535)
        abort();
      idempotent(&h);
    }
    break;
  case 2: {
    uint32_t a;
    egress_ipv4_literal(s, n, &a);
    break;
  }
  case 3: {
    struct egress_cidr c;
    if (egress_cidr_parse(s, &c, &err) == 0) {
      struct sockaddr_storage ss = {0};
      ss.ss_family = (sa_family_t)c.family;
      egress_cidr_contains(&c, (struct sockaddr *)&ss);
      egress_addr_denied((struct sockaddr *)&ss);
    }
    break;
  }
  default: {
    struct sockaddr_storage ss;
    if (egress_dns_parse_server(s, &ss, &err) == 0) {
      char txt[64];
      egress_addr_str((struct sockaddr *)&ss, txt, sizeof txt);
      egress_addr_denied((struct sockaddr *)&ss);
    }
    break;
  }
  }
  free(s);
  return 0;
}
