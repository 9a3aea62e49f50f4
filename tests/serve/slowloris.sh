#!/bin/bash
# One client without a key must not be able to take every connection of the
# daemon by holding half-sent requests: --max-connections-per-ip bounds what
# one address may hold, so other clients still get in.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"

if ! serve_start --max-connections 32 --max-connections-per-ip 8; then
  not_ok "the daemon starts with --max-connections-per-ip 8"
  serve_finish
  exit 1
fi
PORT=${URL##*:}
# 40 connections from 127.0.0.1, each sending the start of a request and
# never finishing it (more than the global limit of 32).
python3 - "$PORT" >"$T_SCRATCH/held" 2>&1 <<'EOF' &
import socket, sys, time
held = []
for _ in range(40):
    try:
        s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=2)
        s.sendall(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        held.append(s)
    except OSError:
        pass
print("opened", len(held), flush=True)
time.sleep(30)
EOF
HOLDER=$!
wait_for 10 grep -q opened "$T_SCRATCH/held"
health_from() { # SOURCE ADDRESS: the status of /v1/health
  curl -s -o /dev/null -w '%{http_code}' --max-time 5 --interface "$1" "$URL/v1/health"
}
expect_eq "another address still gets an answer while one holds its limit" "$(health_from 127.0.0.2)" 200
check "the holding address is refused beyond its limit" not bash -c '[ "$(curl -s -o /dev/null -w "%{http_code}" --max-time 5 --interface 127.0.0.1 '"$URL"'/v1/health)" = 200 ]'
kill "$HOLDER" 2>/dev/null
wait "$HOLDER" 2>/dev/null
healthy_again() { [ "$(health_from 127.0.0.1)" = 200 ]; }
check "once it lets go, the address is served again" wait_for 10 healthy_again
serve_stop
expect_eq "the daemon stops cleanly" "$SERVE_RC" 0
serve_finish
