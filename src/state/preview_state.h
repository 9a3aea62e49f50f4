/* Preview rows: a box port's preview URLs (box/preview.c) and their access
 * log.  A row holds the SHA-256 of its token (and of its password), never
 * the secrets.  A preview is live until it expires or is revoked; its row
 * and log go with its box's row (state_box_delete) or its tenant. */
#ifndef HUSK_STATE_PREVIEW_STATE_H
#define HUSK_STATE_PREVIEW_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "state/state.h"
#include "util/error.h"

#define STATE_PREVIEW_ID_SIZE 32
#define STATE_PREVIEW_HASH_SIZE 32

struct state_preview {
  char id[STATE_PREVIEW_ID_SIZE]; /* "pv_" + hex */
  char tenant_id[STATE_TENANT_ID_SIZE];
  char box_id[STATE_BOX_ID_SIZE];
  int port;
  char access[16]; /* "public" | "key" | "password" */
  unsigned char token_hash[STATE_PREVIEW_HASH_SIZE];
  unsigned char password_hash[STATE_PREVIEW_HASH_SIZE];
  bool has_password;
  int64_t max_body, max_header, max_conns, idle_ms, duration_ms;
  int64_t created_ms, expires_ms, revoked_ms;
  char created_by[STATE_CREATED_BY_SIZE]; /* who made it (state.h), may be "" */
};

struct state_preview_access {
  int64_t seq, ts_ms;
  char remote[64], method[16], path[512];
  int status;
  int64_t bytes_in, bytes_out, duration_ms;
};

/* A new row for a live box of the tenant's (EINVAL: a malformed id or
 * created_by; ENOENT: no such box; EBUSY: the box has ended; EDQUOT: it
 * has `max_live` previews neither expired nor revoked).  Rows of the
 * box's that expired or were revoked beyond the newest `max_live` are
 * removed in the same transaction. */
int state_preview_insert(struct state *st, const struct state_preview *p, int max_live,
                         struct husk_err *err);
/* The tenant's preview `id` of box `box_id` (ENOENT). */
int state_preview_get(struct state *st, const char *tenant_id, const char *box_id, const char *id,
                      struct state_preview *out, struct husk_err *err);
/* The preview whose token hashes to `hash` (ENOENT). */
int state_preview_by_token(struct state *st, const unsigned char hash[STATE_PREVIEW_HASH_SIZE],
                           struct state_preview *out, struct husk_err *err);
/* The box's previews, newest first (ENOENT: no such box of the tenant's). */
int state_preview_list(struct state *st, const char *tenant_id, const char *box_id,
                       int (*cb)(void *ctx, const struct state_preview *p), void *ctx,
                       struct husk_err *err);
/* Revoke now; a revoked preview keeps its first revocation time.  ENOENT. */
int state_preview_revoke(struct state *st, const char *tenant_id, const char *box_id,
                         const char *id, struct husk_err *err);
/* One access of preview `id`, its seq to *seq_out; the log keeps the
 * newest `keep` of the preview. */
int state_preview_access_add(struct state *st, const char *id, const struct state_preview_access *a,
                             int keep, int64_t *seq_out, struct husk_err *err);
/* The counts of access `seq`, known at its end. */
int state_preview_access_end(struct state *st, int64_t seq, int64_t bytes_in, int64_t bytes_out,
                             int64_t duration_ms, struct husk_err *err);
/* Preview `id`'s log (ENOENT: not the tenant's preview of that box), oldest
 * first, seq > after_seq, at most `limit`. */
int state_preview_access_list(struct state *st, const char *tenant_id, const char *box_id,
                              const char *id, int64_t after_seq, int limit,
                              int (*cb)(void *ctx, const struct state_preview_access *a), void *ctx,
                              struct husk_err *err);

#endif
