"""The restart-fails experiment (issue 48: a replacement that cannot load its weights), written by
``experiments/_make.py`` from its template (:func:`make`)."""

OUTAGE_S = 30  # how long the weights stay unreadable after the kill
RECOVERY_WINDOW_S = 90  # the outage, the replacement's start after it (~21 s on this machine class), and room


def make(experiment, action):
    """Write restart-fails with ``experiment`` and ``action`` (the template's)."""
    experiment(
        "restart-fails", f"SIGKILL one replica while its replacement cannot load its weights, for {OUTAGE_S} s",
        "Swaps the weights file the app's replicas load at their start for a truncated copy of itself (vLLM: "
        "model.safetensors of the checkpoint it serves; the stream target: its weights file, serve_apps/"
        "stream_weights.py; the original copied aside, a mark naming the run), then SIGKILLs one RUNNING replica in "
        f"zone-a. Serve's replacement fails to start (its constructor raises on the truncated weights) and Serve "
        f"retries it; after {OUTAGE_S} s the original is put back, only while the file still reads as the fault's "
        "copy. On the local backend the file is one, shared by every node (one machine); on KubeRay, the zone's "
        "pods' (the stream target only). summary.json's restart entry says how many starts failed, the gaps "
        "between them, whether the application went unhealthy, whether the other replicas kept serving, and the "
        "time from the weights' return to the first replacement RUNNING.",
        "restart-fails", [action("fail-restart-in-zone-a", "fail_restart", zone="zone-a", outage_s=OUTAGE_S)],
        {"max_failed_requests": 5, "max_time_to_steady_state_s": 30,
         "must_recover": True, "max_control_plane_outage_s": 5,
         "max_time_to_capacity_restored_s": OUTAGE_S + 60, "min_capacity_ratio": 0.6},
        "As replica-kill for the requests: only those in flight on the killed replica may fail (about 3 at 8 req/s "
        "with ~1 s streams; 5 allows one routed at the kill); the replicas already running loaded their weights "
        "before the fault and keep serving, and Serve does not route to a replica still STARTING, so a failed "
        "start fails no request. Steady state within 30 s: the other two zones' replicas carry the load from the "
        "kill on, as in replica-kill. Control plane untouched (5 s allows one slow health answer). Capacity: 2 of 3 "
        f"replicas (ratio 0.67) until a replacement starts, which it cannot before the weights return at {OUTAGE_S} "
        f"s; then ~21 s (replica-kill's replacement on this machine class), so {OUTAGE_S} + 60 s. Measured "
        "2026-12-06 on the stream target (Ray 2.60): 4 failed starts 6.5-10.5 s apart (Serve's retries of a replica "
        "whose constructor raised), the app UNHEALTHY meanwhile, the first success 2.3 s after the weights returned; "
        "PASS, 2 of 373 requests failed. The restart entry measures each (failed_starts, backoff_s, went_unhealthy, "
        "time_to_first_success_s).",
        recovery_window_s=RECOVERY_WINDOW_S,
    )
