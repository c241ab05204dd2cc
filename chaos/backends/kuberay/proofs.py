"""The proof that a fault is in effect (:meth:`KubeRayBackend.effect_checks`): one look per call, one
function per scope (``scope(backend, fault)``: the backend as ``self``), named in :mod:`.scopes`.

What each scope's proof looks at:

- replica: its process gone from its pod (``/proc/PID``; a zombie counts as gone), or, killed
  with its pod, that pod gone, replaced or restarted;
- node, redis: each pod the kill named gone, replaced (a new uid) or its container restarted;
- zone, region: no Ready Ray pod of this cluster left in the zones, the nodes the loss took
  out all unschedulable, and none Ready there since the loss began (its watch, which keeps
  looking until the heal and writes what it saw into the fault then: :meth:`restore_zones`);
- head: the head pod gone, replaced or restarted, or else its GCS not answering;
- engine: each stopped process in state T (``/proc/PID/stat``), the replica's process alive, not stopped;
- engine-crash: the engine processes gone, the replica's process alive;
- engine-error: each engine's tombstone (its hook raised the error), the replica's process alive;
- engine-wedge: each engine's wedge mark (this run's), each engine alive and not stopped, the replica's
  process alive (one exec per pod);
- engine-garbage, engine-stall: the same with their own mark; a stall's also counts steps since it began
  (at least one: the engine steps on); engine-slow's also its mean step since at least half its factor
  times the one before (the engine's own measure, in its mark);
- engine-stutter: the engine processes sampled over two cycles (one exec), each seen stopped (T) in one
  sample and running in another, the replica's process alive and not stopped;
- partition: the connection opened across the cut before it carries no more bytes and a new
  one is refused or times out (from the Ray pod inside the zone), and per method the cut in
  place (node-filter: the table, with every zone address, in each helper's node;
  networkpolicy: the policy and the labels on the zone's pods);
- upgrade: ``serve_config``: every application's deployed config carries the new version and
  is RUNNING; ``cluster``: the RayService's active cluster is a new one, nothing pending;
- drain: the evicted pod terminating or gone.
"""

from __future__ import annotations

from chaos.backends import engine_faults
from chaos.backends.kuberay.kube import pod_exec as kube_exec, partition as kp
from chaos.backends.kuberay.tombstones import parse_tombstones, tombstones_script
from chaos.backends.kuberay.common import (CORDON_MARK, VERSION_ENV, ZONE_LABEL, check, is_not_found, labels_of,
                                           name_of, node_of, pod_ready, proc_states_script, restarts, select)


def pod_ended(self, name: str, pods: list[dict]) -> tuple[bool, str]:
    """Whether the pod the rig crashed is gone, replaced (new uid) or restarted; and what was seen."""
    was = self.kills.killed.get(name) or {}
    ok, seen = pod_state(name, pods, was)
    if "exec_exit" in was:  # the evidence of the crash itself: its exec's exit status
        seen += f" (the crash's exec exited {was['exec_exit']})"
    return ok, seen

def pod_state(name: str, pods: list[dict], was: dict) -> tuple[bool, str]:
    now = [p for p in pods if name_of(p) == name]
    if not now:
        return True, "gone"
    p = now[0]
    uid = (p.get("metadata") or {}).get("uid")
    if was.get("uid") and uid != was["uid"]:
        return True, "replaced (a new pod of that name)"
    if "restarts" in was and restarts(p) > was["restarts"]:
        return True, f"its container restarted ({was['restarts']} -> {restarts(p)})"
    going = " (terminating)" if (p.get("metadata") or {}).get("deletion_timestamp") else ""
    return False, f"still there{going}, {'ready' if pod_ready(p) else 'not ready'}, {restarts(p)} restart(s)"

def proc_states(self, pod: str, pids: list[int]) -> dict[int, str] | None:
    """State letter of each process in ``pod`` ("gone" for none); None when the pod is gone."""
    try:
        out = self.exec(pod, proc_states_script(pids))
    except kube_exec.ExecError:
        if any(name_of(p) == pod for p in self.pods.pods()):
            raise
        return None
    states = {}
    for line in out.splitlines():
        words = line.split()
        if len(words) == 2 and words[0].isdigit():
            states[int(words[0])] = words[1]
    return states

def by_pod(items: list) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for item in items:
        pod, _, pid = str(item).rpartition("/")
        out.setdefault(pod, []).append(int(pid))
    return out


def pods_crashed(self, fault: dict) -> list[dict]:
    names = fault.get("pids") if isinstance(fault.get("pids"), list) else [fault["target"]]
    pods = self.pods.pods()
    out = []
    for name in names or [fault["target"]]:
        ok, seen = pod_ended(self, str(name), pods)
        out.append(check(f"pod {name} crashed: gone, replaced or restarted", ok, seen))
    return out


def replica(self, fault: dict) -> list[dict]:
    items = list(fault.get("pids") or [])
    if not items:
        return [check("the replica's process gone", False, "the kill named no process")]
    if not any("/" in str(i) for i in items):  # method pod: the pod itself was crashed
        return pods_crashed(self, fault)
    out = []
    for pod, pids in by_pod(items).items():
        states = proc_states(self, pod, pids)
        if states is None:
            out.append(check(f"the replica's process {', '.join(map(str, pids))} gone from pod {pod}", True,
                             "the pod is gone"))
            continue
        left = {p: s for p, s in states.items() if s not in ("gone", "Z", "X")}
        out.append(check(f"the replica's process {', '.join(map(str, pids))} gone from pod {pod}", not left,
                         ", ".join(f"{p} {s}" for p, s in sorted(states.items())) or "no answer"))
    return out


def _replica_pid(fault: dict) -> int | None:
    return int(fault["pid"]) if str(fault.get("pid") or "").isdigit() else None


def engine(self, fault: dict) -> list[dict]:
    """Each stopped engine process in state T, and the replica's own process alive and not stopped."""
    items = list(fault.get("pids") or [])
    if not items:
        return [check("the engine's processes stopped (state T)", False, "the pause named no process")]
    out = []
    replica = _replica_pid(fault)
    for pod, pids in by_pod(items).items():
        states = proc_states(self, pod, pids + ([replica] if replica else []))
        what = f"engine process(es) {', '.join(map(str, pids))} in pod {pod} stopped (state T)"
        if states is None:
            out.append(check(what, False, "the pod is gone"))
            continue
        out.append(check(what, all(states.get(p) in ("T", "t") for p in pids),
                         ", ".join(f"{p} {states.get(p, '?')}" for p in pids)))
        if replica is not None:
            out.append(engine_faults.replica_runs(replica, states.get(replica, "gone")))
    return out


def engine_error(self, fault: dict) -> list[dict]:
    """Each signalled engine's tombstone in its pod (the hook's record that it raised the error: vLLM's engine
    process outlives its error), and the replica's own process still there; one exec per pod."""
    items = list(fault.get("pids") or [])
    if not items:
        return [check("the engine's processes recorded the injected error", False, "the signal named no process")]
    out = []
    replica = _replica_pid(fault)
    for pod, pids in by_pod(items).items():
        try:
            found = parse_tombstones(self.exec(pod, tombstones_script(pids)))
        except kube_exec.ExecError:
            if any(name_of(p) == pod for p in self.pods.pods()):
                raise
            out.append(check(f"engine process(es) {', '.join(map(str, pids))} in pod {pod} recorded the injected "
                             "error", False, "the pod is gone (a pod loss, not the engine's alone)"))
            continue
        out.append(engine_faults.tombstone_checks(pids, found))
        states = proc_states(self, pod, [replica]) if replica else None
        state = (states or {}).get(replica, "gone") if replica else None
        out.append(check(f"the replica's process {replica} alive in pod {pod}", state not in (None, "gone", "Z", "X"),
                         f"state {state}" if replica else "no replica pid recorded"))
    return out


def engine_crash(self, fault: dict) -> list[dict]:
    """The killed engine processes gone from the pod, and the replica's own process still there."""
    items = list(fault.get("pids") or [])
    if not items:
        return [check("the engine's processes gone", False, "the kill named no process")]
    out = []
    for pod, pids in by_pod(items).items():
        replica = _replica_pid(fault)
        states = proc_states(self, pod, pids + ([replica] if replica else []))
        if states is None:
            out.append(check(f"engine process(es) {', '.join(map(str, pids))} gone from pod {pod}", False,
                             "the pod is gone (a pod loss, not the engine's alone)"))
            continue
        left = {p: states.get(p, "gone") for p in pids if states.get(p, "gone") not in ("gone", "Z", "X")}
        out.append(check(f"engine process(es) {', '.join(map(str, pids))} gone from pod {pod}", not left,
                         ", ".join(f"{p} {states.get(p, 'gone')}" for p in pids)))
        alive = replica is not None and states.get(replica, "gone") not in ("gone", "Z", "X")
        out.append(check(f"the replica's process {replica} alive in pod {pod} without its engine", alive,
                         f"state {states.get(replica, 'gone')}" if replica else "no replica pid recorded"))
    return out


def engine_stutter(self, fault: dict) -> list[dict]:
    """Per pod, one exec sampling the engine processes and the replica's over two cycles: each engine seen stopped
    in one sample and running in another, the replica's process alive and not stopped at the last."""
    items = list(fault.get("pids") or [])
    if not items:
        return [check("the engine's processes under a duty cycle", False, "the duty cycle named no process")]
    out = []
    replica = _replica_pid(fault)
    for pod, pids in by_pod(items).items():
        samples = self.engines.duty_samples(pod, pids + ([replica] if replica else []), engine_faults.Throttle.of(fault))
        if samples is None:
            out.append(check(f"engine process(es) {', '.join(map(str, pids))} in pod {pod} under a duty cycle", False,
                             "the pod is gone"))
            continue
        out += engine_faults.duty_cycle_checks(pids, samples)
        out.append(engine_faults.replica_runs(replica, samples[-1].get(replica) if samples and replica else None))
    return out


def zone_loss(self, fault: dict) -> list[dict]:
    zones = list(fault.get("zones") or [])
    nodes = self.pods.nodes()
    pods = select(self.pods.pods(), nodes, cluster=self.cluster, zones=zones)
    ready = [name_of(p) for p in pods if pod_ready(p)]
    lost = self.domains.zone_loss.lost_nodes.get(tuple(sorted(zones)))
    if lost is None:  # not known here (another backend object): the nodes this run cordoned there
        lost = [name_of(n) for n in nodes if labels_of(n).get(ZONE_LABEL) in set(zones)
                and ((n.get("metadata") or {}).get("annotations") or {}).get(CORDON_MARK) == self.run_id]
    by_name = {name_of(n): n for n in nodes}
    open_ = [n for n in lost if not ((by_name.get(n) or {}).get("spec") or {}).get("unschedulable")]
    where = ", ".join(zones)
    out = [check(f"no Ready Ray pod of {self.cluster} left in {where}", not ready,
                 "none" if not ready else f"{len(ready)} Ready: {', '.join(ready[:5])}"),
           check(f"the nodes the loss of {where} took out unschedulable", bool(lost) and not open_,
                 "no node was taken out" if not lost else
                 (f"{len(lost)} unschedulable" if not open_ else f"schedulable: {', '.join(open_)}"))]
    w = self.domains.zone_loss.watch_of(zones)
    if w is not None:  # what the watch saw since the loss began; the fault is this watch's to record at the heal
        self.domains.zone_loss.adopt_fault(w, fault)
        w.look_once()
        out.append(w.check())
    return out


def head(self, fault: dict) -> list[dict]:
    """The head pod gone, replaced or restarted, or its GCS not answering; with the kill exec's exit status."""
    out = _head_state(self)
    was = self.kills.head_at_kill or {}
    evidence = {**(self.kills.killed.get(was.get("name")) or {}), **was}  # gcs: its own exec; node: the crash's
    if "exec_exit" in evidence:
        out[0]["seen"] += f" (the kill's exec exited {evidence['exec_exit']})"
    return out


def _head_state(self) -> list[dict]:
    from chaos.system import sampler

    was = self.kills.head_at_kill or {}
    what = "the head pod gone, replaced or restarted, or its GCS not answering"
    heads = select(self.pods.pods(), [], cluster=self.cluster, node_type="head", terminating=True)
    same = [p for p in heads if name_of(p) == was.get("name")]
    if not same:
        return [check(what, True, f"head pod {was.get('name')} gone")]
    p = same[0]
    if was.get("uid") and (p.get("metadata") or {}).get("uid") != was["uid"]:
        return [check(what, True, f"head pod {was.get('name')} replaced")]
    if restarts(p) > int(was.get("restarts") or 0):
        return [check(what, True, f"its container restarted ({was.get('restarts')} -> {restarts(p)})")]
    answered, _, why = sampler.gcs_health(self.dashboard_url, 1.0)
    return [check(what, not answered, "the pod unchanged; the GCS answers" if answered else
                  f"the GCS does not answer ({why or 'unhealthy'})")]


def partition(self, fault: dict) -> list[dict]:
    zone = fault["target"]
    cut = self.domains.partitions.cuts.get(zone)
    if not cut:
        return [check(f"the cut of {zone} in place", False, "this backend made no cut of it")]
    out = []
    probe = cut.get("probe")
    if not probe:
        out.append(check(f"a connection across the cut of {zone}, opened before it", False, "none is open"))
    else:
        where = f"{probe['inside']} -> {probe['outside']} ({probe['host']}:{probe['port']})"
        try:
            line = (self.exec(probe["inside"], kp.probe_check_script(probe["id"], probe["host"], probe["port"]))
                    .strip().splitlines() or [""])[-1]
        except kube_exec.ExecError as e:
            out.append(check(f"the connection {where} opened before the cut carries no more bytes", False,
                             f"not looked at: {e}"[:200]))
        else:
            (est, est_seen), (new, new_seen) = kp.probe_verdict(line)
            out.append(check(f"the connection {where} opened before the cut carries no more bytes", est, est_seen))
            out.append(check(f"a new connection {where} times out (only silence is a cut)", new, new_seen))
    if cut["method"] == "node-filter":
        helpers = self.domains.partitions.helpers(zone, self.run_id)
        if not helpers:
            out.append(check(f"the nft table of the cut of {zone} on its nodes", False, "no helper pod"))
        for h in helpers:
            try:
                listing = self.exec(name_of(h), kp.CHECK_SCRIPT, container="nft")
            except kube_exec.ExecError as e:
                ok, seen = False, f"not looked at: {e}"[:200]
            else:
                ok, seen = kp.table_holds(listing, cut["ips"])
            out.append(check(f"the nft table on node {node_of(h)} (helper {name_of(h)})", ok, seen))
    else:
        try:
            self.kube.net.read_namespaced_network_policy(kp.policy_name(zone), self.namespace)
            present = True
        except Exception as e:  # noqa: BLE001 - ApiException
            if not is_not_found(e):
                raise
            present = False
        out.append(check(f"NetworkPolicy {kp.policy_name(zone)} in place", present,
                         "present" if present else "absent"))
    return out


def upgrade(self, fault: dict) -> list[dict]:
    from chaos.system import ray_dashboard

    variant, version = fault.get("target"), str(fault.get("version"))
    if variant == "cluster":
        rs = self.pods.get_rayservice()
        status = rs.get("status") or {}
        active = (status.get("activeServiceStatus") or {}).get("rayClusterName")
        pending = (status.get("pendingServiceStatus") or {}).get("rayClusterName")
        ok = bool(active) and active != fault.get("cluster_before") and not pending
        return [check(f"RayService {self.service}: a new RayCluster active, none pending", ok,
                      f"active {active}, pending {pending or 'none'} (before: {fault.get('cluster_before')})")]
    details = ray_dashboard.serve_details(self.dashboard_url, timeout=2.0)
    if details is None:
        return [check(f"every application deployed with {VERSION_ENV}={version} and RUNNING", False,
                      "the dashboard did not answer")]
    apps = (details.get("applications") or {})
    seen = {name: (((a.get("deployed_app_config") or {}).get("runtime_env") or {}).get("env_vars") or {})
            .get(VERSION_ENV) for name, a in apps.items()}
    status = {name: a.get("status") for name, a in apps.items()}
    ok = bool(apps) and all(v == version for v in seen.values()) and all(s == "RUNNING" for s in status.values())
    return [check(f"every application deployed with {VERSION_ENV}={version} and RUNNING", ok,
                  ", ".join(f"{n}: {seen[n]} {status[n]}" for n in sorted(apps)) or "no application")]


def drain(self, fault: dict) -> list[dict]:
    name = fault["target"]
    now = [p for p in self.pods.pods() if name_of(p) == name]
    if not now:
        return [check(f"pod {name} evicted: terminating or gone", True, "gone")]
    going = (now[0].get("metadata") or {}).get("deletion_timestamp")
    return [check(f"pod {name} evicted: terminating or gone", bool(going),
                  "terminating" if going else "still there, not terminating")]
