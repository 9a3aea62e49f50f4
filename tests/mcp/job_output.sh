#!/bin/bash
# A running job's long output over MCP: each job_status poll of a job whose
# output is past what a result inlines links the whole output so far, and
# every poll (and the job's end) replaces the one object of that stream in
# the store -- polls never pile up copies, which would count again and
# again in the tenant's storage quota until a poll found the quota full.
# job_status with stdout_offset / stderr_offset reads the output piece by
# piece, each byte once, over HTTP and over standalone `husk mcp` (stdio),
# which has no store to link the whole output to.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../serve/serve.bash"
. "$(dirname "$0")/../serve/s3.bash"
MCPDIR=$(cd "$(dirname "$0")" && pwd)

. "$MCPDIR/mcp.bash"

if ! s3_start --mcp-wait 3 --storage-quota 1M; then
  not_ok "the daemon starts with its S3 listener, --mcp-wait 3, --storage-quota 1M"
  finish
  exit 1
fi
new_tenant mcp-job-output && K=$TKEY

tool "$K" sandbox_create '{}'
BOX=$(rq 'sc["sandbox_id"]')
check "a sandbox" [ -n "$BOX" ]
# 168,894 bytes of output at once, then a wait: the job outlives each poll.
tool "$K" sandbox_exec "{\"sandbox_id\":\"$BOX\",\"command\":\"seq 1 30000; sleep 40\",\"timeout_seconds\":120}"
JOB=$(rq 'sc["job_id"]')
expect_eq "the command outlives the wait: a running job" "$(rq 'sc["status"]')" running
for i in 1 2 3 4 5 6; do
  tool "$K" job_status "{\"job_id\":\"$JOB\"}"
  expect_eq "job_status poll $i: running, the whole stdout so far (168894 bytes) linked" \
    "$(rq '[sc["status"], sc["stdout_bytes"], bool(sc.get("stdout_url"))]')" "['running', 168894, True]"
done
tool "$K" list_objects '{"prefix":"outputs/"}'
expect_eq "six polls leave one object for the stream, not six" \
  "$(rq '[(x["key"], x["size"]) for x in sc["objects"]]')" "[('outputs/$JOB.stdout.txt', 168894)]"
URLX=$(python3 "$MCPDIR/mcpcall.py" "$URL/mcp" "$K" call job_status "{\"job_id\":\"$JOB\"}" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["reply"]["result"]["structuredContent"]["stdout_url"])')
curl -s --max-time 30 -o "$T_SCRATCH/out" "$URLX"
expect_eq "the link gives the whole output" "$(sha256sum <"$T_SCRATCH/out" | cut -d' ' -f1)" \
  "$(seq 1 30000 | sha256sum | cut -d' ' -f1)"
# job_status with offsets: every byte exactly once, in pieces, while the
# job runs.
python3 - "$URL/mcp" "$K" "$JOB" "$MCPDIR" >"$T_SCRATCH/follow" <<'PYEOF'
import json, subprocess, sys
url, key, job, mcpdir = sys.argv[1:5]
def call(args):
    out = subprocess.run(["python3", mcpdir + "/mcpcall.py", url, key, "call", "job_status",
                          json.dumps(args)], capture_output=True, text=True).stdout
    return json.loads(out)["reply"]["result"]["structuredContent"]
got, off, calls = "", 0, 0
while calls < 20:
    r = call({"job_id": job, "stdout_offset": off})
    calls += 1
    assert r["stdout_offset"] == off
    got += r["stdout"]
    off = r["stdout_next_offset"]
    if not r["stdout_more"]:
        break
print(json.dumps({"calls": calls, "len": len(got.encode()), "ok": got == "".join("%d\n" % i for i in range(1, 30001)),
                  "status": r["status"], "total": r["stdout_bytes"]}))
PYEOF
expect_eq "job_status with stdout_offset: the whole output of a running job, each byte once, in 64 KiB pieces" \
  "$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["ok"], j["len"], j["total"], j["calls"], j["status"])' "$T_SCRATCH/follow")" \
  "True 168894 168894 3 running"
tool "$K" job_status "{\"job_id\":\"$JOB\",\"stdout_offset\":168894,\"stderr_offset\":0}"
expect_eq "job_status at the end of what there is: nothing new, nothing more; stderr empty" \
  "$(rq '[sc["stdout"], sc["stdout_more"], sc["stdout_next_offset"], sc["stderr"], sc["stderr_bytes"]]')" \
  "['', False, 168894, '', 0]"
tool "$K" job_cancel "{\"job_id\":\"$JOB\"}"
expect_eq "the job is cancelled" "$(rq 'sc["status"]')" cancelled

# Standalone husk mcp (stdio, no storage plane): the same offsets read a
# running job's whole output, which its 20 kB tail alone never showed.
python3 - "$HUSK" "$T_SCRATCH/sd" >"$T_SCRATCH/stdio" <<'PYEOF'
import json, subprocess, sys
husk, data = sys.argv[1:3]
p = subprocess.Popen([husk, "mcp", "--data", data, "--wait", "2", "--quiet"], stdin=subprocess.PIPE,
                     stdout=subprocess.PIPE, text=True)
n = [0]
def call(name, args):
    n[0] += 1
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": n[0], "method": "tools/call",
                              "params": {"name": name, "arguments": args},
                              "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}) + "\n")
    p.stdin.flush()
    while True:
        m = json.loads(p.stdout.readline())
        if m.get("id") == n[0]:
            return m["result"].get("structuredContent", {})
try:
    box = call("sandbox_create", {})["sandbox_id"]
    job = call("sandbox_exec", {"sandbox_id": box, "command": "seq 1 30000; sleep 30",
                                "timeout_seconds": 60})["job_id"]
    tail = call("job_status", {"job_id": job})
    got, off = "", 0
    for _ in range(20):
        r = call("job_status", {"job_id": job, "stdout_offset": off})
        got += r["stdout"]
        off = r["stdout_next_offset"]
        if not r["stdout_more"]:
            break
    call("job_cancel", {"job_id": job})
    call("sandbox_destroy", {"sandbox_id": box})
    print(json.dumps({"tail": len(tail["stdout"]), "truncated": tail["stdout_truncated"],
                      "whole": got == "".join("%d\n" % i for i in range(1, 30001))}))
finally:
    p.stdin.close()
    p.wait(timeout=60)
PYEOF
expect_eq "husk mcp (stdio): a running job's status shows its last 20 kB only" \
  "$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["tail"] <= 20000, j["truncated"])' "$T_SCRATCH/stdio")" "True True"
expect_eq "husk mcp (stdio): job_status with stdout_offset reads all of it" \
  "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["whole"])' "$T_SCRATCH/stdio")" True
tool "$K" sandbox_destroy "{\"sandbox_id\":\"$BOX\"}"
check "the daemon is healthy" bash -c "curl -sf --max-time 10 '$URL/v1/health' >/dev/null"
serve_stop
serve_finish
