"""Overload that refuses instead of timing out (issue 48): the admission limits in the Serve config (only when set),
a refusal as its own failure class, Retry-After honoured, a load step as shares of a measured capacity, and the
summary's overload figures on synthetic records with known answers."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from chaos.analysis import analyse
from chaos.analysis import overload as ov
from chaos.core import experiment as exp_mod
from chaos.load import failures, retry, utilization
from chaos.load.workload import LoadShape
from chaos.recording import records as rec
from serve_apps.admission import Admission
from serve_apps.config import AppSpec, serve_config, validate

ROOT = Path(__file__).resolve().parents[2]
T0 = 1_000_000_000_000_000_000


# ---------------------------------------------------------------- the Serve config
def _deployments(spec: AppSpec) -> list[dict]:
    return serve_config(spec)["applications"][0]["deployments"]


def test_the_config_is_unchanged_without_admission():
    plain = serve_config(AppSpec())
    assert serve_config(AppSpec(admission=None)) == plain
    assert json.dumps(plain) == json.dumps(serve_config(AppSpec()))  # byte for byte, key order included
    for d in plain["applications"][0]["deployments"]:
        assert "max_queued_requests" not in d and "backpressure_config" not in d


def test_fast_refusal_goes_on_the_deployment_the_proxies_call():
    a = Admission.from_dict({"max_ongoing_requests": 8, "max_queued_requests": 4, "retry_after_s": 2})
    (target,) = _deployments(AppSpec(admission=a))
    assert target["max_ongoing_requests"] == 8 and target["max_queued_requests"] == 4
    assert target["backpressure_config"] == {"status_code": 503, "retry_after_s": 2}
    validate(serve_config(AppSpec(admission=a)))  # Ray's own schema takes it
    engines, ingress = _deployments(AppSpec(admission=a, migration_limit=2))  # behind the migrating ingress
    assert engines["max_ongoing_requests"] == 8 and "max_queued_requests" not in engines
    assert ingress["max_queued_requests"] == 4 and ingress["backpressure_config"]["status_code"] == 503
    spec = AppSpec(app="llm", admission=a)
    spec.llm.model_path = "/nowhere"
    args = serve_config(spec)["applications"][0]["args"]
    assert args["ingress_deployment_config"]["max_queued_requests"] == 4
    assert args["llm_configs"][0]["deployment_config"]["max_ongoing_requests"] == 8
    assert "max_queued_requests" not in args["llm_configs"][0]["deployment_config"]


def test_without_fast_refusal_only_the_concurrency_changes():
    a = Admission.from_dict({"max_ongoing_requests": 8, "max_queued_requests": -1})
    (target,) = _deployments(AppSpec(admission=a))
    assert target["max_ongoing_requests"] == 8 and "max_queued_requests" not in target and not a.refuses_fast


@pytest.mark.parametrize("doc, says", [({"max_queued_requests": -2}, "max_queued_requests"),
                                       ({"status_code": 500}, "503 or 429"), ({"retry_after": 1}, "unknown")])
def test_admission_refuses_what_serve_would_not_take(doc, says):
    with pytest.raises(ValueError, match=says):
        Admission.from_dict(doc)


def test_the_kuberay_manifests_change_only_with_admission():
    from serve_apps import kuberay

    plain = kuberay.render()
    assert all(path.read_text() == text for path, text in plain.items())  # the committed files
    stepped = kuberay.render(admission=Admission.from_dict({"max_queued_requests": 4}))
    base = next(p for p in stepped if p.name == "rayservice.yaml")
    assert "max_queued_requests: 4" in stepped[base] and "max_queued_requests" not in plain[base]


# ---------------------------------------------------------------- a refusal, its class, its Retry-After
def _failed(status: int, text: str = "busy", **headers) -> rec.RequestRecord:
    r = rec.RequestRecord(id=1, target="t", url="u", zone=None, route="/v1/chat/completions", phase="measure",
                          planned_ns=0, sent_ns=0, sent_offset_s=0.0, status=status)
    failures.http_failure(r, status, text, httpx.Headers(headers), now_s=0.0)
    return r


def test_a_refusal_is_its_own_class_not_a_5xx_nor_a_timeout():
    assert _failed(503, **{"retry-after": "1"}).failure == rec.REFUSED
    assert _failed(503, "Request dropped due to backpressure (num_queued_requests=8, max_queued_requests=8).").failure \
        == rec.REFUSED  # Serve's answer without a Retry-After
    assert _failed(429).failure == rec.REFUSED
    assert _failed(503).failure == rec.HTTP_5XX  # a balancer with no server up: the server's failure
    assert _failed(500, **{"retry-after": "1"}).failure == rec.HTTP_5XX
    assert rec.REFUSED in rec.FAILURE_CLASSES


def test_a_refusal_is_retried_by_5xx_and_its_retry_after_waited():
    r = _failed(503, **{"retry-after": "3"})
    assert r.retry_after_s == 3
    for retry_on in (("5xx",), ("503",), ("refused",)):
        assert retry.RetryPolicy(retry_on=retry_on).retried(r)
    assert not retry.RetryPolicy(retry_on=("5xx",)).retried(_failed(429))
    r.attempt = 1
    honouring = retry.RetryPolicy(retry_on=("refused",), honour_retry_after=True, retry_after_cap_s=10)
    assert retry.decide(honouring, r, seed=1, budget=None, now=0.0, stopping=False).delay_s == 3  # the refusal's Retry-After
    assert retry.decide(retry.RetryPolicy(retry_on=("refused",), honour_retry_after=True, retry_after_cap_s=2), r,
                        seed=1, budget=None, now=0.0, stopping=False).delay_s == 2  # at most its cap
    assert retry.decide(retry.RetryPolicy(retry_on=("refused",)), r, seed=1, budget=None, now=0.0, stopping=False).delay_s <= 0.1


# ---------------------------------------------------------------- the load step
def _capacity(tmp_path: Path, sustained: float = 20.0) -> Path:
    from tests.unit.test_utilization import capacity_file

    path = capacity_file(tmp_path / "capacity.json")
    doc = json.loads(path.read_text())
    doc["sustained_rps"] = sustained
    path.write_text(json.dumps(doc))
    return path


def test_stages_stating_utilizations_resolve_to_rates(tmp_path):
    shape = LoadShape(duration_s=120, stages=({"utilization": 0.5, "duration_s": 30},
                                             {"utilization": 2.0, "duration_s": 30}, {"rate": 3, "duration_s": 60}))
    rate_from = utilization.derive(shape, "stream", _capacity(tmp_path))
    assert [s["rate_rps"] for s in rate_from["stages"]] == [10.0, 40.0, 3]
    assert rate_from["utilization"] == 0.5 and rate_from["rate_rps"] == 10.0
    applied = utilization.applied(shape, rate_from)
    assert applied.stages == ({"rate": 10.0, "duration_s": 30}, {"rate": 40.0, "duration_s": 30},
                              {"rate": 3, "duration_s": 60})
    with pytest.raises(Exception, match="needs a capacity file"):
        utilization.derive(shape, "stream")


def test_the_overload_experiment_parses_with_a_capacity_and_steps_twice_it(tmp_path):
    doc = json.loads((ROOT / "experiments" / "overload.json").read_text())
    parsed = exp_mod.parse(doc, "overload.json", capacity=_capacity(tmp_path), apps=("stream",))
    assert parsed.problems == []
    stages = parsed.rate_from["stream"]["stages"]
    assert [s["utilization"] for s in stages] == [0.5, 2.0, 0.5]
    assert doc["extensions"][0]["app"]["admission"]["max_queued_requests"] >= 0  # fast refusal on


# ---------------------------------------------------------------- the figures, on synthetic records
def _record(i: int, at_s: float, ok: bool = True, failure: str | None = None, ttft: float | None = 0.1,
            attempt: int | None = None) -> rec.RequestRecord:
    ns = T0 + int(at_s * 1e9)
    return rec.RequestRecord(id=i, target="t", url="u", zone="zone-a", route="/v1/chat/completions",
                             phase="measure", planned_ns=ns, sent_ns=ns, sent_offset_s=at_s, ok=ok,
                             status=200 if ok else (503 if failure == rec.REFUSED else None), failure=failure,
                             ttft_s=ttft if ok else None, e2e_s=0.5, attempt=attempt)


def _run(requests: list[rec.RequestRecord], stages=None, capacity: float | None = 10.0) -> rec.RunRecords:
    stages = stages or [{"rate": 5, "duration_s": 10}, {"rate": 20, "duration_s": 10}, {"rate": 5, "duration_s": 20}]
    header = {"run_id": "x", "started_ns": T0, "load": {"warmup_s": 0, "duration_s": 40, "stages": stages}}
    if capacity:
        header["rate_from"] = {"sustained_rps": capacity}
    return rec.RunRecords(header=header, requests=requests, marks=[], footer={})


def _stepped_run(recover_at_s: float | None) -> rec.RunRecords:
    """Before: 5 req/s all served (TTFT 0.1). During: 20 req/s, one in two refused, one in four timed out, the rest
    served at TTFT 2. After: failing until ``recover_at_s`` after the step's end (None: to the end), then served."""
    out, i = [], 0
    for k in range(50):  # before: 0 .. 10 s
        out.append(_record(i, k * 0.2)); i += 1
    for k in range(200):  # during: 10 .. 20 s
        kind = k % 4
        out.append(_record(i, 10 + k * 0.05, ok=kind in (0,), ttft=2.0,
                           failure=None if kind == 0 else rec.REFUSED if kind in (1, 2) else rec.READ_TIMEOUT)); i += 1
    for k in range(100):  # after: 20 .. 40 s
        t = 20 + k * 0.2
        good = recover_at_s is not None and t - 20 >= recover_at_s
        out.append(_record(i, t, ok=good, failure=None if good else rec.READ_TIMEOUT)); i += 1
    return _run(out)


def test_goodput_refusals_timeouts_and_ttft_per_phase():
    o = analyse(_stepped_run(recover_at_s=5.0))["overload"]
    before, during, after = (o["phases"][p] for p in ("before", "during", "after"))
    assert (o["step"]["start_s"], o["step"]["end_s"]) == (10.0, 20.0)
    assert before["goodput_rps"] == 5.0 and before["offered_rps"] == 5.0 and before["refused"] == 0
    assert during["goodput_rps"] == 5.0 and during["offered_rps"] == 20.0
    assert (during["refused"], during["timed_out"], during["failed"]) == (100, 50, 150)
    assert before["ttft_p99_s"] == 0.1 and during["ttft_p99_s"] == 2.0
    assert after["timed_out"] == 25 and after["goodput_rps"] == 75 / 20
    assert o["refused"] == 100 and o["timed_out"] == 75
    assert o["offered_above_capacity"] is True and o["capacity_rps"] == 10.0
    assert o["time_to_goodput_recovered_s"] == 5.0 and o["recovered_reason"] is None


def test_recovery_at_once_is_zero_and_never_is_null_with_its_reason():
    assert analyse(_stepped_run(recover_at_s=0.0))["overload"]["time_to_goodput_recovered_s"] == 0.0
    never = analyse(_stepped_run(recover_at_s=None))["overload"]
    assert never["time_to_goodput_recovered_s"] is None and never["recovered_reason"].startswith("never")
    assert never["phases"]["after"]["goodput_rps"] == 0.0
    assert never["phases"]["after"]["ttft_p99_s"] is None and never["phases"]["after"]["ttft_reason"]


def test_no_step_no_overload_and_no_capacity_says_why():
    flat = _run([_record(0, 1.0)], stages=[{"rate": 5, "duration_s": 40}])
    assert "overload" not in analyse(flat)
    assert "overload" not in analyse(rec.RunRecords(header={"run_id": "x"}, requests=[_record(0, 1.0)], marks=[],
                                                    footer={}))
    o = analyse(_run([_record(0, 1.0)], capacity=None))["overload"]
    assert o["offered_above_capacity"] is None and "no capacity" in o["offered_above_capacity_reason"]


def test_a_retry_is_no_new_offer_but_its_success_is_goodput():
    reqs = [_record(0, 11.0, ok=False, failure=rec.REFUSED, attempt=1), _record(0, 12.0, attempt=2)]
    during = analyse(_run(reqs))["overload"]["phases"]["during"]
    assert during["offered_rps"] == 0.1 and during["goodput_rps"] == 0.1 and during["attempts"] == 2


def test_the_summary_schema_takes_the_overload_block():
    from chaos import schemas

    summary = analyse(_stepped_run(recover_at_s=5.0))
    fragment = json.loads((ROOT / "chaos" / "schemas" / "summary.schema.json").read_text())["properties"]["overload"]
    import jsonschema

    jsonschema.validate(summary["overload"], fragment)
    assert schemas is not None


def test_step_of_needs_a_stage_above_the_first():
    assert ov.step_of({"stages": [{"rate": 5, "duration_s": 10}, {"rate": 3, "duration_s": 10}]}) is None
    assert ov.step_of({"stages": [{"rate": 5, "duration_s": 10}, {"rate": 9, "duration_s": 5},
                                  {"rate": 9, "duration_s": 5}, {"rate": 5, "duration_s": 1}]}) == (10.0, 20.0, 21.0)


def test_the_runs_log_line_says_a_staged_share_of_the_capacity():
    """A load step as shares of the capacity has no single utilization: the run's log line said
    ``{None:g}`` and every overload run ended ERROR at the load's start (2026-12-06, the first real runs)."""
    from types import SimpleNamespace
    from chaos.core import run as run_mod
    assert run_mod.capacity_share(SimpleNamespace(utilization=None)) == \
        " (stages of the capacity measured: see rate_from.stages)"
    assert run_mod.capacity_share(SimpleNamespace(utilization=0.8)) == " (0.8 of the capacity measured)"


def test_the_after_phase_ends_when_the_load_stopped_before_the_schedule():
    """A run that stopped its load 5 s after the step (its recovery window over) measured goodput after over the
    schedule's 20 s, nothing sent in 15 of them (2026-12-06, the first real runs: 0.1 req/s after a 0.5x step down).
    Its after phase ends at the footer's stopped_ns: 25 successes over 5 s."""
    run = _stepped_run(recover_at_s=0.0)
    run.requests = [r for r in run.requests if r.sent_offset_s < 25.0]
    run.footer = {"stopped_ns": T0 + int(25e9)}
    after = analyse(run)["overload"]["phases"]["after"]
    assert (after["from_s"], after["to_s"]) == (20.0, 25.0) and after["goodput_rps"] == 5.0
    run.footer = {}  # no stop said: the schedule's end
    assert analyse(run)["overload"]["phases"]["after"]["goodput_rps"] == 25 / 20


def _sends(events, origin: float, step_at: float, until: float, before_rps: float, during_rps: float) -> None:
    """Requests 'ended' now with planned instants over [0, until) s of the load: before_rps before the step,
    during_rps after it (the counter turns planned_ns from the wall clock to the monotonic one)."""
    from types import SimpleNamespace
    import time as _time
    mono_minus_wall = _time.monotonic() - _time.time_ns() / 1e9
    t, i = 0.0, 0
    while t < until:
        rate = before_rps if t < step_at else during_rps
        ns = int((origin + t - mono_minus_wall) * 1e9)
        events.emit(events.request_done, SimpleNamespace(attempt=None, planned_ns=ns, sent_ns=ns))
        t += 1.0 / rate
        i += 1


def test_the_step_down_is_marked_step_s_after_the_step_and_a_late_method_counts_around_the_schedule():
    """The proof's wait held the inject context past the step (stepped down at window + proof_wait = 35 s where
    step_s was 30), and a method later than the step counted both windows inside it (ratio ~1: ERROR though the
    load stepped up). Review of 2026-12-06."""
    import threading
    import time as _time
    from chaos.recording.events import Events
    from chaos.scopes import faults
    from chaos.scopes.overload import step_load
    events = Events()
    marker = faults.Marker(events)
    now = _time.monotonic()
    marker.load_started_mono = now - 1.0  # the step was due 0.5 s ago: the method is late
    sender = threading.Timer(0.3, _sends, (events, now - 1.0, 0.5, 1.5, 10.0, 40.0))
    sender.start()
    f = step_load(None, marker, at_s=0.5, step_s=1.2, min_ratio=2.0, proof_wait_s=5.0)
    sender.join()
    assert f["late_s"] >= 0.5 and f["effect"]["verified"] is True, f["effect"]
    assert f["stepped_down_s"] < 1.0  # step_s after the scheduled step (0.7 s after this late mark), not 5 s later


def test_a_load_stopped_in_the_step_ends_the_step_there():
    """Stopped 5 s into the 10 s step: its goodput and offered rate over those 5 s, not over 10 (review, 2026-12-06)."""
    run = _stepped_run(recover_at_s=0.0)
    run.requests = [r for r in run.requests if r.sent_offset_s < 15.0]
    run.footer = {"stopped_ns": T0 + int(15e9)}
    o = analyse(run)["overload"]
    during, after = o["phases"]["during"], o["phases"]["after"]
    assert (during["from_s"], during["to_s"]) == (10.0, 15.0) and during["offered_rps"] == 20.0
    assert after["attempts"] == 0
