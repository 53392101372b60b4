"""Square-root staffing: the headroom bursty arrivals need, as extra load (PURE).

A replica's capacity (req/s within the SLO) is measured, predicted and learnt on Poisson-like
traffic. Under bursty arrivals it depends on the fleet's size: N replicas share the bursts,
so the spare capacity a burst needs grows like sqrt(load), not like load (statistical
multiplexing; Halfin-Whitt's QED regime, N = R + beta * sqrt(R)). A replica batches, so it
is m = c x T request slots (Little's law: capacity c req/s, a request stays T seconds), and
the fleet is N x m slots for a load of R x m: N = R + beta * sqrt(R x IDC' / m). In req/s:

    effective load = L + beta * sqrt(L x IDC' / T)

IDC' is the arrival counts' index of dispersion beyond Poisson's (variance / mean - 1; 0 for
Poisson, whose fluctuations the measured per-replica capacity already includes), beta the
SLO's quantile (Phi^-1(0.99) = 2.33: the burst a fleet must absorb is the attainment
target's quantile of the counts). The headroom depends on the load and the traffic, not on
the capacity, so the policy sizes the fleet for the effective load and learns the capacity
from it: a capacity learnt on 14 replicas then holds on 5.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from statistics import NormalDist

MIN_BINS = 6
"""Fewer counts than this say nothing about their variance."""
BIN_SECONDS = 30.0
"""Arrivals are counted per 30 s: two scrapes of the PodMonitor's 15 s interval, the
shortest increase() Prometheus resolves reliably."""
WINDOW_SECONDS = 600.0
"""...over 10 minutes (20 bins), the window the request mix is read over too: burstiness is
a property of the traffic that changes slowly."""
BINS = int(WINDOW_SECONDS // BIN_SECONDS)
NOISE_Z = 2.0
"""Only dispersion beyond this many standard errors of its estimate counts: the policy's
convention for counting noise (PolicyParams.trend_noise_z, a lower confidence bound)."""


QUANTILE = 0.25
"""The quartile of the neighbours' normalised squared differences is read, not their mean
or median: a pair that straddles a change of the load (a ramp, a spike, on-off bursts of
10-60 s) reads high whatever the arrivals' dispersion, and on-off traffic makes up to a
third or more of the pairs such. Its price: more sampling noise (subtracted below)."""
# That quantile of a chi-square with one degree of freedom: the square of the standard
# normal's (1 + q) / 2 quantile. (X1 - X2)^2 over two independent normal counts is this x
# the variance of their difference (X1 + X2 for Poisson) at the same quantile.
CHI2_1_QUANTILE = NormalDist().inv_cdf((1 + QUANTILE) / 2) ** 2
# ...and the sample quantile's relative standard error x sqrt(n): sqrt(q(1-q)) / (f(m) x m),
# f the chi-square(1) density at that quantile m.
_M = CHI2_1_QUANTILE
_QUANTILE_RSE = math.sqrt(QUANTILE * (1 - QUANTILE)) * math.sqrt(2 * math.pi * _M)
_QUANTILE_RSE /= math.exp(-_M / 2) * _M


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (Prometheus' quantile_over_time)."""
    rank = q * (len(sorted_values) - 1)
    low = math.floor(rank)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (rank - low)


def index_of_dispersion(counts: Sequence[float]) -> float | None:
    """Variance / mean of arrival counts in equal consecutive bins: 1 for Poisson, CV^2 for
    a renewal process with gaps of that CV. From the differences of neighbours, each over
    its own pair's count (Allan variance, locally normalised), so a load that drifts over
    the window is not burstiness; and a quantile of them, so steps of the load (a spike,
    on-off bursts) are not either. None: too few bins with arrivals."""
    ratios = sorted((b - a) ** 2 / (a + b) for a, b in itertools.pairwise(counts) if a + b > 0)
    if len(ratios) < MIN_BINS - 1:
        return None
    return _quantile(ratios, QUANTILE) / CHI2_1_QUANTILE


def excess_dispersion(idc: float | None, bins: int = BINS) -> float:
    """IDC beyond Poisson's, less its own sampling noise: a Poisson window of n bins reads
    1 +- _QUANTILE_RSE / sqrt(n - 1) (one standard error); within NOISE_Z of those it must
    not buy replicas."""
    if idc is None or bins < MIN_BINS:
        return 0.0
    return max(0.0, idc - 1.0 - NOISE_Z * _QUANTILE_RSE / math.sqrt(bins - 1))


def beta(attainment: float) -> float:
    """The SLO's quantile of a standard normal: how many standard deviations of the counts
    the fleet absorbs (2.33 at a 99% attainment target). 0 for targets at or under 50%."""
    p = min(max(attainment, 0.5), 1 - 1e-6)
    return NormalDist().inv_cdf(p)


def effective_load(
    load: float, excess_idc: float, residence_s: float | None, attainment: float
) -> float:
    """The load (req/s) plus the headroom its bursts need: L + beta * sqrt(L x IDC' / T),
    at most 2 L. Beyond that the arrivals are not fluctuations around a rate but an on-off
    load (autoscale/bursts.py's floor), and learning would charge a phantom load to the
    replicas (seen on the generated on-off trace: 35 req/s per replica learnt for 9).
    No residence time (no request in flight reported) or no excess dispersion: L."""
    if load <= 0 or excess_idc <= 0 or residence_s is None or residence_s <= 0:
        return max(load, 0.0)
    return load + min(load, beta(attainment) * math.sqrt(load * excess_idc / residence_s))
