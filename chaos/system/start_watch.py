"""A live look at one deployment's replica starts, while a fault holds (:mod:`chaos.scopes.restart_fails`): which
new replicas' starts failed, seen through the Ray dashboard's Serve details as they happen (the restart analysis,
:mod:`chaos.analysis.restart`, counts them again from the sampler's samples after the run, by the same rule).

- :func:`states_of`: one deployment's replicas, by id, with their state, from Serve's details; a replica STARTING
  before it has a process on a node (waiting to be allocated one) is left out: its constructor is not running yet
  (the sampler's rule, :func:`chaos.system.sampler.serve_state`);
- :func:`replica_states`: the same through a dashboard (what both backends' ``replica_states`` return): None when
  it did not answer (unknown, not none);
- :class:`StartWatch`: look after look, a **start** is a replica id not listed before the fault; it **failed** when
  seen STARTING and then STOPPING or no longer listed, without ever being seen serving, or when first listed
  already STOPPING (its start began and failed between two looks: it never served, nothing else stops a new
  replica while the fault holds); it **ran** when seen serving. A start that began and ended between two looks is
  not seen: the count is a lower bound, to the looks' period.
"""

from __future__ import annotations

from typing import Any

from chaos.system import ray_dashboard

SERVING = ("RUNNING", "PENDING_MIGRATION")  # what Serve routes to (chaos.system.sampler.SERVING)
STARTING, STOPPING = "STARTING", "STOPPING"


def states_of(details: Any, deployment: str | None) -> dict[str, str] | None:
    """The replicas of ``deployment`` (None: every deployment) in Serve's ``details``, id -> state; a STARTING
    replica with no process on a node yet left out. None (unknown) when ``deployment`` is not listed at all: details
    without it (a controller restarting answers with no applications) say nothing of its replicas, and reading
    them as none would count every STARTING replica as a failed start."""
    out: dict[str, str] = {}
    listed = deployment is None
    for app in ((details or {}).get("applications") or {}).values():
        for name, dep in ((app or {}).get("deployments") or {}).items():
            if deployment is not None and name != deployment:
                continue
            listed = True
            for r in dep.get("replicas") or []:
                if r.get("state") == STARTING and not (r.get("pid") or r.get("node_id")):
                    continue  # waiting for a node: not starting yet
                out[str(r.get("replica_id"))] = str(r.get("state"))
    return out if listed else None


def replica_states(dashboard_url: str, deployment: str | None, timeout: float = 3.0) -> dict[str, str] | None:
    """:func:`states_of` the dashboard's Serve details; None when it did not answer."""
    details = ray_dashboard.serve_details(dashboard_url, timeout)
    return None if details is None else states_of(details, deployment)


class StartWatch:
    """The starts of one deployment's new replicas, look after look (:meth:`saw`); ``before``: its replicas' states
    before the fault (their ids are not starts)."""

    def __init__(self, deployment: str | None, before: dict[str, str]):
        self.deployment = deployment
        self.old = set(before)
        self.starting: dict[str, float] = {}  # id -> first seen STARTING (s from the injection)
        self.ran: dict[str, float] = {}  # id -> first seen serving
        self.failed: list[dict[str, Any]] = []  # {"replica", "starting_s", "failed_s", "seen"}
        self.looks = self.unknown = 0

    def saw(self, t_s: float, states: dict[str, str] | None) -> list[dict[str, Any]]:
        """One look's states (None: no answer, nothing concluded) at ``t_s`` from the injection; the starts it
        found failed."""
        if states is None:
            self.unknown += 1
            return []
        self.looks += 1
        done = self.old | set(self.ran) | {f["replica"] for f in self.failed}
        new: list[dict[str, Any]] = []
        for rid, state in states.items():
            if rid in done:
                continue
            if state in SERVING:
                self.ran[rid] = t_s
                self.starting.pop(rid, None)
            elif state == STARTING:
                self.starting.setdefault(rid, t_s)
            elif state == STOPPING and rid not in self.starting:
                new.append({"replica": rid, "starting_s": None, "failed_s": t_s,
                            "seen": "first listed STOPPING, never serving (its start failed between two looks)"})
        for rid, since in list(self.starting.items()):
            state = states.get(rid)
            if state is None or state == STOPPING:
                del self.starting[rid]
                new.append({"replica": rid, "starting_s": since, "failed_s": t_s,
                            "seen": "STARTING, then " + ("STOPPING" if state else "no longer listed") +
                                    ", never serving"})
        self.failed += new
        return new

    def detail(self) -> dict[str, Any]:
        return {"deployment": self.deployment, "looks": self.looks, "unknown": self.unknown,
                "ran": [{"replica": r, "t_s": t} for r, t in self.ran.items()],
                "still_starting": [{"replica": r, "since_s": t} for r, t in self.starting.items()]}
