/* The MCP protocol core without a transport and without boxes: parsing and
 * era classification, the replies of each era, argument checks generated
 * from the tool tables, and the content helpers. */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/internal.h"
#include "unit.h"

static struct mcp_server *srv;

static struct husk_mgr *no_mgr(void *ctx, struct husk_err *err) {
  (void)ctx;
  husk_fail(err, ENOENT, "no core in this test");
  return NULL;
}

/* Handle one message text; returns the reply (or NULL). */
static json_t *handle(const char *text) {
  struct mcp_msg m;
  json_t *bad = NULL;
  if (mcp_parse(text, strlen(text), &m, &bad) < 0)
    return bad;
  struct mcp_caller c = {.tenant = "t_test", .cancel_fd = -1, .scopes = ~0u};
  json_t *r = mcp_handle(srv, &m, &c);
  mcp_msg_free(&m);
  return r;
}

static int code_of(json_t *r) {
  int c = mcp_reply_code(r);
  json_decref(r);
  return c;
}

#define MODERN_META                                                                               \
  "\"_meta\":{\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\","                        \
  "\"io.modelcontextprotocol/clientCapabilities\":{}}"

TEST(parse_classifies_by_body) {
  struct mcp_msg m;
  json_t *bad = NULL;
  const char *req = "{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"method\":\"tools/call\",\"params\":{"
                    "\"name\":\"run_code\"," MODERN_META "}}";
  CHECK(mcp_parse(req, strlen(req), &m, &bad) == 0);
  CHECK(m.kind == MCP_REQUEST && m.era == MCP_ERA_MODERN);
  CHECK_STR(m.version, "2026-07-28");
  CHECK_STR(m.name, "run_code");
  mcp_msg_free(&m);
  const char *note = "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}";
  CHECK(mcp_parse(note, strlen(note), &m, &bad) == 0);
  CHECK(m.kind == MCP_NOTIFICATION && m.era == MCP_ERA_LEGACY);
  mcp_msg_free(&m);
  const char *resp = "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}";
  CHECK(mcp_parse(resp, strlen(resp), &m, &bad) == 0);
  CHECK(m.kind == MCP_RESPONSE);
  CHECK(mcp_handle(srv, &m, &(struct mcp_caller){.cancel_fd = -1, .scopes = ~0u}) == NULL);
  mcp_msg_free(&m);
}

TEST(parse_refuses_what_is_not_one_request) {
  CHECK(code_of(handle("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]")) == MCP_INVALID_REQUEST);
  CHECK(code_of(handle("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":")) == MCP_PARSE_ERROR);
  CHECK(code_of(handle("{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"method\":\"ping\"}")) == MCP_PARSE_ERROR);
  CHECK(code_of(handle("{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}")) == MCP_INVALID_REQUEST);
  CHECK(code_of(handle("{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}")) == MCP_INVALID_REQUEST);
  CHECK(code_of(handle("{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}")) == MCP_INVALID_REQUEST);
  CHECK(code_of(handle("{\"id\":1,\"method\":\"ping\"}")) == MCP_INVALID_REQUEST);
  CHECK(code_of(handle("42")) == MCP_INVALID_REQUEST);
  CHECK(code_of(handle("{\"jsonrpc\":\"2.0\",\"id\":1}")) == MCP_INVALID_REQUEST);
  /* An invalid request keeps its id when it has a usable one. */
  json_t *r = handle("{\"jsonrpc\":\"1.0\",\"id\":\"x\",\"method\":\"ping\"}");
  CHECK_STR(json_string_value(json_object_get(r, "id")), "x");
  json_decref(r);
}

TEST(ids_round_trip_exactly) {
  json_t *r = handle("{\"jsonrpc\":\"2.0\",\"id\":9007199254740993,\"method\":\"ping\"}");
  char *t = mcp_dump(r);
  CHECK(t && strstr(t, "\"id\":9007199254740993"));
  CHECK(t && !strchr(t, '\n'));
  free(t);
  json_decref(r);
}

TEST(legacy_initialize_negotiation) {
  const char *cases[][2] = {{"2025-11-25", "2025-11-25"}, {"2025-06-18", "2025-06-18"},
                            {"2026-07-28", "2025-11-25"}, {"2024-11-05", "2025-11-25"}};
  for (size_t i = 0; i < 4; i++) {
    char req[256];
    snprintf(req, sizeof req,
             "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"%s\"}}",
             cases[i][0]);
    json_t *r = handle(req);
    json_t *res = json_object_get(r, "result");
    CHECK_STR(json_string_value(json_object_get(res, "protocolVersion")), cases[i][1]);
    CHECK(json_object_get(json_object_get(res, "capabilities"), "tools") != NULL);
    CHECK(json_object_get(json_object_get(json_object_get(res, "capabilities"), "tools"), "listChanged") == NULL);
    CHECK(json_object_get(res, "resultType") == NULL); /* legacy results have none */
    json_decref(r);
  }
}

TEST(modern_envelope) {
  json_t *r = handle("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{" MODERN_META "}}");
  json_t *res = json_object_get(r, "result");
  CHECK_STR(json_string_value(json_object_get(res, "resultType")), "complete");
  CHECK(json_is_integer(json_object_get(res, "ttlMs")));
  CHECK_STR(json_string_value(json_object_get(res, "cacheScope")), "public");
  CHECK(json_array_size(json_object_get(res, "tools")) == 18);
  CHECK(json_object_get(json_object_get(res, "_meta"), "io.modelcontextprotocol/serverInfo") != NULL);
  json_decref(r);
  r = handle("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"_meta\":{"
             "\"io.modelcontextprotocol/protocolVersion\":\"2030-01-01\","
             "\"io.modelcontextprotocol/clientCapabilities\":{}}}}");
  CHECK(mcp_reply_code(r) == MCP_UNSUPPORTED_VERSION);
  json_t *data = json_object_get(json_object_get(r, "error"), "data");
  CHECK_STR(json_string_value(json_object_get(data, "requested")), "2030-01-01");
  CHECK_STR(json_string_value(json_array_get(json_object_get(data, "supported"), 0)), "2026-07-28");
  json_decref(r);
  CHECK(code_of(handle("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"_meta\":{"
                       "\"io.modelcontextprotocol/protocolVersion\":\"2026-07-28\"}}}")) == MCP_INVALID_PARAMS);
  CHECK(code_of(handle("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{" MODERN_META "}}")) ==
        MCP_METHOD_NOT_FOUND);
  CHECK(code_of(handle("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{" MODERN_META "}}")) ==
        MCP_METHOD_NOT_FOUND);
}

TEST(tool_call_errors) {
  CHECK(code_of(handle("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"nope\"}}")) ==
        MCP_INVALID_PARAMS);
  CHECK(code_of(handle("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"run_code\","
                       "\"arguments\":\"x\"}}")) == MCP_INVALID_PARAMS);
  /* Bad arguments: an isError result, never a protocol error. */
  json_t *r = handle("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"run_code\","
                     "\"arguments\":{\"language\":\"python\"}}}");
  json_t *res = json_object_get(r, "result");
  CHECK(json_is_true(json_object_get(res, "isError")));
  CHECK(strstr(json_string_value(json_object_get(json_array_get(json_object_get(res, "content"), 0), "text")),
               "missing required argument `code`") != NULL);
  CHECK(json_object_get(res, "structuredContent") == NULL);
  json_decref(r);
  /* No core: the tool says so, as a tool error. */
  r = handle("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"sandbox_list\"}}");
  res = json_object_get(r, "result");
  CHECK(json_is_true(json_object_get(res, "isError")));
  CHECK(strstr(json_string_value(json_object_get(json_array_get(json_object_get(res, "content"), 0), "text")),
               "not available") != NULL);
  json_decref(r);
  /* Notifications are never answered. */
  CHECK(handle("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":1}}") == NULL);
  CHECK(handle("{\"jsonrpc\":\"2.0\",\"method\":\"whatever\"}") == NULL);
}

TEST(argument_checks_follow_the_schema) {
  const struct mcp_tool *t = &mcp_tool_run_code;
  json_t *schema = mcp_input_schema(t);
  CHECK(json_is_false(json_object_get(schema, "additionalProperties")));
  CHECK(json_object_get(json_object_get(schema, "properties"), "timeout_seconds") != NULL);
  json_decref(schema);
  const char *bad[] = {
      "{\"language\":\"python\",\"code\":1}",
      "{\"language\":\"ruby\",\"code\":\"x\"}",
      "{\"language\":\"python\",\"code\":\"x\",\"extra\":1}",
      "{\"language\":\"python\",\"code\":\"x\",\"timeout_seconds\":0}",
      "{\"language\":\"python\",\"code\":\"x\",\"timeout_seconds\":1.5}",
      "{\"language\":\"python\",\"code\":\"x\",\"timeout_seconds\":\"5\"}",
      "{\"language\":\"python\",\"code\":\"x\",\"files\":{\"a\":1}}",
      "{\"language\":\"python\",\"code\":\"a\\u0000b\"}",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    json_t *a = json_loads(bad[i], JSON_ALLOW_NUL, NULL);
    char *msg = mcp_check_args(t, a);
    CHECK(msg != NULL);
    free(msg);
    json_decref(a);
  }
  json_t *a = json_loads("{\"language\":\"bash\",\"code\":\"x\",\"timeout_seconds\":30.0,\"files\":{\"a\":\"b\"}}", 0, NULL);
  CHECK(mcp_check_args(t, a) == NULL);
  json_decref(a);
}

/* The keeping tools: pause takes a sandbox_id and keep_memory (a boolean),
 * resume only a sandbox_id; a snapshot's metadata is an object of strings;
 * sandbox_create takes a snapshot and rebase (a boolean). */
TEST(pause_resume_snapshot_arguments) {
  const struct {
    const struct mcp_tool *t;
    const char *args;
    bool ok;
  } cases[] = {
      {&mcp_tool_sandbox_pause, "{\"sandbox_id\":\"b_0\"}", true},
      {&mcp_tool_sandbox_pause, "{}", false},
      {&mcp_tool_sandbox_pause, "{\"sandbox_id\":\"b_0\",\"keep_memory\":false}", true},
      {&mcp_tool_sandbox_pause, "{\"sandbox_id\":\"b_0\",\"keep_memory\":\"no\"}", false},
      {&mcp_tool_sandbox_pause, "{\"sandbox_id\":\"b_0\",\"to_disk\":true}", false},
      {&mcp_tool_sandbox_resume, "{\"sandbox_id\":\"b_0\"}", true},
      {&mcp_tool_sandbox_resume, "{\"sandbox_id\":7}", false},
      {&mcp_tool_sandbox_snapshot, "{\"sandbox_id\":\"b_0\"}", true},
      {&mcp_tool_sandbox_snapshot, "{\"sandbox_id\":\"b_0\",\"metadata\":{\"step\":\"1\"}}", true},
      {&mcp_tool_sandbox_snapshot, "{\"sandbox_id\":\"b_0\",\"metadata\":{\"step\":1}}", false},
      {&mcp_tool_sandbox_snapshot, "{\"sandbox_id\":\"b_0\",\"metadata\":\"x\"}", false},
      {&mcp_tool_sandbox_create, "{\"snapshot\":\"s_0\",\"rebase\":true}", true},
      {&mcp_tool_sandbox_create, "{\"snapshot\":\"s_0\",\"rebase\":\"yes\"}", false},
      {&mcp_tool_sandbox_create, "{\"snapshot\":5}", false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    json_t *a = json_loads(cases[i].args, 0, NULL);
    char *msg = mcp_check_args(cases[i].t, a);
    CHECK((msg == NULL) == cases[i].ok);
    free(msg);
    json_decref(a);
  }
  json_t *out = json_loads(mcp_tool_sandbox_pause.output_schema, 0, NULL);
  CHECK(json_object_get(json_object_get(out, "properties"), "paused_until") != NULL);
  json_decref(out);
  CHECK(strstr(mcp_tool_sandbox_snapshot.description, "NOT") != NULL); /* processes are not kept */
}

/* A string-list parameter: a non-empty JSON array of strings, bounded in
 * items (max) and in bytes per item (max_len), advertised as such; a map's
 * `max` bounds its entries. */
TEST(string_lists_and_bounded_maps) {
  static const struct mcp_param params[] = {
      {"keys", MCP_P_STRLIST, false, "keys", NULL, 0, 3, 5},
      {"files", MCP_P_STRMAP, false, "files", NULL, 0, 2, 100},
      {NULL, 0, false, NULL, NULL, 0, 0, 0},
  };
  static const struct mcp_tool t = {"t", "t", "t", params, "{}", false, false, false, NULL, 0, NULL};
  json_t *schema = mcp_input_schema(&t);
  json_t *k = json_object_get(json_object_get(schema, "properties"), "keys");
  CHECK(!strcmp(json_string_value(json_object_get(k, "type")), "array"));
  CHECK(json_integer_value(json_object_get(k, "maxItems")) == 3);
  CHECK(json_integer_value(json_object_get(k, "minItems")) == 1);
  CHECK(!strcmp(json_string_value(json_object_get(json_object_get(k, "items"), "type")), "string"));
  CHECK(json_integer_value(json_object_get(json_object_get(k, "items"), "maxLength")) == 5);
  json_t *f = json_object_get(json_object_get(schema, "properties"), "files");
  CHECK(json_integer_value(json_object_get(f, "maxProperties")) == 2);
  json_decref(schema);
  const struct {
    const char *args;
    const char *msg; /* NULL: accepted; else a part of the message */
  } cases[] = {
      {"{\"keys\":[\"a\",\"bb\",\"ccccc\"]}", NULL},
      {"{\"keys\":[]}", "empty"},
      {"{\"keys\":\"a\"}", "array of strings"},
      {"{\"keys\":{\"a\":\"b\"}}", "array of strings"},
      {"{\"keys\":[\"a\",1]}", "item 1 must be a string"},
      {"{\"keys\":[\"a\",null]}", "item 1 must be a string"},
      {"{\"keys\":[\"a\",\"b\",\"c\",\"d\"]}", "too many items (4, at most 3)"},
      {"{\"keys\":[\"abcdef\"]}", "too long"},
      {"{\"keys\":[\"a\\u0000b\"]}", "NUL"},
      {"{\"keys\":[[\"a\"]]}", "must be a string"},
      {"{\"files\":{\"a\":\"1\",\"b\":\"2\"}}", NULL},
      {"{\"files\":{\"a\":\"1\",\"b\":\"2\",\"c\":\"3\"}}", "too many entries (3, at most 2)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    json_t *a = json_loads(cases[i].args, JSON_ALLOW_NUL, NULL);
    CHECK(a != NULL);
    char *msg = mcp_check_args(&t, a);
    if (cases[i].msg)
      CHECK(msg && strstr(msg, cases[i].msg));
    else
      CHECK(msg == NULL);
    free(msg);
    json_decref(a);
  }
  /* The tools that take lists and maps of files advertise the bounds. */
  json_t *w = mcp_input_schema(&mcp_tool_sandbox_write_file);
  CHECK(json_integer_value(json_object_get(
            json_object_get(json_object_get(w, "properties"), "files"), "maxProperties")) == 100);
  CHECK(json_object_get(w, "required") != NULL); /* sandbox_id */
  json_decref(w);
}

TEST(base64_and_text) {
  const unsigned char bin[] = {0, 1, 2, 250, 251, 252, 253};
  for (size_t n = 0; n <= sizeof bin; n++) {
    char *e = mcp_b64_encode(bin, n);
    unsigned char *d = NULL;
    size_t dl = 0;
    CHECK(e && mcp_b64_decode(e, strlen(e), &d, &dl) == 0 && dl == n && !memcmp(d, bin, n));
    free(e);
    free(d);
  }
  unsigned char *d = NULL;
  size_t dl;
  CHECK(mcp_b64_decode("aGk", 3, &d, &dl) == 0 && dl == 2 && !memcmp(d, "hi", 2)); /* unpadded */
  free(d);
  CHECK(mcp_b64_decode("a b=", 4, &d, &dl) < 0);
  CHECK(mcp_b64_decode("a", 1, &d, &dl) < 0);
  bool lossy = false;
  json_t *s = mcp_text("ok\xff\xc3(", 5, &lossy);
  CHECK(lossy && s && !strcmp(json_string_value(s), "ok\xef\xbf\xbd\xef\xbf\xbd("));
  json_decref(s);
  CHECK(mcp_utf8_valid("h\xc3\xa9", 3));
  CHECK(!mcp_utf8_valid("\xed\xa0\x80", 3)); /* a surrogate */
  CHECK(!mcp_utf8_valid("\xc0\xaf", 2));     /* overlong */
  CHECK(!mcp_utf8_valid("\xe2\x82", 2));     /* cut */
  CHECK_STR(mcp_image_mime("x.bin", (const unsigned char *)"\x89PNG\r\n\x1a\n", 8), "image/png");
  CHECK_STR(mcp_image_mime("c.svg", (const unsigned char *)"<?xml?><svg>", 12), "image/svg+xml");
  CHECK(mcp_image_mime("c.txt", (const unsigned char *)"hello", 5) == NULL);
}

int main(void) {
  struct husk_err err;
  struct mcp_config cfg = {.mgr = no_mgr};
  if (mcp_server_new(&srv, &cfg, &err) < 0)
    return 1;
  RUN(parse_classifies_by_body);
  RUN(parse_refuses_what_is_not_one_request);
  RUN(ids_round_trip_exactly);
  RUN(legacy_initialize_negotiation);
  RUN(modern_envelope);
  RUN(tool_call_errors);
  RUN(argument_checks_follow_the_schema);
  RUN(pause_resume_snapshot_arguments);
  RUN(string_lists_and_bounded_maps);
  RUN(base64_and_text);
  mcp_server_free(srv);
  return unit_done();
}
