#!/bin/bash
# One tenant cannot take every connection thread of the daemon: its requests
# in progress are bounded (by default half of --max-connections), and of
# those the ones running or streaming a command (a quarter); past its share
# it gets a 429 that says so, and another tenant's requests still succeed.
# Behind a reverse proxy every client has one address, so the per-address
# limit is off here (--max-connections-per-ip 0): only the tenant bounds
# stand between one tenant and the others.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"

if ! serve_start --max-connections 8 --max-connections-per-ip 0; then
  not_ok "the daemon starts with --max-connections 8"
  serve_finish
  exit 1
fi
new_tenant alpha || not_ok "tenant alpha"
A_TID=$TID A_KEY=$TKEY
new_tenant beta || not_ok "tenant beta"
B_TID=$TID B_KEY=$TKEY
KEY=$A_KEY
check "alpha makes a box" new_box
A_BOX=$BOX
KEY=$B_KEY
check "beta makes a box" new_box
B_BOX=$BOX
PORT=${URL##*:}

# ---- requests: alpha holds 8 slow uploads, as many as the daemon has
# connections.  Each sends its headers and a few bytes of a long body.
python3 - "$PORT" "$A_KEY" "$A_BOX" >"$T_SCRATCH/held" 2>&1 <<'EOF' &
import socket, sys, time
port, key, box = int(sys.argv[1]), sys.argv[2], sys.argv[3]
held, refused = [], 0
for i in range(8):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall((f"PUT /v1/sandboxes/{box}/files?path=/workspace/slow{i} HTTP/1.1\r\n"
                   f"Host: 127.0.0.1\r\nAuthorization: Bearer {key}\r\n"
                   "Content-Length: 1000000\r\n\r\n").encode() + b"x" * 10)
        held.append(s)
    except OSError:
        pass
    time.sleep(0.2)
# Which of them were answered (a refusal) rather than left to upload?
for s in held:
    s.settimeout(2)
    try:
        head = s.recv(4096).decode(errors="replace")
    except OSError:
        head = ""
    if head.startswith("HTTP/1.1 429"):
        refused += 1
        if "in progress (at most 4)" in head:
            print("message ok", flush=True)
print("refused", refused, flush=True)
time.sleep(30)
EOF
HOLDER=$!
check "alpha's uploads are under way" wait_for 30 grep -q '^refused' "$T_SCRATCH/held"
expect_eq "alpha's uploads past its share of 4 are refused with 429" \
  "$(sed -n 's/^refused //p' "$T_SCRATCH/held")" 4
check "the 429 says how many requests alpha has and may have" grep -q '^message ok' "$T_SCRATCH/held"
KEY=$B_KEY
api GET /v1/sandboxes
expect_code "beta is served while alpha holds its share" 200
api GET "/v1/sandboxes/$B_BOX"
expect_code "beta again" 200
KEY=$A_KEY
api GET /v1/sandboxes
expect_code "alpha's next request: 429" 429
expect_eq "a clear code" "$(jf 'j["error"]["code"]')" too_many_requests
kill "$HOLDER" 2>/dev/null
wait "$HOLDER" 2>/dev/null
alpha_served() { KEY=$A_KEY api GET /v1/sandboxes; [ "$CODE" = 200 ]; }
check "once its uploads end, alpha is served again" wait_for 20 alpha_served

# ---- execs: a quarter of 8 = 2 streaming commands at once --------------------
for i in 1 2; do
  curl -sS -N -X POST -H "Authorization: Bearer $A_KEY" "$URL/v1/sandboxes/$A_BOX/exec" \
    -d '{"cmd":["sh","-c","echo up; sleep 60"],"stream":true}' >"$T_SCRATCH/stream$i" 2>&1 &
  eval "STREAM$i=\$!"
done
check "alpha's two streams run" wait_for 20 bash -c "grep -q up '$T_SCRATCH/stream1' && grep -q up '$T_SCRATCH/stream2'"
KEY=$A_KEY
api POST "/v1/sandboxes/$A_BOX/exec" -d '{"cmd":["true"]}'
expect_code "alpha's third command: 429" 429
check "the 429 names the command bound" grep -q 'command request(s) at once (at most 2)' <<<"$BODY"
api GET "/v1/sandboxes/$A_BOX"
expect_code "alpha's other requests still go through" 200
KEY=$B_KEY
api POST "/v1/sandboxes/$B_BOX/exec" -d '{"cmd":["echo","beta"]}'
expect_code "beta's commands run meanwhile" 200
# The tenant's own bound overrides the daemon's.
KEY=$ADMIN
api PUT "/v1/tenants/$A_TID/quota" -d '{"max_execs":3}'
expect_eq "admin raises alpha's max_execs" "$(jf 'j["max_execs"]')" 3
KEY=$A_KEY
api POST "/v1/sandboxes/$A_BOX/exec" -d '{"cmd":["true"]}'
expect_code "alpha's third command runs under its own bound" 200
KEY=$ADMIN
api PUT "/v1/tenants/$A_TID/quota" -d '{"max_execs":0}'
expect_code "max_execs 0 is refused (it would lock the tenant out)" 400
api PUT "/v1/tenants/$A_TID/quota" -d '{"max_execs":null,"max_requests":null}'
expect_eq "null returns to the daemon's default" "$(jf '[j["max_execs"], j["max_requests"]]')" "[null, null]"
kill "$STREAM1" "$STREAM2" 2>/dev/null
wait "$STREAM1" "$STREAM2" 2>/dev/null

reap_boxes "$A_KEY" "$B_KEY" >/dev/null
serve_stop
expect_eq "the daemon stops cleanly" "$SERVE_RC" 0
serve_finish
