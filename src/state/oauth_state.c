/* OAuth rows (see auth_state.h): registered clients, authorization codes,
 * access and refresh tokens -- each secret by its SHA-256 only.
 *
 * Every decision that reads a row and then changes it (redeeming a code,
 * rotating a refresh token) is one transaction, so two requests racing
 * with the same code or refresh token cannot both win: the second finds it
 * used and revokes the family.
 *
 * Lookups are by the hash (the primary key).  The B-tree search compares
 * hashes in variable time, which tells at most something about the hash of
 * a guess, never about a valid secret (see keys.c).
 *
 * Bounded growth: each code issued removes a batch of codes expired for a
 * while, each token pair issued a batch of expired tokens, and a family
 * keeps its newest FAMILY_KEEP tokens only; clients are capped by their
 * caller. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include <openssl/crypto.h>

#include "state/auth_state.h"
#include "state/db.h"
#include "util/cleanup.h"

/* Rows removed, at most, by one sweep of expired codes or tokens: more than
 * one insert adds, so the tables shrink back after a burst. */
#define SWEEP_BATCH 64
/* A used or expired code stays this long past its expiry, so that a late
 * replay of it still revokes what it was exchanged for. */
#define CODE_KEEP_MS (3600LL * 1000)
/* Tokens one sign-in keeps (rotated refresh tokens among them, which catch
 * a reuse): a client refreshing in a loop does not grow the table. */
#define FAMILY_KEEP 64

/* ---- clients ---- */

#define CLIENT_COLUMNS "id, name, redirect_uris, auth_method, secret_hash, created_ms, used_ms"

static int read_client(sqlite3_stmt *s, void *row, struct husk_err *err) {
  struct state_oauth_client *c = row;
  memset(c, 0, sizeof *c);
  bool ok = db_col_text(s, 0, c->id, sizeof c->id);
  ok &= db_col_text(s, 1, c->name, sizeof c->name);
  ok &= db_col_text(s, 2, c->redirect_uris, sizeof c->redirect_uris);
  ok &= db_col_text(s, 3, c->auth_method, sizeof c->auth_method);
  if (sqlite3_column_type(s, 4) == SQLITE_BLOB) {
    if (sqlite3_column_bytes(s, 4) == STATE_OAUTH_HASH_SIZE) {
      memcpy(c->secret_hash, sqlite3_column_blob(s, 4), STATE_OAUTH_HASH_SIZE);
      c->has_secret = true;
    } else {
      ok = false;
    }
  }
  c->created_ms = sqlite3_column_int64(s, 5);
  c->used_ms = sqlite3_column_int64(s, 6);
  if (!ok)
    return husk_fail(err, EUCLEAN, "OAuth client row has an oversized value");
  return 0;
}

int state_oauth_client_insert(struct state *st, const struct state_oauth_client *c, int max_clients,
                              int64_t idle_before_ms, int64_t unused_before_ms,
                              struct husk_err *err) {
  if (!c)
    return husk_fail(err, EINVAL, "OAuth client is missing");
  if (check_id("client id", c->id, sizeof c->id, err) < 0 ||
      check_text("client name", c->name, sizeof c->name, true, err) < 0 ||
      check_text("redirect URIs", c->redirect_uris, sizeof c->redirect_uris, false, err) < 0 ||
      check_text("token endpoint auth method", c->auth_method, sizeof c->auth_method, false, err) <
          0)
    return -1;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  int rc;
  if (max_clients > 0) {
    cleanup_stmt sqlite3_stmt *q = NULL;
    if (db_prepare(st, &q, "SELECT count(*) FROM oauth_clients", err) < 0)
      return -1;
    int r = db_step_row(st, q, "cannot count OAuth clients", err);
    if (r < 0)
      return -1;
    int64_t n = r ? sqlite3_column_int64(q, 0) : 0;
    if (n >= max_clients) {
      /* Those never used (no sign-in ever made a code for them) go first,
       * once they are old enough that a sign-in would have come: a flood
       * of registrations cannot hold the table.  Then the longest idle,
       * their codes and tokens with them (ON DELETE CASCADE): a client
       * unused that long has no live token. */
      cleanup_stmt sqlite3_stmt *d = NULL;
      if (db_prepare(st, &d,
                     "DELETE FROM oauth_clients WHERE id IN (SELECT id FROM oauth_clients WHERE "
                     "(used_ms = 0 AND created_ms < ?3) OR max(created_ms, used_ms) < ?1 ORDER "
                     "BY used_ms != 0, max(created_ms, used_ms) LIMIT ?2)",
                     err) < 0)
        return -1;
      if ((rc = db_int(d, 1, idle_before_ms)) || (rc = db_int(d, 2, n - max_clients + 1)) ||
          (rc = db_int(d, 3, unused_before_ms)))
        return db_fail(st, err, rc, "cannot bind OAuth client");
      int gone = db_step_done(st, d, "cannot remove idle OAuth clients", err);
      if (gone < 0)
        return -1;
      if (n - gone >= max_clients)
        return husk_fail(err, EDQUOT,
                         "%" PRId64 " OAuth clients are registered, the most there may be", n);
    }
  }
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "INSERT INTO oauth_clients (" CLIENT_COLUMNS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
                 "0)",
                 err) < 0)
    return -1;
  if ((rc = db_text(s, 1, c->id)) || (rc = db_text(s, 2, c->name)) ||
      (rc = db_text(s, 3, c->redirect_uris)) || (rc = db_text(s, 4, c->auth_method)) ||
      (rc = c->has_secret ? db_blob(s, 5, c->secret_hash, STATE_OAUTH_HASH_SIZE)
                          : sqlite3_bind_null(s, 5)) ||
      (rc = db_int(s, 6, c->created_ms)))
    return db_fail(st, err, rc, "cannot bind OAuth client");
  if (db_step_done(st, s, "cannot register OAuth client", err) < 0)
    return -1;
  return db_commit(&txn, err);
}

int state_oauth_client_get(struct state *st, const char *id, struct state_oauth_client *out,
                           struct husk_err *err) {
  if (check_id("client id", id, STATE_CLIENT_ID_SIZE, err) < 0)
    return husk_fail(err, ENOENT, "no such OAuth client");
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q, "SELECT " CLIENT_COLUMNS " FROM oauth_clients WHERE id = ?1", err) < 0)
    return -1;
  int rc = db_text(q, 1, id);
  if (rc)
    return db_fail(st, err, rc, "cannot bind OAuth client");
  int r = db_step_row(st, q, "cannot read OAuth client", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, ENOENT, "no such OAuth client");
  return read_client(q, out, err);
}

/* ---- shared steps, under the lock and in a transaction ---- */

/* One statement with a text ?1 and an integer ?2 (when it has one). */
static int exec_text_int(struct state *st, const char *sql, const char *text, int64_t n,
                         const char *what, struct husk_err *err) {
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s, sql, err) < 0)
    return -1;
  int rc = db_text(s, 1, text);
  if (!rc && sqlite3_bind_parameter_count(s) >= 2)
    rc = db_int(s, 2, n);
  if (rc)
    return db_fail(st, err, rc, "%s", what);
  return db_step_done(st, s, what, err);
}

static int revoke_family(struct state *st, const char *family, int64_t now, struct husk_err *err) {
  return exec_text_int(st,
                       "UPDATE oauth_tokens SET revoked_ms = ?2 WHERE family = ?1 AND "
                       "revoked_ms = 0",
                       family, now, "cannot revoke a token family", err);
}

/* Whether user `id` may still act: live, enabled, of a live tenant. */
static int user_live(struct state *st, const char *id, bool *live, struct husk_err *err) {
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q,
                 "SELECT u.disabled = 0 AND u.deleted_ms = 0 AND t.deleted_ms = 0 FROM users u "
                 "JOIN tenants t ON t.id = u.tenant_id WHERE u.id = ?1",
                 err) < 0)
    return -1;
  int rc = db_text(q, 1, id);
  if (rc)
    return db_fail(st, err, rc, "cannot bind user");
  int r = db_step_row(st, q, "cannot read user", err);
  if (r < 0)
    return -1;
  *live = r == 1 && sqlite3_column_int64(q, 0) != 0;
  return 0;
}

static int insert_token(struct state *st, const unsigned char hash[STATE_OAUTH_HASH_SIZE],
                        const char *kind, const struct state_oauth_grant *g, unsigned scopes,
                        int64_t expires_ms, int64_t now, struct husk_err *err) {
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "INSERT INTO oauth_tokens (hash, kind, family, client_id, user_id, tenant_id, "
                 "resource, scopes, expires_ms, created_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, "
                 "?8, ?9, ?10)",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_blob(s, 1, hash, STATE_OAUTH_HASH_SIZE)) || (rc = db_text(s, 2, kind)) ||
      (rc = db_text(s, 3, g->family)) || (rc = db_text(s, 4, g->client_id)) ||
      (rc = db_text(s, 5, g->user_id)) || (rc = db_text(s, 6, g->tenant_id)) ||
      (rc = db_text(s, 7, g->resource)) || (rc = db_int(s, 8, scopes)) ||
      (rc = db_int(s, 9, expires_ms)) || (rc = db_int(s, 10, now)))
    return db_fail(st, err, rc, "cannot bind token");
  return db_step_done(st, s, "cannot issue token", err) < 0 ? -1 : 0;
}

/* The pair's two rows, the family trimmed, the client marked used, and a
 * batch of expired tokens swept. */
static int issue_pair(struct state *st, const struct state_oauth_pair *p,
                      const struct state_oauth_grant *g, unsigned grant_scopes, int64_t now,
                      struct husk_err *err) {
  if (insert_token(st, p->access_hash, "access", g, g->scopes, p->access_expires_ms, now, err) <
          0 ||
      insert_token(st, p->refresh_hash, "refresh", g, grant_scopes, p->refresh_expires_ms, now,
                   err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *t = NULL;
  if (db_prepare(st, &t,
                 "DELETE FROM oauth_tokens WHERE hash IN (SELECT hash FROM oauth_tokens WHERE "
                 "family = ?1 AND hash NOT IN (?2, ?3) ORDER BY created_ms DESC LIMIT -1 OFFSET "
                 "?4)",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(t, 1, g->family)) ||
      (rc = db_blob(t, 2, p->access_hash, STATE_OAUTH_HASH_SIZE)) ||
      (rc = db_blob(t, 3, p->refresh_hash, STATE_OAUTH_HASH_SIZE)) ||
      (rc = db_int(t, 4, FAMILY_KEEP - 2)))
    return db_fail(st, err, rc, "cannot bind token family");
  if (db_step_done(st, t, "cannot trim a token family", err) < 0)
    return -1;
  if (exec_text_int(st, "UPDATE oauth_clients SET used_ms = ?2 WHERE id = ?1", g->client_id, now,
                    "cannot mark the OAuth client used", err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *x = NULL;
  if (db_prepare(st, &x,
                 "DELETE FROM oauth_tokens WHERE hash IN (SELECT hash FROM oauth_tokens WHERE "
                 "expires_ms < ?1 LIMIT ?2)",
                 err) < 0)
    return -1;
  if ((rc = db_int(x, 1, now)) || (rc = db_int(x, 2, SWEEP_BATCH)))
    return db_fail(st, err, rc, "cannot bind token sweep");
  return db_step_done(st, x, "cannot remove expired tokens", err) < 0 ? -1 : 0;
}

/* ---- codes ---- */

int state_oauth_code_insert(struct state *st, const struct state_oauth_code *c, int64_t now,
                            struct husk_err *err) {
  if (!c)
    return husk_fail(err, EINVAL, "authorization code is missing");
  if (check_id("client id", c->client_id, sizeof c->client_id, err) < 0 ||
      check_id("user id", c->user_id, sizeof c->user_id, err) < 0 ||
      check_id("token family", c->family, sizeof c->family, err) < 0 ||
      check_text("redirect URI", c->redirect_uri, sizeof c->redirect_uri, false, err) < 0 ||
      check_text("code challenge", c->challenge, sizeof c->challenge, false, err) < 0 ||
      check_text("resource", c->resource, sizeof c->resource, false, err) < 0)
    return -1;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *x = NULL;
  if (db_prepare(st, &x,
                 "DELETE FROM oauth_codes WHERE hash IN (SELECT hash FROM oauth_codes WHERE "
                 "expires_ms < ?1 LIMIT ?2)",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_int(x, 1, now - CODE_KEEP_MS)) || (rc = db_int(x, 2, SWEEP_BATCH)))
    return db_fail(st, err, rc, "cannot bind code sweep");
  if (db_step_done(st, x, "cannot remove expired codes", err) < 0)
    return -1;

  bool live = false;
  if (user_live(st, c->user_id, &live, err) < 0)
    return -1;
  if (!live)
    return husk_fail(err, ENOENT, "user `%s` not found", c->user_id);
  cleanup_stmt sqlite3_stmt *s = NULL;
  /* The tenant is the user's; the client must exist (its foreign key). */
  if (db_prepare(st, &s,
                 "INSERT INTO oauth_codes (hash, client_id, user_id, tenant_id, redirect_uri, "
                 "challenge, resource, scopes, expires_ms, family) SELECT ?1, ?2, ?3, tenant_id, "
                 "?4, ?5, ?6, ?7, ?8, ?9 FROM users WHERE id = ?3 AND EXISTS (SELECT 1 FROM "
                 "oauth_clients WHERE id = ?2)",
                 err) < 0)
    return -1;
  if ((rc = db_blob(s, 1, c->hash, STATE_OAUTH_HASH_SIZE)) || (rc = db_text(s, 2, c->client_id)) ||
      (rc = db_text(s, 3, c->user_id)) || (rc = db_text(s, 4, c->redirect_uri)) ||
      (rc = db_text(s, 5, c->challenge)) || (rc = db_text(s, 6, c->resource)) ||
      (rc = db_int(s, 7, c->scopes)) || (rc = db_int(s, 8, c->expires_ms)) ||
      (rc = db_text(s, 9, c->family)))
    return db_fail(st, err, rc, "cannot bind authorization code");
  int n = db_step_done(st, s, "cannot issue authorization code", err);
  if (n < 0)
    return -1;
  if (n == 0)
    return husk_fail(err, ENOENT, "no such OAuth client");
  /* Someone signed in with it: the client is used (not among the first
   * to go when the table is full). */
  if (exec_text_int(st, "UPDATE oauth_clients SET used_ms = ?2 WHERE id = ?1", c->client_id,
                    now > 0 ? now : 1, "cannot mark the OAuth client used", err) < 0)
    return -1;
  return db_commit(&txn, err);
}

int state_oauth_code_redeem(struct state *st, const unsigned char code_hash[STATE_OAUTH_HASH_SIZE],
                            const char *client_id, const char *redirect_uri, const char *challenge,
                            const char *resource, const struct state_oauth_pair *pair, int64_t now,
                            struct state_oauth_grant *out, struct husk_err *err) {
  /* One message for every refusal but reuse and another resource: the
   * caller answers invalid_grant whatever it was (ENOTSUP: invalid_target). */
  static const char denied[] = "invalid authorization code";
  if (!client_id || !redirect_uri || !challenge || !pair)
    return husk_fail(err, EACCES, "%s", denied);
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  struct state_oauth_grant g = {0};
  char code_redirect[STATE_OAUTH_URI_SIZE], code_challenge[STATE_OAUTH_CHALLENGE_SIZE];
  int64_t expires_ms, used_ms;
  {
    cleanup_stmt sqlite3_stmt *q = NULL;
    if (db_prepare(st, &q,
                   "SELECT client_id, user_id, tenant_id, redirect_uri, challenge, resource, "
                   "scopes, expires_ms, used_ms, family FROM oauth_codes WHERE hash = ?1",
                   err) < 0)
      return -1;
    int rc = db_blob(q, 1, code_hash, STATE_OAUTH_HASH_SIZE);
    if (rc)
      return db_fail(st, err, rc, "cannot bind authorization code");
    int r = db_step_row(st, q, "cannot read authorization code", err);
    if (r < 0)
      return -1;
    if (r == 0)
      return husk_fail(err, EACCES, "%s", denied);
    bool ok = db_col_text(q, 0, g.client_id, sizeof g.client_id);
    ok &= db_col_text(q, 1, g.user_id, sizeof g.user_id);
    ok &= db_col_text(q, 2, g.tenant_id, sizeof g.tenant_id);
    ok &= db_col_text(q, 3, code_redirect, sizeof code_redirect);
    ok &= db_col_text(q, 4, code_challenge, sizeof code_challenge);
    ok &= db_col_text(q, 5, g.resource, sizeof g.resource);
    g.scopes = (unsigned)sqlite3_column_int64(q, 6);
    expires_ms = sqlite3_column_int64(q, 7);
    used_ms = sqlite3_column_int64(q, 8);
    ok &= db_col_text(q, 9, g.family, sizeof g.family);
    if (!ok)
      return husk_fail(err, EUCLEAN, "authorization code row has an oversized value");
  }
  if (used_ms != 0) {
    /* A second use: the code leaked, or is replayed.  What the first use
     * issued dies now, whoever presents it. */
    if (revoke_family(st, g.family, now, err) < 0)
      return -1;
    db_fault_point("code_reuse");
    if (db_commit(&txn, err) < 0)
      return -1;
    return husk_fail(err, EACCES,
                     "authorization code used before: the tokens issued from it are revoked");
  }
  size_t clen = strlen(challenge);
  if (expires_ms <= now || strcmp(g.client_id, client_id) != 0 ||
      strcmp(code_redirect, redirect_uri) != 0 || clen != strlen(code_challenge) ||
      CRYPTO_memcmp(challenge, code_challenge, clen) != 0)
    return husk_fail(err, EACCES, "%s", denied);
  bool live = false;
  if (user_live(st, g.user_id, &live, err) < 0)
    return -1;
  if (!live)
    return husk_fail(err, EACCES, "%s", denied);
  /* A right code asked for another resource than it was issued for:
   * invalid_target (RFC 8707 2.2), and the code stays usable. */
  if (resource && strcmp(resource, g.resource) != 0)
    return husk_fail(err, ENOTSUP, "the resource is not the code's");
  {
    cleanup_stmt sqlite3_stmt *u = NULL;
    if (db_prepare(st, &u, "UPDATE oauth_codes SET used_ms = ?2 WHERE hash = ?1", err) < 0)
      return -1;
    int rc;
    if ((rc = db_blob(u, 1, code_hash, STATE_OAUTH_HASH_SIZE)) || (rc = db_int(u, 2, now)))
      return db_fail(st, err, rc, "cannot bind authorization code");
    if (db_step_done(st, u, "cannot use authorization code", err) < 0)
      return -1;
  }
  if (issue_pair(st, pair, &g, g.scopes, now, err) < 0)
    return -1;
  db_fault_point("code_redeem");
  if (db_commit(&txn, err) < 0)
    return -1;
  if (out)
    *out = g;
  return 0;
}

/* ---- tokens ---- */

int state_oauth_refresh(struct state *st, const unsigned char refresh_hash[STATE_OAUTH_HASH_SIZE],
                        const char *client_id, unsigned scopes, const char *resource,
                        const struct state_oauth_pair *pair, int64_t now,
                        struct state_oauth_grant *out, struct husk_err *err) {
  static const char denied[] = "invalid refresh token";
  if (!client_id || !pair)
    return husk_fail(err, EACCES, "%s", denied);
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  struct state_oauth_grant g = {0};
  int64_t expires_ms, revoked_ms, rotated_ms;
  unsigned grant_scopes;
  {
    cleanup_stmt sqlite3_stmt *q = NULL;
    if (db_prepare(st, &q,
                   "SELECT client_id, user_id, tenant_id, resource, family, scopes, expires_ms, "
                   "revoked_ms, rotated_ms FROM oauth_tokens WHERE hash = ?1 AND kind = "
                   "'refresh'",
                   err) < 0)
      return -1;
    int rc = db_blob(q, 1, refresh_hash, STATE_OAUTH_HASH_SIZE);
    if (rc)
      return db_fail(st, err, rc, "cannot bind refresh token");
    int r = db_step_row(st, q, "cannot read refresh token", err);
    if (r < 0)
      return -1;
    if (r == 0)
      return husk_fail(err, EACCES, "%s", denied);
    bool ok = db_col_text(q, 0, g.client_id, sizeof g.client_id);
    ok &= db_col_text(q, 1, g.user_id, sizeof g.user_id);
    ok &= db_col_text(q, 2, g.tenant_id, sizeof g.tenant_id);
    ok &= db_col_text(q, 3, g.resource, sizeof g.resource);
    ok &= db_col_text(q, 4, g.family, sizeof g.family);
    grant_scopes = (unsigned)sqlite3_column_int64(q, 5);
    expires_ms = sqlite3_column_int64(q, 6);
    revoked_ms = sqlite3_column_int64(q, 7);
    rotated_ms = sqlite3_column_int64(q, 8);
    if (!ok)
      return husk_fail(err, EUCLEAN, "token row has an oversized value");
  }
  if (strcmp(g.client_id, client_id) != 0)
    return husk_fail(err, EACCES, "%s", denied);
  if (rotated_ms != 0) {
    /* Reuse: this token was exchanged already, so two parties hold the
     * family (RFC 9700 4.14.2).  Neither keeps it. */
    if (revoke_family(st, g.family, now, err) < 0)
      return -1;
    db_fault_point("refresh_reuse");
    if (db_commit(&txn, err) < 0)
      return -1;
    return husk_fail(err, EKEYREVOKED,
                     "refresh token used before: every token of this sign-in is revoked");
  }
  if (revoked_ms != 0 || expires_ms <= now)
    return husk_fail(err, EACCES, "%s", denied);
  bool live = false;
  if (user_live(st, g.user_id, &live, err) < 0)
    return -1;
  if (!live)
    return husk_fail(err, EACCES, "%s", denied);
  if (scopes & ~grant_scopes)
    return husk_fail(err, EINVAL, "the scopes asked exceed the grant's");
  g.scopes = scopes ? scopes : grant_scopes;
  if (resource && strcmp(resource, g.resource) != 0)
    return husk_fail(err, ENOTSUP, "the resource is not the grant's");
  {
    cleanup_stmt sqlite3_stmt *u = NULL;
    if (db_prepare(st, &u,
                   "UPDATE oauth_tokens SET rotated_ms = ?2, revoked_ms = ?2 WHERE hash = ?1",
                   err) < 0)
      return -1;
    int rc;
    if ((rc = db_blob(u, 1, refresh_hash, STATE_OAUTH_HASH_SIZE)) || (rc = db_int(u, 2, now)))
      return db_fail(st, err, rc, "cannot bind refresh token");
    if (db_step_done(st, u, "cannot rotate refresh token", err) < 0)
      return -1;
  }
  if (issue_pair(st, pair, &g, grant_scopes, now, err) < 0)
    return -1;
  db_fault_point("refresh_rotate");
  if (db_commit(&txn, err) < 0)
    return -1;
  if (out)
    *out = g;
  return 0;
}

int state_oauth_revoke(struct state *st, const unsigned char hash[STATE_OAUTH_HASH_SIZE],
                       const char *client_id, int64_t now, struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  char kind[8], family[STATE_OAUTH_FAMILY_SIZE], owner[STATE_CLIENT_ID_SIZE];
  {
    cleanup_stmt sqlite3_stmt *q = NULL;
    if (db_prepare(st, &q, "SELECT kind, family, client_id FROM oauth_tokens WHERE hash = ?1",
                   err) < 0)
      return -1;
    int rc = db_blob(q, 1, hash, STATE_OAUTH_HASH_SIZE);
    if (rc)
      return db_fail(st, err, rc, "cannot bind token");
    int r = db_step_row(st, q, "cannot read token", err);
    if (r < 0)
      return -1;
    if (r == 0)
      return 0;
    if (!db_col_text(q, 0, kind, sizeof kind) || !db_col_text(q, 1, family, sizeof family) ||
        !db_col_text(q, 2, owner, sizeof owner))
      return husk_fail(err, EUCLEAN, "token row has an oversized value");
  }
  if (client_id && strcmp(client_id, owner) != 0)
    return 0;
  if (!strcmp(kind, "refresh")) {
    if (revoke_family(st, family, now, err) < 0)
      return -1;
  } else {
    cleanup_stmt sqlite3_stmt *u = NULL;
    if (db_prepare(st, &u,
                   "UPDATE oauth_tokens SET revoked_ms = ?2 WHERE hash = ?1 AND revoked_ms = 0",
                   err) < 0)
      return -1;
    int rc;
    if ((rc = db_blob(u, 1, hash, STATE_OAUTH_HASH_SIZE)) || (rc = db_int(u, 2, now)))
      return db_fail(st, err, rc, "cannot bind token");
    if (db_step_done(st, u, "cannot revoke token", err) < 0)
      return -1;
  }
  return db_commit(&txn, err);
}

int state_oauth_access_get(struct state *st, const unsigned char hash[STATE_OAUTH_HASH_SIZE],
                           struct state_oauth_access *out, struct husk_err *err) {
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q,
                 "SELECT t.user_id, t.tenant_id, t.client_id, t.resource, t.family, t.scopes, "
                 "t.expires_ms, t.revoked_ms, u.name, u.display_name, u.role, u.disabled, "
                 "u.deleted_ms, coalesce(tn.deleted_ms, 1), coalesce(c.name, ''), u.idp_subject FROM "
                 "oauth_tokens t JOIN users u ON u.id = t.user_id LEFT JOIN tenants tn ON tn.id "
                 "= u.tenant_id LEFT JOIN oauth_clients c ON c.id = t.client_id WHERE t.hash = "
                 "?1 AND t.kind = 'access'",
                 err) < 0)
    return -1;
  int rc = db_blob(q, 1, hash, STATE_OAUTH_HASH_SIZE);
  if (rc)
    return db_fail(st, err, rc, "cannot bind token");
  int r = db_step_row(st, q, "cannot read token", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, ENOENT, "no such access token");
  struct state_oauth_access a = {0};
  bool ok = db_col_text(q, 0, a.grant.user_id, sizeof a.grant.user_id);
  ok &= db_col_text(q, 1, a.grant.tenant_id, sizeof a.grant.tenant_id);
  ok &= db_col_text(q, 2, a.grant.client_id, sizeof a.grant.client_id);
  ok &= db_col_text(q, 3, a.grant.resource, sizeof a.grant.resource);
  ok &= db_col_text(q, 4, a.grant.family, sizeof a.grant.family);
  a.grant.scopes = (unsigned)sqlite3_column_int64(q, 5);
  a.expires_ms = sqlite3_column_int64(q, 6);
  a.revoked_ms = sqlite3_column_int64(q, 7);
  ok &= db_col_text(q, 8, a.user_name, sizeof a.user_name);
  ok &= db_col_text(q, 9, a.display_name, sizeof a.display_name);
  ok &= db_col_text(q, 10, a.role, sizeof a.role);
  a.user_disabled = sqlite3_column_int64(q, 11) != 0;
  a.user_deleted = sqlite3_column_int64(q, 12) != 0;
  a.tenant_deleted = sqlite3_column_int64(q, 13) != 0;
  ok &= db_col_text(q, 14, a.client_name, sizeof a.client_name);
  ok &= db_col_text(q, 15, a.idp_subject, sizeof a.idp_subject);
  if (!ok)
    return husk_fail(err, EUCLEAN, "token row has an oversized value");
  if (out)
    *out = a;
  return 0;
}
