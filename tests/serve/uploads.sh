#!/bin/bash
# Upload links (docs/api.md "Upload links", docs/mcp.md create_upload_link):
# made over the API and over MCP, used by `curl -F` (one file, several,
# then load_file into a box, byte for byte), and everything refused: a
# replayed one-time link, an expired, revoked or unknown one, a file too
# large (nothing stored), a type not allowed (declared or by its name),
# malformed multipart, the tenant's quota.  Hostile file names are stored
# under a safe name inside the link's prefix; another tenant can neither
# list nor revoke a link; each upload is audited; the page has its
# security headers; the token never reaches a listing, the audit log or
# the daemon's log.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"
MCPDIR=$(cd "$(dirname "$0")/../mcp" && pwd)
. "$MCPDIR/mcp.bash"

# A 3 MiB quota per tenant: the quota check below passes it on purpose.
if ! serve_start --s3-listen off --storage-quota 3M; then
  not_ok "the daemon starts"
  serve_finish
  exit 1
fi
new_tenant up-a || not_ok "tenant A"
KA=$TKEY
TA=$TID
new_tenant up-b || not_ok "tenant B"
KB=$TKEY
KEY=$KA
touch "$T_SCRATCH/tokens"

sha() { sha256sum "$1" | cut -d' ' -f1; }
# post URL [CURL ARGS...]: a POST to an upload URL (no API key); CODE, BODY.
post() {
  local u=$1; shift
  CODE=$(curl -sS -o "$T_SCRATCH/body" -w '%{http_code}' --max-time 60 "$@" "$u" 2>"$T_SCRATCH/curl.err")
  BODY=$(tr -d '\0' <"$T_SCRATCH/body" 2>/dev/null)
}
# mklink JSON: a link over the API; sets LURL, LID, LPREFIX, TOKEN.
mklink() {
  api POST /v1/upload-links -d "${1:-{\}}"
  LURL=$(jf 'j["url"]')
  LID=$(jf 'j["id"]')
  LPREFIX=$(jf 'j["prefix"]')
  TOKEN=${LURL##*/u/}
  [ -n "$TOKEN" ] && echo "$TOKEN" >>"$T_SCRATCH/tokens"
}
# keys PREFIX: the keys of tenant A's default bucket under PREFIX, one line.
keys() {
  tool "$KA" list_objects "{\"prefix\":\"$1\"}"
  rq '" ".join(o["key"] for o in sc["objects"])'
}

head -c 200000 /dev/urandom >"$T_SCRATCH/data.bin"
printf 'hello upload\n' >"$T_SCRATCH/note.txt"
head -c 1500 /dev/urandom >"$T_SCRATCH/small.bin"

# ---- create over the API --------------------------------------------------------
mklink
expect_code "create a link with no options: 201" 201
check "its id is ul_..." grep -qE '^ul_[0-9a-f]{32}$' <<<"$LID"
check "its url is <this listener>/u/hu_ and 32 hex digits" grep -qE "^$URL/u/hu_[0-9a-f]{32}\$" <<<"$LURL"
expect_eq "defaults: husk-mcp, one file, 100 MiB capped at the 3 MiB quota, any type, active" \
  "$(jf '[j["bucket"], j["max_files"], j["max_file_bytes"], j["content_types"], j["state"]]')" \
  '["husk-mcp", 1, 3145728, "", "active"]'
check "the default prefix is uploads/<16 hex>/" grep -qE '^uploads/[0-9a-f]{16}/$' <<<"$LPREFIX"
expect_eq "the default lifetime is one hour" "$(jf 'round((__import__("datetime").datetime.fromisoformat(j["expires_at"].replace("Z","+00:00")) - __import__("datetime").datetime.fromisoformat(j["created_at"].replace("Z","+00:00"))).total_seconds())')" 3600
ONE_URL=$LURL ONE_ID=$LID ONE_PREFIX=$LPREFIX

for bad in '{"expires_in":0}' '{"expires_in":604801}' '{"max_files":101}' '{"max_files":0}' \
  '{"content_types":"image"}' '{"content_types":"text/<b>"}' '{"prefix":"/abs/"}' \
  '{"prefix":"a/../b/"}' '{"bucket":"Not_A_Bucket"}' '{"surprise":1}' '{"max_file_bytes":"6G"}'; do
  api POST /v1/upload-links -d "$bad"
  expect_code "create with $bad: 400" 400
done
api POST /v1/upload-links -d '{"bucket":"no-such-bucket"}'
expect_code "create for a bucket the tenant lacks: 404" 404

# ---- the page ----------------------------------------------------------------------
curl -sS -D "$T_SCRATCH/hdr" -o "$T_SCRATCH/page" --max-time 10 "$ONE_URL"
hdr() { tr -d '\r' <"$T_SCRATCH/hdr" | grep -i "^$1:" | head -n1 | cut -d' ' -f2-; }
check "GET the page: 200" grep -q '^HTTP/1.1 200' "$T_SCRATCH/hdr"
expect_eq "page: Content-Type text/html" "$(hdr Content-Type)" "text/html; charset=utf-8"
CSP=$(hdr Content-Security-Policy)
check "page: CSP default-src 'none'" grep -q "^default-src 'none';" <<<"$CSP"
check "page: CSP frame-ancestors 'none', form-action 'self', connect-src 'self'" \
  grep -q "frame-ancestors 'none'" <<<"$CSP"
check "page: CSP allows form posts and XHR to itself only" grep -q "form-action 'self'; base-uri 'none'" <<<"$CSP"
NONCE=$(sed -n "s/.*script-src 'nonce-\([0-9a-f]*\)'.*/\1/p" <<<"$CSP")
check "page: its only script carries the CSP's nonce" grep -q "<script nonce=\"$NONCE\">" "$T_SCRATCH/page"
expect_eq "page: one script element" "$(grep -o '<script' "$T_SCRATCH/page" | wc -l)" 1
expect_eq "page: X-Content-Type-Options nosniff" "$(hdr X-Content-Type-Options)" nosniff
expect_eq "page: Referrer-Policy no-referrer" "$(hdr Referrer-Policy)" no-referrer
expect_eq "page: Cache-Control no-store" "$(hdr Cache-Control)" no-store
expect_eq "page: X-Frame-Options DENY" "$(hdr X-Frame-Options)" DENY
check "page: a multipart form posting to itself, a file input" \
  grep -q '<form id="f" class="box" method="post" enctype="multipart/form-data"><p><input type="file" name="file" required>' "$T_SCRATCH/page"
check "page: no token in it" not grep -q "$(tail -n1 "$T_SCRATCH/tokens")" "$T_SCRATCH/page"
curl -sS -D "$T_SCRATCH/hdr2" -o /dev/null --max-time 10 "$ONE_URL"
check "page: a fresh nonce each time" not grep -q "$NONCE" "$T_SCRATCH/hdr2"

# ---- curl -F, then load_file --------------------------------------------------------------
post "$ONE_URL" -F "file=@$T_SCRATCH/data.bin"
expect_code "curl -F file=@data.bin: 201" 201
expect_eq "the reply lists the stored key and size" "$(jf '[f["key"], f["size"]] if (f := j["files"][0]) else None')" \
  "[\"${ONE_PREFIX}data.bin\", 200000]"
KEY_DATA=$(jf 'j["files"][0]["key"]')
post "$ONE_URL" -F "file=@$T_SCRATCH/note.txt"
expect_code "the one-time link again (a replay): 410" 410
check "... saying it was used, not whose it is" grep -q 'already been used' <<<"$BODY"
check "... and naming no tenant" not grep -q "$TA" <<<"$BODY"
expect_eq "the replay stored nothing" "$(keys "$ONE_PREFIX")" "${ONE_PREFIX}data.bin"
curl -sS -o /dev/null -w '%{http_code}' --max-time 10 "$ONE_URL" >"$T_SCRATCH/c"
expect_eq "the used link's page: 410" "$(cat "$T_SCRATCH/c")" 410

new_box || not_ok "a box (got $CODE: $BODY)"
B=$BOX
tool "$KA" load_file "{\"sandbox_id\":\"$B\",\"key\":\"$KEY_DATA\",\"path\":\"in/data.bin\"}"
expect_eq "load_file the uploaded key into a box" "$(rq 'sc.get("size")')" 200000
api GET "/v1/sandboxes/$B/files?path=/workspace/in/data.bin"
cp "$T_SCRATCH/body" "$T_SCRATCH/back.bin"
expect_eq "the box holds exactly the bytes uploaded" "$(sha "$T_SCRATCH/back.bin")" "$(sha "$T_SCRATCH/data.bin")"

api GET /v1/upload-links
expect_code "list: 200" 200
expect_eq "list: the used link shows files_used 1, bytes_used 200000, state used" \
  "$(jf "[[l['files_used'], l['bytes_used'], l['state']] for l in j['upload_links'] if l['id'] == '$ONE_ID'][0]")" \
  '[1, 200000, "used"]'
check "list: no url, no token" not grep -qE '"url"|hu_[0-9a-f]{32}' <<<"$BODY"

# ---- MCP: create_upload_link, several files, types ------------------------------------------
tool "$KA" create_upload_link '{"max_files":3,"content_types":"text/plain, image/*","prefix":"inbox/docs"}'
expect_eq "MCP create_upload_link: no error" "$(rq 'err')" false
expect_eq "MCP: url, bucket, prefix (a slash added), max_files, types" \
  "$(rq '[sc["url"].startswith("'"$URL"'/u/hu_"), sc["bucket"], sc["prefix"], sc["max_files"], sc["content_types"]]')" \
  "[True, 'husk-mcp', 'inbox/docs/', 3, 'text/plain,image/*']"
check "MCP: the text tells the model to give the URL, then list_objects and load_file" \
  test "$(rq 'any(sc["url"] in b.get("text","") and "list_objects" in b.get("text","") and "load_file" in b.get("text","") for b in res["content"])')" = true
MURL=$(rq 'sc["url"]')
echo "${MURL##*/u/}" >>"$T_SCRATCH/tokens"
printf '\x89PNG\r\n\x1a\n' >"$T_SCRATCH/pic.png"
cp "$T_SCRATCH/note.txt" "$T_SCRATCH/two.txt"
post "$MURL" -F "file=@$T_SCRATCH/note.txt" -F "file=@$T_SCRATCH/pic.png"
expect_code "two files in one form: 201" 201
expect_eq "both stored under the prefix" "$(jf '[f["key"] for f in j["files"]]')" '["inbox/docs/note.txt", "inbox/docs/pic.png"]'
post "$MURL" -F "file=@$T_SCRATCH/small.bin"
expect_code "a .bin on a text/image link: 415" 415
post "$MURL" -F "file=@$T_SCRATCH/two.txt;type=application/x-msdownload"
expect_code "a .txt declared as application/x-msdownload: 415" 415
post "$MURL" -F "file=@$T_SCRATCH/note.txt;type=text/plain"
expect_code "the refused files took no slot: a third file still goes in (201)" 201
expect_eq "... a name already there gets a suffix" "$(jf 'j["files"][0]["key"]')" "inbox/docs/note-1.txt"
post "$MURL" -F "file=@$T_SCRATCH/note.txt"
expect_code "a fourth file on a three-file link: 410" 410
expect_eq "what the link took is there, nothing else" "$(keys inbox/docs/)" \
  "inbox/docs/note-1.txt inbox/docs/note.txt inbox/docs/pic.png"

# ---- too large, quota --------------------------------------------------------------------
mklink '{"max_file_bytes":1000,"max_files":2}'
post "$LURL" -F "file=@$T_SCRATCH/small.bin"
expect_code "a 1500-byte file on a 1000-byte link: 413" 413
expect_eq "nothing of it is stored" "$(keys "$LPREFIX")" ""
check "no temporary file is left behind" dir_empty "$DATA/storage/tmp"
post "$LURL" -F "file=@$T_SCRATCH/note.txt"
expect_code "the oversize attempt took no slot: a small file goes in (201)" 201
# A client that goes away mid-file: nothing of it is left, the slot is back.
mklink '{}'
head -c 2500000 /dev/urandom >"$T_SCRATCH/slow.bin"
curl -s -o /dev/null --limit-rate 400k --max-time 1 -F "file=@$T_SCRATCH/slow.bin" "$LURL"
no_tmp() { dir_empty "$DATA/storage/tmp"; }
check "a client cut off mid-file leaves no temporary file" wait_for 10 no_tmp
expect_eq "... and nothing under the prefix" "$(keys "$LPREFIX")" ""
post "$LURL" -F "file=@$T_SCRATCH/note.txt"
expect_code "... and the one-time link still takes its file (201)" 201
head -c 1800000 /dev/urandom >"$T_SCRATCH/big.bin"
mklink '{"max_files":3}'
post "$LURL" -F "file=@$T_SCRATCH/big.bin"
expect_code "1.8 MB within the 3 MiB quota: 201" 201
post "$LURL" -F "file=@$T_SCRATCH/big.bin"
expect_code "a second 1.8 MB passes the quota: 403" 403
check "... quota_exceeded" grep -q quota_exceeded <<<"$BODY"
expect_eq "only the first is stored" "$(keys "$LPREFIX")" "${LPREFIX}big.bin"

# ---- expired, revoked, unknown, another tenant -------------------------------------------------
mklink '{"expires_in":1}'
EXP_URL=$LURL
sleep 2
post "$EXP_URL" -F "file=@$T_SCRATCH/note.txt"
expect_code "an expired link: 410" 410
check "... saying it expired" grep -q 'expired' <<<"$BODY"
post "$EXP_URL" -H 'Accept: text/html' -F "file=@$T_SCRATCH/note.txt"
check "... a browser gets an HTML page" grep -q '<p id="status">This upload link has expired.</p>' <<<"$BODY"

mklink '{"max_files":5}'
REV_URL=$LURL REV_ID=$LID
KEY=$KB
api GET /v1/upload-links
expect_eq "tenant B lists none of A's links" "$(jf 'len(j["upload_links"])')" 0
api DELETE "/v1/upload-links/$REV_ID"
expect_code "tenant B cannot revoke A's link: 404" 404
KEY=$KA
post "$REV_URL" -F "file=@$T_SCRATCH/note.txt"
expect_code "A's link still works after B tried: 201" 201
api DELETE "/v1/upload-links/$REV_ID"
expect_code "A revokes it: 204" 204
post "$REV_URL" -F "file=@$T_SCRATCH/note.txt"
expect_code "a revoked link: 410" 410
api DELETE "/v1/upload-links/ul_00000000000000000000000000000000"
expect_code "revoke an unknown id: 404" 404

post "$URL/u/hu_00000000000000000000000000000000" -F "file=@$T_SCRATCH/note.txt"
expect_code "an unknown token: 404" 404
post "$URL/u/nonsense" -F "file=@$T_SCRATCH/note.txt"
expect_code "a token of the wrong shape: 404" 404
curl -sS -o /dev/null -w '%{http_code}' --max-time 10 "$URL/u/hu_00000000000000000000000000000000" >"$T_SCRATCH/c"
expect_eq "an unknown token's page: 404" "$(cat "$T_SCRATCH/c")" 404

# ---- malformed requests ---------------------------------------------------------------------
mklink '{"max_files":20}'
MAL_URL=$LURL MAL_PREFIX=$LPREFIX
post "$MAL_URL" -H 'Content-Type: application/json' -d '{"a":1}'
expect_code "a JSON body: 415" 415
post "$MAL_URL" -H 'Content-Type: multipart/form-data' --data-binary 'no boundary'
expect_code "multipart without a boundary: 400" 400
post "$MAL_URL" -F "comment=just text"
expect_code "a form with no file: 400" 400
printf -- '--XX\r\nContent-Disposition: form-data; name="file"; filename="cut.txt"\r\nContent-Type: text/plain\r\n\r\nhalf a file' >"$T_SCRATCH/cut"
post "$MAL_URL" -H 'Content-Type: multipart/form-data; boundary=XX' --data-binary "@$T_SCRATCH/cut"
expect_code "a body cut before its closing boundary: 400" 400
expect_eq "the malformed requests stored nothing" "$(keys "$MAL_PREFIX")" ""
check "the daemon still answers" healthy

# ---- hostile names ---------------------------------------------------------------------------
# name_post NAME: a one-file multipart body whose filename is NAME (bytes
# as Python escapes), to the link; the stored key to STORED.
name_post() {
  python3 -c '
import sys
name = sys.argv[1].encode().decode("unicode_escape").encode("latin-1")
sys.stdout.buffer.write(b"--B0\r\nContent-Disposition: form-data; name=\"file\"; filename=\"" + name +
  b"\"\r\nContent-Type: text/plain\r\n\r\nx\r\n--B0--\r\n")' "$1" >"$T_SCRATCH/mp"
  post "$MAL_URL" -H 'Content-Type: multipart/form-data; boundary=B0' --data-binary "@$T_SCRATCH/mp"
  STORED=$(jf 'j["files"][0]["key"]')
}
name_post '../../etc/passwd'
expect_eq "../../etc/passwd is stored as <prefix>passwd" "$STORED" "${MAL_PREFIX}passwd"
name_post 'a/b'
expect_eq "a/b is stored as <prefix>b" "$STORED" "${MAL_PREFIX}b"
name_post 'c:\\\\windows\\\\evil.txt'
expect_eq 'a Windows path keeps its last part' "$STORED" "${MAL_PREFIX}evil.txt"
name_post '..'
expect_eq ".. is stored as <prefix>file" "$STORED" "${MAL_PREFIX}file"
name_post 'tab\there\x01.txt'
expect_eq "control characters become _" "$STORED" "${MAL_PREFIX}tab_here_.txt"
name_post 'nul\x00.sh'
check "a NUL in the name: refused (400) or stored inside the prefix" \
  test "$CODE" = 400 -o "$(grep -cE "^${MAL_PREFIX}[^/]+\$" <<<"$STORED")" = 1
name_post "$(printf 'L%.0s' $(seq 600)).txt"
expect_eq "a 600-character name is cut to 200 bytes" "$(( ${#STORED} - ${#MAL_PREFIX} ))" 200
check "every stored key is directly under the link's prefix" \
  python3 -c 'import sys; ks = sys.argv[2].split(" "); assert len(ks) >= 6 and all(k.startswith(sys.argv[1]) and "/" not in k[len(sys.argv[1]):] for k in ks)' "$MAL_PREFIX" "$(keys "$MAL_PREFIX")"

name_post 'evil\xe2\x80\xaegnp.exe'
expect_eq "a right-to-left override in a name becomes _ (evil<RLO>gnp.exe must not read as evilexe.png)" "$STORED" "${MAL_PREFIX}evil_gnp.exe"

# The type is checked on the name the file is stored under: a name cut to
# 200 bytes must not turn an allowed .png into a .html.
mklink '{"content_types":"image/png","max_files":2}'
CUT=$(printf 'A%.0s' $(seq 195)).html.png
printf 'x' >"$T_SCRATCH/p.png"
post "$LURL" -F "file=@$T_SCRATCH/p.png;filename=$CUT;type=image/png"
expect_code "a name whose cut form is .html is refused by an image/png link (415)" 415

# Uploads of one name at once each get their own key: none replaces another.
mklink '{"max_files":12}'
PIDS=()
for i in $(seq 12); do
  printf 'copy %s\n' "$i" >"$T_SCRATCH/same$i"
  curl -sS -o /dev/null -w '%{http_code}\n' --max-time 60 -F "file=@$T_SCRATCH/same$i;filename=same.txt" "$LURL" \
    >"$T_SCRATCH/same$i.code" 2>/dev/null &
  PIDS+=($!)
done
wait "${PIDS[@]}" # (not a bare wait: the daemon is a child too)
expect_eq "12 uploads of same.txt at once: all 201" "$(cat "$T_SCRATCH"/same*.code | sort | uniq -c | tr -s ' ')" " 12 201"
NKEYS=$(keys "$LPREFIX" | wc -w)
tool "$KA" load_file "{\"sandbox_id\":\"$B\",\"prefix\":\"$LPREFIX\",\"path\":\"same\"}"
tool "$KA" sandbox_exec "{\"sandbox_id\":\"$B\",\"command\":\"cat same/* | sort -u | wc -l\"}"
expect_eq "... and 12 objects, each with its own content" "$NKEYS $(rq 'sc.get("stdout","").strip()')" "12 12"

# ---- audit and logs --------------------------------------------------------------------------------
api GET "/v1/audit?action=upload_link.upload"
expect_code "audit of uploads: 200" 200
check "an upload's record names the link, files and bytes" \
  grep -q "\"detail\":\"upload_link=$ONE_ID files=1 bytes=200000\"" <<<"$BODY"
check "refusals are recorded too" grep -q "upload_link=$REV_ID refused" <<<"$BODY"
api GET "/v1/audit?action=upload_link.create"
check "creation is audited" grep -q "upload_link=$ONE_ID bucket=husk-mcp" <<<"$BODY"
api GET "/v1/audit?action=mcp.create_upload_link"
check "the MCP tool's calls are audited" grep -q 'upload_link=ul_' <<<"$BODY"
api GET "/v1/audit?limit=1000"
leaked=0
while read -r t; do
  grep -qF "$t" <<<"$BODY" && leaked=1
  grep -qF "$t" "$SERVE_LOG" && leaked=1
done <"$T_SCRATCH/tokens"
expect_eq "no token in the audit log or the daemon's log" "$leaked" 0
check "the daemon logs upload requests as /u/*" grep -q 'POST /u/\* 201' "$SERVE_LOG"
KEY=$KB
api GET "/v1/audit?action=upload_link.upload"
expect_eq "tenant B's audit has none of A's uploads" "$(jf 'len(j["records"])')" 0
KEY=$KA

api DELETE "/v1/sandboxes/$B"
expect_code "the box is deleted" 200

# Without a key, the request timeout holds until the link checks out: a
# body trickled to an unknown upload URL is cut like any other request's;
# one sent to a good link takes as long as it needs (the link is the
# sender's proof, as a key is for PUT /v1/store).
mklink '{}'
serve_stop
trickle() {
  python3 - "$1" <<'PY'
import socket, sys, time, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
s = socket.create_connection((u.hostname, u.port))
s.settimeout(5)
s.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=BB\r\n"
           "Content-Length: 100000\r\n\r\n" % u.path).encode())
s.sendall(b'--BB\r\nContent-Disposition: form-data; name="file"; filename="slow.txt"\r\n\r\n')
t0 = time.time()
try:
    while time.time() - t0 < 8:
        s.sendall(b"x")
        time.sleep(0.5)
    print("open")
except OSError:
    print("cut after %d s" % (time.time() - t0))
PY
}
if serve_start --s3-listen off --request-timeout 3; then
  R=$(trickle "$URL/u/hu_00000000000000000000000000000000")
  check "a trickled body to an unknown upload token is cut (by its 404 or --request-timeout) ($R)" \
    test "$R" != open
  R=$(trickle "$URL/u/$TOKEN")
  expect_eq "a trickled body to a good link is not cut by --request-timeout 3 in 8 s" "$R" open
else
  not_ok "the daemon starts again with --request-timeout 3"
fi

# A daemon killed during an upload gives that upload's slot back at its
# next start: a one-file link is not used up by a file never stored.
mklink '{"max_files":1}'
python3 - "$URL/u/$TOKEN" <<'PY' &
import socket, sys, time, urllib.parse
u = urllib.parse.urlsplit(sys.argv[1])
s = socket.create_connection((u.hostname, u.port))
s.sendall(("POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=BB\r\n"
           "Content-Length: 100000\r\n\r\n" % u.path).encode())
s.sendall(b'--BB\r\nContent-Disposition: form-data; name="file"; filename="half.txt"\r\n\r\n' + b"x" * 5000)
time.sleep(60)
PY
SLOW=$!
used() {
  api GET /v1/upload-links
  jf "[l['files_used'] for l in j['upload_links'] if l['id'] == '$LID'][0]"
}
for _ in $(seq 100); do [ "$(used)" = 1 ] && break; sleep 0.1; done
expect_eq "the upload in flight holds the link's one slot" "$(used)" 1
kill -9 "$SPID"
wait "$SPID" 2>/dev/null
SPID=
kill "$SLOW" 2>/dev/null
wait "$SLOW" 2>/dev/null
if serve_start --s3-listen off; then
  expect_eq "after a SIGKILL and a start, the slot is free again" "$(used)" 0
  check "the start says so in its log" grep -q "gave back the upload slots of 1 link" "$SERVE_LOG"
  post "$URL/u/$TOKEN" -F "file=@$T_SCRATCH/note.txt"
  expect_code "the link takes its one file" 201
  expect_eq "... and it is the only file under its prefix" "$(keys "$LPREFIX")" "${LPREFIX}note.txt"
else
  not_ok "the daemon starts after a SIGKILL"
fi
serve_finish
