/* The husk command line.  `husk run` is a thin front over husk_run(): it
 * parses options, calls the core once and reports the result. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "box/spawner.h"
#include "cli/cli_common.h"
#include "husk/husk.h"
#include "jail/limits.h"
#include "util/cleanup.h"
#include "util/parse.h"

static const char *prog = "husk";

/* `husk`, `husk help`, `husk --help`: the commands. */
static void usage(FILE *f) {
  fprintf(f, "usage: husk COMMAND [OPTIONS]\n"
             "\n"
             "Disposable, isolated computers for AI agents.\n"
             "\n"
             "Commands:\n"
             "  run [OPTIONS] [--] PROGRAM [ARGS...]\n"
             "                run PROGRAM in a fresh box and remove every trace of it afterwards\n"
             "  serve [OPTIONS]\n"
             "                long-lived boxes over HTTP, an S3-compatible store, MCP at /mcp\n"
             "  mcp [OPTIONS] the MCP server on stdio, standalone or in front of `husk serve`\n"
             "  template COMMAND\n"
             "                the software boxes run: import, build, export, list, rm\n"
             "  snapshot COMMAND\n"
             "                a running husk serve's snapshots: create, list, show, restore, rm\n"
             "  user COMMAND  a running husk serve's users (OAuth sign-in): add, list, show, set, rm\n"
             "  version       print the version\n"
             "  help          print this text\n"
             "\n"
             "`husk COMMAND --help` lists the options of a command; husk(1), husk-run(1),\n"
             "husk-template(1), husk-snapshot(1), husk-user(1), husk-serve(1) and husk-mcp(1) say\n"
             "more.\n");
}

/* `husk run --help`: the options of a run. */
static void run_usage(FILE *f) {
  fprintf(f, "usage: husk run [OPTIONS] [--] PROGRAM [ARGS...]\n"
             "       husk run --template NAME [OPTIONS] [[--] PROGRAM [ARGS...]]\n"
             "       husk run --from-snapshot ID [OPTIONS] [--] PROGRAM [ARGS...]\n"
             "\n"
             "Run PROGRAM in a fresh, isolated box and remove every trace of the box afterwards.\n"
             "\n"
             "Options (defaults in brackets):\n"
             "  --memory SIZE        memory limit, files in /workspace and /tmp included [512M]\n"
             "  --pids N             max processes and threads [256]\n"
             "  --cpus FLOAT         CPU bandwidth, e.g. 0.5 or 2 [1]\n"
             "  --timeout SECONDS    wall-time limit, fractions allowed [300]\n"
             "  --disk SIZE          writable space for /workspace, /tmp, /dev/shm [1G]\n"
             "  --output-limit SIZE  stdout+stderr cap; the box is killed past it [16M]\n"
             "  --env NAME=VALUE     set an environment variable (repeatable)\n"
             "  -w, --workdir PATH   working directory inside the box [/workspace]\n"
             "  --workspace DIR      copy DIR's contents into /workspace before the run\n"
             "  --export DIR         copy /workspace out to DIR after the run\n"
             "  --template NAME      the box's software: a template of the data directory\n"
             "                       (husk template); its image's Entrypoint and Cmd run when\n"
             "                       no PROGRAM is given [default: the host's /usr]\n"
             "  --from-snapshot ID   start with the files of snapshot ID (husk serve's\n"
             "                       POST /v1/sandboxes/{id}/snapshots), of its template,\n"
             "                       with its env and working directory\n"
             "  --data DIR           where templates and snapshots are kept [./var/husk in\n"
             "                       the source tree, else /var/lib/husk]\n"
             "  --json               print a JSON summary as the last line on stderr\n"
             "  -h, --help           print this text\n"
             "  --version            print the version\n"
             "\n"
             "SIZE: bytes, or with K, M, G, T (binary units).\n"
             "Exit status: the program's; 128+N if killed by signal N; 124 on timeout;\n"
             "137 when the memory, pids or output limit killed the box; 125 if husk failed;\n"
             "126 not executable; 127 not found.\n");
}

static int print_version(void) {
  printf("husk %s\n", HUSK_VERSION);
  return 0;
}

/* --json was given: errors before the run still end with the JSON line. */
static bool want_json;
static void print_json(const struct husk_run_result *r, bool newline_first);

static int die_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int die_usage(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "%s: ", prog);
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, " (see `husk run --help`)\n");
  va_end(ap);
  if (want_json) {
    struct husk_run_result r = {.exit_code = 125, .reason = HUSK_REASON_SETUP_ERROR};
    print_json(&r, false);
  }
  return 125;
}

/* Which of fds 0..2 husk was started without (see main). */
static bool stdio_closed[3];

static void warn_line(void *ctx, const char *line) {
  (void)ctx;
  fprintf(stderr, "%s: %s\n", prog, line);
}

static void print_json(const struct husk_run_result *r, bool newline_first) {
  if (newline_first)
    fputc('\n', stderr); /* the program's stderr ended mid-line */
  json_t *o = json_pack("{s:i, s:i, s:s, s:I, s:I, s:I}", "exit_code", r->exit_code, "signal",
                        r->signal, "reason", husk_reason_name(r->reason), "wall_ms",
                        (json_int_t)r->wall_ms, "cpu_ms", (json_int_t)r->cpu_ms,
                        "memory_peak_bytes", (json_int_t)r->memory_peak_bytes);
  if (!o) {
    fprintf(stderr, "{\"exit_code\":%d}\n", r->exit_code);
    return;
  }
  char *s = json_dumps(o, JSON_COMPACT);
  if (s)
    fprintf(stderr, "%s\n", s);
  free(s);
  json_decref(o);
}

enum {
  OPT_MEMORY = 256,
  OPT_PIDS,
  OPT_CPUS,
  OPT_TIMEOUT,
  OPT_DISK,
  OPT_OUTPUT,
  OPT_ENV,
  OPT_WORKSPACE,
  OPT_EXPORT,
  OPT_TEMPLATE,
  OPT_DATA,
  OPT_SNAPSHOT,
  OPT_JSON,
  OPT_HELP,
  OPT_VERSION,
};

static int cmd_run(int argc, char **argv) {
  static const struct option opts[] = {
      {"memory", required_argument, NULL, OPT_MEMORY},
      {"pids", required_argument, NULL, OPT_PIDS},
      {"cpus", required_argument, NULL, OPT_CPUS},
      {"timeout", required_argument, NULL, OPT_TIMEOUT},
      {"disk", required_argument, NULL, OPT_DISK},
      {"output-limit", required_argument, NULL, OPT_OUTPUT},
      {"env", required_argument, NULL, OPT_ENV},
      {"workdir", required_argument, NULL, 'w'},
      {"workspace", required_argument, NULL, OPT_WORKSPACE},
      {"export", required_argument, NULL, OPT_EXPORT},
      {"template", required_argument, NULL, OPT_TEMPLATE},
      {"data", required_argument, NULL, OPT_DATA},
      {"from-snapshot", required_argument, NULL, OPT_SNAPSHOT},
      {"json", no_argument, NULL, OPT_JSON},
      {"help", no_argument, NULL, OPT_HELP},
      {"version", no_argument, NULL, OPT_VERSION},
      {0},
  };
  struct husk_run_spec spec = {.stdin_fd = stdio_closed[0] ? -1 : STDIN_FILENO,
                               .stdout_fd = stdio_closed[1] ? -1 : STDOUT_FILENO,
                               .stderr_fd = stdio_closed[2] ? -1 : STDERR_FILENO, .warn = warn_line};
  bool json = false;
  struct husk_err err;
  cleanup_free char **env = calloc((size_t)argc + 1, sizeof *env);
  size_t nenv = 0;
  if (!env)
    return die_usage("out of memory");
  /* Find --json among husk's own options first, so that even an error in
   * a later option is reported with the JSON line. */
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--"))
      break;
    if (!strcmp(a, "--json")) {
      want_json = true;
      break;
    }
    if (a[0] != '-')
      break; /* PROGRAM */
    if (!strchr(a, '=') && (!strcmp(a, "-w") || (a[1] == '-' && a[2]))) {
      for (const struct option *o = opts; o->name; o++)
        if (!strcmp(a + 2, o->name) && o->has_arg == required_argument)
          i++; /* skip its value */
      if (!strcmp(a, "-w"))
        i++;
    }
  }
  int c;
  optind = 1;
  opterr = 0; /* our messages, one line each */
  while ((c = getopt_long(argc, argv, "+:w:h", opts, NULL)) != -1) {
    uint64_t v;
    switch (c) {
    case OPT_MEMORY:
      if (parse_size(optarg, &v, &err) < 0)
        return die_usage("--memory: %s", err.msg);
      if (v < HUSK_MIN_MEMORY || v > HUSK_MAX_MEMORY)
        return die_usage("--memory: %s is out of range [8M, 1T]", optarg);
      spec.limits.memory_bytes = v;
      break;
    case OPT_PIDS:
      if (parse_u64_range(optarg, HUSK_MIN_PIDS, HUSK_MAX_PIDS, &v, &err) < 0)
        return die_usage("--pids: %s", err.msg);
      spec.limits.pids = v;
      break;
    case OPT_CPUS:
      if (parse_milli(optarg, HUSK_MIN_CPU_MILLI, HUSK_MAX_CPU_MILLI, &v, &err) < 0)
        return die_usage("--cpus: %s", err.msg);
      spec.limits.cpu_milli = v;
      break;
    case OPT_TIMEOUT:
      if (parse_milli(optarg, 1, HUSK_MAX_TIMEOUT_MS, &v, &err) < 0)
        return die_usage("--timeout: %s", err.msg);
      spec.limits.timeout_ms = v;
      break;
    case OPT_DISK:
      if (parse_size(optarg, &v, &err) < 0)
        return die_usage("--disk: %s", err.msg);
      if (v < HUSK_MIN_DISK || v > HUSK_MAX_DISK)
        return die_usage("--disk: %s is out of range [1M, 1T]", optarg);
      spec.limits.disk_bytes = v;
      break;
    case OPT_OUTPUT:
      if (parse_size(optarg, &v, &err) < 0)
        return die_usage("--output-limit: %s", err.msg);
      if (v < 1 || v > HUSK_MAX_OUTPUT)
        return die_usage("--output-limit: %s is out of range [1, 64G]", optarg);
      spec.limits.output_bytes = v;
      break;
    case OPT_ENV:
      if (parse_env_assignment(optarg, &err) < 0)
        return die_usage("--env: %s", err.msg);
      env[nenv++] = optarg;
      break;
    case 'w':
      if (optarg[0] != '/')
        return die_usage("--workdir: `%s` must be an absolute path inside the box", optarg);
      spec.workdir = optarg;
      break;
    case OPT_WORKSPACE: spec.workspace_in = optarg; break;
    case OPT_EXPORT: spec.export_dir = optarg; break;
    case OPT_TEMPLATE: spec.template_name = optarg; break;
    case OPT_DATA: spec.data_dir = optarg; break;
    case OPT_SNAPSHOT: spec.snapshot = optarg; break;
    case OPT_JSON: json = true; break;
    case 'h':
    case OPT_HELP: run_usage(stdout); return 0;
    case OPT_VERSION: return print_version();
    case ':':
      return die_usage("option `%s` needs a value", argv[optind - 1]);
    default:
      return die_usage("unknown option `%s`", argv[optind - 1]);
    }
  }
  bool image = spec.template_name && strcmp(spec.template_name, "default");
  if (optind >= argc && !image)
    return die_usage("no PROGRAM given");
  if ((image || spec.snapshot) && !spec.data_dir)
    spec.data_dir = cli_default_data_dir();
  spec.argv = optind < argc ? argv + optind : NULL;
  spec.env = env;
  struct husk_run_result res;
  int code = husk_run(&spec, &res);
  if (res.message[0])
    fprintf(stderr, "%s: %s\n", prog, res.message);
  if (json)
    print_json(&res, res.stderr_open_line);
  return code;
}

/* `husk serve` runs husk-serve, `husk mcp` husk-mcp: the ones next to this
 * binary (a build tree), else the installed ones (make install puts them
 * in LIBEXECDIR). */
#ifndef HUSK_LIBEXECDIR
#define HUSK_LIBEXECDIR "/usr/lib/husk"
#endif
static int exec_sibling(const char *name, char **argv) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n < 0) {
    fprintf(stderr, "%s: cannot find my own binary: %s\n", prog, strerror(errno));
    return 125;
  }
  self[n] = '\0';
  char *slash = strrchr(self, '/');
  char path[PATH_MAX + 16];
  snprintf(path, sizeof path, "%.*s/%s", slash ? (int)(slash - self) : 1, slash ? self : ".", name);
  execv(path, argv);
  char installed[PATH_MAX + 16];
  snprintf(installed, sizeof installed, "%s/%s", HUSK_LIBEXECDIR, name);
  execv(installed, argv);
  fprintf(stderr, "%s: cannot run `%s` nor `%s`: %s (it is built and installed with husk)\n",
          prog, path, installed, strerror(errno));
  return 125;
}

int main(int argc, char **argv) {
  /* `husk serve` and `husk mcp` run this small binary as their box
   * spawner (src/box/spawner.h): every box's init is a copy of it. */
  if (argc >= 1 && !strcmp(argv[0], HUSK_SPAWNER_ARGV0))
    return spawner_main(3, argc > 1 ? argv[1] : NULL);
  /* A closed 0, 1 or 2 would be reused by the next open() and relayed as
   * if it were stdio: hold them with /dev/null and remember. */
  for (int fd = 0; fd < 3; fd++) {
    if (fcntl(fd, F_GETFD) >= 0 || errno != EBADF)
      continue;
    stdio_closed[fd] = true;
    int n = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (n >= 0 && n != fd) {
      dup2(n, fd);
      close(n);
    }
  }
  if (argc < 2) {
    usage(stderr);
    return 125;
  }
  if (!strcmp(argv[1], "run"))
    return cmd_run(argc - 1, argv + 1);
  if (!strcmp(argv[1], "template"))
    return cmd_template(argc - 1, argv + 1);
  if (!strcmp(argv[1], "snapshot"))
    return cmd_snapshot(argc - 1, argv + 1);
  if (!strcmp(argv[1], "user"))
    return cmd_user(argc - 1, argv + 1);
  if (!strcmp(argv[1], "serve"))
    return exec_sibling("husk-serve", argv + 1);
  if (!strcmp(argv[1], "mcp"))
    return exec_sibling("husk-mcp", argv + 1);
  if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version"))
    return print_version();
  if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(stdout);
    return 0;
  }
  fprintf(stderr, "%s: unknown command `%s`\n", prog, argv[1]);
  usage(stderr);
  return 125;
}
