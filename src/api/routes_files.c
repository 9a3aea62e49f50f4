/* /v1/sandboxes/{id}/files: the box's filesystem over HTTP.
 *
 * Every operation borrows the box's filesystem (husk_box_open_fs) and calls one
 * function of src/box/files.h or src/box/tar.h, which resolve box paths
 * safely; the front only moves bytes.  Uploads are written chunk by chunk
 * as libmicrohttpd delivers them (never the whole body in memory) into a
 * new unnamed file that replaces the target atomically at the end; a
 * failed or interrupted upload leaves nothing.  Downloads are served from
 * the opened fd (api_file_response: a file the box shrinks meanwhile ends
 * the response short), with Range support. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/internal.h"
#include "box/box.h"
#include "box/files.h"
#include "box/tar.h"
#include "util/cleanup.h"
#include "util/fileio.h"

/* The ?path= argument (required), checked for the files layer. */
static const char *path_arg(struct req *r, const char *name) {
  const char *p = api_query(r, name);
  if (!p) {
    husk_fail(&r->err, EINVAL, "query argument `%s` is required", name);
    return NULL;
  }
  if (husk_path_check(p, strlen(p), &r->err) < 0)
    return NULL;
  return p;
}

static int open_fs(struct req *r, struct husk_fs *b) {
  return husk_box_open_fs(r->srv->cfg.mgr, r->tenant, r->params[0], b, &r->err);
}

static void audit_path(struct req *r, const char *what, const char *p) {
  snprintf(r->audit_detail, sizeof r->audit_detail, "%s%.200s", what, p);
}

static const char *type_name(char t) {
  switch (t) {
  case 'f': return "file";
  case 'd': return "dir";
  case 'l': return "symlink";
  default: return "other";
  }
}

/* Text from the box (names, link targets) may be any bytes: a lossy
 * string, plus the exact bytes in base64 when they are not UTF-8. */
static void set_text(json_t *o, const char *k, const char *s) {
  bool lossy = false;
  size_t n = strlen(s);
  json_object_set_new(o, k, json_text(s, n, true, &lossy));
  if (lossy) {
    char kk[32];
    snprintf(kk, sizeof kk, "%s_b64", k);
    char *b = b64_encode(s, n, NULL);
    if (b)
      json_object_set_new(o, kk, json_string(b));
    free(b);
  }
}

static json_t *dirent_json(const struct husk_dirent *e) {
  json_t *o = json_object();
  if (!o)
    return NULL;
  char mode[8];
  snprintf(mode, sizeof mode, "%04o", (unsigned)(e->mode & 07777));
  set_text(o, "name", e->name ? e->name : "");
  set_text(o, "path", e->path ? e->path : "");
  json_object_set_new(o, "type", json_string(type_name(e->type)));
  json_object_set_new(o, "size", json_integer((json_int_t)e->size));
  json_object_set_new(o, "mode", json_string(mode));
  json_object_set_new(o, "mtime", json_time(e->mtime_ms));
  if (e->link_target)
    set_text(o, "link_target", e->link_target);
  if (e->depth)
    json_object_set_new(o, "depth", json_integer(e->depth));
  return o;
}

/* ---- GET /files?path=P: download with Range ------------------------- */

/* Parse a single "bytes=a-b" / "bytes=a-" / "bytes=-n" range.  Returns 1
 * with [*from, *to] (inclusive), 0 to ignore the header (syntax we do not
 * serve, such as several ranges: the whole file is sent), -1 when
 * unsatisfiable. */
int api_parse_range(const char *h, uint64_t size, uint64_t *from, uint64_t *to) {
  if (strncmp(h, "bytes=", 6) != 0)
    return 0;
  h += 6;
  while (*h == ' ')
    h++;
  if (strchr(h, ','))
    return 0;
  const char *dash = strchr(h, '-');
  if (!dash)
    return 0;
  size_t al = (size_t)(dash - h);
  const char *b = dash + 1;
  size_t bl = strlen(b);
  while (bl > 0 && b[bl - 1] == ' ')
    bl--;
  if (al > 19 || bl > 19 || strspn(h, "0123456789") != al || strspn(b, "0123456789") < bl)
    return 0;
  if (al == 0 && bl == 0)
    return 0;
  if (al == 0) { /* suffix: the last n bytes */
    uint64_t n = strtoull(b, NULL, 10);
    if (n == 0 || size == 0)
      return -1;
    *from = n >= size ? 0 : size - n;
    *to = size - 1;
    return 1;
  }
  uint64_t a = strtoull(h, NULL, 10);
  if (a >= size)
    return -1;
  uint64_t z = bl ? strtoull(b, NULL, 10) : size - 1;
  if (bl && z < a)
    return 0; /* invalid: ignore, as RFC 9110 says */
  if (z >= size)
    z = size - 1;
  *from = a;
  *to = z;
  return 1;
}

enum MHD_Result h_file_get(struct req *r) {
  const char *path = path_arg(r, "path");
  if (!path)
    return api_reply_err(r, &r->err);
  struct husk_fs b;
  if (open_fs(r, &b) < 0)
    return api_reply_err(r, &r->err);
  int fd = -1;
  struct stat st;
  int rc = husk_file_open_read(&b, path, &fd, &st, &r->err);
  close_quiet(b.fs);
  if (rc < 0)
    return api_reply_err(r, &r->err);
  uint64_t size = (uint64_t)st.st_size, from = 0, to = size ? size - 1 : 0;
  unsigned status = 200;
  const char *range = api_header(r, MHD_HTTP_HEADER_RANGE);
  if (range) {
    int pr = api_parse_range(range, size, &from, &to);
    if (pr < 0) {
      close(fd);
      snprintf(r->xhdr_name, sizeof r->xhdr_name, "Content-Range");
      snprintf(r->xhdr_value, sizeof r->xhdr_value, "bytes */%llu", (unsigned long long)size);
      return api_reply_error(r, 416, "range_not_satisfiable", "the file has %llu bytes",
                             (unsigned long long)size);
    }
    if (pr > 0)
      status = 206;
  }
  uint64_t len = status == 206 ? to - from + 1 : size;
  struct MHD_Response *resp = api_file_response(fd, status == 206 ? from : 0, len);
  if (!resp)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  MHD_add_response_header(resp, "Content-Type", "application/octet-stream");
  MHD_add_response_header(resp, "Accept-Ranges", "bytes");
  if (status == 206) {
    char cr[96];
    snprintf(cr, sizeof cr, "bytes %llu-%llu/%llu", (unsigned long long)from,
             (unsigned long long)to, (unsigned long long)size);
    MHD_add_response_header(resp, "Content-Range", cr);
  }
  return api_queue(r, status, resp);
}

/* ---- PUT /files?path=P: streamed upload ----------------------------- */

struct put_up {
  struct husk_fs b;
  int fd;
  char tmpname[HUSK_TMPNAME_MAX];
  char *path;
  bool committed;
};

enum MHD_Result h_file_put_begin(struct req *r) {
  struct put_up *u = calloc(1, sizeof *u);
  if (!u)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  u->fd = -1;
  u->b.fs = -1;
  r->up = u;
  const char *path = path_arg(r, "path");
  if (!path)
    return api_reply_err(r, &r->err);
  audit_path(r, "", path);
  bool mkdirs = false;
  uint64_t mode = 0644;
  const char *ms = api_query(r, "mode");
  if (api_query_bool(r, "mkdirs", &mkdirs) < 0)
    return api_reply_bad(r);
  if (ms) {
    char *end;
    errno = 0;
    unsigned long m = strtoul(ms, &end, 8);
    if (!*ms || *end || errno || m > 07777)
      return api_reply_error(r, 400, "bad_request", "mode must be octal permission bits, e.g. 0644");
    mode = m;
  }
  u->path = strdup(path);
  if (!u->path)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  if (open_fs(r, &u->b) < 0)
    return api_reply_err(r, &r->err);
  if (husk_file_create(&u->b, u->path, mkdirs, (mode_t)mode, &u->fd, u->tmpname, sizeof u->tmpname,
                      &r->err) < 0)
    return api_reply_err(r, &r->err);
  return MHD_YES;
}

int h_file_put_upload(struct req *r, const char *data, size_t len) {
  struct put_up *u = r->up;
  if (write_all(u->fd, data, len) < 0)
    return husk_error(&r->err, errno, "cannot write the file");
  return 0;
}

enum MHD_Result h_file_put(struct req *r) {
  struct put_up *u = r->up;
  if (husk_file_commit(&u->b, u->path, u->fd, u->tmpname, &r->err) < 0)
    return api_reply_err(r, &r->err);
  u->committed = true;
  r->stream_ok = true;
  json_t *j = NULL;
  struct husk_dirent e = {0};
  if (husk_file_stat(&u->b, u->path, &e, &r->err) == 0) {
    j = dirent_json(&e);
    husk_dirent_free(&e);
  } else {
    j = json_pack("{s:s, s:I}", "path", u->path, "size", (json_int_t)r->up_bytes);
  }
  return api_reply_json(r, 201, j);
}

void h_file_put_cleanup(struct req *r) {
  struct put_up *u = r->up;
  if (!u)
    return;
  if (u->fd >= 0 && !u->committed)
    husk_file_abort(&u->b, u->path, u->fd, u->tmpname);
  close_quiet(u->fd);
  close_quiet(u->b.fs);
  free(u->path);
  free(u);
  r->up = NULL;
}

/* ---- list, stat, mkdir, move, remove -------------------------------- */

/* A listing is paged: at most `limit` entries (API_LIST_LIMIT_DEFAULT,
 * at most API_LIST_LIMIT_MAX) and at most --reply-max bytes of them (but
 * always one), from `cursor` on, the number of entries of the walk that
 * earlier pages returned.  The page is built as JSON text in a buffer the
 * reply budget covers, never as a tree of the whole directory. */
/* The most one entry's JSON takes (a page holds at least one): the path
 * and the link target, each lossy (3 bytes a byte) and in base64. */
#define LIST_ENTRY_MAX (4 * (PATH_MAX + HUSK_LIST_MAX_DEPTH * (NAME_MAX + 1)) * 2 + 4096)

struct list_ctx {
  uint64_t skip, limit, count;
  size_t cap; /* bytes of entries */
  char *text;
  size_t len, alloc;
  bool more, oom;
};

static int list_cb(void *ctx, const struct husk_dirent *e) {
  struct list_ctx *lc = ctx;
  if (lc->skip) {
    lc->skip--;
    return 0;
  }
  if (lc->count == lc->limit) {
    lc->more = true;
    return 1;
  }
  json_t *j = dirent_json(e);
  char *d = j ? json_dumps(j, JSON_COMPACT) : NULL;
  json_decref(j);
  if (!d) {
    lc->oom = true;
    return -1;
  }
  size_t n = strlen(d);
  if (lc->count > 0 && lc->len + 1 + n > lc->cap) {
    free(d);
    lc->more = true;
    return 1;
  }
  if (lc->len + n + 2 > lc->alloc) {
    size_t a = lc->alloc ? lc->alloc : 16384;
    while (a < lc->len + n + 2)
      a *= 2;
    if (a > lc->cap + LIST_ENTRY_MAX && lc->len + n + 2 <= lc->cap + LIST_ENTRY_MAX)
      a = lc->cap + LIST_ENTRY_MAX; /* what the reservation covers */
    char *t = realloc(lc->text, a);
    if (!t) {
      free(d);
      lc->oom = true;
      return -1;
    }
    lc->text = t;
    lc->alloc = a;
  }
  if (lc->count)
    lc->text[lc->len++] = ',';
  memcpy(lc->text + lc->len, d, n);
  lc->len += n;
  lc->text[lc->len] = '\0';
  free(d);
  lc->count++;
  return 0;
}

enum MHD_Result h_file_list(struct req *r) {
  const char *path = api_query(r, "path");
  if (!path)
    path = "/workspace";
  if (husk_path_check(path, strlen(path), &r->err) < 0)
    return api_reply_err(r, &r->err);
  uint64_t depth = 1, limit = API_LIST_LIMIT_DEFAULT, cursor = 0;
  if (api_query_u64(r, "depth", 1000000, &depth, NULL) < 0 ||
      api_query_u64(r, "limit", API_LIST_LIMIT_MAX, &limit, NULL) < 0 ||
      api_query_u64(r, "cursor", UINT_MAX - API_LIST_LIMIT_MAX - 1, &cursor, NULL) < 0)
    return api_reply_bad(r);
  if (limit == 0)
    return api_reply_error(r, 400, "bad_request", "limit must be 1 to %d", API_LIST_LIMIT_MAX);
  uint64_t cap = api_reply_max(r->srv);
  uint64_t reserved = cap + LIST_ENTRY_MAX;
  if (!api_budget_take(r->srv, r->tenant, reserved))
    return api_reply_busy(r);
  struct husk_fs b;
  if (open_fs(r, &b) < 0) {
    api_budget_give(r->srv, r->tenant, reserved);
    return api_reply_err(r, &r->err);
  }
  struct list_ctx lc = {.skip = cursor, .limit = limit, .cap = (size_t)cap};
  /* The walk stops after this page and one more entry (to know there is
   * more). */
  b.list_max = (unsigned)(cursor + limit + 1);
  int rc = husk_file_list(&b, path, (int)depth, list_cb, &lc, &r->err);
  close_quiet(b.fs);
  if (rc < 0 || lc.oom) {
    free(lc.text);
    api_budget_give(r->srv, r->tenant, reserved);
    if (lc.oom)
      return api_reply_error(r, 500, "internal_error", "out of memory");
    return api_reply_err(r, &r->err);
  }
  bool more = lc.more || rc == 1;
  char tail[128];
  if (more)
    snprintf(tail, sizeof tail, "],\"truncated\":true,\"next_cursor\":\"%llu\"}",
             (unsigned long long)(cursor + lc.count));
  else
    snprintf(tail, sizeof tail, "],\"truncated\":false,\"next_cursor\":null}");
  struct jreply *j = jreply_new(r->srv, r->tenant, reserved);
  if (!j) {
    free(lc.text);
    return api_reply_error(r, 500, "internal_error", "out of memory");
  }
  jreply_text(j, "{\"entries\":[");
  if (lc.text)
    jreply_take_text(j, lc.text, lc.len);
  jreply_text(j, tail);
  return api_reply_jreply(r, 200, j);
}

enum MHD_Result h_file_stat(struct req *r) {
  const char *path = path_arg(r, "path");
  if (!path)
    return api_reply_err(r, &r->err);
  struct husk_fs b;
  if (open_fs(r, &b) < 0)
    return api_reply_err(r, &r->err);
  struct husk_dirent e = {0};
  int rc = husk_file_stat(&b, path, &e, &r->err);
  close_quiet(b.fs);
  if (rc < 0)
    return api_reply_err(r, &r->err);
  json_t *j = dirent_json(&e);
  husk_dirent_free(&e);
  return api_reply_json(r, 200, j);
}

static const char *const mkdir_fields[] = {"path", "parents", NULL};

enum MHD_Result h_file_mkdir(struct req *r) {
  json_t *o = api_body_object(r, mkdir_fields);
  if (!o)
    return api_reply_bad(r);
  const char *path = NULL;
  bool parents = false;
  if (jget_string(o, "path", &path, &r->err) < 0 || jget_bool(o, "parents", &parents, &r->err) < 0) {
    json_decref(o);
    return api_reply_bad(r);
  }
  if (!path) {
    json_decref(o);
    return api_reply_error(r, 400, "bad_request", "`path` is required");
  }
  audit_path(r, "", path);
  struct husk_fs b;
  int rc = -1;
  if (husk_path_check(path, strlen(path), &r->err) == 0 && open_fs(r, &b) == 0) {
    rc = husk_file_mkdir(&b, path, parents, &r->err);
    close_quiet(b.fs);
  }
  json_t *reply = rc == 0 ? json_pack("{s:s}", "path", path) : NULL;
  json_decref(o);
  if (rc < 0)
    return api_reply_err(r, &r->err);
  return api_reply_json(r, 201, reply);
}

static const char *const move_fields[] = {"from", "to", "overwrite", NULL};

enum MHD_Result h_file_move(struct req *r) {
  json_t *o = api_body_object(r, move_fields);
  if (!o)
    return api_reply_bad(r);
  const char *from = NULL, *to = NULL;
  bool overwrite = false;
  if (jget_string(o, "from", &from, &r->err) < 0 || jget_string(o, "to", &to, &r->err) < 0 ||
      jget_bool(o, "overwrite", &overwrite, &r->err) < 0) {
    json_decref(o);
    return api_reply_bad(r);
  }
  if (!from || !to) {
    json_decref(o);
    return api_reply_error(r, 400, "bad_request", "`from` and `to` are required");
  }
  snprintf(r->audit_detail, sizeof r->audit_detail, "%.120s -> %.120s", from, to);
  struct husk_fs b;
  int rc = -1;
  if (husk_path_check(from, strlen(from), &r->err) == 0 &&
      husk_path_check(to, strlen(to), &r->err) == 0 && open_fs(r, &b) == 0) {
    rc = husk_file_move(&b, from, to, overwrite, &r->err);
    close_quiet(b.fs);
  }
  json_t *reply = rc == 0 ? json_pack("{s:s, s:s}", "from", from, "to", to) : NULL;
  json_decref(o);
  if (rc < 0)
    return api_reply_err(r, &r->err);
  return api_reply_json(r, 200, reply);
}

enum MHD_Result h_file_delete(struct req *r) {
  const char *path = path_arg(r, "path");
  if (!path)
    return api_reply_err(r, &r->err);
  bool recursive = false;
  if (api_query_bool(r, "recursive", &recursive) < 0)
    return api_reply_bad(r);
  audit_path(r, recursive ? "recursive " : "", path);
  struct husk_fs b;
  if (open_fs(r, &b) < 0)
    return api_reply_err(r, &r->err);
  int rc = husk_file_remove(&b, path, recursive, &r->err);
  close_quiet(b.fs);
  if (rc < 0)
    return api_reply_err(r, &r->err);
  return api_reply_empty(r, 204);
}

/* ---- GET /files/tar?path=DIR: a tar stream, produced as it is sent --- */

/* husk_tar_write() pushes the archive chunk by chunk from a worker thread
 * (api_reply_produced): errors before the first chunk (no such directory)
 * are ordinary HTTP errors; a failure later ends the body without its
 * final chunk, which clients report as an error. */
struct tar_out {
  struct api_server *srv;
  struct husk_fs b;
  char *path;
};

static void tar_out_free(void *ctx) {
  struct tar_out *t = ctx;
  close_quiet(t->b.fs);
  free(t->path);
  free(t);
}

static int tar_out_produce(void *ctx, int (*out)(void *, const void *, size_t), void *oc,
                           struct husk_err *err) {
  struct tar_out *t = ctx;
  int rc = husk_tar_write(&t->b, t->path, out, oc, err);
  if (rc > 0)
    api_log(t->srv, "tar download of a box directory: %d entries skipped", rc);
  return rc;
}

enum MHD_Result h_tar_get(struct req *r) {
  const char *path = api_query(r, "path");
  if (!path)
    path = "/workspace";
  if (husk_path_check(path, strlen(path), &r->err) < 0)
    return api_reply_err(r, &r->err);
  struct tar_out *t = calloc(1, sizeof *t);
  if (!t)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  t->srv = r->srv;
  t->b.fs = -1;
  if (!(t->path = strdup(path))) {
    tar_out_free(t);
    return api_reply_error(r, 500, "internal_error", "out of memory");
  }
  if (open_fs(r, &t->b) < 0) {
    tar_out_free(t);
    return api_reply_err(r, &r->err);
  }
  return api_reply_produced(r, "application/x-tar", tar_out_produce, t, tar_out_free);
}

/* ---- PUT /files/tar?path=DIR: extract the body as it arrives -------- */

/* husk_tar_read() pulls its input; the body is pushed to us chunk by chunk.
 * A pipe joins them: each upload chunk is written into it (blocking while
 * the extractor is behind: backpressure, nothing buffered beyond the pipe),
 * and a worker thread runs the extraction reading from it. */
struct tar_in {
  struct husk_fs b;
  char *path;
  int pipe_r, pipe_w;
  pthread_t th;
  bool running;
  bool discard; /* the archive ended: ignore what follows (padding) */
  int rc;
  struct husk_err err;
};

static ssize_t tar_in_cb(void *ctx, void *buf, size_t cap) {
  struct tar_in *t = ctx;
  for (;;) {
    ssize_t n = read(t->pipe_r, buf, cap);
    if (n >= 0 || errno != EINTR)
      return n;
  }
}

static void *tar_in_worker(void *arg) {
  struct tar_in *t = arg;
  t->rc = husk_tar_read(&t->b, t->path, tar_in_cb, t, &t->err);
  /* Done reading: a writer still sending gets EPIPE instead of blocking. */
  close_quiet(t->pipe_r);
  t->pipe_r = -1;
  return NULL;
}

/* Wait for the extraction (after the write end is closed). */
static void tar_in_join(struct tar_in *t) {
  close_quiet(t->pipe_w);
  t->pipe_w = -1;
  if (t->running) {
    pthread_join(t->th, NULL);
    t->running = false;
  }
}

enum MHD_Result h_tar_put_begin(struct req *r) {
  struct tar_in *t = calloc(1, sizeof *t);
  if (!t)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  t->b.fs = t->pipe_r = t->pipe_w = -1;
  r->up = t;
  const char *path = api_query(r, "path");
  if (!path)
    path = "/workspace";
  if (husk_path_check(path, strlen(path), &r->err) < 0)
    return api_reply_err(r, &r->err);
  audit_path(r, "", path);
  t->path = strdup(path);
  if (!t->path)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  if (open_fs(r, &t->b) < 0)
    return api_reply_err(r, &r->err);
  int p[2];
  if (pipe2(p, O_CLOEXEC) < 0)
    return api_reply_error(r, 503, "unavailable", "cannot create a pipe");
  t->pipe_r = p[0];
  t->pipe_w = p[1];
  if (pthread_create(&t->th, NULL, tar_in_worker, t) != 0)
    return api_reply_error(r, 503, "unavailable", "cannot start a worker thread");
  t->running = true;
  return MHD_YES;
}

int h_tar_put_upload(struct req *r, const char *data, size_t len) {
  struct tar_in *t = r->up;
  if (t->discard)
    return 0;
  if (write_all(t->pipe_w, data, len) < 0) {
    if (errno != EPIPE)
      return husk_error(&r->err, errno, "cannot pass the archive on");
    /* The extraction stopped: on an error, that is the reply; after the
     * end of the archive, what follows (record padding) is ignored. */
    tar_in_join(t);
    if (t->rc < 0) {
      r->err = t->err;
      return -1;
    }
    t->discard = true;
  }
  return 0;
}

enum MHD_Result h_tar_put(struct req *r) {
  struct tar_in *t = r->up;
  tar_in_join(t);
  if (t->rc < 0)
    return api_reply_err(r, &t->err);
  r->stream_ok = true;
  return api_reply_json(r, 200, json_pack("{s:s, s:i}", "path", t->path, "skipped", t->rc));
}

void h_tar_put_cleanup(struct req *r) {
  struct tar_in *t = r->up;
  if (!t)
    return;
  tar_in_join(t); /* a client that went away: the extraction sees EOF */
  close_quiet(t->pipe_r);
  close_quiet(t->b.fs);
  free(t->path);
  free(t);
  r->up = NULL;
}
