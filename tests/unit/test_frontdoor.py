"""The front door's plain-Python core (chaos.system.frontdoor): HAProxy's configuration for each shape, its
``show stat`` read into a sample, and per fault what the balancer did, at the edges."""

import shutil
import subprocess
from pathlib import Path

import pytest

from chaos.system import frontdoor
from chaos.analysis import planes
from chaos.recording import records as rec
from chaos.system.frontdoor import FrontSettings, Server

NS = 1_000_000_000
T0 = 1_700_000_000 * NS
SERVERS = [Server("worker-a", "zone-a", "127.1.2.3", 18006), Server("worker-b", "zone-b", "127.1.2.4", 18106),
           Server("worker-c", "zone-c", "127.1.2.5", 18206)]
SHOW_STAT = (Path(__file__).parent / "data" / "haproxy-show-stat.csv").read_text()  # a real `show stat` (2.6.12)


def render(shape="lb", **kw):
    s = FrontSettings(**kw)
    listen = frontdoor.listeners(shape, SERVERS, "127.9.9.250", [20001, 20002, 20003])
    return frontdoor.haproxy_config(shape, SERVERS, listen, s, "/tmp/x/stats.sock", "/tmp/x/pid",
                                    ("127.9.9.250", 20009), tls_pem="/tmp/x/server.pem" if s.tls else None), listen


def lines(cfg):
    return [ln.strip() for ln in cfg.splitlines()]


def test_lb_checks_every_proxy_health_endpoint_with_the_settings():
    cfg, listen = render("lb", check_interval_s=0.5, fall=3, rise=2)
    assert [x.name for x in listen] == ["lb"] and listen[0].zone is None
    ls = lines(cfg)
    assert "option httpchk GET /-/healthz" in ls and "http-check expect status 200" in ls
    for s in SERVERS:
        assert f"server {s.name} {s.host}:{s.port} check inter 500ms fall 3 rise 2" in ls
    assert "retries 0" in ls and not any(x.startswith("retry-on") or "redispatch" in x for x in ls)
    assert not any("observe layer7" in x or "ssl crt" in x or "Bearer" in x for x in ls)
    assert "http-request use-service prometheus-exporter if { path /metrics }" in ls  # Prometheus scrapes it


def test_retries_redispatch_passive_checks_tls_and_token_are_rendered_only_when_asked():
    cfg, _ = render("lb", retries=2, redispatch=True, passive=True, passive_error_limit=4, tls=True,
                    token_env="MY_TOKEN")
    ls = lines(cfg)
    assert "retries 2" in ls and "retry-on conn-failure empty-response" in ls and "option redispatch 1" in ls
    assert not any("503" in x for x in ls if x.startswith("retry-on"))  # no L7 status retry: own_5xx stays exact
    assert any(x.endswith("observe layer7 error-limit 4 on-error mark-down") for x in ls)
    assert "bind 127.9.9.250:20001 ssl crt /tmp/x/server.pem" in ls
    # the token stays in HAProxy's environment: the file names the variable, never the user's
    deny = [x for x in ls if x.startswith("http-request deny")]
    assert deny == ['http-request deny deny_status 401 content-type text/plain string "unauthorized" '
                    "hdr WWW-Authenticate 'Bearer realm=\"availproof\"' "
                    f'unless {{ req.hdr(authorization) -m str "Bearer ${{{frontdoor.TOKEN_VAR}}}" }}']
    assert "MY_TOKEN" not in cfg
    cfg, _ = render("lb", retries=1, redispatch=False)
    assert "option redispatch 1" not in cfg and "retries 1" in lines(cfg)


def test_zonal_lb_has_one_listener_per_zone_preferring_its_own_proxy():
    cfg, listen = render("zonal-lb")
    assert [(x.name, x.zone, x.port) for x in listen] == [("lb-zone-a", "zone-a", 20001),
                                                          ("lb-zone-b", "zone-b", 20002),
                                                          ("lb-zone-c", "zone-c", 20003)]
    for x in listen:
        block = cfg.split(f"\nbackend be-{x.name}\n")[1].split("\n\n")[0]
        assert "option allbackups" in block  # every other zone takes over, not just the first backup
        for s in SERVERS:
            (ln,) = [b.strip() for b in block.splitlines() if b.strip().startswith(f"server {s.name} ")]
            assert ln.endswith(" backup") == (s.zone != x.zone), ln
    with pytest.raises(ValueError, match="one port per zone"):
        frontdoor.listeners("zonal-lb", SERVERS, "h", [1, 2])
    with pytest.raises(ValueError, match="direct has no balancer"):
        frontdoor.listeners("direct", SERVERS, "h", [1])


@pytest.mark.parametrize("shape,kw", [("lb", {}), ("zonal-lb", {"retries": 3, "passive": True}),
                                      ("lb", {"token_env": "T", "retries": 1})])
def test_haproxy_itself_accepts_the_rendered_configuration(tmp_path, shape, kw):
    binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
    if not Path(binary).exists():
        pytest.fail("haproxy is not installed: run scripts/bootstrap.sh (it installs Debian's haproxy)")
    cfg, _ = render(shape, **kw)
    cfg = cfg.replace("/tmp/x/", f"{tmp_path}/")
    (tmp_path / "h.cfg").write_text(cfg)
    r = subprocess.run([binary, "-c", "-f", str(tmp_path / "h.cfg")], capture_output=True, text=True,
                       env={frontdoor.TOKEN_VAR: "x"})
    assert r.returncode == 0, r.stdout + r.stderr


@pytest.mark.parametrize("shape", ["lb", "zonal-lb"])
def test_each_frontend_removes_the_token_once_checked_and_haproxy_accepts_it_with_tls(tmp_path, shape):
    """The proxies (and the code behind them) never see the front door's token."""
    cfg, listen = render(shape, token_env="MY_TOKEN")
    for x in listen:
        block = lines(cfg.split(f"\nfrontend fe-{x.name}\n")[1].split("\n\n")[0])
        deny = [i for i, ln in enumerate(block) if ln.startswith("http-request deny")]
        assert deny and block[deny[0] + 1] == "http-request del-header Authorization", block
    assert "del-header" not in render(shape)[0]  # no token checked: the header is not the balancer's
    binary = shutil.which("haproxy") or "/usr/sbin/haproxy"
    if not Path(binary).exists():
        pytest.skip("haproxy is not installed: the rendered configuration is not validated")
    from chaos.system import tls

    pem, _ = tls.make_certificate(tmp_path, "127.9.9.250")
    s = FrontSettings(tls=True, token_env="MY_TOKEN", retries=1)
    cfg = frontdoor.haproxy_config(shape, SERVERS, listen, s, str(tmp_path / "stats.sock"), str(tmp_path / "pid"),
                                   ("127.9.9.250", 20009), tls_pem=pem)
    (tmp_path / "h.cfg").write_text(cfg)
    r = subprocess.run([binary, "-c", "-f", str(tmp_path / "h.cfg")], capture_output=True, text=True,
                       env={frontdoor.TOKEN_VAR: "x"})
    assert r.returncode == 0, r.stdout + r.stderr


def test_detection_bound_is_fall_checks_each_an_interval_plus_a_timeout():
    # HAProxy 2.6 schedules the next check inter after the previous one ended; a silent server's check
    # fails only at its timeout
    assert FrontSettings(check_interval_s=1.0, fall=2, check_timeout_s=1.0).detection_bound_s() == 4.0
    assert FrontSettings(check_interval_s=2.0, fall=3, check_timeout_s=0.5).detection_bound_s() == 7.5


def test_show_stat_of_a_real_haproxy_reads_servers_zones_and_counters():
    got = frontdoor.parse_show_stat(SHOW_STAT, {"worker-a": "zone-a", "worker-b": "zone-b"})
    assert set(got["servers"]) == {"lb/worker-a", "lb/worker-b", "lb/worker-c"}  # no FRONTEND/BACKEND rows
    a = got["servers"]["lb/worker-a"]
    assert a["status"] == "UP" and a["zone"] == "zone-a" and a["stot"] == 11 and a["lastchg"] == 4
    assert got["servers"]["lb/worker-c"]["zone"] is None  # not in the map: unknown, not guessed
    assert got["totals"] == {"wretr": 0, "wredis": 0, "hrsp_5xx": 0, "econ": 0, "eresp": 0}
    assert got["frontend_5xx"] == 0 and got["own_5xx"] == 0


def test_own_5xx_are_the_frontends_minus_what_the_servers_answered():
    text = SHOW_STAT.replace("fe-lb,FRONTEND,", "fe-lb,FRONTEND,")
    rows = text.splitlines()
    head = rows[0].lstrip("# ").split(",")
    i5 = head.index("hrsp_5xx")

    def set5(row, n):
        cells = row.split(",")
        cells[i5] = str(n)
        return ",".join(cells)
    rows = [set5(r, 7) if r.startswith("fe-lb,FRONTEND") else set5(r, 2) if r.startswith("be-lb,worker-a") else r
            for r in rows]
    got = frontdoor.parse_show_stat("\n".join(rows))
    assert got["frontend_5xx"] == 7 and got["totals"]["hrsp_5xx"] == 2 and got["own_5xx"] == 5


# ---------------------------------------------------------------- per fault
def front(statuses: dict[str, str], lastchg: int = 0, wretr: int = 0, wredis: int = 0, own: int = 0, econ: int = 0):
    servers = {f"lb/{n}": {"status": st, "zone": f"zone-{n[-1]}", "lastchg": lastchg, "wretr": 0, "wredis": 0,
                           "hrsp_5xx": 0, "econ": 0, "eresp": 0, "chkdown": 0, "stot": 0}
               for n, st in statuses.items()}
    servers["lb/worker-a"].update(wretr=wretr, wredis=wredis, econ=econ)
    return {"servers": servers, "totals": {"wretr": wretr, "wredis": wredis, "hrsp_5xx": 0, "econ": econ, "eresp": 0},
            "frontend_5xx": own, "own_5xx": own}


def sample(t_s: float, fr):
    return rec.Sample(t_ns=T0 + int(t_s * NS), took_s=0.01, gcs_ok=True, gcs_latency_s=0.01, controller_ok=True,
                      app_status="RUNNING", replicas={"D": {"zone-a": 1}}, nodes_alive={"zone-a": 1}, front=fr)


UP3 = {"worker-a": "UP", "worker-b": "UP", "worker-c": "UP"}
B_DOWN = {**UP3, "worker-b": "DOWN"}


def test_detection_is_when_haproxy_marked_the_server_down_within_the_sampling_interval():
    t0 = T0 + 10 * NS
    ss = [sample(9.5, front(UP3, lastchg=30)),
          sample(10.5, front({**UP3, "worker-b": "UP 1/2"}, lastchg=0)),  # one check failed: still in rotation
          sample(13.0, front(B_DOWN, lastchg=1, wretr=4, wredis=4, own=2, econ=3)),  # DOWN for ~1 s
          sample(25.0, front(B_DOWN, lastchg=13, wretr=4, wredis=4, own=2, econ=3)),
          sample(31.5, front({**UP3, "worker-b": "UP"}, lastchg=2, wretr=5, wredis=5, own=2, econ=3))]
    um: dict = {}
    got = frontdoor.fault_figures(t0, T0 + 40 * NS, ss, um)
    # DOWN seen at 13.0 with lastchg 1 s: it happened at 12.0 s (after the previous sample at 10.5)
    assert got["servers_down"] == [{"server": "lb/worker-b", "zone": "zone-b", "down_s": 2.0, "up_s": 19.5}]
    assert got["time_to_detect_s"] == 2.0
    assert (got["retries"], got["redispatches"], got["own_5xx"], got["connection_errors"]) == (5, 5, 2, 3)
    assert got["retried"] == 10
    assert um == {}


def test_a_server_that_goes_down_twice_is_listed_twice_and_detection_is_the_first():
    # measured in a zone partition (2026-12-03): DOWN at 3.5 s, UP at 21.5 s, DOWN again at 32.5 s
    t0 = T0 + 10 * NS
    c_down = {**UP3, "worker-c": "DOWN"}
    ss = [sample(9.5, front(UP3)), sample(13.5, front(c_down)), sample(30.5, front({**UP3, "worker-c": "DOWN 1/2"})),
          sample(31.5, front(UP3)), sample(42.5, front(c_down)), sample(45.5, front(UP3))]
    got = frontdoor.fault_figures(t0, T0 + 50 * NS, ss, {})
    assert [(x["server"], x["down_s"], x["up_s"]) for x in got["servers_down"]] == [
        ("lb/worker-c", 3.5, 21.5), ("lb/worker-c", 32.5, 35.5)]
    assert got["time_to_detect_s"] == 3.5


def test_a_status_change_older_than_the_previous_sample_is_clamped_to_it():
    # the sampler fell behind: DOWN seen at 15.5 s, HAProxy says 15 s ago; the previous sample (at 12 s) saw UP
    t0 = T0 + 10 * NS
    ss = [sample(9.5, front(UP3)), sample(12.0, front(UP3)), sample(15.5, front(B_DOWN, lastchg=15))]
    um: dict = {}
    got = frontdoor.fault_figures(t0, T0 + 30 * NS, ss, um)
    assert got["servers_down"][0]["down_s"] == 2.0 and got["servers_down"][0]["up_s"] is None
    assert got["time_to_detect_s"] == 2.0 and um == {}


def test_a_gap_in_the_reads_before_the_first_down_makes_the_detection_unmeasurable():
    # 8 s unread before the DOWN was seen: worker-b could have gone DOWN and UP again inside the gap
    t0 = T0 + 10 * NS
    ss = [sample(9.5, front(UP3)), sample(12.0, front(UP3)), sample(20.0, front(B_DOWN, lastchg=15))]
    um: dict = {}
    got = frontdoor.fault_figures(t0, T0 + 30 * NS, ss, um)
    assert got["servers_down"][0]["down_s"] == 2.0  # the episode is still listed, as seen
    assert got["time_to_detect_s"] is None and "not read for 8.0 s" in um["front_door.time_to_detect_s"]


def test_samples_belong_to_the_window_by_their_read_instant():
    # a sample started before the injection but read after it is the window's, not the reference before it
    t0 = T0 + 10 * NS
    before = front(UP3)
    before["t_ns"] = T0 + int(9.6 * NS)
    straddling = front(B_DOWN, lastchg=0, wretr=3)
    straddling["t_ns"] = T0 + int(10.4 * NS)
    ss = [sample(9.5, before), sample(9.9, straddling)]
    got = frontdoor.fault_figures(t0, T0 + 30 * NS, ss, {})
    assert got["time_to_detect_s"] == 0.4 and got["retries"] == 3


def test_no_server_down_leaves_detection_null_with_the_reason_and_counts_still_measured():
    ss = [sample(9.5, front(UP3)), sample(11.0, front(UP3, wretr=2, wredis=2))]
    um: dict = {}
    got = frontdoor.fault_figures(T0 + 10 * NS, T0 + 20 * NS, ss, um)
    assert got["time_to_detect_s"] is None and got["servers_down"] == []
    assert "no server went DOWN" in um["front_door.time_to_detect_s"]
    assert got["retries"] == 2  # a replica kill: the proxies stay UP but the balancer retried


def test_a_server_already_down_before_the_injection_is_not_this_faults_detection():
    ss = [sample(9.5, front(B_DOWN, lastchg=50)), sample(11.0, front(B_DOWN, lastchg=52))]
    um: dict = {}
    got = frontdoor.fault_figures(T0 + 10 * NS, T0 + 20 * NS, ss, um)
    assert got["time_to_detect_s"] is None and "already DOWN before" in um["front_door.time_to_detect_s"]


def test_no_balancer_in_the_run_is_none_and_an_unsampled_window_is_unmeasurable():
    no_front = [sample(9.0, None), sample(11.0, None)]
    assert frontdoor.fault_figures(T0 + 10 * NS, T0 + 20 * NS, no_front, {}) is None
    um: dict = {}
    got = frontdoor.fault_figures(T0 + 10 * NS, T0 + 20 * NS, [sample(9.0, front(UP3))], um)
    assert got["retries"] is None and got["time_to_detect_s"] is None and "not sampled" in um["front_door"]
    um = {}
    got = frontdoor.fault_figures(T0 + 10 * NS, T0 + 20 * NS, [sample(11.0, front(B_DOWN))], um)
    assert got["retries"] is None and "before the injection" in um["front_door.retries"]


def zonal_front(statuses: dict[str, str], lastchg: int = 0):
    """zonal-lb: each zone's backend has its own proxy as primary and the others as backup entries."""
    servers = {}
    for own in statuses:
        for n, st in statuses.items():
            servers[f"lb-zone-{own[-1]}/{n}"] = {"status": st, "zone": f"zone-{n[-1]}", "backup": n != own,
                                                 "lastchg": lastchg if n != own else lastchg + 1, "wretr": 0,
                                                 "wredis": 0, "hrsp_5xx": 0, "econ": 0, "eresp": 0, "chkdown": 0,
                                                 "stot": 0}
    return {"servers": servers, "totals": {k: 0 for k in ("wretr", "wredis", "hrsp_5xx", "econ", "eresp")},
            "frontend_5xx": 0, "own_5xx": 0}


def test_zonal_lb_lists_a_dead_proxy_once_from_its_own_zones_balancer_not_its_backup_entries():
    # the backup entries of the other zones' balancers have checks of their own (here they saw it first):
    # they carry no traffic while their own zone's proxy is up, so they are neither episodes nor detection
    t0 = T0 + 10 * NS
    ss = [sample(9.5, zonal_front(UP3)), sample(13.0, zonal_front(B_DOWN, lastchg=1))]
    got = frontdoor.fault_figures(t0, T0 + 30 * NS, ss, {})
    assert got["servers_down"] == [{"server": "lb-zone-b/worker-b", "zone": "zone-b", "down_s": 1.0, "up_s": None}]
    assert got["time_to_detect_s"] == 1.0  # the primary's lastchg (2 s ago), not the backups' (1 s)


def test_parse_reads_the_backup_column():
    text = SHOW_STAT.splitlines()
    head = text[0].lstrip("# ").split(",")
    ib = head.index("bck")
    rows = []
    for r in text:
        cells = r.split(",")
        if r.startswith("be-lb,worker-c"):
            cells[ib] = "1"
        rows.append(",".join(cells))
    got = frontdoor.parse_show_stat("\n".join(rows))
    assert got["servers"]["lb/worker-c"]["backup"] is True and got["servers"]["lb/worker-a"]["backup"] is False


def test_the_instant_counts_back_from_when_the_stats_were_read_not_from_the_samples_start():
    # the sample's instant is taken before its dashboard probes (2 s here); HAProxy's lastchg counts from
    # the read. Counting from the sample's start would put the DOWN before the injection (negative).
    t0 = T0 + 10 * NS
    before = front(UP3)
    before["t_ns"] = T0 + int(9.9 * NS)
    after = front(B_DOWN, lastchg=1)
    after["t_ns"] = T0 + int(12.3 * NS)
    ss = [sample(9.8, before), sample(10.3, after)]
    got = frontdoor.fault_figures(t0, T0 + 30 * NS, ss, {})
    assert got["time_to_detect_s"] == 1.3  # 12.3 - 1, not 10.3 - 1 = -0.7 clamped to -0.1


def test_a_value_is_never_given_with_a_reason():
    # worker-b DOWN before the injection, worker-c goes DOWN in the window: detection is worker-c's, no reason
    t0 = T0 + 10 * NS
    c_and_b = {**B_DOWN, "worker-c": "DOWN"}
    ss = [sample(9.5, front(B_DOWN, lastchg=50)), sample(13.0, front(c_and_b, lastchg=1))]
    um: dict = {}
    got = frontdoor.fault_figures(t0, T0 + 30 * NS, ss, um)
    assert got["time_to_detect_s"] == 2.0 and [x["server"] for x in got["servers_down"]] == ["lb/worker-c"]
    assert um == {}


def test_down_at_the_first_read_with_none_before_says_so():
    um: dict = {}
    got = frontdoor.fault_figures(T0 + 10 * NS, T0 + 20 * NS, [sample(11.0, front(B_DOWN, lastchg=1))], um)
    assert got["time_to_detect_s"] is None
    assert "DOWN at the first read after the injection" in um["front_door.time_to_detect_s"]


def test_counters_that_went_down_are_unmeasurable_never_negative():
    # HAProxy restarted between the reads: its counters start again from 0
    t0 = T0 + 10 * NS
    um: dict = {}
    ss = [sample(9.5, front(UP3, wretr=50, wredis=40, own=9)), sample(11.0, front(UP3, wretr=1, own=0))]
    got = frontdoor.fault_figures(t0, T0 + 20 * NS, ss, um)
    assert all(got[k] is None for k in ("retries", "redispatches", "retried", "own_5xx", "server_5xx",
                                        "connection_errors", "response_errors")), got
    assert "counters went down" in um["front_door.retries"]


def test_own_5xx_is_the_change_at_the_frontends_minus_the_change_at_the_servers_clamped_once():
    t0 = T0 + 10 * NS
    a, b = front(UP3), front(UP3)
    a.update(frontend_5xx=3, totals={**a["totals"], "hrsp_5xx": 3})  # 3 server 5xx before
    b.update(frontend_5xx=10, totals={**b["totals"], "hrsp_5xx": 5})  # +7 at the frontends, +2 from servers
    got = frontdoor.fault_figures(t0, T0 + 20 * NS, [sample(9.5, a), sample(11.0, b)], {})
    assert (got["own_5xx"], got["server_5xx"]) == (5, 2)
    b.update(frontend_5xx=4)  # a server's 5xx counted, its stream not closed yet at the frontend: 1 - 2 -> 0
    got = frontdoor.fault_figures(t0, T0 + 20 * NS, [sample(9.5, a), sample(11.0, b)], {})
    assert got["own_5xx"] == 0 and got["server_5xx"] == 2


def test_a_balancer_whose_stats_were_never_read_is_every_figure_null_with_the_reason():
    ss = [sample(9.0, None), sample(11.0, None)]
    for s_ in ss:
        s_.errors = {"front": "the balancer's stats socket did not answer"}
    um: dict = {}
    got = frontdoor.fault_figures(T0 + 10 * NS, T0 + 20 * NS, ss, um)
    assert got is not None and all(v in (None, []) for v in got.values())
    assert "never read" in um["front_door"] and "did not answer" in um["front_door"]


def test_the_report_says_which_front_door_had_no_figures():
    from chaos.reports import report

    f = {"front_door": None, "unmeasurable": {}}
    (row,) = report.front_door_rows(f, {"kind": "kubernetes-service", "shape": "lb", "service": "svc"})
    assert "Kubernetes Service svc" in row[2] and "direct" not in row[2]
    (row,) = report.front_door_rows(f, {"shape": "lb", "settings": {}})
    assert "no read of its counters" in row[2]
    (row,) = report.front_door_rows(f, {"shape": "direct"})
    assert "front direct" in row[2]
    notes = report.not_covered({"environment": {"front_door": {"kind": "kubernetes-service", "shape": "lb",
                                                               "service": "svc"}}})
    assert any("Kubernetes Service svc" in n for n in notes) and not any("HAProxy" in n for n in notes)


# ---------------------------------------------------------------- replacement (upgrades)
def ids_sample(t_s: float, ids, ok=True):
    s = sample(t_s, None)
    s.replica_ids = None if ids is None else {"D": sorted(ids)}
    s.controller_ok = ok
    return s


def test_replacement_follows_each_old_replica_out_and_each_new_one_in():
    t0 = T0 + 10 * NS
    ss = [ids_sample(9.5, "abc"), ids_sample(12.0, "abcd"), ids_sample(14.0, "bcd"), ids_sample(15.0, "x", ok=False),
          ids_sample(20.0, "cde"), ids_sample(30.0, "def"), ids_sample(31.0, "def")]
    um: dict = {}
    got = planes.replacement(t0, [s for s in ss if s.t_ns < t0], [s for s in ss if s.t_ns >= t0], um)
    assert got["replicas_before"] == 3 and got["replaced"] == 3
    assert [(x["replica"], x["running_s"]) for x in got["new"]] == [("d", 2.0), ("e", 10.0), ("f", 20.0)]
    assert all(x["scheduled_s"] is None and x["start_s"] is None for x in got["new"])  # never seen starting
    assert got["gone"] == [{"replica": "a", "gone_s": 4.0}, {"replica": "b", "gone_s": 10.0},
                           {"replica": "c", "gone_s": 20.0}]
    assert got["time_to_complete_s"] == 20.0 and um == {}  # the sample the controller did not answer is skipped


def test_a_replacement_says_when_it_was_scheduled_and_how_long_it_took_to_start():
    """Scheduled: first seen STARTING (a vLLM engine starting); start = running - scheduled. A replica
    scheduled in the last sample before the window counts from there; an old id starting is no new one."""
    t0 = T0 + 10 * NS
    ss = [ids_sample(9.5, "abc"), ids_sample(12.0, "bc"), ids_sample(13.0, "bc"), ids_sample(100.0, "bcd")]
    ss[1].starting_ids = {"D": ["d"]}
    ss[2].starting_ids = {"D": ["d", "b"]}
    got = planes.replacement(t0, ss[:1], ss[1:], {})
    assert got["new"] == [{"replica": "d", "running_s": 90.0, "scheduled_s": 2.0, "start_s": 88.0}]
    ss[0].starting_ids = {"D": ["d"]}  # already scheduled at the last sample before the injection
    assert planes.replacement(t0, ss[:1], ss[1:], {})["new"][0]["scheduled_s"] == -0.5


def test_an_upgrade_that_did_not_finish_or_fewer_replicas_is_not_complete():
    t0 = T0 + 10 * NS
    um: dict = {}
    got = planes.replacement(t0, [ids_sample(9.0, "abc")], [ids_sample(11.0, "bcd"), ids_sample(12.0, "cde")], um)
    assert got["time_to_complete_s"] is None and got["replaced"] == 2 and "2 of 3" in um["replacement.time_to_complete_s"]
    um = {}
    got = planes.replacement(t0, [ids_sample(9.0, "abc")], [ids_sample(11.0, "de")], um)  # all new, one short
    assert got["time_to_complete_s"] is None and got["replaced"] == 3


def test_completion_of_a_fault_that_is_not_an_upgrade_is_not_applicable_not_a_failed_upgrade():
    t0 = T0 + 10 * NS
    um: dict = {}
    got = planes.replacement(t0, [ids_sample(9.0, "abc")], [ids_sample(11.0, "bcd")], um, scope="replica")
    assert got["replaced"] == 1 and got["time_to_complete_s"] is None
    assert um["replacement.time_to_complete_s"].startswith("not applicable: a replica fault")
    um = {}
    planes.replacement(t0, [ids_sample(9.0, "abc")], [ids_sample(11.0, "bcd")], um, scope="upgrade")
    assert um["replacement.time_to_complete_s"].startswith("not every replica")


def test_replacement_without_ids_is_unmeasurable_not_zero():
    um: dict = {}
    got = planes.replacement(T0, [ids_sample(-1, None)], [ids_sample(1, None)], um)
    assert got["replaced"] is None and got["time_to_complete_s"] is None and "ids" in um["replacement"]


# ---------------------------------------------------------------- in the report
def test_the_report_shows_the_balancers_figures_as_the_summary_has_them():
    from chaos.reports import report

    f = {"scope": "node", "unmeasurable": {}, "front_door": {
        "servers_down": [{"server": "lb/worker-b", "zone": "zone-b", "down_s": 1.988, "up_s": None}],
        "time_to_detect_s": 1.988, "retries": 4, "redispatches": 3, "retried": 7, "own_5xx": 5, "server_5xx": 0,
        "connection_errors": 5, "response_errors": 1}}
    rows = {r[1]: r[2] for r in report.front_door_rows(f)}
    assert rows["time to detect s (first server marked DOWN)"] == report.fmt(1.988)
    assert "lb/worker-b (zone-b) DOWN at" in rows["servers taken out of rotation"]
    assert "not UP in the window" in rows["servers taken out of rotation"]
    assert rows["extra attempts after a failed one (hidden from the client if they succeeded)"] == "7"
    assert rows["of them to the same server (wretr)"] == "4"
    assert rows["5xx answered by the balancer itself"] == "5"
    # no balancer: said, never a row of zeros
    (row,) = report.front_door_rows({"front_door": None, "unmeasurable": {}})
    assert "front direct" in row[2]
    um = {"front_door.time_to_detect_s": "no server went DOWN in the window"}
    f2 = {"unmeasurable": um, "front_door": {**f["front_door"], "servers_down": [], "time_to_detect_s": None}}
    rows = {r[1]: r[2] for r in report.front_door_rows(f2)}
    assert rows["time to detect s (first server marked DOWN)"] == "unmeasurable: no server went DOWN in the window"


def test_the_report_shows_an_upgrades_replacement():
    from chaos.reports import report

    f = {"scope": "upgrade", "unmeasurable": {}, "replacement": {
        "replicas_before": 3, "replaced": 3, "new": [{"replica": "abcdefghij", "running_s": 11.45}],
        "gone": [], "time_to_complete_s": 26.45}}
    rows = {r[1]: r[2] for r in report.replacement_rows(f)}
    assert rows["replicas serving before"] == "3" and rows["of them replaced by the window's end"] == "3"
    assert rows["new replicas serving (s from injection)"] == f"abcdefgh at {report.fmt(11.45)}"
    assert rows["complete (no old replica, as many new, the new version serving) s"] == report.fmt(26.45)
    assert report.replacement_rows({**f, "scope": "node", "replacement": {**f["replacement"], "replaced": 0}}) == []


def test_the_suite_runs_each_experiment_once_per_front_door_side_by_side(monkeypatch, tmp_path):
    import json as _json

    from chaos.commands import cli
    from chaos.commands import runs

    calls = []

    def fake_run(path, out, args, front=None, prometheus_url=None, spec=None):
        assert spec.settings.front == front  # the file parsed once, the run's front door derived from it
        calls.append((Path(path).stem, out.name, front))
        return {"experiment": path, "verdict": 0 if front == "lb" else 1, "error": "x", "summary": None}

    monkeypatch.setattr(runs, "_run_one", fake_run)
    monkeypatch.setattr(runs, "write_report", lambda out: None)
    monkeypatch.setattr(runs, "cmd_cluster_down", lambda args: 0)
    rc = cli.main(["suite", "--only", "worker-node-kill", "zone-loss", "--front", "lb,direct", "--out", str(tmp_path)])
    assert calls == [("worker-node-kill", "worker-node-kill@lb", "lb"), ("worker-node-kill", "worker-node-kill@direct",
                                                                          "direct"),
                     ("zone-loss", "zone-loss@lb", "lb"), ("zone-loss", "zone-loss@direct", "direct")]
    assert _json.loads((tmp_path / "suite.json").read_text())["experiments"] == [c[1] for c in calls]
    assert rc == 1  # the worst verdict
    calls.clear()
    cli.main(["suite", "--only", "zone-loss", "--front", "zonal-lb", "--out", str(tmp_path / "one")])
    assert calls == [("zone-loss", "zone-loss", "zonal-lb")]  # one front: the usual directory names
    assert cli.main(["suite", "--front", "lb,lb"]) == 2
    assert cli.main(["suite", "--front", "lb,nginx"]) == 2
    assert calls == [("zone-loss", "zone-loss", "zonal-lb")]  # nothing ran
