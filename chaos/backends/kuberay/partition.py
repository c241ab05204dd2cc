"""Partitions: the set-up before the mark (the probe, the helpers or the labels), the cut, the heal
(the methods and the probe: :mod:`chaos.backends.kuberay.kube.partition`)."""

from __future__ import annotations

import contextlib
import ipaddress

from chaos.backends.kuberay.kube import pod_exec as kube_exec, marks as km, partition as kp
from chaos.backends.kuberay.kube.client import KubeClient
from chaos.backends.kuberay.load import LoadJob
from chaos.backends.kuberay.reads import Pods
from chaos.backends.kuberay.target import Target
from chaos.backends.kuberay.common import api_message, is_not_found, labels_of, limit, name_of, node_of, pod_ips
from chaos.base.errors import ClusterError


class Partitions:
    """A zone cut off the rest, by either method, proven by a connection opened across the cut: held by the
    domains part (``backend.domains.partitions``); each zone's cut as it was made (``cuts``)."""

    def __init__(self, kube: KubeClient, target: Target, pods: Pods, load: LoadJob):
        self.kube, self.target, self.pods, self.load = kube, target, pods, load
        self.cuts: dict[str, dict] = {}

    def cut_pods(self, zone: str) -> list[dict]:
        self.load.refuse_reaching(f"partition of {zone}", zones=[zone])
        return limit(self.pods.ray(zone=zone, node_type="worker"), self.target.max_pods, f"partition of {zone}")

    def preflight_partition(self, zone: str) -> dict:
        """Before any run that partitions ``zone``: a server-side dry-run create (``dryRun=All``: through
        admission, nothing stored) of every object the partition would create: the node-filter helper
        pod for each node of the zone's Ray pods (``hostNetwork`` + ``NET_ADMIN``: Pod Security
        ``baseline`` or a policy engine refuses it), or the NetworkPolicy. A refusal raises one line;
        else what would be created."""
        pods = self.cut_pods(zone)
        what = f"partition of {zone} ({self.target.partition_method})"
        if self.target.partition_method == "networkpolicy":
            objects = [("NetworkPolicy", kp.policy_name(zone),
                        lambda: self.kube.net.create_namespaced_network_policy(
                            self.target.namespace, kp.partition_policy(zone, self.target.cluster, self.target.run_id), dry_run="All"))]
        else:
            objects = [("Pod", kp.helper_name(node),
                        lambda node=node: self.kube.core.create_namespaced_pod(
                            self.target.namespace, kp.helper_pod(node, zone, self.target.helper_image, self.target.run_id,
                                                          self.target.helper_deadline_s), dry_run="All"))
                       for node in sorted({node_of(p) for p in pods})]
        for kind, name, create in objects:
            try:
                create()
            except Exception as e:  # noqa: BLE001 - ApiException: one line
                status = getattr(e, "status", None)
                if status is None:
                    raise
                hint = (" (the helper needs hostNetwork and NET_ADMIN: a namespace whose Pod Security admits "
                        "them, privileged; or --partition-method networkpolicy, whose effect is checked)"
                        if kind == "Pod" else "")
                raise ClusterError(f"{what}: admission refuses the {kind} {name} in namespace {self.target.namespace} "
                                   f"(HTTP {status}: {api_message(e)}){hint}") from None
        return {"method": self.target.partition_method, "would_create": [f"{k}/{n}" for k, n, _ in objects],
                "pods": [name_of(p) for p in pods]}

    def partition_zone(self, zone: str, deadline_s: float | None = None) -> None:
        """Cut ``zone``'s Ray worker pods off the rest (:mod:`chaos.backends.kuberay.kube.partition`): the set-up
        (:meth:`partition_armer`), then the cut itself. ``deadline_s``: how long the helper pods and the
        probe live at most (default ``helper_deadline_s``)."""
        self.partition_armer(zone, deadline_s)()

    def partition_armer(self, zone: str, deadline_s: float | None = None):
        """Everything a partition of ``zone`` needs but the cut, done now, as :meth:`replica_killer` arms a
        kill: the probe connection opened across the future cut (echoing), and per method what makes the
        cut one step: ``node-filter``, the helper pod on each node of the zone's Ray pods created and
        Running (its image pulled); ``networkpolicy``, the zone's pods labelled (a label selects, it cuts
        nothing). Returns the cut: a callable that only applies the nft table through each helper (or creates
        the NetworkPolicy), so that the fault's inject mark, taken just before it, is the cut's instant and
        the time to impact counts from it. It returns ``{"cut_at_ns", "armed_s"}``. A set-up or a cut that
        fails removes what it made (helpers, labels, the probe) and raises."""
        t0 = self.kube.monotonic()
        pods = self.cut_pods(zone)
        ips = pod_ips(pods)
        if len(ips) != len(pods):
            raise ClusterError(f"partition of {zone}: {len(pods) - len(ips)} of its Ray pods have no IP yet")
        life = float(deadline_s or self.target.helper_deadline_s)
        probe = self._open_probe(zone, pods, life)
        nodes = sorted({node_of(p) for p in pods})  # the helpers' nodes, in _start_helpers' order
        self.cuts[zone] = {"method": self.target.partition_method, "ips": ips, "probe": probe, "cut_at_ns": None}
        helpers: list[str] = []
        try:
            if self.target.partition_method == "networkpolicy":
                self._label_members(zone, pods)
            else:
                helpers = self._start_helpers(zone, pods, life)
        except BaseException:
            with contextlib.suppress(Exception):  # the cause is raised
                self.close_probe(zone)
            raise
        armed_s = round(self.kube.monotonic() - t0, 3)

        def cut() -> dict:
            try:
                if self.target.partition_method == "networkpolicy":
                    self.kube.net.create_namespaced_network_policy(self.target.namespace,
                                                              kp.partition_policy(zone, self.target.cluster, self.target.run_id, life))
                else:
                    for helper, node in zip(helpers, nodes):
                        self._mark_table(node, zone, life)  # first: a table is never loaded unrecorded
                        self.pods.exec(helper, kp.apply_script(ips), container="nft")
            except BaseException:
                with contextlib.suppress(Exception):  # never leave half a partition behind; the cause is raised
                    if self.target.partition_method == "networkpolicy":
                        self.unlabel(pods)
                    else:
                        self.remove_helpers(helpers)
                with contextlib.suppress(Exception):
                    self.close_probe(zone)
                raise
            self.cuts[zone]["cut_at_ns"] = self.kube.wall_ns()
            return {"cut_at_ns": self.cuts[zone]["cut_at_ns"], "armed_s": armed_s}

        return cut

    def _open_probe(self, zone: str, pods: list[dict], life: float) -> dict:
        """A TCP connection from a Ray pod inside the zone to one outside (the head unless it is in the
        cut), both ends pod IPs, opened and echoing before the cut (:mod:`chaos.backends.kuberay.kube.partition`)."""
        inside = pods[0]
        cut = set(pod_ips(pods))
        others = sorted((p for p in self.pods.ray() if (p.get("status") or {}).get("pod_ip") not in cut | {None}),
                        key=lambda p: (labels_of(p).get("ray.io/node-type") != "head", name_of(p)))
        if not others:
            raise ClusterError(f"partition of {zone}: no Ray pod of {self.target.cluster} outside the zone to hold the far "
                               f"end of the connection that proves the cut")
        outside = others[0]
        host = outside["status"]["pod_ip"]
        pid = kp.probe_id(self.target.run_id, zone)
        out = self.pods.exec_in(outside, kp.probe_server_script(pid, life, ipaddress.ip_address(host).version))
        try:
            port = int(out.split()[0])
            state = self.pods.exec_in(inside, kp.probe_client_script(pid, host, port, life)).split()
            if not state or state[0] != "open":
                raise ClusterError(f"partition of {zone}: the connection {name_of(inside)} -> {host}:{port} that "
                                   f"proves the cut could not be opened ({' '.join(state) or 'no answer'})")
        except BaseException:
            with contextlib.suppress(Exception):
                self.pods.exec_in(outside, kp.probe_stop_script(pid))
            raise
        return {"id": pid, "inside": name_of(inside), "outside": name_of(outside), "host": host, "port": port}

    def close_probe(self, zone: str) -> None:
        probe = (self.cuts.get(zone) or {}).get("probe")
        if not probe:
            return
        self.cuts[zone]["probe"] = None
        for pod in (probe["inside"], probe["outside"]):
            with contextlib.suppress(kube_exec.ExecError):  # a pod gone took the probe's process with it
                self.pods.exec(pod, kp.probe_stop_script(probe["id"]))

    def _label_members(self, zone: str, pods: list[dict]) -> None:
        """The networkpolicy variant's set-up: label exactly the zone's pods (the policy will select them)."""
        labelled = []
        mark = km.record(self.target.run_id, self.target.helper_deadline_s, zone=zone)
        try:
            for p in pods:
                self.kube.core.patch_namespaced_pod(name_of(p), self.target.namespace, {"metadata": {
                    "labels": {kp.MEMBER_LABEL: zone}, "annotations": {km.MEMBER_MARK: mark}}})
                labelled.append(p)
        except BaseException:
            with contextlib.suppress(Exception):
                self.unlabel(labelled)
            raise

    def unlabel(self, pods: list[dict]) -> None:
        for p in pods:
            try:
                self.kube.core.patch_namespaced_pod(name_of(p), self.target.namespace, {"metadata": {
                    "labels": {kp.MEMBER_LABEL: None}, "annotations": {km.MEMBER_MARK: None}}})
            except Exception as e:  # noqa: BLE001 - ApiException; a pod gone needs no label removed
                if not is_not_found(e):
                    raise

    def _start_helpers(self, zone: str, pods: list[dict], life: float) -> list[str]:
        """The node-filter variant's set-up: a helper pod on each node of the zone's pods, each Running (its
        image pulled) before this returns; no rule applied yet. Any failure deletes the ones made."""
        created = []
        try:
            for node in sorted({node_of(p) for p in pods}):
                self.kube.core.create_namespaced_pod(self.target.namespace, kp.helper_pod(node, zone, self.target.helper_image,
                                                                              self.target.run_id, life))
                created.append(kp.helper_name(node))
            for helper in created:
                self.pods.wait(lambda h=helper: self._running(h), 120, f"partition helper {helper} to run")
        except BaseException:
            with contextlib.suppress(Exception):  # never leave half a partition behind; the cause is raised
                self.remove_helpers(created)
            raise
        return created

    def _running(self, pod: str) -> bool:
        return any(name_of(p) == pod and (p.get("status") or {}).get("phase") == "Running" for p in self.pods.pods())

    def remove_helpers(self, helpers: list[str]) -> None:
        """Delete the filter table in each helper's node (checked, when the helper runs), then the helper."""
        errors = []
        where = {name_of(p): node_of(p) for p in self.pods.pods() if name_of(p) in set(helpers)}
        for h in helpers:
            if self._running(h):
                try:
                    self.pods.exec(h, kp.REMOVE_SCRIPT, container="nft")
                except kube_exec.ExecError as e:
                    errors.append(str(e))  # the helper's own TERM trap removes it as the pod is deleted
                else:
                    self._unmark_table(where.get(h))
            self.pods.delete([{"metadata": {"name": h}}])
        if errors:
            raise ClusterError(f"partition heal: {'; '.join(errors)} (helper pods deleted; their exit removes the rules)")

    def helpers(self, zone: str | None = None, run_id: str | None = None) -> list[dict]:
        want = {**kp.HELPER_LABEL, **({kp.ZONE_KEY: zone} if zone else {}), **({kp.RUN_KEY: run_id} if run_id else {})}
        return self.pods.pods(label_selector=",".join(f"{k}={v}" for k, v in want.items()))

    def heal_zone(self, zone: str) -> None:
        """Undo this run's partition of ``zone`` by either method (whichever is in place): the
        NetworkPolicy (when it is this run's) and the pods' labels, or the helpers' tables and the
        helpers; then the probe connection."""
        try:
            pol = self.kube.net.read_namespaced_network_policy(kp.policy_name(zone), self.target.namespace).to_dict()
        except Exception as e:  # noqa: BLE001 - ApiException; already healed is fine
            if not is_not_found(e):
                raise
            pol = None
        if pol is not None and labels_of(pol).get(kp.RUN_KEY) in (self.target.run_id, None):
            try:
                self.kube.net.delete_namespaced_network_policy(kp.policy_name(zone), self.target.namespace)
            except Exception as e:  # noqa: BLE001 - ApiException; already healed is fine
                if not is_not_found(e):
                    raise
        self.unlabel(self.pods.pods(label_selector=f"{kp.MEMBER_LABEL}={zone}"))
        self.remove_helpers([name_of(p) for p in self.helpers(zone, self.target.run_id)])
        self.close_probe(zone)

    def partitioned_zones(self) -> list[str]:
        """Zones partitioned now, by any run (a NetworkPolicy or helper pods of the rig's)."""
        selector = ",".join(f"{k}={v}" for k, v in kp.POLICY_LABEL.items())
        pols = self.kube.net.list_namespaced_network_policy(self.target.namespace, label_selector=selector)
        zones = {name_of(p.to_dict()).removeprefix("availproof-partition-") for p in pols.items}
        zones |= {labels_of(p).get(kp.ZONE_KEY) for p in self.helpers()} - {None}
        return sorted(zones)

    def _mark_table(self, node: str | None, zone: str, life: float) -> None:
        """Record on ``node`` that a partition's nft table is (about to be) loaded there (:data:`kube_marks.NFT_MARK
        <chaos.backends.kuberay.kube.marks.NFT_MARK>`): found by ``recover`` and the next preparation even when its helper
        pod died without its TERM trap."""
        if node:
            self.kube.core.patch_node(node, {"metadata": {"annotations": {
                km.NFT_MARK: km.record(self.target.run_id, life, zone=zone)}}})

    def _unmark_table(self, node: str | None) -> None:
        if not node:
            return
        try:
            self.kube.core.patch_node(node, {"metadata": {"annotations": {km.NFT_MARK: None}}})
        except Exception as e:  # noqa: BLE001 - ApiException; a node gone holds no table
            if not is_not_found(e):
                raise

    def remove_table(self, node: str, zone: str | None) -> None:
        """Delete the nft table a crashed run left on ``node`` without a helper: a helper of this run made for it
        (Running, its image pulled), the table deleted through it (checked), the helper deleted, the mark dropped."""
        helper = kp.helper_name(node)
        self.pods.delete([{"metadata": {"name": helper}}])  # a dead helper of that name, if any
        self.kube.core.create_namespaced_pod(self.target.namespace, kp.helper_pod(node, zone or "-", self.target.helper_image,
                                                                      self.target.run_id, 300))
        try:
            self.pods.wait(lambda: self._running(helper), 120, f"the clean-up helper {helper} to run")
            self.pods.exec(helper, kp.REMOVE_SCRIPT, container="nft")
        finally:
            self.pods.delete([{"metadata": {"name": helper}}])
        self._unmark_table(node)

