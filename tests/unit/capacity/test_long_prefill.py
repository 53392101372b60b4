"""spec.engine.capLongPrefills: vLLM's --long-prefill-token-threshold, derived from the SLO.

The threshold is the largest chunk (a multiple of the KV block) whose own prefill step
stays within slo.tpotMs; no cap when the whole budget already does, or when not one block
does. Opt-in, vLLM 0.32+ only; the plan carries it, the vLLM command renders it, and the
LLMService field reaches the plan."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from tests.support.services import llmservice
from tokenfleet.api import parse_llmservice
from tokenfleet.api.planrequest import to_plan_request
from tokenfleet.capacity import PlanError, PlanRequest, get_gpu, load_model, plan, step_model
from tokenfleet.capacity.long_prefill import long_prefill_threshold
from tokenfleet.capacity.validate import check_request
from tokenfleet.engines import Launch, engine_command
from tokenfleet.render.simulate import sim_args


@dataclass(frozen=True)
class Linear:
    """5 ms a step plus 0.1 ms a prompt token: a chunk of c tokens takes 5 + 0.1 c ms."""

    def step_seconds(
        self, prefill: int, decode_seqs: int, context: int, pairs: float | None = None
    ) -> float:
        return 0.005 + 1e-4 * prefill + 1e-3 * decode_seqs


LINEAR = Linear()


@pytest.mark.parametrize(
    ("tpot_ms", "budget", "want"),
    [
        (50.0, 2048, 448),  # 5 + 0.1 x 448 = 49.8 ms; 464 would take 51.4
        (30.0, 2048, 240),  # 5 + 24 = 29 ms; 256 would take 30.6
        (300.0, 2048, 0),  # the whole budget takes 209.8 ms: no cap needed
        (6.0, 2048, 0),  # not even 16 tokens (6.6 ms) keep the pace: no cap
        (50.0, 400, 0),  # the budget itself is below the chunk: nothing to cap
    ],
)
def test_threshold_is_the_largest_chunk_within_tpot(tpot_ms: float, budget: int, want: int) -> None:
    assert long_prefill_threshold(LINEAR, budget, 8192, tpot_ms / 1e3) == want


def test_threshold_never_exceeds_max_model_len() -> None:
    # vLLM refuses long_prefill_token_threshold > max_model_len at start-up.
    assert long_prefill_threshold(LINEAR, 8192, 256, 0.05) == 256


def _request(**kw: object) -> PlanRequest:
    return PlanRequest(
        arch=load_model("meta-llama/Llama-3.1-8B"),
        gpu=get_gpu("l40s"),
        max_model_len=8192,
        **kw,  # type: ignore[arg-type]
    )


def test_plan_derives_it_from_its_own_step_model_only_when_asked() -> None:
    assert plan(_request()).long_prefill_token_threshold == 0
    p = plan(_request(cap_long_prefills=True))
    t = p.long_prefill_token_threshold
    assert 0 < t < p.max_num_batched_tokens and t % 16 == 0
    timer = step_model(p)
    assert timer.step_seconds(t, 0, 0, t * t / 2) <= 0.05
    assert timer.step_seconds(t + 16, 0, 0, (t + 16) ** 2 / 2) > 0.05
    assert p.as_dict()["longPrefillTokenThreshold"] == t


def test_the_vllm_command_carries_it() -> None:
    p = plan(_request(cap_long_prefills=True))
    command = engine_command(p, Launch("meta-llama/Llama-3.1-8B"))
    at = command.index("--long-prefill-token-threshold")
    assert command[at + 1] == str(p.long_prefill_token_threshold)
    assert "--long-prefill-token-threshold" not in engine_command(
        plan(_request()), Launch("meta-llama/Llama-3.1-8B")
    )


@pytest.mark.parametrize(
    ("engine", "version"), [("sglang", None), ("vllm", "0.31.0"), ("vllm", "0.11.0")]
)
def test_engines_without_the_exempt_cap_are_refused(engine: str, version: str | None) -> None:
    with pytest.raises(PlanError) as error:
        check_request(_request(cap_long_prefills=True, engine=engine, engine_version=version))
    message = str(error.value)
    assert "cap-long-prefills" in message and "vLLM 0.32.0 or newer" in message


def test_the_llmservice_field_reaches_the_plan() -> None:
    body = llmservice(gpu="l40s", engine={"capLongPrefills": True}, workload={"maxModelLen": 8192})
    service = parse_llmservice(body)
    p = plan(to_plan_request(service))
    assert p.long_prefill_token_threshold > 0
    # The engine simulator (spec.engine.simulate) is told the same cap.
    args = sim_args(service, p)
    assert args[args.index("--long-prefill-token-threshold") + 1] == str(
        p.long_prefill_token_threshold
    )
    body["spec"]["engine"] = {"kind": "sglang", "capLongPrefills": True}  # type: ignore[index]
    with pytest.raises(PlanError, match=r"spec\.engine\.capLongPrefills"):
        to_plan_request(parse_llmservice(body))
