#!/bin/bash
# Background processes that end while the daemon is stopped, dead or
# re-adopting its boxes: every exit is recorded, with its exit code, once a
# daemon runs again.  Init keeps each exit until the daemon has committed
# it and said so; a SIGKILL at any moment loses none.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"

N=24
if ! serve_start; then
  not_ok "the daemon starts"
  serve_finish
  exit 1
fi
new_tenant exits || not_ok "tenant"
KEY=$TKEY
new_box '{"memory":"256M","pids":256,"timeout":1800}' || not_ok "box"
B=$BOX

# Process i ends with exit code i when the host sends it SIGTERM (the host
# can signal box processes whether or not a daemon runs).
declare -A PID_OF
for i in $(seq 1 $N); do
  api POST "/v1/sandboxes/$B/exec" \
    -d "{\"cmd\":[\"sh\",\"-c\",\"trap 'exit $i' TERM; while :; do sleep 0.2; done; : bgmark_${i}_end\"],\"background\":true}"
  PID_OF[$i]=$(jf 'j["pid"]')
done
started=0
for i in $(seq 1 $N); do [ -n "${PID_OF[$i]}" ] && started=$((started + 1)); done
expect_eq "$N background processes started" "$started" "$N"

# Host pids of the shells, found once (in the box's cgroups, by command line).
declare -A HPID_OF
for p in $(box_pids "$B"); do
  c=$(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)
  [[ $c =~ bgmark_([0-9]+)_end ]] && HPID_OF[${BASH_REMATCH[1]}]=$p
done
found=0
for i in $(seq 1 $N); do [ -n "${HPID_OF[$i]}" ] && found=$((found + 1)); done
expect_eq "their host pids are known" "$found" "$N"

# still_runs I: the shell of process I is there (and not a zombie).
still_runs() {
  local st
  st=$(sed -n 's/^State:[[:space:]]*\(.\).*/\1/p' "/proc/${HPID_OF[$1]}/status" 2>/dev/null)
  [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}
# end I...: SIGTERM those processes and wait until they are gone.
term() { local i; for i in "$@"; do kill -TERM "${HPID_OF[$i]}" 2>/dev/null; done; }
gone() { local i; for i in "$@"; do still_runs "$i" && return 1; done; return 0; }
end() { term "$@"; wait_for 20 gone "$@"; }

# A daemon killed at some point of its start: during re-adoption, or
# right after.
start_and_kill() { # DELAY
  touch "$SERVE_LOG"
  HUSK_ADMIN_KEY=$ADMIN "$HUSK" serve --listen 127.0.0.1:0 --data "$DATA" 2>>"$SERVE_LOG" </dev/null &
  local p=$!
  sleep "$1"
  kill -9 "$p" 2>/dev/null
  wait "$p" 2>/dev/null
}

next=1
take() { # K: the next K process numbers
  local k
  TAKE=()
  for k in $(seq 1 "$1"); do
    [ $next -le $N ] && TAKE+=("$next") && next=$((next + 1))
  done
}
ends_ok=true
for round in 1 2 3 4; do
  [ -n "$SPID" ] || serve_start || not_ok "round $round: start"
  echo "# round $round at ${SECONDS}s"
  # The daemon is alive but not reading (stopped), the exits reach its
  # sockets, then it dies without having seen them.
  take 2
  kill -STOP "$SPID"
  end "${TAKE[@]}" || ends_ok=false
  kill -9 "$SPID"
  kill -CONT "$SPID" 2>/dev/null
  wait "$SPID" 2>/dev/null
  SPID=""
  # No daemon at all.
  take 2
  end "${TAKE[@]}" || ends_ok=false
  # Daemons killed while they re-adopt the box and flush its exits.
  for d in 0.05 0.15 0.3 0.5; do start_and_kill "$d"; done
  # A daemon that runs, killed while exits come in.
  serve_start || not_ok "round $round: restart"
  take 2
  term "${TAKE[@]}"
  serve_kill9
  end "${TAKE[@]}" || ends_ok=false
done
check "every process ended (host view)" $ends_ok

echo "# final restart at ${SECONDS}s"
serve_start || not_ok "final restart"
# running_count: processes of the box still recorded running.
running_count() {
  api GET "/v1/sandboxes/$B/processes"
  jf 'sum(1 for p in j["processes"] if p["state"] == "running")'
}
all_recorded() { [ "$(running_count)" = 0 ]; }
check_all() { # WHEN
  wait_for 30 all_recorded
  expect_eq "$1: no ended process is recorded running" "$(running_count)" 0
  local i bad=0
  for i in $(seq 1 $N); do
    api GET "/v1/sandboxes/$B/processes/${PID_OF[$i]}"
    if [ "$(jf 'j["state"]')" != exited ] || [ "$(jf 'j["exit_code"]')" != "$i" ]; then
      echo "#   process $i (pid ${PID_OF[$i]}): $BODY"
      bad=$((bad + 1))
    fi
  done
  expect_eq "$1: every process is recorded exited with its own exit code" "$bad" 0
}
check_all "after the crashes"
api DELETE "/v1/sandboxes/$B/processes/${PID_OF[1]}"
expect_code "DELETE on an ended process is 409" 409
api POST "/v1/sandboxes/$B/processes/${PID_OF[2]}/signal" -d '{"signal":"TERM"}'
expect_code "a signal to an ended process is 409" 409

echo "# graceful restart at ${SECONDS}s"
serve_stop
serve_start || not_ok "graceful restart"
echo "# restarted at ${SECONDS}s"
check_all "after a graceful restart"

# The box still works and new processes are still recorded.
api POST "/v1/sandboxes/$B/exec" -d '{"cmd":["sh","-c","exit 42"],"background":true}'
NP=$(jf 'j["pid"]')
recorded() {
  api GET "/v1/sandboxes/$B/processes/$NP"
  [ "$(jf 'j["state"]')" = exited ]
}
check "a new process's exit is recorded" wait_for 20 recorded
expect_eq "with its exit code" "$(jf 'j["exit_code"]')" 42

api DELETE "/v1/sandboxes/$B"
expect_code "delete the box" 200
check "no process, no cgroup left" wait_for 20 box_gone "$B"
serve_stop
serve_finish
