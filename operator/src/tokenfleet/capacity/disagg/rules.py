"""What the engines' KV connectors accept for a prefill / decode pair. Pure.

Every rule names the engine source it comes from. The planner proposes only pairs these
accept; a spec that fixes a pair they refuse is refused with the field, the value and the
fix (`check_pair`, `check_version`), before anything is created.

vLLM (NixlConnector):
- From 0.12: the decode role is rendered with `kv_load_failure_policy: recompute`
  (KVTransferConfig, vllm-project/vllm#26813, merged 2025-10; `vllm@0.32:vllm/config/
  kv_transfer.py`, whose default is "fail" since vllm-project/vllm#34896), so a prefill pod
  that scales down under an in-flight read costs that request a recompute, not an error.
  Older versions are refused: they have no such key (or no NixlConnector at all before
  vllm-project/vllm#17751).
- TP sizes must divide one another (`TransferTopology.tp_ratio` asserts it:
  `vllm@0.32:vllm/distributed/kv_transfer/kv_connector/utils.py`).
- Decode TP below prefill TP: 0.32 reads several prefill ranks per decode rank, except
  where the prefill side replicates KV heads (prefill TP > KV heads) of a model without MLA
  (`_validate_remote_agent_handshake`: `assert not (tp_ratio < 0 and is_kv_replicated)`,
  `vllm@0.32:vllm/distributed/kv_transfer/kv_connector/v1/nixl/base_worker.py`). Earlier
  releases assert "Decode TP cannot be smaller than prefill TP" in
  `NixlConnectorWorker.add_remote_agent` (`v1/nixl_connector.py`); the first release
  without it was not pinned down, so every version before 0.32 keeps it.

SGLang (`--disaggregation-mode`, from 0.5: `sglang@0.5.23:sglang/srt/arg_groups/fields/
disagg.py`): the Mooncake and NIXL backends slice KV heads between unequal TP sizes
(`send_kvcache_slice`), but not for every model: `mooncake/conn.py` raises "PD
Disaggregation does NOT support PD different TP sizes for non-MLA ... hybrid models", and
llm-d's SGLang P/D guide pins equal TP on both roles for Mooncake (llm-d/llm-d#2442). The
planner proposes equal TP for SGLang; a fixed unequal pair without MLA is refused.
"""

from __future__ import annotations

from tokenfleet.capacity.architecture import ModelArch
from tokenfleet.capacity.engine_profiles import DEFAULT_VERSIONS, engine_facts, parse_version
from tokenfleet.capacity.errors import PlanError

VLLM_PD_SINCE = (0, 12, 0)  # kv_load_failure_policy (module docstring)
VLLM_DECODE_TP_BELOW_PREFILL_SINCE = (0, 32, 0)  # several prefill ranks per decode rank
SGLANG_PD_SINCE = (0, 5, 0)
TRANSFER_BACKENDS = ("mooncake", "nixl")  # SGLang's --disaggregation-transfer-backend we render
# Per engine: the first version tokenfleet renders P/D for, and what older ones lack.
PD_SINCE = {"vllm": VLLM_PD_SINCE, "sglang": SGLANG_PD_SINCE}
PD_MISSING = {
    "vllm": "has no KVTransferConfig.kv_load_failure_policy (NixlConnector's recompute on a "
    "failed KV read, vllm-project/vllm#26813)",
    "sglang": "predates the --disaggregation-mode flags tokenfleet renders",
}


def equal_tp_unless_mla(engine: str) -> bool:
    """Whether the engine's connector wants equal TP on both roles for a model without MLA
    (SGLang's; vLLM's NixlConnector reads unequal ones, within the rules below)."""
    return engine_facts(engine).pd_equal_tp_unless_mla


def _text(v: tuple[int, int, int]) -> str:
    return ".".join(map(str, v))


def check_version(engine: str, version: str | None, field: str = "engine-version") -> None:
    """Refuse an engine version tokenfleet cannot render P/D for."""
    resolved = version or DEFAULT_VERSIONS[engine]
    v = parse_version(resolved, field)
    since = PD_SINCE[engine]
    if v < since:
        what = PD_MISSING[engine]
        raise PlanError(
            field,
            resolved,
            f"{engine} {resolved} {what}, which disaggregated serving needs",
            f"use {engine} {_text(since)} or newer (default {DEFAULT_VERSIONS[engine]}), or "
            "serve aggregated (serving mode aggregated)",
        )


def pair_problem(
    arch: ModelArch,
    engine: str,
    version: str | None,
    prefill_tp: int,
    decode_tp: int,
    backend: str = "nixl",
) -> str | None:
    """Why the engine's connector refuses this (prefill TP, decode TP) pair; None: it
    accepts it."""
    mla = arch.attention.is_mla
    if max(prefill_tp, decode_tp) % min(prefill_tp, decode_tp):
        return (
            f"prefill TP {prefill_tp} and decode TP {decode_tp} do not divide one another "
            "(the KV connector maps ranks by their ratio)"
        )
    if equal_tp_unless_mla(engine):
        if prefill_tp != decode_tp and not mla:
            return (
                f"SGLang's {backend} transfer between unequal TP sizes ({prefill_tp} / "
                f"{decode_tp}) is not supported for models without MLA by every release "
                "(llm-d's SGLang P/D guide pins equal TP)"
            )
        return None
    if decode_tp >= prefill_tp:
        return None
    v = parse_version(version or DEFAULT_VERSIONS["vllm"])
    if v < VLLM_DECODE_TP_BELOW_PREFILL_SINCE:
        return (
            f"decode TP {decode_tp} is below prefill TP {prefill_tp}: vLLM before "
            f"{_text(VLLM_DECODE_TP_BELOW_PREFILL_SINCE)} asserts 'Decode TP cannot be "
            "smaller than prefill TP' (NixlConnector)"
        )
    if not mla and prefill_tp > arch.attention.kv_heads:
        return (
            f"decode TP {decode_tp} is below prefill TP {prefill_tp}, whose ranks replicate "
            f"the model's {arch.attention.kv_heads} KV heads: vLLM's NixlConnector asserts "
            "on it"
        )
    return None


def check_pair(
    arch: ModelArch,
    engine: str,
    version: str | None,
    prefill_tp: int,
    decode_tp: int,
    backend: str = "nixl",
    field: str = "decode-tp",
) -> None:
    problem = pair_problem(arch, engine, version, prefill_tp, decode_tp, backend)
    if problem is not None:
        fix = (
            f"use decode TP {prefill_tp}"
            if equal_tp_unless_mla(engine) or decode_tp < prefill_tp
            else "use TP sizes that divide one another (1, 2, 4, 8)"
        )
        raise PlanError(field, decode_tp, problem, f"{fix}, or leave the roles' TP to the planner")
