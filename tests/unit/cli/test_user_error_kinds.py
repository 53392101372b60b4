"""A person's bad input (a flag, a file, a port, a spec) raises UserError; PlanError is kept
for a request the planner cannot satisfy. Both print as one line naming field, value and fix."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tokenfleet.capacity import PlanError, PlanRequest, get_gpu, load_model, plan
from tokenfleet.errors import UserError


def _bad_port() -> None:
    from tokenfleet.commands.listen import check_port

    check_port("--port", 70000)


def _missing_directory() -> None:
    from tokenfleet.commands.paths import check_output_file

    check_output_file("--plot", str(Path("/nonexistent-dir/x.png")), ".png")


def _unknown_trace() -> None:
    from tokenfleet.autoscale.fleetsim.traces import synthetic

    synthetic("no-such-trace")


def _bad_image_override() -> None:
    from tokenfleet.engines.images import parse_override

    parse_override("vllm")


def _unknown_model() -> None:
    load_model("no-such/model")


def _bad_spec() -> None:
    from tokenfleet.api import parse_llmservice

    parse_llmservice({"apiVersion": "tokenfleet.dev/v1alpha1", "kind": "LLMService",
                      "metadata": {"name": "x"}, "spec": {"model": {"id": 3}}})  # fmt: skip


INPUT: list[tuple[Callable[[], None], str]] = [
    (_bad_port, "--port=70000"),
    (_missing_directory, "--plot="),
    (_unknown_trace, "--trace=no-such-trace"),
    (_bad_image_override, "--engine-image=vllm"),
    (_unknown_model, "model=no-such/model"),
    (_bad_spec, "spec.model.id"),
]


@pytest.mark.parametrize(("call", "start"), INPUT, ids=[c.__name__ for c, _ in INPUT])
def test_bad_input_is_a_user_error_not_a_plan_error(call: Callable[[], None], start: str) -> None:
    with pytest.raises(UserError) as caught:
        call()
    assert not isinstance(caught.value, PlanError)
    assert str(caught.value).startswith(start), str(caught.value)
    assert "\n" not in str(caught.value) and caught.value.fix


def test_a_plan_that_cannot_be_made_is_a_plan_error() -> None:
    req = PlanRequest(
        arch=load_model("meta-llama/Llama-3.1-405B"),
        gpu=get_gpu("l4"),
        tensor_parallel_size=1,
        pipeline_parallel_size=1,
    )
    with pytest.raises(PlanError) as caught:
        plan(req)
    assert isinstance(caught.value, UserError)  # the CLI prints both the same way
    assert caught.value.field == "tp" and "does not fit" in str(caught.value)
