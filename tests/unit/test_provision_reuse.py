"""chaos.core.provision.ensure_local: a running cluster is reused only when it is what the experiment needs,
its topology file's content included (a file whose node sizes changed is not the cluster running)."""

from types import SimpleNamespace

import pytest

from chaos.core import provision
from chaos.system import topology
from chaos.base.errors import SetupError
from chaos.core.experiment import Settings
from chaos.core.options import Options


class Up(Exception):
    """LocalCluster.up was called: the stand-in stops there."""


def running_cluster(topo):
    c = SimpleNamespace(topology=topo, downed=False,
                        state=SimpleNamespace(gcs_fault_tolerance=True, netns_mode=False))
    c.running = lambda: not c.downed
    c.down = lambda: setattr(c, "downed", True)
    return c


@pytest.fixture
def old_two_regions(monkeypatch):
    """A two-regions cluster started when its workers had 4 CPUs (the file now says 8)."""
    doc = topology.load("two-regions").to_doc()
    for region in doc["regions"]:
        for zone in region["zones"]:
            for node in zone["nodes"]:
                node["cpus"] = 4
    cluster = running_cluster(topology.parse(doc, source="two-regions.yaml"))
    monkeypatch.setattr(provision.LocalCluster, "find", staticmethod(lambda *a, **k: cluster))

    def up(*a, **k):
        raise Up()

    monkeypatch.setattr(provision.LocalCluster, "up", staticmethod(up))
    monkeypatch.setattr(provision.LocalBackend, "prepare", lambda *a, **k: None)
    return cluster


def test_a_running_cluster_whose_topology_file_changed_is_not_reused(old_two_regions, tmp_path):
    settings = Settings(scope="region", topology="two-regions")
    with pytest.raises(SetupError, match=r"as it was\) is not what the experiment needs \(two-regions.*as .* now "
                                         r"says \(nodes, sizes or domains\)\)"):
        provision.ensure_local(settings, Options(cluster_dir=tmp_path, replace_cluster=False))
    assert not old_two_regions.downed
    with pytest.raises(Up):  # replaced: brought down, a new one started from the file
        provision.ensure_local(settings, Options(cluster_dir=tmp_path, replace_cluster=True))
    assert old_two_regions.downed


def test_a_running_cluster_as_the_file_says_is_reused(monkeypatch, tmp_path):
    cluster = running_cluster(topology.load("two-regions"))
    monkeypatch.setattr(provision.LocalCluster, "find", staticmethod(lambda *a, **k: cluster))
    monkeypatch.setattr(provision.LocalBackend, "prepare", lambda *a, **k: None)
    cluster.wait_healthy = lambda timeout: (_ for _ in ()).throw(Up())  # reused: the next step is its health
    with pytest.raises(Up):
        provision.ensure_local(Settings(scope="region", topology="two-regions"),
                               Options(cluster_dir=tmp_path, replace_cluster=False))
    assert not cluster.downed


def test_a_topology_too_small_for_vllm_is_refused_before_any_cluster_is_looked_at(monkeypatch, tmp_path):
    import json

    from chaos.base.errors import UsageError

    doc = topology.load("default").to_doc()
    doc["regions"][0]["zones"][2]["nodes"][0]["cpus"] = 4
    path = tmp_path / "small.yaml"
    path.write_text(json.dumps(doc))  # JSON is YAML

    def find(*a, **k):
        raise AssertionError("a cluster was looked up")

    monkeypatch.setattr(provision.LocalCluster, "find", staticmethod(find))
    with pytest.raises(UsageError, match="no worker of zone zone-c can hold a vLLM replica"):
        provision.ensure_local(Settings(scope="zone", topology=str(path)), Options(app="llm", cluster_dir=tmp_path))
