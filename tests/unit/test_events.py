"""The record observers' one registry (chaos/recording/events.py): every subscriber called, in order; one that fails is
logged and counted, the others still called, and the producer never sees the exception."""

import logging
import threading

from chaos.scopes import faults
from chaos.recording import records as rec
from chaos.recording.events import Events


def test_a_failing_observer_is_logged_and_the_others_are_still_called(caplog):
    ev, seen = Events(), []

    def broken(payload):
        raise RuntimeError("disk full")

    ev.subscribe(ev.run_started, lambda h: seen.append(("first", h)))
    ev.subscribe(ev.run_started, broken)
    ev.subscribe(ev.run_started, lambda h: seen.append(("last", h)))
    with caplog.at_level(logging.ERROR, logger="chaos.recording.events"):
        ev.emit(ev.run_started, {"run_id": "x"})  # raises nothing
        ev.emit(ev.run_started, {"run_id": "y"})
    assert seen == [("first", {"run_id": "x"}), ("last", {"run_id": "x"}),
                    ("first", {"run_id": "y"}), ("last", {"run_id": "y"})]
    failing = [r for r in caplog.records if "run_started: " in r.getMessage()]
    assert len(failing) == 1  # its first failure, with the traceback; the second only counted
    assert "test_a_failing_observer_is_logged_and_the_others_are_still_called.<locals>.broken" in failing[0].getMessage()
    assert failing[0].exc_info[0] is RuntimeError
    assert list(ev.failures.values()) == [2]


def test_a_failing_observer_never_stops_the_producer():
    """The fault marker (a producer) marks and records all the same; the writer (an observer) still writes."""
    ev, written = Events(), []
    ev.subscribe(ev.fault_marked, lambda m: 1 / 0)
    ev.subscribe(ev.fault_marked, written.append)
    m = faults.Marker(ev)
    mark = m.mark(rec.INJECT_START, "node-1", "node", "worker-b", ["zone-b"])
    assert m.marks == [mark] and written == [mark]
    assert list(ev.failures) == ["fault_marked: test_a_failing_observer_never_stops_the_producer.<locals>.<lambda>"]


def test_subscribe_and_unsubscribe_from_any_thread_and_from_inside_an_emit():
    ev, seen = Events(), []

    def once(payload):  # an observer that subscribes another and leaves, while the emit runs
        ev.subscribe(ev.sample_taken, seen.append)
        ev.unsubscribe(ev.sample_taken, once)

    ev.subscribe(ev.sample_taken, once)
    ev.emit(ev.sample_taken, "a")  # the subscribers of this emit: those found when it began
    ev.emit(ev.sample_taken, "b")
    assert seen == ["b"]
    ev.unsubscribe(ev.sample_taken, once)  # not subscribed any more: nothing happens
    threads = [threading.Thread(target=lambda: [ev.subscribe(ev.request_done, seen.append) for _ in range(200)])
               for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(ev.request_done) == 800
    assert rec.Events is Events  # records.Events: the same registry
