"""The report on synthetic run directories: one run, trials, a suite, a partial run, a comparison.

Every number in the report must equal the one in the summary it was made from.
"""

import base64
import json
import re
from html.parser import HTMLParser

import pytest

from chaos import analysis, bounds, cli, records as rec, report

NS = 1_000_000_000
T0 = 1_700_000_000 * NS


def _write_run(d, outage_s, seed_shift=0.0, finish=True, bound_steady=20.0):
    """Requests every 0.1 s for 30 s; a fault at 10 s; requests fail for ``outage_s``."""
    d.mkdir(parents=True)
    w = rec.RecordWriter(d / "records.ndjson")
    w.write({"kind": "run", "run_id": d.name, "started_ns": T0,
             "load": {"mode": "open", "arrival": "constant", "rate": 10.0, "duration_s": 30, "warmup_s": 1,
                      "timeout_s": 10, "stream": True, "route": "chat", "prompt_words": [8, 48],
                      "max_tokens": [16, 48], "seed": 7}, "routing": "round_robin"})
    t, i = 0.0, 0
    while t < 30:
        sent = T0 + int(t * NS)
        bad = 10 + seed_shift <= t < 10 + seed_shift + outage_s
        w.write(rec.RequestRecord(id=i, target="worker-a", url="http://127.0.0.1:1", zone="zone-a",
                                  route="/v1/chat/completions", phase="warmup" if t < 1 else "measure",
                                  planned_ns=sent, sent_ns=sent, sent_offset_s=t, ok=not bad,
                                  failure=rec.CONNECT_REFUSED if bad else None, ttft_s=None if bad else 0.05 + 0.01 * (i % 5),
                                  e2e_s=0.3, itl_p95_s=0.01))
        if abs(t - 10) < 1e-6:
            for ev, dt in ((rec.INJECT_START, 0), (rec.INJECT_END, 0.01), (rec.HEAL_START, outage_s),
                           (rec.HEAL_END, outage_s + 0.2)):
                w.write(rec.FaultMark(event=ev, fault_id="node-1", scope="node", target="worker-a",
                                      t_ns=T0 + int((10 + dt) * NS), zones=["zone-a"]))
        t = round(t + 0.1, 4)
        i += 1
    if finish:
        w.write({"kind": "end", "stopped_ns": T0 + 30 * NS})
    w.close()
    if finish:
        records = rec.read(d / "records.ndjson")
        s = analysis.analyse(records, analysis.SteadyState(window_s=2.0, min_success_ratio=1.0))
        stated = {"max_time_to_steady_state_s": bound_steady, "max_failed_requests": 100}
        results = bounds.check(s, stated)
        s.update(experiment="synthetic node kill", scope="node", app="stream",
                 cluster={"backend": "local", "topology": "three-zones", "gcs_fault_tolerance": True,
                          "network": "loopback"},
                 bounds={"stated": stated, "source": "test", "results": results, "all_met": bounds.all_met(results)},
                 environment={"ray": "2.60.0", "availproof": "0.test", "load": records.header["load"]})
        (d / "summary.json").write_text(json.dumps(s))
    return d


class Cells(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tables, self.imgs, self._cell = [], [], None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append({"class": dict(attrs).get("class"), "rows": []})
        elif tag == "tr":
            self.tables[-1]["rows"].append([])
        elif tag in ("td", "th"):
            self._cell = ""
        elif tag == "img":
            self.imgs.append(dict(attrs)["src"])

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1]["rows"][-1].append(self._cell)
            self._cell = None


def test_single_run_report_numbers_equal_the_summary(tmp_path):
    d = _write_run(tmp_path / "node-kill", outage_s=3.0)
    paths = report.write(d)
    summary = json.loads((d / "summary.json").read_text())
    f = summary["faults"][0]
    assert f["failed"]["total"] == 30  # 3 s of failures at 10 req/s: the fixture itself is right
    page = Cells()
    page.feed(paths["html"].read_text())
    faults = next(t for t in page.tables if t["class"] == "faults")
    head, row = faults["rows"][0], faults["rows"][1]
    cell = dict(zip(head, row))
    assert int(cell["failed"]) == f["failed"]["total"]
    assert int(cell["mid-stream"]) == f["failed"]["mid_stream"]
    assert float(cell["detect s"]) == pytest.approx(f["time_to_detect_s"], abs=0.005)
    assert float(cell["first success s"]) == pytest.approx(f["time_to_first_success_s"], abs=0.005)
    assert float(cell["steady state s"]) == pytest.approx(f["time_to_steady_state_s"], abs=0.005)
    assert float(cell["resolution s"]) == pytest.approx(f["resolution_s"], abs=0.005)
    assert cell["bounds met"] == "yes"
    # the timeline is embedded, and is the PNG written beside the run
    assert len(page.imgs) == 1 and page.imgs[0].startswith("data:image/png;base64,")
    png = base64.b64decode(page.imgs[0].split(",", 1)[1])
    assert png.startswith(b"\x89PNG") and png == (d / "timeline.png").read_bytes()
    assert "http" not in re.sub(r"http://127\.0\.0\.1:1", "", paths["html"].read_text())  # no external assets
    md = paths["md"].read_text()
    assert f"| 1 | node | worker-a | {f['failed']['total']} |" in md
    assert "ray: 2.60.0" in md and "open loop, constant arrivals at 10.0 req/s" in md
    assert "Not covered" in md and "not facilities" in md
    doc = json.loads(paths["json"].read_text())
    assert doc["experiments"][0]["trials"][0]["summary"]["faults"][0]["failed"]["total"] == f["failed"]["total"]


def test_trials_report_gives_intervals_and_flags(tmp_path):
    run = tmp_path / "run"
    for k, outage in enumerate((2.0, 3.0, 4.0), 1):
        _write_run(run / f"trial-{k}", outage_s=outage)
    doc = report.build(run)
    (exp,) = doc["experiments"]
    st = exp["statistics"]["figures"]["time_to_steady_state_s"]
    values = [t["summary"]["faults"][0]["time_to_steady_state_s"] for t in exp["trials"]]
    assert st["n"] == 3 and st["median"] == pytest.approx(sorted(values)[1])
    assert st["median_ci95"][0] >= min(values) and st["median_ci95"][1] <= max(values)
    md = report.markdown(doc)
    assert "too few for an interval on the median" in md and "Wilson interval" in md
    assert exp["statistics"]["failed"]["failed"] == 20 + 30 + 40


def test_suite_directory_reports_each_experiment_and_partial_runs(tmp_path):
    suite = tmp_path / "suite"
    _write_run(suite / "node-kill", outage_s=2.0)
    _write_run(suite / "zone-loss", outage_s=5.0, finish=False)
    (suite / "suite.md").write_text("| table |")
    doc = report.build(suite)
    assert [e["name"] for e in doc["experiments"]] == ["node-kill", "zone-loss"]
    assert [e["partial"] for e in doc["experiments"]] == [False, True]
    assert "PARTIAL RUN" in report.markdown(doc)


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
    (same,) = report.compare(fast, fast2)
    assert {r["figure"]: r for r in same["rows"]}["time to steady state s"]["exceeds_intervals"] is False
    (one,) = report.compare(report.build(tmp_path / "fast" / "trial-1"), report.build(tmp_path / "slow" / "trial-1"))
    assert {r["figure"]: r for r in one["rows"]}["time to steady state s"]["exceeds_intervals"] is None
    assert "cannot tell" in report.compare_markdown([one], "a", "b")


def test_cli_report_formats_and_errors(tmp_path, capsys):
    d = _write_run(tmp_path / "r", outage_s=2.0)
    assert cli.main(["report", str(d), "--format", "all"]) == 0
    assert all((d / f"report.{x}").exists() for x in ("md", "html", "json"))
    assert cli.main(["report", str(tmp_path / "nothing")]) == 2
    assert "no such run directory" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert cli.main(["report", str(tmp_path / "empty")]) == 2
    assert cli.main(["report", "--compare", str(d), str(d), "--format", "json"]) == 0


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
    from chaos.errors import UsageError

    d = tmp_path_factory.mktemp("damaged")
    (d / "records.ndjson").write_bytes(b"\n".join(lines))
    if summary is not None:
        (d / "summary.json").write_bytes(summary)
    try:
        report.markdown(report.build(d))
    except UsageError as e:
        assert "\n" not in str(e)
