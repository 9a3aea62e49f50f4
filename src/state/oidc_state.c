/* Single sign-on rows (see auth_state.h): a tenant's OpenID Connect
 * provider, users' links to it, and the sign-ins in progress.  What an
 * issuer, a claim or a token may be is auth/oidc.c's business; this file
 * stores rows and enforces what the schema cannot say: one provider per
 * live tenant, one live user per link, and the bound on pending rows. */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "state/auth_state.h"
#include "state/db.h"
#include "util/cleanup.h"

#define OIDC_COLUMNS                                                                               \
  "tenant_id, issuer, client_id, has_secret, display_name, claim, scopes, create_users, "          \
  "authorization_endpoint, token_endpoint, jwks_uri, token_auth, created_ms, updated_ms"

static int read_oidc(sqlite3_stmt *s, struct state_oidc_config *c, struct husk_err *err) {
  memset(c, 0, sizeof *c);
  bool ok = db_col_text(s, 0, c->tenant_id, sizeof c->tenant_id);
  ok &= db_col_text(s, 1, c->issuer, sizeof c->issuer);
  ok &= db_col_text(s, 2, c->client_id, sizeof c->client_id);
  c->has_secret = sqlite3_column_int64(s, 3) != 0;
  ok &= db_col_text(s, 4, c->display_name, sizeof c->display_name);
  ok &= db_col_text(s, 5, c->claim, sizeof c->claim);
  ok &= db_col_text(s, 6, c->scopes, sizeof c->scopes);
  ok &= db_col_text(s, 7, c->create_users, sizeof c->create_users);
  ok &= db_col_text(s, 8, c->authorization_endpoint, sizeof c->authorization_endpoint);
  ok &= db_col_text(s, 9, c->token_endpoint, sizeof c->token_endpoint);
  ok &= db_col_text(s, 10, c->jwks_uri, sizeof c->jwks_uri);
  ok &= db_col_text(s, 11, c->token_auth, sizeof c->token_auth);
  c->created_ms = sqlite3_column_int64(s, 12);
  c->updated_ms = sqlite3_column_int64(s, 13);
  if (!ok)
    return husk_fail(err, EUCLEAN, "single sign-on row has an oversized value");
  return 0;
}

static int oidc_get_locked(struct state *st, const char *tenant_id, struct state_oidc_config *out,
                           struct husk_err *err) {
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q,
                 "SELECT " OIDC_COLUMNS " FROM oidc_configs WHERE tenant_id = ?1 AND tenant_id IN "
                 "(SELECT id FROM tenants WHERE deleted_ms = 0)",
                 err) < 0)
    return -1;
  int rc = db_text(q, 1, tenant_id);
  if (rc)
    return db_fail(st, err, rc, "cannot bind tenant");
  int r = db_step_row(st, q, "cannot read the single sign-on configuration", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, ENOENT, "the tenant has no single sign-on configuration");
  struct state_oidc_config c;
  if (read_oidc(q, &c, err) < 0)
    return -1;
  if (out)
    *out = c;
  return 0;
}

int state_oidc_put(struct state *st, const struct state_oidc_config *c, int64_t now,
                   struct state_oidc_config *out, struct husk_err *err) {
  if (!c)
    return husk_fail(err, EINVAL, "configuration is missing");
  if (check_id("tenant id", c->tenant_id, sizeof c->tenant_id, err) < 0 ||
      check_text("issuer", c->issuer, sizeof c->issuer, false, err) < 0 ||
      check_text("client_id", c->client_id, sizeof c->client_id, false, err) < 0 ||
      check_text("display name", c->display_name, sizeof c->display_name, false, err) < 0 ||
      check_text("scopes", c->scopes, sizeof c->scopes, false, err) < 0 ||
      check_text("authorization endpoint", c->authorization_endpoint,
                 sizeof c->authorization_endpoint, false, err) < 0 ||
      check_text("token endpoint", c->token_endpoint, sizeof c->token_endpoint, false, err) < 0 ||
      check_text("jwks_uri", c->jwks_uri, sizeof c->jwks_uri, false, err) < 0)
    return -1;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q, "SELECT 1 FROM tenants WHERE id = ?1 AND deleted_ms = 0", err) < 0)
    return -1;
  int rc = db_text(q, 1, c->tenant_id);
  if (rc)
    return db_fail(st, err, rc, "cannot bind tenant");
  int r = db_step_row(st, q, "cannot read tenant", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, ENOENT, "tenant `%s` not found", c->tenant_id);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "INSERT INTO oidc_configs (" OIDC_COLUMNS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, "
                 "?8, ?9, ?10, ?11, ?12, ?13, ?13) ON CONFLICT (tenant_id) DO UPDATE SET issuer = "
                 "excluded.issuer, client_id = excluded.client_id, has_secret = "
                 "excluded.has_secret, display_name = excluded.display_name, claim = "
                 "excluded.claim, scopes = excluded.scopes, create_users = excluded.create_users, "
                 "authorization_endpoint = excluded.authorization_endpoint, token_endpoint = "
                 "excluded.token_endpoint, jwks_uri = excluded.jwks_uri, token_auth = "
                 "excluded.token_auth, updated_ms = excluded.updated_ms",
                 err) < 0)
    return -1;
  if ((rc = db_text(s, 1, c->tenant_id)) || (rc = db_text(s, 2, c->issuer)) ||
      (rc = db_text(s, 3, c->client_id)) || (rc = db_int(s, 4, c->has_secret)) ||
      (rc = db_text(s, 5, c->display_name)) || (rc = db_text(s, 6, c->claim)) ||
      (rc = db_text(s, 7, c->scopes)) || (rc = db_text(s, 8, c->create_users)) ||
      (rc = db_text(s, 9, c->authorization_endpoint)) || (rc = db_text(s, 10, c->token_endpoint)) ||
      (rc = db_text(s, 11, c->jwks_uri)) || (rc = db_text(s, 12, c->token_auth)) ||
      (rc = db_int(s, 13, now)))
    return db_fail(st, err, rc, "cannot bind the single sign-on configuration");
  if (db_step_done(st, s, "cannot store the single sign-on configuration", err) < 0)
    return -1;
  if (oidc_get_locked(st, c->tenant_id, out, err) < 0)
    return -1;
  return db_commit(&txn, err);
}

int state_oidc_get(struct state *st, const char *tenant_id, struct state_oidc_config *out,
                   struct husk_err *err) {
  if (check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0)
    return husk_fail(err, ENOENT, "no such tenant");
  cleanup_unlock struct state *locked = db_lock(st);
  return oidc_get_locked(st, tenant_id, out, err);
}

int state_oidc_delete(struct state *st, const char *tenant_id, struct husk_err *err) {
  if (check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0)
    return husk_fail(err, ENOENT, "no such tenant");
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s, "DELETE FROM oidc_configs WHERE tenant_id = ?1", err) < 0)
    return -1;
  int rc = db_text(s, 1, tenant_id);
  if (rc)
    return db_fail(st, err, rc, "cannot bind tenant");
  int n = db_step_done(st, s, "cannot delete the single sign-on configuration", err);
  if (n < 0)
    return -1;
  if (n == 0)
    return husk_fail(err, ENOENT, "the tenant has no single sign-on configuration");
  /* Sign-ins under way end with it. */
  cleanup_stmt sqlite3_stmt *p = NULL;
  if (db_prepare(st, &p, "DELETE FROM sso_pending WHERE tenant_id = ?1", err) < 0)
    return -1;
  if ((rc = db_text(p, 1, tenant_id)))
    return db_fail(st, err, rc, "cannot bind tenant");
  if (db_step_done(st, p, "cannot end the pending single sign-ons", err) < 0)
    return -1;
  return db_commit(&txn, err);
}

int state_oidc_find_tenant(struct state *st, const char *tenant_name, struct state_oidc_config *out,
                           struct husk_err *err) {
  static const char none[] = "single sign-on is not set up for this organization";
  if (!tenant_name || strnlen(tenant_name, 4096) >= 4096)
    return husk_fail(err, ENOENT, "%s", none);
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q,
                 "SELECT o.tenant_id, o.issuer, o.client_id, o.has_secret, o.display_name, "
                 "o.claim, o.scopes, o.create_users, o.authorization_endpoint, o.token_endpoint, "
                 "o.jwks_uri, o.token_auth, o.created_ms, o.updated_ms FROM tenants t JOIN "
                 "oidc_configs o ON o.tenant_id = t.id WHERE t.name = ?1 AND t.deleted_ms = 0",
                 err) < 0)
    return -1;
  int rc = db_text(q, 1, tenant_name);
  if (rc)
    return db_fail(st, err, rc, "cannot bind tenant");
  int r = db_step_row(st, q, "cannot read the single sign-on configuration", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, ENOENT, "%s", none);
  return read_oidc(q, out, err);
}

/* ---- users' links ---- */

static int check_link(const char *issuer, const char *subject, struct husk_err *err) {
  if (check_text("issuer", issuer, STATE_OIDC_URL_SIZE, false, err) < 0)
    return -1;
  /* The subject is the provider's text: any bytes but NUL, 1..255. */
  size_t n = subject ? strnlen(subject, STATE_IDP_SUBJECT_SIZE) : 0;
  if (n == 0 || n >= STATE_IDP_SUBJECT_SIZE)
    return husk_fail(err, EINVAL, "a subject is 1-255 bytes");
  return 0;
}

/* The user whose id the bound query `q` selects (ENOENT if none), read
 * once the lock the query ran under is released. */
static int user_of_row(struct state *st, struct state **locked, sqlite3_stmt *q,
                       const char *tenant_id, struct state_user *out, struct husk_err *err) {
  int r = db_step_row(st, q, "cannot read user", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, ENOENT, "no such user");
  char id[STATE_USER_ID_SIZE];
  if (!db_col_text(q, 0, id, sizeof id))
    return husk_fail(err, EUCLEAN, "user row has an oversized value");
  db_unlock_now(locked);
  return state_user_get(st, tenant_id, id, false, out, err);
}

int state_user_idp_find(struct state *st, const char *tenant_id, const char *issuer,
                        const char *subject, struct state_user *out, struct husk_err *err) {
  if (check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0 ||
      check_link(issuer, subject, err) < 0)
    return husk_fail(err, ENOENT, "no such user");
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q,
                 "SELECT id FROM users WHERE tenant_id = ?1 AND idp_issuer = ?2 AND idp_subject = "
                 "?3 AND deleted_ms = 0",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(q, 1, tenant_id)) || (rc = db_text(q, 2, issuer)) ||
      (rc = db_text(q, 3, subject)))
    return db_fail(st, err, rc, "cannot bind user");
  return user_of_row(st, &locked, q, tenant_id, out, err);
}

int state_user_by_name(struct state *st, const char *tenant_id, const char *name,
                       struct state_user *out, struct husk_err *err) {
  if (check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0 || !name ||
      strnlen(name, STATE_USER_NAME_SIZE) >= STATE_USER_NAME_SIZE)
    return husk_fail(err, ENOENT, "no such user");
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q,
                 "SELECT id FROM users WHERE tenant_id = ?1 AND name = ?2 AND deleted_ms = 0",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(q, 1, tenant_id)) || (rc = db_text(q, 2, name)))
    return db_fail(st, err, rc, "cannot bind user");
  return user_of_row(st, &locked, q, tenant_id, out, err);
}

int state_user_idp_link(struct state *st, const char *tenant_id, const char *id, const char *issuer,
                        const char *subject, struct husk_err *err) {
  if (check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0 ||
      check_id("user id", id, STATE_USER_ID_SIZE, err) < 0 || check_link(issuer, subject, err) < 0)
    return -1;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  /* Only a user not yet linked: a user linked to one subject never signs
   * in as another. */
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "UPDATE users SET idp_issuer = ?3, idp_subject = ?4 WHERE id = ?1 AND tenant_id "
                 "= ?2 AND deleted_ms = 0 AND idp_subject = ''",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, id)) || (rc = db_text(s, 2, tenant_id)) || (rc = db_text(s, 3, issuer)) ||
      (rc = db_text(s, 4, subject)))
    return db_fail(st, err, rc, "cannot bind user");
  int n = db_step_done(st, s, "cannot link the user", err);
  if (n < 0) {
    if (err && err->code == EEXIST)
      husk_fail(err, EEXIST, "another user is linked to this subject");
    return -1;
  }
  if (n == 0)
    return husk_fail(err, EEXIST, "the user is already linked, or gone");
  return db_commit(&txn, err);
}

/* ---- pending sign-ins ---- */

int state_sso_insert(struct state *st, const struct state_sso *p, int64_t now,
                     struct husk_err *err) {
  if (!p)
    return husk_fail(err, EINVAL, "sign-in is missing");
  if (check_id("tenant id", p->tenant_id, sizeof p->tenant_id, err) < 0 ||
      check_id_or_empty("user id", p->user_id, sizeof p->user_id, err) < 0 ||
      check_text("nonce", p->nonce, sizeof p->nonce, false, err) < 0 ||
      check_text("verifier", p->verifier, sizeof p->verifier, false, err) < 0 ||
      check_json("parameters", p->params, err) < 0)
    return -1;
  if (strcmp(p->phase, "provider") && strcmp(p->phase, "consent"))
    return husk_fail(err, EINVAL, "unknown phase");
  if (!memchr(p->params, '\0', sizeof p->params))
    return husk_fail(err, EINVAL, "parameters are not terminated");
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *sw = NULL;
  if (db_prepare(st, &sw, "DELETE FROM sso_pending WHERE expires_ms <= ?1", err) < 0)
    return -1;
  int rc = db_int(sw, 1, now);
  if (rc)
    return db_fail(st, err, rc, "cannot bind time");
  if (db_step_done(st, sw, "cannot sweep the pending sign-ins", err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q,
                 "SELECT (SELECT count(*) FROM sso_pending), (SELECT count(*) FROM tenants WHERE "
                 "id = ?1 AND deleted_ms = 0)",
                 err) < 0)
    return -1;
  if ((rc = db_text(q, 1, p->tenant_id)))
    return db_fail(st, err, rc, "cannot bind tenant");
  int r = db_step_row(st, q, "cannot count the pending sign-ins", err);
  if (r < 0)
    return -1;
  if (r == 0 || sqlite3_column_int64(q, 1) == 0)
    return husk_fail(err, ENOENT, "tenant `%s` not found", p->tenant_id);
  if (sqlite3_column_int64(q, 0) >= STATE_SSO_PENDING_MAX)
    return husk_fail(err, EDQUOT, "too many sign-ins in progress");
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "INSERT INTO sso_pending (hash, phase, tenant_id, binding_hash, nonce, verifier, "
                 "params, user_id, created_ms, expires_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, "
                 "?9, ?10)",
                 err) < 0)
    return -1;
  if ((rc = db_blob(s, 1, p->hash, sizeof p->hash)) || (rc = db_text(s, 2, p->phase)) ||
      (rc = db_text(s, 3, p->tenant_id)) ||
      (rc = db_blob(s, 4, p->binding_hash, sizeof p->binding_hash)) ||
      (rc = db_text(s, 5, p->nonce)) || (rc = db_text(s, 6, p->verifier)) ||
      (rc = db_text(s, 7, p->params)) || (rc = db_text(s, 8, p->user_id)) ||
      (rc = db_int(s, 9, p->created_ms)) || (rc = db_int(s, 10, p->expires_ms)))
    return db_fail(st, err, rc, "cannot bind the sign-in");
  if (db_step_done(st, s, "cannot record the sign-in", err) < 0)
    return -1;
  return db_commit(&txn, err);
}

int state_sso_get(struct state *st, const unsigned char hash[STATE_OAUTH_HASH_SIZE],
                  const char *phase, bool take, int64_t now, struct state_sso *out,
                  struct husk_err *err) {
  if (!hash || !phase)
    return husk_fail(err, ENOENT, "no such sign-in");
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q,
                 "SELECT phase, tenant_id, binding_hash, nonce, verifier, params, user_id, "
                 "created_ms, expires_ms FROM sso_pending WHERE hash = ?1",
                 err) < 0)
    return -1;
  int rc = db_blob(q, 1, hash, STATE_OAUTH_HASH_SIZE);
  if (rc)
    return db_fail(st, err, rc, "cannot bind the sign-in");
  int r = db_step_row(st, q, "cannot read the sign-in", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, ENOENT, "no such sign-in");
  struct state_sso p;
  memset(&p, 0, sizeof p);
  memcpy(p.hash, hash, sizeof p.hash);
  bool ok = db_col_text(q, 0, p.phase, sizeof p.phase);
  ok &= db_col_text(q, 1, p.tenant_id, sizeof p.tenant_id);
  const void *bh = sqlite3_column_blob(q, 2);
  ok &= bh && sqlite3_column_bytes(q, 2) == STATE_OAUTH_HASH_SIZE;
  if (bh && ok)
    memcpy(p.binding_hash, bh, sizeof p.binding_hash);
  ok &= db_col_text(q, 3, p.nonce, sizeof p.nonce);
  ok &= db_col_text(q, 4, p.verifier, sizeof p.verifier);
  ok &= db_col_text(q, 5, p.params, sizeof p.params);
  ok &= db_col_text(q, 6, p.user_id, sizeof p.user_id);
  p.created_ms = sqlite3_column_int64(q, 7);
  p.expires_ms = sqlite3_column_int64(q, 8);
  if (!ok)
    return husk_fail(err, EUCLEAN, "sign-in row has an oversized value");
  bool live = !strcmp(p.phase, phase) && p.expires_ms > now;
  /* A take removes the row whatever it is: an expired one or one of the
   * other phase is of no more use either. */
  if (take) {
    cleanup_stmt sqlite3_stmt *d = NULL;
    if (db_prepare(st, &d, "DELETE FROM sso_pending WHERE hash = ?1", err) < 0)
      return -1;
    if ((rc = db_blob(d, 1, hash, STATE_OAUTH_HASH_SIZE)))
      return db_fail(st, err, rc, "cannot bind the sign-in");
    if (db_step_done(st, d, "cannot use up the sign-in", err) < 0)
      return -1;
    if (db_commit(&txn, err) < 0)
      return -1;
  }
  if (!live)
    return husk_fail(err, ENOENT, "no such sign-in");
  if (out)
    *out = p;
  return 0;
}
