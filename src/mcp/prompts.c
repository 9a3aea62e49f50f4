/* MCP prompts from an operator's directory (--prompts DIR / --mcp-prompts
 * DIR): one Markdown file per prompt, YAML front matter naming it and its
 * arguments, the body the text of the prompt with {{argument}} places.
 *
 *   ---
 *   name: summarize-deck
 *   title: Summarize a deck
 *   description: Summarize a slide deck the user stored
 *   arguments:
 *     - name: key
 *       description: the object's key
 *       required: true
 *   ---
 *   Load {{key}} into a sandbox with load_file, then ...
 *
 * The files are read once, when the server starts.  A file that cannot be
 * used (unreadable, bad YAML, a field of the wrong kind, a place naming no
 * argument, a name taken) is reported with its file and line through the
 * server's log and left out; the others are served. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>

#include "mcp/internal.h"
#include "util/cleanup.h"
#include "util/cleanup_json.h"
#include "util/utf8.h"

struct prompt_arg {
  char *name;
  char *description;
  bool required;
};

struct mcp_prompt {
  char *name, *title, *description;
  char *body;
  struct prompt_arg *args;
  size_t nargs;
};

struct mcp_prompts {
  struct mcp_prompt *v;
  size_t n;
};

static void prompt_free(struct mcp_prompt *p) {
  free(p->name);
  free(p->title);
  free(p->description);
  free(p->body);
  for (size_t i = 0; i < p->nargs; i++) {
    free(p->args[i].name);
    free(p->args[i].description);
  }
  free(p->args);
  memset(p, 0, sizeof *p);
}

void mcp_prompts_free(struct mcp_prompts *ps) {
  if (!ps)
    return;
  for (size_t i = 0; i < ps->n; i++)
    prompt_free(&ps->v[i]);
  free(ps->v);
  free(ps);
}

/* A problem with one file: reported, the file left out. */
struct report {
  void (*log)(void *ctx, const char *line);
  void *log_ctx;
  const char *file;
  unsigned long off; /* the file's line of the front matter's first */
  unsigned bad;
};

static int bad(struct report *r, unsigned long line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bad(struct report *r, unsigned long line, const char *fmt, ...) {
  char msg[512], out[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (line)
    snprintf(out, sizeof out, "prompt %s:%lu: %s (left out)", r->file, line, msg);
  else
    snprintf(out, sizeof out, "prompt %s: %s (left out)", r->file, msg);
  if (r->log)
    r->log(r->log_ctx, out);
  r->bad++;
  return -1;
}

bool mcp_prompt_name_ok(const char *s) {
  size_t n = strlen(s);
  if (n == 0 || n > MCP_PROMPT_NAME_MAX)
    return false;
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
          (s[i] >= '0' && s[i] <= '9') || s[i] == '-' || s[i] == '_' || s[i] == '.'))
      return false;
  return true;
}

/* ---- front matter: a YAML mapping, read with libyaml's document loader ---- */

/* A node's line in the file: front matter lines are counted from r->off. */
static unsigned long node_line(const struct report *r, const yaml_node_t *n) {
  return r->off + n->start_mark.line;
}

static const char *scalar(yaml_document_t *d, const yaml_node_t *n) {
  (void)d;
  return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

/* Whether the mapping `m` has the key of pair `kv` in an earlier pair
 * (libyaml accepts {a: 1, a: 2}; a prompt file must not). */
static bool key_repeated(yaml_document_t *d, yaml_node_t *m, yaml_node_pair_t *kv) {
  const char *key = scalar(d, yaml_document_get_node(d, kv->key));
  for (yaml_node_pair_t *q = m->data.mapping.pairs.start; key && q < kv; q++) {
    const char *k = scalar(d, yaml_document_get_node(d, q->key));
    if (k && !strcmp(k, key))
      return true;
  }
  return false;
}

/* A string field: a scalar without NUL, at most `max` bytes. */
static int field_str(struct report *r, yaml_document_t *d, yaml_node_t *v, const char *key,
                     size_t max, char **out) {
  const char *s = scalar(d, v);
  if (!s)
    return bad(r, node_line(r, v), "`%s` must be a string", key);
  size_t n = v->data.scalar.length;
  if (n > max || memchr(s, 0, n) || !utf8_valid(s, n))
    return bad(r, node_line(r, v), "`%s` must be UTF-8 text of at most %zu bytes", key, max);
  free(*out);
  *out = strndup(s, n);
  return *out ? 0 : bad(r, node_line(r, v), "out of memory");
}

static int field_bool(struct report *r, yaml_document_t *d, yaml_node_t *v, const char *key,
                      bool *out) {
  const char *s = scalar(d, v);
  if (s && (!strcmp(s, "true") || !strcmp(s, "yes")))
    *out = true;
  else if (s && (!strcmp(s, "false") || !strcmp(s, "no")))
    *out = false;
  else
    return bad(r, node_line(r, v), "`%s` must be true or false", key);
  return 0;
}

static int read_args(struct report *r, yaml_document_t *d, yaml_node_t *seq,
                     struct mcp_prompt *p) {
  if (seq->type != YAML_SEQUENCE_NODE)
    return bad(r, node_line(r, seq), "`arguments` must be a list of {name, description, required}");
  size_t n = (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
  if (n > MCP_PROMPT_ARGS_MAX)
    return bad(r, node_line(r, seq), "at most %d arguments", MCP_PROMPT_ARGS_MAX);
  p->args = calloc(n ? n : 1, sizeof *p->args);
  if (!p->args)
    return bad(r, 0, "out of memory");
  for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top;
       it++) {
    yaml_node_t *a = yaml_document_get_node(d, *it);
    if (!a || a->type != YAML_MAPPING_NODE)
      return bad(r, a ? node_line(r, a) : 0, "each argument must be a mapping with a `name`");
    struct prompt_arg *pa = &p->args[p->nargs++];
    for (yaml_node_pair_t *kv = a->data.mapping.pairs.start; kv < a->data.mapping.pairs.top;
         kv++) {
      yaml_node_t *k = yaml_document_get_node(d, kv->key), *v = yaml_document_get_node(d, kv->value);
      const char *key = scalar(d, k);
      if (!key || !v)
        return bad(r, k ? node_line(r, k) : 0, "argument keys must be plain words");
      if (key_repeated(d, a, kv))
        return bad(r, node_line(r, k), "argument field `%.64s` is given twice", key);
      int rc = !strcmp(key, "name")          ? field_str(r, d, v, key, MCP_PROMPT_NAME_MAX, &pa->name)
               : !strcmp(key, "description") ? field_str(r, d, v, key, 1024, &pa->description)
               : !strcmp(key, "required")    ? field_bool(r, d, v, key, &pa->required)
                                             : bad(r, node_line(r, k),
                                                   "unknown argument field `%.64s` (name, "
                                                   "description, required)", key);
      if (rc < 0)
        return -1;
    }
    if (!pa->name || !mcp_prompt_name_ok(pa->name))
      return bad(r, node_line(r, a), "an argument needs a `name` of letters, digits, '-', '_', '.'");
    for (size_t j = 0; j + 1 < p->nargs; j++)
      if (!strcmp(p->args[j].name, pa->name))
        return bad(r, node_line(r, a), "argument `%s` is declared twice", pa->name);
  }
  return 0;
}

/* The deepest nesting of the front matter's collections, read as events
 * and given up past `max` (libyaml's loader takes time quadratic in the
 * depth: a 200 KB "[[[[..." would hold the start for a minute). */
static int yaml_depth(const char *text, size_t len, int max, unsigned long *line) {
  yaml_parser_t ps;
  if (!yaml_parser_initialize(&ps))
    return 0;
  yaml_parser_set_input_string(&ps, (const unsigned char *)text, len);
  int depth = 0, deepest = 0;
  for (;;) {
    yaml_event_t ev;
    if (!yaml_parser_parse(&ps, &ev))
      break; /* the loader reports the error itself */
    yaml_event_type_t t = ev.type;
    if (t == YAML_SEQUENCE_START_EVENT || t == YAML_MAPPING_START_EVENT) {
      if (++depth > deepest)
        deepest = depth;
      *line = ev.start_mark.line;
    } else if (t == YAML_SEQUENCE_END_EVENT || t == YAML_MAPPING_END_EVENT) {
      depth--;
    }
    yaml_event_delete(&ev);
    if (t == YAML_STREAM_END_EVENT || deepest > max)
      break;
  }
  yaml_parser_delete(&ps);
  return deepest;
}

static int read_front(struct report *r, const char *text, size_t len, unsigned long line0,
                      struct mcp_prompt *p) {
  unsigned long deep_line = 0;
  if (yaml_depth(text, len, MCP_PROMPT_YAML_DEPTH, &deep_line) > MCP_PROMPT_YAML_DEPTH)
    return bad(r, line0 + deep_line, "front matter nested deeper than %d levels",
               MCP_PROMPT_YAML_DEPTH);
  yaml_parser_t ps;
  yaml_document_t d;
  r->off = line0;
  if (!yaml_parser_initialize(&ps))
    return bad(r, 0, "out of memory");
  yaml_parser_set_input_string(&ps, (const unsigned char *)text, len);
  if (!yaml_parser_load(&ps, &d)) {
    /* Where it was noticed, and what it was in (a '[' left open...). */
    int rc = ps.context
                 ? bad(r, line0 + ps.problem_mark.line,
                       "front matter is not valid YAML: %s, %s started on line %lu",
                       ps.problem ? ps.problem : "syntax error", ps.context + 6 * !strncmp(ps.context, "while ", 6),
                       (unsigned long)(line0 + ps.context_mark.line))
                 : bad(r, line0 + ps.problem_mark.line, "front matter is not valid YAML: %s",
                       ps.problem ? ps.problem : "syntax error");
    yaml_parser_delete(&ps);
    return rc;
  }
  yaml_parser_delete(&ps);
  int rc = 0;
  yaml_node_t *root = yaml_document_get_root_node(&d);
  if (!root) {
    yaml_document_delete(&d);
    return 0; /* empty front matter: the name comes from the file */
  }
  if (root->type != YAML_MAPPING_NODE) {
    rc = bad(r, node_line(r, root), "front matter must be a mapping (name: ...)");
    goto out;
  }
  for (yaml_node_pair_t *kv = root->data.mapping.pairs.start; kv < root->data.mapping.pairs.top;
       kv++) {
    yaml_node_t *k = yaml_document_get_node(&d, kv->key), *v = yaml_document_get_node(&d, kv->value);
    const char *key = scalar(&d, k);
    unsigned long ln = k ? node_line(r, k) : line0;
    if (!key || !v) {
      rc = bad(r, ln, "front matter keys must be plain words");
      goto out;
    }
    if (key_repeated(&d, root, kv)) {
      rc = bad(r, ln, "`%.64s` is given twice", key);
      goto out;
    }
    if (!strcmp(key, "name"))
      rc = field_str(r, &d, v, key, MCP_PROMPT_NAME_MAX, &p->name);
    else if (!strcmp(key, "title"))
      rc = field_str(r, &d, v, key, 256, &p->title);
    else if (!strcmp(key, "description"))
      rc = field_str(r, &d, v, key, 4096, &p->description);
    else if (!strcmp(key, "arguments"))
      rc = read_args(r, &d, v, p);
    else
      rc = bad(r, ln, "unknown field `%.64s` (name, title, description, arguments)", key);
    if (rc < 0)
      goto out;
  }
out:
  yaml_document_delete(&d);
  return rc;
}

/* ---- the body: {{name}} places, each naming a declared argument ---- */

/* Call cb for each place in `body`: its start, its length in the text, the
 * argument's name (trimmed).  cb returns <0 to stop. */
static int each_place(const char *body, int (*cb)(void *ctx, const char *at, size_t len,
                                                   const char *name, size_t nlen),
                      void *ctx) {
  const char *p = body;
  while ((p = strstr(p, "{{"))) {
    const char *end = strstr(p + 2, "}}");
    if (!end)
      break;
    const char *a = p + 2, *b = end;
    while (a < b && (*a == ' ' || *a == '\t'))
      a++;
    while (b > a && (b[-1] == ' ' || b[-1] == '\t'))
      b--;
    int rc = cb(ctx, p, (size_t)(end + 2 - p), a, (size_t)(b - a));
    if (rc < 0)
      return rc;
    p = end + 2;
  }
  return 0;
}

static const struct prompt_arg *find_arg(const struct mcp_prompt *p, const char *name, size_t n) {
  for (size_t i = 0; i < p->nargs; i++)
    if (strlen(p->args[i].name) == n && !memcmp(p->args[i].name, name, n))
      return &p->args[i];
  return NULL;
}

struct check_ctx {
  struct report *r;
  const struct mcp_prompt *p;
  const char *body;
  unsigned long line0;
};

static int check_place(void *ctx, const char *at, size_t len, const char *name, size_t nlen) {
  (void)len;
  struct check_ctx *c = ctx;
  if (find_arg(c->p, name, nlen))
    return 0;
  unsigned long line = c->line0;
  for (const char *q = c->body; q < at; q++)
    line += *q == '\n';
  return bad(c->r, line, "{{%.*s}} names no declared argument", (int)(nlen > 64 ? 64 : nlen),
             name);
}

/* ---- one file ---- */

static int load_file(struct report *r, int dfd, const char *fname, struct mcp_prompt *p) {
  cleanup_close int fd = openat(dfd, fname, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  struct stat st;
  if (fd < 0 || fstat(fd, &st) < 0)
    return bad(r, 0, "cannot read it: %s", strerror(errno));
  if (!S_ISREG(st.st_mode))
    return bad(r, 0, "not a regular file");
  if (st.st_size > MCP_PROMPT_FILE_MAX)
    return bad(r, 0, "larger than %d bytes", MCP_PROMPT_FILE_MAX);
  cleanup_free char *text = malloc((size_t)st.st_size + 1);
  if (!text)
    return bad(r, 0, "out of memory");
  size_t len = 0;
  while (len < (size_t)st.st_size) {
    ssize_t n = read(fd, text + len, (size_t)st.st_size - len);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return bad(r, 0, "cannot read it: %s", strerror(errno));
    if (n == 0)
      break;
    len += (size_t)n;
  }
  text[len] = '\0';
  if (memchr(text, 0, len) || !utf8_valid(text, len))
    return bad(r, 0, "not UTF-8 text");
  const char *body = text;
  unsigned long body_line = 1;
  /* Front matter: a first line "---", up to the next line "---". */
  if (!strncmp(text, "---\n", 4) || !strncmp(text, "---\r\n", 5)) {
    const char *fm = strchr(text, '\n') + 1, *end = NULL;
    for (const char *l = fm; *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : l + strlen(l)) {
      if (!strncmp(l, "---", 3) && (l[3] == '\n' || l[3] == '\0' || !strncmp(l + 3, "\r\n", 2))) {
        end = l;
        break;
      }
    }
    if (!end)
      return bad(r, 1, "front matter opened with --- is never closed");
    if (read_front(r, fm, (size_t)(end - fm), 2, p) < 0)
      return -1;
    for (const char *q = text; q < end; q++)
      body_line += *q == '\n';
    body = strchr(end, '\n') ? strchr(end, '\n') + 1 : end + strlen(end);
    body_line++;
  }
  if (!p->name) {
    /* The file's name without ".md". */
    size_t n = strlen(fname) - 3;
    p->name = strndup(fname, n);
    if (!p->name)
      return bad(r, 0, "out of memory");
    if (!mcp_prompt_name_ok(p->name))
      return bad(r, 0, "no `name` in the front matter, and the file's name is no prompt name "
                       "(letters, digits, '-', '_', '.'; at most %d)", MCP_PROMPT_NAME_MAX);
  } else if (!mcp_prompt_name_ok(p->name)) {
    return bad(r, 0, "`name` must be letters, digits, '-', '_', '.' (at most %d)",
               MCP_PROMPT_NAME_MAX);
  }
  while (*body == '\n' || *body == '\r') {
    body_line += *body == '\n';
    body++;
  }
  if (!*body)
    return bad(r, body_line, "the prompt has no text after its front matter");
  p->body = strdup(body);
  if (!p->body)
    return bad(r, 0, "out of memory");
  struct check_ctx cc = {.r = r, .p = p, .body = p->body, .line0 = body_line};
  return each_place(p->body, check_place, &cc);
}

static int by_name(const void *a, const void *b) {
  return strcmp(((const struct mcp_prompt *)a)->name, ((const struct mcp_prompt *)b)->name);
}

static int fname_cmp(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

int mcp_prompts_load(const char *dir, void (*log)(void *ctx, const char *line), void *log_ctx,
                     struct mcp_prompts **out, struct husk_err *err) {
  *out = NULL;
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0)
    return husk_error(err, errno, "prompts directory %s: %s", dir, strerror(errno));
  DIR *dp = fdopendir(dfd);
  if (!dp) {
    int e = errno;
    close(dfd);
    return husk_error(err, e, "prompts directory %s: %s", dir, strerror(e));
  }
  /* The names first, sorted: files are read, and duplicates reported, in
   * an order that does not depend on the directory's. */
  char **names = NULL;
  size_t nn = 0, cap = 0;
  int rc = 0;
  struct dirent *de;
  errno = 0;
  while ((de = readdir(dp))) {
    size_t l = strlen(de->d_name);
    if (de->d_name[0] == '.' || l < 4 || strcmp(de->d_name + l - 3, ".md") != 0)
      continue;
    if (nn == MCP_PROMPTS_MAX) {
      rc = husk_error(err, E2BIG, "prompts directory %s: more than %d .md files", dir,
                      MCP_PROMPTS_MAX);
      break;
    }
    if (nn == cap) {
      size_t nc = cap ? cap * 2 : 16;
      char **nv = realloc(names, nc * sizeof *nv);
      if (!nv) {
        rc = husk_error(err, ENOMEM, "prompts");
        break;
      }
      names = nv;
      cap = nc;
    }
    if (!(names[nn] = strdup(de->d_name))) {
      rc = husk_error(err, ENOMEM, "prompts");
      break;
    }
    nn++;
  }
  if (!rc && errno)
    rc = husk_error(err, errno, "prompts directory %s: %s", dir, strerror(errno));
  struct mcp_prompts *ps = rc ? NULL : calloc(1, sizeof *ps);
  if (!rc && !ps)
    rc = husk_error(err, ENOMEM, "prompts");
  if (ps && nn && !(ps->v = calloc(nn, sizeof *ps->v)))
    rc = husk_error(err, ENOMEM, "prompts");
  if (!rc) {
    if (nn)
      qsort(names, nn, sizeof *names, fname_cmp);
    for (size_t i = 0; i < nn; i++) {
      struct report r = {.log = log, .log_ctx = log_ctx, .file = names[i]};
      struct mcp_prompt p = {0};
      if (load_file(&r, dirfd(dp), names[i], &p) < 0) {
        prompt_free(&p);
        continue;
      }
      bool dup = false;
      for (size_t j = 0; j < ps->n && !dup; j++)
        dup = !strcmp(ps->v[j].name, p.name);
      if (dup) {
        bad(&r, 0, "prompt `%s` is already defined by another file", p.name);
        prompt_free(&p);
        continue;
      }
      ps->v[ps->n++] = p;
    }
    if (ps->n)
      qsort(ps->v, ps->n, sizeof *ps->v, by_name);
  }
  for (size_t i = 0; i < nn; i++)
    free(names[i]);
  free(names);
  closedir(dp);
  if (rc) {
    mcp_prompts_free(ps);
    return -1;
  }
  *out = ps;
  return 0;
}

/* ---- prompts/list and prompts/get ---- */

size_t mcp_prompts_count(const struct mcp_prompts *ps) { return ps ? ps->n : 0; }

json_t *mcp_prompts_list(const struct mcp_prompts *ps) {
  json_t *arr = json_array();
  for (size_t i = 0; arr && ps && i < ps->n; i++) {
    const struct mcp_prompt *p = &ps->v[i];
    json_t *o = json_pack("{s:s}", "name", p->name);
    if (!o)
      continue;
    if (p->title)
      json_object_set_new(o, "title", json_string(p->title));
    if (p->description)
      json_object_set_new(o, "description", json_string(p->description));
    if (p->nargs) {
      json_t *args = json_array();
      for (size_t j = 0; j < p->nargs; j++) {
        json_t *a = json_pack("{s:s, s:b}", "name", p->args[j].name, "required",
                              (int)p->args[j].required);
        if (a && p->args[j].description)
          json_object_set_new(a, "description", json_string(p->args[j].description));
        json_array_append_new(args, a);
      }
      json_object_set_new(o, "arguments", args);
    }
    json_array_append_new(arr, o);
  }
  return arr;
}

struct fill {
  json_t *args;
  const struct mcp_prompt *p;
  char *out;
  size_t len, cap;
  const char *from; /* body text not yet copied */
  bool too_big;
};

static int put(struct fill *f, const char *s, size_t n) {
  if (f->len + n > MCP_PROMPT_RESULT_MAX) {
    f->too_big = true;
    return -1;
  }
  if (f->len + n + 1 > f->cap) {
    size_t nc = (f->len + n + 1) * 2;
    char *nb = realloc(f->out, nc);
    if (!nb)
      return -1;
    f->out = nb;
    f->cap = nc;
  }
  memcpy(f->out + f->len, s, n);
  f->len += n;
  f->out[f->len] = '\0';
  return 0;
}

static int fill_place(void *ctx, const char *at, size_t len, const char *name, size_t nlen) {
  struct fill *f = ctx;
  if (put(f, f->from, (size_t)(at - f->from)) < 0)
    return -1;
  f->from = at + len;
  const struct prompt_arg *a = find_arg(f->p, name, nlen);
  json_t *v = a ? json_object_get(f->args, a->name) : NULL;
  return json_is_string(v) ? put(f, json_string_value(v), json_string_length(v)) : 0;
}

int mcp_prompt_get(const struct mcp_prompts *ps, const char *name, json_t *args, json_t **result,
                   char *why, size_t whylen) {
  *result = NULL;
  const struct mcp_prompt *p = NULL;
  for (size_t i = 0; ps && i < ps->n && !p; i++)
    if (!strcmp(ps->v[i].name, name))
      p = &ps->v[i];
  if (!p) {
    snprintf(why, whylen, "unknown prompt `%.64s` (prompts/list names them)", name);
    return -1;
  }
  if (args && !json_is_null(args) && !json_is_object(args)) {
    snprintf(why, whylen, "`arguments` must be an object of strings");
    return -1;
  }
  const char *k;
  json_t *v;
  json_object_foreach(args, k, v) {
    if (!find_arg(p, k, strlen(k))) {
      snprintf(why, whylen, "prompt `%s` takes no argument `%.64s`", p->name, k);
      return -1;
    }
    if (!json_is_string(v)) {
      snprintf(why, whylen, "argument `%.64s` must be a string", k);
      return -1;
    }
  }
  for (size_t i = 0; i < p->nargs; i++)
    if (p->args[i].required && !json_is_string(json_object_get(args, p->args[i].name))) {
      snprintf(why, whylen, "prompt `%s` needs the argument `%s`", p->name, p->args[i].name);
      return -1;
    }
  struct fill f = {.args = args, .p = p, .from = p->body};
  if (each_place(p->body, fill_place, &f) < 0 || put(&f, f.from, strlen(f.from)) < 0) {
    snprintf(why, whylen, f.too_big ? "the filled prompt is larger than %d bytes" : "out of memory",
             MCP_PROMPT_RESULT_MAX);
    free(f.out);
    return -1;
  }
  json_t *r = json_pack("{s:[{s:s, s:{s:s, s:s}}]}", "messages", "role", "user", "content", "type",
                        "text", "text", f.out ? f.out : "");
  free(f.out);
  if (r && p->description)
    json_object_set_new(r, "description", json_string(p->description));
  *result = r;
  if (!r)
    snprintf(why, whylen, "out of memory");
  return r ? 0 : -1;
}
