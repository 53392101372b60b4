"""The offline, deterministic fleet replay behind `tokenfleet autoscale-sim`.

- `traces`, `tracefiles`: synthetic and recorded request traces.
- `replica`, `prefix`, `fleet`: one engine replica, its prefix cache, and the routed fleet.
- `policies`: the autoscalers compared (the operator's own policy and the baselines).
- `metrics`: what Prometheus would have scraped from the simulated fleet.
- `run`, `frontier`, `report`: one replay, the cost/attainment frontier, and its report.
"""
