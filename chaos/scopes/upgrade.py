"""upgrade: a rolling upgrade of the Serve application under load (:func:`chaos.faults.upgrade_app`), the
planned disruption users cause: every replica replaced. It proves itself at its end (the new replicas
RUNNING), not by the effect checks."""

from chaos.backends.kube_access import UPGRADE
from chaos.scopes.registry import Scope

SCOPE = Scope(
    "upgrade", "rolling upgrade", fault="upgrade_app", backend_methods=("upgrade_app",),
    every_target_affected=True, replacing=True, replaces_every_replica=True,
    kube_access=UPGRADE,
)
