"""Zone and region loss: the cordon of every node the loss takes out (annotated with the run id),
the crash of the zones' Ray pods, the watch that proves the loss until its heal, the uncordon
(which nodes: :mod:`chaos.backends.kuberay.kube.zone`)."""

from __future__ import annotations


from chaos.backends.kuberay.kube import marks as km, zone as kz
from chaos.backends.kuberay.kube.client import KubeClient
from chaos.backends.kuberay.kills import Kills
from chaos.backends.kuberay.load import LoadJob
from chaos.backends.kuberay.reads import Pods
from chaos.backends.kuberay.target import Target
from chaos.backends.kuberay.common import (CORDON_MARK, ZONE_LABEL, check, labels_of, limit, name_of,
                                           node_of, pod_ready, select, zone_loss_nodes)
from chaos.base.errors import UsageError


class ZoneLoss:
    """Zone and region loss, and its proof from the injection to the heal: held by the domains part
    (``backend.domains.zone_loss``). Per loss (keyed by its zones): the nodes it took out (``lost_nodes``), every node name
    known when it began (``nodes_at_loss``: a later one was added since) and its watch (``zone_watches``,
    :class:`~chaos.backends.kuberay.kube.zone.ZoneWatch`, looking every ``zone_watch_poll_s``)."""

    def __init__(self, kube: KubeClient, target: Target, pods: Pods, kills: Kills, load: LoadJob,
                 zone_watch_poll_s: float):
        self.kube, self.target, self.pods, self.kills, self.load = kube, target, pods, kills, load
        self.lost_nodes: dict[tuple[str, ...], list[str]] = {}
        self.zone_watch_poll_s = float(zone_watch_poll_s)
        self.zone_watches: dict[tuple[str, ...], kz.ZoneWatch] = {}
        self.nodes_at_loss: dict[tuple[str, ...], set[str]] = {}
        # tests only: False leaves the cordon of the zone's spare nodes out (only those hosting the pods, or
        # labelled, are cordoned: the loss as it was before, which KubeRay's replacements undid on a spare node)
        self.cordon_spare_nodes = True

    def kill_zones(self, zones: list[str]) -> list[str]:
        """Zone (or region) loss: one blast-radius check for every Ray pod of ``zones`` (``max_pods``) and
        for every node it would cordon (``max_nodes``: every node of the zones one of the cluster's pod
        templates admits, that hosts its pods, or that carries :data:`ZONE_LOSS_LABEL`:
        :func:`chaos.backends.kuberay.kube.zone.zone_loss_nodes`), then cordon those nodes (annotated with the run
        id; one someone else cordoned is left alone), SIGKILL the pods' processes and force-delete the pods;
        they stay out until :meth:`restore_zones`. From then on a :class:`~chaos.backends.kuberay.kube.zone.ZoneWatch`
        looks every ``zone_watch_poll_s`` for a Ray pod of the cluster Ready in the zones (the proof that the
        loss holds until the heal: :meth:`effect_checks`, :meth:`effect_held`, :meth:`restore_zones`)."""
        started, started_ns = self.kube.monotonic(), self.kube.wall_ns()
        what = f"loss of {', '.join(zones)}"
        key = tuple(sorted(zones))
        nodes, pods, cordon, theirs = self.reach(zones, what)
        if not self.cordon_spare_nodes:  # tests only: the loss as it was, which a zone's spare nodes undid
            cordon, theirs = zone_loss_nodes(nodes, pods, zones)
        self.lost_nodes[key] = sorted(set(cordon) | set(theirs))
        self.nodes_at_loss[key] = {name_of(n) for n in nodes}
        by_name = {name_of(n): n for n in nodes}
        for n in cordon:
            self._cordon(by_name[n])
        killed = self.kills.kill_pods(pods, what)
        old = self.zone_watches.pop(key, None)
        if old is not None:
            old.stop(final_look=False)
        self.zone_watches[key] = kz.ZoneWatch(list(key), self.target.cluster, lambda: self._ready_in_lost_zones(key),
                                              self.zone_watch_poll_s, started, started_ns,
                                              max_life_s=self.target.helper_deadline_s, monotonic=self.kube.monotonic,
                                              wall_ns=self.kube.wall_ns).start()
        return killed

    def _ready_in_lost_zones(self, key: tuple[str, ...]) -> list[dict]:
        """One look of a zone loss's watch: each Ray pod of the cluster Ready on a node of the lost zones,
        with why that node could take it (uncordoned since, added since the loss began, or left schedulable)."""
        nodes = self.pods.nodes()
        by_name = {name_of(n): n for n in nodes}
        lost, known = set(self.lost_nodes.get(key) or ()), self.nodes_at_loss.get(key) or set()
        out = []
        for p in select(self.pods.pods(), nodes, cluster=self.target.cluster, zones=list(key)):
            if not pod_ready(p):
                continue
            n = node_of(p)
            cordoned = bool(((by_name.get(n) or {}).get("spec") or {}).get("unschedulable"))
            if n not in known:
                how = "a node added after the loss began (an autoscaler's?), never cordoned"
            elif n in lost:
                how = ("one the loss cordoned, uncordoned since by someone else" if not cordoned else
                       "one the loss cordoned, still cordoned (the pod was bound to it anyway)")
            else:
                how = "one the loss left schedulable"
            out.append({"pod": name_of(p), "node": n, "zone": labels_of(by_name.get(n) or {}).get(ZONE_LABEL),
                        "how": how})
        return out

    def watch_of(self, zones) -> kz.ZoneWatch | None:
        return self.zone_watches.get(tuple(sorted(zones or [])))

    def effect_held(self, fault: dict) -> list[dict]:
        """For a zone or region loss: whether it held so far, from its injection until now, as effect checks
        (one look now, added to what the watch saw since the loss began; [] for other scopes). What a fault's
        wait loop may call before its heal; :meth:`restore_zones` records the same into the fault itself."""
        if fault.get("scope") not in ("zone", "region"):
            return []
        w = self.watch_of(fault.get("zones"))
        if w is None:
            return [check(f"the loss of {', '.join(fault.get('zones') or [])} watched from the injection", False,
                          "this backend has no watch of it")]
        self.adopt_fault(w, fault)
        w.look_once()
        return [w.check()]

    @staticmethod
    def adopt_fault(w: kz.ZoneWatch, fault: dict) -> None:
        if not any(f is fault for f in w.faults):
            w.faults.append(fault)

    def reach(self, zones: list[str], what: str) -> tuple[list[dict], list[dict], list[str], list[str]]:
        """What a loss of ``zones`` would touch, within the blast-radius limits (``max_pods``,
        ``max_nodes``; refused beyond them): (the nodes read, the zones' Ray pods, the nodes this
        run would cordon, those someone else cordoned)."""
        nodes = self.pods.nodes()
        self.load.refuse_reaching(what, zones=zones, nodes_read=nodes)
        pods = limit(select(self.pods.pods(), nodes, cluster=self.target.cluster, zones=zones), self.target.max_pods, what)
        cordon, theirs = zone_loss_nodes(nodes, pods, zones, kz.cluster_templates(self.pods.raycluster()))
        if len(cordon) > self.target.max_nodes:
            raise UsageError(f"{what}: it would cordon {len(cordon)} nodes, more than the limit of {self.target.max_nodes} "
                             f"(max_nodes): refusing to act ({', '.join(cordon[:5])}...)")
        return nodes, pods, cordon, theirs

    def _cordon(self, node: dict) -> None:
        self.pods.patch_node(node, {"metadata": {"annotations": {CORDON_MARK: self.target.run_id, km.CORDON_EXPIRES:
                                                             km.deadline(self.target.helper_deadline_s)}},
                                "spec": {"unschedulable": True}})

    def uncordon(self, node: dict) -> None:
        """Drop the mark; uncordon unless someone did already (a schedulable node stays as it is)."""
        body: dict = {"metadata": {"annotations": {CORDON_MARK: None, km.CORDON_EXPIRES: None}}}
        if (node.get("spec") or {}).get("unschedulable"):
            body["spec"] = {"unschedulable": False}
        self.pods.patch_node(node, body)

    def restore_zones(self, zones: list[str] | None = None) -> list[str]:
        """Uncordon the nodes this run cordoned (annotated with its run id; of ``zones``, or all):
        KubeRay's Pending pods then schedule. Another run's cordon, or a node cordoned by someone
        else (no annotation of ours), is left alone. First the watch of each loss healed here stops,
        after one last look: what it found goes into the fault it proves (:meth:`ZoneWatch.record
        <chaos.backends.kuberay.kube.zone.ZoneWatch.record>`; a zone that came back makes it not in effect)."""
        self.stop_watches(zones)
        done = []
        for n in self.pods.nodes():
            ann = (n.get("metadata") or {}).get("annotations") or {}
            if ann.get(CORDON_MARK) != self.target.run_id or (zones is not None and labels_of(n).get(ZONE_LABEL) not in zones):
                continue
            self.uncordon(n)
            done.append(name_of(n))
        return done

    def stop_watches(self, zones: list[str] | None) -> dict[tuple[str, ...], dict]:
        """Stop the watches of the losses of ``zones`` (all when None), each after a last look; record each
        finding into the faults it proves. Returns the findings."""
        out = {}
        for key in list(self.zone_watches):
            if zones is not None and not set(key) <= set(zones):
                continue
            w = self.zone_watches.pop(key)
            out[key] = w.stop()
            for f in w.faults:
                w.record(f)
        return out
