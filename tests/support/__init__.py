"""Helpers the test tiers share, imported as `tests.support.<module>` (pytest puts the
checkout on sys.path: pyproject.toml's pythonpath): the operator harness and a Prometheus
for integration and system tests, the simulators, the chart renderer, the CRD checker,
the policy's fixtures, synthetic traces and step timers."""
