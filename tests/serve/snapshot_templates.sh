#!/bin/bash
# Snapshots of boxes of an image template: the box's writable layer over
# the template comes back in a box made from the snapshot (files it
# changed, deleted -- the overlay's whiteouts -- and directories it made
# anew over the template's -- opaque ones), and a snapshot whose template
# was replaced since is refused unless asked to rebase.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"
. "$(dirname "$0")/../template/template.bash"

if ! have_busybox; then
  not_ok "busybox is installed (scripts/deps.sh test installs busybox-static)"
  finish
  exit 1
fi
L=$T_SCRATCH/layers
busybox_root "$L/base"
echo base >"$L/base/etc/motd"
mkdir -p "$L/base/opt/dir"
echo lower >"$L/base/opt/dir/old"
echo keep >"$L/base/opt/keep"
mkimage "$T_SCRATCH/base.tar" --layer "$L/base"
cp -a "$L/base" "$L/v2"
echo v2 >"$L/v2/etc/version"
mkimage "$T_SCRATCH/v2.tar" --layer "$L/v2"

if ! serve_start; then
  not_ok "the daemon starts"
  serve_finish
  exit 1
fi
new_tenant snap-tpl || not_ok "a tenant"
KEY=$TKEY
api POST "/v1/templates?name=bb" --data-binary "@$T_SCRATCH/base.tar" -H 'Content-Type: application/x-tar'
expect_code "a busybox template" 201

new_box '{"template":"bb","timeout":600}' || not_ok "a box of it"
SRC=$BOX
run() { api POST "/v1/sandboxes/$1/exec" -d "$(python3 -c 'import json,sys; print(json.dumps({"cmd":["sh","-c",sys.argv[1]]}))' "$2")"; }
run "$SRC" 'rm /etc/motd && echo new > /etc/new && rm -r /opt/dir && mkdir /opt/dir && echo fresh > /opt/dir/fresh && echo changed > /opt/keep && echo ws > /workspace/w'
expect_code "the box changes its root" 200
expect_eq "it ran" "$(jf 'j["exit_code"]')" 0
LISTING='ls /etc/motd 2>&1; cat /etc/new /opt/keep /workspace/w; ls /opt/dir'
run "$SRC" "$LISTING"
WANT=$(jf 'j["stdout"]')
api POST "/v1/sandboxes/$SRC/snapshots" -d '{}'
expect_code "snapshot it" 201
SNAP=$(jf 'j["id"]')
expect_eq "it is of the template" "$(jf 'j["template"]')" bb

new_box "{\"snapshot\":\"$SNAP\"}" || not_ok "a box from the snapshot ($BODY)"
DST=$BOX
api GET "/v1/sandboxes/$DST"
expect_eq "of the same template" "$(jf 'j["template"]')" bb
run "$DST" "$LISTING"
expect_eq "its root is the snapshot's: deleted files stay deleted, an emptied directory stays empty of the template's files" "$(jf 'j["stdout"]')" "$WANT"
check "the deleted file is really gone (a whiteout, not a file)" grep -q "No such file" <<<"$WANT"
run "$DST" 'cat /etc/motd 2>/dev/null; ls /opt/dir'
check "the template's old file under the remade directory does not show" [ "$(jf 'j["stdout"]')" = "fresh" ]
api POST /v1/sandboxes -d "{\"snapshot\":\"$SNAP\",\"template\":\"default\"}"
expect_code "a box of another template from it is refused" 400

# husk run on the same data directory, while the daemon runs.
out=$("$HUSK" run --data "$DATA" --from-snapshot "$SNAP" -- sh -c "$LISTING" 2>"$T_SCRATCH/run.err")
rc=$?
expect_eq "husk run --from-snapshot: a one-shot box with the snapshot's files" "$rc:$out" "0:$WANT"
"$HUSK" run --data "$DATA" --from-snapshot s_000000000000000000000000 -- true 2>"$T_SCRATCH/run.err"
expect_eq "husk run --from-snapshot of an unknown id fails as husk" "$?" 125
check "saying no such snapshot" grep -q "no such snapshot" "$T_SCRATCH/run.err"

# ---- the template replaced ----------------------------------------------------------
for b in $SRC $DST; do api DELETE "/v1/sandboxes/$b"; done
api DELETE /v1/templates/bb
expect_code "the template is deleted" 204
api POST "/v1/templates?name=bb" --data-binary "@$T_SCRATCH/v2.tar" -H 'Content-Type: application/x-tar'
expect_code "a new template of the same name" 201
api POST /v1/sandboxes -d "{\"snapshot\":\"$SNAP\"}"
expect_code "restoring over the replaced template is refused" 409
check "the error says to rebase" grep -q rebase <<<"$BODY"
new_box "{\"snapshot\":\"$SNAP\",\"rebase\":true}" || not_ok "with rebase it is restored ($BODY)"
run "$BOX" 'cat /etc/version /etc/new; ls /etc/motd 2>&1'
check "rebased: the new template's files and the snapshot's changes" grep -q "^v2" <<<"$(jf 'j["stdout"]')"
check "the snapshot's own file is there" grep -q "^new" <<<"$(jf 'j["stdout"]')"
api DELETE "/v1/sandboxes/$BOX"
api DELETE "/v1/snapshots/$SNAP"
expect_code "the snapshot is deleted" 204
serve_finish
