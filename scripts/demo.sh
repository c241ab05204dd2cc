#!/usr/bin/env bash
# The main job on the embedded default: a local three-zone Ray cluster with GCS state in Redis.
# Installs what it needs first. Extra arguments go to `availproof suite`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
exec .venv/bin/availproof demo "$@"
