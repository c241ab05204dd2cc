"""Recovery per fault, per population, from the request records alone. Plain Python: no Ray, no Kubernetes.

The docstrings of these modules are the reference for every data-plane figure (the README repeats
them in short). All instants are ``time.time_ns()`` values; every figure is in seconds relative to the
fault's ``inject_start`` mark. Warm-up requests are left out everywhere.

- :mod:`chaos.analysis.windows`: what a summary is computed with (steady state, SLO, definitions),
  the faults from their marks, a fault's analysis window and the windows judged in it;
- :mod:`chaos.analysis.populations`: populations, recovery per population, the service-wide figures of a
  fault, honest nulls, and :func:`analyse`, the summary of one run;
- :mod:`chaos.analysis.who_served`: who served, against where the client is (before, during, after);
- :mod:`chaos.analysis.cold_cache`: the replacement replica's cold prefix cache;
- :mod:`chaos.analysis.new_version`: an upgrade complete once the new version serves (from the responses);
- :mod:`chaos.analysis.slow_replica`: a slow replica's share of the requests and latency against the others';
- :mod:`chaos.analysis.retries`: a client's retries: attempts grouped into logical requests, what users saw,
  the amplification per population;
- :mod:`chaos.analysis.continuity`: a fault's streams token by token (lost, duplicated, corrupted, migrated);
- :mod:`chaos.analysis.orphans`: the engines of the replica a fault killed or replaced, gone and when;
- :mod:`chaos.analysis.sending`: the load as it was sent, and the client's send lag.

Every name is re-exported here: ``from chaos import analysis; analysis.analyse(...)``.

Also here: the figure catalogue (:mod:`chaos.analysis.figures`, data that every part may read), the control plane's
and capacity's recovery (:mod:`chaos.analysis.planes`) and lost service-seconds
(:mod:`chaos.analysis.lost_service`).

May import: chaos.base, chaos.recording, chaos.scopes, chaos.system.frontdoor (the front door's figures, read by the
planes).
"""

from chaos.analysis.cold_cache import NO_PREFIX_SHARING, prefix_sharing_basis, warmup
from chaos.analysis.continuity import token_continuity
from chaos.analysis.orphans import orphans_of
from chaos.analysis.populations import a_or_an, affected_basis, analyse, analyse_fault, recovery
from chaos.analysis.retries import logical_requests
from chaos.analysis.sending import arrivals, send_lag_ms
from chaos.analysis.slow_replica import straggler
from chaos.analysis.who_served import locality
from chaos.analysis.windows import (FORMAT_VERSION, INSUFFICIENT, NS, POPULATIONS, SLO, Definitions, Fault,
                                    SteadyState, faults_from_marks, judge_windows, latency, request_end_ns,
                                    run_end_ns, window_requests, window_state)
from chaos.base.stats import percentile  # the rig's one convention: nearest rank

__all__ = ["FORMAT_VERSION", "INSUFFICIENT", "NO_PREFIX_SHARING", "NS", "POPULATIONS", "SLO", "Definitions", "Fault",
           "SteadyState", "a_or_an", "affected_basis", "analyse", "analyse_fault", "arrivals", "faults_from_marks",
           "judge_windows", "latency", "locality", "logical_requests", "orphans_of", "percentile", "prefix_sharing_basis",
           "recovery", "request_end_ns", "run_end_ns", "send_lag_ms", "straggler", "token_continuity", "warmup",
           "window_requests", "window_state"]
