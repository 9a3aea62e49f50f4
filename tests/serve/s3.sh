#!/bin/bash
# The storage plane end to end: awscli v2 (Debian's) against the embedded
# S3 store, curl's own SigV4 signer for hostile requests, links and their
# access log, tenant isolation, box <-> store transfers.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"
. "$(dirname "$0")/s3.bash"

W=$T_SCRATCH/w
mkdir -p "$W"
if ! s3_start; then
  not_ok "the daemon starts with an S3 listener"
  serve_finish
  exit 1
fi
ok "the daemon starts with an S3 listener ($S3)"
check "Debian's awscli v2 is the client" bash -c "'$AWS' --version 2>&1 | grep -q '^aws-cli/2'"

# ---- credentials ------------------------------------------------------------
KEY=""
api POST /v1/s3-keys
expect_code "s3-keys needs a tenant key" 401
KEY=$ADMIN
api POST /v1/s3-keys
expect_code "s3-keys: not for the admin key" 403
check "tenant one gets S3 keys" s3_creds one
ONE_AK=$AK ONE_SK=$SK ONE_KEY=$TKEY
check "an access key id looks like AWS's (20 upper-case characters)" grep -qE '^[A-Z0-9]{20}$' <<<"$AK"
check "a secret of 40 characters" [ ${#SK} = 40 ]

# ---- buckets --------------------------------------------------------------------
check "mb" awsc s3 mb s3://alpha >/dev/null
check "mb of an owned bucket again succeeds (s3api create-bucket)" awsc s3api create-bucket --bucket alpha >/dev/null
awsc s3 ls >"$W/lsb" 2>&1
check "ls lists the bucket" grep -q ' alpha$' "$W/lsb"
KEY=$ONE_KEY
api GET "/v1/audit?action=s3.bucket_create"
check "bucket creation is in the audit log, with the S3 key id and no secret" bash -c "grep -q 'bucket=alpha s3_key=$ONE_AK' <<<'$BODY' && ! grep -qF '$ONE_SK' <<<'$BODY'"
s3req GET "/alpha?location" --payload UNSIGNED-PAYLOAD
check "GetBucketLocation answers" grep -q "<LocationConstraint" "$T_SCRATCH/s3body"

# ---- objects: 0 B, 1 KiB, 20 MiB (multipart) --------------------------------------
: >"$W/f0"
head -c 1024 /dev/urandom >"$W/f1k"
head -c $((20 * 1024 * 1024)) /dev/urandom >"$W/f20m"
check "cp 0 B" awsc s3 cp "$W/f0" s3://alpha/empty
check "cp 1 KiB" awsc s3 cp "$W/f1k" s3://alpha/dir/one
check "cp 20 MiB (multipart)" awsc s3 cp "$W/f20m" s3://alpha/big/twenty
awsc s3api head-object --bucket alpha --key big/twenty >"$W/h20" 2>&1
check "the 20 MiB object has a multipart ETag (md5 of the part md5s, -3)" grep -q '"ETag": "\\"[0-9a-f]\{32\}-3\\""' "$W/h20"
check "its size is right" grep -q '"ContentLength": 20971520' "$W/h20"
want=$(python3 -c '
import hashlib,sys
d=open(sys.argv[1],"rb").read(); p=8*1024*1024
m=b"".join(hashlib.md5(d[i:i+p]).digest() for i in range(0,len(d),p))
print(hashlib.md5(m).hexdigest()+"-%d"%((len(d)+p-1)//p))' "$W/f20m")
check "the multipart ETag is exactly S3's rule" grep -q "$want" "$W/h20"
for k in empty dir/one big/twenty; do
  rm -f "$W/out"
  awsc s3 cp "s3://alpha/$k" "$W/out"
  case $k in empty) f=f0 ;; dir/one) f=f1k ;; *) f=f20m ;; esac
  check "aws s3 cp gets $k back (the same bytes)" cmp -s "$W/out" "$W/$f"
done
e1=$(md5sum <"$W/f1k" | cut -c1-32)
awsc s3api head-object --bucket alpha --key dir/one >"$W/h1" 2>&1
check "a single PUT's ETag is the MD5" grep -q "$e1" "$W/h1"
check "a missing key: head-object fails with 404" bash -c "! '$AWS' --endpoint-url '$S3' s3api head-object --bucket alpha --key nope 2>'$W/e' && grep -q 404 '$W/e'"
s3req GET /alpha/nope --payload UNSIGNED-PAYLOAD
expect_s3 "a missing key: 404 NoSuchKey" 404 NoSuchKey

# ---- metadata and content type --------------------------------------------------
check "put with content type and metadata" awsc s3 cp "$W/f1k" s3://alpha/meta.html --content-type text/html --metadata colour=blue,size=L
awsc s3api head-object --bucket alpha --key meta.html >"$W/hm" 2>&1
check "Content-Type comes back" grep -q '"ContentType": "text/html"' "$W/hm"
check "x-amz-meta-* come back" grep -q '"colour": "blue"' "$W/hm"

# ---- ranges and conditionals -----------------------------------------------------
awsc s3api get-object --bucket alpha --key dir/one --range bytes=0-9 "$W/r" >"$W/rh" 2>&1
check "ranged get-object: the first 10 bytes" cmp -s "$W/r" <(head -c 10 "$W/f1k")
check "ranged get-object: Content-Range" grep -q '"ContentRange": "bytes 0-9/1024"' "$W/rh"
s3req GET /alpha/dir/one --payload UNSIGNED-PAYLOAD -H "Range: bytes=-16"
check "suffix range bytes=-16: 206 and the last 16 bytes" bash -c "[ $CODE = 206 ] && cmp -s '$T_SCRATCH/s3body' <(tail -c 16 '$W/f1k')"
s3req GET /alpha/dir/one --payload UNSIGNED-PAYLOAD -H "Range: bytes=5000-"
expect_s3 "an unsatisfiable range: 416 InvalidRange" 416 InvalidRange
check "416 says the size" grep -qi '^Content-Range: bytes \*/1024' "$T_SCRATCH/s3hdr"
s3req GET /alpha/dir/one --payload UNSIGNED-PAYLOAD -H "If-None-Match: \"$e1\""
expect_eq "If-None-Match with the ETag: 304" "$CODE" 304
s3req GET /alpha/dir/one --payload UNSIGNED-PAYLOAD -H 'If-Match: "0000"'
expect_s3 "If-Match with another ETag: 412" 412 PreconditionFailed

# ---- listing: prefix, delimiter, pages, V1 and V2 ------------------------------------
for k in list/a/1 list/a/2 list/b/1 list/c; do s3req PUT "/alpha/$k" --data ""; done
awsc s3api list-objects-v2 --bucket alpha --prefix list/ --delimiter / >"$W/l" 2>&1
check "delimiter: common prefixes list/a/ and list/b/" bash -c "grep -q '\"Prefix\": \"list/a/\"' '$W/l' && grep -q '\"Prefix\": \"list/b/\"' '$W/l'"
check "delimiter: the key list/c" grep -q '"Key": "list/c"' "$W/l"
check "delimiter: nothing below a common prefix" not grep -q '"Key": "list/a/1"' "$W/l"
awsc s3 ls s3://alpha/list/a/ >"$W/ls"
check "aws s3 ls with a prefix" bash -c "[ \$(wc -l <'$W/ls') = 2 ]"
for i in $(seq -w 1 23); do echo "$i" >"$W/p$i"; done
awsc s3 cp --recursive --exclude '*' --include 'p*' "$W" s3://alpha/pages/
n2=$(awsc s3api list-objects-v2 --bucket alpha --prefix pages/ --page-size 5 --query 'length(Contents)' 2>&1)
expect_eq "ListObjectsV2 in pages of 5 (continuation tokens) finds all 23" "$n2" 23
n1=$(awsc s3api list-objects --bucket alpha --prefix pages/ --page-size 4 --query 'length(Contents)' 2>&1)
expect_eq "ListObjects V1 in pages of 4 (markers) finds all 23" "$n1" 23
s3req GET "/alpha?list-type=2&prefix=pages/&max-keys=5" --payload UNSIGNED-PAYLOAD
check "max-keys 5: truncated with a continuation token" bash -c "grep -q '<IsTruncated>true</IsTruncated>' '$T_SCRATCH/s3body' && grep -q '<NextContinuationToken>' '$T_SCRATCH/s3body'"

# ---- odd keys ------------------------------------------------------------------
ODD='odd dir/a+b%c/ü ñ//x.txt'
check "a key with spaces, +, %, UTF-8 and // uploads" awsc s3 cp "$W/f1k" "s3://alpha/$ODD"
rm -f "$W/out"
awsc s3 cp "s3://alpha/$ODD" "$W/out"
check "and downloads the same bytes" cmp -s "$W/out" "$W/f1k"
awsc s3api list-objects-v2 --bucket alpha --prefix 'odd dir/' >"$W/lo" 2>&1
check "and lists under its exact name" grep -qF '"Key": "odd dir/a+b%c/ü ñ//x.txt"' "$W/lo"
s3req GET "/alpha?list-type=2&prefix=odd%20dir/&encoding-type=url" --payload UNSIGNED-PAYLOAD
check "encoding-type=url encodes it" grep -qF '<Key>odd%20dir/a%2Bb%25c/%C3%BC%20%C3%B1//x.txt</Key>' "$T_SCRATCH/s3body"

# ---- copy --------------------------------------------------------------------------
check "S3-to-S3 cp (CopyObject)" awsc s3 cp s3://alpha/dir/one s3://alpha/copy/one
rm -f "$W/out"
awsc s3 cp s3://alpha/copy/one "$W/out"
check "the copy has the same bytes" cmp -s "$W/out" "$W/f1k"

# ---- presigned URLs (awscli's signer) -----------------------------------------------
URLP=$(awsc s3 presign s3://alpha/dir/one --expires-in 300)
code=$(curl -s -o "$W/pres" -w '%{http_code}' "$URLP")
check "a presigned URL fetched with curl: 200 and the bytes" bash -c "[ $code = 200 ] && cmp -s '$W/pres' '$W/f1k'"
code=$(curl -s -o "$W/pres" -w '%{http_code}' "${URLP/dir\/one/copy\/one}")
expect_eq "a presigned URL with another path: 403" "$code" 403
check "... SignatureDoesNotMatch" grep -q SignatureDoesNotMatch "$W/pres"
code=$(curl -s -o "$W/pres" -w '%{http_code}' -X DELETE "$URLP")
expect_eq "a presigned GET used for DELETE: 403" "$code" 403
code=$(curl -s -o "$W/pres" -w '%{http_code}' "${URLP/X-Amz-Expires=300/X-Amz-Expires=301}")
expect_eq "a presigned URL with a changed expiry: 403" "$code" 403
URLX=$(awsc s3 presign s3://alpha/dir/one --expires-in 1)
sleep 2
code=$(curl -s -o "$W/pres" -w '%{http_code}' "$URLX")
check "an expired presigned URL: 403 AccessDenied" bash -c "[ $code = 403 ] && grep -q 'Request has expired' '$W/pres'"

# ---- flexible checksums from awscli ------------------------------------------------
check "awscli with --checksum-algorithm CRC32 (checksum headers or trailer)" awsc s3api put-object --bucket alpha --key crc-cli --body "$W/f1k" --checksum-algorithm CRC32 >/dev/null
check "awscli put-object with a wrong --content-md5 fails with BadDigest" bash -c "! '$AWS' --endpoint-url '$S3' s3api put-object --bucket alpha --key bad-md5 --body '$W/f1k' --content-md5 1B2M2Y8AsgTpgAmY7PhCfg== 2>'$W/e' && grep -q BadDigest '$W/e'"
s3req GET /alpha/bad-md5
expect_s3 "... and stored nothing" 404 NoSuchKey

# ---- multipart, by hand -------------------------------------------------------------
head -c $((5 * 1024 * 1024)) /dev/urandom >"$W/p5m"
UP=$(awsc s3api create-multipart-upload --bucket alpha --key mp/obj --query UploadId --output text)
check "create-multipart-upload gives an id" [ -n "$UP" ]
E2=$(awsc s3api upload-part --bucket alpha --key mp/obj --upload-id "$UP" --part-number 2 --body "$W/f1k" --query ETag --output text)
E1=$(awsc s3api upload-part --bucket alpha --key mp/obj --upload-id "$UP" --part-number 1 --body "$W/p5m" --query ETag --output text)
check "parts upload in any order" bash -c "[ -n '$E1' ] && [ -n '$E2' ]"
np=$(awsc s3api list-parts --bucket alpha --key mp/obj --upload-id "$UP" --query 'length(Parts)' 2>&1)
expect_eq "list-parts shows both" "$np" 2
awsc s3api complete-multipart-upload --bucket alpha --key mp/obj --upload-id "$UP" \
  --multipart-upload "{\"Parts\":[{\"PartNumber\":1,\"ETag\":$E1},{\"PartNumber\":2,\"ETag\":$E2}]}" >"$W/cmp" 2>&1
check "complete-multipart-upload" grep -q '"ETag": "\\"[0-9a-f]\{32\}-2\\""' "$W/cmp"
rm -f "$W/out"
awsc s3 cp s3://alpha/mp/obj "$W/out"
check "the completed object is part 1 then part 2" cmp -s "$W/out" <(cat "$W/p5m" "$W/f1k")
UP2=$(awsc s3api create-multipart-upload --bucket alpha --key mp/small --query UploadId --output text)
awsc s3api list-multipart-uploads --bucket alpha >"$W/lu" 2>&1
check "list-multipart-uploads shows the upload in progress" grep -q "$UP2" "$W/lu"
check "abort-multipart-upload" awsc s3api abort-multipart-upload --bucket alpha --key mp/small --upload-id "$UP2"
s3req GET "/alpha/mp/small?uploadId=$UP2"
expect_s3 "an aborted upload is gone: 404 NoSuchUpload" 404 NoSuchUpload

# ---- DeleteObjects -------------------------------------------------------------------
s3req DELETE /alpha --payload UNSIGNED-PAYLOAD
expect_s3 "deleting a bucket that is not empty: 409 BucketNotEmpty" 409 BucketNotEmpty
awsc s3api delete-objects --bucket alpha --delete '{"Objects":[{"Key":"list/a/1"},{"Key":"list/a/2"},{"Key":"never/there"}]}' >"$W/do" 2>&1
check "s3api delete-objects deletes (a missing key counts as deleted)" bash -c "grep -q '\"Key\": \"list/a/1\"' '$W/do' && grep -q never/there '$W/do'"
awsc s3api list-objects-v2 --bucket alpha --prefix list/a/ >"$W/la" 2>&1
check "the deleted keys are gone" not grep -q '"Key"' "$W/la"

# ---- tenant isolation ------------------------------------------------------------------
check "tenant two gets S3 keys" s3_creds two
TWO_AK=$AK TWO_SK=$SK TWO_KEY=$TKEY
awsc s3 ls >"$W/l2" 2>&1
check "tenant two does not see tenant one's bucket" not grep -q alpha "$W/l2"
s3req GET /alpha/dir/one --payload UNSIGNED-PAYLOAD
expect_s3 "tenant two cannot read tenant one's object" 404 NoSuchBucket
check "tenant two may have its own bucket named alpha" awsc s3 mb s3://alpha >/dev/null
awsc s3 cp "$W/f0" s3://alpha/mine
awsc s3 ls s3://alpha/ >"$W/l3" 2>&1
check "and sees only its own objects in it" bash -c "grep -q mine '$W/l3' && ! grep -q dir/ '$W/l3'"
export AWS_ACCESS_KEY_ID=$ONE_AK AWS_SECRET_ACCESS_KEY=$ONE_SK
AK=$ONE_AK SK=$ONE_SK
awsc s3 ls s3://alpha/ >"$W/l4" 2>&1
check "tenant one still sees its own alpha" bash -c "grep -q 'PRE dir/' '$W/l4' && ! grep -q mine '$W/l4'"

# ---- links and their access log -------------------------------------------------------
KEY=$ONE_KEY
api POST /v1/links -d '{"bucket":"alpha","key":"dir/one","expires_in":600,"filename":"report one.txt"}'
expect_code "POST /v1/links: 201" 201
LURL=$(jf 'j["url"]'); LID=$(jf 'j["id"]')
check "the link is on the S3 listener's address" grep -qF "$S3/alpha/dir/one?" <<<"$LURL"
code=$(curl -s -A husk-test-agent -D "$W/lh" -o "$W/lo" -w '%{http_code}' "$LURL")
check "fetching the link: 200 and the bytes" bash -c "[ $code = 200 ] && cmp -s '$W/lo' '$W/f1k'"
check "with the download name" grep -qi '^Content-Disposition: attachment; filename="report one.txt"' "$W/lh"
curl -s -o /dev/null -A tamper-agent "${LURL/dir\/one/dir\/one2}"
curl -s -o /dev/null -A tamper-agent "${LURL/127.0.0.1/localhost}"
curl -s -o /dev/null -A tamper-agent "${LURL/X-Amz-Expires=600/X-Amz-Expires=6000}"
code=$(curl -s -o "$W/lo" -w '%{http_code}' -A tamper-agent -X PUT --data x "$LURL")
expect_eq "a link used to PUT: 403" "$code" 403
code=$(curl -s -o "$W/lo" -w '%{http_code}' "${LURL/127.0.0.1/localhost}")
expect_eq "a link fetched under another host name: 403" "$code" 403
code=$(curl -s -o "$W/lo" -w '%{http_code}' "${LURL/x-husk-link=/x-husk-link=l}")
expect_eq "a link with a changed id: 403" "$code" 403
api GET "/v1/links/$LID/access"
expect_code "the access log" 200
expect_eq "records the fetch (agent, status)" "$(jf '[a["status"] for a in j["accesses"] if a["user_agent"]=="husk-test-agent"]')" "[200]"
expect_eq "refused (tampered) fetches are not stored" "$(jf 'len([a for a in j["accesses"] if a["status"]==403])')" 0
expect_eq "with the remote address" "$(jf 'j["accesses"][0]["remote_addr"]')" 127.0.0.1
api GET "/v1/links/$LID"
expect_eq "GET /v1/links/{id}" "$(jf 'j["key"]')" dir/one
check "the link counts the refused fetches" [ "$(jf 'j["denied_fetches"]')" -ge 3 ]
KEY=$TWO_KEY
api GET "/v1/links/$LID/access"
expect_code "another tenant cannot read the access log: 404" 404
KEY=$ONE_KEY
api GET /v1/links
check "GET /v1/links lists the link" [ "$(jf "[l['id'] for l in j['links']].count('$LID')")" = 1 ]
api DELETE "/v1/links/$LID"
expect_code "DELETE /v1/links/{id} revokes it" 204
code=$(curl -s -o "$W/lo" -w '%{http_code}' -A after-revoke "$LURL")
check "a revoked link: 403 AccessDenied" bash -c "[ $code = 403 ] && grep -q AccessDenied '$W/lo'"
api GET "/v1/links/$LID/access"
expect_eq "the refused fetch of the revoked link is not stored" "$(jf '[a["status"] for a in j["accesses"] if a["user_agent"]=="after-revoke"]')" "[]"
api GET "/v1/links/$LID"
check "the link shows when it was revoked" [ -n "$(jf 'j["revoked_at"]')" ]
KEY=$TWO_KEY
api DELETE "/v1/links/$LID"
expect_code "another tenant cannot revoke it: 404" 404
KEY=$ONE_KEY
api POST /v1/links -d '{"bucket":"alpha","key":"dir/one","expires_in":604801}'
expect_code "a link for longer than 7 days: 400" 400
api POST /v1/links -d '{"bucket":"alpha","key":"no/such"}'
expect_code "a link to a missing key: 404" 404
api POST /v1/links -d '{"bucket":"alpha","key":"dir/one"}'
check "the default expiry is one hour" python3 -c '
import json,sys,datetime
j=json.loads(sys.argv[1]); f=lambda s: datetime.datetime.fromisoformat(s.replace("Z","+00:00"))
sys.exit(0 if abs((f(j["expires_at"])-f(j["created_at"])).total_seconds()-3600)<2 else 1)' "$BODY"
api POST /v1/links -d '{"bucket":"alpha","key":"dir/one","expires_in":1}'
SURL=$(jf 'j["url"]')
sleep 2
code=$(curl -s -o "$W/lo" -w '%{http_code}' "$SURL")
check "an expired link: 403 AccessDenied" bash -c "[ $code = 403 ] && grep -q AccessDenied '$W/lo'"
export AWS_ACCESS_KEY_ID=$ONE_AK AWS_SECRET_ACCESS_KEY=$ONE_SK
ls_ak=$(jf 'j["url"]' | sed -n 's/.*Credential=\([A-Z0-9]*\).*/\1/p')
check "links are not signed with the tenant's own S3 key" [ "$ls_ak" != "$ONE_AK" ]

# ---- box <-> store -----------------------------------------------------------------------
KEY=$ONE_KEY
if new_box; then
  ok "a box for the transfers"
  api PUT "/v1/sandboxes/$BOX/files?path=/workspace/out/report.csv&mkdirs=1" --data-binary @"$W/f1k"
  api PUT "/v1/sandboxes/$BOX/files?path=/workspace/out/sub/b.txt&mkdirs=1" --data-binary "hello"
  expect_code "write box files to export" 201
  api POST "/v1/sandboxes/$BOX/store" -d '{"path":"/workspace/out/report.csv","bucket":"exports","key":"r.csv","link":true}'
  expect_code "store a box file (bucket created on the way)" 201
  check "its link serves the file" bash -c "curl -s '$(jf 'j["url"]')' | cmp -s - '$W/f1k'"
  awsc s3api head-object --bucket exports --key r.csv >"$W/hx" 2>&1
  check "the object has a content type from its name" grep -q '"ContentType": "text/csv"' "$W/hx"
  api POST "/v1/sandboxes/$BOX/store" -d '{"path":"/workspace/out","bucket":"exports","key":"out.tar"}'
  expect_code "store a box directory" 201
  expect_eq "as a tar" "$(jf 'j["tar"]')" true
  rm -f "$W/out.tar"; awsc s3 cp s3://exports/out.tar "$W/out.tar"
  check "the tar holds the tree" bash -c "tar -tf '$W/out.tar' | grep -q 'sub/b.txt'"
  api POST "/v1/sandboxes/$BOX/store" -d '{"path":"/etc/passwd","bucket":"exports","key":"x"}'
  check "a path outside the box's areas is refused" [ "$CODE" = 403 -o "$CODE" = 400 ]
  api POST "/v1/sandboxes/$BOX/load" -d '{"bucket":"alpha","key":"big/twenty","path":"/workspace/in/twenty.bin"}'
  expect_code "load an object into the box" 200
  api GET "/v1/sandboxes/$BOX/files?path=/workspace/in/twenty.bin"
  curl -s -H "Authorization: Bearer $KEY" "$URL/v1/sandboxes/$BOX/files?path=/workspace/in/twenty.bin" -o "$W/back"
  check "the box has the same 20 MiB" cmp -s "$W/back" "$W/f20m"
  api POST "/v1/sandboxes/$BOX/load" -d '{"bucket":"exports","key":"out.tar","path":"/workspace/unpacked","extract":true}'
  expect_code "load a tar object extracted" 200
  api GET "/v1/sandboxes/$BOX/files?path=/workspace/unpacked/sub/b.txt"
  expect_eq "its files are in the box" "$BODY" hello
  api POST "/v1/sandboxes/$BOX/load" -d '{"bucket":"alpha","key":"nope","path":"/workspace/x"}'
  expect_code "load a missing key: 404" 404
  KEY=$TWO_KEY
  api POST "/v1/sandboxes/$BOX/store" -d '{"path":"/workspace/out/report.csv","bucket":"x1x","key":"y"}'
  expect_code "another tenant cannot export from the box: 404" 404
  KEY=$ONE_KEY
  api DELETE "/v1/sandboxes/$BOX"
else
  not_ok "a box for the transfers ($CODE $BODY)"
fi

# ---- S3 keys: list and revoke -------------------------------------------------------------
KEY=$ONE_KEY
api POST /v1/s3-keys
EXTRA_AK=$(jf 'j["access_key_id"]') EXTRA_SK=$(jf 'j["secret_access_key"]')
api GET /v1/s3-keys
check "GET /v1/s3-keys lists the tenant's keys, no secrets" bash -c "grep -q '$EXTRA_AK' <<<'$BODY' && grep -q '$ONE_AK' <<<'$BODY' && ! grep -q secret <<<'$BODY'"
check "links' internal keys are not listed" [ "$(jf 'len(j["keys"])')" = 2 ]
CAK=$EXTRA_AK CSK=$EXTRA_SK s3req GET / --payload UNSIGNED-PAYLOAD
expect_eq "the new key works" "$CODE" 200
api DELETE "/v1/s3-keys/$EXTRA_AK"
expect_code "DELETE /v1/s3-keys/{id} revokes it" 204
CAK=$EXTRA_AK CSK=$EXTRA_SK s3req GET / --payload UNSIGNED-PAYLOAD
expect_s3 "a revoked key: 403 InvalidAccessKeyId" 403 InvalidAccessKeyId
KEY=$TWO_KEY
api DELETE "/v1/s3-keys/$ONE_AK"
expect_code "another tenant cannot revoke a key: 404" 404
KEY=$ONE_KEY

# ---- rm --recursive, rb, and what is left on disk ----------------------------------------
check "rm --recursive" awsc s3 rm --recursive s3://alpha/
awsc s3 ls --recursive s3://alpha/ >"$W/l5" 2>&1
check "the bucket is empty" [ ! -s "$W/l5" ]
check "rb" awsc s3 rb s3://alpha >/dev/null
api GET "/v1/audit?action=s3.bucket_delete"
expect_eq "bucket deletions are audited (the refused one while not empty, then the real one)" "$(jf '[(r["outcome"], r["status"]) for r in j["records"]]')" '[["error", 409], ["ok", 204]]'
check "no temporary files are left" [ "$(store_files tmp)" = 0 ]
check "the store never logged a secret" not grep -qF -e "$ONE_SK" -e "$TWO_SK" "$SERVE_LOG"
check "the secrets are not in the database in the clear" not grep -qaF "$ONE_SK" "$DATA/husk.db" "$DATA/husk.db-wal"
serve_stop
expect_eq "the daemon stops cleanly" "${SERVE_RC:-x}" 0
serve_finish
