#!/bin/bash
# Preview URLs under attack: each check replays what a security review of
# the proxy (docs/previews.md) did to it, and says what must happen now.
# A box's page may not act on the API's origin (service worker scope,
# Clear-Site-Data, HSTS, HTTP auth challenges) in the path form; Basic
# credentials and realms stay with their preview; the connection to the
# box is kept only after a GET, HEAD or OPTIONS without a body (a body the
# box left unread never runs into another person's request, a POST is
# never sent twice); Set-Cookie parsed as browsers do; URL holders cannot
# lock the owner out of its own API (nor out of revoking); a bare CR or a
# control byte is a 400, never a header of the client's choosing; the
# WebSocket relay neither spins after a revocation nor outlives the
# preview's expiry; no token in the daemon's log; the access log stays
# bounded per preview; a box that refuses an upload early is answered
# for, never hung on; Host always reaches the box.  The servers and clients
# are tests/serve/preview_servers.py.  No timing assertions: waits are
# "until X, at most N s"; the one CPU bound is a bound on a spin.  Every
# check connects to 127.0.0.1 only.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"
. "$(dirname "$0")/preview.bash"

SRV="$(cd "$(dirname "$0")" && pwd)/preview_servers.py"
DOMAIN=preview.test

# --request-timeout 30: the held uploads below stay held while the checks
# run (they are cut by their client, not by the daemon).
if ! serve_start --preview-domain "$DOMAIN" --request-timeout 30; then
  not_ok "the daemon starts with --preview-domain $DOMAIN"
  serve_finish
  exit 1
fi
PORT=${URL##*:}
new_tenant atk-a || not_ok "tenant A"
KEY_A=$TKEY
TID_A=$TID
KEY=$KEY_A
touch "$T_SCRATCH/tokens" "$T_SCRATCH/secrets"

# ---- helpers (the shared ones: preview.bash) ------------------------------------

# raw_req FORMAT ARGS...: the bytes printf makes of them sent as they are
# to the daemon; the reply in $T_SCRATCH/raw, its status line in
# RAW_STATUS ("closed" if nothing came back).
raw_req() {
  printf "$@" | python3 "$SRV" raw 127.0.0.1 "$PORT" --timeout 10 >"$T_SCRATCH/raw" 2>/dev/null
  RAW_STATUS=$(head -n1 "$T_SCRATCH/raw" | tr -d '\r')
  [ -n "$RAW_STATUS" ] || RAW_STATUS=closed
}
is_400() { [[ "$RAW_STATUS" == "HTTP/1.1 400 "* ]]; }
# box_log_count TEXT: lines of the box's http server's request log with TEXT.
box_log_count() {
  bx "$A" "grep -cF -- '$1' /tmp/http.log || true"
  echo "${OUT:-error}"
}
# cpu_ticks PID: user + system CPU time of a process (all its threads).
cpu_ticks() { awk '{sub(/^.*\) /, ""); print $12 + $13}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)

# ---- a box and its servers ------------------------------------------------------
new_box '{"timeout":1800}' || not_ok "box A (got $CODE: $BODY)"
A=$BOX
check "the helper servers run in box A (http 8000, ws 8001, naive 8050, retry 8060, early 8070)" start_servers "$A" "http:8000:--log /tmp/http.log" ws:8001 naive:8050 retry:8060 early:8070
mkpreview "$A" 8000 '{"public":true}' || not_ok "a public preview of 8000 (got $CODE: $PBODY)"
P=$PURL
TOK_P=$TOKEN
HN="8000-$(box_dns "$A")-$TOK_P.$DOMAIN"
tampered=$(python3 -c 'import sys; t=sys.argv[1]; print(t[:-1] + ("a" if t[-1] != "a" else "b"))' "$TOK_P")

# ---- 1. headers that act on the whole origin ------------------------------------------
preq "$P/origin"
expect_code "path form: a box page that sends origin-wide headers is served (200)" 200
for h in Service-Worker-Allowed Clear-Site-Data Strict-Transport-Security WWW-Authenticate Proxy-Authenticate; do
  expect_eq "path form: a box reply's $h (it would act on the API's whole origin) never reaches the client" "$(rhdr "$h")" ""
done
expect_eq "path form: the box's other headers still reach the client (X-Kept)" "$(rhdr x-kept)" yes
preq "$P/origin?code=401"
expect_code "path form: a box's own 401 passes as a 401" 401
expect_eq "path form: a box's 401 has no challenge (a browser would answer it with another realm's credentials)" \
  "$(rhdr www-authenticate)" ""
preq "$URL/origin" -H "Host: $HN:$PORT"
expect_eq "host form (an origin of its own): Service-Worker-Allowed passes" "$(rhdr service-worker-allowed)" /
check "host form: WWW-Authenticate passes ($(rhdr www-authenticate | tr '\n' '|'))" \
  grep -qF 'Basic realm="husk preview"' <<<"$(rhdr www-authenticate)"

# ---- 2. realms and Basic credentials -------------------------------------------------------
mkpreview "$A" 8000 '{"access":"password"}' || not_ok "a password preview (got $CODE: $PBODY)"
PV_PW1=$PV
TOK_PW1=$TOKEN
PASS_PW1=$PASS
mkpreview "$A" 8000 '{"access":"password"}' || not_ok "a second password preview"
PV_PW2=$PV
TOK_PW2=$TOKEN
PASS_PW2=$PASS
preq "$URL/p/$TOK_PW1/x"
expect_code "a password preview asked without credentials: 401" 401
REALM1=$(rhdr www-authenticate)
check "its challenge has a realm naming that preview (Basic realm=\"husk preview $PV_PW1\", got '$REALM1')" \
  grep -qF "Basic realm=\"husk preview $PV_PW1\"" <<<"$REALM1"
preq "$URL/p/$TOK_PW2/x"
REALM2=$(rhdr www-authenticate)
check "another password preview's realm names it, not the first (got '$REALM2')" \
  bash -c "grep -qF 'Basic realm=\"husk preview $PV_PW2\"' <<<'$REALM2' && ! grep -qF '$PV_PW1' <<<'$REALM2'"
preq "$URL/p/$TOK_PW1/x" -u "me:$PASS_PW2"
expect_code "the second preview's password does not open the first: 401" 401
preq "$P/basic" -u "alice:basic-secret-1"
expect_code "public path form with HTTP Basic credentials (a browser's, cached for another realm): 200" 200
expect_eq "public path form: Authorization: Basic is never forwarded to the box" "$(seen authorization)" ""
check "public path form: the credentials are nowhere in what the box got" \
  not grep -qF "$(printf 'alice:basic-secret-1' | base64)" <<<"$BODY"
preq "$P/basic" -H "Authorization: basic $(printf 'bob:basic-secret-2' | base64)"
expect_eq "public path form: nor with the scheme in lower case (basic ...)" "$(seen authorization)" ""
preq "$P/bearer" -H "Authorization: Bearer app-token-not-husks"
expect_eq "public path form: a Bearer token of the app's own (not a husk key) still reaches the box" \
  "$(seen authorization)" "Bearer app-token-not-husks"
preq "$URL/basic" -H "Host: $HN:$PORT" -u "alice:basic-secret-1"
expect_eq "public host form (an origin of its own): Authorization: Basic is forwarded to the box" \
  "$(seen authorization)" "Basic $(printf 'alice:basic-secret-1' | base64)"

# ---- 3. the connection to the box after a request with a body ---------------------------------
python3 "$SRV" reuse 127.0.0.1 "$PORT" "$TOK_P" >"$T_SCRATCH/reuse" 2>&1
REUSE=$(tail -n1 "$T_SCRATCH/reuse")
echo "# reuse: $REUSE"
rj() { python3 -c 'import json,sys; print(eval(sys.argv[2], {"j": json.loads(sys.argv[1])}))' "$REUSE" "$1" 2>/dev/null; }
expect_eq "every request of the reuse sequences answered 200" \
  "$(rj 'sorted(set(st for seq in j.values() for st, _ in seq))')" "[200]"
expect_eq "GET then GET on one client connection: the second on the first's box connection (the probe works)" \
  "$(rj 'j["get_get"][0][1] == j["get_get"][1][1]')" True
expect_eq "POST with a body, then GET on the same client connection: the GET gets another box connection" \
  "$(rj 'j["post_body_get"][1][1] != j["post_body_get"][2][1]')" True
expect_eq "POST without any body (no Content-Length), then GET: another box connection" \
  "$(rj 'j["post_nobody_get"][0][1] != j["post_nobody_get"][1][1]')" True
expect_eq "POST with Content-Length: 0, then GET: another box connection" \
  "$(rj 'j["post_len0_get"][0][1] != j["post_len0_get"][1][1]')" True
expect_eq "PUT with a body, then GET: another box connection" \
  "$(rj 'j["put_body_get"][0][1] != j["put_body_get"][1][1]')" True
expect_eq "GET with a body, then GET: another box connection" \
  "$(rj 'j["get_body_get"][0][1] != j["get_body_get"][1][1]')" True
expect_eq "DELETE, then GET: another box connection" \
  "$(rj 'j["delete_get"][0][1] != j["delete_get"][1][1]')" True
expect_eq "OPTIONS without a body, then GET: the same box connection (it may be kept)" \
  "$(rj 'j["options_get"][0][1] == j["options_get"][1][1]')" True
# A sharing front proxy: one person's POST with a body the app ignores,
# then another person's GET with a secret cookie, on one connection.
mkpreview "$A" 8050 '{"public":true}' || not_ok "a public preview of the naive app"
NV=$PURL
python3 "$SRV" frontshare 127.0.0.1 "$PORT" "$TOKEN" VICTIM-SECRET-42 >"$T_SCRATCH/front" 2>&1
FRONT=$(tail -n1 "$T_SCRATCH/front")
echo "# front proxy: $FRONT"
fj() { python3 -c 'import json,sys; print(eval(sys.argv[2], {"j": json.loads(sys.argv[1])}))' "$FRONT" "$1" 2>/dev/null; }
expect_eq "front proxy: the first person's POST (its body a request head, ignored by the app) gets the app's answer" \
  "$(fj 'j["first"]')" "[200, 'pong\\n']"
expect_eq "front proxy: the second person's GET on the same connection gets its own answer (its cookie greeted)" \
  "$(fj 'j["second"]')" "[200, 'hello session=VICTIM-SECRET-42\\n']"
preq "$NV/notes"
expect_code "the app's notes can be listed" 200
check "the app never recorded the second person's request head (its cookie) as the first's body: notes $BODY" \
  not grep -q VICTIM-SECRET <<<"$BODY"

# ---- 4. a POST is never sent twice -------------------------------------------------------------
mkpreview "$A" 8060 '{"public":true}' || not_ok "a public preview of the charging app"
RT=$PURL
charges() { preq "$RT/count"; sed -n 's/^charges=//p' <<<"$BODY"; }
c0=$(charges)
out=$(curl -s -o /dev/null -w '%{http_code} ' --max-time 30 "$RT/warm" \
  --next -s -o /dev/null -w '%{http_code} %{num_connects}' --max-time 30 -X POST "$RT/charge")
echo "# GET /warm, POST /charge: $out"
check "GET, then a POST without a body on the same client connection (num_connects 0): the POST answered or 502 (got '$out')" \
  grep -qE '^200 (200|502) 0$' <<<"$out"
c1=$(charges)
expect_eq "the box was charged exactly once by that POST (a kept box connection the box drops is never retried for a POST)" \
  "$((c1 - c0))" 1
out=$(curl -s -o /dev/null -w '%{http_code} ' --max-time 30 "$RT/warm" \
  --next -s -o /dev/null -w '%{http_code} %{num_connects}' --max-time 30 -X POST -d 'amount=5' "$RT/charge")
c2=$(charges)
check "GET, then a POST with a body: answered or 502 (got '$out')" grep -qE '^200 (200|502) 0$' <<<"$out"
expect_eq "the box was charged exactly once by that POST" "$((c2 - c1))" 1
out=$(curl -s -o /dev/null -w '%{http_code} ' --max-time 30 "$RT/warm?close=1" \
  --next -s -o /dev/null -w '%{http_code} %{num_connects}' --max-time 30 -X POST "$RT/charge")
c3=$(charges)
check "GET whose box connection the box then closes, then a POST: answered or 502 (got '$out')" grep -qE '^200 (200|502) 0$' <<<"$out"
expect_eq "the box was charged exactly once by that POST" "$((c3 - c2))" 1

# ---- 5. Set-Cookie parsed as browsers do ----------------------------------------------------------
preq "$P/cookie2"
rhdr set-cookie >"$T_SCRATCH/cookies"
echo "# path form cookies: $(tr '\n' '|' <"$T_SCRATCH/cookies")"
expect_eq "path form: the four cookies come back" "$(wc -l <"$T_SCRATCH/cookies")" 4
check "path form: 'Domain<tab>=preview.test', 'Domain =x', ' DOMAIN=x', '<tab>domain<tab><tab>= ...' all lose their Domain" \
  not grep -qi 'domain' "$T_SCRATCH/cookies"
check "path form: 'Path<tab>=/x' becomes Path=/p/<token>/x" grep -qE "^sess=evil;.*Path=/p/$TOK_P/x(;|\$)" "$T_SCRATCH/cookies"
# paths_under FILE TOKEN: every Path attribute (any case, any spaces) of
# the cookies in FILE is under /p/TOKEN/.
paths_under() {
  python3 -c '
import sys
for line in open(sys.argv[1]):
    for a in line.split(";")[1:]:
        n, _, v = a.partition("=")
        if n.strip(" \t").lower() == "path" and not v.strip(" \t").startswith("/p/%s/" % sys.argv[2]):
            sys.exit(1)' "$1" "$2"
}
check "path form: no cookie keeps a Path outside /p/<token>/" paths_under "$T_SCRATCH/cookies" "$TOK_P"
check "path form: the other attributes stay (HttpOnly, Secure)" \
  bash -c "grep -qi '^d1=1;.*httponly' '$T_SCRATCH/cookies' && grep -qi '^d3=3;.*secure' '$T_SCRATCH/cookies'"
preq "$URL/cookie2" -H "Host: $HN:$PORT"
rhdr set-cookie >"$T_SCRATCH/cookies"
check "host form: none of them keeps its Domain either" not grep -qi 'domain' "$T_SCRATCH/cookies"
check "host form: 'Path<tab>=/x' is Path=/x" grep -qE '^sess=evil;.*Path=/x(;|$)' "$T_SCRATCH/cookies"

# ---- 6. URL holders cannot lock the owner out -------------------------------------------------------
mkpreview "$A" 8000 '{"public":true}' || not_ok "a public preview to fill the share with"
PV_LOCK=$PV
LK=$PURL
KEY=$ADMIN
api PUT "/v1/tenants/$TID_A/quota" -d '{"max_requests":2}'
expect_code "tenant A's max_requests set to 2" 200
KEY=$KEY_A
curl -s --max-time 60 -o "$T_SCRATCH/hold1" "$LK/hold?gate=/tmp/gate-lock" &
H1=$!
curl -s --max-time 60 -o "$T_SCRATCH/hold2" "$LK/hold?gate=/tmp/gate-lock" &
H2=$!
BGPIDS+=("$H1" "$H2")
held_both() { [ "$(box_log_count /hold?gate=/tmp/gate-lock)" = 2 ]; }
check "two requests through a public preview of A reach the box, which does not answer them yet" wait_for 30 held_both
preq "$LK/third"
expect_code "they fill A's preview share (max_requests 2): a third request through the preview gets 429" 429
[ "$CODE" = 429 ] || echo "# the held requests: $(kill -0 $H1 2>/dev/null && echo running || echo ended: $(head -c 200 "$T_SCRATCH/hold1")); $(kill -0 $H2 2>/dev/null && echo running || echo ended: $(head -c 200 "$T_SCRATCH/hold2"))"
api GET "/v1/sandboxes/$A/previews"
expect_code "meanwhile the owner's own API calls work (list the previews): 200" 200
bx "$A" 'echo still-mine'
expect_eq "meanwhile the owner can exec in its box" "$CODE:$OUT" "200:still-mine"
api DELETE "/v1/sandboxes/$A/previews/$PV_LOCK"
expect_code "meanwhile the owner can revoke the preview: 204" 204
check "the revocation cuts the two held requests" wait_for 20 bash -c "! kill -0 $H1 2>/dev/null && ! kill -0 $H2 2>/dev/null"
check "neither had got the box's answer (they were cut, not answered)" not grep -qs '"method"' "$T_SCRATCH/hold1" "$T_SCRATCH/hold2"
stop_bg
bx "$A" 'touch /tmp/gate-lock'
preq "$P/after-lock"
expect_code "the share is free again: another preview of A answers 200" 200
# Wrong passwords with bodies that never come: refused, and never counted.
mkpreview "$A" 8000 '{"access":"password"}' || not_ok "a password preview for the held uploads"
PV_PW3=$PV
TOK_PW3=$TOKEN
PASS_PW3=$PASS
rm -f "$T_SCRATCH/release"
: >"$T_SCRATCH/slowbody"
python3 "$SRV" slowbody 127.0.0.1 "$PORT" "/p/$TOK_PW3/upload" 8 25 --until "$T_SCRATCH/release" --finish \
  --header "Authorization: Basic $(printf 'x:not-the-password' | base64)" >"$T_SCRATCH/slowbody" 2>&1 &
SB=$!
BGPIDS+=("$SB")
check "8 uploads to a password preview with a wrong password, their bodies held back: all 8 connected" \
  wait_file_has "$T_SCRATCH/slowbody" "^opened 8" 10
# refused8 PV: the preview's access log has 8 refusals (401), recorded as
# each is refused (its reply may wait for its body).
refused8() {
  api GET "/v1/sandboxes/$A/previews/$1/access"
  [ "$(jf 'len([a for a in j["access"] if a["status"] == 401])')" = 8 ]
}
check "all 8 are refused 401 at once, while their bodies are held (the preview's access log)" wait_for 15 refused8 "$PV_PW3"
api GET "/v1/sandboxes/$A/previews"
expect_code "8 uploads held with a wrong password (max_requests 2): the owner's API still answers 200" 200
preq "$URL/p/$TOK_PW3/right" -u "me:$PASS_PW3"
expect_code "and the right password still gets through that preview (the refused ones hold no share): 200" 200
preq "$P/while-held"
expect_code "and another preview of the tenant: 200" 200
touch "$T_SCRATCH/release"
wait_for 30 pid_gone "$SB"
BGPIDS=()
echo "# held uploads: $(tr '\n' ' ' <"$T_SCRATCH/slowbody")"
expect_eq "every upload with a wrong password, once its body is in, was refused 401" \
  "$(tail -n1 "$T_SCRATCH/slowbody")" "statuses 401 401 401 401 401 401 401 401"
KEY=$ADMIN
api PUT "/v1/tenants/$TID_A/quota" -d '{"max_requests":null}'
expect_code "tenant A's max_requests back to the default" 200
KEY=$KEY_A

# ---- 7. a bare CR, control bytes, two lengths ---------------------------------------------------------
preq "$P/inj-cr-value" -H $'X-Pad: a\rX-Forwarded-For: 6.6.6.6'
expect_code "a bare CR in a header value (X-Pad: a<CR>X-Forwarded-For: 6.6.6.6): 400" 400
raw_req 'GET /p/%s/inj-cr-name HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Bad\rX-Forwarded-For: 6.6.6.6\r\nConnection: close\r\n\r\n' "$TOK_P"
check "a bare CR in a header name (X-Bad<CR>X-Forwarded-For: 6.6.6.6): 400 (got $RAW_STATUS)" is_400
raw_req 'GET /p/%s/inj-ctl-value HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Pad: a\001b\r\nConnection: close\r\n\r\n' "$TOK_P"
check "a control byte (0x01) in a header value: 400 (got $RAW_STATUS)" is_400
for b in 01 1b 7f 0d 09; do
  raw_req "GET /p/%s/inj-path-a\\x${b}b HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n" "$TOK_P"
  check "byte 0x$b in the path: 400 (got $RAW_STATUS)" is_400
done
raw_req 'POST /p/%s/inj-two-cl HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 3\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc' "$TOK_P"
check "two Content-Length headers (3 and 3): 400 (got $RAW_STATUS)" is_400
raw_req 'POST /p/%s/inj-two-cl2 HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 3\r\nContent-Length: 8\r\nConnection: close\r\n\r\nabcGET /x' "$TOK_P"
check "two Content-Length headers (3 and 8): 400 (got $RAW_STATUS)" is_400
preq "$URL/inj-cr-host" -H "Host: $HN:$PORT" -H $'X-Pad: a\rX-Forwarded-For: 6.6.6.6'
expect_code "host form: a bare CR in a header value: 400" 400
expect_eq "the box never saw any of these requests" "$(box_log_count inj-)" 0
expect_eq "the box never saw an injected X-Forwarded-For 6.6.6.6" "$(box_log_count 6.6.6.6)" 0
preq "$P/after-inj"
expect_code "the preview answers as before" 200

# ---- 8. the WebSocket relay after a revocation ---------------------------------------------------------
mkpreview "$A" 8001 '{"public":true}' || not_ok "a WebSocket preview to revoke"
PV_WS=$PV
python3 "$SRV" wshold "ws://127.0.0.1:$PORT/p/$TOKEN/" --wait 20 --linger 12 >"$T_SCRATCH/wsspin" 2>&1 &
WSS=$!
BGPIDS+=("$WSS")
if wait_file_has "$T_SCRATCH/wsspin" '^holding' 20; then
  api DELETE "/v1/sandboxes/$A/previews/$PV_WS"
  expect_code "revoke the preview of a WebSocket whose client holds its socket and never reads: 204" 204
  check "the client sees its connection closed (at most 20 s)" wait_file_has "$T_SCRATCH/wsspin" '^closed$' 25
  t0=$(cpu_ticks "$SPID")
  sleep 3
  t1=$(cpu_ticks "$SPID")
  lingering=$(grep -c '^lingering$' "$T_SCRATCH/wsspin")
  done_=$(grep -c '^done$' "$T_SCRATCH/wsspin")
  echo "# daemon CPU over 3 s after the revocation: $((t1 - t0)) ticks of 1/$HZ s"
  check "while the client still holds its socket, the daemon does not spin: < 2 s of CPU in 3 s (got $((t1 - t0)) ticks at $HZ/s)" \
    [ "$lingering:$done_" = "1:0" -a "$((t1 - t0))" -lt "$((2 * HZ))" ]
else
  not_ok "a WebSocket held through a preview ($(tr '\n' ' ' <"$T_SCRATCH/wsspin"))"
fi
stop_bg

# ---- 9. no token in the daemon's log ---------------------------------------------------------------------
preq "$P/logged?a=%00"
expect_code "a NUL in the query (?a=%00): 400" 400
preq "$P/logged" -H $'X-Pad: a\rb'
expect_code "a bare CR in a header: 400" 400
preq "$URL/p/$tampered/logged"
expect_code "a mistyped token: 404" 404
preq "$URL/p/$tampered/logged?a=%00"
check "a mistyped token with a NUL: refused (got $CODE)" [ "${CODE:0:1}" = 4 ]
preq "$URL/logged?a=%00" -H "Host: $HN:$PORT"
check "host form, a NUL in the query: refused (got $CODE)" [ "${CODE:0:1}" = 4 ]
echo "$tampered" >>"$T_SCRATCH/tokens"
check "the daemon logged those requests (the log names the preview, or /p/*)" \
  grep -qE '/p/(pv_[0-9a-f]+|\*)/logged' "$SERVE_LOG"
check "the daemon's log holds no token, nor the mistyped one" not grep -qFf "$T_SCRATCH/tokens" "$SERVE_LOG"
grep -Ff "$T_SCRATCH/tokens" "$SERVE_LOG" | head -n 3 | sed 's/^/# a log line with a token: /'
check "the daemon's log holds no preview password" not grep -qFf "$T_SCRATCH/secrets" "$SERVE_LOG"

# ---- 10. the access log stays bounded per preview -----------------------------------------------------------
mkpreview "$A" 8000 || not_ok "a key preview (1)"
PV_K1=$PV
TOK_K1=$TOKEN
mkpreview "$A" 8000 || not_ok "a key preview (2)"
PV_K2=$PV
TOK_K2=$TOKEN
python3 "$SRV" flood 127.0.0.1 "$PORT" 1300 "/p/$TOK_K1/x" "/p/$TOK_K2/x" >"$T_SCRATCH/flood" 2>&1
echo "# flood: $(tail -n1 "$T_SCRATCH/flood")"
expect_eq "2600 requests with no key, alternating between two key previews: all refused 401" \
  "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["codes"])' "$(tail -n1 "$T_SCRATCH/flood")" 2>/dev/null)" "{'401': 2600}"
# access_rows PV: how many access records the preview has (all its pages
# of 1000; the body is read from its file: it is too long for an argument).
access_rows() {
  local after=0 n=0 k page
  for page in 1 2 3 4 5 6; do
    api GET "/v1/sandboxes/$A/previews/$1/access?after=$after&limit=1000"
    [ "$CODE" = 200 ] || { echo "error $CODE"; return; }
    read -r k after < <(python3 -c 'import json,sys; a=json.load(open(sys.argv[1]))["access"]; print(len(a), a[-1]["seq"] if a else 0)' "$T_SCRATCH/body")
    [ "${k:-0}" = 0 ] && break
    n=$((n + k))
  done
  echo "$n"
}
api GET "/v1/sandboxes/$A/previews/$PV_K1/access?limit=1000"
listed=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["access"]))' "$T_SCRATCH/body" 2>/dev/null)
check "GET .../access?limit=1000 lists at most 1000 (got ${listed:-none})" [ "${listed:-1001}" -le 1000 ]
r1=$(access_rows "$PV_K1")
r2=$(access_rows "$PV_K2")
check "the first preview keeps between 1000 and 1063 records of its 1300 (got $r1)" [ "$r1" -ge 1000 -a "$r1" -le 1063 ] 2>/dev/null
check "the second, whose requests alternated with the first's, too (got $r2)" [ "$r2" -ge 1000 -a "$r2" -le 1063 ] 2>/dev/null
DB=$(find "$DATA" -maxdepth 2 -name '*.db' -type f 2>/dev/null | head -n1)
if command -v sqlite3 >/dev/null 2>&1 && [ -n "$DB" ]; then
  most=$(sqlite3 "file:$DB?mode=ro" 'SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM preview_access GROUP BY preview_id)' 2>&1)
  check "the database holds at most 1063 access records for any preview (got $most, $DB)" [ "$most" -le 1063 ] 2>/dev/null
else
  echo "# no sqlite3 or no database file in $DATA: the row count is checked through the API only"
fi

# ---- 11. nothing outlives the preview's expiry --------------------------------------------------------------
mkpreview "$A" 8001 '{"public":true,"ttl":3}' || not_ok "a WebSocket preview of ttl 3"
python3 "$SRV" wsping "ws://127.0.0.1:$PORT/p/$TOKEN/" --at 0,6 >"$T_SCRATCH/wsttl" 2>&1
echo "# ttl 3 WebSocket: $(tr '\n' '|' <"$T_SCRATCH/wsttl")"
expect_eq "ttl 3: a WebSocket through it opens (101) and echoes at once" "$(sed -n 1,2p "$T_SCRATCH/wsttl" | tr '\n' '|')" "handshake 101|at 0 echo|"
check "ttl 3: a message sent 6 s later gets no echo (the connection was cut at the expiry)" \
  grep -qE '^at 6 (closed|no echo)$' "$T_SCRATCH/wsttl"
expect_eq "ttl 3: the WebSocket connection is closed (at most 20 s more)" "$(tail -n1 "$T_SCRATCH/wsttl")" eof
mkpreview "$A" 8000 '{"public":true,"ttl":3}' || not_ok "an HTTP preview of ttl 3"
curl -sN --max-time 40 "$PURL/tick?n=120" >"$T_SCRATCH/ttltick" 2>&1
rc=$?
check "ttl 3: a stream that never pauses is ended at the expiry, not by curl's 40 s bound (curl rc $rc)" [ "$rc" != 28 ]
check "ttl 3: it was cut before its 120 events ($(grep -c '^event: tick' "$T_SCRATCH/ttltick"))" \
  [ "$(grep -c '^event: tick' "$T_SCRATCH/ttltick")" -lt 120 ]

# ---- 12. a box that refuses an upload early ------------------------------------------------------------------
mkpreview "$A" 8070 '{"public":true}' || not_ok "a public preview of the early-answering server"
EP=$PURL
head -c $((20 << 20)) /dev/zero >"$T_SCRATCH/up20"
for v in "413:length:" "404:length:" "413:chunked:-H Transfer-Encoding:chunked" "413:no expect:-H Expect:"; do
  want=${v%%:*}
  rest=${v#*:}
  how=${rest%%:*}
  extra=${rest#*:}
  code=$(curl -s -o "$T_SCRATCH/ep" -w '%{http_code}' --max-time 60 -X POST --data-binary @"$T_SCRATCH/up20" $extra "$EP/$want")
  rc=$?
  check "a 20 MiB upload ($how) to a box that answers $want at once and closes: the box's $want or a 502, never a hang (got $code, curl rc $rc)" \
    [ "$rc" != 28 -a \( "$code" = "$want" -o "$code" = 502 \) ]
done
for how in length chunked; do
  extra=()
  [ "$how" = chunked ] && extra=(-H "Transfer-Encoding: chunked")
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 60 -X POST --data-binary @"$T_SCRATCH/up20" "${extra[@]}" "$EP/drop")
  rc=$?
  check "a 20 MiB upload ($how) to a box that closes without an answer: 502, never a hang (got $code, curl rc $rc)" \
    [ "$rc" != 28 -a "$code" = 502 ]
done
check "the daemon is healthy after the early answers" healthy

# ---- 13. Connection: Host ---------------------------------------------------------------------------------------
preq "$P/conn-host" -H 'Connection: Host'
expect_code "a client's Connection: Host: 200" 200
expect_eq "the box still receives its Host header" "$(seen host)" "127.0.0.1:$PORT"
preq "$P/conn-host" -H 'Connection: keep-alive, Host, X-Other' -H 'X-Other: dropped'
expect_eq "Connection: keep-alive, Host, X-Other: Host still reaches the box" "$(seen host)" "127.0.0.1:$PORT"
expect_eq "and the header it names besides (X-Other) does not" "$(seen x-other)" ""
preq "$URL/conn-host" -H "Host: $HN:$PORT" -H 'Connection: Host'
expect_eq "host form, Connection: Host: the box receives the Host" "$(seen host)" "$HN:$PORT"

# ---- nothing left ---------------------------------------------------------------------------------------------
check "the daemon's log holds no token at the end" not grep -qFf "$T_SCRATCH/tokens" "$SERVE_LOG"
api DELETE "/v1/sandboxes/$A"
expect_code "delete box A" 200
check "box A is gone" wait_for 20 box_gone "$A"
check "no client of this suite is left running" [ -z "$(pgrep -f "$SRV")" ]
check "the daemon is healthy" healthy
serve_stop
expect_eq "the daemon stops cleanly" "$SERVE_RC" 0
serve_finish
