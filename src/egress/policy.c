/* Egress policy: parsing, preparing a new box's, and matching (see
 * policy.h). */
#define _GNU_SOURCE
#include "egress/policy.h"
#include "egress/vault.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "egress/egress.h"
#include "util/id.h"

static int pattern_parse(const char *s, struct egress_pattern *out, const char *what,
                         struct husk_err *err) {
  memset(out, 0, sizeof *out);
  if (!s)
    return husk_fail(err, EINVAL, "%s: host must be a string", what);
  size_t len = strlen(s);
  if (len >= 2 && s[0] == '*' && s[1] == '.') {
    out->wildcard = true;
    s += 2;
    len -= 2;
  }
  struct egress_host h;
  if (egress_host_parse(s, len, true, &h, err) < 0)
    return husk_error_wrap(err, "%s: host `%.64s`", what, s);
  if (out->wildcard && h.kind != EGRESS_HOST_NAME)
    return husk_fail(err, EINVAL, "%s: a wildcard needs a name suffix, not an address", what);
  if (out->wildcard && !strchr(h.name, '.'))
    return husk_fail(err, EINVAL, "%s: `*.%s` is too broad (a suffix needs at least two labels)",
                     what, h.name);
  snprintf(out->host, sizeof out->host, "%s", h.name);
  return 0;
}

bool egress_pattern_match(const struct egress_pattern *pat, const char *host) {
  if (!pat->wildcard)
    return !strcmp(pat->host, host);
  size_t hl = strlen(host), sl = strlen(pat->host);
  return hl > sl + 1 && host[hl - sl - 1] == '.' && !strcmp(host + hl - sl, pat->host);
}

static bool header_name_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 64)
    return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-'))
      return false;
  }
  /* Routing and framing headers are never a place for a secret. */
  static const char *const never[] = {"host", "content-length", "transfer-encoding", "connection",
                                      "upgrade", "te", "trailer", "keep-alive", "proxy-authorization",
                                      "proxy-connection", "expect"};
  for (size_t i = 0; i < sizeof never / sizeof never[0]; i++)
    if (!strcasecmp(s, never[i]))
      return false;
  return true;
}

static bool env_name_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > 64 || (s[0] >= '0' && s[0] <= '9'))
    return false;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
      return false;
  }
  return true;
}

/* "husk_ph_" and 16 random bytes in hex. */
static int make_placeholder(char out[EGRESS_PLACEHOLDER_LEN], struct husk_err *err) {
  return id_new("husk_ph_", 16, out, EGRESS_PLACEHOLDER_LEN, err);
}

static bool placeholder_ok(const char *s) {
  if (strlen(s) != EGRESS_PLACEHOLDER_LEN - 1 || strncmp(s, "husk_ph_", 8))
    return false;
  for (const char *p = s + 8; *p; p++)
    if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
      return false;
  return true;
}

static int parse_rule(json_t *r, size_t idx, struct egress_rule *out, struct husk_err *err) {
  char what[48];
  snprintf(what, sizeof what, "egress.rules[%zu]", idx);
  if (!json_is_object(r))
    return husk_fail(err, EINVAL, "%s must be an object", what);
  const char *k;
  json_t *v;
  json_object_foreach(r, k, v) {
    if (strcmp(k, "host") && strcmp(k, "ports") && strcmp(k, "mode"))
      return husk_fail(err, EINVAL, "%s: unknown field `%.32s` (host, ports, mode)", what, k);
  }
  if (pattern_parse(json_string_value(json_object_get(r, "host")), &out->pat, what, err) < 0)
    return -1;
  json_t *ports = json_object_get(r, "ports");
  if (!ports) {
    out->ports[0] = 443;
    out->nports = 1;
  } else {
    if (!json_is_array(ports) || json_array_size(ports) == 0 ||
        json_array_size(ports) > EGRESS_MAX_PORTS)
      return husk_fail(err, EINVAL, "%s: ports must be a list of 1 to %d ports", what,
                       EGRESS_MAX_PORTS);
    size_t i;
    json_t *p;
    json_array_foreach(ports, i, p) {
      if (!json_is_integer(p) || json_integer_value(p) < 1 || json_integer_value(p) > 65535)
        return husk_fail(err, EINVAL, "%s: ports must be integers 1..65535", what);
      out->ports[out->nports++] = (unsigned)json_integer_value(p);
    }
  }
  json_t *mode = json_object_get(r, "mode");
  if (!mode || (json_is_string(mode) && !strcmp(json_string_value(mode), "tunnel")))
    out->mode = EGRESS_TUNNEL;
  else if (json_is_string(mode) && !strcmp(json_string_value(mode), "inject"))
    out->mode = EGRESS_INJECT;
  else
    return husk_fail(err, EINVAL, "%s: mode must be \"tunnel\" or \"inject\"", what);
  return 0;
}

static int parse_binding(json_t *b, size_t idx, bool with_ph, struct egress_binding *out,
                         struct husk_err *err) {
  char what[48];
  snprintf(what, sizeof what, "egress.secrets[%zu]", idx);
  if (!json_is_object(b))
    return husk_fail(err, EINVAL, "%s must be an object", what);
  const char *k;
  json_t *v;
  json_object_foreach(b, k, v) {
    if (strcmp(k, "name") && strcmp(k, "env") && strcmp(k, "hosts") && strcmp(k, "headers") &&
        !(with_ph && !strcmp(k, "placeholder")))
      return husk_fail(err, EINVAL, "%s: unknown field `%.32s` (name, env, hosts, headers)", what, k);
  }
  const char *name = json_string_value(json_object_get(b, "name"));
  if (!name || !env_name_ok(name))
    return husk_fail(err, EINVAL, "%s: name must be 1-64 of [A-Za-z0-9_]", what);
  if (egress_vault_name_reserved(name))
    return husk_fail(err, EINVAL, "%s: secret names starting with `%s` are reserved for husk", what,
                     EGRESS_VAULT_RESERVED_PREFIX);
  snprintf(out->name, sizeof out->name, "%s", name);
  json_t *env = json_object_get(b, "env");
  if (env && (!json_is_string(env) || !env_name_ok(json_string_value(env))))
    return husk_fail(err, EINVAL, "%s: env must be a variable name", what);
  snprintf(out->env, sizeof out->env, "%s", env ? json_string_value(env) : name);
  json_t *hosts = json_object_get(b, "hosts");
  if (!json_is_array(hosts) || json_array_size(hosts) == 0 ||
      json_array_size(hosts) > EGRESS_MAX_BINDING_HOSTS)
    return husk_fail(err, EINVAL, "%s: hosts must list 1 to %d hosts the secret may be sent to",
                     what, EGRESS_MAX_BINDING_HOSTS);
  size_t i;
  json_t *h;
  json_array_foreach(hosts, i, h) {
    if (pattern_parse(json_string_value(h), &out->hosts[out->nhosts++], what, err) < 0)
      return -1;
  }
  json_t *headers = json_object_get(b, "headers");
  if (!headers) {
    snprintf(out->headers[0], sizeof out->headers[0], "authorization");
    out->nheaders = 1;
  } else {
    if (!json_is_array(headers) || json_array_size(headers) == 0 ||
        json_array_size(headers) > EGRESS_MAX_BINDING_HEADERS)
      return husk_fail(err, EINVAL, "%s: headers must list 1 to %d header names", what,
                       EGRESS_MAX_BINDING_HEADERS);
    json_array_foreach(headers, i, h) {
      const char *s = json_string_value(h);
      if (!s || !header_name_ok(s))
        return husk_fail(err, EINVAL, "%s: `%.64s` cannot carry a secret", what, s ? s : "?");
      size_t j = 0;
      for (; s[j]; j++)
        out->headers[out->nheaders][j] = (char)((s[j] >= 'A' && s[j] <= 'Z') ? s[j] | 0x20 : s[j]);
      out->headers[out->nheaders][j] = '\0';
      out->nheaders++;
    }
  }
  if (with_ph) {
    const char *ph = json_string_value(json_object_get(b, "placeholder"));
    if (!ph || !placeholder_ok(ph))
      return husk_fail(err, EINVAL, "%s: stored placeholder is missing or malformed", what);
    snprintf(out->placeholder, sizeof out->placeholder, "%s", ph);
  } else if (make_placeholder(out->placeholder, err) < 0) {
    return -1;
  }
  return 0;
}

int egress_policy_parse(const char *json, bool with_placeholders, struct egress_policy *out,
                        struct husk_err *err) {
  memset(out, 0, sizeof *out);
  json_error_t je;
  json_t *o = json_loads(json ? json : "{}", JSON_REJECT_DUPLICATES, &je);
  if (!json_is_object(o)) {
    json_decref(o);
    return husk_fail(err, EINVAL, "egress must be a JSON object");
  }
  int rc = -1;
  const char *k;
  json_t *v;
  json_object_foreach(o, k, v) {
    if (strcmp(k, "rules") && strcmp(k, "secrets")) {
      husk_fail(err, EINVAL, "egress: unknown field `%.32s` (rules, secrets)", k);
      goto out;
    }
  }
  json_t *rules = json_object_get(o, "rules");
  if (rules && (!json_is_array(rules) || json_array_size(rules) > EGRESS_MAX_RULES)) {
    husk_fail(err, EINVAL, "egress.rules must be a list of at most %d rules", EGRESS_MAX_RULES);
    goto out;
  }
  size_t i;
  json_array_foreach(rules, i, v) {
    if (parse_rule(v, i, &out->rules[out->nrules++], err) < 0)
      goto out;
  }
  json_t *secrets = json_object_get(o, "secrets");
  if (secrets && (!json_is_array(secrets) || json_array_size(secrets) > EGRESS_MAX_BINDINGS)) {
    husk_fail(err, EINVAL, "egress.secrets must be a list of at most %d bindings",
              EGRESS_MAX_BINDINGS);
    goto out;
  }
  json_array_foreach(secrets, i, v) {
    if (parse_binding(v, i, with_placeholders, &out->bindings[out->nbindings], err) < 0)
      goto out;
    for (size_t j = 0; j < out->nbindings; j++)
      if (!strcmp(out->bindings[j].env, out->bindings[out->nbindings].env)) {
        husk_fail(err, EINVAL, "egress.secrets[%zu]: env `%s` is bound twice", i,
                  out->bindings[j].env);
        goto out;
      }
    out->nbindings++;
  }
  rc = 0;
out:
  json_decref(o);
  return rc;
}

static json_t *pattern_json(const struct egress_pattern *p) {
  char buf[EGRESS_HOST_MAX + 3];
  snprintf(buf, sizeof buf, "%s%s", p->wildcard ? "*." : "", p->host);
  return json_string(buf);
}

char *egress_policy_to_json(const struct egress_policy *p) {
  json_t *o = json_object(), *rules = json_array(), *secrets = json_array();
  for (size_t i = 0; i < p->nrules; i++) {
    const struct egress_rule *r = &p->rules[i];
    json_t *ports = json_array();
    for (size_t j = 0; j < r->nports; j++)
      json_array_append_new(ports, json_integer(r->ports[j]));
    json_array_append_new(rules, json_pack("{s:o,s:o,s:s}", "host", pattern_json(&r->pat), "ports",
                                           ports, "mode", r->mode == EGRESS_INJECT ? "inject" : "tunnel"));
  }
  for (size_t i = 0; i < p->nbindings; i++) {
    const struct egress_binding *b = &p->bindings[i];
    json_t *hosts = json_array(), *headers = json_array();
    for (size_t j = 0; j < b->nhosts; j++)
      json_array_append_new(hosts, pattern_json(&b->hosts[j]));
    for (size_t j = 0; j < b->nheaders; j++)
      json_array_append_new(headers, json_string(b->headers[j]));
    json_array_append_new(secrets, json_pack("{s:s,s:s,s:o,s:o,s:s}", "name", b->name, "env", b->env,
                                             "hosts", hosts, "headers", headers, "placeholder",
                                             b->placeholder));
  }
  json_object_set_new(o, "rules", rules);
  json_object_set_new(o, "secrets", secrets);
  char *s = json_dumps(o, JSON_COMPACT);
  json_decref(o);
  return s;
}

/* Fresh policy for a new box (egress.h): the stored form, with a random
 * placeholder for each secret binding. */
char *egress_policy_prepare(const char *json, struct husk_err *err) {
  struct egress_policy *p = calloc(1, sizeof *p);
  if (!p) {
    husk_fail(err, ENOMEM, "out of memory");
    return NULL;
  }
  char *out = NULL;
  if (egress_policy_parse(json, false, p, err) == 0 && !(out = egress_policy_to_json(p)))
    husk_fail(err, ENOMEM, "out of memory");
  free(p);
  return out;
}

const struct egress_rule *egress_policy_match(const struct egress_policy *p, const char *host,
                                              unsigned port) {
  for (size_t i = 0; i < p->nrules; i++) {
    const struct egress_rule *r = &p->rules[i];
    if (!egress_pattern_match(&r->pat, host))
      continue;
    for (size_t j = 0; j < r->nports; j++)
      if (r->ports[j] == port)
        return r;
  }
  return NULL;
}

bool egress_policy_names(const struct egress_policy *p, const char *host) {
  for (size_t i = 0; i < p->nrules; i++)
    if (egress_pattern_match(&p->rules[i].pat, host))
      return true;
  return false;
}
