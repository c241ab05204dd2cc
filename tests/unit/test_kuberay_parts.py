"""Issue 43: the KubeRay backend is a class of parts, composed, not mixed in, and at most a few of them (one per
family of faults, each holding the parts it serves). Its capabilities are what they were when it was a class of
sixteen mixins."""

import ast
from pathlib import Path

from chaos.backends.base import capabilities_of
from chaos.backends.kuberay import KubeRayBackend
from chaos.backends.kuberay.kube.client import KubeClient
from chaos.backends.kuberay.target import Target
from tests.unit.test_kuberay_backend import cluster

PACKAGE = Path(__file__).resolve().parents[2] / "chaos" / "backends" / "kuberay"
PARTS = ("pods", "kills", "engines", "domains", "lifecycle", "accelerators")
# the parts the families hold (family.part)
HELD = ("pods.load", "engines.wedges", "engines.weights", "engines.devices", "domains.zone_loss", "domains.partitions",
        "domains.autoscalers", "lifecycle.upgrades", "lifecycle.rollbacks")
# as the mixed-in class registered them (pinned before the change), and device-loss (issue 46) since
CAPABILITIES = {"scope:accelerator", "scope:device-loss", "scope:drain", "scope:engine", "scope:engine-crash", "scope:engine-error",
                "scope:engine-garbage", "scope:engine-slow", "scope:engine-stall", "scope:engine-stutter",
                "scope:engine-wedge", "scope:head", "scope:node", "scope:overload", "scope:partition", "scope:redis", "scope:region",
                "scope:replica", "scope:restart-fails", "scope:upgrade", "scope:zone", "scope:rank-hang",
                "scope:rank-death"}


def test_the_capabilities_are_unchanged():
    assert capabilities_of(KubeRayBackend) == CAPABILITIES
    _, b, _ = cluster()
    assert capabilities_of(b) == CAPABILITIES


def test_the_backend_has_at_most_three_bases_none_of_them_the_packages_own():
    assert len(KubeRayBackend.__bases__) <= 3
    own = [c for c in KubeRayBackend.__mro__ if c.__module__.startswith("chaos.backends.kuberay")]
    assert own == [KubeRayBackend]


def parts_of(b) -> dict[str, object]:
    """The backend's attributes whose class is the package's, but the kube client and the Target."""
    return {name: v for name, v in vars(b).items() if type(v).__module__.startswith("chaos.backends.kuberay")
            and not isinstance(v, (KubeClient, Target))}


def test_the_backend_composes_at_most_six_parts_one_per_family():
    _, b, _ = cluster()
    parts = parts_of(b)
    assert len(parts) <= 6
    assert set(parts) == set(PARTS)
    assert all(type(p).__mro__[1:] == (object,) for p in parts.values())  # plain classes


def test_its_parts_are_attributes_sharing_one_kube_client():
    _, b, _ = cluster()
    for path in PARTS + HELD:
        part = b
        for name in path.split("."):
            part = getattr(part, name)
        assert part is not None and part is not b
        if hasattr(part, "kube"):
            assert part.kube is b.kube
        if hasattr(part, "target"):
            assert part.target is b.target
    assert b.kills.pods is b.pods and b.kills.load is b.pods.load
    assert b.engines.wedges.engines is b.engines and b.engines.wedges.pods is b.pods
    assert b.domains.zone_loss.kills is b.kills and b.domains.partitions.load is b.pods.load
    assert b.lifecycle.upgrades.rollbacks is b.lifecycle.rollbacks and b.lifecycle.upgrades.kills is b.kills


def test_the_backends_settable_state_is_its_parts():
    _, b, _ = cluster()
    b.cordon_spare_nodes = False
    assert b.domains.zone_loss.cordon_spare_nodes is False
    b.load_avoid_zones = ["zone-a"]
    assert b.pods.load.avoid_zones == ["zone-a"]
    assert b.cuts is b.domains.partitions.cuts and b.paused is b.engines.paused and b.killed is b.kills.killed


def test_no_class_of_the_package_is_a_mixin_of_the_backend():
    classes = set()
    for f in PACKAGE.rglob("*.py"):
        classes |= {n.name for n in ast.walk(ast.parse(f.read_text())) if isinstance(n, ast.ClassDef)}
    assert not {c.__name__ for c in KubeRayBackend.__mro__[1:]} & (classes - {"ByScope"})
    assert all(c.__module__ == "chaos.backends.base" or c is object for c in KubeRayBackend.__mro__[1:])
