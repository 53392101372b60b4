"""Where the autoscaler reads its signals: the allowlist of Prometheus URLs, and the source.

- `Allowlist`: the Prometheus base URLs tenants may name (`--allow-prometheus`, or only the
  operator's own `--prometheus-url`), parsed once. `target(spec_url)` is the URL a tick
  dials, built from the allowed entry's parts plus the spec's path below it
  (api/prometheus_url.py), or a `Refusal` naming the field, the value and the fix: a
  refused URL is never dialled.
- `SignalSource`: what a tick asks (`signals`, `pod_load`); `PrometheusSource` is the
  production one, autoscale.signals over one client per LLMService.
- `Observer`: a tick's signals within its deadline, or the reason to hold, logged once per
  kind of failure.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from tokenfleet.api.prometheus_url import (
    FIELD,
    PrometheusUrl,
    UrlRefused,
    parse_prometheus_url,
)
from tokenfleet.autoscale.prometheus import PrometheusClient, PrometheusError
from tokenfleet.autoscale.signals import Observation, SignalsQuery, pod_load, read_signals

NO_URL_MESSAGE = (
    "no Prometheus URL: set spec.autoscaling.prometheus.url or run the operator with "
    "--prometheus-url"
)


class SignalSource(Protocol):
    """`url` is the canonical form of a PrometheusUrl the Allowlist resolved; raise
    PrometheusError when Prometheus cannot answer (the decision then holds)."""

    async def signals(self, query: SignalsQuery, url: str, at: float) -> Observation: ...

    async def pod_load(self, query: SignalsQuery, url: str, at: float) -> dict[str, float]: ...


@dataclass(frozen=True)
class Refusal:
    """Why a tick dials nothing: the Autoscaling condition's message."""

    message: str


def refused_url_message(url: str, allowed: Sequence[str]) -> str:
    listed = ", ".join(allowed) if allowed else "none"
    return (
        f"{FIELD} {url!r} is not allowed by the operator "
        f"(allowed: {listed}); use an allowed URL, leave the field unset for the operator's "
        "--prometheus-url, or ask the operator's admin to add it with --allow-prometheus"
    )


@dataclass(frozen=True)
class Allowlist:
    """The allowed base URLs as written (for messages) and parsed (for comparing)."""

    written: tuple[str, ...]
    entries: tuple[PrometheusUrl, ...]

    @classmethod
    def of(cls, allowed: Sequence[str], field: str = "--allow-prometheus") -> Allowlist:
        """Raises UrlRefused for an entry that is not a plain base URL (the CLI refuses it
        at startup, exit 2)."""
        return cls(tuple(allowed), tuple(parse_prometheus_url(a, field) for a in allowed))

    def resolve(self, url: PrometheusUrl) -> PrometheusUrl | None:
        """`url` rebuilt on the first entry it is below, or None when it is below none."""
        entry = next((e for e in self.entries if url.below(e)), None)
        return None if entry is None else url.joined(entry)

    def target(self, spec_url: str | None, own: str | None) -> PrometheusUrl | Refusal:
        """The URL to dial for an LLMService: its own (allowed) or the operator's."""
        if spec_url is None:
            if own is None:
                return Refusal(NO_URL_MESSAGE)
            return parse_prometheus_url(own, "--prometheus-url")  # checked at startup
        try:
            url = parse_prometheus_url(spec_url)
        except UrlRefused as refused:  # an older CRD let it through: say why, dial nothing
            return Refusal(str(refused))
        resolved = self.resolve(url)
        if resolved is None:
            return Refusal(refused_url_message(spec_url, self.written))
        return resolved


def allowed_url(url: str, allowed: Sequence[str]) -> bool:
    """Whether the URL is one of `allowed` or below one of them by whole path segments
    (http://prom:9090 does not admit http://prom:90901, nor a URL with a query)."""
    try:
        return Allowlist.of(allowed).resolve(parse_prometheus_url(url)) is not None
    except UrlRefused:
        return False


class PrometheusSource:
    """The production SignalSource: autoscale.signals over one client per LLMService.

    Per LLMService, not per URL: a client lives exactly as long as its loop (released when
    the loop ends, replaced when the URL changes), so deleted LLMServices leave no socket."""

    def __init__(self) -> None:
        self._clients: dict[tuple[str, str], PrometheusClient] = {}

    def _client(self, query: SignalsQuery, url: str) -> PrometheusClient:
        key = (query.namespace, query.llmservice)
        parsed = parse_prometheus_url(url, "url")
        client = self._clients.get(key)
        if client is not None and client.url == parsed:
            return client
        if client is not None:  # the URL changed: the old connections go now
            asyncio.get_running_loop().create_task(client.close())
        self._clients[key] = client = PrometheusClient(parsed)
        return client

    async def signals(self, query: SignalsQuery, url: str, at: float) -> Observation:
        return await read_signals(self._client(query, url), query, at)

    async def pod_load(self, query: SignalsQuery, url: str, at: float) -> dict[str, float]:
        client = self._client(query, url)
        return await pod_load(client, query.engine, query.namespace, query.llmservice, at)

    async def release(self, namespace: str, name: str) -> None:
        client = self._clients.pop((namespace, name), None)
        if client is not None:
            await client.close()

    def open_clients(self) -> int:
        return len(self._clients)

    async def close(self) -> None:
        clients = list(self._clients.values())
        self._clients.clear()
        for client in clients:
            await client.close()


class Observer:
    """A tick's signals within its deadline, or why not: a failure is a reason to hold,
    logged once per kind of failure and LLMService, not per tick."""

    def __init__(self, source: SignalSource, logger: logging.Logger) -> None:
        self.source = source
        self._logger = logger
        self._failures: dict[tuple[str, str], str] = {}  # the kind of the last failure

    def forget(self, key: tuple[str, str]) -> None:
        self._failures.pop(key, None)

    async def observe(
        self, query: SignalsQuery, url: str, now: float, deadline: float
    ) -> tuple[Observation | None, str | None]:
        """(signals, None), or (None, why not)."""
        key = (query.namespace, query.llmservice)
        try:
            async with asyncio.timeout(deadline):
                observation = await self.source.signals(query, url, now)
        except TimeoutError:
            failure = (
                f"Prometheus at {url} gave no complete answer within the tick deadline "
                f"({deadline:g} s)"
            )
            kind = "deadline"
        except PrometheusError as error:
            failure, kind = str(error), type(error).__name__
        else:
            if self._failures.pop(key, None) is not None:
                self._logger.info("%s/%s: Prometheus answers again", *key)
            return observation, None
        if self._failures.get(key) != kind:
            self._logger.warning("%s/%s: Prometheus: %s; holding", *key, failure)
        else:
            self._logger.debug("%s/%s: Prometheus: %s; holding", *key, failure)
        self._failures[key] = kind
        return None, failure[:600]
