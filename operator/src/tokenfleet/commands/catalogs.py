"""`tokenfleet models` and `tokenfleet gpus`: the built-in catalogs."""

from __future__ import annotations

import argparse
import json
import sys

from tokenfleet.capacity import GPUS, catalog_ids, load_model


def add_arguments(p: argparse.ArgumentParser, name: str) -> None:
    p.add_argument("-o", "--output", choices=("table", "json", "yaml"), default="table")
    p.set_defaults(_catalog=name)


def _models() -> list[dict[str, object]]:
    rows = []
    for model_id in catalog_ids():
        a = load_model(model_id)
        kind = "MoE" if a.moe else "dense"
        if a.attention.is_mla:
            kind += "+MLA"
        if a.is_hybrid:
            kind += "+sliding"
        elif a.sliding_layers:
            kind += f" (SWA {a.sliding_window})"
        rows.append({
            "id": model_id, "type": kind, "params": round(a.params.total / 1e9, 2),
            "activeParams": round(a.params.active / 1e9, 2), "layers": a.layers,
            "heads": a.attention.heads, "kvHeads": a.attention.kv_heads,
            "context": a.max_context,
            "quantization": str(a.quantization_config.get("quant_method", "")),
        })  # fmt: skip
    return rows


def _dump(rows: list[dict[str, object]], output: str) -> None:
    if output == "json":
        print(json.dumps(rows, indent=2))
    else:
        import yaml

        yaml.safe_dump(rows, sys.stdout, sort_keys=False)


def run(args: argparse.Namespace) -> int:
    if args._catalog == "models":
        rows = _models()
        if args.output != "table":
            _dump(rows, args.output)
            return 0
        w = max([36, *(len(str(r["id"])) + 2 for r in rows)])  # ids never run into TYPE
        print(
            f"{'MODEL':<{w}}{'TYPE':<18}{'PARAMS(B)':>10}{'ACTIVE(B)':>10}{'LAYERS':>7}"
            f"{'HEADS':>6}{'KV':>4}{'CONTEXT':>9}  QUANT"
        )
        for r in rows:
            print(
                f"{r['id']!s:<{w}}{r['type']!s:<18}{r['params']!s:>10}{r['activeParams']!s:>10}"
                f"{r['layers']!s:>7}{r['heads']!s:>6}{r['kvHeads']!s:>4}{r['context']!s:>9}"
                f"  {r['quantization']}"
            )
        return 0
    gpus = [
        {"id": g.id, "name": g.name, "memoryGiB": g.memory_gib, "bandwidthGBs": g.bandwidth_gbps,
         "bf16TFLOPS": g.bf16_tflops, "fp8TFLOPS": g.fp8_tflops, "interconnect": g.interconnect,
         "gpusPerNode": g.gpus_per_node, "nodeLabel": f"{g.node_label_key}={g.node_label_value}",
         "resourceName": g.resource_name, "pricePerHour": g.price_per_hour}
        for g in GPUS.values()
    ]  # fmt: skip
    if args.output != "table":
        _dump(gpus, args.output)
        return 0
    w = max(len(g.id) for g in GPUS.values()) + 2
    print(
        f"{'GPU':<{w}}{'MEMORY(GiB)':>12}{'BW(GB/s)':>9}{'BF16':>6}{'FP8':>6}  {'LINK':<16}"
        f"{'PER NODE':>8}  {'$/h':>5}  {'RESOURCE':<24}NODE LABEL"
    )
    for g in GPUS.values():
        link = "MIG slice" if g.parent else g.interconnect
        print(
            f"{g.id:<{w}}{g.memory_gib:>12.2f}{g.bandwidth_gbps:>9.0f}{g.bf16_tflops:>6.0f}"
            f"{g.fp8_tflops:>6.0f}  {link:<16}{g.gpus_per_node:>8}  "
            f"{g.price_per_hour:>5.2f}  {g.resource_name:<24}"
            f"{g.node_label_key}={g.node_label_value}"
        )
    return 0
