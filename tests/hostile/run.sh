#!/bin/bash
# Hostile test suite: what a malicious program inside a box tries, and what
# the box must answer (the model they check: docs/security.md).
#
# tests/hostile/probe.c is one multi-call binary; `probe NAME` runs one
# attack and prints "PASS NAME: ..." or "FAIL NAME: ...".  This script builds
# it, copies it into a fresh box for every probe (--workspace), prepares the
# host side some probes need (a TCP and an abstract-socket listener on the
# host, canary files, leaked fds, secret environment variables, a SysV shm
# segment), checks the host side of the attacks that target husk itself
# (export copy, leftovers), and prints one TAP line per probe.
#
#   HUSK=build/husk bash tests/hostile/run.sh
# shellcheck disable=SC2034 # read by lib.sh
SUITE=hostile
# shellcheck source=../lib.sh
. "$(dirname "$0")/../lib.sh"
cd "$(dirname "$0")/../.." || exit 1
t_start=$(date +%s%N)

ws=$T_SCRATCH/ws-hostsecret # the name must not leak into the box (proc1_cmdline)
mkdir -p "$ws"

# ---- host-side setup ----------------------------------------------------

planted=()
lpid=
shm_id=
msq_id=
cleanup() {
  [ -n "$lpid" ] && kill "$lpid" 2>/dev/null && wait "$lpid" 2>/dev/null
  [ ${#planted[@]} -gt 0 ] && rm -f "${planted[@]}"
  [ -n "$shm_id" ] && ipcrm -m "$shm_id" 2>/dev/null
  [ -n "$msq_id" ] && ipcrm -q "$msq_id" 2>/dev/null
  rm -rf "$T_SCRATCH"
}
on_exit cleanup

# Secrets in husk's own environment: the box must not see them.
export AWS_SECRET_ACCESS_KEY=husk-canary-aws-secret GITHUB_TOKEN=husk-canary-gh-token \
  OPENAI_API_KEY=husk-canary-openai SSH_AUTH_SOCK=/tmp/husk-canary-agent.sock

# Canary files where a leaky box would show host files.
for f in /root/.husk-hostile-canary /tmp/husk-hostile-canary /dev/shm/husk-hostile-canary; do
  if [ ! -e "$f" ] && echo "husk-canary" >"$f" 2>/dev/null; then planted+=("$f"); fi
done
canary=$T_SCRATCH/husk-canary-fd
echo "husk-canary" >"$canary"

# The probe, built statically (dynamically if the static libc is missing:
# /usr is visible in the box).
if ! gcc -static -O1 -Wall -Wextra -o "$ws/probe" tests/hostile/probe.c 2>"$T_SCRATCH/cc.log"; then
  sed 's/^/# /' "$T_SCRATCH/cc.log"
  echo "# static build failed; building dynamically"
  if ! gcc -O1 -Wall -Wextra -o "$ws/probe" tests/hostile/probe.c 2>"$T_SCRATCH/cc.log"; then
    sed 's/^/# /' "$T_SCRATCH/cc.log"
    not_ok "build tests/hostile/probe.c"
    finish
    exit 1
  fi
fi
[ -s "$T_SCRATCH/cc.log" ] && sed 's/^/# cc: /' "$T_SCRATCH/cc.log"

# A TCP listener on the host's 127.0.0.1 and an abstract unix socket in the
# host's network namespace; both log any connection they accept.
abstract=husk-hostile-$$
portfile=$T_SCRATCH/port
conlog=$T_SCRATCH/connections
: >"$conlog"
cat >"$T_SCRATCH/listen.py" <<'EOF'
import os, select, socket, sys
portfile, logfile, name = sys.argv[1:4]
t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
t.bind(("127.0.0.1", 0))
t.listen(16)
u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
u.bind("\0" + name)
u.listen(16)
with open(portfile + ".tmp", "w") as f:
    f.write(str(t.getsockname()[1]))
os.rename(portfile + ".tmp", portfile)
while True:
    r, _, _ = select.select([t, u], [], [])
    for s in r:
        c, _ = s.accept()
        with open(logfile, "a") as f:
            f.write("connection on %s\n" % ("tcp" if s is t else "abstract"))
        c.close()
EOF
py=$(command -v /usr/bin/python3 || command -v python3)
"$py" "$T_SCRATCH/listen.py" "$portfile" "$conlog" "$abstract" &
lpid=$!
for _ in $(seq 100); do [ -s "$portfile" ] && break; sleep 0.05; done
port=$(cat "$portfile" 2>/dev/null)
# The listeners work from the host (so "refused" in the box means something).
"$py" - "$port" "$abstract" <<'EOF'
import socket, sys
socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=5).close()
u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
u.connect("\0" + sys.argv[2])
u.close()
EOF
for _ in $(seq 100); do [ "$(wc -l <"$conlog")" -ge 2 ] && break; sleep 0.05; done
if [ -z "$port" ] || [ "$(wc -l <"$conlog")" -lt 2 ]; then
  echo "# host listener self-test failed (port '${port}')"
fi
: >"$conlog"

# A SysV shm segment and message queue on the host (the box has its own IPC ns).
shm_id=$(ipcmk -M 4096 2>/dev/null | awk '{print $NF}')
msq_id=$(ipcmk -Q 2>/dev/null | awk '{print $NF}')
shm_key=$(awk -v id="$shm_id" '$2 == id {print $1}' /proc/sysvipc/shm 2>/dev/null)

host_env=(--env "HOST_PORT=$port" --env "HOST_ABSTRACT=$abstract" --env "HOST_PID=$lpid"
  --env "HOST_SHM_KEY=${shm_key:-0}")

# ---- running probes -------------------------------------------------------

# run_probe NAME [HUSK OPTIONS...]: NAME in a fresh box, with fd 8 (a host
# directory) and fd 9 (a host canary file) leaked into husk on purpose.
# HOSTILE_RUN_ARGS (words) are added to every probe's husk run: the whole
# suite against a box of a template ("--template NAME --data DIR").
read -r -a run_extra <<<"${HOSTILE_RUN_ARGS:-}"
run_probe() {
  local name=$1
  shift
  run_husk run --timeout 30 "${run_extra[@]}" "$@" --workspace "$ws" -- /workspace/probe "$name" \
    8<"$T_SCRATCH" 9<"$canary"
}

# verdict NAME [LABEL]: one TAP line from the probe's output in $OUT.
verdict() {
  local name=$1 label=${2:-$1} line
  line=$(grep -m1 -E "^(PASS|FAIL) $name:" <<<"$OUT")
  if [ "$RC" -eq 0 ] && [[ $line == "PASS $name:"* ]]; then
    local d=${line#PASS "$name": }
    [ ${#d} -gt 110 ] && d="${d:0:107}..."
    ok "$label ($d)"
  elif [ -n "$line" ]; then
    not_ok "$label: ${line#FAIL "$name": }"
  else
    not_ok "$label: no verdict (husk exit $RC): $(tail -n 2 <<<"$ERR" | tr '\n' ' ')"
  fi
}

# A wrapper running husk with raised inherited limits, as a careless caller
# (a daemon started with LimitRTPRIO= or OOMScoreAdjust=-1000) might.
wrap=$T_SCRATCH/husk-wrapped
cat >"$wrap" <<EOF
#!/bin/sh
exec choom -n -1000 -- prlimit --rtprio=99:99 --nice=40:40 -- "$HUSK" "\$@"
EOF
chmod +x "$wrap"

# The export destination, pre-planted with symlinks out of it.
exp=$T_SCRATCH/export
outside=$T_SCRATCH/outside
mkdir -p "$exp" "$outside/dir"
echo ORIGINAL >"$outside/target"
ln -s "$outside/target" "$exp/victim"
ln -s "$outside/dir" "$exp/vdir"

export_checks() {
  # Symlinks in the workspace are copied as symlinks, never followed.
  if [ -L "$exp/shadow" ] && [ "$(readlink "$exp/shadow")" = /etc/shadow ] && [ -L "$exp/escape" ]; then
    ok "export_symlinks_not_followed (shadow and ../.. links exported as links)"
  else
    not_ok "export_symlinks_not_followed: $(ls -la "$exp" | tr '\n' ' ')"
  fi
  # Symlinks pre-planted in the destination are replaced, never written through.
  if [ "$(cat "$outside/target")" = ORIGINAL ] && [ -z "$(ls -A "$outside/dir")" ] &&
    [ "$(cat "$exp/victim" 2>/dev/null)" = PWNED ]; then
    ok "export_preplanted_symlinks (outside target untouched)"
  else
    not_ok "export_preplanted_symlinks: target='$(cat "$outside/target")' dir='$(ls -A "$outside/dir")'"
  fi
  # A FIFO and a socket are skipped: the copy neither hangs nor recreates them.
  if [ "$RC" -eq 0 ] && [ ! -p "$exp/fifo" ] && [ ! -S "$exp/sock" ]; then
    ok "export_special_files_skipped (fifo, socket)"
  else
    not_ok "export_special_files_skipped: rc=$RC $(ls -la "$exp" | tr '\n' ' ')"
  fi
  # A 1 GiB sparse file stays sparse on the host.
  local size blocks
  size=$(stat -c %s "$exp/sparse" 2>/dev/null || echo 0)
  blocks=$(stat -c %b "$exp/sparse" 2>/dev/null || echo 0)
  if [ "$size" -eq $((1 << 30)) ] && [ "$blocks" -lt 2048 ]; then
    ok "export_sparse (1 GiB file uses $blocks blocks on the host)"
  else
    not_ok "export_sparse: size $size, $blocks blocks"
  fi
  # Directory nesting beyond the copy's depth limit is cut, not recursed into.
  local depth
  depth=$(find "$exp/deep" -type d 2>/dev/null | awk -F/ '{print NF}' | sort -n | tail -n1)
  depth=$((${depth:-0} - $(awk -F/ '{print NF}' <<<"$exp/deep")))
  if [ "$depth" -gt 0 ] && [ "$depth" -lt 300 ]; then
    ok "export_depth_capped (300-deep chain exported $depth deep)"
  else
    not_ok "export_depth_capped: exported depth $depth"
  fi
  # Terminal escapes and newlines in a file name never reach the host's stderr raw.
  if grep -q $'\x1b' <<<"$ERR" || grep -q '^FAKE husk' <<<"$ERR"; then
    not_ok "export_log_escapes: raw escape or injected line on husk's stderr"
  elif ! grep -q 'skipped `esc' <<<"$ERR"; then
    not_ok "export_log_escapes: no warning names the escape-laden FIFO (nothing to check)"
  else
    ok "export_log_escapes (names sanitized in warnings)"
  fi
}

# The host's own use of the shared root while a box watches it: reads and
# runs programs in /usr/bin, reads /usr/lib and the CA certificates, and
# creates and removes a file of its own in /usr/lib.
host_uses_root() {
  local f=/usr/lib/.husk-inotify-$$
  /usr/bin/env true
  cat /usr/bin/env /etc/ssl/certs/ca-certificates.crt >/dev/null 2>&1
  ls /usr/bin /usr/lib / /etc >/dev/null
  : >"$f" && rm -f "$f"
  echo x >/dev/null
  head -c1 /dev/urandom >/dev/null
  head -c1 /dev/zero >/dev/null
}

# inotify_isolated: box A watches the root it shares with the host (and, in
# husk run, its /usr and /etc entries) and its devices while box B and the
# host use them;
# A's stdin ends once they are done.
inotify_case() {
  local fifo=$T_SCRATCH/inotify.in out=$T_SCRATCH/inotify.out apid
  rm -f "$fifo" && mkfifo "$fifo"
  "$HUSK" run "${run_extra[@]}" --timeout 60 --workspace "$ws" -- /workspace/probe inotify_isolated \
    <"$fifo" >"$out" 2>"$T_SCRATCH/inotify.err" &
  apid=$!
  exec 7>"$fifo"
  for _ in $(seq 600); do
    grep -q '^READY inotify' "$out" && break
    kill -0 "$apid" 2>/dev/null || break
    sleep 0.05
  done
  "$HUSK" run "${run_extra[@]}" --timeout 30 -- sh -c 'env true; ls /usr/bin /usr/lib /etc / >/dev/null;
    cat /etc/passwd /usr/bin/env /etc/ssl/certs/ca-certificates.crt >/dev/null 2>&1;
    echo x >/dev/null; head -c1 /dev/urandom >/dev/null; head -c1 /dev/zero >/dev/full; true' \
    </dev/null >/dev/null 2>&1
  host_uses_root
  exec 7>&-
  wait "$apid"
  RC=$?
  OUT=$(cat "$out")
  ERR=$(cat "$T_SCRATCH/inotify.err")
  verdict inotify_isolated "inotify_isolated (husk run; another box and the host use /usr, /etc and /dev/null)"
}

# HOSTILE_SKIP (probe names) and HOSTILE_SKIP_WHY: probes that check a
# property the boxes under test do not have by design (a template box's
# root is its own writable layer over its image), reported as skipped with
# the reason.
for name in $("$ws/probe" --list); do
  if [[ " ${HOSTILE_SKIP:-} " == *" $name "* ]]; then
    ok "$name # SKIP ${HOSTILE_SKIP_WHY:-not applicable}"
    continue
  fi
  case $name in
  pid_visibility | net_host_loopback | net_bind_host_port | net_host_abstract | proc_net_isolated | sysv_ipc)
    run_probe "$name" "${host_env[@]}"
    verdict "$name"
    ;;
  fork_bomb)
    # fork must fail with EAGAIN at pids.max; husk may also end the box for
    # tripping its pids limit (exit 137, reason "pids").
    run_probe "$name" --pids 16 --json
    if [ "$RC" -eq 137 ] && [ "$(json_field reason)" = pids ] && ! grep -q "^FAIL $name:" <<<"$OUT"; then
      ok "fork_bomb (--pids 16) ($(grep -m1 "^PASS $name:" <<<"$OUT" | cut -d: -f2- | sed "s/^ //"); box ended, reason pids)"
    else
      verdict "$name" "fork_bomb (--pids 16)"
    fi
    ;;
  disk_fill)
    run_probe "$name" --disk 4M
    verdict "$name" "disk_fill (--disk 4M)"
    ;;
  inode_fill)
    run_probe "$name" --disk 1M
    verdict "$name" "inode_fill (--disk 1M)"
    ;;
  mem_bomb)
    # Either the allocating child dies (PASS line) or memory.oom.group takes
    # the whole box down: husk then reports SIGKILL (137).
    run_probe "$name" --memory 32M --json
    if grep -q "^PASS $name:" <<<"$OUT" && [ "$RC" -eq 0 ]; then
      verdict "$name" "mem_bomb (--memory 32M)"
    elif [ "$RC" -eq 137 ]; then
      ok "mem_bomb (--memory 32M) (box OOM-killed, exit 137, reason $(json_field reason))"
    else
      verdict "$name" "mem_bomb (--memory 32M)"
    fi
    ;;
  sleep_forever)
    run_probe "$name" --timeout 1 --json
    if [ "$RC" -eq 124 ]; then
      ok "sleep_forever (--timeout 1, TERM ignored: killed, exit 124)"
    else
      not_ok "sleep_forever: husk exit $RC, want 124"
    fi
    ;;
  daemonize)
    run_probe "$name" --env "HOST_TAG=$$"
    verdict "$name"
    if pgrep -x "hdaemon-$$" >/dev/null; then
      not_ok "daemonize_gone: the box's daemon survived it: $(pgrep -a -x "hdaemon-$$")"
      for p in $(pgrep -x "hdaemon-$$"); do kill -KILL "$p"; done
    else
      ok "daemonize_gone (no daemon left on the host after husk returned)"
    fi
    ;;
  rt_sched | oom_score_adj)
    run_probe "$name"
    verdict "$name"
    # Again with husk started by a caller holding raised limits: the box must
    # not inherit them.  Needs CAP_SYS_RESOURCE on the host to set up.
    label="$name (caller with RLIMIT_RTPRIO=99, RLIMIT_NICE=40, oom_score_adj=-1000)"
    if choom -n -1000 -- prlimit --rtprio=99:99 --nice=40:40 -- true 2>/dev/null; then
      HUSK=$wrap run_probe "$name"
      verdict "$name" "$label"
    else
      ok "$label # SKIP this host cannot raise those limits (no CAP_SYS_RESOURCE)"
    fi
    ;;
  inotify_isolated)
    inotify_case
    ;;
  export_plant)
    run_probe "$name" --export "$exp" --disk 16M
    verdict "$name"
    export_checks
    ;;
  *)
    run_probe "$name"
    verdict "$name"
    ;;
  esac
done

# ---- host-side checks after all probes --------------------------------------

# The supervisor is SIGKILLed while its box runs a program that ignores
# signals: the box (init, program) must die with it.
# (The extra argument, never reached, makes the command line ours alone.)
"$HUSK" run "${run_extra[@]}" --timeout 60 --workspace "$ws" -- /workspace/probe sleep_forever "tag-$$" \
  >/dev/null 2>&1 </dev/null &
hpid=$!
disown "$hpid" # no "Killed" notice from the shell
boxpat="^/workspace/probe sleep_forever tag-$$\$"
for _ in $(seq 200); do pgrep -f "$boxpat" >/dev/null && break; sleep 0.05; done
started=$(pgrep -f "$boxpat" | wc -l)
kill -KILL "$hpid"
# Unanchored: husk itself, the box's init (a clone of husk, same command
# line) and the program must all be gone.
anypat="/workspace/probe sleep_forever tag-$$\$"
for _ in $(seq 200); do pgrep -f "$anypat" >/dev/null || break; sleep 0.05; done
if [ "$started" -eq 0 ]; then
  not_ok "supervisor_killed: the box's program never started"
elif pgrep -f "$anypat" >/dev/null; then
  not_ok "supervisor_killed: box processes survived husk's SIGKILL: $(pgrep -a -f "$anypat" | tr '\n' ' ')"
  for p in $(pgrep -f "$anypat"); do kill -KILL "$p"; done
else
  ok "supervisor_killed (husk SIGKILLed: the box's init and program died with it)"
fi

if [ -s "$conlog" ]; then
  not_ok "host_listeners_untouched: $(tr '\n' ' ' <"$conlog")"
else
  ok "host_listeners_untouched (no box reached the host's TCP or abstract listener)"
fi
if kill -0 "$lpid" 2>/dev/null; then
  ok "host_process_alive (the host pid the boxes were given is still running)"
else
  not_ok "host_process_alive: host listener $lpid is gone"
fi
left=$(leftover_procs | awk -v d="hdaemon-$$" '$3 == "probe" || $3 == d')
if [ -z "$left" ]; then
  ok "no_leftover_processes (no probe process outlived its box)"
else
  not_ok "no_leftover_processes: $(tr '\n' ' ' <<<"$left")"
fi
echo "# hostile suite took $(( ($(date +%s%N) - t_start) / 1000000 )) ms"
finish
