"""The run's context in the report: what stood in front of the proxies, versions, topology, app and load
shape, and what the result does not cover."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chaos.recording import record_columns


def front_door_of(summary: dict[str, Any]) -> dict[str, Any]:
    """What stood in front of the proxies in a run (its environment's ``front_door``)."""
    return (summary.get("environment") or {}).get("front_door") or {}


def environment(summary: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """Versions, topology, app and load shape: from the summary, completed from the records header."""
    env = dict(summary.get("environment") or {})
    env.setdefault("arrivals", summary.get("arrivals"))  # the load as sent (chaos.analysis.arrivals)
    env.setdefault("app", summary.get("app"))
    env.setdefault("cluster", summary.get("cluster"))
    if summary.get("rate_from"):
        env.setdefault("rate_from", summary["rate_from"])  # load.utilization (chaos.load.utilization)
    if "load" not in env:
        records_path = Path(run_dir) / "records.ndjson"
        if records_path.exists():
            header = record_columns.read(records_path).header
            env["load"] = header.get("load")
            env["routing"] = header.get("routing")
    return env


def not_covered(summary: dict[str, Any]) -> list[str]:
    cluster = summary.get("cluster") or {}
    where = "network namespaces on one bridge" if cluster.get("network") == "netns" else "loopback addresses"
    out = []
    if cluster.get("backend", "local") == "local":
        out.append(f"One machine: zones are processes on {where}, not facilities; no real power, cooling or "
                   "network equipment fails.")
    front = front_door_of(summary)
    shape = front.get("shape")
    if front.get("kind") == "kubernetes-service":  # first: its shape is lb too, but it is not the rig's HAProxy
        out.append(f"Front door: the Kubernetes Service {front.get('service')} (endpoints follow the pods' readiness); "
                   "no balancer of the rig's.")
    elif shape == "direct":
        out.append("Front door: none. The client sent to the Serve proxies itself, round robin, with no health "
                   "checks: a dead proxy kept its share of the traffic. Users behind a health-checking load "
                   "balancer see fewer failures (run with --front lb).")
    elif shape in ("lb", "zonal-lb"):
        st = front.get("settings") or {}
        out.append(f"Front door: the rig's HAProxy ({shape}), checks every {st.get('check_interval_s')} s, "
                   f"{st.get('fall')} failed to take a proxy out, retries {st.get('retries')}"
                   f"{', TLS' if st.get('tls') else ''}. Another balancer (a cloud LB, a Kubernetes Service) "
                   "detects and retries differently: its own figures may differ.")
    out.append("The load generator runs beside the cluster and shares its CPUs; latencies include that contention.")
    out.append("No figure is finer than its resolution (the inter-arrival time of the load).")
    out.append("One workload shape (the load section); other prompt lengths, rates or models may recover differently.")
    if summary.get("partial"):
        out.append("The run did not finish: the figures cover only the records taken before it stopped.")
    return out


def env_lines(env: dict[str, Any]) -> list[str]:
    out = []
    for k in ("availproof", "ray", "vllm", "python", "platform", "cpus"):
        if env.get(k) is not None:
            out.append(f"{k}: {env[k]}")
    if env.get("app"):
        out.append(f"app: {env['app']}")
    c = env.get("cluster") or {}
    if c:
        out.append("cluster: " + ", ".join(f"{k} {v}" for k, v in c.items() if v is not None))
    if env.get("nodes"):
        out.append("nodes: " + ", ".join(f"{n['name']} ({n.get('region')}/{n.get('zone')})" for n in env["nodes"]))
    load = env.get("load") if isinstance(env.get("load"), dict) else {}
    if load:
        shape = (f"{load.get('mode')} loop, {_arrival_text(load)}"
                 if load.get("mode") == "open" else f"closed loop, concurrency {load.get('concurrency')}")
        if (load.get("workers") or 1) > 1:
            shape += f", from {load['workers']} worker processes"
        out.append(f"load: {shape}, {load.get('duration_s')} s, warm-up {load.get('warmup_s')} s (excluded), "
                   f"timeout {load.get('timeout_s')} s, {'streaming' if load.get('stream') else 'not streaming'} "
                   f"{load.get('route')}, prompt words {load.get('prompt_words')}, max tokens {load.get('max_tokens')}, "
                   f"seed {load.get('seed')}")
    if isinstance(env.get("rate_from"), dict):
        from chaos.load import utilization

        out.append(f"rate from a measured capacity (load.utilization): {utilization.describe(env['rate_from'])}")
    if env.get("routing"):
        out.append(f"routing: {env['routing']}")
    a = env.get("arrivals") or {}
    if a.get("sent"):
        workers = a.get("per_worker") or {}
        out.append(f"sent: {a['sent']} requests at {a.get('rate_rps')} req/s, inter-arrival CV {a.get('interarrival_cv')}"
                   + (f", per worker {', '.join(f'{w}: {n}' for w, n in workers.items())}" if len(workers) > 1 else "")
                   + (f", {a['clipped']} clipped to max_model_len {load.get('max_model_len')}" if a.get("clipped") else ""))
    return out


def _arrival_text(load: dict[str, Any]) -> str:
    """How the open loop's instants were drawn: a trace, stages, or one rate (gamma with its burstiness)."""
    if load.get("trace"):
        return f"trace {load['trace']} at x{load.get('trace_speed', 1)} ({load.get('trace_end', 'stop')} at its end)"
    kind = load.get("arrival")
    if kind == "gamma":
        kind = f"gamma (burstiness {load.get('burstiness')})"
    if load.get("stages"):
        return f"{kind} arrivals in stages " + ", ".join(f"{s['rate']} req/s for {s['duration_s']} s"
                                                         for s in load["stages"])
    return f"{kind} arrivals at {load.get('rate')} req/s"
