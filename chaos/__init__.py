"""availproof: a reliability test rig for LLM serving on Ray.

The public surface is small; everything else is an implementation detail:

- :mod:`chaos.topology`  failure domains (regions -> zones -> nodes) from YAML
- :mod:`chaos.backends`  the one interface fault injection goes through (local processes, KubeRay)
- :mod:`chaos.records`   request records and fault marks, NDJSON, written incrementally
- :mod:`chaos.load.harness`   the httpx load generator
- :mod:`chaos.analysis`  recovery per fault mark (plain Python)
"""

__version__ = "0.1.0"
