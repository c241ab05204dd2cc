"""One load worker in a pod of the rig's Kubernetes Job: ``python -m chaos.load.pod_worker``.

The rig (:mod:`chaos.backends.kuberay.kube.load_pool`) runs the workers of ``load.workers`` as an Indexed Job
whose pods are kept off the nodes of the Ray cluster under test. It talks to each pod only through
the Kubernetes API: files it gives the pod, commands it execs in it, and the pod's log.

1. Its spec (the load shape, the targets, its share of the run's one plan) is the file
   ``worker-W.json.gz`` of the ConfigMap volume mounted at ``$AVAILPROOF_LOAD_SPEC_DIR``, ``W`` being
   the pod's completion index (``$JOB_COMPLETION_INDEX``, set by the Job controller). It prints
   ``{"kind": "worker_ready", ...}``.
2. The rig measures the pod's wall clock against its own (an exec of :data:`CLOCK_SCRIPT`), then
   writes the run's start, on the pod's own wall clock, into ``$AVAILPROOF_LOAD_CONTROL_DIR/go``
   (:func:`go_script`). The pod has no monotonic clock in common with the rig: it turns that wall-clock
   instant into its own monotonic one and sends its share from there, each finished request printed as
   one NDJSON line (its instants on the pod's wall clock: the rig corrects them by the measured offset).
   ``{"kind": "worker_counts"}`` every second; a ``stop`` file stops the sending (:data:`STOP_SCRIPT`).
3. At the end ``{"kind": "worker_done", ...}`` (footer, counts, CPU seconds, error); then the pod waits
   for the ``exit`` file (:data:`EXIT_SCRIPT`: the rig has read its clock again) or :data:`LINGER_S`.

Every wait is bounded: no start within ``go_timeout_s`` (the rig is gone) ends the pod with code 1,
nothing sent. A run that ran, even with an error, ends with code 0 (its error is in its done line): with
``backoffLimit: 0`` one failed pod would make the Job controller terminate the other workers.
"""

from __future__ import annotations

import gzip
import json
import os
import resource
import sys
import threading
import time
from pathlib import Path
from typing import Callable, TextIO

SPEC_DIR = "/etc/availproof-load"  # the ConfigMaps' projected volume
CONTROL_DIR = "/var/run/availproof-load"  # an emptyDir the rig writes its signals into (exec)
ENV_INDEX = "JOB_COMPLETION_INDEX"
ENV_SPEC_DIR = "AVAILPROOF_LOAD_SPEC_DIR"
ENV_CONTROL_DIR = "AVAILPROOF_LOAD_CONTROL_DIR"
GO, STOP, EXIT = "go", "stop", "exit"
READY, COUNTS, DONE = "worker_ready", "worker_counts", "worker_done"
CLOCK_SCRIPT = "date +%s%N"  # the pod's wall clock, ns (GNU date, as in the rig's image)
STOP_SCRIPT = f": > {CONTROL_DIR}/{STOP}"
EXIT_SCRIPT = f": > {CONTROL_DIR}/{EXIT}"
GO_TIMEOUT_S = 900.0
LINGER_S = 60.0
POLL_S = 0.01


def spec_file(w: int) -> str:
    return f"worker-{w}.json.gz"


def go_script(t0_ns: int) -> str:
    """Write the run's start (ns on the pod's wall clock) into the control directory, whole or not at all."""
    return f"echo {int(t0_ns)} > {CONTROL_DIR}/{GO}.tmp && mv {CONTROL_DIR}/{GO}.tmp {CONTROL_DIR}/{GO}"


def encode_spec(spec: dict) -> bytes:
    return gzip.compress(json.dumps(spec, separators=(",", ":")).encode(), mtime=0)


def decode_spec(data: bytes) -> dict:
    return json.loads(gzip.decompress(data))


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


class Lines:
    """NDJSON lines to the pod's stdout (its log), one write and flush each, from any thread."""

    def __init__(self, out: TextIO):
        self.out, self._lock = out, threading.Lock()

    def write(self, obj) -> None:
        data = vars(obj) if hasattr(obj, "__dataclass_fields__") else obj
        line = json.dumps(data, separators=(",", ":"), default=str) + "\n"
        with self._lock:
            self.out.write(line)
            self.out.flush()


def _wait_for(control: Path, names: tuple[str, ...], timeout_s: float) -> str | None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for name in names:
            if (control / name).exists():
                return name
        time.sleep(POLL_S)
    return None


def serve(spec_dir: Path, control: Path, index: int, out: TextIO, clock_ns: Callable[[], int] = time.time_ns,
          linger_s: float = LINGER_S) -> int:
    """The worker of completion index ``index`` (see the module's docstring); its exit code."""
    from chaos.recording import records as rec
    from chaos.load.worker import load_run

    from chaos.base.errors import UsageError
    from chaos.load.workload import LoadShape

    lines = Lines(out)
    spec = decode_spec((spec_dir / spec_file(index)).read_bytes())
    w = spec["worker"]
    try:  # an image whose availproof is not the rig's says so now, before the start
        LoadShape.from_dict(spec["shape"])
    except UsageError as e:
        lines.write({"kind": DONE, "worker": w, "footer": {}, "counts": {}, "cpu_s": None,
                     "error": f"this image's availproof cannot read the rig's load ({e}): use an image of the "
                              f"rig's version"[:300]})
        return 1
    lines.write({"kind": READY, "worker": w, "planned": len(spec["share"]), "pid": os.getpid()})
    got = _wait_for(control, (GO, STOP, EXIT), float(spec.get("go_timeout_s", GO_TIMEOUT_S)))
    if got != GO:
        lines.write({"kind": DONE, "worker": w, "footer": {}, "counts": {}, "cpu_s": None,
                     "error": "stopped before the start" if got else "no start from the rig in time"})
        return 0 if got else 1
    t0_ns = int((control / GO).read_text().split()[0])
    now_ns, now_mono = clock_ns(), time.monotonic()
    start_at = (now_mono + (t0_ns - now_ns) / 1e9, t0_ns)
    events = rec.Events()
    events.request_done.append(lines.write)
    footer: dict = {}
    events.run_stopped.append(footer.update)
    run = load_run(spec, events, start_at, clock_ns=clock_ns)
    cpu0 = _cpu_s()
    run.start()
    next_counts = time.monotonic() + 1.0
    while run.running:
        if (control / STOP).exists() or (control / EXIT).exists():
            run.stop()
        if time.monotonic() >= next_counts:
            lines.write({"kind": COUNTS, "worker": w, "counts": dict(run.counts)})
            next_counts += 1.0
        time.sleep(0.05)
    error = None
    try:
        run.join(timeout=max(run.shape.timeout_s, run.shape.drain_bound_s()) + 60)  # retries: every attempt
    except BaseException as e:  # noqa: BLE001 - reported to the rig in the done line
        error = f"{type(e).__name__}: {e}"[:300]
    lines.write({"kind": DONE, "worker": w, "footer": footer, "counts": dict(run.counts), "cpu_s": _cpu_s() - cpu0,
                 "error": error, "late_start_ns": max(0, now_ns - t0_ns)})
    _wait_for(control, (EXIT,), linger_s)  # the rig reads the clock again meanwhile
    return 0


def main(env: dict | None = None, out: TextIO | None = None, clock_ns: Callable[[], int] = time.time_ns) -> int:
    env = os.environ if env is None else env
    if not env.get(ENV_INDEX, "").isdigit():
        print(f"{ENV_INDEX} is not set: run by the rig's Kubernetes Job (chaos.backends.kuberay.kube.load_pool)",
              file=sys.stderr)
        return 2
    control = Path(env.get(ENV_CONTROL_DIR, CONTROL_DIR))
    stop_on_sigterm(control)
    return serve(Path(env.get(ENV_SPEC_DIR, SPEC_DIR)), control, int(env[ENV_INDEX]), out or sys.stdout,
                 clock_ns=clock_ns)


def stop_on_sigterm(control: Path) -> None:
    """The kubelet's SIGTERM (a pod deleted: the Job at the run's end, a drain) as the rig's stop then exit:
    the worker stops sending, writes its done line and ends within the grace period. Without a handler a
    process that is its container's PID 1 ignores SIGTERM and is SIGKILLed at the grace period's end,
    its done line never written."""
    import signal

    def handler(signum, frame):
        for name in (STOP, EXIT):
            try:
                (control / name).touch()
            except OSError:
                pass

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, handler)


if __name__ == "__main__":
    sys.exit(main())
