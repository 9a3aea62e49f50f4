# Helpers shared by the OAuth suites (sourced after tests/lib.sh and
# tests/serve/serve.bash).  Not a suite itself.
#
#   oauth_setup          Chromium, the pinned browser driver and its Node
#                        (tests/browser), the pinned MCP clients
#                        (tests/mcp/setup.sh); sets NODE, CHROMIUM,
#                        BROWSER_DIR, MCPDIR, OAUTH_DIR; anything missing
#                        is a failure (tests/browser/browser.bash).
#   oauth_user VAR NAME ROLE [DISPLAY NAME]
#                        POST /v1/users with $TKEY, password $PASSWORD;
#                        the user's id in $VAR
#   drive NAME ENV...    tests/oauth/sdk_flow.mjs with these variables
#                        added; its TAP lines are printed, its results
#                        JSON in $T_SCRATCH/NAME.json
OAUTH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
MCPDIR=$(cd "$OAUTH_DIR/../mcp" && pwd)
. "$OAUTH_DIR/../browser/browser.bash"
# 12 or more bytes (docs/oauth.md); the same for every user of a suite.
PASSWORD='correct horse battery'

oauth_setup() {
  if ! browser_setup; then
    finish
    exit 1
  fi
  # The SDK clients and the Inspector, as the MCP suites pin them.
  if ! "$MCPDIR/setup.sh"; then
    not_ok "npm packages install (tests/mcp/setup.sh)"
    finish
    exit 1
  fi
}

oauth_user() { # VAR NAME ROLE [DISPLAY]
  local save=$KEY disp=""
  [ $# -ge 4 ] && disp=",\"display_name\":\"$4\""
  KEY=$TKEY
  api POST /v1/users -d "{\"name\":\"$2\",\"role\":\"$3\",\"password\":\"$PASSWORD\"$disp}"
  KEY=$save
  if [ "$CODE" = 201 ]; then
    printf -v "$1" '%s' "$(jf 'j["id"]')"
    ok "POST /v1/users: $2 ($3)"
  else
    printf -v "$1" '%s' ""
    not_ok "POST /v1/users: $2 ($3) (got $CODE: $(head -c 300 <<<"$BODY"))"
  fi
}

drive() { # NAME ENV...
  local name=$1 rc; shift
  (cd "$OAUTH_DIR" && env TMPDIR="$T_SCRATCH" URL="$URL" ORG="$ORG" PASSWORD="$PASSWORD" \
    CHROMIUM="$CHROMIUM" MCPDIR="$MCPDIR" BROWSER_DIR="$BROWSER_DIR" SHOTS="$T_SCRATCH" \
    OUT="$T_SCRATCH/$name.json" "$@" timeout 200 "$NODE" sdk_flow.mjs) \
    >"$T_SCRATCH/$name.out" 2>"$T_SCRATCH/$name.err"
  rc=$?
  cat "$T_SCRATCH/$name.out"
  if [ "$rc" -ne 0 ] && ! grep -q '^not ok' "$T_SCRATCH/$name.out"; then
    not_ok "$name: the driver failed (exit $rc)"
    tail -20 "$T_SCRATCH/$name.err" | sed 's/^/#   /'
  fi
  [ -s "$T_SCRATCH/$name.json" ] || echo '{}' >"$T_SCRATCH/$name.json"
}
# res NAME EXPR: Python on a driver's results JSON (j).
res() { BODY=$(cat "$T_SCRATCH/$1.json") jf "$2"; }

# No Chromium of this suite is left (its profiles live under $T_SCRATCH).
no_chromium() { [ -z "$(pgrep -f -- "--user-data-dir=$T_SCRATCH/")" ]; }
