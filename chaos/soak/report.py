"""The soak's own report beside the run's: ``soak.md`` (its faults as run, the observed lost service-seconds, the
check per scope with its two parts' p-values and verdicts (:mod:`chaos.soak.check`), the whole soak's prediction
beside them for display) and ``soak-timeline.png`` (every fault's span by scope, the cumulative lost service-seconds,
the planes as :mod:`chaos.reports.timeline` draws them)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import numpy as np

from chaos.recording import record_columns, records as rec, request_columns as rc
from chaos.reports import timeline as tl

NS = 1_000_000_000
SCOPE_COLOURS = ("#c0392b", "#2471a3", "#8e44ad", "#d35400", "#16a085", "#7f8c8d")


def _n(v: Any, fmt: str = "{:.2f}") -> str:
    return "n/a" if v is None else fmt.format(v)


def _p(v: Any) -> str:
    return "n/a" if v is None else f"{v:.3g}"


def check_lines(check: dict[str, Any] | None) -> list[str]:
    """Each scope's two parts (:mod:`chaos.soak.check`): the unrecovered count and the recovered events' summed
    cost, their p-values and verdicts, the seconds excluded."""
    c = check or {}
    if not c.get("scopes"):
        return [f"soak check: {(c.get('unmeasurable') or {}).get('verdict') or 'nothing to check'}"]
    out = []
    for s in c["scopes"]:
        unm = s.get("unmeasurable") or {}
        head = (f"soak check {s['scope']}: {s['events']} events, {s['recovered']} recovered, {s['unrecovered']} not"
                + (f", {len(s['unjudged'])} unjudged (left out: "
                   + "; ".join(f"{u['fault_id']}: {u['why']}" for u in s["unjudged"]) + ")" if s["unjudged"] else ""))
        out.append(head)
        n = s.get("count")
        out.append(f"  (a) unrecovered {n['observed']} of {n['of']}, predicted mean {n['predicted_mean']:.2f}: "
                   f"p(>= observed) {_p(n['p_upper'])}, p(<= observed) {_p(n['p_lower'])}: {n['verdict'].upper()}"
                   if n else f"  (a) unrecovered count not compared: {unm.get('count')}")
        k = s.get("cost")
        iv = (k or {}).get("interval90_s") or [None, None]
        out.append(f"  (b) {k['recovered_events']} recovered events cost {_n(k['observed_s'])} s alone, predicted mean "
                   f"{_n(k['predicted_mean_s'])} s, 90 % {_n(iv[0])} .. {_n(iv[1])} s: two-sided p {_p(k['p_value'])}: "
                   f"{k['verdict'].upper()}" + (f" ({k['note']})" if k.get("note") else "")
                   if k else f"  (b) recovered cost not compared: {unm.get('cost')}")
        ex = s.get("excluded") or {}
        out.append(f"  excluded: overlapping {_n(ex.get('overlapping_s'))} s, quiet before its injections "
                   f"{_n(ex.get('quiet_s'))} s")
    ex = c.get("excluded") or {}
    verdict = c.get("verdict")
    out.append(f"soak check: {verdict.upper() if verdict else 'not compared'}"
               + (f" ({', '.join(c['surprising'])})" if c.get("surprising") else "")
               + f"; excluded from the comparison: overlapping {_n(ex.get('overlapping_s'))} s, quiet "
               f"{_n(ex.get('quiet_s'))} s ({ex.get('note') or 'not modelled'})")
    return out


def comparison_lines(soak: dict[str, Any]) -> list[str]:
    """Observed against predicted, a few lines (printed by the command and the demo): the check per scope (its
    verdict), the whole soak's predicted distribution for display."""
    obs = (soak.get("observed_lost_service_s") or {}).get("total")
    p = soak.get("prediction") or {}
    frm = p.get("from") or {}
    iv = p.get("interval_90_s")
    out = [f"soak: {len(soak.get('faults_injected') or [])} faults injected, {len(soak.get('faults_skipped') or [])} "
           f"skipped, {len(soak.get('overlaps') or [])} overlaps; observed lost service {_n(obs)} s"]
    if p.get("mean_s") is None:
        out.append(f"soak: no prediction: {frm.get('unmeasurable') or 'none'}")
    else:
        out.append(f"soak: whole-soak prediction (for display, not a verdict: recovered costs mixed with rare "
                   f"non-recovery): mean {_n(p['mean_s'])} s, 90 % {_n(iv[0])} .. {_n(iv[1])} s, observed at "
                   f"percentile {_n(p.get('observed_percentile'), '{:.1f}')}"
                   + (f" ({frm['unmeasurable']})" if frm.get("unmeasurable") else ""))
    if "check" in soak:
        out += check_lines(soak.get("check"))
    if frm.get("not_modelled"):
        out.append("soak: overlaps the prediction does not model (it adds the events' costs as if apart): "
                   + "; ".join(f"{'+'.join(o['scopes'])} #{o['faults'][0]}/#{o['faults'][1]} "
                               f"{o['from_s']:.0f}-{o['to_s']:.0f} s" for o in frm["not_modelled"]))
    return out


def markdown(summary: dict[str, Any]) -> str:
    soak, ctx = summary.get("soak") or {}, summary.get("soak_context") or {}
    obs = soak.get("observed_lost_service_s") or {}
    p = soak.get("prediction") or {}
    v = summary.get("verdict") or {}
    rates = ", ".join(f"{s} {r * 3600:.2f}/h" for s, r in (ctx.get("rates_per_s") or {}).items())
    lines = [f"# {summary.get('experiment') or 'soak'}", "",
             f"Verdict: **{v.get('word', 'n/a')}**" + (f" ({'; '.join(v['reasons'])})" if v.get("reasons") else ""),
             "", f"Seed {ctx.get('seed')}, speed-up x{ctx.get('speedup')}, duration {_n(ctx.get('duration_s'), '{:.0f}')} s "
             f"(load on to {_n(ctx.get('end_s'), '{:.0f}')} s); rates x speed-up: {rates}; RATES {ctx.get('faults')}; "
             f"experiments: {', '.join(ctx.get('experiments') or [])}.", ""]
    ml = ctx.get("machine_load") or {}
    if ml:
        lines += ["Machine load (1-minute load average / CPUs): "
                  + ", ".join(f"{k} {d.get('1m')} / {d.get('cpus')}" for k, d in ml.items() if isinstance(d, dict) and d),
                  ""]
    lines += ["## Observed against predicted", "",
              *[f"  - {x.strip()}" if x.startswith("  ") else f"- {x}" for x in comparison_lines(soak)], "",
              "| | lost service-seconds |", "|---|---|", f"| observed, whole soak | {_n(obs.get('total'))} |"]
    for s, val in (obs.get("per_scope") or {}).items():
        lines.append(f"| observed, {s} alone | {_n(val)} |")
    lines += [f"| observed, overlapping stretches | {_n((obs.get('overlapping') or {}).get('value_s'))} |",
              f"| observed, quiet | {_n(obs.get('quiet'))} |",
              f"| predicted mean, whole soak (display) | {_n(p.get('mean_s'))} |",
              f"| predicted 90 % interval, whole soak (display) | {' .. '.join(_n(x) for x in p['interval_90_s']) if p.get('interval_90_s') else 'n/a'} |",
              f"| observed percentile (information only) | {_n(p.get('observed_percentile'), '{:.1f}')} |", ""]
    c = soak.get("check") or {}
    if c.get("scopes"):
        lines += ["## The check, per scope", "",
                  "Each scope in two parts, posterior predictive p-values against the claim: (a) how many of its "
                  "judged events did not recover, against the claim's unrecovered share (Beta-Binomial; p of at least "
                  "as many); (b) what its recovered events cost, summed over the stretches where only its windows "
                  "were active, against the claim's prediction for that many recovered events (two-sided mid-p). "
                  f"A part is surprising below p = {c.get('alpha')}. Overlapping and quiet seconds are not compared.",
                  "", "| scope | events | recovered | not | unjudged | (a) p(>=) | (a) | (b) observed s | "
                  "(b) predicted mean s | (b) 90 % s | (b) p | (b) | overlapping s | quiet s |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for s in c["scopes"]:
            n, k, ex = s.get("count") or {}, s.get("cost") or {}, s.get("excluded") or {}
            iv = k.get("interval90_s")
            lines.append(f"| {s['scope']} | {s['events']} | {s['recovered']} | {s['unrecovered']} | "
                         f"{len(s['unjudged'])} | {_p(n.get('p_upper'))} | {n.get('verdict') or 'n/a'} | "
                         f"{_n(k.get('observed_s'))} | {_n(k.get('predicted_mean_s'))} | "
                         f"{' .. '.join(_n(x) for x in iv) if iv else 'n/a'} | {_p(k.get('p_value'))} | "
                         f"{k.get('verdict') or 'n/a'} | {_n(ex.get('overlapping_s'))} | {_n(ex.get('quiet_s'))} |")
        lines += ["", "The lines under *Observed against predicted* say why a part was not compared.", ""]
    frm = p.get("from") or {}
    if frm.get("claim"):
        lines += [f"Prediction from the claim of `{frm['claim']}` ({frm.get('population')}), counts "
                  + ", ".join(f"{s} {k}" for s, k in (frm.get("scopes") or {}).items())
                  + (f"; left out: {frm['left_out']}" if frm.get("left_out") else ""), ""]
    lines += ["## Faults as run", "", "| # | scope | planned s | injected at s | outcome | fault | target |",
              "|---|---|---|---|---|---|---|"]
    for r in ctx.get("as_run") or []:
        lines.append(f"| {r.get('index')} | {r.get('scope')} | {_n(r.get('planned_s'), '{:.1f}')} | "
                     f"{_n(r.get('at_s'), '{:.1f}')} | {r.get('event')}{': ' + r['why'] if r.get('why') else ''} | "
                     f"{r.get('fault_id') or ''} | {r.get('target') or ''} |")
    skipped = [x for x in soak.get("faults_skipped") or []]
    if skipped:
        lines += ["", "Skipped:", ""] + [f"- #{x['index']} {x['scope']} at {x['instant_s']:.1f} s: {x.get('why')}"
                                         for x in skipped]
    if soak.get("overlaps"):
        lines += ["", "Overlaps:", ""] + [f"- #{o['faults'][0]} {o['scopes'][0]} and #{o['faults'][1]} {o['scopes'][1]}"
                                          f" from {o['from_s']:.1f} to {o['to_s']:.1f} s" for o in soak["overlaps"]]
    return "\n".join(lines) + "\n"


def cumulative(records: rec.RunRecords, t0: int, base: float, width_s: float = 1.0) -> tuple[list[float], list[float]]:
    """Cumulative lost service-seconds from ``t0``: per bucket of ``width_s`` by send time, its failed share less
    ``base`` times its width (an empty bucket adds nothing); a picture's curve, the figure is the summary's. On the
    request columns (:mod:`chaos.recording.request_columns`)."""
    c = rc.of(records)
    take = c.measure & (c.sent_ns >= t0)
    k = ((c.sent_ns[take] - t0) / NS // width_s).astype(np.int64)
    n = np.bincount(k).tolist() if len(k) else []
    failed = np.bincount(k[~c.ok[take]], minlength=len(n)).tolist() if len(k) else []
    xs, ys, acc = [0.0], [0.0], 0.0
    for i, (m, bad) in enumerate(zip(n, failed)):
        acc += (bad / m - base) * width_s if m else 0.0
        xs.append((i + 1) * width_s)
        ys.append(acc)
    return xs, ys


def png(records: rec.RunRecords, summary: dict[str, Any]) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    soak = summary.get("soak") or {}
    obs = soak.get("observed_lost_service_s") or {}
    clock = [ln["t_ns"] for ln in records.soak if ln.get("event") == "clock"]
    injects = [m.t_ns for m in records.marks if m.event == rec.INJECT_START]
    t0 = clock[0] if clock else (min(injects) if injects else records.header.get("started_ns", 0))

    def x(ns: int) -> float:
        return (ns - t0) / NS

    planes = {lane["kind"]: lane for lane in tl.plane_lanes(records.samples)} if records.samples else {}
    fig = Figure(figsize=(11, 6.4), dpi=100)
    n = 5 if planes else 2
    axes = fig.subplots(n, 1, sharex=True, gridspec_kw={"height_ratios": [1.4, 1.6, 0.45, 1.0, 1.0][:n]})
    fx, lx = axes[0], axes[1]
    by: dict[str, dict[str, Any]] = {}
    for m in sorted(records.marks, key=lambda m: m.t_ns):
        d = by.setdefault(m.fault_id, {"scope": m.scope, "target": m.target})
        d.setdefault(m.event, m.t_ns)
    scopes = sorted({d["scope"] for d in by.values()} | {p["scope"] for p in soak.get("faults_skipped") or []})
    colour = {s: SCOPE_COLOURS[i % len(SCOPE_COLOURS)] for i, s in enumerate(scopes)}
    sent = rc.of(records).sent_ns
    end = max(int(sent.max()) if len(sent) else t0, t0)
    # each fault's span as the soak's figures hold it (its heal, or its occupancy bound, plus its settle): the
    # closing rollback's heal marks at the soak's end are not a replica kill's heal
    first = min(injects) if injects else t0
    held = {w["fault_id"]: (x(first) + w["from_s"], x(first) + w["to_s"]) for w in obs.get("windows") or []}
    for fid, d in by.items():
        if rec.INJECT_START not in d:
            continue
        a, b = held.get(fid) or (x(d[rec.INJECT_START]), x(d.get(rec.HEAL_END) or d.get(rec.HEAL_START) or end))
        y = scopes.index(d["scope"])
        fx.broken_barh([(a, max(b - a, 0.5))], (y - 0.35, 0.7), facecolors=colour[d["scope"]], alpha=0.75)
        fx.text(a, y + 0.4, d["target"][:14], fontsize=6, va="bottom")
        for ax in axes:
            ax.axvline(a, color=colour[d["scope"]], lw=0.8, ls="-", alpha=0.6, zorder=1)
    for p in soak.get("faults_skipped") or []:
        fx.scatter([p["instant_s"]], [scopes.index(p["scope"])], marker="x", c="#555555", s=25, zorder=3)
    fx.set_yticks(range(len(scopes)))
    fx.set_yticklabels([f"{s}" for s in scopes], fontsize=8)
    fx.set_ylim(-0.6, max(len(scopes), 1) - 0.4)
    fx.set_ylabel("faults\n(x: skipped)", fontsize=8)
    xs, ys = cumulative(records, t0, obs.get("base_fraction") or 0.0)
    lx.plot(xs, ys, color="#c0392b", lw=1.4, label="cumulative lost service-s (1 s buckets)")
    for o in soak.get("overlaps") or []:
        for ax in (fx, lx):
            ax.axvspan(o["from_s"], o["to_s"], color="#f1c40f", alpha=0.25, zorder=0)
    p = soak.get("prediction") or {}
    top = max(ys + [1.0]) * 1.3
    if p.get("interval_90_s"):  # on the observation's scale; what lies above it is said in the legend
        lo, hi = p["interval_90_s"]
        top = max(top, min(hi, lo * 1.5))
        lx.axhspan(lo, min(hi, top * 2), color="#2471a3", alpha=0.12,
                   label=f"predicted 90 % interval {lo:.1f} .. {hi:.1f} s")
        if p["mean_s"] <= top:
            lx.axhline(p["mean_s"], color="#2471a3", ls="--", lw=1.0, label=f"predicted mean {p['mean_s']:.1f} s")
        else:
            lx.plot([], [], color="#2471a3", ls="--", label=f"predicted mean {p['mean_s']:.1f} s (above this scale)")
    lx.set_ylim(0, top)
    lx.set_ylabel("lost\nservice-s", fontsize=8)
    lx.legend(fontsize=7, loc="upper left", frameon=False)
    if planes:
        zones = sorted({z for k in ("replicas", "nodes") for z in planes[k]["zones"]})
        zc = {z: tl.ZONE_COLOURS[i % len(tl.ZONE_COLOURS)] for i, z in enumerate(zones)}
        tl.draw_planes(planes, list(axes[2:]), x, zc, [], {})
    axes[-1].set_xlabel("seconds on the soak's clock")
    total = obs.get("total")
    fig.suptitle(f"{summary.get('experiment') or 'soak'}: observed lost service "
                 f"{'n/a' if total is None else f'{total:.1f}'} s (overlaps shaded yellow)", fontsize=9)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    return buf.getvalue()


def write(run_dir: Path, summary: dict[str, Any] | None = None) -> dict[str, Path]:
    """soak.md and soak-timeline.png in ``run_dir`` (its summary, read by :func:`chaos.core.evidence.load_summary`,
    unless given)."""
    from chaos.core import evidence

    run_dir = Path(run_dir)
    summary = summary or evidence.load_summary(run_dir)
    records = record_columns.read(run_dir / "records.ndjson")  # read once within a command (shared)
    md = run_dir / "soak.md"
    md.write_text(markdown(summary))
    pic = run_dir / "soak-timeline.png"
    pic.write_bytes(png(records, summary))
    return {"md": md, "png": pic}
