/* Single sign-on through a tenant's OpenID Connect provider (docs/oauth.md,
 * "Signing in with the organization's identity provider"): the operator's
 * routes (PUT/GET/DELETE /v1/tenants/{tid}/oidc), the sign-in page's
 * action=sso (called by routes_oauth.c), the provider's redirect back
 * (GET /oauth/callback) and the consent page it shows, and that page's
 * Allow/Deny (POST /oauth/callback).  The rules are the core's
 * (src/auth/oidc.c); the pages and their defences are routes_oauth.c's. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/internal.h"
#include "auth/oidc.h"
#include "s3/s3_internal.h"
#include "util/cleanup.h"
#include "util/cleanup_json.h"
#include "util/clock.h"
#include "util/strbuf.h"

#define SSO_CSRF_TTL_S 3600
#define SSO_STAMP_LEN 12

static enum MHD_Result no_oidc(struct req *r) {
  return api_reply_error(r, 404, "not_found", "single sign-on is not enabled on this server");
}

/* ---- the operator's routes ---- */

static const char *const put_fields[] = {"issuer", "client_id", "client_secret", "display_name",
                                         "claim",  "scopes",    "create_users",  NULL};

static enum MHD_Result oidc_err(struct req *r, const struct husk_err *err) {
  switch (err->code) {
  case ENOENT:
    return api_reply_error(r, 404, "not_found", "%s", err->msg[0] ? err->msg : "not found");
  case EINVAL: return api_reply_error(r, 400, "bad_request", "%s", err->msg);
  case EBADMSG: return api_reply_error(r, 400, "oidc_discovery_failed", "%s", err->msg);
  case EBUSY: return api_reply_error(r, 503, "busy", "too many sign-in fetches at once: try again");
  default: return api_reply_err(r, err);
  }
}

/* The configuration's JSON, with the callback the operator registers at
 * the provider for this tenant (the issuer as clients see it). */
static enum MHD_Result config_reply(struct req *r, const struct state_oidc_config *c) {
  json_t *o = oidc_config_json(c);
  char iss[600];
  if (o && api_issuer(r, iss, sizeof iss) == 0) {
    char cb[OIDC_REDIRECT_MAX];
    snprintf(cb, sizeof cb, "%s/oauth/callback/%s", iss, c->tenant_id);
    if (json_object_set_new(o, "redirect_uri", json_string(cb)) < 0) {
      json_decref(o);
      o = NULL;
    }
  }
  return api_reply_json(r, 200, o);
}

enum MHD_Result h_oidc_put(struct req *r) {
  if (!r->srv->cfg.oidc)
    return no_oidc(r);
  const char *tid = r->params[0];
  cleanup_json json_t *o = api_body_object(r, put_fields);
  if (!o)
    return api_reply_bad(r);
  struct oidc_config_in in = {.secret_change = OIDC_SECRET_KEEP};
  if (jget_string(o, "issuer", &in.issuer, &r->err) < 0 ||
      jget_string(o, "client_id", &in.client_id, &r->err) < 0 ||
      jget_string(o, "display_name", &in.display_name, &r->err) < 0 ||
      jget_string(o, "claim", &in.claim, &r->err) < 0 ||
      jget_string(o, "scopes", &in.scopes, &r->err) < 0 ||
      jget_string(o, "create_users", &in.create_users, &r->err) < 0)
    return api_reply_bad(r);
  if (!in.issuer || !in.client_id)
    return api_reply_error(r, 400, "bad_request", "`issuer` and `client_id` are required");
  json_t *sec = json_object_get(o, "client_secret");
  if (sec && json_is_null(sec)) {
    in.secret_change = OIDC_SECRET_REMOVE;
  } else if (sec) {
    if (!json_is_string(sec))
      return api_reply_error(r, 400, "bad_request", "`client_secret` must be a string or null");
    in.secret_change = OIDC_SECRET_SET;
    in.client_secret = json_string_value(sec);
    if (strlen(in.client_secret) != json_string_length(sec))
      return api_reply_error(r, 400, "bad_request", "`client_secret` holds a NUL");
  }
  snprintf(r->audit_detail, sizeof r->audit_detail,
           "tenant=%.32s issuer=%.120s client_id=%.40s secret=%s", tid, in.issuer, in.client_id,
           in.secret_change == OIDC_SECRET_SET      ? "set"
           : in.secret_change == OIDC_SECRET_REMOVE ? "removed"
                                                    : "kept");
  struct state_oidc_config c;
  struct husk_err err;
  if (oidc_config_put(r->srv->cfg.oidc, tid, &in, &c, &err) < 0) {
    /* The reason for the operator, never the secret (the core never puts
     * it in a message). */
    size_t l = strlen(r->audit_detail);
    snprintf(r->audit_detail + l, sizeof r->audit_detail - l, ": %s", err.msg);
    return oidc_err(r, &err);
  }
  return config_reply(r, &c);
}

enum MHD_Result h_oidc_get(struct req *r) {
  if (!r->srv->cfg.oidc)
    return no_oidc(r);
  struct state_oidc_config c;
  struct husk_err err;
  if (oidc_config_get(r->srv->cfg.oidc, r->params[0], &c, &err) < 0)
    return oidc_err(r, &err);
  return config_reply(r, &c);
}

enum MHD_Result h_oidc_delete(struct req *r) {
  if (!r->srv->cfg.oidc)
    return no_oidc(r);
  struct husk_err err;
  snprintf(r->audit_detail, sizeof r->audit_detail, "tenant=%.32s", r->params[0]);
  if (oidc_config_delete(r->srv->cfg.oidc, r->params[0], &err) < 0)
    return oidc_err(r, &err);
  return api_reply_json(r, 200, json_pack("{s:s, s:b}", "tenant_id", r->params[0], "deleted", 1));
}

/* ---- the sign-in ---- */

static bool https_issuer(const char *iss) { return !strncmp(iss, "https://", 8); }

/* The binding cookie's name: __Host- needs Secure, so over https only. */
static const char *sso_cookie_name(const char *iss) {
  return https_issuer(iss) ? "__Host-husk_sso" : "husk_sso";
}

static const char *sso_cookie(struct req *r, const char *iss) {
  const char *c = MHD_lookup_connection_value(r->conn, MHD_COOKIE_KIND, sso_cookie_name(iss));
  if (!c || strlen(c) != OIDC_BINDING_LEN || strspn(c, "0123456789abcdef") != OIDC_BINDING_LEN)
    return NULL;
  return c;
}

static enum MHD_Result simple_page(struct req *r, unsigned status, const char *title,
                                   const char *msg) {
  struct strbuf b = {0};
  api_page_head(&b, title);
  strbuf_str(&b, "<p class=\"error\">");
  strbuf_html(&b, msg);
  strbuf_str(&b, "</p></main></body></html>");
  return api_reply_page(r, status, &b, NULL, NULL);
}

int api_sso_start(struct req *r, const struct api_az *a, const char *org, enum MHD_Result *ret,
                  const char **msg, unsigned *status) {
  static const char not_set_up[] = "Single sign-on is not set up for this organization.";
  *status = 200;
  *msg = not_set_up;
  if (!r->srv->cfg.oidc || !org || !*org || strlen(org) > 256)
    return 0;
  char src[S3_RATE_KEY_MAX];
  api_oauth_source(r, src, sizeof src);
  if (!api_sso_rate_take(r, src)) {
    api_audit_anon(r, "", "oauth.sign_in", "denied", 429, a->client.id, a->client.name,
                   "sso too many sign-ins started from this address");
    *ret = simple_page(r, 429, "Too many attempts", "Too many sign-ins, try again later.");
    return 1;
  }
  cleanup_json json_t *params = json_object();
  for (size_t i = 0; params && i < AZ_N; i++)
    if (a->v[i] && json_object_set_new(params, api_az_names[i], json_string(a->v[i])) < 0) {
      json_decref(params);
      params = NULL;
    }
  cleanup_free char *ptext = params ? json_dumps(params, JSON_COMPACT) : NULL;
  if (!ptext) {
    *ret = api_reply_error(r, 500, "internal_error", "out of memory");
    return 1;
  }
  char redirect[OIDC_REDIRECT_MAX];
  snprintf(redirect, sizeof redirect, "%s/oauth/callback", a->iss);
  char binding[OIDC_BINDING_LEN + 1], tid[STATE_TENANT_ID_SIZE];
  char *url = NULL;
  struct husk_err err;
  if (oidc_start(r->srv->cfg.oidc, org, ptext, redirect, &url, binding, tid, &err) < 0) {
    if (err.code == OIDC_E_NOT_SET_UP)
      return 0;
    if (err.code == OIDC_E_TOO_MANY) {
      *ret = simple_page(r, 429, "Too many attempts", "Too many sign-ins, try again later.");
      return 1;
    }
    *ret = api_reply_err(r, &err);
    return 1;
  }
  char cookie[200];
  snprintf(cookie, sizeof cookie, "%s=%s; Path=/; HttpOnly; SameSite=Lax; Max-Age=%lld%s",
           sso_cookie_name(a->iss), binding, (long long)(OIDC_PENDING_TTL_MS / 1000),
           https_issuer(a->iss) ? "; Secure" : "");
  OPENSSL_cleanse(binding, sizeof binding);
  /* A page that moves on by itself, not a 303: the sign-in page's CSP
   * (form-action 'self' and the client's origin) also governs the
   * redirects that answer its form, and the provider's origin is not
   * known when that page is served.  A meta refresh is a new navigation. */
  struct strbuf b = {0};
  strbuf_str(&b, "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">"
                 "<meta name=\"robots\" content=\"noindex\"><meta http-equiv=\"refresh\" "
                 "content=\"0;url=");
  strbuf_html(&b, url);
  strbuf_str(&b, "\"><title>Signing in</title><link rel=\"stylesheet\" href=\"/oauth/style.css\">"
                 "</head><body><main><h1>Signing in</h1><p>Continuing to your organization's "
                 "sign-in page&hellip;</p><p><a id=\"continue\" href=\"");
  strbuf_html(&b, url);
  strbuf_str(&b, "\">Continue</a></p></main></body></html>");
  OPENSSL_cleanse(url, strlen(url)); /* it holds the state and the nonce */
  free(url);
  *ret = api_reply_page(r, 200, &b, NULL, cookie);
  OPENSSL_cleanse(cookie, sizeof cookie);
  return 1;
}

/* The consent form's token: a stamp (seconds of the monotonic clock) and
 * the HMAC of the stamp, the handle and the binding cookie. */
static int sso_csrf(struct req *r, int64_t made_s, const char *handle, const char *binding,
                    char out[SSO_STAMP_LEN + 65]) {
  char stamp[SSO_STAMP_LEN + 1];
  snprintf(stamp, sizeof stamp, "%012" PRIx64, (uint64_t)made_s & UINT64_C(0xffffffffffff));
  struct strbuf b = {0};
  strbuf_printf(&b, "sso-consent\n%s\n%s\n%s", stamp, handle, binding);
  char *text = strbuf_take(&b);
  if (!text)
    return -1;
  char mac[65];
  int rc = api_oauth_hmac(r, text, mac);
  OPENSSL_cleanse(text, strlen(text));
  free(text);
  if (rc < 0)
    return -1;
  memcpy(out, stamp, SSO_STAMP_LEN);
  memcpy(out + SSO_STAMP_LEN, mac, 65);
  return 0;
}

static const char *sso_csrf_check(struct req *r, const char *handle, const char *binding,
                                  const char *token) {
  if (!token || strlen(token) != SSO_STAMP_LEN + 64 ||
      strspn(token, "0123456789abcdef") != SSO_STAMP_LEN + 64)
    return "no well-formed form token";
  char stamp[SSO_STAMP_LEN + 1];
  memcpy(stamp, token, SSO_STAMP_LEN);
  stamp[SSO_STAMP_LEN] = '\0';
  int64_t made = (int64_t)strtoull(stamp, NULL, 16), now = mono_ms() / 1000;
  char want[SSO_STAMP_LEN + 65];
  if (sso_csrf(r, made, handle, binding, want) < 0 ||
      CRYPTO_memcmp(want, token, SSO_STAMP_LEN + 64) != 0)
    return "form token does not match";
  if (made > now || now - made > SSO_CSRF_TTL_S)
    return "form token expired";
  return NULL;
}

/* The authorization request kept with the sign-in, checked again (the
 * client or its redirect URIs may have changed since). */
static const char *az_of(struct req *r, json_t *params, struct api_az *a) {
  memset(a, 0, sizeof *a);
  for (size_t i = 0; i < AZ_N; i++)
    a->v[i] = json_string_value(json_object_get(params, api_az_names[i]));
  return api_az_check(r, a);
}

static const char *const rfc6749_errors[] = {"invalid_request",         "unauthorized_client",
                                             "access_denied",           "unsupported_response_type",
                                             "invalid_scope",           "server_error",
                                             "temporarily_unavailable", NULL};

static enum MHD_Result sso_failed(struct req *r, const struct oidc_result *res, int code,
                                  const char *provider_error) {
  char detail[160];
  const char *perr = NULL;
  for (size_t i = 0; provider_error && rfc6749_errors[i]; i++)
    if (!strcmp(provider_error, rfc6749_errors[i]))
      perr = rfc6749_errors[i];
  snprintf(detail, sizeof detail, "sso %s%s%s", res->reason ? res->reason : oidc_reason(code),
           code == OIDC_E_PROVIDER_ERROR && perr ? " " : "",
           code == OIDC_E_PROVIDER_ERROR && perr ? perr : "");
  /* Anyone can call the callback: a record without a sign-in behind it is
   * rate-limited; one with a tenant names it and the client that asked
   * (and the user, when the provider vouched for a known one). */
  struct auth_client c = {0};
  struct husk_err cerr;
  bool known = res->client_id[0] &&
               auth_client_get(r->srv->cfg.auth, res->client_id, &c, &cerr) == 0;
  if (code == OIDC_E_UNKNOWN_STATE || !res->tenant_id[0])
    api_audit_anon(r, res->tenant_id, "oauth.sign_in", "denied", 400, NULL, NULL, detail);
  else
    api_audit_event(r, res->tenant_id, "oauth.sign_in", "denied", 400,
                    res->user.id[0] ? &res->user : NULL, known ? c.id : NULL,
                    known ? c.name : NULL, detail);
  if (code == OIDC_E_BUSY)
    return simple_page(r, 503, "Busy", "The server is busy. Try again in a moment.");
  if (code == OIDC_E_TOO_MANY)
    return simple_page(r, 429, "Too many attempts", "Too many sign-ins, try again later.");
  char msg[200];
  if (code == OIDC_E_PROVIDER_ERROR)
    snprintf(msg, sizeof msg, "The provider refused the sign-in%s%s%s.", perr ? " (" : "",
             perr ? perr : "", perr ? ")" : "");
  else
    snprintf(msg, sizeof msg, "Signing in with your organization's provider failed.");
  return api_error_page(r, 400, msg);
}

static enum MHD_Result consent_page(struct req *r, const struct api_az *a,
                                    const struct oidc_result *res, const char *binding) {
  char csrf[SSO_STAMP_LEN + 65];
  if (sso_csrf(r, mono_ms() / 1000, res->handle, binding, csrf) < 0)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  unsigned granted = a->scopes & auth_role_scopes(res->user.role);
  struct strbuf b = {0};
  api_page_head(&b, "Allow access?");
  strbuf_str(&b, "<p>Signed in as <strong>");
  strbuf_html(&b, res->user.display_name[0] ? res->user.display_name : res->user.name);
  strbuf_str(&b, "</strong> via ");
  strbuf_html(&b, res->via);
  strbuf_str(&b, ".</p><p><strong>");
  strbuf_html(&b, a->client.name[0] ? a->client.name : "An unnamed application");
  strbuf_str(&b, "</strong> asks to use husk as you. If you allow it, you are sent back to "
                 "<strong>");
  strbuf_html(&b, a->host);
  strbuf_str(&b, "</strong>.</p><p>It may then:</p><ul>");
  for (unsigned i = 0; i < AUTH_SCOPE_COUNT; i++)
    if (granted & (1u << i)) {
      strbuf_str(&b, "<li>");
      strbuf_html(&b, api_scope_text(1u << i));
      strbuf_str(&b, " <span class=\"note\">(");
      strbuf_html(&b, auth_scope_names[i]);
      strbuf_str(&b, ")</span></li>");
    }
  strbuf_str(&b, "</ul>");
  if (!granted)
    strbuf_str(&b, "<p class=\"note\">Your role allows none of what it asks.</p>");
  strbuf_str(&b, "<form method=\"post\" action=\"/oauth/callback\">");
  strbuf_printf(&b, "<input type=\"hidden\" name=\"handle\" value=\"%s\">", res->handle);
  strbuf_printf(&b, "<input type=\"hidden\" name=\"csrf\" value=\"%s\">", csrf);
  strbuf_str(&b, "<div class=\"buttons\"><button class=\"allow\" type=\"submit\" name=\"action\" "
                 "value=\"allow\">Allow</button><button type=\"submit\" name=\"action\" "
                 "value=\"deny\">Deny</button></div></form></main></body></html>");
  return api_reply_page(r, 200, &b, a->origin, NULL);
}

enum MHD_Result h_oauth_callback_get(struct req *r) {
  if (!r->srv->cfg.auth || !r->srv->cfg.oidc)
    return api_error_page(r, 404, "Single sign-on is not enabled on this server.");
  char iss[600];
  if (api_issuer(r, iss, sizeof iss) < 0)
    return api_error_page(r, 400, "The Host header is not a host name.");
  const char *state = api_query(r, "state"), *code = api_query(r, "code"),
             *perror_ = api_query(r, "error");
  const char *binding = sso_cookie(r, iss);
  /* The tenant's own callback (oidc_start): another tenant's sign-in
   * arriving here does not match the one its pending row names. */
  const char *tid = r->params[0];
  if (!tid || strlen(tid) >= STATE_TENANT_ID_SIZE)
    return api_error_page(r, 404, "No such sign-in.");
  char redirect[OIDC_REDIRECT_MAX];
  snprintf(redirect, sizeof redirect, "%s/oauth/callback/%s", iss, tid);
  struct oidc_result res;
  struct husk_err err;
  if (oidc_finish(r->srv->cfg.oidc, state, code, api_query(r, "iss"), perror_, binding, redirect,
                  &res, &err) < 0) {
    enum MHD_Result ret = sso_failed(r, &res, err.code, perror_);
    oidc_result_free(&res);
    return ret;
  }
  cleanup_json json_t *params = json_loads(res.params, 0, NULL);
  struct api_az a;
  const char *bad = az_of(r, params, &a);
  enum MHD_Result ret;
  if (bad) {
    api_audit_event(r, res.tenant_id, "oauth.sign_in", "denied", 400, &res.user, NULL, NULL,
                    "sso the authorization request is no longer valid");
    ret = api_error_page(r, 400, bad);
  } else {
    ret = consent_page(r, &a, &res, binding);
  }
  oidc_result_free(&res);
  return ret;
}

enum MHD_Result h_oauth_callback_post(struct req *r) {
  if (!r->srv->cfg.auth || !r->srv->cfg.oidc)
    return api_error_page(r, 404, "Single sign-on is not enabled on this server.");
  char iss[600];
  if (api_issuer(r, iss, sizeof iss) < 0)
    return api_error_page(r, 400, "The Host header is not a host name.");
  const char *ct = api_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
  if (!ct || strncasecmp(ct, "application/x-www-form-urlencoded", 33) != 0)
    return api_error_page(r, 400, "The form could not be read.");
  struct api_form form;
  if (api_form_parse(r->body ? r->body : "", r->body_len, &form, &r->err) < 0) {
    api_form_free(&form);
    return api_error_page(r, 400, "The form could not be read.");
  }
  const char *handle = api_form_get(&form, "handle"), *csrf = api_form_get(&form, "csrf"),
             *action = api_form_get(&form, "action");
  const char *binding = sso_cookie(r, iss);
  const char *why = !binding  ? "no cookie"
                    : !handle ? "no handle"
                              : sso_csrf_check(r, handle, binding, csrf);
  enum MHD_Result ret;
  if (why) {
    char detail[120];
    snprintf(detail, sizeof detail, "sso %s", why);
    api_audit_anon(r, "", "oauth.csrf", "denied", 403, NULL, NULL, detail);
    api_form_free(&form);
    return api_error_page(r, 403, "This form has expired or was not sent from this page.");
  }
  struct oidc_result res;
  struct husk_err err;
  if (oidc_consent(r->srv->cfg.oidc, handle, binding, true, &res, &err) < 0) {
    ret = sso_failed(r, &res, err.code, NULL);
    oidc_result_free(&res);
    api_form_free(&form);
    return ret;
  }
  cleanup_json json_t *params = json_loads(res.params, 0, NULL);
  struct api_az a;
  const char *bad = az_of(r, params, &a);
  if (bad) {
    api_audit_event(r, res.tenant_id, "oauth.sign_in", "denied", 400, &res.user, NULL, NULL,
                    "sso the authorization request is no longer valid");
    ret = api_error_page(r, 400, bad);
  } else if (!action || strcmp(action, "allow")) {
    api_audit_event(r, res.tenant_id, "oauth.consent", "denied", 302, &res.user, a.client.id,
                    a.client.name, "sso the person chose Deny");
    ret = api_az_redirect(r, &a, "error", "access_denied", "error_description",
                          "the user denied the request");
  } else {
    unsigned granted = a.scopes & auth_role_scopes(res.user.role);
    if (!granted) {
      api_audit_event(r, res.tenant_id, "oauth.sign_in", "denied", 302, &res.user, a.client.id,
                      a.client.name, "sso no scope asked is allowed to the role");
      ret = api_az_redirect(r, &a, "error", "invalid_scope", "error_description",
                            "none of the scopes asked is allowed to this user");
    } else {
      char code[AUTH_TOKEN_SIZE];
      struct auth_code_request cr = {.client_id = a.client.id,
                                     .redirect_uri = a.v[AZ_REDIRECT],
                                     .code_challenge = a.v[AZ_CHALLENGE],
                                     .resource = a.resource,
                                     .scopes = granted,
                                     .user = &res.user};
      if (auth_code_issue(r->srv->cfg.auth, &cr, code, &err) < 0) {
        ret = api_reply_err(r, &err);
      } else {
        char names[256], detail[640];
        auth_scopes_format(granted, names, sizeof names);
        snprintf(detail, sizeof detail, "sso scope=%s resource=%.300s", names, a.resource);
        api_audit_event(r, res.tenant_id, "oauth.sign_in", "ok", 302, &res.user, a.client.id,
                        a.client.name, detail);
        ret = api_az_redirect(r, &a, "code", code, NULL, NULL);
        OPENSSL_cleanse(code, sizeof code);
      }
    }
  }
  oidc_result_free(&res);
  api_form_free(&form);
  return ret;
}
