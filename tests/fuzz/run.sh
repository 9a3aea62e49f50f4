#!/bin/bash
# Runs libFuzzer harnesses and prints one TAP line per step (tests/run.sh
# counts them): each target's regression inputs are replayed, then the
# target fuzzes for SECONDS on its committed seed corpus.
#   tests/fuzz/run.sh SECONDS TARGET...   (make fuzz / make fuzz-smoke)
#   tests/fuzz/run.sh SECONDS             every harness that is built
# New corpus entries go to build-fuzz/corpus/TARGET (kept between runs),
# crashes to build-fuzz/artifacts/TARGET/; the log of a failed run is
# printed.
set -u
cd "$(dirname "$0")/../.."
secs=${1:?usage: tests/fuzz/run.sh SECONDS [TARGET...]}
shift
out=build-fuzz
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  for f in tests/fuzz/fuzz_*.c; do
    t=${f#tests/fuzz/fuzz_}
    targets+=("${t%.c}")
  done
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
n=0
failed=0
step() { # OK(0/1) DESCRIPTION
  n=$((n + 1))
  if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; failed=1; fi
}

for t in "${targets[@]}"; do
  bin=$out/fuzz/$t
  if [ ! -x "$bin" ]; then
    step 1 "fuzz $t: $bin is not built (make fuzz-build)"
    continue
  fi
  log=$(mktemp)
  regress=(tests/fuzz/regress/"$t"/*)
  if [ -e "${regress[0]}" ]; then
    "$bin" -runs=1 "${regress[@]}" >"$log" 2>&1
    rc=$?
    [ $rc -ne 0 ] && cat "$log"
    step $rc "fuzz $t: ${#regress[@]} regression inputs"
  fi
  mkdir -p "$out/corpus/$t" "$out/artifacts/$t"
  opts=(-max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
    -artifact_prefix="$out/artifacts/$t/")
  [ -f "tests/fuzz/dict/$t.dict" ] && opts+=(-dict="tests/fuzz/dict/$t.dict")
  seeds=()
  [ -d "tests/fuzz/corpus/$t" ] && seeds=("tests/fuzz/corpus/$t")
  "$bin" "${opts[@]}" "$out/corpus/$t" "${seeds[@]}" >"$log" 2>&1
  rc=$?
  stats=$(grep -E '^#[0-9]+' "$log" | tail -1 | sed -E 's/.*(cov: [0-9]+).*(exec\/s: [0-9]+).*/\1 \2/')
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  if [ $rc -ne 0 ]; then
    tail -60 "$log"
    ls "$out/artifacts/$t/" 2>/dev/null | sed 's/^/# artifact: /'
  fi
  step $rc "fuzz $t: ${secs}s, ${execs:-?} runs, $stats"
  rm -f "$log"
done
exit $failed
