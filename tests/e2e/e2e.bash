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
#   husk_mounts             host mounts that mention husk (sorted lines)
#   husk_tmp_dirs           anything in the suite's own $TMPDIR, and entries in
#                           /tmp named the way husk would name a temp dir
#   husk_track PID          a husk started by hand (hrun tracks its own)
#   e2e_baseline / e2e_global_clean DESC
#                           leftovers of this suite's runs, and host-wide ones
#                           (tests/lib.sh) new since the start of the suite
#   held_start OUT ARGS... / held_end
#                           a husk in the background whose program ends when
#                           its stdin (a FIFO held here) is closed
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
on_exit e2e_cleanup

bg_track() { E2E_BG+=("$1"); }

# not CMD...: succeeds when CMD fails (for `check`).
not() { ! "$@"; }

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
  husk_track "$HP"
  _watchdog "$HP" "$E2E_TIMEOUT"
  wait "$HP"
  RC=$?
  kill "$WD" 2>/dev/null
  wait "$WD" 2>/dev/null
  { OUT=$(cat "$o"); ERR=$(cat "$e"); } 2>/dev/null # binary output: no NUL warnings
  JSON=$(tail -n 1 "$e")
}

# held_start OUTFILE ARGS...: "$HUSK" ARGS in the background (pid in HELD),
# stdout to OUTFILE, stdin a FIFO this shell holds open.  held_end closes it
# (the program sees EOF, which is how it is told to finish: no signal
# needed) and waits for husk, status in HELD_RC.
held_start() {
  local out=$1; shift
  local fifo="$T_SCRATCH/held.fifo"
  rm -f "$fifo"
  mkfifo "$fifo"
  "$HUSK" "$@" <"$fifo" >"$out" 2>/dev/null &
  HELD=$!
  husk_track "$HELD"
  bg_track "$HELD"
  exec {HELD_FD}>"$fifo"
}
held_end() {
  exec {HELD_FD}>&-
  _watchdog "$HELD" "$E2E_TIMEOUT"
  wait "$HELD"
  HELD_RC=$?
  kill "$WD" 2>/dev/null
  wait "$WD" 2>/dev/null
}
# wait_for_output FILE: until FILE is not empty (up to 15 s).
wait_for_output() {
  local i
  for ((i = 0; i < 300; i++)); do
    [ -s "$1" ] && return 0
    sleep 0.05
  done
  return 1
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

husk_mounts() { grep husk /proc/self/mountinfo | cut -d' ' -f5- | sort; }

# husk runs with TMPDIR set to a directory of the suite's own, which must
# stay empty.  In /tmp, where other programs come and go, only names husk
# itself would plausibly use are looked at: husk + a mkdtemp suffix
# (husk.XXXXXX, husk-XXXXXX, huskXXXXXX) or husk-run-* / husk-box-*.
E2E_TMPDIR=$T_SCRATCH/tmpdir
mkdir -p "$E2E_TMPDIR"
export TMPDIR=$E2E_TMPDIR
husk_tmp_dirs() {
  find "$E2E_TMPDIR" -mindepth 1 -maxdepth 1 2>/dev/null
  find /tmp -mindepth 1 -maxdepth 1 -printf '%f\n' 2>/dev/null |
    grep -E '^(husk[-._]?[A-Za-z0-9]{6}|husk-(run|box)-.*)$' | sed 's|^|/tmp/|' | sort
}

e2e_baseline() {
  E2E_BASE_CG=$(leftover_cgroups | sort)
  E2E_BASE_PROCS=$(leftover_procs | awk '{print $2}' | sort)
  E2E_BASE_MOUNTS=$(husk_mounts)
  E2E_BASE_TMP=$(husk_tmp_dirs)
}

# Every husk this suite started (hrun, husk_track): the boxes' cgroups are
# named run-<husk pid>-*, so leftovers can be told apart from the boxes of
# whatever else runs husk on this host at the same time.
E2E_HPS=()
husk_track() { E2E_HPS+=("$1"); }

# Processes in the husk uid range that sit in a cgroup of one of our boxes
# (a box process cannot leave its cgroup, and a populated cgroup cannot be
# removed, so every leftover of ours is found this way).
our_leftover_procs() {
  [ ${#E2E_HPS[@]} -eq 0 ] && return 0
  local re pid
  re=$(IFS='|'; echo "${E2E_HPS[*]}")
  for pid in $(leftover_procs | awk '{print $2}'); do
    grep -qE "/husk/run-($re)-" "/proc/$pid/cgroup" 2>/dev/null && ps -o uid=,pid=,stat=,comm= -p "$pid"
  done
}
our_leftover_cgroups() {
  local hp
  for hp in "${E2E_HPS[@]}"; do run_cgroups "$hp"; done
}

# Host-wide: processes in the husk uid range that no live `husk run` owns:
# in a run-<pid>-* cgroup whose husk is gone, or in no husk cgroup at all.
# (Processes of live runs and of other husk boxes, e.g. `husk serve`'s
# box-* cgroups, belong to someone else running at the same time.)
orphan_box_procs() {
  local pid cg hp
  for pid in $(leftover_procs | awk '{print $2}'); do
    cg=$(grep -o '/husk/[^/]*' "/proc/$pid/cgroup" 2>/dev/null | head -n 1)
    [ -d "/proc/$pid" ] || continue
    if [[ "$cg" =~ ^/husk/run-([0-9]+)- ]]; then
      hp=${BASH_REMATCH[1]}
      kill -0 "$hp" 2>/dev/null && continue
    elif [ -n "$cg" ]; then
      continue
    fi
    ps -o uid=,pid=,stat=,comm= -p "$pid"
  done
}
# Host-wide: run-<pid>-* cgroups whose husk is gone (not yet swept).
stale_run_cgroups() {
  local d hp
  for d in $(leftover_cgroups); do
    [[ "$d" =~ /run-([0-9]+)-[^/]*$ ]] || continue
    hp=${BASH_REMATCH[1]}
    kill -0 "$hp" 2>/dev/null || echo "$d"
  done
}

e2e_global_clean() {
  local left
  left=$(our_leftover_cgroups)
  if [ -z "$left" ]; then ok "$1: no run-* cgroup of this suite's ${#E2E_HPS[@]} runs"; else
    not_ok "$1: cgroups left: $(tr '\n' ' ' <<<"$left")"; fi
  left=$(our_leftover_procs)
  if [ -z "$left" ]; then ok "$1: no process of this suite's boxes"; else
    not_ok "$1: processes left: $(tr '\n' ';' <<<"$left")"; fi
  # Host-wide, against the state when the suite began (tests/lib.sh's
  # leftover_cgroups and leftover_procs, minus what other live husks own).
  left=$(comm -13 <(echo "$E2E_BASE_CG") <(stale_run_cgroups | sort) | grep .)
  if [ -z "$left" ]; then ok "$1: host-wide, no new stale run-* cgroup"; else
    not_ok "$1: host-wide, stale run-* cgroups: $(tr '\n' ' ' <<<"$left")"; fi
  left=$(orphan_box_procs | awk 'NR == FNR {old[$1]; next} !($2 in old)' <(echo "$E2E_BASE_PROCS") -)
  if [ -z "$left" ]; then ok "$1: host-wide, no orphaned process in the husk uid range"; else
    not_ok "$1: host-wide, orphaned processes in the husk uid range: $(tr '\n' ';' <<<"$left")"; fi
  left=$(comm -13 <(echo "$E2E_BASE_MOUNTS") <(husk_mounts) | grep .)
  if [ -z "$left" ]; then ok "$1: no new host mount mentioning husk"; else
    not_ok "$1: new host mounts: $(tr '\n' ';' <<<"$left")"; fi
  left=$(comm -13 <(echo "$E2E_BASE_TMP") <(husk_tmp_dirs) | grep .)
  if [ -z "$left" ]; then ok "$1: no new husk temp dir"; else
    not_ok "$1: new husk temp dirs: $(tr '\n' ' ' <<<"$left")"; fi
}

# The uid base of a box, from "0 BASE 65536" printed by `cat /proc/self/uid_map`.
uid_base_of() { awk 'NR == 1 && $1 == 0 {print $2}' <<<"$1"; }

# json_has FIELD TYPE: the field exists in $JSON and is a (non-negative) int or a str.
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
