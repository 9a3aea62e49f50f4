/* Single sign-on through a tenant's OpenID Connect provider (docs/oauth.md,
 * "Signing in with the organization's identity provider"): husk as a
 * relying party -- the authorization code flow with PKCE and a nonce, the
 * ID token verified here (oidc_jwt.c, with cjose), the person then linked
 * to (or made) a husk user and shown husk's own consent page by the front.
 *
 * The core of it: no HTTP here (the fronts parse and format), the fetches
 * to the provider through the daemon's sign-in fetcher (fetch.h).  No
 * secret (client secret, code, ID token, nonce, state, verifier, cookie)
 * is ever put in an error message. */
#ifndef HUSK_AUTH_OIDC_H
#define HUSK_AUTH_OIDC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth/auth.h"
#include "auth/fetch.h"
#include "state/auth_state.h"
#include "util/error.h"

struct egress_vault;

#define OIDC_ISSUER_MAX 512
#define OIDC_CLIENT_ID_MAX 256
#define OIDC_SECRET_MAX 8192
#define OIDC_SCOPES_MAX 256
#define OIDC_DISPLAY_MAX 128
#define OIDC_SUBJECT_MAX 255
#define OIDC_ID_TOKEN_MAX (16 * 1024)
#define OIDC_JSON_DEPTH_MAX 64
#define OIDC_PENDING_TTL_MS (10LL * 60000)
#define OIDC_CACHE_TTL_MS (10LL * 60000) /* discovery documents and JWKS */
#define OIDC_JWKS_REFETCH_MS 60000       /* an unknown kid refetches at most this often */
#define OIDC_SKEW_S 60
#define OIDC_IAT_FUTURE_S 300
/* The browser-binding cookie's value and a consent handle: 32 random
 * bytes as hex. */
#define OIDC_BINDING_LEN 64
/* The vault name of a tenant's client secret (vault.h's reserved names). */
#define OIDC_SECRET_NAME "__husk_oidc_client_secret"

/* Why a sign-in failed, as the audit's detail names it ("sso <reason>"),
 * with the errno each sets in the error. */
#define OIDC_E_UNKNOWN_STATE ENOENT        /* "unknown_state": no such pending sign-in */
#define OIDC_E_BAD_BINDING EPERM           /* "bad_binding": another browser's callback */
#define OIDC_E_PROVIDER_ERROR ECONNREFUSED /* "provider_error": the provider said error= */
#define OIDC_E_JWKS_ERROR EREMOTEIO        /* "jwks_error": the JWKS cannot be fetched or read */
#define OIDC_E_TOKEN_ERROR EPROTO          /* "token_error": the code exchange failed */
#define OIDC_E_BAD_TOKEN EBADMSG           /* "bad_token": not a well-formed JWS or claims */
#define OIDC_E_BAD_ALG ENOTSUP             /* "bad_alg": alg not allowed */
#define OIDC_E_UNKNOWN_KEY ENOKEY          /* "unknown_key": no usable key has its kid */
#define OIDC_E_BAD_SIGNATURE EKEYREJECTED  /* "bad_signature" */
#define OIDC_E_BAD_ISSUER EBADR            /* "bad_issuer" */
#define OIDC_E_BAD_AUDIENCE EBADRQC        /* "bad_audience" (aud or azp) */
#define OIDC_E_EXPIRED EKEYEXPIRED         /* "expired": exp passed, or iat in the future */
#define OIDC_E_BAD_NONCE EBADSLT           /* "bad_nonce" */
#define OIDC_E_BAD_SUBJECT ERANGE          /* "bad_subject": sub missing or too long */
#define OIDC_E_UNVERIFIED_EMAIL ENODATA    /* "unverified_email": email_verified not true */
#define OIDC_E_NO_USER ESRCH               /* "no_user": nobody to sign in as */
#define OIDC_E_DISABLED EACCES             /* "disabled": the user is disabled */
#define OIDC_E_BUSY EBUSY                  /* "busy": the fetches at once are all taken */
#define OIDC_E_NOT_SET_UP ENXIO            /* "not_set_up": no provider for the tenant */
#define OIDC_E_TOO_MANY EDQUOT             /* "too_many": pending sign-ins all taken */
/* The reason word of an errno above ("error" for anything else). */
const char *oidc_reason(int code);

struct oidc;
struct oidc_env {
  struct state *st;
  struct auth *auth;
  struct auth_fetcher *fetcher;
  struct egress_vault *vault; /* NULL: no client secrets can be kept */
  int64_t (*clock_ms)(void);  /* NULL: state_now_ms (tests set it) */
};
int oidc_open(struct oidc **out, const struct oidc_env *env, struct husk_err *err);
void oidc_close(struct oidc *o);

/* ---- configuration (operator) ---- */

enum oidc_secret_change { OIDC_SECRET_KEEP, OIDC_SECRET_SET, OIDC_SECRET_REMOVE };
struct oidc_config_in {
  const char *issuer;    /* required */
  const char *client_id; /* required */
  enum oidc_secret_change secret_change;
  const char *client_secret; /* with OIDC_SECRET_SET */
  const char *display_name;  /* NULL: the issuer's host */
  const char *claim;         /* NULL: "email" */
  const char *scopes;        /* NULL: "openid email profile" */
  const char *create_users;  /* NULL: none; "viewer" or "member" */
};
/* Check the fields (EINVAL naming the field), fetch and check discovery
 * (EBADMSG "oidc_discovery_failed", saying why; EBUSY), keep the secret
 * in the vault (ENOTSUP without one), then store.  ENOENT: no tenant. */
int oidc_config_put(struct oidc *o, const char *tenant_id, const struct oidc_config_in *in,
                    struct state_oidc_config *out, struct husk_err *err);
int oidc_config_get(struct oidc *o, const char *tenant_id, struct state_oidc_config *out,
                    struct husk_err *err);
/* The configuration, its secret and the pending sign-ins go. */
int oidc_config_delete(struct oidc *o, const char *tenant_id, struct husk_err *err);
/* The reply's JSON (never the secret: "client_secret": true|false). */
json_t *oidc_config_json(const struct state_oidc_config *c);

/* ---- the sign-in ---- */

/* The longest callback address (husk's issuer, "/oauth/callback/", a
 * tenant id). */
#define OIDC_REDIRECT_MAX 700
/* Begin a sign-in for the tenant named `tenant_name`: `params` (a JSON
 * object: the authorization request's parameters) is kept with it;
 * `redirect_uri` is husk's callback base: the provider sends the browser
 * back to it + "/" + the tenant's id (oidc_finish is given that whole).  *url: the provider's authorization URL (free() it);
 * binding: the cookie's value.  OIDC_E_NOT_SET_UP (the same for an
 * unknown tenant), OIDC_E_TOO_MANY. */
int oidc_start(struct oidc *o, const char *tenant_name, const char *params,
               const char *redirect_uri, char **url, char binding[OIDC_BINDING_LEN + 1],
               char tenant_id[STATE_TENANT_ID_SIZE], struct husk_err *err);

struct oidc_result {
  char tenant_id[STATE_TENANT_ID_SIZE]; /* known once the state is: for the audit */
  char client_id[STATE_CLIENT_ID_SIZE]; /* the OAuth client asking, likewise */
  struct auth_user user;                /* who signed in (user.id "" before) */
  char via[STATE_USER_DISPLAY_SIZE];    /* the provider's display name */
  char *params;                         /* the authorization request's (free()) */
  char handle[OIDC_BINDING_LEN + 1];    /* the consent form's */
  const char *reason;                   /* on failure: oidc_reason(err->code) */
};
/* The provider's redirect back: `state`, and `code` or `provider_error`
 * (its error= value), with the browser's `binding` cookie (NULL: none);
 * `provider_iss`, the response's iss= (RFC 9207; NULL: none), must be the
 * tenant's issuer when present (a mix-up: another provider's code).
 * The pending sign-in is used up whatever happens.  On success the person
 * is a user (found, linked or made) and a consent row waits under
 * out->handle.  Errors: the OIDC_E_* above. */
int oidc_finish(struct oidc *o, const char *state, const char *code, const char *provider_iss,
                const char *provider_error,
                const char *binding, const char *redirect_uri, struct oidc_result *out,
                struct husk_err *err);
void oidc_result_free(struct oidc_result *r);

/* The consent row of `handle` for this `binding`: with `take`, used up
 * (Allow or Deny); without, only read (to show or check the page).
 * OIDC_E_UNKNOWN_STATE, OIDC_E_BAD_BINDING, OIDC_E_DISABLED (the user
 * went since). */
int oidc_consent(struct oidc *o, const char *handle, const char *binding, bool take,
                 struct oidc_result *out, struct husk_err *err);

/* ---- ID token verification (oidc_jwt.c) ---- */

struct oidc_expect {
  const char *issuer;
  const char *client_id;
  const char *nonce;
  int64_t now_s;
};
struct oidc_claims {
  char sub[OIDC_SUBJECT_MAX + 1];
  char email[256];
  bool has_email, email_verified;
  char preferred_username[256];
  bool has_preferred_username;
  char name[OIDC_DISPLAY_MAX + 1]; /* cut at a character; "" if none */
};
/* Verify `token` (a compact JWS) against `jwks` (a JSON Web Key Set) and
 * `ex`, as docs/oauth.md lists; *out: its claims.  Errors: the OIDC_E_*
 * codes (OIDC_E_UNKNOWN_KEY: no key of the set has the token's kid -- the
 * caller may fetch the set again). */
int oidc_jwt_verify(const char *token, const json_t *jwks, const struct oidc_expect *ex,
                    struct oidc_claims *out, struct husk_err *err);

#endif
