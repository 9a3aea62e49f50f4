/* MCP resources: what a client may read as context without a tool call.
 *
 *   husk://docs/{path}                   the operator's documents directory
 *                                        (--resources DIR), read-only
 *   husk://store/{bucket}/{key}          the tenant's stored objects
 *   husk://sandbox/{id}/files/{path}     a live sandbox's files (path from /)
 *
 * resources/list pages through the documents, then the tenant's objects
 * (a sandbox's files are reached by the template: a listing of every file
 * of every sandbox would have no bound).  resources/read returns text or a
 * blob of at most MCP_CONTENT_MAX bytes; a larger stored object comes back
 * as a note with an expiring link, a larger file as a note saying how to
 * read it in pages.  URIs percent-encode every byte but unreserved ones
 * and '/'; reads decode them, refusing NUL and invalid UTF-8.
 *
 * Subscriptions (resources/subscribe, legacy era, on a transport that can
 * send a notification after the reply: stdio) are polled: once a second
 * the subscribed resources' sizes and times are compared with what they
 * were, and a change is notifications/resources/updated. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "husk/files.h"
#include "jail/syscalls.h"
#include "mcp/boxio.h"
#include "mcp/internal.h"
#include "storage/remote.h"
#include "storage/store.h"
#include "util/base64.h"
#include "util/cleanup.h"
#include "util/clock.h"
#include "util/cleanup_json.h"
#include "util/utf8.h"

#define DOCS_PREFIX "husk://docs/"
#define STORE_PREFIX "husk://store/"
#define BOX_PREFIX "husk://sandbox/"

/* ---- URIs ---------------------------------------------------------------------- */

static bool unreserved(unsigned char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         ch == '-' || ch == '.' || ch == '_' || ch == '~' || ch == '/';
}

/* prefix + s, percent-encoded: malloc'd. */
static char *uri_make(const char *prefix, const char *a, const char *b) {
  size_t n = strlen(prefix) + 3 * (strlen(a) + (b ? strlen(b) + 1 : 0)) + 1;
  char *out = malloc(n), *w = out;
  if (!out)
    return NULL;
  w += sprintf(w, "%s", prefix);
  for (int part = 0; part < 2; part++) {
    const char *s = part ? b : a;
    if (!s)
      break;
    if (part)
      *w++ = '/';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
      w += unreserved(*p) ? sprintf(w, "%c", *p) : sprintf(w, "%%%02X", *p);
  }
  *w = '\0';
  return out;
}

static int hexval(char c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                        : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Percent-decode s[0..n): malloc'd, or NULL (bad escape, NUL, not UTF-8). */
static char *uri_decode(const char *s, size_t n) {
  char *out = malloc(n + 1);
  size_t o = 0;
  if (!out)
    return NULL;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '%') {
      int hi = i + 2 < n ? hexval(s[i + 1]) : -1, lo = i + 2 < n ? hexval(s[i + 2]) : -1;
      int h = hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
      if (h <= 0) { /* a bad escape, or %00 */
        free(out);
        return NULL;
      }
      out[o++] = (char)h;
      i += 2;
    } else {
      out[o++] = s[i];
    }
  }
  out[o] = '\0';
  if (memchr(out, 0, o) || !utf8_valid(out, o)) {
    free(out);
    return NULL;
  }
  return out;
}

enum res_kind { RES_DOCS, RES_STORE, RES_BOX };

/* A parsed resource URI: the decoded parts (malloc'd). */
struct res_uri {
  enum res_kind kind;
  char *a; /* docs: path; store: bucket; box: id */
  char *b; /* store: key; box: "/" + path */
};

static void res_uri_free(struct res_uri *u) {
  free(u->a);
  free(u->b);
  u->a = u->b = NULL;
}

static bool starts(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

/* 0, or -1: not a URI of this server. */
static int res_parse(const char *uri, struct res_uri *u) {
  memset(u, 0, sizeof *u);
  if (strlen(uri) > MCP_URI_MAX)
    return -1;
  if (starts(uri, DOCS_PREFIX)) {
    u->kind = RES_DOCS;
    const char *p = uri + strlen(DOCS_PREFIX);
    u->a = uri_decode(p, strlen(p));
    return u->a && u->a[0] ? 0 : (res_uri_free(u), -1);
  }
  if (starts(uri, STORE_PREFIX)) {
    u->kind = RES_STORE;
    const char *p = uri + strlen(STORE_PREFIX), *slash = strchr(p, '/');
    if (!slash || slash == p || !slash[1])
      return -1;
    u->a = uri_decode(p, (size_t)(slash - p));
    u->b = uri_decode(slash + 1, strlen(slash + 1));
    return u->a && u->b ? 0 : (res_uri_free(u), -1);
  }
  if (starts(uri, BOX_PREFIX)) {
    u->kind = RES_BOX;
    const char *p = uri + strlen(BOX_PREFIX), *slash = strchr(p, '/');
    if (!slash || slash == p || !starts(slash, "/files/") || !slash[7])
      return -1;
    u->a = uri_decode(p, (size_t)(slash - p));
    const char *path = slash + 6; /* keeps the '/' */
    u->b = uri_decode(path, strlen(path));
    return u->a && u->b ? 0 : (res_uri_free(u), -1);
  }
  return -1;
}

/* ---- the documents directory ---------------------------------------------------- */

int mcp_docs_open(const char *dir, int *fd, struct husk_err *err) {
  *fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (*fd < 0)
    return husk_error(err, errno, "resources directory %s: %s", dir, strerror(errno));
  return 0;
}

struct mcp_doc {
  char *path; /* relative, '/'-separated */
  uint64_t size;
};

struct doc_walk {
  struct mcp_doc *v;
  size_t n, cap;
  size_t visited; /* directory entries looked at, whatever they are */
  bool cut;
};

/* Regular files under dfd, names starting with '.' skipped, symlinks not
 * followed, at most MCP_DOCS_DEPTH levels and MCP_DOCS_MAX files. */
static int docs_walk(int dfd, const char *rel, int depth, struct doc_walk *w) {
  cleanup_close int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  DIR *dp = fdopendir(fd);
  if (!dp)
    return -1;
  fd = -1; /* the DIR owns it */
  struct dirent *de;
  int rc = 0;
  while (rc == 0 && (de = readdir(dp))) {
    if (++w->visited > MCP_DOCS_VISIT_MAX) {
      w->cut = true;
      break;
    }
    if (de->d_name[0] == '.')
      continue;
    struct stat st;
    if (fstatat(dirfd(dp), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
      continue;
    cleanup_free char *path = NULL;
    if (asprintf(&path, "%s%s%s", rel, rel[0] ? "/" : "", de->d_name) < 0) {
      rc = -1;
      break;
    }
    if (S_ISDIR(st.st_mode) && depth < MCP_DOCS_DEPTH) {
      int sub = openat(dirfd(dp), de->d_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
      if (sub >= 0) {
        rc = docs_walk(sub, path, depth + 1, w);
        close(sub);
      }
    } else if (S_ISREG(st.st_mode)) {
      if (w->n == MCP_DOCS_MAX) {
        w->cut = true;
        break;
      }
      if (w->n == w->cap) {
        size_t nc = w->cap ? w->cap * 2 : 64;
        struct mcp_doc *nv = realloc(w->v, nc * sizeof *nv);
        if (!nv) {
          rc = -1;
          break;
        }
        w->v = nv;
        w->cap = nc;
      }
      if (!utf8_valid(path, strlen(path)))
        continue;
      w->v[w->n++] = (struct mcp_doc){.path = steal_pointer(&path), .size = (uint64_t)st.st_size};
    }
  }
  closedir(dp);
  return rc;
}

static int doc_cmp(const void *a, const void *b) {
  return strcmp(((const struct mcp_doc *)a)->path, ((const struct mcp_doc *)b)->path);
}

/* Open a document for reading: resolved inside the directory (a symlink
 * cannot lead out of it), regular files only, no name starting with '.'. */
static int doc_open(int root, const char *path, struct stat *st, struct husk_err *err) {
  for (const char *p = path; p; p = strchr(p, '/') ? strchr(p, '/') + 1 : NULL)
    if (*p == '.' || *p == '/' || *p == '\0')
      return husk_error(err, ENOENT, "no such document");
  int fd = sys_openat2(root, path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY, 0,
                       RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV);
  if (fd < 0)
    return husk_error(err, ENOENT, "no such document");
  if (fstat(fd, st) < 0 || !S_ISREG(st->st_mode)) {
    close(fd);
    return husk_error(err, ENOENT, "no such document");
  }
  return fd;
}

/* Drop the kept walk of the documents (s->docs_lock held, or at the end). */
static void docs_forget(struct mcp_server *s) {
  for (size_t i = 0; i < s->ndocs; i++)
    free(s->docs[i].path);
  free(s->docs);
  s->docs = NULL;
  s->ndocs = 0;
  s->docs_walked = false;
}

/* ---- resources/list ------------------------------------------------------------ */

/* The cursor: base64 of "d<path>" (after this document) or
 * "s<bucket>\n<key>" (after this object). */
static char *cursor_make(char kind, const char *a, const char *b) {
  cleanup_free char *raw = NULL;
  if (asprintf(&raw, "%c%s%s%s", kind, a, b ? "\n" : "", b ? b : "") < 0)
    return NULL;
  return b64_encode(raw, strlen(raw), NULL);
}

static json_t *resource_json(const char *uri, const char *name, const char *mime, uint64_t size,
                             const char *desc) {
  json_t *o = json_pack("{s:s, s:s, s:s, s:I}", "uri", uri, "name", name, "mimeType", mime,
                        "size", (json_int_t)size);
  if (o && desc)
    json_object_set_new(o, "description", json_string(desc));
  return o;
}

struct store_page {
  json_t *arr;
  const char *bucket;
  size_t want;
  char *last_key;
};

static int store_entry_cb(void *ctx, const struct store_entry *e) {
  struct store_page *p = ctx;
  if (e->is_prefix || json_array_size(p->arr) >= p->want)
    return 0;
  cleanup_free char *uri = uri_make(STORE_PREFIX, p->bucket, e->key);
  if (!uri)
    return -1;
  json_array_append_new(p->arr, resource_json(uri, e->key, mcp_mime_by_name(e->key), e->size,
                                              NULL));
  free(p->last_key);
  p->last_key = strdup(e->key);
  return 0;
}

struct names {
  char **v;
  size_t n, cap;
};

static int bucket_cb(void *ctx, const char *name, int64_t created_ms) {
  (void)created_ms;
  struct names *ns = ctx;
  if (store_bucket_reserved(name) || ns->n >= 10000)
    return 0;
  if (ns->n == ns->cap) {
    size_t nc = ns->cap ? ns->cap * 2 : 16;
    char **nv = realloc(ns->v, nc * sizeof *nv);
    if (!nv)
      return -1;
    ns->v = nv;
    ns->cap = nc;
  }
  return (ns->v[ns->n] = strdup(name)) ? (ns->n++, 0) : -1;
}

static int str_cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

json_t *mcp_resources_list(struct mcp_server *s, const struct mcp_caller *c, json_t *cursor,
                           char **next, char *why, size_t whylen) {
  *next = NULL;
  cleanup_free unsigned char *cur = NULL;
  size_t clen = 0;
  if (cursor && !json_is_null(cursor)) {
    if (!json_is_string(cursor) ||
        b64_decode(json_string_value(cursor), json_string_length(cursor), &cur, &clen) < 0 ||
        clen < 1 || (cur[0] != 'd' && cur[0] != 's') || memchr(cur, 0, clen)) {
      snprintf(why, whylen, "unknown cursor");
      return NULL;
    }
    unsigned char *nc = realloc(cur, clen + 1);
    if (!nc) {
      snprintf(why, whylen, "out of memory");
      return NULL;
    }
    cur = nc;
    cur[clen] = '\0';
  }
  const char *cpos = cur ? (const char *)cur + 1 : NULL;
  json_t *arr = json_array();
  if (!arr) {
    snprintf(why, whylen, "out of memory");
    return NULL;
  }
  /* The documents, unless the cursor is already past them. */
  if (s->docs_fd >= 0 && (!cur || cur[0] == 'd')) {
    /* The walk is kept a few seconds: paging through ten thousand
     * documents walks the directory once, not once per page. */
    pthread_mutex_lock(&s->docs_lock);
    int64_t now_ms = mono_ms();
    if (!s->docs_walked || now_ms - s->docs_walked_ms > MCP_DOCS_CACHE_MS) {
      docs_forget(s);
      struct doc_walk w = {0};
      int dfd = openat(s->docs_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (dfd >= 0) {
        docs_walk(dfd, "", 0, &w);
        close(dfd);
      }
      if (w.n)
        qsort(w.v, w.n, sizeof *w.v, doc_cmp);
      s->docs = w.v;
      s->ndocs = w.n;
      s->docs_walked = true;
      s->docs_walked_ms = now_ms;
    }
    struct doc_walk w = {.v = s->docs, .n = s->ndocs};
    for (size_t i = 0; i < w.n; i++) {
      if (cpos && strcmp(w.v[i].path, cpos) <= 0)
        continue;
      if (json_array_size(arr) == MCP_RESOURCES_PAGE) {
        *next = cursor_make('d', w.v[i - 1].path, NULL);
        break;
      }
      cleanup_free char *uri = uri_make(DOCS_PREFIX, w.v[i].path, NULL);
      if (uri)
        json_array_append_new(arr, resource_json(uri, w.v[i].path, mcp_mime_by_name(w.v[i].path),
                                                 w.v[i].size, "a document of this server"));
    }
    pthread_mutex_unlock(&s->docs_lock);
    cpos = NULL; /* the objects start from the first */
    if (*next)
      return arr;
  }
  const struct mcp_storage *st = s->cfg.storage;
  struct store *store = st ? st->ctx : NULL;
  if (!store || store_remote(store) || !c->tenant)
    return arr; /* an external store has no listing to page through */
  if (!(c->scopes & AUTH_SCOPE_STORAGE_READ))
    return arr; /* a token without storage:read sees the documents only */
  if (json_array_size(arr) == MCP_RESOURCES_PAGE) {
    /* The documents filled the page: the objects from their start. */
    *next = cursor_make('s', "", NULL);
    return arr;
  }
  const char *cur_bucket = NULL, *cur_key = NULL;
  cleanup_free char *cb = NULL;
  if (cpos && cur[0] == 's' && *cpos) {
    const char *nl = strchr(cpos, '\n');
    if (!nl) {
      json_decref(arr);
      snprintf(why, whylen, "unknown cursor");
      return NULL;
    }
    cb = strndup(cpos, (size_t)(nl - cpos));
    cur_bucket = cb;
    cur_key = nl + 1;
  }
  struct names ns = {0};
  struct husk_err err;
  if (store_bucket_list(store, c->tenant, bucket_cb, &ns, &err) == 0 && ns.n)
    qsort(ns.v, ns.n, sizeof *ns.v, str_cmp);
  for (size_t i = 0; i < ns.n && !*next; i++) {
    if (cur_bucket && strcmp(ns.v[i], cur_bucket) < 0)
      continue;
    bool same = cur_bucket && !strcmp(ns.v[i], cur_bucket);
    size_t room = MCP_RESOURCES_PAGE - json_array_size(arr);
    struct store_page pg = {.arr = arr, .bucket = ns.v[i], .want = MCP_RESOURCES_PAGE};
    struct store_list_req rq = {.prefix = "", .after = same ? cur_key : NULL,
                                .max_keys = (unsigned)room};
    bool truncated = false;
    cleanup_free char *nx = NULL;
    if (room && store_list(store, c->tenant, ns.v[i], &rq, store_entry_cb, &pg, &truncated, &nx,
                           &err) == 0 &&
        (truncated || (json_array_size(arr) == MCP_RESOURCES_PAGE && i + 1 < ns.n)) && pg.last_key)
      *next = cursor_make('s', ns.v[i], pg.last_key);
    free(pg.last_key);
  }
  for (size_t i = 0; i < ns.n; i++)
    free(ns.v[i]);
  free(ns.v);
  return arr;
}

json_t *mcp_resource_templates(struct mcp_server *s) {
  json_t *arr = json_array();
  json_array_append_new(
      arr, json_pack("{s:s, s:s, s:s, s:s}", "uriTemplate", "husk://sandbox/{sandbox_id}/files/{+path}",
                     "name", "sandbox-file", "title", "A file of a live sandbox", "description",
                     "A file of a sandbox you created (sandbox_create), by its absolute path "
                     "without the leading '/', e.g. husk://sandbox/b_x/files/workspace/out.csv. "
                     "Text or base64, at most 3 MiB; sandbox_read_file pages through larger ones."));
  if (s->cfg.storage)
    json_array_append_new(
        arr, json_pack("{s:s, s:s, s:s, s:s}", "uriTemplate", "husk://store/{bucket}/{+key}",
                       "name", "stored-object", "title", "A stored object", "description",
                       "An object in one of your storage buckets (store_file, list_objects). "
                       "At most 3 MiB is returned; a larger one comes as an expiring link."));
  if (s->docs_fd >= 0)
    json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:s}", "uriTemplate",
                                         "husk://docs/{+path}", "name", "document", "title",
                                         "A document of this server", "description",
                                         "A read-only document the operator provides as context."));
  return arr;
}

/* ---- resources/read ------------------------------------------------------------ */

static bool texty(const char *mime) {
  return starts(mime, "text/") || !strcmp(mime, "application/json") ||
         !strcmp(mime, "application/xml") || !strcmp(mime, "image/svg+xml") ||
         !strcmp(mime, "application/javascript") || strstr(mime, "+json") || strstr(mime, "+xml");
}

/* The contents entry of `len` bytes: text when they are UTF-8 text, else a blob. */
static json_t *content_entry(const char *uri, const char *mime, const char *buf, size_t len) {
  if (texty(mime) && utf8_valid(buf, len) && !memchr(buf, 0, len))
    return json_pack("{s:s, s:s, s:s%}", "uri", uri, "mimeType", mime, "text", buf, len);
  cleanup_free char *b64 = b64_encode(buf, len, NULL);
  return b64 ? json_pack("{s:s, s:s, s:s}", "uri", uri, "mimeType", mime, "blob", b64) : NULL;
}

/* A resource too large to return: a note saying so and how to get it. */
static json_t *note_entry(const char *uri, const char *mime, uint64_t size, const char *how,
                          const char *url, int64_t expires_ms) {
  cleanup_free char *text = NULL;
  if (size > MCP_CONTENT_MAX
          ? asprintf(&text, "This resource is %llu bytes, more than a read returns (%d). %s%s",
                     (unsigned long long)size, MCP_CONTENT_MAX, how, url ? url : "") < 0
          : asprintf(&text, "This resource (%llu bytes) is kept in an external store. %s%s",
                     (unsigned long long)size, how, url ? url : "") < 0)
    return NULL;
  json_t *meta = json_pack("{s:I, s:s, s:b}", "husk/size", (json_int_t)size, "husk/mimeType", mime,
                           "husk/truncated", (int)(size > MCP_CONTENT_MAX));
  if (meta && url) {
    json_object_set_new(meta, "husk/url", json_string(url));
    json_object_set_new(meta, "husk/expiresAt", json_time(expires_ms));
  }
  return json_pack("{s:s, s:s, s:s, s:o}", "uri", uri, "mimeType", "text/plain", "text", text,
                   "_meta", meta);
}

/* Read at most MCP_CONTENT_MAX + 1 bytes of fd. */
static int read_capped(int fd, char **buf, size_t *len, struct husk_err *err) {
  return mcp_pread_max(fd, 0, MCP_CONTENT_MAX + 1, buf, len, err);
}

static json_t *read_doc(struct mcp_server *s, const char *uri, const struct res_uri *u,
                        struct husk_err *err) {
  struct stat st;
  if (s->docs_fd < 0) {
    husk_error(err, ENOENT, "no such document");
    return NULL;
  }
  cleanup_close int fd = doc_open(s->docs_fd, u->a, &st, err);
  if (fd < 0)
    return NULL;
  cleanup_free char *buf = NULL;
  size_t len;
  if (read_capped(fd, &buf, &len, err) < 0)
    return NULL;
  const char *mime = mcp_mime_by_name(u->a);
  if (len > MCP_CONTENT_MAX)
    return note_entry(uri, mime, (uint64_t)st.st_size, "Ask the operator for it.", NULL, 0);
  return content_entry(uri, mime, buf, len);
}

static json_t *read_box(struct mcp_server *s, const struct mcp_caller *c, const char *uri,
                        const struct res_uri *u, struct husk_err *err) {
  struct husk_mgr *m = s->cfg.mgr ? s->cfg.mgr(s->cfg.mgr_ctx, err) : NULL;
  if (!m)
    return NULL;
  struct husk_fs b = {.fs = -1};
  if (mcp_box_fs(m, c->tenant, u->a, &b, err) < 0)
    return NULL;
  cleanup_close int fd = -1;
  struct stat st;
  json_t *out = NULL;
  if (husk_file_open_read(&b, u->b, &fd, &st, err) == 0) {
    cleanup_free char *buf = NULL;
    size_t len;
    if (read_capped(fd, &buf, &len, err) == 0) {
      const char *mime = mcp_mime_by_name(u->b);
      out = len > MCP_CONTENT_MAX
                ? note_entry(uri, mime, (uint64_t)st.st_size,
                             "Read it in pages with sandbox_read_file (offset), or store_file it "
                             "for a download link.", NULL, 0)
                : content_entry(uri, mime, buf, len);
    }
  }
  husk_fs_close(&b);
  return out;
}

static json_t *read_store(struct mcp_server *s, const struct mcp_caller *c, const char *uri,
                          const struct res_uri *u, struct husk_err *err) {
  struct store *store = s->cfg.storage ? s->cfg.storage->ctx : NULL;
  if (!store || store_bucket_reserved(u->a)) {
    husk_error(err, ENOENT, "no such object");
    return NULL;
  }
  const char *mime = mcp_mime_by_name(u->b);
  struct store_link l;
  /* A link made for the reader is the reader's (its listing shows it). */
  char creator[STORE_CREATED_BY_SIZE];
  mcp_created_by(c, creator, sizeof creator);
  if (store_remote(store)) {
    /* An external store: the bytes are not here to return; a link is. */
    uint64_t size = 0;
    cleanup_free char *rkey = remote_key(c->tenant, u->a, u->b);
    if (!rkey || remote_head(store_remote(store), rkey, &size, err) < 0)
      return NULL;
    if (store_link_create(store, c->tenant, u->a, u->b, 0, NULL, true, creator, &l, err) < 0)
      return NULL;
    json_t *e = note_entry(uri, mime, size, "Download it (the link expires): ", l.url,
                           l.expires_ms);
    store_link_free(&l);
    return e;
  }
  struct store_object o;
  cleanup_close int fd = -1;
  if (store_object_get(store, c->tenant, u->a, u->b, &o, &fd, err) < 0)
    return NULL;
  if (o.content_type[0])
    mime = o.content_type;
  json_t *out = NULL;
  if (o.size > MCP_CONTENT_MAX) {
    if (store_link_create(store, c->tenant, u->a, u->b, 0, NULL, true, creator, &l, err) == 0) {
      out = note_entry(uri, mime, o.size, "Download it (the link expires): ", l.url, l.expires_ms);
      store_link_free(&l);
    }
  } else {
    cleanup_free char *buf = NULL;
    size_t len;
    if (read_capped(fd, &buf, &len, err) == 0)
      out = content_entry(uri, mime, buf, len);
  }
  store_object_free(&o);
  return out;
}

json_t *mcp_resource_read(struct mcp_server *s, const struct mcp_caller *c, const char *uri,
                          bool *not_found, char *why, size_t whylen) {
  *not_found = false;
  struct res_uri u;
  if (res_parse(uri, &u) < 0) {
    *not_found = true;
    snprintf(why, whylen, "Resource not found");
    return NULL;
  }
  struct husk_err err = {0};
  json_t *e = u.kind == RES_DOCS    ? read_doc(s, uri, &u, &err)
              : u.kind == RES_STORE ? read_store(s, c, uri, &u, &err)
                                    : read_box(s, c, uri, &u, &err);
  res_uri_free(&u);
  if (!e) {
    /* Whatever names no readable file or object: a directory, a FIFO or
     * device (EINVAL), a name too long or badly formed. */
    *not_found = err.code == ENOENT || err.code == STORE_ENOBUCKET || err.code == STORE_ENOKEY ||
                 err.code == STORE_EBADNAME || err.code == STORE_EBADKEY || err.code == EISDIR ||
                 err.code == ENOTDIR || err.code == ELOOP || err.code == EACCES ||
                 err.code == EINVAL || err.code == ENAMETOOLONG;
    if (*not_found)
      snprintf(why, whylen, "Resource not found");
    else if (err.code == EBUSY || err.code == ESTALE)
      snprintf(why, whylen, "the sandbox cannot be read now: %s", err.msg);
    else
      snprintf(why, whylen, "cannot read the resource: %s", err.msg[0] ? err.msg : "out of memory");
    return NULL;
  }
  return json_pack("{s:[o]}", "contents", e);
}

/* ---- subscriptions ---------------------------------------------------------------- */

/* Take `m` within `ms`: false if a notification has held it longer (a
 * client that stopped reading its stdout blocks the watcher's write). */
static bool lock_within(pthread_mutex_t *m, int ms) {
  struct timespec ts = clock_after_ms(CLOCK_REALTIME, ms);
  return pthread_mutex_timedlock(m, &ts) == 0;
}

struct mcp_sub {
  char *uri;
  char *tenant;
  char sig[160];
  void (*notify)(void *ctx, json_t *msg);
  void *ctx;
  struct mcp_sub *next;
};

/* What a resource looks like now: its size and times, "" when it is gone. */
static void signature(struct mcp_server *s, const char *tenant, const char *uri, char *sig,
                      size_t n) {
  snprintf(sig, n, "%s", "");
  struct res_uri u;
  if (res_parse(uri, &u) < 0)
    return;
  struct husk_err err;
  if (u.kind == RES_DOCS && s->docs_fd >= 0) {
    struct stat st;
    int fd = doc_open(s->docs_fd, u.a, &st, &err);
    if (fd >= 0) {
      snprintf(sig, n, "%llu:%llu:%lld.%09ld", (unsigned long long)st.st_ino,
               (unsigned long long)st.st_size, (long long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
      close(fd);
    }
  } else if (u.kind == RES_STORE && s->cfg.storage && !store_bucket_reserved(u.a)) {
    struct store_object o;
    if (store_object_get(s->cfg.storage->ctx, tenant, u.a, u.b, &o, NULL, &err) == 0) {
      snprintf(sig, n, "%s:%llu:%lld", o.etag, (unsigned long long)o.size, (long long)o.mtime_ms);
      store_object_free(&o);
    }
  } else if (u.kind == RES_BOX) {
    struct husk_mgr *m = s->cfg.mgr ? s->cfg.mgr(s->cfg.mgr_ctx, &err) : NULL;
    struct husk_fs b = {.fs = -1};
    if (m && mcp_box_fs(m, tenant, u.a, &b, &err) == 0) {
      struct husk_dirent d;
      if (husk_file_stat(&b, u.b, &d, &err) == 0) {
        snprintf(sig, n, "%c:%llu:%lld", d.type, (unsigned long long)d.size,
                 (long long)d.mtime_ms);
        husk_dirent_free(&d);
      }
      husk_fs_close(&b);
    }
  }
  res_uri_free(&u);
}

static void *watch(void *arg) {
  struct mcp_server *s = arg;
  pthread_mutex_lock(&s->sub_lock);
  while (!s->sub_stop) {
    struct timespec ts = clock_after_ms(CLOCK_MONOTONIC, MCP_SUBSCRIBE_POLL_MS);
    pthread_cond_timedwait(&s->sub_cond, &s->sub_lock, &ts);
    if (s->sub_stop)
      break;
    /* Under the lock: an unsubscribe, or the transport going away, waits
     * until no notification for it is being sent. */
    for (struct mcp_sub *b = s->subs; b; b = b->next) {
      char sig[sizeof b->sig];
      signature(s, b->tenant, b->uri, sig, sizeof sig);
      if (!strcmp(sig, b->sig))
        continue;
      memcpy(b->sig, sig, sizeof sig);
      json_t *n = json_pack("{s:s, s:s, s:{s:s}}", "jsonrpc", "2.0", "method",
                            "notifications/resources/updated", "params", "uri", b->uri);
      if (n)
        b->notify(b->ctx, n);
    }
  }
  pthread_mutex_unlock(&s->sub_lock);
  return NULL;
}

static void sub_free(struct mcp_sub *b) {
  free(b->uri);
  free(b->tenant);
  free(b);
}

int mcp_resource_subscribe(struct mcp_server *s, const struct mcp_caller *c, const char *uri,
                           char *why, size_t whylen) {
  struct res_uri u;
  if (res_parse(uri, &u) < 0) {
    snprintf(why, whylen, "Resource not found");
    return -1;
  }
  res_uri_free(&u);
  /* The core first: standalone husk mcp learns its tenant when it opens
   * it, and the subscription is kept under that tenant. */
  struct husk_err err;
  if (s->cfg.mgr)
    s->cfg.mgr(s->cfg.mgr_ctx, &err);
  if (!lock_within(&s->sub_lock, MCP_SUBSCRIBE_LOCK_MS)) {
    snprintf(why, whylen, "subscriptions are busy: try again");
    return -1;
  }
  size_t n = 0;
  for (struct mcp_sub *b = s->subs; b; b = b->next, n++)
    if (b->ctx == c->notify_ctx && !strcmp(b->uri, uri)) {
      pthread_mutex_unlock(&s->sub_lock);
      return 0; /* already subscribed */
    }
  int rc = 0;
  struct mcp_sub *b = NULL;
  if (n >= MCP_SUBSCRIPTIONS_MAX) {
    snprintf(why, whylen, "at most %d subscriptions at a time: unsubscribe from some first",
             MCP_SUBSCRIPTIONS_MAX);
    rc = -1;
  } else if (!(b = calloc(1, sizeof *b)) || !(b->uri = strdup(uri)) ||
             !(b->tenant = strdup(c->tenant ? c->tenant : ""))) {
    snprintf(why, whylen, "out of memory");
    rc = -1;
  } else if (!s->watching) {
    if (pthread_create(&s->watcher, NULL, watch, s) != 0) {
      snprintf(why, whylen, "cannot start watching");
      rc = -1;
    } else {
      s->watching = true;
    }
  }
  if (rc == 0) {
    b->notify = c->notify;
    b->ctx = c->notify_ctx;
    signature(s, b->tenant, uri, b->sig, sizeof b->sig);
    b->next = s->subs;
    s->subs = b;
  } else if (b) {
    sub_free(b);
  }
  pthread_mutex_unlock(&s->sub_lock);
  return rc;
}

bool mcp_resource_unsubscribe(struct mcp_server *s, const struct mcp_caller *c, const char *uri) {
  if (!lock_within(&s->sub_lock, MCP_SUBSCRIBE_LOCK_MS))
    return false;
  for (struct mcp_sub **p = &s->subs; *p;) {
    struct mcp_sub *b = *p;
    if (b->ctx == c->notify_ctx && (!uri || !strcmp(b->uri, uri))) {
      *p = b->next;
      sub_free(b);
    } else {
      p = &b->next;
    }
  }
  pthread_mutex_unlock(&s->sub_lock);
  return true;
}

void mcp_resources_stop(struct mcp_server *s) {
  docs_forget(s);
  pthread_mutex_lock(&s->sub_lock);
  s->sub_stop = true;
  pthread_cond_broadcast(&s->sub_cond);
  bool joining = s->watching;
  pthread_mutex_unlock(&s->sub_lock);
  if (joining)
    pthread_join(s->watcher, NULL);
  s->watching = false;
  while (s->subs) {
    struct mcp_sub *b = s->subs;
    s->subs = b->next;
    sub_free(b);
  }
}
