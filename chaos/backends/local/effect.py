"""What the local backend looks at to prove a fault took effect (:meth:`LocalBackend.effect_checks`).

One call is one look: a list of checks ``{"check": what was looked at, "ok": bool, "seen": what was
observed}``; :func:`chaos.scopes.faults.prove` calls it until every check is ok or the scope's bound passes.

- replica: its worker process gone (SIGKILL leaves no process; a zombie counts as gone);
- engine: each stopped engine process in state ``T`` (stopped, alive), and the replica's own process
  alive and not stopped (the hang is the engine's alone);
- engine-crash: each killed engine process gone, and the replica's own process still there (the crash is
  the engine's, not the replica's: Serve is left to notice it);
- engine-error: each signalled engine's tombstone, written by the app's hook as it raised the error in the
  engine's step (vLLM's engine process outlives its error, so its end proves nothing), and the replica's own
  process still there;
- engine-stutter: the engine processes sampled over two cycles of the duty cycle, each seen stopped in one
  sample and running in another, and the replica's process alive and not stopped
  (:func:`chaos.backends.local.throttle.sample`);
- node, zone, region, drain (at its deadline): no process left in the node's session, and the GCS
  holding the node DEAD (ALIVE is no effect; a GCS that does not answer, as while the head is
  down, is said, not counted against it);
- head: no process left in the head's session (method ``gcs``: no ``gcs_server``), and the GCS not
  answering;
- redis: the process gone and nothing answering PING on its address;
- partition: a TCP connection across the cut, opened *before* it (:class:`CutProbe`), carries no
  more bytes (a request on it gets no answer within a second), and a new connection is not
  accepted within a second. The connection runs from the rig's namespace to a node of the zone
  (its Serve proxy), so it crosses the zone's link like any packet between the zone and the rest.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chaos.backends import engine_faults
from chaos.backends.local import procs, redis
from serve_apps import engine_faults as app_engine_faults

if TYPE_CHECKING:
    from chaos.backends.local.cluster import LocalCluster


def check(what: str, ok: bool, seen: str) -> dict[str, Any]:
    return {"check": what, "ok": bool(ok), "seen": seen}


def signalled(fault: dict[str, Any]) -> dict[str, Any]:
    """The kill signalled at least one process (``pids``: a count or a list): a victim already down
    is no fault of this run's, whatever the state says afterwards."""
    pids = fault.get("pids")
    n = len(pids) if isinstance(pids, list) else int(pids or 0)
    return check("the kill signalled the victim's processes", n > 0, f"{n} signalled")


def processes_gone(cluster: LocalCluster, node: str) -> dict[str, Any]:
    left = cluster.node_processes(node)
    return check(f"{node}: no process left in its session", not left,
                 "none" if not left else f"{len(left)} still running (e.g. {procs.cmdline(left[0])[:60]!r})")


def gcs_dead(cluster: LocalCluster, nodes: list[str]) -> dict[str, Any]:
    """The GCS's view of ``nodes``: each DEAD (or absent). The GCS not answering is no evidence either
    way: said, and counted as ok (the processes' check stands alone then)."""
    states = {s.name: s.gcs_state for s in cluster.status() if s.name in nodes}
    if states and all(v == "UNKNOWN" for v in states.values()):
        return check(f"the GCS holds {', '.join(nodes)} dead", True, "the GCS does not answer (not asked)")
    alive = sorted(n for n, v in states.items() if v == "ALIVE")
    return check(f"the GCS holds {', '.join(nodes)} dead", not alive,
                 ", ".join(f"{n} {v}" for n, v in sorted(states.items())))


def nodes_down(cluster: LocalCluster, nodes: list[str]) -> list[dict[str, Any]]:
    return [processes_gone(cluster, n) for n in nodes] + [gcs_dead(cluster, nodes)]


def pids_gone(pids: list[int], what: str) -> dict[str, Any]:
    left = [p for p in pids if procs.alive(p)]
    return check(" ".join([what, *map(str, pids), "gone"]), bool(pids) and not left,
                 "gone" if pids and not left else (f"{left} still alive" if left else "no process was named"))


def replica_lives(pid: int | None) -> dict[str, Any]:
    """The replica's process is still there (not a zombie) when its engine is gone."""
    state = procs.state(pid) if pid else None
    return check(f"the replica's process {pid} alive without its engine", bool(state) and state not in ("Z", "X"),
                 f"state {state}" if state else "gone")


def tombstones(pids: list[int]) -> dict[str, Any]:
    """Each engine's record that it raised the injected error (:func:`engine_faults.tombstone_checks`)."""
    found = {}
    for p in pids:
        try:
            found[p] = Path(app_engine_faults.tombstone_path(p)).read_text()
        except OSError:
            found[p] = None
    return engine_faults.tombstone_checks(pids, found)


def replica_runs(pid: int | None) -> dict[str, Any]:
    """The replica's process alive and not stopped while its engine is (an engine hang stops the engine alone)."""
    return engine_faults.replica_runs(pid, procs.state(pid) if pid else None)


def pids_stopped(pids: list[int]) -> dict[str, Any]:
    states = {p: procs.state(p) for p in pids}
    return check(f"engine process(es) {', '.join(map(str, pids))} stopped (state T)",
                 bool(pids) and all(s in ("T", "t") for s in states.values()),
                 ", ".join(f"{p} {s or 'gone'}" for p, s in states.items()) or "no process was named")


def head_down(cluster: LocalCluster, head: str, gcs_only: bool = False) -> list[dict[str, Any]]:
    """The head's processes gone (``gcs_only``: its ``gcs_server`` alone), and the GCS not answering."""
    answer = cluster.gcs_nodes(timeout=1.0)
    if gcs_only:
        left = [p for p in cluster.node_processes(head) if "gcs/gcs_server" in procs.cmdline(p)]
        gone = check(f"{head}: gcs_server gone", not left, "gone" if not left else f"pid {left[0]} still running")
    else:
        gone = processes_gone(cluster, head)
    return [gone, check("the GCS does not answer", answer is None, "no answer" if answer is None else "it answers")]


def redis_down(cluster: LocalCluster) -> list[dict[str, Any]]:
    r = cluster.state.redis
    if r is None:
        return [check("Redis down", False, "this cluster has no Redis (GCS fault tolerance off)")]
    pong = redis.command(r.host, r.port, "PING", timeout=1.0)
    return [check("the Redis process gone", not cluster.redis_alive(), "gone" if not cluster.redis_alive() else "alive"),
            check(f"nothing answers PING on {r.host}:{r.port}", not pong, "no answer" if not pong else repr(pong[:20]))]


class CutProbe:
    """A TCP connection across a partition, opened before the cut: after it, the connection must
    carry no more bytes and a new one must not be accepted (:meth:`checks`)."""

    REQUEST = b"GET /-/healthz HTTP/1.1\r\nHost: probe\r\nConnection: keep-alive\r\n\r\n"

    def __init__(self, host: str, port: int, timeout_s: float = 1.0):
        self.address, self.timeout_s = (host, port), timeout_s
        self.sock: socket.socket | None = None
        self.opened_s: float | None = None

    def open(self) -> CutProbe:
        """Connect and see one answer: the connection carries bytes before the cut."""
        s = socket.create_connection(self.address, timeout=5.0)
        s.settimeout(5.0)
        s.sendall(self.REQUEST)
        if not s.recv(4096):
            s.close()
            raise ConnectionError(f"{self.address}: the probe connection got no answer before the cut")
        self.sock, self.opened_s = s, time.monotonic()
        return self

    def _still_carries(self) -> tuple[bool, str]:
        if self.sock is None:
            return False, "no connection was opened before the cut"
        try:
            self.sock.settimeout(self.timeout_s)
            self.sock.sendall(self.REQUEST)
            data = self.sock.recv(4096)
        except socket.timeout:
            return False, f"no answer within {self.timeout_s:.0f} s"
        except (ConnectionResetError, BrokenPipeError) as e:
            return True, f"reset by the far end ({type(e).__name__}: its RST got through)"
        except OSError as e:  # unreachable: nothing gets across
            return False, f"{type(e).__name__}: {e}"
        if not data:
            # the far end's FIN got through: the path still carries (a cut delivers nothing at all)
            return True, "closed by the far end (its FIN got through)"
        return True, f"answered ({data[:12]!r})"

    def _new_accepted(self) -> tuple[bool, str]:
        """A new connection is answered (accepted, or refused or reset: an answer that crossed the path) or
        not (silence, or no route: the cut)."""
        try:
            with socket.create_connection(self.address, timeout=self.timeout_s):
                return True, "accepted"
        except (ConnectionRefusedError, ConnectionResetError) as e:
            return True, f"answered ({type(e).__name__}): the path carries"
        except OSError as e:
            return False, f"not answered ({type(e).__name__})"

    def checks(self) -> list[dict[str, Any]]:
        carries, seen = self._still_carries()
        accepted, seen_new = self._new_accepted()
        host, port = self.address
        return [check(f"an established connection to {host}:{port}, opened before the cut, carries no more bytes",
                      not carries, seen),
                check(f"a new connection to {host}:{port} is not accepted", not accepted, seen_new)]

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
