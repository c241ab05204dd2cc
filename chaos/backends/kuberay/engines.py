"""Engines inside their pods: a replica's engine processes (its children whose command line says
``EngineCore``: vLLM's ``VLLM::EngineCore``, the stream target's ``availproof::EngineCore``), hung (SIGSTOP),
crashed (SIGKILL), made to fail from inside (SIGUSR1 to the app's fault hook) and throttled (a duty cycle),
always through exec with its exit status checked, and the replica's own process never signalled.

The straggler's duty cycle is a shell loop started in the background by one exec in the replica's pod
(:func:`slow_script`): ``kill -STOP``, a sleep, ``kill -CONT``, a sleep, for a counted number of cycles that
covers the fault's duration and a margin, with a trap that continues the engine whenever the loop ends; its
command line carries its id (``availproof-throttle-<id>``) so the heal finds it (:func:`unthrottle_script`:
the loop killed, then the engine continued) and so does ``recover`` after a crashed run: the engine's pids
and the loop's id are recorded on the pod (:data:`kube_marks.PAUSED_MARK <chaos.backends.kuberay.kube.marks.PAUSED_MARK>`).
"""

from __future__ import annotations

import re
import secrets
import shlex

from chaos.backends import engine_faults
from chaos.backends.kuberay.kube import pod_exec as kube_exec, marks as km
from chaos.backends.engine_faults import ENGINE, Throttle
from chaos.backends.kuberay.common import is_not_found, name_of, parse_masks, proc_states_script
from chaos.backends.kuberay.device import Devices
from chaos.backends.kuberay.kube.client import KubeClient
from chaos.backends.kuberay.orphans import children_script, left_script, parse_left
from chaos.backends.kuberay.ranks import Ranks
from chaos.backends.kuberay.reads import Pods
from chaos.backends.kuberay.target import Target
from chaos.backends.kuberay.tombstones import parse_tombstones, tombstones_script  # noqa: F401 (the engine-error proof's)
from chaos.backends.kuberay.wedge import Wedges
from chaos.backends.kuberay.weights import Weights
from chaos.base.errors import ClusterError
from serve_apps.engine_faults import request_path, tombstone_path

THROTTLE = "availproof-throttle-"  # in the command line of a duty cycle's loop, before its id
SAMPLE = ": availproof-engine-stutter sample; "  # the look at a duty cycle


def engines(pid: int) -> str:
    """Shell: ``$p``, the replica's engine children, on one line (empty: none)."""
    return f"p=$(echo $(pgrep -P {int(pid)} -f {ENGINE}))"


def pause_script(pid: int) -> str:
    """SIGSTOP of the replica's engine children, their pids printed; nothing printed when there is none."""
    return f"{engines(pid)}; [ -z \"$p\" ] || {{ kill -STOP $p && echo $p; }}"


def masks_script(pid: int) -> str:
    """Each engine child's pid and signal masks on a line (``57 SigBlk:... SigIgn:... SigCgt:...``)."""
    return (f": availproof-engine-error look; for p in $(pgrep -P {int(pid)} -f {ENGINE}); do "
            "echo \"$p $(grep -E '^Sig(Blk|Ign|Cgt):' /proc/$p/status | tr -d ' \\t' | tr '\\n' ' ')\"; done")


def error_script(pids: list[int]) -> str:
    """A stale tombstone of each engine removed (a reused pid's), and any fault request left for it (a void one from
    recover: the signal would arm it instead of the error), then SIGUSR1 to them, their pids printed."""
    ps = " ".join(str(int(p)) for p in pids)
    stale = " ".join(f"{tombstone_path(int(p))} {request_path(int(p))}" for p in pids)
    return f"rm -f {stale}; kill -USR1 {ps} && echo {ps}"


def loop_script(t: Throttle) -> str:
    """The duty cycle, run by ``sh -c LOOP availproof-throttle-<id> PIDS``: the engine continued whenever it ends
    (its cycles done, a TERM, an engine gone)."""
    return ('p="$1"; trap "kill -CONT $p 2>/dev/null" EXIT; trap "exit 0" TERM INT; i=0; '
            f"while [ $i -lt {t.cycles} ]; do kill -STOP $p 2>/dev/null || exit 0; sleep {t.stop_s:.3f}; "
            f"kill -CONT $p 2>/dev/null || exit 0; sleep {t.run_s:.3f}; i=$((i+1)); done")


def slow_script(pid: int, t: Throttle, tid: str) -> str:
    """One exec: the engine children found (none: nothing printed), the loop started in the background (its
    output away from the exec's streams, so the exec returns at once), the engines' pids printed."""
    return (f": availproof-engine-stutter {tid}; {engines(pid)}; [ -n \"$p\" ] || exit 0; "
            f"nohup sh -c {shlex.quote(loop_script(t))} {THROTTLE}{tid} \"$p\" </dev/null >/dev/null 2>&1 & echo $p")


def unthrottle_script(tid: str) -> str:
    """The loop of ``tid`` killed (SIGKILL: it stops nothing again), waited for (at most 2.5 s); a prefix of the
    engine's SIGCONT. ``[a]`` keeps the pattern from matching the shell running it."""
    pattern = shlex.quote(f"[a]{THROTTLE[1:]}{tid}")
    return (f"pkill -KILL -f {pattern}; n=0; while pgrep -f {pattern} >/dev/null && [ $n -lt 50 ]; do sleep 0.05; "
            "n=$((n+1)); done; ")


def sample_script(pids: list[int], n: int, interval: float) -> str:
    """``n`` samples of the processes' states, ``interval`` apart: ``sample I`` then ``PID STATE`` per process."""
    return (f"{SAMPLE}i=0; while [ $i -lt {int(n)} ]; do echo \"sample $i\"; {proc_states_script(pids)}; "
            f"i=$((i+1)); [ $i -lt {int(n)} ] && sleep {interval:.3f}; done; true")


def parse_samples(out: str) -> list[dict[int, str]]:
    samples: list[dict[int, str]] = []
    for line in out.splitlines():
        words = line.split()
        if words[:1] == ["sample"]:
            samples.append({})
        elif len(words) == 2 and words[0].isdigit() and samples:
            samples[-1][int(words[0])] = words[1]
    return samples


class Engines:
    """The engine faults' part: hang, crash, error and slow-down of a replica's engine; its resume; the orphan check's
    looks (:mod:`.orphans`). A part the backend holds (``backend.engines``): the engines this run stopped (``paused``,
    "pod/pid") and its duty cycles per pod (``throttles``); and the engine faults it serves, parts of its own: the
    held ones, wedge, garbage, stall, slow (``wedges``, :mod:`.wedge`, the engines found through this part), and
    restart-fails' swapped weights (``weights``, :mod:`.weights`), device-loss's markers (``devices``, :mod:`.device`)."""

    def __init__(self, kube: KubeClient, target: Target, pods: Pods, accelerators=None):
        self.kube, self.target, self.pods = kube, target, pods
        self.wedges = Wedges(target, pods, self)
        self.ranks = Ranks(target, pods)  # rank-hang, rank-death: a rank group's rank processes (.ranks)
        self.weights = Weights(target, pods)
        # device-loss's marker in the pods, the remedy's cordon; the device plugin paused beside it (``accelerators``:
        # the backend's part, :class:`~chaos.backends.kuberay.accelerators.Accelerators`)
        self.devices = Devices(kube, target, pods, self, accelerators)
        self.paused: list[str] = []  # "pod/pid" of engines we stopped (or throttle)
        self.throttles: dict[str, list[str]] = {}  # pod -> the ids of the duty cycles running there (engine-stutter)

    def _engine_items(self, r, out: str, what: str) -> list[str]:
        pids = [f"{r.node}/{x}" for x in out.split() if x.isdigit()]
        if not pids:
            raise ClusterError(f"replica {r.replica_id} (pid {r.pid}) in pod {r.node}: no engine child process {what}")
        return pids

    def pause_engine(self, r) -> list[str]:
        """SIGSTOP the replica's engine children (vLLM's EngineCore; the stream target's engine child) inside its
        pod, and nothing else: the replica's process runs on. Refused when the replica has no engine child."""
        pids = self._engine_items(r, self.pods.exec(r.node, pause_script(int(r.pid))), "to stop")
        self.paused += pids
        self._mark_paused(r.node)
        return pids

    def _mark_paused(self, pod: str) -> None:
        """Record on ``pod`` the processes this run stopped there and its duty cycles' ids
        (:data:`kube_marks.PAUSED_MARK <chaos.backends.kuberay.kube.marks.PAUSED_MARK>`), so that a crashed run's
        ``recover`` can end the cycles and SIGCONT the processes; none left: the mark dropped."""
        pids = sorted(int(x.rsplit("/", 1)[1]) for x in self.paused if x.rsplit("/", 1)[0] == pod)
        cycles = list(self.throttles.get(pod) or [])
        value = (km.record(self.target.run_id, self.target.helper_deadline_s, pids=pids, **({"throttles": cycles} if cycles else {}))
                 if pids or cycles else None)
        try:
            self.kube.core.patch_namespaced_pod(pod, self.target.namespace, {"metadata": {"annotations": {km.PAUSED_MARK: value}}})
        except Exception as e:  # noqa: BLE001 - ApiException; a pod gone has nothing left stopped
            if not is_not_found(e):
                raise

    def crash_engine(self, r) -> list[str]:
        """``kill -9`` the replica's engine children (vLLM's EngineCore; the stream target's engine
        child) inside its pod, and nothing else: the replica's process lives on. Refused when the
        replica has no engine child."""
        pid = int(r.pid)
        out = self.pods.exec(r.node, f"p=$(pgrep -P {pid} -f EngineCore); [ -z \"$p\" ] || {{ kill -9 $p && echo $p; }}")
        return self._engine_items(r, out, "to crash")

    def hooked_engines(self, r, what: str, to: str) -> list[int]:
        """The replica's engine children in its pod, their signal masks read (one exec): each must take SIGUSR1
        (the app's fault hook), else refused in one line (it would not ``what``), nothing sent; none: refused
        ("no engine child process to ``to``")."""
        masks = parse_masks(self.pods.exec(r.node, masks_script(int(r.pid))))
        if not masks:
            raise ClusterError(f"replica {r.replica_id} (pid {r.pid}) in pod {r.node}: no engine child process to "
                               f"{to}")
        for p, status in sorted(masks.items()):
            takes, seen = engine_faults.handles(status)
            if not takes:
                raise ClusterError(f"replica {r.replica_id}: its engine process {p} in pod {r.node} would not {what} "
                                   f"from inside on SIGUSR1 ({seen}): the app's engine-fault hook is off "
                                   "(AVAILPROOF_ENGINE_FAULTS=1 in the engine's environment); nothing sent")
        return sorted(masks)

    def error_engine(self, r):
        """Everything but the signal done (:meth:`hooked_engines`). The returned callable sends it (a second exec:
        ``kill -USR1``)."""
        masks = self.hooked_engines(r, "fail", "make fail")

        def fire() -> list[str]:
            return self._engine_items(r, self.pods.exec(r.node, error_script(sorted(masks))), "took the signal")

        return fire

    def stutter_engine(self, r, factor: float, period_s: float, duration_s: float) -> list[str]:
        """A duty cycle of the replica's engine children, a shell loop in its pod started by one exec
        (:func:`slow_script`); recorded on the pod for ``recover``. Refused when the replica has no engine child."""
        t = Throttle(factor, period_s, duration_s)
        tid = re.sub(r"[^A-Za-z0-9-]", "", f"{self.target.run_id}-{secrets.token_hex(3)}")
        pids = self._engine_items(r, self.pods.exec(r.node, slow_script(int(r.pid), t, tid)), "to slow down")
        self.paused += pids
        self.throttles.setdefault(r.node, []).append(tid)
        self._mark_paused(r.node)
        return pids

    def duty_samples(self, pod: str, pids: list[int], t: Throttle) -> list[dict[int, str]] | None:
        """One look at a duty cycle in ``pod``: the states of ``pids`` sampled over two cycles (one exec); None
        when the pod is gone."""
        n, interval = engine_faults.sampling(t)
        try:
            out = self.pods.exec(pod, sample_script(pids, n, interval))
        except kube_exec.ExecError:
            if any(name_of(p) == pod for p in self.pods.pods()):
                raise
            return None
        return parse_samples(out)

    def resume_engine(self, pids: list[str]) -> list[str]:
        """SIGCONT each stopped process that is still there, the duty cycles in its pod ended first: Serve may have
        replaced a stopped replica (its health check failed) in a live pod, and a process gone is nothing left
        stopped."""
        done = []
        for item in pids:
            pod, pid = item.rsplit("/", 1)
            stop = "".join(unthrottle_script(t) for t in self.throttles.get(pod) or [])
            try:
                self.pods.exec(pod, f"{stop}if kill -0 {int(pid)} 2>/dev/null; then kill -CONT {int(pid)}; "
                               "else echo gone; fi")
            except kube_exec.ExecError:
                if any(name_of(p) == pod for p in self.pods.ray()):
                    raise
                # the pod is gone (deleted, replaced): nothing is left stopped
            self.throttles.pop(pod, None)
            done.append(item)
            if item in self.paused:
                self.paused.remove(item)
        for pod in sorted({item.rsplit("/", 1)[0] for item in done}):
            self._mark_paused(pod)
        return done

    def engine_children(self, r) -> list[int]:
        """The replica's engine children (their command line says ``EngineCore``) in its pod, by one exec: what
        a replica kill must take with it. [] when it has none (a replica of another deployment)."""
        out = self.pods.exec(r.node, children_script(int(r.pid)))
        return [int(x) for x in out.split() if x.isdigit()]

    def processes_left(self, node: str | None, pids: list[int]) -> dict[int, float | None]:
        """One look in pod ``node`` (one exec): those of ``pids`` still alive there (a zombie is gone), each with its
        resident memory in MB. The pod gone (deleted, replaced): every one of them gone, {}."""
        if not pids:
            return {}
        try:
            # from the watch's thread, beside the run's own execs: over an ApiClient of its own (stream() patches
            # the one it is given: chaos.backends.kuberay.kube.pod_exec)
            return parse_left(self.pods.exec(str(node), left_script(pids), core=kube_exec.own_core(self.kube.exec_core)))
        except kube_exec.ExecError:
            if any(name_of(p) == node for p in self.pods.pods()):
                raise
            return {}
