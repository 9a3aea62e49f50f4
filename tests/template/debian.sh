#!/bin/bash
# A real Debian root as a template (debootstrap from the host's apt mirror,
# the one the project's packages come from): a Python package the host
# lacks runs in its boxes, and the hostile suite runs against a box of it.
# Skipped, saying so, only when the mirror's Release file cannot be
# fetched before the create.
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
# Reachability is decided before the create, by fetching the suite's
# Release file from the mirror husk picks (src/template/debian.c
# host_mirror: the first http(s) URL of a non-comment line of the host's
# apt sources that is not the security archive); only that probe failing
# skips.  A create that fails after it is a failure.
host_mirror() {
  local f line u
  for f in /etc/apt/sources.list.d/debian.sources /etc/apt/sources.list; do
    [ -r "$f" ] || continue
    while IFS= read -r line; do
      [[ $line == \#* || $line == *security* ]] && continue
      u=$(grep -o 'https\?://[^[:space:]]*' <<<"$line" | head -n1)
      [ -n "$u" ] && { echo "$u"; return; }
    done <"$f"
  done
  echo http://deb.debian.org/debian
}
MIRROR=$(host_mirror)
if ! curl -fsS -o "$T_SCRATCH/Release" --max-time 30 "$MIRROR/dists/bookworm/Release" 2>"$T_SCRATCH/probe"; then
  ok "a Debian template # SKIP $MIRROR/dists/bookworm/Release cannot be fetched from this machine ($(head -c 200 "$T_SCRATCH/probe"))"
  finish
  exit 0
fi
check "the probe fetched the suite's Release file" grep -q '^Suite: ' "$T_SCRATCH/Release"

# debootstrap gets the proxy settings of husk's environment: the create
# goes through a forwarding proxy on loopback, which logs what it relayed.
python3 "$(dirname "$0")/fwdproxy.py" "$T_SCRATCH/proxy.log" >"$T_SCRATCH/proxy.port" &
PROXY_PID=$!
on_exit 'kill $PROXY_PID 2>/dev/null; rm -rf "$T_SCRATCH"'
for _ in $(seq 100); do [ -s "$T_SCRATCH/proxy.port" ] && break; sleep 0.05; done
PROXY=http://127.0.0.1:$(cat "$T_SCRATCH/proxy.port")
http_proxy=$PROXY https_proxy=$PROXY no_proxy=localhost \
  "$HUSK" template create deb --debian bookworm --packages "python3,$PKG" --data "$TDATA" \
  >"$T_SCRATCH/out" 2>"$T_SCRATCH/log"
RC=$?
[ "$RC" -ne 0 ] && tail -n 15 "$T_SCRATCH/log" | sed 's/^/#   /'
check "husk used the mirror the probe reached ($MIRROR)" grep -qF "from $MIRROR" "$T_SCRATCH/log"
check "debootstrap fetched through husk's http_proxy" grep -q "dists/bookworm/" "$T_SCRATCH/proxy.log"
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
