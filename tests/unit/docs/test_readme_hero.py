"""The README's first LLMService plans what the README says it does: one L4 per replica
(TP 1) at an 8,192-token context, so maxReplicas 4 is at most 4 GPUs."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from tokenfleet.commands.render import render_documents

ROOT = Path(__file__).resolve().parents[3]


def test_the_readme_llmservice_plans_what_the_readme_says() -> None:
    text = (ROOT / "README.md").read_text()
    block = re.search(r"```yaml\n(.*?)```", text, re.S)
    assert block, "the README lost its LLMService"
    (rendered,) = render_documents([yaml.safe_load(block.group(1))], "README.md")
    plan, spec = rendered.plan, rendered.service.spec
    said = re.search(r"each replica on one L4 \(TP (\d+)\) with an ([\d,]+)-token context", text)
    assert said, "the README no longer says what its LLMService plans"
    assert plan.tensor_parallel_size == int(said.group(1)) and plan.gpus_per_replica == 1
    assert plan.max_model_len == int(said.group(2).replace(",", ""))
    gpus = re.search(r"never uses\s+more than (\d+) L4s", text)
    assert gpus and int(gpus.group(1)) == spec.autoscaling.max_replicas * plan.gpus_per_replica
