"""A disaggregated LLMService's pools read their own series: the `role` the PodMonitor puts
on every engine series scopes each query, except the endpoint picker's (it has none)."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from tokenfleet.autoscale.signals import SignalsQuery, read_signals


@dataclass
class _Result:
    samples: list[object] = field(default_factory=list)


@dataclass
class Recorder:
    texts: list[str] = field(default_factory=list)

    async def query(self, text: str, at: float) -> _Result:
        self.texts.append(text)
        return _Result()


def texts(role: str | None) -> list[str]:
    client = Recorder()
    query = SignalsQuery("vllm", "ns", "chat", 1.0, 0.05, 0.95, role=role)
    asyncio.run(read_signals(client, query, 0.0))  # type: ignore[arg-type]
    return client.texts


def test_a_pool_reads_only_its_pods() -> None:
    sent = texts("prefill")
    engine = [t for t in sent if "llm_d_epp" not in t]
    picker = [t for t in sent if "llm_d_epp" in t]
    assert engine and all('role="prefill"' in t for t in engine)
    assert picker and not any("role=" in t for t in picker)


def test_an_aggregated_service_reads_every_pod() -> None:
    assert not any("role=" in t for t in texts(None))
