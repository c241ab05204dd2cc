"""Offline validation of the KubeRay manifests: the shipped ones pass, broken ones fail clearly."""

import copy

import pytest
import yaml

from chaos import manifests
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


def test_gpu_overlay_requests_gpus_mounts_the_model_and_has_no_kind_only_selector(rendered):
    objs = rendered["vllm-gpu"]
    assert "availproof.io/control-plane-zone" not in yaml.safe_dump(objs)
    rs = rayservice(objs)
    cs = rs["spec"]["rayClusterConfig"]
    assert cs["headGroupSpec"]["template"]["spec"].get("nodeSelector") is None
    for g in cs["workerGroupSpecs"]:
        spec = g["template"]["spec"]
        c = spec["containers"][0]
        assert c["image"] == kuberay.GPU_IMAGE
        assert c["resources"]["limits"]["nvidia.com/gpu"] == "1" == c["resources"]["requests"]["nvidia.com/gpu"]
        assert {"name": "models", "mountPath": "/models", "readOnly": True} in c["volumeMounts"]
        claims = {v["name"]: v.get("persistentVolumeClaim", {}).get("claimName") for v in spec["volumes"]}
        assert claims["models"] == kuberay.MODELS_CLAIM
    assert any(o["kind"] == "PersistentVolumeClaim" and o["metadata"]["name"] == kuberay.MODELS_CLAIM for o in objs)
    llm = yaml.safe_load(rs["spec"]["serveConfigV2"])["applications"][0]["args"]["llm_configs"][0]
    assert llm["model_loading_config"]["model_source"] == "/models/model"
    redis = next(o for o in objs if o["kind"] == "Deployment")
    assert "nodeSelector" not in redis["spec"]["template"]["spec"]


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
