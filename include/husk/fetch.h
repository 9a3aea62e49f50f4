/* husk: fetch a URL into a box's file, through the box's own network.
 *
 * The request is made as the box would make it: from a socket created in
 * the box's network namespace, to the explicit proxy of the box's egress
 * link.  So it obeys exactly the box's egress policy -- allow-list, the
 * deny set, secret injection, the audit of every decision -- and never
 * touches the daemon's own network.  A box without egress is refused
 * (ENETUNREACH): it has no network to fetch through.
 *
 * The body streams into the box file through the fd-safe file API (a new
 * file put in place only when the whole body arrived), never whole into
 * memory; on any failure nothing is left at `path`. */
#ifndef HUSK_FETCH_H
#define HUSK_FETCH_H
#include <stdint.h>
#include "husk/base.h"
#include "husk/manager.h"

#define HUSK_FETCH_MAX_BYTES_DEFAULT (100ULL << 20) /* body size when max_bytes is 0 */
#define HUSK_FETCH_MAX_BYTES_MAX (1ULL << 30)       /* largest max_bytes */
#define HUSK_FETCH_TIMEOUT_MS_DEFAULT 60000ULL      /* whole fetch, when timeout_ms is 0 */
#define HUSK_FETCH_TIMEOUT_MS_MAX 600000ULL         /* largest timeout_ms */
#define HUSK_FETCH_MAX_REDIRECTS 5                  /* hops followed, each through the policy */
#define HUSK_FETCH_MAX_HEADERS 16                   /* request headers a caller may add */
#define HUSK_FETCH_URL_MAX 8192                     /* longest URL (bytes) */

struct husk_fetch_spec {
  const char *url;   /* http:// or https://, a host, no user:password@ */
  const char *path;  /* box path (files.h): where the body goes */
  /* Extra request headers, "Name: value", NULL-terminated (NULL: none).
   * "${NAME}" in a value is replaced by the box's placeholder for its
   * secret binding with env name NAME (never by a secret: the proxy puts
   * the secret in, for the hosts the binding allows). */
  const char *const *headers;
  uint64_t max_bytes;  /* 0: default; above the maximum: the maximum */
  uint64_t timeout_ms; /* 0: default; above the maximum: the maximum */
  int cancel_fd;       /* readable: stop (ECANCELED); -1: none */
};

struct husk_fetch_result {
  uint64_t size;          /* bytes written to the file */
  long status;            /* the final HTTP status */
  unsigned redirects;     /* hops followed */
  char content_type[128]; /* of the final response, "" if none (cut if longer) */
  char sha256[65];        /* of the body, hex */
  char *final_url;        /* after redirects, without user:password (malloc'd) */
};

/* Fetch spec->url into spec->path of a running box with egress.  An
 * existing file at `path` is replaced (a symlink there is replaced, never
 * written through); missing directories are made.
 * Errors: ENOENT (no such box), EBUSY (not running), ENETUNREACH (the box
 * has no egress), EINVAL (a bad URL, header or path), EACCES (refused by
 * the box's egress policy, or a path outside the writable areas), EFBIG
 * (the body is larger than max_bytes), ETIMEDOUT, EPROTO (an HTTP error
 * status, or a failed transfer), ECANCELED, and the file API's codes. */
HUSK_PUBLIC int husk_box_fetch(struct husk_mgr *m, const char *tenant, const char *box_id,
                               const struct husk_fetch_spec *spec, struct husk_fetch_result *out,
                               struct husk_err *err);
/* Release what a successful husk_box_fetch put in *r. */
HUSK_PUBLIC void husk_fetch_result_free(struct husk_fetch_result *r);

#endif
