/* ID token verification (src/auth/oidc_jwt.c): the provider's token is
 * the input, checked against a fixed JWKS (an RSA and an EC P-256 key) and
 * the expectations the seeds were signed for (tests/fuzz/corpus/oidc_jwt:
 * RS256, PS256, ES256 tokens that verify, and alg none), so mutations
 * reach the header judgement, cjose's parsing and verification, and the
 * claims' checks. */
#include <jansson.h>

#include "auth/oidc.h"
#include "fuzz.h"

static const char jwks_text[] =
    "{\"keys\": [{\"kty\": \"RSA\", \"kid\": \"r1\", \"use\": \"sig\", \"alg\": \"RS256\", \""
    "n\": \"sWm_ZBlamt0-Q1omNZUklay4U-NsHRZSlPijg6XIAR0IHWNxteCYWLEhqn93X9nWOaUJXBt0fofhdVMRh"
    "LUN6B9apn4k7eqyfxKvQGLfSs7JyPr_FC8sqRvt_QOg4OSBUy1qjqx8VR2c02AGWsx7llua-Bo--BdC2JEgdivEH"
    "SNxRMVbjPIpsenBHb-mxKfiNDjju2LnnaPJKWPlZ9UXAB55akwwPgX_2UBvffgl3MezZz8eCEuTKTTKNuRMby7dx"
    "4Or9gGoqLUl5HepEJ-op4Sh9efB5fC4QXN-iE9qhuOvr_2LAZlpP45s9w7QTMFoIr3aKqgFo9TxljqnsUDAwQ\","
    " \"e\": \"AQAB\"}, {\"kty\": \"EC\", \"kid\": \"e1\", \"crv\": \"P-256\", \"x\": \"Ds-yR"
    "vgNbmRRkHNJNIAO9ns1Jq3g3TBDuhpBhgfyXLA\", \"y\": \"jva-FRIIOie74JOjrgwYBHARLJSC3P3uibrlj"
    "bXCpmI\"}]}";

/* An input that starts with '{' is the provider's JWKS instead (cjose's
 * JWK import), checked with each of these tokens. */
static const char *const tokens[] = {
    "eyJhbGciOiAiUlMyNTYiLCAia2lkIjogInIxIn0.e30.AAAA",
    "eyJhbGciOiAiRVMyNTYiLCAia2lkIjogImUxIn0.e30.AAAA",
    "eyJhbGciOiAiUlMyNTYifQ.e30.AAAA",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static json_t *jwks;
  if (!jwks && !(jwks = json_loads(jwks_text, 0, NULL)))
    abort();
  char *in = malloc(size + 1);
  if (!in)
    return 0;
  memcpy(in, data, size);
  in[size] = '\0';
  struct oidc_expect ex = {.issuer = "https://idp.example",
                           .client_id = "husk",
                           .nonce = "n-0S6_WzA2Mj",
                           .now_s = 1800000100};
  struct oidc_claims cl;
  struct husk_err err;
  if (size && in[0] == '{') {
    json_t *set = json_loadb(in, size, 0, NULL);
    for (size_t i = 0; set && i < sizeof tokens / sizeof tokens[0]; i++)
      (void)oidc_jwt_verify(tokens[i], set, &ex, &cl, &err);
    json_decref(set);
  } else {
    (void)oidc_jwt_verify(in, jwks, &ex, &cl, &err);
  }
  free(in);
  return 0;
}
