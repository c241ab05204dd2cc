"""The Kubernetes backend: the fault interface (:class:`chaos.backends.base.Backend`) on KubeRay pods: one class
composing six parts, one per family of faults (what each owns: the end of this docstring).

It acts only in the one kube context and namespace it is given, selects targets by label
(``ray.io/cluster``, ``ray.io/group``, ``ray.io/node-type``, the node's
``topology.kubernetes.io/zone``) and refuses a selection that matches no pod or more pods
than the experiment's blast-radius limit (``max_pods``), checked once per fault before
anything is deleted. Selection is plain functions over pod and node dicts (what the
``kubernetes`` client's ``to_dict()`` gives), tested without a cluster; the class is a thin
adapter that calls the API with them.

A kill is a crash: deleting a pod is not one. Even with ``gracePeriodSeconds=0`` (the object
leaves the API at once) the kubelet still stops the containers through their grace: SIGTERM,
then SIGKILL after the grace period (Kubernetes ``pkg/kubelet/pod_workers.go``
``calculateEffectiveGracePeriod``: at least 1 s, or the pod's terminationGracePeriodSeconds on
older kubelets; ``pkg/kubelet/kuberuntime/kuberuntime_container.go`` ``killContainer``: at least
``minimumGracePeriodInSeconds`` = 2 s), and a SIGTERM is what ``ray start --block`` (and Redis)
shut down cleanly on. So every kill of a node, zone, region, head (method ``node``), Redis or
replica pod first SIGKILLs the processes inside each pod through exec (:data:`CRASH_SCRIPT`: ``kill
-9 -1``, every process of the container's PID namespace but its PID 1 and the caller; KubeRay v1.7
runs the Ray container as ``/bin/bash -c -- "ulimit ...; ray start ... --block"``
(``ray-operator/controllers/ray/common/pod.go`` BuildPod, ``utils.GetContainerCommand``), so PID
1 is that bash, or ``ray start`` itself where bash execs its last command: either way raylet,
GCS, dashboard and workers die by SIGKILL, and ``ray start --block`` exits 1 as soon as it sees a
subprocess die unexpectedly, without a graceful shutdown (``ray/scripts/scripts.py`` ``start``)),
checks the exit status, and only then deletes the pod (grace 0) for KubeRay or the Deployment to
replace. What the kubelet's SIGTERM reaches afterwards is only what is left of the dead container.

Zone and region loss (KubeRay v1.7): a drain skips pods with emptyDir volumes, and every Ray
pod has one (``/dev/shm``); so every node of the domain that one of this RayCluster's pod templates
admits (where KubeRay's replacements could be scheduled), hosts its pods, or is labelled
``availproof.io/zone-loss-node=true`` is cordoned (:mod:`chaos.backends.kuberay.kube.zone`), annotated with the
run id (so the heal uncordons only its own), counted against ``max_nodes`` (default: ``max_pods``), and
its Ray pods crashed and force-deleted. KubeRay recreates them once they are gone, but their
groups are pinned to the zone, so they stay Pending on the cordoned nodes until the heal; a watch
proves it from the injection to the heal (a Ray pod Ready in the zone meanwhile: not in effect).
Node autoscalers that would bring the zone back: :mod:`chaos.backends.kuberay.kube.autoscale`.
Partitions: :mod:`chaos.backends.kuberay.kube.partition`. Commands in pods: :mod:`chaos.backends.kuberay.kube.pod_exec`.
Leftovers of a run that crashed (helper pods, NetworkPolicies, labelled pods, cordoned nodes)
are found by label and annotation: :meth:`KubeRayBackend.leftovers`, :meth:`KubeRayBackend.remove_leftovers`.

Upgrades and drains (the disruptions users cause themselves): see :meth:`KubeRayBackend.upgrade_app`,
:meth:`KubeRayBackend.drain_node` and kuberay/README.md.

Before any fault (:meth:`KubeRayBackend.prepare`): a SelfSubjectAccessReview for every verb the faults
and their heals call (:mod:`chaos.backends.kuberay.kube.access`), the leftovers check, the refusal of a zone or
region loss on an autoscaled cluster unless acknowledged, of a ``cluster`` upgrade KubeRay would not roll
out, and admission's dry run for a partition (and for the load workers' Job). :meth:`KubeRayBackend.plan`
says, reading only, what a fault would touch (``availproof run --plan``).

The load workers can run in the cluster, as pods of a Job off the Ray cluster's nodes
(``kubernetes.load.in_cluster``: :mod:`chaos.backends.kuberay.kube.load`, :meth:`KubeRayBackend.load_pool`); a fault
whose scope reaches a node hosting one is refused before anything is done
(:meth:`KubeRayBackend.refuse_reaching_load`).

What the package owns: the kube client (:mod:`.kube.client`: the API clients and the clock every wait reads; the
rest of :mod:`.kube`: access, exec, marks, partition, zone, load Job), the parts, and the backend that composes
them (:mod:`.backend`). Each part is a plain class handed the kube client, the :class:`~.target.Target` (what it acts
on: context, namespace, cluster, run id, limits) and the parts it uses; the backend holds six, one per family, and
a family's part holds the parts it serves:

- ``pods`` (:mod:`.reads`): the base every other part uses: pods, nodes, the RayService, health; exec, delete, a
  node's patch; and the load workers' Job every fault that reaches nodes is checked against (``pods.load``,
  :mod:`.load`);
- ``kills`` (:mod:`.kills`): crashes of pods, the head, Redis, replicas;
- ``engines`` (:mod:`.engines`, with the orphan check's looks of :mod:`.orphans`): engine hang, crash, error,
  stutter, and the engine faults it serves: the held ones, wedge, garbage, stall, slow (``engines.wedges``,
  :mod:`.wedge`), restart-fails' swapped weights (``engines.weights``, :mod:`.weights`), device-loss's markers in
  the nodes' directories and its remedy's cordon (``engines.devices``, :mod:`.device`);
- ``domains`` (:mod:`.domains`): zone and region loss (``domains.zone_loss``, :mod:`.zone`), partitions
  (``domains.partitions``, :mod:`.partition`), the autoscalers that would end a zone loss (``domains.autoscalers``,
  :mod:`.autoscaling`);
- ``lifecycle`` (:mod:`.lifecycle`): upgrades and drains (``lifecycle.upgrades``, :mod:`.upgrade`), a cluster
  upgrade's record and rollback (``lifecycle.rollbacks``, :mod:`.rollback`);
- ``accelerators`` (:mod:`.accelerators`): the device-plugin outage.

The preparation and heals (:mod:`.prepare`) and the leftovers (:mod:`.leftovers`) are functions over the backend's
interface and parts. The backend's methods hand each call to its part (or to those functions) in one line. Per
scope (:mod:`.scopes`): the plan (:mod:`.plan`) and the proof (:mod:`.proofs`), functions of the backend; shared
constants and selection: :mod:`.common`.
"""


from chaos.backends.kuberay.common import (  # noqa: F401 - the names other code imports from here
    ZONE_LABEL, REGION_LABEL, CORDON_MARK, ZONE_LOSS_LABEL, ZONE_WATCH_POLL_S, CRASH_SCRIPT, CRASH_OK,
    REDIS_CRASH_SCRIPT, GCS_EXIT_WINDOW_S, RAND_CHARS, RAYSERVICE, VERSION_ENV, VERSION_ANNOTATION,
    UPGRADE_VARIANTS, SERVE_SHUTDOWN_DEFAULTS, DEFAULT_UPGRADE_STRATEGY, KUBERAY_ANSWER_S, KUBERAY_POLL_S,
    UNSET_MAX_REPLICAS, KARPENTER_LABELS, AUTOSCALER_STATUS, node_zones, node_regions, ray_pods, select, limit,
    zone_loss_nodes, check, proc_states_script, cluster_name, pod_ready, restarts, expected_pods,
)
from chaos.backends.kuberay.autoscaling import (  # noqa: F401 - the names other code imports from here
    autoscaling_signs,
)
from chaos.backends.kuberay.upgrade import (  # noqa: F401 - the names other code imports from here
    serve_config_with_version, cluster_config_patch, graceful_shutdown_settings,
)
from chaos.backends.kuberay.backend import KubeRayBackend  # noqa: F401
