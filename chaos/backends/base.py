"""The one interface every fault, probe, action and the CLI go through; both backends implement it.

Faults (:mod:`chaos.scopes.faults`) are written once against this protocol; a backend never decides
*what* to break, only *how* to break it in its world (processes and network namespaces on the
local backend, pods and nodes on KubeRay). ``tests/unit/test_backend_interface.py`` checks that
:class:`~chaos.backends.local.backend.LocalBackend` and
:class:`~chaos.backends.kuberay.KubeRayBackend` have every method with a compatible signature.

What the lists returned by the kill methods hold is the backend's: PIDs on the local backend,
pod names (or ``pod/pid``) on KubeRay. Faults record them, or their number, in the fault's detail.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Callable, Mapping, Protocol, runtime_checkable

from chaos.base.errors import UsageError

if TYPE_CHECKING:
    from chaos.core.experiment import Settings

# What a backend can do beyond the faults' methods (its ``capabilities``, checked when a run opens:
# chaos.core.provision.check_capabilities). A scope is "scope:<name>".
FRONT_DOOR = "front_door"  # the rig's own balancer in front of the Serve proxies (front lb, zonal-lb)
NO_GCS_FT = "cluster_without_gcs_ft"  # a cluster without GCS fault tolerance (the contrast case)
LOAD_TO_HEAD = "load_to_head"  # the load sent to the head's proxy (targets head or all)
CAPABILITY_TEXT = {
    FRONT_DOOR: "no front door of the rig's (front lb / zonal-lb): on KubeRay the client's front door is the "
                "serve Service; run with --front direct",
    NO_GCS_FT: "no cluster without GCS fault tolerance (the KubeRay manifests always set "
               "gcsFaultToleranceOptions): run it on the local backend",
    LOAD_TO_HEAD: "the load goes to the serve Service (targets: workers), not to the head",
    # a scope only a cluster with accelerators can run (chaos.scopes.accelerator): the local backend has none
    "scope:accelerator": "no accelerator to lose (an accelerator loss takes a node's nvidia.com/gpu from "
                         "Kubernetes: its device plugin's pod and allocatable): run it on KubeRay's GPU overlay "
                         "(--backend kuberay)",
}


def scope_capability(scope: str) -> str:
    return f"scope:{scope}"


@dataclass(frozen=True)
class Implementation:
    """How one backend does one scope (:mod:`chaos.scopes`), besides the :class:`Backend` methods its fault
    calls: ``plan(backend, scope, arguments)``, every object a fault of it would touch now (rows
    ``{"kind", "name", "where", "does", "after"}``; reads only), and ``effect(backend, fault)``, one look at
    whether the fault is in effect (``{"check", "ok", "seen"}`` per check; :func:`chaos.scopes.faults.prove`).
    ``effect`` None: the scope proves itself (an upgrade, at its end). ``heal(backend, fault)``: what
    healing the fault restores, in the backend's own terms (its ``heal(faults)`` joins them:
    :meth:`ByScope.restores`); None: nothing (Serve replaces what it took). ``reach(backend, planned)``:
    what a planned fault of it (:func:`chaos.core.plan.faults_of`: its scope and arguments) reaches, that the
    backend's ``prepare`` checks before any fault (:meth:`ByScope.reaches`); None: nothing to check."""

    scope: str
    plan: Callable[[Any, str, dict], list[dict]]
    effect: Callable[[Any, dict], list[dict]] | None = None
    heal: Callable[[Any, dict], Any] | None = None
    reach: Callable[[Any, dict], Any] | None = None


def implementations(*impls: Implementation) -> Mapping[str, Implementation]:
    """A backend's scopes: its implementations by scope name (one each), read-only."""
    out: dict[str, Implementation] = {}
    for i in impls:
        if i.scope in out:
            raise ValueError(f"scope {i.scope} implemented twice")
        out[i.scope] = i
    return MappingProxyType(out)


class Joinable:
    """A dataclass of sets, lists and flags, one per fault (what healing it restores, what it reaches before it
    is injected): two add up field by field (sets joined, lists in order, flags or'ed)."""

    def __add__(self, other):
        def join(a, b):
            return (a or b) if isinstance(a, bool) else (a | b) if isinstance(a, set) else a + b

        return type(self)(**{f.name: join(getattr(self, f.name), getattr(other, f.name)) for f in fields(self)})


class ByScope:
    """``plan`` and ``effect_checks`` of a backend: the implementation it registered for the scope
    (``implementations``); a backend's scopes are the ones it registered (:func:`capabilities_of`)."""

    name: str
    implementations: Mapping[str, Implementation] = MappingProxyType({})

    def plan(self, scope: str, arguments: dict | None = None) -> list[dict]:
        impl = self.implementations.get(scope)
        if impl is None:
            raise UsageError(f"scope {scope}: the {self.name} backend has no fault of it")
        return impl.plan(self, scope, dict(arguments or {}))

    def effect_checks(self, fault: dict) -> list[dict]:
        impl = self.implementations.get(fault.get("scope"))
        if impl is None or impl.effect is None:
            return [{"check": f"an effect check for scope {fault.get('scope')}", "ok": False,
                     "seen": f"the {self.name} backend has none"}]
        return impl.effect(self, fault)

    def _each(self, part: str, faults: list[dict]) -> list:
        """Each fault's ``part`` of its scope's implementation, in their order; a fault of a scope this backend
        did not register, or whose implementation has no such part, gives nothing."""
        out = []
        for f in faults:
            impl = self.implementations.get(f.get("scope"))
            if impl is not None and getattr(impl, part) is not None:
                out.append(getattr(impl, part)(self, f))
        return out

    def restores(self, faults: list[dict]) -> list:
        """What healing each of ``faults`` restores (its scope's ``heal``), in their order."""
        return self._each("heal", faults)

    def reaches(self, scopes: set[str], planned: list[dict]) -> list:
        """What each planned fault reaches (its scope's ``reach``), in their order; a scope of ``scopes`` with
        no planned fault (the experiment's own, its method not given) as one fault with no arguments."""
        named = {f.get("scope") for f in planned}
        return self._each("reach", list(planned) + [{"scope": s, "arguments": {}} for s in sorted(scopes - named)])


def capabilities_of(backend) -> set[str]:
    """What a backend (class or instance) can do: its declared ``capabilities``, and every registered
    scope it implements (its ``implementations``) with every backend method the scope's fault calls
    (:attr:`chaos.scopes.Scope.backend_methods`)."""
    from chaos import scopes

    implemented = getattr(backend, "implementations", None) or {}
    return set(backend.capabilities) | {scope_capability(name) for name in implemented
                                        if scopes.known(name) and not scopes.get(name).missing_on(backend)}


def required(settings: Settings) -> set[str]:
    """What an experiment asks of the backend: its scope, and the front door, cluster kind and
    load targets it names."""
    need = {scope_capability(settings.scope)}
    if settings.front != "direct":
        need.add(FRONT_DOOR)
    if not settings.gcs_fault_tolerance:
        need.add(NO_GCS_FT)
    if settings.targets != "workers":
        need.add(LOAD_TO_HEAD)
    return need


@runtime_checkable
class Backend(Protocol):
    name: str  # "local" or "kuberay"
    capabilities: frozenset[str]  # what it can do (above); a run asking for more is refused before it starts

    @property
    def dashboard_url(self) -> str: ...

    # domains and what the harness loads
    def zones(self) -> list[str]: ...
    def regions(self) -> list[str]: ...
    def zones_in_region(self, region: str) -> list[str]: ...
    def nodes_in(self, zone: str | None = None, region: str | None = None) -> list[str]: ...
    def zone_of(self, node: str) -> str | None: ...
    def targets(self) -> list[tuple[str, str, str | None, str | None]]: ...  # (name, URL, zone, region)
    def head_target(self) -> tuple[str, str, str | None, str | None]: ...
    def own_hosts(self) -> tuple[str, ...]: ...  # addresses the rig created that the harness may load
    def describe(self) -> dict: ...  # the cluster as recorded in a run's summary
    def topology_doc(self) -> dict: ...  # regions > zones > nodes, for the environment record

    # nodes, head, domains
    def kill_node(self, node: str) -> list: ...
    def start_node(self, node: str) -> None: ...
    def kill_head(self, method: str = "node") -> list: ...  # method: node | gcs
    def restart_head(self) -> None: ...
    def head_alive(self) -> bool: ...
    def kill_zones(self, zones: list[str]) -> list: ...  # zone or region loss, all at once
    def restore_zones(self, zones: list[str]) -> Any: ...
    def partition_zone(self, zone: str, deadline_s: float | None = None) -> None: ...  # deadline: helpers' end
    def heal_zone(self, zone: str) -> None: ...
    def kill_redis(self) -> list: ...
    def start_redis(self) -> bool: ...  # True when the GCS exited meanwhile (and was restarted)

    # the disruptions users cause themselves (chaos.scopes.upgrade.upgrade_app, drain_node)
    def upgrade_app(self, variant: str, version: str) -> dict: ...  # start a rolling upgrade; what changed
    def upgrade_variants(self) -> tuple[str, ...]: ...  # the variants this backend can apply
    def drain_node(self, node: str, deadline_s: float) -> dict: ...  # a graceful drain notice with a deadline
    def graceful_shutdown(self) -> dict: ...  # the deployment's graceful-shutdown settings and upgrade strategy
    def front_door(self) -> dict: ...  # what stands between the client and the Serve proxies (environment)
    def front_targets(self) -> list[tuple[str, str, str | None, str | None]]: ...  # the front door's URLs

    # Serve replicas and engines
    def replicas(self, state: str | None = "RUNNING") -> list: ...
    def pick_replica(self, zone: str | None = None, replica_id: str | None = None,
                     deployment: str | None = None) -> Any: ...
    # everything but the kill done; the callable may carry disarm(): what was prepared undone, the kill refused
    def replica_killer(self, r: Any, method: str) -> Callable[[], list]: ...
    # wait until the replica has at_least ongoing requests (Serve's count); the count, or ClusterError (idle, unread)
    def replica_ongoing(self, r: Any, at_least: int, wait_s: float) -> int: ...
    def pause_engine(self, r: Any) -> list: ...
    def resume_engine(self, pids: list) -> list: ...
    def crash_engine(self, r: Any) -> list: ...  # SIGKILL the replica's engine process(es); the replica lives
    # SIGUSR1 to the engine's fault hook (it errs from inside its step loop): all checked, the callable sends it
    def error_engine(self, r: Any) -> Callable[[], list]: ...
    # the same signal with a request to wedge (chaos.scopes.engine_wedge): all checked, the callable sends it;
    # release_engine ends the wedges still marked with this run (at the run's end), what each was
    def wedge_engine(self, r: Any, spin: bool = False) -> Callable[[], list]: ...
    # and with a request to hold garbage (chaos.scopes.engine_garbage) or a stall (chaos.scopes.engine_stall), held
    # while the engine steps on; release_engine(pids, "garbage" or "stall") ends them as it ends a wedge
    def garble_engine(self, r: Any) -> Callable[[], list]: ...
    def stall_engine(self, r: Any) -> Callable[[], list]: ...
    # engine-slow (chaos.scopes.engine_slow): a request to hold slow with its factor; healed by
    # release_engine(pids, "slow") after its duration; ``hold_s``: the engine lets go by itself past it (None: never)
    def slow_engine(self, r: Any, factor: float, hold_s: float | None = None) -> Callable[[], list]: ...
    def release_engine(self, pids: list, fault: str = "wedge") -> list: ...
    # a rank of the engine's rank group (chaos.scopes.rank_hang, rank_death; serve_apps/stream_ranks.py, vLLM's
    # tensor-parallel workers): hung through its fault hook (a request to wedge, then SIGUSR1; all checked, the callable
    # sends it; release_engine(pids) ends it as a wedge), or SIGKILLed; rank_children: every rank process of the
    # replica's engines (the orphan check follows them with the engines)
    def hang_rank(self, r: Any, rank: int = 1, spin: bool = False) -> Callable[[], list]: ...
    def kill_rank(self, r: Any, rank: int = 1) -> list: ...
    def rank_children(self, r: Any) -> list: ...
    # restart-fails: the weights a replacement loads found and read; the callable swaps them for a truncated copy
    # (for fault id), what it did back (its mark: what the restore needs)
    def weights_breaker(self, r: Any) -> Callable[[str], dict]: ...
    def restore_weights(self, fault: dict) -> dict: ...  # the original back, only where still the fault's copy
    # and its hold (chaos.scopes.restart_fails): one live look at ``deployment``'s replicas through the dashboard's
    # Serve details, id -> state (a STARTING one with no process on a node yet left out; None: no answer), what
    # chaos.system.start_watch.StartWatch tells the failed starts from
    def replica_states(self, deployment: str | None) -> dict[str, str] | None: ...
    # the orphan check (chaos.system.orphan_watch): the replica's engine processes (pids in its node: its pod on KubeRay),
    # found before a fault kills it; one look at which of ``pids`` in ``node`` still live (a zombie, or a pod gone,
    # is gone), each with its resident memory in MB (None: unreadable)
    def engine_children(self, r: Any) -> list: ...
    def processes_left(self, node: str | None, pids: list[int]) -> dict[int, float | None]: ...
    # a SIGSTOP/SIGCONT duty cycle of the engine (chaos.backends.engine_faults.Throttle); resume_engine ends it
    def stutter_engine(self, r: Any, factor: float, period_s: float, duration_s: float) -> list: ...

    # device-loss (chaos.scopes.device_loss): replica r's node's device marked lost: everything checked, nothing written;
    # the callable (fault id, token) writes the marker, what it wrote back; device_look reads the marker and the
    # engines' records there; restore_device removes the marker only while it holds the token (the first outcome kept);
    # the remedy's cordon of the node, and its undoing only while still the rig's
    # (KubeRay: the device plugin paused beside the marker, within outage_s's cap, and the optional taint)
    def device_breaker(self, r: Any, mode: str, xid: int, outage_s: float | None = None, taint: bool = False,
                       acknowledge_other_gpu_pods: bool = False) -> Callable[[str, str], dict]: ...
    def device_look(self, fault: dict) -> dict: ...
    def restore_device(self, fault: dict) -> dict: ...
    def cordon_device_node(self, fault: dict) -> dict: ...
    def uncordon_device_node(self, fault: dict) -> dict: ...

    # the device plugin of replica r's node kept off (chaos.scopes.faults_accelerator): all checked, nothing changed; the
    # returned callable (with .node, .zone, .detail()) takes it; hold_accelerator looks whether it still holds (into
    # the fault's effect); restore_accelerator gives it back where still the rig's (idempotent; the hold looked at
    # once more when given the fault)
    def lose_accelerator(self, r: Any, acknowledge_other_gpu_pods: bool = False) -> Callable[[], dict]: ...
    def hold_accelerator(self, fault: dict) -> dict: ...
    def restore_accelerator(self, node: str, wait_s: float | None = None, fault: dict | None = None) -> dict: ...

    # health
    def healthy(self) -> bool: ...
    def wait_healthy(self, timeout: float) -> None: ...
    # before any fault: own the run id; refuse leftovers and what could not be injected or healed (``faults``:
    # the experiment's planned faults, chaos.core.plan.faults_of)
    def prepare(self, run_id: str, scope: str, faults: list[dict] | None = None) -> None: ...
    def plan(self, scope: str, arguments: dict | None = None) -> list[dict]: ...  # what a fault would touch; read-only
    def effect_checks(self, fault: dict) -> list[dict]: ...  # one look: is the fault in effect? (chaos.scopes.faults.prove)
    def heal(self, faults: list[dict], timeout: float) -> dict: ...  # heal what these faults broke, nothing else
    def heal_all(self, timeout: float) -> dict: ...  # `availproof recover`: whatever is broken
    def app_status(self) -> str | None: ...  # the Serve app's status, None when there is none
    def observe(self, timeout: float) -> Any: ...  # one chaos.recording.records.Sample of the control plane and capacity


def members() -> list[str]:
    """Every member of the :class:`Backend` interface (methods, properties, attributes)."""
    names = {n for n in vars(Backend) if not n.startswith("_")} | set(Backend.__annotations__)
    return sorted(names)


def missing_members(backend: Any) -> list[str]:
    """The members of the interface ``backend`` lacks: a run refuses such a backend when it opens
    (no method of it is found missing half-way through a fault, or swallowed at the end)."""
    return [n for n in members() if not hasattr(backend, n)]
