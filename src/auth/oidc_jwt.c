/* ID token verification (oidc.h's oidc_jwt_verify): the token's header is
 * read and judged here before cjose sees it (the algorithm is ours to
 * choose, never the token's: an allow-list of asymmetric ones, and the
 * key must be of the algorithm's type), then cjose checks the signature
 * with the JWKS key the kid names, and the claims are checked here. */
#define _GNU_SOURCE
#include <cjose/cjose.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "auth/oidc.h"
#include "util/base64.h"
#include "util/cleanup.h"
#include "util/cleanup_json.h"

#define RSA_MIN_BITS 2048

struct alg {
  const char *name;
  cjose_jwk_kty_t kty;
  int crv; /* EC only: the curve's NID */
};
static const struct alg algs[] = {
    {"RS256", CJOSE_JWK_KTY_RSA, 0},
    {"RS384", CJOSE_JWK_KTY_RSA, 0},
    {"RS512", CJOSE_JWK_KTY_RSA, 0},
    {"PS256", CJOSE_JWK_KTY_RSA, 0},
    {"PS384", CJOSE_JWK_KTY_RSA, 0},
    {"PS512", CJOSE_JWK_KTY_RSA, 0},
    {"ES256", CJOSE_JWK_KTY_EC, CJOSE_JWK_EC_P_256},
    {"ES384", CJOSE_JWK_KTY_EC, CJOSE_JWK_EC_P_384},
    {"ES512", CJOSE_JWK_KTY_EC, CJOSE_JWK_EC_P_521},
};

const char *oidc_reason(int code) {
  switch (code) {
  case OIDC_E_UNKNOWN_STATE: return "unknown_state";
  case OIDC_E_BAD_BINDING: return "bad_binding";
  case OIDC_E_PROVIDER_ERROR: return "provider_error";
  case OIDC_E_TOKEN_ERROR: return "token_error";
  case OIDC_E_JWKS_ERROR: return "jwks_error";
  case OIDC_E_BAD_TOKEN: return "bad_token";
  case OIDC_E_BAD_ALG: return "bad_alg";
  case OIDC_E_UNKNOWN_KEY: return "unknown_key";
  case OIDC_E_BAD_SIGNATURE: return "bad_signature";
  case OIDC_E_BAD_ISSUER: return "bad_issuer";
  case OIDC_E_BAD_AUDIENCE: return "bad_audience";
  case OIDC_E_EXPIRED: return "expired";
  case OIDC_E_BAD_NONCE: return "bad_nonce";
  case OIDC_E_BAD_SUBJECT: return "bad_subject";
  case OIDC_E_UNVERIFIED_EMAIL: return "unverified_email";
  case OIDC_E_NO_USER: return "no_user";
  case OIDC_E_DISABLED: return "disabled";
  case OIDC_E_BUSY: return "busy";
  case OIDC_E_NOT_SET_UP: return "not_set_up";
  case OIDC_E_TOO_MANY: return "too_many";
  default: return "error";
  }
}

/* base64url without padding, decoded (NUL-terminated): NULL if it is not. */
static unsigned char *b64url_decode(const char *s, size_t n, size_t *out_len) {
  cleanup_free char *std = malloc(n + 3);
  if (!std)
    return NULL;
  for (size_t i = 0; i < n; i++) {
    if (!b64_char_ok(s[i], B64_URL))
      return NULL;
    std[i] = s[i] == '-' ? '+' : s[i] == '_' ? '/' : s[i];
  }
  unsigned char *out = NULL;
  if (b64_decode(std, n, &out, out_len) < 0)
    return NULL;
  return out;
}

/* How deeply arrays and objects nest in JSON text (strings skipped). */
static bool depth_ok(const char *s, size_t n, int max) {
  int d = 0;
  bool in_str = false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (in_str) {
      if (c == '\\')
        i++;
      else if (c == '"')
        in_str = false;
    } else if (c == '"') {
      in_str = true;
    } else if (c == '{' || c == '[') {
      if (++d > max)
        return false;
    } else if (c == '}' || c == ']') {
      d--;
    }
  }
  return true;
}

static json_t *json_part(const char *s, size_t n) {
  size_t len = 0;
  cleanup_free unsigned char *raw = b64url_decode(s, n, &len);
  if (!raw || !depth_ok((const char *)raw, len, OIDC_JSON_DEPTH_MAX))
    return NULL;
  json_t *j = json_loadb((const char *)raw, len, JSON_REJECT_DUPLICATES, NULL);
  if (j && !json_is_object(j)) {
    json_decref(j);
    return NULL;
  }
  return j;
}

static void jwk_releasep(cjose_jwk_t **k) {
  if (*k)
    cjose_jwk_release(*k);
}
static void jws_releasep(cjose_jws_t **j) {
  if (*j)
    cjose_jws_release(*j);
}

/* Whether JWKS key `k` may verify `alg` and carries `kid` (NULL: any). */
static bool key_fits(json_t *k, const struct alg *alg, const char *kid) {
  if (!json_is_object(k))
    return false;
  const char *kkid = json_string_value(json_object_get(k, "kid"));
  if (kid && (!kkid || strcmp(kkid, kid)))
    return false;
  const char *kty = json_string_value(json_object_get(k, "kty"));
  if (!kty || strcmp(kty, alg->kty == CJOSE_JWK_KTY_RSA ? "RSA" : "EC"))
    return false;
  json_t *use = json_object_get(k, "use");
  if (use && (!json_is_string(use) || strcmp(json_string_value(use), "sig")))
    return false;
  json_t *kalg = json_object_get(k, "alg");
  if (kalg && (!json_is_string(kalg) || strcmp(json_string_value(kalg), alg->name)))
    return false;
  json_t *ops = json_object_get(k, "key_ops");
  if (ops) {
    bool verify = false;
    size_t i;
    json_t *op;
    json_array_foreach(ops, i, op) verify |=
        json_is_string(op) && !strcmp(json_string_value(op), "verify");
    if (!verify)
      return false;
  }
  /* A public key only: a set that publishes private parts is broken. */
  static const char *const private_parts[] = {"d", "p", "q", "dp", "dq", "qi", "oth"};
  for (size_t i = 0; i < sizeof private_parts / sizeof private_parts[0]; i++)
    if (json_object_get(k, private_parts[i]))
      return false;
  /* Its numbers strict base64url before cjose decodes them (cjose 0.6's
   * decoder asserts on some malformed input). */
  static const char *const rsa_parts[] = {"n", "e"}, *const ec_parts[] = {"x", "y"};
  const char *const *need = alg->kty == CJOSE_JWK_KTY_RSA ? rsa_parts : ec_parts;
  for (size_t i = 0; i < 2; i++) {
    json_t *v = json_object_get(k, need[i]);
    size_t len = json_is_string(v) ? json_string_length(v) : 0, dl = 0;
    if (len == 0 || len % 4 == 1)
      return false;
    unsigned char *dec = b64url_decode(json_string_value(v), len, &dl);
    if (!dec)
      return false;
    free(dec);
  }
  return true;
}

/* Verify the JWS with key `k`: 1 verified, 0 not, -1 the key is unusable. */
static int verify_with(cjose_jws_t *jws, json_t *k, const struct alg *alg) {
  cleanup_free char *text = json_dumps(k, JSON_COMPACT);
  if (!text)
    return -1;
  cjose_err ce;
  __attribute__((cleanup(jwk_releasep))) cjose_jwk_t *jwk =
      cjose_jwk_import(text, strlen(text), &ce);
  if (!jwk || cjose_jwk_get_kty(jwk, &ce) != alg->kty)
    return -1;
  if (alg->kty == CJOSE_JWK_KTY_RSA && cjose_jwk_get_keysize(jwk, &ce) < RSA_MIN_BITS)
    return -1;
  if (alg->kty == CJOSE_JWK_KTY_EC && (int)cjose_jwk_EC_get_curve(jwk, &ce) != alg->crv)
    return -1;
  return cjose_jws_verify(jws, jwk, &ce) ? 1 : 0;
}

/* A NumericDate claim: a JSON number (integer or real), as seconds. */
static bool numeric_date(json_t *v, int64_t *out) {
  /* Bounded (as a real is) so that exp + OIDC_SKEW_S and the iat sum
   * cannot overflow: an exp of 2^63-1 was undefined behaviour. */
  if (json_is_integer(v)) {
    json_int_t i = json_integer_value(v);
    if (i <= -1000000000000000LL || i >= 1000000000000000LL)
      return false;
    *out = (int64_t)i;
    return true;
  }
  if (json_is_real(v)) {
    double d = json_real_value(v);
    if (!(d > -1e15 && d < 1e15))
      return false;
    *out = (int64_t)d;
    return true;
  }
  return false;
}

/* Up to `size - 1` bytes of a UTF-8 string, cut at a character. */
static void copy_cut(char *dst, size_t size, const char *src) {
  size_t n = strlen(src);
  if (n >= size) {
    n = size - 1;
    while (n > 0 && ((unsigned char)src[n] & 0xc0) == 0x80)
      n--;
  }
  memcpy(dst, src, n);
  dst[n] = '\0';
}

int oidc_jwt_verify(const char *token, const json_t *jwks, const struct oidc_expect *ex,
                    struct oidc_claims *out, struct husk_err *err) {
  memset(out, 0, sizeof *out);
  size_t n = token ? strnlen(token, OIDC_ID_TOKEN_MAX + 1) : 0;
  if (n == 0 || n > OIDC_ID_TOKEN_MAX)
    return husk_fail(err, OIDC_E_BAD_TOKEN, "the ID token is missing or larger than %d bytes",
                     OIDC_ID_TOKEN_MAX);
  const char *d1 = memchr(token, '.', n);
  const char *d2 = d1 ? memchr(d1 + 1, '.', n - (size_t)(d1 + 1 - token)) : NULL;
  if (!d1 || !d2 || memchr(d2 + 1, '.', n - (size_t)(d2 + 1 - token)) || d1 == token ||
      d2 == d1 + 1)
    return husk_fail(err, OIDC_E_BAD_TOKEN, "the ID token is not a signed JWT in compact form");
  cleanup_json json_t *hdr = json_part(token, (size_t)(d1 - token));
  if (!hdr)
    return husk_fail(err, OIDC_E_BAD_TOKEN, "the ID token's header is not a JSON object");
  const char *alg_name = json_string_value(json_object_get(hdr, "alg"));
  const struct alg *alg = NULL;
  for (size_t i = 0; alg_name && i < sizeof algs / sizeof algs[0]; i++)
    if (!strcmp(alg_name, algs[i].name))
      alg = &algs[i];
  if (!alg)
    return husk_fail(err, OIDC_E_BAD_ALG,
                     "the ID token's alg is not one of RS256 RS384 RS512 "
                     "PS256 PS384 PS512 ES256 ES384 ES512");
  /* Nothing we do not understand: no critical extensions, no keys or key
   * URLs carried by the token itself. */
  if (json_object_get(hdr, "crit") || json_object_get(hdr, "jwk") || json_object_get(hdr, "jku") ||
      json_object_get(hdr, "x5u") || json_object_get(hdr, "x5c") || json_object_get(hdr, "b64"))
    return husk_fail(err, OIDC_E_BAD_TOKEN, "the ID token's header names keys or extensions");
  json_t *jkid = json_object_get(hdr, "kid");
  if (jkid && !json_is_string(jkid))
    return husk_fail(err, OIDC_E_BAD_TOKEN, "the ID token's kid is not a string");
  const char *kid = json_string_value(jkid);

  /* Every part strict base64url before cjose parses it: cjose 0.6's
   * decoder asserts (aborts the daemon) on some malformed input, such as a
   * part whose length is 1 more than a multiple of 4. */
  const char *parts[3] = {token, d1 + 1, d2 + 1};
  size_t lens[3] = {(size_t)(d1 - token), (size_t)(d2 - d1 - 1), n - (size_t)(d2 + 1 - token)};
  if (lens[2] == 0)
    return husk_fail(err, OIDC_E_BAD_SIGNATURE, "the ID token has no signature");
  for (size_t i = 0; i < 3; i++) {
    if (lens[i] % 4 == 1)
      return husk_fail(err, OIDC_E_BAD_TOKEN, "the ID token is not base64url");
    size_t dl = 0;
    unsigned char *dec = lens[i] ? b64url_decode(parts[i], lens[i], &dl) : NULL;
    if (lens[i] && !dec)
      return husk_fail(err, OIDC_E_BAD_TOKEN, "the ID token is not base64url");
    free(dec);
  }
  cjose_err ce;
  __attribute__((cleanup(jws_releasep))) cjose_jws_t *jws = cjose_jws_import(token, n, &ce);
  if (!jws)
    return husk_fail(err, OIDC_E_BAD_TOKEN, "the ID token is not a well-formed JWS");
  json_t *keys = json_object_get(jwks, "keys");
  if (!json_is_array(keys))
    return husk_fail(err, OIDC_E_UNKNOWN_KEY, "the provider's JWKS has no keys");
  bool candidate = false, verified = false;
  size_t i;
  json_t *k;
  json_array_foreach(keys, i, k) {
    if (!key_fits(k, alg, kid))
      continue;
    int v = verify_with(jws, k, alg);
    if (v < 0)
      continue;
    candidate = true;
    if (v == 1) {
      verified = true;
      break;
    }
  }
  if (!candidate)
    return husk_fail(err, OIDC_E_UNKNOWN_KEY,
                     "no key of the provider's JWKS has the ID token's kid for %s", alg->name);
  if (!verified)
    return husk_fail(err, OIDC_E_BAD_SIGNATURE, "the ID token's signature does not verify");

  uint8_t *pt = NULL;
  size_t ptl = 0;
  if (!cjose_jws_get_plaintext(jws, &pt, &ptl, &ce) || !pt ||
      !depth_ok((const char *)pt, ptl, OIDC_JSON_DEPTH_MAX))
    return husk_fail(err, OIDC_E_BAD_TOKEN, "the ID token's claims cannot be read");
  cleanup_json json_t *c = json_loadb((const char *)pt, ptl, JSON_REJECT_DUPLICATES, NULL);
  if (!json_is_object(c))
    return husk_fail(err, OIDC_E_BAD_TOKEN, "the ID token's claims are not a JSON object");

  const char *iss = json_string_value(json_object_get(c, "iss"));
  if (!iss || strcmp(iss, ex->issuer))
    return husk_fail(err, OIDC_E_BAD_ISSUER, "the ID token's iss is not the configured issuer");
  json_t *aud = json_object_get(c, "aud");
  size_t n_aud = 0;
  bool ours = false;
  if (json_is_string(aud)) {
    n_aud = 1;
    ours = !strcmp(json_string_value(aud), ex->client_id);
  } else if (json_is_array(aud)) {
    json_t *a;
    json_array_foreach(aud, i, a) {
      if (!json_is_string(a))
        return husk_fail(err, OIDC_E_BAD_AUDIENCE, "the ID token's aud holds a non-string");
      n_aud++;
      ours |= !strcmp(json_string_value(a), ex->client_id);
    }
  }
  if (!ours)
    return husk_fail(err, OIDC_E_BAD_AUDIENCE, "the ID token is not for this client (aud)");
  json_t *azp = json_object_get(c, "azp");
  if ((n_aud > 1 || azp) && (!json_is_string(azp) || strcmp(json_string_value(azp), ex->client_id)))
    return husk_fail(err, OIDC_E_BAD_AUDIENCE, "the ID token's azp is not this client");
  int64_t exp, iat;
  if (!numeric_date(json_object_get(c, "exp"), &exp) ||
      !numeric_date(json_object_get(c, "iat"), &iat))
    return husk_fail(err, OIDC_E_BAD_TOKEN, "the ID token has no exp or iat");
  if (exp + OIDC_SKEW_S <= ex->now_s)
    return husk_fail(err, OIDC_E_EXPIRED, "the ID token has expired");
  if (iat > ex->now_s + OIDC_IAT_FUTURE_S + OIDC_SKEW_S)
    return husk_fail(err, OIDC_E_EXPIRED, "the ID token was issued in the future");
  const char *nonce = json_string_value(json_object_get(c, "nonce"));
  if (!nonce || !ex->nonce || strcmp(nonce, ex->nonce))
    return husk_fail(err, OIDC_E_BAD_NONCE, "the ID token's nonce is not this sign-in's");
  json_t *sub = json_object_get(c, "sub");
  size_t sl = json_is_string(sub) ? json_string_length(sub) : 0;
  if (sl == 0 || sl > OIDC_SUBJECT_MAX || memchr(json_string_value(sub), '\0', sl))
    return husk_fail(err, OIDC_E_BAD_SUBJECT, "the ID token's sub is missing or not 1-%d bytes",
                     OIDC_SUBJECT_MAX);
  memcpy(out->sub, json_string_value(sub), sl);
  out->sub[sl] = '\0';
  json_t *email = json_object_get(c, "email");
  if (json_is_string(email) && json_string_length(email) < sizeof out->email &&
      !memchr(json_string_value(email), '\0', json_string_length(email))) {
    out->has_email = true;
    snprintf(out->email, sizeof out->email, "%s", json_string_value(email));
  }
  out->email_verified = json_is_true(json_object_get(c, "email_verified"));
  json_t *pu = json_object_get(c, "preferred_username");
  if (json_is_string(pu) && json_string_length(pu) < sizeof out->preferred_username &&
      !memchr(json_string_value(pu), '\0', json_string_length(pu))) {
    out->has_preferred_username = true;
    snprintf(out->preferred_username, sizeof out->preferred_username, "%s", json_string_value(pu));
  }
  json_t *name = json_object_get(c, "name");
  if (json_is_string(name) && !memchr(json_string_value(name), '\0', json_string_length(name)))
    copy_cut(out->name, sizeof out->name, json_string_value(name));
  return 0;
}
