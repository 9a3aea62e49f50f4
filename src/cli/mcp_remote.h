/* `husk mcp --server URL`: the stdio transport in front of a running
 * `husk serve`, forwarding every message to its /mcp endpoint. */
#ifndef HUSK_CLI_MCP_REMOTE_H
#define HUSK_CLI_MCP_REMOTE_H

/* Serve stdin/stdout (protocol on `out_fd`) until stdin's EOF.  0 or -1. */
int mcp_remote_main(const char *url, const char *key, int out_fd,
                    void (*log)(void *ctx, const char *line));

#endif
