"""The front door: what stands between the client and the Serve proxies, and what it hid.

Users do not send to three proxy addresses: a load balancer sits in front, health-checks the
proxies and takes a dead one out of rotation after its detection delay; with retries on, it
also hides failures (a request retried on another proxy and answered is invisible to every
client). Three shapes (an experiment's ``front``):

- ``direct``: the client picks the proxies itself (round robin), with no health checks: a dead
  zone keeps its share of the traffic until its proxy is back.
- ``lb``: one balancer over every zone's proxy (a cloud LB, or a Kubernetes Service whose
  endpoints follow readiness).
- ``zonal-lb``: one balancer per zone, its own zone's proxy first and the other zones'
  proxies as backup (used only when the own one is down), as multi-AZ deployments do; the
  client of a zone sends to its zone's balancer, so requests keep their zone.

This module is plain Python: the balancer's settings (:class:`FrontSettings`), HAProxy's
configuration rendered from them (:func:`haproxy_config`), its ``show stat`` CSV read into one
sample (:func:`parse_show_stat`), and per fault what the balancer did (:func:`fault_figures`).
The process itself is :mod:`chaos.backends.local.haproxy`.

Per fault (``front_door`` in each fault of ``summary.json``), from the samples of the balancer's
own counters taken with the control-plane samples (:mod:`chaos.system.sampler`):

- ``servers_down``: every time a server went DOWN in the fault's window (a server that went
  twice is listed twice): its zone, the instant HAProxy marked it DOWN (``down_s``) and UP again
  (``up_s``; null if not in the window). Only servers in rotation count: in ``zonal-lb`` each
  proxy is also a backup server of the other zones' balancers, with checks of its own; those
  backup entries are not listed (one dead proxy is one entry, its own zone's). The instant is
  when the stats were read (``front["t_ns"]``, stamped as the socket answered) minus HAProxy's own
  seconds since the last status change (``lastchg``, whole seconds, so up to 1 s late), clamped to
  the previous read: exact to HAProxy's 1 s resolution or the sampling period, whichever is finer.
  Samples belong to the window by their read instant too.
- ``time_to_detect_s``: the first ``down_s`` (the balancer's time to detect); null with the
  reason when no server went DOWN (e.g. a replica kill: every proxy stays healthy), or when the
  stats went unread for more than ``MAX_READ_GAP_S`` (4 s) before that DOWN was seen (a DOWN that
  came back within the gap would be missed).
- ``retries``, ``redispatches``: HAProxy's ``wretr`` / ``wredis`` summed over the servers,
  from the last sample before the injection to the last sample in the window. HAProxy counts a
  retry sent to the same server in ``wretr`` and one sent to another server (``option
  redispatch``) in ``wredis`` only (measured on 2.6: a node kill with ``retries 2`` gave 0 / 6).
- ``retried``: ``retries + redispatches``, the extra attempts the balancer made after a failed
  one. HAProxy counts per attempt, not per request: a request retried twice counts twice, and one
  whose every attempt failed counts too (the client saw its 5xx). So ``retried`` bounds from above
  the failures the client never saw; ``retried`` > 0 with 0 client failures means they were hidden.
- ``own_5xx``: responses the balancer answered itself with a 5xx (no server available, a
  server that failed mid-request: 502, 503, 504), the change in the frontends' ``hrsp_5xx``
  minus the change in the servers' (clamped at 0 once: a server counts a 5xx when its headers
  arrive, a frontend when the stream closes), and ``server_5xx``: 5xx answers of the proxies
  passed through.
- ``connection_errors``, ``response_errors``: ``econ`` / ``eresp`` summed over the servers.

Every count is a difference of two reads of HAProxy's counters. A counter that went down between
them (HAProxy restarted) makes the counts null with the reason, never a negative number. A run
with a balancer whose stats socket never answered has every figure null with the reason; a run
without a balancer of the rig's has ``front_door`` null.
"""

from __future__ import annotations

import csv
import io
from dataclasses import asdict, dataclass, field
from typing import Any

FRONTS = ("direct", "lb", "zonal-lb")  # an experiment's ``front`` / ``--front``: the one list (cli, options)
NS = 1_000_000_000
TOKEN_VAR = "AVAILPROOF_FRONT_TOKEN"  # the balancer's environment variable holding the expected token
# what a refused request is told to send (RFC 9110 §11.6.1: a 401 carries at least one challenge; RFC 6750 §3)
AUTH_CHALLENGE = 'Bearer realm="availproof"'


@dataclass(frozen=True)
class FrontSettings:
    """How the balancer checks, retries and listens (an experiment's ``front_door`` block)."""

    check_interval_s: float = 1.0  # active check period (HAProxy ``inter``)
    fall: int = 2  # consecutive failed checks before a server is DOWN
    rise: int = 2  # consecutive passed checks before it is UP again
    check_timeout_s: float = 1.0  # a check that takes longer failed (``timeout check``)
    passive: bool = False  # also mark a server down on observed layer-7 errors
    passive_error_limit: int = 5  # consecutive errors that do it (``observe layer7 error-limit``)
    retries: int = 0  # times a request is sent again after a connection failure or an empty answer
    redispatch: bool = True  # a retry goes to another server (``option redispatch 1``)
    tls: bool = False  # terminate TLS with a certificate the rig makes for the run
    token_env: str | None = None  # environment variable holding the bearer token the balancer requires
    timeout_s: float = 60.0  # idle time allowed on the client and server sides (longer than a stream's gaps)

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "FrontSettings":
        return cls(**(d or {}))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def detection_bound_s(self) -> float:
        """The longest a dead server stays in rotation: ``fall`` failed checks. HAProxy (2.6)
        schedules a check ``inter`` after the previous one finished, and a check that gets no
        answer fails after ``timeout check`` (a refused connection fails at once): up to
        ``fall x (inter + check timeout)``, 4 s with the defaults (a blackholed zone; a killed
        one refuses and is out within ``fall x inter``)."""
        return self.fall * (self.check_interval_s + self.check_timeout_s)


@dataclass
class Server:
    name: str  # the node whose proxy it is
    zone: str | None
    host: str
    port: int


@dataclass
class Listener:
    """One frontend the client sends to: ``zone`` is the zone it prefers (zonal-lb), else None."""

    name: str
    host: str
    port: int
    zone: str | None = None
    servers: list[str] = field(default_factory=list)  # backend servers, in preference order
    backup: list[str] = field(default_factory=list)  # used only when every other one is DOWN


def listeners(shape: str, servers: list[Server], host: str, ports: list[int]) -> list[Listener]:
    """The frontends of a shape: ``lb`` one over every server, ``zonal-lb`` one per zone."""
    if shape == "lb":
        return [Listener("lb", host, ports[0], None, [s.name for s in servers])]
    if shape == "zonal-lb":
        zones = sorted({s.zone for s in servers if s.zone})
        if len(ports) < len(zones):
            raise ValueError(f"zonal-lb needs one port per zone ({len(zones)}), got {len(ports)}")
        return [Listener(f"lb-{z}", host, ports[i], z, [s.name for s in servers if s.zone == z],
                         [s.name for s in servers if s.zone != z]) for i, z in enumerate(zones)]
    raise ValueError(f"front must be one of lb, zonal-lb (direct has no balancer), got {shape!r}")


def haproxy_config(shape: str, servers: list[Server], listen: list[Listener], settings: FrontSettings,
                   stats_socket: str, pidfile: str, metrics: tuple[str, int], tls_pem: str | None = None) -> str:
    """HAProxy's configuration for ``shape``: one frontend and backend per listener, active HTTP
    checks on the Serve proxy's ``/-/healthz``, optional passive checks, retries and redispatch, a
    stats socket (``show stat``) and a Prometheus endpoint (``/metrics``) on ``metrics``. With a
    bearer token (``token_env``) each frontend refuses a request without it (401 with the challenge
    ``WWW-Authenticate: Bearer realm="availproof"``) and removes the ``Authorization`` header from the
    ones it lets through: the token is not forwarded to Serve."""
    s = settings
    ms = lambda sec: f"{int(round(sec * 1000))}ms"  # noqa: E731
    by_name = {x.name: x for x in servers}
    lines = [
        "# written by availproof for one run's front door; do not edit (it is rewritten at each start)",
        "global",
        f"    stats socket {stats_socket} mode 600 level admin",
        f"    pidfile {pidfile}",
        "    maxconn 4096",
        "",
        "defaults",
        "    mode http",
        "    timeout connect 2s",
        f"    timeout client {ms(s.timeout_s)}",
        f"    timeout server {ms(s.timeout_s)}",
        "    timeout queue 5s",
        f"    timeout check {ms(s.check_timeout_s)}",
        f"    retries {s.retries}",
    ]
    if s.retries:
        # no L7 status (503) among them: a server's 5xx then always reaches the client, so the
        # balancer's own 5xx are exactly the frontends' minus the servers' (a retried 503 would be
        # counted by the server and never seen by the client)
        lines.append("    retry-on conn-failure empty-response")
        if s.redispatch:
            lines.append("    option redispatch 1")
    lines += ["", "frontend metrics", f"    bind {metrics[0]}:{metrics[1]}",
              "    http-request use-service prometheus-exporter if { path /metrics }",
              "    stats enable", "    stats uri /stats", "    stats refresh 5s"]
    for lst in listen:
        bind = f"    bind {lst.host}:{lst.port}" + (f" ssl crt {tls_pem}" if tls_pem else "")
        lines += ["", f"frontend fe-{lst.name}", bind]
        if s.token_env:
            # the token stays in the balancer's environment: the config file names the variable only; a 401
            # says how to authenticate (RFC 9110 §11.6.1), so the deny answers with its own body and challenge
            lines.append(f'    http-request deny deny_status 401 content-type text/plain string "unauthorized" '
                         f"hdr WWW-Authenticate '{AUTH_CHALLENGE}' "
                         f'unless {{ req.hdr(authorization) -m str "Bearer ${{{TOKEN_VAR}}}" }}')
            # checked, it is the balancer's alone: the proxies (and the code behind them) never see it
            lines.append("    http-request del-header Authorization")
        lines += [f"    default_backend be-{lst.name}", "", f"backend be-{lst.name}", "    balance roundrobin",
                  "    option httpchk GET /-/healthz", "    http-check expect status 200"]
        if lst.backup:
            lines.append("    option allbackups")
        check = f"check inter {ms(s.check_interval_s)} fall {s.fall} rise {s.rise}"
        if s.passive:
            check += f" observe layer7 error-limit {s.passive_error_limit} on-error mark-down"
        for name in lst.servers + lst.backup:
            srv = by_name[name]
            lines.append(f"    server {name} {srv.host}:{srv.port} {check}" + (" backup" if name in lst.backup else ""))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- the balancer's counters
_COUNTS = ("wretr", "wredis", "hrsp_5xx", "econ", "eresp")  # the counters summed over the servers
_INT_FIELDS = _COUNTS + ("chkdown", "lastchg", "stot")


def _int(v: str) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return 0


def parse_show_stat(text: str, zone_of: dict[str, str | None] | None = None) -> dict[str, Any]:
    """HAProxy's ``show stat`` CSV as one sample: ``servers`` (``backend/server`` -> status, zone,
    lastchg and counters), ``totals`` over the servers, and the frontends' own 5xx."""
    zone_of = zone_of or {}
    rows = list(csv.DictReader(io.StringIO(text.lstrip("# "))))
    servers: dict[str, dict[str, Any]] = {}
    fe_5xx = 0
    for r in rows:
        px, sv = r.get("pxname", ""), r.get("svname", "")
        if sv == "FRONTEND" and px.startswith("fe-"):
            fe_5xx += _int(r.get("hrsp_5xx"))
        elif sv not in ("FRONTEND", "BACKEND") and px.startswith("be-"):
            servers[f"{px[3:]}/{sv}"] = {"status": r.get("status", ""), "zone": zone_of.get(sv),
                                         "backup": _int(r.get("bck")) > 0,
                                         **{k: _int(r.get(k)) for k in _INT_FIELDS}}
    totals = {k: sum(s[k] for s in servers.values()) for k in _COUNTS}
    return {"servers": servers, "totals": totals, "frontend_5xx": fe_5xx,
            "own_5xx": max(0, fe_5xx - totals["hrsp_5xx"])}


def is_down(status: str) -> bool:
    """A server out of rotation: ``DOWN``, ``DOWN 1/2`` (coming back, still out) or ``MAINT``; ``UP 1/2``
    (one check failed, going down) is still in rotation."""
    return status.startswith("DOWN") or status.startswith("MAINT")


def _instant(prev_ns: int | None, now_ns: int, lastchg_s: int) -> int:
    """When the status seen at ``now_ns`` began: ``lastchg`` seconds before it, not before the previous read."""
    at = now_ns - lastchg_s * NS
    return max(at, prev_ns) if prev_ns is not None else at


def _read_ns(sample: Any) -> int:
    """When the balancer's stats were read: stamped as the socket answered (``front["t_ns"]``); a
    sample's own instant is taken before its dashboard probes and can be seconds earlier (runs
    recorded before the stamp existed fall back to it)."""
    return sample.front.get("t_ns") or sample.t_ns


# The longest the balancer's stats may go unread around a detection: a server's shortest DOWN-UP-DOWN
# cycle is (fall + rise) x inter, 4 s with the shipped settings; in a longer gap a first DOWN that came
# back could be missed, and the detection seen would be a later one.
MAX_READ_GAP_S = 4.0


def _no_figures() -> dict[str, Any]:
    """Every figure null (the reasons go to ``unmeasurable``)."""
    return {"servers_down": [], "time_to_detect_s": None, "retries": None, "redispatches": None, "retried": None,
            "own_5xx": None, "server_5xx": None, "connection_errors": None, "response_errors": None}


def fault_figures(t0: int, window_end_ns: int, samples: list[Any], unmeasurable: dict[str, str]) -> dict[str, Any] | None:
    """What the balancer did for one fault (see the module doc); None when the run had no balancer.
    ``samples`` are :class:`chaos.recording.records.Sample` (their ``front`` field)."""
    with_front = [s for s in samples if getattr(s, "front", None)]
    if not with_front:
        unread = [s for s in samples if "front" in (getattr(s, "errors", None) or {})]
        if not unread:
            return None  # no balancer of the rig's in this run
        unmeasurable["front_door"] = f"the balancer's stats were never read: {unread[0].errors['front']}"
        return _no_figures()
    sec = lambda ns: None if ns is None else round((ns - t0) / NS, 3)  # noqa: E731
    # split by when the stats were read (a sample's own instant precedes its reads by up to seconds)
    before = [s for s in with_front if _read_ns(s) < t0]
    window = [s for s in with_front if t0 <= _read_ns(s) < window_end_ns]
    out = _no_figures()
    if not window:
        unmeasurable["front_door"] = "the balancer's counters were not sampled in the fault's window"
        return out
    ref = before[-1] if before else None
    if ref is None:
        unmeasurable["front_door.retries"] = "no sample of the balancer's counters before the injection"
    else:
        a, b = ref.front, window[-1].front
        d = {k: b["totals"][k] - a["totals"][k] for k in _COUNTS}
        d_fe = b["frontend_5xx"] - a["frontend_5xx"]
        if min(*d.values(), d_fe) < 0:
            unmeasurable["front_door.retries"] = ("the balancer's counters went down between the reads before and "
                                                  "after the injection (HAProxy restarted): no count is measurable")
        else:
            out.update(retries=d["wretr"], redispatches=d["wredis"], retried=d["wretr"] + d["wredis"],
                       server_5xx=d["hrsp_5xx"], connection_errors=d["econ"], response_errors=d["eresp"],
                       own_5xx=max(0, d_fe - d["hrsp_5xx"]))
    # server status transitions, from the sample before the injection through the window
    seq = ([ref] if ref is not None else []) + window
    episodes: list[dict[str, Any]] = []  # one per time a server went DOWN (a server can go twice)
    open_: dict[str, dict[str, Any]] = {}
    for prev, cur in zip([None] + seq[:-1], seq):
        for key, srv in cur.front["servers"].items():
            if srv.get("backup"):
                continue  # a zonal balancer's backup entry: not in rotation while its own zone's proxy is up
            was = prev.front["servers"].get(key) if prev is not None else None
            if _read_ns(cur) < t0 or was is None:
                continue
            now_down, was_down = is_down(srv["status"]), is_down(was["status"])
            if now_down and not was_down:
                open_[key] = {"server": key, "zone": srv.get("zone"),
                              "down_s": sec(_instant(_read_ns(prev), _read_ns(cur), srv["lastchg"])), "up_s": None,
                              "read_gap_s": (_read_ns(cur) - _read_ns(prev)) / NS}
                episodes.append(open_[key])
            elif was_down and not now_down and key in open_:
                open_.pop(key)["up_s"] = sec(_instant(_read_ns(prev), _read_ns(cur), srv["lastchg"]))
    out["servers_down"] = sorted(episodes, key=lambda x: x["down_s"])
    if out["servers_down"]:
        first = out["servers_down"][0]
        gap = first.pop("read_gap_s")
        for x in out["servers_down"][1:]:
            x.pop("read_gap_s")
        if gap > MAX_READ_GAP_S:
            unmeasurable["front_door.time_to_detect_s"] = (
                f"the balancer's stats were not read for {gap:.1f} s before {first['server']} was seen DOWN (more "
                f"than {MAX_READ_GAP_S:.0f} s): an earlier DOWN that came back within the gap would be missed")
            return out
        out["time_to_detect_s"] = first["down_s"]
        return out
    # null: say why (a reason only where the figure is null)
    already = ([k for k, srv in ref.front["servers"].items() if not srv.get("backup") and is_down(srv["status"])]
               if ref is not None else [])
    first_down = [k for k, srv in window[0].front["servers"].items() if not srv.get("backup") and is_down(srv["status"])]
    if already:
        why = f"{already[0]} was already DOWN before the injection: not this fault's detection"
    elif ref is None and first_down:
        why = (f"{first_down[0]} was DOWN at the first read after the injection, and there is no read before it: "
               "when it went DOWN is not known")
    else:
        why = ("no server went DOWN in the window: the balancer's checks never failed "
               "(the fault did not take a proxy out, or it was back before fall checks failed)")
    unmeasurable["front_door.time_to_detect_s"] = why
    return out
