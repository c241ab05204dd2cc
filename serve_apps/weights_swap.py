"""The ``restart-fails`` fault on one weights file (issue 48): swapped for a truncated copy, and restored exactly.

Used by the local backend in-process and, on KubeRay, in a pod through exec (``python -m serve_apps.weights_swap
break|restore|state PATH --run RUN [--fault ID]`` (``restore PATH --any-run``: any run's mark, for ``availproof recover``), one JSON object on stdout), so both read and restore alike.

- :func:`break_weights`: the original copied aside (``PATH.availproof-aside-<fault>``, its size and sha256 checked
  against the original's), a mark written (``PATH.availproof-restart-fails.json``: the run, the fault, the original's
  and the truncated copy's size and sha256, the aside path), then a truncated copy (the original's first half)
  renamed over ``PATH`` (atomic: the path is never absent, so nothing re-provisions it). Refused where a mark is
  already (a fault not restored: its aside would be lost).
- :func:`restore`: only while the mark names this run, the file at ``PATH`` still reads as the truncated copy the
  fault put there and the aside still hashes to the original: the aside renamed back over ``PATH``, the mark
  removed. Where the file reads as the original and the aside still hashes to it (a crash between the mark and the
  swap), there is nothing to undo: the mark and the aside removed (``cleared``), so no later run is locked out.
  Anything else (someone replaced the file, or the aside changed) is left as it is, with the reason: the
  heal never undoes what someone else set.
- :func:`state`: what ``PATH`` reads as now (``truncated``: the fault's copy; ``original``; ``other``; ``absent``).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

MARK_SUFFIX = ".availproof-restart-fails.json"
NODE_DEFAULT = "stream-default"  # the path argument naming the stream target's default file on the node


def digest(path: str | Path) -> dict | None:
    """``{"bytes", "sha256"}`` of a file, None when it cannot be read."""
    h, n = hashlib.sha256(), 0
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
                n += len(block)
    except OSError:
        return None
    return {"bytes": n, "sha256": h.hexdigest()}


def mark_path(path: str | Path) -> Path:
    return Path(f"{path}{MARK_SUFFIX}")


def read_mark(path: str | Path) -> dict | None:
    try:
        return json.loads(mark_path(path).read_text())
    except (OSError, ValueError):
        return None


def _write_atomically(target: Path, data: bytes) -> None:
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, target)


def break_weights(path: str, run_id: str, fault_id: str) -> dict:
    """Swap a truncated copy in for the weights at ``path``; the mark (what :func:`restore` needs). Raises
    RuntimeError where the file is absent or a mark is already there."""
    p = Path(path)
    original = digest(p)
    if original is None:
        raise RuntimeError(f"weights {path}: absent or unreadable before the fault: nothing to make unreadable")
    if mark_path(p).exists():
        raise RuntimeError(f"weights {path}: a restart-fails mark is already there ({mark_path(p)}): "
                           "a fault not restored; restore it first")
    aside = Path(f"{path}.availproof-aside-{fault_id}")
    shutil.copy2(p, aside)
    if digest(aside) != original:
        aside.unlink(missing_ok=True)
        raise RuntimeError(f"weights {path}: changed while copied aside: not touched")
    keep = original["bytes"] // 2
    with open(p, "rb") as f:
        truncated_bytes = f.read(keep)
    truncated = {"bytes": len(truncated_bytes), "sha256": hashlib.sha256(truncated_bytes).hexdigest()}
    mark = {"run_id": run_id, "fault_id": fault_id, "path": str(p), "aside": str(aside), "original": original,
            "truncated": truncated}
    try:
        _write_atomically(mark_path(p), json.dumps(mark, indent=1).encode())
        _write_atomically(p, truncated_bytes)
    except BaseException:  # a half-done attempt (the mark, not the swap): cleaned, so no later run is locked out
        if state(p, mark) == "original":
            mark_path(p).unlink(missing_ok=True)
            aside.unlink(missing_ok=True)
        raise
    return mark


def state(path: str, mark: dict | None = None) -> str:
    """What the file at ``path`` reads as, against ``mark`` (default: the one next to it)."""
    mark = mark or read_mark(path) or {}
    now = digest(path)
    if now is None:
        return "absent"
    if now == mark.get("truncated"):
        return "truncated"
    if now == mark.get("original"):
        return "original"
    return "other"


def restore(path: str, run_id: str | None) -> dict:
    """Put the original back, only where everything still reads as this run's fault left it (``run_id`` None: any
    run's, for ``availproof recover`` after a killed run); what was done."""
    mark = read_mark(path)
    if mark is None:
        return {"restored": False, "state": state(path, {}), "why": "no restart-fails mark: nothing of this run's"}
    if run_id is not None and mark.get("run_id") != run_id:
        return {"restored": False, "state": state(path, mark),
                "why": f"the mark names run {mark.get('run_id')!r}, not this one: left as it is"}
    now = state(path, mark)
    if now == "original" and digest(mark["aside"]) == mark["original"]:  # never swapped (a crash between the mark
        # and the swap), or someone put the original back: nothing to undo; the mark and the aside would only lock
        # out every later run
        Path(mark["aside"]).unlink(missing_ok=True)
        mark_path(path).unlink(missing_ok=True)
        return {"restored": False, "state": now, "cleared": True,
                "why": "the weights read as the original (never swapped, or put back by someone else): nothing to "
                       "undo; the mark and the aside removed"}
    if now != "truncated":
        return {"restored": False, "state": now, "why": f"the weights read as {now}, not the fault's truncated copy: "
                "someone else changed them; left as they are (the aside and the mark too)"}
    if digest(mark["aside"]) != mark["original"]:
        return {"restored": False, "state": now, "why": f"the aside {mark['aside']} no longer hashes to the "
                "original: not restored"}
    os.replace(mark["aside"], path)
    mark_path(path).unlink(missing_ok=True)
    return {"restored": True, "state": state(path, mark), "why": None,
            "unreadable_until_restore": True}  # it read as the truncated copy up to the rename


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=("break", "restore", "state"))
    ap.add_argument("path")
    ap.add_argument("--run", default="")
    ap.add_argument("--fault", default="")
    ap.add_argument("--any-run", action="store_true", help="restore: any run's mark (availproof recover)")
    a = ap.parse_args(argv)
    if a.path == NODE_DEFAULT:  # the stream target's default file, where this runs (the node, the pod)
        from serve_apps import stream_weights

        a.path = stream_weights.default_path()
    try:
        if a.action == "break":
            out = break_weights(a.path, a.run, a.fault)
        elif a.action == "restore":
            out = restore(a.path, None if a.any_run else a.run)
        else:
            out = {"state": state(a.path), "mark": read_mark(a.path)}
    except RuntimeError as e:
        out = {"error": str(e)}
    out["path"] = a.path
    json.dump(out, sys.stdout)
    return 1 if "error" in out else 0


if __name__ == "__main__":
    raise SystemExit(main())
