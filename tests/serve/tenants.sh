#!/bin/bash
# A tenant's credentials and its end: S3 keys record the API key that minted
# them and are revoked with it; the admin lists and revokes a tenant's S3
# keys; DELETE /v1/tenants/{id} removes the tenant with its boxes (killed),
# objects (their files too), buckets, links, secrets, keys and templates
# (their layers too, but one another template has), audited without
# secrets; a daemon killed midway finishes the deletion at start.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"
. "$(dirname "$0")/s3.bash"

if ! s3_start; then
  not_ok "the daemon starts with an S3 listener"
  serve_finish
  exit 1
fi

# Images: a layer every one has, and one of each's own.
L=$T_SCRATCH/layers
mkdir -p "$L/common" "$L/one" "$L/two" "$L/three"
for d in common one two three; do echo "$d" >"$L/$d/$d"; done
for d in one two three; do
  python3 "$(dirname "$0")/../template/mkimage.py" "$T_SCRATCH/$d.tar" --layer "$L/common" \
    --layer "$L/$d" || not_ok "mkimage $d"
done
upload() { # FILE NAME: POST /v1/templates?name=NAME under $KEY
  api POST "/v1/templates?name=$2" --data-binary "@$1" -H 'Content-Type: application/x-tar'
}
layers_of() { # NAME: the layer directories of template NAME (as $KEY sees it)
  api GET "/v1/templates/$1"
  jf '" ".join("'"$DATA"'/templates/layers/" + l["diff_id"][7:] for l in j["layers"])'
}
all_there() { local d; for d in "$@"; do [ -d "$d" ] || return 1; done; }

key_id_of() { # TENANT: the id of its first API key
  local save=$KEY
  KEY=$ADMIN
  api GET "/v1/tenants/$1"
  KEY=$save
  jf 'j["keys"][0]["id"]'
}

# ---- S3 keys follow the API key that minted them --------------------------
check "tenant one gets S3 keys" s3_creds one
ONE=$TID ONE_KEY=$TKEY ONE_KID=$(key_id_of "$TID")
AK1=$AK SK1=$SK
s3req PUT /one-bkt
expect_code "its S3 key works" 200
KEY=$ONE_KEY
api GET /v1/s3-keys
expect_eq "the tenant's list says which API key minted it" \
  "$(jf "[k['api_key_id'] for k in j['keys'] if k['access_key_id'] == '$AK1']")" "[\"$ONE_KID\"]"
KEY=$ADMIN
api GET "/v1/tenants/$ONE/s3-keys"
expect_code "admin: GET /v1/tenants/{id}/s3-keys" 200
expect_eq "admin: the tenant's S3 keys, minted by its API key" \
  "$(jf "[k['api_key_id'] for k in j['keys'] if k['access_key_id'] == '$AK1']")" "[\"$ONE_KID\"]"
check "admin: no secret in the listing" not grep -qF "$SK1" <<<"$BODY"
api DELETE "/v1/tenants/$ONE/s3-keys/$AK1"
expect_code "admin: DELETE /v1/tenants/{id}/s3-keys/{key}" 204
s3req GET /one-bkt
expect_s3 "an S3 key the admin revoked is refused" 403 InvalidAccessKeyId
api DELETE "/v1/tenants/$ONE/s3-keys/HKNOSUCHKEY000000000"
expect_code "admin: revoking an unknown S3 key: 404" 404
api GET "/v1/tenants/t_000000000000000000000000/s3-keys"
expect_code "admin: the S3 keys of an unknown tenant: 404" 404

# A second S3 key, then the API key that minted it is revoked.
KEY=$ONE_KEY
api POST /v1/s3-keys
AK=$(jf 'j["access_key_id"]') SK=$(jf 'j["secret_access_key"]')
s3req GET /one-bkt
expect_code "a new S3 key works" 200
KEY=$ADMIN
api POST "/v1/tenants/$ONE/keys"
ONE_KEY2=$(jf 'j["key"]')
api DELETE "/v1/tenants/$ONE/keys/$ONE_KID"
expect_code "admin revokes the API key" 204
s3req GET /one-bkt
expect_s3 "the S3 key it minted is revoked with it" 403 InvalidAccessKeyId
KEY=$ONE_KEY2
api POST /v1/s3-keys
AK=$(jf 'j["access_key_id"]') SK=$(jf 'j["secret_access_key"]')
s3req GET /one-bkt
expect_code "an S3 key of the tenant's other API key still works" 200

# ---- DELETE /v1/tenants/{id} ----------------------------------------------
check "tenant two gets S3 keys" s3_creds two
TWO=$TID TWO_KEY=$TKEY TWO_AK=$AK
KEY=$TWO_KEY
check "tenant two makes a box" new_box
TWO_BOX=$BOX
api POST "/v1/sandboxes/$TWO_BOX/exec" -d '{"cmd":["sleep","1011"],"background":true}'
expect_code "a process runs in its box" 201
check "the process is on the host" wait_for 10 has_box_proc "$TWO_BOX" "sleep 1011"
SECRET="s3cr3t-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
api PUT /v1/secrets/TOKEN -d "{\"value\":\"$SECRET\"}"
expect_code "tenant two stores a secret" 200
FILES_BEFORE=$(store_files objects)
s3req PUT /two-bkt
for k in a b c; do s3req PUT "/two-bkt/$k" --data "object $k"; done
expect_code "tenant two stores objects" 200
check "their files are on disk" [ "$(store_files objects)" -ge $((FILES_BEFORE + 3)) ]
api POST /v1/links -d '{"bucket":"two-bkt","key":"a","expires_in":600}'
expect_code "tenant two makes a link" 201
LINK_URL=$(jf 'j["url"]')
check "the link serves the object" bash -c "curl -sf '$LINK_URL' | grep -q 'object a'"
upload "$T_SCRATCH/two.tar" two-tpl
expect_code "tenant two imports a template" 201
read -r TWO_COMMON TWO_OWN <<<"$(layers_of two-tpl)"
check "its layers are on disk" all_there "$TWO_COMMON" "$TWO_OWN"
# Tenant one's object and template must survive tenant two's deletion.
KEY=$ONE_KEY2
upload "$T_SCRATCH/one.tar" one-tpl
expect_code "tenant one imports a template with a layer tenant two's has" 201
ONE_LAYERS=$(layers_of one-tpl)
check "the layer both have is stored once" [ "${ONE_LAYERS%% *}" = "$TWO_COMMON" ]
AK=$AK1 SK=$SK1
KEY=$ONE_KEY2
api POST /v1/s3-keys
AK=$(jf 'j["access_key_id"]') SK=$(jf 'j["secret_access_key"]')
s3req PUT /one-bkt/keep --data "keep me"
expect_code "tenant one stores an object" 200
ONE_AK=$AK ONE_SK=$SK

KEY=$TWO_KEY
api DELETE "/v1/tenants/$TWO"
expect_code "a tenant key cannot delete a tenant" 403
KEY=$ADMIN
api DELETE "/v1/tenants/$TWO"
expect_code "admin: DELETE /v1/tenants/{id}" 204
api GET "/v1/tenants/$TWO"
expect_code "the tenant is gone" 404
api DELETE "/v1/tenants/$TWO"
expect_code "deleting it again: 404" 404
KEY=$TWO_KEY
api GET /v1/sandboxes
expect_code "its API key no longer works" 401
check "its box is gone from the host (processes, cgroups)" wait_for 20 box_gone "$TWO_BOX"
check "its objects' files are removed" [ "$(store_files objects)" -eq $((FILES_BEFORE + 1)) ]
check "its link is refused" not bash -c "curl -sf '$LINK_URL' >/dev/null"
check "its template's own layer is removed from disk" [ ! -e "$TWO_OWN" ]
AK=$ONE_AK SK=$ONE_SK
s3req GET /one-bkt/keep
expect_code "the other tenant's object is intact" 200
KEY=$ONE_KEY2
api GET /v1/templates/one-tpl
expect_code "the other tenant's template is intact" 200
# shellcheck disable=SC2086
check "... and every layer of it, the one tenant two had too" all_there $ONE_LAYERS
check "the database has no template of the deleted tenant" python3 - "$DATA/husk.db" "$TWO" <<'EOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
n = db.execute("SELECT (SELECT count(*) FROM templates WHERE tenant_id = ?1) + "
               "(SELECT count(*) FROM build_cache WHERE tenant_id = ?1)", (sys.argv[2],)).fetchone()[0]
sys.exit(0 if n == 0 else 1)
EOF
KEY=$ADMIN
api GET "/v1/audit?action=tenant.delete"
expect_eq "the deletion is audited" "$(jf "[[r['outcome'], r['status']] for r in j['records'] if '$TWO' in r['detail']][0]")" '["ok", 204]'
api GET "/v1/audit?tenant=$TWO&limit=1000"
check "no secret in the audit log" not grep -qF "$SECRET" <<<"$BODY"
api GET "/v1/audit?limit=1000"
check "no secret anywhere in the audit log" not grep -qF "$SECRET" <<<"$BODY"
api POST /v1/tenants -d '{"name":"two"}'
expect_code "the name is free again" 201

# ---- a deletion cut short finishes at the next start ------------------------
check "tenant three gets S3 keys" s3_creds three
THREE=$TID THREE_KEY=$TKEY
s3req PUT /three-bkt
s3req PUT /three-bkt/x --data "xxx"
KEY=$THREE_KEY
check "tenant three makes a box" new_box
THREE_BOX=$BOX
api POST "/v1/sandboxes/$THREE_BOX/exec" -d '{"cmd":["sleep","1012"],"background":true}'
check "its process runs" wait_for 10 has_box_proc "$THREE_BOX" "sleep 1012"
upload "$T_SCRATCH/three.tar" three-tpl
expect_code "tenant three imports a template" 201
read -r _ THREE_OWN <<<"$(layers_of three-tpl)"
FILES_BEFORE=$(store_files objects)
serve_kill9
# Only the first step (what the DELETE commits first) is done here, as a
# daemon killed right after it would leave it.
check "the mark of step 1 can be written offline" python3 - "$DATA/husk.db" "$THREE" <<'EOF'
import sqlite3, sys, time
db = sqlite3.connect(sys.argv[1])
now = int(time.time() * 1000)
with db:
    db.execute("UPDATE tenants SET deleted_ms = ? WHERE id = ?", (now, sys.argv[2]))
    db.execute("UPDATE api_keys SET revoked_ms = ? WHERE tenant_id = ? AND revoked_ms = 0", (now, sys.argv[2]))
    db.execute("UPDATE s3_keys SET revoked_ms = ? WHERE tenant_id = ? AND revoked_ms = 0", (now, sys.argv[2]))
EOF
if ! s3_start; then
  not_ok "the daemon restarts"
  serve_finish
  exit 1
fi
KEY=$ADMIN
api GET "/v1/tenants/$THREE"
expect_code "the restart finished the deletion: the tenant is gone" 404
check "the restart logged it" grep -q "finished deleting tenant $THREE" "$SERVE_LOG"
check "its box is gone from the host" wait_for 20 box_gone "$THREE_BOX"
check "its object file is removed" [ "$(store_files objects)" -lt "$FILES_BEFORE" ]
check "its template's own layer is removed" [ ! -e "$THREE_OWN" ]
api GET "/v1/audit?action=tenant.delete"
check "the resumed deletion is audited" grep -q "tenant=$THREE resumed at start" <<<"$BODY"

reap_boxes "$ONE_KEY2" >/dev/null
serve_stop
expect_eq "the daemon stops cleanly" "$SERVE_RC" 0
serve_finish
