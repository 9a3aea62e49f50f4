/* Per-box CA, leaf minting and TLS contexts (see tls.h). */
#define _GNU_SOURCE
#include "egress/tls.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int egress_tls_fail(struct husk_err *err, const char *what) {
  unsigned long e = ERR_get_error();
  char buf[256] = "unknown error";
  if (e)
    ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return husk_fail(err, EPROTO, "%s: %s", what, buf);
}

static int add_ext(X509 *issuer, X509 *cert, int nid, const char *value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, NULL, NULL, 0);
  X509_EXTENSION *ex = X509V3_EXT_conf_nid(NULL, &ctx, nid, value);
  if (!ex)
    return -1;
  int ok = X509_add_ext(cert, ex, -1);
  X509_EXTENSION_free(ex);
  return ok ? 0 : -1;
}

static int random_serial(X509 *c) {
  unsigned char b[16];
  if (RAND_bytes(b, sizeof b) != 1)
    return -1;
  b[0] &= 0x7f;
  BIGNUM *bn = BN_bin2bn(b, sizeof b, NULL);
  int ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(c)) != NULL;
  BN_free(bn);
  return ok ? 0 : -1;
}

int egress_ca_new(struct egress_ca *ca, const char *box_id, struct husk_err *err) {
  memset(ca, 0, sizeof *ca);
  ca->key = EVP_EC_gen("P-256");
  ca->leaf_key = EVP_EC_gen("P-256");
  ca->cert = X509_new();
  if (!ca->key || !ca->leaf_key || !ca->cert)
    goto fail;
  char cn[96];
  snprintf(cn, sizeof cn, "husk egress CA for %.60s", box_id);
  X509_NAME *name = X509_get_subject_name(ca->cert);
  if (!X509_set_version(ca->cert, 2) || random_serial(ca->cert) < 0 ||
      !X509_gmtime_adj(X509_getm_notBefore(ca->cert), -3600) ||
      !X509_gmtime_adj(X509_getm_notAfter(ca->cert), 60L * 60 * 24 * 30) ||
      !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)cn, -1, -1, 0) ||
      !X509_set_issuer_name(ca->cert, name) || !X509_set_pubkey(ca->cert, ca->key) ||
      add_ext(ca->cert, ca->cert, NID_basic_constraints, "critical,CA:TRUE,pathlen:0") < 0 ||
      add_ext(ca->cert, ca->cert, NID_key_usage, "critical,keyCertSign,cRLSign") < 0 ||
      add_ext(ca->cert, ca->cert, NID_subject_key_identifier, "hash") < 0 ||
      !X509_sign(ca->cert, ca->key, EVP_sha256()))
    goto fail;
  return 0;
fail:
  egress_ca_free(ca);
  return egress_tls_fail(err, "cannot create the box's CA");
}

void egress_ca_free(struct egress_ca *ca) {
  EVP_PKEY_free(ca->key);
  EVP_PKEY_free(ca->leaf_key);
  X509_free(ca->cert);
  memset(ca, 0, sizeof *ca);
}

char *egress_ca_pem(const struct egress_ca *ca) {
  BIO *b = BIO_new(BIO_s_mem());
  if (!b || !PEM_write_bio_X509(b, ca->cert)) {
    BIO_free(b);
    return NULL;
  }
  char *data;
  long n = BIO_get_mem_data(b, &data);
  char *out = n > 0 ? strndup(data, (size_t)n) : NULL;
  BIO_free(b);
  return out;
}

static X509 *mint_leaf(const struct egress_ca *ca, const char *host, bool is_ip) {
  X509 *c = X509_new();
  if (!c)
    return NULL;
  char san[300];
  snprintf(san, sizeof san, "%s:%s", is_ip ? "IP" : "DNS", host);
  X509_NAME *name = X509_get_subject_name(c);
  if (!X509_set_version(c, 2) || random_serial(c) < 0 ||
      !X509_gmtime_adj(X509_getm_notBefore(c), -3600) ||
      !X509_gmtime_adj(X509_getm_notAfter(c), 60L * 60 * 24 * 7) ||
      !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)host,
                                  (int)(strlen(host) > 64 ? 64 : strlen(host)), -1, 0) ||
      !X509_set_issuer_name(c, X509_get_subject_name(ca->cert)) ||
      !X509_set_pubkey(c, ca->leaf_key) ||
      add_ext(ca->cert, c, NID_basic_constraints, "critical,CA:FALSE") < 0 ||
      add_ext(ca->cert, c, NID_key_usage, "critical,digitalSignature") < 0 ||
      add_ext(ca->cert, c, NID_ext_key_usage, "serverAuth") < 0 ||
      add_ext(ca->cert, c, NID_subject_alt_name, san) < 0 ||
      add_ext(ca->cert, c, NID_authority_key_identifier, "keyid:always") < 0 ||
      !X509_sign(c, ca->key, EVP_sha256())) {
    X509_free(c);
    return NULL;
  }
  return c;
}

static int alpn_http11(SSL *s, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg) {
  static const unsigned char h11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  unsigned char *o;
  if (SSL_select_next_proto(&o, outlen, h11, sizeof h11, in, inlen) != OPENSSL_NPN_NEGOTIATED)
    return SSL_TLSEXT_ERR_ALERT_FATAL; /* h2-only clients: refuse */
  *out = o;
  return SSL_TLSEXT_ERR_OK;
}

SSL_CTX *egress_tls_server_ctx(const struct egress_ca *ca, const char *host, bool is_ip,
                               struct husk_err *err) {
  SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
  X509 *leaf = ctx ? mint_leaf(ca, host, is_ip) : NULL;
  if (!leaf || !SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) ||
      !SSL_CTX_use_certificate(ctx, leaf) || !SSL_CTX_use_PrivateKey(ctx, ca->leaf_key)) {
    X509_free(leaf);
    SSL_CTX_free(ctx);
    egress_tls_fail(err, "cannot make the box-side certificate");
    return NULL;
  }
  X509_free(leaf);
  SSL_CTX_set_alpn_select_cb(ctx, alpn_http11, NULL);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION);
  return ctx;
}

SSL_CTX *egress_tls_client_ctx(const char *extra_ca_file, struct husk_err *err) {
  SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
  if (!ctx || !SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) ||
      !SSL_CTX_set_default_verify_paths(ctx)) {
    SSL_CTX_free(ctx);
    egress_tls_fail(err, "cannot set up upstream TLS");
    return NULL;
  }
  if (extra_ca_file && !SSL_CTX_load_verify_locations(ctx, extra_ca_file, NULL)) {
    SSL_CTX_free(ctx);
    egress_tls_fail(err, "cannot load --egress-ca-file");
    return NULL;
  }
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
  static const unsigned char h11[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  SSL_CTX_set_alpn_protos(ctx, h11, sizeof h11);
  SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION);
  return ctx;
}
