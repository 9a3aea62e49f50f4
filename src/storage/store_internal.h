/* Shared by the files of src/storage; not part of its API.  The rows
 * behind the store are the state plane's (state/store_state.h): nothing
 * here runs SQL. */
#ifndef HUSK_STORAGE_STORE_INTERNAL_H
#define HUSK_STORAGE_STORE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/store.h"
#include "util/error.h"

struct store {
  struct state *st;
  char *dir; /* DATA/storage */
  int dirfd;
  int objfd;  /* objects/ */
  int tmpfd;  /* tmp/ */
  int partfd; /* parts/ */
  char region[64];
  uint64_t quota;
  uint64_t reserve;     /* bytes kept free on DATA's filesystem ... */
  unsigned reserve_pct; /* ... or this percent of it (0: `reserve`) */
  bool reserve_default; /* STORE_RESERVE_DEFAULT, capped at _PCT */
  char *public_url;
  unsigned char master[32]; /* seals the S3 secrets */
  struct remote *remote;    /* the external store, when configured (owned) */
  husk_log_fn log;
  void *log_ctx;
};

void store_log(struct store *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Random bytes of the id of a file, an upload or a link (util/id.h):
 * a one-letter prefix and 32 hex digits, in STORE_ID_SIZE. */
#define STORE_ID_BYTES 16
/* Rename the writer's temporary file into `dirfd` as `name` and fsync the
 * directory (steps 3 of the discipline). */
int store_writer_publish(struct store_writer *w, int dirfd, const char *name, struct husk_err *err);
/* Unlink a file that no row names any more; failures only logged. */
void store_unlink(struct store *s, int dirfd, const char *name);
/* Publish a finished writer under an ETag of the caller's (CopyObject
 * keeps the source's, Complete computes the multipart one).  Frees w. */
int store_commit_with_etag(struct store_writer *w, const char *tenant_id, const char *bucket,
                           const char *key, const char *etag, const char *content_type,
                           const char *meta_json, struct store_object *out, struct husk_err *err);
/* Fill `out` (may be NULL) with an object just stored. */
int store_fill_object(struct store_object *out, const char *key, const char *file, uint64_t size,
                      const char *etag, const char *ctype, const char *meta, int64_t mtime,
                      struct husk_err *err);
const char *store_writer_etag(const struct store_writer *w);
struct store *store_writer_store(const struct store_writer *w);
/* Base64 of n bytes into out (room for 4*ceil(n/3)+1). */
void store_b64(const unsigned char *in, size_t n, char *out);
/* The tenant's link-signing S3 key (internal: never shown), created on
 * first use (access_keys.c). */
int store_internal_key(struct store *s, const char *tenant_id, char key_id[STORE_ACCESS_KEY_SIZE],
                       char secret[STORE_SECRET_SIZE], struct husk_err *err);

#endif
