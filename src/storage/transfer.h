/* Box <-> store transfers, and the calls the MCP tools use.
 *
 * The data goes between the box's filesystem (through fds only,
 * src/box/files.h) and the store's files, inside the daemon: it never
 * passes through the client.  These are the core functions for the MCP
 * tools of issue 6:
 *
 *   store_file (box path)   transfer_box_to_store(..., link = true, ...)
 *   store_file (content)    transfer_buffer_to_store(..., link = true, ...)
 *   get_link                store_link_create()          (storage/store.h)
 *   list_objects            store_list()                 (storage/store.h)
 *   load_file               transfer_store_to_box()
 *
 * A missing bucket is created for the tenant by the two "to store"
 * functions (agents should not need a separate step for it). */
#ifndef HUSK_STORAGE_TRANSFER_H
#define HUSK_STORAGE_TRANSFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/store.h"
#include "util/error.h"

struct husk_mgr;

struct transfer_result {
  uint64_t size;
  char etag[STORE_ETAG_SIZE];
  bool tar;            /* a directory, stored as a tar archive */
  char *url;           /* the link, when one was asked for (heap), else NULL */
  char link_id[STORE_ID_SIZE];
  int64_t expires_ms;
};
void transfer_result_free(struct transfer_result *r);

/* A box file -> object; a box directory -> a tar of it (content type
 * application/x-tar).  With `link`, also a presigned link valid
 * `expires_s` (0: 1 hour), downloaded as `filename` if given. */
int transfer_box_to_store(struct husk_mgr *mgr, struct store *s, const char *tenant_id,
                          const char *box_id, const char *path, const char *bucket, const char *key,
                          bool link, int64_t expires_s, const char *filename,
                          struct transfer_result *out, struct husk_err *err);

/* Inline content -> object (+ link). */
int transfer_buffer_to_store(struct store *s, const char *tenant_id, const void *buf, size_t n,
                             const char *content_type, const char *bucket, const char *key,
                             bool link, int64_t expires_s, const char *filename,
                             struct transfer_result *out, struct husk_err *err);

/* An object -> a box file at `path` (parents created), or with `extract`
 * a tar object unpacked into directory `path`. */
int transfer_store_to_box(struct husk_mgr *mgr, struct store *s, const char *tenant_id,
                          const char *bucket, const char *key, const char *box_id,
                          const char *path, bool extract, uint64_t *size, struct husk_err *err);

/* A content type from a file name's extension ("application/octet-stream"
 * when unknown). */
const char *transfer_guess_type(const char *name);

#endif
