/* Upload links over HTTP: the tenant's routes that make, list and revoke
 * them (/v1/upload-links), and the page a person opens (GET /u/<token>)
 * and posts files to (POST /u/<token>, multipart/form-data).  Every rule
 * (expiry, use, sizes, types, names, quota) is the core's
 * (storage/upload_link.h); a file streams through libmicrohttpd's post
 * processor into a store writer, never held in memory.
 *
 * The token is never logged (server.c logs the path as /u/ and a star) nor put in an
 * audit row; a refusal never names the tenant. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/internal.h"
#include "storage/store.h"
#include "storage/upload_link.h"
#include "util/cleanup.h"
#include "util/cleanup_json.h"
#include "util/id.h"
#include "util/strbuf.h"

/* The post processor's own buffer (it holds no more of the body). */
#define UL_PP_BUFFER (32 * 1024)

/* ---- the tenant's routes ---------------------------------------------- */

static const char *link_state(const struct state_upload_link *l, int64_t now) {
  if (l->revoked_ms)
    return "revoked";
  if (l->expires_ms <= now)
    return "expired";
  if (l->files_used >= l->max_files)
    return "used";
  return "active";
}

static json_t *link_json(const struct state_upload_link *l) {
  json_t *j =
      json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:s, s:o, s:o, s:s}", "id", l->id, "bucket",
                l->bucket, "prefix", l->prefix, "max_files", (json_int_t)l->max_files,
                "max_file_bytes", (json_int_t)l->max_file_bytes, "files_used",
                (json_int_t)l->files_used, "bytes_used", (json_int_t)l->bytes_used, "content_types",
                l->content_types, "created_at", json_time(l->created_ms), "expires_at",
                json_time(l->expires_ms), "state", link_state(l, state_now_ms()));
  if (j && l->revoked_ms)
    json_object_set_new(j, "revoked_at", json_time(l->revoked_ms));
  if (j)
    json_object_set_new(j, "created_by", api_created_by_json(l->created_by));
  return j;
}

static enum MHD_Result ulink_err(struct req *r, const struct husk_err *err) {
  switch (err->code) {
  case STORE_ENOBUCKET: return api_reply_error(r, 404, "no_such_bucket", "%s", err->msg);
  case EOPNOTSUPP: return api_reply_error(r, 501, "not_implemented", "%s", err->msg);
  default: return api_reply_err(r, err);
  }
}

/* The public base of this listener: --preview-url, else the scheme and
 * host the caller reached it by (as preview URLs). */
static int public_base(struct req *r, char *out, size_t size) {
  const char *base = r->srv->cfg.preview_url;
  if (base && *base) {
    snprintf(out, size, "%s", base);
    return 0;
  }
  const char *host = api_header(r, MHD_HTTP_HEADER_HOST);
  if (!host || !*host || strlen(host) > 255 || strpbrk(host, "/?#@ \t\\"))
    return -1;
  snprintf(out, size, "http://%s", host);
  return 0;
}

static const char *const create_fields[] = {
    "bucket", "prefix", "expires_in", "max_files", "max_file_bytes", "content_types", NULL};

enum MHD_Result h_ulink_create(struct req *r) {
  struct store *st = r->srv->cfg.store;
  if (!st)
    return api_reply_error(r, 501, "not_implemented", "this server has no object store");
  cleanup_json json_t *o = api_body_object(r, create_fields);
  if (!o)
    return api_reply_bad(r);
  struct upload_link_spec spec = {0};
  uint64_t exp = 0, files = 0, bytes = 0;
  if (jget_string(o, "bucket", &spec.bucket, &r->err) < 0 ||
      jget_string(o, "prefix", &spec.prefix, &r->err) < 0 ||
      jget_string(o, "content_types", &spec.content_types, &r->err) < 0 ||
      jget_u64(o, "expires_in", UPLOAD_LINK_MAX_S, &exp, &r->err) < 0 ||
      jget_u64(o, "max_files", UPLOAD_LINK_MAX_FILES, &files, &r->err) < 0 ||
      jget_size(o, "max_file_bytes", &bytes, &r->err) < 0)
    return api_reply_bad(r);
  if ((json_object_get(o, "expires_in") && exp == 0) ||
      (json_object_get(o, "max_files") && files == 0) ||
      (json_object_get(o, "max_file_bytes") && bytes == 0))
    return api_reply_error(r, 400, "bad_request",
                           "expires_in, max_files and max_file_bytes must be positive");
  spec.expires_s = (int64_t)exp;
  spec.max_files = (int64_t)files;
  spec.max_file_bytes = bytes;
  char creator[STATE_CREATED_BY_SIZE];
  api_created_by(r, creator, sizeof creator);
  spec.created_by = creator;
  char base[600];
  if (public_base(r, base, sizeof base) < 0)
    return api_reply_error(r, 400, "bad_request",
                           "no usable Host header to build the link from (or set --preview-url)");
  struct state_upload_link l;
  cleanup_free char *url = NULL;
  struct husk_err err;
  if (upload_link_create(st, r->tenant, &spec, base, &l, &url, &err) < 0)
    return ulink_err(r, &err);
  snprintf(r->audit_detail, sizeof r->audit_detail, "upload_link=%s bucket=%s", l.id, l.bucket);
  json_t *j = link_json(&l);
  if (j)
    json_object_set_new(j, "url", json_string(url));
  explicit_bzero(url, strlen(url));
  return api_reply_json(r, 201, j);
}

static int list_cb(void *ctx, const struct state_upload_link *l) {
  json_t *j = link_json(l);
  return j && json_array_append_new(ctx, j) == 0 ? 0 : API_LIST_NOMEM;
}

enum MHD_Result h_ulink_list(struct req *r) {
  cleanup_json json_t *arr = json_array();
  if (!arr)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  struct husk_err err;
  int rc = state_upload_link_list(r->srv->cfg.state, r->tenant, list_cb, arr, &err);
  if (rc < 0)
    return api_reply_list_err(r, rc, &err);
  return api_reply_json(r, 200, json_pack("{s:O}", "upload_links", arr));
}

enum MHD_Result h_ulink_revoke(struct req *r) {
  struct husk_err err;
  if (state_upload_link_revoke(r->srv->cfg.state, r->tenant, r->params[0], &err) < 0)
    return api_reply_err(r, &err);
  snprintf(r->audit_detail, sizeof r->audit_detail, "upload_link=%s", r->params[0]);
  return api_reply_empty(r, 204);
}

/* ---- the page --------------------------------------------------------- */

static bool wants_html(struct req *r) {
  const char *a = api_header(r, MHD_HTTP_HEADER_ACCEPT);
  return a && strcasestr(a, "text/html");
}


static const char page_style[] =
    "body{font:16px/1.5 system-ui,sans-serif;max-width:40em;margin:3em auto;padding:0 1em;"
    "color:#222}h1{font-size:1.4em}.box{border:2px dashed #999;padding:1.5em;border-radius:8px}"
    "progress{width:100%}.note{color:#555;font-size:.9em}#status{font-weight:bold}";

/* The page's script: the same POST as the form's, through XHR for its
 * upload progress; without JavaScript the form posts by itself. */
static const char page_script[] =
    "var f=document.getElementById('f'),p=document.getElementById('p'),"
    "s=document.getElementById('status');"
    "f.addEventListener('submit',function(e){e.preventDefault();"
    "var x=new XMLHttpRequest();x.open('POST',location.pathname);"
    "x.setRequestHeader('Accept','application/json');p.hidden=false;"
    "x.upload.onprogress=function(v){if(v.lengthComputable){p.max=v.total;p.value=v.loaded;}};"
    "x.onload=function(){var j=null;try{j=JSON.parse(x.responseText)}catch(_){}"
    "if(x.status==201&&j){s.textContent='Upload complete: '+j.files.length+' file(s) stored ('+"
    "j.files.map(function(a){return a.name}).join(', ')+').';f.hidden=true;}"
    "else{s.textContent='Upload failed: '+(j&&j.error?j.error.message:'HTTP '+x.status);}};"
    "x.onerror=function(){s.textContent='Upload failed: the connection broke.';};"
    "s.textContent='Uploading\\u2026';x.send(new FormData(f));});";

/* Queue an HTML page with the headers every /u/ page has: a CSP that lets
 * only its own inline style and script (by nonce) run, no framing, no
 * referrer (the URL holds the token), no caching. */
static enum MHD_Result reply_page(struct req *r, unsigned status, struct strbuf *b,
                                  const char *nonce) {
  if (b->oom)
    return api_reply_error(r, 500, "internal_error", "out of memory");
  struct MHD_Response *resp =
      MHD_create_response_from_buffer(b->n, b->p ? b->p : "", MHD_RESPMEM_MUST_COPY);
  if (!resp)
    return MHD_NO;
  char csp[300];
  snprintf(csp, sizeof csp,
           "default-src 'none'; script-src 'nonce-%s'; style-src 'nonce-%s'; connect-src 'self'; "
           "form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
           nonce, nonce);
  MHD_add_response_header(resp, "Content-Type", "text/html; charset=utf-8");
  MHD_add_response_header(resp, "Content-Security-Policy", csp);
  MHD_add_response_header(resp, "X-Frame-Options", "DENY");
  MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
  MHD_add_response_header(resp, "Cross-Origin-Opener-Policy", "same-origin");
  return api_queue(r, status, resp);
}

static void page_head(struct strbuf *b, const char *title, const char *nonce) {
  strbuf_printf(b,
            "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta "
            "name=\"viewport\" content=\"width=device-width,initial-scale=1\"><meta "
            "name=\"robots\" content=\"noindex\"><title>%s</title><style nonce=\"%s\">%s"
            "</style></head><body><h1>%s</h1>",
            title, nonce, page_style, title);
}

static int new_nonce(char out[40]) {
  struct husk_err err;
  return id_new(NULL, 16, out, 40, &err);
}

/* A refusal: an HTML page for a browser, else the API's JSON error. */
static enum MHD_Result reply_refusal(struct req *r, unsigned status, const char *code,
                                     const char *msg) {
  if (!wants_html(r))
    return api_reply_error(r, status, code, "%s", msg);
  char nonce[40];
  if (new_nonce(nonce) < 0)
    return api_reply_error(r, 500, "internal_error", "no randomness");
  struct strbuf b = {0};
  page_head(&b, "Upload not possible", nonce);
  strbuf_str(&b, "<p id=\"status\">");
  strbuf_html(&b, msg);
  strbuf_str(&b, "</p><p class=\"note\">Ask whoever sent you this link for a new one.</p>"
                 "</body></html>");
  enum MHD_Result ret = reply_page(r, status, &b, nonce);
  free(b.p);
  return ret;
}

/* A link that takes no files (any more): 404 for no such link, 410 for
 * one that expired, was revoked or was used up. */
static enum MHD_Result reply_unusable(struct req *r, const struct husk_err *err) {
  switch (err->code) {
  case ENOENT: return reply_refusal(r, 404, "not_found", "This upload link does not exist.");
  case EKEYEXPIRED: return reply_refusal(r, 410, "gone", "This upload link has expired.");
  case EKEYREVOKED: return reply_refusal(r, 410, "gone", "This upload link was revoked.");
  case EMLINK: return reply_refusal(r, 410, "gone", "This upload link has already been used.");
  default: {
    char line[HUSK_ERR_MSG_MAX];
    snprintf(line, sizeof line, "%s", err->msg);
    husk_sanitize_line(line);
    api_log(r->srv, "%s /u/*: %s", r->method, line);
    return reply_refusal(r, 500, "internal_error", "The server failed; try again later.");
  }
  }
}

static void human_size(char *out, size_t n, int64_t v) {
  if (v >= (1LL << 30) && v % (1LL << 30) == 0)
    snprintf(out, n, "%lld GiB", (long long)(v >> 30));
  else if (v >= (1LL << 20))
    snprintf(out, n, "%.1f MiB", (double)v / (1 << 20));
  else if (v >= 1024)
    snprintf(out, n, "%.1f KiB", (double)v / 1024);
  else
    snprintf(out, n, "%lld bytes", (long long)v);
}

enum MHD_Result h_upage(struct req *r) {
  struct store *st = r->srv->cfg.store;
  struct state_upload_link l;
  struct husk_err err;
  if (!st)
    return reply_refusal(r, 404, "not_found", "This upload link does not exist.");
  if (upload_link_resolve(st, r->params[0], &l, &err) < 0)
    return reply_unusable(r, &err);
  char nonce[40];
  if (new_nonce(nonce) < 0)
    return api_reply_error(r, 500, "internal_error", "no randomness");
  char size[32];
  human_size(size, sizeof size, l.max_file_bytes);
  int64_t left = l.max_files - l.files_used;
  struct strbuf b = {0};
  page_head(&b, "Upload files", nonce);
  strbuf_printf(&b,
            "<form id=\"f\" class=\"box\" method=\"post\" enctype=\"multipart/form-data\">"
            "<p><input type=\"file\" name=\"file\" required%s",
            left > 1 ? " multiple" : "");
  if (l.content_types[0]) {
    strbuf_str(&b, " accept=\"");
    strbuf_html(&b, l.content_types);
    strbuf_str(&b, "\"");
  }
  strbuf_str(&b, "></p><p><button type=\"submit\">Upload</button></p>"
                 "<progress id=\"p\" value=\"0\" max=\"1\" hidden></progress></form>"
                 "<p id=\"status\" role=\"status\"></p><p class=\"note\">");
  strbuf_printf(&b, "Up to %lld file%s, each at most %s", (long long)left, left == 1 ? "" : "s", size);
  if (l.content_types[0]) {
    strbuf_str(&b, "; accepted types: ");
    strbuf_html(&b, l.content_types);
  }
  char exp[40];
  json_t *t = json_time(l.expires_ms);
  snprintf(exp, sizeof exp, "%s", t && json_is_string(t) ? json_string_value(t) : "?");
  json_decref(t);
  strbuf_printf(&b, ". This link expires at %s.</p><script nonce=\"%s\">%s</script></body></html>", exp,
            nonce, page_script);
  enum MHD_Result ret = reply_page(r, 200, &b, nonce);
  free(b.p);
  return ret;
}

/* ---- the upload --------------------------------------------------------- */

struct ulpost {
  struct state_upload_link l;
  struct MHD_PostProcessor *pp;
  struct upload_link_file *cur;
  char *cur_name; /* the name the client gave the current part */
  json_t *files;  /* [{name, key, size}] stored so far */
  uint64_t bytes;
  bool failed;
};

static void ulpost_free(struct ulpost *u) {
  if (!u)
    return;
  if (u->pp)
    MHD_destroy_post_processor(u->pp);
  upload_link_file_abort(u->cur);
  free(u->cur_name);
  json_decref(u->files);
  free(u);
}

/* The refusal of a file: its reply now (the rest of the body is read
 * and dropped by the server). */
static void refuse(struct req *r, struct ulpost *u, const struct husk_err *err) {
  u->failed = true;
  upload_link_file_abort(u->cur);
  u->cur = NULL;
  snprintf(r->audit_detail, sizeof r->audit_detail, "upload_link=%s files=%zu bytes=%llu refused",
           u->l.id, json_array_size(u->files), (unsigned long long)u->bytes);
  switch (err->code) {
  case EFBIG: reply_refusal(r, 413, "payload_too_large", err->msg); return;
  case STORE_EQUOTA:
    reply_refusal(r, 403, "quota_exceeded", "There is no room left for this file.");
    return;
  case EMLINK: reply_refusal(r, 413, "too_many_files", "This link takes no more files."); return;
  case EMEDIUMTYPE: reply_refusal(r, 415, "unsupported_media_type", err->msg); return;
  case EBADMSG: reply_refusal(r, 400, "bad_request", err->msg); return;
  case EEXIST: reply_refusal(r, 409, "conflict", err->msg); return;
  case STORE_ENOBUCKET:
    reply_refusal(r, 410, "gone", "This upload link's bucket no longer exists.");
    return;
  case ENOSPC:
    reply_refusal(r, 507, "insufficient_storage", "The server has no room for this file.");
    return;
  default: reply_unusable(r, err); return;
  }
}

/* Publish the current file; -1 with err filled. */
static int finish_file(struct ulpost *u, struct husk_err *err) {
  if (!u->cur)
    return 0;
  struct upload_link_file *f = u->cur;
  u->cur = NULL;
  char *key = NULL;
  uint64_t size = 0;
  if (upload_link_file_commit(f, &key, &size, err) < 0)
    return -1;
  const char *slash = strrchr(key, '/');
  json_array_append_new(u->files, json_pack("{s:s, s:s, s:I}", "name", slash ? slash + 1 : key,
                                            "key", key, "size", (json_int_t)size));
  u->bytes += size;
  free(key);
  return 0;
}

static enum MHD_Result on_part(void *cls, enum MHD_ValueKind kind, const char *key,
                               const char *filename, const char *content_type,
                               const char *transfer_encoding, const char *data, uint64_t off,
                               size_t size) {
  struct req *r = cls;
  struct ulpost *u = r->up;
  (void)kind, (void)key, (void)transfer_encoding;
  if (u->failed)
    return MHD_NO;
  if (!filename || (!filename[0] && size == 0 && !u->cur))
    return MHD_YES; /* a plain field, or a file input left empty */
  bool fresh = off == 0 && (!u->cur || upload_link_file_size(u->cur) > 0 ||
                            strcmp(filename, u->cur_name ? u->cur_name : "") != 0);
  struct husk_err err;
  if (fresh) {
    if (finish_file(u, &err) < 0) {
      refuse(r, u, &err);
      return MHD_NO;
    }
    /* The type by the name the file is stored under (cut, cleaned): the
     * one a link serves it as later. */
    cleanup_free char *stored_name = upload_link_safe_name(filename);
    if (!stored_name || !upload_link_type_ok(&u->l, stored_name, content_type)) {
      husk_fail(&err, EMEDIUMTYPE, "This link does not take files of this type (it takes: %s).",
                u->l.content_types);
      refuse(r, u, &err);
      return MHD_NO;
    }
    free(u->cur_name);
    if (!(u->cur_name = strdup(filename))) {
      husk_fail(&err, ENOMEM, "out of memory");
      refuse(r, u, &err);
      return MHD_NO;
    }
    if (upload_link_file_open(r->srv->cfg.store, &u->l, filename, &u->cur, &err) < 0) {
      refuse(r, u, &err);
      return MHD_NO;
    }
  }
  if (size && u->cur && upload_link_file_write(u->cur, data, size, &err) < 0) {
    refuse(r, u, &err);
    return MHD_NO;
  }
  return MHD_YES;
}

enum MHD_Result h_upost_begin(struct req *r) {
  struct store *st = r->srv->cfg.store;
  struct husk_err err;
  if (!st)
    return reply_refusal(r, 404, "not_found", "This upload link does not exist.");
  struct ulpost *u = calloc(1, sizeof *u);
  if (!u || !(u->files = json_array())) {
    free(u);
    return api_reply_error(r, 500, "internal_error", "out of memory");
  }
  r->up = u;
  if (upload_link_resolve(st, r->params[0], &u->l, &err) < 0) {
    if (err.code != ENOENT) /* a link's refusals are its owner's to see */
      snprintf(r->tenant, sizeof r->tenant, "%s", u->l.tenant_id);
    snprintf(r->audit_detail, sizeof r->audit_detail, "upload_link=%s refused", u->l.id);
    return reply_unusable(r, &err);
  }
  /* From now on the request counts in the owner's load and is audited
   * as the owner's. */
  snprintf(r->tenant, sizeof r->tenant, "%s", u->l.tenant_id);
  snprintf(r->audit_detail, sizeof r->audit_detail, "upload_link=%s", u->l.id);
  enum MHD_Result ret = api_admit(r);
  if (r->responded || ret != MHD_YES)
    return ret;
  const char *ct = api_header(r, MHD_HTTP_HEADER_CONTENT_TYPE);
  if (!ct || strncasecmp(ct, "multipart/form-data", 19) != 0)
    return reply_refusal(r, 415, "unsupported_media_type",
                         "Send the files as multipart/form-data.");
  if (!(u->pp = MHD_create_post_processor(r->conn, UL_PP_BUFFER, on_part, r)))
    return reply_refusal(r, 400, "bad_request", "The form data is malformed (no boundary).");
  /* A good link's upload takes as long as it needs (the request timeout
   * held until here: no key, so the link was the proof). */
  conn_watch_request_in(&r->srv->front.watch, r->conn);
  return MHD_YES;
}

int h_upost_upload(struct req *r, const char *data, size_t len) {
  struct ulpost *u = r->up;
  if (MHD_post_process(u->pp, data, len) != MHD_YES && !r->responded) {
    struct husk_err err;
    husk_fail(&err, EBADMSG, "The form data is malformed.");
    refuse(r, u, &err);
  }
  return 0;
}

enum MHD_Result h_upost(struct req *r) {
  struct ulpost *u = r->up;
  struct husk_err err;
  if (!u->pp)
    return api_reply_error(r, 500, "internal_error", "no upload");
  /* The post processor reports a body cut short only at its end. */
  if (MHD_destroy_post_processor(u->pp) != MHD_YES) {
    u->pp = NULL;
    husk_fail(&err, EBADMSG, "The form data is malformed or cut short.");
    refuse(r, u, &err);
    return MHD_YES;
  }
  u->pp = NULL;
  if (finish_file(u, &err) < 0) {
    refuse(r, u, &err);
    return MHD_YES;
  }
  size_t n = json_array_size(u->files);
  if (n == 0)
    return reply_refusal(r, 400, "bad_request", "The form held no file.");
  snprintf(r->audit_detail, sizeof r->audit_detail, "upload_link=%s files=%zu bytes=%llu", u->l.id,
           n, (unsigned long long)u->bytes);
  if (!wants_html(r))
    return api_reply_json(r, 201,
                          json_pack("{s:s, s:s, s:O}", "bucket", u->l.bucket, "prefix", u->l.prefix,
                                    "files", u->files));
  char nonce[40];
  if (new_nonce(nonce) < 0)
    return api_reply_error(r, 500, "internal_error", "no randomness");
  struct strbuf b = {0};
  page_head(&b, "Upload complete", nonce);
  strbuf_printf(&b, "<p id=\"status\">Upload complete: %zu file%s stored.</p><ul>", n,
            n == 1 ? "" : "s");
  size_t i;
  json_t *f;
  json_array_foreach(u->files, i, f) {
    strbuf_str(&b, "<li>");
    strbuf_html(&b, json_string_value(json_object_get(f, "name")));
    strbuf_printf(&b, " (%lld bytes)</li>", (long long)json_integer_value(json_object_get(f, "size")));
  }
  strbuf_str(&b, "</ul></body></html>");
  enum MHD_Result ret = reply_page(r, 201, &b, nonce);
  free(b.p);
  return ret;
}

void h_upost_cleanup(struct req *r) {
  ulpost_free(r->up);
  r->up = NULL;
}
