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

from chaos.core.experiment import problems  # noqa: E402
from chaos.system.frontdoor import FrontSettings  # noqa: E402

import _engines as engines  # noqa: E402  (the engine faults' experiments)
import _ranks as ranks  # noqa: E402  (rank-hang, rank-death: a rank group's faults)
import _restarts as restarts  # noqa: E402  (restart-fails)
import _devices as devices  # noqa: E402  (device-loss, with and without its remedy)
import _kv_pressure as kv_pressure  # noqa: E402  (replica-kill-kv-pressure: a small vLLM KV cache)
import _overload as overload  # noqa: E402  (overload: a load step above capacity)

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
# A replacement vLLM engine's start, scheduled -> RUNNING (Serve's "started successfully after"), measured
# here: 101.4-102.1 s for three CPU engines starting at once on 2 cores (head-kill-gcs-ft --app llm,
# 2026-12-04; the runs' `replacement.new[].start_s` record it per replica). A bound that waits for a
# replacement gets twice that with --app llm: one start, and as much again for a loaded machine.
ENGINE_START_S = 102


def llm_block(bounds: dict, bounds_source: str, recovery_window_s: float) -> dict:
    """The ``llm`` overrides of one experiment: the load, steady state and SLO of every experiment
    (``LLM``), and where a bound waits for a replacement (capacity restored), that bound and the
    recovery window longer by twice the measured engine start, said in its ``bounds_source``."""
    block = dict(LLM)
    capacity = bounds.get("max_time_to_capacity_restored_s")
    if capacity is not None:
        block["bounds"] = {"max_time_to_capacity_restored_s": capacity + 2 * ENGINE_START_S}
        block["recovery_window_s"] = recovery_window_s + 2 * ENGINE_START_S
        block["bounds_source"] = (
            f"{bounds_source} With --app llm: capacity restored within {capacity + 2 * ENGINE_START_S} s, the "
            f"stream target's {capacity} s plus twice the measured start of a replacement vLLM CPU engine "
            f"({ENGINE_START_S} s from scheduled to RUNNING, three starting at once on 2 cores), and the recovery "
            "window as much longer (it ends as soon as every plane is back and steady).")
    return block


# What users deploy in front of the zone proxies (chaos/system/frontdoor.py): a health-checking balancer.
# HAProxy checks /-/healthz every 1 s (from the end of the previous check) and takes a proxy out
# after 2 failed checks: a killed proxy refuses at once and is out within 2 x 1 = 2 s, a silent one
# (a partition) within 2 x (1 + 1 s check timeout) = 4 s (FrontSettings.detection_bound_s). No retries by default: the
# failures the client sees are then the balancer's detection delay, nothing hidden (the suite
# measures retries as a contrast). `availproof run/suite --front direct` goes without it.
FRONT_DOOR = {"check_interval_s": 1.0, "fall": 2, "rise": 2, "check_timeout_s": 1.0, "retries": 0}
DETECTION_S = FrontSettings.from_dict(FRONT_DOOR).detection_bound_s()


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


def experiment(name, title, description, scope, method, bounds, bounds_source, hypothesis_wait_s=240,
               serving_anywhere=None, requests_via=None, **ext):
    """``hypothesis_wait_s``: how long the hypothesis probe after the method waits for every zone to
    serve again (a contrast case that cannot recover before its rollback need not wait: its recovery window
    already gave capacity its time). ``serving_anywhere``: the hypothesis asks for that many RUNNING replicas of
    every deployment wherever they run instead of one in every zone (a remedy that moved a replica to another zone,
    which Serve does not move back). ``requests_via``: where the hypothesis' requests go (the probe's ``via``: front,
    the front door users reach, where a node left with no replica has its proxy drained)."""
    serving_probe = (probe("every-zone-serving", "every_zone_serving", wait_s=hypothesis_wait_s)
                     if serving_anywhere is None else
                     probe("every-replica-serving", "every_replica_serving", min_running=serving_anywhere,
                           wait_s=hypothesis_wait_s))
    extension = {"name": "availproof", "scope": scope, "topology": ext.pop("topology", "default"),
                 "targets": ext.pop("targets", "workers"), "load": ext.pop("load", LOAD),
                 "baseline_s": ext.pop("baseline_s", 10), "recovery_window_s": ext.pop("recovery_window_s", 30),
                 "steady_state": ext.pop("steady_state", STEADY), "slo": SLO, "bounds": bounds,
                 "bounds_source": bounds_source,
                 "front": ext.pop("front", "lb"), "front_door": ext.pop("front_door", FRONT_DOOR), **ext}
    llm_settle_s = extension.pop("llm_settle_s", None)
    llm_load = extension.pop("llm_load", None)
    extension["llm"] = llm_block(bounds, bounds_source, extension["recovery_window_s"])
    if llm_load is not None:  # an experiment of the vLLM app's own (its load as --app llm runs it)
        extension["llm"]["load"] = llm_load
    if llm_settle_s is not None:  # a vLLM replacement's first seconds of serving are later and slower
        extension["llm"]["recovery_settle_s"] = llm_settle_s
    # an experiment whose vLLM figures are its own, not the stream target's plus twice an engine start (restart-fails:
    # its hold lasts until a vLLM start failed): its llm bounds, recovery window and bounds_source as it says
    extension["llm"].update(extension.pop("llm_overrides", None) or {})
    doc = {
        "version": "1.0.0",
        "title": f"{name}: {title}",
        "description": description,
        "tags": ["availproof", f"scope:{scope}"],
        "configuration": CONFIG,
        "extensions": [extension],
        "controls": [{"name": "availproof", "provider": {"type": "python", "module": "chaos.ctk.control"}}],
        "steady-state-hypothesis": {
            "title": ("every zone serves" if serving_anywhere is None else "every replica serves") +
                     ", requests succeed, recovery within the stated bounds",
            "probes": [serving_probe,
                       probe("requests-succeed", "requests_succeed", **({"via": requests_via} if requests_via else {})),
                       probe("recovery-within-bounds", "recovery_within_bounds")],
        },
        "method": method,
        "rollbacks": [action("heal-all", "heal_all")],
    }
    found = problems(doc, f"{name}.json")  # a load step's capacity is the run's (--capacity FILE): not needed here
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

# A client that retries (chaos/load/retry.py): 3 attempts in all, full-jitter backoff from 0.1 s, on connect errors,
# 5xx and timeouts; never after the first token (a stream the user saw is not sent again).
RETRY = {"attempts": 3, "backoff_base_s": 0.1, "backoff_cap_s": 2.0, "retry_on": ["connect", "5xx", "timeout"]}

experiment(
    "replica-kill-retries", "SIGKILL one Serve replica under steady load, the client retrying",
    "replica-kill with a client that retries (load.retry: 3 attempts, full-jitter backoff from 0.1 s, on connect "
    "errors, 5xx and timeouts, never after the first token). Every attempt is recorded with its logical request; "
    "summary.json's retries (per population) says how many logical requests failed (what users saw), the attempts "
    "per logical request and the amplification: attempts sent per logical request asked for, overall and per bin "
    "around the kill, its peak bounded.",
    "replica", [action("kill-one-replica-in-zone-a", "kill_replica", zone="zone-a")],
    {"max_failed_requests": 15, "max_time_to_steady_state_s": 30,
     "must_recover": True, "max_control_plane_outage_s": 5, "max_time_to_capacity_restored_s": 60,
     "min_capacity_ratio": 0.6, "max_amplification": 1.5},
    "The bounds of replica-kill, with the failed requests counted in attempts (each is a request the service "
    "failed): its 5 logical requests, each sent up to 3 times, make 15. A stream cut mid-way by the kill is not "
    "retried (its first token was shown), so retries change only what failed before the first token. Amplification "
    "at most 1.5 at the kill's peak (chaos.core.bounds' default): in a bin of the steady state's window (5 s, 40 requests "
    "at 8 req/s) the few requests failing at the kill cannot add half as many attempts again unless the retries "
    "themselves fail, which is what the bound is there to catch.",
    load={**LOAD, "retry": RETRY},
)

# Chat users (chaos/load/sessions.py): six turns a session, 1 s of think time, each turn carrying the conversation
# so far; eight groups of sessions, each group sharing a 128-token system prompt. At 8 req/s sessions start at
# 8 / 6 per second. The first turn fits max_model_len 512 however the tokenizer counts (2 tokens a word before
# any answer: (128 + 24) x 2 + 3 x 8 + 32 = 360).
SESSIONS = {"turns": 6, "prefix_groups": 8, "system_prompt_tokens": 128, "think_time_s": 1.0}

experiment(
    "replica-kill-warm-cache", "SIGKILL one Serve replica under multi-turn sessions with shared prefixes",
    "Kills the worker process of one RUNNING replica in zone-a while chat sessions run (each turn carries the "
    "conversation so far; groups of sessions share a system prompt). The replacement starts with an empty prefix "
    "cache: its prefix-sharing requests are slower until it has seen the shared prefixes. summary.json's warmup "
    "says for how long (time_to_warm_s: until the replacement's p95 TTFT is within 1.2 x the warm replicas' in the "
    "same windows, and stays there over all its requests from then on), beside the baseline p95 TTFT of these "
    "requests before the kill.",
    "replica", [action("kill-one-replica-in-zone-a", "kill_replica", zone="zone-a")],
    {"max_failed_requests": 5, "max_time_to_steady_state_s": 30,
     "must_recover": True, "max_control_plane_outage_s": 5, "max_time_to_capacity_restored_s": 60,
     "min_capacity_ratio": 0.6},
    "The bounds of replica-kill (the same fault at the same 8 req/s): only the turns in flight on the killed replica "
    "may fail (a session sends a failed turn again after its think time), Serve stops routing to the dead replica "
    "at once, the replacement RUNNING within 60 s. The warm-up is measured, not bounded: the stream target charges "
    "2 ms of TTFT per prompt token its replica's simulated prefix cache does not hold (serve_apps/config.py), so a "
    "cold replica's first turn of a group costs ~0.26 s more; how long the replacement takes to be as fast as the "
    "warm replicas is the figure (summary.json warmup). The recovery window ends no earlier than 15 s after every "
    "plane is back (30 s with --app llm), so the replacement's first seconds of serving are in it (the stream "
    "target's replacement was warm 8.4 s after the kill, 5 s after capacity was back: 2026-12-05).",
    load={**LOAD, "prompt_words": [8, 24], "max_tokens": [16, 32], "sessions": SESSIONS},
    steady_state={**STEADY, "warm_factor": 1.2}, recovery_window_s=60, recovery_settle_s=15,
    llm_settle_s=30,
)

# Request migration (issue 47, serve_apps/migrating_ingress.py; the vLLM app's: serve_apps/llm_migrating.py): an
# ingress in front of the engine replicas sends a stream that broke on its replica to another one, with the tokens so
# far, at most twice per request.
MIGRATION = {"limit": 2}

experiment(
    "replica-kill-migration", "SIGKILL one Serve replica under steady load, the streams it served migrated",
    "replica-kill with request migration on (app.migration, limit 2): on the stream target a MigratingIngress "
    "deployment, one replica per zone, stands in front of the StreamTarget engine replicas; with --app llm Serve LLM's "
    "OpenAI ingress (one per zone) is the migrating one, in front of the LLMServer replicas; the kill takes an "
    "engine replica, never the ingress, and only once it serves (min_ongoing 1: Serve's own count of its ongoing "
    "requests, waited for up to 30 s; a replica killed idle tests nothing of migration). Each stream the killed replica was serving goes on from another replica: the "
    "original request plus the tokens already streamed, max_tokens reduced, the first event of the continuation "
    "marked (\"migrated\": 1), its token indices going on without a gap. summary.json's continuity says per fault "
    "the streams migrated, the tokens lost, duplicated and corrupted, the migration gap (p50, p99) and the streams "
    "refused migration (guided output, n > 1, vLLM's sampling above temperature 0; none in this load, greedy).",
    "replica", [action("kill-one-replica-in-zone-a", "kill_replica", zone="zone-a", min_ongoing=1)],
    {"max_failed_requests": 0, "max_time_to_steady_state_s": 30,
     "must_recover": True, "max_control_plane_outage_s": 5, "max_time_to_capacity_restored_s": 60,
     "min_capacity_ratio": 0.6},
    "A claim, not a measurement (never run on a cluster yet): migration's promise is that no request fails "
    "(max_failed_requests 0) where replica-kill allows the ~3 streams in flight on the killed replica and one "
    "routed at the kill (5; measured 0-1 there): each of those is continued from another replica, and a request "
    "that reached the dead replica before Serve dropped it is sent again by the ingress (within 10 s). The expected "
    "continuity figures are tokens lost, duplicated and corrupted 0, the streams migrated about as many as "
    "replica-kill's failed, the migration gap of the order of a routing and a prefill (~0.1 s): none of this "
    "measured yet. The other bounds are replica-kill's (the same fault at the same 8 req/s): steady state within "
    "30 s, the control plane untouched (5 s allows a slow health answer), 2 of 3 engine replicas at worst, the "
    "replacement RUNNING within 60 s. A violation is a finding about the ingress, with the failed requests' "
    "migration_refused saying which were refused and why. With --app llm the same claim (max_failed_requests 0), "
    "not measured either: the load is greedy (temperature 0), so no request is refused sampling; a continuation "
    "re-sends the text so far, which vLLM tokenizes again, so the tokens after a seam are to be checked against a "
    "greedy golden answer (tokens_corrupted), not assumed to match.",
    app={"migration": MIGRATION},
)

engines.make(experiment, action)
ranks.make(experiment, action)
restarts.make(experiment, action)
devices.make(experiment, action)
kv_pressure.make(experiment, action, LOAD)
overload.make(experiment, action, LOAD, STEADY)

experiment(
    "worker-node-kill", "kill every process of the zone-b worker node, restart it after 20 s",
    "SIGKILLs the raylet, its agents and every worker process of one node. The GCS marks the node dead after "
    "health_check period 1 s x 3 failures; Serve then replaces the replica. The client sends through the "
    "front door (HAProxy over every zone's proxy), which takes the dead proxy out of rotation.",
    "node", [action("kill-node-zone-b", "kill_node", zone="zone-b", outage_s=20)],
    {"max_failed_requests": 30, "max_failed_unaffected_zones": 0, "max_time_to_steady_state_s": 40,
     "must_recover": True, "max_control_plane_outage_s": 5, "max_time_to_capacity_restored_s": 90,
     "min_capacity_ratio": 0.6},
    "Behind the balancer (front lb): requests sent to zone-b's proxy fail until HAProxy marks it DOWN, within "
    f"fall x (inter + a check timeout) = {DETECTION_S:g} s: 8 req/s / 3 x {DETECTION_S:g} s = ~11 requests, plus those "
    "in flight on the node's replica and proxy (~1 s streams: ~3 each) and those other proxies route to the dead "
    "replica before Serve drops it: 30 leaves room for a loaded machine. The balancer's own detection instant is "
    "in the summary (front_door.time_to_detect_s). Direct (--front direct) the client keeps the dead proxy in "
    "rotation for the whole outage (~80 failed: violated, the contrast). With one balancer the client's requests "
    "belong to no zone (max_failed_unaffected_zones does not apply); zonal-lb or direct keep zones, and then "
    "requests through the other zones must not fail. Control plane untouched (outage 0; 5 s allows a slow health "
    "answer). Capacity: zone-b's replica is gone until the node is back (20 s) and the replacement RUNNING there "
    "(~20-30 s more on this machine class): 90 s; 2 of 3 replicas meanwhile.",
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
    "node and redeploys. Its recovery window is 20 s after the head is back: without the rollback nothing comes "
    "back, and a longer window shows the same.",
    "head", [action("kill-head-restart-after-10s", "kill_head", outage_s=10)],
    {"max_failed_requests": 0, "max_time_to_steady_state_s": 60, "must_recover": True,
     "max_control_plane_outage_s": 60, "max_time_to_capacity_restored_s": 90, "min_capacity_ratio": 1.0},
    "The same bounds as head-kill-gcs-ft, on purpose: this experiment exists to show what GCS fault tolerance "
    "buys, so it is expected to violate them (exit 1).",
    gcs_fault_tolerance=False, recovery_window_s=20, hypothesis_wait_s=0,
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
    "SIGKILLs every node of zone-a at once: raylets, proxies, replicas. The client sends through the front door.",
    "zone", [action("kill-zone-a", "kill_zone", zone="zone-a", outage_s=20)],
    {"max_failed_requests": 30, "max_failed_unaffected_zones": 0, "max_time_to_steady_state_s": 60,
     "must_recover": True, "max_control_plane_outage_s": 5, "max_time_to_capacity_restored_s": 90,
     "min_capacity_ratio": 0.6},
    "Behind the balancer (front lb), zone-a's proxy gets its share until HAProxy marks it DOWN (within "
    f"{DETECTION_S:g} s: ~11 requests at 8 req/s / 3) plus what is in flight on the zone's replica and proxy: 30 "
    "allows for a loaded machine. Direct (--front direct) the client keeps zone-a's proxy in rotation, so its "
    "users fail for the whole outage (~53 and more: violated, the contrast). zonal-lb keeps the zones: requests "
    "through zone-b's and zone-c's balancers must not fail (max_failed_unaffected_zones 0, the availability "
    "claim); with one balancer for all zones that bound does not apply. Control plane untouched (outage 0; 5 s "
    "allows a slow health answer). Capacity: zone-a's replica is back ~20-30 s after its node: 90 s.",
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
    "zone-c's replica counts as RUNNING while the controller cannot reach it; if the node is declared dead (also "
    "after the heal: a check failed during the cut, then one on the reset connection), its replacement needs the "
    "node restarted (the local backend's supervisor does, as KubeRay's kubelet would): 120 s, which the recovery "
    "window runs to (it ends early once every plane is back).",
    recovery_window_s=120, network="netns",
)

experiment(
    "upgrade", "a rolling upgrade of the Serve app (a new code version) under load",
    "Applies the deployed Serve config again with a new AVAILPROOF_APP_VERSION in the application's runtime_env: "
    "a new code version, so Serve replaces every replica in a rolling update (the local variant 'code'; a "
    "user_config change would reconfigure the replicas in place and replace none). The upgrade is complete when "
    "no replica running before it is left and as many new ones run.",
    "upgrade", [action("upgrade-app", "upgrade_app", variant="code", timeout_s=600)],
    {"max_failed_requests": 0, "max_time_to_steady_state_s": 120, "must_recover": True,
     "max_control_plane_outage_s": 5, "max_time_to_capacity_restored_s": 180, "min_capacity_ratio": 0.6},
    "A zero-downtime upgrade claims zero failed requests: this bound states that claim (max_failed_requests 0); it "
    "is the question KubeRay users ask most (ray-project/kuberay#1245), and a KubeRay incremental-upgrade change "
    "still saw 5 of 200 requests answered 503 in its own review (ray-project/kuberay#3166). Serve stops an old "
    "replica gracefully (graceful_shutdown_timeout_s 2 s in the rig's config, longer than a ~1 s stream; the wait "
    "loop 2 s by default) after taking it out of routing. Capacity: Serve replaces about 20% of the target at a "
    "time (at least one): with max_replicas_per_node 1 on one node per zone an old replica must go before its "
    "replacement fits, so 2 of 3 at worst (ratio 0.67); three replacements of ~20 s each: 180 s. Control plane "
    "untouched (5 s allows a slow health answer).",
    recovery_window_s=30,
)

experiment(
    "drain", "drain the zone-b worker node with a 30 s deadline (a preemption notice), then it goes",
    "Tells the GCS that the zone-b node will go in 30 s (Ray's drain-node API, reason PREEMPTION, as a preemption "
    "notice or planned maintenance does); Ray Serve starts a replacement for its replica elsewhere and stops the "
    "old one; at the deadline the node's processes are killed (the machine goes), and it comes back 20 s later. "
    "The same node worker-node-kill kills without notice: compare the two (availproof report --compare).",
    "drain", [action("drain-node-zone-b", "drain_node", zone="zone-b", deadline_s=30, outage_s=20)],
    {"max_failed_requests": 0, "max_time_to_steady_state_s": 60, "must_recover": True,
     "max_control_plane_outage_s": 5, "max_time_to_capacity_restored_s": 120, "min_capacity_ratio": 0.6},
    "A drain with notice is the disruption with time to do it right: Serve (2.60) migrates a replica off a "
    "draining node by starting its replacement first (deployment_state.migrate_replicas_on_draining_nodes), so no "
    "request should fail (max_failed_requests 0) as long as the replacement is RUNNING before the deadline (~20 s "
    "to start here) and the balancer stops sending to the node's proxy before it goes. The app allows two "
    "replicas per node (max_replicas_per_node 2) so the replacement has a place in another zone. Capacity "
    "(serving replicas: a replica on a draining node serves until its replacement runs): 3 of 3 if the "
    "replacement comes first; 2 of 3 (0.67) at worst; restored to one per zone within 120 s of the notice "
    "(the node is back after 50 s), if Serve moves a replica back to zone-b. Control plane untouched.",
    app={"max_replicas_per_node": 2}, recovery_window_s=40, hypothesis_wait_s=0,
)

experiment(
    "kuberay-upgrade-serve-config", "KubeRay: roll a new app version through serveConfigV2 under load",
    "KubeRay only. Sets runtime_env.env_vars.AVAILPROOF_APP_VERSION in the RayService's serveConfigV2: KubeRay "
    "applies it in place to the active RayCluster (no new cluster) and Serve, seeing a new code version, replaces "
    "every replica in a rolling update. The fault ends when no replica RUNNING before the change is left and as many "
    "new ones are RUNNING. Refused on the local backend (its variant is code) and on a bare RayCluster.",
    "upgrade", [action("upgrade-serve-config", "upgrade_app", variant="serve_config", timeout_s=600)],
    {"max_failed_requests": 0, "max_time_to_steady_state_s": 120, "must_recover": True,
     "max_control_plane_outage_s": 5, "max_time_to_capacity_restored_s": 240, "min_capacity_ratio": 0.6},
    "A zero-downtime upgrade claims zero failed requests: this bound states that claim (max_failed_requests 0), it "
    "is not a measurement. KubeRay's maintainers list 'how many requests are lost in a zero-downtime upgrade' as an "
    "open benchmark question (ray-project/kuberay#1245; the answer there: 'Zero down time: 0 request failures'), and a KubeRay "
    "incremental-upgrade change still saw 5 of 200 requests answered 503 'no healthy upstream' during its own "
    "review (ray-project/kuberay#3166): a violation here is a finding, not a broken bound. Serve stops an old "
    "replica gracefully (graceful_shutdown_timeout_s 2 s in the rig's config, wait loop 2 s by default: longer "
    "than a ~1 s stream). Capacity: with max_replicas_per_node 1 and one worker pod per zone, an old replica must go "
    "before its replacement can be placed, so 2 of 3 replicas at worst (ratio 0.67); three replacements of ~20-30 s "
    "each on a small cluster: 240 s. Steady state within 120 s of the change (slower answers while a zone has no "
    "replica). Control plane untouched (the same RayCluster; 5 s allows a slow health answer).",
    kubernetes={"namespace": "availproof", "ray_cluster": "availproof", "max_pods": 1},
)

experiment(
    "kuberay-upgrade-cluster", "KubeRay: a rayClusterConfig change, served by a new RayCluster (NewCluster)",
    "KubeRay only. Annotates the head's and every worker group's pod template in the RayService's rayClusterConfig "
    "(availproof.io/app-version): the hash KubeRay keeps of that spec changes, so under the NewCluster strategy (the "
    "default) it brings up a new RayCluster beside the old one, deploys the Serve apps on it, switches the serve and "
    "head Services to it once they are RUNNING, and deletes the old cluster 60 s later. Needs room for two clusters "
    "and a serve_url/dashboard_url that follow KubeRay's Services (not a Service pinned to the old cluster's name). "
    "Refused under upgradeStrategy.type None, on the local backend and on a bare RayCluster.",
    "upgrade", [action("upgrade-cluster", "upgrade_app", variant="cluster", timeout_s=900)],
    {"max_failed_requests": 0, "max_time_to_steady_state_s": 900, "must_recover": True,
     "max_control_plane_outage_s": 30, "max_time_to_capacity_restored_s": 900, "min_capacity_ratio": 1.0},
    "A zero-downtime upgrade claims zero failed requests: this bound states that claim (max_failed_requests 0), it "
    "is not a measurement. KubeRay's maintainers list 'how many requests are lost in a zero-downtime upgrade' as an "
    "open benchmark question (ray-project/kuberay#1245; the answer there: 'Zero down time: 0 request failures'), and a KubeRay "
    "incremental-upgrade change still saw 5 of 200 requests answered 503 'no healthy upstream' during its own "
    "review (ray-project/kuberay#3166): a violation here is a finding. Capacity: the old cluster serves at full "
    "capacity until KubeRay switches, and it switches only once the new cluster's apps are RUNNING (every replica "
    "up), so the ratio should not dip (1.0). Time: the new cluster's pods are scheduled, pull their image (minutes "
    "for a Ray image not yet on the node), start Ray and the apps before the switch: 900 s, for capacity and "
    "steady state alike (a failure at the switch restarts the steady-state clock). Control plane: the head Service "
    "moves to the new head at the switch: 30 s. The recovery window (90 s) covers the old cluster's deletion 60 s "
    "after the switch, when connections still open to it break.",
    kubernetes={"namespace": "availproof", "ray_cluster": "availproof", "max_pods": 1},
    load={**LOAD, "duration_s": 1500}, recovery_window_s=90, max_wall_s=1800,
)

experiment(
    "accelerator-loss", "KubeRay GPU: a replica's node loses its accelerator to Kubernetes for 60 s, its pods running",
    "KubeRay only, on the GPU overlay (kuberay/overlays/vllm-gpu). Pauses the NVIDIA device plugin on the node of "
    "one GPU replica in zone-a as NVIDIA's MIG manager does (its DaemonSet's node-selector label set to a paused "
    "value: the DaemonSet controller deletes the plugin's pod), so the kubelet marks the node's nvidia.com/gpu "
    "devices unhealthy and its allocatable drops to 0; proven by that drop, the plugin's pod gone and the node's GPU "
    "pods still Running. After 60 s the label is put back and the plugin registers again. The replica keeps its GPU "
    "and serves; what the cluster loses is room for a new GPU pod there (recorded at the heal: the GPU pods left "
    "running, those Pending). Refused on the local backend (no accelerator).",
    "accelerator", [action("lose-accelerator-of-a-replica-in-zone-a", "lose_accelerator", zone="zone-a", outage_s=60)],
    {"max_failed_requests": 0, "max_time_to_steady_state_s": 30, "must_recover": True,
     "max_control_plane_outage_s": 5, "min_capacity_ratio": 1.0},
    "A claim, not a measurement (never run on a GPU cluster; the fakes only model the kubelet, the DaemonSet "
    "controller and the scheduler): the device plugin is not in a running container's data path, so nothing "
    "serving is lost: no request fails, capacity (RUNNING replicas) never drops (ratio 1.0), the control plane is "
    "untouched (5 s allows a slow health answer). A violation is a finding: something that depends on the plugin.",
    front="direct", kubernetes={"namespace": "availproof", "ray_cluster": "availproof", "max_pods": 1},
)
