"""The report on synthetic run directories: one run, trials, a suite, a partial run, an old-format
run, a comparison; the suite table; the timeline's per-zone lanes.

Every number in the report must equal the one in the summary it was made from; a figure that
could not be measured is printed as unmeasurable with its reason, never as 0.
"""

import base64
import json
import re
import struct
from html.parser import HTMLParser

import pytest

from chaos import analysis
from chaos.core import bounds, suite
from chaos.commands import cli
from chaos.recording import records as rec
from chaos.reports import cells, report, timeline
from chaos.core import summary as summary_mod

NS = 1_000_000_000
T0 = 1_700_000_000 * NS
STEADY = {"window_s": 2.0, "min_success_ratio": 1.0}


def _write_run(d, outage_s, seed_shift=0.0, finish=True, bound_steady=20.0, zones=("zone-a",), down=("zone-a",),
               fault_zones=("zone-a",), scope="node", end_s=30.0, faults=((10.0, "node-1"),), experiment=None,
               header_definitions=True, bounds_extra=None, samples=None):
    """Requests every 0.1 s to each zone's target (``None``: a zone-less target) for ``end_s`` s; a fault
    at 10 s (or at each of ``faults``); requests to the ``down`` zones fail for ``outage_s`` after it.
    ``samples``: a function of t giving a :class:`chaos.recording.records.Sample` taken every 0.5 s (none by default)."""
    d.mkdir(parents=True)
    w = rec.RecordWriter(d / "records.ndjson")
    header = {"kind": "run", "run_id": d.name, "started_ns": T0,
              "load": {"mode": "open", "arrival": "constant", "rate": 10.0, "duration_s": 30, "warmup_s": 1,
                       "timeout_s": 10, "stream": True, "route": "chat", "prompt_words": [8, 48],
                       "max_tokens": [16, 48], "seed": 7}, "routing": "round_robin"}
    stated = {"max_time_to_steady_state_s": bound_steady, "max_failed_requests": 100, **(bounds_extra or {})}
    if header_definitions:  # what a run records since format 2; a format-1 run's header has neither
        header.update(summary_mod.header_block(experiment or "synthetic node kill", scope,
                                               analysis.Definitions(analysis.SteadyState(**STEADY)), stated,
                                               "test", "stream"))
    w.write(header)
    t, i = 0.0, 0
    while t < end_s - 1e-9:
        sent = T0 + int(t * NS)
        for z in zones:
            bad = z in down and any(at + seed_shift <= t < at + seed_shift + outage_s for at, _ in faults)
            w.write(rec.RequestRecord(id=i, target=f"worker-{(z or 'lb')[-1]}", url="http://127.0.0.1:1", zone=z,
                                      route="/v1/chat/completions", phase="warmup" if t < 1 else "measure",
                                      planned_ns=sent, sent_ns=sent, sent_offset_s=t, ok=not bad,
                                      failure=rec.CONNECT_REFUSED if bad else None,
                                      ttft_s=None if bad else 0.05 + 0.01 * (i % 5), e2e_s=0.3, itl_p95_s=0.01))
            i += 1
        if samples is not None and abs(t * 2 - round(t * 2)) < 1e-6:
            w.write(samples(t))
        for at, fid in faults:
            if abs(t - at) < 1e-6:
                for ev, dt in ((rec.INJECT_START, 0), (rec.INJECT_END, 0.01), (rec.HEAL_START, outage_s),
                               (rec.HEAL_END, outage_s + 0.2)):
                    w.write(rec.FaultMark(event=ev, fault_id=fid, scope=scope, target="worker-a",
                                          t_ns=T0 + int((at + dt) * NS), zones=list(fault_zones)))
        t = round(t + 0.1, 4)
    if finish:
        w.write({"kind": "end", "stopped_ns": T0 + int(end_s * NS)})
    w.close()
    if finish:
        records = rec.read(d / "records.ndjson")
        s = analysis.analyse(records, analysis.SteadyState(**STEADY))
        results = bounds.check(s, stated)
        s.update(experiment=experiment or "synthetic node kill", scope=scope, app="stream",
                 cluster={"backend": "local", "topology": "three-zones", "gcs_fault_tolerance": True,
                          "network": "loopback"},
                 bounds={"stated": stated, "source": "test", "results": results, "all_met": bounds.all_met(results)},
                 environment={"ray": "2.60.0", "availproof": "0.test", "load": records.header["load"]})
        (d / "summary.json").write_text(json.dumps(s))
    return d


class Cells(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tables, self.imgs, self.sections, self._cell = [], [], [], None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append({"class": dict(attrs).get("class"), "rows": []})
        elif tag == "tr":
            self.tables[-1]["rows"].append([])
        elif tag in ("td", "th"):
            self._cell = ""
        elif tag == "img":
            self.imgs.append(dict(attrs)["src"])
        elif tag == "section":
            self.sections.append(dict(attrs).get("id"))

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1]["rows"][-1].append(self._cell)
            self._cell = None


def _page(path):
    page = Cells()
    page.feed(path.read_text())
    return page


def _tables(page, cls):
    return [t for t in page.tables if t["class"] == cls]


def _figures(table):
    """A figures table as {figure: (affected, service)}."""
    assert table["rows"][0] == ["figure", "affected", "service"]
    return {r[0]: (r[1], r[2]) for r in table["rows"][1:]}


def _num(cell):
    return float(re.match(r"-?[0-9.]+", cell).group(0))


POP_FIGURES = ("time_to_impact_s", "time_to_detect_s", "time_to_first_success_s", "time_to_first_recovery_s",
               "time_to_steady_state_s", "time_to_last_failure_s")


def _assert_figures_equal_summary(table, f):
    shown = _figures(table)
    for col, pop in enumerate(("affected", "service")):
        p = f[pop]
        for key in POP_FIGURES:
            cell = shown[report.LABELS[key]][col]
            if p[key] is None:
                assert not re.match(r"^-?[0-9]", cell), (pop, key, cell)  # a null is never printed as a number
            else:
                assert _num(cell) == pytest.approx(p[key], abs=0.005), (pop, key, cell)
        assert shown["relapses"][col] == (str(p["relapses"]) if p["relapses"] is not None else
                                          f"unmeasurable: {f['unmeasurable'][pop + '.relapses']}")
        assert shown["requests"][col] == str(p["requests"])
        assert shown["failed/requests (ratio)"][col].startswith(f"{p['failed_total']}/{p['requests']}")
        assert shown["failed mid-stream"][col] == str(p["failed_mid_stream"])


# ---------------------------------------------------------------- one run
def test_single_run_report_numbers_equal_the_summary(tmp_path):
    d = _write_run(tmp_path / "node-kill", outage_s=3.0)
    paths = report.write(d)
    summary = json.loads((d / "summary.json").read_text())
    f = summary["faults"][0]
    assert f["failed"]["total"] == 30  # 3 s of failures at 10 req/s: the fixture itself is right
    page = _page(paths["html"])
    (faults,) = _tables(page, "faults")
    assert len(faults["rows"]) == 2  # one row per fault (the browser test counts them)
    cell = dict(zip(faults["rows"][0], faults["rows"][1]))
    assert int(cell["failed"]) == f["failed"]["total"]
    assert int(cell["mid-stream"]) == f["failed"]["mid_stream"]
    assert int(cell["unaffected zones"]) == f["failed"]["unaffected_zones"] == 0
    assert float(cell["resolution s"]) == pytest.approx(f["resolution_s"], abs=0.005)
    assert cell["affected"] == "zone-a" and cell["bounds met"] == "yes"
    (figs,) = _tables(page, "figures")
    _assert_figures_equal_summary(figs, f)
    assert _figures(figs)["time to steady state s"] == ("3.00", "3.00")
    # the timeline is embedded, and is the PNG written beside the run
    assert len(page.imgs) == 1 and page.imgs[0].startswith("data:image/png;base64,")
    png = base64.b64decode(page.imgs[0].split(",", 1)[1])
    assert png.startswith(b"\x89PNG") and png == (d / "timeline.png").read_bytes()
    assert "http" not in re.sub(r"http://127\.0\.0\.1:1", "", paths["html"].read_text())  # no external assets
    md = paths["md"].read_text()
    assert f"| 1 | node | worker-a | {f['failed']['total']} | {f['failed']['mid_stream']} |" in md
    a, s = f["affected"], f["service"]
    assert (f"| time to first success s | {a['time_to_first_success_s']:.2f} | "
            f"{s['time_to_first_success_s']:.2f} |") in md
    assert f"| failed/requests (ratio) | {a['failed_total']}/{a['requests']} ({a['failed_ratio']:.4f}) |" in md
    assert "Affected population: the fault's domain: requests sent to targets in zone-a." in md
    assert "| 1 | node-1 | max_time_to_steady_state_s | affected | 3.00 | 20.0 | met | - |" in md
    assert "ray: 2.60.0" in md and "open loop, constant arrivals at 10.0 req/s" in md
    assert "Not covered" in md and "not facilities" in md
    doc = json.loads(paths["json"].read_text())
    assert doc["experiments"][0]["trials"][0]["summary"]["faults"] == summary["faults"]
    assert doc["overview"][0]["affected_failed"] == f"{a['failed_total']}/{a['requests']} ({a['failed_ratio']:.4f})"


def test_zone_loss_affected_and_service_side_by_side(tmp_path):
    """Zone-b down for 8 s, zones a and c fine: the affected column shows the outage, the service's does not."""
    d = _write_run(tmp_path / "zone-loss", outage_s=8.0, zones=("zone-a", "zone-b", "zone-c"), down=("zone-b",),
                   fault_zones=("zone-b",), scope="zone")
    f = json.loads((d / "summary.json").read_text())["faults"][0]
    assert f["affected"]["time_to_first_success_s"] == pytest.approx(8.0, abs=0.01)
    assert f["service"]["time_to_first_success_s"] < 0.5
    page = _page(report.write(d, ("html",))["html"])
    (figs,) = _tables(page, "figures")
    _assert_figures_equal_summary(figs, f)
    aff, svc = _figures(figs)["time to first success s"]
    assert _num(aff) == pytest.approx(8.0, abs=0.01) and _num(svc) < 0.5  # the columns are not swapped
    (ov,) = _tables(page, "overview")
    row = dict(zip(ov["rows"][0], ov["rows"][1]))
    assert row["affected"] == "zone-b" and _num(row["affected time to first success s"]) == pytest.approx(8.0, abs=0.01)
    assert row["affected failed"].startswith(f"{f['affected']['failed_total']}/{f['affected']['requests']} ")
    assert row["service failed"].startswith(f"{f['service']['failed_total']}/{f['service']['requests']} ")


def test_unmeasurable_figures_print_their_reason_never_zero(tmp_path):
    """Zone-less targets (one front door) and a run that ends 1.5 s after the injection: steady state and
    failures in unaffected zones cannot be measured; the report says so with the reasons."""
    d = _write_run(tmp_path / "short", outage_s=0.5, zones=(None,), down=(None,), end_s=11.5,
                   bounds_extra={"max_failed_unaffected_zones": 0})
    summary = json.loads((d / "summary.json").read_text())
    f = summary["faults"][0]
    why_steady = f["unmeasurable"]["affected.time_to_steady_state_s"]
    why_zones = f["unmeasurable"]["failed.unaffected_zones"]
    assert f["affected"]["time_to_steady_state_s"] is None and f["failed"]["unaffected_zones"] is None
    assert f["affected"]["basis"] == "service" and "carry no zone" in f["affected"]["why"]
    paths = report.write(d)
    page = _page(paths["html"])
    (figs,) = _tables(page, "figures")
    _assert_figures_equal_summary(figs, f)
    shown = _figures(figs)
    assert shown["time to steady state s"][0] == f"unmeasurable: {why_steady}"
    assert shown["time to first recovery s"][0].startswith("unmeasurable: ")
    assert shown["recovered"][0] == f"unmeasurable: {f['unmeasurable']['affected.recovered']}"
    (faults,) = _tables(page, "faults")
    cell = dict(zip(faults["rows"][0], faults["rows"][1]))
    assert cell["unaffected zones"] == f"unmeasurable: {why_zones}"
    assert "0" not in cell["unaffected zones"].split(":")[0]
    (bt,) = _tables(page, "bounds")
    rows = {r[2]: dict(zip(bt["rows"][0], r)) for r in bt["rows"][1:]}
    steady = rows["max_time_to_steady_state_s"]
    assert steady["status"] == "UNMEASURABLE" and steady["value"] == "unmeasurable" and steady["reason"] == why_steady
    # one front door for every zone: no unaffected zone's users exist, the bound does not apply (never "met")
    assert rows["max_failed_unaffected_zones"]["status"] == "n/a"
    assert "one front door" in rows["max_failed_unaffected_zones"]["reason"]
    md = paths["md"].read_text()
    (note,) = [line for line in md.splitlines() if line.startswith("- Unmeasurable ") and
               "affected.time_to_steady_state_s" in line]
    assert note.endswith(f": {why_steady}.")
    assert "\n| time to steady state s | unmeasurable: " in md and "\n| time to steady state s | 0" not in md
    (ov,) = _tables(page, "overview")
    row = dict(zip(ov["rows"][0], ov["rows"][1]))
    assert row["verdict"] == "UNMEASURED" and row["affected time to steady state s"] == "unmeasurable"
    assert "unmeasurable" in row["what keeps it from passing"]
    # the suite table: "unmeasurable", "n/a" for the unaffected zones, never a 0 or "never"
    table = cells.table([{"experiment": "experiments/short.json", "verdict": 1, "summary": summary}])
    cols = [c.strip() for c in table.splitlines()[0].strip("|").split("|")]
    vals = [c.strip() for c in table.splitlines()[2].strip("|").split("|")]
    row = dict(zip(cols, vals))
    assert row["time to steady state s"] == "unmeasurable" and row["unaffected zones failed"] == "unmeasurable"
    assert row["verdict"] == "UNMEASURED" and row["bounds met"] == "unmeasured" and row["affected"] == "service"


def test_never_only_for_a_null_that_is_not_unmeasurable(tmp_path):
    """Failures to the end of the run: steady state is never reached ("never"), not unmeasurable;
    time to first success is never reached; nothing failed in the other zones."""
    d = _write_run(tmp_path / "down", outage_s=100.0, bound_steady=5.0)
    f = json.loads((d / "summary.json").read_text())["faults"][0]
    assert f["affected"]["time_to_steady_state_s"] is None
    assert "affected.time_to_steady_state_s" not in f["unmeasurable"]
    shown = _figures(_tables(_page(report.write(d, ("html",))["html"]), "figures")[0])
    assert shown["time to steady state s"] == ("never", "never")
    assert shown["time to first success s"] == ("never", "never")
    assert shown["recovered"] == ("no", "no")
    md = report.markdown(report.build(d))
    assert "| 1 | node-1 | max_time_to_steady_state_s | affected | never | 5.0 | VIOLATED | - |" in md
    # an undisturbed fault: first success does not apply, it is not "never"
    u = _write_run(tmp_path / "calm", outage_s=0.0)
    shown = _figures(_tables(_page(report.write(u, ("html",))["html"]), "figures")[0])
    assert shown["time to first success s"] == ("n/a (nothing failed)", "n/a (nothing failed)")
    assert shown["time to steady state s"] == ("0.00", "0.00")
    row = cells.table([{"experiment": "calm", "verdict": 0, "summary": json.loads((u / "summary.json").read_text())}])
    assert "| n/a | n/a | n/a | 0.00 | 0 |" in row  # impact, detect, first success n/a; steady 0.00; relapses 0


# ---------------------------------------------------------------- trials
def test_trials_report_gives_intervals_only_where_n_supports_them(tmp_path):
    run = tmp_path / "run"
    for k, outage in enumerate((2.0, 3.0, 4.0), 1):
        _write_run(run / f"trial-{k}", outage_s=outage)
    doc = report.build(run)
    (exp,) = doc["experiments"]
    st = exp["statistics"]["figures"]["time_to_steady_state_s"]
    values = [t["summary"]["faults"][-1]["affected"]["time_to_steady_state_s"] for t in exp["trials"]]
    assert st["n"] == 3 and st["median"] == pytest.approx(sorted(values)[1])
    assert st["median_ci95"] is None and st["p95_ci95"] is None  # 3 trials support neither interval
    rows = report.stat_rows(exp)
    assert all(r[7] == "—, N too small" and r[9] == "—, N too small" for r in rows)
    steady = next(r for r in rows if r[1] == "affected" and r[2] == "time to steady state s")
    assert steady[0] == "incident (last fault)" and _num(steady[6]) == pytest.approx(sorted(values)[1], abs=0.005)
    md = report.markdown(doc)
    assert "too few for an interval on the median" in md and "Wilson interval" in md
    assert "[" not in "".join(r[7] + r[9] for r in rows)
    assert exp["statistics"]["failed"]["failed"] == 20 + 30 + 40
    assert "Failed fraction, incident (last fault), affected: 90/" in md
    assert not any(r[0].startswith("fault ") for r in rows)  # one fault per trial: the incident only
    # six trials: an interval on the median, still none on the p95
    for k in range(1, 7):
        _write_run(tmp_path / "six" / f"trial-{k}", outage_s=1.0 + 0.5 * k)
    (six,) = report.build(tmp_path / "six")["experiments"]
    steady = next(r for r in report.stat_rows(six) if r[1] == "affected" and r[2] == "time to steady state s")
    lo, hi = six["statistics"]["figures"]["time_to_steady_state_s"]["median_ci95"]
    assert steady[7] == f"[{lo:.2f}, {hi:.2f}]" and steady[9] == "—, N too small"


def test_two_fault_trials_report_the_incident_and_each_position(tmp_path):
    """A second fault cuts the first one's window: the incident is the last fault, and each position has rows."""
    run = tmp_path / "second"
    for k in (1, 2):
        _write_run(run / f"trial-{k}", outage_s=2.0, faults=((8.0, "head-1"), (12.0, "head-2")), end_s=30.0)
    doc = report.build(run)
    (exp,) = doc["experiments"]
    rows = report.stat_rows(exp)
    assert {r[0] for r in rows} == {"incident (last fault)", "fault 1", "fault 2"}
    last = [t["summary"]["faults"][-1] for t in exp["trials"]]
    assert [f["fault_id"] for f in last] == ["head-2", "head-2"]
    inc = next(r for r in rows if r[0] == "incident (last fault)" and r[1] == "affected"
               and r[2] == "time to steady state s")
    assert _num(inc[6]) == pytest.approx(last[0]["affected"]["time_to_steady_state_s"], abs=0.005)
    first = exp["trials"][0]["summary"]["faults"][0]
    assert first["window_cut_by"] == "head-2"
    md = report.markdown(doc)
    assert "window cut" in md  # the cut fault's recovery is said to be n/a, not violated
    assert doc["overview"][0]["affected_steady_state"].startswith("median ")


# ---------------------------------------------------------------- a suite
def test_suite_report_opens_with_the_overview_in_suite_order(tmp_path):
    s = tmp_path / "suite"
    _write_run(s / "zone-loss", outage_s=5.0, finish=False)
    _write_run(s / "worker-node-kill", outage_s=2.0, bound_steady=1.0)
    _write_run(s / "replica-kill", outage_s=1.0, scope="replica")
    _write_run(s / "my-own", outage_s=1.0)  # not a suite experiment: last
    (s / "suite.md").write_text("| table |")
    doc = report.build(s)
    order = ["replica-kill", "worker-node-kill", "zone-loss", "my-own"]  # chaos/core/suite.py's order, then the rest
    assert [e["name"] for e in doc["experiments"]] == order
    assert [r["experiment"] for r in doc["overview"]] == order
    assert [e["partial"] for e in doc["experiments"]] == [False, False, True, False]
    md = report.markdown(doc)
    assert "PARTIAL RUN" in md
    sections = [line for line in md.splitlines() if line.startswith("## ")]
    assert sections[0] == "## Overview" and len(sections) == 5
    overview = md.split("## Overview", 1)[1].split("\n## ", 1)[0]
    names = [line.split("|")[1].strip() for line in overview.splitlines() if line.startswith("| ")][1:]
    assert names == order
    verdicts = {r["experiment"]: r["verdict"] for r in doc["overview"]}
    assert verdicts["worker-node-kill"] == "VIOLATED" and verdicts["replica-kill"] == "PASS"
    assert verdicts["zone-loss"].startswith("PARTIAL")
    page = _page(report.write(s, ("html",))["html"])
    assert page.sections == ["overview"] + order
    assert page.tables[0]["class"] == "overview" and [r[0] for r in page.tables[0]["rows"][1:]] == order
    # the suite's own record of its order wins
    (s / "suite.json").write_text(json.dumps({"experiments": ["zone-loss", "experiments/my-own.json",
                                                               "replica-kill", "worker-node-kill"]}))
    assert [r["experiment"] for r in report.build(s)["overview"]] == ["zone-loss", "my-own", "replica-kill",
                                                                      "worker-node-kill"]
    assert "in suite order (from suite.json)" in report.markdown(report.build(s))


# ---------------------------------------------------------------- an old-format run
def _format_1(summary):
    """A summary as written before format 2: one population, its figures at the fault's top level."""
    old = json.loads(json.dumps(summary))
    old.pop("format_version"), old.pop("definitions")
    for f in old["faults"]:
        svc = f.pop("service")
        f.pop("affected"), f.pop("unmeasurable")
        f.update(time_to_detect_s=svc["time_to_impact_s"], time_to_first_success_s=svc["time_to_first_success_s"],
                 time_to_steady_state_s=svc["time_to_steady_state_s"], requests_in_window=svc["requests"],
                 disrupted=svc["disrupted"], recovered=svc["recovered"], failed_ratio=svc["failed_ratio"],
                 time_to_last_failure_s=svc["time_to_last_failure_s"])
    old["bounds"]["results"] = [{k: v for k, v in r.items() if k not in ("status", "population", "reason")}
                                for r in old["bounds"]["results"]]
    return old


@pytest.mark.parametrize("header_definitions", [True, False])
def test_old_format_run_is_rederived_from_its_records(tmp_path, header_definitions):
    d = _write_run(tmp_path / "old", outage_s=3.0, header_definitions=header_definitions)
    current = json.loads((d / "summary.json").read_text())
    (d / "summary.json").write_text(json.dumps(_format_1(current)))
    paths = report.write(d)
    doc = json.loads(paths["json"].read_text())
    s = doc["experiments"][0]["trials"][0]["summary"]
    run = rec.read(d / "records.ndjson")
    if header_definitions:  # the definitions the run recorded: the same figures as the run's own
        expected = analysis.analyse(run, analysis.SteadyState(**STEADY))
        assert s["definitions"]["steady_state"]["window_s"] == 2.0
        assert s["faults"] == current["faults"]
    else:
        expected = analysis.analyse(run)
        assert s["definitions"]["steady_state"]["window_s"] == analysis.SteadyState().window_s
    assert s["faults"] == json.loads(json.dumps(expected["faults"]))
    assert s["format_version"] == analysis.FORMAT_VERSION and s["rederived"]["from_format"] == 1
    assert s["experiment"] == "synthetic node kill" and s["bounds"]["stated"] == current["bounds"]["stated"]
    assert all(r["status"] in (bounds.MET, bounds.VIOLATED) and r["population"] == "affected"
               for r in s["bounds"]["results"])
    md = paths["md"].read_text()
    assert "**RE-DERIVED**: summary.json is of format 1" in md
    origin = "the run header" if header_definitions else "the defaults"
    assert f"with the definitions of {origin}" in md
    _assert_figures_equal_summary(_tables(_page(paths["html"]), "figures")[0], s["faults"][0])
    # no records to re-derive from: one clear line
    (d / "records.ndjson").unlink()
    from chaos.base.errors import UsageError

    with pytest.raises(UsageError, match="format 1 summary .* no records.ndjson"):
        report.build(d)


# ---------------------------------------------------------------- comparison, cli
def test_compare_says_when_a_difference_exceeds_the_intervals(tmp_path):
    for k in range(1, 7):
        _write_run(tmp_path / "fast" / f"trial-{k}", outage_s=1.0 + 0.1 * k)
        _write_run(tmp_path / "slow" / f"trial-{k}", outage_s=8.0 + 0.1 * k)
        _write_run(tmp_path / "fast2" / f"trial-{k}", outage_s=1.05 + 0.1 * k)
    fast, slow, fast2 = (report.build(tmp_path / n) for n in ("fast", "slow", "fast2"))
    (c,) = report.compare(fast, slow)
    rows = {r["figure"]: r for r in c["rows"]}
    assert rows["time to steady state s"]["exceeds_intervals"] is True
    assert rows["time to steady state s"]["diff"] == pytest.approx(7.0, abs=0.3)
    assert rows["failed fraction"]["exceeds_intervals"] is True
    assert c["a_population"] == c["b_population"] == "affected"
    (same,) = report.compare(fast, fast2)
    assert {r["figure"]: r for r in same["rows"]}["time to steady state s"]["exceeds_intervals"] is False
    (one,) = report.compare(report.build(tmp_path / "fast" / "trial-1"), report.build(tmp_path / "slow" / "trial-1"))
    assert {r["figure"]: r for r in one["rows"]}["time to steady state s"]["exceeds_intervals"] is None
    md = report.compare_markdown([one], "a", "b")
    assert "cannot tell" in md and "—, N too small" in md


def test_cli_report_formats_and_errors(tmp_path, capsys):
    d = _write_run(tmp_path / "r", outage_s=2.0)
    assert cli.main(["report", str(d), "--format", "all"]) == 0
    assert all((d / f"report.{x}").exists() for x in ("md", "html", "json"))
    assert cli.main(["report", str(tmp_path / "nothing")]) == 2
    assert "no such run directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert cli.main(["report", str(tmp_path / "empty")]) == 2
    assert cli.main(["report", "--compare", str(d), str(d), "--format", "json"]) == 0


# ---------------------------------------------------------------- the suite table
def test_suite_table_columns_equal_the_summary(tmp_path):
    d = _write_run(tmp_path / "zl", outage_s=8.0, zones=("zone-a", "zone-b", "zone-c"), down=("zone-b",),
                   fault_zones=("zone-b",), scope="zone")
    summary = json.loads((d / "summary.json").read_text())
    f = summary["faults"][0]
    a, s = f["affected"], f["service"]
    table = cells.table([{"experiment": "experiments/zone-loss.json", "verdict": 0, "summary": summary},
                         {"experiment": "experiments/redis-loss.json", "verdict": 2, "error": "boom", "summary": None}])
    lines = table.splitlines()
    cols = [c.strip() for c in lines[0].strip("|").split("|")]
    assert cols == list(cells.TABLE_COLUMNS)
    row = dict(zip(cols, (c.strip() for c in lines[2].strip("|").split("|"))))
    assert row["experiment"] == "zone-loss" and row["affected"] == "zone-b"
    assert row["failed (mid-stream)"] == f"{a['failed_total']} ({a['failed_mid_stream']})"
    assert row["affected requests"] == str(a["requests"])
    for key, col in (("time_to_impact_s", "time to impact s"), ("time_to_detect_s", "time to detect s"),
                     ("time_to_first_success_s", "time to first success s"),
                     ("time_to_steady_state_s", "time to steady state s")):
        assert float(row[col]) == pytest.approx(a[key], abs=0.005), col
    assert row["relapses"] == str(a["relapses"]) and row["service failed"] == str(s["failed_total"])
    assert float(row["service time to first success s"]) == pytest.approx(s["time_to_first_success_s"], abs=0.005)
    assert float(row["time to first success s"]) == pytest.approx(8.0, abs=0.01)
    assert row["unaffected zones failed"] == "0" and row["verdict"] == "PASS"
    assert lines[3].startswith("| redis-loss |") and "ERROR: boom" in lines[3]
    assert len(lines[3].strip("|").split("|")) == len(cols)


# ---------------------------------------------------------------- the timeline
def _records(zones, down="zone-b"):
    rs, i = [], 0
    for z in zones:
        for k in range(50):
            t = k * 0.2
            rs.append(rec.RequestRecord(id=i, target="t", url="u", zone=z, route="/v1/completions", phase="measure",
                                        planned_ns=T0 + int(t * NS), sent_ns=T0 + int(t * NS), sent_offset_s=t,
                                        ok=not (z == down and 3 <= t < 6), ttft_s=0.1, e2e_s=0.3))
            i += 1
    return rs


def test_timeline_has_one_lane_per_zone_and_one_for_zone_less_targets():
    lanes = timeline.lane_layout(_records(["zone-c", "zone-a", None, "zone-b"]), fault_zones=["zone-b"])
    assert [lane["zone"] for lane in lanes] == ["zone-a", "zone-b", "zone-c", None]
    assert [lane["y"] for lane in lanes] == [3, 2, 1, 0]  # the first lane on top
    assert [lane["failed"] for lane in lanes] == [0, 15, 0, 0] and all(lane["requests"] == 50 for lane in lanes)
    assert [lane["in_fault"] for lane in lanes] == [False, True, False, False]
    assert lanes[3]["label"].startswith(timeline.NO_ZONE)
    assert [lane["zone"] for lane in timeline.lane_layout(_records(["zone-a", "zone-b"]))] == ["zone-a", "zone-b"]
    assert [lane["zone"] for lane in timeline.lane_layout(_records([None]))] == [None]


def test_timeline_png_of_a_zone_loss(tmp_path):
    rs = _records(["zone-a", "zone-b", "zone-c", None])
    marks = [rec.FaultMark(event=ev, fault_id="z", scope="zone", target="zone-b", t_ns=T0 + int(t * NS),
                           zones=["zone-b"]) for ev, t in ((rec.INJECT_START, 3.0), (rec.HEAL_START, 5.5),
                                                           (rec.HEAL_END, 6.0))]
    run = rec.RunRecords(header={}, requests=rs, marks=marks, footer={"stopped_ns": T0 + 10 * NS})
    summary = analysis.analyse(run, analysis.SteadyState(**STEADY))
    path = timeline.write(tmp_path, run, summary)
    data = path.read_bytes()
    assert path.name == "timeline.png" and data.startswith(b"\x89PNG\r\n\x1a\n")
    assert struct.unpack(">II", data[16:24]) == (1000, 560)  # the size the HTML test expects
    empty = timeline.png(rec.RunRecords(header={}, requests=[], marks=[], footer=None), {})
    assert empty.startswith(b"\x89PNG")


from hypothesis import HealthCheck, given, settings, strategies as st  # noqa: E402

_lines = st.one_of(
    st.binary(max_size=80),
    st.dictionaries(st.sampled_from(["kind", "id", "sent_ns", "ok", "phase", "event", "t_ns", "fault_id", "scope",
                                     "target", "zones", "failure", "ttft_s", "e2e_s"]),
                    st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=6),
                              st.sampled_from(["request", "mark", "run", "end", "inject_start", "measure"])),
                    max_size=8).map(lambda d: json.dumps(d).encode()),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(_lines, max_size=12),
       summary=st.one_of(st.none(), st.binary(max_size=60),
                         st.dictionaries(st.sampled_from(["requests", "faults", "bounds", "experiment"]),
                                         st.one_of(st.none(), st.integers(), st.lists(st.integers(), max_size=2),
                                                   st.dictionaries(st.text(max_size=3), st.integers(), max_size=2)),
                                         max_size=4).map(lambda d: json.dumps(d).encode())))
def test_fuzz_report_on_damaged_run_directories(tmp_path_factory, lines, summary):
    """A damaged records file or summary gives a report or one UsageError line, never a traceback."""
    from chaos.base.errors import UsageError

    d = tmp_path_factory.mktemp("damaged")
    (d / "records.ndjson").write_bytes(b"\n".join(lines))
    if summary is not None:
        (d / "summary.json").write_bytes(summary)
    try:
        report.markdown(report.build(d))
    except UsageError as e:
        assert "\n" not in str(e)


# ---------------------------------------------------------------- control plane and capacity
def _planes(gcs_down=(10.5, 13.0), controller_down=(10.5, 14.0), lost=(10.0, 16.0), nodes_down=(10.0, 12.0)):
    """Samples of a head outage with zone-a's model replica and node lost: the GCS down over ``gcs_down``, the
    controller over ``controller_down``, zone-a's StreamTarget replica not RUNNING over ``lost``, zone-a's
    node not alive over ``nodes_down`` (each [from, to) in seconds of the run)."""
    def inside(t, span):
        return span is not None and span[0] <= t < span[1]

    def sample(t):
        gcs, ctl = not inside(t, gcs_down), not inside(t, controller_down)
        replicas = {"StreamTarget": {"zone-a": 0 if inside(t, lost) else 1, "zone-b": 1},
                    "OpenAiIngress": {"zone-b": 1}}
        return rec.Sample(t_ns=T0 + int(t * NS), took_s=0.01, gcs_ok=gcs,
                          gcs_latency_s=0.002 + t / 10_000 if gcs else None,
                          controller_ok=ctl, app_status="RUNNING" if ctl else None, replicas=replicas if ctl else None,
                          nodes_alive={"zone-a": 0 if inside(t, nodes_down) else 1, "zone-b": 1} if gcs else None)
    return sample


def _planes_table(page):
    (table,) = _tables(page, "planes")
    assert table["rows"][0] == list(report.PLANE_COLUMNS)
    return {(r[0], r[1]): r[2] for r in table["rows"][1:]}


def test_control_plane_and_capacity_in_the_report_equal_the_summary(tmp_path):
    d = _write_run(tmp_path / "head-kill-gcs-ft", outage_s=0.0, zones=("zone-a", "zone-b"), down=(), fault_zones=(),
                   scope="head", samples=_planes())
    summary = json.loads((d / "summary.json").read_text())
    f = summary["faults"][0]
    cp, cap = f["control_plane"], f["capacity"]
    # the fixture is right: the control plane down from 0.5 s to 4.0 s after the kill, capacity back at 6.0 s
    assert (cp["time_to_loss_s"], cp["time_to_restored_s"], cp["outage_s"]) == (0.5, 4.0, 3.5)
    assert (cap["target_replicas"], cap["min_replicas"], cap["time_to_lost_s"],
            cap["time_to_restored_s"]) == (3, 2, 0.0, 6.0)
    paths = report.write(d)
    page = _page(paths["html"])
    shown = _planes_table(page)
    for key, label in report.CONTROL_PLANE_LABELS.items():
        cell = shown[("control plane", label)]
        if key != "samples":
            assert _num(cell) == pytest.approx(cp[key], abs=0.005), (key, cell)
    assert int(shown[("control plane", "samples in the window")]) == cp["samples"] == 40
    for key in ("target_replicas", "min_replicas", "min_ratio", "time_to_lost_s", "time_to_restored_s",
                "nodes_min_alive"):
        cell = shown[("capacity", report.CAPACITY_LABELS[key])]
        assert _num(cell) == pytest.approx(cap[key], abs=0.005), (key, cell)
    assert shown[("capacity", "target placement")] == "OpenAiIngress: zone-b 1; StreamTarget: zone-a 1, zone-b 1"
    assert shown[("capacity", "nodes min alive per zone")] == "zone-a 0, zone-b 1"
    assert shown[("capacity", "time to lost s")] == "0.00"  # lost at the kill: a real 0, not a null
    # the overview and the markdown carry the same numbers
    (ov,) = _tables(page, "overview")
    row = dict(zip(ov["rows"][0], ov["rows"][1]))
    assert _num(row["control-plane outage s"]) == pytest.approx(cp["outage_s"], abs=0.005)
    assert _num(row["capacity restored s"]) == pytest.approx(cap["time_to_restored_s"], abs=0.005)
    md = paths["md"].read_text()
    assert f"| control plane | outage s | {cp['outage_s']:.2f} |" in md
    assert f"| capacity | time to restored s | {cap['time_to_restored_s']:.2f} |" in md
    doc = json.loads(paths["json"].read_text())
    assert doc["overview"][0]["control_plane_outage"] == f"{cp['outage_s']:.2f}"


def test_a_plane_never_lost_says_so_and_a_run_without_samples_is_unmeasurable_never_zero(tmp_path):
    calm = _write_run(tmp_path / "calm", outage_s=2.0, samples=_planes(None, None, None, None))
    f = json.loads((calm / "summary.json").read_text())["faults"][0]
    assert f["control_plane"]["outage_s"] == 0 and f["capacity"]["time_to_restored_s"] == 0
    shown = _planes_table(_page(report.write(calm, ("html",))["html"]))
    assert shown[("control plane", "outage s")] == "0.00 (never down)"
    assert shown[("control plane", "time to loss s")] == "never"
    assert shown[("capacity", "time to restored s")] == "0.00 (never lost)"
    # a run recorded without the sampler: every plane figure unmeasurable, with the summary's reason
    bare = _write_run(tmp_path / "bare", outage_s=2.0)
    f = json.loads((bare / "summary.json").read_text())["faults"][0]
    why = f["unmeasurable"]
    assert f["control_plane"]["outage_s"] is None and why["control_plane.outage_s"]
    page = _page(report.write(bare, ("html",))["html"])
    shown = _planes_table(page)
    for (plane, label), key in ((("control plane", "outage s"), "control_plane.outage_s"),
                                (("control plane", "time to restored s"), "control_plane.time_to_restored_s"),
                                (("capacity", "time to restored s"), "capacity.time_to_restored_s"),
                                (("capacity", "min replicas"), "capacity.min_replicas"),
                                (("capacity", "nodes min alive"), "capacity.nodes_min_alive")):
        assert shown[(plane, label)] == f"unmeasurable: {why[key]}", (plane, label)
    assert not any(re.match(r"^-?[0-9]", v) for k, v in shown.items() if k[1] != "samples in the window")
    (ov,) = _tables(page, "overview")
    row = dict(zip(ov["rows"][0], ov["rows"][1]))
    assert row["control-plane outage s"] == "unmeasurable" and row["capacity restored s"] == "unmeasurable"


def test_capacity_unknown_at_the_end_is_unmeasurable_and_an_unended_outage_is_never(tmp_path):
    """The controller stops answering 5 s before the end (and the GCS with it): the control plane is never
    restored in the window ("never"), the capacity at the end is unknown ("unmeasurable", with why)."""
    d = _write_run(tmp_path / "second", outage_s=1.0, samples=_planes((25.0, 99.0), (25.0, 99.0), None, None))
    f = json.loads((d / "summary.json").read_text())["faults"][0]
    assert f["control_plane"]["time_to_restored_s"] is None and f["control_plane"]["outage_s"] is None
    assert "control_plane.outage_s" not in f["unmeasurable"]
    why = f["unmeasurable"]["capacity.time_to_restored_s"]
    shown = _planes_table(_page(report.write(d, ("html",))["html"]))
    assert shown[("control plane", "outage s")] == "never"
    assert shown[("control plane", "time to loss s")] == "15.00"
    assert shown[("capacity", "time to restored s")] == f"unmeasurable: {why}"
    assert shown[("capacity", "time to lost s")] == "never"  # known samples never fell below the target
    table = cells.table([{"experiment": "experiments/x.json", "verdict": 1,
                          "summary": json.loads((d / "summary.json").read_text())}]).splitlines()
    row = dict(zip((c.strip() for c in table[0].strip("|").split("|")),
                   (c.strip() for c in table[2].strip("|").split("|"))))
    assert row["control-plane outage s"] == "never" and row["capacity restored s"] == "unmeasurable"


def test_suite_table_plane_columns_equal_the_summary(tmp_path):
    d = _write_run(tmp_path / "hk", outage_s=0.0, down=(), fault_zones=(), scope="head", samples=_planes())
    summary = json.loads((d / "summary.json").read_text())
    f = summary["faults"][0]
    lines = cells.table([{"experiment": "experiments/head-kill-gcs-ft.json", "verdict": 0,
                          "summary": summary}]).splitlines()
    cols = [c.strip() for c in lines[0].strip("|").split("|")]
    assert cols[-4:] == ["control-plane outage s", "capacity restored s", "bounds met", "verdict"]
    row = dict(zip(cols, (c.strip() for c in lines[2].strip("|").split("|"))))
    assert float(row["control-plane outage s"]) == pytest.approx(f["control_plane"]["outage_s"], abs=0.005) == 3.5
    assert float(row["capacity restored s"]) == pytest.approx(f["capacity"]["time_to_restored_s"], abs=0.005) == 6.0
    # a summary written before the sampler has no planes: n/a, not 0 and not never
    old = json.loads(json.dumps(summary))
    for x in old["faults"]:
        x.pop("control_plane"), x.pop("capacity")
    row = dict(zip(cols, (c.strip() for c in cells.table([{"experiment": "hk", "verdict": 0, "summary": old}])
                          .splitlines()[2].strip("|").split("|"))))
    assert row["control-plane outage s"] == "n/a" and row["capacity restored s"] == "n/a"


def test_overview_plane_columns_over_trials(tmp_path):
    base = tmp_path / "hk"
    _write_run(base / "trial-1", outage_s=0.0, down=(), fault_zones=(), scope="head", samples=_planes())
    _write_run(base / "trial-2", outage_s=0.0, down=(), fault_zones=(), scope="head",
               samples=_planes((10.5, 12.0), (10.5, 12.0), (10.0, 13.0), None))
    _write_run(base / "trial-3", outage_s=0.0, down=(), fault_zones=(), scope="head")  # not sampled
    row = report.build(base)["overview"][0]
    assert row["control_plane_outage"] == "median 1.50, 1 unmeasurable"  # 3.5 and 1.5: nearest rank, the lower
    assert row["capacity_restored"] == "median 3.00, 1 unmeasurable"  # 6.0 and 3.0


def test_suite_writes_its_order_for_the_report(tmp_path):
    path = suite.write_order(tmp_path / "s", ["zone-loss", "replica-kill"])
    assert json.loads(path.read_text()) == {"experiments": ["zone-loss", "replica-kill"]}
    assert report.suite_order(tmp_path / "s") == (["zone-loss", "replica-kill"], "suite.json")


def test_timeline_lane_layout_has_the_plane_lanes_under_the_request_lanes():
    sample = _planes()
    samples = [sample(k * 0.5) for k in range(60)]
    lanes = timeline.lane_layout(_records(["zone-b", "zone-a"]), ["zone-a"], samples)
    assert [lane["kind"] for lane in lanes] == ["requests", "requests", "control_plane", "replicas", "nodes"]
    assert [lane["zone"] for lane in lanes[:2]] == ["zone-a", "zone-b"]
    cp, reps, nodes = lanes[2:]
    # the band: up, GCS down 10.5-13 s, controller down 13-14 s, up; each segment to the next sample
    assert [(round((a - T0) / NS, 2), round((b - T0) / NS, 2), st) for a, b, st in cp["segments"]] == [
        (0.0, 10.5, timeline.CP_UP), (10.5, 13.0, timeline.CP_GCS_DOWN), (13.0, 14.0, timeline.CP_CONTROLLER_DOWN),
        (14.0, 30.0, timeline.CP_UP)]
    assert cp["down"] == 7 and cp["samples"] == 60
    # replicas: the model deployment only, unknown (None) while the controller did not answer, never 0
    assert reps["deployments"] == ["StreamTarget"] and "StreamTarget" in reps["label"]
    assert reps["zones"] == ["zone-a", "zone-b"]
    by_t = {round((t - T0) / NS, 2): v for t, v in reps["series"]["zone-a"]}
    assert by_t[9.5] == 1 and by_t[10.0] == 0 and by_t[12.0] is None and by_t[15.0] == 0 and by_t[16.0] == 1
    assert all(v == 1 for t, v in reps["series"]["zone-b"] if v is not None)
    by_t = {round((t - T0) / NS, 2): v for t, v in nodes["series"]["zone-a"]}
    assert by_t[10.0] == 0 and by_t[11.0] is None and by_t[13.0] == 1
    # without a model deployment, every deployment counts, and the label says so
    other = [rec.Sample(t_ns=T0, took_s=0.0, gcs_ok=True, gcs_latency_s=0.001, controller_ok=True, app_status=None,
                        replicas={"Ingress": {"zone-a": 2}, "Router": {"zone-a": 1}}, nodes_alive={"zone-a": 1})]
    reps = timeline.lane_layout([], None, other)[1]
    assert reps["deployments"] is None and "all deployments" in reps["label"] and reps["series"]["zone-a"][0][1] == 3
    # no samples (a run before the sampler): the request lanes only
    assert [lane["kind"] for lane in timeline.lane_layout(_records(["zone-a"]), None, [])] == ["requests"]


def test_timeline_png_with_the_plane_lanes_keeps_its_size(tmp_path):
    d = _write_run(tmp_path / "hk", outage_s=0.0, zones=("zone-a", "zone-b"), down=(), fault_zones=(), scope="head",
                   samples=_planes())
    run = rec.read(d / "records.ndjson")
    assert len(run.samples) == 60
    data = timeline.png(run, json.loads((d / "summary.json").read_text()))
    assert struct.unpack(">II", data[16:24]) == (1000, 560)


def test_a_capacity_sweeps_directory_is_not_a_run_of_the_suite(tmp_path):
    """`availproof capacity` writes records.ndjson (a run header per step) and capacity.json: the report, the
    claim and `analyse` of a suite directory leave it out (it measured no fault); a sweep cut short before
    its capacity.json is told by its records' first header."""
    from chaos.recording import records as rec

    run, sweep, cut = tmp_path / "replica-kill", tmp_path / "capacity", tmp_path / "capacity-cut"
    for d in (run, sweep, cut):
        d.mkdir()
    (run / "records.ndjson").write_text('{"kind": "run", "run_id": "r"}\n')
    (sweep / "records.ndjson").write_text('{"kind": "run", "run_id": "c", "capacity_step": {"index": 1, "rate_rps": 2}}\n')
    (sweep / "capacity.json").write_text("{}")
    (cut / "records.ndjson").write_text('{"kind": "run", "run_id": "c", "capacity_step": {"index": 1, "rate_rps": 2}}\n')
    assert [rec.is_run_dir(d) for d in (run, sweep, cut, tmp_path)] == [True, False, False, False]
