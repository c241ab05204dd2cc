"""``app.migration: {limit: N}`` (issue 47) from the experiment to the Serve config: validated by the schema (bad
input one line, exit 2, before anything runs), refused with --app llm, off when absent (the config as before), and on:
the MigratingIngress as the route prefix's ingress in front of the StreamTarget engine replicas, which keep their
options; the rig still picks the engine replicas, never the ingress; a deployed app with the ingress is the stream
app, and turning migration on or off deploys again."""

import json
from types import SimpleNamespace

import pytest

from chaos.commands import cli
from chaos.system import deploy, placement, ray_dashboard
from chaos.core import experiment, provision
from chaos.base.errors import UsageError
from serve_apps import config as serve_config

GOOD = json.loads((experiment.Path(__file__).resolve().parents[2] / "experiments" / "replica-kill.json").read_text())


def ext(doc):
    return next(e for e in doc["extensions"] if e["name"] == "availproof")


def with_migration(migration):
    doc = json.loads(json.dumps(GOOD))
    ext(doc)["app"] = {"migration": migration}
    return doc


@pytest.mark.parametrize("migration, needle", [
    ({"limit": 0}, "app.migration.limit"),
    ({"limit": "2"}, "app.migration.limit"),
    ({"limt": 2}, "app.migration"),
    (3, "app.migration"),
])
def test_bad_migration_one_line_exit_2(tmp_path, capsys, migration, needle):
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(with_migration(migration)))
    rc = cli.main(["run", str(p), "--out", str(tmp_path / "out"), "--cluster-dir", str(tmp_path / "c")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and needle in err[0] and "bad.json" in err[0], err


def test_migration_with_the_vllm_app_is_refused_in_one_line():
    doc = with_migration({"limit": 2})
    assert experiment.settings(doc).app == {"migration": {"limit": 2}}
    with pytest.raises(UsageError, match="app.migration: the vLLM app has no migrating ingress yet"):
        experiment.settings(doc, app="llm")
    with pytest.raises(ValueError, match="vLLM app"):
        serve_config.serve_config(serve_config.AppSpec(app="llm", migration_limit=1))


def test_migration_with_the_vllm_app_is_refused_by_the_run_s_spec_before_anything_starts():
    """`availproof run --app llm` builds its spec (chaos.core.run_spec) from one parse: the refusal is there too, not at
    the deploy after the cluster came up."""
    from chaos.core import run_spec
    from chaos.core.options import Options

    doc = with_migration({"limit": 2})
    assert run_spec.of_document(doc, Options(app="stream")).settings.app == {"migration": {"limit": 2}}
    with pytest.raises(UsageError, match="app.migration: the vLLM app has no migrating ingress yet"):
        run_spec.of_document(doc, Options(app="llm"))


def test_off_the_config_is_what_it_was():
    cfg = serve_config.serve_config(serve_config.AppSpec())["applications"][0]
    assert cfg["import_path"] == serve_config.STREAM_IMPORT and "migration" not in cfg["args"]
    assert [d["name"] for d in cfg["deployments"]] == ["StreamTarget"]


def test_on_the_ingress_stands_in_front_of_the_engine_replicas_which_keep_their_options():
    off = serve_config.serve_config(serve_config.AppSpec(stall_s=8.0, watchdog=2))["applications"][0]
    on = serve_config.serve_config(serve_config.AppSpec(stall_s=8.0, watchdog=2, migration_limit=2))["applications"][0]
    assert on["import_path"] == serve_config.MIGRATING_IMPORT and on["args"]["migration"] == {"limit": 2}
    assert (on["name"], on["route_prefix"]) == (off["name"], off["route_prefix"])  # the rig's front door unchanged
    engines, ingress = on["deployments"]
    assert engines == off["deployments"][0]  # placement, health checks, the watchdog's user_config
    assert ingress["name"] == "MigratingIngress" and "user_config" not in ingress
    assert ingress["num_replicas"] == engines["num_replicas"]  # one per zone: not a single point of failure
    assert ingress["ray_actor_options"]["label_selector"] == engines["ray_actor_options"]["label_selector"]
    serve_config.validate(serve_config.serve_config(serve_config.AppSpec(migration_limit=2)))
    with pytest.raises(ValueError):
        serve_config.serve_config(serve_config.AppSpec(migration_limit=0))


def test_the_experiment_reaches_the_app_spec():
    cluster = SimpleNamespace(topology=SimpleNamespace(zones=["zone-a", "zone-b", "zone-c"]))
    assert provision.app_spec("stream", cluster, {"migration": {"limit": 3}}).migration_limit == 3
    assert provision.app_spec("stream", cluster, {}).migration_limit is None


def test_the_rig_picks_an_engine_replica_never_the_ingress():
    def row(dep, rid):
        return placement.Replica(app="llm", deployment=dep, replica_id=rid, state="RUNNING", actor_name=None,
                                 actor_id=None, pid=1, node_ip=None, node="w", zone="zone-a", region=None)

    rows = [row("MigratingIngress", "a-ingress"), row("StreamTarget", "b-engine")]
    assert placement.pick(rows).deployment == "StreamTarget"
    assert placement.pick(rows, zone="zone-a").replica_id == "b-engine"


def test_a_deployed_migrating_app_is_the_stream_app_and_switching_migration_redeploys(monkeypatch):
    cluster = SimpleNamespace(state=SimpleNamespace(dashboard_url="http://127.0.0.1:1",
                                                    head=SimpleNamespace(serve_port=8000)))
    on = serve_config.AppSpec(migration_limit=2, http_port=8000)
    app = serve_config.serve_config(on)["applications"][0]
    monkeypatch.setattr(ray_dashboard, "serve_details",
                        lambda url: {"applications": {serve_config.APP_NAME: {"deployed_app_config": app}}})
    assert deploy.deployed_app(cluster) == "stream"
    assert not deploy.deployments_differ(cluster, serve_config.AppSpec(migration_limit=2))
    assert deploy.deployments_differ(cluster, serve_config.AppSpec())
    assert deploy.deployments_differ(cluster, serve_config.AppSpec(migration_limit=1))
