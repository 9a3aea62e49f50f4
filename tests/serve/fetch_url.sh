#!/bin/bash
# MCP fetch_url: a URL into a box file through the box's own egress policy.
# Everything stays on this machine: the "internet" is the network namespace
# of the egress suite (egress/setup.bash: DNS, HTTPS echo with a test CA)
# plus a plain HTTP server of this suite (fetch_url/upstream.py) in it.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"
. "$(dirname "$0")/egress/setup.bash"
MCPDIR=$(cd "$(dirname "$0")/../mcp" && pwd)
. "$MCPDIR/mcp.bash"
FX_PID=""
fx_stop() { [ -n "$FX_PID" ] && kill "$FX_PID" 2>/dev/null && wait "$FX_PID" 2>/dev/null; FX_PID=""; }
on_exit 'fx_stop; up_stop; serve_cleanup'

SECRET="s3cr3t-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
has() { grep -qF -- "$2" <<<"$1"; }
lacks() { ! grep -qF -- "$2" <<<"$1"; }
# bx BOX SHELL: run in BOX; OUT = stdout+stderr.
bx() {
  local body
  body=$(python3 -c 'import json,sys; print(json.dumps({"cmd":["sh","-c",sys.argv[1]],"timeout":30}))' "$2")
  api POST "/v1/sandboxes/$1/exec" -d "$body"
  OUT=$(jf 'j["stdout"]+j["stderr"]')
}
absent() { bx "$1" "test -e '$2' && echo present || echo absent"; [ "$OUT" = absent ]; }
# The sha256 of upstream.py's /random/N body.
want_sha() { python3 -c 'import hashlib,random,sys; n=int(sys.argv[1]); print(hashlib.sha256(random.Random(n).randbytes(n)).hexdigest())' "$1"; }
fetch() { tool "$KEY" fetch_url "$1"; }
took() { echo $(( $(date +%s) - $1 )); }

if ! up_start; then
  not_ok "the upstream test network starts"
  finish
  exit 1
fi
ip netns exec "$UP_NS" python3 "$(dirname "$0")/fetch_url/upstream.py" "$UP_DIR" "$UP_IP" \
  >"$UP_DIR/fetch.out" 2>&1 &
FX_PID=$!
for _ in $(seq 100); do [ -f "$UP_DIR/fetch.ready" ] && break; sleep 0.05; done
up_zone '{"files.test": ["10.250.0.2"], "denied.test": ["10.250.0.2"], "api.ex.test": ["10.250.0.2"],
 "other.test": ["10.250.0.2"], "echo.test": ["10.250.0.2"]}'

if ! serve_start --egress-resolver "$UP_IP:53" --egress-allow-range "$UP_NET" --egress-ca-file "$UP_CA"; then
  not_ok "the daemon starts with the egress options"
  serve_finish
  exit 1
fi
new_tenant fetch || not_ok "tenant"
KEY=$TKEY
api PUT /v1/secrets/TOKEN -d "{\"value\":\"$SECRET\"}"
new_box '{"network":"egress","egress":{"rules":[{"host":"files.test","ports":[8080]},
  {"host":"api.ex.test","mode":"inject"},{"host":"echo.test"}],"secrets":[{"name":"TOKEN","hosts":["api.ex.test"]}]}}' ||
  not_ok "a box with egress"
EB=$BOX
new_box '{}' || not_ok "a box without egress"
NB=$BOX

# ---- allowed ----------------------------------------------------------------------
N=$((3 * 1024 * 1024 + 17))
fetch "{\"sandbox_id\":\"$EB\",\"url\":\"http://files.test:8080/random/$N\",\"path\":\"data/a.bin\"}"
expect_eq "an allowed fetch succeeds (status, size)" "$(rq '(err, sc.get("status"), sc.get("size"))')" "(False, 200, $N)"
WANT=$(want_sha $N)
expect_eq "its sha256 is the upstream body's" "$(rq 'sc.get("sha256")')" "$WANT"
bx "$EB" "sha256sum /workspace/data/a.bin | cut -d' ' -f1"
expect_eq "the file in the box is byte-identical" "$OUT" "$WANT"
expect_eq "content_type and final_url" "$(rq '(sc.get("content_type"), sc.get("final_url"))')" \
  "('application/octet-stream', 'http://files.test:8080/random/$N')"
N2=200000
fetch "{\"sandbox_id\":\"$EB\",\"url\":\"http://files.test:8080/stream/$N2\",\"path\":\"/tmp/s.bin\"}"
expect_eq "a body without Content-Length arrives whole" "$(rq '(err, sc.get("size"), sc.get("sha256"))')" \
  "(False, $N2, '$(want_sha $N2)')"
fetch "{\"sandbox_id\":\"$EB\",\"url\":\"http://files.test:8080/to-ok\",\"path\":\"r.bin\"}"
expect_eq "a redirect to an allowed URL is followed" "$(rq '(err, sc.get("redirects"), sc.get("final_url"), sc.get("size"))')" \
  "(False, 1, 'http://files.test:8080/random/1000', 1000)"

fetch "{\"sandbox_id\":\"$EB\",\"url\":\"https://echo.test/tunnelled\",\"path\":\"t.json\"}"
expect_eq "https through a tunnel rule (TLS end to end, verified)" "$(rq '(err, sc.get("status"), sc.get("content_type"))')" "(False, 200, 'application/json')"
bx "$EB" "cat /workspace/t.json"
check "... the body is the upstream's" has "$OUT" '"path": "/tunnelled"'

# ---- refused by the policy ----------------------------------------------------------
fetch "{\"sandbox_id\":\"$EB\",\"url\":\"http://denied.test:8080/random/10\",\"path\":\"d.bin\"}"
expect_err "a host the policy does not list is refused, naming the policy" "egress policy"
check "no file is left" absent "$EB" /workspace/d.bin
check "the upstream never saw the refused request" not grep -q '"/x"\|random/10"' "$UP_DIR/fetch.log"
fetch "{\"sandbox_id\":\"$EB\",\"url\":\"https://other.test/\",\"path\":\"o.bin\"}"
expect_err "an https host the policy does not list is refused (CONNECT)" "egress policy"
check "no file is left (https)" absent "$EB" /workspace/o.bin
fetch "{\"sandbox_id\":\"$EB\",\"url\":\"http://files.test:8080/to-denied\",\"path\":\"rd.bin\"}"
expect_err "a redirect to a denied host is refused" "egress policy"
check "no file is left after the denied redirect" absent "$EB" /workspace/rd.bin
fetch "{\"sandbox_id\":\"$EB\",\"url\":\"http://files.test:8080/to-ftp\",\"path\":\"rf.bin\"}"
expect_err "a redirect to ftp:// is refused" "not http:// or https://"
fetch "{\"sandbox_id\":\"$EB\",\"url\":\"http://files.test:8080/loop\",\"path\":\"rl.bin\"}"
expect_err "a redirect loop stops" "redirects"
api GET "/v1/audit?box=$EB&limit=1000"
check "the denied decisions are in the box's egress audit" has "$(jf '" ".join(r["detail"] for r in j["records"] if r["outcome"] == "denied")')" "host=denied.test"

# ---- no egress ----------------------------------------------------------------------
fetch "{\"sandbox_id\":\"$NB\",\"url\":\"http://files.test:8080/random/10\",\"path\":\"n.bin\"}"
expect_err "a box without egress is refused and told how to get a network" "has no network"
check "... and no file is left" absent "$NB" /workspace/n.bin

# ---- limits ---------------------------------------------------------------------------
fetch "{\"sandbox_id\":\"$EB\",\"url\":\"http://files.test:8080/random/5000\",\"path\":\"big.bin\",\"max_bytes\":1000}"
expect_err "a body over max_bytes (Content-Length) is refused" "larger than max_bytes"
check "no partial file" absent "$EB" /workspace/big.bin
fetch "{\"sandbox_id\":\"$EB\",\"url\":\"http://files.test:8080/stream/50000\",\"path\":\"big2.bin\",\"max_bytes\":1000}"
expect_err "a streamed body over max_bytes is refused" "larger than max_bytes"
check "no partial file (streamed)" absent "$EB" /workspace/big2.bin
t0=$(date +%s)
fetch "{\"sandbox_id\":\"$EB\",\"url\":\"http://files.test:8080/stall\",\"path\":\"stall.bin\",\"timeout_seconds\":2}"
expect_err "an upstream that stalls hits the time limit" "did not finish within 2 s"
check "... in bounded time ($(took $t0) s)" test "$(took $t0)" -le 8
check "no partial file (stalled)" absent "$EB" /workspace/stall.bin

# ---- secrets ------------------------------------------------------------------------
fetch "{\"sandbox_id\":\"$EB\",\"url\":\"https://api.ex.test/echo\",\"path\":\"echo.json\",\"headers\":{\"Authorization\":\"Bearer \${TOKEN}\"}}"
expect_eq "an https fetch through an inject rule succeeds" "$(rq '(err, sc.get("status"))')" "(False, 200)"
check "the upstream got the secret, injected by the proxy" grep -qF "Bearer $SECRET" "$UP_DIR/requests.log"
check "the reply does not hold the secret" lacks "$R" "$SECRET"
bx "$EB" "cat /workspace/echo.json"
scrubbed() { has "$OUT" "Bearer husk_ph_" && lacks "$OUT" "$SECRET"; }
check "the box file holds the placeholder, not the secret" scrubbed
fetch "{\"sandbox_id\":\"$EB\",\"url\":\"https://api.ex.test/echo\",\"path\":\"e2.json\",\"headers\":{\"Authorization\":\"Bearer \${NOPE}\"}}"
expect_err "a header naming no binding of the box is refused" "no secret binding with env name NOPE"
fetch "{\"sandbox_id\":\"$EB\",\"url\":\"http://files.test:8080/random/10\",\"path\":\"h.bin\",\"headers\":{\"Host\":\"denied.test\"}}"
expect_err "a Host header cannot be set" "cannot be set"

# ---- bad URLs and paths -------------------------------------------------------------
for u in "ftp://files.test/x" "file:///etc/passwd" "http:///nohost" "gopher://files.test/" "not a url"; do
  fetch "{\"sandbox_id\":\"$EB\",\"url\":\"$u\",\"path\":\"u.bin\"}"
  if [ "$(rq 'err')" = true ]; then ok "refused: $u"; else not_ok "refused: $u ($R)"; fi
done
fetch "{\"sandbox_id\":\"$EB\",\"url\":\"http://user:pw@files.test:8080/random/10\",\"path\":\"u.bin\"}"
expect_err "a URL with credentials is refused" "user:password"
fetch "{\"sandbox_id\":\"$EB\",\"url\":\"http://files.test:8080/random/10\",\"path\":\"../../etc/x\"}"
expect_err "a path out of the writable areas is refused" "only /workspace, /tmp and /dev/shm"
bx "$EB" "ln -s /etc /workspace/out && echo made"
fetch "{\"sandbox_id\":\"$EB\",\"url\":\"http://files.test:8080/random/10\",\"path\":\"out/x\"}"
expect_err "a symlink in the box pointing out is not followed out" "only /workspace, /tmp and /dev/shm"
check "nothing was written on the host's /etc" test ! -e /etc/x
bx "$EB" "ln -s /tmp/victim /workspace/ln.bin && echo made"
fetch "{\"sandbox_id\":\"$EB\",\"url\":\"http://files.test:8080/random/10\",\"path\":\"ln.bin\"}"
bx "$EB" "test -L /workspace/ln.bin && echo link; test -f /workspace/ln.bin && echo file; test -e /tmp/victim && echo victim"
expect_eq "a symlink at the path is replaced by the file, never written through" "$(rq 'err'):$OUT" "false:file"
fetch "{\"sandbox_id\":\"nope\",\"url\":\"http://files.test:8080/random/10\",\"path\":\"x\"}"
expect_err "an unknown box" "not found"

# ---- the HTTP API's form -----------------------------------------------------------
api POST "/v1/sandboxes/$EB/fetch" -d "{\"url\":\"http://files.test:8080/random/4096\",\"path\":\"/tmp/api.bin\"}"
expect_code "POST /fetch: an allowed fetch" 200
expect_eq "POST /fetch: size and sha256" "$(jf '(j["size"], j["sha256"])')" "$(python3 -c 'import sys; print((4096, sys.argv[1]))' "$(want_sha 4096)")"
api POST "/v1/sandboxes/$EB/fetch" -d '{"url":"http://denied.test:8080/x","path":"/tmp/api2.bin"}'
expect_code "POST /fetch: a denied host is 403" 403
check "POST /fetch: ... naming the policy" has "$BODY" "egress policy"
api POST "/v1/sandboxes/$NB/fetch" -d '{"url":"http://files.test:8080/x","path":"x"}'
expect_code "POST /fetch: a box without egress is 409" 409
api POST "/v1/sandboxes/$EB/fetch" -d '{"url":"http://files.test:8080/random/5000","path":"x","max_bytes":10}'
expect_code "POST /fetch: over max_bytes is 422" 422
api POST "/v1/sandboxes/$EB/fetch" -d '{"url":"file:///etc/passwd","path":"x"}'
expect_code "POST /fetch: a file:// URL is 400" 400

# ---- sandbox_create with egress -----------------------------------------------------
tool "$KEY" sandbox_create '{"egress":{"rules":[{"host":"files.test","ports":[8080]}]},"ttl_seconds":300}'
MB=$(rq 'sc.get("sandbox_id", "")')
check "sandbox_create makes a box with an egress policy" test -n "$MB"
[ -n "$MB" ] && echo "$MB $KEY" >>"$T_SCRATCH/boxes"
fetch "{\"sandbox_id\":\"$MB\",\"url\":\"http://files.test:8080/random/2048\",\"path\":\"m.bin\"}"
expect_eq "fetch_url works in it" "$(rq '(err, sc.get("size"), sc.get("sha256"))')" "(False, 2048, '$(want_sha 2048)')"
fetch "{\"sandbox_id\":\"$MB\",\"url\":\"https://api.ex.test/echo\",\"path\":\"m2.bin\"}"
expect_err "... and only for the hosts its policy names" "egress policy"
tool "$KEY" sandbox_create '{"egress":{"rules":[{"host":"*"}]}}'
expect_err "sandbox_create refuses a bad policy" "egress"
tool "$KEY" sandbox_create '{"egress":{"rules":[{"host":"api.ex.test","mode":"inject"}],"secrets":[{"name":"TOKEN","hosts":["api.ex.test"]}]}}'
expect_err "sandbox_create: a policy given by the model cannot bind a stored secret (it could send it anywhere)" "cannot bind secrets"
tool "$KEY" sandbox_create '{"egress":{"rules":[{"host":"evil.test","mode":"inject"}],"secrets":[]}}'
expect_err "sandbox_create: ... not even an empty list of them" "cannot bind secrets"
tool "$KEY" sandbox_create '{"egress":"files.test"}'
expect_err "sandbox_create: egress must be an object" "must be an object"

# ---- a fetch ends with its box, and with its client -------------------------------------
curl -sS -o "$T_SCRATCH/ended.json" -w '%{http_code}' -H "Authorization: Bearer $KEY" \
  -X POST "$URL/v1/sandboxes/$MB/fetch" -d '{"url":"http://files.test:8080/stall","path":"s.bin","timeout":40}' \
  >"$T_SCRATCH/ended.code" &
FP=$!
sleep 1.5
api DELETE "/v1/sandboxes/$MB"
t0=$SECONDS
wait "$FP"
expect_eq "a fetch whose box is deleted ends at once (409), not at its time limit" \
  "$(cat "$T_SCRATCH/ended.code") $((SECONDS - t0 < 10))" "409 1"
check "... saying the sandbox ended" grep -q "ended during the fetch" "$T_SCRATCH/ended.json"
curl -sS -o /dev/null --max-time 2 -H "Authorization: Bearer $KEY" -X POST "$URL/v1/sandboxes/$EB/fetch" \
  -d '{"url":"http://files.test:8080/stall","path":"s2.bin","timeout":40}'
t0=$SECONDS
while [ $((SECONDS - t0)) -lt 15 ] && ! grep -q "POST /v1/sandboxes/$EB/fetch [0-9]* [0-9]*ms" "$SERVE_LOG"; do sleep 0.2; done
expect_eq "a fetch whose client hung up is stopped (not left for its 40 s)" "$((SECONDS - t0 < 10))" 1
check "no partial file (client gone)" absent "$EB" /tmp/s2.bin

# ---- clean end ------------------------------------------------------------------------
api DELETE "/v1/sandboxes/$EB"
expect_code "the egress box is deleted" 200
api DELETE "/v1/sandboxes/$NB"
serve_stop
expect_eq "the daemon stops cleanly" "$SERVE_RC" 0
check "the daemon's log holds no sanitizer report" not grep -q "Sanitizer\|runtime error" "$SERVE_LOG"
serve_finish
