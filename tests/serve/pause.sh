#!/bin/bash
# Pause and resume in memory: a paused box's processes use no CPU and keep
# their state, requests that would run something answer 409 naming the
# state, its lifetime stops and the limit on paused time ends it, and it
# stays paused across a SIGKILL of the daemon.  No timing assertions:
# waits are "until X, at most N s".
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"

if ! serve_start --max-paused 4; then
  not_ok "the daemon starts"
  serve_finish
  exit 1
fi
new_tenant pause-a || not_ok "tenant A"
KEY_A=$TKEY
new_tenant pause-b || not_ok "tenant B"
KEY_B=$TKEY
KEY=$KEY_A
new_box '{"timeout":600}' || not_ok "a box"

# A CPU-burning loop that counts, in the background.
# (a new file renamed over the old one every 500 rounds: a read never sees
# it half written)
api POST "/v1/sandboxes/$BOX/exec" -d '{"cmd":["sh","-c","i=0; while :; do i=$((i+1)); if [ $((i % 500)) = 0 ]; then echo $i > /tmp/count.new; mv /tmp/count.new /tmp/count; fi; done"],"background":true}'
expect_code "a busy loop starts in the background" 201
# The counter's value.
count() {
  local i
  for i in $(seq 50); do
    api GET "/v1/sandboxes/$BOX/files?path=/tmp/count"
    [ "$CODE" = 200 ] && [[ "$BODY" =~ ^[0-9]+$ ]] && { echo "$BODY"; return; }
  done
  echo 0
}
wait_for 10 sh -c "[ \"\$(curl -s -H 'Authorization: Bearer $KEY' '$URL/v1/sandboxes/$BOX/files?path=/tmp/count')\" ]"
cpu() { api GET "/v1/sandboxes/$BOX/metrics"; jf 'j["cpu_usec"]'; }

api POST "/v1/sandboxes/$BOX/pause"
expect_code "pause" 200
expect_eq "the box says paused" "$(jf 'j["state"]')" paused
check "it says since when and until when" [ -n "$(jf 'j["paused_at"]')" -a -n "$(jf 'j["paused_until"]')" ]
check "what is left of its lifetime" [ -n "$(jf 'j["remaining"]')" ]
c1=$(cpu)
expect_code "metrics of a paused box" 200
sleep 1
c2=$(cpu)
expect_eq "a paused box uses no CPU" "$c2" "$c1"

api POST "/v1/sandboxes/$BOX/exec" -d '{"cmd":["true"]}'
expect_code "exec on a paused box: 409" 409
check "the error names the state" grep -q paused <<<"$BODY"
api GET "/v1/sandboxes/$BOX/files?path=/tmp/count"
expect_code "files on a paused box: 409" 409
api POST "/v1/sandboxes/$BOX/contexts" -d '{"language":"python"}'
expect_code "contexts on a paused box: 409" 409
api POST "/v1/sandboxes/$BOX/pause"
expect_code "pausing a paused box: 409" 409
KEY=$KEY_B
api POST "/v1/sandboxes/$BOX/resume"
expect_code "another tenant cannot resume it" 404
KEY=$KEY_A

api POST "/v1/sandboxes/$BOX/resume"
expect_code "resume" 200
expect_eq "running again" "$(jf 'j["state"]')" running
c3=$(cpu)
wait_for 10 sh -c "[ \$(curl -s -H 'Authorization: Bearer $KEY' '$URL/v1/sandboxes/$BOX/metrics' | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"cpu_usec\"])') -gt $c3 ]"
check "after resume the loop uses CPU again" [ $? = 0 ]
n1=$(count)
sleep 1
n2=$(count)
check "the counter goes on from where it was ($n1 then $n2)" [ "${n2:-0}" -gt "${n1:-0}" ]
api POST "/v1/sandboxes/$BOX/resume"
expect_code "resuming a running box: 409" 409

# ---- a code context across a pause ------------------------------------------
ctx_ex() { api POST "/v1/sandboxes/$BOX/contexts/default/execute" -d "$(python3 -c 'import json,sys; print(json.dumps({"code":sys.argv[1]}))' "$1")"; }
ctx_text() { jf '[r["data"].get("text/plain") for r in j["results"] if r["is_main_result"]][0]'; }
ctx_ex 'x = 41'
expect_code "a python context in the box" 200
api POST "/v1/sandboxes/$BOX/pause"
ctx_ex 'x + 1'
expect_code "executing in a paused box's context: 409" 409
api POST "/v1/sandboxes/$BOX/resume"
ctx_ex 'x + 1'
expect_eq "after resume the context has its variables" "$(ctx_text)" 42

# ---- lifetime stops while paused ------------------------------------------
new_box '{"timeout":3}' || not_ok "a short-lived box"
SHORT=$BOX
api POST "/v1/sandboxes/$SHORT/pause"
expect_code "pause the short-lived box" 200
sleep 3.5
api GET "/v1/sandboxes/$SHORT"
expect_eq "a paused box does not expire" "$(jf 'j["state"]')" paused
api POST "/v1/sandboxes/$SHORT/resume"
expect_code "resume it" 200
rem=$(jf 'j["expires_at"]')
check "it expires again after resume" [ -n "$rem" ]
wait_for 10 sh -c "curl -s -H 'Authorization: Bearer $KEY' '$URL/v1/sandboxes/$SHORT' | grep -q '\"expired\"'"
check "and does, after what was left of its lifetime" [ $? = 0 ]

# ---- the limit on paused time ---------------------------------------------
new_box '{"timeout":600}' || not_ok "a box to leave paused"
LONG=$BOX
api POST "/v1/sandboxes/$LONG/pause"
wait_for 15 sh -c "curl -s -H 'Authorization: Bearer $KEY' '$URL/v1/sandboxes/$LONG' | grep -q paused_too_long"
check "a box paused past --max-paused ends, paused_too_long" [ $? = 0 ]
api GET "/v1/sandboxes/$LONG"
expect_eq "its state is expired" "$(jf 'j["state"]')" expired
wait_for 10 box_gone "$LONG"
check "its processes and cgroup are gone" [ $? = 0 ]

# ---- pause to disk ----------------------------------------------------------
objects() { find "$DATA/storage/objects" -type f 2>/dev/null | wc -l; }
obj0=$(objects)
new_box '{"timeout":600}' || not_ok "a box to pause to disk"
DISK=$BOX
api POST "/v1/sandboxes/$DISK/exec" -d '{"cmd":["sh","-c","echo kept > /workspace/k; mkdir -p /tmp/d; ln -s k /workspace/l; sleep 1000 &"]}'
api POST "/v1/sandboxes/$DISK/exec" -d '{"cmd":["sleep","1000"],"background":true}'
expect_code "a background process in it" 201
api POST "/v1/sandboxes/$DISK/pause" -d '{"keep_memory":false}'
expect_code "pause to disk" 200
expect_eq "it says paused" "$(jf 'j["state"]')" paused
expect_eq "without its memory" "$(jf 'j["keep_memory"]')" false
wait_for 10 box_gone "$DISK"
check "nothing of it runs: no process, no cgroup" [ $? = 0 ]
check "its files are in the store" [ "$(objects)" -gt "$obj0" ]
api POST "/v1/sandboxes/$DISK/exec" -d '{"cmd":["true"]}'
expect_code "exec on a box paused to disk: 409" 409
api POST "/v1/sandboxes/$DISK/pause"
expect_code "pausing it again: 409" 409
KEY=$KEY_B
api POST "/v1/sandboxes/$DISK/resume"
expect_code "another tenant cannot resume it" 404
KEY=$KEY_A
api POST "/v1/sandboxes/$DISK/resume"
expect_code "resume from disk" 200
expect_eq "running again, same id" "$(jf 'j["state"]') $(jf 'j["id"]')" "running $DISK"
api POST "/v1/sandboxes/$DISK/exec" -d '{"cmd":["sh","-c","cat /workspace/k; readlink /workspace/l; test -d /tmp/d && echo dir"]}'
expect_eq "its files are back" "$(jf 'j["stdout"]')" "$(printf 'kept\nk\ndir\n')"
SAVE=$BOX; BOX=$DISK
ctx_ex 'y = 1'
expect_code "a context after a resume from disk starts afresh" 200
BOX=$SAVE
api GET "/v1/sandboxes/$DISK/processes"
check "its background process is recorded lost" grep -q '"lost"' <<<"$BODY"
check "the snapshot it resumed from is gone" [ "$(objects)" = "$obj0" ]
api POST "/v1/sandboxes/$DISK/pause" -d '{"keep_memory":false}'
expect_code "pause it to disk again" 200
api DELETE "/v1/sandboxes/$DISK"
expect_code "delete a box paused to disk" 200
expect_eq "it is stopped" "$(jf 'j["state"]')" stopped
check "its snapshot is gone with it" [ "$(objects)" = "$obj0" ]
new_box '{"timeout":600}' || not_ok "a box to leave paused on disk"
DISK2=$BOX
api POST "/v1/sandboxes/$DISK2/pause" -d '{"keep_memory":false}'
wait_for 15 sh -c "curl -s -H 'Authorization: Bearer $KEY' '$URL/v1/sandboxes/$DISK2' | grep -q paused_too_long"
check "a box paused to disk past --max-paused ends, paused_too_long" [ $? = 0 ]
wait_for 10 sh -c "[ \$(find '$DATA/storage/objects' -type f | wc -l) = $obj0 ]"
check "and its snapshot goes" [ $? = 0 ]
api POST "/v1/sandboxes/$DISK/pause" -d '{"keep_memory":"no"}'
expect_code "keep_memory must be a boolean" 400

# ---- SIGKILL of the daemon while paused -----------------------------------
BOX=$(head -n1 "$T_SCRATCH/boxes" | cut -d' ' -f1)
api POST "/v1/sandboxes/$BOX/pause"
expect_code "pause again" 200
new_box '{"timeout":600}' || not_ok "a box paused to disk across the restart"
DISK3=$BOX
api POST "/v1/sandboxes/$DISK3/exec" -d '{"cmd":["sh","-c","echo survived > /workspace/s"]}'
api POST "/v1/sandboxes/$DISK3/pause" -d '{"keep_memory":false}'
expect_code "pause it to disk" 200
BOX=$(head -n1 "$T_SCRATCH/boxes" | cut -d' ' -f1)
serve_kill9
serve_start --max-paused 600 || not_ok "restart after SIGKILL"
api GET "/v1/sandboxes/$BOX"
expect_eq "still paused after the restart" "$(jf 'j["state"]')" paused
c1=$(cpu)
sleep 1
c2=$(cpu)
expect_eq "and frozen" "$c2" "$c1"
api POST "/v1/sandboxes/$BOX/resume"
expect_code "resumable" 200
c3=$(cpu)
wait_for 10 sh -c "[ \$(curl -s -H 'Authorization: Bearer $KEY' '$URL/v1/sandboxes/$BOX/metrics' | python3 -c 'import json,sys; print(json.load(sys.stdin)[\"cpu_usec\"])') -gt $c3 ]"
check "after the restart and resume the loop uses CPU again" [ $? = 0 ]
n1=$(count)
sleep 1
n2=$(count)
check "the loop goes on after the restart ($n1 then $n2)" [ "${n2:-0}" -gt "${n1:-0}" ]
api DELETE "/v1/sandboxes/$BOX"
expect_code "delete" 200
api GET "/v1/sandboxes/$DISK3"
expect_eq "the box paused to disk is still paused after the restart" "$(jf 'j["state"]')" paused
api POST "/v1/sandboxes/$DISK3/resume"
expect_code "and resumes" 200
api POST "/v1/sandboxes/$DISK3/exec" -d '{"cmd":["cat","/workspace/s"]}'
expect_eq "with its files" "$(jf 'j["stdout"]')" survived
api DELETE "/v1/sandboxes/$DISK3"

# ---- SIGKILL of the daemon in the middle of pauses and resumes ---------------
# Whatever the moment, after the restart the box's cgroup matches its
# recorded state: frozen if it says paused, running if it says running.
frozen_of() { # BOX: 1 frozen, 0 not (cgroup.freeze, else the v1 freezer)
  local d
  for d in $(box_cgroups "$1"); do
    [ -f "$d/cgroup.freeze" ] && { cat "$d/cgroup.freeze"; return; }
  done
  for d in $(box_cgroups "$1"); do
    [ -f "$d/freezer.state" ] && { grep -q THAWED "$d/freezer.state" && echo 0 || echo 1; return; }
  done
  echo "?"
}
new_box '{"timeout":600}' || not_ok "a box for the crash rounds"
CR=$BOX
consistent=0
for round in 1 2 3 4 5 6; do
  api GET "/v1/sandboxes/$CR"
  op=pause
  [ "$(jf 'j["state"]')" = paused ] && op=resume
  curl -s -o /dev/null -X POST -H "Authorization: Bearer $KEY" "$URL/v1/sandboxes/$CR/$op" &
  sleep "0.00$((RANDOM % 9))"
  serve_kill9
  wait
  serve_start --max-paused 600 || { not_ok "restart in crash round $round"; break; }
  api GET "/v1/sandboxes/$CR"
  st=$(jf 'j["state"]')
  fz=$(frozen_of "$CR")
  if { [ "$st" = paused ] && [ "$fz" = 1 ]; } || { [ "$st" = running ] && [ "$fz" = 0 ]; }; then
    consistent=$((consistent + 1))
  else
    echo "# round $round: state $st, frozen $fz"
  fi
done
expect_eq "after each SIGKILL mid-pause or mid-resume, the cgroup matches the recorded state" "$consistent" 6
api DELETE "/v1/sandboxes/$CR"

# The same for pauses to disk and resumes from it: after each restart the
# box is paused with nothing running, or running with its file, and no
# archive is left that nobody resumes from.
obj0=$(objects)
new_box '{"timeout":600}' || not_ok "a box for the crash rounds to disk"
CR=$BOX
api POST "/v1/sandboxes/$CR/exec" -d '{"cmd":["sh","-c","echo mine > /workspace/m"]}'
good=0
for round in 1 2 3 4 5 6; do
  api GET "/v1/sandboxes/$CR"
  if [ "$(jf 'j["state"]')" = paused ]; then
    curl -s -o /dev/null -X POST -H "Authorization: Bearer $KEY" "$URL/v1/sandboxes/$CR/resume" &
  else
    curl -s -o /dev/null -X POST -H "Authorization: Bearer $KEY" -d '{"keep_memory":false}' \
      "$URL/v1/sandboxes/$CR/pause" &
  fi
  sleep "0.0$((RANDOM % 6))"
  serve_kill9
  wait
  serve_start --max-paused 600 || { not_ok "restart in crash round $round to disk"; break; }
  api GET "/v1/sandboxes/$CR"
  st=$(jf 'j["state"]')
  # (the killed daemon's spawner reaps what it made once it sees the daemon gone)
  if [ "$st" = paused ] && wait_for 10 box_gone "$CR"; then
    good=$((good + 1))
  elif [ "$st" = running ]; then
    api POST "/v1/sandboxes/$CR/exec" -d '{"cmd":["cat","/workspace/m"]}'
    [ "$(jf 'j["stdout"]')" = mine ] && good=$((good + 1)) || echo "# round $round: running without its file: $BODY"
  else
    echo "# round $round: state $st, processes: $(box_pids "$CR" | wc -l)"
    for p in $(box_pids "$CR"); do echo "#  $p $(tr '\0' ' ' </proc/$p/cmdline) $(grep State /proc/$p/status) $(cat /proc/$p/cgroup | tr '\n' ' ')"; done
    grep -i "$CR" "$SERVE_LOG" | tail -8 | sed 's/^/#   /' 
  fi
done
expect_eq "after each SIGKILL mid-pause-to-disk or mid-resume, the box is whole" "$good" 6
api GET "/v1/sandboxes/$CR"
if [ "$(jf 'j["state"]')" = paused ]; then api POST "/v1/sandboxes/$CR/resume"; fi
api POST "/v1/sandboxes/$CR/exec" -d '{"cmd":["cat","/workspace/m"]}'
expect_eq "and its files survived every round" "$(jf 'j["stdout"]')" mine
api DELETE "/v1/sandboxes/$CR"
serve_kill9
serve_start --max-paused 600 || not_ok "restart"
check "no archive is left over" [ "$(objects)" = "$obj0" ]

# A paused box can be deleted.
new_box '{"timeout":600}' || not_ok "one more box"
api POST "/v1/sandboxes/$BOX/pause"
api DELETE "/v1/sandboxes/$BOX"
expect_code "delete a paused box" 200
wait_for 10 box_gone "$BOX"
check "nothing of it is left" [ $? = 0 ]
serve_finish
