"""Prometheus metrics that look exactly like the emulated engine's.

Names, types, label names and histogram buckets are copied from the engines' own source
(vLLM 0.32 `vllm/v1/metrics/loggers.py` + `buckets.py`; SGLang 0.5
`sglang/srt/observability/metrics_collector.py`), and the system test test_sim_vs_real_vllm.py
diffs the vLLM set against a real vLLM engine's /metrics. Values are in simulated seconds.
Each simulator gets a private CollectorRegistry, so several can live in one process.

Families a real engine has but the simulator leaves out are listed in NOT_EMULATED with why.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from tokenfleet.capacity.engine_profiles import parse_version
from tokenfleet.capacity.errors import PlanError
from tokenfleet.capacity.speculative import expected_tokens
from tokenfleet.engines import sglang, vllm
from tokenfleet.scheduling.core import ScheduledStep, Scheduler, SimRequest, StepOutcome

# The engines' own series names and histogram bounds, owned by tokenfleet.engines (one copy
# per engine), so the exporter and the autoscaler's queries cannot drift apart.
_V = vllm.METRICS
_S = sglang.METRICS

NOT_EMULATED: dict[str, str] = {
    "vllm:cache_config_info": "its labels are every CacheConfig field of the real engine",
    "vllm:kv_block_*": "only with --kv-cache-metrics",
    "sglang:* other than listed": "disaggregation, grammar, HiCache series",
}


class SpecDecodeCounts:
    """Speculative rounds behind the tokens a simulated engine emits. The step timer runs
    each decode token as 1 / tau of a round (capacity/speculative.py), so after n decode
    tokens n / tau rounds ran: that many drafts of K tokens, tau - 1 accepted per draft on
    average, position i accepted with probability rate^(i+1). Exported as whole counts, as
    the engines export them (vllm/v1/spec_decode/metrics.py SpecDecodingStats)."""

    def __init__(self, k: int, rate: float) -> None:
        self.k, self.rate = k, rate
        self.tau = expected_tokens(rate, k)
        self.rounds = 0.0

    def decode_tokens(self, n: int) -> None:
        self.rounds += n / self.tau

    @property
    def drafts(self) -> int:
        return int(self.rounds)

    @property
    def accepted(self) -> int:
        """The per-position counts' sum, as vLLM's (about rounds x (tau - 1))."""
        return sum(self.accepted_at(i) for i in range(self.k))

    def accepted_at(self, position: int) -> int:
        return int(self.rounds * self.rate ** (position + 1))


class _Deltas:
    """A counter family fed from running totals (prometheus counters only go up by inc)."""

    def __init__(self) -> None:
        self._last: dict[int, int] = {}

    def inc(self, counter: Counter, total: int) -> None:
        key = id(counter)
        counter.inc(max(total - self._last.get(key, 0), 0))
        self._last[key] = max(total, self._last.get(key, 0))


class EngineMetrics(Protocol):
    registry: CollectorRegistry

    def on_step(self, step: ScheduledStep, outcome: StepOutcome, scheduler: Scheduler) -> None:
        """Record one completed step (token timings, finished requests, gauges)."""

    def on_queue_change(self, scheduler: Scheduler) -> None:
        """Refresh the running / waiting / KV gauges after requests arrive or leave."""

    def on_abort(self, request: SimRequest) -> None:
        """A client went away before its request finished."""

    def exposition(self) -> bytes: ...


def _before(version: str | None, release: tuple[int, int, int]) -> bool:
    """Whether `version` predates `release`; None or unparsable: the newest we know."""
    try:
        return version is not None and parse_version(version) < release
    except PlanError:
        return False


class VllmMetrics:
    """vLLM 0.32's V1 families. For versions before 0.11 the two series the autoscaler reads
    by name follow the older releases: inter-token latency is
    `vllm:time_per_output_token_seconds` (no per-request TPOT histogram yet) and KV usage is
    also published as `vllm:gpu_cache_usage_perc`. Other families stay 0.32's."""

    def __init__(
        self,
        model_name: str,
        max_model_len: int,
        version: str | None = None,
        speculative: tuple[int, float] | None = None,
    ) -> None:
        old = _before(version, (0, 11, 0))
        self.registry = CollectorRegistry()
        r = self.registry
        names = ["model_name", "engine"]
        values = [model_name, "0"]

        def gauge(name: str, doc: str, extra: Iterable[str] = ()) -> Gauge:
            return Gauge(name, doc, [*names, *extra], registry=r)

        def counter(name: str, doc: str, extra: Iterable[str] = ()) -> Counter:
            return Counter(name, doc, [*names, *extra], registry=r)

        def histogram(name: str, doc: str, buckets: Iterable[float]) -> Histogram:
            return Histogram(name, doc, names, buckets=list(buckets), registry=r).labels(*values)

        self.running = gauge(_V.running, "Number of requests in model execution batches.").labels(
            *values
        )
        self.waiting = gauge(_V.waiting, "Number of requests waiting to be processed.").labels(
            *values
        )
        by_reason = gauge(
            "vllm:num_requests_waiting_by_reason",
            "Number of waiting requests by reason.",
            ["reason"],
        )
        self.waiting_capacity = by_reason.labels(*values, "capacity")
        by_reason.labels(*values, "deferred").set(0)
        sleep = gauge("vllm:engine_sleep_state", "Engine sleep state.", ["sleep_state"])
        for state, value in (("awake", 1), ("weights_offloaded", 0), ("discard_all", 0)):
            sleep.labels(*values, state).set(value)
        self.kv_usage = gauge(_V.kv_usage[0], "KV-cache usage. 1 means 100 percent usage.").labels(
            *values
        )
        self.gpu_cache_usage = (
            gauge(_V.kv_usage[1], "GPU KV-cache usage. 1 means 100 percent usage.").labels(*values)
            if old
            else None
        )

        self.prefix_queries = counter(
            "vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of tokens."
        ).labels(*values)
        counter("vllm:prefix_cache_hits", "Prefix cache hits.").labels(*values)
        counter("vllm:external_prefix_cache_queries", "External prefix cache queries.").labels(
            *values
        )
        counter("vllm:external_prefix_cache_hits", "External prefix cache hits.").labels(*values)
        counter("vllm:mm_cache_queries", "Multi-modal cache queries.").labels(*values)
        counter("vllm:mm_cache_hits", "Multi-modal cache hits.").labels(*values)
        self.preemptions = counter(
            "vllm:num_preemptions", "Cumulative number of preemption from the engine."
        ).labels(*values)
        self.prompt_tokens = counter(
            "vllm:prompt_tokens", "Number of prefill tokens processed."
        ).labels(*values)
        by_source = counter(
            "vllm:prompt_tokens_by_source", "Number of prompt tokens by source.", ["source"]
        )
        self.prompt_computed = by_source.labels(*values, "local_compute")
        for source in ("local_cache_hit", "external_kv_transfer"):
            by_source.labels(*values, source)
        counter("vllm:prompt_tokens_cached", "Number of cached prompt tokens.").labels(*values)
        cached_by_source = counter(
            "vllm:prompt_tokens_cached_by_source", "Prefix-cache hit tokens by tier.", ["source"]
        )
        for source in ("device", "host", "p2p", "disk", "external_unspecified"):
            cached_by_source.labels(*values, source)
        self.generation_tokens = counter(
            "vllm:generation_tokens", "Number of generation tokens processed."
        ).labels(*values)
        success = counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            ["finished_reason"],
        )
        self.success = {
            reason: success.labels(*values, reason)
            for reason in ("stop", "length", "abort", "error", "repetition")
        }
        rejections = Counter(
            "vllm:admission_rejections",
            "Number of admission attempts rejected by a queue limit, by reason.",
            ["model_name", "reason"],
            registry=r,
        )
        for reason in ("max_num_queued_reqs", "max_num_queued_tokens"):
            rejections.labels(model_name, reason)

        tokens = vllm.request_token_buckets(max_model_len)
        self.prompt_tokens_request = histogram(
            _V.prompt_length, "Number of prefill tokens processed.", tokens
        )
        self.generation_tokens_request = histogram(
            _V.output_length, "Number of generation tokens processed.", tokens
        )
        self.iteration_tokens = histogram(
            "vllm:iteration_tokens_total",
            "Histogram of number of tokens per engine_step.",
            vllm.ITERATION_TOKENS_BUCKETS,
        )
        histogram(
            "vllm:request_max_num_generation_tokens",
            "Histogram of maximum number of requested generation tokens.",
            tokens,
        )
        histogram(
            "vllm:request_params_n", "Histogram of the n request parameter.", vllm.PARAMS_N_BUCKETS
        )
        self.max_tokens_param = histogram(
            "vllm:request_params_max_tokens",
            "Histogram of the max_tokens request parameter.",
            tokens,
        )
        self.ttft = histogram(
            _V.ttft,
            "Histogram of time to first token in seconds.",
            vllm.TTFT_BUCKETS,
        )
        self.itl = histogram(
            _V.itl[1] if old else _V.itl[0],
            "Histogram of inter-token latency in seconds.",
            vllm.ITL_BUCKETS,
        )
        self.tpot = (
            None
            if old
            else histogram(
                _V.request_tpot or "",
                "Histogram of time_per_output_token_seconds per request.",
                vllm.ITL_BUCKETS,
            )
        )
        latency = vllm.REQUEST_LATENCY_BUCKETS
        self.e2e = histogram(
            _V.e2e,
            "Histogram of e2e request latency in seconds.",
            latency,
        )
        self.queue = histogram(
            _V.queue_time,
            "Histogram of time spent in WAITING phase for request.",
            latency,
        )
        self.inference = histogram(
            "vllm:request_inference_time_seconds",
            "Histogram of time spent in RUNNING phase for request.",
            latency,
        )
        self.prefill = histogram(
            "vllm:request_prefill_time_seconds",
            "Histogram of time spent in PREFILL phase for request.",
            latency,
        )
        self.decode = histogram(
            "vllm:request_decode_time_seconds",
            "Histogram of time spent in DECODE phase for request.",
            latency,
        )
        self.num_preemptions = histogram(
            "vllm:request_num_preemptions",
            "Histogram of the number of times a request was preempted.",
            vllm.PREEMPTIONS_BUCKETS,
        )
        self.prefill_kv_computed = histogram(
            "vllm:request_prefill_kv_computed_tokens",
            "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
            tokens,
        )
        # vllm/v1/spec_decode/metrics.py SpecDecodingProm: only with a speculative config.
        self.spec: SpecDecodeCounts | None = None
        self._deltas = _Deltas()
        if speculative is not None:
            k, rate = speculative
            self.spec = SpecDecodeCounts(k, rate)
            self.spec_drafts = counter(
                "vllm:spec_decode_num_drafts", "Number of spec decoding drafts."
            ).labels(*values)
            self.spec_draft_tokens = counter(
                "vllm:spec_decode_num_draft_tokens", "Number of draft tokens."
            ).labels(*values)
            self.spec_accepted = counter(
                "vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens."
            ).labels(*values)
            per_pos = counter(
                "vllm:spec_decode_num_accepted_tokens_per_pos",
                "Accepted tokens per draft position.",
                ["position"],
            )
            self.spec_per_pos = [per_pos.labels(*values, str(i)) for i in range(k)]

    def on_queue_change(self, scheduler: Scheduler) -> None:
        self.running.set(len(scheduler.running))
        self.waiting.set(len(scheduler.waiting))
        self.waiting_capacity.set(len(scheduler.waiting))
        self.kv_usage.set(scheduler.kv_usage)
        if self.gpu_cache_usage is not None:
            self.gpu_cache_usage.set(scheduler.kv_usage)

    def on_step(self, step: ScheduledStep, outcome: StepOutcome, scheduler: Scheduler) -> None:
        self.iteration_tokens.observe(step.num_tokens)
        self.preemptions.inc(len(step.preempted))
        self.generation_tokens.inc(len(outcome.sampled))
        for request in outcome.sampled:
            times = request.token_times
            if len(times) == 1:
                # vLLM counts a prompt when its prefill completes, and the prefix cache is
                # queried once per prompt token at admission.
                self.ttft.observe(times[0] - request.arrival)
                self.prompt_tokens.inc(request.prompt_tokens)
                self.prompt_computed.inc(request.prompt_tokens)
                self.prefix_queries.inc(request.prompt_tokens)
            else:
                self.itl.observe(times[-1] - times[-2])
        if self.spec is not None:
            self._spec_step(sum(1 for r in outcome.sampled if len(r.token_times) > 1))
        for request in outcome.finished:
            self._finished(request, "length")
        self.on_queue_change(scheduler)

    def _spec_step(self, decode_tokens: int) -> None:
        spec = self.spec
        assert spec is not None
        spec.decode_tokens(decode_tokens)
        d = self._deltas
        d.inc(self.spec_drafts, spec.drafts)
        d.inc(self.spec_draft_tokens, spec.drafts * spec.k)
        d.inc(self.spec_accepted, spec.accepted)
        for i, counter in enumerate(self.spec_per_pos):
            d.inc(counter, spec.accepted_at(i))

    def _finished(self, request: SimRequest, reason: str) -> None:
        assert request.finished_at is not None
        self.success[reason].inc()
        scheduled = request.scheduled_at if request.scheduled_at is not None else request.arrival
        first = request.first_token_at if request.first_token_at is not None else scheduled
        last = request.last_token_at if request.last_token_at is not None else scheduled
        decode = last - first
        self.e2e.observe(request.finished_at - request.arrival)
        self.queue.observe(scheduled - request.arrival)
        self.prefill.observe(first - scheduled)
        self.inference.observe(last - scheduled)
        self.decode.observe(decode)
        self.num_preemptions.observe(request.num_preemptions)
        self.prefill_kv_computed.observe(request.prompt_tokens)
        self.prompt_tokens_request.observe(request.prompt_tokens)
        self.generation_tokens_request.observe(request.output_tokens)
        if self.tpot is not None:
            tpot = decode / (request.output_tokens - 1) if request.output_tokens > 1 else 0
            self.tpot.observe(tpot)
        self.max_tokens_param.observe(request.max_tokens)

    def on_abort(self, request: SimRequest) -> None:
        self.success["abort"].inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


class SglangMetrics:
    """SGLang's tokenizer-manager and scheduler series (as with --enable-metrics)."""

    def __init__(
        self, model_name: str, max_model_len: int, speculative: tuple[int, float] | None = None
    ) -> None:
        del max_model_len  # SGLang's buckets do not depend on it
        self.registry = CollectorRegistry()
        r = self.registry
        tok = {"model_name": model_name, "engine_type": "unified"}
        sched = {**tok, "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0"}
        self._tok = tok

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(name, doc, list(sched), registry=r).labels(**sched)

        def sched_counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, list(sched), registry=r).labels(**sched)

        self.running = gauge(_S.running, "The number of running requests.")
        self.queued = gauge(_S.waiting, "The number of requests in the waiting queue.")
        self.gen_throughput = gauge("sglang:gen_throughput", "The generation throughput (token/s).")
        gauge(_S.prefix_cache_hit_rate, "The prefix cache hit rate.")
        self.token_usage = gauge(_S.kv_usage[0], "The token usage.")
        self.used_tokens = gauge("sglang:num_used_tokens", "The number of used tokens.")
        self.retracted = gauge("sglang:num_retracted_reqs", "The number of retracted requests.")
        self.retracted_total = sched_counter(
            "sglang:num_retracted_requests_total", "Total number of retracted requests."
        )
        self.queue_time = Histogram(
            _S.queue_time,
            "Histogram of queueing time in seconds.",
            list(sched),
            buckets=list(sglang.QUEUE_BUCKETS),
            registry=r,
        ).labels(**sched)

        streaming = [*tok, "is_streaming"]
        self.prompt_tokens = Counter(
            "sglang:prompt_tokens_total", "Number of prefill tokens processed.", streaming,
            registry=r,
        )  # fmt: skip
        self.generation_tokens = Counter(
            "sglang:generation_tokens_total", "Number of generation tokens processed.", streaming,
            registry=r,
        )  # fmt: skip
        self.requests = Counter(
            "sglang:num_requests_total", "Number of requests processed.", streaming, registry=r
        )
        self.aborted = Counter(
            "sglang:num_aborted_requests_total", "Number of requests aborted.", list(tok),
            registry=r,
        ).labels(**tok)  # fmt: skip
        self.prompt_hist = Histogram(
            _S.prompt_length, "Histogram of prompt token length.", list(tok),
            buckets=list(sglang.TOKENS_BUCKETS), registry=r,
        ).labels(**tok)  # fmt: skip
        self.generation_hist = Histogram(
            _S.output_length, "Histogram of generation token length.",
            list(tok), buckets=list(sglang.TOKENS_BUCKETS), registry=r,
        ).labels(**tok)  # fmt: skip
        self.ttft = Histogram(
            _S.ttft, "Histogram of time to first token in seconds.",
            streaming, buckets=list(sglang.TTFT_BUCKETS), registry=r,
        )  # fmt: skip
        self.itl = Histogram(
            _S.itl[0], "Histogram of inter-token latency in seconds.",
            list(tok), buckets=list(sglang.ITL_BUCKETS), registry=r,
        ).labels(**tok)  # fmt: skip
        self.tpot = Histogram(
            _S.request_tpot or "", "Per-request TPOT in seconds.",
            streaming, buckets=list(sglang.ITL_BUCKETS), registry=r,
        )  # fmt: skip
        self.e2e = Histogram(
            _S.e2e,
            "Histogram of End-to-end request latency in seconds",
            streaming, buckets=list(sglang.E2E_BUCKETS), registry=r,
        )  # fmt: skip
        self._window_tokens = 0
        self._window_seconds = 0.0
        # srt/observability/metrics_collector.py (0.5.23): accept length (tau), accept rate
        # (accepted / proposed drafts), the active steps and draft tokens; 0 without
        # speculation, as SGLang sets them.
        self.spec: SpecDecodeCounts | None = None
        self._deltas = _Deltas()
        accept_length = gauge(
            "sglang:spec_accept_length",
            "Mean acceptance length of speculative decoding "
            "(accepted drafts + bonus token per forward).",
        )
        accept_rate = gauge(
            "sglang:spec_accept_rate",
            "Speculative acceptance rate (`accepted drafts / proposed drafts` in batch).",
        )
        num_steps = gauge("sglang:spec_num_steps", "Currently active speculative_num_steps.")
        draft_tokens = gauge(
            "sglang:spec_num_draft_tokens",
            "Currently active speculative_num_draft_tokens (decouples from steps under topk>1).",
        )
        # The tokenizer's collector counts the verify calls, so only its labels.
        self.verify_calls = Counter(
            "sglang:spec_verify_calls_total", "Number of speculative decoding verification calls.",
            list(tok), registry=r,
        ).labels(**tok)  # fmt: skip
        if speculative is not None:
            k, rate = speculative
            self.spec = SpecDecodeCounts(k, rate)
            accept_length.set(self.spec.tau)
            accept_rate.set((self.spec.tau - 1) / k)
            num_steps.set(k)
            draft_tokens.set(k + 1)

    def on_queue_change(self, scheduler: Scheduler) -> None:
        self.running.set(len(scheduler.running))
        self.queued.set(len(scheduler.waiting))
        self.token_usage.set(scheduler.kv_usage)
        self.used_tokens.set(scheduler.used_tokens)

    def on_step(self, step: ScheduledStep, outcome: StepOutcome, scheduler: Scheduler) -> None:
        if step.preempted:
            self.retracted.set(len(step.preempted))
            self.retracted_total.inc(len(step.preempted))
        # SGLang logs decode throughput over a window of steps; a 1 s window here.
        self._window_tokens += len(outcome.sampled)
        self._window_seconds += step.duration
        if self._window_seconds >= 1.0:
            self.gen_throughput.set(self._window_tokens / self._window_seconds)
            self._window_tokens, self._window_seconds = 0, 0.0
        for request in outcome.sampled:
            times = request.token_times
            if len(times) == 1:
                self.ttft.labels(**self._tok, is_streaming=_flag(request)).observe(
                    times[0] - request.arrival
                )
                scheduled = request.scheduled_at or request.arrival
                self.queue_time.observe(scheduled - request.arrival)
            else:
                self.itl.observe(times[-1] - times[-2])
        if self.spec is not None:
            self.spec.decode_tokens(sum(1 for r in outcome.sampled if len(r.token_times) > 1))
            self._deltas.inc(self.verify_calls, self.spec.drafts)
        for request in outcome.finished:
            self._finished(request)
        self.on_queue_change(scheduler)

    def _finished(self, request: SimRequest) -> None:
        assert request.finished_at is not None
        labels = {**self._tok, "is_streaming": _flag(request)}
        self.prompt_tokens.labels(**labels).inc(request.prompt_tokens)
        self.generation_tokens.labels(**labels).inc(request.output_tokens)
        self.requests.labels(**labels).inc()
        self.e2e.labels(**labels).observe(request.finished_at - request.arrival)
        if request.output_tokens > 1 and request.first_token_at is not None:
            decode = request.finished_at - request.first_token_at
            self.tpot.labels(**labels).observe(decode / (request.output_tokens - 1))
        self.prompt_hist.observe(request.prompt_tokens)
        self.generation_hist.observe(request.output_tokens)

    def on_abort(self, request: SimRequest) -> None:
        self.aborted.inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def _flag(request: SimRequest) -> str:
    return "true" if request.stream else "false"


def metrics_for(
    engine: str,
    model_name: str,
    max_model_len: int,
    version: str | None = None,
    speculative: tuple[int, float] | None = None,
) -> EngineMetrics:
    """`speculative`: (K, acceptance rate) of the proposer the step timer runs, if any."""
    if engine in _SGLANG_METRICS_KINDS:
        return SglangMetrics(model_name, max_model_len, speculative)
    return VllmMetrics(model_name, max_model_len, version, speculative)


# The engine kinds that export SGLang's series; any other exports vLLM's.
_SGLANG_METRICS_KINDS = frozenset({sglang.INFO.name})
