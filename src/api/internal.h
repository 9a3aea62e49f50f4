/* Shared between the files of src/api: the request context, the routing
 * table's types, and the reply, JSON and streaming helpers. */
#ifndef HUSK_API_INTERNAL_H
#define HUSK_API_INTERNAL_H

#include <jansson.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "api/api.h"
#include "auth/auth.h"
#include "util/strbuf.h"
#include "box/box.h"
#include "front/daemon.h"
#include "husk/husk.h"
#include "husk/preview.h"
#include "state/state.h"
#include "util/base64.h"
#include "util/error.h"
#include "util/json_text.h"
#include "util/tenant_load.h"
#include "util/utf8.h"

/* JSON request bodies larger than this are refused with 413. */
#define API_JSON_BODY_MAX (1024 * 1024)
/* A context's execute may carry more code: a body past API_JSON_BODY_MAX
 * needs its Content-Length, and holds twice it (the text and its parse)
 * from the reply budget while the request lasts. */
#define API_CODE_BODY_MAX (32 * 1024 * 1024)
/* Path parameters longer than this cannot be ids: 404 at once. */
#define API_PARAM_MAX STATE_BOX_ID_SIZE
#define API_MAX_PARAMS 4
/* OAuth form bodies (the sign-in form, the token and revocation
 * endpoints): larger ones are refused with 413 (docs/oauth.md). */
#define API_FORM_BODY_MAX (16 * 1024)
/* route.scope: what an access token needs (AUTH_SCOPE_* bits, all of
 * them); 0: keys only (a token gets 403); SCOPE_TOKEN: any token for the
 * resource, the handler checks (MCP checks each tool). */
#define SCOPE_TOKEN (1u << 31)

struct preview_req;

struct api_server {
  /* The daemon, the requests in flight, the per-tenant loads and the
   * request timeout (front/daemon.h). */
  struct front_daemon front;
  struct api_config cfg;
  char *admin_key;
  size_t admin_key_len;
  /* Readable (eventfd) once the grace period of a stop is over: every
   * blocking wait in the front polls it and gives up. */
  int stop_fd;
  unsigned workers; /* worker threads of streaming execs (under front.lock) */
  /* Bytes of reply data reserved by the requests in flight (reply_body.c). */
  _Atomic uint64_t reply_reserved;
  unsigned tenant_max_requests, tenant_max_execs; /* the defaults */
  struct husk_preview_domain preview_domain;
  /* Per tenant, its requests through its previews (api_admit_preview). */
  struct tenant_loads preview_loads;
  char preview_scheme[8]; /* of --preview-url: what X-Forwarded-Proto says */
  /* The OAuth front (routes_oauth.c). */
  struct api_oauth *oauth;
  /* The E2B-compatible front (e2b.c): on with a secret to derive the
   * boxes' access tokens from. */
  bool e2b_on;
  unsigned char e2b_secret[32];
};

enum api_auth {
  AUTH_NONE,   /* public (health) */
  AUTH_ADMIN,  /* the admin key only */
  AUTH_TENANT, /* a tenant key only */
  AUTH_ANY,    /* either (audit listing) */
  /* The E2B-compatible front (e2b.c, docs/e2b.md): */
  AUTH_E2B_KEY, /* X-API-KEY: a tenant key (the control plane) */
  AUTH_E2B_BOX, /* E2b-Sandbox-Id names a live box and X-Access-Token or
                   E2B-Traffic-Access-Token is its access token (the
                   sandbox plane); sets tenant and e2b_box */
};

/* How a route's errors are shaped. */
enum api_dialect {
  DIALECT_HUSK,    /* {"error":{"code":"not_found","message":...}} */
  DIALECT_E2B,     /* E2B's control plane and envd's plain HTTP: {"code":404,"message":...} */
  DIALECT_CONNECT, /* a Connect unary call: {"code":"not_found","message":...}, the
                      status from the code (e2b_connect.c) */
};

enum api_body {
  BODY_NONE,   /* a body, if any, is ignored */
  BODY_FORM,   /* application/x-www-form-urlencoded, buffered up to API_FORM_BODY_MAX */
  BODY_JSON,   /* buffered up to API_JSON_BODY_MAX, parsed by the handler */
  BODY_STREAM, /* handed chunk by chunk to route->upload as it arrives */
};

struct req;
typedef enum MHD_Result (*api_handler)(struct req *r);

struct route {
  const char *method;
  const char *pattern; /* "/v1/sandboxes/{}/files": {} is a parameter */
  enum api_auth auth;
  enum api_body body;
  const char *action;  /* audit action, NULL: not audited */
  api_handler handle;  /* called once the whole request is in */
  /* BODY_STREAM only: begin (after authentication, before the first
   * chunk; returns MHD_YES to go on, or queues an error reply), upload
   * (each chunk; -1 after filling r->err to stop with that error), and
   * cleanup (always, at completion: release what begin acquired; must
   * undo partial work when r->stream_ok is false). */
  api_handler begin;
  int (*upload)(struct req *r, const char *data, size_t len);
  void (*cleanup)(struct req *r);
  /* What an access token needs here (see SCOPE_TOKEN); keys pass. */
  unsigned scope;
};

struct req {
  struct api_server *srv;
  struct MHD_Connection *conn;
  const struct route *route;
  char method[16];
  char path[256]; /* for the log; cut if longer */
  char params[API_MAX_PARAMS][API_PARAM_MAX];
  int nparams;
  int64_t t0_ms;

  /* Who: exactly one of admin / tenant is set once authenticated. */
  bool admin;
  char tenant[STATE_TENANT_ID_SIZE];
  char key_id[STATE_KEY_ID_SIZE];
  /* With an access token (token true): the person and the OAuth client
   * behind the request, for the audit and box attribution; user_name is
   * the display name, else the name.  scopes: what the request may do
   * (~0u with a key). */
  bool token;
  unsigned scopes;
  char user_id[AUTH_USER_ID_SIZE];
  char user_name[AUTH_DISPLAY_MAX + 1];
  char client_id[AUTH_CLIENT_ID_SIZE];
  char client_name[AUTH_CLIENT_NAME_MAX + 1];
  char idp_subject[STATE_IDP_SUBJECT_SIZE]; /* the user's provider link, "" if none */
  /* Counted in the tenant's load (released at completion). */
  bool load_counted, load_exec, load_preview;

  /* Body (BODY_JSON). */
  char *body;
  size_t body_len, body_cap;
  uint64_t body_budget; /* reply budget held for a large body (API_CODE_BODY_MAX) */

  /* The raw request target (path and query, undecoded), and a request
   * for a preview URL (preview_proxy.c): NULL for an API route. */
  char *raw_uri;
  struct preview_req *pv;

  /* The E2B sandbox plane (AUTH_E2B_BOX): the box the request is for
   * and the port it names (49983 envd, 49999 the code interpreter). */
  char e2b_box[STATE_BOX_ID_SIZE];
  unsigned e2b_port;
  enum api_dialect dialect; /* of the route's table, or of the plane before one is found */

  /* Reply. */
  bool responded;
  int status;
  bool audited;
  char audit_box[STATE_BOX_ID_SIZE];
  char audit_detail[256];
  /* One extra header for an error reply (Allow of a 405, Content-Range of
   * a 416). */
  char xhdr_name[32];
  char xhdr_value[128];
  /* The WWW-Authenticate of a 401 or 403 (RFC 6750, RFC 9728); "": the
   * plain one. */
  char www_auth[1024];

  /* Streaming uploads (BODY_STREAM). */
  void *up;         /* the route's state */
  bool stream_ok;   /* the route finished the upload successfully */
  struct husk_err err;
  uint64_t up_bytes;
  uint64_t drained; /* bytes dropped after a refusal */
  /* While the body arrives, a reply is held here and sent once the body is
   * in (see on_request). */
  bool in_body;
  struct MHD_Response *pending;
};

/* ---- server.c ------------------------------------------------------- */
void api_log(struct api_server *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Worker threads (streaming execs) register so that a stop waits for them. */
void api_worker_enter(struct api_server *s);
void api_worker_leave(struct api_server *s);
/* Start fn(arg) in a detached, registered worker thread (the worker calls
 * api_worker_leave when done).  Returns 0 or an errno (nothing started). */
int api_worker_start(struct api_server *s, void *(*fn)(void *), void *arg);
/* The socket of the request's connection, -1 if unknown. */
int api_conn_fd(struct req *r);
/* An fd that becomes readable when the client hangs up or the server
 * stops: an epoll set of the connection's socket (EPOLLRDHUP only, so
 * pipelined bytes do not count) and the stop eventfd.  -1 on failure. */
int api_cancel_fd(struct req *r);
/* Wait until `fd` is readable, the client hangs up or (if `watch_stop`)
 * the server stops. */
enum api_wait_result {
  API_WAIT_STOPPING = -2, /* the server is stopping */
  API_WAIT_GONE = -1,     /* the client hung up (or the wait failed) */
  API_WAIT_TIMEOUT = 0,
  API_WAIT_READY = 1, /* fd is readable */
};
enum api_wait_result api_wait_srv(struct api_server *s, int sock, int fd, int timeout_ms,
                                  bool watch_stop);

/* Count the request in the load of r->tenant (released at its
 * completion, or by api_release), or refuse it (429, 503) past the
 * tenant's bounds.  A preview's requests count apart from the tenant's
 * API requests, against the same bound. */
enum MHD_Result api_admit(struct req *r);
enum MHD_Result api_admit_preview(struct req *r);
void api_release(struct req *r);

/* Query arguments (URL-decoded; "" for a bare "?name").  NULL if absent.
 * Requests with a NUL in any argument were refused before the handler. */
const char *api_query(struct req *r, const char *name);
/* Strict parses of query arguments: 0 ok (or absent: *out untouched),
 * -1 after queuing nothing: the caller replies 400 with r->err. */
int api_query_u64(struct req *r, const char *name, uint64_t max, uint64_t *out, bool *present);
int api_query_bool(struct req *r, const char *name, bool *out);
const char *api_header(struct req *r, const char *name);

/* ---- json.c: replies ------------------------------------------------ */
/* Queue a reply; records the status, writes the audit record of the route
 * (if any) and returns what MHD_queue_response returned. */
enum MHD_Result api_queue(struct req *r, unsigned status, struct MHD_Response *resp);
/* JSON reply (steals `body`; NULL → 500). */
enum MHD_Result api_reply_json(struct req *r, unsigned status, json_t *body);
/* `o` as a JSON reply body (compact, a trailing newline, Content-Type
 * set), for a reply with headers of its own; NULL when out of memory. */
struct MHD_Response *api_json_response(const json_t *o);
enum MHD_Result api_reply_empty(struct req *r, unsigned status);
/* {"error":{"code":code,"message":...}} with `status`. */
enum MHD_Result api_reply_error(struct req *r, unsigned status, const char *code, const char *fmt,
                                ...) __attribute__((format(printf, 4, 5)));
/* Map a core error (err->code is an errno) to a status and code. */
enum MHD_Result api_reply_err(struct req *r, const struct husk_err *err);
void api_err_status(int code, unsigned *status, const char **name);
/* A core listing that returned rc < 0: its error, or 500 when the
 * handler's callback ran out of memory (API_LIST_NOMEM). */
enum MHD_Result api_reply_list_err(struct req *r, int rc, const struct husk_err *err);
/* 400 with r->err's message. */
enum MHD_Result api_reply_bad(struct req *r);

/* ---- json.c: request bodies ----------------------------------------- */
/* Parse the JSON body as an object ({} when empty).  Keys not in
 * `allowed` (NULL-terminated) are refused.  On failure r->err is set
 * (EINVAL) and NULL returned. */
json_t *api_body_object(struct req *r, const char *const *allowed);
int api_check_fields(json_t *o, const char *const *allowed, struct husk_err *err);
/* Typed getters: return 1 if present and valid, 0 if absent (or null),
 * -1 with err filled on a wrong type or range. */
int jget_string(json_t *o, const char *k, const char **out, struct husk_err *err);
int jget_bool(json_t *o, const char *k, bool *out, struct husk_err *err);
/* Non-negative integer <= max. */
int jget_u64(json_t *o, const char *k, uint64_t max, uint64_t *out, struct husk_err *err);
/* Bytes: a non-negative integer or a size string ("256M"). */
int jget_size(json_t *o, const char *k, uint64_t *out, struct husk_err *err);
/* Seconds (integer or fraction, > 0) as milliseconds, rounded up.  Like
 * the other jget_*: 0 when `k` is absent (or null), 1 when read, -1 with
 * EINVAL when it is not a positive number or too large. */
int jget_seconds_ms(json_t *o, const char *k, uint64_t *out, struct husk_err *err);
/* A CPU count (number > 0) in thousandths, rounded to the nearest; EINVAL
 * too when that is 0. */
int jget_milli(json_t *o, const char *k, uint64_t *out, struct husk_err *err);
/* An object of strings as a NULL-terminated "NAME=VALUE" array (malloc'd,
 * one block; free() it). */
int jget_env(json_t *o, const char *k, char ***out, struct husk_err *err);
/* A non-empty array of strings as a NULL-terminated array (one block). */
int jget_argv(json_t *o, const char *k, char ***out, struct husk_err *err);
/* An object whose values are all strings. */
int jget_string_object(json_t *o, const char *k, json_t **out, struct husk_err *err);

/* ---- routes_files.c ------------------------------------------------- */
/* A Range header of a file download of `size` bytes: 1 with [*from, *to]
 * (inclusive), 0 to ignore it, -1 unsatisfiable. */
int api_parse_range(const char *h, uint64_t size, uint64_t *from, uint64_t *to);

/* ---- auth.c --------------------------------------------------------- */
/* Authenticate by the route's rule.  Returns MHD_YES to go on (r->admin or
 * r->tenant set), or the result of queuing 401/403/500. */
enum MHD_Result api_authenticate(struct req *r);
bool api_key_equal(const char *a, size_t alen, const char *b, size_t blen);
/* Who the request is, for the records of what it creates (state.h's
 * STATE_CREATED_BY_SIZE; `size` at least that): the user of its access
 * token, else "key:" and its key id, else "" (the admin key). */
void api_created_by(const struct req *r, char *out, size_t size);
/* A creator in a reply: its text, or null for "". */
json_t *api_created_by_json(const char *created_by);

/* ---- audit ---------------------------------------------------------- */
void api_audit(struct req *r, const char *outcome);
/* A record of an event that is not a route's action (OAuth sign-in,
 * tokens): tenant may be "" or NULL; user/client fields from `u` and `c`
 * (either NULL).  detail must hold no secret. */
void api_audit_event(struct req *r, const char *tenant, const char *action, const char *outcome,
                     unsigned status, const struct auth_user *u, const char *client_id,
                     const char *client_name, const char *detail);

/* ---- routes_oauth.c ---------------------------------------------------- */
/* The issuer: --api-url, else http:// and the request's Host (0), or -1
 * when the Host is unusable. */
int api_issuer(struct req *r, char *out, size_t size);
/* Fill r->www_auth for a refusal by the resource server: the metadata
 * URL of the route's resource, the scope needed, and `error` (NULL:
 * none). */
void api_www_auth(struct req *r, const char *error, unsigned scope);
/* The form body (BODY_FORM) as NULL-terminated arrays of decoded names
 * and values (one malloc'd block each); -1 with r->err on a malformed or
 * repeated parameter. */
struct api_form {
  size_t n;
  char **names, **values;
  char *mem;
  size_t mem_size;
};
int api_form_parse(const char *body, size_t len, struct api_form *f, struct husk_err *err);
const char *api_form_get(const struct api_form *f, const char *name);
void api_form_free(struct api_form *f);
enum MHD_Result h_oauth_as_meta(struct req *r);
enum MHD_Result h_oauth_pr_meta_mcp(struct req *r);
enum MHD_Result h_oauth_pr_meta_v1(struct req *r);
enum MHD_Result h_oauth_register(struct req *r);
enum MHD_Result h_oauth_authorize_get(struct req *r);
enum MHD_Result h_oauth_authorize_post(struct req *r);
enum MHD_Result h_oauth_token(struct req *r);
enum MHD_Result h_oauth_revoke(struct req *r);
enum MHD_Result h_oauth_style(struct req *r);

/* What routes_oidc.c (single sign-on) shares with routes_oauth.c: the
 * authorization request, its checks and redirect, and the pages. */
#define AZ_N 8
#define AZ_CLIENT 1
#define AZ_REDIRECT 2
#define AZ_CHALLENGE 3
#define AZ_STATE 5
#define AZ_SCOPE 6
#define AZ_RESOURCE 7
extern const char *const api_az_names[AZ_N];
struct api_az {
  const char *v[AZ_N]; /* NULL: absent */
  struct auth_client client;
  char iss[600];
  char resource[700];
  char origin[600]; /* of the redirect URI, for the CSP */
  char host[256];   /* the redirect URI's host, shown on the page */
  unsigned scopes;  /* asked (default: AUTH_SCOPE_DEFAULT) */
  char why[HUSK_ERR_MSG_MAX + 128]; /* what is wrong with a client's document */
  unsigned fail_status;             /* of the error page: 0 is 400 */
};
/* Check a request whose v[] is filled: NULL, or what is wrong (a page's
 * sentence). */
const char *api_az_check(struct req *r, struct api_az *a);
/* The redirect back to the client: ?k1=v1[&k2=v2]&state&iss. */
enum MHD_Result api_az_redirect(struct req *r, const struct api_az *a, const char *k1,
                                const char *v1, const char *k2, const char *v2);
void api_page_head(struct strbuf *b, const char *title);
enum MHD_Result api_reply_page(struct req *r, unsigned status, struct strbuf *b,
                               const char *form_origin, const char *cookie);
enum MHD_Result api_error_page(struct req *r, unsigned status, const char *msg);
const char *api_scope_text(unsigned bit);
/* The client's address as the sign-in limits name it. */
void api_oauth_source(struct req *r, char *out, size_t size);
/* An audit record of an event nobody authenticated (rate-limited). */
void api_audit_anon(struct req *r, const char *tenant, const char *action, const char *outcome,
                    unsigned status, const char *client_id, const char *client_name,
                    const char *detail);
/* HMAC-SHA256 of `text` under the sign-in forms' key, as 64 hex. */
int api_oauth_hmac(struct req *r, const char *text, char out[65]);
/* Single sign-ons started from one address: false past the limit. */
bool api_sso_rate_take(struct req *r, const char *src);

/* routes_oidc.c: the sign-in page's action=sso (the form checked, `a`
 * checked): 1 with *ret when it replied, 0 when the sign-in page is to be
 * shown again with *msg and *status. */
int api_sso_start(struct req *r, const struct api_az *a, const char *org, enum MHD_Result *ret,
                  const char **msg, unsigned *status);
enum MHD_Result h_oauth_callback_get(struct req *r);
enum MHD_Result h_oauth_callback_post(struct req *r);
enum MHD_Result h_oidc_put(struct req *r);
enum MHD_Result h_oidc_get(struct req *r);
enum MHD_Result h_oidc_delete(struct req *r);
/* The per-process state of the OAuth front: the CSRF key and the rate
 * limits of failed sign-ins and registrations per source address. */
int api_oauth_init(struct api_server *s, struct husk_err *err);
void api_oauth_free(struct api_server *s);

/* ---- routes_users.c ---------------------------------------------------- */
enum MHD_Result h_user_create(struct req *r);
enum MHD_Result h_user_list(struct req *r);
enum MHD_Result h_user_get(struct req *r);
enum MHD_Result h_user_update(struct req *r);
enum MHD_Result h_user_delete(struct req *r);

/* ---- route handlers ------------------------------------------------- */
/* What a handler's listing callback returns when it cannot add an entry
 * (out of memory).  The core's listings stop and return it as is, while
 * -1 stays the core's own failure, the one that fills its husk_err. */
#define API_LIST_NOMEM (-2)

extern const struct route api_routes[];
extern const size_t api_nroutes;

/* Routing (server.c): find the route of `url` in `tables` (ended by one
 * whose routes is NULL; the first match wins), then authenticate, admit
 * and check the body's size.  Replies 404/405 itself. */
struct route_table {
  const struct route *routes;
  size_t n;
  enum api_dialect dialect; /* of its routes' errors */
};
/* Ids (boxes, tenants, keys) are [A-Za-z0-9_-]+; pids are decimal. */
bool api_param_ok(const char *s);
enum MHD_Result api_route_in(struct req *r, const char *url, const char *method,
                             const struct route_table *tables);

enum MHD_Result h_health(struct req *r);
/* routes_admin.c */
enum MHD_Result h_tenant_create(struct req *r);
enum MHD_Result h_tenant_list(struct req *r);
enum MHD_Result h_pool(struct req *r);
/* {memory, cpus, pids, disk} as every reply shows limits (routes_boxes.c). */
json_t *api_limits_json(const struct husk_limits *l);
enum MHD_Result h_tenant_get(struct req *r);
enum MHD_Result h_tenant_quota(struct req *r);
enum MHD_Result h_key_create(struct req *r);
enum MHD_Result h_key_list(struct req *r);
enum MHD_Result h_key_revoke(struct req *r);
enum MHD_Result h_tenant_delete(struct req *r);
enum MHD_Result h_admin_s3_key_list(struct req *r);
enum MHD_Result h_admin_s3_key_revoke(struct req *r);
/* What a tenant owns beside its boxes, for box_tenant_delete: its storage. */
struct box_tenant_purge api_tenant_purge(const struct api_config *cfg);
enum MHD_Result h_audit_list(struct req *r);
/* routes_boxes.c */
enum MHD_Result h_box_create(struct req *r);
enum MHD_Result h_box_list(struct req *r);
enum MHD_Result h_box_get(struct req *r);
enum MHD_Result h_box_delete(struct req *r);
enum MHD_Result h_box_timeout(struct req *r);
enum MHD_Result h_box_metrics(struct req *r);
enum MHD_Result h_box_pause(struct req *r);
enum MHD_Result h_box_resume(struct req *r);
/* routes_volumes.c */
struct husk_volume_mount;
/* The "volumes" array of a create body, [{"name","path","read_only"}],
 * into m[HUSK_VOLUME_MOUNTS_MAX] (its strings borrowed from o); absent:
 * *n = 0.  -1 with err filled (EINVAL) for a bad shape or too many. */
int api_volume_mounts(json_t *o, struct husk_volume_mount *m, size_t *n, struct husk_err *err);
enum MHD_Result h_volume_create(struct req *r);
enum MHD_Result h_volume_list(struct req *r);
enum MHD_Result h_volume_get(struct req *r);
enum MHD_Result h_volume_delete(struct req *r);

/* ---- routes_fetch.c --------------------------------------------------- */
enum MHD_Result h_box_fetch(struct req *r);

/* ---- routes_previews.c ------------------------------------------------ */
enum MHD_Result h_preview_create(struct req *r);
enum MHD_Result h_preview_list(struct req *r);
enum MHD_Result h_preview_get(struct req *r);
enum MHD_Result h_preview_revoke(struct req *r);
enum MHD_Result h_preview_access(struct req *r);

/* ---- preview_proxy.c: requests for a preview URL ------------------------ */
/* Parse --preview-url and --preview-domain into the server. */
int api_preview_setup(struct api_server *s, struct husk_err *err);
/* Whether the request is for a preview: its path is /p/..., or its Host
 * is a name under the preview domain. */
bool api_preview_wanted(struct api_server *s, struct MHD_Connection *conn, const char *raw_uri);
/* The request's calls: its head (resolve, authorize, connect, send the
 * head on), each piece of its body, its end (read the box's reply head,
 * record the access, queue the reply), and its completion. */
enum MHD_Result api_preview_begin(struct req *r);
enum MHD_Result api_preview_body(struct req *r, const char *data, size_t n);
enum MHD_Result api_preview_end(struct req *r);
void api_preview_cleanup(struct req *r, enum MHD_RequestTerminationCode toe);

/* ---- routes_upload.c: upload links ---------------------------------- */
enum MHD_Result h_ulink_create(struct req *r);
enum MHD_Result h_ulink_list(struct req *r);
enum MHD_Result h_ulink_revoke(struct req *r);
enum MHD_Result h_upage(struct req *r);
enum MHD_Result h_upost_begin(struct req *r);
int h_upost_upload(struct req *r, const char *data, size_t len);
enum MHD_Result h_upost(struct req *r);
void h_upost_cleanup(struct req *r);

/* routes_snapshots.c */
struct husk_snapshot_info;
/* A snapshot as every reply shows it. */
json_t *api_snapshot_json(const struct husk_snapshot_info *si);
enum MHD_Result h_snapshot_create(struct req *r);
enum MHD_Result h_snapshot_list(struct req *r);
enum MHD_Result h_snapshot_get(struct req *r);
enum MHD_Result h_snapshot_delete(struct req *r);
struct jreply;
/* routes_exec.c */
/* A chunk of output as an event's data: {"data": text} when the bytes are
 * UTF-8, else {"data_b64": base64}. */
json_t *api_chunk_json(const char *buf, size_t len);
/* Output kept for a reply: at most `cap` bytes of a stream; what comes
 * past it is counted, not kept.  add: -1 when out of memory. */
struct api_outbuf {
  char *d;
  size_t len, alloc;
  uint64_t total; /* all that was written on the stream */
};
int api_outbuf_add(struct api_outbuf *o, size_t cap, const char *buf, size_t len);
/* ,"stdout": the kept bytes (as text, U+FFFD for invalid UTF-8), plus
 * "stdout_b64" with the exact bytes when they are not UTF-8, the count of
 * all bytes written and whether the kept part is shorter (8 parts at most;
 * the reply takes o's data). */
void api_add_output(struct jreply *j, const char *name, struct api_outbuf *o);
enum MHD_Result h_exec(struct req *r);
/* routes_contexts.c */
enum MHD_Result h_ctx_create(struct req *r);
enum MHD_Result h_ctx_list(struct req *r);
enum MHD_Result h_ctx_get(struct req *r);
enum MHD_Result h_ctx_delete(struct req *r);
enum MHD_Result h_ctx_restart(struct req *r);
enum MHD_Result h_ctx_interrupt(struct req *r);
enum MHD_Result h_ctx_execute(struct req *r);
enum MHD_Result h_proc_list(struct req *r);
enum MHD_Result h_proc_get(struct req *r);
enum MHD_Result h_proc_signal(struct req *r);
enum MHD_Result h_proc_kill(struct req *r);
enum MHD_Result h_proc_output(struct req *r);
enum MHD_Result h_proc_stdin_begin(struct req *r);
int h_proc_stdin_upload(struct req *r, const char *data, size_t len);
enum MHD_Result h_proc_stdin(struct req *r);
void h_proc_stdin_cleanup(struct req *r);
/* routes_files.c */
enum MHD_Result h_file_get(struct req *r);
enum MHD_Result h_file_put_begin(struct req *r);
int h_file_put_upload(struct req *r, const char *data, size_t len);
enum MHD_Result h_file_put(struct req *r);
void h_file_put_cleanup(struct req *r);
enum MHD_Result h_file_delete(struct req *r);
enum MHD_Result h_file_list(struct req *r);
enum MHD_Result h_file_stat(struct req *r);
enum MHD_Result h_file_mkdir(struct req *r);
enum MHD_Result h_file_move(struct req *r);
enum MHD_Result h_tar_get(struct req *r);
enum MHD_Result h_tar_put_begin(struct req *r);
int h_tar_put_upload(struct req *r, const char *data, size_t len);
enum MHD_Result h_tar_put(struct req *r);
void h_tar_put_cleanup(struct req *r);

/* routes_mcp.c */
enum MHD_Result h_mcp(struct req *r);
enum MHD_Result h_mcp_begin(struct req *r);
int h_mcp_upload(struct req *r, const char *data, size_t len);
void h_mcp_cleanup(struct req *r);
/* routes_storage.c */
enum MHD_Result h_s3_key_create(struct req *r);
enum MHD_Result h_s3_key_list(struct req *r);
enum MHD_Result h_s3_key_revoke(struct req *r);
enum MHD_Result h_link_create(struct req *r);
enum MHD_Result h_link_list(struct req *r);
enum MHD_Result h_link_revoke(struct req *r);
enum MHD_Result h_link_get(struct req *r);
enum MHD_Result h_link_access(struct req *r);
enum MHD_Result h_object_list(struct req *r);
enum MHD_Result h_object_head(struct req *r);
enum MHD_Result h_box_export(struct req *r);
/* routes_templates.c */
enum MHD_Result h_template_import_begin(struct req *r);
int h_template_import_upload(struct req *r, const char *data, size_t len);
enum MHD_Result h_template_import(struct req *r);
void h_template_import_cleanup(struct req *r);
enum MHD_Result h_template_list(struct req *r);
enum MHD_Result h_template_get(struct req *r);
enum MHD_Result h_template_delete(struct req *r);
enum MHD_Result h_template_export(struct req *r);
enum MHD_Result h_build_begin(struct req *r);
int h_build_upload(struct req *r, const char *data, size_t len);
enum MHD_Result h_build(struct req *r);
void h_build_cleanup(struct req *r);
enum MHD_Result h_box_import(struct req *r);

/* ---- file_body.c: bodies read from a box-controlled file ------------ */
/* A response of exactly `len` bytes from `fd` at `off` (takes the fd, also
 * on failure: NULL).  A file that shrinks meanwhile ends it with a closed
 * connection; what it gains is not sent. */
struct MHD_Response *api_file_response(int fd, uint64_t off, uint64_t len);

/* ---- reply_body.c: replies carrying box data, and their budget ----- */
/* Bytes of box data one reply holds (--reply-max). */
uint64_t api_reply_max(const struct api_server *s);
/* Reserve n bytes of the daemon-wide reply budget (--reply-budget): false
 * when they do not fit (reply api_reply_busy).  give returns them. */
bool api_budget_take(struct api_server *s, const char *tenant, uint64_t n);
void api_budget_give(struct api_server *s, const char *tenant, uint64_t n);
/* 503 with Retry-After: the budget is spent. */
enum MHD_Result api_reply_busy(struct req *r);
/* A JSON reply built from parts, produced as it is sent (no escaped copy
 * of the data in memory).  It owns `reserved` bytes of the budget (given
 * back when it is freed, also by jreply_new's failure).  The add functions
 * record a failure that api_reply_jreply reports as 500. */
struct jreply;
struct jreply *jreply_new(struct api_server *s, const char *tenant, uint64_t reserved);
void jreply_free(struct jreply *j);
/* Free p with the reply (the data of string and base64 parts). */
void jreply_own(struct jreply *j, void *p);
/* Literal JSON text: copied / taken (malloc'd, freed with the reply). */
void jreply_text(struct jreply *j, const char *text);
void jreply_take_text(struct jreply *j, char *text, size_t len);
/* The members of object o (stolen) without its braces. */
void jreply_fields(struct jreply *j, json_t *o);
/* buf as a JSON string (invalid UTF-8 as U+FFFD) / as base64 in quotes;
 * buf must live as long as the reply (jreply_own). */
void jreply_string(struct jreply *j, const void *buf, size_t len);
void jreply_base64(struct jreply *j, const void *buf, size_t len);
/* Queue the reply (consumes j). */
enum MHD_Result api_reply_jreply(struct req *r, unsigned status, struct jreply *j);

/* ---- sse.c: queue-fed streaming responses --------------------------- */
enum api_stream_fmt { STREAM_SSE, STREAM_NDJSON, STREAM_RAW /* bytes; caller sets the type */ };
struct api_stream;
/* A stream for the request's connection; refcount 1 (the caller's). */
struct api_stream *api_stream_new(struct req *r, enum api_stream_fmt fmt);
void api_stream_ref(struct api_stream *s);
void api_stream_unref(struct api_stream *s);
/* Producer side.  push: one event (`data` stolen; for NDJSON the line is
 * {"type":event, ...data's fields}).  Blocks while the queue is full
 * (backpressure) unless the consumer is gone; returns -1 if it is. */
int api_stream_push(struct api_stream *s, const char *event, json_t *data);
/* Raw bytes (STREAM_RAW).  Same blocking and result as push. */
int api_stream_push_raw(struct api_stream *s, const void *buf, size_t len);
/* No more events: the response ends after the queued ones. */
void api_stream_close(struct api_stream *s);
/* No more data and the stream is incomplete: after the queued bytes the
 * connection is closed without the end of the chunked body, so the client
 * sees an error rather than a complete-looking truncated file. */
void api_stream_fail(struct api_stream *s);
bool api_stream_gone(const struct api_stream *s);
/* An fd that becomes readable when the consumer goes away (eventfd). */
int api_stream_gone_fd(const struct api_stream *s);
/* The MHD response draining the stream (takes a reference). */
struct MHD_Response *api_stream_response(struct api_stream *s);
/* A raw body made by produce(ctx, out, out_ctx, err) in a worker thread:
 * it writes through out (-1, ECONNRESET, once the client is gone) and
 * returns < 0 on failure.  A failure before its first byte is the reply's
 * error status; after it, the body ends without its last chunk (clients
 * see an error, not a short file).  ctx_free(ctx) runs when both the
 * worker and the reply are done with it (also when nothing started). */
typedef int (*api_producer)(void *ctx, int (*out)(void *oc, const void *buf, size_t len),
                            void *oc, struct husk_err *err);
enum MHD_Result api_reply_produced(struct req *r, const char *content_type, api_producer produce,
                                   void *ctx, void (*ctx_free)(void *ctx));
/* Format one SSE event; returns malloc'd text. */
char *sse_format(const char *event, const char *id, json_t *data, size_t *len);
char *ndjson_format(const char *event, json_t *data, size_t *len);

#endif
