"""One run's state: the :class:`Run` object and the rig's log line. Below every module of a run's lifecycle (:mod:`chaos.core.run`), its stop conditions
(:mod:`chaos.core.stop_conditions`), its client's security (:mod:`chaos.core.client_security`) and the moments a
driver hands it (:mod:`chaos.core.moments`): they all read and change a :class:`Run`, none of them imports another
to do so. There is no run "in progress in this process": whoever opens a run holds it and hands it on
(Chaos Toolkit's edge finds it in its configuration: :mod:`chaos.ctk.session`), so two runs in one process
never see each other's.
"""

from __future__ import annotations

import json
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from chaos.core import baseline_gate as gate
from chaos.recording import records as rec
from chaos.core import experiment as exp_mod
from chaos.backends.base import Backend
from chaos.scopes.faults import Marker
from chaos.system.frontdoor import FrontSettings
from chaos.load.harness import LoadRun
from chaos.core.options import Options
from chaos.core.run_spec import RunSpec
from chaos.system.orphan_watch import OrphanWatch
from chaos.system.sampler import Sampler


def log(msg: str) -> None:
    print(f"availproof: {msg}", flush=True)


class Stopped(Exception):
    """A stop condition tripped while the lifecycle waited (:func:`chaos.core.run.wait`); the driver interrupts its method."""


@dataclass
class Run:
    """One experiment run in progress."""

    experiment_title: str
    settings: exp_mod.Settings
    options: Options
    out_dir: Path
    backend: Backend
    events: rec.Events
    writer: rec.RecordWriter
    marker: Marker
    load: LoadRun | None = None
    sampler: Sampler | None = None
    orphans: OrphanWatch | None = None  # the orphan check's watch (chaos.system.orphan_watch), from the load's start
    summary: dict[str, Any] | None = None
    bound_results: list[dict[str, Any]] | None = None
    started_mono: float = field(default_factory=time.monotonic)
    stop_reason: str | None = None
    exporter: Any = None
    run_id: str = ""  # the backend acts under it (KubeRay: cordons and helpers carry it)
    # who drives the Chaos Toolkit call: "availproof" (the runner opened the run around it) or
    # "chaostoolkit" (plain `chaos run`: the control opened it)
    driver: str = "chaostoolkit"
    verdict: dict[str, Any] | None = None  # chaos.core.verdict, decided once after the experiment
    recovery_window: dict[str, Any] | None = None  # how long the recovery window was (keep_load_for_recovery)
    rate_from: dict[str, Any] | None = None  # the load's rate as a share of a measured capacity (chaos.load.utilization)
    closed: bool = False  # chaos.core.run.close ran: records and exporter closed
    rolled_back: bool = False  # heal_injected succeeded (the rollback, or the run's own)
    heal_error: str | None = None  # the last heal that failed (verdict ERROR: the run's faults not healed)
    error: str | None = None  # a step of the lifecycle that failed (start_load, finish: verdict ERROR)
    interrupted: bool = False  # Ctrl-C or SIGTERM (the runner's handler): no recovery window, heal at once
    baseline_gate: dict[str, Any] | None = None  # the baseline's steady state, judged before the method
    spec: RunSpec | None = None  # what the run runs, parsed once (chaos.core.run_spec); settings: its Settings
    header_extra: dict[str, Any] | None = None  # what a driver adds to the run header (a soak: its schedule)
    # The driver's way to interrupt its method, called by the Guard's thread with the lock held;
    # True when it did (else the stop stays pending for take_stop()).
    on_stop: Callable[[str], bool] | None = None
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)
    _stop_pending: bool = False
    _finishing: bool = False

    @property
    def app(self) -> str:
        return self.options.app

    @property
    def front(self) -> FrontSettings:
        """The front door's settings: the spec's (parsed once), else read from the settings (a Run made without one)."""
        return self.spec.front if self.spec is not None else FrontSettings.from_dict(self.settings.front_door)

    @property
    def records_path(self) -> Path:
        return self.out_dir / "records.ndjson"

    def stop(self, reason: str) -> bool:
        """A stop condition tripped: record ``reason`` and interrupt the method (once; never once finishing)."""
        with self.lock:
            if self.stop_reason is not None or self._finishing:
                return False
            self.stop_reason = reason
            self.writer.write({"kind": "stop", "t_ns": rec.now_ns(), "reason": reason})  # the records say it too
            self._stop_pending = True  # until the driver says it interrupted the method
            try:
                log(f"STOP CONDITION: {reason}: aborting the method and rolling back")
                if self.on_stop is not None and self.on_stop(reason):
                    self._stop_pending = False
            except Exception as e:  # noqa: BLE001 - the stop stays pending for the driver's next hook or wait
                log(f"stop condition: the driver's interrupter failed ({type(e).__name__}: {e}); "
                    "the stop ends the method at its next step")
            return True

    @property
    def finishing(self) -> bool:
        """The run is finishing (:func:`chaos.core.run.finish`) or closed: no stop interrupts it any more."""
        return self._finishing

    def begin_finishing(self) -> None:
        """From now on no stop condition interrupts anything (a pending stop is dropped)."""
        with self.lock:
            self._finishing = True
            self._stop_pending = False

    def measuring(self) -> bool:
        """The load is on and records are taken: the only time a fault may be injected."""
        return (not self._finishing and self.load is not None and self.load.running
                and self.stop_reason is None and not gate.blocks(self.baseline_gate))

    def take_stop(self) -> str | None:
        """The stop reason if a stop is pending (nobody interrupted the method for it yet); then no longer pending."""
        with self.lock:
            if not self._stop_pending:
                return None
            self._stop_pending = False
            return self.stop_reason


def default_out_dir(title: str) -> Path:
    slug = re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")[:40]
    return Path("runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-{slug}"


def write_json(path: Path, data: Any) -> None:
    """``data`` as JSON at ``path``, whole or not at all (written beside it, then moved)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=2, default=str))
    tmp.replace(path)

