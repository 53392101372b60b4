"""The PromQL behind every autoscaling signal, and one async function that runs it.

Every series is scoped to one LLMService by the labels its PodMonitor relabels onto each
engine series (render/monitoring.py): `llmservice=<name>`, `namespace=<ns>`, `pod=<pod>`.
Metric names come from `tokenfleet.engines` (MetricNames), so vLLM's renamed series are
queried under every name at once (`A or B`), and SGLang under its own.

Pure builders (`*_query`, `pick_boundary`, `attainment_from`, `goodput_bounds`) make the
strings and the arithmetic and are unit-tested table-style; `read_signals()` runs them
against a PrometheusClient and returns an `Observation` (the `Signals` the policy reads,
plus how each attainment was measured). `pod_load()` returns running + waiting requests per
pod (for pod-deletion-cost on scale-down).

Attainment from a histogram is exact only when the SLO is a bucket boundary. Otherwise the
boundary below is used: attainment(TTFT <= boundary) <= attainment(TTFT <= SLO), a safe
under-estimate (the autoscaler may scale up a little early, never late), and the Observation
says which ("exact" / "down"). An SLO below the smallest bucket cannot be measured at all
("unmeasurable": None, never a made-up 0 or 1). The joint TTFT-and-TPOT attainment is only
bounded by the marginals a, b: [max(0, a + b - 1), min(a, b)]; goodput uses the lower bound
times the request rate.

Zero load reads as None, not 0: a quantile or a ratio of no observations is NaN in PromQL
(0/0), and the policy must tell "no data" from "all bad".
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from tokenfleet.autoscale import dispersion
from tokenfleet.autoscale.attainability import LengthHistogram
from tokenfleet.autoscale.prometheus import PrometheusClient, Sample, gather_all
from tokenfleet.autoscale.types import Signals
from tokenfleet.engines import engine_info
from tokenfleet.engines.types import MetricNames

# rate() window: four scrapes of the PodMonitor's 15 s interval (render/monitoring.py), the
# usual rule of thumb so a window always holds at least two samples despite a missed scrape.
DEFAULT_WINDOW_SECONDS = 60.0
# The request mix (prompt lengths) changes slowly: read over 10 minutes, so a 1% tail is
# more than the few requests of one minute (fleetsim.observed.MIX_WINDOW_S, the same).
MIX_WINDOW_SECONDS = 600.0
# Two boundaries closer than this (relative) are the same number printed differently.
BOUNDARY_TOLERANCE = 1e-9

Rounding = Literal["exact", "down", "unmeasurable", "nodata"]


@dataclass(frozen=True)
class SignalsQuery:
    """What to measure for one LLMService: its engine, its scope and its SLO."""

    engine: str
    """vllm | sglang (spec.engine.kind)."""
    namespace: str
    llmservice: str
    ttft_slo_seconds: float
    tpot_slo_seconds: float
    quantile: float
    """TTFT quantile (spec.slo.quantile, 0.95 = p95)."""
    window_seconds: float = DEFAULT_WINDOW_SECONDS
    role: str | None = None
    """Disaggregated serving: one pool's series only (`role` from the PodMonitor's
    relabeling, render/monitoring.py); None: every engine pod of the LLMService."""

    @property
    def names(self) -> MetricNames:
        return engine_info(self.engine).metrics


@dataclass(frozen=True)
class Boundary:
    """The histogram boundary an SLO is measured at."""

    le: str | None
    """The `le` label value exactly as the engine exports it (None: unmeasurable)."""
    seconds: float | None
    rounding: Rounding


@dataclass(frozen=True)
class Attainment:
    """One SLO attainment and how it was measured."""

    value: float | None
    boundary: Boundary
    family: str | None
    """Histogram family used (e.g. vllm:request_time_per_output_token_seconds)."""
    per: Literal["request", "token"] | None = None
    """request: fraction of requests; token: fraction of inter-token gaps (the ITL
    histogram, where the engine has no per-request TPOT histogram: an approximation)."""


@dataclass(frozen=True)
class Observation:
    """What read_signals() saw: the Signals plus how the attainments were measured."""

    signals: Signals
    ttft: Attainment
    tpot: Attainment
    goodput_upper: float | None = None
    """Upper end of the joint bound times the rate (the policy uses the lower, in signals)."""
    prompts: LengthHistogram | None = None
    """Prompt lengths of the last MIX_WINDOW_SECONDS (the engine's own buckets): the mix
    the attainable ceiling is estimated from. None: the engine exports no such histogram."""
    mean_output_tokens: float | None = None
    """Mean generated tokens per request over MIX_WINDOW_SECONDS (_sum / _count: exact)."""
    mean_prompt_tokens: float | None = None
    """Mean prompt tokens per request over MIX_WINDOW_SECONDS (_sum / _count: exact)."""


# --- pure builders ------------------------------------------------------------------------


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def selector(namespace: str, llmservice: str, **extra: str) -> str:
    """The label matcher of one LLMService's engine series: {namespace="..",llmservice=".."}."""
    pairs = {"namespace": namespace, "llmservice": llmservice, **extra}
    return "{" + ",".join(f"{k}={_quote(v)}" for k, v in pairs.items()) + "}"


def _window(seconds: float) -> str:
    return f"{max(1, math.ceil(seconds))}s"


def any_of(names: Sequence[str], sel: str) -> str:
    """Every name of a renamed series, the first present one winning per label set."""
    if not names:
        raise ValueError("any_of needs at least one metric name")
    parts = [f"{name}{sel}" for name in names]
    return parts[0] if len(parts) == 1 else "(" + " or ".join(parts) + ")"


def reporting_replicas_query(names: MetricNames, sel: str) -> str:
    """Pods with a fresh engine sample: a scrape failure drops the series at once (staleness
    marker), so this counts the replicas that report now, not the ones that should."""
    return f"count(count by (pod) ({names.running}{sel}))"


def newest_sample_age_query(names: MetricNames, sel: str) -> str:
    """Seconds since the newest engine sample (timestamp() is the scrape time)."""
    return f"time() - max(timestamp({names.running}{sel}))"


def picker_queue_query(sel: str) -> str:
    """Requests the endpoint picker's flow control holds (llm-d-router v0.10.0,
    docs/metrics.md: llm_d_epp_flow_control_queue_size, a gauge per fairness id and
    priority, present once a request was queued); 0 while the picker reports anything
    (llm_d_epp_info, its build info, is always there), nothing when no picker is scraped.
    The picker's PodMonitor puts llmservice / namespace on its series as on the engines'."""
    return f"sum(llm_d_epp_flow_control_queue_size{sel}) or (0 * max(llm_d_epp_info{sel}))"


def prefix_hit_rate_query(names: MetricNames, sel: str, window_s: float) -> str | None:
    """Share of prompt tokens served from the engines' prefix cache over the window, whole
    LLMService: hits / queries of prompt tokens (vLLM's counters; 0/0, no prompt, is NaN),
    or the mean over the window of the engine's own hit-rate gauge (SGLang's). None: the
    engine exports neither."""
    window = _window(window_s)
    if names.prefix_cache_hits and names.prefix_cache_queries:
        return (
            f"sum(rate({names.prefix_cache_hits}{sel}[{window}])) / "
            f"sum(rate({names.prefix_cache_queries}{sel}[{window}]))"
        )
    if names.prefix_cache_hit_rate:
        return f"avg(avg_over_time({names.prefix_cache_hit_rate}{sel}[{window}]))"
    return None


def acceptance_query(names: MetricNames, sel: str, window_s: float) -> str | None:
    """Speculative decoding's mean tokens per verify step over the window, whole
    LLMService: 1 + accepted draft tokens / drafts (vLLM's counters, the formula of its
    SpecDecodingProm docstring), or the mean of the engine's own acceptance-length gauge
    (SGLang's). None: the engine exports neither."""
    window = _window(window_s)
    if names.spec_accepted_tokens and names.spec_drafts:
        return (
            f"1 + sum(rate({names.spec_accepted_tokens}{sel}[{window}])) / "
            f"sum(rate({names.spec_drafts}{sel}[{window}]))"
        )
    if names.spec_accept_length:
        # SGLang sets the gauge to 0 while it decodes nothing (or runs no speculation).
        return f"avg(avg_over_time({names.spec_accept_length}{sel}[{window}]) > 0)"
    return None


def request_rate_query(names: MetricNames, sel: str, window_s: float) -> str:
    """Finished requests per second over the window, whole LLMService (any finish reason)."""
    return f"sum(rate({names.request_success}{sel}[{_window(window_s)}]))"


def arrival_dispersion_query(names: MetricNames, sel: str) -> str:
    """dispersion.index_of_dispersion over Prometheus' counts, as fleetsim.observed'
    arrival_dispersion: first tokens (the TTFT histogram's count) per BIN_SECONDS,
    neighbours' squared difference over their sum, its median over WINDOW_SECONDS / the
    chi-square(1) median; nothing while fewer than MIN_BINS - 1 differences exist."""
    width, window = _window(dispersion.BIN_SECONDS), _window(dispersion.WINDOW_SECONDS)
    # Plain differences, not increase(): increase() extrapolates a window holding two
    # scrapes to its full width, which scales a count, and the IDC of k x N is k x its own.
    # Per pod (a pod that came or went in the bin drops out), resets clamped to 0.
    count = f"{names.ttft}_count{sel}"
    now = f"sum(clamp_min({count} - {count} offset {width}, 0))"
    earlier = _window(2 * dispersion.BIN_SECONDS)
    before = f"sum(clamp_min({count} offset {width} - {count} offset {earlier}, 0))"
    ratio = f"(({now} - {before}) ^ 2 / ({now} + {before} > 0))[{window}:{width}]"
    return (
        f"(quantile_over_time({dispersion.QUANTILE:g}, {ratio}) / {dispersion.CHI2_1_QUANTILE:.9g})"
        f" and on () (count_over_time({ratio}) >= {dispersion.MIN_BINS - 1})"
    )


def per_replica_query(metric_names: Sequence[str], sel: str) -> str:
    """Mean over pods of a per-pod gauge. max by (pod) first: an engine with several ranks
    (SGLang's tp_rank label) reports the same scheduler state once per rank."""
    return f"avg(max by (pod) ({any_of(metric_names, sel)}))"


def per_pod_query(metric_names: Sequence[str], sel: str) -> str:
    return f"max by (pod) ({any_of(metric_names, sel)})"


def ttft_quantile_query(names: MetricNames, sel: str, quantile: float, window_s: float) -> str:
    return (
        f"histogram_quantile({quantile:g}, sum by (le) "
        f"(rate({names.ttft}_bucket{sel}[{_window(window_s)}])))"
    )


def queue_wait_quantile_query(
    names: MetricNames, sel: str, quantile: float, window_s: float
) -> str:
    return (
        f"histogram_quantile({quantile:g}, sum by (le) "
        f"(rate({names.queue_time}_bucket{sel}[{_window(window_s)}])))"
    )


def length_histogram_query(family: str, sel: str, window_s: float) -> str:
    """Observations per bucket over the window (cumulative by `le`, as exported)."""
    return f"sum by (le) (increase({family}_bucket{sel}[{_window(window_s)}]))"


def mean_length_query(family: str, sel: str, window_s: float) -> str:
    window = _window(window_s)
    return (
        f"sum(increase({family}_sum{sel}[{window}])) / sum(increase({family}_count{sel}[{window}]))"
    )


def resolved_wait(value: float | None, les: Iterable[str]) -> float | None:
    """A queue-wait quantile inside the first bucket only restates the bucket's width
    (vLLM's starts at 0.3 s: waits of a few ms read ~0.29 s), so it reads as 0; waits the
    histogram cannot resolve are left to the attainment signal."""
    bounds = [b for b in (_le_or_none(le) for le in les) if b is not None and b > 0]
    if value is None or not bounds:
        return value
    return 0.0 if value < min(bounds) else value


def _le_or_none(le: str) -> float | None:
    try:
        value = parse_le(le)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def length_histogram(samples: Sequence[Sample]) -> LengthHistogram | None:
    """Cumulative `le` samples -> a LengthHistogram (None: no observations)."""
    cumulative: list[tuple[float, float]] = []
    for sample in samples:
        try:
            le = parse_le(sample.labels.get("le", ""))
        except ValueError:
            continue
        if math.isfinite(sample.value):
            cumulative.append((le, max(sample.value, 0.0)))
    cumulative.sort()
    if not cumulative or cumulative[-1][1] <= 0:
        return None
    bounds = tuple(le for le, _ in cumulative if math.isfinite(le))
    counts: list[float] = []
    previous = 0.0
    for _, value in cumulative:
        counts.append(max(value - previous, 0.0))  # rate() extrapolation can dip
        previous = max(previous, value)
    if len(counts) == len(bounds):  # no +Inf sample
        counts.append(0.0)
    return LengthHistogram(bounds, tuple(counts[: len(bounds) + 1]))


def tpot_families(names: MetricNames) -> tuple[tuple[str, Literal["request", "token"]], ...]:
    """Histograms that measure TPOT, best first: the per-request TPOT where the engine has
    one (what `vllm bench serve --goodput tpot:` checks), then inter-token latency (every
    name it has had)."""
    request = ((names.request_tpot, "request"),) if names.request_tpot else ()
    tokens = tuple((name, "token") for name in names.itl)
    return (*request, *tokens)


def bucket_bounds_query(families: Iterable[str], sel: str) -> str:
    """The `le` values each histogram family exports for this LLMService, in one query."""
    pattern = "|".join(re.escape(f"{family}_bucket") for family in families)
    return f"count by (__name__, le) ({{__name__=~{_quote(pattern)}, {sel[1:-1]}}})"


def attainment_query(family: str, le: str, sel: str, window_s: float) -> str:
    """Fraction of observations <= le over the window: rate(bucket{le}) / rate(count)."""
    window = _window(window_s)
    bucket_sel = sel[:-1] + f",le={_quote(le)}}}"
    below = f"sum(rate({family}_bucket{bucket_sel}[{window}]))"
    return f"{below} / sum(rate({family}_count{sel}[{window}]))"


def parse_le(le: str) -> float:
    return math.inf if le in ("+Inf", "Inf", "inf") else float(le)


def pick_boundary(slo_seconds: float, les: Iterable[str]) -> Boundary:
    """The largest finite boundary <= the SLO: exact when equal, else rounded down (safe)."""
    best: tuple[float, str] | None = None
    for le in les:
        try:
            value = parse_le(le)
        except ValueError:
            continue
        if not math.isfinite(value):
            continue
        if abs(value - slo_seconds) <= BOUNDARY_TOLERANCE * max(1.0, slo_seconds):
            return Boundary(le, value, "exact")
        if value < slo_seconds and (best is None or value > best[0]):
            best = (value, le)
    if best is None:
        return Boundary(None, None, "unmeasurable")
    return Boundary(best[1], best[0], "down")


def goodput_bounds(
    ttft: float | None, tpot: float | None, rate: float | None
) -> tuple[float, float] | None:
    """Requests/s meeting both SLOs, bounded by the marginals: [max(0, a+b-1), min(a, b)]
    times the rate (nothing more is known without a joint histogram)."""
    if ttft is None or tpot is None or rate is None:
        return None
    return max(0.0, ttft + tpot - 1.0) * rate, min(ttft, tpot) * rate


def finite(samples: Sequence[Sample]) -> float | None:
    """The value of a one-sample result; None for no sample or NaN/Inf (0/0 at zero load)."""
    if len(samples) != 1:
        return None
    value = samples[0].value
    return value if math.isfinite(value) else None


def _length(value: float | None) -> float | None:
    """An acceptance length (>= 1 token per step), or None where there was nothing to read."""
    return None if value is None or value < 1.0 else value


def clamp01(value: float | None) -> float | None:
    # rate() extrapolates each series separately: a ratio of rates can exceed 1 by a hair.
    return None if value is None else min(1.0, max(0.0, value))


# --- the I/O -------------------------------------------------------------------------------


async def read_signals(client: PrometheusClient, query: SignalsQuery, at: float) -> Observation:
    """Every signal of one LLMService, evaluated at `at` (Unix seconds).

    Raises PrometheusError (unreachable, rejected query): the caller holds. Missing data
    is not an error: it comes back as None fields and reporting_replicas 0.
    """
    names = query.names
    sel = selector(
        query.namespace, query.llmservice, **({"role": query.role} if query.role else {})
    )
    w = query.window_seconds
    families = [names.ttft, names.queue_time, *(f for f, _ in tpot_families(names))]
    texts = {
        "bounds": bucket_bounds_query(families, sel),
        "reporting": reporting_replicas_query(names, sel),
        "age": newest_sample_age_query(names, sel),
        "rate": request_rate_query(names, sel, w),
        "ttft_q": ttft_quantile_query(names, sel, query.quantile, w),
        "running": per_replica_query([names.running], sel),
        "waiting": per_replica_query([names.waiting], sel),
        "kv": per_replica_query(names.kv_usage, sel),
        # The picker's series carry no role: its queue is the whole LLMService's.
        "picker_queued": picker_queue_query(selector(query.namespace, query.llmservice)),
        "wait_q": queue_wait_quantile_query(names, sel, query.quantile, w),
        "dispersion": arrival_dispersion_query(names, sel),
    }
    prefix = prefix_hit_rate_query(names, sel, w)
    if prefix is not None:
        texts["prefix"] = prefix
    acceptance = acceptance_query(names, sel, w)
    if acceptance is not None:
        texts["acceptance"] = acceptance
    if names.prompt_length:
        texts["prompts"] = length_histogram_query(names.prompt_length, sel, MIX_WINDOW_SECONDS)
        texts["prompt_mean"] = mean_length_query(names.prompt_length, sel, MIX_WINDOW_SECONDS)
    if names.output_length:
        texts["output"] = mean_length_query(names.output_length, sel, MIX_WINDOW_SECONDS)
    results = await gather_all(*(client.query(t, at) for t in texts.values()))
    got = dict(zip(texts, (r.samples for r in results), strict=True))

    les: dict[str, list[str]] = {}
    for sample in got["bounds"]:
        family = sample.labels.get("__name__", "").removesuffix("_bucket")
        les.setdefault(family, []).append(sample.labels.get("le", ""))
    ttft_family = names.ttft if names.ttft in les else None
    tpot_family, per = next(((f, p) for f, p in tpot_families(names) if f in les), (None, None))
    ttft, tpot = await gather_all(
        _attainment(client, ttft_family, les, query.ttft_slo_seconds, sel, w, at, "request"),
        _attainment(client, tpot_family, les, query.tpot_slo_seconds, sel, w, at, per),
    )

    rate = finite(got["rate"])
    bounds = goodput_bounds(ttft.value, tpot.value, rate)
    reporting = finite(got["reporting"])
    signals = Signals(
        at=at,
        reporting_replicas=int(reporting or 0),
        request_rate=rate,
        ttft_quantile_seconds=finite(got["ttft_q"]),
        ttft_attainment=ttft.value,
        tpot_attainment=tpot.value,
        goodput=bounds[0] if bounds else None,
        running_per_replica=finite(got["running"]),
        waiting_per_replica=finite(got["waiting"]),
        kv_usage=finite(got["kv"]),
        newest_sample_age_seconds=finite(got["age"]),
        picker_queued=finite(got["picker_queued"]),
        queue_wait_quantile_seconds=resolved_wait(
            finite(got["wait_q"]), les.get(names.queue_time, ())
        ),
        prefix_cache_hit_rate=clamp01(finite(got["prefix"])) if "prefix" in got else None,
        arrival_dispersion=finite(got["dispersion"]),
        spec_accept_length=_length(finite(got["acceptance"])) if "acceptance" in got else None,
    )
    prompts = length_histogram(got["prompts"]) if "prompts" in got else None
    output = finite(got["output"]) if "output" in got else None
    prompt_mean = finite(got["prompt_mean"]) if "prompt_mean" in got else None
    return Observation(
        signals, ttft, tpot, bounds[1] if bounds else None, prompts, output, prompt_mean
    )


async def _attainment(
    client: PrometheusClient,
    family: str | None,
    les: Mapping[str, Sequence[str]],
    slo_seconds: float,
    sel: str,
    window_s: float,
    at: float,
    per: Literal["request", "token"] | None,
) -> Attainment:
    if family is None:
        return Attainment(None, Boundary(None, None, "nodata"), None, None)
    boundary = pick_boundary(slo_seconds, les.get(family, ()))
    if boundary.le is None:
        return Attainment(None, boundary, family, per)
    result = await client.query(attainment_query(family, boundary.le, sel, window_s), at)
    return Attainment(clamp01(finite(result.samples)), boundary, family, per)


async def pod_load(
    client: PrometheusClient, engine: str, namespace: str, llmservice: str, at: float
) -> dict[str, float]:
    """Requests in flight (running + waiting) per pod name, for pods that report."""
    names = engine_info(engine).metrics
    sel = selector(namespace, llmservice)
    running, waiting = await gather_all(
        client.query(per_pod_query([names.running], sel), at),
        client.query(per_pod_query([names.waiting], sel), at),
    )
    load: dict[str, float] = {}
    for sample in (*running.samples, *waiting.samples):
        pod = sample.labels.get("pod")
        if pod and math.isfinite(sample.value):
            load[pod] = load.get(pod, 0.0) + sample.value
    return load
