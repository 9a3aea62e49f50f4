/* The start-up sweep: what a crash (or a failed unlink) left behind.  A
 * file under tmp/ is an interrupted write; one under objects/ or parts/
 * that no row names was published but never committed, or replaced and
 * not yet removed (store.h's write discipline, steps 3 and 5).  Uploads
 * abandoned for longer than STORE_UPLOAD_TTL_MS are aborted first, so the
 * sweep of parts/ takes their files too. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <unistd.h>

#include "state/store_state.h"
#include "state/upload_link_state.h"
#include "storage/store_internal.h"
#include "util/cleanup.h"

/* Remove every file of `dirfd` that no row names (`check` false: every
 * file; else those no row of `kind` names). */
static int sweep(struct store *s, int dirfd, bool check, enum state_store_files kind,
                 unsigned *removed, struct husk_err *err) {
  int dfd = dup(dirfd);
  if (dfd < 0)
    return husk_error(err, errno, "cleanup");
  cleanup_closedir DIR *d = fdopendir(dfd);
  if (!d) {
    close(dfd);
    return husk_error(err, errno, "cleanup");
  }
  rewinddir(d);
  struct dirent *de;
  while ((de = readdir(d))) {
    if (de->d_name[0] == '.' && (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2])))
      continue;
    bool used = false;
    if (check && state_store_file_used(s->st, kind, de->d_name, &used, err) < 0)
      return -1;
    if (!used) {
      store_unlink(s, dirfd, de->d_name);
      (*removed)++;
    }
  }
  return 0;
}

/* Uploads abandoned for longer than STORE_UPLOAD_TTL_MS, aborted in
 * batches of STALE_BATCH. */
#define STALE_BATCH 64
struct stale {
  struct store *s;
  int n;
  bool failed;
};

static int abort_stale(void *ctx, const struct state_stale_upload *u) {
  struct stale *b = ctx;
  struct husk_err e2;
  b->n++;
  if (store_upload_abort(b->s, u->tenant_id, u->bucket, u->key, u->id, &e2) < 0) {
    store_log(b->s, "cannot abort abandoned upload %s: %s", u->id, e2.msg);
    b->failed = true;
  }
  return 0;
}

static int abort_stale_uploads(struct store *s, struct husk_err *err) {
  for (;;) {
    struct stale b = {.s = s};
    if (state_upload_stale(s->st, state_now_ms() - STORE_UPLOAD_TTL_MS, STALE_BATCH, abort_stale,
                           &b, err) < 0)
      return -1;
    /* A batch that could not be aborted would come back forever: stop. */
    if (b.n < STALE_BATCH || b.failed)
      return 0;
  }
}

int store_sweep(struct store *s, struct husk_err *err) {
  unsigned removed = 0;
  if (sweep(s, s->tmpfd, false, STATE_OBJECT_FILES, &removed, err) < 0 ||
      abort_stale_uploads(s, err) < 0 ||
      sweep(s, s->partfd, true, STATE_PART_FILES, &removed, err) < 0 ||
      sweep(s, s->objfd, true, STATE_OBJECT_FILES, &removed, err) < 0)
    return -1;
  if (removed)
    store_log(s, "removed %u unused file(s) left by an interrupted write", removed);
  unsigned settled = 0;
  if (state_upload_links_settle(s->st, &settled, err) < 0)
    return -1;
  if (settled)
    store_log(s, "gave back the upload slots of %u link(s) whose uploads were interrupted", settled);
  return 0;
}
