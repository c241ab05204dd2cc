"""``availproof soak`` (issue 32): one long run under one experiments' load in which the faults of several
experiments' scopes arrive at Poisson instants, at the rates of a RATES file times a speed-up K (a month's
events compressed into minutes), each healed as its experiment heals it; its observed lost service-seconds
are then set against the claim's predictive distribution for the counts injected.

Pure and cluster-free, one module each:
- :mod:`chaos.soak.schedule`: what each experiment injects (:class:`~chaos.soak.schedule.SoakFault`), the
  seeded Poisson schedule and the rules for what cannot run at once on one cluster (:func:`draw`).
- :mod:`chaos.soak.figures`: the soak's observed lost service-seconds from its records, and the prediction
  it is compared with (:func:`~chaos.soak.check.soak_summary`).
- :mod:`chaos.soak.check`: the soak checked against the claim per scope, in two parts (its unrecovered count,
  its recovered events' summed cost), as posterior predictive p-values; and a soak's events as a claim's trials.
(The schedule's input check is :func:`chaos.soak.schedule.check`: ``chaos.soak.check`` is the module.)

May import: chaos.analysis, chaos.base, chaos.claim, chaos.core, chaos.ctk, chaos.load, chaos.recording,
chaos.reports, chaos.schemas, chaos.scopes.
"""

from chaos.soak.schedule import (Planned, Schedule, SoakFault, apply_rules,  # noqa: F401
                                 conflict, draw, fault_from_experiment, faults_from_experiments)

__all__ = ["apply_rules", "conflict", "draw", "fault_from_experiment", "faults_from_experiments", "Planned", "Schedule",
           "SoakFault"]
