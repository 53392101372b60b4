"""The kubelet expands $(VAR) in command/args: nothing the user writes may reach it live."""

from __future__ import annotations

from pathlib import Path

import yaml

from tests.support.render_cases import CASES_DIR
from tokenfleet.commands.render import render_documents


def rendered_args(spec_changes: dict, case: str = "vllm-8b-l4-minimal") -> list[list[str]]:
    doc = yaml.safe_load((CASES_DIR / f"{case}.yaml").read_text())
    for section, value in spec_changes.items():
        doc["spec"][section] = {**(doc["spec"].get(section) or {}), **value}
    (r,) = render_documents([doc], "test")
    out = []
    for m in r.manifests:
        if m["kind"] == "Deployment":
            out.append(m["spec"]["template"]["spec"]["containers"][0]["args"])
        if m["kind"] == "LeaderWorkerSet":
            group = m["spec"]["leaderWorkerTemplate"]
            for t in (group["leaderTemplate"], group["workerTemplate"]):
                c = t["spec"]["containers"][0]
                out.append([*c.get("command", []), *c["args"]])
    return out


def test_user_args_and_names_cannot_reference_the_containers_env() -> None:
    (args,) = rendered_args(
        {
            "engine": {"args": ["--api-key", "$(HF_TOKEN)"]},
            "model": {"servedName": "m-$(HF_TOKEN)"},
        }
    )
    joined = " ".join(args)
    assert "$$(HF_TOKEN)" in args and "m-$$(HF_TOKEN)" in args
    assert joined.count("$(") == joined.count("$$(")  # no live reference left


def test_the_operators_own_references_stay_live() -> None:
    for args in rendered_args({"engine": {"args": ["--x", "$(HF_TOKEN)"]}}, "vllm-405b-two-nodes"):
        joined = " ".join(args)
        assert "$$(HF_TOKEN)" in joined
        assert "$(LWS_LEADER_ADDRESS)" in joined and "$$(LWS_LEADER_ADDRESS)" not in joined


def test_model_id_is_escaped_too(tmp_path: Path) -> None:
    (args,) = rendered_args({"model": {"source": {"uri": "s3://bucket/$(AWS_SECRET)/"}}})
    assert "s3://bucket/$$(AWS_SECRET)/" in args
