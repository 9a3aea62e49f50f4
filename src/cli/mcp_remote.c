/* Forwarding stdio to a husk serve's /mcp (Streamable HTTP) with libcurl.
 *
 * Each message read from stdin is POSTed as is, with the tenant key and,
 * for the 2026-07-28 era, the headers that era requires (MCP-Protocol-Version,
 * Mcp-Method, Mcp-Name).  A JSON reply is written out as one line; an SSE
 * reply is relayed event by event (progress notifications, then the
 * response).  Requests run in parallel (the stdio transport gives each its
 * own thread), so a notifications/cancelled is forwarded while its call
 * waits, and the server, which scopes cancellation by tenant, stops it. */
#define _GNU_SOURCE
#include "cli/mcp_remote.h"

#include <curl/curl.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/mcp.h"
#include "util/base64.h"
#include "util/cleanup.h"

struct remote {
  char *url;
  char *auth; /* "Authorization: Bearer KEY" */
  void (*log)(void *ctx, const char *line);
};

struct xfer {
  const struct mcp_caller *caller;
  char *buf; /* body so far (JSON) or the SSE event being read */
  size_t len, cap;
  bool sse, sse_known;
  json_t *final;   /* the response */
  bool too_big;
  CURL *curl;
};

static int append(struct xfer *x, const char *p, size_t n) {
  if (x->len + n > MCP_MESSAGE_MAX * 4) {
    x->too_big = true;
    return -1;
  }
  if (x->len + n + 1 > x->cap) {
    size_t cap = x->cap ? x->cap : 8192;
    while (cap < x->len + n + 1)
      cap *= 2;
    char *b = realloc(x->buf, cap);
    if (!b)
      return -1;
    x->buf = b;
    x->cap = cap;
  }
  memcpy(x->buf + x->len, p, n);
  x->len += n;
  x->buf[x->len] = '\0';
  return 0;
}

/* One SSE event's data: a notification is relayed at once, the response is
 * kept for the caller. */
static void sse_event(struct xfer *x, const char *data, size_t n) {
  json_error_t je;
  json_t *m = json_loadb(data, n, 0, &je);
  if (!json_is_object(m)) {
    json_decref(m);
    return;
  }
  if (json_object_get(m, "method") && !json_object_get(m, "id")) {
    if (x->caller->notify)
      x->caller->notify(x->caller->notify_ctx, m);
    else
      json_decref(m);
    return;
  }
  json_decref(x->final);
  x->final = m;
}

/* Split the buffered SSE text into events (blank-line separated). */
static void sse_drain(struct xfer *x) {
  for (;;) {
    char *end = strstr(x->buf ? x->buf : "", "\n\n");
    if (!end)
      return;
    size_t evlen = (size_t)(end - x->buf) + 2;
    /* Collect the data: lines of this event. */
    char *data = NULL;
    size_t dlen = 0;
    for (char *line = x->buf; line < end;) {
      char *nl = memchr(line, '\n', (size_t)(end + 1 - line));
      size_t ll = nl ? (size_t)(nl - line) : (size_t)(end - line);
      if (ll >= 5 && !strncmp(line, "data:", 5)) {
        const char *v = line + 5;
        size_t vl = ll - 5;
        if (vl && *v == ' ')
          v++, vl--;
        char *nd = realloc(data, dlen + vl + 2);
        if (nd) {
          data = nd;
          if (dlen)
            data[dlen++] = '\n';
          memcpy(data + dlen, v, vl);
          dlen += vl;
        }
      }
      line += ll + 1;
    }
    if (data)
      sse_event(x, data, dlen);
    free(data);
    memmove(x->buf, x->buf + evlen, x->len - evlen + 1);
    x->len -= evlen;
  }
}

static size_t on_body(char *p, size_t sz, size_t nm, void *ctx) {
  struct xfer *x = ctx;
  size_t n = sz * nm;
  if (!x->sse_known) {
    char *ct = NULL;
    curl_easy_getinfo(x->curl, CURLINFO_CONTENT_TYPE, &ct);
    x->sse = ct && strstr(ct, "text/event-stream");
    x->sse_known = true;
  }
  /* SSE servers may end lines with \r\n: normalise. */
  for (size_t i = 0; i < n; i++) {
    if (x->sse && p[i] == '\r')
      continue;
    if (append(x, &p[i], 1) < 0)
      return 0;
  }
  if (x->sse)
    sse_drain(x);
  return n;
}

/* The transfer stops when the stdio side stops (EOF). */
static int on_progress(void *ctx, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d) {
  struct xfer *x = ctx;
  (void)a, (void)b, (void)c, (void)d;
  struct pollfd p = {.fd = x->caller->cancel_fd, .events = POLLIN};
  return x->caller->cancel_fd >= 0 && poll(&p, 1, 0) > 0 ? 1 : 0;
}

static bool ascii_printable(const char *s) {
  for (; *s; s++)
    if (*s < 0x20 || *s > 0x7e)
      return false;
  return true;
}

static json_t *forward(void *ctx, const struct mcp_msg *msg, const struct mcp_caller *c) {
  struct remote *r = ctx;
  cleanup_free char *body = mcp_dump(msg->root);
  if (!body)
    return msg->kind == MCP_REQUEST ? mcp_error(msg->id, MCP_INTERNAL_ERROR, "Internal error", NULL)
                                    : NULL;
  struct xfer x = {.caller = c};
  CURL *h = curl_easy_init();
  struct curl_slist *hdr = NULL;
  char line[512];
  hdr = curl_slist_append(hdr, "Content-Type: application/json");
  hdr = curl_slist_append(hdr, "Accept: application/json, text/event-stream");
  hdr = curl_slist_append(hdr, r->auth);
  if (msg->era == MCP_ERA_MODERN && msg->method) {
    snprintf(line, sizeof line, "MCP-Protocol-Version: %.64s", msg->version);
    hdr = curl_slist_append(hdr, line);
    snprintf(line, sizeof line, "Mcp-Method: %.200s", msg->method);
    hdr = curl_slist_append(hdr, line);
    if (msg->name) {
      /* Any length a name may have (a resource URI runs to kilobytes);
       * RFC 2047-style base64 sentinel for names a header cannot carry. */
      size_t n = strlen(msg->name);
      cleanup_free char *nl = malloc(sizeof "Mcp-Name: =?base64?" + (n + 2) / 3 * 4 + 3);
      if (nl && ascii_printable(msg->name)) {
        sprintf(nl, "Mcp-Name: %s", msg->name);
      } else if (nl) {
        size_t o = (size_t)sprintf(nl, "Mcp-Name: =?base64?");
        o += b64_encode_to(nl + o, msg->name, n, B64_STD);
        strcpy(nl + o, "?=");
      }
      if (!nl) {
        curl_slist_free_all(hdr);
        hdr = NULL;
      } else {
        hdr = curl_slist_append(hdr, nl);
      }
    }
  }
  json_t *out = NULL;
  if (!h || !hdr) {
    out = mcp_error(msg->id, MCP_INTERNAL_ERROR, "Internal error: cannot start a request", NULL);
    goto done;
  }
  x.curl = h;
  curl_easy_setopt(h, CURLOPT_URL, r->url);
  curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
  curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
  curl_easy_setopt(h, CURLOPT_XFERINFODATA, &x);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  CURLcode rc = curl_easy_perform(h);
  long status = 0;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
  if (!x.sse_known) { /* no body came: the type says what kind of reply it was */
    char *ct = NULL;
    curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ct);
    x.sse = ct && strstr(ct, "text/event-stream");
  }
  if (rc == CURLE_ABORTED_BY_CALLBACK) {
    out = NULL; /* stdin ended: nobody to answer */
  } else if (rc != CURLE_OK) {
    char m[300];
    snprintf(m, sizeof m, "Internal error: cannot reach husk serve at %.150s: %s", r->url,
             curl_easy_strerror(rc));
    out = msg->kind == MCP_REQUEST ? mcp_error(msg->id, MCP_INTERNAL_ERROR, m, NULL) : NULL;
  } else if (x.sse) {
    /* A stream that ended without a response: the call was cancelled. */
    out = x.final;
    x.final = NULL;
  } else if (status == 202 || x.len == 0) {
    out = NULL;
    if (msg->kind == MCP_REQUEST && status != 202) {
      char m[120];
      snprintf(m, sizeof m, "Internal error: husk serve answered HTTP %ld without a body", status);
      out = mcp_error(msg->id, MCP_INTERNAL_ERROR, m, NULL);
    }
  } else {
    json_error_t je;
    out = json_loadb(x.buf, x.len, 0, &je);
    if (!json_is_object(out) || !json_object_get(out, "jsonrpc")) {
      /* Not JSON-RPC: an HTTP-level refusal (401 bad key, 403 ...). */
      json_t *e = json_object_get(json_object_get(out, "error"), "message");
      char m[400];
      snprintf(m, sizeof m, "husk serve refused the request (HTTP %ld): %.300s", status,
               json_is_string(e) ? json_string_value(e) : "no details");
      json_decref(out);
      out = msg->kind == MCP_REQUEST ? mcp_error(msg->id, MCP_INTERNAL_ERROR, m, NULL) : NULL;
    }
  }
done:
  if (msg->kind != MCP_REQUEST) {
    json_decref(out);
    out = NULL;
  }
  json_decref(x.final);
  free(x.buf);
  curl_slist_free_all(hdr);
  if (h)
    curl_easy_cleanup(h);
  return out;
}

int mcp_remote_main(const char *url, const char *key, int out_fd,
                    void (*log)(void *ctx, const char *line)) {
  if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
    fprintf(stderr, "husk mcp: cannot initialise libcurl\n");
    return -1;
  }
  struct remote r = {.log = log};
  size_t ul = strlen(url);
  while (ul > 0 && url[ul - 1] == '/')
    ul--;
  bool has_mcp = ul >= 4 && !strncmp(url + ul - 4, "/mcp", 4);
  if (asprintf(&r.url, "%.*s%s", (int)ul, url, has_mcp ? "" : "/mcp") < 0 ||
      asprintf(&r.auth, "Authorization: Bearer %s", key) < 0) {
    fprintf(stderr, "husk mcp: out of memory\n");
    return -1;
  }
  struct mcp_caller caller = {.tenant = "", .cancel_fd = -1, .scopes = ~0u};
  struct husk_err err;
  int rc = mcp_stdio_serve(0, out_fd, forward, &r, &caller, &err);
  if (rc < 0)
    fprintf(stderr, "husk mcp: %s\n", err.msg);
  if (rc != 1) { /* 1: calls still use them while the process exits */
    free(r.url);
    free(r.auth);
    curl_global_cleanup();
  }
  return rc < 0 ? -1 : 0;
}
