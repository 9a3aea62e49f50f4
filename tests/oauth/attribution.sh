#!/bin/bash
# Who did it (docs/oauth.md, Attribution): two people of one tenant each
# sign in with the MCP SDK (tests/oauth/sdk_flow.mjs, their own session
# and client, through husk's page in headless Chromium) and create a box;
# the tenant's audit, filtered by person (GET /v1/audit?user=), lists each
# one's sandbox_create under that person's id and name and the client
# they signed in with, and the boxes record who created them
# (GET /v1/sandboxes?created_by=).  Every address is 127.0.0.1.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../serve/serve.bash"
. "$(dirname "$0")/oauth.bash"

oauth_setup
if ! serve_start --s3-listen off --oauth-access-ttl 3; then
  not_ok "the daemon starts"
  serve_finish
  exit 1
fi
ORG=oauth-people
new_tenant "$ORG" || not_ok "a tenant"
oauth_user ALICE alice member
oauth_user BOB bob member "Bob Builder"

drive people SDK="${SDK:-v1}" SCENARIOS=attribution MEMBER=alice USER2=bob ACCESS_TTL=3
A_BOX=$(res people 'j.get("member_box")') B_BOX=$(res people 'j.get("user2_box")')
for b in $A_BOX $B_BOX; do echo "$b $TKEY" >>"$T_SCRATCH/boxes"; done

KEY=$TKEY
# audit_of NAME USER_ID SHOWN BOX CLIENT_ID CLIENT_NAME: the person's audit.
audit_of() {
  api GET "/v1/audit?user=$2&limit=1000"
  expect_code "GET /v1/audit?user=<$1> with the tenant key" 200
  check "$1: exactly one sandbox_create, under $1's id and name ($3) and the client signed in with" python3 -c '
import json, sys
uid, shown, box, cid, cname = sys.argv[2:7]
recs = json.loads(sys.argv[1])["records"]
cr = [r for r in recs if r["action"] == "mcp.sandbox_create"]
assert len(cr) == 1, recs
r = cr[0]
assert r["outcome"] == "ok", r
assert r.get("user_id") == uid, r
assert r.get("user") == shown, r
assert r.get("client_id") == cid, r
assert r.get("client") == cname, r
assert r["box_id"] in ("", box), r
' "$BODY" "$2" "$3" "$4" "$5" "$6"
  check "$1: every record of the filtered audit is $1's" python3 -c '
import json, sys
recs = json.loads(sys.argv[1])["records"]
assert recs and all(r.get("user_id") == sys.argv[2] for r in recs), recs
' "$BODY" "$2"
}
audit_of alice "$ALICE" alice "$A_BOX" "$(res people 'j.get("member_client")')" "$(res people 'j.get("member_client_name")')"
audit_of bob "$BOB" "Bob Builder" "$B_BOX" "$(res people 'j.get("user2_client")')" "$(res people 'j.get("user2_client_name")')"
check "the two people signed in through two clients" [ "$(res people 'j.get("member_client")')" != "$(res people 'j.get("user2_client")')" ]

# The boxes know who created them; the tenant key's own box says key:<id>.
new_box || not_ok "a box made with the tenant key"
K_BOX=$BOX
api GET "/v1/sandboxes?created_by=$ALICE"
check "GET /v1/sandboxes?created_by=<alice>: her box only" python3 -c '
import json, sys
ids = [b["id"] for b in json.loads(sys.argv[1])["sandboxes"]]
assert ids == [sys.argv[2]], ids
' "$BODY" "$A_BOX"
api GET "/v1/sandboxes?created_by=$BOB"
check "GET /v1/sandboxes?created_by=<bob>: his box only" python3 -c '
import json, sys
ids = [b["id"] for b in json.loads(sys.argv[1])["sandboxes"]]
assert ids == [sys.argv[2]], ids
' "$BODY" "$B_BOX"
api GET "/v1/sandboxes/$A_BOX"
expect_eq "alice's box: created_by is her id" "$(jf 'j.get("created_by")')" "$ALICE"
api GET "/v1/sandboxes/$K_BOX"
check "the tenant key's box: created_by key:<key id>" python3 -c '
import json, sys
assert json.loads(sys.argv[1]).get("created_by", "").startswith("key:k_"), sys.argv[1][:300]
' "$BODY"

# ---- nothing left ---------------------------------------------------------------------
for b in $A_BOX $B_BOX $K_BOX; do
  api DELETE "/v1/sandboxes/$b"
  expect_code "delete $b" 200
done
expect_eq "no box is left running" "$(reap_boxes "$TKEY")" 0
check "no Chromium of this suite is left running" wait_for 10 no_chromium
serve_stop
expect_eq "the daemon stops cleanly" "$SERVE_RC" 0
serve_finish
