#!/bin/bash
# Start-to-exit latency of `true` under husk and its peers, in one run on
# one machine.  `make bench` installs the peers, builds husk and runs this.
#
#   BENCH_N=200        timed runs per tool and pass (quick look: BENCH_N=20)
#   BENCH_WARMUP=10    untimed runs per tool before the timed ones
#   BENCH_GAP_MS=100   idle time before each run of the second pass
#                      (0: no second pass)
#   BENCH_HUSK=path    the husk binary [build/husk]
#   BENCH_JSON=file    also write every sample (ms) and the summary there
#
# Rows: bare fork/exec of /usr/bin/true; husk run (full isolation); bwrap
# with a comparable root; unshare -Urmpinu (namespaces only); runc with a
# bundle whose read-only root holds /usr bound read-only.
#
# Two passes.  "back to back": each run starts as soon as the previous one
# ended (what hyperfine measures).  "after idle": BENCH_GAP_MS of idle time
# before each run, as between the commands of an agent.  Deferred kernel
# work of the previous run is then over, and a cost that back-to-back runs
# share, such as waiting for an RCU grace period, is paid by every run.
#
# Timing: bench/spawnbench.c (compiled here into a temporary directory)
# reads CLOCK_MONOTONIC, posix_spawn()s the command with stdin/stdout on
# /dev/null, waitpid()s it and reads the clock again.  Every tool goes
# through the same driver, so the driver's own cost is in every row alike
# (see the `bare` row).  Tools run one after another: warm-up, then N runs.
# bench/report.py makes the tables.
#
# The target (husk median <= 0.5 x bwrap median) is reported, not enforced:
# the exit status is 0 unless the benchmark itself could not run.
# Nothing is left behind: the temporary directory (runc bundle and state,
# driver, logs) is removed on exit, every runc container is deleted.
set -euo pipefail

cd "$(dirname "$0")/.."
N=${BENCH_N:-200}
WARMUP=${BENCH_WARMUP:-10}
GAP=${BENCH_GAP_MS:-100}
HUSK=${BENCH_HUSK:-build/husk}
JSON_OUT=${BENCH_JSON:-}

die() { echo "bench: $*" >&2; exit 1; }
[[ $N =~ ^[1-9][0-9]*$ ]] || die "BENCH_N must be a positive integer (got '$N')"
[[ $WARMUP =~ ^[0-9]+$ ]] || die "BENCH_WARMUP must be a non-negative integer (got '$WARMUP')"
[[ $GAP =~ ^[0-9]+$ ]] || die "BENCH_GAP_MS must be a non-negative integer (got '$GAP')"
[ -x "$HUSK" ] || die "$HUSK not found: run 'make all' first (or 'make bench')"
HUSK=$(realpath "$HUSK")
command -v python3 >/dev/null || die "python3 is required for the statistics"
CC=${CC:-cc}
command -v "$CC" >/dev/null || die "no C compiler ($CC) for the timing driver"

TMP=$(mktemp -d /tmp/husk-bench.XXXXXX)
RUNC=$(command -v runc || true)
RUNC_STATE=$TMP/runc-state
cleanup() {
  # Every container the benchmark may have left (a run killed midway).
  if [ -n "$RUNC" ] && [ -d "$RUNC_STATE" ]; then
    for id in $("$RUNC" --root "$RUNC_STATE" list -q 2>/dev/null); do
      "$RUNC" --root "$RUNC_STATE" delete -f "$id" >/dev/null 2>&1 || true
    done
  fi
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"$CC" -std=c17 -O2 -Wall -Wextra -o "$TMP/spawnbench" bench/spawnbench.c

# ---- the machine -----------------------------------------------------------
cgroup_layout() {
  local v2=0 v1=0 where="" fav=off
  while read -r _ _ _ _ mnt _ rest; do
    case " $rest " in
      *" - cgroup2 "*) v2=1; where=$mnt ;;
      *" - cgroup "*) v1=1 ;;
      *) continue ;;
    esac
    case "$rest" in *favordynmods*) fav=on ;; esac
  done </proc/self/mountinfo
  if [ $v2 = 1 ] && [ $v1 = 0 ]; then echo -n "v2 (unified at $where)"
  elif [ $v2 = 1 ]; then echo -n "hybrid (v1 controllers, cgroup2 at $where)"
  elif [ $v1 = 1 ]; then echo -n "v1"
  else echo -n "none"; fi
  # favordynmods on any hierarchy spares cgroup.procs writers an RCU grace
  # period (see docs/performance.md): it changes husk's numbers on v1.
  echo ", favordynmods $fav"
}
version_of() {
  local out
  if out=$("$@" 2>/dev/null); then echo "${out%%$'\n'*}"; else echo "not installed"; fi
}

echo "== machine"
echo "cpus:      $(nproc) x $(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)"
echo "memory:    $(awk '/^MemTotal/{printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
echo "kernel:    $(uname -srm)"
echo "os:        $(sed -n 's/^PRETTY_NAME="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' /etc/os-release)"
if grep -qw hypervisor /proc/cpuinfo; then
  echo "virtual:   yes (the CPU reports a hypervisor)"
fi
echo "cgroups:   $(cgroup_layout)"
echo "husk:      $HUSK ($(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- src include 2>/dev/null || echo ', src modified'))"
echo "bwrap:     $(version_of bwrap --version)"
echo "unshare:   $(version_of unshare --version)"
echo "runc:      $(version_of runc --version)"
echo "runs:      $N timed + warm-up per tool and pass, one tool after another"
echo "load:      $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min) before the run"
echo

# ---- the commands ----------------------------------------------------------
TRUE=/usr/bin/true
SPEC=$TMP/spec
: >"$SPEC"
CMDS=$TMP/cmdlines
: >"$CMDS"
add() { # label argv...
  local label=$1
  shift
  (IFS=$'\t'; echo "$label"$'\t'"$*") >>"$SPEC"
  printf '%s\t%s\n' "$label" "$*" >>"$CMDS"
}

add bare "$TRUE"
add husk "$HUSK" run -- "$TRUE"
if command -v bwrap >/dev/null; then
  add bwrap "$(command -v bwrap)" --unshare-all --die-with-parent \
    --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib \
    --symlink usr/lib64 /lib64 --symlink usr/sbin /sbin \
    --proc /proc --dev /dev --tmpfs /tmp --tmpfs /workspace --chdir /workspace \
    --new-session --cap-drop ALL --unshare-user --uid 1000 --gid 1000 "$TRUE"
fi
if command -v unshare >/dev/null; then
  add unshare "$(command -v unshare)" -Urmpinu --fork "$TRUE"
fi
if [ -n "$RUNC" ]; then
  # A bundle like the boxes above: read-only root holding only /usr (bound
  # read-only) and the merged-/usr links, tmpfs /tmp and /workspace, uid
  # 1000, runc's default pid/net/ipc/uts/mount namespaces, masked paths and
  # cgroup.  Each run is a new container id; `runc run` deletes it on exit.
  BUNDLE=$TMP/runc-bundle
  mkdir -p "$BUNDLE/rootfs" "$RUNC_STATE"
  (cd "$BUNDLE" && "$RUNC" spec)
  for d in usr proc dev sys tmp workspace; do mkdir "$BUNDLE/rootfs/$d"; done
  for l in bin lib lib64 sbin; do ln -s "usr/$l" "$BUNDLE/rootfs/$l"; done
  python3 - "$BUNDLE/config.json" "$TRUE" <<'PY'
import json, sys
path, prog = sys.argv[1], sys.argv[2]
c = json.load(open(path))
c["process"].update(args=[prog], terminal=False, user={"uid": 1000, "gid": 1000}, cwd="/workspace")
c["root"] = {"path": "rootfs", "readonly": True}
c["mounts"].append({"destination": "/usr", "type": "bind", "source": "/usr",
                    "options": ["rbind", "ro", "nosuid", "nodev"]})
for d in ("/tmp", "/workspace"):
    c["mounts"].append({"destination": d, "type": "tmpfs", "source": "tmpfs",
                        "options": ["nosuid", "nodev", "mode=1777"]})
json.dump(c, open(path, "w"), indent=1)
PY
  add runc "$RUNC" --root "$RUNC_STATE" run --bundle "$BUNDLE" "husk-bench-$$-{}"
fi

# ---- measure ---------------------------------------------------------------
# /proc/stat around each pass: CPU time the whole machine spent, to tell
# how much of it went to something other than the benchmark.
cpu_mark() { echo "$(date +%s%N) $(getconf CLK_TCK) $(head -n1 /proc/stat)"; }
pass() { # gap warmup
  cpu_mark >"$TMP/cpu-$1"
  "$TMP/spawnbench" "$N" "$2" "$SPEC" "$1" >"$TMP/samples-$1.tsv"
  cpu_mark >>"$TMP/cpu-$1"
}
echo "bench: pass 1, back to back" >&2
pass 0 "$WARMUP"
if [ "$GAP" -gt 0 ]; then
  echo "bench: pass 2, after $GAP ms idle each (about $(((N + 2) * GAP * $(wc -l <"$SPEC") / 1000)) s of idle time)" >&2
  pass "$GAP" 2
fi

# runc must have deleted every container (cleanup() deletes any left).
if [ -n "$RUNC" ]; then
  left=$("$RUNC" --root "$RUNC_STATE" list -q 2>/dev/null | wc -l)
  [ "$left" = 0 ] || echo "bench: warning: $left runc containers were left; deleting them" >&2
fi

# ---- report ----------------------------------------------------------------
python3 bench/report.py "$TMP" "$CMDS" "$N" "$GAP" "$JSON_OUT"
