/* /v1/snapshots and /v1/sandboxes/{id}/snapshots: filesystem snapshots of
 * boxes (husk/snapshot.h).  A box is made from one by POST /v1/sandboxes
 * with `snapshot` (routes_boxes.c). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "husk/snapshot.h"
#include "util/cleanup_json.h"

/* The box's env as an object; the core keeps it as an object, an array
 * of NAME=VALUE is accepted as well. */
static json_t *env_object(const char *text) {
  json_t *e = json_loads(text ? text : "{}", 0, NULL);
  if (json_is_object(e))
    return e;
  json_t *o = json_object();
  size_t i;
  json_t *v;
  json_array_foreach(e, i, v) {
    const char *s = json_string_value(v), *eq = s ? strchr(s, '=') : NULL;
    if (!eq)
      continue;
    char name[256];
    snprintf(name, sizeof name, "%.*s", (int)(eq - s) < 255 ? (int)(eq - s) : 255, s);
    json_object_set_new(o, name, json_string(eq + 1));
  }
  json_decref(e);
  return o;
}

json_t *api_snapshot_json(const struct husk_snapshot_info *si) {
  json_t *meta = json_loads(si->metadata_json ? si->metadata_json : "{}", 0, NULL);
  if (!json_is_object(meta)) {
    json_decref(meta);
    meta = json_object();
  }
  json_t *limits = api_limits_json(&si->limits);
  if (limits)
    json_object_set_new(limits, "timeout", json_real((double)si->limits.timeout_ms / 1000.0));
  json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:I, s:I, s:I, s:s, s:o, s:I}", "id",
                        si->id, "sandbox", si->box_id, "template", si->template_name, "workdir",
                        si->workdir, "limits", limits ? limits : json_object(), "env",
                        env_object(si->env_json), "metadata", meta, "size", (json_int_t)si->size,
                        "data_bytes", (json_int_t)si->data_bytes, "entries",
                        (json_int_t)si->entries, "sha256", si->sha256, "created_at",
                        json_time(si->created_ms), "boxes", (json_int_t)si->boxes);
  if (o && si->template_id[0])
    json_object_set_new(o, "template_id", json_string(si->template_id));
  return o;
}

/* The snapshot calls' errors: api_reply_err's, except what that words for
 * the box's own disk or hides. */
static enum MHD_Result snapshot_err(struct req *r, const struct husk_err *err) {
  if (err->code == ENOSPC) {
    api_log(r->srv, "%s %s: %s", r->method, r->path, err->msg);
    return api_reply_error(r, 507, "insufficient_storage",
                           "the server's data disk is short of space for the snapshot");
  }
  if (err->code == ENOTSUP) {
    api_log(r->srv, "%s %s: %s", r->method, r->path, err->msg);
    return api_reply_error(r, 501, "not_implemented", "snapshots are not available on this server");
  }
  return api_reply_err(r, err);
}

static const char *const create_fields[] = {"metadata", NULL};

enum MHD_Result h_snapshot_create(struct req *r) {
  cleanup_json json_t *o = api_body_object(r, create_fields);
  if (!o)
    return api_reply_bad(r);
  json_t *meta = NULL;
  if (jget_string_object(o, "metadata", &meta, &r->err) < 0)
    return api_reply_bad(r);
  char *meta_s = meta ? json_dumps(meta, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  if (meta && !meta_s)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  struct husk_snapshot_info si = {0};
  struct husk_err err;
  int rc = husk_snapshot_create(r->srv->cfg.mgr, r->tenant, r->params[0], meta_s, &si, &err);
  free(meta_s);
  if (rc < 0)
    return snapshot_err(r, &err);
  snprintf(r->audit_detail, sizeof r->audit_detail, "snapshot=%s size=%llu", si.id,
           (unsigned long long)si.size);
  json_t *j = api_snapshot_json(&si);
  husk_snapshot_info_free(&si);
  return api_reply_json(r, 201, j);
}

static int list_cb(void *ctx, const struct husk_snapshot_info *si) {
  json_t *j = api_snapshot_json(si);
  if (!j || json_array_append_new(ctx, j) < 0)
    return API_LIST_NOMEM;
  return 0;
}

enum MHD_Result h_snapshot_list(struct req *r) {
  uint64_t limit = 0;
  if (api_query_u64(r, "limit", 1000, &limit, NULL) < 0)
    return api_reply_bad(r);
  const char *cursor = api_query(r, "cursor");
  json_t *arr = json_array();
  if (!arr)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  char next[STATE_CURSOR_SIZE] = "";
  struct husk_err err;
  int rc = husk_snapshot_list(r->srv->cfg.mgr, r->tenant, api_query(r, "sandbox"), cursor,
                              (int)limit, list_cb, arr, next, sizeof next, &err);
  if (rc < 0) {
    json_decref(arr);
    if (rc == API_LIST_NOMEM)
      return api_reply_list_err(r, rc, &err);
    return snapshot_err(r, &err);
  }
  return api_reply_json(r, 200,
                        json_pack("{s:o, s:o}", "snapshots", arr, "next_cursor",
                                  next[0] ? json_string(next) : json_null()));
}

enum MHD_Result h_snapshot_get(struct req *r) {
  struct husk_snapshot_info si = {0};
  struct husk_err err;
  if (husk_snapshot_get(r->srv->cfg.mgr, r->tenant, r->params[0], &si, &err) < 0)
    return snapshot_err(r, &err);
  json_t *j = api_snapshot_json(&si);
  husk_snapshot_info_free(&si);
  return api_reply_json(r, 200, j);
}

enum MHD_Result h_snapshot_delete(struct req *r) {
  struct husk_err err;
  snprintf(r->audit_detail, sizeof r->audit_detail, "snapshot=%s", r->params[0]);
  if (husk_snapshot_delete(r->srv->cfg.mgr, r->tenant, r->params[0], &err) < 0)
    return snapshot_err(r, &err);
  return api_reply_empty(r, 204);
}
