/* fetch_url: a URL into a file of a sandbox, through the sandbox's own
 * egress policy (husk/fetch.h), so that "get the export from this link"
 * works without the model holding the bytes. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "husk/fetch.h"
#include "mcp/internal.h"

static const struct mcp_param fetch_params[] = {
    {"sandbox_id", MCP_P_STRING, true,
     "the id of a sandbox with network egress (its egress policy decides what it may reach)",
     NULL, 0, 0, 64},
    {"url", MCP_P_STRING, true, "http:// or https:// URL to fetch (no user:password@)", NULL, 0, 0,
     HUSK_FETCH_URL_MAX},
    {"path", MCP_P_STRING, true,
     "where the body goes in the sandbox (relative to /workspace, or under /workspace, /tmp); "
     "missing directories are made, an existing file is replaced",
     NULL, 0, 0, 4096},
    {"headers", MCP_P_STRMAP, false,
     "extra request headers, name to value; ${NAME} in a value stands for the sandbox's secret "
     "binding with env name NAME (the secret is added by the egress proxy, for the hosts it is "
     "bound to; you never see it)",
     NULL, 0, 0, 16384},
    {"max_bytes", MCP_P_INT, false, "largest body accepted: default 104857600 (100 MiB), at most "
                                    "1073741824; a larger one fails and leaves no file",
     NULL, 1, (double)HUSK_FETCH_MAX_BYTES_MAX, 0},
    {"timeout_seconds", MCP_P_INT, false,
     "time for the whole fetch, redirects included: default 60, at most this server's wait for a "
     "call (about 45 s by default); a fetch past it fails and leaves no file",
     NULL, 1, (double)(HUSK_FETCH_TIMEOUT_MS_MAX / 1000), 0},
    {NULL, 0, false, NULL, NULL, 0, 0, 0},
};

static int fetch_url(struct mcp_call *c) {
  const char *id = mcp_arg_str(c, "sandbox_id");
  const char *url = mcp_arg_str(c, "url");
  const char *path = mcp_arg_str(c, "path");
  json_t *hmap = mcp_arg(c, "headers");
  int64_t max_bytes = 0, timeout_s = 0;
  mcp_arg_int(c, "max_bytes", &max_bytes);
  mcp_arg_int(c, "timeout_seconds", &timeout_s);
  snprintf(c->audit_box, sizeof c->audit_box, "%.40s", id);
  /* The URL's host only: its path or query may carry tokens. */
  snprintf(c->audit_detail, sizeof c->audit_detail, "fetch_url");
  struct husk_mgr *m = mcp_call_mgr(c);
  if (!m)
    return 0;
  /* A call answers within the server's wait: the fetch is bounded by it. */
  uint64_t wait = mcp_wait_ms(c->srv);
  uint64_t timeout_ms = timeout_s > 0 ? (uint64_t)timeout_s * 1000 : HUSK_FETCH_TIMEOUT_MS_DEFAULT;
  if (wait && timeout_ms > wait)
    timeout_ms = wait;
  size_t nh = json_is_object(hmap) ? json_object_size(hmap) : 0;
  if (nh > HUSK_FETCH_MAX_HEADERS)
    return mcp_tool_error(c, "at most %d headers", HUSK_FETCH_MAX_HEADERS);
  char *hv[HUSK_FETCH_MAX_HEADERS + 1] = {0};
  size_t k = 0;
  const char *name;
  json_t *v;
  int rc = 0;
  if (nh)
    json_object_foreach(hmap, name, v) {
      if (k >= HUSK_FETCH_MAX_HEADERS)
        break;
      const char *val = json_string_value(v);
      if (!val || strchr(name, ':') || asprintf(&hv[k], "%s: %s", name, val) < 0) {
        hv[k] = NULL;
        rc = mcp_tool_error(c, "header `%.64s`: a name without ':' and a string value", name);
        goto out;
      }
      k++;
    }
  struct husk_fetch_spec spec = {.url = url, .path = path, .headers = (const char *const *)hv,
                                 .max_bytes = (uint64_t)max_bytes, .timeout_ms = timeout_ms,
                                 .cancel_fd = c->cancel_fd};
  struct husk_fetch_result r;
  struct husk_err err;
  if (husk_box_fetch(m, c->caller->tenant, id, &spec, &r, &err) < 0) {
    snprintf(c->audit_detail, sizeof c->audit_detail, "fetch_url failed code=%d", err.code);
    switch (err.code) {
    case ENETUNREACH:
    case EFBIG:
    case ETIMEDOUT:
    case EPROTO:
    case EAGAIN:
      rc = mcp_tool_error(c, "%s", err.msg);
      break;
    case ECANCELED:
      rc = mcp_tool_error(c, "the fetch was cancelled: nothing was kept");
      break;
    default:
      rc = mcp_tool_core_error(c, "sandbox", id, &err);
    }
    goto out;
  }
  snprintf(c->audit_detail, sizeof c->audit_detail, "fetch_url status=%ld bytes=%llu", r.status,
           (unsigned long long)r.size);
  json_t *o = json_pack("{s:s, s:s, s:I, s:i, s:s, s:s, s:s, s:i}", "sandbox_id", id, "path", path,
                        "size", (json_int_t)r.size, "status", (int)r.status, "content_type",
                        r.content_type, "final_url", r.final_url ? r.final_url : url, "sha256",
                        r.sha256, "redirects", (int)r.redirects);
  husk_fetch_result_free(&r);
  mcp_result(c, o, false);
out:
  for (size_t i = 0; i < k; i++)
    free(hv[i]);
  return rc;
}

const struct mcp_tool mcp_tool_fetch_url = {
    "fetch_url",
    "Download a URL into a sandbox",
    "Fetch an http(s) URL into a file of a sandbox, without the bytes passing through you: "
    "use it for 'get the export from this link', then work on the file with sandbox_exec. The "
    "request goes out exactly as the sandbox's own traffic does, through its egress policy: only "
    "hosts the policy allows are reached (redirects too, each hop checked), and secrets bound to "
    "the sandbox are added by the proxy (reference one in a header value as ${NAME}). A sandbox "
    "without network egress cannot fetch: it must be created with network egress and a policy "
    "allowing the host (HTTP API, or a template that has one). Limits: max_bytes (default "
    "100 MiB) and timeout_seconds (default 60, at most the call's wait); on any failure no file "
    "is left. Returns the path, size, HTTP status, content_type, final_url and sha256.",
    fetch_params,
    "{\"type\":\"object\",\"properties\":{\"sandbox_id\":{\"type\":\"string\"},\"path\":{"
    "\"type\":\"string\"},\"size\":{\"type\":\"integer\"},\"status\":{\"type\":\"integer\"},"
    "\"content_type\":{\"type\":\"string\"},\"final_url\":{\"type\":\"string\"},\"sha256\":{"
    "\"type\":\"string\"},\"redirects\":{\"type\":\"integer\"}},\"required\":[\"path\",\"size\","
    "\"status\",\"sha256\"]}",
    false,
    false,
    false,
    fetch_url,
    .scope = AUTH_SCOPE_SANDBOX,
};
