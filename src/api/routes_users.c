/* The users of a tenant (docs/oauth.md, "Managing users"): /v1/users with
 * the tenant's key or a token with the `users` scope, and
 * /v1/tenants/{tid}/users with the admin key.  The rules (names, roles,
 * password lengths, quotas, revoking tokens) are the core's (src/auth). */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>

#include "api/internal.h"
#include "util/cleanup_json.h"

static json_t *user_json(const struct auth_user *u) {
  return json_pack("{s:s, s:s, s:s, s:s, s:b, s:b, s:o, s:o}", "id", u->id, "name", u->name,
                   "display_name", u->display_name, "role", auth_role_name(u->role), "disabled",
                   u->disabled, "password", u->has_password, "created_at",
                   json_time(u->created_ms), "idp_subject",
                   u->idp_subject[0] ? json_string(u->idp_subject) : json_null());
}

/* Which tenant and which user a route names: the admin's routes carry
 * the tenant in the path. */
static const char *tenant_of(struct req *r) { return r->admin ? r->params[0] : r->tenant; }
static const char *user_param(struct req *r) { return r->admin ? r->params[1] : r->params[0]; }

static enum MHD_Result no_users(struct req *r) {
  return api_reply_error(r, 404, "not_found", "users are not enabled on this server");
}

/* A core error: EEXIST (the name is taken) and EDQUOT keep their own
 * statuses; the rest as every route maps them. */
static enum MHD_Result user_err(struct req *r, const struct husk_err *err) {
  if (err->code == ENOENT)
    return api_reply_error(r, 404, "not_found", "%s", err->msg[0] ? err->msg : "no such user");
  return api_reply_err(r, err);
}

static const char *const create_fields[] = {"name", "display_name", "role", "password", NULL};

enum MHD_Result h_user_create(struct req *r) {
  if (!r->srv->cfg.auth)
    return no_users(r);
  cleanup_json json_t *o = api_body_object(r, create_fields);
  if (!o)
    return api_reply_bad(r);
  const char *name = NULL, *display = NULL, *role_s = NULL, *pw = NULL;
  if (jget_string(o, "name", &name, &r->err) < 0 ||
      jget_string(o, "display_name", &display, &r->err) < 0 ||
      jget_string(o, "role", &role_s, &r->err) < 0 || jget_string(o, "password", &pw, &r->err) < 0)
    return api_reply_bad(r);
  if (!name)
    return api_reply_error(r, 400, "bad_request", "`name` is required");
  enum auth_role role;
  if (!role_s || auth_role_parse(role_s, &role) < 0)
    return api_reply_error(r, 400, "bad_request", "`role` must be viewer, member or admin");
  snprintf(r->audit_detail, sizeof r->audit_detail, "name=%.64s role=%s", name, role_s);
  /* A token may not grant more than its own role's worth: an admin's
   * token has `users`, and only admins' tokens do. */
  struct auth_user u;
  struct husk_err err;
  if (auth_user_create(r->srv->cfg.auth, tenant_of(r), name, display ? display : "", role, pw, &u,
                       &err) < 0)
    return user_err(r, &err);
  snprintf(r->audit_detail, sizeof r->audit_detail, "user=%s name=%s role=%s", u.id, u.name,
           auth_role_name(u.role));
  return api_reply_json(r, 201, user_json(&u));
}

static int list_cb(void *ctx, const struct auth_user *u) {
  json_t *j = user_json(u);
  if (!j || json_array_append_new(ctx, j) < 0)
    return API_LIST_NOMEM;
  return 0;
}

enum MHD_Result h_user_list(struct req *r) {
  if (!r->srv->cfg.auth)
    return no_users(r);
  json_t *arr = json_array();
  if (!arr)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  struct husk_err err;
  /* The operator's list names a tenant: an unknown one is 404, as for a
   * create there. */
  struct state_tenant t;
  if (r->admin && state_tenant_get(r->srv->cfg.state, tenant_of(r), &t, &err) < 0) {
    json_decref(arr);
    return user_err(r, &err);
  }
  int rc = auth_user_list(r->srv->cfg.auth, tenant_of(r), list_cb, arr, &err);
  if (rc < 0) {
    json_decref(arr);
    return rc == API_LIST_NOMEM ? api_reply_list_err(r, rc, &err) : user_err(r, &err);
  }
  return api_reply_json(r, 200, json_pack("{s:o}", "users", arr));
}

enum MHD_Result h_user_get(struct req *r) {
  if (!r->srv->cfg.auth)
    return no_users(r);
  struct auth_user u;
  struct husk_err err;
  if (auth_user_get(r->srv->cfg.auth, tenant_of(r), user_param(r), &u, &err) < 0)
    return user_err(r, &err);
  return api_reply_json(r, 200, user_json(&u));
}

static const char *const update_fields[] = {"display_name", "role",        "password",
                                            "disabled",     "idp_subject", NULL};

enum MHD_Result h_user_update(struct req *r) {
  if (!r->srv->cfg.auth)
    return no_users(r);
  const char *id = user_param(r);
  snprintf(r->audit_detail, sizeof r->audit_detail, "user=%s", id);
  cleanup_json json_t *o = api_body_object(r, update_fields);
  if (!o)
    return api_reply_bad(r);
  const char *display = NULL, *role_s = NULL, *pw = NULL;
  bool disabled = false;
  int hd;
  if (jget_string(o, "display_name", &display, &r->err) < 0 ||
      jget_string(o, "role", &role_s, &r->err) < 0 || jget_string(o, "password", &pw, &r->err) < 0 ||
      (hd = jget_bool(o, "disabled", &disabled, &r->err)) < 0)
    return api_reply_bad(r);
  /* A link to the provider is made only by a sign-in: it can only be
   * removed here. */
  json_t *idp = json_object_get(o, "idp_subject");
  if (idp && !json_is_null(idp))
    return api_reply_error(r, 400, "bad_request",
                           "`idp_subject` can only be null (unlink the user from its provider)");
  enum auth_role role;
  if (role_s && auth_role_parse(role_s, &role) < 0)
    return api_reply_error(r, 400, "bad_request", "`role` must be viewer, member or admin");
  /* A person cannot demote, disable or delete itself: the tenant keeps
   * the admin that is acting. */
  if (r->token && !strcmp(id, r->user_id) &&
      ((role_s && role != AUTH_ROLE_ADMIN) || (hd > 0 && disabled)))
    return api_reply_error(r, 409, "conflict", "you cannot demote or disable yourself");
  struct auth_user_change ch = {.display_name = display, .role = role_s ? &role : NULL,
                                .password = pw, .disabled = hd > 0 ? &disabled : NULL,
                                .unlink_idp = idp != NULL};
  struct auth_user u;
  struct husk_err err;
  if (auth_user_update(r->srv->cfg.auth, tenant_of(r), id, &ch, &u, &err) < 0)
    return user_err(r, &err);
  snprintf(r->audit_detail, sizeof r->audit_detail, "user=%s%s%s%s%s%s%s", id,
           display ? " display_name" : "", role_s ? " role=" : "", role_s ? auth_role_name(role) : "",
           pw ? " password" : "", hd > 0 ? (disabled ? " disabled" : " enabled") : "",
           idp ? " idp_unlinked" : "");
  return api_reply_json(r, 200, user_json(&u));
}

enum MHD_Result h_user_delete(struct req *r) {
  if (!r->srv->cfg.auth)
    return no_users(r);
  const char *id = user_param(r);
  snprintf(r->audit_detail, sizeof r->audit_detail, "user=%s", id);
  if (r->token && !strcmp(id, r->user_id))
    return api_reply_error(r, 409, "conflict", "you cannot delete yourself");
  struct husk_err err;
  if (auth_user_delete(r->srv->cfg.auth, tenant_of(r), id, &err) < 0)
    return user_err(r, &err);
  return api_reply_json(r, 200, json_pack("{s:s, s:b}", "id", id, "deleted", 1));
}
