"""The load workers as pods of a Kubernetes Job, where no fault of the run reaches them (KubeRay backend).

:class:`JobPool` is a :class:`chaos.load.pool.LoadPool`: the run drives it like the local workers
(:class:`chaos.load.workers.WorkerPool`) and its records reach the run's Events the same way, so the
run's ``records.ndjson`` and ``availproof analyse`` do not care where the workers ran.

1. The plan is drawn once, here, and dealt: worker ``W`` gets ``plan[W::N]``, written into the ConfigMap
   of its own that its pod mounts (:mod:`chaos.backends.kuberay.kube.load`: the Indexed Job, its pods off every
   node running a Ray pod of the cluster under test). The pods' program: :mod:`chaos.load.pod_worker`.
2. Once every pod is Running and has said it is ready (its log, followed through ``pods/log``), each
   pod's wall clock is read through exec (:data:`~chaos.load.pod_worker.CLOCK_SCRIPT`), NTP's way
   (:func:`chaos.load.clock.best_offset`: the pod's reading against the midpoint of the rig's before and
   after the exec; the uncertainty is half the shortest round trip of :data:`CLOCK_SAMPLES`). Pods share
   no monotonic clock with the rig: the start is one instant of the rig's wall clock, ``t0``, given to
   each pod on its own clock (``t0`` plus its offset) through exec.
3. The rig follows every pod's log: each finished request is published on the run's Events as it arrives,
   its wall-clock instants corrected by the pod's offset at the start; ``clock_start`` (header) and
   ``clock_end`` (footer, read again once the pod is done) carry the offsets and their uncertainty, and
   each worker's footer line the correction applied and the timestamps' resulting uncertainty.
4. ``stop`` is a file written through exec (the pods stop sending and drain); the end is bounded
   (the run's duration, drain and a margin: past it the Job is deleted); the Job is deleted at the end,
   with ``propagationPolicy: Foreground`` (its pods and ConfigMaps go first, then the Job), and after any
   failure of the start or the supervision.
"""

from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable
from urllib.parse import urlsplit

from chaos.recording import records as rec
from chaos.backends.kuberay.kube import pod_exec as kube_exec, load as kl
from chaos.base.errors import ClusterError
from chaos.load import pod_worker as pw
from chaos.load.clock import best_offset
from chaos.load.pool import LineBuffer, LoadPool
from chaos.load.workload import LoadShape, Target

CLOCK_SAMPLES = 5
START_LEAD_S = 2.0  # t0 at least this far after the go is sent (more with many pods): every pod has it in time
POLL_S = 0.5
EXEC_TIMEOUT_S = 20.0
LOG_RETRIES = 20  # a log stream that breaks before the pod is done is followed again, the lines read skipped
LOG_SILENCE_S = 60.0  # no byte of a pod's log for this long: the stream is broken (a pod prints every second)
DELETE_WAIT_S = 20.0
PARALLEL = 8  # execs at once (each over an ApiClient of its own: kube_exec.own_core)


class JobPool(LoadPool):
    """N load workers, pods of one Indexed Job in the backend's namespace (see the module's docstring)."""

    where = "pods of a Kubernetes Job"

    def __init__(self, backend, settings: kl.LoadJobSettings, shape: LoadShape, events: rec.Events,
                 routing: str = "round_robin", allow_hosts: tuple[str, ...] = (), run_id: str | None = None,
                 header_extra: dict[str, Any] | None = None, headers: dict[str, str] | None = None,
                 ca_file: str | None = None):
        kl.check_load(shape, sends_token=bool(headers))
        url = kl.serve_url(settings, backend.service, backend.namespace)
        host = urlsplit(url).hostname or ""
        super().__init__([Target("serve-svc", url)], shape, events, routing=routing,
                         allow_hosts=tuple(allow_hosts) + (host,), run_id=run_id, header_extra=header_extra,
                         headers=headers, ca_file=None)  # the rig's CA file is not in the pods: the image's CAs
        self.b, self.settings = backend, settings
        self.namespace = backend.namespace
        self.job = kl.job_name(backend.run_id, self.run_id)
        self.job_uid: str | None = None
        self.pods: list[str | None] = [None] * self.n
        self.nodes: list[str | None] = [None] * self.n
        self.offsets = [0] * self.n  # each pod's wall clock minus ours at the start: what its records are corrected by
        self._ready = [threading.Event() for _ in range(self.n)]
        self._followed = [threading.Event() for _ in range(self.n)]  # its log stream ended (done, or the pod gone)
        self._lines = [LineBuffer() for _ in range(self.n)]
        self._consumed = [0] * self.n  # lines read from each pod's log (skipped when it is followed again)
        self._late_start_ns: list[int | None] = [None] * self.n
        self._responses: list[Any] = [None] * self.n
        self._followers: list[threading.Thread] = []
        self._closing = threading.Event()
        self.job_deleted: bool | None = None

    # ---------------------------------------------------------------- what the pods get
    def worker_shape(self, w: int) -> dict[str, Any]:
        """As a local worker's, without the trace: a pod sends its share; the trace file is the rig's."""
        return {**super().worker_shape(w), "trace": None}

    def _header_workers(self) -> dict[str, Any]:
        return {"job": self.job, "namespace": self.namespace, "image": self.settings.image,
                "pods": list(self.pods), "nodes": list(self.nodes),
                "timestamps": "each request's wall-clock instants corrected by its pod's offset at the start "
                              "(clock_start); each worker's end line states the uncertainty"}

    # ---------------------------------------------------------------- the start
    def _start(self) -> None:
        deadline = time.monotonic() + self.settings.start_timeout_s
        shares = self.shares()
        go_timeout = self.settings.start_timeout_s + 120.0
        # the pods' own headers are never published: only who they are, not the run's definitions
        specs = [self.spec(w, shares[w], go_timeout_s=go_timeout, header_extra={"worker": w, "workers_total": self.n})
                 for w in range(self.n)]
        del shares
        active_s = kl.deadline_s(self.shape, self.settings.start_timeout_s)
        manifest = kl.job_manifest(self.settings, self.b.run_id, self.job, self.n, self.b.cluster, active_s,
                                   avoid_zones=self.b.load_avoid_zones)
        maps = [kl.configmap_manifest(self.b.run_id, self.job, w, specs[w], deadline_s=active_s)
                for w in range(self.n)]  # sizes refused first
        del specs
        created = self.b.batch.create_namespaced_job(self.namespace, manifest)
        self.job_uid = created.metadata.uid
        for cm in maps:
            cm["metadata"]["ownerReferences"] = [{"apiVersion": "batch/v1", "kind": "Job", "name": self.job,
                                                  "uid": self.job_uid}]
            self.b.core.create_namespaced_config_map(self.namespace, cm)
        del maps
        self._wait_running(deadline)
        for w in range(self.n):
            t = threading.Thread(target=self._follow, args=(w,), name=f"load-log-{w}", daemon=True)
            t.start()
            self._followers.append(t)
        for w in range(self.n):
            if not self._ready[w].wait(max(0.0, deadline - time.monotonic())):
                raise ClusterError(f"load pod {self.pods[w]} did not say it was ready within "
                                   f"{self.settings.start_timeout_s:.0f} s of the Job's creation (its log)")
            if self._done[w] is not None:
                raise ClusterError(f"load pod {self.pods[w]} ended before the start: {self._done[w][3]}")
        self.clock_start = self._each(lambda w, core: {"worker": w, "pod": self.pods[w], **self._clock(w, core)})
        self.clock_end = [None] * self.n
        self.offsets = [c["wall_offset_ns"] for c in self.clock_start]
        # far enough ahead that every pod has its start before the instant: the go's execs, PARALLEL at once
        rounds = -(-self.n // PARALLEL)
        lead_s = max(START_LEAD_S, 1.0 + 2 * rounds * max(c["rtt_ns"] for c in self.clock_start) / 1e9)
        t0_ns = time.time_ns() + int(lead_s * 1e9)
        self.t0 = time.monotonic() + (t0_ns - time.time_ns()) / 1e9
        self.started_ns = t0_ns
        self._each(lambda w, core: self._exec(w, pw.go_script(t0_ns + self.offsets[w]), core))
        self.events.emit(self.events.run_started, self.header())

    def _job_pods(self) -> list[dict]:
        return self.b.pods.pods(label_selector=f"{kl.JOB_NAME_LABELS[1]}={self.job}")

    def _wait_running(self, deadline: float) -> None:
        """Every index's pod Running (scheduled, its image pulled, its container started), within the deadline."""
        while True:
            found: dict[int, dict] = {}
            for p in self._job_pods():
                meta = p.get("metadata") or {}
                index = ((meta.get("labels") or {}).get(kl.INDEX_KEY) or (meta.get("annotations") or {}).get(kl.INDEX_KEY))
                if index is not None and str(index).isdigit() and not meta.get("deletion_timestamp"):
                    found[int(index)] = p
            ended = [p for p in found.values() if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed")]
            if ended:
                raise ClusterError(f"load pod {_name(ended[0])} ended before the start ({_state(ended[0])})")
            running = {w: p for w, p in found.items() if (p.get("status") or {}).get("phase") == "Running"}
            if len(running) == self.n:
                for w, p in running.items():
                    self.pods[w], self.nodes[w] = _name(p), (p.get("spec") or {}).get("node_name")
                return
            if time.monotonic() > deadline:
                waiting = [f"{_name(p)} {_state(p)}" for w, p in sorted(found.items()) if w not in running]
                missing = self.n - len(found)
                raise ClusterError(f"load Job {self.job}: {self.n - len(running)} of {self.n} pods not running after "
                                   f"{self.settings.start_timeout_s:.0f} s"
                                   f"{': ' + '; '.join(waiting[:3]) if waiting else ''}"
                                   f"{f' ({missing} not created)' if missing else ''}; the pods need a node with "
                                   f"no Ray pod of {self.b.cluster} (pod anti-affinity) that matches "
                                   f"kubernetes.load.node_selector")
            time.sleep(POLL_S)

    # ---------------------------------------------------------------- the pods' logs
    def _follow(self, w: int) -> None:
        """Follow pod ``w``'s log until its done line, or its end; a stream that breaks is followed again,
        the lines already read skipped."""
        pod = self.pods[w]
        try:
            for _ in range(LOG_RETRIES):
                if self._closing.is_set():
                    return
                skip, n = self._consumed[w], 0
                self._lines[w] = LineBuffer()
                try:
                    # a pod prints a line a second while it sends: a silent minute is a broken stream
                    resp = self.b.core.read_namespaced_pod_log(pod, self.namespace, container=kl.CONTAINER,
                                                               follow=True, _preload_content=False,
                                                               _request_timeout=(10, LOG_SILENCE_S))
                except Exception:  # noqa: BLE001 - ApiException or a connection error: look again
                    if self._pod_ended(w):
                        return
                    time.sleep(POLL_S)
                    continue
                self._responses[w] = resp
                try:
                    for chunk in resp.stream(amt=None, decode_content=False):
                        for line in self._lines[w].feed(chunk):
                            if self._closing.is_set():  # the footer is (being) written: nothing after it
                                return
                            n += 1
                            if n <= skip:
                                continue
                            self._consumed[w] += 1
                            if self._line(w, line):
                                return
                except Exception:  # noqa: BLE001 - the stream broke (a connection reset): follow again
                    pass
                finally:  # closed, not returned to the pool half read
                    with contextlib.suppress(Exception):
                        resp.close()
                        resp.release_conn()
                if self._done[w] is not None or self._pod_ended(w):
                    return
                time.sleep(POLL_S)
        finally:
            self._followed[w].set()

    def _line(self, w: int, line: bytes) -> bool:
        """One line of pod ``w``'s log; True once it is done (nothing more to read)."""
        obj = self.publish(w, line, self.offsets[w])
        if obj is None:
            return False
        kind = obj.get("kind")
        if kind == pw.READY:
            self._ready[w].set()
        elif kind == pw.COUNTS and isinstance(obj.get("counts"), dict):
            self._wcounts[w] = obj["counts"]
        elif kind == pw.DONE:
            counts = obj.get("counts") or {}
            if counts:
                self._wcounts[w] = counts
            self._late_start_ns[w] = obj.get("late_start_ns")
            self._done[w] = (obj.get("footer") or {}, counts, obj.get("cpu_s"), obj.get("error"))
            self._ready[w].set()  # a pod done before the start wakes the start's wait
            return True
        return False

    def _pod_ended(self, w: int) -> bool:
        pods = [p for p in self._job_pods() if _name(p) == self.pods[w]]
        return not pods or (pods[0].get("status") or {}).get("phase") in ("Succeeded", "Failed")

    # ---------------------------------------------------------------- exec: clocks and signals
    def _exec(self, w: int, script: str, core=None) -> str:
        return kube_exec.run(core or kube_exec.own_core(self.b.exec_core), self.namespace, self.pods[w], script,
                             container=kl.CONTAINER, timeout=EXEC_TIMEOUT_S, stream_fn=self.b.stream_fn)

    def _clock(self, w: int, core=None) -> dict[str, Any]:
        def ask(k: int) -> tuple[int, None]:
            out = self._exec(w, pw.CLOCK_SCRIPT, core).split()
            if not out or not out[0].isdigit():
                raise ClusterError(f"load pod {self.pods[w]}: its clock read as {' '.join(out)[:40]!r} "
                                   f"(`{pw.CLOCK_SCRIPT}` needs GNU date in the image)")
            return int(out[0]), None

        return best_offset(ask, CLOCK_SAMPLES, via="exec")

    def _each(self, fn: Callable[[int, Any], Any], workers: list[int] | None = None) -> list:
        """``fn(w, core)`` for every worker (or ``workers``), at most :data:`PARALLEL` at once, each exec over
        an ApiClient of its own; the results in worker order (an exception raised)."""
        ws = list(range(self.n)) if workers is None else workers
        if not ws:
            return []
        with ThreadPoolExecutor(max_workers=min(PARALLEL, len(ws))) as pool:
            return list(pool.map(lambda w: fn(w, kube_exec.own_core(self.b.exec_core)), ws))

    def _signal(self, script: str, workers: list[int]) -> None:
        def one(w: int, core) -> None:
            with contextlib.suppress(kube_exec.ExecError):  # a pod already gone needs no signal
                self._exec(w, script, core)

        self._each(one, [w for w in workers if self.pods[w]])

    def _signal_stop(self) -> None:
        self._signal(pw.STOP_SCRIPT, [w for w in range(self.n) if self._done[w] is None])

    # ---------------------------------------------------------------- the end
    def _supervise(self) -> None:
        s = self.shape
        drain = s.drain_bound_s()
        deadline = self.t0 + s.duration_s + drain + 60.0  # every pod ends by itself well before
        next_look = time.monotonic() + 2.0
        while any(d is None for d in self._done) and time.monotonic() < deadline:
            time.sleep(0.1)
            if time.monotonic() < next_look:
                continue
            next_look = time.monotonic() + 2.0
            for w in range(self.n):
                if self._done[w] is None and self._followed[w].is_set() and self._pod_ended(w):
                    self._done[w] = ({}, self._wcounts[w], None, "its pod ended before it was done")
        for w, d in enumerate(self._done):
            if d is None:
                self._done[w] = ({}, self._wcounts[w], None, "still running past the run's bound: the Job is deleted")
        problems = [f"load pod {self.pods[w]} (worker {w}): {d[3]}" for w, d in enumerate(self._done) if d[3]]
        finished = [w for w, d in enumerate(self._done) if d[2] is not None]  # a done line: the pod still answers
        for w in finished:  # every request a pod recorded reached the run (a log lost to rotation would not)
            recorded = sum(int(self._done[w][1].get(k) or 0) for k in ("ok", "failed"))
            if self.forwarded[w] != recorded:
                problems.append(f"load pod {self.pods[w]} (worker {w}) recorded {recorded} requests, "
                                f"{self.forwarded[w]} reached the run through its log")

        def end_clock(w: int, core) -> None:
            try:
                self.clock_end[w] = {"worker": w, "pod": self.pods[w], **self._clock(w, core)}
            except (kube_exec.ExecError, ClusterError):
                self.clock_end[w] = None

        self._each(end_clock, finished)
        self._signal(pw.EXIT_SCRIPT, list(range(self.n)))
        for w, t in enumerate(self._followers):
            t.join(timeout=5)
        self._stop_following()  # nothing is published after the footer: a pod past the bound is cut off here
        self.end([self.per_worker(w, pod=self.pods[w], node=self.nodes[w], **self._timestamps(w))
                  for w in range(self.n)], problems, job=self.job)  # the records whole before the Job goes
        try:
            self._delete_job(wait_s=DELETE_WAIT_S)
        except Exception:  # noqa: BLE001 - a Job left behind is refused by the next run (availproof recover)
            self.job_deleted = False

    def _timestamps(self, w: int) -> dict[str, Any]:
        """What pod ``w``'s instants were corrected by, and how far off they may still be: the start offset's
        uncertainty, or its drift to the end offset plus that one's, whichever is larger."""
        start, end = self.clock_start[w], self.clock_end[w]
        unc = start["uncertainty_ns"]
        if end is not None:
            unc = max(unc, abs(end["wall_offset_ns"] - start["wall_offset_ns"]) + end["uncertainty_ns"])
        return {"wall_correction_ns": self.offsets[w], "timestamp_uncertainty_ns": unc,
                "late_start_ns": self._late_start_ns[w]}

    def _delete_job(self, wait_s: float = 0.0) -> None:
        """Delete the Job, its pods first (Foreground; its ConfigMaps go with it: they are its dependents,
        and are deleted here too, in case the Job was never made their owner); wait ``wait_s`` for it to go."""
        try:
            self.b.batch.delete_namespaced_job(self.job, self.namespace, propagation_policy="Foreground")
        except Exception as e:  # noqa: BLE001 - ApiException; a Job already gone is what we wanted
            if getattr(e, "status", None) != 404:
                raise
        for w in range(self.n):
            try:
                self.b.core.delete_namespaced_config_map(kl.configmap_name(self.job, w), self.namespace)
            except Exception as e:  # noqa: BLE001 - ApiException; gone with the Job is what we wanted
                if getattr(e, "status", None) != 404:
                    raise
        end = time.monotonic() + wait_s
        while True:
            try:
                self.b.batch.read_namespaced_job(self.job, self.namespace)
            except Exception as e:  # noqa: BLE001 - ApiException: 404 is the Job gone
                if getattr(e, "status", None) == 404:
                    self.job_deleted = True
                    return
                raise
            if time.monotonic() >= end:
                self.job_deleted = False
                return
            time.sleep(POLL_S)

    def _abort(self) -> None:
        """After a failed start or supervision: stop following the logs, delete the Job (its pods, its ConfigMaps)."""
        self._stop_following()
        if self.job_uid is not None:
            with contextlib.suppress(Exception):  # the cause is raised; a leftover Job is refused by the next run
                self._delete_job(wait_s=DELETE_WAIT_S)


    def _stop_following(self) -> None:
        """No pod's log is read from here on: the followers end at their next line or retry."""
        self._closing.set()
        for resp in self._responses:
            if resp is not None:
                with contextlib.suppress(Exception):
                    resp.close()
        for t in self._followers:
            t.join(timeout=2)


def _name(obj: dict) -> str:
    return (obj.get("metadata") or {}).get("name", "")


def _state(pod: dict) -> str:
    """A pod's phase and why it is not running yet, in a few words (the scheduler's or the kubelet's)."""
    status = pod.get("status") or {}
    why = [c.get("message") or c.get("reason") for c in status.get("conditions") or []
           if c.get("status") == "False" and (c.get("message") or c.get("reason"))]
    for cs in status.get("container_statuses") or []:
        st = cs.get("state") or {}
        for key in ("waiting", "terminated"):
            if st.get(key):
                why.append(" ".join(str(x) for x in (st[key].get("reason"), st[key].get("exit_code"),
                                                     st[key].get("message")) if x is not None))
    return f"{status.get('phase')}{' (' + '; '.join(w for w in why if w)[:200] + ')' if why else ''}"
