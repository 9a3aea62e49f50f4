/* AWS Signature Version 4: the signer and the verifier.
 *
 * One implementation of the canonical-request rules serves both sides: the
 * S3 front verifies what clients send (Authorization header or presigned
 * query), and the link and external-store code signs and presigns with the
 * same functions, so a bug cannot make the two disagree.
 *
 * The rules followed (S3 flavour, which is what every function here does):
 *   URI     the path as sent, percent-decoded once, then encoded once:
 *           every byte but A-Za-z0-9-._~/ becomes %XX (upper case); no
 *           "." / ".." / "//" normalisation
 *   query   every name and value decoded then encoded the same way (but
 *           "/" too), sorted by name then value, "k=" for an empty value,
 *           X-Amz-Signature left out
 *   headers the signed ones only: lower-case name ":" value with leading
 *           and trailing blanks trimmed and inner runs collapsed to one
 *           space, repeated headers joined by ",", sorted
 * Crypto is OpenSSL's libcrypto (HMAC-SHA256, SHA-256); signatures are
 * compared with CRYPTO_memcmp.
 *
 * Nothing here logs: secrets pass through as arguments and the derived
 * keys live on the caller's stack (wiped by the functions that make them
 * where they are temporary). */
#ifndef HUSK_STORAGE_SIGV4_H
#define HUSK_STORAGE_SIGV4_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "util/error.h"

#define SIGV4_ALGO "AWS4-HMAC-SHA256"
#define SIGV4_UNSIGNED "UNSIGNED-PAYLOAD"
#define SIGV4_STREAMING "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
#define SIGV4_STREAMING_TRAILER "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
#define SIGV4_STREAMING_UNSIGNED_TRAILER "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
/* Largest clock difference accepted for header-signed requests. */
#define SIGV4_MAX_SKEW_S (15 * 60)
/* Presigned URLs live at most this long (7 days). */
#define SIGV4_MAX_EXPIRES_S 604800
/* Most signed headers one request may name. */
#define SIGV4_MAX_SIGNED 64
#define SIGV4_KEY_ID_MAX 128

struct sigv4_header {
  const char *name; /* any case */
  const char *value;
};

/* A request as it came off the wire. */
struct sigv4_request {
  const char *method;
  const char *path;  /* raw, as sent (percent-encoded or not), no query */
  const char *query; /* raw, without "?"; NULL or "" for none */
  const struct sigv4_header *headers;
  size_t nheaders;
};

/* What the request claims: parsed from its Authorization header or its
 * X-Amz-* query parameters. */
struct sigv4_auth {
  bool presigned;
  char key_id[SIGV4_KEY_ID_MAX];
  char date[9];      /* YYYYMMDD of the scope */
  char region[64];
  char service[32];
  char amz_date[17]; /* YYYYMMDDTHHMMSSZ */
  char signed_headers[1024]; /* "host;x-amz-date" */
  char signature[65];        /* lower-case hex */
  int64_t expires_s;         /* presigned only */
  char payload_hash[80];     /* x-amz-content-sha256, or UNSIGNED-PAYLOAD (presigned) */
};

/* Verification outcomes, each one S3 error code. */
enum sigv4_result {
  SIGV4_OK = 0,
  SIGV4_MISSING,        /* no credentials at all: AccessDenied */
  SIGV4_MALFORMED,      /* AuthorizationHeaderMalformed / AuthorizationQueryParametersError */
  SIGV4_UNSUPPORTED,    /* another algorithm or SigV2: InvalidRequest / AccessDenied */
  SIGV4_MISMATCH,       /* SignatureDoesNotMatch */
  SIGV4_SKEWED,         /* RequestTimeTooSkewed */
  SIGV4_EXPIRED,        /* AccessDenied "Request has expired" */
  SIGV4_NOT_YET,        /* AccessDenied "Request is not valid yet" */
};

/* Parse what the request claims.  On failure returns the result and puts
 * a human-readable reason (never a secret) into `why`. */
enum sigv4_result sigv4_parse(const struct sigv4_request *rq, struct sigv4_auth *auth, char *why,
                              size_t why_size);

/* Check the signature of a parsed request with `secret`, at time `now`
 * (seconds since the epoch; 0 skips the clock checks, for test vectors).
 * On success, `signing_key` (may be NULL) receives the derived key and
 * `seed` (may be NULL, 65 bytes) the request's signature, which chunked
 * bodies chain from. */
enum sigv4_result sigv4_verify(const struct sigv4_request *rq, const struct sigv4_auth *auth,
                               const char *secret, time_t now, unsigned char signing_key[32],
                               char *why, size_t why_size);

/* ---- building blocks, also used by the signer and the tests ---- */

/* kSigning from the secret and the scope. */
int sigv4_signing_key(const char *secret, const char *date, const char *region,
                      const char *service, unsigned char out[32]);
/* The canonical request (malloc'd).  `signed_headers` is the ";" list;
 * `payload_hash` the last line; `presigned` drops X-Amz-Signature from the
 * query.  NULL with err filled when a signed header is absent or the path
 * or query is not valid percent-encoding. */
char *sigv4_canonical_request(const struct sigv4_request *rq, const char *signed_headers,
                              const char *payload_hash, bool presigned, struct husk_err *err);
/* The string to sign (malloc'd). */
char *sigv4_string_to_sign(const char *amz_date, const char *scope, const char *canonical);
/* hex(HMAC-SHA256(key, msg)) into out[65]. */
void sigv4_hmac_hex(const unsigned char key[32], const char *msg, size_t len, char out[65]);
void sigv4_sha256_hex(const void *data, size_t len, char out[65]);
void sigv4_hex(const unsigned char *in, size_t n, char *out);

/* The signature of one aws-chunked chunk whose data hashes to
 * `chunk_sha_hex`, chained from `prev_sig`. */
void sigv4_chunk_signature(const unsigned char key[32], const char *amz_date, const char *scope,
                           const char *prev_sig, const char *chunk_sha_hex, char out[65]);
/* The signature of the trailing headers (canonical "name:value\n" lines). */
void sigv4_trailer_signature(const unsigned char key[32], const char *amz_date, const char *scope,
                             const char *prev_sig, const char *trailer_lines, char out[65]);

/* Percent-encode `in` the SigV4 way; `keep_slash` for paths.  malloc'd. */
char *sigv4_uri_encode(const char *in, size_t n, bool keep_slash);
/* Percent-decode (no "+" rule).  malloc'd, *outlen set; NULL on a bad or
 * NUL escape. */
char *sigv4_uri_decode(const char *in, size_t n, size_t *outlen);

/* ---- signing (the client side) ---- */

struct sigv4_creds {
  const char *key_id;
  const char *secret;
  const char *region;
  const char *service; /* "s3" */
};

/* Sign a request with an Authorization header: `headers` must already
 * hold host, x-amz-date and x-amz-content-sha256 (and anything else to be
 * signed: every header given is signed).  Writes the header value into
 * `authz` (malloc'd). */
int sigv4_sign_headers(const struct sigv4_request *rq, const struct sigv4_creds *c,
                       const char *amz_date, const char *payload_hash, char **authz,
                       struct husk_err *err);

/* A presigned query string for method + path on `host` (the Host header
 * value the fetcher will send, with its port), valid `expires_s` from
 * `now`.  `extra_query` (may be NULL or "") is an already-encoded query
 * ("a=b&c=d") that gets signed too.  Returns the whole query (malloc'd,
 * without "?"), X-Amz-Signature last. */
int sigv4_presign(const struct sigv4_creds *c, const char *method, const char *path,
                  const char *host, const char *extra_query, time_t now, int64_t expires_s,
                  char **query_out, struct husk_err *err);

/* YYYYMMDDTHHMMSSZ of `t` into out[17]. */
void sigv4_amz_date(time_t t, char out[17]);

#endif
