/* Request bodies with strict types, replies, and the error vocabulary. */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/e2b.h"
#include "api/internal.h"
#include "util/cleanup_json.h"
#include "util/parse.h"

/* ---- replies -------------------------------------------------------- */

enum MHD_Result api_queue(struct req *r, unsigned status, struct MHD_Response *resp) {
  if (!resp)
    return MHD_NO;
  if (r->responded) {
    MHD_destroy_response(resp);
    return MHD_YES;
  }
  r->responded = true;
  r->status = (int)status;
  if (r->route && r->route->action && (r->admin || r->tenant[0]))
    api_audit(r, status < 400 ? "ok" : (status == 401 || status == 403) ? "denied" : "error");
  /* What this reply acknowledges -- the change and its audit record --
   * reaches the disk before the reply leaves (one sync for both, shared
   * with concurrent requests: state_defer_begin in on_request). */
  struct husk_err err;
  if (state_defer_end(r->srv->cfg.state, &err) < 0) {
    MHD_destroy_response(resp);
    husk_sanitize_line(err.msg);
    api_log(r->srv, "%s %s: %s", r->method, r->path, err.msg);
    static const char msg[] = "{\"error\":{\"code\":\"internal_error\","
                              "\"message\":\"the change could not be written to disk\"}}\n";
    resp = MHD_create_response_from_buffer(sizeof msg - 1, (void *)msg, MHD_RESPMEM_PERSISTENT);
    if (!resp)
      return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", "application/json");
    status = 500;
    r->status = 500;
  }
  MHD_add_response_header(resp, "Cache-Control", "no-store");
  MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
  enum MHD_Result ret;
  if (r->in_body) {
    r->pending = resp; /* sent by on_request once the body is in */
    ret = MHD_YES;
  } else {
    ret = MHD_queue_response(r->conn, status, resp);
    MHD_destroy_response(resp);
  }
  return ret;
}

struct MHD_Response *api_json_response(const json_t *o) {
  char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
  if (!text)
    return NULL;
  size_t n = strlen(text);
  /* One extra byte for a trailing newline: nicer with curl. */
  char *full = realloc(text, n + 2);
  if (!full) {
    free(text);
    return NULL;
  }
  full[n] = '\n';
  full[n + 1] = '\0';
  struct MHD_Response *resp = MHD_create_response_from_buffer(n + 1, full, MHD_RESPMEM_MUST_FREE);
  if (!resp) {
    free(full);
    return NULL;
  }
  MHD_add_response_header(resp, "Content-Type", "application/json");
  return resp;
}

enum MHD_Result api_reply_json(struct req *r, unsigned status, json_t *body_in) {
  cleanup_json json_t *body = body_in;
  struct MHD_Response *resp = api_json_response(body);
  if (!resp)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  return api_queue(r, status, resp);
}

enum MHD_Result api_reply_empty(struct req *r, unsigned status) {
  struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
  return api_queue(r, status, resp);
}

enum MHD_Result api_reply_error(struct req *r, unsigned status, const char *code, const char *fmt,
                                ...) {
  char msg[HUSK_ERR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  /* Messages may quote user input or box data: keep them one printable
   * line, and valid UTF-8 for the encoder. */
  husk_sanitize_line(msg);
  if (r->dialect == DIALECT_CONNECT)
    return e2b_connect_error(r, e2b_connect_code_of_status(status), "%s", msg);
  json_t *m = json_text(msg, strlen(msg), true, NULL);
  cleanup_json json_t *o =
      r->dialect == DIALECT_E2B
          ? json_pack("{s:i, s:o}", "code", (int)status, "message", m ? m : json_string(""))
          : json_pack("{s:{s:s, s:o}}", "error", "code", code, "message",
                      m ? m : json_string(""));
  if (!o) {
    static const char fallback[] = "{\"error\":{\"code\":\"internal_error\",\"message\":\"\"}}\n";
    struct MHD_Response *resp = MHD_create_response_from_buffer(sizeof fallback - 1, (void *)fallback,
                                                                MHD_RESPMEM_PERSISTENT);
    if (!resp)
      return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", "application/json");
    return api_queue(r, status, resp);
  }
  char *text = json_dumps(o, JSON_COMPACT);
  if (!text)
    return MHD_NO;
  size_t n = strlen(text);
  char *full = realloc(text, n + 2);
  if (!full) {
    free(text);
    return MHD_NO;
  }
  full[n] = '\n';
  full[n + 1] = '\0';
  struct MHD_Response *resp = MHD_create_response_from_buffer(n + 1, full, MHD_RESPMEM_MUST_FREE);
  if (!resp) {
    free(full);
    return MHD_NO;
  }
  MHD_add_response_header(resp, "Content-Type", "application/json");
  if ((status == 401 || status == 403) && r->www_auth[0])
    MHD_add_response_header(resp, "WWW-Authenticate", r->www_auth);
  else if (status == 401)
    MHD_add_response_header(resp, "WWW-Authenticate", "Bearer realm=\"husk\"");
  if (r->xhdr_name[0])
    MHD_add_response_header(resp, r->xhdr_name, r->xhdr_value);
  return api_queue(r, status, resp);
}

void api_err_status(int code, unsigned *status, const char **name) {
  switch (code) {
  case ENOENT: *status = 404; *name = "not_found"; return;
  case EINVAL: case ENOTDIR: case EISDIR: case ELOOP: case ENAMETOOLONG: case EXDEV: case ERANGE:
  case E2BIG: case EILSEQ: case EBADMSG:
    *status = 400; *name = "bad_request"; return;
  case EBUSY: case EEXIST: case ESTALE: case ENOTEMPTY: case EALREADY:
    *status = 409; *name = "conflict"; return;
  case EDQUOT: *status = 403; *name = "quota_exceeded"; return;
  case EACCES: case EPERM: *status = 403; *name = "forbidden"; return;
  case ENOSPC: *status = 507; *name = "insufficient_storage"; return;
  case EFBIG: case EMSGSIZE: *status = 413; *name = "payload_too_large"; return;
  case ESRCH: *status = 409; *name = "conflict"; return; /* process already gone */
  case EAGAIN: *status = 503; *name = "unavailable"; return;
  case EUSERS: *status = 429; *name = "too_many_requests"; return; /* a tenant's bound */
  case ETIMEDOUT: *status = 504; *name = "timeout"; return;
  case ENOTSUP: *status = 501; *name = "not_implemented"; return;
  default: *status = 500; *name = "internal_error"; return;
  }
}

enum MHD_Result api_reply_err(struct req *r, const struct husk_err *err) {
  unsigned status;
  const char *name;
  api_err_status(err->code, &status, &name);
  if (status >= 500) {
    /* Internal failures may name host paths: log them, tell the client
     * only what kind of failure it was. */
    char line[HUSK_ERR_MSG_MAX];
    snprintf(line, sizeof line, "%s", err->msg);
    husk_sanitize_line(line);
    api_log(r->srv, "%s %s: %s", r->method, r->path, line);
    if (status == 507)
      return api_reply_error(r, status, name, "the box's disk is full");
    if (status == 503)
      return api_reply_error(r, status, name, "temporarily unavailable, try again");
    if (status == 504)
      return api_reply_error(r, status, name, "timed out");
    if (status == 501)
      return api_reply_error(r, status, name, "not supported");
    return api_reply_error(r, status, name, "internal error (logged by the server)");
  }
  return api_reply_error(r, status, name, "%s", err->msg[0] ? err->msg : name);
}

enum MHD_Result api_reply_list_err(struct req *r, int rc, const struct husk_err *err) {
  if (rc == API_LIST_NOMEM)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  return api_reply_err(r, err);
}

enum MHD_Result api_reply_bad(struct req *r) {
  return api_reply_error(r, 400, "bad_request", "%s", r->err.msg[0] ? r->err.msg : "bad request");
}

/* ---- request bodies ------------------------------------------------- */

int api_check_fields(json_t *o, const char *const *allowed, struct husk_err *err) {
  const char *key;
  json_t *v;
  json_object_foreach(o, key, v) {
    bool ok = false;
    for (size_t i = 0; allowed && allowed[i]; i++)
      if (strcmp(allowed[i], key) == 0) {
        ok = true;
        break;
      }
    if (!ok) {
      char k[64];
      snprintf(k, sizeof k, "%s", key);
      husk_sanitize_line(k);
      return husk_fail(err, EINVAL, "unknown field `%s`", k);
    }
  }
  return 0;
}

json_t *api_body_object(struct req *r, const char *const *allowed) {
  json_error_t je;
  cleanup_json json_t *o = NULL;
  size_t n = r->body_len;
  const char *s = r->body ? r->body : "";
  /* An empty body (or only whitespace) is an empty object: every field of
   * every body is optional or checked by the handler. */
  size_t i = 0;
  while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n'))
    i++;
  if (i == n) {
    o = json_object();
  } else {
    o = json_loadb(s, n, JSON_REJECT_DUPLICATES, &je);
    if (!o) {
      char m[160];
      snprintf(m, sizeof m, "%s", je.text);
      /* jansson quotes the input "near" the error: the body may be a
       * secret's value, so say where, never what. */
      char *near = strstr(m, " near ");
      if (near)
        *near = '\0';
      husk_sanitize_line(m);
      husk_fail(&r->err, EINVAL, "malformed JSON body: %s (line %d, column %d)", m, je.line,
                je.column);
      return NULL;
    }
  }
  if (!o) {
    husk_fail(&r->err, ENOMEM, "out of memory");
    return NULL;
  }
  if (!json_is_object(o)) {
    husk_fail(&r->err, EINVAL, "the body must be a JSON object");
    return NULL;
  }
  if (api_check_fields(o, allowed, &r->err) < 0)
    return NULL;
  return steal_pointer(&o);
}

static json_t *field(json_t *o, const char *k) {
  json_t *v = json_object_get(o, k);
  return json_is_null(v) ? NULL : v;
}

int jget_string(json_t *o, const char *k, const char **out, struct husk_err *err) {
  json_t *v = field(o, k);
  if (!v)
    return 0;
  if (!json_is_string(v))
    return husk_fail(err, EINVAL, "`%s` must be a string", k);
  *out = json_string_value(v);
  if (strlen(*out) != json_string_length(v))
    return husk_fail(err, EINVAL, "`%s` must not contain NUL", k);
  return 1;
}

int jget_bool(json_t *o, const char *k, bool *out, struct husk_err *err) {
  json_t *v = field(o, k);
  if (!v)
    return 0;
  if (!json_is_boolean(v))
    return husk_fail(err, EINVAL, "`%s` must be true or false", k);
  *out = json_is_true(v);
  return 1;
}

int jget_u64(json_t *o, const char *k, uint64_t max, uint64_t *out, struct husk_err *err) {
  json_t *v = field(o, k);
  if (!v)
    return 0;
  if (!json_is_integer(v))
    return husk_fail(err, EINVAL, "`%s` must be an integer", k);
  json_int_t i = json_integer_value(v);
  if (i < 0)
    return husk_fail(err, EINVAL, "`%s` must not be negative", k);
  if ((uint64_t)i > max)
    return husk_fail(err, EINVAL, "`%s` is too large (at most %llu)", k, (unsigned long long)max);
  *out = (uint64_t)i;
  return 1;
}

int jget_size(json_t *o, const char *k, uint64_t *out, struct husk_err *err) {
  json_t *v = field(o, k);
  if (!v)
    return 0;
  if (json_is_integer(v)) {
    json_int_t i = json_integer_value(v);
    if (i < 0)
      return husk_fail(err, EINVAL, "`%s` must not be negative", k);
    *out = (uint64_t)i;
    return 1;
  }
  if (json_is_string(v)) {
    struct husk_err e;
    if (strlen(json_string_value(v)) != json_string_length(v) ||
        parse_size(json_string_value(v), out, &e) < 0)
      return husk_fail(err, EINVAL, "`%s`: %s", k,
                       strlen(json_string_value(v)) != json_string_length(v) ? "contains NUL"
                                                                              : e.msg);
    return 1;
  }
  return husk_fail(err, EINVAL, "`%s` must be a number of bytes or a size such as \"256M\"", k);
}

/* A JSON number as a finite double. */
static int number(json_t *v, const char *k, double *d, struct husk_err *err) {
  if (json_is_integer(v))
    *d = (double)json_integer_value(v);
  else if (json_is_real(v))
    *d = json_real_value(v);
  else
    return husk_fail(err, EINVAL, "`%s` must be a number", k);
  if (!isfinite(*d))
    return husk_fail(err, EINVAL, "`%s` must be finite", k);
  return 0;
}

/* A positive number of units as thousandths: `unit` words the refusal
 * (" of seconds"), `round_up` rounds up (a timeout never gets shorter)
 * rather than to the nearest. */
static int jget_thousandths(json_t *o, const char *k, const char *unit, bool round_up,
                            uint64_t *out, struct husk_err *err) {
  json_t *v = field(o, k);
  if (!v)
    return 0;
  double d = 0;
  if (number(v, k, &d, err) < 0)
    return -1;
  if (d <= 0)
    return husk_fail(err, EINVAL, "`%s` must be a positive number%s", k, unit);
  /* A bound on the conversion only (core limits are checked by the core):
   * more than ~292 million years of milliseconds does not fit. */
  if (d > 9.0e15 / 1000)
    return husk_fail(err, EINVAL, "`%s` is too large", k);
  uint64_t t = round_up ? (uint64_t)ceil(d * 1000.0) : (uint64_t)llround(d * 1000.0);
  if (t == 0)
    return husk_fail(err, EINVAL, "`%s` is too small", k);
  *out = t;
  return 1;
}

int jget_seconds_ms(json_t *o, const char *k, uint64_t *out, struct husk_err *err) {
  return jget_thousandths(o, k, " of seconds", true, out, err);
}

int jget_milli(json_t *o, const char *k, uint64_t *out, struct husk_err *err) {
  return jget_thousandths(o, k, "", false, out, err);
}

int jget_string_object(json_t *o, const char *k, json_t **out, struct husk_err *err) {
  json_t *v = field(o, k);
  if (!v)
    return 0;
  if (!json_is_object(v))
    return husk_fail(err, EINVAL, "`%s` must be an object of strings", k);
  const char *key;
  json_t *x;
  json_object_foreach(v, key, x) {
    if (!json_is_string(x) || strlen(json_string_value(x)) != json_string_length(x))
      return husk_fail(err, EINVAL, "`%s`: every value must be a string (without NUL)", k);
    if (key[0] == '\0')
      return husk_fail(err, EINVAL, "`%s`: keys must not be empty", k);
  }
  *out = v;
  return 1;
}

int jget_env(json_t *o, const char *k, char ***out, struct husk_err *err) {
  json_t *v;
  int rc = jget_string_object(o, k, &v, err);
  if (rc <= 0)
    return rc;
  size_t n = json_object_size(v), bytes = 0;
  const char *key;
  json_t *x;
  json_object_foreach(v, key, x) bytes += strlen(key) + 1 + json_string_length(x) + 1;
  char **env = malloc((n + 1) * sizeof *env + bytes);
  if (!env)
    return husk_error(err, ENOMEM, "env");
  char *p = (char *)(env + n + 1);
  size_t i = 0;
  json_object_foreach(v, key, x) {
    int len = sprintf(p, "%s=%s", key, json_string_value(x));
    struct husk_err e;
    if (parse_env_assignment(p, &e) != (int)strlen(key)) {
      free(env);
      char kk[64];
      snprintf(kk, sizeof kk, "%s", key);
      husk_sanitize_line(kk);
      return husk_fail(err, EINVAL, "`%s`: `%s` is not a valid variable name", k, kk);
    }
    env[i++] = p;
    p += len + 1;
  }
  env[i] = NULL;
  *out = env;
  return 1;
}

int jget_argv(json_t *o, const char *k, char ***out, struct husk_err *err) {
  json_t *v = field(o, k);
  if (!v)
    return 0;
  if (!json_is_array(v) || json_array_size(v) == 0)
    return husk_fail(err, EINVAL, "`%s` must be a non-empty array of strings", k);
  size_t n = json_array_size(v), bytes = 0, i;
  json_t *x;
  json_array_foreach(v, i, x) {
    if (!json_is_string(x) || strlen(json_string_value(x)) != json_string_length(x))
      return husk_fail(err, EINVAL, "`%s` must be an array of strings (without NUL)", k);
    bytes += json_string_length(x) + 1;
  }
  if (json_string_length(json_array_get(v, 0)) == 0)
    return husk_fail(err, EINVAL, "`%s[0]` (the program) must not be empty", k);
  char **argv = malloc((n + 1) * sizeof *argv + bytes);
  if (!argv)
    return husk_error(err, ENOMEM, "argv");
  char *p = (char *)(argv + n + 1);
  json_array_foreach(v, i, x) {
    size_t len = json_string_length(x);
    memcpy(p, json_string_value(x), len + 1);
    argv[i] = p;
    p += len + 1;
  }
  argv[n] = NULL;
  *out = argv;
  return 1;
}
