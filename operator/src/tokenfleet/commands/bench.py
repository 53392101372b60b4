"""`tokenfleet bench`: load an OpenAI-compatible server like `vllm bench serve` does.

Flag names, report labels and the --save-result JSON keys follow `vllm bench serve`, so
commands and dashboards carry over; the datasets are synthetic (no tokenizer or hub
download needed), including the project's named workload shapes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
from datetime import datetime
from typing import Any


def add_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    from tokenfleet.bench.dataset import DATASETS, SHAPES

    shapes = "; ".join(f"{k}: {i} in / {o} out" for k, (i, o) in SHAPES.items())
    target = parser.add_argument_group("target")
    target.add_argument("--base-url", default=None, help="server URL, e.g. http://127.0.0.1:8000")
    target.add_argument("--host", default="127.0.0.1", help="used when --base-url is not given")
    target.add_argument("--port", type=int, default=8000, help="used when --base-url is not given")
    target.add_argument(
        "--endpoint",
        default="/v1/completions",
        choices=["/v1/completions", "/v1/chat/completions"],
        help="OpenAI API to call (default /v1/completions)",
    )
    target.add_argument(
        "--backend",
        default=None,
        choices=["openai", "openai-chat", "vllm"],
        help="recorded in the result; openai-chat implies --endpoint /v1/chat/completions",
    )
    target.add_argument("--model", default=None, help="model name (default: first of /v1/models)")
    target.add_argument("--served-model-name", default=None, help="name sent in requests")
    target.add_argument(
        "--header", metavar="KEY=VALUE", nargs="*", default=None, help="extra request headers"
    )
    target.add_argument(
        "--extra-body",
        default=None,
        metavar="JSON",
        help="a JSON object merged into every request body, e.g. '{\"top_p\": 0.9}'",
    )

    data = parser.add_argument_group("dataset")
    data.add_argument(
        "--dataset-name",
        "--dataset",
        dest="dataset_name",
        default="random",
        choices=DATASETS,
        help=f"synthetic prompts; named shapes: {shapes}",
    )
    data.add_argument("--random-input-len", type=int, default=None, help="prompt tokens")
    data.add_argument("--random-output-len", type=int, default=None, help="tokens to generate")
    data.add_argument(
        "--random-range-ratio",
        type=float,
        default=0.0,
        help="lengths uniform in [L*(1-r), L*(1+r)] (default 0: fixed)",
    )
    data.add_argument(
        "--num-prompts",
        type=int,
        default=None,
        help="requests to send (default 1000; unbounded with --duration)",
    )
    data.add_argument("--seed", type=int, default=0)
    data.add_argument(
        "--ignore-eos",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="send ignore_eos so exactly max_tokens are generated (default on)",
    )
    data.add_argument("--temperature", type=float, default=0.0)

    load = parser.add_argument_group("load")
    load.add_argument(
        "--request-rate",
        type=float,
        default=math.inf,
        help="requests/s (inf = all at once); Poisson, or gamma with --burstiness",
    )
    load.add_argument("--burstiness", type=float, default=1.0, help="gamma shape; 1 = Poisson")
    load.add_argument("--max-concurrency", type=int, default=None)
    load.add_argument(
        "--duration", type=float, default=None, help="stop issuing requests after N seconds"
    )

    out = parser.add_argument_group("results")
    out.add_argument(
        "--goodput",
        nargs="+",
        default=None,
        metavar="NAME:MS",
        help="SLOs for goodput, e.g. ttft:500 tpot:50 e2el:20000",
    )
    out.add_argument(
        "--percentile-metrics",
        default="ttft,tpot,itl,e2el",
        help="metrics to report percentiles for (default ttft,tpot,itl,e2el)",
    )
    out.add_argument("--metric-percentiles", default="99", help="e.g. 50,90,99 (default 99)")
    out.add_argument(
        "--save-result",
        nargs="?",
        const=True,
        default=False,
        metavar="FILE",
        help="save the JSON result (optionally to FILE)",
    )
    out.add_argument("--result-filename", default=None)
    out.add_argument("--result-dir", default=None)
    out.add_argument("--save-detailed", action="store_true", help="also save generated texts")
    out.add_argument("--label", default=None)
    out.add_argument("--disable-tqdm", action="store_true", help="no progress line")

    from tokenfleet.commands import bench_predict

    bench_predict.add_arguments(parser)


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _extra_body(text: str | None) -> dict[str, Any]:
    """--extra-body as a JSON object; checked in run(), so a typo is one line, not the usage."""
    if text is None:
        return {}
    try:
        body = json.loads(text)
    except ValueError as error:
        raise ValueError(
            f"--extra-body {text!r}: not JSON ({error}); pass a JSON object, e.g. "
            "'{\"top_p\": 0.9}'"
        ) from None
    if not isinstance(body, dict):
        raise ValueError(
            f"--extra-body {text!r}: a JSON {type(body).__name__}, not an object; pass a JSON "
            "object, e.g. '{\"top_p\": 0.9}'"
        )
    return body


def _headers(items: list[str] | None) -> dict[str, str]:
    headers: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--header {item!r}: expected KEY=VALUE")
        headers[key.strip()] = value.strip()
    return headers


def run(args: argparse.Namespace) -> int:
    import httpx

    from tokenfleet.bench.aggregate import (
        aggregate,
        parse_goodput,
        parse_metric_names,
        parse_percentiles,
    )
    from tokenfleet.bench.client import BenchConfig, discover_model, run_benchmark
    from tokenfleet.bench.dataset import dataset_spec
    from tokenfleet.bench.report import (
        RunInfo,
        default_result_filename,
        format_report,
        result_json,
    )

    endpoint = args.endpoint
    if args.backend == "openai-chat":
        endpoint = "/v1/chat/completions"
    backend = args.backend or ("openai-chat" if "chat" in endpoint else "openai")
    base_url = args.base_url or f"http://{args.host}:{args.port}"
    try:
        spec = dataset_spec(
            args.dataset_name,
            args.random_input_len,
            args.random_output_len,
            args.random_range_ratio,
            args.seed,
        )
        slo = parse_goodput(args.goodput)
        metric_names = parse_metric_names(args.percentile_metrics)
        percentiles = parse_percentiles(args.metric_percentiles)
        headers = _headers(args.header)
        extra_body = _extra_body(args.extra_body)
    except ValueError as error:
        return _fail(str(error))
    num_prompts = args.num_prompts
    if num_prompts is None and args.duration is None:
        num_prompts = 1000
    if num_prompts is not None and num_prompts < 1:
        return _fail(f"--num-prompts {num_prompts}: must be at least 1")
    if args.max_concurrency is not None and args.max_concurrency < 1:
        return _fail(f"--max-concurrency {args.max_concurrency}: must be at least 1")
    if args.duration is not None and args.duration <= 0:
        return _fail(f"--duration {args.duration}: must be > 0 seconds")
    if not args.request_rate > 0 or not args.burstiness > 0:
        return _fail(
            f"--request-rate {args.request_rate} / --burstiness {args.burstiness}: both must "
            "be > 0 (rate may be inf)"
        )
    if num_prompts is None and math.isinf(args.request_rate) and args.max_concurrency is None:
        return _fail(
            "--duration with --request-rate inf would send without limit: add "
            "--max-concurrency N (a closed loop), a finite --request-rate, or --num-prompts"
        )

    try:
        model = args.served_model_name or args.model or asyncio.run(discover_model(base_url))
    except (httpx.HTTPError, OSError, ValueError) as error:
        return _fail(f"--base-url {base_url}: cannot list models ({error}); pass --model")
    from tokenfleet.commands import bench_predict

    # Planned before the load is sent: a flag the prediction cannot take fails first.
    prediction = bench_predict.predict(args, model, spec.input_len, spec.output_len, num_prompts)
    cfg = BenchConfig(
        base_url=base_url,
        endpoint=endpoint,
        model=model,
        dataset=spec,
        num_prompts=num_prompts,
        request_rate=args.request_rate,
        burstiness=args.burstiness,
        max_concurrency=args.max_concurrency,
        duration=args.duration,
        ignore_eos=args.ignore_eos,
        temperature=args.temperature,
        extra_body=extra_body,
        headers=headers,
        progress=not args.disable_tqdm and sys.stderr.isatty(),
    )
    rate = "inf" if math.isinf(args.request_rate) else f"{args.request_rate:g}"
    kind = "Poisson process" if args.burstiness == 1.0 else "Gamma distribution"
    print(
        f"Benchmarking {cfg.api_url} model={model} dataset={args.dataset_name} "
        f"({spec.input_len} in / {spec.output_len} out)"
    )
    print(f"Traffic request rate: {rate}")
    print(f"Burstiness factor: {args.burstiness} ({kind})")
    print(f"Maximum request concurrency: {args.max_concurrency}")
    outputs, duration = asyncio.run(run_benchmark(cfg))
    metrics = aggregate(outputs, duration, percentiles, slo)
    info = RunInfo(
        backend=backend,
        model_id=args.model or model,
        num_prompts=num_prompts,
        request_rate=args.request_rate,
        burstiness=args.burstiness,
        max_concurrency=args.max_concurrency,
        percentile_metrics=metric_names,
        goodput_slo_ms=slo,
        label=args.label,
        date=datetime.now().strftime("%Y%m%d-%H%M%S"),
    )
    failures = [o.error for o in outputs if not o.success]
    if failures:
        print(f"first failure ({len(failures)} in all): {failures[0]}", file=sys.stderr)
    print(format_report(info, metrics))
    if prediction is not None:
        print(bench_predict.side_by_side(prediction, metrics))
    if args.save_result:
        path = _result_path(args, default_result_filename(info))
        document: dict[str, Any] = result_json(info, metrics, outputs, args.save_detailed)
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(document, handle)
        print(f"Saved the result to {path}")
    return 0 if metrics.completed > 0 else 1


def _result_path(args: argparse.Namespace, default_name: str) -> str:
    name = args.save_result if isinstance(args.save_result, str) else None
    name = args.result_filename or name or default_name
    if args.result_dir:
        os.makedirs(args.result_dir, exist_ok=True)
        name = os.path.join(args.result_dir, name)
    return name
