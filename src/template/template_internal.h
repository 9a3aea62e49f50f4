/* Internals shared by the template store's files (template.c: the store,
 * its layers, deletion; import.c: imports; collect.c: collection). */
#ifndef HUSK_TEMPLATE_TEMPLATE_INTERNAL_H
#define HUSK_TEMPLATE_TEMPLATE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "template/template.h"

#include "util/disk_reserve.h"

#define HEX_OFF 7 /* "sha256:" */

struct template_store {
  struct template_store_config cfg;
  struct state *state;
  struct disk_reserve reserve;
  int root;             /* DATA/templates */
  int layers;           /* .../layers */
  int blobs;            /* .../blobs/sha256 */
  int tmp;              /* .../tmp */
  pthread_mutex_t lock; /* one import's layer placement at a time in this process */
  /* A collection found the store held (an import, build or context in
   * progress) and did nothing: the last hold of this process to end runs
   * it (ts_gc_release), so what a deletion left goes without waiting for
   * the next delete or restart. */
  atomic_bool collect_pending;
};

void ts_log(struct template_store *ts, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Remove `name` in dirfd and everything below it, never following a
 * symlink.  -1 with errno. */
int rmtree_at(int dirfd, const char *name);
/* A hold on gc.lock: flock(how) on an open file description of its own
 * (flock locks belong to one: holders sharing an fd would release each
 * other's).  Returns the fd (close it to release), or -1 with errno
 * (EWOULDBLOCK: LOCK_NB and held the other way). */
int ts_gc_hold(struct template_store *ts, int how);
/* Release a hold (ts_gc_hold, LOCK_SH: fd >= 0) and run a collection
 * another one asked for meanwhile, or `collect` (the holder's own
 * leftovers). */
void ts_gc_release(struct template_store *ts, int fd, bool collect);
/* mkdir (0700, if missing) and open a directory of the store. */
int ts_subdir(int at, const char *name, struct husk_err *err);
/* "sha256:" + 64 lower-case hex digits. */
bool digest_ok(const char *d);

/* ---- imports (import.c) ---- */
/* One import: its work directory under tmp/ and its hold on gc.lock. */
struct import {
  struct template_store *ts;
  char work[40];
  int wfd;
  int gc;            /* its hold on gc.lock (shared), or -1 */
  bool placed;       /* it put layers or blobs in the store */
  bool committed;    /* ... and recorded the template that names them */
  uint64_t unpacked; /* bytes of the layers it placed or found (an assembly's, so far) */
  uint64_t max_bytes; /* an archive or a layer: the store's limit, or the tenant's room */
  bool quota_bound;   /* max_bytes is the tenant's room */
};
/* Start an import for `tenant` (""; the operator's: no quota): the disk
 * reserve and the tenant's template storage are checked (ENOSPC, EDQUOT)
 * and bound what it may unpack. */
int import_begin(struct template_store *ts, const char *tenant, struct import *im,
                 struct husk_err *err);
void import_end(struct import *im);
/* The name `name` is free for `tenant` and well-formed. */
int import_check_new(struct template_store *ts, const char *tenant, const char *name,
                     struct husk_err *err);
/* Unpack layer `l` (its blob at l->blob in srcdir; the i-th of its image,
 * for messages) into layers/<diff_id> unless it is there, checking its
 * diff_id; *size grows by its unpacked bytes. */
int import_place_layer(struct import *im, int srcdir, const struct image_layer *l, size_t i,
                       uint64_t *size, struct husk_err *err);
/* Keep blob `path` of srcdir as blobs/<digest> (moved when `move`). */
int import_keep_blob(struct import *im, int srcdir, bool move, const char *digest,
                     const char *path, struct husk_err *err);
/* Layers placed (each blob in srcdir unpacked once), blobs kept, the row
 * recorded with `source`; *out (may be NULL) gets it. */
int import_commit(struct import *im, int srcdir, bool move, const char *tenant, const char *name,
                  const char *source, struct image *img, struct state_template *out,
                  struct husk_err *err);

#endif
