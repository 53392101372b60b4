"""`tokenfleet operator`: run the kopf operator that reconciles LLMServices into workloads."""

from __future__ import annotations

import argparse
import functools
import random
import sys
from typing import Any


def add_arguments(p: argparse.ArgumentParser, name: str) -> None:
    scope = p.add_mutually_exclusive_group()
    scope.add_argument(
        "--namespace",
        "-n",
        action="append",
        default=[],
        metavar="NS",
        help="watch this namespace (repeatable; globs like 'team-*' work)",
    )
    scope.add_argument(
        "--all-namespaces", "-A", action="store_true", help="watch every namespace (default)"
    )
    p.add_argument(
        "--liveness",
        default="http://0.0.0.0:8080/healthz",
        metavar="URL",
        help="liveness probe endpoint served by kopf (default: %(default)s); '' disables",
    )
    p.add_argument(
        "--metrics-port",
        type=int,
        default=9090,
        help="port of the operator's Prometheus metrics (default: %(default)s; 0 disables)",
    )
    p.add_argument(
        "--peering",
        default="tokenfleet",
        metavar="NAME",
        help="kopf peering object for leader election; needs kopf's peering CRDs "
        "(clusterkopfpeerings / kopfpeerings.kopf.dev) installed (default: %(default)s)",
    )
    p.add_argument(
        "--priority",
        type=int,
        default=None,
        help="peering priority: the highest-priority replica is active, the others stand by "
        "(default: random, since equal priorities make kopf pause every replica)",
    )
    p.add_argument(
        "--standalone",
        action="store_true",
        help="no leader election: only for a single replica or local development",
    )
    p.add_argument(
        "--resync-seconds",
        type=float,
        default=600.0,
        help="re-reconcile every LLMService this often even without events (default: 600)",
    )
    p.add_argument(
        "--prometheus-url",
        default=None,
        metavar="URL",
        help="Prometheus the autoscaler reads engine metrics from when an LLMService sets no "
        "spec.autoscaling.prometheus.url, e.g. http://prometheus-operated.monitoring:9090 "
        "(default: none; the Autoscaling condition then says what to set)",
    )
    p.add_argument(
        "--metrics-window-seconds",
        type=float,
        default=60.0,
        help="rate() window of the autoscaler's queries: 4 scrapes of the PodMonitor's 15 s "
        "interval (default: %(default)s)",
    )
    p.add_argument(
        "--time-scale",
        type=float,
        default=1.0,
        help="only for simulated fleets (tokenfleet sim --time-scale K, tokenfleet demo): the "
        "autoscaler runs on simulated seconds, K per wall second (default: 1, real time)",
    )
    p.add_argument("--verbose", "-v", action="store_true", help="debug logging")
    p.add_argument(
        "--log-level",
        choices=["debug", "info", "warning", "error"],
        default="info",
        help="log level (default: %(default)s; --verbose means debug)",
    )
    p.add_argument(
        "--engine-image",
        action="append",
        default=[],
        metavar="ENGINE[:VENDOR]=IMAGE",
        help="replace a default engine image, e.g. vllm=mirror.local/vllm/vllm-openai:v{version} "
        "or sglang:amd=...; {version} is the planned engine version; vendor nvidia (default) "
        "or amd (repeatable; table: tokenfleet.engines.images)",
    )
    p.add_argument(
        "--gpu-catalog",
        default=None,
        metavar="FILE",
        help="YAML overlay of the GPU catalog: gpus: {<id>: {pricePerHour: ..., ...}} "
        "(tokenfleet.capacity.overlay)",
    )


def load_settings(args: Any) -> tuple[Any, list[str]]:
    """(engine image table, overlaid GPU ids) from the flags; PlanError on bad input."""
    from tokenfleet.engines.images import with_overrides

    images = with_overrides(args.engine_image)
    changed: list[str] = []
    if args.gpu_catalog:
        import yaml

        from tokenfleet.capacity.errors import PlanError
        from tokenfleet.capacity.overlay import apply_overlay

        try:
            with open(args.gpu_catalog) as f:
                data = yaml.safe_load(f)
        except (OSError, yaml.YAMLError) as error:
            raise PlanError(
                "--gpu-catalog", args.gpu_catalog, f"cannot be read: {error}".splitlines()[0],
                "give a readable YAML file",
            ) from None  # fmt: skip
        changed = apply_overlay(data)
    return images, changed


def run(args: Any) -> int:
    if args.prometheus_url and not args.prometheus_url.startswith(("http://", "https://")):
        print(
            f"error: --prometheus-url {args.prometheus_url!r}: not an http(s) URL; "
            "use e.g. http://prometheus-operated.monitoring:9090",
            file=sys.stderr,
        )
        return 2
    import kopf

    from tokenfleet import render
    from tokenfleet.capacity.errors import PlanError
    from tokenfleet.controller.handlers import Credentials, Options, build_registry
    from tokenfleet.controller.kube import KubeClient
    from tokenfleet.controller.metrics import Metrics
    from tokenfleet.controller.reconcile import Pipeline, Reconciler

    try:
        images, overlaid = load_settings(args)
    except PlanError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    debug = args.verbose or args.log_level == "debug"
    kopf.configure(debug=debug, verbose=debug)
    if args.log_level in ("warning", "error"):
        import logging

        logging.getLogger().setLevel(args.log_level.upper())
    if overlaid:
        print(f"GPU catalog overlay: {', '.join(overlaid)}", file=sys.stderr)
    metrics = Metrics()
    if args.metrics_port:
        try:
            metrics.serve(args.metrics_port)
        except OSError as error:
            print(
                f"error: --metrics-port {args.metrics_port}: {error.strerror}; "
                "pick a free port or pass 0 to disable",
                file=sys.stderr,
            )
            return 2
    credentials = Credentials()
    pipeline = Pipeline.default()
    pipeline.render = functools.partial(render.all, images=images)
    reconciler = Reconciler(KubeClient(credentials.current), metrics, pipeline)
    if not args.time_scale > 0:
        print(
            f"error: --time-scale {args.time_scale}: must be > 0 (1 = real time)", file=sys.stderr
        )
        return 2
    options = Options(
        resync_seconds=args.resync_seconds,
        prometheus_url=args.prometheus_url,
        metrics_window_seconds=args.metrics_window_seconds,
        time_scale=args.time_scale,
    )
    registry = build_registry(reconciler, credentials, options)
    kopf.run(
        registry=registry,
        clusterwide=not args.namespace,
        namespaces=args.namespace,
        standalone=args.standalone,
        # A named peering is mandatory in kopf: the operator waits for the KopfPeering CRD
        # (installed by the chart) rather than risk two replicas acting at once.
        peering_name=None if args.standalone else args.peering,
        priority=args.priority if args.priority is not None else random.randint(1, 2**30),
        liveness_endpoint=args.liveness or None,
    )
    return 0
