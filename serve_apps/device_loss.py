"""``device-loss`` from inside the engine: a node whose accelerator stays bad, without a GPU (issue 46).

What production meets with a failing GPU (NVIDIA XID 79 "GPU has fallen off the bus", XID 48 a double-bit ECC error,
XID 94/95 a contained or uncontained ECC error): the engine on it errors (CUDA's "uncorrectable ECC error
encountered") or hangs, and the device **stays** bad: nothing evicts the pod, Ray still advertises the node's
resources, so Serve re-places the replica on the same node, where every new engine fails again at its start. This
module is that, on both apps, keyed by the node, never by editing the stack's files:

- the **marker** (:func:`marker_path`): a small JSON file the rig writes on the node (the run, the fault, a token of
  its own, the ``mode``: ``error`` or ``hang``, the ``xid``), in :func:`node_dir`: ``/tmp/availproof-device-loss-<key>``
  where ``<key>`` is the Ray node's name in :data:`NODE_ENV` (the local backend starts each raylet with it, and every
  process of the node inherits it: the local nodes are raylets on one machine sharing one ``/tmp``), or
  ``/tmp/availproof-device-loss`` where it is unset (a KubeRay pod: its ``/tmp`` is the node's own). The marker stays
  until the rig removes it (:func:`clear`: only while it still holds the rig's token);
- **a running engine** looks at it from its step, at most every :data:`LOOK_S` (:class:`StepWatch`; the stream target's
  engine child every 20 of its 5 ms steps): ``error``, its step raises :class:`DeviceLost` (the stream target's child
  writes :data:`ERROR_BYTE` to its replica and exits :data:`ERROR_EXIT`), the stack's own error path runs (vLLM:
  EngineDeadError, as ``engine-error``); ``hang``, the step blocks while the marker says hang, then fails (the device
  came back, the engine's context did not). An idle vLLM engine takes no step: its next step is its next request's;
- **a new engine** looks at it as it starts (:func:`at_start`; vLLM: the rig's general plugin, which vLLM loads first
  in the replica's process, before its engine; the stream target: its engine child before its first step):
  ``error``, the start fails (the replica's constructor raises, Serve retries it, on the same node while the node has
  room); ``hang``, the start waits while the marker says hang (vLLM's frontend waits for its engine, the stream
  target's replica gives up after 30 s) and goes on once it is gone;
- **recorded** by the engine as it fails or hangs: ``failed-<pid>-<at>.json`` or ``hung-<pid>-<at>.json`` in the node's
  directory (``at``: ``init`` or ``step``; the time, the mode, the XID), the engine's own word: the fault's proof and
  the rig's remedy read them (:func:`look`).

On KubeRay the rig runs this module in the pod (``python -m serve_apps.device_loss set|look|clear``, one JSON line
back), so both backends write, read and clear the marker with the same code.
"""

from __future__ import annotations

import argparse
import glob
import json
import logging
import os
import sys
import time
from typing import Any, Callable

DIR = "/tmp"  # not $TMPDIR: the rig (or an exec in the pod) must find it without the engine's environment
PREFIX = "availproof-device-loss"
NODE_ENV = "AVAILPROOF_NODE"  # the Ray node's name, set by the local backend on every raylet (inherited)
MODES = ("error", "hang")
# the NVIDIA XIDs the fault models (NVIDIA's "XID Errors" documentation) and what CUDA then says to the process
XIDS = {79: "GPU has fallen off the bus", 48: "double-bit ECC error",
        94: "contained ECC error", 95: "uncontained ECC error"}
CUDA = {79: "CUDA error: unspecified launch failure (the GPU is lost)",
        48: "CUDA error: uncorrectable ECC error encountered",
        94: "CUDA error: uncorrectable ECC error encountered",
        95: "CUDA error: uncorrectable ECC error encountered"}
MESSAGE = "device error (injected): the GPU this engine runs on is lost"  # what the stream target's replica reports
ERROR_BYTE = b"D"  # the stream target's engine child, to its replica: failed on its lost device
ERROR_EXIT = 71  # its exit status then
LOOK_S = 0.1  # a running engine looks at its node's marker at most this often
HANG_POLL_S = 0.1  # a hanging engine looks this often whether the marker still says hang

logger = logging.getLogger(__name__)


class DeviceLost(RuntimeError):
    """The injected device error (what CUDA raises on a lost or ECC-failed GPU)."""


def node_key(environ=None) -> str:
    """This process's node key (:data:`NODE_ENV`), "" when unset (a KubeRay pod: its own ``/tmp``)."""
    return ((os.environ if environ is None else environ).get(NODE_ENV) or "").strip()


def node_dir(key: str | None = None) -> str:
    """The directory of the node ``key`` (None: this process's, :func:`node_key`): its marker and its engines'
    records."""
    key = node_key() if key is None else key
    return f"{DIR}/{PREFIX}-{key}" if key else f"{DIR}/{PREFIX}"


def marker_path(key: str | None = None) -> str:
    return f"{node_dir(key)}/marker.json"


def message(xid: Any) -> str:
    """What the engine raises: the XID and CUDA's words for it."""
    x = xid if xid in XIDS else 79
    return f"device error (injected, NVIDIA XID {x}: {XIDS[x]}): {CUDA[x]}"


def write_atomically(path: str, text: str) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def read_marker(key: str | None = None) -> dict | None:
    """The node's marker; None when there is none; ``{"mode": "error", "unreadable": True}`` when it cannot be read
    (a bad device the engine cannot tell the kind of still fails it)."""
    try:
        with open(marker_path(key)) as f:
            value = json.loads(f.read() or "{}")
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return {"mode": "error", "unreadable": True}
    return value if isinstance(value, dict) else {"mode": "error", "unreadable": True}


def mode_of(marker: dict | None) -> str | None:
    """A marker's mode (``error`` for one that names none it knows); None without a marker."""
    if marker is None:
        return None
    return marker.get("mode") if marker.get("mode") in MODES else "error"


# ---------------------------------------------------------------- the rig's side
def set_marker(key: str, run: str, fault: str, token: str, mode: str, xid: int) -> dict:
    """Write the node's marker (refused where one is already: another fault's, or one left behind), the engines'
    records of an earlier fault removed first; the mark."""
    if mode not in MODES:
        raise RuntimeError(f"device-loss: mode must be one of {', '.join(MODES)}, got {mode!r}")
    os.makedirs(node_dir(key), exist_ok=True)
    left = read_marker(key)
    if left is not None:
        raise RuntimeError(f"device-loss: a marker is already on this node ({marker_path(key)}, run "
                           f"{left.get('run')!r}): remove it first (availproof recover)")
    for stale in glob.glob(f"{node_dir(key)}/failed-*.json") + glob.glob(f"{node_dir(key)}/hung-*.json"):
        try:  # an earlier fault's engines' records prove nothing of this one
            os.unlink(stale)
        except OSError:
            pass
    mark = {"run": run, "fault": fault, "token": token, "mode": mode, "xid": int(xid), "t": round(time.time(), 3)}
    write_atomically(marker_path(key), json.dumps(mark) + "\n")
    return {**mark, "path": marker_path(key), "node_key": key}


def clear(key: str, token: str | None) -> dict:
    """Remove the node's marker only while it holds ``token`` (None: any marker: ``availproof recover``): it is
    renamed aside first (atomic), read there, and removed if it is the rig's, else put back. What was done:
    ``{"removed", "state": "ours" | "gone" | "another", "why"}``."""
    path = marker_path(key)
    aside = f"{path}.clearing-{os.getpid()}"
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return {"removed": False, "state": "gone", "why": f"no marker at {path}: someone else removed it"}
    try:
        with open(aside) as f:
            found = json.loads(f.read() or "{}")
    except (OSError, ValueError):
        found = {}
    if token is None or (isinstance(found, dict) and found.get("token") == token):
        os.unlink(aside)
        return {"removed": True, "state": "ours", "why": None}
    try:
        os.link(aside, path)  # put back, unless someone wrote one meanwhile (then theirs stays)
    except FileExistsError:
        pass
    os.unlink(aside)
    run = found.get("run") if isinstance(found, dict) else None
    return {"removed": False, "state": "another", "why": f"the marker holds another token (run {run!r}): left as it is"}


def look(key: str | None = None) -> dict:
    """The node's marker and every record its engines left: ``{"marker": ..., "failures": [{"kind": "failed" |
    "hung", "pid", "at", "mode", "xid", "t"}, ...]}`` (oldest first)."""
    records = []
    for path in glob.glob(f"{node_dir(key)}/*-*-*.json"):
        kind = os.path.basename(path).split("-", 1)[0]
        if kind not in ("failed", "hung"):
            continue
        try:
            with open(path) as f:
                r = json.loads(f.read() or "{}")
        except (OSError, ValueError):
            continue
        if isinstance(r, dict):
            records.append({"kind": kind, **{k: r.get(k) for k in ("pid", "at", "mode", "xid", "t")}})
    # oldest first; an engine's hang before its failure (one pid, one instant to the clock's resolution)
    records.sort(key=lambda r: (r.get("t") or 0, r.get("pid") or 0, r["kind"] == "failed"))
    return {"marker": read_marker(key), "failures": records}


# ---------------------------------------------------------------- the engine's side
def record(kind: str, at: str, marker: dict, key: str | None = None, pid: int | None = None) -> None:
    """The engine's own word that it ``kind`` (failed, hung) ``at`` (init, step) on the lost device; never raises."""
    pid = os.getpid() if pid is None else pid
    try:
        write_atomically(f"{node_dir(key)}/{kind}-{pid}-{at}.json",
                         json.dumps({"pid": pid, "at": at, "mode": mode_of(marker), "xid": marker.get("xid"),
                                     "t": round(time.time(), 6)}) + "\n")
    except OSError:
        logger.exception("availproof: the device-loss record could not be written")


def hang(at: str, marker: dict, key: str | None, sleep: Callable[[float], None]) -> dict | None:
    """Block while the node's marker says hang (its record written first); the marker then (None: gone)."""
    record("hung", at, marker, key)
    logger.error("availproof: the engine hangs on its lost device (%s) while %s says hang", at, marker_path(key))
    while True:
        now = read_marker(key)
        if mode_of(now) != "hang":
            return now
        sleep(HANG_POLL_S)


def fail(at: str, marker: dict, key: str | None = None) -> DeviceLost:
    """Record the failure and the error to raise."""
    record("failed", at, marker, key)
    text = message(marker.get("xid"))
    logger.error("availproof: %s (%s, %s)", text, at, marker_path(key))
    return DeviceLost(text)


def at_start(key: str | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
    """A new engine's start on this node: nothing while no marker is there; ``error``: raises :class:`DeviceLost`
    (recorded); ``hang``: waits while the marker says hang, then goes on if it is gone (the device is back) or
    fails (it says error now)."""
    marker = read_marker(key)
    if mode_of(marker) == "hang":
        marker = hang("init", marker, key, sleep)
    if marker is not None:
        raise fail("init", marker, key)


class StepWatch:
    """A running engine's look at its node's marker, from its step, at most every ``look_s`` (``clock``: a seam):
    ``error`` raises :class:`DeviceLost`; ``hang`` blocks the step while it says hang, then raises."""

    def __init__(self, look_s: float = LOOK_S, clock: Callable[[], float] = time.monotonic):
        self.look_s, self.clock = look_s, clock
        self.looked = float("-inf")

    def check(self, key: str | None = None, sleep: Callable[[float], None] = time.sleep) -> None:
        now = self.clock()
        if now - self.looked < self.look_s:
            return
        self.looked = now
        marker = read_marker(key)
        if marker is None:
            return
        if mode_of(marker) == "hang":
            marker = hang("step", marker, key, sleep) or marker
        raise fail("step", marker, key)


STEP = StepWatch()  # the engine process's own (vLLM's step wrapper, serve_apps.engine_faults)


def child_code() -> str:
    """The stream target's engine child's part of it (:mod:`serve_apps.stream_engine`), in its own words (the child
    imports nothing of the rig): ``device_check(at)`` does what :func:`at_start` (``init``) and
    :class:`StepWatch` (``step``) do, its failure said by :data:`ERROR_BYTE` and :data:`ERROR_EXIT`. It needs the
    child's ``json``, ``os``, ``time``, ``fd`` and ``atomically``."""
    return (
        f"_dk = (os.environ.get({NODE_ENV!r}) or '').strip()\n"
        f"device_dir = {DIR + '/' + PREFIX!r} + ('-' + _dk if _dk else '')\n"
        "def device_marker():  # the node's marker (serve_apps.device_loss), None without one\n"
        "    try:\n"
        "        with open(device_dir + '/marker.json') as f:\n"
        "            m = json.loads(f.read() or '{}')\n"
        "    except FileNotFoundError:\n"
        "        return None\n"
        "    except BaseException:\n"
        "        return {'mode': 'error'}\n"
        "    if not isinstance(m, dict):\n"
        "        return {'mode': 'error'}\n"
        f"    return m if m.get('mode') in {MODES!r} else dict(m, mode='error')\n"
        "def device_record(kind, at, m):\n"
        "    atomically(f'{device_dir}/{kind}-{os.getpid()}-{at}.json', json.dumps({'pid': os.getpid(), 'at': at,\n"
        "               'mode': m.get('mode'), 'xid': m.get('xid'), 't': round(time.time(), 3)}) + '\\n')\n"
        "def device_check(at):\n"
        "    m = device_marker()\n"
        "    if m is None:\n"
        "        return\n"
        "    if m.get('mode') == 'hang':\n"
        "        device_record('hung', at, m)\n"
        "        while True:\n"
        "            now = device_marker()\n"
        "            if now is None or now.get('mode') != 'hang':\n"
        "                break\n"
        f"            time.sleep({HANG_POLL_S})\n"
        "        if now is None and at == 'init':\n"
        "            return  # the device is back before the engine started: it starts\n"
        "        m = now or m\n"
        "    device_record('failed', at, m)\n"
        f"    os.write(fd, {ERROR_BYTE!r})\n"
        f"    os._exit({ERROR_EXIT})\n")


def main(argv: list[str] | None = None) -> int:
    """``python -m serve_apps.device_loss set|look|clear|clear-any --node KEY ...``: one JSON object on stdout (the
    rig's exec in a KubeRay pod)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("action", choices=("set", "look", "clear", "clear-any"))
    ap.add_argument("--node", default="")
    ap.add_argument("--run", default="")
    ap.add_argument("--fault", default="")
    ap.add_argument("--token", default="")
    ap.add_argument("--mode", default="error")
    ap.add_argument("--xid", type=int, default=79)
    a = ap.parse_args(argv)
    try:
        if a.action == "set":
            out = set_marker(a.node, a.run, a.fault, a.token, a.mode, a.xid)
        elif a.action == "look":
            out = look(a.node)
        else:
            out = clear(a.node, None if a.action == "clear-any" else a.token)
    except (RuntimeError, OSError) as e:
        out = {"error": str(e)}
    json.dump(out, sys.stdout)
    return 1 if "error" in out else 0


if __name__ == "__main__":
    raise SystemExit(main())
