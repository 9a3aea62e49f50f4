#!/bin/bash
# A tenant that sets no quota still has bounds (the daemon's defaults per
# tenant): its live boxes (--tenant-max-boxes), their memory limits summed
# (--tenant-max-memory) and its background processes running at once
# (--tenant-max-procs, each holds daemon fds), and its share of the reply
# budget (--tenant-reply-budget, half of --reply-budget).  Past each it gets a clear
# error, and another tenant's requests still succeed.  A tenant's own
# max_boxes / max_memory override the defaults.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"

# A reply budget of 8 MiB: each tenant's share is half, 4 MiB (two sync
# execs at the default --reply-max: each reserves 2 MiB).
if ! serve_start --tenant-max-boxes 2 --tenant-max-memory 1G --tenant-max-procs 3 --reply-budget 8M; then
  not_ok "the daemon starts with the per-tenant defaults"
  serve_finish
  exit 1
fi
new_tenant alpha || not_ok "tenant alpha"
A_KEY=$TKEY A_TID=$TID
new_tenant beta || not_ok "tenant beta"
B_KEY=$TKEY
new_tenant gamma '"max_boxes":3' || not_ok "tenant gamma, with its own max_boxes"
G_KEY=$TKEY
new_tenant delta || not_ok "tenant delta"
D_KEY=$TKEY
SMALL='{"memory":"64M","disk":"16M","timeout":600}'

# ---- boxes ------------------------------------------------------------------------
KEY=$A_KEY
new_box "$SMALL" || not_ok "alpha's first box"
A1=$BOX
new_box "$SMALL" || not_ok "alpha's second box"
A2=$BOX
api POST /v1/sandboxes -d "$SMALL"
expect_code "alpha's third box is past the default --tenant-max-boxes 2: 403" 403
expect_eq "403: quota_exceeded" "$(jf 'j["error"]["code"]')" quota_exceeded
check "403: says it is the daemon's default" grep -q "has 2 of 2 boxes (the daemon's default per tenant)" <<<"$BODY"
KEY=$B_KEY
new_box "$SMALL" || not_ok "beta still creates a box while alpha is at its bound"
B1=$BOX
api POST "/v1/sandboxes/$B1/exec" -d '{"cmd":["echo","fine"]}'
expect_eq "beta's box runs commands" "$(jf 'j["stdout"]')" fine
KEY=$G_KEY
for n in 1 2 3; do new_box "$SMALL" || not_ok "gamma's box $n (its own max_boxes 3)"; done
api POST /v1/sandboxes -d "$SMALL"
expect_code "gamma's fourth box is past its own max_boxes: 403" 403
check "403: says gamma's own quota (not the default)" bash -c '! grep -q "daemon.s default" <<<"$1" && grep -q "has 3 of 3 boxes" <<<"$1"' _ "$BODY"
KEY=$ADMIN
api PUT "/v1/tenants/$A_TID/quota" -d '{"max_boxes":3}'
KEY=$A_KEY
new_box "$SMALL" || not_ok "alpha's third box, once its own max_boxes is 3"
A3=$BOX
KEY=$ADMIN
api PUT "/v1/tenants/$A_TID/quota" -d '{"max_boxes":null}'
expect_eq "null returns alpha's max_boxes to the daemon's default" "$(jf 'j["max_boxes"] is None')" true
KEY=$A_KEY
api DELETE "/v1/sandboxes/$A3"

# ---- memory -------------------------------------------------------------------------
KEY=$D_KEY
new_box '{"memory":"768M","disk":"16M","timeout":600}' || not_ok "delta's box of 768M"
api POST /v1/sandboxes -d '{"memory":"512M","disk":"16M","timeout":600}'
expect_code "delta's second box would pass the default --tenant-max-memory 1G: 403" 403
check "403: names the memory and the default" grep -q "bytes of memory (the daemon's default per tenant)" <<<"$BODY"
KEY=$B_KEY
new_box '{"memory":"768M","disk":"16M","timeout":600}' || not_ok "beta still creates a box of 768M"
B2=$BOX
api DELETE "/v1/sandboxes/$B2"

# ---- background processes -------------------------------------------------------------
bg() { # BOX: start `sleep 600` in the background for $KEY; sets PID
  api POST "/v1/sandboxes/$1/exec" -d '{"cmd":["sleep","600"],"background":true}'
  PID=$(jf 'j.get("pid", "")')
}
KEY=$A_KEY
bg "$A1"
expect_code "alpha's first background process" 201
P1=$PID
bg "$A1"
expect_code "alpha's second" 201
bg "$A2"
expect_code "alpha's third, in another of its boxes" 201
bg "$A2"
expect_code "alpha's fourth is past --tenant-max-procs 3 (all its boxes together): 429" 429
expect_eq "429: too_many_requests" "$(jf 'j["error"]["code"]')" too_many_requests
check "429: says how many and the bound" grep -q "3 background processes and code contexts running (at most 3)" <<<"$BODY"
api POST "/v1/sandboxes/$A2/contexts" -d '{"language":"bash"}'
expect_code "a code context counts in the same bound: 429" 429
KEY=$B_KEY
bg "$B1"
expect_code "beta still starts a background process" 201
api POST "/v1/sandboxes/$B1/exec" -d '{"cmd":["echo","sync"]}'
expect_eq "beta's sync exec runs" "$(jf 'j["stdout"]')" sync
KEY=$A_KEY
api POST "/v1/sandboxes/$A1/exec" -d '{"cmd":["echo","sync"]}'
expect_code "alpha's sync execs are not background processes: still 200" 200
api DELETE "/v1/sandboxes/$A1/processes/$P1"
expect_code "alpha kills one of its processes" 204
# Its place comes back once the daemon has seen the exit.
bg_after_exit() { bg "$A2" && [ "$CODE" = 201 ]; }
check "once it has ended, alpha starts another" wait_for 20 bg_after_exit
bg "$A2"
expect_code "and is at its bound again: 429" 429
# Processes that end by themselves give their places back too.
api DELETE "/v1/sandboxes/$A1"
api DELETE "/v1/sandboxes/$A2"
KEY=$A_KEY
new_box "$SMALL" || not_ok "alpha's box for short processes"
A4=$BOX
start_true() {
  api POST "/v1/sandboxes/$A4/exec" -d '{"cmd":["true"],"background":true}'
  [ "$CODE" = 201 ]
}
n=0
while [ $n -lt 6 ] && wait_for 20 start_true; do n=$((n + 1)); done
expect_eq "alpha runs six short processes, three at most at once (each gives its place back)" "$n" 6
# The daemon's fds do not grow with ended processes (their stdin is closed).
FDS0=$(ls /proc/"$SPID"/fd | wc -l)
for n in $(seq 20); do wait_for 20 start_true || break; done
ended_all() { api GET "/v1/sandboxes/$A4/processes" >/dev/null; [ "$(jf 'sum(p["state"] != "exited" for p in j["processes"])')" = 0 ]; }
check "the short processes ended" wait_for 30 ended_all
fds_back() { [ "$(ls /proc/"$SPID"/fd | wc -l)" -le $((FDS0 + 2)) ]; }
check "the daemon holds no fd for ended processes" wait_for 10 fds_back

# ---- the reply budget ------------------------------------------------------------------
# alpha tries to fill the whole budget with four slow sync execs (they wait
# for /workspace/release): two fit its share, the others get 503; beta's
# requests that carry box data still fit.
SLOWS=()
for n in 1 2 3 4; do
  curl -sS -o "$T_SCRATCH/slow$n" -w '%{http_code}\n' --max-time 120 -H "Authorization: Bearer $A_KEY" \
    "$URL/v1/sandboxes/$A4/exec" -d "{\"cmd\":[\"sh\",\"-c\",\"while [ ! -e /workspace/release ]; do sleep 0.1; done; echo slow$n\"]}" \
    >"$T_SCRATCH/slow$n.code" &
  SLOWS+=($!)
done
two_refused() { [ "$(cat "$T_SCRATCH"/slow*.code 2>/dev/null | grep -c 503)" = 2 ]; }
check "two of alpha's four slow execs are refused (its share is full)" wait_for 30 two_refused
check "503: says it is the tenant's share" grep -qh "this tenant's share" "$T_SCRATCH"/slow[1-4]
KEY=$B_KEY
api POST "/v1/sandboxes/$B1/exec" -d '{"cmd":["echo","beta"]}'
expect_eq "beta's sync exec runs meanwhile" "$(jf 'j["stdout"]')" beta
api GET "/v1/sandboxes/$B1/files/list?path=/workspace"
expect_code "beta's files listing too" 200
KEY=$A_KEY
api PUT "/v1/sandboxes/$A4/files?path=/workspace/release" --data-binary go
wait "${SLOWS[@]}"
expect_eq "alpha's two admitted execs completed" "$(cat "$T_SCRATCH"/slow*.code | sort | tr '\n' ' ')" "200 200 503 503 "
api POST "/v1/sandboxes/$A4/exec" -d '{"cmd":["echo","again"]}'
expect_eq "alpha's share is back once they are done" "$(jf 'j["stdout"]')" again

reap_boxes "$A_KEY" "$B_KEY" "$G_KEY" "$D_KEY" >/dev/null
serve_stop
expect_eq "the daemon stops cleanly" "$SERVE_RC" 0
serve_finish
