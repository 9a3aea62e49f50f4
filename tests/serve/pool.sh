#!/bin/bash
# The warm pool (--pool N): a create of the default shape claims a ready
# box; TTL and quota count from the claim; a box never serves two tenants;
# pool boxes are nobody's, so a stop or a crash leaves none of them behind.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"

pool_ready() { [ "$(grep -c 'created for tenant' "$SERVE_LOG")" -ge 0 ] && [ "$(live_box_cgroups | wc -l)" -ge "$1" ]; }
from_pool() { grep -q "box $1 created for tenant .* (from the pool)" "$SERVE_LOG"; }
cg_of() { box_cgroups "$1"; }

START_MS=$(($(date +%s%N) / 1000000))
if ! serve_start --pool 2; then
  not_ok "the daemon starts with --pool 2"
  serve_finish
  exit 1
fi
check "the pool fills up (2 ready boxes)" wait_for 30 pool_ready 2
new_tenant poolA '"max_boxes":1' || not_ok "tenant poolA"
AKEY=$TKEY
new_tenant poolB || not_ok "tenant poolB"
BKEY=$TKEY

KEY=$AKEY
new_box '{"timeout":100}' || not_ok "a default-shape create succeeds"
A1=$BOX
check "it was claimed from the pool" from_pool "$A1"
api GET "/v1/sandboxes/$A1"
CREATED=$(jf 'j["created_at"]')
EXPIRES=$(jf 'j["expires_at"]')
TTL=$(python3 -c 'import sys,datetime as d
f=lambda s: d.datetime.fromisoformat(s.replace("Z","+00:00"))
print(round((f(sys.argv[2])-f(sys.argv[1])).total_seconds()))' "$CREATED" "$EXPIRES")
expect_eq "TTL counts from the claim (expires = created + 100 s)" "$TTL" 100
CMS=$(python3 -c 'import sys,datetime as d; print(int(d.datetime.fromisoformat(sys.argv[1].replace("Z","+00:00")).timestamp()*1000))' "$CREATED")
check "created_at is the claim, not the pool's preparation" [ "$CMS" -ge "$START_MS" ]
api POST "/v1/sandboxes/$A1/exec" -d '{"cmd":["sh","-c","echo $HOME; id -u"],"env":{"X":"1"}}'
expect_eq "a pooled box runs commands" "$(jf 'j["stdout"]')" "$(printf '/workspace\n1000')"
# The pool is refilled by a spawner of its own at nice 19, so that building
# boxes does not compete with requests; the boxes it hands out run their
# programs at the normal priority.
pool_spawner_nice() { ps -o ni= -p "$(pgrep -P "$SPID" -f '^husk-spawner' | tr '\n' ',' | sed 's/,$//')" | tr -d ' ' | sort | tr '\n' ' '; }
expect_eq "two spawners: on demand at nice 0, the pool's at nice 19" "$(pool_spawner_nice)" "0 19 "
api POST "/v1/sandboxes/$A1/exec" -d '{"cmd":["nice"]}'
expect_eq "a pooled box's programs run at nice 0" "$(jf 'j["stdout"]')" 0

api POST /v1/sandboxes -d '{}'
expect_code "the tenant's quota counts the claimed box (max_boxes 1)" 403
check "a refused claim leaves the pool box ready" wait_for 10 pool_ready 2

KEY=$BKEY
new_box '{"env":{"WHO":"b"}}' || not_ok "tenant B claims a box"
B1=$BOX
check "B's box came from the pool" from_pool "$B1"
check "B got a different box than A" [ "$B1" != "$A1" ]
api POST "/v1/sandboxes/$B1/exec" -d '{"cmd":["sh","-c","echo $WHO; ls /workspace | wc -l"]}'
expect_eq "B's env is B's (nothing of A's request)" "$(jf 'j["stdout"]')" "$(printf 'b\n0')"

KEY=$AKEY
api DELETE "/v1/sandboxes/$A1"
expect_code "A deletes its box" 200
check "the deleted box is gone (never back in the pool)" wait_for 20 box_gone "$A1"
new_box '{}' || not_ok "A creates again"
check "A's new box is another one" [ "$BOX" != "$A1" ]
A2=$BOX

KEY=$AKEY
new_box '{"memory":"128M"}'
expect_code "a box of another shape is not taken from the pool (quota: A is full)" 403

# A stop leaves the claimed boxes running and destroys the pool's.
serve_stop
left=$(live_box_cgroups | wc -l)
expect_eq "after a stop only the two claimed boxes remain" "$left" 2
check "A's box still runs" [ -n "$(cg_of "$A2")" ]

# A crash leaves pool boxes behind; the next start sweeps them.
serve_start --pool 2 || not_ok "restart"
check "refilled after restart" wait_for 30 pool_ready 4
kill -9 "$SPID"
wait "$SPID" 2>/dev/null
serve_start || not_ok "restart without a pool"
check "the crashed daemon's pool boxes are swept; claimed ones re-adopted" wait_for 20 pool_ready 2
expect_eq "exactly the two claimed boxes remain" "$(live_box_cgroups | wc -l)" 2
KEY=$AKEY
api DELETE "/v1/sandboxes/$A2"
KEY=$BKEY
api DELETE "/v1/sandboxes/$B1"
no_box_left() { [ -z "$(live_box_cgroups)" ]; }
check "no box of this daemon left" wait_for 20 no_box_left
serve_stop
serve_finish
