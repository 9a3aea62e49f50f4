#!/bin/bash
# The daemon's own processes keep their memory to themselves (not dumpable,
# no core file), and a box whose init is a zombie at the next start is
# reported gone, not as a connection error.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"

# RLIMIT_CORE and PR_SET_DUMPABLE are set together (privs_no_dumps, whose
# effect tests/unit/test_privs.c checks; a root process's dumpable flag has
# no reliable observable from outside): core files are allowed here, so a
# daemon process with a core limit of 0 has set both.
no_core() { grep -Eq '^Max core file size +0 +0 ' "/proc/$1/limits"; }
ulimit -S -c "$(ulimit -H -c)"
CORE_ALLOWED=true
[ "$(ulimit -S -c)" = 0 ] && CORE_ALLOWED=false

if ! serve_start; then
  not_ok "the daemon starts"
  serve_finish
  exit 1
fi
SPAWNER=$(pgrep -P "$SPID" | head -n1)
if $CORE_ALLOWED; then
  check "husk serve: RLIMIT_CORE is 0" no_core "$SPID"
  check "its spawner: RLIMIT_CORE is 0" no_core "$SPAWNER"
else
  ok "the hard core limit is 0 here: core limits not checked"
fi

mkfifo "$T_SCRATCH/mcp.in"
"$HUSK" mcp --data "$T_SCRATCH/mcpdata" <"$T_SCRATCH/mcp.in" >/dev/null 2>"$T_SCRATCH/mcp.log" &
MPID=$!
exec 7>"$T_SCRATCH/mcp.in"
mcp_up() { [ "$(readlink "/proc/$MPID/exe")" = "$(readlink -f "$(dirname "$HUSK")/husk-mcp")" ]; }
wait_for 10 mcp_up
# husk-mcp sets the limit first thing in main, a moment after the exec.
$CORE_ALLOWED && check "husk mcp: RLIMIT_CORE is 0" wait_for 10 no_core "$MPID"
exec 7>&-
wait "$MPID" 2>/dev/null

# ---- a zombie init --------------------------------------------------------
new_tenant zombie || not_ok "tenant"
KEY=$TKEY
new_box '{"timeout":600}' || not_ok "box"
INIT=""
for p in $(box_pids "$BOX"); do
  [ "$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null)" = "$SPAWNER" ] && INIT=$p
done
check "the box's init is the spawner's child" [ -n "$INIT" ]
# The spawner, stopped, does not reap it: it stays a zombie with its start
# time, past the daemon's death and into the next start.
kill -STOP "$SPAWNER"
serve_kill9
kill -9 "$INIT"
zombie() { [ "$(sed -n 's/^State:[[:space:]]*\(.\).*/\1/p' "/proc/$INIT/status" 2>/dev/null)" = Z ]; }
check "the init is a zombie" wait_for 10 zombie
serve_start || not_ok "restart"
api GET "/v1/sandboxes/$BOX"
expect_eq "the box is failed" "$(jf 'j["state"]')" failed
check "because its init is gone (got: $(jf 'j.get("reason")'))" grep -q "its init process is gone" <<<"$BODY"
kill -CONT "$SPAWNER"
check "the old spawner ends once it runs again" wait_for 20 not kill -0 "$SPAWNER" 2>/dev/null
check "the box left no process, no cgroup" wait_for 20 box_gone "$BOX"
serve_stop
serve_finish
