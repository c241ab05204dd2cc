#!/usr/bin/env bash
# KubeRay smoke test on kind: cluster with zone labels, KubeRay operator (Helm), the project's
# image, the RayService with GCS fault tolerance, a wait for it to be ready, then the
# experiments with the Kubernetes backend, the report collected, and the cluster deleted.
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
# The experiments' traffic goes to the serve Service through a port-forward on loopback.
kubectl --context "$CONTEXT" -n "$NAMESPACE" port-forward svc/availproof-serve-svc 18000:8000 >/dev/null 2>&1 &
PF=$!
trap 'kill $PF 2>/dev/null || true; cleanup' EXIT
sleep 3
python -m chaos.kind_smoke --context "$CONTEXT" --namespace "$NAMESPACE" --cluster availproof \
  --url http://127.0.0.1:18000 --out "$OUT"
kubectl --context "$CONTEXT" -n "$NAMESPACE" get pods -o wide > "$OUT/pods.txt"
echo "report: $OUT"
