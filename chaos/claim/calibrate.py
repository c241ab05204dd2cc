"""The claim rule's operating characteristic (``availproof claim --calibrate``): how often the rule says
``supported`` in seeded synthetic worlds whose true P(miss) is known (0.5, 1, 1.4 and 2 x the risk), and how
often the cost model's 95 % interval of the mean cost contains the true mean (the worlds:
:mod:`chaos.claim.calibrate_worlds`).

The full grid's table is shipped (:data:`SHIPPED`, generated once, its date, seed and sizes inside it) and the
claim document quotes its own row (:func:`own_row`): the nearest cell to its rate and trials.
"""

from __future__ import annotations

import json
import math
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from chaos.claim import calibrate_worlds as cw

SHIPPED = Path(__file__).with_name("operating_characteristic.json")
GRIDS = {
    "full": {"lams": (0.34, 1.0, 2.0, 4.0), "ns": (1, 2, 5, 10, 20, 50, 100), "ms": (0.5, 1.0, 1.4, 2.0),
             "worlds": 200, "coverage_worlds": 200},
    # where the rule can say supported at all (low rates, n near n* = 1.35 lam / risk), at 1x and 2x the risk
    "reduced": {"lams": (0.34, 1.0), "ns": (10, 20, 100), "ms": (1.0, 2.0), "worlds": 60, "coverage_worlds": 40},
}
COVERAGE_SIGMAS = (0.5, 1.0, 1.5)
COVERAGE_NS = (1, 2, 5, 20)
_done: dict[tuple, tuple[bool, bool]] = {}  # (family, lam, n, m, risk, c, seed, world) -> (met, resolved)


def _key(m: float) -> str:
    return f"{m:g}"


def _judge_many(tasks: list[tuple]) -> list[tuple[bool, bool]]:
    return [cw.judge_world(*t) for t in tasks]


def _judge_all(tasks: list[tuple], processes: int) -> None:
    """Judge every world not judged yet in this process (the results kept: a smaller run reuses them)."""
    todo = [t for t in tasks if t not in _done]
    if processes > 1 and len(todo) > 1:
        chunks = [todo[i::processes * 8] for i in range(processes * 8)]
        with ProcessPoolExecutor(processes) as pool:
            for chunk, res in zip(chunks, pool.map(_judge_many, chunks)):
                _done.update(zip(chunk, res))
    else:
        _done.update(zip(todo, _judge_many(todo)))


def cells(grid: str, worlds: int, seed: int, credibility: float, risk: float,
          processes: int = 1) -> list[dict[str, Any]]:
    """Every cell of the grid (family x lam x n x m): the share of its worlds the rule calls supported."""
    g = GRIDS[grid]
    spec = [(f, lam, n, m) for f in cw.FAMILIES for lam in g["lams"] for n in g["ns"] for m in g["ms"]]
    return judge_cells(spec, worlds, seed, credibility, risk, processes)


def judge_cells(spec: list[tuple[str, float, int, float]], worlds: int, seed: int, credibility: float,
                risk: float, processes: int = 1) -> list[dict[str, Any]]:
    """The cells (family, lam, n, m) given: the share of their worlds the rule calls supported (null with the
    reason where m x risk is out of reach)."""
    tasks = [(f, lam, n, m, risk, credibility, seed, i) for f, lam, n, m in spec
             if not cw.world_params(f, lam, m, risk)["null"] for i in range(worlds)]
    _judge_all(tasks, processes)
    out = []
    for f, lam, n, m in spec:
        w = cw.world_params(f, lam, m, risk)
        if w["null"]:
            out.append({"family": f, "lam": lam, "n": n, "m": m, "worlds": 0, "supported": None, "share": None,
                        "unresolved": None, "null": w["null"]})
            continue
        res = [_done[(f, lam, n, m, risk, credibility, seed, i)] for i in range(worlds)]
        sup = sum(met for met, _ in res)
        out.append({"family": f, "lam": lam, "n": n, "m": m, "worlds": worlds, "supported": sup,
                    "share": round(sup / worlds, 6), "unresolved": sum(not r for _, r in res), "null": None,
                    "q": round(w["q"], 8), "cost_median_s": round(w["median"], 6), "cost_sigma": w["sigma"]})
    return out


def coverage(worlds: int, seed: int) -> dict[str, Any]:
    rows = [cw.coverage_cell(s, n, worlds, seed) for s in COVERAGE_SIGMAS for n in COVERAGE_NS]
    return {"level": 0.95, "mu": round(cw.COVERAGE_MU, 6), "draws": cw.COVERAGE_DRAWS, "worlds": worlds,
            "cells": rows}


def worst(rows: list[dict[str, Any]], m: float) -> dict[str, dict[str, Any] | None]:
    """Per family, the cell with the largest supported share at ``m`` x the risk."""
    out = {}
    for f in cw.FAMILIES:
        cand = [r for r in rows if r["family"] == f and r["m"] == m and r["share"] is not None]
        out[f] = None if not cand else max(cand, key=lambda r: (r["share"], -r["lam"], r["n"]))
    return out


def pooled(rows: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Per family and m, the supported share over every cell's worlds."""
    out: dict[str, dict[str, float | None]] = {}
    for f in cw.FAMILIES:
        out[f] = {}
        for m in sorted({r["m"] for r in rows}):
            cand = [r for r in rows if r["family"] == f and r["m"] == m and r["share"] is not None]
            k = sum(r["worlds"] for r in cand)
            out[f][_key(m)] = None if not k else round(sum(r["supported"] for r in cand) / k, 6)
    return out


def table(grid: str, worlds: int | None, seed: int, credibility: float, risk: float,
          processes: int = 1, coverage_worlds: int | None = None) -> dict[str, Any]:
    """The operating characteristic and the coverage, as figures (JSON-able)."""
    g = GRIDS[grid]
    worlds = g["worlds"] if worlds is None else worlds
    if worlds < 1:
        from chaos.base.errors import UsageError

        raise UsageError(f"--worlds: a whole number of worlds per cell, at least 1, got {worlds}")
    cov_worlds = coverage_worlds or (g["coverage_worlds"] if worlds == g["worlds"] else worlds)
    rows = cells(grid, worlds, seed, credibility, risk, processes)
    return {
        "grid": grid, "seed": seed, "risk": risk, "credibility": credibility, "worlds": worlds,
        "period_days": cw.PERIOD_DAYS, "target": cw.TARGET, "budget_s": round(cw.budget_s(), 6),
        "sizes": dict(cw.SIZES), "truth_periods": cw.TRUTH_PERIODS,
        "lams": list(g["lams"]), "ns": list(g["ns"]), "ms": list(g["ms"]), "families": list(cw.FAMILIES),
        "worlds_are": ("one scope, a point rate lam a period (30 days, target 0.999: budget 2592 s), an unrecovered "
                       "event misses the period; cost_driven: q = 0, costs log-normal sigma 1.0, median set so that "
                       "P(miss) = m x risk; rare_unrecovered: costs log-normal median 1 s sigma 0.5, "
                       "1 - exp(-lam q) = m x risk; n trials drawn, Jeffreys' prior, decide.judge"),
        "cells": rows, "pooled": pooled(rows), "worst_at_2x": worst(rows, 2.0), "worst_at_1x": worst(rows, 1.0),
        "coverage": coverage(cov_worlds, seed),
    }


def _pct(x: float | None) -> str:
    return "null" if x is None else f"{x * 100:.1f}"


def text(t: dict[str, Any]) -> str:
    """The plain-text tables: per family and m, rows lam, columns n, % of worlds called supported."""
    s = t["sizes"]
    lines = [f"availproof claim --calibrate {t['grid']}: the rule's operating characteristic (seed {t['seed']}, "
             f"risk {t['risk']:g}, credibility {t['credibility']:g}, {t['worlds']} worlds per cell; nested "
             f"simulation {s['outer']} x {s['inner']} draws doubling to {s['max_outer']} x {s['max_inner']}, "
             f"unresolved at the cap = not supported)",
             f"cell: % of the worlds called supported; a world's true P(miss) = m x risk "
             f"(period {t['period_days']:g} days, target {t['target']:g}, budget {t['budget_s']:g} s)", ""]
    nulls = []
    for f in t["families"]:
        for m in t["ms"]:
            pool = t["pooled"][f][_key(m)]
            lines.append(f"{f}, m = {m:g} (true P(miss) = {m * t['risk']:g}; pooled {_pct(pool)} %)")
            lines.append("  lam \\ n " + "".join(f"{n:>8}" for n in t["ns"]))
            for lam in t["lams"]:
                row = [r for r in t["cells"] if r["family"] == f and r["m"] == m and r["lam"] == lam]
                row.sort(key=lambda r: r["n"])
                lines.append(f"  {lam:>7g} " + "".join(f"{_pct(r['share']):>8}" for r in row))
                nulls += [f"  {f} lam {lam:g} m {m:g}: {r['null']}" for r in row[:1] if r["null"]]
            lines.append("")
    for label, w in (("2x", t["worst_at_2x"]), ("1x", t["worst_at_1x"])):
        for f, r in w.items():
            if r is not None:
                lines.append(f"worst at {label} the risk, {f}: {_pct(r['share'])} % (lam {r['lam']:g}, n {r['n']}, "
                             f"{r['supported']} of {r['worlds']} worlds, {r['unresolved']} unresolved at the cap)")
    if nulls:
        lines += ["", "null cells (m x risk out of reach):"] + nulls
    c = t["coverage"]
    lines += ["", f"cost model: share of log-normal worlds whose 95 % interval of the mean contains the true mean "
                  f"({c['worlds']} worlds per cell, {c['draws']} draws): cost_model.mean_interval / Bayesian bootstrap",
              "  sigma \\ n " + "".join(f"{n:>14}" for n in COVERAGE_NS)]
    for sg in COVERAGE_SIGMAS:
        row = sorted((r for r in c["cells"] if r["sigma"] == sg), key=lambda r: r["n"])
        lines.append(f"  {sg:>9g} " + "".join(f"{_pct(r['cost_model']):>7}/{_pct(r['bootstrap']):>6}" for r in row))
    return "\n".join(lines) + "\n"


def command(grid: str, worlds: int | None, seed: int, credibility: float, risk: float) -> int:
    """``availproof claim --calibrate [reduced|full]``: print the tables; nothing is written."""
    print(text(table(grid, worlds, seed, credibility, risk)), end="")
    return 0


# ---- the shipped table and a claim's own row ---------------------------------------------------------------------

def shipped() -> dict[str, Any]:
    return json.loads(SHIPPED.read_text())


def own_row(rate_events_total: float, trials: int, family_hint: str | None = None,
            t: dict[str, Any] | None = None) -> dict[str, Any]:
    """The shipped table's cell nearest a claim: the nearest rate in log scale, the largest n at or below its
    trials (the smallest n when it has fewer); ``family_hint`` one of the families to quote that one alone."""
    t = shipped() if t is None else t
    lam = min(t["lams"], key=lambda x: (abs(math.log(x) - math.log(max(rate_events_total, 1e-9))), x))
    below = [n for n in t["ns"] if n <= trials]
    n = max(below) if below else min(t["ns"])
    fams = [family_hint] if family_hint in t["families"] else list(t["families"])
    at, worlds = {}, 0
    for f in t["families"]:
        rows = {_key(r["m"]): r for r in t["cells"] if r["family"] == f and r["lam"] == lam and r["n"] == n}
        at[f] = {k: rows[k]["share"] for k in sorted(rows, key=float)}
        worlds = max([worlds] + [r["worlds"] for r in rows.values()])
    x = [at[f].get("2") for f in fams if at[f].get("2") is not None]
    share = max(x) if x else None
    said = (f"at twice the risk this rule says supported in at most {_pct(share)} % of worlds like these "
            f"(rate ~{lam:g} a period, {n} trials; {worlds} seeded worlds per cell, "
            f"risk {t['risk']:g}, credibility {t['credibility']:g}: docs/claim.md)") if share is not None else (
        f"at twice the risk no world like these (rate ~{lam:g} a period, {n} trials) can be built: "
        f"the table has no figure")
    return {"lam": lam, "n": n, "supported_share_at": at, "worlds": worlds, "families": fams,
            "table": {"date": t.get("date"), "seed": t["seed"], "risk": t["risk"], "credibility": t["credibility"]},
            "statement": said}


def generate(worlds: int, seed: int = 0, processes: int = 2, date: str = "2026-12-06",
             path: Path = SHIPPED) -> dict[str, Any]:
    """Write the shipped table: the full grid at the default risk and credibility, timed (by hand, once:
    ``PYTHONPATH=. python -c 'from chaos.claim import calibrate; calibrate.generate(150)'``)."""
    import os
    import time

    from chaos.claim.credible import DEFAULT_CREDIBILITY

    t0, c0 = time.time(), os.times()
    t = table("full", worlds, seed, DEFAULT_CREDIBILITY, 0.05, processes, GRIDS["full"]["coverage_worlds"])
    c1 = os.times()
    cpu = (c1.user + c1.system + c1.children_user + c1.children_system
           - c0.user - c0.system - c0.children_user - c0.children_system)
    t = {"date": date, **t, "timing": {"wall_s": round(time.time() - t0, 1), "cpu_s": round(cpu, 1),
                                       "processes": processes}}
    path.write_text(json.dumps(t, indent=1) + "\n")
    return t


def claim_row(models: list, rates) -> tuple[dict[str, Any] | None, str | None]:
    """The claim document's ``operating_characteristic``: :func:`own_row` at the rated scopes' summed mean events
    per period and the fewest trials of a modelled scope; (None, why) when there is no model or no table."""
    if not models:
        return None, "no rated scope has a covered, measured cost: no row of the table applies"
    if not SHIPPED.exists():
        return None, f"the shipped table {SHIPPED.name} is missing from this install"
    rate = sum(r.mean_events(rates.period_days) for r in rates.rated().values())
    return own_row(rate, min(m.n for m in models), None), None
