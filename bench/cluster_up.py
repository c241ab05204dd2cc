"""`availproof cluster up` (default topology) versus the same number of bare `ray start`s."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.common import machine, pss_kib  # noqa: E402
from chaos.system import topology  # noqa: E402
from chaos.backends.local import LocalCluster, ports, procs  # noqa: E402


def bare(n_workers: int, root: Path) -> tuple[float, int, list[int]]:
    """Head + n workers with plain `ray start` (ports and addresses only, nothing else)."""
    ray = str(Path(sys.executable).parent / "ray")
    base = ports.find_blocks(n_workers + 1)
    prefix = ports.address_prefix()
    sids = []
    t0 = time.monotonic()
    head = ports.node_ports(base, 0)
    gcs = f"{prefix}.2:{head['gcs']}"
    common = ["--disable-usage-stats"]
    def start(args):
        p = subprocess.Popen([ray, "start", *args, *common], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
        sids.append(p.pid)
        return p
    h = start(["--head", f"--node-ip-address={prefix}.2", f"--port={head['gcs']}", f"--temp-dir={root}/h",
               f"--dashboard-port={head['dashboard']}", f"--ray-client-server-port={head['ray_client_server']}",
               f"--node-manager-port={head['node_manager']}", f"--object-manager-port={head['object_manager']}",
               f"--min-worker-port={head['min_worker']}", f"--max-worker-port={head['max_worker']}",
               f"--metrics-export-port={head['metrics_export']}", f"--dashboard-agent-listen-port={head['dashboard_agent_listen']}",
               f"--dashboard-agent-grpc-port={head['dashboard_agent_grpc']}", f"--runtime-env-agent-port={head['runtime_env_agent']}",
               "--num-cpus=0"])
    h.wait()
    ws = []
    for i in range(n_workers):
        p = ports.node_ports(base, i + 1)
        ws.append(start([f"--address={gcs}", f"--node-ip-address={prefix}.{3 + i}", f"--temp-dir={root}/w{i}",
                         f"--node-manager-port={p['node_manager']}", f"--object-manager-port={p['object_manager']}",
                         f"--min-worker-port={p['min_worker']}", f"--max-worker-port={p['max_worker']}",
                         f"--metrics-export-port={p['metrics_export']}", f"--dashboard-agent-listen-port={p['dashboard_agent_listen']}",
                         f"--dashboard-agent-grpc-port={p['dashboard_agent_grpc']}", f"--runtime-env-agent-port={p['runtime_env_agent']}",
                         "--num-cpus=8"]))
    for w in ws:
        w.wait()
    wall = time.monotonic() - t0
    time.sleep(5)
    pids = [p for s in sids for p in procs.session_members(s)]
    return wall, pss_kib(pids), sids


def main():
    topo = topology.load()
    root = Path(tempfile.mkdtemp(prefix="ap-bench-"))
    print(f"machine: {machine()}")
    # availproof first, then bare, then availproof again (noisy machine: two samples)
    rows = []
    for label in ("availproof", "bare ray start", "availproof (2nd)"):
        if label.startswith("availproof"):
            t0 = time.monotonic()
            c = LocalCluster.up(topo, root / f"c-{len(rows)}")
            c.wait_healthy(120)
            wall = time.monotonic() - t0
            time.sleep(5)
            pids = [p for n in c.state.nodes.values() for p in c.node_processes(n.name)] + [c.state.redis.pid]
            rows.append((label, wall, pss_kib(pids)))
            c.down()
        else:
            wall, pss, sids = bare(len(topo.nodes), root / "bare")
            rows.append((label, wall, pss))
            for s in sids:
                procs.kill_session(s)
    print(f"{'what':<20} {'wall s':>8} {'PSS MiB':>9}")
    for label, wall, pss in rows:
        print(f"{label:<20} {wall:8.1f} {pss / 1024:9.0f}")
    a = (rows[0][1] + rows[2][1]) / 2
    print(f"availproof/bare wall ratio: {a / rows[1][1]:.2f} (availproof also starts Redis, waits for health "
          f"and starts workers in parallel)")
    print(f"availproof/bare PSS ratio: {(rows[0][2] + rows[2][2]) / 2 / rows[1][2]:.2f}")
    os.system(f"rm -rf {root}")


if __name__ == "__main__":
    main()
