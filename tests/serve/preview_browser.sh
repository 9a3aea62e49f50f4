#!/bin/bash
# A person's browser on a preview URL: Debian's Chromium, headless, driven
# by playwright-core (tests/browser/dashboard.mjs), opens a dashboard page
# served by a box through a preview, in the path form and in the host form
# (Chromium's --host-resolver-rules maps *.preview.test to 127.0.0.1), and
# behind a preview password.  The page fetches a relative JSON URL (which
# must stay under /p/<token>/) and shows its number, opens a WebSocket to
# the box's echo server through a second preview, and draws a block of a
# known colour: the screenshot's pixels and the page's text must show them.
# The suite lives here because tests/run.sh runs tests/serve/*.sh; its Node
# files are in tests/browser/.  Every address the browser is sent to is
# 127.0.0.1.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"
. "$(dirname "$0")/preview.bash"

HERE="$(cd "$(dirname "$0")" && pwd)"
SRV="$HERE/preview_servers.py"
. "$HERE/../browser/browser.bash"
DOMAIN=preview.test
if ! browser_setup; then
  finish
  exit 1
fi
if ! serve_start --preview-domain "$DOMAIN"; then
  not_ok "the daemon starts with --preview-domain $DOMAIN"
  serve_finish
  exit 1
fi
PORT=${URL##*:}
new_tenant browser || not_ok "a tenant"
KEY=$TKEY

# browse NAME URL [DRIVER ARGS...]: the dashboard in Chromium; its JSON
# result in $R, the screenshot in $T_SCRATCH/NAME.png.
browse() {
  local name=$1 url=$2; shift 2
  R=$(cd "$BROWSER_DIR" && TMPDIR="$T_SCRATCH" timeout 120 "$NODE" dashboard.mjs --url "$url" \
    --out "$T_SCRATCH/$name.png" --chromium "$CHROMIUM" "$@" 2>"$T_SCRATCH/$name.err")
  [ -n "$R" ] || R='{"error":"no result"}'
  echo "# $name: $(head -c 600 <<<"$R")"
}
rf() { BODY=$R jf "$1"; }
# dashboard_checks NAME: what the page and its screenshot must show.
dashboard_checks() {
  local n=$1
  expect_eq "$n: the page loads (no driver error)" "$(rf 'j.get("error")')" ""
  expect_eq "$n: the dashboard answers 200" "$(rf 'j.get("status")')" 200
  expect_eq "$n: the page shows the number it fetched from data.json (a relative URL)" "$(rf 'j.get("value")')" 4242
  expect_eq "$n: the screenshot shows the block: rgb(18,160,90) at its centre" "$(rf 'j.get("center")')" "[18, 160, 90]"
  expect_eq "$n: and the page's white background beside it" "$(rf 'j.get("outside")')" "[255, 255, 255]"
  check "$n: and the text drawn under the block" [ "$(rf 'j.get("text_pixels") or 0')" -gt 200 ]
  check "$n: the screenshot is a PNG file" bash -c "head -c 8 '$T_SCRATCH/$n.png' | od -An -tx1 | grep -q '89 50 4e 47 0d 0a 1a 0a'"
}

new_box '{"timeout":900}' || not_ok "a box (got $CODE: $BODY)"
A=$BOX
check "the dashboard (http 8000) and the WebSocket echo server (8001) run in the box" start_servers "$A" http:8000 ws:8001
mkpreview "$A" 8000 '{"public":true}' || not_ok "a public preview of the dashboard (got $CODE: $BODY)"
PV_D=$PV
TOK_D=$TOKEN
HOST_D=$HOSTURL
mkpreview "$A" 8001 '{"public":true}' || not_ok "a public preview of the WebSocket server"
TOK_W=$TOKEN
HOST_W=$HOSTURL

# ---- path form ---------------------------------------------------------------
browse path "$URL/p/$TOK_D/dash/?ws=ws://127.0.0.1:$PORT/p/$TOK_W/"
dashboard_checks path
expect_eq "path: the page's WebSocket through the second preview echoes" "$(rf 'j.get("ws")')" "echo:ping-from-dashboard"
expect_eq "path: the relative fetch went to /p/<token>/dash/data.json" \
  "$(rf '[u for u in j.get("requests", []) if u.endswith("data.json")]')" "[\"$URL/p/$TOK_D/dash/data.json\"]"
api GET "/v1/sandboxes/$A/previews/$PV_D/access"
expect_eq "path: the box was asked for /dash/data.json (access log)" \
  "$(jf '[a["status"] for a in j["access"] if a["path"] == "/dash/data.json"]')" "[200]"

# ---- host form ---------------------------------------------------------------
check "host form: the previews have a host_url" [ -n "$HOST_D" -a -n "$HOST_W" ]
# host_url has the port of --preview-domain, none here (the daemon's port is
# picked at its start): the daemon's port is put in.
with_port() { python3 -c 'import sys, urllib.parse as u; x=u.urlsplit(sys.argv[1]); print(x._replace(netloc="%s:%s" % (x.hostname, x.port or sys.argv[2])).geturl())' "$1" "$PORT"; }
HOST_D=$(with_port "$HOST_D")
HOST_W=$(with_port "$HOST_W")
WS_HOST="ws://${HOST_W#http://}"
browse host "${HOST_D}dash/?ws=$WS_HOST" --host-rules "MAP *.$DOMAIN 127.0.0.1"
dashboard_checks host
expect_eq "host: the page's WebSocket through the second preview echoes" "$(rf 'j.get("ws")')" "echo:ping-from-dashboard"
expect_eq "host: the relative fetch went to <host_url>dash/data.json" \
  "$(rf '[u for u in j.get("requests", []) if u.endswith("data.json")]')" "[\"${HOST_D}dash/data.json\"]"

# ---- password ------------------------------------------------------------------
mkpreview "$A" 8000 '{"access":"password"}' || not_ok "a password preview of the dashboard"
TOK_P=$TOKEN
PASS_P=$PASS
browse password "$URL/p/$TOK_P/dash/" --credentials "viewer:$PASS_P"
dashboard_checks password
browse nopassword "$URL/p/$TOK_P/dash/"
expect_eq "without the password the browser gets 401" "$(rf 'j.get("status")')" 401
check "and the dashboard's number is not shown" [ "$(rf 'j.get("value")')" != 4242 ]

# ---- a revoked preview ---------------------------------------------------------------
api DELETE "/v1/sandboxes/$A/previews/$PV_D"
expect_code "revoke the dashboard's preview" 204
browse revoked "$URL/p/$TOK_D/dash/"
expect_eq "the browser gets 403 from the revoked preview" "$(rf 'j.get("status")')" 403
check "and no dashboard" [ "$(rf 'j.get("center")')" != "[18, 160, 90]" ]

# ---- nothing left --------------------------------------------------------------------
api DELETE "/v1/sandboxes/$A"
expect_code "delete the box" 200
check "the box is gone: no cgroup, no process" wait_for 20 box_gone "$A"
no_chromium() { [ -z "$(pgrep -f -- "--user-data-dir=$T_SCRATCH/")" ]; }
check "no Chromium of this suite is left running" wait_for 10 no_chromium
check "the browser profiles were removed" [ -z "$(find "$T_SCRATCH" -maxdepth 1 -name 'husk-chromium-*')" ]
serve_stop
expect_eq "the daemon stops cleanly" "$SERVE_RC" 0
serve_finish
