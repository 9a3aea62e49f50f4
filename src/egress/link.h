/* The box's link to the host in `egress` mode, and the host firewall.
 *
 * Each egress box gets one veth pair: `eth0` in the box's network
 * namespace (BOX/30, default route via HOST) and `hk<daemon>-<slot>` on the
 * host (HOST/30).  Addresses come from the box's uid-range slot, which is
 * unique on the host for as long as the box lives, so two daemons never
 * pick the same link.  When the box's last process dies its network
 * namespace goes, and the kernel deletes both ends of the pair with it:
 * veths cannot outlive their box, whatever happens to the daemon.
 *
 * One nftables table per daemon (`inet husk_<hash>`), recreated at every
 * start from the boxes that are still alive: a crashed daemon's leftovers
 * are replaced, not accumulated.  For packets from the box interfaces it:
 *   - redirects TCP 80 and 443 to the proxy's transparent listeners and
 *     UDP 53 (to any address) to the DNS stub;
 *   - accepts, on input, only TCP to the proxy ports and UDP to the stub,
 *     and only with the exact (interface, box address, host address)
 *     triple of that link (no spoofing, no reaching another box's
 *     listeners or any other host address);
 *   - drops everything else: other TCP and UDP, ICMP, all IPv6, and all
 *     forwarding to or from box links.
 * Changes are made with the `nft` and `ip` programs (nftables, iproute2):
 * one exec per box change keeps the code small, and the rules stay
 * readable with `nft list table inet husk_<hash>`. */
#ifndef HUSK_EGRESS_LINK_H
#define HUSK_EGRESS_LINK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "util/error.h"

/* Ports on the host end of each link. */
#define EGRESS_PORT_PROXY 3128 /* explicit proxy: CONNECT and absolute-form HTTP */
#define EGRESS_PORT_HTTP 3180  /* transparent port 80 */
#define EGRESS_PORT_HTTPS 3443 /* transparent port 443 */
#define EGRESS_PORT_DNS 53     /* the DNS stub (UDP) */
/* The resolver every box's /etc/resolv.conf names: any UDP 53 leaving a
 * box link is redirected to its stub; in mode `none` it is unreachable. */
#define EGRESS_DNS_VIRTUAL "169.254.0.53"

struct egress_net {
  char table[32];    /* "husk_<hash>" */
  char ifprefix[12]; /* "hk<hash>-" */
};

/* Box and host addresses of the link of `slot` (network order). */
void egress_link_addrs(unsigned slot, uint32_t *host, uint32_t *box);
void egress_link_ifname(const struct egress_net *n, unsigned slot, char *out, size_t len);

/* (Re)create the daemon's table, empty of links. */
int egress_net_init(struct egress_net *n, const char *hash, struct husk_err *err);
/* Remove the table (daemon shutting down with no egress box left). */
void egress_net_fini(const struct egress_net *n);

/* Create the link of the box whose init is `pid` (pidfd `pidfd`, checked
 * alive so a reused pid cannot get the link). */
int egress_link_up(const struct egress_net *n, unsigned slot, pid_t pid, int pidfd,
                   struct husk_err *err);
/* Register an existing link in the table (re-adoption after a restart):
 * EEXIST... ENODEV if the host end is gone. */
int egress_link_allow(const struct egress_net *n, unsigned slot, struct husk_err *err);
/* Remove the link (best effort; it also goes with the box). */
void egress_link_down(const struct egress_net *n, unsigned slot);
/* Delete host ends of this daemon's links for which keep(slot) is false. */
void egress_link_sweep(const struct egress_net *n, bool (*keep)(void *ctx, unsigned slot), void *ctx);

#endif
