/* The S3 front of `husk serve`: an S3-compatible HTTP listener (path-style
 * addressing, SigV4) over the object store in src/storage.
 *
 * It parses requests, authenticates them (src/storage/sigv4.h), calls one
 * store function and formats S3's XML.  Bodies stream: an upload goes
 * chunk by chunk into the store's temporary file, a download is sent from
 * the object's file descriptor; no object is ever held in memory. */
#ifndef HUSK_S3_S3_H
#define HUSK_S3_S3_H

#include <stdbool.h>

#include "util/error.h"

struct store;
struct state;
struct s3_server;

struct s3_config {
  const char *listen;        /* "ADDR:PORT" */
  struct store *store;
  struct state *state;       /* for the audit records of bucket-level changes; may be NULL */
  unsigned max_connections;
  unsigned max_per_ip;       /* from one address (0: no limit) */
  unsigned idle_timeout_s;
  /* Time to deliver a request (its line, headers and, but for an object
   * upload, its body); 0: FRONT_REQUEST_TIMEOUT_S (front/daemon.h). */
  unsigned request_timeout_s;
  /* A tenant's S3 requests in progress, unless its own max_requests says
   * otherwise; 0: max_connections / FRONT_TENANT_REQUESTS_DIVISOR.  Past it:
   * 503 SlowDown. */
  unsigned tenant_max_requests;
  bool log_requests;
  void (*log)(void *ctx, const char *line); /* NULL: no log */
  void *log_ctx;
};

int s3_start(struct s3_server **out, const struct s3_config *cfg, struct husk_err *err);
unsigned s3_port(const struct s3_server *s);
/* Stop accepting, let requests in flight finish for up to grace_ms, close. */
void s3_stop(struct s3_server *s, unsigned grace_ms);

#endif
