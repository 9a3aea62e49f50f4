#!/bin/bash
# A running job's long output over MCP: each job_status poll of a job whose
# output is past what a result inlines links the whole output so far, and
# every poll (and the job's end) replaces the one object of that stream in
# the store -- polls never pile up copies, which would count again and
# again in the tenant's storage quota until a poll found the quota full.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../serve/serve.bash"
. "$(dirname "$0")/../serve/s3.bash"
MCPDIR=$(cd "$(dirname "$0")" && pwd)

tool() { R=$(python3 "$MCPDIR/mcpcall.py" "$URL/mcp" "$1" call "$2" "$3"); }
rq() {
  python3 -c '
import json, sys
o = json.loads(sys.argv[1])
rep = o["reply"] or {}
res = rep.get("result") or {}
sc = res.get("structuredContent") or {}
err = res.get("isError", False)
try:
    v = eval(sys.argv[2])
except Exception as e:
    v = "EXC %r in %s" % (e, sys.argv[1][:400])
print("true" if v is True else "false" if v is False else "" if v is None else v)' "$R" "$1"
}

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
tool "$K" job_cancel "{\"job_id\":\"$JOB\"}"
expect_eq "the job is cancelled" "$(rq 'sc["status"]')" cancelled
tool "$K" sandbox_destroy "{\"sandbox_id\":\"$BOX\"}"
check "the daemon is healthy" bash -c "curl -sf --max-time 10 '$URL/v1/health' >/dev/null"
serve_stop
serve_finish
