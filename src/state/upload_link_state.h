/* Upload-link rows: an expiring URL through which a person drops files
 * into a tenant's store (storage/upload_link.c).  A row holds the SHA-256
 * of its token, never the token.  A link takes files until it expires, is
 * revoked or has taken max_files; files_used counts the slots claimed
 * (state_upload_link_claim) and not given back. */
#ifndef HUSK_STATE_UPLOAD_LINK_STATE_H
#define HUSK_STATE_UPLOAD_LINK_STATE_H

#include <stdint.h>

#include "state/state.h"
#include "util/error.h"

#define STATE_ULINK_ID_SIZE 40
#define STATE_ULINK_HASH_SIZE 32
#define STATE_ULINK_PREFIX_MAX 512 /* bytes of the key prefix */
#define STATE_ULINK_TYPES_MAX 512  /* bytes of the content-type list */

struct state_upload_link {
  char id[STATE_ULINK_ID_SIZE]; /* "ul_" + hex */
  char tenant_id[STATE_TENANT_ID_SIZE];
  unsigned char token_hash[STATE_ULINK_HASH_SIZE];
  char bucket[64];
  char prefix[STATE_ULINK_PREFIX_MAX + 1];
  char content_types[STATE_ULINK_TYPES_MAX + 1]; /* "" for any; else "a/b,c/(any)" */
  int64_t max_files, max_file_bytes, files_used, bytes_used;
  int64_t created_ms, expires_ms, revoked_ms;
  char created_by[STATE_CREATED_BY_SIZE]; /* who made it (state.h), may be "" */
};

/* A new row (files_used, bytes_used and revoked_ms 0).  EDQUOT if the
 * tenant has `max_live` links in force; its dead links beyond the newest
 * `max_live` go in the same transaction.  EINVAL for a malformed
 * created_by. */
int state_upload_link_insert(struct state *st, const struct state_upload_link *l, int max_live,
                             struct husk_err *err);
/* The link whose token hashes to `hash` (ENOENT). */
int state_upload_link_by_token(struct state *st, const unsigned char hash[STATE_ULINK_HASH_SIZE],
                               struct state_upload_link *out, struct husk_err *err);
/* The tenant's links, newest first. */
int state_upload_link_list(struct state *st, const char *tenant_id,
                           int (*cb)(void *ctx, const struct state_upload_link *l), void *ctx,
                           struct husk_err *err);
/* Revoke now (a revoked link keeps its first revocation time).  ENOENT:
 * not a link of the tenant's. */
int state_upload_link_revoke(struct state *st, const char *tenant_id, const char *id,
                             struct husk_err *err);
/* Claim one file slot of link `id` at time `now`, atomically: ENOENT (no
 * such link), EKEYREVOKED, EKEYEXPIRED, or EMLINK (all slots taken). */
int state_upload_link_claim(struct state *st, const char *id, int64_t now, struct husk_err *err);
/* Give a claimed slot back (its file was refused or failed). */
int state_upload_link_release(struct state *st, const char *id, struct husk_err *err);
/* Count a file of `bytes` stored through the link. */
int state_upload_link_stored(struct state *st, const char *id, int64_t bytes, struct husk_err *err);
/* Give back the slots claimed by uploads that never ended (the daemon was
 * killed during them): only when no upload can be in flight, i.e. as the
 * store opens.  *settled: the links that had such slots. */
int state_upload_links_settle(struct state *st, unsigned *settled, struct husk_err *err);

#endif
