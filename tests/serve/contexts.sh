#!/bin/bash
# Code contexts over HTTP: state kept across executions, isolation between
# contexts and tenants, restart, interrupt, timeout, rich results
# (matplotlib PNG, pandas HTML, _repr_svg_), errors with the user's line,
# capped output, input(), an interpreter that kills itself, daemons of a
# deleted context, bash and javascript, NDJSON and SSE streams, a daemon
# restart, and the errors of bad requests.  No timing assertions: waits
# are "until X, at most N s".
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"

if ! serve_start; then
  not_ok "the daemon starts"
  serve_finish
  exit 1
fi

new_tenant ctx-a || not_ok "tenant A"
KEY_A=$TKEY
new_tenant ctx-b || not_ok "tenant B"
KEY_B=$TKEY
KEY=$KEY_A
new_box '{"memory":"1G","timeout":1200}' || not_ok "a box"
CX="/v1/sandboxes/$BOX/contexts"

# body CODE [KEY=JSON...]: an execute body.
body() {
  python3 -c '
import json, sys
b = {"code": sys.argv[1]}
for kv in sys.argv[2:]:
    k, v = kv.split("=", 1)
    b[k] = json.loads(v)
print(json.dumps(b))' "$@"
}
# ex CTX CODE [KEY=JSON...]: one execution, one JSON reply (CODE, BODY).
ex() {
  local c=$1; shift
  api POST "$CX/$c/execute" -d "$(body "$@")"
}
main_text() { jf '[r["data"].get("text/plain") for r in j["results"] if r["is_main_result"]][0]'; }

# ---- state across calls, default contexts ---------------------------------
ex default 'x = 41'
expect_code "default python context: first execution" 200
expect_eq "it ran ok" "$(jf 'j["status"]')" ok
ex default 'x + 1'
expect_eq "state is kept: x + 1 is 42" "$(main_text)" 42
expect_eq "execution_count counts" "$(jf 'j["execution_count"]')" 2
ex default-python 'x'
expect_eq "default-python is the same context" "$(main_text)" 41
api GET "$CX/default-python"
expect_code "GET a default context" 200
expect_eq "its language" "$(jf 'j["language"]')" python
check "it has created_at and started_at" [ -n "$(jf 'j["created_at"]')" -a -n "$(jf 'j["started_at"]')" ]
check "its state is idle" [ "$(jf 'j["state"]')" = idle ]
ex default 'print("hi"); import sys; print("oops", file=sys.stderr)'
expect_eq "stdout" "$(jf 'j["stdout"]')" hi
expect_eq "stderr" "$(jf 'j["stderr"]')" oops

# ---- created contexts: isolation, restart, list, delete --------------------
api POST "$CX" -d '{"language":"python","cwd":"/tmp","env":{"GREETING":"hello"}}'
expect_code "create a context" 201
C1=$(jf 'j["id"]')
check "it has an id, a pid and a version" [ -n "$C1" -a "$(jf 'j["pid"]')" -gt 0 ]
expect_eq "its cwd" "$(jf 'j["cwd"]')" /tmp
api POST "$CX" -d '{}'
expect_code "create another (python by default)" 201
C2=$(jf 'j["id"]')
ex "$C1" 'import os; y = 1; (os.getcwd(), os.environ["GREETING"])'
expect_eq "cwd and env of the context" "$(main_text)" "('/tmp', 'hello')"
ex "$C2" 'y'
expect_eq "two contexts are isolated: NameError" "$(jf 'j["error"]["name"]')" NameError
api GET "$CX"
expect_code "list" 200
check "the list has both and the default" [ "$(jf 'len(j["contexts"])')" = 3 ]
api POST "$CX/$C1/restart"
expect_code "restart" 200
expect_eq "restart: same id" "$(jf 'j["id"]')" "$C1"
expect_eq "restart: count is 0" "$(jf 'j["execution_count"]')" 0
ex "$C1" 'y'
expect_eq "restart clears state" "$(jf 'j["error"]["name"]')" NameError

# ---- interrupt and timeout -------------------------------------------------
curl -s -o "$T_SCRATCH/spin" --max-time 60 -H "Authorization: Bearer $KEY" -X POST \
  "$URL$CX/$C2/execute" -d '{"code":"while True: pass"}' &
SPIN=$!
busy() { api GET "$CX/$C2"; [ "$(jf 'j["state"]')" = busy ]; }
check "a long execution makes the context busy" wait_for 20 busy
ex "$C2" '1'
expect_code "execute on a busy context: 409" 409
check "the 409 says the context is busy" grep -q "running another execution" <<<"$BODY"
api POST "$CX/$C2/execute" -H 'Accept: application/x-ndjson' -d '{"code":"1"}'
expect_code "a streamed execute on a busy context: 409 too" 409
api POST "$CX/$C2/interrupt"
expect_code "interrupt: 204" 204
wait "$SPIN"
BODY=$(cat "$T_SCRATCH/spin")
expect_eq "the interrupted execution says interrupted" "$(jf 'j["status"]')" interrupted
ex "$C2" '6 * 7'
expect_eq "the next call answers" "$(main_text)" 42

ex "$C2" 'import time; time.sleep(30)' timeout_ms=1000
expect_eq "timeout_ms: status timeout" "$(jf 'j["status"]')" timeout
check "it ended soon after the timeout" python3 -c "import sys; sys.exit(not float(sys.argv[1]) < 10000)" "$(jf 'j["duration_ms"]')"
ex "$C2" 'z = 5; z'
expect_eq "the context still works after a timeout" "$(main_text)" 5

# ---- rich results ----------------------------------------------------------
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  ex "$C2" 'import matplotlib.pyplot as plt
plt.plot([1, 2, 3], [4, 1, 9])'
  check "a matplotlib figure comes back as image/png without savefig" \
    python3 -c 'import json,sys,base64; j=json.loads(sys.argv[1]); sys.exit(not any(base64.b64decode(r["data"]["image/png"])[:8]==b"\x89PNG\r\n\x1a\n" for r in j["results"] if "image/png" in r["data"]))' "$BODY"
else
  ok "SKIP matplotlib: python3-matplotlib is not importable on this host"
fi
if /usr/bin/python3 -c 'import pandas' 2>/dev/null; then
  ex "$C2" 'import pandas as pd
pd.DataFrame({"a": [1, 2], "b": [3, 4]})'
  check "a DataFrame comes as text/html" grep -q "<table" <<<"$(jf '[r["data"].get("text/html") for r in j["results"] if r["is_main_result"]][0]')"
else
  ok "SKIP pandas: python3-pandas is not importable on this host"
fi
ex "$C2" "class S:
    def _repr_svg_(self):
        return '<svg/>'
S()"
expect_eq "_repr_svg_ gives image/svg+xml" "$(jf '[r["data"].get("image/svg+xml") for r in j["results"]][0]')" "<svg/>"


# A representation larger than --reply-max: left out of a JSON reply and
# named in its truncated; a stream carries it whole.
ex "$C2" "class Big:
    def _repr_svg_(self):
        return '<svg>' + 'a' * 3000000 + '</svg>'
Big()"
expect_eq "a JSON reply leaves out a result past --reply-max" "$(jf '[r.get("truncated") for r in j["results"]][0]')" '["image/svg+xml"]'
expect_eq "... and says truncated" "$(jf 'j["truncated"]')" true
curl -s -N --max-time 60 -H "Authorization: Bearer $KEY" -H 'Accept: application/x-ndjson' \
  -X POST "$URL$CX/$C2/execute" -d '{"code":"Big()"}' >"$T_SCRATCH/ndbig"
check "a stream carries it whole" python3 -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
r = [e for e in ev if e["type"] == "result"][0]
assert len(r["data"]["image/svg+xml"]) == 3000011, len(r["data"].get("image/svg+xml", ""))
assert ev[-1]["type"] == "end"
' "$T_SCRATCH/ndbig"

# A streaming client that goes away interrupts its execution.
curl -s -N --max-time 2 -H "Authorization: Bearer $KEY" -H 'Accept: application/x-ndjson' \
  -X POST "$URL$CX/$C2/execute" -d '{"code":"while True: pass"}' >/dev/null
idle() { api GET "$CX/$C2"; [ "$(jf 'j["state"]')" = idle ]; }
check "a client that hangs up interrupts the execution" wait_for 10 idle
ex "$C2" 'z'
expect_eq "... and the context goes on" "$(main_text)" 5
curl -s -N --max-time 60 -H "Authorization: Bearer $KEY" -X POST "$URL$CX/$C2/execute" \
  -d '{"code":"print(7)","stream":true}' >"$T_SCRATCH/sse2"
check '"stream": true is SSE' grep -q '^event: end' "$T_SCRATCH/sse2"
api POST "$CX/default/interrupt?language=python"
expect_code "interrupt an idle default context by ?language" 204
api GET "$CX/default?language=cobol"
expect_code "?language of an unknown language: 400" 400

# ---- errors, output, input -------------------------------------------------
ex "$C2" 'a = 1
1 / 0'
expect_eq "an exception: status error" "$(jf 'j["status"]')" error
expect_eq "its name" "$(jf 'j["error"]["name"]')" ZeroDivisionError
check "its value" [ -n "$(jf 'j["error"]["value"]')" ]
check "its traceback names the user's line 2" grep -q "line 2" <<<"$(jf 'j["error"]["traceback"]')"

ex "$C2" "print('x' * 50 * 1024 * 1024)"
expect_code "50 MB of output: answered" 200
# The reply holds --reply-max of it: too large for an argument, read from the file.
bigf() { python3 -c 'import json,sys; print(json.dumps(eval(sys.argv[2], {"j": json.load(open(sys.argv[1]))})))' "$T_SCRATCH/body" "$1"; }
expect_eq "... marked truncated" "$(bigf 'j["truncated"]')" true
expect_eq "... stdout_truncated" "$(bigf 'j["stdout_truncated"]')" true
check "... counted in full" [ "$(bigf 'j["output_bytes"] > 50 * 1024 * 1024')" = true ]
ex "$C2" 'z'
expect_eq "the context survives huge output" "$(main_text)" 5

ex "$C2" 'input()'
expect_eq "input() does not hang: EOFError" "$(jf 'j["error"]["name"]')" EOFError

ex "$C2" 'import os; os.kill(os.getpid(), 9)'
expect_eq "an interpreter that kills itself: died" "$(jf 'j["status"]')" died
expect_eq "... restarted" "$(jf 'j["restarted"]')" true
check "... with a message" [ -n "$(jf 'j["message"]')" ]
ex "$C2" '2 + 2'
expect_eq "the next call works" "$(main_text)" 4

# ---- a deleted context's daemons ------------------------------------------
ex "$C1" "import subprocess; p = subprocess.Popen(['sleep', '1000']); p.pid"
check "a context started a daemon" has_box_proc "$BOX" "sleep 1000"
api DELETE "$CX/$C1"
expect_code "delete: 204" 204
check "the daemon dies with its context" wait_for 10 no_box_procs_matching "$BOX" "sleep 1000"
api GET "$CX/$C1"
expect_code "a deleted context is 404" 404
api DELETE "$CX/$C1"
expect_code "delete again: 404" 404

# ---- bash and javascript ---------------------------------------------------
api POST "$CX" -d '{"language":"bash"}'
expect_code "a bash context" 201
CB=$(jf 'j["id"]')
ex "$CB" 'cd /tmp; X=5'
ex "$CB" 'echo $PWD $X'
expect_eq "bash keeps cwd and variables" "$(jf 'j["stdout"]')" "/tmp 5"
ex default 'echo from-default-bash' language='"bash"'
expect_eq "default with language bash" "$(jf 'j["stdout"]')" from-default-bash
if command -v node >/dev/null; then
  ex default 'let a = 20; globalThis.b = 22' language='"javascript"'
  expect_code "a javascript default context" 200
  ex default-javascript 'a + b'
  expect_eq "javascript keeps let and globals" "$(main_text)" 42
else
  ok "SKIP javascript: node is not installed"
fi

# ---- tenants ---------------------------------------------------------------
KEY=$KEY_B
api GET "$CX"
expect_code "tenant B: A's box contexts are 404" 404
api GET "$CX/$C2"
expect_code "tenant B: A's context is 404" 404
ex "$C2" '1'
expect_code "tenant B cannot execute in A's context" 404
api DELETE "$CX/$C2"
expect_code "tenant B cannot delete A's context" 404
KEY=$KEY_A

# ---- streams ---------------------------------------------------------------
curl -s -N --max-time 60 -H "Authorization: Bearer $KEY" -H 'Accept: application/x-ndjson' \
  -X POST "$URL$CX/$C2/execute" -d '{"code":"print(\"one\")\n1/0"}' >"$T_SCRATCH/nd"
check "NDJSON: stdout, then the error, then end" python3 -c '
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
t = [e["type"] for e in ev]
assert t[-1] == "end" and ev[-1]["status"] == "error", t
assert t.index("stdout") < t.index("error") < t.index("end"), t
assert "".join(e["data"] for e in ev if e["type"] == "stdout") == "one\n"
assert ev[t.index("error")]["name"] == "ZeroDivisionError"
' "$T_SCRATCH/nd"
curl -s -N --max-time 60 -H "Authorization: Bearer $KEY" -H 'Accept: text/event-stream' \
  -X POST "$URL$CX/$C2/execute" -d '{"code":"print(1)\n40 + 2"}' >"$T_SCRATCH/sse"
check "SSE: stdout, then the result, then end" python3 -c '
import json, sys
ev = []
for block in open(sys.argv[1]).read().split("\n\n"):
    lines = dict(l.split(": ", 1) for l in block.splitlines() if ": " in l)
    if "event" in lines:
        ev.append((lines["event"], json.loads(lines["data"])))
t = [e for e, _ in ev]
runs = [x for i, x in enumerate(t) if i == 0 or t[i - 1] != x]  # stdout may come in chunks
assert runs == ["stdout", "result", "end"], t
assert ev[t.index("result")][1]["data"]["text/plain"] == "42"
assert ev[-1][1]["status"] == "ok"
' "$T_SCRATCH/sse"
curl -s -N --max-time 60 -H "Authorization: Bearer $KEY" -H 'Accept: application/x-ndjson' \
  -X POST "$URL$CX/$C2/execute" -d '{"code":"import sys; sys.stdout.buffer.write(b\"\\xff\\xfe\"); sys.stdout.flush()"}' >"$T_SCRATCH/nd2"
check "NDJSON: bytes that are not UTF-8 come as data_b64" grep -q '"data_b64":"//4="' "$T_SCRATCH/nd2"

# ---- bad input -------------------------------------------------------------
api POST "$CX" -d '{"language":"cobol"}'
expect_code "unknown language: 400" 400
ex default 'x' language='"cobol"'
expect_code "execute with an unknown language: 400" 400
api POST "$CX/$C2/execute" -d '{}'
expect_code "missing code: 400" 400
api POST "$CX/$C2/execute" -d 'not json'
expect_code "not JSON: 400" 400
api POST "$CX/$C2/execute" -d '{"code":"1","bogus":1}'
expect_code "unknown field: 400" 400
api POST "$CX/$C2/execute" -d '{"code":"1","timeout":1,"timeout_ms":1000}'
expect_code "timeout and timeout_ms: 400" 400
ex ctx_doesnotexist '1'
expect_code "unknown context: 404" 404
api POST "$CX/ctx_doesnotexist/execute" -H 'Accept: application/x-ndjson' -d '{"code":"1"}'
expect_code "unknown context, streamed: 404" 404
api POST "/v1/sandboxes/b_nosuchbox/contexts" -d '{}'
expect_code "unknown box: 404" 404
check "errors are {error:{code,message}}" [ -n "$(jf 'j["error"]["message"]')" ]

api POST "$CX" -d '{"cwd":"/no/such/dir"}'
expect_code "a cwd that does not exist: 400" 400
api POST "$CX" -d '{"cwd":"relative"}'
expect_code "a relative cwd: 400" 400
api POST "$CX" -d '{"env":{"1BAD":"x"}}'
expect_code "a bad env name: 400" 400

# ---- a daemon restart ------------------------------------------------------
ex "$C2" 'kept = "still here"'
serve_stop
serve_start || not_ok "the daemon starts again"
ex "$C2" 'kept'
expect_eq "a context survives a daemon restart" "$(main_text)" "'still here'"
ex "$C2" 'kept = kept + " after a crash"'
ex default-bash 'cd /tmp; B=7'
serve_kill9
serve_start || not_ok "the daemon starts after a SIGKILL"
ex "$C2" 'kept'
expect_eq "and a SIGKILL of the daemon" "$(main_text)" "'still here after a crash'"
ex default-bash 'echo "$PWD $B"'
expect_eq "a bash context keeps its cwd and variables across it" "$(jf 'j["stdout"]')" '/tmp 7'

api DELETE "/v1/sandboxes/$BOX"
expect_code "delete the box" 200
api GET "$CX"
check "contexts of a deleted box are gone" [ "$CODE" = 404 -o "$CODE" = 409 ]

# ---- at most 32 contexts a box ---------------------------------------------
new_box '{"timeout":600}' || not_ok "a second box"
n=0
for _ in $(seq 32); do
  api POST "/v1/sandboxes/$BOX/contexts" -d '{"language":"bash"}'
  [ "$CODE" = 201 ] && n=$((n + 1))
done
expect_eq "32 contexts in a box" "$n" 32
api POST "/v1/sandboxes/$BOX/contexts" -d '{"language":"bash"}'
expect_code "the 33rd: 429" 429
ex2() { api POST "/v1/sandboxes/$BOX/contexts/default/execute" -d '{"code":"1"}'; }
ex2
expect_code "a default context past the bound: 429 too" 429
api DELETE "/v1/sandboxes/$BOX"

# ---- code past the 1 MiB of other JSON bodies ---------------------------------
new_box '{"timeout":600}' || not_ok "a third box"
python3 -c 'import json; print(json.dumps({"code": "s = \"" + "a" * (5 << 20) + "\"\nlen(s)"}))' \
  >"$T_SCRATCH/big.json"
api POST "/v1/sandboxes/$BOX/contexts/default/execute" --data-binary "@$T_SCRATCH/big.json"
expect_code "5 MiB of code with its Content-Length: 200" 200
expect_eq "all of it ran" "$(jf 'j["results"][0]["data"]["text/plain"]')" 5242880
head -c $((33 << 20)) /dev/zero | tr '\0' a >"$T_SCRATCH/huge.json"
api POST "/v1/sandboxes/$BOX/contexts/default/execute" --data-binary "@$T_SCRATCH/huge.json"
expect_code "past 32 MiB: 413" 413
api POST "/v1/sandboxes/$BOX/contexts/default/execute" -H 'Transfer-Encoding: chunked' \
  --data-binary "@$T_SCRATCH/big.json"
expect_code "more than 1 MiB without a Content-Length: 413" 413
check "which says what to do" grep -q "Content-Length" <<<"$BODY"
api POST "/v1/sandboxes/$BOX/exec" --data-binary "@$T_SCRATCH/big.json"
expect_code "other JSON bodies keep their 1 MiB: 413" 413
api DELETE "/v1/sandboxes/$BOX"

serve_finish
