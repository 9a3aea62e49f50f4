#!/bin/bash
# `husk serve` end to end through curl: health, admin (tenants, keys), the
# whole life of a box (create, exec sync/streamed/background, processes,
# files, tar, timeout, metrics, audit, delete), TTL expiry, graceful stop
# and restart.  No timing assertions: waits are "until X, at most N s".
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"

if ! serve_start; then
  not_ok "the daemon starts"
  serve_finish
  exit 1
fi
ok "the daemon starts and prints its port"
check "it says where the admin key comes from" grep -q '^husk: admin key from HUSK_ADMIN_KEY$' "$SERVE_LOG"
check "it never prints the admin key" not grep -qF "$ADMIN" "$SERVE_LOG"

# ---- health and authentication -------------------------------------------
KEY=""
api GET /v1/health
expect_code "health needs no key" 200
expect_eq "health: status ok" "$(jf 'j["status"]')" ok
check "health: a version" [ -n "$(jf 'j["version"]')" ]

api GET /v1/sandboxes
expect_code "no key: 401" 401
expect_eq "errors are {error:{code,message}}" "$(jf 'j["error"]["code"]')" unauthorized
KEY="hk_not_a_real_key_at_all_0000000000000000000"
api GET /v1/sandboxes
expect_code "unknown key: 401" 401
api GET /v1/sandboxes -H "Authorization: Basic Zm9vOmJhcg=="
expect_code "not a bearer key: 401" 401

# ---- admin: tenants and keys ---------------------------------------------
KEY=$ADMIN
api POST /v1/tenants -d '{"name":"acme","max_boxes":20,"max_memory":"16G"}'
expect_code "admin creates a tenant" 201
TID=$(jf 'j["id"]')
expect_eq "tenant quota max_memory in bytes" "$(jf 'j["max_memory"]')" 17179869184
api POST /v1/tenants -d '{"name":"acme"}'
expect_code "a taken tenant name: 409" 409
api GET /v1/tenants
check "the tenant list has it" grep -q "$TID" <<<"$BODY"
api POST "/v1/tenants/$TID/keys"
expect_code "admin creates a key" 201
TKEY=$(jf 'j["key"]')
KID=$(jf 'j["id"]')
check "the key is handed out once, as hk_..." grep -q '^hk_' <<<"$TKEY"
api GET "/v1/tenants/$TID"
check "the tenant view lists keys without the secret" not grep -qF "$TKEY" <<<"$BODY"
expect_eq "the tenant view lists the key id" "$(jf 'j["keys"][0]["id"]')" "$KID"
api PUT "/v1/tenants/$TID/quota" -d '{"max_boxes":30}'
expect_code "admin changes a quota" 200
expect_eq "the quota changed, the other kept" "$(jf '[j["max_boxes"], j["max_memory"]]')" "[30, 17179869184]"
api POST "/v1/tenants/$TID/keys"
KEY2=$(jf 'j["key"]')
KID2=$(jf 'j["id"]')
api DELETE "/v1/tenants/$TID/keys/$KID2"
expect_code "admin revokes a key" 204
KEY=$KEY2
api GET /v1/sandboxes
expect_code "a revoked key: 401" 401
KEY=$TKEY
api GET /v1/tenants
expect_code "a tenant key on an admin route: 403" 403
KEY=$ADMIN
api GET /v1/sandboxes
expect_code "the admin key on a tenant route: 403" 403

# quotas
SAVE=("$TID" "$TKEY" "$KID")
new_tenant tiny '"max_boxes":1,"max_memory":"1G"' || not_ok "a tenant with a quota"
KEY=$TKEY
new_box '{"memory":"256M"}'
expect_code "quota: the first box" 201
QBOX=$BOX
new_box '{"memory":"256M"}'
expect_code "quota: a second box is over max_boxes: 403" 403
expect_eq "quota: code quota_exceeded" "$(jf 'j["error"]["code"]')" quota_exceeded
api DELETE "/v1/sandboxes/$QBOX"
new_box '{"memory":"2G"}'
expect_code "quota: over max_memory: 403" 403
new_box '{"memory":"256M"}'
expect_code "quota: room again after a delete" 201
api DELETE "/v1/sandboxes/$BOX"
TID=${SAVE[0]} TKEY=${SAVE[1]} KID=${SAVE[2]}

# ---- a box's life --------------------------------------------------------
KEY=$TKEY
new_box '{"memory":"256M","cpus":0.5,"pids":64,"disk":"64M","timeout":600,"env":{"FOO":"bar"},"metadata":{"owner":"t1","job":"j-1"}}'
expect_code "create a box" 201
expect_eq "created: running" "$(jf 'j["state"]')" running
expect_eq "created: limits" "$(jf '[j["limits"]["memory"], j["limits"]["cpus"], j["limits"]["pids"], j["limits"]["disk"], j["limits"]["timeout"]]')" "[268435456, 0.5, 64, 67108864, 600.0]"
expect_eq "created: metadata" "$(jf 'j["metadata"]["owner"]')" t1
check "created: an expiry" [ -n "$(jf 'j["expires_at"]')" ]
check "created: no env values in the reply" not grep -q bar <<<"$BODY"
S=/v1/sandboxes/$BOX

api GET "$S"
expect_code "get the box" 200
api GET "/v1/sandboxes?state=running&metadata.owner=t1"
check "list by metadata finds it" grep -q "$BOX" <<<"$BODY"
api GET "/v1/sandboxes?metadata.owner=nobody"
expect_eq "list by other metadata: empty" "$(jf 'len(j["sandboxes"])')" 0
new_box '{"metadata":{"owner":"t1"}}'
BOXB=$BOX
BOX=${S#/v1/sandboxes/}
api GET "/v1/sandboxes?limit=1"
NEXT=$(jf 'j["next_cursor"]')
FIRST=$(jf 'j["sandboxes"][0]["id"]')
check "pagination: a cursor after a full page" [ -n "$NEXT" ]
api GET "/v1/sandboxes?limit=1&cursor=$NEXT"
check "pagination: the next page has another box" [ -n "$(jf 'j["sandboxes"][0]["id"]')" ] && [ "$(jf 'j["sandboxes"][0]["id"]')" != "$FIRST" ]
api DELETE "/v1/sandboxes/$BOXB"

# sync exec
api POST "$S/exec" -d '{"cmd":["sh","-c","echo $FOO; echo oops >&2; exit 3"]}'
expect_code "exec: 200" 200
expect_eq "exec: stdout (box env applied)" "$(jf 'j["stdout"]')" bar
expect_eq "exec: stderr" "$(jf 'j["stderr"]')" oops
expect_eq "exec: exit code and reason" "$(jf '[j["exit_code"], j["reason"]]')" '[3, "exited"]'
api POST "$S/exec" -d '{"cmd":["sh","-c","echo $FOO $X"],"env":{"FOO":"over","X":"y"}}'
expect_eq "exec: request env over the box's" "$(jf 'j["stdout"]')" "over y"
api POST "$S/exec" -d '{"cmd":["cat"],"stdin":"from stdin"}'
expect_eq "exec: stdin" "$(jf 'j["stdout"]')" "from stdin"
api POST "$S/exec" -d '{"cmd":["cat"]}'
expect_eq "exec without stdin: EOF at once" "$(jf '[j["exit_code"], j["stdout"]]')" '[0, ""]'
api POST "$S/exec" -d '{"cmd":["pwd"],"cwd":"/tmp"}'
expect_eq "exec: cwd" "$(jf 'j["stdout"]')" /tmp
api POST "$S/exec" -d '{"cmd":["printf","\\377A"]}'
expect_eq "exec: non-UTF-8 output in stdout_b64" "$(jf 'j["stdout_b64"]')" "/0E="
api POST "$S/exec" -d '{"cmd":["no-such-program-x"]}'
expect_eq "exec: command not found is 127" "$(jf 'j["exit_code"]')" 127
api POST "$S/exec" -d '{"cmd":["sleep","30"],"timeout":0.5}'
expect_eq "exec: timeout" "$(jf 'j["reason"]')" timeout
api POST "$S/exec" -d '{"cmd":["sh","-c","head -c 5000 /dev/zero"],"output_limit":1000}'
expect_eq "exec: output limit" "$(jf '[j["truncated"], j["reason"], len(j["stdout"])]')" '[true, "output", 1000]'

# streaming exec: the first event arrives while the program is still
# blocked (on a FIFO this test opens only after seeing the event).
api POST "$S/exec" -d '{"cmd":["mkfifo","/workspace/gate"]}'
curl -sS -N -X POST -H "Authorization: Bearer $TKEY" "$URL$S/exec" \
  -d '{"cmd":["sh","-c","echo first; read x < /workspace/gate; echo second:$x"],"stream":true}' \
  >"$T_SCRATCH/sse" 2>&1 &
CURL=$!
wait_for 20 grep -q '"first' "$T_SCRATCH/sse"
check "stream: first chunk arrives while the program runs" grep -q '^data: {"data":"first\\n"}$' "$T_SCRATCH/sse"
check "stream: no exit event yet (the program waits on the FIFO)" not grep -q '^event: exit' "$T_SCRATCH/sse"
api POST "$S/exec" -d '{"cmd":["sh","-c","echo go > /workspace/gate"]}'
wait "$CURL"
check "stream: the rest after the FIFO opened" grep -q '"second:go' "$T_SCRATCH/sse"
check "stream: events are typed" grep -q '^event: stdout$' "$T_SCRATCH/sse"
check "stream: ends with the exit event" grep -q '^event: exit$' "$T_SCRATCH/sse"
check "stream: exit event carries the result" grep -q '"exit_code":0,"reason":"exited"' "$T_SCRATCH/sse"

api POST "$S/exec?format=ndjson" -d '{"cmd":["sh","-c","echo o; echo e >&2; exit 4"]}'
expect_eq "ndjson: one JSON object per line, typed" \
  "$(python3 -c 'import json,sys; print([json.loads(l)["type"] for l in sys.stdin.read().splitlines()][-1])' <<<"$BODY")" exit
check "ndjson: stderr line" grep -q '{"type":"stderr","data":"e\\n"}' <<<"$BODY"
api POST "$S/exec" -H "Accept: application/x-ndjson" -d '{"cmd":["true"]}'
check "ndjson by Accept header" grep -q '"type":"exit"' <<<"$BODY"

# a client that goes away cancels its streamed exec
curl -sS -N -X POST -H "Authorization: Bearer $TKEY" "$URL$S/exec" \
  -d '{"cmd":["sh","-c","echo ready; exec sleep 1001"],"stream":true}' >"$T_SCRATCH/sse2" 2>&1 &
CURL=$!
wait_for 20 grep -q ready "$T_SCRATCH/sse2"
check "stream to be cancelled: the program runs" wait_for 20 has_box_proc "$BOX" "sleep 1001"
kill "$CURL"
wait "$CURL" 2>/dev/null
check "stream: client gone -> the program is killed" wait_for 20 no_box_procs_matching "$BOX" "sleep 1001"
# ... and a sync exec too
curl -sS -X POST -H "Authorization: Bearer $TKEY" "$URL$S/exec" -d '{"cmd":["sleep","1002"]}' >/dev/null 2>&1 &
CURL=$!
wait_for 20 has_box_proc "$BOX" "sleep 1002"
kill "$CURL"
wait "$CURL" 2>/dev/null
check "sync exec: client gone -> the program is killed" wait_for 20 no_box_procs_matching "$BOX" "sleep 1002"

# background processes
api POST "$S/exec" -d '{"cmd":["sh","-c","echo hello; echo warn >&2; sleep 1003 & sleep 1003"],"background":true}'
expect_code "background exec: 201" 201
PID=$(jf 'j["pid"]')
expect_eq "background exec: running" "$(jf 'j["state"]')" running
api GET "$S/processes"
check "process list has it" grep -q "\"pid\":$PID" <<<"$BODY"
api GET "$S/processes/$PID"
expect_eq "process get" "$(jf 'j["cmd"][0]')" sh
got_hello() { api GET "$S/processes/$PID/output"; [ "$BODY" = hello ]; }
check "background output" wait_for 20 got_hello
api GET "$S/processes/$PID/output?offset=2"
expect_eq "output from an offset (reconnect)" "$BODY" llo
api GET "$S/processes/$PID/output?stream=stderr"
expect_eq "stderr output" "$BODY" warn
curl -sS -N -H "Authorization: Bearer $TKEY" "$URL$S/processes/$PID/output?follow=1" >"$T_SCRATCH/follow" 2>&1 &
CURL=$!
wait_for 20 grep -q '"hello' "$T_SCRATCH/follow"
check "follow: the output so far, as SSE with offsets" grep -q '^data: {"data":"hello\\n","offset":6}$' "$T_SCRATCH/follow"
check "two sleeps run (one in the background of sh)" [ "$(box_procs_matching "$BOX" "sleep 1003" | wc -l)" -ge 2 ]
api DELETE "$S/processes/$PID"
expect_code "kill the process group: 204" 204
check "group kill: both sleeps gone" wait_for 20 no_box_procs_matching "$BOX" "sleep 1003"
wait "$CURL"
check "follow ends with the exit event" grep -q '^event: exit$' "$T_SCRATCH/follow"
exited9() { api GET "$S/processes/$PID"; [ "$(jf '[j["state"], j["signal"]]')" = '["exited", 9]' ]; }
check "the process is recorded as killed by signal 9" wait_for 20 exited9
api DELETE "$S/processes/$PID"
expect_code "killing an ended process: 409" 409
api GET "$S/processes/99999"
expect_code "unknown pid: 404" 404

api POST "$S/exec" -d '{"cmd":["sh","-c","read l; echo got:$l"],"background":true}'
PID=$(jf 'j["pid"]')
api POST "$S/processes/$PID/stdin?eof=1" --data-binary $'xyz\n'
expect_code "stdin to a process" 200
got_xyz() { api GET "$S/processes/$PID/output"; [ "$BODY" = got:xyz ]; }
check "the process read it" wait_for 20 got_xyz
exited0() { api GET "$S/processes/$PID"; [ "$(jf '[j["state"], j["exit_code"]]')" = '["exited", 0]' ]; }
check "it ended by itself" wait_for 20 exited0
api POST "$S/processes/$PID/stdin?eof=1"
expect_code "closing the stdin of an ended process: 200 (nothing left to close)" 200
api POST "$S/processes/$PID/stdin" --data-binary 'more'
expect_code "writing to the stdin of an ended process: 409" 409

api POST "$S/exec" -d '{"cmd":["sleep","1004"],"background":true}'
PID=$(jf 'j["pid"]')
api POST "$S/processes/$PID/signal" -d '{"signal":"TERM"}'
expect_code "signal by name" 200
exited15() { api GET "$S/processes/$PID"; [ "$(jf '[j["state"], j["signal"]]')" = '["exited", 15]' ]; }
check "signal delivered (SIGTERM)" wait_for 20 exited15

# files
head -c 100000 /dev/urandom >"$T_SCRATCH/f1"
api PUT "$S/files?path=/workspace/dir/f1.bin&mkdirs=1" --data-binary @"$T_SCRATCH/f1"
expect_code "upload a file: 201" 201
expect_eq "upload: size" "$(jf 'j["size"]')" 100000
api GET "$S/files?path=dir/f1.bin"
cp "$T_SCRATCH/body" "$T_SCRATCH/f1.back"
check "download: the same bytes (relative path = /workspace)" cmp -s "$T_SCRATCH/f1" "$T_SCRATCH/f1.back"
api POST "$S/exec" -d '{"cmd":["sha256sum","/workspace/dir/f1.bin"]}'
expect_eq "the box sees the uploaded file" "$(jf 'j["stdout"].split()[0]')" "$(sha256sum "$T_SCRATCH/f1" | cut -d' ' -f1)"
api POST "$S/exec" -d '{"cmd":["stat","-c","%u:%g %a","/workspace/dir/f1.bin"]}'
expect_eq "uploaded file: the box user's, 0644" "$(jf 'j["stdout"]')" "1000:1000 644"
api GET "$S/files?path=/workspace/dir/f1.bin" -H "Range: bytes=10-19" -D "$T_SCRATCH/hdr"
expect_code "range: 206" 206
check "range: the right bytes" cmp -s <(tail -c +11 "$T_SCRATCH/f1" | head -c 10) "$T_SCRATCH/body"
check "range: Content-Range" grep -qi '^content-range: bytes 10-19/100000' "$T_SCRATCH/hdr"
api GET "$S/files?path=/workspace/dir/f1.bin" -H "Range: bytes=-5"
check "suffix range: the last bytes" cmp -s <(tail -c 5 "$T_SCRATCH/f1") "$T_SCRATCH/body"
api GET "$S/files?path=/workspace/dir/f1.bin" -H "Range: bytes=100000-" -D "$T_SCRATCH/hdr"
expect_code "range past the end: 416" 416
check "416: Content-Range */size" grep -qi '^content-range: bytes \*/100000' "$T_SCRATCH/hdr"
curl -sS -I -H "Authorization: Bearer $TKEY" "$URL$S/files?path=/workspace/dir/f1.bin" >"$T_SCRATCH/hdr"
check "HEAD: Content-Length" grep -qi '^content-length: 100000' "$T_SCRATCH/hdr"
check "HEAD: Accept-Ranges" grep -qi '^accept-ranges: bytes' "$T_SCRATCH/hdr"
api GET "$S/files/list?path=/workspace&depth=2"
check "list: the file, with its depth" grep -q '"path":"/workspace/dir/f1.bin","type":"file","size":100000' <<<"$BODY"
api GET "$S/files/stat?path=/workspace/dir"
expect_eq "stat: a directory" "$(jf 'j["type"]')" dir
api POST "$S/files/mkdir" -d '{"path":"/workspace/a/b/c","parents":true}'
expect_code "mkdir -p" 201
api POST "$S/files/mkdir" -d '{"path":"/workspace/a/b/c"}'
expect_code "mkdir of an existing directory: 409" 409
api POST "$S/files/move" -d '{"from":"/workspace/dir/f1.bin","to":"/workspace/a/b/c/moved.bin"}'
expect_code "move" 200
api GET "$S/files/stat?path=/workspace/a/b/c/moved.bin"
expect_eq "moved: there" "$(jf 'j["size"]')" 100000
api PUT "$S/files?path=/workspace/other" --data-binary x
api POST "$S/files/move" -d '{"from":"/workspace/other","to":"/workspace/a/b/c/moved.bin"}'
expect_code "move onto a file without overwrite: 409" 409
api POST "$S/files/move" -d '{"from":"/workspace/other","to":"/workspace/a/b/c/moved.bin","overwrite":true}'
expect_code "move with overwrite" 200
api DELETE "$S/files?path=/workspace/a"
expect_code "remove a non-empty directory without recursive: 409" 409
api DELETE "$S/files?path=/workspace/a&recursive=1"
expect_code "recursive remove: 204" 204
api GET "$S/files/stat?path=/workspace/a"
expect_code "removed: 404" 404
api GET "$S/files?path=/workspace/nope"
expect_code "download of a missing file: 404" 404
api GET "$S/files?path=/workspace"
expect_code "download of a directory: 400" 400

# tar both ways
mkdir -p "$T_SCRATCH/tree/sub/deeper"
echo one >"$T_SCRATCH/tree/one.txt"
head -c 300000 /dev/urandom >"$T_SCRATCH/tree/sub/blob"
echo deep >"$T_SCRATCH/tree/sub/deeper/x"
ln -s one.txt "$T_SCRATCH/tree/link"
tar -C "$T_SCRATCH/tree" -cf "$T_SCRATCH/in.tar" .
api PUT "$S/files/tar?path=/workspace/t" --data-binary @"$T_SCRATCH/in.tar"
expect_code "tar upload" 200
api POST "$S/exec" -d '{"cmd":["sh","-c","cd /workspace/t && cat one.txt sub/deeper/x && readlink link && stat -c %s sub/blob"]}'
expect_eq "tar upload: files, symlink, sizes" "$(jf 'j["stdout"]')" $'one\ndeep\none.txt\n300000'
api GET "$S/files/tar?path=/workspace/t" -D "$T_SCRATCH/hdr"
expect_code "tar download" 200
check "tar download is chunked" grep -qi '^transfer-encoding: chunked' "$T_SCRATCH/hdr"
mkdir -p "$T_SCRATCH/out"
check "tar download: a valid archive" tar -C "$T_SCRATCH/out" -xf "$T_SCRATCH/body"
check "tar round trip: same tree" diff -r "$T_SCRATCH/tree" "$T_SCRATCH/out"
tar -C "$T_SCRATCH/tree" -czf - . >"$T_SCRATCH/in.tgz"
api PUT "$S/files/tar?path=/workspace/tz" --data-binary @"$T_SCRATCH/in.tgz"
expect_code "gzip tar upload" 200
head -c 20000 /dev/urandom >"$T_SCRATCH/junk"
api PUT "$S/files/tar?path=/workspace/junk" --data-binary @"$T_SCRATCH/junk"
expect_code "garbage as a tar: 400" 400
api GET "$S/files/tar?path=/workspace/nope"
expect_code "tar of a missing directory: 404" 404

# timeout, metrics
api POST "$S/timeout" -d '{"timeout":900}'
expect_code "set a new timeout" 200
check "the expiry moved" [ -n "$(jf 'j["expires_at"]')" ]
api GET "$S/metrics"
expect_code "metrics" 200
check "metrics: memory in use" [ "$(jf 'j["memory_current"]')" -gt 0 ]
check "metrics: disk total" [ "$(jf 'j["disk_total"]')" -gt 0 ]

# TTL expiry
new_box '{"timeout":1}'
SHORT=$BOX
expired() { api GET "/v1/sandboxes/$SHORT"; [ "$(jf 'j["state"]')" = expired ]; }
check "a 1 s box expires by itself" wait_for 30 expired
check "an expired box leaves nothing" wait_for 20 box_gone "$SHORT"
api POST "/v1/sandboxes/$SHORT/exec" -d '{"cmd":["true"]}'
expect_code "exec in an expired box: 409" 409

# audit
api GET "/v1/audit?box=${S#/v1/sandboxes/}"
expect_code "audit of a box" 200
check "audit: the create" grep -q '"action":"sandbox.create"' <<<"$BODY"
check "audit: execs with argv[0] only" grep -q '"action":"sandbox.exec","box_id":"[^"]*","detail":"sh"' <<<"$BODY"
check "audit: no arguments or env values" not grep -qE 'FOO|echo|oops|bar' <<<"$BODY"
check "audit: file writes name the path" grep -q '"action":"files.write","box_id":"[^"]*","detail":"/workspace/dir/f1.bin"' <<<"$BODY"
check "audit: the key id" grep -q "\"key_id\":\"$KID\"" <<<"$BODY"
api GET "/v1/audit?action=sandbox.exec&limit=2"
expect_eq "audit: filtered and paged" "$(jf '[len(j["records"]), j["next_after"] is not None]')" "[2, true]"
KEY=$ADMIN
api GET "/v1/audit?action=tenant.create"
check "admin sees its own actions" grep -q '"action":"tenant.create"' <<<"$BODY"
KEY=$TKEY

# delete
BOX=${S#/v1/sandboxes/}
api DELETE "$S"
expect_code "delete: 200" 200
expect_eq "delete: final state" "$(jf 'j["state"]')" stopped
api GET "$S"
expect_eq "deleted box: stopped" "$(jf 'j["state"]')" stopped
api POST "$S/exec" -d '{"cmd":["true"]}'
expect_code "exec in a deleted box: 409" 409
api GET "$S/files?path=/workspace/x"
expect_code "files of a deleted box: 409" 409
check "a deleted box leaves nothing" wait_for 20 box_gone "$BOX"

# ---- graceful stop and restart -------------------------------------------
new_box '{"timeout":600}'
api POST "/v1/sandboxes/$BOX/exec" -d '{"cmd":["sleep","1005"],"background":true}'
PID=$(jf 'j["pid"]')
curl -sS -X POST -H "Authorization: Bearer $TKEY" "$URL/v1/sandboxes/$BOX/exec" \
  -d '{"cmd":["sh","-c","sleep 2; echo finished"]}' >"$T_SCRATCH/inflight" 2>&1 &
CURL=$!
wait_for 20 has_box_proc "$BOX" "sleep 2"
serve_stop
expect_eq "SIGTERM: the daemon exits 0" "$SERVE_RC" 0
wait "$CURL"
check "SIGTERM: the request in flight finished" grep -q '"stdout":"finished\\n"' "$T_SCRATCH/inflight"
check "SIGTERM: boxes keep running" has_box_proc "$BOX" "sleep 1005"
serve_start
check "restart on the same data" healthy
api GET "/v1/sandboxes/$BOX"
expect_eq "restart: the box is running" "$(jf 'j["state"]')" running
api POST "/v1/sandboxes/$BOX/exec" -d '{"cmd":["echo","again"]}'
expect_eq "restart: exec works in the adopted box" "$(jf 'j["stdout"]')" again
api GET "/v1/sandboxes/$BOX/processes/$PID"
expect_eq "restart: the background process is known" "$(jf 'j["pid"]')" "$PID"
api DELETE "/v1/sandboxes/$BOX"
check "restart: delete leaves nothing" wait_for 20 box_gone "$BOX"
check "the daemon is still healthy" healthy

serve_stop
serve_finish
