#!/bin/bash
# Teardown: when a run ends, however it ends, nothing of the box is left:
# no process (box processes run as host uids >= 1073741824), no cgroup
# (*/husk/run-<husk pid>-*), no mount, no temp dir, no tmpfs memory.
#
# Each box prints its uid map first ("0 BASE 65536"), so its processes can
# be looked for precisely, even with other boxes running on the host.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/e2e.bash"
e2e_baseline

UIDMAP='cat /proc/self/uid_map;'

# nothing_left DESC: the box of the last hrun left nothing behind, checked
# right after husk returned (no waiting: husk must have cleaned up).
nothing_left() {
  local base
  base=$(uid_base_of "$OUT")
  if [ -z "$base" ]; then
    not_ok "$1: could not read the box's uid map (out: $(head -c 200 <<<"$OUT"))"
    return
  fi
  local p
  p=$(procs_in_range "$base")
  if [ -z "$p" ]; then ok "$1: no process left"; else not_ok "$1: processes left: $(tr '\n' ';' <<<"$p")"; fi
  local c
  c=$(run_cgroups "$HP")
  if [ -z "$c" ]; then ok "$1: no cgroup left"; else not_ok "$1: cgroups left: $(tr '\n' ' ' <<<"$c")"; fi
}

# ---- runs that end by themselves ------------------------------------------

hrun run -- sh -c "$UIDMAP"
expect_eq "normal exit: status" "$RC" 0
nothing_left "normal exit"

hrun run -- sh -c "$UIDMAP exit 9"
expect_eq "exit 9: status" "$RC" 9
nothing_left "exit 9"

hrun run -- sh -c "$UIDMAP setsid sleep 1000 & echo started"
expect_eq "daemonized setsid sleep: husk returns with the program's status" "$RC" 0
nothing_left "daemonized setsid sleep 1000 &"

hrun run -- sh -c "$UIDMAP"' setsid sh -c "exec </dev/null >/dev/null 2>&1; trap \"\" HUP TERM INT; sleep 1000" & exit 0'
expect_eq "daemon with closed stdio ignoring HUP/TERM: status" "$RC" 0
nothing_left "daemon with closed stdio ignoring HUP/TERM"

hrun run -- sh -c "$UIDMAP"' (sh -c "sleep 1000 &" &); exit 0'
expect_eq "double fork: status" "$RC" 0
nothing_left "double fork"

hrun run -- python3 -c '
import os, sys, time
print(open("/proc/self/uid_map").read(), end="", flush=True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.closerange(0, 256)
        time.sleep(1000)
    os._exit(0)
os.wait()'
expect_eq "python double fork + setsid + closed fds: status" "$RC" 0
nothing_left "python double fork + setsid + closed fds"

hrun run -- python3 -c '
import threading, time
print(open("/proc/self/uid_map").read(), end="", flush=True)
for _ in range(8):
    threading.Thread(target=time.sleep, args=(1000,), daemon=True).start()'
expect_eq "threads still sleeping at exit: status" "$RC" 0
nothing_left "threads still sleeping at exit"

hrun run -- sh -c "$UIDMAP"' for i in 1 2 3 4 5 6 7 8 9 10; do setsid sleep 1000 & done; exit 4'
expect_eq "ten daemons: status" "$RC" 4
nothing_left "ten daemons"

# ---- runs that husk ends ---------------------------------------------------

hrun run --timeout 0.5 -- sh -c "$UIDMAP"' setsid sleep 1000 & (sleep 1000 &); sleep 1000'
expect_eq "timeout with daemons: status" "$RC" 124
nothing_left "timeout with daemons"

hrun run --timeout 0.5 -- sh -c "$UIDMAP"' kill -STOP $$'
expect_eq "stopped program at timeout: status" "$RC" 124
nothing_left "stopped program at timeout"

hrun run --output-limit 32K -- sh -c "$UIDMAP"' setsid sleep 1000 & yes'
expect_eq "output limit with a daemon: status" "$RC" 137
nothing_left "output limit with a daemon"

hrun run --pids 16 -- sh -c "$UIDMAP"' while :; do setsid sleep 1000 & done 2>/dev/null'
expect_eq "pids limit with daemons: status" "$RC" 137
nothing_left "pids limit with daemons"

hrun run --memory 48M -- sh -c "$UIDMAP"' setsid sleep 1000 & python3 -c "
a = []
while True:
    a.append(bytearray(1 << 20))"'
expect_eq "memory limit with a daemon: status" "$RC" 137
nothing_left "memory limit with a daemon"

hrun run -- no-such-program-e2e
expect_eq "program not found: status" "$RC" 127
check "program not found: no cgroup left" [ -z "$(run_cgroups "$HP")" ]

hrun run --workspace "$T_SCRATCH/nope" -- true
expect_eq "setup error: status" "$RC" 125
check "setup error: no cgroup left" [ -z "$(run_cgroups "$HP")" ]

# ---- husk itself is signalled ------------------------------------------------

# start_box ARGS...: husk run ARGS in the background (pid in BHP), waits
# until the box printed its uid map (base in BASE).
start_box() {
  local o="$T_SCRATCH/bg.out" i
  rm -f "$o"
  "$HUSK" run "$@" >"$o" 2>/dev/null </dev/null &
  BHP=$!
  bg_track "$BHP"; husk_track "$BHP"
  BASE=
  for ((i = 0; i < 300; i++)); do
    BASE=$(uid_base_of "$(cat "$o" 2>/dev/null)")
    [ -n "$BASE" ] && break
    sleep 0.05
  done
}

start_box --timeout 120 -- sh -c "$UIDMAP"' setsid sleep 1000 & (sleep 1000 &); sleep 1000'
if [ -z "$BASE" ]; then
  not_ok "kill -9 husk: box did not start"
else
  check "kill -9 husk: the box is running (sanity)" [ -n "$(procs_in_range "$BASE")" ]
  kill -9 "$BHP"
  wait "$BHP" 2>/dev/null
  # The box dies with husk (PDEATHSIG); allow the kernel time to reap.
  if wait_gone 30 procs_in_range "$BASE"; then ok "kill -9 husk: every box process vanished"; else
    not_ok "kill -9 husk: processes left: $(procs_in_range "$BASE" | tr '\n' ';')"; fi
  # Its empty cgroup is swept by the next run.
  hrun run -- true
  expect_eq "kill -9 husk: the next run works" "$RC" 0
  c=$(run_cgroups "$BHP")
  if [ -z "$c" ]; then ok "kill -9 husk: stale cgroup swept by the next run"; else
    not_ok "kill -9 husk: stale cgroup left after the next run: $(tr '\n' ' ' <<<"$c")"; fi
fi

# kill -9 while the box floods stderr (to /dev/null) and spins.
start_box --timeout 120 --output-limit 64G -- sh -c "$UIDMAP"' for i in 1 2 3 4; do setsid sh -c "while :; do :; done" & done; yes >&2'
if [ -z "$BASE" ]; then
  not_ok "kill -9 busy husk: box did not start"
else
  check "kill -9 busy husk: husk is still running (sanity)" kill -0 "$BHP"
  kill -9 "$BHP"
  wait "$BHP" 2>/dev/null
  if wait_gone 30 procs_in_range "$BASE"; then ok "kill -9 busy husk: every box process vanished"; else
    not_ok "kill -9 busy husk: processes left: $(procs_in_range "$BASE" | tr '\n' ';')"; fi
  hrun run -- true
  check "kill -9 busy husk: stale cgroup swept by the next run" [ -z "$(run_cgroups "$BHP")" ]
fi

# SIGTERM to husk reaches the program; the run ends and is cleaned up.
# (--timeout 20: if the signal is lost, the run still ends, as a failure.)
start_box --timeout 20 -- sh -c "$UIDMAP"' setsid sleep 1000 & sleep 1000'
if [ -z "$BASE" ]; then
  not_ok "SIGTERM husk: box did not start"
else
  kill -TERM "$BHP"
  _watchdog "$BHP" "$E2E_TIMEOUT"
  wait "$BHP"
  rc=$?
  kill "$WD" 2>/dev/null
  wait "$WD" 2>/dev/null
  expect_eq "SIGTERM husk: the program died of SIGTERM" "$rc" 143
  check "SIGTERM husk: no process left" [ -z "$(procs_in_range "$BASE")" ]
  check "SIGTERM husk: no cgroup left" [ -z "$(run_cgroups "$BHP")" ]
fi

# ---- memory of the box's filesystem is returned --------------------------------

shmem_kb() { awk '/^Shmem:/ {print $2}' /proc/meminfo; }
before=$(shmem_kb)
hrun run --memory 512M -- sh -c 'head -c 200M /dev/zero >/workspace/big && head -c 50M /dev/zero >/dev/shm/big && echo written'
expect_eq "250M written into the box's tmpfs" "$OUT" written
after=$(shmem_kb)
check "the box's tmpfs is freed when the run ends (Shmem grew $(( (after - before) / 1024 )) MiB)" \
  [ $((after - before)) -lt $((100 * 1024)) ]

# ---- many runs in a row ----------------------------------------------------------

fails=0
for i in $(seq 1 20); do
  "$HUSK" run -- sh -c 'setsid sleep 1000 & echo x >/workspace/f' </dev/null >/dev/null 2>&1 || fails=$((fails + 1))
done
expect_eq "20 runs in a row all succeed" "$fails" 0

e2e_global_clean "global"
finish
