"""``engine-wedge`` on KubeRay (:mod:`chaos.scopes.engine_wedge`): a replica's engine children, each checked to take
SIGUSR1 (the app's fault hook, as for ``engine-error``), given the request to wedge (:func:`chaos.backends.
engine_faults.wedge_request`, written into the pod's /tmp by the same exec that signals them), then SIGUSR1; the
proof reads each engine's wedge mark and state in its pod (one exec); the run's end removes a mark only while it
still names this run (one exec per pod, the test and the removal in the same shell). A pod gone took its wedged
engine with it: nothing is left to release.

``engine-garbage``, ``engine-stall`` and ``engine-slow`` (:mod:`chaos.scopes.engine_garbage`,
:mod:`chaos.scopes.engine_stall`, :mod:`chaos.scopes.engine_slow`; slow's request with its factor) go the same way
with a request naming the fault (:func:`chaos.backends.engine_faults.held_request`) and their own mark
(``/tmp/availproof-engine-<fault>-<pid>``): the same scripts, the fault named."""

from __future__ import annotations

import shlex

from chaos.backends import engine_faults
from chaos.backends.kuberay.kube import pod_exec as kube_exec
from chaos.backends.kuberay import plan
from chaos.backends.kuberay.common import name_of, proc_states_script
from chaos.backends.kuberay.reads import Pods
from chaos.backends.kuberay.target import Target
from chaos.base.errors import ClusterError
from serve_apps.engine_faults import WEDGE, mark_path, request_path


MARK = mark_path(WEDGE, 0).removesuffix("0")  # + pid


def wedge_script(pids: list[int], request: str, fault: str = WEDGE) -> str:
    """Stale marks of ``fault`` removed, each engine's request written, then SIGUSR1 to them, their pids printed."""
    ps = [int(p) for p in pids]
    writes = "; ".join(f"printf %s {shlex.quote(request)} > {request_path(p)}" for p in ps)
    return (f": availproof-engine-{fault}; rm -f {' '.join(mark_path(fault, p) for p in ps)}; {writes}; "
            f"kill -USR1 {' '.join(map(str, ps))} && echo {' '.join(map(str, ps))}")


def marks_script(pids: list[int], fault: str = WEDGE) -> str:
    """``mark PID TEXT`` per engine (its mark of ``fault``, empty when none), then the processes' states."""
    ps = " ".join(str(int(p)) for p in pids)
    mark = mark_path(fault, 0).removesuffix("0")
    return (f": availproof-engine-{fault} proof; for p in {ps}; do echo \"mark $p $(head -c 300 {mark}$p 2>/dev/null "
            f"| head -n 1)\"; done; {proc_states_script([int(p) for p in pids])}")


def parse_marks(out: str) -> dict[int, str | None]:
    found: dict[int, str | None] = {}
    for line in out.splitlines():
        words = line.split(maxsplit=2)
        if len(words) >= 2 and words[0] == "mark" and words[1].isdigit():
            found[int(words[1])] = words[2] if len(words) == 3 else None
    return found


def parse_states(out: str) -> dict[int, str]:
    return {int(w[0]): w[1] for w in (line.split() for line in out.splitlines()) if len(w) == 2 and w[0].isdigit()}


def release_script(pids: list[int], run_id: str, fault: str = WEDGE) -> str:
    """Each engine's mark of ``fault`` removed only while it names ``run_id`` (a JSON field; the test and the
    removal in one shell), and a request it never took made void (its next step does nothing); ``released PID`` /
    ``kept PID`` / ``none PID`` per engine."""
    needle = shlex.quote(f'"run": "{run_id}"')
    void = engine_faults.void_request(run_id).strip()
    return "; ".join(
        f"if grep -qF {needle} {mark_path(fault, p)} 2>/dev/null; then rm -f {mark_path(fault, p)}; echo released {p}; "
        f"elif [ -e {mark_path(fault, p)} ]; then echo kept {p}; else echo none {p}; fi; "
        f"grep -qF {needle} {request_path(p)} 2>/dev/null && printf %s {shlex.quote(void)} > {request_path(p)}"
        for p in (int(x) for x in pids)) + "; true"


def by_pod(items) -> dict[str, list[int]]:
    """``pod/pid`` items grouped: pod -> its pids."""
    out: dict[str, list[int]] = {}
    for item in items:
        pod, _, pid = str(item).rpartition("/")
        out.setdefault(pod, []).append(int(pid))
    return out


class Wedges:
    """The wedge (garbage, stall, slow) of a replica's engine, and its release: held by the engines part
    (``backend.engines.wedges``), which finds its engines."""

    # engines: the engines part (chaos.backends.kuberay.engines.Engines), which builds this one (engines.wedges)
    def __init__(self, target: Target, pods: Pods, engines):
        self.target, self.pods, self.engines = target, pods, engines

    def wedge_engine(self, r, spin: bool = False):
        """Everything but the signal done: the engine children found in the replica's pod and their signal masks
        read (one exec; each must take SIGUSR1, else refused, nothing sent). The returned callable leaves the
        requests and sends the signal (one exec)."""
        return self.arm_engine(r, WEDGE, engine_faults.wedge_request(self.target.run_id, spin), "wedge")

    def garble_engine(self, r):
        """As :meth:`wedge_engine`, the request to produce garbage for this run."""
        return self.arm_engine(r, "garbage", engine_faults.held_request("garbage", self.target.run_id), "hold garbage")

    def stall_engine(self, r):
        """As :meth:`wedge_engine`, the request to admit nothing new for this run."""
        return self.arm_engine(r, "stall", engine_faults.held_request("stall", self.target.run_id), "hold stall")

    def slow_engine(self, r, factor: float, hold_s: float | None = None):
        """As :meth:`wedge_engine`, the request to slow every step ``factor`` times for this run (the engine letting
        go by itself past ``hold_s``)."""
        return self.arm_engine(r, "slow", engine_faults.held_request("slow", self.target.run_id, factor, hold_s), "hold slow")

    def arm_engine(self, r, fault: str, request: str, what: str):
        """The engines checked (one exec); the returned callable leaves ``request`` and signals (one exec)."""
        masks = self.engines.hooked_engines(r, what, what)
        request = request.strip()

        def fire() -> list[str]:
            out = self.pods.exec(r.node, wedge_script(masks, request, fault))
            pids = [f"{r.node}/{x}" for x in out.split() if x.isdigit()]
            if not pids:
                raise ClusterError(f"replica {r.replica_id} in pod {r.node}: no engine took the signal")
            return pids

        return fire

    def release_engine(self, pids: list[str], fault: str = WEDGE) -> list[dict]:
        """The wedges (or held ``fault``) of ``pids`` ("pod/pid") still marked with this run released, per pod (one
        exec); a pod gone took its engine with it."""
        out = []
        for pod, ps in by_pod(pids).items():
            try:
                said = self.pods.exec(pod, release_script(ps, self.target.run_id, fault))
            except kube_exec.ExecError:
                if any(name_of(p) == pod for p in self.pods.pods()):
                    raise
                out += [{"pid": f"{pod}/{p}", "released": False, "engine": "gone", "found": "the pod is gone"}
                        for p in ps]
                continue
            words = dict((w[1], w[0]) for w in (line.split() for line in said.splitlines()) if len(w) == 2)
            out += [{"pid": f"{pod}/{p}", "released": words.get(str(p)) == "released", "engine": "in its pod",
                     "found": {"released": f"{engine_faults.HELD_WORDS[fault]} (this run's mark)",
                               "kept": "another run's mark"}.get(words.get(str(p)), f"no {fault} mark")} for p in ps]
        return out

    def proof(self, fault: dict) -> list[dict]:
        """One look at a wedge (or a held fault: garbage, stall): each engine's mark (this run's) and its state, and
        the replica's process alive (one exec per pod)."""
        kind = engine_faults.marked_fault(fault.get("scope"))
        items = list(fault.get("pids") or [])
        if not items:
            return [{"check": f"the engine's processes hold {kind}", "ok": False,
                     "seen": "the signal named no process"}]
        replica = int(fault["pid"]) if str(fault.get("pid") or "").isdigit() else None
        out = []
        for pod, ps in by_pod(items).items():
            try:
                said = self.pods.exec(pod, marks_script(ps + ([replica] if replica else []), kind))
            except kube_exec.ExecError:
                if any(name_of(p) == pod for p in self.pods.pods()):
                    raise
                out.append({"check": f"engine process(es) {', '.join(map(str, ps))} in pod {pod} hold {kind}", "ok": False,
                            "seen": "the pod is gone (a pod loss, not the engine's alone)"})
                continue
            states = parse_states(said)
            marks = parse_marks(said)
            out += (engine_faults.wedge_checks(ps, marks, states, self.target.run_id) if kind == WEDGE else
                    engine_faults.held_checks(kind, ps, marks, states, self.target.run_id))
            if replica is not None:
                out.append(engine_faults.replica_runs(replica, states.get(replica, "gone")))
        return out


def plan_rows(self, scope: str, a: dict) -> list[dict]:
    """The replica's pod and its engine children, as :meth:`Wedges.wedge_engine` finds them (no exec)."""
    r = self.pick_replica(zone=a.get("zone"))
    pods = [p for p in self.pods.ray(terminating=True) if name_of(p) == r.node]
    if not pods:
        raise ClusterError(f"replica {r.replica_id}: its pod {r.node} is not one of this cluster's")
    kind = engine_faults.marked_fault(scope)
    how = {"garbage": "its tokens wrong from its next step on, at full speed",
           "slow": f"every step {a.get('factor', 4.0):g} times as long from its next step on, evenly",
           "stall": "it admits no new request from its next step on, its running ones go on"}.get(
        kind, f"the engine's step stays {'spinning at 100 % of a core' if a.get('spin') else 'blocked'}")
    return [plan.pod_row(self, pods[0], f"exec `pgrep -P {r.pid} -f EngineCore` and their signal masks (each must take "
                                   f"SIGUSR1, else refused), the request ({kind}) written into /tmp, then `kill -USR1`: "
                                   f"{how}, the pod and the replica's process live on",
                          f"the rig removes the slow mark after {a.get('duration_s', 20.0):g} s if still this run's; the "
                          f"engine lets go by itself after "
                          f"{engine_faults.slow_hold_s(a.get('duration_s', 20.0)):g} s (the rig died)"
                          if kind == "slow" else
                          f"nothing but a detector ends it; the run's end removes the {kind} mark if still this run's")]


def proof(self, fault: dict) -> list[dict]:
    return self.engines.wedges.proof(fault)
