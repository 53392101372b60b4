"""`tokenfleet plan --breakdown textbook`: the source material's formula, with its caveats."""

from __future__ import annotations

import json
import sys
from typing import Any

from tokenfleet.calibration.textbook import TextbookBreakdown, textbook
from tokenfleet.capacity import PlanRequest
from tokenfleet.capacity.quantization import dtype_bytes


def textbook_document(req: PlanRequest, t: TextbookBreakdown, context: int) -> dict[str, Any]:
    """The breakdown for tools (`-o json` / `-o yaml`): bytes are exact integers."""
    return {
        "model": req.arch.name,
        "batch": req.concurrency,
        "inputTokens": req.input_tokens,
        "outputTokens": req.output_tokens,
        "context": context,
        "bytesPerParam": int(dtype_bytes(req.dtype)),
        "parameters": req.arch.params.total,
        "rows": [{"part": r.part, "formula": r.formula, "bytes": r.bytes} for r in t.rows],
        "totalBytes": t.total_bytes,
        "totalWithContextBytes": t.total_with_context_bytes,
        "notes": list(t.notes),
    }


def print_textbook(req: PlanRequest, output: str = "table") -> None:
    context = req.max_model_len or req.arch.max_context
    bytes_per_param = int(dtype_bytes(req.dtype))
    t = textbook(
        req.arch, req.concurrency, req.input_tokens, req.output_tokens, context, bytes_per_param
    )
    if output == "json":
        json.dump(textbook_document(req, t, context), sys.stdout, indent=2)
        print()
        return
    if output == "yaml":
        import yaml

        yaml.safe_dump(textbook_document(req, t, context), sys.stdout, sort_keys=False)
        return
    print(
        f"textbook memory for {req.arch.name}: batch {req.concurrency}, {req.input_tokens} in + "
        f"{req.output_tokens} out, {context:,}-token context, {bytes_per_param} bytes/param"
    )
    print()
    print(f"  {'part':<24}{'bytes':>18}{'GiB':>10}{'GB':>10}   formula")
    for r in t.rows:
        print(
            f"  {r.part:<24}{r.bytes:>18,}{r.bytes / 1024**3:>10.2f}{r.bytes / 1e9:>10.2f}"
            f"   {r.formula}"
        )
    print(
        f"  {'total (request KV)':<24}{t.total_bytes:>18,}{t.total_bytes / 1024**3:>10.2f}"
        f"{t.total_bytes / 1e9:>10.2f}"
    )
    print(
        f"  {'total (context KV)':<24}{t.total_with_context_bytes:>18,}"
        f"{t.total_with_context_bytes / 1024**3:>10.2f}{t.total_with_context_bytes / 1e9:>10.2f}"
    )
    print()
    print(f"  parameters counted from config.json: {req.arch.params.total / 1e9:.2f} B")
    for note in t.notes:
        print(f"  note: {note}")
