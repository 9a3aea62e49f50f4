/* TLS for inject mode: a per-box certificate authority whose key never
 * leaves the daemon, leaf certificates minted on demand for the names the
 * box is allowed to reach, and the client context that re-originates TLS
 * to the real server with full verification (system roots, plus the
 * operator's --egress-ca-file).
 *
 * The CA is P-256, valid for the box's lifetime, constrained to path
 * length 0 (it can sign leaves only).  It exists in memory only: after a
 * daemon restart a box gets a new CA and its bundle file is rewritten. */
#ifndef HUSK_EGRESS_TLS_H
#define HUSK_EGRESS_TLS_H

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdbool.h>

#include "util/error.h"

struct egress_ca {
  EVP_PKEY *key;      /* CA key */
  X509 *cert;
  EVP_PKEY *leaf_key; /* shared by this box's leaves */
};

int egress_ca_new(struct egress_ca *ca, const char *box_id, struct husk_err *err);
void egress_ca_free(struct egress_ca *ca);
/* PEM of the CA certificate (malloc'd). */
char *egress_ca_pem(const struct egress_ca *ca);

/* A server context presenting a fresh leaf for `host` (a name or an IP
 * literal), signed by the box's CA.  http/1.1 only. */
SSL_CTX *egress_tls_server_ctx(const struct egress_ca *ca, const char *host, bool is_ip,
                               struct husk_err *err);

/* The shared client context (verification on). */
SSL_CTX *egress_tls_client_ctx(const char *extra_ca_file, struct husk_err *err);

/* The last OpenSSL error, as text, into err. */
int egress_tls_fail(struct husk_err *err, const char *what);

#endif
