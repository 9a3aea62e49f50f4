#!/bin/bash
# MCP Inspector in CLI mode (@modelcontextprotocol/inspector --cli, pinned in
# package-lock.json) against `husk mcp` (stdio) and /mcp of husk serve
# (HTTP), in the legacy era and, through a config file, the 2026-07-28 era:
# tools/list and tools/call.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../serve/serve.bash"
MCPDIR=$(cd "$(dirname "$0")" && pwd)

# The pinned Node 22 first in PATH: the Inspector's scripts run on `node`.
export PATH="$MCPDIR/node_modules/.bin:$PATH" MCP_INSPECTOR_SECRET_STORE=memory

if ! "$MCPDIR/setup.sh"; then
  not_ok "npm packages install (tests/mcp/setup.sh)"
  finish
  exit 1
fi
if ! serve_start; then
  not_ok "the daemon starts"
  finish
  exit 1
fi
new_tenant mcp-inspector && KEY=$TKEY

insp() { # ARGS...: OUT, RC
  OUT=$(cd "$T_SCRATCH" && timeout 120 mcp-inspector --cli "$@" 2>"$T_SCRATCH/insp.err")
  RC=$?
}
has() { # EXPR: Python on the JSON in $OUT (j)
  python3 -c 'import json, sys; j = json.loads(sys.argv[1]); assert eval(sys.argv[2]), j' "$OUT" "$1" 2>/dev/null
}
TOOLS='len(j.get("result", j)["tools"]) == 18 and j.get("result", j)["tools"][0]["name"] == "run_code"'
# husk serve adds the storage plane's five tools after husk's own.
TOOLS_HTTP='len(j.get("result", j)["tools"]) == 24 and j.get("result", j)["tools"][0]["name"] == "run_code" and j.get("result", j)["tools"][21]["name"] == "load_file"'
PY='(j.get("result", j))["structuredContent"]["stdout"] == "42\n"'
CALL=(--method tools/call --tool-name run_code --tool-args-json '{"language":"python","code":"print(6*7)"}' --format json)
cat >"$T_SCRATCH/mcp.json" <<JSON
{"mcpServers": {
  "stdio-modern": {"type": "stdio", "command": "$HUSK", "args": ["mcp", "--data", "$T_SCRATCH/sd", "--quiet"],
                   "protocolEra": "modern"},
  "http-modern": {"type": "streamable-http", "url": "$URL/mcp", "protocolEra": "modern",
                  "headers": {"Authorization": "Bearer $KEY"}}}}
JSON

insp "$HUSK" mcp --data "$T_SCRATCH/sd" --quiet -- --method tools/list --format json
check "inspector, stdio: tools/list" has "$TOOLS"
insp "$HUSK" mcp --data "$T_SCRATCH/sd" --quiet -- "${CALL[@]}"
check "inspector, stdio: tools/call run_code" has "$PY"
insp "$HUSK" mcp --data "$T_SCRATCH/sd" --quiet -- --method tools/call --tool-name run_code \
  --tool-args-json '{"language":"bash","code":"exit 4"}' --format json
expect_eq "inspector, stdio: a failing run is an isError result (exit 5)" "$RC" 5
insp "$URL/mcp" --transport http --header "Authorization: Bearer $KEY" --method tools/list --format json
check "inspector, HTTP: tools/list (with the storage tools)" has "$TOOLS_HTTP"
insp "$URL/mcp" --transport http --header "Authorization: Bearer $KEY" "${CALL[@]}"
check "inspector, HTTP: tools/call run_code" has "$PY"
insp --config "$T_SCRATCH/mcp.json" --server stdio-modern --method tools/list --format json
check "inspector, stdio, 2026-07-28: tools/list" has "$TOOLS"
insp --config "$T_SCRATCH/mcp.json" --server http-modern "${CALL[@]}"
check "inspector, HTTP, 2026-07-28: tools/call (a modern result: serverInfo in _meta)" \
  has "$PY and j.get(\"result\", j)[\"_meta\"][\"io.modelcontextprotocol/serverInfo\"][\"name\"] == \"husk\""
expect_eq "no box is left running" "$(reap_boxes "$KEY")" 0
serve_stop
expect_eq "the daemon stops cleanly on SIGTERM (exit 0, no sanitizer report)" "$SERVE_RC" 0
serve_finish
