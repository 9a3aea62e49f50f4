# Helpers shared by the `husk serve` suites (sourced after tests/lib.sh).
# Not a suite itself.
#
#   serve_start [ARGS...]   start the daemon on a free loopback port with
#                           --data $DATA (default $T_SCRATCH/data) and
#                           HUSK_ADMIN_KEY=$ADMIN; sets URL and SPID
#   serve_stop              SIGTERM and wait (graceful stop)
#   serve_kill9             SIGKILL and wait
#   api METHOD PATH [CURL ARGS...]
#                           one request with the key in $KEY (none if
#                           empty); sets CODE (HTTP status) and BODY
#   jf EXPR                 a value from $BODY: EXPR is Python on `j`
#                           (e.g. jf 'j["id"]'); None prints as ""
#   new_tenant NAME         admin: a tenant and a key; sets TID and TKEY
#   expect_code DESC WANT   compare $CODE
#   live_box_cgroups        cgroup directories of long-lived boxes
#   box_procs               processes in the husk uid range

SERVE_ADMIN=${SERVE_ADMIN:-adm_$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')}
ADMIN=$SERVE_ADMIN
DATA=${DATA:-$T_SCRATCH/data}
KEY=""
URL=""
SPID=""
SERVE_LOG="$T_SCRATCH/serve.log"

# not CMD...: succeeds when CMD fails (for `check`).
not() { ! "$@"; }

serve_cleanup() {
  # Boxes a failed test left behind: delete them (boxes outlive the daemon).
  if [ -n "$SPID" ] && [ -f "$T_SCRATCH/boxes" ]; then
    local b k
    while read -r b k; do
      curl -s -o /dev/null --max-time 10 -X DELETE -H "Authorization: Bearer $k" "$URL/v1/sandboxes/$b"
    done <"$T_SCRATCH/boxes"
  fi
  if [ -n "$SPID" ] && kill -0 "$SPID" 2>/dev/null; then
    kill -TERM "$SPID" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$SPID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$SPID" 2>/dev/null
  fi
  rm -rf "$T_SCRATCH"
}
on_exit serve_cleanup

serve_start() {
  touch "$SERVE_LOG"
  local from=$(($(wc -l <"$SERVE_LOG") + 1))
  HUSK_ADMIN_KEY=$ADMIN "$HUSK" serve --listen 127.0.0.1:0 --data "$DATA" "$@" \
    2>>"$SERVE_LOG" </dev/null &
  SPID=$!
  local port=""
  for _ in $(seq 300); do
    port=$(tail -n +"$from" "$SERVE_LOG" | sed -n 's|^husk: listening on http://127.0.0.1:\([0-9]*\)$|\1|p' | tail -n1)
    [ -n "$port" ] && break
    kill -0 "$SPID" 2>/dev/null || break
    sleep 0.05
  done
  if [ -z "$port" ]; then
    echo "# serve did not start:" >&2
    tail -n +"$from" "$SERVE_LOG" | sed 's/^/#   /' >&2
    return 1
  fi
  URL="http://127.0.0.1:$port"
  return 0
}

serve_stop() {
  [ -n "$SPID" ] || return 0
  kill -TERM "$SPID" 2>/dev/null
  wait "$SPID" 2>/dev/null
  SERVE_RC=$?
  SPID=""
}

serve_kill9() {
  [ -n "$SPID" ] || return 0
  kill -9 "$SPID" 2>/dev/null
  wait "$SPID" 2>/dev/null
  SPID=""
}

api() {
  local method=$1 path=$2; shift 2
  local auth=()
  [ -n "$KEY" ] && auth=(-H "Authorization: Bearer $KEY")
  CODE=$(curl -sS -o "$T_SCRATCH/body" -w '%{http_code}' --max-time "${API_TIMEOUT:-60}" \
    -X "$method" "${auth[@]}" "$@" "$URL$path" 2>"$T_SCRATCH/curl.err")
  BODY=$(tr -d '\0' <"$T_SCRATCH/body" 2>/dev/null)
}

# jf EXPR: evaluate a Python expression on the JSON in $BODY (as j).
jf() {
  python3 -c '
import json, sys
try:
    j = json.loads(sys.argv[1])
    v = eval(sys.argv[2])
except Exception:
    v = None
if v is None: print("")
elif isinstance(v, bool): print("true" if v else "false")
elif isinstance(v, (dict, list)): print(json.dumps(v))
else: print(v)' "$BODY" "$1"
}

expect_code() { # DESC WANT
  if [ "$CODE" = "$2" ]; then ok "$1"; else not_ok "$1 (got $CODE, want $2: $(head -c 300 <<<"$BODY"))"; fi
}

new_tenant() { # NAME [QUOTA JSON FIELDS]
  local save=$KEY
  KEY=$ADMIN
  api POST /v1/tenants -d "{\"name\":\"$1\"${2:+,$2}}"
  TID=$(jf 'j["id"]')
  api POST "/v1/tenants/$TID/keys"
  TKEY=$(jf 'j["key"]')
  KEY=$save
  [ -n "$TID" ] && [ -n "$TKEY" ]
}

# The daemon names its boxes' cgroups box-<FNV-1a of the data dir>-<id>,
# so that daemons on other data directories never touch each other's.
cg_prefix() {
  python3 -c '
import os, sys
h = 2166136261
for c in os.path.realpath(sys.argv[1]).encode():
    h = ((h ^ c) * 16777619) & 0xffffffff
print("box-%08x-" % h)' "$DATA"
}
# Cgroups of this suite's daemon (one per hierarchy: counted in the v2 or
# pids tree only).
live_box_cgroups() {
  local p
  p=$(cg_prefix)
  { find /sys/fs/cgroup/unified -maxdepth 3 -type d -name "$p*" -path '*husk*' 2>/dev/null ||
    find /sys/fs/cgroup -maxdepth 3 -type d -name "$p*" -path '*husk*' 2>/dev/null; } | sort -u
}

box_procs() {
  ps -e -o uid=,pid=,comm= 2>/dev/null | awk '$1 >= 1073741824 {print}'
}

# wait_for SECS CMD...: poll until CMD succeeds (0) or SECS pass (1).
wait_for() {
  local secs=$1; shift
  local end=$((SECONDS + secs))
  while [ $SECONDS -lt $end ]; do
    "$@" && return 0
    sleep 0.1
  done
  "$@"
}

# The daemon answers health.
healthy() {
  [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$URL/v1/health")" = 200 ]
}

# Host-side traces of one box: its cgroup directories, its processes.
box_cgroups() { find /sys/fs/cgroup -maxdepth 5 -type d -name "box-*-$1" 2>/dev/null; }
box_pids() { grep -l "box-[0-9a-f]*-$1" /proc/[0-9]*/cgroup 2>/dev/null | cut -d/ -f3; }
box_gone() { [ -z "$(box_cgroups "$1")" ] && [ -z "$(box_pids "$1")" ]; }
# Processes of the box whose command line contains TEXT (host view).
box_procs_matching() { # BOX TEXT
  local p
  for p in $(box_pids "$1"); do
    tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -qF -- "$2" && echo "$p"
  done
}
no_box_procs_matching() { [ -z "$(box_procs_matching "$1" "$2")" ]; }
dir_empty() { [ -z "$(ls -A "$1" 2>/dev/null)" ]; }
has_box_proc() { [ -n "$(box_procs_matching "$1" "$2")" ]; }

# On failure, show the end of the daemon's log.
serve_finish() {
  if [ "$T_FAIL" -gt 0 ] && [ -f "$SERVE_LOG" ]; then
    echo "# last lines of the daemon's log:"
    tail -n 40 "$SERVE_LOG" | sed 's/^/#   /'
  fi
  finish
}

# A box for the current $KEY; sets BOX.  ARGS: JSON body (default {}).
new_box() {
  local body='{}'
  [ $# -gt 0 ] && body=$1
  api POST /v1/sandboxes -d "$body"
  BOX=$(jf 'j["id"]')
  [ -n "$BOX" ] && echo "$BOX $KEY" >>"$T_SCRATCH/boxes"
  [ "$CODE" = 201 ] && [ -n "$BOX" ]
}

# reap_boxes KEY...: delete every running box of these tenants (boxes outlive
# the daemon: a failed check must not leave any); prints how many there were.
reap_boxes() {
  local k b n=0 save=$KEY
  for k in "$@"; do
    KEY=$k
    api GET "/v1/sandboxes?state=running&limit=1000"
    for b in $(jf '" ".join(x["id"] for x in j["sandboxes"])'); do
      api DELETE "/v1/sandboxes/$b"
      n=$((n + 1))
    done
  done
  KEY=$save
  echo "$n"
}
