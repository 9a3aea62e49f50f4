#!/bin/bash
# MCP resources and prompts (docs/mcp.md "Resources" and "Prompts"):
# husk serve with its S3 listener, --mcp-prompts and --mcp-resources,
# driven over Streamable HTTP in both eras, and `husk mcp` over stdio.
# Documents listed and read (text, JSON, binary, too large, hidden, a
# symlink out, escapes); the tenant's stored objects listed, paged and read
# (a large one as a link that gives its bytes), never another tenant's; a
# live sandbox's files read by the template; bad URIs and cursors; the
# capabilities each era and transport advertise; subscriptions on stdio
# notified when a document or a sandbox file changes, and ended by
# unsubscribe; prompts listed and filled, bad arguments refused, and every
# malformed prompt file reported with its file and line, the others served.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../serve/serve.bash"
. "$(dirname "$0")/../serve/s3.bash"
MCPDIR=$(cd "$(dirname "$0")" && pwd)
. "$MCPDIR/mcp.bash"

# ---- the operator's directories -------------------------------------------------
P=$T_SCRATCH/prompts D=$T_SCRATCH/docs
mkdir -p "$P" "$D/sub" "$D/.git"
cat >"$P/summarize.md" <<'EOF'
---
name: summarize-deck
title: Summarize a deck
description: Summarize a slide deck the user stored
arguments:
  - name: key
    description: the object's key
    required: true
  - name: tone
    description: how to write it
---

Load {{key}} into a sandbox with load_file and summarize it{{ tone }}.
Keep {{key}} unchanged.
EOF
printf 'Plain prompt without front matter.\n' >"$P/plain-note.md"
printf -- '---\nname: broken\ndescription: [not closed\n---\nhi\n' >"$P/bad_yaml.md"
printf -- '---\nname: place\n---\nline one\nhello {{nobody}}\n' >"$P/bad_place.md"
printf -- '---\nname: summarize-deck\n---\nsame name\n' >"$P/zz-dup.md"
printf -- '---\nname: fields\ncolour: red\n---\ntext\n' >"$P/bad_field.md"
printf -- '---\nname: args\narguments: yes\n---\ntext\n' >"$P/bad_args.md"
printf -- '---\nname: "bad name!"\n---\ntext\n' >"$P/bad_name.md"
printf -- '---\nname: open\nno end\n' >"$P/bad_open.md"
printf -- '---\nname: empty\n---\n\n' >"$P/bad_empty.md"
printf '\xff\xfe not utf-8\n' >"$P/bad_utf8.md"
head -c 300000 /dev/zero | tr '\0' 'a' >"$P/bad_big.md"
printf 'not a prompt\n' >"$P/readme.txt"
printf -- '---\nname: twice\narguments:\n  - name: a\narguments:\n  - name: b\n---\nhi {{a}} {{b}}\n' >"$P/bad_twice.md"
python3 -c "print('---\nname: deep\ndescription: ' + '[' * 50000 + ']' * 50000 + '\n---\nx')" >"$P/bad_deep.md"

printf '# Guide\nRead me first.\n' >"$D/guide.md"
printf '{"a": 1}\n' >"$D/sub/data.json"
head -c 1000 /dev/urandom >"$D/blob.bin"
head -c 3200000 /dev/urandom >"$D/big.bin"
printf 'secret\n' >"$D/.env"
printf 'x\n' >"$D/.git/config"
ln -s /etc/hostname "$D/out-link"
mkfifo "$D/pipe"
for i in $(seq -w 1 130); do printf 'doc %s\n' "$i" >"$D/sub/n$i.txt"; done
NDOCS=134 # guide.md, data.json, blob.bin, big.bin and the 130 notes

if ! s3_start --mcp-wait 20 --mcp-prompts "$P" --mcp-resources "$D"; then
  not_ok "the daemon starts with --mcp-prompts and --mcp-resources"
  finish
  exit 1
fi
s3_creds res-a && KA=$TKEY
new_tenant res-b && KB=$TKEY

# rpc KEY METHOD PARAMS [modern]: the reply in R (as mcpcall.py prints it)
rpc() {
  R=$(python3 - "$URL/mcp" "$1" "$2" "$3" "${4:-}" <<'EOF'
import json, sys, urllib.error, urllib.request
url, key, method, params, modern = sys.argv[1:6]
params = json.loads(params)
headers = {"Authorization": "Bearer " + key, "Content-Type": "application/json",
           "Accept": "application/json, text/event-stream"}
if modern:
    params.setdefault("_meta", {}).update({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}})
    headers.update({"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": method})
    if "uri" in params or "name" in params:
        headers["Mcp-Name"] = params.get("uri", params.get("name"))
else:
    headers["MCP-Protocol-Version"] = "2025-11-25"
body = json.dumps({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).encode()
req = urllib.request.Request(url, data=body, method="POST", headers=headers)
try:
    with urllib.request.urlopen(req, timeout=120) as r:
        status, data = r.status, r.read().decode()
except urllib.error.HTTPError as e:
    status, data = e.code, e.read().decode()
reply = None
for line in data.splitlines():
    if line.startswith("data:"):
        reply = json.loads(line[5:])
if reply is None and data:
    reply = json.loads(data)
print(json.dumps({"http": status, "reply": reply}))
EOF
)
}
code() { rq '(rep.get("error") or {}).get("code")'; }

# ---- bad prompt files are reported, the good ones served ------------------------------
for f in "bad_twice.md:5" "bad_deep.md:3" "bad_yaml.md:4" "bad_place.md:5" "bad_field.md:3" "bad_args.md:3" "bad_name.md" \
         "bad_open.md:1" "bad_empty.md" "bad_utf8.md" "bad_big.md" "zz-dup.md"; do
  check "a malformed prompt file is reported: $f" grep -q "prompt $f" "$SERVE_LOG"
done
check "... with what is wrong (a place naming no argument)" grep -q "bad_place.md:5: {{nobody}} names no declared argument" "$SERVE_LOG"
check "... a key given twice (libyaml accepts it; a prompt file must not)" grep -q "bad_twice.md:5: \`arguments\` is given twice" "$SERVE_LOG"
check "... front matter nested too deep, at once" grep -q "bad_deep.md:3: front matter nested deeper than 16 levels" "$SERVE_LOG"
check "... a YAML error with the line of what was left open" grep -q "bad_yaml.md:4: front matter is not valid YAML: .*started on line 3" "$SERVE_LOG"
check "... a name taken by an earlier file (in name order) is named" grep -q "zz-dup.md: prompt \`summarize-deck\` is already defined" "$SERVE_LOG"
check "the good prompt files are not reported" not grep -qE "prompt (summarize|plain-note)" "$SERVE_LOG"
check "the daemon runs on" kill -0 "$SPID"

# ---- capabilities --------------------------------------------------------------------------
rpc "$KA" initialize '{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}'
expect_eq "HTTP initialize: resources (no subscribe over HTTP) and prompts" \
  "$(rq 'json.dumps(res["capabilities"], sort_keys=True)')" '{"prompts": {}, "resources": {}, "tools": {}}'
rpc "$KA" server/discover '{}' modern
expect_eq "HTTP server/discover (2026-07-28): the same" \
  "$(rq 'json.dumps(res["capabilities"], sort_keys=True)')" '{"prompts": {}, "resources": {}, "tools": {}}'

# ---- prompts ---------------------------------------------------------------------------------
rpc "$KA" prompts/list '{}'
expect_eq "prompts/list: the two good files, by name" "$(rq '[p["name"] for p in res["prompts"]]')" "['plain-note', 'summarize-deck']"
expect_eq "prompts/list: title, description, arguments with required" \
  "$(rq '[(p.get("title"), p.get("description"), [(a["name"], a["required"], a.get("description")) for a in p.get("arguments", [])]) for p in res["prompts"] if p["name"] == "summarize-deck"]')" \
  "[('Summarize a deck', 'Summarize a slide deck the user stored', [('key', True, \"the object's key\"), ('tone', False, 'how to write it')])]"
rpc "$KA" prompts/get '{"name":"summarize-deck","arguments":{"key":"decks/q3.pptx","tone":" briefly"}}'
expect_eq "prompts/get: every place filled, the text after the front matter" \
  "$(rq 'json.dumps(res["messages"])')" \
  '[{"role": "user", "content": {"type": "text", "text": "Load decks/q3.pptx into a sandbox with load_file and summarize it briefly.\nKeep decks/q3.pptx unchanged.\n"}}]'
rpc "$KA" prompts/get '{"name":"summarize-deck","arguments":{"key":"{{tone}}"}}'
expect_eq "prompts/get: a value is not filled again, an optional argument left out is empty" \
  "$(rq 'res["messages"][0]["content"]["text"].splitlines()[0]')" "Load {{tone}} into a sandbox with load_file and summarize it."
rpc "$KA" prompts/get '{"name":"plain-note"}'
expect_eq "prompts/get: a file without front matter is named after the file" "$(rq 'res["messages"][0]["content"]["text"]')" "Plain prompt without front matter."
rpc "$KA" prompts/get '{"name":"summarize-deck","arguments":{}}'
expect_eq "prompts/get: a missing required argument is -32602 naming it" "$(rq 'str(rep["error"]["code"]) + " " + rep["error"]["message"]')" \
  "-32602 Invalid params: prompt \`summarize-deck\` needs the argument \`key\`"
rpc "$KA" prompts/get '{"name":"summarize-deck","arguments":{"key":"a","colour":"red"}}'
expect_eq "prompts/get: an undeclared argument is refused" "$(code)" -32602
rpc "$KA" prompts/get '{"name":"summarize-deck","arguments":{"key":5}}'
expect_eq "prompts/get: a value that is not a string is refused" "$(code)" -32602
rpc "$KA" prompts/get '{"name":"summarize-deck","arguments":"key"}'
expect_eq "prompts/get: arguments that are not an object are refused" "$(code)" -32602
LONG=$(python3 -c 'print("a" * 63 + "\u00e9" * 40)')
rpc "$KA" prompts/get "{\"name\":\"$LONG\"}"
expect_eq "prompts/get: an unknown name cut inside a character in the message still gets its error" "$(code)" -32602
rpc "$KA" prompts/get "{\"name\":\"summarize-deck\",\"arguments\":{\"key\":\"k\",\"$LONG\":\"v\"}}"
expect_eq "prompts/get: ... so does an unknown argument named so" "$(code)" -32602
rpc "$KA" prompts/get '{"name":"broken"}'
expect_eq "prompts/get: a prompt whose file was left out is unknown" "$(rq 'rep["error"]["message"]')" \
  "Invalid params: unknown prompt \`broken\` (prompts/list names them)"
rpc "$KA" prompts/get '{"name":"summarize-deck","arguments":{"key":"a"}}' modern
expect_eq "prompts/get (2026-07-28): resultType complete" "$(rq 'res["resultType"] + " " + res["messages"][0]["role"]')" "complete user"
rpc "$KA" prompts/list '{}' modern
expect_eq "prompts/list (2026-07-28): cached, public" "$(rq 'str(res["ttlMs"] > 0) + " " + res["cacheScope"]')" "True public"

# ---- documents -----------------------------------------------------------------------------
all_pages() { # KEY [modern]: every resource of every page, one per line, in LIST
  LIST=$T_SCRATCH/list.$RANDOM
  local cursor="" params p=0
  : >"$LIST"
  while :; do
    params='{}'
    [ -n "$cursor" ] && params="{\"cursor\":\"$cursor\"}"
    rpc "$1" resources/list "$params" "${2:-}"
    rq '"\n".join(r["uri"] + " " + str(r.get("size")) + " " + r["mimeType"] for r in res["resources"])' >>"$LIST"
    cursor=$(rq 'res.get("nextCursor", "")')
    p=$((p + 1))
    { [ -z "$cursor" ] || [ $p -gt 50 ]; } && break
  done
  PAGES=$p
}
all_pages "$KA"
expect_eq "resources/list: every document, over pages of at most 100" "$(grep -c '^husk://docs/' "$LIST") $PAGES" "$NDOCS 2"
expect_eq "resources/list: no URI twice" "$(cut -d' ' -f1 "$LIST" | sort | uniq -d | wc -l)" 0
check "resources/list: a document with its size and type" grep -qx 'husk://docs/guide.md 23 text/markdown' "$LIST"
check "resources/list: in subdirectories too" grep -qx 'husk://docs/sub/data.json 9 application/json' "$LIST"
check "resources/list: no hidden file, no symlink, no FIFO" not grep -qE '/\.env|\.git|out-link|pipe' "$LIST"

rpc "$KA" resources/read '{"uri":"husk://docs/guide.md"}'
expect_eq "resources/read: a text document" "$(rq 'json.dumps(res["contents"])')" \
  '[{"uri": "husk://docs/guide.md", "mimeType": "text/markdown", "text": "# Guide\nRead me first.\n"}]'
rpc "$KA" resources/read '{"uri":"husk://docs/blob.bin"}'
got=$(python3 -c 'import json,sys,base64,hashlib; o=json.loads(sys.argv[1]); print(hashlib.sha256(base64.b64decode(o["reply"]["result"]["contents"][0]["blob"])).hexdigest())' "$R")
expect_eq "resources/read: a binary document is a blob of its exact bytes" "$got" "$(sha256sum "$D/blob.bin" | cut -d' ' -f1)"
rpc "$KA" resources/read '{"uri":"husk://docs/big.bin"}'
expect_eq "resources/read: a document over 3 MiB is a note saying so, with its size" \
  "$(rq '[(c["mimeType"], c["_meta"]["husk/size"], c["_meta"]["husk/truncated"], "more than a read returns" in c["text"]) for c in res["contents"]][0]')" \
  "('text/plain', 3200000, True, True)"
for bad in ".env" ".git/config" "out-link" "pipe" "sub" "../etc/hostname" "sub/../../etc/hostname" \
           "%2e%2e/etc/hostname" "guide.md%00x" "guide%zz" "nope.md" "/etc/hostname" ""; do
  rpc "$KA" resources/read "{\"uri\":\"husk://docs/$bad\"}"
  expect_eq "resources/read: husk://docs/$bad is not found (-32002)" "$(code)" -32002
done
rpc "$KA" resources/read '{"uri":"file:///etc/passwd"}'
expect_eq "resources/read: a URI of another scheme is not found" "$(code)" -32002
rpc "$KA" resources/read '{"uri":"husk://docs/guide.md"}' modern
expect_eq "resources/read (2026-07-28): cached privately, resultType complete" \
  "$(rq 'str(res["ttlMs"]) + " " + res["cacheScope"] + " " + res["resultType"]')" "0 private complete"
rpc "$KA" resources/read '{"uri":"husk://docs/nope"}' modern
expect_eq "resources/read (2026-07-28): not found is -32602" "$(code)" -32602
rpc "$KA" resources/read '{}'
expect_eq "resources/read: no uri is -32602" "$(code)" -32602
rpc "$KA" resources/list '{"cursor":"bm9wZQ=="}'
expect_eq "resources/list: an unknown cursor is -32602" "$(code)" -32602
rpc "$KA" resources/list '{"cursor":5}'
expect_eq "resources/list: a cursor that is not a string is -32602" "$(code)" -32602

# ---- the tenant's stored objects -------------------------------------------------------------
tool "$KA" store_file '{"content":"hello store\n","key":"notes/a b&c.txt"}'
expect_eq "store_file: an object to list" "$(rq 'sc.get("size")')" 12
head -c 3500000 /dev/urandom >"$T_SCRATCH/big"
tool "$KA" sandbox_create '{}'
SID=$(rq 'sc["sandbox_id"]')
python3 -c 'import base64,json,sys; print(json.dumps({"sandbox_id":sys.argv[1],"path":"big.bin","content":base64.b64encode(open(sys.argv[2],"rb").read()[:3000000]).decode(),"encoding":"base64"}))' "$SID" "$T_SCRATCH/big" >"$T_SCRATCH/w1.json"
tool "$KA" sandbox_write_file "@$T_SCRATCH/w1.json"
python3 -c 'import base64,json,sys; print(json.dumps({"sandbox_id":sys.argv[1],"path":"big.bin","content":base64.b64encode(open(sys.argv[2],"rb").read()[3000000:]).decode(),"encoding":"base64","append":True}))' "$SID" "$T_SCRATCH/big" >"$T_SCRATCH/w2.json"
tool "$KA" sandbox_write_file "@$T_SCRATCH/w2.json"
tool "$KA" store_file "{\"sandbox_id\":\"$SID\",\"path\":\"big.bin\",\"key\":\"big.bin\"}"
expect_eq "store_file: a 3.5 MB object" "$(rq 'sc.get("size")')" 3500000
all_pages "$KA"
check "resources/list: the tenant's object, its key percent-encoded" grep -qx 'husk://store/husk-mcp/notes/a%20b%26c.txt 12 text/plain' "$LIST"
check "resources/list: the large object too" grep -q '^husk://store/husk-mcp/big.bin 3500000 ' "$LIST"
all_pages "$KB"
check "resources/list: another tenant sees the documents but none of its objects" \
  test "$(grep -c '^husk://docs/' "$LIST") $(grep -c '^husk://store/' "$LIST")" = "$NDOCS 0"
rpc "$KA" resources/read '{"uri":"husk://store/husk-mcp/notes/a%20b%26c.txt"}'
expect_eq "resources/read: a stored object, as text" "$(rq 'res["contents"][0]["text"] + res["contents"][0]["mimeType"]')" "hello store
text/plain"
rpc "$KB" resources/read '{"uri":"husk://store/husk-mcp/notes/a%20b%26c.txt"}'
expect_eq "resources/read: another tenant's object is not found" "$(code)" -32002
rpc "$KA" resources/read '{"uri":"husk://store/husk-mcp/big.bin"}'
url=$(rq 'res["contents"][0]["_meta"]["husk/url"]')
expect_eq "resources/read: an object over 3 MiB is a note with its size and a link" \
  "$(rq '[(c["_meta"]["husk/size"], c["_meta"]["husk/url"] in c["text"]) for c in res["contents"]][0]')" "(3500000, True)"
curl -sS --max-time 60 -o "$T_SCRATCH/got" "$url"
expect_eq "... the link gives its exact bytes" "$(sha256sum <"$T_SCRATCH/got")" "$(sha256sum <"$T_SCRATCH/big")"
for bad in "husk-mcp" "husk-mcp/" "/notes/x" "_internal/x" "husk-mcp/nope" "no-such-bucket/x"; do
  rpc "$KA" resources/read "{\"uri\":\"husk://store/$bad\"}"
  expect_eq "resources/read: husk://store/$bad is not found" "$(code)" -32002
done
rpc "$KA" resources/list '{}' modern
expect_eq "resources/list (2026-07-28): cached briefly and privately (the tenant's objects)" \
  "$(rq 'str(0 < res["ttlMs"] <= 60000) + " " + res["cacheScope"]')" "True private"

# ---- a live sandbox's files ---------------------------------------------------------------------
rpc "$KA" resources/templates/list '{}'
expect_eq "resources/templates/list: sandbox files, stored objects, documents" \
  "$(rq '[t["uriTemplate"] for t in res["resourceTemplates"]]')" \
  "['husk://sandbox/{sandbox_id}/files/{+path}', 'husk://store/{bucket}/{+key}', 'husk://docs/{+path}']"
tool "$KA" sandbox_write_file "{\"sandbox_id\":\"$SID\",\"path\":\"out/r é.csv\",\"content\":\"a,b\\n1,2\\n\"}"
rpc "$KA" resources/read "{\"uri\":\"husk://sandbox/$SID/files/workspace/out/r%20%C3%A9.csv\"}"
expect_eq "resources/read: a sandbox file by the template" "$(rq 'res["contents"][0]["text"] + res["contents"][0]["mimeType"]')" "a,b
1,2
text/csv"
rpc "$KA" resources/read "{\"uri\":\"husk://sandbox/$SID/files/workspace/big.bin\"}"
expect_eq "resources/read: a sandbox file over 3 MiB is a note (read it in pages)" \
  "$(rq '[(c["_meta"]["husk/size"], "sandbox_read_file" in c["text"]) for c in res["contents"]][0]')" "(3500000, True)"
rpc "$KB" resources/read "{\"uri\":\"husk://sandbox/$SID/files/workspace/out/r%20%C3%A9.csv\"}"
expect_eq "resources/read: another tenant's sandbox is not found" "$(code)" -32002
for bad in "files/workspace" "files/" "nofiles/workspace/x" "files/workspace/nope" "files/proc/self/environ"; do
  rpc "$KA" resources/read "{\"uri\":\"husk://sandbox/$SID/$bad\"}"
  expect_eq "resources/read: husk://sandbox/<id>/$bad is not found" "$(code)" -32002
done
tool "$KA" sandbox_exec "{\"sandbox_id\":\"$SID\",\"command\":\"ln -s /etc/shadow /workspace/sh && ln -s ../../../../etc/hostname /workspace/up\"}"
rpc "$KA" resources/read "{\"uri\":\"husk://sandbox/$SID/files/workspace/up\"}"
expect_eq "resources/read: a sandbox symlink is followed inside the sandbox, never to the host" \
  "$(rq '(rep.get("error") or {}).get("code") or res["contents"][0].get("text", "") != open("/etc/hostname").read()')" "-32002"
tool "$KA" sandbox_exec "{\"sandbox_id\":\"$SID\",\"command\":\"mkfifo /tmp/fifo\"}"
rpc "$KA" resources/read "{\"uri\":\"husk://sandbox/$SID/files/tmp/fifo\"}"
expect_eq "resources/read: a FIFO in a sandbox is not found (not an internal error), without waiting for a writer" "$(code)" -32002
rpc "$KA" resources/read '{"uri":"husk://sandbox/b_nope/files/workspace/x"}'
expect_eq "resources/read: an unknown sandbox is not found" "$(code)" -32002
rpc "$KA" resources/subscribe '{"uri":"husk://docs/guide.md"}'
expect_eq "resources/subscribe over HTTP: not offered, -32601" "$(code)" -32601
rpc "$KA" resources/subscribe '{"uri":"husk://docs/guide.md"}' modern
expect_eq "resources/subscribe (2026-07-28): no such method" "$(code)" -32601

# ---- stdio: capabilities and subscriptions --------------------------------------------------------
INIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
S="$T_SCRATCH/session"
{
  echo "$INIT"
  echo '{"jsonrpc":"2.0","method":"notifications/initialized"}'
  echo '{"jsonrpc":"2.0","id":2,"method":"resources/subscribe","params":{"uri":"husk://docs/guide.md"}}'
  echo "touch $D/guide.md changed"
  echo "wait notifications/resources/updated 8"
  echo '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"sandbox_create","arguments":{}}}'
  echo '{"jsonrpc":"2.0","id":4,"method":"resources/unsubscribe","params":{"uri":"husk://docs/guide.md"}}'
  echo "touch $D/guide.md again"
  echo "quiet 2.5"
  echo '{"jsonrpc":"2.0","id":5,"method":"resources/subscribe","params":{"uri":"file:///etc/passwd"}}'
  echo '{"jsonrpc":"2.0","id":6,"method":"resources/subscribe","params":{}}'
  echo '{"jsonrpc":"2.0","id":7,"method":"prompts/get","params":{"name":"summarize-deck","arguments":{"key":"k"}}}'
} >"$S.in"
python3 "$MCPDIR/stdio_session.py" "$HUSK" mcp --data "$T_SCRATCH/sd" --wait 20 --prompts "$P" \
  --resources "$D" <"$S.in" >"$S.out"
sq() { python3 -c '
import json, sys
msgs = [json.loads(l) for l in open(sys.argv[1])]
got = [m["got"] for m in msgs if "got" in m]
r = {m["id"]: m for m in got if "id" in m}
notes = [m for m in got if "method" in m]
last = msgs[-1]
print(eval(sys.argv[2]))' "$S.out" "$1"; }
expect_eq "stdio initialize: resources with subscribe, prompts" \
  "$(sq 'json.dumps(r[1]["result"]["capabilities"], sort_keys=True)')" '{"prompts": {}, "resources": {"subscribe": true}, "tools": {}}'
expect_eq "stdio: subscribe answers {}" "$(sq 'r[2]["result"]')" "{}"
expect_eq "stdio: a change to the document is notified once, with its URI" \
  "$(sq '[(m["method"], m["params"]["uri"]) for m in notes]')" "[('notifications/resources/updated', 'husk://docs/guide.md')]"
expect_eq "stdio: after unsubscribe, a change is not notified" "$(sq 'sum(1 for m in msgs if "timeout" in m)')" 0
expect_eq "stdio: subscribing to a URI that is none of ours is not found" "$(sq 'r[5]["error"]["code"]')" -32002
expect_eq "stdio: subscribe without uri is -32602" "$(sq 'r[6]["error"]["code"]')" -32602
expect_eq "stdio: prompts/get" "$(sq 'r[7]["result"]["messages"][0]["content"]["text"].split(" ")[1]')" k
expect_eq "stdio: the bad prompt files are reported on stderr too" "$(sq 'last["stderr"].count("(left out)")')" 12
expect_eq "stdio: the server ends cleanly at EOF with a subscription" "$(sq 'last["exit"]')" 0

SB=$(sq 'r[3]["result"]["structuredContent"]["sandbox_id"]')
{
  echo "$INIT"
  echo "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":\"sandbox_write_file\",\"arguments\":{\"sandbox_id\":\"$SB\",\"path\":\"w.txt\",\"content\":\"one\"}}}"
  echo "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"resources/subscribe\",\"params\":{\"uri\":\"husk://sandbox/$SB/files/workspace/w.txt\"}}"
  echo "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"resources/subscribe\",\"params\":{\"uri\":\"husk://sandbox/$SB/files/workspace/later.txt\"}}"
  echo "quiet 1.5"
  echo "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":\"sandbox_exec\",\"arguments\":{\"sandbox_id\":\"$SB\",\"command\":\"echo two >> w.txt; echo new > later.txt\"}}}"
  echo "quiet 3"
  echo "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"resources/read\",\"params\":{\"uri\":\"husk://sandbox/$SB/files/workspace/w.txt\"}}"
  echo "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{\"name\":\"sandbox_destroy\",\"arguments\":{\"sandbox_id\":\"$SB\"}}}"
  echo '{"jsonrpc":"2.0","id":8,"method":"prompts/list","params":{}}'
  echo '{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"sandbox_create","arguments":{}}}'
} >"$S.in"
python3 "$MCPDIR/stdio_session.py" "$HUSK" mcp --data "$T_SCRATCH/sd" --wait 20 --quiet <"$S.in" >"$S.out"
expect_eq "stdio: a sandbox file written by a command is notified; a file that appears too" \
  "$(sq 'sorted(m["params"]["uri"].rsplit("/", 1)[1] for m in notes)')" "['later.txt', 'w.txt']"
expect_eq "stdio: ... and reads as it is now" "$(sq 'r[6]["result"]["contents"][0]["text"]')" "onetwo"
SB2=$(sq 'r[9]["result"]["structuredContent"]["sandbox_id"]')
expect_eq "stdio: without --prompts, prompts are declared and listed empty" \
  "$(sq 'sorted(r[1]["result"]["capabilities"]) + r[8]["result"]["prompts"]')" "['prompts', 'resources', 'tools']"

{
  echo "$INIT"
  echo "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"resources/subscribe\",\"params\":{\"uri\":\"husk://sandbox/$SB2/files/tmp/cold\"}}"
  echo "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"sandbox_exec\",\"arguments\":{\"sandbox_id\":\"$SB2\",\"command\":\"echo hi > /tmp/cold\"}}}"
  echo "wait notifications/resources/updated 8"
  echo "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{\"name\":\"sandbox_destroy\",\"arguments\":{\"sandbox_id\":\"$SB2\"}}}"
} >"$S.in"
python3 "$MCPDIR/stdio_session.py" "$HUSK" mcp --data "$T_SCRATCH/sd" --wait 20 --quiet <"$S.in" >"$S.out"
expect_eq "stdio: a subscription as the first request of a session (the core not yet open) is notified" \
  "$(sq '[m["params"]["uri"].rsplit("/", 1)[1] for m in notes]')" "['cold']"

OUT=$("$HUSK" mcp --data "$T_SCRATCH/sd" --prompts "$T_SCRATCH/none" </dev/null 2>&1)
rc=$?
expect_eq "husk mcp --prompts with a missing directory does not start (exit 1), saying why" \
  "$rc $(grep -c 'prompts directory .*/none: No such file or directory' <<<"$OUT")" "1 1"
OUT=$("$HUSK" mcp --resources "$D" --server "$URL" --key x </dev/null 2>&1)
expect_eq "husk mcp --server with --resources is refused (the server's are served)" "$?" 2
OUT=$("$HUSK" serve --listen 127.0.0.1:0 --data "$T_SCRATCH/d2" --mcp-resources "$T_SCRATCH/none" </dev/null 2>&1)
expect_eq "husk serve --mcp-resources with a missing directory does not start" "$?" 1

# ---- the official SDK clients and MCP Inspector's CLI ----------------------------------------
NODE=$MCPDIR/node_modules/.bin/node
if ! "$MCPDIR/setup.sh"; then
  not_ok "npm packages install (tests/mcp/setup.sh)"
else
  for sdk in v1 v2; do
    for mode in stdio http remote; do
      (cd "$MCPDIR" && SDK=$sdk MODE=$mode HUSK="$HUSK" HUSK_DATA="$T_SCRATCH/sd" URL="$URL/mcp" \
         KEY="$KA" DOCS="$D" PROMPTS="$P" timeout 300 "$NODE" resources.mjs) >"$T_SCRATCH/out" 2>"$T_SCRATCH/err"
      rc=$?
      cat "$T_SCRATCH/out"
      if [ "$rc" -ne 0 ] && ! grep -q '^not ok' "$T_SCRATCH/out"; then
        not_ok "$sdk over $mode: the client script failed (exit $rc)"
        sed 's/^/#   /' "$T_SCRATCH/err" | tail -20
      fi
    done
  done
  insp() { # ARGS...: OUT, RC
    OUT=$(cd "$T_SCRATCH" && PATH="$MCPDIR/node_modules/.bin:$PATH" MCP_INSPECTOR_SECRET_STORE=memory \
            timeout 120 mcp-inspector --cli "$@" 2>"$T_SCRATCH/insp.err")
    RC=$?
  }
  ij() { python3 -c 'import json, sys; j = json.loads(sys.argv[1]); j = j.get("result", j); print(eval(sys.argv[2]))' "$OUT" "$1" 2>&1; }
  STDIO=("$HUSK" mcp --data "$T_SCRATCH/sd" --quiet --resources "$D" --prompts "$P" --)
  HTTP=("$URL/mcp" --transport http --header "Authorization: Bearer $KA")
  for via in STDIO HTTP; do
    declare -n srv=$via
    insp "${srv[@]}" --method resources/list --format json
    expect_eq "inspector ($via): resources/list" "$RC $(ij '"husk://docs/guide.md" in [r["uri"] for r in j["resources"]]')" "0 True"
    insp "${srv[@]}" --method resources/read --uri husk://docs/sub/data.json --format json
    expect_eq "inspector ($via): resources/read" "$RC $(ij 'j["contents"][0]["text"]')" "0 {\"a\": 1}"
    insp "${srv[@]}" --method resources/templates/list --format json
    expect_eq "inspector ($via): resources/templates/list" "$RC $(ij 'j["resourceTemplates"][0]["name"]')" "0 sandbox-file"
    insp "${srv[@]}" --method prompts/list --format json
    expect_eq "inspector ($via): prompts/list" "$RC $(ij '[p["name"] for p in j["prompts"]]')" "0 ['plain-note', 'summarize-deck']"
    insp "${srv[@]}" --method prompts/get --prompt-name summarize-deck --prompt-args key=k.pptx --format json
    expect_eq "inspector ($via): prompts/get with an argument" "$RC $(ij 'j["messages"][0]["content"]["text"].split()[1]')" "0 k.pptx"
    unset -n srv
  done
fi

# Exactly a page of documents: the objects are on the next page.
serve_stop
D100=$T_SCRATCH/docs100
mkdir -p "$D100"
for i in $(seq -w 1 100); do printf 'doc %s\n' "$i" >"$D100/d$i.txt"; done
if s3_start --mcp-wait 20 --mcp-resources "$D100"; then
  all_pages "$KA"
  expect_eq "resources/list: a page filled by the documents alone is followed by the objects" \
    "$(grep -c '^husk://docs/' "$LIST") $(grep -c '^husk://store/husk-mcp/notes/a%20b%26c.txt ' "$LIST") $PAGES" "100 1 2"
else
  not_ok "the daemon starts again with 100 documents"
fi

serve_stop
expect_eq "the daemon stops cleanly" "$SERVE_RC" 0
finish
