#!/bin/bash
# Benchmark of pause/resume and filesystem snapshots, husk next to its peers
# in the same run; targets and results in docs/performance.md ("Pause and
# snapshots").
#
#   bench/snapshots.sh           (as root; about 2 minutes)
#
# Over HTTP on loopback (bench/snapshots.py; a request's setup is untimed):
#   pause/resume  BENCH_N cycles of POST …/pause then POST …/resume after
#                 BENCH_WARMUP, on a box running 4 sleeping processes and on
#                 one running a busy loop (both background execs); back to
#                 back, and BENCH_PAUSE_GAP_MS apart (the kernel throttles
#                 cgroup.events notifications to one per ~10 ms per file)
#   snapshot      a box that wrote BENCH_SNAP_MB MB into /workspace (60 %
#                 random data in 6 files, 40 % text in 10 KiB files: the
#                 generator in snapshots.py, the same bytes every run):
#                 BENCH_SNAP_REPS times POST …/snapshots
#   restore       BENCH_SNAP_REPS times POST /v1/sandboxes {"snapshot"} (the
#                 first restored box's files checked against the host's
#                 copy), and as many plain creates with the same limits
#   fork          BENCH_FORK creates from the one snapshot, one after the
#                 other and then all at once (one connection each), and as
#                 many plain creates the same two ways (the control)
# and the peers:
#   kernel        a scratch cgroup with the same processes frozen and thawed
#                 the way husk does it: v2 cgroup.freeze + cgroup.events
#                 (poll; and re-read without waiting: the kernel's own
#                 time), and the v1 freezer's freezer.state when a v1
#                 freezer hierarchy is mounted (a hybrid host)
#   runc          runc pause / runc resume (one runc process each) of a
#                 detached container running the same, when runc is
#                 installed
#   tar | zstd    the same files generated on the host into a tmpfs:
#                 tar -c | zstd -3 -T1 (husk's archive: libarchive's zstd
#                 filter at level 3, one thread) and -T0 into an archive on
#                 the data directory's disk (and -T1 with an fsync after,
#                 openssl dgst -sha256 and -md5 of it: what husk's path adds);
#                 zstd -d | tar -x into a tmpfs
#
# Knobs: BENCH_HUSK [build/husk]  BENCH_N [200]  BENCH_WARMUP [10]
#        BENCH_SNAP_MB [100]  BENCH_SNAP_REPS [5]  BENCH_FORK [10]
#        BENCH_PAUSE_GAP_MS [25] the spaced runs' pause between operations
#        BENCH_PERF [unset]  a directory: `perf record -a -g` of the snapshot,
#                            restore and fork phases into it (snapshot.data,
#                            restore.data, fork.data), for `perf report -i`
#
# The daemon runs on 127.0.0.1 with a random port, its own data directory
# and admin key in a temporary directory (removed on exit).  At the end the
# boxes are deleted, the daemon stopped, and the host checked for what it
# left: cgroups, processes, DATA/boxes entries (and the scratch cgroups and
# tmpfs mounts of the peers).  Targets are reported, not enforced.
set -euo pipefail

cd "$(dirname "$0")/.."
HUSK=$(realpath "${BENCH_HUSK:-build/husk}")
N=${BENCH_N:-200}
WARM=${BENCH_WARMUP:-10}
MB=${BENCH_SNAP_MB:-100}
REPS=${BENCH_SNAP_REPS:-5}
FORK=${BENCH_FORK:-10}
GAP=${BENCH_PAUSE_GAP_MS:-25}
die() { echo "snapshots-bench: $*" >&2; exit 1; }
note() { echo "snapshots-bench: $*" >&2; }
for v in N WARM MB REPS FORK GAP; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer (got '${!v}')"
done
[ "$MB" -ge 1 ] && [ "$REPS" -ge 1 ] && [ "$FORK" -ge 1 ] || die "BENCH_SNAP_MB, BENCH_SNAP_REPS and BENCH_FORK must be >= 1"
[ "$(id -u)" = 0 ] || die "husk serve needs root"
[ -x "$HUSK" ] || die "$HUSK not found: run 'make all' first"
for c in curl jq python3 tar zstd openssl; do command -v $c >/dev/null || die "$c is required"; done
# The generator runs in the box (its /usr is the host's) and on the host:
# the same python3, so the same bytes.
PY=/usr/bin/python3
[ -x "$PY" ] || die "no $PY"
export PYTHONDONTWRITEBYTECODE=1 # the heredocs import bench/snapshots.py

TMP=$(mktemp -d /tmp/husk-snap.XXXXXX)
RES=$TMP/results.jsonl
: >"$RES"
DPID="" DATA="" PORT="" KEY="" LEFT="" MOUNTS=""
ADMIN=$(head -c 48 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 32)
# The box: its files are in its tmpfs disk, which its memory limit counts.
LIMITS=$(jq -nc --arg m "$((MB * 3 + 512))M" --arg d "$((MB * 2 + 256))M" \
  '{memory: $m, disk: $d, timeout: 1800}')

api() { # METHOD PATH [curl args]
  local m=$1 p=$2
  shift 2
  curl -sS --max-time 600 -H "Authorization: Bearer $KEY" -X "$m" "http://127.0.0.1:$PORT$p" "$@"
}

stop_daemon() {
  [ -n "$DPID" ] || return 0
  local ids
  ids=$(api GET "/v1/sandboxes?state=live&limit=1000" | jq -r '.sandboxes[].id' 2>/dev/null || true)
  for b in $ids; do api DELETE "/v1/sandboxes/$b" -o /dev/null || true; done
  kill -TERM "$DPID" 2>/dev/null || true
  for _ in $(seq 300); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.1; done
  kill -0 "$DPID" 2>/dev/null && { note "the daemon did not stop in 30 s: SIGKILL"; kill -KILL "$DPID" 2>/dev/null || true; }
  wait "$DPID" 2>/dev/null || true
  DPID=""
  if ! python3 bench/serve.py leftovers "$DATA" --clean >"$TMP/leftovers"; then
    LEFT="$LEFT daemon: $(head -n1 "$TMP/leftovers");"
  fi
}

cleanup() {
  perf_stop || true
  stop_daemon || true
  for m in $MOUNTS; do umount "$m" 2>/dev/null || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

add() { # label-prefix: the client's JSON lines, labelled
  jq -c --arg p "$1" '. + {label: ($p + "-" + .op)}' >>"$RES"
}
info() { # KEY VALUE: one line of the report's facts
  jq -nc --arg k "$1" --arg v "$2" '{op: "info", ($k): $v}' >>"$RES"
}
tmpfs() { # DIR SIZE: a tmpfs of ours, unmounted on exit
  mkdir -p "$1"
  mount -t tmpfs -o "size=$2,mode=0700" husk-bench "$1"
  MOUNTS="$1 $MOUNTS"
}
PERF_DIR=${BENCH_PERF:-} PERF_PID=""
if [ -n "$PERF_DIR" ]; then
  command -v perf >/dev/null || die "BENCH_PERF needs perf"
  mkdir -p "$PERF_DIR"
  PERF_DIR=$(realpath "$PERF_DIR")
fi
perf_start() { # NAME
  [ -n "$PERF_DIR" ] || return 0
  perf record -a -g -q -o "$PERF_DIR/$1.data" >/dev/null 2>&1 &
  PERF_PID=$!
  sleep 1
}
perf_stop() {
  [ -n "$PERF_PID" ] || return 0
  kill -INT "$PERF_PID"
  wait "$PERF_PID" 2>/dev/null || true
  PERF_PID=""
}
kib() { awk -v k="$1" 'BEGIN{printf "%.1f MB", k * 1024 / 1e6}'; }

cgmode() {
  if grep -q ' - cgroup2 ' /proc/self/mountinfo && grep -q ' - cgroup ' /proc/self/mountinfo; then
    echo "hybrid (v1 controllers + v2 at $(awk '$0 ~ / - cgroup2 / {print $5; exit}' /proc/self/mountinfo); husk freezes through v2)"
  elif grep -q ' - cgroup2 ' /proc/self/mountinfo; then
    echo "unified (v2 only)"
  else
    echo "legacy (v1 only)"
  fi
}

{
  echo "== machine"
  echo "cpus:      $(nproc) x $(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)"
  echo "memory:    $(awk '/^MemTotal/{printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
  echo "kernel:    $(uname -srm)"
  grep -qw hypervisor /proc/cpuinfo && echo "virtual:   yes (the CPU reports a hypervisor)"
  echo "cgroups:   $(cgmode)"
  echo "disk:      $(df -h --output=source,fstype,size "$TMP" | tail -n1 | tr -s ' ') (the data directory and the peer's archive)"
  echo "husk:      $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- src include 2>/dev/null || echo ', src modified') ($HUSK)"
  echo "tools:     $(tar --version | head -n1), $(zstd --version | head -n1)"
  echo "load:      $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min); other work $(python3 bench/serve.py busy 2) % of the CPUs (2 s before the run)"
  echo "runs:      pause/resume $N after $WARM warm-up; snapshot, restore, create $REPS each; fork $FORK; $MB MB written"
} >"$TMP/machine.txt"
cat "$TMP/machine.txt" >&2
info fork "$FORK"

# ---- the daemon -------------------------------------------------------------------------
DATA=$TMP/serve/data
mkdir -p "$TMP/serve"
(HUSK_ADMIN_KEY=$ADMIN exec "$HUSK" serve --listen 127.0.0.1:0 --s3-listen off --quiet \
  --data "$DATA") 2>"$TMP/serve/log" &
DPID=$!
for _ in $(seq 200); do
  PORT=$(sed -n 's|^husk: listening on http://127\.0\.0\.1:\([0-9]*\)$|\1|p' "$TMP/serve/log")
  [ -n "$PORT" ] && break
  kill -0 "$DPID" 2>/dev/null || { cat "$TMP/serve/log" >&2; die "the daemon did not start"; }
  sleep 0.1
done
[ -n "$PORT" ] || die "the daemon did not say where it listens"
T=$(curl -sS -H "Authorization: Bearer $ADMIN" "http://127.0.0.1:$PORT/v1/tenants" -d '{"name":"bench"}' | jq -r .id)
KEY=$(curl -sS -H "Authorization: Bearer $ADMIN" -X POST "http://127.0.0.1:$PORT/v1/tenants/$T/keys" | jq -r .key)
[[ $KEY == hk_* ]] || die "could not make a tenant key"
newbox() {
  local b
  b=$(api POST /v1/sandboxes -d "$LIMITS" | jq -r .id)
  [[ $b == b_* ]] || die "could not create a box"
  echo "$b"
}
bg() { # BOX CMD...: a background process in the box
  local b=$1
  shift
  api POST "/v1/sandboxes/$b/exec" -d "$(jq -nc '{cmd: $ARGS.positional, background: true}' --args "$@")" -o /dev/null
}

# ---- pause / resume ----------------------------------------------------------------------
note "daemon on port $PORT: pause/resume over HTTP"
SLEEPY=$(newbox)
for _ in 1 2 3 4; do bg "$SLEEPY" sleep 100000; done
BUSY=$(newbox)
bg "$BUSY" sh -c 'while :; do :; done'
sleep 0.5
# Back to back, and GAP ms apart (a pause and a resume seconds apart, as
# in use, see the kernel's state notifications unthrottled).
for b in "$SLEEPY:sleep" "$BUSY:busy"; do
  python3 bench/snapshots.py pause "$PORT" "$KEY" "${b%%:*}" "$N" "$WARM" 0 | add "http-${b#*:}"
  python3 bench/snapshots.py pause "$PORT" "$KEY" "${b%%:*}" "$N" "$WARM" "$GAP" | add "http-${b#*:}-spaced"
done
api DELETE "/v1/sandboxes/$BUSY" -o /dev/null
# A request's floor on this client: GET the box.
python3 - "$PORT" "$KEY" "$SLEEPY" "$N" "$WARM" <<'EOF' | add http
import sys
sys.path.insert(0, "bench")
from snapshots import Api, timed, line
port, key, box, n, warm = sys.argv[1:]
a = Api(port, key)
line("get", *timed(int(n), int(warm), lambda: None if a.call("GET", f"/v1/sandboxes/{box}")[0] == 200 else "get"))
EOF
api DELETE "/v1/sandboxes/$SLEEPY" -o /dev/null

note "peers: the kernel's freezer (v2, v1)"
for w in sleep busy; do
  # v2 as husk waits (POLLPRI on cgroup.events), back to back and spaced,
  # and re-reading cgroup.events without waiting (the kernel's own time)
  python3 bench/snapshots.py freezer v2 $w "$N" "$WARM" 2 poll | add kernel
  python3 bench/snapshots.py freezer v2 $w "$N" "$WARM" "$GAP" poll | add kernel
  python3 bench/snapshots.py freezer v2 $w "$N" "$WARM" 2 spin | add kernel
  python3 bench/snapshots.py freezer v1 $w "$N" "$WARM" 2 poll | add kernel
done
if command -v runc >/dev/null; then
  info runc "$(runc --version | head -n1); its cgroup driver on this host: $(grep -q ' - cgroup ' /proc/self/mountinfo && echo 'cgroupfs v1 (freezer.state)' || echo 'cgroup v2')"
  for w in sleep busy; do
    python3 bench/snapshots.py runc $w "$N" "$WARM" "$TMP/runc-$w" | add peer
  done
else
  info runc "skipped: runc is not installed (scripts/deps.sh bench installs it)"
fi

# ---- snapshots -----------------------------------------------------------------------------
note "snapshots of a box that wrote $MB MB"
SRC=$TMP/src UNPACK=$TMP/unpack
tmpfs "$SRC" "$((MB * 2 + 64))M"
tmpfs "$UNPACK" "$((MB * 2 + 64))M"
HOST=$("$PY" bench/snapshots.py gen "$SRC/w" "$MB")
BOX=$(newbox)
GOT=$(api POST "/v1/sandboxes/$BOX/exec" -d "$(jq -nc --rawfile g <(python3 -c 'import sys; sys.path.insert(0,"bench"); import snapshots; print(snapshots.GEN)') --arg mb "$MB" \
  '{cmd: ["python3", "-c", $g, "/workspace/w", $mb], timeout: 600}')" | jq -r .stdout)
[ "$(jq -r .sha256 <<<"$GOT")" = "$(jq -r .sha256 <<<"$HOST")" ] ||
  die "the box's files differ from the host's copy: box $GOT, host $HOST"
info files "$(jq -r '"\(.files) files, \(.bytes / 1e6 | floor) MB, sha256 \(.sha256[:16])…"' <<<"$HOST")"
info box_tmpfs "$(api POST "/v1/sandboxes/$BOX/exec" -d '{"cmd":["df","-k","/workspace"]}' | jq -r .stdout | awk 'NR==2{print $3}' | { read -r k; kib "$k"; }) used in the box's tmpfs disk (/workspace, /tmp, /dev/shm)"
info host_tmpfs "$(df -k --output=used "$SRC" | tail -n1 | { read -r k; kib "$k"; }) used by the host's copy"
DU0=$(du -sk "$DATA" | cut -f1)
perf_start snapshot
python3 bench/snapshots.py snap "$PORT" "$KEY" "$BOX" "$REPS" | add http
perf_stop
SNAP=$(jq -r 'select(.label == "http-snapshot") | .id // empty' "$RES")
info store "$(kib $(($(du -sk "$DATA" | cut -f1) - DU0))) more on the data disk after the snapshot (one kept)"
api DELETE "/v1/sandboxes/$BOX" -o /dev/null

note "peers: tar | zstd -3 of the same files"
python3 bench/snapshots.py peer "$SRC/w" "$TMP/peer.tar.zst" "$UNPACK" "$REPS" | add peer
rm -f "$TMP/peer.tar.zst"
umount "$UNPACK"

python3 bench/snapshots.py create "$PORT" "$KEY" "$LIMITS" "$REPS" | add http
# The control of the fork: as many plain creates (what having the boxes
# live costs a create, without the files)
python3 bench/snapshots.py fork "$PORT" "$KEY" "$LIMITS" "$FORK" | add http-plain
if [ -n "$SNAP" ]; then
  note "restores and forks of $SNAP"
  perf_start restore
  python3 bench/snapshots.py create "$PORT" "$KEY" "{\"snapshot\":\"$SNAP\"}" "$REPS" \
    "$(jq -r .sha256 <<<"$HOST")" | add http
  perf_stop
  perf_start fork
  python3 bench/snapshots.py fork "$PORT" "$KEY" "{\"snapshot\":\"$SNAP\"}" "$FORK" | add http
  perf_stop
  python3 - "$PORT" "$KEY" "$SNAP" <<'EOF' | add http
import sys
sys.path.insert(0, "bench")
from snapshots import Api, now_ms, line
port, key, snap = sys.argv[1:]
a = Api(port, key)
t0 = now_ms()
s, j = a.call("DELETE", f"/v1/snapshots/{snap}")
ok = s in (200, 204)
line("snapdelete", [round(now_ms() - t0, 4)] if ok else [], 0 if ok else 1, None if ok else f"{s} {j}")
EOF
else
  note "no snapshot was made (the first error is in the table): no restore or fork"
fi
stop_daemon

# ---- report ------------------------------------------------------------------------------
for m in $MOUNTS; do umount "$m" 2>/dev/null || true; done
MOUNTS=""
STRAY=$(find /sys/fs/cgroup -maxdepth 2 -name 'husk-bench-freezer-*' 2>/dev/null || true)
echo "other work: $(python3 bench/serve.py busy 2) % of the CPUs (2 s after the run)" >>"$TMP/machine.txt"
[ -z "$STRAY" ] || LEFT="$LEFT scratch cgroups: $STRAY;"
echo
cat "$TMP/machine.txt"
echo
python3 bench/snapshots.py report "$RES"
echo
if [ -n "$LEFT" ]; then echo "warning: left behind (removed):$LEFT"; else echo "leak check: nothing left behind (cgroups, processes, DATA/boxes, scratch cgroups, tmpfs mounts)"; fi
