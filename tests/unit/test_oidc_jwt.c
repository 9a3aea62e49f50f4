/* ID token verification (src/auth/oidc_jwt.c) with tokens signed here:
 * every refusal of docs/oauth.md's list, and what passes. */
#define _GNU_SOURCE
#include <cjose/cjose.h>
#include <errno.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "auth/oidc.h"
#include "unit.h"
#include "util/base64.h"

#define ISS "https://idp.example"
#define CLIENT "husk-client"
#define NONCE "n-0S6_WzA2Mj"
#define NOW 1800000000

static cjose_jwk_t *rsa, *rsa_other, *ec, *ec384, *rsa_small;
static json_t *jwks;

static cjose_jwk_t *with_kid(cjose_jwk_t *k, const char *kid) {
  cjose_err ce;
  if (!k || !cjose_jwk_set_kid(k, kid, strlen(kid), &ce)) {
    printf("# key: %s\n", k ? ce.message : "none");
    exit(2);
  }
  return k;
}

static json_t *pub_json(cjose_jwk_t *k) {
  cjose_err ce;
  char *t = cjose_jwk_to_json(k, false, &ce);
  json_t *j = json_loads(t, 0, NULL);
  free(t);
  return j;
}

/* A token: header fields (alg, kid) and claims, signed by k. */
static char *sign(cjose_jwk_t *k, const char *alg, const char *kid, json_t *claims) {
  cjose_err ce;
  cjose_header_t *h = cjose_header_new(&ce);
  cjose_header_set(h, CJOSE_HDR_ALG, alg, &ce);
  if (kid)
    cjose_header_set(h, CJOSE_HDR_KID, kid, &ce);
  char *pt = json_dumps(claims, JSON_COMPACT);
  cjose_jws_t *jws = cjose_jws_sign(k, h, (const uint8_t *)pt, strlen(pt), &ce);
  const char *ser = NULL;
  char *out = NULL;
  if (jws && cjose_jws_export(jws, &ser, &ce))
    out = strdup(ser);
  else
    printf("# sign %s: %s\n", alg, ce.message);
  cjose_jws_release(jws);
  cjose_header_release(h);
  free(pt);
  json_decref(claims);
  return out;
}

static char *b64url(const void *p, size_t n) {
  char *o = malloc(b64_encoded_len(n, B64_URL) + 1);
  size_t l = b64_encode_to(o, p, n, B64_URL);
  o[l] = 0;
  return o;
}

/* A token whose header and signature are made by hand. */
static char *raw_token(const char *header, json_t *claims, const unsigned char *sig, size_t sl) {
  char *pt = json_dumps(claims, JSON_COMPACT);
  json_decref(claims);
  char *h = b64url(header, strlen(header)), *p = b64url(pt, strlen(pt));
  char *s = b64url(sig, sl);
  char *out;
  if (asprintf(&out, "%s.%s.%s", h, p, s) < 0)
    exit(2);
  free(h), free(p), free(s), free(pt);
  return out;
}

static json_t *good_claims(void) {
  return json_pack("{s:s, s:s, s:s, s:I, s:I, s:s, s:s, s:b, s:s}", "iss", ISS, "sub",
                   "248289761001", "aud", CLIENT, "exp", (json_int_t)NOW + 300, "iat",
                   (json_int_t)NOW - 10, "nonce", NONCE, "email", "Jane@Example.com",
                   "email_verified", 1, "name", "Jane Doe");
}

static json_t *claims_with(const char *k, json_t *v) {
  json_t *c = good_claims();
  if (v)
    json_object_set_new(c, k, v);
  else
    json_object_del(c, k);
  return c;
}

static int verify(const char *tok, const json_t *set, struct oidc_claims *cl, struct husk_err *e) {
  struct oidc_expect ex = {.issuer = ISS, .client_id = CLIENT, .nonce = NONCE, .now_s = NOW};
  return oidc_jwt_verify(tok, set, &ex, cl, e);
}

#define EXPECT(tok, want_)                                                                         \
  do {                                                                                             \
    char *t_ = (tok);                                                                              \
    struct oidc_claims cl_;                                                                        \
    struct husk_err e_ = {0};                                                                      \
    int r_ = verify(t_, jwks, &cl_, &e_);                                                          \
    if ((want_) == 0 ? r_ != 0 : (r_ != -1 || e_.code != (want_))) {                               \
      printf("#   %s:%d: got %d %s (%s), want %s\n", __FILE__, __LINE__, r_,                       \
             r_ ? oidc_reason(e_.code) : "ok", e_.msg, (want_) ? oidc_reason(want_) : "ok");       \
      unit_cur_failed = 1;                                                                         \
    }                                                                                              \
    if (r_ < 0 && t_ && *t_ && strstr(e_.msg, t_))                                                 \
      unit_cur_failed = 1; /* never the token */                                                   \
    free(t_);                                                                                      \
  } while (0)

TEST(good_tokens) {
  struct oidc_claims cl;
  struct husk_err e;
  char *t = sign(rsa, "RS256", "rsa1", good_claims());
  CHECK(verify(t, jwks, &cl, &e) == 0);
  CHECK_STR(cl.sub, "248289761001");
  CHECK_STR(cl.email, "Jane@Example.com");
  CHECK(cl.has_email && cl.email_verified);
  CHECK_STR(cl.name, "Jane Doe");
  free(t);
  EXPECT(sign(rsa, "RS384", "rsa1", good_claims()), 0);
  EXPECT(sign(rsa, "RS512", "rsa1", good_claims()), 0);
  EXPECT(sign(rsa, "PS256", "rsa1", good_claims()), 0);
  EXPECT(sign(rsa, "PS512", "rsa1", good_claims()), 0);
  EXPECT(sign(ec, "ES256", "ec1", good_claims()), 0);
  EXPECT(sign(ec384, "ES384", "ec384", good_claims()), 0);
  /* Skew: expired 30 s ago passes, iat 5 min ahead passes. */
  EXPECT(sign(rsa, "RS256", "rsa1", claims_with("exp", json_integer(NOW - 30))), 0);
  EXPECT(sign(rsa, "RS256", "rsa1", claims_with("iat", json_integer(NOW + 300))), 0);
  /* Two audiences with azp ours; a real-valued exp. */
  json_t *c = claims_with("aud", json_pack("[s,s]", "other", CLIENT));
  json_object_set_new(c, "azp", json_string(CLIENT));
  EXPECT(sign(rsa, "RS256", "rsa1", c), 0);
  EXPECT(sign(rsa, "RS256", "rsa1", claims_with("exp", json_real(NOW + 100.5))), 0);
  /* No kid: any usable key of the right type is tried. */
  EXPECT(sign(rsa, "RS256", NULL, good_claims()), 0);
}

TEST(algorithms_refused) {
  /* alg none: header and an empty signature. */
  EXPECT(
      raw_token("{\"alg\":\"none\",\"kid\":\"rsa1\"}", good_claims(), (const unsigned char *)"", 0),
      OIDC_E_BAD_ALG);
  EXPECT(raw_token("{\"alg\":\"None\"}", good_claims(), (const unsigned char *)"", 0),
         OIDC_E_BAD_ALG);
  /* HS256 with the public key's JSON as the HMAC secret. */
  json_t *pk = json_object_get(json_array_get(json_object_get(jwks, "keys"), 0), "n");
  const char *secret = json_string_value(pk);
  const char *hdr = "{\"alg\":\"HS256\",\"kid\":\"rsa1\"}";
  char *hb = b64url(hdr, strlen(hdr));
  json_t *cl = good_claims();
  char *pt = json_dumps(cl, JSON_COMPACT);
  char *pb = b64url(pt, strlen(pt));
  char *input;
  if (asprintf(&input, "%s.%s", hb, pb) < 0)
    exit(2);
  unsigned char mac[32];
  unsigned ml = 0;
  HMAC(EVP_sha256(), secret, (int)strlen(secret), (unsigned char *)input, strlen(input), mac, &ml);
  free(hb), free(pb), free(pt), free(input);
  EXPECT(raw_token(hdr, cl, mac, ml), OIDC_E_BAD_ALG);
  char *pubtext = cjose_jwk_to_json(rsa, false, NULL);
  hb = b64url(hdr, strlen(hdr));
  cl = good_claims();
  pt = json_dumps(cl, JSON_COMPACT);
  pb = b64url(pt, strlen(pt));
  if (asprintf(&input, "%s.%s", hb, pb) < 0)
    exit(2);
  HMAC(EVP_sha256(), pubtext, (int)strlen(pubtext), (unsigned char *)input, strlen(input), mac,
       &ml);
  free(hb), free(pb), free(pt), free(input), free(pubtext);
  EXPECT(raw_token(hdr, cl, mac, ml), OIDC_E_BAD_ALG);
  EXPECT(raw_token("{\"alg\":\"HS512\"}", good_claims(), mac, ml), OIDC_E_BAD_ALG);
  EXPECT(raw_token("{\"kid\":\"rsa1\"}", good_claims(), mac, ml), OIDC_E_BAD_ALG);
}

TEST(keys_refused) {
  /* A kid the set does not have. */
  EXPECT(sign(rsa, "RS256", "nope", good_claims()), OIDC_E_UNKNOWN_KEY);
  /* A valid signature by a key not in the set, under a kid of the set. */
  EXPECT(sign(rsa_other, "RS256", "rsa1", good_claims()), OIDC_E_BAD_SIGNATURE);
  /* ... and under its own kid. */
  EXPECT(sign(rsa_other, "RS256", "other", good_claims()), OIDC_E_UNKNOWN_KEY);
  /* The set's key for another use or algorithm is not used. */
  EXPECT(sign(rsa, "RS256", "rsa-enc", good_claims()), OIDC_E_UNKNOWN_KEY);
  EXPECT(sign(rsa, "RS256", "rsa-rs512", good_claims()), OIDC_E_UNKNOWN_KEY);
  /* An RSA key's kid in an ES256 token; an EC P-256 key for ES384. */
  EXPECT(sign(ec, "ES256", "rsa1", good_claims()), OIDC_E_UNKNOWN_KEY);
  EXPECT(sign(ec, "ES384", "ec1", good_claims()), OIDC_E_UNKNOWN_KEY);
  /* A key too small. */
  EXPECT(sign(rsa_small, "RS256", "small", good_claims()), OIDC_E_UNKNOWN_KEY);
  /* A tampered payload. */
  char *t = sign(rsa, "RS256", "rsa1", good_claims());
  char *dot = strchr(t, '.');
  dot[3] = dot[3] == 'A' ? 'B' : 'A';
  struct oidc_claims cl;
  struct husk_err e;
  CHECK(verify(t, jwks, &cl, &e) < 0 &&
        (e.code == OIDC_E_BAD_SIGNATURE || e.code == OIDC_E_BAD_TOKEN));
  free(t);
  /* An empty set. */
  json_t *none = json_pack("{s:[]}", "keys");
  t = sign(rsa, "RS256", "rsa1", good_claims());
  CHECK(verify(t, none, &cl, &e) < 0 && e.code == OIDC_E_UNKNOWN_KEY);
  free(t);
  json_decref(none);
  /* A set whose key numbers are malformed base64url (cjose 0.6 asserts
   * on them): the key is not used, the daemon does not stop. */
  json_t *bad = json_pack("{s:[{s:s, s:s, s:s, s:s}, {s:s, s:s, s:s, s:s, s:s}]}", "keys", "kty",
                          "RSA", "kid", "rsa1", "n", "AAAAA", "e", "AQAB", "kty", "EC", "kid",
                          "ec1", "crv", "P-256", "x", "A", "y", "AAAAA");
  t = sign(rsa, "RS256", "rsa1", good_claims());
  CHECK(verify(t, bad, &cl, &e) < 0 && e.code == OIDC_E_UNKNOWN_KEY);
  free(t);
  t = sign(ec, "ES256", "ec1", good_claims());
  CHECK(verify(t, bad, &cl, &e) < 0 && e.code == OIDC_E_UNKNOWN_KEY);
  free(t);
  json_decref(bad);
  /* Keys carried by the token itself. */
  EXPECT(raw_token("{\"alg\":\"RS256\",\"jku\":\"https://evil.example/jwks\"}", good_claims(),
                   (const unsigned char *)"x", 1),
         OIDC_E_BAD_TOKEN);
  EXPECT(raw_token("{\"alg\":\"RS256\",\"crit\":[\"exp\"]}", good_claims(),
                   (const unsigned char *)"x", 1),
         OIDC_E_BAD_TOKEN);
}

TEST(claims_refused) {
  EXPECT(sign(rsa, "RS256", "rsa1", claims_with("iss", json_string(ISS "/"))), OIDC_E_BAD_ISSUER);
  EXPECT(sign(rsa, "RS256", "rsa1", claims_with("iss", NULL)), OIDC_E_BAD_ISSUER);
  EXPECT(sign(rsa, "RS256", "rsa1", claims_with("aud", json_string("other"))), OIDC_E_BAD_AUDIENCE);
  EXPECT(sign(rsa, "RS256", "rsa1", claims_with("aud", NULL)), OIDC_E_BAD_AUDIENCE);
  EXPECT(sign(rsa, "RS256", "rsa1", claims_with("aud", json_pack("[s,s]", "other", CLIENT))),
         OIDC_E_BAD_AUDIENCE); /* two audiences, no azp */
  EXPECT(sign(rsa, "RS256", "rsa1", claims_with("azp", json_string("other"))), OIDC_E_BAD_AUDIENCE);
  EXPECT(sign(rsa, "RS256", "rsa1", claims_with("exp", json_integer(NOW - 61))), OIDC_E_EXPIRED);
  EXPECT(sign(rsa, "RS256", "rsa1", claims_with("exp", NULL)), OIDC_E_BAD_TOKEN);
  EXPECT(sign(rsa, "RS256", "rsa1", claims_with("exp", json_string("tomorrow"))), OIDC_E_BAD_TOKEN);
  /* Huge numeric dates: refused, never overflowed (exp + skew was UB). */
  EXPECT(sign(rsa, "RS256", "rsa1", claims_with("exp", json_integer(INT64_MAX))), OIDC_E_BAD_TOKEN);
  EXPECT(sign(rsa, "RS256", "rsa1", claims_with("iat", json_integer(INT64_MAX))), OIDC_E_BAD_TOKEN);
  EXPECT(sign(rsa, "RS256", "rsa1", claims_with("exp", json_integer(INT64_MIN))), OIDC_E_BAD_TOKEN);
  EXPECT(sign(rsa, "RS256", "rsa1", claims_with("iat", json_integer(NOW + 361))), OIDC_E_EXPIRED);
  EXPECT(sign(rsa, "RS256", "rsa1", claims_with("nonce", json_string("other"))), OIDC_E_BAD_NONCE);
  EXPECT(sign(rsa, "RS256", "rsa1", claims_with("nonce", NULL)), OIDC_E_BAD_NONCE);
  EXPECT(sign(rsa, "RS256", "rsa1", claims_with("sub", NULL)), OIDC_E_BAD_SUBJECT);
  EXPECT(sign(rsa, "RS256", "rsa1", claims_with("sub", json_string(""))), OIDC_E_BAD_SUBJECT);
  char big[300];
  memset(big, 's', 256);
  big[256] = 0;
  EXPECT(sign(rsa, "RS256", "rsa1", claims_with("sub", json_string(big))), OIDC_E_BAD_SUBJECT);
  big[255] = 0;
  EXPECT(sign(rsa, "RS256", "rsa1", claims_with("sub", json_string(big))), 0);
  EXPECT(sign(rsa, "RS256", "rsa1", claims_with("sub", json_integer(5))), OIDC_E_BAD_SUBJECT);
  /* email_verified must be true itself. */
  struct oidc_claims cl;
  struct husk_err e;
  char *t = sign(rsa, "RS256", "rsa1", claims_with("email_verified", json_string("true")));
  CHECK(verify(t, jwks, &cl, &e) == 0 && cl.has_email && !cl.email_verified);
  free(t);
  /* Claims nested past 64 levels. */
  json_t *deep = json_object(), *cur = deep;
  for (int i = 0; i < 70; i++) {
    json_t *n = json_object();
    json_object_set_new(cur, "x", n);
    cur = n;
  }
  EXPECT(sign(rsa, "RS256", "rsa1", claims_with("deep", deep)), OIDC_E_BAD_TOKEN);
  /* Larger than 16 KiB. */
  char *pad = malloc(17000);
  memset(pad, 'p', 16999);
  pad[16999] = 0;
  EXPECT(sign(rsa, "RS256", "rsa1", claims_with("pad", json_string(pad))), OIDC_E_BAD_TOKEN);
  free(pad);
  /* Not a JWS at all. */
  EXPECT(strdup("abc"), OIDC_E_BAD_TOKEN);
  EXPECT(strdup("a.b"), OIDC_E_BAD_TOKEN);
  EXPECT(strdup("a.b.c.d"), OIDC_E_BAD_TOKEN);
  EXPECT(strdup(""), OIDC_E_BAD_TOKEN);
  /* Malformed base64url that cjose 0.6 asserts on (the fuzzer's find):
   * refused before cjose sees it. */
  EXPECT(strdup("eyJhbGciOiJSUzI1NiJ9.eyJ9.a"), OIDC_E_BAD_TOKEN);
  EXPECT(strdup("eyJhbGciOiJSUzI1NiJ9.eyJ9.abcde"), OIDC_E_BAD_TOKEN);
  EXPECT(strdup("eyJhbGciOiJSUzI1NiJ9.eyJ9.ab=c"), OIDC_E_BAD_TOKEN);
  EXPECT(strdup("eyJhbGciOiJSUzI1NiJ9.e.abcd"), OIDC_E_BAD_TOKEN);
  EXPECT(strdup("eyJhbGciOiJSUzI1NiJ9.eyJ9."), OIDC_E_BAD_SIGNATURE);
}

int main(void) {
  cjose_err ce;
  static const uint8_t e65537[] = {1, 0, 1};
  rsa = with_kid(cjose_jwk_create_RSA_random(2048, e65537, 3, &ce), "rsa1");
  rsa_other = with_kid(cjose_jwk_create_RSA_random(2048, e65537, 3, &ce), "other");
  rsa_small = with_kid(cjose_jwk_create_RSA_random(1024, e65537, 3, &ce), "small");
  ec = with_kid(cjose_jwk_create_EC_random(CJOSE_JWK_EC_P_256, &ce), "ec1");
  ec384 = with_kid(cjose_jwk_create_EC_random(CJOSE_JWK_EC_P_384, &ce), "ec384");
  jwks = json_pack("{s:[]}", "keys");
  json_t *keys = json_object_get(jwks, "keys");
  json_array_append_new(keys, pub_json(rsa));
  json_array_append_new(keys, pub_json(ec));
  json_array_append_new(keys, pub_json(ec384));
  json_array_append_new(keys, pub_json(rsa_small));
  json_t *enc = pub_json(rsa);
  json_object_set_new(enc, "kid", json_string("rsa-enc"));
  json_object_set_new(enc, "use", json_string("enc"));
  json_array_append_new(keys, enc);
  json_t *rs512 = pub_json(rsa);
  json_object_set_new(rs512, "kid", json_string("rsa-rs512"));
  json_object_set_new(rs512, "alg", json_string("RS512"));
  json_array_append_new(keys, rs512);
  RUN(good_tokens);
  RUN(algorithms_refused);
  RUN(keys_refused);
  RUN(claims_refused);
  json_decref(jwks);
  cjose_jwk_release(rsa);
  cjose_jwk_release(rsa_other);
  cjose_jwk_release(rsa_small);
  cjose_jwk_release(ec);
  cjose_jwk_release(ec384);
  return unit_done();
}
