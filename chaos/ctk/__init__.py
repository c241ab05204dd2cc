"""The Chaos Toolkit extension: thin adapters only.

- :mod:`chaos.ctk.control`  a thin edge: each of Chaos Toolkit's moments handed to the run core
  (:mod:`chaos.core.moments`) in one guarded call; its interruptions as Chaos Toolkit's; plain ``chaos run``
  exits with the verdict's code.
- :mod:`chaos.ctk.actions`  one action per fault function of a registered scope (made from the registry:
  :func:`chaos.scopes.actions`), plus ``heal_all`` for rollbacks.
- :mod:`chaos.ctk.probes`   Serve app status, replicas per zone, requests succeeding, p95 TTFT,
  recovery within the experiment's bounds.
- :mod:`chaos.ctk.session`  how the run reaches them all: in Chaos Toolkit's ``configuration``, under
  ``availproof_session`` (no process global, nothing in the experiment).

All logic lives in :mod:`chaos.core.moments` and :mod:`chaos.core.run` (one run's lifecycle), :mod:`chaos.core.provision`,
:mod:`chaos.scopes.faults`, :mod:`chaos.backends`, :mod:`chaos.load.harness` and :mod:`chaos.analysis`;
the CLI path uses the same code.

May import: chaos.analysis, chaos.base, chaos.core, chaos.load, chaos.scopes, chaos.system.
"""
