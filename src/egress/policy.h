/* A box's egress policy: which destinations it may reach through the proxy,
 * how (tunnel or inject), and which secrets it holds placeholders for.
 *
 * JSON (the `egress` object of a box create request):
 *   {"rules":   [{"host": "api.example.com" | "*.example.com",
 *                 "ports": [443],            default [443]
 *                 "mode": "tunnel" | "inject"}],   default "tunnel"
 *    "secrets": [{"name": "GITHUB_TOKEN",    vault secret (and env var)
 *                 "env": "GH_TOKEN",         env var name, default = name
 *                 "hosts": ["api.github.com"],  patterns as in rules
 *                 "headers": ["Authorization"]}]}  default [Authorization]
 *
 * `*.suffix` matches every name strictly below suffix, never suffix itself.
 * Rules only narrow: the deny set (host.h) applies whatever they say. */
#ifndef HUSK_EGRESS_POLICY_H
#define HUSK_EGRESS_POLICY_H

#include <stdbool.h>
#include <stddef.h>

#include "egress/host.h"
#include "util/error.h"

#define EGRESS_MAX_RULES 64
#define EGRESS_MAX_PORTS 16
#define EGRESS_MAX_BINDINGS 16
#define EGRESS_MAX_BINDING_HOSTS 16
#define EGRESS_MAX_BINDING_HEADERS 8
#define EGRESS_PLACEHOLDER_LEN 41 /* "husk_ph_" + 32 hex, + NUL */

enum egress_mode { EGRESS_TUNNEL = 0, EGRESS_INJECT = 1 };

struct egress_pattern {
  char host[EGRESS_HOST_MAX]; /* canonical; for a wildcard, the suffix without "*." */
  bool wildcard;
};

struct egress_rule {
  struct egress_pattern pat;
  unsigned ports[EGRESS_MAX_PORTS];
  size_t nports;
  enum egress_mode mode;
};

struct egress_binding {
  char name[65];   /* secret name in the tenant's vault */
  char env[65];    /* env var holding the placeholder */
  char placeholder[EGRESS_PLACEHOLDER_LEN];
  struct egress_pattern hosts[EGRESS_MAX_BINDING_HOSTS];
  size_t nhosts;
  char headers[EGRESS_MAX_BINDING_HEADERS][65]; /* lowercase */
  size_t nheaders;
};

struct egress_policy {
  struct egress_rule rules[EGRESS_MAX_RULES];
  size_t nrules;
  struct egress_binding bindings[EGRESS_MAX_BINDINGS];
  size_t nbindings;
};

/* Parse and validate.  With `with_placeholders` (a stored policy) each
 * binding must carry its placeholder; otherwise fresh random ones are
 * made.  EINVAL with a message naming the bad field. */
int egress_policy_parse(const char *json, bool with_placeholders, struct egress_policy *out,
                        struct husk_err *err);
/* The policy as JSON, placeholders included (for the database).  malloc'd. */
char *egress_policy_to_json(const struct egress_policy *p);

bool egress_pattern_match(const struct egress_pattern *pat, const char *host);

/* The first rule that allows host:port, or NULL. */
const struct egress_rule *egress_policy_match(const struct egress_policy *p, const char *host,
                                              unsigned port);
/* Does any rule name this host (any port)?  The DNS stub's question. */
bool egress_policy_names(const struct egress_policy *p, const char *host);

#endif
