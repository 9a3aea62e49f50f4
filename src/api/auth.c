/* Bearer keys: the admin key (compared in constant time) or a tenant key
 * (state_key_authenticate: only its SHA-256 is stored). */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "api/e2b.h"
#include "api/internal.h"

/* Constant time in the length of `a` (the presented key); equal lengths
 * and bytes required.  `b` (the secret) must not be empty. */
bool api_key_equal(const char *a, size_t alen, const char *b, size_t blen) {
  volatile unsigned char diff = (unsigned char)(alen != blen);
  if (blen == 0)
    return false;
  for (size_t i = 0; i < alen; i++)
    diff |= (unsigned char)(a[i] ^ b[i % blen]);
  return diff == 0;
}

/* The resource a route belongs to, as tokens name their audience. */
static bool route_is_mcp(const struct req *r) {
  return r->route && !strcmp(r->route->pattern, "/mcp");
}

/* A request with an access token (hat_...): what it allows, checked for
 * this route's resource.  Every failure is one 401 invalid_token (which
 * failure it was is not for the client). */
static enum MHD_Result authenticate_token(struct req *r, const char *tok, size_t len) {
  const struct route *rt = r->route;
  unsigned need = rt->scope & ~SCOPE_TOKEN;
  if (!r->srv->cfg.auth || len >= AUTH_TOKEN_SIZE) {
    api_www_auth(r, "invalid_token", need);
    return api_reply_error(r, 401, "invalid_token", "invalid access token");
  }
  char buf[AUTH_TOKEN_SIZE];
  memcpy(buf, tok, len);
  buf[len] = '\0';
  char iss[600], resource[700];
  if (api_issuer(r, iss, sizeof iss) < 0) {
    explicit_bzero(buf, sizeof buf);
    return api_reply_error(r, 400, "bad_request", "the Host header is not a host name");
  }
  snprintf(resource, sizeof resource, "%s/%s", iss, route_is_mcp(r) ? "mcp" : "v1");
  struct auth_grant g;
  struct husk_err err;
  int rc = auth_token_check(r->srv->cfg.auth, buf, resource, &g, &err);
  explicit_bzero(buf, sizeof buf);
  if (rc < 0) {
    if (err.code != ENOENT && err.code != EKEYEXPIRED && err.code != EKEYREVOKED &&
        err.code != EACCES && err.code != EINVAL)
      return api_reply_err(r, &err);
    api_www_auth(r, "invalid_token", need);
    return api_reply_error(r, 401, "invalid_token",
                           "the access token is invalid, expired, revoked or for another resource");
  }
  r->token = true;
  r->scopes = g.scopes;
  snprintf(r->tenant, sizeof r->tenant, "%s", g.tenant_id);
  snprintf(r->user_id, sizeof r->user_id, "%s", g.user_id);
  snprintf(r->user_name, sizeof r->user_name, "%s", g.display_name[0] ? g.display_name : g.user_name);
  snprintf(r->client_id, sizeof r->client_id, "%s", g.client_id);
  snprintf(r->client_name, sizeof r->client_name, "%s", g.client_name);
  snprintf(r->idp_subject, sizeof r->idp_subject, "%s", g.idp_subject);
  if (rt->auth == AUTH_ADMIN)
    return api_reply_error(r, 403, "forbidden", "this route needs the admin key");
  if (rt->scope == 0)
    return api_reply_error(r, 403, "forbidden",
                           "this route needs a tenant key: a signed-in person's token cannot use it");
  if ((r->scopes & need) != need) {
    api_www_auth(r, "insufficient_scope", need);
    char names[256];
    auth_scopes_format(need, names, sizeof names);
    return api_reply_error(r, 403, "insufficient_scope", "this needs the scope \"%s\"", names);
  }
  return MHD_YES;
}

void api_created_by(const struct req *r, char *out, size_t size) {
  if (r->token && r->user_id[0])
    snprintf(out, size, "%s", r->user_id);
  else if (r->key_id[0])
    snprintf(out, size, "key:%s", r->key_id);
  else if (size)
    out[0] = '\0';
}

json_t *api_created_by_json(const char *created_by) {
  return created_by && created_by[0] ? json_string(created_by) : json_null();
}

/* A 401 for a key that is not one: it still shows an OAuth client where
 * to sign in (a client holding a stale key finds the sign-in). */
static enum MHD_Result bad_key(struct req *r, unsigned need, const char *msg) {
  if (r->srv->cfg.auth && r->route->scope)
    api_www_auth(r, "invalid_token", need);
  return api_reply_error(r, 401, "unauthorized", "%s", msg);
}

enum MHD_Result api_authenticate(struct req *r) {
  const struct route *rt = r->route;
  if (rt->auth == AUTH_NONE)
    return MHD_YES;
  if (rt->auth == AUTH_E2B_KEY)
    return e2b_authenticate_key(r);
  if (rt->auth == AUTH_E2B_BOX)
    return e2b_authenticate_box(r);
  /* RFC 6750 2.3 is not offered: a token in a URL ends up in logs and
   * histories. */
  if (api_query(r, "access_token"))
    return api_reply_error(r, 400, "bad_request",
                           "send the access token in the Authorization header, not in the URL");
  /* A refusal tells OAuth clients where to sign in (RFC 9728). */
  unsigned need = rt->scope & ~SCOPE_TOKEN;
  const char *h = api_header(r, MHD_HTTP_HEADER_AUTHORIZATION);
  if (!h) {
    if (r->srv->cfg.auth && rt->scope)
      api_www_auth(r, NULL, need);
    return api_reply_error(r, 401, "unauthorized", "missing `Authorization: Bearer <key>` header");
  }
  if (strncasecmp(h, "Bearer ", 7) != 0) {
    if (r->srv->cfg.auth && rt->scope)
      api_www_auth(r, NULL, need);
    return api_reply_error(r, 401, "unauthorized", "the Authorization header must be `Bearer <key>`");
  }
  const char *key = h + 7;
  while (*key == ' ')
    key++;
  size_t klen = strlen(key);
  while (klen > 0 && key[klen - 1] == ' ')
    klen--;
  if (klen == 0)
    return bad_key(r, need, "empty API key");
  r->scopes = ~0u;
  if (klen > 4 && !memcmp(key, "hat_", 4))
    return authenticate_token(r, key, klen);

  if (api_key_equal(key, klen, r->srv->admin_key, r->srv->admin_key_len)) {
    r->admin = true;
  } else {
    char buf[STATE_KEY_SIZE + 1];
    struct state_key k;
    struct husk_err err;
    if (klen >= sizeof buf)
      return bad_key(r, need, "invalid API key");
    memcpy(buf, key, klen);
    buf[klen] = '\0';
    if (state_key_authenticate(r->srv->cfg.state, buf, &k, &err) < 0) {
      explicit_bzero(buf, sizeof buf);
      if (err.code == EACCES || err.code == EINVAL || err.code == ENOENT)
        return bad_key(r, need, "invalid API key");
      return api_reply_err(r, &err);
    }
    explicit_bzero(buf, sizeof buf);
    snprintf(r->tenant, sizeof r->tenant, "%s", k.tenant_id);
    snprintf(r->key_id, sizeof r->key_id, "%s", k.id);
  }

  if (rt->auth == AUTH_ADMIN && !r->admin)
    return api_reply_error(r, 403, "forbidden", "this route needs the admin key");
  if (rt->auth == AUTH_TENANT && r->admin)
    return api_reply_error(r, 403, "forbidden",
                           "this route needs a tenant key (create one with POST /v1/tenants/{id}/keys)");
  return MHD_YES;
}

/* Valid UTF-8 without control characters (state refuses anything else
 * in a detail): sanitize, then replace a cut sequence. */
static void clean_detail(char *d) {
  husk_sanitize_line(d);
  size_t n = strlen(d);
  if (!utf8_valid(d, n)) {
    for (size_t i = 0; i < n; i++)
      if ((unsigned char)d[i] >= 0x80)
        d[i] = '?';
  }
}

/* The person fields of a record: valid UTF-8 names cut at a character. */
static void set_name(char *dst, size_t size, const char *src) {
  snprintf(dst, size, "%s", src ? src : "");
  clean_detail(dst);
}

void api_audit_event(struct req *r, const char *tenant, const char *action, const char *outcome,
                     unsigned status, const struct auth_user *u, const char *client_id,
                     const char *client_name, const char *detail) {
  struct state_audit rec;
  memset(&rec, 0, sizeof rec);
  snprintf(rec.tenant_id, sizeof rec.tenant_id, "%s", tenant ? tenant : "");
  snprintf(rec.action, sizeof rec.action, "%s", action);
  snprintf(rec.detail, sizeof rec.detail, "%s", detail ? detail : "");
  clean_detail(rec.detail);
  snprintf(rec.outcome, sizeof rec.outcome, "%s", outcome);
  rec.status = (int)status;
  if (u && u->id[0]) {
    snprintf(rec.user_id, sizeof rec.user_id, "%s", u->id);
    set_name(rec.user_name, sizeof rec.user_name, u->display_name[0] ? u->display_name : u->name);
    snprintf(rec.idp_subject, sizeof rec.idp_subject, "%s", u->idp_subject);
  }
  snprintf(rec.client_id, sizeof rec.client_id, "%s", client_id ? client_id : "");
  set_name(rec.client_name, sizeof rec.client_name, client_name);
  struct husk_err err;
  if (state_audit_add(r->srv->cfg.state, &rec, NULL, &err) < 0) {
    husk_sanitize_line(err.msg);
    api_log(r->srv, "audit record for %s failed: %s", rec.action, err.msg);
  }
}

void api_audit(struct req *r, const char *outcome) {
  if (r->audited || !r->route || !r->route->action)
    return;
  r->audited = true;
  struct state_audit rec;
  memset(&rec, 0, sizeof rec);
  if (!r->admin)
    snprintf(rec.tenant_id, sizeof rec.tenant_id, "%s", r->tenant);
  snprintf(rec.key_id, sizeof rec.key_id, "%s", r->key_id);
  snprintf(rec.action, sizeof rec.action, "%s", r->route->action);
  snprintf(rec.box_id, sizeof rec.box_id, "%s", r->audit_box);
  snprintf(rec.detail, sizeof rec.detail, "%s", r->audit_detail);
  clean_detail(rec.detail);
  /* Who, when a person signed in (a token): user and client. */
  snprintf(rec.user_id, sizeof rec.user_id, "%s", r->user_id);
  set_name(rec.user_name, sizeof rec.user_name, r->user_name);
  snprintf(rec.client_id, sizeof rec.client_id, "%s", r->client_id);
  set_name(rec.client_name, sizeof rec.client_name, r->client_name);
  snprintf(rec.idp_subject, sizeof rec.idp_subject, "%s", r->idp_subject);
  snprintf(rec.outcome, sizeof rec.outcome, "%s", outcome);
  rec.status = r->status;
  struct husk_err err;
  if (state_audit_add(r->srv->cfg.state, &rec, NULL, &err) < 0) {
    husk_sanitize_line(err.msg);
    api_log(r->srv, "audit record for %s failed: %s", rec.action, err.msg);
  }
}
