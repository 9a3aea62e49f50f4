/* MCP JSON-RPC (src/mcp/protocol.c): one message as a client sends it
 * over stdio or HTTP, parsed, classified and answered, tool arguments
 * checked against each tool's schema (src/mcp/tools.c).  The core is
 * never opened: a tool that gets past its argument checks finds no box
 * manager and reports that as its error. */
#include <errno.h>

#include "fuzz.h"
#include "mcp/mcp.h"

static struct husk_mgr *no_mgr(void *ctx, struct husk_err *err) {
  husk_fail(err, ENODEV, "no core in the fuzzer");
  return NULL;
}

static struct mcp_server *srv;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!srv) {
    struct mcp_config cfg = {.mgr = no_mgr, .wait_ms = 1};
    struct husk_err err;
    if (mcp_server_new(&srv, &cfg, &err) < 0)
      abort();
  }
  struct fz f = {data, size};
  size_t n;
  char *text = (char *)fz_rest(&f, &n);
  struct mcp_msg msg;
  json_t *error_reply = NULL;
  json_t *reply = NULL;
  if (mcp_parse(text ? text : "", n, &msg, &error_reply) == 0) {
    struct mcp_caller c = {.tenant = "t-fuzz", .key_id = "", .cancel_fd = -1, .scopes = ~0u};
    reply = mcp_handle(srv, &msg, &c);
    mcp_msg_free(&msg);
  } else if (!error_reply) {
    abort(); /* a refused message always gets its error reply */
  }
  char *out = reply ? mcp_dump(reply) : error_reply ? mcp_dump(error_reply) : NULL;
  free(out);
  json_decref(reply);
  json_decref(error_reply);
  free(text);
  return 0;
}
