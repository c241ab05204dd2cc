"""``restart-fails`` on KubeRay (:mod:`chaos.scopes.restart_fails`): the weights file swapped for a truncated copy
in **the zone's worker pods** (each pod holds its own copy; Serve keeps a replacement in its zone: the replicas'
``max_replicas_per_node`` leaves room only on the node its predecessor left), through exec of
``python -m serve_apps.weights_swap`` in each pod's Ray container (one JSON line back; the same code, marks and
checks as on the local backend), and restored the same way, only where it still reads as this run's fault left it.

What it can do faithfully: the **stream target** (its weights file in the pod, ``$AVAILPROOF_HOME`` or ``~``).
What it cannot yet: **vLLM** here loads ``/models/model`` from a volume an init container fills and the Ray
container mounts read-only (:mod:`serve_apps.kuberay`), so no exec in the Ray container can touch it; "the model
source failing" would take the init container's source (``MODEL_SOURCE``) failing for a replacement *pod*, which a
replica restart inside a live pod never re-reads. Refused in one line, before any mark (issue 48: left)."""

from __future__ import annotations

import json
import shlex

from chaos.system import ray_dashboard
from chaos.backends import weights_source
from chaos.backends.kuberay.reads import Pods
from chaos.backends.kuberay.target import Target
from chaos.base.errors import ClusterError, UsageError
from serve_apps import weights_swap

SWAP = "python -m serve_apps.weights_swap"


def swap_script(action: str, path: str, run_id: str, fault_id: str = "") -> str:
    return (f": availproof-restart-fails; {SWAP} {action} {shlex.quote(path)} --run {shlex.quote(run_id)}"
            f" --fault {shlex.quote(fault_id)}")


def restore_any_script(path: str = weights_swap.NODE_DEFAULT) -> str:
    """The exec that puts back any run's swapped weights at ``path`` in a pod (``availproof recover``): only where
    a restart-fails mark is left and the file still reads as its truncated copy (a mark whose file reads as the
    original is cleared)."""
    return f": availproof-restart-fails; {SWAP} restore {shlex.quote(path)} --any-run"


def parse(out: str) -> dict:
    """The swap's one JSON line (the last line that parses)."""
    for line in reversed(out.strip().splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return {"error": f"no answer from {SWAP}: {out.strip()[:200]!r}"}


class Weights:
    """The weights swapped in a zone's pods, and restored: held by the engines part (``backend.engines.weights``)."""

    def __init__(self, target: Target, pods: Pods):
        self.target, self.pods = target, pods

    def weights_of_app(self) -> dict:
        from serve_apps.config import APP_NAME

        details = ray_dashboard.serve_details(self.pods.dashboard_url) or {}
        w = weights_source.of_app((details.get("applications") or {}).get(APP_NAME) or {})
        if w["app"] == "llm":
            raise UsageError("restart-fails on KubeRay: the vLLM app's checkpoint is a read-only volume filled by an "
                             "init container (/models); the rig cannot make it unreadable from the Ray container yet. "
                             "Run it with the stream target (--app stream), or on the local backend")
        return w

    def weights_breaker(self, r):
        """Everything but the swap done: the app's weights file named, each pod of the replica's zone found and its
        file read (one exec each, ``state``); the callable swaps it in each pod (one exec each)."""
        w = self.weights_of_app()
        pods = list(self.pods.nodes_in(zone=r.zone)) if r.zone else [r.node]
        if not pods:
            raise UsageError(f"restart-fails: no worker pod in zone {r.zone}")
        for pod in pods:
            seen = parse(self.pods.exec(pod, swap_script("state", w["path"], self.target.run_id), ok_codes=(0, 1)))
            if seen.get("state") in (None, "absent") or seen.get("mark"):
                raise ClusterError(f"restart-fails: pod {pod}: the weights {seen.get('path') or w['path']} read as "
                                   f"{seen.get('state')}{' with a mark left' if seen.get('mark') else ''}: refused")

        def swap(fault_id: str, fault: dict | None = None) -> dict:
            """Each pod's swap recorded as it is done, into ``fault["weights"]`` when given (set before the first
            exec): a swap that fails part way leaves the pods swapped before it in the fault, for the rollback."""
            done = {"app": w["app"], "path": w["path"], "where": f"zone {r.zone}'s pods", "pods": {}}
            if fault is not None:
                fault["weights"] = done
            for pod in pods:
                try:
                    out = parse(self.pods.exec(pod, swap_script("break", w["path"], self.target.run_id, fault_id),
                                          ok_codes=(0, 1)))
                except Exception as e:  # noqa: BLE001 - the exec failed: whether the pod was swapped is unknown
                    out = {"error": f"{type(e).__name__}: {e}"[:200], "unknown": True}
                done["pods"][pod] = out
                if "error" in out:
                    raise ClusterError(f"restart-fails: pod {pod}: {out['error']} (pods swapped before it: "
                                       f"{[p for p in done['pods'] if p != pod]}; recorded in the fault: the "
                                       "rollback restores them)")
            return done
        return swap

    def restore_weights(self, fault: dict) -> dict:
        """The original put back in each pod the fault swapped, where it still reads as this run's fault left it
        (one exec each); a pod gone took its copy with it."""
        first = fault.get("weights_restored") or {}
        if first.get("restored") is True:  # restored at the outage: the rollback's second call keeps that outcome
            return first
        w = fault.get("weights") or {}
        out = {}
        for pod, swapped in (w.get("pods") or {}).items():
            if "error" in swapped and not swapped.get("unknown"):  # its swap refused: nothing of this run's there
                continue
            try:
                out[pod] = parse(self.pods.exec(pod, swap_script("restore", w["path"], self.target.run_id), ok_codes=(0, 1)))
            except Exception as e:  # noqa: BLE001 - ApiException or ExecError: the pod gone (its copy with it)
                out[pod] = {"restored": False, "state": None, "why": f"{type(e).__name__}: {e}"[:200]}
        restored = [p for p, o in out.items() if o.get("restored")]
        return {"restored": bool(out) and len(restored) == len(out), "pods": out,
                "unreadable_until_restore": bool(out) and all(o.get("unreadable_until_restore") for o in out.values()),
                "why": None if out and len(restored) == len(out) else
                f"restored in {len(restored)} of {len(out)} pod(s)"}

    def checks(self, fault: dict) -> list[dict]:
        """The proof's weights half: the file in each pod reads as the fault's truncated copy (one exec each)."""
        w = fault.get("weights") or {}
        checks = []
        for pod in (w.get("pods") or {}):
            seen = parse(self.pods.exec(pod, swap_script("state", w["path"], self.target.run_id), ok_codes=(0, 1)))
            checks.append({"check": f"the weights in pod {pod} read as the fault's truncated copy",
                           "ok": seen.get("state") == "truncated", "seen": str(seen.get("state"))})
        return checks or [{"check": "the weights swapped", "ok": False, "seen": "no pod recorded"}]


def plan(self, scope: str, a: dict) -> list[dict]:
    w = self.engines.weights.weights_of_app()
    r = self.pick_replica(zone=a.get("zone"))
    rows = [{"kind": "file", "name": w["path"], "where": f"pod {p} (zone {r.zone})",
             "does": "swapped for a truncated copy of itself (the original copied aside, a mark naming the run)",
             "after": "the original put back once a replacement's start failed hold_until_failed_starts times "
                      "and outage_s passed, at most max_outage_s after the injection (outage_s null: at the rollback)"}
            for p in self.nodes_in(zone=r.zone)]
    return rows + [{"kind": "process", "name": f"{r.node}/{r.pid}", "where": f"pod {r.node}",
                    "does": f"SIGKILL of replica {r.replica_id}'s worker process",
                    "after": "Serve's replacement fails to start until the weights are back"}]


def effect(self, fault: dict) -> list[dict]:
    from chaos.backends.kuberay import proofs

    return self.engines.weights.checks(fault) + proofs.replica(self, fault)



def weights_paths(backend) -> list[str]:
    """The weights files a restart-fails fault may have swapped in the pods: the stream target's default file, and
    the deployed app's own when it names one (nothing deployed, or vLLM's read-only volume: the default alone)."""
    from serve_apps.config import APP_NAME

    try:
        details = ray_dashboard.serve_details(backend.dashboard_url) or {}
        w = weights_source.of_app((details.get("applications") or {}).get(APP_NAME) or {})
    except UsageError:
        return [weights_swap.NODE_DEFAULT]
    return list(dict.fromkeys([weights_swap.NODE_DEFAULT] + ([w["path"]] if w["app"] == "stream" else [])))


def leftover_pods(backend) -> list[dict]:
    """Every worker pod whose weights file has a restart-fails mark left (any run's): ``{"pod", "path", "state",
    "run_id", "fault_id"}`` each (one exec per pod and file; a pod that cannot be asked is skipped)."""
    out = []
    for pod in backend.nodes_in():
        for path in weights_paths(backend):
            try:
                seen = parse(backend.exec(pod, swap_script("state", path, ""), ok_codes=(0, 1)))
            except Exception:  # noqa: BLE001 - ApiException or ExecError: the pod gone (its copy with it)
                continue
            mark = seen.get("mark")
            if mark:
                out.append({"pod": pod, "path": seen.get("path") or path, "state": seen.get("state"),
                            "run_id": mark.get("run_id"), "fault_id": mark.get("fault_id")})
    return out


def recover_pods(backend) -> list[dict]:
    """``availproof recover`` on KubeRay: any run's swapped weights put back in every worker pod where a mark is
    left and the file still reads as the rig's truncated copy (:func:`restore_any_script`); what was done in each
    pod that had a mark (``{"pod", "path", "restored", "state", "why"}``), [] when none had."""
    out = []
    for left in leftover_pods(backend):
        try:
            done = parse(backend.exec(left["pod"], restore_any_script(left["path"]), ok_codes=(0, 1)))
        except Exception as e:  # noqa: BLE001 - ApiException or ExecError: the pod gone (its copy with it)
            done = {"restored": False, "state": None, "why": f"{type(e).__name__}: {e}"[:200]}
        out.append({"pod": left["pod"], "path": left["path"], **done})
    return out


def leftover_rows(backend) -> list[dict]:
    """:func:`leftover_pods` as rows of the backend's leftovers (kind ``Weights``, one per pod and file: a preparation
    refuses while one is there, ``availproof recover`` puts them back with :func:`undo_pod`)."""
    return [{"kind": "Weights", "name": f"{x['pod']}:{x['path']}", "namespace": backend.namespace,
             "run_id": x["run_id"], "zone": None, "expires": None, "pod": x["pod"], "path": x["path"],
             "what": f"restart-fails' weights {x['path']} swapped by fault {x['fault_id']} (reads {x['state']})"}
            for x in leftover_pods(backend)]


def undo_pod(backend, pod: str) -> list[dict]:
    """Any run's swapped weights put back in ``pod`` (:func:`restore_any_script`, each file with a mark there,
    :func:`leftover_pods`: restored only while it reads as the rig's truncated copy; a mark over the original with
    its aside intact only cleared); raises when a marked file was left as it is (someone else changed it: a human
    must look), so that ``recover`` reports it."""
    out, left = [], []
    for path in dict.fromkeys(x["path"] for x in leftover_pods(backend) if x["pod"] == pod):
        done = parse(backend.exec(pod, restore_any_script(path), ok_codes=(0, 1)))
        out.append({"path": path, **done})
        unmarked = str(done.get("why") or "").startswith("no restart-fails mark")
        if not (unmarked or done.get("restored") or done.get("cleared")):
            left.append(f"{path}: {done.get('why') or done.get('state')}")
    if left:
        raise ClusterError(f"pod {pod}: restart-fails' weights left as they are ({'; '.join(left)})")
    return out
