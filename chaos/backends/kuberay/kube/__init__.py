"""The KubeRay backend's Kubernetes pieces, each a plain module over pod and node dicts and the API's clients:
:mod:`.access` (the permissions each scope's fault and heal need), :mod:`.autoscale` (node autoscalers),
:mod:`.pod_exec` (commands in pods), :mod:`.labels` (label spellings), :mod:`.load` and :mod:`.load_pool` (the load
workers as a Job's pods), :mod:`.marks` (run marks and their deadlines), :mod:`.partition` (network partitions),
:mod:`.zone` (zone loss: cordons and the watch), :mod:`.client` (the clients and the clock the backend's parts use).
They import nothing of the backend's class or its parts."""
