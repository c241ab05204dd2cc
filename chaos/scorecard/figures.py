"""One trial's scorecard figures, from its run directory read through :mod:`chaos.core.evidence` (its summary under
the version rule, and its records).

Of a fault's trial (the run's first fault; its ``target`` is the faulted replica's id):

- **detection** (``detected``, ``time_to_detect_s``): Serve taking the faulted replica out of RUNNING, the first
  sample in which it is gone (the fault's ``replacement.gone`` entry for its target, which is the capacity
  plane's loss when only it goes); where the samples carried no replica ids, the capacity plane's
  ``time_to_lost_s``. Not seen within the fault's analysis window: not detected (``detected`` false,
  ``time_to_detect_s`` null; the window, ``horizon_s``, says how long was looked). Neither plane measurable:
  ``detected`` null with the reason.
- **requests to the bad replica after detection** (``after_detection``): over the measured requests sent from
  the detection instant to the window's end, ``to_bad`` those served by the faulted replica (the responses'
  ``x-availproof-replica``), ``unnamed`` those no replica named (failed before their headers: they may have
  gone to it too), ``share`` = to_bad / requests and ``share_upper`` = (to_bad + unnamed) / requests. Null
  with the reason when nothing was detected or no request was sent after it.
- **false replacements**: replicas other than the faulted one that went out of RUNNING in the window
  (``replacement.gone``); null when the samples carried no replica ids.

Of a fault-free trial: **false replacements** = every replica that went out of RUNNING from the first sample to
the last (:func:`chaos.analysis.planes.replacement` over the run's samples).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from chaos.core import evidence
from chaos.analysis import planes

NS = 1_000_000_000


def _null(out: dict[str, Any], key: str, why: str) -> None:
    out[key] = None
    out.setdefault("why", {})[key] = why


def detection(fault: dict[str, Any]) -> dict[str, Any]:
    """``detected``, ``time_to_detect_s``, ``by`` (which plane said it) and ``horizon_s`` of one fault."""
    out: dict[str, Any] = {"detected": None, "time_to_detect_s": None, "by": None, "horizon_s": fault.get("window_s")}
    target = fault.get("target")
    rp = fault.get("replacement") or {}
    unmeasurable = fault.get("unmeasurable") or {}
    if rp.get("replicas_before") is not None:
        gone = next((g for g in rp.get("gone") or [] if g.get("replica") == target), None)
        out["by"] = "replacement.gone"
        out["detected"] = gone is not None
        out["time_to_detect_s"] = gone and gone.get("gone_s")
        return out
    cap = fault.get("capacity") or {}
    if "capacity.time_to_lost_s" in unmeasurable or not cap:
        _null(out, "detected", "neither the replicas' ids nor the capacity plane were measured: "
              + str(unmeasurable.get("capacity.time_to_lost_s") or unmeasurable.get("replacement") or "no samples"))
        return out
    out["by"] = "capacity.time_to_lost_s"
    out["detected"] = cap.get("time_to_lost_s") is not None
    out["time_to_detect_s"] = cap.get("time_to_lost_s")
    return out


def after_detection(fault: dict[str, Any], requests, detected_s: float | None) -> dict[str, Any]:
    """The requests sent after the detection instant to the window's end, and how many went to the bad replica."""
    out: dict[str, Any] = {"requests": None, "to_bad": None, "unnamed": None, "share": None, "share_upper": None}
    if detected_s is None:
        _null(out, "share", "not detected: no detection instant")
        return out
    if requests is None:
        _null(out, "share", "no records.ndjson")
        return out
    t0 = fault["inject_ns"]
    start = t0 + int(detected_s * NS)
    end = t0 + int((fault.get("window_s") or 0) * NS) if fault.get("window_s") else None
    target = fault.get("target")
    after = [r for r in requests if r.phase == "measure" and r.sent_ns >= start and (end is None or r.sent_ns < end)]
    to_bad = sum(1 for r in after if r.served_replica == target)
    unnamed = sum(1 for r in after if r.served_replica is None)
    out.update(requests=len(after), to_bad=to_bad, unnamed=unnamed)
    if not after:
        _null(out, "share", "no request sent after the detection (a sparse or no load)")
        out["share_upper"] = None
        return out
    out["share"] = round(to_bad / len(after), 6)
    out["share_upper"] = round((to_bad + unnamed) / len(after), 6)
    return out


def false_replacements(fault: dict[str, Any]) -> tuple[int | None, str | None]:
    rp = fault.get("replacement") or {}
    if rp.get("replicas_before") is None:
        return None, (fault.get("unmeasurable") or {}).get("replacement") or "the samples carried no replica ids"
    return sum(1 for g in rp.get("gone") or [] if g.get("replica") != fault.get("target")), None


def fault_trial(run_dir: Path) -> dict[str, Any]:
    """The figures of one trial of a fault cell (module doc)."""
    summary = evidence.load_summary(run_dir)
    out: dict[str, Any] = {"run": str(run_dir), "partial": bool(summary.get("partial"))}
    faults = summary.get("faults") or []
    if not faults:
        out.update(detected=None, time_to_detect_s=None, false_replacements=None,
                   after_detection={"share": None, "share_upper": None},
                   why={"detected": "no fault in the run (it ended before its method)"})
        return out
    fault = faults[0]
    out["fault_id"], out["target"] = fault.get("fault_id"), fault.get("target")
    det = detection(fault)
    why = det.pop("why", {})
    out.update(det)
    records = evidence.read_records(run_dir)
    after = after_detection(fault, records.requests if records else None, det["time_to_detect_s"])
    why.update({f"after_detection.{k}": v for k, v in after.pop("why", {}).items()})
    out["after_detection"] = after
    n, reason = false_replacements(fault)
    out["false_replacements"] = n
    if reason:
        why["false_replacements"] = reason
    if why:
        out["why"] = why
    return out


def fault_free_trial(run_dir: Path) -> dict[str, Any]:
    """The figures of one fault-free trial: replicas that went out of RUNNING with no fault injected."""
    out: dict[str, Any] = {"run": str(run_dir)}
    records = evidence.read_records(run_dir)
    samples = sorted(records.samples, key=lambda s: s.t_ns) if records else []
    if len(samples) < 2:
        out.update(false_replacements=None, observed_s=None,
                   why={"false_replacements": "fewer than two samples: nothing observed"})
        return out
    unmeasurable: dict[str, str] = {}
    first = next((i for i, s in enumerate(samples) if s.replica_ids is not None and s.controller_ok), 0)
    t0 = samples[first].t_ns
    rp = planes.replacement(t0, samples[:first + 1], samples[first + 1:], unmeasurable)
    out["observed_s"] = round((samples[-1].t_ns - t0) / NS, 1)
    if rp["replicas_before"] is None:
        out.update(false_replacements=None, why={"false_replacements": unmeasurable.get("replacement", "")})
    else:
        out["false_replacements"] = len(rp["gone"])
        out["gone"] = rp["gone"]
    out["requests"] = sum(1 for r in records.requests if r.phase == "measure")
    return out
