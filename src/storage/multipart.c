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

#include "storage/store_internal.h"
#include "util/cleanup.h"
#include "util/id.h"

/* Under the lock: the upload exists, is the tenant's and for bucket/key. */
static int upload_check_locked(struct store *s, const char *tenant_id, const char *bucket,
                               const char *key, const char *upload_id, char *ctype, size_t csize,
                               char **meta, struct husk_err *err) {
  if (store_bucket_check_locked(s, tenant_id, bucket, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(s->st, &q,
                 "SELECT content_type, meta_json FROM uploads WHERE id = ? AND tenant_id = ? AND "
                 "bucket = ? AND key = ?",
                 err) < 0)
    return -1;
  int rc = db_text(q, 1, upload_id) || db_text(q, 2, tenant_id) || db_text(q, 3, bucket) ||
           db_text(q, 4, key);
  if (rc != SQLITE_OK)
    return db_fail(s->st, err, rc, "upload");
  int r = db_step_row(s->st, q, "upload", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, STORE_ENOUPLOAD,
                     "The specified upload does not exist. The upload ID may be invalid, or the "
                     "upload may have been aborted or completed.");
  if (ctype)
    db_col_text(q, 0, ctype, csize);
  if (meta && !(*meta = db_col_strdup(q, 1)))
    return husk_error(err, ENOMEM, "upload");
  return 0;
}

int store_upload_check(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                       const char *upload_id, struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(s->st);
  return upload_check_locked(s, tenant_id, bucket, key, upload_id, NULL, 0, NULL, err);
}

int store_upload_create(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                        const char *content_type, const char *meta_json,
                        char upload_id[STORE_ID_SIZE], struct husk_err *err) {
  if (store_key_check(key, err) < 0 ||
      id_new("u", STORE_ID_BYTES, upload_id, STORE_ID_SIZE, err) < 0)
    return -1;
  if (content_type && strlen(content_type) >= STORE_CTYPE_MAX)
    return husk_fail(err, EINVAL, "the content type is too long");
  cleanup_unlock struct state *locked = db_lock(s->st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(s->st, &txn, err) < 0)
    return -1;
  if (store_bucket_check_locked(s, tenant_id, bucket, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(s->st, &q,
                 "INSERT INTO uploads (id, tenant_id, bucket, key, content_type, meta_json, "
                 "created_ms) VALUES (?, ?, ?, ?, ?, ?, ?)",
                 err) < 0)
    return -1;
  int rc = db_text(q, 1, upload_id) || db_text(q, 2, tenant_id) || db_text(q, 3, bucket) ||
           db_text(q, 4, key) || db_text(q, 5, content_type ? content_type : "") ||
           db_text(q, 6, meta_json ? meta_json : "{}") || db_int(q, 7, state_now_ms());
  if (rc != SQLITE_OK)
    return db_fail(s->st, err, rc, "upload");
  if (db_step_done(s->st, q, "cannot create the upload", err) < 0)
    return -1;
  return db_commit(&txn, err);
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
    cleanup_unlock struct state *locked = db_lock(s->st);
    cleanup_txn struct db_txn txn = {0};
    if (db_begin(s->st, &txn, err) < 0 ||
        upload_check_locked(s, tenant_id, bucket, key, upload_id, NULL, 0, NULL, err) < 0)
      goto unpublish;
    uint64_t old_size = 0;
    {
      cleanup_stmt sqlite3_stmt *q = NULL;
      if (db_prepare(s->st, &q, "SELECT file, size FROM parts WHERE upload_id = ? AND num = ?",
                     err) < 0)
        goto unpublish;
      int r = db_text(q, 1, upload_id) || db_int(q, 2, num);
      if (r != SQLITE_OK) {
        db_fail(s->st, err, r, "part");
        goto unpublish;
      }
      r = db_step_row(s->st, q, "part", err);
      if (r < 0)
        goto unpublish;
      if (r == 1) {
        db_col_text(q, 0, old, sizeof old);
        old_size = (uint64_t)sqlite3_column_int64(q, 1);
      }
    }
    if (store_quota_locked(s, tenant_id, store_writer_size(w), old_size, err) < 0)
      goto unpublish;
    cleanup_stmt sqlite3_stmt *u = NULL;
    if (db_prepare(s->st, &u,
                   "INSERT INTO parts (upload_id, num, file, size, md5, mtime_ms) VALUES "
                   "(?, ?, ?, ?, ?, ?) ON CONFLICT (upload_id, num) DO UPDATE SET "
                   "file = excluded.file, size = excluded.size, md5 = excluded.md5, "
                   "mtime_ms = excluded.mtime_ms",
                   err) < 0)
      goto unpublish;
    int r = db_text(u, 1, upload_id) || db_int(u, 2, num) || db_text(u, 3, file) ||
            db_int(u, 4, (int64_t)store_writer_size(w)) || db_text(u, 5, store_writer_etag(w)) ||
            db_int(u, 6, state_now_ms());
    if (r != SQLITE_OK) {
      db_fail(s->st, err, r, "part");
      goto unpublish;
    }
    if (db_step_done(s->st, u, "cannot store the part", err) < 0 || db_commit(&txn, err) < 0)
      goto unpublish;
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

struct part_row {
  int num;
  char file[STORE_ID_SIZE];
  char md5[STORE_ETAG_SIZE];
  uint64_t size;
  int64_t mtime_ms;
};

/* All parts (or those > after, at most max) in number order. */
static int part_rows(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                     const char *upload_id, int after, int max, struct db_rows *rows, char *ctype,
                     size_t csize, char **meta, struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(s->st);
  if (upload_check_locked(s, tenant_id, bucket, key, upload_id, ctype, csize, meta, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(s->st, &q,
                 "SELECT num, file, md5, size, mtime_ms FROM parts WHERE upload_id = ? AND num > ? "
                 "ORDER BY num LIMIT ?",
                 err) < 0)
    return -1;
  int rc = db_text(q, 1, upload_id) || db_int(q, 2, after) || db_int(q, 3, max);
  if (rc != SQLITE_OK)
    return db_fail(s->st, err, rc, "parts");
  int r;
  while ((r = db_step_row(s->st, q, "parts", err)) == 1) {
    struct part_row *p = db_rows_push(rows);
    if (!p)
      return husk_error(err, ENOMEM, "parts");
    p->num = sqlite3_column_int(q, 0);
    db_col_text(q, 1, p->file, sizeof p->file);
    db_col_text(q, 2, p->md5, sizeof p->md5);
    p->size = (uint64_t)sqlite3_column_int64(q, 3);
    p->mtime_ms = sqlite3_column_int64(q, 4);
  }
  return r < 0 ? -1 : 0;
}

int store_upload_parts(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                       const char *upload_id, int after, int max,
                       int (*cb)(void *ctx, const struct store_part *p), void *ctx, bool *truncated,
                       struct husk_err *err) {
  if (max < 1 || max > 1000)
    max = 1000;
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct part_row)};
  if (part_rows(s, tenant_id, bucket, key, upload_id, after, max + 1, &rows, NULL, 0, NULL, err) <
      0)
    return -1;
  *truncated = rows.n > (size_t)max;
  for (size_t i = 0; i < rows.n && i < (size_t)max; i++) {
    struct part_row *r = db_rows_at(&rows, i);
    struct store_part p = {.num = r->num, .size = r->size, .mtime_ms = r->mtime_ms};
    snprintf(p.etag, sizeof p.etag, "%s", r->md5);
    int v = cb(ctx, &p);
    if (v)
      return db_cb_verdict(v);
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

/* Remove the upload's rows if it still has exactly these parts; the
 * object row is written in the same transaction by the caller's upsert,
 * so here only: under the lock, check and delete. */
static int upload_drop_locked(struct store *s, const char *upload_id, struct husk_err *err) {
  cleanup_stmt sqlite3_stmt *d = NULL;
  if (db_prepare(s->st, &d, "DELETE FROM uploads WHERE id = ?", err) < 0)
    return -1;
  int rc = db_text(d, 1, upload_id);
  if (rc != SQLITE_OK)
    return db_fail(s->st, err, rc, "upload");
  return db_step_done(s->st, d, "cannot drop the upload", err) < 0 ? -1 : 0;
}

int store_upload_complete(struct store *s, const char *tenant_id, const char *bucket,
                          const char *key, const char *upload_id, const struct store_part *parts,
                          size_t nparts, struct store_object *out, struct husk_err *err) {
  if (nparts == 0)
    return husk_fail(err, EINVAL, "You must specify at least one part");
  if (nparts > STORE_PARTS_MAX)
    return husk_fail(err, EINVAL, "too many parts");
  for (size_t i = 1; i < nparts; i++)
    if (parts[i].num <= parts[i - 1].num)
      return husk_fail(err, STORE_EPARTORDER,
                       "The list of parts was not in ascending order. Parts must be ordered by "
                       "part number.");
  char ctype[STORE_CTYPE_MAX] = "";
  cleanup_free char *meta = NULL;
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct part_row)};
  if (part_rows(s, tenant_id, bucket, key, upload_id, 0, STORE_PARTS_MAX, &rows, ctype,
                sizeof ctype, &meta, err) < 0)
    return -1;
  /* Match the client's list against the stored parts. */
  struct part_row **use = calloc(nparts, sizeof *use);
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
    while (j < rows.n && ((struct part_row *)db_rows_at(&rows, j))->num < parts[i].num)
      j++;
    struct part_row *r = j < rows.n ? db_rows_at(&rows, j) : NULL;
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
  for (size_t i = 0; i < rows.n; i++)
    all_parts += ((struct part_row *)db_rows_at(&rows, i))->size; /* dropped with the upload */
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
  {
    cleanup_unlock struct state *locked = db_lock(s->st);
    cleanup_txn struct db_txn txn = {0};
    if (db_begin(s->st, &txn, err) < 0 ||
        upload_check_locked(s, tenant_id, bucket, key, upload_id, NULL, 0, NULL, err) < 0 ||
        store_object_upsert_locked(s, tenant_id, bucket, key, file, total, etag, ctype, meta, now,
                                   all_parts, old, err) < 0 ||
        upload_drop_locked(s, upload_id, err) < 0 || db_commit(&txn, err) < 0) {
      store_unlink(s, s->objfd, file);
      goto out;
    }
  }
  if (old[0])
    store_unlink(s, s->objfd, old);
  rc = store_fill_object(out, key, file, total, etag, ctype, meta, now, err);
  /* The parts' files are unused now (the upload's rows are gone). */
  for (size_t i = 0; i < rows.n; i++)
    store_unlink(s, s->partfd, ((struct part_row *)db_rows_at(&rows, i))->file);
out:
  store_writer_abort(w);
  EVP_MD_CTX_free(md);
  free(use);
  return rc;
}

int store_upload_abort(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                       const char *upload_id, struct husk_err *err) {
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct part_row)};
  if (part_rows(s, tenant_id, bucket, key, upload_id, 0, STORE_PARTS_MAX, &rows, NULL, 0, NULL,
                err) < 0)
    return -1;
  {
    cleanup_unlock struct state *locked = db_lock(s->st);
    cleanup_txn struct db_txn txn = {0};
    if (db_begin(s->st, &txn, err) < 0 ||
        upload_check_locked(s, tenant_id, bucket, key, upload_id, NULL, 0, NULL, err) < 0)
      return -1;
    /* Part files of rows added since the read above are swept at the next
     * start (no row names them once the upload is gone). */
    if (upload_drop_locked(s, upload_id, err) < 0 || db_commit(&txn, err) < 0)
      return -1;
  }
  for (size_t i = 0; i < rows.n; i++)
    store_unlink(s, s->partfd, ((struct part_row *)db_rows_at(&rows, i))->file);
  return 0;
}

struct upload_row {
  char *key;
  char id[STORE_ID_SIZE];
  int64_t created_ms;
};
static void upload_row_free(void *p) { free(((struct upload_row *)p)->key); }

int store_upload_list(struct store *s, const char *tenant_id, const char *bucket,
                      const char *prefix, const char *key_marker, const char *id_marker, int max,
                      int (*cb)(void *ctx, const struct store_upload *u), void *ctx,
                      bool *truncated, struct husk_err *err) {
  if (max < 1 || max > 1000)
    max = 1000;
  *truncated = false;
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct upload_row),
                                      .free_item = upload_row_free};
  {
    cleanup_unlock struct state *locked = db_lock(s->st);
    if (store_bucket_check_locked(s, tenant_id, bucket, err) < 0)
      return -1;
    cleanup_stmt sqlite3_stmt *q = NULL;
    if (db_prepare(s->st, &q,
                   "SELECT key, id, created_ms FROM uploads WHERE tenant_id = ?1 AND bucket = ?2 "
                   "AND substr(key, 1, length(?3)) = ?3 AND (key > ?4 OR (key = ?4 AND id > ?5)) "
                   "ORDER BY key, id LIMIT ?6",
                   err) < 0)
      return -1;
    int rc = db_text(q, 1, tenant_id) || db_text(q, 2, bucket) ||
             db_text(q, 3, prefix ? prefix : "") || db_text(q, 4, key_marker ? key_marker : "") ||
             db_text(q, 5, id_marker ? id_marker : "") || db_int(q, 6, max + 1);
    if (rc != SQLITE_OK)
      return db_fail(s->st, err, rc, "uploads");
    int r;
    while ((r = db_step_row(s->st, q, "uploads", err)) == 1) {
      struct upload_row *u = db_rows_push(&rows);
      if (!u)
        return husk_error(err, ENOMEM, "uploads");
      u->key = db_col_strdup(q, 0);
      db_col_text(q, 1, u->id, sizeof u->id);
      u->created_ms = sqlite3_column_int64(q, 2);
      if (!u->key)
        return husk_error(err, ENOMEM, "uploads");
    }
    if (r < 0)
      return -1;
  }
  *truncated = rows.n > (size_t)max;
  for (size_t i = 0; i < rows.n && i < (size_t)max; i++) {
    struct upload_row *u = db_rows_at(&rows, i);
    struct store_upload su = {u->key, u->id, u->created_ms};
    int v = cb(ctx, &su);
    if (v)
      return db_cb_verdict(v);
  }
  return 0;
}
