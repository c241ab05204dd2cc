"""Issue 25: on KubeRay the load workers run where no fault can reach them, as pods of an Indexed Job.

Over the real kubernetes client and the in-memory API server (tests/unit/kube_fake.py, its Jobs, garbage
collector and the load pods' containers in tests/unit/kube_fake_batch.py): the pods run the real pod worker
(chaos.load.pod_worker) in threads, against a loopback HTTP server, each on its node's (skewed) wall clock."""

import base64
import gzip
import json
import threading
import time
from pathlib import Path

import pytest

from chaos import analysis
from chaos.scopes import faults
from chaos.system import manifests
from chaos.core import provision, summary as summary_mod
from chaos.recording import records as rec
from chaos.backends.kuberay.kube import access as kube_access, load as kl
from chaos.base.errors import ClusterError, SetupError, UsageError
from chaos.load.pool import deal
from chaos.load.workload import LoadShape, Router, Target, plan
from chaos.schemas import __file__ as schemas_init
from chaos.scopes.drain import drain_node
from chaos.scopes.node import kill_node
from chaos.scopes.partition import partition_zone
from chaos.scopes.region import kill_region
from chaos.scopes.zone import kill_zone
from tests.unit.fake_dashboard import install as fake_dashboard
from tests.unit.kube_fake import node
from tests.unit.test_kuberay_backend import cluster, writes
from tests.unit.test_kuberay_preflight import api_accesses
from tests.unit.test_transport import Server

LOAD_NODE = {"availproof.io/load-node": "true"}
SKEW = {"k-load-a": 2_500_000_000, "k-load-b": -1_200_000_000}  # each load node's clock minus the rig's


@pytest.fixture
def server():
    import asyncio

    loop = asyncio.new_event_loop()
    srv = loop.run_until_complete(Server().start())
    t = threading.Thread(target=loop.run_forever, daemon=True)
    t.start()
    yield srv
    loop.call_soon_threadsafe(loop.stop)
    t.join(5)


def load_cluster(port=1, **settings):
    """The backend's kind-like cluster plus two load nodes (zone-a, zone-b) labelled for the load; k-b, a Ray
    node, carries the label too: only the pod anti-affinity keeps the load off it."""
    s, b, stream = cluster()
    for n in (node("k-load-a", "zone-a", "region-1", labels=LOAD_NODE), node("k-load-b", "zone-b", "region-1",
                                                                          labels=LOAD_NODE)):
        s.nodes[n["metadata"]["name"]] = n
    s.nodes["k-b"]["metadata"]["labels"].update(LOAD_NODE)
    s.batch.containers.skew_ns.update(SKEW)
    b.load_job = kl.LoadJobSettings.from_dict({"in_cluster": True, "node_selector": LOAD_NODE,
                                               "serve_url": f"http://127.0.0.1:{port}", "start_timeout_s": 30,
                                               **settings})
    return s, b, stream


def shape(**kw):
    base = dict(mode="open", arrival="constant", rate=40, duration_s=1.5, max_requests=1000, warmup_s=0,
                timeout_s=5, route="completions", model="m", max_tokens=(2, 2), prompt_words=(2, 2), workers=2, seed=3)
    return LoadShape(**{**base, **kw})


def posted(s, suffix):
    return [body for m, p, body in s.calls if m == "POST" and p.split("?")[0].endswith(suffix) and "dryRun" not in p]


def run_pool(s, b, tmp_path, sh, during=None):
    events = rec.Events()
    writer = rec.RecordWriter(tmp_path / "records.ndjson").attach(events)
    defs = analysis.Definitions(analysis.SteadyState(window_s=1.0, min_success_ratio=0.9), analysis.SLO(), "service")
    pool = b.load_pool(sh, events, header_extra=summary_mod.header_block("t", "zone", defs, {}, "test", "stream"))
    try:
        pool.start()
        if during:
            during(pool)
        pool.join(timeout=90)
    finally:
        writer.close()
    return pool


# ------------------------------------------------------------------ the whole load, in the cluster
def test_the_workers_run_as_an_indexed_job_off_the_ray_nodes_and_their_records_merge(server, tmp_path):
    s, b, stream = load_cluster(server.port)
    sh = shape()
    refused = []

    def during(pool):  # while the load runs: a zone loss reaching a load pod's node is refused
        with pytest.raises(UsageError) as e:
            b.plan("zone", {"zone": "zone-a"})
        refused.append(str(e.value))

    pool = run_pool(s, b, tmp_path, sh, during)
    # the Job: Indexed, N pods at once, never retried, bounded, cleaned up after, off the Ray nodes
    (job,) = posted(s, "/jobs")
    spec = job["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 2, 2)
    assert (spec["backoffLimitPerIndex"], spec["maxFailedIndexes"]) == (0, 1) and "backoffLimit" not in spec
    assert spec["activeDeadlineSeconds"] >= sh.duration_s + 30 and spec["ttlSecondsAfterFinished"] > 0
    pod_spec = spec["template"]["spec"]
    assert pod_spec["restartPolicy"] == "Never" and pod_spec["nodeSelector"] == LOAD_NODE
    (term,) = pod_spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchExpressions"] == [{"key": "ray.io/cluster", "operator": "Exists"}]
    assert manifests.check_object(job) == []
    # the Job controller's pods: one per index, JOB_COMPLETION_INDEX from the index label, on the load nodes only
    assert sorted(pool.nodes) == ["k-load-a", "k-load-b"] and all(p.startswith(f"{pool.job}-") for p in pool.pods)
    assert [p.split("-")[-2] for p in pool.pods] == ["0", "1"]
    # each pod got exactly its share: plan[w::N], drawn once
    maps = posted(s, "/configmaps")
    assert [m["metadata"]["ownerReferences"][0]["kind"] for m in maps] == ["Job", "Job"]
    shares = [json.loads(gzip.decompress(base64.b64decode(m["binaryData"][kl.SPEC_KEY])))["share"] for m in maps]
    requests = list(plan(sh, Router([Target("serve-svc", f"http://127.0.0.1:{server.port}")])))
    want = deal([[r.id, r.offset_s, 0, r.prompt, r.max_tokens, r.prompt_len, r.clipped, r.prefix_group]
                 for r in requests], 2)
    assert shares == want and [x[0] for x in shares[1]] == [r.id for r in requests][1::2]
    # the records: every planned request once, from its worker, on the rig's clock
    path = tmp_path / "records.ndjson"
    rec.order_by_send_time(path)
    back = rec.read(path)
    assert not back.partial and sorted(r.id for r in back.requests) == [r.id for r in requests]
    assert all(r.worker == r.id % 2 and r.ok for r in back.requests)
    h, f = back.header, back.footer
    assert h["workers"]["where"] == "pods of a Kubernetes Job" and h["workers"]["job"] == pool.job
    assert h["targets"] == [{"name": "serve-svc", "url": f"http://127.0.0.1:{server.port}", "zone": None, "region": None}]
    # the clocks: each pod's offset (its node's skew) measured at the start and at the end, within its uncertainty
    for w, start in enumerate(h["workers"]["clock_start"]):
        skew = SKEW[pool.nodes[w]]
        end = f["workers"][w]["clock_end"]
        assert start["via"] == end["via"] == "exec" and start["mono_offset_ns"] is None
        for c in (start, end):
            assert 0 < c["uncertainty_ns"] < 1e9 and abs(c["wall_offset_ns"] - skew) <= c["uncertainty_ns"]
        line = f["workers"][w]
        assert line["wall_correction_ns"] == start["wall_offset_ns"] and line["pod"] == pool.pods[w]
        assert line["timestamp_uncertainty_ns"] >= start["uncertainty_ns"] and line["sent"] == len(shares[w])
    # corrected: a request's wall-clock instants agree with the rig's start and its offset, not with the pod's clock
    for r in back.requests:
        tol = f["workers"][r.worker]["timestamp_uncertainty_ns"] + 50_000_000
        assert abs(r.sent_ns - (h["started_ns"] + r.sent_offset_s * 1e9)) <= tol
        planned = next(x for x in requests if x.id == r.id).offset_s
        assert abs(r.planned_ns - (h["started_ns"] + planned * 1e9)) <= tol
    # the Job deleted at the end, its pods first (Foreground), its ConfigMaps with it
    assert f["job"] == pool.job and pool.job_deleted is True and not s.batch.jobs and not s.batch.job_pods(pool.job)
    assert not [k for k in s.configmaps if k[1].startswith(pool.job)]
    assert any(m == "DELETE" and "/jobs/" in p and "propagationPolicy=Foreground" in p for m, p in writes(s))
    # what was refused while it ran
    assert refused and "k-load-a (zone-a)" in refused[0] and "hosting load worker pod" in refused[0]
    # what `availproof analyse` derives from the merged file alone: the load as sent, per worker
    summary = summary_mod.derive(back, analysis.Definitions(analysis.SteadyState(window_s=1.0, min_success_ratio=0.9),
                                                            analysis.SLO(), "service"), {}, "test", None)
    assert summary["arrivals"]["per_worker"] == {"0": len(shares[0]), "1": len(shares[1])}
    # every line of the merged file is a published records line
    import jsonschema

    v = jsonschema.Draft202012Validator(json.loads((Path(schemas_init).parent / "records-line.schema.json").read_text()))
    for _, obj in rec.iter_lines(path):
        v.validate(obj)


def test_a_stop_ends_the_pods_early_and_deletes_the_job(server, tmp_path):
    s, b, _ = load_cluster(server.port)

    def during(pool):
        time.sleep(0.5)
        pool.stop()

    pool = run_pool(s, b, tmp_path, shape(duration_s=60), during)
    assert pool.footer["reason"] == "stopped" and pool.footer["sent"] < 60 * 40 / 4
    assert all(w["clock_end"] is not None for w in pool.footer["workers"])
    assert not s.batch.jobs and not s.batch.job_pods(pool.job)


def test_a_broken_log_stream_is_followed_again_without_losing_or_repeating_a_record(server, tmp_path):
    s, b, _ = load_cluster(server.port)
    s.batch.containers.break_first_after = 700  # the ready line and a few records, then a reset
    pool = run_pool(s, b, tmp_path, shape(workers=1))
    back = rec.read(tmp_path / "records.ndjson")
    ids = [r.id for r in back.requests]
    assert len(ids) == len(set(ids)) == pool.footer["sent"] == pool.footer["workers"][0]["forwarded"] > 0
    assert pool.footer["workers"][0]["clock_start"]["via"] == "exec"


def test_pods_that_cannot_be_placed_fail_the_start_in_one_line_and_the_job_is_deleted(tmp_path):
    """Nodes labelled for the load all run Ray pods of the cluster: the anti-affinity leaves none."""
    s, b, _ = load_cluster()
    for n in ("k-load-a", "k-load-b"):
        del s.nodes[n]
    b.load_job.start_timeout_s = 1.0
    pool = b.load_pool(shape(), rec.Events())
    with pytest.raises(ClusterError) as e:
        pool.start()
    text = str(e.value)
    assert "\n" not in text and "2 of 2 pods not running" in text and "nodes are available" in text
    assert "pod anti-affinity" in text and "node_selector" in text
    assert not s.batch.jobs and not s.batch.job_pods(pool.job)  # the rollback of the start: nothing left


# ------------------------------------------------------------------ blast radius
def load_pod(s, name, node_name, run="runX"):
    s.pods[name] = {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "uid": f"uid-{name}",
                                 "labels": {kl.RUN_LABEL: run, "job-name": f"availproof-load-{run}-x"}},
                    "spec": {"nodeName": node_name, "containers": [{"name": "load", "image": "availproof:dev"}]},
                    "status": {"phase": "Running"}}


@pytest.mark.parametrize("scope,args,where", [
    ("zone", {"zone": "zone-a"}, "k-load-a (zone-a)"),
    ("region", {"region": "region-1"}, "k-load-a (zone-a)"),
    ("partition", {"zone": "zone-a"}, "k-load-a (zone-a)"),
    ("node", {"node": "wb-1"}, "k-b (zone-b)"),
    ("drain", {"node": "wb-1", "deadline_s": 5}, "k-b (zone-b)"),
])
def test_a_fault_whose_scope_reaches_a_load_pods_node_is_refused_before_anything(scope, args, where, monkeypatch):
    fake_dashboard(monkeypatch, serve={"applications": {}})
    s, b, stream = load_cluster()
    load_pod(s, "load-0", "k-load-a")
    load_pod(s, "load-1", "k-b")  # as if placed before the anti-affinity: the check does not rely on it
    with pytest.raises(UsageError) as e:
        b.plan(scope, args)
    assert where in str(e.value) and "refusing to act" in str(e.value) and "\n" not in str(e.value)
    s.calls.clear()
    marker = faults.Marker()
    act = {"zone": lambda: kill_zone(b, marker, "zone-a"),
           "region": lambda: kill_region(b, marker, "region-1"),
           "partition": lambda: partition_zone(b, marker, "zone-a"),
           "node": lambda: kill_node(b, marker, node="wb-1"),
           "drain": lambda: drain_node(b, marker, node="wb-1", deadline_s=5.0, outage_s=None, poll_s=0.0)}
    with pytest.raises(UsageError, match="hosting load worker pod"):
        act[scope]()
    assert writes(s) == [] and stream.calls == [] and marker.marks == []  # nothing injected, nothing written


def test_faults_away_from_the_load_pods_are_not_refused():
    s, b, _ = load_cluster()
    load_pod(s, "load-0", "k-load-a")
    assert b.plan("zone", {"zone": "zone-c"}) and b.plan("partition", {"zone": "zone-b"})
    assert b.plan("node", {"node": "wb-1"}) and b.plan("region", {"region": "region-2"})
    s.pods["load-0"]["status"]["phase"] = "Succeeded"  # a pod done sends nothing: not in the way
    assert b.plan("zone", {"zone": "zone-a"})


# ------------------------------------------------------------------ permissions, leftovers, set-up
def test_the_preflight_reviews_what_the_job_needs_and_a_denial_refuses_in_one_line():
    s, b, stream = load_cluster()
    b.prepare("run1", "replica")
    reviews = {(r["spec"]["resourceAttributes"]["verb"], r["spec"]["resourceAttributes"]["resource"],
                r["spec"]["resourceAttributes"].get("group", ""), r["spec"]["resourceAttributes"].get("subresource", ""))
               for m, p, r in s.calls if p.endswith("/selfsubjectaccessreviews")}
    assert {("create", "jobs", "batch", ""), ("get", "jobs", "batch", ""), ("delete", "jobs", "batch", ""),
            ("create", "configmaps", "", ""), ("delete", "configmaps", "", ""), ("get", "pods", "", "log"),
            ("get", "pods", "", "exec"), ("create", "pods", "", "exec")} <= reviews
    assert any(m == "POST" and "/jobs" in p and "dryRun=All" in p for m, p, _ in s.calls)  # admission asked
    assert not s.batch.jobs  # a dry run stores nothing
    s.denied_access = {("get", "pods", "", "log")}
    with pytest.raises(SetupError) as e:
        b.prepare("run2", "replica")
    assert "may not get pods/log in namespace availproof [the workers' records" in str(e.value)
    assert "\n" not in str(e.value)
    b.load_job = None  # without the Job, none of it is asked
    s.calls.clear()
    b.prepare("run3", "replica")
    assert not [p for m, p, _ in s.calls if "/jobs" in p]


def test_every_call_the_load_makes_was_reviewed(server, tmp_path):
    s, b, stream = load_cluster(server.port)
    b.prepare("run1", "replica")
    s.calls.clear()
    stream.calls.clear()
    run_pool(s, b, tmp_path, shape(workers=1, duration_s=0.5))
    made = api_accesses(s, stream)
    wanted = {(a.verb, a.resource, a.group, a.subresource, a.namespaced)
              for a in kube_access.needed({"replica"}, load_in_cluster=True)}
    assert made and made - wanted == set()


def test_admission_refusing_the_load_pods_refuses_the_run_before_any_load():
    s, b, _ = load_cluster()
    b.load_job.resources = {}
    s.pod_security = "baseline"
    b.prepare("run1", "replica")  # the load pods need nothing baseline forbids
    from tests.unit import kube_fake

    real = kube_fake.pod_security_violations
    try:
        kube_fake.pod_security_violations = lambda spec: ["host namespaces (hostNetwork=true)"]
        with pytest.raises(SetupError) as e:
            b.prepare("run2", "replica")
    finally:
        kube_fake.pod_security_violations = real
    assert "admission refuses it" in str(e.value) and "violates PodSecurity" in str(e.value)


def test_a_crashed_runs_job_is_a_leftover_that_recover_removes(server):
    s, b, _ = load_cluster(server.port)
    b.run_id = "crashed1"
    job = kl.job_manifest(b.load_job, "crashed1", kl.job_name("crashed1", "x"), 1, b.cluster, 600)
    b.batch.create_namespaced_job("availproof", job)
    b.pods.pods()  # the Job controller makes its pod meanwhile
    (left,) = [x for x in b.leftovers() if x["kind"] == "Job"]
    assert left["name"] == job["metadata"]["name"] and left["run_id"] == "crashed1"
    with pytest.raises(SetupError, match=f"Job {left['name']}"):
        b.prepare("run2", "replica")
    b.remove_leftovers()
    assert any(m == "DELETE" and "propagationPolicy=Foreground" in p for m, p in writes(s))
    for _ in range(3):
        b.pods.pods()  # the garbage collector: the pods first, then the Job
    assert not s.batch.jobs and not s.batch.job_pods(left["name"]) and not b.leftovers()


def test_the_fake_job_api_orphans_pods_by_default_as_batch_v1_does():
    s, b, _ = load_cluster()
    job = kl.job_manifest(b.load_job, "r1", "availproof-load-r1-x", 2, b.cluster, 600)
    b.batch.create_namespaced_job("availproof", job)
    pods = [p for p in b.pods.pods() if p["metadata"]["labels"].get("job-name") == "availproof-load-r1-x"]
    assert len(pods) == 2
    env = pods[0]["spec"]["containers"][0]["env"]
    assert {"name": "JOB_COMPLETION_INDEX", "value": None, "value_from": {
        "config_map_key_ref": None, "field_ref": {"api_version": None,
                                                  "field_path": "metadata.labels['batch.kubernetes.io/job-completion-index']"},
        "file_key_ref": None, "resource_field_ref": None, "secret_key_ref": None}} in env
    assert {p["spec"]["hostname"] for p in pods} == {"availproof-load-r1-x-0", "availproof-load-r1-x-1"}
    b.batch.delete_namespaced_job("availproof-load-r1-x", "availproof")  # no propagationPolicy
    b.pods.pods()
    assert not s.batch.jobs and len(s.batch.job_pods("availproof-load-r1-x")) == 2  # orphaned, still there
    assert all(not p["metadata"].get("ownerReferences") for p in s.batch.job_pods("availproof-load-r1-x"))


# ------------------------------------------------------------------ settings and manifests
def test_settings_come_from_the_experiment_and_the_flags_and_are_checked_in_one_line():
    assert kl.settings_of({}) is None and kl.settings_of({"load": {"image": "x"}}) is None
    s = kl.settings_of({"load": {"image": "reg/a:1"}, "load_in_cluster": True})
    assert s.in_cluster and s.image == "reg/a:1"
    assert kl.settings_of({"load": {"in_cluster": True}, "load_image": "reg/b:2"}).image == "reg/b:2"
    for bad, needle in (({"in_cluster": True, "nodeSelector": {}}, r"unknown field\(s\) nodeSelector"),
                        ({"start_timeout_s": 1}, r"start_timeout_s must be in \[10, 3600\]"),
                        ({"serve_url": "svc:8000"}, r"serve_url must be an http\(s\) URL")):
        with pytest.raises(UsageError, match=needle):
            kl.LoadJobSettings.from_dict(bad)
    with pytest.raises(UsageError, match="sessions run in one harness process"):
        kl.check_load(LoadShape(sessions={"turns": 2}), sends_token=False)
    with pytest.raises(UsageError, match="bearer token"):
        kl.check_load(LoadShape(), sends_token=True)


def test_the_serve_url_defaults_to_the_rayservices_service_by_its_in_cluster_name():
    s = kl.LoadJobSettings(in_cluster=True)
    assert kl.serve_url(s, "availproof", "ns1") == "http://availproof-serve-svc.ns1.svc:8000"
    with pytest.raises(UsageError, match="plain RayCluster"):
        kl.serve_url(s, None, "ns1")


def test_the_job_and_configmap_manifests_validate_offline_and_a_broken_one_is_reported():
    s = kl.LoadJobSettings.from_dict({"in_cluster": True, "node_selector": LOAD_NODE,
                                      "tolerations": [{"key": "load", "operator": "Exists", "effect": "NoSchedule"}]})
    job = kl.job_manifest(s, "r1", kl.job_name("r1", "abc"), 3, "availproof-x7k2p", 900)
    cm = kl.configmap_manifest("r1", job["metadata"]["name"], 0, {"share": []}, owner_uid="u1")
    assert manifests.check_object(job) == [] and manifests.check_object(cm) == []
    assert len(job["metadata"]["name"]) + len("-63") <= 63  # the pods' hostnames <job>-<index> are DNS labels
    job["spec"]["template"]["spec"]["containers"][0]["imagePullPolicie"] = "Always"
    assert any("Job/" in p and "imagePullPolicie" in p for p in manifests.check_object(job))


def test_a_share_too_large_for_a_configmap_is_refused_before_anything():
    import random

    rng = random.Random(1)
    noise = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(2_000_000))
    with pytest.raises(UsageError, match="more than a ConfigMap holds"):
        kl.configmap_manifest("r1", "availproof-load-r1-x", 0, {"share": [noise]})


def test_workers_on_kuberay_without_the_job_stay_processes_of_the_rig():
    from chaos.core import experiment

    doc = {"title": "t", "method": [{"type": "action", "name": "x", "provider": {"type": "python", "module": "m",
                                                                                 "func": "f"}}],
           "extensions": [{"name": "availproof", "scope": "replica", "front": "direct",
                           "bounds": {"must_recover": True}, "load": {"workers": 2}}]}
    provision.check_capabilities("kuberay", experiment.settings(doc))  # not refused any more
    s, b, _ = load_cluster()
    b.load_job = None
    assert b.load_pool(shape(), rec.Events()) is None  # the run then starts a WorkerPool


def test_an_image_that_cannot_read_the_rigs_load_fails_the_start_naming_why(server, monkeypatch):
    """A pod whose availproof is another version (here: a load field it does not know) says so in its log
    before the start; the rig fails the start with that line, and deletes the Job."""
    from chaos.backends.kuberay.kube.load_pool import JobPool

    real = JobPool.worker_shape
    monkeypatch.setattr(JobPool, "worker_shape", lambda self, w: {**real(self, w), "from_the_future": 1})
    s, b, _ = load_cluster(server.port)
    pool = b.load_pool(shape(workers=1), rec.Events())
    with pytest.raises(ClusterError) as e:
        pool.start()
    assert "cannot read the rig's load" in str(e.value) and "from_the_future" in str(e.value)
    assert not s.batch.jobs and not s.batch.job_pods(pool.job)


def test_the_run_starts_the_job_pool_when_the_load_is_in_the_cluster_and_local_workers_otherwise(tmp_path):
    from types import SimpleNamespace

    from chaos.core import experiment, run as run_mod
    from chaos.backends.kuberay.kube.load_pool import JobPool
    from chaos.load.workers import WorkerPool

    doc = {"title": "t", "method": [{"type": "action", "name": "x", "provider": {"type": "python", "module": "m",
                                                                                 "func": "f"}}],
           "extensions": [{"name": "availproof", "scope": "replica", "front": "direct", "allow_hosts": ["s"],
                           "bounds": {"must_recover": True}, "load": {"workers": 2}}]}
    settings = experiment.settings(doc)
    s, b, _ = load_cluster(4242)
    run = SimpleNamespace(settings=settings, backend=b, events=rec.Events(), out_dir=tmp_path, front=None)
    pool = run_mod.new_load(run, settings.load, {"experiment": "t"})
    assert isinstance(pool, JobPool) and [t.url for t in pool.targets] == ["http://127.0.0.1:4242"]
    b.load_job = None
    pool = run_mod.new_load(run, settings.load, {"experiment": "t"})
    assert isinstance(pool, WorkerPool) and [t.url for t in pool.targets] == ["http://s"]
    assert not s.batch.jobs  # nothing started by either


def test_a_pod_worker_never_started_ends_by_itself(tmp_path):
    """No start from the rig within its bound: exit 1 (the Job fails, nothing was sent); a stop before the
    start: exit 0. Either way one done line says why."""
    import io

    from chaos.load import pod_worker as pw

    spec = {"worker": 0, "shape": shape(workers=1).to_dict(), "targets": [], "share": [], "go_timeout_s": 0.05}
    (tmp_path / "spec").mkdir()
    (tmp_path / "spec" / pw.spec_file(0)).write_bytes(pw.encode_spec(spec))
    (tmp_path / "control").mkdir()
    out = io.StringIO()
    assert pw.serve(tmp_path / "spec", tmp_path / "control", 0, out) == 1
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert [x["kind"] for x in lines] == [pw.READY, pw.DONE] and lines[1]["error"] == "no start from the rig in time"
    (tmp_path / "control" / pw.STOP).touch()
    out = io.StringIO()
    assert pw.serve(tmp_path / "spec", tmp_path / "control", 0, out) == 0
    assert json.loads(out.getvalue().splitlines()[-1])["error"] == "stopped before the start"
    assert pw.main(env={}, out=io.StringIO()) == 2  # not run by the Job: no index


def test_a_pod_workers_sigterm_is_the_rigs_stop_then_exit(tmp_path):
    """A pod's worker is its container's PID 1: without a handler the kubelet's SIGTERM would be ignored
    and the worker SIGKILLed at the grace period's end, its done line lost."""
    import os
    import signal

    from chaos.load import pod_worker

    previous = signal.getsignal(signal.SIGTERM)
    try:
        pod_worker.stop_on_sigterm(tmp_path)
        os.kill(os.getpid(), signal.SIGTERM)
        assert (tmp_path / pod_worker.STOP).exists() and (tmp_path / pod_worker.EXIT).exists()
    finally:
        signal.signal(signal.SIGTERM, previous)


# ------------------------------------------------------------------ one lost pod, the zones under test (issue 34)
def test_the_job_outlives_one_lost_pod_without_running_its_share_again_and_fails_at_the_second():
    s, b, _ = load_cluster()
    job = kl.job_manifest(b.load_job, "r1", "availproof-load-r1-x", 3, b.cluster, 600)
    b.batch.create_namespaced_job("availproof", job)
    pods = sorted(p["metadata"]["name"] for p in b.pods.pods() if p["metadata"]["labels"].get("job-name") == "availproof-load-r1-x")
    assert len(pods) == 3
    b.pods.pods()  # the Job controller's next sync sees them (it tracks its pods from then on)
    s.delete_pod(pods[0], 0)  # its node lost, the pod gone: index 0 failed
    b.pods.pods()
    left = sorted(p["metadata"]["name"] for p in b.pods.pods() if p["metadata"]["labels"].get("job-name") == "availproof-load-r1-x")
    status = s.batch.jobs["availproof-load-r1-x"]["status"]
    assert left == pods[1:] and status["failedIndexes"] == "0"  # the others run on, index 0 not created again
    assert not any(c["type"] == "Failed" for c in status.get("conditions") or [])
    s.delete_pod(pods[1], 0)  # a second one: the Job fails (its other pods terminated)
    b.pods.pods()
    assert any(c.get("reason") == "MaxFailedIndexesExceeded" for c in s.batch.jobs["availproof-load-r1-x"]["status"]["conditions"])
    rules = job["spec"]["podFailurePolicy"]["rules"]
    assert rules == [{"action": "FailIndex", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}]


def test_the_load_pods_are_kept_out_of_the_zones_the_run_will_hit_from_the_start():
    s, b, _ = load_cluster()
    b.prepare("r1", "zone", [{"scope": "zone", "arguments": {"zone": "zone-a"}},
                             {"scope": "partition", "arguments": {"zone": "zone-c"}}])
    assert b.load_avoid_zones == ["zone-a", "zone-c"]
    dry = next(body for m, p, body in s.calls if m == "POST" and p.endswith("/jobs?dryRun=All"))
    (term,) = dry["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term == {"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "NotIn",
                                          "values": ["zone-a", "zone-c"]}]}
    job = kl.job_manifest(b.load_job, "r1", "availproof-load-r1-y", 2, b.cluster, 600, avoid_zones=b.load_avoid_zones)
    assert manifests.check_object(job) == []
    b.batch.create_namespaced_job("availproof", job)
    placed = {p["spec"].get("node_name") for p in b.pods.pods() if p["metadata"]["labels"].get("job-name") == "availproof-load-r1-y"}
    assert "k-load-a" not in placed  # the load node in zone-a is never used, though it carries the load's label
