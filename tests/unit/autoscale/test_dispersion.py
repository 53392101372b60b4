"""Square-root staffing (autoscale/dispersion.py), its signal in fleetsim, and the policy
sizing and learning with it. Pure, seeded."""

from __future__ import annotations

import math
import random

import pytest

from tests.support.policy_helpers import CAPACITY, fleet, signals, spec
from tokenfleet.autoscale import dispersion
from tokenfleet.autoscale.fleetsim import observed
from tokenfleet.autoscale.policy import DEFAULTS, decide
from tokenfleet.autoscale.types import CapacityEstimate, History, Signals

NOW = 1000.0
BINS = 400  # many bins: the estimator's own noise is then small


def _renewal_counts(cv: float, rate: float, seed: int, bins: int = BINS) -> list[float]:
    """Counts per 30 s bin of a gamma renewal process with gaps of this CV."""
    rng = random.Random(seed)
    shape = 1 / cv**2
    width = dispersion.BIN_SECONDS
    counts = [0.0] * bins
    t = rng.gammavariate(shape, 1 / (shape * rate))
    while t < bins * width:
        counts[int(t // width)] += 1
        t += rng.gammavariate(shape, 1 / (shape * rate))
    return counts


@pytest.mark.slow
@pytest.mark.parametrize(("cv", "expected"), [(1.0, 1.0), (2.0, 4.0)])
def test_index_of_dispersion_is_cv_squared_for_a_renewal_process(
    cv: float, expected: float
) -> None:
    # One 400-bin reading strays by ~18% (the quantile's noise): the mean of ten does not.
    readings = [
        dispersion.index_of_dispersion(_renewal_counts(cv, 5.0, seed)) for seed in range(10)
    ]
    assert all(r is not None for r in readings)
    assert sum(r or 0.0 for r in readings) / 10 == pytest.approx(expected, rel=0.1)


def test_a_drifting_or_stepping_poisson_load_is_not_burstiness() -> None:
    rng = random.Random(2)
    width = dispersion.BIN_SECONDS
    # Mean 3 -> 30 req/s linearly over the window, then a 4x step half-way through.
    drift = [float(_poisson(rng, (3 + 27 * i / BINS) * width)) for i in range(BINS)]
    step = [float(_poisson(rng, (5 if i < BINS // 2 else 20) * width)) for i in range(BINS)]
    for counts in (drift, step):
        variance = _plain_variance(counts)
        assert variance / (sum(counts) / len(counts)) > 10  # the plain IDC would be fooled
        assert dispersion.index_of_dispersion(counts) == pytest.approx(1.0, rel=0.2)


def _poisson(rng: random.Random, mean: float) -> int:
    return round(rng.gauss(mean, math.sqrt(mean)))  # large means only


def _plain_variance(counts: list[float]) -> float:
    mean = sum(counts) / len(counts)
    return sum((c - mean) ** 2 for c in counts) / len(counts)


def test_too_few_bins_or_no_arrivals_say_nothing() -> None:
    assert dispersion.index_of_dispersion([5.0] * (dispersion.MIN_BINS - 1)) is None
    assert dispersion.index_of_dispersion([0.0] * 20) is None
    assert dispersion.index_of_dispersion([0.0, 3.0] + [0.0] * 20) is None
    assert dispersion.excess_dispersion(None) == 0.0


@pytest.mark.slow
def test_poisson_windows_buy_a_small_fraction_of_what_bursty_ones_do() -> None:
    """A 20-bin window reads its IDC with a quartile's noise; two standard errors of it are
    subtracted. Poisson windows still read a little excess now and then (the quartile's
    estimate is skewed): on average under a tenth of what gamma CV-2 windows read, which
    find most of their true excess (3)."""

    def mean_excess(cv: float) -> float:
        windows = (_renewal_counts(cv, 20.0, seed, bins=dispersion.BINS) for seed in range(200))
        excess = [dispersion.excess_dispersion(dispersion.index_of_dispersion(c)) for c in windows]
        return sum(excess) / len(excess)

    poisson, bursty = mean_excess(1.0), mean_excess(2.0)
    assert bursty > 2.0
    assert poisson < 0.1 * bursty


def test_beta_is_the_slo_quantile() -> None:
    assert dispersion.beta(0.99) == pytest.approx(2.326, abs=1e-3)
    assert dispersion.beta(0.95) == pytest.approx(1.645, abs=1e-3)
    assert dispersion.beta(0.3) == 0.0


def test_headroom_grows_like_the_square_root_of_the_load_up_to_the_load() -> None:
    def headroom(load: float) -> float:
        return dispersion.effective_load(load, 3.0, 6.0, 0.99) - load

    assert headroom(40.0) == pytest.approx(2 * headroom(10.0))
    assert headroom(10.0) == pytest.approx(2.326 * math.sqrt(10 * 3 / 6), rel=1e-3)
    # Poisson (no excess) or unknown residence: the load itself.
    assert dispersion.effective_load(10.0, 0.0, 6.0, 0.99) == 10.0
    assert dispersion.effective_load(10.0, 3.0, None, 0.99) == 10.0
    assert dispersion.effective_load(0.0, 3.0, 6.0, 0.99) == 0.0
    # On-off traffic reads as a huge dispersion: the headroom stops at the load itself.
    assert dispersion.effective_load(2.0, 400.0, 6.0, 0.99) == 4.0


def test_fleetsim_reports_the_dispersion_of_first_tokens_once_the_window_is_full() -> None:
    """The counts per bin fleetsim takes are the ones Prometheus' increase() would see."""
    rng = random.Random(4)
    counts = [float(rng.randint(0, 40)) for _ in range(dispersion.BINS)]
    width = dispersion.BIN_SECONDS
    arrivals = sorted(
        (i + (j + 0.5) / c) * width for i, c in enumerate(counts) for j in range(int(c))
    )
    now = dispersion.WINDOW_SECONDS
    got = observed.arrival_dispersion(arrivals, now)
    assert got is not None
    assert got == pytest.approx(dispersion.index_of_dispersion(counts))
    late = [a for a in arrivals if a > now / 2]
    assert observed.arrival_dispersion(late, now) is None  # half a window: not yet


# -- the policy --------------------------------------------------------------------------------
RESIDENCE_S = 6.0  # seconds a request holds a slot


def _bursty(at: float, ready: int, rate: float) -> Signals:
    running = rate * RESIDENCE_S / ready  # Little's law
    return signals(at, ready, rate, arrival_dispersion=4.0, running_per_replica=running)


def _settled(observed: float, ready: int) -> History:
    return History(
        capacity=CapacityEstimate(predicted=CAPACITY, observed=observed),
        last_ready=ready,
        ready_changed_at=NOW - DEFAULTS.learn_settle_seconds - 1,
        trusted_since=NOW - DEFAULTS.learn_settle_seconds - 1,
    )


def test_bursty_load_is_sized_with_square_root_headroom() -> None:
    """The small fleet needs relatively more headroom than the big one, and Poisson traffic
    (no dispersion signal) none at all."""
    excess = dispersion.excess_dispersion(4.0)

    def sized(rate: float, bursty: bool = True) -> tuple[int, float]:
        """(replicas the feed-forward asks, replicas the load alone would need)."""
        ready = 20
        s = _bursty(NOW, ready, rate) if bursty else signals(NOW, ready, rate)
        d = decide(spec(), fleet(ready), s, _settled(CAPACITY, ready), NOW)
        per_replica = d.details["capacity"] * 0.8  # targetUtilization
        load = dispersion.effective_load(rate, excess, RESIDENCE_S, 0.99) if bursty else rate
        assert d.details["feedforward"] == math.ceil(load / per_replica)
        return int(d.details["feedforward"]), rate / per_replica

    small, big = sized(20.0), sized(120.0)
    assert small[0] / small[1] > big[0] / big[1] > 1.0
    plain = sized(120.0, bursty=False)
    assert plain[0] == math.ceil(plain[1])


def test_capacity_learnt_on_a_big_bursty_fleet_is_net_of_the_headroom() -> None:
    """Held on 14 replicas at 11 req/s each (> 10 believed): the capacity learnt counts
    the load's headroom, so it is the per-replica rate of the effective load."""
    ready, rate = 14, 14 * 11.0
    d = decide(spec(), fleet(ready), _bursty(NOW, ready, rate), _settled(CAPACITY, ready), NOW)
    assert d.history.capacity is not None
    load = dispersion.effective_load(rate, dispersion.excess_dispersion(4.0), RESIDENCE_S, 0.99)
    assert d.history.capacity.observed == pytest.approx(min(load / ready, CAPACITY * 1.25))
    assert d.history.capacity.observed > 11.0
