"""``app.migration: {limit: N}`` (issue 47) from the experiment to the Serve config: validated by the schema (bad
input one line, exit 2, before anything runs), off when absent (the config as before, either app), and on: the
stream target's MigratingIngress as the route prefix's ingress in front of the StreamTarget engine replicas, which
keep their options; the vLLM app's OpenAI ingress the migrating one (serve_apps/llm_migrating.py), nothing else
changed; the rig still picks the engine replicas, never the ingress; a deployed app with the ingress is the same app,
and turning migration on or off deploys again."""

import json
from types import SimpleNamespace

import pytest

from chaos.commands import cli
from chaos.system import deploy, placement, ray_dashboard
from chaos.core import experiment, provision
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


def test_migration_with_the_vllm_app_is_accepted_by_the_settings_and_the_run_s_spec():
    """Refused until the vLLM app had its migrating ingress; `availproof run --app llm` builds its spec
    (chaos.core.run_spec) from one parse, the shipped experiment included."""
    from chaos.core import run_spec
    from chaos.core.options import Options

    doc = with_migration({"limit": 2})
    assert experiment.settings(doc, app="llm").app == {"migration": {"limit": 2}}
    for app in ("stream", "llm"):
        assert run_spec.of_document(doc, Options(app=app)).settings.app == {"migration": {"limit": 2}}
    text = (experiment.Path(__file__).resolve().parents[2] / "experiments" / "replica-kill-migration.json").read_text()
    assert run_spec.of_document(json.loads(text), Options(app="llm")).settings.app == {"migration": {"limit": 2}}
    assert "no migrating ingress" not in text


def llm_spec(**kw):
    spec = serve_config.AppSpec(app="llm", **kw)
    spec.llm.model_path = "/tmp/model"
    return spec


def test_the_vllm_app_without_migration_is_what_it_was():
    cfg = serve_config.serve_config(llm_spec())["applications"][0]
    assert cfg["import_path"] == "ray.serve.llm:build_openai_app"
    assert cfg["args"]["ingress_cls_config"] == {"ingress_cls": "serve_apps.llm_served:OpenAiIngress"}
    assert set(cfg["args"]) == {"llm_configs", "ingress_deployment_config", "ingress_cls_config"}


def test_the_vllm_app_with_migration_changes_its_ingress_class_and_nothing_else():
    off = serve_config.serve_config(llm_spec(stall_s=8.0))
    on = serve_config.serve_config(llm_spec(stall_s=8.0, migration_limit=2))
    app_on, app_off = on["applications"][0], off["applications"][0]
    assert app_on["args"]["ingress_cls_config"] == {"ingress_cls": "serve_apps.llm_migrating:OpenAiIngress",
                                                    "ingress_extra_kwargs": {"migration_limit": 2}}
    app_on["args"]["ingress_cls_config"] = app_off["args"]["ingress_cls_config"]
    assert on == off  # engines (placement, watchdog's user_config), the ingress's placement, name and route
    serve_config.validate(serve_config.serve_config(llm_spec(migration_limit=2)))
    with pytest.raises(ValueError):
        serve_config.serve_config(llm_spec(migration_limit=0))


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


@pytest.mark.parametrize("ingress, engine", [("MigratingIngress", "StreamTarget"),
                                             ("OpenAiIngress", "LLMServer:availproof-tiny")])
def test_the_rig_picks_an_engine_replica_never_the_ingress(ingress, engine):
    """The vLLM app's migrating ingress keeps Ray's class name, so its deployment is OpenAiIngress, as without it."""
    def row(dep, rid):
        return placement.Replica(app="llm", deployment=dep, replica_id=rid, state="RUNNING", actor_name=None,
                                 actor_id=None, pid=1, node_ip=None, node="w", zone="zone-a", region=None)

    rows = [row(ingress, "a-ingress"), row(engine, "b-engine")]
    assert placement.pick(rows).deployment == engine
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


def test_a_deployed_migrating_vllm_app_is_the_llm_app_and_switching_migration_redeploys(monkeypatch):
    cluster = SimpleNamespace(state=SimpleNamespace(dashboard_url="http://127.0.0.1:1",
                                                    head=SimpleNamespace(serve_port=8000)))
    app = serve_config.serve_config(llm_spec(migration_limit=2, http_port=8000))["applications"][0]
    monkeypatch.setattr(ray_dashboard, "serve_details",
                        lambda url: {"applications": {serve_config.APP_NAME: {"deployed_app_config": app}}})
    assert deploy.deployed_app(cluster) == "llm"
    assert not deploy.deployments_differ(cluster, llm_spec(migration_limit=2))
    assert deploy.deployments_differ(cluster, llm_spec())
    assert deploy.deployments_differ(cluster, llm_spec(migration_limit=1))
