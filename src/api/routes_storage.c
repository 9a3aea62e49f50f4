/* Storage routes: S3 credentials, objects' listing and heads, links and
 * their access log, and the box <-> store transfers (docs/storage.md). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "api/internal.h"
#include "box/box.h"
#include "box/box_store.h"
#include "storage/store.h"
#include "util/cleanup_json.h"

/* A store error as the API's JSON error. */
static enum MHD_Result store_err(struct req *r, const struct husk_err *err) {
  switch (err->code) {
  case STORE_ENOBUCKET: return api_reply_error(r, 404, "no_such_bucket", "%s", err->msg);
  case STORE_ENOKEY: return api_reply_error(r, 404, "no_such_key", "%s", err->msg);
  case STORE_ENOLINK: return api_reply_error(r, 404, "not_found", "no such link");
  case STORE_ENOACCESSKEY: return api_reply_error(r, 404, "not_found", "no such S3 key");
  case EOPNOTSUPP: return api_reply_error(r, 503, "unavailable", "%s", err->msg);
  case STORE_EQUOTA: return api_reply_error(r, 403, "quota_exceeded", "%s", err->msg);
  case STORE_ESPARSE: return api_reply_error(r, 413, "payload_too_large", "%s", err->msg);
  case ENOSPC: return api_reply_error(r, 507, "insufficient_storage", "%s", err->msg);
  case STORE_EOWNED: return api_reply_error(r, 409, "conflict", "%s", err->msg);
  case STORE_EBADNAME:
  case STORE_EBADKEY:
  case STORE_ETOOLARGE: return api_reply_error(r, 400, "bad_request", "%s", err->msg);
  default:
    if (err->code >= STORE_ENOBUCKET)
      return api_reply_error(r, 400, "bad_request", "%s", err->msg);
    return api_reply_err(r, err);
  }
}

static enum MHD_Result no_store(struct req *r) {
  return api_reply_error(r, 503, "unavailable", "the storage plane is not running");
}

enum MHD_Result h_s3_key_create(struct req *r) {
  struct store *st = r->srv->cfg.store;
  if (!st)
    return no_store(r);
  char id[STORE_ACCESS_KEY_SIZE], secret[STORE_SECRET_SIZE];
  struct husk_err err;
  if (store_key_mint(st, r->tenant, r->key_id, id, secret, &err) < 0)
    return store_err(r, &err);
  snprintf(r->audit_detail, sizeof r->audit_detail, "access_key_id=%s", id);
  json_t *o = json_pack("{s:s, s:s, s:s, s:s?}", "access_key_id", id, "secret_access_key", secret,
                        "region", store_region(st), "endpoint",
                        store_public_url(st)[0] ? store_public_url(st) : NULL);
  OPENSSL_cleanse(secret, sizeof secret);
  return api_reply_json(r, 201, o);
}

static int key_cb(void *ctx, const struct store_key_info *k) {
  json_array_append_new(ctx, json_pack("{s:s, s:s, s:o, s:o}", "access_key_id", k->id, "api_key_id",
                                       k->api_key_id, "created_at", json_time(k->created_ms),
                                       "revoked_at", json_time(k->revoked_ms)));
  return 0;
}

enum MHD_Result h_s3_key_list(struct req *r) {
  struct store *st = r->srv->cfg.store;
  if (!st)
    return no_store(r);
  cleanup_json json_t *arr = json_array();
  struct husk_err err;
  if (!arr)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  if (store_key_list(st, r->tenant, key_cb, arr, &err) < 0)
    return store_err(r, &err);
  return api_reply_json(r, 200, json_pack("{s:o}", "keys", steal_pointer(&arr)));
}

enum MHD_Result h_s3_key_revoke(struct req *r) {
  struct store *st = r->srv->cfg.store;
  if (!st)
    return no_store(r);
  struct husk_err err;
  snprintf(r->audit_detail, sizeof r->audit_detail, "access_key_id=%s", r->params[0]);
  if (store_key_revoke(st, r->tenant, r->params[0], &err) < 0)
    return store_err(r, &err);
  return api_reply_empty(r, 204);
}

static json_t *link_json(const struct store_link *l) {
  json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s?, s:o, s:o}", "id", l->id, "url", l->url,
                        "bucket", l->bucket, "key", l->key, "filename",
                        l->filename[0] ? l->filename : NULL, "created_at",
                        json_time(l->created_ms), "expires_at", json_time(l->expires_ms));
  if (o && l->revoked_ms)
    json_object_set_new(o, "revoked_at", json_time(l->revoked_ms));
  /* Refused fetches are counted, not logged (storage.md). */
  if (o)
    json_object_set_new(o, "denied_fetches", json_integer(l->denied));
  if (o && l->denied_last_ms)
    json_object_set_new(o, "last_denied_at", json_time(l->denied_last_ms));
  if (o)
    json_object_set_new(o, "created_by", api_created_by_json(l->created_by));
  return o;
}

static int link_cb(void *ctx, const struct store_link *l) {
  json_t *j = link_json(l);
  if (j)
    json_array_append_new(ctx, j);
  return 0;
}

enum MHD_Result h_link_list(struct req *r) {
  struct store *st = r->srv->cfg.store;
  if (!st)
    return no_store(r);
  cleanup_json json_t *arr = json_array();
  struct husk_err err;
  if (!arr)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  if (store_link_list(st, r->tenant, link_cb, arr, &err) < 0)
    return store_err(r, &err);
  return api_reply_json(r, 200, json_pack("{s:o}", "links", steal_pointer(&arr)));
}

enum MHD_Result h_link_revoke(struct req *r) {
  struct store *st = r->srv->cfg.store;
  if (!st)
    return no_store(r);
  struct husk_err err;
  snprintf(r->audit_detail, sizeof r->audit_detail, "link=%s", r->params[0]);
  if (store_link_revoke(st, r->tenant, r->params[0], &err) < 0)
    return store_err(r, &err);
  return api_reply_empty(r, 204);
}

static const char *const link_fields[] = {"bucket", "key", "expires_in", "filename", NULL};

enum MHD_Result h_link_create(struct req *r) {
  struct store *st = r->srv->cfg.store;
  if (!st)
    return no_store(r);
  cleanup_json json_t *o = api_body_object(r, link_fields);
  if (!o)
    return api_reply_bad(r);
  const char *bucket = NULL, *key = NULL, *filename = NULL;
  uint64_t exp = 0;
  if (jget_string(o, "bucket", &bucket, &r->err) < 0 || jget_string(o, "key", &key, &r->err) < 0 ||
      jget_string(o, "filename", &filename, &r->err) < 0 ||
      jget_u64(o, "expires_in", STORE_LINK_MAX_S, &exp, &r->err) < 0)
    return api_reply_bad(r);
  if (!bucket || !key)
    return api_reply_error(r, 400, "bad_request", "`bucket` and `key` are required");
  if (json_object_get(o, "expires_in") && exp == 0)
    return api_reply_error(r, 400, "bad_request", "`expires_in` must be 1..%d seconds", STORE_LINK_MAX_S);
  struct store_link l;
  struct husk_err err;
  char creator[STATE_CREATED_BY_SIZE];
  api_created_by(r, creator, sizeof creator);
  if (store_link_create(st, r->tenant, bucket, key, (int64_t)exp, filename, false, creator, &l,
                        &err) < 0)
    return store_err(r, &err);
  snprintf(r->audit_detail, sizeof r->audit_detail, "link=%s", l.id);
  json_t *j = link_json(&l);
  store_link_free(&l);
  return api_reply_json(r, 201, j);
}

enum MHD_Result h_link_get(struct req *r) {
  struct store *st = r->srv->cfg.store;
  if (!st)
    return no_store(r);
  struct store_link l;
  struct husk_err err;
  if (store_link_get(st, r->tenant, r->params[0], &l, &err) < 0)
    return store_err(r, &err);
  json_t *j = link_json(&l);
  store_link_free(&l);
  return api_reply_json(r, 200, j);
}

struct access_ctx {
  json_t *arr;
  int64_t last;
};

static int access_cb(void *ctx, const struct store_link_access *a) {
  struct access_ctx *c = ctx;
  json_array_append_new(c->arr, json_pack("{s:I, s:o, s:s, s:s, s:i}", "seq", (json_int_t)a->seq,
                                          "time", json_time(a->ts_ms), "remote_addr", a->remote,
                                          "user_agent", a->user_agent, "status", a->status));
  c->last = a->seq;
  return 0;
}

enum MHD_Result h_link_access(struct req *r) {
  struct store *st = r->srv->cfg.store;
  if (!st)
    return no_store(r);
  uint64_t after = 0, limit = 100;
  if (api_query_u64(r, "after", INT64_MAX, &after, NULL) < 0 ||
      api_query_u64(r, "limit", 1000, &limit, NULL) < 0)
    return api_reply_bad(r);
  if (limit == 0)
    return api_reply_error(r, 400, "bad_request", "limit must be 1..1000");
  cleanup_json json_t *arr = json_array();
  struct access_ctx c = {arr, 0};
  struct husk_err err;
  if (!arr)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  if (store_link_log(st, r->tenant, r->params[0], (int64_t)after, (int)limit, access_cb, &c,
                     &err) < 0)
    return store_err(r, &err);
  /* A full page may have more after it. */
  json_t *next = json_array_size(arr) == limit ? json_integer((json_int_t)c.last) : json_null();
  return api_reply_json(r, 200, json_pack("{s:s, s:o, s:o}", "link_id", r->params[0], "accesses",
                                          steal_pointer(&arr), "next_after", next));
}

/* ---- objects: listing and heads ---- */

/* The query's `bucket`, which is required (husk's own buckets, whose
 * names start with "_", are not found by the routes below). */
static const char *query_bucket(struct req *r) {
  const char *b = api_query(r, "bucket");
  if (!b || !b[0]) {
    husk_fail(&r->err, EINVAL, "`bucket` is required");
    return NULL;
  }
  return b;
}

static int object_cb(void *ctx, const struct store_entry *e) {
  json_array_append_new(ctx, json_pack("{s:s, s:I, s:s, s:o, s:o}", "key", e->key, "size",
                                       (json_int_t)e->size, "etag", e->etag ? e->etag : "",
                                       "last_modified", json_time(e->mtime_ms), "created_by",
                                       api_created_by_json(e->created_by)));
  return 0;
}

/* GET /v1/objects?bucket=B[&prefix=P][&after=K][&limit=N][&created_by=C]:
 * one page of a bucket's objects in key order (the embedded store's). */
enum MHD_Result h_object_list(struct req *r) {
  struct store *st = r->srv->cfg.store;
  if (!st)
    return no_store(r);
  const char *bucket = query_bucket(r);
  if (!bucket)
    return api_reply_bad(r);
  const char *prefix = api_query(r, "prefix"), *after = api_query(r, "after");
  /* One creator's objects: the same values as GET /v1/sandboxes takes. */
  const char *creator = api_query(r, "created_by");
  if (creator && state_check_created_by(creator, false, &r->err) < 0)
    return api_reply_error(r, 400, "bad_request",
                           "`created_by` must be a user id (u_...), key: and an API key id, or "
                           "s3key: and an S3 access key id");
  uint64_t limit = 100;
  if (api_query_u64(r, "limit", 1000, &limit, NULL) < 0)
    return api_reply_bad(r);
  if (limit == 0)
    return api_reply_error(r, 400, "bad_request", "limit must be 1..1000");
  if ((prefix && strlen(prefix) > STORE_KEY_MAX) || (after && strlen(after) > STORE_KEY_MAX))
    return api_reply_error(r, 400, "bad_request", "`prefix` and `after` are at most %d bytes",
                           STORE_KEY_MAX);
  if (store_remote(st))
    return api_reply_error(r, 501, "not_implemented",
                           "this server keeps objects in an external store: list them there");
  cleanup_json json_t *arr = json_array();
  if (!arr)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  struct store_list_req rq = {.prefix = prefix ? prefix : "",
                              .after = after,
                              .max_keys = (unsigned)limit,
                              .created_by = creator};
  bool truncated = false;
  cleanup_free char *next = NULL;
  struct husk_err err;
  if (store_list(st, r->tenant, bucket, &rq, object_cb, arr, &truncated, &next, &err) < 0)
    return err.code == STORE_EBADNAME
               ? api_reply_error(r, 404, "no_such_bucket", "The specified bucket does not exist")
               : store_err(r, &err);
  json_t *na = truncated && next ? json_string(next) : json_null();
  return api_reply_json(r, 200,
                        json_pack("{s:s, s:s, s:o, s:o}", "bucket", bucket, "prefix",
                                  prefix ? prefix : "", "objects", steal_pointer(&arr),
                                  "next_after", na));
}

/* GET /v1/objects/head?bucket=B&key=K: what S3's HeadObject says of it, and
 * who wrote it. */
enum MHD_Result h_object_head(struct req *r) {
  struct store *st = r->srv->cfg.store;
  if (!st)
    return no_store(r);
  const char *bucket = query_bucket(r), *key = api_query(r, "key");
  if (!bucket)
    return api_reply_bad(r);
  if (!key)
    return api_reply_error(r, 400, "bad_request", "`key` is required");
  if (store_remote(st))
    return api_reply_error(r, 501, "not_implemented",
                           "this server keeps objects in an external store: ask it there");
  if (store_bucket_reserved(bucket))
    return api_reply_error(r, 404, "no_such_bucket", "The specified bucket does not exist");
  struct store_object o;
  struct husk_err err;
  if (store_object_get(st, r->tenant, bucket, key, &o, NULL, &err) < 0)
    return store_err(r, &err);
  json_error_t je;
  json_t *meta = json_loads(o.meta_json, 0, &je);
  json_t *j = json_pack("{s:s, s:s, s:I, s:s, s:s?, s:o, s:o, s:o}", "bucket", bucket, "key", o.key,
                        "size", (json_int_t)o.size, "etag", o.etag, "content_type",
                        o.content_type[0] ? o.content_type : NULL, "metadata",
                        meta ? meta : json_object(), "last_modified", json_time(o.mtime_ms),
                        "created_by", api_created_by_json(o.created_by));
  store_object_free(&o);
  return api_reply_json(r, 200, j);
}

/* ---- box <-> store ---- */

static const char *const export_fields[] = {"path", "bucket", "key", "link", "expires_in",
                                            "filename", NULL};

/* POST /v1/sandboxes/{id}/store: a box file (or a directory, as a tar)
 * into the store, optionally with a link. */
enum MHD_Result h_box_export(struct req *r) {
  struct store *st = r->srv->cfg.store;
  if (!st)
    return no_store(r);
  cleanup_json json_t *o = api_body_object(r, export_fields);
  if (!o)
    return api_reply_bad(r);
  const char *path = NULL, *bucket = NULL, *key = NULL, *filename = NULL;
  bool link = false;
  uint64_t exp = 0;
  if (jget_string(o, "path", &path, &r->err) < 0 || jget_string(o, "bucket", &bucket, &r->err) < 0 ||
      jget_string(o, "key", &key, &r->err) < 0 || jget_bool(o, "link", &link, &r->err) < 0 ||
      jget_string(o, "filename", &filename, &r->err) < 0 ||
      jget_u64(o, "expires_in", STORE_LINK_MAX_S, &exp, &r->err) < 0)
    return api_reply_bad(r);
  if (!path || !bucket || !key)
    return api_reply_error(r, 400, "bad_request", "`path`, `bucket` and `key` are required");
  struct box_store_result res;
  struct husk_err err;
  /* The caller wrote it (and made its link), not the box. */
  char creator[STATE_CREATED_BY_SIZE];
  api_created_by(r, creator, sizeof creator);
  int rc = box_store_put(r->srv->cfg.mgr, st, r->tenant, r->params[0], path, bucket, key, link,
                         (int64_t)exp, filename, false, creator, &res, &err);
  if (rc < 0)
    return store_err(r, &err);
  snprintf(r->audit_detail, sizeof r->audit_detail, "bucket=%s", bucket);
  json_error_t je;
  json_t *j = json_pack_ex(&je, 0, "{s:s, s:s, s:I, s:s, s:b}", "bucket", bucket, "key", key,
                           "size", (json_int_t)res.size, "etag", res.etag, "tar", (int)res.tar);
  if (!j)
    api_log(r->srv, "store reply: %s", je.text);
  if (j && res.url) {
    json_object_set_new(j, "url", json_string(res.url));
    json_object_set_new(j, "link_id", json_string(res.link_id));
    json_object_set_new(j, "expires_at", json_time(res.expires_ms));
  }
  box_store_result_free(&res);
  return api_reply_json(r, 201, j);
}

static const char *const import_fields[] = {"path", "bucket", "key", "extract", NULL};

/* POST /v1/sandboxes/{id}/load: an object into the box (a file, or with
 * "extract": true a tar unpacked into a directory). */
enum MHD_Result h_box_import(struct req *r) {
  struct store *st = r->srv->cfg.store;
  if (!st)
    return no_store(r);
  cleanup_json json_t *o = api_body_object(r, import_fields);
  if (!o)
    return api_reply_bad(r);
  const char *path = NULL, *bucket = NULL, *key = NULL;
  bool extract = false;
  if (jget_string(o, "path", &path, &r->err) < 0 || jget_string(o, "bucket", &bucket, &r->err) < 0 ||
      jget_string(o, "key", &key, &r->err) < 0 || jget_bool(o, "extract", &extract, &r->err) < 0)
    return api_reply_bad(r);
  if (!path || !bucket || !key)
    return api_reply_error(r, 400, "bad_request", "`path`, `bucket` and `key` are required");
  uint64_t size = 0;
  struct husk_err err;
  int rc = box_store_get(r->srv->cfg.mgr, st, r->tenant, bucket, key, r->params[0], path, extract,
                         &size, &err);
  if (rc < 0)
    return store_err(r, &err);
  snprintf(r->audit_detail, sizeof r->audit_detail, "bucket=%s", bucket);
  json_t *j = json_pack("{s:s, s:I, s:b}", "path", path, "size", (json_int_t)size, "extracted",
                        (int)extract);
  return api_reply_json(r, 200, j);
}
