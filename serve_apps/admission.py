"""The apps' admission limits (issue 48): how many requests a replica takes at once, how many may wait for one, and
how a request that finds the queue full is refused.

An experiment's ``app.admission`` (``chaos/schemas/experiment-extension.schema.json``) becomes an
:class:`Admission` on :class:`serve_apps.config.AppSpec`; unset (None), the Serve config is byte-identical to what
it was before admission limits existed. Ray Serve (2.60, the installed one) does all of it on the deployment:

- ``max_ongoing_requests``: requests one replica takes at once (every deployment of the app: the engines and any
  ingress in front of them);
- ``max_queued_requests``: requests that may wait *at each caller* (each proxy, each handle) for a replica with
  room; -1 is Serve's "no limit": a request waits until a replica takes it, or until the client's timeout;
- ``backpressure_config``: what a request refused because that queue is full gets over HTTP, ``status_code``
  (503, Serve's default, or 429) and ``retry_after_s`` (a ``Retry-After`` header, whole seconds rounded up).
  Serve's router raises ``BackPressureError`` (``ray/serve/_private/router.py``) and the proxy turns it into that
  answer (``ray/serve/_private/http_util.py``, ``get_http_response_status``, with ``retry_after_headers``): no
  code of the apps is involved, so the refusal is as fast as the proxy.

The queue limit and the refusal go on the deployment Serve's proxies call, the app's ingress (the stream target
itself; the migrating ingress in front of it; vLLM's ``OpenAiIngress``): that is where an HTTP request waits, and
where the proxy answers it. A queue limit on a deployment called through a handle from another (the engines behind
an ingress) would raise ``BackPressureError`` inside the ingress's code instead, whose answer is the ingress's to
make; so there the engines get ``max_ongoing_requests`` only.

Fast refusal is ``max_queued_requests`` >= 0 with its ``backpressure_config``; the same experiment without it
(``max_queued_requests`` -1, or unset) lets requests wait out their timeout. 503 by default: it is what Serve
answers, what the rig's retry policy retries by default and what a load balancer reads as "this backend, not
you"; 429 says the client sends too much, which an overload of the service is not.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

STATUS_CODES = (503, 429)
DEFAULT_RETRY_AFTER_S = 1.0


@dataclass(frozen=True)
class Admission:
    max_ongoing_requests: int | None = None  # per replica, every deployment of the app; None: the app's own
    max_queued_requests: int | None = None  # per caller (proxy, handle), at the ingress; -1 or None: no limit
    status_code: int = 503  # the refusal's status (503 or 429)
    retry_after_s: float | None = DEFAULT_RETRY_AFTER_S  # its Retry-After header (None: none)

    @classmethod
    def from_dict(cls, doc: dict[str, Any] | None) -> "Admission | None":
        """The experiment's ``app.admission`` (None when absent); raises ValueError for a value out of range."""
        if not doc:
            return None
        unknown = set(doc) - {"max_ongoing_requests", "max_queued_requests", "status_code", "retry_after_s"}
        if unknown:
            raise ValueError(f"admission: unknown key(s) {', '.join(sorted(unknown))}")
        a = cls(max_ongoing_requests=doc.get("max_ongoing_requests"), max_queued_requests=doc.get("max_queued_requests"),
                status_code=doc.get("status_code", 503), retry_after_s=doc.get("retry_after_s", DEFAULT_RETRY_AFTER_S))
        problems = a.problems()
        if problems:
            raise ValueError("admission: " + "; ".join(problems))
        return a

    def problems(self) -> list[str]:
        out = []

        def integer(v: Any) -> bool:
            return isinstance(v, int) and not isinstance(v, bool)

        if self.max_ongoing_requests is not None and not (integer(self.max_ongoing_requests)
                                                          and self.max_ongoing_requests >= 1):
            out.append(f"max_ongoing_requests must be an integer >= 1, got {self.max_ongoing_requests!r}")
        if self.max_queued_requests is not None and not (integer(self.max_queued_requests)
                                                         and self.max_queued_requests >= -1):
            out.append(f"max_queued_requests must be an integer >= -1 (-1: no limit), got {self.max_queued_requests!r}")
        if self.status_code not in STATUS_CODES:
            out.append(f"status_code must be 503 or 429, got {self.status_code!r}")
        r = self.retry_after_s
        if r is not None and not (isinstance(r, (int, float)) and not isinstance(r, bool) and 0 <= r <= 3600):
            out.append(f"retry_after_s must be a number of seconds in [0, 3600] or null, got {r!r}")
        return out

    @property
    def refuses_fast(self) -> bool:
        """A full queue refuses at once (a queue limit set); else requests wait for a replica."""
        return self.max_queued_requests is not None and self.max_queued_requests >= 0

    def to_dict(self) -> dict[str, Any]:
        return {"max_ongoing_requests": self.max_ongoing_requests, "max_queued_requests": self.max_queued_requests,
                "status_code": self.status_code, "retry_after_s": self.retry_after_s,
                "refuses_fast": self.refuses_fast}


def engine_options(admission: Admission | None) -> dict[str, Any]:
    """What every deployment of the app takes (merged over its options): ``max_ongoing_requests`` when set."""
    if admission is None or admission.max_ongoing_requests is None:
        return {}
    return {"max_ongoing_requests": admission.max_ongoing_requests}


def ingress_options(admission: Admission | None) -> dict[str, Any]:
    """What the deployment Serve's proxies call takes: :func:`engine_options`, and with fast refusal its queue limit
    and the refusal's answer (``backpressure_config``). Without fast refusal nothing more: Serve's default queue
    (no limit) as before."""
    out = engine_options(admission)
    if admission is not None and admission.refuses_fast:
        out["max_queued_requests"] = admission.max_queued_requests
        out["backpressure_config"] = {"status_code": admission.status_code, "retry_after_s": admission.retry_after_s}
    return out
