#!/bin/bash
# Filesystem snapshots over HTTP: a box's files (contents, modes, owners,
# symlinks, hardlinks, sparse files, FIFOs, empty directories) come back
# identical in a box made from its snapshot; boxes forked from one snapshot
# share nothing (a write in one is invisible in the other, their uid ranges
# differ); a paused box stays paused while it is snapshotted; list, get and
# delete (409 while a box made from it lives); a box of an image template
# keeps the files it deleted and the directories it replaced (whiteouts,
# opaque directories) and a replaced template is refused unless rebase;
# another tenant sees none of
# it; a snapshot past the tenant's storage quota leaves nothing behind;
# hostile content (symlinks to host paths, names with "..", a FIFO, a
# device node) restores without touching the host; a SIGKILL of the daemon
# in the middle of a large snapshot leaves no half-made snapshot and no
# orphan object, and in the middle of a restore no half-made box.  No timing assertions: waits are "until X, at most N s".
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"
. "$(dirname "$0")/../template/template.bash"
TDATA=$DATA

if ! serve_start; then
  not_ok "the daemon starts"
  serve_finish
  exit 1
fi
new_tenant snap-a || not_ok "tenant A"
KEY_A=$TKEY TID_A=$TID
new_tenant snap-b || not_ok "tenant B"
KEY_B=$TKEY
KEY=$KEY_A

# sh BOX SCRIPT: run SCRIPT with sh -c in BOX; sets OUT (its stdout) and RC.
sh_in() {
  local body
  body=$(python3 -c 'import json, sys; print(json.dumps({"cmd": ["sh", "-c", sys.argv[1]], "timeout": 120}))' "$2")
  API_TIMEOUT=150 api POST "/v1/sandboxes/$1/exec" -d "$body"
  OUT=$(jf 'j["stdout"]')
  RC=$(jf 'j["exit_code"]')
}
# The state of the database, read-only (the daemon keeps writing it).
db() {
  python3 -c '
import sqlite3, sys
c = sqlite3.connect("file:" + sys.argv[1] + "?mode=ro", uri=True, timeout=10)
print(c.execute(sys.argv[2], sys.argv[3:]).fetchone()[0])' "$DATA/husk.db" "$@"
}
usage() { db "SELECT coalesce(sum(size), 0) FROM objects WHERE tenant_id = ?" "$1"; }
creating() { db "SELECT count(*) FROM snapshots WHERE state = 'creating'"; }
store_file_count() { find "$DATA/storage" -type f 2>/dev/null | wc -l; }
track() { echo "$1 $KEY" >>"$T_SCRATCH/boxes"; }

# ---- what a box wrote comes back identical ---------------------------------------
new_box '{"timeout":900}' || not_ok "box A"
A=$BOX
sh_in "$A" '
set -e
cd /workspace
mkdir -p d/e/f empty1 empty2/sub
printf "hello\n" > a.txt
head -c 200000 /dev/urandom > rand.bin
chmod 0640 a.txt; chmod 0751 d; chmod 0700 d/e; chmod 1777 empty1
ln -s a.txt link_rel; ln -s /etc/passwd link_abs; ln -s ../../nowhere dangling
ln a.txt hard1; ln rand.bin d/e/f/hard2
truncate -s 64M sparse; printf x | dd of=sparse bs=1 seek=10485760 conv=notrunc 2>/dev/null
mkfifo fifo; chmod 0620 fifo
printf "%s" "no newline" > "name with spaces"
touch -d "2001-02-03 04:05:06" a.txt rand.bin
cp a.txt suid; chmod 4755 suid
cp a.txt sgid; chmod 2755 sgid
echo tmpdata > /tmp/t1; mkdir -p /tmp/td/x
echo shmdata > /dev/shm/s1
echo ok'
expect_eq "box A writes its files" "$RC $OUT" "0 ok"

# The same listing from inside both boxes: every entry with its type, mode,
# owner, size, link count and target; mtimes of regular files; digests.
MANIFEST='
cd /workspace
for r in /workspace /tmp /dev/shm; do
  find "$r" -mindepth 1 ! -name suid ! -name sgid -printf "%p|%y|%m|%u:%g|%n|%l\n"
  find "$r" -mindepth 1 -type f ! -name suid ! -name sgid -printf "%p|%s|%TY-%Tm-%Td %TH:%TM:%.2TS\n"
  find "$r" -mindepth 1 -type f ! -name suid ! -name sgid -exec sha256sum {} +
done | sort'
sh_in "$A" "$MANIFEST"
MA=$OUT
check "the manifest of box A lists what it wrote" grep -q '^/workspace/sparse|f|644' <<<"$MA"
sh_in "$A" 'stat -c "%b %B" /workspace/sparse'
SPARSE_A=$OUT

api POST "/v1/sandboxes/$A/snapshots" -d '{"metadata":{"step":"first","owner":"test"}}'
expect_code "snapshot of box A: 201" 201
S=$(jf 'j["id"]')
check "its id is s_ and 24 hex digits" grep -Eq '^s_[0-9a-f]{24}$' <<<"$S"
expect_eq "it names its box, template and metadata" \
  "$(jf 'j["sandbox"] + " " + j["template"] + " " + j["metadata"]["step"] + " " + j["metadata"]["owner"]')" \
  "$A default first test"
expect_eq "its limits are the box's (timeout its lifetime)" "$(jf 'j["limits"]["timeout"]')" 900.0
check "size, data bytes, entries and a sha256" \
  python3 -c 'import json, sys; j = json.loads(sys.argv[1]); assert j["size"] > 0 and j["data_bytes"] >= 200000 and j["entries"] > 10 and len(j["sha256"]) == 64 and j["created_at"] and j["boxes"] == 0, j' "$BODY"
check "the archive keeps holes: it is far smaller than the sparse file" \
  python3 -c 'import json, sys; j = json.loads(sys.argv[1]); assert j["size"] < 8 << 20, j' "$BODY"
sh_in "$A" 'echo alive'
expect_eq "box A runs on after its snapshot" "$OUT" alive

api POST /v1/sandboxes -d "{\"snapshot\":\"$S\"}"
expect_code "a box from the snapshot: 201" 201
R=$(jf 'j["id"]')
track "$R"
expect_eq "it names its snapshot, and has the snapshot's lifetime" \
  "$(jf 'j["snapshot"] + " " + str(j["limits"]["timeout"])')" "$S 900.0"
sh_in "$R" "$MANIFEST"
MR=$OUT
if [ "$MR" = "$MA" ]; then
  ok "the restored box's files are identical (contents, modes, owners, links, mtimes)"
else
  not_ok "the restored box's files are identical (contents, modes, owners, links, mtimes)"
  diff <(echo "$MA") <(echo "$MR") | head -20 | sed 's/^/#   /'
fi
sh_in "$R" 'stat -c "%b %B" /workspace/sparse'
check "the sparse file is sparse again ($OUT blocks)" \
  python3 -c 'import sys; b, s = map(int, sys.argv[1].split()); assert b * s < 4 << 20, (b, s)' "$OUT"
expect_eq "... with as many blocks as in box A" "$OUT" "$SPARSE_A"
sh_in "$R" 'stat -c "%m %i" /workspace/a.txt /workspace/hard1 /workspace/rand.bin /workspace/d/e/f/hard2 | awk "{print \$2}" | uniq | wc -l'
expect_eq "hardlinks are hardlinks (two inodes for four names)" "$OUT" 2
sh_in "$R" 'stat -c "%a" /workspace/suid /workspace/sgid'
expect_eq "setuid and setgid bits are dropped" "$(echo $OUT)" "755 755"
sh_in "$R" '[ -p /workspace/fifo ] && readlink /workspace/link_abs && cat /workspace/link_rel'
expect_eq "a FIFO is a FIFO, symlinks are symlinks (not followed)" "$(echo $OUT)" "/etc/passwd hello"

# ---- forks share nothing ----------------------------------------------------------------
api POST /v1/sandboxes -d "{\"snapshot\":\"$S\"}"
expect_code "a second box from the same snapshot" 201
R2=$(jf 'j["id"]')
track "$R2"
sh_in "$R" 'echo changed > /workspace/a.txt; echo mine > /workspace/only_r'
sh_in "$R2" 'cat /workspace/a.txt /workspace/hard1; [ -e /workspace/only_r ] && echo seen || echo unseen'
expect_eq "a write in one fork is invisible in the other (hardlinked names too)" "$(echo $OUT)" "hello hello unseen"
sh_in "$A" 'cat /workspace/a.txt'
expect_eq "... and in the box the snapshot was taken of" "$OUT" hello
host_uid() { local p; p=$(box_pids "$1" | head -n1); [ -n "$p" ] && stat -c %u "/proc/$p"; }
U1=$(host_uid "$R") U2=$(host_uid "$R2")
check "the forks run as different host uids ($U1, $U2)" [ -n "$U1" -a -n "$U2" -a "$U1" != "$U2" ]

# ---- a paused box ------------------------------------------------------------------------
api POST "/v1/sandboxes/$R/pause"
expect_code "pause a fork" 200
api POST "/v1/sandboxes/$R/snapshots" -d '{}'
expect_code "snapshot of a paused box: 201" 201
S2=$(jf 'j["id"]')
api GET "/v1/sandboxes/$R"
expect_eq "it stays paused" "$(jf 'j["state"]')" paused
api POST "/v1/sandboxes/$R/resume"
expect_code "and resumes" 200
api POST /v1/sandboxes -d "{\"snapshot\":\"$S2\"}"
R3=$(jf 'j["id"]')
track "$R3"
sh_in "$R3" 'cat /workspace/a.txt /workspace/only_r'
expect_eq "the paused box's snapshot has its writes" "$(echo $OUT)" "changed mine"

# ---- list, get, delete ------------------------------------------------------------------
api GET /v1/snapshots
expect_eq "the tenant's snapshots, oldest first" "$(jf '" ".join(x["id"] for x in j["snapshots"])')" "$S $S2"
api GET "/v1/snapshots?limit=1"
expect_eq "a page of one, with a cursor" "$(jf 'j["snapshots"][0]["id"]')" "$S"
NEXT=$(jf 'j["next_cursor"]')
api GET "/v1/snapshots?limit=1&cursor=$NEXT"
expect_eq "the next page" "$(jf 'j["snapshots"][0]["id"] + " " + str(j["next_cursor"])')" "$S2 None"
api GET "/v1/snapshots?sandbox=$R"
expect_eq "filtered by box" "$(jf '" ".join(x["id"] for x in j["snapshots"])')" "$S2"
api GET "/v1/snapshots?sandbox=$A&limit=1"
expect_eq "filtered by box, a page of one, the last: no cursor" \
  "$(jf '" ".join(x["id"] for x in j["snapshots"]) + " " + str(j["next_cursor"])')" "$S None"
api GET "/v1/snapshots?sandbox=b_000000000000000000000000"
expect_eq "filtered by a box that has none: an empty page" \
  "$(jf 'str(len(j["snapshots"])) + " " + str(j["next_cursor"])')" "0 None"
api GET "/v1/snapshots?limit=0x1"
expect_code "a bad limit: 400" 400
api GET "/v1/snapshots/$S"
expect_eq "get: the boxes made from it" "$(jf 'j["id"] + " " + str(j["boxes"])')" "$S 2"
api GET /v1/snapshots/s_000000000000000000000000
expect_code "an unknown snapshot: 404" 404
api DELETE "/v1/snapshots/$S"
expect_code "delete while boxes made from it live: 409" 409
api POST /v1/sandboxes -d '{"snapshot":"s_000000000000000000000000"}'
expect_code "a box from an unknown snapshot: 404" 404
api POST /v1/sandboxes -d '{"rebase":true}'
expect_code "rebase without snapshot: 400" 400
api POST /v1/sandboxes -d "{\"snapshot\":\"$S\",\"rebase\":\"yes\"}"
expect_code "rebase must be a boolean: 400" 400

# ---- another tenant ------------------------------------------------------------------
KEY=$KEY_B
api GET /v1/snapshots
expect_eq "tenant B lists none of A's" "$(jf 'len(j["snapshots"])')" 0
api GET "/v1/snapshots/$S"
expect_code "tenant B cannot get A's snapshot: 404" 404
api DELETE "/v1/snapshots/$S"
expect_code "tenant B cannot delete it: 404" 404
api POST /v1/sandboxes -d "{\"snapshot\":\"$S\"}"
expect_code "tenant B cannot restore it: 404" 404
[ "$CODE" = 201 ] && { BOX=$(jf 'j["id"]'); track "$BOX"; }
api POST "/v1/sandboxes/$A/snapshots" -d '{}'
expect_code "tenant B cannot snapshot A's box: 404" 404
KEY=$KEY_A

for b in "$R" "$R2" "$R3"; do api DELETE "/v1/sandboxes/$b"; done
api GET "/v1/snapshots/$S"
expect_eq "no live box is made from it any more" "$(jf 'j["boxes"]')" 0
api DELETE "/v1/snapshots/$S2"
expect_code "delete after the boxes are gone: 204" 204
api GET "/v1/snapshots/$S2"
expect_code "it is gone" 404

# ---- hostile content ---------------------------------------------------------------------
PASSWD_SUM=$(sha256sum /etc/passwd)
MARK=/tmp/husk-snap-hostile-$$
rm -f "$MARK"
sh_in "$A" "
cd /workspace
ln -s /etc/passwd h_passwd; ln -s /proc/1/root h_root; ln -s ../../../../../../../etc h_up
ln -s $MARK h_mark
mkfifo h_fifo
mkdir -p ..dir '.. ' x/..y; echo dots > '..dots'; echo ab > 'a..b'; echo nl > 'new
line'
mknod h_wh c 0 0 2>/dev/null && echo mknod:yes || echo mknod:no"
check "box A makes its hostile files" [ "$RC" = 0 ]
MKNOD=$(grep -o 'mknod:[a-z]*' <<<"$OUT")
HOSTILE='cd /workspace; find . -mindepth 1 -name "h_*" -printf "%p|%y|%l\n" -o -name "*..*" -printf "%p|%y\n" | sort'
sh_in "$A" "$HOSTILE"
HA=$OUT
api POST "/v1/sandboxes/$A/snapshots" -d '{}'
expect_code "snapshot of hostile content: 201" 201
SH=$(jf 'j["id"]')
api POST /v1/sandboxes -d "{\"snapshot\":\"$SH\"}"
expect_code "a box from it: 201" 201
RH=$(jf 'j["id"]')
track "$RH"
sh_in "$RH" "$HOSTILE"
HR=$OUT
if [ "$MKNOD" = mknod:yes ]; then
  expect_eq "the same entries, but no device node (only whiteouts of upper/ are kept)" \
    "$HR" "$(grep -v '^./h_wh|' <<<"$HA")"
else
  expect_eq "the same symlinks (to host paths too), FIFO and names with .." "$HR" "$HA"
fi
sh_in "$RH" "echo written > /workspace/h_mark 2>/dev/null; cat /workspace/h_passwd | head -c 4; ls /workspace/h_root/ >/dev/null 2>&1; echo"
check "host files are unchanged (/etc/passwd)" [ "$(sha256sum /etc/passwd)" = "$PASSWD_SUM" ]
check "no write reached the host path a symlink names" [ ! -e "$MARK" ]
api DELETE "/v1/sandboxes/$RH"
api DELETE "/v1/snapshots/$SH"
expect_code "delete the hostile snapshot" 204
api DELETE "/v1/snapshots/$S"
expect_code "delete the first snapshot" 204
api GET /v1/snapshots
expect_eq "no snapshot left" "$(jf 'len(j["snapshots"])')" 0
expect_eq "... and no archive: the tenant's storage is empty again" "$(usage "$TID_A")" 0

# ---- a box of an image template: whiteouts, opaque directories, rebase -----------------------
if have_busybox; then
  L=$T_SCRATCH/layers
  busybox_root "$L/base"
  echo base >"$L/base/etc/motd"
  mkdir -p "$L/base/opt/dir" "$L/v2/etc"
  echo a >"$L/base/opt/dir/a"
  echo b >"$L/base/opt/dir/b"
  echo two >"$L/v2/etc/version"
  mkimage "$T_SCRATCH/img1.tar" --layer "$L/base"
  mkimage "$T_SCRATCH/img2.tar" --layer "$L/base" --layer "$L/v2"
  api POST "/v1/templates?name=snapimg" --data-binary "@$T_SCRATCH/img1.tar" -H 'Content-Type: application/x-tar'
  expect_code "tenant A imports an image template" 201
  new_box '{"template":"snapimg","timeout":600}' || not_ok "a box of it"
  I=$BOX
  sh_in "$I" 'rm /etc/motd && rm -r /opt/dir && mkdir /opt/dir && echo c > /opt/dir/c && echo mine > /etc/added && echo ok'
  expect_eq "it deletes an image file, replaces an image directory, adds a file" "$OUT" ok
  IMAGE_VIEW='cat /etc/motd 2>/dev/null || echo no-motd; ls /opt/dir | tr "\n" " "; cat /etc/added; cat /etc/version 2>/dev/null || echo no-version'
  sh_in "$I" "$IMAGE_VIEW"
  VI=$(echo $OUT)
  api POST "/v1/sandboxes/$I/snapshots" -d '{}'
  expect_code "snapshot of the image box" 201
  SI=$(jf 'j["id"]')
  expect_eq "it names the template and the image's id" "$(jf 'j["template"] + " " + str(bool(j.get("template_id")))')" "snapimg True"
  api POST /v1/sandboxes -d "{\"snapshot\":\"$SI\"}"
  expect_code "a box from it" 201
  RI=$(jf 'j["id"]')
  track "$RI"
  sh_in "$RI" "$IMAGE_VIEW"
  expect_eq "the deleted file stays deleted, the replaced directory holds only its new file" "$(echo $OUT)" "$VI"
  check "... which is: no motd, only c, the added file ($VI)" [ "$VI" = "no-motd c mine no-version" ]
  api POST /v1/sandboxes -d "{\"snapshot\":\"$SI\",\"template\":\"default\"}"
  expect_code "a box of another template from it: 400" 400
  api DELETE "/v1/sandboxes/$I"
  api DELETE "/v1/sandboxes/$RI"
  api DELETE /v1/templates/snapimg
  expect_code "delete the template once its boxes are gone" 204
  api POST "/v1/templates?name=snapimg" --data-binary "@$T_SCRATCH/img2.tar" -H 'Content-Type: application/x-tar'
  expect_code "a new image under the same name" 201
  api POST /v1/sandboxes -d "{\"snapshot\":\"$SI\"}"
  expect_code "a box from the snapshot of the replaced template: 409" 409
  check "the error says to rebase" grep -q rebase <<<"$BODY"
  [ "$CODE" = 201 ] && track "$(jf 'j["id"]')"
  api POST /v1/sandboxes -d "{\"snapshot\":\"$SI\",\"rebase\":true}"
  expect_code "with rebase: 201" 201
  RB=$(jf 'j["id"]')
  track "$RB"
  sh_in "$RB" "$IMAGE_VIEW"
  expect_eq "its files over the new image (whiteout and opaque directory applied to it)" "$(echo $OUT)" "no-motd c mine two"
  api DELETE "/v1/sandboxes/$RB"
  api DELETE "/v1/snapshots/$SI"
  expect_code "delete the image box's snapshot" 204
  api DELETE /v1/templates/snapimg
else
  not_ok "busybox is installed (scripts/deps.sh test installs busybox-static): image template part skipped"
fi

# ---- SIGKILL in the middle of a large snapshot ---------------------------------------------
new_box '{"timeout":900,"memory":"1G"}' || not_ok "a box for a large snapshot"
BIG=$BOX
sh_in "$BIG" 'head -c 200000000 /dev/urandom > /workspace/big && echo ok'
expect_eq "it writes 200 MB of random data" "$OUT" ok
U0=$(usage "$TID_A") F0=$(store_file_count)
curl -s -o /dev/null --max-time 120 -X POST -H "Authorization: Bearer $KEY" \
  "$URL/v1/sandboxes/$BIG/snapshots" -d '{}' &
CURL=$!
under_way() { [ "$(creating)" = 1 ]; }
wait_for 30 under_way
check "the snapshot is under way (a 'creating' row)" [ "$(creating)" = 1 ]
serve_kill9
wait "$CURL" 2>/dev/null
serve_start || not_ok "the daemon starts again"
api GET /v1/snapshots
expect_eq "after a restart, no snapshot is listed" "$(jf 'len(j["snapshots"])')" 0
expect_eq "no half-made snapshot is left" "$(creating)" 0
expect_eq "the tenant's storage usage is what it was" "$(usage "$TID_A")" "$U0"
expect_eq "no orphan file in the store" "$(store_file_count)" "$F0"
sh_in "$BIG" 'echo thawed'
expect_eq "the box frozen for it runs again" "$OUT" thawed

# ... and in the middle of a restore: the box being made from it fails, the
# snapshot is not held by it, nothing of the box is left.
api POST "/v1/sandboxes/$BIG/snapshots" -d '{}'
expect_code "the large snapshot, taken whole this time" 201
SB=$(jf 'j["id"]')
api DELETE "/v1/sandboxes/$BIG"
curl -s -o /dev/null --max-time 120 -H "Authorization: Bearer $KEY" "$URL/v1/sandboxes" \
  -d "{\"snapshot\":\"$SB\",\"memory\":\"1G\"}" &
CURL=$!
# Kill the daemon the moment the box's row says creating (polled every 5 ms).
KILLED=$(python3 -c '
import os, signal, sqlite3, sys, time
db, pid, snap = sys.argv[1], int(sys.argv[2]), sys.argv[3]
end = time.time() + 30
while time.time() < end:
    try:
        c = sqlite3.connect("file:" + db + "?mode=ro", uri=True, timeout=1)
        r = c.execute("SELECT id FROM boxes WHERE state = ? AND snapshot_id = ?", ("creating", snap)).fetchone()
        c.close()
    except sqlite3.Error:
        r = None
    if r:
        os.kill(pid, signal.SIGKILL)
        print(r[0])
        break
    time.sleep(0.005)' "$DATA/husk.db" "$SPID" "$SB")
check "the daemon is killed while a box from the snapshot is being made ($KILLED)" [ -n "$KILLED" ]
{ wait "$SPID"; } 2>/dev/null
SPID=""
wait "$CURL" 2>/dev/null
serve_start || not_ok "the daemon starts again"
if [ -n "$KILLED" ]; then
  echo "$KILLED $KEY" >>"$T_SCRATCH/boxes"
  api GET "/v1/sandboxes/$KILLED"
  expect_eq "that box failed, with the restart as its reason" "$(jf 'j["state"]')" failed
  wait_for 15 box_gone "$KILLED"
  check "nothing of it is left (cgroups, processes)" box_gone "$KILLED"
fi
api GET "/v1/snapshots/$SB"
expect_eq "the snapshot is not held by it" "$(jf 'j["boxes"]')" 0
api DELETE "/v1/snapshots/$SB"
expect_code "and can be deleted" 204
expect_eq "the storage usage is what it was before the large snapshots" "$(usage "$TID_A")" "$U0"
serve_stop

# ---- the storage quota ---------------------------------------------------------------------
serve_start --storage-quota 100K || not_ok "the daemon starts with --storage-quota 100K"
new_tenant snap-q || not_ok "tenant Q"
KEY=$TKEY TID_Q=$TID
new_box '{"timeout":600}' || not_ok "a box of tenant Q"
Q=$BOX
sh_in "$Q" 'echo small > /workspace/s; echo ok'
api POST "/v1/sandboxes/$Q/snapshots" -d '{}'
expect_code "a small snapshot fits the quota" 201
SQ=$(jf 'j["id"]')
UQ=$(usage "$TID_Q")
check "it counts in the tenant's storage ($UQ bytes)" [ "$UQ" -gt 0 ]
F1=$(store_file_count)
sh_in "$Q" 'head -c 1000000 /dev/urandom > /workspace/big; echo ok'
api POST "/v1/sandboxes/$Q/snapshots" -d '{}'
expect_code "a snapshot past the quota: 403" 403
expect_eq "with the quota error" "$(jf 'j["error"]["code"]')" quota_exceeded
api GET /v1/snapshots
expect_eq "no snapshot of it is listed" "$(jf '" ".join(x["id"] for x in j["snapshots"])')" "$SQ"
expect_eq "no row is left" "$(creating)" 0
expect_eq "the usage is what it was" "$(usage "$TID_Q")" "$UQ"
expect_eq "no file is left in the store" "$(store_file_count)" "$F1"
api DELETE "/v1/snapshots/$SQ"
expect_code "delete the small one" 204
expect_eq "its bytes are freed" "$(usage "$TID_Q")" 0
api DELETE "/v1/sandboxes/$Q"

KEY=$KEY_A
api GET "/v1/audit?action=snapshot.create&limit=100"
check "snapshots are audited (snapshot.create)" grep -q snapshot.create <<<"$BODY"
api DELETE "/v1/sandboxes/$A"
expect_eq "no box is left running" "$(reap_boxes "$KEY_A" "$KEY_B" "$TKEY")" 0
serve_stop
expect_eq "the daemon stops cleanly on SIGTERM (exit 0, no sanitizer report)" "$SERVE_RC" 0
serve_finish
