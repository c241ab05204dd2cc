"""The commands of ``availproof`` (:mod:`chaos.commands.cli`), grouped: the local cluster's (:mod:`.cluster`), those that
run experiments (:mod:`.runs`), those that read what runs left (:mod:`.results`); what they share
(:mod:`.common`) and the parser (:mod:`.parser`).

May import: any other package of chaos; none imports it (its :mod:`.cli` is the ``availproof`` entry point).
"""
