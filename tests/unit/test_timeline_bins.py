"""The timeline that scales (chaos.reports.timeline): a lane of many requests drawn per time bin."""

import random

import numpy as np

from bench import synthetic_run
from chaos.recording import record_columns
from chaos.base import stats
from chaos.reports import timeline

NS = 1_000_000_000


def test_each_bin_holds_its_send_instants_and_its_percentiles_are_the_rigs():
    rng = random.Random(3)
    sent = np.array(sorted(rng.randrange(0, 100 * NS) for _ in range(2000)), dtype=np.int64)
    edges, which = timeline.bins(sent, 0, int(sent[-1]), 37)
    assert len(edges) == 38 and edges[0] == 0 and edges[-1] > sent[-1]
    assert all(edges[b] <= t < edges[b + 1] for t, b in zip(sent.tolist(), which.tolist()))
    values = np.array([rng.uniform(0, 1) for _ in sent])
    for q in (0.5, 0.95):
        got = timeline.bin_percentiles(which, values, 37, q)
        for b in range(37):
            mine = values[which == b].tolist()
            assert (np.isnan(got[b]) and not mine) or got[b] == stats.percentile(mine, q)


def test_a_long_run_is_drawn_per_bin_and_costs_what_a_short_one_does(tmp_path, monkeypatch):
    synthetic_run.write(tmp_path / "records.ndjson", 6000, rate=300.0, inject_at=0.3, outage_s=5.0)
    run = record_columns.parse(tmp_path / "records.ndjson")
    summary = {"definitions": {"slo": {"ttft_s": 2.0}}, "faults": []}
    drawn = []
    monkeypatch.setattr(timeline, "_lane_bins", lambda *a, **k: drawn.append("bins"))
    points = timeline.png(run, summary)
    assert points.startswith(b"\x89PNG") and drawn == []  # 2000 a lane: point by point
    monkeypatch.setattr(timeline, "POINTS_PER_LANE", 1000)
    timeline.png(run, summary)
    assert drawn == ["bins"] * 3  # every lane per bin
    monkeypatch.undo()
    monkeypatch.setattr(timeline, "POINTS_PER_LANE", 1000)
    assert timeline.png(run, summary).startswith(b"\x89PNG")
