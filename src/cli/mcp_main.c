/* build/husk-mcp: `husk mcp`, the MCP server on stdio, for an MCP client's
 * configuration file (Claude Desktop, Claude Code...).
 *
 * Two modes:
 *   standalone (default)   boxes run on this machine, state in its own data
 *                          directory, everything at embedded defaults;
 *   --server URL --key K   a front for a running `husk serve`: each message
 *                          is forwarded to URL/mcp (src/cli/mcp_remote.c).
 *
 * Start-up is cheap and takes no lock: clients start throwaway processes to
 * probe a server, so the data directory, the database and the box manager
 * are opened on the first tool call that needs them.  stdout carries only
 * protocol messages: fd 1 is moved aside before anything else runs, and fd
 * 1 becomes stderr, so no library or child can write a stray byte to the
 * client. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "box/box.h"
#include "box/spawner.h"
#include "cli/mcp_remote.h"
#include "husk/husk.h"
#include "jail/limits.h"
#include "jail/privs.h"
#include "mcp/mcp.h"
#include "state/state.h"
#include "template/template.h"
#include "util/fileio.h"
#include "util/parse.h"

#define LOCAL_TENANT "mcp-local"

/* On FD: the protocol's stdout for --help (fd 1 is stderr by then),
 * stderr after a bad option. */
static void usage(int fd) {
  dprintf(fd,
          "usage: husk mcp [OPTIONS]\n"
          "\n"
          "Serve the Model Context Protocol on stdin/stdout (docs/mcp.md).\n"
          "\n"
          "  --data DIR         state and boxes of the standalone server\n"
          "                     [$XDG_STATE_HOME/husk-mcp, ~/.local/state/husk-mcp, or\n"
          "                     /var/lib/husk-mcp]\n"
          "  --wait SECONDS     longest a tool call waits before answering with a job_id [45]\n"
          "  --sandbox-ttl SECONDS  default lifetime of sandbox_create boxes [1800]\n"
          "  --server URL       forward to a running `husk serve` (its /mcp endpoint)\n"
          "  --key KEY          tenant key for --server (better: HUSK_MCP_KEY in the\n"
          "                     environment, which other users cannot read in ps)\n"
          "  --prompts DIR      serve the Markdown files of DIR as MCP prompts\n"
          "  --resources DIR    serve the files of DIR as read-only MCP resources\n"
          "                     (husk://docs/...)\n"
          "  --quiet            no log lines on stderr\n"
          "  -h, --help         print this text\n"
          "  --version          print the version\n");
}

static bool quiet;

static void log_line(void *ctx, const char *line) {
  (void)ctx;
  if (!quiet)
    fprintf(stderr, "husk mcp: %s\n", line);
}

/* ---- the core, opened on first use ------------------------------------------------ */

struct local {
  pthread_mutex_t lock;
  const char *data;
  struct state *st;
  struct template_store *templates;
  struct husk_mgr *mgr;
  char tenant[STATE_TENANT_ID_SIZE];
};

static int find_tenant(void *ctx, const struct state_tenant *t) {
  if (strcmp(t->name, LOCAL_TENANT) != 0)
    return 0;
  snprintf(ctx, STATE_TENANT_ID_SIZE, "%s", t->id);
  return 1;
}

static struct husk_mgr *local_mgr(void *ctx, struct husk_err *err) {
  struct local *l = ctx;
  pthread_mutex_lock(&l->lock);
  struct husk_mgr *m = l->mgr;
  if (m) {
    pthread_mutex_unlock(&l->lock);
    return m;
  }
  char db[PATH_MAX + 16];
  snprintf(db, sizeof db, "%s/husk.db", l->data);
  if (geteuid() != 0) {
    /* Boxes need root (uid ranges, cgroups, namespaces): say what to do. */
    husk_fail(err, EPERM, "standalone husk mcp runs boxes itself and must run as root; run "
              "`husk serve` as root and start this as `husk mcp --server URL` with HUSK_MCP_KEY");
    goto out;
  }
  if (mkdir_private(l->data, err) < 0 || (!l->st && state_open(&l->st, db, err) < 0))
    goto out;
  if (!l->tenant[0]) {
    struct state_tenant t;
    if (state_tenant_create(l->st, LOCAL_TENANT, STATE_UNLIMITED, STATE_UNLIMITED, &t, err) == 0)
      snprintf(l->tenant, sizeof l->tenant, "%s", t.id);
    else if (err->code != EEXIST || state_tenant_list(l->st, find_tenant, l->tenant, err) < 0)
      goto out;
    if (!l->tenant[0]) {
      husk_fail(err, ENOENT, "cannot find the local tenant");
      goto out;
    }
  }
  /* The operator's templates (husk template), for boxes of them. */
  struct template_store_config tc = {.data_dir = l->data, .state = l->st, .log = log_line};
  if (!l->templates && template_store_open(&l->templates, &tc, err) < 0)
    goto out;
  struct box_mgr_config mc = {
      .data_dir = l->data, .state = l->st, .templates = l->templates, .log = log_line};
  if (box_mgr_open(&l->mgr, &mc, err) < 0) {
    if (err->code == EWOULDBLOCK || err->code == EAGAIN)
      husk_fail(err, EBUSY, "another husk uses the data directory `%s` (a second `husk mcp`?). "
                "Run `husk serve` and point every client at it with `husk mcp --server`, or give "
                "this one its own --data", l->data);
    l->mgr = NULL;
    goto out;
  }
  m = l->mgr;
out:
  pthread_mutex_unlock(&l->lock);
  return m;
}

static void local_audit(void *ctx, const char *tool, const char *box_id, const char *detail, bool ok) {
  struct local *l = ctx;
  if (!l->st || !l->tenant[0])
    return;
  struct state_audit rec = {0};
  snprintf(rec.tenant_id, sizeof rec.tenant_id, "%s", l->tenant);
  snprintf(rec.action, sizeof rec.action, "mcp.%s", tool);
  snprintf(rec.box_id, sizeof rec.box_id, "%s", box_id ? box_id : "");
  snprintf(rec.detail, sizeof rec.detail, "%s", detail ? detail : "");
  snprintf(rec.outcome, sizeof rec.outcome, "%s", ok ? "ok" : "error");
  struct husk_err err;
  if (state_audit_add(l->st, &rec, NULL, &err) < 0)
    log_line(NULL, err.msg);
}

static json_t *local_handle(void *ctx, const struct mcp_msg *msg, const struct mcp_caller *c) {
  return mcp_handle(ctx, msg, c);
}

static const char *default_data(char *buf, size_t size) {
  const char *x = getenv("XDG_STATE_HOME"), *home = getenv("HOME");
  if (x && x[0] == '/')
    snprintf(buf, size, "%s/husk-mcp", x);
  else if (home && home[0] == '/' && strcmp(home, "/") != 0)
    snprintf(buf, size, "%s/.local/state/husk-mcp", home);
  else
    snprintf(buf, size, "/var/lib/husk-mcp");
  return buf;
}

enum { O_DATA = 256, O_WAIT, O_TTL, O_SERVER, O_KEY, O_QUIET, O_HELP, O_VERSION, O_PROMPTS, O_RESOURCES };

static bool local_gone(void *ctx, const struct mcp_caller *c) { return mcp_caller_gone(ctx, c); }

int main(int argc, char **argv) {
  /* The daemon's box spawner is this binary re-executed under that name. */
  if (argc >= 1 && !strcmp(argv[0], HUSK_SPAWNER_ARGV0))
    return spawner_main(3, argc > 1 ? argv[1] : NULL);
  /* No core file, no ptrace: this process holds tenant keys and, locally,
   * the daemon's secrets. */
  struct husk_err perr;
  if (privs_no_dumps(&perr) < 0) {
    fprintf(stderr, "husk mcp: %s\n", perr.msg);
    return 1;
  }
  /* The protocol's own copy of stdout; fd 1 becomes stderr for everything
   * else (libraries, children, the spawner). */
  int out = fcntl(1, F_DUPFD_CLOEXEC, 3);
  if (out < 0 || dup2(2, 1) < 0) {
    fprintf(stderr, "husk mcp: cannot set up stdout: %s\n", strerror(errno));
    return 1;
  }
  static const struct option opts[] = {
      {"data", required_argument, NULL, O_DATA},     {"wait", required_argument, NULL, O_WAIT},
      {"sandbox-ttl", required_argument, NULL, O_TTL}, {"server", required_argument, NULL, O_SERVER},
      {"key", required_argument, NULL, O_KEY},       {"quiet", no_argument, NULL, O_QUIET},
      {"help", no_argument, NULL, O_HELP},           {"version", no_argument, NULL, O_VERSION},
      {"prompts", required_argument, NULL, O_PROMPTS}, {"resources", required_argument, NULL, O_RESOURCES},
      {0},
  };
  const char *data = NULL, *server = NULL, *key = getenv("HUSK_MCP_KEY");
  const char *prompts = NULL, *resources = NULL;
  uint64_t wait_ms = 0, ttl_ms = 0;
  struct husk_err err;
  int c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    switch (c) {
    case O_DATA: data = optarg; break;
    case O_WAIT:
      if (parse_milli(optarg, 1, 3600 * 1000, &wait_ms, &err) < 0) {
        fprintf(stderr, "husk mcp: --wait: %s\n", err.msg);
        return 2;
      }
      break;
    case O_TTL:
      if (parse_milli(optarg, 60 * 1000, MCP_MAX_BOX_TTL_MS, &ttl_ms, &err) < 0) {
        fprintf(stderr, "husk mcp: --sandbox-ttl: %s\n", err.msg);
        return 2;
      }
      break;
    case O_SERVER: server = optarg; break;
    case O_KEY: key = optarg; break;
    case O_QUIET: quiet = true; break;
    case O_PROMPTS: prompts = optarg; break;
    case O_RESOURCES: resources = optarg; break;
    case 'h':
    case O_HELP: usage(out); return 0;
    case O_VERSION: dprintf(out, "husk %s\n", HUSK_VERSION); return 0;
    default: usage(STDERR_FILENO); return 2;
    }
  }
  if (optind < argc) {
    fprintf(stderr, "husk mcp: unexpected argument `%s`\n", argv[optind]);
    return 2;
  }
  signal(SIGPIPE, SIG_IGN);
  json_object_seed(0);
  if (server && (prompts || resources)) {
    fprintf(stderr, "husk mcp: with --server, prompts and resources are the server's "
                    "(husk serve --mcp-prompts, --mcp-resources)\n");
    return 2;
  }
  if (server) {
    if (!key || !*key) {
      fprintf(stderr, "husk mcp: --server needs a tenant key (HUSK_MCP_KEY or --key)\n");
      return 2;
    }
    return mcp_remote_main(server, key, out, log_line) < 0 ? 1 : 0;
  }
  char dbuf[PATH_MAX];
  struct local l = {.data = data ? data : default_data(dbuf, sizeof dbuf)};
  pthread_mutex_init(&l.lock, NULL);
  struct mcp_config cfg = {.mgr = local_mgr, .mgr_ctx = &l, .wait_ms = wait_ms,
                           .box_ttl_ms = ttl_ms, .log = log_line, .prompts_dir = prompts,
                           .resources_dir = resources};
  struct mcp_server *srv = NULL;
  if (mcp_server_new(&srv, &cfg, &err) < 0) {
    fprintf(stderr, "husk mcp: %s\n", err.msg);
    return 1;
  }
  /* Every caller is this process's one local tenant (filled at the open). */
  struct mcp_caller caller = {.tenant = l.tenant, .scope = "stdio", .key_id = "", .scopes = ~0u,
                              .audit = local_audit, .audit_ctx = &l, .cancel_fd = -1,
                              .gone = local_gone, .gone_ctx = srv};
  int rc = mcp_stdio_serve(0, out, local_handle, srv, &caller, &err);
  if (rc < 0)
    fprintf(stderr, "husk mcp: %s\n", err.msg);
  /* Boxes keep running (a later `husk mcp` adopts them); jobs too. */
  pthread_mutex_lock(&l.lock);
  if (l.mgr && rc == 0)
    box_mgr_close(l.mgr, false);
  l.mgr = NULL;
  pthread_mutex_unlock(&l.lock);
  /* Calls still in flight may hold the core: leave without unwinding it. */
  fflush(stderr);
  _exit(rc < 0 ? 1 : 0);
}
