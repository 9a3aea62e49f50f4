/* Single sign-on through a tenant's OpenID Connect provider (oidc.h):
 * the operator's configuration and its discovery, the sign-in's two
 * halves (start: a pending row and the provider's URL; finish: the code
 * exchanged, the ID token verified, the user found, linked or made), and
 * the consent row the front's page spends.
 *
 * Every fetch goes through the daemon's sign-in fetcher (fetch.h); the
 * discovery document and the JWKS are kept per tenant for
 * OIDC_CACHE_TTL_MS, and an unknown kid fetches the JWKS again at most
 * once per OIDC_JWKS_REFETCH_MS. */
#define _GNU_SOURCE
#include "auth/oidc.h"

#include <curl/curl.h>
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "auth/auth_internal.h"
#include "egress/vault.h"
#include "util/base64.h"
#include "util/cleanup.h"
#include "util/cleanup_json.h"
#include "util/id.h"
#include "util/json_text.h"
#include "util/strbuf.h"

#define OIDC_CACHE_SLOTS 64
#define OIDC_DEFAULT_SCOPES "openid email profile"

struct jwks_slot {
  char tenant_id[STATE_TENANT_ID_SIZE];
  char jwks_uri[STATE_OIDC_URL_SIZE];
  json_t *jwks;         /* NULL: free slot */
  int64_t fetched_ms;   /* when it was fetched */
  int64_t refetched_ms; /* the last fetch for an unknown kid */
};

struct oidc {
  struct oidc_env env;
  pthread_mutex_t lock;
  struct jwks_slot slots[OIDC_CACHE_SLOTS];
};

static int64_t now_ms(const struct oidc *o) {
  return o->env.clock_ms ? o->env.clock_ms() : state_now_ms();
}

int oidc_open(struct oidc **out, const struct oidc_env *env, struct husk_err *err) {
  *out = NULL;
  if (!env || !env->st || !env->auth || !env->fetcher)
    return husk_fail(err, EINVAL, "single sign-on needs the state, the users and a fetcher");
  struct oidc *o = calloc(1, sizeof *o);
  if (!o)
    return husk_error(err, ENOMEM, "single sign-on");
  o->env = *env;
  if (pthread_mutex_init(&o->lock, NULL) != 0) {
    free(o);
    return husk_error(err, ENOMEM, "single sign-on");
  }
  *out = o;
  return 0;
}

void oidc_close(struct oidc *o) {
  if (!o)
    return;
  for (size_t i = 0; i < OIDC_CACHE_SLOTS; i++)
    json_decref(o->slots[i].jwks);
  pthread_mutex_destroy(&o->lock);
  free(o);
}

/* ---- URLs ---- */

static bool host_loopback(const char *h) {
  return !strcasecmp(h, "127.0.0.1") || !strcmp(h, "[::1]") || !strcasecmp(h, "localhost");
}

/* An issuer or endpoint URL: https, or http to a loopback host when
 * `http_ok`; a host; no userinfo, query (for the issuer) or fragment; at
 * most OIDC_ISSUER_MAX bytes.  *loopback: its host is a loopback one. */
static int url_check(const char *what, const char *url, bool is_issuer, bool http_ok,
                     bool *loopback, char *host_out, size_t host_size, struct husk_err *err) {
  *loopback = false;
  size_t n = url ? strnlen(url, OIDC_ISSUER_MAX + 1) : 0;
  if (n == 0 || n > OIDC_ISSUER_MAX)
    return husk_fail(err, EINVAL, "%s must be a URL of at most %d bytes", what, OIDC_ISSUER_MAX);
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)url[i] <= 0x20 || (unsigned char)url[i] >= 0x7f || url[i] == '"' ||
        url[i] == '<' || url[i] == '>' || url[i] == '\\')
      return husk_fail(err, EINVAL, "%s holds a character a URL may not", what);
  if (strchr(url, '#'))
    return husk_fail(err, EINVAL, "%s must not have a fragment", what);
  if (is_issuer && strchr(url, '?'))
    return husk_fail(err, EINVAL, "%s must not have a query", what);
  CURLU *u = curl_url();
  if (!u)
    return husk_error(err, ENOMEM, "URL");
  char *scheme = NULL, *host = NULL, *user = NULL, *pass = NULL;
  int rc = -1;
  if (curl_url_set(u, CURLUPART_URL, url, CURLU_NON_SUPPORT_SCHEME) != CURLUE_OK ||
      curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
      curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !host[0]) {
    husk_fail(err, EINVAL, "%s is not a URL with a host", what);
    goto out;
  }
  if (curl_url_get(u, CURLUPART_USER, &user, 0) == CURLUE_OK ||
      curl_url_get(u, CURLUPART_PASSWORD, &pass, 0) == CURLUE_OK) {
    husk_fail(err, EINVAL, "%s must not hold credentials", what);
    goto out;
  }
  /* The scheme as written: curl lowercases it. */
  bool https = !strncmp(url, "https://", 8), http = !strncmp(url, "http://", 7);
  *loopback = host_loopback(host);
  if (!https && !(http && *loopback && http_ok)) {
    husk_fail(err, EINVAL, "%s must be https:// (or http:// to 127.0.0.1, [::1] or localhost)",
              what);
    goto out;
  }
  if (host_out)
    snprintf(host_out, host_size, "%s", host);
  rc = 0;
out:
  curl_free(scheme);
  curl_free(host);
  curl_free(user);
  curl_free(pass);
  curl_url_cleanup(u);
  return rc;
}

static int fetch_json(struct oidc *o, const struct auth_fetch_request *rq, const char *what,
                      json_t **out, int64_t *max_age, struct husk_err *err) {
  *out = NULL;
  struct auth_fetch_reply rep;
  if (auth_fetch(o->env.fetcher, rq, &rep, err) < 0) {
    if (err->code == EBUSY)
      return -1;
    return husk_error_wrap(err, "cannot fetch the %s", what);
  }
  long status = rep.status;
  if (max_age)
    *max_age = rep.max_age_s;
  if (status != 200) {
    auth_fetch_reply_free(&rep);
    return husk_fail(err, EBADMSG, "the %s's fetch answered HTTP %ld", what, status);
  }
  json_t *j = NULL;
  if (rep.len && !memchr(rep.body, '\0', rep.len))
    j = json_loadb(rep.body, rep.len, JSON_REJECT_DUPLICATES, NULL);
  OPENSSL_cleanse(rep.body, rep.len); /* a token reply holds tokens */
  auth_fetch_reply_free(&rep);
  if (!json_is_object(j)) {
    json_decref(j);
    return husk_fail(err, EBADMSG, "the %s is not a JSON object", what);
  }
  *out = j;
  return 0;
}

static bool array_has(json_t *a, const char *s) {
  size_t i;
  json_t *v;
  json_array_foreach(a, i,
                     v) if (json_is_string(v) && !strcmp(json_string_value(v), s)) return true;
  return false;
}

/* Fetch and check the discovery document of `c->issuer`, filling the
 * endpoints and token_auth of `c`.  EBADMSG saying why. */
static int discover(struct oidc *o, struct state_oidc_config *c, bool loopback, bool public_client,
                    struct husk_err *err) {
  char url[STATE_OIDC_URL_SIZE + 64];
  size_t n = strlen(c->issuer);
  snprintf(url, sizeof url, "%s%s.well-known/openid-configuration", c->issuer,
           n && c->issuer[n - 1] == '/' ? "" : "/");
  struct auth_fetch_request rq = {.url = url, .loopback_ok = loopback};
  cleanup_json json_t *d = NULL;
  if (fetch_json(o, &rq, "discovery document", &d, NULL, err) < 0) {
    if (err->code != EBUSY)
      err->code = EBADMSG;
    return -1;
  }
  const char *iss = json_string_value(json_object_get(d, "issuer"));
  if (!iss || strcmp(iss, c->issuer))
    return husk_fail(err, EBADMSG, "the discovery document's issuer is not `%s` exactly",
                     c->issuer);
  static const char *const names[] = {"authorization_endpoint", "token_endpoint", "jwks_uri"};
  char *dst[] = {c->authorization_endpoint, c->token_endpoint, c->jwks_uri};
  for (size_t i = 0; i < 3; i++) {
    const char *v = json_string_value(json_object_get(d, names[i]));
    bool lb;
    /* http to a loopback endpoint only for a loopback issuer: a public
     * provider's document cannot point the daemon at its own host. */
    if (!v || url_check(names[i], v, false, loopback, &lb, NULL, 0, err) < 0)
      return husk_fail(err, EBADMSG, "the discovery document's %s is missing or not an https URL",
                       names[i]);
    if (lb && !loopback)
      return husk_fail(err, EBADMSG, "the discovery document's %s names a loopback host", names[i]);
    snprintf(dst[i], STATE_OIDC_URL_SIZE, "%s", v);
  }
  if (!array_has(json_object_get(d, "response_types_supported"), "code"))
    return husk_fail(
        err, EBADMSG,
        "the provider does not list the response type code (response_types_supported)");
  if (!array_has(json_object_get(d, "code_challenge_methods_supported"), "S256"))
    return husk_fail(err, EBADMSG,
                     "the provider does not list PKCE S256 "
                     "(code_challenge_methods_supported)");
  json_t *methods = json_object_get(d, "token_endpoint_auth_methods_supported");
  /* Absent: client_secret_basic (OpenID Connect Discovery 1.0, 3). */
  if (!methods || array_has(methods, "client_secret_basic"))
    snprintf(c->token_auth, sizeof c->token_auth, "client_secret_basic");
  else if (array_has(methods, "client_secret_post"))
    snprintf(c->token_auth, sizeof c->token_auth, "client_secret_post");
  else if (!public_client)
    return husk_fail(err, EBADMSG,
                     "the provider's token endpoint takes neither "
                     "client_secret_basic nor client_secret_post");
  else
    snprintf(c->token_auth, sizeof c->token_auth, "client_secret_basic"); /* unused: none */
  return 0;
}

/* ---- configuration ---- */

static bool printable(const char *s, size_t min, size_t max) {
  size_t n = s ? strnlen(s, max + 1) : 0;
  if (n < min || n > max)
    return false;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
      return false;
  return true;
}

static bool scopes_ok(const char *s) {
  if (!printable(s, 1, OIDC_SCOPES_MAX))
    return false;
  /* Space-separated tokens of RFC 6749 3.3's characters; openid among them. */
  bool openid = false;
  const char *p = s;
  while (*p) {
    if (*p == ' ') {
      p++;
      continue;
    }
    size_t k = strcspn(p, " ");
    for (size_t i = 0; i < k; i++)
      if (p[i] == '"' || p[i] == '\\')
        return false;
    openid |= k == 6 && !strncmp(p, "openid", 6);
    p += k;
  }
  return openid;
}

int oidc_config_put(struct oidc *o, const char *tenant_id, const struct oidc_config_in *in,
                    struct state_oidc_config *out, struct husk_err *err) {
  struct state_oidc_config c;
  memset(&c, 0, sizeof c);
  if (!tenant_id ||
      snprintf(c.tenant_id, sizeof c.tenant_id, "%s", tenant_id) >= (int)sizeof c.tenant_id)
    return husk_fail(err, ENOENT, "no such tenant");
  char host[256] = "";
  bool loopback;
  if (url_check("issuer", in->issuer, true, true, &loopback, host, sizeof host, err) < 0)
    return -1;
  snprintf(c.issuer, sizeof c.issuer, "%s", in->issuer);
  if (!printable(in->client_id, 1, OIDC_CLIENT_ID_MAX))
    return husk_fail(err, EINVAL, "client_id must be 1-%d printable ASCII bytes",
                     OIDC_CLIENT_ID_MAX);
  snprintf(c.client_id, sizeof c.client_id, "%s", in->client_id);
  if (in->secret_change == OIDC_SECRET_SET && !printable(in->client_secret, 1, OIDC_SECRET_MAX))
    return husk_fail(err, EINVAL, "client_secret must be 1-%d printable ASCII bytes",
                     OIDC_SECRET_MAX);
  const char *dn = in->display_name ? in->display_name : host;
  if (auth_check_label("display_name", dn, OIDC_DISPLAY_MAX, err) < 0)
    return -1;
  if (!dn[0])
    return husk_fail(err, EINVAL, "display_name must not be empty");
  snprintf(c.display_name, sizeof c.display_name, "%s", dn);
  const char *claim = in->claim ? in->claim : "email";
  if (strcmp(claim, "email") && strcmp(claim, "preferred_username") && strcmp(claim, "sub"))
    return husk_fail(err, EINVAL, "claim must be email, preferred_username or sub");
  snprintf(c.claim, sizeof c.claim, "%s", claim);
  const char *scopes = in->scopes ? in->scopes : OIDC_DEFAULT_SCOPES;
  if (!scopes_ok(scopes))
    return husk_fail(err, EINVAL,
                     "scopes must be at most %d bytes of space-separated scopes, openid among them",
                     OIDC_SCOPES_MAX);
  snprintf(c.scopes, sizeof c.scopes, "%s", scopes);
  if (in->create_users && strcmp(in->create_users, "viewer") && strcmp(in->create_users, "member"))
    return husk_fail(err, EINVAL, "create_users must be null, viewer or member");
  snprintf(c.create_users, sizeof c.create_users, "%s", in->create_users ? in->create_users : "");

  /* Whether the configuration will have a secret. */
  struct state_oidc_config cur;
  bool had = false;
  struct husk_err e2;
  if (state_oidc_get(o->env.st, tenant_id, &cur, &e2) == 0)
    had = cur.has_secret;
  else if (e2.code != ENOENT)
    return husk_fail(err, e2.code, "%s", e2.msg);
  c.has_secret =
      in->secret_change == OIDC_SECRET_SET || (in->secret_change == OIDC_SECRET_KEEP && had);
  if (in->secret_change == OIDC_SECRET_SET && !o->env.vault)
    return husk_fail(err, ENOTSUP,
                     "the secrets vault is not available: no client secret can be "
                     "kept (a public client needs none)");
  if (discover(o, &c, loopback, !c.has_secret, err) < 0)
    return -1;
  if (in->secret_change == OIDC_SECRET_SET &&
      egress_vault_put_reserved(o->env.vault, tenant_id, OIDC_SECRET_NAME, in->client_secret,
                                strlen(in->client_secret), err) < 0)
    return err->code == EINVAL ? husk_fail(err, EIO, "cannot keep the client secret") : -1;
  if (in->secret_change == OIDC_SECRET_REMOVE && o->env.vault &&
      egress_vault_delete_reserved(o->env.vault, tenant_id, OIDC_SECRET_NAME, &e2) < 0 &&
      e2.code != ENOENT)
    return husk_fail(err, e2.code, "cannot remove the client secret");
  if (state_oidc_put(o->env.st, &c, now_ms(o), out, err) < 0)
    return -1;
  /* A new configuration: its keys are fetched afresh. */
  pthread_mutex_lock(&o->lock);
  for (size_t i = 0; i < OIDC_CACHE_SLOTS; i++)
    if (o->slots[i].jwks && !strcmp(o->slots[i].tenant_id, tenant_id)) {
      json_decref(o->slots[i].jwks);
      memset(&o->slots[i], 0, sizeof o->slots[i]);
    }
  pthread_mutex_unlock(&o->lock);
  return 0;
}

int oidc_config_get(struct oidc *o, const char *tenant_id, struct state_oidc_config *out,
                    struct husk_err *err) {
  return state_oidc_get(o->env.st, tenant_id, out, err);
}

int oidc_config_delete(struct oidc *o, const char *tenant_id, struct husk_err *err) {
  if (state_oidc_delete(o->env.st, tenant_id, err) < 0)
    return -1;
  struct husk_err e2;
  if (o->env.vault &&
      egress_vault_delete_reserved(o->env.vault, tenant_id, OIDC_SECRET_NAME, &e2) < 0 &&
      e2.code != ENOENT)
    return husk_fail(err, e2.code,
                     "the configuration is gone but its secret could not be "
                     "removed: %s",
                     e2.msg);
  pthread_mutex_lock(&o->lock);
  for (size_t i = 0; i < OIDC_CACHE_SLOTS; i++)
    if (o->slots[i].jwks && !strcmp(o->slots[i].tenant_id, tenant_id)) {
      json_decref(o->slots[i].jwks);
      memset(&o->slots[i], 0, sizeof o->slots[i]);
    }
  pthread_mutex_unlock(&o->lock);
  return 0;
}

json_t *oidc_config_json(const struct state_oidc_config *c) {
  return json_pack("{s:s, s:s, s:s, s:b, s:s, s:s, s:s, s:o, s:o, s:o}", "tenant_id", c->tenant_id,
                   "issuer", c->issuer, "client_id", c->client_id, "client_secret", c->has_secret,
                   "display_name", c->display_name, "claim", c->claim, "scopes", c->scopes,
                   "create_users", c->create_users[0] ? json_string(c->create_users) : json_null(),
                   "created_at", json_time(c->created_ms), "updated_at", json_time(c->updated_ms));
}

/* ---- the sign-in ---- */

static int sha256(const char *s, unsigned char out[STATE_OAUTH_HASH_SIZE], struct husk_err *err) {
  return auth_sha256(s, strlen(s), out, err);
}

static void url_enc(struct strbuf *b, const char *s) {
  static const char hex[] = "0123456789ABCDEF";
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      strbuf_chr(b, (char)c);
    } else {
      strbuf_chr(b, '%');
      strbuf_chr(b, hex[c >> 4]);
      strbuf_chr(b, hex[c & 15]);
    }
  }
}

static void param(struct strbuf *b, const char *k, const char *v) {
  strbuf_chr(b, '&');
  strbuf_str(b, k);
  strbuf_chr(b, '=');
  url_enc(b, v);
}

int oidc_start(struct oidc *o, const char *tenant_name, const char *params,
               const char *redirect_uri, char **url, char binding[OIDC_BINDING_LEN + 1],
               char tenant_id[STATE_TENANT_ID_SIZE], struct husk_err *err) {
  *url = NULL;
  tenant_id[0] = '\0';
  struct state_oidc_config c;
  if (state_oidc_find_tenant(o->env.st, tenant_name, &c, err) < 0) {
    if (err->code == ENOENT)
      return husk_fail(err, OIDC_E_NOT_SET_UP,
                       "single sign-on is not set up for this "
                       "organization");
    return -1;
  }
  snprintf(tenant_id, STATE_TENANT_ID_SIZE, "%s", c.tenant_id);
  /* Each tenant's provider sends the browser back to a callback of that
   * tenant's own: a reply its provider makes for another tenant's
   * sign-in (a mix-up, RFC 9700 4.4) arrives at the wrong callback and is
   * refused, whether or not the provider names itself (iss). */
  char ru[OIDC_REDIRECT_MAX];
  if ((size_t)snprintf(ru, sizeof ru, "%s/%s", redirect_uri, c.tenant_id) >= sizeof ru)
    return husk_fail(err, EINVAL, "the callback's address is too long");
  redirect_uri = ru;
  /* params and the redirect URI, kept together. */
  cleanup_json json_t *pj = json_loads(params ? params : "{}", 0, NULL);
  if (!json_is_object(pj) || json_object_set_new(pj, "sso_redirect_uri", json_string(redirect_uri)))
    return husk_fail(err, EINVAL, "the request's parameters cannot be kept");
  cleanup_free char *ptext = json_dumps(pj, JSON_COMPACT);
  struct state_sso *p = calloc(1, sizeof *p);
  if (!ptext || !p) {
    free(p);
    return husk_error(err, ENOMEM, "sign-in");
  }
  int rc = -1;
  char state[OIDC_BINDING_LEN + 1], challenge[64];
  if (strlen(ptext) >= sizeof p->params) {
    husk_fail(err, EINVAL, "the request's parameters are too long");
    goto out;
  }
  snprintf(p->params, sizeof p->params, "%s", ptext);
  if (id_new(NULL, 32, state, sizeof state, err) < 0 ||
      id_new(NULL, 32, p->nonce, sizeof p->nonce, err) < 0 ||
      id_new(NULL, 32, p->verifier, sizeof p->verifier, err) < 0 ||
      id_new(NULL, 32, binding, OIDC_BINDING_LEN + 1, err) < 0 || sha256(state, p->hash, err) < 0 ||
      sha256(binding, p->binding_hash, err) < 0)
    goto out;
  unsigned char vh[STATE_OAUTH_HASH_SIZE];
  if (sha256(p->verifier, vh, err) < 0)
    goto out;
  b64_encode_to(challenge, vh, sizeof vh, B64_URL);
  snprintf(p->phase, sizeof p->phase, "provider");
  snprintf(p->tenant_id, sizeof p->tenant_id, "%s", c.tenant_id);
  p->created_ms = now_ms(o);
  p->expires_ms = p->created_ms + OIDC_PENDING_TTL_MS;
  if (state_sso_insert(o->env.st, p, p->created_ms, err) < 0) {
    if (err->code == EDQUOT)
      husk_fail(err, OIDC_E_TOO_MANY, "too many sign-ins in progress");
    goto out;
  }
  struct strbuf b = {0};
  strbuf_str(&b, c.authorization_endpoint);
  strbuf_str(&b, strchr(c.authorization_endpoint, '?') ? "&" : "?");
  strbuf_str(&b, "response_type=code");
  param(&b, "client_id", c.client_id);
  param(&b, "redirect_uri", redirect_uri);
  param(&b, "scope", c.scopes);
  param(&b, "state", state);
  param(&b, "nonce", p->nonce);
  param(&b, "code_challenge", challenge);
  strbuf_str(&b, "&code_challenge_method=S256");
  if (!(*url = strbuf_take(&b))) {
    husk_error(err, ENOMEM, "sign-in");
    goto out;
  }
  rc = 0;
out:
  OPENSSL_cleanse(state, sizeof state);
  OPENSSL_cleanse(p, sizeof *p);
  free(p);
  if (rc < 0)
    OPENSSL_cleanse(binding, OIDC_BINDING_LEN + 1);
  return rc;
}

/* The tenant's JWKS, from the cache or fetched (`refetch`: fetch again
 * unless that was done less than OIDC_JWKS_REFETCH_MS ago: then *jwks
 * NULL, 0).  A new reference in *jwks. */
static int jwks_get(struct oidc *o, const struct state_oidc_config *c, bool loopback, bool refetch,
                    json_t **jwks, struct husk_err *err) {
  *jwks = NULL;
  int64_t now = now_ms(o);
  pthread_mutex_lock(&o->lock);
  struct jwks_slot *s = NULL, *oldest = &o->slots[0];
  for (size_t i = 0; i < OIDC_CACHE_SLOTS; i++) {
    struct jwks_slot *e = &o->slots[i];
    if (e->jwks && !strcmp(e->tenant_id, c->tenant_id) && !strcmp(e->jwks_uri, c->jwks_uri))
      s = e;
    if (!e->jwks || (oldest->jwks && e->fetched_ms < oldest->fetched_ms))
      oldest = e;
  }
  if (s && !refetch && now - s->fetched_ms < OIDC_CACHE_TTL_MS) {
    *jwks = json_incref(s->jwks);
    pthread_mutex_unlock(&o->lock);
    return 0;
  }
  if (s && refetch && now - s->refetched_ms < OIDC_JWKS_REFETCH_MS) {
    pthread_mutex_unlock(&o->lock);
    return 0;
  }
  if (s && refetch)
    s->refetched_ms = now;
  pthread_mutex_unlock(&o->lock);

  struct auth_fetch_request rq = {.url = c->jwks_uri, .loopback_ok = loopback};
  json_t *j = NULL;
  if (fetch_json(o, &rq, "provider's JWKS", &j, NULL, err) < 0) {
    if (err->code != EBUSY)
      err->code = OIDC_E_JWKS_ERROR;
    return -1;
  }
  if (!json_is_array(json_object_get(j, "keys"))) {
    json_decref(j);
    return husk_fail(err, OIDC_E_JWKS_ERROR, "the provider's JWKS has no keys array");
  }
  pthread_mutex_lock(&o->lock);
  /* Look again: the slots may have changed while fetching. */
  s = NULL;
  oldest = &o->slots[0];
  for (size_t i = 0; i < OIDC_CACHE_SLOTS; i++) {
    struct jwks_slot *e = &o->slots[i];
    if (e->jwks && !strcmp(e->tenant_id, c->tenant_id) && !strcmp(e->jwks_uri, c->jwks_uri))
      s = e;
    if (!e->jwks || (oldest->jwks && e->fetched_ms < oldest->fetched_ms))
      oldest = e;
  }
  if (!s) {
    s = oldest;
    json_decref(s->jwks);
    memset(s, 0, sizeof *s);
    snprintf(s->tenant_id, sizeof s->tenant_id, "%s", c->tenant_id);
    snprintf(s->jwks_uri, sizeof s->jwks_uri, "%s", c->jwks_uri);
  } else {
    json_decref(s->jwks);
  }
  s->jwks = j;
  s->fetched_ms = now;
  if (refetch)
    s->refetched_ms = now;
  *jwks = json_incref(j);
  pthread_mutex_unlock(&o->lock);
  return 0;
}

/* x-www-form-urlencoding of one value (RFC 6749 2.3.1 asks it of the
 * Basic credentials too). */
static char *form_enc(const char *s) {
  struct strbuf b = {0};
  strbuf_str(&b, ""); /* "" stays "" rather than NULL */
  url_enc(&b, s);
  return strbuf_take(&b);
}

static void wipe_free(char *s) {
  if (s) {
    OPENSSL_cleanse(s, strlen(s));
    free(s);
  }
}
static void wipe_freep(char **s) { wipe_free(*s); }
#define cleanup_wipe __attribute__((cleanup(wipe_freep)))

/* Exchange `code` at the token endpoint: the ID token in *id_token. */
static int exchange(struct oidc *o, const struct state_oidc_config *c, bool loopback,
                    const char *code, const char *verifier, const char *redirect_uri,
                    char **id_token, struct husk_err *err) {
  *id_token = NULL;
  cleanup_wipe char *secret = NULL;
  size_t secret_len = 0;
  if (c->has_secret) {
    if (!o->env.vault)
      return husk_fail(err, OIDC_E_TOKEN_ERROR, "the secrets vault is not available");
    if (egress_vault_get_reserved(o->env.vault, c->tenant_id, OIDC_SECRET_NAME, &secret,
                                  &secret_len, err) < 0)
      return husk_fail(err, OIDC_E_TOKEN_ERROR, "the client secret cannot be read");
  }
  bool post = c->has_secret && !strcmp(c->token_auth, "client_secret_post");
  bool basic = c->has_secret && !post;
  struct strbuf b = {0};
  strbuf_str(&b, "grant_type=authorization_code");
  param(&b, "code", code);
  param(&b, "redirect_uri", redirect_uri);
  param(&b, "code_verifier", verifier);
  if (!basic)
    param(&b, "client_id", c->client_id);
  if (post)
    param(&b, "client_secret", secret);
  cleanup_wipe char *body = strbuf_take(&b);
  cleanup_wipe char *user = basic ? form_enc(c->client_id) : NULL;
  cleanup_wipe char *pass = basic ? form_enc(secret) : NULL;
  if (!body || (basic && (!user || !pass)))
    return husk_error(err, ENOMEM, "code exchange");
  struct auth_fetch_request rq = {.url = c->token_endpoint,
                                  .form_body = body,
                                  .basic_user = user,
                                  .basic_pass = pass,
                                  .loopback_ok = loopback};
  struct auth_fetch_reply rep;
  if (auth_fetch(o->env.fetcher, &rq, &rep, err) < 0) {
    if (err->code != EBUSY)
      err->code = OIDC_E_TOKEN_ERROR;
    return -1;
  }
  long status = rep.status;
  json_t *j = NULL;
  if (rep.len && !memchr(rep.body, '\0', rep.len))
    j = json_loadb(rep.body, rep.len, JSON_REJECT_DUPLICATES, NULL);
  OPENSSL_cleanse(rep.body, rep.len);
  auth_fetch_reply_free(&rep);
  cleanup_json json_t *reply = j;
  if (status != 200 || !json_is_object(reply)) {
    /* Only a well-formed error code of the provider's, never its text. */
    const char *e = json_string_value(json_object_get(reply, "error"));
    bool word = e && strlen(e) < 40 && strspn(e, "abcdefghijklmnopqrstuvwxyz_") == strlen(e);
    return husk_fail(err, OIDC_E_TOKEN_ERROR, "the token endpoint answered HTTP %ld%s%s", status,
                     word ? " " : "", word ? e : "");
  }
  const char *t = json_string_value(json_object_get(reply, "id_token"));
  if (!t)
    return husk_fail(err, OIDC_E_TOKEN_ERROR, "the token endpoint's reply has no id_token");
  if (!(*id_token = strdup(t)))
    return husk_error(err, ENOMEM, "code exchange");
  return 0;
}

/* The husk user name the claim gives: the claim's value in lower case. */
static int claim_name(const struct state_oidc_config *c, const struct oidc_claims *cl,
                      char out[AUTH_NAME_MAX + 1], struct husk_err *err) {
  const char *v;
  if (!strcmp(c->claim, "email")) {
    if (!cl->has_email || !cl->email_verified)
      return husk_fail(err, OIDC_E_UNVERIFIED_EMAIL,
                       "the provider does not vouch for the email (email_verified)");
    v = cl->email;
  } else if (!strcmp(c->claim, "preferred_username")) {
    if (!cl->has_preferred_username)
      return husk_fail(err, OIDC_E_NO_USER, "the ID token has no preferred_username");
    v = cl->preferred_username;
  } else {
    v = cl->sub;
  }
  size_t n = strlen(v);
  if (n == 0 || n > AUTH_NAME_MAX)
    return husk_fail(err, OIDC_E_NO_USER, "the claim's value cannot be a user name");
  for (size_t i = 0; i <= n; i++)
    out[i] = v[i] >= 'A' && v[i] <= 'Z' ? (char)(v[i] - 'A' + 'a') : v[i];
  return 0;
}

static int find_or_make_user(struct oidc *o, const struct state_oidc_config *c,
                             const struct oidc_claims *cl, struct auth_user *out,
                             struct husk_err *err) {
  struct state_user row;
  struct husk_err e2;
  if (state_user_idp_find(o->env.st, c->tenant_id, c->issuer, cl->sub, &row, &e2) == 0)
    return auth_user_get(o->env.auth, c->tenant_id, row.id, out, err);
  if (e2.code != ENOENT)
    return husk_fail(err, e2.code, "%s", e2.msg);
  char name[AUTH_NAME_MAX + 1];
  if (claim_name(c, cl, name, err) < 0)
    return -1;
  if (state_user_by_name(o->env.st, c->tenant_id, name, &row, &e2) == 0) {
    if (row.idp_subject[0])
      return husk_fail(err, OIDC_E_NO_USER, "the user of this name is linked to another subject");
  } else if (e2.code != ENOENT) {
    return husk_fail(err, e2.code, "%s", e2.msg);
  } else if (!c->create_users[0]) {
    return husk_fail(err, OIDC_E_NO_USER, "no user of this name, and users are not created");
  } else {
    enum auth_role role;
    if (auth_role_parse(c->create_users, &role) < 0)
      return husk_fail(err, EUCLEAN, "the configuration's create_users is unknown");
    /* The name claim only displays the user: one a display name may not
     * be (a control, bidirectional or zero-width character, as in an
     * emoji joined by U+200D) is left out rather than refusing the person. */
    struct husk_err e3;
    const char *shown =
        auth_check_label("display name", cl->name, AUTH_DISPLAY_MAX, &e3) == 0 ? cl->name : "";
    struct auth_user made;
    if (auth_user_create(o->env.auth, c->tenant_id, name, shown, role, NULL, &made, &e2) < 0) {
      if (e2.code == EINVAL || e2.code == EDQUOT)
        return husk_fail(err, OIDC_E_NO_USER, "no user can be made: %s", e2.msg);
      if (e2.code != EEXIST) /* EEXIST: made at the same moment by another sign-in */
        return husk_fail(err, e2.code, "%s", e2.msg);
    }
    if (state_user_by_name(o->env.st, c->tenant_id, name, &row, err) < 0)
      return -1;
  }
  if (state_user_idp_link(o->env.st, c->tenant_id, row.id, c->issuer, cl->sub, &e2) < 0) {
    if (e2.code == EEXIST)
      return husk_fail(err, OIDC_E_NO_USER,
                       "the user is linked to another subject, or another "
                       "user to this one");
    return husk_fail(err, e2.code, "%s", e2.msg);
  }
  return auth_user_get(o->env.auth, c->tenant_id, row.id, out, err);
}

static bool hex_token(const char *s) {
  return s && strlen(s) == OIDC_BINDING_LEN && strspn(s, "0123456789abcdef") == OIDC_BINDING_LEN;
}

/* A pending sign-in by its token (`state`, or the consent form's handle)
 * in `phase`, used up with `take`; out names its tenant and client (for
 * the audit) even when the browser is not the one that started it. */
static int pending_open(struct oidc *o, const char *token, const char *phase, bool take,
                        const char *binding, struct state_sso *p,
                        unsigned char h[STATE_OAUTH_HASH_SIZE], struct oidc_result *out,
                        struct husk_err *err) {
  if (!hex_token(token))
    return husk_fail(err, OIDC_E_UNKNOWN_STATE, "no such sign-in");
  if (sha256(token, h, err) < 0)
    return -1;
  if (state_sso_get(o->env.st, h, phase, take, now_ms(o), p, err) < 0) {
    if (err->code == ENOENT)
      err->code = OIDC_E_UNKNOWN_STATE;
    return -1;
  }
  snprintf(out->tenant_id, sizeof out->tenant_id, "%s", p->tenant_id);
  cleanup_json json_t *pj = json_loads(p->params, 0, NULL);
  const char *cid = json_string_value(json_object_get(pj, "client_id"));
  if (cid && strlen(cid) < sizeof out->client_id)
    memcpy(out->client_id, cid, strlen(cid) + 1);
  unsigned char bh[STATE_OAUTH_HASH_SIZE];
  if (!hex_token(binding) || sha256(binding, bh, err) < 0 ||
      CRYPTO_memcmp(bh, p->binding_hash, sizeof bh) != 0)
    return husk_fail(err, OIDC_E_BAD_BINDING, "the sign-in was started in another browser");
  return 0;
}

int oidc_finish(struct oidc *o, const char *state, const char *code, const char *provider_iss,
                const char *provider_error,
                const char *binding, const char *redirect_uri, struct oidc_result *out,
                struct husk_err *err) {
  memset(out, 0, sizeof *out);
  int rc = -1;
  struct state_sso *p = calloc(1, sizeof *p);
  cleanup_wipe char *id_token = NULL;
  cleanup_json json_t *pj = NULL;
  cleanup_free char *params = NULL;
  if (!p)
    return husk_error(err, ENOMEM, "sign-in");
  unsigned char h[STATE_OAUTH_HASH_SIZE];
  /* Used up now, whatever follows: a second callback finds nothing. */
  if (pending_open(o, state, "provider", true, binding, p, h, out, err) < 0)
    goto out;
  pj = json_loads(p->params, 0, NULL);
  if (provider_error || !code || !*code) {
    husk_fail(err, OIDC_E_PROVIDER_ERROR, "the provider refused the sign-in");
    goto out;
  }
  if (strlen(code) > 4096) {
    husk_fail(err, OIDC_E_PROVIDER_ERROR, "the provider's code is too long");
    goto out;
  }
  struct state_oidc_config c;
  if (state_oidc_get(o->env.st, p->tenant_id, &c, err) < 0) {
    if (err->code == ENOENT)
      err->code = OIDC_E_NOT_SET_UP;
    goto out;
  }
  snprintf(out->via, sizeof out->via, "%s", c.display_name);
  /* Every tenant's provider answers at the same callback: a response
   * that says it comes from another issuer (RFC 9207) is a mix-up (one
   * tenant's provider sent the person to another's with its own state),
   * and its code must not reach this tenant's token endpoint. */
  if (provider_iss && strcmp(provider_iss, c.issuer)) {
    husk_fail(err, OIDC_E_BAD_ISSUER, "the response's iss is not this sign-in's provider");
    goto out;
  }
  const char *ru = json_string_value(json_object_get(pj, "sso_redirect_uri"));
  if (!ru || !redirect_uri || strcmp(ru, redirect_uri)) {
    husk_fail(err, OIDC_E_BAD_BINDING, "the callback is not the one the sign-in named");
    goto out;
  }
  char host[256];
  bool loopback;
  if (url_check("issuer", c.issuer, true, true, &loopback, host, sizeof host, err) < 0)
    goto out;
  if (exchange(o, &c, loopback, code, p->verifier, ru, &id_token, err) < 0)
    goto out;
  struct oidc_expect ex = {
      .issuer = c.issuer, .client_id = c.client_id, .nonce = p->nonce, .now_s = now_ms(o) / 1000};
  struct oidc_claims cl;
  int v = -1;
  for (int attempt = 0; attempt < 2; attempt++) {
    cleanup_json json_t *jwks = NULL;
    if (jwks_get(o, &c, loopback, attempt > 0, &jwks, err) < 0)
      goto out;
    if (!jwks)
      break; /* fetched again too recently: the unknown_key stands */
    v = oidc_jwt_verify(id_token, jwks, &ex, &cl, err);
    if (v == 0 || err->code != OIDC_E_UNKNOWN_KEY)
      break;
  }
  if (v < 0)
    goto out;
  if (find_or_make_user(o, &c, &cl, &out->user, err) < 0)
    goto out;
  if (out->user.disabled) {
    husk_fail(err, OIDC_E_DISABLED, "the user is disabled");
    goto out;
  }
  if (state_user_sign_in_ok(o->env.st, out->user.id, now_ms(o), err) < 0) {
    err->code = OIDC_E_DISABLED;
    goto out;
  }
  /* The consent row: the same browser, the same request, this user. */
  json_object_del(pj, "sso_redirect_uri");
  params = json_dumps(pj, JSON_COMPACT);
  if (!params || id_new(NULL, 32, out->handle, sizeof out->handle, err) < 0)
    goto out;
  struct state_sso *q = p; /* reused: nonce and verifier are spent */
  if (sha256(out->handle, q->hash, err) < 0)
    goto out;
  snprintf(q->phase, sizeof q->phase, "consent");
  snprintf(q->nonce, sizeof q->nonce, "-");
  snprintf(q->verifier, sizeof q->verifier, "-");
  snprintf(q->user_id, sizeof q->user_id, "%s", out->user.id);
  snprintf(q->params, sizeof q->params, "%s", params);
  q->created_ms = now_ms(o);
  q->expires_ms = q->created_ms + OIDC_PENDING_TTL_MS;
  if (state_sso_insert(o->env.st, q, q->created_ms, err) < 0) {
    if (err->code == EDQUOT)
      err->code = OIDC_E_TOO_MANY;
    goto out;
  }
  if (!(out->params = strdup(params))) {
    husk_error(err, ENOMEM, "sign-in");
    goto out;
  }
  rc = 0;
out:
  if (rc < 0) {
    out->reason = oidc_reason(err->code);
    OPENSSL_cleanse(out->handle, sizeof out->handle);
  }
  OPENSSL_cleanse(p, sizeof *p);
  free(p);
  return rc;
}

int oidc_consent(struct oidc *o, const char *handle, const char *binding, bool take,
                 struct oidc_result *out, struct husk_err *err) {
  memset(out, 0, sizeof *out);
  int rc = -1;
  struct state_sso *p = calloc(1, sizeof *p);
  if (!p)
    return husk_error(err, ENOMEM, "sign-in");
  unsigned char h[STATE_OAUTH_HASH_SIZE];
  /* The binding is checked before a take: another browser's post (which
   * could only guess the handle) cannot spend this person's consent. */
  if (pending_open(o, handle, "consent", false, binding, p, h, out, err) < 0)
    goto out;
  if (take && state_sso_get(o->env.st, h, "consent", true, now_ms(o), p, err) < 0) {
    if (err->code == ENOENT)
      err->code = OIDC_E_UNKNOWN_STATE;
    goto out;
  }
  struct state_oidc_config c;
  if (state_oidc_get(o->env.st, p->tenant_id, &c, err) < 0) {
    if (err->code == ENOENT)
      err->code = OIDC_E_NOT_SET_UP;
    goto out;
  }
  snprintf(out->via, sizeof out->via, "%s", c.display_name);
  struct husk_err e2;
  if (auth_user_get(o->env.auth, p->tenant_id, p->user_id, &out->user, &e2) < 0 ||
      out->user.disabled) {
    husk_fail(err, OIDC_E_DISABLED, "the user is gone or disabled");
    goto out;
  }
  snprintf(out->handle, sizeof out->handle, "%s", handle);
  if (!(out->params = strdup(p->params))) {
    husk_error(err, ENOMEM, "sign-in");
    goto out;
  }
  rc = 0;
out:
  if (rc < 0)
    out->reason = oidc_reason(err->code);
  OPENSSL_cleanse(p, sizeof *p);
  free(p);
  return rc;
}

void oidc_result_free(struct oidc_result *r) {
  if (!r)
    return;
  free(r->params);
  r->params = NULL;
  OPENSSL_cleanse(r->handle, sizeof r->handle);
}
