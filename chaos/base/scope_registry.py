"""The registry of failure scopes: what a scope is (:class:`Scope`), and the scopes registered.

The analysis, the planes, the bounds, the reports, the schemas, the faults' proofs, the Chaos Toolkit
actions, the soak's schedule and the KubeRay preflight ask this registry what a scope is instead of
keeping their own lists of names. Each built-in scope is one module of :mod:`chaos.scopes` holding its
:class:`Scope` and its fault function(s) (registered by the package, in order); a plug-in's is a
:func:`register` call (docs/architecture.md, "Adding a scope"). This module is below everything that
reads it (the fault machinery, :mod:`chaos.scopes.faults`, included), so the scopes' modules can build on that
machinery; ``from chaos import scopes`` is its API with the built-in scopes registered.
A scope a recorded run names that the registry does not know (an older run, a plug-in's scope not
loaded) reads as one with every property false (:func:`get`): analysed like ``head``, shown by its name.

Two properties are easily confused, and the code branches on both:

- ``routed``: the fault takes down a failure domain (a node, a zone, a region) whose users reach
  Serve through their own proxies, in that domain: its affected population is that domain's users,
  and the other zones' users are the unaffected ones.
- ``every_target_affected``: the fault hits a replica (or every replica) that Serve's proxies route
  to from every zone: a request sent to zone-a's proxy may be served in zone-c, so every target's
  users are affected whatever zone the fault names, and no zone is unaffected.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Any, Callable

_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")


@dataclass(frozen=True)
class Scope:
    """What one failure scope is, as the code that analyses and reports a fault of it needs to know."""

    name: str  # what the marks, the experiments and the summaries call it
    label: str  # a few words for reports ("zone loss")
    # its fault function, ``fault(backend, marker, **arguments) -> the fault dict`` (in its module), and any
    # other it has (head: a second fault during its outage); each is a Chaos Toolkit action of the same name
    # (chaos.ctk.actions), taking the function's parameters but those of action_omits, and configuration
    fault: Callable[..., dict] | None = None
    more_faults: tuple[Callable[..., dict], ...] = ()
    action_omits: tuple[str, ...] = ()  # its faults' parameters no action takes (a caller's replica, a poll interval)
    # the faults one call of its action injects, ``(scope, arguments)`` each, for the plan (chaos.core.plan);
    # None: one fault of this scope, with the action's arguments
    splits: Callable[[str, dict], list[tuple[str, dict]]] | None = None
    backend_methods: tuple[str, ...] = ()  # the Backend methods its fault injects and heals with
    zoned: bool = False  # its marks name zones: those it takes down, or the zone of the node or replica it hits
    routed: bool = False  # takes down a domain whose users have their own proxies in it (affected: its users)
    every_target_affected: bool = False  # Serve routes from any proxy to what it hits: no zone is unaffected
    control_plane: bool = False  # takes down the GCS or the Serve controller (the head, the GCS's Redis)
    replacing: bool = False  # replacing replicas is what it does (a planned disruption): its replacement shown
    replaces_every_replica: bool = False  # meant to replace every replica: its completion is measured
    # how long after its injection its effect must be seen on the system (s; chaos.scopes.faults.prove)
    effect_bound_s: float = 30.0
    # what its fault and heal need on KubeRay (chaos.backends.kuberay.kube.access.needed): a tuple of
    # kube_access.Access, or a function of kube_access.Asked (the backend's partition method, ...) giving one
    kube_access: tuple | Callable[[Any], tuple] = ()
    # its fault touches nothing on the cluster (the load's own step above capacity): no access beyond the reads
    touches_nothing: bool = False
    straggler: bool = False  # leaves what it hits serving, slowly: its share and latencies analysed (slow_replica)
    # leaves its replacement unable to start for a while: its failed starts measured (chaos.analysis.restart)
    failing_restart: bool = False
    # leaves a node whose device stays bad: where its replacements land, their failed starts there and the time to a
    # healthy replica measured, its bound max_device_crashloop_s applied by default (chaos.analysis.device)
    bad_device: bool = False
    # kills a replica or its engine, or leaves it for a detector to replace: the replica's engine processes are
    # followed until gone, their bound max_orphan_s applied by default (chaos.system.orphan_watch, chaos.analysis.orphans)
    orphan_check: bool = False
    # the soak (chaos.soak.schedule): the arguments of its actions its time to heal is read from (the max of
    # them, each defaulting as its fault function's signature does; () or one null: no heal of its own, held
    # for its recovery window), and its class in the soak's table of what cannot hold at once (None: only
    # another fault of itself)
    heal_args: tuple[str, ...] = ()
    conflict_class: str | None = None
    # the ranks of the engine's rank group its fault needs (app.ranks, serve_apps/stream_ranks.py; vLLM's
    # tensor_parallel_size): an experiment of it on an app with fewer is refused before anything starts
    min_ranks: int = 1

    def accesses(self, asked: Any) -> tuple:
        """The Kubernetes accesses its fault and heal need, for ``asked`` (:class:`chaos.backends.kuberay.kube.access.Asked`)."""
        return tuple(self.kube_access(asked) if callable(self.kube_access) else self.kube_access)

    def faults(self) -> tuple[Callable[..., dict], ...]:
        """Its fault functions: :attr:`fault`, then :attr:`more_faults`."""
        return ((self.fault,) if self.fault is not None else ()) + tuple(self.more_faults)

    def missing_on(self, backend: Any) -> list[str]:
        """The backend methods this scope's fault needs that ``backend`` lacks: a backend that lacks
        any cannot inject the scope."""
        return [m for m in self.backend_methods if not callable(getattr(backend, m, None))]


FLAGS = tuple(f.name for f in fields(Scope) if f.type == "bool")  # the yes/no properties
_REGISTRY: dict[str, Scope] = {}


def _problems(scope: Scope) -> list[str]:
    """What makes an entry contradict itself (the analysis would read it two ways)."""
    out = []
    if not _NAME.match(scope.name):
        out.append(f"name must be lower-case letters, digits, '-' or '_', got {scope.name!r}")
    if not scope.label:
        out.append("label must not be empty")
    if scope.routed and scope.every_target_affected:
        out.append("routed (its domain's users are affected) and every_target_affected (every target's users "
                   "are) exclude each other")
    if scope.routed and not scope.zoned:
        out.append("routed needs zoned: the affected domain is the zones its marks name")
    if scope.replaces_every_replica and not scope.replacing:
        out.append("replaces_every_replica needs replacing")
    if isinstance(scope.backend_methods, str) or not all(isinstance(m, str) for m in scope.backend_methods):
        out.append("backend_methods must be a tuple of method names")
    if not all(callable(f) for f in scope.faults()):
        out.append("fault and more_faults must be functions")
    if isinstance(scope.heal_args, str) or isinstance(scope.action_omits, str):
        out.append("heal_args and action_omits must be tuples of argument names")
    if isinstance(scope.min_ranks, bool) or not isinstance(scope.min_ranks, int) or scope.min_ranks < 1:
        out.append(f"min_ranks must be a whole number >= 1, got {scope.min_ranks!r}")
    if not (isinstance(scope.effect_bound_s, (int, float)) and scope.effect_bound_s >= 0):
        out.append(f"effect_bound_s must be a number of seconds >= 0, got {scope.effect_bound_s!r}")
    return out


def register(scope: Scope, replace: bool = False) -> Scope:
    """Add ``scope`` to the registry (``replace``: over one of the same name); returns it.
    Refuses a name already taken and an entry that contradicts itself."""
    problems = _problems(scope)
    if scope.name in _REGISTRY and not replace:
        problems.append(f"scope {scope.name!r} is already registered")
    taken = {name: s.name for name, (s, _) in actions().items() if s.name != scope.name}
    problems += [f"its fault {f.__name__!r} is already scope {taken[f.__name__]!r}'s action"
                 for f in scope.faults() if getattr(f, "__name__", None) in taken]
    if problems:
        raise ValueError(f"scope {scope.name!r}: " + "; ".join(problems))
    _REGISTRY[scope.name] = scope
    return scope


def unregister(name: str) -> None:
    """Remove a scope (a test's, a plug-in's); unknown names are ignored."""
    _REGISTRY.pop(name, None)


def names() -> tuple[str, ...]:
    """Every registered scope's name, in registration order (the schema's enum, ``records.SCOPES``)."""
    return tuple(_REGISTRY)


def all_scopes() -> tuple[Scope, ...]:
    return tuple(_REGISTRY.values())


def actions() -> dict[str, tuple[Scope, Callable[..., dict]]]:
    """Every registered scope's fault functions by name (each the Chaos Toolkit action of that name), in
    registration order: ``{name: (scope, function)}``."""
    return {f.__name__: (s, f) for s in _REGISTRY.values() for f in s.faults()}


def get(name: str | None) -> Scope:
    """The registered scope, else one with every property false and its name as its label."""
    known = _REGISTRY.get(name) if isinstance(name, str) else None
    return known or Scope(name=str(name), label=str(name))


def known(name: str | None) -> bool:
    return isinstance(name, str) and name in _REGISTRY


def label(name: str | None) -> str | None:
    """The registered scope's label, None for a scope the registry does not know."""
    return _REGISTRY[name].label if known(name) else None


def where(flag: str) -> frozenset[str]:
    """The names of the registered scopes whose property ``flag`` is true, e.g. ``where("routed")``."""
    if flag not in FLAGS:
        raise ValueError(f"no yes/no scope property {flag!r} (known: {', '.join(FLAGS)})")
    return frozenset(s.name for s in _REGISTRY.values() if getattr(s, flag))
