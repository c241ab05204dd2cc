"""The local backend: a real multi-node Ray cluster on one machine, one raylet per node."""

from chaos.backends.local.cluster import LocalCluster, default_cluster_dir

__all__ = ["LocalCluster", "default_cluster_dir"]
