"""engine-error's tombstones in a pod: the script that reads each engine's (the first line its hook wrote when it
raised the error) and its parser. Apart from the engines part so that the proofs read them without importing it."""

from __future__ import annotations

from serve_apps.engine_faults import tombstone_path

__all__ = ["tombstones_script", "parse_tombstones"]


def tombstones_script(pids: list[int]) -> str:
    """``tomb PID TEXT`` per engine: its tombstone's first line (the time its hook raised the error), empty when
    it has none."""
    return (": availproof-engine-error proof; for p in " + " ".join(str(int(p)) for p in pids) + "; do "
            f"echo \"tomb $p $(head -c 40 {tombstone_path(0).removesuffix('0')}$p 2>/dev/null | head -n 1)\"; done")


def parse_tombstones(out: str) -> dict[int, str | None]:
    found: dict[int, str | None] = {}
    for line in out.splitlines():
        words = line.split(maxsplit=2)
        if len(words) >= 2 and words[0] == "tomb" and words[1].isdigit():
            found[int(words[1])] = words[2] if len(words) == 3 else None
    return found
