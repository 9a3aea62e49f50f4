/* The box's DNS stub, on the host end of its link: a name the box's
 * policy names is answered with the proxy's own address (connections go
 * to the proxy whatever the name), any other gets NXDOMAIN, and no one
 * else is asked.  It runs on the acceptor thread, so its audit records go
 * through the writer's queue: the acceptor never waits for the database. */
#define _GNU_SOURCE
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "egress/dns.h"
#include "egress/proxy_internal.h"

void egress_dns_stub_answer(struct egress *e, struct ebox *b) {
  uint8_t q[1500], a[1600];
  struct sockaddr_in from;
  socklen_t fl = sizeof from;
  ssize_t n = recvfrom(b->dns_fd, q, sizeof q, MSG_DONTWAIT, (struct sockaddr *)&from, &fl);
  if (n <= 0)
    return;
  char name[300];
  uint16_t qtype;
  struct conn c = {.e = e, .b = b, .kind = L_PROXY, .mode = "dns"};
  int rcode;
  uint32_t a4 = 0;
  const char *outcome = "denied", *why = "not-allowed";
  if (egress_dns_question(q, (size_t)n, name, sizeof name, &qtype) < 0) {
    rcode = 1; /* FORMERR */
    why = "malformed-query";
  } else {
    struct egress_host h;
    struct husk_err err;
    snprintf(c.host, sizeof c.host, "%.253s", name);
    if (egress_host_parse(name, strlen(name), false, &h, &err) == 0 && h.kind == EGRESS_HOST_NAME &&
        egress_policy_names(&b->pol, h.name)) {
      rcode = 0;
      a4 = b->host_ip; /* connections go to the proxy whatever the name */
      outcome = "ok";
      why = NULL;
    } else {
      rcode = 3; /* NXDOMAIN, and no one else is asked */
    }
  }
  size_t al = egress_dns_answer(q, (size_t)n, rcode, a4, a, sizeof a);
  if (al)
    sendto(b->dns_fd, a, al, MSG_DONTWAIT, (struct sockaddr *)&from, fl);
  egress_audit_queued(&c, "egress.dns", outcome, rcode, why);
}
