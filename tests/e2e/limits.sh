#!/bin/bash
# Limits: pids, memory, disk (space and inodes), output, wall time, cpu.
# A tripped limit kills the whole box; running out of disk is an error the
# program sees (ENOSPC), not a kill.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/e2e.bash"
e2e_baseline

# Checks that nothing of the box of the last hrun is left; $1 = description,
# $2 = uid base of that box (optional).
box_gone() {
  check "$1: no cgroup left" [ -z "$(run_cgroups "$HP")" ]
  if [ -n "${2:-}" ]; then
    check "$1: no process left" [ -z "$(procs_in_range "$2")" ]
  fi
}

# ---- pids ------------------------------------------------------------------

hrun run --json --pids 32 --timeout 60 -- sh -c 'cat /proc/self/uid_map; f() { f | f & }; f; sleep 1000'
expect_run "fork bomb --pids 32" 137 pids 9
box_gone "fork bomb" "$(uid_base_of "$OUT")"
check "fork bomb: the host can still fork" sh -c 'for i in 1 2 3 4 5; do /bin/true || exit 1; done'
hrun run -- echo still-fine
expect_eq "fork bomb: the next box works" "$RC/$OUT" "0/still-fine"

# A program that handles fork failures gracefully still loses its box.
hrun run --json --pids 8 --timeout 60 -- sh -c 'for i in 1 2 3 4 5 6 7 8 9 10; do sleep 1000 & done 2>/dev/null; exit 0'
expect_run "pids limit reached, program exits 0 anyway" 137 pids 9

hrun run --json --pids 64 -- sh -c 'for i in $(seq 1 20); do sleep 0.01 & done; wait'
expect_run "under the pids limit: no trip" 0 exited 0

# ---- memory ----------------------------------------------------------------

hrun run --json --memory 64M --timeout 60 -- python3 -c '
a = []
while True:
    a.append(bytearray(1 << 20))'
expect_run "python memory bomb --memory 64M" 137 memory 9
peak=$(json_field memory_peak_bytes)
check "memory bomb: memory_peak_bytes > 32M (it did grow)" [ "${peak:-0}" -gt $((32 << 20)) ]
check "memory bomb: memory_peak_bytes <= 64M (the limit held)" [ "${peak:-0}" -le $((64 << 20)) ]
box_gone "memory bomb"

hrun run --json --memory 64M --timeout 60 -- bash -c 'x=$(head -c 200M /dev/zero | tr "\0" a); echo ${#x}'
expect_run "shell memory bomb (head -c 200M into a variable)" 137 memory 9

# Files in the box live in memory too: they count against --memory.
hrun run --json --memory 64M --disk 512M --timeout 60 -- sh -c 'head -c 200M /dev/zero >/tmp/big; echo wrote=$?'
expect_run "tmpfs file larger than --memory" 137 memory 9

# The OOM victim is a child: the whole box still goes down, the parent does
# not get to carry on (it would otherwise sleep until the 60 s timeout).
# (On a v1 memory controller the kernel kills only the victim and husk kills
# the rest when it notices, so the parent may run for a moment: no assertion
# on what it printed.)
hrun run --json --memory 48M --timeout 60 -- sh -c 'cat /proc/self/uid_map; python3 -c "
a = []
while True:
    a.append(bytearray(1 << 20))"; sleep 1000'
expect_run "OOM of a child kills the whole box" 137 memory 9
box_gone "OOM of a child" "$(uid_base_of "$OUT")"

hrun run --json --memory 64M -- python3 -c 'b = bytearray(16 << 20); print(len(b))'
expect_run "16M allocation under --memory 64M" 0 exited 0

# ---- disk ------------------------------------------------------------------

hrun run --json --disk 16M --memory 256M -- sh -c 'dd if=/dev/zero of=/workspace/fill bs=1M count=64'
expect_run "disk fill --disk 16M: dd fails, box not killed" 1 exited 0
check "disk fill: dd reports ENOSPC" grep -q 'No space left on device' <<<"$ERR"

hrun run --disk 16M --memory 256M -- sh -c 'df -B1 /workspace | awk "NR==2 {print \$2}"'
expect_eq "--disk 16M: /workspace is 16 MiB" "$OUT" $((16 << 20))

hrun run -- sh -c 'df -B1 /workspace | awk "NR==2 {print \$2}"'
expect_eq "default disk: /workspace is 1 GiB" "$OUT" $((1 << 30))

hrun run --disk 16777216 --memory 128M -- sh -c 'df -B1 /tmp | awk "NR==2 {print \$2}"'
expect_eq "--disk in plain bytes (16777216)" "$OUT" 16777216

# /workspace, /tmp and /dev/shm share one filesystem and one --disk budget.
hrun run --disk 16M --memory 256M -- sh -c '
head -c 6M /dev/zero >/workspace/a || exit 10
head -c 6M /dev/zero >/tmp/b || exit 11
head -c 6M /dev/zero >/dev/shm/c 2>/dev/null && exit 12
exit 0'
expect_eq "/workspace + /tmp + /dev/shm share --disk" "$RC" 0

# After ENOSPC the box keeps working: delete and write again.
hrun run --disk 16M --memory 256M -- sh -c '
head -c 20M /dev/zero >/tmp/x 2>/dev/null && exit 10
rm /tmp/x; echo ok >/workspace/y && cat /workspace/y'
expect_eq "space is reusable after ENOSPC" "$RC/$OUT" "0/ok"

hrun run --json --disk 1M --timeout 60 -- python3 -c '
import errno, os
for i in range(100000):
    try:
        open("/workspace/f%d" % i, "w").close()
    except OSError as e:
        print("errno=%d after=%d" % (e.errno, i))
        raise SystemExit(0)
print("created all 100000")'
expect_run "inode exhaustion --disk 1M: program sees an error, not a kill" 0 exited 0
check "inode exhaustion: creating 100k files fails with ENOSPC" grep -q '^errno=28 ' <<<"$OUT"

# ---- output ----------------------------------------------------------------

hrun run --json --output-limit 1M -- yes
expect_run "output flood: yes --output-limit 1M" 137 output 9
expect_eq "output flood: stdout is exactly the limit" "$(wc -c <"$T_SCRATCH/out")" 1048576

hrun run --json --output-limit 1M -- sh -c 'yes >&2'
expect_run "stderr flood --output-limit 1M" 137 output 9
# stderr carries the flood and then the JSON line.
check "stderr flood: no more than 1M of program stderr" [ "$(head -c -$((${#JSON} + 1)) "$T_SCRATCH/err" | wc -c)" -le 1048576 ]

hrun run --json --output-limit 1M -- sh -c 'yes out & yes err >&2'
expect_run "stdout+stderr flood --output-limit 1M" 137 output 9
total=$(($(wc -c <"$T_SCRATCH/out") + $(wc -c <"$T_SCRATCH/err") - ${#JSON} - 1))
check "stdout+stderr flood: together no more than 1M (got $total)" [ "$total" -le 1048576 ]

hrun run --json --output-limit 1M -- head -c 1048576 /dev/zero
expect_run "output exactly at the limit is fine" 0 exited 0
expect_eq "output exactly at the limit: all of it relayed" "$(wc -c <"$T_SCRATCH/out")" 1048576

hrun run --json --output-limit 1M -- head -c 1048577 /dev/zero
expect_run "one byte over the output limit" 137 output 9
expect_eq "one byte over: output cut at the limit" "$(wc -c <"$T_SCRATCH/out")" 1048576

# Default output cap: 16M.
timeout "$E2E_TIMEOUT" "$HUSK" run --json -- head -c 20M /dev/zero 2>"$T_SCRATCH/e16" | wc -c >"$T_SCRATCH/n16"
JSON=$(tail -n 1 "$T_SCRATCH/e16")
expect_eq "default output limit: 16 MiB relayed" "$(cat "$T_SCRATCH/n16")" $((16 << 20))
expect_eq "default output limit: reason output" "$(json_field reason)" output

# A flood from a daemon: the box dies, daemons with it.
hrun run --json --output-limit 64K -- sh -c 'cat /proc/self/uid_map; setsid sh -c "yes" & sleep 1000'
expect_run "output flood from a setsid child" 137 output 9
box_gone "output flood from a setsid child" "$(uid_base_of "$OUT")"

# ---- wall time -------------------------------------------------------------

hrun run --json --timeout 1 -- sh -c 'while :; do :; done'
expect_run "CPU spin past --timeout 1" 124 timeout 9

hrun run --json --timeout 1 -- sh -c "trap '' TERM INT HUP; sleep 1000"
expect_run "trap '' TERM; sleep: still killed at timeout" 124 timeout 9

hrun run --json --timeout 0.5 -- sleep infinity
expect_run "sleep forever, --timeout 0.5" 124 timeout 9

hrun run --json --timeout 1 -- sh -c 'cat /proc/self/uid_map; setsid sleep 1000 & (sleep 1000 &) ; sleep 1000'
expect_run "timeout with daemons" 124 timeout 9
box_gone "timeout with daemons" "$(uid_base_of "$OUT")"

hrun run --json --timeout 30 -- sleep 0.2
expect_run "finishing before the timeout" 0 exited 0

# ---- cpu and the cgroup limits ---------------------------------------------
# No timing assertions: read the limits off the running box's cgroup.

# cg_value PID FILE: FILE of the box of husk PID, from whichever hierarchy has it.
cg_value() {
  local f
  f=$(find /sys/fs/cgroup -maxdepth 5 -path "*/husk/run-$1-*/$2" 2>/dev/null | head -n 1)
  [ -n "$f" ] && cat "$f"
}
# cg_limits PID: "memory pids cpu-quota/period" of a running box.
cg_limits() {
  local mem pids cpu
  mem=$(cg_value "$1" memory.max)
  [ -z "$mem" ] && mem=$(cg_value "$1" memory.limit_in_bytes)
  pids=$(cg_value "$1" pids.max)
  cpu=$(cg_value "$1" cpu.max)
  if [ -n "$cpu" ]; then cpu=${cpu/ //}; else
    cpu="$(cg_value "$1" cpu.cfs_quota_us)/$(cg_value "$1" cpu.cfs_period_us)"
  fi
  echo "$mem $pids $cpu"
}
# running_box_limits ARGS...: starts a box that waits, prints its limits.
running_box_limits() {
  local o="$T_SCRATCH/lim.out"
  rm -f "$o"
  held_start "$o" run "$@" --timeout 30 -- sh -c 'echo up; read x'
  wait_for_output "$o"
  cg_limits "$HELD"
  held_end
}
expect_eq "defaults: 512M memory, 256 pids, 1 cpu" "$(running_box_limits)" "536870912 256 100000/100000"
expect_eq "--memory 100M --pids 50 --cpus 0.5" "$(running_box_limits --memory 100M --pids 50 --cpus 0.5)" "104857600 50 50000/100000"
expect_eq "--cpus 2" "$(running_box_limits --cpus 2)" "536870912 256 200000/100000"

hrun run --json --cpus 0.5 -- sh -c 'i=0; while [ $i -lt 20000 ]; do i=$((i+1)); done; echo $i'
expect_run "--cpus 0.5 runs a CPU-bound program to the end" 0 exited 0
check "cpu_ms is reported for CPU-bound work" [ "$(json_field cpu_ms)" -gt 0 ]

e2e_global_clean "global"
finish
