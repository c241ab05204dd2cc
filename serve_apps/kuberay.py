"""Renders the KubeRay manifests' ``serveConfigV2`` and RayService from the one Serve config source.

``python -m serve_apps.kuberay`` (re)writes ``kuberay/base/rayservice.yaml`` and the vLLM GPU
overlay's ``rayservice-patch.yaml`` (CUDA image, one GPU per worker, the checkpoint fetched into each
pod, the head outside the zones under test, the engine-error hook and the progress watchdog as
:data:`GPU_ENGINE_FAULTS` and :data:`GPU_STALL_S` or its flags say) and ``redis-placement.yaml``; a unit
test fails when the committed files differ from what this renders, so the manifests cannot drift from
``serve_apps.config``.

Design choices (KubeRay v1.7 field names):
- one worker group per zone, pinned with ``nodeSelector: topology.kubernetes.io/zone`` and
  carrying Ray node labels ``zone``/``region`` (``workerGroupSpecs[].labels``): the Serve
  config's ``label_selector`` needs each pod to know its zone, which one group with
  ``topologySpreadConstraints`` cannot give (all its pods share one label set);
- ``gcsFaultToleranceOptions`` with the Redis password from a Secret; no ``RAY_REDIS_ADDRESS``
  env and no ``redis-password`` in ``rayStartParams`` (the operator rejects them then);
- ``excludeHeadPodFromServeSvc: true`` and ``num-cpus: "0"`` on the head;
- admission limits and fast refusal (:mod:`serve_apps.admission`) only with ``--max-ongoing-requests`` or
  ``--max-queued-requests``: without them the files are those the committed test compares against.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from serve_apps.admission import Admission
from serve_apps.config import AppSpec, LLMOptions, serve_config
from serve_apps.device_loss import node_dir
from serve_apps.engine_faults import ENV as ENGINE_FAULTS_ENV
from serve_apps.llm_app import ENV as LLM_ENV

# the local LLM app's engine environment (serve_apps.llm_app.ENV) is the GPU engines' too, offline and with vLLM's
# logging set-up off (VLLM_CONFIGURE_LOGGING=0: else a head loss becomes a full outage), but for its CPU sizing
CPU_ONLY_ENV = ("VLLM_TARGET_DEVICE", "VLLM_CPU_OMP_THREADS_BIND", "VLLM_CPU_KVCACHE_SPACE", "OMP_NUM_THREADS")

ROOT = Path(__file__).resolve().parent.parent / "kuberay"
ZONES = ("zone-a", "zone-b", "zone-c")
REGION = "region-1"
IMAGE = "availproof:dev"  # built by kuberay/kind-smoke.sh and `kind load`ed
# kuberay/Dockerfile with --build-arg VARIANT=gpu (vLLM's CUDA build), pushed to a registry the nodes pull
# from: the overlay's kustomization sets it (`images:` newName/newTag or digest), pulled at every start
GPU_IMAGE = "availproof-vllm"
# One GPU worker pod, sized to fit the common one-GPU node types of 8 vCPU and 32 GiB (GKE g2-standard-8 with
# an L4, EKS g5.2xlarge with an A10G or g6.2xlarge with an L4): their allocatable is about 7.9 CPU and 28-30
# GiB once the kubelet and system reserves are taken off, and the node's DaemonSets (the device plugin,
# logging, kube-proxy, the CNI) take up to ~1 CPU and ~2 GiB more. 8 CPU / 32 GiB never scheduled there.
# A vLLM engine on a GPU needs one CPU of Ray's (vllm_gpu_config's bundle); the rest is its tokenizer and
# Serve's proxy and replica processes.
GPU_WORKER = {"cpu": "6", "memory": "24Gi", "nvidia.com/gpu": "1"}
GPU_PULL_POLICY = "Always"
MODEL_DIR = "/models/model"  # where the engines load the checkpoint from (model_source)
# The checkpoint's source, created at install like the Redis Secret (none committed): the ConfigMap's key
# `url` (hf://REPO[@REVISION], or the http(s) URL of a tar of the checkpoint's files), the Secret's
# optional key `hf-token` for a gated Hugging Face repository
MODEL_SOURCE = "availproof-model"
# The control-plane node pool: the head and Redis run there, outside every zone the experiments break
CONTROL_PLANE_LABEL = "availproof.io/control-plane-zone"
# Run by the init container fetch-model (sh, in the GPU image, which has Python and huggingface_hub as
# vLLM's dependency) into the pod's emptyDir: every pod, in any zone, gets its own copy.
FETCH_MODEL = r'''set -eu
dest="${MODEL_DIR:-/models/model}"
if [ -f "$dest/config.json" ]; then echo "the checkpoint is in $dest already"; exit 0; fi
case "${MODEL_URL:-}" in
  hf://*)
    python -c 'import sys; from huggingface_hub import snapshot_download; repo, _, rev = sys.argv[1].partition("@"); snapshot_download(repo, revision=rev or None, local_dir=sys.argv[2])' "${MODEL_URL#hf://}" "$dest" ;;
  http://*|https://*)
    mkdir -p "$dest"
    python -c 'import sys, tarfile, urllib.request; t = tarfile.open(fileobj=urllib.request.urlopen(sys.argv[1]), mode="r|*"); t.extractall(sys.argv[2], **({"filter": "data"} if hasattr(tarfile, "data_filter") else {}))' "$MODEL_URL" "$dest" ;;
  *)
    echo "MODEL_URL (ConfigMap availproof-model, key url) must be hf://REPO[@REVISION] or the http(s) URL of a tar of the checkpoint's files, got: '${MODEL_URL:-}'" >&2; exit 2 ;;
esac
test -f "$dest/config.json" || { echo "no config.json at the top of $dest after fetching $MODEL_URL" >&2; exit 3; }
'''
# device-loss's marker (serve_apps.device_loss) lives in a directory of the Kubernetes node, mounted in every Ray
# worker pod where the engines' hook reads it (node_dir(""), the key empty on KubeRay): a device marked lost stays
# lost for every pod placed on that node, a replacement included (the head runs no replica: num-cpus 0)
DEVICE_LOSS_HOST_DIR = "/var/lib/availproof/device-loss"
RAY_VERSION = "2.60.0"
# The GPU overlay's engine faults and progress watchdog (docs/apps.md), set here (or by the flags of `python -m
# serve_apps.kuberay`, below) and rendered into its serveConfigV2: the engine-error hook's variable in the engines'
# environment (serve_apps.engine_faults: installed in vLLM's engine process, armed only by the rig's SIGUSR1;
# without it engine-error is refused there, before anything is sent), and the watchdog's stall_s (the engine
# deployment's user_config: a replica with requests in flight and no token for stall_s fails its health check;
# None: off).
GPU_ENGINE_FAULTS = True
GPU_STALL_S: float | None = None


def serve_config_yaml(spec: AppSpec) -> str:
    cfg = serve_config(spec)
    return yaml.safe_dump(cfg, sort_keys=False)


def _container(name: str, cpu: str, memory: str) -> dict[str, Any]:
    return {
        "name": name,
        "image": IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "resources": {"limits": {"cpu": cpu, "memory": memory}, "requests": {"cpu": cpu, "memory": memory}},
    }


def worker_group(zone: str) -> dict[str, Any]:
    c = _container("ray-worker", "1", "2Gi")
    c["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"},
                         {"name": "device-loss", "mountPath": node_dir("")}]
    return {
        "groupName": f"workers-{zone}",
        "replicas": 1,
        "minReplicas": 1,
        "maxReplicas": 1,
        "labels": {"zone": zone, "region": REGION},
        "rayStartParams": {"num-cpus": "8"},
        "template": {"spec": {
            "nodeSelector": {"topology.kubernetes.io/zone": zone},
            "containers": [c],
            # Ray's object store and vLLM use /dev/shm; the container runtime's default is 64 MiB
            "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}},
                        {"name": "device-loss", "hostPath": {"path": DEVICE_LOSS_HOST_DIR, "type": "DirectoryOrCreate"}}],
        }},
    }


def rayservice(spec: AppSpec) -> dict[str, Any]:
    head = _container("ray-head", "1", "2Gi")
    head["ports"] = [{"containerPort": 6379, "name": "gcs"}, {"containerPort": 8265, "name": "dashboard"},
                     {"containerPort": 10001, "name": "client"}, {"containerPort": 8000, "name": "serve"}]
    return {
        "apiVersion": "ray.io/v1",
        "kind": "RayService",
        "metadata": {"name": "availproof"},
        "spec": {
            "excludeHeadPodFromServeSvc": True,
            "serveConfigV2": serve_config_yaml(spec),
            "rayClusterConfig": {
                "rayVersion": RAY_VERSION,
                "gcsFaultToleranceOptions": {
                    "redisAddress": "redis:6379",
                    "redisPassword": {"valueFrom": {"secretKeyRef": {"name": "redis-password", "key": "password"}}},
                },
                "headGroupSpec": {
                    "rayStartParams": {"num-cpus": "0", "dashboard-host": "0.0.0.0"},
                    "template": {"spec": {
                        # Redis and the head live outside the zones the experiments kill
                        "nodeSelector": {"availproof.io/control-plane-zone": "true"},
                        "containers": [head],
                    }},
                },
                "workerGroupSpecs": [worker_group(z) for z in ZONES],
            },
        },
    }


def stream_spec(admission: Admission | None = None) -> AppSpec:
    spec = AppSpec(app="stream", zones=list(ZONES), http_port=8000, admission=admission)
    return spec


def vllm_gpu_spec(stall_s: float | None = GPU_STALL_S, admission: Admission | None = None) -> AppSpec:
    spec = AppSpec(app="llm", zones=list(ZONES), http_port=8000, stall_s=stall_s, admission=admission)
    spec.llm = LLMOptions(model_path=MODEL_DIR, model_id="availproof-tiny", dtype="auto", num_cpus=1.0)
    return spec


def vllm_gpu_config(spec: AppSpec, engine_faults: bool = GPU_ENGINE_FAULTS) -> dict[str, Any]:
    """The Serve config for vLLM on GPU nodes: one GPU per engine instead of CPU sizing; the engine-error hook's
    variable in the engines' environment unless ``engine_faults`` is off (the watchdog: ``spec.stall_s``)."""
    cfg = serve_config(spec)
    llm = cfg["applications"][0]["args"]["llm_configs"][0]
    llm["accelerator_config"] = {"kind": "gpu"}
    llm["placement_group_config"] = {"bundles": [{"CPU": 1, "GPU": 1}], "strategy": "PACK"}
    env = {k: v for k, v in LLM_ENV.items() if k not in CPU_ONLY_ENV and k != ENGINE_FAULTS_ENV}
    llm["runtime_env"] = {"env_vars": {**env, **({ENGINE_FAULTS_ENV: "1"} if engine_faults else {})}}
    for key in ("kv_cache_memory_bytes", "enforce_eager"):
        llm["engine_kwargs"].pop(key, None)
    return cfg


def fetch_model_container() -> dict[str, Any]:
    """The init container that puts the checkpoint in the pod's own ``models`` emptyDir before Ray starts
    (:data:`FETCH_MODEL`), from the source the user set at install (:data:`MODEL_SOURCE`). A volume per
    pod works in every zone (a ReadOnlyMany claim is what zonal disks, EBS or a GCE PD, cannot give)."""
    return {
        "name": "fetch-model",
        "image": GPU_IMAGE,
        "imagePullPolicy": GPU_PULL_POLICY,
        "command": ["sh", "-c", FETCH_MODEL],
        "env": [{"name": "MODEL_URL", "valueFrom": {"configMapKeyRef": {"name": MODEL_SOURCE, "key": "url"}}},
                {"name": "HF_TOKEN", "valueFrom": {"secretKeyRef": {"name": MODEL_SOURCE, "key": "hf-token",
                                                                   "optional": True}}},
                {"name": "MODEL_DIR", "value": MODEL_DIR}],
        "resources": {k: {"cpu": "1", "memory": "2Gi"} for k in ("limits", "requests")},
        "volumeMounts": [{"name": "models", "mountPath": "/models"}],
    }


def outside_zones_affinity() -> dict[str, Any]:
    """Required node affinity: a node in none of the zones the worker groups (and so the experiments)
    use; with the control-plane label's nodeSelector, the head and Redis stay out of every zone loss."""
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "NotIn", "values": list(ZONES)}]}]}}}


def gpu_worker_group(zone: str) -> dict[str, Any]:
    """A worker group of the GPU overlay: one GPU, the CUDA image, the checkpoint fetched into the pod's own
    volume by an init container and mounted read-only at /models."""
    g = worker_group(zone)
    c = g["template"]["spec"]["containers"][0]
    c["image"] = GPU_IMAGE
    c["imagePullPolicy"] = GPU_PULL_POLICY
    c["resources"] = {k: dict(GPU_WORKER) for k in ("limits", "requests")}
    c["volumeMounts"].append({"name": "models", "mountPath": "/models", "readOnly": True})
    spec = g["template"]["spec"]
    spec["initContainers"] = [fetch_model_container()]
    spec["volumes"].append({"name": "models", "emptyDir": {}})
    spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    g["rayStartParams"] = {"num-cpus": GPU_WORKER["cpu"], "num-gpus": "1"}
    return g


def gpu_patch(engine_faults: bool = GPU_ENGINE_FAULTS, stall_s: float | None = GPU_STALL_S,
              admission: Admission | None = None) -> dict[str, Any]:
    """The vLLM GPU overlay's patch of the RayService (a merge patch: lists are replaced, null deletes)."""
    cfg = vllm_gpu_config(vllm_gpu_spec(stall_s, admission), engine_faults)
    return {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "availproof"},
            "spec": {"serveConfigV2": yaml.safe_dump(cfg, sort_keys=False),
                     "rayClusterConfig": {
                         "headGroupSpec": {"template": {"spec": {
                             # the base's nodeSelector (the control-plane node pool) kept, and no zone under test
                             "affinity": outside_zones_affinity(),
                             "containers": [{**rayservice(stream_spec())["spec"]["rayClusterConfig"]["headGroupSpec"]
                                             ["template"]["spec"]["containers"][0], "image": GPU_IMAGE,
                                             "imagePullPolicy": GPU_PULL_POLICY}]}}},
                         "workerGroupSpecs": [gpu_worker_group(z) for z in ZONES]}}}


def redis_placement() -> dict[str, Any]:
    """The GPU overlay's patch of the Redis Deployment: the base's control-plane nodeSelector kept, and no
    zone under test (:func:`outside_zones_affinity`)."""
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "redis"},
            "spec": {"template": {"spec": {"affinity": outside_zones_affinity()}}}}


def render(engine_faults: bool = GPU_ENGINE_FAULTS, stall_s: float | None = GPU_STALL_S,
           admission: Admission | None = None) -> dict[Path, str]:
    """Every generated file, by path (the GPU overlay's engine faults and watchdog as given; ``admission``: both
    RayServices' admission limits, :mod:`serve_apps.admission`, None: Serve's, the files as before)."""
    header = "# GENERATED by `python -m serve_apps.kuberay` from serve_apps/config.py: do not edit by hand.\n"
    gpu = ROOT / "overlays" / "vllm-gpu"
    return {
        ROOT / "base" / "rayservice.yaml": header + yaml.safe_dump(rayservice(stream_spec(admission)), sort_keys=False),
        gpu / "rayservice-patch.yaml": header + yaml.safe_dump(gpu_patch(engine_faults, stall_s, admission),
                                                               sort_keys=False),
        gpu / "redis-placement.yaml": header + yaml.safe_dump(redis_placement(), sort_keys=False),
    }


def main(argv: list[str] | None = None) -> int:
    import argparse

    p = argparse.ArgumentParser(prog="python -m serve_apps.kuberay", description="Render the KubeRay manifests.")
    p.add_argument("--gpu-engine-faults", type=int, choices=(0, 1), default=int(GPU_ENGINE_FAULTS),
                   help="the GPU overlay's engines with the engine-error hook (%(default)s)")
    p.add_argument("--gpu-stall-s", type=float, default=GPU_STALL_S,
                   help="the GPU overlay's progress watchdog: stall_s seconds (default: off)")
    p.add_argument("--max-ongoing-requests", type=int, default=None,
                   help="admission (serve_apps/admission.py): requests one replica takes at once (default: the app's)")
    p.add_argument("--max-queued-requests", type=int, default=None,
                   help="admission: requests that may wait at each proxy; beyond, refused at once with a 503 and "
                        "Retry-After (fast refusal); -1 or unset: no limit")
    p.add_argument("--refusal-status", type=int, choices=(503, 429), default=503, help="the refusal's status (503)")
    p.add_argument("--retry-after-s", type=float, default=1.0, help="the refusal's Retry-After, seconds (1)")
    a = p.parse_args(argv)
    if a.gpu_stall_s is not None and a.gpu_stall_s <= 0:
        p.error("--gpu-stall-s must be a number of seconds > 0")
    admission = None
    if a.max_ongoing_requests is not None or a.max_queued_requests is not None:
        try:
            admission = Admission.from_dict({"max_ongoing_requests": a.max_ongoing_requests,
                                             "max_queued_requests": a.max_queued_requests,
                                             "status_code": a.refusal_status, "retry_after_s": a.retry_after_s})
        except ValueError as e:
            p.error(str(e))
    for path, text in render(bool(a.gpu_engine_faults), a.gpu_stall_s, admission).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["render", "rayservice", "serve_config_yaml"]
