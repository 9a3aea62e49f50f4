/* The HTTP API's JSON request bodies (src/api/json.c): api_body_object()
 * and the field readers, driven the way each route's handler drives them
 * (src/api/routes_*.c; the lists below are those routes' field lists), and
 * the egress policy a box create or a network change carries
 * (src/egress/policy.c).  Input: a selector byte (the route), then the
 * body. */
#include <stdbool.h>

#include "api/internal.h"
#include "egress/policy.h"
#include "fuzz.h"

enum body_route {
  R_TENANT,
  R_QUOTA,
  R_KEY,
  R_BOX_CREATE,
  R_BOX_TIMEOUT,
  R_SECRET,
  R_NETWORK,
  R_EXEC,
  R_SIGNAL,
  R_MKDIR,
  R_MOVE,
  R_LINK,
  R_EXPORT,
  R_IMPORT,
  R_COUNT
};

static const char *const *const fields[R_COUNT] = {
    [R_TENANT] = (const char *const[]){"name", "max_boxes", "max_memory", NULL},
    [R_QUOTA] = (const char *const[]){"max_boxes", "max_memory", NULL},
    [R_KEY] = (const char *const[]){NULL},
    [R_BOX_CREATE] = (const char *const[]){"template", "memory", "cpus", "pids", "disk", "timeout",
                                           "env", "metadata", "network", "egress", NULL},
    [R_BOX_TIMEOUT] = (const char *const[]){"timeout", NULL},
    [R_SECRET] = (const char *const[]){"value", NULL},
    [R_NETWORK] = (const char *const[]){"network", "egress", NULL},
    [R_EXEC] = (const char *const[]){"cmd", "env", "cwd", "timeout", "stdin", "stream",
                                     "background", "output_limit", NULL},
    [R_SIGNAL] = (const char *const[]){"signal", "group", NULL},
    [R_MKDIR] = (const char *const[]){"path", "parents", NULL},
    [R_MOVE] = (const char *const[]){"from", "to", "overwrite", NULL},
    [R_LINK] = (const char *const[]){"bucket", "key", "expires_in", "filename", NULL},
    [R_EXPORT] =
        (const char *const[]){"path", "bucket", "key", "link", "expires_in", "filename", NULL},
    [R_IMPORT] = (const char *const[]){"path", "bucket", "key", "extract", NULL},
};

/* routes_admin.c's quota reader: null or -1 is unlimited. */
static int quota(json_t *o, const char *k, bool size, struct husk_err *err) {
  json_t *v = json_object_get(o, k);
  if (!v || json_is_null(v) || (json_is_integer(v) && json_integer_value(v) == -1))
    return 0;
  uint64_t x = 0;
  return size ? jget_size(o, k, &x, err) : jget_u64(o, k, INT64_MAX, &x, err);
}

/* A policy that parses is stored as JSON and parsed again on restart: the
 * stored form must parse, with its placeholders. */
static void policy(json_t *eg) {
  if (!json_is_object(eg))
    return;
  char *s = json_dumps(eg, JSON_COMPACT);
  if (!s)
    return;
  struct egress_policy p;
  struct husk_err err;
  if (egress_policy_parse(s, false, &p, &err) == 0) {
    char *stored = egress_policy_to_json(&p);
    struct egress_policy again;
    if (!stored || egress_policy_parse(stored, true, &again, &err) < 0)
      abort();
    free(stored);
  }
  free(s);
}

/* An argv or env array is one allocation: NULL-terminated pointers to
 * strings, each valid UTF-8 (jansson decoded it). */
static void strv_check(char **v) {
  for (size_t i = 0; v && v[i]; i++)
    if (!utf8_valid(v[i], strlen(v[i])))
      abort();
  free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct fz f = {data, size};
  enum body_route rt = (enum body_route)(fz_byte(&f) % R_COUNT);
  struct req r;
  memset(&r, 0, sizeof r);
  size_t n;
  r.body = (char *)fz_rest(&f, &n);
  r.body_len = n;
  json_t *o = api_body_object(&r, fields[rt]);
  if (!o) {
    free(r.body);
    return 0;
  }
  const char *s = NULL;
  bool b = false;
  uint64_t u = 0;
  char **argv = NULL, **env = NULL;
  json_t *j = NULL;
  struct husk_err *err = &r.err;
  switch (rt) {
  case R_TENANT:
    (void)(jget_string(o, "name", &s, err) < 0 || quota(o, "max_boxes", false, err) < 0 ||
           quota(o, "max_memory", true, err) < 0);
    break;
  case R_QUOTA:
    (void)(quota(o, "max_boxes", false, err) < 0 || quota(o, "max_memory", true, err) < 0);
    break;
  case R_KEY: break;
  case R_BOX_CREATE:
    if (jget_string(o, "template", &s, err) < 0 || jget_string(o, "network", &s, err) < 0 ||
        jget_size(o, "memory", &u, err) < 0 || jget_milli(o, "cpus", &u, err) < 0 ||
        jget_u64(o, "pids", UINT64_MAX >> 1, &u, err) < 0 || jget_size(o, "disk", &u, err) < 0 ||
        jget_seconds_ms(o, "timeout", &u, err) < 0 || jget_env(o, "env", &env, err) < 0 ||
        jget_string_object(o, "metadata", &j, err) < 0)
      break;
    if (j) {
      char *m = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
      free(m);
    }
    policy(json_object_get(o, "egress"));
    break;
  case R_BOX_TIMEOUT: jget_seconds_ms(o, "timeout", &u, err); break;
  case R_SECRET: {
    json_t *v = json_object_get(o, "value");
    if (json_is_string(v))
      utf8_valid(json_string_value(v), json_string_length(v));
    break;
  }
  case R_NETWORK:
    if (jget_string(o, "network", &s, err) == 0)
      policy(json_object_get(o, "egress"));
    break;
  case R_EXEC:
    (void)(jget_argv(o, "cmd", &argv, err) < 0 || jget_env(o, "env", &env, err) < 0 ||
           jget_string(o, "cwd", &s, err) < 0 || jget_seconds_ms(o, "timeout", &u, err) < 0 ||
           jget_string(o, "stdin", &s, err) < 0 || jget_bool(o, "stream", &b, err) < 0 ||
           jget_bool(o, "background", &b, err) < 0 || jget_size(o, "output_limit", &u, err) < 0);
    break;
  case R_SIGNAL: jget_bool(o, "group", &b, err); break;
  case R_MKDIR:
    (void)(jget_string(o, "path", &s, err) < 0 || jget_bool(o, "parents", &b, err) < 0);
    break;
  case R_MOVE:
    (void)(jget_string(o, "from", &s, err) < 0 || jget_string(o, "to", &s, err) < 0 ||
           jget_bool(o, "overwrite", &b, err) < 0);
    break;
  case R_LINK:
  case R_EXPORT:
  case R_IMPORT:
    (void)(jget_string(o, "path", &s, err) < 0 || jget_string(o, "bucket", &s, err) < 0 ||
           jget_string(o, "key", &s, err) < 0 || jget_string(o, "filename", &s, err) < 0 ||
           jget_bool(o, "link", &b, err) < 0 || jget_bool(o, "extract", &b, err) < 0 ||
           jget_u64(o, "expires_in", 7 * 86400, &u, err) < 0);
    break;
  case R_COUNT: abort();
  }
  strv_check(argv);
  strv_check(env);
  json_decref(o);
  free(r.body);
  return 0;
}
