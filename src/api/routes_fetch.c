/* POST /v1/sandboxes/{id}/fetch: a URL into a box file through the box's
 * own egress policy (husk/fetch.h), the HTTP form of MCP fetch_url. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "util/cleanup.h"
#include "husk/husk.h"

static const char *const fetch_fields[] = {"url", "path", "headers", "max_bytes", "timeout", NULL};

enum MHD_Result h_box_fetch(struct req *r) {
  json_t *o = api_body_object(r, fetch_fields);
  if (!o)
    return api_reply_bad(r);
  const char *url = NULL, *path = NULL;
  uint64_t max_bytes = 0, timeout_ms = 0;
  json_t *hmap = NULL;
  char *hv[HUSK_FETCH_MAX_HEADERS + 1] = {0};
  size_t k = 0;
  enum MHD_Result ret;
  /* A client that hangs up, or the server stopping, ends the fetch. */
  cleanup_close int cancel = -1;
  if (jget_string(o, "url", &url, &r->err) < 0 || jget_string(o, "path", &path, &r->err) < 0 ||
      jget_u64(o, "max_bytes", HUSK_FETCH_MAX_BYTES_MAX, &max_bytes, &r->err) < 0 ||
      jget_seconds_ms(o, "timeout", &timeout_ms, &r->err) < 0 ||
      jget_string_object(o, "headers", &hmap, &r->err) < 0) {
    ret = api_reply_bad(r);
    goto out;
  }
  if (!url || !path) {
    ret = api_reply_error(r, 400, "bad_request", "`url` and `path` are required");
    goto out;
  }
  if (hmap && json_object_size(hmap) > HUSK_FETCH_MAX_HEADERS) {
    ret = api_reply_error(r, 400, "bad_request", "at most %d headers", HUSK_FETCH_MAX_HEADERS);
    goto out;
  }
  const char *name;
  json_t *v;
  if (hmap)
    json_object_foreach(hmap, name, v) {
      if (strchr(name, ':') || asprintf(&hv[k], "%s: %s", name, json_string_value(v)) < 0) {
        hv[k] = NULL;
        ret = api_reply_error(r, 400, "bad_request", "a header name holds ':'");
        goto out;
      }
      k++;
    }
  /* The path's query may hold a token: the audit names no URL. */
  snprintf(r->audit_detail, sizeof r->audit_detail, "fetch");
  cancel = api_cancel_fd(r);
  struct husk_fetch_spec spec = {.url = url, .path = path, .headers = (const char *const *)hv,
                                 .max_bytes = max_bytes, .timeout_ms = timeout_ms,
                                 .cancel_fd = cancel};
  struct husk_fetch_result res;
  struct husk_err err;
  if (husk_box_fetch(r->srv->cfg.mgr, r->tenant, r->params[0], &spec, &res, &err) < 0) {
    snprintf(r->audit_detail, sizeof r->audit_detail, "fetch failed code=%d", err.code);
    switch (err.code) {
    case EACCES:
      ret = api_reply_error(r, 403, "forbidden", "%s", err.msg);
      break;
    case ENETUNREACH:
      ret = api_reply_error(r, 409, "no_network", "%s", err.msg);
      break;
    case EFBIG:
      ret = api_reply_error(r, 422, "too_large", "%s", err.msg);
      break;
    case ETIMEDOUT:
      ret = api_reply_error(r, 504, "timeout", "%s", err.msg);
      break;
    case EPROTO:
      ret = api_reply_error(r, 502, "bad_gateway", "%s", err.msg);
      break;
    case EAGAIN:
      ret = api_reply_error(r, 429, "too_many_connections", "%s", err.msg);
      break;
    default:
      ret = api_reply_err(r, &err);
    }
    goto out;
  }
  snprintf(r->audit_detail, sizeof r->audit_detail, "fetch status=%ld bytes=%llu", res.status,
           (unsigned long long)res.size);
  json_t *j = json_pack("{s:s, s:I, s:i, s:s, s:s, s:s, s:i}", "path", path, "size",
                        (json_int_t)res.size, "status", (int)res.status, "content_type",
                        res.content_type, "final_url", res.final_url ? res.final_url : url,
                        "sha256", res.sha256, "redirects", (int)res.redirects);
  husk_fetch_result_free(&res);
  ret = api_reply_json(r, 200, j);
out:
  for (size_t i = 0; i < k; i++)
    free(hv[i]);
  json_decref(o);
  return ret;
}
