#!/bin/bash
# The network of a build's RUN steps (docs/templates.md, Builds): none
# without a policy (only `lo`); with one, the hosts it names and nothing
# else, through husk's proxy.  Over the API (POST /v1/builds?egress=) and
# from the command line (husk template build --egress-allow, with the
# proxy's operator settings).  The "internet" is the egress suite's
# network namespace (egress/setup.bash): run under
# flock /tmp/husk-egress-test.lock.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"
. "$(dirname "$0")/egress/setup.bash"
. "$(dirname "$0")/../template/template.bash"
on_exit 'up_stop; serve_cleanup'
TDATA=$DATA

if ! have_busybox; then
  not_ok "busybox is installed (scripts/deps.sh test installs busybox-static)"
  finish
  exit 1
fi
if ! up_start; then
  not_ok "the upstream test network starts"
  finish
  exit 1
fi
up_zone '{"plain.test": ["10.250.0.2"], "other.test": ["10.250.0.2"]}'

# seen TEXT: a request the upstream logged contains TEXT.
seen() { up_requests | grep -qF -- "$1"; }
# A busybox image; its steps fetch with busybox wget, which honours http_proxy.
L=$T_SCRATCH/layers
busybox_root "$L/base"
mkimage "$T_SCRATCH/base.tar" --layer "$L/base"

# build KEY QUERY: POST /v1/builds?QUERY with the context $C as a tar.
C=$T_SCRATCH/ctx
mkdir -p "$C"
build() {
  local save=$KEY
  KEY=$1
  tar -C "$C" -cf "$T_SCRATCH/ctx.tar" .
  API_TIMEOUT=180 api POST "/v1/builds?$2" --data-binary "@$T_SCRATCH/ctx.tar" -H 'Content-Type: application/x-tar'
  KEY=$save
}
# nd EXPR: Python on the NDJSON lines in $BODY (as `lines`; `text`: all their text).
nd() {
  python3 -c '
import json, sys
lines = [json.loads(l) for l in sys.argv[1].splitlines() if l.strip()]
text = "".join(l.get("text", "") + l.get("message", "") for l in lines)
v = eval(sys.argv[2])
print("true" if v is True else "false" if v is False else v)' "$BODY" "$1" 2>&1
}
# in_box TEMPLATE SHELL: a box of TEMPLATE runs SHELL; its stdout in OUT.
in_box() {
  new_box "{\"template\":\"$1\"}" || not_ok "a box of $1 ($BODY)"
  local b=$BOX body
  body=$(python3 -c 'import json,sys; print(json.dumps({"cmd":["sh","-c",sys.argv[1]]}))' "$2")
  api POST "/v1/sandboxes/$b/exec" -d "$body"
  OUT=$(jf 'j["stdout"]')
  api DELETE "/v1/sandboxes/$b"
}

if ! serve_start --egress-resolver "$UP_IP:53" --egress-allow-range "$UP_NET" --egress-ca-file "$UP_CA"; then
  not_ok "the daemon starts with the egress options"
  serve_finish
  exit 1
fi
new_tenant builder || not_ok "tenant"
KEY=$TKEY
api POST "/v1/templates?name=base" --data-binary "@$T_SCRATCH/base.tar"
expect_code "the busybox image is imported" 201

# ---- no policy: loopback only -----------------------------------------------------------
cat >"$C/Dockerfile" <<'EOF'
FROM base
RUN busybox sed 1,2d /proc/net/dev | busybox cut -d: -f1 | tr -d ' ' > /links; busybox wget -q -T 5 -O /fetched http://plain.test/nopolicy || echo failed > /fetched
EOF
build "$TKEY" 'name=nonet'
expect_eq "a build without a policy succeeds" "$(nd 'lines[-1]["type"]')" done
in_box nonet 'cat /links; echo ---; cat /fetched'
expect_eq "its step saw only lo, and its fetch failed" "$OUT" $'lo\n---\nfailed'
check "nothing reached the upstream" not seen nopolicy

# ---- a policy: the hosts it names -------------------------------------------------------
cat >"$C/Dockerfile" <<'EOF'
FROM base
RUN busybox wget -q -O /fetched http://plain.test/from-the-build && echo "proxy=$http_proxy"
EOF
build "$TKEY" 'name=net&egress=plain.test'
expect_eq "a build whose step fetches from an allowed host succeeds" "$(nd 'lines[-1]["type"]')" done
check "the step ran with the proxy in its environment" grep -q 'proxy=http://10\.239\.' <<<"$(nd 'text')"
in_box net 'cat /fetched'
check "the fetched content is in the template" grep -q '"path": "/from-the-build"' <<<"$OUT"
check "the upstream served the step, by name, through the proxy" \
  bash -c 'grep "/from-the-build" <<<"$1" | grep -q "\"Host\": \"plain.test\""' _ "$(up_requests)"

cat >"$C/Dockerfile" <<'EOF'
FROM base
RUN busybox wget -q -O /denied http://other.test/not-allowed
EOF
build "$TKEY" 'name=denied&egress=plain.test'
expect_eq "a step fetching from a host the policy does not name fails the build" \
  "$(nd '(lines[-1]["type"], "step 2" in lines[-1]["message"])')" "('error', True)"
check "the build's log shows the proxy's refusal (403)" grep -q '403' <<<"$(nd 'text')"
check "nothing reached the host not allowed" not seen not-allowed
api GET /v1/templates/denied
expect_code "and makes no template" 404
api GET "/v1/audit?action=egress.http&limit=100"
check "the refusal is audited (egress.http denied)" grep -q '"outcome":"denied"' <<<"$BODY"
api POST '/v1/builds?name=x&egress=bad%20host' --data-binary "@$T_SCRATCH/ctx.tar"
expect_eq "a bad host in egress=: 400 before any step" "$CODE $(jf '"egress" in j["error"]["message"]')" "400 true"
expect_eq "no box of the suite's tenant is left" "$(reap_boxes "$TKEY")" 0
serve_stop

# ---- the command line: the same, with the proxy's settings as options ------------------
TDATA=$T_SCRATCH/cli
tpl import "$T_SCRATCH/base.tar" --name base
expect_eq "the command line imports the image" "$RC" 0
cat >"$C/Dockerfile" <<'EOF'
FROM base
RUN busybox wget -q -O /fetched http://plain.test/from-the-cli
EOF
cli_build() { # NAME ARGS...
  local name=$1
  shift
  "$HUSK" template build -f "$C/Dockerfile" --name "$name" --data "$TDATA" "$@" "$C" \
    >"$T_SCRATCH/build.out" 2>"$T_SCRATCH/build.err" </dev/null
  RC=$?
  OUT=$(cat "$T_SCRATCH/build.out" "$T_SCRATCH/build.err")
}
cli_build clinet --egress-allow plain.test --egress-resolver "$UP_IP:53" --egress-allow-range "$UP_NET"
expect_eq "husk template build --egress-allow reaches the host ($(tail -n 2 <<<"$OUT"))" "$RC" 0
run_tpl --template clinet -- cat /fetched
check "the fetched content is in the template" grep -q '"path": "/from-the-cli"' <<<"$OUT"
cat >"$C/Dockerfile" <<'EOF'
FROM base
RUN busybox wget -q -O /fetched http://other.test/private-refused
EOF
cli_build clidenied --egress-allow other.test --egress-resolver "$UP_IP:53"
check "without the test range the proxy refuses the private address: the build fails" [ "$RC" != 0 ]
check "with the proxy's refusal in its output" grep -q '403' <<<"$OUT"
tpl inspect clidenied
check "and there is no template" [ "$RC" != 0 ]
check "nothing reached the private address" not seen private-refused
serve_finish
