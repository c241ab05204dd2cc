"""Issue 43: the KubeRay backend is a class of parts, composed, not mixed in. Its capabilities are what they were
when it was a class of sixteen mixins."""

import ast
from pathlib import Path

from chaos.backends.base import capabilities_of
from chaos.backends.kuberay import KubeRayBackend
from tests.unit.test_kuberay_backend import cluster

PACKAGE = Path(__file__).resolve().parents[2] / "chaos" / "backends" / "kuberay"
PARTS = ("pods", "load", "autoscalers", "kills", "engines", "wedges", "weights", "zone_loss", "partitions",
         "rollbacks", "upgrades", "accelerators", "leftover", "preparation")
# as the mixed-in class registered them (pinned before the change)
CAPABILITIES = {"scope:accelerator", "scope:drain", "scope:engine", "scope:engine-crash", "scope:engine-error",
                "scope:engine-garbage", "scope:engine-slow", "scope:engine-stall", "scope:engine-stutter",
                "scope:engine-wedge", "scope:head", "scope:node", "scope:partition", "scope:redis", "scope:region",
                "scope:replica", "scope:restart-fails", "scope:upgrade", "scope:zone"}


def test_the_capabilities_are_unchanged():
    assert capabilities_of(KubeRayBackend) == CAPABILITIES
    _, b, _ = cluster()
    assert capabilities_of(b) == CAPABILITIES


def test_the_backend_has_at_most_three_bases_none_of_them_the_packages_own():
    assert len(KubeRayBackend.__bases__) <= 3
    own = [c for c in KubeRayBackend.__mro__ if c.__module__.startswith("chaos.backends.kuberay")]
    assert own == [KubeRayBackend]


def test_its_parts_are_attributes_sharing_one_kube_client():
    _, b, _ = cluster()
    for name in PARTS:
        part = getattr(b, name)
        assert part is not None and part is not b
        if hasattr(part, "kube"):
            assert part.kube is b.kube
    assert b.kills.pods is b.pods and b.zone_loss.kills is b.kills and b.upgrades.rollbacks is b.rollbacks


def test_no_class_of_the_package_is_a_mixin_of_the_backend():
    classes = set()
    for f in PACKAGE.rglob("*.py"):
        classes |= {n.name for n in ast.walk(ast.parse(f.read_text())) if isinstance(n, ast.ClassDef)}
    assert not {c.__name__ for c in KubeRayBackend.__mro__[1:]} & (classes - {"ByScope"})
    assert all(c.__module__ == "chaos.backends.base" or c is object for c in KubeRayBackend.__mro__[1:])
