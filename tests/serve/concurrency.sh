#!/bin/bash
# 32 clients at once, for bounded times (no timing assertions: the loops
# just stop):
#   1. each on a box of its own (made beforehand): upload, exec, streamed
#      exec, download, in a loop for SERVE_CONC_WORK_SECONDS (10);
#   2. each looping create -> upload -> exec -> streamed exec -> delete for
#      SERVE_CONC_SECONDS (20).
# No request may fail, every box must end stopped and leave nothing
# behind, and the daemon must still answer.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"

CLIENTS=${SERVE_CONC_CLIENTS:-32}
SECS=${SERVE_CONC_SECONDS:-20}
WORK_SECS=${SERVE_CONC_WORK_SECONDS:-10}

if ! serve_start; then
  not_ok "the daemon starts"
  serve_finish
  exit 1
fi
new_tenant crowd || not_ok "tenant"

client() { # N: loop until the deadline; one line per failure in err.N
  local n=$1 end=$2 key=$TKEY i=0 code out box
  local dir=$T_SCRATCH/c$n
  mkdir -p "$dir"
  while [ "$(date +%s)" -lt "$end" ]; do
    i=$((i + 1))
    code=$(curl -sS -o "$dir/b" -w '%{http_code}' --max-time 60 -X POST -H "Authorization: Bearer $key" \
      "$URL/v1/sandboxes" -d '{"memory":"64M","disk":"16M","pids":32,"timeout":300}' 2>>"$dir/curl")
    box=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["id"])' "$dir/b" 2>/dev/null)
    if [ "$code" != 201 ] || [ -z "$box" ]; then
      echo "create: $code $(head -c 200 "$dir/b")" >>"$dir/err"
      continue
    fi
    echo "$box" >>"$dir/boxes"
    code=$(curl -sS -o "$dir/b" -w '%{http_code}' --max-time 60 -X PUT -H "Authorization: Bearer $key" \
      --data-binary "client $n round $i" "$URL/v1/sandboxes/$box/files?path=/workspace/in" 2>>"$dir/curl")
    [ "$code" = 201 ] || echo "upload: $code $(head -c 200 "$dir/b")" >>"$dir/err"
    code=$(curl -sS -o "$dir/b" -w '%{http_code}' --max-time 60 -X POST -H "Authorization: Bearer $key" \
      "$URL/v1/sandboxes/$box/exec" -d '{"cmd":["sh","-c","cat /workspace/in; echo; echo $((6*7))"]}' 2>>"$dir/curl")
    out=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["stdout"], end="")' "$dir/b" 2>/dev/null)
    [ "$code" = 200 ] && [ "$out" = "client $n round $i"$'\n'"42" ] ||
      echo "exec: $code $(head -c 200 "$dir/b")" >>"$dir/err"
    code=$(curl -sS -N -o "$dir/s" -w '%{http_code}' --max-time 60 -X POST -H "Authorization: Bearer $key" \
      "$URL/v1/sandboxes/$box/exec" -d '{"cmd":["sh","-c","echo a; echo b >&2"],"stream":true}' 2>>"$dir/curl")
    [ "$code" = 200 ] && grep -q '^event: exit$' "$dir/s" && grep -q '"data":"a\\n"' "$dir/s" ||
      echo "stream: $code $(head -c 200 "$dir/s")" >>"$dir/err"
    code=$(curl -sS -o "$dir/b" -w '%{http_code}' --max-time 60 -X DELETE -H "Authorization: Bearer $key" \
      "$URL/v1/sandboxes/$box" 2>>"$dir/curl")
    [ "$code" = 200 ] || echo "delete: $code $(head -c 200 "$dir/b")" >>"$dir/err"
  done
}

# ---- 1. many clients, one box each ------------------------------------------
worker() { # N BOX END
  local n=$1 box=$2 end=$3 key=$TKEY i=0 code out
  local dir=$T_SCRATCH/w$n
  mkdir -p "$dir"
  head -c $((n * 1000 + 1)) /dev/urandom >"$dir/data"
  while [ "$(date +%s)" -lt "$end" ]; do
    i=$((i + 1))
    code=$(curl -sS -o "$dir/b" -w '%{http_code}' --max-time 60 -X PUT -H "Authorization: Bearer $key" \
      --data-binary @"$dir/data" "$URL/v1/sandboxes/$box/files?path=/workspace/d$i" 2>>"$dir/curl")
    [ "$code" = 201 ] || echo "upload: $code $(head -c 200 "$dir/b")" >>"$dir/err"
    code=$(curl -sS -o "$dir/b" -w '%{http_code}' --max-time 60 -X POST -H "Authorization: Bearer $key" \
      "$URL/v1/sandboxes/$box/exec" -d "{\"cmd\":[\"sh\",\"-c\",\"wc -c < /workspace/d$i\"]}" 2>>"$dir/curl")
    out=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["stdout"].strip())' "$dir/b" 2>/dev/null)
    [ "$code" = 200 ] && [ "$out" = $((n * 1000 + 1)) ] || echo "exec: $code $(head -c 200 "$dir/b")" >>"$dir/err"
    code=$(curl -sS -N -o "$dir/s" -w '%{http_code}' --max-time 60 -X POST -H "Authorization: Bearer $key" \
      "$URL/v1/sandboxes/$box/exec?format=ndjson" -d '{"cmd":["sh","-c","seq 1 2000"]}' 2>>"$dir/curl")
    [ "$code" = 200 ] && python3 -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
out = "".join(e.get("data", "") for e in ev if e["type"] == "stdout")
assert out == "".join("%d\n" % i for i in range(1, 2001)) and ev[-1]["type"] == "exit"' "$dir/s" 2>/dev/null ||
      echo "stream: $code $(tail -c 200 "$dir/s")" >>"$dir/err"
    code=$(curl -sS -o "$dir/back" -w '%{http_code}' --max-time 60 -H "Authorization: Bearer $key" \
      "$URL/v1/sandboxes/$box/files?path=/workspace/d$i" 2>>"$dir/curl")
    [ "$code" = 200 ] && cmp -s "$dir/data" "$dir/back" || echo "download: $code" >>"$dir/err"
    echo "$i" >"$dir/rounds"
  done
}
KEY=$TKEY
WBOXES=()
for n in $(seq "$CLIENTS"); do
  new_box '{"memory":"128M","disk":"64M","timeout":600}' || not_ok "box for worker $n"
  WBOXES+=("$BOX")
done
END=$(($(date +%s) + WORK_SECS))
PIDS=()
for n in $(seq "$CLIENTS"); do
  worker "$n" "${WBOXES[$((n - 1))]}" "$END" &
  PIDS+=($!)
done
wait "${PIDS[@]}"
WROUNDS=$(cat "$T_SCRATCH"/w*/rounds 2>/dev/null | awk '{s += $1} END {print s + 0}')
WERRS=$(cat "$T_SCRATCH"/w*/err 2>/dev/null | wc -l)
echo "# phase 1: $CLIENTS clients on their own boxes, $WROUNDS rounds in ${WORK_SECS}s, $WERRS errors"
check "phase 1: every client did some work" [ "$(ls "$T_SCRATCH"/w*/rounds 2>/dev/null | wc -l)" -eq "$CLIENTS" ]
if [ "$WERRS" -eq 0 ]; then
  ok "phase 1: no request failed"
else
  not_ok "phase 1: no request failed ($WERRS failures)"
  cat "$T_SCRATCH"/w*/err | cut -c1-150 | sort | uniq -c | sort -rn | head -n 10 | sed 's/^/#   /'
fi
for b in "${WBOXES[@]}"; do
  api DELETE "/v1/sandboxes/$b"
  [ "$CODE" = 200 ] || not_ok "phase 1: delete $b ($CODE)"
done

# ---- 2. many clients, create/exec/destroy -------------------------------------
END=$(($(date +%s) + SECS))
PIDS=()
for n in $(seq "$CLIENTS"); do
  client "$n" "$END" &
  PIDS+=($!)
done
wait "${PIDS[@]}"

ROUNDS=$(cat "$T_SCRATCH"/c*/boxes 2>/dev/null | wc -l)
ERRS=$(cat "$T_SCRATCH"/c*/err 2>/dev/null | wc -l)
echo "# phase 2: $CLIENTS clients, $ROUNDS boxes created and deleted in ${SECS}s, $ERRS errors"
check "phase 2: some work was done (at least one round per client)" [ "$ROUNDS" -ge "$CLIENTS" ]
if [ "$ERRS" -eq 0 ]; then
  ok "phase 2: no request failed"
else
  not_ok "phase 2: no request failed ($ERRS failures)"
  cat "$T_SCRATCH"/c*/err 2>/dev/null | cut -c1-150 | sort | uniq -c | sort -rn | head -n 10 | sed 's/^/#   /'
fi
check "the daemon still answers" healthy
KEY=$TKEY
all_stopped() {
  api GET "/v1/sandboxes?state=live&limit=1000"
  [ "$CODE" = 200 ] && [ "$(jf 'len(j["sandboxes"])')" = 0 ]
}
check "no box left live" all_stopped
leftovers() {
  local b
  for b in "${WBOXES[@]}" $(cat "$T_SCRATCH"/c*/boxes 2>/dev/null); do
    box_gone "$b" || echo "$b"
  done
}
no_leftovers() { [ -z "$(leftovers)" ]; }
check "no process or cgroup of any of the $ROUNDS boxes left" wait_for 30 no_leftovers
check "no box runtime directory left" wait_for 10 dir_empty "$DATA/boxes"
FDS=$(ls "/proc/$SPID/fd" | wc -l)
check "the daemon holds few fds afterwards ($FDS)" [ "$FDS" -lt 64 ]
few_threads() { [ "$(ls "/proc/$SPID/task" | wc -l)" -lt 16 ]; }
check "the daemon's threads are back down" wait_for 10 few_threads
serve_stop
expect_eq "graceful stop after the crowd: exit 0" "$SERVE_RC" 0
serve_finish
