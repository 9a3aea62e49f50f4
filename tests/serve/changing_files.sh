#!/bin/bash
# Box files that change while the daemon streams them: a download (whole
# and with Range), a process's output (snapshot and followed) and a tar
# download whose file the box truncates or extends mid-transfer.  Every
# response ends (short, or with its promised length), no daemon thread is
# left spinning on the file, and the daemon still answers.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"

if ! serve_start; then
  not_ok "the daemon starts"
  serve_finish
  exit 1
fi
new_tenant changing || not_ok "tenant"
KEY=$TKEY
new_box '{"disk":"1G","memory":"1G","timeout":900}' || not_ok "a box"
S=/v1/sandboxes/$BOX
SIZE=200000000

boxsh() { # run a shell command in the box
  api POST "$S/exec" -d "$(python3 -c 'import json,sys; print(json.dumps({"cmd":["sh","-c",sys.argv[1]],"timeout":120}))' "$1")"
}
# CPU time (clock ticks) used so far by all the daemon's threads.
ticks() {
  cat /proc/"$SPID"/task/*/stat 2>/dev/null | sed 's/^.*) //' | awk '{s += $12 + $13} END {print s + 0}'
}
# The daemon's threads use less than 0.4 s of CPU over 4 s of idleness: no
# thread spins on a file.  (A spinning thread burns ~4 s of it.)
no_spin() {
  local a b
  a=$(ticks)
  sleep 4
  b=$(ticks)
  echo "# daemon CPU over 4 s: $((b - a)) ticks"
  [ $((b - a)) -lt 40 ]
}
file_size() { stat -c %s "$1" 2>/dev/null || echo 0; }
has_bytes() { [ "$(file_size "$1")" -gt 0 ]; }
gone() { ! kill -0 "$1" 2>/dev/null; }
# slow_get NAME PATH [CURL ARGS...]: start a download read at 2 MB/s in the
# background; sets CP (curl's pid); the body goes to $T_SCRATCH/NAME.
slow_get() {
  local name=$1 path=$2
  shift 2
  rm -f "$T_SCRATCH/$name"
  curl -sS --limit-rate 2M --max-time 120 -o "$T_SCRATCH/$name" -H "Authorization: Bearer $TKEY" \
    "$@" "$URL$path" 2>"$T_SCRATCH/$name.err" &
  CP=$!
}
# ended DESC: the download in $CP ends by itself; else it is stopped.
# curl's exit status goes to $T_SCRATCH/NAME.rc.
ended() { # DESC NAME
  if wait_for 40 gone "$CP"; then
    wait "$CP"
    echo $? >"$T_SCRATCH/$2.rc"
    ok "$1: the response ended (curl rc $(cat "$T_SCRATCH/$2.rc"), $(file_size "$T_SCRATCH/$2") bytes)"
  else
    not_ok "$1: the response did not end"
    kill "$CP" 2>/dev/null
    wait "$CP" 2>/dev/null
    echo 124 >"$T_SCRATCH/$2.rc"
  fi
}

SMALL=20000000 # read in 10 s
boxsh "head -c $SIZE /dev/zero > /workspace/big && mkdir -p /workspace/t && head -c $SMALL /dev/zero > /workspace/t/big && echo ok"
expect_eq "files of 200 and 20 MB in the box" "$(jf 'j["stdout"].strip()')" ok

# 1. A download whose file is truncated to nothing mid-way.
slow_get dl1 "$S/files?path=/workspace/big"
wait_for 20 has_bytes "$T_SCRATCH/dl1"
boxsh "truncate -s 0 /workspace/big"
ended "download, file truncated" dl1
check "download, file truncated: the body is short" [ "$(file_size "$T_SCRATCH/dl1")" -lt $SIZE ]
check "download, file truncated: curl saw an incomplete body" [ "$(cat "$T_SCRATCH/dl1.rc" 2>/dev/null)" != 0 ]
check "download, file truncated: no daemon thread spins" no_spin
check "download, file truncated: the daemon answers" healthy

# 2. The same with a Range request, and a file cut to 1 MB.
boxsh "head -c $SIZE /dev/zero > /workspace/big"
slow_get dl2 "$S/files?path=/workspace/big" -H "Range: bytes=1000-"
wait_for 20 has_bytes "$T_SCRATCH/dl2"
boxsh "truncate -s 1000000 /workspace/big"
ended "range download, file cut to 1 MB" dl2
check "range download, file cut: the body is short" [ "$(file_size "$T_SCRATCH/dl2")" -lt $((SIZE - 1000)) ]
check "range download, file cut: no daemon thread spins" no_spin

# 3. A file that grows during the download: the response has the length it
# announced, complete.
boxsh "head -c $SMALL /dev/zero > /workspace/big"
slow_get dl3 "$S/files?path=/workspace/big"
wait_for 20 has_bytes "$T_SCRATCH/dl3"
boxsh "head -c 10000000 /dev/zero >> /workspace/big"
ended "download, file grown" dl3
expect_eq "download, file grown: the announced length, complete" \
  "$(file_size "$T_SCRATCH/dl3") $(cat "$T_SCRATCH/dl3.rc" 2>/dev/null)" "$SMALL 0"
check "download, file grown: no daemon thread spins" no_spin
boxsh "rm -f /workspace/big"

# 4. A background process's output, read as a snapshot, while the process
# truncates its own stdout (it holds the file open for writing).
PROG='import os, time
os.write(1, bytes(int(os.environ["N"])))
while not os.path.exists(os.environ["GO"]):
    time.sleep(0.05)
os.ftruncate(1, 0)
time.sleep(600)'
bg() { # N GO: start the program; sets PID
  api POST "$S/exec" -d "$(python3 -c 'import json,sys; print(json.dumps({"cmd":["python3","-c",sys.argv[1]],"env":{"N":sys.argv[2],"GO":sys.argv[3]},"background":True}))' "$PROG" "$1" "$2")"
  PID=$(jf 'j["pid"]')
}
output_at() { # PID N: the process has written N bytes
  curl -s -o /dev/null -D "$T_SCRATCH/hdr" -H "Authorization: Bearer $TKEY" \
    "$URL$S/processes/$1/output?offset=$2"
  grep -qi "^x-husk-next-offset: $2" "$T_SCRATCH/hdr"
}
bg 100000000 /workspace/go4
expect_code "a background process writing 100 MB" 201
check "its output is written" wait_for 60 output_at "$PID" 100000000
slow_get out4 "$S/processes/$PID/output"
wait_for 20 has_bytes "$T_SCRATCH/out4"
boxsh "touch /workspace/go4"
ended "process output, truncated by the process" out4
check "process output, truncated: the body is short" [ "$(file_size "$T_SCRATCH/out4")" -lt 100000000 ]
check "process output, truncated: no daemon thread spins" no_spin
api DELETE "$S/processes/$PID"

# 5. The same output followed live: the stream ends with an error event
# once the output shrank below what was sent.
bg 1000000 /workspace/go5
check "a second background process" [ "$CODE" = 201 ]
check "its output is written" wait_for 60 output_at "$PID" 1000000
rm -f "$T_SCRATCH/f5"
curl -sS -N --max-time 60 -H "Authorization: Bearer $TKEY" \
  "$URL$S/processes/$PID/output?follow=1&format=ndjson" >"$T_SCRATCH/f5" 2>/dev/null &
CP=$!
got_all() { grep -q '"offset":1000000' "$T_SCRATCH/f5"; }
check "follow: the whole output arrives" wait_for 30 got_all
boxsh "touch /workspace/go5"
ended "follow, output truncated" f5
expect_eq "follow, output truncated: ends with an error event" \
  "$(tail -n 1 "$T_SCRATCH/f5" | python3 -c 'import json,sys; print(json.loads(sys.stdin.read())["type"])' 2>/dev/null)" error
check "follow: no daemon thread spins" no_spin
api DELETE "$S/processes/$PID"

# 6. A tar download whose file shrinks: the archive stays well-formed (the
# promised bytes are zeros) and ends.
slow_get t6 "$S/files/tar?path=/workspace/t"
wait_for 20 has_bytes "$T_SCRATCH/t6"
boxsh "truncate -s 0 /workspace/t/big"
ended "tar download, file truncated" t6
check "tar download, file truncated: a complete archive" tar -tf "$T_SCRATCH/t6" -O &>/dev/null
check "tar download: no daemon thread spins" no_spin
check "the daemon answers" healthy

api DELETE "$S"
check "the box leaves nothing" wait_for 30 box_gone "$BOX"
serve_finish
