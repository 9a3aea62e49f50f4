#!/bin/bash
# The daemon's memory for a reply does not follow what a box prints or
# holds: a sync exec reply keeps at most --reply-max bytes of each stream
# (the rest counted and flagged), however the bytes escape in JSON; a files
# listing is paged; and the requests in flight share one --reply-budget,
# past which they get 503 with Retry-After, not memory.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"

# 1 MiB of each stream per reply (the default); a budget of two sync execs
# and a half (each reserves twice --reply-max), all of it this one tenant's
# share (tenant_bounds.sh tests the shares).
if ! serve_start --reply-budget 5M --tenant-reply-budget 5M; then
  not_ok "the daemon starts"
  serve_finish
  exit 1
fi
new_tenant bounds || not_ok "tenant"
KEY=$TKEY
new_box '{"disk":"512M","memory":"1G","timeout":900}' || not_ok "a box"
S=/v1/sandboxes/$BOX
CAP=1048576
hwm_kb() { awk '/^VmHWM/ {print $2}' "/proc/$SPID/status"; }
# How much the daemon's peak memory may grow (kB): a few replies' worth;
# more under the sanitizers (shadow memory, freed blocks held back).
SLACK=49152
if [ -n "${HUSK_ASAN:-}" ]; then
  SLACK=262144
  export ASAN_OPTIONS="${ASAN_OPTIONS:-}:quarantine_size_mb=16"
fi
exec_json() { # CMD (sh -c) [EXTRA JSON FIELDS]
  local extra='{}'
  [ $# -gt 1 ] && extra=$2
  python3 -c 'import json,sys; d={"cmd":["sh","-c",sys.argv[1]],"timeout":300}; d.update(json.loads(sys.argv[2])); print(json.dumps(d))' "$1" "$extra"
}
# The reply to the last request, from the file (BODY drops NULs).
rj() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$T_SCRATCH/body" "$1"; }

api POST "$S/exec" -d "$(exec_json 'echo hello; echo oops >&2')"
expect_eq "a small exec: whole output, nothing cut" \
  "$(rj '[j["stdout"], j["stderr"], j["stdout_truncated"], j["stderr_truncated"], j["stdout_bytes"], j["stderr_bytes"]]')" \
  "['hello\\n', 'oops\\n', False, False, 6, 5]"
BASE=$(hwm_kb)
echo "# daemon VmHWM before the big outputs: $BASE kB"

# 200 MB of NULs on stdout (each would be 6 bytes of JSON) and 50 MB on
# stderr, with an output_limit that lets all of it through.
API_TIMEOUT=300 api POST "$S/exec" -d "$(exec_json 'head -c 200000000 /dev/zero; head -c 50000000 /dev/zero >&2' '{"output_limit":"1G"}')"
expect_code "200 MB of NULs: 200" 200
expect_eq "the program ran to its end (output_limit not hit)" \
  "$(rj '[j["exit_code"], j["reason"], j["truncated"], j["output_bytes"]]')" "[0, 'exited', False, 250000000]"
expect_eq "stdout: the first MiB is kept, the rest counted and flagged" \
  "$(rj '[len(j["stdout"]), set(j["stdout"]) == {chr(0)}, j["stdout_bytes"], j["stdout_truncated"]]')" \
  "[$CAP, True, 200000000, True]"
expect_eq "stderr: the same" \
  "$(rj '[len(j["stderr"]), j["stderr_bytes"], j["stderr_truncated"]]')" "[$CAP, 50000000, True]"
HWM=$(hwm_kb)
echo "# daemon VmHWM after: $HWM kB"
check "the daemon's peak memory grew by less than $((SLACK / 1024)) MiB (not with the output)" [ $((HWM - BASE)) -lt $SLACK ]

# Bytes that are not UTF-8: the kept head, exactly, in stdout_b64.
api POST "$S/exec" -d "$(exec_json 'head -c 3000000 /dev/urandom > /workspace/r && cat /workspace/r && head -c '$CAP' /workspace/r | sha256sum >&2')"
WANT=$(rj 'j["stderr"].split()[0]')
expect_eq "binary output: the first MiB, exactly, as base64" \
  "$(rj '__import__("hashlib").sha256(__import__("base64").b64decode(j["stdout_b64"])).hexdigest()')" "$WANT"
expect_eq "binary output: counted and flagged" "$(rj '[j["stdout_bytes"], j["stdout_truncated"]]')" "[3000000, True]"
# Text cut inside a character: the kept part ends before it (still UTF-8).
api POST "$S/exec" -d "$(exec_json 'printf a; i=0; while [ $i -lt 400000 ]; do printf "ééééé"; i=$((i + 1)); done')"
expect_eq "UTF-8 cut at the limit: no base64, no broken character" \
  "$(rj '["stdout_b64" in j, len(j["stdout"].encode()), j["stdout_truncated"]]')" "[False, $((CAP - 1)), True]"
check "the daemon's peak memory is still small" [ $(($(hwm_kb) - BASE)) -lt $SLACK ]

# Every byte that JSON escapes comes back as it was.
api POST "$S/exec" -d "$(exec_json 'printf "q\"b\\\\s/\001\037\t\n\r\b\f\177 é€😀 end"')"
expect_eq "escapes: quotes, backslashes, controls, multibyte, all exact" \
  "$(rj 'j["stdout"] == "q\"b\\s/\x01\x1f\t\n\r\b\f\x7f é€😀 end" and "stdout_b64" not in j')" True

# The output_limit still kills the program.
api POST "$S/exec" -d "$(exec_json 'head -c 5000000 /dev/zero; sleep 60' '{"output_limit":"2M"}')"
expect_eq "output_limit: killed, reason output" \
  "$(rj '[j["reason"], j["truncated"], j["stdout_bytes"], len(j["stdout"]), j["stdout_truncated"]]')" \
  "['output', True, 2097152, $CAP, True]"

# The budget: two sync execs in flight hold 4 of its 5 MiB; a third, a
# streaming exec and a listing do not fit: 503 with Retry-After.
# They wait for /workspace/release, uploaded (no reply budget) at the end.
for n in 1 2; do
  curl -sS -o "$T_SCRATCH/slow$n" --max-time 300 -H "Authorization: Bearer $TKEY" \
    "$URL$S/exec" -d "$(exec_json "while [ ! -e /workspace/release ]; do sleep 0.1; done; echo slow$n")" &
  eval "SLOW$n=\$!"
done
two_sleeping() { has_box_proc "$BOX" "echo slow1" && has_box_proc "$BOX" "echo slow2"; }
check "two slow sync execs run" wait_for 30 two_sleeping
api POST "$S/exec" -d "$(exec_json 'echo third')" -D "$T_SCRATCH/hdr"
expect_code "a third sync exec past the budget: 503" 503
check "503: Retry-After" grep -qi '^retry-after: 1' "$T_SCRATCH/hdr"
expect_eq "503: says why" "$(jf 'j["error"]["code"]')" unavailable
api POST "$S/exec" -d "$(exec_json 'echo s')" -H "Accept: application/x-ndjson"
expect_code "a streaming exec past the budget: 503" 503
api GET "$S/files/list?path=/workspace"
expect_code "a listing past the budget: 503" 503
api PUT "$S/files?path=/workspace/release" --data-binary go
wait "$SLOW1" "$SLOW2"
expect_eq "the two slow execs completed" "$(python3 -c 'import json,sys; print([json.load(open(f))["stdout"] for f in sys.argv[1:]])' "$T_SCRATCH/slow1" "$T_SCRATCH/slow2")" "['slow1\\n', 'slow2\\n']"
api POST "$S/exec" -d "$(exec_json 'echo again')"
expect_eq "the budget is back: another request works" "$(jf 'j["stdout"]')" again

# MCP: sandbox_exec inlines the tail of each stream and keeps the whole in
# the box -- as long as it was when the command ended, though a process it
# left behind goes on writing to it.
MCPCALL="$(dirname "$0")/../mcp/mcpcall.py"
mcp_exec() { # COMMAND
  python3 "$MCPCALL" "$URL/mcp" "$TKEY" call sandbox_exec \
    "$(python3 -c 'import json,sys; print(json.dumps({"sandbox_id":sys.argv[1],"command":sys.argv[2]}))' "$BOX" "$1")" >"$T_SCRATCH/mcp"
}
mr() { python3 -c 'import json,sys; j=json.load(open(sys.argv[1]))["reply"]["result"]["structuredContent"]; print(eval(sys.argv[2]))' "$T_SCRATCH/mcp" "$1"; }
mcp_exec 'head -c 30000000 /dev/zero; (echo $BASHPID > /workspace/left.pid; while :; do head -c 1000000 /dev/zero; sleep 0.1; done) &'
expect_eq "MCP: 30 MB of NULs: the tail inline, counted, flagged, kept in a file" \
  "$(mr '[j["status"], len(j["stdout"]) <= 20000, j["stdout_bytes"] >= 30000000, j["stdout_truncated"], "stdout_file" in j]')" \
  "['completed', True, True, True, True]"
KEPT=$(mr 'j["stdout_file"]')
WANT=$(mr 'j["stdout_bytes"]')
boxsh_kill() { api POST "$S/exec" -d "$(exec_json 'kill $(cat /workspace/left.pid)')"; }
boxsh_kill
api GET "$S/files/stat?path=$KEPT"
expect_eq "MCP: the kept file has the bytes reported, not what the leftover wrote since" "$(jf 'j["size"]')" "$WANT"
check "MCP: the daemon's peak memory is still small" [ $(($(hwm_kb) - BASE)) -lt $SLACK ]
api POST "$S/exec" -d "$(exec_json 'rm -rf /workspace/.husk /workspace/left.pid')"

# Listings are paged: 2500 files, 1000 entries a page by default.
api POST "$S/exec" -d "$(exec_json 'mkdir /workspace/many && cd /workspace/many && i=0; while [ $i -lt 2500 ]; do : > f$i; i=$((i + 1)); done; echo ok')"
expect_eq "2500 files" "$(jf 'j["stdout"].strip()')" ok
api GET "$S/files/list?path=/workspace/many"
expect_eq "first page: 1000 entries, truncated, with a cursor" \
  "$(rj '[len(j["entries"]), j["truncated"], j["next_cursor"]]')" "[1000, True, '1000']"
pages() { # QUERY: every page; prints entries-count distinct-count pages
  local cur="" all="$T_SCRATCH/all" n=0
  : >"$all"
  while :; do
    api GET "$S/files/list?path=/workspace/many$1${cur:+&cursor=$cur}"
    [ "$CODE" = 200 ] || { echo "error $CODE"; return; }
    rj '"\n".join(e["name"] for e in j["entries"])' >>"$all"
    n=$((n + 1))
    cur=$(rj 'j["next_cursor"] or ""')
    [ -n "$cur" ] || break
    [ $n -lt 100 ] || break
  done
  echo "$(grep -c . "$all") $(sort -u "$all" | grep -c .) $n"
}
expect_eq "all pages: every file once" "$(pages "")" "2500 2500 3"
expect_eq "limit=700: four pages" "$(pages "&limit=700")" "2500 2500 4"
api GET "$S/files/list?path=/workspace/many&limit=10001"
expect_code "limit past the maximum: 400" 400
# Long names: a page also stops at --reply-max bytes of entries.
api POST "$S/exec" -d "$(exec_json 'mkdir /workspace/long && cd /workspace/long && p=$(printf "%0200d" 0); i=0; while [ $i -lt 3000 ]; do : > $p$i; i=$((i + 1)); done; echo ok')"
api GET "$S/files/list?path=/workspace/long&limit=10000"
expect_eq "long names: the page stops at the byte bound" \
  "$(rj '[0 < len(j["entries"]) < 3000, j["truncated"]]')" "[True, True]"
check "long names: the page is about --reply-max" [ "$(stat -c %s "$T_SCRATCH/body")" -le $((CAP + 4096)) ]
long_pages() {
  local cur="" n=0 total=0
  while :; do
    api GET "$S/files/list?path=/workspace/long&limit=10000${cur:+&cursor=$cur}"
    total=$((total + $(rj 'len(j["entries"])')))
    n=$((n + 1))
    cur=$(rj 'j["next_cursor"] or ""')
    [ -n "$cur" ] && [ $n -lt 100 ] || break
  done
  echo "$total"
}
expect_eq "long names: all pages hold all 3000" "$(long_pages)" 3000
check "the daemon's peak memory is still small" [ $(($(hwm_kb) - BASE)) -lt $SLACK ]

api DELETE "$S"
check "the box leaves nothing" wait_for 30 box_gone "$BOX"
serve_finish
