#!/bin/bash
# Start-to-exit latency of `true` under husk and its peers, in one run on
# one machine.  `make bench` installs the peers, builds husk and runs this.
#
#   BENCH_N=200       timed runs per tool (quick look: BENCH_N=20)
#   BENCH_WARMUP=10   untimed runs per tool before the timed ones
#   BENCH_HUSK=path   the husk binary [build/husk]
#   BENCH_JSON=file   also write every sample (ns) and the summary there
#
# Timing: bench/spawnbench.c (compiled here into a temporary directory)
# reads CLOCK_MONOTONIC, posix_spawn()s the command with stdin/stdout on
# /dev/null, waitpid()s it and reads the clock again.  Every tool goes
# through the same driver, so the driver's own cost is in every row alike
# (see the `bare` row).  Tools run one after another: warm-up, then N runs.
#
# The target (husk median <= 0.5 x bwrap median) is reported, not enforced:
# the exit status is 0 unless the benchmark itself could not run.
# Nothing is left behind: the temporary directory (runc bundle and state,
# driver, logs) is removed on exit, every runc container is deleted.
set -euo pipefail

cd "$(dirname "$0")/.."
N=${BENCH_N:-200}
WARMUP=${BENCH_WARMUP:-10}
HUSK=${BENCH_HUSK:-build/husk}
JSON_OUT=${BENCH_JSON:-}

die() { echo "bench: $*" >&2; exit 1; }
[[ $N =~ ^[1-9][0-9]*$ ]] || die "BENCH_N must be a positive integer (got '$N')"
[[ $WARMUP =~ ^[0-9]+$ ]] || die "BENCH_WARMUP must be a non-negative integer (got '$WARMUP')"
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

# ---- the machine ---------------------------------------------------------
cgroup_layout() {
  local v2=0 v1=0
  while read -r _ _ _ _ _ _ rest; do
    case " $rest " in
      *" - cgroup2 "*) v2=1 ;;
      *" - cgroup "*) v1=1 ;;
    esac
  done </proc/self/mountinfo
  if [ $v2 = 1 ] && [ $v1 = 0 ]; then echo "v2 (unified)"
  elif [ $v2 = 1 ]; then echo "hybrid (v1 controllers + cgroup2 at $(awk '$9=="cgroup2"{print $5; exit}' /proc/self/mountinfo))"
  elif [ $v1 = 1 ]; then echo "v1"
  else echo "none"; fi
}
version_of() {
  local out
  if out=$("$@" 2>/dev/null); then echo "${out%%$'\n'*}"; else echo "not installed"; fi
}

echo "== machine"
echo "cpus:      $(nproc) x $(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)"
echo "memory:    $(awk '/^MemTotal/{printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
echo "kernel:    $(uname -srm)"
echo "os:        $(. /etc/os-release && echo "$PRETTY_NAME")"
if grep -qw hypervisor /proc/cpuinfo; then
  echo "virtual:   yes (the CPU reports a hypervisor)"
fi
echo "cgroups:   $(cgroup_layout)"
echo "husk:      $HUSK ($(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- src include 2>/dev/null || echo ', modified'))"
echo "bwrap:     $(version_of bwrap --version)"
echo "unshare:   $(version_of unshare --version)"
echo "runc:      $(version_of runc --version)"
echo "runs:      $N timed + $WARMUP warm-up per tool, one tool after another"
echo

# ---- the commands ----------------------------------------------------------
TRUE=/usr/bin/true
SPEC=$TMP/spec
: >"$SPEC"
declare -A CMDLINE
add() { # label argv...
  local label=$1
  shift
  (IFS=$'\t'; echo "$label"$'\t'"$*") >>"$SPEC"
  CMDLINE[$label]=$(printf '%q ' "$@")
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
  python3 - "$BUNDLE/config.json" "$TRUE" <<'EOF'
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
EOF
  add runc "$RUNC" --root "$RUNC_STATE" run --bundle "$BUNDLE" "husk-bench-$$-{}"
fi

# ---- measure -----------------------------------------------------------------
echo "== measuring (stderr of each tool is kept only to show a failure)" >&2
"$TMP/spawnbench" "$N" "$WARMUP" "$SPEC" >"$TMP/samples.tsv"

# Leftovers check: runc must have deleted every container.
if [ -n "$RUNC" ]; then
  left=$("$RUNC" --root "$RUNC_STATE" list -q 2>/dev/null | wc -l)
  [ "$left" = 0 ] || echo "bench: warning: $left runc containers were left; deleting them" >&2
fi

# ---- report --------------------------------------------------------------------
CMDS_FILE=$TMP/cmdlines
for k in "${!CMDLINE[@]}"; do printf '%s\t%s\n' "$k" "${CMDLINE[$k]}"; done >"$CMDS_FILE"
python3 - "$TMP/samples.tsv" "$CMDS_FILE" "$N" "$JSON_OUT" "$TMP" <<'EOF'
import json, math, statistics, sys

samples_path, cmds_path, n, json_out, tmp = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
order, runs, failed = [], {}, {}
for line in open(samples_path):
    label, run, value = line.rstrip("\n").split("\t")
    if label not in order:
        order.append(label)
    if run == "FAILED":
        failed[label] = int(value)
    else:
        runs.setdefault(label, []).append(int(value) / 1e6)  # ms
cmdline = {}
for line in open(cmds_path):
    label, cmd = line.rstrip("\n").split("\t", 1)
    cmdline[label] = cmd.rstrip().replace(tmp, "$TMP").replace("\\{\\}", "{}")

def pct(xs, p):  # nearest rank
    s = sorted(xs)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]

stats = {}
for label in order:
    if label in runs:
        xs = runs[label]
        stats[label] = {"median": statistics.median(xs), "p95": pct(xs, 95), "min": min(xs),
                        "mean": statistics.fmean(xs), "n": len(xs)}

husk = stats.get("husk")
print(f"== start-to-exit latency of `true`, {n} runs each (ms)")
print(f"{'tool':<9} {'median':>8} {'p95':>8} {'min':>8} {'mean':>8}   {'husk/tool':>9}")
for label in order:
    if label in failed:
        print(f"{label:<9} {'FAILED':>8}   (see the error above)")
        continue
    s = stats[label]
    ratio = "" if label == "husk" or not husk else f"{husk['median'] / s['median']:9.2f}x"
    print(f"{label:<9} {s['median']:8.2f} {s['p95']:8.2f} {s['min']:8.2f} {s['mean']:8.2f}   {ratio:>9}")
print("\nhusk/tool = husk median / tool median (below 1: husk is faster)")

print("\n== commands ($TMP is the benchmark's temporary directory; runc's {} is a per-run number)")
for label in order:
    print(f"{label:<9} {cmdline.get(label, '?')}")

print("\n== target")
verdict = None
if husk and "bwrap" in stats:
    limit = 0.5 * stats["bwrap"]["median"]
    verdict = husk["median"] <= limit
    print(f"husk median {husk['median']:.2f} ms <= 0.5 x bwrap median ({limit:.2f} ms): "
          f"{'MET' if verdict else 'NOT MET'} (husk/bwrap = {husk['median'] / stats['bwrap']['median']:.2f})")
else:
    print("cannot be judged: husk or bwrap did not run")

if json_out:
    json.dump({"n": n, "stats": stats, "failed": failed, "commands": cmdline,
               "target_met": verdict, "samples_ms": runs}, open(json_out, "w"), indent=1)
    print(f"\nsamples written to {json_out}")
if "husk" in failed:
    sys.exit(1)
EOF
