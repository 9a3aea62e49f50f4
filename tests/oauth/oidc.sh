#!/bin/bash
# Single sign-on through a tenant's OpenID Connect provider (docs/oauth.md,
# "Signing in with the organization's identity provider"), end to end:
#  - a real provider, panva's oidc-provider (tests/oauth/idp/idp.mjs), and
#    the official MCP TypeScript SDK client with a person in headless
#    Chromium who presses husk's single sign-on button, signs in on the
#    provider's page, allows on husk's consent page (its screenshot) and
#    calls a tool (tests/oauth/oidc.mjs); the same person again; a person
#    made on first sign-in (create_users "member"), one refused (null), a
#    disabled user refused; the users' idp_subject and the audit;
#  - a hostile provider (tests/oauth/idp/fake_idp.mjs) without a browser
#    (tests/oauth/oidc_hostile.py, run beside the browser): what husk sends
#    the provider (the authorization request, client_secret_basic/_post/
#    none, PKCE), every bad or malformed ID token or token reply refused
#    with the error page and audited with its reason, the daemon still up,
#    the callback and the consent form attacked, pending sign-ins per
#    address and fetches at once bounded, claims other than email, a user
#    unlinked and linked again, the configuration deleted;
#  - no client secret, code, ID token, nonce or state in the daemon's log,
#    the audit, or any reply body (but the page that sends the browser to
#    the provider: it is the authorization request).
# About 70 s.  OIDC_KEEP=DIR keeps what the drivers saw.
# The operator's configuration refusals are tests/serve/oidc_config.sh's.
# Every address anything is sent to is 127.0.0.x.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../serve/serve.bash"
. "$(dirname "$0")/oauth.bash"
IDP_DIR="$OAUTH_DIR/idp"
T_START=$SECONDS
IDP_PIDS=()
idp_cleanup() {
  local p
  for p in "${IDP_PIDS[@]}" ${HOSTILE:-}; do kill "$p" 2>/dev/null; done
}
on_exit 'idp_cleanup; serve_cleanup'

oauth_setup
# The providers' packages (oidc-provider, jose), as package-lock.json pins
# them; npm ci again only when the lockfile changed since the last install.
if ! { [ -f "$IDP_DIR/node_modules/.package-lock.json" ] &&
  cmp -s "$IDP_DIR/package-lock.json" "$IDP_DIR/node_modules/.husk-lock"; }; then
  if (cd "$IDP_DIR" && npm ci --no-audit --no-fund --loglevel=error >&2); then
    cp "$IDP_DIR/package-lock.json" "$IDP_DIR/node_modules/.husk-lock"
  fi
fi
if [ ! -d "$IDP_DIR/node_modules/oidc-provider" ] || [ ! -d "$IDP_DIR/node_modules/jose" ]; then
  not_ok "npm ci in tests/oauth/idp installs oidc-provider and jose"
  finish
  exit 1
fi

if ! serve_start --s3-listen off; then
  not_ok "the daemon starts"
  serve_finish
  exit 1
fi
rand() { head -c "$1" /dev/urandom | od -An -tx1 | tr -d ' \n'; }
REAL_SECRET="rs-$(rand 24)"
FAKE_SECRET="fs-$(rand 24)"

# start_idp NAME SCRIPT ENV...: a provider on a free port; its first line
# of output (JSON) in $T_SCRATCH/NAME.out.
start_idp() {
  local name=$1 script=$2; shift 2
  (cd "$IDP_DIR" && exec env "$@" "$NODE" "$script") >"$T_SCRATCH/$name.out" 2>"$T_SCRATCH/$name.err" &
  IDP_PIDS+=($!)
  for _ in $(seq 150); do
    [ -s "$T_SCRATCH/$name.out" ] && head -1 "$T_SCRATCH/$name.out" | grep -q port && return 0
    sleep 0.1
  done
  sed 's/^/#   /' "$T_SCRATCH/$name.err"
  return 1
}
# The tenants first: each one's callback is its own (the provider's
# client is registered with both).
ORG=acme
new_tenant "$ORG" || not_ok "tenant $ORG"
T_ACME=$TID
K_ACME=$TKEY
new_tenant acme-open || not_ok "tenant acme-open"
T_OPEN=$TID
if start_idp idp idp.mjs CLIENT_ID=husk-acme CLIENT_SECRET="$REAL_SECRET" \
  REDIRECT_URIS="$URL/oauth/callback/$T_ACME $URL/oauth/callback/$T_OPEN" &&
  start_idp fake fake_idp.mjs FAKE_SECRET="$FAKE_SECRET"; then
  ok "the providers start on 127.0.0.1 (oidc-provider $(cd "$IDP_DIR" && "$NODE" -p 'require("./node_modules/oidc-provider/package.json").version'), the fake one)"
else
  not_ok "the providers start"
  serve_finish
  exit 1
fi
IDP=$(head -1 "$T_SCRATCH/idp.out" | python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["issuer"])')
FAKE="http://127.0.0.1:$(head -1 "$T_SCRATCH/fake.out" | python3 -c 'import json,sys; print(json.loads(sys.stdin.readline())["port"])')"

# ---- the tenants, their users, their provider ----------------------------------------
ALICE=alice@acme.test
DAVE=dave@acme.test
KEY=$ADMIN
api POST "/v1/tenants/$T_ACME/users" -d "{\"name\":\"$ALICE\",\"role\":\"member\",\"display_name\":\"Alice Liddell\"}"
expect_code "the operator makes $ALICE (no password)" 201
ALICE_ID=$(jf 'j["id"]')
check "a new user's idp_subject is null" test "$(jf 'j.get("idp_subject", "missing")')" = ""
api POST "/v1/tenants/$T_ACME/users" -d "{\"name\":\"$DAVE\",\"role\":\"member\"}"
DAVE_ID=$(jf 'j["id"]')
api PATCH "/v1/tenants/$T_ACME/users/$DAVE_ID" -d '{"disabled":true}'
expect_code "…and $DAVE, disabled" 200

api PUT "/v1/tenants/$T_ACME/oidc" -d "{\"issuer\":\"$IDP\",\"client_id\":\"husk-acme\",\"client_secret\":\"$REAL_SECRET\",\"display_name\":\"Acme Login\"}"
expect_code "PUT /v1/tenants/{acme}/oidc (the real provider): 200" 200
check "…the configuration as the contract shows it (client_secret true, the defaults)" python3 -c '
import json, sys
j = json.loads(sys.argv[1])
want = {"tenant_id": sys.argv[2], "issuer": sys.argv[3], "client_id": "husk-acme", "client_secret": True,
        "display_name": "Acme Login", "claim": "email", "scopes": "openid email profile", "create_users": None}
assert all(j.get(k, "missing") == v for k, v in want.items()), j
assert j.get("created_at") and j.get("updated_at"), j
' "$BODY" "$T_ACME" "$IDP"
check "…and no reply shows the secret" not grep -qF "$REAL_SECRET" <<<"$BODY"
api GET "/v1/tenants/$T_ACME/oidc"
check "GET /v1/tenants/{acme}/oidc: 200, the secret not shown" \
  test "$CODE $(jf 'j["client_secret"]') $(grep -cF "$REAL_SECRET" <<<"$BODY")" = "200 true 0"
api PUT "/v1/tenants/$T_OPEN/oidc" -d "{\"issuer\":\"$IDP\",\"client_id\":\"husk-acme\",\"client_secret\":\"$REAL_SECRET\",\"display_name\":\"Acme Open Login\",\"create_users\":\"member\"}"
expect_code "PUT /v1/tenants/{acme-open}/oidc (the same provider, create_users member): 200" 200

# ---- a hostile provider, no browser (tests/oauth/oidc_hostile.py, its own tenants and
# source addresses 127.0.0.21 and up), while the person signs in in Chromium -----------------
env URL="$URL" ADMIN="$ADMIN" FAKE="$FAKE" SECRET="$FAKE_SECRET" OUT="$T_SCRATCH" BROWSER_DONE="$T_SCRATCH/browser.done" \
  timeout 200 python3 "$OAUTH_DIR/oidc_hostile.py" >"$T_SCRATCH/hostile.tap" 2>"$T_SCRATCH/hostile.err" &
HOSTILE=$!

# ---- a person in Chromium ----------------------------------------------------------
(cd "$OAUTH_DIR" && env TMPDIR="$T_SCRATCH" URL="$URL" IDP="$IDP" ORG="$ORG" ORG_OPEN=acme-open T_ACME="$T_ACME" \
  PROVIDER="Acme Login" ALICE="$ALICE" ALICE_DISPLAY="Alice Liddell" DAVE="$DAVE" CAROL=carol@acme.test \
  BOB=bob@acme.test SHOTS="$T_SCRATCH" OUT="$T_SCRATCH/browser.json" BODIES="$T_SCRATCH/bodies-browser.txt" \
  CHROMIUM="$CHROMIUM" MCPDIR="$MCPDIR" BROWSER_DIR="$BROWSER_DIR" timeout 170 "$NODE" oidc.mjs) \
  >"$T_SCRATCH/browser.tap" 2>"$T_SCRATCH/browser.err"
rc=$?
touch "$T_SCRATCH/browser.done"
cat "$T_SCRATCH/browser.tap"
if [ "$rc" -ne 0 ] && ! grep -q '^not ok' "$T_SCRATCH/browser.tap"; then
  not_ok "the browser driver failed (exit $rc)"
  tail -20 "$T_SCRATCH/browser.err" | sed 's/^/#   /'
fi
curl -s "$IDP/_test/seen" >"$T_SCRATCH/idp_seen.json"
check "at the real provider's token endpoint husk used client_secret_basic and a PKCE verifier (every exchange)" python3 -c '
import json, sys
trs = json.load(open(sys.argv[1]))["token_requests"]
print("# the provider saw %d token requests" % len(trs))
assert trs and all(t["basic"] and t["has_verifier"] and not t["secret_in_body"] and t["grant_type"] == "authorization_code"
                   and t["redirect_uri"] in (sys.argv[2] + "/oauth/callback/" + sys.argv[3], sys.argv[2] + "/oauth/callback/" + sys.argv[4]) for t in trs), trs
' "$T_SCRATCH/idp_seen.json" "$URL" "$T_ACME" "$T_OPEN"
sub_of() { python3 -c 'import hashlib, sys; print("idp-" + hashlib.sha256(sys.argv[1].encode()).hexdigest()[:20])' "$1"; }
ALICE_SUB=$(sub_of "$ALICE")

KEY=$ADMIN
api GET "/v1/tenants/$T_ACME/users/$ALICE_ID"
expect_eq "alice now shows idp_subject: the provider's sub" "$(jf 'j.get("idp_subject")')" "$ALICE_SUB"
api GET "/v1/tenants/$T_ACME/users"
check "acme: still alice and dave only (her second sign-in found her; carol was not made: create_users null)" python3 -c '
import json, sys
us = json.loads(sys.argv[1])["users"]
assert sorted(u["name"] for u in us) == ["alice@acme.test", "dave@acme.test"], us
assert [u["id"] for u in us if u.get("idp_subject") == sys.argv[2]] == [sys.argv[3]], us
' "$BODY" "$ALICE_SUB" "$ALICE_ID"
check "the disabled dave is still disabled" test "$(jf '[u["disabled"] for u in j["users"] if u["name"] == "dave@acme.test"]')" = "[true]"
api GET "/v1/tenants/$T_OPEN/users"
check "acme-open: bob was made on his first sign-in: a member, named by his email, displayed by the name claim, linked" python3 -c '
import json, sys
us = json.loads(sys.argv[1])["users"]
b = [u for u in us if u["name"] == "bob@acme.test"]
assert len(b) == 1, us
b = b[0]
assert b["role"] == "member" and b["display_name"] == "Bob Example" and b.get("idp_subject") == sys.argv[2], b
assert b["password"] is False, b
' "$BODY" "$(sub_of bob@acme.test)"

api GET "/v1/audit?action=oauth.sign_in&tenant=$T_ACME&limit=1000"
check "audit: alice's single sign-ons are oauth.sign_in ok with her id, detail sso (its first word), idp_subject and the client" python3 -c '
import json, sys
recs = [r for r in json.loads(sys.argv[1])["records"] if r["outcome"] == "ok"]
mine = [r for r in recs if r.get("user_id") == sys.argv[2]]
assert len(mine) >= 2, recs
for r in mine:
    assert r["detail"].split(" ")[0] == "sso" and r.get("idp_subject") == sys.argv[3], r
    assert r.get("user") == "Alice Liddell" and (r.get("client_id") or "").startswith("oc_"), r
' "$BODY" "$ALICE_ID" "$ALICE_SUB"
api GET "/v1/audit?user=$ALICE_ID&limit=1000"
check "audit: her run_code (made with her token) carries idp_subject" python3 -c '
import json, sys
recs = json.loads(sys.argv[1])["records"]
calls = [r for r in recs if r["action"] == "mcp.run_code"]
assert calls and all(r.get("idp_subject") == sys.argv[2] for r in calls), recs
' "$BODY" "$ALICE_SUB"
api GET "/v1/audit?action=oauth.sign_in&tenant=$T_ACME&limit=1000"
printf '%s' "$BODY" >"$T_SCRATCH/acme_sign_ins.json"
# sso_denied EXPR: Python on the acme records oauth.sign_in denied "sso …" (den)
# and the browser's client (client).
sso_denied() {
  python3 -c '
import json, sys
den = [r for r in json.load(open(sys.argv[1]))["records"] if r["outcome"] == "denied" and r["detail"].startswith("sso")]
client = json.load(open(sys.argv[2])).get("client")
if not eval(sys.argv[3]):
    print("#   " + json.dumps(den)[:600])
    sys.exit(1)
' "$T_SCRATCH/acme_sign_ins.json" "$T_SCRATCH/browser.json" "$1"
}
echo "# acme's refused single sign-ons: $(sso_denied 'print([r["detail"] for r in den]) or True')"
check "audit: carol's and dave's refusals are oauth.sign_in denied in acme's log, detail 'sso no_user'/'sso …'" \
  sso_denied 'len(den) >= 2'
check "…each naming the client, as a failed sign-in's record does" sso_denied 'den and all(r.get("client_id") == client for r in den)'
check "…no user but the disabled one, whom the provider vouched for" \
  sso_denied 'den and not any(r.get("user_id") for r in den if r["detail"] != "sso disabled") and all(r.get("user") == "dave@acme.test" for r in den if r["detail"] == "sso disabled") and any(r["detail"] == "sso disabled" for r in den)'

wait "$HOSTILE"
rc=$?
cat "$T_SCRATCH/hostile.tap"
if [ "$rc" -ne 0 ] && ! grep -q '^not ok' "$T_SCRATCH/hostile.tap"; then
  not_ok "the hostile driver failed (exit $rc)"
fi
[ "$rc" -ne 0 ] && tail -20 "$T_SCRATCH/hostile.err" | sed 's/^/#   /'

# ---- nothing secret anywhere ------------------------------------------------------------
curl -s "$IDP/_test/seen" >"$T_SCRATCH/idp_seen.json"
curl -s "$FAKE/_admin/seen" >"$T_SCRATCH/fake_seen.json"
# The whole audit (pages of 1000).
python3 - "$URL" "$ADMIN" "$T_SCRATCH/audit.json" <<'PY'
import http.client, json, sys, urllib.parse
url, key, out = sys.argv[1:4]
u = urllib.parse.urlsplit(url)
recs, after = [], 0
while True:
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
    c.request("GET", f"/v1/audit?limit=1000&after={after}", headers={"Authorization": "Bearer " + key})
    j = json.loads(c.getresponse().read())
    recs += j["records"]
    if not j.get("next_after"):
        break
    after = j["next_after"]
json.dump({"records": recs}, open(out, "w"))
PY
check "no client secret, provider code, ID token, nonce or state in the daemon's log, the audit or a reply body (but the page that sends the browser to the provider)" python3 -c '
import json, sys
scratch, real_secret, fake_secret = sys.argv[1:4]
secrets = {"the real client secret": [real_secret], "the fake client secret": [fake_secret]}
for f in ("idp_seen.json", "fake_seen.json"):
    s = json.load(open(f"{scratch}/{f}"))
    for k in ("states", "nonces", "codes", "id_tokens", "access_tokens"):
        secrets.setdefault(k, []).extend(x for x in s.get(k, []) if x and len(x) >= 16)
# The provider states and codes the browser carried back to husk.
b = json.load(open(f"{scratch}/browser.json"))
from urllib.parse import urlsplit, parse_qs
for u in b.get("seen", {}).get("callback_urls", []):
    q = parse_qs(urlsplit(u).query)
    secrets["states"] += q.get("state", [])
    secrets["codes"] += q.get("code", [])
counts = {k: len(v) for k, v in secrets.items()}
counts["audit records"] = len(json.load(open(f"{scratch}/audit.json"))["records"])
print(f"# looked for: {counts}")
assert counts["states"] and counts["nonces"] and counts["codes"] and counts["id_tokens"], counts
leaks = []
for where in ("serve.log", "audit.json", "bodies.txt", "bodies-browser.txt"):
    try:
        text = open(f"{scratch}/{where}", errors="replace").read()
    except OSError:
        leaks.append(f"{where} is missing"); continue
    for k, vs in secrets.items():
        for v in vs:
            if v in text:
                leaks.append(f"{k} in {where}: {v[:10]}…")
assert not leaks, "\n".join(sorted(set(leaks))[:20])
' "$T_SCRATCH" "$REAL_SECRET" "$FAKE_SECRET"

# OIDC_KEEP=DIR keeps what the drivers saw (screenshot, TAP, bodies, audit).
[ -n "${OIDC_KEEP:-}" ] && mkdir -p "$OIDC_KEEP" && cp "$T_SCRATCH"/*.png "$T_SCRATCH"/*.tap "$T_SCRATCH"/*.err \
  "$T_SCRATCH"/*.json "$T_SCRATCH"/bodies*.txt "$SERVE_LOG" "$OIDC_KEEP/" 2>/dev/null

# ---- nothing left -------------------------------------------------------------------
expect_eq "no box is left running" "$(reap_boxes "$K_ACME")" 0
check "no Chromium of this suite is left running" wait_for 10 no_chromium
serve_stop
expect_eq "the daemon stops cleanly" "$SERVE_RC" 0
idp_cleanup
echo "# oidc.sh: $((SECONDS - T_START)) s"
serve_finish
