"""Offline validation of the KubeRay manifests (no API server can run on these machines).

Checks, per rendered object:
- RayService / RayCluster against the KubeRay CRD's ``openAPIV3Schema``, with unknown fields
  rejected (the API server would prune them silently);
- every pod template (head and worker groups) and every core object with kubernetes-validate
  in strict mode;
- the operator's own rules that the schema misses: with ``gcsFaultToleranceOptions`` set, no
  ``RAY_REDIS_ADDRESS`` / ``REDIS_PASSWORD`` env var and no ``redis-password`` in
  ``rayStartParams``;
- ``serveConfigV2`` with Ray Serve's ``ServeDeploySchema`` plus a check for unknown keys.

Every problem is one line naming the object and the field path.
"""

from __future__ import annotations

import copy
import os
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any, Iterator

import yaml

FORBIDDEN_ENV = ("RAY_REDIS_ADDRESS", "REDIS_PASSWORD")
CRD_FILES = {"RayService": "ray.io_rayservices.yaml", "RayCluster": "ray.io_rayclusters.yaml"}


CRD_VERSION = "v1.7.0"
REPO = Path(__file__).resolve().parent.parent.parent  # the checkout (availproof is installed editable)


def crd_dir() -> Path:
    """The KubeRay CRDs: ``AVAILPROOF_CRD_DIR``, else the copy vendored in ``kuberay/crds/<version>``."""
    env = os.environ.get("AVAILPROOF_CRD_DIR")
    path = Path(env) if env else REPO / "kuberay" / "crds" / CRD_VERSION
    if not (path / CRD_FILES["RayService"]).is_file():
        raise FileNotFoundError(f"no KubeRay CRDs in {path} (set AVAILPROOF_CRD_DIR to a folder holding "
                                f"{' and '.join(CRD_FILES.values())})")
    return path


def _strict(schema: Any) -> Any:
    """Forbid unknown fields wherever the schema lists properties and allows nothing else."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if out.get("x-kubernetes-int-or-string"):
            out.pop("type", None)
            out["anyOf"] = [{"type": "integer"}, {"type": "string"}]
        if ("properties" in out and "additionalProperties" not in out
                and not out.get("x-kubernetes-preserve-unknown-fields")):
            out["additionalProperties"] = False
        if out.get("nullable") and "type" in out:
            out["type"] = [out["type"], "null"]
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


@lru_cache(maxsize=None)
def crd_schema(kind: str) -> dict:
    doc = yaml.safe_load((crd_dir() / CRD_FILES[kind]).read_text())
    version = next(v for v in doc["spec"]["versions"] if v["name"] == "v1")
    return _strict(copy.deepcopy(version["schema"]["openAPIV3Schema"]))


def render_overlay(path: str | Path) -> list[dict]:
    out = subprocess.run(["kubectl", "kustomize", str(path)], capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise ValueError(f"{path}: kubectl kustomize failed: {out.stderr.strip().splitlines()[-1:]}")
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def _where(obj: dict) -> str:
    return f"{obj.get('kind')}/{(obj.get('metadata') or {}).get('name')}"


def _path(parts) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts).lstrip(".")


def cluster_spec(obj: dict) -> dict:
    spec = obj.get("spec") or {}
    return spec.get("rayClusterConfig", {}) if obj.get("kind") == "RayService" else spec


def pod_templates(obj: dict) -> Iterator[tuple[str, dict]]:
    cs = cluster_spec(obj)
    base = "spec.rayClusterConfig" if obj.get("kind") == "RayService" else "spec"
    if "headGroupSpec" in cs:
        yield f"{base}.headGroupSpec.template", cs["headGroupSpec"].get("template", {})
    for i, g in enumerate(cs.get("workerGroupSpecs") or []):
        yield f"{base}.workerGroupSpecs[{i}].template", g.get("template", {})


def check_object(obj: dict, k8s_version: str = "1.33.0") -> list[str]:
    """All problems with one rendered object (empty when valid)."""
    import jsonschema
    import kubernetes_validate

    problems: list[str] = []
    kind = obj.get("kind")
    where = _where(obj)
    if kind in CRD_FILES:
        validator = jsonschema.Draft7Validator(crd_schema(kind))
        for err in sorted(validator.iter_errors(obj), key=lambda e: list(e.absolute_path)):
            problems.append(f"{where}: {_path(err.absolute_path) or '<root>'}: {err.message[:200]}")
        for path, template in pod_templates(obj):
            pt = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "check"}, "template": template}
            try:
                kubernetes_validate.validate(pt, k8s_version, strict=True)
            except kubernetes_validate.ValidationError as e:
                problems.append(f"{where}: {path}: {_path(e.path)}: {e.message[:200]}")
        problems += operator_rules(obj)
        if kind == "RayService" and "serveConfigV2" in (obj.get("spec") or {}):
            problems += serve_config_problems(obj)
    else:
        try:
            kubernetes_validate.validate(obj, k8s_version, strict=True)
        except kubernetes_validate.ValidationError as e:
            problems.append(f"{where}: {_path(e.path)}: {e.message[:200]}")
        except kubernetes_validate.SchemaNotFoundError:
            problems.append(f"{where}: no schema for {obj.get('apiVersion')} {kind}")
    return problems


def operator_rules(obj: dict) -> list[str]:
    """KubeRay operator rules that the CRD schema does not express."""
    cs = cluster_spec(obj)
    if not cs.get("gcsFaultToleranceOptions"):
        return []
    where = _where(obj)
    problems = []
    groups = [("headGroupSpec", cs.get("headGroupSpec") or {})] + [
        (f"workerGroupSpecs[{i}]", g) for i, g in enumerate(cs.get("workerGroupSpecs") or [])]
    for name, group in groups:
        if "redis-password" in (group.get("rayStartParams") or {}):
            problems.append(f"{where}: {name}.rayStartParams.redis-password: not allowed with "
                            f"gcsFaultToleranceOptions (use gcsFaultToleranceOptions.redisPassword)")
        for ci, c in enumerate(((group.get("template") or {}).get("spec") or {}).get("containers") or []):
            for env in c.get("env") or []:
                if env.get("name") in FORBIDDEN_ENV:
                    problems.append(f"{where}: {name}.template.spec.containers[{ci}].env {env['name']}: not allowed "
                                    f"with gcsFaultToleranceOptions (the operator injects it)")
    return problems


def serve_config_problems(obj: dict) -> list[str]:
    from serve_apps import config as serve_config

    where = _where(obj)
    try:
        cfg = yaml.safe_load(obj["spec"]["serveConfigV2"])
        serve_config.validate(cfg)
    except Exception as e:  # noqa: BLE001 - every problem becomes one line
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        return [f"{where}: spec.serveConfigV2: {first[:240]}"]
    return []


def check_overlay(path: str | Path) -> list[str]:
    problems = []
    for obj in render_overlay(path):
        problems += check_object(obj)
    return problems
