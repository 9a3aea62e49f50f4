/* Replies of the S3 front: XML text, S3 errors, dates. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "s3/s3_internal.h"
#include "util/utf8.h"

void xb_fmt(struct strbuf *b, const char *fmt, ...) {
  char *s = NULL;
  va_list ap;
  va_start(ap, fmt);
  int n = vasprintf(&s, fmt, ap);
  va_end(ap);
  if (n < 0) {
    b->oom = true;
    return;
  }
  strbuf_add(b, s, (size_t)n);
  free(s);
}

void xb_esc(struct strbuf *b, const char *s) {
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c >= 0x80) {
      /* Replies must be UTF-8: bytes that are not (from a refused key)
       * become U+FFFD. */
      size_t n = utf8_seq_len((const unsigned char *)s, strnlen(s, 4));
      if (n == 0) {
        strbuf_str(b, "\xEF\xBF\xBD");
      } else {
        strbuf_add(b, s, n);
        s += n - 1;
      }
      continue;
    }
    switch (c) {
    case '<': strbuf_str(b, "&lt;"); break;
    case '>': strbuf_str(b, "&gt;"); break;
    case '&': strbuf_str(b, "&amp;"); break;
    case '"': strbuf_str(b, "&quot;"); break;
    case '\'': strbuf_str(b, "&apos;"); break;
    default:
      if (c < 0x20 || c == 0x7f)
        xb_fmt(b, "&#x%X;", c);
      else
        strbuf_add(b, (const char *)&c, 1);
    }
  }
}

void xb_elem(struct strbuf *b, const char *tag, const char *text) {
  xb_fmt(b, "<%s>", tag);
  xb_esc(b, text ? text : "");
  xb_fmt(b, "</%s>", tag);
}

void xb_elem_enc(struct strbuf *b, const char *tag, const char *text, bool url) {
  if (!url) {
    xb_elem(b, tag, text);
    return;
  }
  char *e = sigv4_uri_encode(text, strlen(text), true);
  if (!e) {
    b->oom = true;
    return;
  }
  xb_elem(b, tag, e);
  free(e);
}

void s3_http_date(int64_t ms, char out[40]) {
  time_t t = (time_t)(ms / 1000);
  struct tm tm;
  gmtime_r(&t, &tm);
  static const char *const days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static const char *const mons[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                     "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  snprintf(out, 40, "%s, %02d %s %04d %02d:%02d:%02d GMT", days[tm.tm_wday], tm.tm_mday,
           mons[tm.tm_mon], tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

void s3_add_common(struct s3_req *r, struct MHD_Response *resp) {
  MHD_add_response_header(resp, "x-amz-request-id", r->request_id);
  MHD_add_response_header(resp, "Server", "husk");
}

static bool has_body(struct s3_req *r) {
  const char *cl = s3_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
  const char *te = s3_header(r, MHD_HTTP_HEADER_TRANSFER_ENCODING);
  return (cl && strtoull(cl, NULL, 10) > 0) || te;
}

static bool expects_100(struct s3_req *r) {
  const char *ex = s3_header(r, MHD_HTTP_HEADER_EXPECT);
  return ex && strcasestr(ex, "100-continue");
}

/* A reply to a request whose body is still on its way is held until the
 * body is read (and dropped, up to S3_DRAIN_MAX): a socket closed with
 * unread data is reset and the client would never see the reply.  With
 * "Expect: 100-continue" a refusal at the start goes at once instead of
 * the 100. */
enum MHD_Result s3_queue(struct s3_req *r, unsigned status, struct MHD_Response *resp) {
  if (!resp)
    return MHD_NO;
  s3_add_common(r, resp);
  if (r->close_after)
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
  r->responded = true;
  r->status = (int)status;
  s3_record(r);
  if (!r->body_done && has_body(r) && !(r->in_first_call && expects_100(r))) {
    if (r->pending)
      MHD_destroy_response(r->pending);
    r->pending = resp;
    return MHD_YES;
  }
  enum MHD_Result ret = MHD_queue_response(r->conn, status, resp);
  MHD_destroy_response(resp);
  return ret;
}

enum MHD_Result s3_reply_xml(struct s3_req *r, unsigned status, struct strbuf *b) {
  if (b->oom || !b->p) {
    free(b->p);
    return s3_error(r, 500, "InternalError", "out of memory");
  }
  struct MHD_Response *resp = MHD_create_response_from_buffer(b->n, b->p, MHD_RESPMEM_MUST_FREE);
  if (!resp) {
    free(b->p);
    return MHD_NO;
  }
  b->p = NULL;
  MHD_add_response_header(resp, "Content-Type", "application/xml");
  return s3_queue(r, status, resp);
}

enum MHD_Result s3_reply_empty(struct s3_req *r, unsigned status) {
  struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
  return s3_queue(r, status, resp);
}

enum MHD_Result s3_error(struct s3_req *r, unsigned status, const char *code, const char *msg) {
  struct strbuf b = {0};
  strbuf_str(&b, S3_XML_HEAD "<Error>");
  xb_elem(&b, "Code", code);
  xb_elem(&b, "Message", msg);
  if (r->key)
    xb_elem(&b, "Key", r->key);
  if (r->bucket)
    xb_elem(&b, "BucketName", r->bucket);
  xb_elem(&b, "Resource", r->path_raw ? r->path_raw : "/");
  xb_elem(&b, "RequestId", r->request_id);
  strbuf_str(&b, "</Error>\n");
  return s3_reply_xml(r, status, &b);
}

enum MHD_Result s3_store_error(struct s3_req *r, const struct husk_err *err) {
  const char *m = err->msg;
  switch (err->code) {
  case STORE_ENOBUCKET: return s3_error(r, 404, "NoSuchBucket", m);
  case STORE_ENOKEY: return s3_error(r, 404, "NoSuchKey", m);
  case STORE_ENOUPLOAD: return s3_error(r, 404, "NoSuchUpload", m);
  case STORE_EOWNED: return s3_error(r, 409, "BucketAlreadyOwnedByYou", m);
  case STORE_ENOTEMPTY: return s3_error(r, 409, "BucketNotEmpty", m);
  case STORE_EBADNAME: return s3_error(r, 400, "InvalidBucketName", m);
  case STORE_EBADKEY:
    return s3_error(r, 400, strstr(m, "longer") ? "KeyTooLongError" : "InvalidArgument", m);
  case STORE_EBADDIGEST: return s3_error(r, 400, "BadDigest", m);
  case STORE_ESHA256: return s3_error(r, 400, "XAmzContentSHA256Mismatch", m);
  case STORE_EINCOMPLETE: return s3_error(r, 400, "IncompleteBody", m);
  case STORE_ETOOLARGE: return s3_error(r, 400, "EntityTooLarge", m);
  case STORE_ETOOSMALL: return s3_error(r, 400, "EntityTooSmall", m);
  case STORE_EBADPART: return s3_error(r, 400, "InvalidPart", m);
  case STORE_EPARTORDER: return s3_error(r, 400, "InvalidPartOrder", m);
  case STORE_ENOACCESSKEY: return s3_error(r, 403, "InvalidAccessKeyId", m);
  case STORE_EBADCHECKSUM: return s3_error(r, 400, "InvalidRequest", m);
  case STORE_EQUOTA: return s3_error(r, 403, "QuotaExceeded", m);
  case STORE_ENOLINK: return s3_error(r, 404, "NoSuchKey", m);
  case EINVAL: return s3_error(r, 400, "InvalidArgument", m);
  case EBADMSG: return s3_error(r, 400, "IncompleteBody", m);
  case EACCES: return s3_error(r, 403, "SignatureDoesNotMatch", m);
  case ENOSPC:
  case EDQUOT: return s3_error(r, 507, "InsufficientStorage", m);
  case STORE_ESPARSE: return s3_error(r, 400, "EntityTooLarge", m);
  case EBUSY:
  case EAGAIN: return s3_error(r, 503, "SlowDown", "please retry");
  default:
    s3_log(r->srv, "internal error: %s", m);
    return s3_error(r, 500, "InternalError", "We encountered an internal error. Please try again.");
  }
}
