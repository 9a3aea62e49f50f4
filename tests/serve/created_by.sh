#!/bin/bash
# Who created it (docs/oauth.md, "Attribution"): a box, a background
# process, an MCP job and an upload link record `created_by` -- the user
# of an access token (over /v1 and over /mcp), or `key:<key id>` for a
# tenant key -- and show it; GET /v1/sandboxes?created_by= lists one
# creator's boxes and refuses a malformed value; a daemon killed and
# started again re-adopts the boxes with their creators.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"
FLOW="python3 $(cd "$(dirname "$0")" && pwd)/oauth_flow.py"

if ! serve_start --s3-listen off; then
  not_ok "the daemon starts"
  serve_finish
  exit 1
fi
new_tenant acme || not_ok "tenant acme"
T1=$TID
TK=$TKEY
KEY=$ADMIN api GET "/v1/tenants/$T1/keys"
KID=$(jf 'j["keys"][0]["id"]')
check "the tenant key's id" grep -qE '^k_[0-9a-f]{24}$' <<<"$KID"
new_tenant other || not_ok "tenant other"
TK2=$TKEY

# o EXPR: a value of the last flow output ($O) -- Python on `o`.
o() {
  python3 -c '
import json, sys
o = json.loads(sys.argv[1])
try:
    v = eval(sys.argv[2])
except Exception as e:
    v = None
print("" if v is None else "true" if v is True else "false" if v is False else
      json.dumps(v) if isinstance(v, (dict, list)) else v)' "$O" "$1"
}
user() { # NAME PASSWORD: sets UID_
  KEY=$TK api POST /v1/users -d "{\"name\":\"$1\",\"role\":\"member\",\"password\":\"$2\"}"
  UID_=$(jf 'j["id"]')
}
PW_ALICE="alice-pass-$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')"
PW_BOB="bob-pass-$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')"
user alice "$PW_ALICE"; U_ALICE=$UID_
user bob "$PW_BOB"; U_BOB=$UID_
check "two users" test -n "$U_ALICE" -a -n "$U_BOB" -a "$U_ALICE" != "$U_BOB"
RED="http://127.0.0.1:9/cb"
KEY="" api POST /oauth/register -H 'Content-Type: application/json' \
  -d "{\"client_name\":\"created-by\",\"redirect_uris\":[\"$RED\"]}"
CID=$(jf 'j["client_id"]')
signin() { # USER PASSWORD [RESOURCE]: AT
  O=$($FLOW signin "$URL" "$CID" "$RED" acme "$1" "$2" "" "${3:-}")
  local c v
  c=$(o 'o["code"]'); v=$(o 'o["verifier"]')
  O=$($FLOW token "$URL" "{\"grant_type\":\"authorization_code\",\"code\":\"$c\",\"redirect_uri\":\"$RED\",\"client_id\":\"$CID\",\"code_verifier\":\"$v\"}")
  AT=$(o 'o["json"]["access_token"]')
  [ -n "$AT" ]
}
signin alice "$PW_ALICE" "$URL/v1" || not_ok "alice signs in for /v1"
AT_ALICE=$AT
signin bob "$PW_BOB" || not_ok "bob signs in for /mcp"
AT_BOB=$AT

# ---- boxes ----------------------------------------------------------------------
KEY=$TK new_box '{"timeout":300}' || not_ok "a box made with the key"
BOX_K=$BOX
check "a key's box: created_by key:<key id> in the create reply" test "$(jf 'j["created_by"]')" = "key:$KID"
KEY=$TK api GET "/v1/sandboxes/$BOX_K"
check "… and in GET" test "$(jf 'j["created_by"]')" = "key:$KID"

KEY=$AT_ALICE new_box '{"timeout":300}' || not_ok "alice makes a box with her /v1 token"
BOX_A=$BOX
check "alice's box (a /v1 token): created_by is her user id" test "$(jf 'j["created_by"]')" = "$U_ALICE"
KEY=$TK api GET "/v1/sandboxes/$BOX_A"
check "… as the tenant key sees it" test "$(jf 'j["created_by"]')" = "$U_ALICE"

O=$($FLOW mcp "$URL" "$AT_BOB" sandbox_create '{"ttl_seconds":300}')
BOX_B=$(o 'o["json"]["result"]["structuredContent"]["sandbox_id"]')
[ -n "$BOX_B" ] && echo "$BOX_B $TK" >>"$T_SCRATCH/boxes"
check "bob's box through /mcp sandbox_create" test -n "$BOX_B"
check "… its result shows created_by" test "$(o 'o["json"]["result"]["structuredContent"].get("created_by")')" = "$U_BOB"
KEY=$TK api GET "/v1/sandboxes/$BOX_B"
check "… and GET /v1 shows bob's user id" test "$(jf 'j["created_by"]')" = "$U_BOB"
O=$($FLOW mcp "$URL" "$AT_BOB" sandbox_list '{}')
check "sandbox_list shows each box's creator" test \
  "$(o 'sorted((b["sandbox_id"], b.get("created_by")) for b in o["json"]["result"]["structuredContent"]["sandboxes"])')" \
  = "$(python3 -c 'import json,sys; print(json.dumps(sorted([list(x.split("=")) for x in sys.argv[1:]])))' \
    "$BOX_K=key:$KID" "$BOX_A=$U_ALICE" "$BOX_B=$U_BOB")"

KEY=$TK2 new_box '{"timeout":300}' || not_ok "a box of the other tenant"
BOX_O=$BOX

# ---- the list filter --------------------------------------------------------------------
ids() { jf '" ".join(sorted(b["id"] for b in j["sandboxes"]))'; }
KEY=$TK api GET "/v1/sandboxes?created_by=$U_ALICE"
check "?created_by=alice: only her box" test "$CODE $(ids)" = "200 $BOX_A"
KEY=$TK api GET "/v1/sandboxes?created_by=$U_BOB&state=running"
check "?created_by=bob (with a state): only his" test "$CODE $(ids)" = "200 $BOX_B"
KEY=$TK api GET "/v1/sandboxes?created_by=key:$KID"
check "?created_by=key:<id>: only the key's" test "$CODE $(ids)" = "200 $BOX_K"
KEY=$AT_ALICE api GET "/v1/sandboxes?created_by=$U_BOB"
check "alice's token may list bob's boxes of the tenant" test "$CODE $(ids)" = "200 $BOX_B"
KEY=$TK2 api GET "/v1/sandboxes?created_by=$U_ALICE"
check "another tenant sees none of alice's" test "$CODE $(ids)" = "200 "
KEY=$TK api GET "/v1/sandboxes?created_by=u_000000000000000000000000"
check "an unknown user: an empty list" test "$CODE $(ids)" = "200 "
for bad in "" "alice" "u_123" "${U_ALICE^^}" "${U_ALICE}0" "key:" "key:a%20b" "key:k_1%27--" \
  "%00" "U_0123456789abcdef01234567"; do
  KEY=$TK api GET "/v1/sandboxes?created_by=$bad"
  check "?created_by=$bad: 400" test "$CODE $(jf 'j["error"]["code"]')" = "400 bad_request"
done

# ---- background processes and MCP jobs --------------------------------------------------
KEY=$AT_ALICE api POST "/v1/sandboxes/$BOX_A/exec" -d '{"cmd":["sleep","600"],"background":true}'
PID_A=$(jf 'j["pid"]')
check "alice's background process: 201 with her user id" test "$CODE $(jf 'j["created_by"]')" = "201 $U_ALICE"
KEY=$TK api POST "/v1/sandboxes/$BOX_A/exec" -d '{"cmd":["true"],"background":true}'
PID_K=$(jf 'j["pid"]')
check "the key's, in her box: key:<id>" test "$CODE $(jf 'j["created_by"]')" = "201 key:$KID"
KEY=$TK api GET "/v1/sandboxes/$BOX_A/processes"
check "the process list shows who started each" test \
  "$(jf 'sorted((p["pid"], p["created_by"]) for p in j["processes"])')" \
  = "$(python3 -c 'import json,sys; print(json.dumps(sorted([[int(sys.argv[1]), sys.argv[2]], [int(sys.argv[3]), sys.argv[4]]])))' \
    "$PID_A" "$U_ALICE" "$PID_K" "key:$KID")"
KEY=$TK api GET "/v1/sandboxes/$BOX_A/processes/$PID_A"
check "… and GET of one" test "$(jf 'j["created_by"]')" = "$U_ALICE"
KEY=$TK api POST "/v1/sandboxes/$BOX_A/exec" -d '{"cmd":["true"]}'
check "a sync exec's reply is unchanged (no created_by)" test "$CODE $(jf '"created_by" in j')" = "200 false"

O=$($FLOW mcp "$URL" "$AT_BOB" sandbox_exec "{\"sandbox_id\":\"$BOX_B\",\"command\":\"echo job-out\"}")
JOB=$(o 'o["json"]["result"]["structuredContent"]["job_id"]')
check "bob's sandbox_exec is a job" grep -qE '^j_' <<<"$JOB"
check "… its result shows bob as its creator" test "$(o 'o["json"]["result"]["structuredContent"].get("created_by")')" = "$U_BOB"
O=$($FLOW mcp "$URL" "$AT_BOB" job_status "{\"job_id\":\"$JOB\"}")
check "job_status shows it too" test "$(o 'o["json"]["result"]["structuredContent"].get("created_by")')" = "$U_BOB"
KEY=$TK api GET "/v1/sandboxes/$BOX_B/processes"
check "the job's process shows bob in the process list" test "$(jf '[p["created_by"] for p in j["processes"]]')" = "[\"$U_BOB\"]"

# ---- upload links -----------------------------------------------------------------------
KEY=$AT_ALICE api POST /v1/upload-links -d '{"max_files":1}'
UL_A=$(jf 'j["id"]')
check "alice's upload link: 201 with her user id" test "$CODE $(jf 'j["created_by"]')" = "201 $U_ALICE"
KEY=$TK api POST /v1/upload-links -d '{"max_files":1}'
UL_K=$(jf 'j["id"]')
check "the key's upload link: key:<id>" test "$CODE $(jf 'j["created_by"]')" = "201 key:$KID"
O=$($FLOW mcp "$URL" "$AT_BOB" create_upload_link '{"max_files":1}')
UL_B=$(o 'o["json"]["result"]["structuredContent"]["id"]')
check "bob's upload link through /mcp" grep -q '^ul_' <<<"$UL_B"
KEY=$TK api GET /v1/upload-links
check "GET /v1/upload-links shows each link's creator" test \
  "$(jf 'sorted((l["id"], l["created_by"]) for l in j["upload_links"])')" \
  = "$(python3 -c 'import json,sys; print(json.dumps(sorted([list(x.split("=")) for x in sys.argv[1:]])))' \
    "$UL_A=$U_ALICE" "$UL_K=key:$KID" "$UL_B=$U_BOB")"

# ---- a restart: the boxes are re-adopted with their creators -----------------------------
serve_kill9
serve_start --s3-listen off || not_ok "the daemon starts again"
check "it is healthy" healthy
KEY=$TK api GET "/v1/sandboxes/$BOX_A"
check "alice's box is running again, still hers" test "$(jf 'j["state"]') $(jf 'j["created_by"]')" = "running $U_ALICE"
KEY=$TK api GET "/v1/sandboxes/$BOX_B"
check "bob's, still his" test "$(jf 'j["state"]') $(jf 'j["created_by"]')" = "running $U_BOB"
KEY=$TK api GET "/v1/sandboxes/$BOX_K"
check "the key's, still the key's" test "$(jf 'j["created_by"]')" = "key:$KID"
KEY=$TK api GET "/v1/sandboxes?created_by=$U_ALICE&state=running"
check "the filter after the restart" test "$CODE $(ids)" = "200 $BOX_A"
KEY=$TK api GET "/v1/sandboxes/$BOX_A/processes/$PID_A"
check "alice's background process keeps her user id" test "$(jf 'j["created_by"]')" = "$U_ALICE"
# A token is for its resource, whose URL has the new port now: sign in again.
signin bob "$PW_BOB" || not_ok "bob signs in again"
AT_BOB=$AT
O=$($FLOW mcp "$URL" "$AT_BOB" job_status "{\"job_id\":\"$JOB\"}")
check "bob's job keeps his" test "$(o 'o["json"]["result"]["structuredContent"].get("created_by")')" = "$U_BOB"
KEY=$TK api GET /v1/upload-links
check "the links keep theirs" test "$(jf 'sorted(l["created_by"] for l in j["upload_links"])')" \
  = "$(python3 -c 'import json,sys; print(json.dumps(sorted(sys.argv[1:])))' "$U_ALICE" "key:$KID" "$U_BOB")"

# ---- clean up -------------------------------------------------------------------------------
for b in "$BOX_A" "$BOX_B" "$BOX_K"; do
  KEY=$TK api DELETE "/v1/sandboxes/$b?kill=true"
done
KEY=$TK2 api DELETE "/v1/sandboxes/$BOX_O?kill=true"
check "no box of this suite is left running" test "$(reap_boxes "$TK" "$TK2")" = 0
check "the daemon's log names no token" not grep -q 'hat_' "$SERVE_LOG"
serve_stop
check "graceful stop: exit 0" test "$SERVE_RC" = 0
serve_finish
