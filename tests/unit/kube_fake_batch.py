"""The in-memory API server's Jobs, ConfigMaps, garbage collector and the load pods' containers
(tests/unit/kube_fake.py), for the load workers run as a Kubernetes Job (chaos/backends/kuberay/kube/load_pool.py).

What the tests need, each piece naming the upstream code it models:

- the API server's Job strategy (Kubernetes ``pkg/registry/batch/job/strategy.go``): on create,
  ``generateSelector`` adds ``batch.kubernetes.io/job-name``, ``job-name``, ``batch.kubernetes.io/controller-uid``
  and ``controller-uid`` to the pod template's labels and selects on the uid; a DELETE without
  ``propagationPolicy`` orphans the pods (``DefaultGarbageCollectionPolicy``: ``OrphanDependents`` for
  batch/v1, for backward compatibility);
- the Job controller (``pkg/controller/job/job_controller.go`` ``manageJob``, ``indexed_job_utils.go``), as
  :meth:`JobController.sync`: an Indexed Job gets one pod per index not yet running or succeeded, named
  ``<job>-<index>-<5 chars>`` (``podGenerateNameWithIndex``), hostname ``<job>-<index>``, the index in the
  ``batch.kubernetes.io/job-completion-index`` annotation and label (``PodIndexLabel``), and
  ``JOB_COMPLETION_INDEX`` added to every container from that label (``addCompletionIndexEnvVariable``),
  owned by the Job (``controller: true``, ``blockOwnerDeletion: true``); a failed pod beyond ``backoffLimit``
  fails the Job (``BackoffLimitExceeded``) and its active pods are deleted; every index succeeded completes
  it. The pods' ``batch.kubernetes.io/job-tracking`` finalizer is set but not modelled (the controller
  removes it once it has counted the pod);
- the scheduler for those pods (:func:`tests.unit.kube_fake.node_fits`: nodeSelector, cordons, required
  pod anti-affinity; a ``ScheduleAnyway`` spread over hostnames as PodTopologySpread scores it: the fitting
  node with the fewest matching pods);
- the garbage collector (``pkg/controller/garbagecollector``), as :meth:`GarbageCollector.sync`: dependents
  whose owner is gone are deleted (Background), or orphaned (their ownerReference dropped); an owner deleted
  with ``Foreground`` stays, with ``deletionTimestamp`` and the ``foregroundDeletion`` finalizer, until its
  dependents with ``blockOwnerDeletion`` are gone; its other dependents are deleted too;
- ConfigMaps created and deleted; a ConfigMap's data and binaryData over 1 MiB refused (``ValidateConfigMap``:
  ``core.MaxSecretSize``);
- the kubelet for the load pods (:class:`LoadContainers`): a container starts once every ConfigMap its
  projected volume names exists (until then: ``ContainerCreating``, the pod Pending); it runs
  ``chaos.load.pod_worker.main`` in a thread with the container's environment (values and ``fieldRef`` to the
  pod's labels and annotations resolved) and its volumes under a directory of its own, its stdout the
  pod's log, its wall clock its node's (:attr:`LoadContainers.skew_ns`); ``GET .../pods/NAME/log?follow=true``
  streams that log (chunked, as the API server relays the kubelet's); exec runs the rig's clock read and
  its control files' writes; the exit code makes the pod Succeeded or Failed; a deleted pod's container
  gets SIGTERM (modelled: its stop and exit files) and is gone at the end of its grace.
"""

from __future__ import annotations

import base64
import copy
import itertools
import re
import tempfile
import threading
import time
from pathlib import Path

from kubernetes.client.exceptions import ApiException

INDEX_KEY = "batch.kubernetes.io/job-completion-index"
TRACKING_FINALIZER = "batch.kubernetes.io/job-tracking"
FOREGROUND = "foregroundDeletion"
MAX_CONFIGMAP_BYTES = 1024 * 1024
RAND = "bcdfghjklmnpqrstvwxz2456789"


def _meta(obj: dict) -> dict:
    return obj.setdefault("metadata", {})


def _owned_by(obj: dict, uid: str) -> dict | None:
    return next((r for r in _meta(obj).get("ownerReferences") or [] if r.get("uid") == uid), None)


class Batch:
    """Jobs and ConfigMaps of the fake API server, and the controllers and containers behind them; they
    advance at every request (:meth:`sync`), as the real ones run beside the API server."""

    def __init__(self, server):
        from tests.unit.kube_fake import _status

        self.s = server
        self._status = _status
        self.jobs: dict[str, dict] = {}
        self.controller = JobController(server, self)
        self.gc = GarbageCollector(server, self)
        self.containers = LoadContainers(server, self)
        self._uids = itertools.count(1)

    def sync(self) -> None:
        self.gc.sync()
        self.controller.sync()
        self.containers.sync()

    # ---------------------------------------------------------------- routes
    def route(self, method, path, query, body):
        ns = re.escape(self.s.ns)
        m = re.fullmatch(rf"/apis/batch/v1/namespaces/{ns}/jobs(?:/([^/]+))?", path)
        if m:
            return self.job_route(method, m.group(1), query, body)
        m = re.fullmatch(rf"/api/v1/namespaces/({ns})/configmaps(?:/([^/]+))?", path)
        if m and method in ("POST", "DELETE"):
            return self.configmap_route(method, m.group(1), m.group(2), query, body)
        m = re.fullmatch(rf"/api/v1/namespaces/{ns}/pods/([^/]+)/log", path)
        if m and method == "GET":
            return self.containers.log(m.group(1), query)
        return None

    def job_route(self, method, name, query, body):
        if name is None and method == "POST":
            job = copy.deepcopy(body)
            name = _meta(job)["name"]
            spec = job.get("spec") or {}
            template_spec = ((spec.get("template") or {}).get("spec")) or {}
            if self.s.pod_security != "privileged":
                from tests.unit.kube_fake import pod_security_violations

                bad = pod_security_violations(template_spec)
                if bad:
                    return 403, self._status(403, f'jobs.batch "{name}" is forbidden: violates PodSecurity '
                                                  f'"{self.s.pod_security}:latest": {", ".join(bad)}')
            if spec.get("completionMode") == "Indexed" and spec.get("completions") is None:
                return 422, self._status(422, f'Job.batch "{name}" is invalid: spec.completions: Required value: '
                                              f'when completion mode is Indexed')
            if template_spec.get("restartPolicy") not in ("Never", "OnFailure"):
                return 422, self._status(422, f'Job.batch "{name}" is invalid: spec.template.spec.restartPolicy: '
                                              f'Required value: valid values: "OnFailure", "Never"')
            if name in self.jobs:
                return 409, self._status(409, f'jobs.batch "{name}" already exists')
            uid = f"uid-job-{name}-{next(self._uids)}"
            _meta(job).update({"uid": uid, "resourceVersion": "1", "generation": 1})
            labels = _meta(spec.setdefault("template", {})).setdefault("labels", {})
            for k in ("batch.kubernetes.io/job-name", "job-name"):  # generateSelector
                labels.setdefault(k, name)
            for k in ("batch.kubernetes.io/controller-uid", "controller-uid"):
                labels.setdefault(k, uid)
            spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
            job["status"] = {}
            if query.get("dryRun") == "All":
                return 201, job
            self.jobs[name] = job
            return 201, job
        if name is None:
            raise AssertionError(f"{method} jobs: not modelled")
        job = self.jobs.get(name)
        if job is None:
            return 404, self._status(404, f'jobs.batch "{name}" not found')
        if method == "GET":
            return 200, job
        if method == "DELETE":
            policy = query.get("propagationPolicy") or "Orphan"  # batch/v1's default: OrphanDependents
            if policy == "Foreground":
                meta = _meta(job)
                meta.setdefault("deletionTimestamp", "2026-12-05T10:00:00Z")
                meta["finalizers"] = sorted(set(meta.get("finalizers") or []) | {FOREGROUND})
                return 200, job
            self.jobs.pop(name)
            self.gc.gone[_meta(job)["uid"]] = policy
            return 200, job
        raise AssertionError(f"{method} jobs/{name}: not modelled")

    def configmap_route(self, method, ns, name, query, body):
        store = self.s.configmaps
        if method == "POST":
            cm = copy.deepcopy(body)
            name = _meta(cm)["name"]
            size = sum(len(v.encode()) for v in (cm.get("data") or {}).values())
            size += sum(len(base64.b64decode(v)) for v in (cm.get("binaryData") or {}).values())
            if size > MAX_CONFIGMAP_BYTES:
                return 422, self._status(422, f'ConfigMap "{name}" is invalid: []: Too long: may not be more than '
                                              f'{MAX_CONFIGMAP_BYTES} bytes')
            if (ns, name) in store:
                return 409, self._status(409, f'configmaps "{name}" already exists')
            _meta(cm).update({"uid": f"uid-cm-{name}-{next(self._uids)}", "resourceVersion": "1"})
            if query.get("dryRun") != "All":
                store[(ns, name)] = cm
            return 201, cm
        if (ns, name) not in store:
            return 404, self._status(404, f'configmaps "{name}" not found')
        return 200, store.pop((ns, name))

    # ---------------------------------------------------------------- what tests look at
    def job_pods(self, job: str) -> list[dict]:
        return [p for p in self.s.pods.values() if (_meta(p).get("labels") or {}).get("job-name") == job]


class JobController:
    """``pkg/controller/job``: an Indexed Job's pods, its failure and completion (see the module's docstring)."""

    def __init__(self, server, batch: Batch):
        self.s, self.b = server, batch
        self._names = itertools.count(1)
        self.seen: dict[str, dict[str, tuple[int, str | None]]] = {}  # job uid -> pod -> (index, last phase)

    def sync(self) -> None:
        for job in list(self.b.jobs.values()):
            self._sync(job)

    def _owned(self, job: dict) -> list[dict]:
        uid = _meta(job)["uid"]
        return [p for p in self.s.pods.values() if _owned_by(p, uid)]

    def _sync(self, job: dict) -> None:
        spec, status = job["spec"], job.setdefault("status", {})
        conditions = status.setdefault("conditions", [])
        finished = any(c["type"] in ("Complete", "Failed") and c["status"] == "True" for c in conditions)
        pods = self._owned(job)
        phase = {n: (p.get("status") or {}).get("phase") for n, p in ((_meta(p)["name"], p) for p in pods)}
        seen = self.seen.setdefault(_meta(job)["uid"], {})
        for p in pods:
            seen[_meta(p)["name"]] = (int(_meta(p)["annotations"][INDEX_KEY]), phase[_meta(p)["name"]])
        # a pod that went away without succeeding (deleted, evicted) counts as failed (pod failure tracking)
        lost = [n for n, (_, ph) in seen.items() if n not in phase and ph != "Succeeded"]
        failed = [p for p in pods if phase[_meta(p)["name"]] == "Failed"] + lost
        succeeded = {i for n, (i, ph) in seen.items() if ph == "Succeeded"}
        active = [p for p in pods if phase[_meta(p)["name"]] not in ("Failed", "Succeeded")
                  and not _meta(p).get("deletionTimestamp")]
        status.update({"active": len(active), "failed": len(failed), "succeeded": len(succeeded)})
        if finished or _meta(job).get("deletionTimestamp"):
            return
        per_index = spec.get("backoffLimitPerIndex")
        failed_indexes: set[int] = set()
        if per_index is not None:  # job_controller.go: an index failed beyond its own limit is not recreated
            count: dict[int, int] = {}
            for n, (i, ph) in seen.items():
                if ph == "Failed" or (n not in phase and ph != "Succeeded"):
                    count[i] = count.get(i, 0) + 1
            failed_indexes = {i for i, c in count.items() if c > int(per_index)}
            status["failedIndexes"] = ",".join(map(str, sorted(failed_indexes)))
            top = spec.get("maxFailedIndexes")
            if top is not None and len(failed_indexes) > int(top):
                conditions.append({"type": "Failed", "status": "True", "reason": "MaxFailedIndexesExceeded",
                                   "message": "Job has exceeded the specified maximal number of failed indexes"})
                for p in active:
                    self.s.delete_pod(_meta(p)["name"], None)
                return
            if len(succeeded | failed_indexes) == int(spec["completions"]) and failed_indexes:
                conditions.append({"type": "Failed", "status": "True", "reason": "FailedIndexes",
                                   "message": "Job has failed indexes"})
                return
        elif len(failed) > int(spec.get("backoffLimit", 6)):
            conditions.append({"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                               "message": "Job has reached the specified backoff limit"})
            for p in active:  # a failed Job's running pods are terminated
                self.s.delete_pod(_meta(p)["name"], None)
            return
        if len(succeeded) == int(spec["completions"]):
            conditions.append({"type": "Complete", "status": "True"})
            status["completedIndexes"] = f"0-{spec['completions'] - 1}" if spec["completions"] > 1 else "0"
            return
        have = {i for n, (i, ph) in seen.items() if ph != "Failed" and (n in phase or ph == "Succeeded")}
        room = int(spec.get("parallelism", 1)) - len(active)
        for index in range(int(spec["completions"])):
            if room <= 0:
                break
            if index in have or index in failed_indexes:
                continue
            self._create(job, index)
            room -= 1
        self.b.containers.schedule([_meta(p)["name"] for p in self._owned(job)])

    def _create(self, job: dict, index: int) -> str:
        name = _meta(job)["name"]
        n = next(self._names)
        suffix = "".join(RAND[(n // len(RAND) ** i) % len(RAND)] for i in range(5))
        template = copy.deepcopy(job["spec"]["template"])
        meta = template.setdefault("metadata", {})
        meta.setdefault("labels", {})[INDEX_KEY] = str(index)
        meta.setdefault("annotations", {})[INDEX_KEY] = str(index)
        pod_spec = template["spec"]
        pod_spec["hostname"] = f"{name}-{index}"
        for c in pod_spec.get("initContainers", []) + pod_spec["containers"]:
            env = c.setdefault("env", [])
            if not any(e["name"] == "JOB_COMPLETION_INDEX" for e in env):
                env.append({"name": "JOB_COMPLETION_INDEX",
                            "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{INDEX_KEY}']"}}})
        pod_name = f"{name}-{index}-{suffix}"
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {**meta, "name": pod_name, "uid": f"uid-{pod_name}", "resourceVersion": "1",
                            "finalizers": [TRACKING_FINALIZER],
                            "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": name,
                                                 "uid": _meta(job)["uid"], "controller": True,
                                                 "blockOwnerDeletion": True}]},
               "spec": pod_spec,
               "status": {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False",
                                                              "reason": "Unschedulable",
                                                              "message": f"0/{len(self.s.nodes)} nodes are available"}]}}
        self.s.pods[pod_name] = pod
        return pod_name


class GarbageCollector:
    """``pkg/controller/garbagecollector``: dependents of owners that are gone, and foreground deletions."""

    def __init__(self, server, batch: Batch):
        self.s, self.b = server, batch
        self.gone: dict[str, str] = {}  # owner uid -> propagation policy it was deleted with

    def _dependents(self, uid: str) -> list[tuple[str, dict]]:
        out = [("pod", p) for p in self.s.pods.values() if _owned_by(p, uid)]
        out += [("configmap", c) for c in self.s.configmaps.values() if _owned_by(c, uid)]
        return out

    def _delete(self, kind: str, obj: dict) -> None:
        name = _meta(obj)["name"]
        if kind == "pod":
            if name in self.s.pods and not _meta(obj).get("deletionTimestamp"):
                self.s.delete_pod(name, None)
        else:
            self.s.configmaps.pop(next(k for k, v in self.s.configmaps.items() if v is obj), None)

    def sync(self) -> None:
        for uid, policy in list(self.gone.items()):
            deps = self._dependents(uid)
            for kind, obj in deps:
                if policy == "Orphan":
                    _meta(obj)["ownerReferences"] = [r for r in _meta(obj)["ownerReferences"] if r["uid"] != uid]
                else:
                    self._delete(kind, obj)
            if not self._dependents(uid) or policy == "Orphan":
                self.gone.pop(uid)
        for name, job in list(self.b.jobs.items()):
            meta = _meta(job)
            if FOREGROUND not in (meta.get("finalizers") or []):
                continue
            deps = self._dependents(meta["uid"])
            for kind, obj in deps:
                self._delete(kind, obj)
            blocking = [o for _, o in self._dependents(meta["uid"])
                        if (_owned_by(o, meta["uid"]) or {}).get("blockOwnerDeletion")]
            if not blocking:
                self.b.jobs.pop(name)


class Log:
    """A container's log: bytes appended by its process, read from any offset, closed when it exits."""

    def __init__(self):
        self.data = bytearray()
        self.closed = False
        self._cv = threading.Condition()

    def write(self, text: str) -> int:
        with self._cv:
            self.data += text.encode()
            self._cv.notify_all()
        return len(text)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        with self._cv:
            self.closed = True
            self._cv.notify_all()

    def read_from(self, pos: int, timeout: float) -> tuple[bytes, bool]:
        with self._cv:
            if len(self.data) <= pos and not self.closed:
                self._cv.wait(timeout)
            return bytes(self.data[pos:]), self.closed


class LogStream:
    """The answer to ``GET .../log?follow=true`` with ``_preload_content=False``: what the client returns
    (a urllib3 response), its body the container's log, chunk by chunk as it is written, ending when the
    container exits. ``break_after`` bytes: the connection breaks there (a reset), for the tests."""

    status, reason = 200, "OK"
    headers = {"content-type": "text/plain", "transfer-encoding": "chunked"}
    data = b""

    def __init__(self, log: Log, break_after: int | None = None):
        self.log, self.pos, self.break_after = log, 0, break_after
        self.closed = False

    def stream(self, amt=None, decode_content=None):
        while not self.closed:
            chunk, ended = self.log.read_from(self.pos, 0.1)
            if self.break_after is not None and self.pos + len(chunk) > self.break_after:
                chunk = chunk[: max(0, self.break_after - self.pos)]
                if chunk:
                    self.pos += len(chunk)
                    yield chunk
                raise ConnectionResetError("the log stream broke (the fake's break_after)")
            if chunk:
                self.pos += len(chunk)
                yield chunk
            elif ended:
                return

    def release_conn(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


class LoadContainers:
    """The kubelet's side of the Job's pods (see the module's docstring)."""

    def __init__(self, server, batch: Batch):
        self.s, self.b = server, batch
        self.skew_ns: dict[str, int] = {}  # node -> its wall clock minus the rig's
        self.running: dict[str, dict] = {}  # pod name -> {"root", "log", "thread", "code"}
        self.break_first_after: int | None = None  # each pod's first log stream breaks after this many bytes
        self._broken: set[str] = set()
        self.started: list[str] = []

    # -- scheduling
    def schedule(self, names: list[str]) -> None:
        from tests.unit.kube_fake import node_fits

        for name in names:
            pod = self.s.pods.get(name)
            if pod is None or pod["spec"].get("nodeName") or _meta(pod).get("deletionTimestamp"):
                continue
            fits = [n for n, node in sorted(self.s.nodes.items()) if node_fits(self.s, pod, node)]
            if not fits:
                continue
            spread = [c for c in pod["spec"].get("topologySpreadConstraints") or []
                      if c["whenUnsatisfiable"] == "ScheduleAnyway" and c["topologyKey"] == "kubernetes.io/hostname"]
            if spread:  # PodTopologySpread's score: the node with the fewest matching pods first
                from tests.unit.kube_fake import _selects

                def placed(n: str) -> int:
                    return sum(1 for p in self.s.pods.values() if p["spec"].get("nodeName") == n
                               and _selects(spread[0]["labelSelector"], _meta(p).get("labels") or {}))

                fits.sort(key=lambda n: (placed(n), n))
            pod["spec"]["nodeName"] = fits[0]
            pod["status"] = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}],
                             "containerStatuses": [self._status(c, waiting="ContainerCreating")
                                                   for c in pod["spec"]["containers"]]}

    @staticmethod
    def _status(c: dict, waiting: str | None = None, running: bool = False, code: int | None = None) -> dict:
        state = ({"waiting": {"reason": waiting}} if waiting else {"running": {"startedAt": "2026-12-05T10:00:00Z"}}
                 if running else {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error"}})
        return {"name": c["name"], "image": c.get("image", ""), "imageID": "", "containerID": "", "restartCount": 0,
                "ready": running, "state": state}

    # -- containers
    def _host(self, name: str, path: str) -> str:
        """A path as the container sees it, on this machine: under the container's own root."""
        return str(Path(self.running[name]["root"]) / path.lstrip("/"))

    def sync(self) -> None:
        for name, pod in list(self.s.pods.items()):
            if name in self.running:
                self._reap(name, pod)
            elif self.owns(name) and _meta(pod).get("deletionTimestamp"):  # nothing ran: gone at once
                self.s.pods.pop(name)
            elif (_meta(pod).get("labels") or {}).get("job-name") and pod["spec"].get("nodeName") \
                    and (pod.get("status") or {}).get("phase") == "Pending" and not _meta(pod).get("deletionTimestamp"):
                self._start(name, pod)
        for name in list(self.running):  # a pod gone from the API: its container too
            if name not in self.s.pods:
                self._kill(name)

    def _start(self, name: str, pod: dict) -> None:
        volumes = {v["name"]: v for v in pod["spec"].get("volumes") or []}
        maps = {}
        for v in volumes.values():
            for src in (v.get("projected") or {}).get("sources") or []:
                cm = self.s.configmaps.get((self.s.ns, src["configMap"]["name"]))
                if cm is None:
                    return  # FailedMount: the kubelet tries again at its next sync; the pod stays ContainerCreating
                maps[src["configMap"]["name"]] = cm
        root = tempfile.mkdtemp(prefix=f"fake-{name}-")
        self.running[name] = {"root": root, "log": Log(), "thread": None, "code": None}
        (c,) = pod["spec"]["containers"]
        for mount in c.get("volumeMounts") or []:
            where = Path(self._host(name, mount["mountPath"]))
            where.mkdir(parents=True, exist_ok=True)
            for src in (volumes[mount["name"]].get("projected") or {}).get("sources") or []:
                cm = maps[src["configMap"]["name"]]
                for item in src["configMap"].get("items") or []:
                    (where / item["path"]).write_bytes(base64.b64decode(cm["binaryData"][item["key"]]))
        env = {}
        for e in c.get("env") or []:
            if "value" in e:
                env[e["name"]] = e["value"]
            else:
                kind, key = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]",
                                         e["valueFrom"]["fieldRef"]["fieldPath"]).groups()
                env[e["name"]] = (_meta(pod).get(kind) or {}).get(key, "")
        mounts = [m["mountPath"] for m in c.get("volumeMounts") or []]
        env = {k: (self._host(name, v) if v in mounts else v) for k, v in env.items()}
        assert c["command"] == ["python", "-m", "chaos.load.pod_worker"], c["command"]
        skew = self.skew_ns.get(pod["spec"]["nodeName"], 0)
        box = self.running[name]

        def process() -> None:
            from chaos.load import pod_worker

            try:
                box["code"] = pod_worker.main(env=env, out=box["log"], clock_ns=lambda: time.time_ns() + skew)
            except BaseException as e:  # noqa: BLE001 - a crash of the container's process
                box["log"].write(f"Traceback: {type(e).__name__}: {e}\n")
                box["code"] = 1

        box["thread"] = threading.Thread(target=process, name=f"container-{name}", daemon=True)
        box["thread"].start()
        pod["status"] = {"phase": "Running", "podIP": f"10.0.99.{len(self.running)}",
                         "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "True"}],
                         "containerStatuses": [self._status(c, running=True)]}
        self.started.append(name)

    def _reap(self, name: str, pod: dict) -> None:
        box = self.running[name]
        if _meta(pod).get("deletionTimestamp"):  # SIGTERM (the worker's stop and exit); its grace passes unseen
            self._kill(name)
            self.s.pods.pop(name, None)
            return
        if box["thread"].is_alive() or (pod.get("status") or {}).get("phase") != "Running":
            return
        box["log"].close()
        code = box["code"] if box["code"] is not None else 1
        (c,) = pod["spec"]["containers"]
        pod["status"] = {"phase": "Succeeded" if code == 0 else "Failed",
                         "conditions": [{"type": "Ready", "status": "False", "reason": "PodCompleted"}],
                         "containerStatuses": [self._status(c, code=code)]}

    def _signal(self, name: str) -> None:
        root = Path(self.running[name]["root"])
        from chaos.load import pod_worker

        control = root / pod_worker.CONTROL_DIR.lstrip("/")
        control.mkdir(parents=True, exist_ok=True)
        for f in (pod_worker.STOP, pod_worker.EXIT):
            (control / f).touch()

    def _kill(self, name: str) -> None:
        self._signal(name)
        box = self.running.pop(name)
        box["log"].close()

    # -- the API's view: logs and exec
    def log(self, name: str, query: dict):
        pod = self.s.pods.get(name)
        if pod is None:
            return 404, self.b._status(404, f'pods "{name}" not found')
        container = query.get("container") or pod["spec"]["containers"][0]["name"]
        if name not in self.running:
            return 400, self.b._status(400, f'container "{container}" in pod "{name}" is waiting to start: '
                                            f'ContainerCreating')
        assert query.get("follow") == "true", "only followed logs are modelled"
        cut = None
        if self.break_first_after is not None and name not in self._broken:
            self._broken.add(name)
            cut = self.break_first_after
        return 200, LogStream(self.running[name]["log"], cut)

    def exec(self, name: str, container: str | None, script: str) -> tuple[str, str, int]:
        from chaos.load import pod_worker as pw

        pod = self.s.pods.get(name)
        if pod is None:
            raise ApiException(status=404, reason=f'pods "{name}" not found')
        box = self.running.get(name)
        if box is None or box["log"].closed or not box["thread"].is_alive():
            raise ApiException(status=400, reason=f"container not found ({container}): not running")
        if script == pw.CLOCK_SCRIPT:
            return f"{time.time_ns() + self.skew_ns.get(pod['spec']['nodeName'], 0)}\n", "", 0
        m = re.fullmatch(r"echo (\d+) > (\S+)\.tmp && mv (\S+)\.tmp (\S+)", script)
        if m and m.group(2) == m.group(3) == m.group(4):
            target = Path(self._host(name, m.group(4)))
            tmp = target.with_suffix(".tmp")
            tmp.write_text(m.group(1) + "\n")
            tmp.replace(target)
            return "", "", 0
        m = re.fullmatch(r": > (\S+)", script)
        if m:
            Path(self._host(name, m.group(1))).touch()
            return "", "", 0
        raise AssertionError(f"the fake kubelet does not know this command in a load pod: {script[:200]}")

    def owns(self, name: str) -> bool:
        pod = self.s.pods.get(name)
        return bool(pod and (_meta(pod).get("labels") or {}).get("job-name"))
