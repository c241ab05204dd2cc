"""The Chaos Toolkit extension: thin adapters only.

- :mod:`chaos.ctk.control`  the steps of :mod:`chaos.run` at the experiment's hooks (load on
  before the method, recovery window and analysis after it, the summary into the journal), and
  stop conditions as Chaos Toolkit interruptions.
- :mod:`chaos.ctk.actions`  one action per failure scope, plus ``heal_all`` for rollbacks.
- :mod:`chaos.ctk.probes`   Serve app status, replicas per zone, requests succeeding, p95 TTFT,
  recovery within the experiment's bounds.

All logic lives in :mod:`chaos.run` (one run's lifecycle), :mod:`chaos.provision`,
:mod:`chaos.faults`, :mod:`chaos.backends`, :mod:`chaos.load.harness` and :mod:`chaos.analysis`;
the CLI path uses the same code.
"""
