#!/bin/bash
# husk's MCP server driven with raw JSON-RPC: what SDK clients never send.
# stdio (`husk mcp`): start-up that opens nothing, stdout holding only
# messages, batches, parse errors, invalid requests, notifications, era
# classification (initialize vs 2026-07-28 _meta), version negotiation,
# oversize lines, EOF.  HTTP (/mcp): authentication, GET 405, Origin and
# Host checks, 413, the 2026-07-28 headers (-32020), status codes, SSE
# headers, jobs across a daemon SIGKILL, and `husk mcp --server` in front.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../serve/serve.bash"
MCPDIR=$(cd "$(dirname "$0")" && pwd)


MV='"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}'
INIT='{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'

# stdio LINES...: run husk mcp on the lines; OUT is {"rc":..,"msgs":[...]}.
stdio() {
  OUT=$(printf '%s\n' "$@" | python3 "$MCPDIR/stdio_run.py" "$HUSK" mcp --data "$T_SCRATCH/sd" --wait 3 --quiet)
}
# q EXPR: a Python expression on the stdio result (o) or, with msgs by id, r(ID).
q() {
  python3 -c '
import json, sys
o = json.loads(sys.argv[1]) if sys.argv[1] else {"msgs": []}
def r(i):
    for m in o["msgs"]:
        if m.get("id") == i: return m
try:
    v = eval(sys.argv[2])
except Exception as e:
    v = "EXC %s" % e
print("true" if v is True else "false" if v is False else "" if v is None else v)' "$OUT" "$1"
}

# ---- stdio ---------------------------------------------------------------
stdio "$INIT" '{"jsonrpc":"2.0","method":"notifications/initialized"}' \
  '{"jsonrpc":"2.0","id":1,"method":"tools/list"}' '{"jsonrpc":"2.0","id":2,"method":"ping"}'
expect_eq "stdio: initialize answered with 2025-11-25" "$(q 'r(0)["result"]["protocolVersion"]')" 2025-11-25
check "stdio: the instructions name this server's wait (--wait 3)" grep -q "about 3 seconds" <<<"$(q 'r(0)["result"]["instructions"]')"
expect_eq "stdio: tools/list lists 18 tools" "$(q 'len(r(1)["result"]["tools"])')" 18
expect_eq "stdio: ping answers {}" "$(q 'r(2)["result"]')" "{}"
expect_eq "stdio: a notification gets no reply (3 requests, 3 replies)" "$(q 'len(o["msgs"])')" 3
expect_eq "stdio: exits 0 at stdin's EOF" "$(q 'o["rc"]')" 0
check "stdio: start-up and listing open nothing (no data directory created)" not test -e "$T_SCRATCH/sd"

stdio '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}' \
  '{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2026-07-28","capabilities":{}}}' \
  '{"jsonrpc":"2.0","id":3,"method":"initialize","params":{"protocolVersion":"1999-01-01","capabilities":{}}}' \
  '{"jsonrpc":"2.0","id":4,"method":"initialize","params":{}}'
expect_eq "initialize 2025-06-18 is accepted as is" "$(q 'r(1)["result"]["protocolVersion"]')" 2025-06-18
expect_eq "initialize never answers 2026-07-28" "$(q 'r(2)["result"]["protocolVersion"]')" 2025-11-25
expect_eq "initialize with an unknown version is offered 2025-11-25" "$(q 'r(3)["result"]["protocolVersion"]')" 2025-11-25
expect_eq "initialize without protocolVersion: -32602" "$(q 'r(4)["error"]["code"]')" -32602

stdio '[{"jsonrpc":"2.0","id":1,"method":"ping"}]' 'not json' '{"jsonrpc":"1.0","id":5,"method":"ping"}' \
  '{"jsonrpc":"2.0","id":null,"method":"ping"}' '{"jsonrpc":"2.0","id":6,"method":7}' \
  '{"jsonrpc":"2.0","id":7,"method":"tools/list","params":[1]}' '"a string"' \
  '{"jsonrpc":"2.0","id":8,"id":9,"method":"ping"}' \
  '{"jsonrpc":"2.0","id":10,"method":"nope/nope"}' \
  '{"jsonrpc":"2.0","method":"nope/notification"}' \
  '{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"run_code","arguments":[1]}}' \
  '{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{}}' \
  '{"jsonrpc":"2.0","id":13,"method":"resources/list"}' '{"jsonrpc":"2.0","id":14,"method":"prompts/list"}' \
  '{"jsonrpc":"2.0","id":15,"method":"resources/templates/list"}' \
  '{"jsonrpc":"2.0","id":16,"result":{}}'
expect_eq "a batch (top-level array) is -32600 with id null" \
  "$(q '[m["error"]["code"] for m in o["msgs"] if m["id"] is None and "batch" in m["error"]["message"]]')" "[-32600]"
expect_eq "invalid JSON and duplicate keys are -32700" "$(q '[m["error"]["code"] for m in o["msgs"] if m["id"] is None and m["error"]["code"] == -32700]')" "[-32700, -32700]"
expect_eq "jsonrpc other than 2.0 is -32600 (id kept)" "$(q 'r(5)["error"]["code"]')" -32600
expect_eq "a non-string method is -32600" "$(q 'r(6)["error"]["code"]')" -32600
expect_eq "params that are not an object: -32600" "$(q 'r(7)["error"]["code"]')" -32600
expect_eq "a null id and a non-object message: -32600 with id null" \
  "$(q 'len([m for m in o["msgs"] if m["id"] is None and m["error"]["code"] == -32600 and "batch" not in m["error"]["message"]])')" 2
expect_eq "unknown method: -32601" "$(q 'r(10)["error"]["code"]')" -32601
expect_eq "arguments that are not an object: -32602" "$(q 'r(11)["error"]["code"]')" -32602
expect_eq "tools/call without a name: -32602" "$(q 'r(12)["error"]["code"]')" -32602
expect_eq "without --resources and --prompts: no resources or prompts listed, the sandbox-file template" \
  "$(q '[r(13)["result"]["resources"], r(14)["result"]["prompts"], [t["uriTemplate"] for t in r(15)["result"]["resourceTemplates"]]]')" \
  "[[], [], ['husk://sandbox/{sandbox_id}/files/{+path}']]"
expect_eq "unknown notifications and responses get no reply (16 lines, 14 replies)" "$(q 'len(o["msgs"])')" 14

# 2026-07-28: every request carries its _meta protocol fields.
stdio "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"server/discover\",\"params\":{\"_meta\":{$MV}}}" \
  "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\",\"params\":{\"_meta\":{$MV}}}" \
  '{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2031-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}' \
  '{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}' \
  "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"initialize\",\"params\":{\"protocolVersion\":\"2025-11-25\",\"_meta\":{$MV}}}" \
  "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\",\"params\":{\"_meta\":{$MV}}}" \
  '{"jsonrpc":"2.0","id":7,"method":"server/discover"}'
expect_eq "server/discover offers 2026-07-28" "$(q 'r(1)["result"]["supportedVersions"]')" "['2026-07-28']"
expect_eq "discover: resultType, ttlMs, cacheScope, serverInfo in _meta" \
  "$(q 'r(1)["result"]["resultType"] + str(r(1)["result"]["ttlMs"] >= 0) + r(1)["result"]["cacheScope"] + r(1)["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"]')" "completeTruepublichusk"
expect_eq "modern tools/list: resultType, ttlMs and cacheScope" \
  "$(q '(r(2)["result"]["resultType"], "ttlMs" in r(2)["result"], r(2)["result"]["cacheScope"], len(r(2)["result"]["tools"]))')" "('complete', True, 'public', 18)"
expect_eq "unsupported protocol version: -32022 with the supported ones" \
  "$(q '(r(3)["error"]["code"], r(3)["error"]["data"]["supported"][0], r(3)["error"]["data"]["requested"])')" "(-32022, '2026-07-28', '2031-01-01')"
expect_eq "missing clientCapabilities: -32602" "$(q 'r(4)["error"]["code"]')" -32602
expect_eq "initialize in the 2026-07-28 era: -32601" "$(q 'r(5)["error"]["code"]')" -32601
expect_eq "ping in the 2026-07-28 era: -32601" "$(q 'r(6)["error"]["code"]')" -32601
expect_eq "server/discover without _meta: -32602" "$(q 'r(7)["error"]["code"]')" -32602

# A line over 5 MiB is refused, and the next one still answered.
python3 -c 'print("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":\"" + "a" * (5 << 20) + "\"}}"); print("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}")' >"$T_SCRATCH/big"
OUT=$(python3 "$MCPDIR/stdio_run.py" "$HUSK" mcp --data "$T_SCRATCH/sd" --quiet <"$T_SCRATCH/big")
expect_eq "an oversize message: -32600, then the next is answered" \
  "$(q '(o["msgs"][0]["error"]["code"], "large" in o["msgs"][0]["error"]["message"], r(2)["result"])')" "(-32600, True, {})"

# An id already used by a request in flight is refused (-32600); the first
# request goes on, and the id is free again once it is answered.
stdio "$INIT" '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_code","arguments":{"language":"bash","code":"sleep 1; echo first"}}}' \
  '{"jsonrpc":"2.0","id":1,"method":"ping"}' 'SLEEP 8' '{"jsonrpc":"2.0","id":1,"method":"ping"}'
expect_eq "stdio: a duplicate id in flight is refused, the first call answered, the id reusable after" \
  "$(q '[m["error"]["code"] if "error" in m else m["result"] if m["result"] == {} else "call" for m in o["msgs"] if m.get("id") == 1]')" \
  "[-32600, 'call', {}]"

# A tool call that keeps running when stdin ends: husk mcp still exits.
stdio "$INIT" '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_code","arguments":{"language":"bash","code":"echo hi"}}}' \
  'SLEEP 0' '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"run_code","arguments":{"language":"bash","code":"sleep 60"}}}'
expect_eq "stdio: exits at EOF with a call in flight" "$(q 'o["rc"]')" 0
# Its box still runs (boxes outlive the process, until their TTL); end it.
expect_eq "stdio: the sandbox left running is listed and destroyed by the next husk mcp" \
  "$(python3 "$MCPDIR/stdio_cleanup.py" "$HUSK" "$T_SCRATCH/sd")" 1
check "stdio: the data directory is private (0700)" test "$(stat -c %a "$T_SCRATCH/sd")" = 700

# ---- HTTP ------------------------------------------------------------------
if ! serve_start --mcp-wait 3; then
  not_ok "the daemon starts"
  finish
  exit 1
fi
new_tenant mcp-proto && KEY=$TKEY

# mcp BODY [CURL ARGS]: POST /mcp; CODE, BODY, HDRS.
mcp() {
  local body=$1; shift
  CODE=$(curl -sS -o "$T_SCRATCH/body" -D "$T_SCRATCH/hdrs" -w '%{http_code}' --max-time 60 \
    ${KEY:+-H "Authorization: Bearer $KEY"} -H 'Content-Type: application/json' \
    -H "Accept: ${ACCEPT:-application/json, text/event-stream}" "$@" --data-binary "$body" "$URL/mcp")
  BODY=$(cat "$T_SCRATCH/body")
  HDRS=$(tr -d '\r' <"$T_SCRATCH/hdrs")
}
modern() { # METHOD PARAMS-JSON-WITHOUT-BRACES [CURL ARGS]; HM overrides Mcp-Method
  local m=$1 p=$2; shift 2
  mcp "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"$m\",\"params\":{${p:+$p,}\"_meta\":{$MV}}}" \
    -H 'MCP-Protocol-Version: 2026-07-28' -H "Mcp-Method: ${HM:-$m}" "$@"
}

mcp "$INIT"
expect_code "HTTP: initialize 200" 200
expect_eq "HTTP: initialize answered 2025-11-25 as JSON" "$(jf 'j["result"]["protocolVersion"]')" 2025-11-25
check "HTTP: no session id is issued" not grep -qi '^mcp-session-id' <<<"$HDRS"
save=$KEY; KEY=""
mcp "$INIT"
expect_code "HTTP: no key is 401" 401
KEY=$ADMIN
mcp "$INIT"
expect_code "HTTP: the admin key is 403 (tenant keys only)" 403
KEY=$save
CODE=$(curl -s -o /dev/null -D "$T_SCRATCH/h" -w '%{http_code}' -H "Authorization: Bearer $KEY" "$URL/mcp")
expect_eq "HTTP: GET /mcp is 405" "$CODE" 405
check "HTTP: 405 says Allow: POST" grep -qi '^allow: POST' "$T_SCRATCH/h"
CODE=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE -H "Authorization: Bearer $KEY" "$URL/mcp")
expect_eq "HTTP: DELETE /mcp is 405" "$CODE" 405
# run_code's output files more than 4 levels down are named in a note, not dropped silently.
ACCEPT=application/json mcp '{"jsonrpc":"2.0","id":"deep","method":"tools/call","params":{"name":"run_code","arguments":{"language":"bash","code":"mkdir -p output/a/b/c/d/e && echo x > output/a/b/c/d/e/deep.txt && echo y > output/top.txt"}}}'
check "HTTP: run_code notes the output files it does not return (too deep)" \
  bash -c 'grep -q "more than 4 directory levels" <<<"$1" && grep -q "top.txt" <<<"$1"' _ "$BODY"

mcp "$INIT" -H 'Origin: https://evil.example'
expect_code "HTTP: a foreign Origin is 403" 403
mcp "$INIT" -H "Origin: http://localhost:1234"
expect_code "HTTP: a loopback Origin is fine" 200
mcp "$INIT" -H 'Host: evil.example:80'
expect_code "HTTP: on a loopback bind, a foreign Host is 403 (DNS rebinding)" 403
python3 -c 'print("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":\"" + "a" * (5 << 20) + "\"}}")' >"$T_SCRATCH/big"
mcp "@$T_SCRATCH/big"
expect_code "HTTP: a body over 5 MiB is 413" 413
expect_eq "HTTP: ... with a JSON-RPC error" "$(jf 'j["error"]["code"]')" -32600
mcp 'garbage'
expect_code "HTTP: invalid JSON is 400" 400
expect_eq "HTTP: ... -32700" "$(jf 'j["error"]["code"]')" -32700
mcp '[{"jsonrpc":"2.0","id":1,"method":"ping"}]'
expect_code "HTTP: a batch is 400" 400
expect_eq "HTTP: ... -32600" "$(jf 'j["error"]["code"]')" -32600
mcp '{"jsonrpc":"2.0","method":"notifications/initialized"}'
expect_code "HTTP: a notification is 202" 202
check "HTTP: ... with an empty body" test -z "$BODY"
mcp '{"jsonrpc":"2.0","id":1,"method":"ping"}' -H 'MCP-Protocol-Version: 1999-01-01'
expect_code "HTTP: an unsupported MCP-Protocol-Version header is 400" 400
expect_eq "HTTP: ... -32022" "$(jf 'j["error"]["code"]')" -32022
ACCEPT=application/json mcp '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nope"}}' -H 'MCP-Protocol-Version: 2025-11-25'
expect_eq "HTTP legacy: unknown tool -32602" "$(jf 'j["error"]["code"]')" -32602

modern tools/list ""
expect_code "HTTP 2026-07-28: tools/list 200" 200
expect_eq "HTTP 2026-07-28: resultType complete" "$(jf 'j["result"]["resultType"]')" complete
HM=tools/call modern tools/list ""
expect_code "HTTP 2026-07-28: Mcp-Method mismatch is 400" 400
expect_eq "HTTP 2026-07-28: ... -32020" "$(jf 'j["error"]["code"]')" -32020
mcp "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\",\"params\":{\"_meta\":{$MV}}}" -H 'Mcp-Method: tools/list'
expect_eq "HTTP 2026-07-28: missing MCP-Protocol-Version header is -32020" "$(jf 'j["error"]["code"]')" -32020
modern tools/call '"name":"sandbox_list","arguments":{}' -H 'Mcp-Name: run_code'
expect_eq "HTTP 2026-07-28: Mcp-Name mismatch is -32020" "$(jf 'j["error"]["code"]')" -32020
ACCEPT=application/json modern tools/call '"name":"sandbox_list","arguments":{}' -H 'Mcp-Name: sandbox_list'
expect_code "HTTP 2026-07-28: tools/call with matching headers 200" 200
expect_eq "HTTP 2026-07-28: ... as JSON when SSE is not accepted" "$(jf 'j["result"]["structuredContent"]["sandboxes"]')" "[]"
modern tools/call '"name":"sandbox_list","arguments":{}' -H 'Mcp-Name: =?base64?c2FuZGJveF9saXN0?='
expect_code "HTTP 2026-07-28: a base64 Mcp-Name sentinel is decoded" 200
modern tools/call '"name":"nope","arguments":{}' -H 'Mcp-Name: nope'
expect_code "HTTP 2026-07-28: unknown tool is 400" 400
expect_eq "HTTP 2026-07-28: ... -32602" "$(jf 'j["error"]["code"]')" -32602
modern initialize '"protocolVersion":"2025-11-25"'
expect_code "HTTP 2026-07-28: initialize is 404" 404
expect_eq "HTTP 2026-07-28: ... -32601" "$(jf 'j["error"]["code"]')" -32601
mcp '{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2031-01-01","io.modelcontextprotocol/clientCapabilities":{}}}}' \
  -H 'MCP-Protocol-Version: 2031-01-01' -H 'Mcp-Method: tools/list'
expect_code "HTTP 2026-07-28: unsupported version is 400" 400
expect_eq "HTTP 2026-07-28: ... -32022" "$(jf 'j["error"]["code"]')" -32022

# SSE replies to tool calls: the headers proxies need.
mcp '{"jsonrpc":"2.0","id":"s1","method":"tools/call","params":{"name":"run_code","arguments":{"language":"bash","code":"sleep 1.5; echo sse"},"_meta":{"progressToken":"tok"}}}'
check "HTTP: tools/call answers text/event-stream" grep -qi '^content-type: text/event-stream' <<<"$HDRS"
check "HTTP: ... with Cache-Control: no-cache" grep -qi '^cache-control: no-cache' <<<"$HDRS"
check "HTTP: ... and X-Accel-Buffering: no" grep -qi '^x-accel-buffering: no' <<<"$HDRS"
check "HTTP: ... progress, then the result" python3 -c '
import json, sys
ev = [json.loads(l[5:]) for l in sys.argv[1].splitlines() if l.startswith("data:")]
assert ev[0]["method"] == "notifications/progress" and ev[0]["params"]["progressToken"] == "tok", ev
assert ev[-1]["id"] == "s1" and ev[-1]["result"]["structuredContent"]["stdout"] == "sse\n", ev[-1]
' "$BODY"

# Audit: the tool calls with this tenant and key.
api GET "/v1/audit?action=mcp.run_code"
check "HTTP: tool calls are audited with tenant and key" python3 -c '
import json, sys
r = json.loads(sys.argv[1])["records"]
assert r and r[-1]["tenant_id"] == sys.argv[2] and r[-1]["key_id"].startswith("k_") and r[-1]["outcome"] == "ok", r
' "$BODY" "$TID"

# A job survives a daemon SIGKILL: its result is picked up by the next one.
export ACCEPT=application/json
mcp '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"sandbox_create","arguments":{}}}'
BOX=$(jf 'j["result"]["structuredContent"]["sandbox_id"]')
echo "$BOX $KEY" >>"$T_SCRATCH/boxes"
mcp "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"sandbox_exec\",\"arguments\":{\"sandbox_id\":\"$BOX\",\"command\":\"echo before; sleep 6; echo after\"}}}"
JOB=$(jf 'j["result"]["structuredContent"]["job_id"]')
expect_eq "a long exec answers running with a job_id" "$(jf 'j["result"]["structuredContent"]["status"]')" running
serve_kill9
serve_start --mcp-wait 20 --mcp-allow-origin https://claude.ai,https://app.example || not_ok "the daemon restarts"
mcp "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"job_wait\",\"arguments\":{\"job_id\":\"$JOB\"}}}"
expect_eq "after a SIGKILL and restart, job_wait returns the job's result" \
  "$(jf '(j["result"]["structuredContent"]["status"], j["result"]["structuredContent"]["stdout"])')" "('completed', 'before\\nafter\\n')"

mcp "$INIT" -H 'Origin: https://app.example'
expect_code "HTTP: an Origin listed in --mcp-allow-origin is allowed" 200
mcp "$INIT" -H 'Origin: https://claude.ai.evil.example'
expect_code "HTTP: ... and only that one" 403

# husk mcp --server: stdio in front of this daemon.
OUT=$(printf '%s\n' "$INIT" '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"run_code","arguments":{"language":"python","code":"print(2**10)"}}}' \
  | HUSK_MCP_KEY=$KEY python3 "$MCPDIR/stdio_run.py" "$HUSK" mcp --server "$URL" --quiet)
expect_eq "husk mcp --server forwards to husk serve" "$(q 'r(1)["result"]["structuredContent"]["stdout"].strip()')" 1024
# Cancellation through the forwarder: the notification reaches the daemon,
# which kills the command (the call itself gets no answer).  (Liveness is
# seen in /proc: each program has its own Landlock domain, so `kill -0` on
# another exec's process is refused whether it lives or not.)
OUT=$(printf '%s\n' "$INIT" \
  "{\"jsonrpc\":\"2.0\",\"id\":\"long\",\"method\":\"tools/call\",\"params\":{\"name\":\"sandbox_exec\",\"arguments\":{\"sandbox_id\":\"$BOX\",\"command\":\"echo \$\$ > /tmp/fwd.pid; exec sleep 300\"}}}" \
  'SLEEP 2' '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"long","reason":"test"}}' 'SLEEP 1' \
  "{\"jsonrpc\":\"2.0\",\"id\":\"check\",\"method\":\"tools/call\",\"params\":{\"name\":\"sandbox_exec\",\"arguments\":{\"sandbox_id\":\"$BOX\",\"command\":\"sleep 0.5; test -d /proc/\$(cat /tmp/fwd.pid) && echo alive || echo gone\"}}}" \
  | HUSK_MCP_KEY=$KEY python3 "$MCPDIR/stdio_run.py" "$HUSK" mcp --server "$URL" --quiet)
expect_eq "husk mcp --server forwards a cancellation: the command is killed, the call unanswered" \
  "$(q '(r("check")["result"]["structuredContent"]["stdout"].strip(), r("long"))')" "('gone', None)"
# A cancellation sent with another key of the same tenant (another agent
# that happens to use the same request id) does not touch the call.
save=$KEY; KEY=$ADMIN
api POST "/v1/tenants/$TID/keys"
KEY2=$(jf 'j["key"]'); KEY=$save
OUT=$( (printf '%s\n' "$INIT" \
  "{\"jsonrpc\":\"2.0\",\"id\":\"long2\",\"method\":\"tools/call\",\"params\":{\"name\":\"sandbox_exec\",\"arguments\":{\"sandbox_id\":\"$BOX\",\"command\":\"echo \$\$ > /tmp/fwd2.pid; exec sleep 300\"}}}" \
  'SLEEP 3' \
  "{\"jsonrpc\":\"2.0\",\"id\":\"check2\",\"method\":\"tools/call\",\"params\":{\"name\":\"sandbox_exec\",\"arguments\":{\"sandbox_id\":\"$BOX\",\"command\":\"sleep 0.5; test -d /proc/\$(cat /tmp/fwd2.pid) && echo alive || echo gone\"}}}" \
  'SLEEP 2' '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"long2","reason":"test"}}' 'SLEEP 1' \
  "{\"jsonrpc\":\"2.0\",\"id\":\"check3\",\"method\":\"tools/call\",\"params\":{\"name\":\"sandbox_exec\",\"arguments\":{\"sandbox_id\":\"$BOX\",\"command\":\"sleep 0.5; test -d /proc/\$(cat /tmp/fwd2.pid) && echo alive || echo gone\"}}}" \
  | HUSK_MCP_KEY=$KEY python3 "$MCPDIR/stdio_run.py" "$HUSK" mcp --server "$URL" --quiet) &
  sleep 1.5
  KEY=$KEY2 mcp '{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"long2","reason":"not yours"}}'
  echo "$CODE" >"$T_SCRATCH/cancel2.code"
  wait)
expect_eq "HTTP: another key's cancellation of a call with the same id is accepted (202)..." "$(cat "$T_SCRATCH/cancel2.code")" 202
expect_eq "... and leaves the call running; its own key's cancellation stops it" \
  "$(q '(r("check2")["result"]["structuredContent"]["stdout"].strip(), r("check3")["result"]["structuredContent"]["stdout"].strip(), r("long2"))')" "('alive', 'gone', None)"
OUT=$(printf '%s\n' "$INIT" | HUSK_MCP_KEY=hk_wrong python3 "$MCPDIR/stdio_run.py" "$HUSK" mcp --server "$URL" --quiet)
check "husk mcp --server with a bad key: a JSON-RPC error that says so" python3 -c '
import json, sys
m = json.loads(sys.argv[1])["msgs"][0]
assert m["error"]["code"] == -32603 and "401" in m["error"]["message"], m
' "$OUT"
api DELETE "/v1/sandboxes/$BOX"
expect_eq "no box is left running" "$(reap_boxes "$KEY")" 0
serve_stop
expect_eq "the daemon stops cleanly on SIGTERM (exit 0, no sanitizer report)" "$SERVE_RC" 0
serve_finish
