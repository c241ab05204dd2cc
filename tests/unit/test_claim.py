"""`availproof claim`: synthetic suites with known answers (chaos/claim/ defines every figure).

Each run is written as the rig writes it: records.ndjson through chaos.recording.records, summary.json derived from it by
chaos.core.summary (the same code as at a run's end), with a run's context (experiment, scope, app, cluster,
environment, verdict) as a real summary of 2026-12-04 has it. Requests go out at 10 per second per target
(tests.unit.test_analysis.every), each taking 0.5 s, so a failed request is 0.1 s of the service lost.
The statistics alone are tested in test_claim_predict.py, the integral in test_lost_service.py."""

import json
import math
import shutil
from pathlib import Path

import jsonschema
import pytest

from chaos import analysis, claim
from chaos.commands import cli
from chaos.recording import records as rec
from chaos.core import summary as summary_mod, verdict as verdict_mod
from chaos.claim import document
from chaos.reports import claim as claim_report
from tests.unit.test_analysis import NS, T0, every, mark, req

SCHEMA = json.loads((Path(claim.__file__).parents[1] / "schemas" / "claim.schema.json").read_text())
DEFS = analysis.Definitions(analysis.SteadyState(window_s=2.0, min_success_ratio=1.0), analysis.SLO(), "affected")
MONTH_S = 30 * 86400
SIMS = 20_000  # periods simulated in these tests (the command: 100,000)
# a real run's environment (the test suite's replica-kill of 2026-12-04), trimmed
ENVIRONMENT = {"availproof": "0.1.0", "ray": "2.60.0", "vllm": "0.32.0", "python": "3.11.7",
               "platform": "Linux 6.18.44 x86_64", "cpus": 2,
               "load": {"mode": "open", "arrival": "poisson", "rate": 10, "concurrency": 4, "stream": True,
                        "route": "chat", "max_tokens": [16, 48], "timeout_s": 10},
               "front_door": {"shape": "lb"}}
CLUSTER = {"backend": "local", "topology": "three-zones", "gcs_fault_tolerance": True, "network": "loopback"}


def write_run(d: Path, requests, marks, end_t: float, scope: str, word: str = "PASS", front: str = "lb",
              load: dict | None = None) -> dict:
    d.mkdir(parents=True, exist_ok=True)
    w = rec.RecordWriter(d / "records.ndjson")
    w.write({"kind": "run", "run_id": d.name, "started_ns": T0, "load": load or ENVIRONMENT["load"],
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
    for r in [r for r in rs if r.ok and r.sent_ns >= T0 + int(fail_to * NS)][:slow]:
        r.ttft_s = 3.0
    marks = [mark(rec.INJECT_START, 10, scope=scope, zones=("zone-a",))]
    if heal_t is not None:
        marks += [mark(rec.HEAL_START, heal_t, scope=scope, zones=("zone-a",))]
    return write_run(d, rs, marks, end_t, scope)


def cost_of(failed: int, base_failed: int = 0) -> float:
    """What outage_run costs: failed requests at 10 per second, less the baseline's failed fraction (of 96
    requests) over the integral's 21 s (the second holding the requests in flight at the injection, and the
    20 s window)."""
    return failed / 10 - base_failed / 96 * 21


def rates(tmp_path: Path, scopes: dict, period_days: float = 30) -> claim.Rates:
    return claim.parse_rates({"period_days": period_days, "scopes": scopes}, str(tmp_path / "rates.yaml"))


def valid(doc: dict) -> dict:
    jsonschema.Draft202012Validator(SCHEMA).validate(json.loads(json.dumps(doc, default=str)))
    return doc


def make(suite, r, target=0.999, risk=0.05, **kw) -> dict:
    return valid(claim.claim(suite, r, target, risk, simulations=SIMS, **kw))


def quiet_run(suite: Path, seconds: float = 100, step: float = 0.01) -> dict:
    """A fault-free run of ``seconds / step`` requests, none failed: evidence of the background alone (100 s at
    100 per second: 10,000 requests, so the background's 90 % bound costs ~14 % of a 99.9 % month's budget)."""
    return write_run(suite / "quiet", every(0, seconds, step=step), [], seconds, "replica")


def trials(suite: Path, name: str, costs: list[int], **kw) -> list[dict]:
    return [outage_run(suite / name / f"trial-{i}", failed=n, **kw) for i, n in enumerate(costs, 1)]


# ---------------------------------------------------------------- one run's cost
def test_one_run_costs_its_failed_requests_as_seconds_and_one_trial_supports_nothing(tmp_path):
    s = outage_run(tmp_path / "suite" / "replica-kill", failed=20, slow=10)
    f = s["faults"][0]
    assert f["window_s"] == 20.0 and f["service"]["requests"] == 204 and f["service"]["failed_total"] == 20
    doc = make(tmp_path / "suite", rates(tmp_path, {"replica": {"events": 4}}))
    run = doc["runs"][0]
    fc = run["faults"][0]
    assert fc["baseline"] == {"requests": 96, "failed": 0, "slo_missed": 0, "span_s": 10.0}
    assert fc["model"] == {"name": "open", "width_s": 1.0, "buckets": 21, "empty_buckets": 0, "span_s": 21.0}
    assert run["lost_service_s"] == pytest.approx(2.0)  # 20 failed at 10 per second
    assert fc["slo_missed"] == 30 and run["slo_lost_service_s"] == pytest.approx(3.0)  # the slow ones too
    assert doc["availability"]["point"] == pytest.approx(1 - 4 * 2.0 / MONTH_S, abs=1e-9)
    e = doc["scopes"]["replica"]
    assert e["trials"] == 1 and e["unrecovered"] == {
        "runs": 0, "of": 1, "share_mean": 0.25, "cost_s": 3600.0,
        "prior": {"a": 0.5, "b": 0.5, "source": "Jeffreys Beta(0.5, 0.5)"}}
    # one trial: an event may not recover with chance ~1/4 (3600 s, past the 2592 s budget): far from supported
    assert doc["verdict"]["word"] == "insufficient_evidence"
    assert doc["availability"]["p_at_least_target"] < 0.6
    assert doc["trials_needed"]["found"] and doc["trials_needed"]["extra"]["replica"] > 20
    assert doc["rates"]["scopes"]["replica"]["basis"] == "guess" and doc["rates"]["scopes"]["replica"]["kind"] == "point"
    assert doc["worst_zone"] is None and "service population has no zone" in doc["unmeasurable"]["worst_zone"]


def test_the_baseline_is_taken_off_as_a_rate(tmp_path):
    outage_run(tmp_path / "suite" / "replica-kill", failed=20, base_failed=3)
    doc = make(tmp_path / "suite", rates(tmp_path, {"replica": {"events": 1}}))
    assert doc["runs"][0]["faults"][0]["baseline"]["failed"] == 3
    assert doc["runs"][0]["lost_service_s"] == pytest.approx(cost_of(20, 3))


def test_a_run_that_failed_more_before_the_injection_than_after_costs_0_clipped_and_said(tmp_path):
    outage_run(tmp_path / "suite" / "replica-kill", failed=0, base_failed=30)
    doc = make(tmp_path / "suite", rates(tmp_path, {"replica": {"events": 1}}))
    run = doc["runs"][0]
    assert run["lost_service_s"] == 0.0 and run["clipped"] and run["counted"]
    assert run["faults"][0]["clipped_from"] == pytest.approx(cost_of(0, 30))
    assert doc["availability"]["point"] == 1.0 and doc["availability"]["mean"] <= 1.0  # never above 100 %
    assert doc["scopes"]["replica"]["lost_service_s"]["clipped"] == ["replica-kill"]
    assert any("lost less than their baseline: clipped at 0" in w for w in doc["warnings"])


def closed_run(d: Path, users: int, fail_s: float) -> dict:
    """A closed loop of ``users``, 0.2 s answers; the fault at 10 s stops the service for 5 s: a request sent
    then fails after ``fail_s``."""
    rs, i = [], 0
    for u in range(users):
        t = u * 0.05
        while t < 40:
            bad = 10 <= t < 15
            d_s = fail_s if bad else 0.2
            rs.append(req(i, round(t, 6), ok=not bad, e2e=d_s, zone=None))
            i += 1
            t = round(t + d_s, 6)
    load = {**ENVIRONMENT["load"], "mode": "closed", "concurrency": users}
    return write_run(d, rs, [mark(rec.INJECT_START, 10)], 40, "replica", load=load)


@pytest.mark.parametrize("fail_s, lost", [(0.01, 5.0), (10.0, 10.0)])
def test_a_closed_loops_cost_is_its_users_lost_seconds(tmp_path, fail_s, lost):
    closed_run(tmp_path / "suite" / "replica-kill", 4, fail_s)
    doc = make(tmp_path / "suite", rates(tmp_path, {"replica": {"events": 1}}))
    run = doc["runs"][0]
    assert run["load_mode"] == "closed" and run["faults"][0]["model"]["name"] == "closed"
    assert run["faults"][0]["model"]["users"] == 4
    assert run["lost_service_s"] == pytest.approx(lost, abs=0.2)


# ---------------------------------------------------------------- the verdict
def suite_of(tmp_path: Path) -> Path:
    suite = tmp_path / "suite"
    trials(suite, "replica-kill", [10, 20, 5, 30, 15])
    trials(suite, "zone-loss", [40, 50, 45, 60, 55], scope="zone", heal_t=30, end_t=45)
    quiet_run(suite)
    return suite


def test_an_interval_that_straddles_the_target_is_not_supported(tmp_path):
    """Point 1 of issue 31: the point availability is above the target, but a period's availability is not
    above it with 95 % probability: not supported, whatever the point figure says."""
    suite = suite_of(tmp_path)
    r = rates(tmp_path, {"replica": {"events": 4, "unrecovered_cost_s": 5}, "zone": {"events": 0.1,
                                                                                  "unrecovered_cost_s": 5}})
    target = 1 - 9 / MONTH_S  # a 9 s budget; the point loss is 4 x 1.6 + 0.1 x 5 = 6.9 s
    doc = make(suite, r, target=target)
    assert doc["availability"]["point"] > target
    lo, hi = doc["availability"]["interval90"]
    assert lo < target < hi
    assert doc["verdict"]["word"] in ("not_supported", "insufficient_evidence")
    assert doc["verdict"]["word"] == "not_supported"  # the Poisson count alone misses it: more trials cannot help
    assert any("even at the optimistic end" in x for x in doc["verdict"]["reasons"])


def test_a_claim_well_inside_its_budget_with_enough_evidence_is_supported(tmp_path):
    suite = suite_of(tmp_path)
    # five trials each: an event unlike any tested (its share's 90 % bound ~0.25, costing the whole budget) must
    # be rare, so the rates are low: 0.1 replica kills and 0.05 zone losses a month
    r = rates(tmp_path, {"replica": {"events": 0.1},
                         "zone": {"events": 0.05, "duration_s": 20, "source": "https://example.org/zones"}})
    doc = make(suite, r, seed=7)
    assert doc["verdict"] == {"word": "supported", "reasons": []}
    assert doc["availability"]["p_miss"]["upper95"] <= 0.05
    assert doc["scopes"]["zone"]["coverage"]["by"] == "runs"
    # the unseen share dominates the expected loss: twice the replica's rate, twice its expected loss
    assert doc["dominant_scope"]["scope"] == "replica"
    means = {"replica": sum([1.0, 2.0, 0.5, 3.0, 1.5]) / 5, "zone": sum([4.0, 5.0, 4.5, 6.0, 5.5]) / 5}
    assert doc["availability"]["point"] == pytest.approx(1 - (0.1 * means["replica"] + 0.05 * means["zone"]) / MONTH_S,
                                                         abs=1e-9)
    assert doc == make(suite, r, seed=7)  # seeded
    assert doc["availability"]["mean"] != make(suite, r, seed=8)["availability"]["mean"]


def test_an_observed_history_widens_the_rate_and_is_said(tmp_path):
    suite = suite_of(tmp_path)
    point = make(suite, rates(tmp_path, {"zone": {"events": 0.35 * 3.5 / 3}}))
    hist = make(suite, rates(tmp_path, {"zone": {"count": 3, "exposure_days": 270}}))
    z = hist["rates"]["scopes"]["zone"]
    assert z["kind"] == "observed" and z["mean_events"] == pytest.approx(3.5 / 270 * 30, abs=1e-6)
    lo, hi = z["interval90_events"]
    assert lo < z["mean_events"] < hi and hi / lo > 4
    assert hist["scopes"]["zone"]["expected_lost_s"]["interval90"][1] > point["scopes"]["zone"]["expected_lost_s"][
        "interval90"][1]


def test_an_unrecovered_run_is_an_unrecovered_event_and_keeps_the_claim_from_support(tmp_path):
    suite = tmp_path / "suite"
    trials(suite, "replica-kill", [10, 10, 10, 10])
    outage_run(suite / "replica-kill" / "trial-5", never_recovers=True)
    doc = make(suite, rates(tmp_path, {"replica": {"events": 4}}))
    run = doc["runs"][4]
    assert run["counted"] and run["lower_bound"] == "never reached steady state in its window"
    e = doc["scopes"]["replica"]
    assert e["unrecovered"]["runs"] == 1 and e["lost_service_s"]["lower_bound"][0]["run"] == "replica-kill/trial-5"
    # one in five did not recover: endless trials like these would not recover as often
    assert doc["verdict"]["word"] == "not_supported"


def test_an_slo_target_is_checked_too(tmp_path):
    suite = tmp_path / "suite"
    for i in range(1, 6):
        outage_run(suite / "replica-kill" / f"trial-{i}", failed=5, slow=100)
    quiet_run(suite)
    r = rates(tmp_path, {"replica": {"events": 0.1}})
    assert make(suite, r, seed=1)["verdict"]["word"] == "supported"
    target = 1 - 8 / MONTH_S  # the SLO-lost seconds, 10.5 s an event, cannot keep this
    doc = make(suite, r, seed=1, slo_target=target)
    assert doc["verdict"]["word"] == "not_supported" and doc["target"]["slo_percent"] == pytest.approx(target * 100)
    assert any("slo_attainment" in x for x in doc["verdict"]["reasons"])


# ---------------------------------------------------------------- coverage of a stated outage length
def zone_trials(suite: Path, heals: list[float], name="zone-loss") -> None:
    """Zone losses healed ``heal`` seconds after the injection, failing at 10 req/s for a third of it."""
    for i, h in enumerate(heals, 1):
        outage_run(suite / name / f"trial-{i}", scope="zone", failed=int(h * 10 / 3), heal_t=10 + h,
                   end_t=max(30, 15 + h))


def test_mixed_outage_lengths_do_not_cover_the_longest_with_one_run(tmp_path):
    """Point 2: four 2 s outages and one 30 s: a stated 30 s is not covered (one run at it, no fit)."""
    suite = tmp_path / "suite"
    zone_trials(suite, [2, 2, 2, 2, 30])
    doc = make(suite, rates(tmp_path, {"zone": {"events": 0.1, "duration_s": 30}}))
    assert doc["verdict"]["word"] == "not_covered"
    c = doc["scopes"]["zone"]["coverage"]
    assert c["covered"] is False and c["runs_at_or_beyond"] == 1 and c["fit"] is None
    assert "1 run(s) at or beyond it (need 2), and no fit" in doc["verdict"]["reasons"][0]


def test_two_runs_at_the_stated_length_cover_it_and_their_costs_are_the_events(tmp_path):
    suite = tmp_path / "suite"
    zone_trials(suite, [2, 2, 2, 30, 30])
    doc = make(suite, rates(tmp_path, {"zone": {"events": 0.1, "duration_s": 30}}))
    c = doc["scopes"]["zone"]["coverage"]
    assert c["covered"] and c["by"] == "runs" and c["runs_at_or_beyond"] == 2
    e = doc["scopes"]["zone"]["expected_lost_s"]["mean"]
    # the events cost the 30 s runs' 10 s, not the 2 s runs' ~0.7 s; an unseen one (chance (0 + 0.5) / (5 + 1),
    # all five runs counted) the 3600 s stated, above the 2592 s budget
    q = 0.5 / 6
    assert e == pytest.approx(0.1 * ((1 - q) * 10.0 + q * 3600), rel=0.05)
    assert doc["availability"]["point"] == pytest.approx(1 - 0.1 * 10.0 / MONTH_S, abs=1e-9)  # the 30 s runs only


def test_a_fit_through_two_lengths_is_read_within_them_never_beyond(tmp_path):
    """Issue 42, point 9: the fit interpolates; docs/claim.md says the claim never extrapolates, and it does not
    (it read up to twice the longest length tested before)."""
    suite = tmp_path / "suite"
    zone_trials(suite, [5, 5, 9.5, 10])  # 9.5 and 10 s are one length (within 10 %): two runs at it
    covered = make(suite, rates(tmp_path, {"zone": {"events": 0.1, "duration_s": 9.8}}))  # one run at or beyond
    c = covered["scopes"]["zone"]["coverage"]
    assert c["covered"] and c["by"] == "fit"
    assert c["fit"]["b"] == pytest.approx(1 / 3, abs=0.02)  # a third of the service waits the outage out
    assert c["fit"]["lengths_s"] == [5.0, 9.5] and c["fit"]["runs"] == 4
    beyond = make(suite, rates(tmp_path, {"zone": {"events": 0.1, "duration_s": 10.5}}))
    assert beyond["verdict"]["word"] == "not_covered"
    assert "the claim never extrapolates" in beyond["verdict"]["reasons"][0]


def test_a_scope_with_no_heal_cannot_cover_a_stated_length(tmp_path):
    suite = suite_of(tmp_path)
    doc = make(suite, rates(tmp_path, {"replica": {"events": 4, "duration_s": 60}}))
    assert doc["verdict"]["word"] == "not_covered"
    assert "a duration of 60 s is stated, but no run of it imposed an outage length" in doc["verdict"]["reasons"][0]


def test_a_rated_scope_without_a_run_is_not_covered(tmp_path):
    suite = suite_of(tmp_path)
    doc = make(suite, rates(tmp_path, {"replica": {"events": 4}, "zone": {"events": 0.1}, "region": {"events": 0.02}}))
    assert doc["verdict"]["word"] == "not_covered"
    assert doc["verdict"]["reasons"][0] == "not_covered: region: no single-fault run of this scope in the suite"
    # what the covered scopes alone say comes after it, and the plan puts the uncovered scope first
    assert all(r.startswith("insufficient_evidence: ") for r in doc["verdict"]["reasons"][1:])
    assert doc["plan"][0]["scope"] == "region" and doc["plan"][0]["why"].startswith("no single-fault run")
    assert doc["plan"][0]["command"].startswith("availproof run experiments/region-loss.json --trials 2")
    assert doc["availability"]["left_out"] == {"region": "no single-fault run of this scope"}
    assert doc["availability"]["mean"] is not None  # the measured figures are reported in every case


# ---------------------------------------------------------------- the plan
def test_the_trials_the_claim_asks_for_would_support_it(tmp_path):
    """Point 9: insufficient_evidence names how many more trials of which scope; run them (copies of the
    trials, costing what they cost) and the claim is supported."""
    suite = tmp_path / "suite"
    trials(suite, "replica-kill", [10, 20, 5])
    r = rates(tmp_path, {"replica": {"events": 1, "unrecovered_cost_s": 3000}})
    doc = make(suite, r)
    assert doc["verdict"]["word"] == "insufficient_evidence"
    k = doc["trials_needed"]["extra"]["replica"]
    [row] = doc["plan"]
    assert row["scope"] == "replica" and row["suggested_trials"] == k
    assert row["command"] == f"availproof run experiments/replica-kill.json --trials {k} --out {suite}/replica-more"
    more = suite / "replica-more"
    for i in range(k + 2):  # two more than asked: the claim's own simulation is not the search's
        shutil.copytree(suite / "replica-kill" / f"trial-{i % 3 + 1}", more / f"trial-{i + 1}")
    assert make(suite, r)["verdict"]["word"] == "supported"


def test_the_command_prints_the_plan(tmp_path, capsys):
    suite = suite_of(tmp_path)
    (tmp_path / "rates.yaml").write_text("period_days: 30\nscopes:\n  replica: {events: 4}\n  zone: {events: 0.1}\n")
    assert cli.main(["claim", str(suite), "--faults", str(tmp_path / "rates.yaml"), "--plan"]) == 1
    out = capsys.readouterr().out
    assert out.startswith("insufficient_evidence: 99.9 % over 30 days")
    assert "1. replica: 5 trial(s); one more lowers" in out and "availproof run experiments/replica-kill.json" in out


# ---------------------------------------------------------------- populations, runs that do not count
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
    doc = make(suite, rates(tmp_path, {"node": {"events": 0.34}}), population="affected")
    run = doc["runs"][0]
    assert run["lost_service_s"] is None and run["slo_lost_service_s"] is None
    assert run["unmeasurable"]["lost_service_s"] == "no request of the population in the fault's window"
    assert not run["counted"] and "could not be measured" in run["not_counted"]
    assert doc["scopes"]["node"]["trials"] == 0 and doc["scopes"]["node"]["lost_service_s"]["mean"] is None
    assert doc["verdict"]["word"] == "not_covered" and "no run of this scope with a measured cost" in doc[
        "verdict"]["reasons"][0]
    assert "availability.mean" in doc["unmeasurable"] and doc["availability"].get("mean") is None
    assert make(suite, rates(tmp_path, {"node": {"events": 0.34}}))["runs"][0]["lost_service_s"] == 0.0


def test_the_affected_population_takes_the_lost_zones_users_and_names_the_worst_zone(tmp_path):
    suite = tmp_path / "suite"
    zoned_run(suite / "worker-node-kill", 30)
    r = rates(tmp_path, {"node": {"events": 0.34}})
    doc = make(suite, r, population="affected")
    assert doc["runs"][0]["faults"][0]["baseline"]["requests"] == 96  # zone b's, ended before the injection
    assert doc["runs"][0]["lost_service_s"] == pytest.approx(3.0)  # zone b's users: 30 failed at 10 per second
    assert doc["worst_zone"]["zone"] == "b"
    assert doc["worst_zone"]["availability"] == pytest.approx(1 - 0.34 * 3.0 / MONTH_S, abs=1e-9)
    assert make(suite, r)["runs"][0]["lost_service_s"] == pytest.approx(1.0)  # spread over every zone's users


def test_behind_one_balancer_a_zone_loss_has_no_affected_cost(tmp_path):
    suite = tmp_path / "suite"
    outage_run(suite / "zone-loss", scope="zone", heal_t=30)  # lb: requests carry no zone
    doc = make(suite, rates(tmp_path, {"zone": {"events": 0.1}}), population="affected")
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
    doc = make(suite, rates(tmp_path, {"replica": {"events": 4}, "head": {"events": 1}}))
    assert doc["scopes"]["replica"]["runs"] == 1 and "head" not in doc["scopes"]
    [multi] = doc["multi_fault_runs"]
    assert multi["scopes"] == ["head", "replica"] and [f["window_cut_by"] for f in multi["faults"]] == ["r", None]
    assert multi["faults"][1]["failed"] == 10 and multi["faults"][1]["lost_service_s"] == pytest.approx(1.0)
    assert doc["verdict"]["reasons"][0] == ("not_covered: head: no single-fault run of this scope in the suite (only "
                                            "inside head-outage-second-fault, which is never pooled)")


def rewrite_summary(d: Path, **changes) -> None:
    s = json.loads((d / "summary.json").read_text())
    s.update(changes)
    (d / "summary.json").write_text(json.dumps(s))


def test_an_error_run_and_a_fault_injected_into_an_unsteady_baseline_do_not_count(tmp_path):
    suite = tmp_path / "suite"
    for name in ("replica-kill", "replica-kill-2", "replica-kill-3"):
        outage_run(suite / name, failed=10)
    s2 = json.loads((suite / "replica-kill-2" / "summary.json").read_text())
    s2["faults"][0]["effect"] = {"verified": False}
    rewrite_summary(suite / "replica-kill-2", faults=s2["faults"], verdict={
        "word": "ERROR", "exit_code": 2, "reasons": ["fault not in effect: replica x"]})
    rewrite_summary(suite / "replica-kill-3", baseline_gate={
        "judged": True, "steady": False, "requests": 61, "failed": 16, "failures": {"deadline": 16},
        "reason": "baseline: 16 of 61 requests failed (deadline 16)", "injected_anyway": True})
    doc = make(suite, rates(tmp_path, {"replica": {"events": 4}}))
    e = doc["scopes"]["replica"]
    assert e["runs"] == 3 and e["trials"] == 1
    assert e["not_counted"] == [
        {"run": "replica-kill-2", "why": "its fault was not seen in effect"},
        {"run": "replica-kill-3", "why": "its fault was injected into a baseline out of steady state (injected anyway: "
                                         "baseline: 16 of 61 requests failed (deadline 16))"}]


def test_without_records_the_cost_is_null_with_its_reason(tmp_path):
    suite = tmp_path / "suite"
    outage_run(suite / "replica-kill", failed=10)
    (suite / "replica-kill" / "records.ndjson").unlink()
    doc = make(suite, rates(tmp_path, {"replica": {"events": 4}}))
    run = doc["runs"][0]
    assert run["lost_service_s"] is None and "records.ndjson" in run["unmeasurable"]["lost_service_s"]


# ---------------------------------------------------------------- overlap, RATES, the command, the report
def test_the_overlap_is_rate_times_rate_times_duration_over_the_period(tmp_path):
    r = rates(tmp_path, {"zone": {"events": 2, "duration_s": 100}, "node": {"events": 3, "duration_s": 50}})
    ov = document.overlap(r, {})
    m = 2 * 3 * 150 / MONTH_S + 4 * 100 / MONTH_S + 9 * 50 / MONTH_S
    assert ov["expected"] == pytest.approx(m, abs=1e-9) and ov["probability"] == pytest.approx(1 - math.exp(-m))


def test_a_source_is_checkable_with_a_url_or_a_doi():
    assert claim.checkable("https://arxiv.org/abs/2407.21783") and claim.checkable("doi:10.1145/1234")
    assert claim.checkable("see 10.48550/arXiv.2407.21783")
    assert not claim.checkable("guess: our postmortems") and not claim.checkable(None)


def test_the_shipped_example_rates_load():
    r = claim.load_rates(Path(claim.__file__).resolve().parents[2] / "experiments" / "rates" / "example-rates.yaml")
    assert r.period_days == 30 and r.scopes["node"].basis == "checkable" and r.scopes["replica"].basis == "guess"
    assert r.scopes["zone"].kind == "observed"


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
    ("period_days: 30\nscopes: {zone: {events: 1, count: 3, exposure_days: 270}}",
     "scopes.zone: either events (a point figure) or count and exposure_days (an observed history), not both"),
    ("period_days: 30\nscopes: {zone: {count: 3}}", "scopes.zone.exposure_days: is required with count"),
    ("period_days: 30\nscopes: {zone: {exposure_days: 270}}", "scopes.zone.count: is required with exposure_days"),
    ("period_days: 30\nscopes: {zone: {count: 2.5, exposure_days: 270}}", "scopes.zone.count: must be a whole number"),
    ("period_days: 30\nscopes: {zone: {count: 3, exposure_days: 0}}", "scopes.zone.exposure_days: must be a number of days above 0"),
    ("period_days: 30\nscopes: {zone: {events: 1, unrecovered_cost_s: 0}}", "scopes.zone.unrecovered_cost_s: must be a number"),
])
def test_bad_rates_are_one_line_and_nothing_is_written(tmp_path, capsys, text, line):
    suite = tmp_path / "suite"
    outage_run(suite / "replica-kill", failed=10)
    (tmp_path / "rates.yaml").write_text(text)
    assert cli.main(["claim", str(suite), "--faults", str(tmp_path / "rates.yaml")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and line in err and str(tmp_path / "rates.yaml") in err
    assert not list(suite.glob("claim.*"))


@pytest.mark.parametrize("args, line", [
    (["--target", "abc"], "--target: a percentage between 0 and 100"),
    (["--target", "100"], "--target: a percentage between 0 and 100 (exclusive)"),
    (["--slo-target", "0"], "--slo-target: a percentage between 0 and 100 (exclusive)"),
    (["--risk", "1.5"], "--risk: a probability between 0 and 1 (exclusive)"),
    (["--faults", "/nonexistent/rates.yaml"], "/nonexistent/rates.yaml: cannot read the rates file"),
])
def test_bad_arguments_are_one_line(tmp_path, capsys, args, line):
    suite = tmp_path / "suite"
    outage_run(suite / "replica-kill", failed=10)
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


def test_the_command_writes_the_claim_and_its_picture_and_exits_0_only_when_supported(tmp_path, capsys):
    suite = suite_of(tmp_path)
    (tmp_path / "rates.yaml").write_text("period_days: 30\nscopes:\n  replica: {events: 0.1}\n"
                                         "  zone: {events: 0.05}\n")
    assert cli.main(["claim", str(suite), "--faults", str(tmp_path / "rates.yaml"), "--format", "all",
                     "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"# availproof claim: {suite}") and "**supported: 99.9 % over 30 days" in out
    doc = valid(json.loads((suite / "claim.json").read_text()))
    assert doc["seed"] == 3 and (suite / "claim.md").read_text() == out and "![expected loss" in out
    page = (suite / "claim.html").read_text()
    assert page.startswith("<!doctype html>") and "replica-kill/trial-5" in page and "<script" not in page
    picture = (suite / "claim.svg").read_text()
    assert picture.startswith("<svg") and picture.count("<circle") == 2 and ">budget</text>" in picture
    assert "<svg" in page
    (tmp_path / "rates.yaml").write_text("period_days: 30\nscopes: {replica: {events: 4}, region: {events: 1}}\n")
    assert cli.main(["claim", str(suite), "--faults", str(tmp_path / "rates.yaml"), "--format", "json"]) == 1
    printed = json.loads(capsys.readouterr().out)
    assert printed["verdict"]["word"] == "not_covered" and printed == json.loads((suite / "claim.json").read_text())


def test_the_markdown_shows_each_runs_inputs(tmp_path):
    suite = tmp_path / "suite"
    outage_run(suite / "replica-kill", failed=20)
    doc = make(suite, rates(tmp_path, {"replica": {"events": 4}, "region": {"events": 1}}))
    md = claim_report.markdown(doc)
    assert "| replica-kill | replica | PASS | yes | 20 / 204 | 20 | 0 / 96 | open, 1 s buckets | 2 | 2 |" in md
    assert "| region | 1 (point) | n/a | guess | 0 | 0 | - | not covered |" in md
    assert "- not_covered: region: no single-fault run of this scope in the suite" in md


# ---------------------------------------------------------------- the review's cases (2026-12-05)
def test_an_unseen_or_unrecovered_event_costs_at_least_the_budget_and_its_largest_lower_bound(tmp_path):
    """The bootstrap cannot draw a cost it has not seen: an event unlike any tested costs at least the whole
    budget, whatever unrecovered_cost_s says, and at least what a run that never recovered measured."""
    suite = tmp_path / "suite"
    trials(suite, "replica-kill", [10, 10, 10, 10])
    outage_run(suite / "replica-kill" / "trial-5", never_recovers=True)  # measured 20 s at least
    low = make(suite, rates(tmp_path, {"replica": {"events": 1, "unrecovered_cost_s": 5}}), target=1 - 12 / MONTH_S)
    assert low["scopes"]["replica"]["unrecovered"]["cost_s"] == pytest.approx(20.0, abs=0.5)
    high = make(suite, rates(tmp_path, {"replica": {"events": 1, "unrecovered_cost_s": 5}}))
    # strictly above the budget: the budget plus a second, so such an event always misses the period
    assert high["scopes"]["replica"]["unrecovered"]["cost_s"] == pytest.approx(0.001 * MONTH_S + 1)


def test_a_shorter_outage_that_did_not_recover_still_counts_for_a_longer_stated_one(tmp_path):
    suite = tmp_path / "suite"
    for i in range(1, 4):
        outage_run(suite / "zone-loss" / f"trial-{i}", scope="zone", heal_t=12, never_recovers=True)
    zone_trials(suite, [30, 30], name="zone-loss-long")
    doc = make(suite, rates(tmp_path, {"zone": {"events": 0.1, "duration_s": 30}}))
    e = doc["scopes"]["zone"]
    assert e["coverage"]["by"] == "runs" and e["unrecovered"]["runs"] == 3 and e["unrecovered"]["of"] == 5
    none_stated = make(suite, rates(tmp_path, {"zone": {"events": 0.1}}))
    assert e["expected_lost_s"]["mean"] > 0.5 * none_stated["scopes"]["zone"]["expected_lost_s"]["mean"]


def test_nothing_rated_is_nothing_to_claim(tmp_path):
    suite = tmp_path / "suite"
    outage_run(suite / "replica-kill", failed=200)
    doc = make(suite, rates(tmp_path, {"replica": {"events": 0}}))
    assert doc["verdict"]["word"] == "not_covered"
    assert doc["verdict"]["reasons"] == ["not_covered: no rated scope: nothing to claim (every scope's rate is 0, "
                                         "or none is given)"]


def test_a_closed_loops_affected_users_are_its_share_of_the_busy_time(tmp_path):
    """Two zones, one user each in turn: zone b's requests take 0.6 s, zone a's 0.05 s, so zone b holds
    most of the users' time (and of the users) though it gets half the requests."""
    rs, i, t = [], 0, 0.0
    while t < 40:
        for z, d_s in (("a", 0.05), ("b", 0.6)):
            bad = z == "b" and 10 <= t < 15
            rs.append(req(i, round(t, 6), ok=not bad, e2e=d_s, zone=z))
            i += 1
            t = round(t + d_s, 6)
    load = {**ENVIRONMENT["load"], "mode": "closed", "concurrency": 1}
    write_run(tmp_path / "suite" / "worker-node-kill", rs, [mark(rec.INJECT_START, 10, scope="node", zones=("b",))],
              40, "node", front="zonal-lb", load=load)
    doc = make(tmp_path / "suite", rates(tmp_path, {"node": {"events": 1}}), population="affected")
    users = doc["runs"][0]["faults"][0]["model"]["users"]
    assert users == pytest.approx(0.6 / 0.65, abs=0.02)  # by requests it would be 0.5


# ---------------------------------------------------------------- issue 42 (2026-12-06)
def test_two_runs_that_never_came_back_among_twelve_count_as_unrecovered(tmp_path):
    """Point 5: runs with an ERROR after the injection (a heal failed, a method step failed) were dropped:
    survivorship. Ten recovered runs plus two unhealed at one event a month: the two count as unrecovered (2 of
    12), never dropped; a run that failed before any fault stays out, and the claim lists both."""
    suite = tmp_path / "suite"
    trials(suite, "replica-kill", [10] * 12)
    for i in (11, 12):
        rewrite_summary(suite / "replica-kill" / f"trial-{i}", verdict={
            "word": "ERROR", "exit_code": 2, "reasons": ["the fault could not be healed: restart failed"]})
    write_run(suite / "set-up-failed", every(0, 5), [], 5, "replica", word="ERROR")
    quiet_run(suite)
    doc = make(suite, rates(tmp_path, {"replica": {"events": 1}}))
    e = doc["scopes"]["replica"]
    assert e["unrecovered"]["runs"] == 2 and e["unrecovered"]["of"] == 12 and e["trials"] == 12
    assert [x["run"] for x in e["never_came_back"]] == ["replica-kill/trial-11", "replica-kill/trial-12"]
    assert "never came back" in e["never_came_back"][0]["why"] and "restart failed" in e["never_came_back"][0]["why"]
    skipped = [r for r in doc["runs"] if r["experiment"] == "set-up-failed"][0]
    assert not skipped["counted"] and "failed before any injection" in skipped["not_counted"]
    # 2 of 12 at one event a month: q's 5 % quantile (~0.05) sits at the risk's edge: more trials may yet support
    # it, but far fewer would be asked for had the two been dropped
    assert doc["verdict"]["word"] == "insufficient_evidence"
    for i in (11, 12):
        shutil.rmtree(suite / "replica-kill" / f"trial-{i}")
    dropped = make(suite, rates(tmp_path, {"replica": {"events": 1}}))
    assert dropped["credibility"]["availability"]["value"] > 2 * doc["credibility"]["availability"]["value"]


def test_runs_of_different_loads_and_an_uncertain_background_are_said(tmp_path):
    suite = tmp_path / "suite"
    outage_run(suite / "replica-kill" / "trial-1", failed=10)
    s = json.loads((suite / "replica-kill" / "trial-1" / "summary.json").read_text())
    outage_run(suite / "replica-kill" / "trial-2", failed=10)
    s["environment"]["load"]["rate"] = 50
    (suite / "replica-kill" / "trial-1" / "summary.json").write_text(json.dumps(s))
    doc = make(suite, rates(tmp_path, {"replica": {"events": 1}}))
    assert any("pool runs of different loads" in w and "rate 50" in w for w in doc["warnings"])
    bg = doc["background"]
    assert bg["requests"] == 192 and bg["failed"] == 0 and bg["runs"] == 2
    assert bg["lost_s"]["interval90"][1] > doc["error_budget"]["seconds"]  # 192 clean requests say little
    assert any(w.startswith("background: 0 of 192 baseline requests failed") for w in doc["warnings"])
    assert doc["credibility"]["availability"]["value"] < 0.9 and doc["verdict"]["word"] == "insufficient_evidence"


def test_a_soaks_quiet_requests_narrow_the_background(tmp_path):
    suite = tmp_path / "suite"
    trials(suite, "replica-kill", [10, 10])
    r = rates(tmp_path, {"replica": {"events": 1}})
    alone = make(suite, r)["background"]
    soaked = make(suite, r, soak_quiet={"requests": 100_000, "failed": 3, "slo_missed": 5})["background"]
    assert (soaked["requests"], soaked["failed"], soaked["runs"]) == (alone["requests"] + 100_000, 3, 3)
    assert soaked["lost_s"]["interval90"][1] < alone["lost_s"]["interval90"][1] / 10
