#!/bin/bash
# What an idle box of `husk serve` holds in kernel memory, by where it was
# allocated (root; needs perf).
#
#   bench/serve-memprofile.sh [BOXES]        (default 100)
#
# Starts a daemon (--pool 0) in a temporary directory, then records
# system-wide, with call graphs, every kmalloc / kmem_cache_alloc / page
# allocation and their frees while 16 clients create BOXES boxes, and for
# 3 s after the last one is up.  bench/serve-perf.py --mem keeps the
# allocations not freed by the end (what the idle boxes hold, plus whatever
# other work on the machine kept: it is shown under its own actor) and sums
# them per box, by actor (spawner, box init, daemon, kernel threads) and by
# system call and kernel subsystem.  Then every box is deleted, the daemon
# stopped, and the host checked for leftovers.
#
# Transient allocations freed before the end are not counted; pages of the
# page cache read meanwhile are (under the actor that read them).  Compare
# the total with bench/serve.sh's /proc/meminfo figure.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-100}
HUSK=$(realpath "${BENCH_HUSK:-build/husk}")
command -v perf >/dev/null || { echo "perf is missing: apt-get install linux-perf" >&2; exit 1; }
TMP=$(mktemp -d /tmp/husk-smp.XXXXXX)
DPID="" PORT="" KEY=""
DATA=$TMP/data
ADMIN=$(head -c 48 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 32)
cleanup() {
  if [ -n "$DPID" ]; then
    if [ -s "$TMP/ids.txt" ]; then
      "$TMP/apibench" delete --port "$PORT" --clients 8 --count "$N" --ids "$TMP/ids.txt" >/dev/null || true
    fi
    kill -TERM "$DPID" 2>/dev/null || true
    wait "$DPID" 2>/dev/null || true
    python3 bench/serve.py leftovers "$DATA" --clean >&2 || true
  fi
  rm -rf "$TMP"
}
trap cleanup EXIT
cc -std=c17 -O2 -Wall -Wextra -pthread -o "$TMP/apibench" bench/apibench.c
(ulimit -n "$(ulimit -Hn)" && HUSK_ADMIN_KEY=$ADMIN exec "$HUSK" serve --listen 127.0.0.1:0 --data "$DATA" --quiet) 2>"$TMP/log" &
DPID=$!
for _ in $(seq 100); do
  PORT=$(sed -n 's|^husk: listening on http://127\.0\.0\.1:\([0-9]*\)$|\1|p' "$TMP/log")
  [ -n "$PORT" ] && break
  sleep 0.1
done
t=$(curl -sS -H "Authorization: Bearer $ADMIN" "http://127.0.0.1:$PORT/v1/tenants" -d '{"name":"m"}' | jq -r .id)
KEY=$(curl -sS -H "Authorization: Bearer $ADMIN" -X POST "http://127.0.0.1:$PORT/v1/tenants/$t/keys" | jq -r .key)
export APIBENCH_KEY=$KEY
python3 bench/serve.py settle "$DATA" "$DPID" before >"$TMP/before.json"
perf record -a -g -m 64M -o "$TMP/kmem.data" \
  -e kmem:kmalloc,kmem:kmem_cache_alloc,kmem:kfree,kmem:kmem_cache_free,kmem:mm_page_alloc,kmem:mm_page_free \
  2>"$TMP/perf.log" &
PP=$!
sleep 1
"$TMP/apibench" create --port "$PORT" --clients 16 --count "$N" --warmup 0 --ids "$TMP/ids.txt" | jq -c '{n, errors, wall_s}' >&2
sleep 3
kill -INT "$PP"
wait "$PP" || true
python3 bench/serve.py snap "$DATA" "$DPID" up >"$TMP/up.json"
grep -i 'lost' "$TMP/perf.log" >&2 || true
python3 - "$TMP/before.json" "$TMP/up.json" "$N" <<'PY'
import json, sys
b, u = (json.load(open(p))["meminfo"] for p in sys.argv[1:3])
n = int(sys.argv[3])
print(f"/proc/meminfo: host used grew by {(u['used_nocache'] - b['used_nocache']) / n / 1024:.1f} KiB per box "
      "(perf's own buffers included)")
PY
perf script -i "$TMP/kmem.data" -F comm,tid,event,trace,ip,sym 2>/dev/null | python3 bench/serve-perf.py --mem "$N" 14
