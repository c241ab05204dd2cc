"""Renders the KubeRay manifests' ``serveConfigV2`` and RayService from the one Serve config source.

``python -m serve_apps.kuberay`` (re)writes ``kuberay/base/rayservice.yaml`` and the vLLM GPU
overlay's ``rayservice-patch.yaml`` (CUDA image, one GPU per worker, the checkpoint volume); a unit test fails when the committed files differ from
what this renders, so the manifests cannot drift from ``serve_apps.config``.

Design choices (KubeRay v1.7 field names):
- one worker group per zone, pinned with ``nodeSelector: topology.kubernetes.io/zone`` and
  carrying Ray node labels ``zone``/``region`` (``workerGroupSpecs[].labels``): the Serve
  config's ``label_selector`` needs each pod to know its zone, which one group with
  ``topologySpreadConstraints`` cannot give (all its pods share one label set);
- ``gcsFaultToleranceOptions`` with the Redis password from a Secret; no ``RAY_REDIS_ADDRESS``
  env and no ``redis-password`` in ``rayStartParams`` (the operator rejects them then);
- ``excludeHeadPodFromServeSvc: true`` and ``num-cpus: "0"`` on the head.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from serve_apps.config import AppSpec, LLMOptions, serve_config

ROOT = Path(__file__).resolve().parent.parent / "kuberay"
ZONES = ("zone-a", "zone-b", "zone-c")
REGION = "region-1"
IMAGE = "availproof:dev"  # built by kuberay/kind-smoke.sh and `kind load`ed
GPU_IMAGE = "availproof-vllm:dev"  # kuberay/Dockerfile with --build-arg VARIANT=gpu (vLLM's CUDA build)
MODELS_CLAIM = "availproof-models"  # a PVC holding the checkpoint at model/ (overlays/vllm-gpu/models-pvc.yaml)
RAY_VERSION = "2.60.0"


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
    c["volumeMounts"] = [{"name": "dshm", "mountPath": "/dev/shm"}]
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
            "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory"}}],
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


def stream_spec() -> AppSpec:
    spec = AppSpec(app="stream", zones=list(ZONES), http_port=8000)
    return spec


def vllm_gpu_spec() -> AppSpec:
    spec = AppSpec(app="llm", zones=list(ZONES), http_port=8000)
    spec.llm = LLMOptions(model_path="/models/model", model_id="availproof-tiny", dtype="auto", num_cpus=1.0)
    return spec


def vllm_gpu_config(spec: AppSpec) -> dict[str, Any]:
    """The Serve config for vLLM on GPU nodes: one GPU per engine instead of CPU sizing."""
    cfg = serve_config(spec)
    llm = cfg["applications"][0]["args"]["llm_configs"][0]
    llm["accelerator_config"] = {"kind": "gpu"}
    llm["placement_group_config"] = {"bundles": [{"CPU": 1, "GPU": 1}], "strategy": "PACK"}
    llm["runtime_env"] = {"env_vars": {"HF_HUB_OFFLINE": "1"}}
    for key in ("kv_cache_memory_bytes", "enforce_eager"):
        llm["engine_kwargs"].pop(key, None)
    return cfg


def gpu_worker_group(zone: str) -> dict[str, Any]:
    """A worker group of the GPU overlay: one GPU, the CUDA image, the checkpoint mounted read-only at /models."""
    g = worker_group(zone)
    c = g["template"]["spec"]["containers"][0]
    c["image"] = GPU_IMAGE
    c["resources"] = {k: {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "1"} for k in ("limits", "requests")}
    c["volumeMounts"].append({"name": "models", "mountPath": "/models", "readOnly": True})
    spec = g["template"]["spec"]
    spec["volumes"].append({"name": "models", "persistentVolumeClaim": {"claimName": MODELS_CLAIM, "readOnly": True}})
    spec["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    g["rayStartParams"] = {"num-cpus": "8", "num-gpus": "1"}
    return g


def gpu_patch() -> dict[str, Any]:
    """The vLLM GPU overlay's patch of the RayService (a merge patch: lists are replaced, null deletes)."""
    return {"apiVersion": "ray.io/v1", "kind": "RayService", "metadata": {"name": "availproof"},
            "spec": {"serveConfigV2": yaml.safe_dump(vllm_gpu_config(vllm_gpu_spec()), sort_keys=False),
                     "rayClusterConfig": {
                         "headGroupSpec": {"template": {"spec": {
                             "nodeSelector": None,  # kind's control-plane-zone label: schedule anywhere
                             "containers": [{**rayservice(stream_spec())["spec"]["rayClusterConfig"]["headGroupSpec"]
                                             ["template"]["spec"]["containers"][0], "image": GPU_IMAGE}]}}},
                         "workerGroupSpecs": [gpu_worker_group(z) for z in ZONES]}}}


def render() -> dict[Path, str]:
    """Every generated file, by path."""
    header = "# GENERATED by `python -m serve_apps.kuberay` from serve_apps/config.py: do not edit by hand.\n"
    return {
        ROOT / "base" / "rayservice.yaml": header + yaml.safe_dump(rayservice(stream_spec()), sort_keys=False),
        ROOT / "overlays" / "vllm-gpu" / "rayservice-patch.yaml": header + yaml.safe_dump(gpu_patch(), sort_keys=False),
    }


def main() -> int:
    for path, text in render().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["render", "rayservice", "serve_config_yaml"]
