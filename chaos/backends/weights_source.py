"""Which weights file a replacement replica of the deployed app loads at its start (``restart-fails``, issue 48),
read from the app's deployed config (Serve's details, ``deployed_app_config``); both backends ask it.

- the stream target (its own ingress, or behind the migrating ingress): its ``weights_path`` argument, else the
  rig's default file on the node (:func:`serve_apps.stream_weights.default_path`, resolved where the replica runs:
  :data:`NODE_DEFAULT` here, which :mod:`serve_apps.weights_swap` resolves on the node);
- vLLM (``ray.serve.llm:build_openai_app``): ``model.safetensors`` in its ``model_source`` directory (the checkpoint
  the rig built, or a user's: a checkpoint sharded into several files is refused, one file is not all the weights).
"""

from __future__ import annotations

import glob
import os

from chaos.base.errors import UsageError
from serve_apps.weights_swap import NODE_DEFAULT  # the stream target's default file, resolved on the node

STREAM_IMPORTS = ("serve_apps.stream_target", "serve_apps.migrating_ingress")


def of_app(app: dict) -> dict:
    """``{"app": "stream" | "llm", "path": <file or NODE_DEFAULT>, "checkpoint": <dir or None>}`` of one Serve
    application's details; UsageError when the app is not deployed or its weights cannot be told."""
    cfg = app.get("deployed_app_config") or {}
    imp = cfg.get("import_path") or ""
    args = cfg.get("args") or {}
    if not imp:
        raise UsageError("restart-fails: the Serve app is not deployed: no weights to make unreadable")
    if imp.startswith(STREAM_IMPORTS):
        return {"app": "stream", "path": args.get("weights_path") or NODE_DEFAULT, "checkpoint": None}
    configs = args.get("llm_configs") or []
    source = ((configs[0] if configs else {}).get("model_loading_config") or {}).get("model_source")
    if not source:
        raise UsageError(f"restart-fails: app {imp!r} names no model_source: its weights cannot be told")
    return {"app": "llm", "path": os.path.join(source, "model.safetensors"), "checkpoint": source}


def check_single_file(checkpoint: str) -> None:
    """Refuse a checkpoint whose weights are not one ``model.safetensors`` (local paths only)."""
    files = sorted(glob.glob(os.path.join(checkpoint, "*.safetensors")))
    if files != [os.path.join(checkpoint, "model.safetensors")]:
        raise UsageError(f"restart-fails: checkpoint {checkpoint} holds {len(files)} safetensors file(s), not one "
                         "model.safetensors: making one unreadable would not be the weights' loss")
