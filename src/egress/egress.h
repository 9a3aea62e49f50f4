/* The network and secrets plane of `husk serve`: boxes in `egress` mode
 * reach the outside only through this proxy, by policy, and secrets are
 * added to their requests here, after the requests have left the box.
 *
 * One `struct egress` per daemon.  It owns:
 *   - the box links and the nftables table (link.h);
 *   - per egress box, listeners on the host end of its link: the explicit
 *     proxy (HTTP_PROXY/HTTPS_PROXY/ALL_PROXY point at it), the two
 *     transparent ports that the firewall redirects 80 and 443 to, and the
 *     DNS stub; the listener a connection arrives on says which box it
 *     comes from, so no address lookup is ever trusted for identity;
 *   - one acceptor thread and one thread per proxied connection (bounded
 *     per box), blocking I/O with idle and total deadlines;
 *   - per inject box, a CA (tls.h) whose key stays in this process.
 * Every decision is audited (action `egress.*`): box, host, port,
 * address, mode, bytes, outcome, and how many identical decisions the
 * record stands for (audit_agg.h).  Secret values are never in a record,
 * a log line or an error message. */
#ifndef HUSK_EGRESS_EGRESS_H
#define HUSK_EGRESS_EGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "egress/audit_agg.h"
#include "egress/host.h"
#include "util/error.h"

struct state;
struct egress;
struct egress_vault;

#define EGRESS_MAX_ALLOW 16

struct egress_config {
  struct state *state;
  struct egress_vault *vault;          /* secrets; may be NULL (no inject bindings) */
  const char *hash;                    /* the daemon's id (hex), names its table and links */
  struct sockaddr_storage resolver;    /* ss_family 0: /etc/resolv.conf's first nameserver */
  struct egress_cidr allow[EGRESS_MAX_ALLOW]; /* operator-only exceptions to the deny set */
  size_t nallow;
  const char *ca_file;                 /* extra roots for upstream TLS (tests), or NULL */
  unsigned max_conns;                  /* per box; 0 = default */
  unsigned tenant_max_conns;           /* per tenant, over its boxes; 0 = default */
  unsigned total_max_conns;            /* the whole proxy (= its threads); 0 = default */
  unsigned idle_ms, total_ms;          /* per connection; 0 = default */
  struct egress_agg_limits audit;      /* audit aggregation and caps; 0s = defaults */
  /* Audit records (all of them, not only egress) older than this are
   * removed in bounded batches; 0 = kept forever. */
  int64_t audit_retention_ms;
  void (*log)(void *ctx, const char *line);
  void *log_ctx;
};

int egress_open(struct egress **out, const struct egress_config *cfg, struct husk_err *err);
/* Stop the proxy.  The links and table stay for the boxes that outlive
 * the daemon (their traffic is refused until the next start re-adopts
 * them); with no egress box left the table is removed. */
void egress_close(struct egress *e);

struct egress_box_spec {
  const char *box_id;
  const char *tenant;
  unsigned slot;
  pid_t init_pid;
  int pidfd;
  int fs;                  /* the box filesystem's root (tmp/ gets the CA bundle) */
  const char *policy_json; /* stored form (placeholders included) */
};

/* Start egress for a box: with `fresh`, create its link; otherwise (a
 * re-adopted box) register the link that survived.  *env_add receives
 * NAME=VALUE entries for the box (proxy variables, CA bundle variables,
 * placeholders), NULL-terminated, malloc'd (free each and the array). */
int egress_box_start(struct egress *e, const struct egress_box_spec *spec, bool fresh,
                     char ***env_add, struct husk_err *err);
/* Write the box's counted decisions as audit records now (the box ended:
 * its records are complete when the end is acknowledged); decisions that
 * still arrive are written when it stops. */
void egress_box_flush(struct egress *e, const char *box_id);
/* Stop a box's egress: listeners closed, connections cut, link removed. */
void egress_box_stop(struct egress *e, const char *box_id);
/* After re-adoption: remove links of this daemon that no started box owns. */
void egress_sweep(struct egress *e);

/* Fresh policy for a new box: validate `json` and give each secret binding
 * a random placeholder; the result (stored form) is malloc'd. */
char *egress_policy_prepare(const char *json, struct husk_err *err);

/* Where a box's own traffic goes, for requests made on its behalf: the
 * explicit proxy on its link (*proxy) and, when it has inject rules, the
 * PEM of the CA that proxy presents (*ca_pem, malloc'd; else NULL).
 * ENOENT: the box is not in egress mode. */
int egress_box_proxy(struct egress *e, const char *box_id, struct sockaddr_in *proxy, char **ca_pem,
                     struct husk_err *err);

/* Number of live connections of a box (tests, metrics). */
unsigned egress_box_conns(struct egress *e, const char *box_id);

#endif
