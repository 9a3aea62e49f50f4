/* `husk snapshot`: the snapshots of a running `husk serve`, through its
 * HTTP API (snapshots live in the daemon's store and are taken of boxes
 * only the daemon runs).  A thin client: each command is one request, its
 * reply printed; the server does every check.  The tenant's key comes from
 * HUSK_API_KEY only, so it never shows in a process listing. */
#define _GNU_SOURCE
#include <getopt.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/api_client.h"
#include "cli/cli_common.h"
#include "husk/husk.h"
#include "util/cleanup.h"
#include "util/cleanup_json.h"


static void snapshot_usage(FILE *f) {
  fprintf(f,
          "usage: husk snapshot COMMAND [OPTIONS]\n"
          "\n"
          "The snapshots of a running husk serve, through its HTTP API.\n"
          "\n"
          "Commands:\n"
          "  create SANDBOX [--metadata KEY=VALUE]...\n"
          "                  snapshot a running or paused sandbox; prints the snapshot's id\n"
          "  list [--sandbox SANDBOX]\n"
          "                  the tenant's snapshots, oldest first\n"
          "  show ID         one snapshot (JSON)\n"
          "  restore ID      a new sandbox with the snapshot's files; prints its id\n"
          "  rm ID           delete a snapshot (refused while a live sandbox was made from it)\n"
          "\n"
          "Options:\n"
          "  --server URL    husk serve's API [$HUSK_URL, else " CLI_API_DEFAULT_SERVER "]\n"
          "  --metadata KEY=VALUE\n"
          "                  create: a label of the snapshot (repeatable)\n"
          "  --sandbox ID    list: only that sandbox's snapshots\n"
          "  --json          print the server's JSON reply as it is\n"
          "  -h, --help      print this text\n"
          "  --version       print the version\n"
          "\n"
          "The tenant's API key is read from HUSK_API_KEY (never from the command line).\n"
          "Exit status: 0; 1 when the server refused (its error is printed); 2 on bad usage.\n");
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "husk snapshot: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, " (husk snapshot --help)\n");
  va_end(ap);
  return 2;
}

static int cmd_list(const char *server, const char *box, bool as_json) {
  if (box && !cli_api_id_ok(box))
    return usage_error("`%s` is not a sandbox id", box);
  cleanup_json json_t *all = json_array();
  if (!all)
    return 1;
  cleanup_free char *cursor = NULL;
  for (;;) {
    cleanup_free char *path = NULL;
    if (asprintf(&path, "/v1/snapshots?limit=1000%s%s%s%s", box ? "&sandbox=" : "", box ? box : "",
                 cursor ? "&cursor=" : "", cursor ? cursor : "") < 0)
      return 1;
    long st;
    cleanup_json json_t *page = NULL;
    if (cli_api_request("husk snapshot", server, "GET", path, NULL, &st, &page) != 0)
      return 1;
    json_array_extend(all, json_object_get(page, "snapshots"));
    const char *next = json_string_value(json_object_get(page, "next_cursor"));
    free(cursor);
    cursor = next && *next && strspn(next, "0123456789.s_abcdef") == strlen(next) ? strdup(next)
                                                                                    : NULL;
    if (!cursor)
      break;
  }
  if (as_json) {
    cli_api_print_json(all);
    return 0;
  }
  printf("%-28s %-28s %12s %-24s %s\n", "ID", "SANDBOX", "SIZE", "CREATED", "BOXES");
  size_t i;
  json_t *s;
  json_array_foreach(all, i, s) {
    printf("%-28s %-28s %12lld %-24s %lld\n", json_string_value(json_object_get(s, "id")),
           json_string_value(json_object_get(s, "sandbox")),
           (long long)json_integer_value(json_object_get(s, "size")),
           json_string_value(json_object_get(s, "created_at")),
           (long long)json_integer_value(json_object_get(s, "boxes")));
  }
  return 0;
}

int cmd_snapshot(int argc, char **argv) {
  enum { O_SERVER = 256, O_METADATA, O_SANDBOX, O_JSON };
  static const struct option opts[] = {{"server", required_argument, NULL, O_SERVER},
                                       {"metadata", required_argument, NULL, O_METADATA},
                                       {"sandbox", required_argument, NULL, O_SANDBOX},
                                       {"json", no_argument, NULL, O_JSON},
                                       {"help", no_argument, NULL, 'h'},
                                       {"version", no_argument, NULL, 'V'},
                                       {0}};
  if (argc < 2) {
    snapshot_usage(stderr);
    return 2;
  }
  const char *sub = argv[1];
  if (!strcmp(sub, "help") || !strcmp(sub, "--help") || !strcmp(sub, "-h")) {
    snapshot_usage(stdout);
    return 0;
  }
  if (!strcmp(sub, "--version")) {
    printf("husk %s\n", HUSK_VERSION);
    return 0;
  }
  const char *server = getenv("HUSK_URL");
  if (!server || !*server)
    server = CLI_API_DEFAULT_SERVER;
  const char *box = NULL, *operand = NULL;
  bool as_json = false;
  cleanup_json json_t *meta = json_object();
  argc--, argv++;
  optind = 1;
  opterr = 0;
  for (;;) {
    int ch;
    while ((ch = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
      switch (ch) {
      case O_SERVER: server = optarg; break;
      case O_SANDBOX: box = optarg; break;
      case O_JSON: as_json = true; break;
      case O_METADATA: {
        const char *eq = strchr(optarg, '=');
        if (!eq || eq == optarg)
          return usage_error("--metadata takes KEY=VALUE, not `%s`", optarg);
        cleanup_free char *k = strndup(optarg, (size_t)(eq - optarg));
        if (!k || json_object_set_new(meta, k, json_string(eq + 1)) < 0)
          return usage_error("--metadata `%s` is not valid UTF-8", optarg);
        break;
      }
      case 'h': snapshot_usage(stdout); return 0;
      case 'V': printf("husk %s\n", HUSK_VERSION); return 0;
      case ':': return usage_error("option `%s` needs a value", argv[optind - 1]);
      default: return usage_error("unknown option `%s`", argv[optind - 1]);
      }
    }
    if (optind >= argc)
      break;
    if (operand)
      return usage_error("one operand only: `%s` is one too many", argv[optind]);
    operand = argv[optind++];
  }
  if (!strcmp(sub, "list")) {
    if (operand)
      return usage_error("list takes no operand (`%s`)", operand);
    return cmd_list(server, box, as_json);
  }
  bool known = !strcmp(sub, "create") || !strcmp(sub, "show") || !strcmp(sub, "restore") ||
               !strcmp(sub, "rm");
  if (!known)
    return usage_error("unknown command `%s`", sub);
  if (!operand)
    return usage_error("%s needs an id", sub);
  if (!cli_api_id_ok(operand))
    return usage_error("`%s` is not an id", operand);
  cleanup_free char *path = NULL, *body = NULL;
  const char *method = "GET";
  if (!strcmp(sub, "create")) {
    method = "POST";
    cleanup_json json_t *b = json_pack("{s:O}", "metadata", meta);
    body = b ? json_dumps(b, JSON_COMPACT) : NULL;
    if (asprintf(&path, "/v1/sandboxes/%s/snapshots", operand) < 0 || !body)
      return 1;
  } else if (!strcmp(sub, "restore")) {
    method = "POST";
    cleanup_json json_t *b = json_pack("{s:s}", "snapshot", operand);
    body = b ? json_dumps(b, JSON_COMPACT) : NULL;
    if (!(path = strdup("/v1/sandboxes")) || !body)
      return 1;
  } else {
    method = !strcmp(sub, "rm") ? "DELETE" : "GET";
    if (asprintf(&path, "/v1/snapshots/%s", operand) < 0)
      return 1;
  }
  long st;
  cleanup_json json_t *reply = NULL;
  if (cli_api_request("husk snapshot", server, method, path, body, &st, &reply) != 0)
    return 1;
  if (as_json && reply)
    cli_api_print_json(reply);
  else if (!strcmp(sub, "show"))
    cli_api_print_json(reply);
  else if (!strcmp(sub, "create") || !strcmp(sub, "restore"))
    printf("%s\n", json_string_value(json_object_get(reply, "id")));
  return 0;
}
