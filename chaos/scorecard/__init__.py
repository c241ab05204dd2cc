"""The detector scorecard (``availproof scorecard``, issue 44): how well each detector finds each gray fault.

- :mod:`chaos.scorecard.dimensions`: the faults, detectors, loads and health-check periods, what each means per
  app, and which combinations do not apply (with the reason);
- :mod:`chaos.scorecard.plan`: the matrix of cells from a small spec, each cell a :class:`chaos.core.run_spec.RunSpec`
  derived from its fault's shipped experiment, the fault-free run, the estimated time;
- :mod:`chaos.scorecard.figures`: one trial's figures (detected, time to detect, requests to the bad replica
  after detection, false replacements), read through :mod:`chaos.core.evidence`;
- :mod:`chaos.scorecard.cells`: the figures of a cell over its trials;
- :mod:`chaos.scorecard.table`: scorecard.json and scorecard.md; :mod:`chaos.scorecard.picture`: the SVG matrix;
- :mod:`chaos.scorecard.execute`: running the cells' trials, and re-deriving from a directory of runs.

May import: chaos.analysis, chaos.base, chaos.core.
"""
