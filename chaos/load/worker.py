"""One load worker process: ``python -m chaos.load.worker FD`` (started by :mod:`chaos.load.workers`).

It talks to the rig over the socket ``FD`` (a :class:`multiprocessing.connection.Connection`):

1. receives its spec (the load shape, the targets, its share of the run's plan, its records file);
   opens the records file and answers ``("ready", pid)``;
2. answers ``("ping", k)`` with ``("pong", k, time_ns, monotonic_ns)`` (the rig measures the
   clock offset) until ``("go", t0_monotonic, started_ns)``: the run's start, shared by every worker;
3. runs its share on its own event loop (:class:`chaos.load.harness.LoadRun` in a thread), each
   request written to its own records file as it finishes; sends ``("counts", {...})`` twice a
   second and stops at ``("stop",)``, or by itself at the end of its share, ``duration_s``, or when the
   rig's end of the socket closes (the rig died: nothing is left running);
4. sends ``("done", footer, counts, cpu_s, error)``, answers pings again (the clock at the end)
   until ``("exit",)``, or 60 s.

It runs in a session of its own (Ctrl-C reaches the rig, which stops it through the socket).
"""

from __future__ import annotations

import os
import resource
import sys
import time
from multiprocessing.connection import Connection


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _pong(conn: Connection, msg) -> None:
    conn.send(("pong", msg[1], time.time_ns(), time.monotonic_ns()))


def load_run(spec: dict, events, start_at: tuple[float, int], clock_ns=time.time_ns):
    """The :class:`~chaos.load.harness.LoadRun` of a worker's spec (:meth:`chaos.load.pool.LoadPool.spec`):
    its share of the run's plan, started at ``start_at`` (monotonic, wall ns), its records stamped with
    ``clock_ns`` (the wall clock of the machine it runs on). Shared by this process and a pod's worker
    (:mod:`chaos.load.pod_worker`)."""
    from chaos.load.harness import LoadRun
    from chaos.load.workload import LoadShape, PlannedRequest, Target

    targets = [Target(**t) for t in spec["targets"]]
    shape = LoadShape.from_dict(spec["shape"])
    share = [PlannedRequest(id=i, offset_s=o, target=targets[ti], prompt=p, max_tokens=m, prompt_len=pl, clipped=c,
                            prefix_group=g)  # a trace row's shared first block: the warm-up counts it
             for i, o, ti, p, m, pl, c, g in spec["share"]]
    transport = None
    if spec.get("ca_file") or any(t.url.startswith("https://") for t in targets):
        import ssl

        from chaos.load._transport import LeanTransport

        ca = spec.get("ca_file")
        transport = LeanTransport(ssl_context=ssl.create_default_context(cafile=ca) if ca else None)
    return LoadRun(targets, shape, events, routing=spec["routing"], allow_hosts=tuple(spec["allow_hosts"]),
                   transport=transport, run_id=spec["run_id"], header_extra=spec["header_extra"],
                   headers=spec["headers"], worker=spec["worker"], share=share, start_at=start_at, clock_ns=clock_ns)


def serve(conn: Connection) -> int:
    from chaos.recording import records as rec
    from chaos.load.workload import LoadShape

    spec = conn.recv()
    shape = LoadShape.from_dict(spec["shape"])
    events = rec.Events()
    writer = rec.RecordWriter(spec["records"]).attach(events)
    footer: dict = {}
    events.run_stopped.append(footer.update)
    conn.send(("ready", os.getpid()))
    while True:
        msg = conn.recv()
        if msg[0] == "ping":
            _pong(conn, msg)
        elif msg[0] == "go":
            start_at = (float(msg[1]), int(msg[2]))
            break
        else:  # stopped before the start
            writer.close()
            return 0
    run = load_run(spec, events, start_at)
    cpu0 = _cpu_s()
    run.start()
    orphaned = False
    while run.running:
        try:
            if conn.poll(0.5):
                if conn.recv()[0] == "stop":
                    run.stop()
            else:
                conn.send(("counts", dict(run.counts)))
        except (EOFError, OSError):  # the rig is gone: stop, finish what is in flight, exit
            run.stop()
            orphaned = True
            break
    error = None
    try:
        run.join(timeout=max(shape.timeout_s, shape.drain_bound_s()) + 60)  # retries: every attempt
    except BaseException as e:  # noqa: BLE001 - reported to the rig
        error = f"{type(e).__name__}: {e}"[:300]
    cpu = _cpu_s() - cpu0
    writer.close()
    if orphaned:
        return 1
    try:
        conn.send(("done", footer, dict(run.counts), cpu, error))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and conn.poll(max(0.0, deadline - time.monotonic())):
            msg = conn.recv()
            if msg[0] == "ping":
                _pong(conn, msg)
            elif msg[0] == "exit":
                break
    except (EOFError, OSError):
        return 1
    return 0 if error is None else 1


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].isdigit():
        print("usage: python -m chaos.load.worker FD (started by chaos.load.workers)", file=sys.stderr)
        return 2
    conn = Connection(int(argv[0]))
    try:
        return serve(conn)
    except EOFError:
        return 1
    finally:
        conn.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
