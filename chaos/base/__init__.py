"""What every part of the rig may read, and which reads nothing of the rig itself: the errors a user can act
on (:mod:`.errors`: one line and an exit code each), the registry of failure scopes (:mod:`.scope_registry`: what a
scope is and which are registered; :mod:`chaos.scopes` registers the built-in ones and is its API), the
statistics over trials (:mod:`.stats`), and read-only JSON values (:mod:`.readonly`: what a parsed experiment
holds). Its modules sit below every other package, so that the records, the system and the scopes can read them
without importing a package that imports them back. May import: nothing of
chaos."""
