/* `husk serve`: open the state, adopt the boxes, serve the HTTP API until
 * SIGTERM/SIGINT, then stop gracefully (boxes keep running and are
 * re-adopted by the next start). */
#define _GNU_SOURCE
#include "cli/serve.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"
#include "auth/auth.h"
#include "auth/fetch.h"
#include "auth/oidc.h"
#include "box/box.h"
#include "egress/dns.h"
#include "egress/host.h"
#include "front/daemon.h"
#include "front/listen.h"
#include "husk/husk.h"
#include "jail/limits.h"
#include "jail/privs.h"
#include "mcp/mcp.h"
#include "mcp/storage.h" /* storage plane: the MCP tools over the store */
#include "s3/s3.h"
#include "state/state.h"
#include "storage/remote.h"
#include "storage/store.h"
#include "template/template.h"
#include "util/base64.h"
#include "util/cleanup.h"
#include "util/fileio.h"
#include "util/id.h"
#include "util/parse.h"

#define DEFAULT_LISTEN "127.0.0.1:7070"
#define DEFAULT_S3_LISTEN "127.0.0.1:7071"
/* The quotas of a tenant that sets none.  Boxes: a quarter of the host's
 * uid slots, so that one tenant leaves three quarters to the others while
 * a single user still has a thousand.  Memory (SERVE_TENANT_MEMORY_HOST):
 * the host's RAM, so that one tenant's boxes, filled up, cannot by
 * themselves promise more memory than there is (docs/limits.md). */
#define SERVE_TENANT_BOXES_DEFAULT ((int64_t)(HUSK_UID_SLOTS / 4))
#define SERVE_TENANT_MEMORY_HOST INT64_MIN
#define ADMIN_KEY_MIN 16
#define ADMIN_KEY_MAX 256

static void usage(FILE *f) {
  fprintf(f,
          "usage: husk serve [OPTIONS]\n"
          "\n"
          "Serve the HTTP API (docs/api.md) for long-lived boxes.\n"
          "\n"
          "  --listen ADDR:PORT      address to listen on, IPv4 or [IPv6]; port 0 picks a free one\n"
          "                          [" DEFAULT_LISTEN "]\n"
          "  --data DIR              state and box runtime directory [./var/husk in the source\n"
          "                          tree, else /var/lib/husk]\n"
          "  --max-connections N     concurrent connections [256]\n"
          "  --max-connections-per-ip N  concurrent connections from one address, so that one\n"
          "                          client cannot hold them all; 0: no limit (behind a\n"
          "                          reverse proxy on this host, every client is its address) [64]\n"
          "  --tenant-max-requests N requests one tenant may have in progress at once (its\n"
          "                          max_requests overrides), on the API and on S3 (counted\n"
          "                          apart); past it 429 (S3: 503 SlowDown) [max-connections/2]\n"
          "  --tenant-max-execs N    of those, requests running or streaming a command (exec,\n"
          "                          context execute, process output/stdin, MCP)\n"
          "                          [max-connections/4]\n"
          "  --request-timeout SECONDS  a request (line, headers, body but for uploads) must\n"
          "                          arrive within this long of the connection's start or\n"
          "                          of the previous reply, else the connection is closed\n"
          "                          (API and S3; S3 object bodies are uploads) [60]\n"
          "  --idle-timeout SECONDS  close idle connections after this long [120]\n"
          "  --grace SECONDS         on SIGTERM, how long requests in flight may finish [10]\n"
          "  --default-ttl SECONDS   lifetime of a box created without \"timeout\" [300]\n"
          "  --max-ttl SECONDS       longest lifetime a box may ask for [604800]\n"
          "  --max-paused SECONDS    how long a box may stay paused before it ends\n"
          "                          (\"paused_too_long\") [86400]\n"
          "  --pool N[:SHAPE]        keep N boxes ready; a create whose template and limits\n"
          "                          are the pool's claims one.  SHAPE: memory=SIZE,cpus=N,\n"
          "                          pids=N,disk=SIZE,template=NAME (unset: the defaults;\n"
          "                          NAME: a shared template, see husk template).\n"
          "                          Repeatable, one per shape [none]\n"
          "  --template-quota SIZE   bytes of unpacked template layers each tenant may keep\n"
          "                          [no limit]\n"
          "  --tenant-max-boxes N|none  live boxes of a tenant whose max_boxes is unset\n"
          "                          [1024, a quarter of the host's box slots]\n"
          "  --tenant-max-memory SIZE|none  memory limits of those boxes summed, for a tenant\n"
          "                          whose max_memory is unset [the host's RAM]\n"
          "  --tenant-max-procs N    background processes one tenant may have running [512]\n"
          "  --tenant-max-snapshots N\n"
          "                          snapshots one tenant may keep [1000]\n"
          "  --quiet                 no log line per request\n"
          "  --reply-max SIZE        box data one reply holds: stdout and stderr of a sync\n"
          "                          exec (each; the rest is counted and flagged truncated),\n"
          "                          the entries of a files listing page [1M]\n"
          "  --reply-budget SIZE     box data all requests in flight may hold for their replies\n"
          "                          (sync execs, listings, streams); past it, 503 [256M]\n"
          "  --tenant-reply-budget SIZE  of it, what one tenant's requests may hold\n"
          "                          together [half of --reply-budget]\n"
          "  --mcp-wait SECONDS      longest an MCP tool call waits before answering with a\n"
          "                          job_id [45]\n"
          "  --mcp-prompts DIR       serve the Markdown files of DIR as MCP prompts\n"
          "  --mcp-resources DIR     serve the files of DIR as read-only MCP resources\n"
          "                          (husk://docs/...)\n"
          "  --mcp-allow-origin LIST Origins allowed at /mcp besides loopback and the\n"
          "                          server's own (comma-separated, e.g. https://claude.ai)\n"
          "  --egress-resolver IP[:PORT]  DNS server the egress proxy asks [first nameserver\n"
          "                          of /etc/resolv.conf]\n"
          "  --egress-allow-range CIDR  exempt this range from the always-on deny set (private,\n"
          "                          loopback...): for test networks only; repeatable\n"
          "  --egress-ca-file FILE   extra trust roots for TLS the proxy re-originates\n"
          "  --egress-max-conns N    concurrent proxied connections per box [64]\n"
          "  --egress-tenant-max-conns N  the same per tenant, over all its boxes [256]\n"
          "  --egress-total-max-conns N  the same for the whole daemon [1024]\n"
          "  --egress-idle-timeout SECONDS  idle proxied connections are closed [60]\n"
          "  --audit-retention DAYS  audit records older than this are removed; 0: keep\n"
          "                          them all [30]\n"
          "\n"
          "Users and OAuth 2.1 sign-in (docs/oauth.md):\n"
          "  --api-url URL           the public base of this API as clients reach it, the\n"
          "                          OAuth issuer: http(s)://host[:port] (set it behind a\n"
          "                          TLS proxy) [http://<the Host of the request>]\n"
          "  --oauth-access-ttl SECONDS  life of an OAuth access token [3600]\n"
          "  --trusted-proxy ADDR    a reverse proxy (an IP address; repeatable, up to 16)\n"
          "                          whose X-Forwarded-For names the client for the\n"
          "                          sign-in's per-address limits [none]\n"
          "  --oidc-ca-file FILE     PEM certificates trusted, beside the system's, by the\n"
          "                          daemon's sign-in fetches (a single sign-on provider or\n"
          "                          a client's metadata document on a private CA)\n"
          "  --oauth-fetch-allow-range CIDR  exempt this range from the deny set for the\n"
          "                          daemon's sign-in fetches (a provider on a private\n"
          "                          network, tests); repeatable, up to 16 [none]\n"
          "\n"
          "Preview URLs of box ports (docs/previews.md):\n"
          "  --preview-url URL       base of path-form preview URLs (/p/<token>/), as people\n"
          "                          reach this listener [http://<the Host of the request>]\n"
          "  --preview-domain [SCHEME://]DOMAIN[:PORT]\n"
          "                          wildcard DNS name of host-form previews\n"
          "                          (<port>-<box>-<token>.DOMAIN) [none]\n"
          "\n"
          "Storage (docs/storage.md):\n"
          "  --s3-listen ADDR:PORT   the S3-compatible listener, or \"off\" [" DEFAULT_S3_LISTEN "]\n"
          "  --public-url URL        base of presigned links, scheme://host[:port]\n"
          "                          [http://<s3-listen address>]\n"
          "  --s3-region REGION      the region clients sign for [us-east-1]\n"
          "  --storage-quota SIZE    bytes each tenant may store (objects and parts) [no limit]\n"
          "  --data-reserve SIZE|N%%  free space on the data directory's disk that no object\n"
          "                          write, template import or new volume may use\n"
          "                          [1G, at most 5%%]\n"
          "  --store-endpoint URL    use an external S3-compatible store for links and box\n"
          "                          transfers (e.g. https://ACCOUNT.r2.cloudflarestorage.com);\n"
          "                          keys from HUSK_STORE_ACCESS_KEY_ID and\n"
          "                          HUSK_STORE_SECRET_ACCESS_KEY\n"
          "  --store-bucket NAME     the external store's bucket\n"
          "  --store-region REGION   the external store's region (\"auto\" for R2) [us-east-1]\n"
          "  --store-part-size SIZE  multipart part size for the external store [8M]\n"
          "\n"
          "The admin key is HUSK_ADMIN_KEY if set, else DIR/admin.key (generated on first start).\n");
}

/* A step of the start that failed: say why; returns -1. */
static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "husk: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  return -1;
}

static void log_line(void *ctx, const char *line) {
  (void)ctx;
  char buf[2048];
  snprintf(buf, sizeof buf, "%s", line);
  husk_sanitize_line(buf);
  fprintf(stderr, "husk: %s\n", buf);
}

static bool key_text_ok(const char *k, size_t n) {
  if (n < ADMIN_KEY_MIN || n > ADMIN_KEY_MAX)
    return false;
  for (size_t i = 0; i < n; i++)
    if (k[i] <= ' ' || k[i] > '~')
      return false;
  return true;
}

static int read_key(int dirfd, const char *path, char *key, size_t size, struct husk_err *err) {
  cleanup_close int fd = openat(dirfd, "admin.key", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0)
    return husk_error(err, errno, "cannot open `%s`", path);
  struct stat st;
  if (fstat(fd, &st) < 0)
    return husk_error(err, errno, "`%s`", path);
  if (!S_ISREG(st.st_mode) || st.st_uid != geteuid())
    return husk_fail(err, EPERM, "`%s` is not a regular file of ours", path);
  if (st.st_mode & 077)
    return husk_fail(err, EPERM, "`%s` is readable by others (mode %04o): the key may have leaked; "
                     "remove the file to generate a new key", path, (unsigned)(st.st_mode & 07777));
  ssize_t n = read(fd, key, size - 1);
  if (n < 0)
    return husk_error(err, errno, "cannot read `%s`", path);
  key[n] = '\0';
  while (n > 0 && (key[n - 1] == '\n' || key[n - 1] == '\r' || key[n - 1] == ' '))
    key[--n] = '\0';
  if (!key_text_ok(key, (size_t)n))
    return husk_fail(err, EINVAL, "`%s` does not hold a valid key (%d..%d printable characters)",
                     path, ADMIN_KEY_MIN, ADMIN_KEY_MAX);
  return 0;
}

/* The admin key: DIR/admin.key, created (0600) with a fresh random key if
 * missing.  link() publishes it, so two daemons starting at once agree. */
static int admin_key_file(const char *dir, char *key, size_t size, char *path, size_t psize,
                          struct husk_err *err) {
  snprintf(path, psize, "%s/admin.key", dir);
  cleanup_close int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    return husk_error(err, errno, "cannot open `%s`", dir);
  if (faccessat(dfd, "admin.key", F_OK, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
    return read_key(dfd, path, key, size, err);
  /* 32 characters of base64url, 6 random bits each: 192 bits. */
  unsigned char raw[24];
  if (id_random_bytes(raw, sizeof raw, err) < 0)
    return -1;
  int n = snprintf(key, size, "hk_admin_");
  if (n < 0 || (size_t)n + b64_encoded_len(sizeof raw, B64_URL) >= size)
    return husk_fail(err, EINVAL, "no room for the admin key");
  b64_encode_to(key + n, raw, sizeof raw, B64_URL);
  char tmp[64];
  snprintf(tmp, sizeof tmp, ".admin.key.%d", (int)getpid());
  unlinkat(dfd, tmp, 0);
  cleanup_close int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0)
    return husk_error(err, errno, "cannot create `%s`", path);
  char line[ADMIN_KEY_MAX + 2];
  int len = snprintf(line, sizeof line, "%s\n", key);
  if (write_all(fd, line, (size_t)len) < 0 || fsync(fd) < 0) {
    int e = errno;
    unlinkat(dfd, tmp, 0);
    return husk_error(err, e, "cannot write `%s`", path);
  }
  int rc = linkat(dfd, tmp, dfd, "admin.key", 0);
  int e = errno;
  unlinkat(dfd, tmp, 0);
  if (rc < 0) {
    if (e == EEXIST)
      return read_key(dfd, path, key, size, err); /* another start won */
    return husk_error(err, e, "cannot create `%s`", path);
  }
  fsync(dfd);
  return 0;
}

/* --pool N[:SHAPE]: N ready boxes of the default shape, or of SHAPE, a
 * comma-separated list of memory=SIZE, cpus=N, pids=N, disk=SIZE,
 * template=NAME (the fields of a create request; the others keep their
 * defaults).  The template's name is kept in tname.  The core checks the
 * ranges, that the template exists and is shared, and that no two pools
 * have one shape. */
static int parse_pool(const char *arg, struct box_pool_spec *out, char tname[64],
                      struct husk_err *err) {
  *out = (struct box_pool_spec){0};
  const char *colon = strchr(arg, ':');
  cleanup_free char *count = strndup(arg, colon ? (size_t)(colon - arg) : strlen(arg));
  if (!count)
    return husk_fail(err, ENOMEM, "out of memory");
  uint64_t n;
  if (parse_u64_range(count, 0, BOX_POOL_MAX_BOXES, &n, err) < 0)
    return husk_error_wrap(err, "the pool's size `%s`", count);
  out->size = (unsigned)n;
  if (!colon)
    return 0;
  if (!colon[1])
    return husk_fail(err, EINVAL, "empty shape after `:` (give memory=, cpus=, pids= or disk=)");
  cleanup_free char *shape = strdup(colon + 1);
  if (!shape)
    return husk_fail(err, ENOMEM, "out of memory");
  unsigned seen = 0;
  char *save = NULL;
  for (char *kv = strtok_r(shape, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(kv, '=');
    if (!eq)
      return husk_fail(err, EINVAL, "`%s` is not KEY=VALUE", kv);
    *eq = '\0';
    const char *v = eq + 1;
    static const char *const keys[] = {"memory", "cpus", "pids", "disk", "template"};
    unsigned k = 0;
    while (k < 5 && strcmp(kv, keys[k]))
      k++;
    if (k == 5)
      return husk_fail(err, EINVAL,
                       "unknown shape key `%s` (memory, cpus, pids, disk, template)", kv);
    if (seen & (1u << k))
      return husk_fail(err, EINVAL, "`%s` given twice", kv);
    seen |= 1u << k;
    if (k == 4) {
      if (!*v || strlen(v) >= 64)
        return husk_fail(err, EINVAL, "template: a template's name");
      memcpy(tname, v, strlen(v) + 1);
      out->template_name = tname;
      continue;
    }
    int rc = k == 0   ? parse_size(v, &out->shape.memory_bytes, err)
             : k == 1 ? parse_milli(v, HUSK_MIN_CPU_MILLI, HUSK_MAX_CPU_MILLI, &out->shape.cpu_milli, err)
             : k == 2 ? parse_u64_range(v, HUSK_MIN_PIDS, HUSK_MAX_PIDS, &out->shape.pids, err)
                      : parse_size(v, &out->shape.disk_bytes, err);
    if (rc < 0)
      return husk_error_wrap(err, "%s", kv);
  }
  if (!seen)
    return husk_fail(err, EINVAL, "empty shape after `:`");
  return 0;
}

/* ---- 1. options ---------------------------------------------------------------------- */

/* What the command line says, with the defaults of what it does not. */
struct serve_opts {
  const char *listen, *data;
  uint64_t maxconn, perip;
  uint64_t tenant_reqs, tenant_execs; /* 0: shares of --max-connections */
  int64_t tenant_boxes, tenant_memory; /* unset quotas of a tenant; STATE_UNLIMITED: none */
  uint64_t tenant_procs, tenant_snapshots;
  uint64_t req_timeout_ms, idle_ms, grace_ms, dttl_ms, mttl_ms, max_paused_ms;
  struct box_pool_spec pools[BOX_POOL_MAX_SHAPES];
  char pool_templates[BOX_POOL_MAX_SHAPES][64];
  size_t npools;
  uint64_t template_quota;
  bool quiet;
  uint64_t mcp_wait_ms;
  const char *mcp_origins;
  const char *mcp_prompts, *mcp_resources;
  uint64_t reply_max, reply_budget, tenant_reply_budget;
  /* network mode egress (docs/egress.md) */
  const char *eg_resolver, *eg_ca;
  const char *eg_allow[16];
  size_t eg_nallow;
  uint64_t eg_maxconn, eg_tenant_conns, eg_total_conns, eg_idle_ms, audit_days;
  /* storage (docs/storage.md); s3_listen "off": no S3 listener */
  const char *s3_listen, *public_url, *s3_region;
  const char *preview_url, *preview_domain;
  /* users and OAuth (docs/oauth.md): the issuer, the access tokens' life */
  const char *api_url;
  struct in6_addr trusted_proxies[API_TRUSTED_PROXIES_MAX];
  size_t n_trusted_proxies;
  uint64_t oauth_access_ttl;
  /* single sign-on's fetches (docs/oauth.md, "Fetches to the provider") */
  const char *oidc_ca_file;
  const char *oauth_fetch_allow[AUTH_FETCH_RANGES_MAX];
  size_t n_oauth_fetch_allow;
  bool s3_listen_given;
  const char *store_endpoint, *store_bucket, *store_region, *data_reserve;
  uint64_t store_part, storage_quota;
};

/* The exit status of a command line that is refused. */
#define SERVE_USAGE 2

/* An option whose value is refused: say which and why; returns -1. */
static int bad_option(const char *opt, const char *why) {
  fprintf(stderr, "husk serve: %s: %s\n", opt, why);
  return -1;
}

/* --trusted-proxy ADDR: one more reverse proxy whose X-Forwarded-For
 * names the client. */
static int opt_trusted_proxy(struct serve_opts *o, const char *arg) {
  if (o->n_trusted_proxies == API_TRUSTED_PROXIES_MAX)
    return bad_option("--trusted-proxy", "at most 16 proxies");
  if (!api_ip_parse(arg, strlen(arg), &o->trusted_proxies[o->n_trusted_proxies]))
    return bad_option("--trusted-proxy", "not an IP address (a proxy is named by its address)");
  o->n_trusted_proxies++;
  return 0;
}

static int opt_u64(const char *opt, const char *arg, uint64_t min, uint64_t max, uint64_t *out) {
  struct husk_err err;
  return parse_u64_range(arg, min, max, out, &err) < 0 ? bad_option(opt, err.msg) : 0;
}

/* Seconds, with a fraction, as milliseconds. */
static int opt_milli(const char *opt, const char *arg, uint64_t min, uint64_t max, uint64_t *ms) {
  struct husk_err err;
  return parse_milli(arg, min, max, ms, &err) < 0 ? bad_option(opt, err.msg) : 0;
}

/* A duration: at least a millisecond, at most the longest timeout. */
static int opt_seconds(const char *opt, const char *arg, uint64_t *ms) {
  return opt_milli(opt, arg, 1, HUSK_MAX_TIMEOUT_MS, ms);
}

static int opt_size(const char *opt, const char *arg, uint64_t *out) {
  struct husk_err err;
  return parse_size(arg, out, &err) < 0 ? bad_option(opt, err.msg) : 0;
}

/* A tenant quota's default: a count or a size, or "none" (unlimited). */
static int opt_quota(const char *opt, const char *arg, bool size, int64_t *out) {
  if (!strcmp(arg, "none")) {
    *out = STATE_UNLIMITED;
    return 0;
  }
  uint64_t v;
  if ((size ? opt_size(opt, arg, &v) : opt_u64(opt, arg, 0, INT64_MAX, &v)) < 0)
    return -1;
  if (v > INT64_MAX)
    return bad_option(opt, "too large");
  *out = (int64_t)v;
  return 0;
}

/* The egress resolver and the ranges exempt from the deny set are checked
 * here too, so that a bad one is reported with the option that gave it
 * (the core checks them again when the manager opens). */
static int opt_resolver(struct serve_opts *o, const char *arg) {
  struct husk_err err;
  struct sockaddr_storage ss;
  if (egress_dns_parse_server(arg, &ss, &err) < 0)
    return bad_option("--egress-resolver", err.msg);
  o->eg_resolver = arg;
  return 0;
}

static int opt_allow_range(struct serve_opts *o, const char *arg) {
  if (o->eg_nallow == sizeof o->eg_allow / sizeof o->eg_allow[0]) {
    fprintf(stderr, "husk serve: at most %zu --egress-allow-range options\n",
            sizeof o->eg_allow / sizeof o->eg_allow[0]);
    return -1;
  }
  struct husk_err err;
  struct egress_cidr c;
  if (egress_cidr_parse(arg, &c, &err) < 0)
    return bad_option("--egress-allow-range", err.msg);
  o->eg_allow[o->eg_nallow++] = arg;
  return 0;
}

static int opt_fetch_range(struct serve_opts *o, const char *arg) {
  if (o->n_oauth_fetch_allow == AUTH_FETCH_RANGES_MAX) {
    fprintf(stderr, "husk serve: at most %d --oauth-fetch-allow-range options\n",
            AUTH_FETCH_RANGES_MAX);
    return -1;
  }
  struct husk_err err;
  struct egress_cidr c;
  if (egress_cidr_parse(arg, &c, &err) < 0)
    return bad_option("--oauth-fetch-allow-range", err.msg);
  o->oauth_fetch_allow[o->n_oauth_fetch_allow++] = arg;
  return 0;
}

static int opt_pool(struct serve_opts *o, const char *arg) {
  if (o->npools == BOX_POOL_MAX_SHAPES) {
    fprintf(stderr, "husk serve: at most %d --pool options\n", BOX_POOL_MAX_SHAPES);
    return -1;
  }
  struct husk_err err;
  if (parse_pool(arg, &o->pools[o->npools], o->pool_templates[o->npools], &err) < 0) {
    fprintf(stderr, "husk serve: --pool %s: %s\n", arg, err.msg);
    return -1;
  }
  if (o->pools[o->npools].size > 0) /* --pool 0: no pool */
    o->npools++;
  return 0;
}

enum {
  O_LISTEN = 256,
  O_DATA,
  O_MAXCONN,
  O_PERIP,
  O_IDLE,
  O_GRACE,
  O_DTTL,
  O_MTTL,
  O_MAX_PAUSED,
  O_POOL,
  O_QUIET,
  O_HELP,
  O_MCP_WAIT,
  O_MCP_ORIGIN, O_MCP_PROMPTS, O_MCP_RESOURCES,
  O_REPLY_MAX,
  O_REPLY_BUDGET,
  O_EG_RESOLVER,
  O_EG_ALLOW,
  O_EG_CA,
  O_EG_MAXCONN,
  O_EG_IDLE,
  O_AUDIT_RETENTION,
  O_S3_LISTEN,
  O_PUBLIC_URL,
  O_PREVIEW_URL,
  O_PREVIEW_DOMAIN,
  O_S3_REGION,
  O_STORE_ENDPOINT,
  O_STORE_BUCKET,
  O_STORE_REGION,
  O_STORE_PART,
  O_STORAGE_QUOTA,
  O_TENANT_REQS,
  O_TENANT_EXECS,
  O_REQ_TIMEOUT,
  O_DATA_RESERVE,
  O_TEMPLATE_QUOTA,
  O_TENANT_BOXES,
  O_TENANT_MEMORY,
  O_TENANT_PROCS,
  O_TENANT_SNAPSHOTS,
  O_EG_TENANT_CONNS,
  O_EG_TOTAL_CONNS,
  O_TENANT_REPLY,
  O_API_URL,
  O_TRUSTED_PROXY,
  O_OAUTH_ACCESS_TTL,
  O_OIDC_CA_FILE,
  O_OAUTH_FETCH_ALLOW,
  O_VERSION
};

static const struct option serve_long_opts[] = {
    {"listen", required_argument, NULL, O_LISTEN},
    {"data", required_argument, NULL, O_DATA},
    {"max-connections", required_argument, NULL, O_MAXCONN},
    {"max-connections-per-ip", required_argument, NULL, O_PERIP},
    {"idle-timeout", required_argument, NULL, O_IDLE},
    {"grace", required_argument, NULL, O_GRACE},
    {"default-ttl", required_argument, NULL, O_DTTL},
    {"max-ttl", required_argument, NULL, O_MTTL},
    {"max-paused", required_argument, NULL, O_MAX_PAUSED},
    {"pool", required_argument, NULL, O_POOL},
    {"quiet", no_argument, NULL, O_QUIET},
    {"help", no_argument, NULL, O_HELP},
    {"version", no_argument, NULL, O_VERSION},
    {"mcp-wait", required_argument, NULL, O_MCP_WAIT},
    {"mcp-allow-origin", required_argument, NULL, O_MCP_ORIGIN},
    {"mcp-prompts", required_argument, NULL, O_MCP_PROMPTS},
    {"mcp-resources", required_argument, NULL, O_MCP_RESOURCES},
    {"reply-max", required_argument, NULL, O_REPLY_MAX},
    {"reply-budget", required_argument, NULL, O_REPLY_BUDGET},
    /* network mode egress */
    {"egress-resolver", required_argument, NULL, O_EG_RESOLVER},
    {"egress-allow-range", required_argument, NULL, O_EG_ALLOW},
    {"egress-ca-file", required_argument, NULL, O_EG_CA},
    {"egress-max-conns", required_argument, NULL, O_EG_MAXCONN},
    {"egress-idle-timeout", required_argument, NULL, O_EG_IDLE},
    {"audit-retention", required_argument, NULL, O_AUDIT_RETENTION},
    /* storage */
    {"s3-listen", required_argument, NULL, O_S3_LISTEN},
    {"public-url", required_argument, NULL, O_PUBLIC_URL},
    {"preview-url", required_argument, NULL, O_PREVIEW_URL},
    {"preview-domain", required_argument, NULL, O_PREVIEW_DOMAIN},
    {"s3-region", required_argument, NULL, O_S3_REGION},
    {"store-endpoint", required_argument, NULL, O_STORE_ENDPOINT},
    {"store-bucket", required_argument, NULL, O_STORE_BUCKET},
    {"store-region", required_argument, NULL, O_STORE_REGION},
    {"store-part-size", required_argument, NULL, O_STORE_PART},
    {"storage-quota", required_argument, NULL, O_STORAGE_QUOTA},
    {"tenant-max-requests", required_argument, NULL, O_TENANT_REQS},
    {"tenant-max-execs", required_argument, NULL, O_TENANT_EXECS},
    {"request-timeout", required_argument, NULL, O_REQ_TIMEOUT},
    {"data-reserve", required_argument, NULL, O_DATA_RESERVE},
    {"template-quota", required_argument, NULL, O_TEMPLATE_QUOTA},
    {"tenant-max-boxes", required_argument, NULL, O_TENANT_BOXES},
    {"tenant-max-memory", required_argument, NULL, O_TENANT_MEMORY},
    {"tenant-max-procs", required_argument, NULL, O_TENANT_PROCS},
    {"tenant-max-snapshots", required_argument, NULL, O_TENANT_SNAPSHOTS},
    {"egress-tenant-max-conns", required_argument, NULL, O_EG_TENANT_CONNS},
    {"egress-total-max-conns", required_argument, NULL, O_EG_TOTAL_CONNS},
    {"tenant-reply-budget", required_argument, NULL, O_TENANT_REPLY},
    {"api-url", required_argument, NULL, O_API_URL},
    {"trusted-proxy", required_argument, NULL, O_TRUSTED_PROXY},
    {"oauth-access-ttl", required_argument, NULL, O_OAUTH_ACCESS_TTL},
    {"oidc-ca-file", required_argument, NULL, O_OIDC_CA_FILE},
    {"oauth-fetch-allow-range", required_argument, NULL, O_OAUTH_FETCH_ALLOW},
    {0},
};

/* One option into *o: 0, or -1 when it is refused (said). */
static int serve_option(struct serve_opts *o, int c, const char *arg) {
  switch (c) {
  case O_LISTEN: o->listen = arg; return 0;
  case O_DATA: o->data = arg; return 0;
  case O_PERIP: return opt_u64("--max-connections-per-ip", arg, 0, 100000, &o->perip);
  case O_MAXCONN: return opt_u64("--max-connections", arg, 1, 100000, &o->maxconn);
  case O_TENANT_REQS: return opt_u64("--tenant-max-requests", arg, 1, 100000, &o->tenant_reqs);
  case O_TENANT_EXECS: return opt_u64("--tenant-max-execs", arg, 1, 100000, &o->tenant_execs);
  case O_REQ_TIMEOUT: return opt_seconds("--request-timeout", arg, &o->req_timeout_ms);
  case O_IDLE: return opt_seconds("--idle-timeout", arg, &o->idle_ms);
  case O_GRACE: return opt_milli("--grace", arg, 0, 3600 * 1000, &o->grace_ms);
  case O_DTTL: return opt_seconds("--default-ttl", arg, &o->dttl_ms);
  case O_MTTL: return opt_seconds("--max-ttl", arg, &o->mttl_ms);
  case O_MAX_PAUSED: return opt_seconds("--max-paused", arg, &o->max_paused_ms);
  case O_POOL: return opt_pool(o, arg);
  case O_QUIET: o->quiet = true; return 0;
  case O_MCP_WAIT: return opt_milli("--mcp-wait", arg, 1, 3600 * 1000, &o->mcp_wait_ms);
  case O_MCP_ORIGIN: o->mcp_origins = arg; return 0;
  case O_MCP_PROMPTS: o->mcp_prompts = arg; return 0;
  case O_MCP_RESOURCES: o->mcp_resources = arg; return 0;
  case O_REPLY_MAX: return opt_size("--reply-max", arg, &o->reply_max);
  case O_REPLY_BUDGET: return opt_size("--reply-budget", arg, &o->reply_budget);
  case O_EG_RESOLVER: return opt_resolver(o, arg);
  case O_EG_CA: o->eg_ca = arg; return 0;
  case O_EG_ALLOW: return opt_allow_range(o, arg);
  case O_EG_MAXCONN: return opt_u64("--egress-max-conns", arg, 1, 10000, &o->eg_maxconn);
  case O_EG_IDLE: return opt_seconds("--egress-idle-timeout", arg, &o->eg_idle_ms);
  case O_AUDIT_RETENTION: return opt_u64("--audit-retention", arg, 0, 36500, &o->audit_days);
  case O_S3_LISTEN:
    o->s3_listen = arg;
    o->s3_listen_given = true;
    return 0;
  case O_PUBLIC_URL: o->public_url = arg; return 0;
  case O_API_URL: o->api_url = arg; return 0;
  case O_TRUSTED_PROXY: return opt_trusted_proxy(o, arg);
  case O_OAUTH_ACCESS_TTL:
    return opt_u64("--oauth-access-ttl", arg, 1, 86400, &o->oauth_access_ttl);
  case O_OIDC_CA_FILE: o->oidc_ca_file = arg; return 0;
  case O_OAUTH_FETCH_ALLOW: return opt_fetch_range(o, arg);
  case O_PREVIEW_URL: o->preview_url = arg; return 0;
  case O_PREVIEW_DOMAIN: o->preview_domain = arg; return 0;
  case O_S3_REGION: o->s3_region = arg; return 0;
  case O_STORE_ENDPOINT: o->store_endpoint = arg; return 0;
  case O_STORE_BUCKET: o->store_bucket = arg; return 0;
  case O_STORE_REGION: o->store_region = arg; return 0;
  case O_DATA_RESERVE: o->data_reserve = arg; return 0;
  case O_STORAGE_QUOTA:
    if (opt_size("--storage-quota", arg, &o->storage_quota) < 0)
      return -1;
    return o->storage_quota == 0 ? bad_option("--storage-quota", "must be more than 0") : 0;
  case O_TEMPLATE_QUOTA:
    if (opt_size("--template-quota", arg, &o->template_quota) < 0)
      return -1;
    return o->template_quota == 0 ? bad_option("--template-quota", "must be more than 0") : 0;
  case O_STORE_PART: return opt_size("--store-part-size", arg, &o->store_part);
  case O_TENANT_BOXES: return opt_quota("--tenant-max-boxes", arg, false, &o->tenant_boxes);
  case O_TENANT_MEMORY: return opt_quota("--tenant-max-memory", arg, true, &o->tenant_memory);
  case O_TENANT_PROCS: return opt_u64("--tenant-max-procs", arg, 1, 1000000, &o->tenant_procs);
  case O_TENANT_SNAPSHOTS:
    return opt_u64("--tenant-max-snapshots", arg, 1, 1000000, &o->tenant_snapshots);
  case O_EG_TENANT_CONNS:
    return opt_u64("--egress-tenant-max-conns", arg, 1, 100000, &o->eg_tenant_conns);
  case O_TENANT_REPLY: return opt_size("--tenant-reply-budget", arg, &o->tenant_reply_budget);
  case O_EG_TOTAL_CONNS:
    return opt_u64("--egress-total-max-conns", arg, 1, 100000, &o->eg_total_conns);
  default: usage(stderr); return -1;
  }
}

/* What no single option can check: ranges that depend on another option,
 * the listen addresses, the region and the public URL.  0, or -1 (said). */
static int serve_options_agree(const struct serve_opts *o) {
  if (o->reply_max < API_REPLY_MAX_MIN || o->reply_max > API_REPLY_MAX_MAX) {
    fprintf(stderr, "husk serve: --reply-max: must be %d bytes to %llu MiB\n", API_REPLY_MAX_MIN,
            API_REPLY_MAX_MAX >> 20);
    return -1;
  }
  if (o->reply_budget < 4 * o->reply_max)
    return bad_option("--reply-budget", "must be at least 4 times --reply-max (a sync exec "
                                        "reserves 2 times it)");
  if (o->tenant_reply_budget &&
      (o->tenant_reply_budget < 2 * o->reply_max || o->tenant_reply_budget > o->reply_budget))
    return bad_option("--tenant-reply-budget", "must be at least 2 times --reply-max and at most "
                                               "--reply-budget");
  struct sockaddr_storage ss;
  socklen_t sslen;
  struct husk_err err;
  if (front_parse_listen(o->listen, &ss, &sslen, &err) < 0)
    return bad_option("--listen", err.msg);
  if (strcmp(o->s3_listen, "off") != 0 && front_parse_listen(o->s3_listen, &ss, &sslen, &err) < 0)
    return bad_option("--s3-listen", err.msg);
  if (!*o->s3_region || strlen(o->s3_region) > 32 ||
      strspn(o->s3_region, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(o->s3_region)) {
    fprintf(stderr, "husk serve: --s3-region: lower-case letters, digits and dashes\n");
    return -1;
  }
  if (o->public_url &&
      ((strncmp(o->public_url, "http://", 7) && strncmp(o->public_url, "https://", 8)) ||
       strlen(o->public_url) > 512)) {
    fprintf(stderr, "husk serve: --public-url must be http://host[:port] or https://host[:port]\n");
    return -1;
  }
  if (o->api_url) {
    /* The issuer: a scheme and an authority, what clients compare byte
     * for byte (RFC 8414); at most one trailing slash. */
    const char *u = o->api_url;
    size_t skip = !strncmp(u, "https://", 8) ? 8 : !strncmp(u, "http://", 7) ? 7 : 0;
    size_t n = skip ? strspn(u + skip, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                           "0123456789.-:[]")
                    : 0;
    const char *rest = u + skip + n;
    if (!skip || n == 0 || strlen(u) > 512 || (*rest && strcmp(rest, "/"))) {
      fprintf(stderr, "husk serve: --api-url must be http://host[:port] or https://host[:port]\n");
      return -1;
    }
  }
  if (api_preview_config_check(o->preview_url, o->preview_domain, &err) < 0) {
    fprintf(stderr, "husk serve: %s\n", err.msg);
    return -1;
  }
  return 0;
}

/* The command line into *o.  Returns -1 to go on, else the exit status:
 * 0 after --help or --version, SERVE_USAGE when it is refused (said on
 * stderr). */
static int serve_options(int argc, char **argv, struct serve_opts *o) {
  *o = (struct serve_opts){
      .listen = DEFAULT_LISTEN,
      .maxconn = FRONT_MAX_CONNECTIONS,
      .perip = 64,
      .req_timeout_ms = (uint64_t)FRONT_REQUEST_TIMEOUT_S * 1000,
      .idle_ms = (uint64_t)FRONT_IDLE_TIMEOUT_S * 1000,
      .grace_ms = 10000,
      .reply_max = API_REPLY_MAX_DEFAULT,
      .reply_budget = API_REPLY_BUDGET_DEFAULT,
      .tenant_boxes = SERVE_TENANT_BOXES_DEFAULT,
      .tenant_memory = SERVE_TENANT_MEMORY_HOST,
      .audit_days = 30,
      .oauth_access_ttl = 3600,
      .s3_listen = DEFAULT_S3_LISTEN,
      .s3_region = "us-east-1",
      .store_region = "us-east-1",
  };
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", serve_long_opts, NULL)) != -1) {
    if (c == 'h' || c == O_HELP) {
      usage(stdout);
      return 0;
    }
    if (c == O_VERSION) {
      printf("husk %s\n", HUSK_VERSION);
      return 0;
    }
    if (serve_option(o, c, optarg) < 0)
      return SERVE_USAGE;
  }
  if (optind < argc) {
    fprintf(stderr, "husk serve: unexpected argument `%s`\n", argv[optind]);
    return SERVE_USAGE;
  }
  return serve_options_agree(o) < 0 ? SERVE_USAGE : -1;
}

/* ---- what the daemon holds ------------------------------------------------------------ */

/* Everything the start sets up, torn down by serve_close in the reverse
 * order, whatever step the start reached. */
struct serve {
  struct state *st;
  struct template_store *templates;
  struct husk_mgr *mgr;
  struct store *store;
  struct mcp_storage mcp_store; /* the storage tools' view of `store` */
  struct mcp_previews mcp_previews; /* where expose_port's URLs lead */
  struct mcp_server *mcp;
  struct api_server *api;
  struct s3_server *s3;
  struct auth *auth; /* users and OAuth (src/auth) */
  struct auth_fetcher *fetcher; /* the daemon's sign-in fetches */
  struct oidc *oidc;            /* single sign-on (src/auth/oidc.c) */
  char key[ADMIN_KEY_MAX + 1]; /* the admin key, until the API has its copy */
  char keypath[PATH_MAX + 16]; /* where it is kept; "" when it is HUSK_ADMIN_KEY */
  char s3_url[256];            /* "" without an S3 listener */
  char e2b_secret[PATH_MAX + 16]; /* the E2B front's token secret (docs/e2b.md) */
};

/* Stop the fronts, letting their requests finish for up to grace_ms, then
 * close the core.  Boxes keep running (the next start adopts them). */
static void serve_close(struct serve *s, unsigned grace_ms) {
  s3_stop(s->s3, grace_ms);
  s->s3 = NULL;
  api_stop(s->api, grace_ms);
  s->api = NULL;
  mcp_server_free(s->mcp);
  s->mcp = NULL;
  oidc_close(s->oidc);
  s->oidc = NULL;
  auth_close(s->auth);
  s->auth = NULL;
  auth_fetcher_close(s->fetcher);
  s->fetcher = NULL;
  store_close(s->store);
  s->store = NULL;
  box_mgr_close(s->mgr, false);
  s->mgr = NULL;
  template_store_close(s->templates);
  s->templates = NULL;
  state_close(s->st);
  s->st = NULL;
  explicit_bzero(s->key, sizeof s->key);
}

/* A start that failed: nothing waits for a grace period. */
static void serve_closep(struct serve *s) { serve_close(s, 0); }
#define cleanup_serve __attribute__((cleanup(serve_closep)))

/* ---- 2. data directory and admin key ---------------------------------------------------- */

static int serve_data(struct serve_opts *o, struct serve *s) {
  if (!o->data) {
    /* From the source tree (make run, tests): keep state beside it. */
    struct stat st;
    bool repo = stat("Makefile", &st) == 0 && stat("src/api", &st) == 0 && S_ISDIR(st.st_mode);
    o->data = repo ? "./var/husk" : "/var/lib/husk";
  }
  struct husk_err err;
  if (mkdir_private(o->data, &err) < 0)
    return fail("%s", err.msg);
  const char *env_key = getenv("HUSK_ADMIN_KEY");
  if (env_key) {
    if (!key_text_ok(env_key, strlen(env_key)))
      return fail("HUSK_ADMIN_KEY must be %d..%d printable characters without spaces",
                  ADMIN_KEY_MIN, ADMIN_KEY_MAX);
    snprintf(s->key, sizeof s->key, "%s", env_key);
    return 0;
  }
  if (admin_key_file(o->data, s->key, sizeof s->key, s->keypath, sizeof s->keypath, &err) < 0)
    return fail("%s", err.msg);
  return 0;
}

/* Signals: handled by the main thread with sigwait; every other thread
 * (libmicrohttpd's, the core's) inherits the mask, so this comes before
 * the first of them.  So does jansson's hash seed. */
static void serve_threads_setup(sigset_t *stop) {
  sigemptyset(stop);
  sigaddset(stop, SIGTERM);
  sigaddset(stop, SIGINT);
  sigaddset(stop, SIGHUP);
  pthread_sigmask(SIG_BLOCK, stop, NULL);
  signal(SIGPIPE, SIG_IGN);
  json_object_seed(0);
}

/* Each live box holds a few fds in the daemon (its pidfd, control socket,
 * cgroup and relay fds): with the usual soft limit of 1024 a daemon
 * started by hand would refuse new boxes and connections past about 140
 * boxes.  The soft limit is raised to the hard one, as far as 2^20 (the
 * packaged unit sets LimitNOFILE already); a hard limit too low for that
 * is said once, at start. */
#define SERVE_NOFILE_WANT 8192 /* about a thousand boxes */
#define SERVE_NOFILE_CAP (1 << 20)
static void serve_fd_limit(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) < 0) {
    fprintf(stderr, "husk: getrlimit(RLIMIT_NOFILE): %s\n", strerror(errno));
    return;
  }
  rlim_t want = rl.rlim_max == RLIM_INFINITY || rl.rlim_max > SERVE_NOFILE_CAP
                    ? SERVE_NOFILE_CAP
                    : rl.rlim_max;
  if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < want) {
    rl.rlim_cur = want;
    if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
      fprintf(stderr, "husk: setrlimit(RLIMIT_NOFILE, %llu): %s\n", (unsigned long long)want,
              strerror(errno));
  }
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
      rl.rlim_cur < SERVE_NOFILE_WANT)
    fprintf(stderr,
            "husk: open files are limited to %llu (hard limit): each live box holds about 8 "
            "of them; raise it (ulimit -Hn, LimitNOFILE=) for more than %llu boxes\n",
            (unsigned long long)rl.rlim_cur, (unsigned long long)(rl.rlim_cur / 8));
}

/* ---- 3. state and planes ---------------------------------------------------------------- */

static int serve_planes(const struct serve_opts *o, struct serve *s) {
  struct husk_err err;
  char dbpath[PATH_MAX + 16];
  snprintf(dbpath, sizeof dbpath, "%s/husk.db", o->data);
  if (state_open(&s->st, dbpath, &err) < 0)
    return fail("%s", err.msg);
  int64_t tenant_memory = o->tenant_memory;
  if (tenant_memory == SERVE_TENANT_MEMORY_HOST) {
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || page <= 0 || __builtin_mul_overflow((int64_t)pages, (int64_t)page,
                                                          &tenant_memory))
      return fail("cannot tell the host's memory: give --tenant-max-memory");
  }
  state_set_tenant_defaults(s->st, o->tenant_boxes, tenant_memory);
  struct template_store_config tc = {.data_dir = o->data,
                                     .state = s->st,
                                     .tenant_quota = o->template_quota,
                                     .data_reserve = o->data_reserve,
                                     .log = log_line};
  if (template_store_open(&s->templates, &tc, &err) < 0)
    return fail("templates: %s", err.msg);
  struct box_mgr_config mc = {.data_dir = o->data,
                              .state = s->st,
                              .templates = s->templates,
                              .default_ttl_ms = o->dttl_ms,
                              .max_ttl_ms = o->mttl_ms,
                              .max_paused_ms = o->max_paused_ms,
                              .pools = o->pools,
                              .npools = o->npools,
                              .log = log_line,
                              .egress_resolver = o->eg_resolver,
                              .egress_allow = o->eg_allow,
                              .egress_nallow = o->eg_nallow,
                              .egress_ca_file = o->eg_ca,
                              .egress_max_conns = (unsigned)o->eg_maxconn,
                              .egress_tenant_max_conns = (unsigned)o->eg_tenant_conns,
                              .egress_total_max_conns = (unsigned)o->eg_total_conns,
                              .tenant_max_procs = (unsigned)o->tenant_procs,
                              .tenant_max_snapshots = (unsigned)o->tenant_snapshots,
                              .egress_idle_ms = (unsigned)o->eg_idle_ms,
                              .audit_retention_ms = (int64_t)o->audit_days * 86400 * 1000,
                              .data_reserve = o->data_reserve};
  if (box_mgr_open(&s->mgr, &mc, &err) < 0)
    return fail("%s", err.msg);
  /* The storage plane: opened before the API (whose storage routes use
   * it); its S3 listener starts after the API's. */
  struct store_config stc = {.data_dir = o->data,
                             .state = s->st,
                             .region = o->s3_region,
                             .quota_bytes = o->storage_quota,
                             .data_reserve = o->data_reserve,
                             .public_url = o->public_url,
                             .log = log_line};
  if (store_open(&s->store, &stc, &err) < 0)
    return fail("storage: %s", err.msg);
  if (o->store_endpoint || o->store_bucket) {
    struct remote_config rc = {.endpoint = o->store_endpoint,
                               .region = o->store_region,
                               .bucket = o->store_bucket,
                               .access_key = getenv("HUSK_STORE_ACCESS_KEY_ID"),
                               .secret_key = getenv("HUSK_STORE_SECRET_ACCESS_KEY"),
                               .part_size = o->store_part};
    struct remote *rem = NULL;
    if (remote_open(&rem, &rc, &err) < 0)
      return fail("external store: %s", err.msg);
    store_set_remote(s->store, rem);
  }
  box_mgr_set_store(s->mgr, s->store);
  /* Users and OAuth: their tables are in the state. */
  /* The sign-in's fetcher, one for the daemon: clients' metadata
   * documents (and identity providers) are fetched through it. */
  struct auth_fetch_config fc = {.ca_file = o->oidc_ca_file,
                                 .allow_ranges = o->oauth_fetch_allow,
                                 .n_allow_ranges = o->n_oauth_fetch_allow};
  if (auth_fetcher_open(&s->fetcher, &fc, &err) < 0)
    return fail("sign-in fetches: %s", err.msg);
  struct auth_config ac = {
      .st = s->st, .fetcher = s->fetcher, .access_ttl_s = (int64_t)o->oauth_access_ttl};
  if (auth_open(&s->auth, &ac, &err) < 0)
    return fail("users: %s", err.msg);
  /* Single sign-on: the core, with the same fetcher (the client secrets
   * in the egress vault, when there is one). */
  struct oidc_env oe = {.st = s->st, .auth = s->auth, .fetcher = s->fetcher,
                        .vault = box_mgr_vault(s->mgr)};
  if (oidc_open(&s->oidc, &oe, &err) < 0)
    return fail("single sign-on: %s", err.msg);
  return 0;
}

/* ---- 4. fronts -------------------------------------------------------------------------- */

/* The MCP server reaches the core that serve opened at start. */
static struct husk_mgr *mcp_mgr(void *ctx, struct husk_err *err) {
  (void)err;
  return ctx;
}

/* The S3 listener, and the links' base URL from its port.  When the
 * default port is taken (another daemon), the API is served anyway. */
static int serve_s3(const struct serve_opts *o, struct serve *s) {
  struct s3_config sc = {.listen = o->s3_listen,
                         .store = s->store,
                         .state = s->st,
                         .max_connections = (unsigned)o->maxconn,
                         .max_per_ip = (unsigned)o->perip,
                         .idle_timeout_s = (unsigned)((o->idle_ms + 999) / 1000),
                         .request_timeout_s = (unsigned)((o->req_timeout_ms + 999) / 1000),
                         .tenant_max_requests = (unsigned)o->tenant_reqs,
                         .log_requests = !o->quiet,
                         .log = log_line};
  struct husk_err err;
  if (s3_start(&s->s3, &sc, &err) < 0) {
    if (o->s3_listen_given)
      return fail("--s3-listen: %s", err.msg);
    fprintf(stderr, "husk: S3 listener disabled: %s (use --s3-listen)\n", err.msg);
    return 0;
  }
  char host[128];
  front_listen_host(o->s3_listen, host, sizeof host);
  snprintf(s->s3_url, sizeof s->s3_url, "http://%s:%u", host, s3_port(s->s3));
  if (!o->public_url)
    store_set_public_url(s->store, s->s3_url);
  return 0;
}

static int serve_fronts(const struct serve_opts *o, struct serve *s) {
  struct husk_err err;
  /* Storage plane over MCP: store_file, get_link, list_objects, load_file,
   * and run_code's files as links.  Whether links can be made is known only
   * once the S3 listener is up; until then (or without one) the tools that
   * need a link answer an isError saying what to configure. */
  mcp_storage_plane(&s->mcp_store, s->store);
  struct mcp_config mcfg = {.mgr = mcp_mgr,
                            .mgr_ctx = s->mgr,
                            .wait_ms = o->mcp_wait_ms,
                            .log = log_line,
                            .storage = &s->mcp_store,
                            .previews = &s->mcp_previews,
                            .prompts_dir = o->mcp_prompts,
                            .resources_dir = o->mcp_resources};
  if (mcp_server_new(&s->mcp, &mcfg, &err) < 0)
    return fail("%s", err.msg);
  snprintf(s->e2b_secret, sizeof s->e2b_secret, "%s/e2b.secret", o->data);
  struct api_config ac = {.listen = o->listen,
                          .mgr = s->mgr,
                          .state = s->st,
                          .admin_key = s->key,
                          .mcp = s->mcp,
                          .mcp_allowed_origins = o->mcp_origins,
                          .store = s->store,
                          .max_connections = (unsigned)o->maxconn,
                          .max_per_ip = (unsigned)o->perip,
                          .idle_timeout_s = (unsigned)((o->idle_ms + 999) / 1000),
                          .tenant_max_requests = (unsigned)o->tenant_reqs,
                          .tenant_max_execs = (unsigned)o->tenant_execs,
                          .request_timeout_s = (unsigned)((o->req_timeout_ms + 999) / 1000),
                          .reply_max = o->reply_max,
                          .reply_budget = o->reply_budget,
                          .tenant_reply_budget = o->tenant_reply_budget,
                          .preview_url = o->preview_url,
                          .preview_domain = o->preview_domain,
                          .auth = s->auth,
                          .oidc = s->oidc,
                          .api_url = o->api_url,
                          .trusted_proxies = o->trusted_proxies,
                          .n_trusted_proxies = o->n_trusted_proxies,
                          .log_requests = !o->quiet,
                          .e2b_secret_path = s->e2b_secret,
                          .log = log_line};
  if (api_start(&s->api, &ac, &err) < 0)
    return fail("%s", err.msg);
  /* expose_port's URLs: --preview-url, else this listener as it was
   * given (an address of all interfaces names none: then the loopback). */
  if (o->preview_url) {
    snprintf(s->mcp_previews.base, sizeof s->mcp_previews.base, "%s", o->preview_url);
  } else {
    char host[128];
    front_listen_host(o->listen, host, sizeof host);
    if (!strcmp(host, "0.0.0.0"))
      snprintf(host, sizeof host, "127.0.0.1");
    else if (!strcmp(host, "[::]"))
      snprintf(host, sizeof host, "[::1]");
    snprintf(s->mcp_previews.base, sizeof s->mcp_previews.base, "http://%s:%u", host,
             api_port(s->api));
  }
  if (husk_preview_domain_parse(o->preview_domain, &s->mcp_previews.domain, &err) < 0)
    return fail("%s", err.msg);
  if (strcmp(o->s3_listen, "off") != 0 && serve_s3(o, s) < 0)
    return -1;
  explicit_bzero(s->key, sizeof s->key); /* the API keeps its own copy */
  return 0;
}

/* Where everything is, for whoever started the daemon. */
static void serve_announce(const struct serve_opts *o, const struct serve *s) {
  char host[128];
  front_listen_host(o->listen, host, sizeof host);
  fprintf(stderr, "husk: listening on http://%s:%u\n", host, api_port(s->api));
  if (!s->keypath[0])
    fprintf(stderr, "husk: admin key from HUSK_ADMIN_KEY\n");
  else
    fprintf(stderr, "husk: admin key in %s\n", s->keypath);
  fprintf(stderr, "husk: data in %s\n", o->data);
  if (s->s3)
    fprintf(stderr, "husk: S3 listening on %s (region %s, links on %s)\n", s->s3_url, o->s3_region,
            store_remote(s->store) ? o->store_endpoint : store_public_url(s->store));
  if (store_remote(s->store))
    fprintf(stderr, "husk: links and box transfers use the external store %s, bucket %s\n",
            o->store_endpoint, o->store_bucket);
}

/* ---- 5. wait for a signal, 6. stop ----------------------------------------------------- */

static int serve_wait(const sigset_t *stop) {
  int sig = 0;
  while (sigwait(stop, &sig) != 0 || sig == SIGHUP) {
    /* SIGHUP: nothing to reload; keep serving. */
  }
  return sig;
}

int cmd_serve(int argc, char **argv) {
  /* First: nothing secret is in memory yet. */
  struct husk_err perr;
  if (privs_no_dumps(&perr) < 0) {
    fprintf(stderr, "husk serve: %s\n", perr.msg);
    return 1;
  }
  struct serve_opts o;
  int rc = serve_options(argc, argv, &o);
  if (rc >= 0)
    return rc;
  cleanup_serve struct serve s = {0};
  if (serve_data(&o, &s) < 0)
    return 1;
  sigset_t stop;
  serve_threads_setup(&stop);
  serve_fd_limit();
  if (serve_planes(&o, &s) < 0 || serve_fronts(&o, &s) < 0)
    return 1;
  serve_announce(&o, &s);

  int sig = serve_wait(&stop);
  fprintf(stderr, "husk: %s: stopping (boxes keep running; the next start adopts them)\n",
          strsignal(sig));
  serve_close(&s, (unsigned)o.grace_ms);
  fprintf(stderr, "husk: stopped\n");
  return 0;
}
