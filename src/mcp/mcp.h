/* The MCP server: husk as a Model Context Protocol server, independent of
 * the transport (stdio in `husk mcp`, Streamable HTTP at /mcp in
 * `husk serve`).  A front like the HTTP API: it parses JSON-RPC, calls the
 * core (src/box: boxes, files, jobs) and formats results; every rule is
 * the core's.
 *
 * One dual-era server, stateless: each message is classified by its body.
 *   - modern (2026-07-28): the request's params._meta carries
 *     "io.modelcontextprotocol/protocolVersion"; server/discover, resultType,
 *     ttlMs/cacheScope, errors -32020/-32021/-32022; no initialize, no ping.
 *   - legacy (2025-11-25, 2025-06-18): the initialize handshake, answered
 *     with the client's version when supported, else 2025-11-25 (never
 *     2026-07-28).
 * No session state: what lives across calls is named by explicit handles in
 * tool arguments (sandbox_id, job_id), kept by the core.
 *
 * Threads: mcp_handle may run concurrently on one server (each tools/call
 * in its own thread), and notifications/cancelled reaches a call in flight
 * through the server's registry. */
#ifndef HUSK_MCP_MCP_H
#define HUSK_MCP_MCP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "husk/preview.h"
#include "util/error.h"

struct husk_mgr;
struct mcp_server;
struct mcp_call;
struct mcp_caller;

#define MCP_VERSION_MODERN "2026-07-28"
#define MCP_VERSION_LEGACY "2025-11-25"     /* answer to initialize by default */
#define MCP_VERSION_LEGACY_OLD "2025-06-18" /* also accepted in initialize */

/* Largest message accepted on any transport (a line on stdio, a POST body):
 * room for a call carrying base64 of a whole 3 MiB file (MCP_CONTENT_MAX:
 * 4 MiB of text) and its JSON around it. */
#define MCP_MESSAGE_MAX (5 * 1024 * 1024)
/* Default of mcp_config.wait_ms: clients drop a call after about 60 s. */
#define MCP_DEFAULT_WAIT_MS 45000
/* Default TTL of a box made by sandbox_create, and the longest one asked. */
#define MCP_DEFAULT_BOX_TTL_MS (30 * 60 * 1000)
#define MCP_MAX_BOX_TTL_MS (24 * 60 * 60 * 1000)

/* JSON-RPC and MCP error codes. */
#define MCP_PARSE_ERROR (-32700)
#define MCP_INVALID_REQUEST (-32600)
#define MCP_METHOD_NOT_FOUND (-32601)
#define MCP_INVALID_PARAMS (-32602)
#define MCP_INTERNAL_ERROR (-32603)
#define MCP_HEADER_MISMATCH (-32020)
#define MCP_MISSING_CAPABILITY (-32021)
#define MCP_UNSUPPORTED_VERSION (-32022)

/* ---- tools ---------------------------------------------------------------- */

/* STRMAP: a JSON object whose values are strings; STRLIST: a JSON array of
 * strings; OBJECT: any JSON object (max_len bounds its compact text), for
 * structures the core parses itself (an egress policy). */
enum mcp_ptype { MCP_P_STRING, MCP_P_INT, MCP_P_NUMBER, MCP_P_BOOL, MCP_P_STRMAP, MCP_P_STRLIST,
                 MCP_P_OBJECT };

/* One argument of a tool: the input schema is generated from these, and
 * arguments are checked against them before the tool runs (a mismatch is
 * an isError result the model can act on). */
struct mcp_param {
  const char *name;
  enum mcp_ptype type;
  bool required;
  const char *description;
  const char *const *choices; /* strings: NULL-terminated allowed values, or NULL */
  /* numbers: their range (both 0: unbounded); strmap, strlist: `max` is
   * the most entries (0: unbounded) */
  double min, max;
  /* strings: bytes; strmap: total bytes of keys and values; strlist: bytes
   * of each item (0: none) -- a list's total is then bounded by both */
  size_t max_len;
};

struct mcp_tool {
  const char *name;
  const char *title;
  const char *description;
  const struct mcp_param *params; /* terminated by {NULL} */
  const char *output_schema;      /* JSON object text */
  bool read_only, destructive, idempotent;
  /* Fill the call's result (mcp_result_* below).  Returns 0; -1 only for
   * a protocol-level failure (internal error). */
  int (*run)(struct mcp_call *c);
  /* What a caller with scopes (an OAuth access token, docs/oauth.md)
   * needs to call it: AUTH_SCOPE_* bits, all of them; scope_of (may be
   * NULL) decides by the arguments instead (list or change). */
  unsigned scope;
  unsigned (*scope_of)(json_t *args);
};

/* scope_of of tools with an `action`: "list" reads (sandbox:read), any
 * other changes (sandbox). */
unsigned mcp_scope_by_action(json_t *args);

/* The storage plane's hook (NULL in mcp_config while there is none).  With
 * it, run_code's output files that are not inlined, and whole outputs too
 * long to inline, are published and returned as resource_link blocks (and
 * the URL in the text); its tools (store_file, get_link, list_objects,
 * load_file) are listed after husk's own and dispatched by name. */
struct mcp_storage {
  void *ctx;
  /* Publish `size` bytes readable from `fd` (at offset 0) for `tenant`
   * under `name`; *url (malloc'd) is an expiring link, *expires_ms its end.
   * `name` unique (a job's output): the object is outputs/<name>, replaced
   * by the next publish of that name (one object, counted once in the
   * quota); else a new object each time.  The object and its link record
   * `created_by` (the job's creator, mcp_created_by's forms; "" nobody). */
  int (*publish)(void *ctx, const char *tenant, const char *created_by, const char *name,
                 bool unique, const char *mime_type, int fd, uint64_t size, char **url,
                 int64_t *expires_ms, struct husk_err *err);
  const struct mcp_tool *tools;
  size_t ntools;
};

/* Preview URLs of box ports, where the server serves them (husk serve's
 * HTTP listener; NULL in mcp_config: none, and expose_port is not
 * listed).  `base` may be filled after the server is made, once the
 * listener's address is known, but before the first call. */
struct mcp_previews {
  char base[600];                    /* of the path form: "scheme://host[:port]" */
  struct husk_preview_domain domain; /* of the host form; name "" for none */
};

struct mcp_config {
  /* The core, opened on first use (cheap start: a client probing the
   * server with tools/list never opens it).  NULL result: err says why. */
  struct husk_mgr *(*mgr)(void *ctx, struct husk_err *err);
  void *mgr_ctx;
  uint64_t wait_ms;        /* longest a call waits before answering with a job (0: default) */
  uint64_t box_ttl_ms;     /* TTL of sandbox_create boxes (0: default) */
  const struct mcp_storage *storage; /* NULL: no storage plane */
  const struct mcp_previews *previews; /* NULL: no preview URLs */
  /* Served as MCP prompts: a directory of Markdown files (NULL: none). */
  const char *prompts_dir;
  /* Served read-only as husk://docs/ resources (NULL: none). */
  const char *resources_dir;
  void (*log)(void *ctx, const char *line);
  void *log_ctx;
};

/* Prompt files that cannot be used are reported through cfg->log and
 * left out; a directory that cannot be read fails the start. */
int mcp_server_new(struct mcp_server **out, const struct mcp_config *cfg, struct husk_err *err);
void mcp_server_free(struct mcp_server *s);
/* The transport of `notify_ctx` is going away: no notification reaches
 * it after this returns true (its resource subscriptions end).  false: a
 * notification to it is stuck in a write (a client that stopped reading)
 * and may still use it: the transport must not be freed. */
bool mcp_caller_gone(struct mcp_server *s, const struct mcp_caller *c);

/* ---- messages ---------------------------------------------------------------- */

enum mcp_kind { MCP_REQUEST, MCP_NOTIFICATION, MCP_RESPONSE };
enum mcp_era { MCP_ERA_LEGACY, MCP_ERA_MODERN };

/* A parsed, classified message.  The strings point into `root`. */
struct mcp_msg {
  json_t *root;
  enum mcp_kind kind;
  enum mcp_era era;
  const char *method;  /* requests and notifications */
  json_t *id;          /* requests: string or integer */
  const char *version; /* modern: _meta protocolVersion */
  const char *name;    /* tools/call, prompts/get: params.name; resources/read: params.uri */
  bool has_progress;   /* _meta.progressToken present */
};

/* Parse one message.  0 and *out filled; or -1 and *error_reply set to the
 * JSON-RPC error to send (parse error, batch, invalid request). */
int mcp_parse(const char *text, size_t len, struct mcp_msg *out, json_t **error_reply);
void mcp_msg_free(struct mcp_msg *m);

/* Who calls, and how to reach them while a call runs. */
struct mcp_caller {
  const char *tenant; /* tenant id: every box and job is looked up as this tenant's */
  const char *scope;  /* who may cancel whose calls (NULL: the tenant) */
  const char *key_id; /* API key id for the audit ("" if none) */
  /* Deliver a notification (progress) before the reply; steals `msg`.
   * NULL: the transport cannot (a JSON reply): they are dropped. */
  void (*notify)(void *ctx, json_t *msg);
  void *notify_ctx;
  /* notify works after the reply too, until the transport ends and calls
   * `gone` (stdio): the legacy era's resources/subscribe is served. */
  bool lasting;
  bool (*gone)(void *ctx, const struct mcp_caller *c);
  void *gone_ctx;
  /* Readable when the caller is gone (client hung up, server stopping);
   * -1 for none.  Then no reply is sent; `gone_cancels` says whether the
   * running command is killed too (modern HTTP: closing the stream is the
   * cancellation) or keeps running as a job. */
  int cancel_fd;
  bool gone_cancels;
  /* After every tools/call: one audit record (tool name, box, outcome). */
  void (*audit)(void *ctx, const char *tool, const char *box_id, const char *detail, bool ok);
  void *audit_ctx;
  /* What the caller may do (AUTH_SCOPE_* bits of src/auth/auth.h): ~0u
   * for a key and on stdio; an access token's scopes over HTTP.  A
   * tools/call or resources/read needing more is refused (the HTTP front
   * answers 403 before dispatch: mcp_scope_needed). */
  unsigned scopes;
  /* The person and OAuth client behind a token ("" or NULL: none): who
   * creates boxes, for their records. */
  const char *user_id;
  const char *user_name;
  const char *client_id;
  const char *client_name;
};

/* Who the caller is in the records of what it creates (state.h's
 * STATE_CREATED_BY_SIZE; `size` at least that): its user id, else "key:"
 * and its key id, else "" (stdio). */
void mcp_created_by(const struct mcp_caller *c, char *out, size_t size);

/* Handle one message.  Returns the reply to send, or NULL when there is
 * none (notifications, responses, a cancelled request). */
json_t *mcp_handle(struct mcp_server *s, const struct mcp_msg *msg, const struct mcp_caller *c);

/* The scopes a message needs (AUTH_SCOPE_* bits; 0: none): a tools/call
 * its tool's, a resources/read those of its URI (objects: storage:read,
 * a sandbox's files: sandbox:read). */
unsigned mcp_scope_needed(struct mcp_server *s, const struct mcp_msg *msg);

/* Whether tools/call would find a tool of that name (a transport answers
 * an unknown tool's error at once, without opening a stream). */
bool mcp_tool_known(struct mcp_server *s, const char *name);

/* A JSON-RPC error reply (id may be NULL: null), with `data` (may be
 * NULL) as its error's data; `data` is taken over, whatever happens. */
json_t *mcp_error(json_t *id, int code, const char *message, json_t *data);
/* The error code of a reply, 0 for a result. */
int mcp_reply_code(json_t *reply);
/* One message as compact JSON text (no newline): malloc'd. */
char *mcp_dump(json_t *msg);

/* ---- for tool implementations (tools_*.c and the storage plane) ------------- */

struct mcp_call {
  struct mcp_server *srv;
  const struct mcp_caller *caller;
  const struct mcp_tool *tool;
  json_t *args;     /* checked against the tool's params */
  json_t *progress_token; /* NULL: none */
  int cancel_fd;    /* readable: the request was cancelled or the caller left */
  /* The result being built. */
  json_t *content;    /* array of content blocks */
  json_t *structured; /* object, or NULL */
  bool is_error;
  bool suppressed;    /* cancelled: no reply */
  char audit_box[48];
  char audit_detail[128];
  uint64_t progress_last;
};

struct husk_mgr *mcp_call_mgr(struct mcp_call *c);
uint64_t mcp_wait_ms(const struct mcp_server *s);
uint64_t mcp_box_ttl_ms(const struct mcp_server *s);
const struct mcp_storage *mcp_storage(const struct mcp_server *s);
const struct mcp_previews *mcp_previews(const struct mcp_server *s);
void mcp_log(struct mcp_server *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The result is `structured` (stolen): JSON text as the first block and the
 * same object as structuredContent.  Extra blocks may follow. */
void mcp_result(struct mcp_call *c, json_t *structured, bool is_error);
/* A tool error the model can act on: isError and the message as text
 * (no structuredContent: it would have to match the output schema). */
int mcp_tool_error(struct mcp_call *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The message of the error result just made (mcp_tool_error and the
 * helpers over it), taken back (malloc'd; NULL: out of memory): the
 * call's result is empty again.  For the outcome of one item of a call
 * that does several, worded as a whole call's error would be. */
char *mcp_take_error(struct mcp_call *c);
/* A core error, worded for the model (unknown/expired box, quota...). */
int mcp_tool_core_error(struct mcp_call *c, const char *what, const char *id,
                        const struct husk_err *err);
void mcp_add_block(struct mcp_call *c, json_t *block);
/* notifications/progress when the caller asked for it (progressToken);
 * `progress` must grow from call to call (smaller values are skipped). */
void mcp_progress(struct mcp_call *c, uint64_t progress, const char *message);

/* Argument getters (the arguments are already checked: these only fetch). */
const char *mcp_arg_str(struct mcp_call *c, const char *name);
bool mcp_arg_int(struct mcp_call *c, const char *name, int64_t *out);
bool mcp_arg_num(struct mcp_call *c, const char *name, double *out);
json_t *mcp_arg(struct mcp_call *c, const char *name);

/* ---- stdio transport (stdio.c) -------------------------------------------------- */

/* What to do with one message read from stdin: mcp_handle for the local
 * server, or forwarding to `husk serve` (src/cli/mcp_remote.c). */
typedef json_t *(*mcp_stdio_handler)(void *ctx, const struct mcp_msg *msg,
                                     const struct mcp_caller *c);

/* Serve stdio: read one JSON message per line from `in_fd`, write replies
 * and notifications as compact JSON lines to `out_fd` (nothing else is
 * ever written there).  Requests run in threads of their own, so a
 * notifications/cancelled can reach a call in flight.  Returns at EOF of
 * `in_fd`, after telling the calls in flight to stop waiting: 0, or 1 when
 * some are still running after a few seconds (the caller must then exit
 * without releasing what they use), -1 on a read error. */
int mcp_stdio_serve(int in_fd, int out_fd, mcp_stdio_handler h, void *hctx,
                    const struct mcp_caller *caller, struct husk_err *err);

#endif
