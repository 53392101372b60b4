"""The simulator's LoRA endpoints and series against a REAL vLLM CPU engine with LoRA on.

Both serve the tiny model's name with `--enable-lora --max-loras 2 --max-lora-rank 8` and
VLLM_ALLOW_RUNTIME_LORA_UPDATING, and get the same calls in the same order: load a real
PEFT adapter, load it again, load under the base model's name, load from a path with
nothing there, load an adapter of a rank above --max-lora-rank, list /v1/models, complete
with the adapter, read /metrics, unload it twice, complete with it again. Each answer must
have the real engine's status code and body (text, or the error's type, param and code;
the same message where the simulator reproduces it), and every `vllm:` LoRA family the
simulator exports must exist in the real engine with the same type and label names.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.lora_engine import make_adapter
from tests.support.metric_families import families
from tests.support.real_vllm import RealVllm, engines_python, make_tiny_model
from tests.support.sims import SimProcess
from tokenfleet.engines.lora import VLLM_INFO_LABELS, VLLM_INFO_METRIC, VLLM_RUNTIME_ENV

pytestmark = [pytest.mark.system, pytest.mark.engines]

LORA_FLAGS = ("--enable-lora", "--max-loras", "2", "--max-lora-rank", "8")


@pytest.fixture(scope="module")
def adapters(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    work = tmp_path_factory.mktemp("lora-protocol")
    python = engines_python()
    model = make_tiny_model(python, work / "tiny-llama")
    return {
        "model": model,
        "sql": make_adapter(python, model, work / "adapters" / "sql", 8),
        "big": make_adapter(python, model, work / "adapters" / "big", 16),
    }


@pytest.fixture(scope="module")
def real_lora(adapters: dict[str, Path]) -> Iterator[RealVllm]:
    engine = RealVllm(
        model_dir=adapters["model"],
        log_path=adapters["model"].parent / "vllm-lora.log",
        extra_args=LORA_FLAGS,
        extra_env=((VLLM_RUNTIME_ENV, "True"),),
    )
    engine.start(engines_python())
    try:
        engine.wait_ready()
        yield engine
    finally:
        engine.stop()


@pytest.fixture
def sim_lora(
    start_sim: Callable[..., SimProcess], real_lora: RealVllm, monkeypatch: pytest.MonkeyPatch
) -> SimProcess:
    monkeypatch.setenv(VLLM_RUNTIME_ENV, "True")
    return start_sim(
        "--model", "meta-llama/Llama-3.1-8B", "--gpu", "l4",
        "--max-model-len", str(real_lora.max_model_len),
        "--served-model-name", real_lora.served_name,
        "--time-scale", "100", *LORA_FLAGS,
    )  # fmt: skip


def _post(base: str, path: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(f"{base}{path}", json=body, timeout=120)


def _same_answer(real: httpx.Response, sim: httpx.Response, what: str, message: bool) -> None:
    assert sim.status_code == real.status_code, (what, real.text, sim.text)
    if real.status_code == 200 and not real.text.startswith("{"):
        assert sim.text == real.text, what  # vLLM answers a load / unload in plain text
        return
    real_error, sim_error = real.json()["error"], sim.json()["error"]
    assert set(sim_error) == set(real_error), what
    keys = ("type", "param", "code", *(("message",) if message else ()))
    assert {k: sim_error[k] for k in keys} == {k: real_error[k] for k in keys}, what


def test_lora_endpoints_and_series_match_the_real_engine(
    sim_lora: SimProcess, real_lora: RealVllm, adapters: dict[str, Path]
) -> None:
    sql, big, missing = str(adapters["sql"]), str(adapters["big"]), "/nonexistent/adapter"
    base = real_lora.served_name
    # (what, path, body, compare the message too)
    calls: list[tuple[str, str, dict[str, Any], bool]] = [
        ("load", "/v1/load_lora_adapter", {"lora_name": "sql", "lora_path": sql}, True),
        ("load again", "/v1/load_lora_adapter", {"lora_name": "sql", "lora_path": sql}, True),
        ("load as base", "/v1/load_lora_adapter", {"lora_name": base, "lora_path": sql}, True),
        ("load nothing", "/v1/load_lora_adapter", {"lora_name": "x", "lora_path": missing}, True),
        ("load rank 16", "/v1/load_lora_adapter", {"lora_name": "big", "lora_path": big}, False),
    ]
    for what, path, body, message in calls:
        _same_answer(_post(real_lora.base_url, path, body), _post(sim_lora.base_url, path, body),
                     what, message)  # fmt: skip

    listed = {}
    for name, url in (("real", real_lora.base_url), ("sim", sim_lora.base_url)):
        cards = httpx.get(f"{url}/v1/models", timeout=10).json()["data"]
        listed[name] = {c["id"]: c for c in cards}
    assert set(listed["sim"]) == set(listed["real"]) == {base, "sql"}
    real_card, sim_card = listed["real"]["sql"], listed["sim"]["sql"]
    assert set(sim_card) <= set(real_card)
    assert (sim_card["root"], sim_card["parent"]) == (real_card["root"], real_card["parent"])
    assert (sim_card["root"], sim_card["parent"]) == (sql, base)

    request = {"model": "sql", "prompt": "hello world", "max_tokens": 3}
    for url in (real_lora.base_url, sim_lora.base_url):
        answer = _post(url, "/v1/completions", request)
        assert answer.status_code == 200, answer.text
        assert answer.json()["model"] == "sql"

    sim_families = families(httpx.get(f"{sim_lora.base_url}/metrics").text)
    real_families = families(httpx.get(f"{real_lora.base_url}/metrics").text)
    assert VLLM_INFO_METRIC in sim_families and VLLM_INFO_METRIC in real_families
    for name in [n for n in sim_families if "lora" in n]:
        mine, theirs = sim_families[name], real_families.get(name)
        assert theirs is not None, f"{name}: the real engine has no such family"
        assert (mine.type, mine.labels) == (theirs.type, theirs.labels), name
    assert sim_families[VLLM_INFO_METRIC].labels == frozenset(VLLM_INFO_LABELS)

    unloads: list[tuple[str, str, dict[str, Any], bool]] = [
        ("unload", "/v1/unload_lora_adapter", {"lora_name": "sql"}, True),
        ("unload again", "/v1/unload_lora_adapter", {"lora_name": "sql"}, True),
        ("complete after unload", "/v1/completions", request, False),
    ]
    for what, path, body, message in unloads:
        _same_answer(_post(real_lora.base_url, path, body), _post(sim_lora.base_url, path, body),
                     what, message)  # fmt: skip
