/* expose_port: a preview URL of a sandbox's port, for the person the agent
 * works for (husk/preview.h). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>

#include "mcp/internal.h"

static const char *const access_choices[] = {"public", "password", "key", NULL};

static const struct mcp_param expose_params[] = {
    {"sandbox_id", MCP_P_STRING, true, "the id from sandbox_create", NULL, 0, 0, 64},
    {"port", MCP_P_INT, true,
     "the TCP port a server in the sandbox listens on (on 127.0.0.1, ::1 or 0.0.0.0)", NULL, 1,
     65535, 0},
    {"access", MCP_P_STRING, false,
     "who may open the URL: public (anyone who has the URL; the default), password (the URL "
     "and a password returned once), key (only with the tenant's API key, for programs)",
     access_choices, 0, 0, 0},
    {"expires_in_seconds", MCP_P_INT, false, "how long the URL works: default 3600, at most 604800",
     NULL, 1, 604800, 0},
    {NULL, 0, false, NULL, NULL, 0, 0, 0},
};

static int expose_port(struct mcp_call *c) {
  const struct mcp_previews *pv = mcp_previews(c->srv);
  const char *id = mcp_arg_str(c, "sandbox_id");
  const char *access = mcp_arg_str(c, "access");
  int64_t port = 0, ttl = 0;
  mcp_arg_int(c, "port", &port);
  mcp_arg_int(c, "expires_in_seconds", &ttl);
  snprintf(c->audit_box, sizeof c->audit_box, "%.40s", id);
  snprintf(c->audit_detail, sizeof c->audit_detail, "port=%lld access=%s", (long long)port,
           access ? access : "public");
  if (!pv || !pv->base[0])
    return mcp_tool_error(c, "this server makes no preview URLs: the operator must start husk "
                             "serve with --preview-url");
  struct husk_mgr *m = mcp_call_mgr(c);
  if (!m)
    return 0;
  struct husk_preview_spec spec = {
      .port = (unsigned)port, .ttl_ms = (uint64_t)ttl * 1000, .access = HUSK_PREVIEW_PUBLIC};
  if (access && husk_preview_access_parse(access, &spec.access) < 0)
    return mcp_tool_error(c, "access must be public, password or key");
  char creator[HUSK_CREATED_BY_MAX];
  mcp_created_by(c->caller, creator, sizeof creator);
  spec.created_by = creator;
  struct husk_preview_info p;
  char token[HUSK_PREVIEW_SECRET_MAX], password[HUSK_PREVIEW_SECRET_MAX];
  struct husk_err err;
  if (husk_preview_create(m, c->caller->tenant, id, &spec, &p, token, password, &err) < 0) {
    if (err.code == EDQUOT)
      return mcp_tool_error(c, "%s", err.msg);
    return mcp_tool_core_error(c, "sandbox", id, &err);
  }
  snprintf(c->audit_detail, sizeof c->audit_detail, "preview=%s port=%u access=%s", p.id, p.port,
           husk_preview_access_name(p.access));
  char url[1024], host_url[600];
  husk_preview_urls(&p, token, pv->base, &pv->domain, url, sizeof url, host_url, sizeof host_url);
  /* The host form serves apps that need to live at "/": offered first
   * where there is one. */
  const char *main_url = host_url[0] ? host_url : url;
  json_t *r = json_pack("{s:s, s:s, s:i, s:s, s:s, s:o}", "preview_id", p.id, "sandbox_id",
                        p.box_id, "port", (int)p.port, "access", husk_preview_access_name(p.access),
                        "url", main_url, "expires_at", json_time(p.expires_ms));
  if (r && host_url[0])
    json_object_set_new(r, "path_url", json_string(url));
  if (r && password[0])
    json_object_set_new(r, "password", json_string(password));
  if (r && p.created_by[0])
    json_object_set_new(r, "created_by", json_string(p.created_by));
  char name[64];
  snprintf(name, sizeof name, "port %u of %s", p.port, p.box_id);
  mcp_add_block(c, json_pack("{s:s, s:s, s:s, s:s, s:s}", "type", "resource_link", "uri", main_url,
                             "name", name, "mimeType", "text/html", "description",
                             "what the sandbox serves on this port, while the sandbox runs and "
                             "until the link expires"));
  OPENSSL_cleanse(token, sizeof token);
  OPENSSL_cleanse(password, sizeof password);
  mcp_result(c, r, false);
  return 0;
}

const struct mcp_tool mcp_tool_expose_port = {
    "expose_port",
    "Show a person what a sandbox serves",
    "Make a URL to a port of a sandbox, for a person to open in a browser: start a server in the "
    "sandbox first, detached so that it outlives the command (sandbox_exec with `cd "
    "/workspace/site "
    "&& setsid python3 -m http.server 8000 > /tmp/server.log 2>&1 &`, or a dashboard/notebook app "
    "listening on that port), then give the user the `url`. "
    "The sandbox gets no network from this: the server proxies each request to the port. The "
    "URL works while the sandbox runs (not while it is paused) and until expires_at (default 1 "
    "hour, at most 7 days). With access password, give the user the password too: it is not "
    "shown again.",
    expose_params,
    "{\"type\":\"object\",\"properties\":{\"preview_id\":{\"type\":\"string\"},\"sandbox_id\":{"
    "\"type\":\"string\"},\"port\":{\"type\":\"integer\"},\"access\":{\"type\":\"string\"},"
    "\"url\":{\"type\":\"string\"},\"path_url\":{\"type\":\"string\"},\"password\":{\"type\":"
    "\"string\"},\"expires_at\":{\"type\":\"string\"},\"created_by\":{\"type\":\"string\"}},"
    "\"required\":[\"preview_id\",\"url\","
    "\"expires_at\"]}",
    false,
    false,
    false,
    expose_port,
    .scope = AUTH_SCOPE_SANDBOX,
};
