"""autoscale/gpu_fallback.py: where a spec.gpu.type auto fleet's replicas go when the
chosen type cannot be had, step by step, with the times that decide."""

from __future__ import annotations

from typing import Any

from tokenfleet.autoscale.gpu_fallback import (
    Candidate,
    Settings,
    TypeObserved,
    TypeState,
    decide,
    lacks_gpu,
    observe,
)

S = Settings(unschedulable_seconds=300, dwell_seconds=600)
TWO = (Candidate("h100-sxm"), Candidate("l40s"))
NO_ROOM = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
UNBOUND = "pod has unbound immediate PersistentVolumeClaims"
# h100-sxm has been short since t=1000 s, with 2 of its replicas scheduled.
H100_SHORT = (TypeState("h100-sxm", 1000.0, 2, NO_ROOM),)


def test_all_on_the_preferred_type_while_it_schedules() -> None:
    p = decide(TWO, 3, {"h100-sxm": TypeObserved(3, 3, 3)}, [], 1000.0, S)
    assert p.split == {"h100-sxm": 3, "l40s": 0}
    assert (p.growth, p.fallback, p.events, p.next_check_seconds) == ("h100-sxm", None, (), None)


def test_pending_under_the_deadline_moves_nothing_and_says_when_to_look_again() -> None:
    seen = {"h100-sxm": TypeObserved(3, 2, 2, 900.0, NO_ROOM)}
    p = decide(TWO, 3, seen, [], 1000.0, S)
    assert p.split == {"h100-sxm": 3, "l40s": 0} and p.fallback is None and not p.events
    assert p.next_check_seconds == 200.0


def test_past_the_deadline_new_replicas_go_to_the_runner_up() -> None:
    seen = {"h100-sxm": TypeObserved(3, 2, 2, 700.0, NO_ROOM)}
    p = decide(TWO, 3, seen, [], 1000.0, S)
    # The two scheduled replicas keep serving; the pending third moves.
    assert p.split == {"h100-sxm": 2, "l40s": 1}
    assert (p.growth, p.fallback) == ("l40s", "Unschedulable")
    (event,) = p.events
    assert event.warning and event.reason == "GpuUnavailable" and NO_ROOM in event.message
    assert p.states[0] == TypeState("h100-sxm", 1000.0, 2, NO_ROOM)
    assert "new replicas go to l40s (2 on h100-sxm, 1 on l40s)" in p.message
    assert p.next_check_seconds == 600.0  # the dwell


def test_more_replicas_while_short_all_go_to_the_runner_up() -> None:
    seen = {"h100-sxm": TypeObserved(2, 2, 2), "l40s": TypeObserved(1, 1, 1)}
    p = decide(TWO, 6, seen, H100_SHORT, 1100.0, S)
    assert p.split == {"h100-sxm": 2, "l40s": 4} and not p.events


def test_pending_that_clears_and_reappears_within_the_dwell_does_not_flap() -> None:
    # A third h100 replica scheduled meanwhile (capacity came back) but the dwell runs.
    cleared = {"h100-sxm": TypeObserved(2, 3, 3), "l40s": TypeObserved(1, 1, 1)}
    p1 = decide(TWO, 3, cleared, H100_SHORT, 1200.0, S)
    assert p1.split["h100-sxm"] == 2 and p1.states[0].short_since == 1000.0 and not p1.events
    # ... and a new pending pod right after: still no move either way.
    again = {"h100-sxm": TypeObserved(2, 2, 2, 1250.0, NO_ROOM), "l40s": TypeObserved(1, 1, 1)}
    p2 = decide(TWO, 3, again, p1.states, 1300.0, S)
    assert p2.split == {"h100-sxm": 2, "l40s": 1} and not p2.events
    assert p2.states == p1.states


def test_after_the_dwell_one_probe_replica_tries_the_preferred_type() -> None:
    seen = {"h100-sxm": TypeObserved(2, 2, 2), "l40s": TypeObserved(1, 1, 1)}
    p = decide(TWO, 3, seen, H100_SHORT, 1600.0, S)
    # The probe is placed; the l40s replica keeps serving until it is ready (a surge).
    assert p.split == {"h100-sxm": 3, "l40s": 1} and not p.events


def test_a_probe_that_schedules_returns_the_fleet_to_the_preferred_type() -> None:
    seen = {"h100-sxm": TypeObserved(3, 3, 2), "l40s": TypeObserved(1, 1, 1)}
    p = decide(TWO, 3, seen, H100_SHORT, 1650.0, S)
    (event,) = p.events
    assert not event.warning and event.reason == "GpuAvailable"
    assert p.states[0] == TypeState("h100-sxm") and p.fallback is None
    assert p.split == {"h100-sxm": 3, "l40s": 1}  # the l40s replica stays until h100's is ready
    ready = {"h100-sxm": TypeObserved(3, 3, 3), "l40s": TypeObserved(1, 1, 1)}
    assert decide(TWO, 3, ready, p.states, 1700.0, S).split == {"h100-sxm": 3, "l40s": 0}


def test_a_probe_that_stays_pending_restarts_the_dwell_quietly() -> None:
    seen = {"h100-sxm": TypeObserved(3, 2, 2, 1600.0, NO_ROOM), "l40s": TypeObserved(1, 1, 1)}
    p = decide(TWO, 3, seen, H100_SHORT, 1900.0, S)
    assert p.states[0].short_since == 1900.0 and p.states[0].held == 2 and not p.events
    assert p.split == {"h100-sxm": 2, "l40s": 1}


def test_a_max_count_spills_the_rest_to_the_next_type() -> None:
    capped = (Candidate("h100-sxm", max_replicas=2), Candidate("l40s"))
    p = decide(capped, 5, {}, [], 10.0, S, previous_growth="h100-sxm")
    assert p.split == {"h100-sxm": 2, "l40s": 3} and p.fallback == "MaxCount"
    assert [e.reason for e in p.events] == ["GpuMaxCount"]
    assert not decide(capped, 5, {}, [], 20.0, S, previous_growth="l40s").events


def test_with_no_room_anywhere_the_rest_waits_on_the_first_type_a_max_count_allows() -> None:
    three = (Candidate("h100-sxm", max_replicas=1), Candidate("a100-80gb"), Candidate("l40s"))
    short = [TypeState("a100-80gb", 0.0, 1, NO_ROOM), TypeState("l40s", 0.0, 0, NO_ROOM)]
    p = decide(three, 4, {}, short, 100.0, S)
    assert p.split == {"h100-sxm": 1, "a100-80gb": 3, "l40s": 0} and p.growth is None
    assert "no candidate has room" in p.message


def test_scale_down_releases_the_fallback_type_first() -> None:
    seen = {"h100-sxm": TypeObserved(2, 2, 2), "l40s": TypeObserved(3, 3, 3)}
    assert decide(TWO, 3, seen, H100_SHORT, 1100.0, S).split == {"h100-sxm": 2, "l40s": 1}


def _pod(gpu: str, role: str, node: str | None, **status: Any) -> dict[str, Any]:
    labels = {"tokenfleet.dev/gpu-type": gpu, "tokenfleet.dev/role": role}
    return {"metadata": {"labels": labels}, "spec": {"nodeName": node} if node else {},
            "status": status}  # fmt: skip


def test_observe_counts_replicas_per_type_and_the_oldest_gpu_shortage() -> None:
    def pending(at: str, message: str) -> dict[str, Any]:
        cond = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                "lastTransitionTime": at, "message": message}  # fmt: skip
        return {"conditions": [cond]}

    ready = {"conditions": [{"type": "Ready", "status": "True"}]}
    pods = [
        _pod("h100-sxm", "server", "n1", **ready),
        _pod("h100-sxm", "server", None, **pending("50", NO_ROOM)),
        _pod("h100-sxm", "server", None, **pending("40", NO_ROOM)),
        _pod("l40s", "server", None, **pending("10", UNBOUND)),
        _pod("l40s", "worker", "n2", **ready),  # a worker is no replica of its own
    ]  # fmt: skip
    gone = _deleted(_pod("h100-sxm", "server", None, **pending("1", NO_ROOM)))
    seen = observe([*pods, gone], "tokenfleet.dev/gpu-type", float)
    assert seen["h100-sxm"] == TypeObserved(0, 1, 1, 40.0, NO_ROOM, pending=2)
    # An unbound claim is no missing GPU: pending, but no deadline runs.
    assert seen["l40s"] == TypeObserved(0, 0, 0, None, "", pending=1)


def test_a_pod_not_yet_marked_unschedulable_is_looked_at_again_soon() -> None:
    p = decide(TWO, 1, {"h100-sxm": TypeObserved(1, 0, 0, pending=1)}, [], 0.0, S)
    assert p.next_check_seconds == S.poll_seconds and p.fallback is None


def _deleted(pod: dict[str, Any]) -> dict[str, Any]:
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return pod


def test_lack_of_gpu_is_told_from_other_scheduling_failures() -> None:
    assert lacks_gpu("0/3 nodes are available: 3 Insufficient nvidia.com/mig-3g.40gb.")
    assert lacks_gpu(
        "0/5 nodes are available: 5 node(s) didn't match Pod's node affinity/selector."
    )
    assert not lacks_gpu("0/5 nodes are available: 5 node(s) had untolerated taint {a: b}.")
