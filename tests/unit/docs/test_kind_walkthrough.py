"""docs/simulate-on-kind.md and its example agree: the example renders a plan of one L4 per
replica (TP 1) at the per-replica goodput the walkthrough quotes, and the load it tells the
reader to send needs the replica count it says the autoscaler reaches (its maxReplicas), so
the walkthrough shows a scale-up rather than one replica that covers the load."""

from __future__ import annotations

import math
import re
from pathlib import Path

from tokenfleet.commands.render import Rendered, load_documents, render_documents

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "simulate-on-kind.md"
EXAMPLE = ROOT / "examples" / "llama-3.1-8b-kind-simulated.yaml"
WORDS = {"two": 2, "three": 3, "four": 4}


def _rendered() -> Rendered:
    (rendered,) = render_documents(load_documents(str(EXAMPLE)), str(EXAMPLE))
    return rendered


def test_the_example_plans_one_l4_per_replica_at_the_documented_goodput() -> None:
    text = DOC.read_text()
    quoted = re.search(r"one NVIDIA L4 per\s+replica \(about ([\d.]+) req/s per replica", text)
    assert quoted, "the walkthrough no longer quotes the per-replica goodput"
    plan = _rendered().plan
    assert (plan.tensor_parallel_size, plan.gpus_per_replica) == (1, 1)
    goodput = plan.predicted.goodput_requests_per_second
    assert round(goodput, 1) == float(quoted.group(1)), goodput


def test_the_documented_load_needs_the_documented_replicas() -> None:
    text = DOC.read_text()
    said = re.search(
        r"at ([\d.]+) req/s need (\w+) simulated L4\s+replicas at the autoscaler's (\d+)% target",
        text,
    )
    assert said, "the walkthrough no longer says what its load needs"
    rate, replicas, target = float(said.group(1)), WORDS[said.group(2)], int(said.group(3))
    command = re.search(r"--request-rate ([\d.]+)", text)
    assert command and float(command.group(1)) == rate
    lengths = re.search(r"--random-input-len (\d+) --random-output-len (\d+)", text)
    rendered = _rendered()
    spec = rendered.service.spec
    assert lengths and (int(lengths.group(1)), int(lengths.group(2))) == (
        spec.workload.input_tokens,
        spec.workload.output_tokens,
    )
    assert spec.autoscaling.target_utilization * 100 == target
    goodput = rendered.plan.predicted.goodput_requests_per_second
    # The autoscaler's feed-forward: ceil(load / (capacity x targetUtilization)).
    needed = math.ceil(rate / (goodput * spec.autoscaling.target_utilization))
    assert needed == replicas == spec.autoscaling.max_replicas
    assert spec.autoscaling.min_replicas < needed  # the walkthrough shows a scale-up
