"""Adding a scope is its module, one implementation per backend, its experiment and tests (docs/architecture.md,
"Adding a scope"): a throwaway scope module (tests/unit/disk_full_scope.py) registered here, implemented on
the fake backend only, is run by that backend and refused by the others, injected through the real fault
path (its marks, its proof within its own bound), planned, and reviewed for its Kubernetes accesses; nothing
else in the rig is touched or patched."""

import json
from pathlib import Path

import pytest

from chaos.core import experiment, plan, provision
from chaos.scopes import faults
from chaos.recording import records as rec
from chaos import scopes
from chaos.backends import base
from chaos.backends.kuberay.kube import access as kube_access
from chaos.backends.base import Implementation
from chaos.backends.kuberay import KubeRayBackend
from chaos.backends.local.backend import LocalBackend
from chaos.base.errors import UsageError
from tests.unit import disk_full_scope
from tests.unit.fake_backend import FakeBackend

ROOT = Path(__file__).resolve().parents[2]


def plan_disk(backend, scope: str, a: dict) -> list[dict]:
    """The fake backend's plan of a disk-full fault: the node's disk, by name; reads only."""
    node = a["node"]
    return [{"kind": "disk", "name": f"{node}:/", "where": f"zone {backend.zone_of(node)}",
             "does": "filled", "after": "freed at the heal"}]


def effect_disk(backend, fault: dict) -> list[dict]:
    """The fake backend's look at a disk-full fault: the disk full (after two looks)."""
    backend.looks += 1
    full = backend.looks >= 2
    return [{"check": f"{fault['target']}: no space left", "ok": full, "seen": "100%" if full else "40%"}]


class DiskBackend(FakeBackend):
    """The fake backend with the scope's implementation: the methods its fault calls, and its plan and proof."""

    implementations = base.implementations(Implementation("disk-full", plan_disk, effect_disk))

    def __init__(self):
        self.calls, self.looks = [], 0

    def zone_of(self, node):
        return "zone-b"

    def fill_disk(self, node):
        self.calls.append(("fill", node))
        return [4321]

    def free_disk(self, node):
        self.calls.append(("free", node))


@pytest.fixture
def disk_full():
    yield scopes.register(disk_full_scope.SCOPE)
    scopes.unregister(disk_full_scope.SCOPE.name)


def _settings():
    doc = json.loads((ROOT / "experiments" / "replica-kill.json").read_text())
    next(e for e in doc["extensions"] if e["name"] == "availproof")["scope"] = "disk-full"
    assert experiment.problems(doc, "disk-full.json") == []  # the schema's enum is the registry's
    return experiment.settings(doc)


def test_a_scope_added_as_its_module_and_one_implementation_is_run_planned_proven_and_reviewed(disk_full):
    name = disk_full.name
    # what a backend can run is what it registered: the fake with the implementation, not the fake without,
    # nor the local and KubeRay backends (the run refuses the experiment there, in one line, before it starts)
    need = base.scope_capability(name)
    assert need in base.capabilities_of(DiskBackend) and need not in base.capabilities_of(FakeBackend)
    assert need not in base.capabilities_of(LocalBackend) | base.capabilities_of(KubeRayBackend)
    settings = _settings()
    assert need in base.required(settings)
    for kind in ("local", "kuberay"):
        with pytest.raises(UsageError, match=f"scope:{name}"):
            provision.check_capabilities(kind, settings)

    # the real fault path: the inject marks written once the backend's call returned and the fault was
    # seen in effect (its own bound, from its module), then the heal
    b, marker = DiskBackend(), faults.Marker()
    f = disk_full_scope.fill_disk(b, marker, "worker-b", duration_s=0)
    assert b.calls == [("fill", "worker-b"), ("free", "worker-b")]
    assert [(m.event, m.scope, m.target, m.zones) for m in marker.marks] == [
        (e, name, "worker-b", ["zone-b"]) for e in rec.MARK_EVENTS]
    e = f["effect"]
    assert e["verified"] is True and e["bound_s"] == faults.EFFECT_BOUND_S[name] == 2.0 and b.looks == 2
    assert e["checks"] == [{"check": "worker-b: no space left", "ok": True, "seen": "100%", "t_s": e["time_to_effect_s"]}]
    assert marker.marks[1].detail["effect"] == e and marker.marks[1].detail["pids"] == [4321]

    # its plan, from the backend's implementation
    (row,) = plan.objects(b, [{"activity": "fill the disk", "scope": name, "arguments": {"node": "worker-b"}}])
    assert row == {"activity": "fill the disk", "scope": name, "kind": "disk", "name": "worker-b:/",
                   "where": "zone zone-b", "does": "filled", "after": "freed at the heal"}

    # on KubeRay its accesses (from its module) would be reviewed before any fault
    reviewed = set(kube_access.needed({name})) - set(kube_access.READS)
    assert reviewed == set(disk_full.accesses(kube_access.Asked())) and reviewed


def test_a_backend_without_the_implementation_proves_nothing_and_plans_nothing(disk_full):
    """The same methods without the registration: the backend cannot run the scope, and asked anyway,
    its look finds no effect check and its plan refuses."""

    class Unregistered(DiskBackend):
        implementations = base.implementations()

    b = Unregistered()
    assert base.scope_capability(disk_full.name) not in base.capabilities_of(b)
    (check,) = b.effect_checks({"scope": disk_full.name, "target": "worker-b"})
    assert check["ok"] is False and "has none" in check["seen"]
    (row,) = plan.objects(b, [{"activity": "a", "scope": disk_full.name, "arguments": {"node": "worker-b"}}])
    assert row["kind"] == plan.REFUSED and "no fault of it" in row["does"]


def test_a_scope_implemented_twice_by_one_backend_is_refused():
    impl = Implementation("disk-full", plan_disk, effect_disk)
    with pytest.raises(ValueError, match="implemented twice"):
        base.implementations(impl, impl)


def test_the_real_backends_register_every_builtin_scope_with_its_methods():
    """What each ran before its scopes were registrations (every scope whose methods it has), it registers."""
    builtin = {base.scope_capability(m.SCOPE.name) for m in scopes.BUILTIN}
    # except what a backend cannot have: the local backend has no accelerator (refused in one line, its own text)
    cannot = {LocalBackend: {"accelerator"}, KubeRayBackend: set()}
    for backend in (LocalBackend, KubeRayBackend):
        assert set(backend.implementations) == set(scopes.names()) - cannot[backend]
        assert builtin - {base.scope_capability(n) for n in cannot[backend]} <= base.capabilities_of(backend)
        assert all(base.scope_capability(n) in base.CAPABILITY_TEXT for n in cannot[backend])


def test_each_builtin_scope_is_the_module_of_its_name_registered_in_order():
    assert tuple(m.SCOPE.name for m in scopes.BUILTIN) == scopes.names()
    for m in scopes.BUILTIN:
        assert m.__name__ == "chaos.scopes." + m.SCOPE.name.replace("-", "_") and scopes.get(m.SCOPE.name) is m.SCOPE


def test_a_registered_scope_is_a_chaos_toolkit_action_and_a_soak_fault_with_nothing_else_touched(disk_full, tmp_path):
    """Its action is made from its fault function (same parameters but backend and marker, and Chaos Toolkit's
    configuration), its time to heal is read from the argument its module names (its default from the fault's
    signature), and its conflict class puts it in the soak's table."""
    import inspect

    from chaos.ctk import actions
    from chaos.soak import schedule as sch

    act = actions.fill_disk
    assert list(inspect.signature(act).parameters) == ["node", "duration_s", "configuration"]
    assert "fill_disk" in dir(actions) and sch.heal_args()["fill_disk"] == {"duration_s": None}
    doc = json.loads((ROOT / "experiments" / "worker-node-kill.json").read_text())
    next(e for e in doc["extensions"] if e["name"] == "availproof")["scope"] = "disk-full"
    (fault,) = [a for a in doc["method"] if a.get("type") == "action"]
    fault["provider"] = {"type": "python", "module": "chaos.ctk.actions", "func": "fill_disk",
                         "arguments": {"node": "worker-b", "duration_s": 12}}
    (tmp_path / "disk-full.json").write_text(json.dumps(doc))
    f = sch.fault_from_experiment(tmp_path / "disk-full.json")
    assert (f.scope, f.heal_s, f.healed_by) == ("disk-full", 12.0, "heal")
    zone = sch.SoakFault("zone", "zone-loss", 20.0, "heal", 40.0, 10.0, ())
    head = sch.SoakFault("head", "head-kill", 10.0, "heal", 40.0, 10.0)
    assert "same zone" in sch.conflict(f, zone) and "GCS" in sch.conflict(f, head)
