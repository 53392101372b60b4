"""The endpoint picker's disaggregation profile: a prefill pod, then a decode pod. Pure.

llm-d/llm-d-router v0.10.0 (engines.images.PICKER_VERSION), as its sample P/D configuration
(deploy/config/pd-epp-config.yaml) sets it up:
- `disagg-profile-handler` (pkg/epp/framework/plugins/scheduling/profilehandler/disagg/
  disagg_profile_handler.go) runs the `decode` profile for every request and, where its
  prefill decider agrees, the `prefill` profile; it passes the chosen prefill pod to the
  decode pod's routing sidecar in a header (render/routing/sidecar.py);
- `prefix-based-pd-decider` (prefix_based_pd_decider.go) sends a request to a prefill pod
  unless fewer than `nonCachedTokens` of its prompt are missing from the decode pod's prefix
  cache (then the decode pod prefills it itself); 16, the sample's value;
- `prefill-filter` / `decode-filter` (filter/bylabel/roles.go) keep the pods whose
  `llm-d.ai/role` label is prefill / decode (render/role_pod.py sets it);
- `approx-prefix-cache-producer` feeds the prefix-cache scorer and the decider; the
  `max-score-picker` picks in each profile.
The profiles keep the aggregated profile's scorers and weights.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

HANDLER = "disagg-profile-handler"
DECIDER = "prefix-based-pd-decider"
PREFILL_FILTER = "prefill-filter"
DECODE_FILTER = "decode-filter"
PICKER = "max-score-picker"
PREFIX_PRODUCER = "approx-prefix-cache-producer"
NON_CACHED_TOKENS = 16  # the sample configuration's


def plugins() -> list[dict[str, Any]]:
    return [
        {"type": PREFIX_PRODUCER},
        {"type": PREFILL_FILTER},
        {"type": DECODE_FILTER},
        {"type": PICKER},
        {"type": HANDLER, "parameters": {"deciders": {"prefill": DECIDER}}},
        {"type": DECIDER, "parameters": {"nonCachedTokens": NON_CACHED_TOKENS}},
    ]


def profiles(scorers: Sequence[tuple[str, int]]) -> list[dict[str, Any]]:
    def profile(name: str, role_filter: str) -> dict[str, Any]:
        return {
            "name": name,
            "plugins": [
                {"pluginRef": role_filter},
                {"pluginRef": PICKER},
                *({"pluginRef": ref, "weight": weight} for ref, weight in scorers),
            ],
        }

    return [profile("prefill", PREFILL_FILTER), profile("decode", DECODE_FILTER)]
