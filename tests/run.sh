#!/bin/bash
# Runs every husk test suite and prints one closing line: "N passed, N failed".
#   tests/run.sh            all suites
#   tests/run.sh e2e        only suites whose path contains "e2e"
set -u
cd "$(dirname "$0")/.."
root=$(pwd)
filter=${1:-}
pass=0
fail=0
failed_suites=()

run_suite() { # NAME COMMAND...
  local name=$1; shift
  [ -n "$filter" ] && [[ "$name" != *"$filter"* ]] && return 0
  echo "# --- $name"
  local log t0
  log=$(mktemp)
  t0=$SECONDS
  "$@" 2>&1 | tee "$log"
  local rc=${PIPESTATUS[0]}
  local p f
  p=$(grep -c '^ok ' "$log")
  f=$(grep -c '^not ok ' "$log")
  if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; echo "not ok - $name exited with $rc"; fi
  pass=$((pass + p)); fail=$((fail + f))
  if [ "$f" -gt 0 ]; then
    failed_suites+=("$name")
    # What failed and the diagnostics printed around it, said again at the
    # end: CI shows only the tail of this output.
    {
      echo "# $name:"
      grep -n -B2 -A3 '^not ok ' "$log" | grep -v '^[0-9]*[:-]ok ' | cut -c1-240 | head -n 30
      echo "#   (last lines)"
      tail -n 8 "$log" | cut -c1-240
    } >>"$failures"
  fi
  echo "# --- $name: $p passed, $f failed, $((SECONDS - t0)) s"
  rm -f "$log"
}
failures=$(mktemp)
trap 'rm -f "$failures"' EXIT

for b in build/tests/test_*; do
  [ -x "$b" ] && run_suite "unit/$(basename "$b")" "$b"
done
for b in build-asan/tests/test_*; do
  [ -x "$b" ] && run_suite "unit-asan/$(basename "$b")" "$b"
done
# The code-context runners (src/ctx/), driven through their fds outside a box.
for s in tests/ctx/*.py; do
  [ -f "$s" ] && run_suite "${s#tests/}" /usr/bin/python3 "$s"
done
# The libFuzzer harnesses (make fuzz-build): regression inputs, then a few
# seconds of fuzzing each; a crash fails the suite.
[ -d build-fuzz/fuzz ] && run_suite fuzz/smoke tests/fuzz/run.sh "${FUZZ_SMOKE_SECONDS:-4}"
for s in tests/e2e/*.sh tests/hostile/run.sh; do
  [ -f "$s" ] && run_suite "${s#tests/}" env HUSK="$root/build/husk" bash "$s"
done
# The daemon, driven over HTTP.
for s in tests/serve/*.sh; do
  [ -f "$s" ] && run_suite "${s#tests/}" env HUSK="$root/build/husk" bash "$s"
done
# People signing in with OAuth (docs/oauth.md): the MCP SDK clients and the
# Inspector, with a person in headless Chromium on husk's sign-in page, as
# the browser suites above (upload_browser.sh, preview_browser.sh).
for s in tests/oauth/*.sh; do
  [ -f "$s" ] && run_suite "${s#tests/}" env HUSK="$root/build/husk" bash "$s"
done
# The E2B-compatible API (docs/e2b.md): the official E2B SDKs, pinned in
# tests/e2b/package-lock.json, against husk.
for s in tests/e2b/*.sh; do
  [ -f "$s" ] && [ "$(basename "$s")" != setup.sh ] &&
    run_suite "${s#tests/}" env HUSK="$root/build/husk" bash "$s"
done
# Templates: images imported, built and run, from the command line.
for s in tests/template/*.sh; do
  [ -f "$s" ] && run_suite "${s#tests/}" env HUSK="$root/build/husk" bash "$s"
done
# The library as a user gets it: installed, linked, packaged.
for s in tests/lib/*.sh; do
  [ -f "$s" ] && run_suite "${s#tests/}" env HUSK="$root/build/husk" bash "$s"
done
# The Debian packages: built, unpacked and run; the man pages and --help.
for s in tests/pkg/*.sh; do
  [ -f "$s" ] && run_suite "${s#tests/}" env HUSK="$root/build/husk" bash "$s"
done
# MCP: SDK clients, raw protocol, Inspector, conformance.
for s in tests/mcp/*.sh; do
  [ -f "$s" ] && [ "$(basename "$s")" != setup.sh ] &&
    run_suite "${s#tests/}" env HUSK="$root/build/husk" bash "$s"
done
# The contract suite again with the sanitizer build of husk.
if [ -x build-asan/husk ]; then
  for s in tests/e2e/*.sh; do
    [ -f "$s" ] && run_suite "asan/${s#tests/}" env HUSK="$root/build-asan/husk" HUSK_ASAN=1 \
      ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 bash "$s"
  done
  # The daemon's request handling under the sanitizers (the suites that
  # feed it the most varied and hostile input; snapshots: archives of
  # hostile trees written and read back).
  for s in tests/serve/api.sh tests/serve/input.sh tests/serve/hostile_files.sh \
    tests/serve/s3_hostile.sh tests/serve/s3_records.sh tests/serve/reply_bounds.sh \
    tests/serve/s3_tenant_limits.sh tests/serve/contexts.sh tests/serve/pause.sh \
    tests/serve/snapshots.sh tests/serve/snapshot_templates.sh tests/serve/snapshot_cli.sh tests/serve/volumes.sh \
    tests/serve/previews.sh tests/serve/preview_attacks.sh tests/serve/uploads.sh \
    tests/serve/oauth_api.sh tests/serve/created_by.sh tests/serve/oidc_config.sh; do
    [ -f "$s" ] && run_suite "asan/${s#tests/}" env HUSK="$root/build-asan/husk" HUSK_ASAN=1 \
      ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 bash "$s"
  done
  # MCP over HTTP under the sanitizers: raw protocol input and
  # both SDK clients, the storage tools, several files a call, pause and
  # snapshots, resources and prompts.
  for s in tests/mcp/protocol.sh tests/mcp/sdk.sh tests/mcp/storage.sh tests/mcp/contexts.sh \
    tests/mcp/snapshots.sh tests/mcp/multi_files.sh tests/mcp/resources.sh; do
    [ -f "$s" ] && run_suite "asan/${s#tests/}" env HUSK="$root/build-asan/husk" HUSK_ASAN=1 \
      SDKS="v1 v2" MODES=http \
      ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 bash "$s"
  done
  # Tenant lifecycle and bounds: deletion across every plane, connections
  # held and trickled by hostile clients, the request-timeout watchdog.
  for s in tests/serve/tenants.sh tests/serve/tenant_limits.sh tests/serve/request_timeout.sh; do
    [ -f "$s" ] && run_suite "asan/${s#tests/}" env HUSK="$root/build-asan/husk" HUSK_ASAN=1 \
      ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 bash "$s"
  done
  # The egress proxy parses hostile input from boxes; fetch_url goes
  # through it with libcurl in the daemon.
  for s in tests/serve/egress.sh tests/serve/fetch_url.sh; do
    [ -f "$s" ] && run_suite "asan/${s#tests/}" env HUSK="$root/build-asan/husk" HUSK_ASAN=1 \
      ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 bash "$s"
  done
fi

echo
if [ ${#failed_suites[@]} -gt 0 ]; then
  echo "# what failed, suite by suite:"
  cat "$failures"
  echo "# failed suites: ${failed_suites[*]}"
fi
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
