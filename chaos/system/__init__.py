"""The system under test, as the rig reaches it: the Ray dashboard's HTTP API (:mod:`.ray_dashboard`), Serve
apps deployed through it (:mod:`.deploy`) and where their replicas run (:mod:`.placement`), a replica killed through
Ray (:mod:`.ray_actor`), the failure domains (:mod:`.topology`), the control-plane sampler (:mod:`.sampler`), the
front door and its TLS (:mod:`.frontdoor`, :mod:`.tls`), secrets kept out of the rig's processes
(:mod:`.secret_env`), the run's metrics and a Prometheus that scrapes them (:mod:`.metrics`, :mod:`.prometheus`),
the orphan check (:mod:`.orphan_watch`) and the KubeRay manifests checked offline (:mod:`.manifests`). It runs no
experiment. May import: chaos.analysis.figures, chaos.backends.local (the local cluster's state and ports, for
Prometheus), chaos.base, chaos.recording, chaos.schemas."""
