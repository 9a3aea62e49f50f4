/* Private to the files of the egress proxy (its public surface is
 * egress.h): the objects they share, and what each file offers the others.
 * One concept per file:
 *   proxy.c         the egress object, its boxes and their listeners, the acceptor
 *   box_env.c       what a box is given to find the proxy (variables, CA bundle)
 *   conn.c          a connection's thread: accepted, bounded, dispatched, ended
 *   io.c            a connection's I/O both ways, under its deadlines
 *   destination.c   policy decisions: the rule, the checked addresses, the dial
 *   plain_http.c    requests the box sends as HTTP (explicit proxy, port 80)
 *   tunnel.c        TLS destinations (CONNECT, port 443): tunnelled, or to inject.c
 *   inject.c        inject mode: TLS termination, secret substitution
 *   dns_stub.c      the box's DNS stub
 *   audit_writer.c  audit records: the queue, the writer thread, retention */
#ifndef HUSK_EGRESS_PROXY_INTERNAL_H
#define HUSK_EGRESS_PROXY_INTERNAL_H

#include <openssl/ssl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "egress/audit_agg.h"
#include "egress/egress.h"
#include "egress/link.h"
#include "egress/policy.h"
#include "egress/tls.h"
#include "state/state.h"

#define EGRESS_DEFAULT_MAX_CONNS 64
/* Each connection is a thread of the daemon: a tenant's boxes together, and
 * all boxes together, are bounded too (a quarter of the whole per tenant). */
#define EGRESS_DEFAULT_TENANT_CONNS 256
#define EGRESS_DEFAULT_TOTAL_CONNS 1024
#define EGRESS_DEFAULT_IDLE_MS 60000
#define EGRESS_DEFAULT_TOTAL_MS 3600000
#define EGRESS_DNS_TIMEOUT_MS 3000
#define EGRESS_CONNECT_TIMEOUT_MS 10000
#define EGRESS_THREAD_STACK (256 * 1024)

enum listener { L_PROXY, L_HTTP, L_HTTPS, L_COUNT };

struct conn;

struct aud_item; /* audit_writer.c */
#define EGRESS_AUDIT_QUEUE_MAX 4096

/* One box in egress mode: its policy, its listeners on the host end of its
 * link, its CA (inject rules) and its live connections. */
struct ebox {
  struct ebox *next;
  int refs;      /* under e->lock */
  atomic_bool dead; /* stopped: no new connections */
  char id[STATE_BOX_ID_SIZE];
  char tenant[STATE_TENANT_ID_SIZE];
  unsigned slot;
  uint32_t host_ip, box_ip; /* network order */
  struct egress_policy pol;
  int lfd[L_COUNT];
  int dns_fd;
  bool has_ca;
  struct egress_ca ca;
  atomic_uint nconns;
  int in_poll;        /* under e->lock: the acceptor is polling our fds */
  struct conn *conns; /* under e->lock: to cut them on stop */
};

/* The daemon's egress proxy (egress.h). */
struct egress {
  struct egress_config cfg;
  pthread_mutex_t lock;
  pthread_cond_t poll_done; /* an in_poll count went to 0 */
  struct ebox *boxes;
  bool net_ready;
  struct egress_net net;
  SSL_CTX *client_ctx;
  pthread_t acceptor;
  bool acceptor_running;
  int wake[2];
  atomic_bool stop;
  atomic_int live; /* connection threads running */
  atomic_uint nconns; /* connections admitted (counted in their box's nconns too) */
  char hash[16];   /* copy of cfg.hash */
  /* Audit records written by a thread of their own (the DNS stub runs on
   * the acceptor, which must never wait for the database). */
  pthread_mutex_t aq_lock;
  pthread_cond_t aq_cond;
  pthread_cond_t aq_done_cond; /* aq_done moved */
  struct aud_item *aq_head, *aq_tail;
  unsigned aq_len, aq_dropped;
  uint64_t aq_seq;  /* records queued so far */
  uint64_t aq_done; /* of those, written (or given up on) */
  bool aq_stop;
  pthread_t aq_thread;
  bool aq_running;
  /* Repeated decisions are counted here and written once per interval
   * (audit_agg.h); the retention pass runs on the same thread.  Rows taken
   * out of the aggregation are written under agg_write_lock, so that a
   * box's flush, which takes the lock too, returns only after every row
   * of that box taken before it is in the database. */
  struct egress_agg *agg;
  pthread_mutex_t agg_write_lock;
  unsigned agg_interval_ms;
  int64_t prune_at; /* monotonic; the writer thread only */
  pthread_attr_t attr;
};

/* One side of a proxied connection: its socket, and its TLS session when
 * the proxy speaks TLS on it (inject mode). */
struct io {
  int fd;
  SSL *ssl;
};

/* One proxied connection, owned by its thread (conn.c). */
struct conn {
  struct conn *next;
  struct egress *e;
  struct ebox *b;
  enum listener kind;
  bool counted; /* admitted: in its box's and the proxy's nconns */
  struct io box;
  struct io up;
  int64_t deadline;
  /* for the audit record */
  char host[EGRESS_HOST_MAX];
  unsigned port;
  char addr[48];
  const char *mode;
  uint64_t bytes_up, bytes_down;
  /* The checked addresses of the destination (egress_resolve). */
  struct sockaddr_storage addrs[16];
  size_t naddrs;
};

/* ---- proxy.c: the egress object, its boxes, the acceptor ---- */

void egress_log(struct egress *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Let go of a box (a reference of a connection or of the acceptor); the
 * last one frees it. */
void egress_ebox_unref(struct egress *e, struct ebox *b);

/* ---- box_env.c: what a box is given to find the proxy ---- */

/* NAME=VALUE entries for the box: proxy variables, CA bundle variables
 * (with `inject`), placeholders; NULL-terminated, malloc'd, or NULL. */
char **egress_box_env_new(const struct ebox *b, bool inject);
/* Install the CA bundle (system roots and ca_pem) in the box filesystem
 * whose root is `fs`. */
int egress_box_env_write_ca(int fs, const char *ca_pem, struct husk_err *err);

/* ---- conn.c: a connection's thread ---- */

/* Accept a connection on b's listener `kind` and serve it on a thread of
 * its own (refused with 429 past the box's connection limit). */
void egress_conn_accept(struct egress *e, struct ebox *b, enum listener kind);

/* ---- io.c: a connection's I/O both ways, under its deadlines ---- */

/* Milliseconds a wait may take now: the idle time, or what is left of the
 * total; 0 once the connection's deadline has passed. */
int egress_io_remaining(const struct conn *c);
/* Bytes read (0 at the end of the stream), or -1 (error, deadline). */
ssize_t egress_io_read(struct conn *c, struct io *io, void *buf, size_t n);
/* All n bytes written: 0, or -1. */
int egress_io_write_all(struct conn *c, struct io *io, const void *buf, size_t n);
/* Wait until a or b has data (or the idle/total deadline): 1, or 0 on timeout. */
int egress_io_wait(struct conn *c, struct io *a, struct io *b, int *ready_a, int *ready_b);
/* Copy both ways between the box and the upstream until either side ends
 * or a deadline passes, counting the bytes. */
void egress_io_relay(struct conn *c);
/* Reply with a small HTTP error on the box connection. */
void egress_reply(struct conn *c, int status, const char *reason);

/* ---- destination.c: policy decisions on where a connection goes ---- */

/* Host and port against the box's rules (and an IP literal against the
 * address checks); fills the connection's host, port and mode for the
 * audit record.  0 with *rule, or the status to refuse with and *why. */
int egress_decide(struct conn *c, const struct egress_host *h, unsigned port,
                  const struct egress_rule **rule, const char **why);
/* Resolve host once and check every address (c->addrs).  Returns the
 * status to refuse with (403, 502) and sets `why`, or 0. */
int egress_resolve(struct conn *c, const struct egress_host *h, const char **why);
/* Connect to one of the checked addresses (never a new lookup). */
int egress_connect(struct conn *c, const char **why);
/* Both. */
int egress_dial(struct conn *c, const struct egress_host *h, const char **why);

/* ---- plain_http.c: requests the box sends as HTTP ---- */

/* Serve one request: on the explicit proxy (CONNECT or absolute-form) or
 * on the transparent port 80. */
void egress_plain_http(struct conn *c, bool explicit_proxy);

/* ---- tunnel.c: TLS destinations ---- */

/* TLS to host:port, after a CONNECT (`via_connect`: answered here) or on
 * the transparent port 443: decided, resolved, the hello's SNI checked,
 * then tunnelled or handed to inject mode. */
void egress_tunnel_open(struct conn *c, const struct egress_host *h, unsigned port, bool via_connect);
/* A connection on the transparent port 443: the destination is its SNI. */
void egress_tunnel_transparent(struct conn *c);

/* ---- inject.c: TLS termination and secret substitution ---- */

/* The MITM side of an inject rule: the caller hands over the box's raw
 * socket, its ClientHello still unread. */
void egress_inject(struct conn *c, const struct egress_host *h);
/* Relay the response of a request already sent upstream (plain HTTP)
 * with every secret bound to the box scrubbed from it, as in inject mode.
 * 0, or a status with *why: nothing of the response relayed (a response
 * that cannot be scrubbed, being compressed, got the box a 502 of the
 * proxy's own). */
int egress_scrubbed_relay(struct conn *c, bool head_request, const char **why);

/* ---- dns_stub.c: the box's DNS stub ---- */

/* Answer one query waiting on b's stub socket (runs on the acceptor). */
void egress_dns_stub_answer(struct egress *e, struct ebox *b);

/* ---- audit_writer.c: audit records, the writer thread, retention ---- */

/* Create the aggregation and start the writer thread. */
int egress_audit_writer_start(struct egress *e, struct husk_err *err);
/* Stop the writer thread (it drains its queue and the aggregation first)
 * and free the aggregation. */
void egress_audit_writer_stop(struct egress *e);
/* Audit a decision on a connection, written by the calling thread. */
void egress_audit(struct conn *c, const char *action, const char *outcome, int status,
                  const char *why);
/* The same, queued for the writer thread: never waits for the database. */
void egress_audit_queued(struct conn *c, const char *action, const char *outcome, int status,
                         const char *why);
/* Write a box's counted decisions now (box_id NULL: every box's). */
void egress_audit_flush(struct egress *e, const char *box_id);

#endif
