#!/bin/bash
# Warm pools of several shapes (--pool N:SHAPE, repeatable): a create whose
# limits resolve to a pool's shape claims one of its boxes, with that
# shape's limits really applied; other shapes are built on demand; every
# pool refills; GET /v1/pool (admin) reports them; bad --pool values are
# refused at start with a message.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"

from_pool() { grep -q "box $1 created for tenant .* (from the pool)" "$SERVE_LOG"; }

# ---- bad --pool values: the daemon does not start, and says why ----------------------------
mkdir -p "$DATA"
bad_pool() { # DESC TEXT ARGS...: husk serve ARGS exits non-zero naming TEXT
  local desc=$1 want=$2 out rc
  shift 2
  out=$(HUSK_ADMIN_KEY=$ADMIN timeout 20 "$HUSK" serve --listen 127.0.0.1:0 --data "$DATA" "$@" 2>&1 </dev/null)
  rc=$?
  if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -qF -- "$want" <<<"$out"; then
    ok "$desc"
  else
    not_ok "$desc (exit $rc: $out)"
  fi
}
bad_pool "--pool x: not a number" "size \`x\`" --pool x
bad_pool "--pool 1:memory=abc: bad size" "memory: invalid size" --pool 1:memory=abc
bad_pool "--pool 1:color=red: unknown key" "unknown shape key \`color\`" --pool 1:color=red
bad_pool "--pool 1:memory: not KEY=VALUE" "not KEY=VALUE" --pool 1:memory
bad_pool "--pool 1:memory=1G,memory=2G: key given twice" "given twice" --pool 1:memory=1G,memory=2G
bad_pool "--pool 1: with nothing after the colon" "empty shape" --pool 1:
bad_pool "--pool 1:cpus=0: below the minimum" "out of range" --pool 1:cpus=0
bad_pool "--pool 1:memory=4k: below the minimum memory" "memory 4096 is out of range" --pool 1:memory=4k
bad_pool "--pool 5000: more than 4096 boxes" "out of range" --pool 5000
bad_pool "--pool 2 --pool 3: the default shape twice" "same shape" --pool 2 --pool 3
bad_pool "--pool 2 --pool 3:memory=512M: the defaults spelt out are the same shape" "same shape" \
  --pool 2 --pool 3:memory=512M
bad_pool "two pools above 4096 boxes together" "4300 boxes together" --pool 4000 --pool 300:memory=1G
check "no refused start left a box behind" [ -z "$(live_box_cgroups)" ]

# ---- two shapes ---------------------------------------------------------------------------
SMALL='"memory":"128M","cpus":0.5,"pids":64,"disk":"64M"'
if ! serve_start --pool 1 --pool 2:memory=128M,cpus=0.5,pids=64,disk=64M; then
  not_ok "the daemon starts with two pools"
  serve_finish
  exit 1
fi
pools_full() {
  local save=$KEY
  KEY=$ADMIN
  api GET /v1/pool
  KEY=$save
  [ "$(jf '[p["ready"] for p in j["pools"]]')" = "[1, 2]" ]
}
check "both pools fill up (1 + 2 ready boxes)" wait_for 60 pools_full
KEY=$ADMIN
api GET /v1/pool
expect_code "GET /v1/pool answers the admin" 200
expect_eq "it lists the pools in the order given, with sizes" "$(jf '[p["size"] for p in j["pools"]]')" "[1, 2]"
expect_eq "the default pool's shape is the defaults" \
  "$(jf '[j["pools"][0]["limits"][k] for k in ("memory","cpus","pids","disk")]')" "[536870912, 1.0, 256, 1073741824]"
expect_eq "the second pool's shape is the one asked for" \
  "$(jf '[j["pools"][1]["limits"][k] for k in ("memory","cpus","pids","disk")]')" "[134217728, 0.5, 64, 67108864]"

new_tenant shapes || not_ok "a tenant"
KEY=$TKEY
api GET /v1/pool
expect_code "a tenant key may not read the pools" 403

new_box "{$SMALL}" || not_ok "a create of the small shape succeeds"
S1=$BOX
check "it was claimed from the small shape's pool" from_pool "$S1"
# The shape is what the kernel enforces, not only what the row says.
cg_value() { # BOX FILE...: the first of these files found in the box's cgroups
  local d f
  for d in $(box_cgroups "$1"); do
    for f in "${@:2}"; do
      [ -r "$d/$f" ] && { cat "$d/$f"; return; }
    done
  done
}
expect_eq "its memory limit is 128M" "$(cg_value "$S1" memory.max memory.limit_in_bytes)" 134217728
expect_eq "its tasks limit is 64" "$(cg_value "$S1" pids.max)" 64
CPU=$(cg_value "$S1" cpu.max cpu.cfs_quota_us)
check "its CPU quota is half a period ($CPU)" python3 -c '
import sys
f = sys.argv[1].split()
q = int(f[0]); p = int(f[1]) if len(f) > 1 else int(open(sys.argv[2]).read())
sys.exit(0 if q * 2 == p else 1)' "$CPU" "$(for d in $(box_cgroups "$S1"); do [ -r "$d/cpu.cfs_period_us" ] && echo "$d/cpu.cfs_period_us"; done | head -n1)"
api POST "/v1/sandboxes/$S1/exec" -d '{"cmd":["sh","-c","df -k /workspace | tail -n1"]}'
expect_eq "its disk is 64M" "$(jf 'j["stdout"].split()[1]')" 65536

new_box '{"memory":"128M","cpus":0.5,"pids":64}' || not_ok "a create of a near shape succeeds"
N1=$BOX
check "a shape that differs in one field (disk) is built on demand" not from_pool "$N1"
expect_eq "and it has the disk it asked for (the default 1G)" \
  "$(api POST "/v1/sandboxes/$N1/exec" -d '{"cmd":["sh","-c","df -k /workspace | tail -n1"]}'; jf 'j["stdout"].split()[1]')" 1048576

new_box '{}' || not_ok "a create with no limits succeeds"
D1=$BOX
check "a create with no limits claims from the default pool" from_pool "$D1"
check "the pools refill after the claims" wait_for 60 pools_full
new_box '{"memory":"512M","cpus":1,"disk":"1G"}' || not_ok "a create that spells out the defaults"
D2=$BOX
check "limits that resolve to the defaults claim from the default pool" from_pool "$D2"

KEY=$ADMIN
api GET /v1/pool
expect_eq "claims are counted per pool" "$(jf '[p["claims"] for p in j["pools"]]')" "[2, 1]"
expect_eq "the create of an unpooled shape is counted" "$(jf 'j["unmatched"]')" 1

# A stop destroys the pools' boxes and leaves the claimed ones running.
serve_stop
expect_eq "after a stop only the four claimed boxes remain" "$(live_box_cgroups | wc -l)" 4
serve_start || not_ok "restart without pools"
KEY=$ADMIN
api GET /v1/pool
expect_eq "without --pool, GET /v1/pool lists no pools" "$(jf 'j["pools"]')" "[]"
KEY=$TKEY
for b in "$S1" "$N1" "$D1" "$D2"; do
  api DELETE "/v1/sandboxes/$b"
done
no_box_left() { [ -z "$(live_box_cgroups)" ]; }
check "no box of this daemon left" wait_for 20 no_box_left
serve_stop
serve_finish
