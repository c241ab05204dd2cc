"""Killing a Serve replica *through Ray* (``ray.kill`` on its actor), as an operator would.

Ray 2.60's dashboard has no actor-kill endpoint, so this needs a Ray driver. It runs in a
child process (never in the rig's own process, which stays free of any Ray connection):

- locally, :class:`ActorKiller` connects first and waits, so the fault mark is taken just
  before the kill itself and not before the driver's start-up (several seconds);
- on KubeRay, the same two phases inside the head container through exec (where
  ``ray.init(address="auto")`` finds the cluster): :func:`arm_script` starts a driver in the
  background that connects, looks the actor up and waits on a FIFO; :func:`fire_script` writes
  to the FIFO and waits for the driver's word. The connection is made before the fault's
  instant; the timed injection is one exec and the ``ray.kill`` itself.

The local driver starts without the variables that hold secrets (:mod:`chaos.system.secret_env`).
"""

from __future__ import annotations

import shlex
import subprocess
import sys

from chaos.system import secret_env
from chaos.base.errors import ClusterError

_TWO_PHASE = r"""
import sys, ray
ray.init(address=sys.argv[1], namespace="serve", logging_level="ERROR", log_to_driver=False)
handle = ray.get_actor(sys.argv[2], namespace="serve")
print("ready", flush=True)
if sys.stdin.readline().strip() == "kill":
    ray.kill(handle, no_restart=True)
    print("killed", flush=True)
"""

# The armed driver (KubeRay): connected and holding the actor's handle, it waits for one line on the FIFO
# PATH.fifo ("kill"), kills the actor and writes the outcome to PATH.done; PATH.ready holds "ready PID" or
# "error ..."; it exits by itself after LIFE seconds whatever happens.
ARMED = r"""
import os, sys, threading
path, name, life = sys.argv[1], sys.argv[2], float(sys.argv[3])
threading.Timer(life, lambda: os._exit(0)).start()
def put(suffix, text):
    with open(path + suffix + ".tmp", "w") as f:
        f.write(text)
    os.rename(path + suffix + ".tmp", path + suffix)
try:
    import ray
    ray.init(address="auto", namespace="serve", logging_level="ERROR", log_to_driver=False)
    handle = ray.get_actor(name, namespace="serve")
except Exception as e:
    put(".ready", "error " + " ".join(str(e).split())[:300])
    os._exit(1)
put(".ready", "ready %d" % os.getpid())
with open(path + ".fifo") as f:
    word = f.readline().strip()
if word == "kill":
    try:
        ray.kill(handle, no_restart=True)
        put(".done", "killed")
    except Exception as e:
        put(".done", "error " + " ".join(str(e).split())[:300])
os._exit(0)
"""
ARM_LIFE_S = 300  # an armed driver never fired (the run stopped before the kill) exits after this long


def _wait_file(path: str, tenths: int) -> str:
    return f'i=0; while [ ! -s "{path}" ] && [ $i -lt {tenths} ]; do sleep 0.1; i=$((i+1)); done; cat "{path}" 2>/dev/null'


def arm_script(kill_id: str, actor_name: str, life_s: float = ARM_LIFE_S, driver: str = ARMED) -> str:
    """Start the armed driver (in the head container) and wait up to 60 s for it to connect; prints
    "ready PID", or "error ..." (the driver could not connect or find the actor). ``driver``: the Python
    it runs (:data:`ARMED`; a test's stand-in speaks the same files)."""
    f = f"/tmp/{kill_id}"
    return (f": availproof-actor-kill arm {kill_id}; rm -f {f}.ready {f}.done {f}.fifo && mkfifo {f}.fifo && "
            f"nohup python -c {shlex.quote(driver)} {f} {shlex.quote(actor_name)} {int(life_s)} >/dev/null 2>&1 & "
            f"{_wait_file(f + '.ready', 600)}")


def fire_script(kill_id: str, driver_pid: int) -> str:
    """The kill: "kill" to the armed driver's FIFO, then its word within 10 s; prints "killed" or "error
    ...", and removes the driver's files. Exit 3 when the driver or its FIFO is gone (fired already, or
    past its life). The FIFO is opened read-write (Linux: no wait for a reader), so a driver that died
    without reading it never blocks the kill: no word comes, which is an error."""
    f = f"/tmp/{kill_id}"
    return (f": availproof-actor-kill fire {kill_id}; if [ ! -p {f}.fifo ] || ! kill -0 {int(driver_pid)} 2>/dev/null; "
            f"then echo 'the armed Ray driver is gone' >&2; exit 3; fi; exec 3<>{f}.fifo; echo kill >&3; "
            f"{_wait_file(f + '.done', 100)}; exec 3>&-; rm -f {f}.ready {f}.done {f}.fifo")


def disarm_script(kill_id: str, driver_pid: int) -> str:
    """An armed driver never to be fired (the kill refused after it was armed, e.g. its replica stayed idle): "disarm"
    to its FIFO (it exits without a kill), its pid SIGKILLed after 2 s if it is still that driver (its command line
    names the kill's files: never another process that took the pid), its files removed; prints "disarmed". Nothing
    left: nothing done, the same word."""
    f = f"/tmp/{kill_id}"
    pid = int(driver_pid)
    return (f": availproof-actor-kill disarm {kill_id}; if [ -p {f}.fifo ]; then exec 3<>{f}.fifo; echo disarm >&3; fi; "
            f"i=0; while grep -qaF {f} /proc/{pid}/cmdline 2>/dev/null && [ $i -lt 20 ]; do sleep 0.1; i=$((i+1)); done; "
            f"if grep -qaF {f} /proc/{pid}/cmdline 2>/dev/null; then kill -9 {pid}; fi; exec 3>&-; "
            f"rm -f {f}.ready {f}.done {f}.fifo; echo disarmed")


def parse_word(out: str, first: str) -> tuple[bool, str]:
    """(whether the last line of a script's output starts with ``first``, that line)."""
    line = (out.strip().splitlines() or [""])[-1].strip()
    return line.split(" ", 1)[0] == first, line


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
