#!/bin/bash
# A connection's total time to deliver a request is bounded (--request-timeout),
# not only its idle time: a client that trickles its headers or a JSON body
# a byte at a time, each byte well within --idle-timeout, is cut off; an
# upload streaming its body for longer than that is not.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"

if ! serve_start --request-timeout 2 --idle-timeout 30 --max-connections-per-ip 0; then
  not_ok "the daemon starts with --request-timeout 2"
  serve_finish
  exit 1
fi
PORT=${URL##*:}
new_tenant slow || not_ok "tenant"
KEY=$TKEY
check "a box" new_box

# trickle HEAD BODY_BYTES SECONDS: send HEAD, then one byte of body (or of
# a header when BODY_BYTES is 0) every 0.25 s for at most SECONDS; print
# "cut" if the daemon closed the connection first, else "open" and the
# status line of the reply to what was sent.
trickle() {
  python3 - "$PORT" "$1" "$2" "$3" <<'EOF'
import socket, sys, time
port, head, body, secs = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.sendall(head.encode().decode("unicode_escape").encode())
end = time.monotonic() + secs
sent = 0
try:
    while time.monotonic() < end and (body == 0 or sent < body):
        s.sendall(b"a" if body == 0 else b"x")
        sent += 1
        time.sleep(0.25)
    if body == 0:
        print("open", flush=True)
        sys.exit(0)
    reply = s.recv(4096).decode(errors="replace")
    print("open", reply.split("\r\n")[0] if reply else "(no reply)", flush=True)
except OSError:
    print("cut", flush=True)
EOF
}

expect_eq "headers trickled past the request timeout: the connection is cut" \
  "$(trickle 'GET /v1/health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ' 0 20)" cut
expect_eq "a JSON body trickled past it: cut" \
  "$(trickle "POST /v1/tenants HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer $ADMIN\r\nContent-Length: 400\r\n\r\n" 400 20)" cut
check "the daemon logs the cut" grep -q "did not send a request within 2s" "$SERVE_LOG"
expect_eq "an upload may stream for longer: 5 s of body, stored" \
  "$(trickle "PUT /v1/sandboxes/$BOX/files?path=/workspace/slow HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer $TKEY\r\nContent-Length: 20\r\n\r\n" 20 20)" \
  "open HTTP/1.1 201 Created"
api GET "/v1/sandboxes/$BOX/files?path=/workspace/slow"
expect_eq "the upload is whole" "$BODY" "xxxxxxxxxxxxxxxxxxxx"
check "the daemon still answers" healthy

reap_boxes "$TKEY" >/dev/null
serve_stop
expect_eq "the daemon stops cleanly" "$SERVE_RC" 0
serve_finish
