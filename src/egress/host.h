/* Destination names and addresses as the egress proxy sees them.
 *
 * Everything here is strict on purpose: a name the box sends (CONNECT
 * authority, Host header, TLS SNI, DNS question) is compared with policy
 * only after it has one canonical form, so that no two spellings of the
 * same destination can be judged differently.
 *
 *  - names: ASCII only (IDNs must arrive as punycode A-labels), lowercased,
 *    one trailing dot removed, labels of 1..63 bytes of [a-z0-9-_], no
 *    leading or trailing '-' in a label, at most 253 bytes in all;
 *  - IPv4 literals: every form inet_aton() accepts (decimal, hex, octal,
 *    1 to 4 parts: `2130706433`, `0x7f.1`, `0177.0.0.1`, `127.1`) is
 *    recognised as the address it means, so it can never pass as a name;
 *    a name whose last label is numeric but is not a valid IPv4 literal is
 *    refused (as browsers do);
 *  - IPv6 literals: only in brackets (authorities) and without zone ids.
 *
 * The deny set (egress_addr_denied) is the always-on list of ranges that
 * no rule can open: loopback, private, CGNAT, link-local and cloud
 * metadata, multicast, reserved and documentation ranges, and every IPv6
 * form that embeds an IPv4 address.  Only the operator's test ranges
 * (`husk serve --egress-allow-range`) are exempt. */
#ifndef HUSK_EGRESS_HOST_H
#define HUSK_EGRESS_HOST_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "util/error.h"

#define EGRESS_HOST_MAX 254 /* 253 + NUL */

enum egress_host_kind { EGRESS_HOST_NAME, EGRESS_HOST_IPV4, EGRESS_HOST_IPV6 };

struct egress_host {
  enum egress_host_kind kind;
  char name[EGRESS_HOST_MAX];     /* canonical text: name, dotted quad, or IPv6 without brackets */
  struct sockaddr_storage addr;   /* for IP literals: the address (port 0) */
};

/* Parse a bare host (no port).  `bracketed_v6` allows "[v6]" (authorities);
 * an unbracketed IPv6 literal is always refused.  EINVAL with a reason. */
int egress_host_parse(const char *s, size_t len, bool bracketed_v6, struct egress_host *out,
                      struct husk_err *err);

/* Parse "host:port" (CONNECT authority; the port is required) or, with
 * default_port != 0, "host[:port]" (Host header). */
int egress_authority_parse(const char *s, size_t len, unsigned default_port, struct egress_host *out,
                           unsigned *port, struct husk_err *err);

/* inet_aton()'s grammar, strictly: 1..4 parts, each decimal, 0x-hex or
 * 0-octal, the last part filling the remaining bytes.  Returns true with
 * the address in network order. */
bool egress_ipv4_literal(const char *s, size_t len, uint32_t *addr_be);

/* ---- address classification ---------------------------------------------- */

struct egress_cidr {
  int family; /* AF_INET or AF_INET6 */
  uint8_t addr[16];
  unsigned prefix;
};

/* "a.b.c.d/n" or "v6/n" (a bare address is a /32 or /128). */
int egress_cidr_parse(const char *s, struct egress_cidr *out, struct husk_err *err);
bool egress_cidr_contains(const struct egress_cidr *c, const struct sockaddr *sa);

/* The reason `sa` is in the always-on deny set ("loopback", "private",
 * "metadata"...), or NULL when it is a public unicast address. */
const char *egress_addr_denied(const struct sockaddr *sa);

/* Address text without port ("1.2.3.4", "2001:db8::1"). */
void egress_addr_str(const struct sockaddr *sa, char *out, size_t len);

#endif
