#!/bin/bash
# Benchmark of preview URLs: a request through a preview next to the same
# request made straight to the app inside the box, in the same run;
# targets and results in docs/performance.md ("Preview URLs").
#
#   bench/previews.sh            (as root; about a minute)
#
# The app: a small HTTP/1.1 keep-alive server (Python's ThreadingHTTPServer,
# in the box) answering GET /small with 64 bytes and GET /big with 1 MiB.
# One curl process makes all the requests of a run over one keep-alive
# connection and prints each transfer's time_total:
#   direct    curl inside the box (an exec), to http://127.0.0.1:PORT/...
#   preview   curl on the host, to the preview's path-form URL (public)
# Reported: p50 and p90 of /small (the added latency is preview - direct),
# and the throughput of /big (bytes / the sum of the transfers' times),
# with the ratio preview / direct.
#
# Knobs: BENCH_HUSK [build/husk]  BENCH_N [2000] requests of /small
#        BENCH_BIG [200] requests of /big  BENCH_WARMUP [50]
#
# The daemon runs on 127.0.0.1 with a random port, its own data directory
# and admin key in a temporary directory (removed on exit), and its box is
# deleted at the end.  Targets are reported, not enforced.
set -euo pipefail

cd "$(dirname "$0")/.."
HUSK=$(realpath "${BENCH_HUSK:-build/husk}")
N=${BENCH_N:-2000}
BIG=${BENCH_BIG:-200}
WARM=${BENCH_WARMUP:-50}
PORT=8000

TMP=$(mktemp -d /tmp/husk-bench-previews.XXXXXX)
ADMIN=adm_$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
SPID=""
URL=""
KEY=""
BOX=""
cleanup() {
  if [ -n "$BOX" ] && [ -n "$URL" ]; then
    curl -s -o /dev/null -X DELETE -H "Authorization: Bearer $KEY" "$URL/v1/sandboxes/$BOX" || true
  fi
  if [ -n "$SPID" ]; then
    kill -TERM "$SPID" 2>/dev/null || true
    wait "$SPID" 2>/dev/null || true
  fi
  rm -rf "$TMP"
}
trap cleanup EXIT

HUSK_ADMIN_KEY=$ADMIN "$HUSK" serve --listen 127.0.0.1:0 --data "$TMP/data" --s3-listen off \
  --quiet 2>"$TMP/serve.log" </dev/null &
SPID=$!
for _ in $(seq 200); do
  port=$(sed -n 's|^husk: listening on http://127.0.0.1:\([0-9]*\)$|\1|p' "$TMP/serve.log")
  [ -n "$port" ] && break
  sleep 0.05
done
[ -n "$port" ] || { cat "$TMP/serve.log" >&2; exit 1; }
URL="http://127.0.0.1:$port"

json() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1"; }
TID=$(curl -sf -H "Authorization: Bearer $ADMIN" -X POST "$URL/v1/tenants" -d '{"name":"bench"}' | json id)
KEY=$(curl -sf -H "Authorization: Bearer $ADMIN" -X POST "$URL/v1/tenants/$TID/keys" | json key)
AUTH=(-H "Authorization: Bearer $KEY")
BOX=$(curl -sf "${AUTH[@]}" -X POST "$URL/v1/sandboxes" \
  -d '{"memory":"512M","cpus":2,"timeout":900}' | json id)

cat >"$TMP/app.py" <<'EOF'
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
SMALL = b"x" * 64
BIG = bytes(range(256)) * 4096
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else the body waits for the head's delayed ACK
    def log_message(self, *a):
        pass
    def do_GET(self):
        body = BIG if self.path.startswith("/big") else SMALL
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
EOF
curl -sf "${AUTH[@]}" -X PUT --data-binary @"$TMP/app.py" \
  "$URL/v1/sandboxes/$BOX/files?path=/workspace/app.py" >/dev/null
curl -sf "${AUTH[@]}" -X POST "$URL/v1/sandboxes/$BOX/exec" \
  -d "{\"cmd\":[\"python3\",\"/workspace/app.py\",\"$PORT\"],\"background\":true}" >/dev/null

# exec_out CMD: stdout of a shell command in the box (to a file: it can be long).
exec_out() {
  python3 -c 'import json,sys; print(json.dumps({"cmd":["sh","-c",sys.argv[1]],"timeout":600}))' "$1" |
    curl -sf "${AUTH[@]}" -X POST "$URL/v1/sandboxes/$BOX/exec" --data-binary @- |
    python3 -c 'import json,sys; sys.stdout.write(json.load(sys.stdin)["stdout"])'
}
for _ in $(seq 100); do
  [ "$(exec_out "curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:$PORT/small")" = 200 ] && break
  sleep 0.1
done
PV=$(curl -sf "${AUTH[@]}" -X POST "$URL/v1/sandboxes/$BOX/ports/$PORT/previews" \
  -d '{"access":"public","limits":{"max_connections":256}}' | json url)

# A run: one curl, COUNT transfers of PATH on one connection, their times.
# (The URL list is written to a config file: thousands of arguments.)
urls() { # BASE PATH COUNT
  for _ in $(seq "$3"); do printf 'url = "%s%s"\noutput = "/dev/null"\n' "$1" "$2"; done
}
direct() { # PATH COUNT -> times
  urls "http://127.0.0.1:$PORT" "$1" "$2" >"$TMP/direct.cfg"
  curl -sf "${AUTH[@]}" -X PUT --data-binary @"$TMP/direct.cfg" \
    "$URL/v1/sandboxes/$BOX/files?path=/workspace/direct.cfg" >/dev/null
  exec_out "curl -s -K /workspace/direct.cfg -w '%{time_total} %{size_download}\n'"
}
preview() { # PATH COUNT -> times
  urls "${PV%/}" "$1" "$2" >"$TMP/preview.cfg"
  curl -s -K "$TMP/preview.cfg" -w '%{time_total} %{size_download}\n'
}

direct /small "$WARM" >/dev/null
preview /small "$WARM" >/dev/null
direct /small "$N" >"$TMP/d_small"
preview /small "$N" >"$TMP/p_small"
direct /big "$BIG" >"$TMP/d_big"
preview /big "$BIG" >"$TMP/p_big"

python3 - "$TMP" "$N" "$BIG" <<'EOF'
import statistics, sys
tmp, n, big = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def load(name, want_size):
    rows = [l.split() for l in open(f"{tmp}/{name}") if l.strip()]
    t = [float(a) for a, b in rows if int(b) == want_size]
    if len(t) != len(rows):
        raise SystemExit(f"{name}: {len(rows) - len(t)} transfers of a wrong size")
    return t
def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(p * len(v)))]
ds, ps = load("d_small", 64), load("p_small", 64)
db, pb = load("d_big", 1 << 20), load("p_big", 1 << 20)
print("preview URLs: %d x GET /small (64 B), %d x GET /big (1 MiB), one keep-alive connection each" % (n, big))
print("%-22s %10s %10s %10s" % ("", "direct", "preview", "preview-direct"))
for p in (0.5, 0.9, 0.99):
    d, q = pct(ds, p) * 1e3, pct(ps, p) * 1e3
    print("%-22s %8.3f ms %8.3f ms %+9.3f ms" % ("small p%d" % int(p * 100), d, q, q - d))
dt, pt = (len(db) << 20) / sum(db) / 1e6, (len(pb) << 20) / sum(pb) / 1e6
print("%-22s %7.0f MB/s %7.0f MB/s %10.2f x" % ("big throughput", dt, pt, pt / dt))
ok_lat = pct(ps, 0.5) - pct(ds, 0.5) <= 0.0005
ok_thr = pt / dt >= 0.5
print("target: added p50 <= 0.5 ms: %s; throughput >= 0.5 x direct: %s" %
      ("met" if ok_lat else "NOT met", "met" if ok_thr else "NOT met"))
EOF
