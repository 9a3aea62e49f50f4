#!/bin/bash
# Users and OAuth 2.1 over HTTP (docs/oauth.md), without a browser: the
# metadata documents, client registration and its refusals, the whole code
# flow (the page, its cookie and hidden fields, the form, the redirect, the
# code exchanged with a PKCE verifier), and what must fail: a wrong
# verifier, a code used twice (its tokens die), redirect URIs that do not
# match (no redirect at all), plain PKCE, a token of the other resource, an
# expired or revoked token, refresh rotation and reuse, scope escalation,
# forged forms (CSRF), open-redirect tricks, password guessing (the user is
# locked; the page says the same for an unknown user), a disabled user's
# live token, a viewer's token on a tool that changes things (403
# insufficient_scope), attribution of two users' MCP calls in the audit;
# no password, code or token in the audit or the daemon's log; tenant keys
# work as before.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"
FLOW="python3 $(cd "$(dirname "$0")" && pwd)/oauth_flow.py"

if ! serve_start --s3-listen off; then
  not_ok "the daemon starts"
  serve_finish
  exit 1
fi
new_tenant acme || not_ok "tenant acme"
TK=$TKEY
T1=$TID
new_tenant other || not_ok "tenant other"
TK2=$TKEY
SECRETS="$T_SCRATCH/secrets"
: >"$SECRETS"
secret() { [ -n "$1" ] && printf '%s\n' "$1" >>"$SECRETS"; }

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
# user NAME ROLE PASSWORD: a user of acme made with its key; sets UID_.
PW_ALICE="alice-pass-$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')"
PW_BOB="bob-password-$(head -c 6 /dev/urandom | od -An -tx1 | tr -d ' \n')"
PW_VERA="vera-password-123"
PW_CAROL="carol-password-xyz"
PW_DAVE="dave-password-456"
for p in "$PW_ALICE" "$PW_BOB" "$PW_VERA" "$PW_CAROL" "$PW_DAVE"; do secret "$p"; done
user() {
  KEY=$TK api POST /v1/users -d "{\"name\":\"$1\",\"role\":\"$2\",\"password\":\"$3\",\"display_name\":\"${4:-}\"}"
  UID_=$(jf 'j["id"]')
}

# ---- metadata ------------------------------------------------------------------
api GET /.well-known/oauth-authorization-server
expect_code "authorization server metadata: 200" 200
check "its issuer is the Host's base" test "$(jf 'j["issuer"]')" = "$URL"
check "it names the endpoints" test "$(jf 'j["token_endpoint"]+" "+j["authorization_endpoint"]+" "+j["registration_endpoint"]+" "+j["revocation_endpoint"]')" \
  = "$URL/oauth/token $URL/oauth/authorize $URL/oauth/register $URL/oauth/revoke"
check "S256 only" test "$(jf 'j["code_challenge_methods_supported"]')" = '["S256"]'
check "iss in the response" test "$(jf 'j["authorization_response_iss_parameter_supported"]')" = true
check "client auth methods" test "$(jf '" ".join(j["token_endpoint_auth_methods_supported"])')" \
  = "none client_secret_post client_secret_basic"
api GET /.well-known/oauth-protected-resource/mcp
expect_code "protected resource metadata of /mcp: 200" 200
check "its resource is <issuer>/mcp" test "$(jf 'j["resource"]')" = "$URL/mcp"
check "its authorization server is the issuer" test "$(jf 'j["authorization_servers"]')" = "[\"$URL\"]"
check "bearer in the header only" test "$(jf 'j["bearer_methods_supported"]')" = '["header"]'
api GET /.well-known/oauth-protected-resource
check "protected resource metadata of the API: <issuer>/v1" test "$(jf 'j["resource"]')" = "$URL/v1"
api GET /.well-known/oauth-protected-resource/v1
check "and at …/v1" test "$(jf 'j["resource"]')" = "$URL/v1"
for doc in oauth-authorization-server oauth-protected-resource/mcp; do
  curl -sS -D "$T_SCRATCH/h" -o /dev/null "$URL/.well-known/$doc"
  check "$doc: not cached, and varies with the Host it names" \
    test "$(grep -ci '^Cache-Control: no-store' "$T_SCRATCH/h") $(grep -ci '^Vary: Host' "$T_SCRATCH/h")" = "1 1"
done

# ---- /mcp without credentials: where to sign in --------------------------------------
curl -sS -D "$T_SCRATCH/h" -o /dev/null -X POST -H 'Content-Type: application/json' \
  -d '{"jsonrpc":"2.0","id":1,"method":"tools/list"}' "$URL/mcp"
check "/mcp without credentials: 401" grep -q '^HTTP/1.1 401' "$T_SCRATCH/h"
check "… with resource_metadata and scope" grep -qi "^WWW-Authenticate: Bearer resource_metadata=\"$URL/.well-known/oauth-protected-resource/mcp\", scope=\"sandbox sandbox:read storage:read storage:write\"" "$T_SCRATCH/h"
curl -sS -D "$T_SCRATCH/h" -o /dev/null "$URL/v1/sandboxes"
check "/v1 without credentials: resource_metadata of /v1" grep -qi "^WWW-Authenticate: Bearer resource_metadata=\"$URL/.well-known/oauth-protected-resource/v1\"" "$T_SCRATCH/h"

# ---- users -------------------------------------------------------------------------
user alice admin "$PW_ALICE" "Alice Admin"
expect_code "a tenant key creates a user: 201" 201
U_ALICE=$UID_
check "its id is u_…" grep -qE '^u_[0-9a-f]{24}$' <<<"$U_ALICE"
check "the reply says a password is set, not what" test "$(jf 'j["password"]')" = true
check "… and never the password" not grep -q "$PW_ALICE" <<<"$BODY"
user bob member "$PW_BOB" "Bob Builder"; U_BOB=$UID_
user vera viewer "$PW_VERA"; U_VERA=$UID_
user carol member "$PW_CAROL"; U_CAROL=$UID_
user dave member "$PW_DAVE" "Dave D"; U_DAVE=$UID_
user alice member "$PW_ALICE"
expect_code "a taken name: 409" 409
KEY=$TK api POST /v1/users -d '{"name":"eve","role":"member","password":"short"}'
expect_code "a short password: 400" 400
KEY=$TK api POST /v1/users -d '{"name":"eve","role":"root"}'
expect_code "an unknown role: 400" 400
KEY=$TK api GET /v1/users
check "GET /v1/users lists the five" test "$(jf 'len(j["users"])')" = 5
KEY=$TK2 api GET "/v1/users/$U_BOB"
expect_code "another tenant's user: 404" 404
KEY=$ADMIN api GET "/v1/tenants/$T1/users"
check "the admin key lists a tenant's users" test "$(jf 'len(j["users"])')" = 5
KEY=$ADMIN api GET /v1/users
expect_code "the admin key at /v1/users: 403 (a tenant route)" 403

# ---- registration -------------------------------------------------------------------
RED="http://127.0.0.1:9/cb"
reg() { KEY="" api POST /oauth/register -H 'Content-Type: application/json' -d "$1"; }
reg "{\"client_name\":\"Test <Client>\",\"redirect_uris\":[\"$RED\"]}"
expect_code "registration of a public client: 201" 201
CID=$(jf 'j["client_id"]')
check "its id is oc_…" grep -qE '^oc_[0-9a-f]{24}$' <<<"$CID"
check "no secret for a public client" test -z "$(jf 'j.get("client_secret")')"
reg '{"redirect_uris":["http://example.com/cb"]}'
check "http to a non-loopback host: 400 invalid_redirect_uri" test "$CODE $(jf 'j["error"]')" = "400 invalid_redirect_uri"
reg '{"redirect_uris":["https://example.com/cb#frag"]}'
check "a fragment: 400" test "$CODE" = 400
reg '{"redirect_uris":["https://user:pw@example.com/cb"]}'
check "userinfo: 400" test "$CODE" = 400
reg '{"redirect_uris":["https://example.com/it'"'"'s"]}'
check "a quote /oauth/authorize would refuse: refused at registration, 400 invalid_redirect_uri" \
  test "$CODE $(jf 'j["error"]')" = "400 invalid_redirect_uri"
reg '{"client_name":"Good App\u202e","redirect_uris":["https://example.com/cb"]}'
check "a bidi override in client_name: 400 invalid_client_metadata" \
  test "$CODE $(jf 'j["error"]')" = "400 invalid_client_metadata"
reg '{"client_name":"x"}'
check "no redirect_uris: 400 invalid_redirect_uri" test "$CODE $(jf 'j["error"]')" = "400 invalid_redirect_uri"
reg '{"redirect_uris":["https://example.com/cb"],"grant_types":["client_credentials"]}'
check "an unsupported grant type: 400 invalid_client_metadata" test "$CODE $(jf 'j["error"]')" = "400 invalid_client_metadata"
reg "{\"client_name\":\"Secret app\",\"redirect_uris\":[\"https://app.example/cb\"],\"token_endpoint_auth_method\":\"client_secret_basic\"}"
expect_code "a confidential client: 201" 201
CCID=$(jf 'j["client_id"]')
CSECRET=$(jf 'j["client_secret"]')
secret "$CSECRET"
check "its secret is returned once" grep -q '^hcs_' <<<"$CSECRET"

# ---- the code flow --------------------------------------------------------------------
O=$($FLOW page "$URL" "{\"response_type\":\"code\",\"client_id\":\"$CID\",\"redirect_uri\":\"$RED\",\"code_challenge\":\"$(printf %043d 0 | tr 0 A)\",\"code_challenge_method\":\"S256\",\"state\":\"s1\"}")
check "the sign-in page: 200" test "$(o 'o["status"]')" = 200
check "it is HTML" grep -q 'text/html' <<<"$(o 'o["headers"]["content-type"]')"
CSP=$(o 'o["headers"]["content-security-policy"]')
check "CSP: no script, style from self, form to self and the redirect origin" \
  grep -q "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self' http://127.0.0.1:9; frame-ancestors 'none'" <<<"$CSP"
check "X-Frame-Options: DENY" test "$(o 'o["headers"]["x-frame-options"]')" = DENY
check "Referrer-Policy: no-referrer" test "$(o 'o["headers"]["referrer-policy"]')" = no-referrer
check "Cache-Control: no-store" test "$(o 'o["headers"]["cache-control"]')" = no-store
check "the cookie is HttpOnly, SameSite=Strict" grep -q 'husk_oauth=[0-9a-f]\{64\}; Path=/; HttpOnly; SameSite=Strict' <<<"$(o 'o["headers"]["set-cookie"]')"
check "the page names the client, escaped" grep -q 'Test &lt;Client&gt;' <<<"$(o 'o["body"]')"
check "… the redirect host" grep -q '127.0.0.1:9' <<<"$(o 'o["body"]')"
check "… and the scopes asked" grep -q 'storage:write' <<<"$(o 'o["body"]')"
check "no script on the page" not grep -qi '<script' <<<"$(o 'o["body"]')"
check "the form carries a CSRF token: when it was made and an HMAC" grep -qE '^[0-9a-f]{76}$' <<<"$(o 'o["fields"]["csrf"]')"
api GET /oauth/style.css
check "the stylesheet is served as CSS" test "$CODE" = 200

O=$($FLOW signin "$URL" "$CID" "$RED" acme bob "$PW_BOB")
check "Allow: 302 to the client" test "$(o 'o["status"]')" = 302
LOC=$(o 'o["location"]')
check "the redirect goes to the registered URI" grep -q "^$RED?code=hac_" <<<"$LOC"
check "… with state as sent" test "$(o 'o["state_ok"]')" = true
check "… and iss" test "$(o 'o["iss"]')" = "$URL"
CODE1=$(o 'o["code"]'); VER1=$(o 'o["verifier"]'); secret "$CODE1"; secret "$VER1"
O=$($FLOW token "$URL" "{\"grant_type\":\"authorization_code\",\"code\":\"$CODE1\",\"redirect_uri\":\"$RED\",\"client_id\":\"$CID\",\"code_verifier\":\"x$VER1\"}")
check "a wrong verifier: 400 invalid_grant" test "$(o 'o["status"]') $(o 'o["json"]["error"]')" = "400 invalid_grant"
O=$($FLOW signin "$URL" "$CID" "$RED" acme bob "$PW_BOB")
CODE2=$(o 'o["code"]'); VER2=$(o 'o["verifier"]'); secret "$CODE2"
O=$($FLOW token "$URL" "{\"grant_type\":\"authorization_code\",\"code\":\"$CODE2\",\"redirect_uri\":\"$RED\",\"client_id\":\"$CID\",\"code_verifier\":\"$VER2\",\"resource\":\"$URL/v1\"}")
check "the code for another resource: 400 invalid_target" test "$(o 'o["status"]') $(o 'o["json"]["error"]')" = "400 invalid_target"
O=$($FLOW token "$URL" "{\"grant_type\":\"authorization_code\",\"code\":\"$CODE2\",\"redirect_uri\":\"$RED\",\"client_id\":\"$CID\",\"code_verifier\":\"$VER2\"}")
check "the code for tokens: 200" test "$(o 'o["status"]')" = 200
check "… Bearer, hat_ and hrt_" test "$(o 'o["json"]["token_type"]+" "+o["json"]["access_token"][:4]+" "+o["json"]["refresh_token"][:4]')" = "Bearer hat_ hrt_"
check "… Cache-Control: no-store" test "$(o 'o["headers"]["cache-control"]')" = no-store
check "… a member gets the default scopes" test "$(o 'o["json"]["scope"]')" = "sandbox sandbox:read storage:read storage:write"
AT_BOB=$(o 'o["json"]["access_token"]'); RT_BOB=$(o 'o["json"]["refresh_token"]')
secret "$AT_BOB"; secret "$RT_BOB"
O=$($FLOW mcp "$URL" "$AT_BOB" sandbox_list '{}')
check "bob's token at /mcp: sandbox_list works" test "$(o 'o["status"]') $(o 'o["json"]["result"].get("isError", False)')" = "200 false"
O=$($FLOW token "$URL" "{\"grant_type\":\"authorization_code\",\"code\":\"$CODE2\",\"redirect_uri\":\"$RED\",\"client_id\":\"$CID\",\"code_verifier\":\"$VER2\"}")
check "the code again: 400 invalid_grant" test "$(o 'o["status"]') $(o 'o["json"]["error"]')" = "400 invalid_grant"
O=$($FLOW mcp "$URL" "$AT_BOB" sandbox_list '{}')
check "… and the tokens of its first use die" test "$(o 'o["status"]')" = 401
check "… 401 says invalid_token" grep -q 'error="invalid_token"' <<<"$(o 'o["headers"]["www-authenticate"]')"

# A fresh sign-in of bob for what follows.
signin_tokens() { # USER PASSWORD [SCOPE] [RESOURCE] [CLIENT] [REDIRECT]: AT, RT
  O=$($FLOW signin "$URL" "${5:-$CID}" "${6:-$RED}" acme "$1" "$2" "${3:-}" "${4:-}")
  local c v
  c=$(o 'o["code"]'); v=$(o 'o["verifier"]'); secret "$c"
  O=$($FLOW token "$URL" "{\"grant_type\":\"authorization_code\",\"code\":\"$c\",\"redirect_uri\":\"${6:-$RED}\",\"client_id\":\"${5:-$CID}\",\"code_verifier\":\"$v\"}")
  AT=$(o 'o["json"]["access_token"]'); RT=$(o 'o["json"]["refresh_token"]')
  secret "$AT"; secret "$RT"
  [ -n "$AT" ]
}

# ---- redirect URIs ---------------------------------------------------------------------
O=$($FLOW signin "$URL" "$CID" "http://127.0.0.1:9/cb/extra" acme bob "$PW_BOB")
check "a redirect_uri with an extra path: an error page, no redirect" \
  test "$(o 'o["status"]') $(o 'o["location"]')" = "400 "
O=$($FLOW signin "$URL" "$CID" "https://evil.example/cb" acme bob "$PW_BOB")
check "an unregistered redirect_uri: an error page, no redirect" test "$(o 'o["status"]') $(o 'o["location"]')" = "400 "
O=$($FLOW signin "$URL" "$CID" "http://127.0.0.1:9@evil.example/cb" acme bob "$PW_BOB")
check "userinfo trick: no redirect" test "$(o 'o["status"]') $(o 'o["location"]')" = "400 "
O=$($FLOW signin "$URL" "$CID" "http://127.0.0.1:9/cb?next=https://evil.example" acme bob "$PW_BOB")
check "an extra query: no redirect" test "$(o 'o["status"]') $(o 'o["location"]')" = "400 "
O=$($FLOW signin "$URL" "oc_000000000000000000000000" "$RED" acme bob "$PW_BOB")
check "an unknown client: an error page, no redirect" test "$(o 'o["status"]') $(o 'o["location"]')" = "400 "
O=$($FLOW signin "$URL" "$CID" "http://127.0.0.1:4444/cb" acme bob "$PW_BOB")
check "a loopback redirect on another port is accepted (RFC 8252)" grep -q '^http://127.0.0.1:4444/cb?code=' <<<"$(o 'o["location"]')"
C3=$(o 'o["code"]'); V3=$(o 'o["verifier"]'); secret "$C3"
O=$($FLOW token "$URL" "{\"grant_type\":\"authorization_code\",\"code\":\"$C3\",\"redirect_uri\":\"$RED\",\"client_id\":\"$CID\",\"code_verifier\":\"$V3\"}")
check "another redirect_uri at the token endpoint: invalid_grant" test "$(o 'o["json"]["error"]')" = invalid_grant
# Errors found before the person did anything: an error page, never a
# redirect (anyone can register a client: no open redirector, RFC 9700
# 4.11.2).
CH=$(printf %043d 0 | tr 0 A)
az_q() { # RESPONSE_TYPE CHALLENGE METHOD [EXTRA JSON]
  printf '{"response_type":"%s","client_id":"%s","redirect_uri":"%s","code_challenge":"%s","code_challenge_method":"%s","state":"s"%s}' \
    "$1" "$CID" "$RED" "$2" "$3" "${4:-}"
}
for c in "plain PKCE|$(az_q code abc plain)" \
  "no code_challenge|$(az_q code "" S256)" \
  "response_type=token (unsupported_response_type)|$(az_q token "$CH" S256)" \
  "an unknown scope (invalid_scope)|$(az_q code "$CH" S256 ',"scope":"sandbox root"')" \
  "a foreign resource (invalid_target)|$(az_q code "$CH" S256 ',"resource":"https://evil.example/mcp"')"; do
  O=$($FLOW page "$URL" "${c#*|}")
  check "${c%%|*}: an error page, no redirect" test "$(o 'o["status"]') $(o 'o["headers"].get("location")')" = "400 "
done
check "… which says what is wrong" grep -q 'resource that is not this server' <<<"$(o 'o["body"]')"
O=$($FLOW signin "$URL" "$CID" "$RED" acme bob "$PW_BOB" "" "" deny)
check "Deny: access_denied back to the client" test "$(o 'o["error"]') $(o 'o["state_ok"]')" = "access_denied true"
KEY=$ADMIN api GET "/v1/audit?action=oauth.consent"
check "Deny is audited (oauth.consent denied, naming the client)" \
  test "$(jf '[r["outcome"] for r in j["records"] if r.get("client_id") == "'"$CID"'"]')" = '["denied"]'

# ---- CSRF ---------------------------------------------------------------------------
O=$($FLOW page "$URL" "{\"response_type\":\"code\",\"client_id\":\"$CID\",\"redirect_uri\":\"$RED\",\"code_challenge\":\"$(printf %043d 0 | tr 0 A)\",\"code_challenge_method\":\"S256\",\"state\":\"s1\"}")
F=$(o 'o["fields"]'); CK=$(o 'o["cookie"]')
FF=$(python3 -c 'import json,sys; f=json.loads(sys.argv[1]); f.update(organization="acme",username="bob",password=sys.argv[2],action="allow"); print(json.dumps(f))' "$F" "$PW_BOB")
O=$($FLOW post "$URL" "$FF")
check "the form without its cookie: 403" test "$(o 'o["status"]') $(o 'o["headers"].get("location")')" = "403 "
O=$($FLOW post "$URL" "$FF" "husk_oauth=$(printf %064d 0)")
check "the form with another cookie: 403" test "$(o 'o["status"]')" = 403
FX=$(python3 -c 'import json,sys; f=json.loads(sys.argv[1]); f["state"]="changed"; print(json.dumps(f))' "$FF")
O=$($FLOW post "$URL" "$FX" "$CK")
check "a changed parameter: 403" test "$(o 'o["status"]')" = 403
FX=$(python3 -c 'import json,sys; f=json.loads(sys.argv[1]); del f["csrf"]; print(json.dumps(f))' "$FF")
O=$($FLOW post "$URL" "$FX" "$CK")
check "no CSRF token: 403" test "$(o 'o["status"]')" = 403
O=$($FLOW post "$URL" "$FF" "$CK")
check "the untouched form with its cookie: 302" test "$(o 'o["status"]')" = 302
secret "$(python3 -c 'import json,sys,urllib.parse as u; print((u.parse_qs(u.urlsplit(json.loads(sys.argv[1])["headers"]["location"]).query).get("code") or [""])[0])' "$O")"
KEY=$ADMIN api GET "/v1/audit?action=oauth.csrf"
check "forged forms are audited (oauth.csrf)" test "$(jf 'len(j["records"])')" -ge 4
check "… naming the registered client" test "$(jf 'sorted(set(r.get("client_id") for r in j["records"]))')" = "[\"$CID\"]"
# A client_id the sender chose is not recorded as one: an unknown one (with
# a newline), or a prefix of a real one.
FX=$(python3 -c 'import json,sys; f=json.loads(sys.argv[1]); f["client_id"]=sys.argv[2]; print(json.dumps(f))' "$FF" "$(printf 'oc_evil\nX')")
O=$($FLOW post "$URL" "$FX" "$CK")
FX=$(python3 -c 'import json,sys; f=json.loads(sys.argv[1]); f["client_id"]=sys.argv[2][:-3]; print(json.dumps(f))' "$FF" "$CID")
O=$($FLOW post "$URL" "$FX" "$CK")
KEY=$ADMIN api GET "/v1/audit?action=oauth.csrf"
check "a forged form's unregistered client_id: recorded as \"\", a hint in detail" \
  test "$(jf '[(r.get("client_id") or "", "unregistered client_id oc_evil?X" in r["detail"]) for r in j["records"] if "oc_evil" in r.get("detail", "")]')" = '[["", true]]'
check "… a prefix of a real one is not taken for it" \
  test "$(jf 'len([r for r in j["records"] if not r.get("client_id") and "'"${CID:0:20}"'" in r.get("detail", "")])')" = 1
# Forged forms from one address: past 30 a minute they are counted, not
# each written; the next record says how many were left out.
N0=$(jf 'len(j["records"])')
HUSK_SRC=127.0.0.3 $FLOW posts "$URL" "$FF" 45 >/dev/null
KEY=$ADMIN api GET "/v1/audit?action=oauth.csrf&limit=1000"
N1=$(jf 'len(j["records"])')
check "45 forged forms from one address: about 30 audit records, not 45" test $((N1 - N0)) -ge 20 -a $((N1 - N0)) -le 34
HUSK_SRC=127.0.0.4 $FLOW post "$URL" "$FF" >/dev/null
KEY=$ADMIN api GET "/v1/audit?action=oauth.csrf&limit=1000"
check "… and the next record (another address) counts those left out" \
  grep -qE 'and [0-9]+ more unauthenticated OAuth events' <<<"$(jf '[r.get("detail") for r in j["records"]]')"
curl -sS -o /dev/null -w '%{http_code}' -X POST -H 'Content-Type: application/x-www-form-urlencoded' \
  --data-binary @<(head -c 20000 /dev/zero | tr '\0' a) "$URL/oauth/token" >"$T_SCRATCH/c"
check "a form body past 16 KiB: 413" test "$(cat "$T_SCRATCH/c")" = 413
# Malformed forms: the error names the parameter (a copy: the form's memory
# is freed by then), at each form endpoint.
for ep in /oauth/token /oauth/revoke; do
  O=$($FLOW raw "$URL" POST $ep 'x=1&abc=%4')
  check "$ep, a bad escape in a value: 400 naming the parameter" \
    test "$(o 'o["status"]') $(o 'o["json"]["error_description"]')" = "400 a malformed value of form parameter \`abc\`"
  O=$($FLOW raw "$URL" POST $ep 'a=1&a=1')
  check "$ep, a repeated parameter: 400 naming it" \
    test "$(o 'o["status"]') $(o 'o["json"]["error_description"]')" = "400 form parameter \`a\` is repeated"
  O=$($FLOW raw "$URL" POST $ep 'a=%')
  check "$ep, a lone %: 400" test "$(o 'o["status"]')" = 400
done
for b in 'x=1&abc=%4' 'a=1&a=1' 'a=%'; do
  O=$($FLOW raw "$URL" POST /oauth/authorize "$b")
  check "POST /oauth/authorize, a malformed form ($b): an error page" test "$(o 'o["status"]')" = 400
done

# ---- resources and tokens -----------------------------------------------------------
signin_tokens bob "$PW_BOB" "" "$URL/v1" || not_ok "bob signs in for /v1"
AT_V1=$AT
O=$($FLOW mcp "$URL" "$AT_V1" sandbox_list '{}')
check "a /v1 token at /mcp: 401" test "$(o 'o["status"]')" = 401
KEY=$AT_V1 api GET /v1/sandboxes
expect_code "the /v1 token at /v1/sandboxes: 200" 200
KEY=$AT_V1 api GET /v1/secrets
check "a token at a keys-only route: 403" test "$CODE $(jf 'j["error"]["message"]')" = "403 this route needs a tenant key: a signed-in person's token cannot use it"
KEY=$AT_V1 api POST /v1/s3-keys
expect_code "a token cannot mint an S3 key: 403" 403
KEY="" api GET "/v1/sandboxes?access_token=$AT_V1"
expect_code "a token in the query string: 400" 400
signin_tokens bob "$PW_BOB" || not_ok "bob signs in for /mcp"
AT_MCP=$AT; RT1=$RT
KEY=$AT_MCP api GET /v1/sandboxes
expect_code "a /mcp token at /v1: 401" 401
# Revocation
O=$($FLOW revoke "$URL" "{\"token\":\"$AT_V1\",\"client_id\":\"$CID\"}")
check "revoke: 200" test "$(o 'o["status"]')" = 200
KEY=$AT_V1 api GET /v1/sandboxes
expect_code "a revoked token: 401" 401
O=$($FLOW revoke "$URL" "{\"token\":\"hat_nothing\",\"client_id\":\"$CID\"}")
check "revoking an unknown token: 200 too" test "$(o 'o["status"]')" = 200
# Refresh: rotation and reuse
O=$($FLOW token "$URL" "{\"grant_type\":\"refresh_token\",\"refresh_token\":\"$RT1\",\"client_id\":\"$CID\"}")
AT2=$(o 'o["json"]["access_token"]'); RT2=$(o 'o["json"]["refresh_token"]'); secret "$AT2"; secret "$RT2"
check "refresh: 200 and a new refresh token" test "$(o 'o["status"]')" = 200 -a -n "$RT2" -a "$RT2" != "$RT1"
O=$($FLOW mcp "$URL" "$AT2" sandbox_list '{}')
check "the refreshed access token works" test "$(o 'o["status"]')" = 200
O=$($FLOW token "$URL" "{\"grant_type\":\"refresh_token\",\"refresh_token\":\"$RT1\",\"client_id\":\"$CID\"}")
check "the old refresh token again: invalid_grant" test "$(o 'o["json"]["error"]')" = invalid_grant
O=$($FLOW token "$URL" "{\"grant_type\":\"refresh_token\",\"refresh_token\":\"$RT2\",\"client_id\":\"$CID\"}")
check "… reuse revoked the family: the new refresh token is dead" test "$(o 'o["json"]["error"]')" = invalid_grant
O=$($FLOW mcp "$URL" "$AT2" sandbox_list '{}')
check "… and its access token" test "$(o 'o["status"]')" = 401
KEY=$ADMIN api GET "/v1/audit?action=oauth.reuse"
check "reuse is audited" test "$(jf 'len(j["records"])')" -ge 1
# Scope escalation
signin_tokens vera "$PW_VERA" || not_ok "vera signs in"
check "a viewer is granted sandbox:read storage:read" test "$(o 'o["json"]["scope"]')" = "sandbox:read storage:read"
AT_VERA=$AT; RT_VERA=$RT
O=$($FLOW token "$URL" "{\"grant_type\":\"refresh_token\",\"refresh_token\":\"$RT_VERA\",\"client_id\":\"$CID\",\"scope\":\"sandbox sandbox:read\"}")
check "refresh asking more scope: invalid_scope" test "$(o 'o["status"]') $(o 'o["json"]["error"]')" = "400 invalid_scope"
O=$($FLOW mcp "$URL" "$AT_VERA" sandbox_list '{}')
check "a viewer's token lists sandboxes" test "$(o 'o["status"]') $(o 'o["json"]["result"].get("isError", False)')" = "200 false"
O=$($FLOW mcp "$URL" "$AT_VERA" sandbox_create '{}')
check "a viewer's token cannot create one: 403" test "$(o 'o["status"]')" = 403
check "… WWW-Authenticate: insufficient_scope, scope=\"sandbox\"" \
  grep -q "^Bearer error=\"insufficient_scope\", scope=\"sandbox\", resource_metadata=\"$URL/.well-known/oauth-protected-resource/mcp\"" <<<"$(o 'o["headers"]["www-authenticate"]')"
# Tools that read one side and write the other need both scopes, as their
# REST routes do.
signin_tokens bob "$PW_BOB" "storage:write" || not_ok "bob signs in with storage:write only"
O=$($FLOW mcp "$URL" "$AT" store_file '{"sandbox_id":"b_000000000000000000000000","path":"/workspace/x"}')
check "store_file with storage:write only: 403, needs sandbox:read storage:write" \
  test "$(o 'o["status"]') $(o 'o["headers"]["www-authenticate"].split("scope=")[1].split(",")[0]')" = '403 "sandbox:read storage:write"'
O=$($FLOW mcp "$URL" "$AT" store_file '{"content":"aGk=","encoding":"base64","key":"scope-test/hi.txt"}')
check "… but store_file of content (no sandbox read) with storage:write: allowed" test "$(o 'o["status"]')" = 200
signin_tokens bob "$PW_BOB" "sandbox" || not_ok "bob signs in with sandbox only"
O=$($FLOW mcp "$URL" "$AT" load_file '{"sandbox_id":"b_000000000000000000000000","bucket":"files","key":"k","path":"/workspace/x"}')
check "load_file with sandbox only: 403, needs sandbox storage:read" \
  test "$(o 'o["status"]') $(o 'o["headers"]["www-authenticate"].split("scope=")[1].split(",")[0]')" = '403 "sandbox storage:read"'
O=$($FLOW signin "$URL" "$CID" "$RED" acme vera "$PW_VERA" "users")
check "a viewer asking only for users: invalid_scope back to the client" test "$(o 'o["error"]')" = invalid_scope
# Confidential client: Basic and post
O=$($FLOW signin "$URL" "$CCID" "https://app.example/cb" acme bob "$PW_BOB")
CC=$(o 'o["code"]'); CV=$(o 'o["verifier"]'); secret "$CC"
O=$($FLOW token "$URL" "{\"grant_type\":\"authorization_code\",\"code\":\"$CC\",\"redirect_uri\":\"https://app.example/cb\",\"client_id\":\"$CCID\",\"code_verifier\":\"$CV\"}")
check "a confidential client without its secret: 401 invalid_client" test "$(o 'o["status"]') $(o 'o["json"]["error"]')" = "401 invalid_client"
O=$($FLOW token "$URL" "{\"grant_type\":\"authorization_code\",\"code\":\"$CC\",\"redirect_uri\":\"https://app.example/cb\",\"code_verifier\":\"$CV\"}" "$CCID:wrong")
check "a wrong Basic secret: 401 with WWW-Authenticate: Basic" test "$(o 'o["status"]') $(o 'o["headers"]["www-authenticate"][:5]')" = "401 Basic"
O=$($FLOW token "$URL" "{\"grant_type\":\"authorization_code\",\"code\":\"$CC\",\"redirect_uri\":\"https://app.example/cb\",\"code_verifier\":\"$CV\"}" "$CCID:$CSECRET")
check "the right Basic secret: 200" test "$(o 'o["status"]')" = 200
secret "$(o 'o["json"]["access_token"]')"; secret "$(o 'o["json"]["refresh_token"]')"
O=$($FLOW token "$URL" '{"grant_type":"password","username":"x"}')
check "another grant type: unsupported_grant_type" test "$(o 'o["json"]["error"]')" = unsupported_grant_type

# ---- two people, one tenant: attribution ------------------------------------------------
signin_tokens alice "$PW_ALICE" || not_ok "alice signs in"
check "an admin is granted the default scopes" test "$(o 'o["json"]["scope"]')" = "sandbox sandbox:read storage:read storage:write"
AT_ALICE=$AT
signin_tokens dave "$PW_DAVE" || not_ok "dave signs in"
AT_DAVE=$AT
O=$($FLOW mcp "$URL" "$AT_ALICE" sandbox_create '{"ttl_seconds":300}')
BOX_A=$(o 'o["json"]["result"]["structuredContent"]["sandbox_id"]')
[ -n "$BOX_A" ] && echo "$BOX_A $TK" >>"$T_SCRATCH/boxes"
check "alice creates a box through /mcp" test -n "$BOX_A"
O=$($FLOW mcp "$URL" "$AT_DAVE" sandbox_create '{"ttl_seconds":300}')
BOX_D=$(o 'o["json"]["result"]["structuredContent"]["sandbox_id"]')
[ -n "$BOX_D" ] && echo "$BOX_D $TK" >>"$T_SCRATCH/boxes"
check "dave creates a box through /mcp" test -n "$BOX_D"
KEY=$TK api GET "/v1/audit?user=$U_ALICE&action=mcp.sandbox_create"
check "the audit names alice for her box" test "$(jf '[(r["box_id"], r["user_id"], r["user"], r["client_id"], r["client"]) for r in j["records"]]')" \
  = "[[\"$BOX_A\", \"$U_ALICE\", \"Alice Admin\", \"$CID\", \"Test <Client>\"]]"
KEY=$TK api GET "/v1/audit?user=$U_DAVE&action=mcp.sandbox_create"
check "… and dave for his" test "$(jf '[(r["box_id"], r["user"]) for r in j["records"]]')" = "[[\"$BOX_D\", \"Dave D\"]]"
KEY=$AT_ALICE api GET /v1/users
expect_code "a /mcp token at /v1/users: 401 (another resource)" 401
signin_tokens alice "$PW_ALICE" "users sandbox:read" "$URL/v1" || not_ok "alice signs in for /v1 with users"
AT_ALICE_V1=$AT
KEY=$AT_ALICE_V1 api GET /v1/users
expect_code "an admin's token with users lists users" 200
KEY=$AT_ALICE_V1 api POST /v1/sandboxes -d '{}'
check "… but without sandbox cannot create a box: 403 insufficient_scope" test "$CODE $(jf 'j["error"]["code"]')" = "403 insufficient_scope"
KEY=$AT_ALICE_V1 api PATCH "/v1/users/$U_ALICE" -d '{"role":"member"}'
expect_code "an admin cannot demote itself: 409" 409
KEY=$AT_ALICE_V1 api DELETE "/v1/users/$U_ALICE"
expect_code "… nor delete itself: 409" 409
KEY=$ADMIN api GET "/v1/audit?user=$U_ALICE&action=oauth.sign_in"
check "sign-ins are audited with the user" test "$(jf 'j["records"][0]["outcome"]')" = ok

# ---- a disabled user's token dies at once ---------------------------------------------------
O=$($FLOW mcp "$URL" "$AT_DAVE" sandbox_list '{}')
check "dave's token works" test "$(o 'o["status"]')" = 200
KEY=$AT_ALICE_V1 api PATCH "/v1/users/$U_DAVE" -d '{"disabled":true}'
expect_code "alice (token with users) disables dave" 200
O=$($FLOW mcp "$URL" "$AT_DAVE" sandbox_list '{}')
check "dave's live token: 401 at once" test "$(o 'o["status"]')" = 401
O=$($FLOW signin "$URL" "$CID" "$RED" acme dave "$PW_DAVE")
check "dave cannot sign in" test "$(o 'o["status"]') $(o 'o["location"]')" = "200 "
KEY=$TK api DELETE "/v1/users/$U_VERA"
expect_code "delete vera" 200
O=$($FLOW mcp "$URL" "$AT_VERA" sandbox_list '{}')
check "a deleted user's token: 401" test "$(o 'o["status"]')" = 401
KEY=$TK api GET "/v1/audit?action=user.delete"
check "user.delete is audited" test "$(jf 'len([r for r in j["records"] if r["outcome"] == "ok"])')" = 1

# ---- password guessing ---------------------------------------------------------------------
# The page without what differs by request: the user name typed, the
# flow's random state and challenge, and the form token over them.
norm() { sed -E 's/(name="(username|code_challenge|state|csrf)"[^>]* value=")[^"]*"/\1"/g' <<<"$1"; }
for i in 1 2 3 4 5 6; do
  O=$($FLOW signin "$URL" "$CID" "$RED" acme carol "wrong-password-$i")
done
check "6 wrong passwords: still the page, no redirect" test "$(o 'o["status"]') $(o 'o["location"]')" = "200 "
P_WRONG=$(norm "$(o 'o["page_body"]')")
O=$($FLOW signin "$URL" "$CID" "$RED" acme carol "$PW_CAROL")
check "the right password of a locked user fails" test "$(o 'o["status"]') $(o 'o["location"]')" = "200 "
P_LOCKED=$(norm "$(o 'o["page_body"]')")
O=$(HUSK_SRC=127.0.0.2 $FLOW signin "$URL" "$CID" "$RED" acme carol "$PW_CAROL")
check "… but from another address, the right password signs carol in (the lock is per address)" \
  grep -q "^$RED?code=hac_" <<<"$(o 'o["location"]')"
secret "$(o 'o["code"]')"
O=$($FLOW signin "$URL" "$CID" "$RED" acme nobody-here "whatever-password")
P_UNKNOWN=$(norm "$(o 'o["page_body"]')")
O=$($FLOW signin "$URL" "$CID" "$RED" no-such-org carol "whatever-password")
check "the page says the same for a wrong password, a locked user and an unknown one" \
  test "$P_WRONG" = "$P_LOCKED" -a "$P_WRONG" = "$P_UNKNOWN"
[ "$P_WRONG" = "$P_UNKNOWN" ] || diff <(echo "$P_WRONG" | tr '>' '\n') <(echo "$P_UNKNOWN" | tr '>' '\n') | head -10 | sed 's/^/# /' 
check "… one generic message" grep -q 'Signing in failed' <<<"$P_WRONG"
KEY=$TK api GET "/v1/audit?action=oauth.sign_in&limit=1000"
check "the audit tells locked from denied" grep -q '"locked"' <<<"$BODY"

# ---- keys as before --------------------------------------------------------------------------
KEY=$TK api GET /v1/sandboxes
expect_code "a tenant key still lists sandboxes" 200
O=$($FLOW mcp "$URL" "$TK" sandbox_list '{}')
check "a tenant key still works at /mcp" test "$(o 'o["status"]') $(o 'o["json"]["result"].get("isError", False)')" = "200 false"
KEY=$TK api GET "/v1/audit?action=mcp.sandbox_list"
check "a key's MCP call has no user in the audit" test "$(jf '[r.get("user_id") for r in j["records"] if r["key_id"]][:1]')" = "[null]"

O=$($FLOW mcp "$URL" "hk_not_a_key_of_ours" sandbox_list '{}')
check "an unknown key at /mcp: 401 invalid_token with resource_metadata (a stale key finds the sign-in)" \
  test "$(o 'o["status"] == 401 and "invalid_token" in o["headers"].get("www-authenticate", "") and "oauth-protected-resource/mcp" in o["headers"].get("www-authenticate", "")')" = true
KEY=$ADMIN api GET "/v1/sandboxes"
check "the admin key at a tenant route: 403 without a WWW-Authenticate" \
  not grep -qi '^www-authenticate' <(curl -sS -D - -o /dev/null -H "Authorization: Bearer $ADMIN" "$URL/v1/sandboxes")

# ---- the CLI ---------------------------------------------------------------------------------
U=$(printf '%s\n' "cli-password-0001" | HUSK_API_KEY=$TK HUSK_URL=$URL "$HUSK" user add erin --role viewer --display-name "Erin E" --password-stdin 2>"$T_SCRATCH/err")
check "husk user add prints the id" grep -qE '^u_[0-9a-f]{24}$' <<<"$U"
HUSK_API_KEY=$TK HUSK_URL=$URL "$HUSK" user list >"$T_SCRATCH/out" 2>&1
check "husk user list shows erin" grep -q 'erin .*viewer' "$T_SCRATCH/out"
HUSK_API_KEY=$TK HUSK_URL=$URL "$HUSK" user set "$U" --role member >"$T_SCRATCH/out" 2>&1
check "husk user set changes the role" grep -q '"role": "member"' "$T_SCRATCH/out"
HUSK_API_KEY=$TK HUSK_URL=$URL "$HUSK" user rm "$U" >/dev/null 2>&1
check "husk user rm" test $? = 0
HUSK_API_KEY=$TK HUSK_URL=$URL "$HUSK" user show "$U" >/dev/null 2>&1
check "… then show fails" test $? = 1
HUSK_API_KEY=$TK HUSK_URL=$URL "$HUSK" user list --json >"$T_SCRATCH/out" 2>&1
check "husk user list --json prints the server's object" \
  python3 -c 'import json,sys; assert isinstance(json.load(open(sys.argv[1]))["users"], list)' "$T_SCRATCH/out"
for bad in "set $U --disable --enable" "set $U" "set $U --role" "add nora"; do
  # shellcheck disable=SC2086
  HUSK_API_KEY=$TK HUSK_URL=$URL "$HUSK" user $bad >/dev/null 2>"$T_SCRATCH/err"
  check "husk user $bad: bad usage (2)" test $? = 2
done
HUSK_URL=$URL "$HUSK" user list >/dev/null 2>&1
check "husk user without HUSK_API_KEY: bad usage (2)" test $? = 2
KEY=$ADMIN api GET /v1/tenants/t_000000000000000000000000/users
expect_code "the operator's list of an unknown tenant's users: 404" 404

# ---- rate limits -------------------------------------------------------------------------------
# Guesses sent at once from one address: each spends its failure before
# it is checked, and at most 2 are checked at once -- never more than 20
# checked, however many are sent together.
O=$(HUSK_SRC=127.0.0.9 $FLOW race "$URL" "$CID" "$RED" acme nobody 40)
check "40 sign-ins at once from one address: at most 20 checked, the rest 429" \
  test "$(o 'sum(1 for s in o["statuses"] if s == 200) <= 20 and all(s in (200, 429) for s in o["statuses"])')" = true
n429=0
for i in $(seq 1 30); do
  O=$($FLOW signin "$URL" "$CID" "$RED" acme nobody "x-password-$i")
  [ "$(o 'o["status"]')" = 429 ] && n429=$((n429 + 1))
done
check "past 20 failed sign-ins from one address: 429" test "$n429" -ge 5
n429=0
for i in $(seq 1 20); do
  reg "{\"redirect_uris\":[\"$RED\"]}"
  [ "$CODE" = 429 ] && n429=$((n429 + 1))
done
check "past 20 registrations an hour from one address: 429" test "$n429" -ge 1

# ---- an expired token ---------------------------------------------------------------------------
serve_stop
if serve_start --s3-listen off --oauth-access-ttl 2 --trusted-proxy 127.0.0.1; then
  # A new process: a new rate-limit table too.
  signin_tokens bob "$PW_BOB" || not_ok "bob signs in again"
  check "expires_in says 2" test "$(o 'o["json"]["expires_in"]')" = 2
  O=$($FLOW mcp "$URL" "$AT" sandbox_list '{}')
  check "a fresh 2 s token works" test "$(o 'o["status"]')" = 200
  sleep 3
  O=$($FLOW mcp "$URL" "$AT" sandbox_list '{}')
  check "after 3 s: 401" test "$(o 'o["status"]')" = 401

  # Behind a trusted proxy (127.0.0.1 here) the limits count the address
  # its X-Forwarded-For names; from anyone else the header is ignored.
  # guess N SRC XFF: N wrong sign-ins one after another; the last status.
  guess() {
    local i
    for i in $(seq "$1"); do
      O=$(HUSK_SRC=$2 HUSK_XFF=$3 $FLOW signin "$URL" "$CID" "$RED" acme nobody "wrong-$i")
    done
  }
  guess 21 127.0.0.1 "10.9.9.9, 203.0.113.5"
  check "through the proxy, the 21st wrong sign-in from 203.0.113.5: 429" test "$(o 'o["status"]')" = 429
  O=$(HUSK_XFF="203.0.113.5" $FLOW signin "$URL" "$CID" "$RED" acme bob "$PW_BOB")
  check "... then bob from 203.0.113.5 too: 429" test "$(o 'o["status"]')" = 429
  O=$(HUSK_XFF="203.0.113.6" $FLOW signin "$URL" "$CID" "$RED" acme bob "$PW_BOB")
  check "... bob through the same proxy from 203.0.113.6 signs in" test -n "$(o 'o.get("code") or ""')"
  O=$(HUSK_XFF="203.0.113.6, 127.0.0.1" $FLOW signin "$URL" "$CID" "$RED" acme bob "$PW_BOB")
  check "... a trusted proxy named last is passed over (203.0.113.6 again)" test -n "$(o 'o.get("code") or ""')"
  guess 21 127.0.0.3 203.0.113.6
  O=$(HUSK_SRC=127.0.0.3 HUSK_XFF="203.0.113.8" $FLOW signin "$URL" "$CID" "$RED" acme bob "$PW_BOB")
  check "from an untrusted address X-Forwarded-For is ignored: 127.0.0.3's own limit holds (429)" \
    test "$(o 'o["status"]')" = 429
  O=$(HUSK_XFF="203.0.113.6" $FLOW signin "$URL" "$CID" "$RED" acme bob "$PW_BOB")
  check "... and 203.0.113.6 through the proxy is still let in" test -n "$(o 'o.get("code") or ""')"

  # Metadata-document fetches are counted per IPv6 /48, as registrations
  # are: a /64 is what anyone gets many of.  https://localhost:1/ is a
  # loopback address this daemon does not fetch from: each is a 400 page,
  # and spends one of the 20 fetches.
  n400=0 st=""
  for i in $(seq 1 21); do
    O=$(HUSK_XFF="2001:db8:77:$i::1" $FLOW page "$URL" "{\"response_type\":\"code\",\"client_id\":\"https://localhost:1/c$i\",\"redirect_uri\":\"$RED\",\"code_challenge\":\"$(printf %043d 0 | tr 0 A)\",\"code_challenge_method\":\"S256\"}")
    st=$(o 'o["status"]')
    [ "$st" = 400 ] && n400=$((n400 + 1))
  done
  check "metadata-document fetches from 21 /64s of one /48: 20 made, then 429 (got $n400, then $st)" \
    test "$n400" = 20 -a "$st" = 429
else
  not_ok "the daemon restarts with --oauth-access-ttl 2 --trusted-proxy 127.0.0.1"
fi

# ---- no secret in the audit or the log ------------------------------------------------------------
KEY=$ADMIN api GET "/v1/audit?limit=1000"
echo "$BODY" >"$T_SCRATCH/audit.json"
leak=""
while read -r s; do
  [ -n "$s" ] || continue
  grep -qF -- "$s" "$T_SCRATCH/audit.json" && leak="$leak audit:${s:0:8}"
  grep -qF -- "$s" "$SERVE_LOG" && leak="$leak log:${s:0:8}"
done <"$SECRETS"
check "no password, code, verifier, token or client secret in the audit or the log" test -z "$leak"
check "the log names /oauth/authorize without its query" not grep -q 'oauth/authorize?' "$SERVE_LOG"

for b in "$BOX_A" "$BOX_D"; do [ -n "$b" ] && KEY=$TK api DELETE "/v1/sandboxes/$b"; done
serve_finish
