/* The secrets vault: tenants' secret values, encrypted at rest.
 *
 * Values are sealed with AES-256-GCM under a key kept in its own file
 * (DATA/vault.key, 0600, created on first use), with the tenant id and the
 * secret name as associated data, so a database copy (backup, WAL, a
 * leaked dump) holds no plaintext and a sealed value cannot be moved to
 * another tenant's or name's row.  The key is held in locked memory.
 * A value is decrypted only by the proxy, at the moment it substitutes it
 * into a request, and the buffer is wiped right after.  No route returns a
 * value; listing returns names and times only. */
#ifndef HUSK_EGRESS_VAULT_H
#define HUSK_EGRESS_VAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

struct state;
struct egress_vault;

#define EGRESS_SECRET_MAX 8192 /* bytes of one value */

int egress_vault_open(struct egress_vault **out, struct state *st, const char *data_dir,
                      struct husk_err *err);
void egress_vault_close(struct egress_vault *v);

/* Store (create or replace).  The value must be 1..EGRESS_SECRET_MAX bytes
 * of printable ASCII (it goes into HTTP headers). */
int egress_vault_put(struct egress_vault *v, const char *tenant, const char *name,
                     const void *value, size_t len, struct husk_err *err);
/* ENOENT if there is no such secret. */
int egress_vault_delete(struct egress_vault *v, const char *tenant, const char *name,
                        struct husk_err *err);
int egress_vault_list(struct egress_vault *v, const char *tenant,
                      int (*cb)(void *ctx, const char *name, int64_t created_ms, int64_t updated_ms),
                      void *ctx, struct husk_err *err);
int egress_vault_exists(struct egress_vault *v, const char *tenant, const char *name,
                        struct husk_err *err);
/* Decrypt into a fresh buffer (NUL-terminated); release it with
 * egress_vault_wipe(). */
int egress_vault_get(struct egress_vault *v, const char *tenant, const char *name, char **value,
                     size_t *len, struct husk_err *err);
void egress_vault_wipe(char *value, size_t len);

/* Names of the daemon's own secrets (a tenant's single sign-on client
 * secret): no route lists, replaces, deletes or binds them, no policy can
 * name them, and the proxy never injects them -- the functions above treat
 * them as absent (put: EINVAL).  Only these reach them. */
#define EGRESS_VAULT_RESERVED_PREFIX "__husk_"
bool egress_vault_name_reserved(const char *name);
int egress_vault_put_reserved(struct egress_vault *v, const char *tenant, const char *name,
                              const void *value, size_t len, struct husk_err *err);
int egress_vault_get_reserved(struct egress_vault *v, const char *tenant, const char *name,
                              char **value, size_t *len, struct husk_err *err);
/* ENOENT if there is none. */
int egress_vault_delete_reserved(struct egress_vault *v, const char *tenant, const char *name,
                                 struct husk_err *err);

#endif
