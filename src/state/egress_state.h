/* The state of the network and secrets plane: sealed secrets
 * and each box's egress settings.  Kept apart from state.h so the plane
 * can be read on its own; same conventions (see state.h). */
#ifndef HUSK_STATE_EGRESS_STATE_H
#define HUSK_STATE_EGRESS_STATE_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

struct state;

/* Store a sealed value (create or replace).  ENOENT: no such tenant. */
int state_secret_put(struct state *st, const char *tenant, const char *name, const void *sealed,
                     size_t len, struct husk_err *err);
/* The sealed value (malloc'd); ENOENT if absent. */
int state_secret_get(struct state *st, const char *tenant, const char *name, uint8_t **sealed,
                     size_t *len, struct husk_err *err);
int state_secret_delete(struct state *st, const char *tenant, const char *name, struct husk_err *err);
/* Each of the tenant's secrets, in name order, to `cb` (called without
 * the state lock); a nonzero verdict stops the listing.  0, or -1. */
int state_secret_list(struct state *st, const char *tenant,
                      int (*cb)(void *ctx, const char *name, int64_t created_ms, int64_t updated_ms),
                      void *ctx, struct husk_err *err);

/* A box's network mode and policy (stored form); absent means "none". */
int state_box_egress_set(struct state *st, const char *box_id, const char *network,
                         const char *policy_json, struct husk_err *err);
/* ENOENT when the box has no egress row. *policy_json malloc'd. */
int state_box_egress_get(struct state *st, const char *box_id, char *network, size_t network_len,
                         char **policy_json, struct husk_err *err);

#endif
