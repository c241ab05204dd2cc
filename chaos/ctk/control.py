"""The Chaos Toolkit control: a thin edge that hands Chaos Toolkit's moments to the run core.

Each hook is one guarded call into a :class:`chaos.core.moments.Session` (the core drives the load, the
recovery window, the analysis and the verdict; see :mod:`chaos.core.moments`). The session is this
experiment's own, kept in Chaos Toolkit's ``configuration`` under ``availproof_session``
(:data:`chaos.ctk.session.KEY`): the one dict Chaos Toolkit hands every hook of this run, and (a copy)
every action and probe, which find the run there. This module keeps no state and nothing is put in the
experiment. ``availproof run`` and ``suite`` open the run around the Chaos Toolkit call
(:mod:`chaos.core.runner`) and hand its session over in the configuration before the first hook
(:class:`chaos.ctk.session.HandOver`); ``before_experiment_control`` adopts it. Under plain ``chaos run``
there is none: ``before_experiment_control`` opens the run (its options from the configuration's
``availproof_*`` settings) and puts its session there.

- before the experiment: the run opened or adopted; a set-up that fails interrupts (nothing injected);
- before the method: load on, warm-up and baseline, the baseline gate;
- before and after each activity: where the method is, for a stop condition;
- after the method: the recovery window, the analysis (``summary.json``);
- after the experiment (after the rollbacks, the journal final): the run's end (what is still injected
  healed, the run closed, the one verdict: :mod:`chaos.core.verdict`), the summary and the verdict into the
  journal under ``availproof`` and the journal into the run's directory.

A moment's :class:`chaos.core.moments.Interrupt` becomes ``chaoslib.exceptions.InterruptExecution``, the
one exception Chaos Toolkit does not swallow in a control (any other it logs at debug level and goes
on). A stop condition while a method activity runs (a fault can block for its whole outage) ends the
activity with ``chaoslib.exit.exit_gracefully()``, Chaos Toolkit's immediate graceful exit (its own
SIGUSR1 handler, installed for the run, raises ``SystemExit(20)`` in the activity). Chaos Toolkit then
plays the rollbacks (under ``availproof run``: strategy ``always``) and ends the journal ``interrupted``.

The exit code of plain ``chaos run`` is the verdict's (PASS 0, VIOLATED and UNMEASURED 1, ERROR 2),
as ``availproof run``'s. Chaos Toolkit's CLI decides its own from the journal (1 when the status is
not ``completed`` or the journal deviated, else 0: ``chaostoolkit/commands/run.py``) and has no code 2;
the journal's status is not rewritten to steer it (it says what Chaos Toolkit did). Instead, under
that CLI (click's current context is Chaos Toolkit's ``run`` command, without ``--no-exit``), when
the two codes differ the after-experiment hook writes the journal to the command's ``--journal-path``
itself (Chaos Toolkit would write it after this hook returns) and raises ``SystemExit`` with the
verdict's code: a ``SystemExit`` leaves ``chaoslib``'s run through its ``finally`` (controls cleaned
up, the run's event handlers told) and the CLI; the experiment-level after-hooks of controls listed
after this one are then not called. When the codes agree Chaos Toolkit finishes as usual. Called
through ``chaoslib``'s API (not the CLI) nothing is raised: the verdict is in
``journal["availproof"]["verdict"]``.
"""

from __future__ import annotations

import enum
import json
import signal
import sys
from typing import Any, Callable

from chaoslib.exceptions import InterruptExecution
from chaoslib.exit import exit_gracefully

from chaos.ctk.session import KEY, session_of
from chaos.core.moments import Interrupt, Session


def _session(configuration: dict | None) -> Session:
    """This experiment's session (one that never began, where there is none: every moment does nothing)."""
    return session_of(configuration) or Session()


def _hand(moment: Callable[..., Any], *args: Any) -> Any:
    """One moment handed to the core: its interruption becomes Chaos Toolkit's."""
    try:
        return moment(*args)
    except Interrupt as e:
        raise InterruptExecution(str(e)) from None


def _exit_activity() -> bool:
    """Chaos Toolkit's graceful exit, raised in the running activity; declined (False) outside Chaos
    Toolkit's run, where no handler of SIGUSR1 is installed and the signal would kill the process."""
    if signal.getsignal(signal.SIGUSR1) in (signal.SIG_DFL, signal.SIG_IGN, None):
        return False
    exit_gracefully()
    return True


def before_experiment_control(context: dict, configuration: dict | None = None, **kwargs) -> None:
    """The session handed over in the configuration (``availproof run``), else a new one put there; then begun."""
    if not isinstance(configuration, dict):  # Chaos Toolkit always passes its run's dict: nowhere to keep the run
        raise InterruptExecution("availproof: Chaos Toolkit gave the control no configuration to keep the run in: "
                                 "nothing opened, nothing injected")
    session = session_of(configuration)
    if session is None:
        session = configuration[KEY] = Session()
    session.interrupt_activity = _exit_activity
    _hand(session.begin, context, configuration)


def before_method_control(context: dict, configuration: dict | None = None, **kwargs) -> None:
    _hand(_session(configuration).before_method)


def before_activity_control(context: dict, configuration: dict | None = None, **kwargs) -> None:
    _hand(_session(configuration).before_activity)


def after_activity_control(context: dict, configuration: dict | None = None, **kwargs) -> None:
    _hand(_session(configuration).after_activity)


def after_method_control(context: dict, configuration: dict | None = None, **kwargs) -> None:
    _hand(_session(configuration).after_method)


def after_experiment_control(context: dict, state: dict | None = None, configuration: dict | None = None,
                             **kwargs) -> None:
    session = _session(configuration)
    journal = state if isinstance(state, dict) else None
    v = _hand(session.after_experiment, journal)
    if v is not None and session.opened_by_driver:
        _exit_as_judged(v["exit_code"], journal)


# ---------------------------------------------------------------- plain `chaos run`'s exit code
def _chaos_run_command():
    """Click's context of Chaos Toolkit's ``chaos run`` when this runs under it, else None."""
    try:
        import click
    except ImportError:  # pragma: no cover - Chaos Toolkit's CLI needs it
        return None
    ctx = click.get_current_context(silent=True)
    callback = getattr(getattr(ctx, "command", None), "callback", None)
    if ctx is None or not getattr(callback, "__module__", "").startswith("chaostoolkit.") \
            or ctx.info_name != "run" or "journal_path" not in ctx.params:
        return None
    return ctx


def chaos_toolkit_exit_code(journal: dict | None) -> int:
    """The exit code Chaos Toolkit's CLI gives a journal (``chaostoolkit/commands/run.py``)."""
    journal = journal or {}
    return 1 if journal.get("status") != "completed" or journal.get("deviated") else 0


def _exit_as_judged(code: int, journal: dict | None) -> None:
    """Under ``chaos run``: the process exits with the verdict's ``code`` (see the module's docstring)."""
    ctx = _chaos_run_command()
    if ctx is None or ctx.params.get("no_exit") or code == chaos_toolkit_exit_code(journal):
        return
    if journal is not None and ctx.params.get("journal_path"):
        from pathlib import Path

        from chaostoolkit import encoder

        path = Path(ctx.params["journal_path"])
        try:  # its directory may not exist yet (the run's, when its set-up failed before making it)
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "w") as f:
                json.dump(journal, f, indent=2, ensure_ascii=False, default=lambda o: _plain(o, encoder))
        except (OSError, TypeError, ValueError) as e:  # the exit code is the verdict's all the same
            print(f"availproof: could not write the journal to {path}: {e}", file=sys.stderr)
    raise SystemExit(code)


def _plain(o: Any, encoder: Callable[[Any], Any]) -> Any:
    """Chaos Toolkit's JSON encoder, and an enum's value where it has none (``--dry``'s ``Dry``, which its
    CLI turns into a string only after this hook)."""
    if isinstance(o, enum.Enum):
        return o.value
    return encoder(o)
