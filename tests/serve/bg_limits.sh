#!/bin/bash
# The limits of background processes: a process past its timeout ends with
# reason timeout and exit code 124, its whole process group gone; one past
# its output limit is killed with reason output and its output cut to the
# limit; both hold across a daemon SIGKILL and restart (a deadline that
# passed while no daemon ran is enforced by the next one).  A process
# without limits runs on.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"

if ! serve_start; then
  not_ok "the daemon starts"
  serve_finish
  exit 1
fi
new_tenant limits || not_ok "tenant"
KEY=$TKEY
new_box '{"timeout":900}' || not_ok "box"
B=$BOX

# bg JSON-FIELDS: start a background process; sets P.
bg() {
  api POST "/v1/sandboxes/$B/exec" -d "{\"background\":true,$1}"
  P=$(jf 'j["pid"]')
  [ "$CODE" = 201 ] && [ -n "$P" ]
}
proc() { api GET "/v1/sandboxes/$B/processes/$1"; }
ended() { proc "$1"; [ "$(jf 'j["state"]')" = exited ]; }
# output_size PID STREAM: the bytes kept of one stream.
output_size() {
  api GET "/v1/sandboxes/$B/processes/$1/output?stream=$2"
  wc -c <"$T_SCRATCH/body"
}

# ---- timeout ------------------------------------------------------------
bg '"cmd":["sh","-c","sleep 3011 & echo start; sleep 3012"],"timeout":1' ||
  not_ok "start a process with a 1 s timeout: $BODY"
TP=$P
check "its process object has state running" [ "$(jf 'j["state"]')" = running ]
check "it ends at its timeout" wait_for 20 ended "$TP"
expect_eq "reason timeout" "$(jf 'j["reason"]')" timeout
expect_eq "exit code 124, as a sync exec's" "$(jf 'j["exit_code"]')" 124
expect_eq "signal 9" "$(jf 'j["signal"]')" 9
expect_eq "not truncated" "$(jf 'j["truncated"]')" false
check "its whole process group is gone" wait_for 10 no_box_procs_matching "$B" "sleep 3011"
check "itself too" no_box_procs_matching "$B" "sleep 3012"
api GET "/v1/sandboxes/$B/processes/$TP/output?stream=stdout"
expect_eq "what it wrote is kept" "$BODY" "start"

bg '"cmd":["sh","-c","exit 3"],"timeout":60' || not_ok "start a process that ends in time"
check "a process that ends before its timeout is recorded" wait_for 20 ended "$P"
expect_eq "with its own exit code" "$(jf 'j["exit_code"]')" 3
expect_eq "and reason exited" "$(jf 'j["reason"]')" exited

# ---- output limit -------------------------------------------------------
bg '"cmd":["sh","-c","sleep 3021 & yes | head -c 5000000; sleep 3022"],"output_limit":1000' ||
  not_ok "start a process with a 1000-byte output limit: $BODY"
OP=$P
check "it is killed past its output limit" wait_for 20 ended "$OP"
expect_eq "reason output" "$(jf 'j["reason"]')" output
expect_eq "exit code 137" "$(jf 'j["exit_code"]')" 137
expect_eq "truncated" "$(jf 'j["truncated"]')" true
check "its whole process group is gone" wait_for 10 no_box_procs_matching "$B" "sleep 3021"
expect_eq "its stdout is cut to the limit" "$(output_size "$OP" stdout)" 1000
expect_eq "its stderr is empty" "$(output_size "$OP" stderr)" 0

# Both streams: the short one is kept whole, the long one gets the rest.
bg '"cmd":["sh","-c","head -c 100 /dev/zero | tr \"\\\\0\" e >&2; yes | head -c 5000000; sleep 3023"],"output_limit":1000' ||
  not_ok "start a process writing both streams: $BODY"
check "it is killed past its output limit" wait_for 20 ended "$P"
expect_eq "its stderr (100 bytes) is kept whole" "$(output_size "$P" stderr)" 100
expect_eq "its stdout keeps the rest of the limit" "$(output_size "$P" stdout)" 900

bg '"cmd":["sh","-c","echo small; exit 5"],"output_limit":1000' || not_ok "start a quiet process"
check "a process within its output limit ends by itself" wait_for 20 ended "$P"
expect_eq "with its exit code" "$(jf 'j["exit_code"]')" 5
expect_eq "not truncated" "$(jf 'j["truncated"]')" false
expect_eq "its output is whole" "$(output_size "$P" stdout)" 6

# ---- no limits: the process runs on --------------------------------------
bg '"cmd":["sleep","3051"]' || not_ok "start a process without limits"
NP=$P
proc "$NP"
expect_eq "it runs" "$(jf 'j["state"]')" running

# ---- across a daemon SIGKILL and restart --------------------------------
# A deadline that passes while no daemon runs.
bg '"cmd":["sh","-c","sleep 3031 & sleep 3032"],"timeout":3' || not_ok "start a 3 s process"
RTP=$P
# An output limit passed while no daemon runs.
bg '"cmd":["sh","-c","sleep 4; yes | head -c 3000000; sleep 3042"],"output_limit":2000' ||
  not_ok "start a process that writes later"
ROP=$P
serve_kill9
sleep 6
check "with no daemon, the process past its deadline still runs" has_box_proc "$B" "sleep 3032"
check "and the one past its output limit too" has_box_proc "$B" "sleep 3042"
serve_start || not_ok "restart"
check "the restarted daemon ends the process past its deadline" wait_for 30 ended "$RTP"
expect_eq "reason timeout" "$(jf 'j["reason"]')" timeout
expect_eq "exit code 124" "$(jf 'j["exit_code"]')" 124
check "its group is gone" wait_for 10 no_box_procs_matching "$B" "sleep 3031"
check "and the one past its output limit" wait_for 30 ended "$ROP"
expect_eq "reason output" "$(jf 'j["reason"]')" output
check "its group is gone" wait_for 10 no_box_procs_matching "$B" "sleep 3042"
expect_eq "its output is cut to the limit" "$(output_size "$ROP" stdout)" 2000

# A deadline still ahead at the restart is kept by the new daemon.
bg '"cmd":["sh","-c","sleep 3061"],"timeout":8' || not_ok "start an 8 s process"
KP=$P
serve_kill9
serve_start || not_ok "restart at once"
proc "$KP"
expect_eq "it still runs after the restart" "$(jf 'j["state"]')" running
check "the new daemon ends it at its deadline" wait_for 30 ended "$KP"
expect_eq "reason timeout" "$(jf 'j["reason"]')" timeout
check "it is gone" wait_for 10 no_box_procs_matching "$B" "sleep 3061"

proc "$NP"
expect_eq "the process without limits still runs" "$(jf 'j["state"]')" running

api DELETE "/v1/sandboxes/$B"
expect_code "delete the box" 200
check "no process, no cgroup left" wait_for 20 box_gone "$B"
serve_stop
serve_finish
