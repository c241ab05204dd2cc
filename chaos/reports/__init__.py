"""Reports: the evidence of a run, its trials or a suite, for people. :mod:`~chaos.reports.report`
(markdown, self-contained HTML, JSON; ``--compare``; its parts: ``load``, ``rows``, ``plane_rows``,
``environment``, ``render``, ``compare``), :mod:`~chaos.reports.timeline` (the PNG:
request lanes per zone, the control plane, replicas and nodes per zone), and
:mod:`~chaos.reports.cells` (how a figure reads in a cell: the report and the suite table share it).
Everything here reads summaries and records; nothing measures. Labels and keys of figures come from
the catalogue, :mod:`chaos.analysis.figures`.

May import: chaos.analysis, chaos.base, chaos.core, chaos.load, chaos.recording, chaos.scopes, chaos.system.
"""
