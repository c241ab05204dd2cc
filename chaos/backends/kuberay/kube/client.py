"""The KubeRay backend's one handle on the cluster and on time: the Kubernetes API clients (CoreV1, Networking,
CustomObjects, Authorization, Batch, exec's own CoreV1 and the ``kubernetes.stream.stream`` seam) and the clock the
backend's parts read and sleep on. The unit tests hand in the fake API's clients (tests/unit/kube_fake.py) and a
clock of their own (:data:`DEFAULT_CLOCK` for every backend made while it is replaced, or one backend's
``kube.clock``): the backend's waits no longer need the process's :mod:`time` patched (chaos.scopes.faults still has
its own ``time`` seam)."""

from __future__ import annotations

import operator
import time
from dataclasses import dataclass
from typing import Any, Callable


@dataclass
class Clock:
    """``monotonic`` (seconds, for intervals and deadlines), ``sleep`` and ``wall_ns`` (the wall clock in ns,
    for marks and records)."""

    monotonic: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    wall_ns: Callable[[], int] = time.time_ns


DEFAULT_CLOCK = Clock()  # read when a backend is made: a test may replace it for the backends it makes


@dataclass
class KubeClient:
    """The API clients of one kube context, and the clock."""

    core: Any
    net: Any
    custom: Any
    exec_core: Any
    authz: Any
    batch: Any
    stream_fn: Callable | None = None
    clock: Clock | None = None  # None: DEFAULT_CLOCK as it is when this client is made

    def __post_init__(self):
        if self.clock is None:
            self.clock = DEFAULT_CLOCK

    def monotonic(self) -> float:
        return self.clock.monotonic()

    def sleep(self, seconds: float) -> None:
        self.clock.sleep(seconds)

    def wall_ns(self) -> int:
        return self.clock.wall_ns()


def kube_attribute(name: str) -> property:
    """An attribute of a holder's ``kube`` (:class:`KubeClient`), read and set through the holder."""
    return property(lambda self: getattr(self.kube, name), lambda self, value: setattr(self.kube, name, value),
                    doc=f"``kube.{name}``")


def part_attribute(part: str, name: str) -> property:
    """An attribute of one of a holder's parts (``holder.<part>.<name>``; ``part`` may be a dotted path to a part's
    own part, ``"domains.zone_loss"``), read and set through the holder."""
    held = operator.attrgetter(part)
    return property(lambda self: getattr(held(self), name),
                    lambda self, value: setattr(held(self), name, value), doc=f"``{part}.{name}``")
