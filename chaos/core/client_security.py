"""The load client's security: which CA it trusts for an https front door (:func:`client_ca`,
:func:`client_transport`) and the bearer token it sends (:func:`client_headers`), read from the
environment variable the experiment names and never written anywhere.
"""

from __future__ import annotations

from chaos.core import experiment as exp_mod
from chaos.base.errors import UsageError
from chaos.system.frontdoor import FrontSettings
from chaos.load._transport import LeanTransport
from chaos.load.workload import Target
from chaos.core.run_state import Run


def client_transport(run: Run, targets: list[Target]) -> LeanTransport | None:
    """The client's transport: for an https front door, trusting the experiment's ``ca_bundle``, else
    the run's own CA (the rig's balancer terminating TLS), else the system's."""
    if not any(t.url.startswith("https://") for t in targets):
        return None
    import ssl

    ca = client_ca(run, targets)
    try:
        ctx = ssl.create_default_context(cafile=ca) if ca else ssl.create_default_context()
    except (OSError, ssl.SSLError) as e:
        raise UsageError(f"ca_bundle {ca}: cannot be loaded ({e})") from None
    return LeanTransport(ssl_context=ctx)


def client_ca(run: Run, targets: list[Target]) -> str | None:
    """The CA file the client trusts for an https front door (None: the system's, or plain http)."""
    if not any(t.url.startswith("https://") for t in targets):
        return None
    return run.settings.ca_bundle or (run.backend.front_door() or {}).get("ca_bundle")


def client_headers(s: exp_mod.Settings, front: FrontSettings | None = None) -> dict[str, str]:
    """``Authorization: Bearer`` from the environment variable the experiment names (``auth_token_env``,
    else the front door's ``token_env``; ``front``: the front door's settings as the run's spec parsed them,
    None: read from ``s``); the token is never written anywhere."""
    import os

    name = s.auth_token_env or (front or FrontSettings.from_dict(s.front_door)).token_env
    if not name:
        return {}
    token = os.environ.get(name)
    if not token:
        raise UsageError(f"the client's bearer token: set ${name}")
    return {"Authorization": f"Bearer {token}"}

