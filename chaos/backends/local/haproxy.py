"""The local backend's front door: the rig's own HAProxy (Debian's), in front of the zone proxies.

Started from the cluster's state (one backend server per worker node's Serve proxy), on a
loopback address of its own and free ports, with its own configuration file, PID file and stats
socket in the cluster directory; its PID goes in the state file, so ``cluster down`` and
``recover`` remove it. A system HAProxy that Debian's package may have started is never
touched. In ``--netns`` mode it runs in the root namespace and reaches the zones over their
links: a partitioned zone is cut off from the balancer as well.

The balancer's expected bearer token (``token_env``) is passed in its environment, never
written to its configuration file; the certificate for TLS is made for the run
(:mod:`chaos.tls`), with its CA bundle beside it for the client.
"""

from __future__ import annotations

import os
import random
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass, field, asdict
from pathlib import Path
from typing import Any

from chaos import frontdoor, records as rec
from chaos.backends.local import ports as ports_mod, procs
from chaos.errors import SetupError, UsageError


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
          host: str | None = None, token: str | None = None) -> FrontState:
    """Write the configuration, start HAProxy in a session of its own, wait until it answers.
    ``token``: the bearer token the balancer requires (``settings.token_env`` names where the
    client reads it); passed in HAProxy's environment only."""
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
        from chaos import tls

        pem, ca = tls.make_certificate(d, host)
    st = FrontState(shape=shape, dir=str(d), host=host, listeners=[asdict(x) for x in listen],
                    metrics_port=ports[n], settings=settings.to_dict(), ca_bundle=ca,
                    servers={s.name: s.zone for s in servers})
    cfg = frontdoor.haproxy_config(shape, servers, listen, settings, st.stats_socket, str(d / "haproxy.pid"),
                                   (host, ports[n]), tls_pem=pem)
    (d / "haproxy.cfg").write_text(cfg)
    env = {k: v for k, v in os.environ.items() if k != frontdoor.TOKEN_VAR}
    if token:
        env[frontdoor.TOKEN_VAR] = token
    check = subprocess.run([binary, "-c", "-q", "-f", str(d / "haproxy.cfg")], env=env, capture_output=True,
                           text=True)
    if check.returncode != 0:
        raise SetupError(f"haproxy refused its configuration: {(check.stderr or check.stdout).strip()[:300]}")
    log = open(d / "haproxy.log", "ab")
    proc = subprocess.Popen([binary, "-db", "-f", str(d / "haproxy.cfg")], stdout=log, stderr=subprocess.STDOUT,
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


def stop(st: FrontState | None) -> None:
    """Stop the rig's HAProxy by its PID (never any other) and remove its files."""
    if st is None:
        return
    if st.pid and procs.alive(st.pid):
        procs.stop_pid(st.pid, timeout=5)
    shutil.rmtree(st.dir, ignore_errors=True)


def alive(st: FrontState | None) -> bool:
    return bool(st and st.pid and procs.alive(st.pid))


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
    """One sample of the balancer's servers and counters (:func:`chaos.frontdoor.parse_show_stat`),
    or None when it does not answer."""
    text = _ask(st.stats_socket, "show stat", timeout)
    read_ns = rec.now_ns()  # lastchg counts back from this instant, not from the sample's start
    if not text or "pxname" not in text:
        return None
    return {**frontdoor.parse_show_stat(text, st.servers), "t_ns": read_ns}
