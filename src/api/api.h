/* The HTTP front of `husk serve`: a thin layer over the core.
 *
 * Each request is parsed, authenticated, handed to ONE core function
 * (src/box, src/state, src/box/files.h) and its result formatted as JSON.
 * No business rules live here: limits, quotas, states and path safety are
 * the core's; the front only checks types and converts formats.
 *
 * Threads: libmicrohttpd runs one thread per connection, so a handler may
 * block (a sync exec runs in its connection's thread).  Streaming execs run
 * the core call in a worker thread that feeds a queue; the connection's
 * thread drains it into the socket (src/api/sse.c). */
#ifndef HUSK_API_API_H
#define HUSK_API_API_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

struct husk_mgr;
struct state;
struct store;
struct api_server;
struct mcp_server;
struct auth;
struct oidc;

/* A tenant's default share of --max-connections for requests running a
 * command (see api_config; the share of all its requests is
 * FRONT_TENANT_REQUESTS_DIVISOR's, front/daemon.h). */
#define API_TENANT_EXECS_DIVISOR 4

struct api_config {
  const char *listen;        /* "ADDR:PORT", IPv4 or [IPv6] */
  struct husk_mgr *mgr;
  struct state *state;
  struct store *store;       /* the storage plane (src/storage); may be NULL */
  const char *admin_key;     /* copied */
  unsigned max_connections;  /* concurrent connections (0: FRONT_MAX_CONNECTIONS) */
  unsigned max_per_ip;       /* concurrent connections from one address (0: no limit) */
  unsigned idle_timeout_s;   /* idle connection timeout (0: FRONT_IDLE_TIMEOUT_S) */
  /* A request's line, headers and (but for uploads) body must arrive
   * within this long of the connection's start or of the previous reply,
   * else the connection is closed.  0: FRONT_REQUEST_TIMEOUT_S. */
  unsigned request_timeout_s;
  /* Per tenant, unless the tenant's own max_requests / max_execs say
   * otherwise: requests handled at once, and of those the ones running or
   * streaming a command (exec, process output and stdin, MCP).  0:
   * max_connections / FRONT_TENANT_REQUESTS_DIVISOR and / API_TENANT_EXECS_DIVISOR,
   * so that one tenant cannot hold every connection thread (past it: 429). */
  unsigned tenant_max_requests;
  unsigned tenant_max_execs;
  bool log_requests;         /* one log line per request */
  void (*log)(void *ctx, const char *line); /* NULL: no log */
  void *log_ctx;
  /* MCP at /mcp: the protocol server, NULL to disable, and
   * the Origins allowed besides loopback and same-origin (comma list). */
  struct mcp_server *mcp;
  const char *mcp_allowed_origins;
  /* Box data in replies (docs/limits.md): the most bytes of stdout and of
   * stderr a sync exec reply holds, and of entries a files listing page
   * holds (0: API_REPLY_MAX_DEFAULT); the bytes all requests in flight may
   * reserve for such data, streams' queues included (0:
   * API_REPLY_BUDGET_DEFAULT). */
  uint64_t reply_max;
  uint64_t reply_budget;
  /* Of it, what one tenant's requests may hold together (0: half). */
  uint64_t tenant_reply_budget;
  /* Preview URLs (preview_proxy.c): the base of the path form
   * ("scheme://host[:port]" as people reach this listener; NULL: the
   * scheme http and the Host a preview's creation came with), and the
   * domain of the host form ("[scheme://]domain[:port]", a wildcard DNS
   * name whose every label leads to this listener; NULL: no host form). */
  const char *preview_url;
  const char *preview_domain;
  /* Users and OAuth 2.1 (docs/oauth.md): the core (NULL: no users, no
   * tokens; the OAuth routes answer 404), and the issuer, the public base
   * of this API as clients reach it ("http(s)://host[:port]"; NULL: http://
   * and the request's Host). */
  struct auth *auth;
  const char *api_url;
  /* Single sign-on through tenants' OpenID Connect providers (NULL: none;
   * the OIDC routes answer 404). */
  struct oidc *oidc;
  /* Reverse proxies whose X-Forwarded-For names the client (docs/oauth.md
   * "Behind a reverse proxy"): the per-address limits of sign-in then
   * count the address the proxy saw.  Addresses in network order, IPv4
   * as IPv4-mapped IPv6. */
  const struct in6_addr *trusted_proxies;
  size_t n_trusted_proxies;
  /* The E2B-compatible front (docs/e2b.md): the file holding the secret
   * its access tokens derive from (created if missing); NULL: off. */
  const char *e2b_secret_path;
};

/* An IP address literal (IPv4 or IPv6, the first `n` bytes of `s`) as
 * IPv6, IPv4 mapped; false if it is not one. */
#define API_TRUSTED_PROXIES_MAX 16
bool api_ip_parse(const char *s, size_t n, struct in6_addr *out);

/* The check of --preview-url and --preview-domain (0, or -1 with err). */
int api_preview_config_check(const char *preview_url, const char *preview_domain,
                             struct husk_err *err);

#define API_REPLY_MAX_DEFAULT (1024 * 1024)
#define API_REPLY_MAX_MIN 1024
#define API_REPLY_MAX_MAX (1024ULL * 1024 * 1024)
#define API_REPLY_BUDGET_DEFAULT (256ULL * 1024 * 1024)
/* Entries of a files listing page: by default, and at most. */
#define API_LIST_LIMIT_DEFAULT 1000
#define API_LIST_LIMIT_MAX 10000
/* A processes listing page: entries by default and at most; a cmd longer
 * than API_PROC_CMD_MAX bytes of JSON is listed as its program name only
 * (cmd_truncated: the process itself has it whole). */
#define API_PROC_LIMIT_DEFAULT 100
#define API_PROC_LIMIT_MAX 500
#define API_PROC_CMD_MAX 4096

/* Start listening.  *out is the running server. */
int api_start(struct api_server **out, const struct api_config *cfg, struct husk_err *err);

/* The actual port (after binding port 0). */
unsigned api_port(const struct api_server *s);

/* Graceful stop: stop accepting new connections, wait up to `grace_ms` for
 * the requests in flight, then cancel what still runs (execs are
 * cancelled, streams end), close every connection and wait for the worker
 * threads.  Frees the server.  The core (box manager, state) is the
 * caller's and stays open. */
void api_stop(struct api_server *s, unsigned grace_ms);

#endif
