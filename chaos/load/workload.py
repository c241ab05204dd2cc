"""What the harness sends, and when: load shape, arrival schedule, prompts — all seeded.

Everything here is deterministic from the seed, so a run can be replayed and its workload is
recorded in the run header.
"""

from __future__ import annotations

import ipaddress
import random
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator
from urllib.parse import urlsplit

from chaos.errors import UsageError

WORDS = (
    "availability zone region replica failover latency token stream cluster recovery request "
    "service engine model prompt answer health check budget window steady state kill restart "
    "partition network redis head worker node proxy serve route deploy bound trial measure"
).split()


@dataclass
class LoadShape:
    mode: str = "open"  # open: send on schedule; closed: fixed concurrency
    arrival: str = "poisson"  # open loop: poisson | constant
    rate: float = 5.0  # open loop requests per second
    concurrency: int = 4  # closed loop workers
    duration_s: float = 60.0  # hard bound on the sending phase
    max_requests: int = 10_000  # hard bound on the number of requests
    warmup_s: float = 5.0  # requests sent before this are recorded as warm-up
    timeout_s: float = 10.0  # per request, end to end
    connect_timeout_s: float = 2.0
    stream: bool = True
    route: str = "chat"  # chat | completions
    model: str = "availproof-tiny"
    prompt_words: tuple[int, int] = (8, 48)
    max_tokens: tuple[int, int] = (16, 48)
    seed: int = 7
    drain_s: float | None = None  # how long to wait for in-flight requests after sending stops

    def __post_init__(self):
        self.prompt_words = tuple(self.prompt_words)
        self.max_tokens = tuple(self.max_tokens)
        problems = []
        if self.mode not in ("open", "closed"):
            problems.append(f"mode must be open or closed, got {self.mode!r}")
        if self.arrival not in ("poisson", "constant"):
            problems.append(f"arrival must be poisson or constant, got {self.arrival!r}")
        if self.route not in ("chat", "completions"):
            problems.append(f"route must be chat or completions, got {self.route!r}")
        if not 0 < self.rate <= 5000:
            problems.append(f"rate must be in (0, 5000] req/s, got {self.rate}")
        if not 1 <= self.concurrency <= 1000:
            problems.append(f"concurrency must be 1..1000, got {self.concurrency}")
        if not 0 < self.duration_s <= 86400:
            problems.append(f"duration_s must be in (0, 86400], got {self.duration_s}")
        if not 1 <= self.max_requests <= 10_000_000:
            problems.append(f"max_requests must be 1..10000000, got {self.max_requests}")
        if not 0 <= self.warmup_s < self.duration_s:
            problems.append(f"warmup_s must be in [0, duration_s), got {self.warmup_s}")
        if not 0 < self.timeout_s <= 3600 or not 0 < self.connect_timeout_s <= self.timeout_s:
            problems.append("timeout_s and connect_timeout_s must be positive, connect <= total")
        for name in ("prompt_words", "max_tokens"):
            lo_hi = getattr(self, name)
            if len(lo_hi) != 2 or not 1 <= lo_hi[0] <= lo_hi[1]:
                problems.append(f"{name} must be [min, max] with 1 <= min <= max, got {list(lo_hi)}")
        if problems:
            raise UsageError("load: " + "; ".join(problems))

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> "LoadShape":
        d = dict(d or {})
        unknown = set(d) - set(cls.__dataclass_fields__)
        if unknown:
            raise UsageError(f"load: unknown field(s) {', '.join(sorted(unknown))}")
        try:
            return cls(**d)
        except TypeError as e:
            raise UsageError(f"load: {e}") from None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Target:
    name: str
    url: str  # base URL, e.g. http://127.3.4.5:8000
    zone: str | None = None
    region: str | None = None


@dataclass
class PlannedRequest:
    id: int
    offset_s: float  # planned send time, seconds after the run start (open loop)
    target: Target
    prompt: str
    max_tokens: int


def check_target_allowed(url: str, allow_hosts: tuple[str, ...] = ()) -> None:
    """Refuse targets outside loopback unless the experiment names the host explicitly."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"target {url!r}: not an http(s) URL")
    host = parts.hostname
    if host in allow_hosts or host == "localhost":
        return
    try:
        if ipaddress.ip_address(host).is_loopback:
            return
    except ValueError:
        pass
    raise UsageError(f"target {url!r}: {host} is not loopback; name it in the experiment's allow_hosts to use it")


@dataclass
class Router:
    """Spread requests over targets: round robin, or everything to the first (a load balancer)."""

    targets: list[Target]
    policy: str = "round_robin"  # round_robin | single
    _next: int = field(default=0, repr=False)

    def __post_init__(self):
        if not self.targets:
            raise UsageError("load: no targets")
        if self.policy not in ("round_robin", "single"):
            raise UsageError(f"routing policy must be round_robin or single, got {self.policy!r}")

    def pick(self) -> Target:
        if self.policy == "single":
            return self.targets[0]
        t = self.targets[self._next % len(self.targets)]
        self._next += 1
        return t


def prompt_text(rng: random.Random, lo: int, hi: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(lo, hi)))


def plan(shape: LoadShape, router: Router) -> Iterator[PlannedRequest]:
    """The request plan: ids, planned offsets (open loop), targets, prompts, output lengths.

    In closed loop the offsets are meaningless (0); requests go out as workers free up.
    Stops at ``max_requests`` or at the first offset beyond ``duration_s``.
    """
    arrivals = random.Random(shape.seed)
    prompts = random.Random(shape.seed + 1)
    t = 0.0
    for i in range(shape.max_requests):
        if shape.mode == "open":
            if i > 0:
                t += arrivals.expovariate(shape.rate) if shape.arrival == "poisson" else 1.0 / shape.rate
            if t >= shape.duration_s:
                return
        yield PlannedRequest(
            id=i,
            offset_s=t if shape.mode == "open" else 0.0,
            target=router.pick(),
            prompt=prompt_text(prompts, *shape.prompt_words),
            max_tokens=prompts.randint(*shape.max_tokens),
        )


def request_body(shape: LoadShape, req: PlannedRequest) -> tuple[str, dict[str, Any]]:
    """(path, JSON body) of the OpenAI-compatible request."""
    body: dict[str, Any] = {"model": shape.model, "max_tokens": req.max_tokens, "stream": shape.stream,
                            "temperature": 0.0}
    if shape.stream:
        body["stream_options"] = {"include_usage": True}
    if shape.route == "chat":
        body["messages"] = [{"role": "user", "content": req.prompt}]
        return "/v1/chat/completions", body
    body["prompt"] = req.prompt
    return "/v1/completions", body
