#!/bin/bash
# MCP Inspector's CLI signs a person in to husk serve with OAuth
# (tests/oauth/inspector.mjs): with MCP_AUTO_OPEN_ENABLED=true it runs its
# interactive flow without a terminal, printing the authorization URL and
# waiting at its loopback callback; headless Chromium signs in on husk's
# page and allows.  Then a second run with --stored-auth-only, past the
# 3-second access token: the stored refresh token serves.  The Inspector's
# store (HOME) is this suite's scratch directory.  Every address is
# 127.0.0.1.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../serve/serve.bash"
. "$(dirname "$0")/oauth.bash"

oauth_setup
TTL=3
if ! serve_start --s3-listen off --oauth-access-ttl "$TTL"; then
  not_ok "the daemon starts"
  serve_finish
  exit 1
fi
ORG=oauth-inspector
new_tenant "$ORG" || not_ok "a tenant"
oauth_user ALICE alice member
mkdir -p "$T_SCRATCH/home"

(cd "$OAUTH_DIR" && env HOME="$T_SCRATCH/home" TMPDIR="$T_SCRATCH" URL="$URL" ORG="$ORG" \
  PASSWORD="$PASSWORD" MEMBER=alice ACCESS_TTL="$TTL" CHROMIUM="$CHROMIUM" MCPDIR="$MCPDIR" \
  BROWSER_DIR="$BROWSER_DIR" timeout 200 "$NODE" inspector.mjs) >"$T_SCRATCH/insp.out" 2>"$T_SCRATCH/insp.err"
rc=$?
cat "$T_SCRATCH/insp.out"
if [ "$rc" -ne 0 ] && ! grep -q '^not ok' "$T_SCRATCH/insp.out"; then
  not_ok "the driver failed (exit $rc)"
  tail -20 "$T_SCRATCH/insp.err" | sed 's/^/#   /'
fi

KEY=$TKEY
api GET "/v1/audit?user=$ALICE&action=mcp.run_code"
check "the Inspector's run_code is audited under alice" python3 -c '
import json, sys
recs = json.loads(sys.argv[1])["records"]
assert len(recs) == 1 and recs[0]["user_id"] == sys.argv[2] and recs[0]["client_id"].startswith("oc_"), recs
' "$BODY" "$ALICE"
expect_eq "no box is left running" "$(reap_boxes "$TKEY")" 0
check "no Chromium of this suite is left running" wait_for 10 no_chromium
serve_stop
expect_eq "the daemon stops cleanly" "$SERVE_RC" 0
serve_finish
