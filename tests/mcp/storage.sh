#!/bin/bash
# The storage plane over MCP (docs/mcp.md "Storage tools"): husk serve with
# its S3 listener, driven over Streamable HTTP.  run_code's large output
# file as a resource_link whose URL gives exactly the bytes; store_file
# from a sandbox path (file and directory) and from inline content;
# get_link; list_objects with prefix and paging; load_file back into a
# sandbox; the link's access log; every bad input; the audit records; a
# daemon that cannot make links; standalone `husk mcp` without the tools.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../serve/serve.bash"
. "$(dirname "$0")/../serve/s3.bash"
MCPDIR=$(cd "$(dirname "$0")" && pwd)

. "$MCPDIR/mcp.bash"
fetch() { curl -sS --max-time 60 -o "$T_SCRATCH/got" -w '%{http_code}' "$1"; }
sha() { sha256sum "$1" | cut -d' ' -f1; }

if ! s3_start --mcp-wait 30; then
  not_ok "the daemon starts with its S3 listener"
  finish
  exit 1
fi
s3_creds mcp-store-a && KA=$TKEY AKA=$AK SKA=$SK TA=$TID
new_tenant mcp-store-b && KB=$TKEY

# ---- tools/list ---------------------------------------------------------------------
R=$(python3 "$MCPDIR/mcpcall.py" "$URL/mcp" "$KA" tools/list)
expect_eq "tools/list: the five storage tools follow husk's own, then expose_port (husk serve serves previews)" \
  "$(rq '",".join(t["name"] for t in rep["result"]["tools"][18:])')" "store_file,get_link,list_objects,load_file,create_upload_link,expose_port"
expect_eq "tools/list: each has an input and an output schema" \
  "$(rq 'all(t.get("outputSchema",{}).get("type") == "object" and t["inputSchema"]["type"] == "object" for t in rep["result"]["tools"][18:])')" true

# ---- run_code: a large non-image file comes back as a link -------------------------------
tool "$KA" run_code '{"language":"python","code":"import os, random, hashlib\nos.makedirs(\"output\", exist_ok=True)\nd = random.Random(7).randbytes(300000)\nopen(\"output/data.bin\", \"wb\").write(d)\nprint(hashlib.sha256(d).hexdigest())"}'
want=$(rq 'sc["stdout"].strip()')
url=$(rq 'links[0]["uri"]')
expect_eq "run_code: data.bin is returned as a resource_link" "$(rq 'links[0]["name"] + " " + str(links[0]["size"]) + " " + sc["files"][0]["returned_as"]')" "data.bin 300000 link"
expect_eq "run_code: the link is in the JSON text too" "$(rq 'links[0]["uri"] in txt and sc["files"][0]["url"] == links[0]["uri"]')" true
expect_eq "run_code: the link (curl) gives 200" "$(fetch "$url")" 200
expect_eq "run_code: ... and exactly the bytes the code wrote" "$(sha "$T_SCRATCH/got")" "$want"
check "run_code: the sha256 printed is a real one" test ${#want} -eq 64

# Whole outputs too long to inline are linked too (the box is gone).
tool "$KA" run_code '{"language":"python","code":"for i in range(8000):\n    print(\"row %05d\" % i)"}'
expect_eq "run_code: a truncated stdout is linked (stdout_url, a resource_link)" \
  "$(rq 'sc["stdout_truncated"] and links[0]["uri"] == sc["stdout_url"] and sc["stdout_url"] in " ".join(sc["notes"])')" true
fetch "$(rq 'sc["stdout_url"]')" >/dev/null
expect_eq "run_code: ... the link gives the whole output" "$(sha "$T_SCRATCH/got")" \
  "$(python3 -c 'import sys; sys.stdout.write("".join("row %05d\n" % i for i in range(8000)))' | sha256sum | cut -d' ' -f1)"

# ---- store_file from a sandbox ------------------------------------------------------------
tool "$KA" sandbox_create '{}'
SID=$(rq 'sc["sandbox_id"]')
tool "$KA" sandbox_exec "{\"sandbox_id\":\"$SID\",\"command\":\"printf 'line,defects\\\\n1,3\\\\n2,5\\\\n' > report.csv && mkdir -p deck/img && echo slide1 > deck/a.txt && head -c 5000 /dev/urandom > deck/img/b.bin\"}"
expect_eq "sandbox: the files to store are written" "$(rq 'sc.get("exit_code")')" 0
tool "$KA" store_file "{\"sandbox_id\":\"$SID\",\"path\":\"report.csv\",\"key\":\"reports/q3.csv\"}"
expect_eq "store_file (box path): bucket, key, size" "$(rq 'sc["bucket"] + " " + sc["key"] + " " + str(sc["size"])')" "husk-mcp reports/q3.csv 21"
expect_eq "store_file (box path): a resource_link with the same URL, in the text too" \
  "$(rq 'links[0]["uri"] == sc["url"] and sc["url"] in txt and links[0]["name"] == "q3.csv" and bool(sc["expires_at"]) and len(sc["etag"]) == 32')" true
LINK_ID=$(rq 'sc["link_id"]')
expect_eq "store_file (box path): the link downloads" "$(fetch "$(rq 'sc["url"]')")" 200
expect_eq "store_file (box path): ... the file's content" "$(cat "$T_SCRATCH/got")" "$(printf 'line,defects\n1,3\n2,5\n')"
# The object is a real S3 object of the tenant: awscli sees it.
export AWS_ACCESS_KEY_ID=$AKA AWS_SECRET_ACCESS_KEY=$SKA
check "awscli lists reports/q3.csv in the tenant's husk-mcp bucket" \
  grep -q 'reports/q3.csv' <<<"$(awsc s3 ls s3://husk-mcp/reports/ --recursive 2>&1)"
awsc s3 cp s3://husk-mcp/reports/q3.csv "$T_SCRATCH/aws.csv" >/dev/null 2>&1
expect_eq "awscli reads the same content" "$(cat "$T_SCRATCH/aws.csv" 2>/dev/null)" "$(printf 'line,defects\n1,3\n2,5\n')"
# The link's fetch above is in its access log.
KEY=$KA api GET "/v1/links/$LINK_ID/access"
expect_eq "the link's access log records the fetch (status 200, curl's user agent)" \
  "$(jf 'len(j["accesses"]) >= 1 and j["accesses"][0]["status"] == 200 and j["accesses"][0]["user_agent"].startswith("curl")')" true

tool "$KA" store_file "{\"sandbox_id\":\"$SID\",\"path\":\"/workspace/deck\",\"key\":\"decks/deck.tar\"}"
expect_eq "store_file (directory): stored as a tar" "$(rq 'sc["tar"] and sc["content_type"] == "application/x-tar" and links[0]["mimeType"] == "application/x-tar"')" true
fetch "$(rq 'sc["url"]')" >/dev/null
check "store_file (directory): the link gives a tar with the directory's files" \
  python3 -c 'import tarfile, sys; n = tarfile.open(sys.argv[1]).getnames(); assert any(x.endswith("a.txt") for x in n) and any(x.endswith("img/b.bin") for x in n), n' "$T_SCRATCH/got"
tool "$KA" store_file "{\"sandbox_id\":\"$SID\",\"path\":\"report.csv\"}"
expect_eq "store_file without a key: a unique key ending with the file name" \
  "$(rq 'sc["key"].startswith("files/") and sc["key"].endswith("/report.csv") and sc["bucket"] == "husk-mcp"')" true

# ---- store_file from inline content ---------------------------------------------------------
tool "$KA" store_file '{"content":"héllo, wörld\n","key":"notes/hello.txt","filename":"greeting.txt","expires_in_seconds":120}'
expect_eq "store_file (text): the link downloads the UTF-8 bytes" \
  "$(fetch "$(rq 'sc["url"]')")$(cat "$T_SCRATCH/got")" "200héllo, wörld"
expect_eq "store_file (text): the link expires in 120 s" \
  "$(rq '__import__("urllib.parse").parse.parse_qs(__import__("urllib.parse").parse.urlsplit(sc["url"]).query)["X-Amz-Expires"][0]')" 120
B64=$(head -c 3000 /dev/urandom | tee "$T_SCRATCH/bin" | base64 -w0)
tool "$KA" store_file "{\"content\":\"$B64\",\"encoding\":\"base64\",\"bucket\":\"mcp-bin\",\"key\":\"x/blob.bin\"}"
fetch "$(rq 'sc["url"]')" >/dev/null
expect_eq "store_file (base64, new bucket created on demand): the exact bytes" "$(sha "$T_SCRATCH/got")" "$(sha "$T_SCRATCH/bin")"
s3req GET /mcp-bin/x/blob.bin
expect_eq "store_file (base64): the S3 API serves the object" "$CODE $(sha "$T_SCRATCH/s3body")" "200 $(sha "$T_SCRATCH/bin")"

# ---- get_link ---------------------------------------------------------------------------------------
tool "$KA" get_link '{"key":"reports/q3.csv","filename":"defects.csv"}'
expect_eq "get_link: a fresh link with size and a resource_link" \
  "$(rq 'sc["size"] == 21 and links[0]["uri"] == sc["url"] and sc["link_id"] != "'"$LINK_ID"'"')" true
curl -sS -D "$T_SCRATCH/h" -o "$T_SCRATCH/got" "$(rq 'sc["url"]')"
check "get_link: the download is named as asked (Content-Disposition)" grep -qi 'content-disposition:.*defects.csv' "$T_SCRATCH/h"
expect_eq "get_link: ... and holds the object" "$(cat "$T_SCRATCH/got")" "$(printf 'line,defects\n1,3\n2,5\n')"
# Inline or attachment: one rule for store_file's link and get_link's --
# by content type (pages, text, images, PDF open in the browser; the rest
# downloads), or as asked with `disposition`.
dispo() { # URL: the Content-Disposition's type ("inline", "attachment"), or "none"
  curl -sS -D "$T_SCRATCH/h" -o /dev/null --max-time 30 "$1"
  local d
  d=$(grep -i '^content-disposition:' "$T_SCRATCH/h" | head -n1 | sed 's/^[^:]*: *//; s/;.*//' | tr -d '\r')
  echo "${d:-none}"
}
tool "$KA" store_file '{"content":"<h1>dashboard</h1>","key":"site/dash.html"}'
expect_eq "store_file: an HTML page's link opens in the browser (inline)" "$(dispo "$(rq 'sc["url"]')")" inline
tool "$KA" get_link '{"key":"site/dash.html"}'
expect_eq "get_link: a fresh link to the same page opens the same way (inline)" "$(dispo "$(rq 'sc["url"]')")" inline
tool "$KA" get_link '{"key":"site/dash.html","disposition":"attachment"}'
expect_eq "get_link: disposition attachment makes it a download" "$(dispo "$(rq 'sc["url"]')")" attachment
tool "$KA" store_file '{"content":"PK","key":"site/bundle.zip"}'
expect_eq "store_file: an archive's link downloads (attachment)" "$(dispo "$(rq 'sc["url"]')")" attachment
tool "$KA" get_link '{"key":"site/bundle.zip"}'
expect_eq "get_link: ... and so does a fresh link to it" "$(dispo "$(rq 'sc["url"]')")" attachment
tool "$KA" store_file '{"content":"PK","key":"site/bundle2.zip","disposition":"inline"}'
expect_eq "store_file: disposition inline is honoured" "$(dispo "$(rq 'sc["url"]')")" inline
tool "$KA" get_link '{"key":"site/dash.html","disposition":"sideways"}'
expect_err "get_link: a disposition that is neither inline nor attachment is refused" "disposition"

# ---- list_objects: prefix and paging ------------------------------------------------------------------
for i in 1 2 3 4 5; do
  tool "$KA" store_file "{\"content\":\"page $i\",\"key\":\"pg/item-$i.txt\"}"
done
tool "$KA" list_objects '{"prefix":"pg/","max_items":2}'
expect_eq "list_objects: page 1 (prefix, max_items 2)" "$(rq '",".join(x["key"] for x in sc["objects"]) + " " + str(sc["truncated"])')" "pg/item-1.txt,pg/item-2.txt True"
C=$(rq 'sc["next_cursor"]')
tool "$KA" list_objects "{\"prefix\":\"pg/\",\"max_items\":2,\"cursor\":\"$C\"}"
expect_eq "list_objects: page 2 from the cursor" "$(rq '",".join(x["key"] for x in sc["objects"]) + " " + str(sc["truncated"])')" "pg/item-3.txt,pg/item-4.txt True"
C=$(rq 'sc["next_cursor"]')
tool "$KA" list_objects "{\"prefix\":\"pg/\",\"max_items\":2,\"cursor\":\"$C\"}"
expect_eq "list_objects: the last page, not truncated, no cursor" "$(rq '",".join(x["key"] for x in sc["objects"]) + " " + str(sc["truncated"]) + " " + str("next_cursor" in sc)')" "pg/item-5.txt False False"
expect_eq "list_objects: sizes and dates" "$(rq 'sc["objects"][0]["size"] == 6 and sc["objects"][0]["last_modified"].endswith("Z")')" true
tool "$KA" list_objects '{}'
expect_eq "list_objects: the default bucket holds run_code's and store_file's objects" \
  "$(rq 'sum(1 for x in sc["objects"] if x["key"].startswith("outputs/")) >= 1 and any(x["key"] == "reports/q3.csv" for x in sc["objects"])')" true
tool "$KA" list_objects '{"cursor":"%%%not base64"}'
expect_err "list_objects: a bad cursor is an isError" "cursor"
tool "$KB" list_objects '{}'
expect_eq "list_objects: another tenant's default bucket is its own (empty, no error)" "$(rq 'err is False and sc["objects"] == []')" true

# ---- load_file ----------------------------------------------------------------------------------------------
tool "$KA" load_file "{\"sandbox_id\":\"$SID\",\"key\":\"notes/hello.txt\",\"path\":\"in/hello.txt\"}"
expect_eq "load_file: copied into the sandbox" "$(rq 'sc["size"]')" "$(printf 'héllo, wörld\n' | wc -c)"
tool "$KA" sandbox_read_file "{\"sandbox_id\":\"$SID\",\"path\":\"in/hello.txt\"}"
expect_eq "load_file: read back from the sandbox" "$(rq 'sc["content"]')" "héllo, wörld"
tool "$KA" load_file "{\"sandbox_id\":\"$SID\",\"key\":\"decks/deck.tar\",\"path\":\"unpacked\",\"extract\":true}"
expect_eq "load_file (extract): the tar unpacked" "$(rq 'sc["extracted"]')" true
tool "$KA" sandbox_exec "{\"sandbox_id\":\"$SID\",\"command\":\"cat unpacked/a.txt unpacked/deck/a.txt 2>/dev/null; cmp deck/img/b.bin unpacked/img/b.bin 2>/dev/null || cmp deck/img/b.bin unpacked/deck/img/b.bin && echo same\"}"
expect_eq "load_file (extract): the files are the stored ones" "$(rq 'sc["stdout"].split()')" "['slide1', 'same']"

# ---- bad input ----------------------------------------------------------------------------------------------------
tool "$KA" get_link '{"bucket":"no-such-bucket","key":"x"}'
expect_err "get_link: unknown bucket" "bucket \`no-such-bucket\` not found"
tool "$KA" get_link '{"key":"nope/none.txt"}'
expect_err "get_link: unknown key" "object \`nope/none.txt\` not found"
tool "$KA" load_file "{\"sandbox_id\":\"$SID\",\"key\":\"nope/none.txt\",\"path\":\"x\"}"
expect_err "load_file: unknown key" "not found in bucket"
# Another tenant's bucket looks exactly like one that does not exist.
tool "$KB" get_link '{"bucket":"mcp-bin","key":"x/blob.bin"}'
T1=$(rq 'txt')
tool "$KB" get_link '{"bucket":"mcp-bim","key":"x/blob.bin"}'
expect_eq "another tenant's bucket: the same answer as a bucket that does not exist" "$T1" "$(rq 'txt.replace("mcp-bim", "mcp-bin")')"
expect_err "another tenant's bucket: not found" "not found"
tool "$KB" list_objects '{"bucket":"mcp-bin"}'
expect_err "another tenant's bucket: list_objects says not found, lists nothing" "bucket \`mcp-bin\` not found"
tool "$KB" get_link '{"key":"reports/q3.csv"}'
expect_err "another tenant's key in its own default bucket: not found" "not found"
tool "$KB" load_file "{\"sandbox_id\":\"$SID\",\"key\":\"reports/q3.csv\",\"path\":\"x\"}"
expect_err "another tenant's sandbox: not found" "not found"
tool "$KA" store_file '{"content":"x","key":""}'
expect_err "store_file: an empty key" "key is not valid"
tool "$KA" store_file "{\"content\":\"x\",\"key\":\"$(head -c 1100 /dev/zero | tr '\0' k)\"}"
expect_err "store_file: a key over 1024 bytes" "too long"
tool "$KA" store_file '{"content":"x","bucket":"Bad_Bucket"}'
expect_err "store_file: a bad bucket name" "is not valid"
tool "$KA" get_link '{"key":"reports/q3.csv","expires_in_seconds":604801}'
expect_err "get_link: an expiry over 7 days" "between"
head -c 3300000 /dev/zero | tr '\0' a >"$T_SCRATCH/big"
python3 -c 'import json,sys; print(json.dumps({"content": open(sys.argv[1]).read(), "key": "big.txt"}))' "$T_SCRATCH/big" >"$T_SCRATCH/bigargs"
tool "$KA" store_file "@$T_SCRATCH/bigargs"
expect_err "store_file: oversize inline content (3,300,000 bytes of text, over 3 MiB)" "more than a call may carry"
tool "$KA" store_file '{"content":"x","content_type":"text/plain\r\nX-Evil: 1"}'
expect_err "store_file: a content_type with CR/LF is refused" "must be a MIME type"
tool "$KA" store_file "{\"sandbox_id\":\"$SID\",\"path\":\"report.csv\",\"content_type\":\"text/html\"}"
expect_err "store_file: content_type with a sandbox file says where the type comes from" "key's extension"
tool "$KA" store_file '{"content":"<b>x</b>","key":"t/page","content_type":"text/html; charset=utf-8"}'
curl -sS -D "$T_SCRATCH/h" -o /dev/null "$(rq 'sc["url"]')"
check "store_file: the given content_type is served back" grep -qi '^content-type: text/html; charset=utf-8' "$T_SCRATCH/h"
tool "$KA" store_file '{"content":"!!not base64!!","encoding":"base64"}'
expect_err "store_file: content that is not base64" "base64"
tool "$KA" store_file "{\"content\":\"x\",\"sandbox_id\":\"$SID\",\"path\":\"report.csv\"}"
expect_err "store_file: two sources" "not both"
tool "$KA" store_file '{"key":"k"}'
expect_err "store_file: no source" "sandbox_id"
tool "$KA" store_file "{\"sandbox_id\":\"$SID\",\"path\":\"no/such/file\"}"
expect_err "store_file: a missing box file" "does not exist in the sandbox"
tool "$KA" list_objects '{"prefix":"reports/"}'
n_before=$(rq 'len(sc["objects"])')
tool "$KA" sandbox_destroy "{\"sandbox_id\":\"$SID\"}"
tool "$KA" store_file "{\"sandbox_id\":\"$SID\",\"path\":\"report.csv\",\"key\":\"reports/late.csv\"}"
expect_err "store_file: a destroyed sandbox" "sandbox \`$SID\`"
tool "$KA" load_file "{\"sandbox_id\":\"$SID\",\"key\":\"reports/q3.csv\",\"path\":\"x\"}"
expect_err "load_file: a destroyed sandbox" "sandbox \`$SID\`"
tool "$KA" list_objects '{"prefix":"reports/"}'
expect_eq "failed calls stored nothing" "$(rq 'len(sc["objects"])')" "$n_before"

# ---- audit ---------------------------------------------------------------------------------------------------------
KEY=$KA
api GET "/v1/audit?action=mcp.store_file&limit=100"
check "every store_file call is audited with tenant, API key, bucket and object key" python3 -c '
import json, sys
recs = json.loads(sys.argv[1])["records"]
assert len(recs) >= 15, len(recs)
assert all(r["tenant_id"] == sys.argv[2] and r["key_id"].startswith("k_") for r in recs), recs
assert any(r["detail"] == "bucket=husk-mcp key=reports/q3.csv" and r["outcome"] == "ok" for r in recs), recs
assert any(r["outcome"] == "error" for r in recs), recs
' "$BODY" "$TA"
KEY=$KA
for t in get_link list_objects load_file; do
  api GET "/v1/audit?action=mcp.$t&limit=100"
  expect_eq "mcp.$t calls are audited with the caller's key and (once the arguments are valid) the bucket" "$(jf 'len(j["records"]) > 0 and all(r["key_id"].startswith("k_") and (r["detail"].startswith("bucket=") or r["outcome"] == "error") for r in j["records"]) and any(r["outcome"] == "ok" for r in j["records"])')" true
done
api GET "/v1/audit?action=mcp.load_file&limit=100"
expect_eq "mcp.load_file names the sandbox" "$(jf 'all(r["box_id"] for r in j["records"])')" true

tool "$KA" store_file '{"content":"dir-like","key":"folder/"}'
tool "$KA" get_link '{"key":"folder/"}'
expect_eq "get_link: a key ending in / links without a download name" "$(rq 'err is False and "content-disposition" not in sc["url"]')" true

# husk mcp --server: stdio in front of this daemon offers its storage tools.
OUT=$(printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"tools/list"}' \
  '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"store_file","arguments":{"content":"via stdio\n","key":"stdio/v.txt"}}}' |
  HUSK_MCP_KEY=$KA python3 "$MCPDIR/stdio_run.py" "$HUSK" mcp --server "$URL" --quiet)
expect_eq "husk mcp --server lists the storage tools of husk serve" \
  "$(python3 -c 'import json,sys; m={x["id"]:x for x in json.loads(sys.argv[1])["msgs"]}; print(len(m[1]["result"]["tools"]), m[1]["result"]["tools"][18]["name"])' "$OUT")" "24 store_file"
expect_eq "husk mcp --server: store_file through it gives a working link" \
  "$(fetch "$(python3 -c 'import json,sys; m={x["id"]:x for x in json.loads(sys.argv[1])["msgs"]}; print(m[2]["result"]["structuredContent"]["url"])' "$OUT")")$(cat "$T_SCRATCH/got")" "200via stdio"

# ---- an external store: husk B keeps its objects on husk A's store -------------------------------------
awsc s3 mb s3://ext >/dev/null 2>&1
BLOG=$T_SCRATCH/b.log
HUSK_ADMIN_KEY=$ADMIN HUSK_STORE_ACCESS_KEY_ID=$AKA HUSK_STORE_SECRET_ACCESS_KEY=$SKA \
  "$HUSK" serve --listen 127.0.0.1:0 --data "$T_SCRATCH/datab" --s3-listen off \
  --store-endpoint "$S3" --store-bucket ext 2>"$BLOG" </dev/null &
BPID=$!
on_exit 'kill -9 $BPID 2>/dev/null; serve_cleanup'
if wait_for 30 grep -q '^husk: links and box transfers use the external store' "$BLOG"; then
  AURL=$URL
  URL="http://127.0.0.1:$(sed -n 's|^husk: listening on http://127.0.0.1:\([0-9]*\)$|\1|p' "$BLOG")"
  new_tenant mcp-ext && KX=$TKEY
  tool "$KX" store_file '{"content":"on the external store\n","key":"e/x.txt"}'
  expect_eq "external store: store_file links to the external store" \
    "$(rq 'sc["url"].startswith("'"$S3"'/ext/")')$(fetch "$(rq 'sc["url"]')")$(cat "$T_SCRATCH/got")" "true200on the external store"
  tool "$KX" get_link '{"key":"e/x.txt"}'
  expect_eq "external store: get_link" "$(fetch "$(rq 'sc["url"]')")$(cat "$T_SCRATCH/got")" "200on the external store"
  tool "$KX" get_link '{"key":"e/none.txt"}'
  expect_err "external store: an unknown key" "not found"
  tool "$KX" run_code '{"language":"python","code":"import os\nos.makedirs(\"output\", exist_ok=True)\nopen(\"output/z.bin\", \"wb\").write(bytes(range(256)) * 400)"}'
  fetch "$(rq 'links[0]["uri"]')" >/dev/null
  expect_eq "external store: run_code's file is linked there, byte-exact" "$(sha "$T_SCRATCH/got")" \
    "$(python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(256)) * 400)' | sha256sum | cut -d' ' -f1)"
  tool "$KX" sandbox_create '{}'
  XB=$(rq 'sc["sandbox_id"]')
  tool "$KX" load_file "{\"sandbox_id\":\"$XB\",\"key\":\"e/x.txt\",\"path\":\"x.txt\"}"
  tool "$KX" sandbox_read_file "{\"sandbox_id\":\"$XB\",\"path\":\"x.txt\"}"
  expect_eq "external store: load_file" "$(rq 'sc["content"]')" "on the external store"
  tool "$KX" list_objects '{}'
  expect_err "external store: list_objects says it is not available" "external store"
  tool "$KX" sandbox_destroy "{\"sandbox_id\":\"$XB\"}"
  URL=$AURL
else
  not_ok "husk B starts on the external store"
  sed 's/^/#   /' "$BLOG" | tail -5
fi
kill -TERM "$BPID" 2>/dev/null
wait "$BPID" 2>/dev/null
expect_eq "husk B stops cleanly" "$?" 0

expect_eq "no box left running" "$(KEY=$KA; api GET '/v1/sandboxes?state=running&limit=1000'; jf 'len(j["sandboxes"])')" 0
serve_stop
expect_eq "the daemon stops cleanly" "$SERVE_RC" 0

# ---- a daemon that cannot make links -----------------------------------------------------------------------------
if serve_start --s3-listen off; then
  new_tenant mcp-nolinks && K=$TKEY
  tool "$K" store_file '{"content":"x"}'
  expect_err "no S3 listener: store_file says links need an address" "--public-url"
  tool "$K" get_link '{"key":"x"}'
  expect_err "no S3 listener: get_link says so too" "--s3-listen"
  tool "$K" run_code '{"language":"python","code":"import os\nos.makedirs(\"output\", exist_ok=True)\nopen(\"output/big.bin\", \"wb\").write(bytes(200000))"}'
  expect_eq "no S3 listener: run_code names its large file, with a note" \
    "$(rq 'sc["files"][0]["returned_as"] == "none" and not links and "no link could be made" in " ".join(sc["notes"])')" true
  serve_stop
else
  not_ok "the daemon starts without an S3 listener"
fi

# ---- standalone husk mcp: no storage plane ---------------------------------------------------------------------------
OUT=$(printf '%s\n' '{"jsonrpc":"2.0","id":1,"method":"tools/list"}' \
  '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"store_file","arguments":{"content":"x"}}}' |
  python3 "$MCPDIR/stdio_run.py" "$HUSK" mcp --data "$T_SCRATCH/sd" --quiet)
expect_eq "standalone husk mcp: no storage tools listed" \
  "$(python3 -c 'import json,sys; m={x["id"]:x for x in json.loads(sys.argv[1])["msgs"]}; print([t["name"] for t in m[1]["result"]["tools"] if t["name"] in ("store_file","get_link","list_objects","load_file")])' "$OUT")" "[]"
expect_eq "standalone husk mcp: store_file is an unknown tool (-32602)" \
  "$(python3 -c 'import json,sys; m={x["id"]:x for x in json.loads(sys.argv[1])["msgs"]}; print(m[2]["error"]["code"], m[2]["error"]["message"])' "$OUT")" "-32602 Unknown tool: store_file"
serve_finish
