"""One definition of each name, and no dead ones (issue 36): ``FRONTS`` was written three times
(cli, options, frontdoor); ``kuberay.zone_nodes``, ``lengths.KEYS`` and
``kuberay.settings.KEYS`` were used nowhere."""

import json
import re
from pathlib import Path

from chaos.system import frontdoor
from chaos.core import options
from chaos.backends import kuberay
from chaos.backends.kuberay import settings as kuberay_settings
from chaos.commands import parser
from chaos.load import lengths

CHAOS = Path(frontdoor.__file__).resolve().parent.parent


def test_fronts_is_defined_once_and_imported():
    defined = [str(p.relative_to(CHAOS)) for p in CHAOS.rglob("*.py")
               if re.search(r"^FRONTS\s*=", p.read_text(), re.MULTILINE)]
    assert defined == ["system/frontdoor.py"], defined
    assert parser.FRONTS is frontdoor.FRONTS and options.FRONTS is frontdoor.FRONTS
    schema = json.loads((CHAOS / "schemas" / "experiment-extension.schema.json").read_text())
    assert tuple(schema["properties"]["front"]["enum"]) == frontdoor.FRONTS  # the experiment file's list agrees


def test_the_dead_names_are_gone():
    assert not hasattr(kuberay, "zone_nodes") and not hasattr(lengths, "KEYS")
    assert not hasattr(kuberay_settings, "KEYS")  # the kubernetes block's keys: read by backend_settings alone


def test_the_zone_label_is_spelled_once_and_imported():
    """``topology.kubernetes.io/zone`` was written in four modules (issue 43): one spelling, in kube_labels."""
    from chaos.backends.kuberay.kube import (autoscale as kube_autoscale, labels as kube_labels, load as kube_load,
                                             zone as kube_zone)
    from chaos.backends.kuberay import common

    spelled = [str(p.relative_to(CHAOS)) for p in CHAOS.rglob("*.py")
               if re.search(r"^\s*[A-Z_]+\s*=\s*[\"']topology\.kubernetes\.io/", p.read_text(), re.MULTILINE)]
    assert spelled == ["backends/kuberay/kube/labels.py"], spelled
    assert all(m.ZONE_LABEL is kube_labels.ZONE_LABEL for m in (kube_autoscale, kube_load, kube_zone, common))
    assert kuberay.ZONE_LABEL == "topology.kubernetes.io/zone" and kuberay.REGION_LABEL == kube_labels.REGION_LABEL
