"""Environment variables that hold secrets (bearer tokens), kept out of every process the rig starts.

An experiment names the environment variables its tokens are read from: the client's
(``auth_token_env``) and the one the rig's front door requires (``front_door.token_env``). The
rig's own process reads them; the processes it starts must not inherit them: a Ray node runs user
code (a Serve replica can read its whole environment), and Redis, HAProxy and a Ray driver have no
use for them. Every process the local backend starts gets :func:`child_env`: the rig's environment
without any variable named a secret. HAProxy alone is then given the front door's token, under
its own name (:data:`chaos.system.frontdoor.TOKEN_VAR`, which no other process gets either).

A variable is a secret when it is

- named by an experiment this process read: :func:`chaos.core.experiment.settings` declares its token
  variables (:func:`declare`) before anything is started for it;
- listed, comma-separated, in ``AVAILPROOF_SECRET_ENV``: for processes started before any
  experiment is read (``AVAILPROOF_SECRET_ENV=MY_TOKEN availproof cluster up``);
- one a local cluster was told of before (its state file keeps the names, so a later
  ``availproof recover`` in a shell that exports the token does not hand it to a restarted node);
- :data:`chaos.system.frontdoor.TOKEN_VAR`.

Only names are kept, never values. A process that was started before a name was declared keeps
what it inherited: declare the names before the cluster starts (a run does: it reads its
experiment first).
"""

from __future__ import annotations

import os
from typing import Iterable, Mapping

from chaos.system.frontdoor import TOKEN_VAR

SECRET_ENV = "AVAILPROOF_SECRET_ENV"  # comma-separated names of further secret variables

_declared: set[str] = set()


def declare(*names: str | None) -> None:
    """Name variables as secrets for the rest of this process (None and "" are ignored)."""
    _declared.update(n for n in names if n)


def names(extra: Iterable[str] = ()) -> set[str]:
    """Every variable named a secret: declared, listed in ``AVAILPROOF_SECRET_ENV``, the front
    door's own, and ``extra`` (e.g. the ones a cluster's state file keeps)."""
    listed = {n.strip() for n in os.environ.get(SECRET_ENV, "").split(",") if n.strip()}
    return {TOKEN_VAR} | _declared | listed | {n for n in extra if n}


def child_env(extra: Iterable[str] = (), base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a process the rig starts: ``base`` (default: this process's) without
    any secret variable (:func:`names` with ``extra``)."""
    drop = names(extra)
    return {k: v for k, v in (os.environ if base is None else base).items() if k not in drop}
