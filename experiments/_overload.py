"""The overload experiment (issue 48: overload that refuses instead of timing out), written by ``experiments/_make.py``
from its template (:func:`make`). Variants (without fast refusal, with client retries): ``bench/overload_table.py``
writes them from this file and runs each (docs/experiments.md, "overload")."""

BEFORE_S = 30  # 0.5 x capacity: the warm-up (5 s), the baseline (10 s) and the baseline gate's look, then steady
STEP_S = 30  # 2 x capacity
AFTER_S = 90  # 0.5 x capacity again: the queues drain, goodput comes back
# Serve's own admission (serve_apps/admission.py): 8 requests at once per replica (3 replicas: 24 in flight, what
# bounds the stream target's capacity, ~1 s streams), 8 more may wait at each proxy; beyond, a 503 with Retry-After
ADMISSION = {"max_ongoing_requests": 8, "max_queued_requests": 8, "status_code": 503, "retry_after_s": 1}


def make(experiment, action, load, steady):
    """Write overload with ``experiment`` and ``action`` (the template's), its load from ``load`` (the template's)."""
    experiment(
        "overload", "step the load from 0.5x to 2x the measured capacity and back, the service refusing fast",
        f"No fault on the cluster: the load itself steps from 0.5 x to 2 x the capacity `availproof capacity` measured "
        f"for this deployment ({BEFORE_S} s, then {STEP_S} s, then {AFTER_S} s; load.stages stating utilizations, "
        "seeded), and the overload scope marks the step. The app admits 8 requests at once per replica and lets 8 "
        "wait at each proxy; beyond, Serve's proxy refuses at once with a 503 and Retry-After: 1 (app.admission, "
        "fast refusal). summary.json's overload says per phase (before, during, after the step) the goodput, the "
        "refusals against the timeouts and the TTFT p99, and the time from the step's end until goodput is back. "
        "Run it with --capacity FILE (availproof capacity experiments/overload.json); its variants (requests waiting "
        "instead of refused; a client retrying) with bench/overload_table.py.",
        "overload", [action("step-the-load-above-capacity", "step_load", at_s=BEFORE_S, step_s=STEP_S)],
        {"must_recover": True, "max_time_to_steady_state_s": STEP_S + 30, "max_control_plane_outage_s": 5},
        f"Overload fails requests by design (what is measured is how: refused at once or timed out), so no bound on "
        f"failed requests. Steady state within {STEP_S + 30} s of the step's start: the step lasts {STEP_S} s, and "
        "with fast refusal nothing waits longer than a proxy's 8 queued requests take to serve (well under the "
        "load's 10 s timeout), so the queues are empty within a steady-state window or two of the step's end. The "
        "control plane is not touched (5 s allows one slow health answer on a loaded machine).",
        load={**{k: v for k, v in load.items() if k != "rate"}, "duration_s": BEFORE_S + STEP_S + AFTER_S,
              "stages": [{"utilization": 0.5, "duration_s": BEFORE_S}, {"utilization": 2.0, "duration_s": STEP_S},
                         {"utilization": 0.5, "duration_s": AFTER_S}]},
        steady_state=steady,
        app={"admission": ADMISSION},
        recovery_window_s=AFTER_S - 10,  # the load runs to the schedule's end: the step's end + AFTER_S
        # the whole window, never ended early once the planes are back (the first runs, 2026-12-06, stopped the load
        # 7 s after the step: the after phase, and goodput's recovery, had nothing to measure)
        recovery_settle_s=0,
        hypothesis_wait_s=60,
    )
