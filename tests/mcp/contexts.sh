#!/bin/bash
# Code contexts over MCP with the official TypeScript SDK clients (v1 in
# the legacy era, v2 pinned to 2026-07-28), over stdio (`husk mcp`) and
# Streamable HTTP (/mcp of husk serve): contexts.mjs prints one TAP line per
# check -- a stateful two-step session whose chart comes back as a PNG
# image block, errors with their traceback, HTML and SVG results, long
# output, the contexts tool (list, create, restart, interrupt, delete), and
# run_code without sandbox_id as before.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../serve/serve.bash"
MCPDIR=$(cd "$(dirname "$0")" && pwd)

NODE=${NODE:-$MCPDIR/node_modules/.bin/node}
WAIT_S=3

if ! "$MCPDIR/setup.sh"; then
  not_ok "npm packages install (tests/mcp/setup.sh)"
  finish
  exit 1
fi
if ! serve_start --mcp-wait "$WAIT_S"; then
  not_ok "the daemon starts"
  finish
  exit 1
fi
new_tenant ctx-a && KA=$TKEY
new_tenant ctx-b && KB=$TKEY

for sdk in ${SDKS:-v1 v2}; do
  for mode in ${MODES:-stdio http}; do
    (cd "$MCPDIR" && SDK=$sdk MODE=$mode HUSK="$HUSK" HUSK_DATA="$T_SCRATCH/stdio-data" \
       URL="$URL/mcp" KEY="$KA" KEY2="$KB" WAIT_S=$WAIT_S timeout 600 "$NODE" contexts.mjs) \
       >"$T_SCRATCH/out" 2>"$T_SCRATCH/err"
    rc=$?
    cat "$T_SCRATCH/out"
    if [ "$rc" -ne 0 ] && ! grep -q '^not ok' "$T_SCRATCH/out"; then
      not_ok "$sdk over $mode: the client script failed (exit $rc)"
      sed 's/^/#   /' "$T_SCRATCH/err" | tail -20
    fi
  done
done

if [ -d "$T_SCRATCH/stdio-data" ]; then
  expect_eq "stdio: no sandbox left behind" "$(python3 "$MCPDIR/stdio_cleanup.py" "$HUSK" "$T_SCRATCH/stdio-data")" 0
fi

# The audit names the context of each call, never the code.
KEY=$KA
api GET "/v1/audit?action=mcp.contexts&limit=50"
[[ " ${MODES:-stdio http} " == *" http "* ]] &&
check "contexts calls are audited with the action and the context" \
  python3 -c '
import json, sys
recs = json.loads(sys.argv[1])["records"]
assert any("restart default-python" in (r.get("detail") or "") for r in recs), recs
' "$BODY"
expect_eq "no box is left running" "$(reap_boxes "$KA" "$KB")" 0
serve_stop
expect_eq "the daemon stops cleanly on SIGTERM (exit 0, no sanitizer report)" "$SERVE_RC" 0
serve_finish
