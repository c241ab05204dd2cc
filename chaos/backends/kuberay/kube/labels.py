"""The Kubernetes well-known node labels the rig reads (``k8s.io/api`` ``core/v1/well_known_labels.go``):
one spelling, imported by every backend module that selects or pins by zone or region."""

ZONE_LABEL = "topology.kubernetes.io/zone"
REGION_LABEL = "topology.kubernetes.io/region"
