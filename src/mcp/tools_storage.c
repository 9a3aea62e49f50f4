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

#define LIST_DEFAULT 100
#define LIST_MAX 1000
#define NAME_MAX_LEN 100
/* Objects one store_file or load_file call stores or loads (paths,
 * directory; keys, prefix): a bound on the work and the result of a call. */
#define FILES_MAX 100
#define PATH_MAX_LEN 4096

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

static json_t *link_block(const char *url, const char *key, const char *mime, uint64_t size,
                          int64_t expires_ms) {
  cleanup_json json_t *exp = json_time(expires_ms);
  char desc[160];
  snprintf(desc, sizeof desc, "expiring link (until %s)",
           json_string_value(exp) ? json_string_value(exp) : "?");
  return json_pack("{s:s, s:s, s:s, s:s, s:I, s:s}", "type", "resource_link", "uri", url, "name",
                   base_name(key), "mimeType", mime, "size", (json_int_t)size, "description", desc);
}

static void add_link_block(struct mcp_call *c, const char *url, const char *key, const char *mime,
                           uint64_t size, int64_t expires_ms) {
  mcp_add_block(c, link_block(url, key, mime, size, expires_ms));
}

/* ---- publish (run_code's output files) -------------------------------------------- */

static int publish(void *ctx, const char *tenant, const char *created_by, const char *name,
                   bool unique, const char *mime_type, int fd, uint64_t size, char **url,
                   int64_t *expires_ms, struct husk_err *err) {
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
    if (store_put_fd(s, tenant, MCP_BUCKET, key, fd, mime_type, created_by, &o, err) < 0)
      return -1;
    store_object_free(&o);
  }
  struct store_link l;
  if (store_link_create(s, tenant, MCP_BUCKET, key, 0, base_name(key), link_inline(mime_type, NULL),
                        created_by, &l, err) < 0)
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
     NULL, 0, 0, PATH_MAX_LEN},
    {"paths", MCP_P_STRLIST, false,
     "or: several sandbox paths (at most 100), each stored as its own object under "
     "key_prefix + its name (a directory among them as a tar archive)",
     NULL, 0, FILES_MAX, PATH_MAX_LEN},
    {"directory", MCP_P_STRING, false,
     "or: a sandbox directory whose files (at any depth; symlinks and special files skipped; "
     "at most 100) are each stored as their own object under key_prefix + the path below the "
     "directory -- unlike `path`, which stores a directory as one tar archive",
     NULL, 0, 0, PATH_MAX_LEN},
    {"key_prefix", MCP_P_STRING, false,
     "with paths or directory: the start of every key, e.g. run1/ (default: a new unique "
     "files/<id>/ for the call)",
     NULL, 0, 0, STORE_KEY_MAX},
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

/* ---- several files in one call ----------------------------------------------------- */

/* The outcomes of a batch (several files in one call), for the result. */
struct batch {
  json_t *files;  /* each item's outcome */
  json_t *failed; /* the names of those that failed */
  uint64_t size;  /* bytes of those that did not */
  json_t *links;  /* resource_link blocks, added after the result: an
                   * item's error is made as the call's result and taken
                   * back, which empties the content built so far */
};

static int batch_init(struct batch *bt) {
  bt->files = json_array();
  bt->failed = json_array();
  bt->size = 0;
  bt->links = json_array();
  return bt->files && bt->failed && bt->links ? 0 : -1;
}

static void batch_free(struct batch *bt) {
  json_decref(bt->files);
  json_decref(bt->failed);
  json_decref(bt->links);
}

/* Whether the rest of a batch is not to be started: the call was
 * cancelled (notifications/cancelled, or the caller left where that means
 * cancel).  A caller that merely went away leaves it to finish, as it
 * leaves a command running. */
static bool batch_cancelled(struct mcp_call *c) {
  if (!mcp_fd_readable(c->cancel_fd))
    return false;
  bool gone = c->caller->cancel_fd >= 0 && mcp_fd_readable(c->caller->cancel_fd);
  return !gone || c->caller->gone_cancels;
}

/* Record a failure of item `name`: `o` (stolen) gets the message of the
 * error result the call was just given (taken back from it). */
static void batch_fail(struct mcp_call *c, struct batch *bt, const char *name, json_t *o) {
  cleanup_free char *msg = mcp_take_error(c);
  /* The message may quote bytes from the box: made valid text. */
  bool lossy;
  json_object_set_new(o, "error",
                      msg ? mcp_text(msg, strlen(msg), &lossy) : json_string("out of memory"));
  json_array_append_new(bt->files, o);
  json_array_append_new(bt->failed, json_string(name));
}

/* The result of a batch: `r` (stolen) gets size, done_name (how many
 * worked), failed_count, failed and files; isError when one failed, the
 * others still listed. */
static void batch_result(struct mcp_call *c, struct batch *bt, json_t *r, const char *done_name) {
  size_t nfailed = json_array_size(bt->failed), nok = json_array_size(bt->files) - nfailed;
  if (!r) {
    mcp_tool_error(c, "out of memory");
    return;
  }
  json_object_set_new(r, "size", json_integer((json_int_t)bt->size));
  json_object_set_new(r, done_name, json_integer((json_int_t)nok));
  json_object_set_new(r, "failed_count", json_integer((json_int_t)nfailed));
  json_object_set_new(r, "failed", bt->failed);
  json_object_set_new(r, "files", bt->files);
  bt->failed = bt->files = NULL;
  if (nfailed)
    json_object_set_new(r, "notes",
                        json_pack("[s]", "some failed: `failed` names them and each one's "
                                         "`error` says why; the others were done"));
  mcp_result(c, r, nfailed > 0);
  size_t i;
  json_t *l;
  json_array_foreach(bt->links, i, l) mcp_add_block(c, json_incref(l));
}

/* The files under a box directory: their box paths and their paths
 * below it. */
struct walk {
  json_t *paths;  /* [[box path, relative path], ...] */
  size_t dir_len; /* length of the directory's box path, once known */
  bool too_many;
  size_t not_utf8; /* files skipped: a key is UTF-8, their names are not */
};

static int walk_cb(void *ctx, const struct husk_dirent *e) {
  struct walk *w = ctx;
  if (e->depth == 1 && !w->dir_len && strlen(e->path) > strlen(e->name))
    w->dir_len = strlen(e->path) - strlen(e->name) - 1;
  if (e->type != 'f')
    return 0;
  if (json_array_size(w->paths) >= FILES_MAX) {
    w->too_many = true;
    return 1;
  }
  if (!w->dir_len || strlen(e->path) <= w->dir_len + 1)
    return -1;
  if (!utf8_valid(e->path, strlen(e->path))) {
    w->not_utf8++;
    return 0;
  }
  json_array_append_new(w->paths, json_pack("[s, s]", e->path, e->path + w->dir_len + 1));
  return 0;
}

/* Whether an item of a batch is already loaded at `path`. */
static bool key_taken_path(json_t *files, const char *path) {
  size_t i;
  json_t *o;
  json_array_foreach(files, i, o) {
    const char *p = json_string_value(json_object_get(o, "path"));
    if (p && !strcmp(p, path))
      return true;
  }
  return false;
}

/* Whether two items of a batch would be the same object. */
static bool key_taken(json_t *files, const char *key) {
  size_t i;
  json_t *o;
  json_array_foreach(files, i, o) {
    const char *k = json_string_value(json_object_get(o, "key"));
    if (k && !strcmp(k, key))
      return true;
  }
  return false;
}

/* store_file with paths or directory: each file its own object. */
static int store_files(struct mcp_call *c, struct store *s, const char *box, json_t *paths,
                       const char *dir, const char *bucket, const char *prefix, int64_t exp,
                       const char *disp) {
  struct husk_mgr *m = mcp_call_mgr(c);
  if (!m || check_box(c, m, box) < 0)
    return 0;
  struct husk_err err;
  /* The caller writes the objects and makes their links, not the box. */
  char creator[STORE_CREATED_BY_SIZE];
  mcp_created_by(c->caller, creator, sizeof creator);
  /* [[box path, name below the key prefix], ...] */
  cleanup_json json_t *items = json_array();
  if (!items)
    return mcp_tool_error(c, "out of memory");
  size_t not_utf8 = 0;
  if (dir) {
    struct husk_fs b;
    if (mcp_box_fs(m, c->caller->tenant, box, &b, &err) < 0)
      return mcp_tool_core_error(c, "sandbox", box, &err);
    b.list_max = 100000;
    struct walk w = {.paths = items};
    int rc = husk_file_list(&b, dir, HUSK_LIST_MAX_DEPTH, walk_cb, &w, &err);
    close(b.fs);
    if (rc < 0)
      return mcp_tool_core_error(c, "directory", dir, &err);
    if (w.too_many || rc > 0)
      return mcp_tool_error(c,
                            "`%s` holds more than %d files: store it as one tar archive "
                            "(`path`), or its subdirectories one call each",
                            dir, FILES_MAX);
    not_utf8 = w.not_utf8;
    if (!json_array_size(items))
      return mcp_tool_error(c, "`%s` holds no files to store%s", dir,
                            not_utf8 ? " (but files whose names are not UTF-8, which no key "
                                       "can name)"
                                     : "");
  } else {
    /* Each named by its last part ("out/" by "out"). */
    size_t i;
    json_t *p;
    json_array_foreach(paths, i, p) {
      const char *ps = json_string_value(p);
      size_t n = strlen(ps);
      while (n > 1 && ps[n - 1] == '/')
        n--;
      size_t start = n;
      while (start > 0 && ps[start - 1] != '/')
        start--;
      json_t *name = json_stringn(ps + start, n - start);
      json_array_append_new(items, json_pack("[s, o]", ps, name ? name : json_string("")));
    }
  }
  cleanup_free char *auto_prefix = NULL;
  if (!prefix) {
    char hex[17];
    if (id_new(NULL, 8, hex, sizeof hex, &err) < 0)
      return mcp_tool_error(c, "%s", err.msg);
    if (asprintf(&auto_prefix, "files/%s/", hex) < 0) {
      auto_prefix = NULL;
      return mcp_tool_error(c, "out of memory");
    }
    prefix = auto_prefix;
  }
  audit_obj(c, bucket, prefix);
  struct batch bt;
  if (batch_init(&bt) < 0) {
    batch_free(&bt);
    return mcp_tool_error(c, "out of memory");
  }
  size_t i;
  json_t *it;
  json_array_foreach(items, i, it) {
    const char *path = json_string_value(json_array_get(it, 0));
    const char *name = json_string_value(json_array_get(it, 1));
    cleanup_free char *key = NULL;
    if (asprintf(&key, "%s%s", prefix, name) < 0) {
      key = NULL;
      mcp_tool_error(c, "out of memory");
      batch_fail(c, &bt, path, json_pack("{s:s}", "path", path));
      continue;
    }
    json_t *o = json_pack("{s:s, s:s}", "path", path, "key", key);
    if (!o)
      continue;
    mcp_progress(c, i + 1, path);
    if (batch_cancelled(c)) {
      mcp_tool_error(c, "not stored: the call was cancelled");
      batch_fail(c, &bt, path, o);
      continue;
    }
    if (!*name || !strcmp(name, ".") || !strcmp(name, "..") || !strcmp(name, "/")) {
      mcp_tool_error(c, "`%s` has no name to make its key of: store it with `path` and a `key`",
                     path);
      batch_fail(c, &bt, path, o);
      continue;
    }
    if (key_taken(bt.files, key)) {
      mcp_tool_error(c,
                     "`%s` has the same key as an earlier path (%s): store it in another call "
                     "or with another key_prefix",
                     path, key);
      batch_fail(c, &bt, path, o);
      continue;
    }
    const char *dl = strchr(base_name(key), '/') ? NULL : base_name(key);
    struct box_store_result res;
    if (box_store_put(m, s, c->caller->tenant, box, path, bucket, key, true, exp, dl,
                      link_inline(box_store_guess_type(key), disp), creator, &res, &err) < 0) {
      storage_error(c, bucket, key, "file", path, &err);
      batch_fail(c, &bt, path, o);
      continue;
    }
    const char *mime = res.tar ? "application/x-tar" : box_store_guess_type(key);
    json_object_set_new(o, "size", json_integer((json_int_t)res.size));
    json_object_set_new(o, "etag", json_string(res.etag));
    json_object_set_new(o, "url", json_string(res.url ? res.url : ""));
    json_object_set_new(o, "expires_at", json_time(res.expires_ms));
    json_object_set_new(o, "link_id", json_string(res.link_id));
    json_object_set_new(o, "content_type", json_string(mime));
    json_object_set_new(o, "tar", json_boolean(res.tar));
    json_array_append_new(bt.files, o);
    bt.size += res.size;
    if (res.url)
      json_array_append_new(bt.links, link_block(res.url, key, mime, res.size, res.expires_ms));
    box_store_result_free(&res);
  }
  json_t *r = json_pack("{s:s, s:s}", "bucket", bucket, "key_prefix", prefix);
  if (r && not_utf8)
    json_object_set_new(r, "skipped_not_utf8", json_integer((json_int_t)not_utf8));
  batch_result(c, &bt, r, "stored");
  batch_free(&bt);
  return 0;
}

static int store_file(struct mcp_call *c) {
  struct store *s = store_of(c);
  /* The caller writes the object and makes its link, not the box. */
  char creator[STORE_CREATED_BY_SIZE];
  mcp_created_by(c->caller, creator, sizeof creator);
  const char *box = mcp_arg_str(c, "sandbox_id"), *path = mcp_arg_str(c, "path");
  const char *enc = mcp_arg_str(c, "encoding"), *bucket = mcp_arg_str(c, "bucket");
  const char *key = mcp_arg_str(c, "key"), *ctype = mcp_arg_str(c, "content_type");
  const char *filename = mcp_arg_str(c, "filename"), *disp = mcp_arg_str(c, "disposition");
  json_t *content = mcp_arg(c, "content"), *paths = mcp_arg(c, "paths");
  const char *dir = mcp_arg_str(c, "directory"), *key_prefix = mcp_arg_str(c, "key_prefix");
  int64_t exp = 0;
  mcp_arg_int(c, "expires_in_seconds", &exp);
  if (!bucket)
    bucket = MCP_BUCKET;
  audit_obj(c, bucket, key);
  if (content && (box || path))
    return mcp_tool_error(c, "give either `content` or `sandbox_id` + `path`, not both");
  if ((paths != NULL) + (dir != NULL) + (path != NULL) + (content != NULL) > 1)
    return mcp_tool_error(c, "give one of `path`, `paths`, `directory` (with sandbox_id) or "
                             "`content`");
  if (key_prefix && !paths && !dir)
    return mcp_tool_error(c, "`key_prefix` is for `paths` and `directory`: with one file, give "
                             "its whole `key`");
  if (paths || dir) {
    if (!box)
      return mcp_tool_error(c, "`%s` needs the sandbox_id it is in", paths ? "paths" : "directory");
    if (key || filename || ctype)
      return mcp_tool_error(c, "with several files, `key_prefix` names them: `key`, `filename` "
                               "and `content_type` are for one file");
    if (!links_possible(s))
      return mcp_tool_error(c, NO_LINKS_MSG);
    return store_files(c, s, box, paths, dir, bucket, key_prefix, exp, disp);
  }
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
        creator, &res, &err);
  } else {
    struct husk_mgr *m = mcp_call_mgr(c);
    if (!m || check_box(c, m, box) < 0)
      return 0;
    /* A directory is stored as a tar: a download whatever was asked. */
    rc = box_store_put(m, s, c->caller->tenant, box, path, bucket, key, true, exp, dl,
                       link_inline(box_store_guess_type(key), disp), creator, &res, &err);
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

/* store_file's scope: storing is storage:write; reading the sandbox file
 * it stores is sandbox:read besides (as REST POST .../store).  Only
 * `content` without a sandbox reads none. */
static unsigned store_file_scope(json_t *args) {
  bool content_only = json_object_get(args, "content") && !json_object_get(args, "sandbox_id");
  return AUTH_SCOPE_STORAGE_WRITE | (content_only ? 0 : AUTH_SCOPE_SANDBOX_READ);
}

static const struct mcp_tool tool_store_file = {
    "store_file",
    "Store a file and get a link",
    "Put a file into object storage and get a download link to share: a report, a chart, a "
    "cleaned table. Either from a sandbox (sandbox_id + path; a directory is stored as one tar "
    "archive; several files at once: `paths`, or `directory` for every file under it, each its "
    "own object named key_prefix + its name, at most 100, each with its own outcome) or from "
    "content you pass (text, or base64 with encoding \"base64\"; at most 3 MB "
    "— for more, write it in a sandbox first). The object is kept in your bucket (default "
    "\"" MCP_BUCKET "\") until deleted; the link is a presigned URL that expires (default 1 hour, "
    "at most 7 days; get_link makes a new one). Give the user the `url`. load_file copies an "
    "object back into a sandbox.",
    store_params,
    /* One object: its key, url...  Several (paths, directory): size (of
     * all), stored, failed_count, failed and files (each one's outcome);
     * bucket and size are in both. */
    "{\"type\":\"object\",\"properties\":{" LINK_PROPS ",\"etag\":{\"type\":\"string\"},\"tar\":"
    "{\"type\":\"boolean\"},\"key_prefix\":{\"type\":\"string\"},\"stored\":{\"type\":"
    "\"integer\"},\"failed_count\":{\"type\":\"integer\"},\"skipped_not_utf8\":{\"type\":"
    "\"integer\",\"description\":\"directory: files not stored, their names not UTF-8\"},"
    "\"failed\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},\"files\":{\"type\":\"array\","
    "\"items\":{\"type\":"
    "\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"error\":{\"type\":"
    "\"string\"},\"etag\":{\"type\":\"string\"},\"tar\":{\"type\":\"boolean\"}," LINK_PROPS
    "},\"required\":[\"path\"]}},\"notes\":{\"type\":\"array\"}},\"required\":[\"bucket\","
    "\"size\"]}",
    false,
    false,
    false,
    store_file,
    .scope = AUTH_SCOPE_SANDBOX_READ | AUTH_SCOPE_STORAGE_WRITE, .scope_of = store_file_scope,
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
  char creator[STORE_CREATED_BY_SIZE];
  mcp_created_by(c->caller, creator, sizeof creator);
  if (store_link_create(s, c->caller->tenant, bucket, key, exp, dl, link_inline(ctype, disp),
                        creator, &l, &err) < 0)
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
    .scope = AUTH_SCOPE_STORAGE_READ,
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
  if (e->is_prefix)
    return 0;
  json_t *o = json_pack("{s:s, s:I, s:s, s:o}", "key", e->key, "size", (json_int_t)e->size, "etag",
                        e->etag ? e->etag : "", "last_modified", json_time(e->mtime_ms));
  /* Who wrote it, left out for nobody (as MCP's sandbox results do). */
  if (o && e->created_by && e->created_by[0])
    json_object_set_new(o, "created_by", json_string(e->created_by));
  json_array_append_new(ctx, o);
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
    "\"last_modified\":{\"type\":\"string\"},\"created_by\":{\"type\":\"string\"}}}},"
    "\"truncated\":{\"type\":\"boolean\"},"
    "\"next_cursor\":{\"type\":\"string\"}},\"required\":[\"bucket\",\"objects\",\"truncated\"]}",
    true,
    false,
    true,
    list_objects,
    .scope = AUTH_SCOPE_STORAGE_READ,
};

/* ---- load_file --------------------------------------------------------------------------- */

static const struct mcp_param load_params[] = {
    {"sandbox_id", MCP_P_STRING, true,
     "the sandbox to copy the object into (from "
     "sandbox_create)",
     NULL, 0, 0, 64},
    {"path", MCP_P_STRING, true,
     "where in the sandbox: a file path (parents are created, an "
     "existing file is replaced), or with extract, keys or prefix a directory; relative paths "
     "are under /workspace",
     NULL, 0, 0, PATH_MAX_LEN},
    BUCKET_PARAM,
    {"key", MCP_P_STRING, false, "the object's key (from store_file or list_objects)", NULL, 0, 0,
     STORE_KEY_MAX},
    {"keys", MCP_P_STRLIST, false,
     "or: several keys (at most 100), each loaded as a file into the directory `path`, at its "
     "key less the directory all the keys share (\"r/a.csv\" and \"r/d/b.csv\" become "
     "path/a.csv and path/d/b.csv)",
     NULL, 0, FILES_MAX, STORE_KEY_MAX},
    {"prefix", MCP_P_STRING, false,
     "or: every object whose key starts with this (at most 100), each loaded into the "
     "directory `path` at its key less the prefix (\"run1/\" puts run1/x/y.csv at path/x/y.csv)",
     NULL, 0, 0, STORE_KEY_MAX},
    {"extract", MCP_P_BOOL, false,
     "the object is a tar archive (e.g. a directory stored by "
     "store_file): unpack it into the directory `path` (default false)",
     NULL, 0, 0, 0},
    END_PARAM,
};

/* Whether a key's part `rel` may name a file below a load's directory: a
 * plain relative path (not empty, not absolute, no empty, "." or ".."
 * component).  A key is the store's name, never trusted as a path. */
static bool rel_ok(const char *rel) {
  if (!*rel || *rel == '/')
    return false;
  for (const char *p = rel; *p;) {
    const char *e = strchr(p, '/');
    size_t n = e ? (size_t)(e - p) : strlen(p);
    if (n == 0 || (n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
      return false;
    if (!e)
      break;
    p = e + 1;
    if (!*p)
      return false; /* a trailing '/': a folder marker, not a file */
  }
  return true;
}

static int collect_cb(void *ctx, const struct store_entry *e) {
  if (!e->is_prefix)
    json_array_append_new(ctx, json_string(e->key));
  return 0;
}

/* load_file with keys or prefix: each object a file under directory
 * `dir`. */
static int load_files(struct mcp_call *c, struct store *s, const char *box, const char *dir,
                      const char *bucket, json_t *keys, const char *prefix) {
  struct husk_err err;
  cleanup_json json_t *list = NULL;
  size_t strip = 0;
  if (prefix) {
    if (store_remote(s))
      return mcp_tool_error(c, "`prefix` is not available: this server keeps objects in an "
                               "external store, which husk cannot list. Give the `keys`.");
    list = json_array();
    bool truncated = false;
    cleanup_free char *next = NULL;
    struct store_list_req rq = {.prefix = prefix, .max_keys = FILES_MAX + 1};
    if (!list)
      return mcp_tool_error(c, "out of memory");
    if (store_list(s, c->caller->tenant, bucket, &rq, collect_cb, list, &truncated, &next, &err) <
        0)
      return storage_error(c, bucket, prefix, "bucket", bucket, &err);
    if (truncated || json_array_size(list) > FILES_MAX)
      return mcp_tool_error(c,
                            "more than %d objects start with `%.300s`: load them with a longer "
                            "prefix, one call each",
                            FILES_MAX, prefix);
    if (!json_array_size(list))
      return mcp_tool_error(c,
                            "no object in bucket `%.63s` starts with `%.300s`: list_objects "
                            "shows the keys there",
                            bucket, prefix);
    strip = strlen(prefix);
  } else {
    list = json_incref(keys);
    /* The directory every key shares: up to the last '/' common to all. */
    size_t i;
    json_t *k;
    const char *first = json_string_value(json_array_get(list, 0));
    size_t common = strlen(first);
    json_array_foreach(list, i, k) {
      const char *ks = json_string_value(k);
      size_t n = 0;
      while (n < common && ks[n] && ks[n] == first[n])
        n++;
      common = n;
    }
    while (common > 0 && first[common - 1] != '/')
      common--;
    strip = common;
  }
  /* The directory without its trailing '/'s (they would double). */
  int dlen = (int)strnlen(dir, PATH_MAX_LEN);
  while (dlen > 1 && dir[dlen - 1] == '/')
    dlen--;
  struct batch bt;
  if (batch_init(&bt) < 0) {
    batch_free(&bt);
    return mcp_tool_error(c, "out of memory");
  }
  size_t i;
  json_t *k;
  json_array_foreach(list, i, k) {
    const char *key = json_string_value(k), *rel = key + strip;
    if (prefix && *rel == '/')
      rel++; /* prefix "run1" loads run1/x.csv as x.csv */
    json_t *o = json_pack("{s:s}", "key", key);
    if (!o)
      continue;
    mcp_progress(c, i + 1, key);
    if (batch_cancelled(c)) {
      mcp_tool_error(c, "not loaded: the call was cancelled");
      batch_fail(c, &bt, key, o);
      continue;
    }
    if (!rel_ok(rel)) {
      mcp_tool_error(c,
                     "key `%.300s` does not name a file below `%s`: what follows the shared "
                     "part (`%.300s`) must be a relative path without empty, `.` or `..` parts",
                     key, dir, rel);
      batch_fail(c, &bt, key, o);
      continue;
    }
    cleanup_free char *path = NULL;
    if (asprintf(&path, "%.*s/%s", dlen, dir, rel) < 0) {
      path = NULL;
      mcp_tool_error(c, "out of memory");
      batch_fail(c, &bt, key, o);
      continue;
    }
    json_object_set_new(o, "path", json_string(path));
    if (key_taken_path(bt.files, path)) {
      mcp_tool_error(c, "key `%.300s` would be loaded at `%s` as an earlier key was", key, path);
      batch_fail(c, &bt, key, o);
      continue;
    }
    uint64_t size = 0;
    if (box_store_get(mcp_call_mgr(c), s, c->caller->tenant, bucket, key, box, path, false, &size,
                      &err) < 0) {
      storage_error(c, bucket, key, "file", path, &err);
      batch_fail(c, &bt, key, o);
      continue;
    }
    json_object_set_new(o, "size", json_integer((json_int_t)size));
    json_array_append_new(bt.files, o);
    bt.size += size;
  }
  batch_result(c, &bt,
               json_pack("{s:s, s:s, s:s, s:b}", "sandbox_id", box, "path", dir, "bucket", bucket,
                         "extracted", 0),
               "loaded");
  batch_free(&bt);
  return 0;
}

static int load_file(struct mcp_call *c) {
  struct store *s = store_of(c);
  const char *box = mcp_arg_str(c, "sandbox_id"), *path = mcp_arg_str(c, "path");
  const char *bucket = mcp_arg_str(c, "bucket"), *key = mcp_arg_str(c, "key");
  const char *prefix = mcp_arg_str(c, "prefix");
  json_t *jx = mcp_arg(c, "extract"), *keys = mcp_arg(c, "keys");
  bool extract = jx && json_is_true(jx);
  if (!bucket)
    bucket = MCP_BUCKET;
  audit_obj(c, bucket, key ? key : prefix);
  if ((key != NULL) + (keys != NULL) + (prefix != NULL) != 1)
    return mcp_tool_error(c, "give one of `key` (one object), `keys` (several) or `prefix` "
                             "(every object whose key starts with it)");
  if (extract && !key)
    return mcp_tool_error(c, "`extract` is for one tar object (`key`), not with keys or prefix");
  struct husk_mgr *m = mcp_call_mgr(c);
  if (!m || check_box(c, m, box) < 0)
    return 0;
  if (!key)
    return load_files(c, store_of(c), box, path, bucket, keys, prefix);
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
    "it. Several objects at once: `keys` (a list), or `prefix` (every object whose key starts "
    "with it), at most 100, into the directory `path`; the result lists each one's outcome.",
    load_params,
    "{\"type\":\"object\",\"properties\":{\"sandbox_id\":{\"type\":\"string\"},\"path\":{\"type\":"
    "\"string\"},\"bucket\":{\"type\":\"string\"},\"key\":{\"type\":\"string\"},\"size\":{\"type\":"
    "\"integer\"},\"extracted\":{\"type\":\"boolean\"},\"loaded\":{\"type\":\"integer\"},"
    "\"failed_count\":{\"type\":\"integer\"},\"failed\":{\"type\":\"array\",\"items\":{\"type\":"
    "\"string\"}},\"files\":{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{"
    "\"key\":{\"type\":\"string\"},\"path\":{\"type\":\"string\"},\"size\":{\"type\":"
    "\"integer\"},\"error\":{\"type\":\"string\"}},\"required\":[\"key\"]}},\"notes\":{\"type\":"
    "\"array\"}},\"required\":[\"sandbox_id\",\"path\",\"size\"]}",
    false,
    false,
    true,
    load_file,
    /* It reads an object and writes a sandbox: as REST /load. */
    .scope = AUTH_SCOPE_SANDBOX | AUTH_SCOPE_STORAGE_READ,
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
