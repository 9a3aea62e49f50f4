#!/bin/bash
# The S3 front against hostile and broken requests, each from our own
# Python SigV4 signer (tests/serve/s3req.py) or plain curl, so that
# anything a real client would never send can be sent: bad and missing
# signatures, skewed dates, bodies that do not match their hashes, broken
# aws-chunked framing and trailers, malformed/oversize/DTD XML, unknown
# buckets/keys/uploads, out-of-range parts, odd URIs, oversize keys and
# metadata, tampered/expired/revoked links.  Every case must get the right
# S3 error and status, store nothing and corrupt nothing.  Also run under
# ASan+UBSan by tests/run.sh.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"
. "$(dirname "$0")/s3.bash"

W=$T_SCRATCH/w
mkdir -p "$W"
if ! s3_start || ! s3_creds hostile; then
  not_ok "the daemon starts with an S3 listener"
  serve_finish
  exit 1
fi
ok "the daemon starts with an S3 listener"
ONE_KEY=$TKEY ONE_AK=$AK ONE_SK=$SK
head -c 1024 /dev/urandom >"$W/f1k"
head -c 200000 /dev/urandom >"$W/f200k"
head -c $((5 * 1024 * 1024)) /dev/urandom >"$W/p5m"
s3req PUT /alpha
expect_eq "a bucket" "$CODE" 200
s3req PUT /alpha/dir/one --data-file "$W/f1k"
expect_eq "an object" "$CODE" 200
etag_of() { sed -n 's/^[Ee][Tt][Aa][Gg]: *//p' "$T_SCRATCH/s3hdr" | tr -d '\r'; }
E_ONE=$(etag_of)

# ---- authentication ------------------------------------------------------------
CSK=wrongwrongwrongwrongwrongwrongwrongwrong s3req GET /alpha
expect_s3 "a wrong secret: 403 SignatureDoesNotMatch" 403 SignatureDoesNotMatch
CAK=HKAAAAAAAAAAAAAAAAAA s3req GET /alpha
expect_s3 "an unknown access key: 403 InvalidAccessKeyId" 403 InvalidAccessKeyId
CODE=$(curl -s -o "$T_SCRATCH/s3body" -w '%{http_code}' "$S3/alpha/dir/one"); BODY=$(cat "$T_SCRATCH/s3body")
expect_s3 "no signature at all: 403 AccessDenied" 403 AccessDenied
s3req GET /alpha --date 20200101T000000Z
expect_s3 "a request dated 2020: 403 RequestTimeTooSkewed" 403 RequestTimeTooSkewed
s3req GET /alpha --date "$(date -u -d '+20 minutes' +%Y%m%dT%H%M%SZ)"
expect_s3 "a request dated 20 minutes ahead: 403 RequestTimeTooSkewed" 403 RequestTimeTooSkewed
s3req GET /alpha --region eu-west-9
expect_s3 "a credential for another region: 400 AuthorizationHeaderMalformed" 400 AuthorizationHeaderMalformed
hdr() { # AUTHORIZATION VALUE: a request with exactly that header
  CODE=$(curl -s -o "$T_SCRATCH/s3body" -w '%{http_code}' -H "Authorization: $1" \
    -H "x-amz-date: $(date -u +%Y%m%dT%H%M%SZ)" -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$S3/alpha")
  BODY=$(cat "$T_SCRATCH/s3body")
}
hdr "AWS $AK:c2lnbmF0dXJl"
expect_s3 "a SigV2 header: 400 InvalidRequest" 400 InvalidRequest
hdr "AWS4-HMAC-SHA256 Credential=$AK/20200101/us-east-1/s3/aws4_request"
expect_s3 "a header without SignedHeaders and Signature: 400" 400 AuthorizationHeaderMalformed
hdr "AWS4-HMAC-SHA256 Credential=$AK/$(date -u +%Y%m%d)/us-east-1/s3/aws4_request, SignedHeaders=x-amz-date, Signature=$(printf %064d 0)"
expect_s3 "SignedHeaders without host: 400" 400 AuthorizationHeaderMalformed
hdr "AWS4-HMAC-SHA256 Credential=$AK/$(date -u +%Y%m%d)/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=zz"
expect_s3 "a signature that is not hex: 400" 400 AuthorizationHeaderMalformed
hdr "AWS4-HMAC-SHA256 $(head -c 3000 /dev/zero | tr '\0' 'A')"
expect_s3 "a garbage header: 400" 400 AuthorizationHeaderMalformed
q="X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=$AK%2F$(date -u +%Y%m%d)%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=$(date -u +%Y%m%dT%H%M%SZ)&X-Amz-SignedHeaders=host&X-Amz-Signature=$(printf %064d 0)"
for e in 0 604801 -1 abc; do
  CODE=$(curl -s -o "$T_SCRATCH/s3body" -w '%{http_code}' "$S3/alpha/dir/one?$q&X-Amz-Expires=$e"); BODY=$(cat "$T_SCRATCH/s3body")
  expect_s3 "a presigned URL with X-Amz-Expires=$e: 400" 400 AuthorizationQueryParametersError
done
CODE=$(curl -s -o "$T_SCRATCH/s3body" -w '%{http_code}' "$S3/alpha/dir/one?$q&X-Amz-Expires=60"); BODY=$(cat "$T_SCRATCH/s3body")
expect_s3 "a presigned URL with a wrong signature: 403" 403 SignatureDoesNotMatch
CODE=$(curl -s -o "$T_SCRATCH/s3body" -w '%{http_code}' -H "Authorization: AWS4-HMAC-SHA256 x" "$S3/alpha/dir/one?$q&X-Amz-Expires=60"); BODY=$(cat "$T_SCRATCH/s3body")
expect_s3 "header and query auth together: 400" 400 AuthorizationHeaderMalformed
CODE=$(curl -s -o "$T_SCRATCH/s3body" -w '%{http_code}' "$S3/alpha/dir/one?AWSAccessKeyId=$AK&Expires=9999999999&Signature=x"); BODY=$(cat "$T_SCRATCH/s3body")
expect_s3 "a SigV2 presigned URL: 400 InvalidRequest" 400 InvalidRequest

# ---- bodies that do not match their digests ------------------------------------------
s3req PUT /alpha/bad-sha --payload "$(printf x | sha256sum | cut -c1-64)" --data-file "$W/f1k"
expect_s3 "a body that does not match x-amz-content-sha256: 400" 400 XAmzContentSHA256Mismatch
s3req PUT /alpha/bad-sha --payload NOT-A-HASH --data-file "$W/f1k"
expect_s3 "an x-amz-content-sha256 that is neither a hash nor a mode: 400" 400 InvalidArgument
s3req PUT /alpha/bad-md5 --payload UNSIGNED-PAYLOAD -H "Content-MD5: 1B2M2Y8AsgTpgAmY7PhCfg==" --data-file "$W/f1k"
expect_s3 "a body that does not match Content-MD5: 400 BadDigest" 400 BadDigest
s3req PUT /alpha/bad-md5 --payload UNSIGNED-PAYLOAD -H "Content-MD5: notbase64" --data-file "$W/f1k"
expect_s3 "a malformed Content-MD5: 400 InvalidDigest" 400 InvalidDigest
crc=$(python3 -c 'import zlib,base64,sys; print(base64.b64encode(zlib.crc32(open(sys.argv[1],"rb").read()).to_bytes(4,"big")).decode())' "$W/f1k")
s3req PUT /alpha/bad-crc --payload UNSIGNED-PAYLOAD -H "x-amz-checksum-crc32: AAAAAA==" --data-file "$W/f1k"
expect_s3 "a wrong x-amz-checksum-crc32: 400 BadDigest" 400 BadDigest
s3req PUT /alpha/bad-crc --payload UNSIGNED-PAYLOAD -H "x-amz-checksum-crc64nvme: AAAAAAAAAAA=" --data-file "$W/f1k"
expect_s3 "a wrong x-amz-checksum-crc64nvme: 400 BadDigest" 400 BadDigest
# CRC-64/NVME computed independently (bitwise, reflected polynomial).
c64=$(python3 -c '
import base64,sys
c=(1<<64)-1
for b in open(sys.argv[1],"rb").read():
    c^=b
    for _ in range(8): c=(c>>1)^0x9A6C9329AC4BC9B5 if c&1 else c>>1
print(base64.b64encode((c^((1<<64)-1)).to_bytes(8,"big")).decode())' "$W/f1k")
s3req PUT /alpha/crc64-ok --payload UNSIGNED-PAYLOAD -H "x-amz-checksum-crc64nvme: $c64" --data-file "$W/f1k"
expect_eq "the right x-amz-checksum-crc64nvme (newer SDKs' default): 200" "$CODE" 200
check "... and it is echoed" grep -qi "^x-amz-checksum-crc64nvme: $c64" "$T_SCRATCH/s3hdr"
s3req PUT /alpha/crc-ok --payload UNSIGNED-PAYLOAD -H "x-amz-checksum-crc32: $crc" --data-file "$W/f1k"
expect_eq "the right x-amz-checksum-crc32: 200" "$CODE" 200
check "... and it is echoed" grep -qi "^x-amz-checksum-crc32: $crc" "$T_SCRATCH/s3hdr"
sha=$(python3 -c 'import hashlib,base64,sys; print(base64.b64encode(hashlib.sha256(open(sys.argv[1],"rb").read()).digest()).decode())' "$W/f1k")
s3req PUT /alpha/sha-ok --payload UNSIGNED-PAYLOAD -H "x-amz-checksum-sha256: $sha" --data-file "$W/f1k"
expect_eq "the right x-amz-checksum-sha256: 200" "$CODE" 200

# ---- aws-chunked: per-chunk signatures and trailers --------------------------------------
s3req PUT /alpha/chunked --data-file "$W/f200k" --chunked 65536
expect_eq "an aws-chunked upload with per-chunk signatures: 200" "$CODE" 200
s3req GET /alpha/chunked
check "stores the decoded bytes exactly" cmp -s "$T_SCRATCH/s3body" "$W/f200k"
s3req PUT /alpha/bad-chunk --data-file "$W/f200k" --chunked 65536 --bad-chunk
expect_s3 "a tampered chunk: 403 SignatureDoesNotMatch" 403 SignatureDoesNotMatch
s3req PUT /alpha/trailer-signed --data-file "$W/f200k" --chunked 65536 --trailer signed
expect_eq "aws-chunked with a signed CRC32 trailer: 200" "$CODE" 200
check "... the checksum is echoed" grep -qi '^x-amz-checksum-crc32:' "$T_SCRATCH/s3hdr"
s3req PUT /alpha/trailer-unsigned --data-file "$W/f200k" --chunked 65536 --trailer unsigned
expect_eq "aws-chunked with an unsigned trailer: 200" "$CODE" 200
s3req GET /alpha/trailer-unsigned
check "... stores the decoded bytes" cmp -s "$T_SCRATCH/s3body" "$W/f200k"
s3req PUT /alpha/bad-trailer --data-file "$W/f200k" --chunked 65536 --trailer unsigned --bad-trailer
expect_s3 "a trailer checksum that does not match the body: 400 BadDigest" 400 BadDigest
s3req PUT /alpha/bad-trailer --data-file "$W/f200k" --chunked 65536 --trailer signed --bad-trailer
expect_s3 "a signed trailer whose value was changed: 403 SignatureDoesNotMatch" 403 SignatureDoesNotMatch
s3req PUT /alpha/bad-len --data-file "$W/f200k" --chunked 65536 -H "x-amz-decoded-content-length: 5"
expect_s3 "a decoded length that does not match: 400 IncompleteBody" 400 IncompleteBody

# ---- keys, URIs, metadata ----------------------------------------------------------------
long=$(head -c 1100 /dev/zero | tr '\0' k)
s3req PUT "/alpha/$long" --data x
expect_s3 "a key longer than 1024 bytes: 400 KeyTooLongError" 400 KeyTooLongError
s3req PUT "/alpha/a%zzb" --payload UNSIGNED-PAYLOAD --data x
expect_s3 "a broken percent-escape: 400 InvalidURI" 400 InvalidURI
CODE=$(curl -s -o "$T_SCRATCH/s3body" -w '%{http_code}' "$S3/alpha/a%00b"); BODY=$(cat "$T_SCRATCH/s3body")
expect_s3 "an escaped NUL in the path: 400 InvalidURI" 400 InvalidURI
s3req PUT "/alpha/bad%FFkey" --data x
expect_s3 "a key that is not UTF-8: 400 InvalidArgument" 400 InvalidArgument
big=$(head -c 3000 /dev/zero | tr '\0' v)
s3req PUT /alpha/meta --data x -H "x-amz-meta-big: $big"
expect_s3 "metadata over 2 KiB: 400 MetadataTooLarge" 400 MetadataTooLarge
s3req GET /Bad_Name
expect_s3 "an invalid bucket name in a path: 404 NoSuchBucket" 404 NoSuchBucket
s3req PUT /Bad_Name
expect_s3 "creating an invalid bucket name: 400 InvalidBucketName" 400 InvalidBucketName
s3req PUT /alpha --data "<CreateBucketConfiguration><LocationConstraint>x"
expect_s3 "CreateBucket with malformed XML: 400 MalformedXML" 400 MalformedXML
s3req GET /nosuchbucket
expect_s3 "an unknown bucket: 404 NoSuchBucket" 404 NoSuchBucket
s3req GET /alpha/nope
expect_s3 "an unknown key: 404 NoSuchKey" 404 NoSuchKey
s3req GET "/alpha?acl"
expect_s3 "an unsupported subresource: 501 NotImplemented" 501 NotImplemented
s3req PATCH /alpha/dir/one --data x
expect_s3 "an unknown method: 405 MethodNotAllowed" 405 MethodNotAllowed
s3req GET "/alpha?list-type=2&continuation-token=zz"
expect_s3 "a bad continuation token: 400 InvalidArgument" 400 InvalidArgument
s3req GET "/alpha?list-type=3"
expect_s3 "list-type=3: 400 InvalidArgument" 400 InvalidArgument
s3req GET "/alpha?encoding-type=base64"
expect_s3 "an unknown encoding-type: 400 InvalidArgument" 400 InvalidArgument
s3req GET /alpha/dir/one -H "Range: bytes=5000-"
expect_s3 "an unsatisfiable range: 416 InvalidRange" 416 InvalidRange
s3req GET /alpha/dir/one -H 'If-Match: "0000"'
expect_s3 "If-Match with another ETag: 412" 412 PreconditionFailed
s3req PUT /alpha/c2 -H "x-amz-copy-source: /alpha/missing"
expect_s3 "copying a missing key: 404 NoSuchKey" 404 NoSuchKey
s3req PUT /alpha/dir/one -H "x-amz-copy-source: /alpha/dir/one"
expect_s3 "copying onto itself without REPLACE: 400 InvalidRequest" 400 InvalidRequest
s3req PUT /alpha/c3 -H "x-amz-copy-source: nobucketonly"
expect_s3 "a copy source without a key: 400 InvalidArgument" 400 InvalidArgument

# ---- multipart ------------------------------------------------------------------------
s3req POST "/alpha/mp/obj?uploads"
UP=$(sed -n 's|.*<UploadId>\([^<]*\)</UploadId>.*|\1|p' <<<"$BODY")
check "an upload" [ -n "$UP" ]
s3req PUT "/alpha/mp/obj?partNumber=2&uploadId=$UP" --data-file "$W/f1k"
E2=$(etag_of)
s3req PUT "/alpha/mp/obj?partNumber=1&uploadId=$UP" --data-file "$W/p5m"
E1=$(etag_of)
check "two parts, out of order" [ -n "$E1" ] && [ -n "$E2" ]
for pn in 0 10001 -1 1x ""; do
  s3req PUT "/alpha/mp/obj?partNumber=$pn&uploadId=$UP" --data x
  expect_s3 "part number '$pn': 400 InvalidArgument" 400 InvalidArgument
done
s3req PUT "/alpha/mp/obj?partNumber=1&uploadId=unot-an-upload" --data x
expect_s3 "an unknown upload: 404 NoSuchUpload" 404 NoSuchUpload
s3req PUT "/alpha/mp/other?partNumber=1&uploadId=$UP" --data x
expect_s3 "an upload under another key: 404 NoSuchUpload" 404 NoSuchUpload
cpl() { s3req POST "/alpha/mp/obj?uploadId=$UP" --data "$1"; }
cpl "<CompleteMultipartUpload><Part><PartNumber>2</PartNumber><ETag>$E2</ETag></Part><Part><PartNumber>1</PartNumber><ETag>$E1</ETag></Part></CompleteMultipartUpload>"
expect_s3 "complete with parts out of order: 400 InvalidPartOrder" 400 InvalidPartOrder
cpl "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>\"00000000000000000000000000000000\"</ETag></Part></CompleteMultipartUpload>"
expect_s3 "complete with a wrong ETag: 400 InvalidPart" 400 InvalidPart
cpl "<CompleteMultipartUpload><Part><PartNumber>3</PartNumber><ETag>$E1</ETag></Part></CompleteMultipartUpload>"
expect_s3 "complete with a part never uploaded: 400 InvalidPart" 400 InvalidPart
cpl "<CompleteMultipartUpload><Part><PartNumber>1"
expect_s3 "complete with malformed XML: 400 MalformedXML" 400 MalformedXML
cpl "<CompleteMultipartUpload></CompleteMultipartUpload>"
expect_s3 "complete with no parts: 400 MalformedXML" 400 MalformedXML
cpl "<Other><Part><PartNumber>1</PartNumber><ETag>$E1</ETag></Part></Other>"
expect_s3 "complete with another root element: 400 MalformedXML" 400 MalformedXML
cpl "<CompleteMultipartUpload><Part><PartNumber>99999</PartNumber><ETag>x</ETag></Part></CompleteMultipartUpload>"
expect_s3 "complete with a part number out of range: 400 MalformedXML" 400 MalformedXML
python3 -c 'import sys; sys.stdout.write("<CompleteMultipartUpload>" + "<Part><PartNumber>1</PartNumber><ETag>x</ETag></Part>" * 60000 + "</CompleteMultipartUpload>")' >"$W/bigxml"
s3req POST "/alpha/mp/obj?uploadId=$UP" --data-file "$W/bigxml"
expect_s3 "complete with 3 MiB of XML: 400 MaxMessageLengthExceeded" 400 MaxMessageLengthExceeded
cpl '<!DOCTYPE x [<!ENTITY a "aaaa">]><CompleteMultipartUpload/>'
expect_s3 "complete with a DTD: 400 MalformedXML" 400 MalformedXML
cpl '<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;"><!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;">]><CompleteMultipartUpload>&c;</CompleteMultipartUpload>'
expect_s3 "complete with entity expansion (billion laughs): 400 MalformedXML" 400 MalformedXML
s3req GET /alpha/mp/obj
expect_s3 "nothing was stored by the failed completes" 404 NoSuchKey
cpl "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>$E1</ETag></Part><Part><PartNumber>2</PartNumber><ETag>$E2</ETag></Part></CompleteMultipartUpload>"
expect_eq "the right complete: 200" "$CODE" 200
s3req GET /alpha/mp/obj
check "the object is part 1 then part 2" cmp -s "$T_SCRATCH/s3body" <(cat "$W/p5m" "$W/f1k")
cpl "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>$E1</ETag></Part></CompleteMultipartUpload>"
expect_s3 "completing it again: 404 NoSuchUpload" 404 NoSuchUpload
s3req POST "/alpha/mp/small?uploads"
UP2=$(sed -n 's|.*<UploadId>\([^<]*\)</UploadId>.*|\1|p' <<<"$BODY")
s3req PUT "/alpha/mp/small?partNumber=1&uploadId=$UP2" --data-file "$W/f1k"
S1=$(etag_of)
s3req PUT "/alpha/mp/small?partNumber=2&uploadId=$UP2" --data-file "$W/f1k"
S2=$(etag_of)
s3req POST "/alpha/mp/small?uploadId=$UP2" --data "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>$S1</ETag></Part><Part><PartNumber>2</PartNumber><ETag>$S2</ETag></Part></CompleteMultipartUpload>"
expect_s3 "a part under 5 MiB that is not the last: 400 EntityTooSmall" 400 EntityTooSmall
s3req GET "/alpha?uploads"
check "ListMultipartUploads shows it" grep -q "$UP2" "$T_SCRATCH/s3body"
s3req DELETE "/alpha/mp/small?uploadId=$UP2"
expect_eq "abort: 204" "$CODE" 204
s3req GET "/alpha/mp/small?uploadId=$UP2"
expect_s3 "an aborted upload is gone: 404 NoSuchUpload" 404 NoSuchUpload
s3req DELETE "/alpha/mp/small?uploadId=$UP2"
expect_s3 "aborting it again: 404 NoSuchUpload" 404 NoSuchUpload

# ---- DeleteObjects, DeleteBucket -------------------------------------------------------
s3req POST "/alpha?delete" --data "<Delete><Object><Key>dir/one</Key></Object></Delete>"
expect_s3 "DeleteObjects without Content-MD5: 400 InvalidRequest" 400 InvalidRequest
md5b64() { python3 -c 'import hashlib,base64,sys; print(base64.b64encode(hashlib.md5(sys.argv[1].encode()).digest()).decode())' "$1"; }
X='<Delete><Object><Key>dir/one</Key>'
s3req POST "/alpha?delete" -H "Content-MD5: $(md5b64 "$X")" --data "$X"
expect_s3 "DeleteObjects with malformed XML: 400 MalformedXML" 400 MalformedXML
X="<Delete>$(for i in $(seq 1001); do printf '<Object><Key>k%d</Key></Object>' "$i"; done)</Delete>"
s3req POST "/alpha?delete" -H "Content-MD5: $(md5b64 "$X")" --data "$X"
expect_s3 "DeleteObjects with 1001 keys: 400 MalformedXML" 400 MalformedXML
X='<Delete><Object><Key>dir/one</Key></Object></Delete>'
s3req POST "/alpha?delete" -H "Content-MD5: 1B2M2Y8AsgTpgAmY7PhCfg==" --data "$X"
expect_s3 "DeleteObjects whose Content-MD5 does not match: 400 BadDigest" 400 BadDigest
s3req GET /alpha/dir/one
expect_eq "the refused deletes deleted nothing" "$CODE" 200
s3req DELETE /alpha
expect_s3 "deleting a bucket that is not empty: 409 BucketNotEmpty" 409 BucketNotEmpty
s3req DELETE /nosuchbucket/key
expect_s3 "deleting in an unknown bucket: 404 NoSuchBucket" 404 NoSuchBucket
s3req GET /alpha/bad-sha
expect_s3 "none of the refused uploads was stored" 404 NoSuchKey
s3req GET "/alpha?list-type=2&prefix=bad"
check "and none is listed" not grep -qa "<Key>" "$T_SCRATCH/s3body"
s3req GET /alpha/dir/one
check "the first object is intact" bash -c "cmp -s '$T_SCRATCH/s3body' '$W/f1k' && grep -qi '^etag: $E_ONE' '$T_SCRATCH/s3hdr'"

# ---- links: tampering, expiry, revocation ------------------------------------------------
KEY=$ONE_KEY
api POST /v1/links -d '{"bucket":"alpha","key":"dir/one","expires_in":600}'
L=$(jf 'j["url"]') LID=$(jf 'j["id"]')
code=$(curl -s -o /dev/null -w '%{http_code}' "$L")
expect_eq "a link: 200" "$code" 200
for t in "${L/dir\/one/dir\/two}" "${L/127.0.0.1/localhost}" "${L/X-Amz-Expires=600/X-Amz-Expires=6000}" \
         "${L/x-husk-link=$LID/x-husk-link=lffff}" "${L/X-Amz-Signature=/X-Amz-Signature=0}"; do
  code=$(curl -s -o "$T_SCRATCH/s3body" -w '%{http_code}' "$t")
  check "a tampered link is refused (403, or 400 when no longer well-formed)" bash -c "[ $code = 403 ] || [ $code = 400 ]"
done
code=$(curl -s -o /dev/null -w '%{http_code}' -X PUT --data x "$L")
expect_eq "a link used to PUT: 403" "$code" 403
code=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "$L")
expect_eq "a link used to DELETE: 403" "$code" 403
s3req GET /alpha/dir/one
expect_eq "the object is still there" "$CODE" 200
api POST /v1/links -d '{"bucket":"alpha","key":"dir/one","expires_in":1}'
L1=$(jf 'j["url"]')
sleep 2
code=$(curl -s -o "$T_SCRATCH/s3body" -w '%{http_code}' "$L1")
check "an expired link: 403 AccessDenied" bash -c "[ $code = 403 ] && grep -q 'Request has expired' '$T_SCRATCH/s3body'"
api DELETE "/v1/links/$LID"
code=$(curl -s -o /dev/null -w '%{http_code}' "$L")
expect_eq "a revoked link: 403" "$code" 403
for bad in '{"bucket":"alpha","key":"dir/one","expires_in":0}' '{"bucket":"alpha","key":"dir/one","expires_in":-5}' \
           '{"bucket":"alpha","key":"dir/one","expires_in":"1h"}' '{"bucket":"alpha"}' '{"key":"x"}' \
           '{"bucket":"alpha","key":"dir/one","filename":"a/b"}' '{"bucket":"alpha","key":"dir/one","filename":"a\nb"}' \
           '{"bucket":"alpha","key":"dir/one","extra":1}' 'not json'; do
  api POST /v1/links -d "$bad"
  expect_code "POST /v1/links $bad: 400" 400
done
api POST /v1/links -d '{"bucket":"Bad_Name","key":"k"}'
check "a link in an invalid bucket: 4xx" [ "${CODE:0:1}" = 4 ]
api GET /v1/links/l_nope/access
expect_code "the access log of an unknown link: 404" 404
api GET "/v1/links/$LID/access"
expect_eq "the log has the valid fetch only" "$(jf '[a["status"] for a in j["accesses"]]')" "[200]"
api GET "/v1/links/$LID"
check "the refused ones are counted on the link" [ "$(jf 'j["denied_fetches"]')" -ge 5 ]
# Paging needs a longer log: a fresh link fetched five times.
api POST /v1/links -d '{"bucket":"alpha","key":"dir/one","expires_in":600}'
L=$(jf 'j["url"]') LID=$(jf 'j["id"]')
for _ in 1 2 3 4 5; do curl -s -o /dev/null "$L"; done
api GET "/v1/links/$LID/access"
n_all=$(jf 'len(j["accesses"])')
expect_eq "five valid fetches, five records" "$n_all" 5
api GET "/v1/links/$LID/access?limit=3"
expect_eq "the access log pages: limit=3 gives 3" "$(jf 'len(j["accesses"])')" 3
nx=$(jf 'j["next_after"]')
api GET "/v1/links/$LID/access?limit=1000&after=$nx"
expect_eq "and next_after continues where the page ended" "$(( $(jf 'len(j["accesses"])') + 3 ))" "$n_all"
api GET "/v1/links/$LID/access?limit=0"
expect_code "limit=0: 400" 400

# ---- a client that hangs up mid-upload ---------------------------------------------------
head -c $((32 * 1024 * 1024)) /dev/urandom >"$W/f32m"
curl -s -o /dev/null --max-time 1 --limit-rate 4M --aws-sigv4 "aws:amz:us-east-1:s3" --user "$AK:$SK" \
  -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -T "$W/f32m" "$S3/alpha/aborted"
check "an upload the client abandons leaves no temporary file" wait_for 20 bash -c "[ \$(find '$DATA/storage/tmp' -type f | wc -l) = 0 ]"
s3req GET /alpha/aborted
expect_s3 "and no object" 404 NoSuchKey

check "no temporary files are left" [ "$(store_files tmp)" = 0 ]
check "the daemon is alive after all of it" healthy
serve_stop
expect_eq "the daemon stops cleanly" "${SERVE_RC:-x}" 0
serve_finish
