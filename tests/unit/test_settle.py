"""The recovery window's early end (chaos.core.settle): every plane back and steady for the settle time,
judged on synthetic records at its edges; a relapse one second after the settle time is reported."""

from chaos import analysis
from chaos.recording import records as rec
from chaos.core import settle
from tests.unit.test_analysis import NS, T0, mark, run, zones
from tests.unit.test_planes import samples

STEADY = analysis.SteadyState(window_s=2.0, min_success_ratio=1.0, min_requests=3)


def summary_until(end_t: float, relapse_at: float | None = None) -> dict:
    """Zone b fails from the injection (10 s) to 15 s; every plane healthy otherwise (samples every
    0.5 s); with ``relapse_at``, zone b fails again for a second from then. Records up to ``end_t``."""
    rs = zones(0, end_t, down="b", down_from=10.0, down_to=15.0)
    if relapse_at is not None:
        for r in rs:
            t = (r.sent_ns - T0) / NS
            if r.zone == "b" and relapse_at <= t < relapse_at + 1.0:
                r.ok, r.failure, r.ttft_s, r.e2e_s = False, rec.CONNECT_REFUSED, None, 0.001
    r = run(rs, [mark(rec.INJECT_START, 10, scope="zone", zones=("b",))], end_t)
    r.samples = samples(0, end_t)
    return analysis.analyse(r, STEADY)


def test_settled_once_every_plane_has_been_back_for_the_settle_time_and_a_window():
    # recovered at 5.0 s after the injection (15 s): settled at 5 + settle 10 + window 2 = 17 s after it
    early = summary_until(10 + 16.9)
    assert settle.recovered_at_s(early["faults"][-1]) == 5.0
    assert settle.settled(early, 16.9, settle_s=10, window_s=2.0) is None  # 0.1 s short
    done = summary_until(10 + 17.0)
    assert settle.settled(done, 17.0, settle_s=10, window_s=2.0) == 5.0
    assert settle.settled(done, 17.0, settle_s=0, window_s=2.0) is None  # 0: the whole window, always


def test_a_relapse_one_second_after_the_settle_time_keeps_the_window_open_and_is_reported():
    # steady from 5 s after the injection; a relapse at 5 + 10 + 1 = 16 s after it (26 s), records to 36 s
    s = summary_until(36.0, relapse_at=26.0)
    f = s["faults"][-1]
    assert f["affected"]["relapses"] == 1  # the analysis reports it
    # and the window had not ended before it: at the relapse's end (27 s) nothing is settled
    at_relapse = summary_until(27.5, relapse_at=26.0)
    assert settle.settled(at_relapse, 17.5, settle_s=10, window_s=2.0) is None
    # after it, the settle time counts again from the new recovery
    assert settle.recovered_at_s(f) >= 17.0


def test_a_plane_not_back_or_unmeasurable_keeps_the_window_open():
    s = summary_until(40.0)
    f = s["faults"][-1]
    for plane, key in (("capacity", "time_to_restored_s"), ("control_plane", "time_to_restored_s"),
                       ("service", "time_to_steady_state_s"), ("affected", "time_to_steady_state_s")):
        g = {**f, plane: {**f[plane], key: None}}
        assert settle.recovered_at_s(g) is None, plane
        assert settle.settled({"faults": [g]}, 30.0, 10, 2.0) is None
    assert settle.recovered_at_s({**f, "capacity": None}) is None  # a summary without the sampler's planes
    assert settle.settled({"faults": []}, 30.0, 10, 2.0) is None
