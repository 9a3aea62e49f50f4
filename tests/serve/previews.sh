#!/bin/bash
# Preview URLs: a box's port shown to a person through the daemon's own
# listener, by a token in the path (/p/<token>/...) or in the host name
# (<port>-<box>-<token>.<preview domain>), never by giving the box a
# network.  What is created, listed, revoked, expires and is audited; what
# each access mode asks for; what reaches the box (prefix stripped,
# X-Forwarded-*, never the husk key, the password or X-Husk-* headers) and
# what comes back (keep-alive, chunked, streaming, big bodies, HEAD,
# WebSocket, cookies rewritten); what is refused before the box is
# reached (tokens tampered, expired, revoked, boxes paused or ended, limits
# of the preview); hostile boxes (a smuggled second answer, both
# Content-Length and Transfer-Encoding, other broken replies) and hostile
# clients (slowloris, huge headers, dot-dot paths, another tenant); no
# token in listings, the audit log or the daemon's log; nothing left once
# the boxes are deleted.  The servers and clients are
# tests/serve/preview_servers.py.  No timing assertions: waits are "until
# X, at most N s".  Every check connects to 127.0.0.1 only.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"
. "$(dirname "$0")/preview.bash"

SRV="$(cd "$(dirname "$0")" && pwd)/preview_servers.py"
DOMAIN=preview.test

if ! serve_start --preview-domain "$DOMAIN" --request-timeout 3; then
  not_ok "the daemon starts with --preview-domain $DOMAIN --request-timeout 3"
  serve_finish
  exit 1
fi
PORT=${URL##*:}
new_tenant prev-a || not_ok "tenant A"
KEY_A=$TKEY
TID_A=$TID
new_tenant prev-b || not_ok "tenant B"
KEY_B=$TKEY
KEY=$KEY_A
touch "$T_SCRATCH/tokens" "$T_SCRATCH/secrets"

# ---- helpers ------------------------------------------------------------------

# secs_between A B: seconds from RFC 3339 time A to B.
secs_between() {
  python3 -c '
import sys, datetime
f = lambda s: datetime.datetime.fromisoformat(s.replace("Z", "+00:00"))
print(round((f(sys.argv[2]) - f(sys.argv[1])).total_seconds()))' "$1" "$2"
}
# only_lo BOX: the box's network interfaces are only its loopback.
only_lo() {
  bx "$1" "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort | tr '\n' ' '"
  [ "$OUT" = "lo " ]
}

# ---- a box and its servers --------------------------------------------------------
new_box '{"timeout":1800}' || not_ok "box A (got $CODE: $BODY)"
A=$BOX
expect_eq "box A has no network (network none, the default)" "$(jf 'j["network"]')" none
check "box A's only interface is lo before any preview" only_lo "$A"
check "the helper servers run in box A (http 8000, ws 8001, smuggle 8002, both 8003)" \
  start_servers "$A" http:8000 ws:8001 smuggle:8002 both:8003

# ---- create -----------------------------------------------------------------
mkpreview "$A" 8000
expect_code "create a preview of port 8000 with no body: 201" 201
PV_KEY=$PV
TOK_KEY=$TOKEN
BODY=$PBODY
check "its id is pv_..." grep -q '^pv_' <<<"$PV_KEY"
expect_eq "it names the box" "$(jf 'j["sandbox_id"]')" "$A"
expect_eq "it names the port" "$(jf 'j["port"]')" 8000
expect_eq "access is key by default" "$(jf 'j["access"]')" key
check "the token is 26 characters of base32 (a-z, 2-7)" grep -qE '^[a-z2-7]{26}$' <<<"$TOK_KEY"
check "url is the path form ending in /p/<token>/" grep -qE "^https?://[^/]+/p/$TOK_KEY/\$" <<<"$(jf 'j["url"]')"
check "host_url is http://8000-<box with - for _>-<token>.${DOMAIN}[:port]/" \
  grep -qE "^http://8000-$(box_dns "$A")-$TOK_KEY\.preview\.test(:[0-9]+)?/\$" <<<"$HOSTURL"
expect_eq "no password for access key" "$(jf '"password" in j')" false
expect_eq "the default lifetime is 3600 s" "$(secs_between "$(jf 'j["created_at"]')" "$(jf 'j["expires_at"]')")" 3600
expect_eq "the reply has the preview's limits" "$(jf 'sorted(j["limits"].keys())')" \
  '["idle_timeout", "max_body", "max_connections", "max_duration", "max_header"]'
mkpreview "$A" 8000 '{}'
expect_code "an empty JSON body: 201" 201
mkpreview "$A" 8000 '{"ttl":604800}'
expect_code "ttl 604800 (7 days, the most): 201" 201
BODY=$PBODY
expect_eq "it expires 604800 s after its creation" "$(secs_between "$(jf 'j["created_at"]')" "$(jf 'j["expires_at"]')")" 604800
for bad in '{"ttl":0}' '{"ttl":604801}' '{"ttl":-5}' '{"ttl":"soon"}' '{"access":"everyone"}' \
  '{"public":"yes"}' '{"colour":"red"}' '{"limits":{"max_body":-1}}' '{"limits":{"bogus":1}}' '[1]'; do
  api POST "/v1/sandboxes/$A/ports/8000/previews" -d "$bad"
  expect_code "body $bad: 400" 400
done
for p in 0 65536 99999; do
  api POST "/v1/sandboxes/$A/ports/$p/previews"
  expect_code "port $p: 400" 400
done
api POST "/v1/sandboxes/$A/ports/http/previews"
check "port 'http' (not a number): 400 or 404 (got $CODE)" [ "$CODE" = 400 -o "$CODE" = 404 ]
mkpreview "$A" 65535 '{"public":true}'
expect_code "port 65535: 201" 201
BODY=$PBODY
expect_eq "public: true is access public" "$(jf 'j["access"]')" public
mkpreview "$A" 8000 '{"limits":{"max_body":"1M","max_header":4096,"max_connections":3,"idle_timeout":30,"max_duration":60}}'
expect_code "limits given: 201" 201
BODY=$PBODY
expect_eq "max_body \"1M\" is 1048576 bytes" "$(jf 'j["limits"]["max_body"]')" 1048576
expect_eq "the other limits as given" "$(jf '[j["limits"][k] for k in ("max_header","max_connections","idle_timeout","max_duration")] == [4096, 3, 30, 60]')" true
api POST "/v1/sandboxes/b_000000000000000000000000/ports/8000/previews"
expect_code "a box that does not exist: 404" 404

# ---- list, get --------------------------------------------------------------------
api GET "/v1/sandboxes/$A/previews"
expect_code "list the box's previews" 200
check "the list has the first preview" grep -q "$PV_KEY" <<<"$BODY"
expect_eq "no token, url, host_url or password in the list" \
  "$(jf 'sorted(set(k for p in j["previews"] for k in p) & {"token","url","host_url","password"})')" "[]"
check "no token appears anywhere in the list" not grep -qFf "$T_SCRATCH/tokens" <<<"$BODY"
expect_eq "each has id, port, access, state, created_at, expires_at" \
  "$(jf 'all({"id","port","access","state","created_at","expires_at"} <= set(p) for p in j["previews"])')" true
expect_eq "all are active" "$(jf 'sorted(set(p["state"] for p in j["previews"]))')" '["active"]'
api GET "/v1/sandboxes/$A/previews/$PV_KEY"
expect_code "get one preview" 200
expect_eq "it is the one asked for" "$(jf '[j["id"], j["port"], j["access"], j["state"]]')" "[\"$PV_KEY\", 8000, \"key\", \"active\"]"
check "its token is not in it" not grep -qF "$TOK_KEY" <<<"$BODY"
api GET "/v1/sandboxes/$A/previews/pv_000000000000000000000000"
expect_code "get a preview id that does not exist: 404" 404

# ---- access key -----------------------------------------------------------------
preq "$URL/p/$TOK_KEY/hello?x=1"
expect_code "access key, no Authorization: 401" 401
preq "$URL/p/$TOK_KEY/hello?x=1" -H "Authorization: Bearer hk_notakeynotakeynotakeynotakeynotakeynotakey"
expect_code "access key, a made-up key: 401" 401
preq "$URL/p/$TOK_KEY/hello?x=1" -H "Authorization: Bearer $KEY_B"
expect_code "access key, another tenant's key (B tries A's preview): 401" 401
preq "$URL/p/$TOK_KEY/hello?x=1" -H "Authorization: Bearer $ADMIN"
check "access key, the admin key: refused, not proxied (got $CODE)" [ "$CODE" = 401 -o "$CODE" = 403 ]
preq "$URL/p/$TOK_KEY/hello?x=1" -H "Authorization: Bearer $KEY_A" -H "X-Husk-Secret: s1" -H "x-husk-tenant: t_evil" -H "X-Other: kept"
expect_code "access key, the tenant's key: 200 from the box" 200
expect_eq "the box got the path without the /p/<token> prefix" "$(jf 'j["path"]')" "/hello?x=1"
expect_eq "the box got the method" "$(jf 'j["method"]')" GET
expect_eq "the box did not get the Authorization header (the husk key)" "$(seen authorization)" ""
check "the husk key is nowhere in what the box got" not grep -qF "$KEY_A" <<<"$BODY"
expect_eq "the box got no X-Husk-* header" "$(seen_prefix x-husk)" ""
expect_eq "other headers reach the box" "$(seen x-other)" kept
expect_eq "X-Forwarded-Prefix is /p/<token>" "$(seen x-forwarded-prefix)" "/p/$TOK_KEY"
check "X-Forwarded-For has the client's address" grep -q "127.0.0.1" <<<"$(seen x-forwarded-for)"
expect_eq "X-Forwarded-Proto is http" "$(seen x-forwarded-proto)" http
expect_eq "X-Forwarded-Host is the Host the client used" "$(seen x-forwarded-host)" "127.0.0.1:$PORT"
preq "$URL/p/$TOK_KEY/hello" -H "Authorization: Bearer $KEY_A" -H "X-Forwarded-For: 6.6.6.6" -H "X-Forwarded-Prefix: /evil"
expect_eq "a client's own X-Forwarded-Prefix does not replace the daemon's" "$(seen x-forwarded-prefix)" "/p/$TOK_KEY"
check "the client's address is in X-Forwarded-For whatever the client claims" grep -q "127.0.0.1" <<<"$(seen x-forwarded-for)"
preq "$URL/p/$TOK_KEY" -H "Authorization: Bearer $KEY_A"
expect_code "/p/<token> without the slash: 308" 308
check "it redirects to /p/<token>/" grep -qE "(^|/)p/$TOK_KEY/\$" <<<"$(rhdr location)"
# A second key of tenant A works, and stops working once revoked.
save=$KEY
KEY=$ADMIN
api POST "/v1/tenants/$TID_A/keys"
KEY2=$(jf 'j["key"]')
KID2=$(jf 'j["id"]')
KEY=$save
preq "$URL/p/$TOK_KEY/k2" -H "Authorization: Bearer $KEY2"
expect_code "another key of tenant A: 200" 200
KEY=$ADMIN
api DELETE "/v1/tenants/$TID_A/keys/$KID2"
KEY=$save
preq "$URL/p/$TOK_KEY/k2" -H "Authorization: Bearer $KEY2"
expect_code "that key once revoked: 401" 401

# ---- tokens that open nothing ---------------------------------------------------------
tampered=$(python3 -c 'import sys; t=sys.argv[1]; print(t[:-1] + ("a" if t[-1] != "a" else "b"))' "$TOK_KEY")
preq "$URL/p/$tampered/hello" -H "Authorization: Bearer $KEY_A"
expect_code "a token with its last character changed: 404" 404
preq "$URL/p/${TOK_KEY:0:25}/hello" -H "Authorization: Bearer $KEY_A"
expect_code "a token one character short: 404" 404
preq "$URL/p/${TOK_KEY}a/hello" -H "Authorization: Bearer $KEY_A"
expect_code "a token one character long: 404" 404
preq "$URL/p/abcdefghijklmnopqrstuvwxyz/hello" -H "Authorization: Bearer $KEY_A"
expect_code "a made-up token: 404" 404
preq "$URL/p/" -H "Authorization: Bearer $KEY_A"
expect_code "/p/ with no token: 404" 404
preq "$URL/p/$TOK_KEY/../../v1/sandboxes" --path-as-is -H "Authorization: Bearer $KEY_A"
check "a dot-dot path after the token never reaches the API with the key it carries" \
  not grep -q '"sandboxes"' <<<"$BODY"
preq "$URL/p/$TOK_KEY/a%0d%0aX-Injected:%20yes" -H "Authorization: Bearer $KEY_A"
check "an encoded CR LF in the path injects no header into the box's request ($CODE)" \
  not grep -qi '"x-injected"' <<<"$BODY"

# ---- access public: what flows ------------------------------------------------------
mkpreview "$A" 8000 '{"access":"public"}' || not_ok "a public preview of 8000 (got $CODE: $PBODY)"
PV_PUB=$PV
TOK_PUB=$TOKEN
P=$PURL
preq "$P/first-public-request"
expect_code "access public: no key needed, 200" 200
preq "$P/x" -H "Authorization: Bearer $KEY_A"
expect_code "access public with a key sent anyway: 200" 200
expect_eq "the husk key sent to a public preview does not reach the box" "$(seen authorization)" ""
conns=$(curl -s -o /dev/null -o /dev/null -w '%{num_connects} ' --max-time 30 "$P/one" "$P/two")
expect_eq "keep-alive: two requests on one connection (num_connects 1 then 0)" "$conns" "1 0 "
curl -sv -o /dev/null -o /dev/null --max-time 30 "$P/one" "$P/two" 2>"$T_SCRATCH/v"
check "curl reports re-using the connection" grep -qi "re-using existing connection" "$T_SCRATCH/v"
# The connection to the box: kept for the same client's next request
# through this preview, never shared with another client, and replaced
# when the box closed it.
python3 - "$PORT" "$TOK_PUB" >"$T_SCRATCH/reuse" <<'PYEOF' || true
import http.client, json, sys
port, tok = int(sys.argv[1]), sys.argv[2]
def get(c, path):
    c.request("GET", "/p/%s%s" % (tok, path))
    r = c.getresponse()
    body = r.read()
    return r.status, json.loads(body)["peer_port"] if r.status == 200 else None
a = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
b = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
out = {}
out["a1"] = get(a, "/r1")
out["b1"] = get(b, "/r1")
out["a2"] = get(a, "/r2")
out["b2"] = get(b, "/r2")
out["a3"] = get(a, "/r3?close=1")  # the box closes after this answer, unannounced
out["a4"] = get(a, "/r4")
out["a5"] = get(a, "/r5")
print(json.dumps(out))
PYEOF
REUSE=$(cat "$T_SCRATCH/reuse")
rj() { python3 -c 'import json,sys; print(eval(sys.argv[2], {"j": json.loads(sys.argv[1])}))' "$REUSE" "$1" 2>/dev/null; }
expect_eq "box connection: every request of two interleaved clients answered"   "$(rj '[v[0] for v in j.values()]')" "[200, 200, 200, 200, 200, 200, 200]"
expect_eq "box connection: a client's second request goes on its first one's connection to the box"   "$(rj 'j["a1"][1] == j["a2"][1] and j["b1"][1] == j["b2"][1]')" True
expect_eq "box connection: another client never gets it" "$(rj 'j["a1"][1] != j["b1"][1]')" True
expect_eq "box connection: one the box closed unannounced is replaced, and the request answered"   "$(rj 'j["a4"][1] != j["a3"][1] and j["a5"][1] == j["a4"][1]')" True
head -c $((2 << 20)) /dev/urandom >"$T_SCRATCH/up"
UPSUM=$(sha256sum <"$T_SCRATCH/up" | cut -d' ' -f1)
preq "$P/upload" -X POST --data-binary @"$T_SCRATCH/up"
expect_code "POST of 2 MiB with Content-Length: 200" 200
expect_eq "the box got the 2 MiB body intact (sha256, length)" "$(jf '[j["body_sha256"], j["body_len"]]')" "[\"$UPSUM\", 2097152]"
preq "$P/upload-chunked" -X POST -H "Transfer-Encoding: chunked" --data-binary @"$T_SCRATCH/up"
expect_code "POST of 2 MiB with Transfer-Encoding chunked: 200" 200
expect_eq "the box got the chunked body intact (sha256, length)" "$(jf '[j["body_sha256"], j["body_len"]]')" "[\"$UPSUM\", 2097152]"
preq "$P/put" -X PUT --data-binary "small body"
expect_eq "PUT with a small body: method and sha256" "$(jf '[j["method"], j["body_sha256"]]')" \
  "[\"PUT\", \"$(printf 'small body' | sha256sum | cut -d' ' -f1)\"]"
BIGSUM=$(python3 "$SRV" big 3000000 | sha256sum | cut -d' ' -f1)
preq "$P/big?n=3000000"
expect_code "a 3 MB response: 200" 200
expect_eq "it arrives byte-exact (sha256)" "$(sha256sum <"$T_SCRATCH/pb" | cut -d' ' -f1)" "$BIGSUM"
preq "$P/big?n=1000" -I
expect_code "HEAD: 200" 200
expect_eq "HEAD has the Content-Length of the body it does not send" "$(rhdr content-length)" 1000
printf 'HEAD /p/%s/big?n=1000 HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' "$TOK_PUB" |
  python3 "$SRV" raw 127.0.0.1 "$PORT" --timeout 10 >"$T_SCRATCH/head"
expect_eq "HEAD: nothing follows the reply's head" \
  "$(python3 -c 'import sys; d=open(sys.argv[1],"rb").read(); i=d.find(b"\r\n\r\n"); print(len(d) - i - 4 if i >= 0 else "no head")' "$T_SCRATCH/head")" 0
out=$(curl -s --max-time 30 -I "$P/big?n=1000" --next -s --max-time 30 "$P/big?n=5000" | tail -c 5000 | sha256sum | cut -d' ' -f1)
expect_eq "a GET after a HEAD on the same connection gets its whole body" "$out" \
  "$(python3 "$SRV" big 5000 | sha256sum | cut -d' ' -f1)"
preq "$P/chunked?n=200"
expect_code "a chunked response: 200" 200
expect_eq "every chunk arrives, in order" "$(grep -c '^chunk ' "$T_SCRATCH/pb") $(tail -n1 "$T_SCRATCH/pb")" "200 end"
preq "$P/status?code=418"
expect_code "the box's own status goes through (418)" 418

# Streaming: the first event arrives before the box sends the second, which
# it sends only once the suite says so (gate file in the box's /tmp).
curl -sN --max-time 60 "$P/sse?gate=/tmp/gate1" >"$T_SCRATCH/sse" 2>&1 &
SSE=$!
check "SSE: the first event arrives while the box holds the second" wait_file_has "$T_SCRATCH/sse" "event: one" 20
check "SSE: the second has not arrived yet" not grep -q "event: two" "$T_SCRATCH/sse"
bx "$A" 'touch /tmp/gate1'
check "SSE: once the box sends it, the second arrives" wait_file_has "$T_SCRATCH/sse" "event: two" 20
wait "$SSE"
expect_eq "SSE: the stream ends cleanly" "$?" 0

# Cookies, path form.
preq "$P/cookie"
rhdr set-cookie >"$T_SCRATCH/cookies"
expect_eq "the three cookies come back" "$(wc -l <"$T_SCRATCH/cookies")" 3
check "no Set-Cookie keeps a Domain attribute (path form)" not grep -qi 'domain' "$T_SCRATCH/cookies"
check "Path=/ becomes Path=/p/<token>/" grep -qiE "^a=1;.*path=/p/$TOK_PUB/(;|\$)" "$T_SCRATCH/cookies"
check "path=/sub is rewritten under /p/<token>/" grep -qiE "^b=2;.*path=/p/$TOK_PUB/" "$T_SCRATCH/cookies"
check "the other attributes stay (HttpOnly, Secure)" \
  bash -c "grep -qi '^a=1;.*httponly' '$T_SCRATCH/cookies' && grep -qi '^b=2;.*secure' '$T_SCRATCH/cookies'"

# WebSocket through a preview of the echo server.
mkpreview "$A" 8001 '{"public":true}' || not_ok "a public preview of the WebSocket port"
TOK_WS=$TOKEN
python3 "$SRV" wsclient "ws://127.0.0.1:$PORT/p/$TOK_WS/" >"$T_SCRATCH/ws" 2>&1
WSRC=$?
expect_eq "WebSocket: the upgrade through the preview is 101" "$(sed -n 1p "$T_SCRATCH/ws")" "handshake 101"
check "WebSocket: a text message comes back" grep -qx "text ok" "$T_SCRATCH/ws"
check "WebSocket: a binary message comes back" grep -qx "binary ok" "$T_SCRATCH/ws"
check "WebSocket: a 70000-byte message comes back" grep -qx "large ok" "$T_SCRATCH/ws"
expect_eq "WebSocket: the close handshake completes" "$WSRC" 0
mkpreview "$A" 8001 '{}' || not_ok "an access key preview of the WebSocket port"
TOK_WSK=$TOKEN
python3 "$SRV" wsclient "ws://127.0.0.1:$PORT/p/$TOK_WSK/" >"$T_SCRATCH/ws" 2>&1
expect_eq "WebSocket with access key, no key: 401" "$(sed -n 1p "$T_SCRATCH/ws")" "handshake 401"
python3 "$SRV" wsclient "ws://127.0.0.1:$PORT/p/$TOK_WSK/" --header "Authorization: Bearer $KEY_A" --header "X-Husk-Key: $KEY_A" --headers-too >"$T_SCRATCH/ws" 2>&1
expect_eq "WebSocket with access key and the key: echoes everything" "$?" 0
check "the box's WebSocket server did not get the husk key" bash -c "grep '^headers ' '$T_SCRATCH/ws' | grep -q . && ! grep '^headers ' '$T_SCRATCH/ws' | grep -qiE 'authorization|x-husk|$KEY_A'"

# ---- access password ------------------------------------------------------------
mkpreview "$A" 8000 '{"access":"password"}' || not_ok "a password preview (got $CODE: $PBODY)"
PV_PW=$PV
TOK_PW=$TOKEN
check "the password is in the create reply" [ -n "$PASS" ]
api GET "/v1/sandboxes/$A/previews/$PV_PW"
check "it is not in the preview's description" not grep -qF "$PASS" <<<"$BODY"
expect_eq "its access is password" "$(jf 'j["access"]')" password
preq "$URL/p/$TOK_PW/pw"
expect_code "access password, nothing sent: 401" 401
check "with WWW-Authenticate: Basic" grep -qi '^basic' <<<"$(rhdr www-authenticate)"
preq "$URL/p/$TOK_PW/pw" -u "me:wrong-$PASS"
expect_code "a wrong password: 401" 401
preq "$URL/p/$TOK_PW/pw" -H "Authorization: Bearer $KEY_A"
expect_code "the tenant's key instead of the password: 401" 401
preq "$URL/p/$TOK_PW/pw" -u "anyone:$PASS"
expect_code "the password with any user name: 200" 200
expect_eq "the box does not get the Authorization header" "$(seen authorization)" ""
check "nor the password anywhere" not grep -qF "$PASS" <<<"$BODY"
preq "$URL/p/$TOK_PW/pw" -u "someone-else:$PASS"
expect_code "another user name, same password: 200" 200

# ---- host form ----------------------------------------------------------------------
mkpreview "$A" 8000 '{"public":true}' || not_ok "a public preview for the host form"
TOK_H=$TOKEN
HN="8000-$(box_dns "$A")-$TOK_H.$DOMAIN"
preq "$URL/hello/there?q=1" -H "Host: $HN:$PORT"
expect_code "host form: Host <port>-<box>-<token>.$DOMAIN reaches the box: 200" 200
expect_eq "host form: the path is passed unchanged" "$(jf 'j["path"]')" "/hello/there?q=1"
expect_eq "host form: X-Forwarded-Host is that name" "$(seen x-forwarded-host)" "$HN:$PORT"
hu_host=$(python3 -c 'import sys, urllib.parse as u; x=u.urlsplit(sys.argv[1]); print(x.hostname, x.port or 80)' "$HOSTURL")
read -r hu_name hu_port <<<"$hu_host"
preq "${HOSTURL}resolved" --connect-to "$hu_name:$hu_port:127.0.0.1:$PORT"
expect_code "host form: host_url itself, its name connected to the daemon (curl --connect-to): 200" 200
expect_eq "host form: the box got /resolved" "$(jf 'j["path"]')" /resolved
preq "$URL/cookie" -H "Host: $HN:$PORT"
rhdr set-cookie >"$T_SCRATCH/cookies"
check "host form: no Set-Cookie keeps a Domain attribute" not grep -qi 'domain' "$T_SCRATCH/cookies"
check "host form: Path=/ stays /" grep -qiE '^a=1;.*path=/(;|$)' "$T_SCRATCH/cookies"
preq "$URL/x" -H "Host: 8001-$(box_dns "$A")-$TOK_H.$DOMAIN:$PORT"
expect_code "host form: the token with another port in the name: 404" 404
new_box '{}' || not_ok "box C (another box of A)"
C=$BOX
preq "$URL/x" -H "Host: 8000-$(box_dns "$C")-$TOK_H.$DOMAIN:$PORT"
expect_code "host form: the token with another box in the name: 404" 404
preq "$URL/x" -H "Host: 8000-$(box_dns "$A")-$tampered.$DOMAIN:$PORT"
expect_code "host form: a tampered token: 404" 404
preq "$URL/x" -H "Host: 8000-$(box_dns "$A")-$TOK_H.other.test:$PORT"
check "host form: another domain is not a preview (got $CODE)" not grep -q '"method"' <<<"$BODY"
preq "$URL/x" -H "Host: 8000-$(box_dns "$A")-$TOK_KEY.$DOMAIN:$PORT"
expect_code "host form, access key, no key: 401" 401
preq "$URL/x" -H "Host: 8000-$(box_dns "$A")-$TOK_KEY.$DOMAIN:$PORT" -H "Authorization: Bearer $KEY_A"
expect_code "host form, access key, with the key: 200" 200
expect_eq "host form: the key does not reach the box" "$(seen authorization)" ""
python3 "$SRV" wsclient "ws://8001-$(box_dns "$A")-$TOK_WS.$DOMAIN:$PORT/" --connect "127.0.0.1:$PORT" >"$T_SCRATCH/ws" 2>&1
expect_eq "host form: WebSocket echoes text, binary and a large message" "$?:$(grep -c ' ok$' "$T_SCRATCH/ws")" "0:4"

# ---- a hostile box ----------------------------------------------------------------------
mkpreview "$A" 8002 '{"public":true}' || not_ok "a preview of the smuggling server"
S=$PURL
curl -s --max-time 30 "$S/a" -o "$T_SCRATCH/s1" "$S/b" -o "$T_SCRATCH/s2"
check "smuggling: the first answer is the box's real one, and only it" grep -qx 'real-[0-9]*' "$T_SCRATCH/s1"
check "smuggling: the second request on the same connection gets a real answer, and only it" grep -qx 'real-[0-9]*' "$T_SCRATCH/s2"
check "smuggling: never the bytes the box appended" not grep -q SMUGGLED "$T_SCRATCH/s1" "$T_SCRATCH/s2"
printf 'GET /p/%s/one HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /p/%s/two HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\nGET /p/%s/three HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' \
  "$TOKEN" "$TOKEN" "$TOKEN" | python3 "$SRV" raw 127.0.0.1 "$PORT" --timeout 15 >"$T_SCRATCH/pipe"
check "smuggling: three pipelined requests get no smuggled answer" not grep -q SMUGGLED "$T_SCRATCH/pipe"
expect_eq "smuggling: they get three real answers" "$(grep -o 'real-[0-9]*' "$T_SCRATCH/pipe" | wc -l)" 3
mkpreview "$A" 8003 '{"public":true}' || not_ok "a preview of the Content-Length + Transfer-Encoding server"
preq "$PURL/x"
expect_code "a box reply with both Content-Length and Transfer-Encoding: 502" 502
check "none of its body reaches the client" not grep -qE 'hello|SMUGGLED' <<<"$BODY"
B3=$PURL
for bad in "hugehead:1.1 MB of reply header" "switch:a 101 nobody asked for" "garbage:bytes that are not HTTP" \
  "close:nothing (it closes the connection)" "badlength:Content-Length: 5, 6"; do
  preq "$B3/${bad%%:*}"
  expect_eq "a box that answers with ${bad#*:}: 502" "$CODE" 502
done
check "the daemon is healthy after the broken replies" healthy
mkpreview "$A" 8009 '{"public":true}' || not_ok "a preview of a port nothing listens on"
preq "$PURL/x"
expect_code "nothing listens on the port: 502" 502
# A client request with both framings: refused, or forwarded with one only.
printf 'POST /p/%s/cl-te HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n' "$TOK_PUB" |
  python3 "$SRV" raw 127.0.0.1 "$PORT" --timeout 10 >"$T_SCRATCH/clte"
BODY=$(sed -n '/^{/p' "$T_SCRATCH/clte" | head -n1)
# refused_or_one_framing: the reply is a 400, or the box saw one framing.
refused_or_one_framing() {
  [[ "$(head -n1 "$T_SCRATCH/clte")" == *" 400 "* ]] && return 0
  [ "$(python3 -c 'import json,sys; h=[k.lower() for k,v in json.loads(sys.argv[1])["headers"]]; print(int("content-length" in h and "transfer-encoding" in h))' "$BODY" 2>/dev/null)" = 0 ]
}
check "a client request with both Content-Length and Transfer-Encoding: 400, or the box sees one framing only" \
  refused_or_one_framing

# ---- limits of a preview -------------------------------------------------------------
mkpreview "$A" 8000 '{"public":true,"limits":{"max_body":1024,"max_header":2048,"max_connections":2}}' ||
  not_ok "a preview with small limits (got $CODE: $PBODY)"
L=$PURL
head -c 1000 /dev/urandom >"$T_SCRATCH/b1000"
head -c 2000 /dev/urandom >"$T_SCRATCH/b2000"
preq "$L/small" -X POST --data-binary @"$T_SCRATCH/b1000"
expect_code "a 1000-byte body under max_body 1024: 200" 200
expect_eq "it arrives intact" "$(jf 'j["body_sha256"]')" "$(sha256sum <"$T_SCRATCH/b1000" | cut -d' ' -f1)"
preq "$L/big" -X POST --data-binary @"$T_SCRATCH/b2000"
expect_code "a 2000-byte body over max_body 1024: 413" 413
preq "$L/big" -X POST -H "Transfer-Encoding: chunked" --data-binary @"$T_SCRATCH/b2000"
expect_code "a 2000-byte chunked body over max_body 1024: 413" 413
preq "$L/hdr" -H "X-Pad: $(head -c 4000 /dev/zero | tr '\0' a)"
expect_code "4000 bytes of header over max_header 2048: 431" 431
preq "$L/hdr" -H "X-Pad: $(head -c 500 /dev/zero | tr '\0' a)"
expect_code "500 bytes of header: 200" 200
curl -sN --max-time 60 "$L/sse?gate=/tmp/gate2" >"$T_SCRATCH/mc1" 2>&1 &
MC1=$!
curl -sN --max-time 60 "$L/sse?gate=/tmp/gate2" >"$T_SCRATCH/mc2" 2>&1 &
MC2=$!
check "max_connections 2: two streams held open" \
  bash -c "for i in \$(seq 200); do grep -q 'event: one' '$T_SCRATCH/mc1' && grep -q 'event: one' '$T_SCRATCH/mc2' && exit 0; sleep 0.1; done; exit 1"
preq "$L/third"
expect_code "max_connections 2: a third request at once: 503" 503
bx "$A" 'touch /tmp/gate2'
wait "$MC1" "$MC2"
preq "$L/after"
expect_code "once the streams end, a request gets through again: 200" 200

# A preview's requests count in its tenant's share of the connection
# threads: tenant A's streams through its previews can fill A's share,
# never B's.
KEY=$ADMIN
api PUT "/v1/tenants/$TID_A/quota" -d '{"max_requests":2}'
expect_code "tenant A's max_requests set to 2" 200
KEY=$KEY_A
curl -sN --max-time 60 "$P/sse?gate=/tmp/gate3" >"$T_SCRATCH/tl1" 2>&1 &
TL1=$!
curl -sN --max-time 60 "$P/sse?gate=/tmp/gate3" >"$T_SCRATCH/tl2" 2>&1 &
TL2=$!
check "tenant share: two streams through A's preview held open" \
  bash -c "for i in \$(seq 200); do grep -q 'event: one' '$T_SCRATCH/tl1' && grep -q 'event: one' '$T_SCRATCH/tl2' && exit 0; sleep 0.1; done; exit 1"
preq "$P/third"
expect_code "tenant share: a third request through A's preview: 429" 429
KEY=$KEY_B
api GET /v1/sandboxes
expect_code "tenant share: tenant B's requests are not held back" 200
KEY=$ADMIN
api PUT "/v1/tenants/$TID_A/quota" -d '{"max_requests":null}'
KEY=$KEY_A
bx "$A" 'touch /tmp/gate3'
wait "$TL1" "$TL2"
preq "$P/after-share"
expect_code "tenant share: once the streams end, A's preview answers again: 200" 200

mkpreview "$A" 8000 '{"public":true,"limits":{"idle_timeout":2}}' || not_ok "a preview with idle_timeout 2"
curl -sN --max-time 40 "$PURL/sse?gate=/tmp/never" >"$T_SCRATCH/idle" 2>&1
rc=$?
check "idle_timeout 2: a reply that goes silent is ended by the daemon, not by curl's 40 s bound (curl rc $rc)" [ "$rc" != 28 ]
check "idle_timeout 2: what came before the silence arrived" grep -q "event: one" "$T_SCRATCH/idle"
mkpreview "$A" 8000 '{"public":true,"limits":{"max_duration":2}}' || not_ok "a preview with max_duration 2"
curl -sN --max-time 40 "$PURL/tick?n=120" >"$T_SCRATCH/dur" 2>&1
rc=$?
check "max_duration 2: a stream that never pauses is ended by the daemon, not by curl's 40 s bound (curl rc $rc)" [ "$rc" != 28 ]
check "max_duration 2: it was cut before its 120 events" [ "$(grep -c '^event: tick' "$T_SCRATCH/dur")" -lt 120 ]

# ---- hostile clients -------------------------------------------------------------
python3 "$SRV" slowloris 127.0.0.1 "$PORT" "/p/$TOK_PUB/slow" 15 --conns 6 >"$T_SCRATCH/slow" 2>&1 &
SLOW=$!
BGPIDS+=("$SLOW")
wait_file_has "$T_SCRATCH/slow" opened 10
preq "$P/while-slow" --max-time 10
expect_code "while 6 clients send their preview request a byte a second, another's preview request is answered" 200
wait "$SLOW"
BGPIDS=()
check "the slow clients were cut by --request-timeout 3 ($(tail -n1 "$T_SCRATCH/slow"))" grep -qx "closed 6 of 6" "$T_SCRATCH/slow"
python3 -c '
import sys
tok = sys.argv[1]
head = "GET /p/%s/huge HTTP/1.1\r\nHost: 127.0.0.1\r\n" % tok
head += "".join("X-Huge-%d: %s\r\n" % (i, "h" * 1000) for i in range(300))
sys.stdout.write(head + "\r\n")' "$TOK_PUB" | python3 "$SRV" raw 127.0.0.1 "$PORT" --timeout 10 >"$T_SCRATCH/huge" 2>/dev/null
first=$(head -n1 "$T_SCRATCH/huge" | tr -d '\r')
check "300 KB of headers: 431 or the connection closed (got '${first:-closed}')" \
  bash -c "[ -z '$first' ] || grep -q ' 431' <<<'$first'"
check "the daemon goes on serving" healthy
preq "$P/after-huge"
expect_code "and previews too" 200

# ---- the access log ------------------------------------------------------------------
api GET "/v1/sandboxes/$A/previews/$PV_PUB/access"
expect_code "the public preview's access log" 200
expect_eq "oldest first: the first record is the first request" "$(jf 'j["access"][0]["path"]')" /first-public-request
ts_of() { jf '[a.get("ts", a.get("at")) for a in j["access"]]'; }
expect_eq "records are in order of time" "$(jf '(lambda x: x == sorted(x))([a.get("ts", a.get("at")) for a in j["access"]])')" true
expect_eq "a record has remote, method, path, status, bytes_in, bytes_out" \
  "$(jf 'all({"remote","method","path","status","bytes_in","bytes_out"} <= set(a) for a in j["access"])')" true
expect_eq "the remote is the client's address" "$(jf 'j["access"][0]["remote"]')" 127.0.0.1
# (a record's path may or may not keep the query: compared without it)
expect_eq "the 418 is recorded with its status" "$(jf '[a["status"] for a in j["access"] if a["path"].split("?")[0] == "/status"]')" "[418]"
check "no record holds the token" not grep -qF "$TOK_PUB" <<<"$BODY"
echo "# access log: $(jf '[[a.get("method"), a.get("path"), a.get("status"), a.get("bytes_in"), a.get("bytes_out")] for a in j["access"]]' | head -c 3000)"
logged_bytes() {
  api GET "/v1/sandboxes/$A/previews/$PV_PUB/access"
  [ "$(jf '[a["bytes_out"] for a in j["access"] if a["method"] == "GET" and a["path"].split("?")[0] == "/big"][0]')" = 3000000 ] &&
    [ "$(jf '[a["bytes_in"] for a in j["access"] if a["path"] == "/upload"]')" = "[2097152]" ]
}
check "bytes_out of the 3 MB reply and bytes_in of the 2 MiB upload are counted" wait_for 15 logged_bytes
KEY=$KEY_B
api GET "/v1/sandboxes/$A/previews/$PV_PUB/access"
expect_code "tenant B cannot read A's access log: 404" 404
KEY=$KEY_A

# ---- tenant isolation --------------------------------------------------------------
KEY=$KEY_B
api GET "/v1/sandboxes/$A/previews"
expect_code "B lists A's box's previews: 404" 404
api GET "/v1/sandboxes/$A/previews/$PV_KEY"
expect_code "B gets A's preview: 404" 404
api POST "/v1/sandboxes/$A/ports/8000/previews" -d '{"public":true}'
expect_code "B creates a preview of A's box: 404" 404
check "and gets no token" [ -z "$(jf 'j.get("token")')" ]
api DELETE "/v1/sandboxes/$A/previews/$PV_KEY"
expect_code "B revokes A's preview: 404" 404
KEY=$KEY_A
preq "$URL/p/$TOK_KEY/still" -H "Authorization: Bearer $KEY_A"
expect_code "A's preview still works after B's attempts" 200

# ---- pause ----------------------------------------------------------------------
api POST "/v1/sandboxes/$A/pause"
if [ "$CODE" = 200 ]; then
  preq "$P/paused" --max-time 15
  expect_code "a paused box: 409 without reaching it" 409
  api POST "/v1/sandboxes/$A/resume"
  expect_code "resume" 200
  preq "$P/resumed"
  expect_code "after resume the preview works again: 200" 200
else
  not_ok "pause box A (got $CODE: $BODY)"
fi

# ---- revoke ------------------------------------------------------------------------
mkpreview "$A" 8000 '{"public":true}' || not_ok "a preview to revoke"
PV_R=$PV
R=$PURL
preq "$R/before"
expect_code "before the revocation: 200" 200
curl -sN --max-time 60 "$R/sse?gate=/tmp/never" >"$T_SCRATCH/rev" 2>&1 &
REV=$!
BGPIDS+=("$REV")
wait_file_has "$T_SCRATCH/rev" "event: one" 20
api DELETE "/v1/sandboxes/$A/previews/$PV_R"
expect_code "revoke: 204" 204
pid_gone() { ! kill -0 "$1" 2>/dev/null; }
check "the stream in progress through it is cut" wait_for 20 pid_gone "$REV"
stop_bg
preq "$R/after"
expect_code "after the revocation: 403" 403
check "the box was not reached" not grep -q '"method"' <<<"$BODY"
mkpreview "$A" 8001 '{"public":true}' || not_ok "a WebSocket preview to revoke"
python3 "$SRV" wsclient "ws://127.0.0.1:$PORT/p/$TOKEN/" --hold 30 >"$T_SCRATCH/wshold" 2>&1 &
WSH=$!
BGPIDS+=("$WSH")
if wait_file_has "$T_SCRATCH/wshold" holding 20; then
  api DELETE "/v1/sandboxes/$A/previews/$PV"
  expect_code "revoke a preview with a WebSocket open: 204" 204
  wait "$WSH"
  expect_eq "the open WebSocket through it is cut" "$(tail -n1 "$T_SCRATCH/wshold")" cut
else
  not_ok "a WebSocket held open through a preview ($(tr '\n' ' ' <"$T_SCRATCH/wshold"))"
fi
BGPIDS=()
api GET "/v1/sandboxes/$A/previews/$PV_R"
expect_eq "its state is revoked, with revoked_at" "$(jf '[j["state"], bool(j.get("revoked_at"))]')" '["revoked", true]'
api DELETE "/v1/sandboxes/$A/previews/$PV_R"
expect_code "revoking it again: 204" 204
api DELETE "/v1/sandboxes/$A/previews/pv_000000000000000000000000"
expect_code "revoking an id that does not exist: 404" 404

# ---- expiry --------------------------------------------------------------------------
mkpreview "$A" 8000 '{"public":true,"ttl":1}' || not_ok "a preview of ttl 1 (got $CODE: $PBODY)"
PV_E=$PV
E=$PURL
sleep 2
preq "$E/late"
expect_code "after its ttl: 403" 403
check "the box was not reached" not grep -q '"method"' <<<"$BODY"
api GET "/v1/sandboxes/$A/previews/$PV_E"
expect_eq "its state is expired" "$(jf 'j["state"]')" expired

# ---- audit ------------------------------------------------------------------------------
api GET "/v1/audit?box=$A&action=preview.create&limit=1000"
check "preview.create is audited (ok, 201)" [ "$(jf 'len([r for r in j["records"] if r["outcome"] == "ok" and r["status"] == 201])')" -ge 10 ]
AUD=$BODY
api GET "/v1/audit?box=$A&action=preview.revoke&limit=1000"
check "preview.revoke is audited" [ "$(jf 'len([r for r in j["records"] if r["outcome"] == "ok"])')" -ge 1 ]
AUD="$AUD$BODY"
check "no audit record holds a token" not grep -qFf "$T_SCRATCH/tokens" <<<"$AUD"
check "no audit record holds a password" not grep -qFf "$T_SCRATCH/secrets" <<<"$AUD"
check "the daemon's log holds no token" not grep -qFf "$T_SCRATCH/tokens" "$SERVE_LOG"
grep -Ff "$T_SCRATCH/tokens" "$SERVE_LOG" | head -n 3 | sed 's/^/# a log line with a token: /'

# ---- the box still has no network --------------------------------------------------------
check "box A, previewed and used, still has only lo (/proc/net/dev)" only_lo "$A"

# ---- bound on live previews of one box ------------------------------------------------------
n=0
for i in $(seq 64); do
  api POST "/v1/sandboxes/$C/ports/9000/previews" -d '{"public":true}'
  [ "$CODE" = 201 ] && n=$((n + 1))
  [ "$i" = 1 ] && FIRST_C=$(jf 'j["id"]')
done
expect_eq "64 live previews of one box: all created" "$n" 64
api POST "/v1/sandboxes/$C/ports/9000/previews" -d '{"public":true}'
check "the 65th is refused with a 4xx (got $CODE)" [ "${CODE:0:1}" = 4 ]
api DELETE "/v1/sandboxes/$C/previews/$FIRST_C"
api POST "/v1/sandboxes/$C/ports/9000/previews" -d '{"public":true}'
expect_code "once one is revoked, a new one: 201" 201

# ---- ended boxes ---------------------------------------------------------------------------
api GET "/v1/sandboxes/$C/previews"
for pv in $(jf '" ".join(p["id"] for p in j["previews"] if p["state"] == "active")'); do
  api DELETE "/v1/sandboxes/$C/previews/$pv"
done
api GET "/v1/sandboxes/$C/previews"
expect_eq "box C's previews are all revoked" "$(jf 'sorted(set(p["state"] for p in j["previews"]))')" '["revoked"]'
mkpreview "$C" 8000 '{"public":true}' || not_ok "a preview of box C"
CP=$PURL
api DELETE "/v1/sandboxes/$C"
expect_code "delete box C" 200
preq "$CP/x"
check "the preview of an ended box: 404 or 410 (got $CODE)" [ "$CODE" = 404 -o "$CODE" = 410 ]
api POST "/v1/sandboxes/$C/ports/8000/previews" -d '{"public":true}'
expect_code "a preview of an ended box: 409" 409
api DELETE "/v1/sandboxes/$A"
expect_code "delete box A" 200
preq "$P/x"
check "A's previews once A ended: 404 or 410 (got $CODE)" [ "$CODE" = 404 -o "$CODE" = 410 ]

# ---- nothing left ------------------------------------------------------------------------------
check "box A is gone: no cgroup, no process" wait_for 20 box_gone "$A"
check "box C is gone" wait_for 20 box_gone "$C"
no_live_boxes() { [ -z "$(live_box_cgroups)" ]; }
check "no box of this daemon is left" wait_for 20 no_live_boxes
check "no client of this suite is left running" [ -z "$(pgrep -f "$SRV")" ]
check "the daemon is healthy" healthy
serve_stop
expect_eq "the daemon stops cleanly" "$SERVE_RC" 0
serve_finish
