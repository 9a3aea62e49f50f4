#!/bin/bash
# Benchmark of code contexts (docs/contexts.md), husk next to its peers in
# the same run; targets and results in docs/performance.md ("Code contexts").
#
#   bench/contexts.sh            (as root; about 1 minute)
#
# In one box of the default template, over one keep-alive HTTP connection
# on loopback (bench/contexts.py: its setup is not timed), BENCH_N times
# each after BENCH_WARMUP:
#   create    POST …/contexts {"language":"python"} (the DELETE after it
#             untimed), and create + DELETE
#   execute   POST …/contexts/{ctx}/execute {"code":"1+1"} in one warm
#             context, the main result "2" checked
#   exec      POST …/exec {"cmd":["python3","-c","print(1+1)"]}: the fresh
#             interpreter the target compares an execute with
#   get       GET /v1/sandboxes/{id}: what any request costs on this client
# and the peers: the same three in-library (bench/ctxbench.c on libhusk,
# its own manager and box: what the HTTP front adds), `python3 -c` on the
# host with no box, and a local Jupyter kernel (jupyter_client +
# ipykernel, if importable: scripts/deps.sh bench): execute `1+1` until its
# execute_reply and the idle status, and BENCH_JUPYTER_STARTS kernel starts.
#
# Knobs: BENCH_HUSK [build/husk]  BENCH_N [300]  BENCH_WARMUP [20]
#        BENCH_JUPYTER_STARTS [10]  BENCH_PYTHON [/usr/bin/python3] the peers' python3
#
# The daemon runs on 127.0.0.1 with a random port, its own data directory
# and admin key in a temporary directory (removed on exit).  At the end the
# box is deleted, the daemon stopped, and the host checked for what it (or
# the in-library manager) left: cgroups, processes, DATA/boxes entries.
# Targets are reported, not enforced.
set -euo pipefail

cd "$(dirname "$0")/.."
HUSK=$(realpath "${BENCH_HUSK:-build/husk}")
N=${BENCH_N:-300}
WARM=${BENCH_WARMUP:-20}
STARTS=${BENCH_JUPYTER_STARTS:-10}
die() { echo "contexts-bench: $*" >&2; exit 1; }
note() { echo "contexts-bench: $*" >&2; }
for v in N WARM STARTS; do
  [[ ${!v} =~ ^[0-9]+$ ]] || die "$v must be a non-negative integer (got '${!v}')"
done
[ "$(id -u)" = 0 ] || die "husk serve needs root"
[ -x "$HUSK" ] || die "$HUSK not found: run 'make all' first"
for c in curl jq python3; do command -v $c >/dev/null || die "$c is required"; done
# The host's peers run the Debian python3 (the one boxes of the default
# template run from /usr, and the one python3-ipykernel is installed for).
PY=${BENCH_PYTHON:-/usr/bin/python3}
[ -x "$PY" ] || die "no $PY"
LIBDIR=$(dirname "$HUSK")
[ -e "$LIBDIR/libhusk.so" ] || die "no libhusk.so next to $HUSK"

TMP=$(mktemp -d /tmp/husk-cx.XXXXXX)
RES=$TMP/results.jsonl
: >"$RES"
DPID="" DATA="" PORT="" KEY="" LEFT=""
ADMIN=$(head -c 48 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 32)

api() { # METHOD PATH [curl args]
  local m=$1 p=$2
  shift 2
  curl -sS --max-time 60 -H "Authorization: Bearer $KEY" -X "$m" "http://127.0.0.1:$PORT$p" "$@"
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
  stop_daemon || true
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

add() { # label-prefix: the client's JSON lines, labelled
  jq -c --arg p "$1" '. + {label: ($p + "-" + .op)}' >>"$RES"
}

{
  echo "== machine"
  echo "cpus:      $(nproc) x $(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)"
  echo "memory:    $(awk '/^MemTotal/{printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
  echo "kernel:    $(uname -srm)"
  grep -qw hypervisor /proc/cpuinfo && echo "virtual:   yes (the CPU reports a hypervisor)"
  echo "husk:      $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- src include 2>/dev/null || echo ', src modified')"
  echo "python:    $("$PY" --version 2>&1) ($PY: the box's and the peers')"
  echo "jupyter:   $("$PY" -c 'import jupyter_client, ipykernel; print("jupyter_client", jupyter_client.__version__, "ipykernel", ipykernel.__version__)' 2>/dev/null || echo 'not installed (scripts/deps.sh bench)')"
  echo "load:      $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min)"
  echo "runs:      $N each after $WARM warm-up, one client"
  echo
} >"$TMP/machine.txt"
cat "$TMP/machine.txt" >&2

# ---- over HTTP ------------------------------------------------------------------------
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
BOX=$(api POST /v1/sandboxes -d '{"memory":"512M","timeout":1800}' | jq -r .id)
[[ $BOX == b_* ]] || die "could not create the box"
note "daemon on port $PORT, box $BOX: HTTP runs"
python3 bench/contexts.py http "$PORT" "$KEY" "$BOX" "$N" "$WARM" | add http
stop_daemon

# ---- in-library -----------------------------------------------------------------------
note "in-library runs (bench/ctxbench.c)"
cc -std=c17 -O2 -Wall -Wextra -Iinclude -o "$TMP/ctxbench" bench/ctxbench.c \
  -L"$LIBDIR" -lhusk -Wl,-rpath,"$LIBDIR"
LDATA=$TMP/lib/data
mkdir -p "$TMP/lib"
HUSK_BINARY=$HUSK timeout 900 "$TMP/ctxbench" "$LDATA" "$N" "$WARM" | add lib ||
  note "the in-library run failed"
if ! python3 bench/serve.py leftovers "$LDATA" --clean >"$TMP/leftovers"; then
  LEFT="$LEFT libhusk: $(head -n1 "$TMP/leftovers");"
fi

# ---- peers on the host -----------------------------------------------------------------
note "peers: python3 -c on the host, the Jupyter kernel"
"$PY" bench/contexts.py host "$N" "$WARM" | add host
"$PY" bench/contexts.py jupyter "$N" "$WARM" "$STARTS" 2>"$TMP/jupyter.err" | jq -c '.op |= sub("^jupyter-"; "")' | add jupyter ||
  note "the Jupyter run failed: $(tail -n1 "$TMP/jupyter.err")"

# ---- report ------------------------------------------------------------------------------
echo
cat "$TMP/machine.txt"
echo "== code contexts (ms)"
python3 bench/contexts.py report "$RES"
echo
if [ -n "$LEFT" ]; then echo "warning: left behind (removed):$LEFT"; else echo "leak check: nothing left behind (cgroups, processes, DATA/boxes)"; fi
