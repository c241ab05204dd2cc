"""The report's table rows shared by Markdown and HTML: the overview, the faults, the figures of both
populations, the statistics over trials and the bounds (the planes' rows: :mod:`chaos.reports.plane_rows`)."""

from __future__ import annotations

from typing import Any

from chaos import analysis, scopes
from chaos.core import bounds
from chaos.analysis import figures
from chaos.base import stats
from chaos.core import verdict as verdict_mod
from chaos.reports.cells import fmt, figure, plane_figure, unaffected_zones


# the population figures shown one row each (chaos.analysis.figures), by name
LABELS = {f.name: f.label for f in figures.of(figures.POPULATION) if f.row}
# the figures over trials (and compared): the incident's recovery figures
FIGURES = {k: LABELS[k] for k in stats.RECOVERY_FIGURES}
POPULATIONS = analysis.POPULATIONS  # ("affected", "service")


def run_verdict(summary: dict[str, Any]) -> tuple[str, list[str]]:
    """The run's one verdict (:mod:`chaos.core.verdict`, as its summary records it) and what keeps it from passing."""
    v = verdict_mod.of(summary)
    return v["word"], list(v["reasons"])


def experiment_verdict(exp: dict[str, Any]) -> tuple[str, list[str]]:
    verdicts = [run_verdict(t["summary"]) for t in exp["trials"]]
    words = [w for w, _ in verdicts]
    why = sorted({x for _, ws in verdicts for x in ws})
    if len(words) == 1:
        word = words[0]
    elif all(w == words[0] for w in words):
        word = f"{words[0]} (all {len(words)} trials)"
    else:
        worst = next(w for w in ("ERROR", "VIOLATED", "UNMEASURED", "PASS") if w in words)
        word = f"{worst} ({words.count(worst)} of {len(words)} trials)"
    return ("PARTIAL " if exp["partial"] else "") + word, why


def _basis(f: dict[str, Any]) -> str:
    a = f.get("affected") or {}
    return ", ".join(a.get("zones") or []) if a.get("basis") == "fault_domain" else "service"


def _failed(p: dict[str, Any]) -> str:
    ratio = p.get("failed_ratio")
    return f"{p['failed_total']}/{p['requests']}" + ("" if ratio is None else f" ({ratio:.4f})")


def _over_trials(d: dict[str, Any]) -> str:
    """A figure over trials: its median, how many trials never reached it or could not measure it."""
    parts = [] if d["median"] is None else [f"median {fmt(d['median'])}"]
    if d["missing"]:
        parts.append(f"{d['missing']} never")
    if d["unmeasurable"]:
        parts.append(f"{d['unmeasurable']} unmeasurable")
    return ", ".join(parts) or "n/a"


SUCCESS, STEADY, OUTAGE, RESTORED = figures.FIRST_SUCCESS, figures.STEADY_STATE, figures.CP_OUTAGE, figures.CAP_RESTORED
OVERVIEW_COLUMNS = ("experiment", "scope", "trials", "verdict", "affected", f"affected {figures.FAILED.heading}",
                    f"affected {SUCCESS.heading}", f"affected {STEADY.heading}", f"service {figures.FAILED.heading}",
                    OUTAGE.heading, RESTORED.heading, "what keeps it from passing")


def _plane_over_trials(incidents: list[dict[str, Any]], plane: str, key: str) -> str:
    """A plane's figure over trials: the median of the trials with a value, how many never reached it,
    how many could not measure it (or have no planes: recorded before the sampler)."""
    values, missing, unmeasurable = [], 0, 0
    for f in incidents:
        v = (f.get(plane) or {}).get(key) if isinstance(f.get(plane), dict) else None
        if v is not None:
            values.append(v)
        elif not isinstance(f.get(plane), dict) or f"{plane}.{key}" in (f.get("unmeasurable") or {}):
            unmeasurable += 1
        else:
            missing += 1
    return _over_trials({"median": stats.median(values) if values else None, "missing": missing,
                         "unmeasurable": unmeasurable})


def overview_row(exp: dict[str, Any]) -> dict[str, Any]:
    """The experiment's line in the overview: verdict, and the incident's (last fault's) figures."""
    word, why = experiment_verdict(exp)
    row = {"experiment": exp["name"], "scope": exp["scope"], "trials": len(exp["trials"]), "verdict": word,
           "why": why}
    incidents = [t["summary"]["faults"][-1] for t in exp["trials"] if t["summary"].get("faults")]
    if not incidents:
        row.update(affected="-", affected_failed="-", affected_first_success="-", affected_steady_state="-",
                   service_failed="-", control_plane_outage="-", capacity_restored="-")
    elif len(exp["trials"]) == 1:
        f = incidents[0]
        row.update(affected=_basis(f), affected_failed=_failed(f["affected"]),
                   affected_first_success=figure(f, "affected", SUCCESS.name),
                   affected_steady_state=figure(f, "affected", STEADY.name),
                   service_failed=_failed(f["service"]),
                   control_plane_outage=plane_figure(f, OUTAGE.plane, OUTAGE.name),
                   capacity_restored=plane_figure(f, RESTORED.plane, RESTORED.name))
    else:
        st = exp["statistics_by_population"]
        fa, fs = st["affected"]["incident"], st["service"]["incident"]
        row.update(affected=", ".join(sorted({_basis(f) for f in incidents})),
                   affected_failed=f"{fa['failed']['failed']}/{fa['failed']['requests']} (sum)",
                   affected_first_success=_over_trials(fa["figures"][SUCCESS.name]),
                   affected_steady_state=_over_trials(fa["figures"][STEADY.name]),
                   service_failed=f"{fs['failed']['failed']}/{fs['failed']['requests']} (sum)",
                   control_plane_outage=_plane_over_trials(incidents, OUTAGE.plane, OUTAGE.name),
                   capacity_restored=_plane_over_trials(incidents, RESTORED.plane, RESTORED.name))
    return row


def overview_rows(doc: dict[str, Any]) -> list[list[str]]:
    return [[r["experiment"], str(r["scope"]), str(r["trials"]), r["verdict"], r["affected"], r["affected_failed"],
             r["affected_first_success"], r["affected_steady_state"], r["service_failed"],
             r["control_plane_outage"], r["capacity_restored"], "; ".join(r["why"]) or "-"] for r in doc["overview"]]


FAULT_COLUMNS = ("trial", "scope", "target", "failed", "mid-stream", "in flight at injection", "unaffected zones",
                 "by class", "zones", "affected", "window s", "goodput before/during/after rps",
                 "resolution s", "bounds met")


def trial_faults(exp: dict[str, Any]):
    for i, t in enumerate(exp["trials"], 1):
        for f in t["summary"].get("faults") or []:
            yield i, t["summary"], f


def fault_rows(exp: dict[str, Any]) -> list[list[str]]:
    """One row per fault: what it was and the service-wide failures (the figures: :func:`figure_rows`)."""
    rows = []
    for i, s, f in trial_faults(exp):
        met = bounds.fault_met((s.get("bounds") or {}).get("results"), f["fault_id"])
        g = f["goodput_rps"]
        gp = "/".join("-" if g[k] is None else fmt(g[k]) for k in ("before", "during", "after"))
        by_class = ", ".join(f"{k} {v}" for k, v in f["failed"]["by_class"].items()) or "-"
        window = fmt(f["window_s"]) + (f" (cut by {f['window_cut_by']})" if f.get("window_cut_by") else "")
        rows.append([str(i), f["scope"], f["target"], str(f["failed"]["total"]), str(f["failed"]["mid_stream"]),
                     str(f["failed"]["in_flight_at_injection"]), unaffected_zones(f, reasons=True), by_class,
                     ", ".join(f["zones"] or []) or "-", _basis(f), window, gp,
                     "-" if f["resolution_s"] is None else fmt(f["resolution_s"]),
                     "-" if met is None else ("NO" if met == "no" else met)])
    return rows


FIGURE_COLUMNS = ("figure", "affected", "service")


def _yes_no(f: dict[str, Any], pop: str, key: str) -> str:
    v = f[pop][key]
    return {True: "yes", False: "no"}[v] if isinstance(v, bool) else figure(f, pop, key, reasons=True)


def figure_rows(f: dict[str, Any]) -> list[list[str]]:
    """The fault's figures, one row each, the affected population beside the service."""
    def both(fn) -> list[str]:
        return [fn(pop) for pop in POPULATIONS]

    rows = [[figures.REQUESTS.label, *both(lambda p: str(f[p]["requests"]))],
            [figures.IN_FLIGHT.label, *both(lambda p: str(f[p]["in_flight_at_injection"]))],
            [f"{figures.FAILED.label}/{figures.REQUESTS.label} (ratio)", *both(lambda p: _failed(f[p]))],
            [figures.FAILED_MID_STREAM.label, *both(lambda p: str(f[p]["failed_mid_stream"]))],
            ["failed by class", *both(lambda p: ", ".join(f"{k} {v}" for k, v in f[p]["failed_by_class"].items())
                                      or "-")]]
    for fig in figures.of(figures.POPULATION):
        if fig.row:
            show = (lambda p: _yes_no(f, p, fig.name)) if fig.unit == "bool" else \
                (lambda p: figure(f, p, fig.name, reasons=True))
            rows.append([fig.label, *both(show)])
    return rows


def scope_text(scope: str | None) -> str:
    """A scope as the headings name it, with its label (:mod:`chaos.scopes`): ``zone: zone loss``; a
    scope the registry does not know (an older run's, a plug-in's not loaded) by its name alone."""
    label = scopes.label(scope)
    return f"{scope}: {label}" if label and label != scope else str(scope)


def fault_title(trial: int, f: dict[str, Any]) -> str:
    zones = ", ".join(f["zones"] or []) or "no zone"
    return f"Trial {trial}, fault {f['fault_id']}: {f['scope']} {f['target']} ({zones})"


def fault_notes(f: dict[str, Any]) -> list[str]:
    """Who the affected population is and why; every figure that could not be measured and why
    (figures with the same reason on one line)."""
    a = f["affected"]
    basis = ("the fault's domain" if a["basis"] == "fault_domain" else "the service")
    out = [f"Affected population: {basis}: {a['why']}."]
    by_reason: dict[str, list[str]] = {}
    for key, why in sorted((f.get("unmeasurable") or {}).items()):
        by_reason.setdefault(str(why), []).append(key)
    for why, keys in by_reason.items():
        out.append(f"Unmeasurable {', '.join(keys)}: {why}.")
    return out


def ci_cell_or_small(ci) -> str:
    return "—, N too small" if not ci else f"[{fmt(ci[0])}, {fmt(ci[1])}]"


def ci_cell(ci) -> str:
    return "-" if not ci else f"[{fmt(ci[0])}, {fmt(ci[1])}]"


STAT_COLUMNS = ("fault", "population", "figure", "trials with a value", "never reached", "unmeasurable", "median",
                "median 95% CI", "p95", "p95 95% CI")


def _stat_groups(exp: dict[str, Any]):
    """(label, population, aggregate): the incident, then each fault position when a trial has more than one."""
    pops = [exp["population"]] + [p for p in POPULATIONS if p != exp["population"]]
    for pop in pops:
        st = exp["statistics_by_population"][pop]
        yield "incident (last fault)", pop, st["incident"]
        if len(st["positions"]) > 1:
            for pos in st["positions"]:
                yield f"fault {pos['position']}", pop, pos


def stat_rows(exp: dict[str, Any]) -> list[list[str]]:
    rows = []
    for label, pop, agg in _stat_groups(exp):
        for key, name in FIGURES.items():
            d = agg["figures"][key]
            rows.append([label, pop, name, str(d["n"]), str(d["missing"]), str(d["unmeasurable"]),
                         "-" if d["median"] is None else fmt(d["median"]), ci_cell_or_small(d["median_ci95"]),
                         "-" if d["p95"] is None else fmt(d["p95"]), ci_cell_or_small(d["p95_ci95"])])
    return rows


def stat_lines(exp: dict[str, Any]) -> list[str]:
    st = exp["statistics"]
    lines = []
    for label, pop, agg in _stat_groups(exp):
        fl = agg["failed"]
        frac = "-" if fl["fraction"] is None else f"{fl['fraction']:.4f}"
        lines.append(f"Failed fraction, {label}, {pop}: {fl['failed']}/{fl['requests']} = {frac}, "
                     f"95% Wilson interval {ci_cell(fl['wilson95'])}.")
    lines.append(f"Bounds met in {st['bounds_met']['trials']} of {st['bounds_met']['of']} trial(s), "
                 f"95% Wilson interval {ci_cell(st['bounds_met']['wilson95'])}.")
    flags = sorted({f for d in st["incident"]["figures"].values() for f in d["flags"]})
    if flags:
        lines += [f"N too small for some claims ({exp['population']}, incident): " + "; ".join(flags) + "."]
    return lines


BOUND_COLUMNS = ("trial", "fault", "bound", "population", "value", "limit", "status", "reason")
STATUS_TEXT = {bounds.MET: "met", bounds.VIOLATED: "VIOLATED", bounds.NOT_APPLICABLE: "n/a",
               bounds.UNMEASURABLE: "UNMEASURABLE"}


def _status(r: dict[str, Any]) -> str:
    status = r.get("status") or {True: bounds.MET, False: bounds.VIOLATED}.get(r["met"], bounds.NOT_APPLICABLE)
    return status


def _bound_value(r: dict[str, Any]) -> str:
    if r["value"] is not None:
        return fmt(r["value"])
    return {bounds.UNMEASURABLE: "unmeasurable", bounds.NOT_APPLICABLE: "n/a"}.get(_status(r), "never")


def bound_rows(exp: dict[str, Any]) -> list[list[str]]:
    rows = []
    for i, t in enumerate(exp["trials"], 1):
        for r in (t["summary"].get("bounds") or {}).get("results") or []:
            rows.append([str(i), str(r.get("fault_id") or "-"), r["bound"], str(r.get("population") or "-"),
                         _bound_value(r), str(r["limit"]), STATUS_TEXT.get(_status(r), _status(r)),
                         r.get("reason") or "-"])
    return rows


def bound_lines(exp: dict[str, Any]) -> list[str]:
    out = []
    for i, t in enumerate(exp["trials"], 1):
        why = bounds.describe_failures((t["summary"].get("bounds") or {}).get("results") or [])
        if why:
            out.append(f"Trial {i} does not pass: " + "; ".join(why) + ".")
    return out


def definition_lines(exp: dict[str, Any]) -> list[str]:
    d = exp["trials"][0]["summary"].get("definitions") or {}
    ss, slo = d.get("steady_state") or {}, d.get("slo") or {}
    if not ss:
        return []

    def limit(v, what):
        return f"{what} <= {v} s" if v is not None else f"no {what} limit"

    return [f"Steady state: windows of {ss.get('window_s')} s with at least {ss.get('min_requests')} requests, "
            f"success ratio >= {ss.get('min_success_ratio')}, {limit(ss.get('max_p95_ttft_s'), 'p95 latency')}; "
            f"SLO: {limit(slo.get('ttft_s'), 'TTFT')}, {limit(slo.get('itl_s'), 'ITL')}, "
            f"{limit(slo.get('e2e_s'), 'end-to-end')}; bounds checked on the {exp['population']} population."]
