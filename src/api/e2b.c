/* The E2B-compatible front: which requests are its, which plane and
 * table serves them, who sends them, and the boxes' access tokens. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/e2b.h"
#include "util/fileio.h"
#include "util/id.h"

/* The roots of E2B's control-plane paths: none is one of husk's own. */
static const char *const control_roots[] = {"/sandboxes", "/v2/sandboxes", "/v3/sandboxes",
                                            "/templates", "/v2/templates", "/v3/templates",
                                            "/snapshots", "/volumes",      NULL};

bool api_e2b_wanted(struct req *r, const char *url) {
  if (!r->srv->e2b_on)
    return false;
  if (api_header(r, "E2b-Sandbox-Id"))
    return true;
  for (const char *const *p = control_roots; *p; p++) {
    size_t n = strlen(*p);
    if (!strncmp(url, *p, n) && (url[n] == '\0' || url[n] == '/'))
      return true;
  }
  return false;
}

enum MHD_Result api_e2b_route(struct req *r, const char *url, const char *method) {
  r->dialect = DIALECT_E2B;
  const char *sid = api_header(r, "E2b-Sandbox-Id");
  if (!sid) {
    const struct route_table t[] = {{e2b_control_routes, e2b_control_nroutes, DIALECT_E2B},
                                    {e2b_snapshot_routes, e2b_snapshot_nroutes, DIALECT_E2B},
                                    {NULL, 0, DIALECT_E2B}};
    return api_route_in(r, url, method, t);
  }
  /* The sandbox plane: a name that cannot be a box is a dead sandbox. */
  if (strlen(sid) >= sizeof r->e2b_box || !api_param_ok(sid))
    return api_reply_error(r, 502, "bad_gateway", "the sandbox is not running");
  snprintf(r->e2b_box, sizeof r->e2b_box, "%s", sid);
  snprintf(r->audit_box, sizeof r->audit_box, "%s", sid);
  const char *ps = api_header(r, "E2b-Sandbox-Port");
  unsigned long port = E2B_ENVD_PORT;
  if (ps) {
    char *end;
    errno = 0;
    port = strtoul(ps, &end, 10);
    if (errno || end == ps || *end || port == 0 || port > 65535)
      return api_reply_error(r, 400, "bad_request", "E2b-Sandbox-Port is not a port number");
  }
  r->e2b_port = (unsigned)port;
  if (port == E2B_ENVD_PORT) {
    const struct route_table t[] = {
        {e2b_process_routes, e2b_process_nroutes, DIALECT_CONNECT},
        {e2b_fs_routes, e2b_fs_nroutes, DIALECT_CONNECT},
        {e2b_files_routes, e2b_files_nroutes, DIALECT_E2B},
        {NULL, 0, DIALECT_E2B}};
    return api_route_in(r, url, method, t);
  }
  if (port == E2B_INTERP_PORT) {
    const struct route_table t[] = {{e2b_interp_routes, e2b_interp_nroutes, DIALECT_E2B}, {NULL, 0, DIALECT_E2B}};
    return api_route_in(r, url, method, t);
  }
  return e2b_port_begin(r);
}

/* ---- who sends the request ------------------------------------------ */

enum MHD_Result e2b_authenticate_key(struct req *r) {
  const char *h = api_header(r, "X-API-KEY");
  if (!h || !*h)
    return api_reply_error(r, 401, "unauthorized", "missing X-API-KEY header");
  size_t klen = strlen(h);
  char buf[STATE_KEY_SIZE + 1];
  if (klen >= sizeof buf)
    return api_reply_error(r, 401, "unauthorized", "invalid API key");
  memcpy(buf, h, klen + 1);
  struct state_key k;
  struct husk_err err;
  int rc = state_key_authenticate(r->srv->cfg.state, buf, &k, &err);
  explicit_bzero(buf, sizeof buf);
  if (rc < 0) {
    if (err.code == EACCES || err.code == EINVAL || err.code == ENOENT)
      return api_reply_error(r, 401, "unauthorized", "invalid API key");
    return api_reply_err(r, &err);
  }
  r->scopes = ~0u;
  snprintf(r->tenant, sizeof r->tenant, "%s", k.tenant_id);
  snprintf(r->key_id, sizeof r->key_id, "%s", k.id);
  return MHD_YES;
}

static bool box_live(const char *state) {
  return !strcmp(state, STATE_BOX_RUNNING) || !strcmp(state, STATE_BOX_PAUSED) ||
         !strcmp(state, STATE_BOX_CREATING);
}

enum MHD_Result e2b_authenticate_box(struct req *r) {
  struct state_box b;
  struct husk_err err;
  if (state_box_get(r->srv->cfg.state, NULL, r->e2b_box, &b, &err) < 0) {
    if (err.code == ENOENT)
      return api_reply_error(r, 502, "bad_gateway", "the sandbox is not running");
    return api_reply_err(r, &err);
  }
  bool live = box_live(b.state);
  char tenant[STATE_TENANT_ID_SIZE];
  snprintf(tenant, sizeof tenant, "%s", b.tenant_id);
  state_box_free(&b);
  if (!live)
    return api_reply_error(r, 502, "bad_gateway", "the sandbox is not running");
  const char *envd = api_header(r, "X-Access-Token");
  const char *traffic = api_header(r, "E2B-Traffic-Access-Token");
  char want[E2B_TOKEN_LEN + 1];
  bool ok = false;
  if (envd && e2b_box_token(r->srv, r->e2b_box, false, want) == 0)
    ok = api_key_equal(envd, strlen(envd), want, E2B_TOKEN_LEN);
  if (!ok && traffic && r->e2b_port != E2B_ENVD_PORT &&
      e2b_box_token(r->srv, r->e2b_box, true, want) == 0)
    ok = api_key_equal(traffic, strlen(traffic), want, E2B_TOKEN_LEN);
  explicit_bzero(want, sizeof want);
  if (!ok)
    return api_reply_error(r, 401, "unauthorized",
                           envd || traffic ? "invalid access token for this sandbox"
                                           : "missing X-Access-Token header");
  r->scopes = ~0u;
  snprintf(r->tenant, sizeof r->tenant, "%s", tenant);
  return MHD_YES;
}

/* ---- tokens ---------------------------------------------------------- */

int e2b_box_token(const struct api_server *s, const char *box_id, bool traffic,
                  char out[E2B_TOKEN_LEN + 1]) {
  if (!s->e2b_on)
    return -1;
  /* Domain-separated: a traffic token is never the envd one. */
  char msg[8 + STATE_BOX_ID_SIZE];
  int n = snprintf(msg, sizeof msg, "%s:%s", traffic ? "traffic" : "envd", box_id);
  if (n < 0 || (size_t)n >= sizeof msg)
    return -1;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int maclen = 0;
  if (!HMAC(EVP_sha256(), s->e2b_secret, E2B_SECRET_LEN, (const unsigned char *)msg, (size_t)n,
            mac, &maclen) ||
      maclen != E2B_TOKEN_LEN / 2)
    return -1;
  static const char hex[] = "0123456789abcdef";
  for (unsigned i = 0; i < maclen; i++) {
    out[2 * i] = hex[mac[i] >> 4];
    out[2 * i + 1] = hex[mac[i] & 15];
  }
  out[E2B_TOKEN_LEN] = '\0';
  OPENSSL_cleanse(mac, sizeof mac);
  return 0;
}

static int read_secret(int fd, unsigned char out[E2B_SECRET_LEN], const char *path,
                       struct husk_err *err) {
  struct stat st;
  if (fstat(fd, &st) < 0)
    return husk_error(err, errno, "cannot stat `%s`", path);
  if (!S_ISREG(st.st_mode) || st.st_size != E2B_SECRET_LEN)
    return husk_fail(err, EINVAL, "`%s` is not an E2B secret (%d bytes)", path, E2B_SECRET_LEN);
  if (st.st_mode & 077)
    return husk_fail(err, EPERM, "`%s` may be read by others: chmod 600 it", path);
  size_t got = 0;
  while (got < E2B_SECRET_LEN) {
    ssize_t k = read(fd, out + got, E2B_SECRET_LEN - got);
    if (k < 0 && errno == EINTR)
      continue;
    if (k <= 0)
      return husk_error(err, k < 0 ? errno : EIO, "cannot read `%s`", path);
    got += (size_t)k;
  }
  return 0;
}

int e2b_secret_load(const char *path, unsigned char out[E2B_SECRET_LEN], struct husk_err *err) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd >= 0) {
    int rc = read_secret(fd, out, path, err);
    close(fd);
    return rc;
  }
  if (errno != ENOENT)
    return husk_error(err, errno, "cannot open `%s`", path);
  /* Made under a temporary name and renamed: a crash leaves the secret
   * whole or absent, never short. */
  char tmp[4096];
  if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp)
    return husk_fail(err, ENAMETOOLONG, "`%s`: path too long", path);
  if (id_random_bytes(out, E2B_SECRET_LEN, err) < 0)
    return -1;
  (void)unlink(tmp);
  fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0)
    return husk_error(err, errno, "cannot create `%s`", tmp);
  if (write_all(fd, out, E2B_SECRET_LEN) < 0 || fsync(fd) < 0) {
    int e = errno;
    close(fd);
    (void)unlink(tmp);
    return husk_error(err, e, "cannot write `%s`", tmp);
  }
  if (close(fd) < 0 || rename(tmp, path) < 0) {
    int e = errno;
    (void)unlink(tmp);
    return husk_error(err, e, "cannot create `%s`", path);
  }
  char dir[4096];
  snprintf(dir, sizeof dir, "%s", path);
  int dfd = open(dirname(dir), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    return husk_error(err, errno, "cannot open the directory of `%s`", path);
  int rc = fsync(dfd);
  int e = errno;
  close(dfd);
  if (rc < 0)
    return husk_error(err, e, "cannot sync the directory of `%s`", path);
  return 0;
}
