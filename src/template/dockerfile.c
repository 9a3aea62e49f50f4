/* The Dockerfile parser (dockerfile.h).
 *
 * Three passes over one logical instruction at a time: lines are joined at
 * the escape character (comment lines inside a continuation dropped, as
 * Docker does), the keyword is taken, and the rest is either a JSON
 * array (exec form) or words split the way Docker's own word processing
 * does: whitespace separates, quotes group, the escape character quotes
 * the next character, and $VAR / ${VAR} / ${VAR:-word} / ${VAR:+word}
 * expand (outside single quotes) from the ARGs and ENVs seen so far. */
#define _GNU_SOURCE
#include "template/dockerfile.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "util/cleanup.h"
#include "util/strbuf.h"

#define MAX_VARS 256

struct var {
  char *name, *value;
};

struct parser {
  char esc;
  struct var vars[MAX_VARS];
  size_t nvars;
  char *const *build_args;
  struct husk_err *err;
  int line;
};

static void strv_free(char **v) {
  for (size_t i = 0; v && v[i]; i++)
    free(v[i]);
  free(v);
}

void dockerfile_free(struct dockerfile *d) {
  for (size_t i = 0; i < d->n; i++) {
    strv_free(d->steps[i].args);
    free(d->steps[i].chown);
    free(d->steps[i].text);
  }
  free(d->steps);
  d->steps = NULL;
  d->n = 0;
}

static const char *var_get(const struct parser *p, const char *name, size_t len) {
  for (size_t i = p->nvars; i-- > 0;)
    if (strlen(p->vars[i].name) == len && !strncmp(p->vars[i].name, name, len))
      return p->vars[i].value;
  return NULL;
}

static int var_set(struct parser *p, const char *name, const char *value) {
  for (size_t i = 0; i < p->nvars; i++)
    if (!strcmp(p->vars[i].name, name)) {
      char *v = strdup(value);
      if (!v)
        return husk_error(p->err, ENOMEM, "Dockerfile");
      free(p->vars[i].value);
      p->vars[i].value = v;
      return 0;
    }
  if (p->nvars == MAX_VARS)
    return husk_fail(p->err, EINVAL, "line %d: more than %d ARG and ENV names", p->line, MAX_VARS);
  char *n = strdup(name), *v = strdup(value);
  if (!n || !v) {
    free(n);
    free(v);
    return husk_error(p->err, ENOMEM, "Dockerfile");
  }
  p->vars[p->nvars++] = (struct var){n, v};
  return 0;
}

static bool name_char(char c, bool first) {
  return c == '_' || isalpha((unsigned char)c) || (!first && isdigit((unsigned char)c));
}

/* Words of `s` (substituted when `subst`), into a NULL-terminated list. */
static char **split_words(struct parser *p, const char *s, bool subst, size_t *n_out) {
  size_t cap = 8, n = 0;
  char **v = calloc(cap, sizeof *v);
  if (!v) {
    husk_error(p->err, ENOMEM, "Dockerfile");
    return NULL;
  }
  const char *c = s;
  for (;;) {
    while (*c == ' ' || *c == '\t')
      c++;
    if (!*c)
      break;
    struct strbuf w = {0};
    char quote = 0;
    while (*c && (quote || (*c != ' ' && *c != '\t'))) {
      if (!quote && (*c == '"' || *c == '\'')) {
        quote = *c++;
        continue;
      }
      if (quote && *c == quote) {
        quote = 0;
        c++;
        continue;
      }
      if (*c == p->esc && c[1] && quote != '\'') {
        strbuf_add(&w, c + 1, 1);
        c += 2;
        continue;
      }
      if (*c == '$' && subst && quote != '\'') {
        const char *name = c + 1, *def = NULL;
        size_t nlen = 0, dlen = 0;
        char mode = 0;
        const char *end;
        if (*name == '{') {
          name++;
          while (name_char(name[nlen], nlen == 0))
            nlen++;
          end = name + nlen;
          if (end[0] == ':' && (end[1] == '-' || end[1] == '+')) {
            mode = end[1];
            def = end + 2;
            const char *close = strchr(def, '}');
            if (!close) {
              husk_fail(p->err, EINVAL, "line %d: `${` without `}`", p->line);
              free(w.p);
              strv_free(v);
              return NULL;
            }
            dlen = (size_t)(close - def);
            end = close;
          }
          if (*end != '}' || nlen == 0) {
            husk_fail(p->err, EINVAL, "line %d: a bad ${...} substitution", p->line);
            free(w.p);
            strv_free(v);
            return NULL;
          }
          end++;
        } else {
          while (name_char(name[nlen], nlen == 0))
            nlen++;
          end = name + nlen;
          if (nlen == 0) { /* a lone '$' */
            strbuf_add(&w, "$", 1);
            c++;
            continue;
          }
        }
        const char *val = var_get(p, name, nlen);
        bool set = val && *val;
        if (mode == '+' ? set : mode == '-' && !set)
          strbuf_add(&w, def, dlen);
        else if (mode != '+' && val)
          strbuf_add(&w, val, strlen(val));
        c = end;
        continue;
      }
      strbuf_add(&w, c, 1);
      c++;
    }
    if (quote) {
      free(w.p);
      strv_free(v);
      husk_fail(p->err, EINVAL, "line %d: an unterminated %c quote", p->line, quote);
      return NULL;
    }
    if (n + 2 > cap) {
      char **nv = realloc(v, (cap *= 2) * sizeof *v);
      if (!nv) {
        free(w.p);
        strv_free(v);
        husk_error(p->err, ENOMEM, "Dockerfile");
        return NULL;
      }
      v = nv;
    }
    char *word = strbuf_take(&w);
    if (!word) {
      free(w.p);
      strv_free(v);
      husk_error(p->err, ENOMEM, "Dockerfile");
      return NULL;
    }
    v[n++] = word;
    v[n] = NULL;
  }
  *n_out = n;
  return v;
}

/* A JSON array of strings (the exec form), or NULL if `s` is not one. */
static char **json_words(const char *s, size_t *n_out) {
  json_t *a = json_loads(s, JSON_DECODE_ANY, NULL);
  if (!json_is_array(a)) {
    json_decref(a);
    return NULL;
  }
  size_t n = json_array_size(a);
  char **v = calloc(n + 1, sizeof *v);
  for (size_t i = 0; v && i < n; i++) {
    const char *w = json_string_value(json_array_get(a, i));
    if (!w || !(v[i] = strdup(w))) {
      strv_free(v);
      v = NULL;
    }
  }
  json_decref(a);
  if (v)
    *n_out = n;
  return v;
}

static int add_step(struct dockerfile *d, struct df_step *st, struct husk_err *err) {
  if (d->n == DOCKERFILE_MAX_STEPS)
    return husk_fail(err, EINVAL, "line %d: more than %d instructions", st->line,
                     DOCKERFILE_MAX_STEPS);
  struct df_step *v = realloc(d->steps, (d->n + 1) * sizeof *v);
  if (!v)
    return husk_error(err, ENOMEM, "Dockerfile");
  d->steps = v;
  d->steps[d->n++] = *st;
  return 0;
}

static const struct {
  const char *kw;
  enum df_op op;
} keywords[] = {{"FROM", DF_FROM},
                {"RUN", DF_RUN},
                {"COPY", DF_COPY},
                {"ADD", DF_COPY},
                {"ENV", DF_ENV},
                {"ARG", DF_ARG},
                {"WORKDIR", DF_WORKDIR},
                {"USER", DF_USER},
                {"LABEL", DF_LABEL},
                {"CMD", DF_CMD},
                {"ENTRYPOINT", DF_ENTRYPOINT}};

/* KEY=VALUE words (ENV, LABEL, ARG), or for ENV the old `ENV KEY VALUE`. */
static int key_values(struct parser *p, struct df_step *st, const char *rest, enum df_op op) {
  size_t n;
  char **w = split_words(p, rest, true, &n);
  if (!w)
    return -1;
  if (n == 0) {
    strv_free(w);
    return husk_fail(p->err, EINVAL, "line %d: nothing after the instruction", p->line);
  }
  char **kv = calloc(2 * n + 2, sizeof *kv);
  size_t k = 0;
  int rc = 0;
  if (!kv) {
    strv_free(w);
    return husk_error(p->err, ENOMEM, "Dockerfile");
  }
  if (op == DF_ENV && !strchr(w[0], '=')) {
    /* ENV KEY the rest of the line */
    const char *v = rest;
    while (*v == ' ' || *v == '\t')
      v++;
    v += strcspn(v, " \t");
    size_t nv;
    char **vals = split_words(p, v, true, &nv);
    struct strbuf joined = {0};
    for (size_t i = 0; vals && i < nv; i++)
      if (i)
        strbuf_add(&joined, " ", 1), strbuf_add(&joined, vals[i], strlen(vals[i]));
      else
        strbuf_add(&joined, vals[i], strlen(vals[i]));
    strv_free(vals);
    kv[k++] = strdup(w[0]);
    kv[k++] = vals ? strbuf_take(&joined) : NULL;
    if (!vals)
      rc = -1;
    else if (!kv[k - 1])
      kv[k - 1] = strdup("");
  } else {
    for (size_t i = 0; i < n && rc == 0; i++) {
      char *eq = strchr(w[i], '=');
      if (!eq && op != DF_ARG) {
        rc = husk_fail(p->err, EINVAL, "line %d: `%.64s` is not KEY=VALUE", p->line, w[i]);
        break;
      }
      kv[k++] = eq ? strndup(w[i], (size_t)(eq - w[i])) : strdup(w[i]);
      kv[k++] = eq ? strdup(eq + 1) : NULL;
      if (op == DF_ARG && !eq) {
        /* A build argument without a default: the value given, else "". */
        const char *given = NULL;
        size_t nl = strlen(w[i]);
        for (size_t b = 0; p->build_args && p->build_args[b]; b++)
          if (!strncmp(p->build_args[b], w[i], nl) && p->build_args[b][nl] == '=')
            given = p->build_args[b] + nl + 1;
        kv[k - 1] = strdup(given ? given : "");
      } else if (op == DF_ARG) {
        size_t nl = strlen(kv[k - 2] ? kv[k - 2] : "");
        for (size_t b = 0; p->build_args && p->build_args[b]; b++)
          if (kv[k - 2] && !strncmp(p->build_args[b], kv[k - 2], nl) &&
              p->build_args[b][nl] == '=') {
            free(kv[k - 1]);
            kv[k - 1] = strdup(p->build_args[b] + nl + 1);
          }
      }
    }
  }
  strv_free(w);
  for (size_t i = 0; rc == 0 && i < k; i++)
    if (!kv[i])
      rc = husk_error(p->err, ENOMEM, "Dockerfile");
  for (size_t i = 0; rc == 0 && i < k; i += 2) {
    if (!*kv[i] || strpbrk(kv[i], "= \t"))
      rc = husk_fail(p->err, EINVAL, "line %d: `%.64s` is not a name", p->line, kv[i]);
    else if (op != DF_LABEL)
      rc = var_set(p, kv[i], kv[i + 1]);
  }
  if (rc < 0) {
    for (size_t i = 0; i < k; i++)
      free(kv[i]);
    free(kv);
    return -1;
  }
  st->args = kv;
  st->nargs = k;
  return 0;
}

static int instruction(struct parser *p, struct dockerfile *d, char *line) {
  char *c = line;
  while (*c == ' ' || *c == '\t')
    c++;
  size_t kwlen = strcspn(c, " \t");
  const char *rest = c + kwlen;
  while (*rest == ' ' || *rest == '\t')
    rest++;
  struct df_step st = {.line = p->line};
  bool found = false;
  for (size_t i = 0; i < sizeof keywords / sizeof *keywords; i++)
    if (strlen(keywords[i].kw) == kwlen && !strncasecmp(c, keywords[i].kw, kwlen)) {
      st.op = keywords[i].op;
      st.add = !strcasecmp(keywords[i].kw, "ADD");
      found = true;
    }
  if (!found)
    return husk_fail(p->err, EINVAL, "line %d: `%.*s` is not an instruction husk builds", p->line,
                     (int)(kwlen > 32 ? 32 : kwlen), c);
  if (!(st.text = strdup(c)))
    return husk_error(p->err, ENOMEM, "Dockerfile");
  int rc = 0;
  switch (st.op) {
  case DF_RUN:
  case DF_CMD:
  case DF_ENTRYPOINT:
    if (!*rest) {
      rc = husk_fail(p->err, EINVAL, "line %d: nothing to run", p->line);
      break;
    }
    if (*rest == '[' && (st.args = json_words(rest, &st.nargs)) != NULL)
      break;
    st.shell = true;
    st.nargs = 1;
    if (!(st.args = calloc(2, sizeof *st.args)) || !(st.args[0] = strdup(rest)))
      rc = husk_error(p->err, ENOMEM, "Dockerfile");
    break;
  case DF_ENV:
  case DF_ARG:
  case DF_LABEL: rc = key_values(p, &st, rest, st.op); break;
  case DF_COPY: {
    if (*rest == '[') {
      st.args = json_words(rest, &st.nargs);
    } else {
      st.args = split_words(p, rest, true, &st.nargs);
      if (!st.args) {
        rc = -1;
        break;
      }
    }
    /* Flags first: --chown, and nothing else husk can honour. */
    size_t skip = 0;
    while (st.args && skip < st.nargs && !strncmp(st.args[skip], "--", 2)) {
      if (!strncmp(st.args[skip], "--chown=", 8)) {
        free(st.chown);
        st.chown = strdup(st.args[skip] + 8);
      } else {
        rc = husk_fail(p->err, EINVAL, "line %d: COPY %.64s is not something husk builds", p->line,
                       st.args[skip]);
        break;
      }
      skip++;
    }
    if (rc == 0 && (!st.args || st.nargs - skip < 2))
      rc = husk_fail(p->err, EINVAL, "line %d: COPY needs a source and a destination", p->line);
    if (rc == 0 && skip) {
      for (size_t i = 0; i < skip; i++)
        free(st.args[i]);
      memmove(st.args, st.args + skip, (st.nargs - skip + 1) * sizeof *st.args);
      st.nargs -= skip;
    }
    for (size_t i = 0; rc == 0 && i + 1 < st.nargs; i++)
      if (strstr(st.args[i], "://"))
        rc = husk_fail(p->err, EINVAL,
                       "line %d: ADD from a URL: husk builds copy local files "
                       "only (fetch it in a RUN step through the egress policy)",
                       p->line);
    break;
  }
  case DF_FROM:
  case DF_WORKDIR:
  case DF_USER: {
    st.args = split_words(p, rest, true, &st.nargs);
    if (!st.args) {
      rc = -1;
      break;
    }
    bool as = st.op == DF_FROM && st.nargs == 3 && !strcasecmp(st.args[1], "AS");
    if (st.nargs != 1 && !as)
      rc = husk_fail(p->err, EINVAL, "line %d: one word expected", p->line);
    for (size_t i = 0; rc == 0 && st.op == DF_FROM && i < d->n; i++)
      if (d->steps[i].op == DF_FROM)
        rc = husk_fail(p->err, EINVAL, "line %d: a second FROM: husk builds one stage", p->line);
    break;
  }
  }
  bool from_seen = false;
  for (size_t i = 0; i < d->n; i++)
    from_seen = from_seen || d->steps[i].op == DF_FROM;
  if (rc == 0 && st.op != DF_FROM && st.op != DF_ARG && !from_seen)
    rc = husk_fail(p->err, EINVAL, "line %d: only ARG may come before FROM", p->line);
  if (rc == 0)
    rc = add_step(d, &st, p->err);
  if (rc < 0) {
    strv_free(st.args);
    free(st.chown);
    free(st.text);
  }
  return rc;
}

int dockerfile_parse(const char *text, size_t len, char *const *build_args, struct dockerfile *out,
                     struct husk_err *err) {
  memset(out, 0, sizeof *out);
  if (len > DOCKERFILE_MAX_BYTES)
    return husk_fail(err, EFBIG, "the Dockerfile is larger than %d bytes", DOCKERFILE_MAX_BYTES);
  if (memchr(text, '\0', len))
    return husk_fail(err, EINVAL, "the Dockerfile holds a NUL byte");
  struct parser p = {.esc = '\\', .build_args = build_args, .err = err};
  cleanup_free char *buf = strndup(text, len);
  if (!buf)
    return husk_error(err, ENOMEM, "Dockerfile");
  struct strbuf logical = {0};
  int start = 0, rc = 0;
  bool directives = true, cont = false;
  char *save = NULL;
  int lineno = 0;
  /* strtok_r would merge empty lines: walk by hand. */
  for (char *l = buf; l && rc == 0; l = save) {
    char *nl = strchr(l, '\n');
    save = nl ? nl + 1 : NULL;
    if (nl)
      *nl = '\0';
    lineno++;
    size_t ll = strlen(l);
    if (ll && l[ll - 1] == '\r')
      l[--ll] = '\0';
    const char *t = l;
    while (*t == ' ' || *t == '\t')
      t++;
    if (*t == '#') {
      if (directives && !strncasecmp(t, "# escape=", 9) && (t[9] == '\\' || t[9] == '`') &&
          !t[10]) {
        p.esc = t[9];
        continue;
      }
      directives = false;
      continue; /* comments go, in a continuation too */
    }
    directives = false;
    if (!*t && !cont)
      continue;
    if (!cont)
      start = lineno;
    /* Trailing blanks, then the escape character: the line goes on. */
    while (ll && (l[ll - 1] == ' ' || l[ll - 1] == '\t'))
      ll--;
    cont = ll && l[ll - 1] == p.esc;
    if (cont)
      ll--;
    strbuf_add(&logical, l, ll);
    if (cont)
      strbuf_add(&logical, " ", 1);
    if (cont && save)
      continue;
    char *ins = strbuf_take(&logical);
    if (!ins) {
      rc = husk_error(err, ENOMEM, "Dockerfile");
      break;
    }
    p.line = start;
    const char *chk = ins;
    while (*chk == ' ' || *chk == '\t')
      chk++;
    if (*chk)
      rc = instruction(&p, out, ins);
    free(ins);
    cont = false;
  }
  free(logical.p);
  for (size_t i = 0; i < p.nvars; i++) {
    free(p.vars[i].name);
    free(p.vars[i].value);
  }
  if (rc == 0 && (out->n == 0 || out->steps[0].op != DF_FROM)) {
    bool has_from = false;
    for (size_t i = 0; i < out->n; i++)
      has_from = has_from || out->steps[i].op == DF_FROM;
    if (!has_from)
      rc = husk_fail(err, EINVAL, "the Dockerfile has no FROM");
  }
  if (rc < 0)
    dockerfile_free(out);
  return rc;
}
