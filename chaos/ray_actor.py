"""Killing a Serve replica *through Ray* (``ray.kill`` on its actor), as an operator would.

Ray 2.60's dashboard has no actor-kill endpoint, so this needs a Ray driver. It runs in a
child process (never in the rig's own process, which stays free of any Ray connection):

- locally, :class:`ActorKiller` connects first and waits, so the fault mark is taken just
  before the kill itself and not before the driver's start-up (several seconds);
- on KubeRay, :data:`ONE_SHOT` runs inside the head container (``kubectl exec``), where
  ``ray.init(address="auto")`` finds the cluster.

The local driver starts without the variables that hold secrets (:mod:`chaos.secret_env`).
"""

from __future__ import annotations

import subprocess
import sys

from chaos import secret_env
from chaos.errors import ClusterError

_TWO_PHASE = r"""
import sys, ray
ray.init(address=sys.argv[1], namespace="serve", logging_level="ERROR", log_to_driver=False)
handle = ray.get_actor(sys.argv[2], namespace="serve")
print("ready", flush=True)
if sys.stdin.readline().strip() == "kill":
    ray.kill(handle, no_restart=True)
    print("killed", flush=True)
"""

ONE_SHOT = ("import ray,sys; ray.init(address='auto', namespace='serve', logging_level='ERROR'); "
            "ray.kill(ray.get_actor(sys.argv[1], namespace='serve'), no_restart=True); print('killed')")


class ActorKiller:
    """A connected driver, ready to ``ray.kill`` one named actor of the ``serve`` namespace."""

    def __init__(self, gcs_address: str, actor_name: str, timeout: float = 60.0):
        if not actor_name:
            raise ClusterError("the replica has no actor name: cannot kill it through Ray")
        self.proc = subprocess.Popen([sys.executable, "-c", _TWO_PHASE, gcs_address, actor_name],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, start_new_session=True, env=secret_env.child_env())
        self.timeout = timeout
        line = self._line()
        if line != "ready":
            err = self._finish()
            raise ClusterError(f"could not attach a Ray driver to kill {actor_name}: {err}")

    def _line(self) -> str:
        import selectors

        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        if not sel.select(self.timeout):
            return ""
        return (self.proc.stdout.readline() or "").strip()

    def _finish(self) -> str:
        try:
            _, err = self.proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        lines = (err or "").strip().splitlines()
        return lines[-1] if lines else "no output"

    def kill(self) -> None:
        self.proc.stdin.write("kill\n")
        self.proc.stdin.flush()
        line = self._line()
        err = self._finish()  # closes stdin: the driver disconnects and exits
        if line != "killed":
            raise ClusterError(f"ray.kill failed: {err}")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
