/* JSON-RPC and MCP lifecycle: parse and classify a message by its body,
 * answer it by era, run tools/call, and find calls in flight for
 * notifications/cancelled.  Transport-free: stdio.c and src/api/routes_mcp.c
 * move the bytes. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "husk/husk.h"
#include "mcp/internal.h"
#include "util/cleanup.h"
#include "util/cleanup_json.h"

#define META_VERSION "io.modelcontextprotocol/protocolVersion"
#define META_CAPS "io.modelcontextprotocol/clientCapabilities"
#define META_SERVER_INFO "io.modelcontextprotocol/serverInfo"
/* How long clients may cache list results (modern era). */
#define MCP_LIST_TTL_MS 3600000
/* And of a resource listing (the tenant's objects change). */
#define MCP_RESOURCES_TTL_MS 10000

static const struct mcp_tool *const own_tools[] = {
    &mcp_tool_run_code,           &mcp_tool_sandbox_create,    &mcp_tool_sandbox_exec,
    &mcp_tool_sandbox_write_file, &mcp_tool_sandbox_read_file, &mcp_tool_sandbox_list_files,
    &mcp_tool_sandbox_destroy,    &mcp_tool_sandbox_list,      &mcp_tool_sandbox_pause,
    &mcp_tool_sandbox_resume,     &mcp_tool_sandbox_snapshot,  &mcp_tool_sandbox_snapshots,
    &mcp_tool_job_status,         &mcp_tool_job_wait,          &mcp_tool_job_cancel,
    &mcp_tool_template_list,      &mcp_tool_contexts,          &mcp_tool_fetch_url,
};
#define N_OWN_TOOLS (sizeof own_tools / sizeof own_tools[0])

static const char instructions_fmt[] =
    "husk gives you disposable Linux computers (sandboxes) to run code in. Use run_code for a "
    "one-shot script (Python with numpy and matplotlib, bash, node where installed): it runs in a "
    "fresh sandbox that is destroyed afterwards, and files written to /workspace/output come back "
    "(images inline). For multi-step work, sandbox_create a box and pass its sandbox_id to "
    "sandbox_exec / sandbox_write_file / sandbox_read_file / sandbox_list_files; it expires by "
    "itself after its TTL. For a stateful, notebook-like session pass that sandbox_id to "
    "run_code: variables, imports and figures stay between calls (the contexts tool manages "
    "these interpreters). Between turns, sandbox_pause freezes a sandbox as it is (sandbox_resume "
    "goes on); sandbox_snapshot saves its files as a restore point or to fork several "
    "sandboxes from (sandbox_create with snapshot). Sandboxes have no credentials and no network "
    "access unless created with an egress policy; then fetch_url brings a file from a URL into "
    "one through that policy, without the bytes passing through you. A call that runs "
    "longer than about %llu seconds returns a job_id: finish it with job_wait, or stop it with "
    "job_cancel.";

int mcp_server_new(struct mcp_server **out, const struct mcp_config *cfg, struct husk_err *err) {
  struct mcp_server *s = calloc(1, sizeof *s);
  if (!s)
    return husk_error(err, ENOMEM, "mcp server");
  s->cfg = *cfg;
  if (!s->cfg.wait_ms)
    s->cfg.wait_ms = MCP_DEFAULT_WAIT_MS;
  if (!s->cfg.box_ttl_ms)
    s->cfg.box_ttl_ms = MCP_DEFAULT_BOX_TTL_MS;
  pthread_mutex_init(&s->lock, NULL);
  pthread_mutex_init(&s->sub_lock, NULL);
  pthread_mutex_init(&s->docs_lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&s->sub_cond, &ca);
  pthread_condattr_destroy(&ca);
  s->docs_fd = -1;
  if ((cfg->prompts_dir &&
       mcp_prompts_load(cfg->prompts_dir, cfg->log, cfg->log_ctx, &s->prompts, err) < 0) ||
      (cfg->resources_dir && mcp_docs_open(cfg->resources_dir, &s->docs_fd, err) < 0)) {
    mcp_server_free(s);
    return -1;
  }
  *out = s;
  return 0;
}

void mcp_server_free(struct mcp_server *s) {
  if (!s)
    return;
  mcp_resources_stop(s);
  mcp_prompts_free(s->prompts);
  close_quiet(s->docs_fd);
  pthread_mutex_destroy(&s->lock);
  pthread_mutex_destroy(&s->sub_lock);
  pthread_mutex_destroy(&s->docs_lock);
  pthread_cond_destroy(&s->sub_cond);
  free(s);
}

bool mcp_caller_gone(struct mcp_server *s, const struct mcp_caller *c) {
  return mcp_resource_unsubscribe(s, c, NULL);
}

uint64_t mcp_wait_ms(const struct mcp_server *s) { return s->cfg.wait_ms; }
uint64_t mcp_box_ttl_ms(const struct mcp_server *s) { return s->cfg.box_ttl_ms; }
const struct mcp_storage *mcp_storage(const struct mcp_server *s) { return s->cfg.storage; }
const struct mcp_previews *mcp_previews(const struct mcp_server *s) { return s->cfg.previews; }

void mcp_log(struct mcp_server *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  husk_vlog(s->cfg.log, s->cfg.log_ctx, fmt, ap);
  va_end(ap);
}

struct husk_mgr *mcp_call_mgr(struct mcp_call *c) {
  struct husk_err err = {0};
  struct husk_mgr *m = c->srv->cfg.mgr ? c->srv->cfg.mgr(c->srv->cfg.mgr_ctx, &err) : NULL;
  if (!m)
    mcp_tool_error(c, "the sandbox service is not available: %s",
                   err.msg[0] ? err.msg : "no box manager");
  return m;
}

char *mcp_dump(json_t *msg) {
  /* Compact, one line (JSON escapes newlines inside strings). */
  return json_dumps(msg, JSON_COMPACT | JSON_ENCODE_ANY);
}

json_t *mcp_error(json_t *id, int code, const char *message, json_t *data_in) {
  cleanup_json json_t *data = data_in;
  /* A message cut to fit a buffer may end inside a character: it is
   * still sent (U+FFFD in its place), so that every request gets its
   * answer. */
  json_t *e = json_pack("{s:i, s:o*}", "code", code, "message",
                        mcp_text(message, strlen(message), NULL));
  if (e && !json_object_get(e, "message"))
    json_object_set_new(e, "message", json_string("Error"));
  if (e && data)
    json_object_set_new(e, "data", steal_pointer(&data));
  return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "error", e);
}

int mcp_reply_code(json_t *reply) {
  json_t *e = json_object_get(reply, "error");
  return e ? (int)json_integer_value(json_object_get(e, "code")) : 0;
}

/* ---- parse and classify ------------------------------------------------------ */

void mcp_msg_free(struct mcp_msg *m) {
  if (m && m->root) {
    json_decref(m->root);
    m->root = NULL;
  }
}

int mcp_parse(const char *text, size_t len, struct mcp_msg *out, json_t **error_reply) {
  memset(out, 0, sizeof *out);
  *error_reply = NULL;
  json_error_t je;
  /* REJECT_DUPLICATES: {"id":1,"id":2} has no one meaning. */
  cleanup_json json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
  if (!root) {
    /* The position, not jansson's quote of the input near it (which could
     * carry whatever the message held). */
    char detail[sizeof je.text];
    snprintf(detail, sizeof detail, "%s", je.text);
    char *near = strstr(detail, " near ");
    if (near)
      *near = '\0';
    *error_reply = mcp_error(NULL, MCP_PARSE_ERROR, "Parse error: the message is not valid JSON",
                             json_pack("{s:s, s:i, s:i}", "detail", detail, "line", je.line,
                                       "column", je.column));
    return -1;
  }
  if (json_is_array(root)) {
    *error_reply = mcp_error(NULL, MCP_INVALID_REQUEST,
                             "Invalid Request: JSON-RPC batches are not supported (send one "
                             "message at a time)", NULL);
    return -1;
  }
  json_t *id = json_object_get(root, "id");
  bool id_ok = id && (json_is_string(id) || json_is_integer(id));
  json_t *jr = json_object_get(root, "jsonrpc");
  json_t *method = json_object_get(root, "method");
  json_t *params = json_object_get(root, "params");
  const char *why = NULL;
  if (!json_is_object(root))
    why = "a message must be a JSON object";
  else if (!json_is_string(jr) || strcmp(json_string_value(jr), "2.0") != 0)
    why = "`jsonrpc` must be \"2.0\"";
  else if (method && !json_is_string(method))
    why = "`method` must be a string";
  else if (id && !id_ok)
    why = "`id` must be a string or an integer";
  else if (params && !json_is_object(params))
    why = "`params` must be an object";
  else if (!method && !(id_ok && (json_object_get(root, "result") || json_object_get(root, "error"))))
    why = "a message needs a `method` (request, notification) or a `result`/`error` (response)";
  if (why) {
    char m[160];
    snprintf(m, sizeof m, "Invalid Request: %s", why);
    *error_reply = mcp_error(id_ok ? id : NULL, MCP_INVALID_REQUEST, m, NULL);
    return -1;
  }
  out->root = steal_pointer(&root);
  if (!method) {
    out->kind = MCP_RESPONSE;
    return 0;
  }
  out->kind = id ? MCP_REQUEST : MCP_NOTIFICATION;
  out->id = id;
  out->method = json_string_value(method);
  json_t *meta = json_object_get(params, "_meta");
  json_t *ver = json_object_get(meta, META_VERSION);
  if (ver) {
    out->era = MCP_ERA_MODERN;
    out->version = json_is_string(ver) ? json_string_value(ver) : "";
  }
  json_t *tok = json_object_get(meta, "progressToken");
  /* A progress token is a string or an integer; anything else is no token. */
  out->has_progress = json_is_string(tok) || json_is_integer(tok);
  json_t *name = json_object_get(params, !strncmp(out->method, "resources/", 10) ? "uri" : "name");
  if (json_is_string(name))
    out->name = json_string_value(name);
  return 0;
}

/* ---- in-flight registry (notifications/cancelled) ----------------------------- */

static struct mcp_inflight *inflight_add(struct mcp_server *s, const char *scope, json_t *id) {
  struct mcp_inflight *f = calloc(1, sizeof *f);
  if (!f)
    return NULL;
  f->scope = strdup(scope ? scope : "");
  f->id = mcp_dump(id);
  f->event_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (!f->scope || !f->id || f->event_fd < 0) {
    free(f->scope);
    free(f->id);
    close_quiet(f->event_fd);
    free(f);
    return NULL;
  }
  pthread_mutex_lock(&s->lock);
  f->next = s->inflight;
  s->inflight = f;
  pthread_mutex_unlock(&s->lock);
  return f;
}

static void inflight_remove(struct mcp_server *s, struct mcp_inflight *f) {
  pthread_mutex_lock(&s->lock);
  for (struct mcp_inflight **p = &s->inflight; *p; p = &(*p)->next)
    if (*p == f) {
      *p = f->next;
      break;
    }
  pthread_mutex_unlock(&s->lock);
  free(f->scope);
  free(f->id);
  close_quiet(f->event_fd);
  free(f);
}

static void inflight_cancel(struct mcp_server *s, const char *scope, json_t *id) {
  cleanup_free char *key = mcp_dump(id);
  if (!key)
    return;
  pthread_mutex_lock(&s->lock);
  for (struct mcp_inflight *f = s->inflight; f; f = f->next)
    if (!strcmp(f->id, key) && !strcmp(f->scope, scope ? scope : "")) {
      f->cancelled = true;
      uint64_t one = 1;
      if (write(f->event_fd, &one, sizeof one) < 0) {
        /* an eventfd write fails only on overflow: already signalled */
      }
    }
  pthread_mutex_unlock(&s->lock);
}

static bool inflight_cancelled(struct mcp_server *s, struct mcp_inflight *f) {
  pthread_mutex_lock(&s->lock);
  bool c = f->cancelled;
  pthread_mutex_unlock(&s->lock);
  return c;
}

/* ---- results ------------------------------------------------------------------- */

static json_t *server_info(void) {
  return json_pack("{s:s, s:s, s:s}", "name", "husk", "title", "husk sandboxes", "version",
                   HUSK_VERSION);
}

/* What this server does, as the era and the transport allow: the tool,
 * resource and prompt lists are static (no listChanged); resources are
 * subscribed to only in the legacy era (the modern one has no
 * resources/subscribe) on a transport that can notify after a reply.
 * Prompts are served (an empty list without --prompts), so declared. */
static json_t *capabilities(const struct mcp_server *s, const struct mcp_msg *msg,
                            const struct mcp_caller *c) {
  (void)s;
  json_t *caps = json_pack("{s:{}, s:{}, s:{}}", "tools", "resources", "prompts");
  if (caps && msg->era == MCP_ERA_LEGACY && c->lasting)
    json_object_set_new(json_object_get(caps, "resources"), "subscribe", json_true());
  return caps;
}

/* Wrap `result` (stolen) as the reply to `msg`. */
static json_t *reply(const struct mcp_msg *msg, json_t *result) {
  if (!result)
    return mcp_error(msg->id, MCP_INTERNAL_ERROR, "Internal error: out of memory", NULL);
  if (msg->era == MCP_ERA_MODERN) {
    json_object_set_new(result, "resultType", json_string("complete"));
    json_t *meta = json_object_get(result, "_meta");
    if (!meta) {
      meta = json_object();
      json_object_set_new(result, "_meta", meta);
    }
    json_object_set_new(meta, META_SERVER_INFO, server_info());
  }
  return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", msg->id, "result", result);
}

/* A list (or read) result: in the modern era with how long, and for whom,
 * it may be cached. */
static json_t *cached_result(const struct mcp_msg *msg, json_t *r, int64_t ttl_ms, bool private) {
  if (r && msg->era == MCP_ERA_MODERN) {
    json_object_set_new(r, "ttlMs", json_integer(ttl_ms));
    json_object_set_new(r, "cacheScope", json_string(private ? "private" : "public"));
  }
  return reply(msg, r);
}

static json_t *list_result(const struct mcp_msg *msg, const char *key, json_t *items) {
  return cached_result(msg, json_pack("{s:o}", key, items), MCP_LIST_TTL_MS, false);
}

static json_t *tool_json(const struct mcp_tool *t) {
  json_error_t je;
  cleanup_json json_t *out = t->output_schema ? json_loads(t->output_schema, 0, &je) : NULL;
  json_t *j = json_pack("{s:s, s:s, s:s, s:o, s:{s:s, s:b, s:b, s:b, s:b}}", "name", t->name,
                        "title", t->title, "description", t->description, "inputSchema",
                        mcp_input_schema(t), "annotations", "title", t->title, "readOnlyHint",
                        t->read_only, "destructiveHint", t->destructive, "idempotentHint",
                        t->idempotent, "openWorldHint", 0);
  if (j && out)
    json_object_set_new(j, "outputSchema", steal_pointer(&out));
  return j;
}

static const struct mcp_tool *find_tool(struct mcp_server *s, const char *name) {
  for (size_t i = 0; i < N_OWN_TOOLS; i++)
    if (!strcmp(own_tools[i]->name, name))
      return own_tools[i];
  if (s->cfg.previews && !strcmp(mcp_tool_expose_port.name, name))
    return &mcp_tool_expose_port;
  const struct mcp_storage *st = s->cfg.storage;
  for (size_t i = 0; st && i < st->ntools; i++)
    if (!strcmp(st->tools[i].name, name))
      return &st->tools[i];
  return NULL;
}

unsigned mcp_scope_by_action(json_t *args) {
  json_t *a = json_object_get(args, "action");
  return json_is_string(a) && !strcmp(json_string_value(a), "list") ? AUTH_SCOPE_SANDBOX_READ
                                                                    : AUTH_SCOPE_SANDBOX;
}

static unsigned tool_scope(const struct mcp_tool *t, json_t *args) {
  return t->scope_of ? t->scope_of(args) : t->scope;
}

unsigned mcp_scope_needed(struct mcp_server *s, const struct mcp_msg *msg) {
  if (msg->kind != MCP_REQUEST || !msg->method)
    return 0;
  if (!strcmp(msg->method, "tools/call")) {
    const struct mcp_tool *t = msg->name ? find_tool(s, msg->name) : NULL;
    json_t *args = json_object_get(json_object_get(msg->root, "params"), "arguments");
    return t ? tool_scope(t, args) : 0;
  }
  if (!strcmp(msg->method, "resources/read") && msg->name) {
    if (!strncmp(msg->name, "husk://store/", 13))
      return AUTH_SCOPE_STORAGE_READ;
    if (!strncmp(msg->name, "husk://sandbox/", 15))
      return AUTH_SCOPE_SANDBOX_READ;
  }
  return 0;
}

bool mcp_tool_known(struct mcp_server *s, const char *name) {
  return name && find_tool(s, name) != NULL;
}

static json_t *tools_list(struct mcp_server *s, const struct mcp_msg *msg) {
  json_t *params = json_object_get(msg->root, "params");
  json_t *cursor = json_object_get(params, "cursor");
  if (cursor && !json_is_null(cursor))
    /* One page holds every tool: no cursor is ever handed out. */
    return mcp_error(msg->id, MCP_INVALID_PARAMS, "Invalid params: unknown cursor", NULL);
  json_t *arr = json_array();
  for (size_t i = 0; i < N_OWN_TOOLS; i++)
    json_array_append_new(arr, tool_json(own_tools[i]));
  const struct mcp_storage *st = s->cfg.storage;
  for (size_t i = 0; st && i < st->ntools; i++)
    json_array_append_new(arr, tool_json(&st->tools[i]));
  if (s->cfg.previews)
    json_array_append_new(arr, tool_json(&mcp_tool_expose_port));
  return list_result(msg, "tools", arr);
}

/* ---- tools/call ------------------------------------------------------------------ */

static json_t *tools_call(struct mcp_server *s, const struct mcp_msg *msg, const struct mcp_caller *c) {
  json_t *params = json_object_get(msg->root, "params");
  json_t *jname = json_object_get(params, "name");
  if (!json_is_string(jname))
    return mcp_error(msg->id, MCP_INVALID_PARAMS, "Invalid params: `name` (the tool) is required",
                     NULL);
  const char *name = json_string_value(jname);
  const struct mcp_tool *t = find_tool(s, name);
  if (!t) {
    char m[200];
    snprintf(m, sizeof m, "Unknown tool: %.100s", name);
    return mcp_error(msg->id, MCP_INVALID_PARAMS, m, json_pack("{s:s}", "tool", name));
  }
  json_t *args = json_object_get(params, "arguments");
  if (args && !json_is_null(args) && !json_is_object(args))
    return mcp_error(msg->id, MCP_INVALID_PARAMS, "Invalid params: `arguments` must be an object",
                     NULL);
  /* The HTTP front refuses this with 403 before it gets here; a transport
   * that does not still gets no further. */
  unsigned need = tool_scope(t, args);
  if ((c->scopes & need) != need)
    return mcp_error(msg->id, MCP_INVALID_REQUEST, "Forbidden: this tool needs another scope",
                     NULL);
  struct mcp_call call = {.srv = s, .caller = c, .tool = t, .content = json_array(),
                          .cancel_fd = -1};
  call.args = json_is_object(args) ? json_incref(args) : json_object();
  call.progress_token = json_object_get(json_object_get(params, "_meta"), "progressToken");
  if (!json_is_string(call.progress_token) && !json_is_integer(call.progress_token))
    call.progress_token = NULL; /* only strings and integers are tokens */
  struct mcp_inflight *f = inflight_add(s, c->scope ? c->scope : c->tenant, msg->id);
  /* One fd for "stop": the cancel notification or the caller leaving. */
  int ep = epoll_create1(EPOLL_CLOEXEC);
  if (ep >= 0 && f) {
    struct epoll_event e = {.events = EPOLLIN};
    epoll_ctl(ep, EPOLL_CTL_ADD, f->event_fd, &e);
    if (c->cancel_fd >= 0)
      epoll_ctl(ep, EPOLL_CTL_ADD, c->cancel_fd, &e);
  }
  call.cancel_fd = ep;
  json_t *out;
  if (!f || ep < 0 || !call.content || !call.args) {
    out = mcp_error(msg->id, MCP_INTERNAL_ERROR, "Internal error: out of resources", NULL);
  } else {
    char *bad = mcp_check_args(t, call.args);
    int rc = 0;
    if (bad) {
      mcp_tool_error(&call, "%s. Fix the arguments and call %s again.", bad, t->name);
      free(bad);
    } else {
      rc = t->run(&call);
    }
    if (c->audit)
      c->audit(c->audit_ctx, t->name, call.audit_box, call.audit_detail, rc == 0 && !call.is_error);
    bool cancelled = inflight_cancelled(s, f);
    struct pollfd gone = {.fd = c->cancel_fd, .events = POLLIN};
    if (!cancelled && c->cancel_fd >= 0 && poll(&gone, 1, 0) > 0)
      cancelled = true;
    if (cancelled || call.suppressed) {
      out = NULL; /* a cancelled request gets no reply */
    } else if (rc < 0) {
      out = mcp_error(msg->id, MCP_INTERNAL_ERROR, "Internal error", NULL);
    } else {
      if (!call.structured && !json_array_size(call.content))
        mcp_result(&call, json_object(), false);
      json_t *r = json_pack("{s:O}", "content", call.content);
      if (r && call.structured)
        json_object_set(r, "structuredContent", call.structured);
      if (r && call.is_error)
        json_object_set_new(r, "isError", json_true());
      out = reply(msg, r);
    }
  }
  if (f)
    inflight_remove(s, f);
  close_quiet(ep);
  json_decref(call.args);
  json_decref(call.content);
  json_decref(call.structured);
  return out;
}

/* ---- dispatch ---------------------------------------------------------------------- */

/* The instructions, with this server's wait (--wait / --mcp-wait). */
static json_t *instructions(const struct mcp_server *s) {
  char text[sizeof instructions_fmt + 32];
  snprintf(text, sizeof text, instructions_fmt,
           (unsigned long long)((s->cfg.wait_ms + 999) / 1000));
  return json_string(text);
}

static json_t *initialize(const struct mcp_server *s, const struct mcp_msg *msg,
                          const struct mcp_caller *c) {
  json_t *params = json_object_get(msg->root, "params");
  json_t *pv = json_object_get(params, "protocolVersion");
  if (!json_is_string(pv))
    return mcp_error(msg->id, MCP_INVALID_PARAMS, "Invalid params: `protocolVersion` is required",
                     NULL);
  /* Echo a supported legacy version, else offer the newest legacy one (the
   * client decides whether to go on).  Never 2026-07-28: that era has no
   * initialize. */
  const char *want = json_string_value(pv);
  const char *v = !strcmp(want, MCP_VERSION_LEGACY_OLD) ? MCP_VERSION_LEGACY_OLD : MCP_VERSION_LEGACY;
  return reply(msg, json_pack("{s:s, s:o, s:o, s:o}", "protocolVersion", v, "capabilities",
                              capabilities(s, msg, c), "serverInfo", server_info(), "instructions",
                              instructions(s)));
}

static json_t *discover(const struct mcp_server *s, const struct mcp_msg *msg,
                        const struct mcp_caller *c) {
  json_t *r = json_pack("{s:[s], s:o, s:o, s:i, s:s, s:{s:o}}", "supportedVersions",
                        MCP_VERSION_MODERN, "capabilities", capabilities(s, msg, c), "instructions",
                        instructions(s), "ttlMs", MCP_LIST_TTL_MS, "cacheScope", "public", "_meta",
                        META_SERVER_INFO, server_info());
  return reply(msg, r);
}

static json_t *unsupported_version(const struct mcp_msg *msg) {
  /* The versions this envelope serves: what server/discover offers (the
   * legacy ones are reached through initialize, not through _meta). */
  return mcp_error(msg->id, MCP_UNSUPPORTED_VERSION, "Unsupported protocol version",
                   json_pack("{s:[s], s:s}", "supported", MCP_VERSION_MODERN, "requested",
                             msg->version ? msg->version : ""));
}

static json_t *method_not_found(const struct mcp_msg *msg) {
  char m[200];
  snprintf(m, sizeof m, "Method not found: %.100s", msg->method);
  return mcp_error(msg->id, MCP_METHOD_NOT_FOUND, m, NULL);
}

/* ---- resources and prompts ---------------------------------------------------- */

/* The error of a resource that is not there: -32002 in the legacy era,
 * Invalid params in the modern one. */
static json_t *resource_not_found(const struct mcp_msg *msg, const char *uri) {
  return mcp_error(msg->id, msg->era == MCP_ERA_MODERN ? MCP_INVALID_PARAMS : -32002,
                   "Resource not found", uri ? json_pack("{s:s}", "uri", uri) : NULL);
}

static json_t *resources_list(struct mcp_server *s, const struct mcp_msg *msg,
                              const struct mcp_caller *c) {
  json_t *cursor = json_object_get(json_object_get(msg->root, "params"), "cursor");
  char why[128];
  cleanup_free char *next = NULL;
  json_t *arr = mcp_resources_list(s, c, cursor, &next, why, sizeof why);
  if (!arr) {
    char m[200];
    snprintf(m, sizeof m, "Invalid params: %s", why);
    return mcp_error(msg->id, MCP_INVALID_PARAMS, m, NULL);
  }
  json_t *r = json_pack("{s:o}", "resources", arr);
  if (r && next)
    json_object_set_new(r, "nextCursor", json_string(next));
  /* The tenant's objects: for this caller only, and soon stale. */
  return cached_result(msg, r, MCP_RESOURCES_TTL_MS, true);
}

static json_t *resources_read(struct mcp_server *s, const struct mcp_msg *msg,
                              const struct mcp_caller *c) {
  if (!msg->name)
    return mcp_error(msg->id, MCP_INVALID_PARAMS, "Invalid params: `uri` (a string) is required",
                     NULL);
  unsigned need = mcp_scope_needed(s, msg);
  if ((c->scopes & need) != need)
    return mcp_error(msg->id, MCP_INVALID_REQUEST, "Forbidden: this resource needs another scope",
                     NULL);
  char why[600];
  bool not_found;
  json_t *r = mcp_resource_read(s, c, msg->name, &not_found, why, sizeof why);
  if (!r && not_found)
    return resource_not_found(msg, msg->name);
  if (!r)
    return mcp_error(msg->id, MCP_INTERNAL_ERROR, why, json_pack("{s:s}", "uri", msg->name));
  return cached_result(msg, r, 0, true);
}

static json_t *resources_subscribe(struct mcp_server *s, const struct mcp_msg *msg,
                                   const struct mcp_caller *c) {
  if (!c->lasting || !c->notify)
    /* Not in the capabilities: over HTTP nothing could carry the
     * notification after the reply. */
    return mcp_error(msg->id, MCP_METHOD_NOT_FOUND,
                     "Method not found: resources/subscribe needs a transport that stays open "
                     "(stdio); read the resource again instead", NULL);
  if (!msg->name)
    return mcp_error(msg->id, MCP_INVALID_PARAMS, "Invalid params: `uri` (a string) is required",
                     NULL);
  if (!strcmp(msg->method, "resources/unsubscribe")) {
    if (!mcp_resource_unsubscribe(s, c, msg->name))
      return mcp_error(msg->id, MCP_INTERNAL_ERROR, "subscriptions are busy: try again", NULL);
    return reply(msg, json_object());
  }
  char why[200];
  if (mcp_resource_subscribe(s, c, msg->name, why, sizeof why) < 0)
    return strcmp(why, "Resource not found") ? mcp_error(msg->id, MCP_INVALID_PARAMS, why, NULL)
                                             : resource_not_found(msg, msg->name);
  return reply(msg, json_object());
}

static json_t *prompts_list(struct mcp_server *s, const struct mcp_msg *msg) {
  json_t *cursor = json_object_get(json_object_get(msg->root, "params"), "cursor");
  if (cursor && !json_is_null(cursor))
    /* One page holds every prompt: no cursor is ever handed out. */
    return mcp_error(msg->id, MCP_INVALID_PARAMS, "Invalid params: unknown cursor", NULL);
  return list_result(msg, "prompts", mcp_prompts_list(s->prompts));
}

static json_t *prompts_get(struct mcp_server *s, const struct mcp_msg *msg) {
  if (!msg->name)
    return mcp_error(msg->id, MCP_INVALID_PARAMS, "Invalid params: `name` (a string) is required",
                     NULL);
  json_t *args = json_object_get(json_object_get(msg->root, "params"), "arguments");
  json_t *r;
  char why[300];
  if (mcp_prompt_get(s->prompts, msg->name, args, &r, why, sizeof why) < 0) {
    char m[340];
    snprintf(m, sizeof m, "Invalid params: %s", why);
    return mcp_error(msg->id, MCP_INVALID_PARAMS, m, NULL);
  }
  return reply(msg, r);
}

json_t *mcp_handle(struct mcp_server *s, const struct mcp_msg *msg, const struct mcp_caller *c) {
  if (msg->kind == MCP_RESPONSE)
    return NULL; /* we never send requests: nothing to match */
  const char *m = msg->method;
  if (msg->kind == MCP_NOTIFICATION) {
    if (!strcmp(m, "notifications/cancelled")) {
      json_t *rid = json_object_get(json_object_get(msg->root, "params"), "requestId");
      if (json_is_string(rid) || json_is_integer(rid))
        inflight_cancel(s, c->scope ? c->scope : c->tenant, rid);
    }
    return NULL; /* notifications never get a reply, not even an error */
  }
  if (msg->era == MCP_ERA_MODERN) {
    if (strcmp(msg->version, MCP_VERSION_MODERN) != 0)
      return unsupported_version(msg);
    json_t *meta = json_object_get(json_object_get(msg->root, "params"), "_meta");
    if (!json_is_object(json_object_get(meta, META_CAPS)))
      return mcp_error(msg->id, MCP_INVALID_PARAMS,
                       "Invalid params: _meta `" META_CAPS "` (an object) is required", NULL);
    if (!strcmp(m, "server/discover"))
      return discover(s, msg, c);
    /* The legacy lifecycle does not exist in this era. */
    if (!strcmp(m, "initialize") || !strcmp(m, "ping") || !strcmp(m, "logging/setLevel") ||
        !strcmp(m, "resources/subscribe") || !strcmp(m, "resources/unsubscribe"))
      return method_not_found(msg);
  } else {
    if (!strcmp(m, "initialize"))
      return initialize(s, msg, c);
    if (!strcmp(m, "ping"))
      return reply(msg, json_object());
    if (!strcmp(m, "server/discover"))
      return mcp_error(msg->id, MCP_INVALID_PARAMS,
                       "Invalid params: server/discover needs _meta `" META_VERSION "` and `" META_CAPS "`",
                       NULL);
  }
  if (!strcmp(m, "tools/list"))
    return tools_list(s, msg);
  if (!strcmp(m, "tools/call"))
    return tools_call(s, msg, c);
  if (!strcmp(m, "resources/list"))
    return resources_list(s, msg, c);
  if (!strcmp(m, "resources/templates/list")) {
    json_t *cursor = json_object_get(json_object_get(msg->root, "params"), "cursor");
    if (cursor && !json_is_null(cursor))
      return mcp_error(msg->id, MCP_INVALID_PARAMS, "Invalid params: unknown cursor", NULL);
    return list_result(msg, "resourceTemplates", mcp_resource_templates(s));
  }
  if (!strcmp(m, "resources/read"))
    return resources_read(s, msg, c);
  if (!strcmp(m, "resources/subscribe") || !strcmp(m, "resources/unsubscribe"))
    return resources_subscribe(s, msg, c);
  if (!strcmp(m, "prompts/list"))
    return prompts_list(s, msg);
  if (!strcmp(m, "prompts/get"))
    return prompts_get(s, msg);
  return method_not_found(msg);
}
