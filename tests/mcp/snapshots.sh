#!/bin/bash
# Pause, resume and snapshots over MCP with the official TypeScript SDK
# clients (v1 in the legacy era, v2 pinned to 2026-07-28), over stdio
# (`husk mcp`: no object store, so a snapshot is a clear tool error) and
# Streamable HTTP (/mcp of husk serve): snapshots.mjs prints one TAP line
# per check -- pause and resume, the tools refused on a paused sandbox,
# snapshot and two independent sandboxes made from it, a paused sandbox's
# snapshot, tenant isolation.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../serve/serve.bash"
MCPDIR=$(cd "$(dirname "$0")" && pwd)

NODE=${NODE:-$MCPDIR/node_modules/.bin/node}
WAIT_S=20

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
new_tenant snap-mcp-a && KA=$TKEY
new_tenant snap-mcp-b && KB=$TKEY

for sdk in ${SDKS:-v1 v2}; do
  for mode in ${MODES:-stdio http}; do
    (cd "$MCPDIR" && SDK=$sdk MODE=$mode HUSK="$HUSK" HUSK_DATA="$T_SCRATCH/stdio-data" \
       URL="$URL/mcp" KEY="$KA" KEY2="$KB" WAIT_S=$WAIT_S timeout 600 "$NODE" snapshots.mjs) \
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

KEY=$KA
if [[ " ${MODES:-stdio http} " == *" http "* ]]; then
  # The calls are audited with their sandbox; the snapshot's id in the detail.
  api GET "/v1/audit?action=mcp.sandbox_snapshot&limit=50"
  check "sandbox_snapshot calls are audited with the snapshot made" \
    python3 -c '
import json, sys
recs = json.loads(sys.argv[1])["records"]
assert any((r.get("detail") or "").startswith("s_") and r.get("box_id") for r in recs), recs
' "$BODY"
  api GET "/v1/audit?action=mcp.sandbox_pause&limit=50"
  check "sandbox_pause calls are audited" grep -q '"mcp.sandbox_pause"' <<<"$BODY"
  # The snapshots the clients made are the tenant's, listed over HTTP too.
  api GET /v1/snapshots
  n=$(jf 'len(j["snapshots"])')
  check "the snapshots made over MCP are listed over HTTP ($n)" [ "${n:-0}" -ge 2 ]
  for s in $(jf '" ".join(x["id"] for x in j["snapshots"])'); do
    api DELETE "/v1/snapshots/$s"
    [ "$CODE" = 204 ] || not_ok "delete snapshot $s (got $CODE)"
  done
fi
expect_eq "no box is left running" "$(reap_boxes "$KA" "$KB")" 0
serve_stop
expect_eq "the daemon stops cleanly on SIGTERM (exit 0, no sanitizer report)" "$SERVE_RC" 0
serve_finish
