/* Users and password sign-in (docs/oauth.md "Users and roles").
 *
 * What a user may be is checked here (a name of a-z 0-9 . _ @ + -, lower
 * case; a display name of printable UTF-8; a password of 12 to 256 bytes);
 * the rows, the per-tenant bound and the revocation of tokens on a change
 * are state/users.c's, each one transaction.
 *
 * Sign-in answers one thing for every reason it fails, after the same
 * work: an unknown tenant or user, a disabled one, one without a password
 * and a wrong password all cost one Argon2id verification (against a dummy
 * hash when there is no real one), one count in the in-memory throttle
 * (throttle.c: per user and source address, and per user) and no write,
 * and give EACCES.  The hash slot is taken before the user is read, and
 * the throttle counts an attempt before its check, so attempts at once
 * cannot pass a lock together; a success is checked in a transaction that
 * reads the user again (still live, still enabled). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "auth/auth_internal.h"

static bool name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '@' ||
         c == '+' || c == '-';
}

/* `name` in lower case into out: 1..AUTH_NAME_MAX of [a-z0-9._@+-]
 * (upper-case ASCII letters are taken as lower case). */
static int name_normalize(const char *name, char out[AUTH_NAME_MAX + 1], struct husk_err *err) {
  if (!name)
    return husk_fail(err, EINVAL, "user name is missing");
  size_t n = strnlen(name, AUTH_NAME_MAX + 1);
  if (n == 0 || n > AUTH_NAME_MAX)
    return husk_fail(err, EINVAL, "a user name is 1 to %d characters", AUTH_NAME_MAX);
  for (size_t i = 0; i < n; i++) {
    char c = name[i] >= 'A' && name[i] <= 'Z' ? (char)(name[i] - 'A' + 'a') : name[i];
    if (!name_char(c))
      return husk_fail(err, EINVAL,
                       "a user name may only contain a-z, 0-9, `.`, `_`, `@`, `+` "
                       "and `-`");
    out[i] = c;
  }
  out[n] = '\0';
  return 0;
}

static int user_from_row(const struct state_user *r, struct auth_user *out, struct husk_err *err) {
  struct auth_user u = {0};
  if (auth_role_parse(r->role, &u.role) < 0)
    return husk_fail(err, EUCLEAN, "user `%s` has an unknown role", r->id);
  /* The state's fields are no larger than ours (auth_state.h). */
  _Static_assert(sizeof u.name == STATE_USER_NAME_SIZE, "user name sizes");
  _Static_assert(sizeof u.display_name == STATE_USER_DISPLAY_SIZE, "display name sizes");
  memcpy(u.id, r->id, sizeof u.id);
  memcpy(u.tenant_id, r->tenant_id, sizeof u.tenant_id);
  memcpy(u.name, r->name, sizeof u.name);
  memcpy(u.display_name, r->display_name, sizeof u.display_name);
  u.disabled = r->disabled;
  u.has_password = r->password_hash[0] != '\0';
  u.created_ms = r->created_ms;
  u.deleted_ms = r->deleted_ms;
  _Static_assert(sizeof u.idp_subject == sizeof r->idp_subject, "subject sizes");
  memcpy(u.idp_subject, r->idp_subject, sizeof u.idp_subject);
  if (out)
    *out = u;
  return 0;
}

static int check_role(enum auth_role role, struct husk_err *err) {
  if (auth_role_parse(auth_role_name(role), NULL) < 0)
    return husk_fail(err, EINVAL, "unknown role");
  return 0;
}

int auth_user_create(struct auth *a, const char *tenant_id, const char *name,
                     const char *display_name, enum auth_role role, const char *password,
                     struct auth_user *out, struct husk_err *err) {
  struct state_user row = {.created_ms = auth_now(a)};
  if (name_normalize(name, row.name, err) < 0 ||
      auth_check_label("display name", display_name ? display_name : "", AUTH_DISPLAY_MAX, err) <
          0 ||
      check_role(role, err) < 0 || (password && password_check(password, err) < 0))
    return -1;
  if (!tenant_id)
    return husk_fail(err, EINVAL, "tenant id is missing");
  if (snprintf(row.tenant_id, sizeof row.tenant_id, "%s", tenant_id) >= (int)sizeof row.tenant_id)
    return husk_fail(err, ENOENT, "no such tenant");
  snprintf(row.display_name, sizeof row.display_name, "%s", display_name ? display_name : "");
  snprintf(row.role, sizeof row.role, "%s", auth_role_name(role));
  if (password && password_hash(a, password, row.password_hash, err) < 0)
    return -1;
  if (state_new_id("u_", row.id, sizeof row.id, err) < 0 ||
      state_user_insert(a->st, &row, AUTH_USERS_MAX, err) < 0)
    return -1;
  return user_from_row(&row, out, err);
}

int auth_user_get(struct auth *a, const char *tenant_id, const char *id, struct auth_user *out,
                  struct husk_err *err) {
  if (!tenant_id)
    return husk_fail(err, EINVAL, "tenant id is missing");
  struct state_user row;
  if (state_user_get(a->st, tenant_id, id, false, &row, err) < 0)
    return -1;
  return user_from_row(&row, out, err);
}

int auth_user_get_any(struct auth *a, const char *tenant_id, const char *id, struct auth_user *out,
                      struct husk_err *err) {
  struct state_user row;
  if (state_user_get(a->st, tenant_id, id, true, &row, err) < 0)
    return -1;
  return user_from_row(&row, out, err);
}

struct list_ctx {
  int (*cb)(void *ctx, const struct auth_user *u);
  void *ctx;
  struct husk_err *err;
  int failed; /* a row that could not be converted */
};

static int list_one(void *ctx, const struct state_user *row) {
  struct list_ctx *l = ctx;
  struct auth_user u;
  if (user_from_row(row, &u, l->err) < 0) {
    l->failed = 1;
    return -1;
  }
  return l->cb(l->ctx, &u);
}

int auth_user_list(struct auth *a, const char *tenant_id,
                   int (*cb)(void *ctx, const struct auth_user *u), void *ctx,
                   struct husk_err *err) {
  if (!cb)
    return husk_fail(err, EINVAL, "listing callback is missing");
  struct list_ctx l = {.cb = cb, .ctx = ctx, .err = err};
  int r = state_user_list(a->st, tenant_id, list_one, &l, err);
  return l.failed ? -1 : r;
}

int auth_user_update(struct auth *a, const char *tenant_id, const char *id,
                     const struct auth_user_change *ch, struct auth_user *out,
                     struct husk_err *err) {
  if (!ch)
    return husk_fail(err, EINVAL, "user change is missing");
  if (!tenant_id)
    return husk_fail(err, EINVAL, "tenant id is missing");
  if ((ch->display_name &&
       auth_check_label("display name", ch->display_name, AUTH_DISPLAY_MAX, err) < 0) ||
      (ch->role && check_role(*ch->role, err) < 0) ||
      (ch->password && password_check(ch->password, err) < 0))
    return -1;
  char hash[STATE_PASSWORD_HASH_SIZE];
  if (ch->password) {
    /* The user must exist before a hash is spent on it. */
    if (state_user_get(a->st, tenant_id, id, false, NULL, err) < 0 ||
        password_hash(a, ch->password, hash, err) < 0)
      return -1;
  }
  struct state_user_change sc = {
      .display_name = ch->display_name,
      .role = ch->role ? auth_role_name(*ch->role) : NULL,
      .password_hash = ch->password ? hash : NULL,
      .disabled = ch->disabled,
      .unlink_idp = ch->unlink_idp,
  };
  struct state_user row;
  if (state_user_update(a->st, tenant_id, id, &sc, auth_now(a), &row, err) < 0)
    return -1;
  if (ch->password)
    throttle_forget(a, row.id); /* an administrator's reset unlocks */
  return user_from_row(&row, out, err);
}

int auth_user_delete(struct auth *a, const char *tenant_id, const char *id, struct husk_err *err) {
  if (!tenant_id)
    return husk_fail(err, EINVAL, "tenant id is missing");
  return state_user_delete(a->st, tenant_id, id, auth_now(a), err);
}

/* Hand an error found in `e` on to the caller's `err` (which may be NULL). */
static int pass_on(struct husk_err *err, const struct husk_err *e) {
  if (err)
    *err = *e;
  return -1;
}

int auth_sign_in(struct auth *a, const char *tenant_name, const char *name, const char *password,
                 const char *source, struct auth_user *out,
                 char out_tenant_id[STATE_TENANT_ID_SIZE], struct husk_err *err) {
  /* One message for every refusal: the page must not tell them apart. */
  static const char denied[] = "wrong organization, user name or password";
  if (out_tenant_id)
    out_tenant_id[0] = '\0';
  char lname[AUTH_NAME_MAX + 1];
  struct husk_err e = {0};
  bool name_ok = tenant_name && name_normalize(name, lname, &e) == 0;

  struct state_user row;
  /* Whose failures these are: the user's id, or the names typed when no
   * such user exists -- the same path either way (throttle.c). */
  char who[640];
  bool found = false, counted = false, locked = false, usable = false, match = false;
  int64_t now;
  {
    /* The slot first, then the row and the throttle: a lock set by the
     * failures that held the slots before us is seen. */
    cleanup_password_slot struct password_slot slot = {0};
    if (password_slot_take(a, &slot, err) < 0)
      return -1;
    if (name_ok) {
      if (state_user_find(a->st, tenant_name, lname, &row, &e) == 0)
        found = true;
      else if (e.code != ENOENT)
        return pass_on(err, &e);
    }
    now = auth_now(a);
    if (found)
      snprintf(who, sizeof who, "%s", row.id);
    else
      snprintf(who, sizeof who, "?%.300s\n%.300s", tenant_name ? tenant_name : "",
               name_ok ? lname : name ? name : "");
    counted = throttle_begin(a, who, source, now);
    /* A row locked by the durable counts of an earlier version is locked
     * still, until its time is up. */
    locked = !counted || (found && row.locked_until_ms > now);
    usable = found && !locked && !row.disabled && row.password_hash[0];
    if (password_verify(a, usable ? row.password_hash : NULL, password, &match, err) < 0) {
      if (counted)
        throttle_end(a, who, source, THROTTLE_CANCEL, now);
      return -1;
    }
  }
  if (found && out_tenant_id)
    memcpy(out_tenant_id, row.tenant_id, STATE_TENANT_ID_SIZE);
  if (locked) {
    if (counted)
      throttle_end(a, who, source, THROTTLE_CANCEL, now);
    return husk_fail(err, EAGAIN, "%s", denied);
  }
  /* Every failure the same way, known user or not: counted in memory,
   * nothing written. */
  if (!usable || !match) {
    throttle_end(a, who, source, THROTTLE_FAILED, now);
    return husk_fail(err, EACCES, "%s", denied);
  }
  if (state_user_sign_in_ok(a->st, row.id, now, &e) < 0) {
    throttle_end(a, who, source, THROTTLE_CANCEL, now);
    if (e.code == EAGAIN)
      return husk_fail(err, EAGAIN, "%s", denied);
    if (e.code == ENOENT)
      return husk_fail(err, EACCES, "%s", denied);
    return pass_on(err, &e);
  }
  throttle_end(a, who, source, THROTTLE_OK, now);
  return user_from_row(&row, out, err);
}
