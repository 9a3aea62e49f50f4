/* Removing a deleted tenant's storage (store_tenant_purge).
 *
 * Files follow the store's write discipline in reverse: rows go first, in
 * one transaction per batch (state_store_purge_files), and only after its
 * commit are the files those rows named unlinked.  A crash between the two
 * leaves files no row names; store_open's sweep removes them.  Batches keep
 * the memory a purge needs bounded by STATE_STORE_PURGE_BATCH, not by how
 * much the tenant stored. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>

#include "state/store_state.h"
#include "storage/store_internal.h"
#include "util/cleanup.h"

/* One batch of objects (or parts): their rows, then their files in
 * `dirfd`.  *n: rows deleted. */
static int purge_batch(struct store *s, const char *tenant_id, enum state_store_files kind,
                       int dirfd, size_t *n, struct husk_err *err) {
  *n = 0;
  cleanup_free char(*files)[STORE_ID_SIZE] = calloc(STATE_STORE_PURGE_BATCH, sizeof *files);
  if (!files)
    return husk_error(err, ENOMEM, "tenant storage");
  if (state_store_purge_files(s->st, tenant_id, kind, files, n, err) < 0)
    return -1;
  for (size_t i = 0; i < *n; i++)
    store_unlink(s, dirfd, files[i]);
  return 0;
}

int store_tenant_purge(struct store *s, const char *tenant_id, struct husk_err *err) {
  size_t n;
  do
    if (purge_batch(s, tenant_id, STATE_OBJECT_FILES, s->objfd, &n, err) < 0)
      return -1;
  while (n > 0);
  do
    if (purge_batch(s, tenant_id, STATE_PART_FILES, s->partfd, &n, err) < 0)
      return -1;
  while (n > 0);
  /* No files left: the rest is rows. */
  return state_store_purge_rows(s->st, tenant_id, err);
}
