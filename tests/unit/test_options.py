"""The run's settings travel in its options, never through the process environment (issue 36): the URL of
the Prometheus server ``--prometheus`` starts reaches the promql probe through the run's options, or through
the experiment's configuration under plain ``chaos run``."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from chaos.system import prometheus
from chaos.commands import parser
from chaos.commands.common import run_options
from chaos.ctk import probes
from chaos.ctk.session import configuration_for
from chaos.base.errors import UsageError
from chaos.core.options import Options


def test_the_prometheus_url_is_an_option_from_the_command_or_the_configuration():
    args = parser.build_parser().parse_args(["run", "x.json", "--prometheus"])
    assert run_options(args, Path("out"), prometheus_url="http://127.0.0.1:9090").prometheus_url == "http://127.0.0.1:9090"
    assert run_options(args, Path("out")).prometheus_url is None
    assert Options.from_configuration({"availproof_prometheus_url": "http://127.0.0.1:9091"}).prometheus_url == \
        "http://127.0.0.1:9091"
    assert Options.from_configuration({}).prometheus_url is None


def test_the_promql_probe_asks_the_runs_server_and_reads_no_environment(monkeypatch):
    asked = []
    monkeypatch.setattr(prometheus, "query", lambda url, q: asked.append(url) or 1.0)
    monkeypatch.setenv("AVAILPROOF_PROMETHEUS_URL", "http://127.0.0.1:1")  # the old way: ignored
    with pytest.raises(UsageError, match="no Prometheus URL"):
        probes.promql("up")
    run = SimpleNamespace(options=Options(prometheus_url="http://127.0.0.1:9090"))
    with_run = configuration_for(run)  # the run in Chaos Toolkit's configuration, as the control puts it there
    assert probes.promql("up", configuration=with_run) == 1.0
    assert probes.promql("up", configuration={**with_run, "availproof_prometheus_url": "http://127.0.0.1:9091"}) == 1.0
    assert probes.promql("up", url="http://127.0.0.1:9092", configuration=with_run) == 1.0
    assert asked == ["http://127.0.0.1:9090", "http://127.0.0.1:9091", "http://127.0.0.1:9092"]


def test_a_bad_number_in_the_configuration_is_one_line():
    assert Options.from_configuration({"availproof_deploy_timeout_s": "30"}).deploy_timeout_s == 30.0
    with pytest.raises(UsageError, match="availproof_deploy_timeout_s must be a number of seconds, got 'soon'"):
        Options.from_configuration({"availproof_deploy_timeout_s": "soon"})
