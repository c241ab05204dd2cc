"""Every HTTP call the rig makes to a Ray dashboard, in one place.

The dashboard's REST API is how the rig reads and drives a Ray cluster without a Ray driver (and it
keeps answering, or plainly not, across head restarts):

- ``GET /api/gcs_healthz``: is the GCS answering (the check KubeRay's head readiness probe makes);
- ``GET /api/serve/applications/``: Serve's details (applications, deployments, replicas, where they run);
- ``PUT /api/serve/applications/``: deploy a declarative Serve config (what ``serve deploy`` does);
- ``DELETE /api/serve/applications/``: delete every Serve application;
- ``GET /nodes?view=summary``: the nodes as the GCS holds them.

Every call goes through :data:`transport`, the one seam for tests: ``transport(method, url, body,
timeout)`` returns the answer's (HTTP status, body), whatever the status, and raises :class:`OSError`
when nothing answered. A test replaces it once (``tests/unit/fake_dashboard.py``); the rest (the URLs,
JSON, an HTTP error status as :class:`HTTPStatusError`, what a caller gets when the dashboard does not
answer) is the same code in the tests and on a cluster.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any, Callable

from chaos.base.errors import ClusterError

GCS_HEALTHZ = "/api/gcs_healthz"
SERVE_APPLICATIONS = "/api/serve/applications/"
NODES_SUMMARY = "/nodes?view=summary"


class HTTPStatusError(OSError):
    """The dashboard answered, with an HTTP error status (4xx, 5xx)."""

    def __init__(self, status: int, body: bytes):
        super().__init__(f"HTTP {status}")
        self.status, self.body = status, body


def urllib_transport(method: str, url: str, body: bytes | None, timeout: float) -> tuple[int, bytes]:
    """(status, body) of one HTTP call; an HTTP error status is an answer too. OSError (or ValueError,
    for a URL that is not one) when nothing answered within ``timeout``."""
    headers = {"Content-Type": "application/json"} if body is not None else {}
    req = urllib.request.Request(url, data=body, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        try:
            return e.code, e.read()
        except OSError:
            return e.code, b""


# the seam: what every call below goes through (a test puts a fake dashboard here)
transport: Callable[[str, str, bytes | None, float], tuple[int, bytes]] = urllib_transport


def call(dashboard_url: str, method: str, path: str, timeout: float, doc: Any = None) -> tuple[int, bytes]:
    """(status, body) of ``method path`` (``doc`` sent as JSON); :class:`HTTPStatusError` for an error status."""
    data = None if doc is None else json.dumps(doc).encode()
    status, body = transport(method, f"{dashboard_url}{path}", data, timeout)
    if status >= 400:
        raise HTTPStatusError(status, body)
    return status, body


def gcs_healthz(dashboard_url: str, timeout: float) -> tuple[int, bytes]:
    """(status, body) of the GCS health check (``success`` when healthy); OSError when it did not answer."""
    return call(dashboard_url, "GET", GCS_HEALTHZ, timeout)


def read_serve_details(dashboard_url: str, timeout: float) -> Any:
    """Serve's details, parsed; OSError when the dashboard did not answer, ValueError when not with JSON."""
    return json.loads(call(dashboard_url, "GET", SERVE_APPLICATIONS, timeout)[1])


def serve_details(dashboard_url: str, timeout: float = 5.0) -> dict | None:
    """Serve's details (``/api/serve/applications/``), or None when unavailable."""
    try:
        return read_serve_details(dashboard_url, timeout)
    except (OSError, ValueError):
        return None


def read_nodes(dashboard_url: str, timeout: float) -> list[dict]:
    """The nodes as the GCS holds them (the summary view: a ``raylet`` entry each); OSError, ValueError
    when not answered or not JSON, AttributeError when the JSON is not the table."""
    data = json.loads(call(dashboard_url, "GET", NODES_SUMMARY, timeout)[1])
    return data.get("data", {}).get("summary", [])


def nodes(dashboard_url: str, timeout: float = 3.0) -> list[dict] | None:
    """The GCS' nodes, or None when the head does not answer."""
    try:
        return read_nodes(dashboard_url, timeout)
    except (OSError, ValueError):
        return None


def put_serve_config(dashboard_url: str, config: dict, timeout: float = 30.0) -> None:
    """Deploy ``config`` (a Serve config document); :class:`ClusterError` when refused or not answered."""
    try:
        call(dashboard_url, "PUT", SERVE_APPLICATIONS, timeout, config)
    except HTTPStatusError as e:
        raise ClusterError(f"Serve refused the config: HTTP {e.status}: "
                           f"{e.body[:300].decode(errors='replace')}") from None
    except OSError as e:
        raise ClusterError(f"cannot reach the dashboard at {dashboard_url}: {e}") from None


def delete_serve_applications(dashboard_url: str, timeout: float = 60.0) -> None:
    """Ask Serve to delete every application; a call not answered is left to the caller's wait."""
    try:
        call(dashboard_url, "DELETE", SERVE_APPLICATIONS, timeout)
    except OSError:
        pass
