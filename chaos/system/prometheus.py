"""A real Prometheus server (Debian's ``prometheus``) that scrapes a run, and PromQL queries.

:class:`PrometheusServer` starts ``/usr/bin/prometheus`` on a free loopback port with its own
config and data directory (never the system service's), and scrapes:

- the harness exporter (:mod:`chaos.system.metrics`, ``127.0.0.1:$AVAILPROOF_METRICS_PORT``), job
  ``availproof``;
- every Ray node's metrics endpoint (``--metrics-export-port``), job ``ray``, labelled with
  the node's name, zone and region. Targets come from a file (``file_sd``) that a thread
  rewrites whenever the cluster's state file changes, so a cluster replaced between
  experiments is followed.

It is stopped by PID. :func:`query` runs an instant PromQL query over the HTTP API (loopback
only) and returns the first sample's value: the Chaos Toolkit probe ``promql`` uses it.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from chaos.system import secret_env
from chaos.backends.local.ports import free_port
from chaos.backends.local.state import load as load_state
from chaos.base.errors import SetupError, UsageError

BINARY = "prometheus"
DASHBOARD = Path(__file__).resolve().parent.parent / "dashboards" / "grafana-availproof.json"
SCRAPE_INTERVAL = "1s"


def binary() -> str:
    path = shutil.which(BINARY) or ("/usr/bin/prometheus" if os.path.exists("/usr/bin/prometheus") else None)
    if not path:
        raise SetupError("prometheus is not installed: scripts/bootstrap.sh installs Debian's package (as root)")
    return path


def ray_targets(cluster_dir: Path) -> list[dict[str, Any]]:
    """file_sd entries for every node of the local cluster (none when there is no cluster)."""
    try:
        state = load_state(Path(cluster_dir))
    except UsageError:
        return []
    if state is None:
        return []
    out = []
    for n in state.nodes.values():
        port = n.ports.get("metrics_export")
        if port:
            out.append({"targets": [f"{n.ip}:{port}"],
                        "labels": {"node": n.name, "zone": n.zone or "", "region": n.region or "",
                                   "role": n.role, "cluster_id": state.cluster_id}})
    return out


def front_targets(cluster_dir: Path) -> list[dict[str, Any]]:
    """file_sd entry of the cluster's front door (the rig's HAProxy exporter, haproxy_* series), if one runs."""
    try:
        state = load_state(Path(cluster_dir))
    except UsageError:
        return []
    if state is None or not state.front:
        return []
    return [{"targets": [f"{state.front['host']}:{state.front['metrics_port']}"],
             "labels": {"shape": state.front["shape"], "cluster_id": state.cluster_id}}]


def config(workdir: Path, harness_port: int) -> dict[str, Any]:
    jobs = [{"job_name": "ray", "file_sd_configs": [{"files": [str(workdir / "ray-targets.json")],
                                                      "refresh_interval": "2s"}]},
            {"job_name": "front-door", "file_sd_configs": [{"files": [str(workdir / "front-targets.json")],
                                                             "refresh_interval": "2s"}]}]
    if harness_port:
        jobs.insert(0, {"job_name": "availproof", "static_configs": [{"targets": [f"127.0.0.1:{harness_port}"]}]})
    return {"global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL,
                       "scrape_timeout": SCRAPE_INTERVAL}, "scrape_configs": jobs}


class PrometheusServer:
    """One Prometheus process for the length of a run or a suite; use as a context manager."""

    def __init__(self, workdir: Path, cluster_dir: Path, harness_port: int, port: int | None = None,
                 log=lambda m: None):
        self.workdir, self.cluster_dir, self.harness_port = Path(workdir), Path(cluster_dir), harness_port
        self.port = port or free_port()
        self.log = log
        self.proc: subprocess.Popen | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_targets: dict[str, str] = {}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _write_targets(self) -> None:
        for name, read in (("ray", ray_targets), ("front", front_targets)):
            text = json.dumps(read(self.cluster_dir), indent=1)
            if text != self._last_targets.get(name):
                tmp = self.workdir / f".{name}-targets.json"
                tmp.write_text(text)
                os.replace(tmp, self.workdir / f"{name}-targets.json")  # atomic: Prometheus never reads half a file
                self._last_targets[name] = text

    def _follow(self) -> None:
        while not self._stop.wait(2.0):
            try:
                self._write_targets()
            except OSError:
                pass

    def start(self, timeout: float = 30.0) -> "PrometheusServer":
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "prometheus.yml").write_text(json.dumps(config(self.workdir, self.harness_port), indent=1))
        self._write_targets()
        logf = open(self.workdir / "prometheus.log", "ab")
        self.proc = subprocess.Popen(
            [binary(), f"--config.file={self.workdir / 'prometheus.yml'}",
             f"--storage.tsdb.path={self.workdir / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}",
             "--storage.tsdb.retention.time=7d", "--log.level=warn"],
            stdout=logf, stderr=logf, stdin=subprocess.DEVNULL, start_new_session=True, env=secret_env.child_env())
        logf.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SetupError(f"prometheus exited at start (code {self.proc.returncode}): "
                                 f"see {self.workdir / 'prometheus.log'}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                time.sleep(0.3)
        else:
            self.stop()
            raise SetupError(f"prometheus not ready on {self.url} after {timeout:.0f} s")
        self._thread = threading.Thread(target=self._follow, name="prometheus-targets", daemon=True)
        self._thread.start()
        self.log(f"prometheus on {self.url} (pid {self.proc.pid}), scraping the harness and every Ray node")
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()  # our own child, by PID
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None

    def __enter__(self) -> "PrometheusServer":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _check_loopback(url: str) -> None:
    host = urllib.parse.urlsplit(url).hostname or ""
    if not (host == "localhost" or host == "::1" or host.startswith("127.")):
        raise UsageError(f"PromQL URL {url}: only a Prometheus on loopback is queried")


def query(url: str, promql: str, timeout: float = 5.0) -> float | None:
    """Instant query; the first sample's value (a scalar or the first series), None when empty."""
    _check_loopback(url)
    q = urllib.parse.urlencode({"query": promql})
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/api/v1/query?{q}", timeout=timeout) as r:
            body = json.load(r)
    except OSError as e:
        raise SetupError(f"Prometheus at {url} unreachable: {e}") from None
    if body.get("status") != "success":
        raise UsageError(f"PromQL {promql!r}: {body.get('error', 'query failed')}")
    data = body["data"]
    if data["resultType"] == "scalar":
        value = data["result"][1]
    elif data["result"]:
        value = data["result"][0]["value"][1]
    else:
        return None
    v = float(value)
    return None if math.isnan(v) else v


def metric_names(url: str, timeout: float = 5.0) -> set[str]:
    """Every metric name the server holds."""
    _check_loopback(url)
    with urllib.request.urlopen(f"{url.rstrip('/')}/api/v1/label/__name__/values", timeout=timeout) as r:
        return set(json.load(r)["data"])
