"""availproof: a reliability test rig for LLM serving on Ray.

The packages, each saying in its docstring what it owns and what it may import:

- :mod:`chaos.base`       errors, the scope registry, statistics: read by every part, reading none
- :mod:`chaos.core`       one run's lifecycle, its spec, verdict, summary and drivers (the run core)
- :mod:`chaos.system`     the system under test as the rig reaches it (dashboard, placement, topology, sampler)
- :mod:`chaos.scopes`     the failure scopes, their registry, and what every fault function shares
- :mod:`chaos.backends`   the one interface fault injection goes through (local processes, KubeRay)
- :mod:`chaos.load`       the load generator, capacity and the load's fit
- :mod:`chaos.recording`  request records and fault marks, NDJSON written incrementally, read back as columns
- :mod:`chaos.analysis`   recovery per fault mark, the planes, the figure catalogue, lost service
- :mod:`chaos.claim`      an availability claim from a suite's evidence
- :mod:`chaos.soak`       one long run with faults at Poisson instants, checked against the claim
- :mod:`chaos.scorecard`  the detector scorecard
- :mod:`chaos.reports`    reports for people
- :mod:`chaos.ctk`        the Chaos Toolkit extension (thin adapters)
- :mod:`chaos.commands`   the command line (``availproof``: :mod:`chaos.commands.cli`)
"""

__version__ = "0.1.0"
