/* /v1/sandboxes/{id}/contexts: code contexts (husk/context.h) over HTTP.
 *
 * The id "default" in a path is the box's default context of a language:
 * the execute body's `language`, or the `language` query argument of the
 * other routes (python when absent).
 *
 * An execution answers one JSON reply, or streams its events (NDJSON or
 * SSE, chosen like exec's) from a worker thread through a queue
 * (src/api/sse.c).  The stream's reply starts once the execution runs
 * (the core's `started`), or the execution sent something or ended.  Whatever fails before that (unknown box or context, a busy
 * context, an interpreter that is missing) is an ordinary HTTP error.
 *
 * Results carry box data of up to 24 MiB each: they are turned into JSON
 * text here once, with their escaped length counted first, within
 * --reply-max for a JSON reply and within the daemon's reply budget for a
 * stream; a representation that does not fit is left out and named in
 * the result's `truncated`. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "api/internal.h"
#include "husk/context.h"
#include "jail/limits.h"
#include "util/cleanup.h"

/* ---- ids, errors, the context JSON ---------------------------------- */

/* The context a path names: "default" is "default-<language>". */
static int ctx_path_id(struct req *r, const char *language, char *out, size_t size) {
  const char *p = r->params[1];
  if (!strcmp(p, "default")) {
    const char *l = language ? language : "python";
    if (strcmp(l, "python") && strcmp(l, "javascript") && strcmp(l, "bash"))
      return husk_fail(&r->err, EINVAL, "unknown language (python, javascript or bash)");
    snprintf(out, size, "default-%s", l);
    return 0;
  }
  snprintf(out, size, "%s", p);
  return 0;
}

/* A core error.  ENOTSUP is 400, not 501: the request asked for what this
 * sandbox cannot do (its template has no such interpreter, or it was
 * started by an older husk); another sandbox can.  EUSERS (the box's or
 * the tenant's bound on contexts) is 429 like every tenant bound. */
static enum MHD_Result ctx_reply_err(struct req *r, const struct husk_err *err) {
  if (err->code == ENOTSUP)
    return api_reply_error(r, 400, "not_supported", "%s", err->msg[0] ? err->msg : "not supported");
  return api_reply_err(r, err);
}

static json_t *ctx_json(const struct husk_ctx_info *c) {
  json_t *j = json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:o, s:o}", "id", c->id, "language",
                        c->language, "state", c->state, "version", c->version, "cwd", c->cwd,
                        "pid", (json_int_t)c->pid, "execution_count",
                        (json_int_t)c->execution_count, "created_at", json_time(c->created_ms),
                        "started_at", json_time(c->started_ms));
  return j;
}

static const char *const create_fields[] = {"language", "cwd", "env", NULL};

enum MHD_Result h_ctx_create(struct req *r) {
  json_t *o = api_body_object(r, create_fields);
  if (!o)
    return api_reply_bad(r);
  const char *language = NULL, *cwd = NULL;
  char **env = NULL;
  if (jget_string(o, "language", &language, &r->err) < 0 ||
      jget_string(o, "cwd", &cwd, &r->err) < 0 || jget_env(o, "env", &env, &r->err) < 0) {
    json_decref(o);
    return api_reply_bad(r);
  }
  if (language && strcmp(language, "python") && strcmp(language, "javascript") &&
      strcmp(language, "bash")) {
    json_decref(o);
    free(env);
    return api_reply_error(r, 400, "bad_request",
                           "unknown `language` (python, javascript or bash)");
  }
  if (cwd && cwd[0] != '/') {
    json_decref(o);
    free(env);
    return api_reply_error(r, 400, "bad_request",
                           "`cwd` must be an absolute path in the box, such as /workspace");
  }
  struct husk_ctx_req cr = {.language = language, .cwd = cwd, .env = env};
  struct husk_ctx_info info;
  struct husk_err err = {0};
  int rc = husk_ctx_create(r->srv->cfg.mgr, r->tenant, r->params[0], &cr, &info, &err);
  free(env);
  json_decref(o);
  if (rc < 0)
    return ctx_reply_err(r, &err);
  snprintf(r->audit_detail, sizeof r->audit_detail, "%s %s", info.id, info.language);
  return api_reply_json(r, 201, ctx_json(&info));
}

static int list_cb(void *ctx, const struct husk_ctx_info *c) {
  json_t *j = ctx_json(c);
  if (!j || json_array_append_new(ctx, j) < 0)
    return API_LIST_NOMEM;
  return 0;
}

enum MHD_Result h_ctx_list(struct req *r) {
  /* At most HUSK_CTX_MAX small entries: no page, no budget. */
  json_t *a = json_array();
  if (!a)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  struct husk_err err = {0};
  int rc = husk_ctx_list(r->srv->cfg.mgr, r->tenant, r->params[0], list_cb, a, &err);
  if (rc < 0) {
    json_decref(a);
    if (rc == API_LIST_NOMEM)
      return api_reply_error(r, 500, "internal_error", "out of memory");
    return ctx_reply_err(r, &err);
  }
  return api_reply_json(r, 200, json_pack("{s:o}", "contexts", a));
}

/* The context a GET, DELETE, restart or interrupt names. */
static int ctx_target(struct req *r, char *id, size_t size) {
  return ctx_path_id(r, api_query(r, "language"), id, size);
}

enum MHD_Result h_ctx_get(struct req *r) {
  char id[HUSK_CTX_ID_MAX];
  if (ctx_target(r, id, sizeof id) < 0)
    return api_reply_bad(r);
  struct husk_ctx_info info;
  struct husk_err err = {0};
  if (husk_ctx_get(r->srv->cfg.mgr, r->tenant, r->params[0], id, &info, &err) < 0)
    return ctx_reply_err(r, &err);
  return api_reply_json(r, 200, ctx_json(&info));
}

enum MHD_Result h_ctx_delete(struct req *r) {
  char id[HUSK_CTX_ID_MAX];
  if (ctx_target(r, id, sizeof id) < 0)
    return api_reply_bad(r);
  snprintf(r->audit_detail, sizeof r->audit_detail, "%s", id);
  struct husk_err err = {0};
  if (husk_ctx_delete(r->srv->cfg.mgr, r->tenant, r->params[0], id, &err) < 0)
    return ctx_reply_err(r, &err);
  return api_reply_empty(r, 204);
}

enum MHD_Result h_ctx_restart(struct req *r) {
  char id[HUSK_CTX_ID_MAX];
  if (ctx_target(r, id, sizeof id) < 0)
    return api_reply_bad(r);
  snprintf(r->audit_detail, sizeof r->audit_detail, "%s", id);
  struct husk_ctx_info info;
  struct husk_err err = {0};
  if (husk_ctx_restart(r->srv->cfg.mgr, r->tenant, r->params[0], id, &info, &err) < 0)
    return ctx_reply_err(r, &err);
  return api_reply_json(r, 200, ctx_json(&info));
}

enum MHD_Result h_ctx_interrupt(struct req *r) {
  char id[HUSK_CTX_ID_MAX];
  if (ctx_target(r, id, sizeof id) < 0)
    return api_reply_bad(r);
  snprintf(r->audit_detail, sizeof r->audit_detail, "%s", id);
  struct husk_err err = {0};
  if (husk_ctx_interrupt(r->srv->cfg.mgr, r->tenant, r->params[0], id, &err) < 0)
    return ctx_reply_err(r, &err);
  return api_reply_empty(r, 204);
}

/* ---- results as JSON text ------------------------------------------- */

struct tbuf {
  char *d;
  size_t len, alloc;
  bool oom;
};

static void tb_add(struct tbuf *t, const char *s, size_t n) {
  if (t->oom)
    return;
  if (t->len + n + 1 > t->alloc) {
    size_t a = t->alloc ? t->alloc : 1024;
    while (a < t->len + n + 1)
      a *= 2;
    char *d = realloc(t->d, a);
    if (!d) {
      t->oom = true;
      return;
    }
    t->d = d;
    t->alloc = a;
  }
  memcpy(t->d + t->len, s, n);
  t->len += n;
  t->d[t->len] = '\0';
}

static void tb_str(struct tbuf *t, const char *s) { tb_add(t, s, strlen(s)); }

/* The JSON string text of s (UTF-8 the core checked): its length, and
 * into t when t is not NULL. */
static size_t json_str(struct tbuf *t, const char *s, size_t n) {
  static const char hex[] = "0123456789abcdef";
  size_t total = 2, run = 0;
  if (t)
    tb_add(t, "\"", 1);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    char esc[7];
    size_t el = 0;
    if (c == '"' || c == '\\') {
      esc[0] = '\\';
      esc[1] = (char)c;
      el = 2;
    } else if (c == '\n') {
      memcpy(esc, "\\n", 2);
      el = 2;
    } else if (c < 0x20) {
      memcpy(esc, "\\u00", 4);
      esc[4] = hex[c >> 4];
      esc[5] = hex[c & 15];
      el = 6;
    }
    if (!el) {
      run++;
      continue;
    }
    if (t && run)
      tb_add(t, s + i - run, run);
    total += run + el;
    run = 0;
    if (t)
      tb_add(t, esc, el);
  }
  if (t && run)
    tb_add(t, s + n - run, run);
  if (t)
    tb_add(t, "\"", 1);
  return total + run;
}

/* A result or an error as a JSON object's text: at most `cap` bytes of
 * representation data (escaped); the representations past it are named
 * in "truncated" (and *cut set).  An error's traceback is cut to fit. */
static void output_text(struct tbuf *t, const struct husk_ctx_output *o, size_t cap, bool *cut) {
  if (o->is_error) {
    size_t nl = strlen(o->name), vl = strlen(o->value), tl = strlen(o->traceback);
    tb_str(t, "{\"name\":");
    json_str(t, o->name, nl > 256 ? 256 : nl);
    tb_str(t, ",\"value\":");
    size_t vmax = cap / 4, tmax = cap / 2;
    if (vl > vmax) {
      vl = utf8_complete_prefix(o->value, vmax);
      *cut = true;
    }
    json_str(t, o->value, vl);
    tb_str(t, ",\"traceback\":");
    if (tl > tmax) {
      /* The end of a traceback says most: keep it. */
      const char *s = o->traceback + tl - tmax;
      size_t skip = 0;
      while (skip < 4 && ((unsigned char)s[skip] & 0xc0) == 0x80)
        skip++;
      json_str(t, s + skip, tmax - skip);
      *cut = true;
    } else {
      json_str(t, o->traceback, tl);
    }
    tb_str(t, "}");
    return;
  }
  tb_str(t, o->is_main_result ? "{\"is_main_result\":true,\"data\":{"
                              : "{\"is_main_result\":false,\"data\":{");
  size_t used = 0;
  bool first = true, any_left = false;
  bool *left = calloc(o->nreprs ? o->nreprs : 1, sizeof *left);
  if (!left) {
    t->oom = true;
    return;
  }
  for (size_t i = 0; i < o->nreprs; i++) {
    size_t need = json_str(NULL, o->reprs[i].mime, strlen(o->reprs[i].mime)) +
                  json_str(NULL, o->reprs[i].data, o->reprs[i].len) + 2;
    if (used + need > cap) {
      left[i] = any_left = true;
      continue;
    }
    used += need;
    if (!first)
      tb_str(t, ",");
    first = false;
    json_str(t, o->reprs[i].mime, strlen(o->reprs[i].mime));
    tb_str(t, ":");
    json_str(t, o->reprs[i].data, o->reprs[i].len);
  }
  tb_str(t, "}");
  if (o->ntruncated || any_left) {
    *cut = true;
    tb_str(t, ",\"truncated\":[");
    first = true;
    /* The names are the box's too: an eighth of the share for each list
     * (and the name that passes it). */
    size_t names_from = t->len, lim = cap / 8 < 4096 ? cap / 8 : 4096;
    for (size_t i = 0; i < o->ntruncated && t->len - names_from < lim; i++) {
      if (!first)
        tb_str(t, ",");
      first = false;
      json_str(t, o->truncated[i], strlen(o->truncated[i]));
    }
    for (size_t i = 0; i < o->nreprs && t->len - names_from < 2 * lim; i++) {
      if (!left[i])
        continue;
      if (!first)
        tb_str(t, ",");
      first = false;
      json_str(t, o->reprs[i].mime, strlen(o->reprs[i].mime));
    }
    tb_str(t, "]");
  }
  free(left);
  tb_str(t, "}");
}

/* The execution's outcome: the fields of the end event and of the reply. */
static json_t *end_json(const struct husk_ctx_exec_result *x, bool truncated) {
  json_t *j = json_pack("{s:s, s:I, s:f, s:b, s:b, s:I}", "status", husk_ctx_status_name(x->status),
                        "execution_count", (json_int_t)x->execution_count, "duration_ms",
                        x->duration_ms, "truncated", x->truncated || truncated, "restarted",
                        x->restarted, "output_bytes", (json_int_t)x->output_bytes);
  if (j && x->message[0]) {
    char m[sizeof x->message];
    snprintf(m, sizeof m, "%s", x->message);
    husk_sanitize_line(m);
    json_object_set_new(j, "message", json_text(m, strlen(m), false, NULL));
  }
  return j;
}

/* ---- the request ---------------------------------------------------- */

static const char *const exec_fields[] = {"code",   "language",     "env", "timeout",
                                          "timeout_ms", "output_limit", "stream", NULL};

struct exec_args {
  char id[HUSK_CTX_ID_MAX];
  const char *code;
  size_t code_len;
  char **env;
  uint64_t timeout_ms, output_limit;
  enum api_stream_fmt fmt;
  bool stream;
};

/* 0, or -1 after replying. */
static int exec_parse(struct req *r, json_t *o, struct exec_args *a, enum MHD_Result *ret) {
  const char *language = NULL;
  uint64_t t_s = 0, t_ms = 0;
  int got_code, got_s, got_ms;
  if ((got_code = jget_string(o, "code", &a->code, &r->err)) < 0 ||
      jget_string(o, "language", &language, &r->err) < 0 ||
      jget_env(o, "env", &a->env, &r->err) < 0 ||
      (got_s = jget_seconds_ms(o, "timeout", &t_s, &r->err)) < 0 ||
      (got_ms = jget_u64(o, "timeout_ms", HUSK_MAX_TIMEOUT_MS, &t_ms, &r->err)) < 0 ||
      jget_size(o, "output_limit", &a->output_limit, &r->err) < 0 ||
      jget_bool(o, "stream", &a->stream, &r->err) < 0) {
    *ret = api_reply_bad(r);
    return -1;
  }
  if (got_code == 0) {
    *ret = api_reply_error(r, 400, "bad_request", "`code` (a string) is required");
    return -1;
  }
  if (got_s && got_ms) {
    *ret = api_reply_error(r, 400, "bad_request",
                           "give `timeout` (seconds) or `timeout_ms` (milliseconds), not both");
    return -1;
  }
  if (got_ms && t_ms == 0) {
    *ret = api_reply_error(r, 400, "bad_request", "`timeout_ms` must be positive");
    return -1;
  }
  a->timeout_ms = got_ms ? t_ms : t_s;
  a->code_len = json_string_length(json_object_get(o, "code"));
  if (ctx_path_id(r, language, a->id, sizeof a->id) < 0) {
    *ret = api_reply_bad(r);
    return -1;
  }
  /* ?format=, else Accept, else "stream": true (SSE), as exec. */
  const char *q = api_query(r, "format");
  const char *acc = api_header(r, MHD_HTTP_HEADER_ACCEPT);
  a->fmt = STREAM_RAW; /* here: no stream, one JSON reply */
  if (q) {
    if (!strcmp(q, "sse"))
      a->fmt = STREAM_SSE;
    else if (!strcmp(q, "ndjson"))
      a->fmt = STREAM_NDJSON;
    else if (strcmp(q, "json")) {
      *ret = api_reply_error(r, 400, "bad_request", "format must be json, sse or ndjson");
      return -1;
    }
  } else if (acc && strcasestr(acc, "application/x-ndjson")) {
    a->fmt = STREAM_NDJSON;
  } else if (acc && strcasestr(acc, "text/event-stream")) {
    a->fmt = STREAM_SSE;
  } else if (a->stream) {
    a->fmt = STREAM_SSE;
  }
  return 0;
}

/* ---- one JSON reply ------------------------------------------------- */

/* A JSON reply reserves 2 x --reply-max, as a sync exec's does (every
 * budget the options allow fits it): half of --reply-max each for stdout,
 * stderr, the results and the error.  The results and the error leave a
 * margin for what passes their share: the framing of the last result and
 * the names of what was left out (output_text: a quarter of the share, at
 * most 8 KiB, plus two names and the framing). */
#define CTX_FRAMING_MARGIN (16 * 1024)

struct sync_exec {
  struct api_outbuf b[2];
  size_t cap;  /* of each stream */
  size_t rcap; /* of the results, and of the error */
  struct tbuf results; /* the results array's entries */
  struct tbuf error;   /* the error object, if any */
  size_t nresults;
  bool cut, oom;
};

static int sync_stream(void *ctx, int stream, const char *buf, size_t len) {
  struct sync_exec *s = ctx;
  if (api_outbuf_add(&s->b[stream == 2], s->cap, buf, len) < 0) {
    s->oom = true;
    return -1;
  }
  return 0;
}

static int sync_output(void *ctx, const struct husk_ctx_output *o) {
  struct sync_exec *s = ctx;
  if (o->is_error) {
    s->error.len = 0;
    output_text(&s->error, o, s->rcap, &s->cut);
  } else if (s->results.len >= s->rcap) {
    s->cut = true; /* no room for even its framing: left out */
  } else {
    size_t room = s->rcap - s->results.len;
    if (s->nresults)
      tb_str(&s->results, ",");
    output_text(&s->results, o, room, &s->cut);
    s->nresults++;
  }
  if (s->results.oom || s->error.oom) {
    s->oom = true;
    return -1;
  }
  return 0;
}

static enum MHD_Result exec_sync(struct req *r, struct exec_args *a) {
  uint64_t cap = api_reply_max(r->srv);
  uint64_t reserved = 2 * cap;
  if (!api_budget_take(r->srv, r->tenant, reserved))
    return api_reply_busy(r);
  size_t half = (size_t)cap / 2;
  struct sync_exec s = {.cap = half,
                        .rcap = half > 2 * CTX_FRAMING_MARGIN ? half - CTX_FRAMING_MARGIN
                                                              : half / 2};
  int cancel = api_cancel_fd(r);
  struct husk_ctx_exec_req er = {.code = a->code, .code_len = a->code_len, .env = a->env,
                                 .timeout_ms = a->timeout_ms, .output_limit = a->output_limit,
                                 .stream = sync_stream, .output = sync_output, .sink_ctx = &s,
                                 .cancel_fd = cancel};
  struct husk_ctx_exec_result x;
  struct husk_err err = {0};
  int rc = husk_ctx_execute(r->srv->cfg.mgr, r->tenant, r->params[0], a->id, &er, &x, &err);
  close_quiet(cancel);
  enum MHD_Result ret;
  if (rc < 0 || s.oom) {
    api_budget_give(r->srv, r->tenant, reserved);
    ret = rc < 0 ? ctx_reply_err(r, &err)
                 : api_reply_error(r, 500, "internal_error", "out of memory collecting the output");
  } else {
    struct jreply *j = jreply_new(r->srv, r->tenant, reserved);
    if (j) {
      json_t *e = end_json(&x, s.cut);
      if (e)
        json_object_set_new(e, "context", json_string(a->id));
      jreply_text(j, "{");
      jreply_fields(j, e);
      struct tbuf t = {0};
      tb_str(&t, ",\"results\":[");
      if (s.results.d)
        tb_add(&t, s.results.d, s.results.len);
      tb_str(&t, "],\"error\":");
      if (s.error.d)
        tb_add(&t, s.error.d, s.error.len);
      else
        tb_str(&t, "null");
      if (t.oom) {
        free(t.d);
        jreply_free(j);
        j = NULL; /* answered as out of memory */
      } else {
        jreply_take_text(j, t.d, t.len);
        api_add_output(j, "stdout", &s.b[0]);
        api_add_output(j, "stderr", &s.b[1]);
        jreply_text(j, "}");
      }
    }
    ret = api_reply_jreply(r, 200, j);
  }
  free(s.b[0].d);
  free(s.b[1].d);
  free(s.results.d);
  free(s.error.d);
  return ret;
}

/* ---- a stream of events --------------------------------------------- */

struct cstream {
  struct api_server *srv;
  struct api_stream *st;
  enum api_stream_fmt fmt;
  char tenant[STATE_TENANT_ID_SIZE];
  char box[STATE_BOX_ID_SIZE];
  char id[HUSK_CTX_ID_MAX];
  char *code;
  size_t code_len;
  char **env;
  uint64_t timeout_ms, output_limit;
  int cancel_fd;
  /* Output not yet sent because it ends inside a UTF-8 sequence. */
  char carry[2][4];
  size_t carry_len[2];
  bool cut; /* a result was cut here */

  pthread_mutex_t mu;
  pthread_cond_t cv;
  int refs;
  bool sent, finished;
  int rc;
  struct husk_err err;
};

static void cs_unref(struct cstream *cs) {
  pthread_mutex_lock(&cs->mu);
  bool last = --cs->refs == 0;
  pthread_mutex_unlock(&cs->mu);
  if (!last)
    return;
  api_stream_unref(cs->st);
  close_quiet(cs->cancel_fd);
  free(cs->code);
  free(cs->env);
  pthread_mutex_destroy(&cs->mu);
  pthread_cond_destroy(&cs->cv);
  free(cs);
}

static void cs_mark_sent(struct cstream *cs) {
  pthread_mutex_lock(&cs->mu);
  if (!cs->sent) {
    cs->sent = true;
    pthread_cond_broadcast(&cs->cv);
  }
  pthread_mutex_unlock(&cs->mu);
}

static int push_bytes(struct cstream *cs, int stream, const char *buf, size_t len) {
  if (!len)
    return 0;
  return api_stream_push(cs->st, stream == 2 ? "stderr" : "stdout", api_chunk_json(buf, len));
}

/* As exec's stream: a partial character at a chunk's end waits for the
 * next chunk, so text events never split one; bytes that are not UTF-8
 * come as data_b64. */
static int cs_stream(void *ctx, int stream, const char *buf, size_t len) {
  struct cstream *cs = ctx;
  cs_mark_sent(cs);
  int k = stream == 2;
  char tmp[4 + 65536];
  const char *p = buf;
  size_t n = len;
  if (cs->carry_len[k]) {
    if (cs->carry_len[k] + len <= sizeof tmp) {
      memcpy(tmp, cs->carry[k], cs->carry_len[k]);
      memcpy(tmp + cs->carry_len[k], buf, len);
      p = tmp;
      n = cs->carry_len[k] + len;
    } else if (push_bytes(cs, stream, cs->carry[k], cs->carry_len[k]) < 0) {
      return -1;
    }
    cs->carry_len[k] = 0;
  }
  size_t keep = n - utf8_complete_prefix(p, n);
  if (push_bytes(cs, stream, p, n - keep) < 0)
    return -1;
  memcpy(cs->carry[k], p + n - keep, keep);
  cs->carry_len[k] = keep;
  return 0;
}

static int flush_carry(struct cstream *cs) {
  for (int k = 0; k < 2; k++) {
    if (push_bytes(cs, k + 1, cs->carry[k], cs->carry_len[k]) < 0)
      return -1;
    cs->carry_len[k] = 0;
  }
  return 0;
}

/* One event from JSON object text, pushed in pieces (the queue's bound
 * holds); its text is held meanwhile within the reply budget. */
static int push_text_event(struct cstream *cs, const char *type, struct tbuf *obj) {
  struct tbuf ev = {0};
  if (cs->fmt == STREAM_SSE) {
    tb_str(&ev, "event: ");
    tb_str(&ev, type);
    tb_str(&ev, "\ndata: ");
    tb_add(&ev, obj->d, obj->len);
    tb_str(&ev, "\n\n");
  } else {
    tb_str(&ev, "{\"type\":\"");
    tb_str(&ev, type);
    tb_str(&ev, "\",");
    tb_add(&ev, obj->d + 1, obj->len - 1); /* the object's members and its brace */
    tb_str(&ev, "\n");
  }
  int rc = ev.oom ? -1 : api_stream_push_raw(cs->st, ev.d, ev.len);
  free(ev.d);
  return rc;
}

static int cs_output(void *ctx, const struct husk_ctx_output *o) {
  struct cstream *cs = ctx;
  cs_mark_sent(cs);
  /* Output before it, in order. */
  if (flush_carry(cs) < 0)
    return -1;
  /* The event's text (and its escaped data, then its framing) is held
   * until it is queued: twice its data from the budget, or less data. */
  size_t data = 0;
  for (size_t i = 0; i < o->nreprs; i++)
    data += o->reprs[i].len;
  if (o->is_error)
    data = strlen(o->value) + strlen(o->traceback);
  uint64_t cap = api_reply_max(cs->srv);
  uint64_t want = 2 * (uint64_t)data + 4096;
  uint64_t take = 0;
  size_t room = (size_t)cap;
  if (data > cap) {
    for (uint64_t w = want; w >= 2 * cap + 4096; w /= 2) {
      if (api_budget_take(cs->srv, cs->tenant, w)) {
        take = w;
        room = (size_t)((w - 4096) / 2);
        break;
      }
    }
  }
  struct tbuf obj = {0};
  bool cut = false;
  output_text(&obj, o, take ? room : (size_t)cap, &cut);
  if (cut)
    cs->cut = true;
  int rc = obj.oom ? -1 : push_text_event(cs, o->is_error ? "error" : "result", &obj);
  free(obj.d);
  if (take)
    api_budget_give(cs->srv, cs->tenant, take);
  return rc;
}

/* The execution runs: from here the worker reports into the stream. */
static void cs_started(void *ctx) { cs_mark_sent(ctx); }

static void *cs_worker(void *arg) {
  struct cstream *cs = arg;
  struct husk_ctx_exec_req er = {.code = cs->code, .code_len = cs->code_len, .env = cs->env,
                                 .timeout_ms = cs->timeout_ms, .output_limit = cs->output_limit,
                                 .stream = cs_stream, .output = cs_output,
                                 .started = cs_started, .sink_ctx = cs,
                                 .cancel_fd = cs->cancel_fd};
  struct husk_err err = {0};
  struct husk_ctx_exec_result x;
  int rc = husk_ctx_execute(cs->srv->cfg.mgr, cs->tenant, cs->box, cs->id, &er, &x, &err);
  pthread_mutex_lock(&cs->mu);
  cs->finished = true;
  cs->rc = rc;
  cs->err = err;
  bool streaming = cs->sent;
  pthread_cond_broadcast(&cs->cv);
  pthread_mutex_unlock(&cs->mu);
  /* Past the start, the handler has queued the stream's response: the
   * outcome is its last event.  Before it, the handler answers. */
  if (rc == 0 || streaming) {
    if (flush_carry(cs) == 0) {
      if (rc == 0) {
        json_t *e = end_json(&x, cs->cut);
        if (e)
          json_object_set_new(e, "context", json_string(cs->id));
        api_stream_push(cs->st, "end", e);
      } else {
        unsigned status;
        const char *name;
        api_err_status(err.code, &status, &name);
        api_stream_push(cs->st, "failed",
                        json_pack("{s:s, s:s}", "code", name, "message",
                                  status >= 500 ? "internal error" : err.msg));
      }
    }
  }
  api_stream_close(cs->st);
  struct api_server *srv = cs->srv;
  cs_unref(cs);
  api_worker_leave(srv);
  return NULL;
}

static enum MHD_Result exec_stream(struct req *r, struct exec_args *a) {
  /* A context that is busy already is a 409 before anything starts. */
  struct husk_ctx_info info;
  struct husk_err err = {0};
  if (husk_ctx_get(r->srv->cfg.mgr, r->tenant, r->params[0], a->id, &info, &err) == 0) {
    if (!strcmp(info.state, "busy"))
      return api_reply_error(r, 409, "conflict", "context %s is running another execution",
                             a->id);
  } else if (!(err.code == ENOENT && !strncmp(a->id, "default-", 8))) {
    return ctx_reply_err(r, &err);
  }
  struct cstream *cs = calloc(1, sizeof *cs);
  if (!cs)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  pthread_mutex_init(&cs->mu, NULL);
  pthread_cond_init(&cs->cv, NULL);
  cs->refs = 1;
  cs->srv = r->srv;
  cs->fmt = a->fmt;
  cs->cancel_fd = -1;
  cs->env = a->env;
  a->env = NULL;
  snprintf(cs->tenant, sizeof cs->tenant, "%s", r->tenant);
  snprintf(cs->box, sizeof cs->box, "%s", r->params[0]);
  snprintf(cs->id, sizeof cs->id, "%s", a->id);
  cs->code = malloc(a->code_len + 1);
  if (cs->code)
    memcpy(cs->code, a->code, a->code_len);
  cs->code_len = a->code_len;
  cs->timeout_ms = a->timeout_ms;
  cs->output_limit = a->output_limit;
  cs->st = api_stream_new(r, a->fmt);
  bool busy = !cs->st && errno == EAGAIN;
  /* Cancel when the client hangs up, the response is released, or at a
   * stop: the core interrupts the execution. */
  cs->cancel_fd = api_cancel_fd(r);
  bool ok = cs->st && cs->code && cs->cancel_fd >= 0;
  if (ok) {
    struct epoll_event e1 = {.events = EPOLLIN};
    ok = epoll_ctl(cs->cancel_fd, EPOLL_CTL_ADD, api_stream_gone_fd(cs->st), &e1) == 0;
  }
  if (!ok) {
    cs_unref(cs);
    return busy ? api_reply_busy(r)
                : api_reply_error(r, 500, "internal_error", "cannot set up the stream");
  }
  cs->refs = 2; /* this handler and the worker */
  if (api_worker_start(r->srv, cs_worker, cs) != 0) {
    cs->refs = 1;
    cs_unref(cs);
    return api_reply_error(r, 503, "unavailable", "cannot start a worker thread");
  }
  /* Wait until the execution runs (the core's `started`, once everything
   * that can refuse it has passed), sends, or ends. */
  pthread_mutex_lock(&cs->mu);
  while (!cs->sent && !cs->finished)
    pthread_cond_wait(&cs->cv, &cs->mu);
  bool failed = !cs->sent && cs->finished && cs->rc < 0;
  err = cs->err;
  pthread_mutex_unlock(&cs->mu);
  enum MHD_Result ret;
  if (failed) {
    ret = ctx_reply_err(r, &err);
  } else {
    struct MHD_Response *resp = api_stream_response(cs->st);
    ret = resp ? api_queue(r, 200, resp) : MHD_NO;
  }
  cs_unref(cs);
  return ret;
}

enum MHD_Result h_ctx_execute(struct req *r) {
  json_t *o = api_body_object(r, exec_fields);
  if (!o)
    return api_reply_bad(r);
  struct exec_args a = {0};
  enum MHD_Result ret;
  if (exec_parse(r, o, &a, &ret) == 0) {
    /* The audit names the context and the size only: code may carry secrets. */
    snprintf(r->audit_detail, sizeof r->audit_detail, "%s %zu bytes", a.id, a.code_len);
    ret = a.fmt == STREAM_RAW ? exec_sync(r, &a) : exec_stream(r, &a);
  }
  free(a.env);
  json_decref(o);
  return ret;
}
