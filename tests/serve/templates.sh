#!/bin/bash
# Templates through husk serve (docs/templates.md, docs/api.md): the admin
# imports shared templates, tenants import and build their own and never
# see another's; boxes of them over the API and MCP; every refusal (bad
# name, taken name, garbage, a forged image, a hostile context, the
# tenant's template quota, which the build cache's layers count in, a cut
# upload) leaves nothing behind; deletes
# wait for the boxes and pools that use a template; export round-trips;
# builds stream their output, fail cleanly, stop when the client goes
# away; a pool per template; a SIGKILLed import is no template after the
# restart.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"
. "$(dirname "$0")/../template/template.bash"
MCPDIR=$(cd "$(dirname "$0")/../mcp" && pwd)
TDATA=$DATA

if ! have_busybox; then
  not_ok "busybox is installed (scripts/deps.sh test installs busybox-static)"
  finish
  exit 1
fi

# ---- images ---------------------------------------------------------------------------------
L=$T_SCRATCH/layers
busybox_root "$L/base"
echo base >"$L/base/etc/motd"
mkdir -p "$L/extra/etc" "$L/other/etc" "$L/big/opt"
echo extra >"$L/extra/etc/extra"
echo other >"$L/other/etc/other"
head -c 17M /dev/urandom >"$L/big/opt/blob"
mkimage "$T_SCRATCH/base.tar" --layer "$L/base" --env GREETING=hello --owner home/app=1000:1000 \
  --workdir /home/app --user app --label description=busybox
mkimage "$T_SCRATCH/mine.tar" --layer "$L/base" --layer "$L/extra" --user app --workdir /home/app \
  --owner home/app=1000:1000
mkimage "$T_SCRATCH/other.tar" --layer "$L/base" --layer "$L/other"
mkimage "$T_SCRATCH/big.tar" --layer "$L/base" --layer "$L/big"
mkimage "$T_SCRATCH/forged.tar" --layer "$L/extra" --tamper diffid

tmp_empty() { [ -z "$(ls -A "$DATA/templates/tmp" 2>/dev/null)" ]; }
# upload KEY NAME FILE: POST /v1/templates?name=NAME with FILE as the body.
upload() {
  local save=$KEY
  KEY=$1
  api POST "/v1/templates?name=$2" --data-binary "@$3" -H 'Content-Type: application/x-tar'
  KEY=$save
}
# build KEY QUERY CONTEXT-DIR: POST /v1/builds?QUERY with the context as a tar;
# the NDJSON reply in BODY.
build() {
  local save=$KEY
  KEY=$1
  tar -C "$3" -cf "$T_SCRATCH/ctx.tar" .
  api POST "/v1/builds?$2" --data-binary "@$T_SCRATCH/ctx.tar" -H 'Content-Type: application/x-tar'
  KEY=$save
}
# nd EXPR: Python on the NDJSON lines in $BODY (as `lines`, a list of objects).
nd() {
  python3 -c '
import json, sys
lines = [json.loads(l) for l in sys.argv[1].splitlines() if l.strip()]
v = eval(sys.argv[2])
print("true" if v is True else "false" if v is False else v)' "$BODY" "$1" 2>&1
}

if ! serve_start --template-quota 20M; then
  not_ok "the daemon starts with --template-quota"
  serve_finish
  exit 1
fi
new_tenant alpha && KA=$TKEY && TA=$TID
new_tenant beta && KB=$TKEY && TB=$TID

# ---- imports ------------------------------------------------------------------------------
upload "$ADMIN" base "$T_SCRATCH/base.tar"
expect_code "the admin imports a shared template" 201
expect_eq "it is shared, of source oci" "$(jf '(j["name"], j["shared"], j["source"])')" "('base', True, 'oci')"
upload "$KA" mine "$T_SCRATCH/mine.tar"
expect_code "a tenant imports its own template" 201
expect_eq "it is not shared" "$(jf 'j["shared"]')" false
upload "$KA" mine "$T_SCRATCH/mine.tar"
expect_code "the same name twice: 409" 409
upload "$KA" big "$T_SCRATCH/big.tar"
expect_code "past the tenant's template quota (--template-quota 20M): 403" 403
expect_eq "the error says quota_exceeded" "$(jf 'j["error"]["code"]')" quota_exceeded
upload "$KB" 'Bad_Name' "$T_SCRATCH/base.tar"
expect_code "a name with capitals: 400" 400
KEY=$KB api POST /v1/templates --data-binary "@$T_SCRATCH/base.tar"
expect_code "no name: 400" 400
head -c 20000 /dev/urandom >"$T_SCRATCH/garbage"
upload "$KB" garbage "$T_SCRATCH/garbage"
expect_code "a body that is no image: 400" 400
upload "$KB" forged "$T_SCRATCH/forged.tar"
expect_code "a layer whose digest is not the config's: 400" 400
check "the refused imports left nothing in the store's work area" tmp_empty

# A client that goes away mid-upload: no template, nothing kept.
head -c 600000 "$T_SCRATCH/other.tar" >"$T_SCRATCH/half.tar"
mkfifo "$T_SCRATCH/slow"
(cat "$T_SCRATCH/half.tar"; sleep 30) >"$T_SCRATCH/slow" &
FEED=$!
curl -s -o /dev/null --max-time 60 -X POST -H "Authorization: Bearer $KB" -T "$T_SCRATCH/slow" \
  "$URL/v1/templates?name=cut" &
CURL=$!
check "the cut upload was under way" wait_for 20 bash -c "[ -n \"\$(ls -A '$DATA/templates/tmp')\" ]"
kill "$CURL" 2>/dev/null
wait "$CURL" 2>/dev/null
kill "$FEED" 2>/dev/null
check "a cut upload leaves its work area removed" wait_for 20 tmp_empty
KEY=$KB api GET /v1/templates/cut
expect_code "and is no template" 404

# ---- who sees what ----------------------------------------------------------------------
KEY=$KA api GET /v1/templates
expect_eq "a tenant lists its own templates and the shared ones" "$(jf 'sorted(t["name"] for t in j["templates"])')" '["base", "mine"]'
KEY=$KB api GET /v1/templates
expect_eq "another tenant lists only the shared ones" "$(jf '[t["name"] for t in j["templates"]]')" '["base"]'
KEY=$KB api GET /v1/templates/mine
expect_code "nor can it read another's template" 404
KEY=$KB api POST /v1/sandboxes -d '{"template":"mine"}'
expect_code "nor make a box of it" 404
KEY=$ADMIN api GET /v1/templates
expect_eq "the admin lists every template with its tenant" \
  "$(jf 'sorted((t["name"], t["tenant_id"]) for t in j["templates"])')" "[[\"base\", \"\"], [\"mine\", \"$TA\"]]"
KEY=$KA api GET /v1/templates/base
expect_code "a tenant inspects a shared template" 200
expect_eq "with its layers and image config" "$(jf '(len(j["layers"]), j["config"]["config"]["Labels"]["description"])')" "(1, 'busybox')"

# ---- boxes of templates -------------------------------------------------------------------
KEY=$KA
new_box '{"template":"mine"}'
expect_eq "a box of a tenant's template says so, with the image's working directory" \
  "$(jf '(j["template"], j["workdir"])')" "('mine', '/home/app')"
api POST "/v1/sandboxes/$BOX/exec" -d '{"cmd":["sh","-c","id -un; pwd; cat /etc/extra"]}'
expect_eq "its commands run as the image's user, in its directory, on its layers" "$(jf 'j["stdout"]')" $'app\n/home/app\nextra'
# A template without an interpreter has no context of its language, and says which program is missing.
for lang in python javascript bash; do
  api POST "/v1/sandboxes/$BOX/contexts" -d "{\"language\":\"$lang\"}"
  expect_code "a $lang context on a busybox template is refused" 400
  expect_eq "naming the program it lacks" \
    "$(jf 'j["error"]["message"].split("`")[1] if "`" in j["error"]["message"] else j["error"]["message"]')" \
    "$(case $lang in python) echo python3 ;; javascript) echo node ;; bash) echo bash ;; esac)"
done
api POST "/v1/sandboxes/$BOX/contexts/default/execute" -d '{"code":"1"}'
expect_code "as is a default context's first execution" 400
api GET "/v1/sandboxes/$BOX/contexts"
expect_eq "and no context is left behind" "$(jf 'len(j["contexts"])')" 0
MINEBOX=$BOX
KEY=$KB
new_box '{"template":"base"}'
api POST "/v1/sandboxes/$BOX/exec" -d '{"cmd":["sh","-c","echo $GREETING; cat /etc/motd"]}'
expect_eq "a box of the shared template has its env and files" "$(jf 'j["stdout"]')" $'hello\nbase'
api DELETE "/v1/sandboxes/$BOX"
api POST /v1/sandboxes -d '{"template":"nope"}'
expect_code "a box of no such template: 404" 404

# ---- delete -----------------------------------------------------------------------------
KEY=$KB api DELETE /v1/templates/base
expect_code "a tenant cannot delete a shared template" 403
KEY=$KA api DELETE /v1/templates/mine
expect_code "a template with a live box is not deleted" 409
KEY=$KA api DELETE "/v1/sandboxes/$MINEBOX"
LAYERS_BEFORE=$(tpl_layers)
KEY=$KA api DELETE /v1/templates/mine
expect_code "once its box is gone, it is" 204
check "its own layer is collected, the shared one kept ($LAYERS_BEFORE -> $(tpl_layers))" \
  [ "$(tpl_layers)" = $((LAYERS_BEFORE - 1)) ]
upload "$KA" other "$T_SCRATCH/other.tar"
expect_code "the quota it freed takes another template" 201

# ---- export --------------------------------------------------------------------------------
curl -s -o "$T_SCRATCH/exp.tar" -w '%{http_code}' -H "Authorization: Bearer $KB" \
  "$URL/v1/templates/base/export" >"$T_SCRATCH/code"
expect_eq "GET export answers an archive" "$(cat "$T_SCRATCH/code")" 200
check "an OCI archive (index.json, oci-layout)" bash -c "tar tf '$T_SCRATCH/exp.tar' | grep -qx index.json && tar tf '$T_SCRATCH/exp.tar' | grep -qx oci-layout"
upload "$KB" copy "$T_SCRATCH/exp.tar"
expect_code "the export imports again" 201
KEY=$KB api GET /v1/templates/copy
COPYDIG=$(jf 'j["digest"]')
KEY=$KB api GET /v1/templates/base
expect_eq "with the same config digest" "$COPYDIG" "$(jf 'j["digest"]')"
KEY=$KB api GET /v1/templates/mine/export
expect_code "another tenant's template does not export" 404

# ---- builds --------------------------------------------------------------------------------
C=$T_SCRATCH/ctx
mkdir -p "$C/src"
echo 'print me' >"$C/src/data.txt"
cat >"$C/Dockerfile" <<'EOF'
FROM copy
ARG WHO=nobody
COPY src/ /opt/src/
RUN echo "built by $WHO" > /tmp/built; cat /opt/src/data.txt; echo to-stderr >&2
ENV STAGE=done
WORKDIR /opt/src
CMD ["cat", "data.txt"]
EOF
build "$KB" 'name=app&buildargs=%7B%22WHO%22%3A%22beta%22%7D' "$C"
expect_code "a build answers 200 with its stream" 200
expect_eq "the stream says each step, the step's output, then done" \
  "$(nd '(any("step 1: FROM copy" in l.get("text","") for l in lines), "print me" in "".join(l.get("text","") for l in lines), "to-stderr" in "".join(l.get("text","") for l in lines), lines[-1]["type"], lines[-1]["template"]["name"])')" \
  "(True, True, True, 'done', 'app')"
KEY=$KB
new_box '{"template":"app"}'
api POST "/v1/sandboxes/$BOX/exec" -d '{"cmd":["sh","-c","pwd; echo $STAGE; cat /opt/src/data.txt"]}'
expect_eq "a box of the built template has its files, env and working directory" \
  "$(jf 'j["stdout"]')" $'/opt/src\ndone\nprint me'
api DELETE "/v1/sandboxes/$BOX"
KEY=$KB api GET /v1/audit
check "the build is audited (template.build)" grep -q '"template.build"' <<<"$BODY"
check "the import is audited (template.import)" grep -q '"template.import"' <<<"$BODY"

build "$KB" 'name=app2&buildargs=%7B%22WHO%22%3A%22beta%22%7D' "$C"
expect_eq "a second build of the same context uses the cache" \
  "$(nd '(lines[-1]["type"], any("cached" in l.get("text","") for l in lines))')" "('done', True)"
build "$KB" 'name=app' "$C"
expect_code "a build to a taken name: 409 before any step" 409
printf 'FROM copy\nRUN exit 7\n' >"$C/Dockerfile"
build "$KB" 'name=fails' "$C"
expect_eq "a failing step ends the stream with an error naming it" \
  "$(nd '(lines[-1]["type"], "exit code 7" in lines[-1]["message"])')" "('error', True)"
KEY=$KB api GET /v1/templates/fails
expect_code "and makes no template" 404
printf 'FROM copy\nHEALTHCHECK CMD true\n' >"$C/Dockerfile"
build "$KB" 'name=bad' "$C"
expect_code "an instruction husk does not build: 400 before any step" 400
printf 'FROM mine\n' >"$C/Dockerfile"
build "$KB" 'name=theirs' "$C"
expect_code "FROM another tenant's template: 404" 404
printf 'FROM copy\nCOPY link/ /x/\n' >"$C/Dockerfile"
ln -s / "$C/link"
build "$KB" 'name=escape' "$C"
expect_eq "COPY through a symlink out of the context fails the build" \
  "$(nd '(lines[-1]["type"], "leads out of the build context" in lines[-1]["message"])')" "('error', True)"
rm "$C/link"
python3 - "$T_SCRATCH/evil.tar" <<'EOF'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w") as t:
    df = b"FROM copy\nCOPY . /x/\n"
    i = tarfile.TarInfo("Dockerfile"); i.size = len(df); t.addfile(i, io.BytesIO(df))
    i = tarfile.TarInfo("../../evil"); i.size = 4; t.addfile(i, io.BytesIO(b"evil"))
EOF
KEY=$KB api POST '/v1/builds?name=evil' --data-binary "@$T_SCRATCH/evil.tar"
expect_code "a context with a name that climbs out: 400" 400
check "and nothing was written outside it" [ ! -e "$DATA/templates/evil" ] && [ ! -e "$DATA/evil" ]
echo 'no tar' >"$T_SCRATCH/notar"
KEY=$KB api POST '/v1/builds?name=junk' --data-binary "@$T_SCRATCH/notar"
expect_eq "a context that is no tar: 400 saying so" "$CODE $(jf '"not a tar" in j["error"]["message"]')" "400 true"
KEY=$KB api POST '/v1/builds?name=x&buildargs=%5B1%5D' --data-binary "@$T_SCRATCH/ctx.tar"
expect_code "buildargs that are not an object of strings: 400" 400
KEY=$KB api POST '/v1/builds?name=x&memory=lots' --data-binary "@$T_SCRATCH/ctx.tar"
expect_code "a bad memory size: 400" 400
check "the refused builds left nothing in the store's work area" tmp_empty

# A client that goes away mid-step: the step's box ends, no template.
printf 'FROM copy\nRUN echo started; sleep 60\n' >"$C/Dockerfile"
tar -C "$C" -cf "$T_SCRATCH/ctx.tar" .
curl -sN --max-time 120 -X POST -H "Authorization: Bearer $KB" --data-binary "@$T_SCRATCH/ctx.tar" \
  "$URL/v1/builds?name=gone" >"$T_SCRATCH/gone.out" &
CURL=$!
check "the long step started" wait_for 30 grep -q started "$T_SCRATCH/gone.out"
step_boxes() {
  local save=$KEY
  KEY=$KB api GET "/v1/sandboxes?state=running&limit=100"
  KEY=$save
  jf 'len([b for b in j["sandboxes"] if b.get("metadata", {}).get("husk.build") == "gone"])'
}
expect_eq "its step runs in a box of the tenant's, tagged with the build" "$(step_boxes)" 1
kill "$CURL" 2>/dev/null
wait "$CURL" 2>/dev/null
no_step_boxes() { [ "$(step_boxes)" = 0 ]; }
check "the client gone, the step's box goes" wait_for 30 no_step_boxes
check "and the work area empties" wait_for 30 tmp_empty
KEY=$KB api GET /v1/templates/gone
expect_code "and there is no template" 404

# The admin's build: a shared template, its steps in the builds' tenant.
printf 'FROM base\nUSER root\nRUN echo shared > /etc/shared\n' >"$C/Dockerfile"
build "$ADMIN" 'name=shared-app' "$C"
expect_eq "the admin builds a shared template" "$(nd '(lines[-1]["type"], lines[-1]["template"]["shared"])')" "('done', True)"
KEY=$KA api GET /v1/templates/shared-app
expect_code "every tenant sees it" 200

# Builds that fail after a cached step keep its layer (the cache's), and it
# counts in the tenant's template storage (--template-quota 20M): the third
# 8 MB step does not fit, fails the build with quota_exceeded, and its
# layer does not stay.
new_tenant gamma && KG=$TKEY
store_layers() { find "$DATA/templates/layers" -mindepth 1 -maxdepth 1 -type d | wc -l; }
for i in 1 2; do
  printf 'FROM base\nUSER root\nRUN head -c 8000000 /dev/urandom > /blob%s\nRUN exit 3\n' "$i" \
    >"$C/Dockerfile"
  build "$KG" "name=cached$i" "$C"
  expect_eq "build $i fails on its last step" \
    "$(nd '(lines[-1]["type"], "exit code 3" in lines[-1]["message"])')" "('error', True)"
done
LAYERS=$(store_layers)
printf 'FROM base\nUSER root\nRUN head -c 8000000 /dev/urandom > /blob3\nRUN exit 3\n' >"$C/Dockerfile"
build "$KG" "name=cached3" "$C"
expect_eq "a third: its step is past the quota the cached layers use" \
  "$(nd '(lines[-1]["type"], lines[-1]["code"])')" "('error', 'quota_exceeded')"
expect_eq "and its layer is not kept" "$(store_layers)" "$LAYERS"
check "nor anything in the store's work area" tmp_empty

# ---- MCP --------------------------------------------------------------------------------
tool() { R=$(python3 "$MCPDIR/mcpcall.py" "$URL/mcp" "$1" call "$2" "$3"); }
rq() {
  python3 -c '
import json, sys
o = json.loads(sys.argv[1])
res = (o["reply"] or {}).get("result") or {}
sc = res.get("structuredContent") or {}
err = res.get("isError", False)
txt = (res.get("content") or [{}])[0].get("text", "")
v = eval(sys.argv[2])
print("true" if v is True else "false" if v is False else v)' "$R" "$1"
}
tool "$KA" template_list '{}'
expect_eq "MCP template_list: default, the shared ones and the tenant's own" \
  "$(rq 'sorted(t["name"] for t in sc["templates"])')" "['base', 'default', 'other', 'shared-app']"
expect_eq "with the image's labels" "$(rq '[t.get("labels") for t in sc["templates"] if t["name"] == "base"][0]')" "{'description': 'busybox'}"
tool "$KA" sandbox_create '{"template":"other"}'
expect_eq "MCP sandbox_create makes a box of a template" "$(rq '(err, sc["template"], sc["workdir"])')" "(False, 'other', '/workspace')"
MBOX=$(rq 'sc["sandbox_id"]')
tool "$KA" sandbox_exec "{\"sandbox_id\":\"$MBOX\",\"command\":\"cat /etc/other; echo \$0\"}"
expect_eq "MCP sandbox_exec runs in it, with sh: the image has no bash" \
  "$(rq '(err, sc.get("stdout", "").split())')" "(False, ['other', 'sh'])"
KEY=$KA api POST "/v1/sandboxes/$MBOX/exec" -d '{"cmd":["cat","/etc/other"]}'
expect_eq "the box has the template's files" "$(jf 'j["stdout"]')" other
KEY=$KA api DELETE "/v1/sandboxes/$MBOX"
tool "$KA" run_code '{"language":"bash","code":"echo hi","template":"nope"}'
expect_eq "MCP run_code with no such template: an error naming template_list" \
  "$(rq '(err, "template_list" in txt)')" "(True, True)"

# ---- a pool per template ---------------------------------------------------------------
serve_stop
if ! serve_start --template-quota 20M --pool 1:template=base,memory=256M; then
  not_ok "the daemon starts with a pool of a template"
  serve_finish
  exit 1
fi
pool_ready() {
  KEY=$ADMIN api GET /v1/pool
  [ "$(jf 'j["pools"][0]["ready"]')" = 1 ]
}
check "the template's pool fills" wait_for 60 pool_ready
expect_eq "GET /v1/pool names its template" "$(jf 'j["pools"][0]["template"]')" base
KEY=$KB
new_box '{"template":"base","memory":"256M"}'
check "a create of that template and shape claims the pool's box" grep -q "box $BOX created for tenant .* (from the pool)" "$SERVE_LOG"
api POST "/v1/sandboxes/$BOX/exec" -d '{"cmd":["cat","/etc/motd"]}'
expect_eq "and the box is of the template" "$(jf 'j["stdout"]')" base
api DELETE "/v1/sandboxes/$BOX"
KEY=$ADMIN api DELETE /v1/templates/base
expect_code "a template a pool keeps is not deleted" 409
serve_stop

# ---- SIGKILL during an import ---------------------------------------------------------
serve_start --template-quota 20M
rm -f "$T_SCRATCH/slow"
mkfifo "$T_SCRATCH/slow"
(cat "$T_SCRATCH/half.tar"; sleep 30) >"$T_SCRATCH/slow" &
FEED=$!
curl -s -o /dev/null --max-time 60 -X POST -H "Authorization: Bearer $KB" -T "$T_SCRATCH/slow" \
  "$URL/v1/templates?name=killed" &
CURL=$!
check "an import was under way" wait_for 20 bash -c "[ -n \"\$(ls -A '$DATA/templates/tmp')\" ]"
serve_kill9
kill "$CURL" "$FEED" 2>/dev/null
wait "$CURL" 2>/dev/null
serve_start --template-quota 20M
check "the restart removed the killed import's work" tmp_empty
KEY=$KB api GET /v1/templates/killed
expect_code "and it is no template" 404

# ... and during a build: its step's box is ended at the restart, not adopted.
printf 'FROM copy\nRUN echo started; sleep 60\n' >"$C/Dockerfile"
tar -C "$C" -cf "$T_SCRATCH/ctx.tar" .
curl -sN --max-time 120 -X POST -H "Authorization: Bearer $KB" --data-binary "@$T_SCRATCH/ctx.tar" \
  "$URL/v1/builds?name=killedbuild" >"$T_SCRATCH/kb.out" &
CURL=$!
check "a build's step was running" wait_for 30 grep -q started "$T_SCRATCH/kb.out"
KEY=$KB api GET "/v1/sandboxes?state=running&metadata.husk.build=killedbuild"
STEPBOX=$(jf 'j["sandboxes"][0]["id"]')
serve_kill9
wait "$CURL" 2>/dev/null
serve_start --template-quota 20M
KEY=$KB api GET "/v1/sandboxes/$STEPBOX"
expect_eq "the restart ended the killed build's step box" "$(jf 'j["state"]')" killed
check "its processes are gone" wait_for 10 box_gone "$STEPBOX"
KEY=$KB api GET /v1/templates/killedbuild
expect_code "the killed build is no template" 404
check "and its context is gone from the work area" tmp_empty
KEY=$KB api POST /v1/sandboxes -d '{"metadata":{"husk.build":"x"}}'
expect_code "a caller cannot tag a box husk.build (husk.* metadata is husk's)" 400
KEY=$KB api GET /v1/templates/app
expect_code "the templates made before are all there" 200

# ---- leaks ----------------------------------------------------------------------------
expect_eq "no box of the suite's tenants is left" "$(reap_boxes "$KA" "$KB")" 0
serve_stop
check "no cgroup of the suite's daemon is left" [ -z "$(live_box_cgroups)" ]
check "the store's work area is empty" tmp_empty
serve_finish
