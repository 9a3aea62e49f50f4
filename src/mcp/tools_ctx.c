/* Code contexts over MCP: run_code with a sandbox_id (one execution in a
 * long-lived interpreter of that box, through husk_ctx_execute), and the
 * `contexts` tool that lists, creates, restarts, interrupts and deletes
 * them.  The core keeps the contexts and their rules (src/box/context.c);
 * this front turns an execution's streams and results into MCP content
 * blocks, bounded like run_code's: each stream's last MCP_INLINE_OUTPUT
 * bytes (the whole kept in the box), images up to MCP_IMAGE_MAX each and
 * MCP_IMAGES_TOTAL in all, text results up to MCP_INLINE_TEXT each.
 *
 * One tool with an `action` rather than five: they are small operations
 * on one object, and every tool's description is in the model's context
 * on every turn. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "husk/box.h"
#include "husk/context.h"
#include "mcp/boxio.h"
#include "mcp/internal.h"
#include "util/cleanup.h"
#include "util/cleanup_json.h"
#include "util/fileio.h"

/* Where whole outputs too long to inline are kept in a box (as
 * sandbox_exec's). */
#define KEPT_OUTPUT_DIR "/workspace/.husk/output"
/* Results returned from one execution (a loop that displays in every
 * step sends many): past it they are counted, not returned. */
#define OUTPUTS_MAX 64
/* Text of all results of one execution together. */
#define OUTPUT_TEXT_TOTAL (4 * MCP_INLINE_TEXT)

static const char *const ctx_languages[] = {"python", "bash", "node", "javascript", NULL};

/* The core's name of a language argument ("node" is run_code's old name). */
static const char *core_language(const char *lang) {
  if (!lang)
    return "python";
  return !strcmp(lang, "node") ? "javascript" : lang;
}

static json_t *ctx_info_json(const struct husk_ctx_info *ci) {
  return json_pack("{s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:o, s:o}", "context_id", ci->id,
                   "language", ci->language, "state", ci->state, "version", ci->version, "cwd",
                   ci->cwd, "pid", (json_int_t)ci->pid, "execution_count",
                   (json_int_t)ci->execution_count, "created_at", mcp_time(ci->created_ms),
                   "started_at", mcp_time(ci->started_ms));
}

/* A core error about a context, worded for the model. */
static int ctx_error(struct mcp_call *c, struct husk_mgr *m, const char *box, const char *ctx_id,
                     const struct husk_err *err) {
  switch (err->code) {
  case ENOENT: {
    struct husk_box_info bi = {0};
    struct husk_err e2;
    bool box_there = husk_box_get(m, c->caller->tenant, box, &bi, &e2) == 0;
    husk_box_info_free(&bi);
    if (!box_there || !ctx_id)
      return mcp_tool_core_error(c, "sandbox", box, err);
    return mcp_tool_error(c, "context `%s` does not exist in sandbox `%s` (it was deleted, or "
                          "the id is wrong): contexts with action \"list\" shows them, \"create\" "
                          "makes one; run_code without context_id uses the default context",
                          ctx_id, box);
  }
  case EALREADY:
    return mcp_tool_error(c, "context `%s` is running another execution (one at a time per "
                          "context): wait for it, stop it with contexts action \"interrupt\", or "
                          "use another context", ctx_id ? ctx_id : "");
  case ENOTSUP:
    return mcp_tool_error(c, "%s: the sandbox cannot run this language (its template has no "
                          "such interpreter: python3, node, bash; template_list shows others), or "
                          "it was made by an older husk (create a new sandbox)", err->msg);
  case EUSERS:
    return mcp_tool_error(c, "sandbox `%s` has %d code contexts, the most it can have: delete one "
                          "(contexts action \"delete\")", box, HUSK_CTX_MAX);
  case EBUSY:
    return mcp_tool_error(c, "sandbox `%s` is not running (%s): create a new one with "
                          "sandbox_create", box, err->msg);
  default:
    return mcp_tool_core_error(c, "context", ctx_id ? ctx_id : box, err);
  }
}

/* ---- run_code in a context ------------------------------------------------------------ */

struct kept_output {
  const char *mime;  /* the representation returned (static string), or NULL: none */
  const char *as;    /* "image", "resource", "text", "none" */
  char *data;        /* images: base64; others: text */
  size_t len;
  char *plain;       /* text/plain beside text/html */
  size_t plain_len;
  bool main_result;
  json_t *mimes;     /* every mime type the result had */
};

struct exec_sink {
  struct mcp_call *c;
  int fd[3];                 /* [1], [2]: memfds of stdout, stderr (the whole of each) */
  uint64_t bytes[3];
  struct kept_output out[OUTPUTS_MAX];
  size_t nout;
  size_t dropped;            /* results past OUTPUTS_MAX */
  uint64_t image_bytes, text_bytes;
  json_t *notes;
  json_t *error;             /* {name, value, traceback} of the first error output */
  struct timespec t0;
};

static uint64_t elapsed_s(const struct exec_sink *s) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return (uint64_t)(now.tv_sec - s->t0.tv_sec);
}

static int on_stream(void *ctx, int stream, const char *buf, size_t len) {
  struct exec_sink *s = ctx;
  if (stream != 1 && stream != 2)
    return 0;
  /* The core bounds what it passes on by the execution's output limit. */
  if (s->fd[stream] >= 0 && write_all(s->fd[stream], buf, len) == 0)
    s->bytes[stream] += len;
  /* Output means it is alive: a progress notification per second that has
   * output (progress must grow; equal values are skipped). */
  uint64_t t = elapsed_s(s);
  if (t > 0) {
    char msg[64];
    snprintf(msg, sizeof msg, "running for %llu s", (unsigned long long)t);
    mcp_progress(s->c, t, msg);
  }
  return 0;
}

static const struct husk_ctx_repr *find_repr(const struct husk_ctx_output *o, const char *mime) {
  for (size_t i = 0; i < o->nreprs; i++)
    if (o->reprs[i].mime && !strcmp(o->reprs[i].mime, mime))
      return &o->reprs[i];
  return NULL;
}

static char *dup_text(const char *buf, size_t len, size_t max, bool *cut, size_t *out_len) {
  *cut = len > max;
  if (*cut) {
    len = max;
    while (len > 0 && ((unsigned char)buf[len] & 0xc0) == 0x80) /* not inside a character */
      len--;
  }
  char *d = malloc(len + 1);
  if (d) {
    memcpy(d, buf, len);
    d[len] = '\0';
  }
  *out_len = d ? len : 0;
  return d;
}

static void note(struct exec_sink *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct exec_sink *s, const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  json_array_append_new(s->notes, json_string(buf));
}

/* An image representation that fits what is left of the result's budget:
 * its base64 checked (the data came from the box). */
static bool keep_image(struct exec_sink *s, struct kept_output *k, const char *mime,
                       const struct husk_ctx_repr *r, bool is_text) {
  size_t raw = is_text ? r->len : r->len / 4 * 3;
  if (raw > MCP_IMAGE_MAX || s->image_bytes + raw > MCP_IMAGES_TOTAL) {
    note(s, "a %s result of about %zu bytes was not returned (images are returned up to %d "
         "MiB each, %d MiB per call): make it smaller (lower dpi or size)", mime, raw,
         MCP_IMAGE_MAX >> 20, MCP_IMAGES_TOTAL >> 20);
    return false;
  }
  if (is_text) {
    k->data = mcp_b64_encode(r->data, r->len);
  } else {
    unsigned char *bin = NULL;
    size_t blen = 0;
    if (mcp_b64_decode(r->data, r->len, &bin, &blen) < 0) {
      note(s, "a %s result was not valid base64 and was not returned", mime);
      return false;
    }
    free(bin);
    raw = blen;
    k->data = strndup(r->data, r->len);
  }
  if (!k->data)
    return false;
  k->len = strlen(k->data);
  k->mime = mime;
  k->as = "image";
  s->image_bytes += raw;
  return true;
}

static bool keep_text(struct exec_sink *s, char **dst, size_t *dst_len, const char *mime,
                      const struct husk_ctx_repr *r) {
  size_t room = s->text_bytes < OUTPUT_TEXT_TOTAL ? OUTPUT_TEXT_TOTAL - s->text_bytes : 0;
  size_t max = room < MCP_INLINE_TEXT ? room : MCP_INLINE_TEXT;
  bool cut;
  *dst = dup_text(r->data ? r->data : "", r->len, max, &cut, dst_len);
  if (!*dst)
    return false;
  s->text_bytes += *dst_len;
  if (cut)
    note(s, "a %s result of %zu bytes was cut to its first %zu (text results are returned up "
         "to %d KiB each, %d KiB per call)", mime, r->len, *dst_len, MCP_INLINE_TEXT / 1024,
         OUTPUT_TEXT_TOTAL / 1024);
  return true;
}

/* Which representation of a result is returned, and how: an image
 * (PNG, JPEG, SVG), HTML as an embedded resource with its text/plain, else
 * text (text/plain, or JSON, Markdown, LaTeX). */
static int on_output(void *ctx, const struct husk_ctx_output *o) {
  struct exec_sink *s = ctx;
  if (o->is_error) {
    if (!s->error)
      s->error = json_pack("{s:o, s:o, s:o}", "name",
                           mcp_text(o->name ? o->name : "", o->name ? strlen(o->name) : 0, NULL),
                           "value",
                           mcp_text(o->value ? o->value : "", o->value ? strlen(o->value) : 0, NULL),
                           "traceback",
                           mcp_text(o->traceback ? o->traceback : "",
                                    o->traceback ? strlen(o->traceback) : 0, NULL));
    return 0;
  }
  for (size_t i = 0; i < o->ntruncated; i++)
    note(s, "a result's %s representation was left out for its size", o->truncated[i]);
  if (s->nout == OUTPUTS_MAX) {
    s->dropped++;
    return 0;
  }
  struct kept_output *k = &s->out[s->nout];
  memset(k, 0, sizeof *k);
  k->main_result = o->is_main_result;
  k->mimes = json_array();
  for (size_t i = 0; i < o->nreprs; i++)
    if (o->reprs[i].mime)
      json_array_append_new(k->mimes, mcp_text(o->reprs[i].mime, strlen(o->reprs[i].mime), NULL));
  const struct husk_ctx_repr *r;
  bool done = false;
  if ((r = find_repr(o, "image/png")))
    done = keep_image(s, k, "image/png", r, false);
  if (!done && (r = find_repr(o, "image/jpeg")))
    done = keep_image(s, k, "image/jpeg", r, false);
  if (!done && (r = find_repr(o, "image/svg+xml")))
    done = keep_image(s, k, "image/svg+xml", r, true);
  const struct husk_ctx_repr *plain = find_repr(o, "text/plain");
  if (!done && (r = find_repr(o, "text/html")) && r->len <= MCP_INLINE_TEXT &&
      s->text_bytes + r->len <= OUTPUT_TEXT_TOTAL) {
    done = keep_text(s, &k->data, &k->len, "text/html", r);
    if (done) {
      k->mime = "text/html";
      k->as = "resource";
      if (plain)
        keep_text(s, &k->plain, &k->plain_len, "text/plain", plain);
    }
  }
  static const char *const text_mimes[] = {"text/plain", "application/json", "text/markdown",
                                           "text/latex", NULL};
  for (const char *const *t = text_mimes; !done && *t; t++)
    if ((r = find_repr(o, *t)) && keep_text(s, &k->data, &k->len, *t, r)) {
      k->mime = *t;
      k->as = "text";
      done = true;
    }
  if (!done) {
    k->as = "none";
    if (o->nreprs)
      note(s, "a result had no representation that can be returned (%s%s)",
           o->reprs[0].mime ? o->reprs[0].mime : "?", o->nreprs > 1 ? ", ..." : "");
  }
  s->nout++;
  return 0;
}

/* The tail of a stream for the result; when cut, the whole is kept in the
 * box (the call's box lives on) and named. */
static void put_ctx_stream(struct mcp_call *c, struct husk_mgr *m, struct exec_sink *s,
                           json_t *r, const char *box, const char *ctx_id, uint64_t count,
                           int stream) {
  const char *name = stream == 1 ? "stdout" : "stderr";
  uint64_t bytes = s->bytes[stream];
  bool cut = bytes > MCP_INLINE_OUTPUT;
  uint64_t off = cut ? bytes - MCP_INLINE_OUTPUT : 0;
  cleanup_free char *buf = NULL;
  size_t n = 0;
  struct husk_err err;
  if (s->fd[stream] < 0 || mcp_pread_max(s->fd[stream], off, MCP_INLINE_OUTPUT, &buf, &n, &err) < 0)
    n = 0;
  size_t skip = 0;
  if (off) /* do not start inside a UTF-8 character */
    while (skip < n && skip < 3 && ((unsigned char)buf[skip] & 0xc0) == 0x80)
      skip++;
  json_t *text = mcp_text(buf ? buf + skip : "", n - skip, NULL);
  if (n - skip > 0) {
    /* stdout as it is (a print shows as printed); stderr marked, since a
     * text block carries no stream. */
    if (stream == 1)
      mcp_add_block(c, json_pack("{s:s, s:O}", "type", "text", "text", text));
    else {
      cleanup_free char *t = NULL;
      if (asprintf(&t, "[stderr]\n%s", json_string_value(text)) >= 0)
        mcp_add_block(c, json_pack("{s:s, s:s}", "type", "text", "text", t));
    }
  }
  json_object_set_new(r, name, text ? text : json_string(""));
  char k[48];
  snprintf(k, sizeof k, "%s_bytes", name);
  json_object_set_new(r, k, json_integer((json_int_t)bytes));
  snprintf(k, sizeof k, "%s_truncated", name);
  json_object_set_new(r, k, json_boolean(cut));
  if (!cut)
    return;
  char path[160] = "";
  struct husk_fs b;
  if (mcp_box_fs(m, c->caller->tenant, box, &b, &err) == 0) {
    snprintf(path, sizeof path, KEPT_OUTPUT_DIR "/%s-%llu.%s", ctx_id, (unsigned long long)count,
             name);
    if (mcp_box_copy_in(&b, path, s->fd[stream], bytes, &err) < 0)
      path[0] = '\0';
    close(b.fs);
  }
  if (path[0]) {
    snprintf(k, sizeof k, "%s_file", name);
    json_object_set_new(r, k, json_string(path));
    note(s, "%s was %llu bytes: only the last %d are shown; the whole output is in the sandbox "
         "at %s (read it with sandbox_read_file or grep it with sandbox_exec)", name,
         (unsigned long long)bytes, MCP_INLINE_OUTPUT, path);
  } else {
    note(s, "%s was %llu bytes: only the last %d are shown", name, (unsigned long long)bytes,
         MCP_INLINE_OUTPUT);
  }
}

/* The results in the order they came, as content blocks and as their
 * summary in the structured result. */
static json_t *put_outputs(struct mcp_call *c, struct exec_sink *s, const char *box,
                           const char *ctx_id, uint64_t count) {
  json_t *arr = json_array();
  for (size_t i = 0; i < s->nout; i++) {
    struct kept_output *k = &s->out[i];
    json_t *j = json_pack("{s:s, s:s, s:b, s:O}", "mime_type", k->mime ? k->mime : "",
                          "returned_as", k->as, "main_result", k->main_result, "mime_types",
                          k->mimes);
    if (k->mime && !strcmp(k->as, "image")) {
      mcp_add_block(c, json_pack("{s:s, s:s, s:s}", "type", "image", "data", k->data,
                                 "mimeType", k->mime));
    } else if (k->mime && !strcmp(k->as, "resource")) {
      char uri[256];
      snprintf(uri, sizeof uri, "husk://sandbox/%s/context/%s/execution/%llu/output/%zu.html",
               box, ctx_id, (unsigned long long)count, i);
      json_t *txt = mcp_text(k->data, k->len, NULL);
      mcp_add_block(c, json_pack("{s:s, s:{s:s, s:s, s:o}}", "type", "resource", "resource",
                                 "uri", uri, "mimeType", "text/html", "text", txt));
      json_object_set_new(j, "uri", json_string(uri));
      if (k->plain) {
        json_t *pt = mcp_text(k->plain, k->plain_len, NULL);
        mcp_add_block(c, json_pack("{s:s, s:O}", "type", "text", "text", pt));
        json_object_set_new(j, "text", pt);
      }
    } else if (k->mime) {
      json_t *txt = mcp_text(k->data, k->len, NULL);
      mcp_add_block(c, json_pack("{s:s, s:O}", "type", "text", "text", txt));
      json_object_set_new(j, "text", txt);
    }
    json_array_append_new(arr, j);
  }
  if (s->dropped)
    note(s, "%zu more results were not returned (at most %d per call)", s->dropped, OUTPUTS_MAX);
  return arr;
}

static void sink_free(struct exec_sink *s) {
  for (int i = 1; i <= 2; i++)
    if (s->fd[i] >= 0)
      close(s->fd[i]);
  for (size_t i = 0; i < s->nout; i++) {
    free(s->out[i].data);
    free(s->out[i].plain);
    json_decref(s->out[i].mimes);
  }
  json_decref(s->notes);
  json_decref(s->error);
}

int mcp_run_in_context(struct mcp_call *c) {
  const char *box = mcp_arg_str(c, "sandbox_id"), *code = mcp_arg_str(c, "code");
  const char *lang_arg = mcp_arg_str(c, "language"), *ctx_arg = mcp_arg_str(c, "context_id");
  const char *lang = core_language(lang_arg);
  snprintf(c->audit_box, sizeof c->audit_box, "%.40s", box);
  if (mcp_arg_str(c, "template"))
    return mcp_tool_error(c, "template does not apply with sandbox_id: the sandbox already has "
                          "its template (leave it out, or sandbox_create with that template)");
  char ctx_id[HUSK_CTX_ID_MAX];
  if (ctx_arg)
    snprintf(ctx_id, sizeof ctx_id, "%s", ctx_arg);
  else
    snprintf(ctx_id, sizeof ctx_id, "default-%s", lang);
  snprintf(c->audit_detail, sizeof c->audit_detail, "context=%.40s", ctx_id);
  struct husk_mgr *m = mcp_call_mgr(c);
  if (!m)
    return 0;
  struct husk_err err;
  struct husk_ctx_info ci;
  /* A language given with a context of another one is a mistake the model
   * should hear about, not code run by the wrong interpreter. */
  if (ctx_arg && lang_arg) {
    if (husk_ctx_get(m, c->caller->tenant, box, ctx_id, &ci, &err) == 0 &&
        strcmp(ci.language, lang) != 0)
      return mcp_tool_error(c, "context `%s` is a %s context, not %s: leave language out, or "
                            "use a context of that language", ctx_id, ci.language, lang);
  }
  if (mcp_arg(c, "files") || mcp_arg(c, "files_base64")) {
    if (mcp_check_inputs(c) < 0)
      return 0;
    struct husk_fs b;
    if (mcp_box_fs(m, c->caller->tenant, box, &b, &err) < 0)
      return ctx_error(c, m, box, NULL, &err);
    int rc = mcp_write_inputs(c, &b, mcp_arg(c, "files"), false);
    if (rc == 0)
      rc = mcp_write_inputs(c, &b, mcp_arg(c, "files_base64"), true);
    close(b.fs);
    if (rc < 0)
      return 0;
  }
  uint64_t timeout_ms = mcp_wait_ms(c->srv);
  int64_t secs;
  if (mcp_arg_int(c, "timeout_seconds", &secs))
    timeout_ms = (uint64_t)secs * 1000;

  struct exec_sink s = {.c = c, .fd = {-1, -1, -1}, .notes = json_array()};
  clock_gettime(CLOCK_MONOTONIC, &s.t0);
  s.fd[1] = memfd_create("husk-ctx-stdout", MFD_CLOEXEC);
  s.fd[2] = memfd_create("husk-ctx-stderr", MFD_CLOEXEC);
  struct husk_ctx_exec_req req = {.code = code, .code_len = strlen(code),
                                  .timeout_ms = timeout_ms, .stream = on_stream,
                                  .output = on_output, .sink_ctx = &s, .cancel_fd = c->cancel_fd};
  struct husk_ctx_exec_result res = {0};
  if (husk_ctx_execute(m, c->caller->tenant, box, ctx_id, &req, &res, &err) < 0) {
    sink_free(&s);
    return ctx_error(c, m, box, ctx_arg ? ctx_id : NULL, &err);
  }
  if (res.status == HUSK_CTX_INTERRUPTED && mcp_fd_readable(c->cancel_fd)) {
    /* Cancelled (notifications/cancelled, or the client went away): the
     * core interrupted the execution; no reply.  The context goes on. */
    sink_free(&s);
    c->suppressed = true;
    return 0;
  }

  const char *status = res.status == HUSK_CTX_OK            ? "ok"
                       : res.status == HUSK_CTX_ERROR       ? "error"
                       : res.status == HUSK_CTX_INTERRUPTED ? "interrupted"
                       : res.status == HUSK_CTX_TIMEOUT     ? "timeout"
                       : res.status == HUSK_CTX_DIED        ? "died"
                                                            : "restarted";
  json_t *r = json_pack("{s:s, s:s, s:s, s:I, s:I}", "status", status, "sandbox_id", box,
                        "context_id", ctx_id, "execution_count", (json_int_t)res.execution_count,
                        "duration_ms", (json_int_t)res.duration_ms);
  if (husk_ctx_get(m, c->caller->tenant, box, ctx_id, &ci, &err) == 0)
    json_object_set_new(r, "language", json_string(ci.language));
  put_ctx_stream(c, m, &s, r, box, ctx_id, res.execution_count, 1);
  put_ctx_stream(c, m, &s, r, box, ctx_id, res.execution_count, 2);
  json_object_set_new(r, "outputs", put_outputs(c, &s, box, ctx_id, res.execution_count));
  if (s.error) {
    const char *name = json_string_value(json_object_get(s.error, "name"));
    const char *value = json_string_value(json_object_get(s.error, "value"));
    const char *tb = json_string_value(json_object_get(s.error, "traceback"));
    cleanup_free char *t = NULL;
    if (asprintf(&t, "%s: %s%s%s", name, value, tb && *tb ? "\n" : "", tb ? tb : "") >= 0)
      mcp_add_block(c, json_pack("{s:s, s:s}", "type", "text", "text", t));
    json_object_set_new(r, "error", s.error);
    s.error = NULL;
  }
  char msg[512] = "";
  switch (res.status) {
  case HUSK_CTX_OK:
  case HUSK_CTX_ERROR:
    break;
  case HUSK_CTX_INTERRUPTED:
    snprintf(msg, sizeof msg, "the execution was interrupted (contexts action \"interrupt\"); "
             "the context and its state are kept");
    break;
  case HUSK_CTX_TIMEOUT:
    snprintf(msg, sizeof msg, "the execution hit its time limit (%llu s) and was interrupted; %s",
             (unsigned long long)(timeout_ms / 1000),
             res.restarted ? "it did not stop, so the context was restarted: its state "
                             "(variables, imports) is gone"
                           : "the context's state is kept. For longer work pass a larger "
                             "timeout_seconds, or run it with sandbox_exec (which can outlive "
                             "the call as a job)");
    break;
  case HUSK_CTX_DIED:
    snprintf(msg, sizeof msg, "the interpreter ended during the execution (%s): it was restarted "
             "and its state (variables, imports) is gone; run the earlier steps again",
             res.message[0] ? res.message : "it exited or ran out of memory");
    break;
  case HUSK_CTX_RESTARTED:
    snprintf(msg, sizeof msg, "the context was restarted or deleted during the execution (%s): "
             "its state is gone", res.message[0] ? res.message : "restarted");
    break;
  }
  if (msg[0]) {
    mcp_add_block(c, json_pack("{s:s, s:s}", "type", "text", "text", msg));
    json_object_set_new(r, "message", json_string(msg));
  }
  if (res.restarted)
    json_object_set_new(r, "context_restarted", json_true());
  if (res.truncated && !json_array_size(s.notes))
    note(&s, "some output was left out: the execution passed its output limit, or a result was "
         "too large");
  if (json_array_size(s.notes))
    json_object_set(r, "notes", s.notes);
  sink_free(&s);
  /* The structured result goes first (mcp_result inserts it at 0). */
  mcp_result(c, r, res.status != HUSK_CTX_OK);
  return 0;
}

/* ---- contexts ------------------------------------------------------------------------- */

static const char *const actions[] = {"list", "create", "restart", "interrupt", "delete", NULL};

static const struct mcp_param contexts_params[] = {
    {"action", MCP_P_STRING, true, "list: the sandbox's contexts; create: a new one (returns its "
     "context_id); restart: fresh state, same context; interrupt: stop the execution running in "
     "it, keeping its state; delete: end it", actions, 0, 0, 0},
    {"sandbox_id", MCP_P_STRING, true, "the id from sandbox_create", NULL, 0, 0, 64},
    {"context_id", MCP_P_STRING, false, "restart, interrupt, delete: the context (default: "
     "\"default-<language>\", the one run_code uses without context_id)", NULL, 0, 0,
     HUSK_CTX_ID_MAX - 1},
    {"language", MCP_P_STRING, false, "create: python (default), javascript (node) or bash; "
     "restart, interrupt, delete without context_id: which default context", ctx_languages, 0, 0,
     0},
    {"cwd", MCP_P_STRING, false, "create: absolute working directory of the context (default: "
     "the sandbox's, /workspace)", NULL, 0, 0, 1024},
    {"env", MCP_P_STRMAP, false, "create: environment variables of the context (no secrets: the "
     "sandbox is untrusted)", NULL, 0, 0, 64 * 1024},
    {NULL, 0, false, NULL, NULL, 0, 0, 0},
};

static int list_cb(void *ctx, const struct husk_ctx_info *ci) {
  return json_array_append_new(ctx, ctx_info_json(ci)) == 0 ? 0 : -1;
}

static int create_ctx(struct mcp_call *c, struct husk_mgr *m, const char *box, json_t *r) {
  const char *cwd = mcp_arg_str(c, "cwd");
  if (cwd && cwd[0] != '/')
    return mcp_tool_error(c, "cwd must be an absolute path such as /workspace/project");
  json_t *env = mcp_arg(c, "env");
  size_t n = json_object_size(env), i = 0;
  cleanup_free char **envv = calloc(n + 1, sizeof *envv);
  if (!envv)
    return mcp_tool_error(c, "out of memory");
  const char *k;
  json_t *v;
  int rc = 0;
  bool bad = false;
  json_object_foreach(env, k, v) {
    if (!*k || strspn(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") !=
                   strlen(k) || (k[0] >= '0' && k[0] <= '9')) {
      rc = mcp_tool_error(c, "env name `%.64s` is not valid: use letters, digits and _", k);
      bad = true;
      break;
    }
    if (asprintf(&envv[i], "%s=%s", k, json_string_value(v)) < 0) {
      envv[i] = NULL;
      rc = mcp_tool_error(c, "out of memory");
      bad = true;
      break;
    }
    i++;
  }
  struct husk_ctx_info ci;
  struct husk_err err;
  bool made = false;
  if (!bad) {
    struct husk_ctx_req req = {.language = core_language(mcp_arg_str(c, "language")),
                               .cwd = cwd, .env = n ? envv : NULL};
    if (husk_ctx_create(m, c->caller->tenant, box, &req, &ci, &err) < 0) {
      if (cwd && err.code == EINVAL)
        rc = mcp_tool_error(c, "%s (does cwd `%s` exist? create it first, e.g. mkdir -p with "
                            "sandbox_exec)", err.msg, cwd);
      else
        rc = ctx_error(c, m, box, NULL, &err);
    } else {
      made = true;
    }
  }
  for (size_t j = 0; j < i; j++)
    free(envv[j]);
  if (!made)
    return rc;
  json_object_set_new(r, "context_id", json_string(ci.id));
  json_object_set_new(r, "context", ctx_info_json(&ci));
  return 1;
}

static int contexts_run(struct mcp_call *c) {
  const char *action = mcp_arg_str(c, "action"), *box = mcp_arg_str(c, "sandbox_id");
  const char *ctx_arg = mcp_arg_str(c, "context_id");
  snprintf(c->audit_box, sizeof c->audit_box, "%.40s", box);
  char ctx_id[HUSK_CTX_ID_MAX];
  if (ctx_arg)
    snprintf(ctx_id, sizeof ctx_id, "%s", ctx_arg);
  else
    snprintf(ctx_id, sizeof ctx_id, "default-%s", core_language(mcp_arg_str(c, "language")));
  bool on_one = strcmp(action, "list") != 0 && strcmp(action, "create") != 0;
  snprintf(c->audit_detail, sizeof c->audit_detail, "%s%s%.40s", action, on_one ? " " : "",
           on_one ? ctx_id : "");
  if (!on_one && ctx_arg)
    return mcp_tool_error(c, "context_id does not apply to %s (create makes the id and returns "
                          "it)", action);
  if (strcmp(action, "create") != 0 && (mcp_arg(c, "cwd") || mcp_arg(c, "env")))
    return mcp_tool_error(c, "cwd and env apply to create only");
  struct husk_mgr *m = mcp_call_mgr(c);
  if (!m)
    return 0;
  struct husk_err err;
  cleanup_json json_t *r = json_pack("{s:s, s:s}", "action", action, "sandbox_id", box);
  if (!r)
    return mcp_tool_error(c, "out of memory");
  if (!strcmp(action, "list")) {
    json_t *arr = json_array();
    if (husk_ctx_list(m, c->caller->tenant, box, list_cb, arr, &err) < 0) {
      json_decref(arr);
      return ctx_error(c, m, box, NULL, &err);
    }
    json_object_set_new(r, "contexts", arr);
    if (!json_array_size(arr))
      json_object_set_new(r, "notes", json_pack("[s]", "no contexts yet: run_code with this "
                                                "sandbox_id makes the default one of its language"));
  } else if (!strcmp(action, "create")) {
    if (create_ctx(c, m, box, r) <= 0)
      return 0;
  } else if (!strcmp(action, "restart")) {
    struct husk_ctx_info ci;
    if (husk_ctx_restart(m, c->caller->tenant, box, ctx_id, &ci, &err) < 0)
      return ctx_error(c, m, box, ctx_id, &err);
    json_object_set_new(r, "context_id", json_string(ci.id));
    json_object_set_new(r, "context", ctx_info_json(&ci));
    json_object_set_new(r, "notes", json_pack("[s]", "the interpreter was started again: "
                                              "variables, imports and figures are gone (files "
                                              "in the sandbox stay)"));
  } else if (!strcmp(action, "interrupt")) {
    if (husk_ctx_interrupt(m, c->caller->tenant, box, ctx_id, &err) < 0)
      return ctx_error(c, m, box, ctx_id, &err);
    json_object_set_new(r, "context_id", json_string(ctx_id));
    json_object_set_new(r, "notes", json_pack("[s]", "an execution running in it ends as "
                                              "\"interrupted\"; the context and its state stay"));
  } else {
    if (husk_ctx_delete(m, c->caller->tenant, box, ctx_id, &err) < 0)
      return ctx_error(c, m, box, ctx_id, &err);
    json_object_set_new(r, "context_id", json_string(ctx_id));
    json_object_set_new(r, "deleted", json_true());
  }
  mcp_result(c, steal_pointer(&r), false);
  return 0;
}

#define CTX_INFO_SCHEMA                                                                           \
  "{\"type\":\"object\",\"properties\":{\"context_id\":{\"type\":\"string\"},\"language\":"      \
  "{\"type\":\"string\"},\"state\":{\"type\":\"string\"},\"version\":{\"type\":\"string\"},"     \
  "\"cwd\":{\"type\":\"string\"},\"pid\":{\"type\":\"integer\"},\"execution_count\":"            \
  "{\"type\":\"integer\"},\"created_at\":{\"type\":\"string\"},\"started_at\":"                  \
  "{\"type\":\"string\"}},\"required\":[\"context_id\",\"language\",\"state\"]}"

const struct mcp_tool mcp_tool_contexts = {
    "contexts", "Manage code contexts",
    "Manage the code contexts of a sandbox: long-lived interpreters (python, javascript on node, "
    "bash) that keep variables, imports and figures between run_code calls with that sandbox_id, "
    "like notebook kernels. run_code with a sandbox_id already uses a default context per "
    "language (\"default-python\", ...), made on first use, so most sessions need no call here. "
    "Use action \"create\" for a second, independent session (its own variables, cwd, env) and "
    "pass its context_id to run_code; \"list\" to see them (state idle/busy, execution count); "
    "\"restart\" for a clean state (variables gone, files kept); \"interrupt\" to stop a running "
    "execution but keep the state; \"delete\" to end one. For independent one-off scripts, "
    "run_code without sandbox_id is simpler; for shell commands and files, sandbox_exec.",
    contexts_params,
    "{\"type\":\"object\",\"properties\":{\"action\":{\"type\":\"string\"},\"sandbox_id\":"
    "{\"type\":\"string\"},\"context_id\":{\"type\":\"string\"},\"context\":" CTX_INFO_SCHEMA ","
    "\"contexts\":{\"type\":\"array\",\"items\":" CTX_INFO_SCHEMA "},\"deleted\":{\"type\":"
    "\"boolean\"},\"notes\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}},"
    "\"required\":[\"action\",\"sandbox_id\"]}",
    false, true, false, contexts_run,
    .scope = AUTH_SCOPE_SANDBOX, .scope_of = mcp_scope_by_action,
};
