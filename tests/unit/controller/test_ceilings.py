"""The operator's ceiling and mix capacity: from the reconciler's kept plan, estimated from
the observed histograms, re-evaluated only when the mix drifts or the plan changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.kept_plan import kept_plan
from tokenfleet.api import parse_llmservice
from tokenfleet.autoscale.attainability import LengthHistogram
from tokenfleet.autoscale.signals import Attainment, Boundary, Observation
from tokenfleet.autoscale.types import Signals
from tokenfleet.controller import attainability
from tokenfleet.controller.attainability import Ceilings
from tokenfleet.localfleet.demo import load_llmservice

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "llama-3.1-8b-l4-autoscale.yaml"
KEY = ("default", "svc")


def _observation(prompts: LengthHistogram | None, output: float | None) -> Observation:
    nothing = Attainment(None, Boundary(None, None, "nodata"), None)
    return Observation(Signals(at=0, reporting_replicas=1), nothing, nothing, None, prompts,
                       output)  # fmt: skip


def _body(generation: int = 1) -> dict[str, Any]:
    body = load_llmservice(EXAMPLE)
    body["metadata"].update({"uid": "u1", "generation": generation})
    return body


async def test_ceiling_and_mix_capacity_from_the_observed_histograms(monkeypatch: Any) -> None:
    body = _body()
    kept, slo = kept_plan(body), parse_llmservice(body).spec.slo
    ceilings = Ceilings()
    short = LengthHistogram((500.0, 1000.0, 2000.0), (80.0, 20.0, 0.0, 0.0))
    c = await ceilings.estimate(KEY, kept, slo, _observation(short, 100.0))
    assert c is not None and c.attainable == 1.0 and c.longest_prompt > 1000
    assert await ceilings.estimate(KEY, kept, slo, _observation(None, None)) is None

    plans: list[int] = []
    real = attainability._plan_mix
    monkeypatch.setattr(
        attainability,
        "_plan_mix",
        lambda *a: plans.append(1) or real(*a),  # type: ignore[func-returns-value]
    )
    first = await ceilings.mix_capacity(KEY, kept, _observation(short, 100.0))
    assert first is not None and first > 0
    # The same mix, a little noise: no re-plan; a longer mix: re-planned, and lower.
    nudged = LengthHistogram((500.0, 1000.0, 2000.0), (78.0, 22.0, 0.0, 0.0))
    assert await ceilings.mix_capacity(KEY, kept, _observation(nudged, 105.0)) == first
    longer = LengthHistogram((500.0, 1000.0, 2000.0), (10.0, 30.0, 60.0, 0.0))
    second = await ceilings.mix_capacity(KEY, kept, _observation(longer, 100.0))
    assert second is not None and 0 < second < first
    assert len(plans) == 2
    # No histogram this time (zero load): the last estimate stands.
    assert await ceilings.mix_capacity(KEY, kept, _observation(None, None)) == second


async def test_the_mix_feeds_forward_only_once_its_window_is_full() -> None:
    kept = kept_plan(_body())
    ceilings = Ceilings()
    short = LengthHistogram((500.0, 1000.0, 2000.0), (80.0, 20.0, 0.0, 0.0))
    seen = _observation(short, 100.0)
    assert await ceilings.mix_capacity(KEY, kept, seen) is not None
    assert not ceilings.mix_settled(KEY, seen.signals.at + 60.0)
    assert ceilings.mix_settled(KEY, seen.signals.at + 600.0)
    ceilings.forget(KEY)
    assert not ceilings.mix_settled(KEY, seen.signals.at + 600.0)
