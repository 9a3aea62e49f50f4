#!/bin/bash
# Named volumes: a tenant's ext4 images that outlive boxes.  What box A
# writes to its volume box B sees; files belong to the box user; a
# read-only mount refuses writes; one live box at a time; a full volume
# fails writes with ENOSPC and nothing else; another tenant cannot see or
# mount it; bad names, sizes and paths are refused with a reason; a
# SIGKILL of the daemon leaves the mount with the box, and its end frees
# the loop device.  Leak checks count only what this suite made.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"
. "$(dirname "$0")/../template/template.bash"

if ! command -v mkfs.ext4 >/dev/null && [ ! -x /usr/sbin/mkfs.ext4 ] && [ ! -x /sbin/mkfs.ext4 ]; then
  not_ok "mkfs.ext4 is installed (scripts/deps.sh test installs e2fsprogs)"
  finish
  exit 1
fi
if ! serve_start; then
  not_ok "the daemon starts"
  serve_finish
  exit 1
fi
new_tenant vol-a || not_ok "tenant A"
KEY_A=$TKEY
new_tenant vol-b || not_ok "tenant B"
KEY_B=$TKEY
KEY=$KEY_A

# run BOX CMD: one shell command in the box; sets OUT and RC.
run() {
  api POST "/v1/sandboxes/$1/exec" -d "$(python3 -c 'import json,sys; print(json.dumps({"cmd":["sh","-c",sys.argv[1]]}))' "$2")"
  OUT=$(jf 'j["stdout"]')
  ERR=$(jf 'j["stderr"]')
  RC=$(jf 'j["exit_code"]')
}
# Loop devices backed by a file of this suite's data directory.
our_loops() { losetup -a 2>/dev/null | grep -F "$(realpath "$DATA")/volumes" || true; }

api POST /v1/volumes -d '{"name":"work","size":"64M"}'
expect_code "create a volume" 201
VID=$(jf 'j["id"]')
expect_eq "its size" "$(jf 'j["size"]')" $((64 << 20))
expect_eq "nobody mounts it" "$(jf 'j["sandbox"]')" ""
check "its image is in DATA/volumes" [ -f "$DATA/volumes/$VID.img" ]
check "the image is sparse (takes far less than its size)" \
  [ "$(du -k "$DATA/volumes/$VID.img" | cut -f1)" -lt 32768 ]
check "nothing is left in DATA/volumes/tmp" dir_empty "$DATA/volumes/tmp"
api POST /v1/volumes -d '{"name":"work"}'
expect_code "a second volume of the same name: 409" 409
api GET /v1/volumes
expect_eq "the list has it" "$(jf '[v["name"] for v in j["volumes"]]')" '["work"]'
api GET /v1/volumes/work
expect_code "get it by name" 200

# ---- A writes, B reads ----------------------------------------------------
new_box '{"volumes":[{"name":"work","path":"/workspace/data"}]}' || not_ok "box A with the volume (got $CODE: $BODY)"
A=$BOX
expect_eq "the box shows its mount" "$(jf 'j.get("volumes")')" '[{"name": "work", "path": "/workspace/data", "read_only": false}]'
run "$A" 'echo hello > /workspace/data/f && mkdir /workspace/data/d && echo x > /workspace/data/d/g && stat -c "%u:%g" /workspace/data /workspace/data/f /workspace/data/d/g'
expect_eq "A writes into the volume" "$RC" 0
expect_eq "files there are the box user's" "$(echo $OUT)" "1000:1000 1000:1000 1000:1000"
run "$A" 'grep " /workspace/data " /proc/mounts'
check "it is an ext4 mount, nosuid, nodev" grep -q "ext4 rw,nosuid,nodev" <<<"$OUT"
api GET /v1/volumes/work
expect_eq "the volume says A mounts it" "$(jf 'j["sandbox"]')" "$A"
api POST /v1/sandboxes -d '{"volumes":[{"name":"work","path":"/workspace/data"}]}'
expect_code "a second live box cannot mount it: 409" 409
check "the error says who has it" grep -q "$A" <<<"$BODY"
api DELETE /v1/volumes/work
expect_code "delete while mounted: 409" 409
# The snapshot of A holds the mount point, not the volume's files.
api POST "/v1/sandboxes/$A/snapshots" -d '{}'
if [ "$CODE" = 201 ]; then
  SNAP=$(jf 'j["id"]')
  new_box "{\"snapshot\":\"$SNAP\"}" || not_ok "a box from A's snapshot"
  run "$BOX" 'ls -A /workspace/data | wc -l; test -d /workspace/data && echo dir'
  expect_eq "a snapshot holds the mount point as an empty directory, not the volume" "$(echo $OUT)" "0 dir"
  api DELETE "/v1/sandboxes/$BOX"
  api DELETE "/v1/snapshots/$SNAP"
else
  ok "snapshots are not available here: the exclusion is not checked ($CODE)"
fi
# A snapshot that puts a symlink where a mount goes (the box tries to have
# its volume mounted over /etc): the create is refused, the volume stays free.
new_box '{}' || not_ok "a box to snapshot a symlink"
Z=$BOX
run "$Z" 'ln -s /etc /workspace/evil && mkdir -p /workspace/ok && echo f > /workspace/file'
api POST "/v1/sandboxes/$Z/snapshots" -d '{}'
if [ "$CODE" = 201 ]; then
  ZS=$(jf 'j["id"]')
  api POST /v1/volumes -d '{"name":"spare","size":"16M"}'
  expect_code "a spare volume" 201
  api POST /v1/sandboxes -d "{\"snapshot\":\"$ZS\",\"volumes\":[{\"name\":\"spare\",\"path\":\"/workspace/evil\"}]}"
  expect_code "a volume over a snapshot's symlink is refused: 400" 400
  check "the error says it is not a directory" grep -q "not a directory" <<<"$BODY"
  [ "$CODE" = 201 ] && api DELETE "/v1/sandboxes/$(jf 'j["id"]')"
  api POST /v1/sandboxes -d "{\"snapshot\":\"$ZS\",\"volumes\":[{\"name\":\"spare\",\"path\":\"/workspace/file/x\"}]}"
  expect_code "a volume under a snapshot's file is refused: 400" 400
  [ "$CODE" = 201 ] && api DELETE "/v1/sandboxes/$(jf 'j["id"]')"
  api GET /v1/volumes/spare
  expect_eq "the refused creates left the volume free" "$(jf 'j["sandbox"]')" ""
  new_box "{\"snapshot\":\"$ZS\",\"volumes\":[{\"name\":\"spare\",\"path\":\"/workspace/ok\"}]}" || not_ok "a volume over a snapshot's directory (got $CODE: $BODY)"
  run "$BOX" 'test -L /workspace/evil && grep -q " /workspace/ok ext4" /proc/mounts && echo fine'
  expect_eq "over the snapshot's directory it mounts" "$OUT" fine
  api DELETE "/v1/sandboxes/$BOX"
  api DELETE "/v1/snapshots/$ZS"
  api DELETE /v1/volumes/spare
  expect_code "delete the spare volume" 204
fi
api DELETE "/v1/sandboxes/$Z"
api DELETE "/v1/sandboxes/$A"
expect_code "delete A" 200
check "no loop device of ours is left after A" wait_for 10 sh -c "! losetup -a 2>/dev/null | grep -qF '$(realpath "$DATA")/volumes'"

new_box '{"volumes":[{"name":"work","path":"/workspace/x/y"}]}' || not_ok "box B with the volume, elsewhere (got $CODE: $BODY)"
B=$BOX
run "$B" 'cat /workspace/x/y/f /workspace/x/y/d/g; stat -c %u:%g /workspace/x /workspace/x/y/f'
expect_eq "B sees what A wrote" "$(echo $OUT)" "hello x 1000:1000 1000:1000"
api DELETE "/v1/sandboxes/$B"

# ---- read-only --------------------------------------------------------------
new_box '{"volumes":[{"name":"work","path":"/workspace/ro","read_only":true}]}' || not_ok "a read-only mount (got $CODE: $BODY)"
R=$BOX
run "$R" 'cat /workspace/ro/f; echo no > /workspace/ro/n 2>&1; echo "rc=$?"'
check "it reads" grep -q hello <<<"$OUT"
check "writes fail with EROFS" grep -q "Read-only file system" <<<"$OUT$ERR"
api DELETE "/v1/sandboxes/$R"

# ---- full volume --------------------------------------------------------------
api POST /v1/volumes -d '{"name":"small","size":16777216}'
expect_code "a 16 MiB volume" 201
new_box '{"disk":"512M","volumes":[{"name":"small","path":"/workspace/s"}]}' || not_ok "a box with it (got $CODE: $BODY)"
S=$BOX
run "$S" 'dd if=/dev/zero of=/workspace/s/big bs=1M count=64 2>&1; echo "rc=$?"'
check "writing past its size fails with ENOSPC" grep -q "No space left on device" <<<"$OUT"
run "$S" 'echo fine > /workspace/other && cat /workspace/other'
expect_eq "the box goes on (its workspace is not the volume)" "$OUT" fine
check "the daemon is healthy" healthy
api DELETE "/v1/sandboxes/$S"

# ---- tenants ------------------------------------------------------------------
KEY=$KEY_B
api GET /v1/volumes/work
expect_code "B cannot see A's volume: 404" 404
api GET /v1/volumes
expect_eq "B's list is empty" "$(jf 'len(j["volumes"])')" 0
api POST /v1/sandboxes -d '{"volumes":[{"name":"work","path":"/workspace/data"}]}'
expect_code "B cannot mount A's volume: 404" 404
api DELETE /v1/volumes/work
expect_code "B cannot delete A's volume: 404" 404
KEY=$KEY_A

# ---- refusals -------------------------------------------------------------------
bad() { # DESC BODY-OF-CREATE WORD
  api POST /v1/sandboxes -d "$2"
  if [ "$CODE" = 400 ] && grep -qi -- "$3" <<<"$BODY"; then ok "$1"; else not_ok "$1 (got $CODE: $BODY)"; fi
  [ "$CODE" = 201 ] && api DELETE "/v1/sandboxes/$(jf 'j["id"]')"
}
bad "a path with .. is refused" '{"volumes":[{"name":"work","path":"/workspace/../etc"}]}' normalized
bad "a path outside /workspace is refused" '{"volumes":[{"name":"work","path":"/etc/x"}]}' "under /workspace"
bad "/workspace itself is refused" '{"volumes":[{"name":"work","path":"/workspace"}]}' "under /workspace"
bad "a relative path is refused" '{"volumes":[{"name":"work","path":"workspace/x"}]}' "under /workspace"
bad "a trailing slash is refused" '{"volumes":[{"name":"work","path":"/workspace/x/"}]}' normalized
bad "nested paths are refused" '{"volumes":[{"name":"work","path":"/workspace/a"},{"name":"small","path":"/workspace/a/b"}]}' nested
bad "one volume twice is refused" '{"volumes":[{"name":"work","path":"/workspace/a"},{"name":"work","path":"/workspace/b"}]}' twice
bad "nine mounts are refused" "{\"volumes\":[$(for i in 1 2 3 4 5 6 7 8 9; do printf '{"name":"v%d","path":"/workspace/p%d"}%s' $i $i "$([ $i -lt 9 ] && echo ,)"; done)]}" "at most 8"
bad "an unknown field in a mount is refused" '{"volumes":[{"name":"work","path":"/workspace/a","rw":true}]}' unknown
api POST /v1/sandboxes -d '{"volumes":[{"name":"nope","path":"/workspace/a"}]}'
expect_code "an unknown volume: 404" 404
for n in "" "UPPER" "a_b" "$(printf 'x%.0s' $(seq 64))" "../x"; do
  api POST /v1/volumes -d "{\"name\":\"$n\"}"
  if [ "$CODE" = 400 ] && grep -q "a-z" <<<"$BODY"; then ok "volume name '$n' is refused"; else not_ok "volume name '$n' is refused (got $CODE: $BODY)"; fi
done
for sz in 1048576 '"15M"' '"65G"' '"20000001"'; do
  api POST /v1/volumes -d "{\"name\":\"sz\",\"size\":$sz}"
  if [ "$CODE" = 400 ] && grep -q "MiB" <<<"$BODY"; then ok "size $sz is refused"; else not_ok "size $sz is refused (got $CODE: $BODY)"; fi
done

# ---- SIGKILL of the daemon with a volume mounted ---------------------------------------
new_box '{"volumes":[{"name":"work","path":"/workspace/data"}]}' || not_ok "a box for the crash (got $CODE: $BODY)"
K=$BOX
run "$K" 'echo before > /workspace/data/k'
serve_kill9
serve_start || not_ok "restart after SIGKILL"
api GET "/v1/sandboxes/$K"
expect_eq "the box is re-adopted" "$(jf 'j["state"]')" running
run "$K" 'cat /workspace/data/k /workspace/data/f; echo after >> /workspace/data/k'
expect_eq "it still sees the volume" "$(echo $OUT)" "before hello"
api GET /v1/volumes/work
expect_eq "the volume is still its" "$(jf 'j["sandbox"]')" "$K"
api DELETE "/v1/sandboxes/$K"
expect_code "delete it" 200
api GET /v1/volumes/work
expect_eq "then the volume is free" "$(jf 'j["sandbox"]')" ""
check "and no loop device of ours is left" wait_for 10 sh -c "! losetup -a 2>/dev/null | grep -qF '$(realpath "$DATA")/volumes'"

# ---- pause to disk: the box keeps the volume, and gets it back -------------------
new_box '{"timeout":600,"volumes":[{"name":"work","path":"/workspace/data"}]}' || not_ok "a box to pause to disk (got $CODE: $BODY)"
P=$BOX
run "$P" 'echo paused >> /workspace/data/k'
api POST "/v1/sandboxes/$P/pause" -d '{"keep_memory":false}'
if [ "$CODE" = 200 ]; then
  check "paused to disk, its loop device goes with its jail" wait_for 10 sh -c "! losetup -a 2>/dev/null | grep -qF '$(realpath "$DATA")/volumes'"
  api GET /v1/volumes/work
  expect_eq "the volume stays the paused box's" "$(jf 'j["sandbox"]')" "$P"
  api POST /v1/sandboxes -d '{"volumes":[{"name":"work","path":"/workspace/data"}]}'
  expect_code "another box cannot take it meanwhile: 409" 409
  api POST "/v1/sandboxes/$P/resume"
  expect_code "resume from disk" 200
  run "$P" 'cat /workspace/data/k'
  expect_eq "resumed, it has the volume again" "$(echo $OUT)" "before after paused"
else
  ok "pause to disk is not available here ($CODE): not checked"
fi
api DELETE "/v1/sandboxes/$P"

# ---- tenant deletion takes its volumes --------------------------------------------
new_tenant vol-c || not_ok "tenant C"
KEY=$TKEY
api POST /v1/volumes -d '{"name":"c","size":"16M"}'
expect_code "C's volume" 201
CVID=$(jf 'j["id"]')
KEY=$ADMIN
api DELETE "/v1/tenants/$TID"
check "deleting tenant C answers 2xx ($CODE)" [ "${CODE:0:1}" = 2 ]
check "its volume's image is gone" wait_for 10 test ! -e "$DATA/volumes/$CVID.img"
KEY=$KEY_A

# ---- what a crash leaves is swept at the next start ---------------------------------
serve_stop
: >"$DATA/volumes/tmp/v_0123456789abcdef01234567.img"
: >"$DATA/volumes/v_0123456789abcdef76543210.img"
# A create the daemon died in: its row 'creating', its image half made.
TA=$(sqlite3 "$DATA/husk.db" "SELECT tenant_id FROM volumes WHERE id = '$VID'")
if [ -n "$TA" ] && sqlite3 "$DATA/husk.db" "INSERT INTO volumes (id, tenant_id, name, size, state, created_ms) VALUES ('v_0123456789abcdef01234567', '$TA', 'halfway', 16777216, 'creating', 1)"; then
  ok "a row left creating (made by hand)"
else
  not_ok "a row left creating (made by hand)"
fi
serve_start || not_ok "restart"
check "a volume row left creating is removed at start" \
  [ "$(sqlite3 "file:$DATA/husk.db?mode=ro" "SELECT count(*) FROM volumes WHERE name = 'halfway'")" = 0 ]
api POST /v1/volumes -d '{"name":"halfway","size":"16M"}'
expect_code "its name is free again" 201
api DELETE /v1/volumes/halfway
check "a half-made image in tmp is removed at start" [ ! -e "$DATA/volumes/tmp/v_0123456789abcdef01234567.img" ]
check "an image no volume names is removed at start" [ ! -e "$DATA/volumes/v_0123456789abcdef76543210.img" ]
check "the volume's own image stays" [ -f "$DATA/volumes/$VID.img" ]

# ---- at once: two creates race for one volume, exactly one wins ------------------
racers=()
for i in 1 2; do
  curl -s -o "$T_SCRATCH/race$i" -w '%{http_code}' -X POST -H "Authorization: Bearer $KEY" \
    -d '{"volumes":[{"name":"work","path":"/workspace/data"}]}' "$URL/v1/sandboxes" >"$T_SCRATCH/race$i.code" &
  racers+=($!)
done
wait "${racers[@]}" # not the daemon's pid
codes=$(cat "$T_SCRATCH/race1.code" "$T_SCRATCH/race2.code" | tr -d '\n')
check "two creates at once: one 201, one 409 ($codes)" [ "$codes" = 201409 -o "$codes" = 409201 ]
for i in 1 2; do
  id=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1])).get("id",""))' "$T_SCRATCH/race$i" 2>/dev/null)
  [ -n "$id" ] && echo "$id $KEY" >>"$T_SCRATCH/boxes" && W=$id
done
# Deleted and mounted again at once: the next box waits for the loop device
# of the one going away rather than mount the image twice.
api DELETE "/v1/sandboxes/$W"
new_box '{"volumes":[{"name":"work","path":"/workspace/data"}]}' || not_ok "mounted again right after its box's delete (got $CODE: $BODY)"
run "$BOX" 'cat /workspace/data/f'
expect_eq "the next box reads it" "$OUT" hello
api DELETE "/v1/sandboxes/$BOX"

# ---- a box of an image template -----------------------------------------------------
if have_busybox; then
  L=$T_SCRATCH/layers
  busybox_root "$L/base"
  mkimage "$T_SCRATCH/bb.tar" --layer "$L/base" --owner home/app=1000:1000 --user app --workdir /home/app
  api POST "/v1/templates?name=bb" --data-binary "@$T_SCRATCH/bb.tar" -H 'Content-Type: application/x-tar'
  expect_code "a busybox template" 201
  new_box '{"template":"bb","volumes":[{"name":"work","path":"/workspace/data"}]}' || not_ok "a template box with the volume (got $CODE: $BODY)"
  run "$BOX" 'cat /workspace/data/f && echo tpl > /workspace/data/t && stat -c %u /workspace/data/t && id -u'
  expect_eq "a template's box reads and writes the volume, as its user" "$(echo $OUT)" "hello 1000 1000"
  api DELETE "/v1/sandboxes/$BOX"
else
  ok "busybox is not installed: the template box is not checked"
fi

# ---- delete -------------------------------------------------------------------------
api DELETE /v1/volumes/work
expect_code "delete the volume" 204
check "its image is gone" [ ! -e "$DATA/volumes/$VID.img" ]
api GET /v1/volumes/work
expect_code "it is gone" 404
api DELETE /v1/volumes/small
expect_code "delete the small one" 204
check "DATA/volumes holds no image" [ -z "$(ls "$DATA/volumes" | grep '\.img$')" ]
check "no loop device of ours" [ -z "$(our_loops)" ]

# ---- the data disk's reserve ------------------------------------------------------
# With all but 2 GiB of the free space in reserve, a 4 GiB volume does not
# fit (507) and leaves nothing; a 16 MiB one does.
serve_stop
avail=$(df -B1 --output=avail "$DATA" | tail -1)
serve_start --data-reserve $((avail - (2 << 30))) || not_ok "restart with a reserve"
api POST /v1/volumes -d '{"name":"huge","size":"4G"}'
expect_code "a volume the disk cannot hold above its reserve: 507" 507
check "the error names the reserve" grep -q "reserve" <<<"$(tail -n 5 "$SERVE_LOG")$BODY"
api GET /v1/volumes/huge
expect_code "nothing of it is left" 404
check "no image of it" [ -z "$(ls "$DATA/volumes" | grep '\.img$')" ]
api POST /v1/volumes -d '{"name":"fits","size":"16M"}'
expect_code "a small one fits" 201
api DELETE /v1/volumes/fits
serve_finish
