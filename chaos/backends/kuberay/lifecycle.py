"""The lifecycle part: the disruptions users cause themselves, each a part of its own it holds: an upgrade of the
app (``serve_config``) or of the cluster, a node's drain, the graceful shutdown's settings (:mod:`.upgrade`,
``upgrades``), and a ``cluster`` upgrade's record, rollback and the room a second RayCluster needs
(:mod:`.rollback`, ``rollbacks``, which the upgrades use)."""

from __future__ import annotations

from chaos.backends.kuberay.kills import Kills
from chaos.backends.kuberay.kube.client import KubeClient
from chaos.backends.kuberay.reads import Pods
from chaos.backends.kuberay.rollback import Rollbacks
from chaos.backends.kuberay.target import Target
from chaos.backends.kuberay.upgrade import Upgrades


class Lifecycle:
    """Upgrades, drains, rollbacks: a part the backend holds (``backend.lifecycle``), given the kube client, the
    :class:`~chaos.backends.kuberay.target.Target`, the pods part (its reads, and the load workers' Job a drain may
    not reach: ``pods.load``) and the kills part (a drain's evicted pods are its to end at their deadline)."""

    def __init__(self, kube: KubeClient, target: Target, pods: Pods, kills: Kills):
        self.rollbacks = Rollbacks(kube, target, pods)
        self.upgrades = Upgrades(kube, target, pods, kills, self.rollbacks, pods.load)
