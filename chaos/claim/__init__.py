"""From evidence to an availability claim: ``availproof claim SUITE_DIR --faults RATES``. Plain Python (no Ray):
it reads a suite's summaries and records and returns one document; :mod:`chaos.reports.claim` renders and
writes it (``claim.json``, ``claim.md``, ``claim.html``, ``claim.svg``). The claim is the rig's last word to
people who publish SLAs, so every figure that feeds its verdict carries its uncertainty into it.

The parts, one module each:
- :mod:`chaos.claim.rates`: RATES, per scope a point figure (``events``) or an observed history (``count`` over
  ``exposure_days``, whose rate is uncertain), the stated outage length, the cost of an unrecovered event.
- :mod:`chaos.core.evidence` (shared with the report and ``analyse``): the suite's runs, summaries and records.
- :mod:`chaos.claim.cost`: each run's cost, lost service-seconds net of its baseline, for any load shape
  (:mod:`chaos.analysis.lost_service`), and whether the run counts.
- :mod:`chaos.claim.counted`: what a run's requests are counted in: as recorded, or logical requests when its client
  retried (said as ``counted_in``).
- :mod:`chaos.claim.coverage`: whether a stated outage length was tested, and the line through the costs
  of the lengths that were.
- :mod:`chaos.claim.scope_entry`: one scope's runs, costs and event model.
- :mod:`chaos.claim.model`: one scope's event model (what is known); :mod:`chaos.claim.unrecovered` (the
  unrecovered share's prior, posterior, pooling), :mod:`chaos.claim.cost_model` (the recovered cost's
  distribution: a Dirichlet-process posterior) and :mod:`chaos.claim.theta` (the unknowns drawn).
- :mod:`chaos.claim.predict`: the predictive distribution of a period's lost seconds, seeded.
- :mod:`chaos.claim.credible`: what is unknown apart from what is random: the credible probability that a
  period's miss chance is within the risk (nested simulation, its Monte Carlo error stated);
  :mod:`chaos.claim.background`: the failures with no fault, charged to the period.
- :mod:`chaos.claim.decide`: the verdict (``not_covered``, ``not_supported``, ``insufficient_evidence``,
  ``supported``), the trials that would change it, the plan; :mod:`chaos.claim.judgement` puts them together.
- :mod:`chaos.claim.document`: the document.

Honest nulls: a figure that cannot be measured is null and its reason is in the ``unmeasurable`` map of
the object holding it (the claim's, a run's), never 0.

May import: chaos.analysis, chaos.base, chaos.core.evidence, chaos.recording, chaos.scopes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chaos.core import evidence
from chaos.claim.cost import POPULATIONS, fault_cost, fault_lost, outage_tested, run_cost  # noqa: F401
from chaos.claim.credible import DEFAULT_CREDIBILITY  # noqa: F401
from chaos.claim.decide import INSUFFICIENT, NOT_COVERED, NOT_SUPPORTED, SUPPORTED, VERDICTS  # noqa: F401
from chaos.claim.document import FORMAT_VERSION, SIMULATIONS, build  # noqa: F401
from chaos.base.errors import UsageError
from chaos.claim.rates import (DEFAULT_RISK, DEFAULT_TARGET_PCT, DEFAULT_UNRECOVERED_COST_S, Rate,  # noqa: F401
                               Rates, checkable, credibility_value, load_rates, parse_rates, risk_value,
                               target_fraction)


def claim(suite_dir: str | Path, rates: Rates, target: float, risk: float, population: str = "service",
          seed: int = 0, slo_target: float | None = None, simulations: int = SIMULATIONS,
          credibility: float = DEFAULT_CREDIBILITY, pool: bool = False,
          soak_events: dict[str, dict[str, Any]] | None = None,
          soak_quiet: dict[str, int] | None = None) -> dict[str, Any]:
    """Read the suite's runs and build the claim (nothing is written); ``soak_events`` and ``soak_quiet``: a
    soak's events as trials and its quiet requests as evidence of the background (``--with-soak``)."""
    found = evidence.find_runs(suite_dir, "suite directory")
    if not found:
        raise UsageError(f"{suite_dir}: no summary.json or records.ndjson in it or its sub-directories: "
                         "no run to claim from")
    runs, summaries = [], []
    for name, trial, d in found:
        s = evidence.load_summary(d)
        runs.append(run_cost(name, trial, str(d), s, evidence.read_records(d), population))
        summaries.append(s)
    return build(runs, summaries, rates, target, risk, population, seed, str(suite_dir), simulations, slo_target,
                 credibility=credibility, pool=pool, soak_events=soak_events, soak_quiet=soak_quiet)
