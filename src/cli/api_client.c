/* The HTTP API client of husk snapshot and husk user (api_client.h). */
#define _GNU_SOURCE
#include "cli/api_client.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/strbuf.h"

bool cli_api_id_ok(const char *s) {
  size_t n = strlen(s);
  return n > 0 && n < 64 && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_") == n;
}

void cli_api_print_json(const json_t *j) {
  char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  if (s)
    printf("%s\n", s);
  free(s);
}

struct reply {
  struct strbuf body;
  bool too_big;
};

static size_t on_body(char *p, size_t size, size_t n, void *ctx) {
  struct reply *r = ctx;
  size_t len = size * n;
  if (r->body.n + len > CLI_API_REPLY_MAX) {
    r->too_big = true;
    return 0;
  }
  strbuf_add(&r->body, p, len);
  return len;
}

int cli_api_request(const char *prog, const char *server, const char *method, const char *path,
                    const char *body, long *status, json_t **out) {
  *status = 0;
  *out = NULL;
  const char *key = getenv("HUSK_API_KEY");
  if (!key || !*key) {
    fprintf(stderr, "%s: set HUSK_API_KEY to the tenant's API key\n", prog);
    return 1;
  }
  cleanup_free char *url = NULL, *auth = NULL;
  size_t sl = strlen(server);
  while (sl && server[sl - 1] == '/')
    sl--;
  if (asprintf(&url, "%.*s%s", (int)sl, server, path) < 0 ||
      asprintf(&auth, "Authorization: Bearer %s", key) < 0) {
    url = auth = NULL;
    fprintf(stderr, "%s: out of memory\n", prog);
    return 1;
  }
  CURL *h = curl_easy_init();
  if (!h) {
    fprintf(stderr, "%s: cannot start an HTTP client\n", prog);
    return 1;
  }
  struct curl_slist *hdr = curl_slist_append(NULL, auth);
  hdr = hdr ? curl_slist_append(hdr, "Content-Type: application/json") : NULL;
  struct reply r = {0};
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &r);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 10L);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
  if (body) {
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
  }
  CURLcode cc = hdr ? curl_easy_perform(h) : CURLE_OUT_OF_MEMORY;
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
  curl_slist_free_all(hdr);
  curl_easy_cleanup(h);
  cleanup_free char *text = strbuf_take(&r.body);
  if (r.too_big) {
    fprintf(stderr, "%s: the server's reply is larger than %u bytes\n", prog, CLI_API_REPLY_MAX);
    return 1;
  }
  if (cc != CURLE_OK) {
    fprintf(stderr, "%s: %s: %s\n", prog, server, curl_easy_strerror(cc));
    return 1;
  }
  json_error_t je;
  *out = text && *text ? json_loads(text, 0, &je) : NULL;
  if (*status / 100 != 2) {
    const char *msg =
        json_string_value(json_object_get(json_object_get(*out, "error"), "message"));
    fprintf(stderr, "%s: %s (HTTP %ld)\n", prog, msg ? msg : "the server refused", *status);
    return 1;
  }
  return 0;
}
