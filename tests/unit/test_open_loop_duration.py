"""An open loop whose schedule has no send left before its duration (the scorecard's idle and sparse loads): the load
stays on until ``duration_s`` (chaos/load/harness.py), through the transport seam (httpx.MockTransport, no cluster)."""

from __future__ import annotations

import json
import threading
import time

import httpx

from chaos.load.harness import LoadRun
from chaos.load.workload import LoadShape, Target
from chaos.recording import records as rec


def _ok(request: httpx.Request) -> httpx.Response:
    events = [{"choices": [{"index": 0, "delta": {"content": " w"}, "finish_reason": "length"}]},
              {"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 1}}]
    body = b"".join(b"data: %s\n\n" % json.dumps(e).encode() for e in events) + b"data: [DONE]\n\n"
    return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)


def _run(shape: LoadShape, stop_after: float | None = None) -> tuple[list[rec.RequestRecord], float]:
    events = rec.Events()
    got: list[rec.RequestRecord] = []
    events.request_done.append(got.append)
    run = LoadRun([Target("t", "http://127.0.0.1:9", "zone-a")], shape, events, transport=httpx.MockTransport(_ok))
    t0 = time.monotonic()
    if stop_after is not None:
        threading.Timer(stop_after, run.stop).start()
    run.run()
    return got, time.monotonic() - t0


def test_an_open_load_whose_next_arrival_falls_past_its_duration_stays_on_until_its_duration():
    """The scorecard's idle load (one request at 0, the next past duration_s): the load must stay on (its run
    measuring, a fault injectable) until duration_s, not end after its one send (2026-12-07: every 'none' cell
    refused its fault, the run no longer measuring). Stopped early, it ends at once."""
    shape = LoadShape(mode="open", arrival="constant", rate=0.1, duration_s=1.5, warmup_s=0, timeout_s=5,
                      max_requests=100, model="m", seed=3)
    got, took = _run(shape)
    assert len(got) == 1 and got[0].ok, got  # one send at 0, the next at 10 s: past the duration
    assert took >= 1.4, took  # on until its duration, not over after its one request
    got, took = _run(shape, stop_after=0.3)
    assert len(got) == 1 and took < 1.2, (got, took)  # stopped: over at once


def test_a_load_bounded_by_its_count_ends_at_its_last_send():
    shape = LoadShape(mode="open", arrival="constant", rate=20, duration_s=30, warmup_s=0, timeout_s=5,
                      max_requests=3, model="m", seed=3)
    got, took = _run(shape)
    assert len(got) == 3 and took < 5, (len(got), took)  # max_requests: no wait for duration_s
