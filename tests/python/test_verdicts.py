"""The catalog's one verdict rule (`vsched.catalog.stats`), checked by hand: orderings against
twice the standard error of the difference, magnitudes against the band around the paper's
number, lower bounds from runs that did not finish, and how parts combine."""

from __future__ import annotations

import math

import pytest

from vsched.catalog import claims, stats
from vsched.catalog.stats import Estimate, Outcome


def test_an_ordering_holds_when_it_wins_by_more_than_twice_the_standard_error() -> None:
    # Difference 1.0, error of the difference hypot(0.3, 0.4) = 0.5: exactly 2 errors is not
    # more than 2, so 1.0 is within noise and 1.01 holds.
    low, high = Estimate(10.0, 0.3), Estimate(11.0, 0.4)
    assert stats.below(low, high) is Outcome.NOISE
    assert stats.below(low, Estimate(11.01, 0.4)) is Outcome.HOLDS
    assert stats.below(Estimate(11.01, 0.4), low) is Outcome.FAILS
    # The wrong way round by less than two errors is within noise too: the runs cannot tell.
    assert stats.below(high, low) is Outcome.NOISE


def test_a_tie_known_exactly_does_not_hold() -> None:
    # Zero error: the values are the values. Equal is not below.
    assert stats.below(Estimate(5.0), Estimate(5.0)) is Outcome.FAILS
    assert stats.below(Estimate(5.0), Estimate(5.1)) is Outcome.HOLDS


def test_the_papers_own_tolerance_shifts_the_ordering() -> None:
    # "no slower than B within 5 %": A at 104 is fine against B at 100; at 106 it is not.
    b = Estimate(100.0, 0.1)
    assert stats.at_most(Estimate(104.0, 0.1), b, 0.05) is Outcome.HOLDS
    assert stats.at_most(Estimate(106.0, 0.1), b, 0.05) is Outcome.FAILS
    assert stats.at_most(Estimate(105.0, 0.5), b, 0.05) is Outcome.NOISE


def test_a_magnitude_holds_inside_the_band_by_two_errors_and_is_within_noise_on_an_edge() -> None:
    assert stats.band(0.26) == pytest.approx((0.195, 0.325))
    assert stats.band(-0.173) == pytest.approx((-0.21625, -0.12975))
    assert stats.range_band(150, 400) == pytest.approx((112.5, 500.0))
    low, high = stats.band(0.26)
    assert stats.inside(Estimate(0.26, 0.01), low, high) is Outcome.HOLDS
    assert stats.inside(Estimate(0.20, 0.01), low, high) is Outcome.NOISE  # 0.18..0.22 straddles 0.195
    assert stats.inside(Estimate(0.10, 0.01), low, high) is Outcome.FAILS
    assert stats.inside(Estimate(0.40, 0.01), low, high) is Outcome.FAILS


def test_a_lower_bound_decides_only_in_its_own_direction() -> None:
    # 27 of 50 runs did not finish within 3,000 s: the mean is at least what they give.
    unfinished = stats.mean_estimate([300.0] * 23, [3000.0] * 27)
    assert unfinished.bound == "at least"
    credit = Estimate(30.0, 0.2)
    assert stats.below(unfinished, credit) is Outcome.FAILS  # slower than Credit, whatever the rest
    assert stats.below(credit, unfinished) is Outcome.HOLDS
    # Against something slower than the bound, the bound says nothing.
    assert stats.below(unfinished, Estimate(5000.0, 1.0)) is Outcome.UNDECIDED
    # A change against Credit is at least what the bound gives: beyond a band's top, it fails.
    change = stats.change(unfinished, credit)
    assert change.bound == "at least" and change.value > 10
    assert stats.inside(change, -0.2, -0.1) is Outcome.FAILS
    assert stats.inside(change, 0.0, 1e9) is Outcome.UNDECIDED
    # The spread of values that are partly unknown is unknown.
    assert not stats.std_estimate([300.0, 310.0], [3000.0]).known


def test_a_bound_in_the_denominator_turns_round() -> None:
    ratio = stats.ratio(Estimate(10.0, 0.1), Estimate(100.0, 1.0, "at least"))
    assert ratio.bound == "at most"
    assert stats.inside(ratio, 0.5, 2.0) is Outcome.FAILS  # at most 0.1: below the band for sure
    assert not stats.ratio(Estimate(1.0, 0.0, "at least"), Estimate(1.0, 0.0, "at least")).known


def test_errors_propagate_to_first_order() -> None:
    r = stats.ratio(Estimate(10.0, 1.0), Estimate(20.0, 2.0))
    assert r.value == 0.5 and r.error == pytest.approx(0.5 * math.hypot(0.1, 0.1))
    d = stats.difference(Estimate(3.0, 0.3), Estimate(1.0, 0.4))
    assert d.value == 2.0 and d.error == pytest.approx(0.5)
    m = stats.mean_of([Estimate(1.0, 0.3), Estimate(3.0, 0.4)])
    assert m.value == 2.0 and m.error == pytest.approx(0.25)
    sd = stats.std_estimate([1.0, 2.0, 3.0, 4.0, 5.0])
    assert sd.value == pytest.approx(1.5811, abs=1e-4) and sd.error == pytest.approx(sd.value / math.sqrt(8))


def test_a_claim_of_several_parts_fails_if_one_fails_and_holds_only_if_all_hold() -> None:
    o = Outcome
    assert stats.combine([o.HOLDS, o.HOLDS]) is o.HOLDS
    assert stats.combine([o.HOLDS, o.NOISE]) is o.NOISE
    assert stats.combine([o.NOISE, o.UNDECIDED]) is o.UNDECIDED
    assert stats.combine([o.UNDECIDED, o.FAILS, o.HOLDS]) is o.FAILS
    assert stats.combine([]) is o.HOLDS


def test_means_of_the_same_seeds_are_compared_seed_by_seed() -> None:
    # Each seed draws the same workload under every policy. Two policies that make the same
    # schedule on every seed tie exactly: not "within noise", known.
    credit = stats.mean_estimate([46.1, 46.3, 46.2, 46.4, 46.2])
    pcs = stats.mean_estimate([46.1, 46.3, 46.2, 46.4, 46.2])
    assert credit.error > 0
    assert stats.below(pcs, credit) is Outcome.FAILS
    assert stats.change(pcs, credit).error == 0
    # A shift of 0.1 % on every seed is small against the spread between seeds (independent
    # means could not tell it) but it is the same on every seed: it holds.
    faster = stats.mean_estimate([v * 0.999 for v in (46.1, 46.3, 46.2, 46.4, 46.2)])
    unpaired = Estimate(faster.value, faster.error)
    assert stats.below(unpaired, credit) is Outcome.NOISE
    assert stats.below(faster, credit) is Outcome.HOLDS
    assert stats.inside(stats.change(faster, credit), -0.0011, -0.0009) is Outcome.HOLDS
    # Means over several points pair up too.
    both = stats.mean_of([faster, faster])
    assert both.samples is not None and stats.below(both, stats.mean_of([credit, credit])) is Outcome.HOLDS


def test_a_win_smaller_than_a_reader_sees_is_a_tie_not_a_hold() -> None:
    # Seed 004 Fig. 7(c)'s case: BCS ahead of Credit by 0.01 s in 43 s on every seed. Common
    # random numbers make that lead significant, but a paper's "faster" is a difference on its
    # bar chart: orderings without a stated number need more than claims.SAME.
    credit = stats.mean_estimate([43.41, 43.52, 43.30, 43.45])
    bcs = stats.mean_estimate([43.40, 43.51, 43.29, 43.44])
    assert stats.below(bcs, credit) is Outcome.HOLDS
    assert stats.below(bcs, credit, claims.SAME) is Outcome.FAILS
    ten_percent = stats.mean_estimate([v / 1.1 for v in (43.41, 43.52, 43.30, 43.45)])
    assert stats.below(ten_percent, credit, claims.SAME) is Outcome.HOLDS
    # A 5 % win measured with a large error is neither.
    noisy = stats.mean_estimate([40.0, 44.0, 39.0, 41.5])
    assert stats.below(noisy, credit, claims.SAME) is Outcome.NOISE
