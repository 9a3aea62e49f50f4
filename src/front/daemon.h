/* The libmicrohttpd daemon of an HTTP front (the API, S3), set up and
 * stopped alike: one thread per connection (handlers may block), the
 * connection limits -- in all, per address, per tenant (util/tenant_load.h)
 * -- and the request timeout (conn_watch.h), libmicrohttpd's own log and
 * one line per request, and the count of requests in flight that a
 * graceful stop waits for.
 *
 * A front embeds a struct front_daemon: front_init, then its own setup,
 * then front_listen; front_request_start / front_request_done around each
 * request; to stop, front_quiesce, then front_close, then front_free
 * (which is also what undoes a start that failed half-way). */
#ifndef HUSK_FRONT_DAEMON_H
#define HUSK_FRONT_DAEMON_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "front/conn_watch.h"
#include "husk/base.h" /* husk_log_fn */
#include "util/error.h"
#include "util/tenant_load.h"

/* The defaults of front_config's limits (0 there). */
#define FRONT_MAX_CONNECTIONS 256
#define FRONT_IDLE_TIMEOUT_S 120
#define FRONT_REQUEST_TIMEOUT_S 60
/* A tenant's requests in progress, by default: max_connections / this. */
#define FRONT_TENANT_REQUESTS_DIVISOR 2
/* Memory of one connection: it bounds the request line and headers (past
 * it: 431) and the chunks an upload arrives in. */
#define FRONT_CONN_MEMORY (256 * 1024)
#define FRONT_LISTEN_BACKLOG 128U

struct front_config {
  const char *listen;         /* "ADDR:PORT" (front/listen.h) */
  unsigned max_connections;   /* 0: FRONT_MAX_CONNECTIONS */
  unsigned max_per_ip;        /* from one address; 0: no limit */
  unsigned idle_timeout_s;    /* 0: FRONT_IDLE_TIMEOUT_S */
  unsigned request_timeout_s; /* 0: FRONT_REQUEST_TIMEOUT_S (conn_watch.h) */
  bool strict;                /* refuse requests HTTP/1.1 does not allow */
  bool log_requests;          /* front_log_request writes a line */
  bool allow_upgrade;         /* 101 replies may hand the connection over (WebSocket) */
  /* The front's libmicrohttpd callbacks, each with `cls`; on_uri (the
   * first sight of a request, its raw URI) may be NULL. */
  MHD_AccessHandlerCallback on_request;
  MHD_RequestCompletedCallback on_completed;
  void *(*on_uri)(void *cls, const char *uri, struct MHD_Connection *conn);
  void *cls;
  husk_log_fn log; /* NULL: no log */
  void *log_ctx;
  /* In messages: what failed to be set up ("server setup"), and what the
   * request timeout closed ("connection(s)"). */
  const char *setup_what, *conn_what;
};

struct front_daemon {
  struct front_config cfg;
  struct sockaddr_storage addr;
  struct MHD_Daemon *daemon;
  MHD_socket lsock; /* the listening socket, kept from front_quiesce */
  unsigned port;
  bool initialized;
  /* Requests between their first byte and their completion.  The lock and
   * the condition variable (on CLOCK_REALTIME) also serve a count of the
   * front's own that a stop waits for (the API's streaming workers). */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  unsigned inflight;
  /* Per-tenant requests in progress, sized by the connection limit. */
  struct tenant_loads loads;
  struct conn_watch watch;
};

/* Check the listen address and the limits, start the request timeout's
 * watchdog; nothing listens yet.  After a failure, front_free. */
int front_init(struct front_daemon *f, const struct front_config *cfg, struct husk_err *err);
/* Start the daemon: connections are accepted from now on.  The port is in
 * f->port (the one bound for port 0). */
int front_listen(struct front_daemon *f, struct husk_err *err);
/* A tenant's default bound: `configured`, else a share of the connections
 * (max_connections / divisor, at least 1). */
unsigned front_tenant_share(const struct front_daemon *f, unsigned configured, unsigned divisor);

/* A request begins (its first call) / is completed (its completion
 * callback, after the front freed it): counted in flight, and the wait for
 * the connection's next request starts. */
void front_request_start(struct front_daemon *f);
void front_request_done(struct front_daemon *f, struct MHD_Connection *conn);
/* The request's line in the log ("GET /path 200 3ms WHO"), if the front
 * logs requests. */
void front_log_request(struct front_daemon *f, const char *method, const char *path, int status,
                       int64_t t0_ms, const char *who, enum MHD_RequestTerminationCode toe);
/* Whether a query argument or header of the request holds a NUL (it would
 * be read cut short, as another value). */
bool front_has_nul(struct MHD_Connection *conn);

/* Stop accepting, then wait up to grace_ms until no request is in flight
 * (and *also, if given, a count under f->lock, is 0).  Returns the
 * requests still in flight. */
unsigned front_quiesce(struct front_daemon *f, unsigned grace_ms, const unsigned *also);
/* The same wait, without quiescing. */
unsigned front_wait_idle(struct front_daemon *f, unsigned ms, const unsigned *also);
/* Close every connection (libmicrohttpd joins their threads) and the
 * listening socket. */
void front_close(struct front_daemon *f);
/* Free what front_init and front_listen set up (the daemon is stopped if
 * front_close was not called). */
void front_free(struct front_daemon *f);

#endif
