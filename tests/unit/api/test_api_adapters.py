"""spec.adapters and spec.lora: what is accepted, and each refusal with its field, value and fix.

The CEL half of the same rules is held against these in
tests/system/test_crd_and_examples.py (the invalid examples and test_cel_and_python_agree).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tokenfleet.api import SpecError, parse_llmservice
from tokenfleet.api.planrequest import lora_request

BASE: dict[str, Any] = {
    "apiVersion": "tokenfleet.dev/v1alpha1",
    "kind": "LLMService",
    "metadata": {"name": "t"},
    "spec": {
        "model": {"id": "meta-llama/Llama-3.1-8B", "servedName": "base"},
        "gpu": {"type": "l4"},
    },
}


def body(adapters: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    out = copy.deepcopy(BASE)
    out["spec"]["adapters"] = adapters
    out["spec"].update(spec)
    return out


def test_sources_parse_into_what_render_needs() -> None:
    service = parse_llmservice(
        body(
            [
                {"name": "a", "source": "hf://org/repo"},
                {"name": "b", "source": "hf://org/repo@main", "rank": 8},
                {"name": "c", "source": "s3://bucket-1/path/to"},
                {"name": "d", "source": "pvc://claim/sub/dir"},
            ],
            lora={"loading": "static", "maxLoras": 2},
        )
    )
    a, b, c, d = service.spec.adapters
    assert (a.scheme, a.hub_repo, a.revision) == ("hf", "org/repo", None)
    assert (b.hub_repo, b.revision) == ("org/repo", "main")
    assert c.scheme == "s3" and d.claim == ("claim", "sub/dir")
    assert service.spec.lora_enabled
    request = lora_request(service)
    assert request is not None
    assert (request.adapters, request.ranks, request.slots) == (4, (8,), 2)
    assert request.slots_field == "spec.lora.maxLoras"


def test_no_adapters_and_no_lora_is_no_lora() -> None:
    service = parse_llmservice(copy.deepcopy(BASE))
    assert not service.spec.lora_enabled and lora_request(service) is None
    assert parse_llmservice(body([], lora={})).spec.lora_enabled  # slots for runtime loads


@pytest.mark.parametrize(
    ("adapters", "spec", "expected"),
    [
        # an unknown source scheme, and a known one in the wrong form
        ([{"name": "a", "source": "gs://bucket/x"}], {},
         "spec.adapters[0].source='gs://bucket/x': unknown source scheme or form (gs://); "
         "use hf://org/repo[@revision], s3://bucket/prefix or pvc://claim/path"),
        ([{"name": "a", "source": "hf://just-a-name"}], {},
         "spec.adapters[0].source='hf://just-a-name': unknown source scheme or form"),
        # a rank above maxRank
        ([{"name": "a", "source": "hf://o/a", "rank": 64}], {"lora": {"maxRank": 16}},
         "an adapter's rank is above spec.lora.maxRank (the slots hold ranks up to maxRank) "
         "(a rank=64, maxRank=16); raise spec.lora.maxRank"),
        # the base model's served name, or another adapter's
        ([{"name": "base", "source": "hf://o/a"}], {},
         "must differ from the base model's served name (spec.model.servedName, default "
         "spec.model.id) (name=base); rename the adapter"),
        ([{"name": "a", "source": "hf://o/a"}, {"name": "a", "source": "hf://o/b"}], {},
         "spec.adapters[].name must be unique (name=a); rename or remove the duplicate"),
        # more pinned adapters than slots
        ([{"name": "a", "source": "hf://o/a", "pinned": True},
          {"name": "b", "source": "hf://o/b", "pinned": True}],
         {"engine": {"kind": "sglang"}, "lora": {"maxLoras": 1}},
         "more pinned adapters than spec.lora.maxLoras GPU slots (a pinned adapter keeps its "
         "slot) (2 > 1); raise spec.lora.maxLoras or pin fewer adapters"),
        # vLLM cannot pin
        ([{"name": "a", "source": "hf://o/a", "pinned": True}], {},
         "pinned adapters need spec.engine.kind: sglang"),
        # dynamic loading cannot fetch s3:// or a Hub revision
        ([{"name": "a", "source": "s3://bucket/a"}], {},
         "dynamic loading takes pvc:// sources and hf:// without a revision"),
        ([{"name": "a", "source": "hf://o/a@v1"}], {"lora": {"loading": "dynamic"}},
         "(a: hf://o/a@v1); set spec.lora.loading: static"),
        # one Hub token per engine under dynamic loading
        ([{"name": "a", "source": "hf://o/a", "tokenSecretRef": {"name": "x"}},
          {"name": "b", "source": "hf://o/b", "tokenSecretRef": {"name": "y"}}], {},
         "with one Hub token per engine"),
    ],
)  # fmt: skip
def test_refusals_name_the_field_the_value_and_the_fix(
    adapters: list[dict[str, Any]], spec: dict[str, Any], expected: str
) -> None:
    with pytest.raises(SpecError) as caught:
        parse_llmservice(body(adapters, **spec))
    message = str(caught.value)
    assert "\n" not in message
    if expected == "with one Hub token per engine":
        assert "its one Hub token" in message and "x/HF_TOKEN, y/HF_TOKEN" in message
    else:
        assert expected in message, message


def test_static_loading_takes_every_source_and_a_second_hub_token() -> None:
    parse_llmservice(
        body(
            [
                {"name": "a", "source": "s3://bucket/a", "credentialsSecretRef": {"name": "s"}},
                {"name": "b", "source": "hf://o/b@v2", "tokenSecretRef": {"name": "x"}},
                {"name": "c", "source": "hf://o/c", "tokenSecretRef": {"name": "y"}},
            ],
            lora={"loading": "static"},
        )
    )
