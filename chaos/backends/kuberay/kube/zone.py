"""Zone and region loss on KubeRay: which nodes it must take out, and the proof that it stays lost.

**Which nodes.** KubeRay v1.7 recreates a crashed Ray pod once it is gone (``raycluster_controller.go``
``reconcilePods``) from its group's pod template; the scheduler places the replacement on any node its
template admits. A worker group pinned to a zone by ``nodeSelector: topology.kubernetes.io/zone`` admits
*every* node of that zone, not only the ones its pods ran on: on a pool with several nodes per zone the
replacements become Ready on the zone's other nodes within seconds and the zone is back while the run
says it is lost. So the loss cordons every node of the zones that one of the cluster's pod templates
(the head group's and each worker group's) could be scheduled on, by the scheduler's own filters
(kube-scheduler plugins ``NodeAffinity``: the template's ``nodeSelector`` and its required node affinity;
``TaintToleration``: every ``NoSchedule``/``NoExecute`` taint of the node tolerated, k8s.io/api
``core/v1/toleration.go`` ``ToleratesTaint``), plus the nodes hosting the cluster's pods now and those
labelled ``availproof.io/zone-loss-node=true`` (:func:`zone_loss_nodes`). A node another workload owns
(tainted for it, or lacking a label the templates require) is left alone. What it would cordon counts
against the blast radius (``max_nodes``; refused beyond it in one line).

**That it stays lost.** One look right after the crash proves little: the replacements are still
Pending then. So a :class:`ZoneWatch` thread, started when the loss is in place, looks every
``poll_s`` from the injection to the heal (and once more just before the heal) for a Ray pod of the
cluster Ready on a node of the lost zones. The first one it sees ends the proof: the fault's effect
becomes ``verified: false`` with when (seconds after the loss began, and the wall clock) and how (the
pod, its node, and why that node could take it: uncordoned by someone, added after the loss began, or
left schedulable), and the run's verdict is ERROR, not a PASS over a shorter loss than it says.
A look that fails (the API server not answering) proves nothing either way: it is counted and said.
"""

from __future__ import annotations

import copy
import threading
import time
from typing import Any, Callable

from chaos.backends.kuberay.kube.labels import ZONE_LABEL

ZONE_LOSS_LABEL = "availproof.io/zone-loss-node"  # "true" on a node a zone loss may cordon though no template admits it
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")  # PreferNoSchedule only scores


def _get(d: dict | None, *keys: str) -> Any:
    """The first of ``keys`` present in ``d``: the API's camelCase (a custom object's JSON) or the
    client's snake_case (``to_dict()`` of a typed object)."""
    for k in keys:
        if d and k in d and d[k] is not None:
            return d[k]
    return None


def tolerates(tolerations: list[dict] | None, taint: dict) -> bool:
    """k8s.io/api core/v1 ``Toleration.ToleratesTaint``: the effect empty or equal; operator ``Exists``
    with an empty key matches every taint, with a key that key; ``Equal`` (the default) key and value."""
    for t in tolerations or []:
        effect = t.get("effect")
        if effect and effect != taint.get("effect"):
            continue
        op = t.get("operator") or "Equal"
        key = t.get("key") or ""
        if op == "Exists":
            if not key or key == taint.get("key"):
                return True
        elif key == taint.get("key") and (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _requirement(labels: dict, fields: dict, e: dict, use_fields: bool = False) -> bool:
    """One NodeSelectorRequirement (k8s.io/component-helpers ``nodeaffinity``): In, NotIn, Exists,
    DoesNotExist, Gt, Lt over the node's labels (``matchFields``: its ``metadata.name``)."""
    src = fields if use_fields else labels
    key, op, values = e.get("key"), e.get("operator"), [str(v) for v in e.get("values") or []]
    have = key in src
    value = src.get(key)
    if op == "In":
        return have and value in values
    if op == "NotIn":
        return not have or value not in values
    if op == "Exists":
        return have
    if op == "DoesNotExist":
        return not have
    if op in ("Gt", "Lt") and have and values:
        try:
            a, b = int(value), int(values[0])
        except (TypeError, ValueError):
            return False
        return a > b if op == "Gt" else a < b
    return False


def node_affinity_admits(affinity: dict | None, node: dict) -> bool:
    """The template's required node affinity (``requiredDuringSchedulingIgnoredDuringExecution``): its
    ``nodeSelectorTerms`` ORed, each term's expressions ANDed; none set admits every node."""
    na = _get(affinity or {}, "nodeAffinity", "node_affinity") or {}
    req = _get(na, "requiredDuringSchedulingIgnoredDuringExecution",
               "required_during_scheduling_ignored_during_execution") or {}
    terms = _get(req, "nodeSelectorTerms", "node_selector_terms") or []
    if not terms:
        return True
    meta = node.get("metadata") or {}
    labels, fields = meta.get("labels") or {}, {"metadata.name": meta.get("name")}
    for term in terms:
        exprs = _get(term, "matchExpressions", "match_expressions") or []
        flds = _get(term, "matchFields", "match_fields") or []
        if not exprs and not flds:
            continue  # an empty term matches nothing
        if all(_requirement(labels, fields, e) for e in exprs) and all(_requirement(labels, fields, e, True)
                                                                      for e in flds):
            return True
    return False


def template_admits(pod_spec: dict | None, node: dict) -> bool:
    """Whether the scheduler could place a pod of this template (its ``spec``) on ``node``, cordon aside:
    the ``nodeSelector`` carried by the node's labels, the required node affinity, every blocking taint
    tolerated. Resources are not counted (a full node frees up when the zone's pods die)."""
    spec = pod_spec or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    selector = _get(spec, "nodeSelector", "node_selector") or {}
    if any(labels.get(k) != v for k, v in selector.items()):
        return False
    if not node_affinity_admits(_get(spec, "affinity"), node):
        return False
    tolerations = _get(spec, "tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in BLOCKING_EFFECTS and not tolerates(tolerations, taint):
            return False
    return True


def cluster_templates(raycluster: dict | None) -> list[tuple[str, dict]]:
    """(group, pod spec) of every pod template of a RayCluster KubeRay makes pods from: the head group's
    and each worker group's (``replicas`` 0 included: a Ray autoscaler may scale it up)."""
    spec = (raycluster or {}).get("spec") or {}
    out = []
    head = ((spec.get("headGroupSpec") or {}).get("template") or {}).get("spec")
    if head is not None:
        out.append(("head", head))
    for g in spec.get("workerGroupSpecs") or []:
        out.append((str(g.get("groupName")), (g.get("template") or {}).get("spec") or {}))
    return out


def zone_loss_nodes(nodes: list[dict], pods: list[dict], zones: list[str],
                    templates: list[tuple[str, dict]] | None = None) -> tuple[list[str], list[str]]:
    """The nodes a loss of ``zones`` takes out: every node of the zones that one of the cluster's pod
    ``templates`` admits (:func:`template_admits`: where KubeRay's replacements could be scheduled), that
    hosts one of ``pods`` (this RayCluster's), or that is labelled :data:`ZONE_LOSS_LABEL` ``=true``.
    Returned as (to cordon, already unschedulable: someone else's cordon, left alone). Any other node of
    the zones (another workload's, which no template of the cluster admits) is not touched."""
    wanted = set(zones)
    hosting = {(p.get("spec") or {}).get("node_name") for p in pods}
    cordon, skip = [], []
    for n in nodes:
        meta = n.get("metadata") or {}
        lab = meta.get("labels") or {}
        if lab.get(ZONE_LABEL) not in wanted:
            continue
        if not (meta.get("name") in hosting or lab.get(ZONE_LOSS_LABEL) == "true"
                or any(template_admits(spec, n) for _, spec in templates or [])):
            continue
        (skip if (n.get("spec") or {}).get("unschedulable") else cordon).append(meta.get("name"))
    return sorted(cordon), sorted(skip)


def _iso(t_ns: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t_ns / 1e9)) + f".{t_ns % 1_000_000_000 // 1_000_000:03d}Z"


class ZoneWatch:
    """Looks, every ``poll_s`` from its start until :meth:`stop`, whether a Ray pod of the cluster is
    Ready in the lost zones: ``look()`` returns one dict per such pod (``pod``, ``node``, ``how``: why that
    node could take it), or raises when it could not look. The first pod seen is the breach: when
    (``t_s`` after ``started``, the loss's first instant, and ``t_ns`` on the wall clock) and how. It stops
    by itself after ``max_life_s`` (a run that crashed leaves no thread looking forever)."""

    def __init__(self, zones: list[str], cluster: str, look: Callable[[], list[dict]], poll_s: float,
                 started: float, started_ns: int, max_life_s: float = 3600.0,
                 monotonic: Callable[[], float] = time.monotonic, wall_ns: Callable[[], int] = time.time_ns):
        self.monotonic, self.wall_ns = monotonic, wall_ns  # the clock ``started`` was read on
        self.zones, self.cluster, self._look, self.poll_s = list(zones), cluster, look, float(poll_s)
        self.started, self.started_ns, self.max_life_s = started, started_ns, float(max_life_s)
        self.breach: dict | None = None
        self.looks = 0
        self.failed = 0
        self.last_error: str | None = None
        self.stopped_s: float | None = None
        self.faults: list[dict] = []  # the fault dicts (chaos.scopes.faults) whose effect this watch proves
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "ZoneWatch":
        self._thread = threading.Thread(target=self._run, name=f"zone-watch-{'-'.join(self.zones)}", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.poll_s):
            if self.monotonic() - self.started > self.max_life_s:
                return
            self.look_once()

    def look_once(self) -> dict | None:
        """One look; the breach (the first seen), if any by now."""
        try:
            ready = self._look()
        except Exception as e:  # noqa: BLE001 - a look that fails proves nothing; said, looked at again
            with self._lock:
                self.looks += 1
                self.failed += 1
                self.last_error = f"{type(e).__name__}: {e}"[:200]
                return self.breach
        now, now_ns = self.monotonic(), self.wall_ns()
        with self._lock:
            self.looks += 1
            if ready and self.breach is None:
                self.breach = {"t_s": round(now - self.started, 3), "t_ns": now_ns, "at": _iso(now_ns),
                               "pods": [r["pod"] for r in ready], "nodes": sorted({r["node"] for r in ready}),
                               "how": "; ".join(f"pod {r['pod']} Ready on node {r['node']}: {r['how']}"
                                                for r in ready[:5])}
            return self.breach

    def stop(self, final_look: bool = True) -> dict:
        """Stop looking (one last look first, before the heal changes anything); the finding."""
        if self.stopped_s is None:
            self._stop.set()
            if self._thread is not None and self._thread is not threading.current_thread():
                self._thread.join(timeout=max(5.0, self.poll_s * 2))
            if final_look:
                self.look_once()
            self.stopped_s = round(self.monotonic() - self.started, 3)
        return self.finding()

    def finding(self) -> dict:
        with self._lock:
            watched = self.stopped_s if self.stopped_s is not None else round(self.monotonic() - self.started, 3)
            return {"zones": self.zones, "held": self.breach is None, "watched_s": watched, "poll_s": self.poll_s,
                    "looks": self.looks, "failed_looks": self.failed, "last_error": self.last_error,
                    "started_at": _iso(self.started_ns), "breach": dict(self.breach) if self.breach else None}

    def check(self) -> dict:
        """The watch as one effect check: no Ray pod of the cluster Ready in the zones since the loss began."""
        f = self.finding()
        what = (f"no Ray pod of {self.cluster} Ready in {', '.join(self.zones)} from the loss to the heal "
                f"(looked every {self.poll_s:g} s)")
        b = f["breach"]
        if b:
            seen = (f"the zone came back {b['t_s']:.1f} s after the loss began (at {b['at']}), before the heal: "
                    f"{b['how']}")
        else:
            seen = f"none in {f['looks']} look(s) over {f['watched_s']:.1f} s"
            if f["failed_looks"]:
                seen += f" ({f['failed_looks']} look(s) failed: {f['last_error']})"
        return {"check": what, "ok": b is None, "seen": seen[:600]}

    def record(self, fault: dict) -> None:
        """Write the finding into ``fault`` (the dict :mod:`chaos.scopes.faults` records at the heal's end mark):
        ``zone_watch``, and in its ``effect`` the watch's check; a breach makes the effect ``verified: false``
        (the run's verdict: ERROR, "fault not in effect"), with ``lost_until_s`` its instant."""
        f = self.finding()
        fault["zone_watch"] = f
        effect = copy.deepcopy(fault.get("effect"))  # the inject end mark holds the one proven then: left as it was
        if not isinstance(effect, dict):
            effect = {"verified": None, "time_to_effect_s": None, "bound_s": None, "checks": []}
        c = self.check()
        c["t_s"] = f["breach"]["t_s"] if f["breach"] else f["watched_s"]
        effect["checks"] = [x for x in effect.get("checks") or [] if x.get("check") != c["check"]] + [c]
        if f["breach"]:
            effect["verified"] = False
            effect["lost_until_s"] = f["breach"]["t_s"]
            effect["came_back"] = f["breach"]
        fault["effect"] = effect
