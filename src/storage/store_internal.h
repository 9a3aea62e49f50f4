/* Shared by the files of src/storage; not part of its API.  The rows
 * behind the store are the state plane's (state/store_state.h): nothing
 * here runs SQL. */
#ifndef HUSK_STORAGE_STORE_INTERNAL_H
#define HUSK_STORAGE_STORE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/store.h"
#include "util/disk_reserve.h"
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
  struct disk_reserve reserve; /* kept free on DATA's filesystem */
  char *public_url;
  unsigned char master[32]; /* seals the S3 secrets */
  struct remote *remote;    /* the external store, when configured (owned) */
  husk_log_fn log;
  void *log_ctx;
};

/* Random bytes of the id of a file, an upload or a link (util/id.h):
 * a one-letter prefix and 32 hex digits, in STORE_ID_SIZE. */
#define STORE_ID_BYTES 16

/* ---- store.c ---- */
void store_log(struct store *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Unlink a file that no row names any more, once that is durable;
 * failures only logged (the next start's sweep has another go). */
void store_unlink(struct store *s, int dirfd, const char *name);

/* ---- sweep.c ---- */
/* Remove what a crash left: temporary files, files no row names, uploads
 * abandoned for longer than STORE_UPLOAD_TTL_MS. */
int store_sweep(struct store *s, struct husk_err *err);

/* ---- writer.c ---- */
/* The fsync of an object's data and of its directory: fsync(2), replaced
 * by the fault simulation (tests/unit/test_faults.c) to fail it. */
extern int (*store_fsync)(int fd);
/* Rename the writer's temporary file into `dirfd` as `name` and fsync the
 * directory (step 3 of the discipline). */
int store_writer_publish(struct store_writer *w, int dirfd, const char *name, struct husk_err *err);
/* A writer's MD5 hex, once store_writer_finish has checked it. */
const char *store_writer_etag(const struct store_writer *w);
bool store_writer_finished(const struct store_writer *w);
struct store *store_writer_store(const struct store_writer *w);

/* ---- objects.c ---- */
/* A writer or link maker as given to the public calls (NULL: "") into
 * `dst`, or EINVAL if it is not a creator (state_check_created_by). */
int store_creator_copy(char dst[STORE_CREATED_BY_SIZE], const char *src, struct husk_err *err);
/* Publish a finished writer under an ETag of the caller's (CopyObject
 * keeps the source's, Complete computes the multipart one).  Frees w. */
int store_commit_with_etag(struct store_writer *w, const char *tenant_id, const char *bucket,
                           const char *key, const char *etag, const char *content_type,
                           const char *meta_json, const char *created_by, struct store_object *out,
                           struct husk_err *err);
/* Fill `out` (may be NULL) with an object just stored; `created_by` is
 * one store_creator_copy accepted. */
int store_fill_object(struct store_object *out, const char *key, const char *file, uint64_t size,
                      const char *etag, const char *ctype, const char *meta, int64_t mtime,
                      const char *created_by, struct husk_err *err);

/* ---- checksum.c ---- */
/* Running CRC-32 (zlib's), CRC-32C and CRC-64/NVME of a body: start from
 * 0, feed it in pieces. */
uint32_t store_crc32_update(uint32_t crc, const void *buf, size_t n);
uint32_t store_crc32c_update(uint32_t crc, const void *buf, size_t n);
uint64_t store_crc64nvme_update(uint64_t crc, const void *buf, size_t n);

/* ---- access_keys.c ---- */
/* Read DATA/storage/master.key into s->master, creating it the first
 * time. */
int store_master_key_load(struct store *s, struct husk_err *err);
/* The tenant's link-signing S3 key (internal: never shown), created on
 * first use. */
int store_internal_key(struct store *s, const char *tenant_id, char key_id[STORE_ACCESS_KEY_SIZE],
                       char secret[STORE_SECRET_SIZE], struct husk_err *err);

#endif
