#!/usr/bin/env bash
# The whole test suite: unit tests (no cluster) and integration tests (real Ray, Redis, vLLM).
# Installs what it needs first. Extra arguments go to pytest (e.g. -k head, -x, or test paths).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
export AVAILPROOF_TEST_ROOT="${AVAILPROOF_TEST_ROOT:-$(mktemp -d /tmp/availproof-test.XXXXXX)}"
export AVAILPROOF_HOME="${AVAILPROOF_HOME:-$AVAILPROOF_TEST_ROOT/home}"
echo "test: artefacts in $AVAILPROOF_TEST_ROOT" >&2
exec .venv/bin/python -m pytest -p no:cacheprovider --durations=30 "$@"  # no path given: pyproject testpaths (tests/); the 30 slowest tests listed at the end
