#!/bin/bash
# Benchmarks of templates (docs/templates.md), husk next to its peers in the
# same run; targets in docs/performance.md ("Templates").
#
#   bench/templates.sh                         everything (about 5 minutes)
#   BENCH_ONLY="import create" bench/templates.sh   a subset of:
#                                              import create density
#
# Phases:
#   import   an image of ~500 MB in many small files (a layer of the host's
#            /usr/lib/python3 over a busybox layer): `POST /v1/templates`
#            of its OCI archive into a running daemon, next to `tar -x` of
#            the same layer tars into a fresh directory (then `sync`, as
#            husk syncs each layer), and to `podman load` + `podman run
#            --rm IMAGE true` of the same archive when podman is installed.
#            BENCH_IMPORT_REPS runs each, medians.
#   create   create + exec `true` + delete over HTTP, one client, back to
#            back: a box of the default template and of an image template
#            (busybox, one layer; and five layers), interleaved rounds, no
#            pool; then the same, paced (BENCH_GAP_MS before each), with a
#            warm pool of each (--pool N --pool N:template=bb): pooled claims.
#   density  BENCH_DENSITY_N idle boxes of the image template, then of the
#            default one, by 16 clients: host memory per box (bench/serve.py
#            snapshots: every page but the page cache), the layers' page
#            cache counted once.
#
# Knobs: BENCH_HUSK [build/husk]  BENCH_COUNT [300] lifecycles per run
#        BENCH_ROUNDS [2]  BENCH_POOL [8]  BENCH_GAP_MS [50]
#        BENCH_DENSITY_N [1000]  BENCH_IMPORT_REPS [3]
#        BENCH_IMPORT_DIR [/usr/lib/python3] the big layer's source
#
# Targets are reported, not enforced.  Everything made (daemons, their data
# directories, images, podman images) is removed on exit.
set -euo pipefail

cd "$(dirname "$0")/.."
HUSK=$(realpath "${BENCH_HUSK:-build/husk}")
ONLY=${BENCH_ONLY:-import create density}
COUNT=${BENCH_COUNT:-300}
ROUNDS=${BENCH_ROUNDS:-2}
POOL=${BENCH_POOL:-8}
GAP=${BENCH_GAP_MS:-50}
DENSITY_N=${BENCH_DENSITY_N:-1000}
REPS=${BENCH_IMPORT_REPS:-3}
IMPORT_DIR=${BENCH_IMPORT_DIR:-/usr/lib/python3}

die() { echo "templates-bench: $*" >&2; exit 1; }
note() { echo "templates-bench: $*" >&2; }
want() { [[ " $ONLY " == *" $1 "* ]]; }
[ "$(id -u)" = 0 ] || die "husk serve needs root"
[ -x "$HUSK" ] || die "$HUSK not found: run 'make all' first"
[ -x /bin/busybox ] || die "busybox is required (scripts/deps.sh test installs busybox-static)"
for c in curl jq python3; do command -v $c >/dev/null || die "$c is required"; done

TMP=$(mktemp -d /tmp/husk-tb.XXXXXX)
OUT=$TMP/summary.txt
: >"$OUT"
DPID="" DATA="" PORT="" KEY=""
ADMIN=$(head -c 48 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 32)
PODMAN_IMAGES=()

say() { echo "$*" | tee -a "$OUT" >&2; }

start_daemon() { # name serve-args...
  local name=$1
  shift
  DATA=$TMP/$name/data
  mkdir -p "$TMP/$name"
  (ulimit -n "$(ulimit -Hn)" && HUSK_ADMIN_KEY=$ADMIN exec "$HUSK" serve --listen 127.0.0.1:0 \
    --s3-listen off --quiet --data "$DATA" "$@") 2>"$TMP/$name/log" &
  DPID=$!
  PORT=""
  for _ in $(seq 200); do
    PORT=$(sed -n 's|^husk: listening on http://127\.0\.0\.1:\([0-9]*\)$|\1|p' "$TMP/$name/log")
    [ -n "$PORT" ] && break
    kill -0 "$DPID" 2>/dev/null || { cat "$TMP/$name/log" >&2; die "the daemon did not start"; }
    sleep 0.1
  done
  [ -n "$PORT" ] || die "the daemon did not say where it listens"
  local t
  t=$(admin POST /v1/tenants -d "{\"name\":\"bench-$RANDOM$RANDOM\"}" | jq -r .id)
  KEY=$(admin POST "/v1/tenants/$t/keys" | jq -r .key)
  [[ $KEY == hk_* ]] || die "could not make a tenant key"
  export APIBENCH_KEY=$KEY
}

admin() { # METHOD PATH [curl args]
  local m=$1 p=$2
  shift 2
  curl -sS --max-time 600 -H "Authorization: Bearer $ADMIN" -X "$m" "http://127.0.0.1:$PORT$p" "$@"
}

stop_daemon() {
  [ -n "$DPID" ] || return 0
  local ids
  ids=$(curl -sS -H "Authorization: Bearer $KEY" "http://127.0.0.1:$PORT/v1/sandboxes?state=live&limit=1000" |
    jq -r '.sandboxes[].id' 2>/dev/null || true)
  if [ -n "$ids" ]; then
    echo "$ids" >"$TMP/ids-left"
    "$TMP/apibench" delete --port "$PORT" --clients 8 --count 100000 --ids "$TMP/ids-left" --label cleanup >/dev/null || true
  fi
  kill -TERM "$DPID" 2>/dev/null || true
  wait "$DPID" 2>/dev/null || true
  DPID=""
  python3 bench/serve.py leftovers "$DATA" --clean >"$TMP/leftovers" || note "left behind: $(head -n1 "$TMP/leftovers")"
}

cleanup() {
  stop_daemon || true
  for i in "${PODMAN_IMAGES[@]}"; do podman rmi -f "$i" >/dev/null 2>&1 || true; done
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

cc -std=c17 -O2 -Wall -Wextra -pthread -o "$TMP/apibench" bench/apibench.c

# ---- images -------------------------------------------------------------------------------
L=$TMP/layers
mkdir -p "$L/base/bin" "$L/base/etc" "$L/base/tmp"
cp /bin/busybox "$L/base/bin/busybox"
for c in sh true ls cat echo id env; do ln -sf busybox "$L/base/bin/$c"; done
printf 'root:x:0:0:root:/root:/bin/sh\n' >"$L/base/etc/passwd"
printf 'root:x:0:\n' >"$L/base/etc/group"
for i in 1 2 3 4; do mkdir -p "$L/l$i/opt" && echo "$i" >"$L/l$i/opt/f$i"; done
python3 tests/template/mkimage.py "$TMP/bb.tar" --layer "$L/base"
python3 tests/template/mkimage.py "$TMP/bb5.tar" --layer "$L/base" --layer "$L/l1" --layer "$L/l2" \
  --layer "$L/l3" --layer "$L/l4"

{
  echo "== machine"
  echo "cpus:      $(nproc) x $(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)"
  echo "memory:    $(awk '/^MemTotal/{printf "%.1f GiB", $2/1048576}' /proc/meminfo)"
  echo "kernel:    $(uname -srm)"
  echo "disk:      $(df -hT "$TMP" | awk 'NR==2{print $2, "at", $7}')"
  echo "husk:      $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "podman:    $(podman --version 2>/dev/null || echo 'not installed (scripts/deps.sh bench)')"
  echo
} | tee -a "$OUT" >&2

median() { sort -n | awk '{a[NR]=$1} END{print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
now() { date +%s.%N; }

# ---- import --------------------------------------------------------------------------------
if want import; then
  [ -d "$IMPORT_DIR" ] || die "no $IMPORT_DIR for the big layer (BENCH_IMPORT_DIR)"
  mkdir -p "$L/big/usr/lib"
  cp -a "$IMPORT_DIR" "$L/big/usr/lib/"
  BIG_MB=$(du -sm "$L/big" | cut -f1)
  BIG_FILES=$(find "$L/big" | wc -l)
  # Uncompressed layers: the import's time is unpacking, as tar's.
  python3 tests/template/mkimage.py "$TMP/big.tar" --layer "$L/base:plain" --layer "$L/big:plain"
  mkdir -p "$TMP/layers-tar"
  tar -C "$TMP/layers-tar" -xf "$TMP/big.tar"
  mapfile -t LTARS < <(find "$TMP/layers-tar/blobs/sha256" -type f -size +100k)
  start_daemon import
  H=() C=() T=() P=() PL=()
  PODMAN_RUN_ERR=""
  for r in $(seq "$REPS"); do
    sync
    echo 3 >/proc/sys/vm/drop_caches
    t0=$(now)
    code=$(admin POST "/v1/templates?name=big$r" --data-binary "@$TMP/big.tar" -o "$TMP/imp.json" -w '%{http_code}')
    t1=$(now)
    [ "$code" = 201 ] || die "import failed ($code): $(head -c 300 "$TMP/imp.json")"
    H+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b - a}')")
    admin DELETE "/v1/templates/big$r" >/dev/null
    sync
    echo 3 >/proc/sys/vm/drop_caches
    rm -rf "$TMP/cli-data" && mkdir -p "$TMP/cli-data"
    t0=$(now)
    "$HUSK" template import "$TMP/big.tar" --name big --data "$TMP/cli-data" >/dev/null
    t1=$(now)
    C+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b - a}')")
    rm -rf "$TMP/cli-data"
    sync
    echo 3 >/proc/sys/vm/drop_caches
    rm -rf "$TMP/x" && mkdir "$TMP/x"
    t0=$(now)
    for lt in "${LTARS[@]}"; do tar -C "$TMP/x" -xf "$lt"; done
    sync
    t1=$(now)
    T+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b - a}')")
    rm -rf "$TMP/x"
    if command -v podman >/dev/null; then
      sync
      echo 3 >/proc/sys/vm/drop_caches
      t0=$(now)
      id=$(podman load -i "$TMP/big.tar" 2>/dev/null | sed -n 's/^Loaded image: *//p' | tail -n1)
      t1=$(now)
      PL+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b - a}')")
      # Limits no higher than podman's own (raising one needs CAP_SYS_RESOURCE).
      if podman run --rm --network none --ulimit nofile=1024:1024 --ulimit nproc=1024:1024 \
        "$id" /bin/true 2>"$TMP/podman.err"; then
        t1=$(now)
        P+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b - a}')")
      else
        PODMAN_RUN_ERR=$(tail -n1 "$TMP/podman.err")
      fi
      PODMAN_IMAGES+=("$id")
      podman rmi -f "$id" >/dev/null 2>&1 || true
    fi
  done
  stop_daemon
  hm=$(printf '%s\n' "${H[@]}" | median)
  cm=$(printf '%s\n' "${C[@]}" | median)
  tm=$(printf '%s\n' "${T[@]}" | median)
  say "== import of a ${BIG_MB} MB image ($BIG_FILES files in its big layer), $REPS runs each, cold page cache"
  say "husk template import FILE:    median ${cm} s   (runs: ${C[*]})"
  say "husk POST /v1/templates:      median ${hm} s   (runs: ${H[*]}; the upload over loopback included)"
  say "tar -x of its layers + sync:  median ${tm} s   (runs: ${T[*]})"
  if [ ${#PL[@]} -gt 0 ]; then
    say "podman load:                  median $(printf '%s\n' "${PL[@]}" | median) s   (runs: ${PL[*]})"
  fi
  if [ ${#P[@]} -gt 0 ]; then
    say "podman load + run --rm true:  median $(printf '%s\n' "${P[@]}" | median) s   (runs: ${P[*]})"
  elif [ -n "$PODMAN_RUN_ERR" ]; then
    say "podman run --rm true:         fails on this host: $PODMAN_RUN_ERR"
  fi
  say "$(awk -v h="$cm" -v t="$tm" 'BEGIN{r = h / t; printf "target: husk import <= 2 x tar -x (both from a file on disk): %.2f x -> %s", r, (r <= 2 ? "met" : "NOT met")}')"
  say "$(awk -v h="$hm" -v t="$tm" 'BEGIN{printf "over HTTP: %.2f x tar -x", h / t}')"
  say ""
fi

# ---- create -------------------------------------------------------------------------------
lifecycle() { # label body [extra apibench args]
  local label=$1 body=$2
  shift 2
  "$TMP/apibench" lifecycle --port "$PORT" --count "$COUNT" --seconds 60 --body "$body" --label "$label" "$@"
}
if want create; then
  start_daemon create
  admin POST '/v1/templates?name=bb' --data-binary "@$TMP/bb.tar" >/dev/null
  admin POST '/v1/templates?name=bb5' --data-binary "@$TMP/bb5.tar" >/dev/null
  : >"$TMP/create.jsonl"
  for _ in $(seq "$ROUNDS"); do
    lifecycle default '{}' >>"$TMP/create.jsonl"
    lifecycle bb '{"template":"bb"}' >>"$TMP/create.jsonl"
    lifecycle bb5 '{"template":"bb5"}' >>"$TMP/create.jsonl"
  done
  stop_daemon
  # A pool's template must exist when the daemon starts: import it first.
  start_daemon pooled
  admin POST '/v1/templates?name=bb' --data-binary "@$TMP/bb.tar" >/dev/null
  stop_daemon
  start_daemon pooled --pool "$POOL" --pool "$POOL:template=bb"
  for _ in $(seq 300); do
    [ "$(admin GET /v1/pool | jq '[.pools[].ready] | add')" = $((2 * POOL)) ] && break
    sleep 0.1
  done
  for _ in $(seq "$ROUNDS"); do
    lifecycle pooled-default '{}' --gap-ms "$GAP" --count 100 >>"$TMP/create.jsonl"
    lifecycle pooled-bb '{"template":"bb"}' --gap-ms "$GAP" --count 100 >>"$TMP/create.jsonl"
  done
  claims=$(admin GET /v1/pool | jq -c '[.pools[] | {template, claims, empty}]')
  stop_daemon
  python3 - "$TMP/create.jsonl" "$claims" <<'EOF' | tee -a "$OUT" >&2
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
by = {}
for r in rows:
    by.setdefault(r["label"], []).append(r)
def med(label, step):
    v = [r[step]["p50"] for r in by.get(label, []) if r.get("n")]
    return statistics.median(v) if v else float("nan")
print("== create + exec true + delete over HTTP, one client (p50 of each run's p50, ms)")
print(f"{'':16} {'create':>8} {'exec':>8} {'delete':>8} {'total':>8}  errors")
for l in ("default", "bb", "bb5", "pooled-default", "pooled-bb"):
    errs = sum(r.get("errors", 0) for r in by.get(l, []))
    print(f"{l:16} " + " ".join(f"{med(l, s):8.2f}" for s in ("create", "exec", "delete", "total")) + f"  {errs}")
for l, what in (("bb", "one layer"), ("bb5", "five layers")):
    r = med(l, "create") / med("default", "create")
    print(f"target: image template create <= 1.2 x default ({what}): {r:.2f} x -> {'met' if r <= 1.2 else 'NOT met'}")
r = med("pooled-bb", "create") / med("pooled-default", "create")
print(f"pooled claims: template {med('pooled-bb', 'create'):.2f} ms vs default {med('pooled-default', 'create'):.2f} ms ({r:.2f} x)")
print(f"pools: {sys.argv[2]}")
print()
EOF
fi

# ---- density -------------------------------------------------------------------------------
density() { # name body
  local name=$1 body=$2 dd=$TMP/density-$1
  mkdir -p "$dd"
  python3 bench/serve.py settle "$DATA" "$DPID" before0 >"$dd/snap-before0.json"
  sleep 3
  python3 bench/serve.py snap "$DATA" "$DPID" before >"$dd/snap-before.json"
  note "density: $DENSITY_N boxes of $name"
  timeout 600 "$TMP/apibench" create --port "$PORT" --clients 16 --count "$DENSITY_N" --warmup 0 \
    --seconds 300 --body "$body" --ids "$dd/ids.txt" --label "density-$name" >"$dd/create.json" || true
  curl -sS -H "Authorization: Bearer $KEY" "http://127.0.0.1:$PORT/v1/sandboxes?state=running&limit=1000" |
    jq '.sandboxes | length' >"$dd/running.txt"
  sleep 3
  python3 bench/serve.py snap "$DATA" "$DPID" up >"$dd/snap-up.json"
  timeout 600 "$TMP/apibench" delete --port "$PORT" --clients 16 --count "$DENSITY_N" \
    --ids "$dd/ids.txt" --label "density-$name-delete" >"$dd/delete.json" || true
  for _ in $(seq 300); do
    [ "$(python3 bench/serve.py count "$DATA")" = 0 ] && break
    sleep 0.1
  done
  python3 bench/serve.py leftovers "$DATA" >"$dd/leftovers.txt" || true
  python3 bench/serve.py settle "$DATA" "$DPID" after >"$dd/snap-after.json"
  python3 bench/serve.py density "$dd" "$DENSITY_N" >"$dd/result.json"
}
if want density; then
  start_daemon density
  admin POST '/v1/templates?name=bb' --data-binary "@$TMP/bb.tar" >/dev/null
  density template '{"template":"bb"}'
  density default '{}'
  stop_daemon
  python3 - "$TMP/density-template/result.json" "$TMP/density-default/result.json" <<'EOF' | tee -a "$OUT" >&2
import json, sys
t, d = (json.load(open(p)) for p in sys.argv[1:3])
key = "host used (MemTotal-MemFree-Buffers-Cached+Shmem)"
print(f"== density: {t['count']} idle boxes, 16 clients creating")
for name, r in (("image template", t), ("default", d)):
    print(f"{name:15} started {r['created']} in {r['start_s']:.1f} s (create p50 {r['create_p50']:.1f} ms); "
          f"host memory per box {r['per_box'][key] / 1024:.0f} KiB "
          f"(slab {r['per_box']['  of which slab (SUnreclaim)'] / 1024:.0f} + {r['per_box']['  of which slab (SReclaimable)'] / 1024:.0f} KiB, "
          f"shmem {r['per_box']['  of which shmem/tmpfs (Shmem)'] / 1024:.0f} KiB); "
          f"left after delete: {r['after_leftovers']}")
v = t["per_box"][key] / 1048576
print(f"target: <= 1 MiB host memory per idle image-template box: {v:.2f} MiB -> {'met' if v <= 1 else 'NOT met'}")
print()
EOF
fi

echo >&2
cat "$OUT"
