#!/usr/bin/env bash
# The main job on the embedded default: a local three-zone Ray cluster with GCS state in Redis.
# Installs what it needs first. Extra arguments go to `availproof suite`.
# --soak: after the quick suite, a 10-minute soak of replica and node kills (experiments/soak-demo.yaml) whose
# observed lost service-seconds are set against the suite's claim; then the cluster goes down.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
soak=0
args=()
for a in "$@"; do
  if [ "$a" = "--soak" ]; then soak=1; else args+=("$a"); fi
done
if [ "$soak" = 0 ]; then
  exec .venv/bin/availproof demo ${args[@]+"${args[@]}"}
fi
out="runs/$(date +%Y%m%d-%H%M%S)-demo"
rc=0
.venv/bin/availproof demo --out "$out/suite" ${args[@]+"${args[@]}"} || rc=$?
src=0
.venv/bin/availproof soak experiments/soak-demo.yaml --claim-from "$out/suite" --out "$out/soak" || src=$?
.venv/bin/availproof cluster down || true
echo "demo: suite $out/suite (exit $rc), soak $out/soak (exit $src): $out/soak/soak.md" >&2
exit $(( rc > src ? rc : src ))
