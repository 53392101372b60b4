"""Find a model's architecture: a built-in catalog entry by Hugging Face id, or a config.json.

The catalog (data/models.yaml) is read once per process. A path to a config.json is read
on each call; callers that already hold the config mapping (an LLMService with an inline
config or a ConfigMap) use `architecture_from_config` and do no I/O here.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from tokenfleet.capacity.architecture import ModelArch, parse_config
from tokenfleet.errors import UserError


@cache
def catalog_entries() -> dict[str, dict[str, Any]]:
    text = resources.files("tokenfleet.capacity").joinpath("data/models.yaml").read_text()
    entries: dict[str, dict[str, Any]] = yaml.safe_load(text)
    return entries


@cache
def _catalog_arch(model_id: str) -> ModelArch:
    return parse_config(catalog_entries()[model_id]["config"], model_id, f"catalog:{model_id}")


def catalog_ids() -> list[str]:
    return list(catalog_entries())


def _lookup_id(model_id: str) -> str | None:
    entries = catalog_entries()
    if model_id in entries:
        return model_id
    folded = {k.lower(): k for k in entries}
    # Accept case differences and a bare repo name ("Llama-3.1-8B").
    key = model_id.lower()
    if key in folded:
        return folded[key]
    by_name = {k.split("/", 1)[-1].lower(): k for k in entries}
    return by_name.get(key)


def architecture_from_config(config: Mapping[str, Any], name: str) -> ModelArch:
    return parse_config(config, name, name)


def _is_config_path(model: str) -> bool:
    path = Path(model)
    return model.endswith(".json") or path.is_dir() or path.is_file()


def served_model(model: str, model_id: str | None = None) -> tuple[str, str | None]:
    """What the engine must be told to serve for `--model` (and an optional `--model-id`),
    and a note for the user when that is not what they typed.

    A catalog alias ("llama-3.1-8b") becomes its canonical Hugging Face id: the engine
    downloads by that id, and an alias is no Hub repo. A config.json only sizes the model;
    unless --model-id names the Hub id (or directory) to serve, the engine serves the
    config's directory, which must then hold the weights as well.
    """
    if model_id:
        return model_id, None
    if _is_config_path(model):
        path = Path(model)
        directory = path if path.is_dir() else path.parent
        return str(directory), (
            f"the engine serves the directory {directory} (where the config.json is; it must "
            "also hold the weights); pass --model-id to serve a Hugging Face id instead"
        )
    found = _lookup_id(model)
    return (found or model), None


def load_model(model: str, field: str = "model") -> ModelArch:
    """A catalog id, or a path to a config.json (or a directory holding one)."""
    path = Path(model)
    if _is_config_path(model):
        file = path / "config.json" if path.is_dir() else path
        try:
            config = json.loads(file.read_text())
        except FileNotFoundError:
            raise UserError(
                field, model, "no such config file", "pass an existing config.json path"
            ) from None
        except json.JSONDecodeError as e:
            raise UserError(
                field, model, f"not valid JSON ({e.msg} at line {e.lineno})", "fix the file"
            ) from None
        except UnicodeDecodeError:
            raise UserError(
                field, model, "not UTF-8 text (a binary file?)", "pass a model's config.json"
            ) from None
        except OSError as e:
            raise UserError(
                field, model, e.strerror or "cannot read", "pass a readable config.json"
            ) from None
        if not isinstance(config, dict):
            raise UserError(field, model, "config.json is not a JSON object", "fix the file")
        return parse_config(config, str(config.get("_name_or_path") or file.parent.name), model)
    found = _lookup_id(model)
    if found is None:
        close = difflib.get_close_matches(model, catalog_ids(), n=3, cutoff=0.0)
        raise UserError(
            field,
            model,
            "not in the built-in catalog and not a config.json path",
            f"closest catalog ids: {', '.join(close)}; or pass --model path/to/config.json",
        )
    return _catalog_arch(found)
