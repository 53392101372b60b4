"""Fixtures: a kmock-based apiserver on a loopback port, and the real operator in-process.

The operator logs in exactly as in production (kopf's login -> our Credentials -> the
official client reading $KUBECONFIG), pointed at the emulator by a kubeconfig file.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kmock import Server

from tests.support.operator_harness import NAMESPACE, RunningOperator, StartOperator, kubeconfig_for
from tokenfleet.controller.autoscaler import AutoscalerOptions, Autoscalers
from tokenfleet.controller.handlers import Credentials, Drift, Options, build_registry
from tokenfleet.controller.kube import KubeClient
from tokenfleet.controller.metrics import Metrics
from tokenfleet.controller.reconcile import Pipeline, Policy, Reconciler
from tokenfleet.testing.kmock_cluster import Cluster


@pytest.fixture
async def cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Cluster]:
    async with Cluster() as api, Server(api) as server:
        kubeconfig = tmp_path / "kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(kubeconfig_for(str(server.url).rstrip("/"))))
        monkeypatch.setenv("KUBECONFIG", str(kubeconfig))
        # The official client reads $KUBECONFIG once, at import; tests set it later.
        import kubernetes.config.kube_config

        monkeypatch.setattr(
            kubernetes.config.kube_config, "KUBE_CONFIG_DEFAULT_LOCATION", str(kubeconfig)
        )
        api.objects["v1/namespaces", None, NAMESPACE] = {"metadata": {"name": NAMESPACE}}
        yield api


@pytest.fixture
async def start_operator(cluster: Cluster) -> AsyncIterator[StartOperator]:
    """Start the real operator (kopf.operator with our registry); stopped at teardown."""
    running: list[RunningOperator] = []

    async def start(
        pipeline: Pipeline | None = None,
        *,
        peering: str | None = None,
        priority: int = 0,
        step_seconds: float | None = None,
        policy: Policy | None = None,
        autoscaler: dict[str, Any] | None = None,
        liveness: str | None = None,
        namespaces: list[str] | None = None,
        **options: Any,
    ) -> RunningOperator:
        """`autoscaler`: keyword arguments of Autoscalers (source=, decide=, clock=) and
        `url=`: the injected signals source and policy of the wiring tests. `liveness`:
        kopf's /healthz URL (off by default). `namespaces`: watch only these (as
        `tokenfleet operator --namespace`), else every namespace."""
        credentials = Credentials()
        reconciler = Reconciler(
            KubeClient(credentials.current, discovery_ttl=0.5),
            Metrics(),
            pipeline or Pipeline.default(),
        )
        if policy is not None:
            reconciler.policy = policy
        if step_seconds is not None:
            reconciler.step_seconds = step_seconds
        scalers = None
        if autoscaler is not None:
            extra = dict(autoscaler)
            url = extra.pop("url", None)
            scalers = Autoscalers(
                reconciler.kube,
                reconciler.metrics,
                reconciler.plans,
                AutoscalerOptions(url),
                **extra,
            )
        opts = Options(namespaces=tuple(namespaces or ()), **options)
        drift = Drift(reconciler, opts.resync_seconds, opts.recheck_seconds)
        registry = build_registry(reconciler, credentials, opts, drift=drift, autoscalers=scalers)
        handle = RunningOperator(reconciler, registry, peering, priority, liveness, namespaces)
        handle.drift = drift
        handle.autoscalers = scalers  # type: ignore[attr-defined]
        running.append(handle)
        await handle.start()
        return handle

    logging.getLogger("kopf").setLevel(logging.INFO)
    yield start
    for handle in running:
        if handle.alive:
            await handle.stop()
