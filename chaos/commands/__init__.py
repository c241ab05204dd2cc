"""The commands of ``availproof`` (:mod:`chaos.cli`), grouped: the local cluster's (:mod:`.cluster`), those that
run experiments (:mod:`.runs`), those that read what runs left (:mod:`.results`); what they share
(:mod:`.common`) and the parser (:mod:`.parser`)."""
