"""Any run's held engine faults left in the Ray pods (``engine-wedge``, ``engine-garbage``, ``engine-stall``,
``engine-slow``): the marks ``/tmp/availproof-engine-<fault>-<pid>`` an engine holds its fault by, and a request
(``/tmp/availproof-engine-fault-<pid>.request``) the rig left that the engine never took (its signal may have armed
it: its next step would take it). Found by one exec per Ray pod (:func:`find`, :meth:`Leftovers.leftovers
<chaos.backends.kuberay.leftovers.Leftovers.leftovers>`) and undone by another (:func:`undo`, ``availproof recover``):
every mark removed whichever run wrote it (only the rig writes them: the engine lets its fault go at its next look),
a pending request made void (:func:`chaos.backends.engine_faults.void_request`: the armed engine's next step does
nothing), one whose engine is gone removed. As the local backend's recover does (:func:`chaos.backends.local.engines.
unwedge`)."""

from __future__ import annotations

import shlex

from chaos.backends import engine_faults
from serve_apps.engine_faults import WEDGE, mark_path, request_path

FAULTS = (WEDGE,) + engine_faults.HELD  # the marks an engine holds its fault by
DIR = "/tmp"  # where the engines write them (serve_apps.engine_faults.TOMBSTONE_DIR); a test's own elsewhere
_MARK = {f: mark_path(f, 0).removesuffix("0") for f in FAULTS}  # + pid
VOID = engine_faults.void_request(None).strip()


def _each_mark(body: str, where: str) -> str:
    """``body`` run for each mark file of any fault, with ``$k`` the fault, ``$p`` the pid and ``$f`` the path."""
    return (f"for k in {' '.join(FAULTS)}; do for f in {shlex.quote(where)}/availproof-engine-$k-*; do p=${{f##*-}}; "
            f"case \"$p\" in ''|*[!0-9]*) continue;; esac; [ -f \"$f\" ] || continue; {body}; done; done")


def _each_request(body: str, where: str) -> str:
    """``body`` run for each request not void, with ``$p`` the pid and ``$f`` the path."""
    prefix = f"{shlex.quote(where)}/availproof-engine-fault-"
    return (f"for f in {prefix}*.request; do [ -f \"$f\" ] || continue; p=${{f##*-}}; p=${{p%.request}}; "
            f"case \"$p\" in ''|*[!0-9]*) continue;; esac; grep -q '\"fault\": \"void\"' \"$f\" && continue; "
            f"{body}; done")


def look_script(where: str = DIR) -> str:
    """``mark FAULT PID TEXT`` per mark and ``request PID TEXT`` per request not void."""
    return ("; ".join([": availproof-engine-marks look",
                       _each_mark('echo "mark $k $p $(head -c 300 "$f" | head -n 1)"', where),
                       _each_request('echo "request $p $(head -c 300 "$f" | head -n 1)"', where)]) + "; true")


def recover_script(where: str = DIR) -> str:
    """Every mark removed (``released FAULT PID``); each request not void made void while its engine lives
    (``voided PID``), removed when it is gone (``removed PID``)."""
    return ("; ".join([": availproof-engine-marks recover",
                       _each_mark('rm -f "$f" && echo "released $k $p"', where),
                       _each_request(f'if kill -0 "$p" 2>/dev/null; then printf %s {shlex.quote(VOID)} > "$f" && '
                                     f'echo "voided $p"; else rm -f "$f" && echo "removed $p"; fi', where)]) + "; true")


def parse(out: str) -> list[dict]:
    """What :func:`look_script` said: {"what": "mark"|"request", "fault", "pid", "text"} each."""
    found = []
    for line in out.splitlines():
        words = line.split(maxsplit=3)
        if len(words) >= 3 and words[0] == "mark" and words[1] in FAULTS and words[2].isdigit():
            found.append({"what": "mark", "fault": words[1], "pid": int(words[2]),
                          "text": words[3] if len(words) == 4 else ""})
        elif len(words) >= 2 and words[0] == "request" and words[1].isdigit():
            text = line.split(maxsplit=2)[2] if len(words) >= 3 else ""
            found.append({"what": "request", "fault": engine_faults.mark_field(text, "fault"), "pid": int(words[1]),
                          "text": text})
    return found


def find(b) -> list[dict]:
    """The leftovers rows (kind ``EngineMark``, name ``pod/pid``) of every Ray pod's marks and pending requests, one
    exec per pod; a pod that cannot be looked into (its container gone, exec refused) holds none the rig can see."""
    rows = []
    for pod in b.ray_pod_names():
        try:
            said = b.exec(pod, look_script())
        except Exception:  # noqa: BLE001 - ApiException or ExecError: no live container, no engine to hold a fault
            continue
        for x in parse(said):
            what = (f"engine {x['pid']} holds {x['fault']} ({engine_faults.HELD_WORDS[x['fault']]}: its mark "
                    f"{_MARK[x['fault']]}{x['pid']})" if x["what"] == "mark" else
                    f"a request ({x['fault']}) engine {x['pid']} never took ({request_path(x['pid'])})")
            rows.append({"kind": "EngineMark", "name": f"{pod}/{x['pid']}", "namespace": b.namespace,
                         "run_id": engine_faults.mark_run(x["text"]), "zone": None, "what": what, "expires": None,
                         "pod": pod, "pid": x["pid"], "fault": x["fault"], "mark": x["what"]})
    return rows


def undo(b, pod: str) -> list[str]:
    """Every mark of ``pod`` removed and its pending requests voided (one exec): what the script said, a line each."""
    return [line for line in b.exec(pod, recover_script()).splitlines() if line.strip()]
