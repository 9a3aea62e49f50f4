#!/bin/bash
# Refused command lines of husk serve: the daemon does not start, and the
# message names the option whose value was refused (the core's own
# messages name its concepts, not the front's flags).
. "$(dirname "$0")/../lib.sh"

DATA=$T_SCRATCH/data
mkdir -p "$DATA"
ADMIN=adm_$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')

bad_option() { # DESC TEXT ARGS...: husk serve ARGS exits 2 and says TEXT
  local desc=$1 want=$2 out rc
  shift 2
  out=$(HUSK_ADMIN_KEY=$ADMIN timeout 20 "$HUSK" serve --listen 127.0.0.1:0 --data "$DATA" "$@" 2>&1 </dev/null)
  rc=$?
  if [ "$rc" -eq 2 ] && grep -qF -- "$want" <<<"$out"; then
    ok "$desc"
  else
    not_ok "$desc (exit $rc: $out)"
  fi
}

bad_option "--egress-resolver: not an IP address" \
  "husk serve: --egress-resolver: resolver \`dns.example\` is not an IP address" \
  --egress-resolver dns.example
bad_option "--egress-resolver: a bad port" "husk serve: --egress-resolver: " \
  --egress-resolver 127.0.0.1:99999
bad_option "--egress-allow-range: not a range" "husk serve: --egress-allow-range: " \
  --egress-allow-range 10.0.0.0/99
bad_option "--egress-allow-range: the 17th" "at most 16 --egress-allow-range options" \
  $(for i in $(seq 17); do echo --egress-allow-range "10.0.$i.0/24"; done)
check "no refused start created a database" [ ! -e "$DATA/husk.db" ]

finish
