"""chaos.system.ray_dashboard: the one module that calls a Ray dashboard (issue 36), through one seam."""

import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from chaos.system import ray_dashboard as rd
from chaos.base.errors import ClusterError
from tests.unit.fake_dashboard import install as fake_dashboard

CHAOS = Path(rd.__file__).resolve().parent.parent


def test_no_other_module_builds_a_dashboard_url():
    """Every call to the dashboard is made here: no other module appends a path to a dashboard URL."""
    found = [str(p.relative_to(CHAOS)) for p in CHAOS.rglob("*.py")
             if p != Path(rd.__file__).resolve() and re.search(r"dashboard_url\}/", p.read_text())]
    assert found == []


def test_a_refused_config_and_a_dashboard_not_there_are_cluster_errors(monkeypatch):
    dashboard = fake_dashboard(monkeypatch, answers={rd.SERVE_APPLICATIONS: (400, b"bad config: no applications")})
    with pytest.raises(ClusterError, match="Serve refused the config: HTTP 400: bad config"):
        rd.put_serve_config("http://d", {"applications": []})
    assert dashboard.sent("PUT") == [("http://d/api/serve/applications/", {"applications": []})]
    fake_dashboard(monkeypatch, up=False)
    with pytest.raises(ClusterError, match="cannot reach the dashboard at http://d"):
        rd.put_serve_config("http://d", {})


def test_no_answer_is_none_for_the_reads_and_nothing_for_the_delete(monkeypatch):
    dashboard = fake_dashboard(monkeypatch, serve=None, gcs=None)
    assert rd.serve_details("http://d") is None and rd.nodes("http://d") is None
    rd.delete_serve_applications("http://d", timeout=1.0)  # left to the caller's wait
    with pytest.raises(OSError):
        rd.gcs_healthz("http://d", 1.0)
    dashboard.nodes = [{"raylet": {"state": "ALIVE"}}]
    assert rd.nodes("http://d") == [{"raylet": {"state": "ALIVE"}}]
    assert [m for m, _, _ in dashboard.calls] == ["GET", "GET", "DELETE", "GET", "GET"]


def test_the_http_transport_gives_an_error_status_with_its_body():
    class H(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_PUT(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            body = f"refused {self.headers['Content-Type']}".encode()
            self.send_response(400)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        with pytest.raises(ClusterError, match="HTTP 400: refused application/json"):
            rd.put_serve_config(f"http://127.0.0.1:{srv.server_address[1]}", {"applications": []}, timeout=2.0)
    finally:
        srv.shutdown()
        srv.server_close()
