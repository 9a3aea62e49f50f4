/* Clients known by their metadata document (src/auth/cimd.c): the rules
 * of the client_id URL and of the document, each refusal; and the fetch
 * through the sign-in fetcher from an https server on loopback (a thread
 * here, its certificate made here and trusted as the fetcher's CA file,
 * loopback allowed as the operator's --oauth-fetch-allow-range would):
 * refusals of what is fetched (not JSON, too big, a redirect, an error
 * status, an address not allowed), the cache and its lifetimes, the per
 * address gate, and a code, refresh and revocation for such a client. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth/auth.h"
#include "auth/auth_internal.h"
#include "auth/fetch.h"
#include "state/state.h"
#include "unit.h"

#define CHECK_OK(expr)                                                                             \
  do {                                                                                             \
    husk_err_clear(&err);                                                                          \
    if ((expr) != 0) {                                                                             \
      printf("#   %s:%d: %s: %s\n", __FILE__, __LINE__, #expr, err.msg);                           \
      unit_cur_failed = 1;                                                                         \
    }                                                                                              \
  } while (0)
#define CHECK_ERR(expr, want)                                                                      \
  do {                                                                                             \
    husk_err_clear(&err);                                                                          \
    int r_ = (expr);                                                                               \
    if (r_ != -1 || err.code != (want)) {                                                          \
      printf("#   %s:%d: %s: got %d code %d (%s), want %d\n", __FILE__, __LINE__, #expr, r_,       \
             err.code, err.msg, (want));                                                           \
      unit_cur_failed = 1;                                                                         \
    }                                                                                              \
  } while (0)

#define MCP "https://husk.example/mcp"
#define CB "https://app.example/callback"
#define VERIFIER "dBjftJeZ4CVP-mJ92K1uOYtrzcM9kqXvpOoMm2KOcHM"
#define CHALLENGE "3clj5LhMl7kb12BFcC2Cy4G0xcMUxM7qRrlJD0tcBtk"

static char dir[64], ca_path[128];
static struct state *st;
static struct auth *au;
static struct auth_fetcher *fetcher;
static int64_t fake_now;
static int64_t clock_fake(void) { return __atomic_load_n(&fake_now, __ATOMIC_SEQ_CST); }
static void clock_add(int64_t ms) { __atomic_add_fetch(&fake_now, ms, __ATOMIC_SEQ_CST); }

/* ---- the https server ---- */

static SSL_CTX *tls;
static int srv_fd = -1;
static unsigned srv_port;
static atomic_int srv_requests;

/* A self-signed certificate for localhost, written to ca_path. */
static void make_cert(void) {
  EVP_PKEY *k = EVP_EC_gen("P-256");
  X509 *x = X509_new();
  if (!k || !x)
    exit(2);
  X509_set_version(x, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
  X509_gmtime_adj(X509_getm_notBefore(x), -3600);
  X509_gmtime_adj(X509_getm_notAfter(x), 86400);
  X509_set_pubkey(x, k);
  X509_NAME *n = X509_get_subject_name(x);
  X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *)"localhost", -1, -1, 0);
  X509_set_issuer_name(x, n);
  X509V3_CTX v3;
  X509V3_set_ctx_nodb(&v3);
  X509V3_set_ctx(&v3, x, x, NULL, NULL, 0);
  X509_EXTENSION *san = X509V3_EXT_conf_nid(NULL, &v3, NID_subject_alt_name, "DNS:localhost");
  X509_EXTENSION *bc = X509V3_EXT_conf_nid(NULL, &v3, NID_basic_constraints, "critical,CA:TRUE");
  if (!san || !bc || !X509_add_ext(x, san, -1) || !X509_add_ext(x, bc, -1) ||
      !X509_sign(x, k, EVP_sha256()))
    exit(2);
  X509_EXTENSION_free(san);
  X509_EXTENSION_free(bc);
  FILE *f = fopen(ca_path, "w");
  if (!f || !PEM_write_X509(f, x) || fclose(f) != 0)
    exit(2);
  tls = SSL_CTX_new(TLS_server_method());
  if (!tls || SSL_CTX_use_certificate(tls, x) != 1 || SSL_CTX_use_PrivateKey(tls, k) != 1)
    exit(2);
  X509_free(x);
  EVP_PKEY_free(k);
}

static void tls_send(SSL *s, const char *p, size_t n) {
  while (n) {
    int w = SSL_write(s, p, n > 65536 ? 65536 : (int)n);
    if (w <= 0)
      return;
    p += w;
    n -= (size_t)w;
  }
}

/* A document naming itself (client_id: the URL it is served at) with
 * these redirect URIs and extra members. */
static void doc_reply(SSL *s, const char *path, const char *headers, const char *redirects,
                      const char *extra) {
  char body[2048], reply[3072];
  snprintf(body, sizeof body,
           "{\"client_id\":\"https://localhost:%u%s\",\"client_name\":\"Good App\","
           "\"redirect_uris\":%s%s}",
           srv_port, path, redirects, extra);
  snprintf(reply, sizeof reply,
           "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n%sContent-Length: "
           "%zu\r\nConnection: close\r\n\r\n%s",
           headers, strlen(body), body);
  tls_send(s, reply, strlen(reply));
}

static void raw_reply(SSL *s, const char *status, const char *body) {
  char reply[1024];
  snprintf(reply, sizeof reply,
           "HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\nConnection: "
           "close\r\n\r\n%s",
           status, strlen(body), body);
  tls_send(s, reply, strlen(reply));
}

static void *srv_conn(void *arg) {
  int fd = (int)(intptr_t)arg;
  SSL *s = SSL_new(tls);
  char req[4096];
  size_t n = 0;
  if (!s || !SSL_set_fd(s, fd) || SSL_accept(s) != 1)
    goto done;
  for (;;) {
    int r = SSL_read(s, req + n, (int)(sizeof req - 1 - n));
    if (r <= 0)
      goto done;
    n += (size_t)r;
    req[n] = 0;
    if (strstr(req, "\r\n\r\n") || n == sizeof req - 1)
      break;
  }
  atomic_fetch_add(&srv_requests, 1);
  char path[256] = "";
  sscanf(req, "GET %255s ", path);
  static const char good[] = "[\"" CB "\",\"http://127.0.0.1/cb\"]";
  if (!strcmp(path, "/ok.json") || !strcmp(path, "/again.json"))
    doc_reply(s, path, "Cache-Control: public, max-age=60\r\n", good, "");
  else if (!strcmp(path, "/noage.json"))
    doc_reply(s, path, "", good, ",\"token_endpoint_auth_method\":\"none\"");
  else if (!strcmp(path, "/long.json"))
    doc_reply(s, path, "Cache-Control: max-age=9999999\r\n", good, "");
  else if (!strcmp(path, "/mismatch.json"))
    raw_reply(s, "200 OK",
              "{\"client_id\":\"https://localhost/other.json\",\"redirect_uris\":[\"" CB "\"]}");
  else if (!strcmp(path, "/badredir.json"))
    doc_reply(s, path, "", "[\"http://evil.example/cb\"]", "");
  else if (!strcmp(path, "/secret.json"))
    doc_reply(s, path, "", good, ",\"token_endpoint_auth_method\":\"client_secret_basic\"");
  else if (!strcmp(path, "/notjson"))
    raw_reply(s, "200 OK", "<html>hello</html>");
  else if (!strcmp(path, "/redirect.json"))
    raw_reply(s, "302 Found\r\nLocation: /ok.json", "");
  else if (!strcmp(path, "/big.json")) {
    static char big[70 * 1024];
    memset(big, ' ', sizeof big - 1);
    big[0] = '{';
    big[sizeof big - 2] = '}';
    char head[256];
    snprintf(head, sizeof head,
             "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n", sizeof big - 1);
    tls_send(s, head, strlen(head));
    tls_send(s, big, sizeof big - 1);
  } else
    raw_reply(s, "404 Not Found", "");
  SSL_shutdown(s);
done:
  SSL_free(s);
  close(fd);
  return NULL;
}

static void *srv_main(void *arg) {
  (void)arg;
  for (;;) {
    int c = accept(srv_fd, NULL, NULL);
    if (c < 0)
      return NULL;
    pthread_t t;
    if (pthread_create(&t, NULL, srv_conn, (void *)(intptr_t)c) != 0) {
      close(c);
      continue;
    }
    pthread_detach(t);
  }
}

static void srv_start(void) {
  make_cert();
  srv_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t l = sizeof a;
  if (srv_fd < 0 || bind(srv_fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(srv_fd, 64) < 0 ||
      getsockname(srv_fd, (struct sockaddr *)&a, &l) < 0) {
    perror("server");
    exit(2);
  }
  srv_port = ntohs(a.sin_port);
  pthread_t t;
  if (pthread_create(&t, NULL, srv_main, NULL) != 0)
    exit(2);
  pthread_detach(t);
}

static const char *doc(const char *path) {
  static char buf[8][160];
  static int k;
  char *u = buf[k++ % 8];
  snprintf(u, sizeof buf[0], "https://localhost:%u%s", srv_port, path);
  return u;
}

/* ---- the URL ---- */

TEST(url_rules) {
  struct husk_err err;
  char host[AUTH_HOST_MAX + 1];
  CHECK_OK(auth_cimd_url_check("https://client.example.com/oauth/client.json", host, &err));
  CHECK_STR(host, "client.example.com");
  CHECK_OK(auth_cimd_url_check("https://localhost:8443/c.json", host, &err));
  CHECK_STR(host, "localhost");
  CHECK_OK(auth_cimd_url_check("https://a.example/c?v=1", host, &err));
  CHECK_OK(auth_cimd_url_check("https://a.example/..c/x.", host, &err)); /* not dot segments */
  CHECK(auth_client_id_is_url("https://a.example/c"));
  CHECK(!auth_client_id_is_url("oc_0123") && !auth_client_id_is_url("http://a.example/c"));
  static const char *const bad[] = {
      "http://localhost/c.json",          /* not https */
      "HTTPS://a.example/c.json",         /* not https as the rule spells it */
      "https://127.0.0.1/c.json",         /* IP literal */
      "https://[::1]/c.json",             /* IP literal */
      "https://2130706433/c.json",        /* a number is an address */
      "https://10.0.0.0x1/c.json",        /* so is hex */
      "https://user@a.example/c.json",    /* userinfo */
      "https://user:pw@a.example/c.json", /* userinfo */
      "https://a.example/c.json#frag",    /* fragment */
      "https://a.example/a/../c.json",    /* dot segments */
      "https://a.example/./c.json",
      "https://a.example/a/%2E%2e/c.json",
      "https://a.example/a/..",
      "https://a.example/",         /* path "/" */
      "https://a.example",          /* no path */
      "https://a.example?x=1",      /* no path */
      "https://a..example/c.json",  /* empty label */
      "https://a_b.example/c.json", /* not a DNS name */
      "https://a.example:0/c.json", /* port */
      "https://a.example:99999/c.json",
      "https://a.example:/c.json",
      "https://a.example/c d.json",      /* space */
      "https://a.example/c'.json",       /* ' */
      "https://a.example/\xc3\xa9.json", /* non-ASCII */
      "",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    husk_err_clear(&err);
    if (auth_cimd_url_check(bad[i], host, &err) != -1 || err.code != EINVAL) {
      printf("#   accepted: %s\n", bad[i]);
      unit_cur_failed = 1;
    }
  }
  CHECK_ERR(auth_cimd_url_check(NULL, host, &err), EINVAL);
  /* 512 bytes pass, 513 do not. */
  char u[600] = "https://a.example/";
  size_t n = strlen(u);
  memset(u + n, 'x', 512 - n);
  u[512] = '\0';
  CHECK_OK(auth_cimd_url_check(u, host, &err));
  u[512] = 'x';
  u[513] = '\0';
  CHECK_ERR(auth_cimd_url_check(u, host, &err), EINVAL);
}

/* ---- the document ---- */

static int parse(const char *body, struct auth_client *c, struct husk_err *err) {
  return auth_cimd_parse("https://a.example/c.json", body, strlen(body), c, err);
}

TEST(document_rules) {
  struct husk_err err;
  struct auth_client c;
#define ID "\"client_id\":\"https://a.example/c.json\""
#define RU "\"redirect_uris\":[\"" CB "\"]"
  CHECK_OK(parse("{" ID "," RU ",\"client_name\":\"App\",\"logo_uri\":7,\"client_uri\":null}", &c,
                 &err));
  CHECK(c.document && !c.confidential && c.n_redirects == 1);
  CHECK_STR(c.id, "https://a.example/c.json");
  CHECK_STR(c.host, "a.example");
  CHECK_STR(c.name, "App");
  CHECK_STR(c.auth_method, "none");
  CHECK_STR(c.redirect_uris[0], CB);
  CHECK(auth_client_redirect_ok(&c, CB) && !auth_client_redirect_ok(&c, CB "x"));
  CHECK_OK(parse("{" ID "," RU ",\"token_endpoint_auth_method\":\"none\"}", &c, &err));
  CHECK_STR(c.name, "");
  static const char *const bad[] = {
      /* client_id must be the URL, byte for byte */
      "{" RU "}",
      "{\"client_id\":\"https://a.example/c.json/\"," RU "}",
      "{\"client_id\":\"https://A.example/c.json\"," RU "}",
      "{\"client_id\":\"https://a.example/other.json\"," RU "}",
      "{\"client_id\":7," RU "}",
      /* redirect URIs: registration's rule */
      "{" ID "}",
      "{" ID ",\"redirect_uris\":[]}",
      "{" ID ",\"redirect_uris\":\"" CB "\"}",
      "{" ID ",\"redirect_uris\":[\"http://evil.example/cb\"]}",
      "{" ID ",\"redirect_uris\":[\"https://app.example/cb#f\"]}",
      "{" ID ",\"redirect_uris\":[\"https://u@app.example/cb\"]}",
      "{" ID ",\"redirect_uris\":[\"javascript:alert(1)\"]}",
      "{" ID ",\"redirect_uris\":[7]}",
      "{" ID ",\"redirect_uris\":[\"https://a/1\",\"https://a/2\",\"https://a/3\",\"https://a/4\","
      "\"https://a/5\",\"https://a/6\",\"https://a/7\",\"https://a/8\",\"https://a/9\"]}",
      /* no secret, and only none */
      "{" ID "," RU ",\"token_endpoint_auth_method\":\"client_secret_basic\"}",
      "{" ID "," RU ",\"token_endpoint_auth_method\":\"client_secret_post\"}",
      "{" ID "," RU ",\"token_endpoint_auth_method\":\"private_key_jwt\"}",
      "{" ID "," RU ",\"token_endpoint_auth_method\":\"tls_client_auth\"}",
      "{" ID "," RU ",\"token_endpoint_auth_method\":1}",
      "{" ID "," RU ",\"client_secret\":\"s3cret\"}",
      /* a name is a label */
      "{" ID "," RU ",\"client_name\":\"bad\\nname\"}",
      "{" ID "," RU ",\"client_name\":\"a\\u0000b\"}",
      "{" ID "," RU ",\"client_name\":[]}",
      /* JSON, an object, each member once */
      "<html></html>",
      "[]",
      "",
      "{" ID "," RU "," ID "}",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    husk_err_clear(&err);
    if (parse(bad[i], &c, &err) != -1 || err.code != EINVAL) {
      printf("#   accepted: %s\n", bad[i]);
      unit_cur_failed = 1;
    }
  }
  char name[200];
  memset(name, 'n', 129);
  name[129] = '\0';
  char body[600];
  snprintf(body, sizeof body, "{" ID "," RU ",\"client_name\":\"%s\"}", name);
  CHECK_ERR(parse(body, &c, &err), EINVAL);
  /* A name the consent page would show as blank or as another: Unicode's
   * default-ignorable characters (a Hangul filler alone, a soft hyphen,
   * a variation selector, a tag, a deprecated format control, the
   * combining grapheme joiner) as well as the bidi and zero-width ones. */
  static const char *const unseen[] = {"\\u3164",       "Cla\\u00adude",       "App\\ufe0f",
                                       "App\\udb40\\udc41", "App\\u206a",           "A\\u034fpp",
                                       "\\u115f\\u1160",  "App\\u180e",          "App\\uffa0",
                                       "App\\u2065",     "App\\ud834\\udd73"};
  for (size_t i = 0; i < sizeof unseen / sizeof unseen[0]; i++) {
    snprintf(body, sizeof body, "{" ID "," RU ",\"client_name\":\"%s\"}", unseen[i]);
    if (parse(body, &c, &err) != -1 || err.code != EINVAL) {
      printf("#   accepted the name %s\n", unseen[i]);
      unit_cur_failed = 1;
    }
  }
  snprintf(body, sizeof body, "{" ID "," RU ",\"client_name\":\"%s\"}", "Caf\\u00e9 \\u6f22\\u5b57 App");
  CHECK_OK(parse(body, &c, &err));
  /* A NUL in the body is not JSON. */
  static const char nul[] = "{" ID "," RU "}\0junk";
  CHECK_ERR(auth_cimd_parse("https://a.example/c.json", nul, sizeof nul - 1, &c, &err), EINVAL);
  /* The URL's rules hold for the document too. */
  CHECK_ERR(auth_cimd_parse("https://127.0.0.1/c.json", "{}", 2, &c, &err), EINVAL);
#undef ID
#undef RU
}

/* ---- fetched ---- */

static bool gate_open = true;
static int gate_asked;
static bool gate(void *ctx) {
  (void)ctx;
  gate_asked++;
  return gate_open;
}

TEST(fetch_and_cache) {
  struct husk_err err;
  struct auth_client c;
  int before = atomic_load(&srv_requests);
  CHECK_OK(auth_client_resolve(au, doc("/ok.json"), gate, NULL, &c, &err));
  CHECK(atomic_load(&srv_requests) == before + 1 && gate_asked == 1);
  CHECK(c.document && c.n_redirects == 2);
  CHECK_STR(c.id, doc("/ok.json"));
  CHECK_STR(c.host, "localhost");
  CHECK_STR(c.name, "Good App");
  /* Cached: no fetch, the gate not asked (hits are free). */
  CHECK_OK(auth_client_resolve(au, doc("/ok.json"), gate, NULL, &c, &err));
  CHECK_OK(auth_client_get(au, doc("/ok.json"), &c, &err));
  CHECK(atomic_load(&srv_requests) == before + 1 && gate_asked == 1);
  /* max-age=60 is held 5 minutes, not less. */
  clock_add(299 * 1000);
  CHECK_OK(auth_client_get(au, doc("/ok.json"), &c, &err));
  clock_add(2 * 1000);
  CHECK_ERR(auth_client_get(au, doc("/ok.json"), &c, &err), ENOENT); /* stale: no fetch */
  CHECK_OK(auth_client_resolve(au, doc("/ok.json"), gate, NULL, &c, &err));
  CHECK(atomic_load(&srv_requests) == before + 2 && gate_asked == 2);
  /* No max-age: an hour. */
  CHECK_OK(auth_client_resolve(au, doc("/noage.json"), NULL, NULL, &c, &err));
  clock_add(3599 * 1000);
  CHECK_OK(auth_client_get(au, doc("/noage.json"), &c, &err));
  clock_add(2 * 1000);
  CHECK_ERR(auth_client_get(au, doc("/noage.json"), &c, &err), ENOENT);
  /* A long max-age: 24 hours at most. */
  CHECK_OK(auth_client_resolve(au, doc("/long.json"), NULL, NULL, &c, &err));
  clock_add(86399LL * 1000);
  CHECK_OK(auth_client_get(au, doc("/long.json"), &c, &err));
  clock_add(2 * 1000);
  CHECK_ERR(auth_client_get(au, doc("/long.json"), &c, &err), ENOENT);
  /* The gate closed: a miss is refused before any fetch, a hit is not. */
  CHECK_OK(auth_client_resolve(au, doc("/again.json"), gate, NULL, &c, &err));
  gate_open = false;
  int n = atomic_load(&srv_requests);
  CHECK_ERR(auth_client_resolve(au, doc("/noage.json"), gate, NULL, &c, &err), EAGAIN);
  CHECK_OK(auth_client_resolve(au, doc("/again.json"), gate, NULL, &c, &err));
  CHECK(atomic_load(&srv_requests) == n);
  gate_open = true;
  /* A registered id is not fetched. */
  CHECK_ERR(auth_client_resolve(au, "oc_000000000000000000000000", gate, NULL, &c, &err), ENOENT);
}

TEST(fetch_refusals) {
  struct husk_err err;
  struct auth_client c;
  CHECK_ERR(auth_client_resolve(au, doc("/mismatch.json"), NULL, NULL, &c, &err), EINVAL);
  CHECK(strstr(err.msg, "client_id") != NULL);
  CHECK_ERR(auth_client_resolve(au, doc("/badredir.json"), NULL, NULL, &c, &err), EINVAL);
  CHECK(strstr(err.msg, "redirect") != NULL);
  CHECK_ERR(auth_client_resolve(au, doc("/secret.json"), NULL, NULL, &c, &err), EINVAL);
  CHECK(strstr(err.msg, "secret") != NULL);
  CHECK_ERR(auth_client_resolve(au, doc("/notjson"), NULL, NULL, &c, &err), EINVAL);
  CHECK(strstr(err.msg, "JSON") != NULL);
  CHECK_ERR(auth_client_resolve(au, doc("/big.json"), NULL, NULL, &c, &err), EPROTO);
  CHECK(strstr(err.msg, "larger") != NULL);
  CHECK_ERR(auth_client_resolve(au, doc("/redirect.json"), NULL, NULL, &c, &err), EPROTO);
  CHECK(strstr(err.msg, "redirect") != NULL);
  CHECK_ERR(auth_client_resolve(au, doc("/missing.json"), NULL, NULL, &c, &err), EPROTO);
  CHECK(strstr(err.msg, "404") != NULL);
  /* A refused document is not cached: it is fetched again. */
  int n = atomic_load(&srv_requests);
  CHECK_ERR(auth_client_resolve(au, doc("/mismatch.json"), NULL, NULL, &c, &err), EINVAL);
  CHECK(atomic_load(&srv_requests) == n + 1);
  /* The URL's rules come before any fetch. */
  char u[160];
  snprintf(u, sizeof u, "https://127.0.0.1:%u/ok.json", srv_port);
  CHECK_ERR(auth_client_resolve(au, u, NULL, NULL, &c, &err), EINVAL);
  snprintf(u, sizeof u, "http://localhost:%u/ok.json", srv_port);
  CHECK_ERR(auth_client_resolve(au, u, NULL, NULL, &c, &err), ENOENT); /* not a URL client */
  snprintf(u, sizeof u, "https://localhost:%u/", srv_port);
  CHECK_ERR(auth_client_resolve(au, u, NULL, NULL, &c, &err), EINVAL);
  CHECK(atomic_load(&srv_requests) == n + 1);
}

TEST(denied_address) {
  /* Without the operator's range, loopback is denied: never fetched. */
  struct husk_err err;
  struct auth_fetcher *f = NULL;
  struct auth_fetch_config fc = {.ca_file = ca_path};
  CHECK_OK(auth_fetcher_open(&f, &fc, &err));
  struct auth *a2 = NULL;
  struct auth_config cfg = {.st = st, .fetcher = f, .clock_ms = clock_fake};
  CHECK_OK(auth_open(&a2, &cfg, &err));
  struct auth_client c;
  int n = atomic_load(&srv_requests);
  CHECK_ERR(auth_client_resolve(a2, doc("/ok.json"), NULL, NULL, &c, &err), EPROTO);
  CHECK(strstr(err.msg, "address") != NULL);
  CHECK(atomic_load(&srv_requests) == n);
  auth_close(a2);
  /* And without a fetcher at all, such clients are not supported. */
  cfg.fetcher = NULL;
  CHECK_OK(auth_open(&a2, &cfg, &err));
  CHECK_ERR(auth_client_resolve(a2, doc("/ok.json"), NULL, NULL, &c, &err), ENOTSUP);
  auth_close(a2);
  auth_fetcher_close(f);
}

TEST(cache_bound) {
  /* At most AUTH_CIMD_MAX documents: the least recently used goes. */
  struct husk_err err;
  struct auth *a2 = NULL;
  struct auth_config cfg = {.st = st, .clock_ms = clock_fake};
  CHECK_OK(auth_open(&a2, &cfg, &err));
  struct auth_client c = {.document = true, .n_redirects = 1};
  snprintf(c.host, sizeof c.host, "a.example");
  snprintf(c.redirect_uris[0], sizeof c.redirect_uris[0], CB);
  int64_t later = fake_now + 3600 * 1000;
  for (int i = 0; i < AUTH_CIMD_MAX; i++) {
    snprintf(c.id, sizeof c.id, "https://a.example/%d.json", i);
    CHECK_OK(cimd_store(a2, &c, later, &err));
  }
  struct auth_client got;
  CHECK_OK(auth_client_get(a2, "https://a.example/0.json", &got, &err)); /* used: kept */
  snprintf(c.id, sizeof c.id, "https://a.example/new.json");
  CHECK_OK(cimd_store(a2, &c, later, &err));
  CHECK_OK(auth_client_get(a2, "https://a.example/0.json", &got, &err));
  CHECK_ERR(auth_client_get(a2, "https://a.example/1.json", &got, &err), ENOENT); /* the LRU */
  CHECK_OK(auth_client_get(a2, "https://a.example/2.json", &got, &err));
  CHECK_OK(auth_client_get(a2, "https://a.example/new.json", &got, &err));
  CHECK_STR(got.redirect_uris[0], CB);
  CHECK_STR(got.host, "a.example");
  /* Stored again: replaced, not doubled. */
  CHECK_OK(cimd_store(a2, &c, later, &err));
  CHECK_OK(auth_client_get(a2, "https://a.example/2.json", &got, &err));
  auth_close(a2);
}

TEST(codes_and_tokens) {
  struct husk_err err;
  struct state_tenant t;
  struct auth_user u;
  CHECK_OK(state_tenant_create(st, "cimd", -1, -1, &t, &err));
  CHECK_OK(auth_user_create(au, t.id, "ada", "Ada", AUTH_ROLE_MEMBER, "correct horse battery", &u,
                            &err));
  const char *id = doc("/ok.json");
  char code[AUTH_TOKEN_SIZE];
  struct auth_code_request rq = {.client_id = id,
                                 .redirect_uri = CB,
                                 .code_challenge = CHALLENGE,
                                 .resource = MCP,
                                 .scopes = AUTH_SCOPE_SANDBOX,
                                 .user = &u};
  CHECK_OK(auth_code_issue(au, &rq, code, &err));
  /* Not one of the document's redirect URIs. */
  rq.redirect_uri = "https://app.example/other";
  char code2[AUTH_TOKEN_SIZE];
  CHECK_ERR(auth_code_issue(au, &rq, code2, &err), EINVAL);
  struct auth_tokens tk;
  CHECK_ERR(
      auth_code_exchange(au, code, "oc_000000000000000000000000", CB, VERIFIER, NULL, &tk, &err),
      EACCES);
  CHECK_OK(auth_code_exchange(au, code, id, CB, VERIFIER, NULL, &tk, &err));
  struct auth_grant g;
  CHECK_OK(auth_token_check(au, tk.access, MCP, &g, &err));
  CHECK_STR(g.client_id, id);
  CHECK_STR(g.client_name, "Good App");
  struct auth_tokens tk2;
  CHECK_ERR(auth_refresh(au, tk.refresh, doc("/again.json"), 0, NULL, &tk2, &err), EACCES);
  CHECK_OK(auth_refresh(au, tk.refresh, id, 0, NULL, &tk2, &err));
  /* Another client's revocation does nothing; its own ends the family. */
  CHECK_OK(auth_revoke(au, tk2.refresh, doc("/again.json"), &err));
  CHECK_OK(auth_token_check(au, tk2.access, MCP, &g, &err));
  CHECK_OK(auth_revoke(au, tk2.refresh, id, &err));
  CHECK_ERR(auth_token_check(au, tk2.access, MCP, &g, &err), EKEYREVOKED);
  /* A second code updates the client's row, not a new one; the audit
   * takes the URL as a client id. */
  rq.redirect_uri = CB;
  CHECK_OK(auth_code_issue(au, &rq, code2, &err));
  struct state_audit rec = {0};
  snprintf(rec.action, sizeof rec.action, "oauth.token");
  snprintf(rec.outcome, sizeof rec.outcome, "ok");
  snprintf(rec.client_id, sizeof rec.client_id, "%s", id);
  CHECK_OK(state_audit_add(st, &rec, NULL, &err));
  snprintf(rec.client_id, sizeof rec.client_id, "https://a.example/with space");
  CHECK_ERR(state_audit_add(st, &rec, NULL, &err), EINVAL);
}

int main(void) {
  snprintf(dir, sizeof dir, "/tmp/husk-cimd-XXXXXX");
  if (!mkdtemp(dir))
    return 2;
  chmod(dir, 0700);
  snprintf(ca_path, sizeof ca_path, "%s/ca.pem", dir);
  srv_start();
  struct husk_err err;
  char db[128];
  snprintf(db, sizeof db, "%s/husk.db", dir);
  fake_now = state_now_ms();
  /* Loopback as the operator's allowed range, as the tests' daemon has. */
  static const char *const ranges[] = {"127.0.0.0/8", "::1/128"};
  struct auth_fetch_config fc = {.ca_file = ca_path, .allow_ranges = ranges, .n_allow_ranges = 2};
  struct auth_config cfg = {.clock_ms = clock_fake};
  if (auth_fetcher_open(&fetcher, &fc, &err) < 0 || state_open(&st, db, &err) < 0 ||
      (cfg.st = st, cfg.fetcher = fetcher, auth_open(&au, &cfg, &err) < 0)) {
    printf("# setup: %s\n", err.msg);
    return 2;
  }
  RUN(url_rules);
  RUN(document_rules);
  RUN(fetch_and_cache);
  RUN(fetch_refusals);
  RUN(denied_address);
  RUN(cache_bound);
  RUN(codes_and_tokens);
  auth_close(au);
  auth_fetcher_close(fetcher);
  state_close(st);
  SSL_CTX_free(tls);
  unit_rm_tree(dir);
  return unit_done();
}
