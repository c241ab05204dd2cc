"""The replicas Serve replaced during a capacity sweep (chaos.core.capacity_run.ReplicaWatch): the watchdog's false
detections under load alone, counted per step, null with the reason when the replicas could not be listed."""

import json
from pathlib import Path
from types import SimpleNamespace

import jsonschema

from chaos.core.capacity_run import ReplicaWatch

SCHEMA = json.loads((Path(__file__).resolve().parents[2] / "chaos" / "schemas" / "capacity.schema.json").read_text())


class Replicas:
    """A backend whose RUNNING replicas are the next set of ``looks`` at each call (an exception: a failing look)."""

    def __init__(self, *looks):
        self.looks = list(looks)

    def replicas(self):
        look = self.looks.pop(0)
        if isinstance(look, Exception):
            raise look
        return [SimpleNamespace(replica_id=r) for r in look]


def sweep(watch, steps):
    step = watch.around(lambda shape, index: [f"records of step {index}"])
    return [step(None, i) for i in range(steps)]


def valid(figures):
    jsonschema.validate(figures, SCHEMA["properties"]["replicas"])
    return figures


def test_none_replaced_is_zero_and_the_step_runner_s_records_pass_through():
    w = ReplicaWatch(Replicas({"a", "b", "c"}, {"a", "b", "c"}, {"a", "b", "c"}))
    assert sweep(w, 2) == [["records of step 0"], ["records of step 1"]]
    assert valid(w.figures(5)) == {"running_before": 3, "replaced": 0, "replaced_by_step": {},
                                   "replaced_reason": None, "watchdog_stall_s": 5}


def test_a_replica_replaced_in_a_step_is_counted_there_once():
    w = ReplicaWatch(Replicas({"a", "b", "c"}, {"a", "b", "c"}, {"a", "b", "d"}, {"a", "b", "d"}))
    sweep(w, 3)
    f = valid(w.figures(None))
    assert (f["replaced"], f["replaced_by_step"], f["watchdog_stall_s"]) == (1, {"1": ["c"]}, None)


def test_a_look_that_fails_makes_the_count_null_with_the_reason_never_zero():
    w = ReplicaWatch(Replicas({"a", "b"}, {"a", "b"}, RuntimeError("the dashboard does not answer"), {"a"}))
    sweep(w, 3)
    f = valid(w.figures(5))
    assert f["replaced"] is None and f["replaced_reason"] == "the replicas could not be listed after step 1"
    w = ReplicaWatch(Replicas(RuntimeError("no")))
    f = valid(w.figures(None))
    assert (f["running_before"], f["replaced"], f["replaced_reason"]) == (None, None, "the replicas could not be listed")
