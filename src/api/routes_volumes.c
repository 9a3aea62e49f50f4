/* /v1/volumes: a tenant's named volumes (husk/volume.h).  A box mounts
 * them through POST /v1/sandboxes with `volumes` (routes_boxes.c, which
 * reads that list with api_volume_mounts). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "husk/volume.h"
#include "util/cleanup_json.h"

static json_t *volume_json(const struct husk_volume_info *vi) {
  return json_pack("{s:s, s:s, s:I, s:o, s:o}", "id", vi->id, "name", vi->name, "size",
                   (json_int_t)vi->size, "created_at", json_time(vi->created_ms), "sandbox",
                   vi->box_id[0] ? json_string(vi->box_id) : json_null());
}

/* The volume calls' errors: api_reply_err's, except what that words for
 * the box's own disk. */
static enum MHD_Result volume_err(struct req *r, const struct husk_err *err) {
  if (err->code == ENOSPC) {
    api_log(r->srv, "%s %s: %s", r->method, r->path, err->msg);
    return api_reply_error(r, 507, "insufficient_storage",
                           "the server's data disk is short of space for the volume");
  }
  if (err->code == ENOTSUP) {
    api_log(r->srv, "%s %s: %s", r->method, r->path, err->msg);
    return api_reply_error(r, 501, "not_implemented", "volumes are not available on this server");
  }
  return api_reply_err(r, err);
}

int api_volume_mounts(json_t *o, struct husk_volume_mount *m, size_t *n, struct husk_err *err) {
  *n = 0;
  json_t *a = json_object_get(o, "volumes");
  if (!a || json_is_null(a))
    return 0;
  if (!json_is_array(a))
    return husk_fail(err, EINVAL,
                     "`volumes` must be an array of {\"name\", \"path\", \"read_only\"}");
  if (json_array_size(a) > HUSK_VOLUME_MOUNTS_MAX)
    return husk_fail(err, EINVAL, "a sandbox mounts at most %d volumes (%zu asked)",
                     HUSK_VOLUME_MOUNTS_MAX, json_array_size(a));
  size_t i;
  json_t *v;
  json_array_foreach(a, i, v) {
    if (!json_is_object(v))
      return husk_fail(err, EINVAL, "`volumes[%zu]` must be an object", i);
    const char *k;
    json_t *x;
    json_object_foreach(v, k, x) {
      if (strcmp(k, "name") && strcmp(k, "path") && strcmp(k, "read_only"))
        return husk_fail(err, EINVAL, "`volumes[%zu]` has an unknown field `%.64s`", i, k);
    }
    m[i] = (struct husk_volume_mount){0};
    if (jget_string(v, "name", &m[i].name, err) < 0 ||
        jget_string(v, "path", &m[i].path, err) < 0 ||
        jget_bool(v, "read_only", &m[i].read_only, err) < 0)
      return husk_error_wrap(err, "in `volumes[%zu]`", i);
    if (!m[i].name || !m[i].path)
      return husk_fail(err, EINVAL, "`volumes[%zu]` needs a `name` and a `path`", i);
  }
  *n = json_array_size(a);
  return 0;
}

static const char *const create_fields[] = {"name", "size", NULL};

enum MHD_Result h_volume_create(struct req *r) {
  cleanup_json json_t *o = api_body_object(r, create_fields);
  if (!o)
    return api_reply_bad(r);
  const char *name = NULL;
  uint64_t size = 0;
  if (jget_string(o, "name", &name, &r->err) < 0 || jget_size(o, "size", &size, &r->err) < 0)
    return api_reply_bad(r);
  if (!name)
    return api_reply_error(r, 400, "bad_request", "a volume needs a `name`");
  struct husk_volume_info vi;
  struct husk_err err;
  snprintf(r->audit_detail, sizeof r->audit_detail, "volume=%.64s size=%llu", name,
           (unsigned long long)size);
  if (husk_volume_create(r->srv->cfg.mgr, r->tenant, name, size, &vi, &err) < 0)
    return volume_err(r, &err);
  snprintf(r->audit_detail, sizeof r->audit_detail, "volume=%s id=%s size=%llu", vi.name, vi.id,
           (unsigned long long)vi.size);
  return api_reply_json(r, 201, volume_json(&vi));
}

static int list_cb(void *ctx, const struct husk_volume_info *vi) {
  json_t *j = volume_json(vi);
  if (!j || json_array_append_new(ctx, j) < 0)
    return API_LIST_NOMEM;
  return 0;
}

enum MHD_Result h_volume_list(struct req *r) {
  json_t *arr = json_array();
  if (!arr)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  struct husk_err err;
  int rc = husk_volume_list(r->srv->cfg.mgr, r->tenant, list_cb, arr, &err);
  if (rc < 0) {
    json_decref(arr);
    if (rc == API_LIST_NOMEM)
      return api_reply_list_err(r, rc, &err);
    return volume_err(r, &err);
  }
  return api_reply_json(r, 200, json_pack("{s:o}", "volumes", arr));
}

enum MHD_Result h_volume_get(struct req *r) {
  struct husk_volume_info vi;
  struct husk_err err;
  if (husk_volume_get(r->srv->cfg.mgr, r->tenant, r->params[0], &vi, &err) < 0)
    return volume_err(r, &err);
  return api_reply_json(r, 200, volume_json(&vi));
}

enum MHD_Result h_volume_delete(struct req *r) {
  struct husk_err err;
  snprintf(r->audit_detail, sizeof r->audit_detail, "volume=%.64s", r->params[0]);
  if (husk_volume_delete(r->srv->cfg.mgr, r->tenant, r->params[0], &err) < 0)
    return volume_err(r, &err);
  return api_reply_empty(r, 204);
}
