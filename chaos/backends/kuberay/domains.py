"""The domains part: the faults on the cluster's failure domains, each a part of its own it holds: a zone or region
lost (:mod:`.zone`, ``zone_loss``), a zone cut off the rest (:mod:`.partition`, ``partitions``), and the node and
Ray autoscalers that would end a zone loss early, looked for before one (:mod:`.autoscaling`, ``autoscalers``)."""

from __future__ import annotations

from chaos.backends.kuberay.autoscaling import Autoscaling
from chaos.backends.kuberay.kills import Kills
from chaos.backends.kuberay.kube.client import KubeClient
from chaos.backends.kuberay.partition import Partitions
from chaos.backends.kuberay.reads import Pods
from chaos.backends.kuberay.target import Target
from chaos.backends.kuberay.zone import ZoneLoss


class Domains:
    """Zone and region loss, partitions, the autoscalers' refusal: a part the backend holds (``backend.domains``),
    given the kube client, the :class:`~chaos.backends.kuberay.target.Target`, the pods part (its reads, and the
    load workers' Job a fault here may not reach: ``pods.load``), the kills part (a zone loss crashes the zone's Ray
    pods) and how often a zone loss's watch looks (``zone_watch_poll_s``)."""

    def __init__(self, kube: KubeClient, target: Target, pods: Pods, kills: Kills, zone_watch_poll_s: float):
        self.zone_loss = ZoneLoss(kube, target, pods, kills, pods.load, zone_watch_poll_s)
        self.partitions = Partitions(kube, target, pods, pods.load)
        self.autoscalers = Autoscaling(kube, lambda: target.cluster, raycluster=pods.raycluster,
                                       service=lambda: target.service, rayservice=pods.get_rayservice,
                                       nodes=pods.nodes, allowed=lambda: target.allow_autoscaled_zone_loss)
