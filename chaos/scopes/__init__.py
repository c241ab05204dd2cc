"""The failure scopes: one module per scope, holding everything the scope is: its fault function(s) (each
also its Chaos Toolkit action, :mod:`chaos.ctk.actions`) and its :class:`Scope` (its name, label, the flags
the analysis branches on, the bound on its effect's proof, the Kubernetes accesses its fault and heal need,
what the soak reads of it); and the registry they are entered in (:mod:`chaos.base.scope_registry`, whose API
this package is, with the built-in scopes registered: ``from chaos import scopes``; ``scopes.get``).

How each backend does a scope (its plan rows, its effect checks, what its heal restores) is the backend's
implementation of it (:class:`chaos.backends.base.Implementation`); a backend can run the scopes it
implements. Adding a scope: docs/architecture.md, "Adding a scope".

What each field means: :class:`Scope` (:mod:`chaos.base.scope_registry`).

Also here: what every fault function shares (:mod:`chaos.scopes.faults`) and the device plugin's outage, the
accelerator scope's fault (:mod:`chaos.scopes.faults_accelerator`).

May import: chaos.backends, chaos.base, chaos.recording, chaos.system.
"""

from __future__ import annotations

from chaos.scopes import (accelerator, device_loss, drain, engine, engine_crash, engine_error, engine_garbage,
                          engine_slow, engine_stall, engine_stutter, engine_wedge, head, node, partition, redis, region,
                          overload, rank_death, rank_hang, replica, restart_fails, upgrade, zone)
from chaos.base.scope_registry import (FLAGS, Scope, actions, all_scopes, get, known, label, names,  # noqa: F401
                                  register, unregister, where)

# The built-in scopes, one module each, in the order the schema's enum lists them.
BUILTIN = (replica, engine, engine_crash, node, head, zone, region, partition, redis, upgrade, drain, engine_error,
           engine_slow, accelerator, engine_wedge, engine_garbage, engine_stall, engine_stutter, restart_fails,
           device_loss, overload, rank_hang, rank_death)
for _module in BUILTIN:
    register(_module.SCOPE)
del _module
