/* The Connect protocol as envd speaks it to E2B's SDKs, JSON codec only
 * (https://connectrpc.com/docs/protocol): unary calls are a JSON body
 * and a JSON reply; server streams are one request envelope and a
 * sequence of reply envelopes (a flags byte, a big-endian uint32 length,
 * the message) closed by an end-stream envelope (flags 0x02) that carries
 * the stream's error, if any -- inside a 200. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/e2b.h"
#include "util/cleanup_json.h"

#define ENVELOPE_END 0x02
#define ENVELOPE_COMPRESSED 0x01

static const struct {
  const char *code;
  unsigned status;
} codes[] = {
    {"canceled", 499},          {"unknown", 500},           {"invalid_argument", 400},
    {"deadline_exceeded", 504}, {"not_found", 404},         {"already_exists", 409},
    {"permission_denied", 403}, {"resource_exhausted", 429}, {"failed_precondition", 400},
    {"aborted", 409},           {"out_of_range", 400},      {"unimplemented", 501},
    {"internal", 500},          {"unavailable", 503},       {"data_loss", 500},
    {"unauthenticated", 401},
};

unsigned e2b_connect_status(const char *code) {
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
    if (!strcmp(codes[i].code, code))
      return codes[i].status;
  return 500;
}

const char *e2b_connect_code_of_status(unsigned status) {
  switch (status) {
  case 400: case 411: case 415: return "invalid_argument";
  case 401: return "unauthenticated";
  case 403: return "permission_denied";
  case 404: return "not_found";
  case 405: return "unimplemented";
  case 408: case 504: return "deadline_exceeded";
  case 409: return "failed_precondition";
  case 413: case 429: case 507: return "resource_exhausted";
  case 499: return "canceled";
  case 501: return "unimplemented";
  case 502: case 503: return "unavailable";
  default: return status >= 500 ? "internal" : "unknown";
  }
}

const char *e2b_connect_code_of_err(const struct husk_err *err) {
  switch (err->code) {
  case EEXIST: return "already_exists";
  case EBUSY: return "failed_precondition";
  case ENOTEMPTY: return "failed_precondition";
  default: {
    unsigned status;
    const char *name;
    api_err_status(err->code, &status, &name);
    return e2b_connect_code_of_status(status);
  }
  }
}

enum MHD_Result e2b_connect_error(struct req *r, const char *code, const char *fmt, ...) {
  char msg[HUSK_ERR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  husk_sanitize_line(msg);
  json_t *m = json_text(msg, strlen(msg), true, NULL);
  json_t *o = json_pack("{s:s, s:o}", "code", code, "message", m ? m : json_string(""));
  /* api_reply_json would answer a failed pack with a husk-shaped 500. */
  struct MHD_Response *resp = o ? api_json_response(o) : NULL;
  json_decref(o);
  if (!resp)
    return MHD_NO;
  return api_queue(r, e2b_connect_status(code), resp);
}

enum MHD_Result e2b_connect_err(struct req *r, const struct husk_err *err) {
  return e2b_connect_error(r, e2b_connect_code_of_err(err), "%s", err->msg);
}

static bool content_type_is(struct req *r, const char *want) {
  const char *ct = api_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
  if (!ct)
    return false;
  size_t n = strlen(want);
  return !strncasecmp(ct, want, n) && (ct[n] == '\0' || ct[n] == ';' || ct[n] == ' ');
}

json_t *e2b_connect_request(struct req *r, bool streaming) {
  const char *body = r->body ? r->body : "";
  size_t len = r->body_len;
  if (streaming) {
    if (!content_type_is(r, "application/connect+json")) {
      e2b_connect_error(r, "invalid_argument", "a stream's request must be application/connect+json");
      return NULL;
    }
    if (len < 5) {
      e2b_connect_error(r, "invalid_argument", "the request is not one Connect envelope");
      return NULL;
    }
    unsigned flags = (unsigned char)body[0];
    uint32_t n = (uint32_t)(unsigned char)body[1] << 24 | (uint32_t)(unsigned char)body[2] << 16 |
                 (uint32_t)(unsigned char)body[3] << 8 | (uint32_t)(unsigned char)body[4];
    if (flags & ENVELOPE_COMPRESSED) {
      e2b_connect_error(r, "unimplemented", "compressed messages are not supported");
      return NULL;
    }
    if (flags != 0 || (size_t)n != len - 5) {
      e2b_connect_error(r, "invalid_argument", "the request is not one Connect envelope");
      return NULL;
    }
    body += 5;
    len = n;
  } else if (!content_type_is(r, "application/json")) {
    e2b_connect_error(r, "invalid_argument", "a unary request must be application/json");
    return NULL;
  }
  if (len == 0)
    return json_object();
  json_error_t je;
  json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
  if (!j || !json_is_object(j)) {
    json_decref(j);
    e2b_connect_error(r, "invalid_argument", "the request message is not a JSON object");
    return NULL;
  }
  return j;
}

enum MHD_Result e2b_connect_reply(struct req *r, json_t *msg) {
  if (!msg)
    return e2b_connect_error(r, "internal", "out of memory");
  struct MHD_Response *resp = api_json_response(msg);
  json_decref(msg);
  if (!resp)
    return e2b_connect_error(r, "internal", "out of memory");
  return api_queue(r, 200, resp);
}

enum MHD_Result e2b_stream_reply(struct req *r, struct api_stream *s) {
  struct MHD_Response *resp = api_stream_response(s);
  if (!resp)
    return e2b_connect_error(r, "internal", "out of memory");
  MHD_add_response_header(resp, "Content-Type", "application/connect+json");
  return api_queue(r, 200, resp);
}

static int push_envelope(struct api_stream *s, unsigned flags, json_t *msg) {
  char *text = json_dumps(msg, JSON_COMPACT);
  if (!text)
    return -1;
  size_t n = strlen(text);
  char *buf = malloc(n + 5);
  if (!buf) {
    free(text);
    return -1;
  }
  buf[0] = (char)flags;
  buf[1] = (char)(n >> 24);
  buf[2] = (char)(n >> 16);
  buf[3] = (char)(n >> 8);
  buf[4] = (char)n;
  memcpy(buf + 5, text, n);
  free(text);
  int rc = api_stream_push_raw(s, buf, n + 5);
  free(buf);
  return rc;
}

int e2b_stream_send(struct api_stream *s, json_t *msg) {
  if (!msg)
    return -1;
  return push_envelope(s, 0, msg);
}

int e2b_stream_end(struct api_stream *s, const char *code, const char *message) {
  cleanup_json json_t *end = NULL;
  if (code) {
    char msg[HUSK_ERR_MSG_MAX];
    snprintf(msg, sizeof msg, "%s", message ? message : "");
    husk_sanitize_line(msg);
    json_t *m = json_text(msg, strlen(msg), true, NULL);
    end = json_pack("{s:{s:s, s:o}}", "error", "code", code, "message", m ? m : json_string(""));
  } else {
    end = json_object();
  }
  int rc = end ? push_envelope(s, ENVELOPE_END, end) : -1;
  api_stream_close(s);
  return rc;
}

uint64_t e2b_connect_timeout_ms(struct req *r) {
  const char *h = api_header(r, "Connect-Timeout-Ms");
  if (!h || !*h || strlen(h) > 10)
    return 0;
  uint64_t v = 0;
  for (const char *p = h; *p; p++) {
    if (*p < '0' || *p > '9')
      return 0;
    v = v * 10 + (uint64_t)(*p - '0');
  }
  return v;
}

json_t *e2b_json_int64(int64_t v) {
  char b[24];
  snprintf(b, sizeof b, "%" PRId64, v);
  return json_string(b);
}

bool e2b_json_get_int64(const json_t *v, int64_t *out) {
  if (json_is_integer(v)) {
    *out = json_integer_value(v);
    return true;
  }
  if (!json_is_string(v))
    return false;
  const char *s = json_string_value(v);
  char *end;
  errno = 0;
  long long x = strtoll(s, &end, 10);
  if (errno || end == s || *end)
    return false;
  *out = x;
  return true;
}
