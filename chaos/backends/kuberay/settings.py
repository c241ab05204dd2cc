"""The KubeRay backend's own settings from the experiment's ``kubernetes`` block: what the constructor takes
beyond the target (``max_nodes``: the nodes a zone or region loss may cordon, default ``max_pods``;
``helper_image``: the node-filter partition helper's image, default a public one, for clusters that pull from
their own registry only). Each checked in one line. ``chaos.core.provision.kuberay_backend`` passes
``**backend_settings(k)`` to :class:`~chaos.backends.kuberay.KubeRayBackend` (the hook is the shared module's)."""

from __future__ import annotations

from chaos.backends.kuberay.kube import partition as kp
from chaos.base.errors import UsageError


def backend_settings(k: dict | None) -> dict:
    """``{"max_nodes": int | None, "helper_image": str}`` from the ``kubernetes`` block ``k`` (absent: the
    defaults); a wrong type or value raises one line naming the field."""
    k = k or {}
    out: dict = {"max_nodes": None, "helper_image": kp.HELPER_IMAGE}
    top = k.get("max_nodes")
    if top is not None:
        if isinstance(top, bool) or not isinstance(top, int) or top < 1:
            raise UsageError(f"kubernetes.max_nodes must be a whole number of nodes, at least 1, got {top!r}")
        out["max_nodes"] = top
    image = k.get("helper_image")
    if image is not None:
        if not isinstance(image, str) or not image.strip() or any(c.isspace() for c in image):
            raise UsageError(f"kubernetes.helper_image must be an image reference (REGISTRY/NAME:TAG), got {image!r}")
        out["helper_image"] = image
    return out
