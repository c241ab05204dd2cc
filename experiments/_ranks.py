"""The rank faults' experiments (rank-hang, rank-hang-watchdog, rank-death: issue 44), written by
``experiments/_make.py`` from its template (:func:`make`). Each runs the app with a rank group of two (``app.ranks: 2``:
the stream target's engine and one rank process, serve_apps/stream_ranks.py; vLLM's tensor_parallel_size 2). Their
bounds are claims carried over from the engine faults they mirror, not yet measured."""

from _engines import SERVE_HEALTH_FAILURES, STALL_S, WATCHDOG_DETECT_S

RANKS = {"ranks": 2}
UNMEASURED = ("Not measured yet: these bounds are claims carried over from {what}, to be held (or corrected) by a run "
              "by hand, its figures in docs/findings.md.")


def make(experiment, action):
    """Write the rank faults' experiments with ``experiment`` and ``action`` (the template's)."""
    experiment(
        "rank-hang", "one rank of a replica's two-rank engine hung for good, the group with it, no detector",
        "Hangs rank 1 of the engine of one replica in zone-a, the collective hang of tensor parallelism as operators "
        "report it (vllm-project/vllm #2731, #8410, #6370: one rank stuck, the others blocked in the all-reduce; #1957: "
        "ended only by NCCL's watchdog after 30 min): the rig leaves the rank a request to wedge and sends SIGUSR1 to "
        "its fault hook (the stream target's rank process, serve_apps/stream_ranks.py; vLLM's VLLM::Worker_TP1, "
        "serve_apps/rank_faults.py), whose step blocks while its process stays out of state T; the engine waits in its "
        "collective for that rank's answer, with no timeout, so it steps no more, its replica alive and its health "
        "check passing. The rig never ends it during the run: only a detector could, and none is on here. The run's end "
        "releases it. rank-hang-watchdog is the same hang with the watchdog's second version on.",
        "rank-hang", [action("hang-rank-in-zone-a", "hang_rank", zone="zone-a", rank=1)],
        {"max_failed_requests": 40, "max_time_to_steady_state_s": 40, "must_recover": True,
         "max_control_plane_outage_s": 5, "max_time_to_capacity_restored_s": 90, "min_capacity_ratio": 0.6},
        "The bounds of engine-wedge (and so of engine-hang-watchdog), which a detector meets: this run has none, so "
        "nothing takes the replica whose group hangs out and the requests routed to it fail at the client's timeout "
        "until Serve's router stops picking it (engine-wedge: 64 of 241 failed, 2026-12-06); VIOLATED is the expected "
        "reading (a PASS here would mean the fault did not hold). " + UNMEASURED.format(what="engine-wedge"),
        hypothesis_wait_s=5, app=dict(RANKS),
    )

    experiment(
        "rank-hang-watchdog", f"one rank of a replica's two-rank engine hung for good, the watchdog's second version "
        f"on (stall_s {STALL_S})",
        "The hang of rank-hang (rank 1 of the engine of one replica in zone-a stuck in its step, the engine blocked in "
        "its collective, never ended by the rig) with the progress watchdog's second version on (app.watchdog 2, "
        f"app.stall_s {STALL_S}: serve_apps/watchdog_v2.py): the engine's step heartbeat stops with requests waiting, "
        "so the replica fails its health check and Serve replaces it; the engine and its ranks go with it (a rank's "
        "death pipe ends it with its engine). Compare it with rank-hang (availproof report --compare).",
        "rank-hang", [action("hang-rank-in-zone-a", "hang_rank", zone="zone-a", rank=1)],
        {"max_failed_requests": 40, "max_time_to_steady_state_s": 40, "must_recover": True,
         "max_control_plane_outage_s": 5, "max_time_to_capacity_lost_s": WATCHDOG_DETECT_S,
         "max_time_to_capacity_restored_s": 90, "min_capacity_ratio": 0.6},
        f"The bounds of engine-wedge-watchdog: the replica out of RUNNING (capacity lost) within {WATCHDOG_DETECT_S} s "
        f"(stall_s {STALL_S} s of no step with requests waiting, then Serve's {SERVE_HEALTH_FAILURES} failed checks at "
        "its 2 s period); never detected violates it. Replaced: capacity restored within 90 s. Failed requests: those "
        "routed to the hung replica until it is taken out, 40. Its engine and rank processes must be gone within 30 s "
        "of the replica (max_orphan_s by default). " + UNMEASURED.format(what="engine-wedge-watchdog"),
        app={"stall_s": STALL_S, "watchdog": 2, **RANKS},
    )

    experiment(
        "rank-death", "SIGKILL one rank process of a replica's two-rank engine",
        "Kills rank 1 of the engine of one replica in zone-a (the stream target's rank process; vLLM's "
        "VLLM::Worker_TP1) and nothing else, as a tensor-parallel worker dies in production (vllm-project/vllm #20657: "
        "'Worker proc VllmWorker-2 died unexpectedly, shutting down executor'; intel/llm-scaler #154: the engine's "
        "fatal error after a worker died, /health 200 until then). The engine notices it the way vLLM's "
        "MultiprocExecutor does (its worker monitor waits on the workers' process sentinels), shuts down and dies: "
        "requests in flight on the replica end with an error, its health check fails and Serve replaces the replica.",
        "rank-death", [action("kill-rank-in-zone-a", "kill_rank", zone="zone-a", rank=1)],
        {"max_failed_requests": 60, "max_time_to_steady_state_s": 30, "must_recover": True,
         "max_control_plane_outage_s": 5, "max_time_to_capacity_restored_s": 60, "min_capacity_ratio": 0.6},
        "The bounds of engine-crash: the engine is gone as fast (its monitor notices the dead rank at once), then "
        "Serve takes the replica out after 3 failed checks at its 2 s period (~6 s) and a replacement starts in ~20 s: "
        "failed requests up to ~48, so 60; steady state within 30 s; capacity within 60 s. Its engine and remaining "
        "ranks must be gone within 30 s of the replica (max_orphan_s by default). "
        + UNMEASURED.format(what="engine-crash"),
        app=dict(RANKS),
    )
