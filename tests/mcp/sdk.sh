#!/bin/bash
# The official TypeScript SDK clients against husk's MCP server: SDK v1
# (legacy era, initialize) and the v2 client pinned to 2026-07-28, each over
# stdio (`husk mcp`, standalone) and Streamable HTTP (/mcp of husk serve).
# clients.mjs prints one TAP line per check: tools, a Python snippet, a
# matplotlib PNG, a multi-step sandbox, a call finished through job_wait,
# cancellation, and every bad input.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../serve/serve.bash"
MCPDIR=$(cd "$(dirname "$0")" && pwd)

# The pinned Node 22 from package-lock.json (the v2 client needs Node >= 20;
# Debian 12 ships 18).
NODE=${NODE:-$MCPDIR/node_modules/.bin/node}
WAIT_S=3

if ! "$MCPDIR/setup.sh"; then
  not_ok "npm packages install (tests/mcp/setup.sh)"
  finish
  exit 1
fi
# An S3 listener on a free port: the storage tools' links point at it.
if ! serve_start --mcp-wait "$WAIT_S" --s3-listen 127.0.0.1:0; then
  not_ok "the daemon starts"
  finish
  exit 1
fi
new_tenant mcp-a && KA=$TKEY
new_tenant mcp-b && KB=$TKEY

for sdk in ${SDKS:-v1 v2}; do
  for mode in ${MODES:-stdio http}; do
    (cd "$MCPDIR" && SDK=$sdk MODE=$mode HUSK="$HUSK" HUSK_DATA="$T_SCRATCH/stdio-data" \
       URL="$URL/mcp" KEY="$KA" KEY2="$KB" WAIT_S=$WAIT_S timeout 600 "$NODE" clients.mjs) \
       >"$T_SCRATCH/out" 2>"$T_SCRATCH/err"
    rc=$?
    cat "$T_SCRATCH/out"
    if [ "$rc" -ne 0 ] && ! grep -q '^not ok' "$T_SCRATCH/out"; then
      not_ok "$sdk over $mode: the client script failed (exit $rc)"
      sed 's/^/#   /' "$T_SCRATCH/err" | tail -20
    fi
  done
done

# Nothing left running by the standalone stdio server (a failed check may
# have left a sandbox: boxes outlive the process).
if [ -d "$T_SCRATCH/stdio-data" ]; then
  expect_eq "stdio: no sandbox left behind" "$(python3 "$MCPDIR/stdio_cleanup.py" "$HUSK" "$T_SCRATCH/stdio-data")" 0
fi

# Every tool call over HTTP is in the audit log with the tenant and key.
KEY=$KA
api GET "/v1/audit?action=mcp.run_code&limit=5"
[[ " ${MODES:-stdio http} " == *" http "* ]] &&
check "tool calls are audited as mcp.<tool> with the caller's tenant and key" \
  python3 -c '
import json, sys
recs = json.loads(sys.argv[1])["records"]
assert recs, "no mcp.run_code record"
assert all(r["tenant_id"] and r["key_id"].startswith("k_") for r in recs), recs
' "$BODY"
# Boxes made for run_code are gone once their results are collected, and
# the clients destroyed their sandboxes.
expect_eq "no box is left running" "$(reap_boxes "$KA" "$KB")" 0
serve_stop
expect_eq "the daemon stops cleanly on SIGTERM (exit 0, no sanitizer report)" "$SERVE_RC" 0
serve_finish
