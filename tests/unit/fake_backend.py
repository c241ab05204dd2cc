"""A test backend with every member of the interface (chaos.backends.base.Backend): the members a
test does not define raise, so a call nobody expected fails the test instead of passing unseen. Its
scopes are the ones a test registers (``implementations``, as a real backend's: plan and effect_checks
go to them); it registers none."""

from chaos.backends import base


def _unexpected(name: str):
    def call(self, *args, **kwargs):
        raise AssertionError(f"{type(self).__name__}.{name} was called, which this test does not expect")

    return call


class FakeBackend(base.ByScope):
    name = "fake"
    capabilities: frozenset[str] = frozenset()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for member in base.members():
            if not hasattr(cls, member):
                setattr(cls, member, _unexpected(member))


class OneProxyBackend(FakeBackend):
    """A fake whose one Serve proxy is a loopback port (``self.port``, set by the subclass): what the run
    core asks of a backend's targets, answered for it."""

    port: int

    def targets(self):
        return [("worker-a", f"http://127.0.0.1:{self.port}", "zone-a", "region-1")]

    def head_target(self):
        return ("head", f"http://127.0.0.1:{self.port}", None, None)

    def own_hosts(self):
        return ()

    def describe(self):
        return {"backend": "fake"}

    def front_door(self):
        return {"shape": "direct", "what": "the client sends to the one proxy itself"}

    def prepare(self, run_id, scope, faults=None):
        self.run_id = run_id

    def graceful_shutdown(self):
        return {}

    def topology_doc(self):
        return {}



# ---------------------------------------------------------------- the local backend over tiny real processes
ENGINE_CHILD = """
import os, signal, sys, time
mode = sys.argv[1]
def record():  # the app's hook's tombstone (serve_apps.engine_faults.tombstone_path)
    with open("/tmp/availproof-engine-error-%d" % os.getpid(), "w") as f:
        f.write("%.3f\\n" % time.time())
if mode == "exit":  # the app's hook: the engine errs, records it and exits (the stream target's engine exits 70)
    signal.signal(signal.SIGUSR1, lambda s, f: (record(), os._exit(70)))
elif mode == "record":  # the hook as on vLLM: the engine errs and records it; its process lives on
    signal.signal(signal.SIGUSR1, lambda s, f: record())
elif mode == "stay":  # a handler that does nothing: no error raised, nothing recorded
    signal.signal(signal.SIGUSR1, lambda s, f: None)
os.write(1, b"ready %d\\n" % os.getpid())  # one write: two engines' lines do not interleave
while True:
    time.sleep(0.05)
"""
REPLICA = """
import subprocess, sys, time
for i in range(int(sys.argv[2])):
    subprocess.Popen(["availproof::EngineCore", "-c", sys.argv[3], sys.argv[1]], executable=sys.executable)
while True:
    time.sleep(0.05)
"""


class TinyReplica:
    """A "replica": a process of a session of its own (as a node's session on the local cluster) whose children
    are ``engines`` "engine" processes (``availproof::EngineCore`` in their command line) in ``mode``: ``exit``
    (SIGUSR1 makes it write its tombstone and exit, as the stream target's hook does), ``record`` (writes its
    tombstone and lives on, as vLLM's engine does), ``stay`` (a SIGUSR1 handler that does nothing), ``none``
    (no handler: SIGUSR1 would kill it). A context manager: on leaving, its session (its own id) is SIGKILLed
    and its engines' tombstones removed."""

    def __init__(self, mode: str = "exit", engines: int = 1):
        import subprocess
        import sys

        self.proc = subprocess.Popen([sys.executable, "-c", REPLICA, mode, str(engines), ENGINE_CHILD],
                                     start_new_session=True, stdout=subprocess.PIPE)
        self.pid = self.proc.pid
        try:
            self._wait_ready(engines)
        except BaseException:
            self.__exit__()
            raise

    def _wait_ready(self, engines: int, timeout_s: float = 30.0) -> None:
        """Each engine says ``ready`` once its handler is in place (one write each); at most ``timeout_s``."""
        import os
        import select
        import time

        seen, deadline = b"", time.monotonic() + timeout_s
        while seen.count(b"ready") < engines:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0.0, left))
            chunk = os.read(self.proc.stdout.fileno(), 256) if ready else b""
            assert chunk, f"the engines did not all start within {timeout_s:g} s: {seen!r}"
            seen += chunk
        self.engine_pids = [int(w) for w in seen.split()[1::2]]

    def replica(self, zone: str = "zone-a"):
        from chaos.system.placement import Replica

        return Replica(app="llm", deployment="StreamTarget", replica_id="r1", state="RUNNING", actor_name=None,
                       actor_id=None, pid=self.pid, node_ip="127.0.0.1", node="w", zone=zone, region=None)

    def backend(self):
        """A LocalBackend whose cluster's one node session is this replica's."""
        from types import SimpleNamespace

        from chaos.backends.local.backend import LocalBackend

        cluster = SimpleNamespace(state=SimpleNamespace(nodes={"w": SimpleNamespace(sid=self.pid)}, cluster_id="tiny"))
        return LocalBackend(cluster)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        import os
        import signal

        try:
            os.killpg(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)
        self.proc.stdout.close()
        for pid in getattr(self, "engine_pids", []):
            try:
                os.unlink(f"/tmp/availproof-engine-error-{pid}")
            except FileNotFoundError:
                pass
