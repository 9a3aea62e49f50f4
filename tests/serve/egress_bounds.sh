#!/bin/bash
# Every proxied egress connection is a thread of the daemon: besides the
# per-box bound, a tenant's boxes together (--egress-tenant-max-conns) and
# all boxes together (--egress-total-max-conns) are bounded.  Past each,
# the proxy answers 429 (or closes, on the transparent ports) and audits
# the refusal; another tenant's connections still go through.
# Run under flock /tmp/husk-egress-test.lock (the upstream namespace).
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"
. "$(dirname "$0")/egress/setup.bash"
on_exit 'up_stop; serve_cleanup'
CLIENT="$(dirname "$0")/egress/boxclient.py"

if ! up_start; then
  not_ok "the upstream test network starts"
  finish
  exit 1
fi
up_zone '{"api.ex.test": ["10.250.0.2"]}'
# 4 per box, 6 per tenant, 9 in all.
if ! serve_start --default-ttl 3600 --egress-resolver "$UP_IP:53" --egress-allow-range "$UP_NET" \
  --egress-ca-file "$UP_CA" --egress-max-conns 4 --egress-tenant-max-conns 6 --egress-total-max-conns 9 --egress-idle-timeout 300; then
  not_ok "the daemon starts with the egress bounds"
  serve_finish
  exit 1
fi
has() { grep -qF -- "$2" <<<"$1"; }
# Held connections are idle on the explicit port: they last the idle timeout.
bx() { # BOX SHELL: OUT = stdout+stderr
  local body
  body=$(python3 -c 'import json,sys; print(json.dumps({"cmd":["sh","-c",sys.argv[1]],"timeout":60}))' "$2")
  API_TIMEOUT=90 api POST "/v1/sandboxes/$1/exec" -d "$body"
  OUT=$(jf 'j["stdout"]+j["stderr"]')
}
# The proxy's address as a box sees it (the host end of its own link).
declare -A PROXY_OF
# HOLD BOX N: N idle connections to the proxy, held by a background process
# (until it has them all: "holding" in its output).
hold() {
  local py='import socket, sys, time
held = [socket.create_connection((sys.argv[1], 3128), timeout=10) for _ in range(int(sys.argv[2]))]
print("holding", flush=True)
time.sleep(120)'
  api POST "/v1/sandboxes/$1/exec" -d "$(python3 -c 'import json,sys; print(json.dumps({"cmd":["python3","-c",sys.argv[1],sys.argv[2],sys.argv[3]],"background":True}))' "$py" "${PROXY_OF[$1]}" "$2")"
  [ "$CODE" = 201 ] || return 1
  local pid=$(jf 'j["pid"]')
  holding() { api GET "/v1/sandboxes/$1/processes/$2/output?stream=stdout"; grep -q holding <<<"$BODY"; }
  wait_for 20 holding "$1" "$pid"
}
mkbox() { # sets BOX, uploads the client and the CA
  new_box '{"network":"egress","egress":{"rules":[{"host":"api.ex.test"}]}}' || return 1
  api PUT "/v1/sandboxes/$BOX/files?path=/workspace/c.py" --data-binary @"$CLIENT"
  api PUT "/v1/sandboxes/$BOX/files?path=/workspace/ca.pem" --data-binary @"$UP_CA"
  bx "$BOX" 'env | sed -n "s|^HTTP_PROXY=http://\([0-9.]*\):.*|\1|p"'
  PROXY_OF[$BOX]=$OUT
  [ -n "$OUT" ]
}
audit_of() { # BOX (as the operator: the boxes are two tenants')
  KEY=$ADMIN api GET "/v1/audit?box=$1&action=egress.connect&limit=1000"
  jf '"\n".join("%s %s %s" % (r["outcome"], r["status"], r["detail"]) for r in j["records"])'
}
# Decisions are counted and written once per aggregation interval (10 s).
audit_has() { has "$(audit_of "$1")" "$2"; }
fetch() { # BOX PATH: a request through the proxy; OUT
  bx "$1" "curl -sS --max-time 20 --cacert /workspace/ca.pem -o /dev/null -w '%{http_code}' https://api.ex.test/$2"
}

new_tenant alpha || not_ok "tenant alpha"
A_KEY=$TKEY
new_tenant beta || not_ok "tenant beta"
B_KEY=$TKEY
KEY=$A_KEY
mkbox || not_ok "alpha's first egress box"
A1=$BOX
mkbox || not_ok "alpha's second egress box"
A2=$BOX
KEY=$B_KEY
mkbox || not_ok "beta's first egress box"
B1=$BOX
mkbox || not_ok "beta's second egress box"
B2=$BOX

# alpha: 4 held in its first box, 2 in its second: its 6.
KEY=$A_KEY
check "alpha holds 4 connections in its first box" hold "$A1" 4
check "and 2 in its second" hold "$A2" 2
bx "$A2" "python3 /workspace/c.py hold ${PROXY_OF[$A2]} 0"
echo "# $OUT"
check "alpha's 7th connection (its second box has room) gets 429" has "$OUT" "HTTP/1.1 429"
KEY=$B_KEY
fetch "$B1" beta-fine
expect_eq "beta's request goes through meanwhile" "$OUT" 200
check "it reached the upstream" has "$(up_requests)" "/beta-fine"

# beta: 3 held: 9 in all, the proxy's bound.
check "beta holds 3 connections" hold "$B1" 3
bx "$B2" "python3 /workspace/c.py hold ${PROXY_OF[$B2]} 0"
echo "# $OUT"
check "the 10th connection of the daemon (beta has room) gets 429" has "$OUT" "HTTP/1.1 429"
check "audit: the tenant's refusal is recorded" wait_for 30 audit_has "$A2" "reason=tenant-too-many-connections"
check "audit: the proxy's refusal is recorded" wait_for 30 audit_has "$B2" "reason=proxy-too-many-connections"

# alpha lets go: beta's connections go through again.
KEY=$A_KEY
api DELETE "/v1/sandboxes/$A1"
KEY=$B_KEY
fetch_ok() { fetch "$B2" after && [ "$OUT" = 200 ]; }
check "once alpha's box is gone, beta's second box connects" wait_for 20 fetch_ok

reap_boxes "$A_KEY" "$B_KEY" >/dev/null
serve_stop
expect_eq "the daemon stops cleanly" "$SERVE_RC" 0
serve_finish
