#!/bin/bash
# Who created it (docs/oauth.md, "Attribution"): a box, a background
# process, an MCP job, an upload link, an object, a link and a preview
# record `created_by` -- the user of an access token (over /v1 and over
# /mcp), `key:<key id>` for a tenant key, `s3key:<access key id>` for an
# object written over S3 -- and show it; GET /v1/sandboxes?created_by=
# and GET /v1/objects?created_by= list one creator's and refuse a
# malformed value; S3 shows no creator; a daemon killed and started
# again re-adopts the boxes and keeps every creator.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"
. "$(dirname "$0")/s3.bash"
FLOW="python3 $(cd "$(dirname "$0")" && pwd)/oauth_flow.py"
# expose_port needs a base for its URLs; nothing is fetched from it.
PV_BASE=http://127.0.0.1:9

if ! s3_start --preview-url "$PV_BASE"; then
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

# ---- objects ------------------------------------------------------------------------------
# by_creator EXPR: "key=creator ..." of a JSON listing, sorted by key ("-" for null).
by_creator() { jf '" ".join(o["key"] + "=" + (o["created_by"] or "-") for o in sorted('"$1"', key=lambda o: o["key"]))'; }
KEY=$TK api POST /v1/s3-keys
AK=$(jf 'j["access_key_id"]')
SK=$(jf 'j["secret_access_key"]')
check "an S3 key of the tenant" test "$CODE" = 201 -a -n "$AK" -a -n "$SK"
s3req PUT /docs
check "a bucket over S3" test "$CODE" = 200
s3req PUT /docs/s3.txt --data "written over S3"
check "an object PUT over S3" test "$CODE" = 200
KEY=$TK api POST "/v1/sandboxes/$BOX_A/exec" -d '{"cmd":["sh","-c","echo from-the-box > /tmp/f.txt"]}'
check "a file in alice's box" test "$CODE" = 200
KEY=$TK api POST "/v1/sandboxes/$BOX_A/store" -d '{"path":"/tmp/f.txt","bucket":"docs","key":"box-key.txt"}'
check "the key stores it (POST …/store)" test "$CODE" = 201
KEY=$AT_ALICE api POST "/v1/sandboxes/$BOX_A/store" \
  -d '{"path":"/tmp/f.txt","bucket":"docs","key":"box-alice.txt","link":true}'
check "alice stores it with her token, with a link" test "$CODE" = 201
LINK_STORE=$(jf 'j["link_id"]')
O=$($FLOW mcp "$URL" "$AT_BOB" store_file '{"content":"from bob","bucket":"docs","key":"mcp-bob.txt"}')
LINK_MCP=$(o 'o["json"]["result"]["structuredContent"]["link_id"]')
check "bob's store_file of content through /mcp" test -n "$LINK_MCP"
KEY=$AT_ALICE api POST /v1/upload-links -d '{"bucket":"docs","prefix":"up","max_files":1}'
# Its URL has --preview-url's base: the token is sent here instead.
ULURL="$URL/u/$(jf 'j["url"].rsplit("/u/", 1)[1]')"
echo "x" >"$T_SCRATCH/up.txt"
CODE=$(curl -sS -o "$T_SCRATCH/body" -w '%{http_code}' --max-time 60 -F "file=@$T_SCRATCH/up.txt" "$ULURL")
BODY=$(cat "$T_SCRATCH/body")
UP_KEY=$(jf 'j["files"][0]["key"]')
check "a file through alice's upload link (no credentials)" test "$CODE" = 201 -a "$UP_KEY" = "up/up.txt"
KEY=$TK api GET "/v1/objects?bucket=docs"
check "GET /v1/objects: each object's writer" test "$CODE $(by_creator 'j["objects"]')" = \
  "200 box-alice.txt=$U_ALICE box-key.txt=key:$KID mcp-bob.txt=$U_BOB s3.txt=s3key:$AK up/up.txt=$U_ALICE"
check "… with size, etag and last_modified" test \
  "$(jf 'all({"key","size","etag","last_modified","created_by"} <= set(o) for o in j["objects"])') $(jf 'j["next_after"]')" = "true "
KEY=$AT_ALICE api GET "/v1/objects/head?bucket=docs&key=s3.txt"
check "GET /v1/objects/head (a token): s3key:<access key id>, never the secret" test \
  "$CODE $(jf 'j["created_by"]') $(jf 'j["size"]')" = "200 s3key:$AK 15"
check "… no secret in the reply" not grep -qF "$SK" <<<"$BODY"
KEY=$TK api GET "/v1/objects/head?bucket=docs&key=up/up.txt"
check "an upload through a link is its creator's" test "$(jf 'j["created_by"]')" = "$U_ALICE"
# A new version takes its writer; a copy is its copier's.
s3req PUT /docs/box-key.txt --data "replaced over S3"
s3req PUT /docs/copy.txt -H "x-amz-copy-source: /docs/box-alice.txt"
check "a copy over S3" test "$CODE" = 200
KEY=$TK api GET "/v1/objects/head?bucket=docs&key=box-key.txt"
check "a replaced object: the new writer" test "$(jf 'j["created_by"]')" = "s3key:$AK"
KEY=$TK api GET "/v1/objects/head?bucket=docs&key=copy.txt"
check "a copied object: the copier" test "$(jf 'j["created_by"]')" = "s3key:$AK"
KEY=$TK api GET "/v1/objects/head?bucket=docs&key=nope"
check "head of a missing key: 404 no_such_key" test "$CODE $(jf 'j["error"]["code"]')" = "404 no_such_key"

# The filter.
KEY=$TK api GET "/v1/objects?bucket=docs&created_by=$U_ALICE"
check "?created_by=alice: her objects" test "$CODE $(by_creator 'j["objects"]')" = \
  "200 box-alice.txt=$U_ALICE up/up.txt=$U_ALICE"
KEY=$AT_BOB api GET "/v1/objects?bucket=docs&created_by=s3key:$AK"
check "bob's /mcp token cannot list objects at /v1 (401)" test "$CODE" = 401
KEY=$AT_ALICE api GET "/v1/objects?bucket=docs&created_by=s3key:$AK&limit=1"
check "?created_by=s3key:<id>, a page of one" test "$CODE $(by_creator 'j["objects"]') $(jf 'j["next_after"]')" = \
  "200 box-key.txt=s3key:$AK box-key.txt"
KEY=$AT_ALICE api GET "/v1/objects?bucket=docs&created_by=s3key:$AK&after=box-key.txt"
check "… and the next page" test "$CODE $(by_creator 'j["objects"]')" = "200 copy.txt=s3key:$AK s3.txt=s3key:$AK"
KEY=$TK api GET "/v1/objects?bucket=docs&created_by=key:$KID"
check "?created_by=key:<id>: none left (its object was replaced)" test "$CODE $(jf 'len(j["objects"])')" = "200 0"
KEY=$TK2 api GET "/v1/objects?bucket=docs&created_by=$U_ALICE"
check "another tenant has no such bucket" test "$CODE $(jf 'j["error"]["code"]')" = "404 no_such_bucket"
for bad in "" "alice" "u_123" "${U_ALICE^^}" "${U_ALICE}0" "key:" "key:a%20b" "key:k_1%27--" \
  "%00" "U_0123456789abcdef01234567" "s3key:" "s3key:a%20b" "S3key:$AK" "s3key:${AK}XXXXXXXXXXXX"; do
  KEY=$TK api GET "/v1/objects?bucket=docs&created_by=$bad"
  check "objects ?created_by=$bad: 400" test "$CODE $(jf 'j["error"]["code"]')" = "400 bad_request"
done
KEY=$TK api GET "/v1/objects"
check "no bucket: 400" test "$CODE" = 400
# husk's own bucket (snapshot archives, which record no writer) is no one's to list.
KEY=$TK api GET "/v1/objects?bucket=_snapshots"
check "husk's own bucket is not listed: 404" test "$CODE $(jf 'j["error"]["code"]')" = "404 no_such_bucket"
KEY=$TK api GET "/v1/objects/head?bucket=_snapshots&key=x"
check "… nor its objects' heads: 404" test "$CODE $(jf 'j["error"]["code"]')" = "404 no_such_bucket"
KEY=$TK api GET "/v1/sandboxes?created_by=s3key:$AK"
check "the sandbox filter takes the same values (no box of an S3 key)" test "$CODE $(ids)" = "200 "

# MCP's list_objects shows it (left out for nobody); S3 does not show it at all.
O=$($FLOW mcp "$URL" "$AT_BOB" list_objects '{"bucket":"docs","prefix":"mcp-"}')
check "list_objects shows the writer" test \
  "$(o '[(x["key"], x.get("created_by")) for x in o["json"]["result"]["structuredContent"]["objects"]]')" = \
  "[[\"mcp-bob.txt\", \"$U_BOB\"]]"
s3req GET "/docs?list-type=2"
check "S3 ListObjectsV2 names no creator" test "$CODE $(grep -cE 'u_[0-9a-f]{24}|key:|s3key' <<<"$BODY")" = "200 0"
s3req HEAD /docs/up/up.txt
check "S3 HeadObject names no creator (no x-amz-meta-* husk did not get)" \
  test "$CODE $(grep -ciE 'u_[0-9a-f]{24}|s3key|created|x-amz-meta' "$T_SCRATCH/s3hdr")" = "200 0"

# ---- links ---------------------------------------------------------------------------------
KEY=$AT_ALICE api POST /v1/links -d '{"bucket":"docs","key":"s3.txt"}'
LINK_A=$(jf 'j["id"]')
check "alice's link: 201 with her user id" test "$CODE $(jf 'j["created_by"]')" = "201 $U_ALICE"
KEY=$TK api POST /v1/links -d '{"bucket":"docs","key":"s3.txt"}'
LINK_K=$(jf 'j["id"]')
check "the key's link: key:<id>" test "$CODE $(jf 'j["created_by"]')" = "201 key:$KID"
O=$($FLOW mcp "$URL" "$AT_BOB" get_link '{"bucket":"docs","key":"s3.txt"}')
LINK_B=$(o 'o["json"]["result"]["structuredContent"]["link_id"]')
check "bob's get_link through /mcp" test -n "$LINK_B"
KEY=$TK api GET "/v1/links/$LINK_B"
check "GET /v1/links/{id}: bob's" test "$CODE $(jf 'j["created_by"]')" = "200 $U_BOB"
links_want() {
  python3 -c 'import json,sys; print(json.dumps(sorted([list(x.split("=")) for x in sys.argv[1:]])))' \
    "$LINK_A=$U_ALICE" "$LINK_K=key:$KID" "$LINK_B=$U_BOB" "$LINK_STORE=$U_ALICE" "$LINK_MCP=$U_BOB"
}
KEY=$TK api GET /v1/links
check "GET /v1/links shows each link's maker (those of …/store and store_file too)" test \
  "$(jf 'sorted([l["id"], l["created_by"]] for l in j["links"])')" = "$(links_want)"

# ---- previews ------------------------------------------------------------------------------
KEY=$AT_ALICE api POST "/v1/sandboxes/$BOX_A/ports/8000/previews" -d '{}'
PV_A=$(jf 'j["id"]')
check "alice's preview: 201 with her user id" test "$CODE $(jf 'j["created_by"]')" = "201 $U_ALICE"
KEY=$TK api POST "/v1/sandboxes/$BOX_A/ports/8001/previews" -d '{}'
PV_K=$(jf 'j["id"]')
check "the key's preview: key:<id>" test "$CODE $(jf 'j["created_by"]')" = "201 key:$KID"
O=$($FLOW mcp "$URL" "$AT_BOB" expose_port "{\"sandbox_id\":\"$BOX_B\",\"port\":8000}")
PV_B=$(o 'o["json"]["result"]["structuredContent"]["preview_id"]')
check "bob's expose_port: its result shows him" test \
  "$(o 'o["json"]["result"]["structuredContent"].get("created_by")')" = "$U_BOB"
KEY=$TK api GET "/v1/sandboxes/$BOX_A/previews"
check "GET …/previews shows each preview's maker" test \
  "$(jf 'sorted([p["id"], p["created_by"]] for p in j["previews"])')" = \
  "$(python3 -c 'import json,sys; print(json.dumps(sorted([list(x.split("=")) for x in sys.argv[1:]])))' "$PV_A=$U_ALICE" "$PV_K=key:$KID")"
KEY=$TK api GET "/v1/sandboxes/$BOX_B/previews/$PV_B"
check "GET …/previews/{id}: bob's" test "$CODE $(jf 'j["created_by"]')" = "200 $U_BOB"

# ---- a restart: the boxes are re-adopted with their creators -----------------------------
serve_kill9
s3_start --preview-url "$PV_BASE" || not_ok "the daemon starts again"
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
  = "$(python3 -c 'import json,sys; print(json.dumps(sorted(sys.argv[1:])))' "$U_ALICE" "$U_ALICE" "key:$KID" "$U_BOB")"
KEY=$TK api GET "/v1/objects?bucket=docs"
check "the objects keep their writers" test "$CODE $(by_creator 'j["objects"]')" = \
  "200 box-alice.txt=$U_ALICE box-key.txt=s3key:$AK copy.txt=s3key:$AK mcp-bob.txt=$U_BOB s3.txt=s3key:$AK up/up.txt=$U_ALICE"
KEY=$TK api GET "/v1/objects?bucket=docs&created_by=$U_BOB"
check "the object filter after the restart" test "$CODE $(by_creator 'j["objects"]')" = "200 mcp-bob.txt=$U_BOB"
KEY=$TK api GET /v1/links
check "the links keep their makers" test \
  "$(jf 'sorted([l["id"], l["created_by"]] for l in j["links"])')" = "$(links_want)"
KEY=$TK api GET "/v1/sandboxes/$BOX_A/previews/$PV_A"
check "the previews keep theirs" test "$CODE $(jf 'j["created_by"]')" = "200 $U_ALICE"

# ---- clean up -------------------------------------------------------------------------------
for b in "$BOX_A" "$BOX_B" "$BOX_K"; do
  KEY=$TK api DELETE "/v1/sandboxes/$b?kill=true"
done
KEY=$TK2 api DELETE "/v1/sandboxes/$BOX_O?kill=true"
check "no box of this suite is left running" test "$(reap_boxes "$TK" "$TK2")" = 0
check "the daemon's log names no token" not grep -q 'hat_' "$SERVE_LOG"
check "… nor the S3 secret" not grep -qF "$SK" "$SERVE_LOG"
serve_stop
check "graceful stop: exit 0" test "$SERVE_RC" = 0
serve_finish
