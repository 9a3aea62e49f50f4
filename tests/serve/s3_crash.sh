#!/bin/bash
# SIGKILL at any moment: every object is complete with its right ETag or
# absent, acknowledged writes survive, and the next start removes what an
# interrupted write left.  Also: the store's secrets are sealed at rest.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"
. "$(dirname "$0")/s3.bash"

W=$T_SCRATCH/w
mkdir -p "$W"
if ! s3_start || ! s3_creds crash; then
  not_ok "the daemon starts with an S3 listener"
  serve_finish
  exit 1
fi
ok "the daemon starts"
head -c 1024 /dev/urandom >"$W/f1k"
head -c $((64 * 1024 * 1024)) /dev/urandom >"$W/f64m"
head -c $((20 * 1024 * 1024)) /dev/urandom >"$W/f20m"
head -c $((5 * 1024 * 1024)) /dev/urandom >"$W/p5m"
awsc s3 mb s3://keep >/dev/null
awsc s3 cp "$W/f1k" s3://keep/obj
E_OLD=$(awsc s3api head-object --bucket keep --key obj --query ETag --output text)
check "an acknowledged object" [ -n "$E_OLD" ]
UP=$(awsc s3api create-multipart-upload --bucket keep --key mp --query UploadId --output text)
EP=$(awsc s3api upload-part --bucket keep --key mp --upload-id "$UP" --part-number 1 --body "$W/p5m" --query ETag --output text)
check "an acknowledged part of an unfinished upload" [ -n "$EP" ]

restart() {
  serve_kill9
  s3_start
}

# A slow overwrite of obj (64 MiB at 16 MiB/s), killed in the middle.
curl -s -o /dev/null --limit-rate 16M --aws-sigv4 "aws:amz:us-east-1:s3" --user "$AK:$SK" \
  -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" -T "$W/f64m" "$S3/keep/obj" &
CPID=$!
check "the overwrite is under way (a temporary file grows)" wait_for 20 bash -c "[ \$(find '$DATA/storage/tmp' -type f -size +1M | wc -l) -ge 1 ]"
check "the daemon is killed mid-upload" restart
wait "$CPID" 2>/dev/null
E_NOW=$(awsc s3api head-object --bucket keep --key obj --query ETag --output text 2>&1)
expect_eq "after the restart the object is the old one, same ETag" "$E_NOW" "$E_OLD"
rm -f "$W/out"
awsc s3 cp s3://keep/obj "$W/out"
check "with the old bytes" cmp -s "$W/out" "$W/f1k"
check "the interrupted upload's temporary file was removed at start" [ "$(store_files tmp)" = 0 ]
check "the start said so" grep -q "removed .* unused file" "$SERVE_LOG"
np=$(awsc s3api list-parts --bucket keep --key mp --upload-id "$UP" --query 'length(Parts)' 2>&1)
expect_eq "the acknowledged part survived" "$np" 1
E2=$(awsc s3api upload-part --bucket keep --key mp --upload-id "$UP" --part-number 2 --body "$W/f1k" --query ETag --output text)
awsc s3api complete-multipart-upload --bucket keep --key mp --upload-id "$UP" \
  --multipart-upload "{\"Parts\":[{\"PartNumber\":1,\"ETag\":$EP},{\"PartNumber\":2,\"ETag\":$E2}]}" >/dev/null 2>&1
rm -f "$W/out"
awsc s3 cp s3://keep/mp "$W/out"
check "and the upload completes after the restart" cmp -s "$W/out" <(cat "$W/p5m" "$W/f1k")
check "its part files are gone" [ "$(store_files parts)" = 0 ]

# Random moments: a 20 MiB awscli upload (multipart) killed after a random
# delay, several times.  Whatever is listed must be whole.
for round in 1 2 3 4; do
  "$AWS" --endpoint-url "$S3" s3 cp --only-show-errors "$W/f20m" "s3://keep/r$round" >/dev/null 2>&1 &
  APID=$!
  sleep "0.$((RANDOM % 9 + 1))"
  restart >/dev/null
  kill "$APID" 2>/dev/null
  wait "$APID" 2>/dev/null
  if awsc s3api head-object --bucket keep --key "r$round" >/dev/null 2>&1; then
    rm -f "$W/out"
    awsc s3 cp "s3://keep/r$round" "$W/out"
    check "round $round: the object is listed and whole" cmp -s "$W/out" "$W/f20m"
  else
    ok "round $round: the object is absent"
  fi
  check "round $round: no temporary files after the start" [ "$(store_files tmp)" = 0 ]
done
objs=$(find "$DATA/storage/objects" -type f | wc -l)
rows=$(awsc s3api list-objects-v2 --bucket keep --query 'length(Contents)' 2>&1)
expect_eq "every object file on disk is named by a row (no orphans)" "$objs" "$rows"

# Secrets at rest: the database alone does not hold them.
check "the master key file is private" bash -c "[ \$(stat -c %a '$DATA/storage/master.key') = 600 ]"
check "the S3 secret is not in the database files" not grep -qaF "$SK" "$DATA"/husk.db*
mv "$DATA/storage/master.key" "$W/mk"
serve_kill9
serve_start --s3-listen 127.0.0.1:0 >/dev/null 2>&1
S3=$(sed -n 's|^husk: S3 listening on \(http://127.0.0.1:[0-9]*\) .*|\1|p' "$SERVE_LOG" | tail -n1)
check "with another master key the old secrets do not open (refused, not crashed)" \
  bash -c "! '$AWS' --endpoint-url '$S3' s3 ls 2>/dev/null"
check "the daemon still answers" healthy
serve_stop

# A per-tenant storage quota (a daemon on a fresh data directory).
DATA=$T_SCRATCH/data-quota
s3_start --storage-quota 1M && s3_creds quota
head -c 600000 /dev/urandom >"$W/f600k"
s3req PUT /qbk
s3req PUT /qbk/one --data-file "$W/f600k"
expect_eq "with --storage-quota 1M, 600 kB fit" "$CODE" 200
s3req PUT /qbk/two --data-file "$W/f600k"
expect_s3 "another 600 kB do not: 403 QuotaExceeded" 403 QuotaExceeded
s3req PUT /qbk/one --data-file "$W/f600k"
expect_eq "replacing the first object does (its old version is freed)" "$CODE" 200
check "awscli sees the refusal too" bash -c "! '$AWS' --endpoint-url '$S3' s3 cp '$W/f600k' s3://qbk/three 2>'$W/e' && grep -q QuotaExceeded '$W/e'"
check "no temporary files are left" [ "$(store_files tmp)" = 0 ]
serve_stop
serve_finish
