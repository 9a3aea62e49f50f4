/* Links: presigned, expiring GET URLs of objects, and who fetched them.
 *
 * A link is a SigV4 presigned URL on the daemon's public address, signed
 * with the tenant's internal link key (never shown to anyone), carrying
 * its id as a signed query parameter (x-husk-link).  The S3 front checks
 * it as any presigned request -- a changed path, method, expiry, host or
 * id breaks the signature -- and records each valid fetch (the newest
 * STORE_LINK_LOG_MAX per link).  A refused one (forged, expired, revoked)
 * only increments a counter: the link's when its id names a link of the
 * tenant whose key it claims, a global one otherwise.
 * The link row also lets an owner list links and read their access log. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>

#include "storage/remote.h"
#include "storage/sigv4.h"
#include "storage/store_internal.h"
#include "util/cleanup.h"
#include "util/id.h"
#include "util/utf8.h"

int store_internal_key(struct store *s, const char *tenant_id, char key_id[STORE_ACCESS_KEY_SIZE],
                       char secret[STORE_SECRET_SIZE], struct husk_err *err);

void store_link_free(struct store_link *l) {
  if (!l)
    return;
  free(l->key);
  free(l->url);
  l->key = l->url = NULL;
}

/* "http://host:port" -> host:port (the Host header a fetcher sends). */
static int url_authority(const char *url, char *host, size_t size, struct husk_err *err) {
  const char *p = strstr(url, "://");
  if (!p || (strncmp(url, "http://", 7) && strncmp(url, "https://", 8)))
    return husk_fail(err, EINVAL, "the public URL must start with http:// or https://");
  p += 3;
  size_t n = strcspn(p, "/?#");
  if (n == 0 || n >= size || (p[n] && strcmp(p + n, "/")))
    return husk_fail(err, EINVAL, "the public URL must be scheme://host[:port] without a path");
  memcpy(host, p, n);
  host[n] = 0;
  return 0;
}

/* Content-Disposition for a download name: plain when it is simple ASCII,
 * RFC 6266 filename* otherwise.  The name must be one path component of
 * printable UTF-8. */
static char *disposition(const char *name, struct husk_err *err) {
  size_t n = strlen(name);
  if (n == 0 || n > 255 || !utf8_valid(name, n) || strchr(name, '/'))
    return husk_fail(err, EINVAL,
                     "the download filename must be 1..255 bytes of UTF-8 without `/`"),
           NULL;
  bool simple = true;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)name[i];
    if (c < 0x20 || c == 0x7f)
      return husk_fail(err, EINVAL, "the download filename has control characters"), NULL;
    if (c >= 0x80 || c == '"' || c == '\\' || c == ';' || c == '%')
      simple = false;
  }
  char *d = NULL;
  if (simple) {
    if (asprintf(&d, "attachment; filename=\"%s\"", name) < 0)
      d = NULL;
  } else {
    cleanup_free char *e = sigv4_uri_encode(name, n, false);
    if (e && asprintf(&d, "attachment; filename*=UTF-8''%s", e) < 0)
      d = NULL;
  }
  if (!d)
    husk_error(err, ENOMEM, "link");
  return d;
}

static int link_insert(struct store *s, const char *tenant_id, struct store_link *out,
                       struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(s->st);
  cleanup_txn struct db_txn txn = {0};
  cleanup_stmt sqlite3_stmt *ins = NULL;
  if (db_begin(s->st, &txn, err) < 0 ||
      db_prepare(s->st, &ins,
                 "INSERT INTO links (id, tenant_id, bucket, key, filename, url, created_ms, "
                 "expires_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                 err) < 0)
    return -1;
  int rc = db_text(ins, 1, out->id) || db_text(ins, 2, tenant_id) || db_text(ins, 3, out->bucket) ||
           db_text(ins, 4, out->key) || db_text(ins, 5, out->filename) ||
           db_text(ins, 6, out->url) || db_int(ins, 7, out->created_ms) ||
           db_int(ins, 8, out->expires_ms);
  if (rc != SQLITE_OK)
    return db_fail(s->st, err, rc, "link");
  if (db_step_done(s->st, ins, "cannot store the link", err) < 0)
    return -1;
  return db_commit(&txn, err);
}

/* A link on the external store: presigned with its credentials, so its
 * fetches are not seen (nor logged) by husk. */
static int remote_link(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                       int64_t expires_s, const char *filename, struct store_link *out,
                       struct husk_err *err) {
  if (store_key_check(key, err) < 0)
    return -1;
  if (!store_bucket_name_ok(bucket))
    return husk_fail(err, STORE_EBADNAME, "The specified bucket is not valid");
  cleanup_free char *rk = remote_key(tenant_id, bucket, key);
  if (!rk)
    return husk_error(err, ENOMEM, "link");
  uint64_t size;
  if (remote_head(s->remote, rk, &size, err) < 0) {
    if (err->code == ENOENT)
      return husk_fail(err, STORE_ENOKEY, "The specified key does not exist.");
    return -1;
  }
  cleanup_free char *disp = NULL;
  if (filename && *filename && !(disp = disposition(filename, err)))
    return -1;
  if (id_new("l", STORE_ID_BYTES, out->id, STORE_ID_SIZE, err) < 0 ||
      remote_presign(s->remote, rk, expires_s, disp, &out->url, err) < 0)
    return -1;
  out->key = strdup(key);
  if (!out->key) {
    store_link_free(out);
    return husk_error(err, ENOMEM, "link");
  }
  snprintf(out->bucket, sizeof out->bucket, "%s", bucket);
  snprintf(out->filename, sizeof out->filename, "%s", filename ? filename : "");
  time_t now = time(NULL);
  out->created_ms = (int64_t)now * 1000;
  out->expires_ms = ((int64_t)now + expires_s) * 1000;
  if (link_insert(s, tenant_id, out, err) < 0) {
    store_link_free(out);
    return -1;
  }
  return 0;
}

int store_link_create(struct store *s, const char *tenant_id, const char *bucket, const char *key,
                      int64_t expires_s, const char *filename, struct store_link *out,
                      struct husk_err *err) {
  memset(out, 0, sizeof *out);
  if (expires_s == 0)
    expires_s = STORE_LINK_DEFAULT_S;
  if (expires_s < 1 || expires_s > STORE_LINK_MAX_S)
    return husk_fail(err, EINVAL, "the expiry must be 1..%d seconds (7 days)", STORE_LINK_MAX_S);
  if (store_space_check(s, 0, err) < 0)
    return -1;
  if (s->remote)
    return remote_link(s, tenant_id, bucket, key, expires_s, filename, out, err);
  struct store_object o;
  if (store_object_get(s, tenant_id, bucket, key, &o, NULL, err) < 0)
    return -1;
  store_object_free(&o);
  char host[256];
  if (!s->public_url[0])
    return husk_fail(
        err, EOPNOTSUPP,
        "links need the S3 listener (--s3-listen), a --public-url or an external store");
  if (url_authority(s->public_url, host, sizeof host, err) < 0)
    return -1;
  char id[STORE_ID_SIZE];
  if (id_new("l", STORE_ID_BYTES, id, STORE_ID_SIZE, err) < 0)
    return -1;
  cleanup_free char *extra = NULL;
  if (filename && *filename) {
    cleanup_free char *d = disposition(filename, err);
    if (!d)
      return -1;
    cleanup_free char *ed = sigv4_uri_encode(d, strlen(d), false);
    if (!ed || asprintf(&extra, "response-content-disposition=%s&x-husk-link=%s", ed, id) < 0)
      return husk_error(err, ENOMEM, "link");
  } else if (asprintf(&extra, "x-husk-link=%s", id) < 0) {
    return husk_error(err, ENOMEM, "link");
  }
  cleanup_free char *ekey = sigv4_uri_encode(key, strlen(key), true);
  cleanup_free char *path = NULL;
  if (!ekey || asprintf(&path, "/%s/%s", bucket, ekey) < 0)
    return husk_error(err, ENOMEM, "link");
  char kid[STORE_ACCESS_KEY_SIZE], secret[STORE_SECRET_SIZE];
  if (store_internal_key(s, tenant_id, kid, secret, err) < 0)
    return -1;
  struct sigv4_creds c = {kid, secret, s->region, "s3"};
  time_t now = time(NULL);
  cleanup_free char *q = NULL;
  int rc = sigv4_presign(&c, "GET", path, host, extra, now, expires_s, &q, err);
  OPENSSL_cleanse(secret, sizeof secret);
  if (rc < 0)
    return -1;
  const char *base = s->public_url;
  size_t bl = strlen(base);
  if (bl && base[bl - 1] == '/')
    bl--;
  if (asprintf(&out->url, "%.*s%s?%s", (int)bl, base, path, q) < 0) {
    out->url = NULL;
    return husk_error(err, ENOMEM, "link");
  }
  out->key = strdup(key);
  if (!out->key) {
    store_link_free(out);
    return husk_error(err, ENOMEM, "link");
  }
  snprintf(out->id, sizeof out->id, "%s", id);
  snprintf(out->bucket, sizeof out->bucket, "%s", bucket);
  snprintf(out->filename, sizeof out->filename, "%s", filename ? filename : "");
  out->created_ms = (int64_t)now * 1000;
  out->expires_ms = ((int64_t)now + expires_s) * 1000;

  if (link_insert(s, tenant_id, out, err) < 0) {
    store_link_free(out);
    return -1;
  }
  return 0;
}

int store_link_get(struct store *s, const char *tenant_id, const char *id, struct store_link *out,
                   struct husk_err *err) {
  memset(out, 0, sizeof *out);
  cleanup_unlock struct state *locked = db_lock(s->st);
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(
          s->st, &q,
          "SELECT id, bucket, key, url, filename, created_ms, expires_ms, revoked_ms, denied, "
          "denied_last_ms FROM links WHERE id = ? AND tenant_id = ?",
          err) < 0)
    return -1;
  int rc = db_text(q, 1, id) || db_text(q, 2, tenant_id);
  if (rc != SQLITE_OK)
    return db_fail(s->st, err, rc, "link");
  int r = db_step_row(s->st, q, "link", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, STORE_ENOLINK, "no such link");
  db_col_text(q, 0, out->id, sizeof out->id);
  db_col_text(q, 1, out->bucket, sizeof out->bucket);
  out->key = db_col_strdup(q, 2);
  out->url = db_col_strdup(q, 3);
  db_col_text(q, 4, out->filename, sizeof out->filename);
  out->created_ms = sqlite3_column_int64(q, 5);
  out->expires_ms = sqlite3_column_int64(q, 6);
  out->revoked_ms = sqlite3_column_int64(q, 7);
  out->denied = sqlite3_column_int64(q, 8);
  out->denied_last_ms = sqlite3_column_int64(q, 9);
  if (!out->key || !out->url) {
    store_link_free(out);
    return husk_error(err, ENOMEM, "link");
  }
  return 0;
}

bool store_link_owned(struct store *s, const char *id, const char *tenant_id, bool *live) {
  struct store_link l;
  struct husk_err err;
  *live = false;
  if (store_link_get(s, tenant_id, id, &l, &err) < 0)
    return false;
  *live = l.revoked_ms == 0;
  store_link_free(&l);
  return true;
}

int store_link_revoke(struct store *s, const char *tenant_id, const char *id,
                      struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(s->st);
  cleanup_txn struct db_txn txn = {0};
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_begin(s->st, &txn, err) < 0 ||
      db_prepare(
          s->st, &q,
          "UPDATE links SET revoked_ms = ? WHERE id = ? AND tenant_id = ? AND revoked_ms = 0",
          err) < 0)
    return -1;
  int rc = db_int(q, 1, state_now_ms()) || db_text(q, 2, id) || db_text(q, 3, tenant_id);
  if (rc != SQLITE_OK)
    return db_fail(s->st, err, rc, "link");
  int n = db_step_done(s->st, q, "cannot revoke the link", err);
  if (n < 0)
    return -1;
  if (n == 0) {
    /* Unknown, another tenant's, or revoked already (then: fine). */
    cleanup_stmt sqlite3_stmt *c = NULL;
    if (db_prepare(s->st, &c, "SELECT 1 FROM links WHERE id = ? AND tenant_id = ?", err) < 0)
      return -1;
    rc = db_text(c, 1, id) || db_text(c, 2, tenant_id);
    if (rc != SQLITE_OK)
      return db_fail(s->st, err, rc, "link");
    int r = db_step_row(s->st, c, "link", err);
    if (r < 0)
      return -1;
    if (r == 0)
      return husk_fail(err, STORE_ENOLINK, "no such link");
  }
  return db_commit(&txn, err);
}

struct link_row {
  struct store_link l;
};
static void link_row_free(void *p) { store_link_free(&((struct link_row *)p)->l); }

int store_link_list(struct store *s, const char *tenant_id,
                    int (*cb)(void *ctx, const struct store_link *l), void *ctx,
                    struct husk_err *err) {
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct link_row),
                                      .free_item = link_row_free};
  {
    cleanup_unlock struct state *locked = db_lock(s->st);
    cleanup_stmt sqlite3_stmt *q = NULL;
    if (db_prepare(s->st, &q,
                   "SELECT id, bucket, key, url, filename, created_ms, expires_ms, revoked_ms, "
                   "denied, denied_last_ms FROM links WHERE tenant_id = ? "
                   "ORDER BY created_ms DESC, id LIMIT 1000",
                   err) < 0)
      return -1;
    int rc = db_text(q, 1, tenant_id);
    if (rc != SQLITE_OK)
      return db_fail(s->st, err, rc, "links");
    int r;
    while ((r = db_step_row(s->st, q, "links", err)) == 1) {
      struct link_row *lr = db_rows_push(&rows);
      if (!lr)
        return husk_error(err, ENOMEM, "links");
      struct store_link *l = &lr->l;
      db_col_text(q, 0, l->id, sizeof l->id);
      db_col_text(q, 1, l->bucket, sizeof l->bucket);
      l->key = db_col_strdup(q, 2);
      l->url = db_col_strdup(q, 3);
      db_col_text(q, 4, l->filename, sizeof l->filename);
      l->created_ms = sqlite3_column_int64(q, 5);
      l->expires_ms = sqlite3_column_int64(q, 6);
      l->revoked_ms = sqlite3_column_int64(q, 7);
      l->denied = sqlite3_column_int64(q, 8);
      l->denied_last_ms = sqlite3_column_int64(q, 9);
      if (!l->key || !l->url)
        return husk_error(err, ENOMEM, "links");
    }
    if (r < 0)
      return -1;
  }
  for (size_t i = 0; i < rows.n; i++) {
    int v = cb(ctx, &((struct link_row *)db_rows_at(&rows, i))->l);
    if (v)
      return db_cb_verdict(v);
  }
  return 0;
}

/* Printable ASCII only, cut to size: these come from anyone on the net. */
static void clean_copy(char *dst, size_t size, const char *src) {
  size_t o = 0;
  for (; src && *src && o + 1 < size; src++)
    dst[o++] = (*src >= 0x20 && *src < 0x7f) ? *src : '?';
  dst[o] = 0;
}

int store_link_record(struct store *s, const char *id, const char *remote, const char *user_agent,
                      int status, struct husk_err *err) {
  char ra[64], ua[256];
  clean_copy(ra, sizeof ra, remote);
  clean_copy(ua, sizeof ua, user_agent);
  cleanup_unlock struct state *locked = db_lock(s->st);
  cleanup_txn struct db_txn txn = {0};
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_begin(s->st, &txn, err) < 0 ||
      db_prepare(s->st, &q,
                 "INSERT INTO link_access (link_id, ts_ms, remote, user_agent, status) "
                 "SELECT id, ?, ?, ?, ? FROM links WHERE id = ?",
                 err) < 0)
    return -1;
  int rc = db_int(q, 1, state_now_ms()) || db_text(q, 2, ra) || db_text(q, 3, ua) ||
           db_int(q, 4, status) || db_text(q, 5, id);
  if (rc != SQLITE_OK)
    return db_fail(s->st, err, rc, "link access");
  if (db_step_done(s->st, q, "cannot record the link access", err) < 0)
    return -1;
  /* Only the newest STORE_LINK_LOG_MAX fetches of a link are kept: a
   * link's holder decides how often it is fetched, not how big the
   * database grows. */
  cleanup_stmt sqlite3_stmt *d = NULL;
  if (db_prepare(s->st, &d,
                 "DELETE FROM link_access WHERE link_id = ?1 AND seq <= (SELECT seq FROM "
                 "link_access WHERE link_id = ?1 ORDER BY seq DESC LIMIT 1 OFFSET ?2)",
                 err) < 0)
    return -1;
  rc = db_text(d, 1, id) || db_int(d, 2, STORE_LINK_LOG_MAX);
  if (rc != SQLITE_OK)
    return db_fail(s->st, err, rc, "link access");
  if (db_step_done(s->st, d, "cannot prune the link access log", err) < 0)
    return -1;
  return db_commit(&txn, err);
}

int store_link_denied(struct store *s, const char *id, struct husk_err *err) {
  int64_t now = state_now_ms();
  cleanup_unlock struct state *locked = db_lock(s->st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(s->st, &txn, err) < 0)
    return -1;
  int n = 0;
  if (id) {
    cleanup_stmt sqlite3_stmt *q = NULL;
    if (db_prepare(s->st, &q,
                   "UPDATE links SET denied = denied + 1, denied_last_ms = ? WHERE id = ?",
                   err) < 0)
      return -1;
    int rc = db_int(q, 1, now) || db_text(q, 2, id);
    if (rc != SQLITE_OK)
      return db_fail(s->st, err, rc, "link");
    n = db_step_done(s->st, q, "cannot count the refused fetch", err);
    if (n < 0)
      return -1;
  }
  if (n == 0) {
    cleanup_stmt sqlite3_stmt *g = NULL;
    if (db_prepare(s->st, &g,
                   "INSERT INTO link_denied (id, count, last_ms) VALUES (1, 1, ?1) "
                   "ON CONFLICT (id) DO UPDATE SET count = count + 1, last_ms = ?1",
                   err) < 0)
      return -1;
    int rc = db_int(g, 1, now);
    if (rc != SQLITE_OK)
      return db_fail(s->st, err, rc, "link");
    if (db_step_done(s->st, g, "cannot count the refused fetch", err) < 0)
      return -1;
  }
  return db_commit(&txn, err);
}

int store_link_denied_total(struct store *s, int64_t *count, struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(s->st);
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(s->st, &q, "SELECT count FROM link_denied WHERE id = 1", err) < 0)
    return -1;
  int r = db_step_row(s->st, q, "link", err);
  if (r < 0)
    return -1;
  *count = r ? sqlite3_column_int64(q, 0) : 0;
  return 0;
}

int store_link_log(struct store *s, const char *tenant_id, const char *id, int64_t after_seq,
                   int limit, int (*cb)(void *ctx, const struct store_link_access *a), void *ctx,
                   struct husk_err *err) {
  if (limit == 0)
    limit = 100;
  if (limit < 1 || limit > 1000)
    return husk_fail(err, EINVAL, "limit must be 1..1000");
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct store_link_access)};
  {
    cleanup_unlock struct state *locked = db_lock(s->st);
    cleanup_stmt sqlite3_stmt *q = NULL;
    if (db_prepare(s->st, &q, "SELECT 1 FROM links WHERE id = ? AND tenant_id = ?", err) < 0)
      return -1;
    int rc = db_text(q, 1, id) || db_text(q, 2, tenant_id);
    if (rc != SQLITE_OK)
      return db_fail(s->st, err, rc, "link");
    int r = db_step_row(s->st, q, "link", err);
    if (r < 0)
      return -1;
    if (r == 0)
      return husk_fail(err, STORE_ENOLINK, "no such link");
    cleanup_stmt sqlite3_stmt *l = NULL;
    if (db_prepare(s->st, &l,
                   "SELECT seq, ts_ms, remote, user_agent, status FROM link_access WHERE "
                   "link_id = ? AND seq > ? ORDER BY seq LIMIT ?",
                   err) < 0)
      return -1;
    rc = db_text(l, 1, id) || db_int(l, 2, after_seq) || db_int(l, 3, limit);
    if (rc != SQLITE_OK)
      return db_fail(s->st, err, rc, "link");
    while ((r = db_step_row(s->st, l, "link", err)) == 1) {
      struct store_link_access *a = db_rows_push(&rows);
      if (!a)
        return husk_error(err, ENOMEM, "link");
      a->seq = sqlite3_column_int64(l, 0);
      a->ts_ms = sqlite3_column_int64(l, 1);
      db_col_text(l, 2, a->remote, sizeof a->remote);
      db_col_text(l, 3, a->user_agent, sizeof a->user_agent);
      a->status = sqlite3_column_int(l, 4);
    }
    if (r < 0)
      return -1;
  }
  for (size_t i = 0; i < rows.n; i++) {
    int v = cb(ctx, db_rows_at(&rows, i));
    if (v)
      return db_cb_verdict(v);
  }
  return 0;
}
