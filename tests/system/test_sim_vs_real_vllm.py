"""The simulator against a REAL vLLM CPU engine: /metrics families and protocol shapes.

Every `vllm:` family the simulator exposes must exist in the real engine's /metrics with the
same type, label names and histogram buckets; real families the simulator does not emulate
are printed (run with -s to see them). Error bodies and response keys are compared for the
cheap cases.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.support.metric_families import families
from tests.support.real_vllm import RealVllm
from tests.support.sims import SimProcess

pytestmark = [pytest.mark.system, pytest.mark.engines]


@pytest.fixture
def sim_like_real(start_sim: Callable[..., SimProcess], real_vllm: RealVllm) -> SimProcess:
    return start_sim(
        "--model", "meta-llama/Llama-3.1-8B", "--gpu", "l4",
        "--max-model-len", str(real_vllm.max_model_len),
        "--served-model-name", real_vllm.served_name,
        "--time-scale", "100",
    )  # fmt: skip


def test_metric_families_match_the_real_engine(
    sim_like_real: SimProcess, real_vllm: RealVllm
) -> None:
    # One request each, so label children created lazily on first use exist on both sides.
    for url in (sim_like_real.base_url, real_vllm.base_url):
        body = {"model": real_vllm.served_name, "prompt": "hello world", "max_tokens": 4}
        assert httpx.post(f"{url}/v1/completions", json=body, timeout=60).status_code == 200
    sim = families(httpx.get(f"{sim_like_real.base_url}/metrics").text)
    real = families(httpx.get(f"{real_vllm.base_url}/metrics").text)

    problems = []
    for name, mine in sorted(sim.items()):
        theirs = real.get(name)
        if theirs is None:
            problems.append(f"{name}: the real engine has no such family")
            continue
        if mine.type != theirs.type:
            problems.append(f"{name}: type {mine.type} != real {theirs.type}")
        if mine.labels != theirs.labels:
            problems.append(f"{name}: labels {sorted(mine.labels)} != real {sorted(theirs.labels)}")
        if mine.buckets != theirs.buckets:
            problems.append(f"{name}: buckets {mine.buckets} != real {theirs.buckets}")
    not_emulated = sorted(set(real) - set(sim))
    print(f"\nsimulator emulates {len(sim)} of {len(real)} vllm: families")
    print("real vLLM families the simulator does not emulate:", *not_emulated, sep="\n  ")
    assert not problems, "\n".join(problems)
    # The families the autoscaler and dashboards depend on must be among them.
    for needed in (
        "vllm:time_to_first_token_seconds",
        "vllm:inter_token_latency_seconds",
        "vllm:e2e_request_latency_seconds",
        "vllm:request_queue_time_seconds",
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:request_success",
        "vllm:prompt_tokens",
        "vllm:generation_tokens",
    ):
        assert needed in sim


BAD_REQUESTS: list[tuple[str, str, Any]] = [
    ("unknown model", "/v1/completions", {"model": "nope", "prompt": "a", "max_tokens": 1}),
    ("bad json", "/v1/completions", b"{bad"),
    ("body not an object", "/v1/completions", [1, 2]),
    ("prompt over max_model_len", "/v1/completions", {"prompt": [5] * 600, "max_tokens": 1}),
    ("prompt fills the context", "/v1/completions", {"prompt": [5] * 512, "max_tokens": 4}),
    ("max_tokens 0", "/v1/completions", {"prompt": "a", "max_tokens": 0}),
    ("max_tokens over max_model_len", "/v1/completions", {"prompt": "a", "max_tokens": 5000}),
    (
        "chat prompt over max_model_len",
        "/v1/chat/completions",
        {"messages": [{"role": "user", "content": "hello " * 600}], "max_tokens": 1},
    ),
]


def _send(base: str, path: str, payload: Any) -> httpx.Response:
    content = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    headers = {"Content-Type": "application/json"}
    return httpx.post(f"{base}{path}", content=content, headers=headers, timeout=60)


@pytest.mark.parametrize(
    ("case", "path", "payload"), BAD_REQUESTS, ids=[c[0] for c in BAD_REQUESTS]
)
def test_errors_have_the_real_engines_status_and_shape(
    sim_like_real: SimProcess, real_vllm: RealVllm, case: str, path: str, payload: Any
) -> None:
    real = _send(real_vllm.base_url, path, payload)
    sim = _send(sim_like_real.base_url, path, payload)
    assert sim.status_code == real.status_code, (case, real.text, sim.text)
    real_error, sim_error = real.json()["error"], sim.json()["error"]
    assert set(sim.json()) == {"error"}
    assert set(sim_error) == set(real_error)
    assert (sim_error["type"], sim_error["param"], sim_error["code"]) == (
        real_error["type"],
        real_error["param"],
        real_error["code"],
    ), (case, real_error, sim_error)


@pytest.mark.parametrize(
    ("path", "extra"),
    [
        ("/v1/completions", {"prompt": "hello world"}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hello"}]}),
    ],
)
def test_response_keys_are_a_subset_of_the_real_engines(
    sim_like_real: SimProcess, real_vllm: RealVllm, path: str, extra: dict[str, Any]
) -> None:
    body = {"model": real_vllm.served_name, "max_tokens": 3, "ignore_eos": True, **extra}
    real = _send(real_vllm.base_url, path, body).json()
    sim = _send(sim_like_real.base_url, path, body).json()
    assert set(sim) <= set(real)
    assert set(sim["choices"][0]) <= set(real["choices"][0])
    assert set(sim["usage"]) <= set(real["usage"])
    assert (sim["object"], sim["model"], sim["choices"][0]["finish_reason"]) == (
        real["object"],
        real["model"],
        "length",
    )

    stream_body = {**body, "stream": True, "stream_options": {"include_usage": True}}
    real_events = _events(real_vllm.base_url, path, stream_body)
    sim_events = _events(sim_like_real.base_url, path, stream_body)
    assert sim_events[-1] == real_events[-1] == "[DONE]"
    real_chunks = [json.loads(e) for e in real_events[:-1]]
    sim_chunks = [json.loads(e) for e in sim_events[:-1]]
    # Same sequence of chunk kinds: (has choices, finish_reason) per chunk, usage last.
    assert [_kind(c) for c in sim_chunks] == [_kind(c) for c in real_chunks]
    for sim_chunk, real_chunk in zip(sim_chunks, real_chunks, strict=True):
        assert set(sim_chunk) <= set(real_chunk)
    assert sim_chunks[-1]["usage"]["completion_tokens"] == 3


def _events(base: str, path: str, body: dict[str, Any]) -> list[str]:
    events = []
    with httpx.stream("POST", f"{base}{path}", json=body, timeout=60) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data: "):
                events.append(line[len("data: ") :])
    return events


def _kind(chunk: dict[str, Any]) -> tuple[int, str | None, bool]:
    choices = chunk.get("choices") or []
    finish = choices[0].get("finish_reason") if choices else None
    return len(choices), finish, chunk.get("usage") is not None
