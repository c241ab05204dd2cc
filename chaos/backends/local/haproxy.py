"""The local backend's front door: the rig's own HAProxy (Debian's), in front of the zone proxies.

Started from the cluster's state (one backend server per worker node's Serve proxy), on a
loopback address of its own and free ports, with its own configuration file, PID file and stats
socket in the cluster directory; its PID goes in the state file, so ``cluster down`` and
``recover`` remove it. That PID is signalled only while it is still this front door's HAProxy
(:func:`is_ours`: ``haproxy -f`` this front door's configuration file, leading its own session):
once HAProxy exited, its PID can be any other process, which is then left alone and the front
door taken as gone. A system HAProxy that Debian's package may have started is never touched.
In ``--netns`` mode it runs in the root namespace and reaches the zones over their links: a
partitioned zone is cut off from the balancer as well.

The balancer's expected bearer token (``token_env``) is passed in its environment, never
written to its configuration file, under a name of the rig's (:data:`chaos.system.frontdoor.TOKEN_VAR`):
its environment is otherwise the cluster's, without any secret variable (:mod:`chaos.system.secret_env`).
The certificate for TLS is made for the run (:mod:`chaos.system.tls`), with its CA bundle beside it for
the client; :meth:`FrontState.cert_valid_for_s` tells how long it has left, so a front door kept
across runs can be replaced before it expires.
"""

from __future__ import annotations

import math
import random
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field, asdict
from pathlib import Path
from typing import Any, Callable

from chaos.system import frontdoor, secret_env
from chaos.recording import records as rec
from chaos.backends.local import ports as ports_mod, procs
from chaos.base.errors import SetupError, UsageError


CONFIG_FILE = "haproxy.cfg"
# a front door kept across runs (chaos.core.provision.ensure_front) whose certificate expires within this
# is replaced, not reused: a run must not see its TLS handshakes start failing half-way
CERT_RENEW_WITHIN_S = 24 * 3600.0


def haproxy_binary() -> str:
    path = shutil.which("haproxy") or ("/usr/sbin/haproxy" if Path("/usr/sbin/haproxy").exists() else None)
    if not path:
        raise SetupError("haproxy not found: install it (Debian: apt-get install -y haproxy), or run with "
                         "--front direct")
    return path


@dataclass
class FrontState:
    """What was started, in the cluster's state file."""

    shape: str
    dir: str
    host: str
    listeners: list[dict[str, Any]]  # frontdoor.Listener as dicts
    metrics_port: int
    settings: dict[str, Any]
    pid: int | None = None
    ca_bundle: str | None = None  # the run's CA, for the client (TLS only)
    servers: dict[str, str | None] = field(default_factory=dict)  # server (node) -> zone

    @property
    def stats_socket(self) -> str:
        return str(Path(self.dir) / "stats.sock")

    @property
    def config_path(self) -> str:
        return str(Path(self.dir) / CONFIG_FILE)

    def cert_valid_for_s(self, now: float | None = None) -> float:
        """Seconds the TLS certificate stays valid from ``now`` (epoch seconds; default: now):
        negative once expired, 0 when it cannot be read (nothing vouches for it), infinite
        without TLS (nothing expires)."""
        if not self.settings.get("tls"):
            return math.inf
        from chaos.system import tls

        not_after = tls.not_valid_after(Path(self.dir) / tls.SERVER_PEM)
        if not_after is None:
            return 0.0
        return not_after - (time.time() if now is None else now)

    @property
    def scheme(self) -> str:
        return "https" if self.settings.get("tls") else "http"

    def urls(self) -> list[tuple[str, str, str | None]]:
        """(name, URL, zone) of every listener: what the client sends to."""
        return [(lst["name"], f"{self.scheme}://{lst['host']}:{lst['port']}", lst.get("zone"))
                for lst in self.listeners]

    @property
    def metrics_url(self) -> str:
        return f"http://{self.host}:{self.metrics_port}/metrics"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _free_ports(host: str, n: int) -> list[int]:
    out: list[int] = []
    while len(out) < n:
        p = ports_mod.free_port(host)
        if p not in out:
            out.append(p)
    return out


def start(shape: str, servers: list[frontdoor.Server], settings: frontdoor.FrontSettings, cluster_dir: Path,
          host: str | None = None, token: str | None = None, env: dict[str, str] | None = None) -> FrontState:
    """Write the configuration, start HAProxy in a session of its own, wait until it answers.
    ``token``: the bearer token the balancer requires (``settings.token_env`` names where the
    client reads it); passed in HAProxy's environment only, as ``TOKEN_VAR``. ``env``: the rest
    of its environment (the cluster's), else this process's without secrets; either way without
    any secret variable, ``settings.token_env`` included."""
    if settings.token_env and not token:
        raise UsageError(f"the front door requires a bearer token but ${settings.token_env} is not set")
    binary = haproxy_binary()
    d = Path(cluster_dir) / "front"
    shutil.rmtree(d, ignore_errors=True)
    d.mkdir(parents=True)
    rng = random.Random()
    host = host or f"127.{rng.randrange(1, 255)}.{rng.randrange(0, 256)}.250"
    zones = sorted({s.zone for s in servers if s.zone})
    n = 1 if shape == "lb" else len(zones)
    ports = _free_ports(host, n + 1)
    listen = frontdoor.listeners(shape, servers, host, ports[:n])
    pem = ca = None
    if settings.tls:
        from chaos.system import tls

        pem, ca = tls.make_certificate(d, host)
    st = FrontState(shape=shape, dir=str(d), host=host, listeners=[asdict(x) for x in listen],
                    metrics_port=ports[n], settings=settings.to_dict(), ca_bundle=ca,
                    servers={s.name: s.zone for s in servers})
    cfg = frontdoor.haproxy_config(shape, servers, listen, settings, st.stats_socket, str(d / "haproxy.pid"),
                                   (host, ports[n]), tls_pem=pem)
    Path(st.config_path).write_text(cfg)
    env = secret_env.child_env([settings.token_env], base=env)
    if token:
        env[frontdoor.TOKEN_VAR] = token
    check = subprocess.run([binary, "-c", "-q", "-f", st.config_path], env=env, capture_output=True, text=True)
    if check.returncode != 0:
        raise SetupError(f"haproxy refused its configuration: {(check.stderr or check.stdout).strip()[:300]}")
    log = open(d / "haproxy.log", "ab")
    proc = subprocess.Popen([binary, "-db", "-f", st.config_path], stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True, env=env)
    log.close()
    st.pid = proc.pid
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = (d / "haproxy.log").read_text(errors="replace").strip().splitlines()[-2:]
            raise SetupError(f"haproxy exited with {proc.returncode}: {' '.join(tail)}")
        if show_stat(st) is not None:
            return st
        time.sleep(0.05)
    procs.stop_pid(proc.pid)
    raise SetupError("haproxy did not answer on its stats socket within 10 s")


def is_ours(st: FrontState, pid: int) -> bool:
    """``pid`` is this front door's HAProxy: ``haproxy`` run with this front door's configuration
    file (``-f DIR/haproxy.cfg``: no other front door, and no system HAProxy, has that file), in
    the session it was started in (its own)."""
    args = procs.argv(pid)
    return (bool(args) and Path(args[0]).name == "haproxy" and ("-f", st.config_path) in zip(args, args[1:])
            and procs.session_of(pid) == pid)


def stop(st: FrontState | None, log: Callable[[str], None] = lambda msg: None) -> None:
    """Stop the rig's HAProxy by its PID, only while that PID is still this front door's HAProxy
    (:func:`is_ours`, checked before each signal), and remove its files. A PID that now names
    another process is not signalled: the front door is gone, and ``log`` says so."""
    if st is None:
        return
    if st.pid and procs.alive(st.pid):
        if is_ours(st, st.pid):
            procs.stop_pid(st.pid, timeout=5, same=lambda pid: is_ours(st, pid))
        else:
            log(f"front door: pid {st.pid} is no longer its HAProxy ({procs.cmdline(st.pid)[:80] or '?'}): "
                "not signalled, taken as gone")
    shutil.rmtree(st.dir, ignore_errors=True)


def alive(st: FrontState | None) -> bool:
    """The front door's HAProxy runs: its PID is alive and still this front door's HAProxy."""
    return bool(st and st.pid and procs.alive(st.pid) and is_ours(st, st.pid))


def _ask(sock_path: str, command: str, timeout: float) -> str | None:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(sock_path)
            s.sendall(command.encode() + b"\n")
            chunks = []
            while True:
                b = s.recv(65536)
                if not b:
                    break
                chunks.append(b)
        return b"".join(chunks).decode(errors="replace")
    except OSError:
        return None


def show_stat(st: FrontState, timeout: float = 1.0) -> dict[str, Any] | None:
    """One sample of the balancer's servers and counters (:func:`chaos.system.frontdoor.parse_show_stat`),
    or None when it does not answer."""
    text = _ask(st.stats_socket, "show stat", timeout)
    read_ns = rec.now_ns()  # lastchg counts back from this instant, not from the sample's start
    if not text or "pxname" not in text:
        return None
    return {**frontdoor.parse_show_stat(text, st.servers), "t_ns": read_ns}
