#!/bin/bash
# husk snapshot: the CLI of a running husk serve's snapshots (its HTTP
# API, the tenant's key from HUSK_API_KEY): create, list, show, restore,
# rm, and its refusals (no key, bad ids, usage, the server's own errors).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"

if ! serve_start; then
  not_ok "the daemon starts"
  serve_finish
  exit 1
fi
new_tenant snap-cli || not_ok "a tenant"
KEY=$TKEY
new_box '{"timeout":600}' || not_ok "a box"
api POST "/v1/sandboxes/$BOX/exec" -d '{"cmd":["sh","-c","echo cli > /workspace/c"]}'
hs() { # ARGS...: husk snapshot with the tenant's key; sets RC, OUT, ERR
  OUT=$(HUSK_API_KEY=$KEY HUSK_URL=$URL "$HUSK" snapshot "$@" 2>"$T_SCRATCH/err")
  RC=$?
  ERR=$(cat "$T_SCRATCH/err")
}
hs create "$BOX" --metadata step=one --metadata who=cli
expect_eq "create: exit 0, the snapshot's id" "$RC:$(grep -c '^s_[0-9a-f]\{24\}$' <<<"$OUT")" "0:1"
S=$OUT
hs show "$S"
expect_eq "show: its JSON" "$(python3 -c 'import json,sys; j=json.loads(sys.argv[1]); print(j["sandbox"], j["metadata"]["step"], j["metadata"]["who"])' "$OUT")" "$BOX one cli"
hs list
check "list: a header and the snapshot" bash -c 'grep -q "^ID " <<<"$1" && grep -q "^$2 *$3 " <<<"$1"' _ "$OUT" "$S" "$BOX"
hs list --sandbox b_000000000000000000000000
expect_eq "list --sandbox of another box: only the header" "$(wc -l <<<"$OUT")" 1
hs list --json
expect_eq "list --json: an array" "$(python3 -c 'import json,sys; print(len(json.loads(sys.argv[1])))' "$OUT")" 1
hs restore "$S"
expect_eq "restore: exit 0, a new sandbox's id" "$RC:$(grep -c '^b_' <<<"$OUT")" "0:1"
R=$OUT
echo "$R $KEY" >>"$T_SCRATCH/boxes"
api POST "/v1/sandboxes/$R/exec" -d '{"cmd":["cat","/workspace/c"]}'
expect_eq "the restored box has the files" "$(jf 'j["stdout"]')" cli
hs rm "$S"
expect_eq "rm while a box made from it lives: exit 1" "$RC" 1
check "with the server's message" grep -q "in use" <<<"$ERR"
api DELETE "/v1/sandboxes/$R"
hs rm "$S"
expect_eq "rm: exit 0, nothing printed" "$RC:$OUT" "0:"
hs show "$S"
expect_eq "show of a deleted snapshot: exit 1" "$RC" 1
check "saying so" grep -q "no such snapshot" <<<"$ERR"
# ---- refusals ----
OUT=$(HUSK_URL=$URL "$HUSK" snapshot list 2>&1)
expect_eq "no HUSK_API_KEY: exit 1, saying so" "$?:$(grep -c HUSK_API_KEY <<<"$OUT")" "1:1"
OUT=$(HUSK_API_KEY=hk_wrong HUSK_URL=$URL "$HUSK" snapshot list 2>&1)
expect_eq "a wrong key: exit 1" "$?" 1
hs show '../../v1/tenants'
expect_eq "an id that is not one: usage error 2, no request" "$RC" 2
hs create
expect_eq "create without a sandbox: 2" "$RC" 2
hs frobnicate x
expect_eq "an unknown command: 2" "$RC" 2
hs create "$BOX" --metadata novalue
expect_eq "--metadata without =: 2" "$RC" 2
hs create b_000000000000000000000000
expect_eq "a snapshot of an unknown sandbox: exit 1" "$RC" 1
hs list --server http://127.0.0.1:1
expect_eq "an unreachable server: exit 1" "$RC" 1
check "naming it" grep -q "127.0.0.1:1" <<<"$ERR"
hs --help
expect_eq "--help: exit 0" "$RC" 0
serve_finish
