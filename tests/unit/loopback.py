"""A loopback server on an asyncio loop of its own thread, and the harness run against it: what the
harness tests share."""

from __future__ import annotations

import asyncio
import threading

from chaos.recording import records as rec
from chaos.load.harness import LoadRun
from chaos.load.workload import LoadShape, Target


def run_against(server, shape: LoadShape, zone: str | None = None, region: str | None = None):
    """Start ``server`` (an object with ``async start()`` returning itself with a ``port``, and optionally
    ``async stop()``) on its own loop and thread, run the harness with ``shape`` against it; returns (the
    requests recorded, the footer, the server, the run)."""
    loop = asyncio.new_event_loop()
    server = loop.run_until_complete(server.start())
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    try:
        events = rec.Events()
        got: list[rec.RequestRecord] = []
        events.request_done.append(got.append)
        run = LoadRun([Target("t", f"http://127.0.0.1:{server.port}", zone, region)], shape, events)
        footer = run.run()
    finally:
        if hasattr(server, "stop"):
            asyncio.run_coroutine_threadsafe(server.stop(), loop).result(5)
        loop.call_soon_threadsafe(loop.stop)
        t.join(5)
    return got, footer, server, run
