/* The small parsers of an S3 request's query and headers
 * (src/s3/s3_server.c, s3_object.c, s3_bucket.c) and of the HTTP API's
 * file downloads (src/api/routes_files.c): query parameters (decoded as
 * s3_query() does, and the part number check of UploadPart), Range for
 * objects and for files, If-Match lists, HTTP dates, ListObjectsV2
 * continuation tokens and Content-MD5.
 * Input: a selector byte (the object size), then LF-separated fields:
 * query, Range, If-Match, date, continuation token, Content-MD5. */
#include <stdbool.h>

#include "api/internal.h"
#include "fuzz.h"
#include "s3/s3_internal.h"
#include "storage/sigv4.h"

static const uint64_t sizes[] = {0, 1, 2, 10, 1000, 1ull << 40, UINT64_MAX >> 1, UINT64_MAX};

static const char *const params[] = {"partNumber", "uploadId", "list-type", "prefix",
                                     "delimiter",  "max-keys", "continuation-token",
                                     "x-husk-link", "uploads", "delete", "X-Amz-Signature"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct fz f = {data, size};
  uint64_t osize = sizes[fz_byte(&f) % (sizeof sizes / sizeof sizes[0])];
  char *query = fz_field(&f, '\n', NULL);
  char *range = fz_field(&f, '\n', NULL);
  char *etags = fz_field(&f, '\n', NULL);
  char *date = fz_field(&f, '\n', NULL);
  char *token = fz_field(&f, '\n', NULL);
  char *md5 = fz_field(&f, '\n', NULL);

  struct s3_req r;
  memset(&r, 0, sizeof r);
  r.query_raw = query;
  for (size_t i = 0; i < sizeof params / sizeof params[0]; i++)
    free(s3_query(&r, params[i]));
  /* UploadPart's check (s3_server.c, start_request). */
  char *pn = s3_query(&r, "partNumber");
  if (pn && *pn && strspn(pn, "0123456789") == strlen(pn) && strlen(pn) <= 5) {
    int n = atoi(pn);
    if (n < 0 || n > 99999)
      abort();
  }
  free(pn);

  uint64_t a = 0, b = 0;
  if (s3_parse_range(range, osize, &a, &b) == 1 && (b == 0 || a >= osize || b > osize - a))
    abort();
  if (api_parse_range(range, osize, &a, &b) == 1 && (a > b || b >= osize))
    abort();

  s3_etag_listed(etags, "0cc175b9c0f1b6a831c399e269772661");
  s3_etag_listed(etags, "");
  int64_t ms;
  s3_parse_http_date(date, &ms);

  char *key = s3_hex_decode(token);
  if (key) {
    size_t kl = strlen(key);
    char *hex = malloc(2 * kl + 1);
    if (!hex)
      abort();
    sigv4_hex((const unsigned char *)key, kl, hex);
    if (strcmp(hex, token) != 0)
      abort();
    free(hex);
    free(key);
  }
  unsigned char digest[16];
  s3_b64_md5(md5, digest);

  free(query);
  free(range);
  free(etags);
  free(date);
  free(token);
  free(md5);
  return 0;
}
