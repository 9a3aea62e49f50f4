#!/bin/bash
# The hostile suite (tests/hostile/run.sh) in boxes of an image template:
# the busybox test image, so that it runs on every machine (debian.sh runs
# it in a Debian template too, when the mirror is reachable).  The probes
# of properties of the default box's root (read-only, the host's /usr, no
# /sys directory, no image files) are skipped with the reason: a template
# box's root is its own writable layer over its image, which cli.sh checks.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/template.bash"

if ! have_busybox; then
  not_ok "busybox is installed (scripts/deps.sh test installs busybox-static)"
  finish
  exit 1
fi
L=$T_SCRATCH/layers
busybox_root "$L/base"
# /usr/bin as every distribution image has it (probes link, watch and
# ioctl there).
mkdir -p "$L/base/usr/bin" "$L/base/usr/lib"
echo "ID=husk-test" >"$L/base/usr/lib/os-release"
cp /bin/busybox "$L/base/usr/bin/env"
ln -s ../../bin/busybox "$L/base/usr/bin/su"
# As the image's user app (1000): the probe refuses to run as uid 0.
mkimage "$T_SCRATCH/bb.tar" --layer "$L/base" --user app --owner home/app=1000:1000
tpl import "$T_SCRATCH/bb.tar" --name bb
expect_eq "the busybox image is a template ($ERR)" "$RC" 0
run_tpl --template bb -- sh -c 'test -e /usr/bin/python3 || echo no-host-usr'
expect_eq "its boxes have the image's root, not the host's /usr" "$OUT" no-host-usr

echo "# --- the hostile suite in boxes of template bb"
env HOSTILE_RUN_ARGS="--template bb --data $TDATA" \
  HOSTILE_SKIP="host_files_absent write_usr write_root_etc remount_rw sys_absent" \
  HOSTILE_SKIP_WHY="a template box's root is its own writable layer over its image" \
  SUITE=hostile-image bash "$(dirname "$0")/../hostile/run.sh" >"$T_SCRATCH/hostile" 2>&1
HRC=$?
grep -E "^not ok|# SKIP" "$T_SCRATCH/hostile" | sed 's/^/# /' | head -30
check "the hostile suite passes in a box of an image template ($(tail -n 1 "$T_SCRATCH/hostile"))" \
  [ "$HRC" -eq 0 ]
check "and ran its probes there" [ "$(grep -c '^ok ' "$T_SCRATCH/hostile")" -gt 90 ]
finish
