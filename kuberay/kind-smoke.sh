#!/usr/bin/env bash
# KubeRay smoke test on kind: cluster with zone labels, KubeRay operator (Helm), the project's
# image, the RayService with GCS fault tolerance, a wait for it to be ready, then the
# experiment files with the Kubernetes backend (availproof suite --backend kuberay), the report
# (md, html, json) collected, and the cluster deleted. A violated bound is a finding, not a
# failure of the smoke test; an error (verdict 2) fails it.
#
# Needs Docker (with a running engine), kind, kubectl, helm, Python 3.11 and availproof installed
# (bash scripts/bootstrap.sh, or pip install -e '.[k8s]'): checked before anything is created.
# The project's own CI machines have no Docker engine: this runs in GitHub Actions
# (.github/workflows/kind-smoke.yml) or on a workstation.
# The zone partition uses the node-filter method: kindnet applies NetworkPolicies only to new
# connections, so a policy would leave Ray's open gRPC channels and keep-alive connections up.
set -euo pipefail
cd "$(dirname "$0")/.."
CLUSTER=${CLUSTER:-availproof}
NAMESPACE=availproof
KUBERAY_VERSION=${KUBERAY_VERSION:-1.7.0}
OUT=${OUT:-runs/kind-smoke}
CONTEXT="kind-$CLUSTER"

HELPER_IMAGE=$(python3 -c 'from chaos.backends.kuberay.kube.partition import HELPER_IMAGE; print(HELPER_IMAGE)' 2>/dev/null || true)

missing=()
for tool in docker kind kubectl helm curl; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
[ ${#missing[@]} -eq 0 ] || { echo "kind-smoke: missing on PATH: ${missing[*]}" >&2; exit 2; }
docker info >/dev/null 2>&1 || { echo "kind-smoke: the Docker engine is not reachable (docker info failed)" >&2; exit 2; }
python3 -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
  || { echo "kind-smoke: python3 must be Python 3.11 (the one availproof is installed in)" >&2; exit 2; }
command -v availproof >/dev/null 2>&1 && [ -n "$HELPER_IMAGE" ] \
  || { echo "kind-smoke: availproof is not installed for python3 (bash scripts/bootstrap.sh; source .venv/bin/activate)" >&2; exit 2; }
python3 -c 'import kubernetes' 2>/dev/null \
  || { echo "kind-smoke: the kubernetes client is missing (pip install -e '.[k8s]')" >&2; exit 2; }

cleanup() { kind delete cluster --name "$CLUSTER" || true; }
trap cleanup EXIT

kind create cluster --name "$CLUSTER" --config kuberay/kind-config.yaml --wait 120s
helm repo add kuberay https://ray-project.github.io/kuberay-helm/ >/dev/null
helm repo update >/dev/null
helm install kuberay-operator kuberay/kuberay-operator --version "$KUBERAY_VERSION" \
  --kube-context "$CONTEXT" --namespace kuberay-system --create-namespace --wait

docker build -f kuberay/Dockerfile -t availproof:dev .
docker pull -q "$HELPER_IMAGE" >/dev/null
# Only the nodes that run Ray (and the partition helper) get the images: the zone-labelled workers.
RAY_NODES=$(kubectl --context "$CONTEXT" get nodes -l topology.kubernetes.io/zone \
  -o jsonpath='{range .items[*]}{.metadata.name}{","}{end}')
RAY_NODES=${RAY_NODES%,}
[ -n "$RAY_NODES" ] || { echo "kind-smoke: no node labelled topology.kubernetes.io/zone" >&2; exit 1; }
kind load docker-image availproof:dev "$HELPER_IMAGE" --name "$CLUSTER" --nodes "$RAY_NODES"

# The Redis password is not committed (kuberay/base/redis.yaml): one is generated for this cluster.
kubectl --context "$CONTEXT" create namespace "$NAMESPACE" --dry-run=client -o yaml | kubectl --context "$CONTEXT" apply -f -
kubectl --context "$CONTEXT" -n "$NAMESPACE" create secret generic redis-password \
  --from-literal=password="$(python3 -c 'import secrets; print(secrets.token_hex(24))')"
kubectl --context "$CONTEXT" apply -k kuberay/overlays/stream-kind
echo "waiting for the RayService to be ready"
for _ in $(seq 1 90); do
  ready=$(kubectl --context "$CONTEXT" -n "$NAMESPACE" get rayservice availproof \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null || true)
  [ "$ready" = "True" ] && break
  sleep 10
done
[ "$ready" = "True" ] || { kubectl --context "$CONTEXT" -n "$NAMESPACE" describe rayservice availproof; exit 1; }
# The NodePorts follow the active cluster (KubeRay names it <service>-<5 random characters>).
active=$(kubectl --context "$CONTEXT" -n "$NAMESPACE" get rayservice availproof \
  -o jsonpath='{.status.activeServiceStatus.rayClusterName}')
[ -n "$active" ] || { echo "kind-smoke: the RayService reports no active cluster" >&2; exit 1; }
for svc in availproof-serve-nodeport availproof-dashboard-nodeport; do
  kubectl --context "$CONTEXT" -n "$NAMESPACE" patch service "$svc" --type merge \
    -p "{\"spec\":{\"selector\":{\"ray.io/cluster\":\"$active\"}}}"
done

mkdir -p "$OUT"
# The rig reaches the serve and dashboard Services through NodePorts that kind maps to the
# host's loopback (kind-config.yaml): unlike a port-forward, they survive pod deletions.
for _ in $(seq 1 30); do
  curl -fsS http://127.0.0.1:18265/api/version >/dev/null 2>&1 && break
  sleep 5
done
# The experiments themselves, through Chaos Toolkit, with the Kubernetes backend: the same
# files, bounds and analysis as on the local backend. Each needs no more than one pod at a time.
set +e
availproof suite --backend kuberay --kube-context "$CONTEXT" --kube-namespace "$NAMESPACE" \
  --ray-cluster availproof --serve-url http://127.0.0.1:18000 --dashboard-url http://127.0.0.1:18265 \
  --max-pods 1 --partition-method node-filter --out "$OUT" \
  --only replica-kill engine-hang worker-node-kill head-kill-gcs-ft zone-loss redis-loss zone-partition
verdict=$?
set -e
kubectl --context "$CONTEXT" -n "$NAMESPACE" get pods -o wide > "$OUT/pods.txt"
echo "report: $OUT/report.html (verdict $verdict: 0 every bound met, 1 a bound violated, 2 an error)"
[ "$verdict" -le 1 ]
