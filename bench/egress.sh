#!/bin/bash
# Egress proxy overhead, on this machine only: an upstream
# network namespace with HTTPS servers (tests/serve/egress/setup.bash), a
# daemon, and boxes in egress mode.
#
#   bench/egress.sh
#
# Reports:
#   throughput   a BENCH_MIB MiB HTTPS download: from the host directly to
#                the upstream, and from a box through the proxy in tunnel
#                mode (CONNECT, bytes relayed) and in inject mode (TLS
#                terminated, scanned for secrets, re-encrypted)
#   latency      BENCH_N sequential small HTTPS requests (a new connection
#                each, as curl in a loop does): direct from the host,
#                through a tunnel, and injected (placeholder replaced by a
#                vault secret); medians and p95, and the added latency per
#                injected request against tunnel and against direct
# Knobs: BENCH_HUSK [build/husk] BENCH_MIB [256] BENCH_N [200]
set -u
cd "$(dirname "$0")/.."
export HUSK=${BENCH_HUSK:-$PWD/build/husk}
MIB=${BENCH_MIB:-256}
N=${BENCH_N:-200}
SUITE=bench-egress
. tests/lib.sh
. tests/serve/serve.bash
. tests/serve/egress/setup.bash
trap 'up_stop; serve_cleanup' EXIT

up_start || { echo "cannot start the upstream namespace" >&2; exit 1; }
up_zone '{"api.ex.test": ["10.250.0.2"], "echo.test": ["10.250.0.2"]}'
serve_start --egress-resolver "$UP_IP:53" --egress-allow-range "$UP_NET" --egress-ca-file "$UP_CA" \
  --quiet || exit 1
new_tenant bench || exit 1
KEY=$TKEY
api PUT /v1/secrets/TOKEN -d '{"value":"bench-secret-value-0123456789"}'
new_box '{"network":"egress","egress":{"rules":[{"host":"api.ex.test"},{"host":"echo.test","mode":"inject"}],
  "secrets":[{"name":"TOKEN","hosts":["echo.test"]}]}}' || exit 1
# Every client verifies against a bundle of the same size (the system
# roots plus one CA), as the inject box's own bundle is: certificate
# loading is then the same cost everywhere and the difference is the proxy.
cat /etc/ssl/certs/ca-certificates.crt "$UP_CA" >"$T_SCRATCH/bundle.pem"
api PUT "/v1/sandboxes/$BOX/files?path=/workspace/ca.pem" --data-binary @"$T_SCRATCH/bundle.pem"

bx() {
  local body
  body=$(python3 -c 'import json,sys; print(json.dumps({"cmd":["sh","-c",sys.argv[1]],"timeout":600}))' "$1")
  API_TIMEOUT=700 api POST "/v1/sandboxes/$BOX/exec" -d "$body"
  OUT=$(jf 'j["stdout"]')
}
stats() { # label, then seconds one per line on stdin
  python3 -c '
import sys, statistics
v = sorted(float(x) * 1000 for x in sys.stdin.read().split())
p95 = v[int(len(v) * 0.95) - 1] if v else 0
print("%-28s n=%d median %.2f ms  p95 %.2f ms" % (sys.argv[1], len(v), statistics.median(v), p95))
print("MEDIAN %s %.4f" % (sys.argv[1], statistics.median(v)), file=sys.stderr)' "$1"
}

BYTES=$((MIB * 1024 * 1024))
echo "# throughput: $MIB MiB over HTTPS"
D=$(curl -s -o /dev/null -w '%{speed_download}' --cacert "$T_SCRATCH/bundle.pem" --resolve "api.ex.test:443:$UP_IP" \
  "https://api.ex.test/bytes/$BYTES")
bx "curl -s -o /dev/null -w '%{speed_download}' --cacert /workspace/ca.pem https://api.ex.test/bytes/$BYTES"
T=$OUT
bx "curl -s -o /dev/null -w '%{speed_download}' https://echo.test/bytes/$BYTES"
I=$OUT
python3 -c '
import sys
d, t, i = (float(x) / 1048576 for x in sys.argv[1:4])
print("direct (host)        %8.1f MiB/s" % d)
print("tunnel (box, proxy)  %8.1f MiB/s  (%.0f%% of direct)" % (t, 100 * t / d))
print("inject (box, MITM)   %8.1f MiB/s  (%.0f%% of direct)" % (i, 100 * i / d))' "$D" "$T" "$I"

echo "# latency: $N sequential requests, a new connection each"
for _ in $(seq "$N"); do
  curl -s -o /dev/null -w '%{time_total}\n' --cacert "$T_SCRATCH/bundle.pem" --resolve "api.ex.test:443:$UP_IP" https://api.ex.test/small
done | stats direct 2>>"$T_SCRATCH/med"
bx "for i in \$(seq $N); do curl -s -o /dev/null -w '%{time_total}\n' --cacert /workspace/ca.pem https://api.ex.test/small; done"
stats tunnel <<<"$OUT" 2>>"$T_SCRATCH/med"
bx "for i in \$(seq $N); do curl -s -o /dev/null -w '%{time_total}\n' -H \"Authorization: Bearer \$TOKEN\" https://echo.test/small; done"
stats inject <<<"$OUT" 2>>"$T_SCRATCH/med"
python3 -c '
import sys
m = dict((l.split()[1], float(l.split()[2])) for l in open(sys.argv[1]))
print("added per injected request: %+.2f ms vs tunnel, %+.2f ms vs direct" % (
    m["inject"] - m["tunnel"], m["inject"] - m["direct"]))' "$T_SCRATCH/med"
for b in $(cut -d" " -f1 "$T_SCRATCH/boxes"); do api DELETE "/v1/sandboxes/$b"; done
