"""Failure domains: regions -> zones -> nodes, read from a YAML file and validated.

A topology says *where* things may fail together. The local backend turns every
node into a real raylet with Ray node labels ``region``, ``zone`` and ``node``; the
Serve apps pin replicas to zones with ``label_selector`` on those labels.

Every validation problem is one line that names the file and the field, e.g.
``default.yaml: regions[0].zones[1].nodes[0].cpus: must be a positive integer, got -1``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from chaos.errors import UsageError, read_input

NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$")
LABEL_KEY_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}[A-Za-z0-9])?$")
RESERVED_LABELS = ("zone", "region", "node")

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
    text = read_input(path, "topology file")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise UsageError(f"{path}:{where} not valid YAML: {getattr(e, 'problem', e)}") from None
    return parse(data, source=path.name)


def parse(data: Any, source: str = "<memory>") -> Topology:
    """Validate a decoded topology document; raise :class:`UsageError` naming the field."""
    v = _Validator(source)
    doc = v.mapping(data, "", required=("name", "regions"), optional=("head", "gcs_fault_tolerance", "health_check",
                                                                         "idle_workers_kept"))
    name = v.name(doc["name"], "name")
    head_doc = v.mapping(doc.get("head", {}), "head", optional=("cpus", "memory_mb", "object_store_mb"))
    head = Head(
        cpus=v.count(head_doc.get("cpus", 0), "head.cpus", minimum=0),
        memory_mb=v.count(head_doc.get("memory_mb", 2048), "head.memory_mb", minimum=256),
        object_store_mb=v.count(head_doc.get("object_store_mb", 128), "head.object_store_mb", minimum=80),
    )
    gcs_ft = doc.get("gcs_fault_tolerance", True)
    if not isinstance(gcs_ft, bool):
        v.fail("gcs_fault_tolerance", f"must be true or false, got {gcs_ft!r}")
    hc_doc = v.mapping(doc.get("health_check", {}), "health_check", optional=("period_ms", "failure_threshold"))
    health = HealthCheck(
        period_ms=v.count(hc_doc.get("period_ms", 1000), "health_check.period_ms", minimum=100),
        failure_threshold=v.count(hc_doc.get("failure_threshold", 3), "health_check.failure_threshold", minimum=1),
    )
    idle = doc.get("idle_workers_kept", 0)
    if idle is not None:
        idle = v.count(idle, "idle_workers_kept", minimum=0)

    nodes: list[Node] = []
    seen: dict[str, str] = {}
    regions = v.sequence(doc["regions"], "regions")
    for ri, rdoc in enumerate(regions):
        rpath = f"regions[{ri}]"
        rdoc = v.mapping(rdoc, rpath, required=("name", "zones"))
        region = v.name(rdoc["name"], f"{rpath}.name")
        v.unique(seen, region, f"{rpath}.name")
        for zi, zdoc in enumerate(v.sequence(rdoc["zones"], f"{rpath}.zones")):
            zpath = f"{rpath}.zones[{zi}]"
            zdoc = v.mapping(zdoc, zpath, required=("name", "nodes"))
            zone = v.name(zdoc["name"], f"{zpath}.name")
            v.unique(seen, zone, f"{zpath}.name")
            for ni, ndoc in enumerate(v.sequence(zdoc["nodes"], f"{zpath}.nodes")):
                npath = f"{zpath}.nodes[{ni}]"
                ndoc = v.mapping(
                    ndoc, npath, required=("name",), optional=("cpus", "memory_mb", "object_store_mb", "labels")
                )
                node_name = v.name(ndoc["name"], f"{npath}.name")
                v.unique(seen, node_name, f"{npath}.name")
                nodes.append(
                    Node(
                        name=node_name,
                        zone=zone,
                        region=region,
                        cpus=v.count(ndoc.get("cpus", 4), f"{npath}.cpus", minimum=1),
                        memory_mb=v.count(ndoc.get("memory_mb", 4096), f"{npath}.memory_mb", minimum=256),
                        object_store_mb=v.count(ndoc.get("object_store_mb", 128), f"{npath}.object_store_mb", minimum=80),
                        labels=v.labels(ndoc.get("labels", {}), f"{npath}.labels"),
                    )
                )
    if len({n.zone for n in nodes}) < 1:
        v.fail("regions", "must hold at least one zone with one node")
    return Topology(name=name, head=head, nodes=tuple(nodes), gcs_fault_tolerance=gcs_ft, health_check=health,
                    idle_workers_kept=idle, source=source)


class _Validator:
    def __init__(self, source: str):
        self.source = source

    def fail(self, path: str, message: str):
        where = f"{path}: " if path else ""
        raise UsageError(f"{self.source}: {where}{message}")

    def mapping(self, value, path, required=(), optional=()) -> dict:
        if not isinstance(value, dict):
            self.fail(path, f"must be a mapping, got {type(value).__name__}")
        for key in value:
            if key not in required and key not in optional:
                allowed = ", ".join((*required, *optional))
                self.fail(f"{path}.{key}" if path else str(key), f"unknown field (allowed: {allowed})")
        for key in required:
            if key not in value:
                self.fail(f"{path}.{key}" if path else key, "is required")
        return value

    def sequence(self, value, path) -> list:
        if not isinstance(value, list) or not value:
            self.fail(path, "must be a non-empty list")
        return value

    def name(self, value, path) -> str:
        if not isinstance(value, str) or not NAME_RE.match(value):
            self.fail(path, f"must be a lower-case name of letters, digits and '-' (max 32), got {value!r}")
        return value

    def count(self, value, path, minimum: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            kind = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
            self.fail(path, f"must be {kind}, got {value!r}")
        return value

    def unique(self, seen: dict, name: str, path: str):
        if name in seen:
            self.fail(path, f"name {name!r} is already used at {seen[name]}")
        seen[name] = path

    def labels(self, value, path) -> dict[str, str]:
        if not isinstance(value, dict):
            self.fail(path, f"must be a mapping, got {type(value).__name__}")
        out = {}
        for k, val in value.items():
            if not isinstance(k, str) or not LABEL_KEY_RE.match(k):
                self.fail(f"{path}.{k}", "label keys are letters, digits, '-', '_', '.' (max 63)")
            if k in RESERVED_LABELS:
                self.fail(f"{path}.{k}", f"{k!r} is set from the topology itself")
            if not isinstance(val, (str, int, float)) or isinstance(val, bool):
                self.fail(f"{path}.{k}", f"label values are strings, got {val!r}")
            out[k] = str(val)
        return out
