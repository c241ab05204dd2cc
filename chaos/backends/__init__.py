"""Fault backends: the only code that touches processes, namespaces or the Kubernetes API.

Every backend implements :class:`chaos.backends.base.Backend`; faults are written once
against that interface.

May import: chaos.base, chaos.core.experiment (a backend's settings), chaos.load (the KubeRay load pool),
chaos.recording, chaos.scopes, chaos.system.
"""
