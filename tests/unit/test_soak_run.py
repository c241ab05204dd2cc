"""The soak's lifecycle (chaos/soak/run.py, chaos/soak/spec.py, `availproof soak`) on a fake backend whose one
proxy is a loopback streaming server: the schedule in the header before any request, faults injected at their
instants and marked, overlaps, skips with why, an unproven fault makes the soak ERROR, a stop or Ctrl-C heals,
bad input is one line and exit 2 with nothing started, and `availproof analyse` derives the soak object again."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from chaos.commands import cli
from chaos.scopes import faults
from chaos.core import provision, run as core
from chaos.recording import records as rec
from chaos.system.placement import Replica
from chaos.soak import check as soak_check, figures, run as soak_run, spec
from chaos.soak.schedule import apply_rules
from tests.integration import sse_server
from tests.unit.fake_backend import OneProxyBackend

NS = 1_000_000_000


class ServingBackend(OneProxyBackend):
    """One proxy (a loopback SSE server that always serves); replica and node faults recorded, never real."""

    def __init__(self, port: int, node_proven: bool = True, refuse_replica_calls: tuple[int, ...] = ()):
        self.port, self.node_proven, self.refuse = port, node_proven, refuse_replica_calls
        self.calls: list[tuple[str, float]] = []
        self.healed: list[list[str]] = []
        self.replica_picks = 0

    def observe(self, timeout: float):
        from chaos.system import sampler

        return sampler.observe_dashboard("http://127.0.0.1:9", {}, "availproof", timeout)

    def heal(self, faults: list[dict], timeout: float) -> dict:
        self.healed.append([f["fault_id"] for f in faults])
        return {}

    # replica faults
    def pick_replica(self, zone=None, replica_id=None, deployment=None):
        self.replica_picks += 1
        if self.replica_picks in self.refuse:
            from chaos.base.errors import UsageError

            raise UsageError(f"no RUNNING replica in {zone}")
        return Replica("app", "Stream", f"r{self.replica_picks}", "RUNNING", None, None, 4242, "127.0.0.1", "worker-a",
                       zone, "region-1")

    def replica_killer(self, r, method):
        return lambda: self.calls.append(("kill_replica", time.monotonic())) or [r.pid]

    # node faults
    def nodes_in(self, zone=None, region=None):
        return ["worker-b"]

    def zone_of(self, node):
        return "zone-b"

    def kill_node(self, node):
        self.calls.append(("kill_node", time.monotonic()))
        return [1, 2]

    def start_node(self, node):
        self.calls.append(("start_node", time.monotonic()))

    def effect_checks(self, fault):
        ok = fault["scope"] != "node" or self.node_proven
        return [{"check": f"{fault['scope']} gone", "ok": ok, "seen": "gone" if ok else "still there"}]


class Handler(sse_server.Handler):
    """A short stream that ends with its finish_reason (the harness checks every answer's integrity)."""

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        events = [{"choices": [{"index": 0, "delta": {"content": f"t{i} "}, "finish_reason": None}]} for i in range(3)]
        events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        events.append({"choices": [], "usage": {"completion_tokens": 3, "prompt_tokens": 3}})
        for ev in events:
            data = f"data: {json.dumps(ev)}\n\n".encode()
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
            time.sleep(0.01)
        data = b"data: [DONE]\n\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n0\r\n\r\n")
        self.wfile.flush()


class Server(ThreadingHTTPServer):
    daemon_threads = True


@pytest.fixture
def server():
    srv = Server(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def opened_runs(monkeypatch):
    """Every run opened (``chaos.core.run.open_run``) during the test; each must be closed by its end."""
    opened: list[core.Run] = []
    real_open = core.open_run

    def open_run(*args, **kwargs):
        opened.append(real_open(*args, **kwargs))
        return opened[-1]

    monkeypatch.setattr(core, "open_run", open_run)
    yield opened
    assert all(run.closed for run in opened)  # the soak closed its run


@pytest.fixture
def system(monkeypatch, server, opened_runs):
    """``provision.ensure_system`` gives a :class:`ServingBackend` (``made[-1]``); quick effect bounds."""
    monkeypatch.setenv("AVAILPROOF_METRICS_PORT", "0")
    monkeypatch.setattr(provision, "redeploy_if_gone", lambda *a, **k: False)
    monkeypatch.setattr(faults, "EFFECT_BOUND_S", {**faults.EFFECT_BOUND_S, "replica": 0.5, "node": 0.5})
    made: list[ServingBackend] = []
    options: dict = {}

    def ensure(settings, opts, log=None, run_id="", faults=None):
        made.append(ServingBackend(server, **options))
        return made[-1]

    monkeypatch.setattr(provision, "ensure_system", ensure)
    made_options = options
    yield made, made_options


def experiment(tmp_path: Path, name: str, scope: str, func: str, args: dict, window_s: float = 1.0) -> Path:
    doc = {"version": "1.0.0", "title": name, "description": "soak unit test",
           "extensions": [{"name": "availproof", "scope": scope, "targets": "workers",
                           "load": {"mode": "open", "arrival": "constant", "rate": 20, "duration_s": 120,
                                    "warmup_s": 0.2, "timeout_s": 2, "seed": 1},
                           "baseline_s": 1.0, "recovery_window_s": window_s, "recovery_settle_s": 0.5,
                           "steady_state": {"window_s": 0.5, "min_success_ratio": 0.9},
                           "bounds": {"max_failed_requests": 5}}],
           "method": [{"type": "action", "name": f"{scope}-fault", "provider": {
               "type": "python", "module": "chaos.ctk.actions", "func": func, "arguments": args}}],
           "rollbacks": []}
    p = tmp_path / f"{name}.json"
    p.write_text(json.dumps(doc))
    return p


def inputs(tmp_path: Path, node_outage_s: float = 1.0, rates: dict | None = None) -> spec.SoakInput:
    r = tmp_path / "rates.yaml"
    r.write_text(json.dumps({"period_days": 30, "scopes": rates or {"replica": {"events": 4}, "node": {"events": 4}}}))
    exps = [str(experiment(tmp_path, "replica-kill", "replica", "kill_replica", {"zone": "zone-a"})),
            str(experiment(tmp_path, "worker-node-kill", "node", "kill_node",
                           {"zone": "zone-b", "outage_s": node_outage_s}))]
    return spec.SoakInput(exps, str(r), 100_000.0, 60.0, 0)


def prepared(tmp_path: Path, instants: list[tuple[float, str]], **kw) -> spec.Prepared:
    """A prepared soak whose schedule is ``instants`` (seconds, scope) through the schedule's own rules."""
    prep = spec.prepare(inputs(tmp_path, **kw))
    s = prep.schedule
    by = s.faults
    s.injected, s.skipped, s.overlaps = apply_rules(sorted(instants), by)
    s.end_s = max([0.0] + [p.heal_at_s + by[p.scope].recovery_window_s for p in s.injected])
    s.duration_s = s.end_s
    prep.header["schedule"] = s.to_dict()
    return prep


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def test_a_soak_injects_on_its_clock_marks_overlaps_skips_and_heals(tmp_path, system):
    made, _ = system
    # replica at 0.3 s, node at 0.8 s (overlaps the replica's hold), replica at 1.0 s (its scope still holds:
    # skipped by the rules); the replica at 3.2 s is refused by the backend at run time (skipped, with why)
    prep = prepared(tmp_path, [(0.3, "replica"), (0.8, "node"), (1.0, "replica"), (3.2, "replica")])
    made_options = system[1]
    made_options["refuse_replica_calls"] = (2,)
    out = tmp_path / "soak"
    code, summary = soak_run.execute(prep, core.Options(out_dir=out))
    ls = lines(out / "records.ndjson")
    kinds = [x["kind"] for x in ls]
    header = ls[kinds.index("run")]
    assert header["soak"]["schedule"] == json.loads(json.dumps(prep.schedule.to_dict()))  # the schedule in the header...
    assert kinds.index("run") < kinds.index("request")  # ...before any request
    clock = next(x["t_ns"] for x in ls if x["kind"] == "soak" and x["event"] == "clock")
    starts = {x["fault_id"]: x for x in ls if x["kind"] == "mark" and x["event"] == rec.INJECT_START}
    injected = {x["index"]: x for x in ls if x["kind"] == "soak" and x["event"] == "injected"}
    assert sorted(injected) == [0, 1]
    for i, planned in ((0, 0.3), (1, 0.8)):  # on the soak's clock, at their instants
        mark = starts[injected[i]["fault_id"]]
        assert abs((mark["t_ns"] - clock) / NS - planned) < 0.5, (i, (mark["t_ns"] - clock) / NS)
    assert {starts[x["fault_id"]]["scope"] for x in injected.values()} == {"replica", "node"}
    skipped = [x for x in ls if x["kind"] == "soak" and x["event"] == "skipped"]
    assert [x["index"] for x in skipped] == [3] and "refused" in skipped[0]["why"]
    soak = summary["soak"]
    assert [p["index"] for p in soak["faults_injected"]] == [0, 1]
    whys = {p["index"]: p["why"] for p in soak["faults_skipped"]}
    assert set(whys) == {2, 3} and "holds its scope" in whys[2] and "refused" in whys[3]
    assert soak["overlaps"] and soak["overlaps"][0]["faults"] == [0, 1]  # both marked, overlapping
    # exactly soak_summary's object on the schedule as run; no claim: the prediction null, said why
    recs = rec.read(out / "records.ndjson")
    expect = soak_check.soak_summary(soak_run.as_run(prep.schedule, recs.soak), recs, {})
    assert soak["observed_lost_service_s"] == expect["observed_lost_service_s"]
    assert soak["prediction"]["mean_s"] is None and soak["prediction"]["from"]["unmeasurable"] == soak_run.NO_CLAIM
    # healed: the node's own restart and the rollback over every fault injected
    assert [c for c, _ in made[-1].calls].count("start_node") == 1
    assert made[-1].healed and set(made[-1].healed[-1]) == set(starts)
    assert summary["verdict"]["word"] == "PASS" and code == 0
    import jsonschema

    schema = json.loads((Path(cli.__file__).parent.parent / "schemas" / "summary.schema.json").read_text())
    jsonschema.Draft202012Validator(schema).validate(json.loads((out / "summary.json").read_text()))
    # analyse derives the same soak object again from the records
    assert cli.main(["analyse", str(out)]) == 0
    again = json.loads((out / "summary.json").read_text())
    assert again["soak"] == json.loads(json.dumps(soak))


def test_an_unproven_fault_makes_the_soak_error_and_says_which(tmp_path, system):
    made, options = system
    options["node_proven"] = False
    prep = prepared(tmp_path, [(0.2, "node")])
    code, summary = soak_run.execute(prep, core.Options(out_dir=tmp_path / "soak"))
    assert code == 2 and summary["verdict"]["word"] == "ERROR"
    assert summary["verdict"]["reasons"] == ["fault not in effect: node worker-b"]
    assert made[-1].healed  # healed all the same


def test_a_stop_ends_the_schedule_and_heals_what_was_injected(tmp_path, system, opened_runs):
    made, _ = system
    prep = prepared(tmp_path, [(0.2, "node"), (6.0, "replica")], node_outage_s=3.0)
    timer = threading.Timer(3.0, lambda: opened_runs and opened_runs[-1].stop("test stop"))
    timer.start()
    try:
        code, summary = soak_run.execute(prep, core.Options(out_dir=tmp_path / "soak"))
    finally:
        timer.cancel()
    assert summary["stop_reason"] == "test stop" and code == 1
    soak = summary["soak"]
    assert [p["scope"] for p in soak["faults_injected"]] == ["node"]
    assert "not reached" in soak["faults_skipped"][0]["why"]
    assert [c for c, _ in made[-1].calls] == ["kill_node", "start_node"]  # its outage ended, then the rollback
    assert made[-1].healed
    heals = [m for m in rec.read(tmp_path / "soak" / "records.ndjson").marks if m.event == rec.HEAL_END]
    assert len(heals) == 1


def test_ctrl_c_heals_what_was_injected(tmp_path, system):
    made, _ = system
    prep = prepared(tmp_path, [(0.2, "replica"), (8.0, "node")])
    timer = threading.Timer(3.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    t0 = time.monotonic()
    try:
        code, summary = soak_run.execute(prep, core.Options(out_dir=tmp_path / "soak"))
    finally:
        timer.cancel()
    assert time.monotonic() - t0 < 30
    assert code == 2 and summary["verdict"]["word"] == "ERROR" and "interrupted" in summary["verdict"]["reasons"][0]
    assert [p["scope"] for p in summary["soak"]["faults_injected"]] == ["replica"]
    assert made[-1].healed and len(made[-1].healed[-1]) == 1
    assert "kill_node" not in [c for c, _ in made[-1].calls]


def test_bad_input_is_one_line_exit_2_and_nothing_started(tmp_path, monkeypatch, capsys):
    def nothing(*a, **k):
        raise AssertionError("a cluster was touched")

    monkeypatch.setattr(provision, "ensure_system", nothing)
    inp = inputs(tmp_path, rates={"replica": {"events": 4}, "node": {"events": 4}, "zone": {"events": 1}})
    base = ["soak", "--experiments", *inp.experiments, "--duration", "600", "--out", str(tmp_path / "o")]
    cases = [
        (["--faults", inp.faults, "--speedup", "1000"], "scopes.zone: no listed experiment injects"),
        (["--faults", str(tmp_path / "two.yaml"), "--speedup", "10000000"], "sooner than one holds"),
        (["--faults", str(tmp_path / "two.yaml"), "--speedup", "1000", "--duration", "1"], "--duration 1"),
    ]
    (tmp_path / "two.yaml").write_text(json.dumps({"period_days": 30, "scopes": {"replica": {"events": 4}}}))
    for extra, needle in cases:
        assert cli.main(base + extra) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0], err
    other = json.loads(Path(inp.experiments[1]).read_text())
    other["extensions"][0]["load"]["rate"] = 5
    Path(inp.experiments[1]).write_text(json.dumps(other))
    assert cli.main(base + ["--faults", str(tmp_path / "two.yaml"), "--speedup", "1000"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "load.rate differs" in err[0]
    assert not (tmp_path / "o").exists()


def test_the_shipped_definition_validates_and_plans(capsys):
    root = Path(__file__).resolve().parents[2]
    assert cli.main(["validate", str(root / "experiments" / "soak.yaml")]) == 0
    assert cli.main(["soak", str(root / "experiments" / "soak.yaml"), "--plan"]) == 0
    s = json.loads(capsys.readouterr().out.split("\n", 1)[1])
    assert len(s["injected"]) >= 6 and s["overlaps"] and {p["scope"] for p in s["injected"]} == {"replica", "node"}


def test_a_bad_definition_is_one_line_per_problem(tmp_path, capsys):
    bad = tmp_path / "soak.yaml"
    bad.write_text("kind: soak\nexperiments: []\nfaults: r.yaml\nspeedup: -1\n")
    assert cli.main(["validate", str(bad)]) == 2
    out = capsys.readouterr().out.strip().splitlines()
    assert any("duration_s: is required" in x for x in out) and any("speedup" in x for x in out)
    assert all(x.startswith(str(bad)) for x in out)
