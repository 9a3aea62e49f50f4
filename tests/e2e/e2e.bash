# Helpers shared by the end-to-end suites (sourced after tests/lib.sh).
# Not a suite itself: tests/run.sh only runs tests/e2e/*.sh.
#
#   hrun ARGS...            like run_husk ("$HUSK" ARGS..., fills OUT ERR RC
#                           JSON, stdin from /dev/null), plus HP = husk's pid
#                           (its cgroups are named run-$HP-*); husk is
#                           SIGKILLed after E2E_TIMEOUT s so nothing hangs
#   hrun_in FILE ARGS...    the same with stdin from FILE
#   run_cgroups PID         cgroup directories of the boxes of husk pid PID
#   procs_in_range BASE     processes whose host uid is in [BASE, BASE+65536)
#   wait_gone SECS CMD...   polls until CMD prints nothing (0) or SECS pass (1)
#   husk_mounts             host mounts that mention husk
#   husk_tmp_dirs           directories named *husk* in /tmp and $TMPDIR, except
#                           the test suites' own scratch dirs
#   e2e_baseline / e2e_global_clean DESC
#                           global leftovers (tests/lib.sh) compared with the
#                           state at the start of the suite
#   bg_track PID            kill -9 PID when the suite exits

E2E_TIMEOUT=${E2E_TIMEOUT:-60}
E2E_BG=()

e2e_cleanup() {
  local p
  for p in "${E2E_BG[@]}"; do
    kill -9 "$p" 2>/dev/null
  done
  rm -rf "$T_SCRATCH"
}
trap e2e_cleanup EXIT

bg_track() { E2E_BG+=("$1"); }

# Kill PID with SIGKILL after SECS seconds unless cancelled (kill $WD).
_watchdog() {
  local pid=$1 secs=$2
  (
    trap 'kill "$s" 2>/dev/null; exit 0' TERM
    sleep "$secs" &
    s=$!
    wait "$s"
    kill -9 "$pid" 2>/dev/null
    echo "# watchdog: husk (pid $pid) killed after ${secs}s" >&2
  ) &
  WD=$!
}

_hrun() {
  local in=$1; shift
  local o="$T_SCRATCH/out" e="$T_SCRATCH/err"
  "$HUSK" "$@" >"$o" 2>"$e" <"$in" &
  HP=$!
  _watchdog "$HP" "$E2E_TIMEOUT"
  wait "$HP"
  RC=$?
  kill "$WD" 2>/dev/null
  wait "$WD" 2>/dev/null
  OUT=$(cat "$o")
  ERR=$(cat "$e")
  JSON=$(tail -n 1 "$e")
}

hrun() { _hrun /dev/null "$@"; }
hrun_in() { local f=$1; shift; _hrun "$f" "$@"; }

run_cgroups() {
  find /sys/fs/cgroup -maxdepth 4 -type d -path "*/husk/run-$1-*" 2>/dev/null
}

procs_in_range() {
  ps -e -o uid=,pid=,stat=,comm= 2>/dev/null |
    awk -v b="$1" '$1 >= b && $1 < b + 65536 {print}'
}

wait_gone() {
  local secs=$1; shift
  local i n=$((secs * 10))
  for ((i = 0; i < n; i++)); do
    [ -z "$("$@")" ] && return 0
    sleep 0.1
  done
  [ -z "$("$@")" ]
}

husk_mounts() { grep -c husk /proc/self/mountinfo; }

husk_tmp_dirs() {
  local d
  for d in /tmp "${TMPDIR:-/tmp}"; do
    find "$d" -maxdepth 1 -type d -iname '*husk*' ! -name 'husk-test-*' 2>/dev/null
  done | sort -u
}

e2e_baseline() {
  E2E_BASE_CG=$(leftover_cgroups | sort)
  E2E_BASE_PROCS=$(leftover_procs | awk '{print $2}' | sort)
  E2E_BASE_MOUNTS=$(husk_mounts)
  E2E_BASE_TMP=$(husk_tmp_dirs)
}

e2e_global_clean() {
  local new_cg new_procs
  new_cg=$(comm -13 <(echo "$E2E_BASE_CG") <(leftover_cgroups | sort) | grep .)
  new_procs=$(comm -13 <(echo "$E2E_BASE_PROCS") <(leftover_procs | awk '{print $2}' | sort) | grep .)
  if [ -z "$new_cg" ]; then ok "$1: no new run-* cgroup"; else not_ok "$1: cgroups left: $new_cg"; fi
  if [ -z "$new_procs" ]; then ok "$1: no new process in the husk uid range"; else
    not_ok "$1: processes left: $(leftover_procs | tr '\n' ';')"; fi
  expect_eq "$1: host mounts mentioning husk unchanged" "$(husk_mounts)" "$E2E_BASE_MOUNTS"
  expect_eq "$1: no new husk temp dir" "$(husk_tmp_dirs)" "$E2E_BASE_TMP"
}

# The uid base of a box, from "0 BASE 65536" printed by `cat /proc/self/uid_map`.
uid_base_of() { awk 'NR == 1 && $1 == 0 {print $2}' <<<"$1"; }

# json_is FIELD TYPE: the field exists in $JSON and is a (non-negative) int or a str.
json_has() {
  python3 -c '
import json, sys
o = json.loads(sys.argv[1]); f = sys.argv[2]; t = sys.argv[3]
v = o.get(f)
ok = (t == "int" and isinstance(v, int) and not isinstance(v, bool) and v >= 0) or (t == "str" and isinstance(v, str))
sys.exit(0 if ok else 1)' "$JSON" "$1" "$2" 2>/dev/null
}

json_valid() { python3 -c 'import json,sys; o=json.loads(sys.argv[1]); sys.exit(0 if isinstance(o, dict) else 1)' "$JSON" 2>/dev/null; }

# expect_run DESC CODE REASON SIGNAL: checks $RC and the --json summary.
expect_run() {
  local d=$1 code=$2 reason=$3 sig=$4
  expect_eq "$d: exit status" "$RC" "$code"
  expect_eq "$d: json reason" "$(json_field reason)" "$reason"
  expect_eq "$d: json exit_code" "$(json_field exit_code)" "$code"
  expect_eq "$d: json signal" "$(json_field signal)" "$sig"
}
