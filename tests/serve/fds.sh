#!/bin/bash
# Many live boxes: each holds a few fds in the daemon.  Past fd 1023 a
# select()-based server would refuse new connections; the API must keep
# answering new clients with hundreds of boxes alive.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"

N=${SERVE_FDS_BOXES:-170}
# The daemon is started with the usual soft limit of 1024 open files (a
# hard one of 8192 where root may raise it): it raises the soft limit
# itself.
ulimit -Hn 8192 2>/dev/null
ulimit -Sn 1024 2>/dev/null
HARD=$(ulimit -Hn)
if ! serve_start; then
  not_ok "the daemon starts"
  serve_finish
  exit 1
fi
new_tenant many || not_ok "tenant"
KEY=$TKEY
SOFT=$(awk '/^Max open files/ {print $4}' /proc/"$SPID"/limits)
expect_eq "the daemon raised its open-file soft limit to the hard one" "$SOFT" "$HARD"
if [ "$HARD" != unlimited ] && [ "$HARD" -lt $((N * 8 + 64)) ]; then
  # Not this host's fault to test: room for fewer boxes than the test makes.
  N=$(((HARD - 64) / 8))
  echo "# the hard limit of open files is $HARD here: $N boxes"
fi
mk() { # I: create one small box, its id into ids.d/I (a failure's reply goes to stderr)
  local r
  r=$(curl -sS --max-time 60 -w '\n%{http_code}' -X POST -H "Authorization: Bearer $KEY" \
    "$URL/v1/sandboxes" -d '{"memory":"16M","disk":"1M","pids":8,"timeout":600}')
  python3 -c 'import json,sys
body, _, code = sys.argv[1].rpartition("\n")
try: i = json.loads(body).get("id", "")
except ValueError: i = ""
if i: open(sys.argv[2], "w").write(i + "\n")
else: print("# create failed: HTTP %s %s" % (code, body[:300]), file=sys.stderr)' "$r" "$T_SCRATCH/ids.d/$1"
}
export -f mk
export KEY URL T_SCRATCH
# One file per worker: 8 writers sharing one file, even appending, ran
# two ids into one line where Python writes a line in two pieces
# (PYTHONUNBUFFERED), and the test then leaked both boxes.
mkdir -p "$T_SCRATCH/ids.d" "$T_SCRATCH/codes.d"
seq "$N" | xargs -P 8 -I{} bash -c 'mk {}' 2>"$T_SCRATCH/create_errors"
cat "$T_SCRATCH/ids.d"/* >"$T_SCRATCH/ids" 2>/dev/null
made=$(grep -cx 'b_[0-9a-f]*' "$T_SCRATCH/ids")
[ "$made" = "$N" ] || head -n 3 "$T_SCRATCH/create_errors"
expect_eq "$N boxes created" "$made" "$N"
FDS=$(ls /proc/"$SPID"/fd 2>/dev/null | wc -l)
if [ "$N" -ge 170 ]; then
  check "the daemon holds more than 1024 fds ($FDS)" [ "$FDS" -gt 1024 ]
fi
api GET /v1/health
expect_code "a new connection is still served" 200
api POST "/v1/sandboxes/$(head -n1 "$T_SCRATCH/ids")/exec" -d '{"cmd":["echo","ok"]}'
expect_eq "an exec on a new connection works" "$(jf 'j["stdout"]')" ok
del() { # ID: delete one box, its status into codes.d/ID (a failure's reply goes to stderr)
  local r
  r=$(curl -sS --max-time 60 -w '\n%{http_code}' -X DELETE -H "Authorization: Bearer $KEY" "$URL/v1/sandboxes/$1")
  echo "${r##*$'\n'}" >"$T_SCRATCH/codes.d/$1"
  [ "${r##*$'\n'}" = 200 ] || echo "# delete of $1 failed: ${r:0:300}" >&2
}
export -f del
grep -x 'b_[0-9a-f]*' "$T_SCRATCH/ids" | xargs -P 8 -I{} bash -c 'del {}' 2>"$T_SCRATCH/delete_errors"
cat "$T_SCRATCH/codes.d"/* >"$T_SCRATCH/codes" 2>/dev/null
deleted=$(grep -c '^200$' "$T_SCRATCH/codes")
[ "$deleted" = "$made" ] || head -n 3 "$T_SCRATCH/delete_errors"
expect_eq "every box deleted" "$deleted" "$made"
gone() { [ -z "$(live_box_cgroups)" ]; }
wait_for 60 gone || echo "# left: $(live_box_cgroups | head -c 600)"
check "nothing left" gone
serve_stop
serve_finish
