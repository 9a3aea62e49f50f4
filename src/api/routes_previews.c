/* /v1/sandboxes/{id}/ports/{port}/previews and /v1/sandboxes/{id}/previews:
 * a box port's preview URLs (husk/preview.h).  The proxy that serves them
 * is preview_proxy.c. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "api/internal.h"
#include "husk/preview.h"
#include "util/cleanup_json.h"

static const char *preview_state(const struct husk_preview_info *p) {
  if (p->revoked_ms)
    return "revoked";
  return p->expires_ms <= state_now_ms() ? "expired" : "active";
}

static json_t *limits_json(const struct husk_preview_limits *l) {
  return json_pack("{s:I, s:I, s:I, s:f, s:f}", "max_body", (json_int_t)l->max_body, "max_header",
                   (json_int_t)l->max_header, "max_connections", (json_int_t)l->max_connections,
                   "idle_timeout", l->idle_ms / 1000.0, "max_duration",
                   l->max_duration_ms / 1000.0);
}

static json_t *preview_json(const struct husk_preview_info *p) {
  json_t *j =
      json_pack("{s:s, s:s, s:i, s:s, s:s, s:o, s:o, s:o}", "id", p->id, "sandbox_id", p->box_id,
                "port", (int)p->port, "access", husk_preview_access_name(p->access), "state",
                preview_state(p), "created_at", json_time(p->created_ms), "expires_at",
                json_time(p->expires_ms), "limits", limits_json(&p->limits));
  if (j && p->revoked_ms)
    json_object_set_new(j, "revoked_at", json_time(p->revoked_ms));
  if (j)
    json_object_set_new(j, "created_by", api_created_by_json(p->created_by));
  return j;
}

/* The base of path-form URLs: --preview-url, else the scheme and host the
 * caller reached this server by. */
static int path_base(struct req *r, char *out, size_t size) {
  const char *base = r->srv->cfg.preview_url;
  if (base && *base) {
    snprintf(out, size, "%s", base);
  } else {
    const char *host = api_header(r, MHD_HTTP_HEADER_HOST);
    if (!host || !*host || strlen(host) > 255 || strpbrk(host, "/?#@ \t\\"))
      return -1;
    snprintf(out, size, "http://%s", host);
  }
  size_t n = strlen(out);
  while (n > 0 && out[n - 1] == '/')
    out[--n] = '\0';
  return 0;
}

static int port_param(struct req *r, unsigned *port) {
  const char *s = r->params[1];
  if (!*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 5)
    return -1;
  unsigned long v = strtoul(s, NULL, 10);
  if (v < 1 || v > 65535)
    return -1;
  *port = (unsigned)v;
  return 0;
}

static const char *const create_fields[] = {"ttl", "access", "public", "limits", NULL};
static const char *const limit_fields[] = {"max_body",     "max_header",   "max_connections",
                                           "idle_timeout", "max_duration", NULL};

static uint32_t narrow(uint64_t v) { return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v; }

static int read_limits(json_t *o, struct husk_preview_limits *l, struct husk_err *err) {
  json_t *lj = json_object_get(o, "limits");
  if (!lj || json_is_null(lj))
    return 0;
  if (!json_is_object(lj))
    return husk_fail(err, EINVAL, "`limits` must be an object");
  if (api_check_fields(lj, limit_fields, err) < 0)
    return -1;
  uint64_t body = 0, header = 0, conns = 0, idle = 0, dur = 0;
  if (jget_size(lj, "max_body", &body, err) < 0 || jget_size(lj, "max_header", &header, err) < 0 ||
      jget_u64(lj, "max_connections", HUSK_PREVIEW_CONNS_MAX, &conns, err) < 0 ||
      jget_seconds_ms(lj, "idle_timeout", &idle, err) < 0 ||
      jget_seconds_ms(lj, "max_duration", &dur, err) < 0)
    return husk_error_wrap(err, "in `limits`");
  /* The bounds are the core's (husk_preview_create); a value past what
   * the spec holds reaches it as the largest, which it refuses. */
  l->max_body = body;
  l->max_header = narrow(header);
  l->max_connections = narrow(conns);
  l->idle_ms = narrow(idle);
  l->max_duration_ms = narrow(dur);
  return 0;
}

enum MHD_Result h_preview_create(struct req *r) {
  unsigned port = 0;
  if (port_param(r, &port) < 0)
    return api_reply_error(r, 400, "bad_request", "the port must be a number 1..65535");
  cleanup_json json_t *o = api_body_object(r, create_fields);
  if (!o)
    return api_reply_bad(r);
  struct husk_preview_spec spec = {.port = port, .access = HUSK_PREVIEW_KEY};
  const char *access = NULL;
  bool pub = false;
  uint64_t ttl = 0;
  if (jget_seconds_ms(o, "ttl", &ttl, &r->err) < 0 ||
      jget_string(o, "access", &access, &r->err) < 0 || jget_bool(o, "public", &pub, &r->err) < 0 ||
      read_limits(o, &spec.limits, &r->err) < 0)
    return api_reply_bad(r);
  if (json_object_get(o, "ttl") && ttl == 0)
    return api_reply_error(r, 400, "bad_request", "`ttl` must be 1..%lld seconds",
                           HUSK_PREVIEW_TTL_MAX_MS / 1000);
  spec.ttl_ms = ttl;
  if (access && husk_preview_access_parse(access, &spec.access) < 0)
    return api_reply_error(r, 400, "bad_request",
                           "`access` must be \"public\", \"key\" or \"password\"");
  if (pub) {
    if (access && spec.access != HUSK_PREVIEW_PUBLIC)
      return api_reply_error(r, 400, "bad_request", "`public` contradicts `access`");
    spec.access = HUSK_PREVIEW_PUBLIC;
  }
  char base[600];
  if (path_base(r, base, sizeof base) < 0)
    return api_reply_error(r, 400, "bad_request",
                           "no Host header to build the URL from (start the server with "
                           "--preview-url)");
  snprintf(r->audit_detail, sizeof r->audit_detail, "port=%u access=%s", port,
           husk_preview_access_name(spec.access));
  char creator[STATE_CREATED_BY_SIZE];
  api_created_by(r, creator, sizeof creator);
  spec.created_by = creator;
  struct husk_preview_info p;
  char token[HUSK_PREVIEW_SECRET_MAX], password[HUSK_PREVIEW_SECRET_MAX];
  struct husk_err err;
  if (husk_preview_create(r->srv->cfg.mgr, r->tenant, r->params[0], &spec, &p, token, password,
                          &err) < 0)
    return api_reply_err(r, &err);
  snprintf(r->audit_detail, sizeof r->audit_detail, "preview=%s port=%u access=%s", p.id, port,
           husk_preview_access_name(p.access));
  json_t *j = preview_json(&p);
  char url[1024], host_url[600];
  husk_preview_urls(&p, token, base, &r->srv->preview_domain, url, sizeof url, host_url,
                    sizeof host_url);
  if (j) {
    json_object_set_new(j, "url", json_string(url));
    json_object_set_new(j, "token", json_string(token));
    if (host_url[0])
      json_object_set_new(j, "host_url", json_string(host_url));
    if (password[0])
      json_object_set_new(j, "password", json_string(password));
  }
  OPENSSL_cleanse(token, sizeof token);
  OPENSSL_cleanse(password, sizeof password);
  OPENSSL_cleanse(url, sizeof url);
  OPENSSL_cleanse(host_url, sizeof host_url);
  return api_reply_json(r, 201, j);
}

static int list_cb(void *ctx, const struct husk_preview_info *p) {
  json_t *j = preview_json(p);
  if (!j || json_array_append_new(ctx, j) < 0)
    return API_LIST_NOMEM;
  return 0;
}

enum MHD_Result h_preview_list(struct req *r) {
  json_t *arr = json_array();
  if (!arr)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  struct husk_err err;
  int rc = husk_preview_list(r->srv->cfg.mgr, r->tenant, r->params[0], list_cb, arr, &err);
  if (rc < 0) {
    json_decref(arr);
    return api_reply_list_err(r, rc, &err);
  }
  return api_reply_json(r, 200, json_pack("{s:o}", "previews", arr));
}

enum MHD_Result h_preview_get(struct req *r) {
  struct husk_preview_info p;
  struct husk_err err;
  if (husk_preview_get(r->srv->cfg.mgr, r->tenant, r->params[0], r->params[1], &p, &err) < 0)
    return api_reply_err(r, &err);
  return api_reply_json(r, 200, preview_json(&p));
}

enum MHD_Result h_preview_revoke(struct req *r) {
  struct husk_err err;
  snprintf(r->audit_detail, sizeof r->audit_detail, "preview=%s", r->params[1]);
  if (husk_preview_revoke(r->srv->cfg.mgr, r->tenant, r->params[0], r->params[1], &err) < 0)
    return api_reply_err(r, &err);
  return api_reply_empty(r, 204);
}

static int access_cb(void *ctx, const struct husk_preview_access_rec *a) {
  json_t *j =
      json_pack("{s:I, s:o, s:s, s:s, s:s, s:i, s:I, s:I, s:I}", "seq", (json_int_t)a->seq, "at",
                json_time(a->ts_ms), "remote", a->remote, "method", a->method, "path", a->path,
                "status", a->status, "bytes_in", (json_int_t)a->bytes_in, "bytes_out",
                (json_int_t)a->bytes_out, "duration_ms", (json_int_t)a->duration_ms);
  if (!j || json_array_append_new(ctx, j) < 0)
    return API_LIST_NOMEM;
  return 0;
}

enum MHD_Result h_preview_access(struct req *r) {
  uint64_t after = 0, limit = 0;
  if (api_query_u64(r, "after", INT64_MAX, &after, NULL) < 0 ||
      api_query_u64(r, "limit", HUSK_PREVIEW_LOG_MAX, &limit, NULL) < 0)
    return api_reply_bad(r);
  json_t *arr = json_array();
  if (!arr)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  struct husk_err err;
  int rc = husk_preview_access_list(r->srv->cfg.mgr, r->tenant, r->params[0], r->params[1],
                                    (int64_t)after, (int)limit, access_cb, arr, &err);
  if (rc < 0) {
    json_decref(arr);
    return api_reply_list_err(r, rc, &err);
  }
  return api_reply_json(r, 200, json_pack("{s:o}", "access", arr));
}
