"""`tokenfleet render -f llmservice.yaml`: print the manifests the operator would apply.

Each file may hold several YAML documents; LLMServices are planned and rendered, and
ConfigMaps in any of the files resolve spec.model.configMapRef the way the operator reads
them from the cluster. Other kinds are skipped. ownerReferences are not printed: the
operator adds them with the LLMService's uid, which only the cluster knows.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tokenfleet.errors import UserError

if TYPE_CHECKING:  # the CLI imports every command module: pydantic models load on use
    from tokenfleet.api import LLMService
    from tokenfleet.capacity.types import Plan


def add_arguments(p: argparse.ArgumentParser, name: str) -> None:
    p.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        metavar="FILE",
        help="LLMService YAML (repeatable; '-' reads stdin)",
    )
    p.add_argument("-n", "--namespace", help="namespace for objects without one (default: default)")
    p.add_argument(
        "--no-monitoring",
        action="store_true",
        help="render as for a cluster without the Prometheus Operator (no PodMonitor)",
    )
    p.add_argument(
        "--no-lws",
        action="store_true",
        help="render as for a cluster without LeaderWorkerSet (multi-node plans fail)",
    )
    from tokenfleet.commands.operator import add_placement_argument

    add_placement_argument(p)


@dataclass(frozen=True)
class Rendered:
    source: str
    service: LLMService
    plan: Plan
    manifests: list[dict[str, Any]]


class FileError(UserError):
    """A UserError (a PlanError among them) prefixed with the file it came from."""

    def __init__(self, source: str, error: UserError) -> None:
        super().__init__(error.field, error.value, error.problem, error.fix)
        self.args = (f"{source}: {error}",)

    def __str__(self) -> str:
        return str(self.args[0])


def load_documents(source: str) -> list[Any]:
    import yaml

    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text()
    except OSError as e:
        problem = e.strerror or "cannot read"
        raise UserError("--filename", source, problem, "check the path") from None
    except UnicodeDecodeError:
        raise UserError(
            "--filename", source, "is not UTF-8 text (a binary file?)", "pass a YAML manifest"
        ) from None
    try:
        return [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "somewhere"
        problem = f"not valid YAML at {where} ({getattr(e, 'problem', None) or e})"
        raise UserError("--filename", source, problem, "fix the YAML syntax") from None


def _config_maps(documents: Iterable[Any], default_ns: str) -> dict[tuple[str, str], Any]:
    maps: dict[tuple[str, str], Any] = {}
    for doc in documents:
        if isinstance(doc, Mapping) and doc.get("kind") == "ConfigMap":
            meta = doc.get("metadata") or {}
            maps[(meta.get("namespace") or default_ns, str(meta.get("name")))] = doc
    return maps


def _model_config(
    service: LLMService, maps: Mapping[tuple[str, str], Any]
) -> dict[str, Any] | None:
    from tokenfleet.render.desired import config_map_ref, model_config

    ref = config_map_ref(service)
    if ref is None:
        return None
    name, key = ref
    cm = maps.get((service.namespace, name))
    field = "spec.model.configMapRef"
    if cm is None:
        raise UserError(
            f"{field}.name",
            name,
            f"no ConfigMap {service.namespace}/{name} in the given files",
            "pass the file that holds it with another -f",
        )
    raw = (cm.get("data") or {}).get(key)
    if raw is None:
        raise UserError(f"{field}.key", key, f"ConfigMap {name} has no such key", "fix the key")
    try:
        return model_config(raw)
    except ValueError as e:
        raise UserError(f"{field}.key", key, str(e), "put the model's config.json there") from None


def render_documents(
    documents: list[Any],
    source: str,
    *,
    namespace: str | None = None,
    monitoring_available: bool = True,
    lws_available: bool = True,
    extra_documents: Iterable[Any] = (),
) -> list[Rendered]:
    """Plan and render every LLMService among `documents`; ConfigMaps among them and among
    `extra_documents` resolve configMapRef. Errors are FileErrors naming source and field."""
    from tokenfleet import api
    from tokenfleet.render.desired import Cluster, StepFailed, desired

    default_ns = namespace or "default"
    maps = _config_maps([*documents, *extra_documents], default_ns)
    out: list[Rendered] = []
    for doc in documents:
        if not isinstance(doc, Mapping):
            problem = UserError(
                "document", type(doc).__name__, "not a mapping", "write Kubernetes objects"
            )
            raise FileError(source, problem)
        if doc.get("kind") != api.KIND:
            continue
        body = dict(doc)
        body["metadata"] = {"namespace": default_ns, **(doc.get("metadata") or {})}
        cluster = Cluster(monitoring=monitoring_available, lws=lws_available)
        try:
            service = api.parse_llmservice(body)
            state = desired(service, _model_config(service, maps), cluster)
        except StepFailed as failed:
            if not isinstance(failed.error, UserError):
                raise failed.error from None  # a bug, not the user's spec
            raise FileError(source, api.spec_error(failed.error)) from None
        except UserError as e:
            raise FileError(source, api.spec_error(e)) from None
        out.append(Rendered(source, service, state.plan, state.manifests))
    return out


def run(args: argparse.Namespace) -> int:
    import yaml

    from tokenfleet.capacity.placement import configure
    from tokenfleet.render import namespace_problem

    configure(args.gpu_placement)  # as the operator's --gpu-placement: for this process
    bad_namespace = None if args.namespace is None else namespace_problem(args.namespace)
    if bad_namespace is not None:  # before reading any file: the flag is the mistake
        raise UserError("--namespace", args.namespace, *bad_namespace)
    loaded = [(source, load_documents(source)) for source in args.filename]
    everything = [doc for _, docs in loaded for doc in docs]
    results: list[Rendered] = []
    for source, docs in loaded:
        results += render_documents(
            docs,
            source,
            namespace=args.namespace,
            monitoring_available=not args.no_monitoring,
            lws_available=not args.no_lws,
            extra_documents=everything,
        )
    if not results:
        print(f"error: no LLMService in {', '.join(args.filename)}", file=sys.stderr)
        return 2
    chunks = []
    for r in results:
        header = f"# {r.source}: LLMService {r.service.namespace}/{r.service.name}: {r.plan.reason}"
        body = yaml.safe_dump_all(r.manifests, sort_keys=False, width=100)
        chunks.append(f"{header}\n{body}")
    sys.stdout.write("---\n".join(chunks))
    return 0
