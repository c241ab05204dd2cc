"""The orphan check's looks inside a pod (:mod:`chaos.system.orphan_watch`): a replica's engine children found before the
replica is killed (:func:`children_script`, ``pgrep -P PID -f EngineCore``), and which of some processes are still
alive, with their resident memory (:func:`left_script`: /proc/PID/status, ``State`` and ``VmRSS``), one exec per
pod; a pod gone takes its processes with it (all gone)."""

from __future__ import annotations

from chaos.backends.engine_faults import ENGINE

LEFT = "left"  # a line of left_script's output: "left PID STATE RSS_KB" ("-" for an unreadable RSS)


def children_script(pid: int) -> str:
    """The replica's engine children's pids on one line (empty: none); exits 0 either way. ``[E]ngineCore`` keeps
    the pattern from matching the shell running it."""
    return f": availproof-orphans engines; echo $(pgrep -P {int(pid)} -f '[{ENGINE[0]}]{ENGINE[1:]}')"


def left_script(pids: list[int]) -> str:
    """``left PID STATE RSS_KB`` for each of ``pids`` whose /proc/PID/status can be read ("-" when it has no VmRSS:
    a zombie); nothing for one that is gone. Exits 0."""
    ps = " ".join(str(int(p)) for p in pids)
    return (f": availproof-orphans look; for p in {ps}; do "
            "s=$(grep -E '^(State|VmRSS):' /proc/$p/status 2>/dev/null | tr -s ' \\t\\n' ' '); "
            f"[ -n \"$s\" ] && echo \"{LEFT} $p $s\"; done; true")


def parse_left(out: str) -> dict[int, float | None]:
    """:func:`left_script`'s output: pid -> resident MB (None: unreadable) of those alive; a zombie (``State: Z``)
    or a dead one (``X``) is gone."""
    found: dict[int, float | None] = {}
    for line in out.splitlines():
        words = line.split()
        if len(words) < 4 or words[0] != LEFT or not words[1].isdigit() or words[2] != "State:":
            continue
        if words[3] in ("Z", "X"):
            continue
        rss = None
        if "VmRSS:" in words:
            at = words.index("VmRSS:") + 1
            rss = round(int(words[at]) / 1024, 1) if at < len(words) and words[at].isdigit() else None
        found[int(words[1])] = rss
    return found
