/* Object operations: Put, Copy, Get/Head (ranges, conditionals), Delete,
 * and the multipart ones. */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "s3/s3_internal.h"
#include "util/cleanup.h"

/* ---- metadata ---- */

struct meta_ctx {
  json_t *o;
  size_t bytes;
  bool bad;
  bool too_big;
};

static enum MHD_Result meta_cb(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *value) {
  struct meta_ctx *m = cls;
  (void)kind;
  if (strncasecmp(key, "x-amz-meta-", 11) || !key[11])
    return MHD_YES;
  char name[256];
  size_t n = strlen(key + 11);
  if (n >= sizeof name) {
    m->too_big = true;
    return MHD_NO;
  }
  for (size_t i = 0; i <= n; i++) {
    char c = key[11 + i];
    name[i] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
  }
  const char *v = value ? value : "";
  m->bytes += n + strlen(v);
  if (m->bytes > STORE_META_MAX) {
    m->too_big = true;
    return MHD_NO;
  }
  json_t *s = json_string(v);
  if (!s) {
    m->bad = true;
    return MHD_NO;
  }
  json_object_set_new(m->o, name, s);
  return MHD_YES;
}

char *s3_request_meta(struct s3_req *r) {
  struct meta_ctx m = {.o = json_object()};
  if (!m.o) {
    husk_fail(&r->err, ENOMEM, "metadata");
    return NULL;
  }
  MHD_get_connection_values(r->conn, MHD_HEADER_KIND, meta_cb, &m);
  char *out = NULL;
  if (m.too_big)
    husk_fail(&r->err, E2BIG, "Your metadata headers exceed the maximum allowed metadata size");
  else if (m.bad)
    husk_fail(&r->err, EINVAL, "metadata values must be valid UTF-8");
  else if (!(out = json_dumps(m.o, JSON_COMPACT | JSON_SORT_KEYS)))
    husk_fail(&r->err, ENOMEM, "metadata");
  json_decref(m.o);
  return out;
}

static enum MHD_Result meta_error(struct s3_req *r) {
  if (r->err.code == E2BIG)
    return s3_error(r, 400, "MetadataTooLarge", r->err.msg);
  return s3_store_error(r, &r->err);
}

static const char *content_type(struct s3_req *r) {
  const char *ct = s3_header(r, "content-type");
  return ct && strlen(ct) < STORE_CTYPE_MAX ? ct : NULL;
}

static void add_etag(struct MHD_Response *resp, const char *etag) {
  char q[STORE_ETAG_SIZE + 4];
  snprintf(q, sizeof q, "\"%s\"", etag);
  MHD_add_response_header(resp, "ETag", q);
}

void s3_created_by(const struct s3_req *r, char out[STORE_CREATED_BY_SIZE]) {
  /* r->key_id was looked up (store_key_lookup): an id of the shape
   * store_key_mint makes, which state_check_created_by takes. */
  if (r->internal_key || !r->key_id[0] ||
      snprintf(out, STORE_CREATED_BY_SIZE, "s3key:%s", r->key_id) >= STORE_CREATED_BY_SIZE)
    out[0] = '\0';
}

/* ---- PutObject ---- */

enum MHD_Result s3_op_put_object(struct s3_req *r) {
  cleanup_free char *meta = s3_request_meta(r);
  if (!meta)
    return meta_error(r);
  const char *ct = content_type(r);
  if (s3_header(r, "content-type") && !ct)
    return s3_error(r, 400, "InvalidArgument", "Content-Type is too long");
  char etag[STORE_ETAG_SIZE], ck[64];
  if (store_writer_finish(r->w, &r->exp, etag, ck, &r->err) < 0)
    return s3_store_error(r, &r->err);
  struct store_writer *w = r->w;
  r->w = NULL;
  struct store_object o;
  char creator[STORE_CREATED_BY_SIZE];
  s3_created_by(r, creator);
  if (store_put_commit(w, r->tenant, r->bucket, r->key, ct ? ct : "", meta, creator, &o, &r->err) <
      0)
    return s3_store_error(r, &r->err);
  struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
  if (resp) {
    add_etag(resp, o.etag);
    if (r->exp.ck != CK_NONE) {
      char name[48];
      snprintf(name, sizeof name, "x-amz-checksum-%s", store_checksum_name(r->exp.ck));
      MHD_add_response_header(resp, name, ck);
    }
  }
  store_object_free(&o);
  return s3_queue(r, 200, resp);
}

/* ---- CopyObject ---- */

enum MHD_Result s3_op_copy_object(struct s3_req *r) {
  const char *src = s3_header(r, "x-amz-copy-source");
  size_t sl = strlen(src);
  const char *q = strchr(src, '?');
  if (q)
    sl = (size_t)(q - src); /* ?versionId=: there is one version */
  size_t dl;
  cleanup_free char *dec = sigv4_uri_decode(src, sl, &dl);
  if (!dec)
    return s3_error(r, 400, "InvalidArgument", "Copy Source must mention the source bucket and key: sourcebucket/sourcekey");
  char *p = dec[0] == '/' ? dec + 1 : dec;
  char *slash = strchr(p, '/');
  if (!slash || !slash[1])
    return s3_error(r, 400, "InvalidArgument", "Copy Source must mention the source bucket and key: sourcebucket/sourcekey");
  *slash = 0;
  const char *sb = p, *sk = slash + 1;
  if (!store_bucket_name_ok(sb))
    return s3_error(r, 404, "NoSuchBucket", "The specified bucket does not exist");
  const char *dir = s3_header(r, "x-amz-metadata-directive");
  bool replace = dir && !strcasecmp(dir, "REPLACE");
  if (dir && !replace && strcasecmp(dir, "COPY"))
    return s3_error(r, 400, "InvalidArgument", "Unknown metadata directive.");
  if (!replace && !strcmp(sb, r->bucket) && !strcmp(sk, r->key))
    return s3_error(r, 400, "InvalidRequest",
                    "This copy request is illegal because it is trying to copy an object to itself "
                    "without changing the object's metadata, storage class, website redirect "
                    "location or encryption attributes.");
  cleanup_free char *meta = NULL;
  if (replace && !(meta = s3_request_meta(r)))
    return meta_error(r);
  struct store_object o;
  struct husk_err err;
  char creator[STORE_CREATED_BY_SIZE];
  s3_created_by(r, creator);
  if (store_object_copy(r->srv->cfg.store, r->tenant, sb, sk, r->bucket, r->key,
                        replace ? (content_type(r) ? content_type(r) : "") : NULL, meta, creator,
                        &o, &err) < 0)
    return s3_store_error(r, &err);
  char d[TIME_RFC3339_SIZE];
  time_rfc3339(o.mtime_ms, d);
  struct strbuf b = {0};
  strbuf_str(&b, S3_XML_HEAD "<CopyObjectResult xmlns=\"" S3_XMLNS "\">");
  xb_elem(&b, "LastModified", d);
  strbuf_str(&b, "<ETag>&quot;");
  xb_esc(&b, o.etag);
  strbuf_str(&b, "&quot;</ETag></CopyObjectResult>\n");
  store_object_free(&o);
  return s3_reply_xml(r, 200, &b);
}

/* ---- GetObject / HeadObject ---- */

/* Does the If-Match / If-None-Match list name this ETag? */
bool s3_etag_listed(const char *list, const char *etag) {
  const char *p = list;
  while (*p) {
    while (*p == ' ' || *p == ',')
      p++;
    if (!*p)
      break;
    const char *e = strchrnul(p, ',');
    const char *a = p, *z = e;
    while (z > a && z[-1] == ' ')
      z--;
    if (z - a == 1 && *a == '*')
      return true;
    if (z - a >= 2 && !strncmp(a, "W/", 2))
      a += 2;
    if (z - a >= 2 && *a == '"' && z[-1] == '"') {
      a++;
      z--;
    }
    if ((size_t)(z - a) == strlen(etag) && !strncmp(a, etag, (size_t)(z - a)))
      return true;
    p = e;
  }
  return false;
}

bool s3_parse_http_date(const char *s, int64_t *ms) {
  struct tm tm = {0};
  const char *e = strptime(s, "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (!e || *e)
    return false;
  *ms = (int64_t)timegm(&tm) * 1000;
  return true;
}

/* "bytes=a-b" | "bytes=a-" | "bytes=-n"; 1 ok, 0 ignore (not a single
 * byte range), -1 unsatisfiable. */
int s3_parse_range(const char *h, uint64_t size, uint64_t *start, uint64_t *len) {
  if (strncmp(h, "bytes=", 6))
    return 0;
  const char *p = h + 6;
  if (strchr(p, ','))
    return 0;
  const char *dash = strchr(p, '-');
  if (!dash)
    return 0;
  size_t al = (size_t)(dash - p), bl = strlen(dash + 1);
  if ((al && strspn(p, "0123456789") != al) || (bl && strspn(dash + 1, "0123456789") != bl) ||
      (!al && !bl) || al > 19 || bl > 19)
    return 0;
  if (!al) {
    uint64_t n = strtoull(dash + 1, NULL, 10);
    if (n == 0 || size == 0)
      return -1;
    if (n > size)
      n = size;
    *start = size - n;
    *len = n;
    return 1;
  }
  uint64_t a = strtoull(p, NULL, 10);
  if (a >= size)
    return -1;
  uint64_t b = bl ? strtoull(dash + 1, NULL, 10) : size - 1;
  if (b < a)
    return 0;
  if (b >= size)
    b = size - 1;
  *start = a;
  *len = b - a + 1;
  return 1;
}

static void add_meta_headers(struct MHD_Response *resp, const char *meta_json) {
  json_t *o = json_loads(meta_json, 0, NULL);
  if (!o)
    return;
  const char *k;
  json_t *v;
  json_object_foreach(o, k, v) {
    if (!json_is_string(v))
      continue;
    char name[300];
    snprintf(name, sizeof name, "x-amz-meta-%s", k);
    MHD_add_response_header(resp, name, json_string_value(v));
  }
  json_decref(o);
}

static ssize_t no_body(void *cls, uint64_t pos, char *buf, size_t max) {
  (void)cls;
  (void)pos;
  (void)buf;
  (void)max;
  return MHD_CONTENT_READER_END_WITH_ERROR;
}

enum MHD_Result s3_op_get_object(struct s3_req *r) {
  struct store_object o;
  int fd = -1;
  struct husk_err err;
  bool head = r->op == OP_HEAD_OBJECT;
  if (store_object_get(r->srv->cfg.store, r->tenant, r->bucket, r->key, &o, &fd, &err) < 0)
    return s3_store_error(r, &err);
  char lm[40];
  s3_http_date(o.mtime_ms, lm);
  int64_t mt = o.mtime_ms / 1000 * 1000;
  int64_t t;
  const char *im = s3_header(r, "if-match"), *inm = s3_header(r, "if-none-match");
  const char *ims = s3_header(r, "if-modified-since"), *ius = s3_header(r, "if-unmodified-since");
  unsigned cond = 0;
  if (im && !s3_etag_listed(im, o.etag))
    cond = 412;
  else if (!im && ius && s3_parse_http_date(ius, &t) && mt > t)
    cond = 412;
  else if (inm && s3_etag_listed(inm, o.etag))
    cond = 304;
  else if (!inm && ims && s3_parse_http_date(ims, &t) && mt <= t)
    cond = 304;
  if (cond == 412) {
    close_quiet(fd);
    store_object_free(&o);
    return s3_error(r, 412, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold");
  }
  uint64_t start = 0, len = o.size;
  int range = 0;
  const char *rh = s3_header(r, "range");
  if (rh && cond == 0) {
    range = s3_parse_range(rh, o.size, &start, &len);
    if (range < 0) {
      close_quiet(fd);
      char cr[64];
      snprintf(cr, sizeof cr, "bytes */%llu", (unsigned long long)o.size);
      store_object_free(&o);
      struct strbuf b = {0};
      strbuf_str(&b, S3_XML_HEAD "<Error><Code>InvalidRange</Code><Message>The requested range is not satisfiable</Message>");
      xb_elem(&b, "RequestId", r->request_id);
      strbuf_str(&b, "</Error>\n");
      struct MHD_Response *resp = MHD_create_response_from_buffer(b.n, b.p, MHD_RESPMEM_MUST_FREE);
      if (!resp) {
        free(b.p);
        return MHD_NO;
      }
      MHD_add_response_header(resp, "Content-Type", "application/xml");
      MHD_add_response_header(resp, "Content-Range", cr);
      return s3_queue(r, 416, resp);
    }
  }
  struct MHD_Response *resp;
  if (cond == 304 || len == 0 || head) {
    close_quiet(fd);
    fd = -1;
    resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (head && cond != 304 && len > 0) {
      /* HEAD carries the length a GET would have: a response of that size
       * whose reader is never called (libmicrohttpd sends no body for
       * HEAD). */
      if (resp)
        MHD_destroy_response(resp);
      resp = MHD_create_response_from_callback(len, 4096, no_body, NULL, NULL);
    }
  } else {
    resp = MHD_create_response_from_fd_at_offset64(len, fd, start);
    if (!resp)
      close_quiet(fd);
  }
  if (!resp) {
    store_object_free(&o);
    return MHD_NO;
  }
  add_etag(resp, o.etag);
  MHD_add_response_header(resp, "Last-Modified", lm);
  if (cond != 304) {
    MHD_add_response_header(resp, "Accept-Ranges", "bytes");
    /* Overrides a signed request may ask for (presigned links use
     * response-content-disposition for the download name). */
    static const char *const ov[][2] = {{"response-content-type", "Content-Type"},
                                        {"response-content-disposition", "Content-Disposition"},
                                        {"response-content-encoding", "Content-Encoding"},
                                        {"response-content-language", "Content-Language"},
                                        {"response-cache-control", "Cache-Control"},
                                        {"response-expires", "Expires"}};
    bool ct_set = false;
    for (size_t i = 0; i < sizeof ov / sizeof ov[0]; i++) {
      cleanup_free char *v = s3_query(r, ov[i][0]);
      if (v && *v && !strpbrk(v, "\r\n")) {
        MHD_add_response_header(resp, ov[i][1], v);
        if (i == 0)
          ct_set = true;
      }
    }
    if (!ct_set)
      MHD_add_response_header(resp, "Content-Type",
                              o.content_type[0] ? o.content_type : "binary/octet-stream");
    add_meta_headers(resp, o.meta_json);
    if (range == 1) {
      char cr[96];
      snprintf(cr, sizeof cr, "bytes %llu-%llu/%llu", (unsigned long long)start,
               (unsigned long long)(start + len - 1), (unsigned long long)o.size);
      MHD_add_response_header(resp, "Content-Range", cr);
    }
  }
  store_object_free(&o);
  return s3_queue(r, cond == 304 ? 304 : range == 1 ? 206 : 200, resp);
}

/* ---- DeleteObject ---- */

enum MHD_Result s3_op_delete_object(struct s3_req *r) {
  struct husk_err err;
  if (store_key_check(r->key, &err) == 0 &&
      store_object_delete(r->srv->cfg.store, r->tenant, r->bucket, r->key, &err) < 0)
    return s3_store_error(r, &err);
  if (err.code == STORE_EBADKEY && store_bucket_exists(r->srv->cfg.store, r->tenant, r->bucket, &err) < 0)
    return s3_store_error(r, &err);
  return s3_reply_empty(r, 204);
}

/* ---- multipart ---- */

enum MHD_Result s3_op_create_upload(struct s3_req *r) {
  cleanup_free char *meta = s3_request_meta(r);
  if (!meta)
    return meta_error(r);
  const char *ct = content_type(r);
  char id[STORE_ID_SIZE];
  struct husk_err err;
  if (store_upload_create(r->srv->cfg.store, r->tenant, r->bucket, r->key, ct ? ct : "", meta, id,
                          &err) < 0)
    return s3_store_error(r, &err);
  struct strbuf b = {0};
  strbuf_str(&b, S3_XML_HEAD "<InitiateMultipartUploadResult xmlns=\"" S3_XMLNS "\">");
  xb_elem(&b, "Bucket", r->bucket);
  xb_elem(&b, "Key", r->key);
  xb_elem(&b, "UploadId", id);
  strbuf_str(&b, "</InitiateMultipartUploadResult>\n");
  return s3_reply_xml(r, 200, &b);
}

enum MHD_Result s3_op_upload_part(struct s3_req *r) {
  char etag[STORE_ETAG_SIZE], ck[64];
  if (store_writer_finish(r->w, &r->exp, etag, ck, &r->err) < 0)
    return s3_store_error(r, &r->err);
  struct store_writer *w = r->w;
  r->w = NULL;
  if (store_part_commit(w, r->tenant, r->bucket, r->key, r->upload_id, r->part_num, &r->err) < 0)
    return s3_store_error(r, &r->err);
  struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
  if (resp) {
    add_etag(resp, etag);
    if (r->exp.ck != CK_NONE) {
      char name[48];
      snprintf(name, sizeof name, "x-amz-checksum-%s", store_checksum_name(r->exp.ck));
      MHD_add_response_header(resp, name, ck);
    }
  }
  return s3_queue(r, 200, resp);
}

static bool upload_id_arg(struct s3_req *r, char out[STORE_ID_SIZE]) {
  cleanup_free char *u = s3_query(r, "uploadId");
  if (!u || !*u || strlen(u) >= STORE_ID_SIZE)
    return false;
  snprintf(out, STORE_ID_SIZE, "%s", u);
  return true;
}

enum MHD_Result s3_op_complete_upload(struct s3_req *r) {
  char id[STORE_ID_SIZE];
  struct husk_err err;
  if (!upload_id_arg(r, id))
    return s3_error(r, 404, "NoSuchUpload", "The specified upload does not exist.");
  if (store_upload_check(r->srv->cfg.store, r->tenant, r->bucket, r->key, id, &err) < 0)
    return s3_store_error(r, &err);
  struct store_part *parts = NULL;
  size_t n = 0;
  if (s3_parse_complete(r->xml, r->xml_len, &parts, &n, &err) < 0)
    return s3_error(r, 400, "MalformedXML", err.msg);
  struct store_object o;
  char creator[STORE_CREATED_BY_SIZE];
  s3_created_by(r, creator);
  int rc = store_upload_complete(r->srv->cfg.store, r->tenant, r->bucket, r->key, id, parts, n,
                                 creator, &o, &err);
  free(parts);
  if (rc < 0)
    return s3_store_error(r, &err);
  struct strbuf b = {0};
  strbuf_str(&b, S3_XML_HEAD "<CompleteMultipartUploadResult xmlns=\"" S3_XMLNS "\">");
  char *ek = sigv4_uri_encode(r->key, strlen(r->key), true);
  xb_fmt(&b, "<Location>/%s/", r->bucket);
  xb_esc(&b, ek ? ek : "");
  free(ek);
  strbuf_str(&b, "</Location>");
  xb_elem(&b, "Bucket", r->bucket);
  xb_elem(&b, "Key", r->key);
  strbuf_str(&b, "<ETag>&quot;");
  xb_esc(&b, o.etag);
  strbuf_str(&b, "&quot;</ETag></CompleteMultipartUploadResult>\n");
  store_object_free(&o);
  return s3_reply_xml(r, 200, &b);
}

enum MHD_Result s3_op_abort_upload(struct s3_req *r) {
  char id[STORE_ID_SIZE];
  struct husk_err err;
  if (!upload_id_arg(r, id))
    return s3_error(r, 404, "NoSuchUpload", "The specified upload does not exist.");
  if (store_upload_abort(r->srv->cfg.store, r->tenant, r->bucket, r->key, id, &err) < 0)
    return s3_store_error(r, &err);
  return s3_reply_empty(r, 204);
}

static int part_cb(void *ctx, const struct store_part *p) {
  struct strbuf *b = ctx;
  char d[TIME_RFC3339_SIZE];
  time_rfc3339(p->mtime_ms, d);
  xb_fmt(b, "<Part><PartNumber>%d</PartNumber>", p->num);
  xb_elem(b, "LastModified", d);
  strbuf_str(b, "<ETag>&quot;");
  xb_esc(b, p->etag);
  xb_fmt(b, "&quot;</ETag><Size>%llu</Size></Part>", (unsigned long long)p->size);
  return 0;
}

struct last_part {
  struct strbuf *b;
  int last;
};
static int part_cb2(void *ctx, const struct store_part *p) {
  struct last_part *l = ctx;
  l->last = p->num;
  return part_cb(l->b, p);
}

enum MHD_Result s3_op_list_parts(struct s3_req *r) {
  char id[STORE_ID_SIZE];
  if (!upload_id_arg(r, id))
    return s3_error(r, 404, "NoSuchUpload", "The specified upload does not exist.");
  cleanup_free char *mk = s3_query(r, "part-number-marker");
  cleanup_free char *mp = s3_query(r, "max-parts");
  int after = 0, max = 1000;
  if (mk && (!*mk || strspn(mk, "0123456789") != strlen(mk) || strlen(mk) > 5))
    return s3_error(r, 400, "InvalidArgument", "part-number-marker must be an integer");
  if (mp && (!*mp || strspn(mp, "0123456789") != strlen(mp) || strlen(mp) > 5))
    return s3_error(r, 400, "InvalidArgument", "max-parts must be an integer");
  if (mk)
    after = atoi(mk);
  if (mp)
    max = atoi(mp) < 1 ? 1 : atoi(mp) > 1000 ? 1000 : atoi(mp);
  struct strbuf items = {0};
  struct last_part lp = {&items, 0};
  bool trunc = false;
  struct husk_err err;
  if (store_upload_parts(r->srv->cfg.store, r->tenant, r->bucket, r->key, id, after, max, part_cb2,
                         &lp, &trunc, &err) < 0) {
    free(items.p);
    return s3_store_error(r, &err);
  }
  struct strbuf b = {0};
  strbuf_str(&b, S3_XML_HEAD "<ListPartsResult xmlns=\"" S3_XMLNS "\">");
  xb_elem(&b, "Bucket", r->bucket);
  xb_elem(&b, "Key", r->key);
  xb_elem(&b, "UploadId", id);
  xb_fmt(&b, "<PartNumberMarker>%d</PartNumberMarker><NextPartNumberMarker>%d</NextPartNumberMarker>"
             "<MaxParts>%d</MaxParts><IsTruncated>%s</IsTruncated><StorageClass>STANDARD</StorageClass>",
         after, lp.last, max, trunc ? "true" : "false");
  if (items.p)
    strbuf_add(&b, items.p, items.n);
  b.oom |= items.oom;
  free(items.p);
  strbuf_str(&b, "</ListPartsResult>\n");
  return s3_reply_xml(r, 200, &b);
}
