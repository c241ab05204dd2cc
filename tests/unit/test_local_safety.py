"""The local backend's safety and honesty, without a Ray cluster: a recorded PID is signalled only
while it is still the process recorded, the bearer tokens stay out of the processes the rig starts
and out of what HAProxy forwards, a placement read that got no answer is not an empty node, and a
front door can tell how long its certificate has left."""

import http.server
import os
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import pytest

from chaos.core import experiment
from chaos.scopes import faults
from chaos.system import frontdoor, placement, secret_env, tls, topology
from chaos.backends.local import haproxy, ports, procs
from chaos.backends.local import state as st
from chaos.backends.local.backend import LocalBackend
from chaos.backends.local.cluster import LocalCluster
from chaos.scopes.drain import drain_node
from tests.unit.fake_dashboard import install as fake_dashboard

HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"
needs_haproxy = pytest.mark.skipif(not Path(HAPROXY).exists(), reason="haproxy is not installed")


@pytest.fixture(autouse=True)
def no_declared_secrets(monkeypatch):
    """Each test starts with no secret declared in this process (declarations last a process)."""
    monkeypatch.setattr(secret_env, "_declared", set())
    monkeypatch.delenv(secret_env.SECRET_ENV, raising=False)


def front_state(tmp_path, pid=None, **settings):
    d = tmp_path / "front"
    d.mkdir(parents=True, exist_ok=True)
    return haproxy.FrontState(shape="lb", dir=str(d), host="127.0.0.1", listeners=[], metrics_port=1,
                              settings=frontdoor.FrontSettings(**settings).to_dict(), pid=pid)


def cluster_state(tmp_path, **kw):
    s = st.ClusterState(cluster_id="ap0c0ffe", topology=topology.load().to_doc(), topology_source="default.yaml",
                        gcs_fault_tolerance=True, temp_root=str(tmp_path / "tmp"), base_port=20000, **kw)
    s.nodes["head"] = st.NodeState(name="head", role="head", ip="127.9.9.2", ports=ports.node_ports(20000, 1),
                                   temp_dir=str(tmp_path / "tmp" / "head"), labels={"node": "head"})
    s.nodes["w"] = st.NodeState(name="w", role="worker", ip="127.9.9.3", ports=ports.node_ports(20000, 2),
                                temp_dir=str(tmp_path / "tmp" / "w"), labels={"zone": "z"}, zone="z", region="r")
    s.redis = st.RedisState(host="127.9.9.1", port=20010, dir=str(tmp_path / "redis"))
    return s


# ---------------------------------------------------------------- a recorded PID is checked before a signal
def test_a_front_door_pid_now_held_by_another_process_is_not_signalled(tmp_path):
    """HAProxy exited and its PID went to another process (here a `sleep` of this test, in a session
    of its own as HAProxy was): stopping the front door leaves that process alone and forgets the door."""
    other = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        front = front_state(tmp_path, pid=other.pid)
        haproxy.stop(front)
        assert procs.alive(other.pid) and other.poll() is None
        assert not haproxy.alive(front)  # not the front door's HAProxy: the front door is gone
        assert not Path(front.dir).exists()
        # the same through the cluster (``cluster down``, ``recover``, a new front door), which says so
        s = cluster_state(tmp_path, front=front_state(tmp_path, pid=other.pid).to_json())
        st.save(s, tmp_path)
        said: list[str] = []
        c = LocalCluster.attach(tmp_path, log=said.append)
        c.stop_front()
        assert procs.alive(other.pid) and c.state.front is None
        assert any(f"pid {other.pid} is no longer its HAProxy" in m for m in said), said
    finally:
        other.kill()
        other.wait()


def test_a_redis_pid_now_held_by_another_process_is_neither_killed_nor_taken_for_redis(tmp_path, monkeypatch):
    from chaos.backends.local import redis

    other = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        s = cluster_state(tmp_path)
        s.redis.pid = other.pid
        st.save(s, tmp_path)
        c = LocalCluster.attach(tmp_path)
        assert c.kill_redis() == [] and procs.alive(other.pid)
        c.state.redis.pid = other.pid
        assert c.redis_status()["state"] == "DOWN"
        started = []
        monkeypatch.setattr(redis, "start", lambda *a, **kw: started.append(a) or 4243)
        c.start_redis()  # Redis is not running: it is started again, not taken as up
        assert started and c.state.redis.pid == 4243
        c.state.redis.pid = other.pid
        c.down()
        assert procs.alive(other.pid) and other.poll() is None
    finally:
        other.kill()
        other.wait()


@pytest.mark.skipif(not shutil.which("redis-server") and not Path("/usr/bin/redis-server").exists(),
                    reason="redis-server is not installed")
def test_the_clusters_own_redis_is_recognised_and_killed(tmp_path):
    from chaos.backends.local import redis

    s = cluster_state(tmp_path)
    s.redis.host, s.redis.port = "127.0.0.1", ports.free_port("127.0.0.1")
    pid = redis.start(s.redis.host, s.redis.port, tmp_path / "redis")
    try:
        s.redis.pid = pid
        st.save(s, tmp_path)
        c = LocalCluster.attach(tmp_path)
        assert c.redis_alive() and c.redis_status()["state"] == "UP"
        assert c.kill_redis() == [pid] and not procs.alive(pid)
    finally:
        procs.stop_pid(pid, timeout=2)


def test_the_front_doors_haproxy_is_haproxy_with_its_own_configuration_in_its_own_session(tmp_path, monkeypatch):
    front = front_state(tmp_path, pid=4321)
    cfg = str(Path(front.dir) / "haproxy.cfg")
    seen = {"argv": ["/usr/sbin/haproxy", "-db", "-f", cfg], "sid": 4321}
    monkeypatch.setattr(procs, "argv", lambda pid: list(seen["argv"]))
    monkeypatch.setattr(procs, "session_of", lambda pid: seen["sid"])
    assert haproxy.is_ours(front, 4321)
    for args, sid in ((["/usr/sbin/haproxy", "-db", "-f", "/etc/haproxy/haproxy.cfg"], 4321),  # the system's
                      (["/usr/sbin/haproxy", "-db", "-f", str(tmp_path / "other" / "haproxy.cfg")], 4321),
                      (["/usr/bin/python3", "-f", cfg], 4321),  # names the file, is not haproxy
                      (["/usr/sbin/haproxy", "-db", "-f", cfg], 1),  # not in the session it was started in
                      ([], 4321)):  # gone, or a zombie
        seen.update(argv=args, sid=sid)
        assert not haproxy.is_ours(front, 4321), args


def test_stop_pid_sends_no_kill_to_a_pid_that_changed_hands_after_the_term(monkeypatch):
    """The process ignored SIGTERM past the timeout, then its PID named another: no SIGKILL."""
    sent = []
    monkeypatch.setattr(procs, "alive", lambda pid: True)
    monkeypatch.setattr(procs, "wait_gone", lambda pids, timeout: False)
    monkeypatch.setattr(procs, "signal_pids", lambda pids, sig: sent.append(sig) or pids)
    answers = iter([True, False])
    procs.stop_pid(77, timeout=0.01, same=lambda pid: next(answers))
    assert sent == [procs.signal.SIGTERM]


# ---------------------------------------------------------------- secrets stay out of the processes started
def test_child_env_drops_every_name_declared_listed_or_given(monkeypatch):
    monkeypatch.setenv("AP_T_DECLARED", "1")
    monkeypatch.setenv("AP_T_LISTED", "2")
    monkeypatch.setenv("AP_T_EXTRA", "3")
    monkeypatch.setenv(frontdoor.TOKEN_VAR, "4")
    monkeypatch.setenv(secret_env.SECRET_ENV, " AP_T_LISTED , ")
    secret_env.declare("AP_T_DECLARED", None, "")
    env = secret_env.child_env(["AP_T_EXTRA"])
    assert not {"AP_T_DECLARED", "AP_T_LISTED", "AP_T_EXTRA", frontdoor.TOKEN_VAR} & set(env)
    assert env["PATH"] == os.environ["PATH"] and env[secret_env.SECRET_ENV]  # names only: passed on


def test_reading_an_experiment_declares_its_token_variables_secret():
    doc = experiment.load(Path(__file__).resolve().parents[2] / "experiments" / "drain.json")
    ext = doc["extensions"][0]
    ext["auth_token_env"] = "AP_T_CLIENT_TOKEN"
    ext["front_door"] = {**ext.get("front_door", {}), "token_env": "AP_T_FRONT_TOKEN"}
    experiment.settings(doc)
    assert {"AP_T_CLIENT_TOKEN", "AP_T_FRONT_TOKEN"} <= secret_env.names()


def test_ray_nodes_redis_and_haproxy_start_without_the_secret_variables(tmp_path, monkeypatch):
    from chaos.backends.local import nodes, redis

    for k in ("AP_T_CLIENT_TOKEN", "AP_T_FRONT_TOKEN", "AP_T_LISTED", "AP_T_ONLY_FRONT", frontdoor.TOKEN_VAR):
        monkeypatch.setenv(k, "secret")
    monkeypatch.setenv(secret_env.SECRET_ENV, "AP_T_LISTED")
    secret_env.declare("AP_T_CLIENT_TOKEN", "AP_T_FRONT_TOKEN")  # as reading the experiment does
    envs: dict[str, list[dict]] = {"ray": [], "redis": [], "haproxy": []}

    class Popen:
        def __init__(self, args, env=None, **kw):
            envs["ray"].append(env)
            self.pid = 424242

        def wait(self, timeout=None):
            return 0

    monkeypatch.setattr(nodes.subprocess, "Popen", Popen)
    monkeypatch.setattr(nodes, "ray_binary", lambda: "/bin/true")
    monkeypatch.setattr(procs, "session_members", lambda sid: [sid])
    monkeypatch.setattr(redis, "start", lambda *a, env=None, **kw: envs["redis"].append(env) or 4243)
    monkeypatch.setattr(haproxy, "start", lambda *a, env=None, **kw: envs["haproxy"].append(env) or front_state(tmp_path))
    st.save(cluster_state(tmp_path), tmp_path)
    c = LocalCluster.attach(tmp_path)
    c._ray_start(c.node("w"))
    c.start_redis()
    # a front door started with settings of its own: its token variable is a secret from then on
    c.start_front("lb", frontdoor.FrontSettings(token_env="AP_T_ONLY_FRONT"), token="secret")
    secrets = {"AP_T_CLIENT_TOKEN", "AP_T_FRONT_TOKEN", "AP_T_LISTED", frontdoor.TOKEN_VAR}
    for what, got in envs.items():
        (env,) = got
        assert not secrets & set(env), what
        assert env["PATH"] == os.environ["PATH"], what
    assert "AP_T_ONLY_FRONT" not in envs["haproxy"][0]
    assert envs["ray"][0]["AVAILPROOF_NODE"] == "w"  # the node's name, device-loss's key (serve_apps/device_loss.py)
    # another process (``availproof recover`` in a shell that exports the tokens) has declared nothing:
    # the names the cluster was told of before are in its state file
    monkeypatch.setattr(secret_env, "_declared", set())
    monkeypatch.delenv(secret_env.SECRET_ENV)
    later = LocalCluster.attach(tmp_path)
    later._ray_start(later.node("w"))
    assert not (secrets | {"AP_T_ONLY_FRONT"}) & set(envs["ray"][-1])


@needs_haproxy
def test_a_real_front_door_checks_the_token_and_neither_forwards_it_nor_holds_the_users_variable(tmp_path, monkeypatch):
    """HAProxy in front of a small HTTP server that records what reaches it (as a Serve proxy would)."""
    seen: list[tuple[str, dict]] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append((self.path, dict(self.headers)))
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("AP_T_FRONT_TOKEN", "s3cret")  # the user's variable, named by the experiment
    monkeypatch.setenv("AP_T_CLIENT_TOKEN", "other")
    secret_env.declare("AP_T_CLIENT_TOKEN")
    settings = frontdoor.FrontSettings(token_env="AP_T_FRONT_TOKEN", check_interval_s=0.2)
    front = None
    try:
        front = haproxy.start("lb", [frontdoor.Server("w", "z", "127.0.0.1", server.server_address[1])], settings,
                              tmp_path, host="127.0.0.1", token="s3cret")
        url = front.urls()[0][1] + "/v1/ping"

        def get(headers):
            try:
                with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=2) as r:
                    return r.status
            except urllib.error.HTTPError as e:
                return e.code

        assert get({}) == 401 and get({"Authorization": "Bearer wrong"}) == 401
        try:  # a 401 says how to authenticate (RFC 9110 §11.6.1)
            urllib.request.urlopen(url, timeout=2)
        except urllib.error.HTTPError as e:
            assert e.code == 401 and e.headers.get_all("WWW-Authenticate") == ['Bearer realm="availproof"']
        deadline = time.monotonic() + 10
        while get({"Authorization": "Bearer s3cret"}) != 200 and time.monotonic() < deadline:
            time.sleep(0.1)
        passed = [h for path, h in seen if path == "/v1/ping"]
        assert passed and not any(k.lower() == "authorization" for h in passed for k in h)
        environ = dict(x.split("=", 1) for x in Path(f"/proc/{front.pid}/environ").read_text().split("\0") if "=" in x)
        assert environ.get(frontdoor.TOKEN_VAR) == "s3cret"
        assert "AP_T_FRONT_TOKEN" not in environ and "AP_T_CLIENT_TOKEN" not in environ
        assert haproxy.is_ours(front, front.pid) and haproxy.alive(front)
    finally:
        if front is not None:
            haproxy.stop(front)
        server.shutdown()
    assert not procs.alive(front.pid)


# ---------------------------------------------------------------- a placement read with no answer is unknown
class DrainBackend(LocalBackend):
    """The local backend's own replica reads (placement through the dashboard); the drain, the kill
    and the restart stand-ins."""

    def __init__(self):
        nodes = {"b": SimpleNamespace(name="b", ip="127.9.9.4", zone="zb", region="r"),
                 "c": SimpleNamespace(name="c", ip="127.9.9.5", zone="zc", region="r")}
        super().__init__(SimpleNamespace(state=SimpleNamespace(nodes=nodes, dashboard_url="http://127.9.9.2:8265")))
        self.drained_at: float | None = None

    def zone_of(self, node):
        return self.cluster.state.nodes[node].zone

    def drain_node(self, node, deadline_s):
        self.drained_at = time.monotonic()
        return {"method": "fake"}

    def kill_node(self, node):
        return [1]

    def start_node(self, node):
        pass

    def effect_checks(self, fault):  # the stand-in kill is in effect (what these tests look at is the reads)
        return [{"check": "the stand-in node killed", "ok": True, "seen": "killed"}]


def details_on(ip):
    return {"applications": {"llm": {"deployments": {"StreamTarget": {"replicas": [
        {"replica_id": "r1", "state": "RUNNING", "node_ip": ip, "pid": 5, "actor_name": "a"}]}}}}}


def test_the_local_backend_says_a_read_without_an_answer_is_unknown_not_empty(monkeypatch):
    b = DrainBackend()
    dashboard = fake_dashboard(monkeypatch, serve=None)
    with pytest.raises(placement.PlacementUnknown, match="did not answer"):
        b.replicas(state=None)
    dashboard.serve = {"applications": {}}
    assert b.replicas(state=None) == []  # answered: there are none


def test_a_drain_read_without_an_answer_does_not_move_the_replicas(monkeypatch):
    """The node's replica moves at the 6th read; the 2nd got no answer. Taken as an empty node, it
    would say the replica had moved at once."""
    b = DrainBackend()
    reads = []

    def serve_details():
        reads.append(time.monotonic())
        n = len(reads)
        return None if n == 2 else details_on("127.9.9.4" if n < 6 else "127.9.9.5")

    fake_dashboard(monkeypatch, serve=serve_details)
    marker = faults.Marker()
    f = drain_node(b, marker, node="b", deadline_s=0.5, outage_s=None, poll_s=0.02)
    assert marker.marks[0].detail["replicas_at_notice"] == ["r1"]
    moved_read = reads[5] - b.drained_at  # when the read that first saw it elsewhere started
    assert moved_read > 0.05 and f["moved_before_deadline_s"] >= round(moved_read, 3) - 0.005
    assert f["replicas_left_at_deadline"] == [] and f["placement_reads_failed"] == 1


def test_a_drain_whose_deadline_read_got_no_answer_keeps_the_last_known_placement(monkeypatch):
    b = DrainBackend()
    deadline_s = 0.3

    def serve_details():
        late = b.drained_at is not None and time.monotonic() - b.drained_at >= deadline_s
        return None if late else details_on("127.9.9.4")  # the replica never leaves; the last read fails

    fake_dashboard(monkeypatch, serve=serve_details)
    marker = faults.Marker()
    f = drain_node(b, marker, node="b", deadline_s=deadline_s, outage_s=None, poll_s=0.02)
    assert f["replicas_left_at_deadline"] == ["r1"] and f["moved_before_deadline_s"] is None
    assert f["placement_reads_failed"] >= 1
    end = [m for m in marker.marks if m.event == "inject_end"][0]
    assert end.detail["replicas_left_at_deadline"] == ["r1"]


def test_no_drain_when_the_placement_at_the_notice_is_unknown(monkeypatch):
    b = DrainBackend()
    fake_dashboard(monkeypatch, serve=None)
    marker = faults.Marker()
    with pytest.raises(placement.PlacementUnknown):
        drain_node(b, marker, node="b", deadline_s=0.1, outage_s=None, poll_s=0.01)
    assert b.drained_at is None and marker.marks == []


# ---------------------------------------------------------------- the certificate's remaining life
def test_a_front_door_tells_how_long_its_certificate_is_valid(tmp_path):
    front = front_state(tmp_path, tls=True)
    tls.make_certificate(Path(front.dir), "127.0.0.1")
    now = time.time()
    assert 2 * 86400 - 60 < front.cert_valid_for_s(now) <= 2 * 86400
    assert front.cert_valid_for_s(now + 2 * 86400 - 3600) < haproxy.CERT_RENEW_WITHIN_S  # due for renewal
    assert front.cert_valid_for_s(now + 3 * 86400) < 0  # expired
    (Path(front.dir) / tls.SERVER_PEM).unlink()
    assert front.cert_valid_for_s() == 0.0  # nothing vouches for it
    assert front_state(tmp_path / "plain").cert_valid_for_s() == float("inf")  # no TLS: nothing expires
