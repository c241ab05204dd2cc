"""The claim with a client that retries, and the scopes it can rate (issue 48): synthetic suites with known answers.

Runs are written as the rig writes them (tests.unit.test_claim.write_run: records.ndjson, then summary.json derived
by chaos.core.summary), requests at 10 per second, each 0.5 s, a fault at 10 s: one failed logical request in a
1 s bucket is 0.1 s of the service lost."""

import json
import os
from pathlib import Path

import numpy as np
import pytest

from chaos import claim, scopes
from chaos.claim import counted, document
from chaos.recording import records as rec, request_columns as rc
from chaos.reports import claim as claim_report
from tests.unit.test_analysis import NS, T0, every, mark, req
from tests.unit.test_claim import ENVIRONMENT, make, outage_run, quiet_run, rates, trials, write_run

RETRY = {"attempts": 3, "per_attempt_timeout_s": None, "backoff_base_s": 0.1, "backoff_cap_s": 2.0, "jitter": "full",
         "retry_on": ["connect", "timeout", "5xx"], "after_first_token": False, "budget": None,
         "honour_retry_after": False, "retry_after_cap_s": 10.0}
GOLDEN = Path(__file__).parent / "data" / "claim_without_retries.json"
REGENERATE = "AVAILPROOF_REGENERATE_CLAIM_GOLDEN"


def _attempt(first: rec.RequestRecord, n: int, after_s: float, ok: bool) -> rec.RequestRecord:
    """Attempt ``n`` of ``first``'s logical request, sent ``after_s`` after its first attempt."""
    r = req(first.id, round(first.sent_offset_s + after_s, 4), ok=ok)
    r.attempt = n
    return r


def retried_run(d: Path, retry: dict | None = RETRY) -> dict:
    """One fault at 10 s; in its window 10 attempts fail but only 2 logical requests do:

    - at 12.0 s and 15.0 s a logical request whose 3 attempts (+0, +0.6, +1.2 s) all fail: 6 failed attempts;
    - at 11.0, 11.5 and 20.0 s one whose first attempt fails and whose second (+0.6 s) succeeds;
    - at 20.5 s one whose second attempt succeeds only 2.5 s after its first send: TTFT 2.6 s for its user,
      outside the 2 s SLO though each attempt met it: 4 more failed attempts, 0 more failed logical requests."""
    base = every(0, 30)
    for r in base:
        r.attempt = 1
    at = {round(r.sent_offset_s, 4): r for r in base}
    extra = []
    for t in (12.0, 15.0):
        first = at[t]
        first.ok, first.failure, first.ttft_s = False, rec.CONNECT_REFUSED, None
        extra += [_attempt(first, 2, 0.6, False), _attempt(first, 3, 1.2, False)]
    for t, after in ((11.0, 0.6), (11.5, 0.6), (20.0, 0.6), (20.5, 2.5)):
        first = at[t]
        first.ok, first.failure, first.ttft_s = False, rec.CONNECT_REFUSED, None
        extra.append(_attempt(first, 2, after, True))
    for r in extra:
        if not r.ok:
            r.failure, r.ttft_s = rec.CONNECT_REFUSED, None
    load = {**ENVIRONMENT["load"], **({"retry": retry} if retry else {})}
    return write_run(d, base + extra, [mark(rec.INJECT_START, 10, scope="replica", zones=("zone-a",))], 30,
                     "replica", load=load)


# ---------------------------------------------------------------- logical requests
def test_a_logical_request_fails_only_when_its_last_attempt_failed_and_spans_from_its_first_send():
    a = req(1, 1.0, ok=False)
    b = req(1, 1.6, ok=True, ttft=0.1, e2e=0.5)
    c = req(2, 1.1, ok=False)
    d = req(2, 1.7, ok=False)
    for r, n in ((a, 1), (b, 2), (c, 1), (d, 2)):
        r.attempt = n
    cols, attempts = counted.logical_columns(rc.from_records([a, c, b, d]))
    assert len(cols) == 2 and attempts.tolist() == [2, 2]
    assert cols.ok.tolist() == [True, False]  # 1: its retry succeeded; 2: its last attempt failed
    assert cols.sent_ns.tolist() == [T0 + NS, T0 + int(1.1 * NS)]  # first sends, in send order
    assert cols.ttft[0] == pytest.approx(0.7) and cols.e2e[0] == pytest.approx(1.1)  # 0.6 s waited, then 0.1 / 0.5
    assert np.isnan(cols.ttft[1]) and cols.end_ns[1] == d.sent_ns + int(0.5 * NS)
    assert cols.records(np.array([0]))[0] is b  # the row's record: its final answer


def test_a_run_without_a_retry_policy_is_counted_as_recorded():
    records = rec.RunRecords(header={"load": {"mode": "open"}}, requests=[req(1, 1.0)], marks=[], footer={})
    got = counted.counted(records)
    assert not got.logical and got.attempts is None and got.counted_in() is None and len(got.columns) == 1


# ---------------------------------------------------------------- the claim's cost
def test_ten_failed_attempts_but_two_failed_logical_requests_cost_two(tmp_path):
    s = retried_run(tmp_path / "suite" / "replica-kill")
    assert s["faults"][0]["service"]["failed_total"] == 10  # the summary counts attempts
    assert s["faults"][0]["service"]["retries"]["logical_failed"] == 2
    doc = make(tmp_path / "suite", rates(tmp_path, {"replica": {"events": 4}}))
    run = doc["runs"][0]
    fc = run["faults"][0]
    assert run["counted_in"] == {"unit": "logical requests", "retries": True, "policy_attempts": 3}
    assert fc["failed"] == 2 and fc["requests"] == 204 and fc["attempts"] == 212  # 204 + 2 x 2 + 4 x 1
    assert run["lost_service_s"] == pytest.approx(0.2)  # 2 logical requests at 10 per second
    assert fc["slo_missed"] == 3 and run["slo_lost_service_s"] == pytest.approx(0.3)  # + the one 2.6 s late
    e = doc["scopes"]["replica"]
    assert e["lost_service_s"]["values"] == [pytest.approx(0.2)]
    assert e["counted_in"]["statement"] == ("counted in logical requests: retries on (attempts 3); 212 attempts for "
                                            "204 logical requests in the fault windows")
    assert document.RETRIES_ASSUMPTION in doc["assumptions"]
    md = claim_report.markdown(doc)
    assert "- replica: counted in logical requests: retries on (attempts 3)" in md
    assert "2 / 204 logical (212 attempts)" in md
    assert "counted in logical requests" in claim_report.html(doc)


def test_the_same_records_without_a_policy_count_attempts_as_before(tmp_path):
    retried_run(tmp_path / "suite" / "replica-kill", retry=None)
    doc = make(tmp_path / "suite", rates(tmp_path, {"replica": {"events": 4}}))
    run, fc = doc["runs"][0], doc["runs"][0]["faults"][0]
    assert "counted_in" not in run and "attempts" not in fc and "counted_in" not in doc["scopes"]["replica"]
    assert fc["failed"] == 10 and fc["requests"] == 212 and run["lost_service_s"] > 0.2
    assert document.RETRIES_ASSUMPTION not in doc["assumptions"]
    assert "logical" not in claim_report.markdown(doc)


def test_a_scope_pooling_runs_with_and_without_retries_says_so(tmp_path):
    retried_run(tmp_path / "suite" / "replica-kill" / "trial-1")
    outage_run(tmp_path / "suite" / "replica-kill" / "trial-2", failed=20)
    doc = make(tmp_path / "suite", rates(tmp_path, {"replica": {"events": 4}}))
    ci = doc["scopes"]["replica"]["counted_in"]
    assert (ci["runs"], ci["of"]) == (1, 2) and "retries on in 1 of 2 runs" in ci["statement"]
    assert any(w.startswith("replica: its costs pool runs with and without client retries") for w in doc["warnings"])


def _golden_doc(tmp_path: Path) -> str:
    """A suite without retries (three replica kills, a node kill with a failed baseline and slow requests, a zone
    loss that never recovered, a quiet run) and its claim.json and claim.md, the suite's path replaced by SUITE."""
    suite = tmp_path / "suite"
    trials(suite, "replica-kill", [20, 10, 30])
    outage_run(suite / "node-kill" / "trial-1", scope="node", failed=40, base_failed=2, slow=5)
    outage_run(suite / "zone-loss" / "trial-1", scope="zone", heal_t=25, never_recovers=True)
    quiet_run(suite)
    r = rates(tmp_path, {"replica": {"events": 4}, "node": {"count": 1, "exposure_days": 300},
                         "zone": {"events": 2}})  # a zone loss never recovered, twice a period: not_supported, no search
    doc = claim.claim(suite, r, 0.999, 0.05, simulations=2000)
    text = json.dumps({"claim.json": json.dumps(doc, indent=2, default=str), "claim.md": claim_report.markdown(doc)},
                      indent=1)
    return text.replace(str(suite), "SUITE").replace(str(tmp_path), "TMP")


def test_without_retries_the_claim_is_byte_identical_to_the_one_before_retries(tmp_path):
    """The fixture was written by the claim's code before retries were counted (main at 53c920c). Regenerate it
    (``AVAILPROOF_REGENERATE_CLAIM_GOLDEN=1``) only for a change meant to alter claims from runs without retries."""
    text = _golden_doc(tmp_path)
    if os.environ.get(REGENERATE):
        GOLDEN.write_text(text)
    assert text == GOLDEN.read_text()


# ---------------------------------------------------------------- the scopes the claim can rate
def test_restart_fails_is_rated_like_any_scope(tmp_path):
    outage_run(tmp_path / "suite" / "restart-fails", scope="restart-fails", failed=3, heal_t=40, end_t=60)
    doc = make(tmp_path / "suite", rates(tmp_path, {"restart-fails": {"events": 0.5}}))
    e = doc["scopes"]["restart-fails"]
    assert e["label"] == "restart fails" and e["trials"] == 1 and e["outage_tested_s"] == 30.0
    assert e["lost_service_s"]["values"] == [pytest.approx(0.3)]
    assert e["expected_lost_s"] is not None and doc["availability"]["scopes"] == ["restart-fails"]
    # unrated: tested, said, and left out of the figures
    doc = make(tmp_path / "suite", rates(tmp_path, {"replica": {"events": 1}}))
    assert doc["tested_without_rate"] == ["restart-fails"]
    assert doc["scopes"]["restart-fails"]["expected_lost_s"] is None
    assert doc["unmeasurable"]["scopes.restart-fails.expected_lost_s"] == "the scope has no rate in RATES: not in the claim"
    assert "replica: no single-fault run of this scope in the suite" in doc["verdict"]["reasons"][0]


def test_the_shipped_example_rates_rate_restart_fails():
    r = claim.load_rates(Path(claim.__file__).resolve().parents[2] / "experiments" / "rates" / "example-rates.yaml")
    assert r.scopes["restart-fails"].rated() and r.scopes["restart-fails"].basis == "guess"


def test_a_registered_scope_can_be_rated_without_touching_the_claim(tmp_path):
    """The claim's scopes are the registry's (chaos.base.scope_registry): a scope's module registering itself is all
    it takes (overload's, a plug-in's)."""
    probe = scopes.Scope("claim-probe", "claim probe", zoned=True, every_target_affected=True)
    scopes.register(probe)
    try:
        outage_run(tmp_path / "suite" / "probe", scope="claim-probe", failed=10)
        doc = make(tmp_path / "suite", rates(tmp_path, {"claim-probe": {"events": 2}}))
        assert doc["scopes"]["claim-probe"]["expected_lost_s"] is not None
        assert doc["rates"]["scopes"]["claim-probe"]["events"] == 2
    finally:
        scopes.unregister("claim-probe")
    with pytest.raises(claim.UsageError, match="scopes.claim-probe: unknown scope"):
        rates(tmp_path, {"claim-probe": {"events": 2}})
