"""SLO autoscaling: Prometheus signals -> pure policy -> replicas.

- `types`: the records shared by every part (Signals, FleetState, History, Decision).
- `policy`: PURE `decide(spec, current, signals, history, now) -> Decision`.
- `signals`: the PromQL per engine, scoped to one LLMService by its PodMonitor's labels.
- `prometheus`: async httpx client for the Prometheus HTTP API (the only I/O here).
- `fleetsim`: the offline, deterministic replay behind `tokenfleet autoscale-sim`.
"""
