#!/bin/bash
# The S3 front bounds each tenant's requests in progress like the API
# (--tenant-max-requests, the tenant's max_requests): a tenant holding its
# bound with slow uploads gets 503 SlowDown (the connection closed) for
# its next request, while another tenant's S3 requests go on; and a
# connection that trickles its request is cut after --request-timeout.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"
. "$(dirname "$0")/s3.bash"

if ! s3_start --max-connections 16 --max-connections-per-ip 0 --tenant-max-requests 2 \
  --request-timeout 2 --idle-timeout 30; then
  not_ok "the daemon starts with an S3 listener"
  serve_finish
  exit 1
fi
ok "the daemon starts with an S3 listener"
S3PORT=${S3##*:}
s3_creds alpha || not_ok "alpha's S3 keys"
A_AK=$AK A_SK=$SK A_TID=$TID
s3_creds beta || not_ok "beta's S3 keys"
B_AK=$AK B_SK=$SK
as_a() { CAK=$A_AK CSK=$A_SK "$@"; }
as_b() { CAK=$B_AK CSK=$B_SK "$@"; }
as_a s3req PUT /abucket
expect_eq "alpha's bucket" "$CODE" 200
as_b s3req PUT /bbucket
expect_eq "beta's bucket" "$CODE" 200

# Two uploads of alpha's, one byte every 0.25 s: 15 s each.
W=$T_SCRATCH/w
mkdir -p "$W"
head -c 60 /dev/zero | tr '\0' x >"$W/slow"
slow_put() { # N
  AWS_ACCESS_KEY_ID=$A_AK AWS_SECRET_ACCESS_KEY=$A_SK python3 "$S3REQ" PUT "$S3/abucket/slow$1" \
    --payload UNSIGNED-PAYLOAD --data-file "$W/slow" --trickle 0.25 >"$W/slow$1.code" 2>&1
}
slow_put 1 &
P1=$!
slow_put 2 &
P2=$!
# Until both are admitted, alpha's third request may still pass.
for _ in $(seq 50); do
  as_a s3req GET /abucket
  [ "$CODE" = 503 ] && break
  sleep 0.2
done
expect_s3 "alpha's third request while two upload: 503 SlowDown" 503 SlowDown
check "the refusal says why" grep -q "already has 2 S3 request(s) in progress (at most 2)" "$T_SCRATCH/s3body"
check "the refusal closes the connection" grep -qi "^connection: close" "$T_SCRATCH/s3hdr"
as_b s3req PUT /bbucket/obj --data hello
expect_eq "beta uploads meanwhile" "$CODE" 200
as_b s3req GET /bbucket/obj
expect_eq "beta downloads meanwhile" "$CODE $BODY" "200 hello"
check "alpha's uploads were still in progress" kill -0 "$P1" "$P2"
wait "$P1" "$P2"
expect_eq "alpha's slow uploads are stored" "$(cat "$W/slow1.code") $(cat "$W/slow2.code")" "200 200"
as_a s3req GET /abucket/slow1
expect_eq "alpha's requests pass again once they end" "$CODE $BODY" "200 $(cat "$W/slow")"

# A tenant's own max_requests overrides the daemon's default.
KEY=$ADMIN
api PUT "/v1/tenants/$A_TID/quota" -d '{"max_requests":1}'
expect_eq "alpha's max_requests set to 1" "$(jf 'j["max_requests"]')" 1
# A probe in progress when the slow upload arrives refuses the upload
# instead (the bound is 1): then the upload starts again.
slow_put 3 &
P3=$!
for _ in $(seq 50); do
  if ! kill -0 "$P3" 2>/dev/null; then
    slow_put 3 &
    P3=$!
    sleep 0.5
  fi
  as_a s3req GET /abucket
  [ "$CODE" = 503 ] && break
  sleep 0.2
done
expect_s3 "with max_requests 1, alpha's second request: 503 SlowDown" 503 SlowDown
wait "$P3"

# trickle HEAD SECONDS: send HEAD, then one header byte every 0.25 s for
# at most SECONDS; "cut" if the daemon closed the connection first.
trickle() {
  python3 - "$S3PORT" "$1" "$2" <<'PY'
import socket, sys, time
port, head, secs = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
s = socket.create_connection(("127.0.0.1", port), timeout=10)
s.sendall(head.encode().decode("unicode_escape").encode())
end = time.monotonic() + secs
try:
    while time.monotonic() < end:
        s.sendall(b"a")
        time.sleep(0.25)
    print("open", flush=True)
except OSError:
    print("cut", flush=True)
PY
}
expect_eq "S3 headers trickled past the request timeout: the connection is cut" \
  "$(trickle 'GET /abucket HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ' 20)" cut
check "the daemon logs the cut" grep -q "S3 connection(s) that did not send a request within 2s" "$SERVE_LOG"
as_b s3req GET /bbucket/obj
expect_eq "the S3 front still answers" "$CODE $BODY" "200 hello"

serve_stop
expect_eq "the daemon stops cleanly" "$SERVE_RC" 0
