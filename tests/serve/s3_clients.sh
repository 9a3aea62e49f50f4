#!/bin/bash
# The storage plane with the other real clients from Debian: s3cmd 2.3
# (ListObjects V1, SHA-256 payloads, 15 MiB multipart chunks) and rclone
# 1.60 (UNSIGNED-PAYLOAD puts, MD5 checks, V1 listing as provider Other,
# V2 with encoding-type=url as provider Minio), odd keys through every
# client, and listings past 1000 keys.  (aws-chunked bodies, which no
# Debian client sends, are in s3_hostile.sh.)
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"
. "$(dirname "$0")/s3.bash"

W=$T_SCRATCH/w
mkdir -p "$W"
if ! s3_start || ! s3_creds clients; then
  not_ok "the daemon starts with an S3 listener"
  serve_finish
  exit 1
fi
ok "the daemon starts with an S3 listener"
HP=${S3#http://}
head -c 1024 /dev/urandom >"$W/f1k"
head -c $((20 * 1024 * 1024)) /dev/urandom >"$W/f20m"

# ---- s3cmd ------------------------------------------------------------------------
cat >"$W/s3cfg" <<CFG
[default]
access_key = $AK
secret_key = $SK
host_base = $HP
host_bucket = $HP
use_https = False
bucket_location = us-east-1
signature_v2 = False
CFG
s3c() { s3cmd -c "$W/s3cfg" --no-progress "$@"; }
check "s3cmd mb" s3c mb s3://cmd >/dev/null
check "s3cmd put 1 KiB" s3c put "$W/f1k" s3://cmd/a/one >/dev/null
check "s3cmd put 20 MiB (multipart, 15 MiB chunks)" s3c put "$W/f20m" s3://cmd/big >/dev/null
s3c ls s3://cmd/ >"$W/l" 2>&1
check "s3cmd ls: the directory and the big file" bash -c "grep -q 'DIR  s3://cmd/a/' '$W/l' && grep -q '20971520  s3://cmd/big' '$W/l'"
rm -f "$W/out"
check "s3cmd get 20 MiB" s3c get s3://cmd/big "$W/out" >/dev/null
check "s3cmd get: the same bytes" cmp -s "$W/out" "$W/f20m"
s3c info s3://cmd/a/one >"$W/i" 2>&1
check "s3cmd info: size and MD5" bash -c "grep -q 'File size: 1024' '$W/i' && grep -q \"MD5 sum:   $(md5sum <"$W/f1k" | cut -c1-32)\" '$W/i'"
check "s3cmd del" s3c del s3://cmd/a/one >/dev/null
s3c ls -r s3://cmd >"$W/l" 2>&1
check "s3cmd: the deleted key is gone" not grep -q a/one "$W/l"
check "s3cmd signurl is SigV2, which we refuse" bash -c "u=\$(s3cmd -c '$W/s3cfg' signurl s3://cmd/big +300 2>/dev/null); [ \"\$(curl -s -o /dev/null -w '%{http_code}' \"\$u\")\" = 400 ]"

# ---- rclone --------------------------------------------------------------------------
cat >"$W/rclone.conf" <<CFG
[loc]
type = s3
provider = Other
access_key_id = $AK
secret_access_key = $SK
endpoint = $S3
region = us-east-1
force_path_style = true

[mio]
type = s3
provider = Minio
access_key_id = $AK
secret_access_key = $SK
endpoint = $S3
region = us-east-1
force_path_style = true
CFG
# rclone 1.60 refuses to start when AWS_CA_BUNDLE is set.
rc() { env -u AWS_CA_BUNDLE RCLONE_CONFIG="$W/rclone.conf" rclone "$@"; }
check "rclone mkdir" rc mkdir loc:rcl
check "rclone copyto 1 KiB" rc copyto "$W/f1k" loc:rcl/d/one
check "rclone copyto 20 MiB as multipart (5 MiB parts)" rc copyto "$W/f20m" loc:rcl/big --s3-upload-cutoff 6Mi --s3-chunk-size 5Mi
rc lsf -R loc:rcl >"$W/l" 2>&1
check "rclone lsf" bash -c "grep -qx big '$W/l' && grep -qx d/one '$W/l'"
check "rclone cat" bash -c "env -u AWS_CA_BUNDLE RCLONE_CONFIG='$W/rclone.conf' rclone cat loc:rcl/d/one | cmp -s - '$W/f1k'"
mkdir -p "$W/tree/d"
cp "$W/f1k" "$W/tree/d/one"
cp "$W/f20m" "$W/tree/big"
check "rclone check: sizes and hashes match" rc check "$W/tree" loc:rcl
echo x >>"$W/tree/d/one"
check "rclone check notices a difference" not rc check "$W/tree" loc:rcl
L=$(rc link loc:rcl/d/one --expire 5m 2>/dev/null)
check "rclone link: a presigned URL that serves the file" bash -c "curl -s '$L' | cmp -s - '$W/f1k'"
check "rclone purge" rc purge loc:rcl
check "the bucket is gone" bash -c "! env -u AWS_CA_BUNDLE RCLONE_CONFIG='$W/rclone.conf' rclone lsf loc: 2>/dev/null | grep -q rcl/"

# ---- odd keys through every client --------------------------------------------------
ODD='odd dir/a+b%c/ü ñ//x.txt'
check "s3cmd puts an odd key" s3c put "$W/f1k" "s3://cmd/$ODD" >/dev/null
rc lsf -R mio:cmd >"$W/l" 2>&1
check "rclone (V2, encoding-type=url) lists it exactly" grep -qxF 'odd dir/a+b%c/ü ñ//x.txt' "$W/l"
rc lsf -R loc:cmd >"$W/l" 2>&1
check "rclone (V1) lists it exactly" grep -qxF 'odd dir/a+b%c/ü ñ//x.txt' "$W/l"
rm -f "$W/out"
awsc s3 cp "s3://cmd/$ODD" "$W/out"
check "awscli reads it" cmp -s "$W/out" "$W/f1k"
check "rclone writes another" rc copyto "$W/f1k" "loc:cmd/second odd+%/ü"
s3c ls -r s3://cmd >"$W/l" 2>&1
check "s3cmd lists it" grep -qF 's3://cmd/second odd+%/ü' "$W/l"
# (rclone folds "//" in its own paths, so it reads back the key without one.)
check "rclone reads it back" bash -c "env -u AWS_CA_BUNDLE RCLONE_CONFIG='$W/rclone.conf' rclone cat 'loc:cmd/second odd+%/ü' | cmp -s - '$W/f1k'"
rm -f "$W/out"
s3c get "s3://cmd/second odd+%/ü" "$W/out" >/dev/null 2>&1
check "s3cmd reads it" cmp -s "$W/out" "$W/f1k"

# ---- more than 1000 keys: V1 and V2 pages -----------------------------------------------
mkdir -p "$W/many"
for i in $(seq 1 1105); do echo "$i" >"$W/many/k$i"; done
check "rclone uploads 1105 small files" rc copy "$W/many" loc:many --transfers 16
n=$(rc lsf loc:many 2>/dev/null | wc -l)
expect_eq "rclone (V1 markers) lists 1105" "$n" 1105
n=$(rc lsf mio:many 2>/dev/null | wc -l)
expect_eq "rclone (V2 tokens) lists 1105" "$n" 1105
n=$(s3c ls s3://many/ 2>/dev/null | wc -l)
expect_eq "s3cmd lists 1105" "$n" 1105
n=$(awsc s3 ls s3://many/ 2>/dev/null | wc -l)
expect_eq "awscli lists 1105" "$n" 1105
check "s3cmd del -r of 1105 keys (DeleteObjects)" s3c del -r --force s3://many >/dev/null
n=$(awsc s3 ls s3://many/ 2>/dev/null | wc -l)
expect_eq "all gone" "$n" 0

check "no temporary files are left" [ "$(store_files tmp)" = 0 ]
serve_stop
serve_finish
