/* `husk template`: the operator's templates of a data directory, shared
 * with every tenant of the `husk serve` that uses it and with `husk run
 * --template`.  Tenants import their own through the HTTP API.
 *
 *   husk template import FILE|DIR|- --name NAME [--data DIR]
 *   husk template create NAME --debian SUITE [--packages A,B] [--mirror URL]
 *   husk template build -f DOCKERFILE --name NAME [--build-arg K=V] [--egress-allow HOST]
 *                       [--no-cache] [CONTEXT_DIR]
 *   husk template export NAME FILE|-
 *   husk template list [--data DIR] [--json]
 *   husk template inspect NAME [--data DIR]
 *   husk template rm NAME [--data DIR]
 *
 * It opens the data directory's database and template store itself, so it
 * works beside a running `husk serve` (SQLite serialises the writes, the
 * store's lock keeps collection away from an import in progress). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "box/box.h"
#include "cli/cli_common.h"
#include "template/dockerfile.h"
#include "util/parse.h"

#include "state/state.h"
#include "state/template_state.h"
#include "template/template.h"
#include "util/cleanup.h"
#include "util/fileio.h"

static void template_usage(FILE *f) {
  fprintf(f, "usage: husk template COMMAND [OPTIONS]\n"
             "\n"
             "The operator's templates: the software boxes run, shared with every tenant.\n"
             "\n"
             "Commands:\n"
             "  import FILE|DIR|- --name NAME\n"
             "                an OCI archive, a Docker archive (docker/podman save; gzip or\n"
             "                zstd as well) or an OCI image layout directory; - reads stdin\n"
             "  create NAME --debian SUITE [--packages A,B,...] [--mirror URL]\n"
             "                a Debian root made with debootstrap (minbase) from the host's\n"
             "                apt mirror (or URL), with the packages named\n"
             "  build -f DOCKERFILE --name NAME [CONTEXT_DIR]\n"
             "                build a template from a Dockerfile: FROM a template, RUN steps\n"
             "                in boxes, COPY from CONTEXT_DIR; steps are cached.  Options:\n"
             "                --build-arg K=V, --egress-allow HOST (RUN steps reach HOST\n"
             "                through husk's proxy on ports 80 and 443; repeatable),\n"
             "                --egress-resolver IP[:PORT], --egress-allow-range CIDR,\n"
             "                --egress-ca-file FILE (the proxy's, as husk serve's),\n"
             "                --no-cache, --memory SIZE, --disk SIZE (each step's box).\n"
             "                Needs the data directory to itself: with husk serve\n"
             "                running, build through its API\n"
             "  export NAME FILE|-\n"
             "                the template as an OCI image archive (podman load, skopeo)\n"
             "  list [--json]  the templates\n"
             "  inspect NAME   one template: its layers, config and size, as JSON\n"
             "  rm NAME        delete it (refused while a box uses it)\n"
             "\n"
             "Options:\n"
             "  --data DIR     the data directory [./var/husk in the source tree, else\n"
             "                 /var/lib/husk]: the one `husk serve --data` uses\n"
             "  -h, --help     print this text\n"
             "  --version      print the version\n"
             "\n"
             "Boxes of a template: husk run's template option (husk-run(1)), or \"template\"\n"
             "in a sandbox create of husk serve (docs/templates.md).\n");
}

struct tctx {
  const char *data;
  struct state *st;
  struct template_store *ts;
};

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("husk template: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  return 1;
}

static void log_line(void *ctx, const char *line) {
  (void)ctx;
  fprintf(stderr, "husk template: %s\n", line);
}

static int open_store(struct tctx *c, struct husk_err *err) {
  if (mkdir_private(c->data, err) < 0)
    return -1;
  char db[PATH_MAX];
  if (snprintf(db, sizeof db, "%s/husk.db", c->data) >= (int)sizeof db)
    return husk_fail(err, ENAMETOOLONG, "data directory `%s` is too long", c->data);
  if (state_open(&c->st, db, err) < 0)
    return -1;
  struct template_store_config tc = {.data_dir = c->data, .state = c->st, .log = log_line};
  return template_store_open(&c->ts, &tc, err);
}

static void close_store(struct tctx *c) {
  template_store_close(c->ts);
  state_close(c->st);
}

static ssize_t fd_in(void *ctx, void *buf, size_t cap) { return read(*(int *)ctx, buf, cap); }

/* The operator's change, in the audit log as the API's are (tenant "":
 * the operator's; the detail says it came from the command line). */
static void audit(struct tctx *c, const char *action, const char *name, int rc) {
  char db[PATH_MAX + 16];
  struct husk_err err;
  struct state *st = NULL;
  if (snprintf(db, sizeof db, "%s/husk.db", c->data) >= (int)sizeof db ||
      state_open(&st, db, &err) < 0)
    return;
  struct state_audit rec = {0};
  snprintf(rec.action, sizeof rec.action, "%s", action);
  snprintf(rec.detail, sizeof rec.detail, "name=%s (husk template)", name);
  snprintf(rec.outcome, sizeof rec.outcome, "%s", rc == 0 ? "ok" : "error");
  if (state_audit_add(st, &rec, NULL, &err) < 0)
    fprintf(stderr, "husk template: the audit record: %s\n", err.msg);
  state_close(st);
}

/* The template on stdout (one line; `full`: indented, with its layers and
 * config), then freed. */
static void print_template(struct state_template *t, bool full) {
  json_t *j = template_json(t, full);
  char *text = j ? json_dumps(j, full ? JSON_INDENT(2) : JSON_COMPACT) : NULL;
  if (text)
    printf("%s\n", text);
  free(text);
  json_decref(j);
  state_template_free(t);
}

static int cmd_import(struct tctx *c, const char *src, const char *name) {
  struct husk_err err;
  if (!name)
    return fail("import: --name NAME is required");
  if (!template_name_ok(name))
    return fail("import: `%s` is not a template name (1 to 63 of a-z, 0-9, '.', '_', '-')", name);
  struct stat st;
  bool dir = strcmp(src, "-") && stat(src, &st) == 0 && S_ISDIR(st.st_mode);
  cleanup_close int fd = -1;
  if (!dir && strcmp(src, "-") && (fd = open(src, O_RDONLY | O_CLOEXEC)) < 0)
    return fail("import: cannot open `%s`: %s", src, strerror(errno));
  if (open_store(c, &err) < 0)
    return fail("%s", err.msg);
  struct state_template t;
  int in = fd >= 0 ? fd : STDIN_FILENO;
  int rc = dir ? template_import_layout(c->ts, "", name, src, &t, &err)
               : template_import_archive(c->ts, "", name, fd_in, &in, &t, &err);
  audit(c, "template.import", name, rc);
  if (rc < 0) {
    close_store(c);
    return fail("import: %s", err.msg);
  }
  print_template(&t, false);
  close_store(c);
  return 0;
}

static int cmd_create(struct tctx *c, const char *name, const char *suite, const char *packages,
                      const char *mirror) {
  if (!suite)
    return fail("create: --debian SUITE is required (the one source `create` has)");
  if (!template_name_ok(name))
    return fail("create: `%s` is not a template name (1 to 63 of a-z, 0-9, '.', '_', '-')", name);
  /* "a,b,c" -> a NULL-terminated list. */
  cleanup_free char *list = strdup(packages ? packages : "");
  cleanup_free char **pkgs = calloc(strlen(list) / 2 + 2, sizeof *pkgs);
  if (!list || !pkgs)
    return fail("out of memory");
  size_t n = 0;
  for (char *save, *p = strtok_r(list, ", ", &save); p; p = strtok_r(NULL, ", ", &save))
    pkgs[n++] = p;
  struct husk_err err;
  if (open_store(c, &err) < 0)
    return fail("%s", err.msg);
  struct template_debian d = {.suite = suite,
                              .packages = (const char *const *)pkgs,
                              .mirror = mirror,
                              .log_fd = STDERR_FILENO};
  struct state_template t;
  int rc = template_create_debian(c->ts, "", name, &d, &t, &err);
  audit(c, "template.create", name, rc);
  if (rc < 0) {
    close_store(c);
    return fail("create: %s", err.msg);
  }
  print_template(&t, false);
  close_store(c);
  return 0;
}

static int fd_out(void *ctx, const void *buf, size_t len) {
  return write_all(*(int *)ctx, buf, len);
}

static int cmd_export(struct tctx *c, const char *name, const char *dest) {
  if (!dest)
    return fail("export: FILE or - is required");
  struct husk_err err;
  if (open_store(c, &err) < 0)
    return fail("%s", err.msg);
  bool to_stdout = !strcmp(dest, "-");
  char tmp[PATH_MAX];
  snprintf(tmp, sizeof tmp, "%s.part", dest);
  int fd = to_stdout ? STDOUT_FILENO : open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    close_store(c);
    return fail("export: cannot create `%s`: %s", tmp, strerror(errno));
  }
  int rc = template_export(c->ts, "", name, fd_out, &fd, &err);
  close_store(c);
  if (!to_stdout) {
    if (rc == 0 && (fsync(fd) < 0 || rename(tmp, dest) < 0))
      rc = husk_error(&err, errno, "cannot write `%s`", dest);
    close(fd);
    if (rc < 0)
      unlink(tmp);
  }
  return rc < 0 ? fail("export: %s", err.msg) : 0;
}

struct build_opts {
  const char *dockerfile;
  char **args;
  size_t nargs;
  const char **hosts;
  size_t nhosts;
  struct box_egress_settings eg; /* the proxy's operator settings, as husk serve's */
  bool no_cache;
  struct husk_limits limits;
};

static void build_log(void *ctx, const char *buf, size_t len) {
  (void)ctx;
  fwrite(buf, 1, len, stdout);
  fflush(stdout);
}

static int cmd_build(struct tctx *c, const char *name, const char *context,
                     const struct build_opts *bo) {
  if (!name)
    return fail("build: --name NAME is required");
  if (!bo->dockerfile)
    return fail("build: -f DOCKERFILE is required");
  if (!template_name_ok(name))
    return fail("build: `%s` is not a template name (1 to 63 of a-z, 0-9, '.', '_', '-')", name);
  cleanup_close int dfd = open(bo->dockerfile, O_RDONLY | O_CLOEXEC);
  struct stat st;
  if (dfd < 0 || fstat(dfd, &st) < 0)
    return fail("build: cannot open `%s`: %s", bo->dockerfile, strerror(errno));
  if (st.st_size > DOCKERFILE_MAX_BYTES)
    return fail("build: `%s` is larger than %d bytes", bo->dockerfile, DOCKERFILE_MAX_BYTES);
  cleanup_free char *text = malloc((size_t)st.st_size + 1);
  ssize_t n = text ? read(dfd, text, (size_t)st.st_size) : -1;
  if (n < 0)
    return fail("build: cannot read `%s`: %s", bo->dockerfile, strerror(errno));
  cleanup_close int ctx = -1;
  if (context && (ctx = open(context, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
    return fail("build: cannot open the context `%s`: %s", context, strerror(errno));
  /* RUN steps reach these hosts through husk's proxy, nothing else. */
  cleanup_free char *policy = NULL;
  if (bo->nhosts && !(policy = box_build_egress_policy(bo->hosts, bo->nhosts)))
    return fail("out of memory");
  /* The steps' boxes: a manager of this data directory's own. */
  char self[PATH_MAX];
  ssize_t sl = readlink("/proc/self/exe", self, sizeof self - 1);
  if (sl < 0)
    return fail("build: cannot find the husk binary: %s", strerror(errno));
  self[sl] = '\0';
  struct husk_err err;
  struct husk_mgr_config mc = {.data_dir = c->data, .husk_binary = self};
  struct husk_mgr *m;
  if (husk_mgr_open_egress(&m, &mc, &bo->eg, &err) < 0) {
    if (err.code == EWOULDBLOCK)
      return fail("build: a husk serve holds `%s`: build through its API "
                  "(POST /v1/builds), or stop it",
                  c->data);
    return fail("build: %s", err.msg);
  }
  char tenant[HUSK_TENANT_ID_MAX];
  if (box_build_tenant(m, tenant, &err) < 0) {
    husk_mgr_close(m, true);
    return fail("build: %s", err.msg);
  }
  /* Step boxes a killed build left were ended when the manager opened
   * (box_reconcile: their metadata says husk.build). */
  struct box_build_req rq = {.tenant = tenant,
                             .owner = "",
                             .name = name,
                             .dockerfile = text,
                             .dockerfile_len = (size_t)n,
                             .build_args = bo->args,
                             .context = ctx,
                             .context_tar = -1,
                             .egress_json = policy,
                             .limits = bo->limits,
                             .no_cache = bo->no_cache,
                             .log = build_log,
                             .cancel_fd = -1};
  struct state_template t;
  int rc = box_build(m, &rq, &t, &err);
  husk_mgr_close(m, true);
  audit(c, "template.build", name, rc);
  if (rc < 0)
    return fail("build: %s", err.msg);
  print_template(&t, false);
  return 0;
}

static int list_cb(void *ctx, const struct state_template *t) {
  json_t *arr = ctx;
  if (!t->tenant_id[0]) /* the operator's: a tenant's own are the tenant's */
    json_array_append_new(arr, template_json(t, false));
  return 0;
}

static int cmd_list(struct tctx *c, bool as_json) {
  struct husk_err err;
  if (open_store(c, &err) < 0)
    return fail("%s", err.msg);
  json_t *arr = json_array();
  int rc = state_template_list(c->st, "", list_cb, arr, &err);
  close_store(c);
  if (rc < 0) {
    json_decref(arr);
    return fail("list: %s", err.msg);
  }
  if (as_json) {
    char *s = json_dumps(arr, JSON_COMPACT);
    printf("%s\n", s ? s : "[]");
    free(s);
  } else {
    printf("%-24s %-28s %12s  %s\n", "NAME", "ID", "SIZE", "SOURCE");
    size_t i;
    json_t *t;
    json_array_foreach(arr, i, t)
        printf("%-24s %-28s %12lld  %s\n", json_string_value(json_object_get(t, "name")),
               json_string_value(json_object_get(t, "id")),
               (long long)json_integer_value(json_object_get(t, "size")),
               json_string_value(json_object_get(t, "source")));
  }
  json_decref(arr);
  return 0;
}

static int cmd_inspect(struct tctx *c, const char *name) {
  struct husk_err err;
  if (open_store(c, &err) < 0)
    return fail("%s", err.msg);
  struct state_template t;
  int rc = state_template_get(c->st, "", name, false, &t, &err);
  close_store(c);
  if (rc < 0)
    return fail("inspect: %s", err.msg);
  print_template(&t, true);
  return 0;
}

static int cmd_rm(struct tctx *c, const char *name) {
  struct husk_err err;
  if (open_store(c, &err) < 0)
    return fail("%s", err.msg);
  int rc = template_delete(c->ts, "", name, &err);
  close_store(c);
  audit(c, "template.delete", name, rc);
  if (rc < 0)
    return fail("rm: %s", err.msg);
  return 0;
}

int cmd_template(int argc, char **argv) {
  enum {
    O_DATA = 256,
    O_NAME,
    O_JSON,
    O_DEBIAN,
    O_PACKAGES,
    O_MIRROR,
    O_BUILD_ARG,
    O_EGRESS,
    O_EG_RESOLVER,
    O_EG_ALLOW,
    O_EG_CA,
    O_NO_CACHE,
    O_MEMORY,
    O_DISK
  };
  static const struct option opts[] = {{"data", required_argument, NULL, O_DATA},
                                       {"name", required_argument, NULL, O_NAME},
                                       {"json", no_argument, NULL, O_JSON},
                                       {"debian", required_argument, NULL, O_DEBIAN},
                                       {"packages", required_argument, NULL, O_PACKAGES},
                                       {"mirror", required_argument, NULL, O_MIRROR},
                                       {"file", required_argument, NULL, 'f'},
                                       {"build-arg", required_argument, NULL, O_BUILD_ARG},
                                       {"egress-allow", required_argument, NULL, O_EGRESS},
                                       {"egress-resolver", required_argument, NULL, O_EG_RESOLVER},
                                       {"egress-allow-range", required_argument, NULL, O_EG_ALLOW},
                                       {"egress-ca-file", required_argument, NULL, O_EG_CA},
                                       {"no-cache", no_argument, NULL, O_NO_CACHE},
                                       {"memory", required_argument, NULL, O_MEMORY},
                                       {"disk", required_argument, NULL, O_DISK},
                                       {"help", no_argument, NULL, 'h'},
                                       {0}};
  const char *suite = NULL, *packages = NULL, *mirror = NULL;
  struct build_opts bo = {0};
  cleanup_free char **bargs = calloc((size_t)argc + 1, sizeof *bargs);
  cleanup_free const char **hosts = calloc((size_t)argc + 1, sizeof *hosts);
  cleanup_free const char **ranges = calloc((size_t)argc + 1, sizeof *ranges);
  if (!bargs || !hosts || !ranges)
    return fail("out of memory");
  bo.args = bargs;
  bo.hosts = hosts;
  bo.eg.allow = ranges;
  if (argc < 2) {
    template_usage(stderr);
    return 2;
  }
  const char *sub = argv[1];
  if (!strcmp(sub, "help") || !strcmp(sub, "--help") || !strcmp(sub, "-h")) {
    template_usage(stdout);
    return 0;
  }
  if (!strcmp(sub, "--version")) {
    printf("husk %s\n", HUSK_VERSION);
    return 0;
  }
  struct tctx c = {0};
  const char *name = NULL;
  bool as_json = false;
  int ch;
  optind = 1;
  opterr = 0;
  argc--, argv++;
  /* Options and up to two operands, in any order. */
  const char *ops[2] = {NULL, NULL};
  size_t nops = 0;
  for (;;) {
    while ((ch = getopt_long(argc, argv, "+hf:", opts, NULL)) != -1) {
      uint64_t v;
      struct husk_err perr;
      switch (ch) {
      case O_DATA: c.data = optarg; break;
      case O_NAME: name = optarg; break;
      case O_JSON: as_json = true; break;
      case O_DEBIAN: suite = optarg; break;
      case O_PACKAGES: packages = optarg; break;
      case O_MIRROR: mirror = optarg; break;
      case 'f': bo.dockerfile = optarg; break;
      case O_BUILD_ARG:
        if (!strchr(optarg, '='))
          return fail("--build-arg: NAME=VALUE");
        bargs[bo.nargs++] = optarg;
        break;
      case O_EGRESS: hosts[bo.nhosts++] = optarg; break;
      case O_EG_RESOLVER: bo.eg.resolver = optarg; break;
      case O_EG_ALLOW: ranges[bo.eg.nallow++] = optarg; break;
      case O_EG_CA: bo.eg.ca_file = optarg; break;
      case O_NO_CACHE: bo.no_cache = true; break;
      case O_MEMORY:
      case O_DISK:
        if (parse_size(optarg, &v, &perr) < 0)
          return fail("%s: %s", ch == O_MEMORY ? "--memory" : "--disk", perr.msg);
        if (ch == O_MEMORY)
          bo.limits.memory_bytes = v;
        else
          bo.limits.disk_bytes = v;
        break;
      case 'h': template_usage(stdout); return 0;
      default: return fail("unknown option `%s` (husk template --help)", argv[optind - 1]);
      }
    }
    if (optind >= argc)
      break;
    if (nops == 2)
      return fail("unexpected `%s` (husk template --help)", argv[optind]);
    ops[nops++] = argv[optind++];
  }
  const char *operand = ops[0];
  if (ops[1] && strcmp(sub, "export"))
    return fail("unexpected `%s` (husk template --help)", ops[1]);
  if (!c.data)
    c.data = cli_default_data_dir();
  if (!strcmp(sub, "import"))
    return operand ? cmd_import(&c, operand, name) : fail("import: FILE, DIR or - is required");
  if (!strcmp(sub, "export"))
    return operand ? cmd_export(&c, operand, ops[1]) : fail("export: NAME is required");
  if (!strcmp(sub, "build"))
    return cmd_build(&c, name, operand, &bo);
  if (!strcmp(sub, "create"))
    return operand ? cmd_create(&c, operand, suite, packages, mirror)
                   : fail("create: NAME is required");
  if (!strcmp(sub, "list") || !strcmp(sub, "ls"))
    return operand ? fail("list takes no operand") : cmd_list(&c, as_json);
  if (!strcmp(sub, "inspect"))
    return operand ? cmd_inspect(&c, operand) : fail("inspect: NAME is required");
  if (!strcmp(sub, "rm") || !strcmp(sub, "delete"))
    return operand ? cmd_rm(&c, operand) : fail("rm: NAME is required");
  return fail("unknown command `%s` (husk template --help)", sub);
}
