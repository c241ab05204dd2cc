#!/usr/bin/env bash
# KubeRay smoke test on kind: cluster with zone labels, KubeRay operator (Helm), the project's
# image, the RayService with GCS fault tolerance, a wait for it to be ready, then the
# experiment files with the Kubernetes backend (availproof suite --backend kuberay), the report
# (md, html, json) collected, and the cluster deleted. A violated bound is a finding, not a
# failure of the smoke test; an error (verdict 2) fails it.
#
# Needs Docker, kind, kubectl and helm. The project's own CI machines have no Docker engine:
# this runs in GitHub Actions (.github/workflows/kind-smoke.yml) or on a workstation.
set -euo pipefail
cd "$(dirname "$0")/.."
CLUSTER=${CLUSTER:-availproof}
NAMESPACE=availproof
KUBERAY_VERSION=${KUBERAY_VERSION:-1.7.0}
OUT=${OUT:-runs/kind-smoke}
CONTEXT="kind-$CLUSTER"

cleanup() { kind delete cluster --name "$CLUSTER" || true; }
trap cleanup EXIT

kind create cluster --name "$CLUSTER" --config kuberay/kind-config.yaml --wait 120s
helm repo add kuberay https://ray-project.github.io/kuberay-helm/ >/dev/null
helm repo update >/dev/null
helm install kuberay-operator kuberay/kuberay-operator --version "$KUBERAY_VERSION" \
  --kube-context "$CONTEXT" --namespace kuberay-system --create-namespace --wait

docker build -f kuberay/Dockerfile -t availproof:dev .
kind load docker-image availproof:dev --name "$CLUSTER"

kubectl --context "$CONTEXT" apply -k kuberay/overlays/stream-kind
echo "waiting for the RayService to be ready"
for _ in $(seq 1 90); do
  ready=$(kubectl --context "$CONTEXT" -n "$NAMESPACE" get rayservice availproof \
    -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null || true)
  [ "$ready" = "True" ] && break
  sleep 10
done
[ "$ready" = "True" ] || { kubectl --context "$CONTEXT" -n "$NAMESPACE" describe rayservice availproof; exit 1; }

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
  --max-pods 1 --out "$OUT" \
  --only replica-kill engine-hang worker-node-kill head-kill-gcs-ft zone-loss redis-loss zone-partition
verdict=$?
set -e
kubectl --context "$CONTEXT" -n "$NAMESPACE" get pods -o wide > "$OUT/pods.txt"
echo "report: $OUT/report.html (verdict $verdict: 0 every bound met, 1 a bound violated, 2 an error)"
[ "$verdict" -le 1 ]
