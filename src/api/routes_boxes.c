/* /v1/sandboxes: create (from a snapshot too), list, get, delete, timeout, metrics, pause,
 * resume. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "box/box.h"

json_t *api_box_json(const struct husk_box_info *bi);

json_t *api_limits_json(const struct husk_limits *l) {
  return json_pack("{s:I, s:f, s:I, s:I}", "memory", (json_int_t)l->memory_bytes, "cpus",
                   (double)l->cpu_milli / 1000.0, "pids", (json_int_t)l->pids, "disk",
                   (json_int_t)l->disk_bytes);
}

json_t *api_box_json(const struct husk_box_info *bi) {
  json_error_t je;
  json_t *meta = json_loads(bi->metadata_json ? bi->metadata_json : "{}", 0, &je);
  if (!json_is_object(meta)) {
    json_decref(meta);
    meta = json_object();
  }
  json_t *limits = api_limits_json(&bi->limits);
  if (limits)
    json_object_set_new(limits, "timeout", json_real((double)bi->limits.timeout_ms / 1000.0));
  json_t *o = json_pack(
      "{s:s, s:s, s:s, s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:o}", "id", bi->id, "state",
      bi->state, "reason", bi->reason, "template", bi->template_name, "workdir", bi->workdir,
      "network",
      bi->network[0] ? bi->network : "none", "created_at", json_time(bi->created_ms),
      "expires_at", json_time(bi->expires_ms), "ended_at", json_time(bi->ended_ms), "limits",
      limits, "metadata", meta ? meta : json_object());
  if (o && bi->paused_ms) {
    json_object_set_new(o, "paused_at", json_time(bi->paused_ms));
    json_object_set_new(o, "paused_until", json_time(bi->paused_until_ms));
    json_object_set_new(o, "remaining", json_real((double)bi->remaining_ms / 1000.0));
    json_object_set_new(o, "keep_memory", json_boolean(!bi->paused_to_disk));
  }
  if (o && bi->snapshot_id[0])
    json_object_set_new(o, "snapshot", json_string(bi->snapshot_id));
  if (o)
    json_object_set_new(o, "created_by", api_created_by_json(bi->created_by));
  if (o && bi->volumes_json) {
    json_t *v = json_loads(bi->volumes_json, 0, &je);
    if (v)
      json_object_set_new(o, "volumes", v);
  }
  /* The egress policy, placeholders included (not secrets). */
  if (o && bi->egress_json) {
    json_t *eg = json_loads(bi->egress_json, 0, &je);
    if (eg)
      json_object_set_new(o, "egress", eg);
  }
  return o;
}

static const char *const create_fields[] = {"template", "memory",  "cpus", "pids",
                                            "disk",     "timeout", "env",  "metadata",
                                            "network",  "egress",  "snapshot",
                                            "rebase",   "volumes", NULL};

enum MHD_Result h_box_create(struct req *r) {
  json_t *o = api_body_object(r, create_fields);
  if (!o)
    return api_reply_bad(r);
  struct husk_box_spec cr = {0};
  char **env = NULL;
  json_t *meta = NULL;
  char *meta_s = NULL;
  uint64_t pids = 0;
  if (jget_string(o, "template", &cr.template_name, &r->err) < 0 ||
      jget_string(o, "network", &cr.network, &r->err) < 0 ||
      jget_size(o, "memory", &cr.limits.memory_bytes, &r->err) < 0 ||
      jget_milli(o, "cpus", &cr.limits.cpu_milli, &r->err) < 0 ||
      jget_u64(o, "pids", UINT64_MAX >> 1, &pids, &r->err) < 0 ||
      jget_size(o, "disk", &cr.limits.disk_bytes, &r->err) < 0 ||
      jget_seconds_ms(o, "timeout", &cr.limits.timeout_ms, &r->err) < 0 ||
      jget_string(o, "snapshot", &cr.snapshot, &r->err) < 0 ||
      jget_bool(o, "rebase", &cr.rebase, &r->err) < 0 ||
      jget_env(o, "env", &env, &r->err) < 0 ||
      jget_string_object(o, "metadata", &meta, &r->err) < 0) {
    json_decref(o);
    free(env);
    return api_reply_bad(r);
  }
  cr.limits.pids = pids;
  struct husk_volume_mount vols[HUSK_VOLUME_MOUNTS_MAX];
  if (api_volume_mounts(o, vols, &cr.nvolumes, &r->err) < 0) {
    json_decref(o);
    free(env);
    return api_reply_bad(r);
  }
  cr.volumes = vols;
  if (cr.rebase && !cr.snapshot) {
    json_decref(o);
    free(env);
    return api_reply_error(r, 400, "bad_request", "`rebase` applies only with `snapshot`");
  }
  if (meta) {
    meta_s = json_dumps(meta, JSON_COMPACT | JSON_SORT_KEYS);
    if (!meta_s) {
      json_decref(o);
      free(env);
      return api_reply_error(r, 500, "internal_error", "out of memory");
    }
    cr.metadata_json = meta_s;
  }
  cr.env = env;
  /* Egress rules and secret bindings, validated by the core. */
  char *egress_s = NULL;
  json_t *eg = json_object_get(o, "egress");
  if (eg) {
    if (!json_is_object(eg)) {
      json_decref(o);
      free(env);
      free(meta_s);
      return api_reply_error(r, 400, "bad_request", "`egress` must be an object");
    }
    egress_s = json_dumps(eg, JSON_COMPACT);
    cr.egress_json = egress_s;
  }
  snprintf(r->audit_detail, sizeof r->audit_detail,
           "template=%s memory=%llu disk=%llu%s%.40s%s volumes=%zu",
           cr.template_name ? cr.template_name : "default",
           (unsigned long long)cr.limits.memory_bytes, (unsigned long long)cr.limits.disk_bytes,
           cr.snapshot ? " snapshot=" : "", cr.snapshot ? cr.snapshot : "",
           cr.rebase ? " rebase" : "", cr.nvolumes);
  char creator[STATE_CREATED_BY_SIZE];
  api_created_by(r, creator, sizeof creator);
  cr.created_by = creator;
  struct husk_box_info bi = {0};
  struct husk_err err;
  int rc = husk_box_create(r->srv->cfg.mgr, r->tenant, &cr, &bi, &err);
  free(egress_s);
  json_decref(o);
  free(env);
  free(meta_s);
  if (rc < 0)
    return api_reply_err(r, &err);
  snprintf(r->audit_box, sizeof r->audit_box, "%s", bi.id);
  json_t *j = api_box_json(&bi);
  husk_box_info_free(&bi);
  return api_reply_json(r, 201, j);
}

struct list_ctx {
  json_t *arr;
};

static int list_cb(void *ctx, const struct husk_box_info *bi) {
  struct list_ctx *lc = ctx;
  json_t *j = api_box_json(bi);
  if (!j || json_array_append_new(lc->arr, j) < 0)
    return API_LIST_NOMEM;
  return 0;
}

/* Collects "metadata.KEY=VALUE" query arguments. */
struct meta_args {
  const char *keys[STATE_META_FILTERS_MAX + 1];
  const char *values[STATE_META_FILTERS_MAX + 1];
  size_t n;
  bool too_many;
};

static enum MHD_Result meta_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                const char *value) {
  struct meta_args *ma = cls;
  (void)kind;
  if (strncmp(key, "metadata.", 9) != 0)
    return MHD_YES;
  if (ma->n >= STATE_META_FILTERS_MAX) {
    ma->too_many = true;
    return MHD_NO;
  }
  ma->keys[ma->n] = key + 9;
  ma->values[ma->n] = value ? value : "";
  ma->n++;
  return MHD_YES;
}

enum MHD_Result h_box_list(struct req *r) {
  struct husk_box_filter lr = {0};
  struct meta_args ma = {0};
  uint64_t limit = 0;
  lr.state = api_query(r, "state");
  lr.cursor = api_query(r, "cursor");
  /* Boxes of one creator: a user id, key: and a key id (or s3key: and
   * an S3 key id, the syntax GET /v1/objects shares, which made no box). */
  lr.created_by = api_query(r, "created_by");
  if (lr.created_by && state_check_created_by(lr.created_by, false, &r->err) < 0)
    return api_reply_error(r, 400, "bad_request",
                           "`created_by` must be a user id (u_...), key: and an API key id, or "
                           "s3key: and an S3 access key id");
  if (api_query_u64(r, "limit", 1000000, &limit, NULL) < 0)
    return api_reply_bad(r);
  MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, meta_arg, &ma);
  if (ma.too_many)
    return api_reply_error(r, 400, "bad_request", "at most %d metadata filters",
                           STATE_META_FILTERS_MAX);
  lr.meta_keys = ma.keys;
  lr.meta_values = ma.values;
  lr.nmeta = ma.n;
  lr.limit = (int)limit;
  struct list_ctx lc = {.arr = json_array()};
  if (!lc.arr)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  char next[STATE_CURSOR_SIZE] = "";
  struct husk_err err;
  int rc = husk_box_list(r->srv->cfg.mgr, r->tenant, &lr, list_cb, &lc, next, sizeof next, &err);
  if (rc < 0) {
    json_decref(lc.arr);
    return api_reply_list_err(r, rc, &err);
  }
  return api_reply_json(r, 200,
                        json_pack("{s:o, s:o}", "sandboxes", lc.arr, "next_cursor",
                                  next[0] ? json_string(next) : json_null()));
}

enum MHD_Result h_box_get(struct req *r) {
  struct husk_box_info bi = {0};
  struct husk_err err;
  if (husk_box_get(r->srv->cfg.mgr, r->tenant, r->params[0], &bi, &err) < 0)
    return api_reply_err(r, &err);
  json_t *j = api_box_json(&bi);
  husk_box_info_free(&bi);
  return api_reply_json(r, 200, j);
}

enum MHD_Result h_box_delete(struct req *r) {
  struct husk_err err;
  bool kill = false;
  if (api_query_bool(r, "kill", &kill) < 0)
    return api_reply_bad(r);
  if (husk_box_destroy(r->srv->cfg.mgr, r->tenant, r->params[0], kill ? "killed" : "stopped", &err) < 0)
    return api_reply_err(r, &err);
  /* The final state, as the reply. */
  struct husk_box_info bi = {0};
  if (husk_box_get(r->srv->cfg.mgr, r->tenant, r->params[0], &bi, &err) < 0)
    return api_reply_empty(r, 204);
  json_t *j = api_box_json(&bi);
  husk_box_info_free(&bi);
  return api_reply_json(r, 200, j);
}

static const char *const timeout_fields[] = {"timeout", NULL};

enum MHD_Result h_box_timeout(struct req *r) {
  json_t *o = api_body_object(r, timeout_fields);
  if (!o)
    return api_reply_bad(r);
  uint64_t ms = 0;
  int got = jget_seconds_ms(o, "timeout", &ms, &r->err);
  json_decref(o);
  if (got < 0)
    return api_reply_bad(r);
  if (got == 0)
    return api_reply_error(r, 400, "bad_request", "`timeout` (seconds) is required");
  snprintf(r->audit_detail, sizeof r->audit_detail, "timeout_ms=%llu", (unsigned long long)ms);
  struct husk_box_info bi = {0};
  struct husk_err err;
  if (husk_box_set_timeout(r->srv->cfg.mgr, r->tenant, r->params[0], ms, &bi, &err) < 0)
    return api_reply_err(r, &err);
  json_t *j = api_box_json(&bi);
  husk_box_info_free(&bi);
  return api_reply_json(r, 200, j);
}

static const char *const pause_fields[] = {"keep_memory", NULL};

enum MHD_Result h_box_pause(struct req *r) {
  json_t *o = api_body_object(r, pause_fields);
  if (!o)
    return api_reply_bad(r);
  bool keep_memory = true;
  int got = jget_bool(o, "keep_memory", &keep_memory, &r->err);
  json_decref(o);
  if (got < 0)
    return api_reply_bad(r);
  snprintf(r->audit_detail, sizeof r->audit_detail, "keep_memory=%s", keep_memory ? "true" : "false");
  struct husk_box_info bi = {0};
  struct husk_err err;
  if ((keep_memory ? husk_box_pause : husk_box_pause_to_disk)(r->srv->cfg.mgr, r->tenant,
                                                              r->params[0], &bi, &err) < 0) {
    /* To disk, the space is the data disk's, not the box's. */
    if (!keep_memory && err.code == ENOSPC) {
      api_log(r->srv, "%s %s: %s", r->method, r->path, err.msg);
      return api_reply_error(r, 507, "insufficient_storage",
                             "the server's data disk is short of space for the sandbox's files");
    }
    if (!keep_memory && err.code == ENOTSUP)
      return api_reply_error(r, 501, "not_implemented",
                             "pausing to disk is not available on this server");
    return api_reply_err(r, &err);
  }
  json_t *j = api_box_json(&bi);
  husk_box_info_free(&bi);
  return api_reply_json(r, 200, j);
}

enum MHD_Result h_box_resume(struct req *r) {
  struct husk_box_info bi = {0};
  struct husk_err err;
  if (husk_box_resume(r->srv->cfg.mgr, r->tenant, r->params[0], &bi, &err) < 0)
    return api_reply_err(r, &err);
  json_t *j = api_box_json(&bi);
  husk_box_info_free(&bi);
  return api_reply_json(r, 200, j);
}

enum MHD_Result h_box_metrics(struct req *r) {
  struct husk_box_metrics bm = {0};
  struct husk_err err;
  if (husk_box_metrics(r->srv->cfg.mgr, r->tenant, r->params[0], &bm, &err) < 0)
    return api_reply_err(r, &err);
  return api_reply_json(
      r, 200,
      json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "cpu_usec", (json_int_t)bm.cpu_usec,
                "memory_current", (json_int_t)bm.memory_current, "memory_peak",
                (json_int_t)bm.memory_peak, "pids", (json_int_t)bm.pids, "disk_used",
                (json_int_t)bm.disk_used, "disk_total", (json_int_t)bm.disk_total));
}
