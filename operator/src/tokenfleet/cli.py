"""`tokenfleet` command line: a thin dispatcher over tokenfleet.commands.*.

Each command module exposes `add_arguments(parser)` and `run(args) -> int` and imports its
heavy dependencies (kopf, kubernetes, the simulator) inside run(), so `tokenfleet plan`
starts fast. Errors a user can fix are printed as one line and exit 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# name -> (module under tokenfleet.commands, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "plan": ("plan", "size a vLLM / SGLang deployment for a model on a GPU type"),
    "models": ("catalogs", "list the built-in model catalog"),
    "gpus": ("catalogs", "list the GPU catalog"),
    "calibrate": ("calibrate", "compare the capacity model with the engine logs it is fitted to"),
    "sim": ("sim", "run an OpenAI-compatible vLLM / SGLang simulator driven by the capacity model"),
    "crd": ("crd", "write the LLMService CRD generated from the API models (--check: verify)"),
    "operator": ("operator", "run the Kubernetes operator that reconciles LLMServices"),
    "bench": ("bench", "load an OpenAI-compatible server like `vllm bench serve`"),
    "render": ("render", "print the Kubernetes manifests the operator would apply for LLMServices"),
    "autoscale-sim": (
        "autoscale_sim",
        "replay a trace against a modelled fleet: our autoscaler vs KEDA, HPA, static, oracle",
    ),
    "demo": (
        "demo",
        "run the operator, Prometheus and simulated replicas locally under a load step",
    ),
}


def _version() -> str:
    """The installed distribution's version (what pip knows), else the source tree's."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tokenfleet")
    except PackageNotFoundError:
        from tokenfleet import __version__

        return __version__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tokenfleet",
        description="Size, run and autoscale LLM inference fleets on Kubernetes.",
    )
    from tokenfleet.scheduling import COMPILED

    build = "compiled" if COMPILED else "pure Python"
    parser.add_argument(
        "--version", action="version", version=f"tokenfleet {_version()} (scheduler core: {build})"
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        try:
            module = importlib.import_module(f"tokenfleet.commands.{module_name}")
            if module_name in TOOLING_COMMANDS:  # its flags may import the tooling too
                module.add_arguments(argparse.ArgumentParser(add_help=False), name)
        except ModuleNotFoundError as missing:
            if not _tooling_missing(missing):
                raise
            # The operator image leaves the tooling out: the command is there and says so,
            # whatever its arguments (no prefix character: every one is a plain word).
            stub = sub.add_parser(name, help=help_text, add_help=False, prefix_chars="\0")
            stub.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
            stub.set_defaults(_module=None, _missing=missing.name)
            continue
        command = sub.add_parser(name, help=help_text, description=help_text)
        module.add_arguments(command, name)
        command.set_defaults(_module=module)
    return parser


def _tooling_missing(error: ModuleNotFoundError) -> bool:
    """A module of the tooling (pyproject.toml's tooling-packages, its `tools` extra) that
    this install lacks, as in the operator image."""
    name = error.name or ""
    return name == "aiohttp" or name.startswith(TOOLING_PACKAGES)


# The commands of the tooling: the operator image's install lacks what they import.
TOOLING_COMMANDS = frozenset({"autoscale_sim", "bench", "calibrate", "demo", "sim"})

# pyproject.toml [tool.tokenfleet] tooling-packages (a unit test checks they agree).
TOOLING_PACKAGES = (
    "tokenfleet.autoscale.fleetsim",
    "tokenfleet.bench",
    "tokenfleet.calibration",
    "tokenfleet.localfleet",
    "tokenfleet.sim",
    "tokenfleet.testing",
)


# The options `tokenfleet` itself takes before a COMMAND; every other one belongs to a command.
TOP_LEVEL_OPTIONS = frozenset({"-h", "--help", "--version"})


def _check_top_level(parser: argparse.ArgumentParser, argv: Sequence[str]) -> None:
    """argparse checks the required COMMAND before unknown options, so `tokenfleet --bogus`
    would only say that COMMAND is missing: name the option, and where options go."""
    for arg in argv:
        if not arg.startswith("-"):
            return  # the command: what follows is its parser's to judge
        if arg.split("=", 1)[0] not in TOP_LEVEL_OPTIONS:
            parser.error(
                f"unrecognized option {arg}: options go after a command, e.g. "
                f"tokenfleet plan --help (commands: {', '.join(COMMANDS)})"
            )


def main(argv: Sequence[str] | None = None) -> int:
    from tokenfleet.errors import UserError

    parser = build_parser()
    _check_top_level(parser, sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    try:
        if args._module is None:
            raise ModuleNotFoundError(name=args._missing)
        code = int(args._module.run(args) or 0)
        sys.stdout.flush()  # inside the try: a closed pipe is seen here, not at exit
        return code
    except UserError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as missing:
        if not _tooling_missing(missing):
            raise
        print(
            f"error: tokenfleet {args.command}: {missing.name} is not in this install (the "
            "operator image carries the operator alone); pip install 'tokenfleet[tools]'",
            file=sys.stderr,
        )
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`tokenfleet plan ... | head -1`): what it wanted was written.
        # Point stdout at /dev/null so the interpreter's last flush does not raise again.
        _silence_stdout()
        return 0


def _silence_stdout() -> None:
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout already closed, or not a file (a test's capture)
        pass
    finally:
        os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
