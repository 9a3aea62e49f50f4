/* The sandbox tools: boxes that live across calls (named by sandbox_id,
 * ended by sandbox_destroy or their TTL), and their files. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "box/box.h"
#include "husk/snapshot.h"
#include "mcp/boxio.h"
#include "mcp/internal.h"
#include "util/cleanup.h"
#include "util/cleanup_json.h"

#define READ_DEFAULT (64 * 1024)
#define READ_MAX (1024 * 1024)
#define LIST_ENTRIES_MAX 1000

#define ID_PARAM                                                                                   \
  { "sandbox_id", MCP_P_STRING, true, "the id from sandbox_create", NULL, 0, 0, 64 }
#define END_PARAM                                                                                  \
  { NULL, 0, false, NULL, NULL, 0, 0, 0 }

/* A box for the model: a paused one has no expiry (its TTL clock stands
 * still) but says until when it may stay paused and what is left of its
 * lifetime. */
static json_t *box_json(const struct husk_box_info *bi) {
  json_t *o =
      json_pack("{s:s, s:s, s:o, s:I}", "sandbox_id", bi->id, "state", bi->state, "created_at",
                mcp_time(bi->created_ms), "memory_bytes", (json_int_t)bi->limits.memory_bytes);
  if (!o)
    return NULL;
  if (bi->expires_ms > 0)
    json_object_set_new(o, "expires_at", mcp_time(bi->expires_ms));
  if (bi->paused_ms > 0) {
    json_object_set_new(o, "paused_at", mcp_time(bi->paused_ms));
    if (bi->paused_until_ms > 0)
      json_object_set_new(o, "paused_until", mcp_time(bi->paused_until_ms));
    json_object_set_new(o, "remaining_seconds",
                        json_integer((json_int_t)(bi->remaining_ms / 1000)));
    json_object_set_new(o, "keep_memory", json_boolean(!bi->paused_to_disk));
  }
  if (bi->snapshot_id[0])
    json_object_set_new(o, "snapshot_id", json_string(bi->snapshot_id));
  if (bi->created_by[0])
    json_object_set_new(o, "created_by", json_string(bi->created_by));
  return o;
}

/* The output schema's properties of box_json. */
#define BOX_JSON_PROPS                                                                             \
  "\"sandbox_id\":{\"type\":\"string\"},\"state\":{\"type\":\"string\"},\"created_at\":"           \
  "{\"type\":\"string\"},\"expires_at\":{\"type\":\"string\"},\"memory_bytes\":{\"type\":"         \
  "\"integer\"},\"paused_at\":{\"type\":\"string\"},\"paused_until\":{\"type\":\"string\"},"       \
  "\"remaining_seconds\":{\"type\":\"integer\"},\"keep_memory\":{\"type\":\"boolean\"},"           \
  "\"snapshot_id\":{\"type\":\"string\"},\"created_by\":{\"type\":\"string\"}"

/* ---- sandbox_create ------------------------------------------------------------- */

#define TEMPLATE_PARAM                                                                             \
  {                                                                                                \
    "template", MCP_P_STRING, false,                                                               \
        "the software the sandbox runs: a template name from "                                     \
        "template_list (default: \"default\", Python 3, bash and common tools)",                   \
        NULL, 0, 0, 64                                                                             \
  }

static const struct mcp_param create_params[] = {
    TEMPLATE_PARAM,
    {"ttl_seconds", MCP_P_INT, false,
     "lifetime: the sandbox and its files are destroyed this "
     "long after creation (default 1800 = 30 min, at most 86400)",
     NULL, 60, MCP_MAX_BOX_TTL_MS / 1000, 0},
    {"memory_mb", MCP_P_INT, false, "memory limit in MiB, files included (default 512)", NULL, 64,
     16384, 0},
    {"env", MCP_P_STRMAP, false,
     "environment variables of every command (no secrets: the "
     "sandbox is untrusted)",
     NULL, 0, 0, 64 * 1024},
    {"snapshot", MCP_P_STRING, false,
     "a snapshot_id from sandbox_snapshot: the new sandbox "
     "starts with that snapshot's files, template, memory, env and TTL (arguments given here "
     "override them); several sandboxes from one snapshot are independent copies",
     NULL, 0, 0, 64},
    {"rebase", MCP_P_BOOL, false,
     "with snapshot: when its template was updated since the "
     "snapshot (the create fails saying so), true puts the snapshot's files over the template "
     "as it is now",
     NULL, 0, 0, 0},
    {"egress", MCP_P_OBJECT, false,
     "network for the sandbox, only through husk's egress proxy: a policy {\"rules\": [{\"host\": "
     "\"api.example.com\", \"ports\"?: [443], \"mode\"?: \"tunnel\"}]} naming the hosts it may "
     "reach; without it the sandbox has no network. It cannot bind stored secrets: a sandbox "
     "that needs them comes from a template whose policy binds them",
     NULL, 0, 0, 64 * 1024},
    END_PARAM,
};

/* A core error about snapshot `id` (of sandbox_create or sandbox_snapshot),
 * worded for the model. */
static int snapshot_error(struct mcp_call *c, const char *id, const struct husk_err *err) {
  switch (err->code) {
  case ENOTSUP:
    return mcp_tool_error(c,
                          "snapshots are not available on this server (%s): they need "
                          "husk serve's object store",
                          err->msg);
  case ESTALE:
    return mcp_tool_error(c,
                          "%s. Call sandbox_create again with rebase: true to put the "
                          "snapshot's files over the template as it is now",
                          err->msg);
  case ENOENT:
    if (strncmp(err->msg, "no template ", 12) != 0 && strstr(err->msg, "snapshot"))
      return mcp_tool_error(c, "snapshot `%s` not found: the id is wrong, or it was deleted", id);
    return mcp_tool_core_error(c, "sandbox", id, err);
  case EDQUOT:
    /* The tenant's storage or its number of snapshots; else (a create)
     * its boxes or memory. */
    if (strstr(err->msg, "snapshot"))
      return mcp_tool_error(c,
                            "quota exceeded: %s. Snapshots count in your storage and their "
                            "number is bounded: delete the ones you no longer need (HTTP API: "
                            "DELETE /v1/snapshots/{id}) and retry.",
                            err->msg);
    return mcp_tool_core_error(c, "sandbox", id, err);
  case ENOSPC:
    return mcp_tool_error(c,
                          "the server is short of disk space for the snapshot (%s): try "
                          "again later",
                          err->msg);
  default: return mcp_tool_core_error(c, "sandbox", id, err);
  }
}

static int sandbox_create(struct mcp_call *c) {
  struct husk_mgr *m = mcp_call_mgr(c);
  if (!m)
    return 0;
  const char *snap = mcp_arg_str(c, "snapshot");
  json_t *rebase = mcp_arg(c, "rebase");
  /* From a snapshot, its lifetime unless one is asked. */
  int64_t ttl = snap ? 0 : (int64_t)(mcp_box_ttl_ms(c->srv) / 1000), mem = 0;
  mcp_arg_int(c, "ttl_seconds", &ttl);
  if (rebase && json_is_true(rebase) && !snap)
    return mcp_tool_error(c, "rebase applies only with snapshot");
  mcp_arg_int(c, "memory_mb", &mem);
  json_t *env = mcp_arg(c, "env");
  size_t n = json_object_size(env);
  cleanup_free char **envv = calloc(n + 1, sizeof *envv);
  if (!envv)
    return mcp_tool_error(c, "out of memory");
  size_t i = 0;
  const char *k;
  json_t *v;
  json_object_foreach(env, k, v) {
    if (!*k ||
        strspn(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") != strlen(k) ||
        (k[0] >= '0' && k[0] <= '9')) {
      for (size_t j = 0; j < i; j++)
        free(envv[j]);
      return mcp_tool_error(c, "env name `%.64s` is not valid: use letters, digits and _", k);
    }
    if (asprintf(&envv[i], "%s=%s", k, json_string_value(v)) < 0)
      envv[i] = NULL;
    else
      i++;
  }
  struct husk_box_spec cr = {.env = envv,
                             .template_name = mcp_arg_str(c, "template"),
                             .metadata_json = "{\"via\":\"mcp sandbox_create\"}",
                             .snapshot = snap,
                             .rebase = rebase && json_is_true(rebase)};
  char creator[STATE_CREATED_BY_SIZE];
  mcp_created_by(c->caller, creator, sizeof creator);
  cr.created_by = creator;
  cr.limits.timeout_ms = (uint64_t)ttl * 1000;
  cr.limits.memory_bytes = (uint64_t)mem * 1024 * 1024;
  /* The core checks the policy (docs/egress.md): rules, secrets that exist. */
  json_t *egress = mcp_arg(c, "egress");
  /* Where the tenant's secrets may go is the tenant's choice, never the
   * model's: a policy written in a call could bind a secret to any host
   * the model names.  Secrets are bound by templates' policies and by
   * the HTTP API, which the model does not drive. */
  if (egress && json_object_get(egress, "secrets")) {
    for (size_t j = 0; j < i; j++)
      free(envv[j]);
    return mcp_tool_error(c, "`egress` given here cannot bind secrets (`secrets`): a sandbox "
                             "whose requests carry a stored secret comes from a template whose "
                             "egress policy binds it (template_list), or is created over the "
                             "HTTP API");
  }
  cleanup_free char *egress_json = egress ? json_dumps(egress, JSON_COMPACT) : NULL;
  if (egress && !egress_json) {
    for (size_t j = 0; j < i; j++)
      free(envv[j]);
    return mcp_tool_error(c, "out of memory");
  }
  if (egress_json) {
    cr.network = "egress";
    cr.egress_json = egress_json;
  }
  if (snap)
    snprintf(c->audit_detail, sizeof c->audit_detail, "snapshot=%.64s%s", snap,
             cr.rebase ? " rebase" : "");
  struct husk_box_info bi = {0};
  struct husk_err err;
  int rc = husk_box_create(m, c->caller->tenant, &cr, &bi, &err);
  for (size_t j = 0; j < i; j++)
    free(envv[j]);
  if (rc < 0 && snap)
    return snapshot_error(c, snap, &err);
  if (rc < 0)
    return mcp_tool_core_error(c, "sandbox", "", &err);
  snprintf(c->audit_box, sizeof c->audit_box, "%s", bi.id);
  json_t *r = box_json(&bi);
  json_object_set_new(r, "ttl_seconds", json_integer((json_int_t)(bi.limits.timeout_ms / 1000)));
  json_object_set_new(r, "workdir", json_string(bi.workdir));
  json_object_set_new(r, "template", json_string(bi.template_name));
  husk_box_info_free(&bi);
  mcp_result(c, r, false);
  return 0;
}

const struct mcp_tool mcp_tool_sandbox_create = {
    "sandbox_create",
    "Create a sandbox",
    "Create an isolated Linux sandbox for multi-step work: run commands (sandbox_exec), write and "
    "read files (sandbox_write_file, sandbox_read_file, sandbox_list_files), and keep state "
    "between calls. Pass the returned sandbox_id to those tools. It has Python 3 (numpy, "
    "matplotlib), bash and common tools, NO network access (unless egress names the hosts it "
    "may reach; fetch_url then downloads into it) and no credentials; writable places "
    "are /workspace (working directory), /tmp and /dev/shm, 1 GiB in all, counted against its "
    "memory. It is destroyed automatically after ttl_seconds (default 30 minutes) with everything "
    "in it; call sandbox_destroy when done. For a one-off script, run_code is simpler. With "
    "snapshot (from sandbox_snapshot) it starts with the files saved there: to go back to a "
    "restore point, or to try several approaches from the same state in separate sandboxes.",
    create_params,
    "{\"type\":\"object\",\"properties\":{" BOX_JSON_PROPS ",\"ttl_seconds\":{\"type\":"
    "\"integer\"},\"workdir\":{\"type\":\"string\"},\"template\":{\"type\":\"string\"}},"
    "\"required\":[\"sandbox_id\",\"expires_at\"]}",
    false,
    false,
    false,
    sandbox_create,
    .scope = AUTH_SCOPE_SANDBOX,
};

/* ---- files ------------------------------------------------------------------------- */

static int open_fs(struct mcp_call *c, struct husk_mgr **m, struct husk_fs *b) {
  const char *id = mcp_arg_str(c, "sandbox_id");
  snprintf(c->audit_box, sizeof c->audit_box, "%.40s", id);
  if (!(*m = mcp_call_mgr(c)))
    return -1;
  struct husk_err err;
  if (mcp_box_fs(*m, c->caller->tenant, id, b, &err) < 0) {
    mcp_tool_core_error(c, "sandbox", id, &err);
    return -1;
  }
  return 0;
}

static const char *const encodings[] = {"utf-8", "base64", NULL};

/* Files one call may write, store or load (sandbox_write_file's `files`,
 * store_file's `paths`, load_file's `keys`): a bound on the work and the
 * result of one call. */
#define FILES_MAX 100
#define PATH_MAX_LEN 4096
/* The paths of `files` at their longest, beside their content. */
#define FILES_PATHS_MAX (FILES_MAX * PATH_MAX_LEN)

static const struct mcp_param write_params[] = {
    ID_PARAM,
    {"path", MCP_P_STRING, false,
     "where to write: under /workspace (relative paths are), /tmp or "
     "/dev/shm; parent directories are created",
     NULL, 0, 0, PATH_MAX_LEN},
    {"content", MCP_P_STRING, false,
     "the whole file content: at most 3 MiB of the file's bytes "
     "(base64 decoded)",
     NULL, 0, 0, MCP_CONTENT_B64_MAX},
    {"files", MCP_P_STRMAP, false,
     "or, instead of path + content: several files at once, path -> content (at most 100 "
     "files and 3 MiB of their bytes in all, decoded; `encoding` applies to every one). Each "
     "is written on its own: one that fails does not stop the others",
     NULL, 0, FILES_MAX, MCP_CONTENT_B64_MAX + FILES_PATHS_MAX},
    {"encoding", MCP_P_STRING, false,
     "utf-8 (default: content is text) or base64 (binary); with `files`, of all of them", encodings,
     0, 0, 0},
    {"append", MCP_P_BOOL, false,
     "add content at the end of the file (made if missing) instead "
     "of replacing it: write a large file in pieces of up to 3 MiB (with `files`: of each)",
     NULL, 0, 0, 0},
    {"offset", MCP_P_INT, false,
     "write content at this byte of the existing file (0 makes a "
     "missing one), keeping the rest: the write side of sandbox_read_file's offset (not with "
     "`files`)",
     NULL, 0, 1e15, 0},
    END_PARAM,
};

/* Write one file's bytes: whole, appended (offset < 0 with append) or at
 * an offset.  0, or -1 and *msg the error worded for the model (malloc'd;
 * NULL when out of memory). */
static int write_one(struct mcp_call *c, const struct husk_fs *b, const char *path,
                     const void *data, size_t len, bool append, int64_t offset, uint64_t *file_size,
                     char **msg) {
  struct husk_err err;
  bool at = offset >= 0;
  *file_size = len;
  int rc = append || at
               ? mcp_box_write_at(b, path, data, len, append ? -1 : offset, file_size, &err)
               : mcp_box_write(b, path, data, len, &err);
  *msg = NULL;
  if (rc == 0)
    return 0;
  if (err.code == ENOENT && at)
    mcp_tool_error(c,
                   "`%s` does not exist: write it first (without offset, or with "
                   "offset 0 or append)",
                   path);
  else
    mcp_tool_core_error(c, "file", path, &err);
  *msg = mcp_take_error(c);
  return -1;
}

/* sandbox_write_file with `files`: every file tried, each with its own
 * outcome; isError when one failed (the result still lists them all). */
static int write_files(struct mcp_call *c, json_t *files, bool b64, bool append) {
  /* The bound on what one call carries is on the decoded total, checked
   * before anything is written. */
  uint64_t total = 0;
  const char *path;
  json_t *v;
  json_object_foreach(files, path, v) {
    total += b64 ? mcp_b64_decoded_len(json_string_value(v), json_string_length(v))
                 : json_string_length(v);
    if (strlen(path) > PATH_MAX_LEN)
      return mcp_tool_error(c, "a path in `files` is longer than %d bytes", PATH_MAX_LEN);
  }
  if (total > MCP_CONTENT_MAX)
    return mcp_tool_error(c,
                          "the files hold %llu bytes, more than a call may carry (%d, 3 MiB, "
                          "decoded, all files together): write them in several calls, a large "
                          "file in pieces with append",
                          (unsigned long long)total, MCP_CONTENT_MAX);
  snprintf(c->audit_detail, sizeof c->audit_detail, "%zu files", json_object_size(files));
  struct husk_mgr *m;
  struct husk_fs b;
  if (open_fs(c, &m, &b) < 0)
    return 0;
  cleanup_json json_t *list = json_array();
  cleanup_json json_t *failed = json_array();
  uint64_t written = 0;
  json_object_foreach(files, path, v) {
    cleanup_free unsigned char *bin = NULL;
    size_t len = json_string_length(v);
    cleanup_free char *msg = NULL;
    uint64_t file_size = 0;
    int rc;
    if (b64 && mcp_b64_decode(json_string_value(v), len, &bin, &len) < 0) {
      msg = strdup("content is not valid base64 (encoding is base64)");
      rc = -1;
    } else {
      rc = write_one(c, &b, path, b64 ? (const void *)bin : json_string_value(v), len, append, -1,
                     &file_size, &msg);
    }
    if (rc < 0) {
      /* The message may quote bytes from the box: made valid text. */
      bool lossy;
      json_array_append_new(
          list, json_pack("{s:s, s:o}", "path", path, "error",
                          msg ? mcp_text(msg, strlen(msg), &lossy) : json_string("out of memory")));
      json_array_append_new(failed, json_string(path));
    } else {
      json_array_append_new(list, json_pack("{s:s, s:I, s:I}", "path", path, "size",
                                            (json_int_t)len, "file_size", (json_int_t)file_size));
      written += len;
    }
  }
  close(b.fs);
  /* Counted before the arrays are handed over (the order in which
   * arguments are evaluated is unspecified). */
  size_t nfailed = json_array_size(failed), nok = json_array_size(list) - nfailed;
  json_t *r = json_pack("{s:I, s:I, s:I, s:o, s:o}", "size", (json_int_t)written, "written",
                        (json_int_t)nok, "failed_count", (json_int_t)nfailed, "failed",
                        steal_pointer(&failed), "files", steal_pointer(&list));
  if (r && nfailed)
    json_object_set_new(r, "notes",
                        json_pack("[s]", "some files were not written: `failed` names them and "
                                         "each one's `error` says why; the others were written"));
  mcp_result(c, r, nfailed > 0);
  return 0;
}

static int write_file(struct mcp_call *c) {
  const char *path = mcp_arg_str(c, "path"), *enc = mcp_arg_str(c, "encoding");
  json_t *content = mcp_arg(c, "content"), *files = mcp_arg(c, "files");
  bool b64 = enc && !strcmp(enc, "base64");
  bool append = json_is_true(mcp_arg(c, "append"));
  int64_t offset = -1;
  bool at = mcp_arg_int(c, "offset", &offset);
  if (append && at)
    return mcp_tool_error(c, "give `append` or `offset`, not both");
  if (files && (path || content))
    return mcp_tool_error(c, "give either `path` + `content` or `files`, not both");
  if (files && at)
    return mcp_tool_error(c, "`offset` is for one file (path + content), not with `files`");
  if (files)
    return write_files(c, files, b64, append);
  if (!path || !content)
    return mcp_tool_error(c, "say what to write: `path` and `content`, or `files` (an object "
                             "of path -> content) for several files");
  snprintf(c->audit_detail, sizeof c->audit_detail, "%.120s", path);
  cleanup_free unsigned char *bin = NULL;
  size_t len = json_string_length(content);
  if (b64 && mcp_b64_decode(json_string_value(content), len, &bin, &len) < 0)
    return mcp_tool_error(c, "content is not valid base64 (encoding is base64)");
  if (len > MCP_CONTENT_MAX)
    return mcp_tool_error(c,
                          "content is %zu bytes, more than a call may carry (%d, 3 MiB, "
                          "decoded): write the file in parts from the sandbox, or load_file it "
                          "from storage",
                          len, MCP_CONTENT_MAX);
  struct husk_mgr *m;
  struct husk_fs b;
  if (open_fs(c, &m, &b) < 0)
    return 0;
  uint64_t file_size = len;
  cleanup_free char *msg = NULL;
  int rc = write_one(c, &b, path, b64 ? (const void *)bin : json_string_value(content), len, append,
                     at ? offset : -1, &file_size, &msg);
  close(b.fs);
  if (rc < 0)
    return mcp_tool_error(c, "%s", msg ? msg : "out of memory");
  mcp_result(c,
             json_pack("{s:s, s:I, s:I}", "path", path, "size", (json_int_t)len, "file_size",
                       (json_int_t)file_size),
             false);
  return 0;
}

const struct mcp_tool mcp_tool_sandbox_write_file = {
    "sandbox_write_file",
    "Write a file in a sandbox",
    "Create or replace a file in a sandbox (text, or binary as base64). Relative paths are under "
    "/workspace. Up to 3 MiB of the file's bytes per call (base64 decoded): write a larger "
    "file in pieces with append true (or at an offset), and check file_size. Several files in "
    "one call: `files` (path -> content, at most 100 files and 3 MiB in all); the result lists "
    "each file's outcome and names the ones that failed.",
    write_params,
    /* One file: path, size, file_size.  Several: size (bytes written in
     * all), written, failed_count, failed (paths) and files (each one's
     * outcome).  size is in both. */
    "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"size\":{\"type\":"
    "\"integer\",\"description\":\"bytes written (with files: of all of them)\"},\"file_size\":"
    "{\"type\":\"integer\",\"description\":\"the file's size after the write\"},\"written\":"
    "{\"type\":\"integer\",\"description\":\"with files: how many were written\"},"
    "\"failed_count\":{\"type\":\"integer\"},\"failed\":{\"type\":\"array\",\"items\":{\"type\":"
    "\"string\"},\"description\":\"with files: the paths not written\"},\"files\":{\"type\":"
    "\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
    "\"size\":{\"type\":\"integer\"},\"file_size\":{\"type\":\"integer\"},\"error\":{\"type\":"
    "\"string\"}},\"required\":[\"path\"]}},\"notes\":{\"type\":\"array\"}},\"required\":"
    "[\"size\"]}",
    false,
    false,
    false,
    write_file,
    .scope = AUTH_SCOPE_SANDBOX,
};

static const struct mcp_param read_params[] = {
    ID_PARAM,
    {"path", MCP_P_STRING, true,
     "the file: under /workspace (relative paths are), /tmp or "
     "/dev/shm",
     NULL, 0, 0, 4096},
    {"offset", MCP_P_INT, false, "byte to start at (default 0)", NULL, 0, 1e15, 0},
    {"max_bytes", MCP_P_INT, false, "most bytes to return (default 65536, at most 1048576)", NULL,
     1, READ_MAX, 0},
    END_PARAM,
};

static int read_file(struct mcp_call *c) {
  const char *path = mcp_arg_str(c, "path");
  int64_t off = 0, max = READ_DEFAULT;
  mcp_arg_int(c, "offset", &off);
  mcp_arg_int(c, "max_bytes", &max);
  snprintf(c->audit_detail, sizeof c->audit_detail, "%.120s", path);
  struct husk_mgr *m;
  struct husk_fs b;
  if (open_fs(c, &m, &b) < 0)
    return 0;
  struct husk_err err;
  cleanup_close int fd = -1;
  struct stat st;
  int rc = husk_file_open_read(&b, path, &fd, &st, &err);
  close(b.fs);
  if (rc < 0)
    return mcp_tool_core_error(c, "file", path, &err);
  const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
  /* An image is returned whole as image content, so the model sees it. */
  unsigned char head[16];
  ssize_t hn = pread(fd, head, sizeof head, 0);
  const char *img = hn > 0 ? mcp_image_mime(name, head, (size_t)hn) : NULL;
  if (img && !strcmp(img, "image/svg+xml"))
    img = NULL; /* SVG reads as text, which the model can use */
  if (img && off == 0 && st.st_size <= MCP_IMAGE_MAX) {
    cleanup_free char *buf = NULL;
    size_t n = 0;
    if (mcp_pread_max(fd, 0, (size_t)st.st_size, &buf, &n, &err) < 0)
      return mcp_tool_core_error(c, "file", path, &err);
    cleanup_free char *b64 = mcp_b64_encode(buf, n);
    if (!b64)
      return mcp_tool_error(c, "out of memory");
    mcp_result(c,
               json_pack("{s:s, s:I, s:s, s:s}", "path", path, "size", (json_int_t)st.st_size,
                         "mime_type", img, "encoding", "image"),
               false);
    mcp_add_block(c, json_pack("{s:s, s:s, s:s}", "type", "image", "data", b64, "mimeType", img));
    return 0;
  }
  cleanup_free char *buf = NULL;
  size_t n = 0;
  if (mcp_pread_max(fd, (uint64_t)off, (size_t)max, &buf, &n, &err) < 0)
    return mcp_tool_core_error(c, "file", path, &err);
  bool more = (uint64_t)off + n < (uint64_t)st.st_size;
  json_t *r = json_pack("{s:s, s:I, s:I, s:I, s:b, s:s}", "path", path, "size",
                        (json_int_t)st.st_size, "offset", (json_int_t)off, "bytes_returned",
                        (json_int_t)n, "truncated", more, "mime_type", mcp_mime_by_name(name));
  /* Text when it is UTF-8 (a character cut at the end is kept back), else
   * base64. */
  size_t text_len = n;
  while (more && text_len > 0 && n - text_len < 3 && !mcp_utf8_valid(buf, text_len))
    text_len--;
  if (mcp_utf8_valid(buf ? buf : "", text_len)) {
    json_object_set_new(r, "encoding", json_string("utf-8"));
    json_object_set_new(r, "content", json_stringn(buf ? buf : "", text_len));
    json_object_set_new(r, "bytes_returned", json_integer((json_int_t)text_len));
    more = (uint64_t)off + text_len < (uint64_t)st.st_size;
    json_object_set_new(r, "truncated", json_boolean(more));
  } else {
    cleanup_free char *b64 = mcp_b64_encode(buf, n);
    json_object_set_new(r, "encoding", json_string("base64"));
    json_object_set_new(r, "content", json_string(b64 ? b64 : ""));
  }
  if (more)
    json_object_set_new(r, "notes",
                        json_pack("[s]", "the file continues: call again with offset "
                                         "= offset + bytes_returned"));
  mcp_result(c, r, false);
  return 0;
}

const struct mcp_tool mcp_tool_sandbox_read_file = {
    "sandbox_read_file",
    "Read a file from a sandbox",
    "Read a file from a sandbox: text comes back as text, binary as base64, and PNG/JPEG/GIF/WebP "
    "images as an image you can see. Large files are read in pieces with offset and max_bytes.",
    read_params,
    "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"size\":{\"type\":"
    "\"integer\"},\"offset\":{\"type\":\"integer\"},\"bytes_returned\":{\"type\":\"integer\"},"
    "\"truncated\":{\"type\":\"boolean\"},\"mime_type\":{\"type\":\"string\"},\"encoding\":"
    "{\"type\":\"string\"},\"content\":{\"type\":\"string\"},\"notes\":{\"type\":\"array\"}},"
    "\"required\":[\"path\",\"size\",\"encoding\"]}",
    true,
    false,
    true,
    read_file,
    .scope = AUTH_SCOPE_SANDBOX_READ,
};

static const struct mcp_param list_params[] = {
    ID_PARAM,
    {"path", MCP_P_STRING, false, "directory (default /workspace)", NULL, 0, 0, 4096},
    {"depth", MCP_P_INT, false, "levels to descend (default 2, at most 10)", NULL, 1, 10, 0},
    END_PARAM,
};

struct list_ctx {
  json_t *arr;
  size_t n;
  bool more;
};

static int list_cb(void *ctx, const struct husk_dirent *e) {
  struct list_ctx *lc = ctx;
  if (lc->n >= LIST_ENTRIES_MAX) {
    lc->more = true;
    return 1;
  }
  const char *type = e->type == 'f'   ? "file"
                     : e->type == 'd' ? "dir"
                     : e->type == 'l' ? "symlink"
                                      : "other";
  json_t *p = mcp_text(e->path, strlen(e->path), NULL);
  json_t *j = json_pack("{s:o, s:s, s:I}", "path", p ? p : json_string("?"), "type", type, "size",
                        (json_int_t)e->size);
  if (j && json_array_append_new(lc->arr, j) == 0)
    lc->n++;
  return 0;
}

static int list_files(struct mcp_call *c) {
  const char *path = mcp_arg_str(c, "path");
  int64_t depth = 2;
  mcp_arg_int(c, "depth", &depth);
  if (!path)
    path = "/workspace";
  struct husk_mgr *m;
  struct husk_fs b;
  if (open_fs(c, &m, &b) < 0)
    return 0;
  cleanup_json json_t *arr = json_array();
  struct list_ctx lc = {.arr = arr};
  struct husk_err err;
  b.list_max = LIST_ENTRIES_MAX + 1;
  int rc = husk_file_list(&b, path, (int)depth, list_cb, &lc, &err);
  close(b.fs);
  if (rc < 0)
    return mcp_tool_core_error(c, "directory", path, &err);
  mcp_result(c,
             json_pack("{s:s, s:o, s:b}", "path", path, "entries", steal_pointer(&arr), "truncated",
                       lc.more || rc == 1),
             false);
  return 0;
}

const struct mcp_tool mcp_tool_sandbox_list_files = {
    "sandbox_list_files",
    "List files in a sandbox",
    "List a directory of a sandbox recursively (default /workspace, 2 levels): path, type "
    "(file, dir, symlink) and size of each entry, at most 1000.",
    list_params,
    "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"entries\":{\"type\":"
    "\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},"
    "\"type\":{\"type\":\"string\"},\"size\":{\"type\":\"integer\"}}}},\"truncated\":{\"type\":"
    "\"boolean\"}},\"required\":[\"path\",\"entries\"]}",
    true,
    false,
    true,
    list_files,
    .scope = AUTH_SCOPE_SANDBOX_READ,
};

/* ---- destroy and list --------------------------------------------------------------- */

static const struct mcp_param destroy_params[] = {ID_PARAM, END_PARAM};

static int sandbox_destroy(struct mcp_call *c) {
  const char *id = mcp_arg_str(c, "sandbox_id");
  snprintf(c->audit_box, sizeof c->audit_box, "%.40s", id);
  struct husk_mgr *m = mcp_call_mgr(c);
  if (!m)
    return 0;
  struct husk_err err;
  if (husk_box_destroy(m, c->caller->tenant, id, "stopped", &err) < 0) {
    if (err.code == EBUSY || err.code == ESTALE)
      return mcp_tool_error(c, "sandbox `%s` has already ended", id);
    return mcp_tool_core_error(c, "sandbox", id, &err);
  }
  mcp_result(c, json_pack("{s:s, s:s}", "sandbox_id", id, "state", "stopped"), false);
  return 0;
}

const struct mcp_tool mcp_tool_sandbox_destroy = {
    "sandbox_destroy",
    "Destroy a sandbox",
    "Destroy a sandbox now, with its processes and files (they cannot be recovered).",
    destroy_params,
    "{\"type\":\"object\",\"properties\":{\"sandbox_id\":{\"type\":\"string\"},\"state\":{\"type\":"
    "\"string\"}},\"required\":[\"sandbox_id\",\"state\"]}",
    false,
    true,
    false,
    sandbox_destroy,
    .scope = AUTH_SCOPE_SANDBOX,
};

static const struct mcp_param no_params[] = {END_PARAM};

static int box_list_cb(void *ctx, const struct husk_box_info *bi) {
  return json_array_append_new(ctx, box_json(bi)) == 0 ? 0 : -1;
}

static int sandbox_list(struct mcp_call *c) {
  struct husk_mgr *m = mcp_call_mgr(c);
  if (!m)
    return 0;
  cleanup_json json_t *arr = json_array();
  /* The running ones, then the paused ones: both are the model's to use. */
  static const char *const states[] = {"running", "paused"};
  bool truncated = false;
  for (size_t k = 0; k < sizeof states / sizeof states[0]; k++) {
    struct husk_box_filter lr = {.state = states[k], .limit = 100};
    char next[64] = "";
    struct husk_err err;
    if (husk_box_list(m, c->caller->tenant, &lr, box_list_cb, arr, next, sizeof next, &err) < 0)
      return mcp_tool_core_error(c, "sandbox list", "", &err);
    truncated = truncated || next[0] != 0;
  }
  mcp_result(c, json_pack("{s:o, s:b}", "sandboxes", steal_pointer(&arr), "truncated", truncated),
             false);
  return 0;
}

const struct mcp_tool mcp_tool_sandbox_list = {
    "sandbox_list",
    "List sandboxes",
    "List your running sandboxes (id, creation and expiry time), oldest first, then the "
    "paused ones (since when, until when they may stay paused), at most 100 of each.",
    no_params,
    "{\"type\":\"object\",\"properties\":{\"sandboxes\":{\"type\":\"array\",\"items\":{\"type\":"
    "\"object\",\"properties\":{" BOX_JSON_PROPS "}}},\"truncated\":{\"type\":\"boolean\"}},"
    "\"required\":[\"sandboxes\"]}",
    true,
    false,
    true,
    sandbox_list,
    .scope = AUTH_SCOPE_SANDBOX_READ,
};

/* ---- pause, resume, snapshot ---------------------------------------------------------- */

static const struct mcp_param pause_params[] = {
    ID_PARAM,
    {"keep_memory", MCP_P_BOOL, false,
     "true (default): freeze it in memory, every process as it "
     "is; false: keep only its files (as a snapshot of its own) and free its memory: its "
     "processes end, and sandbox_resume rebuilds it from the files under the same id",
     NULL, 0, 0, 0},
    END_PARAM,
};

static int sandbox_pause(struct mcp_call *c) {
  const char *id = mcp_arg_str(c, "sandbox_id");
  json_t *km = mcp_arg(c, "keep_memory");
  bool keep = !km || json_is_true(km);
  snprintf(c->audit_box, sizeof c->audit_box, "%.40s", id);
  snprintf(c->audit_detail, sizeof c->audit_detail, "keep_memory=%s", keep ? "true" : "false");
  struct husk_mgr *m = mcp_call_mgr(c);
  if (!m)
    return 0;
  struct husk_box_info bi = {0};
  struct husk_err err;
  int rc = keep ? husk_box_pause(m, c->caller->tenant, id, &bi, &err)
                : husk_box_pause_to_disk(m, c->caller->tenant, id, &bi, &err);
  if (rc < 0) {
    if (err.code == ENOTSUP && !keep)
      return mcp_tool_error(c,
                            "this server cannot pause sandboxes to disk (%s): pause with "
                            "keep_memory true instead",
                            err.msg);
    if (err.code == ENOTSUP)
      return mcp_tool_error(c, "this server cannot pause sandboxes (%s)", err.msg);
    if (err.code == ETIMEDOUT)
      return mcp_tool_error(c, "%s: the sandbox runs on; try again", err.msg);
    if (!keep && (err.code == EDQUOT || err.code == ENOSPC))
      return snapshot_error(c, id, &err);
    return mcp_tool_core_error(c, "sandbox", id, &err);
  }
  json_t *r = box_json(&bi);
  husk_box_info_free(&bi);
  mcp_result(c, r, false);
  return 0;
}

const struct mcp_tool mcp_tool_sandbox_pause = {
    "sandbox_pause",
    "Pause a sandbox",
    "Pause a sandbox: its processes are frozen in memory (they keep every variable, open file "
    "and background job, and use no CPU) and its TTL clock stops. Use it when the work waits "
    "for something (the user's answer, the next turn of a conversation) and should go on "
    "exactly where it was. While paused, sandbox_exec, run_code, the file tools and contexts "
    "fail with an error saying it is paused; sandbox_resume continues it. It still counts "
    "against your quotas, and a sandbox paused past paused_until is destroyed. With "
    "keep_memory false only its files are kept (no memory used; its processes end, "
    "sandbox_resume starts it again from the files). For a restore point that survives the "
    "sandbox, use sandbox_snapshot.",
    pause_params,
    "{\"type\":\"object\",\"properties\":{" BOX_JSON_PROPS "},\"required\":[\"sandbox_id\","
    "\"state\"]}",
    false,
    false,
    false,
    sandbox_pause,
    .scope = AUTH_SCOPE_SANDBOX,
};

static int sandbox_resume(struct mcp_call *c) {
  const char *id = mcp_arg_str(c, "sandbox_id");
  snprintf(c->audit_box, sizeof c->audit_box, "%.40s", id);
  struct husk_mgr *m = mcp_call_mgr(c);
  if (!m)
    return 0;
  struct husk_box_info bi = {0};
  struct husk_err err;
  if (husk_box_resume(m, c->caller->tenant, id, &bi, &err) < 0)
    return mcp_tool_core_error(c, "sandbox", id, &err);
  json_t *r = box_json(&bi);
  husk_box_info_free(&bi);
  mcp_result(c, r, false);
  return 0;
}

const struct mcp_tool mcp_tool_sandbox_resume = {
    "sandbox_resume",
    "Resume a paused sandbox",
    "Resume a sandbox paused by sandbox_pause: its processes go on where they stopped (paused "
    "with keep_memory false: it is rebuilt with its files, without its processes), and its TTL "
    "counts again from what was left of it (expires_at says when it ends now).",
    destroy_params,
    "{\"type\":\"object\",\"properties\":{" BOX_JSON_PROPS "},\"required\":[\"sandbox_id\","
    "\"state\"]}",
    false,
    false,
    false,
    sandbox_resume,
    .scope = AUTH_SCOPE_SANDBOX,
};

static const struct mcp_param snapshot_params[] = {
    ID_PARAM,
    {"metadata", MCP_P_STRMAP, false,
     "labels to find the snapshot by later (strings), e.g. "
     "{\"step\": \"before migration\"}",
     NULL, 0, 0, 16 * 1024},
    END_PARAM,
};

static int sandbox_snapshot(struct mcp_call *c) {
  const char *id = mcp_arg_str(c, "sandbox_id");
  snprintf(c->audit_box, sizeof c->audit_box, "%.40s", id);
  json_t *meta = mcp_arg(c, "metadata");
  cleanup_free char *meta_s = meta ? json_dumps(meta, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  if (meta && !meta_s)
    return mcp_tool_error(c, "out of memory");
  struct husk_mgr *m = mcp_call_mgr(c);
  if (!m)
    return 0;
  struct husk_snapshot_info si = {0};
  struct husk_err err;
  if (husk_snapshot_create(m, c->caller->tenant, id, meta_s, &si, &err) < 0) {
    if (err.code == ENOENT)
      return mcp_tool_core_error(c, "sandbox", id, &err);
    return snapshot_error(c, id, &err);
  }
  snprintf(c->audit_detail, sizeof c->audit_detail, "%s", si.id);
  cleanup_json json_t *md = json_loads(si.metadata_json ? si.metadata_json : "{}", 0, NULL);
  json_t *r =
      json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:s, s:o, s:o}", "snapshot_id", si.id, "sandbox_id",
                si.box_id, "template", si.template_name, "size", (json_int_t)si.size, "data_bytes",
                (json_int_t)si.data_bytes, "entries", (json_int_t)si.entries, "sha256", si.sha256,
                "created_at", mcp_time(si.created_ms), "metadata",
                json_is_object(md) ? json_incref(md) : json_object());
  husk_snapshot_info_free(&si);
  mcp_result(c, r, false);
  return 0;
}

const struct mcp_tool mcp_tool_sandbox_snapshot = {
    "sandbox_snapshot",
    "Snapshot a sandbox's files",
    "Save what a sandbox wrote (/workspace, /tmp, /dev/shm, and for image templates every file "
    "changed or deleted anywhere) as a snapshot, with its template, memory, env and TTL. "
    "sandbox_create with snapshot: snapshot_id makes a new sandbox with those files: a restore "
    "point before a risky step (restore it if the step breaks things), or a fork to try "
    "several approaches from one state. Only files are kept: running processes, their memory "
    "and run_code variables are NOT (the new sandbox starts fresh processes). The sandbox is "
    "frozen for the moment of the copy and goes on afterwards (a paused one stays paused). "
    "Snapshots count against your storage quota.",
    snapshot_params,
    "{\"type\":\"object\",\"properties\":{\"snapshot_id\":{\"type\":\"string\"},\"sandbox_id\":"
    "{\"type\":\"string\"},\"template\":{\"type\":\"string\"},\"size\":{\"type\":\"integer\"},"
    "\"data_bytes\":{\"type\":\"integer\"},\"entries\":{\"type\":\"integer\"},\"sha256\":{\"type\":"
    "\"string\"},\"created_at\":{\"type\":\"string\"},\"metadata\":{\"type\":\"object\"}},"
    "\"required\":[\"snapshot_id\",\"sandbox_id\",\"size\",\"created_at\"]}",
    false,
    false,
    false,
    sandbox_snapshot,
    .scope = AUTH_SCOPE_SANDBOX,
};

/* ---- sandbox_snapshots ---------------------------------------------------------- */

static const char *const snapshot_actions[] = {"list", "delete", NULL};

static const struct mcp_param snapshots_params[] = {
    {"action", MCP_P_STRING, true,
     "list: your snapshots, oldest first (100 at most; "
     "sandbox_id narrows it to one sandbox's); delete: remove snapshot_id and free its storage",
     snapshot_actions, 0, 0, 0},
    {"snapshot_id", MCP_P_STRING, false, "delete: the snapshot", NULL, 0, 0, 64},
    {"sandbox_id", MCP_P_STRING, false, "list: only the snapshots of this sandbox", NULL, 0, 0, 64},
    END_PARAM,
};

static json_t *snapshot_json(const struct husk_snapshot_info *si) {
  cleanup_json json_t *md = json_loads(si->metadata_json ? si->metadata_json : "{}", 0, NULL);
  return json_pack("{s:s, s:s, s:s, s:I, s:o, s:I, s:o}", "snapshot_id", si->id, "sandbox_id",
                   si->box_id, "template", si->template_name, "size", (json_int_t)si->size,
                   "created_at", mcp_time(si->created_ms), "sandboxes", (json_int_t)si->boxes,
                   "metadata", json_is_object(md) ? json_incref(md) : json_object());
}

static int snapshot_list_cb(void *ctx, const struct husk_snapshot_info *si) {
  return json_array_append_new(ctx, snapshot_json(si)) == 0 ? 0 : -1;
}

static int sandbox_snapshots(struct mcp_call *c) {
  const char *action = mcp_arg_str(c, "action"), *sid = mcp_arg_str(c, "snapshot_id");
  struct husk_mgr *m = mcp_call_mgr(c);
  if (!m)
    return 0;
  struct husk_err err;
  if (!strcmp(action, "delete")) {
    if (!sid)
      return mcp_tool_error(c, "delete needs snapshot_id (sandbox_snapshots action list shows "
                               "them)");
    snprintf(c->audit_detail, sizeof c->audit_detail, "delete %.64s", sid);
    if (husk_snapshot_delete(m, c->caller->tenant, sid, &err) < 0) {
      if (err.code == EBUSY)
        return mcp_tool_error(c, "%s: destroy the sandboxes made from it first", err.msg);
      return snapshot_error(c, sid, &err);
    }
    mcp_result(c, json_pack("{s:s, s:s}", "action", action, "snapshot_id", sid), false);
    return 0;
  }
  /* list: the first page, of one sandbox's if one is named. */
  json_t *arr = json_array();
  if (!arr)
    return mcp_tool_error(c, "out of memory");
  char next[64] = "";
  if (husk_snapshot_list(m, c->caller->tenant, mcp_arg_str(c, "sandbox_id"), NULL, 100,
                         snapshot_list_cb, arr, next, sizeof next, &err) < 0) {
    json_decref(arr);
    return mcp_tool_core_error(c, "snapshot list", "", &err);
  }
  mcp_result(
      c,
      json_pack("{s:s, s:o, s:b}", "action", action, "snapshots", arr, "truncated", next[0] != 0),
      false);
  return 0;
}

const struct mcp_tool mcp_tool_sandbox_snapshots = {
    "sandbox_snapshots",
    "List or delete snapshots",
    "List your snapshots (from sandbox_snapshot: id, sandbox, size, when, how many sandboxes "
    "were made from it and are still running), or delete one you no longer need: snapshots "
    "never expire and count against your storage quota. A snapshot a running sandbox was made "
    "from cannot be deleted until that sandbox is destroyed.",
    snapshots_params,
    "{\"type\":\"object\",\"properties\":{\"action\":{\"type\":\"string\"},\"snapshot_id\":"
    "{\"type\":\"string\"},\"snapshots\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}},"
    "\"truncated\":{\"type\":\"boolean\"}},\"required\":[\"action\"]}",
    false,
    false,
    false,
    sandbox_snapshots,
    .scope = AUTH_SCOPE_SANDBOX, .scope_of = mcp_scope_by_action,
};

/* ---- template_list ------------------------------------------------------------------ */

static int template_cb(void *ctx, const struct state_template *t) {
  json_t *j = json_pack("{s:s, s:s, s:b, s:o}", "name", t->name, "source", t->source, "shared",
                        !t->tenant_id[0], "created_at", mcp_time(t->created_ms));
  /* The image's labels (a description, a version) tell an agent what it is. */
  cleanup_json json_t *cfg = j ? json_loads(t->config_json, 0, NULL) : NULL;
  json_t *labels = json_object_get(json_object_get(cfg, "config"), "Labels");
  if (j && json_is_object(labels))
    json_object_set(j, "labels", labels);
  if (!j || json_array_append_new(ctx, j) < 0)
    return -1;
  return 0;
}

static int template_list(struct mcp_call *c) {
  struct husk_mgr *m = mcp_call_mgr(c);
  if (!m)
    return 0;
  cleanup_json json_t *arr = json_array();
  struct husk_err err = {0};
  json_array_append_new(
      arr, json_pack("{s:s, s:s, s:b}", "name", "default", "source", "host", "shared", true));
  if (box_template_list(m, c->caller->tenant, template_cb, arr, &err) < 0)
    return mcp_tool_core_error(c, "template list", "", &err);
  mcp_result(c, json_pack("{s:o}", "templates", steal_pointer(&arr)), false);
  return 0;
}

const struct mcp_tool mcp_tool_template_list = {
    "template_list",
    "List templates",
    "List the templates a sandbox can be made from (the `template` of sandbox_create and "
    "run_code): `default` (Python 3 with numpy and matplotlib, bash, common tools) and the "
    "images this server keeps (their own software, e.g. a language or a toolchain), with their "
    "labels.",
    no_params,
    "{\"type\":\"object\",\"properties\":{\"templates\":{\"type\":\"array\",\"items\":{\"type\":"
    "\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"source\":{\"type\":\"string\"},"
    "\"shared\":{\"type\":\"boolean\"},\"created_at\":{\"type\":\"string\"},\"labels\":{\"type\":"
    "\"object\"}}}}},\"required\":[\"templates\"]}",
    true,
    false,
    true,
    template_list,
    .scope = AUTH_SCOPE_SANDBOX_READ,
};
