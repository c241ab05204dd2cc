"""The local backend's planned disruptions without a cluster: what the upgrade PUTs, and the refusals."""

import pytest

from chaos.system import ray_dashboard
from chaos.backends.local.backend import LocalBackend
from chaos.base.errors import ClusterError, UsageError
from tests.unit.fake_dashboard import install as fake_dashboard

DEPLOYED = {"name": "llm", "route_prefix": "/", "import_path": "serve_apps.stream_target:app_builder",
            "args": {"model": "availproof-tiny"}, "runtime_env": {"env_vars": {"KEEP": "1"}},
            "deployments": [{"name": "StreamTarget", "num_replicas": 3, "max_replicas_per_node": 1}]}


class FakeCluster:
    class state:
        dashboard_url = "http://127.9.9.2:8265"


def backend(monkeypatch, details):
    return LocalBackend(FakeCluster()), fake_dashboard(monkeypatch, serve=details)


def test_upgrade_puts_the_deployed_config_again_with_only_a_new_code_version(monkeypatch):
    details = {"proxy_location": "EveryNode", "http_options": {"host": "0.0.0.0", "port": 18106},
               "applications": {"llm": {"deployed_app_config": DEPLOYED}}}
    b, dashboard = backend(monkeypatch, details)
    got = b.upgrade_app("code", "v2")
    assert got["version"] == "v2" and got["previous_version"] is None and got["version_served"] is True
    ((url, doc),) = dashboard.sent("PUT")
    assert url == FakeCluster.state.dashboard_url + ray_dashboard.SERVE_APPLICATIONS
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
    b, dashboard = backend(monkeypatch, {"applications": {}})
    with pytest.raises(UsageError, match="upgrade variants are code"):
        b.upgrade_app("serve_config", "v2")
    with pytest.raises(ClusterError, match="not deployed"):
        b.upgrade_app("code", "v2")
    assert dashboard.sent("PUT") == []


# ---------------------------------------------------------------- drain (Ray's drain-node API)
class Node:
    def __init__(self, name, role, ip, nm_port):
        self.name, self.role, self.ip, self.ports = name, role, ip, {"node_manager": nm_port}


class DrainCluster:
    class state:
        dashboard_url = "http://127.9.9.2:8265"
        gcs_address = "127.9.9.2:6379"

    nodes = {"head": Node("head", "head", "127.9.9.2", 7000), "worker-b": Node("worker-b", "worker", "127.9.9.4", 7002)}

    def __init__(self, gcs_nodes):
        self._gcs = gcs_nodes

    def node(self, name):
        return self.nodes[name]

    def gcs_nodes(self):
        return self._gcs


def raylet(node_id, ip, port, state="ALIVE", start=0):
    return {"raylet": {"nodeId": node_id, "nodeManagerAddress": ip, "nodeManagerPort": port, "state": state,
                       "startTimeMs": start}}


class FakeGcs:
    calls: list = []
    answer = (True, "")

    def __init__(self, address):
        self.address = address

    def drain_node(self, node_id, reason, message, deadline_ms):
        FakeGcs.calls.append((self.address, node_id, reason, message, deadline_ms))
        return FakeGcs.answer


def test_drain_tells_the_gcs_of_the_nodes_alive_raylet_with_reason_preemption_and_the_deadline(monkeypatch):
    import time

    import ray._raylet
    from ray.core.generated import autoscaler_pb2

    monkeypatch.setattr(ray._raylet, "GcsClient", FakeGcs)
    FakeGcs.calls, FakeGcs.answer = [], (True, "")
    gcs = [raylet("old-dead", "127.9.9.4", 7002, state="DEAD", start=5),  # the node's previous life
           raylet("other-port", "127.9.9.4", 7999, start=9),  # another raylet on the same address
           raylet("b-now", "127.9.9.4", 7002, start=7), raylet("head-id", "127.9.9.2", 7000)]
    b = LocalBackend(DrainCluster(gcs))
    before = time.time() * 1000
    got = b.drain_node("worker-b", 30)
    assert got == {"method": "ray drain-node", "reason": "PREEMPTION", "node_id": "b-now"}
    ((address, node_id, reason, message, deadline_ms),) = FakeGcs.calls
    assert address == DrainCluster.state.gcs_address and node_id == "b-now"
    assert reason == autoscaler_pb2.DrainNodeReason.Value("DRAIN_NODE_REASON_PREEMPTION")
    assert "worker-b" in message and before + 29_000 <= deadline_ms <= time.time() * 1000 + 30_000


def test_drain_refuses_the_head_a_node_not_alive_and_says_when_the_gcs_refuses(monkeypatch):
    import ray._raylet

    monkeypatch.setattr(ray._raylet, "GcsClient", FakeGcs)
    FakeGcs.calls = []
    with pytest.raises(UsageError, match="head cannot be drained"):
        LocalBackend(DrainCluster([])).drain_node("head", 30)
    with pytest.raises(ClusterError, match="not ALIVE in the GCS"):
        LocalBackend(DrainCluster([raylet("x", "127.9.9.4", 7002, state="DEAD")])).drain_node("worker-b", 30)
    assert FakeGcs.calls == []  # nothing was asked of the GCS
    FakeGcs.answer = (False, "the node is idle-terminating")
    with pytest.raises(ClusterError, match="GCS refused to drain worker-b: the node is idle-terminating"):
        LocalBackend(DrainCluster([raylet("b", "127.9.9.4", 7002)])).drain_node("worker-b", 30)
    FakeGcs.answer = (True, "")
