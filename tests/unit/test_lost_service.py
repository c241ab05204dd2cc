"""Lost service-seconds (chaos/analysis/lost_service.py) on synthetic requests with known answers: the time-bucket
integral of an open loop for any arrival shape, a closed loop's users' lost seconds, the baseline taken off
as a rate, empty buckets, and the clip at 0."""

import pytest

from chaos.analysis import lost_service as ls

NS = ls.NS
T0 = 1_000 * NS


def at(t: float) -> int:
    return T0 + int(round(t * NS))


def open_requests(rate_at, end_t: float, bad_from: float, bad_to: float, e2e: float = 0.05, start_t: float = 0.0):
    """Requests at the instants of ``rate_at(t)`` (a constant step), failing when sent in [bad_from, bad_to)."""
    out, t = [], start_t
    while t < end_t - 1e-9:
        out.append(ls.Req(at(t), at(t + e2e), bad_from <= t < bad_to))
        t = round(t + 1 / rate_at(t), 9)
    return out


def test_a_constant_open_loop_with_nothing_in_flight_gives_the_earlier_figure():
    # 10 req/s, 50 ms each, the fault at 10 s, a 20 s window, requests sent in [10, 12) fail
    rs = open_requests(lambda t: 10, 30, 10, 12)
    window = [r for r in rs if r.sent_ns >= at(10)]
    failed = sum(r.bad for r in window)
    earlier = failed * 20 / len(window)  # failed x window / requests
    got = ls.open_loop(rs, at(10), at(30))
    assert failed == 20 and got["value_s"] == pytest.approx(earlier, abs=1e-9) == pytest.approx(2.0)
    assert got["width_s"] == 1.0 and got["buckets"] == 20 and got["empty_buckets"] == 0


def test_requests_in_flight_at_the_injection_are_the_faults_and_weigh_one_inter_arrival_each():
    # 0.5 s requests: 5 in flight at the injection, all failing; 10 more sent after it fail too
    rs = [ls.Req(r.sent_ns, r.sent_ns + NS // 2, at(9.5) - 1 <= r.sent_ns < at(11)) for r in open_requests(lambda t: 10, 30, 0, 0)]
    got = ls.open_loop(rs, at(10), at(30))
    assert got["value_s"] == pytest.approx(15 / 10)  # failed / rate
    assert got["span_s"] == pytest.approx(21.0)  # the bucket holding the first request in flight, then the window


def test_an_open_loop_that_changes_rate_is_integrated_over_time_not_divided_by_its_mean_rate():
    # 20 req/s for the window's first 10 s, 5 req/s after; everything sent in the first 2 s fails: 2 s lost
    rs = open_requests(lambda t: 20 if t < 20 else 5, 30, 10, 12)
    window = [r for r in rs if r.sent_ns >= at(10)]
    failed = sum(r.bad for r in window)
    assert failed == 40 and failed * 20 / len(window) == pytest.approx(3.2)  # the earlier figure: 60 % too much
    assert ls.open_loop(rs, at(10), at(30))["value_s"] == pytest.approx(2.0)


def test_a_burst_arrival_counts_by_send_instant():
    # 28 requests at one instant every 3 s (a trace's granularity); the burst at 12 s fails. A burst is one
    # arrival: 7 in the 21 s window, so 3 s buckets, none empty, and the failed burst is 3 s of the trace lost
    rs = [ls.Req(at(t), at(t + 0.05), t == 12) for t in range(0, 30, 3) for _ in range(28)]
    got = ls.open_loop(rs, at(9), at(30))
    assert got["width_s"] == 3.0 and got["empty_buckets"] == 0 and not got["mostly_empty"]
    assert got["value_s"] == pytest.approx(3.0)
    # by the second instead, two of every three buckets would be empty and carry their neighbours' fractions
    by_second = ls.open_loop(rs, at(9), at(30), width=1.0)
    assert by_second["empty_buckets"] == 14 and by_second["mostly_empty"]
    assert by_second["value_s"] == pytest.approx(0.5 + 0.5 + 1.0 + 0.5 + 0.5)


def test_the_baseline_is_taken_off_as_a_rate_and_a_negative_cost_is_clipped_and_said():
    rs = open_requests(lambda t: 10, 30, 10, 12)
    got = ls.open_loop(rs, at(10), at(30), base_fraction=0.05)
    assert got["value_s"] == pytest.approx(2.0 - 0.05 * 20)
    calm = ls.open_loop(open_requests(lambda t: 10, 30, 0, 0), at(10), at(30), base_fraction=0.1)
    assert calm["value_s"] == 0.0 and calm["clipped_from"] == pytest.approx(-2.0)
    assert got["clipped_from"] is None


def closed_loop_requests(users: int, end_t: float, out_from: float, out_to: float, fail_s: float, ok_s: float = 0.2):
    """``users`` users each sending when their last request ended: answers in ``ok_s``; a request sent in the
    outage fails after ``fail_s`` (a fast refusal, or a timeout)."""
    out = []
    for u in range(users):
        t = u * ok_s / users
        while t < end_t:
            bad = out_from <= t < out_to
            d = fail_s if bad else ok_s
            out.append(ls.Req(at(t), at(t + d), bad))
            t = round(t + d, 9)
    return out


@pytest.mark.parametrize("fail_s, lost", [(0.01, 5.0), (10.0, 10.0)])
def test_a_closed_loops_cost_is_its_users_lost_seconds(fail_s, lost):
    """Four users, a 5 s outage: fast refusals cost the outage (each user retries at once, failing until it
    ends); a 10 s timeout costs each user the 10 s it waited. The earlier rate-based figure gave ~6x too
    much for the first and ~7x too little for the second (issue 31, point 3)."""
    rs = closed_loop_requests(4, 40, 10, 15, fail_s)
    got = ls.closed_loop(rs, at(10), at(40), users=4)
    assert got["value_s"] == pytest.approx(lost, abs=0.2)
    window = [r for r in rs if r.sent_ns >= at(10)]
    rate_based = sum(r.bad for r in window) * 30 / len(window)
    assert abs(rate_based - lost) > 2 * lost or rate_based < lost / 2


def test_a_closed_loops_baseline_share_is_taken_off():
    rs = closed_loop_requests(4, 40, 10, 15, 0.01)
    got = ls.closed_loop(rs, at(10), at(40), users=4, base_share=0.01)
    span = got["span_s"]
    assert got["value_s"] == pytest.approx(got["lost_user_s"] / 4 - 0.01 * span)
    assert ls.base_share([ls.Req(0, 2 * NS, True), ls.Req(0, NS, False)], users=2, span_s=10) == pytest.approx(0.1)
    assert ls.base_share([], users=0, span_s=10) is None


def test_the_bucket_width_is_one_second_or_the_inter_arrival_time():
    assert ls.width_s(200, 20) == 1.0 and ls.width_s(5, 20) == 4.0 and ls.width_s(0, 20) == 20.0
    slow = open_requests(lambda t: 0.25, 60, 20, 28)  # one request every 4 s
    got = ls.open_loop(slow, at(20), at(60))
    assert got["width_s"] == 4.0 and got["value_s"] == pytest.approx(8.0)
