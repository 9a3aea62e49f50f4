/* The storage plane's MCP hook (tools_storage.c): publish() for run_code's
 * output files, and the tools store_file, get_link, list_objects and
 * load_file, all over the core store (storage/store.h, box/box_store.h).
 *
 * `husk serve` wires it into its mcp_config (the store is always open
 * there; when it cannot make links, the tools that need one answer an
 * isError saying so).  Standalone `husk mcp` has no S3 listener and no
 * store: its mcp_config.storage stays NULL and these tools are not listed. */
#ifndef HUSK_MCP_STORAGE_H
#define HUSK_MCP_STORAGE_H

#include "mcp/mcp.h"

struct store;

/* The bucket the tools use when none is given, created on demand for each
 * tenant (bucket names are per tenant). */
#define MCP_BUCKET "husk-mcp"

/* Fill `out` (kept by the caller for as long as the MCP server lives) with
 * the hook over `s`. */
void mcp_storage_plane(struct mcp_storage *out, struct store *s);

#endif
