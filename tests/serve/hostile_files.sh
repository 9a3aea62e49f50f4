#!/bin/bash
# The file routes against a hostile box: symlinks it plants, `..`, absolute
# paths, swaps racing the daemon, hostile tar archives.  Nothing may read
# or write a host file; everything stays inside the box's areas.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"

if ! serve_start; then
  not_ok "the daemon starts"
  serve_finish
  exit 1
fi
new_tenant mallory || not_ok "tenant"
KEY=$TKEY
new_box '{"disk":"64M"}' || not_ok "a box"
S=/v1/sandboxes/$BOX
MARK=husk-hostile-$$-$RANDOM
# A host directory the box's links point at, with a secret in it.
HOSTDIR=$T_SCRATCH/hostdir
mkdir -p "$HOSTDIR"
echo "host secret" >"$HOSTDIR/secret"

boxsh() { # run a shell command in the box; stdout in $OUT
  api POST "$S/exec" -d "$(python3 -c 'import json,sys; print(json.dumps({"cmd":["sh","-c",sys.argv[1]]}))' "$1")"
  OUT=$(jf 'j["stdout"]')
}
not_host_secret() { ! grep -q "root:\|host secret" <<<"$BODY"; }
refused() { # DESC: the last request did not succeed and leaked nothing
  if [ "$CODE" -ge 400 ] && not_host_secret; then ok "$1 ($CODE)"; else not_ok "$1: $CODE $(head -c 200 <<<"$BODY")"; fi
}

boxsh "ln -s /etc /workspace/e; ln -s / /workspace/root; ln -s /etc/shadow /workspace/sh;
       ln -s $HOSTDIR /workspace/hd; ln -s ../../../../../../etc /workspace/up;
       mkdir -p /workspace/d; ln -s /etc /workspace/d/e; echo box > /workspace/d/own; echo ok"
expect_eq "the box planted its links" "$OUT" ok

# Reads through planted links.
api GET "$S/files?path=/workspace/e/shadow"; refused "read /workspace/e/shadow (link to /etc)"
api GET "$S/files?path=/workspace/e/passwd"; refused "read /workspace/e/passwd"
api GET "$S/files?path=/workspace/root/etc/shadow"; refused "read through a link to /"
api GET "$S/files?path=/workspace/sh"; refused "read a link to /etc/shadow"
api GET "$S/files?path=/workspace/hd/secret"; refused "read through a link to a host directory"
api GET "$S/files?path=/workspace/up/shadow"; refused "read through a ../../ link"
api GET "$S/files/list?path=/workspace/e"; refused "list through a link to /etc"
api GET "$S/files/list?path=/workspace/hd"; refused "list through a link to a host directory"
api GET "$S/files/stat?path=/workspace/e/shadow"; refused "stat through a link"
api GET "$S/files/tar?path=/workspace/e"; refused "tar of a link to /etc"
# Plain traversal.
for p in "../../etc/shadow" "/workspace/../../etc/shadow" "/workspace/../../../../../../etc/passwd" \
  "/etc/shadow" "/proc/1/environ" "/proc/self/root/etc/shadow" "%2e%2e/%2e%2e/etc/shadow" \
  "/workspace/./../workspace/../../etc/passwd" "$HOSTDIR/secret"; do
  api GET "$S/files?path=$p"
  refused "read $p"
done
api GET "$S/files?path=/workspace/../tmp/../workspace/d/own"
check "'..' that stays inside the box works" [ "$CODE" = 200 ] && [ "$BODY" = box ]

# Writes through planted links never create host files.
api PUT "$S/files?path=/workspace/e/$MARK" --data-binary pwned; refused "write into a link to /etc"
check "no /etc/$MARK on the host" [ ! -e "/etc/$MARK" ]
api PUT "$S/files?path=/workspace/hd/$MARK&mkdirs=1" --data-binary pwned; refused "write into a link to a host directory"
check "nothing new in the host directory" [ "$(ls "$HOSTDIR")" = secret ]
api PUT "$S/files?path=/workspace/root/tmp/$MARK" --data-binary inbox
expect_code "write through a link to /: lands in the box's own /tmp" 201
check "no /tmp/$MARK on the host" [ ! -e "/tmp/$MARK" ]
boxsh "cat /tmp/$MARK"
expect_eq "the box's /tmp has it" "$OUT" inbox
api PUT "$S/files?path=/workspace/hd/sub/$MARK&mkdirs=1" --data-binary x; refused "mkdirs through a link"
api POST "$S/files/mkdir" -d "{\"path\":\"/workspace/e/$MARK\",\"parents\":true}"; refused "mkdir through a link to /etc"
check "no /etc/$MARK directory" [ ! -e "/etc/$MARK" ]
api PUT "$S/files?path=/workspace/plain" --data-binary data
api POST "$S/files/move" -d "{\"from\":\"/workspace/plain\",\"to\":\"/workspace/hd/$MARK\"}"; refused "move into a link to a host directory"
api POST "$S/files/move" -d '{"from":"/workspace/hd/secret","to":"/workspace/stolen"}'; refused "move a host file in through a link"
check "the host secret is still there" [ "$(cat "$HOSTDIR/secret")" = "host secret" ]
api DELETE "$S/files?path=/workspace/hd/secret"; refused "remove through a link"
check "the host secret survived" [ -f "$HOSTDIR/secret" ]

# Writing onto a symlink replaces the link; the target is untouched.
api PUT "$S/files?path=/workspace/sh" --data-binary replaced
expect_code "write onto a link: allowed (replaces the link)" 201
check "the host's /etc/shadow is not touched" not grep -q replaced /etc/shadow
boxsh 'test -L /workspace/sh && echo link || cat /workspace/sh'
expect_eq "the link became a plain file of the box" "$OUT" replaced
# Recursive remove of a tree holding a link to a host directory.
api DELETE "$S/files?path=/workspace/d&recursive=1"
expect_code "recursive remove of a tree with a link to /etc" 204
check "the host's /etc is intact" [ -f /etc/passwd ] && [ -f /etc/hostname ]

# A box racing the daemon: swap a directory and a link to the host dir.
boxsh 'mkdir -p /workspace/race; (while :; do mv /workspace/race /workspace/race.x 2>/dev/null;
       ln -sfn '"$HOSTDIR"' /workspace/race; rm -f /workspace/race;
       mv /workspace/race.x /workspace/race 2>/dev/null; done) >/dev/null 2>&1 &
       echo started'
for i in $(seq 1 150); do
  curl -s -o /dev/null -X PUT -H "Authorization: Bearer $TKEY" --data-binary "r$i" \
    "$URL$S/files?path=/workspace/race/$MARK-$i"
  curl -s -o "$T_SCRATCH/race.$i" -H "Authorization: Bearer $TKEY" "$URL$S/files?path=/workspace/race/../race/secret"
done
check "racing swaps: nothing written to the host directory" [ "$(ls "$HOSTDIR")" = secret ]
check "racing swaps: the host secret never came back" not grep -ql "host secret" "$T_SCRATCH"/race.*

# Hostile archives.
python3 - "$T_SCRATCH/evil.tar" "$MARK" <<'EOF'
import io, sys, tarfile
path, mark = sys.argv[1], sys.argv[2]
t = tarfile.open(path, "w")
def add(name, data=b"x", **kw):
    ti = tarfile.TarInfo(name)
    for k, v in kw.items():
        setattr(ti, k, v)
    if ti.type == tarfile.REGTYPE:
        ti.size = len(data)
        t.addfile(ti, io.BytesIO(data))
    else:
        t.addfile(ti)
add("../../../../../../tmp/" + mark + "-dotdot")
add("/tmp/" + mark + "-abs")
add("lnk", type=tarfile.SYMTYPE, linkname="/tmp")
add("lnk/" + mark + "-via-link")
add("hard", type=tarfile.LNKTYPE, linkname="/etc/passwd")
add("suid", data=b"#!/bin/sh\n", mode=0o6755)
add("dev", type=tarfile.CHRTYPE, devmajor=1, devminor=3)
add("ok.txt", data=b"fine")
t.close()
EOF
api PUT "$S/files/tar?path=/workspace/x" --data-binary @"$T_SCRATCH/evil.tar"
check "hostile tar: accepted with entries skipped" [ "$CODE" = 200 ] && [ "$(jf 'j["skipped"]')" -ge 1 ]
check "hostile tar: no ../ escape on the host" [ ! -e "/tmp/$MARK-dotdot" ]
check "hostile tar: no absolute path on the host" [ ! -e "/tmp/$MARK-abs" ]
check "hostile tar: nothing through its own symlink" [ ! -e "/tmp/$MARK-via-link" ]
boxsh 'cd /workspace/x && cat ok.txt; echo; ls -l suid | cut -c1-10; test -e dev && echo dev; test -e hard && head -c 4 hard; echo end'
expect_eq "hostile tar: a plain entry extracted, no setuid, no device, no host hardlink" "$OUT" $'fine\n-rwxr-xr-x\nend'
# A tar download of a tree holding links carries the links, not their targets.
api GET "$S/files/tar?path=/workspace"
check "tar download: no host file content" not grep -qa "host secret\|root:" "$T_SCRATCH/body"

check "the daemon is still healthy" healthy
api DELETE "$S"
check "the box leaves nothing" wait_for 20 box_gone "$BOX"
serve_stop
serve_finish
