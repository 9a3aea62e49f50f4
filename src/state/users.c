/* User rows (see auth_state.h): people inside a tenant, their role, their
 * password's Argon2id string, and the sign-in throttle.
 *
 * A deleted user keeps its row, so the audit can still name it; the unique
 * index on (tenant_id, name) covers only live users, so the name is free
 * again.  Whatever ends a user's right to act (disabled, deleted, a new
 * role or password) revokes its tokens in the same transaction: there is
 * no moment at which the change is visible but an old token still works. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "state/auth_state.h"
#include "state/db.h"
#include "util/cleanup.h"

#define USER_COLUMNS                                                                               \
  "id, tenant_id, name, display_name, role, password_hash, disabled, failed_count, "               \
  "failed_since_ms, locked_until_ms, created_ms, deleted_ms, idp_issuer, idp_subject"

static bool role_known(const char *r) {
  return r && (!strcmp(r, "viewer") || !strcmp(r, "member") || !strcmp(r, "admin"));
}

static int read_user(sqlite3_stmt *s, void *row, struct husk_err *err) {
  struct state_user *u = row;
  memset(u, 0, sizeof *u);
  bool ok = db_col_text(s, 0, u->id, sizeof u->id);
  ok &= db_col_text(s, 1, u->tenant_id, sizeof u->tenant_id);
  ok &= db_col_text(s, 2, u->name, sizeof u->name);
  ok &= db_col_text(s, 3, u->display_name, sizeof u->display_name);
  ok &= db_col_text(s, 4, u->role, sizeof u->role);
  ok &= db_col_text(s, 5, u->password_hash, sizeof u->password_hash);
  u->disabled = sqlite3_column_int64(s, 6) != 0;
  u->failed_count = sqlite3_column_int64(s, 7);
  u->failed_since_ms = sqlite3_column_int64(s, 8);
  u->locked_until_ms = sqlite3_column_int64(s, 9);
  u->created_ms = sqlite3_column_int64(s, 10);
  u->deleted_ms = sqlite3_column_int64(s, 11);
  ok &= db_col_text(s, 12, u->idp_issuer, sizeof u->idp_issuer);
  ok &= db_col_text(s, 13, u->idp_subject, sizeof u->idp_subject);
  if (!ok)
    return husk_fail(err, EUCLEAN, "user row has an oversized value");
  return 0;
}

/* The fields a person or an administrator chose, checked before SQL. */
static int check_user_text(const struct state_user *u, struct husk_err *err) {
  if (check_id("user id", u->id, sizeof u->id, err) < 0 ||
      check_id("tenant id", u->tenant_id, sizeof u->tenant_id, err) < 0 ||
      check_text("user name", u->name, sizeof u->name, false, err) < 0 ||
      check_text("display name", u->display_name, sizeof u->display_name, true, err) < 0 ||
      check_text("password hash", u->password_hash, sizeof u->password_hash, true, err) < 0)
    return -1;
  if (!role_known(u->role))
    return husk_fail(err, EINVAL, "unknown role");
  return 0;
}

int state_user_insert(struct state *st, const struct state_user *u, int max_users,
                      struct husk_err *err) {
  if (!u)
    return husk_fail(err, EINVAL, "user is missing");
  if (check_user_text(u, err) < 0)
    return -1;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *q = NULL;
  /* The tenant must be live (a deleted one takes no new rows), and below
   * its bound of live users: both read in the insert's transaction. */
  if (db_prepare(st, &q,
                 "SELECT deleted_ms, (SELECT count(*) FROM users WHERE tenant_id = ?1 AND "
                 "deleted_ms = 0) FROM tenants WHERE id = ?1",
                 err) < 0)
    return -1;
  int rc = db_text(q, 1, u->tenant_id);
  if (rc)
    return db_fail(st, err, rc, "cannot bind user");
  int r = db_step_row(st, q, "cannot read tenant", err);
  if (r < 0)
    return -1;
  if (r == 0 || sqlite3_column_int64(q, 0) != 0)
    return husk_fail(err, ENOENT, "tenant `%s` not found", u->tenant_id);
  int64_t live = sqlite3_column_int64(q, 1);
  if (max_users > 0 && live >= max_users)
    return husk_fail(err, EDQUOT,
                     "the tenant has %" PRId64 " users, the most it may have: delete one first",
                     live);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "INSERT INTO users (" USER_COLUMNS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 0, 0, "
                 "0, ?8, 0, '', '')",
                 err) < 0)
    return -1;
  if ((rc = db_text(s, 1, u->id)) || (rc = db_text(s, 2, u->tenant_id)) ||
      (rc = db_text(s, 3, u->name)) || (rc = db_text(s, 4, u->display_name)) ||
      (rc = db_text(s, 5, u->role)) || (rc = db_text(s, 6, u->password_hash)) ||
      (rc = db_int(s, 7, u->disabled)) || (rc = db_int(s, 8, u->created_ms)))
    return db_fail(st, err, rc, "cannot bind user");
  if (db_step_done(st, s, "cannot create user", err) < 0) {
    if (err && err->code == EEXIST)
      husk_fail(err, EEXIST, "the tenant has a user of this name");
    return -1;
  }
  return db_commit(&txn, err);
}

/* Under the lock: user `id` of `tenant_id` (NULL: any) into *out. */
static int user_get_locked(struct state *st, const char *tenant_id, const char *id,
                           bool deleted_too, struct state_user *out, struct husk_err *err) {
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q,
                 "SELECT " USER_COLUMNS " FROM users WHERE id = ?1 AND (?2 IS NULL OR "
                 "tenant_id = ?2) AND (?3 OR deleted_ms = 0)",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(q, 1, id)) || (rc = db_text(q, 2, tenant_id)) ||
      (rc = db_int(q, 3, deleted_too)))
    return db_fail(st, err, rc, "cannot bind user");
  int r = db_step_row(st, q, "cannot read user", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, ENOENT, "user `%s` not found", id);
  struct state_user u;
  if (read_user(q, &u, err) < 0)
    return -1;
  if (out)
    *out = u;
  return 0;
}

/* An id that cannot be one names no user: ENOENT, as for one not found. */
static int check_user_id(const char *tenant_id, const char *id, struct husk_err *err) {
  if (tenant_id && check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0)
    return -1;
  if (check_id("user id", id, STATE_USER_ID_SIZE, err) < 0)
    return husk_fail(err, ENOENT, "no such user");
  return 0;
}

int state_user_get(struct state *st, const char *tenant_id, const char *id, bool deleted_too,
                   struct state_user *out, struct husk_err *err) {
  if (check_user_id(tenant_id, id, err) < 0)
    return -1;
  cleanup_unlock struct state *locked = db_lock(st);
  return user_get_locked(st, tenant_id, id, deleted_too, out, err);
}

int state_user_list(struct state *st, const char *tenant_id,
                    int (*cb)(void *ctx, const struct state_user *u), void *ctx,
                    struct husk_err *err) {
  if (check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0)
    return -1;
  cleanup_rows struct db_rows rows = {.item_size = sizeof(struct state_user)};
  if (db_rows_select(st, &rows,
                     "SELECT " USER_COLUMNS " FROM users WHERE tenant_id = ?1 AND deleted_ms = 0 "
                     "ORDER BY created_ms, rowid",
                     DB_ARGS(DB_TEXT(tenant_id)), read_user, "cannot list users", err) < 0)
    return -1;
  return db_rows_each(&rows, rows.n, cb, ctx);
}

/* Under the lock, in a transaction: every token of the user dies and its
 * codes go. */
static int revoke_user_locked(struct state *st, const char *id, int64_t now, struct husk_err *err) {
  cleanup_stmt sqlite3_stmt *t = NULL;
  if (db_prepare(st, &t,
                 "UPDATE oauth_tokens SET revoked_ms = ?2 WHERE user_id = ?1 AND revoked_ms = 0",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(t, 1, id)) || (rc = db_int(t, 2, now)))
    return db_fail(st, err, rc, "cannot bind user");
  if (db_step_done(st, t, "cannot revoke the user's tokens", err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *c = NULL;
  if (db_prepare(st, &c, "DELETE FROM oauth_codes WHERE user_id = ?1", err) < 0)
    return -1;
  if ((rc = db_text(c, 1, id)))
    return db_fail(st, err, rc, "cannot bind user");
  return db_step_done(st, c, "cannot remove the user's codes", err) < 0 ? -1 : 0;
}

int state_user_update(struct state *st, const char *tenant_id, const char *id,
                      const struct state_user_change *ch, int64_t now, struct state_user *out,
                      struct husk_err *err) {
  if (!ch)
    return husk_fail(err, EINVAL, "user change is missing");
  if (check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0 ||
      check_user_id(tenant_id, id, err) < 0)
    return -1;
  if ((ch->display_name &&
       check_text("display name", ch->display_name, STATE_USER_DISPLAY_SIZE, true, err) < 0) ||
      (ch->password_hash &&
       check_text("password hash", ch->password_hash, STATE_PASSWORD_HASH_SIZE, false, err) < 0))
    return -1;
  if (ch->role && !role_known(ch->role))
    return husk_fail(err, EINVAL, "unknown role");

  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  struct state_user cur;
  if (user_get_locked(st, tenant_id, id, false, &cur, err) < 0)
    return -1;
  bool revoke = (ch->role && strcmp(ch->role, cur.role) != 0) || ch->password_hash ||
                (ch->disabled && *ch->disabled && !cur.disabled) ||
                (ch->unlink_idp && cur.idp_subject[0]);
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "UPDATE users SET display_name = coalesce(?2, display_name), role = "
                 "coalesce(?3, role), password_hash = coalesce(?4, password_hash), disabled = "
                 "coalesce(?5, disabled), failed_count = CASE WHEN ?4 IS NULL THEN failed_count "
                 "ELSE 0 END, failed_since_ms = CASE WHEN ?4 IS NULL THEN failed_since_ms ELSE 0 "
                 "END, locked_until_ms = CASE WHEN ?4 IS NULL THEN locked_until_ms ELSE 0 END, "
                 "idp_issuer = CASE WHEN ?6 THEN '' ELSE idp_issuer END, idp_subject = CASE WHEN "
                 "?6 THEN '' ELSE idp_subject END WHERE id = ?1",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, id)) || (rc = db_text(s, 2, ch->display_name)) ||
      (rc = db_text(s, 3, ch->role)) || (rc = db_text(s, 4, ch->password_hash)) ||
      (rc = ch->disabled ? db_int(s, 5, *ch->disabled) : sqlite3_bind_null(s, 5)) ||
      (rc = db_int(s, 6, ch->unlink_idp)))
    return db_fail(st, err, rc, "cannot bind user");
  if (db_step_done(st, s, "cannot update user", err) < 0)
    return -1;
  if (revoke && revoke_user_locked(st, id, now, err) < 0)
    return -1;
  if (out && user_get_locked(st, tenant_id, id, false, out, err) < 0)
    return -1;
  db_fault_point("user_update");
  return db_commit(&txn, err);
}

int state_user_delete(struct state *st, const char *tenant_id, const char *id, int64_t now,
                      struct husk_err *err) {
  if (check_id("tenant id", tenant_id, STATE_TENANT_ID_SIZE, err) < 0 ||
      check_user_id(tenant_id, id, err) < 0)
    return -1;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s,
                 "UPDATE users SET deleted_ms = ?3 WHERE id = ?1 AND tenant_id = ?2 AND "
                 "deleted_ms = 0",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(s, 1, id)) || (rc = db_text(s, 2, tenant_id)) || (rc = db_int(s, 3, now)))
    return db_fail(st, err, rc, "cannot bind user");
  int n = db_step_done(st, s, "cannot delete user", err);
  if (n < 0)
    return -1;
  if (n == 0)
    return husk_fail(err, ENOENT, "user `%s` not found", id);
  if (revoke_user_locked(st, id, now, err) < 0)
    return -1;
  db_fault_point("user_delete");
  return db_commit(&txn, err);
}

int state_user_find(struct state *st, const char *tenant_name, const char *name,
                    struct state_user *out, struct husk_err *err) {
  static const char none[] = "no such user";
  /* Text that cannot be stored names nobody. */
  if (!tenant_name || !name || strnlen(tenant_name, 4096) >= 4096 ||
      strnlen(name, STATE_USER_NAME_SIZE) >= STATE_USER_NAME_SIZE)
    return husk_fail(err, ENOENT, "%s", none);
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_stmt sqlite3_stmt *q = NULL;
  if (db_prepare(st, &q,
                 "SELECT u.id, u.tenant_id, u.name, u.display_name, u.role, u.password_hash, "
                 "u.disabled, u.failed_count, u.failed_since_ms, u.locked_until_ms, u.created_ms, "
                 "u.deleted_ms, u.idp_issuer, u.idp_subject FROM tenants t JOIN users u ON u.tenant_id = t.id WHERE t.name = "
                 "?1 AND t.deleted_ms = 0 AND u.name = ?2 AND u.deleted_ms = 0",
                 err) < 0)
    return -1;
  int rc;
  if ((rc = db_text(q, 1, tenant_name)) || (rc = db_text(q, 2, name)))
    return db_fail(st, err, rc, "cannot bind user");
  int r = db_step_row(st, q, "cannot read user", err);
  if (r < 0)
    return -1;
  if (r == 0)
    return husk_fail(err, ENOENT, "%s", none);
  return read_user(q, out, err);
}

int state_user_sign_in_ok(struct state *st, const char *id, int64_t now, struct husk_err *err) {
  if (check_user_id(NULL, id, err) < 0)
    return -1;
  cleanup_unlock struct state *locked = db_lock(st);
  cleanup_txn struct db_txn txn = {0};
  if (db_begin(st, &txn, err) < 0)
    return -1;
  struct state_user u;
  if (user_get_locked(st, NULL, id, false, &u, err) < 0)
    return -1;
  if (u.disabled)
    return husk_fail(err, ENOENT, "no such user");
  if (u.locked_until_ms > now)
    return husk_fail(err, EAGAIN, "the user is locked");
  if (u.failed_count == 0 && u.failed_since_ms == 0)
    return 0; /* nothing to clear: no write, no sync */
  cleanup_stmt sqlite3_stmt *s = NULL;
  if (db_prepare(st, &s, "UPDATE users SET failed_count = 0, failed_since_ms = 0 WHERE id = ?1",
                 err) < 0)
    return -1;
  int rc = db_text(s, 1, id);
  if (rc)
    return db_fail(st, err, rc, "cannot bind user");
  if (db_step_done(st, s, "cannot clear the failed sign-ins", err) < 0)
    return -1;
  return db_commit(&txn, err);
}
