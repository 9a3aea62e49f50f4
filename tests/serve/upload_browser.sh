#!/bin/bash
# A person's browser on an upload link: Debian's Chromium, headless,
# driven by playwright-core (tests/browser/upload.mjs), opens the page
# GET /u/<token> serves, chooses files, submits, and must show that they
# were stored: with JavaScript (the page's own script, allowed by its
# CSP nonce, posts through XHR with a progress bar) and without (the form
# posts by itself and the reply is a page).  Each file is then loaded
# into a box with load_file and compared byte for byte; a used one-time
# link is refused to the browser.  The suite lives here because
# tests/run.sh runs tests/serve/*.sh; its Node files are in tests/browser/.
# Every address the browser is sent to is 127.0.0.1.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"
MCPDIR=$(cd "$(dirname "$0")/../mcp" && pwd)
. "$MCPDIR/mcp.bash"

HERE="$(cd "$(dirname "$0")" && pwd)"
. "$HERE/../browser/browser.bash"
if ! browser_setup; then
  finish
  exit 1
fi
if ! serve_start --s3-listen off; then
  not_ok "the daemon starts"
  serve_finish
  exit 1
fi
new_tenant upload-browser || not_ok "a tenant"
KEY=$TKEY

# browse NAME URL FILES [DRIVER ARGS...]: the upload page in Chromium;
# its JSON result in $R.
browse() {
  local name=$1 url=$2 files=$3; shift 3
  R=$(cd "$BROWSER_DIR" && TMPDIR="$T_SCRATCH" timeout 120 "$NODE" upload.mjs --url "$url" \
    --files "$files" --chromium "$CHROMIUM" "$@" 2>"$T_SCRATCH/$name.err")
  [ -n "$R" ] || R='{"error":"no result"}'
  echo "# $name: $(head -c 600 <<<"$R")"
}
rf() { BODY=$R jf "$1"; }
sha() { sha256sum "$1" | cut -d' ' -f1; }
# same_in_box KEY FILE: load_file KEY into the box, then its bytes are FILE's.
same_in_box() {
  tool "$TKEY" load_file "{\"sandbox_id\":\"$B\",\"key\":\"$1\",\"path\":\"in/got\"}"
  [ "$(rq 'sc.get("size")')" = "$(stat -c %s "$2")" ] || return 1
  api GET "/v1/sandboxes/$B/files?path=/workspace/in/got"
  [ "$CODE" = 200 ] && [ "$(sha "$T_SCRATCH/body")" = "$(sha "$2")" ]
}

head -c 300000 /dev/urandom >"$T_SCRATCH/photo.jpg"
printf 'a note from a person\n' >"$T_SCRATCH/note.txt"
new_box || not_ok "a box (got $CODE: $BODY)"
B=$BOX

# ---- with JavaScript: XHR and a progress bar ------------------------------------------
api POST /v1/upload-links -d '{"max_files":2}'
expect_code "an upload link for two files" 201
U1=$(jf 'j["url"]') P1=$(jf 'j["prefix"]')
browse js "$U1" "$T_SCRATCH/photo.jpg"
expect_eq "js: no driver error" "$(rf 'j.get("error")')" ""
expect_eq "js: the page answers 200" "$(rf 'j.get("status")')" 200
expect_eq "js: the page's script posted the file: 201" "$(rf 'j.get("post_status")')" 201
expect_eq "js: the page says it is stored" "$(rf 'j.get("result")')" "Upload complete: 1 file(s) stored (photo.jpg)."
expect_eq "js: the progress bar reached the end" "$(rf 'p[0] == p[1] and p[1] > 300000 if (p := j.get("progress")) else None')" true
expect_eq "js: the CSP blocked nothing (its nonce lets the page's own script run)" "$(rf 'j.get("csp_errors")')" "[]"
check "js: load_file gives the box exactly the file chosen" same_in_box "${P1}photo.jpg" "$T_SCRATCH/photo.jpg"

# ---- without JavaScript: the plain form ----------------------------------------------------
api POST /v1/upload-links -d '{}'
U2=$(jf 'j["url"]') P2=$(jf 'j["prefix"]')
browse nojs "$U2" "$T_SCRATCH/note.txt" --nojs 1
expect_eq "nojs: no driver error" "$(rf 'j.get("error")')" ""
expect_eq "nojs: the form posted by itself: 201" "$(rf 'j.get("post_status")')" 201
expect_eq "nojs: the reply page says it is stored" "$(rf 'j.get("result")')" "Upload complete: 1 file stored."
check "nojs: load_file gives the box exactly the file chosen" same_in_box "${P2}note.txt" "$T_SCRATCH/note.txt"

# ---- the one-time link again ----------------------------------------------------------------
browse again "$U2" "$T_SCRATCH/note.txt"
expect_eq "the used one-time link: the browser gets 410" "$(rf 'j.get("status")')" 410

# ---- nothing left -----------------------------------------------------------------------------
api DELETE "/v1/sandboxes/$B"
expect_code "delete the box" 200
no_chromium() { [ -z "$(pgrep -f -- "--user-data-dir=$T_SCRATCH/")" ]; }
check "no Chromium of this suite is left running" wait_for 10 no_chromium
check "the browser profiles were removed" [ -z "$(find "$T_SCRATCH" -maxdepth 1 -name 'husk-chromium-*')" ]
serve_stop
expect_eq "the daemon stops cleanly" "$SERVE_RC" 0
serve_finish
