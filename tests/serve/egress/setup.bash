# The egress suite's private network (sourced): an "upstream" network
# namespace reached from the host over a veth pair, with the test servers
# of upstream.py, a test CA and certificates for the test names.
#
#   up_start     create it all; sets UP_DIR, UP_IP, UP_CA
#   up_stop      remove it (also on exit)
#   up_requests  the upstream's request log; up_dns_count NAME TYPE

UP_NS=husk-egress-$$
UP_IF=hkt$$
UP_IP=10.250.0.2
UP_NET=10.250.0.0/24
UP_DIR=$T_SCRATCH/upstream
UP_CA=$UP_DIR/ca.pem
UP_PID=""

up_stop() {
  [ -n "$UP_PID" ] && kill "$UP_PID" 2>/dev/null && wait "$UP_PID" 2>/dev/null
  UP_PID=""
  ip netns pids "$UP_NS" 2>/dev/null | xargs -r kill -9 2>/dev/null
  ip link del "$UP_IF" 2>/dev/null
  ip netns del "$UP_NS" 2>/dev/null
  return 0
}

up_certs() {
  local d=$UP_DIR
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 \
    -subj "/CN=husk egress test CA" -keyout "$d/ca.key" -out "$d/ca.pem" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign" 2>/dev/null || return 1
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=api.ex.test" \
    -keyout "$d/server.key" -out "$d/server.csr" 2>/dev/null || return 1
  printf 'subjectAltName=DNS:api.ex.test,DNS:*.ex.test,DNS:echo.test,DNS:other.test,DNS:a.wild.test,DNS:a.b.wild.test,DNS:wild.test,DNS:rebind.test,DNS:mixed.test,DNS:plain.test,IP:%s\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' "$UP_IP" >"$d/ext.cnf"
  openssl x509 -req -in "$d/server.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial -days 2 \
    -extfile "$d/ext.cnf" -out "$d/server.pem" 2>/dev/null || return 1
  # A certificate no trusted CA signed (for the verification test).
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=api.ex.test" \
    -addext "subjectAltName=DNS:api.ex.test" -keyout "$d/self.key" -out "$d/self.pem" 2>/dev/null
}

up_start() {
  mkdir -p "$UP_DIR" || return 1
  up_certs || return 1
  echo '{}' >"$UP_DIR/zone.json"
  ip netns add "$UP_NS" || return 1
  ip link add "$UP_IF" type veth peer name eth0 netns "$UP_NS" || return 1
  ip addr add 10.250.0.1/24 dev "$UP_IF" && ip link set "$UP_IF" up || return 1
  ip -n "$UP_NS" addr add "$UP_IP/24" dev eth0 && ip -n "$UP_NS" link set eth0 up &&
    ip -n "$UP_NS" link set lo up || return 1
  ip netns exec "$UP_NS" python3 "$(dirname "${BASH_SOURCE[0]}")/upstream.py" "$UP_DIR" "$UP_IP" \
    >"$UP_DIR/upstream.out" 2>&1 &
  UP_PID=$!
  for _ in $(seq 100); do [ -f "$UP_DIR/ready" ] && return 0; sleep 0.05; done
  return 1
}

up_zone() { printf '%s\n' "$1" >"$UP_DIR/zone.json"; }
up_requests() { cat "$UP_DIR/requests.log" 2>/dev/null; }
up_dns_count() { # NAME TYPE(1|28)
  grep -c "\"name\": \"$1\", \"type\": $2}" "$UP_DIR/dns.log" 2>/dev/null
}
