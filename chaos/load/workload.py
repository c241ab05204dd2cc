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

from chaos.base.errors import UsageError
from chaos.load.retry import RetryPolicy
from chaos.load.sessions import SessionSpec

WORDS = (
    "availability zone region replica failover latency token stream cluster recovery request "
    "service engine model prompt answer health check budget window steady state kill restart "
    "partition network redis head worker node proxy serve route deploy bound trial measure"
).split()


@dataclass
class LoadShape:
    mode: str = "open"  # open: send on schedule; closed: fixed concurrency
    arrival: str = "poisson"  # open loop: poisson | constant | gamma (chaos.load.arrivals)
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
    sessions: SessionSpec | None = None  # multi-turn sessions with shared prefixes (chaos.load.sessions)
    # bursty arrivals, ramps, lengths in tokens, trace replay, worker processes (chaos.load.arrivals,
    # lengths, trace, workers)
    burstiness: float = 1.0  # gamma arrivals' shape k (vllm bench's --burstiness): 1 Poisson, < 1 burstier
    stages: tuple = ()  # open loop: ({"rate", "duration_s"}, ...) played in order instead of ``rate``
    prompt_len: dict | None = None  # prompt tokens from a distribution (None: prompt_words)
    output_len: dict | None = None  # output tokens (max_tokens) from a distribution (None: max_tokens)
    max_model_len: int = 512  # the model's context (serve_apps.config.LLMOptions.max_model_len)
    template_tokens: int = 8  # what the chat route's template adds to a prompt (the tiny model's)
    clip: str = "prompt"  # what is cut first when prompt + template + output > max_model_len
    trace: str | None = None  # a Mooncake-format JSONL trace replayed instead of arrivals and lengths
    trace_speed: float = 1.0  # replay speed-up (2: twice as fast)
    trace_end: str = "stop"  # stop | loop at the trace's end
    trace_block_tokens: int = 512  # tokens per hash_ids block (Mooncake's 512)
    workers: int = 1  # harness processes (chaos.load.workers); 1: in the rig's process
    # the rate as a share of a measured capacity (chaos.load.utilization): rate = utilization x the capacity
    # file's sustained_rps, set when the run opens (chaos.core.run.open_run)
    utilization: float | None = None
    capacity: str | None = None  # the capacity file (availproof capacity), relative to the experiment file
    retry: RetryPolicy | None = None  # the client's retry policy (chaos.load.retry); None: every request sent once
    # the requests cycle through this many distinct (prompt, max_tokens) pairs drawn from the seed (None: each
    # request draws its own); with ``constraint``, vLLM's answers constrained to whole-word tokens, greedy, so that
    # each stream is checked against a golden answer (chaos.load.golden; both set by the rig for --app llm)
    prompt_set: int | None = None
    constraint: dict | None = None

    def __post_init__(self):
        self.prompt_words = tuple(self.prompt_words)
        self.max_tokens = tuple(self.max_tokens)
        self.stages = tuple(dict(st) if isinstance(st, dict) else st for st in (self.stages or ()))
        problems = _more_problems(self)
        if self.mode not in ("open", "closed"):
            problems.append(f"mode must be open or closed, got {self.mode!r}")
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
        if isinstance(self.sessions, dict):
            try:
                self.sessions = SessionSpec.from_dict(self.sessions)
            except (UsageError, TypeError) as e:
                problems.append(str(e))
        if isinstance(self.sessions, SessionSpec) and not problems:
            clash = [k for k in ("trace", "prompt_len", "output_len") if getattr(self, k)]
            if clash or self.workers != 1:
                problems.append("sessions: draw their messages from prompt_words and max_tokens and run in one "
                                f"harness process; remove {', '.join(clash) or 'workers'}")
            try:
                self.sessions.check_fits(self.prompt_words[1], self.max_tokens[1], self.max_model_len, self.template_tokens)
            except UsageError as e:
                problems.append(str(e))
        if isinstance(self.retry, dict):
            try:
                self.retry = RetryPolicy.from_dict(self.retry)
            except (UsageError, TypeError) as e:
                problems.append(str(e))
        if isinstance(self.retry, RetryPolicy) and not problems:
            problems += [f"retry: {p}" for p in self.retry.problems(self.timeout_s)]
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

    def drain_bound_s(self) -> float:
        """How long requests in flight are waited for once sending stops: ``drain_s``, else one timeout and a second
        (with a retry policy: every attempt of a logical request to its deadline, and the waits between them)."""
        if self.drain_s is not None:
            return self.drain_s
        return (self.retry.worst_case_s(self.timeout_s) if self.retry else self.timeout_s) + 1.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _more_problems(shape: "LoadShape") -> list[str]:
    """The arrival, length, trace and worker fields' problems (:mod:`chaos.load.arrivals`, ``lengths``, ``trace``)."""
    from chaos.load import arrivals, lengths, trace

    out = arrivals.check(shape.arrival, shape.burstiness, shape.stages)
    out += lengths.check(shape.prompt_len, "prompt_len") + lengths.check(shape.output_len, "output_len")
    if shape.clip not in lengths.CLIP:
        out.append(f"clip must be prompt or output, got {shape.clip!r}")
    if not isinstance(shape.max_model_len, int) or shape.max_model_len - shape.template_tokens < 2:
        out.append(f"max_model_len must leave at least 2 tokens beyond template_tokens, got "
                   f"{shape.max_model_len} and {shape.template_tokens}")
    out += trace.check(shape.trace, shape.trace_speed, shape.trace_end)
    if shape.trace is not None:
        clash = [k for k in ("stages", "prompt_len", "output_len") if getattr(shape, k)]
        if clash or shape.mode != "open":
            out.append(f"trace: replaces the arrivals and lengths; remove {', '.join(clash) or 'mode closed'}")
    if shape.mode == "closed":  # a closed loop sends when a worker is free: no schedule to shape
        shaped = [k for k, v in (("stages", shape.stages), ("arrival", shape.arrival != "poisson"),
                                 ("burstiness", shape.burstiness != 1.0)) if v]
        if shaped:
            out.append(f"mode closed: {', '.join(shaped)} shape an open loop's arrivals; remove them or use mode open")
    elif shape.burstiness != 1.0 and shape.arrival != "gamma":
        out.append(f"burstiness shapes gamma arrivals only; arrival is {shape.arrival!r}")
    if shape.utilization is not None:
        out += _utilization_problems(shape)
    out += _prompt_set_problems(shape)
    if not isinstance(shape.workers, int) or not 1 <= shape.workers <= 64:
        out.append(f"workers must be 1..64, got {shape.workers!r}")
    elif shape.mode == "closed" and shape.concurrency < shape.workers:
        out.append(f"closed loop: concurrency ({shape.concurrency}) must be at least workers ({shape.workers})")
    return out


def _prompt_set_problems(shape: "LoadShape") -> list[str]:
    """``prompt_set`` draws prompts as the plan does (not a trace's, not sessions'); ``constraint`` is well formed."""
    from chaos.load import golden

    out = golden.problems(shape.constraint)
    n = shape.prompt_set
    if n is None:
        return out
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= 10_000:
        return out + [f"prompt_set must be 1..10000 or null, got {n!r}"]
    clash = [k for k in ("trace", "sessions") if getattr(shape, k) is not None]
    if clash:
        out.append(f"prompt_set: cycles through prompts the plan draws; {clash[0]} brings its own: remove one")
    return out


def _utilization_problems(shape: "LoadShape") -> list[str]:
    """``utilization`` sets an open loop's one rate: not with a closed loop, a trace or stages."""
    u = shape.utilization
    if isinstance(u, bool) or not isinstance(u, (int, float)) or not 0 < u <= 1:
        return [f"utilization must be in (0, 1], got {u!r}"]
    clash = [what for what, on in (("mode closed", shape.mode == "closed"), ("trace", shape.trace is not None),
                                   ("stages", bool(shape.stages))) if on]
    if clash:
        return [f"utilization: sets an open loop's rate as a share of the measured capacity, not with "
                f"{' or '.join(clash)}: remove one of them"]
    return []


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
    messages: list[dict[str, str]] | None = None  # a session's turn: the conversation so far (chaos.load.sessions)
    session: int | None = None
    turn: int | None = None
    prefix_group: int | None = None
    prompt_len: int | None = None  # prompt tokens planned (None: prompt_words, not counted in tokens)
    clipped: str | None = None  # what max_model_len cut: prompt, output, prompt+output


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
    Stops at ``max_requests`` or at the first offset beyond ``duration_s`` (or the end of the
    stages, or of a trace that does not loop). Arrivals (:mod:`chaos.load.arrivals`) draw from
    ``seed``, prompts and lengths from ``seed + 1``; a trace (:mod:`chaos.load.trace`) gives both, and
    a trace row whose first prefix block (``hash_ids[0]``) another row shares is a prefix-sharing request:
    its ``prefix_group`` is that block's id (shared ids are shared prompt text, so the prefix cache can
    reuse them: the warm-up figure counts these requests as it counts sessions' turns). With ``prompt_set``, that
    many (prompt, max_tokens) pairs are drawn first and request i sends the (i mod prompt_set)-th.
    """
    from chaos.load import arrivals, lengths, trace as trace_mod

    prompts = random.Random(shape.seed + 1)
    budget = shape.max_model_len - (shape.template_tokens if shape.route == "chat" else 0)
    rows = None
    if shape.trace is not None:
        loaded = trace_mod.load(shape.trace)
        replay = trace_mod.replay(loaded, shape.trace_speed, shape.trace_end)
        blocks = trace_mod.Prompts(shape.seed, shape.trace_block_tokens)
        rows = replay
        shared = trace_mod.shared_first_blocks(loaded)
    elif shape.mode == "open":
        times = arrivals.offsets(shape.arrival, shape.rate, shape.duration_s, shape.seed, shape.burstiness,
                                 shape.stages)
    p_len = lengths.sampler(shape.prompt_len, prompts) if shape.prompt_len else None
    o_len = lengths.sampler(shape.output_len, prompts) if shape.output_len else None

    def draw() -> tuple[int | None, str, int, str | None]:
        """One request's (prompt tokens planned, prompt, max_tokens, what the context cut)."""
        if p_len is None:
            n, text = None, prompt_text(prompts, *shape.prompt_words)
        else:
            n, text = p_len(), None
        out = o_len() if o_len is not None else prompts.randint(*shape.max_tokens)
        n, out, cut = lengths.clip(n, out, budget, shape.clip)
        return n, text if text is not None else lengths.token_prompt(prompts, n), out, cut

    # a prompt set: drawn once, each request the next of it in turn (chaos.load.golden: each seen in the warm-up)
    pool = [draw() for _ in range(shape.prompt_set)] if shape.prompt_set and rows is None else None
    for i in range(shape.max_requests):
        if rows is not None:
            t, row = next(rows, (None, None))
            if t is None or t >= shape.duration_s:
                return
            n, out, cut = lengths.clip(row.input_length, row.output_length, budget, shape.clip)
            text = blocks.text(row, n, prompts)
            group = row.hash_ids[0] if row.hash_ids and row.hash_ids[0] in shared and n else None
        else:
            t = (next(times, None) if shape.mode == "open" else 0.0)
            if t is None:
                return
            n, text, out, cut = pool[i % len(pool)] if pool else draw()
            group = None
        yield PlannedRequest(id=i, offset_s=t, target=router.pick(), prompt=text, max_tokens=out, prompt_len=n,
                             clipped=cut, prefix_group=group)


def request_body(shape: LoadShape, req: PlannedRequest) -> tuple[str, dict[str, Any]]:
    """(path, JSON body) of the OpenAI-compatible request."""
    body: dict[str, Any] = {"model": shape.model, "max_tokens": req.max_tokens, "stream": shape.stream,
                            "temperature": 0.0}
    if shape.constraint:  # whole-word tokens, greedy: a golden answer per prompt (chaos.load.golden)
        from chaos.load import golden

        body.update(golden.body_fields(shape.constraint))
    if shape.stream:
        body["stream_options"] = {"include_usage": True}
    if shape.route == "chat":
        body["messages"] = req.messages if req.messages is not None else [{"role": "user", "content": req.prompt}]
        return "/v1/chat/completions", body
    body["prompt"] = req.prompt
    return "/v1/completions", body
