#!/bin/bash
# The daemon's bounds on snapshots: the number one tenant keeps
# (--tenant-max-snapshots, a box paused to disk keeping one too), each
# tenant counted alone; a refused snapshot or pause leaves the box as it was.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"

if ! serve_start --tenant-max-snapshots 2; then
  not_ok "the daemon starts"
  serve_finish
  exit 1
fi
new_tenant sb-a || not_ok "tenant A"
KEY_A=$TKEY
new_tenant sb-b || not_ok "tenant B"
KEY_B=$TKEY
KEY=$KEY_A
new_box '{"timeout":600}' || not_ok "a box"
api POST "/v1/sandboxes/$BOX/snapshots" -d '{}'
expect_code "a first snapshot" 201
S1=$(jf 'j["id"]')
api POST "/v1/sandboxes/$BOX/snapshots" -d '{}'
expect_code "a second" 201
api POST "/v1/sandboxes/$BOX/snapshots" -d '{}'
expect_code "a third is past the bound: 403" 403
expect_eq "quota_exceeded" "$(jf 'j["error"]["code"]')" quota_exceeded
check "the message says what to do" grep -q "delete some" <<<"$BODY"
api POST "/v1/sandboxes/$BOX/pause" -d '{"keep_memory":false}'
expect_code "a pause to disk needs one too: 403" 403
api GET "/v1/sandboxes/$BOX"
expect_eq "and the box runs on" "$(jf 'j["state"]')" running
api POST "/v1/sandboxes/$BOX/exec" -d '{"cmd":["true"]}'
expect_code "it still runs commands" 200
api GET /v1/snapshots
expect_eq "the refusals left no snapshot" "$(jf 'len(j["snapshots"])')" 2
KEY=$KEY_B
new_box '{"timeout":600}' || not_ok "a box of tenant B"
api POST "/v1/sandboxes/$BOX/snapshots" -d '{}'
expect_code "another tenant has its own bound" 201
KEY=$KEY_A
api DELETE "/v1/snapshots/$S1"
expect_code "delete one" 204
BOX=$(head -n1 "$T_SCRATCH/boxes" | cut -d' ' -f1)
api POST "/v1/sandboxes/$BOX/pause" -d '{"keep_memory":false}'
expect_code "then the pause to disk fits" 200
api POST "/v1/sandboxes/$BOX/resume"
expect_code "and resumes" 200
serve_finish
