#!/bin/bash
# What a client may not do: reach another tenant's box (every route answers
# 404, as for an id that does not exist), and crash or confuse the daemon
# with bad input (each bad request gets its 4xx; the daemon keeps serving
# and nothing it holds is corrupted).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"

if ! serve_start; then
  not_ok "the daemon starts"
  serve_finish
  exit 1
fi
new_tenant alpha || not_ok "tenant alpha"
AKEY=$TKEY
new_tenant beta || not_ok "tenant beta"
BKEY=$TKEY
BTID=$TID

# ---- tenant isolation ----------------------------------------------------
KEY=$AKEY
new_box '{"metadata":{"who":"alpha"}}' || not_ok "alpha creates a box"
ABOX=$BOX
S=/v1/sandboxes/$ABOX
api PUT "$S/files?path=/workspace/secret.txt" --data-binary "alpha's data"
api POST "$S/exec" -d '{"cmd":["sleep","1010"],"background":true}'
APID=$(jf 'j["pid"]')
check "alpha has a background process" [ -n "$APID" ]

KEY=$BKEY
# Every route of a box, with beta's key: 404 like an unknown id.
matrix() { # METHOD PATH [CURL ARGS...]
  local m=$1 p=$2; shift 2
  api "$m" "$p" "$@"
  if [ "$CODE" = 404 ] && ! grep -q "alpha" <<<"$BODY"; then
    ok "isolation: $m ${p/$ABOX/<alpha-box>} -> 404"
  else
    not_ok "isolation: $m ${p/$ABOX/<alpha-box>} -> $CODE (want 404): $BODY"
  fi
}
matrix GET "$S"
matrix DELETE "$S"
matrix DELETE "$S?kill=1"
matrix POST "$S/timeout" -d '{"timeout":5}'
matrix GET "$S/metrics"
matrix POST "$S/exec" -d '{"cmd":["true"]}'
matrix POST "$S/exec" -d '{"cmd":["true"],"stream":true}'
matrix POST "$S/exec?format=ndjson" -d '{"cmd":["true"]}'
matrix POST "$S/exec" -d '{"cmd":["true"],"background":true}'
matrix GET "$S/processes"
matrix GET "$S/processes/$APID"
matrix DELETE "$S/processes/$APID"
matrix POST "$S/processes/$APID/signal" -d '{"signal":"KILL"}'
matrix POST "$S/processes/$APID/stdin" --data-binary x
matrix GET "$S/processes/$APID/output"
matrix GET "$S/processes/$APID/output?follow=1"
matrix GET "$S/files?path=/workspace/secret.txt"
matrix PUT "$S/files?path=/workspace/secret.txt" --data-binary "beta was here"
matrix DELETE "$S/files?path=/workspace/secret.txt"
matrix GET "$S/files/list?path=/workspace"
matrix GET "$S/files/stat?path=/workspace/secret.txt"
matrix POST "$S/files/mkdir" -d '{"path":"/workspace/b"}'
matrix POST "$S/files/move" -d '{"from":"/workspace/secret.txt","to":"/workspace/s2"}'
matrix GET "$S/files/tar?path=/workspace"
matrix PUT "$S/files/tar?path=/workspace" --data-binary @/dev/null
api GET /v1/sandboxes
expect_eq "isolation: beta's listing is empty" "$(jf 'len(j["sandboxes"])')" 0
api GET "/v1/sandboxes?metadata.who=alpha"
expect_eq "isolation: metadata filters don't cross tenants" "$(jf 'len(j["sandboxes"])')" 0
api GET "/v1/audit?box=$ABOX"
expect_eq "isolation: beta's audit shows only its own refused attempts on that id" \
  "$(jf 'sorted(set((r["tenant_id"], r["status"], r["outcome"]) for r in j["records"]))')" \
  "[[\"$BTID\", 404, \"error\"]]"
KEY=$AKEY
api GET "$S"
expect_eq "isolation: alpha's box still runs" "$(jf 'j["state"]')" running
api GET "$S/files?path=/workspace/secret.txt"
expect_eq "isolation: alpha's file untouched" "$BODY" "alpha's data"
api GET "$S/processes/$APID"
expect_eq "isolation: alpha's process untouched" "$(jf 'j["state"]')" running
api GET "/v1/audit?box=$ABOX"
check "isolation: beta's attempts are not in alpha's audit" not grep -q "$(cut -c1-12 <<<"$BKEY")" <<<"$BODY"

# ---- bad input: each gets its status, the daemon keeps serving ------------
KEY=$AKEY
bad() { # DESC WANT METHOD PATH [CURL ARGS...]
  local d=$1 want=$2 m=$3 p=$4; shift 4
  api "$m" "$p" "$@"
  local code=$CODE body=$BODY
  if [ "$code" = "$want" ] && healthy; then
    ok "bad input: $d -> $want"
  else
    not_ok "bad input: $d -> $code (want $want), healthy: $(healthy && echo yes || echo NO): $(head -c 200 <<<"$body")"
  fi
}
C=/v1/sandboxes
bad "malformed JSON" 400 POST $C -d '{"memory":'
bad "JSON array body" 400 POST $C -d '[1,2]'
bad "JSON string body" 400 POST $C -d '"box"'
bad "trailing garbage" 400 POST $C -d '{} x'
bad "network mode that does not exist" 400 POST $C -d '{"network":"wifi"}'
bad "egress settings that are not an object" 400 POST $C -d '{"network":"egress","egress":[]}'
bad "network of the wrong type" 400 POST $C -d '{"network":1}'
bad "duplicate keys" 400 POST $C -d '{"memory":"1G","memory":"2G"}'
bad "unknown field" 400 POST $C -d '{"memroy":"1G"}'
bad "negative memory" 400 POST $C -d '{"memory":-1}'
bad "memory as a float" 400 POST $C -d '{"memory":1e300}'
bad "memory: bad size" 400 POST $C -d '{"memory":"lots"}'
bad "memory: integer overflow" 400 POST $C -d '{"memory":999999999999999999999999}'
bad "memory: absurd" 400 POST $C -d '{"memory":"999T"}'
bad "memory: too small" 400 POST $C -d '{"memory":1024}'
bad "timeout 1e300" 400 POST $C -d '{"timeout":1e300}'
bad "negative timeout" 400 POST $C -d '{"timeout":-5}'
bad "timeout as a string" 400 POST $C -d '{"timeout":"10"}'
bad "timeout above the maximum" 400 POST $C -d '{"timeout":99999999}'
bad "cpus as a string" 400 POST $C -d '{"cpus":"two"}'
bad "zero cpus" 400 POST $C -d '{"cpus":0}'
bad "cpus that round to zero thousandths" 400 POST $C -d '{"cpus":0.0004}'
bad "fractional pids" 400 POST $C -d '{"pids":1.5}'
bad "pids out of range" 400 POST $C -d '{"pids":1}'
bad "disk out of range" 400 POST $C -d '{"disk":"5T"}'
bad "env as an array" 400 POST $C -d '{"env":["A=B"]}'
bad "env: bad name" 400 POST $C -d '{"env":{"1BAD":"x"}}'
bad "env: = in a name" 400 POST $C -d '{"env":{"A=B":"x"}}'
bad "env: number value" 400 POST $C -d '{"env":{"A":1}}'
bad "metadata: nested" 400 POST $C -d '{"metadata":{"k":{"n":1}}}'
bad "template: a number" 400 POST $C -d '{"template":7}'
bad "NUL escaped in a string" 400 POST $C -d '{"template":"a\u0000b"}'
printf '{"template":"\xff\xfe"}' >"$T_SCRATCH/badutf8"
bad "invalid UTF-8 in the body" 400 POST $C --data-binary @"$T_SCRATCH/badutf8"
python3 -c 'print("[" * 100000 + "]" * 100000)' >"$T_SCRATCH/deep"
bad "deeply nested JSON" 400 POST $C --data-binary @"$T_SCRATCH/deep"
head -c $((2 * 1024 * 1024)) /dev/zero | tr '\0' ' ' >"$T_SCRATCH/big"
bad "a 2 MiB JSON body" 413 POST $C --data-binary @"$T_SCRATCH/big"
bad "a 2 MiB chunked JSON body" 413 POST $C -H "Transfer-Encoding: chunked" -H "Expect:" --data-binary @"$T_SCRATCH/big"
printf 'X-Big: %s\r\n' "$(head -c 300000 /dev/zero | tr '\0' a)" >"$T_SCRATCH/hdr"
bad "300 KiB of headers" 431 GET /v1/health -H @"$T_SCRATCH/hdr"
printf 'Authorization: Bearer %s\r\n' "$(head -c 100000 /dev/zero | tr '\0' k)" >"$T_SCRATCH/hdr2"
KEY="" bad "a 100 KiB key" 401 GET $C -H @"$T_SCRATCH/hdr2"
printf 'Authorization: Bearer %s\r\n' "$(head -c 300000 /dev/zero | tr '\0' k)" >"$T_SCRATCH/hdr2"
KEY="" bad "a 300 KiB key" 431 GET $C -H @"$T_SCRATCH/hdr2"
bad "unknown route" 404 GET /v1/nothing
bad "unknown version" 404 GET /v2/sandboxes
bad "wrong method" 405 PATCH "$S"
check "405 says what is allowed" grep -qi '^allow: GET, HEAD, DELETE' <(curl -s -D - -o /dev/null -X PATCH -H "Authorization: Bearer $AKEY" "$URL$S")
bad "unknown box id" 404 GET "$C/b_000000000000000000000000"
bad "a 1000-character id" 404 GET "$C/$(head -c 1000 /dev/zero | tr '\0' b)"
bad "an id with dots" 404 GET "$C/..%2F..%2Fetc"
bad "a non-numeric pid" 404 GET "$S/processes/abc"
bad "a huge pid" 404 GET "$S/processes/99999999999999999999"
bad "exec: cmd as a string" 400 POST "$S/exec" -d '{"cmd":"ls"}'
bad "exec: empty cmd" 400 POST "$S/exec" -d '{"cmd":[]}'
bad "exec: cmd of numbers" 400 POST "$S/exec" -d '{"cmd":[1,2]}'
bad "exec: empty program" 400 POST "$S/exec" -d '{"cmd":[""]}'
bad "exec: no cmd" 400 POST "$S/exec" -d '{}'
bad "exec: timeout 1e300" 400 POST "$S/exec" -d '{"cmd":["true"],"timeout":1e300}'
bad "exec: relative cwd" 400 POST "$S/exec" -d '{"cmd":["true"],"cwd":"tmp"}'
bad "exec: stream not a bool" 400 POST "$S/exec" -d '{"cmd":["true"],"stream":"yes"}'
bad "exec: stdin not a string" 400 POST "$S/exec" -d '{"cmd":["true"],"stdin":[1]}'
bad "exec: bad format" 400 POST "$S/exec?format=xml" -d '{"cmd":["true"]}'
bad "timeout: zero" 400 POST "$S/timeout" -d '{"timeout":0}'
bad "timeout: missing" 400 POST "$S/timeout" -d '{}'
bad "signal: unknown name" 400 POST "$S/processes/$APID/signal" -d '{"signal":"NOPE"}'
bad "signal: out of range" 400 POST "$S/processes/$APID/signal" -d '{"signal":999}'
bad "signal: group not a bool" 400 POST "$S/processes/$APID/signal" -d '{"signal":15,"group":1}'
bad "output: bad stream" 400 GET "$S/processes/$APID/output?stream=stdin"
bad "output: negative offset" 400 GET "$S/processes/$APID/output?offset=-1"
bad "list: limit not a number" 400 GET "$C?limit=abc"
bad "list: limit too large" 400 GET "$C?limit=100000"
bad "list: forged cursor" 400 GET "$C?cursor=AAAA"
bad "files: no path" 400 GET "$S/files"
bad "files: NUL in the path" 400 GET "$S/files?path=/workspace/a%00b"
bad "files: empty path" 400 GET "$S/files?path="
bad "files: a 5000-byte path" 400 GET "$S/files?path=/workspace/$(head -c 5000 /dev/zero | tr '\0' a)"
bad "files: depth not a number" 400 GET "$S/files/list?path=/workspace&depth=x"
bad "files: recursive=maybe" 400 DELETE "$S/files?path=/workspace/x&recursive=maybe"
bad "files: bad mode" 400 PUT "$S/files?path=/workspace/x&mode=999" --data-binary x
bad "mkdir: path missing" 400 POST "$S/files/mkdir" -d '{"parents":true}'
bad "move: to missing" 400 POST "$S/files/move" -d '{"from":"/workspace/secret.txt"}'
bad "audit: since not a number" 400 GET "/v1/audit?since=yesterday"
KEY=$ADMIN
bad "tenant: no name" 400 POST /v1/tenants -d '{}'
bad "tenant: negative quota" 400 POST /v1/tenants -d '{"name":"x","max_boxes":-7}'
bad "tenant: control characters in the name" 400 POST /v1/tenants -d '{"name":"a\nb"}'
bad "quota of an unknown tenant" 404 PUT /v1/tenants/t_000000000000000000000000/quota -d '{"max_boxes":1}'
bad "key for an unknown tenant" 404 POST /v1/tenants/t_000000000000000000000000/keys
bad "revoke an unknown key" 404 DELETE "/v1/tenants/t_000000000000000000000000/keys/k_000000000000000000000000"
KEY=$AKEY
api GET "$S/files?path=/workspace/secret.txt" -H "Range: bytes=garbage"
expect_code "an unparsable Range is ignored (200, whole file)" 200

# Raw protocol abuse on the socket.
python3 - "${URL#http://}" <<'EOF'
import socket, sys
host, port = sys.argv[1].split(":")
for payload in [b"GARBAGE\r\n\r\n", b"\x00\x01\x02\xff" * 100, b"GET / HTTP/9.9\r\n\r\n",
                b"POST /v1/tenants HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
                b"POST /v1/tenants HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                b"GET /v1/health HTTP/1.1\r\nHost: x\r\n" + b"X: y\r\n" * 5000 + b"\r\n",
                b"GET /v1/health HTTP/1.1\r\n"]:
    s = socket.create_connection((host, int(port)))
    s.settimeout(2)
    try:
        s.sendall(payload)
        s.shutdown(socket.SHUT_WR)
        s.recv(100)
    except Exception:
        pass
    s.close()
EOF
check "raw protocol garbage: the daemon keeps serving" healthy
KEY=$AKEY
api GET "$S/files?path=/workspace/secret.txt"
expect_eq "after all that: alpha's file intact" "$BODY" "alpha's data"
api POST "$S/exec" -d '{"cmd":["echo","still fine"]}'
expect_eq "after all that: exec works" "$(jf 'j["stdout"]')" "still fine"
api GET /v1/sandboxes
expect_eq "after all that: alpha has exactly its one box" "$(jf 'len(j["sandboxes"])')" 1

# A malformed body is described by where it breaks, never by quoting it:
# it may be a secret's value.
KEY=$AKEY
api PUT /v1/secrets/LEAKY -d '{"value":"SUPERSECRETxyz123'
expect_code "a malformed secret body: 400" 400
check "the error names the position, not the value" bash -c '! grep -q SUPERSECRET <<<"$1" && grep -q "column" <<<"$1"' _ "$BODY"
check "nor does the daemon's log" not grep -q SUPERSECRET "$SERVE_LOG"

api DELETE "$S"
check "cleanup: alpha's box leaves nothing" wait_for 20 box_gone "$ABOX"
serve_stop
serve_finish
