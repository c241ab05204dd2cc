"""Commands run inside pods, with their exit status checked.

``kubectl exec`` through the ``kubernetes`` client: ``stream(..., _preload_content=False)``
returns the websocket client; once it closes, the error channel (3) holds a ``metav1.Status``:
``status: Success``, or ``status: Failure`` with ``reason: NonZeroExitCode`` and the exit code
in ``details.causes[reason=ExitCode].message`` (what ``WSClient.returncode`` reads). A command
that did not run, exited non-zero, or did not finish raises :class:`ExecError`, so no fault is
ever recorded as injected when its command failed.

``stream()`` (kubernetes client 37, ``kubernetes/stream/stream.py`` ``_websocket_request``) swaps
the ``call_api`` of the ApiClient behind the API method it is given for a websocket call until
the exec is set up: every other request sent through that ApiClient meanwhile (the sampler's
reads, from another thread) would go to the websocket instead. Exec therefore goes through an
ApiClient of its own (:func:`own_core`), never the one the backend's reads share.
"""

from __future__ import annotations

import yaml

from chaos.base.errors import ClusterError

ERROR_CHANNEL = 3  # kubernetes.stream.ws_client.ERROR_CHANNEL


class ExecError(ClusterError):
    """A command run in a pod failed (did not start, exited non-zero, or timed out)."""


def exit_status(status_doc: str | None) -> tuple[int | None, str]:
    """(exit code, message) from the error channel's Status document; code None when unknown."""
    if not status_doc:
        return None, "the exec stream closed without an exit status"
    try:
        status = yaml.safe_load(status_doc) or {}
    except yaml.YAMLError:
        return None, f"unreadable exit status {status_doc[:200]!r}"
    if status.get("status") == "Success":
        return 0, ""
    message = str(status.get("message") or status.get("reason") or "failed")
    for cause in (status.get("details") or {}).get("causes") or []:
        if cause.get("reason") == "ExitCode" and str(cause.get("message", "")).lstrip("-").isdigit():
            return int(cause["message"]), message
    return None, message


def own_core(core):
    """A ``CoreV1Api`` over a new ApiClient with ``core``'s configuration and REST layer (its connection
    pool, thread-safe), so that ``stream()`` can patch that ApiClient's ``call_api`` without touching
    the one ``core``'s other callers share."""
    from kubernetes import client

    shared = core.api_client
    api = client.ApiClient(shared.configuration)
    api.rest_client = shared.rest_client
    return client.CoreV1Api(api)


def run(core, namespace: str, pod: str, script: str, container: str | None = None, timeout: float = 60.0,
        stream_fn=None, ok_codes: tuple[int, ...] = (0,), status: dict | None = None) -> str:
    """Run ``sh -c script`` in ``pod`` and return its stdout; raise :class:`ExecError` unless it exited
    with one of ``ok_codes`` (0 alone by default). ``core`` must be an exec-only client (:func:`own_core`).
    ``status``: a dict given gets the exit status (``exit``: None when unknown), whatever it was."""
    if stream_fn is None:
        from kubernetes.stream import stream as stream_fn
    kwargs = {"command": ["sh", "-c", script], "stderr": True, "stdin": False, "stdout": True, "tty": False,
              "_preload_content": False}
    if container:
        kwargs["container"] = container
    where = f"pod {namespace}/{pod}" + (f" container {container}" if container else "")
    try:
        resp = stream_fn(core.connect_get_namespaced_pod_exec, pod, namespace, **kwargs)
    except Exception as e:  # noqa: BLE001 - the client wraps every connection error in ApiException
        raise ExecError(f"exec in {where} failed to start ({getattr(e, 'reason', None) or e}): {script}") from None
    try:
        resp.run_forever(timeout=timeout)
        if resp.is_open():
            raise ExecError(f"exec in {where} did not finish within {timeout:.0f} s: {script}")
        out, err = resp.read_stdout() or "", resp.read_stderr() or ""
        code, message = exit_status(resp.read_channel(ERROR_CHANNEL))
        if status is not None:
            status["exit"] = code
    finally:
        resp.close()
    if code not in ok_codes:
        detail = err.strip().splitlines()[-1] if err.strip() else message
        raise ExecError(f"exec in {where} {'exited ' + str(code) if code is not None else 'failed'}: "
                        f"{script} ({detail})")
    return out
