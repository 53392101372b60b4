"""`tokenfleet sim`: an OpenAI-compatible server that behaves like vLLM / SGLang under load.

The capacity model sizes the replica (KV cache tokens, max-num-seqs, batched tokens,
max-model-len) exactly as `tokenfleet plan` would, and its step model times every engine
step. Flags named like the engines' (--max-num-seqs, --max-num-batched-tokens) override the
plan; --kv-cache-tokens overrides the KV size (to provoke queueing or preemption on purpose).
"""

from __future__ import annotations

import argparse
import sys

from tokenfleet.capacity import GPUS
from tokenfleet.capacity.quantization import QUANTIZATIONS

DEFAULT_PORTS = {"vllm": 8000, "sglang": 30000}


def add_arguments(p: argparse.ArgumentParser, name: str) -> None:
    p.add_argument(
        "--model", required=True, help="catalog id (tokenfleet models) or config.json path"
    )
    p.add_argument("--gpu", required=True, help=f"GPU type: {', '.join(GPUS)}")
    p.add_argument("--engine", choices=("vllm", "sglang"), default="vllm")
    p.add_argument("--engine-version", help="engine version to model (default: the planner's)")
    p.add_argument("--tp", type=int, help="tensor-parallel size (default: the planner's)")
    p.add_argument("--pp", type=int, help="pipeline-parallel size (default: the planner's)")
    p.add_argument(
        "--quantization", choices=QUANTIZATIONS, help="override the checkpoint's (as plan)"
    )
    p.add_argument(
        "--kv-cache-dtype", choices=("auto", "fp8"), default="auto", help="default: %(default)s"
    )
    p.add_argument("--max-model-len", type=int)
    p.add_argument("--max-num-seqs", type=int, help="override the planned max running requests")
    p.add_argument("--max-num-batched-tokens", type=int, help="override the planned step budget")
    p.add_argument("--kv-cache-tokens", type=int, help="override the planned KV cache size")
    p.add_argument(
        "--long-prefill-token-threshold",
        type=int,
        default=0,
        help="vLLM's per-step chunk cap for a request while others run or wait (0: none)",
    )
    p.add_argument("--served-model-name", help="name in /v1/models (default: --model)")
    p.add_argument("--host", default="0.0.0.0")
    p.add_argument("--port", type=int, help="default: 8000 (vllm) / 30000 (sglang)")
    p.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="run this many times faster than real time (metrics stay in simulated seconds)",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the generated text")
    p.add_argument(
        "--role",
        choices=("prefill", "decode"),
        help="one role of disaggregated serving: prefill runs each request to its first token; "
        "decode lands requests whose KV was transferred (never a prefill chunk) and exports "
        "vLLM's NIXL transfer series (default: aggregated)",
    )
    p.add_argument(
        "--kv-network-gbps",
        type=float,
        help="--role decode: the node network in Gb/s per GPU the KV crossed (default: the "
        "GPU catalog's)",
    )
    lora = p.add_argument_group(
        "LoRA adapters (vLLM's flag names; --max-loras counts adapters, not SGLang's base slot)"
    )
    lora.add_argument("--enable-lora", action="store_true", help="serve LoRA adapters")
    lora.add_argument("--max-loras", type=int, help="adapters on the GPU at once (default 1)")
    lora.add_argument("--max-lora-rank", type=int, help="largest adapter rank (default 16)")
    lora.add_argument(
        "--lora-modules",
        nargs="*",
        default=[],
        metavar="NAME=PATH",
        help="adapters loaded at start-up",
    )
    lora.add_argument(
        "--fs-root",
        help="read absolute adapter paths under this directory (the pod's filesystem)",
    )
    spec = p.add_argument_group(
        "speculative decoding (exported as the engines' spec-decode series)"
    )
    spec.add_argument(
        "--speculative-config",
        help="vLLM's --speculative-config JSON (method, model, num_speculative_tokens); the "
        "step model runs its rounds (for --engine sglang too)",
    )
    spec.add_argument(
        "--speculative-acceptance-rate",
        type=float,
        help="share of draft tokens accepted (default: the method's prior)",
    )
    p.add_argument(
        "--default-max-tokens",
        type=int,
        default=256,
        help="output length of chat requests that set no max_tokens (the sim never emits EOS)",
    )


def run(args: argparse.Namespace) -> int:
    from aiohttp import web

    from tokenfleet.commands.listen import bind_error, check_port
    from tokenfleet.sim.setup import settings_from_args

    port = DEFAULT_PORTS[args.engine] if args.port is None else args.port
    check_port("--port", port)
    settings, timer, summary = settings_from_args(args)
    print(summary, file=sys.stderr, flush=True)
    from tokenfleet.sim.server import build_app

    try:
        web.run_app(
            build_app(settings, timer),
            host=args.host,
            port=port,
            print=lambda msg: print(msg, file=sys.stderr, flush=True),
            access_log=None,
        )
    except OSError as error:  # busy port, foreign address, unresolvable host name
        raise bind_error(error, args.host, port, "--host", "--port") from None
    return 0
