"""Scale from and to zero: PURE rules around `policy.decide` (spec.autoscaling.minReplicas 0).

Zero is allowed only when FleetState.min_replicas is 0: the API refuses minReplicas 0
without spec.routing, and the operator passes 1 while the Routing condition is not True (no
picker holds requests then). The endpoint picker's flow control is what makes zero safe: it
holds requests while the pool is empty (llm-d-router v0.10.0 pkg/epp/flowcontrol/
README.md: "the queue acts as a scale-from-zero waiting room"), and reports them as
llm_d_epp_flow_control_queue_size (Signals.picker_queued).

- From zero: at 0 replicas, any request queued at the picker orders one replica in the
  same tick, past every stabilization window (the cold start is already the wait);
  nothing queued stays at 0. A picker that reports nothing holds at 0 (NoData), as the
  policy holds on missing data.
- To zero: the policy itself never goes below 1 (min_replicas 1 for it). From 1 replica,
  zero follows after scaleToZeroAfterSeconds without traffic: no request finished, running,
  waiting or queued at the picker in any decision of that window. Never while a request is
  queued or in flight, nor on data the policy does not trust (a hold).
- Cold start: the time from a replica ordered with none ready to the first one ready, kept
  in History and shown in status; it is what a first request waits at the picker.
"""

from __future__ import annotations

from dataclasses import replace

from tokenfleet.api.spec import LLMServiceSpec
from tokenfleet.autoscale.types import Decision, FleetState, History, Signals


def allowed(current: FleetState) -> bool:
    return current.min_replicas == 0


def policy_view(current: FleetState) -> FleetState:
    """The fleet as the policy sees it: it never decides zero itself."""
    return replace(current, min_replicas=max(1, current.min_replicas))


def _busy(signals: Signals | None) -> bool:
    """A request seen anywhere: finished in the window, running, waiting, or at the picker."""
    if signals is None:
        return False
    values = (
        signals.request_rate,
        signals.running_per_replica,
        signals.waiting_per_replica,
        signals.picker_queued,
    )
    return any(v is not None and v > 0 for v in values)


def track(history: History, current: FleetState, signals: Signals | None, now: float) -> History:
    """The idle clock and the cold start, updated for this tick."""
    if _busy(signals) or history.last_traffic_at is None:
        history = replace(history, last_traffic_at=now)
    if current.desired > 0 and current.ready == 0 and history.cold_since is None:
        history = replace(history, cold_since=now)
    elif current.ready > 0 and history.cold_since is not None:
        history = replace(history, cold_since=None, cold_start_seconds=now - history.cold_since)
    elif current.desired == 0:
        history = replace(history, cold_since=None)
    return history


def _cold_note(history: History) -> str:
    if history.cold_start_seconds is None:
        return "no cold start observed yet"
    return f"the last cold start took {history.cold_start_seconds:.0f}s"


def from_zero(
    spec: LLMServiceSpec,
    current: FleetState,
    signals: Signals | None,
    history: History,
    now: float,
) -> Decision | None:
    """The decision at 0 replicas (None: not at zero, or zero not allowed)."""
    if current.desired > 0 or not allowed(current):
        return None
    queued = signals.picker_queued if signals is not None else None
    if queued is None:
        return Decision(
            previous=0,
            desired=0,
            reason="NoData: the endpoint picker reports no queue; holding 0",
            driver="hold",
            history=history,
            held="NoData" if signals is not None else "PrometheusDown",
        )
    if queued > 0:
        up = 1  # the policy sizes the fleet once the replica reports
        history = replace(history, last_scale_up_at=now, cold_since=now, last_traffic_at=now)
        return Decision(
            previous=0,
            desired=up,
            reason=(
                f"scale from zero: {queued:.0f} request(s) wait at the endpoint picker; "
                f"starting {up} replica ({_cold_note(history)})"
            ),
            driver="queue",
            history=history,
            details={"pickerQueued": queued},
        )
    idle = now - (history.last_traffic_at or now)
    return Decision(
        previous=0,
        desired=0,
        reason=(
            f"scaled to zero, idle {idle:.0f}s; a first request waits at the endpoint "
            f"picker for a cold start ({_cold_note(history)})"
        ),
        driver="zero",
        history=history,
        details={"pickerQueued": 0.0},
    )


def to_zero(
    spec: LLMServiceSpec,
    current: FleetState,
    signals: Signals | None,
    decision: Decision,
    now: float,
) -> Decision:
    """`decision` (the policy's, at 1 replica or more), or 0 once idle long enough."""
    history = decision.history
    if not allowed(current) or decision.held is not None or signals is None:
        return decision
    if not (current.desired == 1 and decision.desired == 1) or _busy(signals):
        return decision
    if signals.picker_queued is None:  # the picker's queue unseen: never drop the last one
        return decision
    after = spec.autoscaling.scale_to_zero_after_seconds
    idle = now - (history.last_traffic_at if history.last_traffic_at is not None else now)
    if idle < after:
        return decision
    return replace(
        decision,
        desired=0,
        driver="zero",
        reason=(
            f"scale to zero: no request for {idle:.0f}s (scaleToZeroAfterSeconds {after}); "
            f"the endpoint picker holds the next one while a replica starts "
            f"({_cold_note(history)})"
        ),
        history=replace(history, last_scale_down_at=now),
        limited=None,
    )
