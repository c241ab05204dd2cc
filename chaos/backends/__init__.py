"""Fault backends: the only code that touches processes, namespaces or the Kubernetes API.

Every backend implements :class:`chaos.backends.base.Backend`; faults are written once
against that interface.
"""
