#!/bin/bash
# A real Debian root as a template (debootstrap from the host's apt mirror,
# the one the project's packages come from): a Python package the host
# lacks runs in its boxes, and the hostile suite runs against a box of it.
# Skipped, saying so, only when debootstrap cannot reach the mirror.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/template.bash"

PKG=python3-humanize MOD=humanize
if ! command -v debootstrap >/dev/null; then
  not_ok "debootstrap is installed (scripts/deps.sh test installs it)"
  finish
  exit 1
fi
check "the host lacks the package the template gets ($PKG)" \
  bash -c "! python3 -c 'import $MOD' 2>/dev/null && ! /usr/bin/python3 -c 'import $MOD' 2>/dev/null"
"$HUSK" template create deb --debian bookworm --packages "python3,$PKG" --data "$TDATA" \
  >"$T_SCRATCH/out" 2>"$T_SCRATCH/log"
RC=$?
if [ "$RC" -ne 0 ] && grep -qiE "failure trying to run|couldn't download|connection|resolve|Release" \
  "$T_SCRATCH/log"; then
  echo "# debootstrap's log:"
  tail -n 5 "$T_SCRATCH/log" | sed 's/^/#   /'
  ok "a Debian template # SKIP the Debian mirror is not reachable from this machine"
  finish
  exit 0
fi
expect_eq "husk template create deb --debian bookworm --packages python3,$PKG ($(tail -n 1 "$T_SCRATCH/log"))" "$RC" 0
check "it is a template of source debian" grep -q '"source":"debian"' "$T_SCRATCH/out"
run_tpl --template deb -- python3 -c "import $MOD, sys; print($MOD.naturalsize(3000000), sys.version_info[0])"
expect_eq "a Python package the host lacks runs in the template's box ($ERR)" "$OUT" "3.0 MB 3"
run_tpl --template deb -- sh -c 'whoami; pwd; . /etc/os-release; echo $ID $VERSION_CODENAME'
expect_eq "as the box user, in /workspace, on Debian" "$OUT" $'user\n/workspace\ndebian bookworm'
run_tpl --template deb -- sh -c 'ls /dev; test -e /dev/sda || echo no-host-devices'
check "its /dev is husk's, not the root's debootstrap made" grep -q "no-host-devices" <<<"$OUT"

# The hostile suite against a box of the template.  Five probes check
# properties of the default box's root (read-only, the host's /usr, no
# /sys directory, no image files): a template box's root is its own
# writable layer over its image, which tests/template/cli.sh checks
# instead.
echo "# --- the hostile suite in boxes of template deb"
env HOSTILE_RUN_ARGS="--template deb --data $TDATA" \
  HOSTILE_SKIP="host_files_absent write_usr write_root_etc remount_rw sys_absent" \
  HOSTILE_SKIP_WHY="a template box's root is its own writable layer over its image" \
  SUITE=hostile-deb bash "$(dirname "$0")/../hostile/run.sh" >"$T_SCRATCH/hostile" 2>&1
HRC=$?
sed 's/^/# /' "$T_SCRATCH/hostile" | grep -E "^# not ok" | head -20
check "the hostile suite passes in a template box ($(tail -n 1 "$T_SCRATCH/hostile"))" \
  [ "$HRC" -eq 0 ]
check "and ran its probes there" [ "$(grep -c '^ok ' "$T_SCRATCH/hostile")" -gt 90 ]
finish
