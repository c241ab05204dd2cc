"""Yes/no settings given as strings (an experiment's configuration, the environment, a flag) are parsed,
never passed through ``bool()``: ``bool("false")`` is True (issue 36)."""

from __future__ import annotations

import pytest

from chaos.core import provision
from chaos.backends import kuberay as kb
from chaos.backends.kuberay.kube import load as kl
from chaos.base.errors import UsageError, parse_bool
from chaos.core.options import Options

WORDS = [("true", True), ("TRUE", True), ("True", True), ("1", True), ("yes", True), ("Yes", True), (" yes ", True),
         ("false", False), ("FALSE", False), ("False", False), ("0", False), ("no", False), ("NO", False),
         (True, True), (False, False), (1, True), (0, False)]


@pytest.mark.parametrize("given, want", WORDS)
def test_parse_bool_reads_the_words_in_any_case(given, want):
    assert parse_bool(given, "x") is want


@pytest.mark.parametrize("bad", ["", "off", "y", "2", "truee", 2, -1, 0.5, [], {}])
def test_parse_bool_refuses_anything_else_in_one_line_naming_the_setting(bad):
    with pytest.raises(UsageError) as e:
        parse_bool(bad, "availproof_replace_cluster")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("availproof_replace_cluster must be true or false")


def test_parse_bool_none_is_the_default():
    assert parse_bool(None, "x") is False and parse_bool(None, "x", default=True) is True


@pytest.mark.parametrize("given, want", [("false", False), ("False", False), ("0", False), ("no", False),
                                         ("true", True), ("YES", True), ("1", True), (True, True), (False, False)])
def test_replace_cluster_from_the_configuration_is_parsed(given, want):
    assert Options.from_configuration({"availproof_replace_cluster": given}).replace_cluster is want
    assert Options.from_configuration({}).replace_cluster is False


def test_replace_cluster_that_is_not_a_yes_or_no_is_refused():
    with pytest.raises(UsageError, match=r"availproof_replace_cluster must be true or false .* got 'maybe'"):
        Options.from_configuration({"availproof_replace_cluster": "maybe"})
    with pytest.raises(UsageError, match="replace_cluster must be true or false"):
        Options(replace_cluster="nope")
    assert Options(replace_cluster="false").replace_cluster is False


def test_load_in_cluster_false_as_a_string_keeps_the_workers_on_the_rig():
    assert kl.settings_of({"load_in_cluster": "false", "load_image": "reg/a:1"}) is None
    assert kl.settings_of({"load_in_cluster": "yes", "load_image": "reg/a:1"}).in_cluster is True
    with pytest.raises(UsageError, match="load_in_cluster must be true or false"):
        kl.settings_of({"load_in_cluster": "sometimes"})


def test_allow_autoscaled_zone_loss_false_as_a_string_is_false(monkeypatch):
    seen = {}

    class Fake:
        def __init__(self, *a, **kw):
            seen.update(kw)

        def resolve_cluster(self):
            pass

    monkeypatch.setattr(kb, "KubeRayBackend", Fake)
    k = {"namespace": "n", "context": "c", "serve_url": "http://s", "dashboard_url": "http://d"}
    for given, want in (("false", False), ("no", False), ("true", True), (None, False), (True, True)):
        provision.kuberay_backend({**k, "allow_autoscaled_zone_loss": given})
        assert seen["allow_autoscaled_zone_loss"] is want
    with pytest.raises(UsageError, match="kubernetes.allow_autoscaled_zone_loss must be true or false"):
        provision.kuberay_backend({**k, "allow_autoscaled_zone_loss": "perhaps"})


def test_the_kuberay_backend_parses_its_own_allow_autoscaled_zone_loss():
    b = kb.KubeRayBackend("n", "c", "x", core=object(), networking=object(), custom=object(), authz=object(),
                          batch=object(), exec_core=object(), allow_autoscaled_zone_loss="false")
    assert b.allow_autoscaled_zone_loss is False
