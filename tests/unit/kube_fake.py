"""An in-memory Kubernetes API behind the real ``kubernetes`` client, for the KubeRay backend's tests.

The backend gets real ``CoreV1Api`` / ``NetworkingV1Api`` / ``CustomObjectsApi`` objects whose
REST layer is :class:`FakeServer`: the client builds the real URLs, query strings and bodies,
and deserializes the answers into ``V1PodList`` / ``V1NodeList`` / ... (so the backend sees
exactly the ``to_dict()`` shapes it sees on a cluster), and a 404 comes back as the client's
own ``ApiException``. Objects are stored as the API server would send them (camelCase JSON).

What the tests need of the cluster around the API server, each piece naming the upstream code it
models (file and version):

- pod termination as the kubelet does it (:class:`Kubelet`): a delete or an eviction with a grace
  period leaves the pod listed, terminating (``deletionTimestamp``, ``deletionGracePeriodSeconds``);
  a delete with ``gracePeriodSeconds=0`` removes the object at once (DeleteOptions: "zero means delete
  immediately") but the kubelet still stops the containers through their grace (Kubernetes
  ``pkg/kubelet/pod_workers.go`` ``calculateEffectiveGracePeriod``: never less than 1 s;
  ``pkg/kubelet/kuberuntime/kuberuntime_container.go`` ``killContainer``: ``minimumGracePeriodInSeconds``
  = 2, then the runtime's StopContainer): SIGTERM to the container's main process first
  (:meth:`Kubelet.terminate`: ``ray start`` and redis-server shut down cleanly on it, bash as PID 1
  ignores it), SIGKILL to what is left when the grace is over (:meth:`Kubelet.grace_over`, recorded as
  :data:`GRACE_END`). Every process's end is recorded with what ended it (:attr:`Kubelet.fates`), so a
  test sees a kill that reached a pod only gracefully, or only late;
- KubeRay's replacement of the pods it owns (:class:`KubeRay`, KubeRay v1.7.0
  ``ray-operator/controllers/ray/raycluster_controller.go`` ``reconcilePods``): each worker group's
  pods are listed by label, terminating ones included, and only ``replicas - listed`` new pods are
  created, so a pod's replacement comes once the old pod is gone; the head likewise (none listed:
  one created). New pods are Pending until :meth:`FakeServer.schedule` binds them to a schedulable
  node their nodeSelector matches (the scheduler skips cordoned nodes). Its RayService controller
  (``rayservice_controller.go`` ``Reconcile``, ``calculateStatus``, ``calculateConditions``,
  ``shouldPrepareNewCluster``, ``isZeroDowntimeUpgradeEnabled``; ``utils/consistency.go``
  ``InconsistentRayServiceStatuses``) answers a new generation of a RayService: ``observedGeneration``
  (on the status and on each condition), and a pending RayCluster when a ``rayClusterConfig`` change is
  to be rolled out with zero downtime; the status is written only when KubeRay's consistency check says
  it changed;
- SelfSubjectAccessReviews (Kubernetes ``pkg/registry/authorization/selfsubjectaccessreview/rest.go``
  over the RBAC authorizer, ``plugin/pkg/auth/authorizer/rbac/rbac.go``): allowed, with RBAC's reason,
  unless the access is in :attr:`FakeServer.denied_access` (then not allowed and no reason: RBAC has
  no opinion when no rule allows);
- the processes in the containers: a KubeRay v1.7 Ray container runs ``/bin/bash -c -- "ulimit ...;
  ray start ... --block"`` (``ray-operator/controllers/ray/common/pod.go`` BuildPod), so PID 1 is
  bash, or ``ray start`` where bash exec'd its last command (:attr:`Kubelet.ray_pid1`); ``kill -9 -1`` from inside reaches every process but PID 1 and the caller (Linux
  ``kill(2)``; the kernel protects a PID namespace's init from signals sent inside it); bash exits
  when ``ray start`` dies, and the kernel then SIGKILLs what is left in the namespace (the exec'd
  shell too: exit 137). The container stays exited until :meth:`Kubelet.sync` (the PLEG's next
  relist) restarts it (restartPolicy Always: restartCount + 1);
- admission of pods (Pod Security, ``k8s.io/pod-security-admission`` ``admission/admission.go``:
  "violates PodSecurity %q: %s"; baseline's ``check_hostNamespaces.go`` and
  ``check_capabilities_baseline.go``), server-side dry-run (``dryRun=All``: admitted, not stored);
- a network between pod IPs for the partition probe (:meth:`Kubelet.blocked`): an nftables table on
  a node drops forwarded packets between the zone's addresses and the rest, established flows too;
  a NetworkPolicy blocks new connections, and established ones only where the plugin enforces
  policy per packet (``cni_cuts_established``; Kubernetes leaves it to the implementation,
  kubernetes/website ``network-policies.md`` "Pod lifecycle"; off by default, as kindnet, Calico
  and Antrea accept established conntrack flows first).

Jobs, ConfigMaps, the garbage collector and the load workers' containers (the rig's load as a Kubernetes
Job): tests/unit/kube_fake_batch.py, advanced at every request (:meth:`FakeServer.request`).

Exec goes through :class:`FakeStream`, called like ``kubernetes.stream.stream`` with
``_preload_content=False``, through the client's real ``_websocket_request`` (kubernetes client 37
``kubernetes/stream/stream.py``, which swaps the ApiClient's ``call_api`` for the websocket call
while it lasts): only the websocket itself is faked. It returns a websocket-client stand-in whose
error channel holds the ``metav1.Status`` the kubelet sends (Success, or NonZeroExitCode with the
exit code).
"""

from __future__ import annotations

import copy
import functools
import importlib
import itertools
import json
import re
import shlex
import threading
import time
from urllib.parse import parse_qs, urlparse

from kubernetes import client
from kubernetes.client import rest
from kubernetes.client.exceptions import ApiException

GRACE_END = "SIGKILL at the grace's end"  # a process the kubelet killed once the deleted pod's grace was over


def running_status(spec: dict, n: int) -> dict:
    """The status the fake kubelet gives the ``n``-th pod it starts: Running, Ready, its containers ready."""
    return {"phase": "Running", "podIP": f"10.0.{200 + n // 250}.{n % 250 + 1}",
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": c["name"], "restartCount": 0, "ready": True, "image": c.get("image", ""),
                                   "imageID": "", "containerID": ""} for c in spec.get("containers") or []]}

class _HTTP:
    def __init__(self, status, body):
        self.status, self.reason = status, {200: "OK", 201: "Created", 403: "Forbidden", 404: "Not Found",
                                            409: "Conflict", 415: "Unsupported Media Type",
                                            429: "Too Many Requests"}.get(status, "Error")
        self.data = json.dumps(body).encode()
        self.headers = {"content-type": "application/json"}


def _status(code: int, message: str, details: dict | None = None) -> dict:
    reason = {403: "Forbidden", 404: "NotFound", 409: "Conflict", 415: "UnsupportedMediaType",
              429: "TooManyRequests"}.get(code, "Invalid")
    out = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
           "reason": reason, "code": code}
    if details:
        out["details"] = details
    return out


def merge_patch(dst: dict, src: dict) -> None:
    """RFC 7386 JSON merge patch, in place: objects merge key by key, a null deletes the key, any
    other value (a list too) replaces what was there."""
    for k, v in src.items():
        if v is None:
            dst.pop(k, None)
        elif isinstance(v, dict):
            if not isinstance(dst.get(k), dict):
                dst[k] = {}
            merge_patch(dst[k], v)
        else:
            dst[k] = copy.deepcopy(v)


def _matches(obj: dict, selector: str | None) -> bool:
    """A label selector of ``key=value`` and ``key`` (exists) terms."""
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in (selector or "").split(","):
        if not term:
            continue
        if "=" in term:
            k, v = term.split("=", 1)
            if labels.get(k) != v:
                return False
        elif term not in labels:
            return False
    return True


def _labels_match(labels: dict, match: dict) -> bool:
    return all(labels.get(k) == v for k, v in match.items())


# Pod Security "baseline" (k8s.io/pod-security-admission policy/check_capabilities_baseline.go): the
# capabilities a container may add
BASELINE_CAPABILITIES = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                         "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}


def pod_security_violations(spec: dict) -> list[str]:
    """What Pod Security ``baseline`` forbids in a pod spec, worded as its checks word it."""
    out = []
    if spec.get("hostNetwork") or spec.get("hostPID") or spec.get("hostIPC"):
        on = [f"{k}=true" for k in ("hostNetwork", "hostPID", "hostIPC") if spec.get(k)]
        out.append(f"host namespaces ({', '.join(on)})")
    for c in spec.get("containers") or []:
        added = ((c.get("securityContext") or {}).get("capabilities") or {}).get("add") or []
        bad = sorted(set(added) - BASELINE_CAPABILITIES)
        if bad:
            out.append(f'non-default capabilities (container "{c["name"]}" must not include '
                       f'{", ".join(json.dumps(b) for b in bad)} in securityContext.capabilities.add)')
    return out


def _selects(selector: dict, labels: dict) -> bool:
    """A LabelSelector (matchLabels, matchExpressions In / NotIn / Exists / DoesNotExist) against labels."""
    if not _labels_match(labels, selector.get("matchLabels") or {}):
        return False
    for e in selector.get("matchExpressions") or []:
        k, op, values = e["key"], e["operator"], e.get("values") or []
        if (op == "In" and labels.get(k) not in values) or (op == "NotIn" and k in labels and labels[k] in values) \
                or (op == "Exists" and k not in labels) or (op == "DoesNotExist" and k in labels):
            return False
    return True


def node_fits(server: "FakeServer", pod: dict, node_obj: dict) -> bool:
    """The scheduler's filters the tests need (kube-scheduler plugins NodeUnschedulable, NodeAffinity's
    nodeSelector and required node affinity, TaintToleration, InterPodAffinity's required anti-affinity):
    the node is not cordoned, carries the pod's nodeSelector and matches its required node affinity, every
    NoSchedule/NoExecute taint of it is tolerated, no pod of the namespace on a node with the same ``topologyKey`` value matches a
    required anti-affinity term of the pod, and (symmetry: the existing pods' required anti-affinity)
    no pod in such a domain has a required anti-affinity term that matches this pod."""
    spec = pod.get("spec") or {}
    labels = node_obj["metadata"].get("labels") or {}
    if (node_obj.get("spec") or {}).get("unschedulable") or not _labels_match(labels, spec.get("nodeSelector") or {}):
        return False
    # TaintToleration: every NoSchedule/NoExecute taint tolerated (core/v1 Toleration.ToleratesTaint)
    for taint in (node_obj.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not any(
                (not t.get("effect") or t["effect"] == taint["effect"])
                and ((t.get("operator") == "Exists" and t.get("key") in (None, "", taint["key"]))
                     or (t.get("operator", "Equal") == "Equal" and t.get("key") == taint["key"]
                         and t.get("value", "") == taint.get("value", "")))
                for t in spec.get("tolerations") or []):
            return False
    # NodeAffinity: the required nodeSelectorTerms, ORed (matchExpressions as a LabelSelector's)
    terms = ((((spec.get("affinity") or {}).get("nodeAffinity") or {})
              .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or [])
    if terms and not any(t.get("matchExpressions") and _selects({"matchExpressions": t["matchExpressions"]}, labels)
                         for t in terms):
        return False
    terms = (((spec.get("affinity") or {}).get("podAntiAffinity") or {})
             .get("requiredDuringSchedulingIgnoredDuringExecution") or [])
    for term in terms:
        key = term["topologyKey"]
        if key not in labels:
            return False
        domain = {n for n, o in server.nodes.items() if (o["metadata"].get("labels") or {}).get(key) == labels[key]}
        for other in server.pods.values():
            if (other.get("spec") or {}).get("nodeName") in domain and \
                    _selects(term.get("labelSelector") or {}, (other.get("metadata") or {}).get("labels") or {}):
                return False
    mine = (pod.get("metadata") or {}).get("labels") or {}
    for other in server.pods.values():
        where = (other.get("spec") or {}).get("nodeName")
        for term in ((((other.get("spec") or {}).get("affinity") or {}).get("podAntiAffinity") or {})
                     .get("requiredDuringSchedulingIgnoredDuringExecution") or []):
            key = term["topologyKey"]
            there = (server.nodes.get(where, {}).get("metadata", {}).get("labels") or {}).get(key)
            if there is not None and labels.get(key) == there and _selects(term.get("labelSelector") or {}, mine):
                return False
    return True


class FakeServer:
    """Pods, NetworkPolicies (namespaced), nodes, RayClusters and RayServices; every call logged.
    Pod evictions honour PodDisruptionBudgets (``pdbs``, policy/v1 JSON); patches (merge, and
    strategic for core objects, modelled as merge) check a ``metadata.resourceVersion`` in the body
    as a precondition (409 when the object changed) and bump it; pods are admitted by Pod Security
    at ``pod_security`` (``privileged``: anything; ``baseline``: no host namespaces, no added
    capabilities beyond baseline's); ``dryRun=All`` admits without storing; deletes and evictions
    go through the :class:`Kubelet`."""

    def __init__(self, namespace: str = "availproof"):
        self.ns = namespace
        self.pod_security = "privileged"  # the namespace's pod-security.kubernetes.io/enforce level
        self.kubelet = Kubelet(self)
        self._serial = itertools.count(1)
        self.pods: dict[str, dict] = {}
        self.nodes: dict[str, dict] = {}
        self.netpols: dict[str, dict] = {}
        self.pdbs: dict[str, dict] = {}  # PodDisruptionBudgets, name -> object
        self.configmaps: dict[tuple[str, str], dict] = {}  # (namespace, name) -> object, any namespace
        self.other_pods: dict[tuple[str, str], dict] = {}  # pods of other namespaces (namespace, name) -> object
        # Karpenter's NodePools (karpenter.sh, cluster-scoped), by the API versions served; None: no CRD (404)
        self.nodepools: list[dict] | None = None
        self.karpenter_versions = ("v1",)
        self.forbidden: set[str] = set()  # paths whose GET RBAC denies (403): what the caller may not read
        # the kubelet pulling an image before a pod bound to its node runs: image -> seconds (on ``clock``);
        # such a pod is Pending (ContainerCreating) until then
        self.pull_s: dict[str, float] = {}
        self.clock = time.monotonic
        self._pulling: dict[str, float] = {}  # pod -> when its image is pulled and its container runs
        # SelfSubjectAccessReviews: (verb, resource, group, subresource) the caller may not do (any namespace)
        self.denied_access: set[tuple[str, str, str, str]] = set()
        self.kuberay = KubeRay(self)
        self.custom: dict[tuple[str, str], dict] = {}  # (plural, name) -> object
        self.calls: list[tuple[str, str, dict | None]] = []  # (method, path + query, body)
        self.content_types: list[tuple[str, str, str | None]] = []  # (method, path, Content-Type) of writes
        from tests.unit.kube_fake_batch import Batch

        self.batch = Batch(self)  # Jobs, ConfigMaps, the garbage collector, the load pods' containers
        self.lock = threading.RLock()  # the rig calls from several threads (the load's followers and supervisor)

    # the REST layer the generated client calls
    def request(self, method, url, headers=None, body=None, post_params=None, _request_timeout=None):
        from tests.unit.kube_fake_batch import LogStream

        u = urlparse(url)
        query = {k: v[0] for k, v in parse_qs(u.query).items()}
        with self.lock:
            self.calls.append((method, u.path + (f"?{u.query}" if u.query else ""), copy.deepcopy(body)))
            if method != "GET":
                self.content_types.append((method, u.path, (headers or {}).get("Content-Type")))
            self._content_type = (headers or {}).get("Content-Type")
            self.batch.sync()  # the Job controller, the garbage collector and the load pods' kubelet meanwhile
            self._pulled()
            status, out = self.route(method, u.path, query, body)
        if isinstance(out, LogStream):  # a followed log: the body streams, unread (_preload_content=False)
            return rest.RESTResponse(out)
        resp = rest.RESTResponse(_HTTP(status, out))
        resp.read()
        return resp

    def route(self, method, path, query, body):
        ns = re.escape(self.ns)
        if method == "GET" and path in self.forbidden:
            resource = path.rstrip("/").rsplit("/", 1)[-1]
            return 403, _status(403, f'{resource} is forbidden: User "tester" cannot list resource "{resource}" at '
                                     f'the cluster scope')
        if path == "/api/v1/configmaps" and method == "GET":  # every namespace; fieldSelector metadata.name=
            name = (query.get("fieldSelector") or "").removeprefix("metadata.name=") or None
            items = [{**cm, "metadata": {**(cm.get("metadata") or {}), "name": n, "namespace": nsp}}
                     for (nsp, n), cm in sorted(self.configmaps.items()) if name in (None, n)]
            return 200, {"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {}, "items": items}
        if path == "/api/v1/pods" and method == "GET":  # every namespace
            items = [{**p, "metadata": {**p["metadata"], "namespace": self.ns}} for p in self.pods.values()]
            items += [{**p, "metadata": {**p["metadata"], "namespace": nsp}} for (nsp, _), p in self.other_pods.items()]
            return 200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}
        m = re.fullmatch(r"/apis/karpenter\.sh/([^/]+)/nodepools", path)
        if m and method == "GET":
            if self.nodepools is None or m.group(1) not in self.karpenter_versions:
                return 404, _status(404, "the server could not find the requested resource")
            return 200, {"apiVersion": f"karpenter.sh/{m.group(1)}", "kind": "NodePoolList", "metadata": {},
                         "items": self.nodepools}
        batch = self.batch.route(method, path, query, body)
        if batch is not None:
            return batch
        if path == "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews" and method == "POST":
            return self.access_review(body)
        m = re.fullmatch(r"/api/v1/namespaces/([^/]+)/configmaps", path)
        if m and method == "GET":  # one namespace's, by labelSelector
            items = [{**cm, "metadata": {**(cm.get("metadata") or {}), "name": n, "namespace": nsp}}
                     for (nsp, n), cm in sorted(self.configmaps.items())
                     if nsp == m.group(1) and _matches(cm, query.get("labelSelector"))]
            return 200, {"kind": "ConfigMapList", "apiVersion": "v1", "metadata": {}, "items": items}
        m = re.fullmatch(r"/api/v1/namespaces/([^/]+)/configmaps/([^/]+)", path)
        if m and method == "GET":
            cm = self.configmaps.get((m.group(1), m.group(2)))
            return (200, cm) if cm else (404, _status(404, f'configmaps "{m.group(2)}" not found'))
        m = re.fullmatch(rf"/api/v1/namespaces/{ns}/pods/([^/]+)/eviction", path)
        if m and method == "POST":
            return self.evict(m.group(1), body)
        for pattern, store, kind in ((rf"/api/v1/namespaces/{ns}/pods(?:/([^/]+))?", self.pods, "Pod"),
                                     (r"/api/v1/nodes(?:/([^/]+))?", self.nodes, "Node"),
                                     (rf"/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies(?:/([^/]+))?",
                                      self.netpols, "NetworkPolicy")):
            m = re.fullmatch(pattern, path)
            if m:
                return self.crud(method, m.group(1), store, kind, query, body)
        m = re.fullmatch(rf"/apis/ray.io/v1/namespaces/{ns}/(rayclusters|rayservices)/([^/]+)", path)
        if m and method in ("GET", "PATCH", "DELETE"):
            obj = self.custom.get((m.group(1), m.group(2)))
            if not obj:
                return 404, _status(404, f'{m.group(1)}.ray.io "{m.group(2)}" not found')
            if method == "DELETE":  # a RayCluster's pods go with it (their ownerReference: the garbage collector)
                for name in [n for n, pod in self.pods.items()
                             if (pod["metadata"].get("labels") or {}).get("ray.io/cluster") == m.group(2)]:
                    self.pods.pop(name)
                return 200, self.custom.pop((m.group(1), m.group(2)))
            if method == "GET":
                if m.group(1) == "rayservices":
                    self.kuberay.reconcile_rayservice(obj)
                return 200, obj
            return self.patch_custom(obj, body)
        raise AssertionError(f"the fake API server has no route for {method} {path}")

    def patch_custom(self, obj: dict, body: dict):
        """A custom object's PATCH, as the API server takes it: JSON merge patch (a CRD has no
        strategic merge patch: 415); a resourceVersion in the patch must be the object's (else 409);
        a change bumps the resourceVersion."""
        if self._content_type != "application/merge-patch+json":
            assert self._content_type != "application/json-patch+json", "JSON patch: not modelled by the fake"
            return 415, _status(415, f"the body of the request was in an unknown format - accepted media types "
                                     f"include: application/json-patch+json, application/merge-patch+json, "
                                     f"application/apply-patch+yaml (got {self._content_type})")
        meta = obj.setdefault("metadata", {})
        want = (body.get("metadata") or {}).get("resourceVersion")
        if want is not None and want != meta.get("resourceVersion"):
            return 409, _status(409, f'Operation cannot be fulfilled on {obj.get("kind", "object").lower()}s.ray.io '
                                     f'"{meta.get("name")}": the object has been modified; please apply your changes '
                                     f'to the latest version and try again')
        spec_before = copy.deepcopy(obj.get("spec"))
        merge_patch(obj, body)
        meta["resourceVersion"] = str(int(meta.get("resourceVersion") or 0) + 1)
        if obj.get("spec") != spec_before:  # apiextensions-apiserver customresource strategy: a spec change
            meta["generation"] = int(meta.get("generation") or 1) + 1  # increments the generation
        return 200, obj

    def access_review(self, body: dict):
        """A SelfSubjectAccessReview, answered as the API server's REST handler does over RBAC: created
        (201, nothing stored) with ``status.allowed`` and RBAC's reason when a rule allows; when none does,
        allowed false, no ``denied`` and no reason (RBAC's NoOpinion)."""
        attrs = ((body or {}).get("spec") or {}).get("resourceAttributes") or {}
        key = (attrs.get("verb", ""), attrs.get("resource", ""), attrs.get("group", ""), attrs.get("subresource", ""))
        out = copy.deepcopy(body)
        out.setdefault("metadata", {})
        if key in self.denied_access:
            out["status"] = {"allowed": False}
        else:
            out["status"] = {"allowed": True, "reason": 'RBAC: allowed by ClusterRoleBinding "availproof-rig" of '
                                                         'ClusterRole "availproof-rig" to User "tester"'}
        return 201, out

    def schedule(self) -> list[str]:
        """The scheduler: bind every Pending pod without a node to the first schedulable node (not cordoned)
        its nodeSelector matches; it then runs, Ready, with a pod IP. Returns the pods bound."""
        bound = []
        for name, pod in sorted(self.pods.items()):
            spec = pod.get("spec") or {}
            if spec.get("nodeName") or pod["metadata"].get("deletionTimestamp"):
                continue
            fits = [n for n, obj in sorted(self.nodes.items()) if node_fits(self, pod, obj)]
            if not fits:
                continue
            spec["nodeName"] = fits[0]
            n = next(self._serial)
            pod["status"] = running_status(spec, n)
            bound.append(name)
        return bound

    def evict(self, name: str, body: dict):
        """policy/v1 Eviction: 404 for no pod; 429 when a PodDisruptionBudget selecting the pod would
        fall below minAvailable (the API server's own message); else the pod is deleted gracefully:
        it stays, terminating (deletionTimestamp, deletionGracePeriodSeconds), until the kubelet is
        done or it is force-deleted."""
        pod = self.pods.get(name)
        if pod is None:
            return 404, _status(404, f'pods "{name}" not found')
        for pdb in self.pdbs.values():
            selector = ((pdb.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
            labels = (pod.get("metadata") or {}).get("labels") or {}
            if not all(labels.get(k) == v for k, v in selector.items()):
                continue
            healthy = sum(1 for p in self.pods.values()
                          if all(((p.get("metadata") or {}).get("labels") or {}).get(k) == v for k, v in selector.items())
                          and not p["metadata"].get("deletionTimestamp")
                          and any(c.get("type") == "Ready" and c.get("status") == "True"
                                  for c in (p.get("status") or {}).get("conditions") or []))
            need = int(pdb["spec"].get("minAvailable", 0))
            if healthy - need < 1:
                return 429, _status(429, "Cannot evict pod as it would violate the pod's disruption budget.", {
                    "causes": [{"reason": "DisruptionBudget", "message": f"The disruption budget "
                                f"{pdb['metadata']['name']} needs {need} healthy pods and has {healthy} currently"}]})
        grace = ((body or {}).get("deleteOptions") or {}).get("gracePeriodSeconds")
        self.delete_pod(name, grace)
        return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    def delete_pod(self, name: str, grace: int | None) -> dict:
        """A pod's delete as the API server and the kubelet carry it out. Grace 0: the object goes at
        once; otherwise (None: the pod's terminationGracePeriodSeconds, 30 by default) it stays listed,
        terminating, until :meth:`Kubelet.finish`. Either way the kubelet then stops the containers:
        SIGTERM first (:meth:`Kubelet.terminate`)."""
        pod = self.pods[name]
        if grace is None:
            grace = int((pod.get("spec") or {}).get("terminationGracePeriodSeconds") or 30)
        if grace == 0:
            self.pods.pop(name)
        elif not pod["metadata"].get("deletionTimestamp"):
            pod["metadata"]["deletionTimestamp"] = "2026-12-03T10:00:30Z"
            pod["metadata"]["deletionGracePeriodSeconds"] = grace
        self.kubelet.terminate(pod)
        if grace == 0:  # nobody can look into a pod that left the API: its grace (>= 2 s) passes unseen
            self.kubelet.grace_over(pod)
        return pod

    def crud(self, method, name, store, kind, query, body):
        if name is None and method == "GET":
            items = [o for o in store.values() if _matches(o, query.get("labelSelector"))]
            return 200, {"kind": f"{kind}List", "apiVersion": "v1", "metadata": {}, "items": items}
        if name is None and method == "POST":
            name = body["metadata"]["name"]
            if kind == "Pod" and self.pod_security != "privileged":
                bad = pod_security_violations(body.get("spec") or {})
                if bad:
                    return 403, _status(403, f'pods "{name}" is forbidden: violates PodSecurity '
                                             f'"{self.pod_security}:latest": {", ".join(bad)}')
            if name in store:
                return 409, _status(409, f'{kind.lower()}s "{name}" already exists')
            obj = self.created(kind, copy.deepcopy(body))
            if query.get("dryRun") == "All":  # admitted and validated, not stored
                return 201, obj
            store[name] = obj
            return 201, store[name]
        if name not in store:
            return 404, _status(404, f'{kind.lower()}s "{name}" not found')
        if method == "GET":
            return 200, store[name]
        if method == "DELETE":
            if kind == "Pod":
                grace = query.get("gracePeriodSeconds")
                return 200, self.delete_pod(name, None if grace is None else int(grace))
            return 200, store.pop(name)
        if method == "PATCH":  # merge patch: a null deletes the key; a resourceVersion is a precondition
            meta = store[name].setdefault("metadata", {})
            want = (body.get("metadata") or {}).get("resourceVersion")
            if want is not None and want != meta.get("resourceVersion"):
                return 409, _status(409, f'Operation cannot be fulfilled on {kind.lower()}s "{name}": the object '
                                         f'has been modified; please apply your changes to the latest version and '
                                         f'try again')
            merge_patch(store[name], body)
            meta["resourceVersion"] = str(int(meta.get("resourceVersion") or 0) + 1)
            return 200, store[name]
        raise AssertionError(f"{method} {kind}/{name}")

    def _pulled(self) -> None:
        """Pods whose image pull is over run now (the kubelet's next sync after the pull)."""
        for name, at in list(self._pulling.items()):
            if self.clock() >= at:
                self._pulling.pop(name)
                if name in self.pods:
                    self.pods[name]["status"]["phase"] = "Running"

    def created(self, kind: str, obj: dict) -> dict:
        """What the cluster makes of a created object: a uid and a resourceVersion; a pod is
        scheduled where asked and runs."""
        n = next(self._serial)
        obj.setdefault("metadata", {}).update({"uid": f"uid-{obj['metadata']['name']}-{n}", "resourceVersion": "1"})
        if kind == "Pod":
            obj["status"] = {"phase": "Running" if obj["spec"].get("nodeName") else "Pending"}
            pull = max([self.pull_s.get(c.get("image"), 0.0) for c in obj["spec"].get("containers") or []] or [0.0])
            if obj["spec"].get("nodeName") and pull > 0:
                obj["status"]["phase"] = "Pending"
                self._pulling[obj["metadata"]["name"]] = self.clock() + pull
        return obj

    # the client objects, as the backend builds them
    def apis(self):
        api = client.ApiClient(client.Configuration())
        api.rest_client = self
        return client.CoreV1Api(api), client.NetworkingV1Api(api), client.CustomObjectsApi(api)


# ------------------------------------------------------------------ objects, in API JSON
def node(name: str, zone: str, region: str | None = None, unschedulable: bool = False,
         labels: dict | None = None, taints: list[dict] | None = None) -> dict:
    labels = {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone, **(labels or {})}
    if region:
        labels["topology.kubernetes.io/region"] = region
    out = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels, "resourceVersion": "1",
                                                            "uid": f"uid-{name}"}, "spec": {}}
    if unschedulable:
        out["spec"]["unschedulable"] = True
    if taints:
        out["spec"]["taints"] = taints
    return out


def ray_pod(name: str, node_name: str | None, ip: str | None, node_type: str = "worker", group: str = "workers-zone-a",
            cluster: str = "availproof-x7k2p", restarts: int = 0, ready: bool = True) -> dict:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "uid": f"uid-{name}", "resourceVersion": "1",
                     "labels": {"ray.io/cluster": cluster, "ray.io/node-type": node_type,
                                "ray.io/group": group, "ray.io/is-ray-node": "yes"}},
        "spec": {"nodeName": node_name, "containers": [{"name": f"ray-{node_type}", "image": "availproof:dev"}]},
        "status": {"phase": "Running" if node_name else "Pending", "podIP": ip,
                   "conditions": [{"type": "Ready", "status": "True" if ready and node_name else "False"}],
                   "containerStatuses": [{"name": f"ray-{node_type}", "restartCount": restarts, "ready": ready,
                                          "image": "availproof:dev", "imageID": "", "containerID": ""}]},
    }


def redis_pod(name: str, node_name: str = "k-cp", share_process_namespace: bool = True) -> dict:
    """The rig's Redis pod (kuberay/base/redis.yaml): its command execs redis-server, and the pod shares
    its process namespace, so PID 1 is the pause process."""
    spec = {"nodeName": node_name, "containers": [{"name": "redis", "image": "redis:7.0.15"}]}
    if share_process_namespace:
        spec["shareProcessNamespace"] = True
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "uid": f"uid-{name}", "labels": {"app": "redis"}},
            "spec": spec,
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}],
                       "containerStatuses": [{"name": "redis", "restartCount": 0, "ready": True,
                                              "image": "redis:7.0.15", "imageID": "", "containerID": ""}]}}


# ------------------------------------------------------------------ the kubelet and the processes
class Kubelet:
    """The containers' processes of every pod, what ends them, and the network between pod IPs.

    Processes are made on first sight of a pod (by uid): a Ray pod runs bash (PID 1), ``ray start``,
    raylet, the head's gcs_server or a worker's Serve replica (41) and its engine (57, a child of
    41); Redis runs redis-server (PID 1 unless the pod shares its process namespace: pause); a
    partition helper runs sh (its TERM trap removes the node's nft table) and sleep. ``fates`` records,
    per pod name, every process's end: (comm, "SIGKILL" | "SIGTERM" | "exit")."""

    def __init__(self, server: FakeServer):
        self.s = server
        self.procs: dict[str, dict[int, dict]] = {}  # pod uid -> pid -> {"comm", "state", "ppid"}
        self.fates: dict[str, list[tuple[str, str]]] = {}
        self.tombstones: dict[tuple[str, int], str] = {}  # (pod, pid): an engine's record of its injected error
        self.erred: dict[str, list[str]] = {}  # pod: the engines whose hook raised the injected error
        self.tables: dict[str, set[str]] = {}  # node -> the zone addresses of the nft table loaded there
        self.probes: dict[str, dict] = {}  # probe id -> {"server": pod, "port"} / {"client": pod}
        self.cni_cuts_established = False
        self.ports = itertools.count(40001)
        self.ray_pid1 = "bash"  # what PID 1 of a Ray container is: "bash" (no SIGTERM handler) or "ray" (ray start)
        self.actors: dict[str, tuple[str, int]] = {}  # Ray actor name -> (pod, pid) of its process
        self.armed: dict[str, str] = {}  # an actor kill's id -> the actor its connected driver will kill
        self.actor_kill_log: list[tuple[str, str]] = []  # (arm | fire | disarm, id) in the order they ran
        self.ongoing: dict[str, list[int]] = {}  # Ray actor name -> the ongoing counts its reads return, in turn
        self.throttled: list[tuple[str, str]] = []  # (pod, id) of each duty cycle started (engine-stutter)
        self.unthrottled: list[tuple[str, str]] = []  # (pod, id) of each duty cycle ended

    # -- processes
    @staticmethod
    def _uid(pod: dict) -> str:
        return (pod.get("metadata") or {}).get("uid") or (pod.get("metadata") or {}).get("name")

    def processes(self, pod: dict) -> dict[int, dict]:
        uid = self._uid(pod)
        if uid not in self.procs:
            labels = (pod.get("metadata") or {}).get("labels") or {}
            spec = pod.get("spec") or {}
            if labels.get("ray.io/is-ray-node") == "yes":
                # PID 1: bash running `ulimit ...; ray start ... --block`, or `ray start` itself where bash
                # exec'd its last command (ray_pid1 = "ray")
                table = {1: "bash", 8: "ray", 12: "raylet"} if self.ray_pid1 == "bash" else {1: "ray", 12: "raylet"}
                table.update({11: "gcs_server", 20: "ray::ServeContr"} if labels.get("ray.io/node-type") == "head"
                             else {41: "ray::ServeRepli", 57: "VLLM::EngineCor"})
            elif labels.get("app") == "redis":
                table = {1: "pause", 7: "redis-server"} if spec.get("shareProcessNamespace") else {1: "redis-server"}
            elif labels.get("availproof.io/fault") == "partition-helper":
                table = {1: "sh", 7: "sleep"}
            else:
                table = {1: "sh"}
            self.procs[uid] = {pid: {"comm": comm, "state": "S", "ppid": 41 if pid == 57 else 1}
                               for pid, comm in table.items()}
        return self.procs[uid]

    def alive(self, pod: dict) -> dict[int, dict]:
        return {pid: p for pid, p in self.processes(pod).items() if p["state"] != "dead"}

    def _end(self, pod: dict, pid: int, how: str) -> None:
        proc = self.processes(pod)[pid]
        if proc["state"] != "dead":
            proc["state"] = "dead"
            self.fates.setdefault(pod["metadata"]["name"], []).append((proc["comm"], how))
            for kid, p in list(self.processes(pod).items()):  # a rank group's ranks go with their engine (death pipe)
                if p.get("rank") and p["ppid"] == pid:
                    self._end(pod, kid, "engine gone")

    def add_rank(self, pod: dict, rank: int = 1, pid: int = 58, cmd: str = "VLLM::Worker_TP{rank}") -> int:
        """A rank process of the pod's engine (57): a tensor-parallel worker, its command line ``cmd``; it takes
        SIGUSR1 (the fault hook) unless its ``hook`` is set off."""
        self.processes(pod)[pid] = {"comm": cmd.format(rank=rank)[:15], "cmd": cmd.format(rank=rank), "state": "S",
                                    "ppid": 57, "rank": rank}
        return pid

    def _rank_command(self, pod: dict, live: dict[int, dict], script: str) -> tuple[str, str, int] | None:
        """The rank faults' commands (chaos/backends/kuberay/ranks.py): the look at an engine's rank children (their
        command line matched as ``pgrep -f`` does) and their signal masks, and the kill of a rank."""
        m = re.match(r": availproof-rank look; for e in \$\(pgrep -P (\d+) -f EngineCore\); do "
                     r"for p in \$\(pgrep -P \$e -f '([^']+)'\); do", script)
        if m:
            engines = self._kids(live, int(m.group(1)))
            ranks = [pid for pid, p in live.items() if p["ppid"] in engines and re.search(m.group(2), p.get("cmd", ""))]
            return "".join(f"{pid} SigBlk:0000000000000000 SigIgn:0000000001001000 SigCgt:"
                           f"{'0000000180004a02' if live[pid].get('hook', True) else '0000000180004802'} \n"
                           for pid in ranks), "", 0
        m = re.fullmatch(r": availproof-rank-death; kill -9 ([\d ]+) && echo \1", script)
        if m:
            pids = [int(x) for x in m.group(1).split()]
            if any(p not in live for p in pids):
                return "", "sh: 1: kill: No such process\n", 1
            for pid in pids:
                self._end(pod, pid, "SIGKILL")
            return m.group(1) + "\n", "", 0
        return None

    def graceful(self, name: str) -> list[str]:
        """The processes of pod ``name`` that ended by SIGTERM (reached only gracefully)."""
        return [comm for comm, how in self.fates.get(name, []) if how == "SIGTERM"]

    def late(self, name: str) -> list[str]:
        """The processes of pod ``name`` SIGKILLed by the kubelet at the end of the grace period: they ran on
        after the pod was deleted (the object already gone with grace 0), not a crash at the fault's instant."""
        return [comm for comm, how in self.fates.get(name, []) if how == GRACE_END]

    def _main_process(self, pod: dict) -> int | None:
        """The container's main process, which the runtime's stop signal goes to: PID 1, or with a shared
        process namespace (PID 1 is the pod's pause process) the container's own first process."""
        alive = self.alive(pod)
        if (pod.get("spec") or {}).get("shareProcessNamespace"):
            return min((pid for pid in alive if pid != 1), default=None)
        return 1 if 1 in alive else None

    def terminate(self, pod: dict) -> None:
        """The kubelet stopping a deleted pod's containers, first half (Kubernetes
        ``pkg/kubelet/kuberuntime/kuberuntime_container.go`` killContainer -> the runtime's StopContainer
        with the grace period, at least ``minimumGracePeriodInSeconds`` = 2 s; ``pkg/kubelet/pod_workers.go``
        calculateEffectiveGracePeriod: at least 1 s even for a delete with grace 0): SIGTERM to the
        container's main process only. What that does depends on the process: ``ray start --block``
        (Ray 2.60 ``ray/scripts/scripts.py``; ``_private/node.py`` drain on SIGTERM) and redis-server
        shut down cleanly (every process of theirs ends by SIGTERM); a helper's ``sh`` runs its TERM trap
        (its node's nft table deleted); bash as PID 1 has no SIGTERM handler, and a PID namespace's init
        gets from outside only the signals it handles (pid_namespaces(7)): the SIGTERM is dropped and the
        processes run on until :meth:`grace_over`."""
        labels = (pod.get("metadata") or {}).get("labels") or {}
        main = self._main_process(pod)
        comm = self.alive(pod).get(main, {}).get("comm") if main else None
        if comm == "sh" and labels.get("availproof.io/fault") == "partition-helper":
            self.tables.pop((pod.get("spec") or {}).get("nodeName"), None)
        if comm in ("ray", "sh"):  # a clean shutdown of the whole container
            for pid in sorted(self.alive(pod)):
                self._end(pod, pid, "SIGTERM")
        elif comm == "redis-server":
            self._end(pod, main, "SIGTERM")
        # bash (PID 1, no handler), pause: nothing

    def grace_over(self, pod: dict) -> None:
        """The kubelet stopping a deleted pod's containers, second half: the grace period over, the runtime
        SIGKILLs what still runs (kuberuntime_container.go killContainer: StopContainer's timeout)."""
        for pid in sorted(self.alive(pod)):
            self._end(pod, pid, GRACE_END)

    def finish(self, name: str) -> None:
        """The kubelet done with a terminating pod (its grace period over): what still runs is SIGKILLed,
        then the object goes."""
        pod = self.s.pods.get(name)
        if pod is not None:
            self.grace_over(pod)
        self.s.pods.pop(name, None)

    def sync(self, name: str) -> None:
        """The kubelet's next look at pod ``name`` (the PLEG relist): an exited container is restarted
        (restartPolicy Always: restartCount + 1, new processes)."""
        pod = self.s.pods[name]
        if self.alive(pod):
            return
        self.procs.pop(self._uid(pod))
        for c in (pod.get("status") or {}).get("containerStatuses") or []:
            c["restartCount"] = int(c.get("restartCount") or 0) + 1

    def _container_exits(self, pod: dict) -> None:
        """PID 1 exits (bash, when `ray start` died; `ray start --block` itself exits 1 once a subprocess
        died unexpectedly, ray/scripts/scripts.py): the kernel SIGKILLs what is left in the namespace."""
        for pid in sorted(self.alive(pod)):
            self._end(pod, pid, "exit" if pid == 1 else "SIGKILL")

    # -- the network between pod IPs
    def _pod_by_ip(self, ip: str) -> dict | None:
        return next((p for p in self.s.pods.values() if (p.get("status") or {}).get("podIP") == ip), None)

    def blocked(self, src: dict, dst: dict, established: bool) -> bool:
        """Whether packets from ``src`` to ``dst`` are dropped: by an nft table of a partition on either
        pod's node (the forward hook: established flows too), or by a NetworkPolicy isolating either pod
        (new connections; established ones only where ``cni_cuts_established``)."""
        a, b = (src.get("status") or {}).get("podIP"), (dst.get("status") or {}).get("podIP")
        for p in (src, dst):
            table = self.tables.get((p.get("spec") or {}).get("nodeName"))
            if table and ((a in table) != (b in table)):
                return True
        if established and not self.cni_cuts_established:
            return False
        for pol in self.s.netpols.values():
            spec = pol.get("spec") or {}
            match = (spec.get("podSelector") or {}).get("matchLabels") or {}
            types = spec.get("policyTypes") or []
            if ("Egress" in types and not spec.get("egress") and _labels_match(src["metadata"].get("labels") or {}, match)) or \
               ("Ingress" in types and not spec.get("ingress") and _labels_match(dst["metadata"].get("labels") or {}, match)):
                return True
        return False

    # -- exec
    def exec(self, name: str, container: str | None, script: str) -> tuple[str, str, int]:
        """What a command the backend runs gets in pod ``name``: (stdout, stderr, exit code); a pod that
        is not there is the API server's 404, a container that exited the kubelet's error."""
        if self.s.batch.containers.owns(name):  # a load worker's pod (tests/unit/kube_fake_batch.py)
            return self.s.batch.containers.exec(name, container, script)
        pod = self.s.pods.get(name)
        if pod is None:
            raise ApiException(status=404, reason=f'pods "{name}" not found')
        live = self.alive(pod)
        if not live:
            raise ApiException(status=400, reason=f"container not found ({container}): the container exited")
        if script.startswith(": availproof-probe "):
            return self._probe(pod, script)
        if script.startswith(": availproof-actor-kill "):
            return self._actor_kill(pod, script)
        if script.startswith(": availproof-replica-ongoing;"):
            return self._ongoing(pod, script)
        if container == "nft":
            return self._nft(pod, script)
        if script == "kill -9 -1" or script.endswith("; kill -9 -1"):
            if "redis-server" in script and live.get(1, {}).get("comm") == "redis-server":
                return "", "redis-server is PID 1 of its container, which no signal sent inside the container reaches", 3
            victims = [pid for pid in sorted(live) if pid != 1]
            if not victims:
                return "", "sh: 1: kill: No such process\n", 1
            for pid in victims:
                self._end(pod, pid, "SIGKILL")
            if live.get(1, {}).get("comm") in ("bash", "ray", "sh"):
                self._container_exits(pod)
                return "", "", 137  # the exec'd shell went with the namespace
            return "", "", 0
        m = re.fullmatch(r"kill -9 (\d+)", script)
        if m:
            pid = int(m.group(1))
            if pid not in live:
                return "", f"sh: 1: kill: ({pid}) - No such process\n", 1
            self._end(pod, pid, "SIGKILL")
            return "", "", 0
        if script == "pids=$(pgrep -x gcs_server) && kill -9 $pids && echo $pids":
            gcs = [pid for pid, p in live.items() if p["comm"] == "gcs_server"]
            if not gcs:
                return "", "", 1
            for pid in gcs:
                self._end(pod, pid, "SIGKILL")
            self._container_exits(pod)  # ray start --block: "Some Ray subprocesses exited unexpectedly", exit 1
            return " ".join(map(str, gcs)) + "\n", "", 0
        rank = self._rank_command(pod, live, script)
        if rank is not None:
            return rank
        engine = self._engine_command(pod, live, script)
        if engine is not None:
            return engine
        m = re.fullmatch(r"p=\$\(pgrep -P (\d+) -f EngineCore\); \[ -z \"\$p\" \] \|\| \{ kill -9 \$p && echo \$p; \}",
                         script)
        if m:  # an engine crash: the replica's EngineCore children only; none is no error (empty answer)
            kids = [pid for pid, p in live.items() if p["ppid"] == int(m.group(1)) and "EngineCor" in p["comm"]]
            for pid in kids:
                self._end(pod, pid, "SIGKILL")
            return "".join(f"{pid}\n" for pid in kids), "", 0
        m = re.fullmatch(r"if kill -0 (\d+) 2>/dev/null; then kill -CONT \1; else echo gone; fi", script)
        if m:
            pid = int(m.group(1))
            if pid not in live:
                return "gone\n", "", 0
            live[pid]["state"] = "S"
            return "", "", 0
        m = re.fullmatch(r"kill -CONT (\d+)", script)
        if m:
            pid = int(m.group(1))
            if pid not in live:
                return "", f"sh: 1: kill: ({pid}) - No such process\n", 1
            live[pid]["state"] = "S"
            return "", "", 0
        m = re.fullmatch(r": availproof-orphans engines; echo \$\(pgrep -P (\d+) -f '\[E\]ngineCore'\)", script)
        if m:  # the orphan check's look for a replica's engines before its kill (chaos/backends/kuberay/orphans.py)
            return " ".join(map(str, self._kids(live, int(m.group(1))))) + "\n", "", 0
        m = re.match(r": availproof-orphans look; for p in ([\d ]+); do ", script)
        if m:  # the orphan check's look: those alive, their state and a resident size (an orphan is not reaped here)
            return "".join(f"left {pid} State: {live[int(pid)]['state']} (x) VmRSS: 2048 kB \n"
                           for pid in m.group(1).split() if int(pid) in live), "", 0
        m = re.match(r"for p in ([\d ]+); do s=\$\(sed", script)
        if m:
            return "".join(f"{pid} {live[int(pid)]['state'] if int(pid) in live else 'gone'}\n"
                           for pid in m.group(1).split()), "", 0
        raise AssertionError(f"the fake kubelet does not know this command: {script[:200]}")

    def _kids(self, live: dict[int, dict], parent: int) -> list[int]:
        return [pid for pid, p in live.items() if p["ppid"] == parent and "EngineCor" in p["comm"]]

    def _engine_command(self, pod: dict, live: dict[int, dict], script: str) -> tuple[str, str, int] | None:
        """The engine faults' commands (chaos/backends/kuberay/engines.py): the hang's SIGSTOP of the EngineCore
        children; the engine error's look at their signal masks (``SigCgt`` has SIGUSR1 while the process's
        ``hook`` is on, the default), its ``kill -USR1`` (stale tombstones removed first; a hooked engine errs,
        records its tombstone and lives on, as vLLM's does: :attr:`erred`; one without the hook dies of it: fate
        ``SIGUSR1-default``) and the proof's look at the tombstones; the straggler's duty cycle (``throttle``: its id on the
        process; a look at it sees it stopped in even samples, running in odd ones) and its end, the prefix of the
        SIGCONT. None: not one of them."""
        name = pod["metadata"]["name"]
        while True:  # the duty cycles ended before a SIGCONT (unthrottle_script), one prefix per cycle
            m = re.match(r"pkill -KILL -f '\[a\]vailproof-throttle-([\w-]+)'; n=0; while pgrep .*?; done; ", script)
            if not m:
                break
            self.unthrottled.append((name, m.group(1)))
            for p in live.values():
                if p.get("throttle") == m.group(1):
                    p.pop("throttle")
            script = script[m.end():]
            if not script.startswith("pkill"):
                return self.exec(name, None, script)
        m = re.fullmatch(r"p=\$\(echo \$\(pgrep -P (\d+) -f EngineCore\)\); \[ -z \"\$p\" \] \|\| "
                         r"\{ kill -STOP \$p && echo \$p; \}", script)
        if m:  # an engine hang: the EngineCore children only; none is no error (empty answer)
            kids = self._kids(live, int(m.group(1)))
            for pid in kids:
                live[pid]["state"] = "T"
            return " ".join(map(str, kids)) + ("\n" if kids else ""), "", 0
        m = re.match(r": availproof-engine-error look; for p in \$\(pgrep -P (\d+) -f EngineCore\)", script)
        if m:
            return "".join(f"{pid} SigBlk:0000000000000000 SigIgn:0000000001001000 SigCgt:"
                           f"{'0000000180004a02' if live[pid].get('hook', True) else '0000000180004802'} \n"
                           for pid in self._kids(live, int(m.group(1)))), "", 0
        m = re.fullmatch(r"rm -f (?:/tmp/availproof-engine-(?:error-\d+|fault-\d+\.request) ?)+; kill -USR1 ([\d ]+) "
                         r"&& echo \1", script)
        if m:
            pids = [int(x) for x in m.group(1).split()]
            for pid in pids:  # the stale tombstones removed first
                self.tombstones.pop((name, pid), None)
            if any(p not in live for p in pids):
                return "", "sh: 1: kill: No such process\n", 1
            for pid in pids:
                if live[pid].get("hook", True):  # vLLM's engine: it raises, records its tombstone, and lives on
                    self.tombstones[(name, pid)] = "1780000000.000"
                    self.erred.setdefault(name, []).append(live[pid]["comm"])
                else:
                    self._end(pod, pid, "SIGUSR1-default")
            return m.group(1) + "\n", "", 0
        wedge = self._wedge_command(name, live, script)
        if wedge is not None:
            return wedge
        weights = self._weights_command(name, script)
        if weights is not None:
            return weights
        device = self._device_command(name, live, script)
        if device is not None:
            return device
        m = re.match(r": availproof-engine-error proof; for p in ([\d ]+); do", script)
        if m:
            return "".join(f"tomb {p} {self.tombstones.get((name, int(p)), '')}\n" for p in m.group(1).split()), "", 0
        m = re.match(r": availproof-engine-stutter ([\w-]+); p=\$\(echo \$\(pgrep -P (\d+) -f EngineCore\)\); "
                     r"\[ -n \"\$p\" \] \|\| exit 0; nohup sh -c '.*' availproof-throttle-\1 \"\$p\" "
                     r"</dev/null >/dev/null 2>&1 & echo \$p$", script, re.S)
        if m:
            kids = self._kids(live, int(m.group(2)))
            for pid in kids:
                live[pid]["throttle"] = m.group(1)
            self.throttled.append((name, m.group(1)))
            return " ".join(map(str, kids)) + ("\n" if kids else ""), "", 0
        m = re.match(r": availproof-engine-stutter sample; i=0; while \[ \$i -lt (\d+) \]; do echo \"sample \$i\"; "
                     r"for p in ([\d ]+); do", script)
        if m:
            out = []
            for i in range(int(m.group(1))):
                out.append(f"sample {i}\n")
                for x in m.group(2).split():
                    p = live.get(int(x))
                    state = "gone" if p is None else ("T" if i % 2 == 0 else "S") if p.get("throttle") else p["state"]
                    out.append(f"{x} {state}\n")
            return "".join(out), "", 0
        return None

    @staticmethod
    def _mark_key(name: str, pid: int, fault: str) -> tuple:
        """Where :attr:`wedges` keeps a mark: a wedge's by (pod, pid) as before, a held fault's with its name."""
        return (name, pid) if fault == "wedge" else (name, pid, fault)

    def _weights_command(self, name: str, script: str) -> tuple[str, str, int] | None:
        """restart-fails' swap (chaos/backends/kuberay/weights.py): the real serve_apps.weights_swap run on the pod's
        own weights file (the stream target's, provisioned in a directory of the pod's: :attr:`weights_dir`)."""
        if not script.startswith(": availproof-restart-fails; python -m serve_apps.weights_swap "):
            return None
        import contextlib
        import io
        import os
        import tempfile

        from serve_apps import stream_weights, weights_swap

        if getattr(self, "weights_dir", None) is None:
            self.weights_dir = tempfile.mkdtemp(prefix="availproof-kube-fake-weights-")
        args = shlex.split(script.split(";", 1)[1])[3:]
        home = os.path.join(self.weights_dir, name)
        out = io.StringIO()
        old_home = os.environ.get("AVAILPROOF_HOME")
        os.environ["AVAILPROOF_HOME"] = home  # the pod's own home
        try:
            stream_weights.provision(stream_weights.default_path())  # the pod's replicas started: the file there
            with contextlib.redirect_stdout(out):
                code = weights_swap.main(args)
        finally:
            if old_home is None:
                os.environ.pop("AVAILPROOF_HOME", None)
            else:
                os.environ["AVAILPROOF_HOME"] = old_home
        return out.getvalue() + "\n", "", code

    def _device_command(self, name: str, live: dict[int, dict], script: str) -> tuple[str, str, int] | None:
        """device-loss's marker (chaos/backends/kuberay/device.py): the real serve_apps.device_loss run on the pod's
        own /tmp (a directory of the pod's under :attr:`device_dir`); where the pod's container mounts a hostPath
        volume at the hook's directory (serve_apps.device_loss.node_dir(""), as the shipped manifests do), that
        directory is its node's, shared by every pod on the node (a symlink to ``nodes/<node>/<hostPath>``); once
        set, the pod's hooked engine fails at its next step and records it there, as the app's hook does."""
        if not script.startswith(": availproof-device-loss; python -m serve_apps.device_loss "):
            return None
        import contextlib
        import io
        import os
        import tempfile

        from serve_apps import device_loss

        if getattr(self, "device_dir", None) is None:
            self.device_dir = tempfile.mkdtemp(prefix="availproof-kube-fake-device-")
        args = shlex.split(script.split(";", 1)[1])[3:]
        host = self._device_host_path(self.s.pods[name], device_loss.node_dir(""))
        out, old = io.StringIO(), device_loss.DIR
        device_loss.DIR = os.path.join(self.device_dir, "pods", name)  # the pod's own /tmp
        os.makedirs(device_loss.DIR, exist_ok=True)
        mount = device_loss.node_dir("")
        if os.path.islink(mount):
            os.unlink(mount)  # a pod of that name on another node before
        if host is not None:  # the node's directory, mounted: the node's (spec.nodeName) hostPath
            shared = os.path.join(self.device_dir, "nodes", self.s.pods[name]["spec"]["nodeName"], host.strip("/"))
            os.makedirs(shared, exist_ok=True)
            os.symlink(shared, mount)
        try:
            with contextlib.redirect_stdout(out):
                code = device_loss.main(args)
            if args[0] == "set" and code == 0:
                for pid in [p for p, x in live.items() if "EngineCor" in x["comm"]] or [0]:
                    device_loss.record("failed", "step", device_loss.read_marker(""), "", pid=pid)
        finally:
            device_loss.DIR = old
        return out.getvalue() + "\n", "", code

    @staticmethod
    def _device_host_path(pod: dict, mount_path: str) -> str | None:
        """The hostPath a Ray container of ``pod`` mounts at ``mount_path`` (None: no such mount, the pod's own)."""
        spec = pod.get("spec") or {}
        volumes = {v.get("name"): v for v in spec.get("volumes") or []}
        for c in spec.get("containers") or []:
            for m in c.get("volumeMounts") or []:
                host = (volumes.get(m.get("name")) or {}).get("hostPath")
                if m.get("mountPath") == mount_path and host:
                    return host["path"]
        return None

    def _wedge_command(self, name: str, live: dict[int, dict], script: str) -> tuple[str, str, int] | None:
        """engine-wedge's commands (chaos/backends/kuberay/wedge.py): the request written and ``kill -USR1`` (a
        hooked engine writes its wedge mark naming the request's run and stays in state S: :attr:`wedges`), the
        proof's look at the marks and states, and the release (a mark removed only while it names the run)."""
        self.wedges = getattr(self, "wedges", {})
        # engine-garbage, engine-stall and engine-slow the same, their marks kept apart (the key's fault), a held one counting steps
        m = re.match(r": availproof-engine-(wedge|garbage|stall|slow); rm -f [^;]+; (.*); kill -USR1 ([\d ]+) && echo \3$",
                     script)
        if m:
            fault, pids = m.group(1), [int(x) for x in m.group(3).split()]
            if any(p not in live for p in pids):
                return "", "sh: 1: kill: No such process\n", 1
            run = re.search(r'"run": "([^"]+)"', m.group(2)).group(1)
            factor = re.search(r'"factor": ([\d.]+)', m.group(2))  # engine-slow: its steps that much longer
            slowed = {"factor": float(factor.group(1)), "base_s": 0.005,
                      "step_s": 0.005 * float(factor.group(1))} if fault == "slow" and factor else {}
            for pid in pids:
                if live[pid].get("hook", True):
                    self.wedges[self._mark_key(name, pid, fault)] = json.dumps(
                        {"run": run, "t": 1780000000.0, **({} if fault == "wedge" else {"steps": 5}), **slowed})
            return m.group(3) + "\n", "", 0
        m = re.match(r": availproof-engine-(wedge|garbage|stall|slow) proof; for p in ([\d ]+); do.*for p in ([\d ]+); do",
                     script)
        if m:
            fault, engines_of, states_of = m.group(1), m.group(2), m.group(3)
            marks = "".join(f"mark {p} {self.wedges.get(self._mark_key(name, int(p), fault), '')}\n"
                            for p in engines_of.split())
            states = "".join(f"{p} {live[int(p)]['state'] if int(p) in live else 'gone'}\n" for p in states_of.split())
            return marks + states, "", 0
        if script.startswith(": availproof-engine-marks "):  # any run's marks in the pod (engine_marks.py)
            mine = sorted((k, v) for k, v in self.wedges.items() if k[0] == name)
            fault_of = (lambda k: "wedge" if len(k) == 2 else k[2])
            if script.startswith(": availproof-engine-marks look"):
                return "".join(f"mark {fault_of(k)} {k[1]} {v}\n" for k, v in mine), "", 0
            for k, _ in mine:
                del self.wedges[k]
            return "".join(f"released {fault_of(k)} {k[1]}\n" for k, _ in mine), "", 0
        if script.startswith("if grep -qF '\"run\": "):
            out = []
            for run, fault, pid in re.findall(
                    r'if grep -qF \'"run": "([^"]+)"\' /tmp/availproof-engine-(wedge|garbage|stall|slow)-(\d+)', script):
                mark = self.wedges.get(self._mark_key(name, int(pid), fault))
                if mark and json.loads(mark)["run"] == run:
                    del self.wedges[self._mark_key(name, int(pid), fault)]
                    out.append(f"released {pid}")
                else:
                    out.append(f"{'kept' if mark else 'none'} {pid}")
            return "\n".join(out) + "\n", "", 0
        return None

    def _actor_kill(self, pod: dict, script: str) -> tuple[str, str, int]:
        """The actor kill's execs (chaos/system/ray_actor.py): ``arm`` starts a driver that connects (``ray.init``)
        and waits; ``disarm`` ends it unfired (:attr:`armed` forgets it); ``fire`` makes it ``ray.kill`` the actor (the process :attr:`actors` maps its name to, in
        whatever pod it runs, ends by SIGKILL as Ray's kill does). Each phase is logged in :attr:`actor_kill_log`."""
        phase, kill_id = script.split(";", 1)[0].split()[2:4]
        self.actor_kill_log.append((phase, kill_id))
        if phase == "arm":
            name = shlex.split(script.split("&&", 2)[2])[5]  # nohup python -c SCRIPT PATH NAME LIFE
            if name not in self.actors and self.actors:
                return f"error Failed to look up actor with name '{name}'\n", "", 0
            self.armed[kill_id] = name
            return "ready 4242\n", "", 0
        if phase == "disarm":  # the armed driver ended unfired, its files removed (none left: the same word)
            self.armed.pop(kill_id, None)
            return "disarmed\n", "", 0
        name = self.armed.pop(kill_id, None)
        if name is None:
            return "", "the armed Ray driver is gone\n", 3
        where = self.actors.get(name)
        if where:
            self._end(self.s.pods[where[0]], where[1], "SIGKILL")
        return "killed\n", "", 0

    def _ongoing(self, pod: dict, script: str) -> tuple[str, str, int]:
        """The ongoing-requests driver (chaos/system/replica_ongoing.py), in the head only: the counts of
        :attr:`ongoing` for its actor read in turn until one reaches its least (``busy K``), else ``idle MOST``."""
        args = shlex.split(script.split(";", 1)[1])  # timeout S python -c DRIVER ADDRESS NAME AT_LEAST WAIT POLL
        if (pod["metadata"].get("labels") or {}).get("ray.io/node-type") != "head":
            return "error ray.init found no cluster\n", "", 0
        name, at_least = args[6], int(args[7])
        if name not in self.ongoing:
            return f"error Failed to look up actor with name '{name}'\n", "", 0
        seen = self.ongoing[name]
        busy = next((n for n in seen if n >= at_least), None)
        return (f"busy {busy}\n" if busy is not None else f"idle {max(seen, default=0)}\n"), "", 0

    def _nft(self, pod: dict, script: str) -> tuple[str, str, int]:
        node_name = (pod.get("spec") or {}).get("nodeName")
        from chaos.backends.kuberay.kube import partition as kp

        if script == kp.REMOVE_SCRIPT:
            self.tables.pop(node_name, None)
            return "", "", 0
        if script == getattr(kp, "CHECK_SCRIPT", None):
            if node_name not in self.tables:
                return "absent\n", "", 0
            elements = ", ".join(sorted(self.tables[node_name]))
            return (f"table inet {kp.TABLE} {{\n\tset zone4 {{\n\t\ttype ipv4_addr\n\t\telements = {{ {elements} }}\n"
                    f"\t}}\n}}\n"), "", 0
        words = shlex.split(script)
        assert words[:2] == ["printf", "%s"] and words[3:] == ["|", "nft", "-f", "-"], script
        ips = set()
        for elements in re.findall(r"elements = \{ ([^}]*) \}", words[2]):
            ips |= {e.strip() for e in elements.split(",")}
        self.tables[node_name] = ips
        return "", "", 0

    def _probe(self, pod: dict, script: str) -> tuple[str, str, int]:
        """The partition probe's scripts (chaos/backends/kuberay/kube/partition.py), over :meth:`blocked`."""
        kind, pid = script.split(";", 1)[0].split()[2:4]
        words = shlex.split(script.split(";", 1)[1]) if kind in ("client", "check") else []
        if kind == "server":
            self.probes[pid] = {"server": pod["metadata"]["name"], "port": next(self.ports)}
            return f"{self.probes[pid]['port']} 4242", "", 0
        if kind == "stop":
            self.probes.pop(pid, None)
            return "", "", 0
        probe = self.probes.get(pid) or {}
        host, port = words[words.index("-c") + 2], int(words[words.index("-c") + 3])
        server = self._pod_by_ip(host)
        if server is None or probe.get("server") != server["metadata"]["name"] or probe.get("port") != port:
            return "refused 0 0.000", "", 0 if kind == "client" else 1
        if kind == "client":
            if self.blocked(pod, server, established=False):
                return "refused 0 0.000", "", 0
            probe["client"] = pod["metadata"]["name"]
            return "open 4343 100.000", "", 0
        if probe.get("client") != pod["metadata"]["name"]:
            return "missing dead 100.000 accepted\n", "", 0
        stale = self.blocked(pod, server, established=True) or self.blocked(server, pod, established=True)
        new = "timeout" if self.blocked(pod, server, established=False) else "accepted"
        return f"open alive {2.5 if stale else 0.2:.3f} {new}\n", "", 0


# ------------------------------------------------------------------ KubeRay
class KubeRay:
    """What the KubeRay v1.7.0 operator does that the tests need, step by step (tests call the steps).

    :meth:`reconcile_pods`: ``ray-operator/controllers/ray/raycluster_controller.go`` ``reconcilePods``.
    The head: ``len(headPods.Items) == 0`` creates one, a terminating head counts; each worker group:
    its pods listed by labels (``ray.io/cluster``, ``ray.io/group``: the cache's list keeps terminating
    pods), ``diff := numExpectedWorkerPods - len(runningPods.Items)``, and only a positive diff creates
    pods. So a deleted pod's replacement comes once the old pod is gone from the API, never while it
    terminates. New pods carry the group's template (its nodeSelector) and are Pending until
    :meth:`FakeServer.schedule`.

    :meth:`reconcile_rayservice` (called on each read of a RayService: the watch event of a new generation,
    or the 2 s requeue): ``Reconcile`` as far as the status goes. ``calculateStatus`` sets
    ``status.observedGeneration`` to the generation reconciled, names a pending RayCluster when
    ``shouldPrepareNewCluster``: the ``rayClusterConfig`` changed (its hash) and ``isZeroDowntimeUpgradeEnabled``:
    ``upgradeStrategy.type`` NewCluster, or NewClusterWithIncrementalUpgrade with the
    ``RayServiceIncrementalUpgrade`` feature gate; unset, unless the operator runs with
    ``ENABLE_ZERO_DOWNTIME=false`` (:attr:`zero_downtime_env`); sets ``numServeEndpoints`` (the serve
    Service's ready endpoints, :attr:`serve_endpoints` while there is an active cluster) and
    ``calculateConditions``: ``Ready`` and ``UpgradeInProgress``, each through ``setCondition``, which stamps
    the condition with ``status.observedGeneration``, and ``meta.SetStatusCondition`` (k8s.io/apimachinery
    v0.36.0, the version KubeRay v1.7.0's go.mod names) updates a condition's ``observedGeneration`` like its
    other fields (``lastTransitionTime`` only when its status changes). The status is then written only when
    ``InconsistentRayServiceStatuses`` says it changed (:func:`inconsistent_rayservice_statuses`: it ignores
    ``observedGeneration`` and ``lastUpdateTime`` themselves, but compares the conditions whole, so a new
    generation, whose stamp every condition takes, is written even when nothing else changed), with
    ``lastUpdateTime`` set and the resourceVersion bumped; each write is logged in :attr:`status_writes`.
    A RayService seen for the first time is taken as the operator left it: its status reconciled for its
    generation, nothing logged (the tests start from a settled RayService)."""

    def __init__(self, server: FakeServer):
        self.s = server
        self.zero_downtime_env = True  # the operator's ENABLE_ZERO_DOWNTIME is not "false"
        self.incremental_upgrade_gate = False  # feature gate RayServiceIncrementalUpgrade
        self.answers = True  # False: the operator is down (no reconcile at all)
        self.next_cluster = "availproof-b6d4f"  # the name it gives a pending RayCluster
        self.serve_endpoints = 1  # ready endpoints of the serve Service (calculateNumServeEndpointsFromSlices)
        self.status_writes: list[tuple[str, int]] = []  # (RayService, generation) of each status update
        self._seen_rcc: dict[str, str] = {}  # RayService -> the rayClusterConfig of the generation it last saw
        self._settled: set[str] = set()  # RayServices whose status the operator has reconciled before
        self._clock = itertools.count(1)  # seconds for lastUpdateTime / lastTransitionTime
        self._names = itertools.count(1)

    def zero_downtime(self, spec: dict) -> bool:
        kind = (spec.get("upgradeStrategy") or {}).get("type")
        if kind is None:
            return self.zero_downtime_env
        allowed = {"NewCluster"} | ({"NewClusterWithIncrementalUpgrade"} if self.incremental_upgrade_gate else set())
        return kind in allowed

    def _now(self) -> str:
        n = next(self._clock)
        return f"2026-12-03T10:{n // 60 % 60:02d}:{n % 60:02d}Z"

    def _set_condition(self, status: dict, kind: str, value: str, reason: str, message: str) -> None:
        """``setCondition`` (the condition stamped with ``status.observedGeneration``) over apimachinery's
        ``meta.SetStatusCondition``: every field updated, ``lastTransitionTime`` when the status changes."""
        conditions = status.setdefault("conditions", [])
        new = {"type": kind, "status": value, "reason": reason, "message": message,
               "observedGeneration": status.get("observedGeneration", 0)}
        old = next((c for c in conditions if c.get("type") == kind), None)
        if old is None:
            conditions.append({**new, "lastTransitionTime": self._now()})
            return
        if old.get("status") != value:
            old["lastTransitionTime"] = self._now()
        old.update(new)

    def _calculate_conditions(self, status: dict) -> None:
        """``calculateConditions``, without the initializing timeout."""
        if not status.get("conditions"):
            message = "RayService is initializing"
            self._set_condition(status, "Ready", "False", "Initializing", message)
            self._set_condition(status, "UpgradeInProgress", "False", "Initializing", message)
        ready = next((c for c in status["conditions"] if c.get("type") == "Ready"), {})
        if int(status.get("numServeEndpoints") or 0) > 0:
            self._set_condition(status, "Ready", "True", "NonZeroServeEndpoints",
                                "Number of serve endpoints is greater than 0")
        elif ready.get("status") == "True":
            self._set_condition(status, "Ready", "False", "ZeroServeEndpoints", "Number of serve endpoints dropped to 0")
        active = (status.get("activeServiceStatus") or {}).get("rayClusterName")
        pending = (status.get("pendingServiceStatus") or {}).get("rayClusterName")
        if active and pending:
            self._set_condition(status, "UpgradeInProgress", "True", "BothActivePendingClustersExist",
                                "Both active and pending Ray clusters exist")
        elif active:
            self._set_condition(status, "UpgradeInProgress", "False", "NoPendingCluster",
                                "Active Ray cluster exists and no pending Ray cluster")
        else:
            upgrade = next((c for c in status["conditions"] if c.get("type") == "UpgradeInProgress"), None)
            if upgrade is None or upgrade.get("reason") not in ("Initializing", "InitializingTimeout"):
                self._set_condition(status, "UpgradeInProgress", "Unknown", "NoActiveCluster",
                                    "No active Ray cluster exists, and the RayService is not initializing. Please "
                                    "open a GitHub issue in the KubeRay repository.")

    def reconcile_rayservice(self, rs: dict) -> None:
        if not self.answers:
            return
        meta, spec = rs.setdefault("metadata", {}), rs.get("spec") or {}
        name = meta.get("name", "")
        old = rs.get("status") or {}
        status = copy.deepcopy(old)
        generation = int(meta.get("generation") or 1)
        rcc = json.dumps(spec.get("rayClusterConfig"), sort_keys=True)
        seen = self._seen_rcc.setdefault(name, rcc)
        new_generation = int(old.get("observedGeneration") or 0) < generation  # else a test's own edit, if any
        pending = (status.get("pendingServiceStatus") or {}).get("rayClusterName")
        if new_generation and rcc != seen and not pending and self.zero_downtime(spec):
            status["pendingServiceStatus"] = {"rayClusterName": self.next_cluster}
            # reconcileRayCluster -> createRayClusterInstance -> constructRayClusterForRayService: the
            # RayService's annotations copied, the spec its rayClusterConfig (its pod templates as written)
            self.s.custom.setdefault(("rayclusters", self.next_cluster), {
                "apiVersion": "ray.io/v1", "kind": "RayCluster",
                "metadata": {"name": self.next_cluster, "annotations": dict(meta.get("annotations") or {}),
                             "labels": {"ray.io/originated-from-cr-name": name}},
                "spec": copy.deepcopy(spec.get("rayClusterConfig") or {})})
        self._seen_rcc[name] = rcc
        status["observedGeneration"] = generation  # calculateStatus, first thing
        active = (status.get("activeServiceStatus") or {}).get("rayClusterName")
        status["numServeEndpoints"] = self.serve_endpoints if active else 0
        self._calculate_conditions(status)
        ready = next((c for c in status["conditions"] if c.get("type") == "Ready"), {})
        status["serviceStatus"] = "Running" if ready.get("status") == "True" else "NotRunning"
        if name not in self._settled:  # as the operator left it before the test
            self._settled.add(name)
            rs["status"] = status
            return
        if not inconsistent_rayservice_statuses(old, status):
            return  # Reconcile's final update skipped: nothing written, the resourceVersion unchanged
        status["lastUpdateTime"] = self._now()
        rs["status"] = status
        meta["resourceVersion"] = str(int(meta.get("resourceVersion") or 0) + 1)
        self.status_writes.append((name, generation))

    def reconcile_pods(self) -> list[str]:
        """One reconcile of every RayCluster's pods; the names of the pods created."""
        created = []
        for (plural, cluster), rc in sorted(self.s.custom.items()):
            if plural != "rayclusters":
                continue
            spec = rc.get("spec") or {}
            mine = [p for p in self.s.pods.values()
                    if ((p.get("metadata") or {}).get("labels") or {}).get("ray.io/cluster") == cluster]
            if "headGroupSpec" in spec and not [p for p in mine if p["metadata"]["labels"].get("ray.io/node-type") == "head"]:
                created.append(self._create(cluster, "headgroup", "head", spec["headGroupSpec"]))
            for g in spec.get("workerGroupSpecs") or []:
                listed = [p for p in mine if p["metadata"]["labels"].get("ray.io/group") == g["groupName"]
                          and p["metadata"]["labels"].get("ray.io/node-type") == "worker"]
                for _ in range(int(g.get("replicas") or 0) - len(listed)):
                    created.append(self._create(cluster, g["groupName"], "worker", g))
        return created

    def _create(self, cluster: str, group: str, node_type: str, group_spec: dict) -> str:
        """A pod as KubeRay's BuildPod makes it (common/pod.go): named <cluster>-<group>-worker-<5 chars>
        (the head: <cluster>-head-<5 chars>), labelled, from the group's template; Pending."""
        n = next(self._names)
        suffix = "".join(RAND[(n // len(RAND) ** i) % len(RAND)] for i in range(5))
        name = f"{cluster}-head-{suffix}" if node_type == "head" else f"{cluster}-{group}-worker-{suffix}"
        template = copy.deepcopy((group_spec.get("template") or {}).get("spec") or {})
        pod = ray_pod(name, None, None, node_type=node_type, group=group, cluster=cluster)
        pod["spec"] = {**template, **{"containers": template.get("containers") or pod["spec"]["containers"]}}
        pod["spec"].pop("nodeName", None)
        pod["metadata"]["uid"] = f"uid-{name}"
        self.s.pods[name] = pod
        return name


RAND = "bcdfghjklmnpqrstvwxz2456789"  # k8s.io/apimachinery rand.String's alphabet (as chaos.backends.kuberay)


def inconsistent_rayservice_statuses(old: dict, new: dict) -> bool:
    """KubeRay v1.7.0 ``utils.InconsistentRayServiceStatuses`` (``ray-operator/controllers/ray/utils/consistency.go``)
    over the status as JSON: ``serviceStatus``, ``numServeEndpoints``, the conditions (whole: their
    ``observedGeneration`` too), and the active and pending service statuses without their
    ``rayClusterStatus`` (for observability only). ``observedGeneration`` and ``lastUpdateTime`` are not
    compared."""
    def service(status: dict, key: str) -> dict:
        return {k: v for k, v in (status.get(key) or {}).items() if k != "rayClusterStatus" and v not in (None, "", {})}

    return (old.get("serviceStatus") != new.get("serviceStatus")
            or int(old.get("numServeEndpoints") or 0) != int(new.get("numServeEndpoints") or 0)
            or (old.get("conditions") or []) != (new.get("conditions") or [])
            or any(service(old, k) != service(new, k) for k in ("activeServiceStatus", "pendingServiceStatus")))


# ------------------------------------------------------------------ exec
SUCCESS = json.dumps({"metadata": {}, "status": "Success"})


def failure(code: int, command: list[str]) -> str:
    return json.dumps({"metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
                       "message": f"command terminated with non-zero exit code: error executing command "
                                  f"{command}, exit code {code}",
                       "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}})


class FakeWSClient:
    """What ``stream(..., _preload_content=False)`` returns, after the command ran."""

    def __init__(self, stdout: str, stderr: str, status: str | None):
        self._channels = {1: stdout, 2: stderr, **({3: status} if status is not None else {})}
        self._open = True
        self.closed = False

    def run_forever(self, timeout=None):
        self._open = False

    def is_open(self):
        return self._open

    def read_channel(self, channel, timeout=0):
        return self._channels.pop(channel, "")

    def read_stdout(self, timeout=None):
        return self.read_channel(1)

    def read_stderr(self, timeout=None):
        return self.read_channel(2)

    def close(self, **kwargs):
        self._open, self.closed = False, True


class FakeStream:
    """``kubernetes.stream.stream`` for exec: the client's own ``_websocket_request`` (which swaps the
    ApiClient's ``call_api`` while the call lasts) with only the websocket faked. The command is read
    back from the exec URL the generated client built; ``handler(pod, container, script)`` returns
    (stdout, stderr, exit code) or raises the ApiException of a failed handshake; every call logged as
    (pod, container, script). ``during`` holds callables run while the websocket call is under way
    (what another thread, such as the sampler, does meanwhile)."""

    def __init__(self, handler=None):
        self.handler = handler or (lambda pod, container, script: ("", "", 0))
        self.calls: list[tuple[str, str | None, str]] = []
        self.during: list = []
        module = importlib.import_module("kubernetes.stream.stream")
        self._stream = functools.partial(module._websocket_request, self._websocket_call, None)

    def __call__(self, api_method, name, namespace, **kw):
        assert api_method.__name__ == "connect_get_namespaced_pod_exec", api_method
        assert kw.get("_preload_content") is False, "the exit status needs the websocket client"
        return self._stream(api_method, name, namespace, **kw)

    def _websocket_call(self, configuration, method, url, **kw):
        u = urlparse(url)
        m = re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)/exec", u.path)
        assert method == "GET" and m, (method, url)
        q = parse_qs(u.query)
        command = q["command"]
        assert command[:2] == ["sh", "-c"] and q["stdout"] == ["true"] and q["stderr"] == ["true"], q
        assert q["stdin"] == ["false"] and q["tty"] == ["false"] and kw.get("_preload_content") is False
        for hook in self.during:
            hook()
        container = (q.get("container") or [None])[0]
        self.calls.append((m.group(2), container, command[2]))
        out, err, code = self.handler(m.group(2), container, command[2])
        return FakeWSClient(out, err, SUCCESS if code == 0 else failure(code, command))
