#!/bin/bash
# A short chaos run (tests/chaos/chaos.py): mixed load from four clients,
# the daemon SIGKILLed four times at random moments, every other restart
# killed again in the middle of re-adopting its boxes (as its log shows),
# then every acknowledged item checked and the host checked for leaks.  `make chaos` runs a long one.  The seed is printed;
# CHAOS_SEED repeats a run's operation mix and kill times.
set -u
cd "$(dirname "$0")/../.."
HUSK=${HUSK:-$PWD/build/husk}
exec python3 tests/chaos/chaos.py --husk "$HUSK" --tap --duration "${CHAOS_DURATION:-20}" \
  --kills "${CHAOS_KILLS:-4}" --clients "${CHAOS_CLIENTS:-4}" ${CHAOS_SEED:+--seed "$CHAOS_SEED"}
