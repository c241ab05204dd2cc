"""`availproof report RUN_DIR`: the evidence of a run as Markdown, self-contained HTML or JSON.

A run directory is one of three things, and the report handles each:

- one experiment run (``summary.json`` and/or ``records.ndjson``);
- one experiment repeated (``trial-1/``, ``trial-2/``... from ``availproof run --trials N``);
- a suite (one sub-directory per experiment, each of the two kinds above).

The report opens with an **overview**: one row per experiment, in suite order (the order of
the suite directory's ``suite.json`` when there is one, else the order of
:data:`chaos.suite.FULL`; experiments it does not name come last, by name): the verdict,
the affected population's failed requests, time to first success and steady state of the
incident (the last fault), the service's failed requests, the control plane's outage and the time
to capacity restored.

Then, for each experiment: per fault, the **affected** and **service** populations' figures
side by side (:mod:`chaos.analysis`; every number copied unchanged from the summary), then its
**control plane and capacity** (:mod:`chaos.planes`: loss, restored and outage of the control
plane, the worst GCS health latency, the samples and their period; the target placement per
deployment and zone, the fewest replicas and their ratio to the target, lost and restored, the
fewest nodes alive in all and per zone), who the affected population is and why, and the reason
of every figure that could not be measured (a null is printed as ``unmeasurable: <reason>``,
``n/a`` when it does not apply, and ``never`` only when it was not reached; never as 0; a 0
outage or restore says "never down" / "never lost"); the bounds as stated and as checked,
with the population each was checked on and its status; the statistics over trials, for
the incident and per fault position (median and p95 with bootstrap intervals, where N
supports them, else "—, N too small"; failed fraction with a Wilson interval); the timeline
(per-zone lanes, then the control plane and capacity lanes); the environment; and what the result does not cover.

A run without ``summary.json`` (killed) is recomputed from its records and marked PARTIAL.
A ``summary.json`` older than format :data:`chaos.analysis.FORMAT_VERSION` (one population,
no ``format_version``) is re-derived from its ``records.ndjson`` by :func:`chaos.summary.reanalyse`
(the definitions and bounds recorded in the run header, else the old summary's, else the
defaults), its stated bounds checked again, and the report says so.

``--compare A B`` puts two runs side by side per experiment (the incident's figures) and says
whether each difference is larger than the intervals.
"""

from __future__ import annotations

import base64
import html as _html
import json
from pathlib import Path
from typing import Any

from chaos import analysis, bounds, evidence, records as rec, scopes, stats, suite
from chaos import verdict as verdict_mod
from chaos.errors import UsageError
from chaos.reports.cells import fmt, figure, plane_figure, unaffected_zones

LABELS = {"time_to_impact_s": "time to impact s", "time_to_detect_s": "time to detect s",
          "time_to_first_success_s": "time to first success s",
          "time_to_first_recovery_s": "time to first recovery s",
          "time_to_steady_state_s": "time to steady state s", "time_to_last_failure_s": "time to last failure s",
          "relapses": "relapses"}
# the figures over trials (and compared): the incident's recovery figures
FIGURES = {k: LABELS[k] for k in stats.RECOVERY_FIGURES}
POPULATIONS = analysis.POPULATIONS  # ("affected", "service")


# ---------------------------------------------------------------- loading (chaos.evidence: one reader, one version rule)
load_summary = evidence.load_summary
summary_version = evidence.summary_version


def _experiment(name: str, dirs: list[Path]) -> dict[str, Any]:
    try:
        exp = _experiment_unchecked(name, dirs)
        _md_experiment(exp)  # every field the report reads is there and of the right type
        overview_row(exp)
        return exp
    except (KeyError, TypeError, AttributeError, ValueError, IndexError) as e:
        raise UsageError(f"{dirs[0]}: the summary is damaged ({type(e).__name__}: {e}); "
                         "remove summary.json to recompute it from records.ndjson") from None


def _population(summary: dict[str, Any]) -> str:
    """The population the bounds were checked on: their results', else the definitions', else affected."""
    for r in (summary.get("bounds") or {}).get("results") or []:
        if r.get("population") in POPULATIONS:
            return r["population"]
    pop = (summary.get("definitions") or {}).get("population")
    return pop if pop in POPULATIONS else "affected"


def _experiment_unchecked(name: str, dirs: list[Path]) -> dict[str, Any]:
    trials = []
    for d in dirs:
        s = load_summary(d)
        trials.append({"dir": str(d), "summary": s})
    summaries = [t["summary"] for t in trials]
    first = summaries[0]
    population = _population(first)
    by_pop = {p: stats.trials(summaries, p) for p in POPULATIONS}
    return {
        "name": name,
        "title": first.get("experiment") or name,
        "scope": first.get("scope"),
        "partial": any(s.get("partial") for s in summaries),
        "rederived": any(s.get("rederived") for s in summaries),
        "notes": sorted({s["note"] for s in summaries if s.get("note")}),
        "trials": trials,
        "population": population,
        "statistics": by_pop[population],
        "statistics_by_population": by_pop,
        "bounds": (first.get("bounds") or {}).get("stated"),
        "bounds_source": (first.get("bounds") or {}).get("source"),
        "environment": environment(first, dirs[0]),
        "not_covered": not_covered(first),
    }


def suite_order(run_dir: Path) -> tuple[list[str] | None, str]:
    """The experiments' order in a suite directory, and where it comes from: ``suite.json`` (a list
    of names or paths, or an object with ``experiments`` / ``results`` / ``order``, each entry a name,
    a path, or an object with ``name`` or ``experiment``), else the suite's own order (``FULL``)."""
    path = Path(run_dir) / "suite.json"
    if path.exists():
        try:
            data = json.loads(path.read_text())
            entries = data if isinstance(data, list) else next(
                (data[k] for k in ("experiments", "results", "order") if isinstance(data.get(k), list)), None)
            names = []
            for e in entries or []:
                if isinstance(e, dict):
                    e = e.get("name") or e.get("experiment")
                if isinstance(e, str) and e:
                    n = Path(e).name
                    names.append(n[:-5] if n.endswith(".json") else n)
            if names:
                return names, "suite.json"
        except (ValueError, AttributeError, TypeError):
            pass
    return list(suite.FULL), "the suite's order (chaos/suite.py)"


def build(run_dir: Path) -> dict[str, Any]:
    """The report document: the overview, then one entry per experiment found under ``run_dir``."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UsageError(f"{run_dir}: no such run directory")
    order_source = None
    found = evidence.experiments(run_dir)
    if not (rec.is_run_dir(run_dir) or evidence.trial_dirs(run_dir)):
        order, order_source = suite_order(run_dir)
        rank = {n: i for i, n in enumerate(order)}
        found = dict(sorted(found.items(), key=lambda kv: (rank.get(kv[0], len(rank)), kv[0])))
    experiments = [_experiment(name, dirs) for name, dirs in found.items()]
    if not experiments:
        raise UsageError(f"{run_dir}: no summary.json or records.ndjson in it or its sub-directories: not a run directory")
    return {"run_dir": str(run_dir), "format_version": analysis.FORMAT_VERSION,
            "suite": order_source is not None, "order": order_source,
            "overview": [overview_row(e) for e in experiments], "experiments": experiments}


def environment(summary: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    """Versions, topology, app and load shape: from the summary, completed from the records header."""
    env = dict(summary.get("environment") or {})
    env.setdefault("arrivals", summary.get("arrivals"))  # the load as sent (chaos.analysis.arrivals)
    env.setdefault("app", summary.get("app"))
    env.setdefault("cluster", summary.get("cluster"))
    if summary.get("rate_from"):
        env.setdefault("rate_from", summary["rate_from"])  # load.utilization (chaos.utilization)
    if "load" not in env:
        records_path = Path(run_dir) / "records.ndjson"
        if records_path.exists():
            header = rec.read(records_path).header
            env["load"] = header.get("load")
            env["routing"] = header.get("routing")
    return env


def not_covered(summary: dict[str, Any]) -> list[str]:
    cluster = summary.get("cluster") or {}
    where = "network namespaces on one bridge" if cluster.get("network") == "netns" else "loopback addresses"
    out = []
    if cluster.get("backend", "local") == "local":
        out.append(f"One machine: zones are processes on {where}, not facilities; no real power, cooling or "
                   "network equipment fails.")
    front = _front(summary)
    shape = front.get("shape")
    if front.get("kind") == "kubernetes-service":  # first: its shape is lb too, but it is not the rig's HAProxy
        out.append(f"Front door: the Kubernetes Service {front.get('service')} (endpoints follow the pods' readiness); "
                   "no balancer of the rig's.")
    elif shape == "direct":
        out.append("Front door: none. The client sent to the Serve proxies itself, round robin, with no health "
                   "checks: a dead proxy kept its share of the traffic. Users behind a health-checking load "
                   "balancer see fewer failures (run with --front lb).")
    elif shape in ("lb", "zonal-lb"):
        st = front.get("settings") or {}
        out.append(f"Front door: the rig's HAProxy ({shape}), checks every {st.get('check_interval_s')} s, "
                   f"{st.get('fall')} failed to take a proxy out, retries {st.get('retries')}"
                   f"{', TLS' if st.get('tls') else ''}. Another balancer (a cloud LB, a Kubernetes Service) "
                   "detects and retries differently: its own figures may differ.")
    out.append("The load generator runs beside the cluster and shares its CPUs; latencies include that contention.")
    out.append("No figure is finer than its resolution (the inter-arrival time of the load).")
    out.append("One workload shape (the load section); other prompt lengths, rates or models may recover differently.")
    if summary.get("partial"):
        out.append("The run did not finish: the figures cover only the records taken before it stopped.")
    return out


# ---------------------------------------------------------------- rows (shared by md and html)
def _verdict(summary: dict[str, Any]) -> tuple[str, list[str]]:
    """The run's one verdict (:mod:`chaos.verdict`, as its summary records it) and what keeps it from passing."""
    v = verdict_mod.of(summary)
    return v["word"], list(v["reasons"])


def experiment_verdict(exp: dict[str, Any]) -> tuple[str, list[str]]:
    verdicts = [_verdict(t["summary"]) for t in exp["trials"]]
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


OVERVIEW_COLUMNS = ("experiment", "scope", "trials", "verdict", "affected", "affected failed",
                    "affected time to first success s", "affected time to steady state s", "service failed",
                    "control-plane outage s", "capacity restored s", "what keeps it from passing")


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
                   affected_first_success=figure(f, "affected", "time_to_first_success_s"),
                   affected_steady_state=figure(f, "affected", "time_to_steady_state_s"),
                   service_failed=_failed(f["service"]),
                   control_plane_outage=plane_figure(f, "control_plane", "outage_s"),
                   capacity_restored=plane_figure(f, "capacity", "time_to_restored_s"))
    else:
        st = exp["statistics_by_population"]
        fa, fs = st["affected"]["incident"], st["service"]["incident"]
        row.update(affected=", ".join(sorted({_basis(f) for f in incidents})),
                   affected_failed=f"{fa['failed']['failed']}/{fa['failed']['requests']} (sum)",
                   affected_first_success=_over_trials(fa["figures"]["time_to_first_success_s"]),
                   affected_steady_state=_over_trials(fa["figures"]["time_to_steady_state_s"]),
                   service_failed=f"{fs['failed']['failed']}/{fs['failed']['requests']} (sum)",
                   control_plane_outage=_plane_over_trials(incidents, "control_plane", "outage_s"),
                   capacity_restored=_plane_over_trials(incidents, "capacity", "time_to_restored_s"))
    return row


def overview_rows(doc: dict[str, Any]) -> list[list[str]]:
    return [[r["experiment"], str(r["scope"]), str(r["trials"]), r["verdict"], r["affected"], r["affected_failed"],
             r["affected_first_success"], r["affected_steady_state"], r["service_failed"],
             r["control_plane_outage"], r["capacity_restored"], "; ".join(r["why"]) or "-"] for r in doc["overview"]]


FAULT_COLUMNS = ("trial", "scope", "target", "failed", "mid-stream", "in flight at injection", "unaffected zones",
                 "by class", "zones", "affected", "window s", "goodput before/during/after rps",
                 "resolution s", "bounds met")


def _front(summary: dict[str, Any]) -> dict[str, Any]:
    """What stood in front of the proxies in a run (its environment's ``front_door``)."""
    return (summary.get("environment") or {}).get("front_door") or {}


def _faults(exp: dict[str, Any]):
    for i, t in enumerate(exp["trials"], 1):
        for f in t["summary"].get("faults") or []:
            yield i, t["summary"], f


def fault_rows(exp: dict[str, Any]) -> list[list[str]]:
    """One row per fault: what it was and the service-wide failures (the figures: :func:`figure_rows`)."""
    rows = []
    for i, s, f in _faults(exp):
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

    rows = [["requests", *both(lambda p: str(f[p]["requests"]))],
            ["in flight at injection", *both(lambda p: str(f[p]["in_flight_at_injection"]))],
            ["failed/requests (ratio)", *both(lambda p: _failed(f[p]))],
            ["failed mid-stream", *both(lambda p: str(f[p]["failed_mid_stream"]))],
            ["failed by class", *both(lambda p: ", ".join(f"{k} {v}" for k, v in f[p]["failed_by_class"].items())
                                      or "-")]]
    for key in ("time_to_impact_s", "time_to_detect_s", "time_to_first_success_s", "time_to_first_recovery_s",
                "time_to_steady_state_s", "time_to_last_failure_s"):
        rows.append([LABELS[key], *both(lambda p: figure(f, p, key, reasons=True))])
    rows.append(["relapses", *both(lambda p: figure(f, p, "relapses", reasons=True))])
    rows.append(["disrupted", *both(lambda p: _yes_no(f, p, "disrupted"))])
    rows.append(["recovered", *both(lambda p: _yes_no(f, p, "recovered"))])
    return rows


PLANE_COLUMNS = ("plane", "figure", "value")
CONTROL_PLANE_LABELS = {"time_to_loss_s": "time to loss s", "time_to_restored_s": "time to restored s",
                        "outage_s": "outage s", "max_gcs_latency_s": "max GCS health latency s",
                        "samples": "samples in the window", "resolution_s": "resolution s (sampling period)"}
CAPACITY_LABELS = {"target_replicas": "target replicas", "target": "target placement",
                   "min_replicas": "min replicas", "min_ratio": "min ratio (min / target)",
                   "time_to_lost_s": "time to lost s", "time_to_restored_s": "time to restored s",
                   "nodes_min_alive": "nodes min alive", "nodes_min_alive_per_zone": "nodes min alive per zone"}


def _per_zone(d: dict[str, Any]) -> str:
    return ", ".join(f"{z} {n}" for z, n in sorted(d.items())) or "none"


def placement_text(target: dict[str, dict[str, int]]) -> str:
    """RUNNING replicas per deployment and zone: ``StreamTarget: zone-a 1, zone-b 1; Ingress: zone-a 1``."""
    return "; ".join(f"{dep}: {_per_zone(zones)}" for dep, zones in sorted(target.items())) or "none"


def _plane_note(f: dict[str, Any], key: str) -> str | None:
    """The reason listed for ``key`` in the fault's unmeasurable map, as a cell."""
    why = (f.get("unmeasurable") or {}).get(key)
    return f"unmeasurable: {why}" if why else None


def plane_rows(f: dict[str, Any], front: dict[str, Any] | None = None) -> list[list[str]]:
    """The fault's control plane and capacity (:mod:`chaos.planes`), one row per figure, every number
    as the summary has it; a null by the rules of :func:`chaos.reports.cells.plane_figure`."""
    rows: list[list[str]] = []
    cp, cap = f.get("control_plane"), f.get("capacity")
    if not isinstance(cp, dict) or not isinstance(cap, dict):
        why = plane_figure(f, "control_plane", "outage_s", reasons=True)
        return [["control plane", "all", why], ["capacity", "all", why]]
    for key in ("time_to_loss_s", "time_to_restored_s", "outage_s"):
        rows.append(["control plane", CONTROL_PLANE_LABELS[key], plane_figure(f, "control_plane", key, True)])
    if cp.get("losses") is not None:  # format-2 runs analysed before losses and blips were: not shown
        rows.append(["control plane", "losses (2+ samples not up in a row) / blips (a lone one)",
                     f"{cp['losses']} / {cp['blips']}"])
    lat = cp.get("max_gcs_latency_s")
    rows.append(["control plane", CONTROL_PLANE_LABELS["max_gcs_latency_s"],
                 fmt(lat) if lat is not None else (_plane_note(f, "control_plane.max_gcs_latency_s")
                                                    or _plane_note(f, "control_plane.time_to_loss_s")
                                                    or "n/a (the GCS answered no sample in the window)")])
    rows.append(["control plane", CONTROL_PLANE_LABELS["samples"], str(cp.get("samples"))])
    res = cp.get("resolution_s")
    rows.append(["control plane", CONTROL_PLANE_LABELS["resolution_s"],
                 fmt(res) if res is not None else "n/a (fewer than two samples in the window)"])
    rows.append(["capacity", CAPACITY_LABELS["target_replicas"], plane_figure(f, "capacity", "target_replicas", True)])
    target = cap.get("target")
    rows.append(["capacity", CAPACITY_LABELS["target"],
                 placement_text(target) if isinstance(target, dict)
                 else (_plane_note(f, "capacity.target_replicas") or "-")])
    for key in ("min_replicas", "min_ratio", "time_to_lost_s", "time_to_restored_s"):
        text = plane_figure(f, "capacity", key, True)
        if key == "min_ratio" and cap.get(key) is None and text == "never":
            text = "n/a (the target has no replica)"
        rows.append(["capacity", CAPACITY_LABELS[key], text])
    nodes = cap.get("nodes_min_alive")
    rows.append(["capacity", CAPACITY_LABELS["nodes_min_alive"],
                 str(nodes) if nodes is not None else (_plane_note(f, "capacity.nodes_min_alive") or "n/a")])
    per_zone = cap.get("nodes_min_alive_per_zone")
    rows.append(["capacity", CAPACITY_LABELS["nodes_min_alive_per_zone"],
                 _per_zone(per_zone) if isinstance(per_zone, dict)
                 else (_plane_note(f, "capacity.nodes_min_alive") or "n/a")])
    return rows + replacement_rows(f) + front_door_rows(f, front) + served_rows(f)


def served_rows(f: dict[str, Any]) -> list[list[str]]:
    """Who served (:func:`chaos.analysis.locality`, :func:`chaos.analysis.warmup`): the shares served outside
    the client's zone and region when some phase could tell, and the warm-up when the load had sessions."""
    rows: list[list[str]] = []
    loc = f.get("locality") or {}

    def share(phase: str, key: str) -> str:
        v = (loc.get(phase) or {}).get(key)
        return "n/a" if v is None else f"{v:.2f}"

    for domain in ("zone", "region"):
        key = f"cross_{domain}_share"
        if any((loc.get(p) or {}).get(key) is not None for p in ("before", "during", "after")):
            rows.append(["who served", f"share served outside the client's {domain}, before / during / after",
                         " / ".join(share(p, key) for p in ("before", "during", "after"))])
    w = f.get("warmup")
    if isinstance(w, dict) and (w.get("requests") or w.get("baseline_p95_ttft_s") is not None):
        base = w.get("baseline_p95_ttft_s")
        rows.append(["warm-up", "p95 TTFT of prefix-sharing requests before the fault s",
                     fmt(base) if base is not None else (_plane_note(f, "warmup.baseline_p95_ttft_s") or "n/a")])
        warm = w.get("time_to_warm_s")
        rows.append(["warm-up", f"time to warm s (the replacement's p95 within {w.get('factor')}x the warm replicas')",
                     fmt(warm) if warm is not None else (_plane_note(f, "warmup.time_to_warm_s") or "never")])
        if w.get("replacements"):
            first = w.get("first_served_by_replacement_s")
            rows.append(["warm-up", "replacement (first served at s)",
                         ", ".join(r[:8] for r in w["replacements"]) + (f" ({fmt(first)})" if first is not None else "")])
    return rows


def replacement_rows(f: dict[str, Any]) -> list[list[str]]:
    """What the fault replaced (:func:`chaos.planes.replacement`): shown for the scopes whose point is
    replacing replicas (upgrades and drains: ``replacing`` in :mod:`chaos.scopes`), and for any fault
    that replaced something."""
    rp = f.get("replacement")
    if not isinstance(rp, dict) or (not scopes.get(f.get("scope")).replacing and not rp.get("replaced")):
        return []
    why = _plane_note(f, "replacement")
    if why:
        return [["replacement", "all", why]]
    new = ", ".join(f"{x['replica'][:8]} at {fmt(x['running_s'])}" for x in rp["new"]) or "none"
    done = rp.get("time_to_complete_s")
    return [["replacement", "replicas serving before", str(rp["replicas_before"])],
            ["replacement", "of them replaced by the window's end", str(rp["replaced"])],
            ["replacement", "new replicas serving (s from injection)", new],
            ["replacement", "complete (no old replica, as many new) s",
             fmt(done) if done is not None else (_plane_note(f, "replacement.time_to_complete_s") or "never")]]


def front_door_rows(f: dict[str, Any], front: dict[str, Any] | None = None) -> list[list[str]]:
    """What the balancer did (:func:`chaos.frontdoor.fault_figures`); one row saying why when there are no
    figures. ``front``: the run's environment ``front_door`` (what stood in front)."""
    fd = f.get("front_door")
    front = front or {}
    if fd is None:
        if front.get("kind") == "kubernetes-service":
            return [["front door", "balancer", f"n/a: the Kubernetes Service {front.get('service')} "
                     "(no counters of a balancer of the rig's)"]]
        if front.get("shape") in ("lb", "zonal-lb"):
            return [["front door", "balancer", f"{front['shape']}, but no read of its counters was recorded"]]
        return [["front door", "balancer", "none: the client sent to the proxies itself (front direct)"]]
    why = _plane_note(f, "front_door")
    if why:
        return [["front door", "all", why]]
    downs = "; ".join(f"{x['server']} ({x['zone'] or 'no zone'}) DOWN at {fmt(x['down_s'])}"
                      + (f", UP at {fmt(x['up_s'])}" if x["up_s"] is not None else ", not UP in the window")
                      for x in fd["servers_down"]) or "none"
    detect = fd.get("time_to_detect_s")
    rows = [["front door", "time to detect s (first server marked DOWN)",
             fmt(detect) if detect is not None else (_plane_note(f, "front_door.time_to_detect_s") or "never")],
            ["front door", "servers taken out of rotation", downs]]
    for key, label in (("retried", "extra attempts after a failed one (hidden from the client if they succeeded)"),
                       ("retries", "of them to the same server (wretr)"),
                       ("redispatches", "of them to another server (wredis)"),
                       ("own_5xx", "5xx answered by the balancer itself"), ("server_5xx", "5xx from the proxies"),
                       ("connection_errors", "connection errors to the proxies")):
        v = fd.get(key)
        rows.append(["front door", label, str(v) if v is not None
                     else (_plane_note(f, f"front_door.{key}") or _plane_note(f, "front_door.retries") or "n/a")])
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


def _ci_or_small(ci) -> str:
    return "—, N too small" if not ci else f"[{fmt(ci[0])}, {fmt(ci[1])}]"


def _ci(ci) -> str:
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
                         "-" if d["median"] is None else fmt(d["median"]), _ci_or_small(d["median_ci95"]),
                         "-" if d["p95"] is None else fmt(d["p95"]), _ci_or_small(d["p95_ci95"])])
    return rows


def stat_lines(exp: dict[str, Any]) -> list[str]:
    st = exp["statistics"]
    lines = []
    for label, pop, agg in _stat_groups(exp):
        fl = agg["failed"]
        frac = "-" if fl["fraction"] is None else f"{fl['fraction']:.4f}"
        lines.append(f"Failed fraction, {label}, {pop}: {fl['failed']}/{fl['requests']} = {frac}, "
                     f"95% Wilson interval {_ci(fl['wilson95'])}.")
    lines.append(f"Bounds met in {st['bounds_met']['trials']} of {st['bounds_met']['of']} trial(s), "
                 f"95% Wilson interval {_ci(st['bounds_met']['wilson95'])}.")
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


def env_lines(env: dict[str, Any]) -> list[str]:
    out = []
    for k in ("availproof", "ray", "vllm", "python", "platform", "cpus"):
        if env.get(k) is not None:
            out.append(f"{k}: {env[k]}")
    if env.get("app"):
        out.append(f"app: {env['app']}")
    c = env.get("cluster") or {}
    if c:
        out.append("cluster: " + ", ".join(f"{k} {v}" for k, v in c.items() if v is not None))
    if env.get("nodes"):
        out.append("nodes: " + ", ".join(f"{n['name']} ({n.get('region')}/{n.get('zone')})" for n in env["nodes"]))
    load = env.get("load") if isinstance(env.get("load"), dict) else {}
    if load:
        shape = (f"{load.get('mode')} loop, {_arrival_text(load)}"
                 if load.get("mode") == "open" else f"closed loop, concurrency {load.get('concurrency')}")
        if (load.get("workers") or 1) > 1:
            shape += f", from {load['workers']} worker processes"
        out.append(f"load: {shape}, {load.get('duration_s')} s, warm-up {load.get('warmup_s')} s (excluded), "
                   f"timeout {load.get('timeout_s')} s, {'streaming' if load.get('stream') else 'not streaming'} "
                   f"{load.get('route')}, prompt words {load.get('prompt_words')}, max tokens {load.get('max_tokens')}, "
                   f"seed {load.get('seed')}")
    if isinstance(env.get("rate_from"), dict):
        from chaos import utilization

        out.append(f"rate from a measured capacity (load.utilization): {utilization.describe(env['rate_from'])}")
    if env.get("routing"):
        out.append(f"routing: {env['routing']}")
    a = env.get("arrivals") or {}
    if a.get("sent"):
        workers = a.get("per_worker") or {}
        out.append(f"sent: {a['sent']} requests at {a.get('rate_rps')} req/s, inter-arrival CV {a.get('interarrival_cv')}"
                   + (f", per worker {', '.join(f'{w}: {n}' for w, n in workers.items())}" if len(workers) > 1 else "")
                   + (f", {a['clipped']} clipped to max_model_len {load.get('max_model_len')}" if a.get("clipped") else ""))
    return out


def _arrival_text(load: dict[str, Any]) -> str:
    """How the open loop's instants were drawn: a trace, stages, or one rate (gamma with its burstiness)."""
    if load.get("trace"):
        return f"trace {load['trace']} at x{load.get('trace_speed', 1)} ({load.get('trace_end', 'stop')} at its end)"
    kind = load.get("arrival")
    if kind == "gamma":
        kind = f"gamma (burstiness {load.get('burstiness')})"
    if load.get("stages"):
        return f"{kind} arrivals in stages " + ", ".join(f"{s['rate']} req/s for {s['duration_s']} s"
                                                         for s in load["stages"])
    return f"{kind} arrivals at {load.get('rate')} req/s"


def _definition_lines(exp: dict[str, Any]) -> list[str]:
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


# ---------------------------------------------------------------- markdown
def _md_cell(c: str) -> str:
    return str(c).replace("|", "\\|").replace("\n", " ")


def _md_table(cols, rows) -> list[str]:
    return ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)] + \
        ["| " + " | ".join(_md_cell(c) for c in r) + " |" for r in rows]


def _order_line(doc: dict[str, Any]) -> str:
    if doc.get("suite"):
        return f"One row per experiment, in suite order (from {doc['order']}); figures of the incident (last fault)."
    return "Figures of the incident (the last fault)."


def markdown(doc: dict[str, Any]) -> str:
    lines = [f"# availproof report: {doc['run_dir']}", "", "## Overview", "", _order_line(doc), ""]
    lines += _md_table(OVERVIEW_COLUMNS, overview_rows(doc)) + [""]
    for exp in doc["experiments"]:
        lines += _md_experiment(exp)
    return "\n".join(lines) + "\n"


def _md_experiment(exp: dict[str, Any]) -> list[str]:
    lines = [f"## {exp['title']} ({exp['name']}, scope {scope_text(exp['scope'])})", ""]
    if exp["partial"]:
        why = [n for n in exp["notes"] if "did not finish" in n] or ["the run did not finish; the figures cover "
                                                                     "only the records taken"]
        lines += ["**PARTIAL RUN**: " + "; ".join(why) + ".", ""]
    if exp["rederived"]:
        lines += ["**RE-DERIVED**: " + "; ".join(n for n in exp["notes"] if "re-derived" in n) + ".", ""]
    for t in exp["trials"]:
        req = t["summary"]["requests"]
        lines.append(f"- {Path(t['dir']).name}: {req['measured']} requests measured ({req['warmup']} warm-up "
                     f"excluded), {req['ok']} ok, {req['failed']} failed ({req['failed_before_first_fault']} "
                     "before the first fault)" + (f"; stopped: {t['summary']['stop_reason']}"
                                                  if t["summary"].get("stop_reason") else ""))
    lines += [f"- {s}" for s in _definition_lines(exp)]
    lines += ["", "### Faults", ""] + _md_table(FAULT_COLUMNS, fault_rows(exp)) + [""]
    for i, t, f in _faults(exp):
        lines += [f"#### {fault_title(i, f)}", ""] + _md_table(FIGURE_COLUMNS, figure_rows(f)) + [""]
        lines += ["Control plane and capacity:", ""] + _md_table(PLANE_COLUMNS, plane_rows(f, _front(t))) + [""]
        lines += [f"- {s}" for s in fault_notes(f)] + [""]
    lines += ["### Over trials", ""] + _md_table(STAT_COLUMNS, stat_rows(exp)) + [""]
    lines += [f"- {s}" for s in stat_lines(exp)] + [""]
    lines += ["### Bounds", "", "Stated: " + (json.dumps(exp["bounds"]) if exp["bounds"] else "none")]
    if exp["bounds_source"]:
        lines += ["", f"Where they come from: {exp['bounds_source']}"]
    lines += [""] + _md_table(BOUND_COLUMNS, bound_rows(exp)) + [""]
    lines += [f"- {s}" for s in bound_lines(exp)] + ([""] if bound_lines(exp) else [])
    if exp.get("timeline"):
        lines += [f"![timeline]({exp['timeline']})", ""]
    lines += ["### Environment", ""] + [f"- {s}" for s in env_lines(exp["environment"])] + [""]
    lines += ["### Not covered", ""] + [f"- {s}" for s in exp["not_covered"]] + [""]
    return lines


# ---------------------------------------------------------------- html
CSS = ("body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:80em}"
       "table{border-collapse:collapse;margin:.6em 0;font-size:.85em}"
       "th,td{border:1px solid #bbb;padding:.25em .5em;text-align:left;vertical-align:top}th{background:#eee}"
       "table.figures td:first-child{white-space:nowrap}"
       ".partial{color:#a00;font-weight:bold}.bad{color:#a00;font-weight:bold}.unm{color:#666;font-style:italic}"
       "img{max-width:100%}")
BAD_CELLS = ("NO", "VIOLATED", "UNMEASURABLE")


def _h(s: Any) -> str:
    return _html.escape(str(s))


def _cell_class(c: str) -> str:
    c = str(c)
    if c in BAD_CELLS or c.startswith(("VIOLATED", "PARTIAL", "UNMEASURED")):
        return ' class="bad"'
    if c.startswith(("unmeasurable", "n/a", "never")):
        return ' class="unm"'
    return ""


def _html_table(cols, rows, cls: str = "") -> str:
    head = "".join(f"<th>{_h(c)}</th>" for c in cols)
    body = "".join("<tr>" + "".join(f"<td{_cell_class(c)}>{_h(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f'<table class="{cls}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _ul(items: list[str]) -> str:
    return "<ul>" + "".join(f"<li>{_h(s)}</li>" for s in items) + "</ul>" if items else ""


def html(doc: dict[str, Any], images: dict[str, bytes] | None = None) -> str:
    """Self-contained HTML: styles inline, each timeline embedded as a data: URI."""
    images = images or {}
    parts = [f"<!doctype html><html><head><meta charset='utf-8'><title>availproof report</title>"
             f"<style>{CSS}</style></head><body><h1>availproof report</h1><p>{_h(doc['run_dir'])}</p>",
             f"<section id='overview'><h2>Overview</h2><p>{_h(_order_line(doc))}</p>"
             + _html_table(OVERVIEW_COLUMNS, overview_rows(doc), "overview") + "</section>"]
    for exp in doc["experiments"]:
        parts.append(f"<section id='{_h(exp['name'])}'><h2>{_h(exp['title'])} "
                     f"<small>({_h(exp['name'])}, scope {_h(scope_text(exp['scope']))})</small></h2>")
        if exp["partial"]:
            parts.append("<p class='partial'>PARTIAL RUN: the run did not finish; figures recomputed from the "
                         "records taken.</p>")
        if exp["rederived"]:
            parts.append("<p class='partial'>RE-DERIVED: "
                         + _h("; ".join(n for n in exp["notes"] if "re-derived" in n)) + ".</p>")
        parts.append(_ul(_definition_lines(exp)))
        parts.append("<h3>Faults</h3>" + _html_table(FAULT_COLUMNS, fault_rows(exp), "faults"))
        for i, t, f in _faults(exp):
            parts.append(f"<h4>{_h(fault_title(i, f))}</h4>" + _html_table(FIGURE_COLUMNS, figure_rows(f), "figures")
                         + "<h5>Control plane and capacity</h5>"
                         + _html_table(PLANE_COLUMNS, plane_rows(f, _front(t)), "planes")
                         + _ul(fault_notes(f)))
        if exp["name"] in images:
            b64 = base64.b64encode(images[exp["name"]]).decode()
            parts.append(f"<figure><img alt='timeline of {_h(exp['name'])}' src='data:image/png;base64,{b64}'>"
                         "<figcaption>Trial 1: every request on its zone's lane at its send time (red crosses "
                         "failed), the latency of the successful ones, the fault marks, and the recovery points of "
                         "the affected population (dashed) and the service (dotted); under them the control plane "
                         "sample by sample, RUNNING model replicas and worker nodes alive per zone."
                         "</figcaption></figure>")
        parts.append("<h3>Over trials</h3>" + _html_table(STAT_COLUMNS, stat_rows(exp), "stats"))
        parts.append(_ul(stat_lines(exp)))
        parts.append(f"<h3>Bounds</h3><p>Stated: <code>{_h(json.dumps(exp['bounds']))}</code></p>")
        if exp["bounds_source"]:
            parts.append(f"<p>Where they come from: {_h(exp['bounds_source'])}</p>")
        parts.append(_html_table(BOUND_COLUMNS, bound_rows(exp), "bounds") + _ul(bound_lines(exp)))
        parts.append("<h3>Environment</h3>" + _ul(env_lines(exp["environment"])))
        parts.append("<h3>Not covered</h3>" + _ul(exp["not_covered"]) + "</section>")
    parts.append("</body></html>")
    return "\n".join(parts)


# ---------------------------------------------------------------- writing
def timelines(doc: dict[str, Any]) -> dict[str, bytes]:
    """Render (and save as timeline.png beside it) the first trial's timeline of each experiment."""
    from chaos.reports import timeline

    out = {}
    for exp in doc["experiments"]:
        first = Path(exp["trials"][0]["dir"])
        if not (first / "records.ndjson").exists():
            continue
        path = timeline.write(first, rec.read(first / "records.ndjson"), exp["trials"][0]["summary"])
        exp["timeline"] = str(path.relative_to(doc["run_dir"])) if path.is_relative_to(doc["run_dir"]) else str(path)
        out[exp["name"]] = path.read_bytes()
    return out


def write(run_dir: Path, formats: tuple[str, ...] = ("md", "html", "json")) -> dict[str, Path]:
    """Write report.md / report.html / report.json into ``run_dir``; returns the paths."""
    run_dir = Path(run_dir)
    doc = build(run_dir)
    images = timelines(doc) if ("html" in formats or "md" in formats) else {}
    out = {}
    if "md" in formats:
        out["md"] = run_dir / "report.md"
        out["md"].write_text(markdown(doc))
    if "html" in formats:
        out["html"] = run_dir / "report.html"
        out["html"].write_text(html(doc, images))
    if "json" in formats:
        out["json"] = run_dir / "report.json"
        out["json"].write_text(json.dumps(doc, indent=2, default=str))
    return out


# ---------------------------------------------------------------- comparison
def _overlap(a, b) -> bool | None:
    if not a or not b:
        return None
    return a[0] <= b[1] and b[0] <= a[1]


def compare(doc_a: dict[str, Any], doc_b: dict[str, Any]) -> list[dict[str, Any]]:
    """Experiments side by side, on the incident (the last fault of each trial): by name in two
    suites, or the one experiment of each run."""
    a_by = {e["name"]: e for e in doc_a["experiments"]}
    b_by = {e["name"]: e for e in doc_b["experiments"]}
    if len(a_by) == 1 and len(b_by) == 1:
        pairs = [(next(iter(a_by.values())), next(iter(b_by.values())))]
    else:
        pairs = [(a_by[n], b_by[n]) for n in a_by if n in b_by]
        if not pairs:
            raise UsageError("the two runs have no experiment in common to compare")
    out = []
    for a, b in pairs:
        rows = []
        sa, sb = a["statistics"], b["statistics"]
        for key, label in FIGURES.items():
            fa, fb = sa["figures"][key], sb["figures"][key]
            diff = None if fa["median"] is None or fb["median"] is None else fb["median"] - fa["median"]
            ov = _overlap(fa["median_ci95"], fb["median_ci95"])
            small = fa["n"] < stats.MIN_TRIALS_MEDIAN or fb["n"] < stats.MIN_TRIALS_MEDIAN
            rows.append({"figure": label, "a": fa["median"], "a_ci95": fa["median_ci95"], "a_missing": fa["missing"],
                         "b": fb["median"], "b_ci95": fb["median_ci95"], "b_missing": fb["missing"], "diff": diff,
                         "exceeds_intervals": None if ov is None or small else not ov,
                         "note": "too few trials to tell" if small else ""})
        fa, fb = sa["failed"], sb["failed"]
        ov = _overlap(fa["wilson95"], fb["wilson95"])
        rows.append({"figure": "failed fraction", "a": fa["fraction"], "a_ci95": fa["wilson95"], "a_missing": 0,
                     "b": fb["fraction"], "b_ci95": fb["wilson95"], "b_missing": 0,
                     "diff": None if fa["fraction"] is None or fb["fraction"] is None else fb["fraction"] - fa["fraction"],
                     "exceeds_intervals": None if ov is None else not ov, "note": "Wilson 95% intervals"})
        out.append({"a": a["name"], "b": b["name"], "a_title": a["title"], "b_title": b["title"],
                    "a_trials": sa["trials"], "b_trials": sb["trials"],
                    "a_population": a["population"], "b_population": b["population"], "rows": rows})
    return out


def _cmp_cell(v, missing=0) -> str:
    s = "-" if v is None else (f"{v:.4f}" if isinstance(v, float) and abs(v) < 1 else fmt(v))
    return s + (f" ({missing} never)" if missing else "")


def compare_markdown(cmp: list[dict[str, Any]], a_dir: str, b_dir: str) -> str:
    lines = ["# availproof comparison", "", f"A: {a_dir}", f"B: {b_dir}", "",
             "The incident (the last fault of each trial)."]
    for c in cmp:
        pops = c["a_population"] if c["a_population"] == c["b_population"] else \
            f"A {c['a_population']}, B {c['b_population']}"
        lines += ["", f"## {c['a']} ({c['a_trials']} trial(s)) vs {c['b']} ({c['b_trials']} trial(s)), "
                      f"population {pops}", ""]
        rows = []
        for r in c["rows"]:
            ex = {None: "cannot tell", True: "YES", False: "no"}[r["exceeds_intervals"]]
            ci = _ci if r["figure"] == "failed fraction" else _ci_or_small
            rows.append([r["figure"], _cmp_cell(r["a"], r["a_missing"]), ci(r["a_ci95"]),
                         _cmp_cell(r["b"], r["b_missing"]), ci(r["b_ci95"]), _cmp_cell(r["diff"]), ex, r["note"]])
        lines += _md_table(("figure (median)", "A", "A 95% CI", "B", "B 95% CI", "B - A", "beyond the intervals",
                            "note"), rows)
    return "\n".join(lines) + "\n"
