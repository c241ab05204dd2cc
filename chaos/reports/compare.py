"""``availproof report --compare A B``: two runs side by side per experiment, on the incident's figures."""

from __future__ import annotations

from typing import Any

from chaos.base import stats
from chaos.base.errors import UsageError
from chaos.reports.cells import fmt
from chaos.reports.render import md_table
from chaos.reports.rows import FIGURES, ci_cell, ci_cell_or_small


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
            ci = ci_cell if r["figure"] == "failed fraction" else ci_cell_or_small
            rows.append([r["figure"], _cmp_cell(r["a"], r["a_missing"]), ci(r["a_ci95"]),
                         _cmp_cell(r["b"], r["b_missing"]), ci(r["b_ci95"]), _cmp_cell(r["diff"]), ex, r["note"]])
        lines += md_table(("figure (median)", "A", "A 95% CI", "B", "B 95% CI", "B - A", "beyond the intervals",
                            "note"), rows)
    return "\n".join(lines) + "\n"
