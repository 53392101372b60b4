"""The six calibration points of reference/engines.md: predicted vs printed KV tokens.

Each point is a real engine log line; the capacity model must land within 2% of the
printed token count (and of the printed max concurrency where the log gave one).
"""

import pytest

from tokenfleet.calibration.memory_points import POINTS


@pytest.mark.parametrize("point", POINTS, ids=lambda pt: f"{pt.engine}-{pt.version}-{pt.model}")
def test_predicted_kv_tokens_within_two_percent_of_printed(point):
    p = point.predict()
    assert p.kv_cache_tokens == pytest.approx(point.printed_tokens, rel=0.02)
    if point.printed_concurrency is not None:
        assert p.max_concurrency == pytest.approx(point.printed_concurrency, rel=0.02)
    if point.printed_kv_gib is not None:
        assert p.memory.kv_cache / 1024**3 == pytest.approx(point.printed_kv_gib, rel=0.02)
