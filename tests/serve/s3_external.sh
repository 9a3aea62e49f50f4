#!/bin/bash
# External-store mode: husk B keeps links and box transfers on an external
# S3-compatible store -- here husk A's embedded store -- signing and
# presigning itself (libcurl), with equal-size multipart parts (R2's rule)
# and every tenant's keys under its own prefix.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"
. "$(dirname "$0")/s3.bash"

W=$T_SCRATCH/w
mkdir -p "$W"
BPID=""
BURL=""
# On any exit: delete husk B's boxes through B (boxes outlive a daemon),
# stop B, then the usual cleanup of A.
b_cleanup() {
  if [ -n "$BPID" ] && [ -n "$BURL" ] && [ -f "$T_SCRATCH/boxes" ]; then
    local b k
    while read -r b k; do
      curl -s -o /dev/null --max-time 10 -X DELETE -H "Authorization: Bearer $k" "$BURL/v1/sandboxes/$b"
    done <"$T_SCRATCH/boxes"
    rm -f "$T_SCRATCH/boxes"
  fi
  [ -n "$BPID" ] && kill -9 "$BPID" 2>/dev/null
  URL=${AURL:-$URL}
  serve_cleanup
}
on_exit b_cleanup
if ! s3_start || ! s3_creds backing; then
  not_ok "husk A (the external store) starts"
  serve_finish
  exit 1
fi
ok "husk A (the external store) starts"
awsc s3 mb s3://ext >/dev/null

BLOG=$T_SCRATCH/b.log
HUSK_ADMIN_KEY=$ADMIN HUSK_STORE_ACCESS_KEY_ID=$AK HUSK_STORE_SECRET_ACCESS_KEY=$SK \
  "$HUSK" serve --listen 127.0.0.1:0 --data "$T_SCRATCH/datab" --s3-listen off \
  --store-endpoint "$S3" --store-bucket ext --store-part-size 5M 2>"$BLOG" </dev/null &
BPID=$!
check "husk B starts on the external store" wait_for 30 grep -q '^husk: links and box transfers use the external store' "$BLOG"
BURL="http://127.0.0.1:$(sed -n 's|^husk: listening on http://127.0.0.1:\([0-9]*\)$|\1|p' "$BLOG")"
AURL=$URL
URL=$BURL
check "husk B never prints the store's secret" not grep -qF "$SK" "$BLOG"
new_tenant bt1
T1=$TID K1=$TKEY
new_tenant bt2
K2=$TKEY
KEY=$K1
head -c 1024 /dev/urandom >"$W/f1k"
head -c $((12 * 1024 * 1024)) /dev/urandom >"$W/f12m"
if new_box; then
  ok "a box in husk B"
  api PUT "/v1/sandboxes/$BOX/files?path=/workspace/out/a.txt&mkdirs=1" --data-binary @"$W/f1k"
  api PUT "/v1/sandboxes/$BOX/files?path=/workspace/out/big.bin&mkdirs=1" --data-binary @"$W/f12m"
  api POST "/v1/sandboxes/$BOX/store" -d '{"path":"/workspace/out/a.txt","bucket":"exports","key":"a.txt","link":true,"filename":"A.txt"}'
  expect_code "store a box file on the external store" 201
  L=$(jf 'j["url"]')
  check "the link is presigned for the external store" grep -qF "$S3/ext/$T1/exports/a.txt?" <<<"$L"
  code=$(curl -s -D "$W/h" -o "$W/o" -w '%{http_code}' "$L")
  check "the link serves the file from the external store" bash -c "[ $code = 200 ] && cmp -s '$W/o' '$W/f1k'"
  check "with the download name" grep -qi 'Content-Disposition: attachment; filename="A.txt"' "$W/h"
  code=$(curl -s -o /dev/null -w '%{http_code}' "${L/a.txt?/b.txt?}")
  expect_eq "a tampered external link: 403" "$code" 403
  rm -f "$W/o"
  awsc s3 cp "s3://ext/$T1/exports/a.txt" "$W/o"
  check "the object is in the external bucket under the tenant's prefix" cmp -s "$W/o" "$W/f1k"
  api POST "/v1/sandboxes/$BOX/store" -d '{"path":"/workspace/out/big.bin","bucket":"exports","key":"big.bin"}'
  expect_code "store 12 MiB on the external store" 201
  et=$(jf 'j["etag"]')
  check "as a multipart upload of three parts" grep -qE '^[0-9a-f]{32}-3$' <<<"$et"
  want=$(python3 -c '
import hashlib,sys
d=open(sys.argv[1],"rb").read(); p=5*1024*1024
m=b"".join(hashlib.md5(d[i:i+p]).digest() for i in range(0,len(d),p))
print(hashlib.md5(m).hexdigest()+"-%d"%((len(d)+p-1)//p))' "$W/f12m")
  expect_eq "of equal 5 MiB parts (the ETag says so)" "$et" "$want"
  rm -f "$W/o"
  awsc s3 cp "s3://ext/$T1/exports/big.bin" "$W/o"
  check "the external copy has the same bytes" cmp -s "$W/o" "$W/f12m"
  api POST "/v1/sandboxes/$BOX/store" -d '{"path":"/workspace/out","bucket":"exports","key":"out.tar"}'
  expect_code "store a directory (tar) on the external store" 201
  api POST "/v1/sandboxes/$BOX/load" -d '{"bucket":"exports","key":"big.bin","path":"/workspace/in/big.bin"}'
  expect_code "load from the external store into the box" 200
  curl -s -H "Authorization: Bearer $KEY" "$URL/v1/sandboxes/$BOX/files?path=/workspace/in/big.bin" -o "$W/back"
  check "the box has the same bytes" cmp -s "$W/back" "$W/f12m"
  api POST "/v1/sandboxes/$BOX/load" -d '{"bucket":"exports","key":"out.tar","path":"/workspace/unp","extract":true}'
  api GET "/v1/sandboxes/$BOX/files?path=/workspace/unp/a.txt"
  check "a tar from the external store extracts into the box" cmp -s "$T_SCRATCH/body" "$W/f1k"
  api POST "/v1/sandboxes/$BOX/load" -d '{"bucket":"exports","key":"nope","path":"/workspace/x"}'
  expect_code "a missing external key: 404" 404
  api POST /v1/links -d '{"bucket":"exports","key":"big.bin","expires_in":120}'
  expect_code "POST /v1/links on the external store" 201
  code=$(curl -s -o "$W/o" -w '%{http_code}' "$(jf 'j["url"]')")
  check "that link works too" bash -c "[ $code = 200 ] && cmp -s '$W/o' '$W/f12m'"
  api POST /v1/links -d '{"bucket":"exports","key":"missing"}'
  expect_code "a link to a missing external key: 404" 404
  KEY=$K2
  if new_box; then
    api POST "/v1/sandboxes/$BOX/load" -d '{"bucket":"exports","key":"big.bin","path":"/workspace/x"}'
    expect_code "another tenant of B cannot reach tenant one's external objects" 404
    api DELETE "/v1/sandboxes/$BOX"
    sed -i "/^$BOX /d" "$T_SCRATCH/boxes"
  else
    not_ok "a second box"
  fi
  KEY=$K1
  api DELETE "/v1/sandboxes/$(head -n1 "$T_SCRATCH/boxes" | cut -d' ' -f1)"
  expect_code "the box is deleted" 200
  rm -f "$T_SCRATCH/boxes"
else
  not_ok "a box in husk B ($CODE $BODY)"
fi
check "husk B never logged the store's secret" not grep -qF "$SK" "$BLOG"
kill -TERM "$BPID"
wait "$BPID"
expect_eq "husk B stops cleanly" "$?" 0
BPID=""
URL=$AURL
serve_stop
serve_finish
