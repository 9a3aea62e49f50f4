/* DNS for the egress plane, both directions, no recursion anywhere:
 *
 *  - the resolver: the proxy's own lookups (A and AAAA, over UDP to one
 *    configured server), made once per connection; the proxy then checks
 *    every address and connects to exactly one of those it checked;
 *  - the stub: answers a box's questions from its policy alone.  A name a
 *    rule allows gets the box's proxy address (every connection to 80/443
 *    is redirected to the proxy anyway, and the proxy does the real
 *    lookup); any other name gets NXDOMAIN.  The stub never asks anyone,
 *    so a box cannot tunnel data out through DNS questions. */
#ifndef HUSK_EGRESS_DNS_H
#define HUSK_EGRESS_DNS_H

#include <netinet/in.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "util/error.h"

#define EGRESS_DNS_MAX_ADDRS 16

/* Resolve `name` (canonical) through `server`: up to `max` addresses,
 * IPv4 first.  ENOENT for NXDOMAIN or no address, ETIMEDOUT, EPROTO. */
int egress_dns_resolve(const struct sockaddr_storage *server, const char *name, int timeout_ms,
                       struct sockaddr_storage *out, size_t max, size_t *n, struct husk_err *err);

/* Read the first nameserver of /etc/resolv.conf (port 53). */
int egress_dns_system_server(struct sockaddr_storage *out, struct husk_err *err);

/* Parse "IP" or "IP:port" / "[v6]:port". */
int egress_dns_parse_server(const char *s, struct sockaddr_storage *out, struct husk_err *err);

/* The stub: the question of a query packet.  Returns 0 with the name
 * (lowercase text, no trailing dot) and qtype, -1 if the packet is not a
 * single standard query (the stub then answers FORMERR when it can). */
int egress_dns_question(const uint8_t *pkt, size_t len, char *name, size_t name_len,
                        uint16_t *qtype);

/* The resolver's two halves, also used by tests/fuzz: the query packet for
 * `name` (canonical) and `type` (1 A, 28 AAAA) into buf, its length or 0
 * if it does not fit; and the reading of an answer to that query `q` of
 * qlen bytes with `id`, appending up to `max` addresses to out (*n of them
 * so far).  parse_answer returns the rcode, or -1 for a packet that is not
 * that answer (ignored). */
size_t egress_dns_build_query(uint8_t *buf, size_t cap, uint16_t id, const char *name,
                              uint16_t type);
int egress_dns_parse_answer(const uint8_t *p, size_t len, uint16_t id, const uint8_t *q,
                            size_t qlen, uint16_t type, struct sockaddr_storage *out, size_t max,
                            size_t *n);

/* Build the stub's answer to `query` into `out` (at most out_len bytes):
 * rcode 0 with one A record `a4` (network order) when a4 != 0 and the
 * question is A; rcode 0 and no answer for other types of an allowed
 * name; `rcode` (3 NXDOMAIN, 1 FORMERR, 5 REFUSED) otherwise.
 * Returns the length, or 0 if the query is too broken to answer. */
size_t egress_dns_answer(const uint8_t *query, size_t qlen, int rcode, uint32_t a4, uint8_t *out,
                         size_t out_len);

#endif
