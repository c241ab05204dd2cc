"""The report's rows of a fault's other planes (:mod:`chaos.analysis.planes`): control plane and capacity, what it
replaced, what the balancer did, who served, and a straggler's share and latency."""

from __future__ import annotations

from typing import Any

from chaos.analysis import figures as F
from chaos import scopes
from chaos.reports.cells import fmt, plane_figure


PLANE_COLUMNS = ("plane", "figure", "value")
CONTROL_PLANE_LABELS = {f.name: f.label for f in (F.CP_LOSS, F.CP_RESTORED, F.CP_OUTAGE, F.CP_GCS_LATENCY,
                                                   F.CP_SAMPLES, F.CP_RESOLUTION)}
CAPACITY_LABELS = {f.name: f.label for f in (F.CAP_TARGET, F.CAP_MIN, F.CAP_MIN_RATIO, F.CAP_LOST, F.CAP_RESTORED,
                                             F.CAP_NODES)}
CAPACITY_LABELS.update(target="target placement", nodes_min_alive_per_zone="nodes min alive per zone")


def _per_zone(d: dict[str, Any]) -> str:
    return ", ".join(f"{z} {n}" for z, n in sorted(d.items())) or "none"


def placement_text(target: dict[str, dict[str, int]]) -> str:
    """RUNNING replicas per deployment and zone: ``StreamTarget: zone-a 1, zone-b 1; Ingress: zone-a 1``."""
    return "; ".join(f"{dep}: {_per_zone(zones)}" for dep, zones in sorted(target.items())) or "none"


def _plane_note(f: dict[str, Any], key: str) -> str | None:
    """The reason listed for ``key`` in the fault's unmeasurable map, as a cell."""
    why = (f.get("unmeasurable") or {}).get(key)
    return f"unmeasurable: {why}" if why else None


def plane_rows(f: dict[str, Any], front: dict[str, Any] | None = None) -> list[list[str]]:
    """The fault's control plane and capacity (:mod:`chaos.analysis.planes`), one row per figure, every number
    as the summary has it; a null by the rules of :func:`chaos.reports.cells.plane_figure`."""
    rows: list[list[str]] = []
    cp, cap = f.get("control_plane"), f.get("capacity")
    if not isinstance(cp, dict) or not isinstance(cap, dict):
        why = plane_figure(f, F.CP_OUTAGE.plane, F.CP_OUTAGE.name, reasons=True)
        return [["control plane", "all", why], ["capacity", "all", why]]
    for fig in F.of("control_plane"):  # the catalogue's row figures, then the others
        if fig.row:
            rows.append(["control plane", fig.label, plane_figure(f, fig.plane, fig.name, True)])
    if cp.get("losses") is not None:  # format-2 runs analysed before losses and blips were: not shown
        rows.append(["control plane", "losses (2+ samples not up in a row) / blips (a lone one)",
                     f"{cp['losses']} / {cp['blips']}"])
    lat = cp.get("max_gcs_latency_s")
    rows.append(["control plane", CONTROL_PLANE_LABELS["max_gcs_latency_s"],
                 fmt(lat) if lat is not None else (_plane_note(f, "control_plane.max_gcs_latency_s")
                                                    or _plane_note(f, "control_plane.time_to_loss_s")
                                                    or "n/a (the GCS answered no sample in the window)")])
    rows.append(["control plane", CONTROL_PLANE_LABELS["samples"], str(cp.get("samples"))])
    res = cp.get("resolution_s")
    rows.append(["control plane", CONTROL_PLANE_LABELS["resolution_s"],
                 fmt(res) if res is not None else "n/a (fewer than two samples in the window)"])
    for fig in F.of("capacity"):
        if not fig.row:
            continue
        text = plane_figure(f, fig.plane, fig.name, True)
        if fig is F.CAP_MIN_RATIO and cap.get(fig.name) is None and text == "never":
            text = "n/a (the target has no replica)"
        rows.append(["capacity", fig.label, text])
        if fig is F.CAP_TARGET:  # what the target is, beside its count
            target = cap.get("target")
            rows.append(["capacity", CAPACITY_LABELS["target"],
                         placement_text(target) if isinstance(target, dict)
                         else (_plane_note(f, F.CAP_TARGET.key()) or "-")])
    nodes = cap.get("nodes_min_alive")
    rows.append(["capacity", CAPACITY_LABELS["nodes_min_alive"],
                 str(nodes) if nodes is not None else (_plane_note(f, "capacity.nodes_min_alive") or "n/a")])
    per_zone = cap.get("nodes_min_alive_per_zone")
    rows.append(["capacity", CAPACITY_LABELS["nodes_min_alive_per_zone"],
                 _per_zone(per_zone) if isinstance(per_zone, dict)
                 else (_plane_note(f, "capacity.nodes_min_alive") or "n/a")])
    return (rows + replacement_rows(f) + front_door_rows(f, front) + served_rows(f) + straggler_rows(f) + orphan_rows(f)
            + restart_rows(f) + device_rows(f) + kv_pressure_rows(f))


def straggler_rows(f: dict[str, Any]) -> list[list[str]]:
    """A slow replica's share and latency against the others' (:func:`chaos.analysis.straggler`): for the
    faults that made one (engine-slow, engine-stutter), one row per figure of the catalogue's ``straggler`` plane."""
    st = f.get("straggler")
    if not isinstance(st, dict):
        return []
    rows = [["straggler", "slow replica (requests sent from s to s)",
             f"{str(st.get('replica'))[:8]} ({fmt(st.get('from_s'))} to {fmt(st.get('to_s'))})"]]
    for fig in F.of("straggler"):
        v = st.get(fig.name)
        rows.append(["straggler", fig.label, fmt(v) if v is not None else (_plane_note(f, fig.key()) or "n/a")])
    return rows


def restart_rows(f: dict[str, Any]) -> list[list[str]]:
    """A restart that fails (:mod:`chaos.analysis.restart`, restart-fails): one row per figure of the catalogue's
    ``restart`` plane, then the gaps between the starts."""
    rs = f.get("restart")
    if not isinstance(rs, dict):
        return []
    rows = []
    for fig in F.of("restart"):
        v = rs.get(fig.name)
        text = ("yes" if v else "no") if isinstance(v, bool) else fmt(v)
        rows.append(["restart", fig.label, text if v is not None else (_plane_note(f, fig.key()) or "n/a")])
    gaps = rs.get("backoff_s")
    rows.append(["restart", "gaps between starts s", ", ".join(fmt(g) for g in gaps) if gaps is not None
                 else (_plane_note(f, "restart.backoff_s") or "n/a")])
    return rows


def kv_pressure_rows(f: dict[str, Any]) -> list[list[str]]:
    """KV pressure (:mod:`chaos.analysis.kv_pressure`, a small vLLM KV cache): one row per figure of the catalogue's
    ``kv_pressure`` plane."""
    kv = f.get("kv_pressure")
    if not isinstance(kv, dict):
        return []
    return [["kv_pressure", fig.label, fmt(kv.get(fig.name)) if kv.get(fig.name) is not None
             else (_plane_note(f, fig.key()) or "n/a")] for fig in F.of("kv_pressure")]


def device_rows(f: dict[str, Any]) -> list[list[str]]:
    """A device that stays bad (:mod:`chaos.analysis.device`): where each replacement landed, then one row per figure of
    the catalogue's ``device`` plane."""
    dv = f.get("device")
    if not isinstance(dv, dict):
        return []
    where = ", ".join(f"{str(p.get('replica'))[:8]}@{p.get('node')}/{p.get('zone')} {fmt(p.get('t_s'))} s "
                      f"({p.get('outcome')})" for p in dv.get("placements") or []) or "none in the watch"
    rows = [["device", f"bad node {dv.get('node')} ({dv.get('mode')}, XID {dv.get('xid')}, remedy "
                       f"{dv.get('remedy') or 'none'}): replacements placed", where]]
    for fig in F.of("device"):
        v = dv.get(fig.name)
        text = ("yes" if v else "no") if isinstance(v, bool) else fmt(v)
        rows.append(["device", fig.label, text if v is not None else (_plane_note(f, fig.key()) or "n/a")])
    return rows


def orphan_rows(f: dict[str, Any]) -> list[list[str]]:
    """The engines of the replica the fault killed or replaced (:mod:`chaos.system.orphan_watch`): for the faults followed,
    their pids and those left, then one row per figure of the catalogue's ``orphans`` plane."""
    o = f.get("orphans")
    if not isinstance(o, dict):
        return []
    left = o.get("left")
    rows = [["orphans", "engines (pids) / left at the bound",
             f"{o.get('engines')} / {left if left is not None else 'n/a'} ({o.get('status')})"]]
    for fig in F.of("orphans"):
        v = o.get(fig.name)
        rows.append(["orphans", fig.label, fmt(v) if v is not None else (o.get("why") or _plane_note(f, fig.key())
                                                                         or "n/a")])
    return rows


def served_rows(f: dict[str, Any]) -> list[list[str]]:
    """Who served (:func:`chaos.analysis.locality`, :func:`chaos.analysis.warmup`): the shares served outside
    the client's zone and region when some phase could tell, and the warm-up when the load had sessions."""
    rows: list[list[str]] = []
    loc = f.get("locality") or {}

    def share(phase: str, key: str) -> str:
        v = (loc.get(phase) or {}).get(key)
        return "n/a" if v is None else f"{v:.2f}"

    for domain in ("zone", "region"):
        key = f"cross_{domain}_share"
        if any((loc.get(p) or {}).get(key) is not None for p in ("before", "during", "after")):
            rows.append(["who served", f"share served outside the client's {domain}, before / during / after",
                         " / ".join(share(p, key) for p in ("before", "during", "after"))])
    w = f.get("warmup")
    if isinstance(w, dict) and (w.get("requests") or w.get("baseline_p95_ttft_s") is not None):
        base = w.get("baseline_p95_ttft_s")
        rows.append(["warm-up", "p95 TTFT of prefix-sharing requests before the fault s",
                     fmt(base) if base is not None else (_plane_note(f, "warmup.baseline_p95_ttft_s") or "n/a")])
        warm = w.get("time_to_warm_s")
        rows.append(["warm-up", f"time to warm s (the replacement's p95 within {w.get('factor')}x the warm replicas')",
                     fmt(warm) if warm is not None else (_plane_note(f, "warmup.time_to_warm_s") or "never")])
        if w.get("replacements"):
            first = w.get("first_served_by_replacement_s")
            rows.append(["warm-up", "replacement (first served at s)",
                         ", ".join(r[:8] for r in w["replacements"]) + (f" ({fmt(first)})" if first is not None else "")])
    return rows


def replacement_rows(f: dict[str, Any]) -> list[list[str]]:
    """What the fault replaced (:func:`chaos.analysis.planes.replacement`): shown for the scopes whose point is
    replacing replicas (upgrades and drains: ``replacing`` in :mod:`chaos.scopes`), and for any fault
    that replaced something."""
    rp = f.get("replacement")
    if not isinstance(rp, dict) or (not scopes.get(f.get("scope")).replacing and not rp.get("replaced")):
        return []
    why = _plane_note(f, "replacement")
    if why:
        return [["replacement", "all", why]]
    new = ", ".join(f"{x['replica'][:8]} at {fmt(x['running_s'])}" for x in rp["new"]) or "none"
    done = rp.get("time_to_complete_s")
    rows = [["replacement", "replicas serving before", str(rp["replicas_before"])],
            ["replacement", "of them replaced by the window's end", str(rp["replaced"])],
            ["replacement", "new replicas serving (s from injection)", new]]
    if "new_version_first_served" in rp:  # an upgrade's (chaos.analysis.new_version)
        first = rp["new_version_first_served"]
        rows.append(["replacement", f"new version {rp.get('new_version')} first served s",
                     fmt(first["served_s"]) if first else (_plane_note(f, "replacement.new_version_first_served")
                                                           or "never")])
    rows.append(["replacement", "complete (no old replica, as many new, the new version serving) s",
                 fmt(done) if done is not None else (_plane_note(f, "replacement.time_to_complete_s") or "never")])
    return rows


def front_door_rows(f: dict[str, Any], front: dict[str, Any] | None = None) -> list[list[str]]:
    """What the balancer did (:func:`chaos.system.frontdoor.fault_figures`); one row saying why when there are no
    figures. ``front``: the run's environment ``front_door`` (what stood in front)."""
    fd = f.get("front_door")
    front = front or {}
    if fd is None:
        if front.get("kind") == "kubernetes-service":
            return [["front door", "balancer", f"n/a: the Kubernetes Service {front.get('service')} "
                     "(no counters of a balancer of the rig's)"]]
        if front.get("shape") in ("lb", "zonal-lb"):
            return [["front door", "balancer", f"{front['shape']}, but no read of its counters was recorded"]]
        return [["front door", "balancer", "none: the client sent to the proxies itself (front direct)"]]
    why = _plane_note(f, "front_door")
    if why:
        return [["front door", "all", why]]
    downs = "; ".join(f"{x['server']} ({x['zone'] or 'no zone'}) DOWN at {fmt(x['down_s'])}"
                      + (f", UP at {fmt(x['up_s'])}" if x["up_s"] is not None else ", not UP in the window")
                      for x in fd["servers_down"]) or "none"
    detect = fd.get("time_to_detect_s")
    rows = [["front door", "time to detect s (first server marked DOWN)",
             fmt(detect) if detect is not None else (_plane_note(f, "front_door.time_to_detect_s") or "never")],
            ["front door", "servers taken out of rotation", downs]]
    for key, label in (("retried", "extra attempts after a failed one (hidden from the client if they succeeded)"),
                       ("retries", "of them to the same server (wretr)"),
                       ("redispatches", "of them to another server (wredis)"),
                       ("own_5xx", "5xx answered by the balancer itself"), ("server_5xx", "5xx from the proxies"),
                       ("connection_errors", "connection errors to the proxies")):
        v = fd.get(key)
        rows.append(["front door", label, str(v) if v is not None
                     else (_plane_note(f, f"front_door.{key}") or _plane_note(f, "front_door.retries") or "n/a")])
    return rows
