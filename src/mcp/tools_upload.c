/* create_upload_link: an expiring URL the model gives a person, who opens
 * it in a browser and drops files, which land in the tenant's store under
 * a prefix for list_objects and load_file.  The page and the upload are
 * served by `husk serve`'s HTTP listener (src/api/routes_upload.c), at the
 * base expose_port's URLs use; the rules are the core's
 * (storage/upload_link.h).  Listed with the storage plane's tools, which
 * only `husk serve` has. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "mcp/internal.h"
#include "mcp/storage.h"
#include "storage/store.h"
#include "storage/upload_link.h"
#include "util/cleanup.h"
#include "util/json_text.h"

static const struct mcp_param upload_params[] = {
    {"bucket", MCP_P_STRING, false,
     "the bucket the files land in (default \"" MCP_BUCKET "\", created on first use; another "
     "must exist already)",
     NULL, 0, 0, STORE_BUCKET_MAX},
    {"prefix", MCP_P_STRING, false,
     "the key prefix of the uploaded files, e.g. \"inbox/report/\" (default: a fresh "
     "\"uploads/<random>/\")",
     NULL, 0, 0, STATE_ULINK_PREFIX_MAX - 1},
    {"expires_in_seconds", MCP_P_INT, false,
     "how long the link works (default 3600 = 1 hour, at most 604800 = 7 days)", NULL, 1,
     UPLOAD_LINK_MAX_S, 0},
    {"max_files", MCP_P_INT, false,
     "how many files the link takes in all (default 1: a one-time link; at most 100)", NULL, 1,
     UPLOAD_LINK_MAX_FILES, 0},
    {"max_file_bytes", MCP_P_INT, false,
     "the largest file accepted, in bytes (default 104857600 = 100 MiB)", NULL, 1,
     (double)UPLOAD_LINK_MAX_BYTES, 0},
    {"content_types", MCP_P_STRING, false,
     "the file types accepted, comma-separated, e.g. \"image/*,application/pdf\" (default: "
     "any); both the type the browser declares and the one the file name implies must match",
     NULL, 0, 0, STATE_ULINK_TYPES_MAX},
    {NULL, 0, false, NULL, NULL, 0, 0, 0},
};

static int create_upload_link(struct mcp_call *c) {
  const struct mcp_storage *sp = mcp_storage(c->srv);
  const struct mcp_previews *pv = mcp_previews(c->srv);
  if (!sp || !sp->ctx || !pv || !pv->base[0])
    return mcp_tool_error(c, "upload links are served by `husk serve`: this MCP server has no "
                             "HTTP listener to serve them");
  char creator[STATE_CREATED_BY_SIZE];
  mcp_created_by(c->caller, creator, sizeof creator);
  struct upload_link_spec spec = {
      .bucket = mcp_arg_str(c, "bucket"),
      .prefix = mcp_arg_str(c, "prefix"),
      .content_types = mcp_arg_str(c, "content_types"),
      .created_by = creator,
  };
  int64_t v = 0;
  if (mcp_arg_int(c, "expires_in_seconds", &v))
    spec.expires_s = v;
  if (mcp_arg_int(c, "max_files", &v))
    spec.max_files = v;
  if (mcp_arg_int(c, "max_file_bytes", &v))
    spec.max_file_bytes = (uint64_t)v;
  struct state_upload_link l;
  cleanup_free char *url = NULL;
  struct husk_err err;
  if (upload_link_create(sp->ctx, c->caller->tenant, &spec, pv->base, &l, &url, &err) < 0) {
    if (err.code == STORE_ENOBUCKET)
      return mcp_tool_error(c, "bucket \"%s\" does not exist: create it first, or omit `bucket`",
                            spec.bucket ? spec.bucket : "");
    if (err.code == EINVAL || err.code == EDQUOT || err.code == EOPNOTSUPP)
      return mcp_tool_error(c, "%s", err.msg);
    mcp_log(c->srv, "create_upload_link: %s", err.msg);
    return mcp_tool_error(c, "the upload link could not be made (the server logged why)");
  }
  snprintf(c->audit_detail, sizeof c->audit_detail, "upload_link=%s bucket=%s", l.id, l.bucket);
  json_t *r = json_pack("{s:s, s:s, s:o, s:s, s:s, s:I, s:I, s:s}", "url", url, "id", l.id,
                        "expires_at", json_time(l.expires_ms), "bucket", l.bucket, "prefix",
                        l.prefix, "max_files", (json_int_t)l.max_files, "max_file_bytes",
                        (json_int_t)l.max_file_bytes, "content_types", l.content_types);
  char text[1400];
  snprintf(text, sizeof text,
           "Give this URL to the user: %s\nThey open it in a browser and choose the file%s "
           "(up to %lld, each at most %lld bytes); it works until %s UTC. Once they say they "
           "are done, call list_objects with bucket \"%s\" and prefix \"%s\" to see the files, "
           "then load_file each key into a sandbox.",
           url, l.max_files > 1 ? "s" : "", (long long)l.max_files, (long long)l.max_file_bytes,
           r ? json_string_value(json_object_get(r, "expires_at")) : "?", l.bucket, l.prefix);
  explicit_bzero(url, strlen(url));
  mcp_result(c, r, false);
  mcp_add_block(c, json_pack("{s:s, s:s}", "type", "text", "text", text));
  explicit_bzero(text, sizeof text);
  return 0;
}

const struct mcp_tool mcp_tool_create_upload_link = {
    "create_upload_link",
    "Let a person upload files",
    "Make an expiring upload URL for the user: they open it in a browser and drop files (a "
    "simple page with a progress bar; `curl -F file=@x URL` works too), which land in your "
    "storage under `prefix`. Give the user the `url`; then call list_objects with that bucket "
    "and prefix and load_file the keys into a sandbox. By default the link takes one file "
    "(one-time use), of at most 100 MiB, and works for 1 hour.",
    upload_params,
    "{\"type\":\"object\",\"properties\":{\"url\":{\"type\":\"string\"},\"id\":{\"type\":"
    "\"string\"},\"expires_at\":{\"type\":\"string\"},\"bucket\":{\"type\":\"string\"},"
    "\"prefix\":{\"type\":\"string\"},\"max_files\":{\"type\":\"integer\"},\"max_file_bytes\":"
    "{\"type\":\"integer\"},\"content_types\":{\"type\":\"string\"}},\"required\":[\"url\","
    "\"id\",\"expires_at\",\"bucket\",\"prefix\",\"max_files\"]}",
    false,
    false,
    false,
    create_upload_link,
    .scope = AUTH_SCOPE_STORAGE_WRITE,
};
