/* SigV4 as the S3 front reads it (src/storage/sigv4.c): the Authorization
 * header or the presigned X-Amz-* query, then the canonical request and
 * the signature check, and the percent-coding both rely on.
 *
 * Input: lines (LF-separated): method, path, query, then headers as
 * "name:value" (the value taken as is).  The signature is checked with a
 * fixed secret and the clock checks off (now = 0). */
#include <stdbool.h>

#include "fuzz.h"
#include "storage/sigv4.h"

#define MAX_HEADERS 32

/* decode(encode(x)) == x for any bytes without NUL. */
static void coding(const char *s, size_t n, bool keep_slash) {
  char *e = sigv4_uri_encode(s, n, keep_slash);
  if (!e)
    return;
  size_t dl = 0;
  char *d = sigv4_uri_decode(e, strlen(e), &dl);
  if (!memchr(s, '\0', n) && (!d || dl != n || memcmp(d, s, n) != 0))
    abort();
  free(d);
  free(e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct fz f = {data, size};
  size_t ml, pl, ql;
  char *method = fz_field(&f, '\n', &ml);
  char *path = fz_field(&f, '\n', &pl);
  char *query = fz_field(&f, '\n', &ql);
  struct sigv4_header h[MAX_HEADERS];
  char *lines[MAX_HEADERS];
  size_t nh = 0;
  while (f.n && nh < MAX_HEADERS) {
    lines[nh] = fz_field(&f, '\n', NULL);
    char *c = strchr(lines[nh], ':');
    h[nh].name = lines[nh];
    h[nh].value = "";
    if (c) {
      *c = '\0';
      h[nh].value = c + 1;
    }
    nh++;
  }
  struct sigv4_request rq = {method, path, query, h, nh};
  struct sigv4_auth auth;
  char why[256];
  enum sigv4_result res = sigv4_parse(&rq, &auth, why, sizeof why);
  if (res == SIGV4_OK) {
    unsigned char key[32];
    sigv4_verify(&rq, &auth, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", 0, key, why, sizeof why);
  } else if (!memchr(why, '\0', sizeof why)) {
    abort();
  }
  struct husk_err err;
  char *canon = sigv4_canonical_request(&rq, "host;x-amz-date", SIGV4_UNSIGNED, res == SIGV4_OK &&
                                                                                    auth.presigned,
                                        &err);
  free(canon);
  coding(path, pl, true);
  coding(query, ql, false);
  for (size_t i = 0; i < nh; i++)
    free(lines[i]);
  free(method);
  free(path);
  free(query);
  return 0;
}
