"""Before any fault, and after a crashed run: the preparation (permissions, leftovers, refusals,
dry runs), the leftovers of any run found by label and annotation and removed, the heals."""

from __future__ import annotations

from chaos.backends import kube_access, kube_marks as km
from chaos.backends.kuberay.common import _api_message
from chaos.backends.kuberay.scopes import Restore
from chaos.errors import SetupError


class Preparation:
    """``prepare`` (before any fault), ``leftovers``/``remove_leftovers``, ``heal`` and ``heal_all``."""

    def prepare(self, run_id: str, scope: str, faults: list[dict] | None = None) -> None:
        """Before any fault, in this order (each refusal one line, nothing injected): act under the
        run's id (cordons and helpers carry it); ask the API server whether this context may do every
        verb the faults and their heals need (:meth:`preflight_access`); refuse while any object of
        the rig is left on the cluster (a crashed run's: `availproof recover --backend kuberay` removes
        them); refuse a zone or region loss on an autoscaled cluster unless acknowledged
        (:meth:`refuse_autoscaled_zone_loss`); refuse a ``cluster`` upgrade KubeRay would not roll out
        (:meth:`preflight_upgrade`); for a partition ask admission first (a dry-run create of every
        helper or policy), so nothing is half-applied. ``faults``: the experiment's planned faults
        (:func:`chaos.plan.faults_of`: scope and arguments of each), which may name more scopes than
        ``scope`` (a second fault) and the variant, zones and methods."""
        self.run_id = run_id
        planned = list(faults or [])
        scopes = ({scope} | {f.get("scope") for f in planned}) - {None}
        self.preflight_access(scopes)
        left = self.leftovers()
        stale = [x for x in left if km.expired(x.get("expires"))]
        if stale:  # past their deadline: no live run owns them (a crashed one's), undone here
            self.remove_leftovers(stale)
        left = [x for x in left if not km.expired(x.get("expires"))]
        if left:
            shown = ", ".join(f"{x['kind']} {x['name']} (run {x.get('run_id')})" for x in left[:5])
            raise SetupError(f"the cluster still has {len(left)} object(s) of an earlier run of the rig: {shown}"
                             f"{' ...' if len(left) > 5 else ''}; run `availproof recover --backend kuberay` first")
        self.load_avoid_zones = self._zones_under_test(scopes, scope, planned)  # the load Job kept out of them
        if scopes & {"zone", "region"}:
            self.refuse_autoscaled_zone_loss(self._planned_lost_zones(scope, planned))
        if any(f.get("scope") == "upgrade" and (f.get("arguments") or {}).get("variant") == "cluster" for f in planned):
            self.preflight_upgrade("cluster")
        if "partition" in scopes:
            named = {(f.get("arguments") or {}).get("zone") for f in planned if f.get("scope") == "partition"}
            for zone in sorted(named - {None}) or self.zones():
                self.preflight_partition(zone)
        if self.load_job is not None:
            self.preflight_load()

    def _zones_under_test(self, scopes: set, scope: str, planned: list[dict]) -> list[str]:
        """The zones the planned faults will take out or cut off (a zone or region loss, a partition; one that
        names none: every zone of the cluster), where no load pod may run from the start."""
        zones: set[str] = set()
        if scopes & {"zone", "region"}:
            lost = self._planned_lost_zones(scope, planned)
            zones |= set(lost if lost is not None else self.zones())
        if "partition" in scopes:
            named = {(f.get("arguments") or {}).get("zone") for f in planned if f.get("scope") == "partition"}
            zones |= (named - {None}) or set(self.zones())
        return sorted(zones)

    def _planned_lost_zones(self, scope: str, planned: list[dict]) -> list[str] | None:
        """The zones the planned zone and region losses name (None: one names none, so every zone)."""
        zones: set[str] = set()
        losses = [f for f in planned if f.get("scope") in ("zone", "region")]
        if not losses:
            return None
        for f in losses:
            a = f.get("arguments") or {}
            named = [a["zone"]] if f["scope"] == "zone" and a.get("zone") else (
                self.zones_in_region(a["region"]) if f["scope"] == "region" and a.get("region") else None)
            if not named:
                return None
            zones |= set(named)
        return sorted(zones)

    def preflight_access(self, scopes) -> list[str]:
        """One SelfSubjectAccessReview per verb and resource the faults of ``scopes`` and their heals call
        (:func:`chaos.backends.kube_access.needed`, with this backend's partition method); any denial
        raises one line naming each missing access. Returns what was reviewed (as ``kubectl auth can-i``
        words it)."""
        wanted = kube_access.needed(scopes, self.partition_method, load_in_cluster=self.load_job is not None,
                                    autoscalers=not self.allow_autoscaled_zone_loss)
        try:
            missing = kube_access.denied(self.authz, self.namespace, wanted)
        except Exception as e:  # noqa: BLE001 - ApiException: the review itself failed
            status = getattr(e, "status", None)
            if status is None:
                raise
            raise SetupError(f"kube context {self.context}: the permissions check (SelfSubjectAccessReview) failed "
                             f"(HTTP {status}: {_api_message(e)})") from None
        if missing:
            raise SetupError(kube_access.refusal(self.context, self.namespace, missing))
        return [a.text(self.namespace) for a in wanted]

    def heal(self, faults: list[dict], timeout: float = 300.0) -> dict:
        """Heal what ``faults`` (this run's) broke, and nothing else: what each one's scope restores here
        (:class:`chaos.backends.kuberay.scopes.Restore`: their engines resumed, their zones' partitions
        healed, the nodes cordoned for their zone or region losses uncordoned, an incomplete cluster upgrade
        rolled back); pods deleted by the other faults are KubeRay's (or the kubelet's) to bring back: wait
        for health."""
        want = sum(self.restores(faults), Restore())
        done: dict[str, list] = {"resumed": [], "healed": [], "uncordoned": []}
        done["resumed"] = self.resume_engine(want.resume)
        for zone in sorted(want.cuts):
            self.heal_zone(zone)
            done["healed"].append(zone)
        for f in want.watched:  # the faults the watches prove: their finding is written into them at the heal
            if self._watch_of(f.get("zones")) is not None:
                self._adopt_fault(self._watch_of(f.get("zones")), f)
        for f in want.upgrades:  # a cluster upgrade that did not complete is rolled back; one that did keeps no record
            if f.get("complete") is False:
                done.setdefault("rolled_back", []).append(self.roll_back_upgrade(f))
            else:
                self._drop_record(f["record"])
        if want.lost:
            done["uncordoned"] = self.restore_zones(sorted(want.lost))
        self.wait_healthy(timeout=timeout)
        return done

    def heal_all(self, timeout: float = 300.0) -> dict:
        """``availproof recover``: resume the engines this backend stopped, then remove every leftover
        of the rig's, whatever run left it (:meth:`remove_leftovers`: partitions, labels, cordons)."""
        done: dict[str, list] = {"resumed": self.resume_engine(list(self.paused))}
        for zone in list(self.cuts):
            self._close_probe(zone)
        self._stop_watches(None)
        removed = self.remove_leftovers()["removed"]
        done["healed"] = sorted({x["zone"] for x in removed if x["kind"] != "Node" and x["zone"]})
        done["uncordoned"] = [x["name"] for x in removed if x["kind"] == "Node"]
        done["removed"] = removed
        self.wait_healthy(timeout=timeout)
        return done
