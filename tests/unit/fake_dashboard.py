"""A Ray dashboard for the unit tests, put in at :mod:`chaos.system.ray_dashboard`'s one seam (its ``transport``):
the code under test makes its real calls (URLs, JSON, an HTTP error status), answered from what the test
sets. ``install(monkeypatch, ...)`` puts one in for the test and returns it."""

from __future__ import annotations

import json
from typing import Any, Callable

from chaos.system import ray_dashboard as rd

SUCCESS = (200, b"success")  # the GCS health check of a healthy GCS


class FakeDashboard:
    """``serve``: Serve's details (a dict; None: no answer; a function of nothing, called at each read: a
    dashboard whose answer changes); ``gcs``: the GCS health check's (status, body), None: no answer;
    ``nodes``: the GCS' node summary (a list), None: no answer; ``answers``: (status, body) by path, over
    all of these; ``up=False``: no answer at all. A call with no answer raises ConnectionRefusedError, as a
    dashboard that is not there. Every call is recorded in ``calls`` as (method, url, the JSON sent or None); a PUT is accepted."""

    def __init__(self, serve: dict | Callable[[], dict | None] | None = None,
                 gcs: tuple[int, bytes] | None = SUCCESS, nodes: list[dict] | None = None,
                 answers: dict[str, tuple[int, bytes]] | None = None, up: bool = True):
        self.serve, self.gcs, self.nodes, self.answers, self.up = serve, gcs, nodes, dict(answers or {}), up
        self.calls: list[tuple[str, str, Any]] = []

    def __call__(self, method: str, url: str, data: bytes | None, timeout: float) -> tuple[int, bytes]:
        self.calls.append((method, url, None if data is None else json.loads(data)))
        answer = next((a for path, a in self.answers.items() if url.endswith(path)), None) or self._answer(method, url)
        if answer is None or not self.up:
            raise ConnectionRefusedError(f"no answer to {method} {url}")
        return answer

    def _answer(self, method: str, url: str) -> tuple[int, bytes] | None:
        if url.endswith(rd.GCS_HEALTHZ):
            return self.gcs
        if url.endswith(rd.SERVE_APPLICATIONS):
            if method != "GET":
                return 200, b""
            details = self.serve() if callable(self.serve) else self.serve
            return None if details is None else (200, json.dumps(details).encode())
        if url.endswith(rd.NODES_SUMMARY) and self.nodes is not None:
            return 200, json.dumps({"data": {"summary": self.nodes}}).encode()
        return None

    def sent(self, method: str = "PUT") -> list[tuple[str, Any]]:
        """(url, JSON body) of each ``method`` call."""
        return [(url, doc) for m, url, doc in self.calls if m == method]


def install(monkeypatch, dashboard: FakeDashboard | None = None, **kw: Any) -> FakeDashboard:
    """Put ``dashboard`` (or ``FakeDashboard(**kw)``) in at the seam for this test."""
    dashboard = dashboard or FakeDashboard(**kw)
    monkeypatch.setattr(rd, "transport", dashboard)
    return dashboard
