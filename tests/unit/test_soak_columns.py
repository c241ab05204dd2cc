"""The soak's per-request figures on request columns (issue 45) against the object-based code they replaced, kept
here as the oracle (one RequestRecord per request, lists scanned): the stretches' integrals
(:func:`chaos.soak.figures.parts`), the quiet requests (:func:`chaos.soak.check.quiet_requests`) and the report's
cumulative curve (:func:`chaos.soak.report.cumulative`), on random soaks (overlapping windows, requests of random
length in flight across them, failures in and out of windows, lines out of send order), from a list and from the
column reader. Equal means ``==``."""

import random

import numpy as np

from chaos import analysis
from chaos.analysis import lost_service as ls
from chaos.recording import record_columns, records as rec
from chaos.soak import check as ck, figures as fig, report
from chaos.soak.schedule import Planned
from tests.unit.test_claim_columns import end_of, old_base_fraction, old_open_loop
from tests.unit.test_soak_check import write_soak
from tests.unit.test_soak_figures import NS, at, inject, records, req, schedule


# ---------------------------------------------------------------- the oracle: the object-based code before
def old_parts(records, schedule):
    def reqs(rs):
        return [ls.Req(r.sent_ns, end_of(r), not r.ok) for r in rs]

    measured = [r for r in records.requests if r.phase == rec.MEASURE]
    injects = [m.t_ns for m in records.marks if m.event == rec.INJECT_START]
    if not injects:
        return {"unmeasurable": "no fault was injected"}
    t0, end = min(injects), analysis.run_end_ns(records)
    base = [r for r in measured if r.sent_ns < t0 and end_of(r) <= t0]
    if not base:
        return {"unmeasurable": "no baseline: no measured request ended before the first injection"}
    frac = old_base_fraction(reqs(base))
    rs = reqs(measured)
    whole = old_open_loop(rs, t0, end, frac)
    wins = fig.windows(records, schedule)
    cut = []
    for a, b, active in fig.stretches(wins, t0, end):
        mine = [q for q in rs if q.sent_ns < b and (q.sent_ns >= a or a == t0)]
        cut.append((a, b, active, old_open_loop(mine, a, b, frac, width=whole["width_s"])["raw_s"] if mine else 0.0))
    return {"t0": t0, "end": end, "frac": frac, "whole": whole, "wins": wins, "stretches": cut}


def old_quiet_requests(records, schedule):
    d = analysis.Definitions.from_dict(records.header.get("definitions"))
    wins = [(w["start_ns"], w["end_ns"]) for w in fig.windows(records, schedule)]
    quiet = [r for r in records.requests if r.phase == rec.MEASURE
             and not any(r.sent_ns <= b and r.sent_ns + int((r.e2e_s or 0) * 1e9) >= a for a, b in wins)]
    return {"requests": len(quiet), "failed": sum(1 for r in quiet if not r.ok),
            "slo_missed": sum(1 for r in quiet if not r.ok or not d.slo.met(r))}


def old_cumulative(records, t0, base, width_s=1.0):
    buckets = {}
    for r in records.requests:
        if r.phase == rec.MEASURE and r.sent_ns >= t0:
            b = buckets.setdefault(int((r.sent_ns - t0) / NS // width_s), [0, 0])
            b[0] += 1
            b[1] += 0 if r.ok else 1
    xs, ys, acc = [0.0], [0.0], 0.0
    for k in range(max(buckets) + 1 if buckets else 0):
        n, bad = buckets.get(k, [0, 0])
        acc += (bad / n - base) * width_s if n else 0.0
        xs.append((k + 1) * width_s)
        ys.append(acc)
    return xs, ys


# ---------------------------------------------------------------- random soaks
def random_soak(seed):
    r = random.Random(seed)
    end = 400
    fails = [(t, t + r.uniform(0.5, 20)) for t in sorted(r.uniform(20, 380) for _ in range(r.randrange(1, 6)))]
    rs, t, k = [], 0.0, 0
    while t < end:
        bad = any(a <= t < b for a, b in fails) or r.random() < 0.02
        x = req(k, round(t, 4), ok=not bad, e2e=r.choice((0.05, 0.4, 2.5, r.uniform(0, 8))))
        x.phase = rec.WARMUP if t < 3 else rec.MEASURE
        if r.random() < 0.05:
            x.ttft_s = 3.0 if x.ok else None  # outside the SLO
        rs.append(x)
        k += 1
        t += r.expovariate(20) if r.random() < 0.97 else r.uniform(2, 6)  # gaps: empty buckets
    marks, planned = [], []
    for i, at_t in enumerate(sorted(r.uniform(30, 350) for _ in range(r.randrange(1, 7)))):
        scope = r.choice(("replica", "node"))
        heal = at_t + r.uniform(5, 40) if scope == "node" and r.random() < 0.8 else None
        marks += inject(at_t, f"{scope[0]}{i}", scope, heal_t=heal)
        planned.append(Planned(i, at_t, scope, "x", at_t + 30.0, at_t + 40.0))
    r.shuffle(rs)  # the file's order: as requests ended, not as they were sent
    return records(rs, marks, end), schedule(planned)


def test_the_soaks_figures_on_columns_equal_the_object_based_ones(tmp_path):
    for seed in range(8):
        recs, sched = random_soak(seed)
        write_soak(tmp_path / f"s{seed}", recs, sched)
        read = record_columns.parse(tmp_path / f"s{seed}" / "records.ndjson")
        assert read.columns is not None and recs.columns is None
        expect = old_parts(recs, sched)
        assert "unmeasurable" not in expect and len(expect["stretches"]) > 1
        for got in (recs, read):
            assert fig.parts(got, sched) == expect
            assert ck.quiet_requests(got, sched) == old_quiet_requests(recs, sched)
            for t0, base, width in ((expect["t0"], expect["frac"], 1.0), (at(0), 0.01, 2.5)):
                assert report.cumulative(got, t0, base, width) == old_cumulative(recs, t0, base, width)
        assert ck.quiet_requests(recs, sched)["requests"] > 0


def test_quiet_requests_against_touching_nested_and_reversed_windows():
    r = random.Random(5)
    recs, sched = random_soak(3)
    c = recs.requests
    sent = [x.sent_ns for x in c]
    ends = [end_of(x) for x in c]
    for _ in range(50):
        wins = []
        for _ in range(r.randrange(0, 8)):
            a = at(r.uniform(0, 400))
            wins.append((a, a + r.choice((0, 1, NS, int(r.uniform(-3, 60) * NS)))))
        if wins and r.random() < 0.5:
            wins.append((wins[0][1], wins[0][1] + NS))  # one starting where another ends
        got = ck.touching(np.array(sent), np.array(ends), wins)
        assert got.tolist() == [any(s <= b and e >= a for a, b in wins) for s, e in zip(sent, ends)]


# ---------------------------------------------------------------- one read per command
def test_a_side_read_apart_does_not_put_out_the_commands_run(tmp_path):
    recs, sched = random_soak(1)
    for name in ("a", "b"):
        write_soak(tmp_path / name, recs, sched)
    with record_columns.shared():
        first = record_columns.read(tmp_path / "a" / "records.ndjson")
        with record_columns.apart():
            side = record_columns.read(tmp_path / "b" / "records.ndjson")
            assert record_columns.read(tmp_path / "b" / "records.ndjson") is not side  # not kept either
        assert record_columns.read(tmp_path / "a" / "records.ndjson") is first


def test_analyse_reads_a_soaks_records_once_though_its_claim_reads_a_suite(tmp_path, monkeypatch):
    import json

    from chaos.commands import cli
    from tests.unit.test_claim import outage_run

    outage_run(tmp_path / "suite" / "replica-kill", failed=20)
    rates = tmp_path / "rates.yaml"
    rates.write_text("period_days: 30\nscopes:\n  replica: {events: 2}\n")
    recs, sched = random_soak(2)
    d = tmp_path / "soak"
    write_soak(d, recs, sched)
    lines = (d / "records.ndjson").read_text().splitlines()
    header = json.loads(lines[0])
    header["soak"].update(claim_from=str(tmp_path / "suite"), faults=str(rates))
    (d / "records.ndjson").write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    parsed = []
    parse = record_columns.parse
    monkeypatch.setattr(record_columns, "parse", lambda p: parsed.append(str(p)) or parse(p))
    assert cli.main(["analyse", str(d)]) == 0
    assert parsed.count(str(d / "records.ndjson")) == 1
    soak = json.loads((d / "summary.json").read_text())["soak"]
    assert soak["prediction"]["from"]["claim"] == str(tmp_path / "suite")  # the claim was computed (from the suite)
    assert (d / "soak.md").is_file() and (d / "soak-timeline.png").is_file()
