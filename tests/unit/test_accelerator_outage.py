"""Issue 46, the accelerator scope fixed and said for what it is (a device-plugin outage, not a device loss): its
proof held from the injection to the heal, the label written back only while it still reads the rig's pause (a
resourceVersion precondition, 409 on the fake), only the GPU operator's own label paused, other namespaces' GPU
pods and an outage past the device manager's grace refused before anything, the heal and ``recover`` not stopped
by a failed cluster-wide read, ``recover``'s permissions said and every failed removal reported. Over the real
kubernetes client and the fake GPU cluster (tests/unit/kube_fake_gpu.py)."""

import pytest
from kubernetes import client

from chaos.commands import cli
from chaos.scopes import faults, faults_accelerator
from chaos.core import plan, provision, verdict
from chaos.backends import kuberay as kb
from chaos.backends.kuberay.kube import marks as km
from chaos.backends.kuberay import accelerators as acc
from chaos.scopes.faults_accelerator import MAX_OUTAGE_S
from chaos.base.errors import UsageError
from tests.unit.kube_fake_gpu import OPERATOR_LABEL, RESOURCE, gpu_cluster
from tests.unit.test_accelerator_loss import NAME, PLUGIN_DS, alloc, clock, gpu, one_line, plugin_on, writes  # noqa: F401


def label(s, node="k-a"):
    return s.nodes[node]["metadata"]["labels"].get(OPERATOR_LABEL)


def bump(s, node="k-a"):
    meta = s.nodes[node]["metadata"]
    meta["resourceVersion"] = str(int(meta.get("resourceVersion") or 0) + 1)


def set_label_at(s, monkeypatch, clock, at: float, value: str, node="k-a"):
    """Someone (the GPU operator, a driver manager, an admin) sets the plugin's label to ``value`` once the fake's
    clock reaches ``at``, while the rig's pause is on it."""
    real = s.sync_gpus

    def sync(post_now=False):
        labels = s.nodes[node]["metadata"]["labels"]
        if clock[0] >= at and labels.get(OPERATOR_LABEL) == acc.PAUSED:
            labels[OPERATOR_LABEL] = value
            bump(s, node)
        real(post_now)

    monkeypatch.setattr(s, "sync_gpus", sync)


def node_writes(s):
    return [w for w in writes(s) if "/nodes" in w[1]]  # the permissions' reviews are POSTs too


def fresh_backend(s, monkeypatch):
    """A new backend on the same cluster, as `availproof recover` makes one."""
    _, b2, _ = gpu_cluster()
    b2.core, b2.net, b2.custom = s.apis()
    b2.authz = client.AuthorizationV1Api(b2.core.api_client)  # the reviews asked of this cluster
    b2.batch = client.BatchV1Api(b2.core.api_client)
    monkeypatch.setattr(b2, "wait_healthy", lambda timeout=300.0: None)
    return b2


# ---------------------------------------------------------------- 1. the proof held from the injection to the heal
@pytest.mark.parametrize("healed_by", ["outage", "rollback"])
def test_a_label_put_back_mid_outage_is_a_proof_that_did_not_hold_and_the_run_is_an_error(gpu, clock, monkeypatch,
                                                                                           healed_by):
    s, b, _ = gpu
    t0 = clock[0]
    set_label_at(s, monkeypatch, clock, t0 + 40, "true")  # the operator's "true" back, 40 s into the outage
    marker = faults.Marker()
    f = faults_accelerator.lose_accelerator(b, marker, zone="zone-a", outage_s=120 if healed_by == "outage" else None)
    if healed_by == "rollback":
        clock[0] += 60
        s.settle()
        faults.heal(b, marker)
    assert alloc(s, "k-a") == ("2", "2")  # the GPU was back mid-outage
    e = f["effect"]
    assert e["verified"] is False, e
    assert 40 <= e["lost_until_s"] <= 120 and e["came_back"]["t_s"] == e["lost_until_s"]
    held = [c for c in e["checks"] if not c["ok"]]
    assert len(held) == 1 and f"label {OPERATOR_LABEL} reads 'true'" in held[0]["seen"]
    v = verdict.decide({"faults": [dict(f, scope=NAME)]}, {"status": "completed"})
    assert v["word"] == verdict.ERROR and v["reasons"] == [f"fault not in effect: {NAME} k-a"]


def test_a_loss_that_held_to_the_heal_stays_verified(gpu, clock):
    s, b, _ = gpu
    f = faults_accelerator.lose_accelerator(b, faults.Marker(), zone="zone-a", outage_s=120)
    e = f["effect"]
    assert e["verified"] is True and "lost_until_s" not in e
    (c,) = [c for c in e["checks"] if c["check"].startswith("node k-a: the device plugin kept off")]
    assert c["ok"] and f"allocatable {RESOURCE} 0" in c["seen"]
    assert label(s) == "true" and alloc(s, "k-a") == ("2", "2")


# ---------------------------------------------------------------- 2. only what still reads as the rig's is healed
@pytest.mark.parametrize("value", ["false", "paused-for-mig-change"])
def test_a_label_someone_set_meanwhile_is_left_as_they_set_it(gpu, clock, value):
    s, b, _ = gpu
    marker = faults.Marker()
    f = faults_accelerator.lose_accelerator(b, marker, zone="zone-a")
    s.nodes["k-a"]["metadata"]["labels"][OPERATOR_LABEL] = value  # an admin's off, or the MIG manager's own pause
    bump(s)
    b.accelerator_restore_s = 0.0
    faults.heal(b, marker)
    assert label(s) == value
    assert km.ACCELERATOR_MARK not in (s.nodes["k-a"]["metadata"].get("annotations") or {})  # the mark dropped
    assert f"left as {value!r}" in f["restored"]["note"] and f["effect"]["verified"] is False


def test_the_write_back_is_conditional_on_the_resource_version_and_a_conflict_is_read_again(gpu, clock, monkeypatch):
    s, b, _ = gpu
    marker = faults.Marker()
    faults_accelerator.lose_accelerator(b, marker, zone="zone-a")
    real = s.route
    raced = []

    def route(method, path, query, body):  # the MIG manager pauses it between the rig's read and its write
        if method == "PATCH" and path == "/api/v1/nodes/k-a" and not raced:
            raced.append((body.get("metadata") or {}).get("resourceVersion"))
            s.nodes["k-a"]["metadata"]["labels"][OPERATOR_LABEL] = "paused-for-mig-change"
            bump(s)
        return real(method, path, query, body)

    monkeypatch.setattr(s, "route", route)
    b.accelerator_restore_s = 0.0
    s.calls.clear()
    out = b.restore_accelerator("k-a")
    assert raced and raced[0] is not None  # the patch carried the resourceVersion read
    assert label(s) == "paused-for-mig-change" and "left as 'paused-for-mig-change'" in out["note"]
    assert km.ACCELERATOR_MARK not in (s.nodes["k-a"]["metadata"].get("annotations") or {})


def test_a_conflict_from_an_unrelated_change_is_retried_and_the_label_put_back(gpu, clock, monkeypatch):
    s, b, _ = gpu
    faults_accelerator.lose_accelerator(b, faults.Marker(), zone="zone-a")
    real = s.route
    raced = []

    def route(method, path, query, body):  # the kubelet's status update between the rig's read and its write
        if method == "PATCH" and path == "/api/v1/nodes/k-a" and not raced:
            raced.append(1)
            bump(s)
        return real(method, path, query, body)

    monkeypatch.setattr(s, "route", route)
    b.accelerator_restore_s = 0.0
    b.restore_accelerator("k-a")
    assert label(s) == "true" and km.ACCELERATOR_MARK not in (s.nodes["k-a"]["metadata"].get("annotations") or {})


# ---------------------------------------------------------------- 3. only the GPU operator's own label
@pytest.mark.parametrize("key, value", [("nvidia.com/gpu.present", "true"), ("karpenter.sh/nodepool", "gpu"),
                                        ("eks.amazonaws.com/nodegroup", "gpu-ng")])
def test_a_plugin_selected_by_any_other_label_is_refused_in_one_line(gpu, key, value):
    s, b, stream = gpu
    for n in ("k-a", "k-b", "k-c"):
        s.nodes[n]["metadata"]["labels"][key] = value
    s.daemonsets[PLUGIN_DS]["spec"]["template"]["spec"]["nodeSelector"] = {key: value}
    s.other_pods = {k: p for k, p in s.other_pods.items() if not k[1].startswith("nvidia-device-plugin")}
    s.settle()
    assert plugin_on(s, "k-a")
    s.calls.clear()
    marker = faults.Marker()
    with pytest.raises(UsageError) as e:
        faults_accelerator.lose_accelerator(b, marker, zone="zone-a")
    assert f"only the GPU operator's {OPERATOR_LABEL} is paused" in one_line(e) and key in one_line(e)
    assert writes(s) == [] and marker.marks == [] and s.nodes["k-a"]["metadata"]["labels"][key] == value


# ---------------------------------------------------------------- 4. the blast radius, the device manager's grace
def _trainer(s, ns="ml-team", name="trainer-0", node="k-a"):
    s.other_pods[(ns, name)] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "uid": f"uid-{name}", "resourceVersion": "1", "labels": {}},
        "spec": {"nodeName": node, "containers": [{"name": "t", "image": "trainer", "resources": {
            k: {RESOURCE: "1"} for k in ("limits", "requests")}}]},
        "status": {"phase": "Running"}}


def test_other_namespaces_gpu_pods_on_the_node_refuse_the_loss_unless_acknowledged(gpu, clock):
    s, b, _ = gpu
    _trainer(s)
    s.calls.clear()
    marker = faults.Marker()
    with pytest.raises(UsageError) as e:
        faults_accelerator.lose_accelerator(b, marker, zone="zone-a", outage_s=60)
    text = one_line(e)
    assert "ml-team/trainer-0" in text and "acknowledge_other_gpu_pods" in text
    assert writes(s) == [] and marker.marks == []
    (row,) = plan.objects(b, [{"activity": "a", "scope": NAME, "arguments": {"zone": "zone-a", "outage_s": 60}}])
    assert row["kind"] == plan.REFUSED and "ml-team/trainer-0" in row["does"]
    f = faults_accelerator.lose_accelerator(b, faults.Marker(), zone="zone-a", outage_s=60,
                                            acknowledge_other_gpu_pods=True)
    assert f["effect"]["verified"] and f["other_gpu_pods"] == ["ml-team/trainer-0"] and label(s) == "true"


@pytest.mark.parametrize("outage_s", [241, 600])
def test_an_outage_past_the_device_managers_grace_is_refused_in_one_line_before_anything(gpu, outage_s):
    s, b, _ = gpu
    s.calls.clear()
    with pytest.raises(UsageError) as e:
        faults_accelerator.lose_accelerator(b, faults.Marker(), zone="zone-a", outage_s=outage_s)
    assert f"at most {MAX_OUTAGE_S:g} s" in one_line(e) and s.calls == []
    planned = [{"activity": "a", "action": "lose_accelerator", "scope": NAME,
                "arguments": {"zone": "zone-a", "outage_s": outage_s}}]
    with pytest.raises(UsageError) as e:
        b.prepare("run1", NAME, planned)
    assert f"at most {MAX_OUTAGE_S:g} s" in one_line(e) and node_writes(s) == []
    planned[0]["arguments"].pop("outage_s")  # healed at the rollback: after the load, past the grace
    with pytest.raises(UsageError) as e:
        b.prepare("run1", NAME, planned)
    assert "outage_s is required" in one_line(e) and node_writes(s) == []
    planned[0]["arguments"]["outage_s"] = 60
    b.prepare("run1", NAME, planned)  # within the grace: prepared


# ---------------------------------------------------------------- 5. a failed cluster-wide read never leaves it paused
def test_a_forbidden_cluster_wide_pod_list_at_the_heal_still_puts_the_label_back(gpu, clock):
    s, b, _ = gpu
    marker = faults.Marker()
    f = faults_accelerator.lose_accelerator(b, marker, zone="zone-a")
    s.forbidden.add("/api/v1/pods")  # a 403 on the cluster-wide list from now on
    b.accelerator_restore_s = 0.0
    faults.heal(b, marker)
    assert label(s) == "true" and km.ACCELERATOR_MARK not in (s.nodes["k-a"]["metadata"].get("annotations") or {})
    assert "HTTP 403" in f["restored"]["outage_seen_error"]


def test_recover_puts_the_label_back_when_the_cluster_wide_pod_list_is_forbidden(gpu, clock, monkeypatch):
    s, b, _ = gpu
    faults_accelerator.lose_accelerator(b, faults.Marker(), zone="zone-a")  # the run dies here
    s.forbidden.add("/api/v1/pods")
    b2 = fresh_backend(s, monkeypatch)
    done = b2.heal_all(timeout=1.0)
    assert done["accelerators"] == ["k-a"] and not done.get("failed")
    assert label(s) == "true"


# ---------------------------------------------------------------- 6. recover: its permissions, every failure reported
def _cordoned_by_a_run(s, node="k-b"):
    s.nodes[node]["metadata"].setdefault("annotations", {}).update(
        {kb.CORDON_MARK: "run1", km.CORDON_EXPIRES: km.deadline(3600)})
    s.nodes[node].setdefault("spec", {})["unschedulable"] = True


def test_recover_carries_on_past_a_failed_removal_reports_each_and_exits_non_zero(gpu, clock, monkeypatch, capsys):
    s, b, _ = gpu
    faults_accelerator.lose_accelerator(b, faults.Marker(), zone="zone-a")  # the run dies here
    _cordoned_by_a_run(s, "k-b")
    _cordoned_by_a_run(s, "k-c")
    real = s.route

    def route(method, path, query, body):  # the uncordon of k-b fails
        if method == "PATCH" and path == "/api/v1/nodes/k-b":
            return 500, {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "etcd timeout",
                         "reason": "InternalError", "code": 500}
        return real(method, path, query, body)

    monkeypatch.setattr(s, "route", route)
    b2 = fresh_backend(s, monkeypatch)
    monkeypatch.setattr(provision, "kube_settings", lambda flags: None)
    monkeypatch.setattr(provision, "kuberay_backend", lambda settings: b2)
    assert cli.main(["recover", "--backend", "kuberay"]) != 0
    out = capsys.readouterr()
    text = out.out + out.err
    assert "node k-b" in text and "HTTP 500" in text
    assert label(s) == "true" and not s.nodes["k-c"]["spec"].get("unschedulable")  # the others were undone
    assert s.nodes["k-b"]["spec"]["unschedulable"]


def test_recover_says_what_it_may_not_do_one_line_per_missing_verb(gpu, clock, monkeypatch):
    s, b, _ = gpu
    faults_accelerator.lose_accelerator(b, faults.Marker(), zone="zone-a")
    s.denied_access |= {("patch", "nodes", "", ""), ("delete", "jobs", "batch", "")}
    b2 = fresh_backend(s, monkeypatch)
    done = b2.heal_all(timeout=1.0)
    cannot = done["cannot"]
    assert len(cannot) == 2 and all("\n" not in line for line in cannot)
    assert any(line.startswith("recover may not patch nodes (cluster-wide)") for line in cannot)
    assert any(line.startswith("recover may not delete jobs.batch in namespace availproof") for line in cannot)
