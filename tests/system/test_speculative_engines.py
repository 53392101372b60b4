"""What tokenfleet renders for speculative decoding, checked by the engines' own code.

- vLLM: the `--speculative-config` JSON of a plan goes to vLLM's SpeculativeConfig (the class
  `vllm serve` builds from it), with the tiny Llama as the target and a local draft / EAGLE-3
  head directory, for n-gram, EAGLE-3 and a draft model; the methods the planner knows are
  all in vLLM's SpeculativeMethod.
- SGLang: the `--speculative-*` flags go through SGLang's own argument parser
  (ServerArgs.add_cli_args) and its SpeculativeAlgorithm.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.support.real_vllm import engines_python, make_tiny_model
from tokenfleet.capacity import PlanRequest, get_gpu, load_model, plan
from tokenfleet.capacity.speculative import METHODS
from tokenfleet.engines import Launch, engine_args
from tokenfleet.engines.speculative import SGLANG_NAMES, speculative_request

pytestmark = [pytest.mark.system, pytest.mark.engines]

EAGLE3_HEAD = {
    "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": 256,
    "intermediate_size": 512, "num_hidden_layers": 1, "num_attention_heads": 4,
    "num_key_value_heads": 4, "vocab_size": 64, "draft_vocab_size": 32,
    "max_position_embeddings": 512, "tie_word_embeddings": False, "torch_dtype": "float32",
}  # fmt: skip

VLLM_SCRIPT = r"""
import json, sys, typing
from vllm.config import ModelConfig, ParallelConfig, SpeculativeConfig
from vllm.config.speculative import SpeculativeMethod
target, docs = json.load(sys.stdin)
model = ModelConfig(model=target, dtype="float32", max_model_len=512)
out = {}
def flat(t):
    for a in typing.get_args(t):
        yield from (flat(a) if typing.get_args(a) else [a])
out["methods"] = sorted(flat(SpeculativeMethod))
out["configs"] = []
for doc in docs:
    c = SpeculativeConfig(**doc, target_model_config=model, target_parallel_config=ParallelConfig())
    out["configs"].append([c.method, c.num_speculative_tokens, c.model])
print(json.dumps(out))
"""

SGLANG_SCRIPT = r"""
import argparse, json, sys
from sglang.srt.server_args import ServerArgs
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm
runs = json.load(sys.stdin)
parser = argparse.ArgumentParser()
ServerArgs.add_cli_args(parser)
out = []
for args in runs:
    ns = parser.parse_args(["--model-path", "m", *args])
    algo = SpeculativeAlgorithm.from_string(ns.speculative_algorithm)
    out.append([ns.speculative_algorithm, algo.name, ns.speculative_num_steps,
                ns.speculative_eagle_topk, ns.speculative_num_draft_tokens,
                ns.speculative_draft_model_path, ns.speculative_ngram_max_bfs_breadth])
print(json.dumps(out))
"""


def _run(script: str, payload: object) -> object:
    done = subprocess.run(
        [engines_python(), "-c", script], input=json.dumps(payload), capture_output=True,
        text=True, timeout=600, env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    work = tmp_path_factory.mktemp("spec-engines")
    model = make_tiny_model(engines_python(), work / "tiny-llama")
    head = work / "eagle3-head"
    head.mkdir()
    (head / "config.json").write_text(json.dumps(EAGLE3_HEAD))
    return {"model": model, "head": head}


def _rendered(engine: str, method: str, k: int, dirs: dict[str, Path]) -> list[str]:
    target = load_model(str(dirs["model"] / "config.json"))
    head, model = str(dirs["head"]), str(dirs["model"])
    draft = {"eagle3": head, "eagle": head, "draft_model": model}.get(method)
    sp = speculative_request(
        engine, None, method, k, target, draft_ref=draft, policy="always", allow_paths=True,
        passthrough={"prompt_lookup_max": 3} if method == "ngram" and engine == "vllm" else None,
    )  # fmt: skip
    req = PlanRequest(arch=target, gpu=get_gpu("l4"), engine=engine, max_model_len=512,
                      input_tokens=64, output_tokens=32, speculative=sp)  # fmt: skip
    p = plan(req)
    assert p.speculative is not None and p.speculative.enabled
    args = engine_args(p, Launch(str(dirs["model"])))
    return args[
        args.index("--speculative-config" if engine == "vllm" else "--speculative-algorithm") :
    ]


def test_vllms_speculative_config_accepts_what_we_render(dirs: dict[str, Path]) -> None:
    cases = [("ngram", 3), ("eagle3", 3), ("draft_model", 4)]
    docs = []
    for method, k in cases:
        args = _rendered("vllm", method, k, dirs)
        docs.append(json.loads(args[1]))
    out = _run(VLLM_SCRIPT, [str(dirs["model"]), docs])
    assert isinstance(out, dict)
    assert set(METHODS) <= set(out["methods"])
    for (method, k), (got_method, got_k, got_model) in zip(cases, out["configs"], strict=True):
        assert (got_method, got_k) == (method, k)
        if method != "ngram":
            assert got_model is not None


def test_sglangs_parser_accepts_what_we_render(dirs: dict[str, Path]) -> None:
    cases = [("eagle3", 3), ("ngram", 5), ("draft_model", 2), ("eagle", 4)]
    runs = []
    for method, k in cases:
        args = _rendered("sglang", method, k, dirs)
        runs.append(args)  # the speculative flags are the last ones rendered here
    out = _run(SGLANG_SCRIPT, runs)
    assert isinstance(out, list)
    for (method, k), row in zip(cases, out, strict=True):
        algorithm, algo_name, steps, topk, draft_tokens, path, breadth = row
        assert algorithm == SGLANG_NAMES[method]  # type: ignore[index]
        assert algo_name == ("EAGLE" if method == "eagle" else algorithm)
        assert draft_tokens == k + 1
        if method == "ngram":
            assert breadth == 1
        else:
            assert (steps, topk) == (k, 1) and path is not None
