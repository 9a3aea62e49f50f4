# The browser of the browser suites (sourced after tests/lib.sh): Debian's
# Chromium, headless, driven by playwright-core on the Node that
# tests/browser/package-lock.json pins.
#
# browser_setup: BROWSER_DIR, CHROMIUM and NODE set, the driver installed
# (npm ci again only when the lockfile changed since the last install);
# 1 after a not_ok saying what is missing.
browser_setup() {
  BROWSER_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  CHROMIUM=${CHROMIUM:-/usr/bin/chromium}
  if [ ! -x "$CHROMIUM" ]; then
    not_ok "Chromium is installed at $CHROMIUM (scripts/deps.sh test installs Debian's chromium)"
    return 1
  fi
  if ! { [ -f "$BROWSER_DIR/node_modules/.package-lock.json" ] &&
    cmp -s "$BROWSER_DIR/package-lock.json" "$BROWSER_DIR/node_modules/.husk-lock"; }; then
    if ! command -v npm >/dev/null 2>&1; then
      not_ok "npm is installed (scripts/deps.sh test installs it)"
      return 1
    fi
    if (cd "$BROWSER_DIR" && npm ci --no-audit --no-fund --loglevel=error >&2); then
      cp "$BROWSER_DIR/package-lock.json" "$BROWSER_DIR/node_modules/.husk-lock"
    fi
  fi
  NODE="$BROWSER_DIR/node_modules/node/bin/node"
  if [ ! -x "$NODE" ] || [ ! -d "$BROWSER_DIR/node_modules/playwright-core" ]; then
    not_ok "npm ci in tests/browser installs playwright-core and its Node"
    return 1
  fi
}
