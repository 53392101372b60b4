"""An async client for the Prometheus HTTP API: instant and range queries, typed results.

The only I/O of the autoscale package. What can go wrong is told apart by type, because the
autoscaler reacts differently to each:

- `PrometheusUnreachable`: no answer (connection refused, timeout, 5xx / 429 after the
  bounded retries). The policy holds: Prometheus is down, not the fleet.
- `PromQLError`: the server rejected the query (HTTP 400 `bad_data`, 422 `execution`); the
  message carries the server's own error text. Retrying cannot help: it is a bug or a
  misconfiguration and is not retried.
- `AnswerTooLarge`: the answer passed `max_bytes`; it is refused while it streams in (a
  tenant's URL must not be able to fill the operator's memory). Not retried.
- `MalformedAnswer`: not the Prometheus API's shape (no JSON, a value that is no number, a
  sample without its pair). Not retried.
- `EmptyResult`, `NonFiniteValue`, `StaleSample`: raised only by `scalar()`, which wants one
  usable number; `query()` returns whatever the server computed.

The base URL is parsed (api/prometheus_url.py) and each request goes to that base joined
with one of the two query endpoints, built from its parts: a base URL cannot carry a query
string, userinfo or dot segments into a request, and no other endpoint of Prometheus' API
(lifecycle, admin) is ever called.

Every query has a total `deadline` (connect, every retry and the whole body): httpx's
timeout is per read, so a server sending a byte every few seconds would never time out.

    async with PrometheusClient("http://prometheus.monitoring:9090") as prom:
        samples = (await prom.query('up{job="x"}')).samples
        ttft = await prom.scalar("histogram_quantile(0.95, ...)", max_age=120)
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
import ssl
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Literal, TypeVar

import httpx

from tokenfleet.api.prometheus_url import QUERY, QUERY_RANGE, PrometheusUrl, parse_prometheus_url

# Per request. Prometheus' own default query timeout is 2 min; the autoscaler decides every
# 30 s (spec.autoscaling.intervalSeconds default), so an answer later than 10 s is useless.
DEFAULT_TIMEOUT_S = 10.0
# Total per query, retries and body included: an answer later than this is useless too.
DEFAULT_DEADLINE_S = 10.0
# The largest answer read. The autoscaler's queries aggregate to one series or one per pod
# (a few hundred bytes each): 4 MiB is ~10,000 pods, and parsing it stays near 40 MiB.
DEFAULT_MAX_BYTES = 4 * 1024 * 1024
# Retries after the first try, for transport errors, 429 and 5xx only. Two retries ride out
# a Prometheus restart's first refused connections or one dropped keep-alive connection
# without stretching a tick past its interval.
DEFAULT_RETRIES = 2
# First backoff; doubled per retry (0.25 s, 0.5 s): short, the caller has a deadline.
DEFAULT_BACKOFF_S = 0.25
# Connections per client: the autoscaler keeps one client per LLMService, and httpx's
# default pool kept up to 20 idle connections each (a tick's ~15 concurrent queries):
# 15,000 sockets and 0.3 MiB per client at 1,000 LLMServices. Four carry a tick's queries
# within its deadline; one stays open between ticks.
POOL_LIMITS = httpx.Limits(max_connections=4, max_keepalive_connections=1)

ResultType = Literal["vector", "scalar", "matrix", "string"]
T = TypeVar("T")


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context (httpx's default: the certifi CA bundle) for every client: each
    client built its own, about 0.7 MiB of CA store apiece, and the autoscaler keeps one
    client per LLMService (700 MiB at 1,000 LLMServices)."""
    return httpx.create_ssl_context()


class PrometheusError(Exception):
    """Base of every error this client raises."""

    def __init__(self, message: str, query: str | None = None) -> None:
        super().__init__(message)
        self.query = query


class PrometheusUnreachable(PrometheusError):
    """No usable answer: connection failed, timed out, or the server kept failing (5xx)."""


class PromQLError(PrometheusError):
    """The server rejected the query; `server_message` is Prometheus' own error text."""

    def __init__(self, error_type: str, server_message: str, query: str | None) -> None:
        super().__init__(f"Prometheus rejected {query!r}: {error_type}: {server_message}", query)
        self.error_type = error_type
        self.server_message = server_message


class AnswerTooLarge(PrometheusError):
    """The answer is larger than the client reads (refused while streaming)."""


class MalformedAnswer(PrometheusError):
    """Not the Prometheus HTTP API's shape: no JSON, a non-numeric value, a broken sample."""


class EmptyResult(PrometheusError):
    """The query matched no series (wrong labels, not scraped yet, no traffic)."""


class NonFiniteValue(PrometheusError):
    """The value is NaN or +-Inf (e.g. 0/0 at zero load, a quantile of no observations)."""

    def __init__(self, value: float, query: str) -> None:
        super().__init__(f"{query!r} evaluated to {value}", query)
        self.value = value


class StaleSample(PrometheusError):
    """The newest sample behind the value is older than the caller accepts."""

    def __init__(self, age_seconds: float, max_age: float, query: str) -> None:
        super().__init__(
            f"{query!r}: newest sample is {age_seconds:.0f} s old (limit {max_age:.0f} s)", query
        )
        self.age_seconds = age_seconds


@dataclass(frozen=True)
class Sample:
    """One element of an instant vector (or a scalar, with no labels)."""

    labels: Mapping[str, str]
    value: float
    timestamp: float
    """Evaluation time of the query (not the scrape time: use PromQL timestamp() for that)."""


@dataclass(frozen=True)
class InstantResult:
    result_type: ResultType
    samples: tuple[Sample, ...]
    warnings: tuple[str, ...] = ()


@dataclass(frozen=True)
class Series:
    """One series of a range query: (timestamp, value) points in time order."""

    labels: Mapping[str, str]
    points: tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class RangeResult:
    series: tuple[Series, ...]
    warnings: tuple[str, ...] = ()


async def gather_all(*queries: Awaitable[T]) -> list[T]:
    """Every result, or the first failure with the other queries cancelled.

    asyncio.gather leaves the others running after a failure: they outlive their tick,
    hold the pool's connections and, once the client is closed, fail unseen."""
    tasks = [asyncio.ensure_future(q) for q in queries]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        pending = [t for t in tasks if not t.done()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)


def parse_value(raw: Any) -> float:
    """Prometheus encodes values as strings ("1.5", "NaN", "+Inf")."""
    if not isinstance(raw, (str, int, float)) or isinstance(raw, bool):
        raise ValueError(f"sample value {raw!r:.80} is not a number")
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"sample value {raw!r:.80} is not a number") from None


class PrometheusClient:
    """One pooled connection set to one Prometheus; safe to share between tasks."""

    def __init__(
        self,
        base_url: str | PrometheusUrl,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        deadline: float = DEFAULT_DEADLINE_S,
        max_bytes: int = DEFAULT_MAX_BYTES,
        retries: int = DEFAULT_RETRIES,
        backoff: float = DEFAULT_BACKOFF_S,
        headers: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if retries < 0:
            raise ValueError(f"retries={retries}: must be 0 or more")
        # A string is parsed as strictly as a tenant's (UrlRefused, a ValueError, if bad).
        self.url = (
            base_url
            if isinstance(base_url, PrometheusUrl)
            else parse_prometheus_url(base_url, "base_url")
        )
        self.base_url = str(self.url)
        self._retries = retries
        self._backoff = backoff
        self.deadline = deadline
        self.max_bytes = max_bytes
        self._http = httpx.AsyncClient(
            verify=_tls(),
            limits=POOL_LIMITS,
            timeout=timeout,
            headers=dict(headers or {}),
            transport=transport,
            trust_env=False,  # an in-cluster Prometheus is never reached through a proxy
        )

    async def __aenter__(self) -> PrometheusClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def close(self) -> None:
        await self._http.aclose()

    # --- queries -----------------------------------------------------------------------

    async def query(self, promql: str, at: float | None = None) -> InstantResult:
        """Instant query, evaluated at `at` (Unix seconds; default: the server's now)."""
        params = {"query": promql}
        if at is not None:
            params["time"] = f"{at:.3f}"
        data, warnings = await self._call(QUERY, params, promql)
        try:
            return _instant(data, warnings, promql)
        except (KeyError, TypeError, ValueError, IndexError) as error:
            raise MalformedAnswer(f"{promql!r}: malformed answer: {error}", promql) from None

    async def query_range(self, promql: str, start: float, end: float, step: float) -> RangeResult:
        """Range query from `start` to `end` (Unix seconds) every `step` seconds."""
        if step <= 0 or end < start:
            raise ValueError(f"query_range: need step > 0 and end >= start: {start}, {end}, {step}")
        params = {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}"}
        params["step"] = f"{step:g}"
        data, warnings = await self._call(QUERY_RANGE, params, promql)
        try:
            series = tuple(
                Series(
                    dict(r.get("metric") or {}),
                    tuple((float(t), parse_value(v)) for t, v in r.get("values") or []),
                )
                for r in data.get("result") or []
            )
        except (AttributeError, KeyError, TypeError, ValueError) as error:
            raise MalformedAnswer(f"{promql!r}: malformed answer: {error}", promql) from None
        return RangeResult(series, warnings)

    async def scalar(
        self, promql: str, at: float | None = None, *, max_age: float | None = None
    ) -> float:
        """The one finite value of a query that must return exactly one sample.

        With `max_age`, the query is also asked for `timestamp()` of its newest input sample
        and a value older than that raises StaleSample; use it on gauges and on plain
        selectors (timestamp() of an aggregation is the evaluation time, so meaningless).
        """
        result = await self.query(promql, at)
        if not result.samples:
            raise EmptyResult(f"{promql!r} returned no series", promql)
        if len(result.samples) > 1:
            labels = [dict(s.labels) for s in result.samples[:3]]
            raise PrometheusError(
                f"{promql!r} returned {len(result.samples)} series ({labels}...); "
                "aggregate it to one",
                promql,
            )
        sample = result.samples[0]
        if not math.isfinite(sample.value):
            raise NonFiniteValue(sample.value, promql)
        if max_age is not None:
            newest = await self.query(f"max(timestamp({promql}))", at)
            if newest.samples:
                age = sample.timestamp - newest.samples[0].value
                if age > max_age:
                    raise StaleSample(age, max_age, promql)
        return sample.value

    # --- transport ---------------------------------------------------------------------

    async def _call(
        self, path: str, params: Mapping[str, str], promql: str
    ) -> tuple[dict[str, Any], tuple[str, ...]]:
        last = "no answer"
        try:
            async with asyncio.timeout(self.deadline):
                for attempt in range(self._retries + 1):
                    if attempt:
                        await asyncio.sleep(self._backoff * 2 ** (attempt - 1))
                    try:
                        status, raw = await self._post(path, params, promql)
                    except httpx.TransportError as error:  # refused, reset, timed out, DNS
                        last = (
                            f"{type(error).__name__}: {error}"
                            if str(error)
                            else type(error).__name__
                        )
                        continue
                    if status == 429 or status >= 500:
                        last = f"HTTP {status}: {_error_text(raw)}"
                        continue
                    return _payload(status, raw, promql)
        except TimeoutError:
            raise PrometheusUnreachable(
                f"Prometheus at {self.base_url} gave no complete answer to {promql!r} within "
                f"the {self.deadline:g} s deadline (last: {last})",
                promql,
            ) from None
        raise PrometheusUnreachable(
            f"Prometheus at {self.base_url} did not answer {promql!r} after "
            f"{self._retries + 1} tries: {last}",
            promql,
        )

    async def _post(self, path: str, params: Mapping[str, str], promql: str) -> tuple[int, bytes]:
        """(status, body), the body read only up to max_bytes: refused past it."""
        # POST with a form body: long PromQL never hits URL length limits. The URL is built
        # from the parsed base's parts and a query endpoint (any other path is refused).
        base = self.url
        url = httpx.URL(
            scheme=base.scheme,
            host=base.host.strip("[]"),
            port=base.port,
            path=base.endpoint_path(path),
        )
        async with self._http.stream("POST", url, data=dict(params)) as response:
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > self.max_bytes:
                raise self._too_large(f"{int(declared)} bytes declared", promql)
            body = bytearray()
            async for chunk in response.aiter_bytes():  # decoded: a gzip bomb counts too
                body += chunk
                if len(body) > self.max_bytes:
                    raise self._too_large(f"more than {len(body)} bytes", promql)
            return response.status_code, bytes(body)

    def _too_large(self, size: str, promql: str) -> AnswerTooLarge:
        return AnswerTooLarge(
            f"Prometheus at {self.base_url} answered {promql!r} with {size}, over the "
            f"{self.max_bytes}-byte cap: refused (is the URL the fleet's Prometheus?)",
            promql,
        )


def _instant(data: Mapping[str, Any], warnings: tuple[str, ...], promql: str) -> InstantResult:
    kind = str(data.get("resultType"))
    result = data.get("result")
    if kind == "scalar" or kind == "string":
        t, v = result  # type: ignore[misc]
        value = parse_value(v) if kind == "scalar" else math.nan
        return InstantResult(kind, (Sample({}, value, float(t)),), warnings)  # type: ignore[arg-type]
    if kind == "vector":
        samples = tuple(
            Sample(dict(r.get("metric") or {}), parse_value(v), float(t))
            for r in result or []
            for t, v in [r["value"]]
        )
        return InstantResult("vector", samples, warnings)
    raise MalformedAnswer(f"{promql!r}: unexpected result type {kind!r} for an instant query")


def _error_text(raw: bytes) -> str:
    try:
        body = json.loads(raw)
    except ValueError:
        return raw[:500].decode(errors="replace")
    if isinstance(body, dict) and body.get("error"):
        return f"{body.get('errorType', 'error')}: {body['error']}"
    return raw[:500].decode(errors="replace")


def _payload(status: int, raw: bytes, promql: str) -> tuple[dict[str, Any], tuple[str, ...]]:
    try:
        body = json.loads(raw)
    except ValueError:
        raise MalformedAnswer(
            f"HTTP {status} with a non-JSON body for {promql!r}: "
            f"{raw[:200].decode(errors='replace')!r} (is the URL a Prometheus server?)",
            promql,
        ) from None
    if not isinstance(body, dict):
        raise MalformedAnswer(f"unexpected answer for {promql!r}: {body!r:.200}", promql)
    if body.get("status") != "success":
        raise PromQLError(
            str(body.get("errorType") or f"HTTP {status}"),
            str(body.get("error") or raw[:500].decode(errors="replace")),
            promql,
        )
    data = body.get("data")
    if not isinstance(data, dict):
        raise MalformedAnswer(f"{promql!r}: answer without a data object: {body!r:.200}", promql)
    warnings: Sequence[str] = body.get("warnings") or ()
    return dict(data), tuple(str(w) for w in warnings)
