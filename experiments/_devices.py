"""The device-loss experiments (issue 46: a device that stays bad), without and with the rig's remedy, written by
``experiments/_make.py`` from its template (:func:`make`). The same fault, the same outage, the same load: what
differs is the remedy (the bad node cordoned once an engine's device error is seen) and, for it, room elsewhere."""

OUTAGE_S = 150  # how long the node's device stays bad (the marker), past the 120 s crash-loop bound
RECOVERY_WINDOW_S = 270  # the outage, Serve's back-off after it (its retries grow apart), a replacement's start, room
FAILED = 60  # engine-error's: the engine fails through its own error path, requests routed to it fail until it is out

WHAT = ("Marks the accelerator of the node one RUNNING replica in zone-a runs on as lost for {outage} s (a per-node "
        "marker the app's engine-side hook reads, serve_apps/device_loss.py: NVIDIA XID 79, the GPU fallen off the "
        "bus): the engine on it fails at its next step (as engine-error's, through the stack's own error path), and "
        "every new engine that starts on that node fails as it starts, until the rig removes the marker (only while "
        "it still holds the fault's token). Nothing evicts the node and Ray keeps advertising its resources. "
        "summary.json's device entry says where each replacement landed (node, zone, seconds after the injection), "
        "the starts that failed on the bad node, the time to a replica answering from a healthy node, whether Serve "
        "moved off the bad node by itself, and how long the crash loop lasted (bound max_device_crashloop_s).")
BASE = ("Requests: engine-error's bound for the failure itself ({failed}: in flight on the replica, and routed to it "
        "until Serve takes it out, ~6 s); a start that fails fails no request (Serve routes to no replica still "
        "starting). Steady state within 30 s: the two other zones' replicas carry the load. Control plane untouched "
        "(5 s allows one slow health answer). Capacity: 2 of 3 replicas at worst (0.67). The crash-loop bound is the "
        "rig's default (120 s): issue 46's reading of what operators meet, a replica that keeps landing on a node "
        "whose GPU stays bad, which NVIDIA's NVSentinel is reported to cordon and drain in ~2 min. Figures: run by "
        "hand, see Findings.")


def make(experiment, action):
    """Write device-loss and device-loss-remedy with ``experiment`` and ``action`` (the template's)."""
    base = BASE.format(failed=FAILED)
    bounds = {"max_failed_requests": FAILED, "max_time_to_steady_state_s": 30, "must_recover": True,
              "max_control_plane_outage_s": 5, "min_capacity_ratio": 0.6, "max_device_crashloop_s": 120}
    experiment(
        "device-loss", f"a replica's node loses its GPU for {OUTAGE_S} s and Serve re-places the replica there",
        WHAT.format(outage=OUTAGE_S) + " No remedy: the replicas are pinned one per node (max_replicas_per_node 1, "
        "one worker per zone), so Serve's only room for the replacement is the bad node itself, where it crash-loops "
        "until the device comes back.",
        "device-loss", [action("lose-device-of-a-replica-in-zone-a", "lose_device", zone="zone-a", mode="error",
                               xid=79, outage_s=OUTAGE_S)],
        {**bounds, "max_time_to_capacity_restored_s": OUTAGE_S + 90},
        "Expected VIOLATED on the local backend, by design: with the replicas pinned one per node (the default "
        "topology, one worker per zone, max_replicas_per_node 1) the bad node is the only one with room for the "
        "replacement, so every start Serve makes lands there and fails until the marker goes at "
        f"{OUTAGE_S} s: the crash loop outlasts max_device_crashloop_s (120 s). " + base +
        f" Capacity restored within {OUTAGE_S} + 90 s: after the device's return a replacement starts there once "
        "Serve's back-off lets it (its retries grow apart), ~20 s.",
        recovery_window_s=RECOVERY_WINDOW_S,
    )
    experiment(
        "device-loss-remedy", f"the same lost GPU for {OUTAGE_S} s, with the rig's remedy: the bad node cordoned",
        WHAT.format(outage=OUTAGE_S) + " With the remedy (remedy: cordon, the rig's own health monitor): once an "
        "engine's record of the device error is seen (the rig looks every second), the bad node is cordoned: locally "
        "Ray's drain of the node (reason PREEMPTION, as the drain scope's notice), so Ray and Serve place nothing "
        "more there; on KubeRay the Kubernetes node cordoned and the node's Ray pod evicted. The replicas may share a "
        "node (max_replicas_per_node 2, as drain's), so the replacement has room on a healthy node of another zone "
        "(with one worker per zone and replicas pinned one per node a cordoned node leaves it nowhere: it stays "
        "pending). At the heal the marker goes and the node is uncordoned (locally its raylet restarted: Ray has no "
        "undrain), each only while still the rig's.",
        "device-loss", [action("lose-device-of-a-replica-in-zone-a-with-the-remedy", "lose_device", zone="zone-a",
                               mode="error", xid=79, remedy="cordon", outage_s=OUTAGE_S)],
        bounds,
        "Expected PASS: the remedy cordons the bad node within a look (1 s) of the engine's first device error, "
        "before Serve replaces the replica (3 failed health checks at 2 s), so the replacement lands on a healthy "
        "node (~20 s to start) and the crash loop is short or none. " + base + " No bound on capacity restored: it "
        "is counted per zone, and the replacement runs in another zone (zone-a keeps no replica: Serve does not move "
        "one back when the node returns, as after drain). With --app llm the remedy has no room (each worker holds "
        "one engine: no two fit on a node, and placement groups rule out max_replicas_per_node): the replacement "
        "stays pending until the heal; the vLLM row is the one without the remedy.",
        recovery_window_s=RECOVERY_WINDOW_S, app={"max_replicas_per_node": 2},
        # zone-a keeps no replica (Serve does not move one back when the node returns, as after drain): the hypothesis
        # asks for the app's three replicas serving wherever they run (its capacity), not one in every zone; and its
        # requests go through the front door: zone-a's proxy, on a node left with no replica, is drained by Serve (503)
        hypothesis_wait_s=30, serving_anywhere=3, requests_via="front",
    )
