"""The Chaos Toolkit extension: thin adapters only.

- :mod:`chaos.ctk.control`  starts the harness before the method, stops it after the recovery
  window, analyses the records and puts the summary in the journal.
- :mod:`chaos.ctk.actions`  one action per failure scope, plus ``heal_all`` for rollbacks.
- :mod:`chaos.ctk.probes`   Serve app status, replicas per zone, requests succeeding, p95 TTFT,
  recovery within the experiment's bounds.

All logic lives in :mod:`chaos.faults`, :mod:`chaos.backends`, :mod:`chaos.harness` and
:mod:`chaos.analysis`; the CLI path uses the same code.
"""
