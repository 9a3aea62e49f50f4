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
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/api.h"
#include "box/box.h"
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
#include "util/base64.h"
#include "util/cleanup.h"
#include "util/fileio.h"
#include "util/parse.h"

#define DEFAULT_LISTEN "127.0.0.1:7070"
#define DEFAULT_S3_LISTEN "127.0.0.1:7071"
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
          "                          process output/stdin, MCP) [max-connections/4]\n"
          "  --request-timeout SECONDS  a request (line, headers, body but for uploads) must\n"
          "                          arrive within this long of the connection's start or\n"
          "                          of the previous reply, else the connection is closed\n"
          "                          (API and S3; S3 object bodies are uploads) [60]\n"
          "  --idle-timeout SECONDS  close idle connections after this long [120]\n"
          "  --grace SECONDS         on SIGTERM, how long requests in flight may finish [10]\n"
          "  --default-ttl SECONDS   lifetime of a box created without \"timeout\" [300]\n"
          "  --max-ttl SECONDS       longest lifetime a box may ask for [604800]\n"
          "  --pool N[:SHAPE]        keep N boxes ready; a create whose limits resolve to the\n"
          "                          pool's shape claims one.  SHAPE: memory=SIZE,cpus=N,\n"
          "                          pids=N,disk=SIZE (unset: the defaults); without SHAPE,\n"
          "                          the default shape.  Repeatable, one per shape [none]\n"
          "  --quiet                 no log line per request\n"
          "  --reply-max SIZE        box data one reply holds: stdout and stderr of a sync\n"
          "                          exec (each; the rest is counted and flagged truncated),\n"
          "                          the entries of a files listing page [1M]\n"
          "  --reply-budget SIZE     box data all requests in flight may hold for their replies\n"
          "                          (sync execs, listings, streams); past it, 503 [256M]\n"
          "  --mcp-wait SECONDS      longest an MCP tool call waits before answering with a\n"
          "                          job_id [45]\n"
          "  --mcp-allow-origin LIST Origins allowed at /mcp besides loopback and the\n"
          "                          server's own (comma-separated, e.g. https://claude.ai)\n"
          /* issue 7: network mode egress (docs/egress.md) */
          "  --egress-resolver IP[:PORT]  DNS server the egress proxy asks [first nameserver\n"
          "                          of /etc/resolv.conf]\n"
          "  --egress-allow-range CIDR  exempt this range from the always-on deny set (private,\n"
          "                          loopback...): for test networks only; repeatable\n"
          "  --egress-ca-file FILE   extra trust roots for TLS the proxy re-originates\n"
          "  --egress-max-conns N    concurrent proxied connections per box [64]\n"
          "  --egress-idle-timeout SECONDS  idle proxied connections are closed [60]\n"
          "  --audit-retention DAYS  audit records older than this are removed; 0: keep\n"
          "                          them all [30]\n"
          "\n"
          "Storage (docs/storage.md):\n"
          "  --s3-listen ADDR:PORT   the S3-compatible listener, or \"off\" [" DEFAULT_S3_LISTEN "]\n"
          "  --public-url URL        base of presigned links, scheme://host[:port]\n"
          "                          [http://<s3-listen address>]\n"
          "  --s3-region REGION      the region clients sign for [us-east-1]\n"
          "  --storage-quota SIZE    bytes each tenant may store (objects and parts) [no limit]\n"
          "  --data-reserve SIZE|N%%  free space on the data directory's disk that no object\n"
          "                          write may use [1G, at most 5%%]\n"
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

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "husk: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  return 1;
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
  if (getrandom(raw, sizeof raw, 0) != (ssize_t)sizeof raw)
    return husk_error(err, errno, "getrandom");
  int n = snprintf(key, size, "hk_admin_");
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

static int parse_seconds(const char *opt, const char *s, uint64_t *ms) {
  struct husk_err err;
  if (parse_milli(s, 1, HUSK_MAX_TIMEOUT_MS, ms, &err) < 0) {
    fprintf(stderr, "husk serve: %s: %s\n", opt, err.msg);
    return -1;
  }
  return 0;
}

/* --pool N[:SHAPE]: N ready boxes of the default shape, or of SHAPE, a
 * comma-separated list of memory=SIZE, cpus=N, pids=N, disk=SIZE (the
 * fields of a create request; the others keep their defaults).  The core
 * checks the ranges and that no two pools have one shape. */
static int parse_pool(const char *arg, struct box_pool_spec *out, struct husk_err *err) {
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
    static const char *const keys[] = {"memory", "cpus", "pids", "disk"};
    unsigned k = 0;
    while (k < 4 && strcmp(kv, keys[k]))
      k++;
    if (k == 4)
      return husk_fail(err, EINVAL, "unknown shape key `%s` (memory, cpus, pids, disk)", kv);
    if (seen & (1u << k))
      return husk_fail(err, EINVAL, "`%s` given twice", kv);
    seen |= 1u << k;
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

enum { O_LISTEN = 256, O_DATA, O_MAXCONN, O_PERIP, O_IDLE, O_GRACE, O_DTTL, O_MTTL, O_POOL, O_QUIET, O_HELP,
       O_MCP_WAIT, O_MCP_ORIGIN, O_REPLY_MAX, O_REPLY_BUDGET,
       /* issue 7 */
       O_EG_RESOLVER, O_EG_ALLOW, O_EG_CA, O_EG_MAXCONN, O_EG_IDLE, O_AUDIT_RETENTION,
       O_S3_LISTEN, O_PUBLIC_URL, O_S3_REGION, O_STORE_ENDPOINT, O_STORE_BUCKET, O_STORE_REGION,
       O_STORE_PART, O_STORAGE_QUOTA, O_TENANT_REQS, O_TENANT_EXECS, O_REQ_TIMEOUT, O_DATA_RESERVE,
       O_VERSION };

/* The MCP server reaches the core that serve opened at start. */
static struct husk_mgr *mcp_mgr(void *ctx, struct husk_err *err) {
  (void)err;
  return ctx;
}

int cmd_serve(int argc, char **argv) {
  /* First: nothing secret is in memory yet. */
  struct husk_err perr;
  if (privs_no_dumps(&perr) < 0) {
    fprintf(stderr, "husk serve: %s\n", perr.msg);
    return 1;
  }
  static const struct option opts[] = {
      {"listen", required_argument, NULL, O_LISTEN},
      {"data", required_argument, NULL, O_DATA},
      {"max-connections", required_argument, NULL, O_MAXCONN},
      {"max-connections-per-ip", required_argument, NULL, O_PERIP},
      {"idle-timeout", required_argument, NULL, O_IDLE},
      {"grace", required_argument, NULL, O_GRACE},
      {"default-ttl", required_argument, NULL, O_DTTL},
      {"max-ttl", required_argument, NULL, O_MTTL},
      {"pool", required_argument, NULL, O_POOL},
      {"quiet", no_argument, NULL, O_QUIET},
      {"help", no_argument, NULL, O_HELP},
      {"version", no_argument, NULL, O_VERSION},
      {"mcp-wait", required_argument, NULL, O_MCP_WAIT},
      {"mcp-allow-origin", required_argument, NULL, O_MCP_ORIGIN},
      {"reply-max", required_argument, NULL, O_REPLY_MAX},
      {"reply-budget", required_argument, NULL, O_REPLY_BUDGET},
      /* issue 7 */
      {"egress-resolver", required_argument, NULL, O_EG_RESOLVER},
      {"egress-allow-range", required_argument, NULL, O_EG_ALLOW},
      {"egress-ca-file", required_argument, NULL, O_EG_CA},
      {"egress-max-conns", required_argument, NULL, O_EG_MAXCONN},
      {"egress-idle-timeout", required_argument, NULL, O_EG_IDLE},
      {"audit-retention", required_argument, NULL, O_AUDIT_RETENTION},
      /* storage */
      {"s3-listen", required_argument, NULL, O_S3_LISTEN},
      {"public-url", required_argument, NULL, O_PUBLIC_URL},
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
      {0},
  };
  /* issue 7 */
  const char *eg_resolver = NULL, *eg_ca = NULL;
  const char *eg_allow[16];
  size_t eg_nallow = 0;
  uint64_t eg_maxconn = 0, eg_idle_ms = 0;
  uint64_t audit_days = 30;
  const char *listen = DEFAULT_LISTEN, *data = NULL;
  uint64_t perip = 64;
  uint64_t maxconn = 256, idle_ms = 120000, grace_ms = 10000, dttl = 0, mttl = 0;
  uint64_t tenant_reqs = 0, tenant_execs = 0; /* 0: shares of --max-connections */
  uint64_t req_timeout_ms = (uint64_t)FRONT_REQUEST_TIMEOUT_S * 1000;
  struct box_pool_spec pools[BOX_POOL_MAX_SHAPES];
  size_t npools = 0;
  bool quiet = false;
  uint64_t mcp_wait_ms = 0;
  const char *mcp_origins = NULL;
  uint64_t reply_max = API_REPLY_MAX_DEFAULT, reply_budget = API_REPLY_BUDGET_DEFAULT;
  const char *s3_listen = DEFAULT_S3_LISTEN, *public_url = NULL, *s3_region = "us-east-1";
  bool s3_listen_given = false;
  const char *store_endpoint = NULL, *store_bucket = NULL, *store_region = "us-east-1";
  uint64_t store_part = 0, storage_quota = 0;
  const char *data_reserve = NULL;
  struct husk_err err;
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case O_LISTEN: listen = optarg; break;
    case O_DATA: data = optarg; break;
    case O_PERIP:
      if (parse_u64_range(optarg, 0, 100000, &perip, &err) < 0) {
        fprintf(stderr, "husk serve: --max-connections-per-ip: %s\n", err.msg);
        return 2;
      }
      break;
    case O_MAXCONN:
      if (parse_u64_range(optarg, 1, 100000, &maxconn, &err) < 0) {
        fprintf(stderr, "husk serve: --max-connections: %s\n", err.msg);
        return 2;
      }
      break;
    case O_TENANT_REQS:
    case O_TENANT_EXECS:
      if (parse_u64_range(optarg, 1, 100000, c == O_TENANT_REQS ? &tenant_reqs : &tenant_execs,
                          &err) < 0) {
        fprintf(stderr, "husk serve: --%s: %s\n",
                c == O_TENANT_REQS ? "tenant-max-requests" : "tenant-max-execs", err.msg);
        return 2;
      }
      break;
    case O_REQ_TIMEOUT:
      if (parse_seconds("--request-timeout", optarg, &req_timeout_ms) < 0)
        return 2;
      break;
    case O_IDLE:
      if (parse_seconds("--idle-timeout", optarg, &idle_ms) < 0)
        return 2;
      break;
    case O_GRACE:
      if (parse_milli(optarg, 0, 3600 * 1000, &grace_ms, &err) < 0) {
        fprintf(stderr, "husk serve: --grace: %s\n", err.msg);
        return 2;
      }
      break;
    case O_DTTL:
      if (parse_seconds("--default-ttl", optarg, &dttl) < 0)
        return 2;
      break;
    case O_MTTL:
      if (parse_seconds("--max-ttl", optarg, &mttl) < 0)
        return 2;
      break;
    case O_POOL:
      if (npools == BOX_POOL_MAX_SHAPES) {
        fprintf(stderr, "husk serve: at most %d --pool options\n", BOX_POOL_MAX_SHAPES);
        return 2;
      }
      if (parse_pool(optarg, &pools[npools], &err) < 0) {
        fprintf(stderr, "husk serve: --pool %s: %s\n", optarg, err.msg);
        return 2;
      }
      if (pools[npools].size > 0) /* --pool 0: none (as before) */
        npools++;
      break;
    case O_QUIET: quiet = true; break;
    case O_MCP_WAIT:
      if (parse_milli(optarg, 1, 3600 * 1000, &mcp_wait_ms, &err) < 0) {
        fprintf(stderr, "husk serve: --mcp-wait: %s\n", err.msg);
        return 2;
      }
      break;
    case O_MCP_ORIGIN: mcp_origins = optarg; break;
    case O_REPLY_MAX:
    case O_REPLY_BUDGET:
      if (parse_size(optarg, c == O_REPLY_MAX ? &reply_max : &reply_budget, &err) < 0) {
        fprintf(stderr, "husk serve: --%s: %s\n", c == O_REPLY_MAX ? "reply-max" : "reply-budget",
                err.msg);
        return 2;
      }
      break;
    /* issue 7 */
    case O_EG_RESOLVER: eg_resolver = optarg; break;
    case O_EG_CA: eg_ca = optarg; break;
    case O_EG_ALLOW:
      if (eg_nallow == sizeof eg_allow / sizeof eg_allow[0]) {
        fprintf(stderr, "husk serve: at most 16 --egress-allow-range options\n");
        return 2;
      }
      eg_allow[eg_nallow++] = optarg;
      break;
    case O_EG_MAXCONN:
      if (parse_u64_range(optarg, 1, 10000, &eg_maxconn, &err) < 0) {
        fprintf(stderr, "husk serve: --egress-max-conns: %s\n", err.msg);
        return 2;
      }
      break;
    case O_EG_IDLE:
      if (parse_seconds("--egress-idle-timeout", optarg, &eg_idle_ms) < 0)
        return 2;
      break;
    case O_AUDIT_RETENTION:
      if (parse_u64_range(optarg, 0, 36500, &audit_days, &err) < 0) {
        fprintf(stderr, "husk serve: --audit-retention: %s\n", err.msg);
        return 2;
      }
      break;
    case O_S3_LISTEN: s3_listen = optarg; s3_listen_given = true; break;
    case O_PUBLIC_URL: public_url = optarg; break;
    case O_S3_REGION: s3_region = optarg; break;
    case O_STORE_ENDPOINT: store_endpoint = optarg; break;
    case O_STORE_BUCKET: store_bucket = optarg; break;
    case O_STORE_REGION: store_region = optarg; break;
    case O_DATA_RESERVE: data_reserve = optarg; break;
    case O_STORAGE_QUOTA:
      if (parse_size(optarg, &storage_quota, &err) < 0) {
        fprintf(stderr, "husk serve: --storage-quota: %s\n", err.msg);
        return 2;
      }
      if (storage_quota == 0) {
        fprintf(stderr, "husk serve: --storage-quota: must be more than 0\n");
        return 2;
      }
      break;
    case O_STORE_PART:
      if (parse_size(optarg, &store_part, &err) < 0) {
        fprintf(stderr, "husk serve: --store-part-size: %s\n", err.msg);
        return 2;
      }
      break;
    case 'h':
    case O_HELP: usage(stdout); return 0;
    case O_VERSION: printf("husk %s\n", HUSK_VERSION); return 0;
    default: usage(stderr); return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "husk serve: unexpected argument `%s`\n", argv[optind]);
    return 2;
  }
  if (reply_max < API_REPLY_MAX_MIN || reply_max > API_REPLY_MAX_MAX) {
    fprintf(stderr, "husk serve: --reply-max: must be %d bytes to %llu MiB\n", API_REPLY_MAX_MIN,
            API_REPLY_MAX_MAX >> 20);
    return 2;
  }
  if (reply_budget < 4 * reply_max) {
    fprintf(stderr, "husk serve: --reply-budget: must be at least 4 times --reply-max (a sync "
            "exec reserves 2 times it)\n");
    return 2;
  }
  struct sockaddr_storage ss;
  socklen_t sslen;
  if (front_parse_listen(listen, &ss, &sslen, &err) < 0) {
    fprintf(stderr, "husk serve: --listen: %s\n", err.msg);
    return 2;
  }
  bool s3_on = strcmp(s3_listen, "off") != 0;
  if (s3_on && front_parse_listen(s3_listen, &ss, &sslen, &err) < 0) {
    fprintf(stderr, "husk serve: --s3-listen: %s\n", err.msg);
    return 2;
  }
  if (!*s3_region || strlen(s3_region) > 32 ||
      strspn(s3_region, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(s3_region)) {
    fprintf(stderr, "husk serve: --s3-region: lower-case letters, digits and dashes\n");
    return 2;
  }
  if (public_url && ((strncmp(public_url, "http://", 7) && strncmp(public_url, "https://", 8)) ||
                     strlen(public_url) > 512)) {
    fprintf(stderr, "husk serve: --public-url must be http://host[:port] or https://host[:port]\n");
    return 2;
  }
  if (front_parse_listen(listen, &ss, &sslen, &err) < 0)
    return 2;
  if (!data) {
    /* From the source tree (make run, tests): keep state beside it. */
    struct stat st;
    bool repo = stat("Makefile", &st) == 0 && stat("src/api", &st) == 0 && S_ISDIR(st.st_mode);
    data = repo ? "./var/husk" : "/var/lib/husk";
  }
  if (mkdir_private(data, &err) < 0)
    return fail("%s", err.msg);

  char key[ADMIN_KEY_MAX + 1];
  char keypath[PATH_MAX + 16] = "";
  const char *env_key = getenv("HUSK_ADMIN_KEY");
  if (env_key) {
    size_t n = strlen(env_key);
    if (!key_text_ok(env_key, n))
      return fail("HUSK_ADMIN_KEY must be %d..%d printable characters without spaces",
                  ADMIN_KEY_MIN, ADMIN_KEY_MAX);
    snprintf(key, sizeof key, "%s", env_key);
  } else if (admin_key_file(data, key, sizeof key, keypath, sizeof keypath, &err) < 0) {
    return fail("%s", err.msg);
  }

  /* Signals: handled by this thread with sigwait; every other thread
   * (libmicrohttpd's, the core's) inherits the mask. */
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &set, NULL);
  signal(SIGPIPE, SIG_IGN);
  json_object_seed(0); /* before any thread uses jansson */

  char dbpath[PATH_MAX + 16];
  snprintf(dbpath, sizeof dbpath, "%s/husk.db", data);
  struct state *st = NULL;
  if (state_open(&st, dbpath, &err) < 0)
    return fail("%s", err.msg);
  struct husk_mgr *mgr = NULL;
  struct box_mgr_config mc = {.data_dir = data, .state = st, .default_ttl_ms = dttl,
                              .max_ttl_ms = mttl, .pools = pools, .npools = npools,
                              .log = log_line,
                              /* issue 7 */
                              .egress_resolver = eg_resolver, .egress_allow = eg_allow,
                              .egress_nallow = eg_nallow, .egress_ca_file = eg_ca,
                              .egress_max_conns = (unsigned)eg_maxconn,
                              .egress_idle_ms = (unsigned)eg_idle_ms,
                              .audit_retention_ms = (int64_t)audit_days * 86400 * 1000};
  if (box_mgr_open(&mgr, &mc, &err) < 0) {
    state_close(st);
    return fail("%s", err.msg);
  }
  /* The storage plane: opened before the API (whose storage routes use
   * it); its S3 listener starts after the API's. */
  struct store *store = NULL;
  struct s3_server *s3 = NULL;
  char s3_url[256] = "";
  struct store_config stc = {.data_dir = data, .state = st, .region = s3_region,
                             .quota_bytes = storage_quota, .data_reserve = data_reserve,
                             .public_url = public_url, .log = log_line};
  if (store_open(&store, &stc, &err) < 0) {
    box_mgr_close(mgr, false);
    state_close(st);
    return fail("storage: %s", err.msg);
  }
  if (store_endpoint || store_bucket) {
    struct remote_config rc = {.endpoint = store_endpoint, .region = store_region,
                               .bucket = store_bucket,
                               .access_key = getenv("HUSK_STORE_ACCESS_KEY_ID"),
                               .secret_key = getenv("HUSK_STORE_SECRET_ACCESS_KEY"),
                               .part_size = store_part};
    struct remote *rem = NULL;
    if (remote_open(&rem, &rc, &err) < 0) {
      store_close(store);
      box_mgr_close(mgr, false);
      state_close(st);
      return fail("external store: %s", err.msg);
    }
    store_set_remote(store, rem);
  }
  struct mcp_server *mcp = NULL;
  struct mcp_config mcfg = {.mgr = mcp_mgr, .mgr_ctx = mgr, .wait_ms = mcp_wait_ms, .log = log_line};
  /* Storage plane over MCP: store_file, get_link, list_objects, load_file,
   * and run_code's files as links.  Whether links can be made is known only
   * once the S3 listener is up; until then (or without one) the tools that
   * need a link answer an isError saying what to configure. */
  static struct mcp_storage mcp_store;
  mcp_storage_plane(&mcp_store, store);
  mcfg.storage = &mcp_store;
  if (mcp_server_new(&mcp, &mcfg, &err) < 0) {
    store_close(store);
    box_mgr_close(mgr, false);
    state_close(st);
    return fail("%s", err.msg);
  }
  struct api_config ac = {.listen = listen, .mgr = mgr, .state = st, .admin_key = key,
                          .mcp = mcp, .mcp_allowed_origins = mcp_origins,
                          .store = store,
                          .max_connections = (unsigned)maxconn, .max_per_ip = (unsigned)perip,
                          .idle_timeout_s = (unsigned)((idle_ms + 999) / 1000),
                          .tenant_max_requests = (unsigned)tenant_reqs,
                          .tenant_max_execs = (unsigned)tenant_execs,
                          .request_timeout_s = (unsigned)((req_timeout_ms + 999) / 1000),
                          .reply_max = reply_max, .reply_budget = reply_budget,
                          .log_requests = !quiet, .log = log_line};
  struct api_server *srv = NULL;
  if (api_start(&srv, &ac, &err) < 0) {
    mcp_server_free(mcp);
    store_close(store);
    box_mgr_close(mgr, false);
    state_close(st);
    return fail("%s", err.msg);
  }
  if (s3_on) {
    struct s3_config sc = {.listen = s3_listen, .store = store, .state = st,
                           .max_connections = (unsigned)maxconn, .max_per_ip = (unsigned)perip,
                           .idle_timeout_s = (unsigned)((idle_ms + 999) / 1000),
                           .request_timeout_s = (unsigned)((req_timeout_ms + 999) / 1000),
                           .tenant_max_requests = (unsigned)tenant_reqs,
                           .log_requests = !quiet, .log = log_line};
    if (s3_start(&s3, &sc, &err) < 0) {
      if (s3_listen_given) {
        api_stop(srv, 0);
        mcp_server_free(mcp);
        store_close(store);
        box_mgr_close(mgr, false);
        state_close(st);
        return fail("--s3-listen: %s", err.msg);
      }
      /* The default port is taken (another daemon): serve the API anyway. */
      fprintf(stderr, "husk: S3 listener disabled: %s (use --s3-listen)\n", err.msg);
      s3 = NULL;
    } else {
      char h[128];
      front_listen_host(s3_listen, h, sizeof h);
      snprintf(s3_url, sizeof s3_url, "http://%s:%u", h, s3_port(s3));
      if (!public_url)
        store_set_public_url(store, s3_url);
    }
  }
  memset(key, 0, sizeof key);

  char host[128];
  front_listen_host(listen, host, sizeof host);
  fprintf(stderr, "husk: listening on http://%s:%u\n", host, api_port(srv));
  if (env_key)
    fprintf(stderr, "husk: admin key from HUSK_ADMIN_KEY\n");
  else
    fprintf(stderr, "husk: admin key in %s\n", keypath);
  fprintf(stderr, "husk: data in %s\n", data);
  if (s3)
    fprintf(stderr, "husk: S3 listening on %s (region %s, links on %s)\n", s3_url, s3_region,
            store_remote(store) ? store_endpoint : store_public_url(store));
  if (store_remote(store))
    fprintf(stderr, "husk: links and box transfers use the external store %s, bucket %s\n",
            store_endpoint, store_bucket);

  int sig = 0;
  while (sigwait(&set, &sig) != 0 || sig == SIGHUP) {
    /* SIGHUP: nothing to reload; keep serving. */
  }
  fprintf(stderr, "husk: %s: stopping (boxes keep running; the next start adopts them)\n",
          strsignal(sig));
  s3_stop(s3, (unsigned)grace_ms);
  api_stop(srv, (unsigned)grace_ms);
  mcp_server_free(mcp);
  store_close(store);
  box_mgr_close(mgr, false);
  state_close(st);
  fprintf(stderr, "husk: stopped\n");
  return 0;
}
