/* People inside tenants, and husk as an OAuth 2.1 authorization server
 * (docs/oauth.md): users and their roles, password sign-in (Argon2id,
 * throttled, no enumeration), registered clients, authorization codes
 * with PKCE, access and refresh tokens (rotating, reuse revokes the
 * family).  The core of it: no HTTP here; the fronts parse and format.
 *
 * Every secret (password, code, token, client secret) is random or given
 * by a person, and only its hash is stored: SHA-256 for the random ones,
 * Argon2id for passwords.  Nothing here logs. */
#ifndef HUSK_AUTH_AUTH_H
#define HUSK_AUTH_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "state/auth_state.h"
#include "state/state.h"
#include "util/error.h"

#define AUTH_USER_ID_SIZE STATE_USER_ID_SIZE     /* "u_" + 24 hex + NUL */
#define AUTH_CLIENT_ID_SIZE STATE_CLIENT_ID_SIZE /* "oc_" + 24 hex + NUL */
#define AUTH_NAME_MAX 64       /* a user's sign-in name: a-z 0-9 . _ @ + - */
#define AUTH_DISPLAY_MAX 128   /* bytes of UTF-8 */
#define AUTH_PASSWORD_MIN 12
#define AUTH_PASSWORD_MAX 256
#define AUTH_USERS_MAX 1000 /* per tenant, not counting deleted ones */
#define AUTH_CLIENT_NAME_MAX 128
#define AUTH_REDIRECT_MAX 512 /* bytes of one redirect URI */
#define AUTH_REDIRECTS_MAX 8  /* per client */
#define AUTH_RESOURCE_MAX 512
/* "hat_"/"hrt_"/"hac_"/"hcs_" + 64 hex + NUL: access and refresh tokens,
 * codes, client secrets. */
#define AUTH_TOKEN_SIZE 69

enum auth_role { AUTH_ROLE_VIEWER, AUTH_ROLE_MEMBER, AUTH_ROLE_ADMIN };

/* Scopes, as bits; their names are auth_scope_names[bit]. */
#define AUTH_SCOPE_SANDBOX (1u << 0)       /* "sandbox" */
#define AUTH_SCOPE_SANDBOX_READ (1u << 1)  /* "sandbox:read" */
#define AUTH_SCOPE_STORAGE_READ (1u << 2)  /* "storage:read" */
#define AUTH_SCOPE_STORAGE_WRITE (1u << 3) /* "storage:write" */
#define AUTH_SCOPE_RUNS (1u << 4)          /* "runs" */
#define AUTH_SCOPE_USERS (1u << 5)         /* "users" */
#define AUTH_SCOPE_COUNT 6
#define AUTH_SCOPE_ALL ((1u << AUTH_SCOPE_COUNT) - 1)
/* What an authorization request without `scope` asks for. */
#define AUTH_SCOPE_DEFAULT                                                                   \
  (AUTH_SCOPE_SANDBOX | AUTH_SCOPE_SANDBOX_READ | AUTH_SCOPE_STORAGE_READ |                  \
   AUTH_SCOPE_STORAGE_WRITE)
extern const char *const auth_scope_names[AUTH_SCOPE_COUNT];

const char *auth_role_name(enum auth_role r);
/* "viewer", "member", "admin"; -1 for anything else. */
int auth_role_parse(const char *s, enum auth_role *out);
/* The scopes a role may be granted (docs/oauth.md's table). */
unsigned auth_role_scopes(enum auth_role r);
/* A space-separated list (RFC 6749 3.3): EINVAL naming the first unknown
 * scope.  "" is 0. */
int auth_scopes_parse(const char *s, unsigned *out, struct husk_err *err);
/* Space-separated names in bit order, into buf (256 bytes is enough). */
void auth_scopes_format(unsigned scopes, char *buf, size_t size);

struct auth_user {
  char id[AUTH_USER_ID_SIZE];
  char tenant_id[STATE_TENANT_ID_SIZE];
  char name[AUTH_NAME_MAX + 1];
  char display_name[AUTH_DISPLAY_MAX + 1];
  enum auth_role role;
  bool disabled;
  bool has_password;
  int64_t created_ms;
  int64_t deleted_ms; /* 0 unless deleted (deleted users are found by id
                         only by auth_user_get_any, for the audit) */
  char idp_subject[STATE_IDP_SUBJECT_SIZE]; /* its provider's `sub`, "" if none */
};

struct auth;
struct auth_config {
  struct state *st;
  unsigned hash_concurrency; /* password hashes at once; 0: the CPUs */
  int64_t access_ttl_s;      /* 0: 3600 */
  int64_t refresh_ttl_s;     /* 0: 30 days */
  int64_t code_ttl_s;        /* 0: 60 */
  /* For tests; 0/NULL in the daemon. */
  int64_t hash_wait_ms;      /* how long a hash waits for a slot; 0: 10 s */
  int64_t (*clock_ms)(void); /* the wall clock, ms since the epoch; NULL: state_now_ms */
};
int auth_open(struct auth **out, const struct auth_config *cfg, struct husk_err *err);
void auth_close(struct auth *a);

/* ---- users ---------------------------------------------------------------- */

/* password NULL: none (cannot sign in by password).  EINVAL (name,
 * display name, password length), EEXIST (the name is taken in the
 * tenant), EDQUOT (AUTH_USERS_MAX), ENOENT (no such tenant). */
int auth_user_create(struct auth *a, const char *tenant_id, const char *name,
                     const char *display_name, enum auth_role role, const char *password,
                     struct auth_user *out, struct husk_err *err);
/* ENOENT for another tenant's user, a deleted one, or none. */
int auth_user_get(struct auth *a, const char *tenant_id, const char *id, struct auth_user *out,
                  struct husk_err *err);
/* Like auth_user_get, but a deleted user is found too (deleted_ms != 0),
 * and tenant_id NULL means any tenant: for naming who did something. */
int auth_user_get_any(struct auth *a, const char *tenant_id, const char *id,
                      struct auth_user *out, struct husk_err *err);
/* Oldest first; deleted users are not listed.  cb returns nonzero to stop. */
int auth_user_list(struct auth *a, const char *tenant_id,
                   int (*cb)(void *ctx, const struct auth_user *u), void *ctx,
                   struct husk_err *err);
/* Each field set (non-NULL) is changed.  Changing role or password, or
 * disabling, revokes the user's tokens in the same transaction. */
struct auth_user_change {
  const char *display_name;
  const enum auth_role *role;
  const char *password;
  const bool *disabled;
  bool unlink_idp; /* forget its provider link (revokes its tokens) */
};
int auth_user_update(struct auth *a, const char *tenant_id, const char *id,
                     const struct auth_user_change *ch, struct auth_user *out,
                     struct husk_err *err);
/* Marks it deleted (the row stays for the audit; its name is free again)
 * and revokes its tokens. */
int auth_user_delete(struct auth *a, const char *tenant_id, const char *id, struct husk_err *err);

/* Sign in by the tenant's name, the user's name and a password, from
 * `source` (the client's address as the front names it; NULL: unknown).
 * One error for an unknown tenant, an unknown, disabled or deleted user
 * and a wrong password: EACCES, after the same work (a hash is always
 * computed, nothing is written).  EAGAIN: locked -- 5 failures of one
 * user (or one name typed) from one source in 15 minutes lock it for that
 * source for 15 minutes, and 100 from all sources lock it for all (the
 * failure that reaches the limit is itself EACCES, the attempts after it
 * EAGAIN whatever the password); the right password from another source
 * works while one source is locked out.  Told to the front for the audit
 * only: the page says the same as for EACCES.  A success forgives its
 * source's failures; setting a new password (auth_user_update) forgives
 * all.  The counts are in memory: a restart forgets them.  EBUSY: no hash
 * slot within 10 s.  *out_tenant_id gets the tenant of a known user even
 * on failure (for the audit), "" otherwise. */
int auth_sign_in(struct auth *a, const char *tenant_name, const char *name, const char *password,
                 const char *source, struct auth_user *out,
                 char out_tenant_id[STATE_TENANT_ID_SIZE], struct husk_err *err);

/* ---- clients (RFC 7591) --------------------------------------------------- */

struct auth_client {
  char id[AUTH_CLIENT_ID_SIZE];
  char name[AUTH_CLIENT_NAME_MAX + 1];
  char redirect_uris[AUTH_REDIRECTS_MAX][AUTH_REDIRECT_MAX + 1];
  size_t n_redirects;
  bool confidential; /* has a secret (client_secret_post / _basic) */
  char auth_method[24];
  int64_t created_ms, used_ms;
};

/* EINVAL (a redirect URI that is not https, or http to a loopback host;
 * one with a fragment, userinfo or too long; none or too many; a bad
 * name).  EDQUOT: 10000 clients (to make room, those never used -- no
 * code issued for them -- go after an hour, then those unused for 30
 * days).
 * A confidential client's secret goes to `secret` (shown once). */
int auth_client_register(struct auth *a, const char *name, const char *const *redirect_uris,
                         size_t n, const char *auth_method, struct auth_client *out,
                         char secret[AUTH_TOKEN_SIZE], struct husk_err *err);
int auth_client_get(struct auth *a, const char *id, struct auth_client *out,
                    struct husk_err *err);
/* Constant time; EACCES if wrong or the client has no secret. */
int auth_client_check_secret(struct auth *a, const struct auth_client *c, const char *secret,
                             struct husk_err *err);
/* Exact match of one registered URI; for http to a loopback host the
 * port may differ (RFC 8252 7.3). */
bool auth_client_redirect_ok(const struct auth_client *c, const char *uri);

/* ---- codes and tokens ----------------------------------------------------- */

struct auth_code_request {
  const char *client_id;
  const char *redirect_uri;
  const char *code_challenge; /* S256, 43 base64url characters */
  const char *resource;       /* the audience of the tokens */
  unsigned scopes;            /* granted: asked & the role's */
  const struct auth_user *user;
};
int auth_code_issue(struct auth *a, const struct auth_code_request *rq, char code[AUTH_TOKEN_SIZE],
                    struct husk_err *err);

struct auth_tokens {
  char access[AUTH_TOKEN_SIZE];
  char refresh[AUTH_TOKEN_SIZE];
  int64_t expires_in_s;
  unsigned scopes;
  char user_id[AUTH_USER_ID_SIZE];
  char tenant_id[STATE_TENANT_ID_SIZE];
};
/* EACCES (invalid_grant): unknown, expired or used code, another client,
 * another redirect URI, a verifier whose S256 is not the challenge.  A
 * second use of a code also revokes what the first issued.  The user
 * disabled or deleted since: EACCES.  ENOTSUP (invalid_target): a code
 * right in all else, asked for a resource other than its own (resource
 * NULL: the code's); the code is not used up. */
int auth_code_exchange(struct auth *a, const char *code, const char *client_id,
                       const char *redirect_uri, const char *verifier, const char *resource,
                       struct auth_tokens *out, struct husk_err *err);
/* Rotate: the old refresh token dies, a new pair is issued with `scopes`
 * (0: the grant's; more than the grant's: EINVAL invalid_scope) for
 * `resource` (NULL: the grant's; another: ENOTSUP invalid_target).
 * EACCES: unknown/expired/another client's.  EKEYREVOKED: a refresh token
 * already rotated was presented -- the family is revoked now. */
int auth_refresh(struct auth *a, const char *refresh, const char *client_id, unsigned scopes,
                 const char *resource, struct auth_tokens *out, struct husk_err *err);
/* RFC 7009: an access token dies; a refresh token's family dies.  Unknown
 * or another client's token: 0, nothing done (client_id NULL: any
 * client's -- holding a token is the right to end it). */
int auth_revoke(struct auth *a, const char *token, const char *client_id, struct husk_err *err);

/* What an access token allows, for a request to `resource`. */
struct auth_grant {
  char user_id[AUTH_USER_ID_SIZE];
  char tenant_id[STATE_TENANT_ID_SIZE];
  char user_name[AUTH_NAME_MAX + 1];
  char display_name[AUTH_DISPLAY_MAX + 1];
  char client_id[AUTH_CLIENT_ID_SIZE];
  char client_name[AUTH_CLIENT_NAME_MAX + 1];
  enum auth_role role;
  unsigned scopes;
  int64_t expires_ms;
  char idp_subject[STATE_IDP_SUBJECT_SIZE]; /* the user's provider link, "" if none */
};
/* ENOENT: not a token of ours.  EKEYEXPIRED, EKEYREVOKED (revoked, or its
 * user disabled or deleted).  EACCES: issued for another resource. */
int auth_token_check(struct auth *a, const char *access, const char *resource,
                     struct auth_grant *out, struct husk_err *err);

#endif
