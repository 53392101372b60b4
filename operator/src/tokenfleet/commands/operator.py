"""`tokenfleet operator`: run the kopf operator that reconciles LLMServices into workloads."""

from __future__ import annotations

import argparse
import random
import re
import sys
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    # kopf.run's peer id is a NewType kopf does not export; the string is what kopf makes.
    from kopf._core.engines.peering import Identity

# A ClusterRole's name (a path segment): at most 253 of these characters.
PICKER_ROLE = re.compile(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?")


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
        "--allow-image",
        action="append",
        default=[],
        metavar="PREFIX",
        help="only run engine images starting with PREFIX, e.g. 'vllm/vllm-openai:' "
        "(repeatable; default: any image)",
    )
    p.add_argument(
        "--allow-service-account",
        action="append",
        default=[],
        metavar="NAME",
        help="only let engine pods use this service account when spec.podTemplate sets "
        "one (repeatable; default: any)",
    )
    p.add_argument(
        "--metrics-address",
        default="0.0.0.0",
        metavar="ADDR",
        help="address the metrics server binds (default: %(default)s; 127.0.0.1 keeps "
        "it node-local)",
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
        "--allow-prometheus",
        action="append",
        default=None,
        metavar="URL",
        help="a Prometheus URL an LLMService may name in spec.autoscaling.prometheus.url "
        "(that URL or a path below it; repeatable; default: only --prometheus-url, so a "
        "tenant cannot point the operator at any in-cluster host)",
    )
    p.add_argument(
        "--picker-cluster-role",
        default="tokenfleet-endpoint-picker",
        metavar="NAME",
        help="the ClusterRole (installed by the chart) each LLMService's endpoint picker is "
        "bound to in its namespace; NAME-leader-election for several pickers "
        "(default: %(default)s)",
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
    add_placement_argument(p)


def add_placement_argument(p: argparse.ArgumentParser) -> None:
    from tokenfleet.capacity.placement import PROVIDERS

    p.add_argument(
        "--gpu-placement",
        choices=PROVIDERS,
        default="gfd",
        help="who labels the GPU nodes, i.e. which labels select a GPU type: gfd (NVIDIA GPU "
        "Feature Discovery, default), gke, eks (Karpenter), eks-auto (EKS Auto Mode), aks "
        "(VM size); tokenfleet.capacity.placement",
    )


def load_settings(args: Any) -> tuple[Any, list[str]]:
    """(engine image table, overlaid GPU ids) from the flags; UserError on bad input."""
    from tokenfleet.capacity.placement import configure
    from tokenfleet.engines.images import with_overrides

    images = with_overrides(args.engine_image)
    configure(args.gpu_placement)
    changed: list[str] = []
    if args.gpu_catalog:
        import yaml

        from tokenfleet.capacity.overlay import apply_overlay
        from tokenfleet.errors import UserError

        try:
            with open(args.gpu_catalog) as f:
                data = yaml.safe_load(f)
        except (OSError, yaml.YAMLError) as error:
            raise UserError(
                "--gpu-catalog", args.gpu_catalog, f"cannot be read: {error}".splitlines()[0],
                "give a readable YAML file",
            ) from None  # fmt: skip
        changed = apply_overlay(data)
    return images, changed


def preflight(args: Any) -> None:
    """What the operator needs before kopf starts, each refused in one line (exit 2):
    ports it can listen on and Kubernetes credentials to log in with. Without this, kopf
    prints a traceback per failed bind or login and retries forever while /healthz is 200."""
    import socket
    import urllib.parse

    from tokenfleet.commands.listen import bind_error, check_port
    from tokenfleet.errors import UserError

    check_port("--metrics-port", args.metrics_port, allow_zero=True)
    if args.metrics_port:
        try:  # prometheus_client serves on every interface
            socket.create_server(("0.0.0.0", args.metrics_port)).close()
        except OSError as error:
            raise bind_error(
                error, "0.0.0.0", args.metrics_port, "--metrics-port", "--metrics-port"
            ) from None
    if args.liveness:
        url = urllib.parse.urlsplit(args.liveness)
        try:
            port = url.port or 80
        except ValueError:  # urllib's "Port out of range 0-65535"
            raise UserError(
                "--liveness",
                args.liveness,
                "has no valid port",
                "use e.g. http://0.0.0.0:8080/healthz",
            ) from None
        if url.scheme != "http" or not url.path:
            raise UserError(
                "--liveness", args.liveness, "is not an http://HOST:PORT/PATH URL",
                "use e.g. http://0.0.0.0:8080/healthz, or '' to disable it",
            )  # fmt: skip
        host = url.hostname or "localhost"  # kopf's default for a URL without a host
        try:
            socket.create_server((host, port)).close()
        except OSError as error:
            raise bind_error(error, host, port, "--liveness", "--liveness", args.liveness) from None
    _check_credentials()


def _check_credentials() -> None:
    """The official client's own loaders (in-cluster first, then $KUBECONFIG or
    ~/.kube/config), as kopf's login uses them; no request is made."""
    import os

    from kubernetes import config

    from tokenfleet.errors import UserError

    try:
        config.load_incluster_config()
        return
    except config.ConfigException:
        pass
    try:
        config.load_kube_config()
    except (config.ConfigException, OSError) as error:
        where = os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise UserError(
            "KUBECONFIG",
            where,
            f"no Kubernetes credentials: not in a pod, and no usable kubeconfig ({error})",
            "point KUBECONFIG at a kubeconfig for the cluster, or run the operator in-cluster "
            "with a service account",
        ) from None


def run(args: Any) -> int:
    from tokenfleet.api.prometheus_url import UrlRefused
    from tokenfleet.controller.prometheus_source import Allowlist

    try:
        # Parsed as strictly as a tenant's URL (no userinfo, query, dot segments...).
        Allowlist.of([args.prometheus_url] if args.prometheus_url else [], "--prometheus-url")
        Allowlist.of(args.allow_prometheus or (), "--allow-prometheus")
    except UrlRefused as refused:
        print(f"error: {refused}", file=sys.stderr)
        return 2
    if not PICKER_ROLE.fullmatch(args.picker_cluster_role):
        print(
            f"error: --picker-cluster-role {args.picker_cluster_role!r}: not a ClusterRole "
            "name; use the chart's, e.g. tokenfleet-endpoint-picker",
            file=sys.stderr,
        )
        return 2
    import kopf

    from tokenfleet.controller.handlers import Credentials, Options, build_registry
    from tokenfleet.controller.kube import KubeClient
    from tokenfleet.controller.leadership import Leadership, own_identity
    from tokenfleet.controller.metrics import Metrics
    from tokenfleet.controller.peering import watch_peering
    from tokenfleet.controller.reconcile import Pipeline, Policy, Reconciler
    from tokenfleet.errors import UserError

    try:
        images, overlaid = load_settings(args)
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    preflight(args)
    import logging

    debug = args.verbose or args.log_level == "debug"
    kopf.configure(debug=debug, verbose=debug)
    if args.log_level in ("warning", "error"):
        logging.getLogger().setLevel(args.log_level.upper())
    if not debug:
        # httpx logs every request at INFO: at 1,000 LLMServices, tens of thousands of lines
        # per autoscaling interval, and the operator's time spent writing them.
        logging.getLogger("httpx").setLevel(logging.WARNING)
    if overlaid:
        print(f"GPU catalog overlay: {', '.join(overlaid)}", file=sys.stderr)
    metrics = Metrics()
    if args.metrics_port:
        try:
            metrics.serve(args.metrics_port, args.metrics_address)
        except OSError as error:
            print(
                f"error: --metrics-port {args.metrics_port}: {error.strerror}; "
                "pick a free port or pass 0 to disable",
                file=sys.stderr,
            )
            return 2
    credentials = Credentials()
    pipeline = Pipeline(images=images, picker_role=args.picker_cluster_role)
    policy = Policy(tuple(args.allow_image), tuple(args.allow_service_account))
    reconciler = Reconciler(KubeClient(credentials.current), metrics, pipeline, policy=policy)
    if not args.time_scale > 0:
        print(
            f"error: --time-scale {args.time_scale}: must be > 0 (1 = real time)", file=sys.stderr
        )
        return 2
    options = Options(
        resync_seconds=args.resync_seconds,
        prometheus_url=args.prometheus_url,
        allowed_prometheus=None if args.allow_prometheus is None else tuple(args.allow_prometheus),
        metrics_window_seconds=args.metrics_window_seconds,
        time_scale=args.time_scale,
        namespaces=tuple(args.namespace or ()),
    )
    priority = args.priority if args.priority is not None else random.randint(1, 2**30)
    identity = own_identity()
    leadership = None
    if not args.standalone:
        # The same identity and priority as kopf's, so both judge the peering alike.
        leadership = Leadership(
            reconciler.kube,
            peering=args.peering,
            identity=identity,
            priority=priority,
            clusterwide=not args.namespace,
            namespaces=tuple(args.namespace or ()),
        )
    registry = build_registry(reconciler, credentials, options, leadership=leadership)
    if not args.standalone:
        watch_peering(registry, reconciler.kube, args.peering, clusterwide=not args.namespace)

    @kopf.on.probe(registry=registry, id="kubernetes")
    def logged_in(**_: Any) -> str:
        # /healthz answers 500 while the operator has no working login, instead of 200.
        if credentials.info is None:
            raise kopf.PermanentError("not logged in to Kubernetes")
        return "logged in"

    kopf.run(
        registry=registry,
        clusterwide=not args.namespace,
        namespaces=args.namespace,
        standalone=args.standalone,
        # A named peering is mandatory in kopf: the operator waits for the KopfPeering CRD
        # (installed by the chart) rather than risk two replicas acting at once.
        peering_name=None if args.standalone else args.peering,
        priority=priority,
        identity=cast("Identity", identity),
        liveness_endpoint=args.liveness or None,
    )
    return 0
