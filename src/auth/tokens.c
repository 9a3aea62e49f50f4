/* Authorization codes (PKCE S256 only), access and refresh tokens.
 *
 * Every code and token is 256 random bits behind a prefix (hac_, hat_,
 * hrt_) that says what it is, so one kind is never taken for another and a
 * malformed one is refused before anything is hashed or read.  Only its
 * SHA-256 is stored (state/oauth_state.c).
 *
 * A code lives code_ttl (60 s), is bound to its client, redirect URI,
 * PKCE challenge and resource, and is used once: a second use revokes the
 * family of tokens the first issued (RFC 9700 4.5.3).  A refresh token is
 * rotated on each use (OAuth 2.1 4.3.1): the old one dies, and presenting
 * it again revokes the whole family (someone else holds it).  A new refresh
 * token lives refresh_ttl from its rotation: a connector in use stays
 * signed in, one idle for refresh_ttl must sign in again. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "auth/auth_internal.h"
#include "util/base64.h"

#define VERIFIER_MIN 43 /* RFC 7636 4.1 */
#define VERIFIER_MAX 128
#define CHALLENGE_LEN 43 /* base64url of 32 bytes, unpadded */

/* The plaintext of a new pair while it exists on our side, wiped at scope
 * exit however the function leaves. */
struct pair_secret {
  char access[AUTH_TOKEN_SIZE];
  char refresh[AUTH_TOKEN_SIZE];
};
static void pair_secret_wipe(struct pair_secret *p) { auth_wipe(p, sizeof *p); }
#define cleanup_pair __attribute__((cleanup(pair_secret_wipe)))

static int pair_new(struct auth *a, struct pair_secret *plain, struct state_oauth_pair *p,
                    int64_t now, struct husk_err *err) {
  if (auth_secret_new(AUTH_PREFIX_ACCESS, plain->access, p->access_hash, err) < 0 ||
      auth_secret_new(AUTH_PREFIX_REFRESH, plain->refresh, p->refresh_hash, err) < 0)
    return -1;
  p->access_expires_ms = now + a->access_ttl_ms;
  p->refresh_expires_ms = now + a->refresh_ttl_ms;
  return 0;
}

static void tokens_out(const struct auth *a, const struct pair_secret *plain,
                       const struct state_oauth_grant *g, struct auth_tokens *out) {
  if (!out)
    return;
  memset(out, 0, sizeof *out);
  memcpy(out->access, plain->access, sizeof out->access);
  memcpy(out->refresh, plain->refresh, sizeof out->refresh);
  out->expires_in_s = a->access_ttl_ms / 1000;
  out->scopes = g->scopes;
  memcpy(out->user_id, g->user_id, sizeof out->user_id);
  memcpy(out->tenant_id, g->tenant_id, sizeof out->tenant_id);
}

/* A resource (the tokens' audience): printable ASCII, 1..AUTH_RESOURCE_MAX. */
static int check_resource(const char *s, struct husk_err *err) {
  size_t n = s ? strnlen(s, AUTH_RESOURCE_MAX + 1) : 0;
  if (n == 0 || n > AUTH_RESOURCE_MAX)
    return husk_fail(err, EINVAL, "a resource is 1 to %d bytes", AUTH_RESOURCE_MAX);
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
      return husk_fail(err, EINVAL, "a resource is printable ASCII");
  return 0;
}

static bool b64url(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!b64_char_ok(s[i], B64_URL))
      return false;
  return true;
}

int auth_code_issue(struct auth *a, const struct auth_code_request *rq, char code[AUTH_TOKEN_SIZE],
                    struct husk_err *err) {
  if (!rq || !rq->user || !code)
    return husk_fail(err, EINVAL, "authorization request is missing");
  struct auth_client client;
  if (auth_client_get(a, rq->client_id, &client, err) < 0)
    return -1;
  if (!auth_client_redirect_ok(&client, rq->redirect_uri))
    return husk_fail(err, EINVAL, "the redirect URI is not one the client registered");
  const char *ch = rq->code_challenge;
  if (!ch || strnlen(ch, CHALLENGE_LEN + 1) != CHALLENGE_LEN || !b64url(ch, CHALLENGE_LEN))
    return husk_fail(err, EINVAL, "code_challenge is %d characters of base64url (S256)",
                     CHALLENGE_LEN);
  if (check_resource(rq->resource, err) < 0)
    return -1;
  /* The role as it is now, not as the caller read it. */
  struct auth_user u;
  struct husk_err e;
  if (auth_user_get(a, rq->user->tenant_id, rq->user->id, &u, &e) < 0) {
    if (e.code != ENOENT) {
      if (err)
        *err = e;
      return -1;
    }
    return husk_fail(err, EACCES, "the user cannot sign in");
  }
  if (u.disabled)
    return husk_fail(err, EACCES, "the user cannot sign in");
  if (rq->scopes == 0 || (rq->scopes & ~auth_role_scopes(u.role)))
    return husk_fail(err, EINVAL, "the scopes granted must be some of those the role allows");

  struct state_oauth_code c = {.scopes = rq->scopes};
  int64_t now = auth_now(a);
  c.expires_ms = now + a->code_ttl_ms;
  memcpy(c.client_id, client.id, sizeof c.client_id);
  memcpy(c.user_id, u.id, sizeof c.user_id);
  snprintf(c.redirect_uri, sizeof c.redirect_uri, "%s", rq->redirect_uri);
  memcpy(c.challenge, ch, CHALLENGE_LEN + 1);
  snprintf(c.resource, sizeof c.resource, "%s", rq->resource);
  if (state_new_id("f_", c.family, sizeof c.family, err) < 0)
    return -1;
  char plain[AUTH_TOKEN_SIZE];
  if (auth_secret_new(AUTH_PREFIX_CODE, plain, c.hash, err) < 0)
    return -1;
  int r = state_oauth_code_insert(a->st, &c, now, &e);
  if (r == 0)
    memcpy(code, plain, AUTH_TOKEN_SIZE);
  auth_wipe(plain, sizeof plain);
  if (r < 0) {
    if (e.code == ENOENT)
      return husk_fail(err, EACCES, "the user cannot sign in");
    if (err)
      *err = e;
    return -1;
  }
  return 0;
}

int auth_code_exchange(struct auth *a, const char *code, const char *client_id,
                       const char *redirect_uri, const char *verifier, const char *resource,
                       struct auth_tokens *out, struct husk_err *err) {
  static const char denied[] = "invalid authorization code";
  if (!auth_secret_well_formed(AUTH_PREFIX_CODE, code) || !client_id || !redirect_uri)
    return husk_fail(err, EACCES, "%s", denied);
  /* RFC 7636 4.1: 43 to 128 of the unreserved characters. */
  size_t vn = verifier ? strnlen(verifier, VERIFIER_MAX + 1) : 0;
  if (vn < VERIFIER_MIN || vn > VERIFIER_MAX)
    return husk_fail(err, EACCES, "%s", denied);
  for (size_t i = 0; i < vn; i++) {
    char c = verifier[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
          c == '.' || c == '_' || c == '~'))
      return husk_fail(err, EACCES, "%s", denied);
  }
  unsigned char digest[STATE_OAUTH_HASH_SIZE], code_hash[STATE_OAUTH_HASH_SIZE];
  char challenge[CHALLENGE_LEN + 1];
  if (auth_sha256(verifier, vn, digest, err) < 0 ||
      auth_sha256(code, AUTH_TOKEN_SIZE - 1, code_hash, err) < 0)
    return -1;
  b64_encode_to(challenge, digest, sizeof digest, B64_URL);

  int64_t now = auth_now(a);
  cleanup_pair struct pair_secret plain;
  struct state_oauth_pair pair;
  struct state_oauth_grant g;
  if (pair_new(a, &plain, &pair, now, err) < 0 ||
      state_oauth_code_redeem(a->st, code_hash, client_id, redirect_uri, challenge, resource, &pair,
                              now, &g, err) < 0)
    return -1;
  tokens_out(a, &plain, &g, out);
  return 0;
}

int auth_refresh(struct auth *a, const char *refresh, const char *client_id, unsigned scopes,
                 const char *resource, struct auth_tokens *out, struct husk_err *err) {
  if (!auth_secret_well_formed(AUTH_PREFIX_REFRESH, refresh) || !client_id)
    return husk_fail(err, EACCES, "invalid refresh token");
  if (scopes & ~AUTH_SCOPE_ALL)
    return husk_fail(err, EINVAL, "the scopes asked exceed the grant's");
  unsigned char hash[STATE_OAUTH_HASH_SIZE];
  if (auth_sha256(refresh, AUTH_TOKEN_SIZE - 1, hash, err) < 0)
    return -1;
  int64_t now = auth_now(a);
  cleanup_pair struct pair_secret plain;
  struct state_oauth_pair pair;
  struct state_oauth_grant g;
  if (pair_new(a, &plain, &pair, now, err) < 0 ||
      state_oauth_refresh(a->st, hash, client_id, scopes, resource, &pair, now, &g, err) < 0)
    return -1;
  tokens_out(a, &plain, &g, out);
  return 0;
}

int auth_revoke(struct auth *a, const char *token, const char *client_id, struct husk_err *err) {
  if (!auth_secret_well_formed(AUTH_PREFIX_ACCESS, token) &&
      !auth_secret_well_formed(AUTH_PREFIX_REFRESH, token))
    return 0; /* RFC 7009 2.2: an invalid token is no error */
  unsigned char hash[STATE_OAUTH_HASH_SIZE];
  if (auth_sha256(token, AUTH_TOKEN_SIZE - 1, hash, err) < 0)
    return -1;
  return state_oauth_revoke(a->st, hash, client_id, auth_now(a), err);
}

int auth_token_check(struct auth *a, const char *access, const char *resource,
                     struct auth_grant *out, struct husk_err *err) {
  if (!resource)
    return husk_fail(err, EINVAL, "the resource a token is checked for is missing");
  if (!auth_secret_well_formed(AUTH_PREFIX_ACCESS, access))
    return husk_fail(err, ENOENT, "not an access token");
  unsigned char hash[STATE_OAUTH_HASH_SIZE];
  if (auth_sha256(access, AUTH_TOKEN_SIZE - 1, hash, err) < 0)
    return -1;
  struct state_oauth_access row;
  if (state_oauth_access_get(a->st, hash, &row, err) < 0)
    return -1;
  if (row.revoked_ms != 0 || row.user_disabled || row.user_deleted || row.tenant_deleted)
    return husk_fail(err, EKEYREVOKED, "the access token was revoked");
  if (row.expires_ms <= auth_now(a))
    return husk_fail(err, EKEYEXPIRED, "the access token has expired");
  if (strcmp(row.grant.resource, resource) != 0)
    return husk_fail(err, EACCES, "the access token was issued for another resource");
  struct auth_grant g = {.expires_ms = row.expires_ms};
  if (auth_role_parse(row.role, &g.role) < 0)
    return husk_fail(err, EUCLEAN, "user `%s` has an unknown role", row.grant.user_id);
  /* A role change revokes the tokens; the mask holds even if it did not. */
  g.scopes = row.grant.scopes & auth_role_scopes(g.role);
  _Static_assert(sizeof g.user_name == sizeof row.user_name, "user name sizes");
  _Static_assert(sizeof g.display_name == sizeof row.display_name, "display name sizes");
  _Static_assert(sizeof g.client_name == sizeof row.client_name, "client name sizes");
  memcpy(g.user_id, row.grant.user_id, sizeof g.user_id);
  memcpy(g.tenant_id, row.grant.tenant_id, sizeof g.tenant_id);
  memcpy(g.user_name, row.user_name, sizeof g.user_name);
  memcpy(g.display_name, row.display_name, sizeof g.display_name);
  memcpy(g.client_id, row.grant.client_id, sizeof g.client_id);
  memcpy(g.client_name, row.client_name, sizeof g.client_name);
  memcpy(g.idp_subject, row.idp_subject, sizeof g.idp_subject);
  if (out)
    *out = g;
  return 0;
}
