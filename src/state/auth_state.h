/* The rows behind users and OAuth (src/auth/, docs/oauth.md): users
 * (users.c), and OAuth clients, authorization codes and tokens
 * (oauth_state.c).  This layer stores and checks rows; what a name, a URI
 * or a password may be, and every secret, is src/auth/'s business: no
 * secret reaches these functions, only its hash (SHA-256 of a random one,
 * the Argon2id encoded string of a password).
 *
 * Times: every function that compares with the clock takes `now` (ms since
 * the epoch) from its caller, so one clock (auth_config.clock_ms, for
 * tests) governs expiry and lockout.
 *
 * Errors as in state.h; in particular ENOENT for another tenant's row. */
#ifndef HUSK_STATE_AUTH_STATE_H
#define HUSK_STATE_AUTH_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "state/state.h"
#include "util/error.h"

#define STATE_OAUTH_HASH_SIZE 32        /* SHA-256 of a code, token or client secret */
#define STATE_USER_NAME_SIZE 65         /* 64 bytes and the NUL */
#define STATE_USER_DISPLAY_SIZE 129     /* 128 bytes of UTF-8 and the NUL */
#define STATE_USER_ROLE_SIZE 8          /* "viewer", "member", "admin" */
#define STATE_PASSWORD_HASH_SIZE 256    /* an Argon2id encoded string */
#define STATE_OAUTH_NAME_SIZE 129       /* a client's name */
#define STATE_OAUTH_URI_SIZE 513        /* a redirect URI or a resource */
#define STATE_OAUTH_URIS_JSON_SIZE 8192 /* a client's redirect URIs, a JSON array */
#define STATE_OAUTH_METHOD_SIZE 24      /* token_endpoint_auth_method */
#define STATE_OAUTH_CHALLENGE_SIZE 44   /* a PKCE S256 challenge: 43 characters */
#define STATE_OAUTH_FAMILY_SIZE 28      /* "f_" + 24 hex: one sign-in's tokens */
#define STATE_OIDC_URL_SIZE 513         /* an issuer or an endpoint: 512 bytes */
#define STATE_OIDC_CLIENT_ID_SIZE 257   /* a client_id at the provider */
#define STATE_IDP_SUBJECT_SIZE 256      /* an ID token's sub: 1..255 bytes */
#define STATE_OIDC_SCOPES_SIZE 257
#define STATE_SSO_PENDING_MAX 1000      /* single sign-ons in progress, in all */

/* ---- users (users.c) ------------------------------------------------------ */

struct state_user {
  char id[STATE_USER_ID_SIZE];
  char tenant_id[STATE_TENANT_ID_SIZE];
  char name[STATE_USER_NAME_SIZE];
  char display_name[STATE_USER_DISPLAY_SIZE];
  char role[STATE_USER_ROLE_SIZE];
  char password_hash[STATE_PASSWORD_HASH_SIZE]; /* "" when it has none */
  bool disabled;
  /* The durable sign-in throttle of earlier versions: read (a lock still
   * holds until its time), cleared, no longer counted. */
  int64_t failed_count, failed_since_ms, locked_until_ms;
  int64_t created_ms, deleted_ms;
  /* Its link to the tenant's provider ("" when none): set only by
   * state_user_idp_link, cleared by a change's unlink_idp. */
  char idp_issuer[STATE_OIDC_URL_SIZE];
  char idp_subject[STATE_IDP_SUBJECT_SIZE];
};

/* A new row (its failure counts 0).  ENOENT: no such tenant, or it is being
 * deleted; EDQUOT: the tenant has `max_users` users not deleted; EEXIST:
 * the name is taken by one of them. */
int state_user_insert(struct state *st, const struct state_user *u, int max_users,
                      struct husk_err *err);
/* User `id` of `tenant_id` (NULL: of any tenant).  A deleted user is found
 * only if `deleted_too`.  ENOENT otherwise. */
int state_user_get(struct state *st, const char *tenant_id, const char *id, bool deleted_too,
                   struct state_user *out, struct husk_err *err);
/* The tenant's users that are not deleted, oldest first. */
int state_user_list(struct state *st, const char *tenant_id,
                    int (*cb)(void *ctx, const struct state_user *u), void *ctx,
                    struct husk_err *err);

/* Each field set (non-NULL) is changed.  In the same transaction, the
 * user's tokens are revoked and its codes removed when the role changes,
 * a password is set, or the user is disabled; a password set also clears
 * the sign-in throttle (an administrator's reset unlocks).  ENOENT: not a
 * live user of the tenant. */
struct state_user_change {
  const char *display_name;
  const char *role;
  const char *password_hash;
  const bool *disabled;
  bool unlink_idp; /* forget its provider link (and revoke its tokens) */
};
int state_user_update(struct state *st, const char *tenant_id, const char *id,
                      const struct state_user_change *ch, int64_t now, struct state_user *out,
                      struct husk_err *err);
/* Mark deleted (the name is free again) and revoke its tokens. */
int state_user_delete(struct state *st, const char *tenant_id, const char *id, int64_t now,
                      struct husk_err *err);

/* For signing in: the live user `name` of the live tenant named
 * `tenant_name`.  ENOENT for anything else (one answer: the caller must
 * not tell them apart). */
int state_user_find(struct state *st, const char *tenant_name, const char *name,
                    struct state_user *out, struct husk_err *err);
/* A sign-in succeeded: in a transaction, check the user is still live,
 * enabled and not locked (locked_until_ms: the durable lock of earlier
 * versions; the throttle is now auth/throttle.c's, in memory) and clear
 * any old failure count: EAGAIN if locked, ENOENT if gone or disabled. */
int state_user_sign_in_ok(struct state *st, const char *id, int64_t now, struct husk_err *err);

/* ---- OAuth clients (oauth_state.c) --------------------------------------- */

struct state_oauth_client {
  char id[STATE_CLIENT_ID_SIZE];
  char name[STATE_OAUTH_NAME_SIZE];
  char redirect_uris[STATE_OAUTH_URIS_JSON_SIZE]; /* a JSON array of strings */
  char auth_method[STATE_OAUTH_METHOD_SIZE];
  bool has_secret;
  unsigned char secret_hash[STATE_OAUTH_HASH_SIZE];
  int64_t created_ms, used_ms; /* used_ms: its last code or token issued, 0 never */
};

/* A new row.  With `max_clients` rows already, some go, with their codes
 * and tokens: first those never used (no code ever issued for them)
 * created before `unused_before_ms`, oldest first; then those whose last
 * use (or creation) is before `idle_before_ms`, oldest first; if none may
 * go: EDQUOT. */
int state_oauth_client_insert(struct state *st, const struct state_oauth_client *c, int max_clients,
                              int64_t idle_before_ms, int64_t unused_before_ms,
                              struct husk_err *err);
int state_oauth_client_get(struct state *st, const char *id, struct state_oauth_client *out,
                           struct husk_err *err);

/* ---- codes and tokens (oauth_state.c) ------------------------------------- */

struct state_oauth_code {
  unsigned char hash[STATE_OAUTH_HASH_SIZE];
  char client_id[STATE_CLIENT_ID_SIZE];
  char user_id[STATE_USER_ID_SIZE];
  char redirect_uri[STATE_OAUTH_URI_SIZE];
  char challenge[STATE_OAUTH_CHALLENGE_SIZE];
  char resource[STATE_OAUTH_URI_SIZE];
  unsigned scopes;
  int64_t expires_ms;
  char family[STATE_OAUTH_FAMILY_SIZE];
};
/* A new code for a live, enabled user of a live tenant (ENOENT otherwise)
 * and an existing client (ENOENT).  Expired codes go first (a bounded
 * batch each time, so the table stays bounded by the codes of the last
 * hour). */
int state_oauth_code_insert(struct state *st, const struct state_oauth_code *c, int64_t now,
                            struct husk_err *err);

/* A new access and refresh token pair, by hash. */
struct state_oauth_pair {
  unsigned char access_hash[STATE_OAUTH_HASH_SIZE];
  unsigned char refresh_hash[STATE_OAUTH_HASH_SIZE];
  int64_t access_expires_ms, refresh_expires_ms;
};
/* What a pair was issued for. */
struct state_oauth_grant {
  char user_id[STATE_USER_ID_SIZE];
  char tenant_id[STATE_TENANT_ID_SIZE];
  char client_id[STATE_CLIENT_ID_SIZE];
  char resource[STATE_OAUTH_URI_SIZE];
  char family[STATE_OAUTH_FAMILY_SIZE];
  unsigned scopes; /* the access token's */
};

/* Exchange the code hashing to `code_hash` for `pair`, in one transaction:
 * EACCES (one message, whatever the reason) unless the code exists, is not
 * expired or used, was issued to `client_id` for `redirect_uri` (byte for
 * byte) with `challenge` (the S256 of the verifier) and `resource` (NULL:
 * the code's), and its user is still live and enabled.  A code used before
 * revokes the family issued from it (committed) and fails with EACCES. */
int state_oauth_code_redeem(struct state *st, const unsigned char code_hash[STATE_OAUTH_HASH_SIZE],
                            const char *client_id, const char *redirect_uri, const char *challenge,
                            const char *resource, const struct state_oauth_pair *pair, int64_t now,
                            struct state_oauth_grant *out, struct husk_err *err);
/* Rotate the refresh token hashing to `refresh_hash`: it dies and `pair`
 * takes over its family, the new refresh token with the grant's scopes,
 * the access token with `scopes` (0: the grant's).  EACCES: unknown,
 * expired, revoked, another client's, or its user gone or disabled;
 * EINVAL: `scopes` beyond the grant's; ENOTSUP: `resource` (NULL: the
 * grant's) another; EKEYREVOKED: it was rotated before -- reuse: its family
 * is revoked (committed). */
int state_oauth_refresh(struct state *st, const unsigned char refresh_hash[STATE_OAUTH_HASH_SIZE],
                        const char *client_id, unsigned scopes, const char *resource,
                        const struct state_oauth_pair *pair, int64_t now,
                        struct state_oauth_grant *out, struct husk_err *err);
/* An access token dies; a refresh token's family dies.  Unknown, or
 * another client's (client_id NULL: any): 0, nothing done. */
int state_oauth_revoke(struct state *st, const unsigned char hash[STATE_OAUTH_HASH_SIZE],
                       const char *client_id, int64_t now, struct husk_err *err);

/* An access token's row with its user and client, read as they are now. */
struct state_oauth_access {
  struct state_oauth_grant grant;
  int64_t expires_ms, revoked_ms;
  char user_name[STATE_USER_NAME_SIZE];
  char display_name[STATE_USER_DISPLAY_SIZE];
  char role[STATE_USER_ROLE_SIZE];
  bool user_disabled, user_deleted, tenant_deleted;
  char client_name[STATE_OAUTH_NAME_SIZE];
  char idp_subject[STATE_IDP_SUBJECT_SIZE]; /* the user's provider link, "" if none */
};
/* ENOENT: no access token hashes to `hash`. */
int state_oauth_access_get(struct state *st, const unsigned char hash[STATE_OAUTH_HASH_SIZE],
                           struct state_oauth_access *out, struct husk_err *err);

/* ---- single sign-on (oidc_state.c) ---------------------------------------- */

/* A tenant's provider, as auth/oidc.c checked it. */
struct state_oidc_config {
  char tenant_id[STATE_TENANT_ID_SIZE];
  char issuer[STATE_OIDC_URL_SIZE];
  char client_id[STATE_OIDC_CLIENT_ID_SIZE];
  bool has_secret;
  char display_name[STATE_USER_DISPLAY_SIZE];
  char claim[24];       /* "email", "preferred_username", "sub" */
  char scopes[STATE_OIDC_SCOPES_SIZE];
  char create_users[STATE_USER_ROLE_SIZE]; /* "" (none), "viewer", "member" */
  char authorization_endpoint[STATE_OIDC_URL_SIZE];
  char token_endpoint[STATE_OIDC_URL_SIZE];
  char jwks_uri[STATE_OIDC_URL_SIZE];
  char token_auth[24]; /* "client_secret_basic" or "client_secret_post" */
  int64_t created_ms, updated_ms;
};
/* Create or replace (created_ms kept when it replaces).  ENOENT: no live
 * tenant. */
int state_oidc_put(struct state *st, const struct state_oidc_config *c, int64_t now,
                   struct state_oidc_config *out, struct husk_err *err);
/* ENOENT: none (or the tenant is deleted). */
int state_oidc_get(struct state *st, const char *tenant_id, struct state_oidc_config *out,
                   struct husk_err *err);
/* ENOENT: none.  The tenant's pending single sign-ons go too. */
int state_oidc_delete(struct state *st, const char *tenant_id, struct husk_err *err);
/* The tenant id of the live tenant named `name` that has a provider:
 * ENOENT for an unknown tenant and one without (one answer). */
int state_oidc_find_tenant(struct state *st, const char *tenant_name,
                           struct state_oidc_config *out, struct husk_err *err);

/* The live user `name` of `tenant_id`: ENOENT if none. */
int state_user_by_name(struct state *st, const char *tenant_id, const char *name,
                       struct state_user *out, struct husk_err *err);
/* The live user of `tenant_id` linked to (issuer, subject): ENOENT if none. */
int state_user_idp_find(struct state *st, const char *tenant_id, const char *issuer,
                        const char *subject, struct state_user *out, struct husk_err *err);
/* Link live user `id` to (issuer, subject), in a transaction: EEXIST when
 * the user is already linked (to anyone) or another live user has that
 * link; ENOENT if the user is not a live user of the tenant. */
int state_user_idp_link(struct state *st, const char *tenant_id, const char *id,
                        const char *issuer, const char *subject, struct husk_err *err);

/* A single sign-on in progress (see schema.c's sso_pending). */
struct state_sso {
  unsigned char hash[STATE_OAUTH_HASH_SIZE];         /* of state, or of the consent handle */
  char phase[12];                                    /* "provider" or "consent" */
  char tenant_id[STATE_TENANT_ID_SIZE];
  unsigned char binding_hash[STATE_OAUTH_HASH_SIZE]; /* of the browser's cookie */
  char nonce[96];
  char verifier[96];
  char params[12288]; /* the authorization request's parameters, a JSON object */
  char user_id[STATE_USER_ID_SIZE];                  /* "" until the provider vouched */
  int64_t created_ms, expires_ms;
};
/* A new row; expired rows go first.  EDQUOT: STATE_SSO_PENDING_MAX live
 * rows; ENOENT: no live tenant. */
int state_sso_insert(struct state *st, const struct state_sso *p, int64_t now,
                     struct husk_err *err);
/* The live (not expired) row of `phase` hashing to `hash`; with `take`,
 * removed in the same step (a second take finds nothing).  ENOENT. */
int state_sso_get(struct state *st, const unsigned char hash[STATE_OAUTH_HASH_SIZE],
                  const char *phase, bool take, int64_t now, struct state_sso *out,
                  struct husk_err *err);

#endif
