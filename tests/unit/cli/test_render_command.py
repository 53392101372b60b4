"""`tokenfleet render` as a user runs it: a YAML stream out, one-line errors (exit 2)."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
import yaml

from tests.support.render_cases import CASES_DIR
from tokenfleet.cli import main

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["render", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def kinds(stream: str) -> list[str]:
    return [d["kind"] for d in yaml.safe_load_all(stream) if d]


def test_prints_the_manifests_of_every_file(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, "-f", str(CASES_DIR / "vllm-8b-l4-minimal.yaml"),
        "-f", str(CASES_DIR / "vllm-405b-two-nodes.yaml"),
    )  # fmt: skip
    assert (code, err) == (0, "")
    assert kinds(out) == [
        "Deployment", "Service", "PodDisruptionBudget", "PodMonitor",
        "LeaderWorkerSet", "Service", "PodDisruptionBudget", "PodMonitor",
    ]  # fmt: skip
    assert out.startswith("# ")  # each LLMService is introduced by its plan
    assert "&id" not in out  # no YAML anchors in what people read


def test_configmap_in_the_same_file_resolves_config_map_ref(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = run(capsys, "-f", str(EXAMPLES / "qwen2.5-7b-configmap.yaml"))
    assert code == 0
    assert "ConfigMap" not in kinds(out)  # the operator does not apply it; the user does
    assert "Deployment" in kinds(out)


def test_no_monitoring_and_namespace(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(CASES_DIR / "vllm-mi300x-s3.yaml")
    code, out, _ = run(capsys, "-f", path, "--no-monitoring", "-n", "prod")
    assert code == 0
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert "PodMonitor" not in [d["kind"] for d in docs]
    assert {d["metadata"]["namespace"] for d in docs} == {"prod"}


def test_reads_stdin(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    text = (CASES_DIR / "sglang-32b-fp8-kv.yaml").read_text()
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    code, out, _ = run(capsys, "-f", "-")
    assert code == 0
    assert "sglang.launch_server" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-f", "examples/invalid/misspelled-field.yaml"],
         r"misspelled-field\.yaml: spec\.gpu\.tensorParalelSize=2: unknown field"),
        (["-f", "examples/invalid/unknown-gpu-type.yaml"], r"spec\.gpu\.type='h100'"),
        (["-f", "examples/llama-3.1-405b-multinode.yaml", "--no-lws"],
         r"spec\.gpu=16 x h100-sxm: .*LeaderWorkerSet"),
        (["-f", "does-not-exist.yaml"], r"--filename=does-not-exist\.yaml: No such file"),
    ],
)  # fmt: skip
def test_bad_input_is_one_line_naming_the_field(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
    message: str,
) -> None:
    monkeypatch.chdir(REPO)
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert re.search(message, err), err


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: [1, 2\n", r"not valid YAML at line 2"),
        ("kind: ConfigMap\nmetadata: {name: x}\n", r"no LLMService in"),
        ("- 1\n- 2\n", r"document=list: not a mapping"),
        (
            (EXAMPLES / "qwen2.5-7b-configmap.yaml").read_text().split("---")[1],
            r"spec\.model\.configMapRef\.name=qwen2-5-7b-config: no ConfigMap "
            r"default/qwen2-5-7b-config in the given files; pass the file",
        ),
    ],
)
def test_bad_files(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "in.yaml"
    path.write_text(text)
    code, out, err = run(capsys, "-f", str(path))
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert re.search(message, err), err


def _service(spec: dict[str, object]) -> str:
    body = {
        "apiVersion": "tokenfleet.dev/v1alpha1",
        "kind": "LLMService",
        "metadata": {"name": "m"},
        "spec": {"model": {"id": "meta-llama/Llama-3.1-8B"}, "gpu": {"type": "h100-sxm"}, **spec},
    }
    return yaml.safe_dump(body)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        # planner errors, worded for the CLI there, name the YAML fields here
        ({"gpu": {"type": "h100-sxm", "tensorParallelSize": 3}},
         r"spec\.gpu\.tensorParallelSize=3: tensor-parallel size does not divide"),
        ({"workload": {"maxModelLen": 1024}},
         r"spec\.workload\.maxModelLen=1024: .*raise spec\.workload\.maxModelLen or lower "
         r"spec\.workload\.inputTokens/spec\.workload\.outputTokens"),
        ({"gpu": {"type": "l4", "tensorParallelSize": 1},
          "model": {"id": "meta-llama/Llama-3.1-405B"}},
         r"spec\.gpu\.tensorParallelSize=1: does not fit .*add pipeline stages "
         r"\(spec\.gpu\.pipelineParallelSize N\), raise spec\.gpu\.tensorParallelSize"),
        # the shared request checks, named as spec fields
        ({"workload": {"inputTokens": 1_000_000}},
         r"spec\.workload\.inputTokens=1000000: .*131,072-token context"),
        # vLLM refuses it at start-up: the pod would crash-loop
        ({"workload": {"maxModelLen": 200_000}},
         r"spec\.workload\.maxModelLen=200000: exceeds the 131,072-token context .*lower "
         r"spec\.workload\.maxModelLen to 131,072"),
        ({"workload": {"targetRequestsPerSecond": 1_000_000}},
         r"spec\.workload\.targetRequestsPerSecond=1e\+06: needs .* replicas"),
        ({"engine": {"version": "99.0"}},
         r"spec\.engine\.version=99\.0: is newer .*use spec\.engine\.version 0\.32\.0"),
        ({"model": {"id": "meta-llama/Llama-3.1-8B", "quantization": "awq"}},
         r"spec\.model\.quantization=awq: does not match the checkpoint"),
    ],
)  # fmt: skip
def test_errors_name_yaml_fields_not_cli_flags(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, spec: dict[str, object], message: str
) -> None:
    path = tmp_path / "svc.yaml"
    path.write_text(_service(spec))
    code, out, err = run(capsys, "-f", str(path))
    assert (code, out) == (2, "")
    assert err.count("\n") == 1
    assert re.search(message, err), err
    assert not re.search(r"(^|\s|\()--[a-z]", err.split(": ", 1)[1]), err  # no CLI flag named
