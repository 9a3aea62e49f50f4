/* Policy decisions on a connection's destination: the box's rule that
 * names the host and port, the addresses the host resolves to (each one
 * checked against the deny set, the operator's exceptions, the links' own
 * range and this host's addresses), and the connection to one of those
 * checked addresses, never to the answer of a new lookup. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "egress/dns.h"
#include "egress/proxy_internal.h"

/* Is `sa` an address of this host, on any interface (IPv4-mapped IPv6
 * included)?  A box must not reach the host's own services through the
 * proxy: the deny set covers loopback and private ranges, but a host with
 * a public address would otherwise be one allow rule away.  Read at every
 * decision (interfaces change); if they cannot be read, fail closed. */
static bool host_local(const struct sockaddr *sa) {
  struct in_addr v4;
  bool is_v4 = false;
  const struct in6_addr *v6 = NULL;
  if (sa->sa_family == AF_INET) {
    v4 = ((const struct sockaddr_in *)sa)->sin_addr;
    is_v4 = true;
  } else if (sa->sa_family == AF_INET6) {
    v6 = &((const struct sockaddr_in6 *)sa)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(v6)) {
      memcpy(&v4, &v6->s6_addr[12], 4);
      is_v4 = true;
    }
  } else {
    return true;
  }
  struct ifaddrs *ifs;
  if (getifaddrs(&ifs) < 0)
    return true;
  bool hit = false;
  for (struct ifaddrs *i = ifs; i && !hit; i = i->ifa_next) {
    if (!i->ifa_addr)
      continue;
    if (is_v4 && i->ifa_addr->sa_family == AF_INET)
      hit = ((const struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr == v4.s_addr;
    else if (!is_v4 && i->ifa_addr->sa_family == AF_INET6)
      hit = !memcmp(&((const struct sockaddr_in6 *)i->ifa_addr)->sin6_addr, v6, sizeof *v6);
  }
  freeifaddrs(ifs);
  return hit;
}

static const char *addr_verdict(struct egress *e, const struct sockaddr *sa) {
  /* The links' own range is never a destination, whatever the operator
   * allows: it is where the proxy itself listens. */
  if (sa->sa_family == AF_INET) {
    uint32_t a = ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr);
    if ((a & 0xffffc000u) == 0x0aef0000u)
      return "proxy-address";
  }
  bool allowed = false;
  for (size_t i = 0; i < e->cfg.nallow && !allowed; i++)
    allowed = egress_cidr_contains(&e->cfg.allow[i], sa);
  const char *denied = egress_addr_denied(sa);
  if (denied && !allowed)
    return denied;
  /* Nor is the host itself, whatever the rules or the operator allow. */
  if (host_local(sa))
    return "host-address";
  return NULL;
}

/* The audit reason for an address refused by addr_verdict's `d`. */
static const char *denied_address(const char *d) {
  static __thread char reason[64];
  snprintf(reason, sizeof reason, "denied-address:%s", d);
  return reason;
}

static int connect_one(struct conn *c, const struct sockaddr_storage *ss) {
  socklen_t sl = ss->ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
  int fd = socket(ss->ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return -1;
  if (connect(fd, (const struct sockaddr *)ss, sl) < 0 && errno != EINPROGRESS) {
    close(fd);
    return -1;
  }
  struct pollfd p = {.fd = fd, .events = POLLOUT};
  int t = egress_io_remaining(c);
  if (t > EGRESS_CONNECT_TIMEOUT_MS)
    t = EGRESS_CONNECT_TIMEOUT_MS;
  int soerr = 0;
  socklen_t el = sizeof soerr;
  if (t == 0 || poll(&p, 1, t) <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &el) < 0 || soerr) {
    close(fd);
    return -1;
  }
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

int egress_decide(struct conn *c, const struct egress_host *h, unsigned port,
                  const struct egress_rule **rule, const char **why) {
  snprintf(c->host, sizeof c->host, "%s", h->name);
  c->port = port;
  *rule = egress_policy_match(&c->b->pol, h->name, port);
  if (!*rule) {
    *why = egress_policy_names(&c->b->pol, h->name) ? "port-not-allowed" : "host-not-allowed";
    return 403;
  }
  c->mode = (*rule)->mode == EGRESS_INJECT ? "inject" : "tunnel";
  if (h->kind != EGRESS_HOST_NAME) {
    const char *d = addr_verdict(c->e, (const struct sockaddr *)&h->addr);
    if (d) {
      snprintf(c->addr, sizeof c->addr, "%.47s", h->name);
      *why = denied_address(d);
      return 403;
    }
  }
  return 0;
}

int egress_resolve(struct conn *c, const struct egress_host *h, const char **why) {
  struct sockaddr_storage *addrs = c->addrs;
  size_t n = 0;
  _Static_assert(sizeof c->addrs / sizeof c->addrs[0] >= EGRESS_DNS_MAX_ADDRS, "address list");
  if (h->kind != EGRESS_HOST_NAME) {
    addrs[0] = h->addr;
    n = 1;
  } else {
    struct husk_err err;
    struct sockaddr_storage server = c->e->cfg.resolver;
    if (server.ss_family == 0 && egress_dns_system_server(&server, &err) < 0) {
      *why = "no-resolver";
      return 502;
    }
    if (egress_dns_resolve(&server, h->name, EGRESS_DNS_TIMEOUT_MS, addrs, EGRESS_DNS_MAX_ADDRS, &n,
                           &err) < 0) {
      *why = err.code == ENOENT ? "no-such-host" : "dns-failure";
      return 502;
    }
  }
  /* Every address must pass: a name with one private answer among public
   * ones is refused, or a retry could land on the private one. */
  for (size_t i = 0; i < n; i++) {
    const char *d = addr_verdict(c->e, (const struct sockaddr *)&addrs[i]);
    if (d) {
      egress_addr_str((const struct sockaddr *)&addrs[i], c->addr, sizeof c->addr);
      *why = denied_address(d);
      return 403;
    }
  }
  c->naddrs = n;
  return 0;
}

int egress_connect(struct conn *c, const char **why) {
  struct sockaddr_storage *addrs = c->addrs;
  for (size_t i = 0; i < c->naddrs; i++) {
    if (addrs[i].ss_family == AF_INET)
      ((struct sockaddr_in *)&addrs[i])->sin_port = htons((uint16_t)c->port);
    else
      ((struct sockaddr_in6 *)&addrs[i])->sin6_port = htons((uint16_t)c->port);
    egress_addr_str((const struct sockaddr *)&addrs[i], c->addr, sizeof c->addr);
    int fd = connect_one(c, &addrs[i]);
    if (fd >= 0) {
      c->up.fd = fd;
      return 0;
    }
  }
  *why = "connect-failed";
  return 502;
}

int egress_dial(struct conn *c, const struct egress_host *h, const char **why) {
  int st = c->naddrs ? 0 : egress_resolve(c, h, why);
  return st ? st : egress_connect(c, why);
}
