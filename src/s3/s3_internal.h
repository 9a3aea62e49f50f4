/* Shared by the files of src/s3. */
#ifndef HUSK_S3_INTERNAL_H
#define HUSK_S3_INTERNAL_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "front/daemon.h"
#include "s3/s3.h"
#include "storage/chunked.h"
#include "storage/sigv4.h"
#include "storage/store.h"
#include "util/strbuf.h"
#include "util/tenant_load.h"
#include "util/timefmt.h"

/* XML request bodies (CompleteMultipartUpload with 10000 parts is about
 * 1 MiB; DeleteObjects with 1000 keys of 1 KiB about the same). */
#define S3_XML_MAX (2 * 1024 * 1024)
/* Most keys one DeleteObjects may name. */
#define S3_DELETE_MAX 1000
/* After refusing a body, how much of it is still read so the client sees
 * the reply. */
#define S3_DRAIN_MAX (64ULL * 1024 * 1024)
#define S3_MAX_HEADERS 128
/* Refused link fetches (bad signature, expired, revoked): each source
 * address (an IPv6 one by its /64) may have S3_LINK_DENY_BURST counted,
 * refilled at S3_LINK_DENY_PER_S; all sources together
 * S3_LINK_DENY_SHARED_BURST at S3_LINK_DENY_SHARED_PER_S.  Past that,
 * the source's refused link fetches get 429 (not 403) and are not
 * counted; its valid ones are served as ever. */
#define S3_LINK_DENY_BURST 20
#define S3_LINK_DENY_PER_S 1.0
#define S3_LINK_DENY_SHARED_BURST 1000
#define S3_LINK_DENY_SHARED_PER_S 100.0
/* Sources the limiter remembers (a fixed table: its memory never grows). */
#define S3_RATE_SLOTS 4096
#define S3_RATE_KEY_MAX 48

/* ---- s3_ratelimit.c ---- */
struct s3_rate;
struct sockaddr;
/* The budgets: each source's and the one all sources share. */
struct s3_rate_limits {
  double burst, per_s;               /* one source's */
  double shared_burst, shared_per_s; /* all sources' together */
};
/* The daemon's: S3_LINK_DENY_*. */
extern const struct s3_rate_limits s3_link_deny_limits;
int s3_rate_init(struct s3_rate **out, const struct s3_rate_limits *lim);
void s3_rate_free(struct s3_rate *rl);
/* Spend one unit of the source's budget (and of the shared one); false if
 * either has none left.  To count only failures of work that may run at
 * once, take before the work and give back (s3_rate_give) on success:
 * checking first and taking after lets concurrent attempts all pass. */
bool s3_rate_take(struct s3_rate *rl, const char *key, int64_t now_ms);
/* The limiter's name of a client address: an IPv4 address as it is (an
 * IPv4-mapped IPv6 one too), an IPv6 one by its /64 (one host is usually
 * given a whole /64), "-" for anything else. */
void s3_rate_source(const struct sockaddr *sa, char *out, size_t size);
/* The same with IPv6 addresses grouped by their first v6_bits bits (a
 * site is usually given a /48: a budget that many hosts of one site must
 * share). */
void s3_rate_source_prefix(const struct sockaddr *sa, unsigned v6_bits, char *out, size_t size);
/* Give back one spent unit (a take before work that then succeeded): never
 * past the bursts. */
void s3_rate_give(struct s3_rate *rl, const char *key, int64_t now_ms);

struct s3_server {
  /* The daemon, the requests in flight, the per-tenant loads and the
   * request timeout (front/daemon.h). */
  struct front_daemon front;
  struct s3_config cfg;
  struct s3_rate *rate;         /* refused link fetches per source */
  unsigned tenant_max_requests; /* the default */
};

/* Replies are built in a struct strbuf (util/strbuf.h); these add XML. */
void xb_fmt(struct strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* XML-escaped text (control characters as &#xN;). */
void xb_esc(struct strbuf *b, const char *s);
/* <tag>escaped</tag> */
void xb_elem(struct strbuf *b, const char *tag, const char *text);
/* <tag>text</tag>, text URL-encoded when `url` (encoding-type=url). */
void xb_elem_enc(struct strbuf *b, const char *tag, const char *text, bool url);

enum s3_op {
  OP_NONE,
  OP_LIST_BUCKETS,
  OP_CREATE_BUCKET,
  OP_HEAD_BUCKET,
  OP_DELETE_BUCKET,
  OP_BUCKET_LOCATION,
  OP_BUCKET_VERSIONING,
  OP_LIST_OBJECTS,
  OP_LIST_UPLOADS,
  OP_DELETE_OBJECTS,
  OP_PUT_OBJECT,
  OP_COPY_OBJECT,
  OP_GET_OBJECT,
  OP_HEAD_OBJECT,
  OP_DELETE_OBJECT,
  OP_CREATE_UPLOAD,
  OP_UPLOAD_PART,
  OP_COMPLETE_UPLOAD,
  OP_ABORT_UPLOAD,
  OP_LIST_PARTS,
};

enum s3_body { SB_NONE, SB_XML, SB_OBJECT };

struct s3_req {
  struct s3_server *srv;
  struct MHD_Connection *conn;
  char *raw_uri;
  char method[16];
  char *path_raw;  /* points into raw_uri copy */
  char *query_raw; /* NULL if none */
  char *bucket;    /* decoded, NULL for "/" */
  char *key;       /* decoded, NULL for bucket-level */
  char request_id[17];
  int64_t t0_ms;
  bool started;
  bool in_first_call;
  bool body_done; /* the whole body has been read */

  /* Who. */
  char tenant[32];
  char key_id[SIGV4_KEY_ID_MAX];
  bool internal_key;
  struct sigv4_auth auth;
  unsigned char signing_key[32];
  char link_id[STORE_ID_SIZE];   /* a valid link fetch: recorded with its reply */
  char source[S3_RATE_KEY_MAX]; /* the client's address (IPv6: its /64) */
  bool recorded;                /* audit / access records written */
  bool load_counted;            /* in the tenant's load (s3_server.c) */
  bool close_after;             /* the reply closes the connection */

  enum s3_op op;
  enum s3_body body;
  /* SB_XML */
  char *xml;
  size_t xml_len;
  /* SB_OBJECT */
  struct store_writer *w;
  int part_num;
  char upload_id[STORE_ID_SIZE];
  /* Both: framing and digests. */
  bool chunked_on;
  struct chunked ch;
  struct store_expect exp;
  enum store_checksum trailer_ck;
  bool sha256_check;
  char sha256_hex[65];
  char ck_value[96];
  bool md5_given;
  uint64_t received;

  /* Reply. */
  bool responded;
  int status;
  struct MHD_Response *pending; /* held until the body is read */
  uint64_t drained;
  struct husk_err err;
};

/* ---- s3_server.c ---- */
const char *s3_header(struct s3_req *r, const char *name);
/* A decoded query parameter; NULL if absent ("" for a bare "?name"). */
char *s3_query(struct s3_req *r, const char *name);
bool s3_has_query(struct s3_req *r, const char *name);
void s3_log(struct s3_server *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Content-MD5: 16 bytes from their 24-character base64, false if it is not that. */
bool s3_b64_md5(const char *s, unsigned char out[16]);

/* ---- header and token parsers (s3_object.c, s3_bucket.c) ---- */
/* Does an If-Match / If-None-Match list name this ETag ("*", W/ and quotes allowed)? */
bool s3_etag_listed(const char *list, const char *etag);
/* An IMF-fixdate ("Sun, 06 Nov 1994 08:49:37 GMT") as ms since the epoch. */
bool s3_parse_http_date(const char *s, int64_t *ms);
/* A single "bytes=a-b" / "bytes=a-" / "bytes=-n" range of an object of
 * `size` bytes: 1 with *start and *len, 0 to ignore the header, -1
 * unsatisfiable. */
int s3_parse_range(const char *h, uint64_t size, uint64_t *start, uint64_t *len);
/* A ListObjectsV2 continuation token (lower-case hex of a key without NUL)
 * decoded, malloc'd; NULL if it is not one. */
char *s3_hex_decode(const char *s);
/* Before a reply is queued: the audit record of a bucket-level change and
 * the access record of a link fetch, committed (and so durable: the S3
 * front syncs every commit) before the client can see the reply. */
void s3_record(struct s3_req *r);

/* ---- replies (s3_reply.c) ---- */
/* Queue (or hold, while a body is still coming) a response. */
enum MHD_Result s3_queue(struct s3_req *r, unsigned status, struct MHD_Response *resp);
/* S3 error XML. `resource` may be NULL. */
enum MHD_Result s3_error(struct s3_req *r, unsigned status, const char *code, const char *msg);
/* Map a store error (err->code) to its S3 error. */
enum MHD_Result s3_store_error(struct s3_req *r, const struct husk_err *err);
enum MHD_Result s3_reply_xml(struct s3_req *r, unsigned status, struct strbuf *b);
enum MHD_Result s3_reply_empty(struct s3_req *r, unsigned status);
void s3_add_common(struct s3_req *r, struct MHD_Response *resp);
void s3_http_date(int64_t ms, char out[40]);
#define S3_XMLNS "http://s3.amazonaws.com/doc/2006-03-01/"
#define S3_XML_HEAD "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"

/* ---- s3_xml.c: request bodies ---- */
struct s3_complete_part {
  int num;
  char etag[STORE_ETAG_SIZE + 8];
};
/* 0, or -1 with a reason ("MalformedXML" cases) in err. */
int s3_parse_complete(const char *xml, size_t n, struct store_part **parts, size_t *nparts,
                      struct husk_err *err);
int s3_parse_delete(const char *xml, size_t n, char ***keys, size_t *nkeys, bool *quiet,
                    struct husk_err *err);
/* A well-formed document whose root is `root` (CreateBucketConfiguration). */
int s3_parse_check(const char *xml, size_t n, const char *root, struct husk_err *err);

/* ---- operations ---- */
enum MHD_Result s3_op_list_buckets(struct s3_req *r);
enum MHD_Result s3_op_create_bucket(struct s3_req *r);
enum MHD_Result s3_op_head_bucket(struct s3_req *r);
enum MHD_Result s3_op_delete_bucket(struct s3_req *r);
enum MHD_Result s3_op_bucket_location(struct s3_req *r);
enum MHD_Result s3_op_bucket_versioning(struct s3_req *r);
enum MHD_Result s3_op_list_objects(struct s3_req *r);
enum MHD_Result s3_op_list_uploads(struct s3_req *r);
enum MHD_Result s3_op_delete_objects(struct s3_req *r);
enum MHD_Result s3_op_put_object(struct s3_req *r);
enum MHD_Result s3_op_copy_object(struct s3_req *r);
enum MHD_Result s3_op_get_object(struct s3_req *r);
enum MHD_Result s3_op_delete_object(struct s3_req *r);
enum MHD_Result s3_op_create_upload(struct s3_req *r);
enum MHD_Result s3_op_upload_part(struct s3_req *r);
enum MHD_Result s3_op_complete_upload(struct s3_req *r);
enum MHD_Result s3_op_abort_upload(struct s3_req *r);
enum MHD_Result s3_op_list_parts(struct s3_req *r);
/* Content type and x-amz-meta-* of the request as JSON (malloc'd), or
 * NULL with r->err set (metadata too large). */
char *s3_request_meta(struct s3_req *r);
/* Who writes an object through this request: "s3key:" + the access key id
 * that signed it (public, unlike its secret); "" for an internal key (a
 * link's, which cannot write). */
void s3_created_by(const struct s3_req *r, char out[STORE_CREATED_BY_SIZE]);

#endif
