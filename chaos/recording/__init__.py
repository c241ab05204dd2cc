"""The records of a run: request records, fault marks and samples on one timeline, written as NDJSON while
the run goes (:mod:`.records`), the observers every record is published to (:mod:`.events`), and the records read
back as columns (:mod:`.record_columns`, :mod:`.request_columns`). Everything the rig measures is derived from
these files alone. May import: chaos.base."""
