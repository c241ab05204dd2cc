"""No fault without proof (chaos.scopes.faults.prove, chaos.backends.local.effect): a fault looks at the system
until it sees itself in effect, within its scope's bound; what it saw, and when, is its `effect`."""

import socket
import threading

from chaos import analysis
from chaos.scopes import faults
from chaos.recording import records as rec
from chaos.core import verdict
from chaos.backends.local import effect
from chaos.scopes.node import kill_node


class Looks:
    """A backend whose effect checks turn true after ``after`` looks (never: None)."""

    def __init__(self, after: int | None):
        self.after, self.looks = after, 0

    def effect_checks(self, fault):
        self.looks += 1
        done = self.after is not None and self.looks > self.after
        return [{"check": "the victim gone", "ok": done, "seen": "gone" if done else "alive"},
                {"check": "the GCS holds it dead", "ok": True, "seen": "DEAD"}]

    def kill_node(self, node):
        return [1, 2, 3]

    def nodes_in(self, zone=None, region=None):
        return ["worker-b"]

    def zone_of(self, node):
        return "zone-b"


def test_a_fault_is_proven_when_every_check_is_seen_and_the_proof_is_in_its_marks():
    b, m = Looks(after=2), faults.Marker()
    f = kill_node(b, m, node="worker-b")
    e = f["effect"]
    assert e["verified"] is True and b.looks == 3 and e["time_to_effect_s"] >= 2 * 0.25 * 0.9
    assert e["bound_s"] == faults.EFFECT_BOUND_S["node"]
    gcs = next(c for c in e["checks"] if c["check"] == "the GCS holds it dead")
    victim = next(c for c in e["checks"] if c["check"] == "the victim gone")
    assert gcs["t_s"] < victim["t_s"] == e["time_to_effect_s"]  # each check: when it was first seen true
    end = m.marks[1]
    assert end.event == rec.INJECT_END and end.detail["effect"] == e
    # the summary carries it as the fault's effect, from the marks alone
    (fault,) = analysis.faults_from_marks(m.marks)
    assert fault.detail["effect"] == e


def test_a_fault_not_seen_in_effect_within_its_bound_is_recorded_so_and_the_run_is_an_error():
    b, m = Looks(after=None), faults.Marker()
    with m.inject("node", "worker-b", ["zone-b"]) as f:
        e = faults.prove(b, m, f, bound_s=0.6, poll_s=0.1)
    assert e["verified"] is False and e["time_to_effect_s"] is None and 5 <= b.looks <= 8
    assert [c["ok"] for c in e["checks"]] == [False, True]
    v = verdict.decide({"faults": [{"scope": "node", "target": "worker-b", "effect": e}], "bounds": {"results": []}},
                       {"status": "completed", "run": []})
    assert v["word"] == verdict.ERROR and v["reasons"] == ["fault not in effect: node worker-b"]


def test_a_look_that_fails_proves_nothing_and_is_looked_at_again():
    class Flaky(Looks):
        def effect_checks(self, fault):
            if self.looks == 0:
                self.looks += 1
                raise OSError("the dashboard did not answer")
            return super().effect_checks(fault)

    b, m = Flaky(after=1), faults.Marker()
    with m.inject("node", "worker-b", ["zone-b"]) as f:
        e = faults.prove(b, m, f, bound_s=5, poll_s=0.05)
    assert e["verified"] is True


def test_the_outage_is_counted_from_the_injection_not_from_the_end_of_its_proof():
    import time

    class Slow(Looks):
        def start_node(self, node):
            self.started_at = time.monotonic()

    b, m = Slow(after=4), faults.Marker()  # the proof takes ~1 s of the 1.5 s outage
    t0 = time.monotonic()
    kill_node(b, m, node="worker-b", outage_s=1.5)
    assert 1.4 <= b.started_at - t0 < 2.2


# ---------------------------------------------------------------- the cut's proof, on loopback
class Server:
    """A keep-alive server on loopback that answers every request, until it is 'cut': then it answers
    nothing more and accepts no connection (its listening socket closed)."""

    def __init__(self):
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)  # a cut's silent listener may follow
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(8)
        self.port = self.listener.getsockname()[1]
        self.cut = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                c, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(c,), daemon=True).start()

    def _serve(self, c):
        while c.recv(4096):
            if not self.cut.is_set():
                c.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")

    def stop_listening(self):
        self.cut.set()
        # shutdown first: a close alone leaves the kernel's socket listening while the accept thread
        # is blocked in it (new connections would still be accepted)
        try:
            self.listener.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.listener.close()

    def apply_cut(self):
        """Silence, as a cut path gives: nothing answered, and a new connection's SYN never answered (a
        listener on the port that accepts nothing, its one-slot backlog already full)."""
        self.stop_listening()
        self.hole = socket.socket()
        self.hole.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        self.hole.bind(("127.0.0.1", self.port))
        self.hole.listen(0)
        self.filler = socket.create_connection(("127.0.0.1", self.port), timeout=1)  # the one slot, never accepted


def test_the_cut_probe_needs_the_established_connection_silent_and_new_ones_unanswered():
    s = Server()
    probe = effect.CutProbe("127.0.0.1", s.port, timeout_s=2.0).open()  # 2 s: an answer on a loaded machine
    try:
        before = probe.checks()
        assert [c["ok"] for c in before] == [False, False]  # not cut: it answers and accepts
        assert before[0]["seen"].startswith("answered") and before[1]["seen"] == "accepted"
        s.apply_cut()
        after = probe.checks()
        assert [c["ok"] for c in after] == [True, True], after
        assert "no answer within" in after[0]["seen"] and after[1]["seen"].startswith("not answered")
    finally:
        probe.close()


def test_a_refused_connection_is_an_answer_across_the_path_not_a_cut():
    """A server that stops listening refuses new connections: the refusal (an RST) crossed the path, so the
    path carries: not a cut (issue 34: the probe counted it as one)."""
    s = Server()
    probe = effect.CutProbe("127.0.0.1", s.port, timeout_s=2.0).open()
    try:
        s.stop_listening()
        after = probe.checks()
        assert after[1]["ok"] is False and after[1]["seen"] == "answered (ConnectionRefusedError): the path carries"
    finally:
        probe.close()


def test_pids_gone_and_stopped_say_what_they_saw():
    import os

    me = os.getpid()
    assert effect.pids_gone([me], "the replica's worker process")["ok"] is False
    assert effect.pids_gone([], "the replica's worker process") == {
        "check": "the replica's worker process gone", "ok": False, "seen": "no process was named"}
    assert effect.pids_stopped([me])["ok"] is False  # running, not stopped
