#!/bin/bash
# Where the time of `husk serve` goes under one of bench/serve.sh's loads.
#
#   bench/serve-profile.sh WORKLOAD [SECONDS]     (root; needs perf, strace)
#
# WORKLOAD: lc1 (one client: create + exec `true` + delete, back to back),
# lc16 (16 clients), exec (one client, exec `true` in one box), upload /
# download (a 1 GiB file, curl).  PROFILE_POOL=N runs the daemon with
# --pool N.  PROFILE_KEEP=DIR keeps perf.data and the reports.
#
# Three recordings of the same load, each on a fresh daemon:
#  1. `perf record -a -g` (system-wide, call graphs) for SECONDS, summed by
#     bench/serve-perf.py: CPU time by actor (daemon threads, spawner, box
#     init, `true`, kernel threads, idle, other work) and, within each, by
#     system call (refined by the kernel subsystem below it), page faults,
#     SQLite, libmicrohttpd, other libraries;
#  2. `strace -f -c` on the daemon and its children (the spawner): the
#     syscalls, their count and time (strace inflates each syscall, so its
#     times are for ranking, and its rates are not the benchmark's);
#  3. `strace -f -T -e trace=fsync,fdatasync,...` for the time the daemon
#     waits on the disk (SQLite commits with synchronous=FULL).
set -euo pipefail
cd "$(dirname "$0")/.."
W=${1:?usage: bench/serve-profile.sh lc1|lc16|exec|upload|download [SECONDS]}
SECS=${2:-8}
HUSK=$(realpath "${BENCH_HUSK:-build/husk}")
POOL=${PROFILE_POOL:-0}
command -v perf >/dev/null || { echo "perf is missing: apt-get install linux-perf" >&2; exit 1; }
command -v strace >/dev/null || { echo "strace is missing: apt-get install strace" >&2; exit 1; }

TMP=$(mktemp -d /tmp/husk-sp.XXXXXX)
OUT=${PROFILE_KEEP:-$TMP/out}
mkdir -p "$OUT"
DPID="" DATA="" PORT="" KEY=""
ADMIN=$(head -c 48 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 32)
cc -std=c17 -O2 -Wall -Wextra -pthread -o "$TMP/apibench" bench/apibench.c

start() {
  DATA=$TMP/data.$1
  local args=(serve --listen 127.0.0.1:0 --data "$DATA" --quiet)
  [ "$POOL" -gt 0 ] && args+=(--pool "$POOL")
  (ulimit -n "$(ulimit -Hn)" && HUSK_ADMIN_KEY=$ADMIN exec "$HUSK" "${args[@]}") 2>"$TMP/log.$1" &
  DPID=$!
  for _ in $(seq 100); do
    PORT=$(sed -n 's|^husk: listening on http://127\.0\.0\.1:\([0-9]*\)$|\1|p' "$TMP/log.$1")
    [ -n "$PORT" ] && break
    sleep 0.1
  done
  local t
  t=$(curl -sS -H "Authorization: Bearer $ADMIN" "http://127.0.0.1:$PORT/v1/tenants" -d '{"name":"p"}' | jq -r .id)
  KEY=$(curl -sS -H "Authorization: Bearer $ADMIN" -X POST "http://127.0.0.1:$PORT/v1/tenants/$t/keys" | jq -r .key)
  export APIBENCH_KEY=$KEY
  if [ "$POOL" -gt 0 ]; then
    for _ in $(seq 300); do
      [ "$(python3 bench/serve.py count "$DATA")" -ge "$POOL" ] && break
      sleep 0.1
    done
  fi
}
stop() {
  [ -n "$DPID" ] || return 0
  local ids
  ids=$(curl -sS -H "Authorization: Bearer $KEY" "http://127.0.0.1:$PORT/v1/sandboxes?state=live&limit=1000" | jq -r '.sandboxes[].id' || true)
  for id in $ids; do
    curl -sS -o /dev/null -H "Authorization: Bearer $KEY" -X DELETE "http://127.0.0.1:$PORT/v1/sandboxes/$id" || true
  done
  kill -TERM "$DPID" 2>/dev/null || true
  wait "$DPID" 2>/dev/null || true
  DPID=""
  python3 bench/serve.py leftovers "$DATA" --clean >&2 || true
}
cleanup() {
  stop
  rm -rf "$TMP"
}
trap cleanup EXIT

load() { # the workload, for SECS
  case "$W" in
  lc1) "$TMP/apibench" lifecycle --port "$PORT" --clients 1 --count 100000 --seconds "$SECS" --warmup 3 ;;
  lc16) "$TMP/apibench" lifecycle --port "$PORT" --clients 16 --count 100000 --seconds "$SECS" --warmup 1 ;;
  exec) "$TMP/apibench" exec --port "$PORT" --clients 1 --count 1000000 --seconds "$SECS" --warmup 10 ;;
  upload) # a fresh box each time: 1 GiB from the page cache into the box
    [ -f "$TMP/big.bin" ] || head -c 1G /dev/urandom >"$TMP/big.bin"
    local box
    box=$(curl -sS -H "Authorization: Bearer $KEY" "http://127.0.0.1:$PORT/v1/sandboxes" -d '{"disk":"2G","memory":"3G"}' | jq -r .id)
    curl -sS -f -H 'Expect:' -H "Authorization: Bearer $KEY" -T "$TMP/big.bin" -o /dev/null \
      "http://127.0.0.1:$PORT/v1/sandboxes/$box/files?path=/workspace/big.bin"
    ;;
  download) # the file the last upload left, into the page cache of $TMP
    local box
    box=$(curl -sS -H "Authorization: Bearer $KEY" "http://127.0.0.1:$PORT/v1/sandboxes?state=running" | jq -r '.sandboxes[-1].id')
    rm -f "$TMP/down.bin"
    curl -sS -f -H "Authorization: Bearer $KEY" -o "$TMP/down.bin" \
      "http://127.0.0.1:$PORT/v1/sandboxes/$box/files?path=/workspace/big.bin"
    rm -f "$TMP/down.bin"
    ;;
  esac
}

echo "== 1. perf record -a -g during $W ($SECS s)" | tee "$OUT/report.txt"
start perf
if [ "$W" = download ]; then # upload first, outside the recording
  W=upload load >/dev/null
fi
prepare() { [ "$W" != download ] || W=upload load >/dev/null; }
perf record -a -g -o "$OUT/perf.data" 2>"$OUT/perf-record.log" &
PPID_=$!
sleep 0.5
load >"$OUT/load.json" || true
kill -INT "$PPID_"
wait "$PPID_" || true
tee -a "$OUT/report.txt" <"$OUT/load.json"
stop
perf script -i "$OUT/perf.data" -F comm,tid,ip,sym,dso 2>/dev/null | python3 bench/serve-perf.py 14 >>"$OUT/report.txt"

echo "== 2. strace -f -c on the daemon during $W ($SECS s)" | tee -a "$OUT/report.txt"
start strace
prepare
strace -f -c -w -o "$OUT/strace-c.txt" -p "$DPID" &
SPID=$!
sleep 1
load >"$OUT/load-strace.json" || true
kill -INT "$SPID"
wait "$SPID" || true
head -45 "$OUT/strace-c.txt" >>"$OUT/report.txt"
stop

echo "== 3. time in fsync/fdatasync per request kind during $W" | tee -a "$OUT/report.txt"
start fsync
prepare
strace -f -T -tt -e trace=fsync,fdatasync,sync_file_range -o "$OUT/strace-fsync.txt" -p "$DPID" &
SPID=$!
sleep 1
SECS=$((SECS / 2 + 1)) load >"$OUT/load-fsync.json" || true
kill -INT "$SPID"
wait "$SPID" || true
python3 - "$OUT/strace-fsync.txt" "$OUT/load-fsync.json" <<'PY' | tee -a "$OUT/report.txt"
import json, re, sys
n, t = 0, 0.0
for line in open(sys.argv[1]):
    m = re.search(r"(fsync|fdatasync|sync_file_range)\(.*<([0-9.]+)>", line)
    if m:
        n += 1
        t += float(m.group(2))
try:
    r = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
    per = r["n"]
except Exception:
    per = 0
print(f"{n} fsync-family calls, {t * 1000:.0f} ms in total, {t / max(1, n) * 1000:.2f} ms each; "
      f"{n / max(1, per):.1f} per iteration ({per} iterations, traced)")
PY
stop
echo "report: $OUT/report.txt" >&2
[ -n "${PROFILE_KEEP:-}" ] || cat "$OUT/report.txt"
