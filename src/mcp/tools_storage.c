/* The storage plane's MCP tools and run_code's publish hook: a front like
 * the API's storage routes (src/api/routes_storage.c).  Arguments are
 * mapped onto the core calls (box/box_store.h, storage/store.h); every
 * rule (names, sizes, quota, tenancy, links) is the store's.  A tenant
 * sees only its own buckets: another tenant's bucket is "not found", like
 * one that does not exist. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "box/box_store.h"
#include "mcp/boxio.h"
#include "mcp/internal.h"
#include "mcp/storage.h"
#include "storage/remote.h"
#include "storage/store.h"
#include "util/cleanup.h"
#include "util/cleanup_json.h"
#include "util/id.h"

/* Inline content of store_file (decoded size; the message limit is 4 MiB). */
#define LIST_DEFAULT 100
#define LIST_MAX 1000
#define NAME_MAX_LEN 100

#define END_PARAM                                                                                  \
  { NULL, 0, false, NULL, NULL, 0, 0, 0 }
#define BUCKET_PARAM                                                                               \
  {                                                                                                \
    "bucket", MCP_P_STRING, false,                                                                 \
        "the bucket (default \"" MCP_BUCKET "\", created on first "                                \
        "use; names are 3-63 characters of a-z, 0-9, '.' and '-')",                                \
        NULL, 0, 0, STORE_BUCKET_MAX                                                               \
  }
#define EXPIRY_PARAM                                                                               \
  {                                                                                                \
    "expires_in_seconds", MCP_P_INT, false,                                                        \
        "how long the link works (default 3600 = 1 hour, at "                                      \
        "most 604800 = 7 days)",                                                                   \
        NULL, 1, STORE_LINK_MAX_S, 0                                                               \
  }
#define FILENAME_PARAM                                                                             \
  {                                                                                                \
    "filename", MCP_P_STRING, false,                                                               \
        "the file name a browser saves the download as (default: "                                 \
        "the key's last part)",                                                                    \
        NULL, 0, 0, 255                                                                            \
  }
static const char *const dispositions[] = {"inline", "attachment", NULL};
#define DISPOSITION_PARAM                                                                          \
  {                                                                                                \
    "disposition", MCP_P_STRING, false,                                                            \
        "inline: a browser shows the file (pages, images, PDFs, "                                  \
        "text); attachment: it downloads it. Default: by content type -- inline for HTML, text, "  \
        "images, PDF, audio and video, attachment for the rest",                                   \
        dispositions, 0, 0, 0                                                                      \
  }

/* Whether a link opens in the browser: as asked, else by content type --
 * what a browser shows well inline, and downloads for the rest.  One
 * rule for store_file, get_link and run_code's output files. */
static bool link_inline(const char *ctype, const char *asked) {
  if (asked)
    return !strcmp(asked, "inline");
  if (!ctype)
    return false;
  static const char *const prefixes[] = {"text/",  "image/",          "audio/",
                                         "video/", "application/pdf", "application/json"};
  for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
    if (!strncasecmp(ctype, prefixes[i], strlen(prefixes[i])))
      return true;
  return false;
}

static struct store *store_of(struct mcp_call *c) {
  const struct mcp_storage *sp = mcp_storage(c->srv);
  return sp ? sp->ctx : NULL;
}

static bool links_possible(struct store *s) { return store_remote(s) || store_public_url(s)[0]; }

#define NO_LINKS_MSG                                                                               \
  "links are not available on this server: it has no address to put in them. Its operator "        \
  "must start `husk serve` with an S3 listener (--s3-listen) or --public-url URL, or configure "   \
  "an external store (--store-endpoint)."

/* The last part of a key or path, for names of links and downloads. */
static const char *base_name(const char *p) {
  const char *s = strrchr(p, '/');
  return s && s[1] ? s + 1 : p;
}

/* A name from a box (hostile) made safe for a key and a download name. */
static void safe_name(const char *in, char *out, size_t cap) {
  size_t n = 0;
  for (const char *p = in; *p && n + 1 < cap && n < NAME_MAX_LEN; p++) {
    unsigned char ch = (unsigned char)*p;
    bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '-' || ch == '_';
    out[n++] = ok ? (char)ch : '_';
  }
  out[n] = '\0';
  if (!n || !strcmp(out, ".") || !strcmp(out, ".."))
    snprintf(out, cap, "file");
}

/* A fresh key: "<dir>/<16 hex>/<name>", unique without asking the store. */
static int unique_key(const char *dir, const char *name, char **out, struct husk_err *err) {
  char hex[17];
  if (id_new(NULL, 8, hex, sizeof hex, err) < 0)
    return -1;
  char safe[NAME_MAX_LEN + 1];
  safe_name(name, safe, sizeof safe);
  if (asprintf(out, "%s/%s/%s", dir, hex, safe) < 0) {
    *out = NULL;
    return husk_error(err, ENOMEM, "key");
  }
  return 0;
}

/* A store or transfer error worded for the model.  `what`/`id` name the
 * box-side thing for errors that are about the sandbox. */
static int storage_error(struct mcp_call *c, const char *bucket, const char *key, const char *what,
                         const char *id, const struct husk_err *err) {
  switch (err->code) {
  case STORE_ENOBUCKET:
    return mcp_tool_error(c,
                          "bucket `%.63s` not found: it does not exist (or is not yours). "
                          "Omit `bucket` to use the default bucket \"" MCP_BUCKET "\".",
                          bucket);
  case STORE_ENOKEY:
    return mcp_tool_error(c,
                          "object `%.300s` not found in bucket `%.63s`: list_objects shows the "
                          "keys there.",
                          key, bucket);
  case STORE_EBADNAME:
    return mcp_tool_error(c,
                          "bucket name `%.63s` is not valid: use 3-63 characters of a-z, 0-9, "
                          "'.' and '-', starting and ending with a letter or digit.",
                          bucket);
  case STORE_EBADKEY:
    return mcp_tool_error(c, "the key is not valid: %s (a key is 1-1024 bytes of UTF-8).",
                          err->msg);
  case STORE_EQUOTA:
    return mcp_tool_error(c, "storage quota exceeded: %s. Nothing was stored.", err->msg);
  case STORE_ETOOLARGE:
  case STORE_ESPARSE:
    return mcp_tool_error(c, "too large to store: %s. Nothing was stored.", err->msg);
  case ENOSPC:
    return mcp_tool_error(c, "the server has no room to store it: %s. Nothing was stored.",
                          err->msg);
  case EOPNOTSUPP: return mcp_tool_error(c, NO_LINKS_MSG);
  default:
    if (err->code >= STORE_ENOBUCKET)
      return mcp_tool_error(c, "%s", err->msg);
    return mcp_tool_core_error(c, what, id, err);
  }
}

static void audit_obj(struct mcp_call *c, const char *bucket, const char *key) {
  snprintf(c->audit_detail, sizeof c->audit_detail, "bucket=%.63s key=%.50s", bucket,
           key ? key : "");
}

/* Whether the sandbox exists and is the caller's: told apart from a
 * missing file, which the transfers report with the same errno. */
static int check_box(struct mcp_call *c, struct husk_mgr *m, const char *id) {
  snprintf(c->audit_box, sizeof c->audit_box, "%.40s", id);
  struct husk_fs b;
  struct husk_err err;
  if (mcp_box_fs(m, c->caller->tenant, id, &b, &err) < 0) {
    mcp_tool_core_error(c, "sandbox", id, &err);
    return -1;
  }
  close(b.fs);
  return 0;
}

static void add_link_block(struct mcp_call *c, const char *url, const char *key, const char *mime,
                           uint64_t size, int64_t expires_ms) {
  cleanup_json json_t *exp = json_time(expires_ms);
  char desc[160];
  snprintf(desc, sizeof desc, "expiring link (until %s)",
           json_string_value(exp) ? json_string_value(exp) : "?");
  mcp_add_block(c, json_pack("{s:s, s:s, s:s, s:s, s:I, s:s}", "type", "resource_link", "uri", url,
                             "name", base_name(key), "mimeType", mime, "size", (json_int_t)size,
                             "description", desc));
}

/* ---- publish (run_code's output files) -------------------------------------------- */

static int publish(void *ctx, const char *tenant, const char *name, bool unique,
                   const char *mime_type, int fd, uint64_t size, char **url, int64_t *expires_ms,
                   struct husk_err *err) {
  struct store *s = ctx;
  *url = NULL;
  if (!links_possible(s))
    return husk_fail(err, EOPNOTSUPP, "links are not available on this server");
  cleanup_free char *key = NULL;
  if (unique) {
    char safe[NAME_MAX_LEN + 1];
    safe_name(name, safe, sizeof safe);
    if (asprintf(&key, "outputs/%s", safe) < 0) {
      key = NULL;
      return husk_error(err, ENOMEM, "key");
    }
  } else if (unique_key("outputs", name, &key, err) < 0) {
    return -1;
  }
  if (lseek(fd, 0, SEEK_SET) < 0)
    return husk_error(err, errno, "output file");
  if (store_remote(s)) {
    cleanup_free char *rk = remote_key(tenant, MCP_BUCKET, key);
    char etag[48];
    uint64_t fsize = 0, bound = 0;
    if (!rk)
      return husk_error(err, ENOMEM, "publish");
    if (store_fd_bound(fd, &fsize, &bound, err) < 0)
      return -1;
    if (remote_put_fd(store_remote(s), rk, fd, fsize, mime_type, etag, err) < 0)
      return -1;
  } else {
    if (store_bucket_create(s, tenant, MCP_BUCKET, err) < 0 && err->code != STORE_EOWNED)
      return -1;
    struct store_object o;
    if (store_put_fd(s, tenant, MCP_BUCKET, key, fd, mime_type, &o, err) < 0)
      return -1;
    store_object_free(&o);
  }
  struct store_link l;
  if (store_link_create(s, tenant, MCP_BUCKET, key, 0, base_name(key), link_inline(mime_type, NULL),
                        &l, err) < 0)
    return -1;
  *url = l.url;
  l.url = NULL;
  *expires_ms = l.expires_ms;
  store_link_free(&l);
  return 0;
}

/* ---- store_file ----------------------------------------------------------------- */

/* A Content-Type the S3 front will serve back as a header: printable ASCII
 * (no CR/LF), "type/subtype" with optional parameters. */
static bool ctype_ok(const char *t) {
  const char *slash = strchr(t, '/');
  if (!slash || slash == t || !slash[1])
    return false;
  for (const char *p = t; *p; p++)
    if ((unsigned char)*p < 0x20 || (unsigned char)*p > 0x7e)
      return false;
  return true;
}

static const char *const encodings[] = {"utf-8", "base64", NULL};

static const struct mcp_param store_params[] = {
    {"sandbox_id", MCP_P_STRING, false, "store a file or directory of this sandbox (with `path`)",
     NULL, 0, 0, 64},
    {"path", MCP_P_STRING, false,
     "the sandbox path to store (relative paths are under "
     "/workspace); a directory is stored as a tar archive",
     NULL, 0, 0, 4096},
    {"content", MCP_P_STRING, false,
     "or: the content to store (instead of sandbox_id + path), "
     "at most 3 MB",
     NULL, 0, 0, MCP_CONTENT_B64_MAX},
    {"encoding", MCP_P_STRING, false, "of `content`: utf-8 (default, text) or base64 (binary)",
     encodings, 0, 0, 0},
    BUCKET_PARAM,
    {"key", MCP_P_STRING, false,
     "the object's name in the bucket, e.g. reports/q3.csv (default: "
     "a new unique key ending with the file name)",
     NULL, 0, 0, STORE_KEY_MAX},
    {"content_type", MCP_P_STRING, false,
     "MIME type of `content`, e.g. text/csv (default: from "
     "the key's extension, which also sets a sandbox file's type)",
     NULL, 0, 0, STORE_CTYPE_MAX - 1},
    FILENAME_PARAM,
    DISPOSITION_PARAM,
    EXPIRY_PARAM,
    END_PARAM,
};

static int store_file(struct mcp_call *c) {
  struct store *s = store_of(c);
  const char *box = mcp_arg_str(c, "sandbox_id"), *path = mcp_arg_str(c, "path");
  const char *enc = mcp_arg_str(c, "encoding"), *bucket = mcp_arg_str(c, "bucket");
  const char *key = mcp_arg_str(c, "key"), *ctype = mcp_arg_str(c, "content_type");
  const char *filename = mcp_arg_str(c, "filename"), *disp = mcp_arg_str(c, "disposition");
  json_t *content = mcp_arg(c, "content");
  int64_t exp = 0;
  mcp_arg_int(c, "expires_in_seconds", &exp);
  if (!bucket)
    bucket = MCP_BUCKET;
  audit_obj(c, bucket, key);
  if (content && (box || path))
    return mcp_tool_error(c, "give either `content` or `sandbox_id` + `path`, not both");
  if (!content && (!box || !path))
    return mcp_tool_error(c, "say what to store: `sandbox_id` and `path` (a file or directory of "
                             "a sandbox), or `content` (text, or base64 with encoding \"base64\")");
  if (ctype && !content)
    return mcp_tool_error(c, "`content_type` applies to `content` only: a sandbox file's type "
                             "comes from the key's extension (e.g. .csv, .pdf)");
  if (ctype && !ctype_ok(ctype))
    return mcp_tool_error(c, "`content_type` must be a MIME type such as text/csv or "
                             "application/pdf (printable ASCII, type/subtype)");
  if (!links_possible(s))
    return mcp_tool_error(c, NO_LINKS_MSG);
  cleanup_free char *auto_key = NULL;
  struct husk_err err;
  if (!key) {
    const char *name = content ? (filename ? filename : "content") : base_name(path);
    if (unique_key("files", name, &auto_key, &err) < 0)
      return mcp_tool_error(c, "%s", err.msg);
    key = auto_key;
    audit_obj(c, bucket, key);
  }
  /* Named after the key's last part unless told otherwise, as get_link's
   * links are. */
  const char *dl = filename ? filename : strchr(base_name(key), '/') ? NULL : base_name(key);
  struct box_store_result res;
  int rc;
  if (content) {
    cleanup_free unsigned char *bin = NULL;
    size_t len = json_string_length(content);
    bool b64 = enc && !strcmp(enc, "base64");
    if (b64 && b64_decode(json_string_value(content), len, &bin, &len) < 0)
      return mcp_tool_error(c, "content is not valid base64 (encoding is base64)");
    if (len > MCP_CONTENT_MAX)
      return mcp_tool_error(c,
                            "content is %zu bytes, more than a call may carry (%d, 3 MiB, "
                            "decoded): write it into a sandbox and store it with sandbox_id + "
                            "path",
                            len, MCP_CONTENT_MAX);
    rc = box_store_put_buffer(
        s, c->caller->tenant, b64 ? (const void *)bin : json_string_value(content), len, ctype,
        bucket, key, true, exp, dl, link_inline(ctype ? ctype : box_store_guess_type(key), disp),
        &res, &err);
  } else {
    struct husk_mgr *m = mcp_call_mgr(c);
    if (!m || check_box(c, m, box) < 0)
      return 0;
    /* A directory is stored as a tar: a download whatever was asked. */
    rc = box_store_put(m, s, c->caller->tenant, box, path, bucket, key, true, exp, dl,
                       link_inline(box_store_guess_type(key), disp), &res, &err);
  }
  if (rc < 0)
    return storage_error(c, bucket, key, "file", path, &err);
  /* What the core stored: the given type of content, else by the key. */
  const char *mime = res.tar ? "application/x-tar" : ctype ? ctype : box_store_guess_type(key);
  json_t *r = json_pack("{s:s, s:s, s:I, s:s, s:s, s:o, s:s, s:s, s:b}", "bucket", bucket, "key",
                        key, "size", (json_int_t)res.size, "etag", res.etag, "url",
                        res.url ? res.url : "", "expires_at", json_time(res.expires_ms), "link_id",
                        res.link_id, "content_type", mime, "tar", (int)res.tar);
  if (res.url)
    add_link_block(c, res.url, key, mime, res.size, res.expires_ms);
  box_store_result_free(&res);
  mcp_result(c, r, false);
  return 0;
}

#define LINK_PROPS                                                                                 \
  "\"bucket\":{\"type\":\"string\"},\"key\":{\"type\":\"string\"},\"size\":{\"type\":"             \
  "\"integer\"},\"url\":{\"type\":\"string\"},\"expires_at\":{\"type\":\"string\"},\"link_id\":"   \
  "{\"type\":\"string\"},\"content_type\":{\"type\":\"string\"}"

static const struct mcp_tool tool_store_file = {
    "store_file",
    "Store a file and get a link",
    "Put a file into object storage and get a download link to share: a report, a chart, a "
    "cleaned table. Either from a sandbox (sandbox_id + path; a directory is stored as one tar "
    "archive) or from content you pass (text, or base64 with encoding \"base64\"; at most 3 MB "
    "— for more, write it in a sandbox first). The object is kept in your bucket (default "
    "\"" MCP_BUCKET "\") until deleted; the link is a presigned URL that expires (default 1 hour, "
    "at most 7 days; get_link makes a new one). Give the user the `url`. load_file copies an "
    "object back into a sandbox.",
    store_params,
    "{\"type\":\"object\",\"properties\":{" LINK_PROPS ",\"etag\":{\"type\":\"string\"},\"tar\":"
    "{\"type\":\"boolean\"}},\"required\":[\"bucket\",\"key\",\"size\",\"url\",\"expires_at\"]}",
    false,
    false,
    false,
    store_file,
};

/* ---- get_link ------------------------------------------------------------------------ */

static const struct mcp_param link_params[] = {
    BUCKET_PARAM,
    {"key", MCP_P_STRING, true, "the object's key (from store_file or list_objects)", NULL, 0, 0,
     STORE_KEY_MAX},
    EXPIRY_PARAM,
    FILENAME_PARAM,
    DISPOSITION_PARAM,
    END_PARAM,
};

static int get_link(struct mcp_call *c) {
  struct store *s = store_of(c);
  const char *bucket = mcp_arg_str(c, "bucket"), *key = mcp_arg_str(c, "key");
  const char *filename = mcp_arg_str(c, "filename"), *disp = mcp_arg_str(c, "disposition");
  int64_t exp = 0;
  mcp_arg_int(c, "expires_in_seconds", &exp);
  if (!bucket)
    bucket = MCP_BUCKET;
  audit_obj(c, bucket, key);
  if (!links_possible(s))
    return mcp_tool_error(c, NO_LINKS_MSG);
  struct store_link l;
  struct husk_err err;
  /* The object's own type where the store says it, else by the key. */
  char ctype[STORE_CTYPE_MAX];
  snprintf(ctype, sizeof ctype, "%s", box_store_guess_type(key));
  struct store_object so;
  if (!store_remote(s) &&
      store_object_get(s, c->caller->tenant, bucket, key, &so, NULL, &err) == 0) {
    if (so.content_type[0])
      snprintf(ctype, sizeof ctype, "%s", so.content_type);
    store_object_free(&so);
  }
  /* Downloads are named after the key's last part unless told otherwise
   * (a key ending in '/' has none to offer). */
  const char *dl = filename ? filename : strchr(base_name(key), '/') ? NULL : base_name(key);
  if (store_link_create(s, c->caller->tenant, bucket, key, exp, dl, link_inline(ctype, disp), &l,
                        &err) < 0)
    return storage_error(c, bucket, key, "object", key, &err);
  json_t *r = json_pack("{s:s, s:s, s:s, s:o, s:s}", "bucket", bucket, "key", key, "url", l.url,
                        "expires_at", json_time(l.expires_ms), "link_id", l.id);
  const char *mime = box_store_guess_type(key);
  uint64_t size = 0;
  struct store_object o;
  if (!store_remote(s) &&
      store_object_get(s, c->caller->tenant, bucket, key, &o, NULL, &err) == 0) {
    size = o.size;
    json_object_set_new(r, "size", json_integer((json_int_t)o.size));
    json_object_set_new(r, "content_type", json_string(o.content_type));
    add_link_block(c, l.url, key, o.content_type[0] ? o.content_type : mime, size, l.expires_ms);
    store_object_free(&o);
  } else {
    add_link_block(c, l.url, key, mime, size, l.expires_ms);
  }
  store_link_free(&l);
  mcp_result(c, r, false);
  return 0;
}

static const struct mcp_tool tool_get_link = {
    "get_link",
    "Get a download link for a stored object",
    "Make a fresh presigned download link for an object already in storage (e.g. when an "
    "earlier link expired). The link works for expires_in_seconds (default 1 hour, at most 7 "
    "days) for anyone who has it; each fetch is recorded.",
    link_params,
    "{\"type\":\"object\",\"properties\":{" LINK_PROPS "},\"required\":[\"bucket\",\"key\","
    "\"url\",\"expires_at\"]}",
    false,
    false,
    false,
    get_link,
};

/* ---- list_objects ---------------------------------------------------------------------- */

static const struct mcp_param list_params[] = {
    BUCKET_PARAM,
    {"prefix", MCP_P_STRING, false, "only keys that start with this, e.g. reports/", NULL, 0, 0,
     STORE_KEY_MAX},
    {"cursor", MCP_P_STRING, false, "next_cursor of the previous page, to continue", NULL, 0, 0,
     2 * STORE_KEY_MAX},
    {"max_items", MCP_P_INT, false, "most objects to return (default 100, at most 1000)", NULL, 1,
     LIST_MAX, 0},
    END_PARAM,
};

static int list_cb(void *ctx, const struct store_entry *e) {
  if (!e->is_prefix)
    json_array_append_new(ctx, json_pack("{s:s, s:I, s:s, s:o}", "key", e->key, "size",
                                         (json_int_t)e->size, "etag", e->etag ? e->etag : "",
                                         "last_modified", json_time(e->mtime_ms)));
  return 0;
}

static int list_objects(struct mcp_call *c) {
  struct store *s = store_of(c);
  const char *bucket = mcp_arg_str(c, "bucket"), *prefix = mcp_arg_str(c, "prefix");
  const char *cursor = mcp_arg_str(c, "cursor");
  int64_t max = LIST_DEFAULT;
  mcp_arg_int(c, "max_items", &max);
  bool dflt = !bucket;
  if (!bucket)
    bucket = MCP_BUCKET;
  audit_obj(c, bucket, prefix);
  if (store_remote(s))
    return mcp_tool_error(c, "listing is not available: this server keeps objects in an external "
                             "store. Use the keys store_file returned.");
  /* The cursor is the last key of the previous page, base64 (opaque to
   * the model, which should not edit it). */
  cleanup_free unsigned char *after = NULL;
  size_t alen = 0;
  if (cursor && (b64_decode(cursor, strlen(cursor), &after, &alen) < 0 || memchr(after, 0, alen) ||
                 !utf8_valid((char *)after, alen)))
    return mcp_tool_error(c, "`cursor` is not valid: pass next_cursor of the previous page "
                             "unchanged, or omit it to start over");
  cleanup_free char *after_s = after ? strndup((char *)after, alen) : NULL;
  if (after && !after_s)
    return mcp_tool_error(c, "out of memory");
  cleanup_json json_t *arr = json_array();
  struct store_list_req rq = {
      .prefix = prefix ? prefix : "", .after = after_s, .max_keys = (unsigned)max};
  bool truncated = false;
  cleanup_free char *next = NULL;
  struct husk_err err;
  if (store_list(s, c->caller->tenant, bucket, &rq, list_cb, arr, &truncated, &next, &err) < 0) {
    if (!(dflt && err.code == STORE_ENOBUCKET)) /* the default bucket before its first use */
      return storage_error(c, bucket, prefix ? prefix : "", "bucket", bucket, &err);
    json_array_clear(arr);
    truncated = false;
  }
  json_t *r = json_pack("{s:s, s:s, s:o, s:b}", "bucket", bucket, "prefix", prefix ? prefix : "",
                        "objects", steal_pointer(&arr), "truncated", (int)truncated);
  if (truncated && next) {
    cleanup_free char *nc = b64_encode(next, strlen(next), NULL);
    json_object_set_new(r, "next_cursor", nc ? json_string(nc) : json_null());
  }
  mcp_result(c, r, false);
  return 0;
}

static const struct mcp_tool tool_list_objects = {
    "list_objects",
    "List stored objects",
    "List the objects in one of your storage buckets (default \"" MCP_BUCKET "\", where "
    "store_file and run_code put files), in key order, optionally only keys starting with "
    "`prefix`. Returns at most max_items (default 100); when `truncated` is true, call again "
    "with cursor = next_cursor for the next page. get_link makes a download link for a key, "
    "load_file copies it into a sandbox.",
    list_params,
    "{\"type\":\"object\",\"properties\":{\"bucket\":{\"type\":\"string\"},\"prefix\":{\"type\":"
    "\"string\"},\"objects\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"
    "\"key\":{\"type\":\"string\"},\"size\":{\"type\":\"integer\"},\"etag\":{\"type\":\"string\"},"
    "\"last_modified\":{\"type\":\"string\"}}}},\"truncated\":{\"type\":\"boolean\"},"
    "\"next_cursor\":{\"type\":\"string\"}},\"required\":[\"bucket\",\"objects\",\"truncated\"]}",
    true,
    false,
    true,
    list_objects,
};

/* ---- load_file --------------------------------------------------------------------------- */

static const struct mcp_param load_params[] = {
    {"sandbox_id", MCP_P_STRING, true,
     "the sandbox to copy the object into (from "
     "sandbox_create)",
     NULL, 0, 0, 64},
    {"path", MCP_P_STRING, true,
     "where in the sandbox: a file path (parents are created, an "
     "existing file is replaced), or with extract a directory; relative paths are under "
     "/workspace",
     NULL, 0, 0, 4096},
    BUCKET_PARAM,
    {"key", MCP_P_STRING, true, "the object's key (from store_file or list_objects)", NULL, 0, 0,
     STORE_KEY_MAX},
    {"extract", MCP_P_BOOL, false,
     "the object is a tar archive (e.g. a directory stored by "
     "store_file): unpack it into the directory `path` (default false)",
     NULL, 0, 0, 0},
    END_PARAM,
};

static int load_file(struct mcp_call *c) {
  struct store *s = store_of(c);
  const char *box = mcp_arg_str(c, "sandbox_id"), *path = mcp_arg_str(c, "path");
  const char *bucket = mcp_arg_str(c, "bucket"), *key = mcp_arg_str(c, "key");
  json_t *jx = mcp_arg(c, "extract");
  bool extract = jx && json_is_true(jx);
  if (!bucket)
    bucket = MCP_BUCKET;
  audit_obj(c, bucket, key);
  struct husk_mgr *m = mcp_call_mgr(c);
  if (!m || check_box(c, m, box) < 0)
    return 0;
  uint64_t size = 0;
  struct husk_err err;
  if (box_store_get(m, s, c->caller->tenant, bucket, key, box, path, extract, &size, &err) < 0)
    return storage_error(c, bucket, key, "file", path, &err);
  mcp_result(c,
             json_pack("{s:s, s:s, s:s, s:s, s:I, s:b}", "sandbox_id", box, "path", path, "bucket",
                       bucket, "key", key, "size", (json_int_t)size, "extracted", (int)extract),
             false);
  return 0;
}

static const struct mcp_tool tool_load_file = {
    "load_file",
    "Copy a stored object into a sandbox",
    "Copy an object from storage into a sandbox as a file (or, with extract, unpack a tar "
    "archive into a directory), e.g. to continue working on a file stored earlier. The data "
    "goes straight from storage into the sandbox. Then use sandbox_exec or sandbox_read_file on "
    "it.",
    load_params,
    "{\"type\":\"object\",\"properties\":{\"sandbox_id\":{\"type\":\"string\"},\"path\":{\"type\":"
    "\"string\"},\"bucket\":{\"type\":\"string\"},\"key\":{\"type\":\"string\"},\"size\":{\"type\":"
    "\"integer\"},\"extracted\":{\"type\":\"boolean\"}},\"required\":[\"sandbox_id\",\"path\","
    "\"size\"]}",
    false,
    false,
    true,
    load_file,
};

/* ---- the hook ------------------------------------------------------------------------- */

void mcp_storage_plane(struct mcp_storage *out, struct store *s) {
  /* Listed in this order, after husk's own tools.  (C has no constant
   * initializer from other objects: the table is filled here, once, at
   * start.) */
  static struct mcp_tool tools[5];
  tools[0] = tool_store_file;
  tools[1] = tool_get_link;
  tools[2] = tool_list_objects;
  tools[3] = tool_load_file;
  tools[4] = mcp_tool_create_upload_link; /* tools_upload.c */
  *out = (struct mcp_storage){.ctx = s, .publish = publish, .tools = tools, .ntools = 5};
}
