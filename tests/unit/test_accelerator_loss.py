"""Issue 35, accelerator faults on KubeRay: a GPU replica's node loses its accelerator to Kubernetes (the NVIDIA
device plugin paused there as NVIDIA's MIG manager pauses it, the node's nvidia.com/gpu allocatable 0) while its
pods run. Over the real kubernetes client and the fake GPU cluster (tests/unit/kube_fake_gpu.py: the DaemonSet
controller, the kubelet's device manager and node status, the scheduler's resource fit): the proof (the drop seen,
or what was seen instead), the pods left running, a new GPU pod Pending, the heal, recover after a crash, the
permissions, the plan, the local backend's refusal, and the GPU overlay's engine faults and watchdog."""

import json
from pathlib import Path

import pytest
import yaml

from chaos.commands import cli
from chaos.core import experiment, plan, provision
from chaos.scopes import faults, faults_accelerator
from chaos.recording import records as rec
from chaos import scopes
from chaos.backends import base, kuberay as kb
from chaos.backends.kuberay.kube import access as kube_access, marks as km
from chaos.backends.kuberay import accelerators as acc
from chaos.backends.kuberay.kube import client as kube_client
from chaos.base.errors import ClusterError, SetupError, UsageError
from tests.unit.fake_dashboard import install as fake_dashboard
from tests.unit.kube_fake_gpu import OPERATOR_LABEL, RESOURCE, gpu_cluster, gpu_pod

ROOT = Path(__file__).resolve().parents[2]
NAME = "accelerator"
PLUGIN_DS = ("gpu-operator", "nvidia-device-plugin-daemonset")


def details():
    """Serve's details: one engine replica per zone, on the GPU workers' pod IPs."""
    reps = [("r1", "10.0.1.1"), ("r2", "10.0.2.1"), ("r3", "10.0.3.1")]
    return {"applications": {"llm": {"status": "RUNNING", "deployments": {"LLMServer:availproof-tiny": {"replicas": [
        {"replica_id": r, "state": "RUNNING", "node_ip": ip, "pid": 41, "actor_name": f"SERVE_REPLICA::llm#L#{r}"}
        for r, ip in reps]}}}}}


@pytest.fixture
def clock(monkeypatch):
    """One clock for the rig and the fake cluster: the rig's sleeps move it (so do the fake's controllers)."""
    now = [1000.0]
    monkeypatch.setattr(kube_client, "DEFAULT_CLOCK", kube_client.Clock(
        monotonic=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + max(float(s), 0.01))))
    # the rig's proof (chaos.scopes.faults) looks on the same clock: its own seam
    monkeypatch.setattr(faults.time, "monotonic", lambda: now[0])
    monkeypatch.setattr(faults.time, "sleep", lambda s: now.__setitem__(0, now[0] + max(float(s), 0.01)))
    fake_dashboard(monkeypatch, serve=details())
    return now


@pytest.fixture
def gpu(clock, monkeypatch):
    s, b, stream = gpu_cluster()
    s.clock = lambda: clock[0]
    s.posted = dict.fromkeys(s.posted, clock[0])
    monkeypatch.setattr(b, "wait_healthy", lambda timeout=300.0: None)
    return s, b, stream


def writes(s):
    return [(m, p) for m, p, _ in s.calls if m != "GET"]


def plugin_on(s, node):
    return [p["metadata"]["name"] for p in s.daemon_pods(*PLUGIN_DS, node)
            if not p["metadata"].get("deletionTimestamp")]


def alloc(s, node):
    return s.nodes[node]["status"]["allocatable"][RESOURCE], s.nodes[node]["status"]["capacity"][RESOURCE]


def one_line(e) -> str:
    assert "\n" not in str(e.value)
    return str(e.value)


# ---------------------------------------------------------------- the fake itself, against the kubelet's sources
def test_the_fake_kubelet_drops_allocatable_only_after_the_plugin_is_gone_and_keeps_capacity_for_the_grace(gpu, clock):
    s, b, _ = gpu
    before = plugin_on(s, "k-a")
    s.nodes["k-a"]["metadata"]["labels"][OPERATOR_LABEL] = "off"  # the DaemonSet no longer matches the node
    s.sync_gpus()
    assert s.daemon_pods(*PLUGIN_DS, "k-a")[0]["metadata"].get("deletionTimestamp")  # terminating, by its DaemonSet
    assert alloc(s, "k-a") == ("2", "2")  # the kubelet has not posted its status yet
    clock[0] += 10
    s.sync_gpus()  # the plugin's process gone: disconnected, devices unhealthy, then the status posted
    assert plugin_on(s, "k-a") == [] and alloc(s, "k-a") == ("0", "2")  # allocatable 0, capacity kept
    clock[0] += 300
    s.sync_gpus()
    assert alloc(s, "k-a") == ("0", "0")  # past endpointStopGracePeriod: the resource dropped, capacity 0
    s.nodes["k-a"]["metadata"]["labels"][OPERATOR_LABEL] = "true"
    s.settle()
    assert plugin_on(s, "k-a") and plugin_on(s, "k-a") != before and alloc(s, "k-a") == ("2", "2")
    assert [w for _, n, w in s.events if n == "k-a"][-3:] == [
        "nvidia-device-plugin-daemonset pod created", "plugin registered", "status: capacity 2, allocatable 2"]


def test_the_fake_scheduler_honours_allocatable(gpu):
    s, b, _ = gpu
    assert s.room("k-a") == 1  # 2 GPUs, one held by wa-1
    s.pods["wa-2"] = gpu_pod("wa-2", None, None, "workers-zone-a")
    s.pods["wa-2"]["spec"]["nodeSelector"] = {kb.ZONE_LABEL: "zone-a"}
    s.pods["wa-3"] = gpu_pod("wa-3", None, None, "workers-zone-a")
    s.pods["wa-3"]["spec"]["nodeSelector"] = {kb.ZONE_LABEL: "zone-a"}
    assert s.schedule() == ["wa-2"]  # room for one
    cond = s.pods["wa-3"]["status"]["conditions"][0]
    assert cond["reason"] == "Unschedulable" and "1 Insufficient nvidia.com/gpu" in cond["message"]


# ---------------------------------------------------------------- the fault, its proof, its heal
def test_the_loss_pauses_the_plugin_proves_the_drop_with_the_pods_running_and_the_heal_gives_it_back(gpu, clock):
    s, b, stream = gpu
    plugin = "gpu-operator/" + plugin_on(s, "k-a")[0]
    others = {n: plugin_on(s, n) for n in ("k-b", "k-c")}
    bystanders = sorted(k for k, p in s.other_pods.items() if p["spec"]["nodeName"] == "k-a" and k[1].startswith(
        ("nvidia-dcgm", "kube-proxy")))
    marker = faults.Marker()
    f = faults_accelerator.lose_accelerator(b, marker, zone="zone-a", outage_s=60)
    assert [(m.event, m.scope, m.target, m.zones) for m in marker.marks] == [
        (e, NAME, "k-a", ["zone-a"]) for e in rec.MARK_EVENTS]
    assert marker.marks[0].detail == {"replica": "r1", "pod": "wa-1", "plugin": plugin, "label": OPERATOR_LABEL,
                                      "was": "true", "gpus": 2, "gpu_pods": ["availproof/wa-1"]}
    assert f["plugin_pod"] == plugin and f["set"] == acc.PAUSED and f["allocatable_before"] == 2
    e = f["effect"]  # the proof, then the hold looked at to the heal (the label still paused, allocatable 0)
    assert e["verified"] is True and [c["ok"] for c in e["checks"]] == [True, True, True, True]
    assert e["checks"][1]["seen"] == "allocatable 0, capacity 2" and e["checks"][2]["seen"] == "1 of 1 Running"
    assert e["checks"][3]["seen"] == f"label {OPERATOR_LABEL} reads '{acc.PAUSED}', allocatable {RESOURCE} 0"
    assert marker.marks[1].detail["effect"]["checks"] == e["checks"][:3]  # the inject end mark: the proof then
    assert 0 < e["time_to_effect_s"] <= faults.EFFECT_BOUND_S[NAME]  # the kubelet's next status update
    # on the fake cluster, in this order: the plugin's pod deleted by its DaemonSet, the plugin gone, the status
    seen = [w for _, n, w in s.events if n == "k-a"]
    i = seen.index("nvidia-device-plugin-daemonset pod deleted by its DaemonSet")
    assert sorted(seen[i + 1:i + 3]) == ["plugin disconnected: devices unhealthy",  # its SIGTERM ends the plugin
                                         f"pod {f['plugin_pod'].split('/')[1]} gone"]
    assert seen[i + 3] == "status: capacity 2, allocatable 0"  # then the kubelet's next status update
    # the heal: the label back, the plugin's new pod registered, the allocatable back; what the outage left
    r = f["restored"]
    assert r["label"] == f"{OPERATOR_LABEL}=true" and r["gpu_pods_running"] == ["availproof/wa-1"]
    assert r["gpu_pods_pending"] == [] and r["allocatable_after"] == 2 and r["back_after_s"] > 0
    assert s.nodes["k-a"]["metadata"]["labels"][OPERATOR_LABEL] == "true"
    assert km.ACCELERATOR_MARK not in (s.nodes["k-a"]["metadata"].get("annotations") or {})
    assert alloc(s, "k-a") == ("2", "2") and plugin_on(s, "k-a") and s.pods["wa-1"]["status"]["phase"] == "Running"
    # nothing else touched: the other nodes' plugins, the node's other daemons, no exec, two node patches
    assert {n: plugin_on(s, n) for n in ("k-b", "k-c")} == others
    assert sorted(k for k, p in s.other_pods.items() if p["spec"]["nodeName"] == "k-a" and k[1].startswith(
        ("nvidia-dcgm", "kube-proxy"))) == bystanders
    assert stream.calls == [] and writes(s) == [("PATCH", "/api/v1/nodes/k-a")] * 2


def test_a_new_gpu_pod_stays_pending_during_the_loss_and_schedules_after_the_heal(gpu, clock):
    s, b, _ = gpu
    marker = faults.Marker()
    f = faults_accelerator.lose_accelerator(b, marker, zone="zone-a")  # healed by the rollback
    assert f["effect"]["verified"]
    s.pods["wa-2"] = gpu_pod("wa-2", None, None, "workers-zone-a")  # e.g. KubeRay's replacement of a worker
    s.pods["wa-2"]["spec"]["nodeSelector"] = {kb.ZONE_LABEL: "zone-a"}
    assert s.schedule() == [] and s.pods["wa-1"]["status"]["phase"] == "Running"  # one GPU free, none allocatable
    faults.heal(b, marker)
    r = f["restored"]
    assert r["gpu_pods_running"] == ["availproof/wa-1"]
    assert r["gpu_pods_pending"] == [{"pod": "wa-2", "reason": "Unschedulable", "message":
                                      "0/4 nodes are available: 1 Insufficient nvidia.com/gpu, 3 node(s) didn't "
                                      "match Pod's node affinity/selector."}]
    assert [m.event for m in marker.marks][-2:] == [rec.HEAL_START, rec.HEAL_END]
    assert marker.marks[-1].detail["restored"] == r  # what the outage left is in the heal's mark (the summary)
    assert s.schedule() == ["wa-2"] and s.pods["wa-2"]["spec"]["nodeName"] == "k-a"
    faults.heal(b, marker)  # again: nothing of the rig's left, nothing done
    assert f["restored"] == r and writes(s).count(("PATCH", "/api/v1/nodes/k-a")) == 2


@pytest.mark.parametrize("broken, seen", [
    ("kubelet", ["gone", "allocatable 2, capacity 2", "1 of 1 Running"]),  # its status never updated
    ("daemonset", ["Running", "allocatable 2, capacity 2", "1 of 1 Running"]),  # its controller does nothing
    ("pods", ["gone", "allocatable 0, capacity 2", "0 of 1 Running; not: availproof/wa-1"]),  # the pods went too
])
def test_a_loss_not_seen_is_not_in_effect_and_says_what_was_seen(gpu, clock, monkeypatch, broken, seen):
    s, b, _ = gpu
    monkeypatch.setattr(faults, "EFFECT_BOUND_S", {NAME: 30.0}, raising=False)
    if broken == "kubelet":
        s.status_period_s = float("inf")
    elif broken == "daemonset":
        s.daemonset_controller = False
    else:
        real = s.sync_gpus

        def sync(post_now=False):
            real(post_now)
            if s.nodes["k-a"]["metadata"]["labels"].get(OPERATOR_LABEL) == acc.PAUSED:
                s.pods["wa-1"]["status"]["phase"] = "Failed"

        monkeypatch.setattr(s, "sync_gpus", sync)
    marker = faults.Marker()
    f = faults_accelerator.lose_accelerator(b, marker, zone="zone-a")
    e = f["effect"]
    assert e["verified"] is False and e["time_to_effect_s"] is None and e["bound_s"] == 30.0
    assert [c["seen"].split(" ", 1)[-1] if broken == "daemonset" and i == 0 else c["seen"]
            for i, c in enumerate(e["checks"])] == seen
    assert [m.event for m in marker.marks] == [rec.INJECT_START, rec.INJECT_END]  # recorded, and still healed
    b.accelerator_restore_s = 0.0  # the label put back, not waited for (a broken cluster would not bring it back)
    faults.heal(b, marker)
    assert s.nodes["k-a"]["metadata"]["labels"][OPERATOR_LABEL] == "true"
    assert km.ACCELERATOR_MARK not in s.nodes["k-a"]["metadata"]["annotations"]


def test_a_heal_whose_accelerator_does_not_come_back_raises_one_line_with_the_label_back(gpu, clock, monkeypatch):
    s, b, _ = gpu
    f = faults_accelerator.lose_accelerator(b, faults.Marker(), zone="zone-a")
    s.daemonset_controller = False  # no plugin comes back
    b.accelerator_restore_s = 20.0
    with pytest.raises(ClusterError) as e:
        b.restore_accelerator(f["target"])
    assert "not the accelerator within 20 s (allocatable nvidia.com/gpu 0, was 2" in one_line(e)
    assert s.nodes["k-a"]["metadata"]["labels"][OPERATOR_LABEL] == "true"


# ---------------------------------------------------------------- refusals, in one line, nothing changed
def _no_gpu(s):
    for k in ("limits", "requests"):
        s.pods["wa-1"]["spec"]["containers"][0]["resources"][k].pop(RESOURCE)


def _static_plugin(s):
    """NVIDIA's static manifest instead: kube-system, name=nvidia-device-plugin-ds, no nodeSelector."""
    s.daemonsets.clear()
    s.other_pods = {k: p for k, p in s.other_pods.items() if not k[1].startswith("nvidia-device-plugin")}
    s.add_daemonset("kube-system", "nvidia-device-plugin-daemonset", {"name": "nvidia-device-plugin-ds"},
                    device_plugin=True)
    s.settle()


def _shared_label(s):
    """The GPU operator's MPS control daemon selects on the device plugin's label too."""
    s.add_daemonset("gpu-operator", "nvidia-device-plugin-mps-control-daemon", {"app": "mps"}, {OPERATOR_LABEL: "true"})
    s.settle()


@pytest.mark.parametrize("setup, why", [
    (_no_gpu, "replica r1: its pod wa-1 asks for no nvidia.com/gpu, so there is no accelerator to lose"),
    (lambda s: s.nodes["k-a"]["status"]["allocatable"].pop(RESOURCE), "allocatable nvidia.com/gpu is absent"),
    (_static_plugin, "has no node-selector label of its own to pause (no nodeSelector): give its DaemonSet one"),
    (_shared_label, f"{OPERATOR_LABEL} also selects gpu-operator/nvidia-device-plugin-mps-control-daemon-"),
    (lambda s: s.other_pods.clear() or s.daemonsets.clear(), "node k-a: no NVIDIA device plugin pod on it"),
])
def test_what_the_loss_cannot_do_is_refused_in_one_line_before_the_mark(gpu, setup, why):
    s, b, stream = gpu
    setup(s)
    s.calls.clear()
    marker = faults.Marker()
    with pytest.raises(UsageError) as e:
        faults_accelerator.lose_accelerator(b, marker, zone="zone-a")
    assert why in one_line(e)
    assert marker.marks == [] and marker.attempted == {} and writes(s) == [] and stream.calls == []
    (row,) = plan.objects(b, [{"activity": "a", "scope": NAME, "arguments": {"zone": "zone-a"}}])
    assert row["kind"] == plan.REFUSED and why in row["does"]


def test_the_plan_names_the_node_the_plugin_and_the_pods_left_running_and_only_reads(gpu):
    s, b, stream = gpu
    s.calls.clear()
    rows = plan.objects(b, [{"activity": "lose", "scope": NAME, "arguments": {"zone": "zone-a", "outage_s": 60}}])
    plugin = "gpu-operator/" + plugin_on(s, "k-a")[0]
    assert [(r["kind"], r["name"]) for r in rows] == [("Node", "k-a"), ("Pod", plugin), ("Pod", "availproof/wa-1")]
    assert f"label {OPERATOR_LABEL}={acc.PAUSED} (now true)" in rows[0]["does"] and "after 60 s" in rows[0]["after"]
    assert "deleted by its DaemonSet's controller, not by the rig" in rows[1]["does"] and "2 -> 0" in rows[1]["does"]
    assert {m for m, _, _ in s.calls} == {"GET"} and stream.calls == []


# ---------------------------------------------------------------- recover, the preflight
def test_recover_after_a_crashed_run_gives_the_accelerator_back(gpu, clock, monkeypatch):
    s, b, _ = gpu
    before = json.loads(json.dumps(s.nodes["k-a"]["metadata"]))
    faults_accelerator.lose_accelerator(b, faults.Marker(), zone="zone-a")  # the run dies here: no heal
    _, b2, _ = gpu_cluster()  # a new backend on the same cluster, as `availproof recover` makes one
    core, net, custom = s.apis()
    b2.core, b2.net, b2.custom = core, net, custom
    monkeypatch.setattr(b2, "wait_healthy", lambda timeout=300.0: None)
    (left,) = [x for x in b2.leftovers() if x["kind"] == "Accelerator"]
    assert (left["name"], left["run_id"], left["zone"]) == ("k-a", "run1", "zone-a") and left["expires"]
    assert f"kept off: label {OPERATOR_LABEL}={acc.PAUSED} (was true)" in left["what"]
    with pytest.raises(SetupError, match="still has 1 object.*Accelerator k-a .run run1.*availproof recover"):
        b2.prepare("run2", "replica")
    done = b2.heal_all(timeout=1.0)
    assert [x["name"] for x in done["removed"]] == ["k-a"] and done["accelerators"] == ["k-a"] and done["healed"] == []
    assert s.nodes["k-a"]["metadata"]["labels"] == before["labels"]
    assert (s.nodes["k-a"]["metadata"].get("annotations") or {}) == (before.get("annotations") or {})
    clock[0] += 10
    s.settle()
    assert plugin_on(s, "k-a") and alloc(s, "k-a") == ("2", "2") and b2.leftovers() == []


def test_a_leftover_past_its_deadline_is_undone_by_the_next_preparation(gpu, monkeypatch):
    s, b, _ = gpu
    b.helper_deadline_s = 0  # the mark expires at once
    faults_accelerator.lose_accelerator(b, faults.Marker(), zone="zone-a")
    monkeypatch.setattr(km.time, "time", lambda: 4_000_000_000.0)
    b.prepare("run2", NAME)
    assert s.nodes["k-a"]["metadata"]["labels"][OPERATOR_LABEL] == "true"


def test_the_preflight_reviews_exactly_what_the_loss_and_its_heal_call(gpu):
    from tests.unit.test_kuberay_preflight import api_accesses, reviewed

    s, b, stream = gpu
    wanted = set(kube_access.needed({NAME})) - set(kube_access.READS)
    assert {(a.verb, a.resource, a.namespaced) for a in wanted} == {("patch", "nodes", False), ("list", "pods", False)}
    s.calls.clear()
    b.prepare("run1", NAME)
    marker = faults.Marker()
    faults_accelerator.lose_accelerator(b, marker, zone="zone-a")
    faults.heal(b, marker)
    made = api_accesses(s, stream)
    assert ("patch", "nodes", "", "", False) in made and ("list", "pods", "", "", False) in made
    assert made - reviewed({NAME}) == set()  # no delete in kube-system or gpu-operator, no exec
    s.denied_access.add(("list", "pods", "", ""))
    with pytest.raises(SetupError) as e:
        b.prepare("run3", NAME)
    assert "list pods (cluster-wide) [the pods on the GPU node in every namespace" in one_line(e)


# ---------------------------------------------------------------- the registry, the local backend, the experiment
def test_the_scope_is_known_to_the_schema_the_claim_and_the_report():
    from chaos.claim import rates
    from chaos.reports import report

    s = scopes.get(NAME)
    assert scopes.known(NAME) and NAME in rec.SCOPES and s.zoned and s.every_target_affected and not s.routed
    assert report.scope_text(NAME) == "accelerator: device-plugin outage"
    doc = json.loads((ROOT / "experiments" / "accelerator-loss.json").read_text())
    assert experiment.problems(doc, "accelerator-loss.json") == []
    assert [f["scope"] for f in plan.faults_of(doc)] == [NAME]
    parsed = rates.parse_rates({"period_days": 30, "scopes": {NAME: {"events": 0.5, "duration_s": 60}}})
    assert parsed.scopes[NAME].mean_events(30) == 0.5  # a claim's rates file may name it


def test_the_local_backend_refuses_the_run_and_its_plan_in_one_line(tmp_path, capsys):
    settings = experiment.settings(experiment.load(ROOT / "experiments" / "accelerator-loss.json"))
    with pytest.raises(UsageError) as e:
        provision.check_capabilities("local", settings)
    assert "the local backend cannot run this experiment: no accelerator to lose" in one_line(e)
    provision.check_capabilities("kuberay", settings)  # KubeRay runs it
    path = str(ROOT / "experiments" / "accelerator-loss.json")
    for argv in (["run", path, "--plan"], ["run", path, "--out", str(tmp_path / "out")]):
        assert cli.main(argv) == 2
        errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
        assert len(errors) == 1 and "cannot run this experiment: no accelerator to lose" in errors[0]
    assert not (tmp_path / "out").exists()  # refused before anything started: no cluster, no run directory


# ---------------------------------------------------------------- the GPU overlay: engine faults and the watchdog
def _gpu_llm(text: str) -> dict:
    cfg = yaml.safe_load(yaml.safe_load(text)["spec"]["serveConfigV2"])
    return cfg["applications"][0]["args"]["llm_configs"][0]


def test_the_gpu_overlay_sets_the_engine_fault_hook_and_can_set_the_watchdog():
    from serve_apps import kuberay as kr
    from serve_apps.config import validate

    patch = ROOT / "kuberay" / "overlays" / "vllm-gpu" / "rayservice-patch.yaml"
    llm = _gpu_llm(patch.read_text())  # as committed: the hook's variable on, the watchdog off
    assert llm["runtime_env"]["env_vars"]["AVAILPROOF_ENGINE_FAULTS"] == "1"
    assert "user_config" not in llm["deployment_config"]
    text = kr.render(engine_faults=False, stall_s=30.0)[patch]
    llm = _gpu_llm(text)
    assert "AVAILPROOF_ENGINE_FAULTS" not in llm["runtime_env"]["env_vars"]
    assert llm["deployment_config"]["user_config"] == {"stall_s": 30.0}
    validate(yaml.safe_load(yaml.safe_load(text)["spec"]["serveConfigV2"]))  # Ray Serve's own schema
    with pytest.raises(SystemExit):
        kr.main(["--gpu-stall-s", "0"])


def test_the_gpu_engines_get_the_local_llm_apps_environment_but_its_cpu_sizing():
    """Offline, vLLM's logging set-up off (VLLM_CONFIGURE_LOGGING=0: with it on, vLLM closes Serve's log handlers
    and a restarted controller replaces every engine replica, a head loss becoming a full outage) and the
    multiprocessing engine the fault hook arms; none of the CPU build's variables."""
    from serve_apps import kuberay as kr
    from serve_apps.llm_app import ENV

    env = _gpu_llm((ROOT / "kuberay" / "overlays" / "vllm-gpu" / "rayservice-patch.yaml").read_text())[
        "runtime_env"]["env_vars"]
    assert env["VLLM_CONFIGURE_LOGGING"] == "0" and env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "1"
    assert env["HF_HUB_OFFLINE"] == env["TRANSFORMERS_OFFLINE"] == "1"
    assert not set(env) & set(kr.CPU_ONLY_ENV) and set(kr.CPU_ONLY_ENV) <= set(ENV)
    assert set(env) == set(ENV) - set(kr.CPU_ONLY_ENV)
