/* POST /mcp: the Model Context Protocol over Streamable HTTP (src/mcp is
 * the protocol; this file moves its messages over HTTP).
 *
 * One endpoint, stateless: no Mcp-Session-Id is issued, GET and DELETE are
 * 405 (the routing table does that).  A request is answered as JSON, or,
 * when the client accepts text/event-stream and the call may run long
 * (tools/call), as an SSE stream: progress notifications first, then the
 * response, with keep-alive comments while the tool is quiet and headers
 * that keep proxies from buffering.  Notifications and responses get 202.
 *
 * Before anything: Origin (and on a loopback bind, Host) is checked, so a
 * web page cannot reach a local husk through DNS rebinding.  The tenant's
 * bearer key authenticates every POST (the routing table); every tool call
 * is audited with that tenant and key. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "api/internal.h"
#include "front/listen.h"
#include "mcp/mcp.h"
#include "util/cleanup.h"

struct mcp_body {
  char *buf;
  size_t len, cap;
  bool too_big;
};

enum MHD_Result h_mcp_begin(struct req *r) {
  r->up = calloc(1, sizeof(struct mcp_body));
  if (!r->up)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  return MHD_YES;
}

int h_mcp_upload(struct req *r, const char *data, size_t len) {
  struct mcp_body *b = r->up;
  if (b->too_big)
    return 0; /* dropped: the reply says why */
  if (b->len + len > MCP_MESSAGE_MAX) {
    b->too_big = true;
    free(b->buf);
    b->buf = NULL;
    b->len = b->cap = 0;
    return 0;
  }
  if (b->len + len > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + len)
      cap *= 2;
    char *n = realloc(b->buf, cap);
    if (!n)
      return husk_fail(&r->err, ENOMEM, "out of memory");
    b->buf = n;
    b->cap = cap;
  }
  memcpy(b->buf + b->len, data, len);
  b->len += len;
  return 0;
}

void h_mcp_cleanup(struct req *r) {
  struct mcp_body *b = r->up;
  if (b) {
    free(b->buf);
    free(b);
    r->up = NULL;
  }
}

/* ---- replies ------------------------------------------------------------------- */

static enum MHD_Result reply_msg(struct req *r, unsigned status, json_t *msg) {
  if (!msg)
    return api_reply_empty(r, status);
  char *text = mcp_dump(msg);
  json_decref(msg);
  if (!text)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  struct MHD_Response *resp =
      MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
  if (!resp) {
    free(text);
    return MHD_NO;
  }
  MHD_add_response_header(resp, "Content-Type", "application/json");
  return api_queue(r, status, resp);
}

/* The HTTP status of a JSON-RPC error.  In the 2026-07-28 era the status
 * says what the error says (the conformance suite checks it); the legacy
 * era answers protocol errors with 200, as its clients expect. */
static unsigned status_of(json_t *reply, enum mcp_era era, bool parsed) {
  int code = mcp_reply_code(reply);
  if (!code)
    return 200;
  if (!parsed || code == MCP_PARSE_ERROR || code == MCP_INVALID_REQUEST)
    return 400;
  if (era != MCP_ERA_MODERN)
    return 200;
  if (code == MCP_METHOD_NOT_FOUND)
    return 404;
  if (code == MCP_INTERNAL_ERROR)
    return 500;
  return 400;
}

/* ---- Origin and Host -------------------------------------------------------------- */

static bool listen_is_loopback(const char *listen) {
  struct sockaddr_storage ss;
  socklen_t len;
  struct husk_err err;
  if (!listen || front_parse_listen(listen, &ss, &len, &err) < 0)
    return false;
  if (ss.ss_family == AF_INET)
    return (ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) == 127;
  const struct in6_addr *a = &((struct sockaddr_in6 *)&ss)->sin6_addr;
  return IN6_IS_ADDR_LOOPBACK(a);
}

/* "localhost", "127.0.0.1", "[::1]", each with an optional ":port". */
static bool host_is_loopback(const char *h, size_t n) {
  static const char *const names[] = {"localhost", "127.0.0.1", "[::1]"};
  for (size_t i = 0; i < 3; i++) {
    size_t l = strlen(names[i]);
    if (n >= l && !strncasecmp(h, names[i], l) &&
        (n == l || (h[l] == ':' && n > l + 1 && strspn(h + l + 1, "0123456789") == n - l - 1)))
      return true;
  }
  return false;
}

static bool origin_allowed(struct req *r, const char *origin, const char *host) {
  const char *p = strstr(origin, "://");
  if (!p)
    return false;
  const char *h = p + 3;
  size_t n = strcspn(h, "/");
  if (h[n] == '/' && h[n + 1])
    return false; /* an origin has no path */
  if (host_is_loopback(h, n))
    return true;
  if (host && strlen(host) == n && !strncasecmp(h, host, n))
    return true; /* same origin as the Host it was sent to */
  const char *allow = r->srv->cfg.mcp_allowed_origins;
  while (allow && *allow) {
    size_t l = strcspn(allow, ",");
    if (l == strlen(origin) && !strncasecmp(allow, origin, l))
      return true;
    allow += l + (allow[l] == ',');
  }
  return false;
}

/* ---- headers of the 2026-07-28 era -------------------------------------------------- */

/* Mcp-Name may carry "=?base64?...?=" for names a header cannot hold
 * (what follows the first "=" of the encoded part is not read). */
static char *header_value(const char *v) {
  size_t n = strlen(v);
  if (n >= 12 && !strncmp(v, "=?base64?", 9) && !strcmp(v + n - 2, "?=")) {
    const char *s = v + 9;
    size_t len = n - 11;
    const char *pad = memchr(s, '=', len);
    unsigned char *name;
    size_t name_len;
    if (b64_decode(s, pad ? (size_t)(pad - s) : len, &name, &name_len) < 0)
      return NULL;
    return (char *)name;
  }
  return strdup(v);
}

/* NULL when the headers agree with the body, else the error to send. */
static json_t *check_headers(struct req *r, const struct mcp_msg *m) {
  const char *hv = api_header(r, "MCP-Protocol-Version");
  if (m->era != MCP_ERA_MODERN) {
    if (!hv)
      return NULL; /* legacy: initialize has none; absent means 2025-03-26 */
    if (!strcmp(hv, MCP_VERSION_LEGACY) || !strcmp(hv, MCP_VERSION_LEGACY_OLD) ||
        !strcmp(hv, "2025-03-26"))
      return NULL;
    if (!strcmp(hv, MCP_VERSION_MODERN))
      return m->kind == MCP_REQUEST
                 ? mcp_error(m->id, MCP_INVALID_PARAMS,
                             "Invalid params: a 2026-07-28 request needs its _meta protocol fields",
                             NULL)
                 : NULL;
    return mcp_error(m->id, MCP_UNSUPPORTED_VERSION, "Unsupported protocol version",
                     json_pack("{s:[s, s, s], s:s}", "supported", MCP_VERSION_MODERN,
                               MCP_VERSION_LEGACY, MCP_VERSION_LEGACY_OLD, "requested", hv));
  }
  const char *why = NULL;
  const char *hm = api_header(r, "Mcp-Method");
  if (!hv || strcmp(hv, m->version) != 0)
    why = "the MCP-Protocol-Version header does not match _meta protocolVersion";
  else if (!hm || strcmp(hm, m->method) != 0)
    why = "the Mcp-Method header does not match the method";
  else if (m->kind == MCP_REQUEST &&
           (!strcmp(m->method, "tools/call") || !strcmp(m->method, "resources/read") ||
            !strcmp(m->method, "prompts/get"))) {
    const char *hn = api_header(r, "Mcp-Name");
    cleanup_free char *name = hn ? header_value(hn) : NULL;
    if (!name || !m->name || strcmp(name, m->name) != 0)
      why = "the Mcp-Name header does not match the name in the body";
  }
  if (!why)
    return NULL;
  return mcp_error(m->kind == MCP_REQUEST ? m->id : NULL, MCP_HEADER_MISMATCH, why, NULL);
}

/* ---- calls --------------------------------------------------------------------------- */

struct call_ctx {
  struct api_server *srv;
  char tenant[STATE_TENANT_ID_SIZE];
  char key_id[STATE_KEY_ID_SIZE];
  /* With a token: its scopes, the person and the client (else ~0u, ""). */
  unsigned scopes;
  char user_id[AUTH_USER_ID_SIZE];
  char user_name[AUTH_DISPLAY_MAX + 1];
  char client_id[AUTH_CLIENT_ID_SIZE];
  char client_name[AUTH_CLIENT_NAME_MAX + 1];
  char idp_subject[STATE_IDP_SUBJECT_SIZE];
  struct api_stream *st; /* SSE only */
  struct mcp_msg msg;
  int cancel_fd;
};

static void audit(void *ctx, const char *tool, const char *box_id, const char *detail, bool ok) {
  struct call_ctx *cc = ctx;
  struct state_audit rec;
  memset(&rec, 0, sizeof rec);
  snprintf(rec.tenant_id, sizeof rec.tenant_id, "%s", cc->tenant);
  snprintf(rec.key_id, sizeof rec.key_id, "%s", cc->key_id);
  snprintf(rec.action, sizeof rec.action, "mcp.%s", tool);
  snprintf(rec.box_id, sizeof rec.box_id, "%s", box_id ? box_id : "");
  snprintf(rec.detail, sizeof rec.detail, "%s", detail ? detail : "");
  snprintf(rec.outcome, sizeof rec.outcome, "%s", ok ? "ok" : "error");
  rec.status = 200;
  snprintf(rec.user_id, sizeof rec.user_id, "%s", cc->user_id);
  snprintf(rec.user_name, sizeof rec.user_name, "%s", cc->user_name);
  snprintf(rec.client_id, sizeof rec.client_id, "%s", cc->client_id);
  snprintf(rec.client_name, sizeof rec.client_name, "%s", cc->client_name);
  snprintf(rec.idp_subject, sizeof rec.idp_subject, "%s", cc->idp_subject);
  struct husk_err err;
  if (state_audit_add(cc->srv->cfg.state, &rec, NULL, &err) < 0)
    api_log(cc->srv, "audit: %s", err.msg);
}

static void sse_notify(void *ctx, json_t *msg) {
  struct call_ctx *cc = ctx;
  api_stream_push(cc->st, "message", msg);
}

static struct mcp_caller caller_of(struct call_ctx *cc, bool sse) {
  /* Cancellations match calls made with the same API key: two agents of
   * one tenant that happen to use the same request ids must not stop each
   * other's calls (there is no session to tell them apart). */
  /* A person's calls: by its user id (unique across tenants). */
  struct mcp_caller c = {.tenant = cc->tenant, .key_id = cc->key_id,
                         .scope = cc->user_id[0] ? cc->user_id : cc->key_id,
                         .scopes = cc->scopes, .user_id = cc->user_id, .user_name = cc->user_name,
                         .client_id = cc->client_id, .client_name = cc->client_name,
                         .notify = sse ? sse_notify : NULL, .notify_ctx = cc,
                         .cancel_fd = cc->cancel_fd,
                         /* 2026-07-28: closing the stream is the cancellation. */
                         .gone_cancels = cc->msg.era == MCP_ERA_MODERN,
                         .audit = audit, .audit_ctx = cc};
  return c;
}

static void *sse_worker(void *arg) {
  struct call_ctx *cc = arg;
  struct mcp_caller c = caller_of(cc, true);
  json_t *reply = mcp_handle(cc->srv->cfg.mcp, &cc->msg, &c);
  if (reply)
    api_stream_push(cc->st, "message", reply);
  api_stream_close(cc->st);
  struct api_server *srv = cc->srv;
  api_stream_unref(cc->st);
  close_quiet(cc->cancel_fd);
  mcp_msg_free(&cc->msg);
  free(cc);
  api_worker_leave(srv);
  return NULL;
}

enum MHD_Result h_mcp(struct req *r) {
  struct mcp_body *b = r->up;
  if (!r->srv->cfg.mcp)
    return api_reply_error(r, 404, "not_found", "MCP is not enabled on this server");
  const char *host = api_header(r, "Host");
  const char *origin = api_header(r, "Origin");
  if ((listen_is_loopback(r->srv->cfg.listen) && (!host || !host_is_loopback(host, strlen(host)))) ||
      (origin && !origin_allowed(r, origin, host)))
    return reply_msg(r, 403, mcp_error(NULL, MCP_INVALID_REQUEST,
                                       "Forbidden: Origin or Host not allowed", NULL));
  if (!b)
    return api_reply_error(r, 500, "internal_error", "no request body state");
  if (b->too_big)
    return reply_msg(r, 413, mcp_error(NULL, MCP_INVALID_REQUEST,
                                       "Invalid Request: message too large (at most 4 MiB)", NULL));
  struct mcp_msg msg;
  json_t *bad = NULL;
  if (mcp_parse(b->buf ? b->buf : "", b->len, &msg, &bad) < 0)
    return reply_msg(r, 400, bad);
  json_t *hdr_err = check_headers(r, &msg);
  if (hdr_err) {
    enum mcp_era era = msg.era;
    mcp_msg_free(&msg);
    (void)era;
    return reply_msg(r, 400, hdr_err);
  }
  /* A token without the scope a tool or resource needs: an HTTP 403 the
   * client can act on (ask for more), not a tool error (docs/oauth.md). */
  unsigned need = mcp_scope_needed(r->srv->cfg.mcp, &msg);
  if ((r->scopes & need) != need) {
    mcp_msg_free(&msg);
    api_www_auth(r, "insufficient_scope", need);
    char names[256];
    auth_scopes_format(need, names, sizeof names);
    return api_reply_error(r, 403, "insufficient_scope", "this needs the scope \"%s\"", names);
  }
  struct call_ctx *cc = calloc(1, sizeof *cc);
  if (!cc) {
    mcp_msg_free(&msg);
    return api_reply_error(r, 500, "internal_error", "out of memory");
  }
  cc->srv = r->srv;
  cc->msg = msg;
  cc->cancel_fd = -1;
  snprintf(cc->tenant, sizeof cc->tenant, "%s", r->tenant);
  snprintf(cc->key_id, sizeof cc->key_id, "%s", r->key_id);
  cc->scopes = r->scopes;
  snprintf(cc->user_id, sizeof cc->user_id, "%s", r->user_id);
  snprintf(cc->user_name, sizeof cc->user_name, "%s", r->user_name);
  snprintf(cc->client_id, sizeof cc->client_id, "%s", r->client_id);
  snprintf(cc->client_name, sizeof cc->client_name, "%s", r->client_name);
  snprintf(cc->idp_subject, sizeof cc->idp_subject, "%s", r->idp_subject);
  if (msg.kind != MCP_REQUEST) {
    struct mcp_caller c = caller_of(cc, false);
    json_decref(mcp_handle(r->srv->cfg.mcp, &cc->msg, &c));
    mcp_msg_free(&cc->msg);
    free(cc);
    return api_reply_empty(r, 202);
  }
  const char *accept = api_header(r, MHD_HTTP_HEADER_ACCEPT);
  /* A stream only for calls that may run long and report progress; an
   * unknown tool is answered at once, with its status. */
  bool sse = accept && strcasestr(accept, "text/event-stream") && !strcmp(msg.method, "tools/call") &&
             mcp_tool_known(r->srv->cfg.mcp, msg.name);
  cc->cancel_fd = api_cancel_fd(r);
  if (!sse) {
    struct mcp_caller c = caller_of(cc, false);
    json_t *reply = mcp_handle(r->srv->cfg.mcp, &cc->msg, &c);
    unsigned status = status_of(reply, cc->msg.era, true);
    close_quiet(cc->cancel_fd);
    mcp_msg_free(&cc->msg);
    free(cc);
    return reply ? reply_msg(r, status, reply) : api_reply_empty(r, 202);
  }
  cc->st = api_stream_new(r, STREAM_SSE);
  bool ok = cc->st && cc->cancel_fd >= 0;
  if (ok) {
    /* The stream released (client gone) cancels like a hang-up. */
    struct epoll_event e = {.events = EPOLLIN};
    ok = epoll_ctl(cc->cancel_fd, EPOLL_CTL_ADD, api_stream_gone_fd(cc->st), &e) == 0;
  }
  struct MHD_Response *resp = ok ? api_stream_response(cc->st) : NULL;
  if (!resp || api_worker_start(r->srv, sse_worker, cc) != 0) {
    if (resp)
      MHD_destroy_response(resp);
    api_stream_unref(cc->st);
    close_quiet(cc->cancel_fd);
    mcp_msg_free(&cc->msg);
    free(cc);
    return api_reply_error(r, 503, "unavailable", "cannot start the call");
  }
  MHD_add_response_header(resp, "Cache-Control", "no-cache");
  return api_queue(r, 200, resp);
}
