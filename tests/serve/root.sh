#!/bin/bash
# The root the daemon's boxes share: prepared once per spawner, read-only,
# in the spawner's own mount namespace (the host sees nothing mounted),
# and locked read-only in every box, even for the box's own root.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"

PREP=/run/husk/root
if ! serve_start --pool 1; then
  not_ok "the daemon starts"
  serve_finish
  exit 1
fi
new_tenant rootfs || not_ok "a tenant"
KEY=$TKEY
new_box '{}' || not_ok "box A"
A=$BOX
new_box '{}' || not_ok "box B"
B=$BOX

spawners=$(pgrep -P "$SPID" -f '^husk-spawner' | tr '\n' ' ')
check "the daemon has its spawners ($spawners)" [ -n "$spawners" ]
for p in $spawners; do
  check "spawner $p has the prepared root mounted in its own namespace" grep -q " $PREP " "/proc/$p/mountinfo"
  check "spawner $p's mount namespace is not the host's" \
    [ "$(readlink "/proc/$p/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ]
done
check "the host sees nothing mounted on $PREP" not grep -q " $PREP " /proc/self/mountinfo
check "the host's $PREP is an empty directory" dir_empty "$PREP"

api POST "/v1/sandboxes/$A/exec" -d '{"cmd":["sh","-c","cat /etc/passwd /etc/hostname; ls /usr/bin/sh /etc/ssl/certs | head -n 2"]}'
check "a box sees the generated /etc and the host's /usr" \
  grep -q '^user:x:1000:1000:box user:/workspace:/bin/bash' <<<"$(jf 'j["stdout"]')"
for path in / /etc /etc/passwd /usr /home /root /var; do
  # The shell reports a failed redirection on its own stderr: the group
  # brings that into stdout too.
  api POST "/v1/sandboxes/$A/exec" -d "{\"cmd\":[\"sh\",\"-c\",\"{ touch $path/x; echo . > $path; } 2>&1; true\"]}"
  check "box A cannot write in $path" grep -qE 'Read-only file system|Permission denied' <<<"$(jf 'j["stdout"]')"
done
# /dev is the box's own read-only tmpfs (its device nodes are inodes of
# its own): its devices work, the box's own devpts and /dev/shm are
# mounted on it, and nothing can be added to it.
api POST "/v1/sandboxes/$A/exec" -d '{"cmd":["sh","-c","echo x > /dev/null && head -c 3 /dev/zero | wc -c && python3 -c \"import os,pty; m,s=pty.openpty(); print(os.ttyname(s))\" && echo shm > /dev/shm/f && cat /dev/shm/f; { touch /dev/x; } 2>&1"]}'
expect_eq "devices, a pty and /dev/shm work; /dev takes no new file" "$(jf 'j["stdout"]')" \
  "$(printf '3\n/dev/pts/0\nshm\ntouch: cannot touch %s: Read-only file system' "'/dev/x'")"
api POST "/v1/sandboxes/$B/exec" -d '{"cmd":["sh","-c","ls /dev/shm /dev/pts | sort | tr \"\\n\" \" \""]}'
check "box B sees neither A's /dev/shm file nor A's pty ($(jf 'j["stdout"]'))" \
  not grep -qE '(^| )(f|0) ' <<<"$(jf 'j["stdout"]') "
api POST "/v1/sandboxes/$A/exec" -d '{"cmd":["sh","-c","echo mine > /workspace/f && cat /workspace/f"]}'
expect_eq "the box's own areas stay writable" "$(jf 'j["stdout"]')" mine
api POST "/v1/sandboxes/$B/exec" -d '{"cmd":["sh","-c","ls /workspace | wc -l"]}'
expect_eq "box B does not see box A's files" "$(jf 'j["stdout"]')" 0

# inotify on the shared root: box A watches /usr/bin, /usr/lib, /etc, /
# and its devices, /dev/null and the others (tests/hostile/probe.c,
# inotify_isolated) while box B runs and reads programs there and writes
# and reads the devices, and the host does the same; A sees none of that,
# and still sees its own /workspace and /tmp events.
PROBE=$T_SCRATCH/probe
if gcc -static -O1 -o "$PROBE" "$(dirname "$0")/../hostile/probe.c" 2>/dev/null ||
  gcc -O1 -o "$PROBE" "$(dirname "$0")/../hostile/probe.c"; then
  api PUT "/v1/sandboxes/$A/files?path=/workspace/probe&mode=0755" --data-binary @"$PROBE"
  expect_code "the probe is uploaded to box A" 201
  api POST "/v1/sandboxes/$A/exec" -d '{"cmd":["/workspace/probe","inotify_isolated"],"background":true}'
  WPID=$(jf 'j["pid"]')
  probe_out() {
    api GET "/v1/sandboxes/$A/processes/$WPID/output?stream=stdout"
    printf '%s' "$BODY"
  }
  probe_ready() { grep -q '^READY inotify' <<<"$(probe_out)"; }
  check "box A's watcher is ready" wait_for 30 probe_ready
  api POST "/v1/sandboxes/$B/exec" -d '{"cmd":["sh","-c","env true; ls /usr/bin /usr/lib /etc / >/dev/null; cat /etc/passwd /etc/hostname /usr/bin/env /etc/ssl/certs/ca-certificates.crt >/dev/null 2>&1; echo x >/dev/null; head -c1 /dev/urandom >/dev/null; head -c1 /dev/zero >/dev/full; true"]}'
  expect_code "box B runs and reads programs in the shared root and uses its devices" 200
  f=/usr/lib/.husk-inotify-$$
  /usr/bin/env true
  cat /usr/bin/env /etc/ssl/certs/ca-certificates.crt >/dev/null 2>&1
  ls /usr/bin /usr/lib / /etc >/dev/null
  : >"$f" && rm -f "$f"
  echo x >/dev/null
  head -c1 /dev/urandom >/dev/null
  head -c1 /dev/zero >/dev/null
  api POST "/v1/sandboxes/$A/processes/$WPID/stdin?eof=1" --data-binary ''
  probe_ended() {
    api GET "/v1/sandboxes/$A/processes/$WPID"
    [ "$(jf 'j["state"]')" != running ]
  }
  check "box A's watcher ends" wait_for 30 probe_ended
  line=$(grep -m1 -E '^(PASS|FAIL) inotify_isolated' <<<"$(probe_out)")
  check "box A sees no event of box B or the host on the shared root, and its own ($line)" \
    grep -q '^PASS' <<<"$line"
else
  not_ok "build tests/hostile/probe.c"
fi

# As root of the box's user namespace, with every capability there: the
# shared mounts were copied from the spawner's more privileged namespace,
# so the kernel keeps them read-only and attached.
INIT=$(box_pids "$A" | while read -r p; do [ "$(awk '/^NSpid/ {print $NF}' "/proc/$p/status")" = 1 ] && echo "$p"; done | head -n1)
check "box A's init is found ($INIT)" [ -n "$INIT" ]
as_box_root() { nsenter -t "$INIT" -U -m -- "$@" 2>/dev/null; }
check "box root cannot remount / read-write" not as_box_root mount -o remount,bind,rw /
check "box root cannot remount /usr read-write" not as_box_root mount -o remount,bind,rw /usr
check "box root cannot unmount a shared /etc entry" not as_box_root umount /etc/ssl/certs
check "box root cannot write /etc/passwd" not as_box_root sh -c 'echo x >> /etc/passwd'
check "box root cannot remount /dev read-write" not as_box_root mount -o remount,bind,rw /dev
check "box root cannot remount /dev suid or exec" \
  not as_box_root mount -o remount,bind,suid,exec /dev
check "box root cannot unmount /dev" not as_box_root umount /dev
check "box root cannot create a device node" not as_box_root mknod /dev/shm/.husk-mem c 1 1
check "box root cannot create a file in /dev" not as_box_root touch /dev/.husk-x
api POST "/v1/sandboxes/$A/exec" -d '{"cmd":["sh","-c","head -c 4 /dev/urandom | wc -c; head -c 2 /dev/random | wc -c; { echo x > /dev/full; } 2>&1; { echo x > /dev/tty; } 2>&1; stat -c %t,%T /dev/null /dev/zero /dev/full /dev/random /dev/urandom /dev/tty; true"]}'
want=$(printf '4\n2\nsh: 1: echo: echo: I/O error\nsh: 1: cannot create /dev/tty: No such device or address\n'; stat -c %t,%T /dev/null /dev/zero /dev/full /dev/random /dev/urandom /dev/tty)
expect_eq "/dev/urandom, /dev/random, /dev/full and /dev/tty behave as the host's devices" \
  "$(jf 'j["stdout"]')" "$want"
check "box root still sees the shared root (sanity: nsenter works)" as_box_root test -s /etc/passwd

# A host file the shared root binds, replaced the way a package update
# does (a new file renamed over it): the next box sees the new one, where
# the prepared root's bind alone would keep showing the old one.
MPL=/etc/matplotlibrc
MARK="husk-root-test $$"
mpl_marked() { # BOX: how many lines of the box's /etc/matplotlibrc carry MARK
  api POST "/v1/sandboxes/$1/exec" -d "{\"cmd\":[\"sh\",\"-c\",\"grep -c '$MARK' $MPL; true\"]}"
  jf 'j["stdout"]'
}
had_mpl=0
[ -f "$MPL" ] && [ ! -L "$MPL" ] && had_mpl=1 && cp -p "$MPL" "$T_SCRATCH/mpl.orig"
restore_mpl() {
  if [ "$had_mpl" = 1 ]; then
    cp -p "$T_SCRATCH/mpl.orig" "$MPL.husk-new" && mv -f "$MPL.husk-new" "$MPL"
  else
    rm -f "$MPL"
  fi
}
on_exit 'restore_mpl; serve_cleanup'
{ [ "$had_mpl" = 1 ] && cat "$T_SCRATCH/mpl.orig"; echo "# $MARK"; } >"$MPL.husk-new"
chmod 644 "$MPL.husk-new" && mv -f "$MPL.husk-new" "$MPL"
# A shape no pool keeps: built now, not taken ready-made from the pool.
new_box '{"memory":"256M"}' || not_ok "box C"
C=$BOX
expect_eq "a box made after the host replaced $MPL sees the new file" "$(mpl_marked "$C")" 1
restore_mpl
on_exit serve_cleanup
new_box '{"memory":"256M"}' || not_ok "box D"
D=$BOX
expect_eq "... and after it was put back, the next box sees the original" "$(mpl_marked "$D")" 0
expect_eq "box C keeps the root it was made with" "$(mpl_marked "$C")" 1

for b in "$A" "$B" "$C" "$D"; do api DELETE "/v1/sandboxes/$b"; done
serve_stop
check "after a stop nothing is mounted on $PREP" not grep -q " $PREP " /proc/self/mountinfo
serve_finish
