#!/bin/bash
# Network modes and the egress proxy.  Everything stays on this
# machine: the "internet" is a network namespace made here (egress/setup.bash)
# with HTTP/HTTPS echo servers and a scriptable DNS server, reached through
# the operator's test allow-range.  The attacker is the code in the box: it
# tries to get out without the proxy, to reach places the policy does not
# list or the deny set forbids, to confuse the proxy's parsers, and to make
# a secret leave for a host it is not bound to.
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/serve.bash"
. "$(dirname "$0")/egress/setup.bash"
on_exit 'up_stop; serve_cleanup'

SECRET="s3cr3t-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
SECRET2="other-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
CLIENT="$(dirname "$0")/egress/boxclient.py"

# bx SHELL: run in $BOX; OUT = stdout+stderr, XC = exit code.
bx() {
  local body
  body=$(python3 -c 'import json,sys; print(json.dumps({"cmd":["sh","-c",sys.argv[1]],"timeout":90}))' "$1")
  API_TIMEOUT=120 api POST "/v1/sandboxes/$BOX/exec" -d "$body"
  OUT=$(jf 'j["stdout"]+j["stderr"]')
  XC=$(jf 'j["exit_code"]')
}
has() { grep -qF -- "$2" <<<"$1"; }
lacks() { ! grep -qF -- "$2" <<<"$1"; }
# The box's audit records of egress decisions (detail lines).
audit_of() { # BOX [ACTION]
  api GET "/v1/audit?box=$1${2:+&action=$2}&limit=1000"
  jf '"\n".join("%s %s %s %s" % (r["action"], r["outcome"], r["status"], r["detail"]) for r in j["records"])'
}
upload() { # BOX PATH FILE
  api PUT "/v1/sandboxes/$1/files?path=$2" --data-binary @"$3"
}
links() { ip -o link show 2>/dev/null | grep -o "hk${HASH6}-[0-9]*" | sort -u; }
set_elems() { nft list set inet "husk_$HASH8" links 2>/dev/null | grep -c '\. 10\.239\.'; }

if ! up_start; then
  not_ok "the upstream test network starts"
  finish
  exit 1
fi
up_zone '{"api.ex.test": ["10.250.0.2"], "echo.test": ["10.250.0.2"], "other.test": ["10.250.0.2"],
 "plain.test": ["10.250.0.2"], "a.wild.test": ["10.250.0.2"], "a.b.wild.test": ["10.250.0.2"],
 "wild.test": ["10.250.0.2"], "badwild.test": ["10.250.0.2"],
 "loop.ex.test": ["127.0.0.1"], "meta.ex.test": ["169.254.169.254"], "priv.ex.test": ["10.1.2.3"],
 "cgnat.ex.test": ["100.64.0.1"], "v6loop.ex.test": ["::1"], "v6map.ex.test": ["::ffff:127.0.0.1"],
 "nat64.ex.test": ["64:ff9b::a9fe:a9fe"], "meta6.ex.test": ["fd00:ec2::254"],
 "mixed.test": ["10.250.0.2", "127.0.0.1"], "rebind.test": [["10.250.0.2"], ["127.0.0.1"]]}'

if ! serve_start --default-ttl 3600 --egress-resolver "$UP_IP:53" --egress-allow-range "$UP_NET" --egress-ca-file "$UP_CA" \
  --egress-max-conns 6 --egress-idle-timeout 4; then
  not_ok "the daemon starts with the egress options"
  serve_finish
  exit 1
fi
HASH8=$(cg_prefix | cut -c5-12)
HASH6=${HASH8:0:6}
new_tenant egress || not_ok "tenant"
KEY=$TKEY

# ---- the vault ------------------------------------------------------------------
api PUT /v1/secrets/TOKEN -d "{\"value\":\"$SECRET\"}"
expect_code "a tenant stores a secret" 200
check "the reply does not contain the value" lacks "$BODY" "$SECRET"
api PUT /v1/secrets/OTHER -d "{\"value\":\"$SECRET2\"}"
api GET /v1/secrets
check "the list names the secrets" has "$BODY" '"name":"TOKEN"'
check "the list holds no value" lacks "$BODY" "$SECRET"
api PUT /v1/secrets/BAD -d '{"value":"line\nbreak"}'
expect_code "a value with a control character is refused" 400
api PUT "/v1/secrets/1abc" -d '{"value":"x"}'
expect_code "a bad secret name is refused" 400
api PUT /v1/secrets/EMPTY -d '{"nothing":1}'
expect_code "a body without value is refused" 400
api DELETE /v1/secrets/NOPE
expect_code "deleting a missing secret is 404" 404
KEY=$ADMIN api PUT "/v1/tenants/$TID/secrets/ADMINSET" -d '{"value":"from-the-operator"}'
KEY=$ADMIN
api PUT "/v1/tenants/$TID/secrets/ADMINSET" -d '{"value":"from-the-operator"}'
expect_code "the operator stores a secret for a tenant" 200
KEY=$TKEY
api DELETE /v1/secrets/ADMINSET
expect_code "the tenant deletes it" 204

# ---- bad create requests -----------------------------------------------------------
api POST /v1/sandboxes -d '{"network":"wifi"}'
expect_code "an unknown network mode is refused" 400
api POST /v1/sandboxes -d '{"network":"egress","egress":{"rules":[{"host":"*.test"}]}}'
expect_code "a wildcard over a single label is refused" 400
api POST /v1/sandboxes -d '{"network":"egress","egress":{"rules":[{"host":"b\u00fccher.test"}]}}'
expect_code "a non-ASCII rule host is refused (punycode only)" 400
api POST /v1/sandboxes -d '{"network":"egress","egress":{"secrets":[{"name":"MISSING","hosts":["api.ex.test"]}]}}'
expect_code "a binding to a secret not in the vault is refused" 400
api POST /v1/sandboxes -d '{"egress":{"rules":[]}}'
expect_code "egress settings without network egress are refused" 400

# ---- mode none -----------------------------------------------------------------------
new_box '{}' || not_ok "a box in mode none"
NONE=$BOX
upload "$NONE" /workspace/c.py "$CLIENT"
bx "ip -o link | cut -d: -f2; python3 /workspace/c.py tcp $UP_IP 80; python3 /workspace/c.py udp $UP_IP 53 api.ex.test; python3 /workspace/c.py udp 169.254.0.53 53 api.ex.test; getent hosts api.ex.test || echo nodns"
check "none: only loopback exists" bash -c '[ "$(grep -c "^ *[a-z]" <<<"$1" | head -1)" -ge 1 ] && ! grep -q eth0 <<<"$1"' _ "$OUT"
check "none: TCP to the upstream fails (no route)" has "$OUT" "error OSError 101"
check "none: DNS fails" has "$OUT" "nodns"
check "none: nothing reached the upstream" bash -c '[ -z "$1" ] && [ ! -s "$2/dns.log" ]' _ "$(up_requests)" "$UP_DIR"

# ---- egress, tunnel mode ---------------------------------------------------------------
POLICY='{"rules":[{"host":"api.ex.test"},{"host":"*.wild.test"},{"host":"plain.test","ports":[80]},
 {"host":"10.250.0.2","ports":[8443,80]},{"host":"*.ex.test","ports":[443]},{"host":"mixed.test"},
 {"host":"rebind.test"},{"host":"127.0.0.1"},{"host":"10.0.0.5"},{"host":"169.254.169.254"}]}'
new_box "{\"network\":\"egress\",\"egress\":$POLICY}" || not_ok "an egress box is created ($BODY)"
EG=$BOX
check "the box reports network egress" has "$BODY" '"network":"egress"'
upload "$EG" /workspace/ca.pem "$UP_CA"
upload "$EG" /workspace/c.py "$CLIENT"
bx 'env | grep -i _proxy | sort; ip -o -4 addr show eth0; echo "v6:$(ip -o -6 addr show dev eth0 | wc -l)"'
check "the link has no IPv6 address at all" has "$OUT" "v6:0"
check "HTTP_PROXY, HTTPS_PROXY, ALL_PROXY are set" bash -c 'grep -q "^HTTP_PROXY=http://10.239" <<<"$1" && grep -q "^HTTPS_PROXY=" <<<"$1" && grep -q "^ALL_PROXY=" <<<"$1" && grep -q "^https_proxy=" <<<"$1"' _ "$OUT"
PROXY=$(sed -n 's|^HTTP_PROXY=http://\([0-9.]*\):.*|\1|p' <<<"$OUT")
check "the box has its link" has "$OUT" "eth0"
check "the host end of the link exists" test "$(links | wc -l)" -ge 1

bx 'curl -sS --max-time 20 --cacert /workspace/ca.pem https://api.ex.test/tunnel-ok'
check "allowed host through CONNECT: the upstream answers" has "$OUT" '"path": "/tunnel-ok"'
check "the upstream saw the request" has "$(up_requests)" '/tunnel-ok'
bx 'curl -sS --max-time 20 --cacert /workspace/ca.pem https://echo.test/unlisted; echo rc=$?'
check "an unlisted host is refused with 403" has "$OUT" "403"
check "the unlisted request never reached the upstream" lacks "$(up_requests)" "/unlisted"
bx 'curl -sS --max-time 20 --cacert /workspace/ca.pem https://api.ex.test:8443/otherport; echo rc=$?'
check "an allowed host on an unlisted port is refused" bash -c 'grep -q 403 <<<"$1" && ! grep -q otherport <<<"$2"' _ "$OUT" "$(up_requests)"
bx 'for h in a.wild.test a.b.wild.test wild.test badwild.test; do echo "$h $(curl -s -o /dev/null -w %{http_code} --max-time 20 --cacert /workspace/ca.pem https://$h/wild-$h; echo " rc=$?")"; done'
check "wildcard: a.wild.test allowed" has "$(up_requests)" "/wild-a.wild.test"
check "wildcard: a.b.wild.test allowed" has "$(up_requests)" "/wild-a.b.wild.test"
check "wildcard: wild.test itself refused" lacks "$(up_requests)" "/wild-wild.test"
check "wildcard: badwild.test refused" lacks "$(up_requests)" "/wild-badwild.test"
bx "curl -sS --max-time 20 --cacert /workspace/ca.pem https://$UP_IP:8443/iplit"
check "an IP literal rule (allowed test range) works without SNI" has "$(up_requests)" "/iplit"
# The host's own addresses are never a destination, even inside the
# operator's allowed test range (10.250.0.1 is the host end of the test link).
SAVED_BOX=$BOX
new_box '{"network":"egress","egress":{"rules":[{"host":"10.250.0.1","ports":[8443]}]}}' || not_ok "a box whose rule names the host"
HOSTBOX=$BOX
upload "$BOX" /workspace/c.py "$CLIENT"
bx 'echo "$HTTP_PROXY"'
HPROXY=$(sed -n 's|^http://\([0-9.]*\):.*|\1|p' <<<"$OUT")
bx "python3 /workspace/c.py raw $HPROXY 3128 \"b'CONNECT 10.250.0.1:8443 HTTP/1.1\\\\r\\\\nHost: 10.250.0.1:8443\\\\r\\\\n\\\\r\\\\n'\""
check "a rule naming the host's own address is refused (403)" has "$OUT" "HTTP/1.1 403"
check "audit: host-address" has "$(audit_of "$HOSTBOX" egress.connect)" "reason=denied-address:host-address"
api DELETE "/v1/sandboxes/$HOSTBOX"
BOX=$SAVED_BOX

# IP literal forms: rules name 127.0.0.1, 10.0.0.5 and the metadata address;
# every spelling is the address, and the deny set wins over the rule.
bx "for t in 127.0.0.1 2130706433 0x7f000001 0x7f.1 0177.0.0.1 127.1 10.0.0.5 169.254.169.254 0xa9fea9fe [::ffff:127.0.0.1] [::1] 0x7g.1 1.2.3.4.5 [api.ex.test] API.EX.TEST. xn--bcher-kva.test; do printf '%s ' \$t; python3 /workspace/c.py raw $PROXY 3128 \"b'CONNECT \$t:443 HTTP/1.1\\\\r\\\\nHost: \$t:443\\\\r\\\\n\\\\r\\\\n'\"; done"
for t in 127.0.0.1 2130706433 0x7f000001 0x7f.1 0177.0.0.1 127.1 10.0.0.5 169.254.169.254 0xa9fea9fe; do
  check "literal $t is refused (403)" grep -q "^$t HTTP/1.1 403" <<<"$OUT"
done
check "literal [::ffff:127.0.0.1] is refused" grep -q '^\[::ffff:127.0.0.1\] HTTP/1.1 403' <<<"$OUT"
check "a malformed literal (0x7g.1) is a bad request" grep -q '^0x7g.1 HTTP/1.1 400' <<<"$OUT"
check "five-part address is a bad request" grep -q '^1.2.3.4.5 HTTP/1.1 400' <<<"$OUT"
check "a bracketed name is a bad request" grep -q '^\[api.ex.test\] HTTP/1.1 400' <<<"$OUT"
check "API.EX.TEST. is normalised and allowed" grep -q '^API.EX.TEST. HTTP/1.1 200' <<<"$OUT"
check "an unlisted punycode name is refused" grep -q '^xn--bcher-kva.test HTTP/1.1 403' <<<"$OUT"
AUD=$(audit_of "$EG" egress.connect)
check "the audit names the loopback refusal" has "$AUD" "host=127.0.0.1 port=443 addr=127.0.0.1 mode=tunnel"
check "the audit names the metadata refusal" has "$AUD" "reason=denied-address:metadata"

# Names resolving into the deny set.
for n in loop meta priv cgnat v6loop v6map nat64 meta6; do
  bx "curl -sS --max-time 20 --cacert /workspace/ca.pem https://$n.ex.test/deny-$n; echo rc=\$?"
  check "a name resolving to a denied address is refused ($n)" bash -c 'grep -q 403 <<<"$1" && ! grep -q "/deny-$2" <<<"$3"' _ "$OUT" "$n" "$(up_requests)"
done
AUD=$(audit_of "$EG" egress.connect)
check "audit: loopback by name" has "$AUD" "host=loop.ex.test port=443 addr=127.0.0.1"
check "audit: IPv4-mapped IPv6" has "$AUD" "reason=denied-address:ipv4-mapped"
check "audit: NAT64" has "$AUD" "reason=denied-address:nat64"
check "audit: IPv6 metadata" has "$AUD" "addr=fd00:ec2::254"
bx 'curl -sS --max-time 20 --cacert /workspace/ca.pem https://mixed.test/mixed; echo rc=$?'
check "mixed answers (one private) are refused" bash -c 'grep -q 403 <<<"$1" && ! grep -q /mixed <<<"$2"' _ "$OUT" "$(up_requests)"

# Rebinding: the first answer is allowed, every later one is 127.0.0.1.
bx 'curl -sS --max-time 20 --cacert /workspace/ca.pem https://rebind.test/rebind-1'
check "rebinding: the first connection uses the checked answer" has "$(up_requests)" "/rebind-1"
check "rebinding: the proxy asked exactly once for that connection" [ "$(up_dns_count rebind.test 1)" = 1 ]
bx 'curl -sS --max-time 20 --cacert /workspace/ca.pem https://rebind.test/rebind-2; echo rc=$?'
check "rebinding: the rebound answer is refused" bash -c 'grep -q 403 <<<"$1" && ! grep -q /rebind-2 <<<"$2"' _ "$OUT" "$(up_requests)"

# SNI checks in tunnel mode.
bx "python3 /workspace/c.py sni $PROXY api.ex.test:443 other.test; python3 /workspace/c.py sni $PROXY api.ex.test:443 -"
check "SNI different from the CONNECT host: the tunnel is closed" bash -c '[ "$(grep -c "tls refused" <<<"$1")" = 2 ]' _ "$OUT"
check "no request reached the upstream through them" lacks "$(up_requests)" "/sni-test"
bx "python3 /workspace/c.py plain $PROXY $UP_IP:80"
check "a tunnel that does not start with TLS is refused, even to an allowed IP" lacks "$(up_requests)" "/not-tls"
AUD=$(audit_of "$EG" egress.connect)
check "audit: sni-mismatch" has "$AUD" "reason=sni-mismatch"
check "audit: missing-sni" has "$AUD" "reason=missing-sni"

# Bypassing the proxy.
bx "python3 /workspace/c.py tcp $UP_IP 8443; python3 /workspace/c.py tcp $UP_IP 22; python3 /workspace/c.py tcp $PROXY 22; python3 /workspace/c.py udp $UP_IP 5353 api.ex.test; curl -sS --noproxy '*' --max-time 10 -k https://$UP_IP/direct-ip; echo rc=\$?; ping -c1 -W2 $UP_IP >/dev/null 2>&1; echo ping=\$?"
check "direct TCP to another port is dropped" bash -c '[ "$(grep -c "^error" <<<"$1")" -ge 3 ]' _ "$OUT"
check "direct UDP is dropped" grep -qE "^error (timeout|TimeoutError)" <<<"$OUT"
check "direct HTTPS to an IP (no SNI) is redirected and refused" bash -c '! grep -q /direct-ip <<<"$1"' _ "$(up_requests)"
check "ICMP is dropped" has "$OUT" "ping=1"
bx "getent hosts api.ex.test; getent hosts echo.test || echo nx-echo; python3 /workspace/c.py udp $UP_IP 53 api.ex.test; python3 /workspace/c.py udp $UP_IP 53 echo.test"
check "DNS stub: an allowed name resolves to the proxy" has "$OUT" "$PROXY"
check "DNS stub: an unlisted name does not resolve" has "$OUT" "nx-echo"
check "DNS to any server is answered by the stub (NXDOMAIN for unlisted)" has "$OUT" "rcode 3 answers 0"
check "the stub never asked the real DNS for the unlisted name" [ "$(up_dns_count echo.test 1)" = 0 ]
bx "curl -sS --noproxy '*' --max-time 20 --cacert /workspace/ca.pem https://api.ex.test/transparent-443; curl -sS --noproxy '*' --max-time 20 http://plain.test/transparent-80; curl -sS --noproxy '*' --max-time 20 http://echo.test/transparent-80-unlisted"
check "plain HTTPS ignoring the proxy is redirected to it (allowed host)" has "$(up_requests)" "/transparent-443"
check "plain HTTP ignoring the proxy is redirected to it" has "$(up_requests)" "/transparent-80"
check "transparent HTTP to an unlisted host is refused" lacks "$(up_requests)" "unlisted"
bx 'curl -sS --max-time 20 http://plain.test/via-proxy-80'
check "absolute-form HTTP through the proxy works for an allowed host" has "$(up_requests)" "/via-proxy-80"

# Malformed input and smuggling.
R=(
  "bad-connect|b'CONNECT api.ex.test HTTP/1.1\\\\r\\\\n\\\\r\\\\n'|400"
  "connect-userinfo|b'CONNECT u@api.ex.test:443 HTTP/1.1\\\\r\\\\nHost: x\\\\r\\\\n\\\\r\\\\n'|400"
  "cl-te|b'POST http://plain.test/smuggle HTTP/1.1\\\\r\\\\nHost: plain.test\\\\r\\\\nContent-Length: 4\\\\r\\\\nTransfer-Encoding: chunked\\\\r\\\\n\\\\r\\\\n0\\\\r\\\\n\\\\r\\\\n'|400"
  "dup-host|b'GET http://plain.test/dup HTTP/1.1\\\\r\\\\nHost: plain.test\\\\r\\\\nHost: echo.test\\\\r\\\\n\\\\r\\\\n'|400"
  "obs-fold|b'GET http://plain.test/fold HTTP/1.1\\\\r\\\\nHost: plain.test\\\\r\\\\nX-A: 1\\\\r\\\\n  folded\\\\r\\\\n\\\\r\\\\n'|400"
  "bare-lf|b'GET http://plain.test/lf HTTP/1.1\\\\nHost: plain.test\\\\r\\\\n\\\\r\\\\n'|400"
  "te-gzip|b'POST http://plain.test/te HTTP/1.1\\\\r\\\\nHost: plain.test\\\\r\\\\nTransfer-Encoding: gzip, chunked\\\\r\\\\n\\\\r\\\\n'|501"
  "host-mismatch|b'GET http://plain.test/hm HTTP/1.1\\\\r\\\\nHost: echo.test\\\\r\\\\n\\\\r\\\\n'|400"
  "oversize|b'GET http://plain.test/big HTTP/1.1\\\\r\\\\nHost: plain.test\\\\r\\\\nX-Big: ' + b'a' * 20000 + b'\\\\r\\\\n\\\\r\\\\n'|431"
  "https-absolute|b'GET https://api.ex.test/ HTTP/1.1\\\\r\\\\nHost: api.ex.test\\\\r\\\\n\\\\r\\\\n'|400"
)
CMDS=""
for r in "${R[@]}"; do
  IFS='|' read -r name bytes want <<<"$r"
  CMDS+="printf '%s ' $name; python3 /workspace/c.py raw $PROXY 3128 \"$bytes\"; "
done
bx "$CMDS"
sed 's/^/# /' <<<"$OUT"
for r in "${R[@]}"; do
  IFS='|' read -r name bytes want <<<"$r"
  check "refused cleanly: $name ($want)" grep -q "^$name HTTP/1.1 $want" <<<"$OUT"
done
check "no smuggled request reached the upstream" bash -c '! grep -qE "/(smuggle|dup|fold|lf|te|hm|big)\"" <<<"$1"' _ "$(up_requests)"

# Limits: connections per box (429), idle timeout; other boxes unaffected.
new_box "{\"network\":\"egress\",\"egress\":{\"rules\":[{\"host\":\"api.ex.test\"}]}}" || not_ok "a second egress box"
EG2=$BOX
upload "$EG2" /workspace/ca.pem "$UP_CA"
BOX=$EG
bx "python3 /workspace/c.py hold $PROXY 6"
check "the 7th concurrent connection of a box gets 429" has "$OUT" "HTTP/1.1 429"
BOX=$EG2
bx 'curl -sS --max-time 20 --cacert /workspace/ca.pem https://api.ex.test/other-box-fine'
check "another box is not affected by the first box's limits or bad input" has "$(up_requests)" "/other-box-fine"
BOX=$EG
bx "python3 /workspace/c.py idle $PROXY"
check "an idle connection is closed by the proxy" has "$OUT" "closed"
bx "python3 /workspace/c.py halfhello $PROXY 6"
check "partial TLS hellos that the box closed free their slots (no 429 after)" has "$OUT" "HTTP/1.1 200"
check "audit: too-many-connections" has "$(audit_of "$EG" egress.connect)" "reason=too-many-connections"
AUD=$(audit_of "$EG")
check "allowed decisions are audited with bytes" grep -qE "egress.connect ok 200 host=api.ex.test port=443 addr=10.250.0.2 mode=tunnel via=proxy bytes_up=[1-9]" <<<"$AUD"
check "DNS stub answers are audited" grep -q "egress.dns denied 3 host=echo.test" <<<"$AUD"

# Audit volume: thousands of DNS questions, for the same names and for
# distinct ones, give O(intervals x names) records, not a record each; the
# counts add up, and a flood of distinct names stays under the per-box cap
# (60 records per 10 s interval, plus one "suppressed" record counting the
# rest).  The box's counts are written when it is deleted.
T0=$(date +%s)
new_box '{"network":"egress","egress":{"rules":[{"host":"api.ex.test"}]}}' || not_ok "a box for the DNS audit"
DNSBOX=$BOX
upload "$DNSBOX" /workspace/c.py "$CLIENT"
bx "python3 /workspace/c.py dns 169.254.0.53 1000 api.ex.test echo.test; python3 /workspace/c.py dnsflood 169.254.0.53 3000 flood.test"
check "the box asked 2000 + 3000 questions, all answered" has "$OUT" "sent=2000 answered=2000"$'\n'"sent=3000 answered=3000"
api DELETE "/v1/sandboxes/$DNSBOX"
# Interval ends (every 10 s or more) during the test: at most E/10 + 1.  A
# name has at most its first record, one per interval end and one at the
# deletion; the box at most 61 records per interval (plus its own
# sandbox.* and files.* records).
ENDS=$(( ($(date +%s) - T0 + 1) / 10 + 1 ))
IV=$(( ENDS + 2 ))
BOX=$EG
AUD=$(audit_of "$DNSBOX")
dns_sum() { # NEEDLE: records and summed count= of the records holding NEEDLE
  grep -F -- "$1" <<<"$AUD" | sed -n 's/.* count=\([0-9]*\).*/\1/p' | awk '{n++; s+=$1} END {print n+0, s+0}'
}
read -r N_API S_API <<<"$(dns_sum "egress.dns ok 0 host=api.ex.test ")"
read -r N_ECHO S_ECHO <<<"$(dns_sum "egress.dns denied 3 host=echo.test ")"
read -r N_ALL S_ALL <<<"$(dns_sum " count=")"
check "1000 questions for one name: at most a record per interval ($N_API records, at most $IV)" [ "$N_API" -ge 1 -a "$N_API" -le "$IV" ]
check "and their counts add up to 1000 ($S_API)" [ "$S_API" = 1000 ]
check "the same for a denied name ($N_ECHO records, counts $S_ECHO)" [ "$N_ECHO" -ge 1 -a "$N_ECHO" -le "$IV" -a "$S_ECHO" = 1000 ]
N_ROWS=$(grep -c . <<<"$AUD")
# The cap per interval (60 + the suppressed record), and the drain at the
# box's deletion: at most one record per aggregation entry, of which DNS
# names hold at most half (EGRESS_AUDIT_BOX_KEYS / 2 = 128).
MAXREC=$(((ENDS + 1) * 61 + 128 + 10))
check "3000 distinct names stay under the cap: $N_ROWS records in all, at most $MAXREC" [ "$N_ROWS" -le $MAXREC ]
check "every question is counted, suppressed ones included ($S_ALL of 5000)" [ "$S_ALL" = 5000 ]
check "the overflow is one record per interval saying how many" grep -qE "^egress.audit suppressed 0 count=[1-9][0-9]* egress decisions over the audit caps" <<<"$AUD"

# ---- inject mode and secrets -------------------------------------------------------------
IPOL='{"rules":[{"host":"api.ex.test","ports":[443,9443],"mode":"inject"},{"host":"echo.test","mode":"inject"},
 {"host":"other.test","mode":"inject"},{"host":"plain.test","ports":[80]}],
 "secrets":[{"name":"TOKEN","hosts":["api.ex.test"]},{"name":"OTHER","env":"OTHER_KEY","hosts":["api.ex.test"],"headers":["X-Api-Key"]}]}'
new_box "{\"network\":\"egress\",\"egress\":$IPOL}" || not_ok "an inject box is created ($BODY)"
INJ=$BOX
PH=$(jf '[s["placeholder"] for s in j["egress"]["secrets"] if s["name"]=="TOKEN"][0]')
check "the box's policy shows a placeholder, not the value" bash -c '[[ "$1" == husk_ph_* ]] && ! grep -qF "$2" <<<"$3"' _ "$PH" "$SECRET" "$BODY"
bx 'echo "TOKEN=$TOKEN"; echo "CA=$SSL_CERT_FILE $REQUESTS_CA_BUNDLE $NODE_EXTRA_CA_CERTS $CURL_CA_BUNDLE"; cat /proc/self/environ | tr "\0" "\n" | grep -c husk_ph_'
check "the box env holds the placeholder" has "$OUT" "TOKEN=$PH"
check "the CA bundle variables point at the box's bundle" has "$OUT" "CA=/tmp/.husk-ca-bundle.pem /tmp/.husk-ca-bundle.pem /tmp/.husk-ca-bundle.pem /tmp/.husk-ca-bundle.pem"
# What the box can see (every process's env and command line, its files),
# dumped by the box itself and searched here: the secret is not in the
# command, so any hit would be a leak.
bx "cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\\0' '\\n'; find /workspace /tmp -type f ! -name .husk-ca-bundle.pem -exec cat {} + 2>/dev/null; grep -aF -e husk_ph_ -e '-----BEGIN' /tmp/.husk-ca-bundle.pem | sort | uniq -c; echo; echo scanned"
check "the box's view (env, /proc, files) holds the placeholder" has "$OUT" "$PH"
check "the secret is nowhere in the box's files, env or /proc" bash -c 'grep -q "^scanned" <<<"$1" && ! grep -qF "$2" <<<"$1"' _ "$OUT" "$SECRET"
check "the CA bundle holds no private key" lacks "$OUT" "PRIVATE KEY"

bx 'curl -sS --max-time 20 -H "Authorization: Bearer $TOKEN" -H "X-Api-Key: $OTHER_KEY" https://api.ex.test/inject'
REQ=$(grep '"/inject"' <<<"$(up_requests)")
check "upstream receives the real secret in Authorization" has "$REQ" "\"Authorization\": \"Bearer $SECRET\""
check "upstream receives the second secret in its header" has "$REQ" "\"X-Api-Key\": \"$SECRET2\""
check "upstream sees no placeholder" lacks "$REQ" "husk_ph_"
check "the echo reply reaching the box has the placeholder back" has "$OUT" "Bearer $PH"
check "the echo reply reaching the box never holds the secret" lacks "$OUT" "$SECRET"
bx 'curl -sS --noproxy "*" --max-time 20 -H "Authorization: Bearer $TOKEN" https://api.ex.test/transparent-inject'
check "inject also works for a program that ignores the proxy (redirected 443)" has "$(grep '/transparent-inject' <<<"$(up_requests)")" "Bearer $SECRET"
bx 'curl -sS --max-time 20 -H "Authorization: Bearer $TOKEN" https://api.ex.test/chunked'
check "a chunked echo is scrubbed too" bash -c 'grep -qF "$2" <<<"$1" && ! grep -qF "$3" <<<"$1"' _ "$OUT" "$PH" "$SECRET"
# An upstream that reflects the header encoded (this echo answers in JSON,
# which escapes quotes, backslashes and slashes) must not hand the value to
# the box either: the scrub also knows its JSON, percent and base64 forms.
SECRET3="q\"uo\\te/sl-$(head -c 9 /dev/urandom | od -An -tx1 | tr -d ' \n')"
api PUT /v1/secrets/ENCODED -d "$(python3 -c 'import json,sys; print(json.dumps({"value": sys.argv[1]}))' "$SECRET3")"
expect_code "a secret with quotes, a backslash and a slash is stored" 200
SAVED_BOX=$BOX
new_box '{"network":"egress","egress":{"rules":[{"host":"api.ex.test","mode":"inject"}],"secrets":[{"name":"ENCODED","env":"ENC","hosts":["api.ex.test"],"headers":["X-Api-Key"]}]}}' || not_ok "a box bound to the encoded secret"
ENCBOX=$BOX
bx 'curl -sS --max-time 20 -H "X-Api-Key: $ENC" https://api.ex.test/encoded'
check "upstream receives the exact value" has "$(grep '/encoded' <<<"$(up_requests)")" "$(python3 -c 'import json,sys; print(json.dumps(sys.argv[1])[1:-1])' "$SECRET3")"
forms() { python3 -c '
import base64, json, sys, urllib.parse
v = sys.argv[1]
print(v); print(json.dumps(v)[1:-1]); print(json.dumps(v)[1:-1].replace("/", "\\/"))
print(urllib.parse.quote(v, safe="")); print(base64.b64encode(v.encode()).decode().rstrip("="))' "$1"; }
leaks() { while IFS= read -r f; do grep -qF -- "$f" <<<"$1" && echo "leak: $f"; done < <(forms "$2"); }
check "the JSON echo reaching the box holds the placeholder" has "$OUT" "husk_ph_"
check "and none of the value's raw, JSON, percent or base64 forms" test -z "$(leaks "$OUT" "$SECRET3")"
api DELETE "/v1/sandboxes/$ENCBOX"
BOX=$SAVED_BOX

# A stateful upstream: the secret sent once is stored there and handed back
# later to requests that carry no placeholder, by the bound host, by
# another inject host, and over plain HTTP; in a header and in the body,
# raw, base64 and percent-encoded, and split across chunks.  Every secret
# bound to the box is scrubbed from every response, not only the ones the
# request used.
bx 'curl -sS --max-time 20 -o /dev/null -H "Authorization: Bearer $TOKEN" https://api.ex.test/store'
check "the stateful upstream stored the real secret" has "$(grep '"/store"' <<<"$(up_requests)")" "Bearer $SECRET"
bx 'for u in https://api.ex.test/recall https://api.ex.test/recall-chunked https://other.test/recall-chunked http://plain.test/recall; do curl -sS -i --max-time 20 "$u"; echo; done'
recalled() { python3 -c '
import base64, json, sys, urllib.parse
out, secret, ph = sys.argv[1], sys.argv[2], sys.argv[3]
def b64(t):  # lenient: a scrubbed value is no longer valid base64
    t = "".join(ch for ch in t if ch.isalnum() or ch in "+/")
    return base64.b64decode(t[:len(t) // 4 * 4]).decode("latin-1")
bodies = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
heads = [l for l in out.splitlines() if l.lower().startswith("x-stored:")]
seen = [b["stored"] for b in bodies] + [b64(b["b64"]) for b in bodies] \
    + [urllib.parse.unquote(b["pct"]) for b in bodies] + heads
ok = len(bodies) == 4 and len(heads) == 4 and secret not in out and all(secret not in v for v in seen) \
    and all(ph in b["stored"] for b in bodies)
print("ok" if ok else "leak or missing: %d bodies %d heads, %d with the secret" % (
    len(bodies), len(heads), sum(secret in v for v in seen + [out])))' "$@"; }
R=$(recalled "$OUT" "$SECRET" "$PH")
check "a stored secret handed back later (no placeholder in the request) reaches the box only as its placeholder ($R)" [ "$R" = ok ]

# An upstream that compresses its response although it was asked for
# identity: the scrubber cannot read the body, so the box gets the proxy's
# 502 instead, never the (compressed) secret, and the refusal is audited.
# curl --compressed would decode what it got, so a relayed secret would
# show in its output.
bx 'for u in https://api.ex.test/coded/gzip/echo https://api.ex.test/coded/br/recall https://api.ex.test/coded/identity,zstd/recall; do curl -sS -i --compressed --max-time 20 -H "Authorization: Bearer $TOKEN" "$u" 2>&1; echo; done; for u in https://other.test/coded/deflate/recall http://plain.test/coded/gzip/recall; do curl -sS -i --compressed --max-time 20 "$u" 2>&1; echo; done'
CREQ=$(grep '"/coded/gzip/echo"' <<<"$(up_requests)")
check "the compressing upstream got the secret (it is in its compressed echo)" has "$CREQ" "Bearer $SECRET"
check "and was asked for identity" has "$CREQ" '"Accept-Encoding": "identity"'
check "every compressed response is refused with 502 ($(grep -c '^HTTP/1.1 502' <<<"$OUT"))" \
  [ "$(grep -c '^HTTP/1.1 502 the upstream response is compressed' <<<"$OUT")" = 5 ]
check "the box never sees the secret from a compressed response" lacks "$OUT" "$SECRET"
check "nor its placeholder in a relayed body" lacks "$OUT" '"stored"'
AUD=$(audit_of "$INJ")
check "audit: the compressed inject response" has "$AUD" "egress.inject error 502"
check "audit: names the reason" has "$AUD" "reason=upstream-content-encoding"
check "audit: the compressed plain HTTP response too" bash -c 'grep -q "^egress.http error 502 .*reason=upstream-content-encoding" <<<"$1"' _ "$AUD"
bx 'curl -sS -o /dev/null -w "%{http_code}\n" -I --max-time 20 https://api.ex.test/coded/gzip/echo'
check "a HEAD response naming a coding (no body) is relayed" has "$OUT" "200"

CAP=$T_SCRATCH/wire.pcap
tcpdump -i "$UP_IF" -w "$CAP" -U >/dev/null 2>&1 &
TCPD=$!
sleep 1
bx 'curl -sS --max-time 20 -H "Authorization: Bearer $TOKEN" https://echo.test/unbound; echo; curl -sS --max-time 20 -H "X-Api-Key: $TOKEN" https://api.ex.test/wrong-header; echo; curl -sS --max-time 20 -H "Authorization: Bearer $TOKEN" http://plain.test/cleartext'
sleep 1
kill "$TCPD" 2>/dev/null; wait "$TCPD" 2>/dev/null
check "the placeholder to an unbound host is blocked with 403" bash -c '[ "$(grep -c "refused by the box" <<<"$1")" -ge 2 ]' _ "$OUT"
check "the placeholder in a header it is not bound to is blocked" lacks "$(up_requests)" "/wrong-header"
check "the placeholder over cleartext HTTP is blocked" lacks "$(up_requests)" "/cleartext"
check "the unbound request never reached the upstream" lacks "$(up_requests)" "/unbound"
check "the secret never appeared on the wire (packet capture)" bash -c '[ -f "$1" ] && ! grep -aqF "$2" "$1"' _ "$CAP" "$SECRET"
AUD=$(audit_of "$INJ")
check "audit: placeholder to an unbound destination" has "$AUD" "reason=placeholder-not-bound-to-destination"

bx 'curl -sS --max-time 20 "https://api.ex.test/q?t=$TOKEN" -d "body=$TOKEN"'
REQ=$(grep '"/q?t=' <<<"$(up_requests)")
check "placeholders in the URL and body are never substituted" bash -c 'grep -qF "$2" <<<"$1" && ! grep -qF "$3" <<<"$1"' _ "$REQ" "$PH" "$SECRET"
bx 'curl -sS --max-time 20 -o /dev/null -w "%{http_code} %{redirect_url}" -H "Authorization: Bearer $TOKEN" https://api.ex.test/redirect; echo; curl -sS -L --location-trusted --max-time 20 -H "Authorization: Bearer $TOKEN" https://api.ex.test/redirect; echo'
check "the redirect reaches the box unfollowed" has "$OUT" "302 https://other.test/landing"
check "following it to another host carries no secret (blocked)" bash -c '! grep -F "/landing" <<<"$1" | grep -qF "$2"' _ "$(up_requests)" "$SECRET"
check "the follow-up with the placeholder was refused" has "$OUT" "refused by the box"
bx 'curl -sS --max-time 20 -H "Host: echo.test" -H "Authorization: Bearer $TOKEN" https://api.ex.test/hostmix; echo rc=$?'
check "Host different from SNI/CONNECT gets 421" has "$OUT" "Host header must name"
check "no upstream connection for it" lacks "$(up_requests)" "/hostmix"
bx 'curl -sS --max-time 20 https://api.ex.test:9443/untrusted; echo rc=$?'
check "an upstream with an untrusted certificate gets 502" has "$OUT" "cannot reach the destination safely"
check "and no request bytes" lacks "$(up_requests)" "/untrusted"

# A policy update keeps the placeholders the box already has.
api PUT "/v1/sandboxes/$INJ/network" -d "{\"network\":\"egress\",\"egress\":$IPOL}"
check "a policy update keeps the box's placeholder" bash -c '[ "$(python3 -c "import json,sys; print([s[\"placeholder\"] for s in json.loads(sys.argv[1])[\"egress\"][\"secrets\"] if s[\"name\"]==\"TOKEN\"][0])" "$1")" = "$2" ]' _ "$BODY" "$PH"
bx 'curl -sS --max-time 20 -H "Authorization: Bearer $TOKEN" https://api.ex.test/after-update'
check "and injection still works after the update" has "$(grep '/after-update' <<<"$(up_requests)")" "Bearer $SECRET"

# Another box's placeholder.
new_box "{\"network\":\"egress\",\"egress\":$IPOL}" || not_ok "a second inject box"
INJ2=$BOX
PH2=$(jf '[s["placeholder"] for s in j["egress"]["secrets"] if s["name"]=="TOKEN"][0]')
check "each box gets its own placeholder" [ -n "$PH2" ] && [ "$PH2" != "$PH" ]
bx "curl -sS --max-time 20 -H 'Authorization: Bearer $PH' https://api.ex.test/foreign; echo rc=\$?; tail -c 300 /tmp/.husk-ca-bundle.pem"
check "a box using another box's placeholder is blocked" bash -c 'grep -q "refused by the box" <<<"$1" && ! grep -q /foreign <<<"$2"' _ "$OUT" "$(up_requests)"
check "audit: unknown placeholder" has "$(audit_of "$INJ2")" "reason=unknown-placeholder"
CA2=$(tail -c 300 <<<"$OUT")
BOX=$INJ
bx 'tail -c 300 /tmp/.husk-ca-bundle.pem'
check "each box has its own CA" [ "$(tail -c 300 <<<"$OUT")" != "$CA2" ]

# ---- network update while running --------------------------------------------------------
BOX=$EG2
api PUT "/v1/sandboxes/$EG2/network" -d '{"network":"none"}'
expect_code "switching a running box to none" 200
bx "ip -o link | grep -c eth0; curl -sS --max-time 5 --cacert /workspace/ca.pem https://api.ex.test/after-none; echo rc=\$?"
check "after none: no link, no egress" bash -c 'grep -q "^0" <<<"$1" && ! grep -q /after-none <<<"$2"' _ "$OUT" "$(up_requests)"
api PUT "/v1/sandboxes/$EG2/network" -d '{"network":"egress","egress":{"rules":[{"host":"echo.test"}]}}'
expect_code "switching it back to egress with a new policy" 200
bx 'curl -sS --max-time 20 --cacert /workspace/ca.pem https://echo.test/after-egress; curl -sS --max-time 10 --cacert /workspace/ca.pem https://api.ex.test/old-rule; echo rc=$?'
check "the new policy applies" has "$(up_requests)" "/after-egress"
check "the old rule no longer does" lacks "$(up_requests)" "/old-rule"
api PUT "/v1/sandboxes/$EG2/network" -d '{"network":"egress","egress":{"rules":[{"host":"*.x"}]}}'
expect_code "a bad policy update is refused" 400

# ---- restart: re-adoption, sweep ------------------------------------------------------------
serve_kill9
check "the daemon crashed with egress boxes: their links stay with them" test "$(links | wc -l)" -ge 4
# Audit retention: records older than --audit-retention days go at start
# (two planted while the daemon is down: 40 and 10 days old).
audit_sql() { python3 -c 'import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); r=c.execute(sys.argv[2]).fetchall(); c.commit(); print(r[0][0] if r else "")' "$DATA/husk.db" "$1"; }
audit_sql "INSERT INTO audit (ts_ms, action, outcome) VALUES
  (CAST(strftime('%s','now') AS INTEGER) * 1000 - 40 * 86400000, 'test.retention-old', 'ok'),
  (CAST(strftime('%s','now') AS INTEGER) * 1000 - 10 * 86400000, 'test.retention-young', 'ok') RETURNING id" >/dev/null
serve_start --default-ttl 3600 --egress-resolver "$UP_IP:53" --egress-allow-range "$UP_NET" --egress-ca-file "$UP_CA" \
  --audit-retention 30 || not_ok "restart"
retention_done() { [ "$(audit_sql "SELECT count(*) FROM audit WHERE action = 'test.retention-old'")" = 0 ]; }
check "audit retention: a record older than 30 days is removed" wait_for 20 retention_done
check "audit retention: a younger one stays" [ "$(audit_sql "SELECT count(*) FROM audit WHERE action = 'test.retention-young'")" = 1 ]
check "audit retention: the database still refuses to delete a fresh record" bash -c '! python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); c.execute(\"DELETE FROM audit WHERE action = '"'"'egress.dns'"'"'\"); c.commit()" "$1" 2>/dev/null' _ "$DATA/husk.db"
KEY=$TKEY
BOX=$INJ
bx 'curl -sS --max-time 20 -H "Authorization: Bearer $TOKEN" https://api.ex.test/after-restart'
check "after a restart the inject box works again (new CA installed)" has "$(grep '/after-restart' <<<"$(up_requests)")" "Bearer $SECRET"
check "one table element per live egress box" [ "$(set_elems)" = 4 ]
# Paused in memory its connections wait; paused to disk its link goes,
# and its resume makes a new one with the same policy and secrets.
api POST "/v1/sandboxes/$INJ/pause"
check "an inject box pauses" [ "$CODE" = 200 ]
api POST "/v1/sandboxes/$INJ/resume"
bx 'curl -sS --max-time 20 -H "Authorization: Bearer $TOKEN" https://api.ex.test/after-pause'
check "after a resume the inject box works" has "$(grep '/after-pause' <<<"$(up_requests)")" "Bearer $SECRET"
api POST "/v1/sandboxes/$INJ/pause" -d '{"keep_memory":false}'
check "an inject box pauses to disk" [ "$CODE" = 200 ]
elems_are() { [ "$(set_elems)" = "$1" ]; }
check "with its jail, its link and its firewall element go" wait_for 10 elems_are 3
api POST "/v1/sandboxes/$INJ/resume"
check "it resumes from disk" [ "$CODE" = 200 ]
bx 'curl -sS --max-time 20 -H "Authorization: Bearer $TOKEN" https://api.ex.test/after-disk'
check "after a resume from disk the inject box reaches the outside again, its secret added" has "$(grep '/after-disk' <<<"$(up_requests)")" "Bearer $SECRET"
check "one table element per live egress box again" [ "$(set_elems)" = 4 ]
for b in $NONE $EG $EG2 $INJ $INJ2; do api DELETE "/v1/sandboxes/$b"; done
check "deleting the boxes removes every link" wait_for 10 bash -c '[ -z "$(ip -o link | grep -o "hk'"$HASH6"'-[0-9]*")" ]'
check "and every firewall element" wait_for 10 bash -c '[ "$(nft list set inet husk_'"$HASH8"' links 2>/dev/null | grep -c "10\.239\.")" = 0 ]'
# Nothing of a box's egress stays in the daemon once the box is gone, even
# with a proxied connection open at the time (it is cut).
fdcount() { ls "/proc/$SPID/fd" 2>/dev/null | wc -l; }
fds_at_least() { [ "$(fdcount)" -ge "$1" ]; }
fds_equal() { [ "$(fdcount)" -eq "$1" ]; }
no_links() { [ -z "$(links)" ]; }
threads() { ls "/proc/$SPID/task" 2>/dev/null | wc -l; }
threads_equal() { [ "$(threads)" -eq "$1" ]; }
F0=$(fdcount)
T0=$(threads)
new_box '{"network":"egress","egress":{"rules":[{"host":"api.ex.test"}]}}' || not_ok "a last egress box"
upload "$BOX" /workspace/c.py "$CLIENT"
bx 'env | sed -n "s|^HTTP_PROXY=http://\([0-9.]*\):.*|\1|p"'
P=$OUT
api POST "/v1/sandboxes/$BOX/exec" -d "{\"cmd\":[\"python3\",\"/workspace/c.py\",\"idle\",\"$P\"],\"background\":true}"
check "a proxied connection is open" wait_for 10 fds_at_least $((F0 + 6))
api POST "/v1/sandboxes/$BOX/exec" -d "{\"cmd\":[\"python3\",\"/workspace/c.py\",\"halfhello\",\"$P\",\"4\",\"hold\"],\"background\":true}"
check "partial hellos held open: their threads wait" wait_for 10 bash -c '[ "$(ls /proc/'"$SPID"'/task | wc -l)" -ge '"$((T0 + 5))"' ]'
api DELETE "/v1/sandboxes/$BOX"
check "after the delete no thread of the box's connections is left" wait_for 10 threads_equal "$T0"
if wait_for 10 fds_equal "$F0"; then
  ok "after the delete the daemon holds exactly the fds it held before the box"
else
  not_ok "after the delete the daemon holds exactly the fds it held before the box ($F0 before, $(fdcount) now)"
  ls -l "/proc/$SPID/fd" | sed 's/^/#   /'
fi
check "and the link is gone" wait_for 10 no_links
serve_stop
check "the daemon's log has no sanitizer report (ASan/UBSan/LSan runs)" bash -c '! grep -q "Sanitizer\|runtime error" "$1"' _ "$SERVE_LOG"
check "a daemon stopping with no egress box removes its table" bash -c '! nft list table inet "husk_$1" >/dev/null 2>&1' _ "$HASH8"

# ---- nothing of the secret anywhere on our side ------------------------------------------------
check "the secret is in no husk log" bash -c '! grep -raF "$1" "$2"' _ "$SECRET" "$SERVE_LOG"
check "the secret is in no file of the data directory (database, WAL, keys)" bash -c '! grep -raF "$1" "$2"' _ "$SECRET" "$DATA"
check "the second secret neither" bash -c '! grep -raF "$1" "$2" "$3"' _ "$SECRET2" "$DATA" "$SERVE_LOG"
check "the audit table has no secret" bash -c '! python3 -c "import sqlite3,sys; [print(r) for r in sqlite3.connect(sys.argv[1]).execute(\"SELECT * FROM audit\")]" "$1/husk.db" | grep -qF "$2"' _ "$DATA" "$SECRET"
serve_finish
