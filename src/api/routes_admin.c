/* Admin routes (tenants, keys, quotas, the warm pools) and the audit log. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "box/box.h"
#include "storage/store.h"

static json_t *quota_json(int64_t v) { return v < 0 ? json_null() : json_integer((json_int_t)v); }

static json_t *tenant_json(const struct state_tenant *t) {
  return json_pack("{s:s, s:s, s:o, s:o, s:o, s:o, s:o, s:o}", "id", t->id, "name", t->name,
                   "max_boxes", quota_json(t->max_boxes), "max_memory", quota_json(t->max_memory),
                   "max_requests", quota_json(t->max_requests), "max_execs",
                   quota_json(t->max_execs), "created_at", json_time(t->created_ms), "deleted_at",
                   json_time(t->deleted_ms));
}

static json_t *key_json(const struct state_key *k) {
  return json_pack("{s:s, s:s, s:o, s:o}", "id", k->id, "tenant_id", k->tenant_id, "created_at",
                   json_time(k->created_ms), "revoked_at", json_time(k->revoked_ms));
}

/* A quota field: absent (0, *out untouched), null or -1 (unlimited), a
 * non-negative integer, or for sizes a size string. */
static int get_quota(json_t *o, const char *k, bool size, int64_t *out, struct husk_err *err) {
  json_t *v = json_object_get(o, k);
  if (!v)
    return 0;
  if (json_is_null(v) || (json_is_integer(v) && json_integer_value(v) == -1)) {
    *out = STATE_UNLIMITED;
    return 1;
  }
  uint64_t x = 0;
  int rc = size ? jget_size(o, k, &x, err) : jget_u64(o, k, INT64_MAX, &x, err);
  if (rc < 0)
    return -1;
  if (x > INT64_MAX)
    return husk_fail(err, EINVAL, "`%s` is too large", k);
  *out = (int64_t)x;
  return 1;
}

/* A concurrency bound: absent (0), null or -1 (the daemon's default), or
 * an integer >= 1. */
static int get_concurrency(json_t *o, const char *k, int64_t *out, struct husk_err *err) {
  json_t *v = json_object_get(o, k);
  if (!v)
    return 0;
  if (json_is_null(v) || (json_is_integer(v) && json_integer_value(v) == -1)) {
    *out = STATE_DEFAULT;
    return 1;
  }
  uint64_t x = 0;
  if (jget_u64(o, k, 1000000, &x, err) < 0)
    return -1;
  if (x < 1)
    return husk_fail(err, EINVAL, "`%s` must be >= 1, or null for the daemon's default", k);
  *out = (int64_t)x;
  return 1;
}

/* The bounds fields of a tenant; absent ones keep what `t` holds. */
static int get_bounds(json_t *o, struct state_tenant *t, struct husk_err *err) {
  if (get_quota(o, "max_boxes", false, &t->max_boxes, err) < 0 ||
      get_quota(o, "max_memory", true, &t->max_memory, err) < 0 ||
      get_concurrency(o, "max_requests", &t->max_requests, err) < 0 ||
      get_concurrency(o, "max_execs", &t->max_execs, err) < 0)
    return -1;
  return 0;
}

static const char *const tenant_fields[] = {"name",         "max_boxes", "max_memory",
                                            "max_requests", "max_execs", NULL};

enum MHD_Result h_tenant_create(struct req *r) {
  json_t *o = api_body_object(r, tenant_fields);
  if (!o)
    return api_reply_bad(r);
  const char *name = NULL;
  struct state_tenant in = {.max_boxes = STATE_UNLIMITED,
                            .max_memory = STATE_UNLIMITED,
                            .max_requests = STATE_DEFAULT,
                            .max_execs = STATE_DEFAULT};
  if (jget_string(o, "name", &name, &r->err) < 0 || get_bounds(o, &in, &r->err) < 0) {
    json_decref(o);
    return api_reply_bad(r);
  }
  if (!name) {
    json_decref(o);
    return api_reply_error(r, 400, "bad_request", "`name` is required");
  }
  if (strlen(name) >= sizeof in.name) {
    json_decref(o);
    return api_reply_error(r, 400, "bad_request", "`name` is too long (at most %zu bytes)",
                           sizeof in.name - 1);
  }
  snprintf(in.name, sizeof in.name, "%s", name);
  snprintf(r->audit_detail, sizeof r->audit_detail, "name=%.100s", name);
  json_decref(o);
  struct state_tenant t;
  struct husk_err err;
  int rc = state_tenant_create_with(r->srv->cfg.state, &in, &t, &err);
  if (rc < 0)
    return api_reply_err(r, &err);
  snprintf(r->audit_detail, sizeof r->audit_detail, "tenant=%s", t.id);
  return api_reply_json(r, 201, tenant_json(&t));
}

static int tenant_cb(void *ctx, const struct state_tenant *t) {
  json_t *j = tenant_json(t);
  if (!j || json_array_append_new(ctx, j) < 0)
    return API_LIST_NOMEM;
  return 0;
}

enum MHD_Result h_tenant_list(struct req *r) {
  json_t *arr = json_array();
  struct husk_err err;
  if (!arr)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  int rc = state_tenant_list(r->srv->cfg.state, tenant_cb, arr, &err);
  if (rc < 0) {
    json_decref(arr);
    return api_reply_list_err(r, rc, &err);
  }
  return api_reply_json(r, 200, json_pack("{s:o}", "tenants", arr));
}

/* GET /v1/pool: each warm pool's shape, size, ready boxes and how often it
 * served or missed a create, for sizing --pool. */
enum MHD_Result h_pool(struct req *r) {
  struct box_pool_stat st[BOX_POOL_MAX_SHAPES];
  uint64_t unmatched = 0;
  size_t n = box_pool_stats(r->srv->cfg.mgr, st, BOX_POOL_MAX_SHAPES, &unmatched);
  json_t *arr = json_array();
  for (size_t i = 0; arr && i < n; i++) {
    json_t *p = json_pack("{s:s, s:o, s:I, s:I, s:I, s:I}", "template", st[i].template_name,
                          "limits", api_limits_json(&st[i].shape),
                          "size", (json_int_t)st[i].size, "ready", (json_int_t)st[i].ready,
                          "claims", (json_int_t)st[i].claims, "empty", (json_int_t)st[i].empty);
    if (!p || json_array_append_new(arr, p) < 0) {
      json_decref(arr);
      arr = NULL;
    }
  }
  if (!arr)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  return api_reply_json(r, 200, json_pack("{s:o, s:I}", "pools", arr, "unmatched", (json_int_t)unmatched));
}

static int key_cb(void *ctx, const struct state_key *k) {
  json_t *j = key_json(k);
  if (!j || json_array_append_new(ctx, j) < 0)
    return API_LIST_NOMEM;
  return 0;
}

static json_t *keys_of(struct req *r, const char *tenant, int *rc, struct husk_err *err) {
  json_t *arr = json_array();
  if (!arr) {
    *rc = API_LIST_NOMEM;
    return NULL;
  }
  *rc = state_key_list(r->srv->cfg.state, tenant, key_cb, arr, err);
  if (*rc < 0) {
    json_decref(arr);
    return NULL;
  }
  return arr;
}

enum MHD_Result h_tenant_get(struct req *r) {
  struct state_tenant t;
  struct husk_err err;
  if (state_tenant_get(r->srv->cfg.state, r->params[0], &t, &err) < 0)
    return api_reply_err(r, &err);
  int rc;
  json_t *keys = keys_of(r, t.id, &rc, &err);
  if (!keys)
    return api_reply_list_err(r, rc, &err);
  json_t *j = tenant_json(&t);
  if (j)
    json_object_set_new(j, "keys", keys);
  else
    json_decref(keys);
  return api_reply_json(r, 200, j);
}

enum MHD_Result h_key_list(struct req *r) {
  struct state_tenant t;
  struct husk_err err;
  if (state_tenant_get(r->srv->cfg.state, r->params[0], &t, &err) < 0)
    return api_reply_err(r, &err);
  int rc;
  json_t *keys = keys_of(r, t.id, &rc, &err);
  if (!keys)
    return api_reply_list_err(r, rc, &err);
  return api_reply_json(r, 200, json_pack("{s:o}", "keys", keys));
}

static const char *const quota_fields[] = {"max_boxes", "max_memory", "max_requests", "max_execs",
                                           NULL};

enum MHD_Result h_tenant_quota(struct req *r) {
  json_t *o = api_body_object(r, quota_fields);
  if (!o)
    return api_reply_bad(r);
  snprintf(r->audit_detail, sizeof r->audit_detail, "tenant=%s", r->params[0]);
  struct state_tenant t;
  struct husk_err err;
  if (state_tenant_get(r->srv->cfg.state, r->params[0], &t, &err) < 0) {
    json_decref(o);
    return api_reply_err(r, &err);
  }
  /* Absent fields keep their value. */
  if (get_bounds(o, &t, &r->err) < 0) {
    json_decref(o);
    return api_reply_bad(r);
  }
  json_decref(o);
  if (state_tenant_set_bounds(r->srv->cfg.state, &t, &err) < 0)
    return api_reply_err(r, &err);
  if (state_tenant_get(r->srv->cfg.state, t.id, &t, &err) < 0)
    return api_reply_err(r, &err);
  return api_reply_json(r, 200, tenant_json(&t));
}

static const char *const key_fields[] = {NULL};

enum MHD_Result h_key_create(struct req *r) {
  json_t *o = api_body_object(r, key_fields);
  if (!o)
    return api_reply_bad(r);
  json_decref(o);
  snprintf(r->audit_detail, sizeof r->audit_detail, "tenant=%s", r->params[0]);
  char plain[STATE_KEY_SIZE];
  struct state_key k;
  struct husk_err err;
  if (state_key_create(r->srv->cfg.state, r->params[0], plain, sizeof plain, &k, &err) < 0)
    return api_reply_err(r, &err);
  snprintf(r->audit_detail, sizeof r->audit_detail, "tenant=%s key=%s", r->params[0], k.id);
  json_t *j = key_json(&k);
  if (j)
    json_object_set_new(j, "key", json_string(plain));
  memset(plain, 0, sizeof plain);
  return api_reply_json(r, 201, j);
}

enum MHD_Result h_key_revoke(struct req *r) {
  snprintf(r->audit_detail, sizeof r->audit_detail, "tenant=%s key=%s", r->params[0], r->params[1]);
  struct husk_err err;
  /* The key must belong to the tenant of the path. */
  if (state_key_revoke(r->srv->cfg.state, r->params[0], r->params[1], &err) < 0)
    return api_reply_err(r, &err);
  return api_reply_empty(r, 204);
}

static int purge_storage(void *ctx, const char *tenant, struct husk_err *err) {
  return store_tenant_purge(ctx, tenant, err);
}

struct box_tenant_purge api_tenant_purge(const struct api_config *cfg) {
  return (struct box_tenant_purge){.storage = cfg->store ? purge_storage : NULL,
                                   .ctx = cfg->store};
}

/* DELETE /v1/tenants/{id}: the tenant and everything it owns.  Once the
 * mark is committed the tenant's keys no longer work; a failure after it
 * (500, 409 while a box is still being created) leaves the tenant marked,
 * and a repeated DELETE, or the next start, finishes the work. */
enum MHD_Result h_tenant_delete(struct req *r) {
  snprintf(r->audit_detail, sizeof r->audit_detail, "tenant=%s", r->params[0]);
  struct husk_err err;
  struct box_tenant_purge purge = api_tenant_purge(&r->srv->cfg);
  if (box_tenant_delete(r->srv->cfg.mgr, r->params[0], &purge, &err) < 0) {
    if (err.code == EBUSY)
      return api_reply_error(r, 409, "conflict",
                             "%s; the tenant is marked deleted: DELETE it again to finish",
                             err.msg);
    return api_reply_err(r, &err);
  }
  return api_reply_empty(r, 204);
}

/* ---- a tenant's S3 keys (admin) ---------------------------------------- */

static int s3_key_cb(void *ctx, const struct store_key_info *k) {
  json_t *j =
      json_pack("{s:s, s:s, s:o, s:o}", "access_key_id", k->id, "api_key_id", k->api_key_id,
                "created_at", json_time(k->created_ms), "revoked_at", json_time(k->revoked_ms));
  if (!j || json_array_append_new(ctx, j) < 0)
    return API_LIST_NOMEM;
  return 0;
}

enum MHD_Result h_admin_s3_key_list(struct req *r) {
  struct store *st = r->srv->cfg.store;
  if (!st)
    return api_reply_error(r, 503, "unavailable", "the storage plane is not running");
  struct state_tenant t;
  struct husk_err err;
  if (state_tenant_get(r->srv->cfg.state, r->params[0], &t, &err) < 0)
    return api_reply_err(r, &err);
  json_t *arr = json_array();
  if (!arr)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  int rc = store_key_list(st, t.id, s3_key_cb, arr, &err);
  if (rc < 0) {
    json_decref(arr);
    return api_reply_list_err(r, rc, &err);
  }
  return api_reply_json(r, 200, json_pack("{s:o}", "keys", arr));
}

enum MHD_Result h_admin_s3_key_revoke(struct req *r) {
  struct store *st = r->srv->cfg.store;
  snprintf(r->audit_detail, sizeof r->audit_detail, "tenant=%s access_key_id=%s", r->params[0],
           r->params[1]);
  if (!st)
    return api_reply_error(r, 503, "unavailable", "the storage plane is not running");
  struct husk_err err;
  if (store_key_revoke(st, r->params[0], r->params[1], &err) < 0) {
    if (err.code == STORE_ENOACCESSKEY)
      return api_reply_error(r, 404, "not_found", "no such S3 key");
    return api_reply_err(r, &err);
  }
  return api_reply_empty(r, 204);
}

/* ---- audit ---------------------------------------------------------- */

static int audit_cb(void *ctx, const struct state_audit *a) {
  json_t *j = json_pack("{s:I, s:o, s:s, s:s, s:s, s:s, s:s, s:s, s:i}", "id", (json_int_t)a->id,
                        "time", json_time(a->ts_ms), "tenant_id", a->tenant_id, "key_id", a->key_id,
                        "action", a->action, "box_id", a->box_id, "detail", a->detail, "outcome",
                        a->outcome, "status", a->status);
  /* The person and the client of a request made with an access token. */
  if (j && a->user_id[0]) {
    json_object_set_new(j, "user_id", json_string(a->user_id));
    json_object_set_new(j, "user", json_string(a->user_name));
  }
  if (j && a->idp_subject[0])
    json_object_set_new(j, "idp_subject", json_string(a->idp_subject));
  if (j && a->client_id[0]) {
    json_object_set_new(j, "client_id", json_string(a->client_id));
    json_object_set_new(j, "client", json_string(a->client_name));
  }
  if (!j || json_array_append_new(ctx, j) < 0)
    return API_LIST_NOMEM;
  return 0;
}

enum MHD_Result h_audit_list(struct req *r) {
  struct state_audit_filter f = {0};
  uint64_t since = 0, until = 0, after = 0, before = 0, limit = 0;
  bool newest = false;
  if (api_query_u64(r, "since", INT64_MAX, &since, NULL) < 0 ||
      api_query_u64(r, "until", INT64_MAX, &until, NULL) < 0 ||
      api_query_u64(r, "after", INT64_MAX, &after, NULL) < 0 ||
      api_query_u64(r, "before", INT64_MAX, &before, NULL) < 0 ||
      api_query_u64(r, "limit", 1000000, &limit, NULL) < 0 ||
      api_query_bool(r, "newest_first", &newest) < 0)
    return api_reply_bad(r);
  f.box_id = api_query(r, "box");
  f.action = api_query(r, "action");
  f.user_id = api_query(r, "user");
  f.since_ms = (int64_t)since;
  f.until_ms = (int64_t)until;
  f.after_id = (int64_t)after;
  f.before_id = (int64_t)before;
  f.limit = (int)limit;
  f.newest_first = newest;
  /* A tenant sees its own records only; the admin everyone's, or one
   * tenant's with ?tenant=. */
  f.tenant_id = r->admin ? api_query(r, "tenant") : r->tenant;
  json_t *arr = json_array();
  struct husk_err err;
  if (!arr)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  int rc = state_audit_list(r->srv->cfg.state, &f, audit_cb, arr, &err);
  if (rc < 0) {
    json_decref(arr);
    return api_reply_list_err(r, rc, &err);
  }
  /* A full page: the next one starts after its last record. */
  size_t n = json_array_size(arr);
  size_t page = limit ? limit : STATE_LIST_DEFAULT;
  json_t *next = json_null();
  if (n > 0 && n >= page)
    next = json_integer(json_integer_value(json_object_get(json_array_get(arr, n - 1), "id")));
  return api_reply_json(r, 200, json_pack("{s:o, s:o}", "records", arr,
                                          newest ? "next_before" : "next_after", next));
}
