/* The E2B-compatible front: requests for a port of the box other than
 * envd's and the code interpreter's. */
#include "api/e2b.h"

enum MHD_Result e2b_port_begin(struct req *r) {
  return api_reply_error(r, 502, "bad_gateway", "port %u of the sandbox is not served",
                         r->e2b_port);
}
