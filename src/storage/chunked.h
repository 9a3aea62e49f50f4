/* The aws-chunked body decoder: streaming, with per-chunk signatures and
 * trailing checksums.
 *
 * A body sent with x-amz-content-sha256 STREAMING-* is framed as
 *   hex-size;chunk-signature=SIG\r\n DATA \r\n ... 0;chunk-signature=SIG\r\n
 *   [trailer-name:value\r\n ... x-amz-trailer-signature:SIG\r\n] \r\n
 * (the unsigned variant drops ";chunk-signature=SIG" and the trailer
 * signature).  Each chunk signature chains from the previous one, the first
 * from the request's own signature, so a chunk cannot be altered, dropped,
 * reordered or replayed from another request.  The decoder checks each
 * chunk's signature when the chunk is complete and hands the data to the
 * caller as it arrives; the caller writes it to a temporary file that is
 * published only when the whole body verified, so bytes of a chunk that
 * later fails never become an object. */
#ifndef HUSK_STORAGE_CHUNKED_H
#define HUSK_STORAGE_CHUNKED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

#include "util/error.h"

/* Longest chunk header or trailer line. */
#define CHUNKED_LINE_MAX 4096
/* Most trailer lines. */
#define CHUNKED_TRAILERS_MAX 8

enum chunked_state { CH_SIZE, CH_DATA, CH_DATA_CR, CH_DATA_LF, CH_TRAILER, CH_DONE };

struct chunked {
  bool signed_chunks;   /* chunk-signature required (STREAMING-AWS4-HMAC-SHA256-PAYLOAD*) */
  bool trailer;         /* a trailer section follows the last chunk */
  unsigned char key[32];
  char amz_date[17];
  char scope[160];
  char prev_sig[65];
  enum chunked_state st;
  char line[CHUNKED_LINE_MAX];
  size_t line_len;
  uint64_t left;        /* data bytes left in the current chunk */
  char chunk_sig[65];
  EVP_MD_CTX *md;
  uint64_t decoded;     /* data bytes so far */
  /* Trailers: "name:value" lines as received (lower-cased names). */
  char trailers[CHUNKED_TRAILERS_MAX][256];
  int ntrailers;
  char trailer_sig[65];
};

/* `seed` is the request's signature; key/scope/date as verified. */
int chunked_init(struct chunked *c, bool signed_chunks, bool trailer, const unsigned char key[32],
                 const char *amz_date, const char *scope, const char *seed, struct husk_err *err);
/* Feed body bytes; data goes to emit(ctx, buf, n) (which returns 0 or -1
 * with its own error in err).  Errors: EBADMSG framing (IncompleteBody /
 * bad chunk), EACCES a chunk or trailer signature does not match. */
int chunked_feed(struct chunked *c, const char *buf, size_t n,
                 int (*emit)(void *ctx, const char *buf, size_t n, struct husk_err *err), void *ctx,
                 struct husk_err *err);
/* After the last byte: the body must be complete. */
int chunked_finish(struct chunked *c, struct husk_err *err);
/* A trailer's value ("x-amz-checksum-crc32"), NULL if absent. */
const char *chunked_trailer(const struct chunked *c, const char *name);
void chunked_free(struct chunked *c);

#endif
