"""The failure scopes: one module per scope, holding everything the scope is (:class:`Scope`: its name,
label, the flags the analysis branches on, the bound on its effect's proof, the Kubernetes accesses its
fault and heal need, its fault function's name), and the registry they are entered in
(:mod:`chaos.scopes.registry`, whose API this package is: ``from chaos import scopes``; ``scopes.get``).

How each backend does a scope (its plan rows, its effect checks, what its heal restores) is the backend's
implementation of it (:class:`chaos.backends.base.Implementation`); a backend can run the scopes it
implements. Adding a scope: docs/architecture.md, "Adding a scope".

What each flag means: :class:`Scope` (:mod:`chaos.scopes.registry`).
"""

from __future__ import annotations

from chaos.scopes import (accelerator, drain, engine, engine_crash, engine_error, engine_slow, head, node, partition,
                          redis, region, replica, upgrade, zone)
from chaos.scopes.registry import (FLAGS, Scope, all_scopes, get, known, label, names, register,  # noqa: F401
                                   unregister, where)

# The built-in scopes, one module each, in the order the schema's enum lists them.
BUILTIN = (replica, engine, engine_crash, node, head, zone, region, partition, redis, upgrade, drain, engine_error,
           engine_slow, accelerator)
for _module in BUILTIN:
    register(_module.SCOPE)
del _module
