/* /v1/sandboxes/{id}/exec and /processes: commands in a box.
 *
 * Sync exec: husk_box_exec() in the connection's thread, output collected, one
 * JSON reply.  Its cancel fd is an epoll set of the connection's hang-up
 * and the server's stop: a client that goes away ends the command.
 *
 * Streaming exec (SSE or NDJSON): husk_box_exec() runs in a worker thread whose
 * sink pushes each chunk into a queue (src/api/sse.c) that the connection's
 * thread writes out as it comes.  The reply starts once the command runs
 * (or produced output); errors before that (unknown box, wrong state) are
 * ordinary HTTP errors.  When the client goes away the queue is marked
 * gone: the sink returns -1 and the cancel fd becomes readable, and the
 * core kills the command's process group. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/internal.h"
#include "box/box.h"
#include "util/cleanup.h"

/* ---- shared formatting ---------------------------------------------- */

static json_t *outcome_json(const struct husk_exec_result *o) {
  json_t *j = json_pack("{s:i, s:s, s:i, s:I, s:I, s:b, s:I}", "exit_code", o->exit_code, "reason",
                        husk_reason_name(o->reason), "signal", o->signal, "wall_ms",
                        (json_int_t)o->wall_ms, "output_bytes", (json_int_t)o->output_bytes,
                        "truncated", o->truncated, "pid", (json_int_t)o->pid);
  if (j && o->message[0]) {
    char m[sizeof o->message];
    snprintf(m, sizeof m, "%s", o->message);
    husk_sanitize_line(m);
    json_object_set_new(j, "message", json_text(m, strlen(m), true, NULL));
  }
  return j;
}

static json_t *proc_json(const struct husk_proc *p) {
  json_error_t je;
  json_t *cmd = json_loads(p->cmd_json ? p->cmd_json : "[]", 0, &je);
  bool running = strcmp(p->state, "running") == 0;
  bool exited = strcmp(p->state, "exited") == 0;
  json_t *j = json_pack("{s:I, s:s, s:o, s:o, s:o, s:o, s:o}", "pid", (json_int_t)p->pid, "state",
                        p->state, "exit_code", exited ? json_integer(p->exit_code) : json_null(),
                        "signal", exited && p->signal ? json_integer(p->signal) : json_null(),
                        "started_at", json_time(p->started_ms), "ended_at",
                        running ? json_null() : json_time(p->ended_ms), "cmd",
                        json_is_array(cmd) ? cmd : (json_decref(cmd), json_array()));
  if (j) {
    json_object_set_new(j, "reason",
                        exited ? json_string(husk_reason_name(p->reason)) : json_null());
    json_object_set_new(j, "truncated", json_boolean(p->truncated));
    json_object_set_new(j, "created_by", api_created_by_json(p->created_by));
  }
  return j;
}

json_t *api_chunk_json(const char *buf, size_t len) {
  if (utf8_valid(buf, len))
    return json_pack("{s:s%}", "data", buf, len);
  char *b = b64_encode(buf, len, NULL);
  json_t *j = b ? json_pack("{s:s}", "data_b64", b) : NULL;
  free(b);
  return j;
}

static int parse_pid(struct req *r, int64_t *pid) {
  const char *s = r->params[1];
  if (!*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 9)
    return -1;
  *pid = strtoll(s, NULL, 10);
  return *pid > 0 ? 0 : -1;
}

enum out_fmt { FMT_JSON, FMT_SSE, FMT_NDJSON };

/* ?format=sse|ndjson|json, else the Accept header. */
static int want_format(struct req *r, enum out_fmt *f) {
  const char *q = api_query(r, "format");
  if (q) {
    if (!strcmp(q, "sse"))
      *f = FMT_SSE;
    else if (!strcmp(q, "ndjson"))
      *f = FMT_NDJSON;
    else if (!strcmp(q, "json"))
      *f = FMT_JSON;
    else
      return husk_fail(&r->err, EINVAL, "format must be json, sse or ndjson");
    return 1;
  }
  const char *acc = api_header(r, MHD_HTTP_HEADER_ACCEPT);
  if (acc && strcasestr(acc, "application/x-ndjson")) {
    *f = FMT_NDJSON;
    return 1;
  }
  if (acc && strcasestr(acc, "text/event-stream")) {
    *f = FMT_SSE;
    return 1;
  }
  return 0;
}

/* ---- sync exec ------------------------------------------------------ */

/* The output kept for the reply: at most `cap` bytes of each stream (the
 * daemon's --reply-max, reserved from the reply budget beforehand); what
 * the program writes past it is counted, not kept.  The program's own
 * output_limit still decides when it is killed. */
struct sync_ctx {
  struct api_outbuf b[2];
  size_t cap;
  bool oom;
};

int api_outbuf_add(struct api_outbuf *o, size_t cap, const char *buf, size_t len) {
  o->total += len;
  size_t take = len < cap - o->len ? len : cap - o->len;
  if (take == 0)
    return 0;
  if (o->len + take > o->alloc) {
    size_t a = o->alloc ? o->alloc : 4096;
    while (a < o->len + take)
      a *= 2;
    if (a > cap)
      a = cap;
    char *d = realloc(o->d, a);
    if (!d)
      return -1;
    o->d = d;
    o->alloc = a;
  }
  memcpy(o->d + o->len, buf, take);
  o->len += take;
  return 0;
}

static int sync_sink(void *ctx, int stream, const char *buf, size_t len) {
  struct sync_ctx *sc = ctx;
  if (api_outbuf_add(&sc->b[stream == 2], sc->cap, buf, len) < 0) {
    sc->oom = true;
    return -1;
  }
  return 0;
}

void api_add_output(struct jreply *j, const char *name, struct api_outbuf *o) {
  const char *d = o->d ? o->d : "";
  size_t n = o->len;
  /* Text whose cut splits a character is not "invalid UTF-8": end before
   * it (bytes that are not text are kept as they are). */
  if (o->total > o->len) {
    size_t m = utf8_complete_prefix(d, n);
    if (m < n && utf8_valid(d, m))
      n = m;
  }
  char k[64];
  snprintf(k, sizeof k, ",\"%s\":", name);
  jreply_text(j, k);
  jreply_string(j, d, n);
  if (!utf8_valid(d, n)) {
    snprintf(k, sizeof k, ",\"%s_b64\":", name);
    jreply_text(j, k);
    jreply_base64(j, d, n);
  }
  snprintf(k, sizeof k, ",\"%s_bytes\":%llu,\"%s_truncated\":%s", name,
           (unsigned long long)o->total, name, n < o->total ? "true" : "false");
  jreply_text(j, k);
  jreply_own(j, o->d);
  o->d = NULL;
}

/* ---- streaming exec ------------------------------------------------- */

struct xstream {
  struct api_server *srv;
  struct api_stream *st;
  char tenant[STATE_TENANT_ID_SIZE];
  char id[STATE_BOX_ID_SIZE];
  char **argv, **env;
  char *cwd, *stdin_buf;
  size_t stdin_len;
  uint64_t timeout_ms, output_limit;
  int cancel_fd;
  /* Output not yet sent because it ends inside a UTF-8 sequence. */
  char carry[2][4];
  size_t carry_len[2];

  pthread_mutex_t mu;
  pthread_cond_t cv;
  int refs;
  bool started, finished;
  int rc;
  struct husk_err err;
  struct husk_exec_result out;
};

static void xs_unref(struct xstream *xs) {
  pthread_mutex_lock(&xs->mu);
  bool last = --xs->refs == 0;
  pthread_mutex_unlock(&xs->mu);
  if (!last)
    return;
  api_stream_unref(xs->st);
  close_quiet(xs->cancel_fd);
  free(xs->argv);
  free(xs->env);
  free(xs->cwd);
  free(xs->stdin_buf);
  pthread_mutex_destroy(&xs->mu);
  pthread_cond_destroy(&xs->cv);
  free(xs);
}

static void xs_mark_started(struct xstream *xs) {
  pthread_mutex_lock(&xs->mu);
  if (!xs->started) {
    xs->started = true;
    pthread_cond_broadcast(&xs->cv);
  }
  pthread_mutex_unlock(&xs->mu);
}

static void xs_started(void *ctx, pid_t pid) {
  (void)pid;
  xs_mark_started(ctx);
}

static int push_bytes(struct xstream *xs, int stream, const char *buf, size_t len) {
  if (!len)
    return 0;
  return api_stream_push(xs->st, stream == 2 ? "stderr" : "stdout", api_chunk_json(buf, len));
}

static int xs_sink(void *ctx, int stream, const char *buf, size_t len) {
  struct xstream *xs = ctx;
  xs_mark_started(xs);
  int k = stream == 2;
  /* Glue a carried partial character to this chunk, then keep back a
   * partial character at its end, so text events never split one. */
  char tmp[4 + 65536];
  const char *p = buf;
  size_t n = len;
  if (xs->carry_len[k]) {
    if (xs->carry_len[k] + len <= sizeof tmp) {
      memcpy(tmp, xs->carry[k], xs->carry_len[k]);
      memcpy(tmp + xs->carry_len[k], buf, len);
      p = tmp;
      n = xs->carry_len[k] + len;
    } else if (push_bytes(xs, stream, xs->carry[k], xs->carry_len[k]) < 0) {
      return -1;
    }
    xs->carry_len[k] = 0;
  }
  size_t keep = n - utf8_complete_prefix(p, n);
  if (push_bytes(xs, stream, p, n - keep) < 0)
    return -1;
  memcpy(xs->carry[k], p + n - keep, keep);
  xs->carry_len[k] = keep;
  return 0;
}

static void *xs_worker(void *arg) {
  struct xstream *xs = arg;
  struct husk_exec_req er = {.argv = xs->argv, .env = xs->env, .cwd = xs->cwd,
                            .timeout_ms = xs->timeout_ms, .output_limit = xs->output_limit,
                            .stdin_buf = xs->stdin_buf, .stdin_len = xs->stdin_len,
                            .sink = xs_sink, .started = xs_started, .sink_ctx = xs,
                            .cancel_fd = xs->cancel_fd};
  struct husk_err err = {0};
  struct husk_exec_result out;
  memset(&out, 0, sizeof out);
  int rc = husk_box_exec(xs->srv->cfg.mgr, xs->tenant, xs->id, &er, &out, &err);
  pthread_mutex_lock(&xs->mu);
  xs->finished = true;
  xs->rc = rc;
  xs->err = err;
  xs->out = out;
  bool streaming = xs->started;
  pthread_cond_broadcast(&xs->cv);
  pthread_mutex_unlock(&xs->mu);
  if (rc == 0 || streaming) {
    for (int k = 0; k < 2; k++)
      if (push_bytes(xs, k + 1, xs->carry[k], xs->carry_len[k]) < 0)
        break;
    if (rc == 0) {
      api_stream_push(xs->st, "exit", outcome_json(&out));
    } else {
      unsigned status;
      const char *name;
      api_err_status(err.code, &status, &name);
      api_stream_push(xs->st, "error",
                      json_pack("{s:s, s:s}", "code", name,
                                "message", status >= 500 ? "internal error" : err.msg));
    }
  }
  api_stream_close(xs->st);
  struct api_server *srv = xs->srv;
  xs_unref(xs);
  api_worker_leave(srv);
  return NULL;
}

static enum MHD_Result exec_stream(struct req *r, enum api_stream_fmt fmt, char **argv, char **env,
                                   const char *cwd, const char *stdin_s, size_t stdin_len,
                                   uint64_t timeout_ms, uint64_t output_limit) {
  struct xstream *xs = calloc(1, sizeof *xs);
  if (!xs) {
    free(argv);
    free(env);
    return api_reply_error(r, 500, "internal_error", "out of memory");
  }
  pthread_mutex_init(&xs->mu, NULL);
  pthread_cond_init(&xs->cv, NULL);
  xs->refs = 1;
  xs->srv = r->srv;
  xs->argv = argv;
  xs->env = env;
  xs->cancel_fd = -1;
  snprintf(xs->tenant, sizeof xs->tenant, "%s", r->tenant);
  snprintf(xs->id, sizeof xs->id, "%s", r->params[0]);
  xs->cwd = cwd ? strdup(cwd) : NULL;
  xs->stdin_len = stdin_len;
  xs->stdin_buf = stdin_len ? malloc(stdin_len) : NULL;
  if (stdin_len && xs->stdin_buf)
    memcpy(xs->stdin_buf, stdin_s, stdin_len);
  xs->timeout_ms = timeout_ms;
  xs->output_limit = output_limit;
  xs->st = api_stream_new(r, fmt);
  bool busy = !xs->st && errno == EAGAIN;
  /* Cancel when the client hangs up (also before the reply started), when
   * the response is released (the stream's gone fd) or at a stop. */
  xs->cancel_fd = api_cancel_fd(r);
  bool ok = xs->st && xs->cancel_fd >= 0 && (!cwd || xs->cwd) && (!stdin_len || xs->stdin_buf);
  if (ok) {
    struct epoll_event e1 = {.events = EPOLLIN};
    ok = epoll_ctl(xs->cancel_fd, EPOLL_CTL_ADD, api_stream_gone_fd(xs->st), &e1) == 0;
  }
  if (!ok) {
    xs_unref(xs);
    return busy ? api_reply_busy(r) : api_reply_error(r, 500, "internal_error", "cannot set up the stream");
  }
  xs->refs = 2; /* this handler and the worker */
  if (api_worker_start(r->srv, xs_worker, xs) != 0) {
    xs->refs = 1;
    xs_unref(xs);
    return api_reply_error(r, 503, "unavailable", "cannot start a worker thread");
  }
  /* Wait for the command to run (or for the call to fail before). */
  pthread_mutex_lock(&xs->mu);
  while (!xs->started && !xs->finished)
    pthread_cond_wait(&xs->cv, &xs->mu);
  bool failed = !xs->started && xs->finished && xs->rc < 0;
  struct husk_err err = xs->err;
  pthread_mutex_unlock(&xs->mu);
  enum MHD_Result ret;
  if (failed) {
    ret = api_reply_err(r, &err);
  } else {
    struct MHD_Response *resp = api_stream_response(xs->st);
    ret = resp ? api_queue(r, 200, resp) : MHD_NO;
  }
  xs_unref(xs);
  return ret;
}

/* ---- POST /exec ----------------------------------------------------- */

static const char *const exec_fields[] = {"cmd", "env", "cwd", "timeout", "stdin", "stream",
                                          "background", "output_limit", NULL};

enum MHD_Result h_exec(struct req *r) {
  json_t *o = api_body_object(r, exec_fields);
  if (!o)
    return api_reply_bad(r);
  char **argv = NULL, **env = NULL;
  const char *cwd = NULL, *stdin_s = NULL;
  uint64_t timeout_ms = 0, output_limit = 0;
  bool stream = false, background = false;
  enum out_fmt fmt = FMT_JSON;
  int got;
  if ((got = jget_argv(o, "cmd", &argv, &r->err)) < 0 || jget_env(o, "env", &env, &r->err) < 0 ||
      jget_string(o, "cwd", &cwd, &r->err) < 0 ||
      jget_seconds_ms(o, "timeout", &timeout_ms, &r->err) < 0 ||
      jget_string(o, "stdin", &stdin_s, &r->err) < 0 || jget_bool(o, "stream", &stream, &r->err) < 0 ||
      jget_bool(o, "background", &background, &r->err) < 0 ||
      jget_size(o, "output_limit", &output_limit, &r->err) < 0 || want_format(r, &fmt) < 0) {
    json_decref(o);
    free(argv);
    free(env);
    return api_reply_bad(r);
  }
  if (got == 0) {
    json_decref(o);
    free(env);
    return api_reply_error(r, 400, "bad_request", "`cmd` (an array: program and arguments) is required");
  }
  if (cwd && cwd[0] != '/') {
    json_decref(o);
    free(argv);
    free(env);
    return api_reply_error(r, 400, "bad_request",
                           "`cwd` must be an absolute path in the box, such as /workspace/src");
  }
  /* The audit names the program only: arguments may carry secrets. */
  snprintf(r->audit_detail, sizeof r->audit_detail, "%s%.120s", background ? "background " : "",
           argv[0]);
  size_t stdin_len = stdin_s ? json_string_length(json_object_get(o, "stdin")) : 0;
  enum MHD_Result ret;
  struct husk_err err = {0};
  if (background) {
    struct husk_exec_req er = {.argv = argv, .env = env, .cwd = cwd, .timeout_ms = timeout_ms,
                              .output_limit = output_limit, .stdin_buf = stdin_s,
                              .stdin_len = stdin_len, .cancel_fd = -1};
    char creator[STATE_CREATED_BY_SIZE];
    api_created_by(r, creator, sizeof creator);
    er.created_by = creator;
    struct husk_proc bp = {0};
    if (husk_box_exec_background(r->srv->cfg.mgr, r->tenant, r->params[0], &er, &bp, &err) < 0) {
      ret = api_reply_err(r, &err);
    } else {
      ret = api_reply_json(r, 201, proc_json(&bp));
      husk_proc_free(&bp);
    }
    free(argv);
    free(env);
  } else if (stream || fmt != FMT_JSON) {
    ret = exec_stream(r, fmt == FMT_NDJSON ? STREAM_NDJSON : STREAM_SSE, argv, env, cwd, stdin_s,
                      stdin_len, timeout_ms, output_limit);
  } else if (!api_budget_take(r->srv, r->tenant, 2 * api_reply_max(r->srv))) {
    free(argv);
    free(env);
    ret = api_reply_busy(r);
  } else {
    uint64_t reserved = 2 * api_reply_max(r->srv);
    struct sync_ctx sc = {.cap = (size_t)api_reply_max(r->srv)};
    int cancel = api_cancel_fd(r);
    struct husk_exec_req er = {.argv = argv, .env = env, .cwd = cwd, .timeout_ms = timeout_ms,
                              .output_limit = output_limit, .stdin_buf = stdin_s,
                              .stdin_len = stdin_len, .sink = sync_sink, .sink_ctx = &sc,
                              .cancel_fd = cancel};
    struct husk_exec_result out;
    memset(&out, 0, sizeof out);
    int rc = husk_box_exec(r->srv->cfg.mgr, r->tenant, r->params[0], &er, &out, &err);
    close_quiet(cancel);
    if (rc < 0) {
      api_budget_give(r->srv, r->tenant, reserved);
      ret = api_reply_err(r, &err);
    } else if (sc.oom) {
      api_budget_give(r->srv, r->tenant, reserved);
      ret = api_reply_error(r, 500, "internal_error", "out of memory collecting the output");
    } else {
      /* The reply owns the reservation and the kept output from here. */
      struct jreply *j = jreply_new(r->srv, r->tenant, reserved);
      if (j) {
        jreply_text(j, "{");
        jreply_fields(j, outcome_json(&out));
        api_add_output(j, "stdout", &sc.b[0]);
        api_add_output(j, "stderr", &sc.b[1]);
        jreply_text(j, "}");
      }
      ret = api_reply_jreply(r, 200, j);
    }
    free(sc.b[0].d);
    free(sc.b[1].d);
    free(argv);
    free(env);
  }
  json_decref(o);
  return ret;
}

/* ---- processes ------------------------------------------------------ */

/* A processes listing is paged like a files listing: at most `limit`
 * entries and --reply-max bytes of them (but always one), older than
 * `cursor` (the process order, from the previous page's next_cursor).  An
 * entry's cmd is cut (state_proc_page) so that one entry takes at most
 * PROC_ENTRY_MAX bytes; the rows of a page, read before it is built, at
 * most PROC_ROW_MAX each.  Both come out of the reply budget. */
#define PROC_ENTRY_MAX (API_PROC_CMD_MAX + 6 * STATE_PROC_CMD_CUT + 1024)
#define PROC_ROW_MAX (API_PROC_CMD_MAX + 4 * STATE_PROC_CMD_CUT + 512)

struct proc_page {
  uint64_t limit, count, last;
  size_t cap;
  char *text;
  size_t len, alloc;
  bool more, oom;
};

static int proc_page_cb(void *ctx, const struct husk_proc *p, uint64_t cursor, bool cmd_cut) {
  struct proc_page *pp = ctx;
  if (pp->count == pp->limit) {
    pp->more = true;
    return 1;
  }
  json_t *j = proc_json(p);
  if (j)
    json_object_set_new(j, "cmd_truncated", json_boolean(cmd_cut));
  char *d = j ? json_dumps(j, JSON_COMPACT) : NULL;
  json_decref(j);
  if (!d) {
    pp->oom = true;
    return API_LIST_NOMEM;
  }
  size_t n = strlen(d);
  if (pp->count > 0 && pp->len + 1 + n > pp->cap) {
    free(d);
    pp->more = true;
    return 1;
  }
  if (pp->len + n + 2 > pp->alloc) {
    size_t a = pp->alloc ? pp->alloc : 16384;
    while (a < pp->len + n + 2)
      a *= 2;
    char *t = realloc(pp->text, a);
    if (!t) {
      free(d);
      pp->oom = true;
      return API_LIST_NOMEM;
    }
    pp->text = t;
    pp->alloc = a;
  }
  if (pp->count)
    pp->text[pp->len++] = ',';
  memcpy(pp->text + pp->len, d, n);
  pp->len += n;
  pp->text[pp->len] = '\0';
  free(d);
  pp->count++;
  pp->last = cursor;
  return 0;
}

enum MHD_Result h_proc_list(struct req *r) {
  uint64_t limit = API_PROC_LIMIT_DEFAULT, cursor = 0;
  if (api_query_u64(r, "limit", API_PROC_LIMIT_MAX, &limit, NULL) < 0 ||
      api_query_u64(r, "cursor", INT64_MAX, &cursor, NULL) < 0)
    return api_reply_bad(r);
  if (limit == 0)
    return api_reply_error(r, 400, "bad_request", "limit must be 1 to %d", API_PROC_LIMIT_MAX);
  uint64_t cap = api_reply_max(r->srv);
  /* The page text may pass the cap by one entry; the rows are read (one
   * more than the page, to know there is more) before it is built. */
  uint64_t reserved = cap + PROC_ENTRY_MAX + (limit + 1) * PROC_ROW_MAX;
  if (!api_budget_take(r->srv, r->tenant, reserved))
    return api_reply_busy(r);
  struct proc_page pp = {.limit = limit, .cap = (size_t)cap};
  struct husk_err err;
  int rc = husk_proc_list_page(r->srv->cfg.mgr, r->tenant, r->params[0], cursor,
                               (unsigned)limit + 1, API_PROC_CMD_MAX, proc_page_cb, &pp, &err);
  if (rc < 0) {
    free(pp.text);
    api_budget_give(r->srv, r->tenant, reserved);
    return api_reply_list_err(r, rc, &err);
  }
  char tail[128];
  if (pp.more)
    snprintf(tail, sizeof tail, "],\"truncated\":true,\"next_cursor\":\"%llu\"}",
             (unsigned long long)pp.last);
  else
    snprintf(tail, sizeof tail, "],\"truncated\":false,\"next_cursor\":null}");
  /* The rows are gone: the reply keeps the page's share only. */
  api_budget_give(r->srv, r->tenant, (limit + 1) * PROC_ROW_MAX);
  reserved -= (limit + 1) * PROC_ROW_MAX;
  struct jreply *j = jreply_new(r->srv, r->tenant, reserved);
  if (!j) {
    free(pp.text);
    return api_reply_error(r, 500, "internal_error", "out of memory");
  }
  jreply_text(j, "{\"processes\":[");
  if (pp.text)
    jreply_take_text(j, pp.text, pp.len);
  jreply_text(j, tail);
  return api_reply_jreply(r, 200, j);
}

enum MHD_Result h_proc_get(struct req *r) {
  int64_t pid;
  if (parse_pid(r, &pid) < 0)
    return api_reply_error(r, 404, "not_found", "no such process");
  struct husk_proc p = {0};
  struct husk_err err;
  if (husk_proc_get(r->srv->cfg.mgr, r->tenant, r->params[0], pid, &p, &err) < 0)
    return api_reply_err(r, &err);
  json_t *j = proc_json(&p);
  husk_proc_free(&p);
  return api_reply_json(r, 200, j);
}

static const struct {
  const char *name;
  int sig;
} signames[] = {
    {"HUP", SIGHUP},   {"INT", SIGINT},       {"QUIT", SIGQUIT},   {"ILL", SIGILL},
    {"TRAP", SIGTRAP}, {"ABRT", SIGABRT},     {"BUS", SIGBUS},     {"FPE", SIGFPE},
    {"KILL", SIGKILL}, {"USR1", SIGUSR1},     {"SEGV", SIGSEGV},   {"USR2", SIGUSR2},
    {"PIPE", SIGPIPE}, {"ALRM", SIGALRM},     {"TERM", SIGTERM},   {"CHLD", SIGCHLD},
    {"CONT", SIGCONT}, {"STOP", SIGSTOP},     {"TSTP", SIGTSTP},   {"TTIN", SIGTTIN},
    {"TTOU", SIGTTOU}, {"URG", SIGURG},       {"XCPU", SIGXCPU},   {"XFSZ", SIGXFSZ},
    {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH}, {"IO", SIGIO},
    {"SYS", SIGSYS},
};

static const char *const signal_fields[] = {"signal", "group", NULL};

enum MHD_Result h_proc_signal(struct req *r) {
  int64_t pid;
  if (parse_pid(r, &pid) < 0)
    return api_reply_error(r, 404, "not_found", "no such process");
  json_t *o = api_body_object(r, signal_fields);
  if (!o)
    return api_reply_bad(r);
  int sig = SIGTERM;
  bool group = true;
  json_t *v = json_object_get(o, "signal");
  if (json_is_integer(v)) {
    json_int_t x = json_integer_value(v);
    if (x <= 0 || x > 64) {
      json_decref(o);
      return api_reply_error(r, 400, "bad_request", "`signal` must be 1..64 or a name");
    }
    sig = (int)x;
  } else if (json_is_string(v)) {
    const char *s = json_string_value(v);
    if (!strncasecmp(s, "SIG", 3))
      s += 3;
    sig = 0;
    for (size_t i = 0; i < sizeof signames / sizeof signames[0]; i++)
      if (!strcasecmp(s, signames[i].name))
        sig = signames[i].sig;
    if (!sig) {
      json_decref(o);
      return api_reply_error(r, 400, "bad_request", "unknown signal name");
    }
  } else if (v && !json_is_null(v)) {
    json_decref(o);
    return api_reply_error(r, 400, "bad_request", "`signal` must be a number or a name such as \"TERM\"");
  }
  if (jget_bool(o, "group", &group, &r->err) < 0) {
    json_decref(o);
    return api_reply_bad(r);
  }
  json_decref(o);
  snprintf(r->audit_detail, sizeof r->audit_detail, "pid=%lld signal=%d group=%d", (long long)pid,
           sig, group);
  struct husk_err err;
  if (husk_proc_signal(r->srv->cfg.mgr, r->tenant, r->params[0], pid, sig, group, &err) < 0)
    return api_reply_err(r, &err);
  return api_reply_json(r, 200, json_pack("{s:I, s:i, s:b}", "pid", (json_int_t)pid, "signal", sig,
                                          "group", group));
}

enum MHD_Result h_proc_kill(struct req *r) {
  int64_t pid;
  if (parse_pid(r, &pid) < 0)
    return api_reply_error(r, 404, "not_found", "no such process");
  snprintf(r->audit_detail, sizeof r->audit_detail, "pid=%lld", (long long)pid);
  struct husk_err err;
  if (husk_proc_signal(r->srv->cfg.mgr, r->tenant, r->params[0], pid, SIGKILL, true, &err) < 0)
    return api_reply_err(r, &err);
  return api_reply_empty(r, 204);
}

/* ---- stdin: the body, as it arrives --------------------------------- */

struct stdin_up {
  int64_t pid;
  bool eof;
};

enum MHD_Result h_proc_stdin_begin(struct req *r) {
  struct stdin_up *u = calloc(1, sizeof *u);
  if (!u)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  r->up = u;
  if (parse_pid(r, &u->pid) < 0)
    return api_reply_error(r, 404, "not_found", "no such process");
  if (api_query_bool(r, "eof", &u->eof) < 0)
    return api_reply_bad(r);
  snprintf(r->audit_detail, sizeof r->audit_detail, "pid=%lld eof=%d", (long long)u->pid, u->eof);
  /* Unknown box or process: fail before the body is sent. */
  struct husk_proc p = {0};
  if (husk_proc_get(r->srv->cfg.mgr, r->tenant, r->params[0], u->pid, &p, &r->err) < 0)
    return api_reply_err(r, &r->err);
  husk_proc_free(&p);
  return MHD_YES;
}

int h_proc_stdin_upload(struct req *r, const char *data, size_t len) {
  struct stdin_up *u = r->up;
  return husk_proc_stdin(r->srv->cfg.mgr, r->tenant, r->params[0], u->pid, data, len, false, &r->err);
}

enum MHD_Result h_proc_stdin(struct req *r) {
  struct stdin_up *u = r->up;
  if (u->eof && husk_proc_stdin(r->srv->cfg.mgr, r->tenant, r->params[0], u->pid, NULL, 0, true,
                               &r->err) < 0)
    return api_reply_err(r, &r->err);
  return api_reply_json(r, 200, json_pack("{s:I, s:b}", "written", (json_int_t)r->up_bytes, "eof",
                                          u->eof));
}

void h_proc_stdin_cleanup(struct req *r) {
  free(r->up);
  r->up = NULL;
}

/* ---- output: a snapshot, or followed live --------------------------- */

struct follow {
  struct api_server *srv;
  char tenant[STATE_TENANT_ID_SIZE];
  char id[STATE_BOX_ID_SIZE];
  int64_t pid;
  int stream;
  int fd, sock;
  uint64_t pos;
  enum api_stream_fmt fmt;
  char *pending;
  size_t plen, poff;
  bool ended;
  int idle_ms;
};

static void follow_free(void *cls) {
  struct follow *f = cls;
  close_quiet(f->fd);
  free(f->pending);
  free(f);
}

static int follow_event(struct follow *f, const char *event, json_t *data, bool with_id) {
  char id[32];
  snprintf(id, sizeof id, "%llu", (unsigned long long)f->pos);
  free(f->pending);
  f->pending = f->fmt == STREAM_SSE ? sse_format(event, with_id ? id : NULL, data, &f->plen)
                                    : ndjson_format(event, data, &f->plen);
  f->poff = 0;
  json_decref(data);
  return f->pending ? 0 : -1;
}

static ssize_t follow_reader(void *cls, uint64_t pos, char *buf, size_t max) {
  struct follow *f = cls;
  (void)pos;
  for (;;) {
    if (f->pending && f->poff < f->plen) {
      size_t n = f->plen - f->poff < max ? f->plen - f->poff : max;
      memcpy(buf, f->pending + f->poff, n);
      f->poff += n;
      return (ssize_t)n;
    }
    if (f->ended)
      return MHD_CONTENT_READER_END_OF_STREAM;
    char data[16384];
    ssize_t n = pread(f->fd, data, sizeof data, (off_t)f->pos);
    if (n < 0)
      return MHD_CONTENT_READER_END_WITH_ERROR;
    bool done = false;
    struct husk_proc p = {0};
    if (n == 0) {
      /* The process can truncate its own output (it holds the file open
       * for writing): below what was sent, the stream cannot go on. */
      struct stat st;
      if (fstat(f->fd, &st) < 0 || (uint64_t)st.st_size < f->pos) {
        follow_event(f, "error",
                     json_pack("{s:s, s:I}", "message", "the output was truncated below this offset",
                               "offset", (json_int_t)f->pos),
                     false);
        f->ended = true;
        continue;
      }
      /* At the end of what was written: has the process ended?  Then read
       * once more (it may have written meanwhile) before the exit event. */
      struct husk_err err;
      if (husk_proc_get(f->srv->cfg.mgr, f->tenant, f->id, f->pid, &p, &err) < 0) {
        follow_event(f, "error", json_pack("{s:s}", "message", "the process is gone"), false);
        f->ended = true;
        continue;
      }
      done = strcmp(p.state, "running") != 0;
      if (done)
        n = pread(f->fd, data, sizeof data, (off_t)f->pos);
      if (n < 0)
        n = 0;
    }
    if (n > 0) {
      husk_proc_free(&p);
      size_t take = utf8_complete_prefix(data, (size_t)n);
      if (take == 0)
        take = (size_t)n; /* a lone partial character: send it as base64 */
      f->pos += take;
      f->idle_ms = 0;
      json_t *j = api_chunk_json(data, take);
      if (j)
        json_object_set_new(j, "offset", json_integer((json_int_t)f->pos));
      if (follow_event(f, f->stream == 2 ? "stderr" : "stdout", j, true) < 0)
        return MHD_CONTENT_READER_END_WITH_ERROR;
      continue;
    }
    if (done) {
      json_t *j = proc_json(&p);
      husk_proc_free(&p);
      if (j)
        json_object_set_new(j, "offset", json_integer((json_int_t)f->pos));
      f->ended = true;
      if (follow_event(f, "exit", j, false) < 0)
        return MHD_CONTENT_READER_END_WITH_ERROR;
      continue;
    }
    husk_proc_free(&p);
    enum api_wait_result w = api_wait_srv(f->srv, f->sock, -1, 250, true);
    if (w == API_WAIT_GONE)
      return MHD_CONTENT_READER_END_WITH_ERROR; /* the client went away */
    if (w == API_WAIT_STOPPING)
      return MHD_CONTENT_READER_END_OF_STREAM; /* stopping: reconnect with the offset */
    f->idle_ms += 250;
    if (f->fmt == STREAM_SSE && f->idle_ms >= 15000 && max >= 3) {
      f->idle_ms = 0;
      memcpy(buf, ":\n\n", 3);
      return 3;
    }
  }
}

enum MHD_Result h_proc_output(struct req *r) {
  int64_t pid;
  if (parse_pid(r, &pid) < 0)
    return api_reply_error(r, 404, "not_found", "no such process");
  const char *sname = api_query(r, "stream");
  int stream = 1;
  if (sname && !strcmp(sname, "stderr"))
    stream = 2;
  else if (sname && strcmp(sname, "stdout") != 0)
    return api_reply_error(r, 400, "bad_request", "stream must be stdout or stderr");
  uint64_t offset = 0;
  bool follow = false;
  enum out_fmt fmt = FMT_JSON;
  bool fmt_given = false;
  int fr;
  if (api_query_u64(r, "offset", INT64_MAX, &offset, NULL) < 0 ||
      api_query_bool(r, "follow", &follow) < 0 || (fr = want_format(r, &fmt)) < 0)
    return api_reply_bad(r);
  fmt_given = fr > 0 && fmt != FMT_JSON;
  /* SSE's reconnection header resumes where the last event ended. */
  const char *last = api_header(r, "Last-Event-ID");
  if (last && *last && strspn(last, "0123456789") == strlen(last) && strlen(last) < 19)
    offset = strtoull(last, NULL, 10);
  int fd = -1;
  bool running = false;
  struct husk_err err;
  if (husk_proc_output(r->srv->cfg.mgr, r->tenant, r->params[0], pid, stream, &fd, &running, &err) < 0)
    return api_reply_err(r, &err);
  struct stat stt;
  if (fstat(fd, &stt) < 0) {
    close(fd);
    return api_reply_error(r, 500, "internal_error", "cannot read the output");
  }
  if (!follow && !fmt_given) {
    uint64_t size = (uint64_t)stt.st_size;
    if (offset > size)
      offset = size;
    struct MHD_Response *resp = api_file_response(fd, offset, size - offset);
    if (!resp)
      return api_reply_error(r, 500, "internal_error", "out of memory");
    char next[32];
    snprintf(next, sizeof next, "%llu", (unsigned long long)size);
    MHD_add_response_header(resp, "Content-Type", "application/octet-stream");
    MHD_add_response_header(resp, "X-Husk-Next-Offset", next);
    MHD_add_response_header(resp, "X-Husk-Process-State", running ? "running" : "ended");
    return api_queue(r, 200, resp);
  }
  struct follow *f = calloc(1, sizeof *f);
  if (!f) {
    close(fd);
    return api_reply_error(r, 500, "internal_error", "out of memory");
  }
  f->srv = r->srv;
  snprintf(f->tenant, sizeof f->tenant, "%s", r->tenant);
  snprintf(f->id, sizeof f->id, "%s", r->params[0]);
  f->pid = pid;
  f->stream = stream;
  f->fd = fd;
  f->sock = api_conn_fd(r);
  f->pos = offset;
  f->fmt = fmt == FMT_NDJSON ? STREAM_NDJSON : STREAM_SSE;
  struct MHD_Response *resp =
      MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 32 * 1024, follow_reader, f, follow_free);
  if (!resp) {
    follow_free(f);
    return api_reply_error(r, 500, "internal_error", "out of memory");
  }
  MHD_add_response_header(resp, "Content-Type",
                          f->fmt == STREAM_SSE ? "text/event-stream" : "application/x-ndjson");
  MHD_add_response_header(resp, "X-Accel-Buffering", "no");
  return api_queue(r, 200, resp);
}
