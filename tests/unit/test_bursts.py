"""Bursts as bursts (issue 33): a trace of simultaneous arrivals, the benchmark's lag per burst, and the
harness opening a burst's connections ahead of its instant (``LeanTransport.prepare``)."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from bench import harness as bench
from chaos.load import trace
from chaos.load._transport import LeanTransport
from chaos.load.workload import LoadShape
from tests.unit.test_transport import Server


# ---------------------------------------------------------------- the trace
def test_a_burst_trace_has_its_bursts_in_turn_each_at_one_instant(tmp_path):
    rows = trace.bursts((16, 32), count=3, gap_ms=2000)
    assert len(rows) == 3 * (16 + 32)
    by_instant: dict[int, int] = {}
    for r in rows:
        by_instant[r["timestamp"]] = by_instant.get(r["timestamp"], 0) + 1
    assert by_instant == {0: 16, 2000: 32, 4000: 16, 6000: 32, 8000: 16, 10000: 32}
    assert len({r["hash_ids"][0] for r in rows}) == len(rows)  # a block each: never an empty prompt in vllm bench
    t = trace.load(str(trace.write(rows, tmp_path / "b.jsonl")))  # the rig reads it back as it is
    assert len(t.rows) == len(rows) and t.span_s == 10.0
    assert [o for o, _ in trace.replay(t, 2.0)][:17] == [0.0] * 16 + [1.0]


@pytest.mark.parametrize("kw", [{"count": 0}, {"gap_ms": 0}, {"sizes": ()}, {"sizes": (0,)}])
def test_a_burst_trace_refuses_empty_settings(kw):
    with pytest.raises(ValueError):
        trace.bursts(**kw)


# ---------------------------------------------------------------- the benchmark's figures
MS = 1_000_000


def test_arrivals_are_cut_into_bursts_at_the_gaps():
    arr = [5 * MS, 0, 1 * MS, 1000 * MS, 1002 * MS]
    assert bench.split_bursts(arr, 100 * MS) == [[0, MS, 5 * MS], [1000 * MS, 1002 * MS]]
    assert bench.split_bursts([], 100 * MS) == []


def test_burst_lags_against_the_planned_instants_and_the_first_arrival():
    planned = [0, 0, 2000 * MS, 2000 * MS, 2000 * MS]
    arrivals = [1 * MS, 3 * MS, 2000 * MS + MS // 2, 2002 * MS, 2010 * MS]
    lags = bench.burst_lags(arrivals, planned, 1000 * MS)
    assert lags[2] == {"planned": [1.0, 3.0], "first": [0.0, 2.0], "bursts": [2]}
    assert lags[3] == {"planned": [0.5, 2.0, 10.0], "first": [0.0, 1.5, 9.5], "bursts": [3]}
    # vllm bench serve: its planned instants are its own; bursts from the arrivals' gaps, lag from the first
    theirs = bench.burst_lags(arrivals, None, 1000 * MS)
    assert theirs[3] == {"planned": [], "first": [0.0, 1.5, 9.5], "bursts": [3]}
    assert bench.lag_figures([]) == "n/a"
    assert bench.lag_figures([3.0, 1.0, 2.0]) == "2.00 / 3.00 / 3.00"


# ---------------------------------------------------------------- connections opened ahead
class LoggingServer(Server):
    """Logs each connection accepted and each request read, in order, and when each connection was accepted."""

    def __init__(self):
        super().__init__()
        self.log: list[str] = []
        self.accepted_ns: list[int] = []

    async def handle(self, reader, writer):
        self.log.append("connect")
        self.accepted_ns.append(time.time_ns())
        await super().handle(reader, writer)

    async def answer(self, method, path, w):
        self.log.append("request")
        return await super().answer(method, path, w)


def test_prepare_opens_one_connection_per_announced_send_and_none_spare():
    async def main():
        server = await LoggingServer().start()
        url = f"http://127.0.0.1:{server.port}/len"
        transport = LeanTransport()
        async with httpx.AsyncClient(transport=transport, trust_env=False) as client:
            transport.prepare(url, 1.0)
            transport.prepare(url, 1.0)
            for _ in range(100):  # bounded: the two connects on loopback
                if server.connections == 2:
                    break
                await asyncio.sleep(0.01)
            opened_ahead = server.connections
            got = await asyncio.gather(client.post(url, json={}), client.post(url, json={}))
            assert [r.content for r in got] == [b"hello", b"hello"]
            after_burst = server.connections
            for _ in range(3):  # one send at a time: the idle connection is spare, nothing more is opened
                transport.prepare(url, 1.0)
                assert (await client.post(url, json={})).content == b"hello"
        await server.stop()
        return opened_ahead, after_burst, server.connections, server.log

    opened_ahead, after_burst, total, log = asyncio.run(main())
    assert opened_ahead == 2 and after_burst == 2 and total == 2
    assert log[:2] == ["connect", "connect"]


def test_prepare_to_a_refusing_origin_is_left_to_the_send():
    from chaos.backends.local import ports

    async def main():
        transport = LeanTransport()
        url = f"http://127.0.0.1:{ports.free_port()}/len"
        async with httpx.AsyncClient(transport=transport, trust_env=False) as client:
            transport.prepare(url, 1.0)
            await asyncio.sleep(0.05)
            with pytest.raises(httpx.ConnectError):
                await client.post(url, json={})

    asyncio.run(main())


def test_a_burst_finds_every_connection_open_at_its_instant(tmp_path):
    """16 requests at one instant: every connection was accepted before that instant (opened during the
    send lead, 50 ms; before, each request connected at its instant, and a first burst of 16 left over
    ~7 ms, one of 32 with 16 idle connections over ~10 ms, on the benchmark's server)."""
    from tests.unit.loopback import run_against

    path = str(trace.write(trace.bursts((16,), count=1, gap_ms=1000, output_length=2), tmp_path / "b.jsonl"))
    shape = LoadShape(mode="open", trace=path, duration_s=2.0, max_requests=16, warmup_s=0, timeout_s=5,
                      route="completions", model="m")
    got, footer, server, _ = run_against(LoggingServer(), shape)
    assert footer["sent"] == len(got) == 16 and all(r.ok for r in got), [r.detail for r in got if not r.ok][:3]
    assert server.log[:16] == ["connect"] * 16 and server.log.count("connect") == 16
    assert max(server.accepted_ns) < min(r.planned_ns for r in got)
    assert all(r.sent_ns >= r.planned_ns - 50_000 for r in got)  # none before the instant
