/* The E2B-compatible front: placeholder table, filled by its own change. */
#include "api/e2b.h"

const struct route e2b_snapshot_routes[] = {{NULL, NULL, AUTH_NONE, BODY_NONE, NULL, NULL, NULL, NULL, NULL, 0}};
const size_t e2b_snapshot_nroutes = 0;
