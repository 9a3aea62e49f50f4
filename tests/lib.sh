# Shared helpers for husk's shell test suites (sourced).
# Each suite prints TAP-style lines ("ok N - ..." / "not ok N - ...") and a
# summary; tests/run.sh adds the suites up.
#
#   HUSK     the husk binary under test (default build/husk)
#   TMPDIR   scratch space; each suite gets its own directory under it

set -u
HUSK=${HUSK:-$(cd "$(dirname "$0")/../.." && pwd)/build/husk}
SUITE=${SUITE:-$(basename "$0" .sh)}
T_N=0
T_FAIL=0
T_PASS=0
T_SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/husk-test-$SUITE.XXXXXX")
# on_exit CMD: run CMD when this suite's shell exits, never when one of its
# subshells does: a subshell killed right after it was forked (a watchdog,
# a background helper) may still hold the suite's trap and would run it --
# remove the scratch directory or stop the daemon under the running suite.
T_MAIN=$BASHPID
on_exit() { trap "[ \"\$BASHPID\" = $T_MAIN ] && { $1; }" EXIT; }
on_exit 'rm -rf "$T_SCRATCH"'

ok() { T_N=$((T_N + 1)); T_PASS=$((T_PASS + 1)); echo "ok $T_N - $SUITE: $*"; }
not_ok() { T_N=$((T_N + 1)); T_FAIL=$((T_FAIL + 1)); echo "not ok $T_N - $SUITE: $*"; }

# check DESCRIPTION COMMAND...: passes when COMMAND exits 0.
check() {
  local desc=$1; shift
  if "$@"; then ok "$desc"; else not_ok "$desc"; fi
}

# run_husk ARGS...: runs husk, capturing stdout in $OUT, stderr in $ERR,
# exit status in $RC and the --json line (last stderr line) in $JSON.
run_husk() {
  local o="$T_SCRATCH/out" e="$T_SCRATCH/err"
  "$HUSK" "$@" >"$o" 2>"$e" </dev/null
  RC=$?
  OUT=$(cat "$o")
  ERR=$(cat "$e")
  JSON=$(tail -n 1 "$e")
}

# json_field NAME: value of a top-level field of $JSON (numbers and strings).
json_field() {
  python3 -c 'import json,sys; v=json.loads(sys.argv[1]).get(sys.argv[2]); print(v if v is not None else "")' "$JSON" "$1" 2>/dev/null
}

# expect_eq DESCRIPTION GOT WANT
expect_eq() {
  if [ "$2" = "$3" ]; then ok "$1"; else not_ok "$1 (got '$2', want '$3')"; fi
}

# Nothing of husk's may survive a run: cgroups named run-*, processes in
# the husk uid range, mounts of boxes.
leftover_cgroups() {
  find /sys/fs/cgroup -maxdepth 4 -path '*/husk/run-*' -type d 2>/dev/null
}
leftover_procs() {
  # husk boxes run as host uids >= 0x40000000
  ps -e -o uid=,pid=,comm= 2>/dev/null | awk '$1 >= 1073741824 {print}'
}

finish() {
  echo "# $SUITE: $T_PASS passed, $T_FAIL failed"
  [ "$T_FAIL" -eq 0 ]
}
