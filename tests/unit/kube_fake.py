"""An in-memory Kubernetes API behind the real ``kubernetes`` client, for the KubeRay backend's tests.

The backend gets real ``CoreV1Api`` / ``NetworkingV1Api`` / ``CustomObjectsApi`` objects whose
REST layer is :class:`FakeServer`: the client builds the real URLs, query strings and bodies,
and deserializes the answers into ``V1PodList`` / ``V1NodeList`` / ... (so the backend sees
exactly the ``to_dict()`` shapes it sees on a cluster), and a 404 comes back as the client's
own ``ApiException``. Objects are stored as the API server would send them (camelCase JSON).

Exec goes through :class:`FakeStream`, called like ``kubernetes.stream.stream`` with
``_preload_content=False``: it returns a websocket-client stand-in whose error channel holds
the ``metav1.Status`` the kubelet sends (Success, or NonZeroExitCode with the exit code).
"""

from __future__ import annotations

import copy
import json
import re
from urllib.parse import parse_qs, urlparse

from kubernetes import client
from kubernetes.client import rest


class _HTTP:
    def __init__(self, status, body):
        self.status, self.reason = status, {200: "OK", 201: "Created", 404: "Not Found", 409: "Conflict",
                                            415: "Unsupported Media Type", 429: "Too Many Requests"}.get(status, "Error")
        self.data = json.dumps(body).encode()
        self.headers = {"content-type": "application/json"}


def _status(code: int, message: str, details: dict | None = None) -> dict:
    reason = {404: "NotFound", 409: "Conflict", 415: "UnsupportedMediaType", 429: "TooManyRequests"}.get(code, "Invalid")
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
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(labels.get(k) == v for k, v in (kv.split("=", 1) for kv in (selector or "").split(",") if kv))


class FakeServer:
    """Pods, NetworkPolicies (namespaced), nodes, RayClusters and RayServices; every call logged.
    Pod evictions honour PodDisruptionBudgets (``pdbs``, policy/v1 JSON); custom objects take JSON
    merge patches, with a ``metadata.resourceVersion`` in the patch checked as a precondition."""

    def __init__(self, namespace: str = "availproof"):
        self.ns = namespace
        self.pods: dict[str, dict] = {}
        self.nodes: dict[str, dict] = {}
        self.netpols: dict[str, dict] = {}
        self.pdbs: dict[str, dict] = {}  # PodDisruptionBudgets, name -> object
        self.custom: dict[tuple[str, str], dict] = {}  # (plural, name) -> object
        self.calls: list[tuple[str, str, dict | None]] = []  # (method, path + query, body)
        self.content_types: list[tuple[str, str, str | None]] = []  # (method, path, Content-Type) of writes

    # the REST layer the generated client calls
    def request(self, method, url, headers=None, body=None, post_params=None, _request_timeout=None):
        u = urlparse(url)
        query = {k: v[0] for k, v in parse_qs(u.query).items()}
        self.calls.append((method, u.path + (f"?{u.query}" if u.query else ""), copy.deepcopy(body)))
        if method != "GET":
            self.content_types.append((method, u.path, (headers or {}).get("Content-Type")))
        self._content_type = (headers or {}).get("Content-Type")
        status, out = self.route(method, u.path, query, body)
        resp = rest.RESTResponse(_HTTP(status, out))
        resp.read()
        return resp

    def route(self, method, path, query, body):
        ns = re.escape(self.ns)
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
        if m and method in ("GET", "PATCH"):
            obj = self.custom.get((m.group(1), m.group(2)))
            if not obj:
                return 404, _status(404, f'{m.group(1)}.ray.io "{m.group(2)}" not found')
            if method == "GET":
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
        merge_patch(obj, body)
        meta["resourceVersion"] = str(int(meta.get("resourceVersion") or 0) + 1)
        return 200, obj

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
        pod["metadata"]["deletionTimestamp"] = "2026-12-03T10:00:30Z"
        pod["metadata"]["deletionGracePeriodSeconds"] = 30 if grace is None else grace
        return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

    def crud(self, method, name, store, kind, query, body):
        if name is None and method == "GET":
            items = [o for o in store.values() if _matches(o, query.get("labelSelector"))]
            return 200, {"kind": f"{kind}List", "apiVersion": "v1", "metadata": {}, "items": items}
        if name is None and method == "POST":
            name = body["metadata"]["name"]
            if name in store:
                return 409, _status(409, f'{kind.lower()}s "{name}" already exists')
            store[name] = self.created(kind, copy.deepcopy(body))
            return 201, store[name]
        if name not in store:
            return 404, _status(404, f'{kind.lower()}s "{name}" not found')
        if method == "GET":
            return 200, store[name]
        if method == "DELETE":
            return 200, store.pop(name)
        if method == "PATCH":  # merge patch: a null deletes the key
            merge_patch(store[name], body)
            return 200, store[name]
        raise AssertionError(f"{method} {kind}/{name}")

    def created(self, kind: str, obj: dict) -> dict:
        """What the cluster makes of a created object: a pod is scheduled where asked and runs."""
        if kind == "Pod":
            obj["status"] = {"phase": "Running" if obj["spec"].get("nodeName") else "Pending"}
        return obj

    # the client objects, as the backend builds them
    def apis(self):
        api = client.ApiClient(client.Configuration())
        api.rest_client = self
        return client.CoreV1Api(api), client.NetworkingV1Api(api), client.CustomObjectsApi(api)


# ------------------------------------------------------------------ objects, in API JSON
def node(name: str, zone: str, region: str | None = None, unschedulable: bool = False) -> dict:
    labels = {"kubernetes.io/hostname": name, "topology.kubernetes.io/zone": zone}
    if region:
        labels["topology.kubernetes.io/region"] = region
    out = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}, "spec": {}}
    if unschedulable:
        out["spec"]["unschedulable"] = True
    return out


def ray_pod(name: str, node_name: str | None, ip: str | None, node_type: str = "worker", group: str = "workers-zone-a",
            cluster: str = "availproof-x7k2p", restarts: int = 0, ready: bool = True) -> dict:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"ray.io/cluster": cluster, "ray.io/node-type": node_type,
                                              "ray.io/group": group, "ray.io/is-ray-node": "yes"}},
        "spec": {"nodeName": node_name, "containers": [{"name": f"ray-{node_type}", "image": "availproof:dev"}]},
        "status": {"phase": "Running" if node_name else "Pending", "podIP": ip,
                   "conditions": [{"type": "Ready", "status": "True" if ready and node_name else "False"}],
                   "containerStatuses": [{"name": f"ray-{node_type}", "restartCount": restarts, "ready": ready,
                                          "image": "availproof:dev", "imageID": "", "containerID": ""}]},
    }


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
    """``kubernetes.stream.stream`` for exec: ``handler(pod, container, script)`` returns
    (stdout, stderr, exit code); every call logged as (pod, container, script)."""

    def __init__(self, handler=None):
        self.handler = handler or (lambda pod, container, script: ("", "", 0))
        self.calls: list[tuple[str, str | None, str]] = []

    def __call__(self, api_method, name, namespace, **kw):
        assert api_method.__name__ == "connect_get_namespaced_pod_exec", api_method
        assert kw.pop("_preload_content") is False, "the exit status needs the websocket client"
        assert kw["command"][:2] == ["sh", "-c"] and kw["stdout"] and kw["stderr"] and not kw["stdin"]
        script = kw["command"][2]
        self.calls.append((name, kw.get("container"), script))
        out, err, code = self.handler(name, kw.get("container"), script)
        return FakeWSClient(out, err, SUCCESS if code == 0 else failure(code, kw["command"]))
