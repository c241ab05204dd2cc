"""Every Python provider an experiment file names resolves (issue 43): the actions are made from the scope
registry (chaos/ctk/actions.py lists no scope), so each ``module`` + ``func`` of every experiment in experiments/
(and any under tests/integration/ and kuberay/) must still import, be a callable, and take its ``arguments`` as
Chaos Toolkit's own validation binds them; and the actions keep the signatures they had when they were written
out one by one in chaos/ctk/actions.py."""

import importlib
import inspect
import json
from pathlib import Path

import pytest
from chaoslib.exceptions import InvalidActivity
from chaoslib.provider.python import validate_python_activity

from chaos import scopes
from chaos.ctk import actions

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(p for d in ("experiments", "tests/integration", "kuberay") for p in (ROOT / d).rglob("*.json"))
ACTIONS = "chaos.ctk.actions"

# the actions' signatures as chaos/ctk/actions.py spelled them out before it was made from the registry (the
# accelerator's is being changed by another piece of work: it is checked against its fault function instead)
SIGNATURES = {
    "kill_replica": "(zone=None, method='sigkill', deployment=None, min_ongoing=0, ongoing_wait_s=30.0, configuration=None)",
    "hang_engine": "(zone=None, duration_s=None, configuration=None)",
    "crash_engine": "(zone=None, configuration=None)",
    "error_engine": "(zone=None, configuration=None)",
    "wedge_engine": "(zone=None, spin=False, configuration=None)",
    "garble_engine": "(zone=None, configuration=None)",
    "stall_engine": "(zone=None, configuration=None)",
    "stutter_engine": "(zone=None, factor=4.0, period_s=0.2, duration_s=20.0, configuration=None)",
    "slow_engine": "(zone=None, factor=4.0, duration_s=20.0, configuration=None)",
    "hang_rank": "(zone=None, rank=1, spin=False, configuration=None)",
    "kill_rank": "(zone=None, rank=1, configuration=None)",
    "fail_restart": "(zone=None, outage_s=30.0, hold_until_failed_starts=1, max_outage_s=600.0, configuration=None)",
    "step_load": "(at_s=0.0, step_s=30.0, min_ratio=2.0, configuration=None)",
    "lose_device": "(zone=None, mode='error', xid=79, remedy=None, outage_s=150.0, taint=False, "
                   "acknowledge_other_gpu_pods=False, configuration=None)",
    "kill_node": "(node=None, zone=None, outage_s=None, configuration=None)",
    "kill_head": "(outage_s=5.0, method='node', configuration=None)",
    "kill_zone": "(zone, outage_s=None, configuration=None)",
    "kill_region": "(region, outage_s=None, configuration=None)",
    "kill_redis": "(outage_s=5.0, configuration=None)",
    "partition_zone": "(zone, duration_s=None, configuration=None)",
    "head_outage_second_fault": "(outage_s=20.0, second='replica', zone=None, delay_s=3.0, configuration=None)",
    "upgrade_app": "(variant='code', timeout_s=600.0, configuration=None)",
    "drain_node": "(node=None, zone=None, deadline_s=30.0, outage_s=20.0, configuration=None)",
    "heal_all": "(timeout_s=240.0, configuration=None)",
}


def _bare(sig: inspect.Signature) -> str:
    return str(sig.replace(parameters=[p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()],
                           return_annotation=inspect.Signature.empty))


def providers(doc) -> list[tuple[str, dict]]:
    """Every ``{"type": "python", "module", "func"}`` provider anywhere in a document, with the activity holding it."""
    out = []
    if isinstance(doc, dict):
        provider = doc.get("provider")
        if isinstance(provider, dict) and provider.get("type") == "python":
            out.append((doc.get("name", "?"), doc))
        for v in doc.values():
            out += providers(v)
    elif isinstance(doc, list):
        for v in doc:
            out += providers(v)
    return out


def test_there_are_experiments_and_they_name_every_builtin_action():
    named = {a["provider"]["func"] for p in FILES for _, a in providers(json.loads(p.read_text()))
             if a["provider"].get("module") == ACTIONS}
    assert len(FILES) >= 20 and named >= set(scopes.actions()) - {"lose_accelerator"} | {"heal_all"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_provider_of_every_experiment_resolves_and_takes_its_arguments(path):
    found = providers(json.loads(path.read_text()))
    assert found, f"{path}: no Python provider"
    for name, activity in found:
        provider = activity["provider"]
        module = importlib.import_module(provider["module"])
        if activity.get("type") in ("action", "probe"):
            func = getattr(module, provider["func"])
            assert callable(func), f"{path}: {name}: {provider['module']}.{provider['func']}"
            validate_python_activity(activity)  # Chaos Toolkit's own check: found among the module's functions, bound
        else:  # a control: its module's hooks, each taking what Chaos Toolkit passes by keyword
            hooks = [h for h in dir(module) if h.endswith("_control") and callable(getattr(module, h))]
            assert "before_experiment_control" in hooks and "after_experiment_control" in hooks, f"{path}: {name}"


def test_the_actions_keep_their_signatures():
    assert {n: _bare(inspect.signature(getattr(actions, n))) for n in SIGNATURES} == SIGNATURES
    assert set(SIGNATURES) == (set(scopes.actions()) | {"heal_all"}) - {"lose_accelerator"}
    fault = scopes.get("accelerator").fault
    assert list(inspect.signature(actions.lose_accelerator).parameters) == \
        list(inspect.signature(fault).parameters)[2:] + ["configuration"]


def test_an_argument_an_action_does_not_take_is_refused_as_chaos_toolkit_refuses_it():
    activity = {"type": "action", "name": "x", "provider": {"type": "python", "module": ACTIONS, "func": "kill_replica",
                                                           "arguments": {"replica": "r1"}}}
    with pytest.raises(InvalidActivity, match="replica"):
        validate_python_activity(activity)
    with pytest.raises(TypeError):
        actions.kill_replica(replica="r1")  # refused before any run is looked for
