"""The generated CRD, held against the API server's rules and against every example.

No kube-apiserver can run here, so crd_checker.py stands in for it (structural schema,
defaulting, strict OpenAPI validation and CEL via cel-python); kubernetes-validate checks
the CRD object itself against the real apiextensions.k8s.io/v1 schema.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.support.crd_checker import CrdValidator, structural_problems
from tokenfleet.api import SpecError, parse_llmservice, to_plan_request
from tokenfleet.api.crd import CRD_FILE, render_crd_yaml
from tokenfleet.cli import main

ROOT = Path(__file__).resolve().parents[2]
CRD_PATH = ROOT / "crds" / CRD_FILE
CHART_CRD = ROOT / "charts" / "tokenfleet" / "crds" / CRD_FILE
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
INVALID = sorted((ROOT / "examples" / "invalid").glob("*.yaml"))


@pytest.fixture(scope="module")
def crd() -> dict[str, Any]:
    return yaml.safe_load(CRD_PATH.read_text())


@pytest.fixture(scope="module")
def validator(crd: dict[str, Any]) -> CrdValidator:
    return CrdValidator(crd)


def _schema(crd: dict[str, Any]) -> dict[str, Any]:
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def _services(path: Path) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(LLMService, ConfigMaps by name) for every LLMService in a multi-document file."""
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    maps = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}
    others = [d["kind"] for d in docs if d["kind"] not in ("LLMService", "ConfigMap")]
    assert not others, f"{path.name}: unexpected kinds {others}"
    return [(d, maps) for d in docs if d["kind"] == "LLMService"]


def _expect(path: Path) -> str:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect:"), f"{path.name} must start with '# expect: <text>'"
    return first.split(":", 1)[1].strip()


# --- the committed files are what the models generate ---------------------------------


def test_committed_crd_is_generated_from_the_models() -> None:
    assert CRD_PATH.read_text() == render_crd_yaml(), "crds/ is stale: run `make crd`"


def test_chart_copy_matches_when_the_chart_exists() -> None:
    if CHART_CRD.parent.is_dir():
        assert CHART_CRD.read_text() == render_crd_yaml(), "chart CRD is stale: run `make crd`"
    else:  # the chart is added later; then `tokenfleet crd` writes the copy too
        assert not CHART_CRD.exists()


def test_crd_check_mode(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crd", "--check", "--root", str(ROOT)]) == 0
    (tmp_path / "charts" / "tokenfleet" / "crds").mkdir(parents=True)
    assert main(["crd", "--root", str(tmp_path)]) == 0  # writes crds/ and the chart copy
    assert (tmp_path / "charts" / "tokenfleet" / "crds" / CRD_FILE).read_text() == (
        render_crd_yaml()
    )
    stale = tmp_path / "crds" / CRD_FILE
    stale.write_text(stale.read_text().replace("llmsvc", "llmsv"))
    assert main(["crd", "--check", "--root", str(tmp_path)]) == 1
    assert "out of date" in capsys.readouterr().err


# --- the CRD is one the API server accepts ---------------------------------------------


def test_crd_is_a_valid_apiextensions_v1_object(crd: dict[str, Any]) -> None:
    kubernetes_validate.validate(crd, kubernetes_validate.latest_version(), strict=True)


def test_schema_is_structural(crd: dict[str, Any]) -> None:
    assert structural_problems(_schema(crd)) == []


@pytest.mark.parametrize(
    ("bad", "problem"),
    [
        ({"properties": {"a": {"type": "string"}}}, "<root>: no type"),
        ({"type": "object", "$ref": "#/x"}, "forbidden keyword $ref"),
        ({"type": "object", "anyOf": [{"type": "string"}]}, "forbidden keyword anyOf"),
        (
            {"type": "object", "properties": {}, "additionalProperties": False},
            "additionalProperties together with properties",
        ),
        ({"type": "integer", "default": "one"}, "default 'one' is invalid"),
        ({"type": "string", "enum": ["a", 1]}, "enum value 1"),
        ({"type": "object", "x-kubernetes-validations": [{"rule": "self.a <", "message": "m"}]},
         "does not compile"),
        (
            {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k"],
             "items": {"type": "object", "properties": {"k": {"type": "string"}}}},
            "must be required",
        ),
    ],
)  # fmt: skip
def test_structural_checker_finds_problems(bad: dict[str, Any], problem: str) -> None:
    assert any(problem in p for p in structural_problems(bad)), structural_problems(bad)


def test_crd_names_subresources_and_columns(crd: dict[str, Any]) -> None:
    spec = crd["spec"]
    assert crd["metadata"]["name"] == "llmservices.tokenfleet.dev"
    assert spec["names"]["shortNames"] == ["llms", "llmsvc"]
    assert spec["names"]["categories"] == ["tokenfleet"]
    version = spec["versions"][0]
    assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
    assert version["subresources"] == {
        "status": {},
        "scale": {
            "specReplicasPath": ".spec.replicas",
            "statusReplicasPath": ".status.replicas",
            "labelSelectorPath": ".status.selector",
        },
    }
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns == {
        "Model": ".spec.model.id",
        "Engine": ".spec.engine.kind",
        "GPU": ".spec.gpu.type",
        "TP": ".status.plan.tensorParallelSize",
        "Replicas": ".status.replicas",
        "Ready": ".status.readyReplicas",
        "TTFT": ".status.latestTtftMs",
        "Phase": ".status.phase",
        "Endpoint": ".status.endpoint",
        "Age": ".metadata.creationTimestamp",
    }
    # Every column points at a field the schema has (a typo would show an empty column).
    schema = _schema(crd)
    for path in columns.values():
        node = schema
        for part in path.strip(".").split("."):
            if node.get("type") == "object" and "properties" not in node:
                break  # metadata: free-form
            node = node["properties"][part]


# --- examples -----------------------------------------------------------------------------


def test_there_are_examples() -> None:
    names = {p.name for p in EXAMPLES}
    for required in (
        "llama-3.1-8b-l4.yaml",
        "gpt-oss-120b-h100.yaml",
        "llama-3.1-405b-multinode.yaml",
        "qwen3-32b-sglang.yaml",
    ):
        assert required in names
    assert len(INVALID) >= 4


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_passes_schema_and_cel(path: Path, validator: CrdValidator) -> None:
    for body, _ in _services(path):
        assert validator.errors(body) == []
        parse_llmservice(body)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_plans(path: Path) -> None:
    from tokenfleet.capacity import plan

    for body, config_maps in _services(path):
        service = parse_llmservice(body)
        ref = service.spec.model.config_map_ref
        config = json.loads(config_maps[ref.name]["data"][ref.key]) if ref else None
        result = plan(to_plan_request(service, config))
        gpu = service.spec.gpu
        if gpu.count is not None:
            assert result.gpus_per_replica == gpu.count
        if gpu.tensor_parallel_size is not None:
            assert result.tensor_parallel_size == gpu.tensor_parallel_size
        print(
            f"{path.name}: TP={result.tensor_parallel_size} PP={result.pipeline_parallel_size} "
            f"gpus={result.gpus_per_replica} nodes={result.nodes_per_replica} "
            f"kv={result.kv_cache_tokens} ttft={result.predicted.ttft_ms:.0f}ms "
            f"tpot={result.predicted.tpot_ms:.1f}ms"
        )


def test_405b_example_spans_two_nodes() -> None:
    from tokenfleet.capacity import plan

    ((body, _),) = _services(ROOT / "examples" / "llama-3.1-405b-multinode.yaml")
    result = plan(to_plan_request(parse_llmservice(body)))
    assert (result.tensor_parallel_size, result.pipeline_parallel_size) == (8, 2)
    assert result.nodes_per_replica == 2


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_invalid_example_is_rejected_by_the_crd(path: Path, validator: CrdValidator) -> None:
    errors = validator.errors(yaml.safe_load(path.read_text()))
    assert any(_expect(path) in e for e in errors), errors


@pytest.mark.parametrize("path", INVALID, ids=lambda p: p.name)
def test_invalid_example_is_rejected_by_the_operator(path: Path) -> None:
    with pytest.raises(SpecError) as caught:
        parse_llmservice(yaml.safe_load(path.read_text()))
    message = str(caught.value)
    assert _expect(path) in message
    assert "\n" not in message


# --- the CEL rules and the Python validators agree ------------------------------------

BASE: dict[str, Any] = {
    "apiVersion": "tokenfleet.dev/v1alpha1",
    "kind": "LLMService",
    "metadata": {"name": "t"},
    "spec": {"model": {"id": "meta-llama/Llama-3.1-8B"}, "gpu": {"type": "h100-sxm"}},
}


@pytest.mark.parametrize(
    ("section", "patch"),
    [
        ("autoscaling", {"minReplicas": 2, "maxReplicas": 2}),
        ("autoscaling", {"minReplicas": 3, "maxReplicas": 2}),
        ("autoscaling", {"minReplicas": 5}),  # against the default maxReplicas
        ("autoscaling", {"maxReplicas": 1}),
        ("autoscaling", {"minReplicas": 0}),  # scale to zero without routing
        ("routing", {"enabled": True}),
        ("gpu", {"count": 8, "tensorParallelSize": 4, "pipelineParallelSize": 2}),
        ("gpu", {"count": 8, "tensorParallelSize": 4, "pipelineParallelSize": 4}),
        ("gpu", {"count": 6, "tensorParallelSize": 4}),
        ("gpu", {"count": 8, "tensorParallelSize": 4}),
        ("gpu", {"count": 6, "pipelineParallelSize": 4}),
        ("gpu", {"tensorParallelSize": 4, "pipelineParallelSize": 4}),
        ("model", {"source": {}}),
        ("model", {"source": {"uri": "s3://b/m"}}),
        ("model", {"source": {"uri": "s3://b/m", "pvc": {"claimName": "w"}}}),
        ("model", {"source": {"huggingFace": {}, "pvc": {"claimName": "w"}, "uri": "gs://x"}}),
        ("model", {"config": {"a": 1}, "configMapRef": {"name": "c"}}),
        ("model", {"configMapRef": {"name": "c"}}),
        ("engine", {"env": [{"name": "A", "value": "1"}]}),
        ("engine", {"env": [{"name": "A"}]}),
        ("engine", {"env": [{"name": "A", "value": "1", "valueFrom": {"fieldRef": {}}}]}),
        ("lora", {"maxRank": 16}),
        ("lora", {"maxRank": 8}),  # below the rank-16 adapter of LORA_BASE
        ("lora", {"maxLoras": 1}),  # two pinned adapters in LORA_BASE
        ("lora", {"maxLoras": 2}),
        ("lora", {"loading": "static"}),
        ("gpu", {"type": "auto", "candidates": [{"type": "l4"}, {"type": "l40s"}]}),
        ("gpu", {"candidates": [{"type": "l4"}]}),
        ("gpu", {"type": "auto", "pricePerHour": 1.0}),
        ("gpu", {"type": "auto", "candidates": [{"type": "l4"}, {"type": "l4"}]}),
        ("gpu", {"type": "auto", "candidates": [{"type": "l4", "maxCount": 2}]}),
    ],
)
def test_cel_and_python_agree(section: str, patch: dict[str, Any], validator: CrdValidator) -> None:
    _agree(section, patch, validator, LORA_BASE if section == "lora" else BASE)


# SGLang (pinning), two pinned adapters of rank 16 from the Hub.
LORA_BASE: dict[str, Any] = {
    **BASE,
    "spec": {
        **BASE["spec"],
        "engine": {"kind": "sglang"},
        "adapters": [
            {"name": "a", "source": "hf://org/a", "rank": 16, "pinned": True},
            {"name": "b", "source": "hf://org/b", "pinned": True},
        ],
    },
}


@pytest.mark.parametrize(
    ("adapters", "refused"),
    [
        ([{"name": "a", "source": "hf://org/a"}], False),
        ([{"name": "a", "source": "hf://org/a@v1"}], True),  # dynamic loading: no revision
        ([{"name": "a", "source": "s3://bucket/a"}], True),  # dynamic loading: no s3
        ([{"name": "a", "source": "pvc://claim/a"}], False),
        ([{"name": "a", "source": "pvc://Claim/a"}], True),  # not a claim name
        ([{"name": "a", "source": "gs://bucket/a"}], True),
        ([{"name": "t", "source": "hf://org/a"}], False),  # the object's name is no model name
        ([{"name": "meta-llama", "source": "hf://org/a"}], False),
        ([{"name": "a", "source": "hf://org/a", "pinned": True}], True),  # vLLM cannot pin
    ],
)
def test_cel_and_python_agree_on_adapters(
    adapters: list[dict[str, Any]], refused: bool, validator: CrdValidator
) -> None:
    base = copy.deepcopy(BASE)
    base["spec"]["adapters"] = adapters
    assert _agree("model", {}, validator, base) == refused


def test_cel_and_python_agree_on_the_base_models_name(validator: CrdValidator) -> None:
    base = copy.deepcopy(BASE)
    base["spec"]["adapters"] = [{"name": "meta-llama/Llama-3.1-8B", "source": "hf://org/a"}]
    # Not a valid adapter name at all (a slash): the schema refuses it first.
    assert validator.errors(base)
    base["spec"]["adapters"] = [{"name": "chat", "source": "hf://org/a"}]
    assert _agree("model", {"servedName": "chat"}, validator, base)


@pytest.mark.parametrize("routing", [True, False])
def test_cel_and_python_agree_on_scale_to_zero(routing: bool, validator: CrdValidator) -> None:
    """minReplicas 0 is valid exactly when routing is on (a rule across two sections)."""
    base = copy.deepcopy(BASE)
    base["spec"]["routing"] = {"enabled": routing}
    assert _agree("autoscaling", {"enabled": True, "minReplicas": 0}, validator, base) != routing


def _agree(
    section: str, patch: dict[str, Any], validator: CrdValidator, base: dict[str, Any] = BASE
) -> bool:
    """Whether both refuse the body (they must agree, with the same sentence)."""
    body = copy.deepcopy(base)
    body["spec"].setdefault(section, {}).update(patch)
    cel = [e for e in validator.errors(body) if "Invalid value:" in e]
    schema = [e for e in validator.errors(body) if "Invalid value:" not in e]
    assert schema == []
    try:
        parse_llmservice(body)
        python: list[str] = []
    except SpecError as e:
        python = e.errors
    assert bool(cel) == bool(python), (cel, python)
    for line in python:  # the same sentence in both places
        assert any(line.split(": ", 1)[1].split(" (")[0].split(";")[0] in c for c in cel)
    return bool(python)
