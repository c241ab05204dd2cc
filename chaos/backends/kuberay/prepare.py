"""Before any fault, and after a crashed run: the preparation (permissions, leftovers, refusals, dry runs), the heals
(this run's faults, or every leftover of the rig's: ``recover``). Functions over the backend (``b``), its interface
and its parts; the backend's ``prepare``, ``preflight_access``, ``heal``, ``recover_access`` and ``heal_all`` call
them."""

from __future__ import annotations

from chaos.backends import engine_faults
from chaos.backends.kuberay.kube import access as kube_access, marks as km
from chaos.backends.kuberay.common import api_message
from chaos.backends.kuberay.scopes import Reach, Restore
from chaos.base.errors import SetupError


def prepare(b, run_id: str, scope: str, faults: list[dict] | None = None) -> None:
    """Before any fault, in this order (each refusal one line, nothing injected): act under the
    run's id (cordons and helpers carry it); ask the API server whether this context may do every
    verb the faults and their heals need (:func:`preflight_access`); refuse while any object of
    the rig is left on the cluster (a crashed run's: `availproof recover --backend kuberay` removes
    them); refuse a zone or region loss on an autoscaled cluster unless acknowledged
    (:meth:`refuse_autoscaled_zone_loss`); refuse a ``cluster`` upgrade KubeRay would not roll out
    (:meth:`preflight_upgrade`); for a partition ask admission first (a dry-run create of every
    helper or policy), so nothing is half-applied. ``faults``: the experiment's planned faults
    (:func:`chaos.core.plan.faults_of`: scope and arguments of each), which may name more scopes than
    ``scope`` (a second fault) and the variant, zones and methods."""
    b.run_id = run_id
    planned = list(faults or [])
    scopes = ({scope} | {f.get("scope") for f in planned}) - {None}
    preflight_access(b, scopes)
    # inside the Ray pods too (held engine faults' marks) when this run may exec: its scopes' faults need it
    may_exec = any(a.subresource == "exec" for a in kube_access.needed(scopes, b.partition_method))
    left = b.leftovers(in_pods=may_exec)
    stale = [x for x in left if km.expired(x.get("expires"))]
    if stale:  # past their deadline: no live run owns them (a crashed one's), undone here
        b.remove_leftovers(stale)
    left = [x for x in left if not km.expired(x.get("expires"))]
    if left:
        shown = ", ".join(f"{x['kind']} {x['name']} (run {x.get('run_id')})" for x in left[:5])
        raise SetupError(f"the cluster still has {len(left)} object(s) of an earlier run of the rig: {shown}"
                         f"{' ...' if len(left) > 5 else ''}; run `availproof recover --backend kuberay` first")
    reach = sum(b.reaches(scopes, planned), Reach())
    lost = None if reach.every_zone_lost else sorted(reach.lost)  # None: every zone
    zones: set[str] = set()  # where the planned faults take zones out or cut them off: no load pod from the start
    if reach.loses:
        zones |= set(lost if lost is not None else b.zones())
    if reach.cuts:
        zones |= reach.cut or set(b.zones())
    b.load_avoid_zones = sorted(zones)
    if reach.loses:
        b.refuse_autoscaled_zone_loss(lost)
    if reach.cluster_upgrade:
        b.preflight_upgrade("cluster")
    for zone in sorted(reach.cut) or (b.zones() if reach.cuts else []):
        b.preflight_partition(zone)
    if b.load_job is not None:
        b.preflight_load()

def preflight_access(b, scopes) -> list[str]:
    """One SelfSubjectAccessReview per verb and resource the faults of ``scopes`` and their heals call
    (:func:`chaos.backends.kuberay.kube.access.needed`, with this backend's partition method); any denial
    raises one line naming each missing access. Returns what was reviewed (as ``kubectl auth can-i``
    words it)."""
    wanted = kube_access.needed(scopes, b.partition_method, load_in_cluster=b.load_job is not None,
                                autoscalers=not b.allow_autoscaled_zone_loss)
    try:
        missing = kube_access.denied(b.kube.authz, b.namespace, wanted)
    except Exception as e:  # noqa: BLE001 - ApiException: the review itself failed
        status = getattr(e, "status", None)
        if status is None:
            raise
        raise SetupError(f"kube context {b.context}: the permissions check (SelfSubjectAccessReview) failed "
                         f"(HTTP {status}: {api_message(e)})") from None
    if missing:
        raise SetupError(kube_access.refusal(b.context, b.namespace, missing))
    return [a.text(b.namespace) for a in wanted]

def heal(b, faults: list[dict], timeout: float = 300.0) -> dict:
    """Heal what ``faults`` (this run's) broke, and nothing else: what each one's scope restores here
    (:class:`chaos.backends.kuberay.scopes.Restore`: their engines resumed, their zones' partitions
    healed, the nodes cordoned for their zone or region losses uncordoned, an incomplete cluster upgrade
    rolled back, a paused device plugin let back); pods deleted by the other faults are KubeRay's (or the
    kubelet's) to bring back: wait for health."""
    want = sum(b.restores(faults), Restore())
    done: dict[str, list] = {"resumed": [], "healed": [], "uncordoned": []}
    done["resumed"] = b.resume_engine(want.resume)
    for f in want.release:  # what each wedge (garbage, stall) was at the run's end, into the fault (its detail)
        kind = engine_faults.marked_fault(f.get("scope"))
        f[f"{kind}_at_end"] = b.release_engine(list(f.get("pids") or []), kind)
        done.setdefault("released", []).extend(f[f"{kind}_at_end"])
    for f in want.weights:  # restart-fails not restored by its outage: put back where still the fault's
        f["weights_restored"] = b.restore_weights(f)
        done.setdefault("weights", []).append(f["weights_restored"])
    for f in want.devices:  # device-loss not healed by its outage: the marker removed, the cordon lifted, where ours
        from chaos.scopes import device_loss  # below the scopes' package, which loads this backend's access table

        device_loss.heal(b, f)
        done.setdefault("devices", []).append({"device_restored": f["device_restored"], "uncordon": f.get("uncordon")})
    for zone in sorted(want.cuts):
        b.heal_zone(zone)
        done["healed"].append(zone)
    for f in want.watched:  # the faults the watches prove: their finding is written into them at the heal
        if b.domains.zone_loss.watch_of(f.get("zones")) is not None:
            b.domains.zone_loss.adopt_fault(b.domains.zone_loss.watch_of(f.get("zones")), f)
    for f in want.upgrades:  # a cluster upgrade that did not complete is rolled back; one that did keeps no record
        if f.get("complete") is False:
            done.setdefault("rolled_back", []).append(b.roll_back_upgrade(f))
        else:
            b.lifecycle.rollbacks.drop_record(f["record"])
    if want.lost:
        done["uncordoned"] = b.restore_zones(sorted(want.lost))
    for f in want.accelerators:  # the device plugin let back; what the outage left written into the fault
        if "restored" not in f:  # the hold looked at once more and written into the fault
            f["restored"] = b.restore_accelerator(f["target"], fault=f)
        done.setdefault("accelerators", []).append(f["target"])
    b.wait_healthy(timeout=timeout)
    return done

def recover_access(b) -> list[str]:
    """``recover``'s permissions (:data:`chaos.backends.kuberay.kube.access.RECOVER`), one SelfSubjectAccessReview
    each: one line per verb it may not do (what then stays undone); [] when it may do them all. Not a refusal:
    recover does what it may, and reports every removal that failed."""
    try:
        missing = kube_access.denied(b.kube.authz, b.namespace, list(kube_access.RECOVER))
    except Exception as e:  # noqa: BLE001 - ApiException: the review itself failed
        status = getattr(e, "status", None)
        if status is None:
            raise
        return [f"recover could not check its permissions (SelfSubjectAccessReview: HTTP {status}: "
                f"{api_message(e)})"]
    return [f"recover may not {a.text(b.namespace)} [{a.why}]" + (f" ({why})" if why else "")
            for a, why in missing]

def heal_all(b, timeout: float = 300.0) -> dict:
    """``availproof recover``: say what this context may not do (:func:`recover_access`, ``cannot``: one line
    per missing verb), resume the engines this backend stopped, then remove every leftover of the rig's,
    whatever run left it (:meth:`remove_leftovers`: partitions, labels, cordons, paused device plugins, an
    upgrade's rollback, and in each Ray pod any run's held engine faults: every mark
    ``/tmp/availproof-engine-{wedge,garbage,stall,slow}-PID`` removed and a request never taken voided, one exec
    per pod, :mod:`chaos.backends.kuberay.engine_marks`; ``released``: ``pod/pid`` each, with what plugs into
    :data:`chaos.backends.kuberay.leftovers.IN_POD_LEFTOVERS`), past any one that fails: ``failed``, one line each (then no wait for health; the
    command exits non-zero)."""
    done: dict[str, list] = {"cannot": recover_access(b)}
    done["resumed"] = b.resume_engine(list(b.engines.paused))
    for zone in list(b.domains.partitions.cuts):
        b.domains.partitions.close_probe(zone)
    b.domains.zone_loss.stop_watches(None)
    result = b.remove_leftovers(keep_going=True)
    removed = result["removed"]
    done["healed"] = sorted({x["zone"] for x in removed if x["kind"] not in ("Node", "Accelerator") and x["zone"]})
    done["uncordoned"] = [x["name"] for x in removed if x["kind"] == "Node"]
    done["accelerators"] = [x["name"] for x in removed if x["kind"] == "Accelerator"]  # device plugins let back
    done["released"] = [x["name"] for x in removed if x["kind"] == "EngineMark"]  # held engine faults let go
    done["devices"] = [x["name"] for x in removed if x["kind"] == "DeviceLoss"]  # device-loss markers removed
    done["removed"] = removed
    done["failed"] = result["failed"]
    if not done["failed"]:
        b.wait_healthy(timeout=timeout)
    return done
