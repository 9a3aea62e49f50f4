#!/bin/bash
# The official MCP conformance suite (@modelcontextprotocol/conformance,
# pinned; it runs on the Node 22 the lockfile brings) against /mcp of husk
# serve, for the 2025-11-25 and 2026-07-28 requirement sets.  Scenarios that
# do not apply are listed, with why, in conformance-<revision>.yml; any other
# failure, and any listed scenario that passes, fails the suite.  The suite
# cannot send a bearer key, so it talks to /mcp through authproxy.mjs, which
# adds the tenant key and changes nothing else.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../serve/serve.bash"
MCPDIR=$(cd "$(dirname "$0")" && pwd)

NODE="$MCPDIR/node_modules/.bin/node"

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
new_tenant mcp-conformance && KEY=$TKEY

TARGET=$URL KEY=$KEY "$NODE" "$MCPDIR/authproxy.mjs" >"$T_SCRATCH/proxy.port" 2>"$T_SCRATCH/proxy.err" &
PPID_=$!
for _ in $(seq 100); do [ -s "$T_SCRATCH/proxy.port" ] && break; sleep 0.1; done
PORT=$(head -n1 "$T_SCRATCH/proxy.port")

for rev in 2025-11-25 2026-07-28; do
  (cd "$T_SCRATCH" && timeout 600 "$NODE" "$MCPDIR/node_modules/.bin/conformance" server \
     --url "http://127.0.0.1:$PORT/mcp" --requirements "$rev" \
     --expected-failures "$MCPDIR/conformance-$rev.yml" ${CONF_OUT:+-o "$CONF_OUT/$rev"}) >"$T_SCRATCH/conf-$rev.log" 2>&1
  rc=$?
  if [ "$rc" -eq 0 ]; then
    ok "conformance $rev: every applicable scenario passes ($(grep -o 'Total: [0-9]* passed' "$T_SCRATCH/conf-$rev.log"))"
  else
    not_ok "conformance $rev (exit $rc)"
    sed -n '/SUMMARY/,$p' "$T_SCRATCH/conf-$rev.log" | grep -v '^✓' | sed 's/^/#   /' | tail -40
  fi
done
kill "$PPID_" 2>/dev/null
wait "$PPID_" 2>/dev/null
expect_eq "no box is left running" "$(reap_boxes "$KEY")" 0
serve_stop
expect_eq "the daemon stops cleanly on SIGTERM (exit 0, no sanitizer report)" "$SERVE_RC" 0
serve_finish
