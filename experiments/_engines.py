"""The engine faults' experiments (engine-hang, engine-crash, engine-hang-watchdog, engine-error, engine-slow,
engine-stutter, engine-wedge, engine-wedge-watchdog, engine-garbage, engine-stall), written by
``experiments/_make.py`` from its template (:func:`make`)."""

# Serve takes a replica out after 3 failed health checks in a row (Ray 2.60 REPLICA_HEALTH_CHECK_UNHEALTHY_THRESHOLD)
SERVE_HEALTH_FAILURES = 3
STALL_S = 5  # the progress watchdog's stall_s in engine-hang-watchdog (serve_apps/watchdog.py)
WATCHDOG_DETECT_S = 20


def make(experiment, action):
    """Write the engine faults' experiments with ``experiment`` and ``action`` (the template's)."""
    experiment(
        "engine-hang", "SIGSTOP one replica's engine (alive but stuck) for 20 s",
        "Stops the engine process of one replica in zone-a (vLLM's EngineCore; the stream target's engine child) and "
        "nothing else: the replica's process runs on, its engine alive but producing nothing. Only Serve's health check "
        "(period 2 s, timeout 5 s) could notice; the engine is resumed after 20 s. engine-hang-watchdog is the same hang "
        "with the app's progress watchdog on.",
        "engine", [action("hang-engine-in-zone-a", "hang_engine", zone="zone-a", duration_s=20)],
        {"max_failed_requests": 40, "max_time_to_steady_state_s": 40,
         "must_recover": True, "max_control_plane_outage_s": 5, "max_time_to_capacity_restored_s": 90,
         "min_capacity_ratio": 0.6},
        "The gray failure: the replica's process answers its health check (as a vLLM replica's does: Serve LLM asks "
        "only whether the engine errored), so Serve never takes it out and nothing replaces it (capacity never seen "
        "lost); the requests routed to it wait for the 20 s hang and fail at the client's 10 s timeout. Serve's router "
        "(power of two choices on ongoing requests) sends it fewer as its queue grows: 24 of 252 failed on the stream "
        "target (2026-12-05), so 40. A client sees the first failure only at its own timeout (10 s): the time to "
        "detect is at least that. Steady state within 40 s: the 20 s hang plus the 10 s timeout of the last requests "
        "it held. Control plane untouched (outage 0; 5 s allows a slow health answer). Capacity restored within 90 s: "
        "trivially, never lost (engine-hang-watchdog bounds the detection).",
    )

    experiment(
        "engine-crash", "SIGKILL one replica's engine process while the replica lives",
        "Kills the engine process of one replica in zone-a (vLLM's EngineCore; the stream target's engine child "
        "process) and nothing else: the replica's actor lives on and must notice that its engine died (vLLM's "
        "EngineDeadError): requests in flight on it end with an error, new ones get a 500, its health check fails "
        "and Serve replaces the replica.",
        "engine-crash", [action("crash-engine-in-zone-a", "crash_engine", zone="zone-a")],
        {"max_failed_requests": 60, "max_time_to_steady_state_s": 30,
         "must_recover": True, "max_control_plane_outage_s": 5, "max_time_to_capacity_restored_s": 60,
         "min_capacity_ratio": 0.6},
        "Requests in flight on the replica fail at once (~3 at 8 req/s with ~1 s streams), and requests routed to it "
        "fail until Serve stops routing there: its health check (period 2 s) fails from the first look after the "
        "crash and Serve takes a replica out after 3 failed checks, ~6 s, while a replica that fails fast looks "
        "idle to the router and draws more than its third of 8 req/s: up to ~8 req/s x 6 s = 48, so 60. Steady "
        "state within 30 s: once the replica is out, the other two carry the load. Control plane untouched "
        "(outage 0; 5 s allows a slow health answer). Capacity: the replacement starts in ~20 s on this machine "
        "class after the ~6 s detection, so 60 s. With tensor parallelism an engine crash is one rank dying while "
        "its peers hang in a collective: not tested here (one CPU engine per replica).",
    )


    experiment(
        "engine-hang-watchdog", "SIGSTOP one replica's engine for 20 s, with the app's progress watchdog on (stall_s 5)",
        "The hang of engine-hang (the engine process of one replica in zone-a stopped, its replica's process running) "
        f"with the progress watchdog of serve_apps/watchdog.py on: app.stall_s {STALL_S} (the engine deployment's "
        f"user_config), so a replica with requests in flight and no token for {STALL_S} s fails its health check and "
        "Serve replaces it, instead of routing to it until the clients time out. Compare it with engine-hang "
        "(availproof report --compare): time to detect, failed requests, time to steady state.",
        "engine", [action("hang-engine-in-zone-a", "hang_engine", zone="zone-a", duration_s=20)],
        {"max_failed_requests": 40, "max_time_to_steady_state_s": 40, "must_recover": True,
         "max_control_plane_outage_s": 5, "max_time_to_capacity_lost_s": WATCHDOG_DETECT_S,
         "max_time_to_capacity_restored_s": 90, "min_capacity_ratio": 0.6},
        f"Detected: the replica out of RUNNING (capacity lost) within {WATCHDOG_DETECT_S} s: the engine's last token "
        f"(the stream target notices a stopped engine within 1 s), stall_s {STALL_S} s of no token with requests in "
        f"flight, then Serve's {SERVE_HEALTH_FAILURES} failed checks at its 2 s period (<= 6 s) and the 0.5 s sampling: "
        f"~12.5 s, with room for a loaded machine. Never detected (capacity never lost, as engine-hang without the "
        "watchdog) violates it. Replaced: capacity restored within 90 s (a replacement starts in ~20 s on this machine "
        "class). Failed requests: those routed to the hung replica until it is taken out (~12 s x 8 req/s / 3 = ~32) "
        "fail, at their timeout or when Serve stops the replica: 40, as engine-hang's. Steady state within 40 s: "
        "detection and the 20 s hang. Control plane untouched (5 s allows a slow health answer).",
        app={"stall_s": STALL_S},
    )

    experiment(
        "engine-error", "one replica's engine fails from inside its step loop (an injected device error)",
        "Sends SIGUSR1 to the engine process of one replica in zone-a (vLLM's EngineCore; the stream target's engine "
        "child), whose fault hook (serve_apps/engine_faults.py, on with AVAILPROOF_ENGINE_FAULTS=1, which both apps set) "
        "makes its next step raise, as a device error does: the serving stack's own error path runs (vLLM: EngineCore's "
        "fatal error, EngineDeadError to every request in flight, its health check failing), the engine process exits "
        "and the replica's actor lives on. Serve replaces the replica.",
        "engine-error", [action("error-engine-in-zone-a", "error_engine", zone="zone-a")],
        {"max_failed_requests": 60, "max_time_to_steady_state_s": 30,
         "must_recover": True, "max_control_plane_outage_s": 5, "max_time_to_capacity_restored_s": 60,
         "min_capacity_ratio": 0.6},
        "The bounds of engine-crash: the engine is gone as fast, through its own error path instead of a SIGKILL. "
        "Requests in flight on the replica end with an error at once (not at the client's 10 s timeout: the failure "
        "classes say which), requests routed to it get a 500 until Serve takes it out after 3 failed checks at its 2 s "
        "period (~6 s), while a replica that fails fast looks idle to the router and draws more than its third of 8 "
        "req/s: up to ~48, so 60. Steady state within 30 s: once the replica is out the other two carry the load. "
        "Capacity: the replacement starts in ~20 s after the ~6 s detection, so 60 s. Control plane untouched.",
    )

    experiment(
        "engine-slow", "an even straggler: every step of one replica's engine four times as long for 20 s",
        "Slows every step of the engine of one replica in zone-a evenly, from inside the engine (the app's fault hook, "
        "serve_apps/engine_faults.py, armed by SIGUSR1 with a request naming slow, factor 4): vLLM's EngineCore sleeps "
        "3 times the measured duration of each step after it; the stream target's engine child sleeps 3 of its step "
        "periods in each step and stretches its tokens' compute delays 4 times. After 20 s the rig removes the slow mark "
        "and the engine steps at full speed again. The replica stays alive and answering, every token four times "
        "later: nothing fails its health check. What Serve's router does with it is the finding, reported (summary.json "
        "straggler): the share of the requests the slow replica got against its fair share, and the p50/p95 TTFT and "
        "ITL of its requests against the other replicas' in the same interval. engine-stutter is the same slowdown as a "
        "SIGSTOP/SIGCONT duty cycle (bimodal inter-token latency).",
        "engine-slow", [action("slow-engine-in-zone-a", "slow_engine", zone="zone-a", factor=4, duration_s=20)],
        {"max_failed_requests": 0, "max_time_to_steady_state_s": 40, "must_recover": True,
         "max_control_plane_outage_s": 5, "max_time_to_capacity_restored_s": 60, "min_capacity_ratio": 0.6},
        "The bounds of engine-stutter, carried over, and held by the even slowdown's one measured run (2026-12-06, "
        "the stream target, local): the engine's mean step 5.13 ms before, 19.42 ms during (x3.78), PASS, 0 of 166 "
        "requests failed, capacity never lost. No request should fail: a stream of 16-48 tokens "
        "four times slower still ends well within the client's 10 s timeout, and nothing is replaced. The straggler's "
        "figures are reported, not bounded. Steady state within 40 s: its slow requests may hold the service's p95 TTFT "
        "above the steady-state bound for the 20 s of the fault. Capacity and the control plane are untouched.",
    )

    experiment(
        "engine-stutter", "a stuttering straggler: one replica's engine stopped 0.6 s of every 0.8 s for 20 s",
        "Throttles the engine process of one replica in zone-a (vLLM's EngineCore; the stream target's engine child) by "
        "a duty cycle of SIGSTOP and SIGCONT: running 0.2 s of every 0.8 s (factor 4) for 20 s, then continued. The "
        "replica stays alive and answering, slowly: nothing fails its health check. What Serve's router does with it is "
        "the finding, reported (summary.json straggler): the share of the requests the slow replica got against its "
        "fair share, and the p50/p95 TTFT and ITL of its requests against the other replicas' in the same interval. Its "
        "inter-token latency is bimodal (a burst of tokens, then 0.6 s of none); engine-slow is the even straggler.",
        "engine-stutter", [action("stutter-engine-in-zone-a", "stutter_engine", zone="zone-a", factor=4, period_s=0.2,
                               duration_s=20)],
        {"max_failed_requests": 0, "max_time_to_steady_state_s": 40, "must_recover": True,
         "max_control_plane_outage_s": 5, "max_time_to_capacity_restored_s": 60, "min_capacity_ratio": 0.6},
        "No request should fail: a stream of 16-48 tokens four times slower still ends well within the client's 10 s "
        "timeout, and nothing is replaced. The straggler's figures are reported, not bounded: how much of its fair share "
        "(1/3) the slow replica kept, and how much slower its requests were than the others', is what the run measures. "
        "Steady state within 40 s: its slow requests may hold the service's p95 TTFT above the steady-state bound for the "
        "20 s of the fault. Capacity and the control plane are untouched (the bounds of the other engine faults).",
    )

    experiment(
        "engine-wedge", "one replica's engine wedged in its step for good, no detector",
        "Wedges the engine of one replica in zone-a the way operators report real wedges (vllm-project/vllm #39863, "
        "#17972, #46811: the busy loop blocked without a timeout, /health 200 for hours, nothing decoding): the rig "
        "leaves the engine a request to wedge and sends SIGUSR1 to its fault hook (serve_apps/engine_faults.py), whose "
        "next step blocks while its I/O threads run on and its process stays out of state T. The rig never ends it "
        "during the run (unlike engine-hang's SIGSTOP, resumed after 20 s): only a detector could, and none is on "
        "here. The run's end releases it. engine-wedge-watchdog is the same wedge with the progress watchdog on.",
        "engine-wedge", [action("wedge-engine-in-zone-a", "wedge_engine", zone="zone-a")],
        {"max_failed_requests": 40, "max_time_to_steady_state_s": 40, "must_recover": True,
         "max_control_plane_outage_s": 5, "max_time_to_capacity_restored_s": 90, "min_capacity_ratio": 0.6},
        "The bounds of engine-hang-watchdog, which a detector meets: this run has none, so nothing takes the wedged "
        "replica out and the requests routed to it fail at the client's timeout until Serve's router stops picking "
        "it (64 of 241 on the stream target, 2026-12-06, twice; the service steady again after 24 s with the "
        "wedged replica still RUNNING, serving nothing); VIOLATED is the expected reading (a PASS here would mean "
        "the fault did not hold). The contrast case: what Serve does with a wedge when nothing looks at progress "
        "(its health check, like vLLM's, asks only whether the engine errored).",
        hypothesis_wait_s=5,
    )

    experiment(
        "engine-wedge-watchdog", f"one replica's engine wedged for good, the watchdog's second version on (stall_s {STALL_S})",
        "The wedge of engine-wedge (the engine of one replica in zone-a stuck in its step, its process alive and not "
        f"stopped, never ended by the rig) with the progress watchdog's second version on (app.watchdog 2, app.stall_s "
        f"{STALL_S}: serve_apps/watchdog_v2.py), so a replica whose engine has not stepped for {STALL_S} s with "
        "requests waiting fails its health check and "
        "Serve replaces it; the wedged engine goes with its replica. Compare it with engine-wedge (availproof report "
        "--compare): the detector's time to detect, failed requests, time to steady state.",
        "engine-wedge", [action("wedge-engine-in-zone-a", "wedge_engine", zone="zone-a")],
        {"max_failed_requests": 40, "max_time_to_steady_state_s": 40, "must_recover": True,
         "max_control_plane_outage_s": 5, "max_time_to_capacity_lost_s": WATCHDOG_DETECT_S,
         "max_time_to_capacity_restored_s": 90, "min_capacity_ratio": 0.6},
        f"Detected: the replica out of RUNNING (capacity lost) within {WATCHDOG_DETECT_S} s: stall_s {STALL_S} s of "
        f"no token with requests in flight, then Serve's {SERVE_HEALTH_FAILURES} failed checks at its 2 s period "
        "(<= 6 s) and the 0.5 s sampling: ~12 s, with room for a loaded machine. Never detected violates it, as "
        "engine-wedge does. Replaced: capacity restored within 90 s (a replacement starts in ~20 s on this machine "
        "class). Failed requests: those routed to the wedged replica until it is taken out (~12 s x 8 req/s / 3 = "
        "~32): 40. Steady state within 40 s of the wedge: detection and the replacement's first requests. The "
        "detector is the watchdog's second version (app.watchdog 2: the engine's step heartbeat, the oldest request "
        "without a first token, each stream's token age, an idle canary; serve_apps/watchdog_v2.py): the wedge stops "
        "the heartbeat with requests waiting.",
        app={"stall_s": STALL_S, "watchdog": 2},
    )

    experiment(
        "engine-garbage", "one replica's engine produces wrong tokens at full speed for good, no detector",
        "Makes the engine of one replica in zone-a produce garbage the way a corrupted device or kernel does "
        "(vllm-project/vllm #35718: garbled text after serving for some time; #14126: every answer '!!!!', the argmax "
        "of NaN logits; the class of silent data corruption on a faulty GPU): the rig leaves the engine a request "
        "naming garbage and the run and sends SIGUSR1 to its fault hook (serve_apps/engine_faults.py, "
        "serve_apps/held_faults.py); from its next step on its tokens are wrong (vLLM: the step's output token ids "
        "shifted by one; the stream target: its engine child says its steps are corrupted and every token they let "
        "out is '!'), at full speed, its health check passing. The rig never ends it during the run; its end "
        "releases it. The stream target's exact check (chaos/load/integrity.py, chaos/load/continuity.py) counts "
        "the wrong answers, failure class corrupted; on vLLM only a golden answer could tell, and none is recorded "
        "yet: its corrupted count is null with the reason.",
        "engine-garbage", [action("garble-engine-in-zone-a", "garble_engine", zone="zone-a")],
        {"max_failed_requests": 0, "max_time_to_steady_state_s": 40, "must_recover": True,
         "max_control_plane_outage_s": 5, "max_time_to_capacity_restored_s": 90, "min_capacity_ratio": 0.6},
        "Measured VIOLATED on the stream target (2026-12-06: 80 of 241 failed, every one corrupted; all 78 answers the "
        "bad replica gave from 1 s after the fault caught, none of the others'), as expected by design (no detector "
        "exists for wrong content: Serve's health check, "
        "like vLLM's, asks only whether the engine errored, and the watchdogs look only at progress): nothing takes "
        "the replica out, its latency is normal so Serve's router keeps sending it about its third of the 8 req/s, "
        "and every answer it gives from the fault to the run's end is corrupted (failure class corrupted), so "
        "failed requests far above 0 and no steady state (success ratio about 2/3 against 0.99). A PASS here would "
        "mean the fault did not hold, or the check missed it: the positive control of stream integrity (issue 44). "
        "Capacity is never lost (restored trivially) and the control plane is untouched (5 s allows a slow health "
        "answer).",
        hypothesis_wait_s=5,
    )

    experiment(
        "engine-stall", "one replica's engine admits no new request for good, no detector",
        "Stalls the engine of one replica in zone-a the way operators report schedulers that stop taking requests "
        "in while the engine reports healthy (vllm-project/vllm #53130: the scheduler permanently stops admitting, "
        "only a restart recovers; #45414: Running 0, Waiting 5-6 for 9+ minutes, probes at 200): the rig leaves the "
        "engine a request naming stall and the run and sends SIGUSR1 to its fault hook (serve_apps/engine_faults.py, "
        "serve_apps/held_faults.py); from its next step on it admits nothing new (vLLM: its KV-cache manager refuses "
        "the blocks of every request not yet started, vLLM's own 'no room' path; the stream target: its engine "
        "child's steps admit nothing) while the requests it runs step on and finish. The rig never ends it during "
        "the run; its end releases it.",
        "engine-stall", [action("stall-engine-in-zone-a", "stall_engine", zone="zone-a")],
        {"max_failed_requests": 40, "max_time_to_steady_state_s": 40, "must_recover": True,
         "max_control_plane_outage_s": 5, "max_time_to_capacity_restored_s": 90, "min_capacity_ratio": 0.6},
        "The bounds of engine-wedge, which a detector would meet. Measured VIOLATED on the stream target (2026-12-06: "
        "64 of 241 failed, every one at the client's deadline, steady again 24.5 s after, the replica never taken "
        "out), as expected by design (no detector): the requests running at the fault finish, and every request routed to the stalled replica after "
        "it waits for its first token until the client's 10 s timeout, until Serve's router (power of two choices "
        "on ongoing requests) stops picking it as its queue grows, as with the wedge (64 of 241 failed there, "
        "2026-12-06). Capacity is never lost (the replica stays RUNNING) and the control plane is untouched.",
        hypothesis_wait_s=5,
    )

    experiment(
        "engine-stall-watchdog", f"one replica's engine admits no new request for good, the watchdog's second version "
        f"on (stall_s {STALL_S})",
        "The stall of engine-stall (the engine of one replica in zone-a admits nothing new while its running requests "
        "finish, never ended by the rig) with the progress watchdog's second version on (app.watchdog 2, app.stall_s "
        f"{STALL_S}: serve_apps/watchdog_v2.py). The first version cannot see a partial hang (any token of any request "
        "resets its clock, and the running requests still stream); the second watches the age of the oldest request "
        "without a first token, so the replica fails its health check once a new request waited that long, and Serve "
        "replaces it.",
        "engine-stall", [action("stall-engine-in-zone-a", "stall_engine", zone="zone-a")],
        {"max_failed_requests": 40, "max_time_to_steady_state_s": 40, "must_recover": True,
         "max_control_plane_outage_s": 5, "max_time_to_capacity_lost_s": WATCHDOG_DETECT_S,
         "max_time_to_capacity_restored_s": 90, "min_capacity_ratio": 0.6},
        f"Detected: the replica out of RUNNING (capacity lost) within {WATCHDOG_DETECT_S} s, as engine-wedge-watchdog's "
        f"bound: a new request waiting {STALL_S} s for its first token, then Serve's {SERVE_HEALTH_FAILURES} failed "
        "checks at its 2 s period and the 0.5 s sampling. Never detected violates it. Replaced: capacity restored "
        "within 90 s. Failed requests: those routed to the stalled replica until it is taken out (40, engine-wedge's). "
        "Unmeasured yet: a run by hand, its figures in docs/findings.md.",
        hypothesis_wait_s=5, app={"stall_s": STALL_S, "watchdog": 2},
    )
