"""Failure domains: regions -> zones -> nodes, read from a YAML file and validated.

A topology says *where* things may fail together. The local backend turns every
node into a real raylet with Ray node labels ``region``, ``zone`` and ``node``; the
Serve apps pin replicas to zones with ``label_selector`` on those labels.

The file's shape, types and ranges are those of ``chaos/schemas/topology.schema.json`` (the
single source of validation; editors can use it); names unique across regions, zones and nodes
are checked here after it. Every problem is one line that names the file and the field, e.g.
``default.yaml: regions[0].zones[1].nodes[0].cpus: -1 is less than the minimum of 1``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from chaos import schemas
from chaos.base.errors import UsageError, read_yaml

SHIPPED = ("default", "two-regions")


@dataclass(frozen=True)
class Node:
    name: str
    zone: str
    region: str
    cpus: int
    memory_mb: int
    object_store_mb: int
    labels: dict[str, str] = field(default_factory=dict)

    def ray_labels(self) -> dict[str, str]:
        """The Ray node labels this node starts with (domain labels win over user labels)."""
        return {**self.labels, "region": self.region, "zone": self.zone, "node": self.name}


@dataclass(frozen=True)
class Head:
    cpus: int
    memory_mb: int
    object_store_mb: int


@dataclass(frozen=True)
class HealthCheck:
    """GCS-side node health checks (RAY_health_check_period_ms / _failure_threshold)."""

    period_ms: int = 1000
    failure_threshold: int = 3


@dataclass(frozen=True)
class Topology:
    name: str
    head: Head
    nodes: tuple[Node, ...]
    gcs_fault_tolerance: bool = True
    health_check: HealthCheck = HealthCheck()
    # idle Ray workers a raylet keeps (RAY_num_workers_soft_limit); None: Ray's default, one per
    # CPU. Each idle worker that ran a Serve LLM task holds ~0.5 GiB: the default keeps none.
    idle_workers_kept: int | None = 0
    source: str = "<memory>"

    @property
    def zones(self) -> list[str]:
        return sorted({n.zone for n in self.nodes})

    @property
    def regions(self) -> list[str]:
        return sorted({n.region for n in self.nodes})

    def zone_region(self, zone: str) -> str:
        for n in self.nodes:
            if n.zone == zone:
                return n.region
        raise UsageError(f"{self.source}: no zone named {zone!r} (zones: {', '.join(self.zones)})")

    def nodes_in(self, *, zone: str | None = None, region: str | None = None) -> list[Node]:
        return [
            n
            for n in self.nodes
            if (zone is None or n.zone == zone) and (region is None or n.region == region)
        ]

    def to_doc(self) -> dict[str, Any]:
        """The topology as a document that :func:`parse` reads back to an equal topology."""
        regions: dict[str, dict[str, list]] = {}
        for n in self.nodes:
            regions.setdefault(n.region, {}).setdefault(n.zone, []).append(
                {"name": n.name, "cpus": n.cpus, "memory_mb": n.memory_mb,
                 "object_store_mb": n.object_store_mb, "labels": dict(n.labels)}
            )
        return {
            "name": self.name,
            "gcs_fault_tolerance": self.gcs_fault_tolerance,
            "health_check": {"period_ms": self.health_check.period_ms,
                             "failure_threshold": self.health_check.failure_threshold},
            "idle_workers_kept": self.idle_workers_kept,
            "head": {"cpus": self.head.cpus, "memory_mb": self.head.memory_mb,
                     "object_store_mb": self.head.object_store_mb},
            "regions": [
                {"name": r, "zones": [{"name": z, "nodes": nodes} for z, nodes in zones.items()]}
                for r, zones in regions.items()
            ],
        }

    def node(self, name: str) -> Node:
        for n in self.nodes:
            if n.name == name:
                return n
        raise UsageError(f"{self.source}: no node named {name!r}")


def shipped_path(name: str) -> Path:
    """Path of a topology shipped with the package (``default``, ``two-regions``)."""
    return Path(str(resources.files("chaos") / "topologies" / f"{name}.yaml"))


def load(path: str | Path | None = None) -> Topology:
    """Load a topology file; ``None`` or a shipped name loads the shipped one."""
    if path is None:
        path = shipped_path("default")
    elif str(path) in SHIPPED:
        path = shipped_path(str(path))
    path = Path(path)
    return parse(read_yaml(path, "topology file"), source=path.name)


def problems(data: Any, source: str = "<memory>") -> list[str]:
    """Every problem of a decoded topology document, one line each naming ``source`` and the field:
    the schema's, then (when it passes) names used twice."""
    found = schemas.errors(data, schemas.TOPOLOGY)
    if not found:
        found = _duplicate_names(data)
    return [f"{source}: {line}" for line in found]


def parse(data: Any, source: str = "<memory>") -> Topology:
    """Validate a decoded topology document; raise :class:`UsageError` naming the field."""
    found = problems(data, source)
    if found:
        raise UsageError(found[0])
    head = data.get("head", {})
    health = data.get("health_check", {})
    nodes = tuple(
        Node(
            name=n["name"],
            zone=z["name"],
            region=r["name"],
            cpus=n.get("cpus", 4),
            memory_mb=n.get("memory_mb", 4096),
            object_store_mb=n.get("object_store_mb", 128),
            labels={k: str(v) for k, v in n.get("labels", {}).items()},
        )
        for r in data["regions"]
        for z in r["zones"]
        for n in z["nodes"]
    )
    return Topology(
        name=data["name"],
        head=Head(cpus=head.get("cpus", 0), memory_mb=head.get("memory_mb", 2048),
                  object_store_mb=head.get("object_store_mb", 128)),
        nodes=nodes,
        gcs_fault_tolerance=data.get("gcs_fault_tolerance", True),
        health_check=HealthCheck(period_ms=health.get("period_ms", 1000),
                                 failure_threshold=health.get("failure_threshold", 3)),
        idle_workers_kept=data.get("idle_workers_kept", 0),
        source=source,
    )


def _duplicate_names(data: dict[str, Any]) -> list[str]:
    """Regions, zones and nodes share one namespace (they become Ray label values side by side)."""
    seen: dict[str, str] = {}
    out = []

    def use(name: str, path: str) -> None:
        if name in seen:
            out.append(f"{path}: name {name!r} is already used at {seen[name]}")
        else:
            seen[name] = path

    for ri, r in enumerate(data["regions"]):
        use(r["name"], f"regions[{ri}].name")
        for zi, z in enumerate(r["zones"]):
            use(z["name"], f"regions[{ri}].zones[{zi}].name")
            for ni, n in enumerate(z["nodes"]):
                use(n["name"], f"regions[{ri}].zones[{zi}].nodes[{ni}].name")
    return out
