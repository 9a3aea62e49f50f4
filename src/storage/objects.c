/* Objects: publishing a finished writer as one (the write discipline's
 * steps 4 and 5: the row, then the unlink of the file it replaced),
 * reading, deleting, copying and listing them, and one-call puts. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "state/store_state.h"
#include "storage/store_internal.h"
#include "util/cleanup.h"
#include "util/id.h"
#include "util/utf8.h"

int store_key_check(const char *key, struct husk_err *err) {
  size_t n = strlen(key);
  if (n == 0)
    return husk_fail(err, STORE_EBADKEY, "the object key is empty");
  if (n > STORE_KEY_MAX)
    return husk_fail(err, STORE_EBADKEY, "the object key is longer than %d bytes", STORE_KEY_MAX);
  if (!utf8_valid(key, n))
    return husk_fail(err, STORE_EBADKEY, "the object key is not valid UTF-8");
  return 0;
}

void store_object_free(struct store_object *o) {
  if (!o)
    return;
  free(o->key);
  free(o->meta_json);
  o->key = o->meta_json = NULL;
}

int store_object_get(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                     struct store_object *out, int *fd, struct husk_err *err) {
  if (store_key_check(key, err) < 0) {
    /* A key that cannot be stored cannot exist either. */
    if (store_bucket_exists(s, tenant_id, bucket, err) < 0)
      return -1;
    return husk_fail(err, STORE_ENOKEY, "The specified key does not exist.");
  }
  /* A concurrent overwrite may unlink the file between the lookup and the
   * open: look again then (the new row names the new file). */
  for (int attempt = 0; attempt < 5; attempt++) {
    if (state_object_get(s->st, tenant_id, bucket, key, out, err) < 0)
      return -1;
    if (!fd)
      return 0;
    *fd = openat(s->objfd, out->file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (*fd >= 0)
      return 0;
    int e = errno;
    store_object_free(out);
    if (e != ENOENT)
      return husk_error(err, e, "cannot open the object's data");
  }
  return husk_fail(err, EAGAIN, "the object changed too often while being read; retry");
}

int store_object_delete(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                        struct husk_err *err) {
  char file[STORE_ID_SIZE];
  if (state_object_delete(s->st, tenant_id, bucket, key, file, err) < 0)
    return -1;
  if (file[0])
    store_unlink(s, s->objfd, file);
  return 0;
}

/* ---- publishing a finished writer (steps 4-5) ---- */

int store_creator_copy(char dst[STORE_CREATED_BY_SIZE], const char *src, struct husk_err *err) {
  dst[0] = '\0';
  if (!src)
    return 0;
  if (strnlen(src, STORE_CREATED_BY_SIZE) == STORE_CREATED_BY_SIZE ||
      state_check_created_by(src, true, err) < 0)
    return husk_fail(err, EINVAL, "internal: a malformed creator");
  memcpy(dst, src, strlen(src) + 1);
  return 0;
}

int store_fill_object(struct store_object *out, const char *key, const char *file, uint64_t size,
                      const char *etag, const char *ctype, const char *meta, int64_t mtime,
                      const char *created_by, struct husk_err *err) {
  if (!out)
    return 0;
  memset(out, 0, sizeof *out);
  out->key = strdup(key);
  out->meta_json = strdup(meta ? meta : "{}");
  if (!out->key || !out->meta_json) {
    store_object_free(out);
    return husk_error(err, ENOMEM, "object");
  }
  snprintf(out->file, sizeof out->file, "%s", file);
  out->size = size;
  snprintf(out->etag, sizeof out->etag, "%s", etag);
  snprintf(out->content_type, sizeof out->content_type, "%s", ctype ? ctype : "");
  out->mtime_ms = mtime;
  snprintf(out->created_by, sizeof out->created_by, "%s", created_by ? created_by : "");
  return 0;
}

/* Steps 3-5 for a finished file already named `etag`. */
static int commit_object(struct store_writer *w, const char *tenant_id, const char *bucket,
                         const char *key, const char *etag, const char *ctype, const char *meta,
                         const char *created_by, struct store_object *out, struct husk_err *err) {
  struct store *s = store_writer_store(w);
  char file[STORE_ID_SIZE], creator[STORE_CREATED_BY_SIZE];
  if (store_key_check(key, err) < 0 || store_creator_copy(creator, created_by, err) < 0 ||
      id_new("o", STORE_ID_BYTES, file, STORE_ID_SIZE, err) < 0)
    return -1;
  if (ctype && strlen(ctype) >= STORE_CTYPE_MAX)
    return husk_fail(err, EINVAL, "the content type is too long");
  if (store_writer_publish(w, s->objfd, file, err) < 0)
    return -1;
  int64_t now = state_now_ms();
  char old[STORE_ID_SIZE];
  uint64_t size = store_writer_size(w);
  struct state_object_new o = {.key = key,
                               .file = file,
                               .size = size,
                               .etag = etag,
                               .content_type = ctype,
                               .meta_json = meta,
                               .mtime_ms = now,
                               .created_by = creator};
  if (state_object_put(s->st, tenant_id, bucket, &o, s->quota, old, err) < 0) {
    /* A failed sync fails the call with the row committed (state.h):
     * then the file is the object's, and must stay. */
    if (!state_object_names_file(s->st, tenant_id, bucket, key, file))
      store_unlink(s, s->objfd, file);
    return -1;
  }
  if (old[0])
    store_unlink(s, s->objfd, old);
  return store_fill_object(out, key, file, size, etag, ctype, meta, now, creator, err);
}

int store_commit_with_etag(struct store_writer *w, const char *tenant_id, const char *bucket,
                           const char *key, const char *etag, const char *content_type,
                           const char *meta_json, const char *created_by, struct store_object *out,
                           struct husk_err *err) {
  int r =
      commit_object(w, tenant_id, bucket, key, etag, content_type, meta_json, created_by, out, err);
  store_writer_abort(w);
  return r;
}

int store_put_commit(struct store_writer *w, const char *tenant_id, const char *bucket,
                     const char *key, const char *content_type, const char *meta_json,
                     const char *created_by, struct store_object *out, struct husk_err *err) {
  int r = store_writer_finished(w) ? commit_object(w, tenant_id, bucket, key, store_writer_etag(w),
                                                   content_type, meta_json, created_by, out, err)
                                   : husk_fail(err, EINVAL, "internal: the body was not finished");
  store_writer_abort(w);
  return r;
}

/* ---- copies and one-call puts ---- */

/* Copy all of `in` from its current offset into the writer. */
static int pump(struct store_writer *w, int in, struct husk_err *err) {
  char *buf = malloc(1 << 20);
  if (!buf)
    return husk_error(err, ENOMEM, "copy");
  int rc = 0;
  for (;;) {
    ssize_t n = read(in, buf, 1 << 20);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      rc = husk_error(err, errno, "cannot read");
      break;
    }
    if (n == 0)
      break;
    if (store_writer_write(w, buf, (size_t)n, err) < 0) {
      rc = -1;
      break;
    }
  }
  free(buf);
  return rc;
}

int store_object_copy(struct store *s, const char *tenant_id, const char *src_bucket,
                      const char *src_key, const char *dst_bucket, const char *dst_key,
                      const char *content_type, const char *meta_json, const char *created_by,
                      struct store_object *out, struct husk_err *err) {
  struct store_object src;
  cleanup_close int fd = -1;
  if (store_object_get(s, tenant_id, src_bucket, src_key, &src, &fd, err) < 0)
    return -1;
  if (store_bucket_exists(s, tenant_id, dst_bucket, err) < 0) {
    store_object_free(&src);
    return -1;
  }
  struct store_writer *w = NULL;
  if (store_writer_open(s, CK_NONE, false, STORE_PUT_MAX, &w, err) < 0) {
    store_object_free(&src);
    return -1;
  }
  char etag[STORE_ETAG_SIZE];
  int rc = pump(w, fd, err);
  if (rc == 0)
    rc = store_writer_finish(w, NULL, etag, NULL, err);
  if (rc < 0) {
    store_writer_abort(w);
    store_object_free(&src);
    return -1;
  }
  /* S3 keeps the source's ETag (a multipart one stays "-N"). */
  snprintf(etag, sizeof etag, "%s", src.etag);
  rc = store_commit_with_etag(w, tenant_id, dst_bucket, dst_key, etag,
                              content_type ? content_type : src.content_type,
                              meta_json ? meta_json : src.meta_json, created_by, out, err);
  store_object_free(&src);
  return rc;
}

int store_put_fd(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                 int fd, const char *content_type, const char *created_by, struct store_object *out,
                 struct husk_err *err) {
  if (store_key_check(key, err) < 0 || store_bucket_exists(s, tenant_id, bucket, err) < 0)
    return -1;
  /* Everything is checked on the file's size before a byte is written;
   * the writer's limit then holds whatever the box does to it meanwhile. */
  uint64_t size = 0, bound = 0, room = 0;
  if (store_fd_bound(fd, &size, &bound, err) < 0)
    return -1;
  if (size > STORE_PUT_MAX)
    return husk_fail(err, STORE_ETOOLARGE,
                     "Your proposed upload exceeds the maximum allowed size (%llu bytes)",
                     (unsigned long long)STORE_PUT_MAX);
  if (store_quota_check(s, tenant_id, bucket, key, size, err) < 0 ||
      store_quota_room(s, tenant_id, bucket, key, &room, err) < 0 ||
      store_space_check(s, size, err) < 0)
    return -1;
  uint64_t limit = bound < STORE_PUT_MAX ? bound : STORE_PUT_MAX;
  if (room < limit)
    limit = room ? room : 1; /* the commit refuses what passes the quota */
  struct store_writer *w = NULL;
  if (store_writer_open(s, CK_NONE, false, limit, &w, err) < 0)
    return -1;
  char etag[STORE_ETAG_SIZE];
  if (pump(w, fd, err) < 0 || store_writer_finish(w, NULL, etag, NULL, err) < 0) {
    store_writer_abort(w);
    if (err->code == STORE_ETOOLARGE && limit == room)
      return husk_fail(err, STORE_EQUOTA, "The tenant's storage quota would be exceeded");
    if (err->code == STORE_ETOOLARGE && limit == bound)
      return husk_fail(err, STORE_ESPARSE,
                       "the file grew past what it held on disk while being stored");
    return -1;
  }
  return store_put_commit(w, tenant_id, bucket, key, content_type, NULL, created_by, out, err);
}

int store_put_buffer(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                     const void *buf, size_t n, const char *content_type, const char *created_by,
                     struct store_object *out, struct husk_err *err) {
  if (store_key_check(key, err) < 0 || store_bucket_exists(s, tenant_id, bucket, err) < 0)
    return -1;
  struct store_writer *w = NULL;
  if (store_writer_open(s, CK_NONE, false, STORE_PUT_MAX, &w, err) < 0)
    return -1;
  char etag[STORE_ETAG_SIZE];
  if (store_writer_write(w, buf, n, err) < 0 || store_writer_finish(w, NULL, etag, NULL, err) < 0) {
    store_writer_abort(w);
    return -1;
  }
  return store_put_commit(w, tenant_id, bucket, key, content_type, NULL, created_by, out, err);
}

/* ---- listing ---- */

int store_list(struct store *s, const char *tenant_id, const char *bucket,
               const struct store_list_req *rq, int (*cb)(void *ctx, const struct store_entry *e),
               void *ctx, bool *truncated, char **next, struct husk_err *err) {
  *truncated = false;
  *next = NULL;
  if (store_bucket_reserved(bucket))
    return husk_fail(err, STORE_EBADNAME, "The specified bucket is not valid");
  if (store_bucket_exists(s, tenant_id, bucket, err) < 0)
    return -1;
  const char *prefix = rq->prefix ? rq->prefix : "";
  const char *delim = rq->delimiter && *rq->delimiter ? rq->delimiter : NULL;
  size_t pl = strlen(prefix), dl = delim ? strlen(delim) : 0;
  /* The cursor: keys strictly after it.  Bytes 0xFF never occur in UTF-8,
   * so "P\xff" is past every key that starts with P. */
  size_t cap = STORE_KEY_MAX * 2 + 8;
  cleanup_free char *cursor = malloc(cap);
  if (!cursor)
    return husk_error(err, ENOMEM, "list");
  size_t cl = 0;
  if (rq->after && strlen(rq->after) < STORE_KEY_MAX * 2) {
    cl = strlen(rq->after);
    memcpy(cursor, rq->after, cl);
    /* A marker that is a common prefix (or inside one) skips the group. */
    if (delim && cl >= pl && !memcmp(cursor, prefix, pl)) {
      char *d = memmem(cursor + pl, cl - pl, delim, dl);
      if (d) {
        cl = (size_t)(d - cursor) + dl;
        cursor[cl++] = '\xff';
      }
    }
  }
  cursor[cl] = 0;
  unsigned count = 0;
  cleanup_free char *last = NULL;
  if (rq->max_keys == 0)
    return 0;
  for (;;) {
    cleanup_object_page struct state_object_page page = {0};
    if (state_object_page(s->st, tenant_id, bucket, cursor, cl, prefix, rq->created_by, &page,
                          err) < 0)
      return -1;
    if (page.n == 0)
      return 0;
    bool refetch = false;
    for (size_t i = 0; i < page.n && !refetch; i++) {
      struct state_object_entry *l = &page.entries[i];
      size_t kl = strlen(l->key);
      if (kl < pl || memcmp(l->key, prefix, pl))
        return 0; /* past the prefix */
      if (count == rq->max_keys) {
        *truncated = true;
        *next = last ? strdup(last) : NULL;
        if (!*next)
          return husk_error(err, ENOMEM, "list");
        return 0;
      }
      const char *d = delim ? memmem(l->key + pl, kl - pl, delim, dl) : NULL;
      struct store_entry e = {.key = l->key,
                              .size = l->size,
                              .etag = l->etag,
                              .mtime_ms = l->mtime_ms,
                              .created_by = l->created_by};
      size_t el = kl;
      if (d) {
        el = (size_t)(d - l->key) + dl;
        l->key[el] = 0;
        e.is_prefix = true;
        e.created_by = ""; /* a group of keys has no one writer */
      }
      int v = cb(ctx, &e);
      if (v)
        return v < 0 ? v : 0; /* a callback's verdict, as state.h's listings */
      count++;
      free(last);
      last = strndup(l->key, el);
      if (!last)
        return husk_error(err, ENOMEM, "list");
      memcpy(cursor, l->key, el);
      cl = el;
      if (d) {
        cursor[cl++] = '\xff';
        refetch = true; /* skip the rest of the group */
      }
      cursor[cl] = 0;
    }
    if (!refetch && page.n < STATE_OBJECT_PAGE)
      return 0;
  }
}
