"""What runs inside Ray: the vLLM-backed LLM app, the model-free streaming target, the offline
checkpoint builder, and the one Serve config source that also renders KubeRay's serveConfigV2."""
