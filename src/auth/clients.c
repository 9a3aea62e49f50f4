/* OAuth clients (RFC 7591 dynamic registration) and their redirect URIs.
 *
 * Anyone may register a client: what makes that safe is what a client may
 * name as its redirect URI, since that is where a person's code goes.  So
 * a URI is strict: `https://`, or `http://` to a loopback host only
 * (127.0.0.1, [::1], localhost: a native app's local listener, RFC 8252
 * 7.3); no fragment (RFC 6749 3.1.2); no userinfo (`https://good@evil/`
 * reads as good to a person); printable ASCII of RFC 3986's characters
 * only, so it goes into the sign-in page, a Location header and a CSP
 * without any escaping surprise; at most AUTH_REDIRECT_MAX bytes.
 *
 * A redirect URI of an authorization request must equal a registered one
 * byte for byte, except the port of a loopback http URI (RFC 8252 7.3:
 * the app picks a free port each time).
 *
 * A confidential client's secret is random (hcs_ + 64 hex), shown once,
 * stored as its SHA-256, and compared in constant time. */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>

#include "auth/auth_internal.h"
#include "util/cleanup.h"
#include "util/cleanup_json.h"

static const char *const auth_methods[] = {"none", "client_secret_post", "client_secret_basic"};

/* The characters RFC 3986 allows in a URI (unreserved, reserved, and `%`
 * of percent-encoding), less `'` (which an HTML attribute or a CSP would
 * need escaped): the one rule of what a redirect URI may hold, here for
 * registration and, through auth_client_redirect_ok, for every
 * authorization request. */
bool auth_uri_char(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
    return true;
  return c && strchr("-._~:/?#[]@!$&()*+,;=%", c) != NULL;
}

/* What a redirect URI is made of. */
struct redirect {
  bool https;
  const char *host; /* brackets included for IPv6 */
  size_t host_len;
  const char *rest; /* path and query, to the end */
};

static bool host_is_loopback(const char *h, size_t n) {
  return (n == 9 && !memcmp(h, "127.0.0.1", 9)) || (n == 5 && !memcmp(h, "[::1]", 5)) ||
         (n == 9 && !strncasecmp(h, "localhost", 9));
}

/* Check `uri` and split it.  EINVAL, saying what is wrong, never echoing
 * it. */
static int redirect_parse(const char *uri, struct redirect *r, struct husk_err *err) {
  if (!uri)
    return husk_fail(err, EINVAL, "redirect URI is missing");
  size_t n = strnlen(uri, AUTH_REDIRECT_MAX + 1);
  if (n == 0 || n > AUTH_REDIRECT_MAX)
    return husk_fail(err, EINVAL, "a redirect URI is 1 to %d bytes", AUTH_REDIRECT_MAX);
  for (size_t i = 0; i < n; i++) {
    if ((unsigned char)uri[i] <= 0x20 || (unsigned char)uri[i] >= 0x7f)
      return husk_fail(err, EINVAL,
                       "a redirect URI holds no space, control character or non-ASCII byte "
                       "(percent-encode them)");
    if (!auth_uri_char(uri[i]))
      return husk_fail(err, EINVAL, "a redirect URI holds a character URIs do not have");
  }
  if (memchr(uri, '#', n))
    return husk_fail(err, EINVAL, "a redirect URI must not have a fragment (#...)");
  const char *auth;
  if (!strncmp(uri, "https://", 8)) {
    r->https = true;
    auth = uri + 8;
  } else if (!strncmp(uri, "http://", 7)) {
    r->https = false;
    auth = uri + 7;
  } else {
    return husk_fail(err, EINVAL,
                     "a redirect URI is https://..., or http:// to 127.0.0.1, [::1] or localhost");
  }
  size_t alen = strcspn(auth, "/?");
  if (memchr(auth, '@', alen))
    return husk_fail(err, EINVAL, "a redirect URI must not hold a user name or password (@)");
  /* host [":" port] */
  size_t hlen;
  if (alen > 0 && auth[0] == '[') {
    const char *close = memchr(auth, ']', alen);
    if (!close)
      return husk_fail(err, EINVAL, "a redirect URI's IPv6 host lacks its `]`");
    hlen = (size_t)(close - auth) + 1;
    for (size_t i = 1; i + 1 < hlen; i++)
      if (!strchr("0123456789abcdefABCDEF:.", auth[i]))
        return husk_fail(err, EINVAL, "a redirect URI's IPv6 host is not an address");
    if (hlen == 2)
      return husk_fail(err, EINVAL, "a redirect URI's host is empty");
  } else {
    const char *colon = memchr(auth, ':', alen);
    hlen = colon ? (size_t)(colon - auth) : alen;
    for (size_t i = 0; i < hlen; i++) {
      char c = auth[i];
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '-' || c == '.'))
        return husk_fail(err, EINVAL,
                         "a redirect URI's host is letters, digits, `-` and `.` (or [IPv6])");
    }
    if (hlen == 0)
      return husk_fail(err, EINVAL, "a redirect URI's host is empty");
  }
  if (hlen < alen) {
    const char *p = auth + hlen;
    size_t plen = alen - hlen;
    unsigned port = 0;
    bool ok = p[0] == ':' && plen >= 2 && plen <= 6;
    for (size_t i = 1; ok && i < plen; i++) {
      ok = p[i] >= '0' && p[i] <= '9';
      port = port * 10 + (unsigned)(p[i] - '0');
    }
    if (!ok || port == 0 || port > 65535)
      return husk_fail(err, EINVAL, "a redirect URI's port is 1 to 65535");
  }
  if (!r->https && !host_is_loopback(auth, hlen))
    return husk_fail(err, EINVAL,
                     "an http:// redirect URI must go to 127.0.0.1, [::1] or localhost: use "
                     "https://");
  r->host = auth;
  r->host_len = hlen;
  r->rest = auth + alen;
  return 0;
}

int auth_redirect_check(const char *uri, struct husk_err *err) {
  struct redirect r;
  return redirect_parse(uri, &r, err);
}

bool auth_client_redirect_ok(const struct auth_client *c, const char *uri) {
  if (!c || !uri)
    return false;
  size_t n = c->n_redirects < AUTH_REDIRECTS_MAX ? c->n_redirects : AUTH_REDIRECTS_MAX;
  /* The URI must pass today's rule, whenever it was registered. */
  struct redirect u;
  if (redirect_parse(uri, &u, NULL) < 0)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!strcmp(c->redirect_uris[i], uri))
      return true;
  /* RFC 8252 7.3: a loopback http URI matches whatever its port. */
  if (u.https)
    return false;
  for (size_t i = 0; i < n; i++) {
    struct redirect r;
    if (redirect_parse(c->redirect_uris[i], &r, NULL) == 0 && !r.https &&
        r.host_len == u.host_len && !memcmp(r.host, u.host, u.host_len) && !strcmp(r.rest, u.rest))
      return true;
  }
  return false;
}

static int client_from_row(const struct state_oauth_client *row, struct auth_client *out,
                           struct husk_err *err) {
  struct auth_client c = {0};
  _Static_assert(sizeof c.id == sizeof row->id, "client id sizes");
  _Static_assert(sizeof c.name == sizeof row->name, "client name sizes");
  _Static_assert(sizeof c.auth_method == sizeof row->auth_method, "auth method sizes");
  memcpy(c.id, row->id, sizeof c.id);
  memcpy(c.name, row->name, sizeof c.name);
  memcpy(c.auth_method, row->auth_method, sizeof c.auth_method);
  c.confidential = row->has_secret;
  c.created_ms = row->created_ms;
  c.used_ms = row->used_ms;
  json_error_t jerr;
  cleanup_json json_t *uris = json_loads(row->redirect_uris, 0, &jerr);
  if (!json_is_array(uris) || json_array_size(uris) > AUTH_REDIRECTS_MAX)
    return husk_fail(err, EUCLEAN, "OAuth client `%s` has unreadable redirect URIs", row->id);
  size_t i;
  json_t *v;
  json_array_foreach(uris, i, v) {
    const char *s = json_string_value(v);
    if (!s || snprintf(c.redirect_uris[i], sizeof c.redirect_uris[i], "%s", s) >=
                  (int)sizeof c.redirect_uris[i])
      return husk_fail(err, EUCLEAN, "OAuth client `%s` has unreadable redirect URIs", row->id);
  }
  c.n_redirects = json_array_size(uris);
  if (out)
    *out = c;
  return 0;
}

int auth_client_register(struct auth *a, const char *name, const char *const *redirect_uris,
                         size_t n, const char *auth_method, struct auth_client *out,
                         char secret[AUTH_TOKEN_SIZE], struct husk_err *err) {
  if (!name)
    name = "";
  if (!auth_method)
    auth_method = "none";
  if (auth_check_label("client name", name, AUTH_CLIENT_NAME_MAX, err) < 0)
    return -1;
  if (n < 1 || n > AUTH_REDIRECTS_MAX || !redirect_uris)
    return husk_fail(err, EINVAL, "a client has 1 to %d redirect URIs", AUTH_REDIRECTS_MAX);
  struct state_oauth_client row = {.created_ms = auth_now(a)};
  bool known = false;
  for (size_t i = 0; i < sizeof auth_methods / sizeof auth_methods[0]; i++)
    known |= !strcmp(auth_method, auth_methods[i]);
  if (!known)
    return husk_fail(err, EINVAL,
                     "token_endpoint_auth_method is none, client_secret_post or "
                     "client_secret_basic");
  row.has_secret = strcmp(auth_method, "none") != 0;
  if (row.has_secret && !secret)
    return husk_fail(err, EINVAL, "a confidential client's secret needs a buffer");

  cleanup_json json_t *uris = json_array();
  if (!uris)
    return husk_error(err, ENOMEM, "cannot register OAuth client");
  for (size_t i = 0; i < n; i++) {
    struct redirect r;
    if (redirect_parse(redirect_uris[i], &r, err) < 0)
      return -1;
    if (json_array_append_new(uris, json_string(redirect_uris[i])) < 0)
      return husk_error(err, ENOMEM, "cannot register OAuth client");
  }
  cleanup_free char *text = json_dumps(uris, JSON_COMPACT);
  if (!text)
    return husk_error(err, ENOMEM, "cannot register OAuth client");
  if (strlen(text) >= sizeof row.redirect_uris)
    return husk_fail(err, EINVAL, "the redirect URIs are too long together");
  memcpy(row.redirect_uris, text, strlen(text) + 1);
  snprintf(row.name, sizeof row.name, "%s", name);
  snprintf(row.auth_method, sizeof row.auth_method, "%s", auth_method);
  if (state_new_id("oc_", row.id, sizeof row.id, err) < 0)
    return -1;
  char plain[AUTH_TOKEN_SIZE] = "";
  if (row.has_secret && auth_secret_new(AUTH_PREFIX_CLIENT_SECRET, plain, row.secret_hash, err) < 0)
    return -1;
  int r = state_oauth_client_insert(a->st, &row, AUTH_CLIENTS_MAX,
                                    row.created_ms - AUTH_CLIENT_IDLE_MS,
                                    row.created_ms - AUTH_CLIENT_UNUSED_MS, err);
  if (r == 0)
    r = client_from_row(&row, out, err);
  /* Committed: only now does the caller learn the secret. */
  if (r == 0 && secret)
    memcpy(secret, plain, AUTH_TOKEN_SIZE);
  auth_wipe(plain, sizeof plain);
  return r;
}

int auth_client_get(struct auth *a, const char *id, struct auth_client *out, struct husk_err *err) {
  if (auth_client_id_is_url(id))
    return cimd_cached(a, id, out, err);
  struct state_oauth_client row;
  if (state_oauth_client_get(a->st, id, &row, err) < 0)
    return -1;
  return client_from_row(&row, out, err);
}

int auth_client_document_row(struct auth *a, const struct auth_client *c, int64_t now,
                             struct husk_err *err) {
  struct state_oauth_client row = {.created_ms = now};
  cleanup_json json_t *uris = json_array();
  if (!uris)
    return husk_error(err, ENOMEM, "cannot record OAuth client");
  for (size_t i = 0; i < c->n_redirects && i < AUTH_REDIRECTS_MAX; i++)
    if (json_array_append_new(uris, json_string(c->redirect_uris[i])) < 0)
      return husk_error(err, ENOMEM, "cannot record OAuth client");
  cleanup_free char *text = json_dumps(uris, JSON_COMPACT);
  if (!text)
    return husk_error(err, ENOMEM, "cannot record OAuth client");
  if (strlen(text) >= sizeof row.redirect_uris)
    return husk_fail(err, EINVAL, "the redirect URIs are too long together");
  memcpy(row.redirect_uris, text, strlen(text) + 1);
  _Static_assert(sizeof row.id == sizeof c->id, "client id sizes");
  _Static_assert(sizeof row.name == sizeof c->name, "client name sizes");
  memcpy(row.id, c->id, sizeof row.id);
  memcpy(row.name, c->name, sizeof row.name);
  snprintf(row.auth_method, sizeof row.auth_method, "none");
  return state_oauth_client_put_document(a->st, &row, AUTH_CLIENTS_MAX, now - AUTH_CLIENT_IDLE_MS,
                                         now - AUTH_CLIENT_UNUSED_MS, err);
}

int auth_client_check_secret(struct auth *a, const struct auth_client *c, const char *secret,
                             struct husk_err *err) {
  static const char denied[] = "wrong client credentials";
  if (!c)
    return husk_fail(err, EACCES, "%s", denied);
  struct state_oauth_client row;
  struct husk_err e;
  if (state_oauth_client_get(a->st, c->id, &row, &e) < 0) {
    if (e.code == ENOENT)
      return husk_fail(err, EACCES, "%s", denied);
    if (err)
      *err = e;
    return -1;
  }
  /* The same work whatever is wrong: hash, then compare all 32 bytes. */
  bool formed = auth_secret_well_formed(AUTH_PREFIX_CLIENT_SECRET, secret);
  unsigned char hash[STATE_OAUTH_HASH_SIZE];
  if (auth_sha256(formed ? secret : "", formed ? AUTH_TOKEN_SIZE - 1 : 0, hash, err) < 0)
    return -1;
  bool same = CRYPTO_memcmp(hash, row.secret_hash, sizeof hash) == 0;
  if (!(same && formed && row.has_secret))
    return husk_fail(err, EACCES, "%s", denied);
  return 0;
}
