"""Ray Serve LLM's node initialization skipped for a checkpoint already on the node
(serve_apps/llm_node_init.py), and kept for anything that must be fetched."""

from __future__ import annotations

import asyncio
import os
from types import SimpleNamespace

import pytest

from serve_apps import llm_app, llm_node_init
from serve_apps.llm_node_init import LocalCheckpoint, is_local_checkpoint


class _LLMConfig:
    """The one thing the callback reads of Ray's LLMConfig: its engine config's model source and mirror."""

    def __init__(self, source, mirror=None):
        self.engine = SimpleNamespace(actual_hf_model_id=source, mirror_config=mirror)

    def get_engine_config(self):
        return self.engine


def _run(source, mirror=None) -> LocalCheckpoint:
    cb = LocalCheckpoint(llm_config=_LLMConfig(source, mirror), ctx_kwargs={"runtime_env": {}})
    asyncio.run(cb.run_callback("on_before_node_init"))  # as vLLMEngine.start calls it
    return cb


def test_a_checkpoint_directory_on_the_node_skips_the_download_task(tmp_path, monkeypatch):
    monkeypatch.setattr(llm_node_init, "torch_kernels_dir", lambda: str(tmp_path / "torch" / "kernels"))
    checkpoint = tmp_path / "tiny-llama"
    checkpoint.mkdir()
    cb = _run(str(checkpoint))
    assert cb.ctx.run_init_node is False
    assert os.path.isdir(tmp_path / "torch" / "kernels")  # what the skipped task would have made first


@pytest.mark.parametrize("source, mirror", [
    ("meta-llama/Llama-3.1-8B-Instruct", None),  # a hub id: fetched (not here: no hub is reachable)
    ("s3://bucket/model", None),  # a remote path: fetched
    ("/no/such/dir", None),  # not on this node
    ("HERE", SimpleNamespace(bucket_uri="s3://bucket/model")),  # a mirror configured: Ray's own download
    (None, None),
])
def test_anything_to_fetch_keeps_rays_node_initialization(source, mirror, tmp_path):
    source = str(tmp_path) if source == "HERE" else source
    assert is_local_checkpoint(source, mirror) is False
    assert _run(source, mirror).ctx.run_init_node is True


def test_the_llm_app_names_the_callback_and_ray_can_load_it():
    from ray.llm._internal.common.utils.import_utils import load_class  # how LLMConfig loads callback_class

    spec = SimpleNamespace(llm=SimpleNamespace(model_id="m", model_path="/models/m", num_cpus=1, dtype="float32",
                                               max_model_len=512, kv_cache_bytes=1, ), stall_s=None,
                           kv_cache_blocks=None)
    conf = llm_app.llm_config(spec, {"num_replicas": 3})
    assert load_class(conf["callback_config"]["callback_class"]) is LocalCheckpoint
