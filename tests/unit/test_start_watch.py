"""chaos.system.start_watch: one deployment's replica starts looked at live (restart-fails' hold), through the fake
dashboard at chaos.system.ray_dashboard's seam."""

from chaos.system import start_watch
from tests.unit import fake_dashboard


def details(*replicas, deployment="LLMServer"):
    return {"applications": {"llm": {"deployments": {deployment: {"replicas": list(replicas)},
                                                     "OpenAiIngress": {"replicas": [r("i1", "RUNNING")]}}}}}


def r(rid, state, pid=11, node_id="n1"):
    return {"replica_id": rid, "state": state, "pid": pid, "node_id": node_id}


def test_states_of_one_deployment_without_those_waiting_for_a_node():
    d = details(r("a", "RUNNING"), r("b", "STARTING"), r("c", "STARTING", pid=None, node_id=None), r("d", "STOPPING"))
    assert start_watch.states_of(d, "LLMServer") == {"a": "RUNNING", "b": "STARTING", "d": "STOPPING"}
    assert set(start_watch.states_of(d, None)) == {"a", "b", "d", "i1"}
    assert start_watch.states_of({}, "LLMServer") is None  # not listed: unknown, not "no replica"


def test_replica_states_through_the_dashboard_and_none_when_it_does_not_answer(monkeypatch):
    dash = fake_dashboard.install(monkeypatch, serve=details(r("a", "RUNNING"), r("b", "STARTING")))
    assert start_watch.replica_states("http://dash", "LLMServer") == {"a": "RUNNING", "b": "STARTING"}
    dash.up = False
    assert start_watch.replica_states("http://dash", "LLMServer") is None


def test_a_start_fails_when_seen_starting_then_stopping_or_gone_never_serving():
    w = start_watch.StartWatch("LLMServer", {"a": "RUNNING", "k": "RUNNING"})
    assert w.saw(1.0, {"a": "RUNNING", "n1": "STARTING"}) == []  # the killed k gone: not a start of its own
    assert w.saw(2.0, None) == [] and w.unknown == 1  # no answer: nothing concluded, n1 still starting
    assert [f["replica"] for f in w.saw(3.0, {"a": "RUNNING", "n1": "STOPPING", "n2": "STARTING"})] == ["n1"]
    gone = w.saw(4.0, {"a": "RUNNING"})
    assert gone == [{"replica": "n2", "starting_s": 3.0, "failed_s": 4.0,
                     "seen": "STARTING, then no longer listed, never serving"}]
    assert w.saw(5.0, {"a": "RUNNING", "n3": "STOPPING"})[0]["starting_s"] is None  # began and failed between looks
    assert w.saw(6.0, {"a": "RUNNING", "n3": "STOPPING"}) == []  # counted once
    assert len(w.failed) == 3 and w.looks == 5


def test_a_start_that_serves_is_not_failed():
    w = start_watch.StartWatch("LLMServer", {"a": "RUNNING"})
    w.saw(1.0, {"a": "RUNNING", "n1": "STARTING"})
    w.saw(2.0, {"a": "RUNNING", "n1": "RUNNING"})
    assert w.saw(3.0, {"a": "RUNNING"}) == [] and w.ran == {"n1": 2.0} and not w.failed
    assert w.detail()["ran"] == [{"replica": "n1", "t_s": 2.0}]


def test_details_without_the_deployment_conclude_nothing():
    """A controller restarting answers with no applications: read as 'no replica', every STARTING one counted as a
    failed start and the weights restored early (review, 2026-12-06)."""
    w = start_watch.StartWatch("LLMServer", {})
    assert w.saw(1.0, {"n1": "STARTING"}) == []
    assert start_watch.states_of({"applications": {}}, "LLMServer") is None
    assert w.saw(2.0, start_watch.states_of({"applications": {}}, "LLMServer")) == [] and w.failed == []
