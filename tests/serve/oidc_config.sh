#!/bin/bash
# A tenant's single sign-on provider (docs/oauth.md, "Configuring a
# tenant's provider"): PUT/GET/DELETE /v1/tenants/{tid}/oidc and what they
# refuse -- issuer URLs, discovery documents that fail in each way (served
# by a small HTTP server on loopback), fields out of bounds; the client
# secret never in a reply, the daemon's log or the audit, and its reserved
# vault name out of reach of the secrets routes and of egress policies;
# users' idp_subject; the sign-in page's second button and where it sends
# the browser.  The whole sign-in against a real provider is
# tests/oauth/'s.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"
FLOW="python3 $(cd "$(dirname "$0")" && pwd)/oauth_flow.py"

# ---- a provider's documents, served from a directory ------------------------------
DOCS="$T_SCRATCH/docs"
mkdir -p "$DOCS"
python3 - "$DOCS" >"$T_SCRATCH/idp.port" 2>"$T_SCRATCH/idp.log" <<'EOF' &
import http.server, os, socket, sys
root = sys.argv[1]
class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a): pass
    def do_GET(self):
        p = os.path.normpath(os.path.join(root, self.path.lstrip("/").split("?")[0]))
        if not p.startswith(root):
            self.send_error(404); return
        if os.path.isfile(p + ".redirect"):
            self.send_response(302)
            self.send_header("Location", open(p + ".redirect").read().strip())
            self.send_header("Content-Length", "0")
            self.end_headers(); return
        if not os.path.isfile(p):
            self.send_error(404); return
        data = open(p, "rb").read()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
EOF
IDP_PID=$!
on_exit 'kill "$IDP_PID" 2>/dev/null; serve_cleanup'
for _ in $(seq 100); do [ -s "$T_SCRATCH/idp.port" ] && break; sleep 0.05; done
IDP="http://127.0.0.1:$(cat "$T_SCRATCH/idp.port")"

# doc NAME [PYTHON EDITS]: /NAME/.well-known/openid-configuration for the
# issuer $IDP/NAME, changed by EDITS (Python on `d`).
doc() {
  mkdir -p "$DOCS/$1/.well-known"
  python3 - "$IDP/$1" "${2:-pass}" >"$DOCS/$1/.well-known/openid-configuration" <<'EOF'
import json, sys
iss = sys.argv[1]
d = {"issuer": iss, "authorization_endpoint": iss + "/auth", "token_endpoint": iss + "/token",
     "jwks_uri": iss + "/jwks", "response_types_supported": ["code"],
     "code_challenge_methods_supported": ["S256"], "subject_types_supported": ["public"],
     "id_token_signing_alg_values_supported": ["RS256"]}
exec(sys.argv[2])
print(d if isinstance(d, str) else json.dumps(d))
EOF
}
doc good
doc postonly 'd["token_endpoint_auth_methods_supported"] = ["client_secret_post"]'
doc nobasic 'd["token_endpoint_auth_methods_supported"] = ["private_key_jwt"]'
doc wrongiss 'd["issuer"] = iss + "/"'
doc httpendpoint 'd["token_endpoint"] = "http://idp.example/token"'
doc nojwks 'del d["jwks_uri"]'
doc nos256 'd["code_challenge_methods_supported"] = ["plain"]'
doc nocode 'd["response_types_supported"] = ["id_token"]'
doc notjson 'd = "<html>not json</html>"'
doc big 'd["padding"] = "x" * 70000'
doc array 'd = "[1, 2]"'
doc fragment 'd["authorization_endpoint"] = iss + "/auth#x"'
mkdir -p "$DOCS/moved/.well-known"
echo "$IDP/good/.well-known/openid-configuration" >"$DOCS/moved/.well-known/openid-configuration.redirect"

if ! serve_start --s3-listen off; then
  not_ok "the daemon starts"
  serve_finish
  exit 1
fi
new_tenant acme || not_ok "tenant acme"
T1=$TID
TK1=$TKEY
new_tenant other || not_ok "tenant other"
SECRET="idp-secret-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"

put() { KEY=$ADMIN api PUT "/v1/tenants/$T1/oidc" -d "$1"; }
refused() { # DESC BODY WANT_CODE WANT_ERROR
  put "$2"
  if [ "$CODE" = "$3" ] && [ "$(jf 'j["error"]["code"]')" = "$4" ]; then ok "$1"; else
    not_ok "$1 (got $CODE $(head -c 300 <<<"$BODY"), want $3 $4)"
  fi
}

# ---- nothing configured -----------------------------------------------------------
KEY=$ADMIN api GET "/v1/tenants/$T1/oidc"
expect_code "no configuration: 404" 404
KEY=$TK1 api GET "/v1/tenants/$T1/oidc"
check "a tenant key cannot read it" test "$CODE" = 403 -o "$CODE" = 401
KEY=$TK1 api PUT "/v1/tenants/$T1/oidc" -d "{\"issuer\":\"$IDP/good\",\"client_id\":\"c\"}"
check "a tenant key cannot set it" test "$CODE" = 403 -o "$CODE" = 401
KEY=$ADMIN api PUT "/v1/tenants/t_000000000000000000000000/oidc" -d "{\"issuer\":\"$IDP/good\",\"client_id\":\"c\"}"
expect_code "an unknown tenant: 404" 404

# ---- the fields ------------------------------------------------------------------
refused "issuer missing" '{"client_id":"c"}' 400 bad_request
refused "client_id missing" "{\"issuer\":\"$IDP/good\"}" 400 bad_request
refused "an unknown field" "{\"issuer\":\"$IDP/good\",\"client_id\":\"c\",\"extra\":1}" 400 bad_request
refused "issuer ftp://" '{"issuer":"ftp://idp.example","client_id":"c"}' 400 bad_request
refused "issuer http:// to a public host" '{"issuer":"http://idp.example","client_id":"c"}' 400 bad_request
refused "issuer http:// to a private address" '{"issuer":"http://10.0.0.1","client_id":"c"}' 400 bad_request
refused "issuer with a query" '{"issuer":"https://idp.example/?x=1","client_id":"c"}' 400 bad_request
refused "issuer with a fragment" '{"issuer":"https://idp.example/#x","client_id":"c"}' 400 bad_request
refused "issuer with userinfo" '{"issuer":"https://u:p@idp.example","client_id":"c"}' 400 bad_request
refused "issuer not a URL" '{"issuer":"idp.example","client_id":"c"}' 400 bad_request
LONG="https://idp.example/$(head -c 600 /dev/zero | tr '\0' a)"
refused "issuer over 512 bytes" "{\"issuer\":\"$LONG\",\"client_id\":\"c\"}" 400 bad_request
refused "client_id with a control character" "{\"issuer\":\"$IDP/good\",\"client_id\":\"a\\nb\"}" 400 bad_request
refused "client_id over 256 bytes" "{\"issuer\":\"$IDP/good\",\"client_id\":\"$(head -c 257 /dev/zero | tr '\0' c)\"}" 400 bad_request
refused "client_secret not a string" "{\"issuer\":\"$IDP/good\",\"client_id\":\"c\",\"client_secret\":5}" 400 bad_request
refused "client_secret empty" "{\"issuer\":\"$IDP/good\",\"client_id\":\"c\",\"client_secret\":\"\"}" 400 bad_request
refused "claim unknown" "{\"issuer\":\"$IDP/good\",\"client_id\":\"c\",\"claim\":\"phone\"}" 400 bad_request
refused "scopes without openid" "{\"issuer\":\"$IDP/good\",\"client_id\":\"c\",\"scopes\":\"email profile\"}" 400 bad_request
refused "create_users admin" "{\"issuer\":\"$IDP/good\",\"client_id\":\"c\",\"create_users\":\"admin\"}" 400 bad_request
refused "display_name over 128 bytes" "{\"issuer\":\"$IDP/good\",\"client_id\":\"c\",\"display_name\":\"$(head -c 129 /dev/zero | tr '\0' d)\"}" 400 bad_request

# ---- discovery failing in each way --------------------------------------------------
disc() { refused "discovery: $1" "{\"issuer\":\"$IDP/$2\",\"client_id\":\"c\",\"client_secret\":\"$SECRET\"}" 400 oidc_discovery_failed; }
disc "no document (404)" missing
disc "not JSON" notjson
disc "JSON but not an object" array
disc "an issuer that is not the configured one exactly" wrongiss
disc "an endpoint over http to a public host" httpendpoint
disc "no jwks_uri" nojwks
disc "no S256" nos256
disc "no response type code" nocode
disc "larger than 64 KiB" big
disc "a redirect (not followed)" moved
disc "an endpoint with a fragment" fragment
disc "token endpoint takes no secret it can send" nobasic
refused "discovery: nothing listening" "{\"issuer\":\"http://127.0.0.1:9/x\",\"client_id\":\"c\"}" 400 oidc_discovery_failed
refused "discovery: https to a plain server (TLS fails)" "{\"issuer\":\"${IDP/http:/https:}/good\",\"client_id\":\"c\"}" 400 oidc_discovery_failed
check "the reply says why" grep -q "SSL\|TLS\|transfer" <<<"$(jf 'j["error"]["message"]')"
KEY=$ADMIN api GET "/v1/tenants/$T1/oidc"
expect_code "nothing was stored" 404

# ---- a good configuration ------------------------------------------------------------
put "{\"issuer\":\"$IDP/good\",\"client_id\":\"husk-rp\",\"client_secret\":\"$SECRET\"}"
expect_code "a good configuration: 200" 200
check "issuer" test "$(jf 'j["issuer"]')" = "$IDP/good"
check "client_id" test "$(jf 'j["client_id"]')" = husk-rp
check "client_secret is true, not the secret" test "$(jf 'j["client_secret"]')" = true
check "display_name defaults to the issuer's host" test "$(jf 'j["display_name"]')" = 127.0.0.1
check "claim defaults to email" test "$(jf 'j["claim"]')" = email
check "scopes default" test "$(jf 'j["scopes"]')" = "openid email profile"
check "create_users defaults to null" test "$(jf 'repr(j["create_users"])')" = None
check "tenant_id, created_at, updated_at" test -n "$(jf 'j["tenant_id"] and j["created_at"] and j["updated_at"]')"
check "the reply never holds the secret" not grep -qF "$SECRET" <<<"$BODY"
KEY=$ADMIN api GET "/v1/tenants/$T1/oidc"
expect_code "GET: 200" 200
check "GET says there is a secret" test "$(jf 'j["client_secret"]')" = true
check "GET never holds the secret" not grep -qF "$SECRET" <<<"$BODY"
put "{\"issuer\":\"$IDP/good\",\"client_id\":\"husk-rp\",\"display_name\":\"Example SSO\",\"create_users\":\"member\",\"claim\":\"preferred_username\",\"scopes\":\"openid profile\"}"
expect_code "a PUT without client_secret: 200" 200
check "... keeps the secret" test "$(jf 'j["client_secret"]')" = true
check "display_name, claim, scopes, create_users as given" test "$(jf 'j["display_name"]+j["claim"]+j["scopes"]+j["create_users"]')" = "Example SSOpreferred_usernameopenid profilemember"
put "{\"issuer\":\"$IDP/postonly\",\"client_id\":\"husk-rp\"}"
expect_code "a provider that takes client_secret_post only: 200" 200

# ---- the secret's reserved vault name ---------------------------------------------------
KEY=$TK1 api GET /v1/secrets
check "the secrets listing does not show it" not grep -q "__husk" <<<"$BODY"
KEY=$TK1 api PUT /v1/secrets/__husk_oidc_client_secret -d '{"value":"replaced"}'
expect_code "the secrets route cannot replace it" 400
KEY=$TK1 api DELETE /v1/secrets/__husk_oidc_client_secret
expect_code "the secrets route cannot delete it" 404
KEY=$TK1 api PUT /v1/secrets/__husk_other -d '{"value":"x"}'
expect_code "no secret of the reserved prefix can be made" 400
# (No egress policy can bind it either: tests/unit/test_egress.c.)
KEY=$ADMIN api GET "/v1/tenants/$T1/oidc"
check "it is still there after all that" test "$(jf 'j["client_secret"]')" = true

# ---- null removes the secret (a public client) -----------------------------------------
put "{\"issuer\":\"$IDP/good\",\"client_id\":\"husk-rp\",\"client_secret\":null}"
expect_code "client_secret null: 200" 200
check "... and there is none" test "$(jf 'j["client_secret"]')" = false
put "{\"issuer\":\"$IDP/nobasic\",\"client_id\":\"husk-rp\"}"
expect_code "a public client needs no secret method: 200" 200
put "{\"issuer\":\"$IDP/good\",\"client_id\":\"husk-rp\",\"client_secret\":\"$SECRET\"}"
expect_code "the secret again: 200" 200

# ---- users' idp_subject -------------------------------------------------------------
KEY=$TK1 api POST /v1/users -d '{"name":"jane@example.com","role":"member"}'
USER=$(jf 'j["id"]')
check "a user's JSON has idp_subject null" test "$(jf 'repr(j["idp_subject"])')" = None
KEY=$TK1 api PATCH "/v1/users/$USER" -d '{"idp_subject":"someone"}'
expect_code "idp_subject cannot be set" 400
KEY=$TK1 api PATCH "/v1/users/$USER" -d '{"idp_subject":null}'
expect_code "idp_subject null (unlink): 200" 200

# ---- the sign-in page's second button ---------------------------------------------------
O=$(python3 - "$URL" <<'EOF'
import json, sys, http.client, urllib.parse
base = sys.argv[1]
u = urllib.parse.urlsplit(base)
c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
c.request("POST", "/oauth/register", json.dumps({"client_name": "Tester", "redirect_uris": ["http://127.0.0.1:9/cb"], "token_endpoint_auth_method": "none"}), {"Content-Type": "application/json"})
print(json.loads(c.getresponse().read())["client_id"])
EOF
)
CLIENT=$O
Q="{\"response_type\":\"code\",\"client_id\":\"$CLIENT\",\"redirect_uri\":\"http://127.0.0.1:9/cb\",\"code_challenge\":\"3clj5LhMl7kb12BFcC2Cy4G0xcMUxM7qRrlJD0tcBtk\",\"code_challenge_method\":\"S256\",\"state\":\"xyz\"}"
P=$($FLOW page "$URL" "$Q")
check "the sign-in page has the organization's provider button" grep -q 'value=\\"sso\\"' <<<"$P"
sso_post() { # ORG: the page's form with action=sso
  python3 - "$P" "$1" <<'EOF'
import json, sys
p = json.loads(sys.argv[1])
f = dict(p["fields"])
f["organization"] = sys.argv[2]
f["action"] = "sso"
print(json.dumps([f, p["cookie"]]))
EOF
}
F=$(sso_post other)
O=$($FLOW post "$URL" "$(python3 -c 'import json,sys; print(json.dumps(json.loads(sys.argv[1])[0]))' "$F")" "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])[1])' "$F")")
check "a tenant without a provider: the page again" grep -q '"status": 200' <<<"$O"
check "... saying single sign-on is not set up" grep -q "Single sign-on is not set up for this organization" <<<"$O"
F=$(sso_post nosuchorg)
O2=$($FLOW post "$URL" "$(python3 -c 'import json,sys; print(json.dumps(json.loads(sys.argv[1])[0]))' "$F")" "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])[1])' "$F")")
check "an unknown organization: the same words" grep -q "Single sign-on is not set up for this organization" <<<"$O2"
F=$(sso_post acme)
O=$($FLOW post "$URL" "$(python3 -c 'import json,sys; print(json.dumps(json.loads(sys.argv[1])[0]))' "$F")" "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])[1])' "$F")")
LOC=$(python3 -c '
import html, json, re, sys
m = re.search(r"http-equiv=\"refresh\" content=\"0;url=([^\"]+)\"", json.loads(sys.argv[1])["body"])
print(html.unescape(m.group(1)) if m else "")' "$O")
SC=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["headers"].get("set-cookie",""))' "$O")
check "a tenant with a provider: 200, a page that moves on (meta refresh)" grep -q '"status": 200' <<<"$O"
check "... to its authorization_endpoint" test "${LOC%%\?*}" = "$IDP/good/auth"
for p in response_type=code client_id=husk-rp "redirect_uri=${URL//:/%3A}" scope=openid state= nonce= code_challenge= code_challenge_method=S256; do
  check "... with $p" grep -q "[?&]${p//\//%2F}" <<<"$LOC"
done
check "... setting the husk_sso cookie (HttpOnly, SameSite=Lax, Path=/)" \
  grep -qE '^husk_sso=[0-9a-f]{64}; Path=/; HttpOnly; SameSite=Lax' <<<"$SC"

KEY=$ADMIN api GET "/v1/tenants/$T1/oidc"
expect_eq "the configuration names the tenant's own callback to register at the provider" \
  "$(jf 'j["redirect_uri"]')" "$URL/oauth/callback/$T1"
check "... the one the provider was sent" grep -qF "redirect_uri=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$URL/oauth/callback/$T1")&" <<<"$LOC"

# ---- the callback refuses what it does not know ----------------------------------------
api GET "/oauth/callback/$T1?state=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')&code=x"
expect_code "a callback with an unknown state: 400" 400
api GET "/oauth/callback/$T1?error=access_denied"
expect_code "a callback without state: 400" 400
api POST /oauth/callback -H 'Content-Type: application/x-www-form-urlencoded' -d 'handle=x&csrf=y&action=allow'
expect_code "a consent post without cookie or token: 403" 403

# ---- a whole sign-in against a small fake provider (oidc_smoke.py) -----------------------
new_tenant smoke || not_ok "tenant smoke"
SMOKE=$(python3 "$(cd "$(dirname "$0")" && pwd)/oidc_smoke.py" "$URL" "$ADMIN" "$TID" smoke "$TKEY" 2>"$T_SCRATCH/smoke.err")
if [ -z "$SMOKE" ]; then
  not_ok "the fake provider's sign-in ran ($(head -c 400 "$T_SCRATCH/smoke.err"))"
else
  while IFS=$'\t' read -r name val; do
    check "sso: $name" test "$val" = True
  done < <(python3 -c '
import json, sys
for k, v in json.loads(sys.argv[1]).items():
    if not k.startswith("_"): print("%s\t%s" % (k, v))' "$SMOKE")
  NOTES=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["_notes"])' "$SMOKE")
  [ "$NOTES" = "[]" ] || echo "# $NOTES"
  SMOKE_SECRET=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["_secret"])' "$SMOKE")
  check "sso: the daemon's log never holds the provider's client secret" not grep -qF "$SMOKE_SECRET" "$SERVE_LOG"
fi

# ---- DELETE -------------------------------------------------------------------------
KEY=$ADMIN api DELETE "/v1/tenants/$T1/oidc"
expect_code "DELETE: 200" 200
KEY=$ADMIN api GET "/v1/tenants/$T1/oidc"
expect_code "then GET: 404" 404
KEY=$ADMIN api DELETE "/v1/tenants/$T1/oidc"
expect_code "DELETE again: 404" 404

# ---- the audit, the log ----------------------------------------------------------------
KEY=$ADMIN api GET "/v1/audit?limit=500"
check "oidc.configure is audited" grep -q '"oidc.configure"' <<<"$BODY"
check "oidc.delete is audited" grep -q '"oidc.delete"' <<<"$BODY"
check "a refused configuration is audited with why" grep -q 'oidc_discovery_failed\|discovery document' <<<"$BODY"
check "the audit never holds the secret" not grep -qF "$SECRET" <<<"$BODY"
check "the daemon's log never holds the secret" not grep -qF "$SECRET" "$SERVE_LOG"
check "the database holds no plaintext secret" not grep -rqF "$SECRET" "$DATA"

serve_finish
