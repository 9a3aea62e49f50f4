/* husk: preview URLs, a box's port shown to a person without giving the
 * box a network.
 *
 * A preview is a capability for one port of one box: a random token of
 * HUSK_PREVIEW_TOKEN_LEN characters (128 bits) that a front puts in a URL
 * (the path form /p/<token>/..., or the host form
 * <port>-<box>-<token>.<preview domain>).  Only the token's SHA-256 is
 * stored, so neither the database nor a listing gives it back: it is
 * returned once, at creation.  A preview expires (1 h by default, 7 days
 * at most), can be revoked at once, and asks, besides the token, for
 * nothing (public), for a key of its tenant, or for its own password
 * (returned once too, also stored as a SHA-256).
 *
 * The trusted side reaches the port, never the box the outside: the
 * daemon opens a socket inside the box's network namespace and connects
 * it to the box's loopback (husk_box_port_connect), so a box without a
 * network keeps none, and nothing reaches a port without a preview made
 * for it.  What flows over that socket is the box's, and untrusted. */
#ifndef HUSK_PREVIEW_H
#define HUSK_PREVIEW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "husk/base.h"
#include "husk/box.h"

#define HUSK_PREVIEW_ID_MAX 32     /* size of a preview id buffer, NUL included */
#define HUSK_PREVIEW_TOKEN_LEN 26  /* 128 random bits, base32 (a-z, 2-7) */
#define HUSK_PREVIEW_SECRET_MAX 32 /* size of a token or password buffer, NUL included */
/* Lifetime: the default and the most a preview may have. */
#define HUSK_PREVIEW_TTL_DEFAULT_MS (3600LL * 1000)
#define HUSK_PREVIEW_TTL_MAX_MS (7LL * 86400 * 1000)
/* Previews of one box that have not expired nor been revoked. */
#define HUSK_PREVIEWS_PER_BOX_MAX 64
/* Proxied requests kept in a preview's access log (the newest). */
#define HUSK_PREVIEW_LOG_MAX 1000

enum husk_preview_access {
  HUSK_PREVIEW_KEY = 0,  /* a key of the preview's tenant (Authorization: Bearer) */
  HUSK_PREVIEW_PUBLIC,   /* the token alone */
  HUSK_PREVIEW_PASSWORD, /* the preview's own password (HTTP Basic, any user name) */
};

/* Per-preview bounds of the proxy; 0 in a request asks for the default.
 * Defaults and maxima: HUSK_PREVIEW_* below, docs/limits.md. */
struct husk_preview_limits {
  uint64_t max_body;        /* bytes of one request's body */
  uint32_t max_header;      /* bytes of one request's header lines */
  uint32_t max_connections; /* requests (and WebSockets) at once */
  uint32_t idle_ms;         /* no byte either way for this long: the exchange ends */
  uint32_t max_duration_ms; /* one request or WebSocket, from its head to its end */
};
#define HUSK_PREVIEW_BODY_DEFAULT (64ULL << 20)
#define HUSK_PREVIEW_BODY_MAX (1ULL << 30)
#define HUSK_PREVIEW_HEADER_DEFAULT (32U << 10)
#define HUSK_PREVIEW_HEADER_MAX (128U << 10)
#define HUSK_PREVIEW_CONNS_DEFAULT 32U
#define HUSK_PREVIEW_CONNS_MAX 256U
#define HUSK_PREVIEW_IDLE_DEFAULT_MS (60U * 1000)
#define HUSK_PREVIEW_IDLE_MAX_MS (3600U * 1000)
#define HUSK_PREVIEW_DURATION_DEFAULT_MS (3600U * 1000)
#define HUSK_PREVIEW_DURATION_MAX_MS (24U * 3600 * 1000)

struct husk_preview_spec {
  unsigned port;   /* 1..65535 */
  uint64_t ttl_ms; /* 0: HUSK_PREVIEW_TTL_DEFAULT_MS */
  enum husk_preview_access access;
  struct husk_preview_limits limits;
  /* Who makes it, recorded with it (husk_preview_info.created_by): as
   * husk_box_spec.created_by (NULL / "": nobody in particular). */
  const char *created_by;
};

struct husk_preview_info {
  char id[HUSK_PREVIEW_ID_MAX]; /* "pv_" + 24 hex digits */
  char tenant_id[HUSK_TENANT_ID_MAX];
  char box_id[HUSK_BOX_ID_MAX];
  unsigned port;
  enum husk_preview_access access;
  struct husk_preview_limits limits;          /* resolved: no zero */
  int64_t created_ms, expires_ms, revoked_ms; /* revoked_ms 0: not revoked */
  char created_by[HUSK_CREATED_BY_MAX];       /* husk_preview_spec.created_by, or "" */
};

/* Where previews are reached.  The path form's base is
 * "scheme://host[:port][/path]" as people reach the listener that serves
 * /p/; the host form's domain a wildcard DNS name whose every name leads
 * to it: "[scheme://]domain[:port]", parsed into this. */
struct husk_preview_domain {
  char scheme[8];      /* "http" or "https" */
  char name[256];      /* lower case, no dot at either end; "" = no host form */
  char port_suffix[8]; /* ":8443", or "" */
};
/* NULL or "" gives an empty name (no host form); EINVAL for anything that
 * is not such a name. */
HUSK_PUBLIC int husk_preview_domain_parse(const char *s, struct husk_preview_domain *out,
                                          struct husk_err *err);
/* The box id as part of one DNS label: lower case, '_' as '-'. */
HUSK_PUBLIC void husk_preview_box_label(const char *box_id, char *out, size_t size);
/* A preview's URLs from its token: base + "/p/<token>/", and, if d has a
 * name, "<scheme>://<port>-<box label>-<token>.<domain>[:port]/" (else
 * host_url is ""). */
HUSK_PUBLIC void husk_preview_urls(const struct husk_preview_info *p, const char *token,
                                   const char *base, const struct husk_preview_domain *d, char *url,
                                   size_t url_size, char *host_url, size_t host_size);

/* "public", "key", "password"; parse: 0, or -1 for another word. */
HUSK_PUBLIC const char *husk_preview_access_name(enum husk_preview_access a);
HUSK_PUBLIC int husk_preview_access_parse(const char *s, enum husk_preview_access *out);

/* Make a preview of port spec->port of a running (or paused) box of the
 * tenant's.  token receives the token (HUSK_PREVIEW_SECRET_MAX bytes),
 * and password, for HUSK_PREVIEW_PASSWORD, the password (else ""); both
 * are never shown again.  Errors: ENOENT (no such box), EBUSY (the box
 * has ended), EINVAL (port, ttl or a limit out of range), EDQUOT (the box
 * has HUSK_PREVIEWS_PER_BOX_MAX live previews). */
HUSK_PUBLIC int husk_preview_create(struct husk_mgr *m, const char *tenant, const char *box_id,
                                    const struct husk_preview_spec *spec,
                                    struct husk_preview_info *out,
                                    char token[HUSK_PREVIEW_SECRET_MAX],
                                    char password[HUSK_PREVIEW_SECRET_MAX], struct husk_err *err);

/* One preview of the box / each of them, newest first.  cb returns 0 to go
 * on, > 0 to stop, < 0 to fail (returned as is).  ENOENT: no such box or
 * preview. */
HUSK_PUBLIC int husk_preview_get(struct husk_mgr *m, const char *tenant, const char *box_id,
                                 const char *id, struct husk_preview_info *out,
                                 struct husk_err *err);
HUSK_PUBLIC int husk_preview_list(struct husk_mgr *m, const char *tenant, const char *box_id,
                                  int (*cb)(void *ctx, const struct husk_preview_info *p),
                                  void *ctx, struct husk_err *err);

/* Revoke now (revoking a revoked preview succeeds): its token is refused
 * from this call on, and the exchanges in progress through it are cut.
 * ENOENT: no such box or preview. */
HUSK_PUBLIC int husk_preview_revoke(struct husk_mgr *m, const char *tenant, const char *box_id,
                                    const char *id, struct husk_err *err);

/* The preview a presented token opens.  Errors, which a front tells
 * apart: ENOENT (no preview has this token: tampered or made up),
 * EKEYEXPIRED (expired), EKEYREVOKED (revoked). */
HUSK_PUBLIC int husk_preview_resolve(struct husk_mgr *m, const char *token,
                                     struct husk_preview_info *out, struct husk_err *err);

/* Whether `password` (len bytes) is the preview's, compared in constant
 * time over the SHA-256 digests. */
HUSK_PUBLIC bool husk_preview_password_ok(struct husk_mgr *m, const struct husk_preview_info *p,
                                          const char *password, size_t len);

/* Whether `key` is an API key of the preview's tenant, not revoked. */
HUSK_PUBLIC bool husk_preview_key_ok(struct husk_mgr *m, const struct husk_preview_info *p,
                                     const char *key);

/* One exchange through preview `p`: the box's port connected, counted in
 * the preview's connections until husk_preview_close.  Returns the
 * connected socket (non-blocking, close-on-exec) or -1: EAGAIN (the
 * preview has max_connections in progress), EKEYREVOKED (revoked
 * meanwhile), EBUSY (the box is paused), ESRCH (the box has ended),
 * ENOENT (no such box), ECONNREFUSED (nothing listens on the port inside
 * the box), others (the socket could not be made). */
HUSK_PUBLIC int husk_preview_open(struct husk_mgr *m, const struct husk_preview_info *p,
                                  struct husk_err *err);
/* The exchange is over: the socket is closed and uncounted. */
HUSK_PUBLIC void husk_preview_close(struct husk_mgr *m, int fd);

/* One request for a preview, for its access log (the newest
 * HUSK_PREVIEW_LOG_MAX are kept).  Recorded by husk_preview_record
 * before the reply's head leaves: committed when it returns (a crash of
 * the daemon keeps it), synced to the disk in a batch, at most about a
 * second later while requests come, else with the next change anything
 * syncs.  Its byte counts and duration, known when the exchange ends, by
 * husk_preview_record_end (the same way). */
struct husk_preview_access_rec {
  int64_t seq;     /* assigned */
  int64_t ts_ms;   /* 0 on record: now */
  char remote[64]; /* the client's address */
  char method[16];
  char path[512];               /* the path the box was asked for, cut if longer */
  int status;                   /* the reply's status */
  uint64_t bytes_in, bytes_out; /* body bytes to and from the box */
  int64_t duration_ms;
};
HUSK_PUBLIC int husk_preview_record(struct husk_mgr *m, const struct husk_preview_info *p,
                                    const struct husk_preview_access_rec *rec, int64_t *seq_out,
                                    struct husk_err *err);
HUSK_PUBLIC void husk_preview_record_end(struct husk_mgr *m, int64_t seq, uint64_t bytes_in,
                                         uint64_t bytes_out, int64_t duration_ms);
/* The preview's log, oldest first, from seq > after_seq, at most limit. */
HUSK_PUBLIC int husk_preview_access_list(struct husk_mgr *m, const char *tenant, const char *box_id,
                                         const char *id, int64_t after_seq, int limit,
                                         int (*cb)(void *ctx,
                                                   const struct husk_preview_access_rec *a),
                                         void *ctx, struct husk_err *err);

/* A socket connected to `port` on the loopback of a running box of the
 * tenant's, made inside the box's network namespace (the box gains no
 * interface, route or address).  Non-blocking, close-on-exec.  Errors as
 * husk_preview_open's, but EAGAIN and EKEYREVOKED. */
HUSK_PUBLIC int husk_box_port_connect(struct husk_mgr *m, const char *tenant, const char *box_id,
                                      unsigned port, struct husk_err *err);

#endif
