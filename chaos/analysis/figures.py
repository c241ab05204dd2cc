"""The figure catalogue: one definition of every figure reported per fault (issue 36).

A figure is a number (or a yes/no) in one *plane* of a fault in ``summary.json``: the two
populations of requests (``affected`` and ``service``, :data:`POPULATION` here: one entry serves
both), the service-wide ``failed`` counts, the ``control_plane``, ``capacity`` and ``locality``, a
slow replica's ``straggler`` (``engine-slow``, ``engine-stutter``), the streams' token ``continuity`` (the
service's; the affected population's under ``continuity.affected`` where it differs), a client's ``retries`` (:data:`RETRIES`: an
object in each population, ``load.retry``), and the ``orphans`` a killed or replaced replica's engines would be
(:mod:`chaos.system.orphan_watch`), a ``restart`` that fails (``restart-fails``: :mod:`chaos.analysis.restart`) and a
``device`` that stays bad (``device-loss``: :mod:`chaos.analysis.device`), and the ``kv_pressure`` of a small vLLM KV
cache (``app.kv_cache``: :mod:`chaos.analysis.kv_pressure`).
Its dotted key is ``<plane>.<name>`` (``capacity.time_to_restored_s``,
``service.time_to_steady_state_s``, ``service.retries.peak_amplification``), the key of its reason in the
fault's ``unmeasurable`` map.

Each entry says, once: its unit; where it is computed (``derived_by``, the dotted name of the
function: the derivations stay in :mod:`chaos.analysis` and :mod:`chaos.analysis.planes`; a unit test
resolves every reference); its bound and comparison (:mod:`chaos.core.bounds` builds its table from
here); its label in the report's rows and its column in the suite table (:mod:`chaos.reports`);
and its JSON Schema fragment (a unit test holds ``chaos/schemas/summary.schema.json`` to it).

Adding a figure of the sampled planes takes its entry and its derivation alone: :func:`register` an
entry with ``derive`` (``(t0_ns, window_samples, baseline_samples) -> (value, reason or None)``) and
:func:`chaos.analysis.planes.analyse_fault` computes it into its plane, the report shows it as a row, and its
bound is checked (for an experiment file to state that bound, the experiment schema lists it too:
``experiment-extension.schema.json``). The definitions in words: ``docs/definitions.md``.

This module is data: it imports nothing of the rig, so every part may read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

POPULATION = "population"  # the plane of a figure computed for both populations
RETRIES = "retries"  # a client's retries: an object inside each population (chaos.analysis.retries)
POPULATIONS = ("affected", "service")
SAMPLED_PLANES = ("control_plane", "capacity")  # from the sampler's samples (chaos.analysis.planes)


@dataclass(frozen=True)
class Figure:
    plane: str  # POPULATION, RETRIES, "failed", "control_plane", "capacity", "locality", "straggler", "continuity",
    # "orphans"
    name: str  # the key inside its plane
    unit: str  # "s" (from the fault's injection), "requests", "ratio", "count", "samples", "replicas", "nodes", "bool",
    # "MB"
    label: str  # its row in the report
    derived_by: str  # the function that computes it (dotted name)
    schema: dict[str, Any]  # its value's JSON Schema fragment in summary.schema.json
    column: str | None = None  # its column in the suite table and the overview, when not its label
    short: str | None = None  # its name on the timeline
    bound: str | None = None  # the experiment's bound on it (chaos.core.bounds)
    comparison: str | None = None  # "<=", ">=", "=="
    bound_recovery: bool = False  # its bound does not apply to a fault whose window a later fault cut
    row: bool = False  # a row of its own in the report's figure (population) or plane table
    failure: bool = False  # exists only because something failed: a null means "nothing failed"
    window_cut: bool = False  # a null in a window a later fault cut reads "never in its window"
    read: Callable[[dict, dict], Any] | None = None  # how its bound reads it from (fault, population), if not by key
    derive: Callable[..., tuple[Any, str | None]] | None = None  # a registered figure's own derivation

    @property
    def heading(self) -> str:
        """Its column in the suite table and the overview (a population's: prefixed there)."""
        return self.column or self.label

    def key(self, population: str | None = None) -> str:
        """Its dotted key in the summary and the ``unmeasurable`` map (``population`` for a population's)."""
        if self.plane == RETRIES:
            return f"{population or '{pop}'}.{RETRIES}.{self.name}"
        plane = (population or "{pop}") if self.plane == POPULATION else self.plane
        return f"{plane}.{self.name}"

    def value(self, fault: dict[str, Any], population: str | None = None) -> Any:
        """Its value in one fault of a summary; None when the plane is missing (a summary of an older format)."""
        plane = fault.get(population if self.plane in (POPULATION, RETRIES) else self.plane)
        if self.plane == RETRIES:
            plane = plane.get(RETRIES) if isinstance(plane, dict) else None
        return plane.get(self.name) if isinstance(plane, dict) else None

    def bound_value(self, fault: dict[str, Any], population: dict[str, Any]) -> Any:
        """What its bound reads: the population's value, or the plane's (indexed: a missing one is an error)."""
        if self.read:
            return self.read(fault, population)
        if self.plane == RETRIES:  # null when the run had no retry policy
            return (population.get(RETRIES) or {}).get(self.name)
        return population[self.name] if self.plane == POPULATION else fault[self.plane][self.name]


def _cross_region_share(f: dict, p: dict) -> Any:
    """The larger share of requests served outside the client's region, during the fault and after
    it (``locality``, chaos.analysis); None when neither phase could tell."""
    phases = [(f.get("locality") or {}).get(k) or {} for k in ("during", "after")]
    shares = [ph.get("cross_region_share") for ph in phases if ph.get("cross_region_share") is not None]
    return max(shares) if shares else None


def _orphans_freed(f: dict, p: dict) -> Any:
    """Seconds from the replica's end to its last engine's (``orphans``); None when not measured or never freed."""
    return (f.get("orphans") or {}).get("seconds_until_freed")


def _crashloop(f: dict, p: dict) -> Any:
    """How long replacements kept failing on a node whose device stays bad (``device``); None when not measured."""
    return (f.get("device") or {}).get("crashloop_s")


NUMBER = {"type": ["number", "null"]}
COUNT = {"type": ["integer", "null"]}
NONNEG = {"type": "integer", "minimum": 0}
POP_FN = "chaos.analysis.analyse_fault"
CP_FN, CAP_FN = "chaos.analysis.planes.control_plane", "chaos.analysis.planes.capacity"


def _s(description: str) -> dict[str, Any]:
    return {"type": ["number", "null"], "description": description}


CATALOGUE: dict[str, Figure] = {}  # by key (a population's: "population.<name>"), in report order


def register(fig: Figure) -> Figure:
    """Add a figure to the catalogue (the shipped ones below; a new one from its own module or a test)."""
    key = fig.key(POPULATION)
    if key in CATALOGUE:
        raise ValueError(f"figure {key} is already in the catalogue")
    if fig.derive and fig.plane not in SAMPLED_PLANES:
        raise ValueError(f"figure {key}: only the sampled planes' figures ({', '.join(SAMPLED_PLANES)}) are derived "
                         "by the catalogue's derive; the others are computed in chaos.analysis")
    CATALOGUE[key] = fig
    return fig


def unregister(fig: Figure) -> None:
    CATALOGUE.pop(fig.key(POPULATION), None)


def get(key: str) -> Figure | None:
    """The figure of a dotted key (``affected.time_to_detect_s`` is the population's), or None."""
    plane, _, name = key.partition(".")
    return CATALOGUE.get(f"{POPULATION if plane in POPULATIONS else plane}.{name}")


def of(plane: str) -> list[Figure]:
    """A plane's figures, in catalogue order (``affected`` or ``service`` give the population's)."""
    plane = POPULATION if plane in POPULATIONS else plane
    return [f for f in CATALOGUE.values() if f.plane == plane]


def bounded() -> dict[str, Figure]:
    """Bound name -> its figure."""
    return {f.bound: f for f in CATALOGUE.values() if f.bound}


_ = register  # the shipped figures, in the order the report shows them
# ---------------------------------------------------------------- the populations (chaos.analysis)
REQUESTS = _(Figure(POPULATION, "requests", "requests", "requests", POP_FN, {
    **NONNEG, "description": "sent in the analysis window, plus in flight at the injection"}))
IN_FLIGHT = _(Figure(POPULATION, "in_flight_at_injection", "requests", "in flight at injection", POP_FN, NONNEG))
FAILED = _(Figure(POPULATION, "failed_total", "requests", "failed", POP_FN, NONNEG,
                  bound="max_failed_requests", comparison="<="))
FAILED_MID_STREAM = _(Figure(POPULATION, "failed_mid_stream", "requests", "failed mid-stream", POP_FN, NONNEG,
                             bound="max_failed_mid_stream", comparison="<="))
FAILED_RATIO = _(Figure(POPULATION, "failed_ratio", "ratio", "failed ratio", POP_FN, {"type": ["number", "null"]},
                        bound="max_failed_ratio", comparison="<="))
IMPACT = _(Figure(POPULATION, "time_to_impact_s", "s", "time to impact s", POP_FN, _s(
    "send instant of the first failed request (clamped to the injection when in flight at it)"), row=True,
    failure=True))
DETECT = _(Figure(POPULATION, "time_to_detect_s", "s", "time to detect s", POP_FN, _s(
    "instant a client observed the first failure: send + its end-to-end time"), short="detect", row=True,
    failure=True))
FIRST_SUCCESS = _(Figure(POPULATION, "time_to_first_success_s", "s", "time to first success s", POP_FN, _s(
    "send instant of the first success sent after the impact"), short="first success", row=True, failure=True,
    bound="max_time_to_first_success_s", comparison="<=", bound_recovery=True))
FIRST_RECOVERY = _(Figure(POPULATION, "time_to_first_recovery_s", "s", "time to first recovery s", POP_FN, _s(
    "start of the first in-bound steady-state window after the onset"), row=True, window_cut=True))
STEADY_STATE = _(Figure(POPULATION, "time_to_steady_state_s", "s", "time to steady state s", POP_FN, _s(
    "start of the last stretch of in-bound windows holding to the window's end"), short="steady state", row=True,
    window_cut=True, bound="max_time_to_steady_state_s", comparison="<=", bound_recovery=True))
LAST_FAILURE = _(Figure(POPULATION, "time_to_last_failure_s", "s", "time to last failure s", POP_FN, _s(
    "instant the last failure was observed"), row=True, failure=True))
RELAPSES = _(Figure(POPULATION, "relapses", "count", "relapses", POP_FN, {
    **COUNT, "minimum": 0, "description": "null: no window could be judged (see unmeasurable)"}, row=True,
    bound="max_relapses", comparison="<=", bound_recovery=True))
DISRUPTED = _(Figure(POPULATION, "disrupted", "bool", "disrupted", POP_FN, {"type": "boolean"}, row=True))
RECOVERED = _(Figure(POPULATION, "recovered", "bool", "recovered", POP_FN, {
    "type": ["boolean", "null"], "description": "null: unmeasurable (see unmeasurable)"}, row=True, window_cut=True,
    bound="must_recover", comparison="==", bound_recovery=True))
# ---------------------------------------------------------------- the service's failures (chaos.analysis)
_(Figure("failed", "total", "requests", "failed", POP_FN, {"type": "integer"}))
_(Figure("failed", "in_flight_at_injection", "requests", "in flight at injection", POP_FN, {"type": "integer"}))
_(Figure("failed", "before_first_token", "requests", "failed before the first token", POP_FN, {"type": "integer"}))
_(Figure("failed", "mid_stream", "requests", "mid-stream", POP_FN, {"type": "integer"}))
UNAFFECTED_ZONES = _(Figure("failed", "unaffected_zones", "requests", "unaffected zones", POP_FN, COUNT,
                            column="unaffected zones failed", bound="max_failed_unaffected_zones", comparison="<="))
# ---------------------------------------------------------------- the control plane (chaos.analysis.planes)
CP_LOSS = _(Figure("control_plane", "time_to_loss_s", "s", "time to loss s", CP_FN, NUMBER, row=True))
CP_RESTORED = _(Figure("control_plane", "time_to_restored_s", "s", "time to restored s", CP_FN, NUMBER,
                       short="control plane", row=True, window_cut=True))
CP_OUTAGE = _(Figure("control_plane", "outage_s", "s", "outage s", CP_FN, NUMBER, column="control-plane outage s",
                     row=True, window_cut=True, bound="max_control_plane_outage_s", comparison="<=",
                     bound_recovery=True))
_(Figure("control_plane", "losses", "count", "losses", CP_FN, {
    **COUNT, "description": "separate losses (2 or more consecutive samples not up)"}))
_(Figure("control_plane", "blips", "count", "blips", CP_FN, {
    **COUNT, "description": "lone samples not up, outside any loss (not an outage)"}))
CP_GCS_LATENCY = _(Figure("control_plane", "max_gcs_latency_s", "s", "max GCS health latency s", CP_FN, NUMBER))
CP_SAMPLES = _(Figure("control_plane", "samples", "samples", "samples in the window", CP_FN, {"type": "integer"}))
CP_RESOLUTION = _(Figure("control_plane", "resolution_s", "s", "resolution s (sampling period)",
                         "chaos.analysis.planes.resolution", NUMBER))
# ---------------------------------------------------------------- capacity (chaos.analysis.planes)
CAP_TARGET = _(Figure("capacity", "target_replicas", "replicas", "target replicas", CAP_FN, COUNT, row=True))
CAP_MIN = _(Figure("capacity", "min_replicas", "replicas", "min replicas", CAP_FN, COUNT, row=True))
CAP_MIN_RATIO = _(Figure("capacity", "min_ratio", "ratio", "min ratio (min / target)", CAP_FN, NUMBER, row=True,
                         bound="min_capacity_ratio", comparison=">=", bound_recovery=True))
CAP_LOST = _(Figure("capacity", "time_to_lost_s", "s", "time to lost s", CAP_FN, NUMBER, row=True,
                     bound="max_time_to_capacity_lost_s", comparison="<=", bound_recovery=True))
CAP_RESTORED = _(Figure("capacity", "time_to_restored_s", "s", "time to restored s", CAP_FN, NUMBER,
                        column="capacity restored s", short="capacity", row=True, window_cut=True,
                        bound="max_time_to_capacity_restored_s", comparison="<=", bound_recovery=True))
CAP_NODES = _(Figure("capacity", "nodes_min_alive", "nodes", "nodes min alive", CAP_FN, COUNT))
# ---------------------------------------------------------------- who served (chaos.analysis.locality)
CROSS_REGION = _(Figure("locality", "cross_region_share", "ratio", "share served outside the client's region",
                        "chaos.analysis.locality", {"type": ["number", "null"], "minimum": 0, "maximum": 1},
                        bound="max_cross_region_share", comparison="<=", read=_cross_region_share))
# ---------------------------------------------------------------- a straggler (chaos.analysis.slow_replica): engine-slow, -stutter
ST_FN, SHARE = "chaos.analysis.straggler", {"type": ["number", "null"], "minimum": 0, "maximum": 1}
ST_REQUESTS = _(Figure("straggler", "requests", "requests", "requests during the fault that named their replica", ST_FN,
                       {**COUNT, "minimum": 0}, row=True))
ST_REPLICAS = _(Figure("straggler", "replicas", "replicas", "replicas serving (the slow one included)", ST_FN,
                       {**COUNT, "minimum": 0}, row=True))
ST_SLOW_REQUESTS = _(Figure("straggler", "slow_requests", "requests", "served by the slow replica", ST_FN,
                            {**COUNT, "minimum": 0}, row=True))
ST_SHARE = _(Figure("straggler", "share", "ratio", "share served by the slow replica", ST_FN, SHARE, row=True))
ST_FAIR = _(Figure("straggler", "fair_share", "ratio", "fair share (1 / replicas serving)", ST_FN, SHARE, row=True))
ST_SHARE_OF_FAIR = _(Figure("straggler", "share_of_fair", "ratio", "share / fair share", ST_FN,
                            {"type": ["number", "null"], "minimum": 0}, row=True))
ST_LATENCIES = tuple(_(Figure("straggler", f"{side}_p{q}_{what}_s", "s", f"{who} p{q} {what.upper()} s", ST_FN, NUMBER,
                              row=True))
                     for what in ("ttft", "itl") for q in (50, 95)
                     for side, who in (("slow", "slow replica"), ("others", "other replicas")))
# ---------------------------------------------------------------- a client's retries (chaos.analysis.retries)
RT_FN, RATIO1 = "chaos.analysis.retries.population_retries", {"type": ["number", "null"], "minimum": 1}
RT_LOGICAL = _(Figure(RETRIES, "logical_requests", "requests", "logical requests", RT_FN, {
    "type": "integer", "minimum": 0, "description": "first sent in the analysis window, or in flight at injection"}))
RT_FAILED = _(Figure(RETRIES, "logical_failed", "requests", "logical requests failed (what users saw)", RT_FN,
                     {"type": "integer", "minimum": 0, "description": "none of their attempts succeeded"}))
RT_FAILED_RATIO = _(Figure(RETRIES, "logical_failed_ratio", "ratio", "logical failed ratio", RT_FN,
                           {"type": ["number", "null"], "minimum": 0, "maximum": 1}))
RT_RETRIED = _(Figure(RETRIES, "retried", "requests", "logical requests sent more than once", RT_FN,
                      {"type": "integer", "minimum": 0}))
RT_ATTEMPTS = _(Figure(RETRIES, "attempts", "count", "attempts sent", RT_FN, {"type": "integer", "minimum": 0}))
RT_MEAN = _(Figure(RETRIES, "attempts_per_request_mean", "count", "attempts per logical request, mean", RT_FN,
                   RATIO1))
RT_P99 = _(Figure(RETRIES, "attempts_per_request_p99", "count", "attempts per logical request, p99", RT_FN,
                  {"type": ["integer", "null"], "minimum": 1}))
RT_MAX = _(Figure(RETRIES, "attempts_per_request_max", "count", "attempts per logical request, max", RT_FN,
                  {"type": ["integer", "null"], "minimum": 1}))
RT_AMPLIFICATION = _(Figure(RETRIES, "amplification", "ratio", "amplification (attempts / logical requests)",
                            RT_FN, RATIO1))
RT_PROMPT_AMPLIFICATION = _(Figure(RETRIES, "prompt_amplification", "ratio",
                                   "prompt amplification (prompt tokens sent / asked)", RT_FN, RATIO1))
RT_PEAK = _(Figure(RETRIES, "peak_amplification", "ratio", "peak amplification, injection to recovery", RT_FN, {
    "type": ["number", "null"], "minimum": 0, "description": "the largest amplification of a timeline bin from the "
    "injection to recovery that started at least min_requests logical requests; null with its reason"},
    bound="max_amplification", comparison="<="))
RT_PEAK_AT = _(Figure(RETRIES, "peak_at_s", "s", "peak amplification at s", RT_FN, NUMBER))
RT_BIN = _(Figure(RETRIES, "bin_s", "s", "timeline bin s", RT_FN, {"type": "number", "exclusiveMinimum": 0}))
# ---------------------------------------------------------------- token continuity (chaos.analysis.continuity)
CT_FN, CT_COUNT = "chaos.analysis.token_continuity", {**COUNT, "minimum": 0}
CONTINUITY = tuple(_(Figure("continuity", name, unit, label, CT_FN, schema)) for name, unit, label, schema in (
    ("streams", "requests", "streams", NONNEG),
    ("streams_checked", "requests", "streams whose token order was checked", CT_COUNT),
    ("tokens_lost", "count", "tokens lost (indices never received)", CT_COUNT),
    ("tokens_duplicated", "count", "tokens duplicated (an index received again)", CT_COUNT),
    ("tokens_out_of_order", "count", "tokens out of order", CT_COUNT),
    ("streams_checked_corrupted", "requests", "streams checked for corruption", CT_COUNT),
    ("tokens_corrupted", "count", "tokens corrupted (not the answer's)", CT_COUNT),
    ("streams_migrated", "requests", "streams migrated", CT_COUNT),
    ("migrations", "count", "migrations", CT_COUNT),
    ("refused", "requests", "streams refused migration", CT_COUNT),
    ("migration_gap_p50_ms", "ms", "migration gap p50 ms", NUMBER),
    ("migration_gap_p99_ms", "ms", "migration gap p99 ms", NUMBER)))
# ---------------------------------------------------------------- orphaned engines (chaos.system.orphan_watch)
OR_FN = "chaos.system.orphan_watch.outcome"
ORPHANS_NOT_APPLICABLE = ("not_replaced", "no_engines")  # its statuses on which max_orphan_s does not apply
ORPHANS_FREED = _(Figure("orphans", "seconds_until_freed", "s", "engines gone s after their replica", OR_FN, _s(
    "from the first look that found the killed or replaced replica's process gone to the first that found its last "
    "engine gone (0: gone before it); null: not measured (see unmeasurable) or an engine left at the bound"),
    column="orphans freed s", row=True, bound="max_orphan_s", comparison="<=", read=_orphans_freed))
ORPHANS_RSS = _(Figure("orphans", "rss_mb_left", "MB", "resident MB of the engines left", OR_FN, {
    "type": ["number", "null"], "minimum": 0}, row=True))
ORPHANS_REPLICA = _(Figure("orphans", "replica_gone_s", "s", "replica's process gone s", OR_FN, NUMBER, row=True))
# ---------------------------------------------------------------- a restart that fails (chaos.analysis.restart)
RS_FN = "chaos.analysis.restart.restart"
RS_FAILED = _(Figure("restart", "failed_starts", "count", "starts failed (seen STARTING, never RUNNING)", RS_FN, {
    **COUNT, "minimum": 0, "description": "replicas of the killed one's deployment seen STARTING and gone without being "
    "seen RUNNING (a lower bound: a start that failed between two samples is not seen); null with its reason"},
    column="failed starts", row=True))
RS_UNHEALTHY = _(Figure("restart", "went_unhealthy", "bool", "application UNHEALTHY or DEPLOY_FAILED", RS_FN, {
    "type": ["boolean", "null"]}, row=True))
RS_OTHERS = _(Figure("restart", "others_kept_serving", "bool", "the other replicas kept RUNNING until the restore", RS_FN,
                     {"type": ["boolean", "null"]}, row=True))
RS_RESTORED = _(Figure("restart", "weights_restored_s", "s", "weights restored s", RS_FN, NUMBER, row=True))
RS_FIRST = _(Figure("restart", "first_success_s", "s", "first replacement RUNNING s", RS_FN, NUMBER, row=True))
RS_TTFS = _(Figure("restart", "time_to_first_success_s", "s", "time to first success after the restore s", RS_FN, _s(
    "from the weights' restore to the first sample with a new replica RUNNING; null with its reason (never restored, "
    "never RUNNING after it, or RUNNING before it)"), column="restart first success s", row=True))
RS_RESOLUTION = _(Figure("restart", "resolution_s", "s", "resolution s (sampling period)", RS_FN, NUMBER))
# ---------------------------------------------------------------- a device that stays bad (chaos.analysis.device)
DV_FN = "chaos.analysis.device.device"
DV_FAILED = _(Figure("device", "failed_starts", "count", "starts failed on the bad node", DV_FN, {
    **COUNT, "minimum": 0, "description": "replacements placed on the bad node and gone without being seen RUNNING (a "
    "lower bound: a start that failed between two looks is not seen); null with its reason"},
    column="device failed starts", row=True))
DV_HEALTHY = _(Figure("device", "time_to_healthy_replica_s", "s", "time to a healthy replica s", DV_FN, _s(
    "from the injection to the first request a replacement answered from a healthy node (off the bad node, or on it "
    "after the device's restore); null with its reason"), column="healthy replica s", row=True))
DV_MOVED = _(Figure("device", "moved_off_bad_node", "bool", "Serve placed a replacement off the bad node by itself",
                    DV_FN, {"type": ["boolean", "null"]}, row=True))
DV_CRASHLOOP = _(Figure("device", "crashloop_s", "s", "crash loop on the bad node s", DV_FN, _s(
    "how long replacements kept failing (or hanging) on the bad node: 0 without one, else until a healthy replica "
    "answered, or the whole window when none did (crashloop_ongoing); null with its reason"),
    column="crash loop s", row=True, bound="max_device_crashloop_s", comparison="<=", read=_crashloop))
DV_ONGOING = _(Figure("device", "crashloop_ongoing", "bool", "crash loop still going at the window's end", DV_FN,
                      {"type": ["boolean", "null"]}, row=True))
DV_CORDONED = _(Figure("device", "cordoned_s", "s", "bad node cordoned by the remedy s", DV_FN, NUMBER, row=True))
DV_RESTORED = _(Figure("device", "device_restored_s", "s", "device restored s", DV_FN, NUMBER, row=True))
DV_RECORDS = _(Figure("device", "engine_failures", "count", "engines' records of the lost device", DV_FN,
                      {"type": "integer", "minimum": 0}, row=True))
DV_RESOLUTION = _(Figure("device", "resolution_s", "s", "resolution s (the watch's period)", DV_FN, NUMBER))
# ---------------------------------------------------------------- KV pressure (chaos.analysis.kv_pressure)
KV_FN = "chaos.analysis.kv_pressure.kv_pressure"
KV_LATENCY = {"type": ["number", "null"], "minimum": 0}
KV_PREEMPTIONS = _(Figure("kv_pressure", "preemptions", "count", "engine preemptions in the window", KV_FN, {
    **COUNT, "minimum": 0, "description": "the engines' preemptions from the injection to the window's end: the sum of "
    "each series' increases (a counter that started again, or a replacement's new series, counts from 0; a lower "
    "bound: what a killed engine counted after Ray's last export is not read); null with its reason when no sample in "
    "the window read a counter"}, column="preemptions", row=True))
KV_BEFORE = _(Figure("kv_pressure", "preemptions_before", "count", "engine preemptions before the injection", KV_FN, {
    **COUNT, "minimum": 0, "description": "the same from the first measured request to the injection: the cache's "
    "pressure without the fault"}, row=True))
KV_REQUESTS = _(Figure("kv_pressure", "requests", "requests", "requests under KV pressure", KV_FN, NONNEG, row=True))
KV_FAILED = _(Figure("kv_pressure", "failed", "requests", "requests failed under KV pressure", KV_FN, NONNEG,
                     column="KV pressure failed", row=True))
KV_TTFT50, KV_TTFT99, KV_ITL50, KV_ITL99 = (
    _(Figure("kv_pressure", name, "s", label, KV_FN, KV_LATENCY, row=True)) for name, label in (
        ("ttft_p50_s", "TTFT p50 s under KV pressure"), ("ttft_p99_s", "TTFT p99 s under KV pressure"),
        ("itl_p50_s", "mean ITL p50 s under KV pressure"), ("itl_p99_s", "mean ITL p99 s under KV pressure")))
KV_RESOLUTION = _(Figure("kv_pressure", "resolution_s", "s", "resolution s (the counters' reads)", KV_FN, NUMBER))
del _

# every plane back: the instant the recovery window may settle at (chaos.core.settle) and an event's span (chaos.claim)
RECOVERY_INSTANTS = (STEADY_STATE, CP_RESTORED, CAP_RESTORED)


def recovery_instants(fault: dict[str, Any], populations: tuple[str, ...] = POPULATIONS) -> list[Any]:
    """The instants every plane was back at, of one fault: each population's steady state, then the
    sampled planes' restore (None where one is not back, or its plane is missing)."""
    out = []
    for fig in RECOVERY_INSTANTS:
        out += [fig.value(fault, p) for p in populations] if fig.plane == POPULATION else [fig.value(fault)]
    return out
