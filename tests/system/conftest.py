"""Session fixtures of the system tier: real servers, each started at most once per session.

- `real_vllm`: a real vLLM CPU engine serving a tiny random-weight Llama (real_vllm.py).
  Needs the engines venv; without it the tests FAIL with "run `make engines`".
- `prometheus`: a real Prometheus server (prometheus.py).
- `start_sim(*args)`: a `tokenfleet sim` process on a free loopback port, stopped at test end.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support.prometheus import prometheus  # noqa: F401  (re-exported session fixture)
from tests.support.real_vllm import RealVllm, start_real_vllm
from tests.support.sims import SimProcess, launch_sim


@pytest.fixture(scope="session")
def real_vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealVllm]:
    try:
        engine = start_real_vllm(tmp_path_factory.mktemp("real-vllm"))
    except RuntimeError as error:
        pytest.fail(str(error), pytrace=False)
    try:
        yield engine
    finally:
        engine.stop()


@pytest.fixture
def start_sim(tmp_path: Path) -> Iterator[Callable[..., SimProcess]]:
    started: list[SimProcess] = []

    def start(*args: str) -> SimProcess:
        sim = launch_sim(list(args), tmp_path / f"sim-{len(started)}.log")
        started.append(sim)
        return sim

    yield start
    for sim in started:
        sim.stop()
