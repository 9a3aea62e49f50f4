#!/bin/bash
# Templates from the command line: images imported in every form and run
# with their config honoured, layers stacked with whiteouts, hostile and
# forged images refused with nothing written, shared layers stored once,
# a SIGKILLed import leaving nothing, export and import round-tripping,
# and a box's writes never reaching the image.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/template.bash"

if ! have_busybox; then
  not_ok "busybox is installed (scripts/deps.sh test installs busybox-static)"
  finish
  exit 1
fi
L=$T_SCRATCH/layers
busybox_root "$L/base"
echo base >"$L/base/etc/motd"
mkdir -p "$L/base/data" "$L/base/cache" "$L/top/etc" "$L/top/data" "$L/top/cache"
echo keep >"$L/base/data/keep"
echo gone >"$L/base/data/gone"
echo old >"$L/base/cache/old"
echo top >"$L/top/etc/motd"
: >"$L/top/data/.wh.gone"
: >"$L/top/cache/.wh..wh..opq"
echo new >"$L/top/cache/new"

mkimage "$T_SCRATCH/app.tar" --layer "$L/base" --layer "$L/top:plain" --env GREETING=hello \
  --owner home/app=1000:1000 \
  --workdir /home/app --user app --entrypoint '["sh","-c"]' \
  --cmd '["echo $GREETING from $(id -un) in $(pwd)"]' --label team=core
tpl import "$T_SCRATCH/app.tar" --name app
expect_eq "an OCI archive is imported ($ERR)" "$RC" 0
check "the import prints the template" grep -q '"name":"app"' <<<"$OUT"

run_tpl --template app
expect_eq "without a program the image's Entrypoint and Cmd run, with its env, user and workdir" \
  "$OUT" "hello from app in /home/app"
run_tpl --template app -- cat /etc/motd
expect_eq "a program replaces them; the top layer's file wins" "$OUT" "top"
run_tpl --template app -- sh -c 'ls /data; ls /cache'
expect_eq "a whiteout hides the lower file, an opaque directory the lower directory" \
  "$OUT" $'keep\nnew'
run_tpl --template app --env GREETING=bye -w /tmp -- sh -c 'echo $GREETING $(pwd)'
expect_eq "--env and --workdir override the image's" "$OUT" "bye /tmp"
run_tpl --template app -- stat -c '%U %u' /etc/passwd /home/app
expect_eq "owners are the image's (idmapped)" "$OUT" $'root 0\napp 1000'
run_tpl --template app -- sh -c 'echo x > /etc/x'
check "the image's user cannot write root's files" [ "$RC" -ne 0 ]

# A root image: the box's root is writable, and only the box's.
mkimage "$T_SCRATCH/root.tar" --layer "$L/base"
tpl import "$T_SCRATCH/root.tar" --name rootimg
run_tpl --template rootimg -- sh -c 'id -u; echo mine > /etc/motd; cat /etc/motd; touch /newfile'
expect_eq "an image that names no user runs as its root; its root is writable" "$OUT" $'0\nmine'
run_tpl --template rootimg -- sh -c 'cat /etc/motd; ls /newfile 2>&1 | head -c 0; test -e /newfile || echo absent'
expect_eq "a box's writes do not reach the next box" "$OUT" $'base\nabsent'
check "nor the stored layer" grep -qx base "$(find "$TDATA/templates/layers" -path '*/root/etc/motd' -exec grep -l base {} + | head -n1)"

# Every form of image.
mkimage "$T_SCRATCH/d.tar" --format docker-archive --layer "$L/base" --env FORM=docker
tpl import "$T_SCRATCH/d.tar" --name fromdocker
run_tpl --template fromdocker -- sh -c 'echo $FORM'
expect_eq "a Docker archive (docker save)" "$OUT" docker
gzip -c "$T_SCRATCH/d.tar" >"$T_SCRATCH/d.tar.gz"
tpl import "$T_SCRATCH/d.tar.gz" --name gz
expect_eq "a gzip'ed Docker archive ($ERR)" "$RC" 0
mkimage "$T_SCRATCH/layout" --format oci-dir --layer "$L/base" --env FORM=layout
tpl import "$T_SCRATCH/layout" --name fromdir
run_tpl --template fromdir -- sh -c 'echo $FORM'
expect_eq "an OCI layout directory" "$OUT" layout
# zstd layers (tar+zstd) in a zstd-compressed archive (.tar.zst): the same
# trees as app's, so the same layers (a layer is named by its tar's digest).
mkimage "$T_SCRATCH/z.tar.zst" --compress zstd --layer "$L/base:zstd" --layer "$L/top:zstd" \
  --owner home/app=1000:1000 --env FORM=zstd
check "the test image has zstd layers in a zstd archive" \
  bash -c 'zstd -dc "$1" | tar -xOf - index.json >/dev/null && [ "$(head -c 4 "$1" | od -An -tx1 | tr -d " ")" = 28b52ffd ]' _ "$T_SCRATCH/z.tar.zst"
tpl import "$T_SCRATCH/z.tar.zst" --name zst
expect_eq "a .tar.zst archive of zstd layers is imported ($ERR)" "$RC" 0
run_tpl --template zst -- sh -c 'echo $FORM; cat /etc/motd; ls /cache'
expect_eq "and its box runs on them" "$OUT" $'zstd\ntop\nnew'
zstd_blobs() {
  local f n=0
  for f in "$TDATA"/templates/blobs/sha256/*; do
    [ "$(head -c 4 "$f" | od -An -tx1 | tr -d ' ')" = 28b52ffd ] && n=$((n + 1))
  done
  echo "$n"
}
expect_eq "its zstd blobs are kept as imported (export gives them back)" "$(zstd_blobs)" 2
tpl rm zst
"$HUSK" template import - --name fromstdin --data "$TDATA" <"$T_SCRATCH/app.tar" >/dev/null 2>&1
expect_eq "an archive on stdin" "$?" 0
# app's two layers (its base owns /home/app as 1000) and the plain base of
# the four others: three layers, each stored once.
check "five templates, three distinct layers: each stored once ($(tpl_layers))" [ "$(tpl_layers)" = 3 ]
tpl list
check "list names them" grep -q fromstdin <<<"$OUT"
tpl inspect app
check "inspect shows the config" grep -q '"team": "core"' <<<"$OUT"

# Two versions of one file, side by side.
mkdir -p "$L/v1/etc" "$L/v2/etc"
echo 1 >"$L/v1/etc/version"
echo 2 >"$L/v2/etc/version"
mkimage "$T_SCRATCH/v1.tar" --layer "$L/base" --layer "$L/v1"
mkimage "$T_SCRATCH/v2.tar" --layer "$L/base" --layer "$L/v2"
tpl import "$T_SCRATCH/v1.tar" --name v1
tpl import "$T_SCRATCH/v2.tar" --name v2
"$HUSK" run --data "$TDATA" --template v1 -- sh -c 'sleep 0.5; cat /etc/version' >"$T_SCRATCH/o1" &
p1=$!
"$HUSK" run --data "$TDATA" --template v2 -- sh -c 'sleep 0.5; cat /etc/version' >"$T_SCRATCH/o2" &
p2=$!
wait "$p1" "$p2"
expect_eq "two templates with different versions of a file, at once" \
  "$(cat "$T_SCRATCH/o1") $(cat "$T_SCRATCH/o2")" "1 2"

# Export and import again.
tpl export app "$T_SCRATCH/exported.tar"
expect_eq "export ($ERR)" "$RC" 0
tpl import "$T_SCRATCH/exported.tar" --name app-again
run_tpl --template app-again
expect_eq "an exported template imports and runs the same" "$OUT" "hello from app in /home/app"

# Forged and hostile images: refused, the entry named, nothing written.
before=$(tpl_layers)
mkdir -p "$L/fresh"
echo fresh >"$L/fresh/f"
for t in blob diffid config; do
  mkimage "$T_SCRATCH/forged-$t.tar" --layer "$L/fresh" --tamper "$t"
  tpl import "$T_SCRATCH/forged-$t.tar" --name forged
  check "a forged $t is refused ($(tail -c 120 <<<"$ERR"))" [ "$RC" -ne 0 ]
done
SENT=$T_SCRATCH/sentinel
hostile() { # NAME PYTHON-BODY NEEDLE: a layer written by PYTHON-BODY (t: the tarfile)
  python3 - "$T_SCRATCH/h-$1.tar" "$SENT" <<PY
import io, sys, tarfile
t = tarfile.open(sys.argv[1], "w")
sent = sys.argv[2]
def f(name, data=b"x", **kw):
    i = tarfile.TarInfo(name); i.size = len(data)
    for k, v in kw.items(): setattr(i, k, v)
    t.addfile(i, io.BytesIO(data))
$2
t.close()
PY
  mkimage "$T_SCRATCH/hi-$1.tar" --raw-layer "$T_SCRATCH/h-$1.tar:plain"
  tpl import "$T_SCRATCH/hi-$1.tar" --name "h-$1"
  check "hostile layer ($1) refused, naming the entry: $(tail -c 150 <<<"$ERR")" \
    bash -c '[ "$1" -ne 0 ] && grep -q -- "$2" <<<"$3"' _ "$RC" "$3" "$ERR"
}
hostile dotdot 'f("a/../../../" + sent.lstrip("/"))' "a/../../"
hostile absolute 'f(sent)' "$SENT"
hostile symlink 'i = tarfile.TarInfo("link"); i.type = tarfile.SYMTYPE; i.linkname = "/tmp"; t.addfile(i)
f("link/husk-escape")' "link/husk-escape"
hostile hardlink 'i = tarfile.TarInfo("h"); i.type = tarfile.LNKTYPE; i.linkname = "/etc/passwd"; t.addfile(i)' "hardlink"
check "no hostile layer wrote outside its directory" [ ! -e "$SENT" -a ! -e /tmp/husk-escape ]
expect_eq "refused imports left no layer" "$(tpl_layers)" "$before"
check "nor anything in the store's work area" [ -z "$(ls -A "$TDATA/templates/tmp")" ]
tpl list
check "nor a template" bash -c '! grep -qE "forged|h-" <<<"$1"' _ "$OUT"
# Devices and setuid bits never reach the disk; the rest of the layer does.
python3 - "$T_SCRATCH/dev.tar" <<'PY'
import io, sys, tarfile
t = tarfile.open(sys.argv[1], "w")
i = tarfile.TarInfo("dev/evil"); i.type = tarfile.CHRTYPE; i.devmajor = 1; i.devminor = 1; t.addfile(i)
i = tarfile.TarInfo("bin/suid"); i.size = 1; i.mode = 0o4755; t.addfile(i, io.BytesIO(b"x"))
t.close()
PY
mkimage "$T_SCRATCH/devimg.tar" --layer "$L/base" --raw-layer "$T_SCRATCH/dev.tar:plain"
tpl import "$T_SCRATCH/devimg.tar" --name devimg
run_tpl --template devimg -- sh -c 'ls /dev/evil 2>/dev/null || echo nodev; stat -c %a /bin/suid'
expect_eq "a layer's device is dropped, its setuid bit too" "$OUT" $'nodev\n755'

# A SIGKILLed import leaves nothing, and the next command cleans up.
mkdir -p "$L/big"
head -c 60000000 /dev/urandom >"$L/big/blob"
mkimage "$T_SCRATCH/big.tar" --layer "$L/big:plain"
before=$(tpl_layers)
# Half the archive, then nothing: the import has written part of it and
# waits for the rest when it is killed.
mkfifo "$T_SCRATCH/fifo"
{ head -c 30000000 "$T_SCRATCH/big.tar"; sleep 30; } >"$T_SCRATCH/fifo" &
feeder=$!
"$HUSK" template import - --name big --data "$TDATA" <"$T_SCRATCH/fifo" >/dev/null 2>&1 &
ip=$!
for _ in $(seq 100); do
  [ -n "$(find "$TDATA/templates/tmp" -type f -size +1M 2>/dev/null)" ] && break
  sleep 0.1
done
check "the import was under way" [ -n "$(find "$TDATA/templates/tmp" -type f -size +1M)" ]
kill -9 "$ip" 2>/dev/null
wait "$ip" 2>/dev/null
kill "$feeder" 2>/dev/null
wait "$feeder" 2>/dev/null
tpl list
check "a SIGKILLed import is no template" bash -c '! grep -q "^big " <<<"$1"' _ "$OUT"
check "and the next command removed its work" [ -z "$(ls -A "$TDATA/templates/tmp")" ]
expect_eq "and any layer it had placed" "$(tpl_layers)" "$before"

# rm: the template goes, its layers once no template has them.
before=$(tpl_layers)
tpl rm v2
expect_eq "rm" "$RC" 0
run_tpl --template v2 -- true
check "a removed template does not run: $ERR" grep -q "no template" <<<"$ERR"
check "its own layer is collected, the shared one stays" [ "$(tpl_layers)" -lt "$before" ]
run_tpl --template v1 -- cat /etc/version
expect_eq "another template of the shared layer still runs" "$OUT" 1
run_tpl --template nosuch -- true
expect_eq "an unknown template: husk's own failure (125)" "$RC" 125
# The operator's imports and deletes are in the audit log, as the API's.
AUDIT=$(python3 -c '
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
print(" ".join(sorted({a + ":" + o for a, o in c.execute(
    "SELECT action, outcome FROM audit WHERE action LIKE ?", ("template.%",))})))' "$TDATA/husk.db")
check "imports, refusals and deletes are audited ($AUDIT)" \
  grep -q "template.delete:ok.*template.import:error.*template.import:ok" <<<"$AUDIT"
check "leftover run cgroups: none" [ -z "$(leftover_cgroups)" ]
finish
