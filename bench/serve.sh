#!/bin/bash
# Benchmarks of `husk serve`: each runs husk and its peers in the
# same run and prints medians, p95, the ratios and the commands.
#
#   bench/serve.sh                      everything (about 4 minutes)
#   BENCH_ONLY="lifecycle exec" bench/serve.sh   a subset of:
#                                       oneshot lifecycle exec density files
#
# Phases:
#   oneshot    the peers of the lifecycle target: `true` bare, under bwrap
#              and under `husk run`, one-shot, back to back (bench/spawnbench.c)
#   lifecycle  create + exec `true` + delete over HTTP on loopback: one client
#              back to back, one client with BENCH_GAP_MS idle before each
#              lifecycle, 16 clients; with --pool 0 and with --pool BENCH_POOL
#   exec       execs of `true` per second in one live box, one client, next
#              to bare fork+exec (and posix_spawn) per second
#   density    BENCH_DENSITY_N idle boxes created by 16 clients: time until
#              all run, host memory per box from /proc/meminfo (and the
#              boxes' cgroups, slabinfo), then delete all and check that
#              nothing is left
#   files      a BENCH_FILE_MIB file uploaded then downloaded through the API
#              (curl), sha256-checked, next to `cp` of the same file
#
# Knobs (defaults in brackets):
#   BENCH_HUSK [build/husk]   BENCH_POOL [32] (0: no warm-pool runs)
#   BENCH_SECONDS [12]        bound of each timed lifecycle run
#   BENCH_GAP_MS [50]         idle time before each lifecycle of the paced run
#   BENCH_DENSITY_N [1000]    BENCH_FILE_MIB [1024]   BENCH_FILE_REPS [5]
#   BENCH_JSON=file           also write every result there
#
# Every daemon runs on 127.0.0.1 with a random port, its own data directory
# and admin key in a temporary directory, and its own tenant.  At the end of
# each phase every box is deleted through the API, the daemon is stopped
# (SIGTERM), and the host is checked for anything it left (its cgroups in
# every hierarchy, processes in them, entries in DATA/boxes); what is found
# is reported and removed.  The temporary directory is removed on exit.
#
# Targets are reported, not enforced: the exit status is 0 unless the
# benchmark itself could not run.  Results and profiles: docs/performance.md.
# Where the time goes: bench/serve-profile.sh (perf + strace under one of
# these loads); what an idle box holds: bench/serve-memprofile.sh.
set -euo pipefail

cd "$(dirname "$0")/.."
HUSK=${BENCH_HUSK:-build/husk}
POOL=${BENCH_POOL:-32}
ONLY=${BENCH_ONLY:-oneshot lifecycle exec density files}
SECS=${BENCH_SECONDS:-12}
GAP=${BENCH_GAP_MS:-50}
DENSITY_N=${BENCH_DENSITY_N:-1000}
FILE_MIB=${BENCH_FILE_MIB:-1024}
FILE_REPS=${BENCH_FILE_REPS:-5}
JSON_OUT=${BENCH_JSON:-}
ONESHOT_N=${BENCH_ONESHOT_N:-100}

die() { echo "serve-bench: $*" >&2; exit 1; }
note() { echo "serve-bench: $*" >&2; }
for v in POOL SECS GAP DENSITY_N FILE_MIB FILE_REPS ONESHOT_N; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer (got '${!v}')"
done
[ -x "$HUSK" ] || die "$HUSK not found: run 'make all' first"
HUSK=$(realpath "$HUSK")
for c in curl jq python3 sha256sum; do command -v $c >/dev/null || die "$c is required"; done
CC=${CC:-cc}
command -v "$CC" >/dev/null || die "no C compiler ($CC) for the load driver"
[ "$(id -u)" = 0 ] || die "husk serve needs root"
want() { [[ " $ONLY " == *" $1 "* ]]; }

HAS_POOL=0
if "$HUSK" serve --help 2>&1 | grep -q -- '--pool'; then HAS_POOL=1; fi
if [ "$POOL" -gt 0 ] && [ $HAS_POOL = 0 ]; then
  note "this husk has no --pool: the warm-pool runs are skipped"
  POOL=0
fi

TMP=$(mktemp -d /tmp/husk-sb.XXXXXX)
RES=$TMP/results.jsonl
CMDS=$TMP/commands.txt
: >"$RES"
: >"$CMDS"
DPID="" DATA="" PORT="" KEY="" DNAME=""

# ---- daemon --------------------------------------------------------------------
ADMIN=$(head -c 48 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 32)

api() { # METHOD PATH [curl args...]: with the tenant key
  local m=$1 p=$2
  shift 2
  curl -sS --max-time 60 -H "Authorization: Bearer $KEY" -X "$m" "http://127.0.0.1:$PORT$p" "$@"
}

start_daemon() { # name pool
  DNAME=$1
  local pool=$2 dir=$TMP/$1
  mkdir -p "$dir"
  DATA=$dir/data
  local args=(serve --listen 127.0.0.1:0 --data "$DATA")
  [ "$pool" -gt 0 ] && args+=(--pool "$pool")
  # 1000 boxes hold several fds each in the daemon: take the hard limit.
  (ulimit -n "$(ulimit -Hn)" && HUSK_ADMIN_KEY=$ADMIN exec "$HUSK" "${args[@]}") 2>"$dir/log" &
  DPID=$!
  echo "daemon ($1): ulimit -n \$(ulimit -Hn); HUSK_ADMIN_KEY=... ${HUSK#"$PWD/"} ${args[*]}" >>"$CMDS"
  PORT=""
  for _ in $(seq 100); do
    PORT=$(sed -n 's|^husk: listening on http://127\.0\.0\.1:\([0-9]*\)$|\1|p' "$dir/log")
    [ -n "$PORT" ] && break
    kill -0 "$DPID" 2>/dev/null || { cat "$dir/log" >&2; die "the daemon did not start"; }
    sleep 0.1
  done
  [ -n "$PORT" ] || die "the daemon did not say where it listens"
  local t
  t=$(curl -sS -H "Authorization: Bearer $ADMIN" "http://127.0.0.1:$PORT/v1/tenants" -d '{"name":"bench"}' | jq -r .id)
  KEY=$(curl -sS -H "Authorization: Bearer $ADMIN" -X POST "http://127.0.0.1:$PORT/v1/tenants/$t/keys" | jq -r .key)
  [[ $KEY == hk_* ]] || die "could not make a tenant key"
  export APIBENCH_KEY=$KEY
  note "daemon $DNAME up on port $PORT (pid $DPID, $(ulimit -Hn) fds, pool $pool)"
}

live_ids() { # every live box of the tenant, one id per line
  local cursor="" page
  while :; do
    page=$(api GET "/v1/sandboxes?state=live&limit=1000${cursor:+&cursor=$cursor}")
    jq -r '.sandboxes[].id' <<<"$page"
    cursor=$(jq -r '.next_cursor // empty' <<<"$page")
    [ -n "$cursor" ] || break
  done
}

count_running() {
  local cursor="" page n=0
  while :; do
    page=$(api GET "/v1/sandboxes?state=running&limit=1000${cursor:+&cursor=$cursor}")
    n=$((n + $(jq '.sandboxes | length' <<<"$page")))
    cursor=$(jq -r '.next_cursor // empty' <<<"$page")
    [ -n "$cursor" ] || break
  done
  echo $n
}

wait_pool() { # wait until the pool has its boxes (at most 60 s)
  local want=$1 n
  [ "$want" -gt 0 ] || return 0
  for _ in $(seq 600); do
    n=$(python3 bench/serve.py count "$DATA")
    [ "$n" -ge "$want" ] && { sleep 0.5; return 0; }
    sleep 0.1
  done
  note "warning: the pool holds $n of $want boxes after 60 s"
}

stop_daemon() { # delete every box, SIGTERM, check what is left
  [ -n "$DPID" ] || return 0
  if kill -0 "$DPID" 2>/dev/null; then
    live_ids >"$TMP/$DNAME/live.txt" 2>/dev/null || true
    if [ -s "$TMP/$DNAME/live.txt" ]; then
      "$TMP/apibench" delete --port "$PORT" --clients 8 --count 100000 --ids "$TMP/$DNAME/live.txt" \
        --label cleanup >/dev/null || true
    fi
    kill -TERM "$DPID" 2>/dev/null || true
    for _ in $(seq 300); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$DPID" 2>/dev/null; then
      note "daemon $DNAME did not stop in 30 s: SIGKILL"
      kill -KILL "$DPID" 2>/dev/null || true
    fi
  fi
  wait "$DPID" 2>/dev/null || true
  DPID=""
  # The daemon's box cgroups, processes in them, sockets in DATA/boxes.
  if ! python3 bench/serve.py leftovers "$DATA" --clean >"$TMP/$DNAME/stop-leftovers.txt"; then
    note "after stopping $DNAME: $(head -n1 "$TMP/$DNAME/stop-leftovers.txt")"
    echo "{\"label\":\"$DNAME-stop-leftovers\",\"text\":$(head -n1 "$TMP/$DNAME/stop-leftovers.txt" | jq -Rs .)}" >>"$RES"
  fi
}

cleanup() {
  stop_daemon || true
  rm -f "/dev/shm/husk-sb-$$"
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

busy_jiffies() { # user+nice+system+irq+softirq+steal of all CPUs
  awk '/^cpu /{print $2+$3+$4+$7+$8+$9; exit}' /proc/stat
}

drive() { # label apibench-args...: run the driver, keep its JSON line
  local label=$1
  shift
  echo "$label: APIBENCH_KEY=\$KEY \$TMP/apibench $* --label $label" >>"$CMDS"
  local out rc=0 c0 c1
  c0=$(busy_jiffies)
  out=$(timeout $((SECS * 4 + 120)) "$TMP/apibench" "$@" --label "$label") || rc=$?
  c1=$(busy_jiffies)
  if [ -z "$out" ]; then
    note "$label: the driver failed (status $rc)"
    out="{\"label\":\"$label\",\"n\":0,\"errors\":-1}"
  fi
  # CPU time the whole machine spent (all processes, kernel threads) per
  # iteration: the box's creation and teardown included, wherever they ran.
  out=$(jq -c --argjson j $((c1 - c0)) --argjson hz "$(getconf CLK_TCK)" \
    '. + {cpu_ms_per_op: (if .n > 0 then $j * 1000 / $hz / .n else null end)}' <<<"$out")
  echo "$out" >>"$RES"
  note "$label: $(jq -c '{n, errors, rate, p50: .total.p50, p95: .total.p95, cpu_ms_per_op}' <<<"$out")"
}

"$CC" -std=c17 -O2 -Wall -Wextra -pthread -o "$TMP/apibench" bench/apibench.c
"$CC" -std=c17 -O2 -Wall -Wextra -o "$TMP/spawnbench" bench/spawnbench.c

# ---- the machine ----------------------------------------------------------------------
cgroup_layout() {
  local v2=0 v1=0 where=""
  while read -r _ _ _ _ mnt _ rest; do
    case " $rest " in
      *" - cgroup2 "*) v2=1; where=$mnt ;;
      *" - cgroup "*) v1=1 ;;
    esac
  done </proc/self/mountinfo
  if [ $v2 = 1 ] && [ $v1 = 0 ]; then echo "v2 (unified at $where)"
  elif [ $v2 = 1 ]; then echo "hybrid (v1 controllers, cgroup2 at $where)"
  else echo "v1"; fi
}
BUSY0=$(python3 bench/serve.py busy 1)
FOREIGN0=$(python3 bench/serve.py foreign /nonexistent)
{
  echo "== machine"
  echo "cpus:      $(nproc) x $(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)"
  echo "memory:    $(awk '/^MemTotal/{printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
  echo "kernel:    $(uname -srm)"
  echo "os:        $(sed -n 's/^PRETTY_NAME="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' /etc/os-release)"
  grep -qw hypervisor /proc/cpuinfo && echo "virtual:   yes (the CPU reports a hypervisor)"
  echo "cgroups:   $(cgroup_layout)"
  echo "husk:      $HUSK ($(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- src include 2>/dev/null || echo ', src modified'))"
  echo "bwrap:     $(bwrap --version 2>/dev/null || echo 'not installed')"
  echo "curl:      $(curl --version | head -n1 | cut -d' ' -f1-2)"
  echo "fds:       daemon runs with ulimit -n $(ulimit -Hn)"
  echo "load:      $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min); other work used ${BUSY0}% of the CPUs in the second before the run; $FOREIGN0 processes of other husk boxes on the machine"
  echo
} >"$TMP/machine.txt"
cat "$TMP/machine.txt" >&2
echo "{\"label\":\"meta\",\"pool\":$POOL,\"busy_before\":$BUSY0,\"foreign_before\":$FOREIGN0}" >>"$RES"

# ---- one-shot peers ----------------------------------------------------------------------
if want oneshot || want lifecycle; then
  SPEC=$TMP/oneshot.spec
  : >"$SPEC"
  add() { (IFS=$'\t'; echo "$*") >>"$SPEC"; } # label argv...
  add bare /usr/bin/true
  if command -v bwrap >/dev/null; then
    # The same bwrap command as bench/run.sh.
    add bwrap "$(command -v bwrap)" --unshare-all --die-with-parent \
      --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib \
      --symlink usr/lib64 /lib64 --symlink usr/sbin /sbin \
      --proc /proc --dev /dev --tmpfs /tmp --tmpfs /workspace --chdir /workspace \
      --new-session --cap-drop ALL --unshare-user --uid 1000 --gid 1000 /usr/bin/true
  else
    note "bwrap is not installed (scripts/deps.sh bench): the lifecycle target cannot be judged"
  fi
  add husk-run "$HUSK" run -- /usr/bin/true
  note "one-shot peers: $ONESHOT_N runs each"
  sed 's/\t/ /g; s/^\([^ ]*\) /oneshot \1: /' "$SPEC" >>"$CMDS"
  "$TMP/spawnbench" "$ONESHOT_N" 10 "$SPEC" 0 >"$TMP/oneshot.tsv"
  python3 bench/serve.py oneshot "$TMP/oneshot.tsv" "$ONESHOT_N" >>"$RES"
fi

# ---- density ---------------------------------------------------------------------------------------
if want density; then
  start_daemon density 0
  DD=$TMP/density
  mkdir -p "$DD"
  # The baseline once the host figure has settled, then a second one 3 s
  # later with no box change: how much it moves on its own (other work on
  # the machine) over the time the boxes will take.
  python3 bench/serve.py settle "$DATA" "$DPID" before0 >"$DD/snap-before0.json"
  sleep 3
  python3 bench/serve.py snap "$DATA" "$DPID" before >"$DD/snap-before.json"
  note "density: creating $DENSITY_N boxes with 16 clients"
  echo "density: APIBENCH_KEY=\$KEY \$TMP/apibench create --port \$PORT --clients 16 --count $DENSITY_N --warmup 0 --seconds 120 --ids \$TMP/density/ids.txt" >>"$CMDS"
  timeout 300 "$TMP/apibench" create --port "$PORT" --clients 16 --count "$DENSITY_N" --warmup 0 \
    --seconds 120 --ids "$DD/ids.txt" --label density-create >"$DD/create.json" || true
  note "density: $(jq -c '{n, errors, wall_s, p50: .total.p50}' "$DD/create.json" 2>/dev/null || echo failed)"
  count_running >"$DD/running.txt"
  sleep 3 # let deferred work settle (RCU frees, per-cpu caches)
  python3 bench/serve.py snap "$DATA" "$DPID" up >"$DD/snap-up.json"
  echo "density: APIBENCH_KEY=\$KEY \$TMP/apibench delete --port \$PORT --clients 16 --count $DENSITY_N --ids \$TMP/density/ids.txt" >>"$CMDS"
  timeout 300 "$TMP/apibench" delete --port "$PORT" --clients 16 --count "$DENSITY_N" \
    --ids "$DD/ids.txt" --label density-delete >"$DD/delete.json" || true
  for _ in $(seq 300); do
    [ "$(python3 bench/serve.py count "$DATA")" = 0 ] && break
    sleep 0.1
  done
  python3 bench/serve.py leftovers "$DATA" >"$DD/leftovers.txt" || true
  python3 bench/serve.py settle "$DATA" "$DPID" after >"$DD/snap-after.json"
  python3 bench/serve.py density "$DD" "$DENSITY_N" >>"$RES"
  stop_daemon
fi

# ---- lifecycle and exec, without and with the pool -------------------------------------------
lifecycle_runs() { # config pool
  local c=$1 pool=$2
  wait_pool "$pool"
  drive "$c-lc1" lifecycle --port "$PORT" --clients 1 --count 2000 --seconds "$SECS" --warmup 5
  wait_pool "$pool"
  drive "$c-lc1gap" lifecycle --port "$PORT" --clients 1 --count $((SECS * 1000 / (GAP + 10))) \
    --seconds "$SECS" --warmup 3 --gap-ms "$GAP"
  wait_pool "$pool"
  drive "$c-lc16" lifecycle --port "$PORT" --clients 16 --count 20000 --seconds "$SECS" --warmup 1
}

if want lifecycle || want exec || want files; then
  start_daemon pool0 0
  if want lifecycle; then lifecycle_runs pool0 0; fi
  if want exec; then
    drive forkexec forkexec --count 100000 --seconds 4 --warmup 50
    drive spawn spawn --count 100000 --seconds 4 --warmup 50
    drive pool0-exec exec --port "$PORT" --count 100000 --seconds 6 --warmup 50
  fi

  # ---- files ----------------------------------------------------------------------------------
  if want files; then
    FD=$TMP/files
    mkdir -p "$FD"
    SRC=$FD/src.bin
    note "files: writing a $FILE_MIB MiB source file of random bytes"
    head -c "$((FILE_MIB * 1048576))" /dev/urandom >"$SRC"
    SUM=$(sha256sum <"$SRC" | cut -d' ' -f1)
    BOXF=$(api POST /v1/sandboxes -d "{\"disk\":\"$((FILE_MIB * 2))M\",\"memory\":\"$((FILE_MIB * 3))M\",\"timeout\":900}" | jq -r .id)
    [[ $BOXF == b_* ]] || die "files: could not create the box"
    U="http://127.0.0.1:$PORT/v1/sandboxes/$BOXF/files?path=/workspace/big.bin"
    {
      echo "files: head -c $((FILE_MIB * 1048576)) /dev/urandom >\$TMP/files/src.bin"
      echo "files: box: POST /v1/sandboxes {\"disk\":\"$((FILE_MIB * 2))M\",\"memory\":\"$((FILE_MIB * 3))M\",\"timeout\":900}"
      echo "files: cp: cp \$TMP/files/src.bin \$TMP/files/cp.bin"
      echo "files: cp_tmpfs: cp \$TMP/files/src.bin /dev/shm/husk-sb-PID"
      echo "files: upload: curl -sS -f -H 'Expect:' -H \"Authorization: Bearer \$KEY\" -T \$TMP/files/src.bin '$U' (the file is deleted first)"
      echo "files: download: curl -sS -f -H \"Authorization: Bearer \$KEY\" -o \$TMP/files/down.bin '$U'; sha256sum"
      echo "files: download_null: curl -sS -f -H \"Authorization: Bearer \$KEY\" -o /dev/null '$U'"
    } | sed "s|http://127.0.0.1:$PORT|http://127.0.0.1:\$PORT|; s|$BOXF|\$BOX|" >>"$CMDS"
    timed() { # kind cmd...: append "kind seconds" to times.tsv
      local k=$1 t0 t1
      shift
      t0=$(date +%s%N)
      "$@"
      t1=$(date +%s%N)
      echo "$k $(((t1 - t0) / 1000))e-6" >>"$FD/times.tsv"
    }
    : >"$FD/times.tsv"
    sha=ok
    for r in $(seq "$FILE_REPS"); do
      note "files: round $r of $FILE_REPS"
      rm -f "$FD/cp.bin"; timed cp cp "$SRC" "$FD/cp.bin"; rm -f "$FD/cp.bin"
      rm -f "/dev/shm/husk-sb-$$"; timed cp_tmpfs cp "$SRC" "/dev/shm/husk-sb-$$"; rm -f "/dev/shm/husk-sb-$$"
      api DELETE "/v1/sandboxes/$BOXF/files?path=/workspace/big.bin" -o /dev/null || true
      timed upload curl -sS -f --max-time 300 -H 'Expect:' -H "Authorization: Bearer $KEY" -T "$SRC" "$U" -o /dev/null
      rm -f "$FD/down.bin"
      timed download curl -sS -f --max-time 300 -H "Authorization: Bearer $KEY" -o "$FD/down.bin" "$U"
      [ "$(sha256sum <"$FD/down.bin" | cut -d' ' -f1)" = "$SUM" ] || sha=MISMATCH
      rm -f "$FD/down.bin"
      timed download_null curl -sS -f --max-time 300 -H "Authorization: Bearer $KEY" -o /dev/null "$U"
    done
    echo $sha >"$FD/sha.txt"
    api DELETE "/v1/sandboxes/$BOXF" -o /dev/null
    rm -f "$SRC"
    python3 bench/serve.py files "$FD" $((FILE_MIB * 1048576)) "$FILE_REPS" >>"$RES"
  fi
  stop_daemon
fi

# ---- with the warm pool --------------------------------------------------------------------------
if [ "$POOL" -gt 0 ] && { want lifecycle || want exec; }; then
  start_daemon "pool$POOL" "$POOL"
  if want lifecycle; then lifecycle_runs "pool$POOL" "$POOL"; fi
  if want exec; then drive "pool$POOL-exec" exec --port "$PORT" --count 100000 --seconds 6 --warmup 50; fi
  stop_daemon
fi

# ---- report ----------------------------------------------------------------------------------------
BUSY1=$(python3 bench/serve.py busy 1)
echo
cat "$TMP/machine.txt"
python3 bench/serve.py report "$RES" "$JSON_OUT"
echo
echo "== commands (\$TMP: the benchmark's temporary directory; \$PORT, \$KEY: the daemon's port and a tenant key)"
cat "$CMDS"
echo
echo "other work used ${BUSY0}% of the CPUs just before the run and ${BUSY1}% just after"
grep -h 'stop-leftovers' "$RES" | jq -r '"warning: after stopping the daemon: " + .text' || true
