"""`availproof claim`: synthetic suites with known answers (chaos/claim.py's docstring defines every figure).

Each run is written as the rig writes it: records.ndjson through chaos.records, summary.json derived from it by
chaos.summary (the same code as at a run's end), with a run's context (experiment, scope, app, cluster,
environment, verdict) as a real summary of 2026-12-04 has it. Requests go out at 10 per second per target
(tests.unit.test_analysis.every), each taking 0.5 s."""

import json
import math
from pathlib import Path

import jsonschema
import pytest

from chaos import analysis, claim, cli, records as rec, summary as summary_mod, verdict as verdict_mod
from chaos.reports import claim as claim_report
from tests.unit.test_analysis import NS, T0, every, mark

SCHEMA = json.loads((Path(claim.__file__).parent / "schemas" / "claim.schema.json").read_text())
DEFS = analysis.Definitions(analysis.SteadyState(window_s=2.0, min_success_ratio=1.0), analysis.SLO(), "affected")
MONTH_S = 30 * 86400
# a real run's environment (the test suite's replica-kill of 2026-12-04), trimmed
ENVIRONMENT = {"availproof": "0.1.0", "ray": "2.60.0", "vllm": "0.32.0", "python": "3.11.7",
               "platform": "Linux 6.18.44 x86_64", "cpus": 2,
               "load": {"mode": "open", "arrival": "poisson", "rate": 10, "concurrency": 4, "stream": True,
                        "route": "chat", "max_tokens": [16, 48], "timeout_s": 10},
               "front_door": {"shape": "lb"}}
CLUSTER = {"backend": "local", "topology": "three-zones", "gcs_fault_tolerance": True, "network": "loopback"}


def write_run(d: Path, requests, marks, end_t: float, scope: str, word: str = "PASS", front: str = "lb") -> dict:
    d.mkdir(parents=True, exist_ok=True)
    w = rec.RecordWriter(d / "records.ndjson")
    w.write({"kind": "run", "run_id": d.name, "started_ns": T0, "load": ENVIRONMENT["load"],
             **summary_mod.header_block(d.name, scope, DEFS, {}, "", "stream")})
    for r in sorted(requests, key=lambda r: r.sent_ns):
        w.write(r)
    for m in marks:
        w.write(m)
    w.write({"kind": "end", "stopped_ns": T0 + int(end_t * NS)})
    w.close()
    s = summary_mod.derive(rec.read(d / "records.ndjson"), DEFS, None)
    s.update({"experiment": f"{d.name}: synthetic", "scope": scope, "app": "stream", "cluster": CLUSTER,
              "environment": {**ENVIRONMENT, "front_door": {"shape": front}}})
    s["verdict"] = (verdict_mod.decide(s) if word == "PASS"
                    else {"word": word, "exit_code": verdict_mod.EXIT[word], "reasons": [f"synthetic {word}"]})
    (d / "summary.json").write_text(json.dumps(s, indent=2, default=str))
    return s


def outage_run(d: Path, scope: str = "replica", failed: int = 20, end_t: float = 30, heal_t: float | None = None,
               base_failed: int = 0, slow: int = 0, never_recovers: bool = False, zone=None) -> dict:
    """One fault at 10 s; ``failed`` requests fail from 10 s on (10 per second), then ``slow`` succeed outside
    the SLO (TTFT 3 s > 2 s); ``base_failed`` fail before the injection; the run ends at ``end_t``."""
    fail_to = end_t if never_recovers else 10 + failed / 10
    rs = every(0, 10, zone=zone) + every(10, fail_to, ok=False, zone=zone) + every(fail_to, end_t, zone=zone)
    for r in rs[:base_failed]:
        r.ok, r.failure, r.ttft_s = False, rec.CONNECT_REFUSED, None
    t_slow = [r for r in rs if r.ok and r.sent_ns >= T0 + int(fail_to * NS)][:slow]
    for r in t_slow:
        r.ttft_s = 3.0
    marks = [mark(rec.INJECT_START, 10, scope=scope, zones=("zone-a",))]
    if heal_t is not None:
        marks += [mark(rec.HEAL_START, heal_t, scope=scope, zones=("zone-a",))]
    return write_run(d, rs, marks, end_t, scope)


def by_hand(s: dict, base_failed: int = 0, base_requests: int = 96, slo: bool = False, slow: int = 0) -> float:
    """The cost from the summary's own figures: failed x window_s / requests minus the baseline's."""
    f = s["faults"][0]
    bad = f["service"]["failed_total"] + (slow if slo else 0)
    return bad * f["window_s"] / f["service"]["requests"] - base_failed * f["window_s"] / base_requests


def rates(tmp_path: Path, scopes: dict, period_days: float = 30) -> claim.Rates:
    return claim.parse_rates({"period_days": period_days, "scopes": scopes}, str(tmp_path / "rates.yaml"))


def valid(doc: dict) -> dict:
    jsonschema.Draft202012Validator(SCHEMA).validate(json.loads(json.dumps(doc, default=str)))
    return doc


# ---------------------------------------------------------------- one scope
def test_one_scope_cost_availability_and_the_insufficient_trials_verdict(tmp_path):
    s = outage_run(tmp_path / "suite" / "replica-kill", failed=20, slow=10)
    f = s["faults"][0]
    # the construction: 200 sent in the 20 s window + 4 in flight at the injection; 96 ended before it
    assert f["window_s"] == 20.0 and f["service"]["requests"] == 204 and f["service"]["failed_total"] == 20
    doc = valid(claim.claim(tmp_path / "suite", rates(tmp_path, {"replica": {"events": 4}}), 0.999, 0.05))
    run = doc["runs"][0]
    fc = run["faults"][0]
    assert fc["baseline"] == {"requests": 96, "failed": 0, "slo_missed": 0, "span_s": 10.0}
    assert run["lost_service_s"] == pytest.approx(20 * 20 / 204, abs=1e-6) == pytest.approx(by_hand(s), abs=1e-6)
    assert fc["slo_missed"] == 30  # the failed and the slow ones
    assert run["slo_lost_service_s"] == pytest.approx(30 * 20 / 204, abs=1e-6)
    e = doc["scopes"]["replica"]
    assert e["runs"] == e["trials"] == 1 and e["lost_service_s"]["ci95"] is None
    assert doc["availability"]["value"] == pytest.approx(1 - 4 * (400 / 204) / MONTH_S, abs=1e-9)
    assert doc["slo_attainment"]["value"] == pytest.approx(1 - 4 * (600 / 204) / MONTH_S, abs=1e-9)
    assert doc["error_budget"]["seconds"] == pytest.approx(0.001 * MONTH_S)
    assert doc["dominant_scope"]["scope"] == "replica"
    assert e["max_events_alone"] == pytest.approx(0.001 * MONTH_S / (400 / 204), rel=1e-4)
    assert doc["verdict"]["word"] == "insufficient_trials"
    assert doc["verdict"]["reasons"] == ["insufficient_trials: replica: 1 trial(s) with a measured cost (need 5)"]
    assert doc["rates"]["scopes"]["replica"]["basis"] == "guess"  # no source at all
    assert doc["unmeasurable"]["availability.ci95"].startswith("a scope in the sum has fewer than 5 trials")
    assert doc["worst_zone"] is None and "service population has no zone" in doc["unmeasurable"]["worst_zone"]
    assert doc["environment"]["front_door"] == ["lb"] and doc["warnings"] == []


def test_the_baseline_failures_are_taken_off(tmp_path):
    s = outage_run(tmp_path / "suite" / "replica-kill", failed=20, base_failed=3)
    doc = claim.claim(tmp_path / "suite", rates(tmp_path, {"replica": {"events": 1}}), 0.999, 0.05)
    base = doc["runs"][0]["faults"][0]["baseline"]
    assert base["failed"] == 3 and base["requests"] == 96
    assert doc["runs"][0]["lost_service_s"] == pytest.approx(by_hand(s, base_failed=3), abs=1e-6)
    # the summary's failed_before_first_fault counts the same here, but also any request in flight at the injection
    assert s["requests"]["failed_before_first_fault"] == 3


# ---------------------------------------------------------------- several scopes with trials: the formula
def several_scopes_suite(tmp_path: Path) -> tuple[Path, dict[str, list[dict]]]:
    suite = tmp_path / "suite"
    runs = {"replica": [outage_run(suite / "replica-kill" / f"trial-{i}", failed=n, base_failed=b)
                        for i, (n, b) in enumerate([(10, 0), (20, 1), (5, 0), (30, 0), (15, 2)], 1)],
            "zone": [outage_run(suite / "zone-loss" / f"trial-{i}", scope="zone", failed=n, heal_t=30, end_t=45)
                     for i, n in enumerate([40, 50, 45, 60, 55], 1)]}
    return suite, runs


def test_several_scopes_with_trials_give_the_formula_and_support_the_claim(tmp_path):
    suite, runs = several_scopes_suite(tmp_path)
    r = rates(tmp_path, {"replica": {"events": 4, "source": "guess"},
                         "zone": {"events": 0.1, "duration_s": 20, "source": "https://example.org/zones"}})
    doc = valid(claim.claim(suite, r, 0.999, 0.05, seed=7))
    base = {"replica": [0, 1, 0, 0, 2], "zone": [0] * 5}
    mean = {k: sum(by_hand(s, base_failed=b) for s, b in zip(v, base[k])) / 5 for k, v in runs.items()}
    # availability = 1 - sum(events x mean cost) / period, by hand from the summaries
    by_hand_availability = 1 - (4 * mean["replica"] + 0.1 * mean["zone"]) / MONTH_S
    assert doc["availability"]["value"] == pytest.approx(by_hand_availability, abs=1e-9)
    for k in ("replica", "zone"):
        e = doc["scopes"][k]
        assert e["trials"] == 5 and e["lost_service_s"]["mean"] == pytest.approx(mean[k], abs=1e-6)
        lo, hi = e["lost_service_s"]["ci95"]
        assert min(e["lost_service_s"]["values"]) <= lo <= mean[k] <= hi <= max(e["lost_service_s"]["values"])
    lo, hi = doc["availability"]["ci95"]
    assert lo <= doc["availability"]["value"] <= hi
    budget = 0.001 * MONTH_S
    z = doc["scopes"]["zone"]
    assert z["budget_share"] == pytest.approx(0.1 * mean["zone"] / budget, abs=1e-6)
    assert z["max_events"] == pytest.approx((budget - 4 * mean["replica"]) / mean["zone"], rel=1e-4)
    assert z["outage_tested_s"] == 20.0 and doc["rates"]["scopes"]["zone"]["basis"] == "checkable"
    assert doc["dominant_scope"]["scope"] == "replica"  # 4 x ~1.6 s against 0.1 x ~5 s
    assert doc["p_miss"]["value"] == 0.0  # ~7 s a month against a 2592 s budget
    assert doc["verdict"] == {"word": "supported", "reasons": []}
    # seeded: the same claim again
    again = claim.claim(suite, r, 0.999, 0.05, seed=7)
    assert again["availability"] == doc["availability"] and again["p_miss"] == doc["p_miss"]


def test_a_target_the_costs_cannot_keep_is_not_supported(tmp_path):
    suite, _ = several_scopes_suite(tmp_path)
    r = rates(tmp_path, {"replica": {"events": 4}, "zone": {"events": 0.1}})
    doc = claim.claim(suite, r, 0.9999999, 0.05)  # a budget of 0.26 s a month
    assert doc["verdict"]["word"] == "not_supported"
    assert doc["p_miss"]["value"] > 0.9
    assert any(x.startswith("not_supported: p_miss") for x in doc["verdict"]["reasons"])
    assert any("below the target" in x for x in doc["verdict"]["reasons"])


def test_p_miss_is_the_compound_poisson_tail():
    # one scope, every event costs 1 s, 2 events a period, a budget of 2.5 s: P(N >= 3) for N ~ Poisson(2)
    exact = 1 - math.exp(-2) * (1 + 2 + 2)
    pm = claim.p_miss({"replica": (2.0, [1.0])}, 2.5, seed=3, simulations=50_000)
    assert pm["value"] == pytest.approx(exact, abs=4 * pm["stderr"])
    assert claim.p_miss({"replica": (2.0, [1.0])}, 2.5, seed=3, simulations=50_000) == pm


def test_the_overlap_is_rate_times_rate_times_duration_over_the_period(tmp_path):
    r = rates(tmp_path, {"zone": {"events": 2, "duration_s": 100}, "node": {"events": 3, "duration_s": 50}})
    ov = claim.overlap(r, {})
    T = MONTH_S
    m = 2 * 3 * 150 / T + 4 * 100 / T + 9 * 50 / T
    assert ov["expected"] == pytest.approx(m, abs=1e-9)
    assert ov["probability"] == pytest.approx(1 - math.exp(-m), abs=1e-9)


def test_an_overlap_expected_more_than_once_is_a_probability_below_one(tmp_path):
    """Long outages at high rates: the expected number of overlaps passes 1, each pair's and the whole
    probability stay below it (at least one overlap, events as Poisson arrivals)."""
    r = rates(tmp_path, {"zone": {"events": 10, "duration_s": 20_000}, "node": {"events": 10, "duration_s": 30_000}})
    ov = claim.overlap(r, {})
    assert ov["expected"] == pytest.approx((100 * 20_000 + 100 * 30_000 + 100 * 50_000) / MONTH_S, abs=1e-8)
    assert ov["expected"] > 3 and max(p["expected"] for p in ov["pairs"]) > 1
    assert 0.95 < ov["probability"] < 1 and all(0 < p["probability"] < 1 for p in ov["pairs"])
    assert [p["probability"] for p in ov["pairs"]] == pytest.approx([1 - math.exp(-p["expected"]) for p in ov["pairs"]],
                                                                    abs=1e-8)


# ---------------------------------------------------------------- what the claim does not cover
def test_a_rated_scope_without_a_run_is_not_covered(tmp_path):
    suite, _ = several_scopes_suite(tmp_path)
    doc = valid(claim.claim(suite, rates(tmp_path, {"replica": {"events": 4}, "zone": {"events": 0.1},
                                                    "region": {"events": 0.02}}), 0.999, 0.05))
    assert doc["verdict"]["word"] == "not_covered"
    assert doc["verdict"]["reasons"] == ["not_covered: region: no single-fault run of this scope in the suite"]
    assert doc["availability"]["left_out"] == {"region": "no single-fault run of this scope"}
    assert doc["availability"]["value"] is not None  # the measured figures are reported in every case
    assert doc["p_miss"]["left_out"] == {"region": "no single-fault run of this scope"}
    assert "region" not in doc["scopes"] and "region" not in doc["not_considered"]


def test_a_duration_longer_than_tested_is_not_covered(tmp_path):
    suite, _ = several_scopes_suite(tmp_path)
    doc = claim.claim(suite, rates(tmp_path, {"replica": {"events": 4}, "zone": {"events": 0.1, "duration_s": 3600}}),
                      0.999, 0.05)
    assert doc["verdict"]["word"] == "not_covered"
    assert doc["verdict"]["reasons"] == [
        "not_covered: zone: the stated duration 3600 s exceeds the longest outage tested (20 s)"]
    # a replica kill imposes no outage length: a duration stated for it cannot be checked
    doc = claim.claim(suite, rates(tmp_path, {"replica": {"events": 4, "duration_s": 60}, "zone": {"events": 0.1}}),
                      0.999, 0.05)
    assert doc["verdict"]["word"] == "not_covered"
    assert "replica: a duration of 60 s is stated, but no run of it imposed an outage length" in doc["verdict"]["reasons"][0]
    assert "no heal" in doc["runs"][0]["unmeasurable"]["outage_tested_s"]


def test_an_unrecovered_run_is_a_lower_bound_and_not_supported(tmp_path):
    suite = tmp_path / "suite"
    for i in range(1, 5):
        outage_run(suite / "replica-kill" / f"trial-{i}", failed=10)
    s = outage_run(suite / "replica-kill" / "trial-5", never_recovers=True)
    assert s["faults"][0]["service"]["recovered"] is False
    doc = valid(claim.claim(suite, rates(tmp_path, {"replica": {"events": 4}}), 0.999, 0.05))
    run = doc["runs"][4]
    assert run["counted"] and run["lower_bound"] == "never reached steady state in its window"
    assert run["lost_service_s"] == pytest.approx(by_hand(s), abs=1e-6)  # 200 of 204 failed: ~19.6 s, at least
    assert doc["scopes"]["replica"]["lost_service_s"]["lower_bound"] == [
        {"run": "replica-kill/trial-5", "why": "never reached steady state in its window"}]
    assert doc["verdict"]["word"] == "not_supported"
    assert doc["verdict"]["reasons"] == ["not_supported: replica: replica-kill/trial-5 never reached steady state in "
                                         "its window: its cost is only a lower bound"]


def zoned_run(d: Path, fail_zone_b: int, zones=("a", "b", "c"), front="zonal-lb") -> dict:
    """Three zones' targets (10 requests/s each), a node of zone b lost at 10 s: ``fail_zone_b`` of zone b's
    requests fail from then on."""
    rs = []
    for z in zones:
        fail_to = 10 + fail_zone_b / 10 if z == "b" else 10
        rs += every(0, 10, zone=z) + every(10, fail_to, ok=False, zone=z) + every(fail_to, 30, zone=z)
    return write_run(d, rs, [mark(rec.INJECT_START, 10, scope="node", zones=("b",)),
                             mark(rec.HEAL_START, 30, scope="node", zones=("b",))], 30, "node", front=front)


def test_a_window_with_no_request_of_the_population_is_null_with_its_reason(tmp_path):
    suite = tmp_path / "suite"
    s = zoned_run(suite / "worker-node-kill", 0, zones=("a", "c"))  # nobody sent to the lost zone
    assert s["faults"][0]["affected"]["requests"] == 0
    doc = valid(claim.claim(suite, rates(tmp_path, {"node": {"events": 0.34}}), 0.999, 0.05, population="affected"))
    run = doc["runs"][0]
    assert run["lost_service_s"] is None and run["slo_lost_service_s"] is None
    assert run["unmeasurable"]["lost_service_s"] == "no request of the population in the fault's window"
    assert not run["counted"] and "could not be measured" in run["not_counted"]
    e = doc["scopes"]["node"]
    assert e["trials"] == 0 and e["lost_service_s"]["mean"] is None
    assert doc["unmeasurable"]["scopes.node.lost_service_s.mean"] == "no run of this scope with a measured cost"
    assert doc["availability"]["value"] is None and "availability.value" in doc["unmeasurable"]
    assert doc["p_miss"]["value"] is None
    assert doc["verdict"]["word"] == "insufficient_trials"
    # the service population of the same run has requests: measured, and nothing failed
    doc = claim.claim(suite, rates(tmp_path, {"node": {"events": 0.34}}), 0.999, 0.05)
    assert doc["runs"][0]["lost_service_s"] == 0.0


def test_the_affected_population_takes_the_lost_zones_users_and_names_the_worst_zone(tmp_path):
    suite = tmp_path / "suite"
    s = zoned_run(suite / "worker-node-kill", 30)
    aff = s["faults"][0]["affected"]
    assert aff["basis"] == "fault_domain" and aff["requests"] == 204 and aff["failed_total"] == 30
    r = rates(tmp_path, {"node": {"events": 0.34}})
    doc = valid(claim.claim(suite, r, 0.999, 0.05, population="affected"))
    assert doc["runs"][0]["faults"][0]["baseline"]["requests"] == 96  # zone b's, ended before the injection
    assert doc["runs"][0]["lost_service_s"] == pytest.approx(30 * 20 / 204, abs=1e-6)
    assert doc["worst_zone"]["zone"] == "b"
    assert doc["worst_zone"]["availability"] == pytest.approx(1 - 0.34 * 30 * 20 / 204 / MONTH_S, abs=1e-9)
    service = claim.claim(suite, r, 0.999, 0.05)
    assert service["runs"][0]["lost_service_s"] == pytest.approx(30 * 20 / 612, abs=1e-6)  # spread over every zone


def test_behind_one_balancer_a_zone_loss_has_no_affected_cost(tmp_path):
    suite = tmp_path / "suite"
    outage_run(suite / "zone-loss", scope="zone", heal_t=30)  # lb: requests carry no zone
    doc = claim.claim(suite, rates(tmp_path, {"zone": {"events": 0.1}}), 0.999, 0.05, population="affected")
    assert "cannot be told apart" in doc["runs"][0]["unmeasurable"]["lost_service_s"]
    assert doc["runs"][0]["counted"] is False


def test_a_multi_fault_run_is_kept_apart(tmp_path):
    suite = tmp_path / "suite"
    outage_run(suite / "replica-kill", failed=10)
    rs = every(0, 10) + every(10, 13) + every(13, 14, ok=False) + every(14, 40)
    write_run(suite / "head-outage-second-fault", rs,
              [mark(rec.INJECT_START, 10, fid="h", scope="head", zones=()),
               mark(rec.HEAL_START, 30, fid="h", scope="head", zones=()),
               mark(rec.INJECT_START, 13, fid="r", scope="replica", zones=("zone-c",))], 40, "head")
    doc = valid(claim.claim(suite, rates(tmp_path, {"replica": {"events": 4}, "head": {"events": 1}}), 0.999, 0.05))
    assert doc["scopes"]["replica"]["runs"] == 1 and doc["scopes"]["replica"]["experiments"] == ["replica-kill"]
    assert "head" not in doc["scopes"]
    [multi] = doc["multi_fault_runs"]
    assert multi["experiment"] == "head-outage-second-fault" and multi["scopes"] == ["head", "replica"]
    assert [f["window_cut_by"] for f in multi["faults"]] == ["r", None]
    second = multi["faults"][1]
    assert second["failed"] == 10 and multi["lost_service_s"] == pytest.approx(
        10 * second["window_s"] / second["requests"], abs=1e-6)
    assert doc["verdict"]["word"] == "not_covered"
    assert doc["verdict"]["reasons"][0] == ("not_covered: head: no single-fault run of this scope in the suite (only "
                                            "inside head-outage-second-fault, which is never pooled)")


def test_an_error_run_is_no_measurement(tmp_path):
    suite = tmp_path / "suite"
    outage_run(suite / "replica-kill", failed=10)
    s = outage_run(suite / "replica-kill-2", failed=10)
    s["verdict"] = {"word": "ERROR", "exit_code": 2, "reasons": ["fault not in effect: replica x"]}
    (suite / "replica-kill-2" / "summary.json").write_text(json.dumps(s))
    doc = claim.claim(suite, rates(tmp_path, {"replica": {"events": 4}}), 0.999, 0.05)
    assert doc["scopes"]["replica"]["runs"] == 2 and doc["scopes"]["replica"]["trials"] == 1
    assert doc["scopes"]["replica"]["not_counted"] == [
        {"run": "replica-kill-2", "why": "its verdict is ERROR (no measurement: fault not in effect: replica x)"}]


def test_without_records_the_baseline_is_null_with_its_reason(tmp_path):
    suite = tmp_path / "suite"
    outage_run(suite / "replica-kill", failed=10)
    (suite / "replica-kill" / "records.ndjson").unlink()
    doc = claim.claim(suite, rates(tmp_path, {"replica": {"events": 4}}), 0.999, 0.05)
    run = doc["runs"][0]
    assert run["lost_service_s"] is None and "records.ndjson" in run["unmeasurable"]["lost_service_s"]


# ---------------------------------------------------------------- RATES and the command
def test_a_source_is_checkable_with_a_url_or_a_doi():
    assert claim.checkable("https://arxiv.org/abs/2407.21783") and claim.checkable("doi:10.1145/1234")
    assert claim.checkable("see 10.48550/arXiv.2407.21783")
    assert not claim.checkable("guess: our postmortems") and not claim.checkable(None)


def test_the_shipped_example_rates_load():
    r = claim.load_rates(Path(claim.__file__).resolve().parent.parent / "experiments" / "rates" / "example-rates.yaml")
    assert r.period_days == 30 and r.scopes["node"].basis == "checkable" and r.scopes["replica"].basis == "guess"


@pytest.mark.parametrize("text, line", [
    ("period_days: [30", "not valid YAML"),
    ("- 1\n- 2", "<document>: must be a mapping with period_days and scopes, got list"),
    ("scopes: {replica: {events: 1}}", "period_days: is required"),
    ("period_days: 0\nscopes: {replica: {events: 1}}", "period_days: must be a number above 0, got 0"),
    ("period_days: 30\nperiod: 1\nscopes: {replica: {events: 1}}", "period: unknown field (known: period_days, scopes)"),
    ("period_days: 30", "scopes: must be a non-empty mapping"),
    ("period_days: 30\nscopes: {rack: {events: 1}}", "scopes.rack: unknown scope (known: replica, "),
    ("period_days: 30\nscopes: {replica: 4}", "scopes.replica: must be a mapping with events"),
    ("period_days: 30\nscopes: {replica: {}}", "scopes.replica.events: is required"),
    ("period_days: 30\nscopes: {replica: {events: -1}}", "scopes.replica.events: must be a number of at least 0, got -1"),
    ("period_days: 30\nscopes: {replica: {events: .nan}}", "scopes.replica.events: must be a number of at least 0"),
    ("period_days: 30\nscopes: {zone: {events: 1, duration_s: 0}}", "scopes.zone.duration_s: must be a number of seconds"),
    ("period_days: 30\nscopes: {zone: {events: 1, source: 3}}", "scopes.zone.source: must be a string"),
    ("period_days: 30\nscopes: {zone: {events: 1, rate: 3}}", "scopes.zone.rate: unknown field (known: events, "),
])
def test_bad_rates_are_one_line_and_nothing_is_written(tmp_path, capsys, text, line):
    suite, _ = several_scopes_suite(tmp_path)
    (tmp_path / "rates.yaml").write_text(text)
    assert cli.main(["claim", str(suite), "--faults", str(tmp_path / "rates.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and line in err and str(tmp_path / "rates.yaml") in err
    assert not list(suite.glob("claim.*"))


@pytest.mark.parametrize("args, line", [
    (["--target", "abc"], "--target: a percentage between 0 and 100"),
    (["--target", "100"], "--target: a percentage between 0 and 100 (exclusive)"),
    (["--risk", "1.5"], "--risk: a probability between 0 and 1 (exclusive)"),
    (["--faults", "/nonexistent/rates.yaml"], "/nonexistent/rates.yaml: cannot read the rates file"),
])
def test_bad_arguments_are_one_line(tmp_path, capsys, args, line):
    suite, _ = several_scopes_suite(tmp_path)
    (tmp_path / "rates.yaml").write_text("period_days: 30\nscopes: {replica: {events: 4}}")
    assert cli.main(["claim", str(suite), "--faults", str(tmp_path / "rates.yaml"), *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and line in err
    assert not list(suite.glob("claim.*"))


def test_no_suite_is_one_line(tmp_path, capsys):
    (tmp_path / "rates.yaml").write_text("period_days: 30\nscopes: {replica: {events: 4}}")
    (tmp_path / "empty").mkdir()
    for d, line in ((tmp_path / "nope", "no such suite directory"), (tmp_path / "empty", "no run to claim from")):
        assert cli.main(["claim", str(d), "--faults", str(tmp_path / "rates.yaml")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and line in err


def test_the_command_writes_the_claim_and_exits_0_only_when_supported(tmp_path, capsys):
    suite, _ = several_scopes_suite(tmp_path)
    (tmp_path / "rates.yaml").write_text("period_days: 30\nscopes:\n  replica: {events: 4}\n  zone: {events: 0.1}\n")
    assert cli.main(["claim", str(suite), "--faults", str(tmp_path / "rates.yaml"), "--format", "all",
                     "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"# availproof claim: {suite}") and "**supported: 99.9 % over 30 days" in out
    doc = valid(json.loads((suite / "claim.json").read_text()))
    assert doc["seed"] == 3 and (suite / "claim.md").read_text() == out
    page = (suite / "claim.html").read_text()
    assert page.startswith("<!doctype html>") and "replica-kill/trial-5" in page and "<script" not in page
    (tmp_path / "rates.yaml").write_text("period_days: 30\nscopes: {replica: {events: 4}, region: {events: 1}}\n")
    assert cli.main(["claim", str(suite), "--faults", str(tmp_path / "rates.yaml"), "--format", "json"]) == 1
    printed = json.loads(capsys.readouterr().out)
    assert printed["verdict"]["word"] == "not_covered" and printed == json.loads((suite / "claim.json").read_text())


def test_the_markdown_shows_each_runs_inputs(tmp_path):
    suite = tmp_path / "suite"
    outage_run(suite / "replica-kill", failed=20)
    doc = claim.claim(suite, rates(tmp_path, {"replica": {"events": 4}, "region": {"events": 1}}), 0.999, 0.05)
    md = claim_report.markdown(doc)
    assert "| replica-kill | replica | PASS | yes | 20 / 204 | 20 | 0 / 96 | 1.9608 |" in md
    assert "| region | 1 | n/a | guess | 0 | 0 | not covered |" in md
    assert "- not_covered: region: no single-fault run of this scope in the suite" in md
