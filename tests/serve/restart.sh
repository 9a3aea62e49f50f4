#!/bin/bash
# The daemon's life: the admin key file, the default data directory, IPv6,
# and a SIGKILL with live boxes: the next start on the same data re-adopts
# them (exec, files, background processes still work), and deleting them
# afterwards leaves no process and no cgroup behind.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"

# ---- the admin key file ----------------------------------------------------
KD=$T_SCRATCH/keydata
env -u HUSK_ADMIN_KEY "$HUSK" serve --listen 127.0.0.1:0 --data "$KD" 2>"$T_SCRATCH/k.log" &
KP=$!
wait_for 10 grep -q 'listening on' "$T_SCRATCH/k.log"
check "no HUSK_ADMIN_KEY: says where the key file is" grep -q "^husk: admin key in $KD/admin.key\$" "$T_SCRATCH/k.log"
check "the key file exists, mode 0600" [ "$(stat -c %a "$KD/admin.key" 2>/dev/null)" = 600 ]
check "the data directory is 0700" [ "$(stat -c %a "$KD")" = 700 ]
K1=$(cat "$KD/admin.key" 2>/dev/null)
check "the key is not printed" not grep -qF "$K1" "$T_SCRATCH/k.log"
URL=$(sed -n 's|^husk: listening on ||p' "$T_SCRATCH/k.log")
KEY=$K1
api GET /v1/tenants
expect_code "the generated key is the admin key" 200
kill -TERM "$KP"
wait "$KP"
env -u HUSK_ADMIN_KEY "$HUSK" serve --listen 127.0.0.1:0 --data "$KD" 2>"$T_SCRATCH/k2.log" &
KP=$!
wait_for 10 grep -q 'listening on' "$T_SCRATCH/k2.log"
expect_eq "a later start reuses the key" "$(cat "$KD/admin.key")" "$K1"
URL=$(sed -n 's|^husk: listening on ||p' "$T_SCRATCH/k2.log")
api GET /v1/tenants
expect_code "the reused key still works" 200
kill -TERM "$KP"
wait "$KP"
chmod 0644 "$KD/admin.key"
env -u HUSK_ADMIN_KEY "$HUSK" serve --listen 127.0.0.1:0 --data "$KD" 2>"$T_SCRATCH/k3.log"
check "a key file readable by others is refused" [ $? -ne 0 ] && grep -q "readable by others" "$T_SCRATCH/k3.log"
HUSK_ADMIN_KEY=short "$HUSK" serve --listen 127.0.0.1:0 --data "$KD" 2>/dev/null
check "a too short HUSK_ADMIN_KEY is refused" [ $? -ne 0 ]
"$HUSK" serve --listen nonsense --data "$KD" 2>/dev/null
check "a bad --listen is refused" [ $? -ne 0 ]

# ---- the default data directory in a source tree ---------------------------
mkdir -p "$T_SCRATCH/tree/src/api"
touch "$T_SCRATCH/tree/Makefile"
(cd "$T_SCRATCH/tree" && HUSK_ADMIN_KEY=$ADMIN exec "$HUSK" serve --listen 127.0.0.1:0) 2>"$T_SCRATCH/t.log" &
KP=$!
wait_for 10 grep -q 'listening on' "$T_SCRATCH/t.log"
check "in a source tree the data goes to ./var/husk" [ -f "$T_SCRATCH/tree/var/husk/husk.db" ]
kill -TERM "$KP"
wait "$KP"

# ---- IPv6 ------------------------------------------------------------------
if ip -6 addr show lo 2>/dev/null | grep -q '::1'; then
  HUSK_ADMIN_KEY=$ADMIN "$HUSK" serve --listen '[::1]:0' --data "$T_SCRATCH/v6" 2>"$T_SCRATCH/v6.log" &
  KP=$!
  wait_for 10 grep -q 'listening on' "$T_SCRATCH/v6.log"
  U6=$(sed -n 's|^husk: listening on ||p' "$T_SCRATCH/v6.log")
  check "IPv6: prints a bracketed URL" grep -q '^http://\[::1\]:[0-9]*$' <<<"$U6"
  check "IPv6: serves" [ "$(curl -s -o /dev/null -w '%{http_code}' "$U6/v1/health")" = 200 ]
  kill -TERM "$KP"
  wait "$KP"
else
  ok "IPv6: no ::1 on this host, skipped"
fi

# ---- SIGKILL with live boxes, restart, re-adoption ------------------------
if ! serve_start; then
  not_ok "the daemon starts"
  serve_finish
  exit 1
fi
new_tenant survivor || not_ok "tenant"
KEY=$TKEY
BOXES=()
for i in 1 2 3; do
  new_box '{"memory":"128M","timeout":600}' || not_ok "box $i"
  BOXES+=("$BOX")
  api PUT "/v1/sandboxes/$BOX/files?path=/workspace/note" --data-binary "note $i"
done
B1=${BOXES[0]}
api POST "/v1/sandboxes/$B1/exec" -d '{"cmd":["sh","-c","echo before; sleep 1020 & sleep 1020"],"background":true}'
BGPID=$(jf 'j["pid"]')
curl -sS -N -X POST -H "Authorization: Bearer $TKEY" "$URL/v1/sandboxes/$B1/exec" \
  -d '{"cmd":["sh","-c","echo streaming; exec sleep 1021"],"stream":true}' >"$T_SCRATCH/orphan" 2>&1 &
CURL=$!
wait_for 20 grep -q streaming "$T_SCRATCH/orphan"
serve_kill9
wait "$CURL" 2>/dev/null
alive() { for b in "${BOXES[@]}"; do [ -n "$(box_pids "$b")" ] || return 1; done; }
check "after SIGKILL of the daemon the boxes still run" alive

serve_start || not_ok "restart after SIGKILL"
check "restart: healthy" healthy
check "restart: the log says the boxes were re-adopted" [ "$(grep -c 're-adopted' "$SERVE_LOG")" -ge 3 ]
for b in "${BOXES[@]}"; do
  api GET "/v1/sandboxes/$b"
  expect_eq "restart: box ${b:0:10}.. running" "$(jf 'j["state"]')" running
  api POST "/v1/sandboxes/$b/exec" -d '{"cmd":["cat","/workspace/note"]}'
  check "restart: exec and files in box ${b:0:10}.." grep -q '"stdout":"note [123]"' <<<"$BODY"
done
api GET "/v1/sandboxes/$B1/processes/$BGPID/output"
expect_eq "restart: the background process's output is still there" "$BODY" before
api GET "/v1/sandboxes/$B1/processes/$BGPID"
BGSTATE=$(jf 'j["state"]')
check "restart: the background process is known (running or lost)" [ "$BGSTATE" = running -o "$BGSTATE" = lost ]
api POST "/v1/sandboxes/$B1/exec" -d '{"cmd":["echo","new work"]}'
expect_eq "restart: new execs work" "$(jf 'j["stdout"]')" "new work"

# One daemon per data directory: a second one refuses to start and the
# first keeps serving.
SECOND_LOG="$T_SCRATCH/second.log"
HUSK_ADMIN_KEY=$ADMIN timeout 30 "$HUSK" serve --listen 127.0.0.1:0 --data "$DATA" </dev/null >/dev/null 2>"$SECOND_LOG"
RC2=$?
expect_eq "a second daemon on the same data directory exits 1" "$RC2" 1
check "it says another husk serve is using the directory" grep -q "another husk serve is already using" "$SECOND_LOG"
api GET "/v1/sandboxes/$B1"
expect_eq "the first daemon still serves" "$(jf 'j["state"]')" running

# A second SIGKILL right after the restart, then a graceful cycle.
serve_kill9
serve_start || not_ok "second restart"
api GET "/v1/sandboxes?state=running"
expect_eq "second restart: the three boxes are running" "$(jf 'len(j["sandboxes"])')" 3

for b in "${BOXES[@]}"; do
  api DELETE "/v1/sandboxes/$b"
  expect_code "delete re-adopted box ${b:0:10}.." 200
done
for b in "${BOXES[@]}"; do
  check "box ${b:0:10}..: no process, no cgroup left" wait_for 20 box_gone "$b"
done
check "no background sleep left" no_box_procs_matching "$B1" "sleep 1020"
check "no orphan of the exec streamed at the SIGKILL left" no_box_procs_matching "$B1" "sleep 1021"
check "no box runtime directory left" wait_for 10 dir_empty "$DATA/boxes"
serve_stop
expect_eq "graceful stop: exit 0" "$SERVE_RC" 0
serve_finish
