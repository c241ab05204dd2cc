"""RATES: how often each scope's events happen, and how sure anyone is of it (``--faults FILE``).

Per scope, one of:
- ``events``: a point figure of expected events per period (a guess, a provider's figure). Taken as exact,
  and the claim says so (``rate.kind: point``).
- ``count`` + ``exposure_days``: an observed history (3 zone events in 270 days). The rate per day is drawn
  from its Gamma posterior under the Jeffreys prior, shape ``count + 0.5`` and rate ``exposure_days``
  (``rate.kind: observed``): a short history gives a wide rate, and the claim carries it.
Optionally ``duration_s`` (how long one outage lasts: :mod:`chaos.claim.coverage`), ``unrecovered_cost_s``
(what an event the system does not recover from costs: the on-call's detection plus repair, 3600 s unless
stated), ``source`` (a URL or DOI makes it ``checkable``, anything else is a ``guess``) and
``prior_unrecovered: {events: K, trials: N}`` (fleet history: K events of N that needed a human; the prior on the
scope's unrecovered share becomes Jeffreys' updated by it: :mod:`chaos.claim.unrecovered`).
Every problem is one line naming the file and the field (exit 2, nothing read or written)."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chaos import scopes
from chaos.base.errors import UsageError, read_yaml

DAY_S = 86_400
DEFAULT_UNRECOVERED_COST_S = 3600.0
DEFAULT_TARGET_PCT = 99.9
DEFAULT_RISK = 0.05
RATE_KEYS = ("events", "count", "exposure_days", "duration_s", "unrecovered_cost_s", "source", "prior_unrecovered")
POINT, OBSERVED = "point", "observed"
_CHECKABLE = re.compile(r"https?://\S+|\bdoi:\s*\S+|\b10\.\d{4,9}/\S+", re.IGNORECASE)


def checkable(source: str | None) -> bool:
    """A source names a URL or a DOI: someone can check the figure."""
    return bool(source and _CHECKABLE.search(source))


@dataclass(frozen=True)
class Rate:
    scope: str
    events: float | None = None  # a point figure: expected events per period
    count: int | None = None  # or an observed history: events seen ...
    exposure_days: float | None = None  # ... over this many days
    duration_s: float | None = None  # how long one such outage lasts (None: not stated)
    unrecovered_cost_s: float = DEFAULT_UNRECOVERED_COST_S
    source: str | None = None
    prior_unrecovered: tuple[int, int] | None = None  # fleet history: (unrecovered events, events seen)

    @property
    def kind(self) -> str:
        return POINT if self.events is not None else OBSERVED

    @property
    def basis(self) -> str:
        return "checkable" if checkable(self.source) else "guess"

    def mean_events(self, period_days: float) -> float:
        """Expected events per period: the point figure, or the posterior mean (count + 0.5) / exposure."""
        if self.events is not None:
            return self.events
        return (self.count + 0.5) / self.exposure_days * period_days

    def interval_events(self, period_days: float, q: tuple[float, float] = (0.05, 0.95)) -> list[float] | None:
        """The rate's 90 % posterior interval per period (observed histories only)."""
        if self.events is not None:
            return None
        import numpy as np

        draws = np.random.default_rng(0).gamma(self.count + 0.5, period_days / self.exposure_days, 200_000)
        return [round(float(np.quantile(draws, q[0])), 6), round(float(np.quantile(draws, q[1])), 6)]

    def rated(self) -> bool:
        """Events of this scope are expected at all (a point figure of 0 is not)."""
        return self.events is None or self.events > 0

    def to_dict(self, period_days: float | None = None) -> dict[str, Any]:
        out = {"kind": self.kind, "events": self.events, "count": self.count, "exposure_days": self.exposure_days,
               "duration_s": self.duration_s, "unrecovered_cost_s": self.unrecovered_cost_s,
               "source": self.source, "basis": self.basis,
               "prior_unrecovered": (None if self.prior_unrecovered is None else
                                     {"events": self.prior_unrecovered[0], "trials": self.prior_unrecovered[1]})}
        if period_days is not None:
            out["mean_events"] = round(self.mean_events(period_days), 6)
            out["interval90_events"] = self.interval_events(period_days)
        return out


@dataclass(frozen=True)
class Rates:
    period_days: float
    scopes: dict[str, Rate]
    path: str = "RATES"

    @property
    def period_s(self) -> float:
        return self.period_days * DAY_S

    def rated(self) -> dict[str, Rate]:
        return {n: r for n, r in self.scopes.items() if r.rated()}


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def parse_rates(doc: Any, where: str = "RATES") -> Rates:
    """A RATES document checked; the first problem is a one-line :class:`UsageError` ``WHERE: path: what``."""
    def bad(path: str, what: str) -> UsageError:
        return UsageError(f"{where}: {path}: {what}")

    if not isinstance(doc, dict):
        raise bad("<document>", f"must be a mapping with period_days and scopes, got {type(doc).__name__}")
    for k in doc:
        if k not in ("period_days", "scopes"):
            raise bad(str(k), "unknown field (known: period_days, scopes)")
    period = doc.get("period_days")
    if period is None:
        raise bad("period_days", "is required (days in the period the events are counted over, e.g. 30)")
    if not _number(period) or period <= 0:
        raise bad("period_days", f"must be a number above 0, got {period!r}")
    entries = doc.get("scopes")
    if not isinstance(entries, dict) or not entries:
        raise bad("scopes", f"must be a non-empty mapping of scope to its rate, got {entries!r}")
    out: dict[str, Rate] = {}
    for name, entry in entries.items():
        out[name] = _rate(name, entry, bad)
    return Rates(float(period), out, where)


def _rate(name: str, entry: Any, bad) -> Rate:
    path = f"scopes.{name}"
    if not scopes.known(name):
        raise bad(path, f"unknown scope (known: {', '.join(scopes.names())})")
    if not isinstance(entry, dict):
        raise bad(path, f"must be a mapping with events, or count and exposure_days, got {entry!r}")
    for k in entry:
        if k not in RATE_KEYS:
            raise bad(f"{path}.{k}", f"unknown field (known: {', '.join(RATE_KEYS)})")
    events, count, exposure = entry.get("events"), entry.get("count"), entry.get("exposure_days")
    if events is not None and (count is not None or exposure is not None):
        raise bad(path, "either events (a point figure) or count and exposure_days (an observed history), not both")
    if events is None and count is None and exposure is None:
        raise bad(f"{path}.events", "is required: events (expected per period), or count and exposure_days "
                                    "(events seen over how many days)")
    if events is not None and (not _number(events) or events < 0):
        raise bad(f"{path}.events", f"must be a number of at least 0, got {events!r}")
    if events is None:
        if count is None or exposure is None:
            missing = "exposure_days" if count is not None else "count"
            raise bad(f"{path}.{missing}", "is required with "
                      + ("count (the days the events were counted over)" if count is not None
                         else "exposure_days (the events seen in them)"))
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise bad(f"{path}.count", f"must be a whole number of events, at least 0, got {count!r}")
        if not _number(exposure) or exposure <= 0:
            raise bad(f"{path}.exposure_days", f"must be a number of days above 0, got {exposure!r}")
    duration, unrec, source = entry.get("duration_s"), entry.get("unrecovered_cost_s"), entry.get("source")
    if duration is not None and (not _number(duration) or duration <= 0):
        raise bad(f"{path}.duration_s", f"must be a number of seconds above 0, got {duration!r}")
    if unrec is not None and (not _number(unrec) or unrec <= 0):
        raise bad(f"{path}.unrecovered_cost_s", f"must be a number of seconds above 0, got {unrec!r}")
    if source is not None and not isinstance(source, str):
        raise bad(f"{path}.source", f"must be a string (a URL or DOI makes it checkable), got {source!r}")
    return Rate(name, None if events is None else float(events), count,
                None if exposure is None else float(exposure), None if duration is None else float(duration),
                DEFAULT_UNRECOVERED_COST_S if unrec is None else float(unrec), source,
                _prior(entry.get("prior_unrecovered"), f"{path}.prior_unrecovered", bad))


def _whole(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


def _prior(p: Any, path: str, bad) -> tuple[int, int] | None:
    if p is None:
        return None
    if not isinstance(p, dict) or set(p) != {"events", "trials"}:
        raise bad(path, f"must be a mapping with events and trials (fleet history: events that needed a human, "
                        f"of events seen), got {p!r}")
    if not _whole(p["trials"]) or p["trials"] < 1:
        raise bad(f"{path}.trials", f"must be a whole number of events seen, at least 1, got {p['trials']!r}")
    if not _whole(p["events"]) or p["events"] > p["trials"]:
        raise bad(f"{path}.events", f"must be a whole number from 0 to trials ({p['trials']}), got {p['events']!r}")
    return (p["events"], p["trials"])


def load_rates(path: str | Path) -> Rates:
    """The RATES file read and checked: every problem is one line naming the file."""
    return parse_rates(read_yaml(path, "the rates file"), str(path))


def _strictly_between(value: Any, flag: str, what: str, hi: float, example: str) -> float:
    """``value`` as a number strictly between 0 and ``hi``; a one-line error naming ``flag`` otherwise."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{flag}: {what} between 0 and {hi:g}, e.g. {example}, got {value!r}") from None
    if not math.isfinite(v) or not 0 < v < hi:
        raise UsageError(f"{flag}: {what} between 0 and {hi:g} (exclusive), e.g. {example}, got {value!r}")
    return v


def target_fraction(pct: Any, flag: str = "--target") -> float:
    """``--target`` in percent (99.9) as a fraction; a one-line error otherwise."""
    return _strictly_between(pct, flag, "a percentage", 100, "99.9") / 100


def risk_value(risk: Any) -> float:
    return _strictly_between(risk, "--risk", "a probability", 1, "0.05")


def credibility_value(c: Any) -> float:
    """``--credibility``: a probability strictly between 0.5 and 1 (below a half, 'supported' says less than a
    coin); a one-line error otherwise."""
    v = _strictly_between(c, "--credibility", "a probability", 1, "0.9")
    if v <= 0.5:
        raise UsageError(f"--credibility: a probability above 0.5 and below 1, e.g. 0.9, got {c!r}")
    return v
