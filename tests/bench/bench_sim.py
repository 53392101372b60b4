"""Benchmark: how much load one `tokenfleet sim` process sustains at --time-scale 1.

Reports numbers only (no assertion on time). The simulator runs in its own process; this
process drives it with N concurrent aiohttp clients that loop streamed requests for a fixed
time and only count SSE events (so the client stays cheap). For each N it prints:
- requests/s and streamed tokens/s the client received,
- `slowdown`: the client-measured mean end-to-end latency over the simulator's own
  (simulated-seconds) mean from /metrics. Near 1 the process keeps up with the engine it
  simulates (the client's own overhead on the same 2 cores is in the numerator),
- the simulator process's CPU use (100% = one core: it is single-threaded).
A second run measures plain HTTP request rate (non-streamed, max_tokens=1); a third makes
the simulated engine 10x faster (--time-scale 10) to find what one process can stream (there
`slowdown` is against simulated time / 10: well above 1 means the process is the limit and
tokens/s is its ceiling).

Run: .venv/bin/python tests/bench/bench_sim.py
 or: .venv/bin/pytest -s tests/bench/bench_sim.py
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import httpx
from prometheus_client.parser import text_string_to_metric_families

# A small model on a big GPU, so thousands of sequences fit the KV cache and a decode step
# is short: the hardest case for the simulator's own speed.
SIM_ARGS = [
    "--model", "meta-llama/Llama-3.1-8B", "--gpu", "h100-sxm",
    "--max-model-len", "4096", "--max-num-seqs", "4096", "--time-scale", "1",
]  # fmt: skip
PROMPT_TOKENS, OUTPUT_TOKENS = 16, 256
DURATION_S = 8.0
STREAM_LEVELS = (50, 200, 500, 1000, 2000)


@dataclass(frozen=True)
class Result:
    concurrency: int
    requests: int
    tokens: int
    seconds: float
    client_e2e_s: float
    sim_e2e_s: float
    sim_cpu_s: float  # CPU seconds the simulator process used during the run
    time_scale: float = 1.0

    @property
    def slowdown(self) -> float:
        wall = self.sim_e2e_s / self.time_scale  # what the e2e would take if kept up
        return self.client_e2e_s / wall if wall else float("nan")

    def row(self) -> str:
        return (
            f"{self.concurrency:>6} {self.requests / self.seconds:>9.1f} "
            f"{self.tokens / self.seconds:>11.0f} {self.client_e2e_s:>10.3f} "
            f"{self.sim_e2e_s:>9.3f} {self.slowdown:>8.2f} "
            f"{100 * self.sim_cpu_s / self.seconds:>7.0f}%"
        )


HEADER = (
    f"{'conc':>6} {'req/s':>9} {'tokens/s':>11} {'client e2e':>10} {'sim e2e':>9} "
    f"{'slowdown':>8} {'sim CPU':>8}"
)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def running_sim(extra: list[str] | None = None) -> Iterator[tuple[str, int]]:
    port = _free_port()
    command = [sys.executable, "-m", "tokenfleet.cli", "sim", *SIM_ARGS, *(extra or [])]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(150):
            if process.poll() is not None:
                raise RuntimeError(process.stderr.read().decode() if process.stderr else "")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{base}/health", timeout=1).status_code == 200:
                    break
            time.sleep(0.1)
        yield base, process.pid
    finally:
        process.terminate()
        process.wait(timeout=10)


def _e2e_from_metrics(base: str) -> tuple[float, float]:
    text = httpx.get(f"{base}/metrics", timeout=30).text
    total = count = 0.0
    for family in text_string_to_metric_families(text):
        if family.name == "vllm:e2e_request_latency_seconds":
            for sample in family.samples:
                if sample.name.endswith("_sum"):
                    total += sample.value
                elif sample.name.endswith("_count"):
                    count += sample.value
    return total, count


async def _drive(base: str, pid: int, concurrency: int, stream: bool, max_tokens: int) -> Result:
    body = {"prompt": [11] * PROMPT_TOKENS, "max_tokens": max_tokens, "stream": stream}
    latencies: list[float] = []
    tokens = 0
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=600)
    sum_before, count_before = _e2e_from_metrics(base)
    cpu_before = cpu_seconds(pid)
    async with aiohttp.ClientSession(base, connector=connector, timeout=timeout) as session:
        deadline = time.perf_counter() + DURATION_S

        async def worker() -> None:
            nonlocal tokens
            while time.perf_counter() < deadline:
                start = time.perf_counter()
                async with session.post("/v1/completions", json=body) as response:
                    if stream:
                        async for data in response.content.iter_any():
                            tokens += data.count(b"data: ")
                    else:
                        await response.read()
                        tokens += max_tokens
                latencies.append(time.perf_counter() - start)

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        seconds = time.perf_counter() - started
    cpu_used = cpu_seconds(pid) - cpu_before
    sum_after, count_after = _e2e_from_metrics(base)
    done = count_after - count_before
    sim_e2e = (sum_after - sum_before) / done if done else 0.0
    client_e2e = sum(latencies) / len(latencies) if latencies else 0.0
    return Result(concurrency, len(latencies), tokens, seconds, client_e2e, sim_e2e, cpu_used)


def bench_streams(levels: tuple[int, ...] = STREAM_LEVELS) -> list[Result]:
    results = []
    print(f"\nstreamed: {PROMPT_TOKENS} prompt / {OUTPUT_TOKENS} output tokens, {SIM_ARGS}")
    print(HEADER)
    for level in levels:
        with running_sim() as (base, pid):
            result = asyncio.run(_drive(base, pid, level, stream=True, max_tokens=OUTPUT_TOKENS))
        print(result.row(), flush=True)
        results.append(result)
    return results


def bench_request_rate(levels: tuple[int, ...] = (16, 64, 256)) -> list[Result]:
    results = []
    print("\nnon-streamed, max_tokens=1 (HTTP request rate)")
    print(HEADER)
    for level in levels:
        with running_sim() as (base, pid):
            result = asyncio.run(_drive(base, pid, level, stream=False, max_tokens=1))
        print(result.row(), flush=True)
        results.append(result)
    return results


def bench_ceiling(concurrency: int = 1000, time_scale: str = "10") -> Result:
    """The engine made 10x faster than the process can stream: what one process delivers."""
    print(f"\nprocess ceiling: {concurrency} streams, --time-scale {time_scale}")
    print(HEADER)
    with running_sim(["--time-scale", time_scale]) as (base, pid):
        result = asyncio.run(_drive(base, pid, concurrency, True, OUTPUT_TOKENS))
    result = dataclasses.replace(result, time_scale=float(time_scale))
    print(result.row(), flush=True)
    return result


def test_bench_sim_streams() -> None:
    results = bench_streams()
    assert all(r.requests > 0 for r in results)  # it ran; no assertion on speed


def test_bench_sim_request_rate() -> None:
    results = bench_request_rate()
    assert all(r.requests > 0 for r in results)


def test_bench_sim_ceiling() -> None:
    assert bench_ceiling().requests > 0


if __name__ == "__main__":
    bench_streams()
    bench_request_rate()
    bench_ceiling()
