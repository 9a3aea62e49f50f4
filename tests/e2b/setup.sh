#!/bin/sh
# Install the pinned npm packages the E2B suites drive husk with (the
# official SDKs: e2b 2.51 and 2.45, @e2b/code-interpreter 2.8), exactly as
# package-lock.json says.  Re-runs `npm ci` only when the lockfile changed
# since the last install.
set -eu
cd "$(dirname "$0")"
if [ -f node_modules/.package-lock.json ] && cmp -s package-lock.json node_modules/.husk-lock; then
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "tests/e2b/setup.sh: npm is missing (scripts/deps.sh test installs it)" >&2
  exit 1
fi
npm ci --no-audit --no-fund --loglevel=error >&2
cp package-lock.json node_modules/.husk-lock
