"""tokenfleet: a Kubernetes operator that sizes, runs and autoscales LLM inference fleets."""

__version__ = "0.1.0"
