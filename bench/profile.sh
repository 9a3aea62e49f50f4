#!/bin/bash
# Where does `husk run -- true` spend its time?  Not part of `make bench`:
# run it by hand, as root, on a husk built with symbols (the default -g).
#
#   bench/profile.sh [RUNS]      RUNS per mode [50]
#   PROFILE_GAP_MS=100           idle pause before each run of the second mode
#   PROFILE_KEEP=dir             keep the perf recordings and dumps in dir
#
# Two recordings of RUNS runs each, with the timing driver of bench/run.sh:
# back to back, and after PROFILE_GAP_MS of idle time (as between the
# commands of an agent: deferred kernel work, RCU grace periods included, is
# then finished and not shared with the previous run).  Each records, system
# wide, uprobes on husk's functions, every syscall's entry and exit, and
# process fork/exec/exit; bench/profile.py turns that into phases.
# Tracing slows husk down (about 1-2 ms per run here), so the untraced
# medians are printed first for reference.
#
# Leaves nothing behind: the uprobes (group `huskbench`) are deleted and the
# temporary directory removed on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-50}
GAP=${PROFILE_GAP_MS:-100}
HUSK=$(realpath "${BENCH_HUSK:-build/husk}")
die() { echo "profile: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (uprobes, system-wide tracing)"
command -v perf >/dev/null || die "perf is not installed (Debian: linux-perf)"
[ -x "$HUSK" ] || die "$HUSK not found: run 'make all' first"
[[ $RUNS =~ ^[1-9][0-9]*$ ]] || die "RUNS must be a positive integer"

TMP=$(mktemp -d /tmp/husk-profile.XXXXXX)
cleanup() {
  perf probe -q -d 'huskbench:*' 2>/dev/null || true
  if [ -n "${PROFILE_KEEP:-}" ]; then
    if mkdir -p "$PROFILE_KEEP"; then cp "$TMP"/*.data "$TMP"/*.txt "$PROFILE_KEEP"/ 2>/dev/null || true; fi
  fi
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

"${CC:-cc}" -std=c17 -O2 -Wall -Wextra -o "$TMP/spawnbench" bench/spawnbench.c
printf 'husk\t%s\trun\t--\t/usr/bin/true\n' "$HUSK" >"$TMP/spec"

median() { awk '{print $3/1e6}' | sort -n | awk '{a[NR]=$1} END{printf "%.2f", a[int((NR+1)/2)]}'; }
echo "== untraced medians of $RUNS runs (ms)"
echo "back to back:        $("$TMP/spawnbench" "$RUNS" 5 "$TMP/spec" 2>/dev/null | median)"
echo "after ${GAP} ms idle:    $("$TMP/spawnbench" "$RUNS" 1 "$TMP/spec" "$GAP" 2>/dev/null | median)"
echo

# The functions bench/profile.py's TIMELINE uses as phase boundaries.
funcs="main cgroup_sweep detect jail_create compile cgroup_create cgroup_attach rootfs_enter
       landlock_apply_box seccomp_policy_apply init_main jail_destroy cgroup_stats"
perf probe -q -d 'huskbench:*' 2>/dev/null || true
for f in $funcs; do
  if ! perf probe -q -x "$HUSK" -a "huskbench:$f=$f" -a "huskbench:$f=$f%return" 2>/dev/null; then
    echo "profile: no uprobe on $f (gone, inlined or renamed?): its phase merges into the next" >&2
  fi
done

record() { # name gap
  "$TMP/spawnbench" 3 1 "$TMP/spec" >/dev/null 2>&1 # warm the caches
  perf record -q -o "$TMP/$1.data" -a \
    -e 'huskbench:*' -e raw_syscalls:sys_enter -e raw_syscalls:sys_exit \
    -e sched:sched_process_fork -e sched:sched_process_exec -e sched:sched_process_exit \
    -- "$TMP/spawnbench" "$RUNS" 0 "$TMP/spec" "$2" >"$TMP/$1.samples" 2>/dev/null
  perf script -i "$TMP/$1.data" -F comm,pid,tid,time,event,trace >"$TMP/$1.txt" 2>/dev/null
  echo "traced median ($1): $(median <"$TMP/$1.samples") ms"
}
record back-to-back 0
record idle "$GAP"
echo
python3 bench/profile.py "$TMP/back-to-back.txt" "back to back" "$TMP/idle.txt" "after ${GAP} ms idle"
