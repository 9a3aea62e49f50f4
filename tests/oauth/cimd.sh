#!/bin/bash
# Clients known by their metadata document (docs/oauth.md, "Client ID
# Metadata Documents"), end to end without a browser: an https server on
# 127.0.0.1 (tests/oauth/cimd_server.py, its certificate signed by a CA
# this suite makes with the openssl command) serves the documents at
# https://localhost:PORT/NAME; the daemon trusts that CA (--oidc-ca-file)
# and may fetch from loopback (--oauth-fetch-allow-range).  The whole flow
# with the URL as client_id (the page saying who vouches for the client,
# the code, the token, MCP tools/list with it, refresh, revocation), the
# document fetched once while cached, every refusal shown as an error page
# (never a redirect), the token endpoint's refusals, the per-address fetch
# limit, and the audit naming the URL as the client.  Then the MCP SDK
# clients (v1 and v2, tests/oauth/sdk_flow.mjs's `cimd` scenario, the
# person in headless Chromium) sign in with clientMetadataUrl.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../serve/serve.bash"
. "$(dirname "$0")/oauth.bash"
oauth_setup
FLOW="python3 $(cd "$(dirname "$0")/../serve" && pwd)/oauth_flow.py"
HERE=$(cd "$(dirname "$0")" && pwd)
DOCS="$T_SCRATCH/docs"
mkdir -p "$DOCS"

# o EXPR: a value of the last helper output ($O) -- Python on `o`.
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

# ---- a CA, a certificate for localhost, the documents' server ------------------------
CA="$T_SCRATCH/ca.pem"
if ! (cd "$T_SCRATCH" &&
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj "/CN=husk cimd test CA" -keyout ca.key -out ca.pem &&
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" \
    -keyout srv.key -out srv.csr &&
  printf 'subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n' >srv.ext &&
  openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2 \
    -extfile srv.ext -out srv.pem) >"$T_SCRATCH/openssl.log" 2>&1; then
  not_ok "a test CA and a certificate for localhost (openssl)"
  sed 's/^/#   /' "$T_SCRATCH/openssl.log"
  finish
  exit 1
fi
DOCS_PID=""
on_exit 'stop_docs; serve_cleanup'
python3 "$HERE/cimd_server.py" "$T_SCRATCH/srv.pem" "$T_SCRATCH/srv.key" "$DOCS" \
  2>"$T_SCRATCH/docs.log" &
DOCS_PID=$!
stop_docs() { kill "$DOCS_PID" 2>/dev/null; wait "$DOCS_PID" 2>/dev/null; }
if ! wait_for 10 test -s "$DOCS/port"; then
  not_ok "the documents' https server starts"
  stop_docs
  finish
  exit 1
fi
DPORT=$(head -1 "$DOCS/port")
D="https://localhost:$DPORT"
# doc NAME SPEC_JSON: what GET /NAME answers.
doc() { printf '%s\n' "$2" >"$DOCS/$1.json"; }
hits() { grep -c "^/$1\$" "$DOCS/hits" 2>/dev/null; }

CB="http://127.0.0.1:9/callback"
GOOD='{"status":200,"headers":{"Content-Type":"application/json","Cache-Control":"max-age=600"},
 "body":{"client_id":"@URL@","client_name":"CIMD Test App","redirect_uris":["'$CB'"],
 "token_endpoint_auth_method":"none","grant_types":["authorization_code","refresh_token"],
 "response_types":["code"],"client_uri":"https://app.example","logo_uri":"https://app.example/l.png"}}'
doc client "$GOOD"
# The SDK's callback is http://127.0.0.1:<any port>/callback (RFC 8252).
doc sdk '{"body":{"client_id":"@URL@","client_name":"husk SDK by its document",
 "redirect_uris":["http://127.0.0.1/callback"],"token_endpoint_auth_method":"none"}}'
doc other "$GOOD"
doc mismatch '{"body":{"client_id":"https://localhost/elsewhere","redirect_uris":["'$CB'"]}}'
doc badredir '{"body":{"client_id":"@URL@","redirect_uris":["http://evil.example/cb"]}}'
doc secret '{"body":{"client_id":"@URL@","redirect_uris":["'$CB'"],"token_endpoint_auth_method":"client_secret_post"}}'
doc pkjwt '{"body":{"client_id":"@URL@","redirect_uris":["'$CB'"],"token_endpoint_auth_method":"private_key_jwt"}}'
doc notjson '{"headers":{"Content-Type":"text/html"},"body":"<html>not a document</html>"}'
doc big "{\"body\":\"$(head -c 70000 /dev/zero | tr '\0' ' ')\"}"
doc moved '{"status":302,"headers":{"Location":"/client"},"body":""}'
doc gone '{"status":500,"body":"oops"}'

TTL=5
if ! serve_start --s3-listen off --oauth-access-ttl "$TTL" --oidc-ca-file "$CA" --oauth-fetch-allow-range 127.0.0.1/32 \
  --oauth-fetch-allow-range ::1/128; then
  not_ok "the daemon starts"
  stop_docs
  serve_finish
  exit 1
fi
ORG=cimd-org
new_tenant "$ORG" || not_ok "a tenant"
KEY=$TKEY api POST /v1/users -d "{\"name\":\"ada\",\"role\":\"member\",\"password\":\"$PASSWORD\",\"display_name\":\"Ada\"}"
expect_code "a member, ada" 201
ADA=$(jf 'j["id"]')

# ---- the metadata ----------------------------------------------------------------------
api GET /.well-known/oauth-authorization-server
expect_code "authorization server metadata: 200" 200
expect_eq "it says client_id_metadata_document_supported" \
  "$(jf 'j.get("client_id_metadata_document_supported")')" true

# ---- the page ---------------------------------------------------------------------------
CID="$D/client"
O=$($FLOW pkce)
CH=$(o 'o["challenge"]')
q() { # CLIENT_ID: the query of an authorization request
  python3 -c 'import json,sys; print(json.dumps({"response_type":"code","client_id":sys.argv[1],
"redirect_uri":sys.argv[2],"code_challenge":sys.argv[3],"code_challenge_method":"S256"}))' \
    "$1" "$CB" "$CH"
}
O=$($FLOW page "$URL" "$(q "$CID")")
expect_eq "GET /oauth/authorize with the document's URL as client_id: 200" "$(o 'o["status"]')" 200
check "the page says localhost says it is CIMD Test App" \
  grep -q '<strong>localhost</strong> says it is <strong>CIMD Test App</strong>' <<<"$(o 'o["body"]')"
expect_eq "the document was fetched once" "$(hits client)" 1

# ---- the flow ---------------------------------------------------------------------------
O=$($FLOW signin "$URL" "$CID" "$CB" "$ORG" ada "$PASSWORD")
expect_eq "sign-in: 302 to the document's redirect URI" "$(o 'o["status"]')" 302
check "... with a code" [ -n "$(o 'o.get("code")')" ]
expect_eq "... and the issuer" "$(o 'o.get("iss")')" "$URL"
expect_eq "... state passed back" "$(o 'o.get("state_ok")')" true
AUTH_CODE=$(o 'o["code"]')
VER=$(o 'o["verifier"]')
O=$($FLOW token "$URL" "$(python3 -c 'import json,sys; print(json.dumps({"grant_type":"authorization_code",
"code":sys.argv[1],"redirect_uri":sys.argv[2],"code_verifier":sys.argv[3],"client_id":sys.argv[4]}))' \
  "$AUTH_CODE" "$CB" "$VER" "$CID")")
expect_eq "POST /oauth/token with the URL as client_id: 200" "$(o 'o["status"]')" 200
AT=$(o 'o["json"]["access_token"]')
RT=$(o 'o["json"]["refresh_token"]')
check "... an access and a refresh token" test -n "$AT" -a -n "$RT"
expect_eq "the document was still fetched only once (cached)" "$(hits client)" 1

O=$($FLOW rpc "$URL" "$AT" tools/list '{}')
expect_eq "MCP tools/list with the token: 200" "$(o 'o["status"]')" 200
check "... lists the tools" [ "$(o 'len(o["json"]["result"]["tools"]) > 5')" = true ]

tokform() { # GRANT-SPECIFIC JSON merged with client_id
  python3 -c 'import json,sys; d=json.loads(sys.argv[1]); d["client_id"]=sys.argv[2]; print(json.dumps(d))' "$1" "$2"
}
O=$($FLOW token "$URL" "$(tokform "{\"grant_type\":\"refresh_token\",\"refresh_token\":\"$RT\"}" "$D/other")")
expect_eq "refresh with another client's URL: 400 invalid_grant" "$(o 'o["status"]') $(o 'o["json"]["error"]')" "400 invalid_grant"
O=$($FLOW token "$URL" "$(tokform "{\"grant_type\":\"refresh_token\",\"refresh_token\":\"$RT\"}" "$CID")")
expect_eq "refresh with the URL as client_id: 200" "$(o 'o["status"]')" 200
AT2=$(o 'o["json"]["access_token"]')
RT2=$(o 'o["json"]["refresh_token"]')
O=$($FLOW rpc "$URL" "$AT2" tools/list '{}')
expect_eq "the refreshed token works" "$(o 'o["status"]')" 200
O=$($FLOW token "$URL" "$(tokform "{\"grant_type\":\"refresh_token\",\"refresh_token\":\"$RT2\",\"client_secret\":\"hcs_x\"}" "$CID")")
expect_eq "a secret sent with a document's client: 401 invalid_client" "$(o 'o["status"]') $(o 'o["json"]["error"]')" "401 invalid_client"
O=$($FLOW revoke "$URL" "$(tokform "{\"token\":\"$RT2\"}" "$CID")")
expect_eq "revoke with the URL as client_id: 200" "$(o 'o["status"]')" 200
O=$($FLOW rpc "$URL" "$AT2" tools/list '{}')
expect_eq "the revoked sign-in's access token: 401" "$(o 'o["status"]')" 401

# ---- refusals: an error page, never a redirect ---------------------------------------------
refused() { # DESC CLIENT_ID TEXT [STATUS]
  O=$($FLOW page "$URL" "$(q "$2")")
  local st loc
  st=$(o 'o["status"]')
  loc=$(o 'o["headers"].get("location")')
  if [ "$st" = "${4:-400}" ] && [ -z "$loc" ] && grep -qiF -- "$3" <<<"$(o 'o["body"]')"; then
    ok "$1: ${4:-400} page naming it, no redirect"
  else
    not_ok "$1: got $st location '$loc': $(o 'o["body"]' | grep -io 'class="error"[^<]*' | head -1)"
  fi
}
refused "document whose client_id is another URL" "$D/mismatch" "client_id is not the URL"
refused "document with an http redirect URI to a non-loopback host" "$D/badredir" "redirect"
refused "document naming a secret (client_secret_post)" "$D/secret" "cannot carry"
refused "document with private_key_jwt" "$D/pkjwt" "private_key_jwt"
refused "document that is not JSON" "$D/notjson" "not a JSON object"
refused "document larger than 64 KiB" "$D/big" "larger than 64 KiB"
refused "document behind a redirect (3xx)" "$D/moved" "redirect"
refused "document whose server fails (500)" "$D/gone" "HTTP 500"
refused "document that is not there (404)" "$D/nothing" "HTTP 404"
refused "http:// client_id" "http://localhost:$DPORT/client" "not registered"
refused "IP literal host" "https://127.0.0.1:$DPORT/client" "not an IP address"
refused "userinfo" "https://ada@localhost:$DPORT/client" "user name or password"
refused "fragment" "$D/client#x" "fragment"
refused "dot segments" "$D/x/../client" ". or .."
refused "path /" "https://localhost:$DPORT/" "path other than /"
refused "a URL of 513 bytes" "$D/$(head -c 600 /dev/zero | tr '\0' a | head -c $((513 - ${#D} - 1)))" "at most 512 bytes"
expect_eq "the redirecting document's target was never fetched through it" "$(hits client)" 1

# At the token endpoint, a document that cannot be used is invalid_client.
O=$($FLOW token "$URL" "$(tokform '{"grant_type":"refresh_token","refresh_token":"hrt_x"}' "$D/mismatch")")
expect_eq "token endpoint, a bad document: 401 invalid_client" "$(o 'o["status"]') $(o 'o["json"]["error"]')" "401 invalid_client"

# ---- the per-address limit: 20 fetches in 15 minutes, cache hits free ----------------------
# One token comes back every 45 s: a slow run (ASan) may see a 21st pass.
n=0 first429="" t0=$SECONDS
for i in $(seq 1 30); do
  O=$(HUSK_SRC=127.0.0.9 $FLOW page "$URL" "$(q "$D/missing-$i")")
  st=$(o 'o["status"]')
  if [ "$st" = 429 ]; then first429=$i; break; fi
  [ "$st" = 400 ] && n=$((n + 1))
done
# The refusals above fetched from 127.0.0.1, not from this address.
limited() {
  [ -n "$first429" ] && [ "$n" = $((first429 - 1)) ] && [ "$n" -ge 20 ] &&
    [ "$n" -le $((20 + (SECONDS - t0) / 45)) ]
}
check "20 fetches from one address, each a 400 page (no document), then 429 (got $n, then ${first429:-none} after $((SECONDS - t0)) s)" limited
check "... and what got 429 was not fetched" [ "$(hits "missing-${first429:-0}")" = 0 ]
O=$(HUSK_SRC=127.0.0.9 $FLOW page "$URL" "$(q "$CID")")
expect_eq "a cached document from that address still: 200" "$(o 'o["status"]')" 200
O=$(HUSK_SRC=127.0.0.10 $FLOW page "$URL" "$(q "$D/missing-${first429:-0}")")
expect_eq "another address may fetch: 400 (no such document)" "$(o 'o["status"]')" 400

# ---- slow document servers cannot hold every fetch slot -------------------------------
# A document server that answers after 4 s holds a fetch slot that long
# (the daemon has 8, for every sign-in).  One address gets one fetch at a
# time (the others are 429 at once), so a person's sign-in with a
# document not yet cached still works; and documents never take more than
# 6 slots, whoever asks (the rest are the other sign-in fetches').
doc slow "$(python3 -c 'import json,sys; d=json.loads(sys.argv[1]); d["delay"]=4; print(json.dumps(d))' "$GOOD")"
doc fresh "$GOOD"
statuses() { # PREFIX N: the statuses of $T_SCRATCH/PREFIX-1..N.out, sorted
  for i in $(seq 1 "$2"); do
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["status"])' "$T_SCRATCH/$1-$i.out"
  done | sort | uniq -c | awk '{printf "%s%sx%s", sep, $1, $2; sep=" "}'
}
wait_bg() { local p; for p in "$@"; do wait "$p" 2>/dev/null; done; }
pids=()
for i in $(seq 1 8); do
  HUSK_SRC=127.0.0.20 $FLOW page "$URL" "$(q "$D/slow?$i")" >"$T_SCRATCH/slow-$i.out" &
  pids+=($!)
done
sleep 1.5
O=$(HUSK_SRC=127.0.0.21 $FLOW page "$URL" "$(q "$D/fresh")")
expect_eq "8 slow fetches at once from one address, then another address's uncached document: 200" \
  "$(o 'o["status"]')" 200
wait_bg "${pids[@]}"
# The one made is refused after 4 s: the document names the URL without ?N.
expect_eq "... of the 8, one was fetched (400 after 4 s) and 7 were 429 at once" "$(statuses slow 8)" "1x400 7x429"
pids=()
for i in $(seq 1 8); do
  HUSK_SRC=127.0.0.$((30 + i)) $FLOW page "$URL" "$(q "$D/slow?x$i")" >"$T_SCRATCH/slowx-$i.out" &
  pids+=($!)
done
wait_bg "${pids[@]}"
expect_eq "8 slow fetches at once from 8 addresses: 6 made, 2 are 503" "$(statuses slowx 8)" "6x400 2x503"

# ---- the audit names the URL --------------------------------------------------------------
KEY=$TKEY api GET "/v1/audit?limit=1000"
expect_code "the tenant's audit" 200
check "oauth.sign_in ok and oauth.token name the URL as client_id and the document's name" python3 -c '
import json, sys
recs = json.loads(sys.argv[1])["records"]
cid = sys.argv[2]
si = [r for r in recs if r["action"] == "oauth.sign_in" and r["outcome"] == "ok"]
tk = [r for r in recs if r["action"] == "oauth.token" and r["outcome"] == "ok"]
assert si and all(r.get("client_id") == cid and r.get("client") == "CIMD Test App" for r in si), si
assert len(tk) == 2 and all(r.get("client_id") == cid for r in tk), tk
assert all(r.get("user_id") == sys.argv[3] for r in si + tk), si + tk
' "$BODY" "$CID" "$ADA"
check "tools/list made with the token is attributed to ada through the URL client" python3 -c '
import json, sys
recs = json.loads(sys.argv[1])["records"]
mine = [r for r in recs if r.get("client_id") == sys.argv[2] and not r["action"].startswith("oauth.")]
assert all(r.get("user_id") == sys.argv[3] for r in mine), mine
' "$BODY" "$CID" "$ADA"
check "no token or code in the audit or the daemon's log" python3 -c '
import sys
text = open(sys.argv[1], errors="replace").read() + sys.argv[2]
for s in sys.argv[3:]:
    assert s and s not in text, "a secret leaked (%d bytes)" % len(s)
' "$SERVE_LOG" "$BODY" "$AT" "$RT" "$AT2" "$RT2" "$AUTH_CODE"

# ---- the MCP SDK with clientMetadataUrl ------------------------------------------------------
for sdk in ${SDKS:-v1 v2}; do
  drive "cimd-$sdk" SDK="$sdk" SCENARIOS=cimd MEMBER=ada ACCESS_TTL="$TTL" CIMD_URL="$D/sdk" \
    CIMD_NAME="husk SDK by its document"
done
KEY=$TKEY api GET "/v1/audit?user=$ADA&limit=1000"
check "the SDK's sign-ins are audited with the document's URL as client_id" python3 -c '
import json, sys
recs = json.loads(sys.argv[1])["records"]
si = [r for r in recs if r["action"] == "oauth.sign_in" and r.get("client_id") == sys.argv[2]]
assert len(si) == int(sys.argv[3]), recs
assert all(r.get("client") == "husk SDK by its document" for r in si), si
' "$BODY" "$D/sdk" "$(wc -w <<<"${SDKS:-v1 v2}")"
check "no Chromium of this suite is left running" wait_for 10 no_chromium

stop_docs
serve_stop
expect_eq "the daemon stops cleanly" "$SERVE_RC" 0
serve_finish
