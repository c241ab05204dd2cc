import pytest
import yaml

from chaos.system import topology
from chaos.base.errors import UsageError


def doc(**overrides):
    d = {
        "name": "t",
        "regions": [
            {"name": "r1", "zones": [
                {"name": "za", "nodes": [{"name": "a1", "cpus": 2}]},
                {"name": "zb", "nodes": [{"name": "b1"}, {"name": "b2", "labels": {"tier": "x"}}]},
            ]},
        ],
    }
    d.update(overrides)
    return d


def test_shipped_default_is_one_region_three_zones_one_worker_each():
    t = topology.load()
    assert t.regions == ["region-1"]
    assert t.zones == ["zone-a", "zone-b", "zone-c"]
    assert [len(t.nodes_in(zone=z)) for z in t.zones] == [1, 1, 1]
    assert t.gcs_fault_tolerance is True
    assert t.head.cpus == 0


def test_shipped_two_regions():
    t = topology.load("two-regions")
    assert len(t.regions) == 2
    for r in t.regions:
        assert len({n.zone for n in t.nodes_in(region=r)}) == 2


def test_parse_assigns_domains_and_defaults():
    t = topology.parse(doc())
    b2 = t.node("b2")
    assert (b2.zone, b2.region, b2.cpus) == ("zb", "r1", 4)
    assert b2.ray_labels() == {"tier": "x", "region": "r1", "zone": "zb", "node": "b2"}
    assert t.zone_region("za") == "r1"
    assert [n.name for n in t.nodes_in(zone="zb")] == ["b1", "b2"]


def test_round_trip_through_document():
    t = topology.load("two-regions")
    assert topology.parse(t.to_doc(), source=t.source) == t


@pytest.mark.parametrize(
    "mutate, field",
    [
        (lambda d: d["regions"][0]["zones"][0]["nodes"][0].update(cpus=-1), "regions[0].zones[0].nodes[0].cpus"),
        (lambda d: d["regions"][0]["zones"][0]["nodes"][0].update(cpus="two"), "regions[0].zones[0].nodes[0].cpus"),
        (lambda d: d["regions"][0]["zones"][1].update(name="za"), "regions[0].zones[1].name"),
        (lambda d: d["regions"][0]["zones"][1]["nodes"][0].update(name="a1"), "regions[0].zones[1].nodes[0].name"),
        (lambda d: d["regions"][0]["zones"][0].update(nodez=[]), "regions[0].zones[0].nodez"),
        (lambda d: d["regions"][0]["zones"][0].pop("nodes"), "regions[0].zones[0].nodes"),
        (lambda d: d["regions"][0].update(zones=[]), "regions[0].zones"),
        (lambda d: d["regions"][0].update(name="Bad_Name"), "regions[0].name"),
        (lambda d: d["regions"][0]["zones"][1]["nodes"][1].update(labels={"zone": "x"}), "labels.zone"),
        (lambda d: d.update(gcs_fault_tolerance="yes"), "gcs_fault_tolerance"),
        (lambda d: d.update(health_check={"period_ms": 0}), "health_check.period_ms"),
        (lambda d: d.pop("name"), "name"),
    ],
)
def test_bad_field_is_named_in_one_line(mutate, field):
    d = doc()
    mutate(d)
    with pytest.raises(UsageError) as e:
        topology.parse(d, source="t.yaml")
    msg = str(e.value)
    assert msg.startswith("t.yaml: ")
    assert field in msg
    assert "\n" not in msg


def test_not_a_mapping_and_bad_yaml(tmp_path):
    p = tmp_path / "x.yaml"
    p.write_text("- just\n- a list\n")
    with pytest.raises(UsageError, match="x.yaml: <document>: .* is not of type .object."):
        topology.load(p)
    p.write_text("name: [unclosed\n")
    with pytest.raises(UsageError, match=r"x.yaml: line \d+ not valid YAML"):
        topology.load(p)
    with pytest.raises(UsageError, match="cannot read"):
        topology.load(tmp_path / "missing.yaml")


def test_cli_exit_code_2_on_bad_topology(tmp_path, capsys):
    from chaos.commands import cli

    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(doc(regions=[{"name": "r", "zones": [{"name": "z", "nodes": [{"name": "n", "cpus": 0}]}]}])))
    rc = cli.main(["cluster", "up", "--topology", str(p), "--cluster-dir", str(tmp_path / "c")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert len(err) == 1 and "regions[0].zones[0].nodes[0].cpus" in err[0]


def test_idle_workers_kept_defaults_to_none_kept_and_accepts_ray_default():
    assert topology.load().idle_workers_kept == 0
    doc = topology.load().to_doc()
    doc["idle_workers_kept"] = None
    assert topology.parse(doc).idle_workers_kept is None
    doc["idle_workers_kept"] = -1
    with pytest.raises(UsageError, match="idle_workers_kept"):
        topology.parse(doc)


@pytest.mark.parametrize("name", ["default", "two-regions"])
def test_every_shipped_topology_holds_one_vllm_replica_per_worker_and_never_two(name):
    """A vLLM replica reserves 1 + its engine's bundle of logical CPUs (serve_apps.llm_app): it must fit
    every zone's worker, or Serve leaves it STARTING (two-regions had 4 CPUs: region-loss never deployed
    with vLLM), and two must not (that is what spreads them one per node)."""
    from chaos.core.provision import check_llm_fits
    from serve_apps.config import LLMOptions

    t, llm = topology.load(name), LLMOptions()
    check_llm_fits(t, llm)
    assert all(n.cpus < 2 * (1 + llm.num_cpus) for z in t.zones for n in t.nodes_in(zone=z))


def test_a_topology_too_small_for_a_vllm_replica_is_refused_in_one_line():
    from chaos.base.errors import UsageError
    from chaos.core.provision import check_llm_fits
    from serve_apps.config import LLMOptions

    d = topology.load("two-regions").to_doc()
    d["regions"][1]["zones"][0]["nodes"][0]["cpus"] = 4
    with pytest.raises(UsageError, match=r"no worker of zone west-1 can hold a vLLM replica \(it reserves 6 logical "
                                         r"CPUs: 1 for the replica, 5 for its engine; cpus: worker-w1 4\)"):
        check_llm_fits(topology.parse(d, source="small.yaml"), LLMOptions())
