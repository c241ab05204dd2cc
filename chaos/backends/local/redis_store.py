"""The GCS store of a local cluster: its Redis, started, watched and killed by the recorded PID (while it is
still ``redis-server`` with the cluster's address, leading its session: once a process exited, its PID can
be any other), and the head restarted when its GCS exits after losing Redis, as a kubelet would."""

from __future__ import annotations

import signal
import time
from pathlib import Path

from chaos.backends.local import netns, procs, redis
from chaos.backends.local.nodes import HEAD
from chaos.base.errors import UsageError

# Measured with Ray 2.60: the GCS exits about 4 s after its Redis connection breaks, even when
# Redis is back within 0.1 s. After a Redis restart, watch the head this long (from the kill).
GCS_EXIT_AFTER_REDIS_S = 10.0


class RedisStore:
    """Start, watch and kill the cluster's Redis.

    What it uses of the host class (:class:`~chaos.backends.local.cluster.LocalCluster`): ``state``, ``log``,
    ``_lock``, ``_save``, ``_child_env``, ``core_alive``, ``restart_head``,
    ``_redis_killed_at`` (set at ``__init__``).
    """

    def start_redis(self) -> bool:
        """Bring Redis back (same port, same append-only file), and the GCS with it.

        A GCS whose Redis went away exits a few seconds later, even when Redis is back at once:
        watch the head until ``GCS_EXIT_AFTER_REDIS_S`` after the kill and restart it if its GCS
        exited (as a kubelet restarts the head container). Returns whether the GCS had exited.
        """
        with self._lock:
            r = self.state.redis
            if r is None:
                raise UsageError("this cluster runs without GCS fault tolerance: it has no Redis")
            if self.redis_alive():
                return False
            r.pid = redis.start(r.host, r.port, Path(r.dir), prefix=netns.exec_prefix(self.state.head.netns),
                                env=self._child_env())
            self._save()
            self.log(f"redis up on {r.host}:{r.port} (pid {r.pid})")
            head = self.state.head
            if head.sid is None:  # the cluster is coming up: there is no GCS yet
                return False
            since = self._redis_killed_at if self._redis_killed_at is not None else time.monotonic()
            self._redis_killed_at = None
            deadline = since + GCS_EXIT_AFTER_REDIS_S
            while self.core_alive(HEAD) and time.monotonic() < deadline:
                time.sleep(0.25)
            if self.core_alive(HEAD):
                return False
            self.log("the GCS exited after losing Redis: restarting the head")
            self.restart_head()
            return True

    def redis_alive(self) -> bool:
        """Redis runs: the recorded PID is alive and still this cluster's redis-server."""
        r = self.state.redis
        return bool(r and r.pid and procs.alive(r.pid) and self._is_redis(r.pid))

    def _is_redis(self, pid: int) -> bool:
        """``pid`` is this cluster's Redis: ``redis-server`` whose title names the cluster's address
        (Redis rewrites its title to ``redis-server HOST:PORT``), leading the session it was started in."""
        r = self.state.redis
        return (r is not None and procs.comm(pid) == "redis-server" and f"{r.host}:{r.port}" in procs.cmdline(pid)
                and procs.session_of(pid) == pid)

    def kill_redis(self) -> list[int]:
        with self._lock:
            r = self.state.redis
            if r is None or not r.pid:
                return []
            if not self.redis_alive():
                self.log(f"redis (pid {r.pid}) is not running: nothing to kill")
                r.pid = None
                self._save()
                return []
            sent = procs.signal_pids([r.pid], signal.SIGKILL)
            self._redis_killed_at = time.monotonic()
            procs.wait_gone([r.pid], 5)
            r.pid = None
            self._save()
            self.log(f"killed redis: {sent}")
            return sent
