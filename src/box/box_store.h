/* Box <-> store transfers: a box's file or tree copied into the object
 * store (embedded or external) and an object copied into a box, through
 * the storage plane's public calls (storage/store.h) and the box's files
 * API (fds only, box/files.h).  The data goes between the box's filesystem
 * and the store inside the daemon: it never passes through the client.
 * The MCP storage tools are built on these:
 *
 *   store_file (box path)   box_store_put(..., link = true, ...)
 *   store_file (content)    box_store_put_buffer(..., link = true, ...)
 *   get_link                store_link_create()          (storage/store.h)
 *   list_objects            store_list()                 (storage/store.h)
 *   load_file               box_store_get()
 *
 * A missing bucket is created for the tenant by the two "to store"
 * functions (agents should not need a separate step for it). */
#ifndef HUSK_BOX_STORE_H
#define HUSK_BOX_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "storage/store.h"
#include "util/error.h"

struct husk_mgr;

struct box_store_result {
  uint64_t size;
  char etag[STORE_ETAG_SIZE];
  bool tar;  /* a directory, stored as a tar archive */
  char *url; /* the link, when one was asked for (heap), else NULL */
  char link_id[STORE_ID_SIZE];
  int64_t expires_ms;
};
void box_store_result_free(struct box_store_result *r);

/* A box file -> object; a box directory -> a tar of it (content type
 * application/x-tar).  With `link`, also a presigned link valid
 * `expires_s` (0: 1 hour), downloaded as `filename` if given.  The object
 * and the link record `created_by` (the caller: storage/store.h's
 * STORE_CREATED_BY_SIZE; NULL: nobody) -- on the embedded store; an
 * external store's objects keep no writer, their links do. */
int box_store_put(struct husk_mgr *mgr, struct store *s, const char *tenant_id, const char *box_id,
                  const char *path, const char *bucket, const char *key, bool link,
                  int64_t expires_s, const char *filename, bool inline_disp, const char *created_by,
                  struct box_store_result *out, struct husk_err *err);

/* Inline content -> object (+ link), `created_by` as for box_store_put. */
int box_store_put_buffer(struct store *s, const char *tenant_id, const void *buf, size_t n,
                         const char *content_type, const char *bucket, const char *key, bool link,
                         int64_t expires_s, const char *filename, bool inline_disp,
                         const char *created_by, struct box_store_result *out,
                         struct husk_err *err);

/* An object -> a box file at `path` (parents created), or with `extract`
 * a tar object unpacked into directory `path`. */
int box_store_get(struct husk_mgr *mgr, struct store *s, const char *tenant_id, const char *bucket,
                  const char *key, const char *box_id, const char *path, bool extract,
                  uint64_t *size, struct husk_err *err);

/* A content type from a file name's extension ("application/octet-stream"
 * when unknown). */
const char *box_store_guess_type(const char *name);

#endif
