"""Zone partitions of a local cluster in network-namespace mode: each zone (and the head with Redis) in a
namespace of its own on a bridge; a partition takes a zone's link down, its heal brings it up. The plan
(which namespace and link each failure domain gets) is made before anything starts."""

from __future__ import annotations

from chaos.backends.local import netns
from chaos.backends.local.state import ClusterState
from chaos.base.errors import UsageError


class ZonePartitions:
    """Partition and heal zones; create and remove the namespaces.

    What it uses of the host class (:class:`~chaos.backends.local.cluster.LocalCluster`): ``state``, ``log``,
    ``_lock``, ``_save``, ``_child_env``.
    """

    def partitioned_zones(self) -> list[str]:
        return list(self.state.partitioned)

    def partition_zone(self, zone: str) -> None:
        """Cut ``zone`` off: its namespace's link to the bridge goes down (packets are dropped)."""
        if not self.state.netns_mode:
            raise UsageError("a zone partition needs per-zone network namespaces; this cluster runs in "
                             "loopback-only mode (bring it up with `availproof cluster up --netns`, as root)")
        with self._lock:
            link = self._zone_link(zone)
            netns.set_link(link, up=False)
            if zone not in self.state.partitioned:
                self.state.partitioned.append(zone)
            self._save()
            self.log(f"partitioned {zone} (link {link} down)")

    def heal_zone(self, zone: str) -> None:
        if not self.state.netns_mode:
            return
        with self._lock:
            link = self._zone_link(zone)
            netns.set_link(link, up=True)
            netns.flush_neighbours(list(domain_namespaces(self.state).values()))
            self.state.partitioned = [z for z in self.state.partitioned if z != zone]
            self._save()
            self.log(f"healed {zone} (link {link} up)")

    def _zone_link(self, zone: str) -> str:
        try:
            return self.state.links[zone]
        except KeyError:
            raise UsageError(f"no zone {zone!r} in cluster {self.state.cluster_id} "
                             f"(zones: {', '.join(z for z in self.state.links if z != netns.HEAD_DOMAIN)})") from None

    def _create_netns(self, prefix: str) -> None:
        by_ns: dict[str, list[str]] = {}
        for n in self.state.nodes.values():
            by_ns.setdefault(n.netns, []).append(n.ip)
        domains = [netns.Domain(namespace=ns, link=self.state.links[domain], addresses=by_ns.get(ns, []))
                   for domain, ns in domain_namespaces(self.state).items()]
        netns.create(self.state.bridge, prefix, domains)
        self.log(f"network namespaces: {', '.join(d.namespace for d in domains)} on bridge "
                 f"{self.state.bridge} ({prefix}.0/24)")

    def _remove_netns(self) -> None:
        if self.state.netns_mode:
            netns.remove(self.state.bridge, list(domain_namespaces(self.state).values()))


def domain_namespaces(state: ClusterState) -> dict[str, str]:
    """Failure domain ("head" or a zone) -> its namespace, in a stable order."""
    out = {netns.HEAD_DOMAIN: state.head.netns}
    for n in state.workers():
        out.setdefault(n.zone, n.netns)
    return out


def plan_netns(state: ClusterState, prefix: str) -> None:
    """Name the bridge, one namespace and link per domain, and put each node in its domain's."""
    domains = [netns.HEAD_DOMAIN] + sorted({n.zone for n in state.workers()})
    state.netns_mode = True
    state.bridge, names = netns.names(state.cluster_id, domains)
    state.links = {d: link for d, (_, link) in names.items()}
    for n in state.nodes.values():
        n.netns = names[netns.HEAD_DOMAIN if n.role == "head" else n.zone][0]
