#!/bin/bash
# The data disk and box -> store copies are bounded before bytes are
# written: a sparse box file is refused (not read out in full), a box tree
# cannot put more into the store than the box holds, and the data
# directory's disk keeps a reserve (--data-reserve) that no object write
# (S3 PUT, multipart part, transfers, links) may use.  The data directory
# is a small tmpfs this test mounts (and unmounts).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"
. "$(dirname "$0")/s3.bash"

MNT=$T_SCRATCH/mnt
mkdir -p "$MNT"
if ! mount -t tmpfs -o size=96m,mode=0700 husk-test-space "$MNT"; then
  not_ok "a tmpfs for the data directory"
  exit 1
fi
cleanup_mnt() {
  serve_cleanup
  umount -l "$MNT" 2>/dev/null
  rm -rf "$T_SCRATCH"
}
on_exit cleanup_mnt
DATA=$MNT/data
W=$T_SCRATCH/w
mkdir -p "$W"
free_bytes() { echo $(($(stat -f -c '%a * %S' "$MNT"))); }

if ! s3_start --data-reserve 40M || ! s3_creds space; then
  not_ok "the daemon starts on a 96 MiB data disk with a 40 MiB reserve"
  serve_finish
  exit 1
fi
ok "the daemon starts on a 96 MiB data disk with a 40 MiB reserve"
KEY=$TKEY
head -c $((4 * 1024 * 1024)) /dev/urandom >"$W/f4m"
head -c $((60 * 1024 * 1024)) /dev/urandom >"$W/f60m"
s3req PUT /spc
expect_eq "a bucket" "$CODE" 200
s3req PUT /spc/small --data-file "$W/f4m"
expect_eq "4 MiB fit" "$CODE" 200
s3req PUT /spc/big --data-file "$W/f60m"
expect_s3 "60 MiB (announced) would eat into the reserve: 507 InsufficientStorage" 507 InsufficientStorage
check "the error says why" grep -q "reserve" <<<"$BODY"
s3req PUT /spc/big2 --data-file "$W/f60m" --chunked 1048576
expect_s3 "the same in aws-chunked frames: refused (507) as it goes" 507 InsufficientStorage
check "no temporary files are left" [ "$(store_files tmp)" = 0 ]
check "and the reserve is intact" [ "$(free_bytes)" -ge $((40 * 1024 * 1024)) ]
UP=$(AWS_ACCESS_KEY_ID=$AK AWS_SECRET_ACCESS_KEY=$SK awsc s3api create-multipart-upload --bucket spc --key mp --query UploadId --output text)
s3req PUT "/spc/mp?partNumber=1&uploadId=$UP" --data-file "$W/f60m"
expect_s3 "a 60 MiB multipart part: 507" 507 InsufficientStorage

# Fill the disk to the reserve from outside: then nothing more is written.
avail=$(free_bytes)
fill=$((avail - 40 * 1024 * 1024 + 1024 * 1024))
[ "$fill" -gt 0 ] && head -c "$fill" /dev/zero >"$MNT/filler"
s3req PUT /spc/tiny --data "x"
expect_s3 "with the disk at its reserve even 1 byte is refused: 507" 507 InsufficientStorage
api POST /v1/links -d '{"bucket":"spc","key":"small"}'
expect_code "and a link: 507" 507
rm -f "$MNT/filler"
s3req PUT /spc/tiny --data "x"
expect_eq "once space is back, writes work again" "$CODE" 200
api POST /v1/links -d '{"bucket":"spc","key":"small"}'
expect_code "and links" 201

# Box -> store: a sparse file of 5 GiB apparent size (0 blocks) is refused
# before anything is read; a tree holding one is archived with its holes
# (and could not pass what the box holds on disk anyway).
if new_box; then
  ok "a box"
  api POST "/v1/sandboxes/$BOX/exec" -d '{"cmd":["sh","-c","mkdir -p /workspace/t && truncate -s 5G /workspace/t/sparse && echo real >/workspace/t/real && head -c 100000 /dev/urandom >/workspace/dense"]}'
  expect_code "a sparse 5 GiB file in the box" 200
  api POST "/v1/sandboxes/$BOX/store" -d '{"path":"/workspace/t/sparse","bucket":"spc","key":"sparse"}'
  expect_code "storing it: refused (413)" 413
  check "saying it is sparse" grep -q "sparse" <<<"$BODY"
  api POST "/v1/sandboxes/$BOX/store" -d '{"path":"/workspace/t","bucket":"spc","key":"t.tar"}'
  expect_code "the tree holding it is stored" 201
  check "with the holes kept as holes (not 5 GiB of zeros)" [ "$(jf 'j["size"]')" -lt 1048576 ]
  check "no temporary files are left" [ "$(store_files tmp)" = 0 ]
  check "and the reserve is intact" [ "$(free_bytes)" -ge $((40 * 1024 * 1024)) ]
  api POST "/v1/sandboxes/$BOX/store" -d '{"path":"/workspace/dense","bucket":"spc","key":"dense"}'
  expect_code "a plain file is stored" 201
  expect_eq "whole" "$(jf 'j["size"]')" 100000
  api DELETE "/v1/sandboxes/$BOX"
else
  not_ok "a box ($CODE $BODY)"
fi
serve_stop

# With a quota, a box file is checked against it before a byte is written.
DATA=$MNT/data-quota
s3_start --storage-quota 1M --data-reserve 0 && s3_creds quota
KEY=$TKEY
if new_box; then
  api POST "/v1/sandboxes/$BOX/exec" -d '{"cmd":["sh","-c","head -c 2000000 /dev/urandom >/workspace/two"]}'
  api POST "/v1/sandboxes/$BOX/store" -d '{"path":"/workspace/two","bucket":"qb1","key":"two"}'
  expect_code "2 MB against a 1 MiB quota: 403" 403
  check "no temporary files are left" [ "$(store_files tmp)" = 0 ]
  api DELETE "/v1/sandboxes/$BOX"
else
  not_ok "a box ($CODE $BODY)"
fi
serve_stop
serve_finish
