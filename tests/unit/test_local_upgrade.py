"""The local backend's planned disruptions without a cluster: what the upgrade PUTs, and the refusals."""

import pytest

from chaos import deploy, placement
from chaos.backends.local.backend import LocalBackend
from chaos.errors import ClusterError, UsageError

DEPLOYED = {"name": "llm", "route_prefix": "/", "import_path": "serve_apps.stream_target:app_builder",
            "args": {"model": "availproof-tiny"}, "runtime_env": {"env_vars": {"KEEP": "1"}},
            "deployments": [{"name": "StreamTarget", "num_replicas": 3, "max_replicas_per_node": 1}]}


class FakeCluster:
    class state:
        dashboard_url = "http://127.9.9.2:8265"


def backend(monkeypatch, details):
    monkeypatch.setattr(placement, "serve_details", lambda url: details)
    sent = []
    monkeypatch.setattr(deploy, "put_config", lambda url, doc, timeout=30.0: sent.append((url, doc)))
    return LocalBackend(FakeCluster()), sent


def test_upgrade_puts_the_deployed_config_again_with_only_a_new_code_version(monkeypatch):
    details = {"proxy_location": "EveryNode", "http_options": {"host": "0.0.0.0", "port": 18106},
               "applications": {"llm": {"deployed_app_config": DEPLOYED}}}
    b, sent = backend(monkeypatch, details)
    got = b.upgrade_app("code", "v2")
    assert got["version"] == "v2" and got["previous_version"] is None
    ((url, doc),) = sent
    assert url == FakeCluster.state.dashboard_url
    assert doc["proxy_location"] == "EveryNode" and doc["http_options"] == {"host": "0.0.0.0", "port": 18106}
    (app,) = doc["applications"]
    # everything as deployed, but the version in the runtime_env (the existing env vars kept)
    assert app["runtime_env"] == {"env_vars": {"KEEP": "1", "AVAILPROOF_APP_VERSION": "v2"}}
    assert {k: v for k, v in app.items() if k != "runtime_env"} == {k: v for k, v in DEPLOYED.items()
                                                                    if k != "runtime_env"}
    assert DEPLOYED["runtime_env"] == {"env_vars": {"KEEP": "1"}}  # the read config is not changed in place
    # a second upgrade records the version it replaced
    details["applications"]["llm"]["deployed_app_config"] = app
    assert b.upgrade_app("code", "v3")["previous_version"] == "v2"


def test_upgrade_refuses_an_unknown_variant_and_an_app_that_is_not_there(monkeypatch):
    b, sent = backend(monkeypatch, {"applications": {}})
    with pytest.raises(UsageError, match="upgrade variants are code"):
        b.upgrade_app("serve_config", "v2")
    with pytest.raises(ClusterError, match="not deployed"):
        b.upgrade_app("code", "v2")
    assert sent == []
