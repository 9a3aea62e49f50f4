#!/bin/bash
# Several files in one MCP call: sandbox_write_file's `files`, store_file's
# `paths` and `directory`, load_file's `keys` and `prefix`.  Each file has
# its own outcome: one that fails (a path outside the writable places, a
# missing file, a key that would climb out of the directory, the tenant's
# storage quota reached halfway) is named in `failed` with its error and
# the others are done.  A call is bounded: at most 100 files, and 3 MiB of
# inline content in all (decoded), refused whole before anything is written.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../serve/serve.bash"
. "$(dirname "$0")/../serve/s3.bash"
MCPDIR=$(cd "$(dirname "$0")" && pwd)

. "$MCPDIR/mcp.bash"
# args FILE PYTHON: the JSON arguments the Python expression makes, in FILE
# (b64(n): base64 of n bytes of a fixed pattern).
args() {
  python3 -c '
import base64, json, sys
pat = bytes(range(256))
def raw(n): return (pat * (n // 256 + 1))[:n]
def b64(n): return base64.b64encode(raw(n)).decode()
json.dump(eval(sys.argv[2]), open(sys.argv[1], "w"))' "$1" "$2"
}
ex() { tool "$K" sandbox_exec "{\"sandbox_id\":\"$BOX\",\"command\":$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1]))' "$1")}"; }

# The storage quota (1 MiB a tenant) is what the batch that runs out of
# it meets; the other tests store a few bytes.
if ! s3_start --storage-quota 1M; then
  not_ok "the daemon starts with its S3 listener and --storage-quota 1M"
  finish
  exit 1
fi
new_tenant mcp-multi && K=$TKEY
# conforms TOOL: the last result's structuredContent is valid against the
# tool's outputSchema from tools/list, by the validator the TypeScript SDK
# checks it with (ajv; clients check it on errors too).
NODE=${NODE:-$MCPDIR/node_modules/.bin/node}
python3 "$MCPDIR/mcpcall.py" "$URL/mcp" "$K" tools/list >"$T_SCRATCH/tools"
conforms() {
  local v
  printf '%s' "$R" >"$T_SCRATCH/reply"
  v=$(cd "$MCPDIR" && "$NODE" --input-type=module -e '
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
const Ajv = createRequire(process.cwd() + "/")("ajv");
const [tools, tool, reply] = process.argv.slice(1);
const t = JSON.parse(readFileSync(tools))["reply"]["result"]["tools"].find((x) => x.name === tool);
const sc = JSON.parse(readFileSync(reply))["reply"]["result"]["structuredContent"];
const check = new Ajv({ strict: false }).compile(t.outputSchema);
console.log(check(sc) ? "valid" : JSON.stringify(check.errors).slice(0, 300));' \
    "$T_SCRATCH/tools" "$1" "$T_SCRATCH/reply" 2>&1 | tail -n1)
  expect_eq "$1: the result matches its outputSchema" "$v" valid
}
tool "$K" sandbox_create '{}'
BOX=$(rq 'sc["sandbox_id"]')
check "a sandbox" [ -n "$BOX" ]

# ---- sandbox_write_file with files
tool "$K" sandbox_write_file "{\"sandbox_id\":\"$BOX\",\"files\":{\"a.txt\":\"alpha\",\"d/e/b.txt\":\"beta\\n\",\"/tmp/c.txt\":\"\"}}"
expect_eq "write_file files: three text files in one call, each listed with its size" \
  "$(rq '[err, sc["written"], sc["failed_count"], sc["size"], [(f["path"], f["size"]) for f in sc["files"]]]')" \
  "[False, 3, 0, 10, [('a.txt', 5), ('d/e/b.txt', 5), ('/tmp/c.txt', 0)]]"
conforms sandbox_write_file
ex 'cat a.txt d/e/b.txt; stat -c %s /tmp/c.txt'
expect_eq "the three files are in the sandbox with their content" "$(rq 'sc["stdout"]')" "alphabeta
0"
tool "$K" sandbox_write_file "{\"sandbox_id\":\"$BOX\",\"encoding\":\"base64\",\"files\":{\"bin/x.bin\":\"AAH/\",\"bin/y.bin\":\"/w==\"}}"
expect_eq "write_file files with encoding base64: every value decoded" \
  "$(rq '[err, sc["written"], sc["size"]]')" "[False, 2, 4]"
ex 'od -An -tx1 bin/x.bin bin/y.bin | tr -s " \n" " "'
expect_eq "the binary files hold the decoded bytes" "$(rq 'sc["stdout"].strip()')" "00 01 ff ff"

tool "$K" sandbox_write_file "{\"sandbox_id\":\"$BOX\",\"files\":{\"good1.txt\":\"1\",\"/etc/evil\":\"x\",\"good2.txt\":\"2\"}}"
expect_eq "one bad path among good ones: isError, the bad one named in failed with its error" \
  "$(rq '[err, sc["written"], sc["failed"], [f["path"] for f in sc["files"] if "error" in f and "/workspace" in f["error"]]]')" \
  "[True, 2, ['/etc/evil'], ['/etc/evil']]"
conforms sandbox_write_file
ex 'cat good1.txt good2.txt'
expect_eq "the good ones were written all the same" "$(rq 'sc["stdout"]')" "12"
tool "$K" sandbox_write_file "{\"sandbox_id\":\"$BOX\",\"encoding\":\"base64\",\"files\":{\"ok.bin\":\"AAE=\",\"bad.bin\":\"not base64!\"}}"
expect_eq "a value that is not base64 fails alone" \
  "$(rq '[err, sc["written"], sc["failed"], "base64" in sc["files"][1]["error"]]')" "[True, 1, ['bad.bin'], True]"

args "$T_SCRATCH/a" "{\"sandbox_id\":\"$BOX\",\"files\":{\"many/%d.txt\" % i: \"x\" for i in range(101)}}"
tool "$K" sandbox_write_file "@$T_SCRATCH/a"
expect_err "101 files in one call: refused, naming the bound" "at most 100"
args "$T_SCRATCH/a" "{\"sandbox_id\":\"$BOX\",\"encoding\":\"base64\",\"files\":{\"big/1.bin\":b64(2 << 20),\"big/2.bin\":b64((1 << 20) + 1)}}"
tool "$K" sandbox_write_file "@$T_SCRATCH/a"
expect_err "files of 3 MiB + 1 byte in all (decoded): refused, naming the rule" "3 MiB"
args "$T_SCRATCH/a" "{\"sandbox_id\":\"$BOX\",\"encoding\":\"base64\",\"files\":{\"big/1.bin\":b64(2 << 20),\"big/2.bin\":b64(1 << 20)}}"
tool "$K" sandbox_write_file "@$T_SCRATCH/a"
expect_eq "files of exactly 3 MiB in all: written" "$(rq '[err, sc.get("size")]')" "[False, $((3 << 20))]"
ex 'ls many 2>&1 | head -c 100; ls big'
expect_eq "of the refused calls nothing was written" "$(rq 'sc["stdout"].split("\n")[1:]')" "['1.bin', '2.bin', '']"
tool "$K" sandbox_write_file "{\"sandbox_id\":\"$BOX\",\"path\":\"p\",\"content\":\"x\",\"files\":{\"q\":\"y\"}}"
expect_err "path + content and files together: refused" "not both"
tool "$K" sandbox_write_file "{\"sandbox_id\":\"$BOX\",\"offset\":3,\"files\":{\"q\":\"y\"}}"
expect_err "offset with files: refused" "offset"
tool "$K" sandbox_write_file "{\"sandbox_id\":\"$BOX\",\"append\":true,\"files\":{\"a.txt\":\"+\",\"new.txt\":\"n\"}}"
expect_eq "append with files: each file grows (a missing one is made)" \
  "$(rq '[err, [f["file_size"] for f in sc["files"]]]')" "[False, [6, 1]]"

# ---- store_file with paths and directory
tool "$K" store_file "{\"sandbox_id\":\"$BOX\",\"paths\":[\"a.txt\",\"d/e/b.txt\",\"nothere.txt\"],\"key_prefix\":\"batch/\"}"
expect_eq "store_file paths: each its own object under key_prefix, the missing one reported" \
  "$(rq '[err, sc["stored"], sc["failed"], [(f["key"], f.get("size")) for f in sc["files"]], all(f["url"].startswith("http") for f in sc["files"][:2]), len(links)]')" \
  "[True, 2, ['nothere.txt'], [('batch/a.txt', 6), ('batch/b.txt', 5), ('batch/nothere.txt', None)], True, 2]"
conforms store_file
tool "$K" store_file "{\"sandbox_id\":\"$BOX\",\"paths\":[\"d/e/\",\".\",\"bin/x.bin\",\"x/x.bin\"],\"key_prefix\":\"named/\"}"
expect_eq "store_file paths: a directory by its name (a tar), no name (.) and a second x.bin reported" \
  "$(rq '[err, [(f["key"], f.get("tar"), "error" in f) for f in sc["files"]], sc["failed"]]')" \
  "[True, [('named/e', True, False), ('named/.', None, True), ('named/x.bin', False, False), ('named/x.bin', None, True)], ['.', 'x/x.bin']]"
tool "$K" store_file "{\"sandbox_id\":\"$BOX\",\"paths\":[\"a.txt\",\"bin/x.bin\"]}"
expect_eq "store_file paths without key_prefix: a new files/<id>/ for the call" \
  "$(rq '[err, sc["key_prefix"].startswith("files/"), [f["key"][len(sc["key_prefix"]):] for f in sc["files"]]]')" \
  "[False, True, ['a.txt', 'x.bin']]"
ex 'mkdir -p tree/sub/deeper && echo one >tree/1.txt && echo two >tree/sub/2.txt && echo three >tree/sub/deeper/3.txt && ln -s /etc/passwd tree/link'
tool "$K" store_file "{\"sandbox_id\":\"$BOX\",\"directory\":\"tree\",\"key_prefix\":\"tree/\"}"
expect_eq "store_file directory: every file below it its own object, at its path below it (the symlink skipped)" \
  "$(rq '[err, sc["stored"], sorted(f["key"] for f in sc["files"]), any(f.get("tar") for f in sc["files"])]')" \
  "[False, 3, ['tree/1.txt', 'tree/sub/2.txt', 'tree/sub/deeper/3.txt'], False]"
conforms store_file
ex 'mkdir odd && echo ok >odd/fine.txt && echo x >"odd/$(printf "bad\\377")"'
tool "$K" store_file "{\"sandbox_id\":\"$BOX\",\"directory\":\"odd\",\"key_prefix\":\"odd/\"}"
expect_eq "store_file directory: a file whose name is not UTF-8 (no key names it) is counted as skipped" \
  "$(rq '[err, sc["stored"], sc.get("skipped_not_utf8"), [f["key"] for f in sc["files"]]]')" \
  "[False, 1, 1, ['odd/fine.txt']]"
conforms store_file
# With a progressToken: one progress notification per file, before the
# reply, on the call's event stream.
python3 - "$URL/mcp" "$K" "$BOX" >"$T_SCRATCH/progress" <<'PYEOF'
import json, sys, urllib.request
url, key, box = sys.argv[1:4]
body = json.dumps({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
    "name": "load_file", "arguments": {"sandbox_id": box, "prefix": "tree/", "path": "in/prog"},
    "_meta": {"progressToken": "p1"}}}).encode()
req = urllib.request.Request(url, data=body, method="POST", headers={
    "Authorization": "Bearer " + key, "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"})
msgs = []
with urllib.request.urlopen(req, timeout=60) as r:
    for line in r.read().decode().splitlines():
        if line.startswith("data:"):
            msgs.append(json.loads(line[5:]))
prog = [m["params"]["progress"] for m in msgs if m.get("method") == "notifications/progress"]
rep = [m for m in msgs if m.get("id") == 9]
print(json.dumps([prog, bool(rep) and rep[0]["result"]["structuredContent"]["loaded"]]))
PYEOF
expect_eq "load_file prefix with a progressToken: progress 1, 2, 3 (one per file), then the result" \
  "$(cat "$T_SCRATCH/progress")" "[[1, 2, 3], 3]"
tool "$K" store_file "{\"sandbox_id\":\"$BOX\",\"directory\":\"many\"}"
expect_err "store_file directory that does not exist: refused" "many"
tool "$K" store_file "{\"sandbox_id\":\"$BOX\",\"paths\":[\"a.txt\"],\"key\":\"x\"}"
expect_err "store_file paths with key: refused (key_prefix names them)" "key_prefix"
args "$T_SCRATCH/a" "{\"sandbox_id\":\"$BOX\",\"paths\":[\"a.txt\"] * 101}"
tool "$K" store_file "@$T_SCRATCH/a"
expect_err "store_file with 101 paths: refused by the schema" "at most 100"
tool "$K" store_file "{\"sandbox_id\":\"$BOX\",\"path\":\"a.txt\",\"key\":\"single/a.txt\"}"
expect_eq "store_file with one path still answers as before" \
  "$(rq '[err, sc["key"], sc["size"], bool(sc["url"])]')" "[False, 'single/a.txt', 6, True]"
conforms store_file

# ---- load_file with keys and prefix
tool "$K" load_file "{\"sandbox_id\":\"$BOX\",\"keys\":[\"tree/1.txt\",\"tree/sub/2.txt\",\"tree/none.txt\"],\"path\":\"in/keys\"}"
expect_eq "load_file keys: each at its key less the shared directory, the missing one reported" \
  "$(rq '[err, sc["loaded"], sc["failed"], [f.get("path") for f in sc["files"]]]')" \
  "[True, 2, ['tree/none.txt'], ['in/keys/1.txt', 'in/keys/sub/2.txt', 'in/keys/none.txt']]"
conforms load_file
tool "$K" load_file "{\"sandbox_id\":\"$BOX\",\"prefix\":\"tree/\",\"path\":\"in/pre/\"}"
expect_eq "load_file prefix: every object below it, into the directory" \
  "$(rq '[err, sc["loaded"], sc["size"], sorted(f["path"] for f in sc["files"])]')" \
  "[False, 3, 14, ['in/pre/1.txt', 'in/pre/sub/2.txt', 'in/pre/sub/deeper/3.txt']]"
conforms load_file
ex 'cat in/keys/1.txt in/keys/sub/2.txt in/pre/sub/deeper/3.txt'
expect_eq "the loaded files hold the objects' bytes" "$(rq 'sc["stdout"]')" "one
two
three"
tool "$K" load_file "{\"sandbox_id\":\"$BOX\",\"keys\":[\"tree/1.txt\",\"tree/../../../etc/evil\",\"tree/./x\",\"tree/sub/\"],\"path\":\"in/esc\"}"
expect_eq "load_file keys climbing out with ../ (or ., or a folder marker): refused each, the good one loaded" \
  "$(rq '[err, sc["loaded"], sc["failed"], all("`..`" in f["error"] for f in sc["files"][1:])]')" \
  "[True, 1, ['tree/../../../etc/evil', 'tree/./x', 'tree/sub/'], True]"
ex 'ls /workspace/in/esc; ls / | grep -c evil; ls /etc | grep -c evil'
expect_eq "nothing was written outside the directory" "$(rq 'sc["stdout"].split()')" "['1.txt', '0', '0']"
tool "$K" load_file "{\"sandbox_id\":\"$BOX\",\"prefix\":\"no-such-prefix/\",\"path\":\"in/none\"}"
expect_err "load_file prefix matching nothing: says so" "no object"
tool "$K" load_file "{\"sandbox_id\":\"$BOX\",\"key\":\"tree/1.txt\",\"keys\":[\"tree/1.txt\"],\"path\":\"x\"}"
expect_err "load_file key and keys together: refused" "give one of"
tool "$K" load_file "{\"sandbox_id\":\"$BOX\",\"keys\":[\"tree/1.txt\"],\"extract\":true,\"path\":\"x\"}"
expect_err "load_file extract with keys: refused" "extract"
tool "$K" load_file "{\"sandbox_id\":\"$BOX\",\"key\":\"single/a.txt\",\"path\":\"one.txt\"}"
expect_eq "load_file with one key still answers as before" "$(rq '[err, sc["size"], sc["path"]]')" \
  "[False, 6, 'one.txt']"
conforms load_file

# ---- the tenant's storage quota reached halfway through a batch
new_tenant mcp-multi-quota && KQ=$TKEY
tool "$KQ" sandbox_create '{}'
BQ=$(rq 'sc["sandbox_id"]')
tool "$KQ" sandbox_exec "{\"sandbox_id\":\"$BQ\",\"command\":\"for i in 1 2 3 4; do head -c 300000 /dev/urandom >q\$i.bin; done\"}"
tool "$KQ" store_file "{\"sandbox_id\":\"$BQ\",\"paths\":[\"q1.bin\",\"q2.bin\",\"q3.bin\",\"q4.bin\"],\"key_prefix\":\"q/\"}"
expect_eq "store_file paths past the quota (1 MiB): the first three stored, the fourth reported as over quota" \
  "$(rq '[err, sc["stored"], sc["failed"], "quota" in sc["files"][3]["error"], sc["size"]]')" \
  "[True, 3, ['q4.bin'], True, 900000]"
conforms store_file
tool "$KQ" list_objects '{"prefix":"q/"}'
expect_eq "the store holds the three that fit" "$(rq '[o["key"] for o in sc["objects"]]')" \
  "['q/q1.bin', 'q/q2.bin', 'q/q3.bin']"
tool "$KQ" sandbox_destroy "{\"sandbox_id\":\"$BQ\"}"

tool "$K" sandbox_destroy "{\"sandbox_id\":\"$BOX\"}"
check "the daemon is healthy" bash -c "curl -sf --max-time 10 '$URL/v1/health' >/dev/null"
serve_stop
serve_finish
