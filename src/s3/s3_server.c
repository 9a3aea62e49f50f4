/* The S3 listener: libmicrohttpd setup and the life of one request
 * (raw URI -> bucket/key -> SigV4 -> operation -> body -> handler). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "s3/s3_internal.h"
#include "state/state.h"
#include "util/base64.h"
#include "util/cleanup.h"
#include "util/clock.h"
#include "util/id.h"

void s3_log(struct s3_server *s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  husk_vlog(s->cfg.log, s->cfg.log_ctx, fmt, ap);
  va_end(ap);
}

const char *s3_header(struct s3_req *r, const char *name) {
  return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

char *s3_query(struct s3_req *r, const char *name) {
  if (!r->query_raw)
    return NULL;
  size_t nl = strlen(name);
  const char *p = r->query_raw;
  while (*p) {
    const char *e = strchrnul(p, '&');
    const char *eq = memchr(p, '=', (size_t)(e - p));
    const char *ne = eq ? eq : e;
    size_t dl;
    char *dn = sigv4_uri_decode(p, (size_t)(ne - p), &dl);
    bool match = dn && dl == nl && !memcmp(dn, name, nl);
    free(dn);
    if (match)
      return eq ? sigv4_uri_decode(eq + 1, (size_t)(e - eq - 1), NULL) : strdup("");
    p = *e ? e + 1 : e;
  }
  return NULL;
}

bool s3_has_query(struct s3_req *r, const char *name) {
  char *v = s3_query(r, name);
  free(v);
  return v != NULL;
}

/* ---- headers for the verifier ---- */

struct hdrs {
  struct sigv4_header h[S3_MAX_HEADERS];
  size_t n;
  bool too_many;
};

static enum MHD_Result collect(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *value) {
  struct hdrs *h = cls;
  (void)kind;
  if (h->n >= S3_MAX_HEADERS) {
    h->too_many = true;
    return MHD_NO;
  }
  h->h[h->n].name = key;
  h->h[h->n].value = value ? value : "";
  h->n++;
  return MHD_YES;
}

/* ---- authentication ---- */

static enum MHD_Result auth_fail(struct s3_req *r, enum sigv4_result res, const char *why) {
  switch (res) {
  case SIGV4_MISSING: return s3_error(r, 403, "AccessDenied", "Access Denied: sign the request with AWS Signature Version 4");
  case SIGV4_MALFORMED:
    return s3_error(r, 400, r->auth.presigned || !s3_header(r, "authorization")
                                ? "AuthorizationQueryParametersError"
                                : "AuthorizationHeaderMalformed",
                    why);
  case SIGV4_UNSUPPORTED: return s3_error(r, 400, "InvalidRequest", why);
  case SIGV4_MISMATCH: return s3_error(r, 403, "SignatureDoesNotMatch", why);
  case SIGV4_SKEWED: return s3_error(r, 403, "RequestTimeTooSkewed", why);
  case SIGV4_EXPIRED:
  case SIGV4_NOT_YET: return s3_error(r, 403, "AccessDenied", why);
  case SIGV4_OK: break;
  }
  return s3_error(r, 500, "InternalError", "auth");
}

static enum MHD_Result too_many(struct s3_req *r) {
  return s3_error(r, 429, "SlowDown", "Too many refused link fetches from this address: retry later");
}

/* A link fetch about to be refused: false when the source's budget of
 * refusals is spent (reply 429 instead, nothing written); else it is
 * counted, on link `id` when known. */
static bool refusal_counted(struct s3_req *r, const char *id) {
  if (!s3_rate_take(r->srv->rate, r->source, mono_ms()))
    return false;
  struct husk_err err;
  if (store_link_denied(r->srv->cfg.store, id, &err) < 0)
    s3_log(r->srv, "cannot count a refused link fetch: %s", err.msg);
  return true;
}

static enum MHD_Result authenticate(struct s3_req *r, bool *ok) {
  *ok = false;
  /* A request naming a link is a link fetch: anyone holding (or
   * guessing) a URL may send one, so its refusals are budgeted.  The
   * budget is consulted only once the fetch is known to be refused: a
   * valid fetch (its signature checked first, one HMAC) is never turned
   * away because others, from the same address or not, sent bad ones.
   * A refusal past the budget costs the parse, one key lookup and one
   * HMAC, and writes nothing. */
  cleanup_free char *lid = s3_query(r, "x-husk-link");
  bool link_fetch = lid != NULL;
  struct hdrs h = {0};
  MHD_get_connection_values(r->conn, MHD_HEADER_KIND, collect, &h);
  if (h.too_many)
    return s3_error(r, 400, "InvalidRequest", "too many headers");
  struct sigv4_request rq = {r->method, r->path_raw, r->query_raw, h.h, h.n};
  char why[256];
  enum sigv4_result res = sigv4_parse(&rq, &r->auth, why, sizeof why);
  if (res == SIGV4_OK && strcmp(r->auth.service, "s3") != 0) {
    res = SIGV4_MALFORMED;
    snprintf(why, sizeof why, "the credential's service must be s3");
  }
  struct store *st = r->srv->cfg.store;
  const char *region = store_region(st);
  if (res == SIGV4_OK && strcmp(r->auth.region, region) && strcmp(r->auth.region, "us-east-1") &&
      strcmp(r->auth.region, "auto")) {
    res = SIGV4_MALFORMED;
    snprintf(why, sizeof why,
             "The authorization header is malformed; the region is wrong; expecting '%s'", region);
  }
  if (res != SIGV4_OK) {
    if (link_fetch && !refusal_counted(r, NULL))
      return too_many(r);
    return auth_fail(r, res, why);
  }
  char secret[STORE_SECRET_SIZE];
  struct husk_err err;
  if (store_key_lookup(st, r->auth.key_id, r->tenant, secret, &r->internal_key, &err) < 0) {
    r->tenant[0] = 0;
    if (link_fetch && !refusal_counted(r, NULL))
      return too_many(r);
    return s3_store_error(r, &err);
  }
  snprintf(r->key_id, sizeof r->key_id, "%s", r->auth.key_id);
  res = sigv4_verify(&rq, &r->auth, secret, time(NULL), r->signing_key, why, sizeof why);
  OPENSSL_cleanse(secret, sizeof secret);
  /* The link is counted on only if it is the tenant's whose key the
   * request claims (else the global counter). */
  bool live = false;
  bool owned = link_fetch && strlen(lid) < sizeof r->link_id &&
               store_link_owned(st, lid, r->tenant, &live);
  if (res != SIGV4_OK) {
    if (link_fetch && !refusal_counted(r, owned ? lid : NULL))
      return too_many(r);
    return auth_fail(r, res, why);
  }
  /* A link key works only through a registered, unrevoked link. */
  if (r->internal_key && (!owned || !live)) {
    if (!refusal_counted(r, owned ? lid : NULL))
      return too_many(r);
    return s3_error(r, 403, "AccessDenied", "This link has been revoked or does not exist");
  }
  /* A valid fetch of the tenant's link: recorded with its reply. */
  if (owned)
    snprintf(r->link_id, sizeof r->link_id, "%s", lid);
  *ok = true;
  return MHD_YES;
}

/* Count an authenticated request in its tenant's load, or refuse it past
 * the tenant's bound: one tenant's slow uploads and downloads must leave
 * connection threads for the others. */
static enum MHD_Result admit(struct s3_req *r, bool *ok) {
  struct s3_server *s = r->srv;
  *ok = false;
  unsigned max_req = s->tenant_max_requests;
  if (s->cfg.state) {
    struct state_tenant t = {0};
    struct husk_err err = {0};
    if (state_tenant_get(s->cfg.state, r->tenant, &t, &err) == 0)
      max_req = tenant_load_bound(t.max_requests, s->tenant_max_requests);
    else if (err.code != ENOENT) {
      /* Fail closed: without the tenant's bound the request is not run. */
      s3_log(s, "cannot read a tenant's bounds: %s", err.msg);
      return s3_error(r, 500, "InternalError",
                      "We encountered an internal error. Please try again.");
    }
  }
  unsigned reqs, execs;
  enum tenant_admit res =
      tenant_load_acquire(&s->front.loads, r->tenant, max_req, false, 0, &reqs, &execs);
  if (res == TL_OK) {
    r->load_counted = true;
    *ok = true;
    return MHD_YES;
  }
  /* Refused at once, body or not, and the connection closed: holding the
   * reply until a slow body is in would keep the very thread the refusal
   * is there to free. */
  r->body_done = true;
  r->close_after = true;
  if (res == TL_OVER_REQ) {
    char msg[160];
    snprintf(msg, sizeof msg,
             "This tenant already has %u S3 request(s) in progress (at most %u): retry when one "
             "has ended",
             reqs, max_req);
    return s3_error(r, 503, "SlowDown", msg);
  }
  return s3_error(r, 503, "SlowDown", "The server is at its connection limit: retry later");
}

/* ---- which operation ---- */

static enum s3_op pick_op(struct s3_req *r) {
  const char *m = r->method;
  bool get = !strcmp(m, "GET"), head = !strcmp(m, "HEAD"), put = !strcmp(m, "PUT"),
       del = !strcmp(m, "DELETE"), post = !strcmp(m, "POST");
  if (!r->bucket)
    return get || head ? OP_LIST_BUCKETS : OP_NONE;
  if (!r->key) {
    if (put)
      return s3_has_query(r, "acl") || s3_has_query(r, "policy") || s3_has_query(r, "cors") ||
                     s3_has_query(r, "versioning") || s3_has_query(r, "lifecycle") ||
                     s3_has_query(r, "tagging")
                 ? OP_NONE
                 : OP_CREATE_BUCKET;
    if (head)
      return OP_HEAD_BUCKET;
    if (del)
      return r->query_raw && *r->query_raw ? OP_NONE : OP_DELETE_BUCKET;
    if (post)
      return s3_has_query(r, "delete") ? OP_DELETE_OBJECTS : OP_NONE;
    if (get) {
      if (s3_has_query(r, "location"))
        return OP_BUCKET_LOCATION;
      if (s3_has_query(r, "versioning"))
        return OP_BUCKET_VERSIONING;
      if (s3_has_query(r, "uploads"))
        return OP_LIST_UPLOADS;
      static const char *const unsupported[] = {"acl", "policy", "cors", "lifecycle", "tagging",
                                                "website", "logging", "notification", "replication",
                                                "encryption", "object-lock", "versions", NULL};
      for (int i = 0; unsupported[i]; i++)
        if (s3_has_query(r, unsupported[i]))
          return OP_NONE;
      return OP_LIST_OBJECTS;
    }
    return OP_NONE;
  }
  bool has_upload = s3_has_query(r, "uploadId");
  if (put) {
    if (s3_has_query(r, "tagging") || s3_has_query(r, "acl") || s3_has_query(r, "retention") ||
        s3_has_query(r, "legal-hold"))
      return OP_NONE;
    if (has_upload || s3_has_query(r, "partNumber"))
      return s3_header(r, "x-amz-copy-source") ? OP_NONE : OP_UPLOAD_PART;
    return s3_header(r, "x-amz-copy-source") ? OP_COPY_OBJECT : OP_PUT_OBJECT;
  }
  if (get || head) {
    if (s3_has_query(r, "tagging") || s3_has_query(r, "acl") || s3_has_query(r, "attributes") ||
        s3_has_query(r, "torrent"))
      return OP_NONE;
    if (get && has_upload)
      return OP_LIST_PARTS;
    return head ? OP_HEAD_OBJECT : OP_GET_OBJECT;
  }
  if (del)
    return has_upload ? OP_ABORT_UPLOAD : s3_has_query(r, "tagging") ? OP_NONE : OP_DELETE_OBJECT;
  if (post) {
    if (s3_has_query(r, "uploads"))
      return OP_CREATE_UPLOAD;
    if (has_upload)
      return OP_COMPLETE_UPLOAD;
  }
  return OP_NONE;
}

/* ---- the body ---- */

static int sink(void *ctx, const char *buf, size_t n, struct husk_err *err) {
  struct s3_req *r = ctx;
  if (r->body == SB_OBJECT)
    return store_writer_write(r->w, buf, n, err);
  if (r->xml_len + n > S3_XML_MAX)
    return husk_fail(err, E2BIG, "The XML you provided was larger than the maximum allowed");
  char *p = realloc(r->xml, r->xml_len + n + 1);
  if (!p)
    return husk_error(err, ENOMEM, "body");
  r->xml = p;
  memcpy(r->xml + r->xml_len, buf, n);
  r->xml_len += n;
  r->xml[r->xml_len] = 0;
  return 0;
}

bool s3_b64_md5(const char *s, unsigned char out[16]) {
  if (strlen(s) != 24 || s[22] != '=' || s[23] != '=')
    return false;
  unsigned char *md5;
  size_t n;
  if (b64_decode(s, 24, &md5, &n) < 0)
    return false;
  if (n == 16)
    memcpy(out, md5, 16);
  free(md5);
  return n == 16;
}

static bool hex64(const char *s) {
  if (strlen(s) != 64)
    return false;
  for (int i = 0; i < 64; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') || (s[i] >= 'A' && s[i] <= 'F')))
      return false;
  return true;
}

/* Set up digests, framing and the sink before the first body byte. */
static enum MHD_Result body_begin(struct s3_req *r) {
  r->exp.length = -1;
  const char *md5 = s3_header(r, "content-md5");
  if (md5) {
    if (!s3_b64_md5(md5, r->exp.md5))
      return s3_error(r, 400, "InvalidDigest", "The Content-MD5 you specified was invalid");
    r->exp.has_md5 = true;
  }
  /* x-amz-checksum-<alg>: a value now, or named by x-amz-trailer. */
  enum store_checksum ck = CK_NONE;
  const char *trailer = s3_header(r, "x-amz-trailer");
  static const char *const algs[] = {"crc32", "crc32c", "sha1", "sha256", "crc64nvme"};
  for (size_t i = 0; i < 5; i++) {
    char name[48];
    snprintf(name, sizeof name, "x-amz-checksum-%s", algs[i]);
    const char *v = s3_header(r, name);
    bool in_trailer = trailer && !strcasecmp(trailer, name);
    if (!v && !in_trailer)
      continue;
    if (ck != CK_NONE)
      return s3_error(r, 400, "InvalidRequest", "Expecting a single x-amz-checksum- header");
    ck = store_checksum_parse(algs[i]);
    if (v) {
      if (strlen(v) >= sizeof r->ck_value)
        return s3_error(r, 400, "InvalidRequest", "bad checksum value");
      snprintf(r->ck_value, sizeof r->ck_value, "%s", v);
      r->exp.ck_b64 = r->ck_value;
    } else {
      r->trailer_ck = ck;
    }
  }
  if (trailer && ck == CK_NONE)
    return s3_error(r, 400, "InvalidRequest", "x-amz-trailer must name an x-amz-checksum- header");
  r->exp.ck = ck;
  /* The payload hash the signature covers. */
  const char *ph = r->auth.payload_hash;
  bool streaming = false, signed_chunks = false, with_trailer = false;
  if (!strcmp(ph, SIGV4_STREAMING)) {
    streaming = signed_chunks = true;
  } else if (!strcmp(ph, SIGV4_STREAMING_TRAILER)) {
    streaming = signed_chunks = with_trailer = true;
  } else if (!strcmp(ph, SIGV4_STREAMING_UNSIGNED_TRAILER)) {
    streaming = with_trailer = true;
  } else if (!strcmp(ph, SIGV4_UNSIGNED)) {
  } else if (hex64(ph)) {
    r->sha256_check = true;
    snprintf(r->sha256_hex, sizeof r->sha256_hex, "%.64s", ph);
    r->exp.sha256_hex = r->sha256_hex;
  } else {
    return s3_error(r, 400, "InvalidArgument", "x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-* or a SHA256 value");
  }
  if (with_trailer && !trailer)
    return s3_error(r, 400, "InvalidRequest", "a trailer payload needs x-amz-trailer");
  const char *ce = s3_header(r, "content-encoding");
  if (streaming) {
    const char *dl = s3_header(r, "x-amz-decoded-content-length");
    if (!dl || !*dl || strspn(dl, "0123456789") != strlen(dl) || strlen(dl) > 15)
      return s3_error(r, 411, "MissingContentLength", "aws-chunked bodies need x-amz-decoded-content-length");
    r->exp.length = (int64_t)strtoll(dl, NULL, 10);
    char scope[160];
    snprintf(scope, sizeof scope, "%s/%s/%s/aws4_request", r->auth.date, r->auth.region,
             r->auth.service);
    if (chunked_init(&r->ch, signed_chunks, with_trailer, r->signing_key, r->auth.amz_date, scope,
                     r->auth.signature, &r->err) < 0)
      return s3_store_error(r, &r->err);
    r->chunked_on = true;
  } else {
    (void)ce;
    const char *cl = s3_header(r, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl && *cl && strspn(cl, "0123456789") == strlen(cl) && strlen(cl) <= 15)
      r->exp.length = (int64_t)strtoll(cl, NULL, 10);
  }
  if (r->body == SB_OBJECT) {
    if (r->exp.length < 0 && !s3_header(r, MHD_HTTP_HEADER_TRANSFER_ENCODING))
      return s3_error(r, 411, "MissingContentLength", "You must provide the Content-Length HTTP header.");
    if (r->exp.length > (int64_t)STORE_PUT_MAX)
      return s3_error(r, 400, "EntityTooLarge", "Your proposed upload exceeds the maximum allowed size");
    /* Refuse before the body when the announced size cannot fit the
     * tenant's quota (the commit checks again, with what arrived). */
    if (r->exp.length > 0 &&
        store_quota_check(r->srv->cfg.store, r->tenant, r->bucket,
                          r->part_num ? NULL : r->key, (uint64_t)r->exp.length, &r->err) < 0)
      return s3_store_error(r, &r->err);
    /* And when it would eat into the data disk's reserve. */
    if (store_space_check(r->srv->cfg.store, r->exp.length > 0 ? (uint64_t)r->exp.length : 0,
                          &r->err) < 0)
      return s3_store_error(r, &r->err);
    if (store_writer_open(r->srv->cfg.store, r->trailer_ck != CK_NONE ? r->trailer_ck : ck,
                          r->sha256_check, STORE_PUT_MAX, &r->w, &r->err) < 0)
      return s3_store_error(r, &r->err);
  } else if (r->exp.length > (int64_t)S3_XML_MAX) {
    return s3_error(r, 400, "MaxMessageLengthExceeded", "Your request was too big.");
  }
  return MHD_YES;
}

static int body_feed(struct s3_req *r, const char *data, size_t n) {
  r->received += n;
  if (r->chunked_on)
    return chunked_feed(&r->ch, data, n, sink, r, &r->err);
  return sink(r, data, n, &r->err);
}

/* After the last byte: framing complete, trailer checksum in place, and
 * for XML bodies the digests checked here (objects: in the handler). */
static int body_end(struct s3_req *r) {
  if (r->chunked_on) {
    if (chunked_finish(&r->ch, &r->err) < 0)
      return -1;
    if (r->trailer_ck != CK_NONE) {
      char name[48];
      snprintf(name, sizeof name, "x-amz-checksum-%s", store_checksum_name(r->trailer_ck));
      const char *v = chunked_trailer(&r->ch, name);
      if (!v || strlen(v) >= sizeof r->ck_value)
        return husk_fail(&r->err, EBADMSG, "the trailer lacks %s", name);
      snprintf(r->ck_value, sizeof r->ck_value, "%s", v);
      r->exp.ck_b64 = r->ck_value;
    }
  }
  if (r->body == SB_XML) {
    if (r->exp.length >= 0 && (uint64_t)r->exp.length != r->xml_len)
      return husk_fail(&r->err, STORE_EINCOMPLETE, "The request body is shorter than announced");
    unsigned char md[32];
    unsigned int l = 0;
    if (r->exp.has_md5) {
      EVP_Digest(r->xml ? r->xml : "", r->xml_len, md, &l, EVP_md5(), NULL);
      if (CRYPTO_memcmp(md, r->exp.md5, 16))
        return husk_fail(&r->err, STORE_EBADDIGEST, "The Content-MD5 you specified did not match what we received");
    }
    if (r->sha256_check) {
      char hex[65];
      sigv4_sha256_hex(r->xml ? r->xml : "", r->xml_len, hex);
      if (strcasecmp(hex, r->sha256_hex))
        return husk_fail(&r->err, STORE_ESHA256, "The provided 'x-amz-content-sha256' header does not match what was computed");
    }
  }
  return 0;
}

/* ---- the life of a request ---- */

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn) {
  struct s3_server *s = cls;
  struct s3_req *r = calloc(1, sizeof *r);
  if (!r)
    return NULL;
  r->srv = s;
  r->conn = conn;
  r->raw_uri = strdup(uri ? uri : "/");
  r->t0_ms = mono_ms();
  unsigned char rnd[8];
  struct husk_err err;
  if (id_random_bytes(rnd, sizeof rnd, &err) < 0)
    memset(rnd, 0, sizeof rnd);
  sigv4_hex(rnd, 8, r->request_id);
  for (char *p = r->request_id; *p; p++)
    if (*p >= 'a' && *p <= 'f')
      *p = (char)(*p - 'a' + 'A');
  front_request_start(&s->front);
  return r;
}

/* Split the raw URI into path and query; bucket and key decoded. */
static enum MHD_Result parse_target(struct s3_req *r) {
  if (!r->raw_uri)
    return MHD_NO;
  r->path_raw = r->raw_uri;
  char *q = strchr(r->raw_uri, '?');
  if (q) {
    *q = 0;
    r->query_raw = q + 1;
  }
  char *h = strchr(r->path_raw, '#');
  if (h)
    *h = 0;
  if (r->path_raw[0] != '/')
    return s3_error(r, 400, "InvalidURI", "Couldn't parse the specified URI.");
  const char *p = r->path_raw + 1;
  if (!*p)
    return MHD_YES;
  const char *slash = strchr(p, '/');
  size_t bl = slash ? (size_t)(slash - p) : strlen(p);
  size_t dl;
  r->bucket = sigv4_uri_decode(p, bl, &dl);
  if (!r->bucket)
    return s3_error(r, 400, "InvalidURI", "Couldn't parse the specified URI.");
  if (slash && slash[1]) {
    r->key = sigv4_uri_decode(slash + 1, strlen(slash + 1), &dl);
    if (!r->key)
      return s3_error(r, 400, "InvalidURI", "Couldn't parse the specified URI.");
  }
  return MHD_YES;
}

static void source_key(struct MHD_Connection *conn, char *out, size_t size);

static enum MHD_Result start_request(struct s3_req *r) {
  source_key(r->conn, r->source, sizeof r->source);
  if (front_has_nul(r->conn))
    return s3_error(r, 400, "InvalidArgument", "NUL bytes are not allowed in the query or headers");
  enum MHD_Result ret = parse_target(r);
  if (r->responded || ret != MHD_YES)
    return ret;
  bool ok = false;
  ret = authenticate(r, &ok);
  if (!ok)
    return ret;
  ret = admit(r, &ok);
  if (!ok)
    return ret;
  enum s3_op op = pick_op(r);
  if (op == OP_NONE) {
    if (!strcmp(r->method, "GET") || !strcmp(r->method, "PUT") || !strcmp(r->method, "DELETE") ||
        !strcmp(r->method, "HEAD") || !strcmp(r->method, "POST"))
      return s3_error(r, 501, "NotImplemented", "A header or query you provided implies functionality that is not implemented");
    return s3_error(r, 405, "MethodNotAllowed", "The specified method is not allowed against this resource.");
  }
  /* Link keys only read objects. */
  if (r->internal_key && op != OP_GET_OBJECT && op != OP_HEAD_OBJECT)
    return s3_error(r, 403, "AccessDenied", "Access Denied");
  if (r->bucket && op != OP_CREATE_BUCKET && !store_bucket_name_ok(r->bucket))
    return s3_error(r, 404, "NoSuchBucket", "The specified bucket does not exist");
  switch (op) {
  case OP_PUT_OBJECT:
  case OP_UPLOAD_PART: r->body = SB_OBJECT; break;
  case OP_CREATE_BUCKET:
  case OP_DELETE_OBJECTS:
  case OP_COMPLETE_UPLOAD: r->body = SB_XML; break;
  default: r->body = SB_NONE; break;
  }
  if (op == OP_UPLOAD_PART) {
    /* Check the upload and the part number before taking the body. */
    cleanup_free char *pn = s3_query(r, "partNumber");
    cleanup_free char *uid = s3_query(r, "uploadId");
    if (!pn || !uid || !*pn || strspn(pn, "0123456789") != strlen(pn) || strlen(pn) > 5 ||
        atoi(pn) < 1 || atoi(pn) > STORE_PARTS_MAX)
      return s3_error(r, 400, "InvalidArgument", "Part number must be an integer between 1 and 10000, inclusive");
    r->part_num = atoi(pn);
    if (strlen(uid) >= sizeof r->upload_id)
      return s3_error(r, 404, "NoSuchUpload", "The specified upload does not exist.");
    snprintf(r->upload_id, sizeof r->upload_id, "%s", uid);
    struct husk_err err;
    if (store_upload_check(r->srv->cfg.store, r->tenant, r->bucket, r->key, r->upload_id, &err) < 0)
      return s3_store_error(r, &err);
  }
  if (r->body != SB_NONE) {
    ret = body_begin(r);
    if (r->responded || ret != MHD_YES)
      return ret;
  }
  r->op = op;
  return MHD_YES;
}

static enum MHD_Result dispatch(struct s3_req *r) {
  switch (r->op) {
  case OP_LIST_BUCKETS: return s3_op_list_buckets(r);
  case OP_CREATE_BUCKET: return s3_op_create_bucket(r);
  case OP_HEAD_BUCKET: return s3_op_head_bucket(r);
  case OP_DELETE_BUCKET: return s3_op_delete_bucket(r);
  case OP_BUCKET_LOCATION: return s3_op_bucket_location(r);
  case OP_BUCKET_VERSIONING: return s3_op_bucket_versioning(r);
  case OP_LIST_OBJECTS: return s3_op_list_objects(r);
  case OP_LIST_UPLOADS: return s3_op_list_uploads(r);
  case OP_DELETE_OBJECTS: return s3_op_delete_objects(r);
  case OP_PUT_OBJECT: return s3_op_put_object(r);
  case OP_COPY_OBJECT: return s3_op_copy_object(r);
  case OP_GET_OBJECT:
  case OP_HEAD_OBJECT: return s3_op_get_object(r);
  case OP_DELETE_OBJECT: return s3_op_delete_object(r);
  case OP_CREATE_UPLOAD: return s3_op_create_upload(r);
  case OP_UPLOAD_PART: return s3_op_upload_part(r);
  case OP_COMPLETE_UPLOAD: return s3_op_complete_upload(r);
  case OP_ABORT_UPLOAD: return s3_op_abort_upload(r);
  case OP_LIST_PARTS: return s3_op_list_parts(r);
  case OP_NONE: break;
  }
  return s3_error(r, 500, "InternalError", "no operation");
}

static enum MHD_Result flush_pending(struct s3_req *r) {
  struct MHD_Response *resp = r->pending;
  r->pending = NULL;
  r->body_done = true;
  enum MHD_Result ret = MHD_queue_response(r->conn, (unsigned)r->status, resp);
  MHD_destroy_response(resp);
  return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
  (void)cls;
  (void)url;
  (void)version;
  struct s3_req *r = *con_cls;
  if (!r)
    return MHD_NO;
  r->conn = conn;
  if (!r->started) {
    r->started = true;
    r->in_first_call = true;
    snprintf(r->method, sizeof r->method, "%s", method);
    enum MHD_Result ret = start_request(r);
    r->in_first_call = false;
    /* An object upload's body takes as long as it needs. */
    if (!r->responded && r->body == SB_OBJECT)
      conn_watch_request_in(&r->srv->front.watch, conn);
    return ret;
  }
  if (*upload_data_size > 0) {
    size_t n = *upload_data_size;
    *upload_data_size = 0;
    if (r->responded) {
      r->drained += n;
      return r->pending && r->drained > S3_DRAIN_MAX ? flush_pending(r) : MHD_YES;
    }
    if (r->body == SB_NONE)
      return MHD_YES; /* ignored */
    if (body_feed(r, upload_data, n) < 0) {
      if (r->err.code == E2BIG)
        return s3_error(r, 400, "MaxMessageLengthExceeded", r->err.msg);
      return s3_store_error(r, &r->err);
    }
    return MHD_YES;
  }
  /* The whole request is in. */
  conn_watch_request_in(&r->srv->front.watch, conn);
  if (r->pending)
    return flush_pending(r);
  r->body_done = true;
  if (r->responded)
    return MHD_YES;
  if (r->body != SB_NONE && body_end(r) < 0)
    return s3_store_error(r, &r->err);
  enum MHD_Result ret = dispatch(r);
  if (!r->responded && ret == MHD_YES)
    return s3_error(r, 500, "InternalError", "no reply");
  return ret;
}

static void remote_addr(struct MHD_Connection *conn, char *out, size_t size) {
  out[0] = 0;
  const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  if (!ci || !ci->client_addr)
    return;
  const struct sockaddr *sa = ci->client_addr;
  if (sa->sa_family == AF_INET)
    inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, out, (socklen_t)size);
  else if (sa->sa_family == AF_INET6)
    inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, out, (socklen_t)size);
}

/* The rate limiter's name of the client (s3_ratelimit.c). */
static void source_key(struct MHD_Connection *conn, char *out, size_t size) {
  const union MHD_ConnectionInfo *ci =
      MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
  s3_rate_source(ci ? ci->client_addr : NULL, out, size);
}

/* Bucket-level changes (and batch deletes) go to the audit log, like the
 * API's state-changing routes; single-object writes are only in the
 * request log (they are the store's traffic, not its configuration). */
static void audit(struct s3_server *s, struct s3_req *r) {
  const char *action = NULL;
  switch (r->op) {
  case OP_CREATE_BUCKET: action = "s3.bucket_create"; break;
  case OP_DELETE_BUCKET: action = "s3.bucket_delete"; break;
  case OP_DELETE_OBJECTS: action = "s3.delete_objects"; break;
  default: return;
  }
  if (!s->cfg.state || !r->tenant[0] || !r->status)
    return;
  struct state_audit rec = {.status = r->status};
  snprintf(rec.tenant_id, sizeof rec.tenant_id, "%s", r->tenant);
  snprintf(rec.action, sizeof rec.action, "%s", action);
  snprintf(rec.detail, sizeof rec.detail, "bucket=%.64s s3_key=%.32s", r->bucket ? r->bucket : "",
           r->key_id);
  snprintf(rec.outcome, sizeof rec.outcome, "%s",
           r->status < 400 ? "ok" : r->status == 403 ? "denied" : "error");
  struct husk_err err;
  if (state_audit_add(s->cfg.state, &rec, NULL, &err) < 0)
    s3_log(s, "cannot write an audit record: %s", err.msg);
}

void s3_record(struct s3_req *r) {
  if (r->recorded)
    return;
  r->recorded = true;
  struct s3_server *s = r->srv;
  audit(s, r);
  if (r->link_id[0]) {
    char ra[64];
    remote_addr(r->conn, ra, sizeof ra);
    struct husk_err err;
    const char *ua = MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, "User-Agent");
    if (store_link_record(s->cfg.store, r->link_id, ra, ua, r->status, &err) < 0)
      s3_log(s, "cannot record a link access: %s", err.msg);
  }
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
  struct s3_server *s = cls;
  struct s3_req *r = *con_cls;
  if (!r)
    return;
  *con_cls = NULL;
  front_log_request(&s->front, r->method, r->path_raw ? r->path_raw : "-", r->status, r->t0_ms,
                    r->tenant[0] ? r->tenant : "-", toe);
  if (r->pending)
    MHD_destroy_response(r->pending);
  store_writer_abort(r->w);
  if (r->chunked_on)
    chunked_free(&r->ch);
  OPENSSL_cleanse(r->signing_key, sizeof r->signing_key);
  free(r->xml);
  free(r->raw_uri);
  free(r->bucket);
  free(r->key);
  if (r->load_counted)
    tenant_load_release(&s->front.loads, r->tenant, false);
  free(r);
  front_request_done(&s->front, conn);
}

static void s3_free(struct s3_server *s) {
  if (!s)
    return;
  front_free(&s->front);
  s3_rate_free(s->rate);
  free(s);
}

static void s3_freep(struct s3_server **s) { s3_free(*s); }

int s3_start(struct s3_server **out, const struct s3_config *cfg, struct husk_err *err) {
  __attribute__((cleanup(s3_freep))) struct s3_server *s = calloc(1, sizeof *s);
  if (!s)
    return husk_error(err, ENOMEM, "s3 server");
  s->cfg = *cfg;
  struct front_config fc = {.listen = cfg->listen,
                            .max_connections = cfg->max_connections,
                            .max_per_ip = cfg->max_per_ip,
                            .idle_timeout_s = cfg->idle_timeout_s,
                            .request_timeout_s = cfg->request_timeout_s,
                            .log_requests = cfg->log_requests,
                            .on_request = on_request,
                            .on_completed = on_completed,
                            .on_uri = on_uri,
                            .cls = s,
                            .log = cfg->log,
                            .log_ctx = cfg->log_ctx,
                            .setup_what = "s3 server",
                            .conn_what = "S3 connection(s)"};
  if (front_init(&s->front, &fc, err) < 0)
    return -1;
  if (s3_rate_init(&s->rate, &s3_link_deny_limits) < 0)
    return husk_error(err, ENOMEM, "s3 server");
  /* The same default share of the connection threads as the API's. */
  s->tenant_max_requests =
      front_tenant_share(&s->front, cfg->tenant_max_requests, FRONT_TENANT_REQUESTS_DIVISOR);
  if (front_listen(&s->front, err) < 0)
    return -1;
  *out = take_ptr(&s);
  return 0;
}

unsigned s3_port(const struct s3_server *s) { return s->front.port; }

void s3_stop(struct s3_server *s, unsigned grace_ms) {
  if (!s)
    return;
  front_quiesce(&s->front, grace_ms, NULL);
  front_close(&s->front);
  s3_free(s);
}
