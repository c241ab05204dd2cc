"""When an app already deployed must be deployed again (chaos.system.deploy.deployments_differ): the stream target's
settings are in its deployments, the LLM app's in its arguments (``args.llm_configs[].deployment_config``):
an experiment that turns the progress watchdog on (``stall_s``) must redeploy either."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from chaos.system import deploy, ray_dashboard
from serve_apps import config as serve_config


def _cluster():
    return SimpleNamespace(state=SimpleNamespace(dashboard_url="http://127.0.0.1:1",
                                                 head=SimpleNamespace(serve_port=8000)))


def _deployed(monkeypatch, spec: serve_config.AppSpec, echo=lambda doc: doc):
    """The dashboard answering with ``spec``'s application as Serve echoes it (``echo``: what Serve changes)."""
    app = echo(json.loads(json.dumps(serve_config.serve_config(spec)["applications"][0])))
    details = {"applications": {serve_config.APP_NAME: {"deployed_app_config": app}}}
    monkeypatch.setattr(ray_dashboard, "serve_details", lambda url: details)


def _floats(doc):
    if isinstance(doc, dict):
        return {k: _floats(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [_floats(v) for v in doc]
    return float(doc) if isinstance(doc, int) and not isinstance(doc, bool) else doc


@pytest.mark.parametrize("app", ["stream", "llm"])
def test_the_same_app_is_not_deployed_again_whatever_serve_makes_of_its_numbers(app, monkeypatch):
    spec = serve_config.AppSpec(app=app, http_port=8000)
    spec.llm.model_path = "/models/tiny"
    _deployed(monkeypatch, spec, echo=_floats)  # Serve returns 1.0 for 1
    assert deploy.deployments_differ(_cluster(), serve_config.AppSpec(app=app, llm=spec.llm)) is False


@pytest.mark.parametrize("app", ["stream", "llm"])
def test_turning_the_watchdog_on_deploys_again_on_either_app(app, monkeypatch):
    spec = serve_config.AppSpec(app=app, http_port=8000)
    spec.llm.model_path = "/models/tiny"
    _deployed(monkeypatch, spec)
    watched = serve_config.AppSpec(app=app, llm=spec.llm, stall_s=5.0)
    assert deploy.deployments_differ(_cluster(), watched) is True
    _deployed(monkeypatch, watched)  # and back off
    assert deploy.deployments_differ(_cluster(), serve_config.AppSpec(app=app, llm=spec.llm)) is True


@pytest.mark.parametrize("app", ["stream", "llm"])
def test_switching_the_watchdog_to_v2_deploys_again_on_either_app(app, monkeypatch):
    spec = serve_config.AppSpec(app=app, http_port=8000, stall_s=5.0)
    spec.llm.model_path = "/models/tiny"
    _deployed(monkeypatch, spec)
    assert deploy.deployments_differ(_cluster(), serve_config.AppSpec(app=app, llm=spec.llm, stall_s=5.0,
                                                                      watchdog=1)) is False  # 1: v1, the same
    v2 = serve_config.AppSpec(app=app, llm=spec.llm, stall_s=5.0, watchdog=2)
    assert deploy.deployments_differ(_cluster(), v2) is True
