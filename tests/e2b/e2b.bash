# Helpers shared by the E2B suites (sourced after tests/lib.sh and
# tests/serve/serve.bash).  Not a suite itself.
#
#   e2b_setup               install the pinned SDKs (tests/e2b/setup.sh)
#   e2b_key TENANT_ID       admin: an E2B key (e2b_ + 40 hex) of the tenant; sets EKEY
#   e2b_node SCRIPT [ARGS]  run a Node script of tests/e2b with the SDK
#                           pointed at $URL and $EKEY (E2B_API_URL,
#                           E2B_SANDBOX_URL, E2B_API_KEY); its TAP lines
#                           ("ok N - ..." / "not ok N - ...") count
E2B_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

e2b_setup() {
  sh "$E2B_DIR/setup.sh"
}

e2b_key() {
  local b
  b=$(curl -s -X POST -H "Authorization: Bearer $ADMIN" "$URL/v1/tenants/$1/keys" -d '{"format":"e2b"}')
  EKEY=$(python3 -c 'import json,sys; print(json.loads(sys.argv[1]).get("key",""))' "$b" 2>/dev/null)
  [ -n "$EKEY" ]
}

e2b_node() {
  local script=$1
  shift
  (cd "$E2B_DIR" && E2B_API_URL="$URL" E2B_SANDBOX_URL="$URL" E2B_API_KEY="$EKEY" \
    E2B_DOMAIN=husk.invalid node "$script" "$@")
}
