#!/bin/bash
# Signing a person in with OAuth 2.1 (docs/oauth.md) through the official
# MCP TypeScript SDK clients -- v1 (@modelcontextprotocol/sdk) and v2
# (@modelcontextprotocol/client), as tests/mcp pins them -- with the
# person in Debian's Chromium (headless, playwright-core, as tests/browser
# pins it) on husk's own sign-in page: tests/oauth/sdk_flow.mjs does
# discovery from the 401, registration, PKCE, the consent page (its
# screenshot), the token, tools/list and tools/call, a refresh once the
# 3-second access token expired, revocation; Deny; a viewer refused a
# `sandbox` tool with 403 insufficient_scope.  Here: the daemon, the
# tenant and its users, and what the driver cannot see (the audit).
# Every address anything is sent to is 127.0.0.1.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../serve/serve.bash"
. "$(dirname "$0")/oauth.bash"

oauth_setup
TTL=3
if ! serve_start --s3-listen off --oauth-access-ttl "$TTL"; then
  not_ok "the daemon starts with --oauth-access-ttl $TTL"
  serve_finish
  exit 1
fi
ORG=oauth-flow
new_tenant "$ORG" || not_ok "a tenant"
oauth_user ALICE alice member
oauth_user VERA vera viewer

for sdk in ${SDKS:-v1 v2}; do
  drive "$sdk" SDK="$sdk" SCENARIOS="flow deny viewer" MEMBER=alice VIEWER=vera ACCESS_TTL="$TTL"
  for png in "$T_SCRATCH/$sdk-consent.png"; do
    check "[$sdk] the consent page's screenshot is a PNG file" \
      bash -c "head -c 8 '$png' 2>/dev/null | od -An -tx1 | grep -q '89 50 4e 47 0d 0a 1a 0a'"
  done
done

# ---- what the daemon recorded ---------------------------------------------------------
KEY=$TKEY
api GET "/v1/audit?user=$ALICE&limit=1000"
expect_code "GET /v1/audit?user=<alice> with the tenant key" 200
check "alice's tool calls are audited under her id and name, with the OAuth client" python3 -c '
import json, sys
recs = json.loads(sys.argv[1])["records"]
calls = [r for r in recs if r["action"] in ("mcp.run_code", "mcp.sandbox_create")]
assert calls, [r["action"] for r in recs]
for r in calls:
    assert r.get("user_id") == sys.argv[2], r
    assert r.get("user") == "alice", r
    assert (r.get("client_id") or "").startswith("oc_"), r
    assert (r.get("client") or "").startswith("husk OAuth test"), r
' "$BODY" "$ALICE"
api GET "/v1/audit?user=$VERA&limit=1000"
check "vera's sandbox_list is audited under her id; her refused sandbox_create is not recorded as done" python3 -c '
import json, sys
recs = json.loads(sys.argv[1])["records"]
assert any(r["action"] == "mcp.sandbox_list" and r["outcome"] == "ok" for r in recs), [r["action"] for r in recs]
assert all(r.get("user_id") == sys.argv[2] for r in recs), recs
assert not any(r["action"] == "mcp.sandbox_create" and r["outcome"] == "ok" for r in recs), recs
' "$BODY" "$VERA"
# The sign-in events (the whole log: registration has no tenant).
KEY=$ADMIN
oauth_events() { # ACTION: the records of that action in $BODY
  api GET "/v1/audit?action=$1&limit=1000"
}
oauth_events oauth.register
NSDK=$(wc -w <<<"${SDKS:-v1 v2}")
check "oauth.register is audited for each registration ($((3 * NSDK)) clients)" python3 -c '
import json, sys
recs = json.loads(sys.argv[1])["records"]
assert len(recs) >= int(sys.argv[2]), len(recs)
' "$BODY" $((3 * NSDK))
oauth_events oauth.sign_in
# One ok sign-in per Allow (flow, viewer) per SDK.
check "oauth.sign_in ok is audited for each sign-in ($((2 * NSDK)))" python3 -c '
import json, sys
recs = json.loads(sys.argv[1])["records"]
assert sum(r["outcome"] == "ok" for r in recs) >= int(sys.argv[2]), recs
' "$BODY" $((2 * NSDK))
echo "# oauth.sign_in records: $(jf '[(r["outcome"], r["status"], r.get("user_id"), r["detail"][:60]) for r in j["records"]]')"
oauth_events oauth.token
check "oauth.token is audited (codes exchanged, refreshes)" python3 -c '
import json, sys
recs = json.loads(sys.argv[1])["records"]
assert sum(r["outcome"] == "ok" for r in recs) >= int(sys.argv[2]), recs
' "$BODY" $((3 * NSDK))
oauth_events oauth.revoke
check "oauth.revoke is audited" [ "$(jf 'len(j["records"])')" -ge "$NSDK" ]
api GET "/v1/audit?limit=1000"
check "no token, code or password reaches the audit" python3 -c '
import sys
assert not any(x in sys.argv[1] for x in ("hat_", "hrt_", "hac_", "correct horse")), sys.argv[1][:300]
' "$BODY"
KEY=$TKEY

# ---- nothing left ---------------------------------------------------------------------
for sdk in ${SDKS:-v1 v2}; do
  for b in $(res "$sdk" '" ".join(v for k, v in j.items() if k.endswith("_box"))'); do
    echo "$b $TKEY" >>"$T_SCRATCH/boxes"
  done
done
expect_eq "no box is left running (the drivers destroyed theirs)" "$(reap_boxes "$TKEY")" 0
check "no Chromium of this suite is left running" wait_for 10 no_chromium
serve_stop
expect_eq "the daemon stops cleanly" "$SERVE_RC" 0
serve_finish
