/* `husk user`: the users of a tenant of a running `husk serve`, through
 * its HTTP API (docs/oauth.md).  A thin client like `husk snapshot`: each
 * command is one request, its reply printed; the server does every check.
 * The tenant's key comes from HUSK_API_KEY only, a password from stdin
 * only (--password-stdin), so that neither shows in a process listing. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/api_client.h"
#include "cli/cli_common.h"
#include "husk/husk.h"
#include "util/cleanup.h"
#include "util/cleanup_json.h"

/* The longest password the server takes, and a byte to tell a longer one. */
#define USER_PASSWORD_READ 258

static void user_usage(FILE *f) {
  fprintf(f,
          "usage: husk user COMMAND [OPTIONS]\n"
          "\n"
          "The users of a tenant of a running husk serve, through its HTTP API: the people\n"
          "who sign in to MCP clients (Claude, ...) with OAuth (docs/oauth.md).\n"
          "\n"
          "Commands:\n"
          "  add NAME --role ROLE [--display-name TEXT] [--password-stdin]\n"
          "                  a new user (ROLE: viewer, member or admin); prints its id\n"
          "  list            the tenant's users, oldest first\n"
          "  show ID         one user (JSON)\n"
          "  set ID [--role ROLE] [--display-name TEXT] [--disable|--enable] [--password-stdin]\n"
          "                  change a user (a new role, password or disabling ends its\n"
          "                  sign-ins at once)\n"
          "  rm ID           delete a user (its audit history stays)\n"
          "\n"
          "Options:\n"
          "  --server URL    husk serve's API [$HUSK_URL, else " CLI_API_DEFAULT_SERVER "]\n"
          "  --password-stdin  read the password from standard input (one line; 12 to\n"
          "                  256 bytes)\n"
          "  --json          print the server's JSON reply (indented)\n"
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
  fprintf(stderr, "husk user: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, " (husk user --help)\n");
  va_end(ap);
  return 2;
}

/* The password: stdin up to its end or first newline (a trailing "\r"
 * dropped).  0, or 1 with the error printed. */
static int read_password(char *out, size_t size) {
  size_t n = 0;
  for (;;) {
    ssize_t k = read(0, out + n, size - 1 - n);
    if (k < 0 && errno == EINTR)
      continue;
    if (k < 0) {
      fprintf(stderr, "husk user: reading the password: %s\n", strerror(errno));
      return 1;
    }
    if (k == 0)
      break;
    n += (size_t)k;
    if (memchr(out, '\n', n) || n == size - 1)
      break;
  }
  out[n] = '\0';
  char *nl = strchr(out, '\n');
  if (nl)
    *nl = '\0';
  n = strlen(out);
  if (n && out[n - 1] == '\r')
    out[--n] = '\0';
  if (!nl && n == size - 1) {
    fprintf(stderr, "husk user: the password is longer than 256 bytes\n");
    return 1;
  }
  if (n == 0) {
    fprintf(stderr, "husk user: --password-stdin: no password on standard input\n");
    return 1;
  }
  return 0;
}

static int cmd_list(const char *server, bool as_json) {
  long st;
  cleanup_json json_t *page = NULL;
  if (cli_api_request("husk user", server, "GET", "/v1/users", NULL, &st, &page) != 0)
    return 1;
  json_t *all = json_object_get(page, "users");
  if (as_json) {
    cli_api_print_json(page);
    return 0;
  }
  printf("%-28s %-24s %-8s %-9s %s\n", "ID", "NAME", "ROLE", "DISABLED", "DISPLAY NAME");
  size_t i;
  json_t *u;
  json_array_foreach(all, i, u) {
    printf("%-28s %-24s %-8s %-9s %s\n", json_string_value(json_object_get(u, "id")),
           json_string_value(json_object_get(u, "name")),
           json_string_value(json_object_get(u, "role")),
           json_is_true(json_object_get(u, "disabled")) ? "yes" : "no",
           json_string_value(json_object_get(u, "display_name")));
  }
  return 0;
}

static void body_freep(char **p) {
  if (*p) {
    explicit_bzero(*p, strlen(*p)); /* it may hold the password */
    free(*p);
  }
}

int cmd_user(int argc, char **argv) {
  enum { O_SERVER = 256, O_ROLE, O_DISPLAY, O_PWSTDIN, O_DISABLE, O_ENABLE, O_JSON };
  static const struct option opts[] = {{"server", required_argument, NULL, O_SERVER},
                                       {"role", required_argument, NULL, O_ROLE},
                                       {"display-name", required_argument, NULL, O_DISPLAY},
                                       {"password-stdin", no_argument, NULL, O_PWSTDIN},
                                       {"disable", no_argument, NULL, O_DISABLE},
                                       {"enable", no_argument, NULL, O_ENABLE},
                                       {"json", no_argument, NULL, O_JSON},
                                       {"help", no_argument, NULL, 'h'},
                                       {"version", no_argument, NULL, 'V'},
                                       {0}};
  if (argc < 2) {
    user_usage(stderr);
    return 2;
  }
  const char *sub = argv[1];
  if (!strcmp(sub, "help") || !strcmp(sub, "--help") || !strcmp(sub, "-h")) {
    user_usage(stdout);
    return 0;
  }
  if (!strcmp(sub, "--version")) {
    printf("husk %s\n", HUSK_VERSION);
    return 0;
  }
  const char *server = getenv("HUSK_URL");
  if (!server || !*server)
    server = CLI_API_DEFAULT_SERVER;
  const char *operand = NULL, *role = NULL, *display = NULL;
  bool as_json = false, pw_stdin = false;
  int disable = -1;
  argc--, argv++;
  optind = 1;
  opterr = 0;
  for (;;) {
    int ch;
    while ((ch = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
      switch (ch) {
      case O_SERVER: server = optarg; break;
      case O_ROLE: role = optarg; break;
      case O_DISPLAY: display = optarg; break;
      case O_PWSTDIN: pw_stdin = true; break;
      case O_DISABLE:
      case O_ENABLE:
        if (disable >= 0 && disable != (ch == O_DISABLE))
          return usage_error("--disable and --enable: one or the other");
        disable = ch == O_DISABLE;
        break;
      case O_JSON: as_json = true; break;
      case 'h': user_usage(stdout); return 0;
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
  const char *key = getenv("HUSK_API_KEY");
  if (!key || !*key)
    return usage_error("set HUSK_API_KEY to the tenant's API key");
  bool add = !strcmp(sub, "add"), set = !strcmp(sub, "set");
  if (!strcmp(sub, "list")) {
    if (operand)
      return usage_error("list takes no operand (`%s`)", operand);
    return cmd_list(server, as_json);
  }
  if (!add && !set && strcmp(sub, "show") && strcmp(sub, "rm"))
    return usage_error("unknown command `%s`", sub);
  if (!operand)
    return usage_error("%s needs %s", sub, add ? "a user name" : "a user id");
  if (!add && !cli_api_id_ok(operand))
    return usage_error("`%s` is not a user id", operand);
  if (!add && !set && (role || display || pw_stdin || disable >= 0))
    return usage_error("%s takes no --role, --display-name, --password-stdin or --disable", sub);
  if (add && disable >= 0)
    return usage_error("add takes no --disable or --enable");
  if (add && !role)
    return usage_error("add needs --role (viewer, member or admin)");
  if (set && !role && !display && !pw_stdin && disable < 0)
    return usage_error("set needs something to change: --role, --display-name, --disable, "
                       "--enable or --password-stdin");
  char pw[USER_PASSWORD_READ + 1];
  pw[0] = '\0';
  if (pw_stdin && read_password(pw, sizeof pw) != 0)
    return 1;
  __attribute__((cleanup(body_freep))) char *body = NULL;
  cleanup_free char *path = NULL;
  const char *method = "GET";
  if (add || set) {
    cleanup_json json_t *b = json_object();
    if (!b)
      return 1;
    if (add)
      json_object_set_new(b, "name", json_string(operand));
    if (role)
      json_object_set_new(b, "role", json_string(role));
    if (display && json_object_set_new(b, "display_name", json_string(display)) < 0)
      return usage_error("--display-name is not valid UTF-8");
    if (pw_stdin && json_object_set_new(b, "password", json_string(pw)) < 0) {
      explicit_bzero(pw, sizeof pw);
      return usage_error("the password is not valid UTF-8");
    }
    if (disable >= 0)
      json_object_set_new(b, "disabled", json_boolean(disable));
    explicit_bzero(pw, sizeof pw);
    body = json_dumps(b, JSON_COMPACT);
    method = add ? "POST" : "PATCH";
    if (!body || (add ? !(path = strdup("/v1/users"))
                      : asprintf(&path, "/v1/users/%s", operand) < 0))
      return 1;
  } else {
    method = !strcmp(sub, "rm") ? "DELETE" : "GET";
    if (asprintf(&path, "/v1/users/%s", operand) < 0)
      return 1;
  }
  long st;
  cleanup_json json_t *reply = NULL;
  if (cli_api_request("husk user", server, method, path, body, &st, &reply) != 0)
    return 1;
  if (as_json && reply)
    cli_api_print_json(reply);
  else if (!strcmp(sub, "show") || set)
    cli_api_print_json(reply);
  else if (add)
    printf("%s\n", json_string_value(json_object_get(reply, "id")));
  return 0;
}
