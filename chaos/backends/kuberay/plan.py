"""``availproof run --plan``: per scope, every object a fault would touch now and what happens to it
after; reads only. One function per scope (``scope(backend, scope, arguments)``: the backend as
``self``, as its methods take it), named in :mod:`.scopes`."""

from __future__ import annotations

import math

from chaos.backends.kuberay.kube import marks as km, partition as kp
from chaos.backends.engine_faults import Throttle
from chaos.backends.kuberay.common import (CORDON_MARK, CRASH_SCRIPT, UPGRADE_VARIANTS, VERSION_ANNOTATION, VERSION_ENV,
                                           labels_of, limit, name_of, node_of, node_zones, pod_ips)
from chaos.base.errors import UsageError


def row(self, kind: str, name: str, does: str, after: str, where: str | None = None) -> dict:
    """One row of a plan (``self``: the backend)."""
    return {"kind": kind, "name": name, "where": where or f"namespace {self.namespace}", "does": does,
            "after": after}


def pod_row(self, pod: dict, does: str, after: str) -> dict:
    node = node_of(pod)
    zone = node_zones(self.pods.nodes()).get(node)
    return row(self, "Pod", name_of(pod), does, after, f"{self.namespace}, node {node} ({zone or 'no zone'})")


def crash_text(pod: dict) -> str:
    containers = (pod.get("spec") or {}).get("containers") or []
    c = containers[0].get("name") if containers else "?"
    return f"exec `{CRASH_SCRIPT}` in container {c} (SIGKILL of its processes), then delete with grace 0"


def replica(self, scope: str, a: dict) -> list[dict]:
    method = a.get("method", "sigkill")
    r = self.pick_replica(zone=a.get("zone"), deployment=a.get("deployment"))
    pod = limit([p for p in self.pods.ray(terminating=True) if name_of(p) == r.node], 1, f"pod of replica {r.replica_id}")[0]
    if method == "sigkill":
        return [pod_row(self, pod, f"exec `kill -9 {r.pid}` (replica {r.replica_id}, a RUNNING one picked now)",
                              "Serve replaces the replica")]
    if method == "actor":
        head = self.pods.head()
        return [pod_row(self, head, f"exec: a Ray driver connected before the injection, then ray.kill of actor "
                                    f"{r.actor_name}", "the driver exits"),
                pod_row(self, pod, f"its replica {r.replica_id} (pid {r.pid}) killed through Ray",
                              "Serve replaces the replica")]
    if method == "pod":
        pod = limit([p for p in self.pods.ray(node_type="worker") if name_of(p) == r.node], 1,
                    f"pod of replica {r.replica_id}")[0]
        return [pod_row(self, pod, crash_text(pod), "KubeRay recreates the pod; Serve the replica")]
    raise UsageError(f"replica kill method {method!r}: one of sigkill, actor, pod")


def _replica_pod(self, a: dict):
    r = self.pick_replica(zone=a.get("zone"))
    pods = [p for p in self.pods.ray(terminating=True) if name_of(p) == r.node]
    return r, limit(pods, 1, f"pod of replica {r.replica_id}")[0]


def engine(self, scope: str, a: dict) -> list[dict]:
    r, pod = _replica_pod(self, a)
    return [pod_row(self, pod, f"exec: SIGSTOP of the EngineCore children of {r.pid} (none: refused, nothing "
                               f"injected); the replica's process {r.pid} runs on",
                          "SIGCONT at the heal (a process Serve replaced meanwhile is skipped)")]


def engine_error(self, scope: str, a: dict) -> list[dict]:
    """The replica's pod and its engine children, as :meth:`error_engine` finds them (the plan does not exec)."""
    r, pod = _replica_pod(self, a)
    where = f"{self.namespace}, pod {name_of(pod)}, node {node_of(pod)}"
    return [pod_row(self, pod, f"exec `pgrep -P {r.pid} -f EngineCore` and their signal masks (each must take "
                               "SIGUSR1: the app's engine-fault hook; else refused, nothing injected), then "
                               "`kill -USR1` of them", "the pod and the replica's process live on"),
            row(self, "Process", f"EngineCore children of {r.pid}", f"SIGUSR1: the engine fails from inside its step "
                      f"loop; the process of replica {r.replica_id} ({r.pid}, a RUNNING one picked now) lives",
                      "nothing to heal: the replica's health check fails on its dead engine and Serve replaces it",
                      where)]


def engine_stutter(self, scope: str, a: dict) -> list[dict]:
    t = Throttle(**{k: a[k] for k in ("factor", "period_s", "duration_s") if k in a})
    r, pod = _replica_pod(self, a)
    return [pod_row(self, pod, f"exec: a shell loop in the background, SIGSTOP/SIGCONT of the EngineCore children of "
                               f"{r.pid}, {t.text()} (none: refused, nothing injected; it ends by itself after "
                               f"{t.cycles} cycles, continuing them); pids and loop recorded on the pod "
                               f"({km.PAUSED_MARK})", "the loop killed and SIGCONT at the heal")]


def engine_crash(self, scope: str, a: dict) -> list[dict]:
    """The replica's pod (exec'd) and its engine children, as :meth:`crash_engine` finds them at the
    injection (``pgrep -P PID -f EngineCore``): their pids are known only inside the pod, and the plan
    does not exec."""
    r, pod = _replica_pod(self, a)
    where = f"{self.namespace}, pod {name_of(pod)}, node {node_of(pod)}"
    return [pod_row(self, pod, f"exec `pgrep -P {r.pid} -f EngineCore`, then `kill -9` of what it finds (none: "
                               f"refused, nothing injected)", "the pod and the replica's process live on"),
            row(self, "Process", f"EngineCore children of {r.pid}", f"SIGKILL; the process of replica {r.replica_id} "
                      f"({r.pid}, a RUNNING one picked now) is left alive", "nothing to heal: the replica's health "
                      "check fails on its dead engine and Serve replaces it", where)]


def node(self, scope: str, a: dict) -> list[dict]:
    node = a.get("node") or (self.nodes_in(zone=a.get("zone")) or [None])[0]
    if node is None:
        raise UsageError(f"node loss: no worker pod in zone {a.get('zone')}")
    pod = limit([p for p in self.pods.ray(node_type="worker") if name_of(p) == node], 1, f"worker pod {node}")[0]
    self.refuse_reaching_load(f"kill of worker pod {node}", nodes=[node_of(pod)])
    return [pod_row(self, pod, crash_text(pod), "KubeRay recreates the pod once it is gone")]


def head(self, scope: str, a: dict) -> list[dict]:
    head = self.pods.head()
    if a.get("method", "node") == "gcs":
        return [pod_row(self, head, "exec `pgrep -x gcs_server` and `kill -9` of it (the container then exits)",
                              "the kubelet restarts the head container in place")]
    return [pod_row(self, head, crash_text(head), "KubeRay recreates the head pod once it is gone")]


def zone_loss(self, scope: str, a: dict) -> list[dict]:
    zones = [a["zone"]] if scope == "zone" else self.zones_in_region(a.get("region", ""))
    if not zones:
        raise UsageError(f"region {a.get('region')!r} has no zone")
    nodes, pods, cordon, theirs = self.domains.zone_loss.reach(zones, f"loss of {', '.join(zones)}")
    self.refuse_autoscaled_zone_loss(zones)
    by_zone = node_zones(nodes)
    rows = [row(self, "Node", n, f"cordon (spec.unschedulable) and annotate {CORDON_MARK}=<run id>",
                      "uncordoned at the heal (this run's annotation only)", f"cluster-wide, zone {by_zone.get(n)}")
            for n in cordon]
    rows += [row(self, "Node", n, "left alone: cordoned by someone else", "-", f"cluster-wide, zone {by_zone.get(n)}")
             for n in theirs]
    rows += [pod_row(self, p, crash_text(p), "KubeRay's replacement stays Pending on the cordoned nodes "
                                                   "until the heal") for p in pods]
    return rows


def partition(self, scope: str, a: dict) -> list[dict]:
    zone = a["zone"]
    pods = self.domains.partitions.cut_pods(zone)
    ips = pod_ips(pods)
    cut = set(ips)
    others = sorted((p for p in self.pods.ray() if (p.get("status") or {}).get("pod_ip") not in cut | {None}),
                    key=lambda p: (labels_of(p).get("ray.io/node-type") != "head", name_of(p)))
    rows = []
    if others:
        rows.append(pod_row(self, others[0], "exec: the echo server of the connection that proves the cut "
                                             "(python, ends by itself at the partition's deadline)",
                                  "stopped at the heal"))
    rows.append(pod_row(self, pods[0], "exec: the client of that connection, opened before the cut",
                              "stopped at the heal"))
    if self.partition_method == "networkpolicy":
        rows += [pod_row(self, p, f"label {kp.MEMBER_LABEL}={zone}", "label removed at the heal") for p in pods]
        rows.append(row(self, "NetworkPolicy", kp.policy_name(zone), "create: no ingress, no egress for the zone's "
                              "labelled pods", "deleted at the heal"))
    else:
        for node in sorted({node_of(p) for p in pods}):
            rows.append(row(self, "Pod", kp.helper_name(node), f"create the helper ({self.helper_image}, hostNetwork, "
                                  f"NET_ADMIN, activeDeadlineSeconds), then exec: nft table inet {kp.TABLE} "
                                  f"dropping forwarded packets between {', '.join(ips)} and the rest",
                                  "table deleted, then the helper deleted at the heal",
                                  f"{self.namespace}, node {node}"))
    return rows


def redis(self, scope: str, a: dict) -> list[dict]:
    redis = limit(self.pods.redis_pods(), 1, "redis pod")[0]
    return [pod_row(self, redis, f"exec the crash of redis-server (refused when it is its container's PID 1), "
                                 f"then delete with grace 0", "the Deployment replaces it"),
            pod_row(self, self.pods.head(), "read only: watched for its GCS's exit", "the kubelet restarts the head "
                                                                                  "container if its GCS exits")]


def upgrade(self, scope: str, a: dict) -> list[dict]:
    variant = a.get("variant", "code")
    if variant not in UPGRADE_VARIANTS:
        raise UsageError(f"upgrade variant must be one of {', '.join(UPGRADE_VARIANTS)} on KubeRay, got {variant!r}")
    strategy = self.preflight_upgrade(variant)["effective_strategy"]
    where = f"namespace {self.namespace}"
    if variant == "serve_config":
        return [row(self, "RayService", self.service, f"merge patch of spec.serveConfigV2: {VERSION_ENV} set in "
                          f"every application's runtime_env", "KubeRay applies it in place; Serve replaces "
                          f"every replica", where)]
    return [row(self, "RayService", self.service, f"merge patch of spec.rayClusterConfig: the {VERSION_ANNOTATION} "
                      f"annotation on every pod template", f"KubeRay ({strategy}) brings up a new RayCluster, "
                      f"switches the Services to it, deletes RayCluster {self.cluster} 60 s later", where)]


def drain(self, scope: str, a: dict) -> list[dict]:
    node = a.get("node") or (self.nodes_in(zone=a.get("zone")) or [None])[0]
    if node is None:
        raise UsageError(f"drain: no worker pod in zone {a.get('zone')}")
    pod = limit([p for p in self.pods.ray(node_type="worker") if name_of(p) == node], min(1, self.max_pods),
                f"drain of worker pod {node}")[0]
    self.refuse_reaching_load(f"drain of worker pod {node}", nodes=[node_of(pod)])
    grace = max(1, math.ceil(float(a.get("deadline_s", 30.0))))
    return [pod_row(self, pod, f"eviction (policy/v1) with gracePeriodSeconds {grace}; at the deadline a delete "
                               f"with grace 0 of what is left", "KubeRay recreates the pod once it is gone")]
