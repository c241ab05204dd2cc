"""The rig's HAProxy in front of a real cluster's zone proxies: it starts from the cluster's
state, routes (over TLS, with the bearer token it requires) and checks the proxies. Taking a dead
proxy out of rotation is asserted on every node, zone, region and partition experiment
(test_experiments: the balancer's own detection instant, within fall x inter + a timeout);
`cluster down` removing it, in test_local_cluster's lifecycle test."""

import ssl

import httpx
import pytest

from chaos.system import deploy, frontdoor
from chaos.backends.local import LocalCluster, haproxy, procs
from chaos.core.provision import app_spec

TOKEN = "tok-7f3a-front-door-test"


def _stream(client: httpx.Client, url: str, headers: dict) -> httpx.Response:
    body = {"model": "availproof-tiny", "prompt": "hello there", "max_tokens": 4, "stream": False}
    return client.post(f"{url}/v1/completions", json=body, headers=headers, timeout=15)


@pytest.fixture(scope="module")
def serving(shared_cluster):
    if deploy.app_status(shared_cluster.state.dashboard_url) != "RUNNING":
        deploy.deploy(shared_cluster, app_spec("stream", shared_cluster), timeout=300)
    yield shared_cluster
    shared_cluster.stop_front()


def test_lb_routes_over_tls_with_the_token_it_requires(serving):
    cluster: LocalCluster = serving
    settings = frontdoor.FrontSettings(check_interval_s=0.5, fall=2, rise=2, tls=True, token_env="AP_TEST_TOKEN")
    front = cluster.start_front("lb", settings, token=TOKEN)
    assert procs.alive(front.pid) and LocalCluster.attach(cluster.cluster_dir).front.pid == front.pid
    assert TOKEN not in (cluster.cluster_dir / "front" / "haproxy.cfg").read_text()  # env only
    assert TOKEN not in (cluster.cluster_dir / "state.json").read_text()
    (name, url, zone), = front.urls()
    assert url.startswith("https://127.") and zone is None
    ctx = ssl.create_default_context(cafile=front.ca_bundle)
    with httpx.Client(verify=ctx, trust_env=False) as client:
        ok = [_stream(client, url, {"Authorization": f"Bearer {TOKEN}"}) for _ in range(6)]
        assert [r.status_code for r in ok] == [200] * 6, [r.text[:200] for r in ok]
        denied = _stream(client, url, {"Authorization": "Bearer wrong"})
        assert denied.status_code == 401
        assert _stream(client, url, {}).status_code == 401
    with pytest.raises(httpx.ConnectError):  # the run's CA only: the system's bundle does not trust it
        httpx.get(url, timeout=5, trust_env=False)
    stat = haproxy.show_stat(front)
    workers = {n.name: n.zone for n in cluster.state.workers()}
    assert {k.split("/")[1] for k in stat["servers"]} == set(workers)
    assert all(s["status"] == "UP" for s in stat["servers"].values()), stat["servers"]
    assert sum(s["stot"] for s in stat["servers"].values()) >= 6  # the requests went through the servers
    # the balancer's own 401s are its own answers, not 5xx
    assert stat["own_5xx"] == 0


def test_zonal_lb_prefers_its_zone_and_keeps_the_others_as_backup(serving):
    cluster: LocalCluster = serving
    front = cluster.start_front("zonal-lb", frontdoor.FrontSettings(check_interval_s=0.5))
    urls = front.urls()
    zones = sorted(cluster.topology.zones)
    assert sorted(z for _, _, z in urls) == zones
    cfg = (cluster.cluster_dir / "front" / "haproxy.cfg").read_text()
    for z in zones:
        own = [n.name for n in cluster.state.workers() if n.zone == z]
        block = cfg.split(f"\nbackend be-lb-{z}\n")[1].split("\nfrontend")[0].split("\nbackend")[0]
        for n in cluster.state.workers():
            line = next(ln for ln in block.splitlines() if ln.strip().startswith(f"server {n.name} "))
            assert line.strip().endswith("backup") == (n.name not in own), line
    with httpx.Client(trust_env=False) as client:
        for _, url, _ in urls:
            assert _stream(client, url, {}).status_code == 200
    stat = haproxy.show_stat(front)
    # each zone's balancer sent to its own zone's proxy only (the others are backups)
    for key, s in stat["servers"].items():
        backend, server = key.split("/")
        if s["stot"]:
            assert backend == f"lb-{s['zone']}", (key, s)
