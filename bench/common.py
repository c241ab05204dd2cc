"""Shared helpers for the benchmarks."""

from __future__ import annotations

import os
from pathlib import Path



def pss_kib(pids) -> int:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def rss_kib(pids) -> int:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def machine() -> str:
    return f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}"


def markdown_table(head: list[str], rows: list[list[str]]) -> str:
    """A Markdown table: the header, its rule, one line per row (the by-hand tables' one printer)."""
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows])
