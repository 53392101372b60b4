"""The engines' flags for one role of disaggregated serving. Pure.

vLLM (`vllm@0.32:vllm/config/kv_transfer.py`, KVTransferConfig; the system tests parse
every rendered JSON with the installed vLLM's own config class):
- `--kv-transfer-config` with `kv_connector: NixlConnector` and `kv_role` kv_producer on
  prefill, kv_consumer on decode (`kv_both` is deprecated for NixlConnector:
  `vllm@0.32:.../kv_connector/v1/nixl/connector.py`);
- decode adds `kv_load_failure_policy: recompute` (default "fail" since vllm-project/
  vllm#34896): a prefill pod that scales down while a decode pod still reads its blocks
  costs that request a recompute on the decode pod instead of an error;
- `VLLM_NIXL_SIDE_CHANNEL_HOST`, the address NIXL's handshake listens on and advertises
  (default "localhost", `vllm@0.32:vllm/envs.py`), is the pod IP (render sets it from the
  downward API), on VLLM_NIXL_SIDE_CHANNEL_PORT's default 5600.

SGLang (`sglang@0.5.23:sglang/srt/arg_groups/fields/disagg.py`, checked by SGLang's own
parser): `--disaggregation-mode prefill|decode`, `--disaggregation-transfer-backend
nixl|mooncake`, and on prefill servers `--disaggregation-bootstrap-port` (its default 8998,
which llm-d's routing sidecar also assumes: SGLANG_BOOTSTRAP_PORT, `llm-d-router@v0.10.0:
pkg/sidecar/proxy/connector_sglang.go`).
"""

from __future__ import annotations

import json

from tokenfleet.engines.types import ServingRole

NIXL_CONNECTOR = "NixlConnector"
NIXL_SIDE_CHANNEL_HOST = "VLLM_NIXL_SIDE_CHANNEL_HOST"
NIXL_SIDE_CHANNEL_PORT = 5600  # VLLM_NIXL_SIDE_CHANNEL_PORT's default (vllm/envs.py)
SGLANG_BOOTSTRAP_PORT = 8998  # --disaggregation-bootstrap-port's default
# The engine port of a decode pod, behind the routing sidecar that takes the engine's usual
# one: llm-d's own layout (sidecar 8000 -> vLLM 8200, `llm-d-router@v0.10.0:deploy/
# components/vllm-decode/deployment.yaml`), the same offset for SGLang.
DECODE_PORT_OFFSET = 200


def kv_transfer_config(role: str) -> dict[str, str]:
    """vLLM's KVTransferConfig for a role, as the JSON `--kv-transfer-config` carries."""
    config = {
        "kv_connector": NIXL_CONNECTOR,
        "kv_role": "kv_producer" if role == "prefill" else "kv_consumer",
    }
    if role == "decode":
        config["kv_load_failure_policy"] = "recompute"
    return config


def vllm_args(serving: ServingRole) -> list[str]:
    text = json.dumps(kv_transfer_config(serving.role), separators=(",", ":"))
    return ["--kv-transfer-config", text]


def sglang_args(serving: ServingRole) -> list[str]:
    args = [
        "--disaggregation-mode", serving.role,
        "--disaggregation-transfer-backend", serving.backend,
    ]  # fmt: skip
    if serving.role == "prefill":
        args += ["--disaggregation-bootstrap-port", str(serving.bootstrap_port)]
    return args


def role_args(engine: str, serving: ServingRole | None) -> list[str]:
    if serving is None:
        return []
    return vllm_args(serving) if engine == "vllm" else sglang_args(serving)
