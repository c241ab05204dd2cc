"""Offline validation of the KubeRay manifests: the shipped ones pass, broken ones fail clearly."""

import copy

import pytest
import yaml

from chaos.system import manifests
from serve_apps import kuberay

OVERLAYS = ["stream-kind", "vllm-gpu"]


@pytest.fixture(scope="module")
def rendered():
    return {o: manifests.render_overlay(kuberay.ROOT / "overlays" / o) for o in OVERLAYS}


def rayservice(objs):
    return copy.deepcopy(next(o for o in objs if o["kind"] == "RayService"))


def test_crds_are_there():
    assert (manifests.crd_dir() / "ray.io_rayservices.yaml").exists()


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_shipped_overlays_render_and_validate(overlay, rendered):
    objs = rendered[overlay]
    assert {o["kind"] for o in objs} >= {"RayService", "Deployment", "Service", "PersistentVolumeClaim"}
    # no Redis password committed: the Secret is made at install (kind-smoke.sh generates one)
    assert not [o for o in objs if o["kind"] == "Secret"]
    redis = next(o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == "redis")
    assert redis["spec"]["template"]["spec"]["shareProcessNamespace"] is True  # redis-server not PID 1: killable
    problems = [p for o in objs for p in manifests.check_object(o)]
    assert problems == []


def test_generated_files_match_the_serve_config_source():
    for path, text in kuberay.render().items():
        assert path.read_text() == text, f"{path} is stale: run `python -m serve_apps.kuberay`"


def test_high_availability_choices(rendered):
    rs = rayservice(rendered["stream-kind"])
    spec = rs["spec"]
    assert spec["excludeHeadPodFromServeSvc"] is True
    cs = spec["rayClusterConfig"]
    assert cs["headGroupSpec"]["rayStartParams"]["num-cpus"] == "0"
    ft = cs["gcsFaultToleranceOptions"]
    assert ft["redisPassword"]["valueFrom"]["secretKeyRef"]["name"] == "redis-password"
    zones = [g["template"]["spec"]["nodeSelector"]["topology.kubernetes.io/zone"] for g in cs["workerGroupSpecs"]]
    assert zones == ["zone-a", "zone-b", "zone-c"]
    assert [g["labels"]["zone"] for g in cs["workerGroupSpecs"]] == zones
    serve = yaml.safe_load(spec["serveConfigV2"])
    sel = serve["applications"][0]["deployments"][0]["ray_actor_options"]["label_selector"]
    assert sel == {"zone": "in(zone-a,zone-b,zone-c)"}
    assert serve["applications"][0]["deployments"][0]["num_replicas"] == 3


def test_misspelled_field_is_rejected(rendered):
    rs = rayservice(rendered["stream-kind"])
    rs["spec"]["excludeHeadPodFromServeSvcc"] = rs["spec"].pop("excludeHeadPodFromServeSvc")
    problems = manifests.check_object(rs)
    assert any("excludeHeadPodFromServeSvcc" in p and "RayService/availproof" in p for p in problems), problems


def test_misspelled_nested_field_is_rejected(rendered):
    rs = rayservice(rendered["stream-kind"])
    ft = rs["spec"]["rayClusterConfig"]["gcsFaultToleranceOptions"]
    ft["redisAdress"] = ft.pop("redisAddress")
    problems = manifests.check_object(rs)
    assert any("gcsFaultToleranceOptions" in p and "redisAdress" in p for p in problems), problems


def test_wrong_enum_is_rejected(rendered):
    rs = rayservice(rendered["stream-kind"])
    rs["spec"]["rayClusterConfig"]["gcsFaultToleranceOptions"]["backend"] = "etcd"
    problems = manifests.check_object(rs)
    assert any("gcsFaultToleranceOptions.backend" in p and "etcd" in p for p in problems), problems


def test_forbidden_env_var_and_start_param_are_rejected(rendered):
    rs = rayservice(rendered["stream-kind"])
    head = rs["spec"]["rayClusterConfig"]["headGroupSpec"]
    head["template"]["spec"]["containers"][0]["env"] = [{"name": "RAY_REDIS_ADDRESS", "value": "redis:6379"}]
    rs["spec"]["rayClusterConfig"]["workerGroupSpecs"][1]["rayStartParams"]["redis-password"] = "x"
    problems = manifests.check_object(rs)
    assert any("RAY_REDIS_ADDRESS" in p for p in problems), problems
    assert any("workerGroupSpecs[1].rayStartParams.redis-password" in p for p in problems), problems


def test_bad_pod_template_is_rejected_by_core_schema(rendered):
    rs = rayservice(rendered["stream-kind"])
    rs["spec"]["rayClusterConfig"]["workerGroupSpecs"][0]["template"]["spec"]["containers"][0]["imagePullPolicie"] = "x"
    problems = manifests.check_object(rs)
    assert any("workerGroupSpecs[0].template" in p for p in problems), problems


def test_serve_config_unknown_key_and_type_error(rendered):
    rs = rayservice(rendered["stream-kind"])
    cfg = yaml.safe_load(rs["spec"]["serveConfigV2"])
    cfg["applications"][0]["deployments"][0]["num_replica"] = 3
    rs["spec"]["serveConfigV2"] = yaml.safe_dump(cfg)
    problems = manifests.check_object(rs)
    assert any("serveConfigV2" in p and "num_replica" in p for p in problems), problems
    cfg["applications"][0]["deployments"][0].pop("num_replica")
    cfg["applications"][0]["deployments"][0]["num_replicas"] = "three"
    rs["spec"]["serveConfigV2"] = yaml.safe_dump(cfg)
    assert any("serveConfigV2" in p for p in manifests.check_object(rs))


def test_core_object_misspelling_is_rejected(rendered):
    dep = copy.deepcopy(next(o for o in rendered["stream-kind"] if o["kind"] == "Deployment"))
    dep["spec"]["replica"] = 1
    assert any("Deployment/redis" in p for p in manifests.check_object(dep))


def test_gpu_overlay_is_deployable_on_gke_and_eks_as_written(rendered):
    """The image from a registry (kustomize ``images:``, pulled: no local ``:dev`` tag), the checkpoint
    fetched into each worker pod's own volume (no ReadOnlyMany claim, which zonal disks cannot give),
    the head and Redis on the control-plane node pool and in no zone under test, no secret committed."""
    objs = rendered["vllm-gpu"]
    text = yaml.safe_dump(objs)
    assert "availproof-vllm:dev" not in text and "ReadOnlyMany" not in text
    assert not [o for o in objs if o["kind"] in ("PersistentVolumeClaim", "Secret", "ConfigMap")
                and o["metadata"]["name"] in ("availproof-models", "availproof-model", "redis-password")]
    rs = rayservice(objs)
    cs = rs["spec"]["rayClusterConfig"]
    zones = [g["template"]["spec"]["nodeSelector"]["topology.kubernetes.io/zone"] for g in cs["workerGroupSpecs"]]
    image = "registry.example.com/availproof/availproof-vllm:0.1.0"  # the kustomization's images: entry
    for _, template in manifests.pod_templates(rs):
        for c in template["spec"]["containers"] + template["spec"].get("initContainers", []):
            assert c["image"] == image and c["imagePullPolicy"] == "Always", c["name"]
    for g in cs["workerGroupSpecs"]:
        spec = g["template"]["spec"]
        c = spec["containers"][0]
        assert c["resources"]["limits"]["nvidia.com/gpu"] == "1" == c["resources"]["requests"]["nvidia.com/gpu"]
        assert {"name": "models", "mountPath": "/models", "readOnly": True} in c["volumeMounts"]
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert volumes["models"] == {"name": "models", "emptyDir": {}}
        fetch = spec["initContainers"][0]
        assert fetch["name"] == "fetch-model" and {"name": "models", "mountPath": "/models"} in fetch["volumeMounts"]
        env = {e["name"]: e for e in fetch["env"]}
        assert env["MODEL_URL"]["valueFrom"]["configMapKeyRef"] == {"name": kuberay.MODEL_SOURCE, "key": "url"}
        assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"]["optional"] is True
    llm = yaml.safe_load(rs["spec"]["serveConfigV2"])["applications"][0]["args"]["llm_configs"][0]
    assert llm["model_loading_config"]["model_source"] == kuberay.MODEL_DIR
    redis = next(o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == "redis")
    for spec in (cs["headGroupSpec"]["template"]["spec"], redis["spec"]["template"]["spec"]):
        assert spec["nodeSelector"] == {kuberay.CONTROL_PLANE_LABEL: "true"}
        term = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        assert term == [{"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "NotIn",
                                               "values": zones}]}]


def test_the_model_fetch_unpacks_a_checkpoint_from_a_url_and_refuses_what_it_cannot_use(tmp_path):
    """The init container's script (sh and Python, as in the GPU image) against a local HTTP server."""
    import functools
    import http.server
    import os
    import subprocess
    import sys
    import tarfile
    import threading

    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_text("{}")
    (src / "model.safetensors").write_bytes(b"0" * 64)
    with tarfile.open(tmp_path / "ckpt.tar.gz", "w:gz") as tar:
        for f in src.iterdir():
            tar.add(f, arcname=f.name)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    handler.log_message = lambda *a: None
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    env = {**os.environ, "PATH": f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}"}

    def fetch(url, dest):
        return subprocess.run(["sh", "-c", kuberay.FETCH_MODEL], env={**env, "MODEL_URL": url, "MODEL_DIR": str(dest)},
                              capture_output=True, text=True, timeout=60)

    try:
        port = server.server_address[1]
        done = fetch(f"http://127.0.0.1:{port}/ckpt.tar.gz", tmp_path / "m1")
        assert done.returncode == 0, done.stderr
        assert sorted(p.name for p in (tmp_path / "m1").iterdir()) == ["config.json", "model.safetensors"]
        assert fetch(f"http://127.0.0.1:{port}/ckpt.tar.gz", tmp_path / "m1").stdout.startswith("the checkpoint is in")
        bad = fetch("s3://bucket/model", tmp_path / "m2")
        assert bad.returncode == 2 and "must be hf://REPO[@REVISION] or the http(s) URL" in bad.stderr
        (src / "config.json").unlink()
        with tarfile.open(tmp_path / "empty.tar", "w") as tar:
            tar.add(src / "model.safetensors", arcname="model.safetensors")
        missing = fetch(f"http://127.0.0.1:{port}/empty.tar", tmp_path / "m3")
        assert missing.returncode == 3 and "no config.json at the top" in missing.stderr
    finally:
        server.shutdown()


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_no_deprecated_field_and_no_dead_volume(overlay, rendered):
    rs = rayservice(rendered[overlay])
    assert not {"serviceUnhealthySecondThreshold", "deploymentUnhealthySecondThreshold"} & set(rs["spec"])
    for _, template in manifests.pod_templates(rs):
        spec = template["spec"]
        mounted = {m["name"] for c in spec["containers"] for m in c.get("volumeMounts") or []}
        assert {v["name"] for v in spec.get("volumes") or []} <= mounted


def test_nodeports_select_one_ray_cluster(rendered):
    for svc in (o for o in rendered["stream-kind"] if o["kind"] == "Service" and o["spec"].get("type") == "NodePort"):
        assert "ray.io/cluster" in svc["spec"]["selector"], svc["metadata"]["name"]
    smoke = (kuberay.ROOT / "kind-smoke.sh").read_text()
    assert "activeServiceStatus.rayClusterName" in smoke and "ray.io/cluster" in smoke


def test_a_gpu_worker_fits_the_common_one_gpu_nodes_of_8_vcpu_and_32_gib(rendered):
    """GKE g2-standard-8 (L4), EKS g5.2xlarge (A10G) and g6.2xlarge (L4): about 7.9 CPU and 28 GiB allocatable
    at the smallest, less ~1 CPU and ~2 GiB of DaemonSets: a worker pod (init container included) must ask
    at most 6.9 CPU and 26 GiB, and Ray must be told the CPUs the pod has (issue 34: 8 / 32Gi never fit)."""
    def cpu(v: str) -> float:
        return float(v[:-1]) / 1000 if v.endswith("m") else float(v)

    def gib(v: str) -> float:
        return float(v[:-2]) if v.endswith("Gi") else float(v[:-2]) / 1024

    cs = rayservice(rendered["vllm-gpu"])["spec"]["rayClusterConfig"]
    for g in cs["workerGroupSpecs"]:
        spec = g["template"]["spec"]
        main = spec["containers"][0]["resources"]["requests"]
        inits = [c.get("resources", {}).get("requests", {}) for c in spec.get("initContainers", [])]
        need_cpu = max([cpu(main["cpu"])] + [cpu(r["cpu"]) for r in inits if "cpu" in r])
        need_mem = max([gib(main["memory"])] + [gib(r["memory"]) for r in inits if "memory" in r])
        assert need_cpu <= 6.9 and need_mem <= 26, (g["groupName"], main)
        assert main["nvidia.com/gpu"] == "1" and g["rayStartParams"]["num-cpus"] == main["cpu"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_worker_mounts_its_nodes_device_loss_directory_where_the_hook_reads_it(overlay, rendered):
    """device-loss's marker is the Kubernetes node's (issue 46): a hostPath directory of the node, mounted in every
    Ray worker at serve_apps.device_loss.node_dir("") (the key empty on KubeRay), so a replacement pod placed on the
    bad node sees it too; the head runs no replica (num-cpus 0) and has none."""
    from serve_apps.device_loss import node_dir

    cs = rayservice(rendered[overlay])["spec"]["rayClusterConfig"]
    for g in cs["workerGroupSpecs"]:
        spec = g["template"]["spec"]
        (volume,) = [v for v in spec["volumes"] if "hostPath" in v]
        assert volume["hostPath"] == {"path": kuberay.DEVICE_LOSS_HOST_DIR, "type": "DirectoryOrCreate"}
        mounts = [m for m in spec["containers"][0]["volumeMounts"] if m["name"] == volume["name"]]
        assert mounts == [{"name": volume["name"], "mountPath": node_dir("")}], g["groupName"]
