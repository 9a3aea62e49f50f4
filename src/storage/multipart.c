/* Multipart uploads: parts arrive in any order and concurrently, each
 * published crash-safely as its own file under parts/; Complete
 * assembles them into one new object file and swaps it in with one
 * transaction that also drops the upload. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "state/store_state.h"
#include "storage/store_internal.h"
#include "util/cleanup.h"
#include "util/id.h"

int store_upload_check(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                       const char *upload_id, struct husk_err *err) {
  return state_upload_check(s->st, tenant_id, bucket, key, upload_id, err);
}

int store_upload_create(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                        const char *content_type, const char *meta_json,
                        char upload_id[STORE_ID_SIZE], struct husk_err *err) {
  if (store_key_check(key, err) < 0 ||
      id_new("u", STORE_ID_BYTES, upload_id, STORE_ID_SIZE, err) < 0)
    return -1;
  if (content_type && strlen(content_type) >= STORE_CTYPE_MAX)
    return husk_fail(err, EINVAL, "the content type is too long");
  return state_upload_create(s->st, tenant_id, bucket, key, upload_id, content_type, meta_json,
                             err);
}

int store_part_commit(struct store_writer *w, const char *tenant_id, const char *bucket,
                      const char *key, const char *upload_id, int num, struct husk_err *err) {
  struct store *s = store_writer_store(w);
  char file[STORE_ID_SIZE], old[STORE_ID_SIZE] = "";
  int rc = -1;
  if (num < 1 || num > STORE_PARTS_MAX) {
    husk_fail(err, EINVAL, "Part number must be an integer between 1 and 10000, inclusive");
    goto out;
  }
  if (id_new("p", STORE_ID_BYTES, file, STORE_ID_SIZE, err) < 0 ||
      store_writer_publish(w, s->partfd, file, err) < 0)
    goto out;
  {
    struct state_part p = {.num = num, .size = store_writer_size(w)};
    snprintf(p.file, sizeof p.file, "%s", file);
    snprintf(p.md5, sizeof p.md5, "%s", store_writer_etag(w));
    if (state_part_put(s->st, tenant_id, bucket, key, upload_id, &p, s->quota, old, err) < 0) {
      /* A failed sync fails the call with the row committed (state.h):
       * then the file is the part's, and must stay. */
      if (state_part_names_file(s->st, upload_id, file))
        goto out;
      goto unpublish;
    }
  }
  if (old[0])
    store_unlink(s, s->partfd, old);
  rc = 0;
  goto out;
unpublish:
  store_unlink(s, s->partfd, file);
out:
  store_writer_abort(w);
  return rc;
}

int store_upload_parts(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                       const char *upload_id, int after, int max,
                       int (*cb)(void *ctx, const struct store_part *p), void *ctx, bool *truncated,
                       struct husk_err *err) {
  if (max < 1 || max > 1000)
    max = 1000;
  cleanup_upload struct state_upload u = {0};
  if (state_upload_get(s->st, tenant_id, bucket, key, upload_id, after, max + 1, &u, err) < 0)
    return -1;
  *truncated = u.nparts > (size_t)max;
  for (size_t i = 0; i < u.nparts && i < (size_t)max; i++) {
    const struct state_part *r = &u.parts[i];
    struct store_part p = {.num = r->num, .size = r->size, .mtime_ms = r->mtime_ms};
    snprintf(p.etag, sizeof p.etag, "%s", r->md5);
    int v = cb(ctx, &p);
    if (v)
      return v < 0 ? v : 0; /* a callback's verdict, as state.h's listings */
  }
  return 0;
}

static int hexbyte(const char *h) {
  int v = 0;
  for (int i = 0; i < 2; i++) {
    char c = h[i];
    v <<= 4;
    if (c >= '0' && c <= '9')
      v |= c - '0';
    else if (c >= 'a' && c <= 'f')
      v |= c - 'a' + 10;
    else
      return -1;
  }
  return v;
}

int store_upload_complete(struct store *s, const char *tenant_id, const char *bucket,
                          const char *key, const char *upload_id, const struct store_part *parts,
                          size_t nparts, const char *created_by, struct store_object *out,
                          struct husk_err *err) {
  char creator[STORE_CREATED_BY_SIZE];
  if (store_creator_copy(creator, created_by, err) < 0)
    return -1;
  if (nparts == 0)
    return husk_fail(err, EINVAL, "You must specify at least one part");
  if (nparts > STORE_PARTS_MAX)
    return husk_fail(err, EINVAL, "too many parts");
  for (size_t i = 1; i < nparts; i++)
    if (parts[i].num <= parts[i - 1].num)
      return husk_fail(err, STORE_EPARTORDER,
                       "The list of parts was not in ascending order. Parts must be ordered by "
                       "part number.");
  cleanup_upload struct state_upload u = {0};
  if (state_upload_get(s->st, tenant_id, bucket, key, upload_id, 0, STORE_PARTS_MAX, &u, err) < 0)
    return -1;
  /* Match the client's list against the stored parts. */
  const struct state_part **use = calloc(nparts, sizeof *use);
  if (!use)
    return husk_error(err, ENOMEM, "complete");
  size_t j = 0;
  int rc = -1;
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  struct store_writer *w = NULL;
  if (!md || EVP_DigestInit_ex(md, EVP_md5(), NULL) != 1) {
    husk_fail(err, ENOMEM, "MD5");
    goto out;
  }
  for (size_t i = 0; i < nparts; i++) {
    while (j < u.nparts && u.parts[j].num < parts[i].num)
      j++;
    const struct state_part *r = j < u.nparts ? &u.parts[j] : NULL;
    const char *e = parts[i].etag;
    size_t el = strlen(e);
    if (el >= 2 && e[0] == '"' && e[el - 1] == '"') {
      e++;
      el -= 2;
    }
    if (!r || r->num != parts[i].num || el != strlen(r->md5) || strncasecmp(e, r->md5, el)) {
      husk_fail(err, STORE_EBADPART,
                "One or more of the specified parts could not be found. The part may not have "
                "been uploaded, or the specified entity tag may not match the part's entity tag.");
      goto out;
    }
    if (i + 1 < nparts && r->size < STORE_PART_MIN) {
      husk_fail(err, STORE_ETOOSMALL,
                "Your proposed upload is smaller than the minimum allowed size");
      goto out;
    }
    unsigned char bin[16];
    for (int k = 0; k < 16; k++) {
      int b = hexbyte(r->md5 + 2 * k);
      bin[k] = (unsigned char)(b < 0 ? 0 : b);
    }
    EVP_DigestUpdate(md, bin, 16);
    use[i] = r;
  }
  unsigned char sum[16];
  unsigned int l = 0;
  EVP_DigestFinal_ex(md, sum, &l);
  char etag[STORE_ETAG_SIZE];
  static const char hx[] = "0123456789abcdef";
  for (int k = 0; k < 16; k++) {
    etag[2 * k] = hx[sum[k] >> 4];
    etag[2 * k + 1] = hx[sum[k] & 15];
  }
  snprintf(etag + 32, sizeof etag - 32, "-%zu", nparts);

  /* Assemble into a new file (outside the lock: this is the long part). */
  uint64_t total = 0, all_parts = 0;
  for (size_t i = 0; i < nparts; i++)
    total += use[i]->size;
  for (size_t i = 0; i < u.nparts; i++)
    all_parts += u.parts[i].size; /* dropped with the upload */
  if (store_writer_open(s, CK_NONE, false, total + 1, &w, err) < 0)
    goto out;
  char *buf = malloc(1 << 20);
  if (!buf) {
    husk_error(err, ENOMEM, "complete");
    goto out;
  }
  for (size_t i = 0; i < nparts; i++) {
    int fd = openat(s->partfd, use[i]->file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      /* Replaced or aborted meanwhile. */
      husk_fail(err, errno == ENOENT ? STORE_EBADPART : errno, "a part changed during completion");
      free(buf);
      goto out;
    }
    uint64_t got = 0;
    for (;;) {
      ssize_t n = read(fd, buf, 1 << 20);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) {
        if (n < 0)
          husk_error(err, errno, "cannot read a part");
        break;
      }
      if (store_writer_write(w, buf, (size_t)n, err) < 0) {
        n = -1;
        break;
      }
      got += (uint64_t)n;
    }
    close(fd);
    if (got != use[i]->size) {
      if (!err->msg[0] || err->code == 0)
        husk_fail(err, EIO, "a part's file has the wrong size");
      free(buf);
      goto out;
    }
  }
  free(buf);
  char md5hex[STORE_ETAG_SIZE];
  if (store_writer_finish(w, NULL, md5hex, NULL, err) < 0)
    goto out;
  /* Publish the assembled file, then one transaction checks that the
   * upload is still there (not aborted or completed by a racing call),
   * points the key at the new file and drops the upload.  A crash before
   * the commit leaves the upload and its parts as they were (the new file
   * is swept at the next start); after it, the object is complete. */
  char file[STORE_ID_SIZE], old[STORE_ID_SIZE] = "";
  if (store_key_check(key, err) < 0 || id_new("o", STORE_ID_BYTES, file, STORE_ID_SIZE, err) < 0 ||
      store_writer_publish(w, s->objfd, file, err) < 0)
    goto out;
  int64_t now = state_now_ms();
  struct state_object_new o = {.key = key,
                               .file = file,
                               .size = total,
                               .etag = etag,
                               .content_type = u.content_type,
                               .meta_json = u.meta_json,
                               .mtime_ms = now,
                               .created_by = creator};
  if (state_upload_complete(s->st, tenant_id, bucket, upload_id, &o, s->quota, all_parts, old,
                            err) < 0) {
    /* As for a part: after a failed sync the row may name the file. */
    if (!state_object_names_file(s->st, tenant_id, bucket, key, file))
      store_unlink(s, s->objfd, file);
    goto out;
  }
  if (old[0])
    store_unlink(s, s->objfd, old);
  rc = store_fill_object(out, key, file, total, etag, u.content_type, u.meta_json, now, creator,
                         err);
  /* The parts' files are unused now (the upload's rows are gone). */
  for (size_t i = 0; i < u.nparts; i++)
    store_unlink(s, s->partfd, u.parts[i].file);
out:
  store_writer_abort(w);
  EVP_MD_CTX_free(md);
  free(use);
  return rc;
}

int store_upload_abort(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                       const char *upload_id, struct husk_err *err) {
  cleanup_upload struct state_upload u = {0};
  if (state_upload_get(s->st, tenant_id, bucket, key, upload_id, 0, STORE_PARTS_MAX, &u, err) < 0)
    return -1;
  /* Part files of rows added since the read above are swept at the next
   * start (no row names them once the upload is gone). */
  if (state_upload_abort(s->st, tenant_id, bucket, key, upload_id, err) < 0)
    return -1;
  for (size_t i = 0; i < u.nparts; i++)
    store_unlink(s, s->partfd, u.parts[i].file);
  return 0;
}

int store_upload_list(struct store *s, const char *tenant_id, const char *bucket,
                      const char *prefix, const char *key_marker, const char *id_marker, int max,
                      int (*cb)(void *ctx, const struct store_upload *u), void *ctx,
                      bool *truncated, struct husk_err *err) {
  if (max < 1 || max > 1000)
    max = 1000;
  return state_upload_list(s->st, tenant_id, bucket, prefix, key_marker, id_marker, max, cb, ctx,
                           truncated, err);
}
