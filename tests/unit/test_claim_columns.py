"""The claim's cost on request columns (issue 45) against the object-based figure it replaced: the rig's code
before, one RequestRecord per request and plain-Python lists (:func:`old_fault_lost` and the lost-service
functions under it, kept here verbatim as the oracle), on synthetic runs with known answers: an open loop with a
baseline that failed and slow requests, a closed loop's affected zone, a window cut by the next fault with
requests in flight across the cut, a zone population, requests recorded out of send order. Equal means ``==``,
every figure to the last bit, not approximately."""

import math
import random

import pytest

from chaos import analysis
from chaos.analysis import lost_service as ls
from chaos.recording import record_columns, records as rec
from chaos.claim import cost
from tests.unit.test_analysis import NS, T0, every, mark, req
from tests.unit.test_claim import ENVIRONMENT, outage_run, write_run


# ---------------------------------------------------------------- the oracle: the object-based code before
def old_fill(fracs):
    known = [i for i, f in enumerate(fracs) if f is not None]
    out = []
    for i, f in enumerate(fracs):
        if f is not None:
            out.append(f)
            continue
        left = max((k for k in known if k < i), default=None)
        right = min((k for k in known if k > i), default=None)
        near = [fracs[k] for k in (left, right) if k is not None]
        out.append(sum(near) / len(near) if near else 0.0)
    return out


def old_open_loop(requests, t0_ns, window_end_ns, base_fraction=0.0, width=None):
    rs = [r for r in requests if r.sent_ns < window_end_ns]
    in_flight = [r for r in rs if r.sent_ns < t0_ns < r.end_ns]
    window_s = (window_end_ns - t0_ns) / NS
    instants = len({r.sent_ns // 1_000_000 for r in rs if r.sent_ns >= t0_ns})
    w = width if width is not None else ls.width_s(instants, window_s)
    wn = int(round(w * NS))
    first = min((r.sent_ns for r in in_flight), default=t0_ns)
    pre = math.ceil((t0_ns - first) / wn) if first < t0_ns else 0
    start = t0_ns - pre * wn
    after = max(1, math.ceil((window_end_ns - t0_ns) / wn))
    if after > 1 and (window_end_ns - t0_ns) - (after - 1) * wn < wn / 2:
        after -= 1
    n_buckets = pre + after
    sent, bad = [0] * n_buckets, [0] * n_buckets
    for r in rs:
        if r.sent_ns < start:
            continue
        i = min(n_buckets - 1, (r.sent_ns - start) // wn)
        sent[i] += 1
        bad[i] += r.bad
    widths = [(wn if i < n_buckets - 1 else window_end_ns - (start + i * wn)) / NS for i in range(n_buckets)]
    fracs = old_fill([b / s if s else None for b, s in zip(bad, sent)])
    raw = sum((f - base_fraction) * dw for f, dw in zip(fracs, widths))
    empty = sum(1 for s in sent if not s)
    return {"model": ls.OPEN, "value_s": max(0.0, raw), "raw_s": raw, "clipped_from": raw if raw < 0 else None,
            "width_s": round(w, 6), "buckets": n_buckets, "empty_buckets": empty,
            "mostly_empty": ls._mostly_empty(empty, n_buckets, sum(sent)),
            "span_s": round((window_end_ns - start) / NS, 6), "base_fraction": base_fraction}


def old_closed_loop(requests, t0_ns, window_end_ns, users, base_share=0.0):
    rs = [r for r in requests if r.sent_ns < window_end_ns and (r.sent_ns >= t0_ns or r.end_ns > t0_ns)]
    start = min(min((r.sent_ns for r in rs), default=t0_ns), t0_ns)
    span_s = (window_end_ns - start) / NS
    lost_user_s = sum((r.end_ns - r.sent_ns) / NS for r in rs if r.bad)
    raw = lost_user_s / users - base_share * span_s
    return {"model": ls.CLOSED, "value_s": max(0.0, raw), "raw_s": raw, "clipped_from": raw if raw < 0 else None,
            "users": users, "lost_user_s": round(lost_user_s, 6), "span_s": round(span_s, 6),
            "base_share": base_share, "mostly_empty": False}


def old_base_fraction(requests):
    rs = list(requests)
    return sum(r.bad for r in rs) / len(rs) if rs else None


def old_base_share(requests, users, span_s):
    if users <= 0 or span_s <= 0:
        return None
    return sum((r.end_ns - r.sent_ns) / NS for r in requests if r.bad) / (users * span_s)


def end_of(r):
    return r.sent_ns + int((r.e2e_s or 0) * NS)


def old_fault_lost(records, f, window_end_ns, zones, first_inject_ns, slo):
    def reqs(rs, bad):
        return [ls.Req(r.sent_ns, end_of(r), bad(r)) for r in rs]

    keep = (lambda r: True) if zones is None else (lambda r: r.zone in zones)  # noqa: E731
    measured = [r for r in records.requests if r.phase == rec.MEASURE]
    mine = [r for r in measured if keep(r)]
    cut = f.get("window_cut_by")
    t0 = f["inject_ns"]
    window = [r for r in mine if r.sent_ns < window_end_ns and not (cut and end_of(r) > window_end_ns)]
    base = [r for r in mine if r.sent_ns < first_inject_ns and end_of(r) <= first_inject_ns]
    base_all = [r for r in measured if r.sent_ns < first_inject_ns and end_of(r) <= first_inject_ns]
    start = min((r.sent_ns for r in measured), default=first_inject_ns)
    base_span_s = max(0, first_inject_ns - start) / NS
    in_window = [r for r in window if r.sent_ns >= t0 or end_of(r) > t0]
    load = records.header.get("load") or {}
    closed = load.get("mode") == "closed"
    failed = lambda r: not r.ok  # noqa: E731
    missed = lambda r: not r.ok or not slo.met(r)  # noqa: E731
    out = {"requests": sum(1 for r in in_window), "failed": sum(1 for r in in_window if not r.ok),
           "slo_missed": sum(1 for r in in_window if missed(r)),
           "baseline": {"requests": len(base), "failed": sum(1 for r in base if not r.ok),
                        "slo_missed": sum(1 for r in base if missed(r)), "span_s": round(base_span_s, 4)},
           "model": ls.CLOSED if closed else ls.OPEN}
    if not in_window:
        out["why"] = "no request of the population in the fault's window"
        return out
    if not base:
        out["why"] = "no baseline: no request of the population ended before the injection"
        return out
    if closed:
        busy = sum(end_of(r) - r.sent_ns for r in base)
        busy_all = sum(end_of(r) - r.sent_ns for r in base_all)
        users = float(load.get("concurrency") or 0) * (busy / busy_all if busy_all else 1.0)
        if users <= 0 or base_span_s <= 0:
            out["why"] = "a closed loop whose users (load.concurrency) or baseline span is not known"
            return out
        for key, bad in (("lost", failed), ("slo", missed)):
            share = old_base_share(reqs(base, bad), users, base_span_s)
            out[key] = old_closed_loop(reqs(in_window, bad), t0, window_end_ns, users, share)
    else:
        for key, bad in (("lost", failed), ("slo", missed)):
            out[key] = old_open_loop(reqs(window, bad), t0, window_end_ns, old_base_fraction(reqs(base, bad)))
    return out


# ---------------------------------------------------------------- the comparison
def both(d, summary, population):
    """Per fault: (the columns' figure from the column reader, from a list's columns, the oracle's), as run_cost
    asks for them."""
    by_columns = record_columns.parse(d / "records.ndjson")
    by_lines = rec.read(d / "records.ndjson")
    assert by_lines.columns is None and by_columns.columns is not None
    slo = analysis.Definitions.from_dict(summary.get("definitions")).slo
    faults = summary["faults"]
    out = []
    for i, f in enumerate(faults):
        end_ns = (faults[i + 1]["inject_ns"] if i + 1 < len(faults)
                  else f["inject_ns"] + int(round((f.get("window_s") or 0) * NS)))
        zones = (f.get(population) or {}).get("zones") if population == "affected" else None
        zones = None if zones is None else set(zones)
        args = (f, end_ns, zones, faults[0]["inject_ns"], slo)
        out.append((cost.fault_lost(by_columns, *args), cost.fault_lost(by_lines, *args),
                    old_fault_lost(by_lines, *args)))
    return out


def same(d, summary, population="service"):
    got = both(d, summary, population)
    for columns, listed, oracle in got:
        assert columns == oracle and listed == oracle
    return [g[0] for g in got]


def test_an_open_loop_with_a_failing_and_slow_baseline_costs_as_before(tmp_path):
    s = outage_run(tmp_path / "r", failed=20, base_failed=7, slow=10)
    [lost] = same(tmp_path / "r", s)
    assert lost["failed"] == 20 and lost["slo_missed"] == 30 and lost["baseline"]["failed"] == 7
    assert lost["lost"]["value_s"] == pytest.approx(20 / 10 - 7 / 96 * 21)  # test_claim.cost_of


def test_a_zone_population_takes_its_zones_requests_only(tmp_path):
    rs = []
    for z in ("zone-a", "zone-b", "zone-c"):
        bad_to = 13 if z == "zone-b" else 10
        rs += every(0, 10, zone=z) + every(10, bad_to, ok=False, zone=z) + every(bad_to, 30, zone=z)
    s = write_run(tmp_path / "z", rs, [mark(rec.INJECT_START, 10, scope="zone", zones=("zone-b",))], 30, "zone",
                  front="zonal-lb")
    [affected] = same(tmp_path / "z", s, "affected")
    [service] = same(tmp_path / "z", s, "service")
    assert affected["failed"] == service["failed"] == 30
    assert affected["lost"]["value_s"] == pytest.approx(3.0) and service["lost"]["value_s"] == pytest.approx(1.0)


def test_a_closed_loops_affected_users_and_a_failing_baseline_cost_as_before(tmp_path):
    rs, i, t = [], 0, 0.0
    while t < 40:
        for z, d_s in (("a", 0.05), ("b", 0.6)):
            bad = (z == "b" and 10 <= t < 15) or 3 <= t < 4.2  # a few failed in the baseline
            rs.append(req(i, round(t, 6), ok=not bad, e2e=d_s, zone=z))
            i += 1
            t = round(t + d_s, 6)
    load = {**ENVIRONMENT["load"], "mode": "closed", "concurrency": 3}
    s = write_run(tmp_path / "c", rs, [mark(rec.INJECT_START, 10, scope="node", zones=("b",))], 40, "node",
                  front="zonal-lb", load=load)
    for population in ("affected", "service"):
        [lost] = same(tmp_path / "c", s, population)
        assert lost["model"] == ls.CLOSED and lost["baseline"]["failed"] > 0 and lost["lost"]["base_share"] > 0
    assert lost["lost"]["users"] == 3.0


def test_a_window_cut_by_the_next_fault_with_requests_in_flight_across_the_cut(tmp_path):
    # 2 s requests: those sent after 11 s are still in flight at the second injection (13 s): not the first's
    rs = every(0, 10) + every(10, 13, ok=False, e2e=2.0) + every(13, 14, ok=False) + every(14, 40)
    s = write_run(tmp_path / "m", rs, [mark(rec.INJECT_START, 10, fid="h", scope="head", zones=()),
                                       mark(rec.HEAL_START, 30, fid="h", scope="head", zones=()),
                                       mark(rec.INJECT_START, 13, fid="r", scope="replica", zones=("zone-c",))],
                  40, "head")
    assert [f["window_cut_by"] for f in s["faults"]] == ["r", None]
    first, second = same(tmp_path / "m", s)
    assert first["failed"] == 11 and second["failed"] == 19 + 10  # those in flight at 13 s are the second's


def test_requests_recorded_out_of_send_order_cost_as_before(tmp_path):
    """Several workers write their lines as requests end: the file is not in send order."""
    d = tmp_path / "w"
    s = outage_run(d, failed=25, base_failed=3)
    lines = (d / "records.ndjson").read_text().splitlines()
    body = lines[1:-2]
    random.Random(7).shuffle(body)
    (d / "records.ndjson").write_text("\n".join([lines[0], *body, *lines[-2:]]) + "\n")
    [lost] = same(d, s)
    assert lost["failed"] == 25


def test_the_lost_service_columns_equal_the_plain_python_figures_on_random_requests():
    r = random.Random(45)
    t0, end = 1_000 * NS, 1_060 * NS
    for trial in range(40):
        reqs = []
        for _ in range(r.randrange(1, 400)):
            sent = t0 + int(r.uniform(-5, 65) * NS) + (0 if trial % 4 else r.randrange(1000) * 3 * NS)
            reqs.append(ls.Req(sent, sent + int(r.expovariate(2) * NS), r.random() < 0.3))
        width = 2.5 if trial % 5 == 0 else None
        assert ls.open_loop(reqs, t0, end, 0.01, width) == old_open_loop(reqs, t0, end, 0.01, width)
        assert ls.closed_loop(reqs, t0, end, 3.5, 0.002) == old_closed_loop(reqs, t0, end, 3.5, 0.002)
        assert ls.base_fraction(reqs) == old_base_fraction(reqs)
        assert ls.base_share(reqs, 2.0, 30.0) == old_base_share(reqs, 2.0, 30.0)
        fracs = [None if r.random() < 0.6 else r.random() for _ in range(r.randrange(0, 30))]
        assert ls._fill(fracs) == old_fill(fracs)
