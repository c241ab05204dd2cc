#!/usr/bin/env bash
# The whole test suite: unit tests (no cluster) and integration tests (real Ray, Redis, vLLM).
# Installs what it needs first. Extra arguments go to one pytest run (e.g. -k head, -x, or test paths).
# With none: the unit tests on three processes (pytest-xdist: they need no cluster and share nothing; on 2 cores
# three overlap the tests that wait on real processes: 153 s against two's 190 s, 2026-12-06),
# then the integration tests in one process (they share one cluster and the machine's two cores);
# both always run, and the exit code is non-zero when either failed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
export AVAILPROOF_TEST_ROOT="${AVAILPROOF_TEST_ROOT:-$(mktemp -d /tmp/availproof-test.XXXXXX)}"
export AVAILPROOF_HOME="${AVAILPROOF_HOME:-$AVAILPROOF_TEST_ROOT/home}"
echo "test: artefacts in $AVAILPROOF_TEST_ROOT" >&2
PYTEST=(.venv/bin/python -m pytest -p no:cacheprovider)
if [ $# -gt 0 ]; then
  exec "${PYTEST[@]}" --durations=30 "$@"
fi
unit=0
"${PYTEST[@]}" -n 3 --durations=10 tests/unit || unit=$?
integration=0
"${PYTEST[@]}" --durations=30 tests/integration || integration=$?  # the 30 slowest listed at the end
echo "test: unit tests exit $unit, integration tests exit $integration" >&2
[ "$unit" -eq 0 ] && [ "$integration" -eq 0 ]
