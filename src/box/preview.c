/* Preview URLs of a box's ports (see husk/preview.h).
 *
 * A preview is a row (state/previews.c) holding the SHA-256 of a random
 * token; presenting the token is what opens it, so a lookup by its hash
 * is the whole check (a token no row has is ENOENT, whatever it looks
 * like).  The token has 128 bits: guessing one is out of reach, and a
 * MAC would add a key to keep without adding strength, since a lookup is
 * needed anyway to honour a revocation.
 *
 * The channel into the box: the calling thread enters the box's network
 * namespace (setns on the pidfd of the box's init, so a recycled pid is
 * never entered), makes its sockets there and comes straight back.  A
 * socket keeps the namespace it was made in, so it then connects to the
 * box's loopback from the daemon: the box gains no interface, route or
 * address, and a box without a network keeps none.  The box never sees
 * anything but the connection on its loopback.  A thread that could not
 * come back to the daemon's namespace must run nothing else: the daemon
 * aborts (fail closed).
 *
 * Exchanges in progress are listed in the manager: a preview's count of
 * them is bounded, and a revocation shuts their sockets down at once. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "box/box_internal.h"
#include "husk/preview.h"
#include "state/preview_state.h"
#include "util/cleanup.h"
#include "util/clock.h"
#include "util/id.h"

/* How long a connect to a box's loopback may take (it completes at once,
 * or is refused, unless the box is starved). */
#define PREVIEW_CONNECT_MS 2000
/* How long a revoked preview is remembered for exchanges that resolved
 * its token just before the revocation (they open within milliseconds). */
#define PREVIEW_REVOKED_KEEP_MS (60 * 1000)

struct preview_conn {
  int fd;
  char id[HUSK_PREVIEW_ID_MAX];
};

struct preview_revoked {
  struct preview_revoked *next;
  char id[HUSK_PREVIEW_ID_MAX];
  int64_t until_ms;
};

static const char *const access_names[] = {
    [HUSK_PREVIEW_KEY] = "key",
    [HUSK_PREVIEW_PUBLIC] = "public",
    [HUSK_PREVIEW_PASSWORD] = "password",
};

const char *husk_preview_access_name(enum husk_preview_access a) {
  return (unsigned)a < sizeof access_names / sizeof access_names[0] ? access_names[a] : "key";
}

int husk_preview_access_parse(const char *s, enum husk_preview_access *out) {
  for (size_t i = 0; s && i < sizeof access_names / sizeof access_names[0]; i++)
    if (!strcmp(s, access_names[i])) {
      *out = (enum husk_preview_access)i;
      return 0;
    }
  return -1;
}

/* ---- secrets ---------------------------------------------------------- */

/* 16 random bytes as 26 characters of base32 (RFC 4648's alphabet, lower
 * case: host names are case-insensitive, and browsers lower them). */
static int new_secret(char out[HUSK_PREVIEW_SECRET_MAX], struct husk_err *err) {
  static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz234567";
  unsigned char b[16];
  if (id_random_bytes(b, sizeof b, err) < 0)
    return -1;
  unsigned acc = 0, bits = 0;
  size_t n = 0;
  for (size_t i = 0; i < sizeof b; i++) {
    acc = (acc << 8) | b[i];
    bits += 8;
    while (bits >= 5) {
      out[n++] = alphabet[(acc >> (bits - 5)) & 31];
      bits -= 5;
    }
  }
  if (bits > 0)
    out[n++] = alphabet[(acc << (5 - bits)) & 31];
  out[n] = '\0';
  OPENSSL_cleanse(b, sizeof b);
  return n == HUSK_PREVIEW_TOKEN_LEN ? 0 : husk_fail(err, EIO, "token encoding");
}

static int sha256(const char *s, size_t n, unsigned char out[STATE_PREVIEW_HASH_SIZE],
                  struct husk_err *err) {
  unsigned len = 0;
  if (EVP_Digest(s, n, out, &len, EVP_sha256(), NULL) != 1 || len != STATE_PREVIEW_HASH_SIZE)
    return husk_fail(err, EIO, "SHA-256 failed");
  return 0;
}

/* A presented token in canonical form (lower case), or false if it cannot
 * be one. */
static bool token_canon(const char *t, char out[HUSK_PREVIEW_SECRET_MAX]) {
  size_t n = t ? strnlen(t, HUSK_PREVIEW_TOKEN_LEN + 1) : 0;
  if (n != HUSK_PREVIEW_TOKEN_LEN)
    return false;
  for (size_t i = 0; i < n; i++) {
    char c = t[i];
    if (c >= 'A' && c <= 'Z')
      c = (char)(c - 'A' + 'a');
    if (!((c >= 'a' && c <= 'z') || (c >= '2' && c <= '7')))
      return false;
    out[i] = c;
  }
  out[n] = '\0';
  return true;
}

/* ---- rows ------------------------------------------------------------- */

static void info_of(const struct state_preview *sp, struct husk_preview_info *out) {
  memset(out, 0, sizeof *out);
  snprintf(out->id, sizeof out->id, "%s", sp->id);
  snprintf(out->tenant_id, sizeof out->tenant_id, "%s", sp->tenant_id);
  snprintf(out->box_id, sizeof out->box_id, "%s", sp->box_id);
  out->port = (unsigned)sp->port;
  if (husk_preview_access_parse(sp->access, &out->access) < 0)
    out->access = HUSK_PREVIEW_KEY; /* the schema allows no other word */
  out->limits = (struct husk_preview_limits){
      .max_body = (uint64_t)sp->max_body,
      .max_header = (uint32_t)sp->max_header,
      .max_connections = (uint32_t)sp->max_conns,
      .idle_ms = (uint32_t)sp->idle_ms,
      .max_duration_ms = (uint32_t)sp->duration_ms,
  };
  out->created_ms = sp->created_ms;
  out->expires_ms = sp->expires_ms;
  out->revoked_ms = sp->revoked_ms;
  snprintf(out->created_by, sizeof out->created_by, "%s", sp->created_by);
}

/* One bound: 0 asks for the default; else within 1..max. */
static int limit_of(uint64_t asked, uint64_t def, uint64_t max, const char *what, uint64_t *out,
                    struct husk_err *err) {
  if (asked > max)
    return husk_fail(err, EINVAL, "a preview's %s may be at most %llu", what,
                     (unsigned long long)max);
  *out = asked ? asked : def;
  return 0;
}

int husk_preview_create(struct husk_mgr *m, const char *tenant, const char *box_id,
                        const struct husk_preview_spec *spec, struct husk_preview_info *out,
                        char token[HUSK_PREVIEW_SECRET_MAX], char password[HUSK_PREVIEW_SECRET_MAX],
                        struct husk_err *err) {
  token[0] = password[0] = '\0';
  if (!box_valid_id(box_id))
    return husk_fail(err, ENOENT, "no such sandbox");
  if (spec->port < 1 || spec->port > 65535)
    return husk_fail(err, EINVAL, "port %u is not 1..65535", spec->port);
  if ((int64_t)spec->ttl_ms < 0 || spec->ttl_ms > (uint64_t)HUSK_PREVIEW_TTL_MAX_MS)
    return husk_fail(err, EINVAL, "a preview lasts at most %lld s (7 days)",
                     HUSK_PREVIEW_TTL_MAX_MS / 1000);
  if ((unsigned)spec->access > HUSK_PREVIEW_PASSWORD)
    return husk_fail(err, EINVAL, "unknown preview access");
  uint64_t body = 0, header = 0, conns = 0, idle = 0, duration = 0;
  const struct husk_preview_limits *l = &spec->limits;
  if (limit_of(l->max_body, HUSK_PREVIEW_BODY_DEFAULT, HUSK_PREVIEW_BODY_MAX, "max_body", &body,
               err) < 0 ||
      limit_of(l->max_header, HUSK_PREVIEW_HEADER_DEFAULT, HUSK_PREVIEW_HEADER_MAX, "max_header",
               &header, err) < 0 ||
      limit_of(l->max_connections, HUSK_PREVIEW_CONNS_DEFAULT, HUSK_PREVIEW_CONNS_MAX,
               "max_connections", &conns, err) < 0 ||
      limit_of(l->idle_ms, HUSK_PREVIEW_IDLE_DEFAULT_MS, HUSK_PREVIEW_IDLE_MAX_MS,
               "idle timeout (ms)", &idle, err) < 0 ||
      limit_of(l->max_duration_ms, HUSK_PREVIEW_DURATION_DEFAULT_MS, HUSK_PREVIEW_DURATION_MAX_MS,
               "max_duration (ms)", &duration, err) < 0)
    return -1;
  struct state_preview sp = {0};
  if (box_created_by(sp.created_by, sizeof sp.created_by, spec->created_by, err) < 0 ||
      id_new("pv_", 12, sp.id, sizeof sp.id, err) < 0)
    return -1;
  snprintf(sp.tenant_id, sizeof sp.tenant_id, "%s", tenant);
  snprintf(sp.box_id, sizeof sp.box_id, "%s", box_id);
  sp.port = (int)spec->port;
  snprintf(sp.access, sizeof sp.access, "%s", husk_preview_access_name(spec->access));
  sp.max_body = (int64_t)body;
  sp.max_header = (int64_t)header;
  sp.max_conns = (int64_t)conns;
  sp.idle_ms = (int64_t)idle;
  sp.duration_ms = (int64_t)duration;
  sp.created_ms = state_now_ms();
  sp.expires_ms =
      sp.created_ms + (int64_t)(spec->ttl_ms ? spec->ttl_ms : HUSK_PREVIEW_TTL_DEFAULT_MS);
  if (new_secret(token, err) < 0 || sha256(token, strlen(token), sp.token_hash, err) < 0)
    goto fail;
  if (spec->access == HUSK_PREVIEW_PASSWORD) {
    if (new_secret(password, err) < 0 ||
        sha256(password, strlen(password), sp.password_hash, err) < 0)
      goto fail;
    sp.has_password = true;
  }
  if (state_preview_insert(m->cfg.state, &sp, HUSK_PREVIEWS_PER_BOX_MAX, err) < 0)
    goto fail;
  if (out)
    info_of(&sp, out);
  OPENSSL_cleanse(&sp, sizeof sp);
  return 0;
fail:
  OPENSSL_cleanse(token, HUSK_PREVIEW_SECRET_MAX);
  OPENSSL_cleanse(password, HUSK_PREVIEW_SECRET_MAX);
  token[0] = password[0] = '\0';
  return -1;
}

int husk_preview_get(struct husk_mgr *m, const char *tenant, const char *box_id, const char *id,
                     struct husk_preview_info *out, struct husk_err *err) {
  struct state_preview sp;
  if (state_preview_get(m->cfg.state, tenant, box_id, id, &sp, err) < 0)
    return -1;
  info_of(&sp, out);
  return 0;
}

struct list_ctx {
  int (*cb)(void *ctx, const struct husk_preview_info *p);
  void *ctx;
};

static int list_one(void *ctx, const struct state_preview *sp) {
  struct list_ctx *lc = ctx;
  struct husk_preview_info pi;
  info_of(sp, &pi);
  return lc->cb(lc->ctx, &pi);
}

int husk_preview_list(struct husk_mgr *m, const char *tenant, const char *box_id,
                      int (*cb)(void *ctx, const struct husk_preview_info *p), void *ctx,
                      struct husk_err *err) {
  struct list_ctx lc = {cb, ctx};
  return state_preview_list(m->cfg.state, tenant, box_id, list_one, &lc, err);
}

/* ---- exchanges in progress ------------------------------------------- */

/* Under preview_lock: forget revocations older than their keep. */
static void revoked_prune_locked(struct husk_mgr *m, int64_t now) {
  struct preview_revoked **pp = &m->previews_revoked;
  while (*pp) {
    if ((*pp)->until_ms <= now) {
      struct preview_revoked *dead = *pp;
      *pp = dead->next;
      free(dead);
    } else {
      pp = &(*pp)->next;
    }
  }
}

int husk_preview_revoke(struct husk_mgr *m, const char *tenant, const char *box_id, const char *id,
                        struct husk_err *err) {
  if (state_preview_revoke(m->cfg.state, tenant, box_id, id, err) < 0)
    return -1;
  int64_t now = mono_ms();
  pthread_mutex_lock(&m->preview_lock);
  revoked_prune_locked(m, now);
  /* Once per preview (a DELETE repeated adds nothing to walk). */
  struct preview_revoked *r = m->previews_revoked;
  while (r && strcmp(r->id, id) != 0)
    r = r->next;
  bool known = r != NULL;
  if (!known && (r = calloc(1, sizeof *r)) != NULL) {
    snprintf(r->id, sizeof r->id, "%s", id);
    r->next = m->previews_revoked;
    m->previews_revoked = r;
  }
  if (r)
    r->until_ms = now + PREVIEW_REVOKED_KEEP_MS;
  /* shutdown, not close: the fd stays the exchange's until it closes it,
   * and its next read or write fails at once. */
  for (size_t i = 0; i < m->npconns; i++)
    if (!strcmp(m->pconns[i].id, id))
      shutdown(m->pconns[i].fd, SHUT_RDWR);
  pthread_mutex_unlock(&m->preview_lock);
  if (!r)
    box_log(m, "preview %s: revoked, but out of memory to note it for exchanges about to open", id);
  return 0;
}

int husk_preview_resolve(struct husk_mgr *m, const char *token, struct husk_preview_info *out,
                         struct husk_err *err) {
  char canon[HUSK_PREVIEW_SECRET_MAX];
  if (!token_canon(token, canon))
    return husk_fail(err, ENOENT, "no such preview");
  unsigned char hash[STATE_PREVIEW_HASH_SIZE];
  struct state_preview sp;
  if (sha256(canon, strlen(canon), hash, err) < 0 ||
      state_preview_by_token(m->cfg.state, hash, &sp, err) < 0)
    return -1;
  info_of(&sp, out);
  if (sp.revoked_ms)
    return husk_fail(err, EKEYREVOKED, "this preview was revoked");
  if (sp.expires_ms <= state_now_ms())
    return husk_fail(err, EKEYEXPIRED, "this preview has expired");
  return 0;
}

bool husk_preview_password_ok(struct husk_mgr *m, const struct husk_preview_info *p,
                              const char *password, size_t len) {
  if (p->access != HUSK_PREVIEW_PASSWORD || !password)
    return false;
  struct husk_err err;
  struct state_preview sp;
  unsigned char hash[STATE_PREVIEW_HASH_SIZE];
  if (state_preview_get(m->cfg.state, p->tenant_id, p->box_id, p->id, &sp, &err) < 0 ||
      !sp.has_password || sha256(password, len, hash, &err) < 0)
    return false;
  return CRYPTO_memcmp(hash, sp.password_hash, sizeof hash) == 0;
}

bool husk_preview_key_ok(struct husk_mgr *m, const struct husk_preview_info *p, const char *key) {
  struct state_key k;
  struct husk_err err;
  if (!key || state_key_authenticate(m->cfg.state, key, &k, &err) < 0)
    return false;
  return !strcmp(k.tenant_id, p->tenant_id);
}

int box_netns_sockets(struct husk_mgr *m, int pidfd, int type, int fam1, int *fd1, int fam2, int *fd2,
                      struct husk_err *err) {
  *fd1 = -1;
  if (fd2)
    *fd2 = -1;
  pthread_mutex_lock(&m->preview_lock);
  if (m->host_netns < 0)
    m->host_netns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  int host = m->host_netns;
  pthread_mutex_unlock(&m->preview_lock);
  if (host < 0)
    return husk_error(err, errno, "cannot open the daemon's network namespace");
  if (setns(pidfd, CLONE_NEWNET) < 0)
    return husk_error(err, errno, "cannot enter the box's network namespace");
  *fd1 = socket(fam1, type | SOCK_CLOEXEC, 0);
  int e1 = errno;
  if (fd2 && fam2)
    *fd2 = socket(fam2, type | SOCK_CLOEXEC, 0);
  if (setns(host, CLONE_NEWNET) < 0) {
    /* This thread would go on serving requests from inside a box's
     * network: never. */
    box_log(m, "box network: cannot return to the daemon's network namespace: %s: aborting",
            strerror(errno));
    abort();
  }
  if (*fd1 < 0)
    return husk_error(err, e1, "cannot make a socket in the box");
  return 0;
}

/* A TCP socket of each family in the box's network namespace. */
static int box_sockets(struct husk_mgr *m, int pidfd, int *v4, int *v6, struct husk_err *err) {
  return box_netns_sockets(m, pidfd, SOCK_STREAM | SOCK_NONBLOCK, AF_INET, v4, AF_INET6, v6, err);
}

/* Connect a non-blocking socket, waiting at most PREVIEW_CONNECT_MS. */
static int connect_wait(int fd, const struct sockaddr *sa, socklen_t len) {
  if (connect(fd, sa, len) == 0)
    return 0;
  if (errno != EINPROGRESS)
    return -1;
  struct pollfd p = {.fd = fd, .events = POLLOUT};
  int rc;
  do
    rc = poll(&p, 1, PREVIEW_CONNECT_MS);
  while (rc < 0 && errno == EINTR);
  if (rc == 0) {
    errno = ETIMEDOUT;
    return -1;
  }
  if (rc < 0)
    return -1;
  int soerr = 0;
  socklen_t sl = sizeof soerr;
  if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
    return -1;
  if (soerr) {
    errno = soerr;
    return -1;
  }
  return 0;
}

int husk_box_port_connect(struct husk_mgr *m, const char *tenant, const char *box_id, unsigned port,
                          struct husk_err *err) {
  if (port < 1 || port > 65535)
    return husk_fail(err, EINVAL, "port %u is not 1..65535", port);
  /* A live box (paused ones too): ENOENT for none, EBUSY for one that
   * ended, which a preview tells apart from a paused one (it may resume). */
  struct live_box *b = box_live(m, tenant, box_id, err);
  if (!b) {
    /* Its row says which: paused to disk (EBUSY kept), or ended. */
    struct state_box sb;
    struct husk_err e2;
    bool paused = false;
    if (err->code == EBUSY && state_box_get(m->cfg.state, tenant, box_id, &sb, &e2) == 0) {
      paused = !strcmp(sb.state, STATE_BOX_PAUSED);
      state_box_free(&sb);
    }
    if (err->code == EBUSY && !paused)
      err->code = ESRCH;
    return -1;
  }
  pthread_mutex_lock(&m->lock);
  bool paused = b->paused;
  pthread_mutex_unlock(&m->lock);
  if (paused) {
    lb_unref(m, b);
    return husk_fail(err, EBUSY, "sandbox %s is paused: resume it first", box_id);
  }
  int v4 = -1, v6 = -1;
  int rc = box_sockets(m, b->j.pidfd, &v4, &v6, err);
  lb_unref(m, b);
  if (rc < 0)
    return -1;
  /* 127.0.0.1 first, then ::1 for a server that listens on IPv6 only. */
  struct sockaddr_in a4 = {.sin_family = AF_INET,
                           .sin_port = htons((uint16_t)port),
                           .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  if (connect_wait(v4, (const struct sockaddr *)&a4, sizeof a4) == 0) {
    close_quiet(v6);
    return v4;
  }
  int e = errno;
  close(v4);
  if (v6 >= 0) {
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6,
                              .sin6_port = htons((uint16_t)port),
                              .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    if (connect_wait(v6, (const struct sockaddr *)&a6, sizeof a6) == 0)
      return v6;
    close(v6);
  }
  if (e == ECONNREFUSED)
    return husk_fail(err, ECONNREFUSED, "nothing listens on port %u in sandbox %s", port, box_id);
  return husk_error(err, e, "cannot connect to port %u in sandbox %s", port, box_id);
}

int husk_preview_open(struct husk_mgr *m, const struct husk_preview_info *p, struct husk_err *err) {
  /* Counted first, so that max_connections holds while connecting. */
  pthread_mutex_lock(&m->preview_lock);
  revoked_prune_locked(m, mono_ms());
  for (struct preview_revoked *r = m->previews_revoked; r; r = r->next)
    if (!strcmp(r->id, p->id)) {
      pthread_mutex_unlock(&m->preview_lock);
      return husk_fail(err, EKEYREVOKED, "this preview was revoked");
    }
  unsigned n = 0;
  for (size_t i = 0; i < m->npconns; i++)
    n += !strcmp(m->pconns[i].id, p->id);
  if (n >= p->limits.max_connections) {
    pthread_mutex_unlock(&m->preview_lock);
    return husk_fail(err, EAGAIN, "this preview has %u connections in progress, its most", n);
  }
  if (m->npconns == m->cappconns) {
    size_t cap = m->cappconns ? 2 * m->cappconns : 16;
    struct preview_conn *pc = realloc(m->pconns, cap * sizeof *pc);
    if (!pc) {
      pthread_mutex_unlock(&m->preview_lock);
      return husk_fail(err, ENOMEM, "out of memory");
    }
    m->pconns = pc;
    m->cappconns = cap;
  }
  /* A place held by fd -1 while connecting. */
  size_t slot = m->npconns++;
  m->pconns[slot].fd = -1;
  snprintf(m->pconns[slot].id, sizeof m->pconns[slot].id, "%s", p->id);
  pthread_mutex_unlock(&m->preview_lock);

  int fd = husk_box_port_connect(m, p->tenant_id, p->box_id, p->port, err);

  pthread_mutex_lock(&m->preview_lock);
  /* The slot may have moved (a close swaps the last into its place):
   * find this exchange's placeholder again. */
  size_t i = 0;
  for (; i < m->npconns; i++)
    if (m->pconns[i].fd == -1 && !strcmp(m->pconns[i].id, p->id))
      break;
  bool revoked = false;
  for (struct preview_revoked *r = m->previews_revoked; r; r = r->next)
    revoked |= !strcmp(r->id, p->id);
  if (fd < 0 || revoked) {
    m->pconns[i] = m->pconns[--m->npconns];
  } else {
    m->pconns[i].fd = fd;
  }
  pthread_mutex_unlock(&m->preview_lock);
  if (fd >= 0 && revoked) {
    close(fd);
    return husk_fail(err, EKEYREVOKED, "this preview was revoked");
  }
  return fd;
}

void husk_preview_close(struct husk_mgr *m, int fd) {
  if (fd < 0)
    return;
  pthread_mutex_lock(&m->preview_lock);
  for (size_t i = 0; i < m->npconns; i++)
    if (m->pconns[i].fd == fd) {
      m->pconns[i] = m->pconns[--m->npconns];
      break;
    }
  /* Closed under the lock: a revocation never shuts down a number that
   * was reused meanwhile. */
  close(fd);
  pthread_mutex_unlock(&m->preview_lock);
}

void box_previews_free(struct husk_mgr *m) {
  free(m->pconns);
  m->pconns = NULL;
  m->npconns = m->cappconns = 0;
  while (m->previews_revoked) {
    struct preview_revoked *r = m->previews_revoked;
    m->previews_revoked = r->next;
    free(r);
  }
  close_quiet(m->host_netns);
  m->host_netns = -1;
}

/* ---- URLs ---------------------------------------------------------------- */

/* "[scheme://]domain[:port]" */
int husk_preview_domain_parse(const char *in, struct husk_preview_domain *d, struct husk_err *err) {
  memset(d, 0, sizeof *d);
  if (!in || !*in)
    return 0;
  const char *s = in;
  snprintf(d->scheme, sizeof d->scheme, "http");
  if (!strncasecmp(s, "https://", 8)) {
    snprintf(d->scheme, sizeof d->scheme, "https");
    s += 8;
  } else if (!strncasecmp(s, "http://", 7)) {
    s += 7;
  }
  const char *colon = strchr(s, ':');
  size_t n = colon ? (size_t)(colon - s) : strlen(s);
  while (n > 0 && s[n - 1] == '/' && !colon)
    n--;
  if (n == 0 || n >= sizeof d->name || s[0] == '.' || s[n - 1] == '.')
    return husk_fail(err, EINVAL, "--preview-domain must be [http(s)://]domain[:port]");
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z')
      c = (char)(c - 'A' + 'a');
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.'))
      return husk_fail(err, EINVAL, "--preview-domain: `%.64s` is not a domain name", in);
    d->name[i] = c;
  }
  if (colon) {
    const char *ps = colon + 1;
    size_t pl = strlen(ps);
    while (pl > 0 && ps[pl - 1] == '/')
      pl--;
    unsigned long port = 0;
    for (size_t i = 0; i < pl; i++) {
      if (ps[i] < '0' || ps[i] > '9')
        return husk_fail(err, EINVAL, "--preview-domain: bad port");
      port = port * 10 + (unsigned long)(ps[i] - '0');
      if (port > 65535)
        return husk_fail(err, EINVAL, "--preview-domain: bad port");
    }
    if (pl == 0 || port == 0)
      return husk_fail(err, EINVAL, "--preview-domain: bad port");
    snprintf(d->port_suffix, sizeof d->port_suffix, ":%lu", port);
  }
  return 0;
}

void husk_preview_box_label(const char *box_id, char *out, size_t size) {
  snprintf(out, size, "%s", box_id);
  for (char *c = out; *c; c++)
    if (*c == '_')
      *c = '-';
    else if (*c >= 'A' && *c <= 'Z')
      *c = (char)(*c - 'A' + 'a');
}

void husk_preview_urls(const struct husk_preview_info *p, const char *token, const char *base,
                       const struct husk_preview_domain *d, char *url, size_t url_size,
                       char *host_url, size_t host_size) {
  size_t bl = base ? strlen(base) : 0;
  while (bl > 0 && base[bl - 1] == '/')
    bl--;
  snprintf(url, url_size, "%.*s/p/%s/", (int)bl, base ? base : "", token);
  if (host_size)
    host_url[0] = '\0';
  if (d && d->name[0] && host_size) {
    char label[HUSK_BOX_ID_MAX];
    husk_preview_box_label(p->box_id, label, sizeof label);
    snprintf(host_url, host_size, "%s://%u-%s-%s.%s%s/", d->scheme, p->port, label, token, d->name,
             d->port_suffix);
  }
}

/* ---- the access log ---------------------------------------------------- */

/* How long an access record may wait for a sync of its own: records are
 * committed at once (a crash of the daemon keeps them), and synced with
 * the next change anything syncs, or by the first record this long after
 * the last sync a record made. */
#define PREVIEW_SYNC_EVERY_MS 1000

int husk_preview_record(struct husk_mgr *m, const struct husk_preview_info *p,
                        const struct husk_preview_access_rec *rec, int64_t *seq_out,
                        struct husk_err *err) {
  struct state_preview_access a = {0};
  a.ts_ms = rec->ts_ms;
  snprintf(a.remote, sizeof a.remote, "%s", rec->remote);
  snprintf(a.method, sizeof a.method, "%s", rec->method);
  snprintf(a.path, sizeof a.path, "%s", rec->path);
  a.status = rec->status;
  a.bytes_in = (int64_t)rec->bytes_in;
  a.bytes_out = (int64_t)rec->bytes_out;
  a.duration_ms = rec->duration_ms;
  /* A sync per request would double a small request's time through a
   * preview (an fdatasync is ~0.2-0.4 ms on common disks): the record is
   * committed now and synced in a batch. */
  state_defer_begin(m->cfg.state);
  if (state_preview_access_add(m->cfg.state, p->id, &a, HUSK_PREVIEW_LOG_MAX, seq_out, err) < 0) {
    state_defer_forget(m->cfg.state);
    return -1;
  }
  int64_t now = mono_ms(), last = atomic_load(&m->preview_synced_ms);
  if (now - last >= PREVIEW_SYNC_EVERY_MS &&
      atomic_compare_exchange_strong(&m->preview_synced_ms, &last, now))
    return state_defer_end(m->cfg.state, err);
  state_defer_forget(m->cfg.state);
  return 0;
}

void husk_preview_record_end(struct husk_mgr *m, int64_t seq, uint64_t bytes_in, uint64_t bytes_out,
                             int64_t duration_ms) {
  if (seq <= 0)
    return;
  /* Counts, not an acknowledgement: committed without a sync of its own
   * (the next one carries it), so that a keep-alive connection's next
   * request does not wait for the disk. */
  struct husk_err err;
  state_defer_begin(m->cfg.state);
  if (state_preview_access_end(m->cfg.state, seq, (int64_t)bytes_in, (int64_t)bytes_out,
                               duration_ms, &err) < 0)
    box_log(m, "preview access %lld: cannot record its counts: %s", (long long)seq, err.msg);
  state_defer_forget(m->cfg.state);
}

struct access_ctx {
  int (*cb)(void *ctx, const struct husk_preview_access_rec *a);
  void *ctx;
};

static int access_one(void *ctx, const struct state_preview_access *a) {
  struct access_ctx *ac = ctx;
  struct husk_preview_access_rec r = {0};
  r.seq = a->seq;
  r.ts_ms = a->ts_ms;
  snprintf(r.remote, sizeof r.remote, "%s", a->remote);
  snprintf(r.method, sizeof r.method, "%s", a->method);
  snprintf(r.path, sizeof r.path, "%s", a->path);
  r.status = a->status;
  r.bytes_in = (uint64_t)a->bytes_in;
  r.bytes_out = (uint64_t)a->bytes_out;
  r.duration_ms = a->duration_ms;
  return ac->cb(ac->ctx, &r);
}

int husk_preview_access_list(struct husk_mgr *m, const char *tenant, const char *box_id,
                             const char *id, int64_t after_seq, int limit,
                             int (*cb)(void *ctx, const struct husk_preview_access_rec *a),
                             void *ctx, struct husk_err *err) {
  if (limit <= 0 || limit > HUSK_PREVIEW_LOG_MAX)
    limit = HUSK_PREVIEW_LOG_MAX;
  struct access_ctx ac = {cb, ctx};
  return state_preview_access_list(m->cfg.state, tenant, box_id, id, after_seq, limit, access_one,
                                   &ac, err);
}
