/* Fetches the daemon makes itself, for sign-in: an OpenID Connect
 * provider's discovery document, JWKS and token endpoint, and OAuth
 * clients' metadata documents (docs/oauth.md, "Fetches to the provider").
 *
 * libcurl from the daemon's own network (never through a box), TLS
 * verified against the system's CAs or the operator's CA file, no
 * redirects followed, a bounded reply and time, a bounded number at once
 * for the whole daemon, and no connection to an address of the egress
 * deny set (private, loopback, link-local, ...) unless the request allows
 * loopback (a loopback issuer the operator configured) or the address is
 * in one of the operator's allowed ranges.  The address checked is the
 * one connected to (libcurl's socket callback), so a name that resolves
 * differently the second time cannot get around it. */
#ifndef HUSK_AUTH_FETCH_H
#define HUSK_AUTH_FETCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

#define AUTH_FETCH_MAX_BYTES (64 * 1024) /* default bound of one reply */
#define AUTH_FETCH_TIMEOUT_MS 10000      /* default bound of one fetch */
#define AUTH_FETCH_CONCURRENCY 8         /* default fetches at once */
#define AUTH_FETCH_RANGES_MAX 16

struct auth_fetcher;
struct auth_fetch_config {
  const char *ca_file;             /* PEM bundle; NULL: the system's CAs */
  const char *const *allow_ranges; /* CIDRs exempt from the deny set */
  size_t n_allow_ranges;           /* <= AUTH_FETCH_RANGES_MAX */
  unsigned concurrency;            /* 0: AUTH_FETCH_CONCURRENCY */
};
/* EINVAL: a range that is not a CIDR, or a CA file that cannot be read. */
int auth_fetcher_open(struct auth_fetcher **out, const struct auth_fetch_config *cfg,
                      struct husk_err *err);
void auth_fetcher_close(struct auth_fetcher *f);

struct auth_fetch_request {
  const char *url;         /* https://..., or http:// when loopback_ok */
  const char *form_body;   /* non-NULL: a POST of this
                              application/x-www-form-urlencoded body */
  const char *basic_user;  /* non-NULL: HTTP Basic (RFC 6749 2.3.1: the */
  const char *basic_pass;  /*   caller form-encodes both first) */
  size_t max_bytes;        /* 0: AUTH_FETCH_MAX_BYTES */
  int timeout_ms;          /* 0: AUTH_FETCH_TIMEOUT_MS */
  bool loopback_ok;        /* the host is a loopback name or address the
                              operator configured: http and 127.0.0.0/8,
                              ::1 allowed (only those, not other denied
                              ranges) */
};
struct auth_fetch_reply {
  long status;   /* the HTTP status */
  char *body;    /* NUL-terminated (the body may hold NULs: use len) */
  size_t len;
  int64_t max_age_s; /* Cache-Control max-age, -1 when none (no-store: 0) */
};
/* 0 for any HTTP status (the caller judges it); a redirect (3xx) is not
 * followed: it is returned as its status with an empty body.  EBUSY: the
 * fetches at once are all taken (not waited for).  EACCES: the address is
 * denied (the message names the address, never a secret).  EFBIG: the
 * reply is larger than max_bytes.  ETIMEDOUT.  EPROTO: TLS, a connection
 * that fails, or any other transfer failure.  EINVAL: a URL that is not http(s), or
 * http without loopback_ok.  The message never holds the request's
 * body or credentials. */
int auth_fetch(struct auth_fetcher *f, const struct auth_fetch_request *rq,
               struct auth_fetch_reply *out, struct husk_err *err);
void auth_fetch_reply_free(struct auth_fetch_reply *r);

#endif
