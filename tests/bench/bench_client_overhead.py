"""Benchmark: how many requests/s the bench client can drive, and its CPU cost per request.

Reports numbers only (no assertion on time). Two targets, each in its own process so the
client's CPU is measured alone:
- a minimal aiohttp server that streams the tokens at once (the client is the bottleneck);
- `tokenfleet sim` at a huge --time-scale (the realistic fast target).

Run: .venv/bin/python tests/bench/bench_client_overhead.py
 or: .venv/bin/pytest -s tests/bench/bench_client_overhead.py
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import httpx

from tokenfleet.bench.aggregate import aggregate
from tokenfleet.bench.client import BenchConfig, run_benchmark
from tokenfleet.bench.dataset import DatasetSpec

# A streaming OpenAI endpoint with no delays: every token chunk, usage, [DONE] in one write.
TRIVIAL_SERVER = r"""
import json, sys
from aiohttp import web

async def completions(request):
    body = await request.json()
    n = int(body["max_tokens"])
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    chunks = [b'data: {"choices":[{"index":0,"text":" t"}]}\n\n'] * n
    usage = {"choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": n}}
    chunks.append(b"data: " + json.dumps(usage).encode() + b"\n\n")
    chunks.append(b"data: [DONE]\n\n")
    await resp.write(b"".join(chunks))
    await resp.write_eof()
    return resp

async def health(request):
    return web.Response(text="ok")

app = web.Application()
app.router.add_post("/v1/completions", completions)
app.router.add_get("/health", health)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, access_log=None)
"""

CASES = [  # (name, num_prompts, output_len, max_concurrency)
    ("1 token, concurrency 64", 3000, 1, 64),
    ("16 tokens, concurrency 64", 2000, 16, 64),
    ("128 tokens, concurrency 256", 500, 128, 256),
]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def _server(argv: list[str], port: int) -> Iterator[str]:
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + "/health", timeout=1, trust_env=False).is_success:
                    break
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def _measure(url: str, model: str, num: int, out_len: int, conc: int) -> dict[str, float]:
    cfg = BenchConfig(
        base_url=url,
        endpoint="/v1/completions",
        model=model,
        dataset=DatasetSpec(input_len=64, output_len=out_len),
        num_prompts=num,
        max_concurrency=conc,
    )
    cpu0 = time.process_time()
    outputs, duration = asyncio.run(run_benchmark(cfg))
    cpu = time.process_time() - cpu0
    m = aggregate(outputs, duration)
    return {
        "completed": m.completed,
        "req_per_s": m.request_throughput,
        "chunks_per_s": m.output_throughput,
        "client_cpu_ms_per_req": cpu / num * 1000.0,
        "client_cpu_us_per_chunk": cpu / max(m.total_output, 1) * 1e6,
    }


def run_all() -> list[tuple[str, dict[str, float]]]:
    rows: list[tuple[str, dict[str, float]]] = []
    port = _free_port()
    with _server([sys.executable, "-c", TRIVIAL_SERVER, str(port)], port) as url:
        for name, num, out_len, conc in CASES:
            rows.append((f"trivial server, {name}", _measure(url, "m", num, out_len, conc)))
    port = _free_port()
    sim = [sys.executable, "-m", "tokenfleet.cli", "sim", "--model", "meta-llama/Llama-3.1-8B",
           "--gpu", "h100-sxm", "--host", "127.0.0.1", "--port", str(port),
           "--time-scale", "1000"]  # fmt: skip
    with _server(sim, port) as url:
        name, num, out_len, conc = CASES[1]
        model = "meta-llama/Llama-3.1-8B"
        rows.append((f"tokenfleet sim x1000, {name}", _measure(url, model, num, out_len, conc)))
    return rows


def _print(rows: list[tuple[str, dict[str, float]]]) -> None:
    print(f"\n{'target / load':<46} {'done':>6} {'req/s':>8} {'chunk/s':>9} "
          f"{'cpu ms/req':>10} {'cpu us/chunk':>12}")  # fmt: skip
    for name, r in rows:
        print(
            f"{name:<46} {int(r['completed']):>6} {r['req_per_s']:>8.0f} "
            f"{r['chunks_per_s']:>9.0f} {r['client_cpu_ms_per_req']:>10.3f} "
            f"{r['client_cpu_us_per_chunk']:>12.1f}"
        )


def test_bench_client_overhead() -> None:
    """Under pytest (pass this file explicitly): print the table."""
    _print(run_all())


if __name__ == "__main__":
    _print(run_all())
