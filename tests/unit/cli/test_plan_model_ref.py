"""What the engine command serves: a Hub id or a directory, never an alias or a config path."""

import json

import pytest

from tokenfleet.capacity.catalog import catalog_entries, served_model
from tokenfleet.cli import main

LLAMA = "meta-llama/Llama-3.1-8B"


def _plan(capsys, *argv):
    assert main(["plan", *argv, "--gpu", "h100-sxm", "-o", "json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("alias", ["llama-3.1-8b", "META-LLAMA/llama-3.1-8b", LLAMA])
def test_catalog_alias_renders_the_canonical_hub_id(capsys, alias):
    doc = _plan(capsys, "--model", alias)
    assert doc["model"] == LLAMA
    assert doc["engineCommand"][:3] == ["vllm", "serve", LLAMA]


@pytest.fixture
def config_dir(tmp_path):
    folder = tmp_path / "my-finetune"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(catalog_entries()[LLAMA]["config"]))
    return folder


def test_config_path_serves_its_directory_and_says_so(capsys, config_dir):
    doc = _plan(capsys, "--model", str(config_dir / "config.json"))
    assert doc["engineCommand"][:3] == ["vllm", "serve", str(config_dir)]
    assert "config.json" not in " ".join(doc["engineCommand"])
    assert any("--model-id" in w and str(config_dir) in w for w in doc["warnings"])


def test_model_id_is_what_the_engine_serves(capsys, config_dir):
    doc = _plan(capsys, "--model", str(config_dir / "config.json"), "--model-id", "org/ft-8b")
    assert doc["engineCommand"][:3] == ["vllm", "serve", "org/ft-8b"]
    assert doc["model"] == "org/ft-8b"
    assert not any("--model-id" in w for w in doc["warnings"])


def test_sglang_gets_the_canonical_id_too(capsys):
    doc = _plan(capsys, "--model", "llama-3.1-8b", "--engine", "sglang")
    args = doc["engineCommand"]
    assert args[args.index("--model-path") + 1] == LLAMA


def test_served_model_table():
    assert served_model("llama-3.1-8b") == (LLAMA, None)
    assert served_model("llama-3.1-8b", "org/x") == ("org/x", None)
    ref, note = served_model("some/dir/config.json")
    assert ref == "some/dir" and note is not None
