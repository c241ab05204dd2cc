"""The rig's front door on a local cluster: its HAProxy started in front of every worker's Serve proxy,
recorded in the state file and stopped by its PID (:mod:`chaos.backends.local.haproxy`)."""

from __future__ import annotations


class FrontDoor:
    """Start and stop the cluster's HAProxy.

    What it uses of the host class (:class:`~chaos.backends.local.cluster.LocalCluster`): ``state``, ``log``,
    ``_lock``, ``_save``, ``_child_env``.
    """

    @property
    def front(self):
        """The rig's HAProxy as recorded in the state file (:class:`~chaos.backends.local.haproxy.FrontState`), or None."""
        from chaos.backends.local.haproxy import FrontState

        return FrontState(**self.state.front) if self.state.front else None

    def start_front(self, shape: str, settings, token: str | None = None):
        """Start the front door (replacing one of another shape or settings) in front of every
        worker's Serve proxy; its PID goes in the state file."""
        from chaos.system import frontdoor
        from chaos.backends.local import haproxy

        with self._lock:
            self.stop_front()
            servers = [frontdoor.Server(n.name, n.zone, n.ip, n.serve_port) for n in self.state.workers()]
            front = haproxy.start(shape, servers, settings, self.cluster_dir, token=token,
                                  env=self._child_env([settings.token_env]))
            self.state.front = front.to_json()
            self._save()
            self.log(f"front door: HAProxy {shape} (pid {front.pid}) at "
                     f"{', '.join(u for _, u, _ in front.urls())}; stats {front.metrics_url}")
            return front

    def stop_front(self) -> None:
        """Stop the rig's HAProxy, if any (by its PID, while it is still this front door's
        HAProxy), and forget it."""
        from chaos.backends.local import haproxy

        with self._lock:
            front = self.front
            if front is None:
                return
            haproxy.stop(front, log=self.log)
            self.state.front = None
            self._save()
            self.log(f"front door stopped (pid {front.pid})")
