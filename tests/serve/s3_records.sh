#!/bin/bash
# Records the S3 front acknowledges are durable before its reply: a SIGKILL
# the moment a client has its reply loses no audit record of a bucket
# create / delete / multi-object delete and no access record of a link
# fetch.  And refused link fetches (forged, revoked, unknown) are counted,
# not stored one by one, and rate-limited per source address, without
# ever refusing a valid fetch.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"
. "$(dirname "$0")/s3.bash"

if ! s3_start || ! s3_creds rec; then
  not_ok "the daemon starts with an S3 listener"
  serve_finish
  exit 1
fi
ok "the daemon starts"
DB=$DATA/husk.db
KEY=$TKEY

# The daemon was SIGKILLed by the client: reap it and start again.
restarted() {
  wait "$SPID" 2>/dev/null
  SPID=""
  s3_start
}
audited() { # ACTION BUCKET
  api GET "/v1/audit?limit=1000"
  [ "$(jf "len([a for a in j['records'] if a['action'] == '$1' and a['detail'].startswith('bucket=$2 ') and a['outcome'] == 'ok'])")" = 1 ]
}

for i in 1 2 3 4 5; do
  s3req PUT "/mk$i" --kill "$SPID"
  expect_eq "round $i: bucket create acknowledged" "$CODE" 200
  check "round $i: the daemon restarts after the kill" restarted
  check "round $i: its audit record survived" audited s3.bucket_create "mk$i"

  s3req PUT "/rm$i" >/dev/null
  s3req DELETE "/rm$i" --kill "$SPID"
  expect_eq "round $i: bucket delete acknowledged" "$CODE" 204
  restarted >/dev/null
  check "round $i: its audit record survived" audited s3.bucket_delete "rm$i"

  s3req PUT "/mk$i/k" --data x >/dev/null
  s3req POST "/mk$i?delete" --data '<Delete><Object><Key>k</Key></Object></Delete>' \
    -H "Content-MD5: $(printf '%s' '<Delete><Object><Key>k</Key></Object></Delete>' | openssl md5 -binary | base64)" \
    --kill "$SPID"
  expect_eq "round $i: multi-object delete acknowledged" "$CODE" 200
  restarted >/dev/null
  check "round $i: its audit record survived" audited s3.delete_objects "mk$i"

  s3req PUT "/mk$i/obj" --data "hello $i" >/dev/null
  api POST /v1/links -d "{\"bucket\":\"mk$i\",\"key\":\"obj\"}"
  LID=$(jf 'j["id"]')
  LURL=$(jf 'j["url"]')
  CODE=$(python3 "$S3REQ" GET "$LURL" --raw --kill "$SPID" 2>/dev/null)
  expect_eq "round $i: link fetch answered" "$CODE" 200
  restarted >/dev/null
  api GET "/v1/links/$LID/access"
  expect_eq "round $i: its access record survived" "$(jf 'len(j["accesses"])')" 1
done

# ---- refused link fetches ----
s3req PUT /lnk >/dev/null
s3req PUT /lnk/obj --data "linked" >/dev/null
api POST /v1/links -d '{"bucket":"lnk","key":"obj"}'
LID=$(jf 'j["id"]')
LURL=$(jf 'j["url"]')
LONG_UA=$(head -c 8000 /dev/zero | tr '\0' a)
CODE=$(python3 "$S3REQ" GET "$LURL" --raw -H "User-Agent: $LONG_UA" 2>/dev/null)
expect_eq "a valid fetch: 200" "$CODE" 200
api GET "/v1/links/$LID/access"
expect_eq "it is recorded" "$(jf 'len(j["accesses"])')" 1
check "with its User-Agent cut" [ "$(jf 'len(j["accesses"][0]["user_agent"])')" -lt 300 ]
rows() { sqlite3 "file:$DB?mode=ro" "SELECT count(*) FROM link_access"; }
global() { sqlite3 "file:$DB?mode=ro" "SELECT coalesce((SELECT count FROM link_denied), 0)"; }
R0=$(rows)

FORGED=$(sed 's/X-Amz-Signature=[0-9a-f]*/X-Amz-Signature=0000000000000000000000000000000000000000000000000000000000000000/' <<<"$LURL")
CODE=$(python3 "$S3REQ" GET "$FORGED" --raw -H "User-Agent: forged" 2>/dev/null)
expect_eq "a forged fetch: 403" "$CODE" 403
api GET "/v1/links/$LID"
expect_eq "it is counted on the link" "$(jf 'j["denied_fetches"]')" 1
check "and dated" [ -n "$(jf 'j["last_denied_at"]')" ]
expect_eq "but not stored as an access" "$(rows)" "$R0"
G0=$(global)
UNKNOWN=$(sed "s/x-husk-link=$LID/x-husk-link=lnosuchlink/" <<<"$FORGED")
CODE=$(python3 "$S3REQ" GET "$UNKNOWN" --raw 2>/dev/null)
expect_eq "a fetch naming no link: 403" "$CODE" 403
expect_eq "it goes to the global counter" "$(global)" "$((G0 + 1))"
expect_eq "nothing stored row by row" "$(rows)" "$R0"

# A flood of forged fetches from one address: past the budget, 429 and
# not even counted.
CODES=$(python3 "$S3REQ" GET "$FORGED" --raw --repeat 100 2>/dev/null)
n403=$(tr ' ' '\n' <<<"$CODES" | grep -c '^403$')
n429=$(tr ' ' '\n' <<<"$CODES" | grep -c '^429$')
check "a flood of 100 forged fetches is cut off with 429 ($n403 x 403, $n429 x 429)" [ "$n429" -gt 0 ]
expect_eq "every one of them got 403 or 429" "$((n403 + n429))" 100
api GET "/v1/links/$LID"
expect_eq "only the refusals within the budget are counted" "$(jf 'j["denied_fetches"]')" "$((n403 + 1))"
expect_eq "and no access row was added" "$(rows)" "$R0"

# Only refusals spend the budget: a valid fetch from an address whose
# budget is spent, or while floods from many addresses spend the shared
# one, is served.  The flooding address alternates forged and valid
# fetches, so each of its valid ones comes while its budget is empty.
S0=$(rows)
read -r f403 f429 fother v200 vother < <(python3 "$(dirname "$0")/link_flood.py" "$FORGED" "$LURL" \
  --sources 30 --per-source 50 2>"$T_SCRATCH/flood.err")
check "a flood of 1500 forged fetches from 30 addresses is cut off with 429 ($f403 x 403, $f429 x 429)" \
  [ "${f429:-0}" -gt 0 ]
expect_eq "every forged fetch got 403 or 429" "$((${f403:-0} + ${f429:-0}))" 1500
check "valid fetches were sent during the flood (${v200:-0})" [ "${v200:-0}" -ge 70 ]
expect_eq "none of them was refused" "${vother:-x}" 0
expect_eq "each one is recorded" "$(($(rows) - S0))" "${v200:-0}"

# A revoked link with its genuine signature is refused and counted too.
api DELETE "/v1/links/$LID"
R0=$(rows)
CODE=$(python3 "$S3REQ" GET "$LURL" --raw 2>/dev/null)
check "a revoked link: refused ($CODE)" [ "$CODE" = 403 -o "$CODE" = 429 ]
expect_eq "no access row for it" "$(rows)" "$R0"
serve_stop
serve_finish
