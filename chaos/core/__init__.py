"""The run core: one experiment run's lifecycle, start to end (:mod:`.run`, its state :mod:`.run_state`, its
moments as a driver hands them over :mod:`.moments`), what it is given (the experiment file :mod:`.experiment`,
the command's :mod:`.options`, both read once into :mod:`.run_spec`; checked up front by :mod:`.validate`; its
faults planned by :mod:`.plan`), the system brought up for it (:mod:`.provision`, :mod:`.client_security`), what
guards it (:mod:`.baseline_gate`, :mod:`.stop_conditions`, :mod:`.settle`), what it decides and leaves
(:mod:`.bounds`, :mod:`.verdict`, :mod:`.summary`, :mod:`.environment`, and :mod:`.evidence`, the one reader of the
runs a directory holds), and the drivers of runs (:mod:`.runner` through Chaos Toolkit and its session,
:mod:`.capacity_run`, the experiments of :mod:`.suite`). Nothing here parses a command line or renders a report.
May import: chaos.analysis, chaos.backends, chaos.base, chaos.ctk.session, chaos.load, chaos.recording,
chaos.schemas, chaos.scopes, chaos.system."""
