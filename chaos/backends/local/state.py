"""The local cluster's state file: exactly what was started, so it can be stopped by PID.

Written atomically after every change (start, kill, restart), so a crash of the rig at any
point leaves a file that `availproof cluster down` can act on. Nothing outside what this file
names is ever signalled.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from chaos.base.errors import UsageError

VERSION = 1
FILENAME = "state.json"


@dataclass
class NodeState:
    name: str
    role: str  # "head" | "worker"
    ip: str
    ports: dict[str, int]
    temp_dir: str
    labels: dict[str, str]
    zone: str | None = None
    region: str | None = None
    cpus: int = 0
    memory_mb: int = 0
    object_store_mb: int = 0
    sid: int | None = None  # session id of the node's processes (None: not running)
    netns: str | None = None
    starts: int = 0

    @property
    def serve_port(self) -> int:
        return self.ports["serve_http"]


@dataclass
class RedisState:
    host: str
    port: int
    dir: str
    pid: int | None = None


@dataclass
class ClusterState:
    cluster_id: str
    topology: dict[str, Any]  # the topology document as loaded, so it can be parsed again
    topology_source: str
    gcs_fault_tolerance: bool
    temp_root: str
    base_port: int
    nodes: dict[str, NodeState] = field(default_factory=dict)
    redis: RedisState | None = None
    netns_mode: bool = False  # one network namespace per zone (see netns.py)
    bridge: str | None = None
    links: dict[str, str] = field(default_factory=dict)  # zone (or "head") -> outer veth on the bridge
    partitioned: list[str] = field(default_factory=list)  # zones whose link is down
    front: dict[str, Any] | None = None  # the rig's HAProxy (chaos.backends.local.haproxy.FrontState)
    secret_env: list[str] = field(default_factory=list)  # variables its processes never get (chaos.system.secret_env)
    version: int = VERSION

    @property
    def head(self) -> NodeState:
        return self.nodes["head"]

    @property
    def gcs_address(self) -> str:
        return f"{self.head.ip}:{self.head.ports['gcs']}"

    @property
    def dashboard_url(self) -> str:
        return f"http://{self.head.ip}:{self.head.ports['dashboard']}"

    def workers(self) -> list[NodeState]:
        return [n for n in self.nodes.values() if n.role == "worker"]

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any], source: str = FILENAME) -> "ClusterState":
        try:
            if data.get("version") != VERSION:
                raise UsageError(f"{source}: state file version {data.get('version')!r}, expected {VERSION}")
            nodes = {k: NodeState(**v) for k, v in data["nodes"].items()}
            redis = RedisState(**data["redis"]) if data.get("redis") else None
            rest = {k: v for k, v in data.items() if k not in ("nodes", "redis")}
            return cls(nodes=nodes, redis=redis, **rest)
        except (KeyError, TypeError) as e:
            raise UsageError(f"{source}: state file is damaged ({e})") from None


def save(state: ClusterState, cluster_dir: Path) -> Path:
    """Write the state file atomically (temp file + rename)."""
    cluster_dir.mkdir(parents=True, exist_ok=True)
    path = cluster_dir / FILENAME
    fd, tmp = tempfile.mkstemp(dir=cluster_dir, prefix=".state-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(state.to_json(), f, indent=2, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def load(cluster_dir: Path) -> ClusterState | None:
    """The saved state, or None when there is none."""
    path = cluster_dir / FILENAME
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"{path}: state file is not valid JSON ({e.msg} at line {e.lineno})") from None
    return ClusterState.from_json(data, source=str(path))


def remove(cluster_dir: Path) -> None:
    try:
        (cluster_dir / FILENAME).unlink()
    except FileNotFoundError:
        pass
