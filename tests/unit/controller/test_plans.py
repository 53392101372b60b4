"""One plan per LLMService generation (issue 31): the reconciler's plan, kept per (uid,
generation, model config), is what the autoscaler, the SLO ceiling and the prefix feed read.

- Statically: no module the operator runs (controller/, autoscale/ but the offline fleet
  simulator, commands/operator.py) plans an LLMService itself: only the reconciler's
  pipeline calls the planner on a spec; the ceiling's mix and the prefix feed ask for the
  kept plan at another workload (capacity/pinned.py `replan`).
- The store: a newer generation replaces the older, a late pass of an older one does not,
  a recreated namesake (another uid) reads nothing of the old one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tokenfleet.controller.plans import KeptPlan, Plans, config_digest

SRC = Path(__file__).resolve().parents[3] / "operator" / "src" / "tokenfleet"
# The names that turn a spec into a plan; capacity.plan on a PlanRequest built elsewhere.
PLANNING = {"plan_service", "to_plan_request", "plan"}
OPERATOR_MODULES = [
    *sorted((SRC / "controller").glob("*.py")),
    *sorted((SRC / "autoscale").glob("*.py")),
    SRC / "commands" / "operator.py",
]
ALLOWED = {SRC / "controller" / "reconcile.py"}  # its Pipeline: the one plan per generation


def planning_calls(path: Path) -> list[str]:
    """Calls of the planner, by name, and imports of it (`from ... import plan_service`)."""
    tree = ast.parse(path.read_text())
    found = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.startswith(("tokenfleet.api", "tokenfleet.capacity"))
        ):
            names = {alias.name for alias in node.names} & PLANNING
            if node.module in ("tokenfleet.capacity.pinned",):
                names -= {"plan"}
            found += [f"import {name} from {node.module}" for name in sorted(names)]
    return found


@pytest.mark.parametrize("path", OPERATOR_MODULES, ids=lambda p: str(p.relative_to(SRC)))
def test_no_operator_module_plans_an_llmservice_but_the_reconciler(path: Path) -> None:
    if path in ALLOWED:
        return
    assert planning_calls(path) == []


def test_the_check_sees_a_planning_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("from tokenfleet.api import plan_service, to_plan_request\n")
    assert planning_calls(module) == [
        "import plan_service from tokenfleet.api",
        "import to_plan_request from tokenfleet.api",
    ]


def fake(label: str) -> object:
    return label  # the store never looks inside a plan


def test_a_newer_generation_replaces_the_older_and_a_late_older_pass_does_not() -> None:
    plans, woken = Plans(), []
    plans.on_keep(woken.append)
    key = ("ns", "svc")
    plans.keep(key, "u1", 1, "", fake("g1"))  # type: ignore[arg-type]
    plans.keep(key, "u1", 2, "", fake("g2"))  # type: ignore[arg-type]
    plans.keep(key, "u1", 1, "", fake("late"))  # type: ignore[arg-type]
    kept = plans.latest(key, "u1")
    assert isinstance(kept, KeptPlan) and kept.plan == "g2" and kept.generation == 2
    assert woken == [key, key]
    assert plans.kept(key, "u1", 2, "") == "g2"
    assert plans.kept(key, "u1", 2, config_digest({"hidden_size": 1})) is None  # config moved
    assert plans.kept(key, "u1", 1, "") is None
    assert plans.latest(key, "u2") is None  # a namesake created after a delete
    plans.forget(key)
    assert plans.latest(key, "u1") is None and len(plans) == 0


def test_config_digest_is_the_configs_not_its_key_order() -> None:
    assert config_digest(None) == ""
    assert config_digest({"a": 1, "b": 2}) == config_digest({"b": 2, "a": 1})
    assert config_digest({"a": 1}) != config_digest({"a": 2})
