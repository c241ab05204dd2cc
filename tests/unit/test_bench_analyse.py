"""bench/analyse.py's measurement of one process: it returns whatever the process writes to stderr."""

import sys

from bench import analyse


def test_a_process_that_writes_much_to_stderr_is_measured_not_deadlocked():
    """A pipe holds 64 KiB: a child writing more to stderr blocked until someone read it, and the benchmark read
    it only after wait4, so both waited (here the child's own 20 s alarm ends it)."""
    child = ("import signal, sys\nsignal.alarm(20)\nsys.stderr.write('x' * 300_000 + 'the end')\n"
             "sys.stderr.flush()\nsys.exit(3)\n")
    m = analyse.measure([sys.executable, "-c", child], max_rss_gb=4.0)
    assert m["rc"] == 3 and m["s"] < 15
    assert m["err"].endswith("the end") and len(m["err"]) == 300
