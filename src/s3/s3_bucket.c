/* Bucket-level operations: list/create/head/delete buckets, location,
 * listing objects (V1 and V2), DeleteObjects. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "s3/s3_internal.h"
#include "util/cleanup.h"

static int bucket_cb(void *ctx, const char *name, int64_t created_ms) {
  struct strbuf *b = ctx;
  char d[TIME_RFC3339_SIZE];
  time_rfc3339(created_ms, d);
  strbuf_str(b, "<Bucket>");
  xb_elem(b, "Name", name);
  xb_elem(b, "CreationDate", d);
  strbuf_str(b, "</Bucket>");
  return 0;
}

static void owner(struct strbuf *b, const char *tenant) {
  strbuf_str(b, "<Owner>");
  xb_elem(b, "ID", tenant);
  xb_elem(b, "DisplayName", tenant);
  strbuf_str(b, "</Owner>");
}

enum MHD_Result s3_op_list_buckets(struct s3_req *r) {
  struct strbuf b = {0};
  strbuf_str(&b, S3_XML_HEAD "<ListAllMyBucketsResult xmlns=\"" S3_XMLNS "\">");
  owner(&b, r->tenant);
  strbuf_str(&b, "<Buckets>");
  struct husk_err err;
  if (store_bucket_list(r->srv->cfg.store, r->tenant, bucket_cb, &b, &err) < 0) {
    free(b.p);
    return s3_store_error(r, &err);
  }
  strbuf_str(&b, "</Buckets></ListAllMyBucketsResult>\n");
  return s3_reply_xml(r, 200, &b);
}

enum MHD_Result s3_op_create_bucket(struct s3_req *r) {
  struct husk_err err;
  if (r->xml_len > 0 &&
      s3_parse_check(r->xml, r->xml_len, "CreateBucketConfiguration", &err) < 0)
    return s3_error(r, 400, "MalformedXML", err.msg);
  if (store_bucket_create(r->srv->cfg.store, r->tenant, r->bucket, &err) < 0) {
    /* Creating a bucket one already owns is a success in us-east-1 (and
     * rclone creates before every upload). */
    if (err.code != STORE_EOWNED)
      return s3_store_error(r, &err);
  }
  struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
  if (resp) {
    char loc[80];
    snprintf(loc, sizeof loc, "/%s", r->bucket);
    MHD_add_response_header(resp, "Location", loc);
  }
  return s3_queue(r, 200, resp);
}

enum MHD_Result s3_op_head_bucket(struct s3_req *r) {
  struct husk_err err;
  if (store_bucket_exists(r->srv->cfg.store, r->tenant, r->bucket, &err) < 0)
    return s3_store_error(r, &err);
  struct MHD_Response *resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
  if (resp)
    MHD_add_response_header(resp, "x-amz-bucket-region", store_region(r->srv->cfg.store));
  return s3_queue(r, 200, resp);
}

enum MHD_Result s3_op_delete_bucket(struct s3_req *r) {
  struct husk_err err;
  if (store_bucket_delete(r->srv->cfg.store, r->tenant, r->bucket, &err) < 0)
    return s3_store_error(r, &err);
  return s3_reply_empty(r, 204);
}

enum MHD_Result s3_op_bucket_location(struct s3_req *r) {
  struct husk_err err;
  if (store_bucket_exists(r->srv->cfg.store, r->tenant, r->bucket, &err) < 0)
    return s3_store_error(r, &err);
  const char *region = store_region(r->srv->cfg.store);
  struct strbuf b = {0};
  strbuf_str(&b, S3_XML_HEAD "<LocationConstraint xmlns=\"" S3_XMLNS "\">");
  /* us-east-1 is reported as empty, as S3 does. */
  if (strcmp(region, "us-east-1"))
    xb_esc(&b, region);
  strbuf_str(&b, "</LocationConstraint>\n");
  return s3_reply_xml(r, 200, &b);
}

enum MHD_Result s3_op_bucket_versioning(struct s3_req *r) {
  struct husk_err err;
  if (store_bucket_exists(r->srv->cfg.store, r->tenant, r->bucket, &err) < 0)
    return s3_store_error(r, &err);
  struct strbuf b = {0};
  strbuf_str(&b, S3_XML_HEAD "<VersioningConfiguration xmlns=\"" S3_XMLNS "\"/>\n");
  return s3_reply_xml(r, 200, &b);
}

static int upload_cb(void *ctx, const struct store_upload *u) {
  struct strbuf *b = ctx;
  char d[TIME_RFC3339_SIZE];
  time_rfc3339(u->created_ms, d);
  strbuf_str(b, "<Upload>");
  xb_elem(b, "Key", u->key);
  xb_elem(b, "UploadId", u->id);
  xb_elem(b, "Initiated", d);
  strbuf_str(b, "<StorageClass>STANDARD</StorageClass></Upload>");
  return 0;
}

struct last_upload {
  struct strbuf *b;
  char *key;
  char id[STORE_ID_SIZE];
};
static int upload_cb2(void *ctx, const struct store_upload *u) {
  struct last_upload *l = ctx;
  free(l->key);
  l->key = strdup(u->key);
  snprintf(l->id, sizeof l->id, "%s", u->id);
  return upload_cb(l->b, u);
}

enum MHD_Result s3_op_list_uploads(struct s3_req *r) {
  cleanup_free char *prefix = s3_query(r, "prefix");
  cleanup_free char *km = s3_query(r, "key-marker");
  cleanup_free char *im = s3_query(r, "upload-id-marker");
  cleanup_free char *mu = s3_query(r, "max-uploads");
  int max = 1000;
  if (mu) {
    if (!*mu || strspn(mu, "0123456789") != strlen(mu) || strlen(mu) > 6)
      return s3_error(r, 400, "InvalidArgument", "max-uploads must be an integer");
    max = atoi(mu) < 1 ? 1 : atoi(mu) > 1000 ? 1000 : atoi(mu);
  }
  struct strbuf items = {0};
  struct last_upload lu = {&items, NULL, ""};
  bool trunc = false;
  struct husk_err err;
  if (store_upload_list(r->srv->cfg.store, r->tenant, r->bucket, prefix, km, im, max, upload_cb2,
                        &lu, &trunc, &err) < 0) {
    free(items.p);
    free(lu.key);
    return s3_store_error(r, &err);
  }
  struct strbuf b = {0};
  strbuf_str(&b, S3_XML_HEAD "<ListMultipartUploadsResult xmlns=\"" S3_XMLNS "\">");
  xb_elem(&b, "Bucket", r->bucket);
  xb_elem(&b, "KeyMarker", km ? km : "");
  xb_elem(&b, "UploadIdMarker", im ? im : "");
  if (trunc) {
    xb_elem(&b, "NextKeyMarker", lu.key ? lu.key : "");
    xb_elem(&b, "NextUploadIdMarker", lu.id);
  }
  if (prefix)
    xb_elem(&b, "Prefix", prefix);
  xb_fmt(&b, "<MaxUploads>%d</MaxUploads><IsTruncated>%s</IsTruncated>", max,
         trunc ? "true" : "false");
  if (items.p)
    strbuf_add(&b, items.p, items.n);
  b.oom |= items.oom;
  free(items.p);
  free(lu.key);
  strbuf_str(&b, "</ListMultipartUploadsResult>\n");
  return s3_reply_xml(r, 200, &b);
}

/* ---- listing ---- */

struct list_ctx {
  struct strbuf items;   /* <Contents> */
  struct strbuf prefixes; /* <CommonPrefixes> */
  bool url;
  bool v1;
  const char *tenant;
  unsigned count;
};

static int list_cb(void *ctx, const struct store_entry *e) {
  struct list_ctx *c = ctx;
  c->count++;
  if (e->is_prefix) {
    strbuf_str(&c->prefixes, "<CommonPrefixes>");
    xb_elem_enc(&c->prefixes, "Prefix", e->key, c->url);
    strbuf_str(&c->prefixes, "</CommonPrefixes>");
    return 0;
  }
  char d[TIME_RFC3339_SIZE];
  time_rfc3339(e->mtime_ms, d);
  struct strbuf *b = &c->items;
  strbuf_str(b, "<Contents>");
  xb_elem_enc(b, "Key", e->key, c->url);
  xb_elem(b, "LastModified", d);
  strbuf_str(b, "<ETag>&quot;");
  xb_esc(b, e->etag);
  strbuf_str(b, "&quot;</ETag>");
  xb_fmt(b, "<Size>%llu</Size><StorageClass>STANDARD</StorageClass>", (unsigned long long)e->size);
  if (c->v1)
    owner(b, c->tenant);
  strbuf_str(b, "</Contents>");
  return 0;
}

static char *hex_encode(const char *s) {
  size_t n = strlen(s);
  char *o = malloc(2 * n + 1);
  if (o)
    sigv4_hex((const unsigned char *)s, n, o);
  return o;
}

char *s3_hex_decode(const char *s) {
  size_t n = strlen(s);
  if (n % 2 || n > 4 * STORE_KEY_MAX)
    return NULL;
  char *o = malloc(n / 2 + 1);
  if (!o)
    return NULL;
  for (size_t i = 0; i < n / 2; i++) {
    unsigned v = 0;
    for (int k = 0; k < 2; k++) {
      char c = s[2 * i + (size_t)k];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= (unsigned)(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= (unsigned)(c - 'a' + 10);
      else {
        free(o);
        return NULL;
      }
    }
    if (v == 0) {
      free(o);
      return NULL;
    }
    o[i] = (char)v;
  }
  o[n / 2] = 0;
  return o;
}

enum MHD_Result s3_op_list_objects(struct s3_req *r) {
  cleanup_free char *lt = s3_query(r, "list-type");
  bool v2 = lt && !strcmp(lt, "2");
  if (lt && !v2)
    return s3_error(r, 400, "InvalidArgument", "list-type must be 2");
  cleanup_free char *prefix = s3_query(r, "prefix");
  cleanup_free char *delim = s3_query(r, "delimiter");
  cleanup_free char *mk = s3_query(r, "max-keys");
  cleanup_free char *enc = s3_query(r, "encoding-type");
  cleanup_free char *marker = s3_query(r, "marker");
  cleanup_free char *token = s3_query(r, "continuation-token");
  cleanup_free char *start_after = s3_query(r, "start-after");
  unsigned max_keys = 1000;
  if (mk) {
    if (!*mk || strspn(mk, "0123456789") != strlen(mk) || strlen(mk) > 9)
      return s3_error(r, 400, "InvalidArgument", "max-keys must be a non-negative integer");
    unsigned long v = strtoul(mk, NULL, 10);
    max_keys = v > 1000 ? 1000 : (unsigned)v;
  }
  if (enc && strcmp(enc, "url"))
    return s3_error(r, 400, "InvalidArgument", "Invalid Encoding Method specified in Request");
  bool url = enc != NULL;
  cleanup_free char *after = NULL;
  if (v2) {
    if (token) {
      after = s3_hex_decode(token);
      if (!after)
        return s3_error(r, 400, "InvalidArgument", "The continuation token provided is incorrect");
    } else if (start_after) {
      after = strdup(start_after);
    }
  } else if (marker) {
    after = strdup(marker);
  }
  struct list_ctx c = {.url = url, .v1 = !v2, .tenant = r->tenant};
  /* Every writer's: S3 shows no creator, and filters on none. */
  struct store_list_req lr = {
      .prefix = prefix ? prefix : "", .delimiter = delim, .after = after, .max_keys = max_keys};
  bool truncated = false;
  cleanup_free char *next = NULL;
  struct husk_err err;
  if (store_list(r->srv->cfg.store, r->tenant, r->bucket, &lr, list_cb, &c, &truncated, &next,
                 &err) < 0) {
    free(c.items.p);
    free(c.prefixes.p);
    return s3_store_error(r, &err);
  }
  struct strbuf b = {0};
  strbuf_str(&b, S3_XML_HEAD "<ListBucketResult xmlns=\"" S3_XMLNS "\">");
  xb_elem(&b, "Name", r->bucket);
  xb_elem_enc(&b, "Prefix", prefix ? prefix : "", url);
  if (delim)
    xb_elem_enc(&b, "Delimiter", delim, url);
  xb_fmt(&b, "<MaxKeys>%u</MaxKeys>", max_keys);
  if (url)
    strbuf_str(&b, "<EncodingType>url</EncodingType>");
  xb_fmt(&b, "<IsTruncated>%s</IsTruncated>", truncated ? "true" : "false");
  if (v2) {
    xb_fmt(&b, "<KeyCount>%u</KeyCount>", c.count);
    if (token)
      xb_elem(&b, "ContinuationToken", token);
    if (start_after)
      xb_elem_enc(&b, "StartAfter", start_after, url);
    if (truncated && next) {
      cleanup_free char *t = hex_encode(next);
      xb_elem(&b, "NextContinuationToken", t ? t : "");
    }
  } else {
    xb_elem_enc(&b, "Marker", marker ? marker : "", url);
    if (truncated && next)
      xb_elem_enc(&b, "NextMarker", next, url);
  }
  if (c.items.p)
    strbuf_add(&b, c.items.p, c.items.n);
  if (c.prefixes.p)
    strbuf_add(&b, c.prefixes.p, c.prefixes.n);
  b.oom |= c.items.oom || c.prefixes.oom;
  free(c.items.p);
  free(c.prefixes.p);
  strbuf_str(&b, "</ListBucketResult>\n");
  return s3_reply_xml(r, 200, &b);
}

enum MHD_Result s3_op_delete_objects(struct s3_req *r) {
  if (!r->exp.has_md5 && r->exp.ck == CK_NONE)
    return s3_error(r, 400, "InvalidRequest", "Missing required header for this request: Content-MD5");
  char **keys = NULL;
  size_t n = 0;
  bool quiet = false;
  struct husk_err err;
  if (s3_parse_delete(r->xml, r->xml_len, &keys, &n, &quiet, &err) < 0)
    return s3_error(r, 400, "MalformedXML", err.msg);
  struct store *st = r->srv->cfg.store;
  if (store_bucket_exists(st, r->tenant, r->bucket, &err) < 0) {
    for (size_t i = 0; i < n; i++)
      free(keys[i]);
    free(keys);
    return s3_store_error(r, &err);
  }
  struct strbuf b = {0};
  strbuf_str(&b, S3_XML_HEAD "<DeleteResult xmlns=\"" S3_XMLNS "\">");
  for (size_t i = 0; i < n; i++) {
    int rc = 0;
    if (store_key_check(keys[i], &err) == 0)
      rc = store_object_delete(st, r->tenant, r->bucket, keys[i], &err);
    else
      rc = 0; /* a key that cannot exist is deleted already */
    if (rc < 0) {
      strbuf_str(&b, "<Error>");
      xb_elem(&b, "Key", keys[i]);
      xb_elem(&b, "Code", "InternalError");
      xb_elem(&b, "Message", "We encountered an internal error. Please try again.");
      strbuf_str(&b, "</Error>");
    } else if (!quiet) {
      strbuf_str(&b, "<Deleted>");
      xb_elem(&b, "Key", keys[i]);
      strbuf_str(&b, "</Deleted>");
    }
    free(keys[i]);
  }
  free(keys);
  strbuf_str(&b, "</DeleteResult>\n");
  return s3_reply_xml(r, 200, &b);
}
