/* /v1/secrets (the tenant's vault), /v1/tenants/{id}/secrets (the same,
 * for the operator) and /v1/sandboxes/{id}/network.
 *
 * A secret's value arrives in one request body and is never in any reply,
 * log line or audit record; the body buffers are wiped once the core has
 * sealed it. */
#define _GNU_SOURCE
#include "api/routes_egress.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "box/box.h"

json_t *api_box_json(const struct husk_box_info *bi);

static void wipe_body(struct req *r) {
  if (r->body)
    explicit_bzero(r->body, r->body_cap);
}

static const char *const secret_fields[] = {"value", NULL};

static enum MHD_Result secret_put(struct req *r, const char *tenant, const char *name) {
  snprintf(r->audit_detail, sizeof r->audit_detail, "name=%.64s", name);
  json_t *o = api_body_object(r, secret_fields);
  if (!o) {
    wipe_body(r);
    return api_reply_bad(r);
  }
  json_t *v = json_object_get(o, "value");
  enum MHD_Result res;
  if (!json_is_string(v)) {
    res = api_reply_error(r, 400, "bad_request", "`value` (a string) is required");
  } else {
    struct husk_err err;
    /* jansson's copy is wiped before it is freed. */
    char *val = (char *)json_string_value(v);
    size_t len = json_string_length(v);
    int rc = husk_secret_put(r->srv->cfg.mgr, tenant, name, val, len, &err);
    explicit_bzero(val, len);
    res = rc < 0 ? api_reply_err(r, &err)
                 : api_reply_json(r, 200, json_pack("{s:s, s:b}", "name", name, "stored", 1));
  }
  json_decref(o);
  wipe_body(r);
  return res;
}

static int list_cb(void *ctx, const char *name, int64_t created_ms, int64_t updated_ms) {
  json_t *j = json_pack("{s:s, s:o, s:o}", "name", name, "created_at", json_time(created_ms),
                        "updated_at", json_time(updated_ms));
  if (!j || json_array_append_new(ctx, j) < 0)
    return API_LIST_NOMEM;
  return 0;
}

static enum MHD_Result secret_list(struct req *r, const char *tenant) {
  json_t *arr = json_array();
  struct husk_err err;
  if (!arr)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  int rc = husk_secret_list(r->srv->cfg.mgr, tenant, list_cb, arr, &err);
  if (rc < 0) {
    json_decref(arr);
    return api_reply_list_err(r, rc, &err);
  }
  return api_reply_json(r, 200, json_pack("{s:o}", "secrets", arr));
}

static enum MHD_Result secret_delete(struct req *r, const char *tenant, const char *name) {
  snprintf(r->audit_detail, sizeof r->audit_detail, "name=%.64s", name);
  struct husk_err err;
  if (husk_secret_delete(r->srv->cfg.mgr, tenant, name, &err) < 0)
    return api_reply_err(r, &err);
  return api_reply_empty(r, 204);
}

enum MHD_Result h_secret_put(struct req *r) { return secret_put(r, r->tenant, r->params[0]); }
enum MHD_Result h_secret_list(struct req *r) { return secret_list(r, r->tenant); }
enum MHD_Result h_secret_delete(struct req *r) { return secret_delete(r, r->tenant, r->params[0]); }
enum MHD_Result h_admin_secret_put(struct req *r) { return secret_put(r, r->params[0], r->params[1]); }
enum MHD_Result h_admin_secret_list(struct req *r) { return secret_list(r, r->params[0]); }
enum MHD_Result h_admin_secret_delete(struct req *r) {
  return secret_delete(r, r->params[0], r->params[1]);
}

static const char *const network_fields[] = {"network", "egress", NULL};

enum MHD_Result h_box_network(struct req *r) {
  json_t *o = api_body_object(r, network_fields);
  if (!o)
    return api_reply_bad(r);
  const char *net = NULL;
  json_t *eg = json_object_get(o, "egress");
  if (jget_string(o, "network", &net, &r->err) < 0 || (eg && !json_is_object(eg))) {
    if (eg && !json_is_object(eg))
      husk_fail(&r->err, EINVAL, "`egress` must be an object");
    json_decref(o);
    return api_reply_bad(r);
  }
  char *eg_s = eg ? json_dumps(eg, JSON_COMPACT) : NULL;
  snprintf(r->audit_detail, sizeof r->audit_detail, "network=%.16s", net ? net : (eg ? "egress" : "none"));
  struct husk_box_info bi = {0};
  struct husk_err err;
  int rc = husk_box_set_network(r->srv->cfg.mgr, r->tenant, r->params[0], net, eg_s, &bi, &err);
  free(eg_s);
  json_decref(o);
  if (rc < 0)
    return api_reply_err(r, &err);
  json_t *j = api_box_json(&bi);
  husk_box_info_free(&bi);
  return api_reply_json(r, 200, j);
}
