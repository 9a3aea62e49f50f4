/* Box <-> store transfers (see box_store.h). */
#define _GNU_SOURCE
#include "box/box_store.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "box/box.h"
#include "box/files.h"
#include "box/tar.h"
#include "storage/remote.h"
#include "util/cleanup.h"
#include "util/fileio.h"

void box_store_result_free(struct box_store_result *r) {
  if (!r)
    return;
  free(r->url);
  r->url = NULL;
}

const char *box_store_guess_type(const char *name) {
  static const char *const map[][2] = {
      {".txt", "text/plain"},
      {".md", "text/markdown"},
      {".csv", "text/csv"},
      {".html", "text/html"},
      {".htm", "text/html"},
      {".json", "application/json"},
      {".pdf", "application/pdf"},
      {".png", "image/png"},
      {".jpg", "image/jpeg"},
      {".jpeg", "image/jpeg"},
      {".gif", "image/gif"},
      {".svg", "image/svg+xml"},
      {".webp", "image/webp"},
      {".zip", "application/zip"},
      {".tar", "application/x-tar"},
      {".gz", "application/gzip"},
      {".xml", "application/xml"},
      {".js", "text/javascript"},
      {".css", "text/css"},
      {".mp4", "video/mp4"},
      {".pptx", "application/vnd.openxmlformats-officedocument.presentationml.presentation"},
      {".xlsx", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet"},
      {".docx", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"},
  };
  const char *dot = name ? strrchr(name, '.') : NULL;
  if (dot && !strchr(dot, '/'))
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
      if (!strcasecmp(dot, map[i][0]))
        return map[i][1];
  return "application/octet-stream";
}

/* A staging file for the external store: on the data disk, so bounded by
 * what the box holds and kept out of the disk's reserve. */
struct stage {
  struct store *s;
  int fd;
  uint64_t n, limit;
  struct husk_err err;
};

static int stage_write(struct stage *st, const void *buf, size_t len) {
  if (st->n + len > st->limit) {
    husk_fail(&st->err, STORE_ESPARSE,
              "more than the box holds on disk (%llu bytes) would be stored: sparse files are not "
              "stored in full",
              (unsigned long long)st->limit);
    errno = EFBIG;
    return -1;
  }
  if ((st->n + len) >> 20 != st->n >> 20 && store_space_check(st->s, len, &st->err) < 0) {
    errno = ENOSPC;
    return -1;
  }
  if (write_all(st->fd, buf, len) < 0) {
    husk_error(&st->err, errno, "cannot stage the content");
    return -1;
  }
  st->n += len;
  return 0;
}

/* Copy all of `in` to the staging file. */
static int copy_fd(int in, struct stage *st, struct husk_err *err) {
  cleanup_free char *buf = malloc(1 << 20);
  if (!buf)
    return husk_error(err, ENOMEM, "copy");
  for (;;) {
    ssize_t n = read(in, buf, 1 << 20);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return husk_error(err, errno, "cannot read");
    if (n == 0)
      return 0;
    if (stage_write(st, buf, (size_t)n) < 0) {
      *err = st->err;
      return -1;
    }
  }
}

/* The most a box -> store copy of a tree may write: what the box's
 * filesystem holds (which its disk limit bounds) plus the tar headers of
 * its files.  A sparse file's holes would pass it. */
#define TAR_ENTRY_MAX (8 * 1024) /* header, long-name records, padding */
static int box_bound(int fs, uint64_t *bound, struct husk_err *err) {
  struct statfs sf;
  if (fstatfs(fs, &sf) < 0)
    return husk_error(err, errno, "cannot read the box's disk usage");
  uint64_t used = (uint64_t)(sf.f_blocks - sf.f_bfree) * (uint64_t)sf.f_bsize;
  uint64_t files = sf.f_files > sf.f_ffree ? (uint64_t)(sf.f_files - sf.f_ffree) : 0;
  *bound = used + files * TAR_ENTRY_MAX + (1 << 20);
  return 0;
}

static int ensure_bucket(struct store *s, const char *tenant_id, const char *bucket,
                         struct husk_err *err) {
  if (store_bucket_create(s, tenant_id, bucket, err) < 0 && err->code != STORE_EOWNED)
    return -1;
  return 0;
}

static int finish_link(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                       const struct store_object *o, bool link, int64_t expires_s,
                       const char *filename, bool inline_disp, const char *created_by,
                       struct box_store_result *out, struct husk_err *err);

static int finish(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                  struct store_writer *w, const char *ctype, bool link, int64_t expires_s,
                  const char *filename, bool inline_disp, const char *created_by,
                  struct box_store_result *out, struct husk_err *err) {
  char etag[STORE_ETAG_SIZE];
  if (store_writer_finish(w, NULL, etag, NULL, err) < 0) {
    store_writer_abort(w);
    return -1;
  }
  struct store_object o;
  if (store_put_commit(w, tenant_id, bucket, key, ctype, NULL, created_by, &o, err) < 0)
    return -1;
  store_object_free(&o);
  return finish_link(s, tenant_id, bucket, key, &o, link, expires_s, filename, inline_disp,
                     created_by, out, err);
}

/* With `link`, a presigned link to the stored object into *out. */
static int add_link(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                    bool link, int64_t expires_s, const char *filename, bool inline_disp,
                    const char *created_by, struct box_store_result *out, struct husk_err *err) {
  if (!link)
    return 0;
  struct store_link l;
  if (store_link_create(s, tenant_id, bucket, key, expires_s, filename, inline_disp, created_by, &l,
                        err) < 0)
    return -1;
  out->url = l.url;
  l.url = NULL;
  snprintf(out->link_id, sizeof out->link_id, "%s", l.id);
  out->expires_ms = l.expires_ms;
  store_link_free(&l);
  return 0;
}

/* The stored object's size and ETag (o's fixed fields), and the link. */
static int finish_link(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                       const struct store_object *o, bool link, int64_t expires_s,
                       const char *filename, bool inline_disp, const char *created_by,
                       struct box_store_result *out, struct husk_err *err) {
  out->size = o->size;
  snprintf(out->etag, sizeof out->etag, "%s", o->etag);
  return add_link(s, tenant_id, bucket, key, link, expires_s, filename, inline_disp, created_by,
                  out, err);
}

struct tar_sink {
  struct store_writer *w;
  bool failed;
  struct husk_err err; /* the writer's refusal, reported as it is */
};

static int tar_out(void *ctx, const void *buf, size_t len) {
  struct tar_sink *t = ctx;
  if (store_writer_write(t->w, buf, len, &t->err) < 0) {
    t->failed = true;
    errno = t->err.code == STORE_ETOOLARGE
                ? EFBIG
                : (t->err.code > 0 && t->err.code < 4096 ? t->err.code : EIO);
    return -1;
  }
  return 0;
}

/* ---- the external store: stage in a temporary file, then upload ---- */

static int fd_write(void *ctx, const void *buf, size_t len) {
  return write_all(*(int *)ctx, buf, len);
}

static int stage_out(void *ctx, const void *buf, size_t len) { return stage_write(ctx, buf, len); }

/* The external store keeps no writer (its objects have no row here); the
 * link made to it does record its maker. */
static int remote_finish(struct store *s, const char *tenant_id, const char *bucket,
                         const char *key, int fd, const char *ctype, bool link, int64_t expires_s,
                         const char *filename, bool inline_disp, const char *created_by,
                         struct box_store_result *out, struct husk_err *err) {
  struct stat sb;
  if (fstat(fd, &sb) < 0)
    return husk_error(err, errno, "staging file");
  cleanup_free char *rk = remote_key(tenant_id, bucket, key);
  if (!rk)
    return husk_error(err, ENOMEM, "transfer");
  if (remote_put_fd(store_remote(s), rk, fd, (uint64_t)sb.st_size, ctype, out->etag, err) < 0)
    return -1;
  out->size = (uint64_t)sb.st_size;
  return add_link(s, tenant_id, bucket, key, link, expires_s, filename, inline_disp, created_by,
                  out, err);
}

int box_store_put(struct husk_mgr *mgr, struct store *s, const char *tenant_id, const char *box_id,
                  const char *path, const char *bucket, const char *key, bool link,
                  int64_t expires_s, const char *filename, bool inline_disp, const char *created_by,
                  struct box_store_result *out, struct husk_err *err) {
  memset(out, 0, sizeof *out);
  if (husk_path_check(path, strlen(path), err) < 0 || store_key_check(key, err) < 0)
    return -1;
  if (link && expires_s && (expires_s < 1 || expires_s > STORE_LINK_MAX_S))
    return husk_fail(err, EINVAL, "the expiry must be 1..%d seconds", STORE_LINK_MAX_S);
  struct husk_fs b = {.fs = -1};
  if (husk_box_open_fs(mgr, tenant_id, box_id, &b, err) < 0)
    return -1;
  cleanup_close int fs __attribute__((unused)) = b.fs; /* closes the box fs on return */
  struct husk_dirent st;
  if (husk_file_stat(&b, path, &st, err) < 0)
    return -1;
  char type = st.type;
  husk_dirent_free(&st);
  if (type != 'f' && type != 'd' && type != 'l')
    return husk_fail(err, EINVAL, "only files and directories can be stored");
  if (store_remote(s)) {
    if (!store_bucket_name_ok(bucket))
      return husk_fail(err, STORE_EBADNAME, "The specified bucket is not valid");
    cleanup_close int tmp = store_tmpfile(s, err);
    if (tmp < 0)
      return -1;
    struct stage sg = {.s = s, .fd = tmp};
    if (type == 'd') {
      out->tar = true;
      if (box_bound(b.fs, &sg.limit, err) < 0)
        return -1;
      if (husk_tar_write(&b, path, stage_out, &sg, err) < 0) {
        if (sg.err.code)
          *err = sg.err;
        return -1;
      }
    } else {
      cleanup_close int in = -1;
      struct stat sb;
      uint64_t size = 0;
      if (husk_file_open_read(&b, path, &in, &sb, err) < 0 ||
          store_fd_bound(in, &size, &sg.limit, err) < 0 || store_space_check(s, size, err) < 0 ||
          copy_fd(in, &sg, err) < 0)
        return -1;
    }
    return remote_finish(s, tenant_id, bucket, key, tmp,
                         type == 'd' ? "application/x-tar" : box_store_guess_type(key), link,
                         expires_s, filename, inline_disp, created_by, out, err);
  }
  if (ensure_bucket(s, tenant_id, bucket, err) < 0)
    return -1;
  if (type != 'd') {
    cleanup_close int fd = -1;
    struct stat sb;
    struct store_object o;
    if (husk_file_open_read(&b, path, &fd, &sb, err) < 0 ||
        store_put_fd(s, tenant_id, bucket, key, fd, box_store_guess_type(key), created_by, &o,
                     err) < 0)
      return -1;
    store_object_free(&o);
    return finish_link(s, tenant_id, bucket, key, &o, link, expires_s, filename, inline_disp,
                       created_by, out, err);
  }
  /* A tree: its archive's size is known only once written, so the writer
   * stops at what the box holds and at the tenant's room. */
  uint64_t bound = 0, room = 0;
  if (box_bound(b.fs, &bound, err) < 0 ||
      store_quota_room(s, tenant_id, bucket, key, &room, err) < 0)
    return -1;
  uint64_t limit = bound < STORE_PUT_MAX ? bound : STORE_PUT_MAX;
  if (room < limit)
    limit = room ? room : 1; /* the commit refuses what passes the quota */
  struct tar_sink t = {0};
  if (store_writer_open(s, CK_NONE, false, limit, &t.w, err) < 0)
    return -1;
  out->tar = true;
  if (husk_tar_write(&b, path, tar_out, &t, err) < 0) {
    store_writer_abort(t.w);
    if (t.failed)
      *err = t.err;
    if (err->code == STORE_ETOOLARGE && limit == room)
      return husk_fail(err, STORE_EQUOTA, "The tenant's storage quota would be exceeded");
    if (err->code == STORE_ETOOLARGE && limit == bound)
      return husk_fail(err, STORE_ESPARSE,
                       "the archive of `%s` would be larger than what the box holds on disk "
                       "(%llu bytes): sparse files are not stored in full",
                       path, (unsigned long long)bound);
    return -1;
  }
  return finish(s, tenant_id, bucket, key, t.w, "application/x-tar", link, expires_s, filename,
                inline_disp, created_by, out, err);
}

int box_store_put_buffer(struct store *s, const char *tenant_id, const void *buf, size_t n,
                         const char *content_type, const char *bucket, const char *key, bool link,
                         int64_t expires_s, const char *filename, bool inline_disp,
                         const char *created_by, struct box_store_result *out,
                         struct husk_err *err) {
  memset(out, 0, sizeof *out);
  if (store_remote(s)) {
    if (store_key_check(key, err) < 0)
      return -1;
    if (!store_bucket_name_ok(bucket))
      return husk_fail(err, STORE_EBADNAME, "The specified bucket is not valid");
    cleanup_close int tmp = store_tmpfile(s, err);
    if (tmp < 0)
      return -1;
    if (write_all(tmp, buf, n) < 0)
      return husk_error(err, errno, "cannot stage the content");
    return remote_finish(s, tenant_id, bucket, key, tmp,
                         content_type ? content_type : box_store_guess_type(key), link, expires_s,
                         filename, inline_disp, created_by, out, err);
  }
  if (store_key_check(key, err) < 0 || ensure_bucket(s, tenant_id, bucket, err) < 0)
    return -1;
  struct store_writer *w = NULL;
  if (store_writer_open(s, CK_NONE, false, STORE_PUT_MAX, &w, err) < 0)
    return -1;
  if (store_writer_write(w, buf, n, err) < 0) {
    store_writer_abort(w);
    return -1;
  }
  return finish(s, tenant_id, bucket, key, w,
                content_type ? content_type : box_store_guess_type(key), link, expires_s, filename,
                inline_disp, created_by, out, err);
}

static ssize_t fd_in(void *ctx, void *buf, size_t cap) {
  int fd = *(int *)ctx;
  for (;;) {
    ssize_t n = read(fd, buf, cap);
    if (n < 0 && errno == EINTR)
      continue;
    return n;
  }
}

int box_store_get(struct husk_mgr *mgr, struct store *s, const char *tenant_id, const char *bucket,
                  const char *key, const char *box_id, const char *path, bool extract,
                  uint64_t *size, struct husk_err *err) {
  if (store_bucket_reserved(bucket))
    return husk_fail(err, STORE_EBADNAME, "The specified bucket is not valid");
  if (husk_path_check(path, strlen(path), err) < 0)
    return -1;
  cleanup_close int ofd = -1;
  if (store_remote(s)) {
    /* Fetch into a staging file first: a failed download leaves the box
     * untouched. */
    if (store_key_check(key, err) < 0)
      return -1;
    cleanup_free char *rk = remote_key(tenant_id, bucket, key);
    if (!rk)
      return husk_error(err, ENOMEM, "transfer");
    ofd = store_tmpfile(s, err);
    if (ofd < 0)
      return -1;
    uint64_t got = 0;
    if (remote_get(store_remote(s), rk, fd_write, &ofd, &got, err) < 0) {
      if (err->code == ENOENT)
        return husk_fail(err, STORE_ENOKEY, "The specified key does not exist.");
      return -1;
    }
    off_t end = lseek(ofd, 0, SEEK_CUR);
    if (end < 0 || lseek(ofd, 0, SEEK_SET) < 0)
      return husk_error(err, errno, "staging file");
    *size = (uint64_t)end;
  } else {
    struct store_object o;
    if (store_object_get(s, tenant_id, bucket, key, &o, &ofd, err) < 0)
      return -1;
    *size = o.size;
    store_object_free(&o);
  }
  struct husk_fs b = {.fs = -1};
  if (husk_box_open_fs(mgr, tenant_id, box_id, &b, err) < 0)
    return -1;
  cleanup_close int fs __attribute__((unused)) = b.fs; /* closes the box fs on return */
  if (extract)
    return husk_tar_read(&b, path, fd_in, &ofd, err) < 0 ? -1 : 0;
  int fd = -1;
  char tmpname[HUSK_TMPNAME_MAX];
  if (husk_file_create(&b, path, true, 0644, &fd, tmpname, sizeof tmpname, err) < 0)
    return -1;
  cleanup_free char *buf = malloc(1 << 20);
  int rc = 0;
  if (!buf)
    rc = husk_error(err, ENOMEM, "transfer");
  while (rc == 0) {
    ssize_t n = read(ofd, buf, 1 << 20);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      rc = husk_error(err, errno, "cannot read the object");
    else if (n == 0)
      break;
    else if (write_all(fd, buf, (size_t)n) < 0)
      rc = husk_error(err, errno, "cannot write into the box");
  }
  if (rc == 0)
    rc = husk_file_commit(&b, path, fd, tmpname, err);
  else
    husk_file_abort(&b, path, fd, tmpname);
  close_quiet(fd);
  return rc;
}
