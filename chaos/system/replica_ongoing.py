"""A kill that waits for its replica to be serving (``kill_replica(min_ongoing=N)``).

A replica killed while it serves nothing tests nothing of what its requests go through (a migration above
all: ``experiments/replica-kill-migration.json``): at 8 requests a second over three replicas and streams of
under a second, the victim had no stream in flight at the kill in about one run in eight (the project's CI of
2026-12-06, 22:58 UTC: 0 streams migrated). In production a replica dies while it serves.

So the kill can wait until the replica has at least N ongoing requests, as Serve itself counts them: Serve's
router asks every replica its queue length with the same call (``ReplicaActor.get_num_ongoing_requests``, run
in the replica's own concurrency group, never blocked by the user's code: ``ray.serve._private.request_router.
replica_wrapper``). A Ray driver polls it every :data:`POLL_S` seconds and answers one line:

- ``busy K``: K >= N requests ongoing at the last read (the driver exits at once, without Ray's shutdown, so the
  kill follows within milliseconds);
- ``idle M``: never N within the wait (M: the most seen); the kill is refused, nothing marked;
- ``error ...``: the driver could not attach or the replica did not answer.

The driver runs in a child process (local; never in the rig's own process, which keeps no Ray connection) or
in the head container through one exec (KubeRay, ``ray.init(address="auto")``). Its connection takes seconds
and happens before the fault's mark, like the armed actor kill's (:mod:`chaos.system.ray_actor`).
"""

from __future__ import annotations

import shlex
import subprocess
import sys

from chaos.base.errors import ClusterError
from chaos.system import secret_env

POLL_S = 0.05
CONNECT_S = 60.0  # ray.init and the actor's lookup, on a loaded 2-core machine

DRIVER = r"""
import os, sys, time
address, name, at_least, wait_s, poll_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
try:
    import ray
    ray.init(address=address, namespace="serve", logging_level="ERROR", log_to_driver=False)
    handle = ray.get_actor(name, namespace="serve")
    end, most = time.monotonic() + wait_s, 0
    while True:
        n = int(ray.get(handle.get_num_ongoing_requests.remote(), timeout=10))
        most = max(most, n)
        if n >= at_least:
            print("busy %d" % n, flush=True)
            os._exit(0)  # at once: the kill follows this line, not Ray's shutdown of the driver (seconds on 2 cores)
        if time.monotonic() >= end:
            print("idle %d" % most, flush=True)
            os._exit(0)
        time.sleep(poll_s)
except Exception as e:
    print("error " + " ".join(str(e).split())[:300], flush=True)
    os._exit(0)
"""


def script(actor_name: str, at_least: int, wait_s: float, address: str = "auto", driver: str = DRIVER) -> str:
    """The shell command that runs the driver (KubeRay: in the head container), killed past ``wait_s`` plus
    :data:`CONNECT_S` (no answer: an error); ``driver``: a test's stand-in."""
    return (f": availproof-replica-ongoing; timeout {int(wait_s + CONNECT_S)} python -c {shlex.quote(driver)} "
            f"{shlex.quote(address)} {shlex.quote(actor_name)} {int(at_least)} {float(wait_s)} {POLL_S}")


def verdict(replica_id: str, at_least: int, wait_s: float, out: str) -> int:
    """The ongoing count the driver's answer ``out`` reports (K of ``busy K``); raise :class:`ClusterError`,
    saying why, for ``idle`` (the kill is refused), ``error`` or no answer."""
    line = (out.strip().splitlines() or [""])[-1].strip()
    word, _, rest = line.partition(" ")
    if word == "busy" and rest.isdigit() and int(rest) >= at_least:
        return int(rest)
    if word == "idle":
        raise ClusterError(f"replica {replica_id} never had {at_least} ongoing request(s) within {wait_s:g} s "
                           f"(at most {rest}): not killed (min_ongoing asks for a replica that serves)")
    raise ClusterError(f"replica {replica_id}: its ongoing requests could not be read ({line or 'no answer'})")


def wait_local(gcs_address: str, actor_name: str | None, replica_id: str, at_least: int, wait_s: float,
               driver: str = DRIVER) -> int:
    """The local backend's wait: the driver in a child process (without the variables that hold secrets),
    bounded by ``wait_s`` plus :data:`CONNECT_S`; its ongoing count (:func:`verdict`)."""
    if not actor_name:
        raise ClusterError(f"replica {replica_id} has no actor name: its ongoing requests cannot be read")
    try:
        done = subprocess.run([sys.executable, "-c", driver, gcs_address, actor_name, str(int(at_least)),
                               str(float(wait_s)), str(POLL_S)], capture_output=True, text=True,
                              timeout=wait_s + CONNECT_S, env=secret_env.child_env())
    except subprocess.TimeoutExpired:  # run() killed the driver
        raise ClusterError(f"replica {replica_id}: the driver reading its ongoing requests did not answer within "
                           f"{wait_s + CONNECT_S:g} s") from None
    return verdict(replica_id, at_least, wait_s, done.stdout)
